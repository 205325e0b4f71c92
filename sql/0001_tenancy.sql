-- Tenancy: apps and their API keys (SPEC §2).
-- Times are epoch milliseconds (bigint), as on the wire.

CREATE FUNCTION herald_now_ms() RETURNS bigint
    LANGUAGE sql STABLE
    AS $$ SELECT (extract(epoch FROM now()) * 1000)::bigint $$;

CREATE TABLE apps (
    id          text PRIMARY KEY,
    created_at  bigint NOT NULL DEFAULT herald_now_ms()
);

-- A key is shown once; only the SHA-256 of its secret part is kept.
CREATE TABLE app_keys (
    id           text PRIMARY KEY,
    app_id       text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    role         text NOT NULL CHECK (role IN ('ingest', 'worker', 'server')),
    label        text,
    secret_hash  bytea NOT NULL,
    created_at   bigint NOT NULL DEFAULT herald_now_ms(),
    revoked_at   bigint
);

CREATE INDEX app_keys_by_app ON app_keys (app_id, created_at, id);
