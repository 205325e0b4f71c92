#!/usr/bin/env bash
# Contract tests against the live `herald serve`, with tools pinned in
# scripts/requirements-test.txt (installed into a venv under .build):
# - schemathesis checks it against the OpenAPI document it serves at GET /openapi.json, over
#   every documented route. A run fails on any 5xx, any response that does not match its
#   documented schema, content type or headers, any undocumented status code, and any request
#   the document calls invalid that the server accepts;
# - PyJWT's tokens are checked on the user routes (scripts/contract_tokens.py);
# - webhook deliveries are verified by the standardwebhooks package (scripts/contract_webhooks.py);
# - the operator console runs in a headless Chromium (scripts/console_test.py; Debian's chromium,
#   installed if missing; HERALD_SKIP_CONSOLE=1 skips it).
#
#   bash scripts/contract-test.sh            alone: builds herald, starts a throwaway PostgreSQL
#   DATABASE_URL=… bash scripts/contract-test.sh   against that database (scripts/test.sh does this)
#
# Environment: HERALD_BIN (a built herald; default: swift build's debug one), HERALD_VENV (the
# venv, default .build/venv), HERALD_CONTRACT_SEED (default 1; "random" for a new one each run),
# HERALD_CONTRACT_EXAMPLES (generated cases per operation and phase, default 50).
# The server's log is kept in .build/contract/server.log.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

tmp=$(mktemp -d /tmp/herald-contract.XXXXXX)
out="$root/.build/contract"
mkdir -p "$out"
server_pid=
own_cluster=
cleanup() {
  local status=$?
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$own_cluster" ]; then scripts/pg.sh stop "$tmp/pg" >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The herald binary.
if [ -z "${HERALD_BIN:-}" ]; then
  scripts/deps.sh
  swift build --product herald
  HERALD_BIN="$(swift build --show-bin-path)/herald"
fi

# The database: the caller's, or a throwaway cluster.
if [ -z "${DATABASE_URL:-}" ]; then
  scripts/deps.sh
  own_cluster=1
  scripts/pg.sh init "$tmp/pg" fast
  scripts/pg.sh start "$tmp/pg"
  DATABASE_URL=$(scripts/pg.sh url "$tmp/pg")
fi
export DATABASE_URL

# schemathesis and the rest, in a venv rebuilt whenever the requirements change.
venv=${HERALD_VENV:-$root/.build/venv}
"$root/scripts/venv.sh" "$venv"

# The document is valid OpenAPI 3.1 before anything is generated from it.
"$venv/bin/openapi-spec-validator" "$root/openapi/openapi.json" >&2

# The server, on an ephemeral port, with its own admin token.
HERALD_ADMIN_TOKEN="contract-admin-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
export HERALD_ADMIN_TOKEN HERALD_LISTEN=127.0.0.1:0 HERALD_THREADS=4 HERALD_DRAIN_TIMEOUT_SECONDS=5
# The webhook contract (contract_webhooks.py) and the console test deliver to 127.0.0.1.
export HERALD_DELIVERY_ALLOW_PRIVATE=1
"$HERALD_BIN" migrate >/dev/null
app="contract-$(od -An -tx1 -N6 /dev/urandom | tr -d ' \n')"
"$HERALD_BIN" apps create "$app" >/dev/null
key=$("$HERALD_BIN" keys create --app "$app" --role server --label "contract test" | sed -n 's/.*"key":"\([^"]*\)".*/\1/p')
[ -n "$key" ] || { echo "contract: could not create a server key" >&2; exit 1; }

log="$out/server.log"
"$HERALD_BIN" serve > "$log" 2>&1 &
server_pid=$!
port=
for _ in $(seq 300); do
  port=$(sed -n 's/.*"msg":"listening".*"port":\([0-9]*\).*/\1/p; s/.*"port":\([0-9]*\).*"msg":"listening".*/\1/p' "$log" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; echo "contract: herald serve exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$log" >&2; echo "contract: herald serve did not start" >&2; exit 1; }
base="http://127.0.0.1:$port"
echo "contract: herald serve on $base, app $app" >&2
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" scripts/contract_seed.py "$base" "$key"
# User tokens minted by PyJWT must work (and bad ones fail) before schemathesis uses one.
user_token=$(PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" scripts/contract_tokens.py "$base" "$key" "$app")
# Webhook delivery verified by the standardwebhooks package, and the README's receiver.
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" scripts/contract_webhooks.py "$base"
# The served document (the file as it is) is valid OpenAPI too.
"$venv/bin/python" -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1]).read())' \
  "$base/openapi.json" > "$out/openapi.served.json"
