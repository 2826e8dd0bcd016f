//! A file's data fork as the writeback paths see it: which pages have blocks
//! and whether those blocks are unwritten.
//!
//! - A hole under dirty pages is delayed allocation: blocks are allocated at
//!   writeback (`xfs_bmapi_convert_delalloc`), under the inode's extent lock
//!   held exclusive, in a transaction. XFS allocates them *unwritten*
//!   (`XFS_BMAPI_PREALLOC`, so a crash cannot expose stale blocks) and
//!   converts them when the I/O completes; it allocates the whole delalloc
//!   extent around the range at once, including the speculative
//!   preallocation a write extending the file reserved beyond EOF
//!   (`xfs_iomap_prealloc_size`).
//! - Unwritten blocks also come from `fallocate(2)` (XFS_EXT_UNWRITTEN,
//!   ext4's uninitialized extents): writeback needs no allocation, but each
//!   range is converted to written when its I/O completes
//!   (`xfs_iomap_write_unwritten`), again in a transaction under the lock.
//!   Converting the middle of an unwritten extent splits it in three records.
//! - Written blocks need neither.
//!
//! Kept at page granularity as interval sets (docs/design.md "scale by
//! aggregation"). Left out: the on-disk bmap btree itself (only its record
//! count), maximum extent length, trimming of post-EOF preallocation at
//! close, COW forks.

pub use crate::model::kernel::interval::IntervalSet;

/// The blocks behind a file's pages.
#[derive(Clone, Debug, Default)]
pub struct ExtentMap {
    /// Pages with unwritten blocks (preallocated, never written).
    pub unwritten: IntervalSet,
    /// Pages with written blocks.
    pub written: IntervalSet,
    /// Delalloc reservations beyond EOF without data (speculative
    /// preallocation): allocated with the delalloc extent they extend.
    pub eof_reserved: IntervalSet,
    /// Extent records created by splitting unwritten extents.
    pub splits: u64,
    /// Page after the range of the last buffered write's mapping (where a
    /// sequential writer's next lookup lands, its tree path still in the
    /// CPU cache).
    last_write_end: u64,
}

impl ExtentMap {
    /// An empty file: all holes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Holes of `[start, end)`: pages with neither written nor unwritten
    /// blocks.
    pub fn holes(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        self.written
            .gaps(start, end)
            .into_iter()
            .flat_map(|(s, e)| self.unwritten.gaps(s, e))
            .collect()
    }

    /// Gives the holes of `[start, end)` unwritten blocks. Returns the pages.
    fn fill_unwritten(&mut self, start: u64, end: u64) -> u64 {
        let holes = self.holes(start, end);
        for &(s, e) in &holes {
            self.unwritten.insert(s, e);
        }
        holes.iter().map(|(s, e)| e - s).sum()
    }

    /// `fallocate(fd, 0, ...)`: the holes of `[start, end)` get unwritten
    /// blocks; written blocks stay. Returns the pages newly allocated.
    pub fn fallocate(&mut self, start: u64, end: u64) -> u64 {
        self.fill_unwritten(start, end)
    }

    /// Whether writing back `[start, end)` must allocate blocks (some page is
    /// a delalloc hole).
    pub fn needs_alloc(&self, start: u64, end: u64) -> bool {
        // Walk the blocks from `start` (written and unwritten ranges may
        // abut each other) until a page has none.
        let mut at = start;
        while at < end {
            match self
                .written
                .covering_end(at)
                .or_else(|| self.unwritten.covering_end(at))
            {
                Some(e) => at = e,
                None => return true,
            }
        }
        false
    }

    /// Reserves `[start, end)` beyond EOF as delalloc (speculative
    /// preallocation of a write that extends the file).
    pub fn reserve_eof(&mut self, start: u64, end: u64) {
        for (s, e) in self.holes(start, end) {
            self.eof_reserved.insert(s, e);
        }
    }

    /// Allocation at writeback of the delalloc extent holding `[start, end)`:
    /// its holes, and the reservation beyond EOF contiguous with it, get
    /// unwritten blocks (converted at I/O completion). Returns the pages
    /// allocated.
    pub fn allocate(&mut self, start: u64, end: u64) -> u64 {
        let mut end = end;
        if let Some((rs, re)) = self.eof_reserved.touching_iter(end, end).next() {
            if rs <= end {
                end = end.max(re);
            }
        }
        let got = self.fill_unwritten(start, end);
        self.eof_reserved.remove(start, end);
        got
    }

    /// The delalloc extent that allocating `[start, end)` covers: the range
    /// extended through the reservation beyond EOF contiguous with it (what
    /// [`ExtentMap::allocate`] allocates).
    pub fn delalloc_extent(&self, start: u64, end: u64) -> (u64, u64) {
        match self.eof_reserved.touching_iter(end, end).next() {
            Some((rs, re)) if rs <= end => (start, end.max(re)),
            _ => (start, end),
        }
    }

    /// Whether page `p` has blocks (written or unwritten).
    pub fn has_blocks(&self, p: u64) -> bool {
        self.written.overlaps(p, p + 1) || self.unwritten.overlaps(p, p + 1)
    }

