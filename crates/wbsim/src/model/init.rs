//! What a machine boots with (the role of the kernel command line and
//! `init/main.c`'s `start_kernel` parameters): CPUs, memory, HZ, the RCU
//! flavour, the `vm.dirty_*` sysctls in force at boot, CPU costs of the data
//! paths, the policies of the studied changes. The scenario layer parses
//! straight into these types (its `[machine]` table sets [`MachineConfig`]'s
//! fields, `[sysctl]` goes through [`VmDirtyParams`]' handlers, variants set
//! [`Policies`]); they are the only configuration types.
//!
//! The serialized form of [`MachineConfig`] is the `model.machine` object of
//! the results document: the scenario's `[machine]` keys only (`dirty` and
//! `policies` are written beside it as `model.sysctl` and `model.policies`).

use serde::{Deserialize, Serialize};
use sim::{Time, USEC};

use crate::model::kernel::rcu::RcuParams;
use crate::model::mm::page_writeback::VmDirtyParams;
use crate::model::policy::Policies;

/// serde's `skip_serializing_if` for parameters written only when set.
fn is_zero(v: &Time) -> bool {
    *v == 0
}

/// Cost of starting a short command such as umount(8): fork, exec, dynamic
/// linking, libmount setup, exit. 1 ms: the order of `perf stat -r 100
/// /bin/true`-style measurements of a small dynamically linked binary on a
/// current x86-64 host (0.5-1 ms); an estimate, not taken from docs/experiments.md.
/// Override with `machine.process_start`.
pub const PROCESS_START_DEFAULT_NS: u64 = 1_000_000;

/// CPU costs of the data paths, ns per 4 KiB page unless said otherwise.
/// Order-of-magnitude values from profiles of buffered I/O on current x86
/// servers unless a field says it was measured; the live probe calibrates
/// them for this project's machines.
///
/// "The 2026-11-28 read measurement" below: measured on the project host
/// (Linux 6.18, 2 vCPU), 2026-11-28, btrfs on a loop device
/// (`--direct-io=on`), a 2 GiB file of random data read with `dd bs=128k`
/// after `drop_caches`, 3 runs per case by the lead and 3 more here (reader
/// system time: cached 0.20-0.22 s, uncached 0.49-0.57 s, uncached in a v1
/// memcg limited to 256 MiB 0.87-0.96 s; 524,288 pages read, about 458,752
/// of them reclaimed in the limited case), and one `perf record -a -g` of
/// the uncached case for the split between the reader's own work, the
/// filesystem's and the completion workers'.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuCosts {
    /// Reclaiming one clean page (`shrink_folio_list` and the isolation and
    /// freeing around it, memcg reclaim as the charge path runs it), ns:
    /// 0.8 us. The 2026-11-28 read measurement: reader system time limited
    /// minus uncached unlimited, 0.37-0.40 s for about 458,752 pages
    /// reclaimed (0.8-0.87 us; 0.7-0.8 us per page read). Machine-wide:
    /// every scenario that reclaims pays it (it was a 0.2 us estimate).
    pub reclaim_page_ns: Time,
    /// Bringing one page into the page cache on a read, on the reader's
    /// side, besides its LRU add (mm/swap.rs charges that) and the
    /// filesystem's own per-folio read work (`FsCosts::readpage_ns`):
    /// `filemap_alloc_folio`, `mem_cgroup_charge`, `__filemap_add_folio`
    /// (the xarray insert) and the readahead bookkeeping of
    /// `page_cache_ra_unbounded`, ns: 0.41 us. The 2026-11-28 read
    /// measurement: reader system time uncached minus cached, 0.32 s for
    /// 524,288 pages (0.61 us per page), of which perf puts 19 % in
    /// btrfs's `->readahead` (`btrfs_readahead`: 0.12 us, the btrfs
    /// `readpage_ns`) and 14 % in the LRU add (0.08 us, as the model's
    /// estimate charges it): 0.61 - 0.12 - 0.08 = 0.41 us.
    pub filemap_add_page_ns: Time,
    /// Copying one page to user space on a cached read, ns: ~0.5 us
    /// (8 GB/s memcpy).
    pub read_copy_page_ns: Time,
    /// Fixed cost of one read/write system call (entry, fdget, iov setup), ns:
    /// ~1 us.
    pub syscall_ns: Time,
    /// Handling one bio completion in interrupt/softirq context, charged to
    /// nobody (not modelled as CPU), documented for reference: ~2 us.
    pub bio_complete_ns: Time,
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts {
            reclaim_page_ns: 800,
            filemap_add_page_ns: 410,
            read_copy_page_ns: 500,
            syscall_ns: USEC,
            bio_complete_ns: 2 * USEC,
        }
    }
}

