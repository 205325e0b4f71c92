-- Push fan-out jobs (SPEC §9): one per (event, recipient), committed with the event.

CREATE TABLE jobs (
    app                text    NOT NULL,
    id                 bigserial,
    event_source       text    NOT NULL,
    event_id           text    NOT NULL,
    event_type         text    NOT NULL,
    recipient          text    NOT NULL,
    message_id         text    NOT NULL,
    parent_message_id  text,
    kind               text    NOT NULL,          -- 'message' | 'reply'
    reason             text    NOT NULL,
    payload            jsonb   NOT NULL,          -- {"notification": {…}, "data": {…}}
    created_at         bigint  NOT NULL DEFAULT herald_now_ms(),
    state              text    NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'leased', 'acked', 'dead', 'cancelled')),
    attempt            integer NOT NULL DEFAULT 0,
    available_at       bigint  NOT NULL DEFAULT herald_now_ms(),   -- a retried job waits until then
    lease_until        bigint,
    last_error         text,
    updated_at         bigint  NOT NULL DEFAULT herald_now_ms(),
    PRIMARY KEY (app, id),
    UNIQUE (app, event_source, event_id, recipient)
);
CREATE INDEX jobs_ready ON jobs (app, available_at, id) WHERE state = 'ready';
CREATE INDEX jobs_leased ON jobs (app, lease_until) WHERE state = 'leased';
CREATE INDEX jobs_dead ON jobs (app, id) WHERE state = 'dead';
CREATE INDEX jobs_unclaimed_by_message ON jobs (app, message_id) WHERE state = 'ready';
CREATE INDEX jobs_unclaimed_by_parent ON jobs (app, parent_message_id) WHERE state = 'ready';
CREATE INDEX jobs_by_recipient_message ON jobs (app, recipient, message_id);
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE state IN ('acked', 'cancelled');
