#!/usr/bin/env bash
# Scale benchmark: peak RSS (GNU time's "Maximum resident set size") and
# wall time of `wbsim run` for one fio job section with numjobs = N (1 MiB
# file each, 1 s of simulated time) on one ext4 filesystem, and of a
# scenario with M mounted tmpfs filesystems.
#   scripts/bench-scale.sh [WBSIM] [N...]     default N: 1000 10000 100000
#   GR=group_reporting scripts/bench-scale.sh ...   with group_reporting
#   PER_JOB=1 scripts/bench-scale.sh ...       wbsim run --per-job (one
#                                              statistics entry per clone)
#   MOUNTS=10000 scripts/bench-scale.sh ...    also M tmpfs filesystems
# By default the job has no group_reporting, so beyond 128 clones wbsim
# aggregates them per job (results' job_reporting says so).
# Prints one line per size: numjobs, max RSS (KiB), wall (s), exit status,
# and the refusal when a run would not fit --max-memory.
set -uo pipefail
cd "$(dirname "$0")/.."
WBSIM=${1:-target/release/wbsim}
shift || true
SIZES=${*:-1000 10000 100000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in $SIZES; do
  cat > "$tmp/jobs-$n.toml" <<TOML
[scenario]
name = "scale-$n"
duration = "1s"

[machine]
cpus = 2
memory = "16g"

[[device]]
name = "d"
profile = "qemu-nvme"

[[filesystem]]
name = "x"
type = "ext4"
device = "d"

[[job]]
filesystem = "x"
fio = """
[w]
rw=write
bs=1m
size=1m
numjobs=$n
${GR-}
"""
TOML
  /usr/bin/time -f "%M %e" -o "$tmp/time" "$WBSIM" run ${PER_JOB:+--per-job} "$tmp/jobs-$n.toml" --out "$tmp/out-$n.json" >/dev/null 2>"$tmp/err"
  rc=$?
  read -r rss wall < "$tmp/time" || true
  echo "numjobs=$n max_rss_kib=${rss:-?} wall_s=${wall:-?} exit=$rc $(grep -m1 -o 'refus.*' "$tmp/err" || true)"
done
if [ -n "${MOUNTS:-}" ]; then
  {
    printf '[scenario]\nname = "mounts"\nduration = "1s"\n\n[machine]\ncpus = 2\nmemory = "16g"\n\n'
    for i in $(seq 1 "$MOUNTS"); do
      printf '[[filesystem]]\nname = "t%d"\ntype = "tmpfs"\n\n' "$i"
    done
  } > "$tmp/mounts.toml"
  /usr/bin/time -f "%M %e" -o "$tmp/time" "$WBSIM" run "$tmp/mounts.toml" --out "$tmp/mounts.json" >/dev/null 2>"$tmp/err"
  rc=$?
  read -r rss wall < "$tmp/time" || true
  echo "mounts=$MOUNTS max_rss_kib=${rss:-?} wall_s=${wall:-?} exit=$rc $(head -c 300 "$tmp/err")"
fi
