#!/usr/bin/env bash
# A private PostgreSQL cluster in a folder, reached over a unix socket in <dir>/run.
#   scripts/pg.sh init  <dir> [fast]   create the cluster if it does not exist ("fast": no fsync; tests only)
#   scripts/pg.sh start <dir>          start it (no-op when running); creates database "herald"
#   scripts/pg.sh stop  <dir>          stop it (no-op when stopped)
#   scripts/pg.sh url   <dir>          print its DATABASE_URL
# PostgreSQL refuses to run as root, so as root it runs as the "postgres" user.
# Only the cluster's owner (and root) can reach its socket: <dir>/run is 0700 and the socket
# 0700, so the trust authentication inside the cluster is not open to other local users.
set -euo pipefail
command=${1:?usage: pg.sh init|start|stop|url <dir>}
dir=$(mkdir -p "${2:?usage: pg.sh $command <dir>}" && cd "$2" && pwd)
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/pg_ctl" ] || { echo "PostgreSQL server binaries not found (run scripts/deps.sh)" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
user=$( [ "$(id -u)" -eq 0 ] && echo postgres || id -un )

case "$command" in
  init)
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      mkdir -p "$dir/data" "$dir/run"
      if [ "$(id -u)" -eq 0 ]; then
        # The postgres user must be able to reach the folder: open the search bit on any
        # ancestor that closes it (mktemp -d makes 0700 folders).
        path="$dir"
        while [ "$path" != / ]; do
          path=$(dirname "$path")
          runuser -u postgres -- test -x "$path" 2>/dev/null || chmod o+x "$path"
        done
      fi
      [ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$dir"
      chmod 700 "$dir/data"
      as_owner "$bin/initdb" -D "$dir/data" -U "$user" --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
      {
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir/run'"
        echo "unix_socket_permissions = 0700"
        echo "max_connections = 200"
        echo "shared_buffers = 256MB"
        if [ "${3:-}" = fast ]; then
          echo "fsync = off"
          echo "synchronous_commit = off"
          echo "full_page_writes = off"
        fi
      } >> "$dir/data/postgresql.conf"
    fi
    ;;
  start)
    # Clusters made before the socket was private get it now.
    chmod 700 "$dir/run"
    grep -q '^unix_socket_permissions' "$dir/data/postgresql.conf" \
      || echo "unix_socket_permissions = 0700" | as_owner tee -a "$dir/data/postgresql.conf" >/dev/null
    if ! as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null
    fi
    if ! "$bin/psql" -h "$dir/run" -U "$user" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'herald'" | grep -q 1; then
      "$bin/psql" -h "$dir/run" -U "$user" -d postgres -qc "CREATE DATABASE herald" >/dev/null
    fi
    ;;
  stop)
    if [ -f "$dir/data/PG_VERSION" ] && as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    fi
    ;;
  url)
    echo "postgresql:///herald?host=$dir/run&user=$user"
    ;;
  *)
    echo "unknown command $command" >&2; exit 2 ;;
esac
