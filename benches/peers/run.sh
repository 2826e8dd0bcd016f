#!/usr/bin/env bash
# PHOLD on wbsim, NeXosim and SimPy side by side (the model is described in
# crates/sim/benches/phold.rs; the peers implement the same one).
#
# Builds everything in release, runs each engine for N = 1000, 10000, 100000,
# prints a table and writes target/peers.json (repo-root target/):
#   {"1000": {"wbsim": x, "nexosim": best, "simpy": best, ...}, "10000": ..., "100000": ...}
# wbsim is the callback formulation; nexosim the faster of 1 thread and NeXosim's
# default (all CPUs); simpy the faster of raw callbacks and processes. Extra keys
# keep each variant: wbsim_async, nexosim_1t, nexosim_<n>t, nexosim_threads,
# simpy_callback, simpy_process.
# All rates are events per wall-clock second; each number is the best of
# PEERS_REPEAT runs (default 3), since a shared machine only ever slows a run.
#
# Needs: cargo (rustup) and python3 with pip; installs SimPy into a venv under
# target/ (or with pip --user if venv is unavailable) and fetches the nexosim
# crate through cargo.
#
# Environment (all optional):
#   PEERS_EVENTS        events per wbsim run                 (default 5000000)
#   PEERS_NX_EVENTS     events per NeXosim 1-thread run      (default 2000000)
#   PEERS_NX_MT_EVENTS  events per NeXosim multi-thread run  (default 300000)
#   PEERS_SIMPY_EVENTS  events per SimPy run                 (default 500000)
#   PEERS_REPEAT        runs per measurement, best kept      (default 3)
#   PEERS_N             LP counts, comma-separated           (default 1000,10000,100000)
#   PEERS_QUICK=1       a smoke run: 10x fewer events, 1 repeat
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
TARGET="$ROOT/target"
mkdir -p "$TARGET"

EVENTS="${PEERS_EVENTS:-5000000}"
NX_EVENTS="${PEERS_NX_EVENTS:-2000000}"
NX_MT_EVENTS="${PEERS_NX_MT_EVENTS:-300000}"
SIMPY_EVENTS="${PEERS_SIMPY_EVENTS:-500000}"
REPEAT="${PEERS_REPEAT:-3}"
NS="${PEERS_N:-1000,10000,100000}"
if [[ "${PEERS_QUICK:-0}" != "0" ]]; then
    EVENTS=$((EVENTS / 10)); NX_EVENTS=$((NX_EVENTS / 10))
    NX_MT_EVENTS=$((NX_MT_EVENTS / 10)); SIMPY_EVENTS=$((SIMPY_EVENTS / 10))
    REPEAT=1
fi

log() { echo "[peers] $*" >&2; }

