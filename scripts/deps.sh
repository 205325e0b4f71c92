#!/usr/bin/env bash
# Installs the Debian packages Herald needs to build, test and run, when any is missing.
#   scripts/deps.sh [more packages]   also those (the fleet test adds pgbouncer)
set -euo pipefail
# prometheus: for promtool, which checks deploy/prometheus/herald-rules.yml (scripts/ops-check.py).
packages=(libpq-dev libmicrohttpd-dev libssl-dev libcurl4-openssl-dev postgresql-15 pkg-config tzdata curl openssl prometheus "$@")
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing missing packages: ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
