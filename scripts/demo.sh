#!/usr/bin/env bash
# The database side of `make run`, also used by scripts/readme_test.py so that the README is
# tested against what `make run` really sets up:
#   DATABASE_URL=… scripts/demo.sh HERALD_BIN STATE_DIR
# migrates, makes sure the app `demo` exists, and keeps its server, ingest and worker keys in
# STATE_DIR/demo-keys (mode 600, one `role=key` per line after `database=URL`).
set -euo pipefail
bin="$1" state="$2"
: "${DATABASE_URL:?DATABASE_URL must be set}"

"$bin" migrate
"$bin" apps create demo --exists-ok >/dev/null

# Keys are shown once and stored hashed, so the demo keys made on the first run are kept in
# demo-keys and printed again; they are remade when the database changes or they were revoked.
keys="$state/demo-keys"
valid=1
if [ -s "$keys" ] && grep -qxF "database=$DATABASE_URL" "$keys"; then
  for role in server ingest worker; do
    id=$(sed -n "s/^$role=hk_\([0-9a-f]*\)_.*/\1/p" "$keys")
    "$bin" keys list --app demo | grep -q "\"id\":\"$id\"" || valid=0
  done
else
  valid=0
fi
if [ "$valid" = 0 ]; then
  (
    umask 077
    echo "database=$DATABASE_URL" > "$keys"
    for role in server ingest worker; do
      key=$("$bin" keys create --app demo --role "$role" --label "make run" | sed -n 's/.*"key":"\([^"]*\)".*/\1/p')
      echo "$role=$key" >> "$keys"
    done
  )
fi
