//! What a machine boots with (the role of the kernel command line and
//! `init/main.c`'s `start_kernel` parameters): CPUs, memory, HZ, the RCU
//! flavour, the `vm.dirty_*` sysctls in force at boot, CPU costs of the data
//! paths, the policies of the studied changes. The scenario layer fills these
//! types; they are the model's only configuration types.

use sim::{Time, USEC};

use crate::model::kernel::rcu::RcuParams;
use crate::model::mm::page_writeback::VmDirtyParams;
use crate::model::policy::Policies;

/// Cost of starting a short command such as umount(8): fork, exec, dynamic
/// linking, libmount setup, exit. 1 ms: the order of `perf stat -r 100
/// /bin/true`-style measurements of a small dynamically linked binary on a
/// current x86-64 host (0.5-1 ms); an estimate, not taken from docs/experiments.md.
/// Override with `machine.process_start`.
pub const PROCESS_START_DEFAULT_NS: u64 = 1_000_000;

/// CPU costs of the data paths, ns per 4 KiB page unless said otherwise.
/// Order-of-magnitude values from profiles of buffered I/O on current x86
/// servers; the live probe calibrates them for this project's machines.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuCosts {
    /// Reclaiming one clean page (shrink_folio_list share), ns: ~0.2 us.
    pub reclaim_page_ns: Time,
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
            reclaim_page_ns: 200,
            read_copy_page_ns: 500,
            syscall_ns: USEC,
            bio_complete_ns: 2 * USEC,
        }
    }
}

/// What a machine is built from.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    pub cpus: usize,
    /// RAM, bytes.
    pub memory_bytes: u64,
    /// RAM never available to the page cache (kernel, workload's anonymous
    /// memory), bytes.
    pub reserved_bytes: u64,
    pub hz: u64,
    pub rcu: RcuParams,
    pub dirty: VmDirtyParams,
    pub costs: CpuCosts,
    pub policies: Policies,
    /// CPU time to start a command (fork + exec + dynamic linking of a small
    /// utility such as umount(8)), ns. A machine parameter: scenarios set it
    /// (`[machine] process_start`); the default is the scenario layer's.
    pub process_start_ns: Time,
    /// Wakeup latency of an idle CPU ([`SchedParams::wakeup_latency_ns`]), ns.
    pub wakeup_latency_ns: Time,
}

impl MachineConfig {
    /// A machine with defaults: non-RT, HZ=1000, kernel sysctl defaults, and 5%
    /// of RAM (at least 256 MiB) reserved for the kernel and applications.
    pub fn new(cpus: usize, memory_bytes: u64) -> Self {
        MachineConfig {
            cpus,
            memory_bytes,
            reserved_bytes: (memory_bytes / 20).max(256 << 20).min(memory_bytes / 2),
            hz: 1000,
            rcu: RcuParams::for_kernel(false),
            dirty: VmDirtyParams::default(),
            costs: CpuCosts::default(),
            policies: Policies::default(),
            process_start_ns: PROCESS_START_DEFAULT_NS,
            wakeup_latency_ns: 0,
        }
    }
}
