//! The `[machine]` and `[sysctl]` sections: the modelled host and the
//! `vm.dirty_*` sysctls.
//!
//! Sysctl names, defaults and ranges follow `mm/page-writeback.c`
//! (`vm_dirty_ratio = 20`, `dirty_background_ratio = 10`,
//! `dirty_expire_interval = 30 * 100`, `dirty_writeback_interval = 5 * 100`,
//! `dirty_bytes_min = 2 * PAGE_SIZE`) and its handlers: writing `dirty_bytes`
//! zeroes `dirty_ratio` and the reverse (`dirty_bytes_handler()`,
//! `dirty_ratio_handler()`), likewise for the background pair. In one table,
//! setting both members of a pair non-zero is an error (the kernel's answer
//! would depend on write order). `hz` is one of Kconfig's `HZ_100`..`HZ_1000`.

use serde::{Deserialize, Serialize};

use super::value::{as_bool, as_duration, as_int, as_size, as_u32, KeyError};

pub use crate::model::mm::vmstat::PAGE_SIZE;

pub use crate::model::init::PROCESS_START_DEFAULT_NS;

/// Largest CPU count accepted (the usual distribution `CONFIG_NR_CPUS`).
pub const CPUS_MAX: u32 = 8192;

/// Smallest memory accepted: 16 MiB (a sanity bound).
pub const MEMORY_MIN: u64 = 16 << 20;

/// Allowed values of `hz` (Kconfig `HZ_100`, `HZ_250`, `HZ_300`, `HZ_1000`).
pub const HZ_CHOICES: &[u32] = &[100, 250, 300, 1000];

/// The modelled host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// Online CPUs.
    pub cpus: u32,
    /// RAM in bytes.
    pub memory_bytes: u64,
    /// `CONFIG_PREEMPT_RT`.
    pub preempt_rt: bool,
    /// `rcupdate.rcu_normal_after_boot=1`: expedited grace periods become normal.
    pub rcu_normal_after_boot: bool,
    /// `CONFIG_HZ`, ticks per second.
    pub hz: u32,
    /// CPU and wall time to start a command (fork+exec), ns.
    pub process_start_ns: u64,
    /// Wakeup latency of an idle CPU, ns (0: a woken kernel worker runs at
    /// once).
    #[serde(default)]
    pub wakeup_latency_ns: u64,
}

impl MachineConfig {
    /// Keys of `[machine]`.
    pub const KEYS: &'static [&'static str] = &[
        "cpus",
        "memory",
        "preempt_rt",
        "rcu_normal_after_boot",
        "hz",
        "process_start",
        "wakeup_latency",
    ];
    /// Keys that have no default.
    pub const REQUIRED: &'static [&'static str] = &["cpus", "memory"];

    /// The defaults for every key but `cpus` and `memory` (set to 0 here:
    /// they are required).
    pub(crate) fn unset() -> MachineConfig {
        MachineConfig {
            cpus: 0,
            memory_bytes: 0,
            preempt_rt: false,
            rcu_normal_after_boot: false,
            hz: 1000,
            process_start_ns: PROCESS_START_DEFAULT_NS,
            wakeup_latency_ns: 0,
        }
    }

    /// Sets one key.
    pub(crate) fn set(&mut self, key: &str, v: &toml::Value) -> Result<(), KeyError> {
        match key {
            "cpus" => self.cpus = as_u32(v, 1, CPUS_MAX)?,
            "memory" => {
                let b = as_size(v)?;
                if b < MEMORY_MIN {
                    return Err(KeyError::range(format!(
                        "{b} bytes is below the minimum of 16m"
                    )));
                }
                self.memory_bytes = b;
            }
            "preempt_rt" => self.preempt_rt = as_bool(v)?,
            "rcu_normal_after_boot" => self.rcu_normal_after_boot = as_bool(v)?,
            "hz" => {
                let hz = as_u32(v, 1, 1000)?;
                if !HZ_CHOICES.contains(&hz) {
                    return Err(KeyError::range(format!(
                        "{hz} is not a Kconfig HZ choice (expected one of: 100, 250, 300, 1000)"
                    )));
                }
                self.hz = hz;
            }
            "process_start" => self.process_start_ns = as_duration(v)?,
            "wakeup_latency" => self.wakeup_latency_ns = as_duration(v)?,
            _ => return Err(KeyError::Unknown(Self::KEYS)),
        }
        Ok(())
    }
}