# ------------------------------------------------------------------ tools
command -v cargo >/dev/null || { echo "cargo not found (install rustup)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 1; }

# ------------------------------------------------------------------ SimPy
VENV="$TARGET/peers-venv"
PY=""
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import simpy" 2>/dev/null; then
    PY="$VENV/bin/python"
elif python3 -c "import simpy" 2>/dev/null; then
    PY="python3"
else
    if [[ ! -x "$VENV/bin/python" ]] && ! python3 -m venv "$VENV" >/dev/null 2>&1; then
        rm -rf "$VENV"
    fi
    if [[ -x "$VENV/bin/python" ]]; then
        log "installing simpy into $VENV"
        "$VENV/bin/python" -m pip install --quiet simpy
        PY="$VENV/bin/python"
    else
        log "python3 -m venv unavailable; installing simpy with pip --user"
        python3 -m pip install --quiet --user simpy \
            || python3 -m pip install --quiet --user --break-system-packages simpy
        PY="python3"
    fi
fi
"$PY" -c "import simpy" || { echo "could not install simpy" >&2; exit 1; }

# ------------------------------------------------------------------ builds
log "building wbsim example (release)"
cargo build --quiet --release -p wbsim-sim --example phold
WBSIM="$TARGET/release/examples/phold"

log "building NeXosim PHOLD (release)"
cargo build --quiet --release \
    --manifest-path "$ROOT/benches/peers/nexosim/Cargo.toml" \
    --target-dir "$TARGET/peers-nexosim"
NEXOSIM="$TARGET/peers-nexosim/release/phold-nexosim"

# ------------------------------------------------------------------ runs
RAW="$TARGET/peers-raw.jsonl"
: >"$RAW"
run() { # label, command...: runs it PEERS_REPEAT times, appends tagged JSON lines
    local label="$1"; shift
    local i line
    for ((i = 0; i < REPEAT; i++)); do
        line="$("$@")"
        echo "{\"label\":\"$label\",\"run\":$line}" >>"$RAW"
        log "$label: $line"
    done
}

IFS=',' read -r -a NLIST <<<"$NS"
for n in "${NLIST[@]}"; do
    run wbsim "$WBSIM" "$n" "$EVENTS"
    run wbsim_async "$WBSIM" "$n" "$EVENTS" --async
    run nexosim_1 "$NEXOSIM" "$n" "$NX_EVENTS" 1
    run nexosim_default "$NEXOSIM" "$n" "$NX_MT_EVENTS" 0
    run simpy "$PY" "$ROOT/benches/peers/simpy/phold.py" "$n" "$SIMPY_EVENTS"
    run simpy_process "$PY" "$ROOT/benches/peers/simpy/phold.py" "$n" "$SIMPY_EVENTS" --process
done

# ------------------------------------------------------------------ report
python3 - "$RAW" "$TARGET/peers.json" <<'EOF'
import json, sys
raw, out = sys.argv[1], sys.argv[2]
best = {}  # (N, label) -> best run
for line in open(raw):
    rec = json.loads(line)
    r, key = rec["run"], (str(rec["run"]["N"]), rec["label"])
    if key not in best or r["events_per_s"] > best[key]["events_per_s"]:
        best[key] = r
result = {}
for (n, label), r in best.items():
    d = result.setdefault(n, {})
    if label.startswith("nexosim"):
        if "nexosim" not in d or r["events_per_s"] > d["nexosim"]:
            d["nexosim"] = r["events_per_s"]
            d["nexosim_threads"] = r["threads"]
        d[f"nexosim_{r['threads']}t"] = r["events_per_s"]
    else:
        d[label] = r["events_per_s"]
# "simpy" is the faster SimPy formulation (raw callbacks or processes), as
# "nexosim" is the faster NeXosim configuration: each peer at its best.
for d in result.values():
    if "simpy_process" in d:
        d["simpy_callback"] = d.get("simpy", 0.0)
        d["simpy"] = max(d["simpy_callback"], d["simpy_process"])
result = dict(sorted(result.items(), key=lambda kv: int(kv[0])))
json.dump(result, open(out, "w"), indent=2)

def m(x):
    return f"{x / 1e6:8.2f}M"
print()
print("PHOLD, events per wall second (best of runs; mean 1 us, lookahead 0.1 us)")
hdr = (f"{'N':>7} {'wbsim':>9} {'wbsim_async':>11} {'nexosim(thr)':>13} "
       f"{'simpy':>9} {'simpy_proc':>10} {'wb/nexo':>8} {'wb/simpy':>8}")
print(hdr)
print("-" * len(hdr))
for n, d in result.items():
    nx = f"{m(d['nexosim'])}({d['nexosim_threads']})"
    print(f"{n:>7} {m(d['wbsim']):>9} {m(d['wbsim_async']):>11} {nx:>13} "
          f"{m(d['simpy_callback']):>9} {m(d['simpy_process']):>10} "
          f"{d['wbsim'] / d['nexosim']:7.1f}x {d['wbsim'] / d['simpy']:7.1f}x")
print()
print(f"written: {out} (raw runs: {raw})")
EOF
