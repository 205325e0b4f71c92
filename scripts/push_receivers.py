#!/usr/bin/env python3
"""Local stand-ins for APNs, FCM and a Web Push service, over TLS, that check what Herald sends
with libraries Herald did not write (SPEC §13.4, issue 38):

- APNs: HTTP/2 (the `h2` library) on TLS with ALPN; the provider token verified with PyJWT
  (ES256, `kid`, `iss`, `iat`) against the key in DIR/apns.pub.pem.
- FCM: the OAuth token endpoint verifies the JWT bearer assertion with PyJWT (RS256, `aud` = the
  token URI, the messaging scope) against DIR/fcm.pub.pem and issues an access token;
  `messages:send` checks it.
- Web Push: the body decrypted with `http_ece` (RFC 8291 aes128gcm) for a browser key pair made
  here (its PushSubscription is written to DIR/subscription.json); VAPID checked with PyJWT
  (ES256, `aud` = the endpoint's origin) against the `k` the request carries.

    python3 scripts/push_receivers.py DIR

Writes DIR/ca.pem (a test certificate authority for HERALD_DELIVERY_CA_FILE) and DIR/ports.json,
prints "ready", then one JSON line per request: {"service", "ok", "error", "path", "headers",
"body"}. A device token `bad` answers APNs' 400 BadDeviceToken, `gone` FCM's 404 UNREGISTERED and
the Web Push path `/push/gone` 410. APNs' token `flaky` answers 503 the first time, `expire`
403 ExpiredProviderToken to the first provider token it sees, FCM's token `stale` 401 to the
first access token issued.
- Webhook devices: `/hook/...` checks the Standard Webhooks signature with the `standardwebhooks`
  library against the secret in DIR/whsec.txt (written by the test once Herald showed it).
"""
import base64
import datetime
import json
import os
import socket
import ssl
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import h2.config
import h2.connection
import h2.events
import http_ece
import jwt
import standardwebhooks
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

DIR = sys.argv[1]
LOCK = threading.Lock()
ISSUED = []   # the access tokens the token endpoint gave, in order


SEEN = {}   # per test token: what was answered before


def first_time(key):
    with LOCK:
        seen = SEEN.get(key, False)
        SEEN[key] = True
        return not seen


def report(service, ok, error=None, path="", headers=None, body=None):
    with LOCK:
        print(json.dumps({"service": service, "ok": ok, "error": error, "path": path, "headers": headers or {}, "body": body}),
              flush=True)


