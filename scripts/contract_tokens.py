"""User tokens minted by an independent JWT library (PyJWT), checked against the live server
(scripts/contract-test.sh; SPEC §15).

Creates an HS256, an RS256 and an ES256 token key through the API (the private keys made here
with `cryptography`), then checks that Herald accepts a PyJWT token of each on /v1/me/threads
with the answer /v1/users/alice/threads gives the server key, and refuses PyJWT's `alg: none`,
a token signed with another key, an expired one and one for another audience with the codes of
SPEC §15. It raises the app's userRateLimit for the schemathesis run that follows and prints an
HS256 token for it (uid alice, one hour) on stdout.

Usage: contract_tokens.py BASE_URL SERVER_KEY APP
"""
import json
import sys
import time
import urllib.error
import urllib.request

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa


def call(base, method, path, token, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers={
        "Authorization": "Bearer " + token, **({"Content-Type": "application/json"} if data else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def fail(message):
    sys.exit("contract: user tokens: " + message)


def main():
    base, key, app = sys.argv[1], sys.argv[2], sys.argv[3]
    status, text, _ = call(base, "PATCH", "/v1/settings/notifications", key,
                           {"userRateLimit": {"perSecond": 100000, "burst": 100000}})
    if status != 200:
        fail("could not raise userRateLimit: %d %s" % (status, text))

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    signers = {}
    for alg, private in [("HS256", None), ("RS256", rsa_key), ("ES256", ec_key)]:
        body = {"alg": alg}
        if private is not None:
            body["publicKey"] = private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        status, text, _ = call(base, "POST", "/v1/settings/token-keys", key, body)
        if status != 201:
            fail("creating the %s key: %d %s" % (alg, status, text))
        created = json.loads(text)
        signers[alg] = (created["kid"], created["secret"] if private is None else private)

    now = int(time.time())

    def mint(alg, claims=None, signer=None, algorithm=None):
        kid, secret = signer or signers[alg]
        payload = {"sub": "alice", "app": app, "iat": now, "exp": now + 3600, "aud": "herald"}
        payload.update(claims or {})
        return jwt.encode(payload, secret, algorithm=algorithm or alg, headers={"kid": kid})

    _, expected, _ = call(base, "GET", "/v1/users/alice/threads", key)
    for alg in signers:
        status, text, _ = call(base, "GET", "/v1/me/threads", mint(alg))
        if status != 200 or text != expected:
            fail("a PyJWT %s token: %d %s" % (alg, status, text))

    other_rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = [
        ("alg none", jwt.encode({"sub": "alice", "app": app, "exp": now + 60}, None, algorithm="none",
                                headers={"kid": signers["HS256"][0]}), "AUTH_ERR_TOKEN_INVALID"),
        ("another key", mint("RS256", signer=(signers["RS256"][0], other_rsa)), "AUTH_ERR_TOKEN_INVALID"),
        ("another audience", mint("ES256", {"aud": ["chat"]}), "AUTH_ERR_TOKEN_INVALID"),
        ("expired", mint("HS256", {"iat": now - 7200, "exp": now - 3600}), "AUTH_ERR_TOKEN_EXPIRED"),
    ]
    for name, token, code in refused:
        status, text, headers = call(base, "GET", "/v1/me/threads", token)
        challenge = headers.get("WWW-Authenticate", "")
        if status != 401 or json.loads(text).get("error", {}).get("code") != code or 'error="invalid_token"' not in challenge:
            fail("%s: expected 401 %s, got %d %s (WWW-Authenticate: %s)" % (name, code, status, text, challenge))

    print("contract: PyJWT tokens of HS256, RS256 and ES256 accepted; %d bad ones refused" % len(refused), file=sys.stderr)
    print(mint("HS256"))


if __name__ == "__main__":
    main()
