#!/usr/bin/env python3
"""Ferry's side-by-side benchmark against s5cmd, rclone, boto3 (classic and CRT),
the aws CLI and curl, on one local S3 server (Ceph RGW). Run it through
Benchmarks/run.sh, which installs the peers and starts the server.

Every scenario runs every tool in alternation (A B C ... A B C ...) for
--rounds rounds; the report gives medians of wall throughput, client
CPU-seconds per GiB (user+sys of the client's process tree, GNU time) and
client peak RSS. Results go to Benchmarks/results.json, BENCHMARKS.md and
Benchmarks/benchmarks.png.
"""
import argparse
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


def server_cpu_seconds():
    """user+sys CPU seconds of the storage server's processes (RGW, OSD, monitor) so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if name in SERVER_PROCESSES:
            fields = stat[stat.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])
    return total / ticks

class Bench:
    def __init__(self, args):
        self.args = args
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
        server_before = server_cpu_seconds()
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", out.name] + command, env=env or self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - start
        with open(out.name) as f:
            fields = f.read().strip().splitlines()[-1].split()
        os.unlink(out.name)
        if proc.returncode != 0:
            raise RuntimeError(f"{command[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        user, system, rss_kib = float(fields[0]), float(fields[1]), int(fields[2])
        return {"wall": wall, "cpu": user + system, "rss_mib": rss_kib / 1024, "server_cpu": server_cpu_seconds() - server_before}

    def delete_prefix(self, prefix):
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
        for upload in self.s3.list_multipart_uploads(Bucket=self.bucket, Prefix=prefix).get("Uploads", []):
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"])

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
            for i, name in enumerate(parts, 1):
                url = self.presign("upload_part", key, UploadId=upload, PartNumber=i)
                f.write(f'url = "{url}"\nupload-file = "{os.path.join(self.parts_dir, name)}"\noutput = "/dev/null"\n')
        m = self.timed(["curl", "-sS", "-f", "--parallel", "--parallel-max", str(conc), "-K", config])
        self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload)
        return m

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
        with open(config, "w") as f:
            for i, start in enumerate(range(0, size, 8 * MiB)):
                end = min(start + 8 * MiB, size) - 1
                f.write(f'url = "{url}"\nrange = {start}-{end}\noutput = "{out_dir}/p{i:05d}"\n')
        m = self.timed(["curl", "-sS", "-f", "--parallel", "--parallel-max", str(conc), "-K", config])
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
        }, out

    def run_scenarios(self):
        rounds, wanted = self.args.rounds, self.args.scenarios
        big = os.path.getsize(self.big)
        for r in range(1, rounds + 1):
            if "S1" in wanted:
                tools, key = self.s1_tools(r)
                tools = self.with_baseline(tools)
                for tool, run in tools.items():
                    k = key.format(tool=tool)
                    self.attempt("S1", tool, r, lambda: run(k), big, 1)
                    self.delete_prefix(k)
            if "S2" in wanted:
                tools, out = self.s2_tools(r)
                tools = self.with_baseline(tools)
                for tool, run in tools.items():
                    if self.attempt("S2", tool, r, run, big, 1) and tool != "curl-parallel" and os.path.getsize(out) != big:
                        raise RuntimeError(f"S2 {tool} wrote {os.path.getsize(out)} bytes")
                    os.unlink(out) if os.path.exists(out) else None
            if "S3" in wanted:
                for tool, run in self.with_baseline(self.s3_tools(r)).items():
                    prefix = f"s3/{tool}-{r}/"
                    self.attempt("S3", tool, r, lambda: run(prefix), self.args.small_count * 64 * 1024, self.args.small_count)
                    self.delete_prefix(prefix)
            if "S4" in wanted:
                tools, out = self.s4_tools(r)
                tools = self.with_baseline(tools)
                for tool, run in tools.items():
                    shutil.rmtree(out, ignore_errors=True)
                    os.makedirs(out)
                    if self.attempt("S4", tool, r, run, self.args.medium_count * 16 * MiB, self.args.medium_count):
                        got = sum(os.path.getsize(os.path.join(dp, n)) for dp, _, ns in os.walk(out) for n in ns)
                        if got != self.args.medium_count * 16 * MiB:
                            raise RuntimeError(f"S4 {tool} wrote {got} bytes")
                shutil.rmtree(out, ignore_errors=True)

    # ---------- S5: the pipeline ----------

    def s5(self):
        """5,000 small upload requests through Kafka (mock cluster) -> worker -> S3 -> ObjectCreated trigger."""
        count = self.args.small_count
        base, data = self.scenario_dir("s5")
        for name in sorted(os.listdir(self.small_dir))[:count]:
            os.link(os.path.join(self.small_dir, name), os.path.join(data, "in", name))
        kafka, bootstrap = self.dev_cluster(base)
        port = 19090
        worker_log = open(os.path.join(base, "worker.log"), "w")
        worker = subprocess.Popen([FERRY, "worker", "--bootstrap-servers", bootstrap, "--s3-endpoint", self.endpoint,
                                   "--region", "us-east-1", "--data-root", data, "--state-dir", os.path.join(base, "state"),
                                   "--max-transfers", "32", "--kafka-property", "session.timeout.ms=6000",
                                   "--http-address", f"127.0.0.1:{port}", "--log-level", "warning"],
                                  env=self.env, stdout=worker_log, stderr=worker_log, cwd=base)
        try:
            for _ in range(120):
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                        break
                except Exception:
                    time.sleep(0.5)
            audit = os.path.join(data, "audit", "audit.jsonl")
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

            def handled(tag, expected, timeout=900):
                deadline = time.time() + timeout
                while time.time() < deadline:
                    seen = {}
                    if os.path.exists(audit):
                        with open(audit) as f:
                            for line in f:
                                try:
                                    o = json.loads(line)
                                except ValueError:
                                    continue
                                if o["key"].startswith(f"public/s5/{tag}/") and o["key"] not in seen:
                                    seen[o["key"]] = o["handledAt"]
                    if len(seen) >= expected:
                        return seen
                    time.sleep(0.5)
                raise RuntimeError(f"S5 {tag}: {len(seen)} of {expected} triggers seen")

            def parse(ts):
                return time.mktime(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + float("0" + ts[19:-1])

            log(f"S5 saturation: {count} requests at once")
            sent, start = produce("burst", None)
            seen = handled("burst", count)
            finish = max(parse(v) for v in seen.values())
            burst_rate = count / (finish - start)
            offered = round(burst_rate * self.args.s5_load, 1)
            log(f"S5 saturation: {burst_rate:.1f} requests/s; latency run at {offered} requests/s")
            sent, start = produce("steady", offered)
            seen = handled("steady", count)
            latencies = sorted((parse(seen[k]) - sent[k]) * 1000 for k in seen)
            achieved = count / (max(parse(v) for v in seen.values()) - start)
            p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
            self.s5_result = {"requests": count, "saturation_rps": burst_rate, "offered_rps": offered,
                              "achieved_rps": achieved, "p50_ms": p(0.50), "p99_ms": p(0.99), "max_ms": latencies[-1]}
            log("S5", json.dumps(self.s5_result))
        finally:
            worker.terminate()
            worker.wait(60)
            kafka.terminate()
            kafka.wait(30)
            self.delete_prefix("s5/")

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

    def dev_cluster(self, base, partitions=8):
        """`ferry dev --kafka-only`: the embedded broker; returns (process, bootstrap)."""
        kafka = subprocess.Popen([FERRY, "dev", "--kafka-only", "--partitions", str(partitions)], stdout=subprocess.PIPE,
                                 text=True, cwd=base)
        return kafka, kafka.stdout.readline().strip().split(": ", 1)[1]

    def start_worker(self, base, name, bootstrap, port, data, endpoint=None, max_transfers=32, extra=(), session_timeout_ms=6000):
        """One `ferry worker` on S3 (`endpoint`) or, without one, on a local object store under base.
        A short session timeout finds a lone worker's group at once; a fleet keeps librdkafka's default (45 s)."""
        log_file = open(os.path.join(base, f"{name}.log"), "w")
        storage = (["--s3-endpoint", endpoint, "--region", "us-east-1"] if endpoint
                   else ["--local-store", os.path.join(base, "objects")])
        worker = subprocess.Popen([FERRY, "worker", "--bootstrap-servers", bootstrap, *storage, "--data-root", data,
                                   "--state-dir", os.path.join(base, f"state-{name}"), "--max-transfers", str(max_transfers),
                                   *(["--kafka-property", f"session.timeout.ms={session_timeout_ms}"] if session_timeout_ms else []),
                                   "--http-address", f"127.0.0.1:{port}",
                                   "--log-level", "warning", *extra],
                                  env=self.env, stdout=log_file, stderr=log_file, cwd=base)
        for _ in range(240):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                    return worker
            except Exception:
                time.sleep(0.25)
        raise RuntimeError(f"worker {name} never became ready (see {base}/{name}.log)")

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

    @staticmethod
    def enqueue(bootstrap, requests):
        """Sends (key, request) pairs through kcat, as any producer would."""
        kcat = subprocess.Popen(["kcat", "-P", "-b", bootstrap, "-t", "ferry.requests", "-K", "\t", "-X", "linger.ms=5"],
                                stdin=subprocess.PIPE, text=True)
        for key, request in requests:
            kcat.stdin.write(f"{key}\t{json.dumps(request)}\n")
        kcat.stdin.close()
        if kcat.wait() != 0:
            raise RuntimeError("kcat could not enqueue the requests")

    def s6(self):
        """A backlog: N queued 4 KiB upload requests, then one worker (local object store) drains them."""
        count = self.args.backlog_count
        base, data = self.scenario_dir("s6")
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
            samples = []  # (seconds since start, finished, RSS MiB, threads, heap in use MiB)
            last_progress = time.time()
            while True:
                done = self.succeeded(port)
                samples.append((time.time() - started, done, self.rss_mib(worker.pid), self.proc_status(worker.pid, "Threads"),
                                self.heap_mib(port)))
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
            first_t = next(x for x in samples if x[1] > 0)[0]
            t10, t90, t100 = at(0.1), at(0.9), at(1.0)
            self.s6_result = {
                "requests": count, "drain_s": t100[0] - first_t,
                "first_10pct_rps": (t10[1]) / max(1e-9, t10[0] - first_t),
                "last_10pct_rps": (t100[1] - t90[1]) / max(1e-9, t100[0] - t90[0]),
                "rss_at_10pct_mib": t10[2], "rss_at_end_mib": t100[2], "rss_max_mib": max(x[2] for x in samples),
                "threads_max": max(x[3] for x in samples),
                "heap_at_10pct_mib": t10[4], "heap_at_end_mib": t100[4],
                "samples": samples[::max(1, len(samples) // 200)],
            }
            time.sleep(10)
            self.s6_result["rss_idle_mib"] = self.rss_mib(worker.pid)
            self.s6_result["heap_idle_mib"] = self.heap_mib(port)
            log("S6", json.dumps({k: v for k, v in self.s6_result.items() if k != "samples"}))
        finally:
            for p in (worker, kafka):
                if p:
                    p.terminate()
                    p.wait(60)

    def s7(self):
        """1, 2 and 4 workers on one broker against RGW behind a 50 ms latency proxy: does throughput scale?"""
        count, transfers = self.args.scaling_count, self.args.scaling_transfers
        base, data = self.scenario_dir("s7")
        source = self.small_source(data)
        target = self.endpoint.rsplit(":", 1)
        proxy_port = 17492
        proxy = subprocess.Popen([sys.executable, os.path.join(ROOT, "Benchmarks", "latency_proxy.py"), str(proxy_port),
                                  target[0].split("//")[1], target[1], str(self.args.scaling_latency_ms)],
                                 stdout=subprocess.PIPE, text=True)
        proxy.stdout.readline()
        endpoint = f"http://127.0.0.1:{proxy_port}"
        self.s7_result = {"requests": count, "max_transfers": transfers, "latency_ms": self.args.scaling_latency_ms, "runs": []}
        try:
            for n in (1, 2, 4):
                run_base = os.path.join(base, f"w{n}")
                os.makedirs(run_base)
                kafka, bootstrap = self.dev_cluster(run_base)
                workers, ports = [], [19100 + i for i in range(n)]
                try:
                    joined = time.time()
                    for i, port in enumerate(ports):
                        workers.append(self.start_worker(run_base, f"worker{i}", bootstrap, port, data, endpoint=endpoint,
                                                         max_transfers=transfers, extra=["--role", "transfers"],
                                                         session_timeout_ms=None))
                    ready = time.time() - joined
                    # Warm-up: the group has settled once every worker has finished some work.
                    warm = 8 * n * transfers
                    self.enqueue(bootstrap, ((f"bench/s7/{n}/warm{i}", {"id": f"s7-{n}-warm-{i}", "op": "upload", "bucket": self.bucket,
                                                                        "key": f"s7/{n}/warm{i:05d}", "source": "file://" + source})
                                             for i in range(warm)))
                    deadline = time.time() + 180
                    while not (all(self.succeeded(p) > 0 for p in ports) and sum(self.succeeded(p) for p in ports) >= warm):
                        if time.time() > deadline:
                            raise RuntimeError(f"S7: {n} workers did not all take work within 180 s")
                        time.sleep(0.2)
                    settle = time.time() - joined
                    base_counts = [self.succeeded(p) for p in ports]
                    log(f"S7 {n} worker(s): ready after {ready:.1f} s, settled after {settle:.1f} s; {count} requests")
                    start = time.time()
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
                    shares = [self.succeeded(p) - b for p, b in zip(ports, base_counts)]
                    run = {"workers": n, "rps": count / elapsed, "elapsed_s": elapsed, "ready_s": ready, "settled_s": settle,
                           "first_done_s": first_done, "longest_gap_s": longest_gap, "per_worker": shares}
                    self.s7_result["runs"].append(run)
                    log("S7", json.dumps(run))
                finally:
                    for p in workers + [kafka]:
                        p.terminate()
                        p.wait(60)
                self.delete_prefix(f"s7/{n}/")
        finally:
            proxy.terminate()
            proxy.wait(10)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default="S1,S2,S3,S4,S5,S6,S7")
    parser.add_argument("--big-gib", type=float, default=1.0)
    parser.add_argument("--small-count", type=int, default=5000)
    parser.add_argument("--medium-count", type=int, default=100)
    parser.add_argument("--s5-load", type=float, default=0.5, help="offered rate as a fraction of the saturation rate")
    parser.add_argument("--backlog-count", type=int, default=100000, help="S6: requests queued before the worker starts")
    parser.add_argument("--scaling-count", type=int, default=2000, help="S7: requests per fleet size")
    parser.add_argument("--scaling-transfers", type=int, default=4, help="S7: --max-transfers of each worker")
    parser.add_argument("--scaling-latency-ms", type=float, default=50, help="S7: delay the proxy adds to every request")
    parser.add_argument("--work", default=os.path.join(ROOT, ".bench"))
    args = parser.parse_args()
    args.scenarios = set(args.scenarios.split(","))
    bench = Bench(args)
    bench.prepare()
    bench.run_scenarios()
    bench.s5_result = bench.s6_result = bench.s7_result = None
    if "S5" in args.scenarios:
        bench.s5()
    if "S6" in args.scenarios:
        bench.s6()
    if "S7" in args.scenarios:
        bench.s7()
    with open(os.path.join(ROOT, "Benchmarks", "results.json"), "w") as f:
        json.dump({"results": bench.results, "s5": bench.s5_result, "s6": bench.s6_result, "s7": bench.s7_result, "failures": bench.failures, "args": {k: (sorted(v) if isinstance(v, set) else v)
                                                                           for k, v in vars(args).items()}}, f, indent=1)
    import report
    report.write(ROOT)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
