"""Webhook delivery checked by an independent verifier: the `standardwebhooks` package from PyPI
(scripts/contract-test.sh; SPEC §13.3).

Turns on webhook delivery for an app of its own (made with the admin token, so the contract
app's seeded jobs stay for schemathesis), posts a message to a three-member group and
checks that each of the two jobs reaches a local receiver once, with headers that
`standardwebhooks` verifies under the secret the PATCH showed, and a body that is the job
(`webhook-id` is its id). After a rotation, requests verify under the new secret and the old
one (the 24 h overlap), and not under another. Then the README's receiver
(scripts/webhook_receiver.py) gets a message's jobs and refuses a tampered request. Delivery
is set back to pull at the end.

Usage: HERALD_ADMIN_TOKEN=… contract_webhooks.py BASE_URL
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def fail(message):
    sys.exit("contract: webhooks: " + message)


def call(base, method, path, token, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers={
        "Authorization": "Bearer " + token, **({"Content-Type": "application/json"} if data is not None else {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


received = []


class Recorder(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        received.append((dict(self.headers), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def wait_for(condition, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main():
    base, admin = sys.argv[1], os.environ["HERALD_ADMIN_TOKEN"]
    app = f"webhooks-{time.time_ns() % 10**12}"
    status, created = call(base, "POST", "/v1/apps", admin, {"id": app})
    status, made = call(base, "POST", f"/v1/apps/{app}/keys", admin, {"role": "server"})
    if status != 201:
        fail(f"a server key for {app}: {status} {made}")
    key = made["key"]
    recorder = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{recorder.server_address[1]}/hook"

    status, settings = call(base, "PATCH", "/v1/settings/notifications", key,
                            {"delivery": {"mode": "webhook", "url": url, "timeoutMs": 2000, "concurrency": 4}})
    if status != 200:
        fail(f"PATCH delivery: {status} {settings}")
    secret = settings["delivery"].get("secret")
    if not secret or settings["delivery"].get("secretSet") is not True:
        fail(f"the first push mode shows the secret once: {settings['delivery']}")
    status, _ = call(base, "PUT", "/v1/groups/wh-g/members", key, {"members": ["wh-a", "wh-b", "wh-c"]})
    if status != 200:
        fail(f"group: {status}")

    def post_message(n):
        event = {"specversion": "1.0", "id": f"wh-e{n}-{time.time_ns()}", "source": "contract", "type": "message.created",
                 "data": {"id": f"wh-m{n}-{time.time_ns()}", "sender": "wh-a", "receiverType": "group", "receiver": "wh-g",
                          "sentAt": int(time.time() * 1000), "text": f"hello {n}", "mentions": [], "mentionsAll": False}}
        status, answer = call(base, "POST", "/v1/events", key, [event])
        if status != 200 or answer.get("accepted") != 1:
            fail(f"post: {status} {answer}")

    def check(deliveries, secrets, wrong):
        for headers, body in deliveries:
            for name in secrets:
                try:
                    job = Webhook(name).verify(body, headers)
                except WebhookVerificationError as error:
                    fail(f"standardwebhooks refused a delivery under a live secret: {error}")
                if job["id"] != headers.get("webhook-id") or job["recipient"] not in ("wh-b", "wh-c"):
                    fail(f"the body is not the job its webhook-id names: {headers.get('webhook-id')} {job}")
            try:
                Webhook(wrong).verify(body, headers)
                fail("a delivery verified under a secret Herald never had")
            except WebhookVerificationError:
                pass

    other = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY="
    post_message(1)
    if not wait_for(lambda: len(received) >= 2):
        fail(f"{len(received)} of 2 deliveries arrived")
    check(received[:2], [secret], other)
    ids = [headers.get("webhook-id") for headers, _ in received]
    if len(set(ids)) != len(ids):
        fail(f"a job was delivered twice: {ids}")

    status, rotated = call(base, "POST", "/v1/settings/delivery/rotate-secret", key)
    if status != 200:
        fail(f"rotate: {status} {rotated}")
    post_message(2)
    if not wait_for(lambda: len(received) >= 4):
        fail(f"{len(received)} of 4 deliveries arrived")
    check(received[2:4], [rotated["secret"], secret], other)
    print(f"contract: webhooks: {len(received)} deliveries verified by standardwebhooks, before and after a rotation", file=sys.stderr)

    # The README's receiver, with the current secret.
    port = free_port()
    readme = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "webhook_receiver.py"), str(port)],
                              env={**os.environ, "WEBHOOK_SECRET": rotated["secret"]}, stdout=subprocess.PIPE, text=True)
    try:
        if not wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 10):
            fail("the README's receiver did not start")
        status, _ = call(base, "PATCH", "/v1/settings/notifications", key, {"delivery": {"url": f"http://127.0.0.1:{port}/hook"}})
        post_message(3)
        lines = []

        def read_two():
            for _ in range(2):
                lines.append(readme.stdout.readline().split())
        reader = threading.Thread(target=read_two, daemon=True)
        reader.start()
        reader.join(20)
        if len(lines) < 2:
            fail(f"the README's receiver printed {len(lines)} of 2 jobs within 20 s")
        if sorted(line[1] for line in lines) != ["wh-b", "wh-c"] or any(line[2] != "message" for line in lines):
            fail(f"the README's receiver printed {lines}")
        headers, body = received[2]   # signed with the current secret: only the tampering makes it fail
        signed = {name: value for name, value in headers.items() if name.lower().startswith("webhook-")}
        with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/hook", data=body, method="POST", headers=signed),
                                    timeout=5) as replay:
            if replay.status != 200:
                fail(f"the README's receiver refused an intact delivery: {replay.status}")
        tampered = urllib.request.Request(f"http://127.0.0.1:{port}/hook", data=body.replace(b"hello", b"HELLO"), method="POST",
                                          headers={name: value for name, value in headers.items() if name.lower().startswith("webhook-")})
        try:
            urllib.request.urlopen(tampered, timeout=5)
            fail("the README's receiver accepted a tampered request")
        except urllib.error.HTTPError as error:
            if error.code != 401:
                fail(f"the README's receiver answered {error.code} to a tampered request")
    finally:
        readme.terminate()
        call(base, "PATCH", "/v1/settings/notifications", key, {"delivery": {"mode": "pull"}})
        recorder.shutdown()
    print("contract: webhooks: the README's receiver verified Herald's deliveries and refused a tampered one", file=sys.stderr)


main()
