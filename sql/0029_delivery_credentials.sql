-- Direct delivery's credentials (SPEC §13.4), one per app and kind, apart from the settings
-- document so that a settings read never carries them: `vapid` is the app's Web Push key pair
-- (the PKCS#8 PEM of its private key, and its public point as base64url, what browsers pass as
-- applicationServerKey). APNs' and FCM's keys will join it.
CREATE TABLE delivery_credentials (
    app         text    NOT NULL,
    kind        text    NOT NULL CHECK (kind IN ('vapid', 'apns', 'fcm')),
    secret      text    NOT NULL,
    public      text,
    created_at  bigint  NOT NULL DEFAULT herald_now_ms(),
    PRIMARY KEY (app, kind)
);
