#!/usr/bin/env bash
# Runs the concurrency-heavy tests under ThreadSanitizer and summarises the reports.
#   scripts/tsan.sh                      # the default subset (Kafka, worker, triggers, engine, store, core)
#   scripts/tsan.sh 'EndToEndTests/moto' # any swift test --filter
# Builds into .build-tsan (the normal build stays as it is). librdkafka makes its
# threads, mutexes and condition variables with C11 calls that TSan does not
# intercept; scripts/tsan/c11-threads-shim.c routes them to pthreads for the run.
# Swift's Synchronization.Mutex locks with a futex TSan cannot see on Linux, so
# every access inside Mutex.withLock is reported as a race: such reports (both
# stacks in a withLock body) are counted apart from the others.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
filter="${1:-FerryKafkaTests|FerryWorkerTests|FerryTriggersTests|FerryEngineTests|FerryStoreTests|FerryCoreTests}"
swift build --build-tests --traits TestHooks --sanitize=thread --scratch-path .build-tsan
shim=.build-tsan/libc11-threads-shim.so
gcc -shared -fPIC -O2 -Wall -o "$shim" scripts/tsan/c11-threads-shim.c -lpthread
reports=$(mktemp -d)
# The ferry processes the integration tests start are TSan builds too; their reports land here as well.
status=0
# FERRY_TEST_SANITIZER tells the tests that bound a process's memory: TSan's shadow memory is not Ferry's.
# At most 4 tests at a time (override in the environment): started all at once under TSan's
# slowdown, the subset starved its own time bounds on 2 cores (a 40 s stand-in rebalance ran out).
FERRY_TEST_SANITIZER=thread SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-4}" LD_PRELOAD="$PWD/$shim" TSAN_OPTIONS="halt_on_error=0 exitcode=0 log_path=$reports/tsan" \
    swift test --skip-build --traits TestHooks --sanitize=thread --scratch-path .build-tsan --filter "$filter" || status=$?
python3 - "$reports" <<'PY'
import glob, re, sys
mutex, other = 0, []
for path in glob.glob(sys.argv[1] + "/tsan*"):
    for block in open(path, errors="replace").read().split("==================")[1:]:
        if "WARNING: ThreadSanitizer" not in block:
            continue
        # Each access's stack: a closure taking `inout sending` state is a withLock body
        # (the first or a later closure of its function, or a `defer` inside one); a
        # tuple state mangles as `z_t` where a nominal one is `zYu`. The access is inside
        # the lock when frame #0 is such a body, or frame #1 is and frame #0 a method of
        # the state it called (e.g. `s.pop()`), or a `defer` of such a method.
        stacks = [re.findall(r"^\s*#\d+ (\S+)", part, re.M)
                  for part in re.split(r"^\s+(?=#0 )", block, flags=re.M)[1:3]]
        # A closure written inside the body (`all.map { … }` under the lock) mangles as
        # the body's name plus its own `…XEfU_`: the access is still inside the lock.
        body = re.compile(r"z(Yu|_t)YTXEfU\d*_([A-Za-z0-9]*?XEfU\d*_)*(\d+\$deferL_yyF)?$")
        # Container and runtime code the body called (a Deque's append, Swift's own) is
        # skipped first: the access is the body's, through a library.
        library = re.compile(r"^(\$s11DequeModule|\$ss|swift_)")
        def locked(frames):
            lead = 0
            while lead < len(frames) and library.match(frames[lead]):
                lead += 1
            frames = frames[lead:]
            if frames and body.search(frames[0]):
                return True  # a withLock body itself, also one written in a `defer`
            # A `defer` inside a state method counts as that method (frame #1 then, the body #2).
            start = 1 if frames and "$defer" in frames[0] else 0
            return any(body.search(f) for f in frames[start:start + 2])
        if len(stacks) == 2 and all(locked(frames) for frames in stacks):
            mutex += 1
        else:
            summary = re.search(r"SUMMARY: ThreadSanitizer: (.*)", block)
            other.append(summary.group(1) if summary else block[:200])
print(f"ThreadSanitizer: {mutex} report(s) inside Mutex.withLock on both sides (TSan cannot see Synchronization.Mutex on Linux)")
print(f"ThreadSanitizer: {len(other)} other report(s)")
for line in sorted(set(other)):
    print("  " + line)
sys.exit(1 if other else 0)
PY
exit $status  # the tests' own failures (TSan's reports do not change the exit status: exitcode=0)
