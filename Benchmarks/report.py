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
REFERENCES = {"curl", "curl-parallel", "curl-discard"}
# Rows that are Ferry itself: never counted as a peer.
OWN = {"ferry", "ferry-baseline"}


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
        # Runs before the server was sampled have no server figure.
        server = [x["server_cpu_per_gib"] for x in runs if "server_cpu_per_gib" in x]
        out[key]["server_cpu_per_gib"] = statistics.median(server) if server else None
        out[key]["rounds"] = len(runs)
    return out


def targets(med, s5, s6=None, s7=None, s6_tansu=None, s7_tansu=None):
    lines = []

    def get(s, t, m):
        return med.get((s, t), {}).get(m)

    for s in ("S1", "S2"):
        ferry = get(s, "ferry", "mb_s")
        if ferry is None:
            continue
        peers = {t: v["mb_s"] for (sc, t), v in med.items() if sc == s and t not in REFERENCES and t not in OWN}
        if not peers:
            continue
        best_tool, best = max(peers.items(), key=lambda kv: kv[1])
        lines.append(f"| {s} MB/s ≥ best peer ({best_tool} {best:.0f}) | {ferry:.0f} | {'met' if ferry >= best else 'missed'} |")
        # Uploads: 85 % of curl's single PUT; downloads: the better of curl and curl-parallel.
        if s == "S1":
            ref, share, what = get(s, "curl", "mb_s") or 0, 0.85, "85% of curl's single PUT"
        else:
            ref, share, what = max(get(s, "curl", "mb_s") or 0, get(s, "curl-parallel", "mb_s") or 0), 1.0, "the better of curl and curl-parallel"
        if ref:
            lines.append(f"| {s} MB/s ≥ {what} ({ref:.0f}) | {ferry:.0f} ({ferry / ref * 100:.0f}%) | "
                         f"{'met' if ferry >= share * ref else 'missed'} |")
        rss = get(s, "ferry", "rss_mib")
        lines.append(f"| {s} peak RSS ≤ 64 MiB + 8 × 8 MiB = 128 MiB | {rss:.0f} MiB | {'met' if rss <= 128 else 'missed'} |")
    for s in ("S3", "S4"):
        ferry = get(s, "ferry", "objects_s")
        if ferry is None:
            continue
        peers = {t: v["objects_s"] for (sc, t), v in med.items() if sc == s and t not in OWN and t not in REFERENCES}
        if not peers:
            continue
        best_tool, best = max(peers.items(), key=lambda kv: kv[1])
        # The server's pace for a client that writes nothing: what any client can reach here at most.
        ceiling = get(s, "curl-discard", "objects_s")
        pace = f"; curl writing nothing: {ceiling:.0f} = {ceiling / best:.2f}×" if ceiling else ""
        lines.append(f"| {s} objects/s ≥ 1.2 × best peer ({best_tool} {best:.0f}{pace}) | {ferry:.0f} ({ferry / best:.2f}×) | "
                     f"{'met' if ferry >= 1.2 * best else 'missed'} |")
        # Parts in flight: S3 32 files of 64 KiB, S4 8 objects of 16 MiB (one GET each).
        bound, what = {"S3": (66, "32 × 64 KiB = 66 MiB"), "S4": (192, "8 × 16 MiB = 192 MiB")}[s]
        rss = get(s, "ferry", "rss_mib")
        if rss is not None:
            lines.append(f"| {s} peak RSS ≤ 64 MiB + {what} | {rss:.0f} MiB | {'met' if rss <= bound else 'missed'} |")
    for s in ("S1", "S2", "S3", "S4"):
        # curl moves bytes without parts, retries or checks: a reference, not a competitor.
        cpu = {t: v["cpu_per_gib"] for (sc, t), v in med.items() if sc == s and t not in REFERENCES and t != "ferry-baseline"}
        if "ferry" not in cpu:
            continue
        lowest_tool = min(cpu, key=cpu.get)
        lines.append(f"| {s} CPU-s/GiB lowest of all tools (curl reference aside) | {cpu['ferry']:.2f} (lowest: {lowest_tool} {cpu[lowest_tool]:.2f}) | "
                     f"{'met' if lowest_tool == 'ferry' else 'missed'} |")
    if s5 and get("S3", "ferry", "objects_s"):
        s3 = get("S3", "ferry", "objects_s")
        lines.append(f"| S5 requests/s ≥ 50% of Ferry's S3 objects/s ({s3:.0f}) | {s5['saturation_rps']:.0f} "
                     f"({s5['saturation_rps'] / s3 * 100:.0f}%) | {'met' if s5['saturation_rps'] >= 0.5 * s3 else 'missed'} |")
    if s5:
        lines.append(f"| S5 p99 enqueue → trigger ≤ 250 ms at half load | {s5['p99_ms']:.0f} ms | {'met' if s5['p99_ms'] <= 250 else 'missed'} |")
    for s6, on in ((s6, ""), (s6_tansu, " on Tansu")):
        if not s6:
            continue
        ratio = s6["last_10pct_rps"] / s6["first_10pct_rps"]
        lines.append(f"| S6{on} throughput flat within 15% (last 10% / first 10%) | {s6['last_10pct_rps']:.0f} / {s6['first_10pct_rps']:.0f} "
                     f"requests/s ({ratio:.2f}) | {'met' if ratio >= 0.85 else 'missed'} |")
        grow = s6["rss_at_end_mib"] / s6["rss_at_10pct_mib"]
        lines.append(f"| S6{on} RSS after all requests within 20% of RSS after 10% | {s6['rss_at_end_mib']:.0f} vs {s6['rss_at_10pct_mib']:.0f} MiB "
                     f"({grow:.2f}) | {'met' if grow <= 1.2 else 'missed'} |")
    for s7, on in ((s7, ""), (s7_tansu, " on Tansu")):
        if not (s7 and s7["runs"]):
            continue
        one = s7["runs"][0]["rps"]
        for r in s7["runs"][1:]:
            scale = r["rps"] / (one * r["workers"])
            lines.append(f"| S7{on} {r['workers']} workers ≥ 0.8 × linear | {r['rps']:.1f} requests/s = {scale:.2f} × "
                         f"{r['workers']} × {one:.1f} | {'met' if scale >= 0.8 else 'missed'} |")
    return lines


