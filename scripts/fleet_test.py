#!/usr/bin/env python3
"""Fleet test: several `herald serve` instances on one database, under faults (issue 19).

usage: fleet_test.py HERALD_BINARY [--only kill,fanout,failover,pgbouncer] [--keep DIR]

Started by `make fleet-test` (scripts/fleet-test.sh, which builds the binary and installs
PostgreSQL and PgBouncer). Everything is real and on loopback: PostgreSQL 15 clusters in a
temporary folder (a synchronous standby for the failover), PgBouncer, three Herald instances,
a bus that posts events and retries each batch on the next instance until it gets a 200, and
four push workers that claim and ack. The client rotates over the instances (no balancer):
a request that finds its instance dead, or gets 503/429, goes to the next one.

Each fault prints events sent/accepted/lost, jobs expected/produced/duplicated/acked and the
time to recover, and the run fails (exit 1) on any lost event, duplicated job, job never
acked, or answer 500.

Definitions:
  sent       distinct events the bus posted
  accepted   events Herald answered "accepted" or "duplicate" for (a duplicate was accepted by
             an earlier try whose answer was lost)
  lost       accepted events that are not in the database at the end
  expected   jobs the accepted events must make (one per other member of the group)
  produced   distinct (message, recipient) jobs in the database
  duplicated job rows beyond one per (message, recipient)
  acked      jobs acknowledged by a worker (state 'acked' at the end)
  redelivered  jobs acked after a second claim (at-least-once delivery: a worker's ack was lost
             with its instance, the lease ran out and another worker got the job again)
"""
import argparse, collections, http.client, json, os, random, shutil, signal, socket, subprocess, sys, tempfile, threading, time

PGBIN = sorted((os.path.join("/usr/lib/postgresql", v, "bin") for v in os.listdir("/usr/lib/postgresql")),
               key=lambda p: int(p.split("/")[-2]))[-1]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADMIN = "fleet-admin-token-0123456789"
IS_ROOT = os.geteuid() == 0
MEMBERS = 10          # the group of the kill and failover faults: each event makes 9 jobs
BIG = 50_000          # the large group


def say(*parts):
    print(*parts, flush=True)


