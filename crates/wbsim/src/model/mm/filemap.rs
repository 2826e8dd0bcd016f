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
//! to a bio) and where a read is in flight (new folios are added locked and
//! not up to date, and unlocked at the read's end; PG_readahead marks are
//! kept beside them), as locked page ranges; a writer copying into a folio
//! waits for them (`folio_lock` in `write_begin`), a reader for the read
//! ones, and reclaim skips them.
//!
//! Folio sizes: every range also carries the order of its folios (a range of
//! order `o` starts and ends on multiples of 2^o pages, so it is a run of
//! whole folios). A mapping with large folios (`mapping_set_large_folios`,
//! `mapping_max_folio_order`; XFS, and ext4 since 6.16) creates folios as
//! `__filemap_get_folio` does for `fgf_set_order(len)`: the order of the
//! write's remaining length, at most the mapping's maximum, lowered until the
//! index is aligned to it and the folio fits the hole. Dirtying, writeback,
//! reclaim and dropping act on whole folios (`folio_mark_dirty` and
//! `folio_start_writeback` count `folio_nr_pages`), so a write into part of
//! a clean large folio dirties all of it. `AS_STABLE_WRITES`
//! (`mapping_set_stable_writes`: btrfs with data checksums, or a device that
//! needs stable pages, `SB_I_STABLE_WRITES`) is kept here for the writer's
//! `folio_wait_stable`.
//!
//! Left out: per-block dirty state inside a large folio (iomap's `ifs`:
//! writeback writes only the dirty blocks of a folio; here it writes the
//! whole folio), folio splitting on truncate, the minimum folio order
//! (block size > page size), the writer's own
//! folio lock (writers of one file are serialized by the inode lock), the
//! PAGECACHE_TAG_TOWRITE tagging of WB_SYNC_ALL (the caller bounds its walk
//! instead), shadow entries and refault detection.

use std::cell::Cell;
use std::collections::BTreeMap;

/// The root memcg's id (`ROOT_MEM_CGROUP_ID` of the memcg table): the owner
/// of folios made by callers that name none.
const ROOT_MEMCG: u64 = 1;

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

/// A piece of a range being updated: start, end, old (state, dropbehind),
/// folio order, folio memcg.
type Piece = (u64, u64, Option<(PageState, bool)>, u8, u64);

/// `MAX_PAGECACHE_ORDER` on x86-64 with transparent huge pages
/// (include/linux/pagemap.h: `HPAGE_PMD_ORDER`, 2 MiB folios of 4 KiB
/// pages): the largest folio a mapping with large folios may hold.
pub const MAX_PAGECACHE_ORDER: u8 = 9;

/// One range of pages `[start, end)` with one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Extent {
    end: u64,
    state: PageState,
    /// PG_dropbehind: drop the folio once it is clean (RWF_DONTCACHE).
    dropbehind: bool,
    /// Folio order of the range's folios (2^order pages each).
    order: u8,
    /// `folio_memcg()`: id of the memcg the folios were charged to when
    /// they were created (`filemap_add_folio` -> `mem_cgroup_charge`, the
    /// creating task's memcg); fixed for the folio's life.
    memcg: u64,
}

/// The extents of a mapping by start page, with the extent and the hole
/// last found by [`Ranges::lookup`]: a write looks up its folio several
/// times (its size, what is cached, the update, the owners) and most
/// lookups land where the one before did. Both are kept true: every change
/// to the tree goes through [`Ranges::insert`], [`Ranges::remove`] or
/// [`Ranges::set_end`], which update or forget them. (Only a cache: the
/// ranges, and so the results, are the same without it.)
#[derive(Clone, Debug, Default)]
struct Ranges {
    tree: BTreeMap<u64, Extent>,
    /// (start, extent) as in `tree`, or `None`.
    hint: Cell<Option<(u64, Extent)>>,
    /// A hole `[a, b)`: no page of it is cached, and `b` is where the next
    /// extent starts (u64::MAX if none).
    gap: Cell<Option<(u64, u64)>>,
    /// Tests only: no remembered extent or hole, and the general path of
    /// every update (to check the shortcuts against).
    #[cfg(test)]
    general_only: bool,
}

