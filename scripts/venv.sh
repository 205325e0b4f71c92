#!/usr/bin/env bash
# The Python test tooling (scripts/requirements-test.txt: schemathesis, PyJWT, standardwebhooks,
# Playwright, h2, http_ece …) in a venv, rebuilt whenever the requirements change.
#   scripts/venv.sh [DIR]      (default .build/venv; prints nothing when it is up to date)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-${HERALD_VENV:-$root/.build/venv}}
requirements="$root/scripts/requirements-test.txt"
if ! cmp -s "$requirements" "$venv/.requirements" || [ ! -x "$venv/bin/st" ] || [ ! -x "$venv/bin/openapi-spec-validator" ]; then
  echo "venv: installing the test tooling into $venv" >&2
  rm -rf "$venv"
  if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    # Debian's own python3 keeps venv's pip bootstrap in a separate package.
    echo "venv: installing python3-venv" >&2
    SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/.requirements"
fi
