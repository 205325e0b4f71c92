-- The per-user change feed (SPEC §14): every change to what a user sees, in commit order, each
-- exactly once. A change is written first to `changes_pending` (by the triggers and by the pin
-- and save code, in the transaction that makes it) and moved to `changes` at commit by
-- herald_commit_changes (sql/functions/3_changes.sql), which numbers it under its user's lock:
-- one user's changes are numbered in the order their transactions commit, so a reader that
-- has seen `seq` never later finds a smaller one of that user. See docs/changes.md.

CREATE SEQUENCE change_seq;

CREATE TABLE changes (
    app              text    NOT NULL,
    uid              text    NOT NULL,
    seq              bigint  NOT NULL,
    at               bigint  NOT NULL,    -- when it was numbered (the commit), epoch ms
    kind             text    NOT NULL CHECK (kind IN ('subscription', 'read', 'messagePin', 'save', 'conversationPin',
                                                     'preferences', 'mutes', 'device')),
    subject          text,                -- parentMessageId | messageId | conversationId | deviceId
    conversation_id  text,                -- messagePin
    flag             boolean,             -- subscription: subscribed; device: removed
    time             bigint,              -- subscription: since; pins: pinnedAt; save: savedAt (0: removed)
    source           text,                -- subscription
    reason           text,                -- subscription
    actor            text,                -- pinnedBy
    read_up_to       text,                -- read
    unread_replies   integer,             -- read
    unread_mentions  integer              -- read
);
-- A feed page is one range scan of this index.
CREATE UNIQUE INDEX changes_feed ON changes (app, uid, seq);
-- Retention: `at` grows with the insertion order, so a block range index finds the old ones.
CREATE INDEX changes_by_age ON changes USING brin (at) WITH (autosummarize = on);

-- Changes of transactions not committed yet: never seen by another transaction, so unlogged
-- (no WAL for a row that lives until its own commit).
CREATE UNLOGGED TABLE changes_pending (
    xid       xid8    NOT NULL DEFAULT pg_current_xact_id(),
    ord       bigint  GENERATED ALWAYS AS IDENTITY,
    app       text    NOT NULL,
    uid       text    NOT NULL,
    kind      text    NOT NULL,
    subject   text,
    actor     text                        -- conversationPin: the pin's owner (a uid or app_system)
);
CREATE INDEX changes_pending_by_xid ON changes_pending (xid);

-- The triggers that note changes, and the commit step. Their functions are defined in
-- sql/functions/3_changes.sql, re-applied at every start; here they are created empty, so that
-- the triggers (whose DDL locks their tables) are created once.
CREATE FUNCTION herald_note_subscription() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE FUNCTION herald_note_user_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE FUNCTION herald_commit_changes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE FUNCTION herald_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;

-- Those of subscriptions fire only when a column the feed shows changes, so the
-- many rows a reply updates (read counts, unread flags) cost a comparison each.
CREATE TRIGGER subscriptions_feed_insert_delete AFTER INSERT OR DELETE ON subscriptions
    FOR EACH ROW EXECUTE FUNCTION herald_note_subscription();
CREATE TRIGGER subscriptions_feed_update AFTER UPDATE ON subscriptions
    FOR EACH ROW
    WHEN ((OLD.subscribed, OLD.source, OLD.reason, OLD.since, OLD.read_at, OLD.read_id)
          IS DISTINCT FROM (NEW.subscribed, NEW.source, NEW.reason, NEW.since, NEW.read_at, NEW.read_id))
    EXECUTE FUNCTION herald_note_subscription();

CREATE TRIGGER user_preferences_feed AFTER INSERT OR UPDATE OR DELETE ON user_preferences
    FOR EACH ROW EXECUTE FUNCTION herald_note_user_change('preferences');
CREATE TRIGGER user_mutes_feed AFTER INSERT OR UPDATE OR DELETE ON user_mutes
    FOR EACH ROW EXECUTE FUNCTION herald_note_user_change('mutes');

CREATE TRIGGER devices_feed_insert_delete AFTER INSERT OR DELETE ON devices
    FOR EACH ROW EXECUTE FUNCTION herald_note_user_change('device', 'id');
CREATE TRIGGER devices_feed_update AFTER UPDATE ON devices
    FOR EACH ROW
    WHEN ((OLD.uid, OLD.id, OLD.platform, OLD.token, OLD.topic, OLD.sandbox)
          IS DISTINCT FROM (NEW.uid, NEW.id, NEW.platform, NEW.token, NEW.topic, NEW.sandbox))
    EXECUTE FUNCTION herald_note_user_change('device', 'id');

CREATE CONSTRAINT TRIGGER changes_pending_commit AFTER INSERT ON changes_pending
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION herald_commit_changes();

-- A statement that adds jobs wakes the claims waiting on every instance (herald_notify_jobs).
CREATE TRIGGER jobs_notify AFTER INSERT ON jobs REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION herald_notify_jobs();
