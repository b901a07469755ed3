#!/usr/bin/env python3
"""Ferry's side-by-side benchmark against s5cmd, rclone, boto3 (classic and CRT),
the aws CLI and curl, on one local S3 server (Ceph RGW). Run it through
Benchmarks/run.sh, which installs the peers and starts the server.

Every scenario runs every tool in alternation for --rounds rounds, each round
starting one tool later (A B C, B C A, ...), and each timed run starts once
the server is idle; the report gives medians of wall throughput, client
CPU-seconds per GiB (user+sys of the client's process tree, GNU time) and
client peak RSS. Results go to Benchmarks/results.json, BENCHMARKS.md and
Benchmarks/benchmarks.png.
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import boto3
from botocore.config import Config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FERRY = os.environ.get("FERRY_BINARY", os.path.join(ROOT, ".build", "release", "ferry"))
# Another ferry build to run beside FERRY in S1-S4 as "ferry-baseline": a before/after in one run.
BASELINE = os.environ.get("FERRY_BASELINE_BINARY")
BOTO = [sys.executable, os.path.join(ROOT, "Benchmarks", "boto3_bench.py")]
MiB, GiB = 1 << 20, 1 << 30


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, flush=True)



SERVER_PROCESSES = ("radosgw", "ceph-osd", "ceph-mon")


def process_cpu(pid):
    """(name, user+sys CPU seconds so far) of one process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid):
    """user+sys CPU seconds of one process so far."""
    return process_cpu(pid)[1]