# Where S6 and S7 ran, as their sections and targets say it.
BROKERS = {
    "embedded": "the embedded broker (`ferry dev --kafka-only`: librdkafka's mock cluster)",
    "tansu": "Tansu, a Kafka-compatible broker of its own (`Benchmarks/tansu.py`: in memory, on loopback; "
             "the worker and kcat on the newer librdkafka that Tansu needs)",
}


def s6_section(s6, label):
    broker = BROKERS[s6.get("broker", "embedded")]
    lines = [f"## {label}: a backlog", "",
            f"{s6['requests']:,} upload requests of 4 KiB queued on {broker}, 8 partitions, "
            "before one `ferry worker` (release build, 32 transfers at once, local object store) starts; "
            "finished transfers and the worker's RSS sampled every second from its `/metrics` and `/proc`.", "",
            "| measure | value |", "|---|---|",
            f"| time to drain | {s6['drain_s']:.0f} s ({s6['requests'] / s6['drain_s']:.0f} requests/s) |",
            f"| first 10% / last 10% | {s6['first_10pct_rps']:.0f} / {s6['last_10pct_rps']:.0f} requests/s |",
            f"| RSS after 10% / at the end / peak / 10 s idle | {s6['rss_at_10pct_mib']:.0f} / {s6['rss_at_end_mib']:.0f} / "
            f"{s6['rss_max_mib']:.0f} / {s6.get('rss_idle_mib', 0):.0f} MiB |",
            *([f"| heap in use (`ferry_process_heap_in_use_bytes`) after 10% / at the end / 10 s idle | "
               f"{s6['heap_at_10pct_mib']:.1f} / {s6['heap_at_end_mib']:.1f} / {s6.get('heap_idle_mib', 0):.1f} MiB |"]
              if "heap_at_10pct_mib" in s6 else []),
            *([f"| CPU per request, first 10% / last 10%: the worker; the broker | "
               f"{s6['worker_cpu_ms_first_10pct']:.2f} / {s6['worker_cpu_ms_last_10pct']:.2f} ms; "
               f"{s6['broker_cpu_ms_first_10pct']:.2f} / {s6['broker_cpu_ms_last_10pct']:.2f} ms |"]
              if "worker_cpu_ms_first_10pct" in s6 else []),
            f"| the worker's threads (most seen) | {s6.get('threads_max', 0)} |"]
    if "trigger_lag_at_drain" in s6:
        caught = s6.get("triggers_caught_up_s")
        lines += [f"| trigger invocations/s, first 10% / last 10% (the same worker runs the triggers) | "
                  f"{s6['trigger_invocations_per_s_first_10pct']:.0f} / {s6['trigger_invocations_per_s_last_10pct']:.0f} |",
                  f"| trigger groups' records not yet read when the last transfer finished | {s6['trigger_lag_at_drain']:,} |",
                  f"| the triggers caught up (lag 0) | " + (f"{caught:.0f} s after the last transfer |" if caught is not None
                                                           else "not within 600 s of the last transfer |")]
    return lines + [""]


