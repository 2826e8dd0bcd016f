//! Run statistics the model keeps whether or not a trace is written: counts of
//! model tracepoints (named as the kernel's, e.g. `xfs_unwritten_convert`, the
//! way `perf stat -e 'xfs:*'` counts them) and invariant violations noticed by
//! model code. Not kernel state: the experiment layer reads it through
//! [`crate::model::machine::Machine`]'s observation methods.

use std::cell::RefCell;
use std::collections::BTreeMap;

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
    violations: RefCell<Vec<String>>,
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
    pub fn violation(&self, what: String) {
        self.violations.borrow_mut().push(what);
    }

    /// The violations so far.
    pub fn violations(&self) -> Vec<String> {
        self.violations.borrow().clone()
    }
}
