//! The `[machine]` and `[sysctl]` sections: the modelled host
//! ([`MachineConfig`]) and the `vm.dirty_*` sysctls ([`VmDirtyParams`],
//! written through the model's handlers). Not kernel code.
//!
//! Sysctl names, defaults and ranges are the model's (`mm/page-writeback.c`
//! in [`crate::model::mm::page_writeback`]): the defaults are
//! [`VmDirtyParams::default`], and writing `dirty_bytes` zeroes `dirty_ratio`
//! (and the reverse) inside the handlers. In one table, setting both members
//! of a pair non-zero is an error (the kernel's answer would depend on write
//! order; see [`super::keys::apply_entries`]). `hz` is one of Kconfig's
//! `HZ_100`..`HZ_1000`.

pub use crate::model::init::{MachineConfig, PROCESS_START_DEFAULT_NS};
pub use crate::model::mm::page_writeback::VmDirtyParams;
pub use crate::model::mm::vmstat::PAGE_SIZE;

use super::keys::{key_table, Bool, Duration, Int, OneOf, Percent, Size};
use super::value::KeyError;
use crate::model::mm::page_writeback::DirtyParamError;

/// Largest CPU count accepted (the usual distribution `CONFIG_NR_CPUS`).
pub const CPUS_MAX: u64 = 8192;

/// Smallest memory accepted: 16 MiB (a sanity bound).
pub const MEMORY_MIN: u64 = 16 << 20;

/// Largest `cpu_cost_percent` accepted: 100 times the stated costs.
pub const CPU_COST_PERCENT_MAX: u64 = 10_000;

/// Allowed values of `hz` (Kconfig `HZ_100`, `HZ_250`, `HZ_300`, `HZ_1000`).
pub const HZ_CHOICES: &[u64] = &[100, 250, 300, 1000];

/// A handler's refusal as a scenario error.
fn refused(e: DirtyParamError) -> KeyError {
    KeyError::range(e.to_string())
}

/// The machine `[machine]` starts from: [`MachineConfig::new`]'s defaults;
/// `cpus` and `memory` are required.
pub(crate) fn machine_defaults() -> MachineConfig {
    MachineConfig::new(0, 0)
}

key_table! {
    /// `[machine]`.
    pub(crate) MACHINE: MachineConfig = "[machine]", required ["cpus", "memory"] {
        cpus: Int(1, CPUS_MAX) => |m, n| m.cpus = n as usize,
            "Online CPUs.";
        memory: Size(MEMORY_MIN) => |m, b| m.set_memory(b),
            "RAM (the reserved share follows).";
        preempt_rt: Bool => |m, b| m.preempt_rt = b,
            "CONFIG_PREEMPT_RT (RCU flavour).";
        rcu_normal_after_boot: Bool => |m, b| m.rcu_normal_after_boot = b,
            "rcupdate.rcu_normal_after_boot=1: expedited grace periods become normal.";
        hz: OneOf(HZ_CHOICES) => |m, n| m.hz = n,
            "CONFIG_HZ, ticks per second.";
        rcu_lazy: Bool => |m, b| m.rcu_lazy = b,
            "CONFIG_RCU_LAZY on offloaded CPUs: call_rcu waits up to 10 s for a grace period (default true).";
        rcu_normal_wake_from_gp: Bool => |m, b| m.rcu_normal_wake_from_gp = Some(b),
            "rcutree.rcu_normal_wake_from_gp: synchronize_rcu woken by the GP cleanup, not by a callback (default: on up to 16 CPUs, as since 6.17).";
        preempt_rcu: Bool => |m, b| m.preempt_rcu = Some(b),
            "CONFIG_PREEMPT_RCU: a busy CPU's tick outside a read-side section is a quiescent state (default true, as in PREEMPT_DYNAMIC and PREEMPT_RT kernels; false: a PREEMPT_NONE or PREEMPT_VOLUNTARY build).";
        rcu_nocbs: Bool => |m, b| m.rcu_nocbs = b,
            "rcu_nocbs= covering all CPUs: callbacks offloaded to rcuog/rcuoc kthreads (default false).";
        process_start: Duration => |m, ns| m.process_start_ns = ns,
            "CPU and wall time to start a command (fork+exec).";
        wakeup_latency: Duration => |m, ns| m.wakeup_latency_ns = ns,
            "Wakeup latency of an idle CPU (0: a woken kernel worker runs at once).";
        btrfs_btree_kernel_file: Bool => |m, b| m.btrfs_btree_kernel_file = b,
            "btrfs tree blocks charged to no user memcg (AS_KERNEL_FILE, 6.18+; default true). false: charged to the reading task's memcg and reclaimable with it, as before 6.18.";
        tick_cost: Duration => |m, ns| m.tick_cost_ns = ns,
            "CPU time the scheduler tick of a busy CPU takes from the task it interrupts, every jiffy (0: none).";
        cpu_cost_percent: Int(1, CPU_COST_PERCENT_MAX) => |m, n| m.cpu_cost_percent = n,
            "CPU time of every modelled step, percent of its stated (native) cost: above 100 for a machine that runs kernel code slower, e.g. a QEMU TCG guest or a KASAN/lockdep kernel (default 100; a sensitivity knob, no built-in scenario sets it).";
    }
}

key_table! {
    /// `[sysctl]`: writes to `/proc/sys/vm/KEY`, through the model's handlers.
    pub(crate) SYSCTL: VmDirtyParams = "[sysctl]", required [] {
        dirty_ratio: Percent => |s, n| s.set_dirty_ratio(n).map_err(refused)?,
            "vm.dirty_ratio, percent of dirtyable memory (zeroes dirty_bytes).";
        dirty_background_ratio: Percent => |s, n| s.set_dirty_background_ratio(n).map_err(refused)?,
            "vm.dirty_background_ratio, percent (zeroes dirty_background_bytes).";
        dirty_bytes: Size(0) => |s, b| s.set_dirty_bytes(b).map_err(refused)?,
            "vm.dirty_bytes (0 = use the ratio; zeroes dirty_ratio).";
        dirty_background_bytes: Size(0) => |s, b| s.set_dirty_background_bytes(b).map_err(refused)?,
            "vm.dirty_background_bytes (0 = use the ratio; zeroes dirty_background_ratio).";
        dirty_expire_centisecs: Int(0, i32::MAX as u64) => |s, n| s.dirty_expire_centisecs = n,
            "vm.dirty_expire_centisecs.";
        dirty_writeback_centisecs: Int(0, i32::MAX as u64) => |s, n| s.dirty_writeback_centisecs = n,
            "vm.dirty_writeback_centisecs (0 disables periodic writeback).";
        min_free_kbytes: Int(0, i32::MAX as u64) => |s, n| s.set_min_free_kbytes(n).map_err(refused)?,
            "vm.min_free_kbytes, KiB (sets the min watermark; default sqrt(16 * lowmem KiB)).";
        watermark_scale_factor: Int(1, 3000) => |s, n| s.set_watermark_scale_factor(n).map_err(refused)?,
            "vm.watermark_scale_factor, 1/10000 of memory between the min, low and high watermarks.";
    }
}