def as_owner(args):
    return (["runuser", "-u", "postgres", "--"] + args) if IS_ROOT else args


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A PostgreSQL cluster in a folder, reached over a unix socket in <dir>/run."""

    def __init__(self, base, name):
        self.dir = os.path.join(base, name)
        self.data = os.path.join(self.dir, "data")
        self.run = os.path.join(self.dir, "run")
        self.user = "postgres" if IS_ROOT else os.environ.get("USER", "postgres")

    def conninfo(self, db="herald"):
        return f"host={self.run} dbname={db} user={self.user}"

    def _prepare(self):
        os.makedirs(self.run, exist_ok=True)
        if IS_ROOT:
            subprocess.run(["chown", "-R", "postgres:postgres", self.dir], check=True)
        os.chmod(self.run, 0o700)

    def init(self, extra=()):
        os.makedirs(self.data, exist_ok=True)
        self._prepare()
        os.chmod(self.data, 0o700)
        subprocess.run(as_owner([f"{PGBIN}/initdb", "-D", self.data, "-U", self.user, "--auth=trust", "-E", "UTF8",
                                 "--locale=C.UTF-8"]), check=True, stdout=subprocess.DEVNULL)
        self.configure(["listen_addresses = ''", "max_connections = 300", "shared_buffers = 128MB",
                        "wal_level = replica", "max_wal_senders = 4", *extra])

    def configure(self, lines):
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"unix_socket_directories = '{self.run}'\nunix_socket_permissions = 0700\n")
            for line in lines:
                f.write(line + "\n")

    def standby_of(self, primary):
        os.makedirs(self.dir, exist_ok=True)
        self._prepare()
        subprocess.run(as_owner([f"{PGBIN}/pg_basebackup", "-h", primary.run, "-U", self.user, "-D", self.data, "-R",
                                 "-X", "stream", "-c", "fast"]), check=True)
        with open(os.path.join(self.data, "postgresql.auto.conf"), "a") as f:
            f.write(f"primary_conninfo = 'host={primary.run} user={self.user} application_name={os.path.basename(self.dir)}'\n")
        self.configure([])

    def start(self):
        subprocess.run(as_owner([f"{PGBIN}/pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "postgres.log"),
                                 "-w", "-t", "60", "start"]), check=True, stdout=subprocess.DEVNULL)

    def create_database(self):
        self.sql("CREATE DATABASE herald", db="postgres")

    def stop(self, mode="fast"):
        subprocess.run(as_owner([f"{PGBIN}/pg_ctl", "-D", self.data, "-m", mode, "-w", "stop"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def promote(self):
        subprocess.run(as_owner([f"{PGBIN}/pg_ctl", "-D", self.data, "-w", "promote"]), check=True, stdout=subprocess.DEVNULL)

    def sql(self, text, db="herald"):
        out = subprocess.run([f"{PGBIN}/psql", "-X", "-qtA", "-v", "ON_ERROR_STOP=1", "-h", self.run, "-U", self.user,
                              "-d", db, "-c", text], check=True, capture_output=True, text=True)
        return out.stdout.strip()


class Herald:
    """One `herald serve` process, restartable on the same port."""

    def __init__(self, binary, index, env, logdir):
        self.binary, self.index, self.env = binary, index, env
        self.port = free_port()
        self.log = open(os.path.join(logdir, f"herald-{index}.log"), "ab")
        self.process = None

    def start(self):
        env = dict(os.environ, **self.env, HERALD_LISTEN=f"127.0.0.1:{self.port}", HERALD_ADMIN_TOKEN=ADMIN)
        env["DATABASE_URL"] = env["DATABASE_URL"] + f" application_name=herald-{self.index}"
        self.process = subprocess.Popen([self.binary, "serve"], env=env, stdout=self.log, stderr=self.log, cwd=ROOT)

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.kill()

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"herald-{self.index} exited with {self.process.returncode}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"herald-{self.index} not ready in {timeout}s")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.statuses = collections.Counter()
        self.retry_spans = []                  # seconds from a request's first failure to its success

    def status(self, code):
        with self.lock:
            self.statuses[code] += 1


class Fleet:
    """The client side: requests rotate over the instances; failures move on to the next."""

    def __init__(self, instances, stats):
        self.instances = instances
        self.stats = stats
        self.next = random.randrange(len(instances))
        self.local = threading.local()

    def _connection(self, instance):
        pool = getattr(self.local, "pool", None)
        if pool is None:
            pool = self.local.pool = {}
        c = pool.get(instance.port)
        if c is None:
            c = pool[instance.port] = http.client.HTTPConnection("127.0.0.1", instance.port, timeout=40)
        return c

    def _drop(self, instance):
        c = self.local.pool.pop(instance.port, None)
        if c:
            c.close()

    def once(self, instance, method, path, body, key, content_type="application/json", timeout=None):
        """One try: (status, headers, parsed body) or None when the instance did not answer."""
        headers = {"Authorization": "Bearer " + key}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        try:
            c = self._connection(instance)
            c.timeout = timeout or 40
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            raw = r.read()
            self.stats.status(r.status)
            return r.status, dict(r.getheaders()), (json.loads(raw) if raw else None)
        except (OSError, http.client.HTTPException, ValueError):
            self._drop(instance)
            self.stats.status("no answer")
            return None

    def request(self, method, path, body, key, content_type="application/json", give_up=600):
        """Retries on the next instance until a 2xx/4xx other than 429; returns (status, body)."""
        started = time.time()
        failed_at = None
        while True:
            instance = self.instances[self.next % len(self.instances)]
            self.next += 1
            answer = self.once(instance, method, path, body, key, content_type)
            if answer is not None and answer[0] < 500 and answer[0] != 429:
                if failed_at is not None:
                    with self.stats.lock:
                        self.stats.retry_spans.append(time.time() - failed_at)
                return answer[0], answer[2]
            if answer is not None and answer[0] == 500:
                raise RuntimeError(f"500 from herald-{instance.index} on {method} {path}: {answer[2]}")
            if failed_at is None:
                failed_at = time.time()
            if time.time() - started > give_up:
                raise RuntimeError(f"{method} {path}: no instance answered for {give_up}s")
            if answer is not None and answer[0] == 503:
                assert "Retry-After" in answer[1], "a 503 without Retry-After"
            time.sleep(0.05)


def message(event_id, msg_id, sender, group, at):
    return {"specversion": "1.0", "id": event_id, "source": "fleet", "type": "message.created",
            "data": {"id": msg_id, "sender": sender, "receiverType": "group", "receiver": group, "sentAt": at,
                     "text": f"fleet message {msg_id}", "mentions": [], "mentionsAll": False}}


class Crew:
    """Threads that run `run(n)` until `stop` is set; `finish` joins them and raises what failed."""
    name = "crew"

    def __init__(self, threads):
        self.threads = threads
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.errors = []

    def start(self):
        self.threads_running = [threading.Thread(target=self.guarded, args=(n,), daemon=True) for n in range(self.threads)]
        for t in self.threads_running:
            t.start()

    def guarded(self, n):
        try:
            self.run(n)
        except Exception as e:  # noqa: BLE001 - reported by finish()
            self.errors.append(repr(e))

    def finish(self):
        self.stop.set()
        for t in self.threads_running:
            t.join()
        if self.errors:
            raise RuntimeError(f"{self.name}: " + "; ".join(self.errors[:3]))


class Bus(Crew):
    """Threads posting batches of new events until stopped; each batch is retried until a 200."""

    def __init__(self, fleet, key, group, members, prefix, threads=4, batch=10):
        super().__init__(threads)
        self.name = "bus"
        self.fleet, self.key, self.group, self.members, self.prefix = fleet, key, group, members, prefix
        self.batch = batch
        self.sent, self.accepted = set(), set()
        self.accept_times = []

    def run(self, n):
        k = 0
        while not self.stop.is_set():
            events = []
            for _ in range(self.batch):
                k += 1
                eid = f"{self.prefix}-{n}-{k}"
                events.append(message(eid, "m" + eid, random.choice(self.members), self.group, int(time.time() * 1000)))
            with self.lock:
                self.sent.update(e["id"] for e in events)
            status, body = self.fleet.request("POST", "/v1/events", events, self.key, "application/cloudevents-batch+json")
            if status != 200:
                raise RuntimeError(f"ingest answered {status}: {body}")
            ok = [r["id"] for r in body["results"] if r["status"] in ("accepted", "duplicate")]
            if len(ok) != len(events):
                raise RuntimeError(f"events not accepted: {body}")
            with self.lock:
                self.accepted.update(ok)
                self.accept_times.append(time.time())


class Workers(Crew):
    """Push senders: claim (long poll) and ack, through the fleet, until told to stop."""

    def __init__(self, fleet, key, threads=4, max_jobs=200, lease=5):
        super().__init__(threads)
        self.name = "workers"
        self.fleet, self.key, self.max_jobs, self.lease = fleet, key, max_jobs, lease
        self.acked = collections.Counter()     # job id -> acks that counted
        self.claims = collections.Counter()    # job id -> claims
        self.errors = []

    def run(self, n):
        while not self.stop.is_set():
            status, body = self.fleet.request("POST", "/v1/jobs/claim",
                                              {"max": self.max_jobs, "leaseSeconds": self.lease, "waitSeconds": 1}, self.key)
            if status != 200:
                raise RuntimeError(f"claim answered {status}: {body}")
            jobs = body["jobs"]
            if not jobs:
                continue
            with self.lock:
                for j in jobs:
                    self.claims[j["id"]] += 1
            status, body = self.fleet.request("POST", "/v1/jobs/ack",
                                              {"jobs": [{"id": j["id"], "attempt": j["attempt"]} for j in jobs]}, self.key)
            if status != 200:
                raise RuntimeError(f"ack answered {status}: {body}")
            stale = {s["id"] if isinstance(s, dict) else s for s in body.get("stale", [])}
            with self.lock:
                for j in jobs:
                    if j["id"] not in stale:
                        self.acked[j["id"]] += 1


def make_app(binary, env, app):
    env = dict(os.environ, **env)
    subprocess.run([binary, "apps", "create", app, "--exists-ok"], env=env, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    keys = {}
    for role in ("server", "ingest", "worker"):
        out = subprocess.run([binary, "keys", "create", "--app", app, "--role", role, "--label", "fleet"], env=env,
                             check=True, capture_output=True, text=True, cwd=ROOT).stdout
        keys[role] = json.loads(out)["key"]
    return keys


def put_members(fleet, key, group, members):
    status, body = fleet.request("PUT", f"/v1/groups/{group}/members", {"members": members}, key)
    assert status == 200, (status, body)


def wait_drained(cluster, app, expected, timeout=180):
    """Until every job of the app is acked (or the time runs out)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        row = cluster.sql(f"SELECT count(*) FILTER (WHERE state = 'acked'), count(*) FROM jobs WHERE app = '{app}'")
        acked, total = map(int, row.split("|"))
        if total >= expected and acked == total:
            return
        time.sleep(0.5)


