-- Thread inbox (SPEC §6): each subscription row carries what a page and the totals need, so an
-- inbox page is one range scan of the user's own index and totals one small partial-index scan.
--
--   read_at/read_id      the effective read position (derived): the latest of the explicit mark,
--                        the user's own latest reply, and where the current subscription started
--   mark_at/mark_id      the explicit read mark (a fact: POST …/read, and PUT subscription)
--   activity_at          last reply's sentAt, else the parent's, else the subscription time
--   visible              subscribed, thread not deleted, user has access, and the thread has a
--                        reply or was subscribed explicitly
--   unread_replies/_mentions   exact counts after the read position (kept up to date by ingest)

ALTER TABLE subscriptions
    ADD COLUMN conversation_id  text,
    ADD COLUMN read_at          bigint,
    ADD COLUMN read_id          text COLLATE "C",
    ADD COLUMN mark_at          bigint,
    ADD COLUMN mark_id          text COLLATE "C",
    ADD COLUMN activity_at      bigint  NOT NULL DEFAULT 0,
    ADD COLUMN visible          boolean NOT NULL DEFAULT false,
    ADD COLUMN unread_replies   integer NOT NULL DEFAULT 0,
    ADD COLUMN unread_mentions  integer NOT NULL DEFAULT 0;

-- Thread ids order in byte order (SPEC §6 tie-break): the inbox indexes use thread_id COLLATE "C".
CREATE INDEX subscriptions_inbox ON subscriptions (app, uid, activity_at, (thread_id COLLATE "C")) WHERE visible;
CREATE INDEX subscriptions_inbox_conversation ON subscriptions (app, uid, conversation_id, activity_at, (thread_id COLLATE "C"))
    WHERE visible;
CREATE INDEX subscriptions_inbox_unread ON subscriptions (app, uid, activity_at, (thread_id COLLATE "C"))
    INCLUDE (unread_mentions) WHERE visible AND unread_replies > 0;
CREATE INDEX subscriptions_by_thread_all ON subscriptions (app, thread_id);
CREATE INDEX threads_by_group ON threads (app, group_id) WHERE group_id IS NOT NULL;

-- Recomputes everything inbox-related of the (uid, thread) keys from the facts.
CREATE FUNCTION herald_refresh_inbox(p_app text, p_uids text[], p_threads text[]) RETURNS void
    LANGUAGE sql AS $$
    WITH keys AS MATERIALIZED (
        SELECT s.uid, s.thread_id, s.subscribed, s.source, s.reason, s.since, s.mark_at, s.mark_id,
               t.conversation_id, t.deleted_at, t.reply_count, t.last_reply_at, t.parent_sent_at,
               CASE WHEN t.group_id IS NULL THEN s.uid IN (t.user_a, t.user_b)
                    ELSE coalesce((SELECT g.joined_at > coalesce(g.removed_at, -1) FROM group_members g
                                    WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = s.uid), false) END AS access
          FROM (SELECT DISTINCT uid, thread_id FROM unnest(p_uids, p_threads) AS k(uid, thread_id)) k
          CROSS JOIN LATERAL (SELECT * FROM subscriptions s
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
                  SELECT coalesce((SELECT min(m.sent_at) FROM mentions mn
                                     JOIN messages m ON m.app = p_app AND m.id = mn.message_id
                                    WHERE mn.app = p_app AND mn.thread_id = k.thread_id AND mn.uid = k.uid
                                      AND mn.at = k.since), k.since), ''
                   WHERE k.subscribed AND k.reason = 'mention'
              ) c ORDER BY at DESC, id COLLATE "C" DESC LIMIT 1
          ) p ON true
    )
    UPDATE subscriptions s SET
        conversation_id = p.conversation_id,
        read_at = p.read_at,
        read_id = p.read_id,
        activity_at = coalesce(p.last_reply_at, p.parent_sent_at, p.since, 0),
        visible = p.subscribed AND p.deleted_at IS NULL AND p.access AND (p.reply_count > 0 OR p.source = 'manual'),
        unread_replies = coalesce(c.replies, 0),
        unread_mentions = coalesce(c.mentions, 0)
      FROM positions p
      LEFT JOIN LATERAL (
          SELECT count(*) AS replies,
                 count(*) FILTER (WHERE r.mentions_all OR EXISTS (
                     SELECT 1 FROM mentions mn WHERE mn.app = p_app AND mn.message_id = r.id AND mn.uid = p.uid)) AS mentions
            FROM messages r
           WHERE p.subscribed AND r.app = p_app AND r.parent_id = p.thread_id AND r.created_seen AND r.deleted_at IS NULL
             AND r.sender <> p.uid
             AND (r.sent_at, r.id COLLATE "C") > (coalesce(p.read_at, -9223372036854775808), coalesce(p.read_id, '') COLLATE "C")
      ) c ON true
     WHERE s.app = p_app AND s.uid = p.uid AND s.thread_id = p.thread_id
       AND (s.conversation_id, s.read_at, s.read_id, s.activity_at, s.visible, s.unread_replies, s.unread_mentions)
           IS DISTINCT FROM
           (p.conversation_id, p.read_at, p.read_id, coalesce(p.last_reply_at, p.parent_sent_at, p.since, 0),
            p.subscribed AND p.deleted_at IS NULL AND p.access AND (p.reply_count > 0 OR p.source = 'manual'),
            coalesce(c.replies, 0), coalesce(c.mentions, 0))
