-- Ingest writes each subscriber row of a touched thread once per batch instead of twice.
--
-- Before, a batch ran herald_count_replies (unread counts of the other subscribers, ±1 per reply)
-- and then herald_refresh_thread_rows (activity and visibility of every subscriber): two UPDATEs
-- of the same rows, and as activity_at is in the inbox indexes neither is a HOT update, so every
-- row got two new versions and two entries in each of the table's indexes. W1 of `make bench`
-- measured these two statements at a third of a batch's database time.
--
-- herald_refresh_subscribers computes both in one statement. The result is the same: the counts
-- of new replies are added before those of deleted ones are taken away, and as a count plus new
-- replies is never negative, clamping once at the end equals clamping after each step.

CREATE FUNCTION herald_refresh_subscribers(p_app text, p_threads text[], p_new_replies text[], p_deleted_replies text[],
                                           p_uids text[], p_key_threads text[]) RETURNS void
    LANGUAGE sql AS $$
    WITH replies AS MATERIALIZED (
        SELECT r.id, r.parent_id, r.sender, r.sent_at, r.mentions_all, x.sign
          FROM (SELECT DISTINCT id, 1 AS sign FROM unnest(p_new_replies) AS id
                UNION
                SELECT DISTINCT id, -1 FROM unnest(p_deleted_replies) AS id) x
          CROSS JOIN LATERAL (SELECT * FROM messages r
                               WHERE r.app = p_app AND r.id = x.id AND r.parent_id IS NOT NULL AND r.created_seen
                                 AND (x.sign < 0 OR r.deleted_at IS NULL) OFFSET 0) r
    ),
    keys AS MATERIALIZED (SELECT DISTINCT uid, thread_id FROM unnest(p_uids, p_key_threads) AS k(uid, thread_id)),
    delta AS MATERIALIZED (
        SELECT s.uid, s.thread_id, sum(r.sign) AS n,
               coalesce(sum(r.sign) FILTER (WHERE r.mentions_all OR EXISTS (
                   SELECT 1 FROM mentions mn WHERE mn.app = p_app AND mn.message_id = r.id AND mn.uid = s.uid)), 0) AS m
          FROM replies r
          CROSS JOIN LATERAL (SELECT * FROM subscriptions s
                               WHERE s.app = p_app AND s.thread_id = r.parent_id AND s.subscribed OFFSET 0) s
         WHERE s.uid <> r.sender
           AND (r.sent_at, r.id COLLATE "C") > (coalesce(s.read_at, -9223372036854775808), coalesce(s.read_id, '') COLLATE "C")
           AND NOT EXISTS (SELECT 1 FROM keys k WHERE k.uid = s.uid AND k.thread_id = s.thread_id)
         GROUP BY s.uid, s.thread_id
    ),
    touched AS (
        SELECT DISTINCT thread_id FROM (SELECT unnest(p_threads) AS thread_id UNION ALL SELECT parent_id FROM replies) x
    ),
    target AS (
        SELECT s.uid, s.thread_id,
               CASE WHEN t.parent_id IS NULL THEN s.conversation_id ELSE t.conversation_id END AS conversation_id,
               CASE WHEN t.parent_id IS NULL THEN s.activity_at
                    ELSE coalesce(t.last_reply_at, t.parent_sent_at, s.since, 0) END AS activity_at,
               CASE WHEN t.parent_id IS NULL THEN s.visible
                    ELSE s.subscribed AND t.deleted_at IS NULL AND (t.reply_count > 0 OR s.source = 'manual')
                         AND CASE WHEN t.group_id IS NULL THEN s.uid IN (t.user_a, t.user_b)
                                  ELSE coalesce((SELECT g.joined_at > coalesce(g.removed_at, -1) FROM group_members g
                                                  WHERE g.app = p_app AND g.group_id = t.group_id AND g.uid = s.uid), false) END
               END AS visible,
               greatest(0, s.unread_replies + coalesce(d.n, 0)) AS unread_replies,
               greatest(0, s.unread_mentions + coalesce(d.m, 0)) AS unread_mentions
          FROM touched k
          LEFT JOIN LATERAL (SELECT * FROM threads t WHERE t.app = p_app AND t.parent_id = k.thread_id OFFSET 0) t ON true
          JOIN subscriptions s ON s.app = p_app AND s.thread_id = k.thread_id
          LEFT JOIN delta d ON d.uid = s.uid AND d.thread_id = s.thread_id
         WHERE t.parent_id IS NOT NULL OR d.uid IS NOT NULL
    )
    UPDATE subscriptions s SET conversation_id = x.conversation_id, activity_at = x.activity_at, visible = x.visible,
                               unread_replies = x.unread_replies, unread_mentions = x.unread_mentions
      FROM target x
     WHERE s.app = p_app AND s.uid = x.uid AND s.thread_id = x.thread_id
       AND (s.conversation_id IS DISTINCT FROM x.conversation_id OR s.activity_at IS DISTINCT FROM x.activity_at
            OR s.visible IS DISTINCT FROM x.visible OR s.unread_replies <> x.unread_replies
            OR s.unread_mentions <> x.unread_mentions)
$$;

CREATE OR REPLACE FUNCTION herald_apply(p_app text, p_key_uids text[], p_key_threads text[], p_threads text[], p_messages text[],
                                        p_evidence_groups text[], p_evidence_uids text[], p_new_replies text[],
                                        p_deleted_replies text[])
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
    IF cardinality(p_threads) > 0 OR cardinality(p_new_replies) > 0 OR cardinality(p_deleted_replies) > 0 THEN
        PERFORM herald_refresh_subscribers(p_app, p_threads, p_new_replies, p_deleted_replies, key_uids, key_threads);
    END IF;
    IF cardinality(p_evidence_groups) > 0 THEN
        PERFORM herald_refresh_access(p_app, p_evidence_groups, p_evidence_uids);
    END IF;
    PERFORM herald_refresh_inbox(p_app, key_uids, key_threads);
END
$$;
