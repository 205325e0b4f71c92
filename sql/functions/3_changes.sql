-- The per-user change feed (SPEC §14): what records a change, and the commit step that numbers
-- it. Re-applied at every start (after the migrations); the triggers that call these functions are
-- created once, by sql/0020_changes.sql (a trigger's DDL locks its table). See docs/changes.md.
--
-- A change is noted as (user, kind, subject) in changes_pending while its transaction runs:
--   subscription, read   the subscriptions triggers below (every writer of that table: ingest's
--                        functions, the explicit calls, reads, rehoming, the vanishing of a row)
--   preferences, mutes   the user_preferences and user_mutes triggers
--   conversationLevel    the conversation_levels trigger (SPEC §18)
--   device               the devices trigger (a registration, a removal, a token moving to another
--                        user, invalid-device feedback)
--   messagePin, save, conversationPin
--                        Pins/SyncJobs.swift, which knows who sees a pin (the members with access)
-- At commit, herald_commit_changes reads each noted subject's final state and appends one item
-- per (user, kind, subject) to `changes`.

CREATE OR REPLACE FUNCTION herald_note_subscription() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO changes_pending (app, uid, kind, subject) VALUES (OLD.app, OLD.uid, 'subscription', OLD.thread_id);
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' OR (OLD.subscribed, OLD.source, OLD.reason, OLD.since, OLD.tracked)
                           IS DISTINCT FROM (NEW.subscribed, NEW.source, NEW.reason, NEW.since, NEW.tracked) THEN
        INSERT INTO changes_pending (app, uid, kind, subject) VALUES (NEW.app, NEW.uid, 'subscription', NEW.thread_id);
    END IF;
    IF (TG_OP = 'INSERT' AND NEW.read_at IS NOT NULL)
       OR (TG_OP = 'UPDATE' AND (OLD.read_at, OLD.read_id) IS DISTINCT FROM (NEW.read_at, NEW.read_id)) THEN
        INSERT INTO changes_pending (app, uid, kind, subject) VALUES (NEW.app, NEW.uid, 'read', NEW.thread_id);
    END IF;
    RETURN NULL;
END
$$;

-- A change of one of the user's own rows: TG_ARGV[0] is the kind ('preferences', 'mutes',
-- 'device'), TG_ARGV[1] the column naming the subject, if any ('id': the device). A row that moves
-- to another user or subject (a device's token registered under another user) is a change of both.
CREATE OR REPLACE FUNCTION herald_note_user_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    old_subject text;
    new_subject text;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        old_subject := CASE WHEN TG_NARGS > 1 THEN to_jsonb(OLD) ->> TG_ARGV[1] END;
        INSERT INTO changes_pending (app, uid, kind, subject) VALUES (OLD.app, OLD.uid, TG_ARGV[0], old_subject);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        new_subject := CASE WHEN TG_NARGS > 1 THEN to_jsonb(NEW) ->> TG_ARGV[1] END;
        IF TG_OP = 'INSERT' OR (OLD.app, OLD.uid, old_subject) IS DISTINCT FROM (NEW.app, NEW.uid, new_subject) THEN
            INSERT INTO changes_pending (app, uid, kind, subject) VALUES (NEW.app, NEW.uid, TG_ARGV[0], new_subject);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- Arms the commit step: the first statement of a transaction that notes a change writes one row
-- to changes_commits, whose deferred trigger is the commit step below (one call per
-- transaction, however many changes it noted). A transaction-local setting remembers that this
-- transaction is armed; a savepoint rolled back undoes the setting and the row together.
CREATE OR REPLACE FUNCTION herald_arm_changes() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('herald.changes_armed', true) IS DISTINCT FROM pg_current_xact_id()::text THEN
        PERFORM set_config('herald.changes_armed', pg_current_xact_id()::text, true);
        INSERT INTO changes_commits DEFAULT VALUES ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

-- The commit step: the deferred trigger of the transaction's changes_commits row, so it runs once,
-- at COMMIT, after every statement of the transaction.
--   1. Lock each user of the transaction's changes: the user's changes_users row, inserted when
--      missing and locked in one statement, in one global order (an INSERT … ON CONFLICT DO UPDATE
--      whose WHERE is false locks the existing row without writing it), held until the commit.
--      One user's changes are then numbered in the order their transactions commit. A row lock
--      takes no slot of PostgreSQL's shared lock table, so any number of users fits.
--   2. Read each noted subject's state as the transaction leaves it, and append one item per
--      (user, kind, subject), numbered from change_seq in the order they were noted.
--   3. NOTIFY herald_changes with the users ("app<US>uid" separated by <RS>, 30 to a message),
--      which wakes the feed's long polls on every instance.
CREATE OR REPLACE FUNCTION herald_commit_changes() RETURNS trigger
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    me xid8 := pg_current_xact_id();
    users text[];
    now_ms bigint;
BEGIN
    DELETE FROM changes_commits c WHERE c.xid = me;
    SELECT array_agg(u.app || chr(31) || u.uid ORDER BY u.app COLLATE "C", u.uid COLLATE "C") INTO users
      FROM (SELECT DISTINCT p.app, p.uid FROM changes_pending p WHERE p.xid = me) u;
    IF users IS NULL THEN
        RETURN NULL;
    END IF;
    -- the users just gathered, in their order (ids hold no control character, so <US> splits them)
    INSERT INTO changes_users AS cu (app, uid)
    SELECT split_part(u.key, chr(31), 1), split_part(u.key, chr(31), 2) FROM unnest(users) WITH ORDINALITY AS u(key, n)
     ORDER BY u.n
        ON CONFLICT (app, uid) DO UPDATE SET uid = excluded.uid WHERE false;
    now_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    WITH moved AS (
        DELETE FROM changes_pending p WHERE p.xid = me RETURNING p.app, p.uid, p.kind, p.subject, p.actor, p.ord
    ),
    noted AS MATERIALIZED (
        SELECT m.app, m.uid, m.kind, m.subject, m.actor, min(m.ord) AS ord
          FROM moved m GROUP BY m.app, m.uid, m.kind, m.subject, m.actor
    ),
    stated AS MATERIALIZED (
        SELECT n.*, st.*
          FROM noted n
          CROSS JOIN LATERAL (
              SELECT s.subscribed AS s_subscribed, s.since AS s_since, s.source AS s_source, s.reason AS s_reason, s.tracked AS s_tracked,
                     s.read_id AS s_read_id, s.read_count AS s_read_count, s.unread_mentions AS s_unread_mentions,
                     (SELECT t.reply_count FROM threads t WHERE t.app = n.app AND t.parent_id = n.subject) AS s_reply_count
                FROM (SELECT 1) one
                LEFT JOIN subscriptions s ON n.kind IN ('subscription', 'read')
                                         AND s.app = n.app AND s.uid = n.uid AND s.thread_id = n.subject
          ) st
    )
    INSERT INTO changes (app, uid, seq, at, kind, subject, conversation_id, flag, time, source, reason, actor,
                         read_up_to, unread_replies, unread_mentions, level)
    SELECT x.app, x.uid, nextval('change_seq'), now_ms, x.kind, x.subject,
           CASE WHEN x.kind = 'messagePin' THEN (SELECT coalesce(mp.conversation_id, msg.conversation_id)
                                                  FROM (SELECT 1) one
                                                  LEFT JOIN message_pins mp ON mp.app = x.app AND mp.message_id = x.subject
                                                  LEFT JOIN messages msg ON msg.app = x.app AND msg.id = x.subject) END,
           CASE x.kind WHEN 'subscription' THEN coalesce(x.s_subscribed, false)
                       WHEN 'device' THEN NOT EXISTS (SELECT 1 FROM devices d WHERE d.app = x.app AND d.uid = x.uid AND d.id = x.subject)
           END,
           CASE x.kind
               WHEN 'subscription' THEN x.s_since
               WHEN 'messagePin' THEN coalesce((SELECT CASE WHEN mp.pinned THEN mp.at ELSE 0 END FROM message_pins mp
                                                 WHERE mp.app = x.app AND mp.message_id = x.subject), 0)
               WHEN 'save' THEN coalesce((SELECT CASE WHEN ms.saved THEN ms.at ELSE 0 END FROM message_saves ms
                                           WHERE ms.app = x.app AND ms.uid = x.uid AND ms.message_id = x.subject), 0)
               WHEN 'conversationPin' THEN coalesce((SELECT CASE WHEN cp.pinned THEN cp.at ELSE 0 END FROM conversation_pins cp
                                                      WHERE cp.app = x.app AND cp.owner = x.actor AND cp.conversation_id = x.subject), 0)
           END,
           CASE WHEN x.kind = 'subscription' AND x.s_subscribed THEN x.s_source END,
           CASE WHEN x.kind = 'subscription' AND x.s_subscribed THEN x.s_reason END,
           CASE x.kind
               WHEN 'messagePin' THEN (SELECT mp.pinned_by FROM message_pins mp
                                        WHERE mp.app = x.app AND mp.message_id = x.subject AND mp.pinned)
               WHEN 'conversationPin' THEN x.actor
           END,
           CASE WHEN x.kind = 'read' THEN nullif(x.s_read_id, '') END,
           CASE WHEN x.kind = 'read' THEN CASE WHEN x.s_subscribed THEN greatest(0, x.s_reply_count - x.s_read_count) ELSE 0 END END,
           CASE WHEN x.kind = 'read' THEN coalesce(x.s_unread_mentions, 0) END,
           CASE x.kind
               WHEN 'subscription' THEN CASE WHEN x.s_subscribed AND x.s_tracked THEN 'track' ELSE 'notify' END
               WHEN 'conversationLevel' THEN (SELECT cl.level FROM conversation_levels cl
                                               WHERE cl.app = x.app AND cl.uid = x.uid AND cl.conversation_id = x.subject)
           END
      FROM (SELECT * FROM stated ORDER BY ord) x;
    PERFORM pg_notify('herald_changes', array_to_string(users[i:i + 29], chr(30)))
       FROM generate_series(1, cardinality(users), 30) AS i;
    RETURN NULL;
END
$$;

-- Jobs: a statement that adds jobs wakes the claims that wait (SPEC §9's waitSeconds) on every
-- instance (the payload: the app), none when it added none. JobQueue notifies by itself when a
-- job returns to the queue (a release, a retry, a requeue).
CREATE OR REPLACE FUNCTION herald_notify_jobs() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('herald_jobs', a.app) FROM (SELECT DISTINCT app FROM added) a;
    RETURN NULL;
END
$$;