$$;

-- After threads changed (new replies, deletions, deleted threads): activity and visibility of
-- every subscriber's row. Counts are handled by herald_count_replies.
CREATE FUNCTION herald_refresh_thread_rows(p_app text, p_threads text[]) RETURNS void
    LANGUAGE sql AS $$
    UPDATE subscriptions s SET
        conversation_id = t.conversation_id,
        activity_at = coalesce(t.last_reply_at, t.parent_sent_at, s.since, 0),
        visible = s.subscribed AND t.deleted_at IS NULL AND (t.reply_count > 0 OR s.source = 'manual')
                  AND CASE WHEN t.group_id IS NULL THEN s.uid IN (t.user_a, t.user_b)
                           ELSE coalesce((SELECT g.joined_at > coalesce(g.removed_at, -1) FROM group_members g
                                           WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = s.uid), false) END
      FROM (SELECT DISTINCT unnest(p_threads) AS thread_id) k
      CROSS JOIN LATERAL (SELECT * FROM threads t WHERE t.app = p_app AND t.parent_id = k.thread_id OFFSET 0) t
     WHERE s.app = p_app AND s.thread_id = k.thread_id
       AND (s.conversation_id IS DISTINCT FROM t.conversation_id
            OR s.activity_at IS DISTINCT FROM coalesce(t.last_reply_at, t.parent_sent_at, s.since, 0)
            OR NOT s.visible IS NOT DISTINCT FROM (s.subscribed AND t.deleted_at IS NULL AND (t.reply_count > 0 OR s.source = 'manual')
                  AND CASE WHEN t.group_id IS NULL THEN s.uid IN (t.user_a, t.user_b)
                           ELSE coalesce((SELECT g.joined_at > coalesce(g.removed_at, -1) FROM group_members g
                                           WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = s.uid), false) END))
$$;

-- After membership changed for (group, uid) pairs: visibility of those users' rows in those groups.
CREATE FUNCTION herald_refresh_access(p_app text, p_groups text[], p_uids text[]) RETURNS void
    LANGUAGE sql AS $$
    UPDATE subscriptions s SET
        visible = s.subscribed AND t.deleted_at IS NULL AND (t.reply_count > 0 OR s.source = 'manual')
                  AND coalesce((SELECT g.joined_at > coalesce(g.removed_at, -1) FROM group_members g
                                 WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = s.uid), false)
      FROM (SELECT DISTINCT g, u FROM unnest(p_groups, p_uids) AS x(g, u)) k
      CROSS JOIN LATERAL (SELECT * FROM threads t WHERE t.app = p_app AND t.group_id = k.g OFFSET 0) t
     WHERE s.app = p_app AND s.uid = k.u AND s.thread_id = t.parent_id
$$;

