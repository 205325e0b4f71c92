#!/usr/bin/env python3
"""A first ingest load: batches of reply events over keep-alive HTTP from several client threads.

usage: ingest-load.py URL INGEST_KEY [--batches N] [--batch 100] [--clients 4] [--groups 1000]
Prints events/s and the latency of each batch (p50/p99). A provisional tool until `make bench`.
"""
import argparse, http.client, json, threading, time, urllib.parse, random

p = argparse.ArgumentParser()
p.add_argument("url"); p.add_argument("key")
p.add_argument("--batches", type=int, default=200); p.add_argument("--batch", type=int, default=100)
p.add_argument("--clients", type=int, default=4); p.add_argument("--groups", type=int, default=1000)
a = p.parse_args()
u = urllib.parse.urlparse(a.url)
run = str(int(time.time() * 1000))
base = int(time.time() * 1000) - 3_600_000

def batch_body(n):
    events = []
    for i in range(a.batch):
        k = n * a.batch + i
        g = k % a.groups
        thread = f"t{run}-{g}"
        sender = f"u{(k * 7) % 50}"
        data = {"id": f"r{run}-{k}", "sender": sender, "receiverType": "group", "receiver": f"g{g}",
                "parentId": thread, "parentSender": "u0", "sentAt": base + k, "text": "reply text " * 5,
                "mentions": [f"u{(k * 13) % 50}"] if k % 10 == 0 else []}
        events.append({"specversion": "1.0", "id": f"e{run}-{k}", "source": "load", "type": "message.created", "data": data})
    return json.dumps(events)

bodies = [batch_body(n) for n in range(a.batches)]
latencies = []; lock = threading.Lock(); next_index = [0]; accepted = [0]

def client():
    conn = http.client.HTTPConnection(u.hostname, u.port)
    while True:
        with lock:
            n = next_index[0]; next_index[0] += 1
        if n >= len(bodies): return
        t = time.perf_counter()
        conn.request("POST", "/v1/events", body=bodies[n], headers={"Authorization": "Bearer " + a.key, "Content-Type": "application/cloudevents-batch+json"})
        r = conn.getresponse(); body = json.loads(r.read())
        with lock:
            latencies.append(time.perf_counter() - t); accepted[0] += body.get("accepted", 0)

start = time.perf_counter()
threads = [threading.Thread(target=client) for _ in range(a.clients)]
for t in threads: t.start()
for t in threads: t.join()
elapsed = time.perf_counter() - start
latencies.sort()
print(f"{accepted[0]} events accepted in {elapsed:.2f} s: {accepted[0] / elapsed:.0f} events/s "
      f"({a.batches} batches of {a.batch}, {a.clients} clients, {a.groups} groups); "
      f"batch latency p50 {latencies[len(latencies)//2]*1000:.1f} ms, p99 {latencies[int(len(latencies)*0.99)-1]*1000:.1f} ms")
