#!/usr/bin/env bash
# `make bench`: install what is missing, build Herald and the bench in release mode, and run the
# bench from the project folder. Arguments go to herald-bench (see `herald-bench --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh nghttp2-server   # nghttpd: W8's APNs and Web Push receivers
swift build -c release --product herald
swift build -c release --product herald-bench
exec "$(swift build -c release --show-bin-path)/herald-bench" "$@"
