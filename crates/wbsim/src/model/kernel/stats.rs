//! Run statistics the model keeps whether or not a trace is written: counts of
//! model tracepoints (named as the kernel's, e.g. `xfs_unwritten_convert`, the
//! way `perf stat -e 'xfs:*'` counts them) and invariant violations noticed by
//! model code. Not kernel state: the experiment layer reads it through
//! [`crate::model::machine::Machine`]'s observation methods.

use std::cell::RefCell;
use std::collections::BTreeMap;

/// Tracepoint counts and invariant violations of one run.
#[derive(Default)]
pub struct RunStats {
    events: RefCell<BTreeMap<&'static str, u64>>,
    violations: RefCell<Vec<String>>,
}

impl RunStats {
    /// Counts one `name` tracepoint hit.
    pub fn count_event(&self, name: &'static str) {
        *self.events.borrow_mut().entry(name).or_insert(0) += 1;
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
