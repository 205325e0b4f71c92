-- Threads and thread subscriptions derived from the facts (SPEC §4, §5). Re-applied at every
-- start (after the migrations), so a rule changes by editing this file. PL/pgSQL with generic
-- plans, so that each statement is planned once per connection: a LANGUAGE sql function is
-- planned on every call, and PL/pgSQL's custom plans were too (planning these statements took
-- longer than running them). The statements reach rows through their keys with LATERAL …
-- OFFSET 0 and ctid, so a generic plan is the right plan whatever the statistics. And never
-- JIT-compiled (`SET jit = off`, as Herald's sessions set it): JIT compiles at every execution
-- of a plan whose estimate passes `jit_above_cost`, tens of milliseconds for statements of a few.

-- Is a user a member of the group now (SPEC §1)? Their latest join is later than their latest
-- removal (group_members keeps both; a tie is a removal). The one definition of "member now":
-- every statement calls it, those in Swift and those in these files. LANGUAGE sql and IMMUTABLE,
-- so the planner inlines it: a condition on it is the comparison itself, which indexes and
-- plans see as before.
CREATE OR REPLACE FUNCTION herald_member_now(p_joined_at bigint, p_removed_at bigint) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT p_joined_at > coalesce(p_removed_at, -1) $$;

-- Was uid a member of the group at time t? The latest evidence at or before t decides; a join
-- and a removal at the same time: the removal wins. (Created by sql/0002 as a LANGUAGE sql
-- function; defined here since issue 39. PL/pgSQL: a LANGUAGE sql function with these subqueries
-- is not inlined, and on Citus such a function's statements cannot be planned at all.)
CREATE OR REPLACE FUNCTION herald_member_at(p_app text, p_group text, p_uid text, p_at bigint) RETURNS boolean
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce(
        greatest(
            (SELECT max(e.at) FROM member_events e
              WHERE e.app = p_app AND e.group_id = p_group AND e.uid = p_uid AND e.joined AND e.at <= p_at),
            (SELECT max(m.sent_at) FROM messages m
              WHERE m.app = p_app AND m.group_id = p_group AND m.sender = p_uid AND m.created_seen AND m.sent_at <= p_at)
        ) > coalesce(
            (SELECT max(e.at) FROM member_events e
              WHERE e.app = p_app AND e.group_id = p_group AND e.uid = p_uid AND NOT e.joined AND e.at <= p_at),
            -9223372036854775808),
        false);
END
$$;

-- Recomputes the thread rows of p_threads from the messages.
CREATE OR REPLACE FUNCTION herald_refresh_threads(p_app text, p_threads text[]) RETURNS void
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
BEGIN
    INSERT INTO threads AS t (app, parent_id, conversation_id, receiver_type, group_id, user_a, user_b, author,
                              parent_seen, parent_sent_at, parent_text, reply_count, last_reply_id,
                              last_reply_sender, last_reply_at, last_reply_text, deleted_at, updated_at)
    SELECT p_app, k.thread_id,
           coalesce(parent.conversation_id, any_reply.conversation_id),
           coalesce(parent.receiver_type, any_reply.receiver_type),
           coalesce(parent.group_id, any_reply.group_id),
           coalesce(parent.user_a, any_reply.user_a),
           coalesce(parent.user_b, any_reply.user_b),
           coalesce(parent.sender, (SELECT min(r.parent_sender) FROM messages r
                                     WHERE r.app = p_app AND r.parent_id = k.thread_id AND r.created_seen)),
           parent.id IS NOT NULL,
           parent.sent_at,
           parent.text,
           (SELECT count(*) FROM messages r
             WHERE r.app = p_app AND r.parent_id = k.thread_id AND r.created_seen AND r.deleted_at IS NULL),
           last.id, last.sender, last.sent_at, last.text,
           coalesce(deleted_parent.deleted_at, dg.deleted_at),
           herald_now_ms()
      FROM (SELECT DISTINCT unnest(p_threads) AS thread_id) k
      LEFT JOIN LATERAL (SELECT * FROM messages m
                          WHERE m.app = p_app AND m.id = k.thread_id AND m.created_seen AND m.parent_id IS NULL
                         OFFSET 0) parent ON true
      LEFT JOIN LATERAL (SELECT m.deleted_at FROM messages m
                          WHERE m.app = p_app AND m.id = k.thread_id AND m.deleted_at IS NOT NULL OFFSET 0) deleted_parent ON true
      LEFT JOIN LATERAL (SELECT r.conversation_id, r.receiver_type, r.group_id, r.user_a, r.user_b FROM messages r
                          WHERE r.app = p_app AND r.parent_id = k.thread_id AND r.created_seen LIMIT 1) any_reply ON true
      LEFT JOIN LATERAL (SELECT r.id, r.sender, r.sent_at, r.text FROM messages r
                          WHERE r.app = p_app AND r.parent_id = k.thread_id AND r.created_seen AND r.deleted_at IS NULL
                          ORDER BY r.sent_at DESC, r.id COLLATE "C" DESC LIMIT 1) last ON true
      LEFT JOIN LATERAL (SELECT d.deleted_at FROM deleted_groups d
                          WHERE d.app = p_app AND d.group_id = coalesce(parent.group_id, any_reply.group_id)) dg ON true
     WHERE parent.id IS NOT NULL OR any_reply.conversation_id IS NOT NULL
    ON CONFLICT (app, parent_id) DO UPDATE SET
        conversation_id = EXCLUDED.conversation_id, receiver_type = EXCLUDED.receiver_type,
        group_id = EXCLUDED.group_id, user_a = EXCLUDED.user_a, user_b = EXCLUDED.user_b,
        author = EXCLUDED.author, parent_seen = EXCLUDED.parent_seen, parent_sent_at = EXCLUDED.parent_sent_at,
        parent_text = EXCLUDED.parent_text, reply_count = EXCLUDED.reply_count,
        last_reply_id = EXCLUDED.last_reply_id, last_reply_sender = EXCLUDED.last_reply_sender,
        last_reply_at = EXCLUDED.last_reply_at, last_reply_text = EXCLUDED.last_reply_text,
        deleted_at = EXCLUDED.deleted_at, updated_at = EXCLUDED.updated_at
    WHERE (t.conversation_id, t.author, t.parent_seen, t.parent_sent_at, t.parent_text, t.reply_count,
           t.last_reply_id, t.last_reply_at, t.last_reply_text, t.deleted_at)
          IS DISTINCT FROM
          (EXCLUDED.conversation_id, EXCLUDED.author, EXCLUDED.parent_seen, EXCLUDED.parent_sent_at,
           EXCLUDED.parent_text, EXCLUDED.reply_count, EXCLUDED.last_reply_id, EXCLUDED.last_reply_at,
           EXCLUDED.last_reply_text, EXCLUDED.deleted_at);
END
$$;

-- Recomputes the subscriptions of the (uid, thread) keys from the facts (SPEC §5.1):
--   triggers: the user's own replies ('reply'), mentions that are new in their message version
--   while the user was a member ('mention'), and authorship of the parent ('started': at the
--   parent's time, or while it is unseen at the first reply whose parentSender names the user);
--   an explicit unsubscribe at U voids every trigger at or before U and every 'started' trigger;
--   an explicit subscribe after U subscribes.
--   subscribed = any trigger or explicit subscribe survives; since/reason = the earliest one.
-- Returns the keys whose row it wrote or removed (a key it left as it was is not returned).
DO $$
BEGIN
    -- it returned nothing before
    IF EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'herald_recompute_subscriptions' AND prorettype = 'void'::regtype) THEN
        DROP FUNCTION herald_recompute_subscriptions(text, text[], text[]);
    END IF;
END
$$;
CREATE OR REPLACE FUNCTION herald_recompute_subscriptions(p_app text, p_uids text[], p_threads text[])
    RETURNS TABLE (r_uid text, r_thread text)
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
BEGIN
    RETURN QUERY
    WITH keys AS MATERIALIZED (
        SELECT k.uid, k.thread_id, t.author, t.group_id, t.user_a, t.user_b, t.parent_seen, t.parent_sent_at,
               s.unsubscribed_at AS u, s.manual_at AS m
          FROM (SELECT DISTINCT uid, thread_id FROM unnest(p_uids, p_threads) AS k(uid, thread_id) WHERE uid IS NOT NULL) k
          -- LATERAL ... OFFSET 0: each key is looked up through the indexes, whatever the planner
          -- believes of the tables' sizes (a fresh database has no statistics yet).
          CROSS JOIN LATERAL (SELECT * FROM threads t WHERE t.app = p_app AND t.parent_id = k.thread_id OFFSET 0) t
          LEFT JOIN LATERAL (SELECT s.unsubscribed_at, s.manual_at FROM subscriptions s
                              WHERE s.app = p_app AND s.uid = k.uid AND s.thread_id = k.thread_id OFFSET 0) s ON true
    ),
    derived AS MATERIALIZED (
        -- the earliest trigger that no unsubscribe voids: each kind's earliest is one index probe
        SELECT k.uid, k.thread_id, k.u, k.m, x.at AS first_at, x.reason
          FROM keys k
          LEFT JOIN LATERAL (
              SELECT * FROM (
                  (SELECT r.sent_at AS at, 'reply' AS reason, 1 AS priority FROM messages r
                    WHERE r.app = p_app AND r.parent_id = k.thread_id AND r.sender = k.uid AND r.created_seen
                      AND r.sent_at > coalesce(k.u, -9223372036854775808)
                    ORDER BY r.sent_at LIMIT 1)
                  UNION ALL
                  (SELECT mn.at, 'mention', 2 FROM mentions mn
                    WHERE mn.app = p_app AND mn.thread_id = k.thread_id AND mn.uid = k.uid
                      AND mn.at > coalesce(k.u, -9223372036854775808)
                      AND k.uid IS DISTINCT FROM (SELECT m.sender FROM messages m WHERE m.app = p_app AND m.id = mn.message_id)
                      -- new in this version: not among the mentions in force just before it
                      AND NOT coalesce((SELECT k.uid = ANY (v.mentions) FROM message_versions v
                                         WHERE v.app = p_app AND v.message_id = mn.message_id AND v.at < mn.at
                                           AND v.mentions IS NOT NULL
                                         ORDER BY v.at DESC LIMIT 1), false)
                      AND CASE WHEN k.group_id IS NOT NULL THEN herald_member_at(p_app, k.group_id, k.uid, mn.at)
                               ELSE k.uid IN (k.user_a, k.user_b) END
                    ORDER BY mn.at LIMIT 1)
                  UNION ALL
                  -- the parent's author: never after an explicit unsubscribe; at the parent's time,
                  -- else at the first reply that names them (SPEC §5.1.2: a reply knows the author
                  -- from the parent's message.created or from its own parentSender)
                  (SELECT st.at, 'started', 3
                     FROM (SELECT CASE WHEN k.parent_seen THEN k.parent_sent_at
                                       ELSE (SELECT min(r.sent_at) FROM messages r
                                              WHERE r.app = p_app AND r.parent_id = k.thread_id AND r.created_seen
                                                AND r.parent_sender = k.uid) END AS at) st
                    WHERE k.u IS NULL AND k.author = k.uid AND st.at IS NOT NULL)
              ) candidates
              ORDER BY at, priority LIMIT 1
          ) x ON true
    ),
    -- a row whose every trigger fell away (a removal that arrived late) goes: as if never made
    vanished AS (
        DELETE FROM subscriptions s
         WHERE s.app = p_app
           AND (s.uid, s.thread_id) IN (SELECT d.uid, d.thread_id FROM derived d
                                         WHERE d.first_at IS NULL AND d.m IS NULL AND d.u IS NULL)
        RETURNING s.uid, s.thread_id
    ),
    written AS (
    INSERT INTO subscriptions AS s (app, uid, thread_id, subscribed, source, reason, since, unsubscribed_at, manual_at, updated_at)
    SELECT p_app, d.uid, d.thread_id,
           d.first_at IS NOT NULL OR d.m IS NOT NULL,
           CASE WHEN d.m IS NOT NULL THEN 'manual' WHEN d.first_at IS NOT NULL THEN 'auto' END,
           CASE WHEN d.m IS NOT NULL THEN 'manual' ELSE d.reason END,
           CASE WHEN d.first_at IS NULL AND d.m IS NULL THEN d.u ELSE least(d.first_at, d.m) END,
           d.u, d.m, herald_now_ms()
      FROM derived d
     WHERE d.first_at IS NOT NULL OR d.m IS NOT NULL OR d.u IS NOT NULL
    ON CONFLICT (app, uid, thread_id) DO UPDATE SET
        subscribed = EXCLUDED.subscribed, source = EXCLUDED.source, reason = EXCLUDED.reason,
        since = EXCLUDED.since, updated_at = EXCLUDED.updated_at
    WHERE (s.subscribed, s.source, s.reason, s.since) IS DISTINCT FROM
          (EXCLUDED.subscribed, EXCLUDED.source, EXCLUDED.reason, EXCLUDED.since)
    RETURNING s.uid, s.thread_id
    )
    SELECT v.uid, v.thread_id FROM vanished v
    UNION ALL
    SELECT w.uid, w.thread_id FROM written w;
END
$$;

-- Threads do not nest (SPEC §1). A reply whose parent was not yet known to be a reply was filed
-- under the parent's id; when that parent arrives (a reply itself, in p_to's thread), everything
-- filed under it moves to the root: its replies (with the root's author as their parent's), their
-- mentions, and the subscription rows, merged with a row the user has in the root (the later
-- explicit unsubscribe, the first explicit subscribe after it, the later read mark). The thread row of p_from goes.
-- Returns the users whose row in the root is recomputed (every row of the root: the moved replies
-- change its counts) and the time of the earliest moved reply, from which they are routed again.
CREATE OR REPLACE FUNCTION herald_rehome(p_app text, p_from text[], p_to text[], p_root_senders text[])
    RETURNS TABLE (r_uid text, r_thread text, r_at bigint) LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    first_at bigint;
    moved_users text[];
    r record;
    -- this round's values as scalars (Citus 13 crashed on an array element as a statement's value)
    v_from text;
    v_to text;
    v_root_sender text;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_from), 0) LOOP
        CONTINUE WHEN p_from[i] IS NULL OR p_to[i] IS NULL OR p_from[i] = p_to[i];
        v_from := p_from[i];
        v_to := p_to[i];
        v_root_sender := p_root_senders[i];
        WITH moved AS (
            UPDATE messages m SET parent_id = v_to, parent_sender = v_root_sender
             WHERE m.app = p_app AND m.parent_id = v_from
            RETURNING m.sent_at, m.sender
        )
        SELECT min(sent_at) FILTER (WHERE sender IS NOT NULL), coalesce(array_agg(sender) FILTER (WHERE sender IS NOT NULL), '{}')
          INTO first_at, moved_users FROM moved;
        WITH moved AS (
            UPDATE mentions mn SET thread_id = v_to
             WHERE mn.app = p_app AND mn.thread_id = v_from
            RETURNING mn.uid
        )
        SELECT moved_users || coalesce(array_agg(uid), '{}') INTO moved_users FROM moved;
        FOR r IN DELETE FROM subscriptions s WHERE s.app = p_app AND s.thread_id = v_from RETURNING s.* LOOP
            INSERT INTO subscriptions AS s (app, uid, thread_id, subscribed, source, reason, since, unsubscribed_at,
                                            manual_at, updated_at, conversation_id, read_at, read_id, mark_at, mark_id, tracked)
            VALUES (p_app, r.uid, v_to, r.subscribed, r.source, r.reason, r.since, r.unsubscribed_at,
                    r.manual_at, herald_now_ms(), r.conversation_id, r.read_at, r.read_id, r.mark_at, r.mark_id, r.tracked)
            ON CONFLICT (app, uid, thread_id) DO UPDATE SET
                -- track-only (SPEC §18) only when both rows were: the louder level wins
                tracked = s.tracked AND EXCLUDED.tracked,
                unsubscribed_at = greatest(s.unsubscribed_at, EXCLUDED.unsubscribed_at),
                -- the first explicit subscribe after the latest unsubscribe (a subscribe keeps its
                -- first time, as PUT does)
                -- (an expression, not a subquery over VALUES: Citus 13 crashed planning that here)
                manual_at = least(CASE WHEN s.manual_at > coalesce(greatest(s.unsubscribed_at, EXCLUDED.unsubscribed_at),
                                                                   -9223372036854775808) THEN s.manual_at END,
                                  CASE WHEN EXCLUDED.manual_at > coalesce(greatest(s.unsubscribed_at, EXCLUDED.unsubscribed_at),
                                                                          -9223372036854775808) THEN EXCLUDED.manual_at END),
                mark_at = CASE WHEN s.mark_at IS NULL OR (EXCLUDED.mark_at, EXCLUDED.mark_id) > (s.mark_at, s.mark_id)
                               THEN coalesce(EXCLUDED.mark_at, s.mark_at) ELSE s.mark_at END,
                mark_id = CASE WHEN s.mark_at IS NULL OR (EXCLUDED.mark_at, EXCLUDED.mark_id) > (s.mark_at, s.mark_id)
                               THEN coalesce(EXCLUDED.mark_id, s.mark_id) ELSE s.mark_id END,
                conversation_id = coalesce(s.conversation_id, EXCLUDED.conversation_id),
                updated_at = EXCLUDED.updated_at;
        END LOOP;
        DELETE FROM threads t WHERE t.app = p_app AND t.parent_id = v_from;
        DELETE FROM stale_threads st WHERE st.app = p_app AND st.thread_id = v_from;
        RETURN QUERY
            SELECT DISTINCT x.uid, v_to, first_at
              FROM (SELECT s.uid FROM subscriptions s WHERE s.app = p_app AND s.thread_id = v_to
                    UNION SELECT unnest(moved_users)) x;
    END LOOP;
END
$$;
