//! Lock statistics per lock class: lockdep's lock_stat.
//!
//! Models kernel/locking/lockdep.c with CONFIG_LOCK_STAT (`lock_contended()`,
//! `lock_acquired()`, `lock_release()` feeding `struct lock_class_stats`) and its
//! report `/proc/lock_stat` (kernel/locking/lockdep_proc.c): per lock class
//! (every lock initialised at one place shares a class, e.g. every btrfs tree
//! node's rwsem), acquisitions, contentions, wait time and hold time, with read
//! and write acquisitions of rw locks counted apart (the kernel's `-R` rows).
//!
//! Differences from the kernel:
//! - Classes are keyed by name (a `BTreeMap`, so reports are in name order), not
//!   by `lock_class_key`.
//! - A contention is any acquisition that did not succeed at once, including one
//!   that then succeeded by optimistic spinning; wait time runs from the lock
//!   call to the acquisition and so includes spinning (the kernel's mutex calls
//!   `lock_contended()` only after spinning failed). `sleeps` counts the
//!   contentions that had to queue and sleep.
//! - Wait times are kept in a histogram (hdrhistogram, 3 significant digits)
//!   besides exact total and max; no bounce counts or contention points.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

use hdrhistogram::Histogram;
use sim::Time;

/// Shared (read) or exclusive (write) acquisition. Mutexes and spinlocks are
/// always exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockKind {
    Read,
    Write,
}

impl LockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Read => "read",
            LockKind::Write => "write",
        }
    }
}

/// Statistics of one kind of acquisition of one class.
#[derive(Clone, Debug)]
pub struct LockTimeStats {
    /// Acquisitions (fast path or not).
    pub acquisitions: u64,
    /// Acquisitions that did not succeed at once (spun or slept).
    pub contentions: u64,
    /// Contentions that queued and slept.
    pub sleeps: u64,
    /// Wait time of contended acquisitions, ns (3 significant digits).
    pub wait: Histogram<u64>,
    /// Exact total wait time, ns.
    pub wait_total_ns: Time,
    /// Exact longest wait, ns.
    pub wait_max_ns: Time,
    /// Total hold time, ns (counted at release).
    pub hold_total_ns: Time,
    /// Longest hold, ns.
    pub hold_max_ns: Time,
    /// Releases counted in the hold times.
    pub releases: u64,
}

impl Default for LockTimeStats {
    fn default() -> Self {
        LockTimeStats {
            acquisitions: 0,
            contentions: 0,
            sleeps: 0,
            wait: Histogram::new(3).expect("hdrhistogram: 3 significant digits is valid"),
            wait_total_ns: 0,
            wait_max_ns: 0,
            hold_total_ns: 0,
            hold_max_ns: 0,
            releases: 0,
        }
    }
}

/// Statistics of one lock class.
#[derive(Clone, Debug, Default)]
pub struct ClassStats {
    pub name: String,
    pub read: LockTimeStats,
    pub write: LockTimeStats,
}

impl ClassStats {
    /// The statistics of one kind.
    pub fn kind(&self, kind: LockKind) -> &LockTimeStats {
        match kind {
            LockKind::Read => &self.read,
            LockKind::Write => &self.write,
        }
    }

    fn kind_mut(&mut self, kind: LockKind) -> &mut LockTimeStats {
        match kind {
            LockKind::Read => &mut self.read,
            LockKind::Write => &mut self.write,
        }
    }
}

/// A lock class: the handle every lock of the class records into. Cheap to clone.
#[derive(Clone)]
pub struct LockClass {
    name: Rc<str>,
    stats: Rc<RefCell<ClassStats>>,
}

impl LockClass {
    /// The class name (used in reports and deadlock messages).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A snapshot of the class's statistics.
    pub fn stats(&self) -> ClassStats {
        self.stats.borrow().clone()
    }

    /// `lock_acquired()`: one acquisition of `kind` after `wait_ns`;
    /// `contended` if it did not succeed at once, `slept` if it queued.
    pub(crate) fn acquired(&self, kind: LockKind, wait_ns: Time, contended: bool, slept: bool) {
        let mut st = self.stats.borrow_mut();
        let s = st.kind_mut(kind);
        s.acquisitions += 1;
        if contended {
            s.contentions += 1;
            if slept {
                s.sleeps += 1;
            }
            // `record` grows the auto-resizing histogram; `saturating_record`
            // would clamp to its current range.
            if s.wait.record(wait_ns).is_err() {
                s.wait.saturating_record(wait_ns);
            }
            s.wait_total_ns += wait_ns;
            s.wait_max_ns = s.wait_max_ns.max(wait_ns);
        }
    }

