//! Run statistics the model keeps whether or not a trace is written: counts of
//! model tracepoints (named as the kernel's, e.g. `xfs_unwritten_convert`, the
//! way `perf stat -e 'xfs:*'` counts them) and invariant violations noticed by
//! model code. Not kernel state: the experiment layer reads it through
//! [`crate::model::machine::Machine`]'s observation methods.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The model objects an invariant violation involves, by the ids the model
/// gives them (each absent when it does not apply).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViolationObjects {
    /// Superblock id (`SuperBlock::id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superblock: Option<u64>,
    /// Superblock name (its mount point, as in `VFS: Busy inodes after
    /// unmount of NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superblock_name: Option<String>,
    /// Filesystem type (`xfs`, `ext4`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_type: Option<String>,
    /// Inode numbers involved (at most [`MAX_INODES`]; the message gives
    /// the full count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inodes: Vec<u64>,
    /// bdi_writeback id (`Wb::id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wb: Option<u64>,
    /// Memory cgroup id of that wb (0: the bdi's root wb).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcg: Option<u64>,
    /// Mount point of a mount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount: Option<String>,
    /// A counter's name (`NR_FILE_DIRTY`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<String>,
}

/// Inode numbers kept per violation record.
pub const MAX_INODES: usize = 16;

/// One invariant violation: which invariant, when, what it involved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Violation {
    /// The invariant's name: `busy_inodes_after_umount`,
    /// `isw_after_teardown`, `no_negative_counter`, `dirty_data_lost_at_umount`,
    /// `mnt_count_underflow`, `persisted_after_sync`, `page_conservation`,
    /// `out_of_memory`.
    pub invariant: String,
    /// Simulated time it was noticed, ns.
    pub time_ns: u64,
    /// The objects involved.
    pub objects: ViolationObjects,
    /// What happened, in words (the kernel's message where it has one).
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "t={} ns: [{}] {}",
            self.time_ns, self.invariant, self.message
        )
    }
}
/// An inode as the run statistics key it: (superblock id, inode number).
pub type InodeKey = (u64, u64);

/// Tracepoint counts and invariant violations of one run.
#[derive(Default)]
pub struct RunStats {
    /// Hits per tracepoint, machine-wide.
    events: RefCell<BTreeMap<&'static str, u64>>,
    /// Hits of the tracepoints that name an inode, per inode (a subset of
    /// `events`), so counts can be attributed to the files a job uses.
    inode_events: RefCell<BTreeMap<(InodeKey, &'static str), u64>>,
    /// Invariant violations noticed so far.
    violations: RefCell<Vec<Violation>>,
}

impl RunStats {
    /// Counts one `name` tracepoint hit.
    pub fn count_event(&self, name: &'static str) {
        *self.events.borrow_mut().entry(name).or_insert(0) += 1;
    }

    /// Counts one hit of a tracepoint about inode `key` (machine-wide and
    /// for that inode).
    pub fn count_inode_event(&self, name: &'static str, key: InodeKey) {
        self.count_event(name);
        *self
            .inode_events
            .borrow_mut()
            .entry((key, name))
            .or_insert(0) += 1;
    }

    /// The counts so far of the tracepoints about inode `key`, by name.
    pub fn inode_events(&self, key: InodeKey) -> BTreeMap<&'static str, u64> {
        self.inode_events
            .borrow()
            .range((key, "")..)
            .take_while(|((k, _), _)| *k == key)
            .map(|((_, n), c)| (*n, *c))
            .collect()
    }

    /// The counts so far, by tracepoint name.
    pub fn events(&self) -> BTreeMap<&'static str, u64> {
        self.events.borrow().clone()
    }

    /// Copies the counts into `out` (reusing its allocation).
    pub fn events_into(&self, out: &mut BTreeMap<&'static str, u64>) {
        out.clone_from(&self.events.borrow());
    }

    /// Records an invariant violation.
    pub fn violation(&self, v: Violation) {
        self.violations.borrow_mut().push(v);
    }

    /// The violations so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.violations.borrow().clone()
    }
}
