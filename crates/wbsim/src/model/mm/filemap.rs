//! The page cache of one file: `struct address_space` and its folio states.
//!
//! Models mm/filemap.c and the folio flags that writeback reads (PG_dirty,
//! PG_writeback, PG_dropbehind) with pages aggregated in ranges: a mapping is a
//! sorted set of non-overlapping page ranges, each with one state, merged when
//! neighbours agree. A 1 TB sequential write is a handful of ranges, not 2^28
//! objects (docs/design.md principle 5).
//!
//! States (what the xarray tags and folio flags say):
//! - `Clean`: cached, up to date, not dirty.
//! - `Dirty`: PG_dirty (PAGECACHE_TAG_DIRTY).
//! - `Writeback`: PG_writeback, I/O in flight.
//! - `WritebackDirty`: redirtied while under writeback (both flags; possible
//!   because these devices do not ask for stable pages). Counted in both
//!   NR_FILE_DIRTY and NR_WRITEBACK, as the kernel does.
//!
//! Folio locks are kept only where writeback holds them (while adding folios
//! to a bio) as locked page ranges; a writer copying into a folio waits for
//! them (`folio_lock` in `write_begin`).
//!
//! Folio sizes appear only where a buffered write takes its folios
//! ([`write_folio_pages`]: the order `__filemap_get_folio` picks for a write,
//! which decides where `balance_dirty_pages_ratelimited` runs); the cached
//! state itself is kept per 4 KiB page.
//!
//! Left out: folio sizes in the cached state (counted per page), the writer's own
//! folio lock (writers of one file are serialized by the inode lock), the
//! PAGECACHE_TAG_TOWRITE tagging of WB_SYNC_ALL (the caller bounds its walk
//! instead), shadow entries and refault detection.

use std::collections::BTreeMap;

/// `MAX_PAGECACHE_ORDER` on x86-64 with 4 KiB pages: the PMD order,
/// `HPAGE_PMD_ORDER` = 9 (2 MiB folios; include/linux/pagemap.h).
pub const MAX_PAGECACHE_ORDER: u32 = 9;

/// The pages of the folio a buffered write allocates at page `index` with
/// `remaining` pages still to write, on a mapping whose largest folio order
/// is `max_order` (0: no large folios). As `iomap_get_folio` and
/// `__filemap_get_folio` choose it: the order of the write length
/// (`fgf_set_order`: ilog2 of the bytes left), capped at the mapping's
/// maximum, then lowered until `index` is aligned to it. Allocation
/// fallback to smaller orders under fragmentation is not modelled.
pub fn write_folio_pages(index: u64, remaining: u64, max_order: u32) -> u64 {
    if remaining <= 1 || max_order == 0 {
        return 1;
    }
    let mut order = remaining.ilog2().min(max_order);
    if index != 0 {
        order = order.min(index.trailing_zeros());
    }
    1 << order
}

/// State of a cached page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageState {
    Clean,
    Dirty,
    Writeback,
    WritebackDirty,
}

impl PageState {
    /// Counts toward NR_FILE_DIRTY.
    pub fn is_dirty(self) -> bool {
        matches!(self, PageState::Dirty | PageState::WritebackDirty)
    }
    /// Counts toward NR_WRITEBACK.
    pub fn is_writeback(self) -> bool {
        matches!(self, PageState::Writeback | PageState::WritebackDirty)
    }
}

/// A piece of a range being updated: start, end, old (state, dropbehind).
type Piece = (u64, u64, Option<(PageState, bool)>);

/// One range of pages `[start, end)` with one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Extent {
    end: u64,
    state: PageState,
    /// PG_dropbehind: drop the folio once it is clean (RWF_DONTCACHE).
    dropbehind: bool,
}

