//! `struct bio` as the model submits it: an operation, a byte range and the
//! request flags that change how the block layer treats it.
//!
//! Models `include/linux/blk_types.h` (`enum req_op`: `REQ_OP_READ`,
//! `REQ_OP_WRITE`, `REQ_OP_FLUSH`; flags `REQ_SYNC`, `REQ_FUA`,
//! `REQ_PREFLUSH`, and the `REQ_IDLE`, `REQ_META` and `REQ_BACKGROUND` hints
//! that writeback throttling reads) and the trace "rwbs" string of
//! `blk_fill_rwbs()` (`kernel/trace/blktrace.c`). Simplified: a bio is one
//! contiguous byte range with no pages or segments; discard, write-zeroes,
//! readahead and priority flags are left out.

/// 512-byte sectors, as the block layer counts them (`SECTOR_SHIFT`).
pub const SECTOR_BYTES: u64 = 512;

/// `enum req_op`, restricted to the operations writeback studies need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BioOp {
    /// `REQ_OP_READ`.
    Read,
    /// `REQ_OP_WRITE`.
    Write,
    /// `REQ_OP_FLUSH`: an empty cache flush (what `blkdev_issue_flush()`
    /// sends: an empty bio with `REQ_PREFLUSH`).
    Flush,
}

/// The request flags modelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BioFlags {
    /// `REQ_FUA`: the write is on stable media when it completes.
    pub fua: bool,
    /// `REQ_SYNC`: someone waits for it (accounting and trace only here).
    pub sync: bool,
    /// `REQ_PREFLUSH`: flush the device cache before the data is written.
    pub preflush: bool,
    /// `REQ_IDLE`: nothing more follows soon (O_DIRECT writes and log
    /// writes set it with `REQ_SYNC`; blk-wbt does not throttle those).
    pub idle: bool,
    /// `REQ_META`: filesystem metadata (blk-wbt gives it the full depth).
    pub meta: bool,
    /// `REQ_BACKGROUND`: background or periodic writeback
    /// (`wbc_to_write_flags` for `for_background` / `for_kupdate`).
    pub background: bool,
}

impl BioFlags {
    /// No flag: a plain write, as `WB_SYNC_NONE` writeback sends it.
    pub const NONE: BioFlags = BioFlags {
        fua: false,
        sync: false,
        preflush: false,
        idle: false,
        meta: false,
        background: false,
    };
    /// `REQ_META`: an asynchronous metadata write (a filesystem's buffer
    /// written back in place, XFS's delwri buffers).
    pub const META: BioFlags = BioFlags {
        meta: true,
        ..BioFlags::NONE
    };
    /// `REQ_SYNC | REQ_META`: metadata someone waits for (superblocks, tree
    /// blocks written by a commit).
    pub const SYNC_META: BioFlags = BioFlags {
        sync: true,
        ..BioFlags::META
    };
    /// `REQ_SYNC | REQ_IDLE`: an O_DIRECT write (`iomap_dio_bio_opflags`).
    pub const DIRECT_WRITE: BioFlags = BioFlags {
        sync: true,
        idle: true,
        ..BioFlags::NONE
    };
}

/// One bio: what to do to which byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bio {
    pub op: BioOp,
    /// Start of the range on the device, bytes (`bi_iter.bi_sector` * 512).
    pub offset_bytes: u64,
    /// Length, bytes (`bi_iter.bi_size`); 0 for a flush.
    pub len_bytes: u64,
    pub flags: BioFlags,
    /// Size of the physically contiguous runs of memory the bio's pages
    /// are, bytes: what its bio_vecs become as scatter-gather segments
    /// (`bio_split_rw_at()` counts them against `max_segments`, a driver
    /// maps one descriptor per segment). [`BIO_SEG_BYTES_DEFAULT`] (one
    /// page) for memory that is not known to be contiguous: O_DIRECT user
    /// buffers, small folios, vmalloc'd buffers; a folio's size for a bio of
    /// large folios ([`Bio::with_seg_bytes`]).
    pub seg_bytes: u64,
}

/// A page: the segment size of a bio whose pages are not physically
/// contiguous with each other (`PAGE_SIZE`).
pub const BIO_SEG_BYTES_DEFAULT: u64 = 4096;

impl Bio {
    /// A plain read.
    pub fn read(offset_bytes: u64, len_bytes: u64) -> Self {
        Bio {
            op: BioOp::Read,
            offset_bytes,
            len_bytes,
            flags: BioFlags::default(),
            seg_bytes: BIO_SEG_BYTES_DEFAULT,
        }
    }

    /// A plain (async, non-FUA) write, as writeback with `WB_SYNC_NONE` sends.
    pub fn write(offset_bytes: u64, len_bytes: u64) -> Self {
        Bio {
            op: BioOp::Write,
            offset_bytes,
            len_bytes,
            flags: BioFlags::default(),
            seg_bytes: BIO_SEG_BYTES_DEFAULT,
        }
    }

    /// An empty flush (`REQ_OP_FLUSH`, `REQ_PREFLUSH`).
    pub fn flush() -> Self {
        Bio {
            op: BioOp::Flush,
            offset_bytes: 0,
            len_bytes: 0,
            flags: BioFlags {
                preflush: true,
                ..BioFlags::default()
            },
            seg_bytes: BIO_SEG_BYTES_DEFAULT,
        }
    }

    /// The same bio with these flags.
    pub fn with_flags(mut self, flags: BioFlags) -> Self {
        self.flags = flags;
        self
    }

    /// The same bio made of physically contiguous runs of `seg_bytes`
    /// (e.g. the average folio size of the folios it carries; at least a
    /// sector).
    pub fn with_seg_bytes(mut self, seg_bytes: u64) -> Self {
        self.seg_bytes = seg_bytes.max(SECTOR_BYTES);
        self
    }

    /// First sector.
    pub fn sector(&self) -> u64 {
        self.offset_bytes / SECTOR_BYTES
    }

    /// One past the last byte.
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes.saturating_add(self.len_bytes)
    }
}

/// The "rwbs" string of the block tracepoints (`blk_fill_rwbs()`): `F` for a
/// preflush, then `R`/`W` (or `F` alone for an empty flush), then `F` for FUA
/// and `S` for sync.
pub fn rwbs(op: BioOp, flags: BioFlags) -> String {
    let mut s = String::with_capacity(4);
    match op {
        BioOp::Flush => s.push('F'),
        BioOp::Read | BioOp::Write => {
            if flags.preflush {
                s.push('F');
            }
            s.push(if op == BioOp::Read { 'R' } else { 'W' });
            if flags.fua {
                s.push('F');
            }
        }
    }
    if flags.sync {
        s.push('S');
    }
    if flags.meta {
        s.push('M');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_matches_blktrace_letters() {
        assert_eq!(rwbs(BioOp::Read, BioFlags::default()), "R");
        let f = BioFlags {
            fua: true,
            sync: true,
            preflush: true,
            ..BioFlags::default()
        };
        assert_eq!(rwbs(BioOp::Write, f), "FWFS");
        let meta = BioFlags {
            sync: true,
            meta: true,
            ..BioFlags::default()
        };
        assert_eq!(rwbs(BioOp::Write, meta), "WSM");
        assert_eq!(rwbs(BioOp::Flush, Bio::flush().flags), "F");
    }
}
