"""Turns Benchmarks/results.json into BENCHMARKS.md and Benchmarks/benchmarks.png."""
import json
import os
import statistics
import subprocess
import sys

SCENARIOS = {
    "S1": "upload one 1 GiB file (8 MiB parts, concurrency 8)",
    "S2": "download it (8 MiB ranges, concurrency 8)",
    "S3": "upload 5,000 × 64 KiB files (concurrency 32)",
    "S4": "download 100 × 16 MiB objects (8 at once)",
}
REFERENCES = {"curl", "curl-parallel"}


def version(command):
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except Exception as error:  # a missing tool is reported, not fatal
        return f"unavailable ({error})"


def medians(results):
    table = {}
    for r in results:
        table.setdefault((r["scenario"], r["tool"]), []).append(r)
    out = {}
    for key, runs in table.items():
        out[key] = {m: statistics.median(x[m] for x in runs) for m in ("mb_s", "objects_s", "cpu_per_gib", "rss_mib", "wall")}
        out[key]["rounds"] = len(runs)
    return out


def targets(med, s5):
    lines = []

    def get(s, t, m):
        return med.get((s, t), {}).get(m)

    for s in ("S1", "S2"):
        ferry = get(s, "ferry", "mb_s")
        if ferry is None:
            continue
        peers = {t: v["mb_s"] for (sc, t), v in med.items() if sc == s and t not in REFERENCES and t != "ferry"}
        if not peers:
            continue
        best_tool, best = max(peers.items(), key=lambda kv: kv[1])
        ref = max(get(s, "curl", "mb_s") or 0, get(s, "curl-parallel", "mb_s") or 0)
        lines.append(f"| {s} MB/s ≥ best peer ({best_tool} {best:.0f}) | {ferry:.0f} | {'met' if ferry >= best else 'missed'} |")
        lines.append(f"| {s} MB/s ≥ 85% of curl's reference ({ref:.0f}) | {ferry:.0f} ({ferry / ref * 100:.0f}%) | "
                     f"{'met' if ferry >= 0.85 * ref else 'missed'} |")
        rss = get(s, "ferry", "rss_mib")
        lines.append(f"| {s} peak RSS ≤ 64 MiB + 8 × 8 MiB = 128 MiB | {rss:.0f} MiB | {'met' if rss <= 128 else 'missed'} |")
    for s in ("S3", "S4"):
        ferry = get(s, "ferry", "objects_s")
        if ferry is None:
            continue
        peers = {t: v["objects_s"] for (sc, t), v in med.items() if sc == s and t != "ferry"}
        if not peers:
            continue
        best_tool, best = max(peers.items(), key=lambda kv: kv[1])
        lines.append(f"| {s} objects/s ≥ 1.2 × best peer ({best_tool} {best:.0f}) | {ferry:.0f} ({ferry / best:.2f}×) | "
                     f"{'met' if ferry >= 1.2 * best else 'missed'} |")
    for s in ("S1", "S2", "S3", "S4"):
        # curl moves bytes without parts, retries or checks: a reference, not a competitor.
        cpu = {t: v["cpu_per_gib"] for (sc, t), v in med.items() if sc == s and t not in REFERENCES}
        if "ferry" not in cpu:
            continue
        lowest_tool = min(cpu, key=cpu.get)
        lines.append(f"| {s} CPU-s/GiB lowest of all tools (curl reference aside) | {cpu['ferry']:.2f} (lowest: {lowest_tool} {cpu[lowest_tool]:.2f}) | "
                     f"{'met' if lowest_tool == 'ferry' else 'missed'} |")
    if s5 and get("S3", "ferry", "objects_s"):
        s3 = get("S3", "ferry", "objects_s")
        lines.append(f"| S5 requests/s ≥ 50% of Ferry's S3 objects/s ({s3:.0f}) | {s5['saturation_rps']:.0f} "
                     f"({s5['saturation_rps'] / s3 * 100:.0f}%) | {'met' if s5['saturation_rps'] >= 0.5 * s3 else 'missed'} |")
    return lines


