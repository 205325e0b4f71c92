#!/usr/bin/env python3
"""Citus load with a rebalance (issue 39): several apps, two Herald instances on the coordinator,
a third worker added and the shards rebalanced while the load runs; then nothing lost or
duplicated.

usage: citus_load.py HERALD_BINARY CITUS_DIR [--apps N] [--seconds S]

Started by `make citus-test` (scripts/citus-test.sh), after the integration suite, on the cluster
that scripts/citus.sh made in CITUS_DIR (a coordinator and two workers). Each app has a 10-member
group; per app a bus of 2 threads posts batches of 10 message.created events (each makes 9 jobs)
and 2 push workers claim and ack. After a warm-up the script adds a worker
(`scripts/citus.sh add-worker`) and runs `citus_rebalance_start(shard_transfer_mode =>
'block_writes')` (Herald's unlogged tables cannot be moved by logical replication) and waits for
it, while the load goes on; then the buses stop, the workers drain the queues, and each app is
counted as in the fleet test (scripts/fleet_test.py): events sent/accepted/lost, jobs
expected/produced/duplicated/acked. Exit 1 on any loss, duplicate, job never acked or answer 500.
"""
import argparse, os, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_test import ROOT, Bus, Fleet, Herald, Stats, Workers, make_app, put_members, say  # noqa: E402

MEMBERS = 10


def psql(url, sql):
    return subprocess.run(["psql", url, "-AtXqc", sql], check=True, capture_output=True, text=True).stdout.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("citus_dir")
    parser.add_argument("--apps", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=8, help="load before the rebalance starts, and again after it ends")
    args = parser.parse_args()
    url = subprocess.run(["bash", os.path.join(ROOT, "scripts/citus.sh"), "url", args.citus_dir],
                         check=True, capture_output=True, text=True).stdout.strip()
    env = {"DATABASE_URL": url, "HERALD_THREADS": "8", "HERALD_DB_POOL_SIZE": "12"}
    logdir = os.path.join(args.citus_dir, "load-logs")
    os.makedirs(logdir, exist_ok=True)
    instances = [Herald(args.binary, i, env, logdir) for i in range(2)]
    # Herald adds application_name to the URL in the fleet test's conninfo form; a URL takes it as a parameter.
    for h in instances:
        h.env = dict(env, DATABASE_URL=url)
    orig_start = Herald.start

    def start(self):
        e = dict(os.environ, **self.env, HERALD_LISTEN=f"127.0.0.1:{self.port}", HERALD_ADMIN_TOKEN="fleet-admin-token-0123456789")
        self.process = subprocess.Popen([self.binary, "serve"], env=e, stdout=self.log, stderr=self.log, cwd=ROOT)
    Herald.start = start
    instances[0].start(); instances[0].wait_ready(120)
    instances[1].start(); instances[1].wait_ready(120)
    Herald.start = orig_start

    stats = Stats()
    fleet = Fleet(instances, stats)
    members = [f"u{i}" for i in range(MEMBERS)]
    crews = []
    for a in range(args.apps):
        app = f"load{a}-{int(time.time())}"
        keys = make_app(args.binary, env, app)
        put_members(fleet, keys["server"], "g", members)
        bus = Bus(fleet, keys["ingest"], "g", members, app, threads=2)
        workers = Workers(fleet, keys["worker"], threads=2, lease=30)
        crews.append((app, bus, workers))
    placement = psql(url, "SELECT string_agg(n || ':' || c, ' ' ORDER BY n) FROM (SELECT nodeport AS n, count(*) AS c FROM citus_shards GROUP BY 1) x")
    say(f"{args.apps} apps, 2 instances; shards by worker port before: {placement}")
    started = time.time()
    for _, bus, workers in crews:
        bus.start(); workers.start()
    time.sleep(args.seconds)

    port = subprocess.run(["bash", os.path.join(ROOT, "scripts/citus.sh"), "add-worker", args.citus_dir],
                          check=True, capture_output=True, text=True).stdout.strip()
    t0 = time.time()
    psql(url, "SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')")
    psql(url, "SELECT citus_rebalance_wait()")
    rebalance = time.time() - t0
    placement = psql(url, "SELECT string_agg(n || ':' || c, ' ' ORDER BY n) FROM (SELECT nodeport AS n, count(*) AS c FROM citus_shards GROUP BY 1) x")
    moved = psql(url, "SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid WHERE n.nodeport = " + port)
    say(f"worker {port} added; rebalance took {rebalance:.1f} s under load; shard placements on it: {moved}; by port: {placement}")
    time.sleep(args.seconds)
    for _, bus, _ in crews:
        bus.finish()
    posting = time.time() - started

    ok = True
    total_events = total_jobs = 0
    for app, bus, workers in crews:
        expected = len(bus.accepted) * (MEMBERS - 1)
        deadline = time.time() + 180
        while time.time() < deadline:
            acked = int(psql(url, f"SELECT count(*) FROM jobs WHERE app = '{app}' AND state = 'acked'"))
            if acked >= expected:
                break
            time.sleep(0.5)
        workers.finish()
        present = set(psql(url, f"SELECT id FROM events WHERE app = '{app}'").split())
        lost = len(set(bus.accepted) - present)
        row = psql(url, f"""SELECT count(DISTINCT (message_id, recipient)), count(*) - count(DISTINCT (message_id, recipient)),
                                   count(*) FILTER (WHERE state = 'acked') FROM jobs WHERE app = '{app}'""")
        produced, duplicated, acked = map(int, row.split("|"))
        twice = sum(1 for n in workers.claims.values() if n > 1)
        good = lost == 0 and duplicated == 0 and produced == expected and acked == expected
        ok = ok and good
        total_events += len(bus.accepted)
        total_jobs += produced
        say(f"  {app}: events sent {len(bus.sent):,} accepted {len(bus.accepted):,} lost {lost}; jobs expected {expected:,} "
            f"produced {produced:,} duplicated {duplicated} acked {acked:,}; claimed twice {twice}  {'ok' if good else 'FAILED'}")
    answers = ", ".join(f"{k}: {v:,}" for k, v in sorted(stats.statuses.items(), key=lambda kv: str(kv[0])))
    say(f"answers {answers}")
    say(f"all apps: {total_events:,} events, {total_jobs:,} jobs in {posting:.1f} s of posting "
        f"({total_events / posting:,.0f} events/s, {total_jobs / posting:,.0f} jobs/s)")
    ok = ok and stats.statuses.get(500, 0) == 0
    for h in instances:
        h.stop()
    say("result " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
