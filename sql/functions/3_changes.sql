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

-- Wakes the long polls waiting on every instance (NotificationListener): NOTIFY, sent at commit.
-- On Citus the Citus layout (sql/citus/layout.sql) makes it do nothing: these functions run on the
-- workers, where Citus commits with two-phase commit, which refuses a transaction that notified,
-- and no instance listens; there the instances look for changes themselves (docs/scaling.md).
CREATE OR REPLACE FUNCTION herald_notify(p_channel text, p_payload text) RETURNS void
    LANGUAGE sql AS $$ SELECT pg_notify(p_channel, p_payload) $$;

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

-- Arms the commit step: the first statement of a transaction that notes a change of an app writes
-- one row (app, transaction) to changes_commits, whose deferred trigger is the commit step below (one
-- call per app a transaction changed, however many changes it noted; Herald's requests change one
-- app each). A transaction-local setting remembers the app this transaction last armed; a savepoint
-- rolled back undoes the setting and the row together. On Citus this runs on the worker that holds
-- the app, and so does the commit step.
CREATE OR REPLACE FUNCTION herald_arm_changes() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    first_app text;
    last_app text;
BEGIN
    SELECT min(a.app COLLATE "C"), max(a.app COLLATE "C") INTO first_app, last_app FROM added a;
    IF first_app IS NULL OR (first_app = last_app AND current_setting('herald.changes_armed', true)
                                                      IS NOT DISTINCT FROM pg_current_xact_id()::text || chr(31) || first_app) THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('herald.changes_armed', pg_current_xact_id()::text || chr(31) || last_app, true);
    IF first_app = last_app THEN
        INSERT INTO changes_commits (app) VALUES (first_app) ON CONFLICT DO NOTHING;
    ELSE
        INSERT INTO changes_commits (app) SELECT DISTINCT a.app FROM added a ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

-- The commit step: the deferred trigger of the transaction's changes_commits row of an app, so it
-- runs once per app, at COMMIT, after every statement of the transaction. It reads and writes only
-- that app's rows (on Citus: the shards on the worker it runs on).
--   1. Lock each user of the transaction's changes: the user's changes_users row, inserted when
--      missing and locked in one statement, in one global order (an INSERT … ON CONFLICT DO UPDATE
--      whose WHERE is false locks the existing row without writing it), held until the commit.
--      One user's changes are then numbered in the order their transactions commit. A row lock
--      takes no slot of PostgreSQL's shared lock table, so any number of users fits.
--   2. Read each noted subject's state as the transaction leaves it (every table filtered by the
--      app itself, v_app, so that Citus keeps each statement on the worker it runs on), and append one item per
--      (user, kind, subject), numbered from change_seq in the order they were noted, and above the
--      last number of its users (the highest of them plus the change's place among this commit's,
--      which grows with the order noted as change_seq does): on Citus each node has its own change_seq,
--      and an app whose shards moved to another worker (a rebalance) must not number its users'
--      changes lower than before.
--   3. NOTIFY herald_changes with the users ("app<US>uid" separated by <RS>, 30 to a message),
--      which wakes the feed's long polls on every instance.
CREATE OR REPLACE FUNCTION herald_commit_changes() RETURNS trigger
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $$
DECLARE
    me xid8 := pg_current_xact_id();
    v_app text := NEW.app;
    users text[];
    now_ms bigint;
    first_ord bigint;
    v_floor bigint;