    /// `lock_release()`: one release of `kind` after holding `hold_ns`.
    pub(crate) fn released(&self, kind: LockKind, hold_ns: Time) {
        let mut st = self.stats.borrow_mut();
        let s = st.kind_mut(kind);
        s.releases += 1;
        s.hold_total_ns += hold_ns;
        s.hold_max_ns = s.hold_max_ns.max(hold_ns);
    }
}

/// One row of the report: one class and kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockStatRow {
    pub class: String,
    pub kind: LockKind,
    pub acquisitions: u64,
    pub contentions: u64,
    pub sleeps: u64,
    pub wait_total_ns: Time,
    /// Median wait of contended acquisitions, ns (0 without contention).
    pub wait_p50_ns: Time,
    /// 99th percentile wait of contended acquisitions, ns.
    pub wait_p99_ns: Time,
    pub wait_max_ns: Time,
    pub hold_total_ns: Time,
    pub hold_max_ns: Time,
}

/// The lock statistics of one modelled kernel: a registry of classes by name.
/// Cheap to clone (an `Rc`).
#[derive(Clone, Default)]
pub struct LockStats(Rc<RefCell<BTreeMap<String, LockClass>>>);

impl LockStats {
    pub fn new() -> Self {
        Self::default()
    }

    /// The class named `name`, created on first use.
    pub fn class(&self, name: &str) -> LockClass {
        self.0
            .borrow_mut()
            .entry(name.to_string())
            .or_insert_with(|| LockClass {
                name: name.into(),
                stats: Rc::new(RefCell::new(ClassStats {
                    name: name.to_string(),
                    ..ClassStats::default()
                })),
            })
            .clone()
    }

    /// A snapshot of one class's statistics, if the class exists.
    pub fn get(&self, name: &str) -> Option<ClassStats> {
        self.0.borrow().get(name).map(|c| c.stats())
    }

    /// Class names in order.
    pub fn classes(&self) -> Vec<String> {
        self.0.borrow().keys().cloned().collect()
    }

    /// Zeroes every class (`echo 0 > /proc/lock_stat`).
    pub fn clear(&self) {
        for c in self.0.borrow().values() {
            let mut st = c.stats.borrow_mut();
            let name = std::mem::take(&mut st.name);
            *st = ClassStats {
                name,
                ..ClassStats::default()
            };
        }
    }

    /// One row per class and kind that was acquired at least once, in class name
    /// order, write before read.
    pub fn report(&self) -> Vec<LockStatRow> {
        let mut rows = Vec::new();
        for (name, c) in self.0.borrow().iter() {
            let st = c.stats.borrow();
            for kind in [LockKind::Write, LockKind::Read] {
                let s = st.kind(kind);
                if s.acquisitions == 0 {
                    continue;
                }
                let q = |p: f64| {
                    if s.wait.is_empty() {
                        0
                    } else {
                        s.wait.value_at_quantile(p)
                    }
                };
                rows.push(LockStatRow {
                    class: name.clone(),
                    kind,
                    acquisitions: s.acquisitions,
                    contentions: s.contentions,
                    sleeps: s.sleeps,
                    wait_total_ns: s.wait_total_ns,
                    wait_p50_ns: q(0.5),
                    wait_p99_ns: q(0.99),
                    wait_max_ns: s.wait_max_ns,
                    hold_total_ns: s.hold_total_ns,
                    hold_max_ns: s.hold_max_ns,
                });
            }
        }
        rows
    }

    /// The report as a text table (times in us).
    pub fn format_report(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<32} {:>5} {:>12} {:>11} {:>9} {:>12} {:>12} {:>12} {:>14}",
            "class",
            "kind",
            "acquisitions",
            "contentions",
            "sleeps",
            "wait-p50-us",
            "wait-p99-us",
            "wait-max-us",
            "hold-total-us"
        );
        let us = |ns: Time| ns as f64 / 1000.0;
        for r in self.report() {
            let _ = writeln!(
                out,
                "{:<32} {:>5} {:>12} {:>11} {:>9} {:>12.3} {:>12.3} {:>12.3} {:>14.3}",
                r.class,
                r.kind.as_str(),
                r.acquisitions,
                r.contentions,
                r.sleeps,
                us(r.wait_p50_ns),
                us(r.wait_p99_ns),
                us(r.wait_max_ns),
                us(r.hold_total_ns)
            );
        }
        out
    }
}