impl Ranges {
    /// The extent holding page `at`, or the hole holding it.
    fn lookup(&self, at: u64) -> Result<(u64, Extent), (u64, u64)> {
        #[cfg(test)]
        if self.general_only {
            self.hint.set(None);
            self.gap.set(None);
        }
        if let Some((s, e)) = self.hint.get() {
            if s <= at && at < e.end {
                return Ok((s, e));
            }
        }
        if let Some((a, b)) = self.gap.get() {
            if a <= at && at < b {
                return Err((a, b));
            }
        }
        let before = self.tree.range(..=at).next_back().map(|(&s, e)| (s, *e));
        match before {
            Some((s, e)) if e.end > at => {
                self.hint.set(Some((s, e)));
                Ok((s, e))
            }
            _ => {
                let a = before.map_or(0, |(_, e)| e.end);
                let b = self.tree.range(at..).next().map_or(u64::MAX, |(&s, _)| s);
                self.gap.set(Some((a, b)));
                Err((a, b))
            }
        }
    }

    /// The extent holding page `at`, if cached.
    fn extent_at(&self, at: u64) -> Option<(u64, Extent)> {
        self.lookup(at).ok()
    }

    /// The remembered hole, if it holds all of `[start, end)`.
    fn gap_holding(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        #[cfg(test)]
        if self.general_only {
            return None;
        }
        self.gap.get().filter(|&(a, b)| a <= start && end <= b)
    }

    /// Pages `[start, end)` are now cached: the remembered hole shrinks
    /// (from its front) or is forgotten.
    fn filled(&self, start: u64, end: u64) {
        if let Some((a, b)) = self.gap.get() {
            if end <= a || start >= b {
                return;
            }
            self.gap.set((start <= a && end < b).then_some((end, b)));
        }
    }

    fn insert(&mut self, start: u64, e: Extent) {
        self.tree.insert(start, e);
        self.hint.set(Some((start, e)));
        self.filled(start, e.end);
    }

    fn remove(&mut self, start: u64) -> Option<Extent> {
        if self.hint.get().is_some_and(|(s, _)| s == start) {
            self.hint.set(None);
        }
        // Pages leaving the cache only make holes larger: the remembered
        // one stays true, except for its end if the extent there goes.
        if self.gap.get().is_some_and(|(_, b)| b == start) {
            self.gap.set(None);
        }
        self.tree.remove(&start)
    }

    /// Moves the end of the extent starting at `start` to `end`.
    fn set_end(&mut self, start: u64, end: u64) {
        let e = self.tree.get_mut(&start).expect("extent exists");
        e.end = end;
        self.hint.set(Some((start, *e)));
        self.filled(start, end);
    }

    fn get(&self, start: u64) -> Option<Extent> {
        self.tree.get(&start).copied()
    }

    fn range<R: std::ops::RangeBounds<u64>>(
        &self,
        r: R,
    ) -> std::collections::btree_map::Range<'_, u64, Extent> {
        self.tree.range(r)
    }

    fn iter(&self) -> std::collections::btree_map::Iter<'_, u64, Extent> {
        self.tree.iter()
    }

    fn len(&self) -> usize {
        self.tree.len()
    }
}

/// Whether two extents hold folios of the same state, PG_dropbehind, order
/// and memcg (neighbours with the same attributes are one range).
fn same_attrs(a: &Extent, b: &Extent) -> bool {
    a.state == b.state && a.dropbehind == b.dropbehind && a.order == b.order && a.memcg == b.memcg
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
    /// New order-0 folios added to the cache (each goes through
    /// `folio_add_lru`, mm/swap.rs).
    pub new_small_folios: u64,
    /// New large folios added to the cache.
    pub new_large_folios: u64,
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
        self.new_small_folios += o.new_small_folios;
        self.new_large_folios += o.new_large_folios;
    }
}

/// The page cache of one inode.
#[derive(Clone, Debug, Default)]
pub struct AddressSpace {
    /// start page index -> extent.
    map: Ranges,
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
    /// Page ranges whose folios are locked and not yet up to date: a read
    /// (or readahead) bio is in flight for them (`filemap_add_folio` adds a
    /// new folio locked; the read's end marks it up to date and unlocks
    /// it).
    reading: Vec<(u64, u64)>,
    /// Pages carrying PG_readahead (the mark a readahead window leaves for
    /// the next one, mm/readahead.rs).
    ra_marks: Vec<u64>,
    /// `mapping_max_folio_order()`: 0 without large folios.
    max_folio_order: u8,
    /// `AS_STABLE_WRITES`: a folio under writeback may not be modified.
    stable_writes: bool,
}

impl AddressSpace {
    pub fn new() -> Self {
        Self::default()
    }

    /// `mapping_set_large_folios()` (`max_order` = [`MAX_PAGECACHE_ORDER`])
    /// or `mapping_set_folio_order_range(0, max_order)`.
    pub fn set_max_folio_order(&mut self, max_order: u8) {
        self.max_folio_order = max_order.min(MAX_PAGECACHE_ORDER);
    }

