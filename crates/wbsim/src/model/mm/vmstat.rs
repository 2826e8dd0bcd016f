//! Global memory counters: `vm_node_stat` for file pages (include/linux/mmzone.h,
//! mm/vmstat.c) and the memory the machine has.
//!
//! Kept: NR_FILE_PAGES, NR_FILE_DIRTY, NR_WRITEBACK, NR_DIRTIED, NR_WRITTEN, and
//! memory not available to the page cache (kernel, anonymous memory of the
//! workload) as one fixed reservation. Left out: per-node and per-zone split,
//! per-CPU counter drift (the kernel's vmstat deltas are folded at once here),
//! anonymous memory dynamics and swap.

use super::filemap::Delta;

/// Page size, bytes: the base page of x86-64 and of 4K arm64 kernels
/// (arch/*/include/asm/page.h). The model's only definition.
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// log2(PAGE_SIZE).
pub const PAGE_SHIFT: u32 = 12;

/// Global counters of one machine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmStat {
    /// Total RAM, pages.
    pub total_pages: u64,
    /// Pages not available to the page cache: kernel, reserves, anonymous memory
    /// (fixed for a run).
    pub reserved_pages: u64,
    /// NR_FILE_PAGES.
    pub nr_file_pages: u64,
    /// NR_FILE_DIRTY.
    pub nr_file_dirty: u64,
    /// NR_WRITEBACK.
    pub nr_writeback: u64,
    /// NR_SHMEM: tmpfs pages (in use, never written back).
    pub nr_shmem: u64,
    /// NR_DIRTIED (cumulative).
    pub nr_dirtied: u64,
    /// NR_WRITTEN (cumulative).
    pub nr_written: u64,
    /// Invariant violations seen while applying deltas (a counter going below 0).
    pub violations: Vec<String>,
}

impl VmStat {
    /// A machine with `memory_bytes` of RAM of which `reserved_bytes` are never
    /// available to the page cache.
    pub fn new(memory_bytes: u64, reserved_bytes: u64) -> Self {
        VmStat {
            total_pages: memory_bytes / PAGE_SIZE,
            reserved_pages: reserved_bytes / PAGE_SIZE,
            ..Default::default()
        }
    }

    /// Free pages (NR_FREE_PAGES).
    pub fn free_pages(&self) -> u64 {
        self.total_pages
            .saturating_sub(self.reserved_pages)
            .saturating_sub(self.nr_file_pages)
            .saturating_sub(self.nr_shmem)
    }

    /// Adds (or, negative, frees) tmpfs pages.
    pub fn add_shmem(&mut self, d: i64) {
        self.nr_shmem = (self.nr_shmem as i64 + d).max(0) as u64;
    }

    /// `global_dirtyable_memory()`: free pages plus file LRU pages (the
    /// reservation stands for `totalreserve_pages` and anonymous memory).
    pub fn dirtyable_pages(&self) -> u64 {
        self.free_pages() + self.nr_file_pages
    }

    /// Applies a page-cache delta, recording (not panicking on) a counter that
    /// would go negative: the "no negative counter" invariant.
    pub fn apply(&mut self, d: &Delta) {
        self.nr_file_pages = self.add("NR_FILE_PAGES", self.nr_file_pages, d.cached);
        self.nr_file_dirty = self.add("NR_FILE_DIRTY", self.nr_file_dirty, d.dirty);
        self.nr_writeback = self.add("NR_WRITEBACK", self.nr_writeback, d.writeback);
        self.nr_dirtied += d.dirtied;
        self.nr_written += d.written;
    }

    fn add(&mut self, name: &str, v: u64, d: i64) -> u64 {
        let r = v as i64 + d;
        if r < 0 {
            self.violations
                .push(format!("no negative counter: {name} would become {r}"));
            0
        } else {
            r as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_violation() {
        let mut v = VmStat::new(1 << 30, 1 << 28);
        assert_eq!(v.total_pages, 262_144);
        assert_eq!(v.free_pages(), 196_608);
        v.apply(&Delta {
            cached: 10,
            dirty: 10,
            dirtied: 10,
            ..Default::default()
        });
        assert_eq!(v.free_pages(), 196_598);
        assert_eq!(v.dirtyable_pages(), 196_608);
        v.apply(&Delta {
            dirty: -11,
            ..Default::default()
        });
        assert_eq!(v.nr_file_dirty, 0);
        assert_eq!(v.violations.len(), 1);
        assert!(v.violations[0].contains("NR_FILE_DIRTY"));
    }
}
