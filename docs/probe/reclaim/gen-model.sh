#!/bin/sh
# Generates the model counterparts of reclaim_live.py: N readers of their own
# preloaded 512 MiB btrfs file (loop-virtio device) in one cgroup, limited
# (memory_max 256m, as v1 limit_in_bytes) or not.
dir=${1:-.}; mkdir -p "$dir"
for n in ${NS:-1 2 4 8}; do
  for lim in lim unl; do
    if [ $lim = lim ]; then mm='memory_max = "256m"'; else mm=''; fi
    cat > "$dir/reclaim-n$n-$lim.toml" <<EOT
# issue #16 probe: $n dd reader(s), bs=128k, own 512 MiB file each, cold cache,
# one memcg ($lim), 2 CPUs, HZ 250, btrfs on a loop-virtio device.
[scenario]
name = "reclaim-n$n-$lim"
description = "memcg reclaim CPU per page with $n concurrent readers ($lim)"
duration = "120s"
quick_duration = "120s"
repeat = 1
quick_repeat = 1
seed = 1

[machine]
cpus = 2
memory = "24105m"
hz = 250

[[device]]
name = "loop0"
profile = "loop-virtio"

[[filesystem]]
name = "x"
type = "btrfs"
device = "loop0"
mountpoint = "/mnt/x"
mounted = true
options = { subvolumes = $n, preload_files = 1, preload_size = "512m" }

[[cgroup]]
name = "probe"
$mm

[[actor]]
name = "reader"
cgroup = "probe"
instances = $n
repeat = 1
steps = [
  { op = "read", file = "/mnt/x/subvol{instance}/file0", size = "512m", bs = "128k", record = "dd" },
]

[measure]
sample_interval = "100ms"
EOT
  done
done