"$venv/bin/openapi-spec-validator" "$out/openapi.served.json" >&2

seed=${HERALD_CONTRACT_SEED:-1}
[ "$seed" = random ] && seed=$(od -An -tu4 -N4 /dev/urandom | tr -d ' ')
# Checks named one by one: the run fails on 5xx, undocumented statuses and responses (body,
# content type, headers) that do not match the document, and on a request the document calls
# invalid that the server accepts (negative_data_rejection). Not positive_data_acceptance: some
# rules are stated only in words (from <= to, a mute in the future, guid or uid, what a cursor
# holds), so schema-valid requests may rightly get a 400. Long-poll claims wait at most 30 s:
# the timeout leaves room (and the hooks shorten the waits, see scripts/contract_hooks.py).
st_run() {
  (cd "$out" && export SCHEMATHESIS_HOOKS="$root/scripts/contract_hooks.py" HERALD_CONTRACT_APP="$app" PYTHONDONTWRITEBYTECODE=1 &&
    "$venv/bin/st" --config-file "$root/scripts/schemathesis.toml" run "$base/openapi.json" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,negative_data_rejection \
    --workers 1 --request-timeout 35 --max-examples "${HERALD_CONTRACT_EXAMPLES:-50}" --seed "$seed" \
    --generation-database none --no-color --output-truncate true "$@")
}

started=$(date +%s)
status=0
# The user routes first: the server-key run below may delete the token key the user token names
# (schemathesis follows GET /v1/settings/token-keys to DELETE …/{kid}) or reset userRateLimit.
echo "contract: the /v1/me mirror with a user token" >&2
st_run -H "Authorization: Bearer $user_token" --include-path-regex '^/v1/me/' 2>&1 | tee "$out/user-routes.txt" || status=1
echo "contract: app routes with a server key" >&2
st_run -H "Authorization: Bearer $key" --exclude-path-regex '^/v1/(apps|me/)' 2>&1 | tee "$out/app-routes.txt" || status=1
echo "contract: admin routes with the admin token" >&2
st_run -H "Authorization: Bearer $HERALD_ADMIN_TOKEN" --include-path-regex '^/v1/apps' 2>&1 | tee "$out/admin-routes.txt" || status=1
echo "contract: schemathesis took $(( $(date +%s) - started )) s" >&2

# The operator console in a real headless Chromium (Debian's), driven by Playwright.
if [ -z "${HERALD_SKIP_CONSOLE:-}" ]; then
  chromium_bin=$(command -v chromium || true)
  if [ -z "$chromium_bin" ]; then
    echo "contract: installing chromium" >&2
    SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
    chromium_bin=$(command -v chromium)
  fi
  echo "contract: the console in $("$chromium_bin" --version 2>/dev/null | head -n 1)" >&2
  PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" scripts/console_test.py "$base" "$HERALD_ADMIN_TOKEN" "$chromium_bin" || status=1
fi

# A user-token run in which the token never worked would test nothing but 401s.
if grep -q "Authentication failed" "$out/user-routes.txt"; then
  echo "contract: the user token was refused by the /v1/me routes" >&2
  status=1
fi
if grep -q '"level":"error"' "$log"; then
  echo "contract: the server logged errors:" >&2
  grep '"level":"error"' "$log" | head -n 20 >&2
  status=1
fi
# The three runs together must have tested every operation of the document.
total=$(sed -n 's/^ *Operations: *[0-9]* selected \/ \([0-9]*\) total.*/\1/p' "$out/app-routes.txt" | head -n 1)
tested=$(cat "$out/app-routes.txt" "$out/admin-routes.txt" "$out/user-routes.txt" | awk '/^ *Tested: *[0-9]+/ { n += $2 } END { print n + 0 }')
if [ "$tested" != "${total:-?}" ]; then
  echo "contract: $tested operations tested, but the document has ${total:-an unknown number of} operations" >&2
  status=1
fi
# One line to close on: operations tested, and those with a failure (a heading per operation
# in schemathesis's FAILURES and ERRORS sections).
failed=$(cat "$out/app-routes.txt" "$out/admin-routes.txt" "$out/user-routes.txt" | awk '/^_+ [A-Z]+ \/.* _+$/ { n++ } END { print n + 0 }')
[ "$status" = 0 ] || [ "$failed" -gt 0 ] || failed=1
passed=$(( tested > failed ? tested - failed : 0 ))
echo "contract: $passed passed, $failed failed"
exit "$status"