/// Page-count changes made by one operation, to be applied by the caller to the
/// global, per-wb and per-memcg counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delta {
    /// Pages added to (+) or removed from (-) the cache.
    pub cached: i64,
    /// Change in NR_FILE_DIRTY.
    pub dirty: i64,
    /// Change in NR_WRITEBACK.
    pub writeback: i64,
    /// Pages newly dirtied (clean or absent -> dirty): what NR_DIRTIED counts.
    pub dirtied: u64,
    /// Pages whose writeback completed (NR_WRITTEN).
    pub written: u64,
}

impl Delta {
    fn account(&mut self, from: Option<PageState>, to: Option<PageState>, n: u64) {
        let n_i = n as i64;
        let was_cached = from.is_some();
        let is_cached = to.is_some();
        self.cached += (is_cached as i64 - was_cached as i64) * n_i;
        let d0 = from.is_some_and(|s| s.is_dirty());
        let d1 = to.is_some_and(|s| s.is_dirty());
        self.dirty += (d1 as i64 - d0 as i64) * n_i;
        let w0 = from.is_some_and(|s| s.is_writeback());
        let w1 = to.is_some_and(|s| s.is_writeback());
        self.writeback += (w1 as i64 - w0 as i64) * n_i;
        if d1 && !d0 {
            self.dirtied += n;
        }
        if w0 && !w1 {
            self.written += n;
        }
    }

    /// Adds another delta to this one.
    pub fn add(&mut self, o: Delta) {
        self.cached += o.cached;
        self.dirty += o.dirty;
        self.writeback += o.writeback;
        self.dirtied += o.dirtied;
        self.written += o.written;
    }
}

/// The page cache of one inode.
#[derive(Clone, Debug, Default)]
pub struct AddressSpace {
    /// start page index -> extent.
    map: BTreeMap<u64, Extent>,
    nr_cached: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    /// `mapping->writeback_index`: where range_cyclic writeback resumes.
    pub writeback_index: u64,
    /// Pages whose writeback has ended, ever (lets a waiter wait for the
    /// pages under writeback *now* without waiting for later ones).
    pub nr_writeback_done: u64,
    /// Page ranges whose folios are locked (PG_locked) by writeback while it
    /// adds them to a bio.
    locked: Vec<(u64, u64)>,
}

impl AddressSpace {
    pub fn new() -> Self {
        Self::default()
    }

    /// Pages cached (`mapping->nrpages`).
    pub fn nrpages(&self) -> u64 {
        self.nr_cached
    }
    /// Pages dirty (including redirtied under writeback).
    pub fn nr_dirty(&self) -> u64 {
        self.nr_dirty
    }
    /// Pages under writeback.
    pub fn nr_writeback(&self) -> u64 {
        self.nr_writeback
    }
    /// Number of ranges held (a measure of fragmentation and memory use).
    pub fn nr_extents(&self) -> usize {
        self.map.len()
    }
    /// One past the last dirty page (0 if none): the end of what
    /// `tag_pages_for_writeback` would tag now.
    pub fn dirty_end(&self) -> u64 {
        self.map
            .iter()
            .rev()
            .find(|(_, e)| e.state.is_dirty())
            .map_or(0, |(_, e)| e.end)
    }

    /// `mapping_tagged(mapping, PAGECACHE_TAG_DIRTY)`.
    pub fn has_dirty(&self) -> bool {
        self.nr_dirty > 0
    }

    /// Splits the extent containing `at` (if any) so that a range starts at `at`.
    fn split_at(&mut self, at: u64) {
        let found = self
            .map
            .range(..at)
            .next_back()
            .map(|(&s, e)| (s, *e))
            .filter(|(_, e)| e.end > at);
        if let Some((s, e)) = found {
            self.map.insert(s, Extent { end: at, ..e });
            self.map.insert(at, e);
        }
    }

