-- User tokens (SPEC §15): the keys an app's backend signs user tokens with.
-- An HS256 key's secret is kept as it was shown once (verifying needs it, and the API never
-- returns it again); an RS256 or ES256 key is a public key in PEM. Deleting the row refuses the
-- tokens it signed from the next request on: every verification looks the kid up.
CREATE TABLE token_keys (
    kid         text   PRIMARY KEY,
    app         text   NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    alg         text   NOT NULL CHECK (alg IN ('HS256', 'RS256', 'ES256')),
    secret      bytea  CHECK ((alg = 'HS256') = (secret IS NOT NULL)),
    public_key  text   CHECK ((alg <> 'HS256') = (public_key IS NOT NULL)),
    created_at  bigint NOT NULL DEFAULT herald_now_ms()
);

CREATE INDEX token_keys_by_app ON token_keys (app, created_at, kid);
