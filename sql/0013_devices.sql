-- A user's devices (SPEC §13.1): where their pushes go. At most 100 per user (checked under the
-- user's lock); a token registered again, under another user or another id, moves there (the
-- unique index on its digest: tokens may be longer than a btree entry).
CREATE TABLE devices (
    app         text    NOT NULL,
    uid         text    NOT NULL,
    id          text    NOT NULL,
    platform    text    NOT NULL CHECK (platform IN ('apns', 'fcm', 'webpush', 'webhook')),
    token       text    NOT NULL,
    topic       text,
    sandbox     boolean NOT NULL DEFAULT false,
    created_at  bigint  NOT NULL DEFAULT herald_now_ms(),
    updated_at  bigint  NOT NULL DEFAULT herald_now_ms(),
    PRIMARY KEY (app, uid, id)
);

CREATE UNIQUE INDEX devices_by_token ON devices (app, platform, md5(token));