    /// Applies `f` to every page of `[start, end)` (holes passed as `None`),
    /// returning the counter changes. `f` maps (state, dropbehind) to the new
    /// (state, dropbehind) or `None` to drop the pages from the cache.
    fn update(
        &mut self,
        start: u64,
        end: u64,
        mut f: impl FnMut(Option<(PageState, bool)>) -> Option<(PageState, bool)>,
    ) -> Delta {
        let mut delta = Delta::default();
        if start >= end {
            return delta;
        }
        self.split_at(start);
        self.split_at(end);
        // Collect the pieces of [start, end): extents and holes.
        let mut pieces: Vec<Piece> = Vec::new();
        let mut cur = start;
        let keys: Vec<u64> = self.map.range(start..end).map(|(&k, _)| k).collect();
        for k in keys {
            let e = self.map.remove(&k).expect("key just listed");
            if k > cur {
                pieces.push((cur, k, None));
            }
            pieces.push((k, e.end, Some((e.state, e.dropbehind))));
            cur = e.end;
        }
        if cur < end {
            pieces.push((cur, end, None));
        }
        for (s, e, old) in pieces {
            let new = f(old);
            delta.account(old.map(|o| o.0), new.map(|n| n.0), e - s);
            if let Some((state, dropbehind)) = new {
                self.map.insert(
                    s,
                    Extent {
                        end: e,
                        state,
                        dropbehind,
                    },
                );
            }
        }
        self.apply_counts(delta);
        self.coalesce(start, end);
        delta
    }

    fn apply_counts(&mut self, d: Delta) {
        self.nr_cached = (self.nr_cached as i64 + d.cached) as u64;
        self.nr_dirty = (self.nr_dirty as i64 + d.dirty) as u64;
        self.nr_writeback = (self.nr_writeback as i64 + d.writeback) as u64;
    }

    /// Merges neighbouring extents with equal attributes around `[start, end]`.
    fn coalesce(&mut self, start: u64, end: u64) {
        let first = self
            .map
            .range(..start)
            .next_back()
            .map(|(&k, _)| k)
            .unwrap_or(start);
        let keys: Vec<u64> = self.map.range(first..=end).map(|(&k, _)| k).collect();
        let mut prev: Option<u64> = None;
        for k in keys {
            if let Some(p) = prev {
                let pe = self.map[&p];
                let ke = self.map[&k];
                if pe.end == k && pe.state == ke.state && pe.dropbehind == ke.dropbehind {
                    self.map.remove(&k);
                    self.map.get_mut(&p).expect("prev exists").end = ke.end;
                    continue;
                }
            }
            prev = Some(k);
        }
    }

    /// A buffered write dirtied pages `[start, end)` (`folio_mark_dirty` after
    /// the copy). New pages are allocated (and get PG_dropbehind if asked, as
    /// RWF_DONTCACHE does for folios it creates); pages that were cached keep
    /// their flag (folios that existed before the I/O stay cached).
    pub fn mark_dirty(&mut self, start: u64, end: u64, dropbehind_new: bool) -> Delta {
        self.update(start, end, |old| match old {
            None => Some((PageState::Dirty, dropbehind_new)),
            Some((PageState::Clean, db)) | Some((PageState::Dirty, db)) => {
                Some((PageState::Dirty, db))
            }
            Some((PageState::Writeback, db)) | Some((PageState::WritebackDirty, db)) => {
                Some((PageState::WritebackDirty, db))
            }
        })
    }

    /// A read brought pages `[start, end)` into the cache (holes become clean).
    pub fn add_clean(&mut self, start: u64, end: u64, dropbehind_new: bool) -> Delta {
        self.update(start, end, |old| match old {
            None => Some((PageState::Clean, dropbehind_new)),
            other => other,
        })
    }

    /// Pages of `[start, end)` not cached (a read must fetch them).
    pub fn count_missing(&self, start: u64, end: u64) -> u64 {
        let cached: u64 = self.ranges_in(start, end).map(|(s, e, _)| e - s).sum();
        (end - start) - cached
    }

