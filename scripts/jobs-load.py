#!/usr/bin/env python3
"""Jobs throughput: W workers claim up to MAX jobs and ack them in a loop until the queue is empty.

usage: jobs-load.py URL WORKER_KEY [--workers 4] [--max 100]
Prints jobs/s (claimed and acked) and the claim/ack latencies. A provisional tool until `make bench`.
"""
import argparse, http.client, json, threading, time, urllib.parse

p = argparse.ArgumentParser()
p.add_argument("url"); p.add_argument("key")
p.add_argument("--workers", type=int, default=4); p.add_argument("--max", type=int, default=100)
a = p.parse_args()
u = urllib.parse.urlparse(a.url)
headers = {"Authorization": "Bearer " + a.key, "Content-Type": "application/json"}
lock = threading.Lock(); acked = [0]; calls = []

def worker():
    conn = http.client.HTTPConnection(u.hostname, u.port)
    while True:
        t = time.perf_counter()
        conn.request("POST", "/v1/jobs/claim", body=json.dumps({"max": a.max}), headers=headers)
        jobs = json.loads(conn.getresponse().read())["jobs"]
        if not jobs: return
        conn.request("POST", "/v1/jobs/ack", body=json.dumps({"jobs": [{"id": j["id"], "attempt": j["attempt"]} for j in jobs]}), headers=headers)
        n = json.loads(conn.getresponse().read())["acked"]
        with lock:
            acked[0] += n; calls.append(time.perf_counter() - t)

start = time.perf_counter()
threads = [threading.Thread(target=worker) for _ in range(a.workers)]
for t in threads: t.start()
for t in threads: t.join()
elapsed = time.perf_counter() - start
calls.sort()
print(f"{acked[0]} jobs claimed and acked in {elapsed:.2f} s: {acked[0] / elapsed:.0f} jobs/s "
      f"({a.workers} workers, claim max {a.max}); claim+ack round p50 {calls[len(calls)//2]*1000:.1f} ms, "
      f"p99 {calls[int(len(calls)*0.99)-1]*1000:.1f} ms")