BEGIN
    DELETE FROM changes_commits c WHERE c.app = v_app AND c.xid = me;
    SELECT array_agg(u.app || chr(31) || u.uid ORDER BY u.app COLLATE "C", u.uid COLLATE "C") INTO users
      FROM (SELECT DISTINCT p.app, p.uid FROM changes_pending p WHERE p.app = v_app AND p.xid = me) u;
    IF users IS NULL THEN
        RETURN NULL;
    END IF;
    -- the users just gathered, in their order (ids hold no control character, so <US> splits them)
    INSERT INTO changes_users AS cu (app, uid)
    SELECT v_app, split_part(u.key, chr(31), 2) FROM unnest(users) WITH ORDINALITY AS u(key, n)
     ORDER BY u.n
        ON CONFLICT (app, uid) DO UPDATE SET uid = excluded.uid WHERE false;
    now_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    SELECT min(p.ord) INTO first_ord FROM changes_pending p WHERE p.app = v_app AND p.xid = me;
    SELECT coalesce(max(f.seq), 0) INTO v_floor
      FROM unnest(users) AS u(key)
     CROSS JOIN LATERAL (SELECT c.seq FROM changes c WHERE c.app = v_app AND c.uid = split_part(u.key, chr(31), 2)
                          ORDER BY c.seq DESC LIMIT 1) f;
    WITH moved AS (
        DELETE FROM changes_pending p WHERE p.app = v_app AND p.xid = me RETURNING p.app, p.uid, p.kind, p.subject, p.actor, p.ord
    ),
    noted AS MATERIALIZED (
        SELECT m.app, m.uid, m.kind, m.subject, m.actor, min(m.ord) AS ord
          FROM moved m GROUP BY m.app, m.uid, m.kind, m.subject, m.actor
    ),
    -- (columns named, not n.*, st.*: Citus 13 mixes up the columns of a star in this statement)
    stated AS MATERIALIZED (
        SELECT n.app, n.uid, n.kind, n.subject, n.actor, n.ord, st.s_subscribed, st.s_since, st.s_source, st.s_reason,
               st.s_tracked, st.s_read_id, st.s_read_count, st.s_unread_mentions, st.s_reply_count
          FROM noted n
          CROSS JOIN LATERAL (
              SELECT s.subscribed AS s_subscribed, s.since AS s_since, s.source AS s_source, s.reason AS s_reason, s.tracked AS s_tracked,
                     s.read_id AS s_read_id, s.read_count AS s_read_count, s.unread_mentions AS s_unread_mentions,
                     (SELECT t.reply_count FROM threads t WHERE t.app = v_app AND t.parent_id = n.subject) AS s_reply_count
                FROM (SELECT 1) one
                LEFT JOIN subscriptions s ON n.kind IN ('subscription', 'read')
                                         AND s.app = v_app AND s.uid = n.uid AND s.thread_id = n.subject
          ) st
    )
    INSERT INTO changes (app, uid, seq, at, kind, subject, conversation_id, flag, time, source, reason, actor,
                         read_up_to, unread_replies, unread_mentions, level)
    SELECT v_app, x.uid, x.seq, now_ms, x.kind, x.subject,
           CASE WHEN x.kind = 'messagePin' THEN (SELECT coalesce(mp.conversation_id, msg.conversation_id)
                                                  FROM (SELECT 1) one
                                                  LEFT JOIN message_pins mp ON mp.app = v_app AND mp.message_id = x.subject
                                                  LEFT JOIN messages msg ON msg.app = v_app AND msg.id = x.subject) END,
           CASE x.kind WHEN 'subscription' THEN coalesce(x.s_subscribed, false)
                       WHEN 'device' THEN NOT EXISTS (SELECT 1 FROM devices d WHERE d.app = v_app AND d.uid = x.uid AND d.id = x.subject)
           END,
           CASE x.kind
               WHEN 'subscription' THEN x.s_since
               WHEN 'messagePin' THEN coalesce((SELECT CASE WHEN mp.pinned THEN mp.at ELSE 0 END FROM message_pins mp
                                                 WHERE mp.app = v_app AND mp.message_id = x.subject), 0)
               WHEN 'save' THEN coalesce((SELECT CASE WHEN ms.saved THEN ms.at ELSE 0 END FROM message_saves ms
                                           WHERE ms.app = v_app AND ms.uid = x.uid AND ms.message_id = x.subject), 0)
               WHEN 'conversationPin' THEN coalesce((SELECT CASE WHEN cp.pinned THEN cp.at ELSE 0 END FROM conversation_pins cp
                                                      WHERE cp.app = v_app AND cp.owner = x.actor AND cp.conversation_id = x.subject), 0)
           END,
           CASE WHEN x.kind = 'subscription' AND x.s_subscribed THEN x.s_source END,
           CASE WHEN x.kind = 'subscription' AND x.s_subscribed THEN x.s_reason END,
           CASE x.kind
               WHEN 'messagePin' THEN (SELECT mp.pinned_by FROM message_pins mp
                                        WHERE mp.app = v_app AND mp.message_id = x.subject AND mp.pinned)
               WHEN 'conversationPin' THEN x.actor
           END,
           CASE WHEN x.kind = 'read' THEN nullif(x.s_read_id, '') END,
           CASE WHEN x.kind = 'read' THEN CASE WHEN x.s_subscribed THEN greatest(0, x.s_reply_count - x.s_read_count) ELSE 0 END END,
           CASE WHEN x.kind = 'read' THEN coalesce(x.s_unread_mentions, 0) END,
           CASE x.kind
               WHEN 'subscription' THEN CASE WHEN x.s_subscribed AND x.s_tracked THEN 'track' ELSE 'notify' END
               WHEN 'conversationLevel' THEN (SELECT cl.level FROM conversation_levels cl
                                               WHERE cl.app = v_app AND cl.uid = x.uid AND cl.conversation_id = x.subject)
           END
      FROM (SELECT st.app, st.uid, st.kind, st.subject, st.actor, st.ord, st.s_subscribed, st.s_since, st.s_source, st.s_reason,
                   st.s_tracked, st.s_read_id, st.s_read_count, st.s_unread_mentions, st.s_reply_count,
                   -- (nextval runs after the sort, so in the order noted; computed here rather than in
                   -- the INSERT's own list, where Citus 13 confuses the columns it reads)
                   greatest(nextval('change_seq'), v_floor + st.ord - first_ord + 1) AS seq
              FROM stated st ORDER BY st.ord) x;
    PERFORM herald_notify('herald_changes', array_to_string(users[i:i + 29], chr(30)))
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
    PERFORM herald_notify('herald_jobs', a.app) FROM (SELECT DISTINCT app FROM added) a;
    RETURN NULL;
END
$$;