def server_cpu_seconds():
    """user+sys CPU seconds of the storage server's processes (RGW, OSD, monitor) so far."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            name, seconds = process_cpu(pid)
        except OSError:
            continue
        if name in SERVER_PROCESSES:
            total += seconds
    return total


# Partitions of each topic on the brokers S6 and S7 start.
FLEET_PARTITIONS = 8


class Bench:
    def __init__(self, args):
        self.args = args
        self.prefault_bytes = 0  # set by the download scenarios, see prefault()
        self.endpoint = os.environ["AWS_ENDPOINT_URL"]
        self.bucket = "bench"
        self.work = args.work
        self.env = dict(os.environ, AWS_REQUEST_CHECKSUM_CALCULATION="when_required",
                        AWS_RESPONSE_CHECKSUM_VALIDATION="when_required", AWS_REGION="us-east-1")
        # rclone's remote "ceph", defined by environment only.
        self.env.update(RCLONE_CONFIG_CEPH_TYPE="s3", RCLONE_CONFIG_CEPH_PROVIDER="Ceph",
                        RCLONE_CONFIG_CEPH_ENDPOINT=self.endpoint, RCLONE_CONFIG_CEPH_ACCESS_KEY_ID=os.environ["AWS_ACCESS_KEY_ID"],
                        RCLONE_CONFIG_CEPH_SECRET_ACCESS_KEY=os.environ["AWS_SECRET_ACCESS_KEY"],
                        RCLONE_CONFIG_CEPH_FORCE_PATH_STYLE="true", RCLONE_CONFIG_CEPH_REGION="us-east-1")
        # The aws CLI's S3 transfer settings, in a config file of its own.
        self.aws_config = os.path.join(self.work, "aws-config")
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                               config=Config(s3={"addressing_style": "path"}, max_pool_connections=32))
        self.results = []
        self.failures = {}
        # The broker of S5-S7: "embedded" (`ferry dev --kafka-only`) or "tansu" (Benchmarks/tansu.py),
        # and what the processes that talk to it need in their environment.
        self.broker, self.kafka_env, self.broker_version = "embedded", {}, self.embedded_version()

    def use_broker(self, name):
        import tansu
        self.broker = name
        self.kafka_env = {"LD_LIBRARY_PATH": tansu.librdkafka_dir(self.work)} if name == "tansu" else {}
        self.broker_version = tansu.describe() if name == "tansu" else self.embedded_version()

    def embedded_version(self):
        brokers = self.args.embedded_brokers
        return "librdkafka's mock cluster, in `ferry dev`" + (f" (--brokers {brokers})" if brokers else "")

    # ---------- plumbing ----------

    def aws_settings(self, concurrency, part):
        with open(self.aws_config, "w") as f:
            f.write(f"[default]\nregion = us-east-1\ns3 =\n  max_concurrent_requests = {concurrency}\n"
                    f"  multipart_threshold = {part}\n  multipart_chunksize = {part}\n  addressing_style = path\n")
        return dict(self.env, AWS_CONFIG_FILE=self.aws_config)

    def timed(self, command, env=None):
        """Runs a client command under GNU time: wall s, CPU s (user+sys of its tree), peak RSS MiB,
        and the CPU s the storage server's processes used meanwhile (they share the machine's cores)."""
        out = tempfile.NamedTemporaryFile(delete=False)
        out.close()
        self.settle()
        self.prefault(self.prefault_bytes)
        server_before = server_cpu_seconds()
        start = time.perf_counter()
        # A session of its own: a run that outlives its limit is stopped with every process it started
        # (s5cmd's wrapper and binary, say) and counted as a failure of that tool, not a hung benchmark.
        proc = subprocess.Popen(["/usr/bin/time", "-f", "%U %S %M", "-o", out.name] + command, env=env or self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            _, stderr = proc.communicate(timeout=self.args.run_limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            os.unlink(out.name)
            raise RuntimeError(f"{command[0]} gave no result within {self.args.run_limit:g} s (stopped; --run-limit)")
        wall = time.perf_counter() - start
        with open(out.name) as f:
            fields = f.read().strip().splitlines()[-1].split()
        os.unlink(out.name)
        if proc.returncode != 0:
            raise RuntimeError(f"{command[0]} failed ({proc.returncode}): {stderr[-2000:]}")
        user, system, rss_kib = float(fields[0]), float(fields[1]), int(fields[2])
        return {"wall": wall, "cpu": user + system, "rss_mib": rss_kib / 1024, "server_cpu": server_cpu_seconds() - server_before}

    def prefault(self, size):
        """Writes and deletes a file of `size` bytes just before a download's timed run. This VM hands
        free memory back to its host (`page_reporting` on the kernel's command line), and a 1 GiB
        write after 20 s idle cost 3.4-3.6 s of system time against 0.2-0.4 s right after another
        (dd): without this, a download's CPU and wall time depended on how long the machine had been
        idle before it, round 1 most. (Touching anonymous memory instead did not help.) The file is
        deleted before writeback, so nothing reaches the disk."""
        if size <= 0:
            return
        chunk = b"\1" * (8 * MiB)
        path = os.path.join(self.work, "prefault.bin")
        with open(path, "wb") as f:
            for _ in range(size // len(chunk)):
                f.write(chunk)
        os.unlink(path)

    @staticmethod
    def settle(idle_share=0.05, longest=30.0):
        """Waits (at most `longest` s) until the storage server is idle: the writes and deletes of
        the run before (BlueStore's flushes and compactions) would otherwise be counted against
        whichever tool runs next, and take its CPU."""
        deadline = time.time() + longest
        while time.time() < deadline:
            before = server_cpu_seconds()
            time.sleep(0.5)
            if server_cpu_seconds() - before <= idle_share * 0.5:
                return

    @staticmethod
    def rotated(tools, round_):
        """The tools in the order of this round: each round starts one tool later, so no tool
        always runs first after another scenario's (or its own) writes."""
        items = list(tools.items())
        shift = (round_ - 1) % len(items)
        return items[shift:] + items[:shift]

    def delete_prefix(self, prefix):
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
        for upload in self.s3.list_multipart_uploads(Bucket=self.bucket, Prefix=prefix).get("Uploads", []):
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"])

    def stored(self, measurement, prefix, count, size):
        """Returns `measurement` if `prefix` holds `count` objects of `size`
        bytes each (checked after the timed run): an upload that stored less
        is a failed run, not a fast one."""
        got = [o["Size"] for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
               for o in page.get("Contents", [])]
        if len(got) != count or any(g != size for g in got):
            raise RuntimeError(f"stored {len(got)} objects under {prefix} ({sum(got)} bytes), "
                               f"expected {count} of {size} bytes")
        return measurement

    def attempt(self, scenario, tool, round_, run, bytes_, objects):
        """Runs and records one measurement; a tool that cannot do the scenario here is reported, not fatal."""
        try:
            self.record(scenario, tool, round_, run(), bytes_, objects)
            return True
        except RuntimeError as error:
            reason = str(error).strip().splitlines()[-1][:300]
            self.failures.setdefault(f"{scenario} {tool}", reason)
            log(f"{scenario} {tool:14} round {round_}: FAILED: {reason}")
            return False

    def record(self, scenario, tool, round_, m, bytes_, objects):
        m.update(scenario=scenario, tool=tool, round=round_, bytes=bytes_, objects=objects,
                 mb_s=bytes_ / m["wall"] / 1e6, objects_s=objects / m["wall"], cpu_per_gib=m["cpu"] / (bytes_ / GiB),
                 server_cpu_per_gib=m["server_cpu"] / (bytes_ / GiB))
        self.results.append(m)
        log(f"{scenario} {tool:14} round {round_}: {m['mb_s']:8.1f} MB/s {m['objects_s']:8.1f} obj/s "
            f"{m['cpu_per_gib']:6.2f} CPU-s/GiB {m['server_cpu_per_gib']:6.2f} server CPU-s/GiB {m['rss_mib']:7.1f} MiB RSS")

    def ferry(self, *args):
        # Ferry as it runs by default: Content-MD5 on single PUTs and a CRC-32C on every request.
        return [FERRY, *args, "--s3-endpoint", self.endpoint, "--region", "us-east-1"]

    def with_baseline(self, tools):
        """Adds "ferry-baseline" (FERRY_BASELINE_BINARY) right after "ferry", same arguments."""
        if not BASELINE:
            return tools
        out = {}
        for name, run in tools.items():
            out[name] = run
            if name == "ferry":
                out["ferry-baseline"] = self.baseline_of(run)
        return out

    def baseline_of(self, run):
        def swapped(*a):
            global FERRY
            saved, FERRY = FERRY, BASELINE
            try:
                return run(*a)
            finally:
                FERRY = saved
        return swapped

    def presign(self, method, key, **params):
        return self.s3.generate_presigned_url(method, Params=dict(Bucket=self.bucket, Key=key, **params), ExpiresIn=3600)

    # ---------- data ----------

    def prepare(self):
        os.makedirs(self.work, exist_ok=True)
        self.big = os.path.join(self.work, "s1.bin")
        size = int(self.args.big_gib * GiB)
        if not os.path.exists(self.big) or os.path.getsize(self.big) != size:
            log(f"writing {size / GiB:.2f} GiB of random bytes")
            with open(self.big, "wb") as f:
                for _ in range(size // (64 * MiB)):
                    f.write(os.urandom(64 * MiB))
                f.write(os.urandom(size % (64 * MiB)))  # --big-gib need not be a multiple of 64 MiB
        self.parts_dir = os.path.join(self.work, "s1-parts")
        if not os.path.isdir(self.parts_dir):
            os.makedirs(self.parts_dir)
            with open(self.big, "rb") as f:
                i = 1
                while chunk := f.read(8 * MiB):
                    with open(os.path.join(self.parts_dir, f"part-{i:05d}"), "wb") as p:
                        p.write(chunk)
                    i += 1
        self.small_dir = os.path.join(self.work, "s3-files")
        if not os.path.isdir(self.small_dir):
            os.makedirs(self.small_dir)
            for i in range(self.args.small_count):
                with open(os.path.join(self.small_dir, f"f{i:05d}.bin"), "wb") as f:
                    f.write(os.urandom(64 * 1024))
        try:
            self.s3.create_bucket(Bucket=self.bucket)
        except self.s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        log("uploading the download sources (untimed)")
        self.s3.upload_file(self.big, self.bucket, "src/s1.bin")
        medium = os.urandom(16 * MiB)
        for i in range(self.args.medium_count):
            self.s3.put_object(Bucket=self.bucket, Key=f"src/s4/m{i:03d}.bin", Body=medium[i:] + medium[:i])
        # Read every download source once through the server, untimed: the first
        # read of an object after its upload likely comes from BlueStore's disk,
        # later ones from its cache, and the first round was slow for every tool.
        log("reading the download sources once (untimed)")
        for key in ["src/s1.bin"] + [f"src/s4/m{i:03d}.bin" for i in range(self.args.medium_count)]:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"]
            while body.read(16 * MiB):
                pass
        # Warm the page cache for every source file.
        for d, _, names in os.walk(self.work):
            for n in names:
                with open(os.path.join(d, n), "rb") as f:
                    while f.read(16 * MiB):
                        pass

    # ---------- scenarios ----------

    def s1_tools(self, r):
        part, conc = 8 * MiB, 8
        key = f"s1/{{tool}}-{r}.bin"
        aws_env = self.aws_settings(conc, "8MB")
        return {
            "ferry": lambda k: self.timed(self.ferry("cp", self.big, f"s3://{self.bucket}/{k}", "--part-size", "8MiB",
                                                     "--part-concurrency", str(conc), "--multipart-threshold", "8MiB", "--quiet")),
            "s5cmd": lambda k: self.timed(["s5cmd", "--endpoint-url", self.endpoint, "cp", "-p", "8", "-c", str(conc),
                                           self.big, f"s3://{self.bucket}/{k}"]),
            "rclone": lambda k: self.timed(["rclone", "copyto", self.big, f"ceph:{self.bucket}/{k}", "--s3-chunk-size", "8M",
                                            "--s3-upload-cutoff", "8M", "--s3-upload-concurrency", str(conc),
                                            "--s3-disable-checksum", "--ignore-checksum"]),
            "boto3": lambda k: self.timed(BOTO + ["classic", "upload-file", self.big, self.bucket, k, str(part), str(conc)]),
            "boto3-crt": lambda k: self.timed(BOTO + ["crt", "upload-file", self.big, self.bucket, k, str(part), str(conc)]),
            "aws-cli": lambda k: self.timed(["aws", "s3", "cp", self.big, f"s3://{self.bucket}/{k}", "--endpoint-url",
                                             self.endpoint, "--only-show-errors"], env=aws_env),
            "curl": lambda k: self.timed(["curl", "-sS", "-f", "-T", self.big, "-o", "/dev/null", self.presign("put_object", k)]),
            "curl-parallel": lambda k: self.curl_parallel_upload(k, conc),
        }, key

    def curl_parallel_upload(self, key, conc):
        upload = self.s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        parts = sorted(os.listdir(self.parts_dir))
        config = os.path.join(self.work, "curl-up.cfg")
        with open(config, "w") as f:
            f.write(self.curl_operations([{"url": self.presign("upload_part", key, UploadId=upload, PartNumber=i),
                                           "upload-file": os.path.join(self.parts_dir, name), "output": "/dev/null"}
                                          for i, name in enumerate(parts, 1)]))
        try:
            m = self.timed(["curl", "--no-progress-meter", "--parallel", "--parallel-max", str(conc), "-K", config])
            # Each part must hold its own file's bytes (its ETag is their MD5).
            listed = self.s3.list_parts(Bucket=self.bucket, Key=key, UploadId=upload, MaxParts=10000)["Parts"]
            stored = {p["PartNumber"]: p["ETag"].strip('"') for p in listed}
            for i, name in enumerate(parts, 1):
                if stored.get(i) != self.part_md5(name):
                    raise RuntimeError(f"curl-parallel stored part {i} as {stored.get(i)}, not {name}")
        finally:
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload)
        return m

    @staticmethod
    def curl_operations(operations):
        """A curl config of one operation per dict, separated by `next`: options
        such as `range` are not paired with URLs but apply to the whole
        operation, so without `next` the last range given would be used for
        every URL (the S2 reference once fetched its last 8 MiB 128 times).
        `fail` is per operation too; the command line says `--no-progress-meter`."""
        blocks = []
        for operation in operations:
            lines = [f'{name} = "{value}"' for name, value in operation.items()]
            blocks.append("\n".join(lines + ["fail", "show-error"]))
        return "\nnext\n".join(blocks) + "\n"

    def part_md5(self, name):
        if not hasattr(self, "_part_md5s"):
            self._part_md5s = {}
        if name not in self._part_md5s:
            with open(os.path.join(self.parts_dir, name), "rb") as f:
                self._part_md5s[name] = hashlib.md5(f.read()).hexdigest()
        return self._part_md5s[name]

    def s2_tools(self, r):
        part, conc = 8 * MiB, 8
        src = "src/s1.bin"
        out = os.path.join(self.work, "s2-out.bin")
        aws_env = self.aws_settings(conc, "8MB")
        return {
            "ferry": lambda: self.timed(self.ferry("cp", f"s3://{self.bucket}/{src}", out, "--part-size", "8MiB",
                                                   "--part-concurrency", str(conc), "--quiet")),
            "s5cmd": lambda: self.timed(["s5cmd", "--endpoint-url", self.endpoint, "cp", "-p", "8", "-c", str(conc),
                                         f"s3://{self.bucket}/{src}", out]),
            "rclone": lambda: self.timed(["rclone", "copyto", f"ceph:{self.bucket}/{src}", out, "--multi-thread-streams",
                                          str(conc), "--multi-thread-chunk-size", "8M", "--multi-thread-cutoff", "8M",
                                          "--ignore-checksum"]),
            "boto3": lambda: self.timed(BOTO + ["classic", "download-file", self.bucket, src, out, str(part), str(conc)]),
            "boto3-crt": lambda: self.timed(BOTO + ["crt", "download-file", self.bucket, src, out, str(part), str(conc)]),
            "aws-cli": lambda: self.timed(["aws", "s3", "cp", f"s3://{self.bucket}/{src}", out, "--endpoint-url",
                                           self.endpoint, "--only-show-errors"], env=aws_env),
            "curl": lambda: self.timed(["curl", "-sS", "-f", "-o", out, self.presign("get_object", src)]),
            "curl-parallel": lambda: self.curl_parallel_download(src, conc),
        }, out

    def curl_parallel_download(self, key, conc):
        size = os.path.getsize(self.big)
        url = self.presign("get_object", key)
        out_dir = os.path.join(self.work, "s2-parts")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        config = os.path.join(self.work, "curl-down.cfg")
        starts = list(range(0, size, 8 * MiB))
        with open(config, "w") as f:
            f.write(self.curl_operations([{"url": url, "range": f"{start}-{min(start + 8 * MiB, size) - 1}",
                                           "output": f"{out_dir}/p{i:05d}"} for i, start in enumerate(starts)]))
        try:
            m = self.timed(["curl", "--no-progress-meter", "--parallel", "--parallel-max", str(conc), "-K", config])
            # The parts, in order, must be the object (the source file it was uploaded from).
            with open(self.big, "rb") as source:
                for i, start in enumerate(starts):
                    with open(f"{out_dir}/p{i:05d}", "rb") as part:
                        if part.read() != source.read(8 * MiB):
                            raise RuntimeError(f"curl-parallel part {i} (from byte {start}) does not hold the object's bytes")
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
        return m

    def s3_tools(self, r, conc=32):
        d = self.small_dir
        aws_env = self.aws_settings(conc, "8MB")
        return {
            "ferry": lambda p: self.timed(self.ferry("cp", "--recursive", d, f"s3://{self.bucket}/{p}", "--max-transfers", str(conc))),
            "s5cmd": lambda p: self.timed(["s5cmd", "--endpoint-url", self.endpoint, "--numworkers", str(conc), "cp",
                                           d + "/*", f"s3://{self.bucket}/{p}"]),
            "rclone": lambda p: self.timed(["rclone", "copy", d, f"ceph:{self.bucket}/{p}", "--transfers", str(conc),
                                            "--checkers", str(conc), "--s3-disable-checksum", "--ignore-checksum",
                                            "--no-check-dest"]),
            "boto3": lambda p: self.timed(BOTO + ["classic", "upload-dir", d, self.bucket, p, str(conc)]),
            "boto3-crt": lambda p: self.timed(BOTO + ["crt", "upload-dir", d, self.bucket, p, str(conc)]),
            "aws-cli": lambda p: self.timed(["aws", "s3", "cp", "--recursive", d, f"s3://{self.bucket}/{p}", "--endpoint-url",
                                             self.endpoint, "--only-show-errors"], env=aws_env),
        }

    def s4_tools(self, r, conc=8):
        src = "src/s4/"
        out = os.path.join(self.work, "s4-out")
        aws_env = self.aws_settings(conc, "8MB")
        return {
            "ferry": lambda: self.timed(self.ferry("cp", "--recursive", f"s3://{self.bucket}/{src}", out, "--max-transfers",
                                                   str(conc), "--part-concurrency", "2")),
            "s5cmd": lambda: self.timed(["s5cmd", "--endpoint-url", self.endpoint, "--numworkers", str(conc), "cp",
                                         f"s3://{self.bucket}/{src}*", out + "/"]),
            "rclone": lambda: self.timed(["rclone", "copy", f"ceph:{self.bucket}/{src}", out, "--transfers", str(conc),
                                          "--ignore-checksum", "--no-check-dest", "--multi-thread-streams", "2"]),
            "boto3": lambda: self.timed(BOTO + ["classic", "download-dir", self.bucket, src, out, str(conc)]),
            "boto3-crt": lambda: self.timed(BOTO + ["crt", "download-dir", self.bucket, src, out, str(conc)]),
            "aws-cli": lambda: self.timed(["aws", "s3", "cp", "--recursive", f"s3://{self.bucket}/{src}", out,
                                           "--endpoint-url", self.endpoint, "--only-show-errors"], env=aws_env),
            # References, not peers: what the server gives a client that does next to nothing.
            "curl-parallel": lambda: self.curl_parallel_objects(src, out, conc),
            "curl-discard": lambda: self.curl_parallel_objects(src, None, conc),
        }, out

    def curl_parallel_objects(self, prefix, out, conc):
        """S4's references: one GET per object through presigned URLs, `conc` at once, into
        a file each (curl-parallel) or into /dev/null (curl-discard: no file written at all,
        the server's pace for this load on this machine)."""
        keys = [f"{prefix}m{i:03d}.bin" for i in range(self.args.medium_count)]
        config = os.path.join(self.work, "curl-objects.cfg")
        with open(config, "w") as f:
            f.write(self.curl_operations([{"url": self.presign("get_object", key),
                                           "output": os.path.join(out, os.path.basename(key)) if out else "/dev/null"}
                                          for key in keys]))
        return self.timed(["curl", "--no-progress-meter", "--parallel", "--parallel-max", str(conc), "-K", config])

    def run_scenarios(self):
        rounds, wanted = self.args.rounds, self.args.scenarios
        big = os.path.getsize(self.big)
        for r in range(1, rounds + 1):
            if "S1" in wanted:
                tools, key = self.s1_tools(r)
                tools = self.with_baseline(tools)
                for tool, run in self.rotated(tools, r):
                    k = key.format(tool=tool)
                    # curl-parallel's parts are checked by ETag and the upload aborted (it is a reference).
                    check = (lambda m: m) if tool == "curl-parallel" else (lambda m: self.stored(m, k, 1, big))
                    self.attempt("S1", tool, r, lambda: check(run(k)), big, 1)
                    self.delete_prefix(k)
            if "S2" in wanted:
                self.prefault_bytes = big
                tools, out = self.s2_tools(r)
                tools = self.with_baseline(tools)
                for tool, run in self.rotated(tools, r):
                    if self.attempt("S2", tool, r, run, big, 1) and tool != "curl-parallel" and os.path.getsize(out) != big:
                        raise RuntimeError(f"S2 {tool} wrote {os.path.getsize(out)} bytes")
                    os.unlink(out) if os.path.exists(out) else None
            self.prefault_bytes = 0
            if "S3" in wanted:
                for tool, run in self.rotated(self.with_baseline(self.s3_tools(r)), r):
                    prefix = f"s3/{tool}-{r}/"
                    self.attempt("S3", tool, r, lambda: self.stored(run(prefix), prefix, self.args.small_count, 64 * 1024),
                                 self.args.small_count * 64 * 1024, self.args.small_count)
                    self.delete_prefix(prefix)
            if "S4" in wanted:
                self.prefault_bytes = self.args.medium_count * 16 * MiB
                tools, out = self.s4_tools(r)
                tools = self.with_baseline(tools)
                for tool, run in self.rotated(tools, r):
                    shutil.rmtree(out, ignore_errors=True)
                    os.makedirs(out)
                    if self.attempt("S4", tool, r, run, self.args.medium_count * 16 * MiB, self.args.medium_count) \
                            and tool != "curl-discard":  # it writes no file
                        got = sum(os.path.getsize(os.path.join(dp, n)) for dp, _, ns in os.walk(out) for n in ns)
                        if got != self.args.medium_count * 16 * MiB:
                            raise RuntimeError(f"S4 {tool} wrote {got} bytes")
                shutil.rmtree(out, ignore_errors=True)
                self.prefault_bytes = 0

    # ---------- S5: the pipeline ----------

    def s5(self):
        """5,000 small upload requests through Kafka (mock cluster) -> worker -> S3 -> ObjectCreated trigger."""
        count = self.args.small_count
        # Objects a run before left under the same keys carry the same transfer ids: the worker
        # would find them (its HEAD) and not upload again, and the run would measure that shortcut.
        self.delete_prefix("public/s5/")
        base, data = self.scenario_dir("s5")
        for name in sorted(os.listdir(self.small_dir))[:count]:
            os.link(os.path.join(self.small_dir, name), os.path.join(data, "in", name))
        kafka, bootstrap = self.dev_cluster(base)
        port = 19090
        worker_log = open(os.path.join(base, "worker.log"), "w")
        worker = subprocess.Popen([FERRY, "worker", "--bootstrap-servers", bootstrap, "--s3-endpoint", self.endpoint,
                                   "--region", "us-east-1", "--data-root", data, "--state-dir", os.path.join(base, "state"),
                                   "--max-transfers", "32",
                                   # RGW 16.2 refuses If-None-Match: * on an occupied key (TransferEngineTests'
                                   # conditional tests): new keys go without a HEAD. Left to `auto`, the
                                   # worker would learn it only from an overwrite, and S5 has none.
                                   "--conditional-writes", "on",
                                   "--http-address", f"127.0.0.1:{port}", "--log-level", "warning"],
                                  env=self.env, stdout=worker_log, stderr=worker_log, cwd=base)
        try:
            for _ in range(120):
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                        break
                except Exception:
                    time.sleep(0.5)
            audit = os.path.join(base, "state", "trigger-output", "audit", "audit.jsonl")
            names = sorted(os.listdir(os.path.join(data, "in")))

            def produce(tag, rate):
                """Sends one request per file through kcat; returns the send time of each key."""
                sent = {}
                kcat = subprocess.Popen(["kcat", "-P", "-b", bootstrap, "-t", "ferry.requests", "-K", "\t", "-X", "linger.ms=1"],
                                        stdin=subprocess.PIPE, text=True)
                start = time.time()
                for i, name in enumerate(names):
                    if rate:
                        delay = start + i / rate - time.time()
                        if delay > 0:
                            time.sleep(delay)
                    key = f"s5/{tag}/{name}"
                    request = {"id": f"s5-{tag}-{i}", "op": "upload", "bucket": self.bucket, "key": key,
                               "source": "file://" + os.path.join(data, "in", name)}
                    sent["public/" + key] = time.time()
                    kcat.stdin.write(f"{self.bucket}/{key}\t{json.dumps(request)}\n")
                    kcat.stdin.flush()
                kcat.stdin.close()
                kcat.wait()
                return sent, start

            # The audit log is read as it grows, from where the last read stopped: re-reading and
            # re-parsing all of it every half second took CPU from the two cores being measured
            # (10,000 lines by the end of the latency run).
            tail = {"offset": 0, "rest": b"", "by_tag": {}}

            def read_audit():
                if not os.path.exists(audit):
                    return
                with open(audit, "rb") as f:
                    f.seek(tail["offset"])
                    chunk = f.read()
                tail["offset"] += len(chunk)
                lines = (tail["rest"] + chunk).split(b"\n")
                tail["rest"] = lines.pop()  # a line still being written
                for line in lines:
                    try:
                        o = json.loads(line)
                    except ValueError:
                        continue
                    parts = o.get("key", "").split("/")
                    if len(parts) > 3 and parts[:2] == ["public", "s5"]:
                        tail["by_tag"].setdefault(parts[2], {}).setdefault(o["key"], o["handledAt"])

            def handled(tag, expected, timeout=900):
                deadline = time.time() + timeout
                while time.time() < deadline:
                    read_audit()
                    seen = tail["by_tag"].get(tag, {})
                    if len(seen) >= expected:
                        return seen
                    time.sleep(0.5)
                raise RuntimeError(f"S5 {tag}: {len(seen)} of {expected} triggers seen")

            def parse(ts):
                return time.mktime(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + float("0" + ts[19:-1])

            log(f"S5 saturation: {count} requests at once")
            self.settle()
            cpu_before, server_before = process_cpu_seconds(worker.pid), server_cpu_seconds()
            sent, start = produce("burst", None)
            seen = handled("burst", count)
            worker_cpu_ms = (process_cpu_seconds(worker.pid) - cpu_before) * 1000 / count
            server_cpu_ms = (server_cpu_seconds() - server_before) * 1000 / count
            finish = max(parse(v) for v in seen.values())
            burst_rate = count / (finish - start)
            offered = round(burst_rate * self.args.s5_load, 1)
            log(f"S5 saturation: {burst_rate:.1f} requests/s; latency run at {offered} requests/s")
            self.settle()
            sent, start = produce("steady", offered)
            seen = handled("steady", count)
            latencies = sorted((parse(seen[k]) - sent[k]) * 1000 for k in seen)
            achieved = count / (max(parse(v) for v in seen.values()) - start)
            p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
            self.s5_result = {"requests": count, "saturation_rps": burst_rate, "worker_cpu_ms_per_request": worker_cpu_ms,
                              "server_cpu_ms_per_request": server_cpu_ms, "offered_rps": offered,
                              "achieved_rps": achieved, "p50_ms": p(0.50), "p99_ms": p(0.99), "max_ms": latencies[-1],
                              "stages": self.s5_stages_or_error(bootstrap, names, sent, seen, parse)}
            log("S5", json.dumps(self.s5_result))
        finally:
            worker.terminate()
            worker.wait(60)
            kafka.terminate()
            kafka.wait(30)
            self.delete_prefix("public/s5/")

    def s5_stages_or_error(self, *args):
        """s5_stages, or why it could not be read (the latency figures above stand without it)."""
        try:
            return self.s5_stages(*args)
        except Exception as error:
            log(f"S5 stages not read: {error}")
            return {"error": str(error)}

    @staticmethod
    def s5_stages(bootstrap, names, sent, seen, parse):
        """Where the latency run's enqueue -> trigger time went, from the worker's own statuses
        (ferry.status: `accepted` once journaled, `completed` once the outcome is recorded):
        p50 / p99 / max in ms of send -> accepted, accepted -> completed, completed -> trigger."""
        out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", "ferry.status", "-o", "beginning", "-e", "-q", "-f", "%s\n"],
                             capture_output=True, text=True, timeout=120).stdout
        keys = {f"s5-steady-{i}": "public/s5/steady/" + name for i, name in enumerate(names)}
        at = {}
        for line in out.splitlines():
            try:
                status = json.loads(line)
            except ValueError:
                continue
            key = keys.get(status.get("id"))
            if key and status.get("state") in ("accepted", "completed"):
                at.setdefault(key, {}).setdefault(status["state"], parse(status["time"]))
        spans = {"enqueue_to_accepted": [], "accepted_to_completed": [], "completed_to_trigger": []}
        for key, times in at.items():
            if "accepted" in times and "completed" in times and key in seen and key in sent:
                spans["enqueue_to_accepted"].append((times["accepted"] - sent[key]) * 1000)
                spans["accepted_to_completed"].append((times["completed"] - times["accepted"]) * 1000)
                spans["completed_to_trigger"].append((parse(seen[key]) - times["completed"]) * 1000)
        result = {"requests": len(spans["enqueue_to_accepted"])}
        for name, values in spans.items():
            values.sort()
            if values:
                q = lambda f: values[min(len(values) - 1, int(f * len(values)))]
                result[name] = {"p50_ms": q(0.50), "p99_ms": q(0.99), "max_ms": values[-1]}
        return result

    # ---------- S6 and S7: a fleet of workers ----------

    def scenario_dir(self, name):
        """A fresh work directory for a scenario and its data root (with an empty `in/`)."""
        base = os.path.join(self.work, name)
        shutil.rmtree(base, ignore_errors=True)
        data = os.path.join(base, "data")
        os.makedirs(os.path.join(data, "in"))
        return base, data

    @staticmethod
    def small_source(data):
        """One 4 KiB file in the data root that every request of S6/S7 uploads."""
        source = os.path.join(data, "in", "4k.bin")
        with open(source, "wb") as f:
            f.write(os.urandom(4096))
        return source

    def dev_cluster(self, base, partitions=FLEET_PARTITIONS):
        """The broker in use (see use_broker), with Ferry's topics; returns (process, bootstrap).
        The embedded one is `ferry dev --kafka-only`."""
        if self.broker == "tansu":
            import tansu
            return tansu.start(base, partitions)
        brokers = ["--brokers", str(self.args.embedded_brokers)] if self.args.embedded_brokers else []
        kafka = subprocess.Popen([FERRY, "dev", "--kafka-only", "--partitions", str(partitions), *brokers], stdout=subprocess.PIPE,
                                 text=True, cwd=base)
        return kafka, kafka.stdout.readline().strip().split(": ", 1)[1]

    def start_worker(self, base, name, bootstrap, port, data, **options):
        """One `ferry worker` (see launch_worker), once it is ready."""
        worker = self.launch_worker(base, name, bootstrap, port, data, **options)
        self.await_ready(worker, port, base)
        return worker

    def launch_worker(self, base, name, bootstrap, port, data, endpoint=None, max_transfers=32, extra=(), session_timeout_ms=None):
        """Starts one `ferry worker` on S3 (`endpoint`) or, without one, on a local object store under base,
        with the worker's own Kafka settings unless `session_timeout_ms` is given."""
        log_file = open(os.path.join(base, f"{name}.log"), "w")
        storage = (["--s3-endpoint", endpoint, "--region", "us-east-1"] if endpoint
                   else ["--local-store", os.path.join(base, "objects")])
        worker = subprocess.Popen([FERRY, "worker", "--bootstrap-servers", bootstrap, *storage, "--data-root", data,
                                   "--state-dir", os.path.join(base, f"state-{name}"), "--max-transfers", str(max_transfers),
                                   *(["--kafka-property", f"session.timeout.ms={session_timeout_ms}"] if session_timeout_ms else []),
                                   "--http-address", f"127.0.0.1:{port}",
                                   "--log-level", "warning", *extra],
                                  env=dict(self.env, **self.kafka_env), stdout=log_file, stderr=log_file, cwd=base)
        worker.name = name
        return worker

    @staticmethod
    def await_ready(worker, port, base):
        """Waits until the worker's /readyz answers 200 (it has joined its group)."""
        for _ in range(240):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                    return
            except Exception:
                time.sleep(0.25)
        raise RuntimeError(f"worker {worker.name} never became ready (see {base}/{worker.name}.log)")

    @staticmethod
    def metric_lines(port):
        """A worker's /metrics, one line each; none if it does not answer."""
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode().splitlines()
        except Exception:
            return []

    def succeeded(self, port):
        """Transfers a worker completed, from its /metrics (ferry_transfers_total{outcome="completed"})."""
        return sum(int(float(line.rsplit(" ", 1)[1])) for line in self.metric_lines(port)
                   if line.startswith("ferry_transfers_total{") and 'outcome="completed"' in line)

    def assignment(self, port, group="ferry-workers"):
        """(partitions the worker's group consumer holds, rebalances it took part in), from its
        /metrics (sampled every 5 s); (0, 0) if unreadable."""
        lines = self.metric_lines(port)
        def value(name):
            return next((int(float(line.rsplit(" ", 1)[1])) for line in lines
                         if line.startswith(f'{name}{{group="{group}"}} ')), 0)
        return value("ferry_consumer_assigned_partitions"), value("ferry_consumer_rebalances_total")

    def trigger_progress(self, port):
        """(trigger invocations so far, summed over handlers and outcomes; records the trigger
        groups have yet to read, summed over groups and partitions), from a worker's /metrics."""
        lines = self.metric_lines(port)
        def total(prefix):
            return sum(int(float(line.rsplit(" ", 1)[1])) for line in lines if line.startswith(prefix))
        return total("ferry_trigger_invocations_total{"), total("ferry_trigger_offset_lag{")

    def heap_mib(self, port):
        """The worker's allocator bytes in use (ferry_process_heap_in_use_bytes), MiB; 0 if unreadable."""
        return next((float(line.split()[1]) / 2**20 for line in self.metric_lines(port)
                     if line.startswith("ferry_process_heap_in_use_bytes ")), 0.0)

    @staticmethod
    def proc_status(pid, field):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def rss_mib(self, pid):
        return self.proc_status(pid, "VmRSS") / 1024

    def enqueue(self, bootstrap, requests):
        """Sends (key, request) pairs through kcat, as any producer would."""
        kcat = subprocess.Popen(["kcat", "-P", "-b", bootstrap, "-t", "ferry.requests", "-K", "\t", "-X", "linger.ms=5"],
                                stdin=subprocess.PIPE, text=True, env=dict(os.environ, **self.kafka_env))
        for key, request in requests:
            kcat.stdin.write(f"{key}\t{json.dumps(request)}\n")
        kcat.stdin.close()
        if kcat.wait() != 0:
            raise RuntimeError("kcat could not enqueue the requests")

    def s6(self):
        """A backlog: N queued 4 KiB upload requests, then one worker (local object store) drains them."""
        count = self.args.backlog_count
        base, data = self.scenario_dir(f"s6-{self.broker}")
        source = self.small_source(data)
        kafka, bootstrap = self.dev_cluster(base)
        worker = None
        try:
            log(f"S6: queueing {count} upload requests")
            self.enqueue(bootstrap, ((f"bench/r{i}", {"id": f"s6-{i}", "op": "upload", "bucket": "bench", "key": f"s6/r{i:06d}",
                                                  "source": "file://" + source}) for i in range(count)))
            port = 19091
            started = time.time()
            worker = self.start_worker(base, "worker", bootstrap, port, data)
            # (seconds since start, finished, RSS MiB, threads, heap in use MiB, worker CPU s, broker CPU s,
            #  trigger invocations, trigger groups' offset lag)
            samples = []
            last_progress = time.time()
            while True:
                done = self.succeeded(port)
                samples.append((time.time() - started, done, self.rss_mib(worker.pid), self.proc_status(worker.pid, "Threads"),
                                self.heap_mib(port), process_cpu_seconds(worker.pid), process_cpu_seconds(kafka.pid),
                                *self.trigger_progress(port)))
                if done >= count:
                    break
                if len(samples) > 1 and done > samples[-2][1]:
                    last_progress = time.time()
                if time.time() - last_progress > 120 or worker.poll() is not None:
                    raise RuntimeError(f"S6: the worker stopped at {done} of {count} requests (see {base}/worker.log)")
                time.sleep(1)

            def at(fraction):
                """The first sample with at least fraction * count finished."""
                return next(x for x in samples if x[1] >= fraction * count)
            # The first sample with work done starts the clock; what was done by then is not
            # counted in the first 10 %'s rate (it took place before the clock started).
            first = next(x for x in samples if x[1] > 0)
            first_t = first[0]
            t10, t90, t100 = at(0.1), at(0.9), at(1.0)

            def cpu_ms(a, b, column):
                """CPU ms per request finished between two samples (column 5: the worker, 6: the broker)."""
                return (b[column] - a[column]) * 1000 / max(1, b[1] - a[1])
            result = {
                "requests": count, "broker": self.broker, "broker_version": self.broker_version, "drain_s": t100[0] - first_t,
                "first_10pct_rps": (t10[1] - first[1]) / max(1e-9, t10[0] - first_t),
                "last_10pct_rps": (t100[1] - t90[1]) / max(1e-9, t100[0] - t90[0]),
                "rss_at_10pct_mib": t10[2], "rss_at_end_mib": t100[2], "rss_max_mib": max(x[2] for x in samples),
                "threads_max": max(x[3] for x in samples),
                "heap_at_10pct_mib": t10[4], "heap_at_end_mib": t100[4],
                "worker_cpu_ms_first_10pct": cpu_ms(first, t10, 5), "worker_cpu_ms_last_10pct": cpu_ms(t90, t100, 5),
                "broker_cpu_ms_first_10pct": cpu_ms(first, t10, 6), "broker_cpu_ms_last_10pct": cpu_ms(t90, t100, 6),
            }
            # The same worker runs the triggers (audit, index, manifests) on the events and stream
            # records of these uploads, and they share its CPU with the transfers: report what the
            # triggers did, how far behind they were when the last transfer finished, and how long
            # they took to catch up (at most 600 s more). A drain that ends early with the triggers
            # far behind is not the same result as one that kept up.
            def invocations_per_s(a, b):
                return (b[7] - a[7]) / max(1e-9, b[0] - a[0])
            result.update(trigger_invocations_per_s_first_10pct=invocations_per_s(first, t10),
                          trigger_invocations_per_s_last_10pct=invocations_per_s(t90, t100),
                          trigger_lag_at_drain=t100[8])
            caught_up = None
            deadline = time.time() + 600
            while time.time() < deadline:
                invocations, lag = self.trigger_progress(port)
                samples.append((time.time() - started, count, self.rss_mib(worker.pid), self.proc_status(worker.pid, "Threads"),
                                self.heap_mib(port), process_cpu_seconds(worker.pid), process_cpu_seconds(kafka.pid), invocations, lag))
                # The lag gauges are sampled every 5 s: two readings of 0 in a row.
                if lag == 0 and samples[-2][8] == 0:
                    caught_up = samples[-1][0] - t100[0]
                    break
                time.sleep(1)
            result["triggers_caught_up_s"] = caught_up
            result["samples"] = samples[::max(1, len(samples) // 200)]
            time.sleep(10)
            result["rss_idle_mib"] = self.rss_mib(worker.pid)
            result["heap_idle_mib"] = self.heap_mib(port)
            log(f"S6 ({self.broker})", json.dumps({k: v for k, v in result.items() if k != "samples"}))
            return result
        finally:
            for p in (worker, kafka):
                if p:
                    p.terminate()
                    p.wait(60)

    def s7(self):
        """1, 2 and 4 workers on one broker against RGW behind a 50 ms latency proxy: does throughput scale?"""
        count, transfers = self.args.scaling_count, self.args.scaling_transfers
        # As in S5: objects left under these keys (by S7 on another broker) carry the same transfer
        # ids, and a worker would find them with its HEAD instead of uploading.
        self.delete_prefix("public/s7/")
        base, data = self.scenario_dir(f"s7-{self.broker}")
        source = self.small_source(data)
        target = self.endpoint.rsplit(":", 1)
        proxy_port = 17492
        proxy = subprocess.Popen([sys.executable, os.path.join(ROOT, "Benchmarks", "latency_proxy.py"), str(proxy_port),
                                  target[0].split("//")[1], target[1], str(self.args.scaling_latency_ms)],
                                 stdout=subprocess.PIPE, text=True)
        proxy.stdout.readline()
        endpoint = f"http://127.0.0.1:{proxy_port}"
        result = {"requests": count, "broker": self.broker, "broker_version": self.broker_version, "max_transfers": transfers,
                  "latency_ms": self.args.scaling_latency_ms, "runs": []}
        try:
            for n in (1, 2, 4):
                run_base = os.path.join(base, f"w{n}")
                os.makedirs(run_base)
                kafka, bootstrap = self.dev_cluster(run_base)
                workers, ports = [], [19100 + i for i in range(n)]
                try:
                    joined = time.time()
                    # The fleet starts together, as a deployment scaled to n does; joining
                    # a busy fleet is measured on its own (s7_scale_out).
                    for i, port in enumerate(ports):
                        workers.append(self.launch_worker(run_base, f"worker{i}", bootstrap, port, data, endpoint=endpoint,
                                                          max_transfers=transfers, extra=["--role", "transfers"],
                                                          session_timeout_ms=self.args.fleet_session_timeout_ms or None))
                    for worker, port in zip(workers, ports):
                        self.await_ready(worker, port, run_base)
                    ready = time.time() - joined
                    # Warm-up: the group has settled once every worker has finished some work.
                    warm = 8 * n * transfers
                    self.enqueue(bootstrap, ((f"bench/s7/{n}/warm{i}", {"id": f"s7-{n}-warm-{i}", "op": "upload", "bucket": self.bucket,
                                                                        "key": f"s7/{n}/warm{i:05d}", "source": "file://" + source})
                                             for i in range(warm)))
                    # ... and every worker holds partitions of one generation: the fleet's assignments
                    # cover the topic (with all workers done with warm-up work, a join still under way
                    # had stopped the whole burst for a rebalance, about 5 s on the mock cluster).
                    deadline = time.time() + 180
                    while True:
                        done = [self.succeeded(p) for p in ports]
                        held = [self.assignment(p) for p in ports]
                        if all(d > 0 for d in done) and sum(done) >= warm \
                                and all(a[0] > 0 for a in held) and sum(a[0] for a in held) == FLEET_PARTITIONS:
                            break
                        if time.time() > deadline:
                            raise RuntimeError(f"S7: {n} workers did not all take work and partitions within 180 s")
                        time.sleep(0.2)
                    settle = time.time() - joined
                    base_counts = [self.succeeded(p) for p in ports]
                    base_rebalances = sum(a[1] for a in held)
                    log(f"S7 {n} worker(s): ready after {ready:.1f} s, settled after {settle:.1f} s "
                        f"(partitions held {[a[0] for a in held]}); {count} requests")
                    start = time.time()
                    cpu_before = sum(process_cpu_seconds(w.pid) for w in workers)
                    self.enqueue(bootstrap, ((f"bench/s7/{n}/r{i}", {"id": f"s7-{n}-{i}", "op": "upload", "bucket": self.bucket,
                                                                     "key": f"s7/{n}/r{i:05d}", "source": "file://" + source})
                                             for i in range(count)))
                    previous, last_change, longest_gap, first_done = 0, None, 0.0, None
                    while True:
                        done = sum(self.succeeded(p) for p in ports) - sum(base_counts)
                        now = time.time()
                        if done > previous:
                            if first_done is None:
                                first_done = now - start
                            elif last_change is not None:
                                longest_gap = max(longest_gap, now - last_change)
                            last_change, previous = now, done
                        if done >= count:
                            break
                        if now - (last_change or start) > 120:
                            raise RuntimeError(f"S7: {n} workers stopped at {done} of {count} requests")
                        time.sleep(0.1)
                    elapsed = time.time() - start
                    cpu = sum(process_cpu_seconds(w.pid) for w in workers) - cpu_before
                    shares = [self.succeeded(p) - b for p, b in zip(ports, base_counts)]
                    # Rebalances during the burst (seen up to 5 s late; waited for).
                    time.sleep(5.5)
                    rebalances = sum(self.assignment(p)[1] for p in ports) - base_rebalances
                    run = {"workers": n, "rps": count / elapsed, "elapsed_s": elapsed, "ready_s": ready, "settled_s": settle,
                           "first_done_s": first_done, "longest_gap_s": longest_gap, "per_worker": shares,
                           "rebalances_during_burst": rebalances, "worker_cpu_ms_per_request": cpu * 1000 / count}
                    result["runs"].append(run)
                    log(f"S7 ({self.broker})", json.dumps(run))
                finally:
                    for p in workers + [kafka]:
                        p.terminate()
                        p.wait(60)
                self.delete_prefix(f"public/s7/{n}/")
            result["scale_out"] = self.s7_scale_out(base, data, source, endpoint, transfers)
            self.delete_prefix("public/s7/join/")
            return result
        finally:
            proxy.terminate()
            proxy.wait(10)

    def s7_scale_out(self, base, data, source, endpoint, transfers):
        """Two workers busy with a backlog, two more join: does the fleet pause, and when do the new ones work?"""
        run_base = os.path.join(base, "join")
        os.makedirs(run_base)
        count = self.args.scaling_count * 4
        kafka, bootstrap = self.dev_cluster(run_base)
        ports = [19100 + i for i in range(4)]
        workers = []
        try:
            def launch(i):
                workers.append(self.launch_worker(run_base, f"worker{i}", bootstrap, ports[i], data, endpoint=endpoint,
                                                  max_transfers=transfers, extra=["--role", "transfers"], session_timeout_ms=self.args.fleet_session_timeout_ms or None))
            for i in (0, 1):
                launch(i)
            for worker, port in zip(workers, ports):
                self.await_ready(worker, port, run_base)
            self.enqueue(bootstrap, ((f"bench/s7/join/r{i}", {"id": f"s7-join-{i}", "op": "upload", "bucket": self.bucket,
                                                              "key": f"s7/join/r{i:05d}", "source": "file://" + source})
                                     for i in range(count)))
            start = time.time()
            joined_at, first_work, samples = None, None, []  # samples: (seconds, done by all, done by the joiners)
            while True:
                counts = [self.succeeded(p) for p in ports[:len(workers)]]
                now = time.time() - start
                samples.append((now, sum(counts), sum(counts[2:])))
                if joined_at is None and now >= 10:
                    for i in (2, 3):
                        launch(i)
                    joined_at = now
                if first_work is None and sum(counts[2:]) > 0:
                    first_work = now - joined_at
                if sum(counts) >= count:
                    break
                if len(samples) > 1200 and samples[-1200][1] == sum(counts):
                    raise RuntimeError(f"S7 scale-out: the fleet stopped at {sum(counts)} of {count} requests")
                time.sleep(0.1)
            # The fleet's longest pause: the longest time nobody finished anything, from the first completion on.
            changes = [t for (t, done, _), (_, earlier, _) in zip(samples[1:], samples) if done > earlier]
            pause = max((b - a for a, b in zip(changes, changes[1:])), default=0.0)
            before = [x for x in samples if x[0] <= joined_at]
            rate_before = (before[-1][1] - before[0][1]) / max(1e-9, before[-1][0] - before[0][0])
            during = [x for x in samples if joined_at <= x[0] <= joined_at + (first_work or 0)]
            rate_during = (during[-1][1] - during[0][1]) / max(1e-9, during[-1][0] - during[0][0]) if len(during) > 1 else 0.0
            result = {"requests": count, "joined_at_s": joined_at, "joiners_first_work_s": first_work,
                      "longest_pause_s": pause, "rps_before_join": rate_before, "rps_while_joining": rate_during,
                      "elapsed_s": samples[-1][0], "per_worker": [self.succeeded(p) for p in ports]}
            log("S7 scale-out", json.dumps(result))
            return result
        finally:
            for p in workers + [kafka]:
                p.terminate()
                p.wait(60)


SCENARIOS = ("S1", "S2", "S3", "S4")
# results.json's keys of S5-S7 and how BENCHMARKS.md names their runs.
PIPELINE_RESULTS = {"s5": "S5", "s6": "S6", "s6_tansu": "S6 on Tansu", "s7": "S7", "s7_tansu": "S7 on Tansu"}


def keep_other_scenarios(data, path, ran):
    """A run of some scenarios keeps the others' figures from the results file it replaces,
    and every scenario says which run its figures come from (`sources`)."""
    run = f"{time.strftime('%Y-%m-%d')}, {data['args']['rounds']} round(s)"
    if BASELINE:  # which build ferry-baseline was: FERRY_BASELINE_NAME (e.g. its commit), else its path
        run += f" (ferry-baseline = {os.environ.get('FERRY_BASELINE_NAME') or BASELINE})"
    old = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    old_sources = old.get("sources") or {}
    sources = {}
    for s in SCENARIOS:
        if s in ran:
            sources[s] = run
            continue
        kept = [r for r in old.get("results", []) if r["scenario"] == s]
        data["results"] += kept
        data["failures"].update({k: v for k, v in (old.get("failures") or {}).items() if k.split(" ")[0] == s})
        if kept:
            sources[s] = old_sources.get(s) or old.get("note") or "an earlier run"
    # S5-S7's figures, per broker: a scenario or broker left out of this run keeps its earlier figures.
    for key, label in PIPELINE_RESULTS.items():
        if data.get(key):
            sources[label] = run
        elif old.get(key):
            data[key] = old[key]
            sources[label] = old_sources.get(label) or old.get("note") or "an earlier run"
    data["sources"] = sources


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--run-limit", type=float, default=600,
                        help="seconds one tool's run of S1-S4 may take before it is stopped and counted as failed")
    parser.add_argument("--scenarios", default="S1,S2,S3,S4,S5,S6,S7")
    parser.add_argument("--big-gib", type=float, default=1.0)
    parser.add_argument("--small-count", type=int, default=5000)
    parser.add_argument("--medium-count", type=int, default=100)
    parser.add_argument("--s5-load", type=float, default=0.5, help="offered rate as a fraction of the saturation rate")
    parser.add_argument("--backlog-count", type=int, default=100000, help="S6: requests queued before the worker starts")
    parser.add_argument("--scaling-count", type=int, default=2000, help="S7: requests per fleet size")
    parser.add_argument("--scaling-transfers", type=int, default=4, help="S7: --max-transfers of each worker")
    parser.add_argument("--scaling-latency-ms", type=float, default=50, help="S7: delay the proxy adds to every request")
    parser.add_argument("--fleet-session-timeout-ms", type=int, default=0,
                        help="S7: the workers' session.timeout.ms (0: the worker's own default; on the embedded broker 6 s)")
    parser.add_argument("--brokers", default="embedded,tansu",
                        help="S6 and S7 on each of these brokers: embedded (ferry dev --kafka-only), tansu (Benchmarks/tansu.py)")
    parser.add_argument("--embedded-brokers", type=int, default=None,
                        help="brokers of the embedded cluster (ferry dev --brokers); ferry dev's default if not given")
    parser.add_argument("--work", default=os.path.join(ROOT, ".bench"))
    args = parser.parse_args()
    args.scenarios = set(args.scenarios.split(","))
    args.brokers = [b for b in args.brokers.split(",") if b]
    unknown = set(args.brokers) - {"embedded", "tansu"}
    if unknown:
        parser.error(f"unknown broker(s): {', '.join(sorted(unknown))} (embedded, tansu)")
    bench = Bench(args)
    bench.prepare()
    bench.run_scenarios()
    bench.s5_result = None
    if "S5" in args.scenarios:
        bench.s5()
    pipeline = {"s5": bench.s5_result}
    for broker in args.brokers:
        bench.use_broker(broker)
        suffix = "" if broker == "embedded" else f"_{broker}"
        if "S6" in args.scenarios:
            pipeline["s6" + suffix] = bench.s6()
        if "S7" in args.scenarios:
            pipeline["s7" + suffix] = bench.s7()
    bench.use_broker("embedded")
    path = os.path.join(ROOT, "Benchmarks", "results.json")
    this_run = {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()}
    import report
    data = {"results": bench.results, **pipeline, "failures": bench.failures, "args": this_run,
            "versions": report.current_versions(ROOT, ferry=FERRY)}
    keep_other_scenarios(data, path, args.scenarios)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    report.write(ROOT)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
