-- Jobs in blocks (issue 33). A message's recipients are written once, in blocks of up to 1,024,
-- instead of a row per (event, recipient): the block holds the recipients, their reasons (as
-- codes, herald_reason_name) and privacy switches as arrays. A claim leases a range of a block
-- with one row update (`claimed` moves on) and one lease row; an ack sets bits in the block's
-- marks; a job that fails, whose lease runs out or that a delivery gives back moves out into
-- `job_rows` (the old row table, the rare path), with the id it had. `docs/jobs.md` follows one
-- job from ingest to ack.
--
-- * A job id is a number × 1,024 plus a position: a block's jobs are its id × 1,024 + 0…1,023;
--   a row job of its own (a clear, a retraction, a reaction's, …) is a fresh number × 1,024. Both
--   draw on jobs_id_seq, so they never meet, and the old ids stay below every new one.
-- * `jobs` becomes a view over both, with the state of a block's job derived: below `claimed`
--   leased or acked (its bit), from `claimed` ready, from `stop` cancelled (a deleted message's
--   unclaimed jobs), a moved position left to its row.

ALTER TABLE jobs RENAME TO job_rows;
SELECT setval('jobs_id_seq', (SELECT last_value FROM jobs_id_seq) / 1024 + 1, false);
ALTER TABLE job_rows ALTER COLUMN id SET DEFAULT nextval('jobs_id_seq') * 1024;

CREATE TABLE job_blocks (
    id            bigint     NOT NULL DEFAULT nextval('jobs_id_seq') PRIMARY KEY,
    app           text       NOT NULL,
    message_id    text       NOT NULL,
    event_source  text,                      -- null: the message's own message.created
    event_id      text,
    event_type    text,
    created_at    bigint     NOT NULL DEFAULT herald_now_ms(),
    claimed       integer    NOT NULL DEFAULT 0,   -- positions below were claimed once (attempt 1)
    stop          integer    NOT NULL,             -- positions from here on were cancelled unclaimed
    recipients    text[]     NOT NULL,
    reasons       smallint[] NOT NULL,
    privacy       boolean[]  NOT NULL,
    CHECK (cardinality(recipients) BETWEEN 1 AND 1024 AND 0 <= claimed AND claimed <= stop AND stop <= cardinality(recipients))
);
-- The blocks with jobs to claim, oldest first.
CREATE INDEX job_blocks_ready ON job_blocks (app, created_at, id) WHERE claimed < stop;
-- Exactly once: a block written twice starts with the same recipient (IngestStore runs a batch
-- again with the recipients that have a job left out). Also finds a message's blocks.
CREATE UNIQUE INDEX job_blocks_once ON job_blocks (app, message_id, event_source, event_id, (recipients[1])) NULLS NOT DISTINCT;
CREATE INDEX job_blocks_by_age ON job_blocks USING brin (created_at) WITH (autosummarize = on);

-- What became of a block's claimed positions: acked, or moved out to job_rows. Apart from the
-- block, so that an ack and a claim of the same block never wait for each other. Written at the
-- block's first claim.
CREATE TABLE job_block_marks (
    block  bigint     NOT NULL PRIMARY KEY,
    acked  bit(1024)  NOT NULL DEFAULT B'0'::bit(1024),
    moved  bit(1024)  NOT NULL DEFAULT B'0'::bit(1024)
);

-- One row per claimed range of a block: [first, last) leased until `until`. A range whose
-- positions are all done is deleted by the ack; one that runs out is deleted by the next claim,
-- which moves its positions not done to job_rows as ready (herald_expire_block_leases).
CREATE TABLE job_leases (
    block   bigint   NOT NULL,
    first   integer  NOT NULL,
    last    integer  NOT NULL,
    app     text     NOT NULL,
    until   bigint   NOT NULL,
    PRIMARY KEY (block, first)
);
CREATE INDEX job_leases_due ON job_leases (app, until);

CREATE TRIGGER job_blocks_notify AFTER INSERT ON job_blocks REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION herald_notify_jobs();

-- A block's reasons are codes: the position in this list, which is Routing.Reason's order
-- (append only; JobBlocks.swift says the same, and JobBlockTests checks that they agree).
CREATE FUNCTION herald_reason_name(code smallint) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (ARRAY['mention', 'mentionAll', 'quote', 'subscribedThread', 'allReplies', 'allMessages',
                  'reactionOnOwnMessage', 'reactionOnMessage', 'memberAction'])[code + 1]
$$;

-- The bit of position `n` (1-based) in a block's marks.
CREATE FUNCTION herald_bit(n integer) RETURNS bit(1024)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT B'1'::bit(1024) >> (n - 1) $$;

-- Every position of every block as a job row (the columns of job_rows, then the block, the
-- position and whether the job moved out to job_rows).
CREATE VIEW job_block_positions AS
SELECT b.id * 1024 + p.n - 1 AS id, b.app, b.message_id, p.recipient, b.event_source, b.event_id, b.event_type,
       herald_reason_name(b.reasons[p.n]) AS reason, b.privacy[p.n] AS privacy, 0 AS badge,
       CASE WHEN p.n > b.stop THEN 'cancelled' WHEN p.n > b.claimed THEN 'ready'
            WHEN substring(k.acked FROM p.n::int FOR 1) = B'1' THEN 'acked' ELSE 'leased' END AS state,
       CASE WHEN p.n > b.claimed THEN 0 ELSE 1 END AS attempt,
       b.created_at, b.created_at AS available_at, NULL::bigint AS lease_until, NULL::text AS last_error,
       b.created_at AS updated_at, NULL::text AS kind, NULL::text AS exclude_device, NULL::text[] AS clear_ids,
       NULL::text AS template_reason, NULL::text AS subject_id, NULL::bigint AS sync_at, NULL::text AS sync_by,
       b.id AS block, (p.n - 1)::integer AS position,
       coalesce(substring(k.moved FROM p.n::int FOR 1) = B'1', false) AS moved
  FROM job_blocks b
  LEFT JOIN job_block_marks k ON k.block = b.id
 CROSS JOIN LATERAL unnest(b.recipients) WITH ORDINALITY AS p(recipient, n);

-- Every job, one row each: the row jobs and the blocks' jobs that did not move out.
CREATE VIEW jobs AS
SELECT id, app, message_id, recipient, event_source, event_id, event_type, reason, privacy, badge, state, attempt,
       created_at, available_at, lease_until, last_error, updated_at, kind, exclude_device, clear_ids, template_reason,
       subject_id, sync_at, sync_by, NULL::bigint AS block, NULL::integer AS position
  FROM job_rows
UNION ALL
SELECT id, app, message_id, recipient, event_source, event_id, event_type, reason, privacy, badge, state, attempt,
       created_at, available_at, lease_until, last_error, updated_at, kind, exclude_device, clear_ids, template_reason,
       subject_id, sync_at, sync_by, block, position
  FROM job_block_positions WHERE NOT moved;