def s7_section(s7, label):
    broker = BROKERS[s7.get("broker", "embedded")]
    out = [f"## {label}: horizontal scaling", "",
           f"{s7['requests']:,} upload requests of 4 KiB per fleet size, on {broker}, 8 partitions, "
           f"workers with `--max-transfers {s7['max_transfers']}` against the same RGW behind a loopback proxy that "
           f"delays every request by {s7['latency_ms']:.0f} ms (`Benchmarks/latency_proxy.py`), so the work waits on "
           "the network, not the CPU. Each fleet size starts its workers together (as a deployment scaled "
           "to n does), waits until every one has finished warm-up work and the workers together hold all "
           "8 partitions, each some (`ferry_consumer_assigned_partitions`: the group has settled), then gets "
           "the burst. Join: from the workers' start until then. First done: from the burst's first request "
           "to the fleet's first finished one. Longest pause: the longest time no worker finished anything "
           "after that. Rebalances: those the workers took part in during the burst "
           "(`ferry_consumer_rebalances_total`).", "",
           "| workers | requests/s | × one worker | join | first done | longest pause | rebalances | per worker | workers' CPU ms per request |",
           "|---|---|---|---|---|---|---|---|---|"]
    one = s7["runs"][0]["rps"]
    for r in s7["runs"]:
        cpu = f"{r['worker_cpu_ms_per_request']:.1f}" if "worker_cpu_ms_per_request" in r else "–"
        first = f"{r['first_done_s']:.2f} s" if r.get("first_done_s") is not None else "–"
        out.append(f"| {r['workers']} | {r['rps']:.1f} | {r['rps'] / one:.2f} | {r.get('settled_s', 0):.1f} s | {first} | "
                   f"{r['longest_gap_s']:.2f} s | {r.get('rebalances_during_burst', '–')} | "
                   f"{' / '.join(str(x) for x in r['per_worker'])} | {cpu} |")
    out.append("")
    join = s7.get("scale_out")
    if join:
        first = join["joiners_first_work_s"]
        started = f"{first:.0f} s after they started" if first is not None else "never"
        out += [f"Scale-out under load: two workers busy with {join['requests']:,} requests, two more started "
                f"{join['joined_at_s']:.0f} s in. The fleet's longest pause (nobody finished anything): "
                f"{join['longest_pause_s']:.2f} s. Requests/s before the join {join['rps_before_join']:.1f}, "
                f"while the new workers waited for partitions {join['rps_while_joining']:.1f}; the new "
                f"workers' first work: {started} (per worker: {' / '.join(str(x) for x in join['per_worker'])}).", ""]
    return out


def plot(med, path):
    if not med:
        return False
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


def current_versions(root, ferry=None):
    """The tools, server and machine as they are now: run.py stores these with
    its results (naming the ferry binary it ran), so a report written later
    still names the run's."""
    return {
        "ferry": version([ferry or os.path.join(root, ".build", "release", "ferry"), "--version"]) + " (release build)",
        "s5cmd": version(["s5cmd", "version"]),
        "rclone": version(["rclone", "version"]),
        "boto3 / botocore / awscrt": version([sys.executable, "-c",
                                               "import boto3, botocore, awscrt; print(boto3.__version__, botocore.__version__, awscrt.__version__)"]),
        "aws CLI": version(["aws", "--version"]),
        "curl": version(["curl", "--version"]),
        "server": version(["radosgw", "--version"]) + " (Ceph RGW, BlueStore on a file, loopback)",
        "machine": version(["sh", "-c", "echo $(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB, $(uname -r)"]),
    }


