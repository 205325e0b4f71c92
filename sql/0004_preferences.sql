-- Notification preferences (SPEC §7): app settings, user choices, mutes.

CREATE TABLE app_settings (
    app         text   PRIMARY KEY REFERENCES apps (id) ON DELETE CASCADE,
    settings    jsonb  NOT NULL,           -- the full settings document (see AppSettings.json)
    updated_at  bigint NOT NULL
);

CREATE TABLE user_preferences (
    app          text   NOT NULL,
    uid          text   NOT NULL,
    preferences  jsonb  NOT NULL,          -- only what the user set: {"groupPreferences.replies": "…", …}
    updated_at   bigint NOT NULL,
    PRIMARY KEY (app, uid)
);

CREATE TABLE user_mutes (
    app                text   NOT NULL,
    uid                text   NOT NULL,
    conversation_type  text   NOT NULL CHECK (conversation_type IN ('group', 'oneOnOne')),
    conversation_id    text   NOT NULL,   -- the guid, or the other user's uid
    until              bigint NOT NULL,
    PRIMARY KEY (app, uid, conversation_type, conversation_id)
);
