-- Reactions (SPEC §11.1–11.2): one row per reaction id, whatever order its events arrive in.
-- `added_at`/`removed_at` are the times of its reaction.added and reaction.removed; the reaction
-- is live while no removal is recorded, whatever the times (a removal that arrives first leaves
-- a row with only `removed_at`, so the later reaction.added notifies nobody). The message's
-- author and parent are the event's until Herald has seen the message (the jobs take the
-- message's row when there is one). `added_source`/`added_event_id` name the reaction.added
-- event, for explain (`?event=`).
CREATE TABLE reactions (
    app              text    NOT NULL,
    id               text    NOT NULL,
    message_id       text    NOT NULL,
    reactor          text    NOT NULL,
    reaction         text    NOT NULL,
    conversation_id  text    NOT NULL,
    receiver_type    text    NOT NULL,
    group_id         text,
    user_a           text,
    user_b           text,
    message_sender   text,
    parent_id        text,
    added_at         bigint,
    removed_at       bigint,
    added_source     text,
    added_event_id   text,
    PRIMARY KEY (app, id)
);
-- By message, for explain (`?event=`) and retractions. The message leads: an index that began
-- with `app` would tie with the primary key for a lookup by (app, id) while the table is empty,
-- and a generic plan made then (ingest's, kept for the connection's life) could walk every
-- reaction of the app for each id.
CREATE INDEX reactions_by_message ON reactions (message_id, app);

-- Member actions that notify (SPEC §11.3): what a `memberAction` job says, keyed by its event.
-- Only events that changed membership (or unbanned / scopeChanged) and were not stale are kept.
CREATE TABLE member_actions (
    app           text    NOT NULL,
    event_source  text    NOT NULL,
    event_id      text    NOT NULL,
    group_id      text    NOT NULL,
    uid           text    NOT NULL,
    actor         text,
    action        text    NOT NULL,   -- memberJoined … memberScopeChanged (the preference's name)
    scope         text,
    at            bigint  NOT NULL,
    created_at    bigint  NOT NULL DEFAULT herald_now_ms(),   -- when Herald recorded it (for retention)
    PRIMARY KEY (app, event_source, event_id)
);

-- Jobs of reactions name the reacted message (so a deletion cancels them with the message's) and
-- the reaction (`subject_id`); member-action jobs name no message, only their event.
ALTER TABLE jobs ALTER COLUMN message_id DROP NOT NULL;
ALTER TABLE jobs ADD COLUMN subject_id text;
ALTER TABLE jobs DROP CONSTRAINT jobs_kind_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_kind_check CHECK (kind IN ('clear', 'retract', 'update', 'reaction', 'memberAction'));

-- Large conversations' reactions and member actions go through the fan-out tasks too (SPEC §8.3):
-- a reaction task names its reaction in `subject_id`, a member-action task its group.
ALTER TABLE fanout_tasks ALTER COLUMN message_id DROP NOT NULL;
ALTER TABLE fanout_tasks ADD COLUMN subject_id text;