    /// `mapping_max_folio_order()`.
    pub fn max_folio_order(&self) -> u8 {
        self.max_folio_order
    }

    /// `mapping_set_stable_writes()` / `mapping_clear_stable_writes()`.
    pub fn set_stable_writes(&mut self, on: bool) {
        self.stable_writes = on;
    }

    /// `mapping_stable_writes()`: writers wait for writeback of a folio
    /// before changing it (`folio_wait_stable`).
    pub fn stable_writes(&self) -> bool {
        self.stable_writes
    }

    /// Folios cached.
    pub fn nr_folios(&self) -> u64 {
        self.map.iter().map(|(&s, e)| (e.end - s) >> e.order).sum()
    }

    /// The order `__filemap_get_folio` gives a new folio at `index` for a
    /// write (or read) whose remaining length is `len` pages
    /// (`fgf_set_order`: ilog2 of the length), at most the mapping's
    /// maximum, lowered until `index` is aligned to it and the folio ends by
    /// `limit` (the next cached folio: a larger folio would collide with it,
    /// `filemap_add_folio` fails with -EEXIST and a smaller order is tried).
    fn new_folio_order(&self, index: u64, len: u64, limit: u64) -> u8 {
        if len == 0 {
            return 0;
        }
        let mut order = (63 - len.leading_zeros()).min(u32::from(self.max_folio_order));
        if index != 0 {
            order = order.min(index.trailing_zeros());
        }
        while order > 0 && index + (1u64 << order) > limit {
            order -= 1;
        }
        order as u8
    }

    /// The extent holding page `at`, if cached.
    fn extent_at(&self, at: u64) -> Option<(u64, Extent)> {
        self.map.extent_at(at)
    }

    /// One past the last page of the folio holding page `index`: the cached
    /// folio's, or, over a hole, that of the folio a write whose last page
    /// is `write_end - 1` would create there.
    pub fn folio_end(&self, index: u64, write_end: u64) -> u64 {
        let limit = match self.map.lookup(index) {
            Ok((_, e)) => {
                let size = 1u64 << e.order;
                return (index | (size - 1)) + 1;
            }
            // The hole ends at the next cached folio.
            Err((_, next)) => next,
        };
        let order = self.new_folio_order(index, write_end.saturating_sub(index), limit);
        index + (1u64 << order)
    }

    /// The average size, in pages, of the cached folios over pages
    /// `[start, end)`: each folio is one physically contiguous run, so this
    /// is the segment size of a bio that carries them
    /// ([`crate::model::block::Bio::seg_bytes`]).
    pub fn avg_folio_pages(&self, start: u64, end: u64) -> u64 {
        let (mut at, mut folios) = (start, 0u64);
        while at < end {
            at = self.folio_end(at, end);
            folios += 1;
        }
        end.saturating_sub(start) / folios.max(1)
    }

    /// `[start, end)` widened to whole cached folios.
    fn round_out(&self, start: u64, end: u64) -> (u64, u64) {
        if start >= end {
            return (start, end);
        }
        let s = match self.extent_at(start) {
            Some((_, e)) => start & !((1u64 << e.order) - 1),
            None => start,
        };
        let e = match self.extent_at(end - 1) {
            Some((_, x)) => ((end - 1) | ((1u64 << x.order) - 1)) + 1,
            None => end,
        };
        (s, e)
    }

