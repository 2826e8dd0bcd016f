//! Readahead (mm/readahead.c): the per-open-file window
//! (`struct file_ra_state`) that buffered reads grow ahead of a sequential
//! reader, and the window arithmetic of `page_cache_sync_ra` (a cache miss)
//! and `page_cache_async_ra` (the reader reached the folio carrying
//! PG_readahead, the mark placed `async_size` pages before the window's
//! end).
//!
//! - A miss at the start of a file, a read larger than the maximum, or a
//!   miss right after the previous read (`index - prev_index <= 1`) starts
//!   a window of `get_init_ra_size(req_count, max)` pages at the miss
//!   (4x, then 2x the request rounded up to a power of two, at most
//!   `ra_pages`), marked so that the next window is read while the
//!   reader is still copying this one.
//! - Hitting the mark where expected moves the window on and grows it
//!   (`get_next_ra_size`: 4x while under max/16, 2x up to max/2, then
//!   max), all of it asynchronous (`async_size` = `size`).
//! - `ra_pages` comes from the bdi at open (`file_ra_state_init`):
//!   `VM_READAHEAD_PAGES` (128 KiB) by default; btrfs raises its per-sb
//!   bdi's to at least 4 MiB (`open_ctree`).
//!
//! What the window reads (allocation, charge, the folios added locked, the
//! bio) is the filesystem layer's `filemap_get_pages` /
//! `page_cache_ra_unbounded` (fs/read_write.rs); this module is only the
//! policy, so mm/ needs no file.
//!
//! Left out: the random-read history check of `page_cache_sync_ra`
//! (`page_cache_prev_miss`: a miss far from the previous read that follows
//! a cached run is treated as a stream; here any such miss is a standalone
//! read of the request), the large-folio order ramp of
//! `page_cache_ra_order` (windows are read in the mapping's folio sizes as
//! the write path allocates them), `ractl_max_pages`' use of the device's
//! `io_pages`, `blk_cgroup_congested`, mmap readahead
//! (`filemap_fault`) and `posix_fadvise`/`readahead(2)`.

/// `VM_READAHEAD_PAGES` (include/linux/mm.h): the default maximum window,
/// 128 KiB in 4 KiB pages.
pub const VM_READAHEAD_PAGES: u64 = 32;

/// `struct file_ra_state`: one open file's readahead window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRaState {
    /// `start`: first page of the current window.
    pub start: u64,
    /// `size`: pages in the current window.
    pub size: u64,
    /// `async_size`: the mark sits this many pages before the window's end.
    pub async_size: u64,
    /// `ra_pages`: the maximum window, pages (0: readahead off).
    pub ra_pages: u64,
    /// `prev_pos >> PAGE_SHIFT`: the page of the previous read's end (None
    /// before the first read: `file_ra_state_init` sets `prev_pos` to -1).
    pub prev_index: Option<u64>,
}

impl FileRaState {
    /// `file_ra_state_init()`: the bdi's `ra_pages`, no window yet.
    pub fn new(ra_pages: u64) -> Self {
        FileRaState {
            start: 0,
            size: 0,
            async_size: 0,
            ra_pages,
            prev_index: None,
        }
    }

    /// Where the PG_readahead mark of the current window goes
    /// (`ra->start + ra->size - ra->async_size`), if any.
    pub fn mark(&self) -> Option<u64> {
        (self.size > 0 && self.async_size > 0).then(|| self.start + self.size - self.async_size)
    }
}

/// What to read: pages `[start, end)`, with PG_readahead on `mark`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaWindow {
    pub start: u64,
    pub end: u64,
    pub mark: Option<u64>,
}

/// `get_init_ra_size()`: the first window for a read of `size` pages:
/// the size rounded up to a power of two, times 4 when at most max/32,
/// times 2 when at most max/4, else `max`.
pub fn get_init_ra_size(size: u64, max: u64) -> u64 {
    let newsize = size.max(1).next_power_of_two();
    if newsize <= max / 32 {
        newsize * 4
    } else if newsize <= max / 4 {
        newsize * 2
    } else {
        max
    }
}

/// `get_next_ra_size()`: the window after one of `cur` pages: 4x while
/// under max/16, 2x up to max/2, then `max`.
pub fn get_next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

/// Clips a window at the file's last page (`do_page_cache_ra`: nothing is
/// read past `i_size`), keeping at least the request `[index, req_end)`.
fn clip(w: RaWindow, eof: u64, req_end: u64) -> RaWindow {
    let limit = eof.max(req_end);
    let end = w.end.min(limit).max(w.start);
    RaWindow {
        start: w.start,
        end,
        mark: w.mark.filter(|&m| m < end),
    }
}

