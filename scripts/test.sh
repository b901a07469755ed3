#!/usr/bin/env bash
# Runs Ferry's whole test suite: installs what is missing (C libraries, kcat,
# Ceph RADOS Gateway, moto, boto3), builds, and runs `swift test`.
# Extra arguments go to `swift test` (e.g. --filter EndToEnd).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
swift build --build-tests
exec swift test --skip-build "$@"
