-- Large-group fan-out (SPEC §8.3): above the app's largeGroupThreshold, the ingest transaction
-- records a task; background workers produce its jobs a chunk of members at a time, each chunk
-- committed with the task's cursor, so a crash redoes at most one chunk (whose jobs the unique
-- (event, recipient) constraint keeps single).
CREATE TABLE fanout_tasks (
    app           text    NOT NULL,
    id            bigserial,
    event_source  text    NOT NULL,
    event_id      text    NOT NULL,
    event_type    text    NOT NULL,
    message_id    text    NOT NULL,
    after_uid     text,                      -- the members up to this uid (byte order) are done
    done          boolean NOT NULL DEFAULT false,
    lease_until   bigint,
    created_at    bigint  NOT NULL DEFAULT herald_now_ms(),
    updated_at    bigint  NOT NULL DEFAULT herald_now_ms(),
    PRIMARY KEY (app, id),
    UNIQUE (app, event_source, event_id)
);
CREATE INDEX fanout_tasks_pending ON fanout_tasks (id) WHERE NOT done;