/// What a machine is built from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// Online CPUs.
    pub cpus: usize,
    /// RAM, bytes. Set it with [`MachineConfig::set_memory`], which keeps
    /// `reserved_bytes` in step.
    pub memory_bytes: u64,
    /// `CONFIG_PREEMPT_RT`: chooses the RCU flavour ([`MachineConfig::rcu_params`]).
    pub preempt_rt: bool,
    /// `rcupdate.rcu_normal_after_boot=1`: expedited grace periods become normal.
    pub rcu_normal_after_boot: bool,
    /// `CONFIG_HZ`, ticks per second.
    pub hz: u64,
    /// CONFIG_RCU_LAZY with offloaded callbacks: `call_rcu()` waits up to
    /// 10 s for a grace period someone else starts (`[machine] rcu_lazy`).
    #[serde(default = "default_true")]
    pub rcu_lazy: bool,
    /// `rcutree.rcu_normal_wake_from_gp` (see
    /// [`RcuParams::rcu_normal_wake_from_gp`]); None: the kernel default
    /// (on for at most 16 CPUs, as since 6.17) (`[machine]
    /// rcu_normal_wake_from_gp`).
    #[serde(default)]
    pub rcu_normal_wake_from_gp: Option<bool>,
    /// CONFIG_PREEMPT_RCU (see [`RcuParams::preempt_rcu`]); None: on, as in
    /// PREEMPT_DYNAMIC and PREEMPT_RT kernels; false: a PREEMPT_NONE or
    /// PREEMPT_VOLUNTARY build (x86_64_defconfig) (`[machine] preempt_rcu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt_rcu: Option<bool>,
    /// Every CPU's RCU callbacks offloaded to rcuog/rcuoc kthreads
    /// (`rcu_nocbs=all`; see [`RcuParams::nocb`]) (`[machine] rcu_nocbs`).
    #[serde(default)]
    pub rcu_nocbs: bool,
    /// CPU time to start a command (fork + exec + dynamic linking of a small
    /// utility such as umount(8)), ns (`[machine] process_start`).
    pub process_start_ns: Time,
    /// Wakeup latency of an idle CPU ([`SchedParams::wakeup_latency_ns`]), ns
    /// (0: a woken kernel worker runs at once).
    #[serde(default)]
    pub wakeup_latency_ns: Time,
    /// btrfs sets `AS_KERNEL_FILE` on its btree inode (6.18+): tree blocks
    /// are charged to no user memcg. False: they are charged to the memcg of
    /// the task that reads them and its reclaim may free them, as before
    /// 6.18 (`[machine] btrfs_btree_kernel_file`).
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub btrfs_btree_kernel_file: bool,
    /// CPU time the tick of a busy CPU takes from the task it interrupts
    /// (`SchedParams::tick_cost_ns` in
    /// [`crate::model::kernel::sched::SchedParams`]), ns (0: ticks cost
    /// nothing; not written to results then).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tick_cost_ns: Time,
    /// CPU time of every modelled step in percent of its stated cost
    /// (`SchedParams::cpu_cost_percent` in
    /// [`crate::model::kernel::sched::SchedParams`]; `[machine]
    /// cpu_cost_percent`): 100, the default, is not written to results.
    #[serde(
        default = "cpu_cost_percent_native",
        skip_serializing_if = "is_cpu_cost_native"
    )]
    pub cpu_cost_percent: u64,
    /// RAM never available to the page cache (kernel, workload's anonymous
    /// memory), bytes. Derived from `memory_bytes`; not part of the results.
    #[serde(skip)]
    pub reserved_bytes: u64,
    /// The `vm.dirty_*` sysctls in force at boot (written to results as
    /// `model.sysctl`).
    #[serde(skip)]
    pub dirty: VmDirtyParams,
    /// CPU costs of the data paths.
    #[serde(skip)]
    pub costs: CpuCosts,
    /// The policies of the studied changes (written to results as
    /// `model.policies`).
    #[serde(skip)]
    pub policies: Policies,
}

impl MachineConfig {
    /// A machine with defaults: non-RT, HZ=1000, kernel sysctl defaults,
    /// pre-change policies, and [`default_reserved_bytes`] reserved.
    pub fn new(cpus: usize, memory_bytes: u64) -> Self {
        MachineConfig {
            cpus,
            memory_bytes,
            preempt_rt: false,
            rcu_normal_after_boot: false,
            hz: 1000,
            rcu_lazy: true,
            rcu_normal_wake_from_gp: None,
            preempt_rcu: None,
            rcu_nocbs: false,
            process_start_ns: PROCESS_START_DEFAULT_NS,
            wakeup_latency_ns: 0,
            btrfs_btree_kernel_file: true,
            tick_cost_ns: 0,
            cpu_cost_percent: 100,
            reserved_bytes: default_reserved_bytes(memory_bytes),
            dirty: VmDirtyParams::default(),
            costs: CpuCosts::default(),
            policies: Policies::default(),
        }
    }

    /// Sets the RAM size and the reserved share that follows from it.
    pub fn set_memory(&mut self, memory_bytes: u64) {
        self.memory_bytes = memory_bytes;
        self.reserved_bytes = default_reserved_bytes(memory_bytes);
    }

    /// The RCU flavour of `preempt_rt` with `rcu_normal_after_boot`.
    pub fn rcu_params(&self) -> RcuParams {
        let mut rcu = RcuParams::for_machine(self.cpus, self.hz, self.preempt_rt);
        rcu.rcu_normal_after_boot = self.rcu_normal_after_boot;
        if !self.rcu_lazy {
            rcu.lazy_flush_ns = None;
        }
        if let Some(w) = self.rcu_normal_wake_from_gp {
            rcu.rcu_normal_wake_from_gp = w;
        }
        if let Some(p) = self.preempt_rcu {
            rcu.preempt_rcu = p;
        }
        rcu.nocb = self.rcu_nocbs;
        rcu
    }
}

/// Serde: the stated costs as they are (100 percent).
fn cpu_cost_percent_native() -> u64 {
    100
}

/// Serde: leave the native cost scale out of the results (they stay as they
/// were before the key existed).
fn is_cpu_cost_native(p: &u64) -> bool {
    *p == 100
}

/// Serde: leave a default-true flag out of the results (they stay as they
/// were before the flag existed).
fn is_true(b: &bool) -> bool {
    *b
}

fn default_true() -> bool {
    true
}

/// RAM reserved for the kernel and applications: 5% of RAM, at least 256 MiB,
/// at most half.
pub fn default_reserved_bytes(memory_bytes: u64) -> u64 {
    (memory_bytes / 20).max(256 << 20).min(memory_bytes / 2)
}