    /// Pages of `[start, end)` without blocks.
    pub fn hole_pages(&self, start: u64, end: u64) -> u64 {
        self.holes(start, end).iter().map(|(s, e)| e - s).sum()
    }

    /// Blocks written out: `[start, end)` becomes written (a filesystem
    /// that does not convert at completion, or layout by `overwrite=1`).
    pub fn mark_written(&mut self, start: u64, end: u64) {
        self.unwritten.remove(start, end);
        self.eof_reserved.remove(start, end);
        self.written.insert(start, end);
    }

    /// Whether any page of `[start, end)` has unwritten blocks.
    pub fn has_unwritten(&self, start: u64, end: u64) -> bool {
        self.unwritten.overlaps(start, end)
    }

    /// Unwritten-to-written conversion of `[start, end)` at I/O completion.
    /// Returns the unwritten extents it touched (0: nothing to convert).
    pub fn convert_unwritten(&mut self, start: u64, end: u64) -> u64 {
        let mut touched = 0;
        // The unwritten parts of the range.
        let pieces: Vec<(u64, u64)> = self
            .unwritten
            .touching(start, end)
            .into_iter()
            .map(|(s, e)| (s.max(start), e.min(end)))
            .filter(|(s, e)| s < e)
            .collect();
        for (s, e) in pieces {
            let (hit, splits) = self.unwritten.remove(s, e);
            touched += hit;
            self.splits += splits;
            self.written.insert(s, e);
        }
        touched
    }

    /// The mapping of a buffered write over `[start, end)`
    /// (`xfs_buffered_write_iomap_begin`, `ext4_da_map_blocks`): whether it
    /// walks the in-core extent tree cold. That is a write whose range has
    /// a hole (the delalloc path: look the hole up, reserve, insert or merge
    /// a delalloc record) and that does not start where the previous write
    /// ended. A sequential writer walks the same path every time and finds
    /// it cached; a write into preallocated or written blocks of a file
    /// that has few records walks a tree of one or two nodes. Simplified:
    /// the cost does not grow with the number of records, and overwrites
    /// of a fragmented file are not counted as cold.
    pub fn write_lookup(&mut self, start: u64, end: u64) -> bool {
        let cold = start != self.last_write_end && !self.holes(start, end).is_empty();
        self.last_write_end = end;
        cold
    }

    /// Pages with blocks (written or unwritten).
    pub fn block_pages(&self) -> u64 {
        self.written.pages() + self.unwritten.pages()
    }

    /// Extent records: unwritten and written ranges.
    pub fn nr_records(&self) -> usize {
        self.unwritten.len() + self.written.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallocated_file_needs_conversion_not_allocation() {
        let mut x = ExtentMap::new();
        assert!(x.needs_alloc(0, 1));
        assert_eq!(x.fallocate(0, 100), 100);
        assert!(!x.needs_alloc(0, 100));
        assert!(x.has_unwritten(50, 51));
        assert_eq!(x.convert_unwritten(50, 51), 1);
        assert_eq!(x.splits, 1);
        assert!(!x.has_unwritten(50, 51));
        assert_eq!(x.convert_unwritten(50, 51), 0);
        // Edge conversions do not split.
        assert_eq!(x.convert_unwritten(0, 10), 1);
        assert_eq!(x.splits, 1);
        assert_eq!(x.unwritten.pages(), 89);
    }

    #[test]
    fn delalloc_allocation_is_unwritten_and_once() {
        let mut x = ExtentMap::new();
        assert_eq!(x.allocate(0, 8), 8);
        assert!(!x.needs_alloc(0, 8));
        assert!(x.needs_alloc(7, 9));
        assert!(x.has_unwritten(0, 8));
        assert_eq!(x.convert_unwritten(0, 8), 1);
        // fallocate over written blocks leaves them written.
        assert_eq!(x.fallocate(0, 16), 8);
        assert!(!x.has_unwritten(0, 8));
        assert!(x.has_unwritten(8, 9));
    }

    #[test]
    fn abutting_written_and_unwritten_blocks_need_no_allocation() {
        let mut x = ExtentMap::new();
        x.allocate(0, 4);
        x.convert_unwritten(0, 2);
        x.allocate(4, 6);
        // written [0,2), unwritten [2,6): no hole in [0,6).
        assert!(!x.needs_alloc(0, 6));
        assert!(x.needs_alloc(0, 7));
        assert!(x.needs_alloc(6, 7));
        assert!(!x.needs_alloc(3, 3));
        assert_eq!(x.hole_pages(0, 10), 4);
    }

    #[test]
    fn eof_reservation_is_allocated_with_its_extent() {
        let mut x = ExtentMap::new();
        x.reserve_eof(1, 100);
        // Writeback of page 0 allocates the delalloc extent through the
        // reservation beyond EOF.
        assert_eq!(x.allocate(0, 1), 100);
        assert!(!x.needs_alloc(50, 60));
        assert!(x.eof_reserved.is_empty());
        let mut y = ExtentMap::new();
        y.reserve_eof(10, 20);
        // Not contiguous: only the range itself.
        assert_eq!(y.allocate(0, 1), 1);
        assert!(y.needs_alloc(5, 6));
    }
}
