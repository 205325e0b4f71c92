-- Built-in delivery (SPEC §13.3): the secrets that sign an app's webhook requests. The newest
-- row with no expiry is current; a rotation gives the rows before it 24 hours to live, during
-- which every live secret signs (one signature each in `webhook-signature`).
CREATE TABLE delivery_secrets (
    app         text    NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    id          bigserial,
    secret      text    NOT NULL,              -- whsec_<base64 of 32 random bytes>
    created_at  bigint  NOT NULL DEFAULT herald_now_ms(),
    expires_at  bigint,                        -- null: current
    PRIMARY KEY (app, id)
);
