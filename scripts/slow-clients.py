#!/usr/bin/env python3
"""Issue 12, item 1: hold many slow connections and time what a fresh client gets meanwhile.

Against a running Herald (`make run` in another shell):

    python3 scripts/slow-clients.py [--url http://127.0.0.1:8080] [--sockets 2000] [--rounds 5]

Each slow socket sends a partial request head and then one byte every 2 s. Meanwhile, on fresh
connections, it times GET /healthz and a POST /v1/events with the demo ingest key
(.herald/demo-keys), then reports how long the server took to close the slow sockets (the header
deadline, HERALD_HEADER_TIMEOUT_SECONDS, 10 s by default).
"""
import argparse, json, resource, select, socket, time, urllib.parse, urllib.request, pathlib

parser = argparse.ArgumentParser()
parser.add_argument("--url", default="http://127.0.0.1:8080")
parser.add_argument("--sockets", type=int, default=2000)
parser.add_argument("--rounds", type=int, default=5)
args = parser.parse_args()
target = urllib.parse.urlparse(args.url)
host, port = target.hostname, target.port or 80

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.sockets + 256)), hard))
keys = pathlib.Path(__file__).resolve().parent.parent / ".herald" / "demo-keys"
ingest = next(line.split("=", 1)[1].strip() for line in keys.read_text().splitlines() if line.startswith("ingest="))

def timed(request):
    start = time.monotonic()
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()
        return response.status, (time.monotonic() - start) * 1000

slow = []
opened_at = time.monotonic()
for _ in range(args.sockets):
    s = socket.create_connection((host, port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    slow.append(s)
print(f"{len(slow)} slow sockets open, each holding a partial head")

health, events = [], []
for n in range(args.rounds):
    status, ms = timed(f"{args.url}/healthz")
    health.append(ms)
    batch = json.dumps([{"specversion": "1.0", "id": f"slow-{time.time_ns()}", "source": "slow-clients",
                         "type": "message.created",
                         "data": {"id": f"slow-{time.time_ns()}", "sender": "alice", "receiverType": "group",
                                  "receiver": "slow-clients", "sentAt": int(time.time() * 1000)}}]).encode()
    request = urllib.request.Request(f"{args.url}/v1/events", data=batch, method="POST",
                                     headers={"Authorization": f"Bearer {ingest}", "Content-Type": "application/json"})
    status2, ms2 = timed(request)
    events.append(ms2)
    print(f"round {n + 1}: /healthz {status} in {ms:.1f} ms, POST /v1/events {status2} in {ms2:.1f} ms")
    for s in slow:
        try: s.send(b"X")
        except OSError: pass
    time.sleep(2)

# Keep dribbling until every slow socket is closed by the server.
open_ = {s.fileno(): s for s in slow}
poller = select.poll()
for fd in open_: poller.register(fd, select.POLLIN)
last_close = opened_at
while open_ and time.monotonic() - opened_at < 120:
    for fd, _ in poller.poll(1000):
        s = open_.get(fd)
        if s is None: continue
        try: closed = s.recv(4096) == b""
        except OSError: closed = True
        if closed:
            poller.unregister(fd)
            del open_[fd]
            last_close = time.monotonic()
    for s in open_.values():
        try: s.send(b"X")
        except OSError: pass
print(f"/healthz: {min(health):.1f}-{max(health):.1f} ms; ingest: {min(events):.1f}-{max(events):.1f} ms")
print(f"slow sockets closed by the server: {args.sockets - len(open_)} of {args.sockets}, "
      f"the last {last_close - opened_at:.1f} s after the first opened" if not open_ else f"{len(open_)} still open after 120 s")
