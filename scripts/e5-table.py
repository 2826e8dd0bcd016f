#!/usr/bin/env python3
"""Prints the E5 per-test table (MB/s, completion latency, peak dirty) from
`wbsim reproduce --only E5` results: scripts/e5-table.py DIR/results.

One row per fio job (per writer where the job has no group reporting), both
variants side by side. MB/s is 10^6 bytes/s as the posting gives them; lat,
slat and clat are fio's (io_uring: fio stamps a write's issue time after
io_uring_enter returns, so a write done inline in io_uring_enter is all
slat and its clat is about 0 by fio's own definition; lat is the whole
write, the headline); peak dirty is
the machine's dirty + writeback peak while the job ran, MiB.
"""
import json
import sys
from pathlib import Path

VARIANTS = ("inline", "kick")


def load(results_dir):
    out = {}
    for v in VARIANTS:
        files = sorted(Path(results_dir).glob(f"dontcache__{v}__seed*.json"))
        if not files:
            sys.exit(f"{results_dir}: no dontcache__{v}__seed*.json")
        out[v] = json.loads(files[0].read_text())["metrics"]
    return out


def jobs(metrics):
    names = set()
    for k in metrics:
        if k.startswith("fio.") and k.endswith(".write_bw"):
            names.add(k[len("fio."):-len(".write_bw")])
    return sorted(names)


def fmt(x):
    return f"{x:.3g}" if x < 1000 else f"{x:.0f}"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: e5-table.py RESULTS_DIR")
    m = load(sys.argv[1])
    print("| test | MB/s inline / kick | lat p50 / p99 / p99.9 us inline | kick "
          "| slat p50 / p99 / p99.9 us inline | kick "
          "| clat p50 / p99 / p99.9 us inline | kick | peak dirty MiB inline / kick |")
    print("|---|---|---|---|---|---|---|---|---|")
    for j in jobs(m["inline"]):
        row = [j]
        bw = [m[v][f"fio.{j}.write_bw"]["value"] * 1048576 / 1e6 for v in VARIANTS]
        row.append(" / ".join(f"{b:.0f}" for b in bw))
        for key in ("lat", "slat", "clat"):
            for v in VARIANTS:
                h = m[v][f"fio.{j}.{key}"]
                row.append(" / ".join(fmt(h[p]) for p in ("p50", "p99", "p99.9")))
        row.append(" / ".join(fmt(m[v][f"fio.{j}.peak_dirty"]["value"]) for v in VARIANTS))
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