/// `page_cache_sync_ra()`: a read of `req_count` pages missed the cache at
/// `index`; `eof` is the file's size in pages. Returns what to read. A
/// start of file, an oversized read or a miss right after the previous
/// read opens a new window (`get_init_ra_size`) with its mark; any other
/// miss reads just the request and leaves the state alone. Readahead off:
/// the request alone.
pub fn page_cache_sync_ra(ra: &mut FileRaState, index: u64, req_count: u64, eof: u64) -> RaWindow {
    let req_end = index + req_count;
    let max = ra.ra_pages;
    let sequential = ra.prev_index.is_some_and(|p| index >= p && index - p <= 1);
    if max == 0 || !(index == 0 || req_count > max || sequential) {
        return RaWindow {
            start: index,
            end: req_end,
            mark: None,
        };
    }
    ra.start = index;
    ra.size = get_init_ra_size(req_count, max);
    ra.async_size = if ra.size > req_count {
        ra.size - req_count
    } else {
        ra.size
    };
    clip(
        RaWindow {
            start: ra.start,
            end: ra.start + ra.size,
            mark: ra.mark(),
        },
        eof,
        req_end,
    )
}

/// `page_cache_async_ra()`: the reader met PG_readahead at `index` (the
/// mark is cleared by the caller). Where expected, the window moves on
/// and grows, all of it asynchronous; a mark met elsewhere (interleaved
/// readers of one file) restarts from the first page not cached
/// (`next_hole`) with the pages from the mark to it as the old window.
pub fn page_cache_async_ra(
    ra: &mut FileRaState,
    index: u64,
    req_count: u64,
    next_hole: u64,
    eof: u64,
) -> Option<RaWindow> {
    let max = ra.ra_pages;
    if max == 0 {
        return None;
    }
    if Some(index) == ra.mark() {
        ra.start += ra.size;
        ra.size = ra.size.max(get_next_ra_size(ra.size, max));
        ra.async_size = ra.size;
    } else {
        if next_hole <= index || next_hole - index > max {
            return None;
        }
        ra.start = next_hole;
        ra.size = get_next_ra_size(next_hole - index + req_count, max);
        ra.async_size = ra.size;
    }
    if ra.start >= eof {
        return None;
    }
    Some(clip(
        RaWindow {
            start: ra.start,
            end: ra.start + ra.size,
            mark: ra.mark(),
        },
        eof,
        0,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequential_reader_ramps_its_window_up_to_ra_pages() {
        // btrfs: 4 MiB (1024 pages); 128 KiB (32-page) reads of a 20 MiB file.
        let mut ra = FileRaState::new(1024);
        let eof = 5120;
        let w = page_cache_sync_ra(&mut ra, 0, 32, eof);
        // 32 pages: at most max/32 -> 4x; the mark right after the request.
        assert_eq!((w.start, w.end, w.mark), (0, 128, Some(32)));
        let mut sizes = vec![w.end - w.start];
        let mut mark = w.mark;
        while let Some(at) = mark {
            let hole = ra.start + ra.size;
            let Some(w) = page_cache_async_ra(&mut ra, at, 32, hole, eof) else {
                break;
            };
            assert_eq!(w.start, ra.start);
            sizes.push(w.end - w.start);
            // All asynchronous: the mark is the window's first page.
            assert!(w.mark.is_none_or(|m| m == w.start));
            mark = w.mark;
        }
        assert_eq!(&sizes[..5], &[128, 256, 512, 1024, 1024]);
        assert_eq!(sizes.iter().sum::<u64>(), eof, "the file, once, to EOF");
    }

    #[test]
    fn a_random_miss_reads_only_the_request() {
        let mut ra = FileRaState::new(32);
        page_cache_sync_ra(&mut ra, 0, 4, 1 << 20);
        ra.prev_index = Some(4);
        let before = ra;
        let w = page_cache_sync_ra(&mut ra, 1000, 4, 1 << 20);
        assert_eq!((w.start, w.end, w.mark), (1000, 1004, None));
        assert_eq!(ra, before, "the state is left alone");
    }

    #[test]
    fn initial_sizes_follow_the_kernel_table() {
        assert_eq!(get_init_ra_size(1, 32), 4);
        assert_eq!(get_init_ra_size(4, 32), 8);
        assert_eq!(get_init_ra_size(16, 32), 32);
        assert_eq!(get_init_ra_size(3, 1024), 16);
        assert_eq!(get_next_ra_size(16, 1024), 64);
        assert_eq!(get_next_ra_size(512, 1024), 1024);
    }
}