def plot(med, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    scenarios = [s for s in SCENARIOS if any(k[0] == s for k in med)]
    fig, axes = plt.subplots(2, len(scenarios), figsize=(4.2 * len(scenarios), 7), squeeze=False)
    for i, s in enumerate(scenarios):
        tools = sorted({t for (sc, t) in med if sc == s}, key=lambda t: (t != "ferry", t))
        metric = "mb_s" if s in ("S1", "S2") else "objects_s"
        colors = ["#d1495b" if t == "ferry" else ("#888888" if t in REFERENCES else "#2e86ab") for t in tools]
        axes[0][i].bar(tools, [med[(s, t)][metric] for t in tools], color=colors)
        axes[0][i].set_title(f"{s}: {'MB/s' if metric == 'mb_s' else 'objects/s'} (higher is better)", fontsize=9)
        axes[1][i].bar(tools, [med[(s, t)]["cpu_per_gib"] for t in tools], color=colors)
        axes[1][i].set_title(f"{s}: client CPU-s per GiB (lower is better)", fontsize=9)
        for ax in (axes[0][i], axes[1][i]):
            ax.tick_params(axis="x", rotation=60, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def write(root):
    with open(os.path.join(root, "Benchmarks", "results.json")) as f:
        data = json.load(f)
    med = medians(data["results"])
    s5 = data.get("s5")
    args = data["args"]
    versions = {
        "ferry": version([os.path.join(root, ".build", "release", "ferry"), "--version"]) + " (release build)",
        "s5cmd": version(["s5cmd", "version"]),
        "rclone": version(["rclone", "version"]),
        "boto3 / botocore / awscrt": version([sys.executable, "-c",
                                               "import boto3, botocore, awscrt; print(boto3.__version__, botocore.__version__, awscrt.__version__)"]),
        "aws CLI": version(["aws", "--version"]),
        "curl": version(["curl", "--version"]),
        "server": version(["radosgw", "--version"]) + " (Ceph RGW, BlueStore on a file, loopback)",
        "machine": version(["sh", "-c", "echo $(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB, $(uname -r)"]),
    }
    png = os.path.join(root, "Benchmarks", "benchmarks.png")
    plotted = plot(med, png)
    out = ["# Benchmarks", "",
           "Written by `Benchmarks/run.sh` (see the README); every figure is a median of "
           f"{args['rounds']} rounds, the tools run in alternation within each round, against one Ceph RADOS Gateway "
           "on loopback, on the same machine, in one run. MB/s are 10^6 bytes per second of wall time; CPU is the "
           "user+sys time of the client's whole process tree (GNU time) per GiB moved; RSS is the client's peak.", ""]
    if plotted:
        out += ["![benchmarks](Benchmarks/benchmarks.png)", ""]
    for s, title in SCENARIOS.items():
        rows = sorted(((t, v) for (sc, t), v in med.items() if sc == s), key=lambda kv: -kv[1]["mb_s"])
        if not rows:
            continue
        out += [f"## {s}: {title}", "", "| tool | MB/s | objects/s | CPU-s/GiB | peak RSS MiB | wall s |", "|---|---|---|---|---|---|"]
        for t, v in rows:
            name = f"**{t}**" if t == "ferry" else (f"{t} (reference)" if t in REFERENCES else t)
            out.append(f"| {name} | {v['mb_s']:.0f} | {v['objects_s']:.1f} | {v['cpu_per_gib']:.2f} | {v['rss_mib']:.0f} | {v['wall']:.2f} |")
        out.append("")
    if s5:
        out += ["## S5: the full pipeline", "",
                f"{s5['requests']} upload requests of 64 KiB through Kafka (librdkafka's mock cluster, `ferry dev --kafka-only`), "
                "one `ferry worker` (release build, 32 transfers at once) to the same RGW, the audit trigger on each "
                "ObjectCreated event; latency is from the request's send to the trigger's run.", "",
                "| measure | value |", "|---|---|",
                f"| saturation (all requests at once) | {s5['saturation_rps']:.1f} requests/s |",
                f"| offered rate (fixed, below saturation) | {s5['offered_rps']:.1f} requests/s |",
                f"| achieved at that rate | {s5['achieved_rps']:.1f} requests/s |",
                f"| enqueue → trigger latency p50 / p99 / max | {s5['p50_ms']:.0f} / {s5['p99_ms']:.0f} / {s5['max_ms']:.0f} ms |", ""]
    failures = data.get("failures") or {}
    if failures:
        out += ["## Runs that could not be made", "", "| scenario and tool | reason (as the tool said it) |", "|---|---|"]
        out += [f"| {k} | {v.replace('|', '/')} |" for k, v in sorted(failures.items())] + [""]
    out += ["## Targets", "", "| target | Ferry | verdict |", "|---|---|---|"] + targets(med, s5) + [""]
    notes = os.path.join(root, "Benchmarks", "NOTES.md")
    if os.path.exists(notes):
        out += [open(notes).read().strip(), ""]
    out += ["## Versions and settings", ""] + [f"- {k}: {v}" for k, v in versions.items()] + [
        f"- run: `Benchmarks/run.sh --rounds {args['rounds']}` (scenarios {', '.join(args['scenarios'])}, "
        f"{args['big_gib']} GiB, {args['small_count']} small files, {args['medium_count']} medium objects)",
        "- every tool without an additional checksum (`--checksum NONE`, `AWS_REQUEST_CHECKSUM_CALCULATION=when_required`, "
        "rclone `--s3-disable-checksum`): RGW ignores them, and the same choice on all sides keeps it fair",
        "- boto3 with `max_pool_connections` ≥ 2 × its concurrency; the aws CLI with `max_concurrent_requests` and "
        "8 MB chunks; s5cmd `-p 8 -c 8` / `--numworkers`; rclone `--s3-chunk-size 8M --s3-upload-concurrency 8`, "
        "`--multi-thread-streams 8`, `--transfers`; curl through presigned URLs (single stream, and `--parallel "
        "--parallel-max 8` over the same 8 MiB parts)",
        "- sources and destinations on the same filesystem, page cache warmed before the first round",
        "- the exact commands are in `Benchmarks/run.py` (`s1_tools` … `s4_tools`, `s5`)", ""]
    with open(os.path.join(root, "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    write(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