-- Adds (p_sign = 1) or removes (p_sign = -1) replies to the unread counts of every subscriber
-- except the keys (recomputed in full instead): a reply counts when it is by someone else and
-- after the subscriber's read position.
CREATE FUNCTION herald_count_replies(p_app text, p_replies text[], p_sign integer, p_uids text[], p_threads text[])
    RETURNS void LANGUAGE sql AS $$
    WITH replies AS MATERIALIZED (
        SELECT r.id, r.parent_id, r.sender, r.sent_at, r.mentions_all
          FROM (SELECT DISTINCT unnest(p_replies) AS id) x
          CROSS JOIN LATERAL (SELECT * FROM messages r
                               WHERE r.app = p_app AND r.id = x.id AND r.parent_id IS NOT NULL AND r.created_seen
                                 AND (p_sign < 0 OR r.deleted_at IS NULL) OFFSET 0) r
    ),
    keys AS MATERIALIZED (SELECT DISTINCT uid, thread_id FROM unnest(p_uids, p_threads) AS k(uid, thread_id)),
    delta AS (
        SELECT s.uid, s.thread_id, count(*) AS n,
               count(*) FILTER (WHERE r.mentions_all OR EXISTS (
                   SELECT 1 FROM mentions mn WHERE mn.app = p_app AND mn.message_id = r.id AND mn.uid = s.uid)) AS m
          FROM replies r
          CROSS JOIN LATERAL (SELECT * FROM subscriptions s
                               WHERE s.app = p_app AND s.thread_id = r.parent_id AND s.subscribed OFFSET 0) s
         WHERE s.uid <> r.sender
           AND (r.sent_at, r.id COLLATE "C") > (coalesce(s.read_at, -9223372036854775808), coalesce(s.read_id, '') COLLATE "C")
           AND NOT EXISTS (SELECT 1 FROM keys k WHERE k.uid = s.uid AND k.thread_id = s.thread_id)
         GROUP BY s.uid, s.thread_id
    )
    UPDATE subscriptions s SET
        unread_replies = greatest(0, s.unread_replies + p_sign * d.n),
        unread_mentions = greatest(0, s.unread_mentions + p_sign * d.m)
      FROM delta d
     WHERE s.app = p_app AND s.uid = d.uid AND s.thread_id = d.thread_id
$$;

-- Everything a batch of facts changes, in order, in one call:
--   threads → the touched (uid, thread) keys → their subscriptions → unread counts of the other
--   subscribers (incremental) → activity and visibility of every subscriber → access of users
--   whose membership changed → the keys' inbox rows in full.
CREATE FUNCTION herald_apply(p_app text, p_key_uids text[], p_key_threads text[], p_threads text[], p_messages text[],
                             p_evidence_groups text[], p_evidence_uids text[], p_new_replies text[], p_deleted_replies text[])
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    key_uids text[];
    key_threads text[];
BEGIN
    IF cardinality(p_threads) > 0 THEN
        PERFORM herald_refresh_threads(p_app, p_threads);
    END IF;
    SELECT coalesce(array_agg(uid), '{}'), coalesce(array_agg(thread_id), '{}') INTO key_uids, key_threads
      FROM (
        SELECT uid, thread_id FROM unnest(p_key_uids, p_key_threads) AS d(uid, thread_id)
        UNION
        SELECT t.author, t.parent_id FROM unnest(p_threads) AS x(id)
          CROSS JOIN LATERAL (SELECT t.author, t.parent_id FROM threads t
                               WHERE t.app = p_app AND t.parent_id = x.id AND t.author IS NOT NULL OFFSET 0) t
        UNION
        SELECT mn.uid, mn.thread_id FROM unnest(p_messages) AS x(id)
          CROSS JOIN LATERAL (SELECT mn.uid, mn.thread_id FROM mentions mn WHERE mn.app = p_app AND mn.message_id = x.id OFFSET 0) mn
        UNION
        SELECT mn.uid, mn.thread_id
          FROM (SELECT DISTINCT g, u FROM unnest(p_evidence_groups, p_evidence_uids) AS e(g, u)) e
          CROSS JOIN LATERAL (SELECT DISTINCT mn.uid, mn.thread_id FROM mentions mn
                               WHERE mn.app = p_app AND mn.uid = e.u AND mn.conversation_id = 'group_' || e.g) mn
      ) k
     WHERE uid IS NOT NULL;
    PERFORM herald_recompute_subscriptions(p_app, key_uids, key_threads);
    IF cardinality(p_new_replies) > 0 THEN
        PERFORM herald_count_replies(p_app, p_new_replies, 1, key_uids, key_threads);
    END IF;
    IF cardinality(p_deleted_replies) > 0 THEN
        PERFORM herald_count_replies(p_app, p_deleted_replies, -1, key_uids, key_threads);
    END IF;
    IF cardinality(p_threads) > 0 THEN
        PERFORM herald_refresh_thread_rows(p_app, p_threads);
    END IF;
    IF cardinality(p_evidence_groups) > 0 THEN
        PERFORM herald_refresh_access(p_app, p_evidence_groups, p_evidence_uids);
    END IF;
    PERFORM herald_refresh_inbox(p_app, key_uids, key_threads);
END
$$;

-- Rows made before this migration get their inbox columns.
SELECT herald_refresh_inbox(app, array_agg(uid), array_agg(thread_id)) FROM subscriptions GROUP BY app;