def tally(cluster, app, bus_accepted, bus_sent, expected, workers):
    """The figures of one fault, read from the database."""
    present = set(cluster.sql(f"SELECT id FROM events WHERE app = '{app}'").split()) if bus_accepted else set()
    lost = len(set(bus_accepted) - present)
    row = cluster.sql(f"""SELECT count(DISTINCT (message_id, recipient)), count(*) - count(DISTINCT (message_id, recipient)),
                                 count(*) FILTER (WHERE state = 'acked')
                            FROM jobs WHERE app = '{app}'""")
    produced, duplicated, acked = map(int, row.split("|"))
    redelivered = sum(1 for n in workers.claims.values() if n > 1)
    return {"sent": len(bus_sent), "accepted": len(bus_accepted), "lost": lost, "expected": expected,
            "produced": produced, "duplicated": duplicated, "acked": acked, "never acked": expected - acked,
            "claimed twice": redelivered}


def report(name, figures, recovery, stats):
    say(f"\n== {name}")
    say("  events   sent {sent:>7,}  accepted {accepted:>7,}  lost {lost}".format(**figures))
    say("  jobs     expected {expected:>7,}  produced {produced:>7,}  duplicated {duplicated}  acked {acked:>7,}  never acked {never acked}"
        .format(**figures))
    say(f"  claimed twice (at-least-once redelivery after a lost ack or lease): {figures['claimed twice']:,}")
    for line in recovery:
        say("  " + line)
    say("  answers  " + ", ".join(f"{k}: {v:,}" for k, v in sorted(stats.statuses.items(), key=lambda kv: str(kv[0]))))
    ok = figures["lost"] == 0 and figures["duplicated"] == 0 and figures["never acked"] == 0 \
        and figures["produced"] == figures["expected"] and stats.statuses.get(500, 0) == 0
    say("  result   " + ("ok" if ok else "FAILED"))
    return ok


