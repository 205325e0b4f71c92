-- Derived inbox state of subscription rows (SPEC §6). Re-applied at every start (after the
-- migrations, after subscriptions.sql), so a change here is a change of this file, not a new
-- migration. PL/pgSQL, so that plans are cached per connection.
--
-- Per row:
--   read_at/read_id   the effective read position P: the latest of the explicit mark, the user's
--                     own latest reply, and where a mention subscription started
--   read_count        the thread's live replies at or before P; the unread replies are
--                     threads.reply_count - read_count (the user's own replies are all before P)
--   has_unread        read_count < reply_count, kept exact on transitions (indexed)
--   unread_mentions   unread replies that mention the user explicitly or by @all
--   activity_at       the sort key: last reply's sentAt, else the parent's, else the subscription
--                     time; refreshed in the background for threads in stale_threads
--   visible           subscribed, thread not deleted, access, and a reply or an explicit subscribe

-- SPEC §6: a subscription row shows in its user's inbox when it is subscribed, its thread is not
-- deleted (nor, through it, its group), the thread has replies or the user subscribed by hand,
-- and the user can still see the conversation (`p_access`, worked out by each caller: the same
-- CASE as Swift's `Visibility.access`). Every writer of subscriptions.visible calls it;
-- LANGUAGE sql and IMMUTABLE with each parameter used once, so the planner inlines it.
CREATE OR REPLACE FUNCTION herald_inbox_visible(p_subscribed boolean, p_thread_deleted_at bigint, p_reply_count bigint,
                                                p_source text, p_access boolean) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_subscribed AND p_thread_deleted_at IS NULL AND (p_reply_count > 0 OR p_source = 'manual') AND p_access $$;

-- Recomputes everything inbox-related of the (uid, thread) keys from the facts.
CREATE OR REPLACE FUNCTION herald_refresh_inbox(p_app text, p_uids text[], p_threads text[]) RETURNS void
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
BEGIN
    WITH keys AS MATERIALIZED (
        SELECT s.tid AS row, s.uid, s.thread_id, s.subscribed, s.source, s.reason, s.since, s.mark_at, s.mark_id,
               t.conversation_id, t.deleted_at, t.reply_count, t.last_reply_at, t.parent_sent_at,
               CASE WHEN t.group_id IS NULL THEN s.uid IN (t.user_a, t.user_b)
                    ELSE coalesce((SELECT herald_member_now(g.joined_at, g.removed_at) FROM group_members g
                                    WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = s.uid), false) END AS access
          FROM (SELECT DISTINCT uid, thread_id FROM unnest(p_uids, p_threads) AS k(uid, thread_id)) k
          CROSS JOIN LATERAL (SELECT s.ctid AS tid, * FROM subscriptions s
                               WHERE s.app = p_app AND s.uid = k.uid AND s.thread_id = k.thread_id OFFSET 0) s
          CROSS JOIN LATERAL (SELECT * FROM threads t WHERE t.app = p_app AND t.parent_id = k.thread_id OFFSET 0) t
    ),
    positions AS MATERIALIZED (
        SELECT k.*, p.at AS read_at, p.id AS read_id
          FROM keys k
          LEFT JOIN LATERAL (
              SELECT * FROM (
                  SELECT k.mark_at AS at, k.mark_id AS id WHERE k.mark_at IS NOT NULL
                  UNION ALL
                  (SELECT r.sent_at, r.id FROM messages r
                    WHERE r.app = p_app AND r.parent_id = k.thread_id AND r.sender = k.uid AND r.created_seen
                    ORDER BY r.sent_at DESC, r.id COLLATE "C" DESC LIMIT 1)
                  UNION ALL
                  -- mentioned: the mentioning reply and later ones are unread (for a mention added by
                  -- an edit, the reply's own time, not the edit's)
                  -- (each mention's message through its key, OFFSET 0: a join read the app's
                  -- every message by app alone in plans made on young tables)
                  SELECT coalesce((SELECT min(m.sent_at) FROM mentions mn
                                    CROSS JOIN LATERAL (SELECT m.sent_at FROM messages m
                                                         WHERE m.app = p_app AND m.id = mn.message_id OFFSET 0) m
                                    WHERE mn.app = p_app AND mn.thread_id = k.thread_id AND mn.uid = k.uid
                                      AND mn.at = k.since), k.since), ''
                   WHERE k.subscribed AND k.reason = 'mention'
              ) c ORDER BY at DESC, id COLLATE "C" DESC LIMIT 1
          ) p ON true
    ),
    counted AS MATERIALIZED (
        SELECT p.*, coalesce(c.after, 0) AS after, coalesce(c.others, 0) AS others, coalesce(c.mentions, 0) AS mentions
          FROM positions p
          LEFT JOIN LATERAL (
              SELECT count(*) AS after, count(*) FILTER (WHERE r.sender <> p.uid) AS others,
                     count(*) FILTER (WHERE r.sender <> p.uid AND r.mentions_all)
                     -- explicit mentions through the user's own mention rows, not a probe per reply
                     + (SELECT count(DISTINCT mr.id) FROM mentions mn
                         CROSS JOIN LATERAL (SELECT mr.id FROM messages mr
                                              WHERE mr.app = p_app AND mr.id = mn.message_id
                                                AND mr.parent_id = p.thread_id AND mr.created_seen AND mr.deleted_at IS NULL
                                                AND mr.sender <> p.uid AND NOT mr.mentions_all
                                                AND (mr.sent_at, mr.id COLLATE "C") > (coalesce(p.read_at, -9223372036854775808),
                                                                                       coalesce(p.read_id, '') COLLATE "C")
                                             OFFSET 0) mr
                         WHERE p.subscribed AND mn.app = p_app AND mn.thread_id = p.thread_id AND mn.uid = p.uid) AS mentions
                FROM messages r
               WHERE p.subscribed AND r.app = p_app AND r.parent_id = p.thread_id AND r.created_seen AND r.deleted_at IS NULL
                 AND (r.sent_at, r.id COLLATE "C") > (coalesce(p.read_at, -9223372036854775808), coalesce(p.read_id, '') COLLATE "C")
          ) c ON true
    )
    UPDATE subscriptions s SET
        conversation_id = p.conversation_id,
        read_at = p.read_at,
        read_id = p.read_id,
        read_count = p.reply_count - p.after,
        has_unread = p.others > 0,
        activity_at = coalesce(p.last_reply_at, p.parent_sent_at, p.since, 0),
        visible = herald_inbox_visible(p.subscribed, p.deleted_at, p.reply_count, p.source, p.access),
        unread_mentions = p.mentions
      FROM counted p
     WHERE s.app = p_app AND s.ctid = p.row
       AND (s.conversation_id, s.read_at, s.read_id, s.read_count, s.has_unread, s.activity_at, s.visible, s.unread_mentions)
           IS DISTINCT FROM
           (p.conversation_id, p.read_at, p.read_id, p.reply_count - p.after, p.others > 0,
            coalesce(p.last_reply_at, p.parent_sent_at, p.since, 0),
            herald_inbox_visible(p.subscribed, p.deleted_at, p.reply_count, p.source, p.access),
            p.mentions);
END
$$;

-- New replies, for every subscriber of their threads except the keys (recomputed in full
-- instead): a reply at or before the subscriber's read position is read (read_count + 1); one
-- after it by someone else makes the row unread, and counts as a mention when it is @all or
-- mentions the subscriber explicitly (the explicitly mentioned are keys, unless their mention
-- changed no subscription: see herald_apply).
-- Only rows where one of these changes are written: in order, a reply after everyone's read
-- position writes the rows that were wholly read, and no other.
CREATE OR REPLACE FUNCTION herald_count_new_replies(p_app text, p_replies text[], p_uids text[], p_threads text[])
    RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
BEGIN
    WITH replies AS MATERIALIZED (
        SELECT r.id, r.parent_id, r.sender, r.sent_at, r.mentions_all,
               -- the users the reply mentions explicitly (its created version's mention rows), as
               -- the keys of one object: a look-up is a search, not a scan of up to 1,000 uids
               (SELECT coalesce(jsonb_object_agg(mn.uid, true), '{}') FROM mentions mn
                 WHERE mn.app = p_app AND mn.message_id = r.id AND mn.at = r.sent_at) AS mentioned
          FROM (SELECT DISTINCT unnest(p_replies) AS id) x
          -- by its key alone inside (OFFSET 0), the rest outside: with `parent_id IS NOT NULL`
          -- inside, the partial index of replies qualified, and its statistics, gathered while it
          -- was empty, made it look empty: every reply of the app was read for each (W1)
          CROSS JOIN LATERAL (SELECT * FROM messages r WHERE r.app = p_app AND r.id = x.id OFFSET 0) r
         WHERE r.parent_id IS NOT NULL AND r.created_seen AND r.deleted_at IS NULL
    ),
    keys AS MATERIALIZED (SELECT DISTINCT uid, thread_id FROM unnest(p_uids, p_threads) AS k(uid, thread_id)),
    -- per thread, what any of its new replies could change: an @all, the users mentioned, and
    -- the earliest reply (a read mark at or past it may have read one of them)
    threads AS MATERIALIZED (
        SELECT x.parent_id, min(x.sent_at) AS first_at, bool_or(x.mentions_all) AS mentions_all,
               coalesce(jsonb_object_agg(mn.uid, true) FILTER (WHERE mn.uid IS NOT NULL), '{}') AS mentioned
          FROM replies x LEFT JOIN LATERAL jsonb_object_keys(x.mentioned) AS mn(uid) ON true
         GROUP BY x.parent_id
    ),
    -- the subscribers whose row a reply can change, one scan of each thread's subscribers
    -- (not one per reply: a round of eight replies to a 500-member thread compared 4,000 pairs
    -- to update a handful): not yet unread, mentioned, or read to a reply's time
    changing AS MATERIALIZED (
        SELECT s.* FROM threads th
         CROSS JOIN LATERAL (SELECT s.ctid AS tid, s.uid, s.thread_id, s.read_at, s.read_id, s.has_unread FROM subscriptions s
                              WHERE s.app = p_app AND s.thread_id = th.parent_id AND s.subscribed OFFSET 0) s
         WHERE NOT s.has_unread OR th.mentions_all OR th.mentioned ? s.uid OR s.read_at >= th.first_at
    ),
    delta AS MATERIALIZED (
        SELECT s.tid AS row,
               count(*) FILTER (WHERE NOT r.after) AS read,
               bool_or(r.after AND r.sender <> s.uid) AS unread,
               count(*) FILTER (WHERE r.after AND r.sender <> s.uid AND r.mentioning) AS mentions
          FROM changing s
          JOIN replies x ON x.parent_id = s.thread_id
          CROSS JOIN LATERAL (SELECT x.sender, x.mentions_all OR x.mentioned ? s.uid AS mentioning,
                                     (x.sent_at, x.id COLLATE "C") > (coalesce(s.read_at, -9223372036854775808),
                                                                       coalesce(s.read_id, '') COLLATE "C") AS after) r
         WHERE NOT EXISTS (SELECT 1 FROM keys k WHERE k.uid = s.uid AND k.thread_id = s.thread_id)
         GROUP BY s.tid, s.has_unread
        HAVING count(*) FILTER (WHERE NOT r.after) > 0 OR (bool_or(r.after AND r.sender <> s.uid) AND NOT s.has_unread)
            OR count(*) FILTER (WHERE r.after AND r.sender <> s.uid AND r.mentioning) > 0
    )
    -- through the rows' ctid (a Tid Scan in every plan: the rows cannot move, the thread is locked)
    UPDATE subscriptions s SET
        read_count = s.read_count + d.read,
        has_unread = s.has_unread OR d.unread,
        unread_mentions = s.unread_mentions + d.mentions
      FROM delta d
     WHERE s.app = p_app AND s.ctid = d.row;
END
$$;

-- After threads changed: visibility and conversation of every subscriber's row, written only
-- where they differ (a thread's first reply, a deleted thread). The sort key is left to the
-- background refresh (herald_apply lists the threads as stale).
CREATE OR REPLACE FUNCTION herald_refresh_visibility(p_app text, p_threads text[]) RETURNS void
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
BEGIN
    WITH k AS MATERIALIZED (
        SELECT t.* FROM (SELECT DISTINCT unnest(p_threads) AS thread_id) x
          CROSS JOIN LATERAL (SELECT * FROM threads t WHERE t.app = p_app AND t.parent_id = x.thread_id OFFSET 0) t
    )
    UPDATE subscriptions s SET
        conversation_id = t.conversation_id,
        visible = herald_inbox_visible(s.subscribed, t.deleted_at, t.reply_count, s.source,
                  CASE WHEN t.group_id IS NULL THEN s.uid IN (t.user_a, t.user_b)
                       ELSE coalesce((SELECT herald_member_now(g.joined_at, g.removed_at) FROM group_members g
                                       WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = s.uid), false) END)
      FROM k t
     WHERE s.app = p_app AND s.thread_id = t.parent_id
       AND (s.conversation_id IS DISTINCT FROM t.conversation_id
            OR s.visible IS DISTINCT FROM herald_inbox_visible(s.subscribed, t.deleted_at, t.reply_count, s.source,
                  CASE WHEN t.group_id IS NULL THEN s.uid IN (t.user_a, t.user_b)
                       ELSE coalesce((SELECT herald_member_now(g.joined_at, g.removed_at) FROM group_members g
                                       WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = s.uid), false) END));
END
$$;

-- After threads changed (new replies, deletions, deleted threads): activity and visibility of
-- their subscribers' rows, the next slice of at most p_limit rows of each thread (in uid order,
-- after the pass's cursor), and the threads' passes moved on (sql/0033_stale_thread_passes.sql):
-- a thread whose pass ended on the version it began with is no longer stale; one that changed
-- meanwhile starts a new pass. Each step sets the thread's `since` to now (InboxRefresher waits
-- from there for a busy thread). Called under the threads' locks, as ingest takes them.
-- (Counts are derived when read: sql/0010_derived_unread.sql.)
DROP FUNCTION IF EXISTS herald_refresh_thread_rows(text, text[]);
CREATE OR REPLACE FUNCTION herald_refresh_thread_rows(p_app text, p_threads text[], p_limit int) RETURNS void
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
DECLARE
    going text[]; going_after text[]; going_version text[]; again text[]; done text[];
BEGIN
    WITH k AS MATERIALIZED (
        -- each thread's rows through their keys (OFFSET 0: a generic plan read the app's every
        -- stale thread and filtered them)
        SELECT st.thread_id, st.refresh_after, st.refresh_version, t.version
          FROM (SELECT DISTINCT unnest(p_threads) AS id) x
          CROSS JOIN LATERAL (SELECT st.thread_id, st.refresh_after, st.refresh_version FROM stale_threads st
                               WHERE st.app = p_app AND st.thread_id = x.id OFFSET 0) st
          CROSS JOIN LATERAL (SELECT t.xmin::text AS version FROM threads t WHERE t.app = p_app AND t.parent_id = x.id OFFSET 0) t
    ), slice AS MATERIALIZED (
        -- one row more than a slice: whether the pass goes on; with what the new values need
        SELECT k.thread_id, x.*
          FROM k CROSS JOIN LATERAL (
               SELECT s.uid, s.since, s.subscribed, s.source, row_number() OVER (ORDER BY s.uid) AS n
                 FROM subscriptions s
                WHERE s.app = p_app AND s.thread_id = k.thread_id AND s.uid > coalesce(k.refresh_after, '')
                ORDER BY s.uid LIMIT p_limit + 1) x
    ), refreshed AS (
        UPDATE subscriptions s SET conversation_id = v.conversation_id, activity_at = v.activity_at, visible = v.visible
          FROM slice sl
          CROSS JOIN LATERAL (SELECT * FROM threads t WHERE t.app = p_app AND t.parent_id = sl.thread_id OFFSET 0) t
          -- the row's values as the thread has them now
          CROSS JOIN LATERAL (
              SELECT t.conversation_id,
                     coalesce(t.last_reply_at, t.parent_sent_at, sl.since, 0) AS activity_at,
                     herald_inbox_visible(sl.subscribed, t.deleted_at, t.reply_count, sl.source,
                         CASE WHEN t.group_id IS NULL THEN sl.uid IN (t.user_a, t.user_b)
                              ELSE coalesce((SELECT herald_member_now(g.joined_at, g.removed_at) FROM group_members g
                                              WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = sl.uid), false) END)
                     AS visible) v
         WHERE sl.n <= p_limit AND s.app = p_app AND s.thread_id = sl.thread_id AND s.uid = sl.uid
           AND (s.conversation_id, s.activity_at, s.visible) IS DISTINCT FROM (v.conversation_id, v.activity_at, v.visible)
        RETURNING 1
    ), progress AS (
        -- each thread's slice counted again through the index (a scan of the slices' rows for
        -- each thread compared every thread with every row: 3 million pairs a call of 500 threads)
        SELECT k.*, p.more, p.last,
               -- a pass that began with this slice, or ends on the version it began with
               k.refresh_after IS NULL OR k.refresh_version = k.version AS unchanged
          FROM k CROSS JOIN LATERAL (
               SELECT count(*) > p_limit AS more, max(x.uid) FILTER (WHERE x.n = p_limit) AS last
                 FROM (SELECT s.uid, row_number() OVER (ORDER BY s.uid) AS n FROM subscriptions s
                        WHERE s.app = p_app AND s.thread_id = k.thread_id AND s.uid > coalesce(k.refresh_after, '')
                        ORDER BY s.uid LIMIT p_limit + 1) x) p
    )
    SELECT coalesce(array_agg(thread_id) FILTER (WHERE more), '{}'),
           coalesce(array_agg(last) FILTER (WHERE more), '{}'),
           coalesce(array_agg(CASE WHEN refresh_after IS NULL THEN version ELSE refresh_version END) FILTER (WHERE more), '{}'),
           coalesce(array_agg(thread_id) FILTER (WHERE NOT more AND NOT unchanged), '{}'),
           coalesce(array_agg(thread_id) FILTER (WHERE NOT more AND unchanged), '{}')
      INTO going, going_after, going_version, again, done
      FROM progress;
    -- `since` moves to now with each step: a busy thread's next step waits for quiet or for the
    -- refresher's longest deferral from here (InboxRefresher)
    UPDATE stale_threads st SET refresh_after = x.after, refresh_version = x.version, since = herald_now_ms()
      FROM unnest(going, going_after, going_version) AS x(thread_id, after, version)
     WHERE st.app = p_app AND st.thread_id = x.thread_id;
    UPDATE stale_threads st SET refresh_after = NULL, refresh_version = NULL, since = herald_now_ms()
     WHERE st.app = p_app AND st.thread_id = ANY (again);
    -- done, and the threads without a row (nothing to refresh)
    DELETE FROM stale_threads st
     WHERE st.app = p_app AND st.thread_id = ANY (p_threads)
       AND (st.thread_id = ANY (done)
            OR NOT EXISTS (SELECT 1 FROM threads t WHERE t.app = p_app AND t.parent_id = st.thread_id));
END
$$;

-- After membership changed for (group, uid) pairs: visibility of those users' rows in those groups.
CREATE OR REPLACE FUNCTION herald_refresh_access(p_app text, p_groups text[], p_uids text[]) RETURNS void
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
BEGIN
    UPDATE subscriptions s SET
        visible = herald_inbox_visible(s.subscribed, t.deleted_at, t.reply_count, s.source,
                  coalesce((SELECT herald_member_now(g.joined_at, g.removed_at) FROM group_members g
                             WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = s.uid), false))
      FROM (SELECT DISTINCT g, u FROM unnest(p_groups, p_uids) AS x(g, u)) k
      CROSS JOIN LATERAL (SELECT * FROM threads t WHERE t.app = p_app AND t.group_id = k.g OFFSET 0) t
     WHERE s.app = p_app AND s.uid = k.u AND s.thread_id = t.parent_id;
END
$$;

-- New replies in threads that only gained them: count, last reply and (parent unseen) author
-- added to the thread row (no recount of the thread's replies). Returns the threads so updated.
DROP FUNCTION IF EXISTS herald_add_replies(text, text[], text[], text[], text[]);
CREATE OR REPLACE FUNCTION herald_add_replies(p_app text, p_threads text[], p_recount text[], p_new_replies text[])
    RETURNS text[] LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
DECLARE
    done text[];
BEGIN
    IF cardinality(p_new_replies) = 0 THEN
        RETURN '{}';
    END IF;
    WITH fresh AS MATERIALIZED (
        SELECT r.* FROM (SELECT DISTINCT unnest(p_new_replies) AS id) x
          -- (by its key alone inside: see herald_count_new_replies)
          CROSS JOIN LATERAL (SELECT * FROM messages r WHERE r.app = p_app AND r.id = x.id OFFSET 0) r
         WHERE r.parent_id IS NOT NULL AND r.created_seen
    ),
    -- each thread's new replies and the latest of them (its fields aggregated, not joined back:
    -- a join of the two sets was planned as every pair, 87,000 a round of W1)
    grown AS (
        SELECT f.parent_id AS thread_id, count(*) FILTER (WHERE f.deleted_at IS NULL) AS n, min(f.parent_sender) AS parent_sender,
               (array_agg(f.id ORDER BY f.sent_at DESC, f.id COLLATE "C" DESC) FILTER (WHERE f.deleted_at IS NULL))[1] AS last_id,
               (array_agg(f.sender ORDER BY f.sent_at DESC, f.id COLLATE "C" DESC) FILTER (WHERE f.deleted_at IS NULL))[1] AS last_sender,
               (array_agg(f.text ORDER BY f.sent_at DESC, f.id COLLATE "C" DESC) FILTER (WHERE f.deleted_at IS NULL))[1] AS last_text,
               (array_agg(f.sent_at ORDER BY f.sent_at DESC, f.id COLLATE "C" DESC) FILTER (WHERE f.deleted_at IS NULL))[1] AS last_at
          FROM fresh f
         WHERE f.parent_id = ANY (p_threads) AND f.parent_id <> ALL (p_recount)
         GROUP BY f.parent_id
    ),
    updated AS (
        UPDATE threads t SET
            reply_count = t.reply_count + g.n,
            -- while the parent is unseen the author is the least parentSender of the replies, as
            -- herald_refresh_threads has it (least() passes over nulls)
            author = CASE WHEN t.parent_seen THEN t.author ELSE least(t.author, g.parent_sender) END,
            last_reply_id = CASE WHEN g.last_id IS NOT NULL AND (t.last_reply_id IS NULL OR (g.last_at, g.last_id COLLATE "C") >
                                      (t.last_reply_at, t.last_reply_id COLLATE "C")) THEN g.last_id ELSE t.last_reply_id END,
            last_reply_sender = CASE WHEN g.last_id IS NOT NULL AND (t.last_reply_id IS NULL OR (g.last_at, g.last_id COLLATE "C") >
                                      (t.last_reply_at, t.last_reply_id COLLATE "C")) THEN g.last_sender ELSE t.last_reply_sender END,
            last_reply_text = CASE WHEN g.last_id IS NOT NULL AND (t.last_reply_id IS NULL OR (g.last_at, g.last_id COLLATE "C") >
                                      (t.last_reply_at, t.last_reply_id COLLATE "C")) THEN g.last_text ELSE t.last_reply_text END,
            last_reply_at = CASE WHEN g.last_id IS NOT NULL AND (t.last_reply_id IS NULL OR (g.last_at, g.last_id COLLATE "C") >
                                      (t.last_reply_at, t.last_reply_id COLLATE "C")) THEN g.last_at ELSE t.last_reply_at END,
            updated_at = herald_now_ms()
          FROM grown g
         WHERE t.app = p_app AND t.parent_id = g.thread_id
        RETURNING t.parent_id
    )
    SELECT coalesce(array_agg(parent_id), '{}') INTO done FROM updated;
    RETURN done;
END
$$;

-- Everything a batch of facts changes, in order, in one call:
--   threads → the touched (uid, thread) keys → their subscriptions → the other subscribers of
--   new replies (transitions only) → every subscriber of deleted replies' threads (in full) →
--   visibility of every subscriber, stale sort keys → access of users whose membership changed →
--   the keys' inbox rows in full.
--   p_recount: the touched threads whose rows are recomputed from their messages (a parent, an
--   edit, a deletion, a deleted group); the others only gained the replies of p_new_replies.
--   p_key_at: per key, the time of its trigger when the key comes from a message new in this
--   batch (its sender, or a user it mentions), else null.
--
-- The incremental path (issue 11). A key whose only triggers are new messages later than the
-- time its row is already subscribed from changes no subscription: the earliest surviving
-- trigger stays the earliest (SPEC §5.1). Such a key skips the recompute from the facts:
--   * a user mentioned by a new reply is counted with the thread's other subscribers
--     (herald_count_new_replies counts explicit mentions of new replies as it counts @all);
--   * the sender of the thread's newest reply has read everything (their own reply is their
--     read position), which is written directly.
-- Every other key (a new thread, an edit, a deletion, membership evidence, a first trigger, a
-- reply older than the thread's newest) is recomputed in full as before. The order-independence
-- and batching tests compare both paths against the rules.
DROP FUNCTION IF EXISTS herald_apply(text, text[], text[], text[], text[], text[], text[], text[], text[]);
DROP FUNCTION IF EXISTS herald_apply(text, text[], text[], text[], text[], text[], text[], text[], text[], text[]);
CREATE OR REPLACE FUNCTION herald_apply(p_app text, p_key_uids text[], p_key_threads text[], p_key_at bigint[],
                                        p_threads text[], p_messages text[],
                                        p_evidence_groups text[], p_evidence_uids text[], p_new_replies text[], p_deleted_replies text[],
                                        p_recount text[])
    RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
DECLARE
    key_uids text[];
    key_threads text[];
    maybe_uids text[];
    maybe_threads text[];
    sender_uids text[];
    sender_threads text[];
    grown text[] := '{}';
    recounted text[];
    visible text[];
BEGIN
    IF cardinality(p_threads) > 0 THEN
        -- Threads that only gained new replies take them incrementally; every other touched
        -- thread (its parent, an edit, a deletion, a thread seen for the first time) is
        -- recomputed from its messages.
        grown := herald_add_replies(p_app, p_threads, p_recount, p_new_replies);
        SELECT array_agg(x.id) INTO recounted FROM (SELECT DISTINCT unnest(p_threads) AS id) x WHERE x.id <> ALL (grown);
        IF recounted IS NOT NULL THEN
            PERFORM herald_refresh_threads(p_app, recounted);
        END IF;
    END IF;
    WITH news AS MATERIALIZED (
        -- the new replies' threads and senders, each through its key (OFFSET 0: a generic plan
        -- otherwise took the thread's replies by time and filtered them, a scan of the thread)
        SELECT r.parent_id, r.sender FROM unnest(p_new_replies) AS n(id)
         CROSS JOIN LATERAL (SELECT r.parent_id, r.sender FROM messages r WHERE r.app = p_app AND r.id = n.id OFFSET 0) r
    ),
    raw AS (
        SELECT uid, thread_id, at FROM unnest(p_key_uids, p_key_threads, p_key_at) AS d(uid, thread_id, at)
        UNION ALL
        -- the parent's author, for the 'started' trigger: only while they have no row (a row, even
        -- unsubscribed, stops it), when the parent itself is in the batch, or (parent unseen) when
        -- a new reply names them earlier than their subscription's start, which it moves back
        SELECT t.author, t.parent_id, NULL FROM unnest(p_threads) AS x(id)
          CROSS JOIN LATERAL (SELECT t.author, t.parent_id, t.parent_seen FROM threads t
                               WHERE t.app = p_app AND t.parent_id = x.id AND t.author IS NOT NULL OFFSET 0) t
         WHERE t.parent_id = ANY (p_messages)
            OR NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.app = p_app AND s.uid = t.author AND s.thread_id = t.parent_id)
            OR (NOT t.parent_seen
                AND EXISTS (SELECT 1 FROM subscriptions s
                              JOIN messages r ON r.app = p_app AND r.id = ANY (p_new_replies) AND r.parent_id = t.parent_id
                                             AND r.parent_sender = t.author AND r.sent_at < s.since
                             WHERE s.app = p_app AND s.uid = t.author AND s.thread_id = t.parent_id AND s.subscribed))
        UNION ALL
        SELECT mn.uid, mn.thread_id, NULL FROM unnest(p_messages) AS x(id)
          CROSS JOIN LATERAL (SELECT mn.uid, mn.thread_id FROM mentions mn WHERE mn.app = p_app AND mn.message_id = x.id OFFSET 0) mn
        UNION ALL
        SELECT mn.uid, mn.thread_id, NULL
          FROM (SELECT DISTINCT g, u FROM unnest(p_evidence_groups, p_evidence_uids) AS e(g, u)) e
          CROSS JOIN LATERAL (SELECT DISTINCT mn.uid, mn.thread_id FROM mentions mn
                               WHERE mn.app = p_app AND mn.uid = e.u AND mn.conversation_id = 'group_' || e.g) mn
        UNION ALL
        -- a deleted reply may have been counted anywhere: its thread's subscribers are recomputed
        SELECT s.uid, s.thread_id, NULL
          FROM (SELECT DISTINCT m.parent_id FROM unnest(p_deleted_replies) AS x(id)
                  CROSS JOIN LATERAL (SELECT m.parent_id FROM messages m WHERE m.app = p_app AND m.id = x.id OFFSET 0) m
                 WHERE m.parent_id IS NOT NULL) d
          CROSS JOIN LATERAL (SELECT s.uid, s.thread_id FROM subscriptions s
                               WHERE s.app = p_app AND s.thread_id = d.parent_id OFFSET 0) s
    ),
    k AS (
        SELECT uid, thread_id, CASE WHEN bool_and(at IS NOT NULL) THEN min(at) END AS at
          FROM raw WHERE uid IS NOT NULL GROUP BY uid, thread_id
    ),
    classified AS (
        SELECT k.uid, k.thread_id,
               CASE WHEN k.at IS NULL OR k.thread_id <> ALL (grown) OR k.thread_id = ANY (p_recount) THEN 'full'
                    -- a trigger that may change the subscription; when it changes nothing (a mention
                    -- of someone who was not a member then, or subscribed since earlier), a user who
                    -- sent none of the new replies is counted with the other subscribers
                    WHEN NOT coalesce(s.subscribed AND s.since < k.at, false) THEN
                        CASE WHEN NOT EXISTS (SELECT 1 FROM news r WHERE r.parent_id = k.thread_id AND r.sender = k.uid)
                             THEN 'maybe' ELSE 'full' END
                    -- not a sender of a new reply of the thread: counted with the other subscribers
                    WHEN NOT EXISTS (SELECT 1 FROM news r WHERE r.parent_id = k.thread_id AND r.sender = k.uid) THEN 'mentioned'
                    -- the sender of the thread's newest reply, read past any mark and past their own
                    -- replies (a deleted later one still is their read position, as in the refresh)
                    WHEN t.last_reply_sender = k.uid AND t.last_reply_id = ANY (p_new_replies)
                         AND (s.mark_at IS NULL OR (s.mark_at, s.mark_id COLLATE "C") < (t.last_reply_at, t.last_reply_id COLLATE "C"))
                         AND NOT EXISTS (SELECT 1 FROM messages r
                                          WHERE r.app = p_app AND r.parent_id = k.thread_id AND r.sender = k.uid AND r.created_seen
                                            AND (r.sent_at, r.id COLLATE "C") > (t.last_reply_at, t.last_reply_id COLLATE "C"))
                         THEN 'sender'
                    ELSE 'full' END AS path
          FROM k
          LEFT JOIN LATERAL (SELECT s.subscribed, s.since, s.mark_at, s.mark_id FROM subscriptions s
                              WHERE s.app = p_app AND s.uid = k.uid AND s.thread_id = k.thread_id OFFSET 0) s ON true
          LEFT JOIN LATERAL (SELECT t.last_reply_sender, t.last_reply_id, t.last_reply_at FROM threads t
                              WHERE t.app = p_app AND t.parent_id = k.thread_id OFFSET 0) t ON true
    )
    SELECT coalesce(array_agg(uid) FILTER (WHERE path = 'full'), '{}'),
           coalesce(array_agg(thread_id) FILTER (WHERE path = 'full'), '{}'),
           coalesce(array_agg(uid) FILTER (WHERE path = 'maybe'), '{}'),
           coalesce(array_agg(thread_id) FILTER (WHERE path = 'maybe'), '{}'),
           coalesce(array_agg(uid) FILTER (WHERE path = 'sender'), '{}'),
           coalesce(array_agg(thread_id) FILTER (WHERE path = 'sender'), '{}')
      INTO key_uids, key_threads, maybe_uids, maybe_threads, sender_uids, sender_threads
      FROM classified;
    IF cardinality(key_uids) + cardinality(maybe_uids) > 0 THEN
        -- the 'maybe' keys whose subscription this changed are recomputed in full like the others
        -- (a filter on the aggregate, not a join: a join with no 'maybe' key would not call it)
        SELECT key_uids || coalesce(array_agg(c.r_uid) FILTER (WHERE c.changed_maybe), '{}'),
               key_threads || coalesce(array_agg(c.r_thread) FILTER (WHERE c.changed_maybe), '{}')
          INTO key_uids, key_threads
          FROM (SELECT r.r_uid, r.r_thread,
                       EXISTS (SELECT 1 FROM unnest(maybe_uids, maybe_threads) AS m(uid, thread_id)
                                WHERE m.uid = r.r_uid AND m.thread_id = r.r_thread) AS changed_maybe
                  FROM herald_recompute_subscriptions(p_app, key_uids || maybe_uids, key_threads || maybe_threads) r) c;
    END IF;
    IF cardinality(p_new_replies) > 0 THEN
        -- the keys recomputed in full, and the senders written below, are not counted twice
        PERFORM herald_count_new_replies(p_app, p_new_replies, key_uids || sender_uids, key_threads || sender_threads);
    END IF;
    IF cardinality(p_threads) > 0 THEN
        INSERT INTO stale_threads (app, thread_id)
        SELECT p_app, x.id FROM (SELECT DISTINCT unnest(p_threads) AS id) x ORDER BY x.id COLLATE "C"
        ON CONFLICT DO NOTHING;
        -- visibility changes with a thread's first reply, its deletion, or a deleted reply (the
        -- count may fall to zero): threads with more replies than this batch brought are left alone
        -- (the threads first, then the call: a function called from a query over the app's
        -- tables would run inside that query, on Citus on the worker, and nest its own queries)
        -- (each thread through its key, OFFSET 0: the generic plan of `parent_id = ANY (…)` read
        -- the app's every thread by its app alone, 10 ms a round of W1)
        SELECT array_agg(t.parent_id) INTO visible
           FROM (SELECT DISTINCT unnest(p_threads) AS id) x
          CROSS JOIN LATERAL (SELECT t.parent_id, t.deleted_at, t.reply_count FROM threads t
                               WHERE t.app = p_app AND t.parent_id = x.id OFFSET 0) t
           LEFT JOIN (SELECT m.parent_id, count(*) AS c FROM (SELECT DISTINCT unnest(p_new_replies) AS id) r
                       CROSS JOIN LATERAL (SELECT m.parent_id FROM messages m WHERE m.app = p_app AND m.id = r.id OFFSET 0) m
                       GROUP BY m.parent_id) n ON n.parent_id = t.parent_id
          WHERE t.parent_id = ANY (p_recount) OR t.deleted_at IS NOT NULL OR t.reply_count <= coalesce(n.c, 0);
        IF visible IS NOT NULL THEN
            PERFORM herald_refresh_visibility(p_app, visible);
        END IF;
    END IF;
    IF cardinality(p_evidence_groups) > 0 THEN
        PERFORM herald_refresh_access(p_app, p_evidence_groups, p_evidence_uids);
    END IF;
    IF cardinality(key_uids) > 0 THEN
        PERFORM herald_refresh_inbox(p_app, key_uids, key_threads);
    END IF;
    IF cardinality(sender_uids) > 0 THEN
        -- their own reply is the thread's newest and their read position: every reply is read
        UPDATE subscriptions s SET
            read_at = t.last_reply_at, read_id = t.last_reply_id, read_count = t.reply_count,
            has_unread = false, unread_mentions = 0, activity_at = t.last_reply_at
          FROM unnest(sender_uids, sender_threads) AS k(uid, thread_id)
          -- each thread through its key (OFFSET 0: a join read the app's every thread)
          CROSS JOIN LATERAL (SELECT t.last_reply_at, t.last_reply_id, t.reply_count FROM threads t
                               WHERE t.app = p_app AND t.parent_id = k.thread_id OFFSET 0) t
         WHERE s.app = p_app AND s.uid = k.uid AND s.thread_id = k.thread_id
           AND (s.read_at, s.read_id, s.read_count, s.has_unread, s.unread_mentions, s.activity_at) IS DISTINCT FROM
               (t.last_reply_at, t.last_reply_id, t.reply_count, false, 0, t.last_reply_at);
    END IF;
END
$$;