def write(root):
    with open(os.path.join(root, "Benchmarks", "results.json")) as f:
        data = json.load(f)
    med = medians(data["results"])
    s5 = data.get("s5")
    s6, s7 = data.get("s6"), data.get("s7")
    args = data["args"]
    # The versions of the run that wrote results.json (run.py stores them);
    # read from this machine only for results written before it did.
    versions = dict(data.get("versions") or current_versions(root))
    png = os.path.join(root, "Benchmarks", "benchmarks.png")
    plotted = plot(med, png)
    out = ["# Benchmarks", "",
           "Written by `Benchmarks/run.sh`; every figure is a median of "
           "the rounds of its run (which run each scenario's figures come from is listed at the end), the tools run in "
           "alternation within each round (each round starting one tool later, each run once the server is idle), against one Ceph RADOS Gateway on loopback, on the same machine: only "
           "figures of one scenario, from one run, compare. MB/s are 10^6 bytes per second of wall time; CPU is the "
           "user+sys time of the client's whole process tree (GNU time) per GiB moved, and server CPU the same for the "
           "gateway's processes (radosgw, ceph-osd, ceph-mon) meanwhile: client and server share the machine's two "
           "cores, so a client that makes the server work less also goes faster; RSS is the client's peak.", ""]
    if plotted:
        out += ["![benchmarks](Benchmarks/benchmarks.png)", ""]
    for s, title in SCENARIOS.items():
        rows = sorted(((t, v) for (sc, t), v in med.items() if sc == s), key=lambda kv: -kv[1]["mb_s"])
        if not rows:
            continue
        out += [f"## {s}: {title}", "",
                "| tool | MB/s | objects/s | CPU-s/GiB | server CPU-s/GiB | peak RSS MiB | wall s |", "|---|---|---|---|---|---|---|"]
        for t, v in rows:
            name = f"**{t}**" if t == "ferry" else (f"{t} (reference)" if t in REFERENCES else t)
            server = "–" if v["server_cpu_per_gib"] is None else f"{v['server_cpu_per_gib']:.2f}"
            out.append(f"| {name} | {v['mb_s']:.0f} | {v['objects_s']:.1f} | {v['cpu_per_gib']:.2f} | {server} | "
                       f"{v['rss_mib']:.0f} | {v['wall']:.2f} |")
        out.append("")
    if s5:
        out += ["## S5: the full pipeline", "",
                f"{s5['requests']} upload requests of 64 KiB through Kafka (librdkafka's mock cluster, `ferry dev --kafka-only`), "
                "one `ferry worker` (release build, 32 transfers at once) to the same RGW, the audit trigger on each "
                "ObjectCreated event; latency is from the request's send to the trigger's run.", "",
                "| measure | value |", "|---|---|",
                f"| saturation (all requests at once) | {s5['saturation_rps']:.1f} requests/s |",
                *([f"| the worker's CPU per request in that burst | {s5['worker_cpu_ms_per_request']:.2f} ms |"]
                  if "worker_cpu_ms_per_request" in s5 else []),
                *([f"| the server's CPU per request in that burst (RGW, OSD, monitor: one PUT each, with If-None-Match) | {s5['server_cpu_ms_per_request']:.2f} ms |"]
                  if "server_cpu_ms_per_request" in s5 else []),
                f"| offered rate (fixed, below saturation) | {s5['offered_rps']:.1f} requests/s |",
                f"| achieved at that rate | {s5['achieved_rps']:.1f} requests/s |",
                f"| enqueue → trigger latency p50 / p99 / max | {s5['p50_ms']:.0f} / {s5['p99_ms']:.0f} / {s5['max_ms']:.0f} ms |",
                *[f"| span {label} p50 / p99 / max | {st['p50_ms']:.0f} / {st['p99_ms']:.0f} / {st['max_ms']:.0f} ms |"
                  for name, label in (("enqueue_to_accepted", "enqueue → `accepted` (fetched, journaled)"),
                                      ("accepted_to_completed", "`accepted` → `completed` (the PUT, the outcome recorded)"),
                                      ("completed_to_trigger", "`completed` → trigger (outbox, event, trigger's consumer)"))
                  for st in [s5.get("stages", {}).get(name)] if st], ""]
    for key, label in (("s6", "S6"), ("s6_tansu", "S6 on Tansu")):
        if data.get(key):
            out += s6_section(data[key], label)
    for key, label in (("s7", "S7"), ("s7_tansu", "S7 on Tansu")):
        if data.get(key) and data[key]["runs"]:
            out += s7_section(data[key], label)
    failures = data.get("failures") or {}
    if failures:
        out += ["## Runs that could not be made", "", "| scenario and tool | reason (as the tool said it) |", "|---|---|"]
        out += [f"| {k} | {v.replace('|', '/')} |" for k, v in sorted(failures.items())] + [""]
    out += ["## Targets", "", "| target | Ferry | verdict |", "|---|---|---|"] + targets(med, s5, s6, s7, data.get("s6_tansu"), data.get("s7_tansu")) + [""]
    # The investigation notes stay in their own file: this page is the method and the latest figures,
    # so of the notes it shows the newest round only (the figures that round compared).
    notes = os.path.join(root, "Benchmarks", "NOTES.md")
    if os.path.exists(notes):
        rounds = open(notes).read().split("\n## Round of ")
        if len(rounds) > 1:
            out += [("## Latest round of notes: " + rounds[1]).strip(), ""]
    out += ["## Notes and method", "",
            "- How to run a scenario, what each one measures, and what limits each missed target: "
            "[docs/internals/performance.md](docs/internals/performance.md).",
            "- Dated investigation notes, newest first (what was measured, changed and kept or dropped, with the "
            "commands): [Benchmarks/NOTES.md](Benchmarks/NOTES.md).", ""]
    tansu = next((data[k]["broker_version"] for k in ("s6_tansu", "s7_tansu") if data.get(k) and "broker_version" in data[k]), None)
    if tansu:
        versions["Kafka-compatible broker (S6, S7 on Tansu)"] = tansu
    out += ["## Versions and settings", ""] + [f"- {k}: {v}" for k, v in versions.items()] + [
        f"- last run: `Benchmarks/run.sh --rounds {args['rounds']} --scenarios {','.join(args['scenarios'])}` "
        f"({args['big_gib']} GiB, {args['small_count']} small files, {args['medium_count']} medium objects)",
        *([f"- figures from: " + "; ".join(f"{s}: {src}" for s, src in data["sources"].items())] if data.get("sources") else []),
        *([f"- runs: {data['note']}"] if data.get("note") else []),
        "- Ferry as it runs by default: a CRC-32C on every PUT and part (on the CPU's instruction) and Content-MD5 on "
        "single PUTs, which this RGW (Ceph 16) does not store but checks the MD5 of; the peers without their additional "
        "checksums (`AWS_REQUEST_CHECKSUM_CALCULATION=when_required`, rclone `--s3-disable-checksum`), as they ran before",
        "- boto3 with `max_pool_connections` ≥ 2 × its concurrency; the aws CLI with `max_concurrent_requests` and "
        "8 MB chunks; s5cmd `-p 8 -c 8` / `--numworkers`; rclone `--s3-chunk-size 8M --s3-upload-concurrency 8`, "
        "`--multi-thread-streams 8`, `--transfers`; curl through presigned URLs (single stream, and `--parallel "
        "--parallel-max 8` over the same 8 MiB parts; for S4 one GET per object, 8 at once, into a file each "
        "(curl-parallel) or into /dev/null (curl-discard: no file written, the server's pace for that load))",
        "- sources and destinations on the same filesystem, page cache warmed before the first round",
        "- the exact commands are in `Benchmarks/run.py` (`s1_tools` … `s4_tools`, `s5`)", ""]
    with open(os.path.join(root, "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    write(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
