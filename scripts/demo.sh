#!/usr/bin/env bash
# Runs Ferry on the embedded default (in-process Kafka + a local object store):
# installs what is missing, builds, and runs `ferry dev --demo`.
# Extra arguments go to `ferry dev` (e.g. drop --demo by running `scripts/demo.sh --no-demo`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --product ferry
args=(--demo)
if [ "${1:-}" = "--no-demo" ]; then shift; args=(); fi
exec .build/debug/ferry dev "${args[@]}" "$@"
