-- Thread digests (SPEC §17). A burst of replies in a thread becomes, for a recipient with a
-- `replyDigestSeconds` window, the push of the first reply and one `digest` job at the window's end.
--
-- A window is one row per (recipient, thread, burst), written when the reply that opens it is
-- routed, in the same transaction as that reply's job: a held reply writes nothing per recipient.
-- Which replies a window held is derived from the facts (`herald_digest_held`), not recorded.
-- The row stays after its end (for the explain endpoint, and for the claim, which gives the job
-- that opened it the thread as its collapse id) until the retention removes it.
CREATE TABLE digest_windows (
    app         text    NOT NULL,
    thread_id   text    NOT NULL,
    uid         text    NOT NULL,
    opened_at   bigint  NOT NULL,   -- Herald's time of the reply that opened it (its event's received_at)
    ends_at     bigint  NOT NULL,
    opened_by   text    NOT NULL,   -- that reply's id: its job is the push the digest replaces
    max_age_ms  bigint  NOT NULL,   -- the app's maxEventAgeSeconds then (0: off): a stale reply is never held
    -- set once, by the instance that acted on the end (exactly once: in the digest's transaction)
    closed_at   bigint,
    outcome     text,               -- 'sent', 'READ' (nothing left to tell), or the quiet rule's skip code
    digest_job  bigint,             -- the digest's job id when sent
    read_at     bigint,             -- the recipient's read position in the thread when it closed
    read_id     text,
    PRIMARY KEY (app, thread_id, uid, opened_at)
);
-- the windows that end and have not been acted on, soonest first, for every instance
CREATE INDEX digest_windows_due ON digest_windows (ends_at) WHERE closed_at IS NULL;
-- the opening job of a reply, found at claim
CREATE INDEX digest_windows_by_opener ON digest_windows (app, opened_by, uid);
CREATE INDEX digest_windows_by_age ON digest_windows USING brin (ends_at) WITH (autosummarize = on);

-- A digest is a row job: its held replies' ids are `clear_ids` (the latest 100, oldest first),
-- with their count and up to 5 senders.
ALTER TABLE job_rows ADD COLUMN digest_count integer, ADD COLUMN digest_senders text[];
ALTER TABLE job_rows DROP CONSTRAINT jobs_kind_check;
ALTER TABLE job_rows ADD CONSTRAINT jobs_kind_check
    CHECK (kind IN ('clear', 'retract', 'update', 'reaction', 'memberAction', 'sync', 'digest'));
