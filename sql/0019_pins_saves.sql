-- Pins and saves (SPEC §12.1–12.2): the latest event by `at` decides each state, and on equal
-- times an unpin or unsave wins, and between two pins (or saves) the greater actor (or device)
-- in byte order, whatever the order of delivery. A row keeps the deciding event's
-- time and whether it pinned (or saved); an unpin leaves the row with `pinned = false` (the
-- tombstone that makes an older pin arriving later change nothing).

-- A message's pin, seen by everyone in its conversation. `conversation_id` is the event's, or the
-- stored message's when the event cannot say (a system pin in a one-on-one conversation).
CREATE TABLE message_pins (
    app              text    NOT NULL,
    message_id       text    NOT NULL,
    conversation_id  text,
    pinned           boolean NOT NULL,
    at               bigint  NOT NULL,
    pinned_by        text    NOT NULL,    -- a uid, or 'app_system'
    was_pinned       boolean,             -- before the last change: whether it changed the state (a sync job)
    event_source     text    NOT NULL,    -- the deciding event (a large group's sync task checks it still decides)
    event_id         text    NOT NULL,
    PRIMARY KEY (app, message_id)
);
-- A conversation's pins, newest first (the message leads nothing here: see 0018 on ties with the key).
CREATE INDEX message_pins_by_conversation ON message_pins (conversation_id, app, at DESC, message_id) WHERE pinned;

-- A user's saves, seen by that user only.
CREATE TABLE message_saves (
    app         text    NOT NULL,
    uid         text    NOT NULL,
    message_id  text    NOT NULL,
    saved       boolean NOT NULL,
    at          bigint  NOT NULL,
    device_id   text,
    was_saved   boolean,
    PRIMARY KEY (app, uid, message_id)
);
CREATE INDEX message_saves_newest ON message_saves (app, uid, at DESC, message_id) WHERE saved;

-- Conversation pins: a user's own (`owner` = the uid), or a system pin for every participant
-- (`owner` = 'app_system').
CREATE TABLE conversation_pins (
    app              text    NOT NULL,
    owner            text    NOT NULL,
    conversation_id  text    NOT NULL,
    receiver_type    text    NOT NULL,
    group_id         text,
    user_a           text,
    user_b           text,
    pinned           boolean NOT NULL,
    at               bigint  NOT NULL,
    device_id        text,
    was_pinned       boolean,
    event_source     text    NOT NULL,
    event_id         text    NOT NULL,
    PRIMARY KEY (app, owner, conversation_id)
);

-- Sync jobs (SPEC §12.3): silent jobs that tell a user's devices what changed. `subject_id` holds
-- the conversation, `sync_at` the pin's or save's time (0: unpinned, unsaved), `sync_by` who
-- pinned.
ALTER TABLE jobs ADD COLUMN sync_at bigint, ADD COLUMN sync_by text;
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('clear', 'retract', 'update', 'reaction', 'memberAction', 'sync'));
