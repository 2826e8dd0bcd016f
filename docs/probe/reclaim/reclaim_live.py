#!/usr/bin/env python3
"""Live probe for issue #16: memcg reclaim CPU per page with N concurrent readers.

btrfs on a loop device (direct I/O) backed by an image under a fresh /tmp
directory; N dd readers (bs=128k, one 512 MiB file each, caches dropped
before every run) in one cgroup-v1 memcg, limited to 256 MiB or unlimited.
Per run: the readers' system time (wait4 rusage and the cpuacct cgroup's
usage_sys), memcg pgpgin/pgpgout deltas, /proc/vmstat pgsteal/pgscan file
deltas, wall time, load average before the run. Everything it creates
(image, loop device, mount, cgroups) is removed on every exit path.

usage: reclaim_live.py OUT.json [--reps 3] [--ns 1,2,4,8] [--perf] [--perf-lock]

--perf: one more limited run at the largest N under `perf record -a -g`
(cpu-clock); --perf-lock: the same under the lock:contention_begin/end
tracepoints (with call chains), for `perf lock contention -i`.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

FILE_MIB = 512
LIMIT = 256 << 20
CG = "wbsim-reclaim-probe"
MEMCG = f"/sys/fs/cgroup/memory/{CG}"
CPUCG = f"/sys/fs/cgroup/cpuacct/{CG}"


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, **kw).stdout


def wr(path, val):
    with open(path, "w") as f:
        f.write(str(val))


def rd(path):
    with open(path) as f:
        return f.read()


def memstat():
    d = {}
    for line in rd(f"{MEMCG}/memory.stat").splitlines():
        k, v = line.split()
        d[k] = int(v)
    return d


def vmstat():
    d = {}
    for line in rd("/proc/vmstat").splitlines():
        k, v = line.split()
        d[k] = int(v)
    return d


def loadavg():
    return [float(x) for x in rd("/proc/loadavg").split()[:3]]


class Rig:
    def __init__(self):
        self.wd = None
        self.loop = None
        self.mnt = None
        self.mounted = False
        self.cgs = []

    def setup(self, nfiles):
        self.wd = tempfile.mkdtemp(prefix="reclaim-live.", dir="/tmp")
        img = os.path.join(self.wd, "btrfs.img")
        size = (nfiles * FILE_MIB + 1536) << 20
        with open(img, "wb") as f:
            f.truncate(size)
        self.loop = sh("losetup", "--direct-io=on", "--show", "-f", img).strip()
        sh("mkfs.btrfs", "-q", "-f", self.loop)
        self.mnt = os.path.join(self.wd, "mnt")
        os.mkdir(self.mnt)
        sh("mount", "-t", "btrfs", self.loop, self.mnt)
        self.mounted = True
        for i in range(nfiles):
            # Not zeros only, so no layer can short-cut them.
            sh("dd", "if=/dev/urandom", f"of={self.mnt}/f{i}", "bs=1M", f"count={FILE_MIB}")
        sh("sync")
        for d in (MEMCG, CPUCG):
            os.mkdir(d)
            self.cgs.append(d)

    def cleanup(self):
        # cgroups first (no task of ours is left in them once the dds are reaped)
        for d in reversed(self.cgs):
            try:
                if d == MEMCG:
                    try:
                        wr(f"{MEMCG}/memory.force_empty", 0)
                    except OSError:
                        pass
                os.rmdir(d)
            except OSError as e:
                print(f"cleanup: rmdir {d}: {e}", file=sys.stderr)
        self.cgs = []
        if self.mounted:
            subprocess.run(["umount", self.mnt])
            self.mounted = False
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop])
            self.loop = None
        if self.wd:
            subprocess.run(["rm", "-rf", self.wd])
            self.wd = None


def join_cgroups():
    pid = str(os.getpid())
    wr(f"{MEMCG}/tasks", pid)
    wr(f"{CPUCG}/tasks", pid)


def run_once(rig, n, limited):
    wr(f"{MEMCG}/memory.limit_in_bytes", LIMIT if limited else -1)
    sh("sync")
    wr("/proc/sys/vm/drop_caches", 3)
    time.sleep(1)
    load = loadavg()
    running = [int(l.split()[1]) for l in rd("/proc/stat").splitlines() if l.startswith("procs_running")][0]
    m0, v0 = memstat(), vmstat()
    c0 = int(rd(f"{CPUCG}/cpuacct.usage_sys"))
    cu0 = int(rd(f"{CPUCG}/cpuacct.usage_user"))
    t0 = time.monotonic()
    procs = []
    for i in range(n):
        p = subprocess.Popen(
            ["dd", f"if={rig.mnt}/f{i}", "of=/dev/null", "bs=128k"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=join_cgroups,
        )
        procs.append(p.pid)
    stime = utime = 0.0
    statuses = []
    for pid in procs:
        _, status, ru = os.wait4(pid, 0)
        stime += ru.ru_stime
        utime += ru.ru_utime
        statuses.append(status)
    wall = time.monotonic() - t0
    m1, v1 = memstat(), vmstat()
    c1 = int(rd(f"{CPUCG}/cpuacct.usage_sys"))
    cu1 = int(rd(f"{CPUCG}/cpuacct.usage_user"))
    r = {
        "n": n,
        "limited": limited,
        "load_before": load,
        "procs_running_before": running,
        "wall_s": wall,
        "stime_s": stime,
        "utime_s": utime,
        "cpuacct_sys_s": (c1 - c0) / 1e9,
        "cpuacct_user_s": (cu1 - cu0) / 1e9,
        "memcg_pgpgin": m1["pgpgin"] - m0["pgpgin"],
        "memcg_pgpgout": m1["pgpgout"] - m0["pgpgout"],
        "memcg_failcnt": int(rd(f"{MEMCG}/memory.failcnt")),
        "pages_read_expected": n * FILE_MIB * 256,
        "dd_status": statuses,
    }
    for k in ("pgsteal_file", "pgscan_file", "pgsteal_kswapd", "pgsteal_direct", "pgscan_kswapd", "pgscan_direct"):
        r[k] = v1[k] - v0[k]
    return r


def main():
    out = sys.argv[1]
    reps, ns, perf = 3, [1, 2, 4, 8], False
    pevents = []
    a = sys.argv[2:]
    while a:
        x = a.pop(0)
        if x == "--reps":
            reps = int(a.pop(0))
        elif x == "--ns":
            ns = [int(v) for v in a.pop(0).split(",")]
        elif x == "--perf":
            perf = True
        elif x == "--perf-lock":
            perf = True
            pevents = ["-e", "lock:contention_begin", "-e", "lock:contention_end"]
    rig = Rig()

    def on_sig(signum, frame):
        raise SystemExit(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_sig)
    signal.signal(signal.SIGHUP, on_sig)
    results = {"kernel": os.uname().release, "cpus": os.cpu_count(), "runs": []}
    try:
        rig.setup(max(ns))
        results["loop"] = rig.loop
        results["wd"] = rig.wd
        for rep in range(reps):
            for n in ns:
                for limited in (False, True):
                    r = run_once(rig, n, limited)
                    r["rep"] = rep
                    results["runs"].append(r)
                    print(json.dumps(r), flush=True)
                    with open(out, "w") as f:
                        json.dump(results, f, indent=1)
        if perf:
            n = max(ns)
            wr(f"{MEMCG}/memory.limit_in_bytes", LIMIT)
            sh("sync")
            wr("/proc/sys/vm/drop_caches", 3)
            pdata = out + ".perf.data"
            pp = subprocess.Popen(["perf", "record", "-a", "-g", *pevents, "-o", pdata],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
            r = run_once(rig, n, True)
            pp.send_signal(signal.SIGINT)
            pp.wait()
            r["perf"] = pdata
            results["perf_run"] = r
            print(json.dumps(r), flush=True)
            with open(out, "w") as f:
                json.dump(results, f, indent=1)
    finally:
        rig.cleanup()


if __name__ == "__main__":
    main()