    /// Creates folios in the holes of `[start, end)` in `state` (a write
    /// or a read whose last page is `write_end - 1`), one
    /// `__filemap_get_folio` at a time. Returns the counter changes.
    fn fill_holes(
        &mut self,
        (start, end): (u64, u64),
        write_end: u64,
        state: PageState,
        dropbehind: bool,
        memcg: u64,
    ) -> Delta {
        let mut delta = Delta::default();
        let mut pos = start;
        while pos < end {
            let limit = match self.map.lookup(pos) {
                Ok((_, e)) => {
                    pos = e.end;
                    continue;
                }
                Err((_, next)) => next,
            };
            let order = self.new_folio_order(pos, write_end.max(end) - pos, limit);
            let fe = pos + (1u64 << order);
            let new = Extent {
                end: fe,
                state,
                dropbehind,
                order,
                memcg,
            };
            if self.general_only() {
                self.map.insert(pos, new);
                self.coalesce(pos, fe);
            } else {
                // The folio fills part of a hole: only the extent ending
                // at `pos` and the one starting at `fe` (`limit`) can take
                // it in.
                self.insert_merged(pos, new);
            }
            let mut d = Delta::default();
            d.account(None, Some(state), fe - pos);
            if order == 0 {
                d.new_small_folios = 1;
            } else {
                d.new_large_folios = 1;
            }
            self.apply_counts(d);
            delta.add(d);
            pos = fe;
        }
        delta
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
            self.map.set_end(s, at);
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
        // Folio operations act on whole folios.
        let (start, end) = self.round_out(start, end);
        if !self.general_only() {
            if let Some((s0, e)) = self.extent_at(start).filter(|(_, e)| e.end >= end) {
                return self.update_within(start, end, (s0, e), f);
            }
        }
        self.split_at(start);
        self.split_at(end);
        // Collect the pieces of [start, end): extents and holes.
        let mut pieces: Vec<Piece> = Vec::new();
        let mut cur = start;
        let keys: Vec<u64> = self.map.range(start..end).map(|(&k, _)| k).collect();
        for k in keys {
            let e = self.map.remove(k).expect("key just listed");
            if k > cur {
                pieces.push((cur, k, None, 0, 0));
            }
            pieces.push((k, e.end, Some((e.state, e.dropbehind)), e.order, e.memcg));
            cur = e.end;
        }
        if cur < end {
            pieces.push((cur, end, None, 0, 0));
        }
        for (s, e, old, order, memcg) in pieces {
            let new = f(old);
            delta.account(old.map(|o| o.0), new.map(|n| n.0), e - s);
            if let Some((state, dropbehind)) = new {
                self.map.insert(
                    s,
                    Extent {
                        end: e,
                        state,
                        dropbehind,
                        order,
                        memcg,
                    },
                );
            }
        }
        self.apply_counts(delta);
        self.coalesce(start, end);
        delta
    }

    /// [`AddressSpace::update`] of `[start, end)` (whole folios) lying
    /// inside the one extent `ext` = (its start, itself): the same result as
    /// splitting, applying `f` and coalescing, with only the extents that
    /// can change touched. The ranges are kept merged (no two neighbours
    /// with equal attributes), so the parts of `ext` left outside the range
    /// cannot merge with anything, and the changed part only with the
    /// extent before `ext` (if it starts at `ext`'s start) or after it (if
    /// it ends at `ext`'s end).
    fn update_within(
        &mut self,
        start: u64,
        end: u64,
        (s0, e): (u64, Extent),
        mut f: impl FnMut(Option<(PageState, bool)>) -> Option<(PageState, bool)>,
    ) -> Delta {
        let old = (e.state, e.dropbehind);
        let new = f(Some(old));
        let mut delta = Delta::default();
        delta.account(Some(old.0), new.map(|n| n.0), end - start);
        if new == Some(old) {
            return delta;
        }
        let Some((state, dropbehind)) = new else {
            // Dropped: a hole between what is left of `ext`.
            if start > s0 {
                self.map.set_end(s0, start);
            } else {
                self.map.remove(s0);
            }
            if end < e.end {
                self.map.insert(end, e);
            }
            self.apply_counts(delta);
            return delta;
        };
        let mut changed = Extent {
            end,
            state,
            dropbehind,
            ..e
        };
        // After the range: the rest of `ext`, or the next extent if it
        // takes the changed folios in.
        if end < e.end {
            self.map.insert(end, e);
        } else if let Some(next) = self.map.get(end).filter(|n| same_attrs(&changed, n)) {
            self.map.remove(end);
            changed.end = next.end;
        }
        // Before it: the rest of `ext`, or the previous extent if it takes
        // the changed folios in.
        if start > s0 {
            self.map.set_end(s0, start);
            self.map.insert(start, changed);
        } else {
            let prev = self
                .map
                .range(..s0)
                .next_back()
                .map(|(&p, x)| (p, *x))
                .filter(|(_, x)| x.end == s0 && same_attrs(x, &changed));
            match prev {
                Some((p, _)) => {
                    self.map.remove(s0);
                    self.map.set_end(p, changed.end);
                }
                None => self.map.insert(s0, changed),
            }
        }
        self.apply_counts(delta);
        delta
    }

    /// Inserts `x` at `start` over a hole, merged with the extent ending at
    /// `start` and the one starting at `x.end` where their attributes agree
    /// (what [`AddressSpace::coalesce`] would do around it).
    fn insert_merged(&mut self, start: u64, mut x: Extent) {
        // The remembered hole, if `x` goes into it, says which neighbours
        // cannot exist: none where `x` stops short of the hole's edges.
        let hole = self.map.gap_holding(start, x.end);
        let may_have_next = hole.is_none_or(|(_, b)| b == x.end);
        let may_have_prev = hole.is_none_or(|(a, _)| a == start);
        if may_have_next {
            if let Some(next) = self.map.get(x.end) {
                if same_attrs(&x, &next) {
                    self.map.remove(x.end);
                    x.end = next.end;
                }
            }
        }
        if may_have_prev {
            if let Some((&p, prev)) = self.map.range(..start).next_back() {
                if prev.end == start && same_attrs(prev, &x) {
                    self.map.set_end(p, x.end);
                    return;
                }
            }
        }
        self.map.insert(start, x);
    }