def spans(stats):
    s = sorted(stats.retry_spans)
    if not s:
        return "client retries: none"
    return f"client retries: {len(s):,} requests retried; longest until answered {s[-1]:.2f} s, median {s[len(s)//2]*1000:.0f} ms"


# ---------------------------------------------------------------- faults


def scratch_cluster(base, name):
    """A throwaway cluster (no fsync: these faults kill processes, not the machine)."""
    db = Cluster(base, name)
    db.init(["fsync = off", "synchronous_commit = off", "full_page_writes = off"])
    db.start(); db.create_database()
    return db


def start_all(instances):
    """The first instance migrates alone, then the others start."""
    instances[0].start(); instances[0].wait_ready()
    for h in instances[1:]:
        h.start()
    for h in instances[1:]:
        h.wait_ready()


def load(binary, env, instances, prefix):
    """An app, a 10-member group, and the bus and the workers running against it."""
    keys = make_app(binary, env, "fleet")
    stats = Stats()
    fleet = Fleet(instances, stats)
    members = [f"u{i}" for i in range(MEMBERS)]
    put_members(fleet, keys["server"], "g", members)
    bus = Bus(fleet, keys["ingest"], "g", members, prefix)
    workers = Workers(fleet, keys["worker"])
    bus.start(); workers.start()
    return keys, stats, fleet, bus, workers


def fault_kill(binary, base):
    """1. SIGKILL one instance every 3 s during ingest and claims, restarting it each time."""
    db = scratch_cluster(base, "kill")
    env = {"DATABASE_URL": db.conninfo(), "HERALD_THREADS": "8", "HERALD_FANOUT_LEASE_SECONDS": "5"}
    instances = [Herald(binary, i, env, base) for i in range(1, 4)]
    try:
        start_all(instances)
        keys, stats, fleet, bus, workers = load(binary, env, instances, "k")
        kills, restarts = 0, []
        end = time.time() + 30
        while time.time() < end:
            time.sleep(3)
            victim = random.choice(instances)
            victim.kill(); kills += 1
            time.sleep(1)
            t = time.time()
            victim.start(); victim.wait_ready()
            restarts.append(time.time() - t)
        bus.finish()
        expected = len(bus.accepted) * (MEMBERS - 1)
        wait_drained(db, "fleet", expected)
        workers.finish()
        figures = tally(db, "fleet", bus.accepted, bus.sent, expected, workers)
        return report("1. SIGKILL an instance every 3 s (30 s of ingest and claims)", figures, [
            f"kills    {kills} (each restarted after 1 s; restart to /readyz 200: max {max(restarts):.2f} s)",
            spans(stats)], stats)
    finally:
        for h in instances:
            h.kill()
        db.stop("immediate")