/// The `vm.dirty_*` sysctls in force.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sysctl {
    /// `vm.dirty_ratio`, percent of dirtyable memory (0 when `dirty_bytes` is set).
    pub dirty_ratio: u32,
    /// `vm.dirty_background_ratio`, percent.
    pub dirty_background_ratio: u32,
    /// `vm.dirty_bytes` (0 = use the ratio).
    pub dirty_bytes: u64,
    /// `vm.dirty_background_bytes` (0 = use the ratio).
    pub dirty_background_bytes: u64,
    /// `vm.dirty_expire_centisecs`.
    pub dirty_expire_centisecs: u32,
    /// `vm.dirty_writeback_centisecs` (0 disables periodic writeback).
    pub dirty_writeback_centisecs: u32,
}

impl Default for Sysctl {
    /// The kernel's defaults (`mm/page-writeback.c`).
    fn default() -> Sysctl {
        Sysctl {
            dirty_ratio: 20,
            dirty_background_ratio: 10,
            dirty_bytes: 0,
            dirty_background_bytes: 0,
            dirty_expire_centisecs: 3000,
            dirty_writeback_centisecs: 500,
        }
    }
}

impl Sysctl {
    /// Keys of `[sysctl]`.
    pub const KEYS: &'static [&'static str] = &[
        "dirty_ratio",
        "dirty_background_ratio",
        "dirty_bytes",
        "dirty_background_bytes",
        "dirty_expire_centisecs",
        "dirty_writeback_centisecs",
    ];

    /// Sets one key as a write to `/proc/sys/vm/KEY` would, including the
    /// ratio/bytes exclusion.
    pub(crate) fn set(&mut self, key: &str, v: &toml::Value) -> Result<(), KeyError> {
        match key {
            "dirty_ratio" => {
                self.dirty_ratio = as_u32(v, 0, 100)?;
                self.dirty_bytes = 0;
            }
            "dirty_background_ratio" => {
                self.dirty_background_ratio = as_u32(v, 0, 100)?;
                self.dirty_background_bytes = 0;
            }
            "dirty_bytes" => {
                let b = as_size(v)?;
                if b != 0 && b < 2 * PAGE_SIZE {
                    return Err(KeyError::range(format!(
                        "{b} is below the kernel's minimum of 2 pages (8192 bytes)"
                    )));
                }
                self.dirty_bytes = b;
                if b != 0 {
                    self.dirty_ratio = 0;
                }
            }
            "dirty_background_bytes" => {
                let b = as_size(v)?;
                self.dirty_background_bytes = b;
                if b != 0 {
                    self.dirty_background_ratio = 0;
                }
            }
            "dirty_expire_centisecs" => {
                self.dirty_expire_centisecs = as_u32(v, 0, i32::MAX as u32)?
            }
            "dirty_writeback_centisecs" => {
                self.dirty_writeback_centisecs = as_u32(v, 0, i32::MAX as u32)?
            }
            _ => return Err(KeyError::Unknown(Self::KEYS)),
        }
        Ok(())
    }

    /// The key that excludes `key` (`dirty_ratio` <-> `dirty_bytes`...).
    pub(crate) fn excludes(key: &str) -> Option<&'static str> {
        match key {
            "dirty_ratio" => Some("dirty_bytes"),
            "dirty_bytes" => Some("dirty_ratio"),
            "dirty_background_ratio" => Some("dirty_background_bytes"),
            "dirty_background_bytes" => Some("dirty_background_ratio"),
            _ => None,
        }
    }

    /// Whether a value is "non-zero" (so the exclusion applies).
    pub(crate) fn is_nonzero(v: &toml::Value) -> bool {
        as_int(v, 1, u64::MAX).is_ok()
            || v.as_str()
                .is_some_and(|s| super::units::parse_size(s).is_ok_and(|b| b != 0))
    }
}