    /// Whether the shortcuts of [`AddressSpace::update`] and
    /// [`AddressSpace::fill_holes`] are off (tests comparing them with the
    /// general path).
    fn general_only(&self) -> bool {
        #[cfg(test)]
        {
            self.map.general_only
        }
        #[cfg(not(test))]
        {
            false
        }
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
        let here: Vec<(u64, Extent)> = self.map.range(first..=end).map(|(&k, &e)| (k, e)).collect();
        // The extent that the next one may merge into, as grown so far.
        let mut prev: Option<(u64, Extent)> = None;
        for (k, ke) in here {
            if let Some((p, pe)) = prev.as_mut() {
                if pe.end == k && same_attrs(pe, &ke) {
                    self.map.remove(k);
                    pe.end = ke.end;
                    self.map.set_end(*p, ke.end);
                    continue;
                }
            }
            prev = Some((k, ke));
        }
    }

    /// A buffered write dirtied pages `[start, end)` (`folio_mark_dirty` after
    /// the copy). New pages are allocated (and get PG_dropbehind if asked, as
    /// RWF_DONTCACHE does for folios it creates); pages that were cached keep
    /// their flag (folios that existed before the I/O stay cached).
    /// New folios are charged to the root memcg (see
    /// [`AddressSpace::write_dirty`] for the memcg-aware form).
    pub fn mark_dirty(&mut self, start: u64, end: u64, dropbehind_new: bool) -> Delta {
        self.write_dirty(start, end, end, dropbehind_new, ROOT_MEMCG)
    }

    /// [`AddressSpace::mark_dirty`] for the part `[start, end)` of a write
    /// whose last page is `write_end - 1`: new folios are sized for the rest
    /// of the write; cached folios the range touches are dirtied whole.
    /// New folios belong to `memcg` (the writer's); cached ones keep theirs.
    pub fn write_dirty(
        &mut self,
        start: u64,
        end: u64,
        write_end: u64,
        dropbehind_new: bool,
        memcg: u64,
    ) -> Delta {
        let mut d = self.fill_holes(
            (start, end),
            write_end,
            PageState::Dirty,
            dropbehind_new,
            memcg,
        );
        d.add(self.update(start, end, |old| match old {
            None => Some((PageState::Dirty, dropbehind_new)),
            Some((PageState::Clean, db)) | Some((PageState::Dirty, db)) => {
                Some((PageState::Dirty, db))
            }
            Some((PageState::Writeback, db)) | Some((PageState::WritebackDirty, db)) => {
                Some((PageState::WritebackDirty, db))
            }
        }));
        d
    }

    /// A read brought pages `[start, end)` into the cache (holes become
    /// clean folios of `memcg`, the reader's).
    pub fn add_clean(&mut self, start: u64, end: u64, dropbehind_new: bool, memcg: u64) -> Delta {
        self.fill_holes((start, end), end, PageState::Clean, dropbehind_new, memcg)
    }

    /// The folios of `[start, end)` by owner, in index order: one
    /// `(memcg, folios, pages per folio)` per run of folios of one memcg and
    /// order (what `wbc_account_cgroup_owner` is called with, folio by folio).
    pub fn folio_owners(&self, start: u64, end: u64) -> Vec<(u64, u64, u64)> {
        let (start, end) = self.round_out(start, end.max(start));
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        for (s, e, x) in self.ranges_in(start, end) {
            let size = 1u64 << x.order;
            let n = (e - s).div_ceil(size);
            match out.last_mut() {
                Some(last) if last.0 == x.memcg && last.2 == size => last.1 += n,
                _ => out.push((x.memcg, n, size)),
            }
        }
        out
    }

    /// The runs of pages of `[start, end)` not cached, in index order.
    pub fn missing_ranges(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = start;
        for (s, e, _) in self.ranges_in(start, end) {
            if s > at {
                out.push((at, s));
            }
            at = e;
        }
        if at < end {
            out.push((at, end));
        }
        out
    }

    /// Pages of `[start, end)` not cached (a read must fetch them).
    pub fn count_missing(&self, start: u64, end: u64) -> u64 {
        let cached: u64 = self.ranges_in(start, end).map(|(s, e, _)| e - s).sum();
        (end - start) - cached
    }

