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

# CI shows only the tail of the output, where librdkafka's connection chatter
# from the last tests would hide which test failed: keep the whole log, and
# repeat every failure line (Swift Testing marks them ✘) at the very end.
log="${FERRY_TEST_LOG:-.build/ferry-test.log}"
mkdir -p "$(dirname "$log")"
status=0
swift test --skip-build "$@" 2>&1 | tee "$log" || status=$?
if [ "$status" -ne 0 ]; then
    echo
    echo "=== failures (whole log: $log) ==="
    # Every failing test is named, with its first three issues (a test with
    # twenty failed expectations must not push another test's out of the tail),
    # then the seeds of the generated-input runs, to replay them.
    {
        grep -E '^✘ Test .* failed after' "$log"
        awk '/^✘ Test .*recorded an issue/ { name = $3; shown[name]++; left = (shown[name] <= 3) ? 5 : 0 }
             left > 0 && !/^%/ { print; left-- }' "$log"
        grep -E 'replay with FERRY_|Fatal error:|Assertion .*failed|^error: ' "$log"
        grep -E '^✘ (Suite|Test run)' "$log"
    } | grep -v '^%' | cut -c1-600 | tail -n 80 || true
fi
exit "$status"
