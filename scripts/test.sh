#!/usr/bin/env bash
# Runs Ferry's whole test suite: installs what is missing (C libraries, kcat,
# Ceph RADOS Gateway, moto, boto3), builds, and runs `swift test`.
# Extra arguments go to `swift test` (e.g. --filter EndToEnd).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
swift build --build-tests
# Swift Testing starts every test at once by default. On a 2-core machine the
# integration tests (each with its own brokers, S3 server and worker processes)
# then starve each other past their timeouts (a full run saw 70 s before a
# 10 s test got going); a few at a time keep each test's timing meaningful.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-6}"
exec swift test --skip-build "$@"