    fn ranges_in(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64, Extent)> + '_ {
        let at_start = self.map.lookup(start);
        // All of [start, end) in the extent holding `start`, or in the hole
        // holding it: no walk.
        let within = at_start.ok().filter(|(_, e)| start < end && end <= e.end);
        let in_hole = matches!(at_start, Err((_, next)) if end <= next);
        let walk = match within.is_some() || in_hole {
            true => None,
            false => {
                let first = at_start.map_or(start, |(s, _)| s);
                Some(
                    self.map
                        .range(first..end)
                        .map(move |(&s, e)| (s.max(start), e.end.min(end), *e))
                        .filter(|(s, e, _)| s < e),
                )
            }
        };
        within
            .map(|(_, e)| (start, end, e))
            .into_iter()
            .chain(walk.into_iter().flatten())
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
        let (start, end) = self.round_out(start, end.max(start));
        for (s, e, x) in self.ranges_in(start, end) {
            if left == 0 {
                break;
            }
            if x.state == PageState::Dirty {
                // Whole folios: the last one taken may go past max_pages, as
                // nr_to_write going negative does in the kernel.
                let size = 1u64 << x.order;
                let take = (e - s).min(left.div_ceil(size) * size);
                want.push((s, s + take));
                left = left.saturating_sub(take);
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
    /// changes (negative `cached`). Locked folios (a read in flight: not
    /// yet up to date) are kept, as `shrink_folio_list`'s `folio_trylock`
    /// fails on them.
    pub fn reclaim_clean(&mut self, max: u64) -> Delta {
        let mut want = Vec::new();
        let mut left = max;
        for (&s, e) in self.map.iter() {
            if left == 0 {
                break;
            }
            if e.state == PageState::Clean {
                let size = 1u64 << e.order;
                for (a, b) in self.unlocked_parts(s, e.end) {
                    if left == 0 {
                        break;
                    }
                    let take = (b - a).min(left.div_ceil(size) * size);
                    want.push((a, a + take));
                    left = left.saturating_sub(take);
                }
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

    /// The parts of `[start, end)` outside every locked range, in order
    /// (locked ranges are whole folios).
    fn unlocked_parts(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        if self.locked.is_empty() && self.reading.is_empty() {
            return vec![(start, end)];
        }
        let mut locks: Vec<(u64, u64)> = self
            .locked
            .iter()
            .chain(&self.reading)
            .copied()
            .filter(|&(s, e)| s < end && start < e)
            .collect();
        locks.sort_unstable();
        let mut out = Vec::new();
        let mut at = start;
        for (s, e) in locks {
            if s > at {
                out.push((at, s));
            }
            at = at.max(e);
        }
        if at < end {
            out.push((at, end));
        }
        out
    }

    /// Whether a folio of `[start, end)` is locked (by writeback adding it
    /// to a bio, or by a read in flight).
    pub fn is_locked(&self, start: u64, end: u64) -> bool {
        self.locked
            .iter()
            .chain(&self.reading)
            .any(|&(s, e)| s < end && start < e)
    }

    /// A read bio for the new folios of `[start, end)` is being submitted:
    /// they are locked until [`AddressSpace::end_read`].
    pub fn start_read(&mut self, start: u64, end: u64) {
        self.reading.push((start, end));
    }

    /// The read of `[start, end)` started with [`AddressSpace::start_read`]
    /// completed: the folios are up to date and unlocked.
    pub fn end_read(&mut self, start: u64, end: u64) {
        if let Some(i) = self.reading.iter().position(|&r| r == (start, end)) {
            self.reading.swap_remove(i);
        }
    }

    /// Whether a folio of `[start, end)` is still being read (locked, not up
    /// to date): a reader of it sleeps in `folio_lock` until the read ends.
    pub fn is_reading(&self, start: u64, end: u64) -> bool {
        self.reading.iter().any(|&(s, e)| s < end && start < e)
    }

    /// `folio_set_readahead()` on the folio of page `index`.
    pub fn set_ra_mark(&mut self, index: u64) {
        if !self.ra_marks.contains(&index) {
            self.ra_marks.push(index);
        }
    }

    /// The first page of `[start, end)` carrying PG_readahead, its mark
    /// cleared (`folio_test_clear_readahead` in `filemap_readahead`). Marks
    /// on pages no longer cached went with their folio and are dropped.
    pub fn take_ra_mark(&mut self, start: u64, end: u64) -> Option<u64> {
        let cached: Vec<bool> = self
            .ra_marks
            .iter()
            .map(|&i| self.count_missing(i, i + 1) == 0)
            .collect();
        let mut keep = Vec::with_capacity(self.ra_marks.len());
        let mut hit: Option<u64> = None;
        for (&i, c) in self.ra_marks.iter().zip(cached) {
            if !c {
                continue;
            }
            if (start..end).contains(&i) && hit.is_none_or(|h| i < h) {
                if let Some(h) = hit.replace(i) {
                    keep.push(h);
                }
                continue;
            }
            keep.push(i);
        }
        self.ra_marks = keep;
        hit
    }

    /// The first page at or after `from` not cached (`page_cache_next_miss`).
    pub fn next_hole(&self, from: u64) -> u64 {
        let mut at = from;
        for (s, e, _) in self.ranges_in(from, u64::MAX) {
            if s > at {
                break;
            }
            at = e;
        }
        at
    }

    /// Pages of reads in flight.
    pub fn nr_reading(&self) -> u64 {
        self.reading.iter().map(|(s, e)| e - s).sum()
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
        let end = self.map.iter().next_back().map_or(0, |(_, e)| e.end);
        self.update(0, end, |_| None)
    }

    /// Checks the internal counters against the ranges (page conservation).
    pub fn check(&self) -> Result<(), String> {
        let (mut c, mut d, mut w) = (0, 0, 0);
        let mut last_end = 0;
        for (&s, e) in self.map.iter() {
            if s < last_end || e.end <= s {
                return Err(format!("overlapping or empty extent at page {s}"));
            }
            let size = 1u64 << e.order;
            if s % size != 0 || e.end % size != 0 {
                return Err(format!(
                    "extent {s}..{} cuts a folio of order {}",
                    e.end, e.order
                ));
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
        m.add_clean(0, 10, false, 1); // cached before the uncached write
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
        m.add_clean(0, 4, false, 1); // cached before
        m.add_clean(0, 16, true, 1); // the uncached read fills the rest
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
        m.add_clean(0, 50, false, 1);
        m.mark_dirty(50, 100, false);
        let d = m.reclaim_clean(80);
        assert_eq!(d.cached, -50);
        assert_eq!(m.nrpages(), 50);
        assert_eq!(m.count_missing(0, 100), 50);
        let d = m.truncate_all();
        assert_eq!((d.cached, d.dirty), (-50, -50));
        m.check().unwrap();
    }

    #[test]
    fn large_folios_follow_length_alignment_and_the_maximum() {
        let mut m = AddressSpace::new();
        m.set_max_folio_order(MAX_PAGECACHE_ORDER);
        // 16 pages at 0: one order-4 folio.
        m.mark_dirty(0, 16, false);
        assert_eq!(m.nr_folios(), 1);
        // 16 pages at 18: orders by alignment (2 at 18, 4 at 20, 8 at 24)
        // then the rest (2 at 32).
        m.mark_dirty(18, 34, false);
        assert_eq!(m.nr_folios(), 1 + 4);
        // A hole of 2 pages between cached folios takes an order-1 folio.
        m.mark_dirty(16, 18, false);
        assert_eq!(m.nr_folios(), 1 + 4 + 1);
        // 4 MiB at 1024: two folios of the maximum order (2 MiB).
        m.mark_dirty(1024, 2048, false);
        assert_eq!(m.nr_folios(), 6 + 2);
        m.check().unwrap();
        // Without large folios every page is a folio.
        let mut s = AddressSpace::new();
        s.mark_dirty(0, 16, false);
        assert_eq!(s.nr_folios(), 16);
    }

    #[test]
    fn folios_keep_the_memcg_that_created_them() {
        let mut m = AddressSpace::new();
        m.write_dirty(0, 8, 8, false, 2);
        m.write_dirty(8, 12, 12, false, 3);
        // Rewriting cached folios does not change their owner.
        m.write_dirty(0, 12, 12, false, 3);
        // Ranges of different owners do not merge.
        assert_eq!(m.nr_extents(), 2);
        assert_eq!(m.folio_owners(0, 12), vec![(2, 8, 1), (3, 4, 1)]);
        m.start_writeback(0, u64::MAX, u64::MAX);
        assert_eq!(m.folio_owners(2, 10), vec![(2, 6, 1), (3, 2, 1)]);
        m.check().unwrap();
    }

    /// The single-extent shortcuts of `update` and `fill_holes`, and the
    /// remembered extent and hole, leave the same ranges and return the
    /// same changes as the general path without memory, over a
    /// random mix of writes, reads, writeback, dropbehind and reclaim, with
    /// and without large folios.
    #[test]
    fn shortcuts_match_the_general_path() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = |n: u64| {
            // xorshift64*: any fixed sequence will do.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        };
        for max_order in [0, MAX_PAGECACHE_ORDER] {
            let mut fast = AddressSpace::new();
            let mut slow = AddressSpace::new();
            slow.map.general_only = true;
            for m in [&mut fast, &mut slow] {
                m.set_max_folio_order(max_order);
            }
            let mut in_flight: Vec<(u64, u64)> = Vec::new();
            for step in 0..20_000 {
                let start = rnd(600);
                let len = if rnd(4) == 0 { 1 + rnd(64) } else { 1 + rnd(3) };
                let end = start + len;
                let (memcg, db) = (1 + rnd(2), rnd(5) == 0);
                let (write_end, wb_end) = (end + rnd(4), end + rnd(100));
                let op = rnd(8);
                let (df, ds) = match op {
                    0..=2 => (
                        fast.write_dirty(start, end, write_end, db, memcg),
                        slow.write_dirty(start, end, write_end, db, memcg),
                    ),
                    3 => (
                        fast.add_clean(start, end, db, memcg),
                        slow.add_clean(start, end, db, memcg),
                    ),
                    4 => {
                        let max = 1 + rnd(40);
                        let (rf, df) = fast.start_writeback(start, wb_end, max);
                        let (rs, ds) = slow.start_writeback(start, wb_end, max);
                        assert_eq!(rf, rs, "step {step}");
                        in_flight.extend(rf);
                        (df, ds)
                    }
                    5 if !in_flight.is_empty() => {
                        let (s, e) = in_flight.swap_remove(rnd(in_flight.len() as u64) as usize);
                        let (df, nf) = fast.end_writeback(s, e);
                        let (ds, ns) = slow.end_writeback(s, e);
                        assert_eq!(nf, ns, "step {step}");
                        (df, ds)
                    }
                    6 => (
                        fast.drop_clean_dropbehind(start, end),
                        slow.drop_clean_dropbehind(start, end),
                    ),
                    _ => {
                        let max = rnd(30);
                        (fast.reclaim_clean(max), slow.reclaim_clean(max))
                    }
                };
                assert_eq!(df, ds, "step {step} op {op}");
                assert_eq!(fast.map.tree, slow.map.tree, "step {step} op {op}");
                fast.check().unwrap();
                // Lookups (which fill and use the remembered extent and hole)
                // near where the writer went and elsewhere.
                for q in [start, end, rnd(700)] {
                    let qe = q + 1 + rnd(8);
                    assert_eq!(fast.folio_end(q, qe), slow.folio_end(q, qe), "step {step}");
                    assert_eq!(fast.count_missing(q, qe), slow.count_missing(q, qe));
                    assert_eq!(fast.folio_owners(q, qe), slow.folio_owners(q, qe));
                    assert_eq!(fast.dirty_in(q, qe), slow.dirty_in(q, qe));
                    assert_eq!(fast.next_hole(q), slow.next_hole(q));
                }
            }
            assert!(fast.nr_extents() > 50, "the mix fragments the mapping");
        }
    }

    /// The folio a write would create over a hole is bounded by the next
    /// cached folio, also when that folio has just left the cache (the
    /// remembered hole must not keep the old bound).
    #[test]
    fn new_folio_size_follows_the_hole_as_it_grows() {
        let mut m = AddressSpace::new();
        m.set_max_folio_order(MAX_PAGECACHE_ORDER);
        m.add_clean(0, 1, false, 1);
        m.add_clean(48, 64, true, 1);
        // Order 5 at 32 would reach past 48: order 4.
        assert_eq!(m.folio_end(32, 200), 48);
        m.drop_clean_dropbehind(48, 64);
        assert_eq!(m.folio_end(32, 200), 64);
        // And as it shrinks.
        m.add_clean(40, 48, false, 1);
        assert_eq!(m.folio_end(32, 200), 40);
        m.check().unwrap();
    }

    #[test]
    fn large_folios_are_dirtied_and_written_whole() {
        let mut m = AddressSpace::new();
        m.set_max_folio_order(MAX_PAGECACHE_ORDER);
        m.add_clean(0, 16, false, 1);
        // One page written into a clean 16-page folio dirties all of it.
        let d = m.mark_dirty(3, 4, false);
        assert_eq!((d.dirty, d.dirtied, d.cached), (16, 16, 0));
        // Writeback takes whole folios even when asked for fewer pages.
        let (r, d) = m.start_writeback(5, u64::MAX, 2);
        assert_eq!(r, vec![(0, 16)]);
        assert_eq!(d.writeback, 16);
        assert_eq!(m.folio_end(7, 100), 16);
        // A hole's folio end follows the write that would create it.
        assert_eq!(m.folio_end(16, 48), 32);
        assert_eq!(m.folio_end(16, 20), 20);
        m.check().unwrap();
    }
}
