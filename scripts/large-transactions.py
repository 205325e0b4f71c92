#!/usr/bin/env python3
"""Issue 32, items 1-5: how long the largest single calls the SPEC allows take, by size.

Against a running Herald (`make run` in another shell, or any server and its admin token):

    python3 scripts/large-transactions.py [--url http://127.0.0.1:8080] [--sizes 10,20,30]

For each size n it makes a fresh app with a group of n x 1,000 members and times:
  - one batch of n `message.created`, each mentioning 1,000 members (n x 1,000 users subscribed
    and written to their change feeds in one transaction);
  - a `message.pinned` with largeGroupThreshold 1,000,000 (a sync job and a feed item per member,
    in the ingest transaction);
  - one batch of n replies to a message not seen yet, each mentioning 1,000 members;
  - then that message, a reply itself (a late reply): the n replies and their n x 1,000
    subscriptions move to its root.
The commit step's work is linear in what the call changes: time per 1,000 users should not grow
with n. The admin token is read from HERALD_ADMIN_TOKEN, else from .herald/admin-token.
"""
import argparse, json, os, pathlib, time, urllib.error, urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("--url", default="http://127.0.0.1:8080")
parser.add_argument("--sizes", default="10,20,30")
args = parser.parse_args()
admin = os.environ.get("HERALD_ADMIN_TOKEN") or \
    (pathlib.Path(__file__).resolve().parent.parent / ".herald" / "admin-token").read_text().strip()


def call(method, path, token, body=None, headers=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(args.url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def timed(method, path, token, body):
    start = time.monotonic()
    status, answer = call(method, path, token, body)
    seconds = time.monotonic() - start
    if status != 200 or (isinstance(answer, dict) and answer.get("rejected")):
        raise SystemExit(f"{path}: {status} {json.dumps(answer)[:300]}")
    return seconds


def message(event_id, mid, sender, at, mentions=(), parent=None):
    data = {"id": mid, "sender": sender, "receiverType": "group", "receiver": "g1", "sentAt": at,
            "mentions": list(mentions), "text": "hello"}
    if parent:
        data["parentId"] = parent
    return {"specversion": "1.0", "id": event_id, "source": "lt", "type": "message.created", "data": data}


print(f"{'size':>5} {'users':>7} {'mentions batch':>15} {'per 1k users':>13} {'pin':>8} {'replies':>8} {'rehome':>8}")
for n in [int(x) for x in args.sizes.split(",")]:
    app = f"lt{n}-{time.time_ns() % 10**9}"
    assert call("POST", "/v1/apps", admin, {"id": app})[0] == 201
    keys = {role: call("POST", f"/v1/apps/{app}/keys", admin, {"role": role})[1]["key"] for role in ("ingest", "server")}
    members = [f"m{i:06d}" for i in range(n * 1000)]
    settings = {"largeGroupThreshold": 1000000,
                "groupPreferences": {"messages": {"value": "SUBSCRIBE_TO_MENTIONS", "userCanOverride": True},
                                     "replies": {"value": "SUBSCRIBE_TO_MENTIONS", "userCanOverride": True}}}
    assert call("PATCH", "/v1/settings/notifications", keys["server"], settings)[0] == 200
    assert call("PUT", "/v1/groups/g1/members", keys["server"], {"members": members})[0] == 200
    t0 = int(time.time() * 1000) + 1
    batch = [message(f"e{i}", f"msg{i}", members[0], t0 + i, members[i * 1000:(i + 1) * 1000]) for i in range(n)]
    mentions = timed("POST", "/v1/events", keys["ingest"], batch)
    pin = timed("POST", "/v1/events", keys["ingest"], [{"specversion": "1.0", "id": "pin", "source": "lt",
                "type": "message.pinned", "data": {"messageId": "msg0", "by": members[1], "receiverType": "group",
                                                   "receiver": "g1", "at": t0 + 100}}])
    replies = timed("POST", "/v1/events", keys["ingest"],
                    [message(f"r{i}", f"r{i}", members[1], t0 + 200 + i, members[i * 1000:(i + 1) * 1000], parent="mid")
                     for i in range(n)])
    rehome = timed("POST", "/v1/events", keys["ingest"], [message("mid", "mid", members[2], t0 + 150, parent="msg0")])
    print(f"{n:>5} {n * 1000:>7} {mentions:>13.2f} s {mentions / n:>11.3f} s {pin:>6.2f} s {replies:>6.2f} s {rehome:>6.2f} s", flush=True)
