//! Scripted user-space processes (`[[actor]]`): what each step does, as the
//! scenario describes it and [`super::actor_exec`] runs it. The steps name
//! the syscalls they drive: `mount(2)`, `umount2(2)` with or without
//! `MNT_DETACH`, `sync(2)`, `syncfs(2)`, `fsync(2)`, cgroupfs `mkdir`/`rmdir`,
//! a write to `cgroup.procs`, `write(2)`/`read(2)` loops like dd, `execve(2)`,
//! and a device reuse. Parsing and validation live in the scenario layer.

use serde::{Deserialize, Serialize};

/// How many times an actor runs its steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Repeat {
    /// This many times (at least 1).
    Count(u64),
    /// Until the run ends.
    Forever,
}

/// One step of an actor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// What it does.
    pub op: StepOp,
    /// Record the step's elapsed time (ns) under this metric name.
    pub record: Option<String>,
    /// Run as a separate command: pay `machine.process_start` first, inside
    /// the recorded time.
    pub exec: bool,
    /// End the whole run when this step finishes at or after this time, ns.
    pub end_run_after_ns: Option<u64>,
    /// Line of the step in the scenario file.
    pub line: u32,
}

/// The operation of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepOp {
    /// `mount(2)` of a filesystem at its mountpoint.
    Mount { filesystem: String },
    /// `umount2(2)`; `lazy` = `MNT_DETACH` (umount -l).
    Umount { filesystem: String, lazy: bool },
    /// `sync(2)`.
    Sync,
    /// `syncfs(2)` on a filesystem.
    Syncfs { filesystem: String },
    /// `fsync(2)` of a file.
    Fsync { file: String },
    /// Sleep, ns.
    Sleep { ns: u64 },
    /// `mkdir` a cgroup under the root, with optional limits.
    CgroupMkdir {
        name: String,
        memory_high: Option<u64>,
        memory_max: Option<u64>,
        cpus: Option<Vec<u32>>,
    },
    /// `rmdir` a cgroup.
    CgroupRmdir { name: String },
    /// Move this actor into a cgroup (write to `cgroup.procs`).
    CgroupEnter { name: String },
    /// Write `size` bytes to `file` in `bs` chunks (dd), then `fsync` if
    /// set, then close it; `trunc`: opened with O_TRUNC (dd without
    /// `conv=notrunc`), the file truncated to zero first.
    Write {
        file: String,
        size: u64,
        bs: u64,
        fsync: bool,
        trunc: bool,
    },
    /// Read `size` bytes of `file` in `bs` chunks.
    Read { file: String, size: u64, bs: u64 },
    /// Start a process (fork + exec); `cost` overrides `machine.process_start`.
    Exec { cost_ns: Option<u64> },
    /// Reuse a filesystem's device right away (mount again / detach its
    /// loop device); records `EBUSY` if the old superblock still holds it.
    ReuseDevice { filesystem: String },
    /// Create `count` files of `size` bytes in `dir`.
    CreateFiles { dir: String, count: u64, size: u64 },
}

/// An `[[actor]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorConfig {
    /// Unique name.
    pub name: String,
    /// Cgroup it starts in (None = root).
    pub cgroup: Option<String>,
    /// Start time, ns.
    pub start_ns: u64,
    /// How many times the steps run.
    pub repeat: Repeat,
    /// Identical copies running concurrently (default 1); `{instance}` in a
    /// path or cgroup name becomes 0..instances.
    pub instances: u32,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Line of the `[[actor]]` header.
    pub line: u32,
}