def fault_fanout(binary, base):
    """2. A 50,000-member fan-out whose instance is killed mid-task: another finishes it once."""
    db = scratch_cluster(base, "fanout")
    env = {"DATABASE_URL": db.conninfo(), "HERALD_THREADS": "8", "HERALD_FANOUT_LEASE_SECONDS": "5"}
    instances = [Herald(binary, i, env, base) for i in range(1, 4)]
    try:
        for h in instances:
            h.start()
        for h in instances:
            h.wait_ready()
        keys = make_app(binary, env, "fleet")
        stats = Stats()
        fleet = Fleet(instances, stats)
        members = [f"b{i:05d}" for i in range(BIG)]
        put_members(fleet, keys["server"], "big", members)
        # Post to instance 1: ingest wakes its own fan-out worker at once, the others look every second.
        status, _, body = fleet.once(instances[0], "POST", "/v1/events",
                                     message("big-1", "mbig-1", members[0], "big", int(time.time() * 1000)), keys["ingest"],
                                     "application/cloudevents+json")
        assert status == 200 and body["accepted"] == 1, body
        # Which instance works the task: its connection runs the chunk's statements.
        seen = collections.Counter()
        deadline = time.time() + 10
        progress = ""
        while time.time() < deadline and (sum(seen.values()) < 5 or not progress):
            for name in db.sql("""SELECT application_name FROM pg_stat_activity
                                   WHERE state = 'active' AND application_name LIKE 'herald-%'
                                     AND (query ILIKE '%fanout_tasks%' OR query ILIKE '%INSERT INTO job%')""").split():
                seen[name] += 1
            progress = db.sql("SELECT coalesce(after_uid, '') FROM fanout_tasks WHERE app = 'fleet' AND NOT done")
            time.sleep(0.01)
        holder = int(seen.most_common(1)[0][0].split("-")[1]) if seen else 1
        victim = instances[holder - 1]
        victim.kill()
        killed = time.time()
        time.sleep(0.3)   # a commit the victim had sent before it died still lands
        at_kill = db.sql("SELECT coalesce(after_uid, '(none)') || ' ' || done FROM fanout_tasks WHERE app = 'fleet'")
        jobs_at_kill = int(db.sql("SELECT count(*) FROM jobs WHERE app = 'fleet'"))
        say(f"  fanout: killed herald-{holder} (seen working the task {seen.most_common(1)[0][1] if seen else 0} times) "
            f"at after_uid {at_kill}, {jobs_at_kill:,} of {BIG - 1:,} jobs made")
        survivors = [h for h in instances if h is not victim]
        resumed, resumer = None, collections.Counter()
        while time.time() - killed < 180:
            state = db.sql("SELECT coalesce(after_uid, '(none)') || ' ' || done FROM fanout_tasks WHERE app = 'fleet'")
            if resumed is None and state != at_kill:
                resumed = time.time() - killed
            if resumed is not None:
                for name in db.sql("""SELECT application_name FROM pg_stat_activity
                                       WHERE state = 'active' AND application_name LIKE 'herald-%'
                                         AND (query ILIKE '%fanout_tasks%' OR query ILIKE '%INSERT INTO job%')""").split():
                    resumer[name] += 1
            if state.endswith(" true"):
                break
            time.sleep(0.05)
        finished = time.time() - killed
        done = db.sql("SELECT done FROM fanout_tasks WHERE app = 'fleet'") == "t"
        victim.start(); victim.wait_ready()
        workers = Workers(Fleet(survivors + [victim], stats), keys["worker"], max_jobs=1000, lease=30)
        workers.start()
        wait_drained(db, "fleet", BIG - 1)
        workers.finish()
        figures = tally(db, "fleet", {"big-1"}, {"big-1"}, BIG - 1, workers)
        return report(f"2. SIGKILL the instance working a {BIG:,}-member fan-out", figures, [
            f"task     done: {done}; resumed {resumed or 0:.2f} s after the kill by "
            f"{', '.join(resumer) or 'another instance'} (HERALD_FANOUT_LEASE_SECONDS=5); finished {finished:.2f} s after the kill",
            spans(stats)], stats) and done
    finally:
        for h in instances:
            h.kill()
        db.stop("immediate")


