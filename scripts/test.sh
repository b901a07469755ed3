#!/usr/bin/env bash
# Runs Ferry's whole test suite: installs what is missing (C libraries, kcat,
# Ceph RADOS Gateway, moto, boto3), builds, and runs `swift test`.
# Extra arguments go to `swift test` (e.g. --filter EndToEnd).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
# Every commit since the convention's check was added keeps it (CONTRIBUTING.md):
# checked first, in a second, before the build.
if [ "$#" -eq 0 ]; then scripts/commit-subjects.sh; fi
# The TestHooks trait compiles the fault hooks the crash-loop tests use (Package.swift); release builds have none.
swift build --build-tests --traits TestHooks
# Swift Testing starts every test at once by default. On a 2-core machine the
# integration tests (each with its own brokers, S3 server and worker processes)
# then starve each other past their timeouts (a full run saw 70 s before a
# 10 s test got going); a few at a time keep each test's timing meaningful.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-6}"
# The test process holds every running test's brokers, clients and servers:
# 326 open files at the peak of a full run (937 to 1,167 while the blocking
# pool kept closed Kafka consumers alive), and the usual soft limit is 1024.
# Out of descriptors, librdkafka's mock cluster aborts the whole process when
# it re-creates a listener for a broker set down (it asserts that the socket
# was made). Take the hard limit, and report the peak at the end.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "open-file limit for the tests: $(ulimit -Sn) (hard $(ulimit -Hn))"

# CI shows only the tail of the output, where librdkafka's connection chatter
# from the last tests would hide which test failed: keep the whole log, and
# repeat every failure line (Swift Testing marks them ✘) at the very end.
log="${FERRY_TEST_LOG:-.build/ferry-test.log}"
mkdir -p "$(dirname "$log")"
status=0
peak="$log.open-files"
echo 0 > "$peak"
# HeapTrimmerTests read glibc's chunk flags, which only a quiet heap can
# decide (in a full run the arenas held 858 MiB free): in a process of their
# own first, where an undecided round fails (FERRY_TEST_QUIET_HEAP), then in
# the suite, where it is a known issue.
if [ "$#" -eq 0 ]; then
    FERRY_TEST_QUIET_HEAP=1 swift test --skip-build --traits TestHooks --filter HeapTrimmerTests 2>&1 | tee "$log" || status=$?
fi
(   # Samples the test process's open files each second while it runs.
    max=0
    while sleep 1; do
        pid=$(pgrep -n -f 'ferryPackageTests.xctest' || true)
        [ -n "$pid" ] || { [ "$max" -gt 0 ] && break; continue; }
        n=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
        [ "$n" -gt "$max" ] && max=$n && echo "$max" > "$peak"
    done
) &
sampler=$!
swift test --skip-build --traits TestHooks "$@" 2>&1 | tee -a "$log" || status=$?
kill "$sampler" 2>/dev/null || true
echo "open files in the test process: peak $(cat "$peak") (limit $(ulimit -Sn))"
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
        grep -E 'replay with FERRY_|Fatal error:|Assertion .*failed|^error: ' "$log" | grep -v '^%'
        # librdkafka's own critical lines (%0-%2), e.g. why its mock cluster gave up.
        grep -E '^%[0-2]\|' "$log" | tail -n 10
        grep -E '^✘ (Suite|Test run)' "$log"
        # A crash ends the run with no ✘ line: name the tests it cut short.
        awk '/◇ Test .* started\.$/ && !/◇ Test (case |run started)/ { t = $0; sub(/.*◇ Test /, "", t); sub(/ started\.$/, "", t); running[t] = 1 }
             /(✔|✘) Test .* (passed|failed)/ { t = $0; sub(/.*(✔|✘) Test /, "", t); sub(/ (with [0-9]+ test cases )?(passed|failed).*/, "", t); delete running[t] }
             END { for (t in running) print "still running when the run ended: " t }' "$log"
    } | cut -c1-600 | tail -n 80 || true
fi
# The DocC catalogs of the public modules build without a warning (scripts/docs.sh,
# about 30 s): a symbol renamed under a catalog's link fails here.
if [ "$#" -eq 0 ]; then
    scripts/docs.sh > .build/docs.log 2>&1 || { status=1; echo "=== scripts/docs.sh failed ==="; grep -v '^\[' .build/docs.log | tail -n 30; }
fi
exit "$status"
