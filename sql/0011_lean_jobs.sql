-- Lean job rows (issue 11). A job row was about 700 bytes: the whole push payload as jsonb
-- (title, body, the message's data) and the event's and message's ids, written once per
-- recipient, with four index entries. Inserting a job cost about 40 µs of database time, most
-- of a reply's cost in S1/S2 and all of W3's. Now a row holds only what differs between the
-- recipients of one message — the recipient, the reason, the privacy template's switch and the
-- badge — and the wire JSON is built when a worker claims the job, from the row and its message
-- (`Jobs/JobPayload.swift`). About 15 µs per job, 2.8x smaller on disk.
--
-- * The event is null when it is the message's own `message.created` (`messages.event_*`), as
--   for every job today; another event's job (SPEC §11) names its event.
-- * `kind` and the parent come from the message.
-- * One job per (event, recipient): the unique key (app, message, recipient, event) with nulls
--   not distinct (PostgreSQL 15). It also finds a message's jobs, for cancelling them when the
--   message is deleted and for explain, so the index by thread is gone.
-- * The primary key is the job id alone: a job id is global (`jobs_id_seq`).
-- * Finished jobs are purged by creation time through a BRIN index, which costs an insert next
--   to nothing, instead of a B-tree on updated_at that every ack wrote to.

-- Old messages did not record their event; their jobs did.
UPDATE messages m SET event_source = j.event_source, event_id = j.event_id, event_type = j.event_type
  FROM (SELECT DISTINCT ON (app, message_id) app, message_id, event_source, event_id, event_type
          FROM jobs WHERE event_type = 'message.created' ORDER BY app, message_id, id) j
 WHERE m.app = j.app AND m.id = j.message_id AND m.event_id IS NULL;

CREATE TABLE jobs_lean (
    id            bigint  NOT NULL DEFAULT nextval('jobs_id_seq') PRIMARY KEY,
    app           text    NOT NULL,
    message_id    text    NOT NULL,
    recipient     text    NOT NULL,
    event_source  text,                       -- null: the message's own message.created
    event_id      text,
    event_type    text,
    reason        text    NOT NULL,
    privacy       boolean NOT NULL DEFAULT false,   -- the privacy template (SPEC §9)
    badge         integer NOT NULL DEFAULT 0,       -- the recipient's unread thread count after the message
    state         text    NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'leased', 'acked', 'dead', 'cancelled')),
    attempt       integer NOT NULL DEFAULT 0,
    created_at    bigint  NOT NULL DEFAULT herald_now_ms(),
    available_at  bigint  NOT NULL DEFAULT herald_now_ms(),   -- a retried job waits until then
    lease_until   bigint,
    last_error    text,
    updated_at    bigint  NOT NULL DEFAULT herald_now_ms()
);

INSERT INTO jobs_lean (id, app, message_id, recipient, event_source, event_id, event_type, reason, privacy, badge,
                       state, attempt, created_at, available_at, lease_until, last_error, updated_at)
SELECT j.id, j.app, j.message_id, j.recipient,
       CASE WHEN same THEN NULL ELSE j.event_source END, CASE WHEN same THEN NULL ELSE j.event_id END,
       CASE WHEN same THEN NULL ELSE j.event_type END,
       j.reason, j.payload #>> '{notification,title}' IN ('New message', 'New reply', 'New mention'),
       coalesce((j.payload #>> '{notification,badge}')::integer, 0),
       j.state, j.attempt, j.created_at, j.available_at, j.lease_until, j.last_error, j.updated_at
  FROM jobs j
  LEFT JOIN messages m ON m.app = j.app AND m.id = j.message_id
 CROSS JOIN LATERAL (SELECT m.event_source IS NOT DISTINCT FROM j.event_source AND m.event_id IS NOT DISTINCT FROM j.event_id
                            AND m.event_type IS NOT DISTINCT FROM j.event_type AS same) s;

-- The sequence outlives the old table: job ids stay unique across the change.
ALTER SEQUENCE jobs_id_seq OWNED BY NONE;
DROP TABLE jobs;
ALTER TABLE jobs_lean RENAME TO jobs;
ALTER TABLE jobs RENAME CONSTRAINT jobs_lean_pkey TO jobs_pkey;
ALTER TABLE jobs RENAME CONSTRAINT jobs_lean_state_check TO jobs_state_check;
ALTER SEQUENCE jobs_id_seq OWNED BY jobs.id;

CREATE UNIQUE INDEX jobs_one_per_event_recipient ON jobs (app, message_id, recipient, event_source, event_id) NULLS NOT DISTINCT;
CREATE INDEX jobs_ready ON jobs (app, available_at, id) WHERE state = 'ready';
CREATE INDEX jobs_leased ON jobs (app, lease_until) WHERE state = 'leased';
CREATE INDEX jobs_dead ON jobs (app, id) WHERE state = 'dead';
CREATE INDEX jobs_by_age ON jobs USING brin (created_at) WITH (autosummarize = on);