def fault_failover(binary, base):
    """3. Primary failover: synchronous standby, stop the primary hard, promote the standby."""
    a, b = Cluster(base, "primary"), Cluster(base, "standby")
    a.init(["synchronous_commit = on"])
    a.start(); a.create_database()
    b.standby_of(a)
    b.start()
    a.sql("ALTER SYSTEM SET synchronous_standby_names = '*'", db="postgres")
    a.sql("SELECT pg_reload_conf()", db="postgres")
    deadline = time.time() + 30
    while a.sql("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'", db="postgres") != "1":
        assert time.time() < deadline, "the standby is not synchronous"
        time.sleep(0.2)
    url = f"host={a.run},{b.run} dbname=herald user={a.user} target_session_attrs=read-write"
    env = {"DATABASE_URL": url, "HERALD_THREADS": "8", "HERALD_FANOUT_LEASE_SECONDS": "5"}
    instances = [Herald(binary, i, env, base) for i in range(1, 4)]
    try:
        start_all(instances)
        keys, stats, fleet, bus, workers = load(binary, env, instances, "f")
        time.sleep(8)
        before = len(bus.accepted)
        a.stop("immediate")
        stopped = time.time()
        time.sleep(2)
        during = collections.Counter(stats.statuses)
        b.promote()
        promoted = time.time()
        time.sleep(12)
        bus.finish()
        after_times = [t for t in bus.accept_times if t > stopped]
        first = min(after_times) if after_times else None
        expected = len(bus.accepted) * (MEMBERS - 1)
        wait_drained(b, "fleet", expected)
        workers.finish()
        figures = tally(b, "fleet", bus.accepted, bus.sent, expected, workers)
        gap = {k: v for k, v in stats.statuses.items() if k in (503, "no answer")}
        return report("3. Primary failover (pg_ctl stop -m immediate, promote the synchronous standby 2 s later)", figures, [
            f"failover {before:,} events accepted before the stop; all counted on the promoted standby",
            f"recovery first event accepted {first - promoted:.2f} s after the promotion ({first - stopped:.2f} s after the stop)"
            if first else "recovery: no event accepted after the stop",
            f"gap      answers while the database was away: {dict(gap)} (503 always with Retry-After); "
            f"seen before the promotion: 503 x {during.get(503, 0)}",
            spans(stats)], stats) and first is not None
    finally:
        for h in instances:
            h.kill()
        a.stop("immediate"); b.stop("immediate")