    fn ranges_in(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64, Extent)> + '_ {
        let first = self
            .map
            .range(..start)
            .next_back()
            .filter(|(_, e)| e.end > start)
            .map(|(&k, _)| k)
            .unwrap_or(start);
        self.map
            .range(first..end)
            .map(move |(&s, e)| (s.max(start), e.end.min(end), *e))
            .filter(|(s, e, _)| s < e)
    }

    /// Dirty pages in `[start, end)`.
    pub fn dirty_in(&self, start: u64, end: u64) -> u64 {
        self.ranges_in(start, end)
            .filter(|(_, _, x)| x.state.is_dirty())
            .map(|(s, e, _)| e - s)
            .sum()
    }

    /// Pages under writeback in `[start, end)`.
    pub fn writeback_in(&self, start: u64, end: u64) -> u64 {
        self.ranges_in(start, end)
            .filter(|(_, _, x)| x.state.is_writeback())
            .map(|(s, e, _)| e - s)
            .sum()
    }

    /// Takes up to `max_pages` `Dirty` pages within `[start, end)`, walking up
    /// from `start`, and moves them to `Writeback` (`folio_clear_dirty_for_io` +
    /// `folio_start_writeback` in `write_cache_pages`). Pages redirtied under
    /// writeback are skipped (WB_SYNC_NONE semantics; WB_SYNC_ALL callers wait
    /// for their writeback and call again). Returns the contiguous ranges taken
    /// (each one a candidate bio) and the counter changes.
    pub fn start_writeback(
        &mut self,
        start: u64,
        end: u64,
        max_pages: u64,
    ) -> (Vec<(u64, u64)>, Delta) {
        let mut want: Vec<(u64, u64)> = Vec::new();
        let mut left = max_pages;
        for (s, e, x) in self.ranges_in(start, end) {
            if left == 0 {
                break;
            }
            if x.state == PageState::Dirty {
                let take = (e - s).min(left);
                want.push((s, s + take));
                left -= take;
            }
        }
        let mut delta = Delta::default();
        for &(s, e) in &want {
            delta.add(self.update(s, e, |old| match old {
                Some((PageState::Dirty, db)) => Some((PageState::Writeback, db)),
                other => other,
            }));
        }
        (want, delta)
    }

    /// Writeback of `[start, end)` completed (`folio_end_writeback`): pages go
    /// clean, or back to dirty if redirtied meanwhile. Clean PG_dropbehind
    /// pages stay cached here: `folio_end_dropbehind` needs the folio lock, so
    /// the filesystem completes such I/O in task context, which then drops
    /// them with [`AddressSpace::drop_clean_dropbehind`]. Returns the changes
    /// and the number of clean PG_dropbehind pages left for that step.
    pub fn end_writeback(&mut self, start: u64, end: u64) -> (Delta, u64) {
        let dropbehind: u64 = self
            .ranges_in(start, end)
            .filter(|(_, _, x)| x.state == PageState::Writeback && x.dropbehind)
            .map(|(s, e, _)| e - s)
            .sum();
        let d = self.update(start, end, |old| match old {
            Some((PageState::Writeback, db)) => Some((PageState::Clean, db)),
            Some((PageState::WritebackDirty, db)) => Some((PageState::Dirty, db)),
            other => other,
        });
        self.nr_writeback_done += end - start;
        (d, dropbehind)
    }

    /// Whether any page of `[start, end)` has PG_dropbehind.
    pub fn any_dropbehind(&self, start: u64, end: u64) -> bool {
        self.ranges_in(start, end).any(|(_, _, x)| x.dropbehind)
    }

    /// Drops clean PG_dropbehind pages of `[start, end)` after a read copied
    /// them (RWF_DONTCACHE reads). Returns the changes.
    pub fn drop_clean_dropbehind(&mut self, start: u64, end: u64) -> Delta {
        self.update(start, end, |old| match old {
            Some((PageState::Clean, true)) => None,
            other => other,
        })
    }

    /// Reclaim: drops up to `max` clean pages, lowest index first. Returns the
    /// changes (negative `cached`).
    pub fn reclaim_clean(&mut self, max: u64) -> Delta {
        let mut want = Vec::new();
        let mut left = max;
        for (&s, e) in &self.map {
            if left == 0 {
                break;
            }
            if e.state == PageState::Clean {
                let take = (e.end - s).min(left);
                want.push((s, s + take));
                left -= take;
            }
        }
        let mut d = Delta::default();
        for (s, e) in want {
            d.add(self.update(s, e, |old| match old {
                Some((PageState::Clean, _)) => None,
                other => other,
            }));
        }
        d
    }

    /// `folio_lock` on the folios of `[start, end)` (the caller checked
    /// [`AddressSpace::is_locked`] first).
    pub fn lock_range(&mut self, start: u64, end: u64) {
        self.locked.push((start, end));
    }

    /// `folio_unlock` of a range taken with [`AddressSpace::lock_range`].
    pub fn unlock_range(&mut self, start: u64, end: u64) {
        if let Some(i) = self.locked.iter().position(|&r| r == (start, end)) {
            self.locked.swap_remove(i);
        }
    }

    /// Whether a folio of `[start, end)` is locked.
    pub fn is_locked(&self, start: u64, end: u64) -> bool {
        self.locked.iter().any(|&(s, e)| s < end && start < e)
    }

    /// Clean pages cached.
    pub fn nr_clean(&self) -> u64 {
        self.map
            .iter()
            .filter(|(_, e)| e.state == PageState::Clean)
            .map(|(s, e)| e.end - s)
            .sum()
    }

    /// Drops every page (truncate_inode_pages at eviction). Pages under
    /// writeback must have completed first; returns the changes.
    pub fn truncate_all(&mut self) -> Delta {
        let end = self.map.last_key_value().map(|(_, e)| e.end).unwrap_or(0);
        self.update(0, end, |_| None)
    }

    /// Checks the internal counters against the ranges (page conservation).
    pub fn check(&self) -> Result<(), String> {
        let (mut c, mut d, mut w) = (0, 0, 0);
        let mut last_end = 0;
        for (&s, e) in &self.map {
            if s < last_end || e.end <= s {
                return Err(format!("overlapping or empty extent at page {s}"));
            }
            last_end = e.end;
            let n = e.end - s;
            c += n;
            if e.state.is_dirty() {
                d += n;
            }
            if e.state.is_writeback() {
                w += n;
            }
        }
        if (c, d, w) != (self.nr_cached, self.nr_dirty, self.nr_writeback) {
            return Err(format!(
                "mapping counters cached/dirty/writeback {}/{}/{} but ranges say {c}/{d}/{w}",
                self.nr_cached, self.nr_dirty, self.nr_writeback
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_folio_order_follows_length_and_alignment() {
        // A 1 MiB write at offset 0: one 256-page folio.
        assert_eq!(write_folio_pages(0, 256, MAX_PAGECACHE_ORDER), 256);
        // Capped at the PMD order.
        assert_eq!(write_folio_pages(0, 4096, MAX_PAGECACHE_ORDER), 512);
        // Misaligned index: down to its alignment.
        assert_eq!(write_folio_pages(12, 256, MAX_PAGECACHE_ORDER), 4);
        // Not a power of two: the largest that fits.
        assert_eq!(write_folio_pages(0, 300, MAX_PAGECACHE_ORDER), 256);
        // No large folios on the mapping.
        assert_eq!(write_folio_pages(0, 256, 0), 1);
    }

    #[test]
    fn sequential_write_is_one_extent() {
        let mut m = AddressSpace::new();
        for i in 0..1000 {
            m.mark_dirty(i * 256, (i + 1) * 256, false);
        }
        assert_eq!(m.nr_extents(), 1);
        assert_eq!(m.nr_dirty(), 256_000);
        m.check().unwrap();
    }

    #[test]
    fn writeback_cycle_conserves_pages() {
        let mut m = AddressSpace::new();
        let d = m.mark_dirty(0, 100, false);
        assert_eq!((d.cached, d.dirty, d.dirtied), (100, 100, 100));
        let (ranges, d) = m.start_writeback(0, u64::MAX, 60);
        assert_eq!(ranges, vec![(0, 60)]);
        assert_eq!((d.dirty, d.writeback), (-60, 60));
        // Redirty part of the range under writeback.
        let d = m.mark_dirty(50, 70, false);
        assert_eq!((d.dirty, d.writeback, d.cached, d.dirtied), (10, 0, 0, 10));
        let (d, dropped) = m.end_writeback(0, 60);
        assert_eq!(dropped, 0);
        assert_eq!((d.writeback, d.written), (-60, 60));
        assert_eq!(m.nr_dirty(), 50); // 50..100
        assert_eq!(m.nr_clean(), 50);
        assert_eq!(m.nrpages(), 100);
        m.check().unwrap();
    }

    #[test]
    fn dropbehind_pages_leave_after_writeback_end_but_old_pages_stay() {
        let mut m = AddressSpace::new();
        m.add_clean(0, 10, false); // cached before the uncached write
        m.mark_dirty(0, 20, true);
        m.start_writeback(0, u64::MAX, u64::MAX);
        let (d, dropbehind) = m.end_writeback(0, 20);
        // Completion cleans them; the task-context step drops the new ones.
        assert_eq!(dropbehind, 10);
        assert_eq!((d.cached, d.writeback, d.written), (0, -20, 20));
        let d = m.drop_clean_dropbehind(0, 20);
        assert_eq!(d.cached, -10);
        assert_eq!(m.nrpages(), 10);
        assert_eq!(m.count_missing(0, 10), 0);
        m.check().unwrap();
    }

    #[test]
    fn dropbehind_page_redirtied_under_writeback_stays_until_clean() {
        let mut m = AddressSpace::new();
        m.mark_dirty(0, 8, true);
        m.start_writeback(0, u64::MAX, u64::MAX);
        m.mark_dirty(2, 4, false); // redirtied while under writeback
        let (_, dropbehind) = m.end_writeback(0, 8);
        assert_eq!(dropbehind, 6);
        let d = m.drop_clean_dropbehind(0, 8);
        assert_eq!(d.cached, -6);
        assert_eq!((m.nrpages(), m.nr_dirty()), (2, 2));
        m.check().unwrap();
    }

    #[test]
    fn dontcache_read_drops_only_folios_it_created() {
        let mut m = AddressSpace::new();
        m.add_clean(0, 4, false); // cached before
        m.add_clean(0, 16, true); // the uncached read fills the rest
        let d = m.drop_clean_dropbehind(0, 16);
        assert_eq!(d.cached, -12);
        assert_eq!(m.nrpages(), 4);
        m.check().unwrap();
    }

    #[test]
    fn random_writes_fragment_and_coalesce() {
        let mut m = AddressSpace::new();
        for i in (0..100).step_by(2) {
            m.mark_dirty(i, i + 1, false);
        }
        assert_eq!(m.nr_extents(), 50);
        for i in (1..100).step_by(2) {
            m.mark_dirty(i, i + 1, false);
        }
        assert_eq!(m.nr_extents(), 1);
        let (r, _) = m.start_writeback(10, 20, u64::MAX);
        assert_eq!(r, vec![(10, 20)]);
        assert_eq!(m.nr_extents(), 3);
        m.check().unwrap();
    }

    #[test]
    fn reclaim_takes_only_clean() {
        let mut m = AddressSpace::new();
        m.add_clean(0, 50, false);
        m.mark_dirty(50, 100, false);
        let d = m.reclaim_clean(80);
        assert_eq!(d.cached, -50);
        assert_eq!(m.nrpages(), 50);
        assert_eq!(m.count_missing(0, 100), 50);
        let d = m.truncate_all();
        assert_eq!((d.cached, d.dirty), (-50, -50));
        m.check().unwrap();
    }
}
