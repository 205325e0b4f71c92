"""Gives the contract-test app something to answer about (scripts/contract-test.sh).

Generated ids name nothing, so without data every thread, subscription and routing route would
answer only 404 and their 200 bodies would never be checked against the document. This posts,
through the API, a group g1 with alice, bob and carol, a thread m1 (bob) with a reply m2 (alice,
mentioning carol), and a one-on-one thread d1 (alice to bob) with a reply d2 — which also makes
push jobs to claim. contract_hooks.py sends these ids in part of the generated requests.

Usage: contract_seed.py BASE_URL SERVER_KEY
"""
import json
import sys
import time
import urllib.request

UIDS = ["alice", "bob", "carol"]
GUIDS = ["g1"]
MESSAGES = ["m1", "m2", "d1", "d2"]


def events(now):
    def event(eid, kind, data):
        return {"specversion": "1.0", "id": eid, "source": "contract", "type": kind, "data": data}

    def message(eid, mid, sender, at, text, parent=None, group="g1", peer=None, mentions=()):
        data = {"id": mid, "sender": sender, "sentAt": at, "text": text, "mentions": list(mentions)}
        data.update({"receiverType": "user", "receiver": peer} if peer else {"receiverType": "group", "receiver": group})
        if parent:
            data["parentId"] = parent
        return event(eid, "message.created", data)

    joined = [event("join-" + uid, "member.joined", {"guid": "g1", "uid": uid, "at": now - 120_000}) for uid in UIDS]
    return joined + [
        message("e-m1", "m1", "bob", now - 60_000, "Release plan?"),
        message("e-m2", "m2", "alice", now - 30_000, "hi <@uid:carol>", parent="m1", mentions=["carol"]),
        message("e-d1", "d1", "alice", now - 20_000, "lunch?", peer="bob"),
        message("e-d2", "d2", "bob", now - 10_000, "yes", parent="d1", peer="alice"),
    ]


def main():
    base, key = sys.argv[1], sys.argv[2]
    body = json.dumps(events(int(time.time() * 1000))).encode()
    request = urllib.request.Request(base + "/v1/events", data=body, method="POST", headers={
        "Authorization": "Bearer " + key, "Content-Type": "application/cloudevents-batch+json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        result = json.load(response)
    if result.get("accepted") != len(UIDS) + len(MESSAGES):
        sys.exit("contract: seeding events failed: " + json.dumps(result))


if __name__ == "__main__":
    main()
