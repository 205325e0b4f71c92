#!/bin/bash
# Issue 32: the largest single batch a bus sends to one group, with the default settings: 30
# message.created in one 30,000-member group, each mentioning 1,000 members (30,000 users subscribed
# in one transaction; 900,000 routing decisions and ~900,000 jobs in the background fan-out).
# Prints the ingest time and when the fan-out finished. Uses its own cluster (/tmp/pgh) and the
# release binary: make release first.
set -e
cd "$(dirname "$0")/.."
scripts/pg.sh init /tmp/pgh >/dev/null 2>&1 || true
scripts/pg.sh start /tmp/pgh >/dev/null
export DATABASE_URL=$(scripts/pg.sh url /tmp/pgh)
export HERALD_ADMIN_TOKEN=admin-secret-token-0123456789abcdef HERALD_LISTEN=127.0.0.1:18090
.build/release/herald serve > ${TMPDIR:-/tmp}/herald-large-group-herald.log 2>&1 &
echo $! > ${TMPDIR:-/tmp}/herald-large-group-herald.pid
for i in $(seq 1 50); do curl -sf http://127.0.0.1:18090/readyz >/dev/null && break; sleep 0.5; done
trap 'kill $(cat ${TMPDIR:-/tmp}/herald-large-group-herald.pid)' EXIT
python3 -u - <<'PY'
import json, time, urllib.request
base="http://127.0.0.1:18090"; admin="admin-secret-token-0123456789abcdef"
def call(method, path, token, body=None, timeout=900):
    req=urllib.request.Request(base+path, data=None if body is None else json.dumps(body).encode(), method=method,
        headers={"Authorization":"Bearer "+token,"Content-Type":"application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r: return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e: return e.code, json.loads(e.read() or b"null")
app=f"hs{int(time.time())}"
print(call("POST","/v1/apps",admin,{"id":app})[0])
keys={}
for role in ("server","ingest","worker"):
    st,k=call("POST",f"/v1/apps/{app}/keys",admin,{"role":role}); keys[role]=k["secret"] if "secret" in k else k.get("key")
members=[f"m{i:05d}" for i in range(30000)]
t=time.monotonic(); print("members", call("PUT","/v1/groups/g1/members",keys["server"],{"members":members})[0], round(time.monotonic()-t,2),"s")
now=int(time.time()*1000)
events=[{"specversion":"1.0","id":f"e{i}","source":"hs","type":"message.created",
         "data":{"id":f"msg{i}","sender":members[i],"receiverType":"group","receiver":"g1","sentAt":now+i,"text":"hi",
                 "mentions":members[i*1000:(i+1)*1000]}} for i in range(30)]
t=time.monotonic(); st,ans=call("POST","/v1/events",keys["ingest"],events)
print("batch", st, {k:v for k,v in ans.items() if k!="results"} if isinstance(ans,dict) else ans, round(time.monotonic()-t,2),"s")
import subprocess
t0=time.monotonic()
while True:
    out=subprocess.run(["psql",__import__("os").environ["DATABASE_URL"],"-Atc",f"SELECT count(*) FILTER (WHERE NOT done), count(*) FROM fanout_tasks WHERE app='{app}'"],capture_output=True,text=True).stdout.strip()
    if out.split("|")[0]=="0" and out.split("|")[1]!="0": break
    time.sleep(0.5)
print("fan-out done", out, round(time.monotonic()-t0,1), "s after the batch", flush=True)
print("stats", call("GET","/v1/jobs/stats",keys["worker"])[1])
PY