def b64u_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def make_tls():
    """A CA and a server certificate for 127.0.0.1 and localhost, signed by it."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Herald test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    with open(os.path.join(DIR, "ca.pem"), "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(DIR, "server.pem"), "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def context(alpn):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(DIR, "server.pem"))
    ctx.set_alpn_protocols(alpn)
    return ctx


def public_key(name):
    with open(os.path.join(DIR, name), "rb") as f:
        return serialization.load_pem_public_key(f.read())


# APNs -------------------------------------------------------------------------------------------
def apns_check(headers, body, path):
    """An error, or None when the request is what SPEC §13.4 says."""
    auth = headers.get("authorization", "")
    if not auth.startswith("bearer "):
        return "no bearer provider token"
    token = auth[len("bearer "):]
    header = jwt.get_unverified_header(token)
    if header.get("alg") != "ES256" or not header.get("kid"):
        return "provider token header %r" % header
    claims = jwt.decode(token, public_key("apns.pub.pem"), algorithms=["ES256"], options={"require": ["iss", "iat"]})
    if not claims.get("iss"):
        return "no iss"
    if headers.get("apns-push-type") not in ("alert", "background") or not headers.get("apns-topic"):
        return "apns headers %r" % headers
    payload = json.loads(body)
    if "aps" not in payload or "herald" not in payload or len(body) > 4096:
        return "payload"
    if headers["apns-push-type"] == "alert" and payload["aps"].get("sound") != "default":
        return "an alert without sound"
    return None


def serve_apns(sock):
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=apns_connection, args=(conn,), daemon=True).start()


def apns_connection(conn):
    try:
        conn = context(["h2"]).wrap_socket(conn, server_side=True)
    except (ssl.SSLError, OSError) as error:
        report("apns", False, "TLS: %s" % error)
        return
    if conn.selected_alpn_protocol() != "h2":
        report("apns", False, "not HTTP/2 (ALPN %r)" % conn.selected_alpn_protocol())
        conn.close()
        return
    h2c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    h2c.initiate_connection()
    conn.sendall(h2c.data_to_send())
    streams = {}
    while True:
        try:
            data = conn.recv(65535)
        except OSError:
            return
        if not data:
            return
        for event in h2c.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                streams[event.stream_id] = ({k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                                             for k, v in event.headers}, b"")
            elif isinstance(event, h2.events.DataReceived):
                h, b = streams[event.stream_id]
                streams[event.stream_id] = (h, b + event.data)
                h2c.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                headers, body = streams.pop(event.stream_id)
                path = headers.get(":path", "")
                try:
                    error = apns_check(headers, body, path)
                except Exception as exc:   # a token PyJWT refuses, a body that is not JSON
                    error = "%s: %s" % (type(exc).__name__, exc)
                status, answer = ("200", b"")
                if error:
                    status, answer = ("403", json.dumps({"reason": "InvalidProviderToken"}).encode())
                elif path.endswith("/bad"):
                    status, answer = ("400", json.dumps({"reason": "BadDeviceToken"}).encode())
                elif path.endswith("/flaky") and first_time("flaky"):
                    status, answer = ("503", json.dumps({"reason": "ServiceUnavailable"}).encode())
                elif path.endswith("/expire") and first_time("expire:" + headers.get("authorization", "")) \
                        and first_time("expire"):
                    status, answer = ("403", json.dumps({"reason": "ExpiredProviderToken"}).encode())
                report("apns", error is None, error, path, headers, body.decode(errors="replace"))
                h2c.send_headers(event.stream_id, [(":status", status), ("apns-id", "00000000-0000-0000-0000-000000000001"),
                                                   ("content-length", str(len(answer)))], end_stream=not answer)
                if answer:
                    h2c.send_data(event.stream_id, answer, end_stream=True)
        conn.sendall(h2c.data_to_send())


# FCM and Web Push (HTTP/1.1) --------------------------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            if self.path == "/token":
                self.token(body, headers)
            elif self.path.startswith("/v1/projects/"):
                self.fcm(body, headers)
            elif self.path.startswith("/push/"):
                self.webpush(body, headers)
            elif self.path.startswith("/hook/"):
                self.hook(body, headers)
            else:
                self.answer(404)
        except Exception as exc:
            report("other", False, "%s: %s" % (type(exc).__name__, exc), self.path, headers)
            self.answer(500)

    def token(self, body, headers):
        form = urllib.parse.parse_qs(body.decode())
        error = None
        if headers.get("content-type", "").split(";")[0] != "application/x-www-form-urlencoded":
            error = "the token request is not form-encoded"
        elif form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            error = "grant_type %r" % form.get("grant_type")
        else:
            audience = "https://127.0.0.1:%d/token" % self.server.server_address[1]
            try:
                claims = jwt.decode(form["assertion"][0], public_key("fcm.pub.pem"), algorithms=["RS256"], audience=audience,
                                    options={"require": ["iss", "aud", "iat", "exp"]})
                if claims.get("scope") != "https://www.googleapis.com/auth/firebase.messaging":
                    error = "scope %r" % claims.get("scope")
                elif claims["exp"] - claims["iat"] > 3600:
                    error = "exp more than an hour after iat"
            except Exception as exc:
                error = "%s: %s" % (type(exc).__name__, exc)
        report("fcm-token", error is None, error, self.path, headers)
        if error:
            self.answer(400, json.dumps({"error": "invalid_grant"}).encode())
        else:
            token = "ya29.test-%d-%s" % (len(ISSUED), base64.urlsafe_b64encode(os.urandom(9)).decode())
            ISSUED.append(token)
            self.answer(200, json.dumps({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}).encode())

    def fcm(self, body, headers):
        error = None
        bearer = headers.get("authorization", "")[len("Bearer "):]
        if not headers.get("authorization", "").startswith("Bearer ") or bearer not in ISSUED:
            error = "not an access token the token endpoint issued"
        message = json.loads(body).get("message", {})
        if not error and not all(isinstance(v, str) for v in message.get("data", {}).values()):
            error = "a data value that is not a string"
        report("fcm", error is None, error, self.path, headers, body.decode())
        if error:
            self.answer(401, json.dumps({"error": {"code": 401, "status": "UNAUTHENTICATED"}}).encode())
        elif message.get("token") == "stale" and bearer == ISSUED[0]:
            self.answer(401, json.dumps({"error": {"code": 401, "status": "UNAUTHENTICATED",
                                                   "message": "Request had invalid authentication credentials."}}).encode())
        elif message.get("token") == "gone":
            self.answer(404, json.dumps({"error": {"code": 404, "status": "NOT_FOUND", "message": "Requested entity was not found.",
                                                   "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                                                                "errorCode": "UNREGISTERED"}]}}).encode())
        else:
            self.answer(200, json.dumps({"name": "projects/p/messages/1"}).encode())

    def webpush(self, body, headers):
        error, plaintext = None, None
        try:
            scheme, _, rest = headers.get("authorization", "").partition(" ")
            fields = dict(part.strip().split("=", 1) for part in rest.split(","))
            if scheme != "vapid":
                raise ValueError("not a vapid authorization")
            key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64u_decode(fields["k"]))
            origin = "https://127.0.0.1:%d" % self.server.server_address[1]
            claims = jwt.decode(fields["t"], key, algorithms=["ES256"], audience=origin, options={"require": ["aud", "exp", "sub"]})
            if headers.get("content-encoding") != "aes128gcm" or "ttl" not in headers or headers.get("urgency") not in ("high", "normal"):
                raise ValueError("headers %r" % headers)
            plaintext = http_ece.decrypt(body, private_key=BROWSER, auth_secret=AUTH, version="aes128gcm").decode()
            json.loads(plaintext)
            del claims
        except Exception as exc:
            error = "%s: %s" % (type(exc).__name__, exc)
        report("webpush", error is None, error, self.path, headers, plaintext)
        self.answer(403 if error else (410 if self.path == "/push/gone" else 201), b"", "text/plain")


    def hook(self, body, headers):
        error = None
        try:
            with open(os.path.join(DIR, "whsec.txt")) as f:
                secret = f.read().strip()
            standardwebhooks.Webhook(secret).verify(body, {k: v for k, v in headers.items() if k.startswith("webhook-")})
            json.loads(body)
        except Exception as exc:
            error = "%s: %s" % (type(exc).__name__, exc)
        report("webhook", error is None, error, self.path, headers, body.decode(errors="replace"))
        self.answer(401 if error else 204, b"", "text/plain")


def main():
    global BROWSER, AUTH
    make_tls()
    BROWSER = ec.generate_private_key(ec.SECP256R1())
    AUTH = os.urandom(16)
    apns = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    apns.bind(("127.0.0.1", 0))
    apns.listen(16)
    https = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    https.socket = context(["http/1.1"]).wrap_socket(https.socket, server_side=True)
    point = BROWSER.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    port = https.server_address[1]
    with open(os.path.join(DIR, "subscription.json"), "w") as f:
        json.dump({"endpoint": "https://127.0.0.1:%d/push/1" % port,
                   "keys": {"p256dh": base64.urlsafe_b64encode(point).decode().rstrip("="),
                            "auth": base64.urlsafe_b64encode(AUTH).decode().rstrip("=")}}, f)
    with open(os.path.join(DIR, "ports.json"), "w") as f:
        json.dump({"apns": apns.getsockname()[1], "https": port}, f)
    threading.Thread(target=serve_apns, args=(apns,), daemon=True).start()
    threading.Thread(target=https.serve_forever, daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()   # until the test stops it


if __name__ == "__main__":
    main()