def fault_pgbouncer(binary, base):
    """4. PgBouncer in transaction mode: migrations, ingest, claims and long polls through it."""
    db = scratch_cluster(base, "bouncer-db")
    bdir = os.path.join(base, "pgbouncer")
    os.makedirs(bdir, exist_ok=True)
    port = free_port()
    with open(os.path.join(bdir, "userlist.txt"), "w") as f:
        f.write(f'"{db.user}" ""\n')
    with open(os.path.join(bdir, "pgbouncer.ini"), "w") as f:
        f.write(f"""[databases]
herald = host={db.run} dbname=herald user={db.user}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {bdir}/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 30
server_reset_query =
logfile = {bdir}/pgbouncer.log
pidfile = {bdir}/pgbouncer.pid
""")
    if IS_ROOT:
        subprocess.run(["chown", "-R", "postgres:postgres", bdir], check=True)
    bouncer = subprocess.Popen(as_owner(["pgbouncer", os.path.join(bdir, "pgbouncer.ini")]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    url = f"host=127.0.0.1 port={port} dbname=herald user={db.user}"
    env = {"DATABASE_URL": url, "HERALD_DB_POOL_MODE": "transaction", "HERALD_LISTEN_DATABASE_URL": db.conninfo(),
           "HERALD_THREADS": "8", "HERALD_FANOUT_LEASE_SECONDS": "5"}
    instances = [Herald(binary, i, env, base) for i in range(1, 4)]
    try:
        # All three start at once on the empty database: they migrate concurrently, through PgBouncer.
        for h in instances:
            h.start()
        for h in instances:
            h.wait_ready()
        versions = db.sql("SELECT count(*) || ' ' || count(DISTINCT version) || ' ' || max(version) FROM schema_migrations")
        through = db.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'herald-listen'")
        keys, stats, fleet, bus, workers = load(binary, env, instances, "p")
        time.sleep(15)
        bus.finish()
        expected = len(bus.accepted) * (MEMBERS - 1)
        wait_drained(db, "fleet", expected)
        workers.finish()
        figures = tally(db, "fleet", bus.accepted, bus.sent, expected, workers)
        # Long polls through the pooler, woken by a commit on another instance.
        wake = {}

        def claim():
            t = time.time()
            status, _, body = Fleet(instances, stats).once(instances[0], "POST", "/v1/jobs/claim",
                                                           {"max": 10, "waitSeconds": 20}, keys["worker"])
            wake["claim"] = (time.time(), status, len(body["jobs"]) if body else 0, t)
        c = Fleet(instances, stats)
        status, _, page = c.once(instances[0], "GET", "/v1/users/u1/changes", None, keys["server"])
        cursor = page["meta"]["next"]

        def feed():
            status, _, body = Fleet(instances, stats).once(instances[0], "GET", f"/v1/users/u1/changes?cursor={cursor}&waitSeconds=20",
                                                           None, keys["server"], timeout=30)
            wake["feed"] = (time.time(), status, len(body["data"]) if body else 0)
        threads = [threading.Thread(target=claim), threading.Thread(target=feed)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        posted = time.time()
        status, _, body = fleet.once(instances[1], "POST", "/v1/events",
                                     message("p-wake", "mp-wake", "u2", "g", int(time.time() * 1000)), keys["ingest"],
                                     "application/cloudevents+json")
        fleet.once(instances[2], "PUT", "/v1/users/u1/threads/mp-wake/subscription", None, keys["server"])
        for t in threads:
            t.join()
        expected_after = expected + (MEMBERS - 1)
        wait_drained(db, "fleet", expected_after, timeout=5)
        claim_wake = wake["claim"][0] - posted
        feed_wake = wake["feed"][0] - posted
        ok = report("4. PgBouncer 1.18, pool_mode = transaction (HERALD_DB_POOL_MODE=transaction)", figures, [
            f"migrate  three instances started at once on an empty database: schema_migrations rows/versions/latest {versions}",
            f"listen   LISTEN sessions straight to PostgreSQL (HERALD_LISTEN_DATABASE_URL), one per instance: {through}",
            f"longpoll a claim waiting on herald-1 answered {claim_wake*1000:.0f} ms after an event posted to herald-2 "
            f"({wake['claim'][2]} jobs); a feed wait answered {feed_wake*1000:.0f} ms after a subscribe on herald-3 "
            f"({wake['feed'][2]} changes)",
            spans(stats)], stats)
        n, distinct = versions.split()[:2]
        return ok and n == distinct and wake["claim"][2] > 0 and wake["feed"][2] > 0 and claim_wake < 5 and feed_wake < 5
    finally:
        for h in instances:
            h.kill()
        bouncer.terminate(); bouncer.wait()
        db.stop("immediate")


FAULTS = {"kill": fault_kill, "fanout": fault_fanout, "failover": fault_failover, "pgbouncer": fault_pgbouncer}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("--only", default=",".join(FAULTS))
    p.add_argument("--keep", help="keep the clusters and logs in this folder")
    args = p.parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="herald-fleet-")
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)
    path = base
    while IS_ROOT and path != "/":   # the postgres user must reach the folder
        path = os.path.dirname(path)
        os.chmod(path, os.stat(path).st_mode | 0o001)
    say(f"fleet test in {base} (Herald logs: herald-N.log)")
    results = {}
    for name in args.only.split(","):
        started = time.time()
        try:
            results[name] = FAULTS[name](args.binary, base)
        except Exception as e:  # noqa: BLE001
            say(f"\n== {name}: ERROR {e!r}")
            results[name] = False
        say(f"  ({time.time() - started:.0f} s)")
    say("\n" + ", ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in results.items()))
    if not args.keep and all(results.values()):
        shutil.rmtree(base, ignore_errors=True)
    sys.exit(0 if all(results.values()) else 1)


if __name__ == "__main__":
    main()
