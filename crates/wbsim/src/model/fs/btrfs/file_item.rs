//! Data checksums in the csum tree (fs/btrfs/file-item.c), first stage: the
//! items' layout and the lookup of one range's checksums in the current csum
//! root with node read locks (`btrfs_lookup_csum` as `search_csum_tree`
//! calls it for a read bio).
//!
//! Layout: one `EXTENT_CSUM` item (key `BTRFS_EXTENT_CSUM_OBJECTID`,
//! `BTRFS_EXTENT_CSUM_KEY`, disk bytenr of its first sector) holds the 4-byte
//! crc32c of each 4 KiB sector of a contiguous disk range, at most
//! `MAX_CSUM_ITEMS` of them; `btrfs_csum_file_blocks` extends the previous
//! item when the new range follows it on disk, so contiguous data gives
//! full items.
//!
//! `btrfs_lookup_bio_sums()` looks up a read bio's checksums one csum item
//! at a time (`search_csum_tree`), either in the current root with node
//! read locks, or, with the `csum_lookup = commit_root_for_old` switch and a
//! bio whose extents are all older than the newest transaction, in the
//! commit root holding `commit_root_sem` for read across the whole lookup,
//! with no node locks (`search_commit_root`, `skip_locking`).
//! `btrfs_del_csums()` (run when the last reference of a data extent is
//! dropped) COW-searches the csum tree with `ins_len` -1 per item.
//! `btrfs_csum_file_blocks()` inserts a new extent's csums with COW
//! searches (one new item per `MAX_CSUM_ITEMS`; extending the previous item
//! is left out).

use crate::model::fs::btrfs::ctree::{
    btrfs_search_slot, BtrfsPath, BtrfsRoot, BTRFS_ITEM_SIZE, BTRFS_LEAF_DATA_SIZE,
};
use crate::model::fs::btrfs::extent_io::{BtrfsKey, LeafItem};
use crate::model::fs::btrfs::fs::BtrfsTransHandle;
use crate::model::kernel::locking::RwSemaphore;
use crate::model::policy::CsumLookup;

/// `BTRFS_EXTENT_CSUM_OBJECTID`: -10 as u64.
pub const BTRFS_EXTENT_CSUM_OBJECTID: u64 = -10i64 as u64;
/// `BTRFS_EXTENT_CSUM_KEY`: 128.
pub const BTRFS_EXTENT_CSUM_KEY: u8 = 128;
/// `BTRFS_CSUM_TREE_OBJECTID`: 7.
pub const BTRFS_CSUM_TREE_OBJECTID: u64 = 7;
/// `fs_info->csum_size` of crc32c, the default checksum, bytes: 4.
pub const BTRFS_CSUM_SIZE: u32 = 4;
/// `sectorsize`, bytes: 4 KiB (the page size on x86-64, mkfs default).
pub const BTRFS_SECTORSIZE: u64 = 4 << 10;
/// `MAX_CSUM_ITEMS(fs_info, csum_size)`: checksums per csum item,
/// (BTRFS_LEAF_DATA_SIZE - 2 * sizeof(struct btrfs_item)) / csum_size - 1
/// = 4057 at 16 KiB nodes, i.e. 15.8 MiB of data per item.
pub const MAX_CSUM_ITEMS: u64 =
    ((BTRFS_LEAF_DATA_SIZE - 2 * BTRFS_ITEM_SIZE) / BTRFS_CSUM_SIZE - 1) as u64;

/// The key of the csum item starting at disk byte `bytenr`.
pub fn csum_key(bytenr: u64) -> BtrfsKey {
    BtrfsKey::new(BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, bytenr)
}

/// The csum items of data extents at the given disk ranges (bytenr, bytes),
/// sorted by bytenr, as `btrfs_csum_file_blocks` leaves them when they were
/// written in disk order: an item extends while the next range follows on
/// disk, up to [`MAX_CSUM_ITEMS`] checksums.
pub fn btrfs_csum_items(ranges: &[(u64, u64)]) -> Vec<LeafItem> {
    let mut out: Vec<LeafItem> = Vec::new();
    // (start bytenr, sectors) of the item being extended.
    let mut cur: Option<(u64, u64)> = None;
    let flush = |c: (u64, u64), out: &mut Vec<LeafItem>| {
        out.push(LeafItem {
            key: csum_key(c.0),
            size: (c.1 * BTRFS_CSUM_SIZE as u64) as u32,
        });
    };
    for &(bytenr, len) in ranges {
        let mut at = bytenr;
        let mut left = len.div_ceil(BTRFS_SECTORSIZE);
        while left > 0 {
            let (start, n) = match cur {
                Some((s, n)) if s + n * BTRFS_SECTORSIZE == at && n < MAX_CSUM_ITEMS => (s, n),
                Some(c) => {
                    flush(c, &mut out);
                    (at, 0)
                }
                None => (at, 0),
            };
            let take = left.min(MAX_CSUM_ITEMS - n);
            cur = Some((start, n + take));
            at += take * BTRFS_SECTORSIZE;
            left -= take;
        }
    }
    if let Some(c) = cur {
        flush(c, &mut out);
    }
    out
}

/// `btrfs_lookup_csum()` on the current csum root, read-only: a read search
/// for the sector at `bytenr` (node read locks, lock coupling), then the
/// previous item if the search landed past it. Returns whether a csum item
/// covers the sector. The path is released on return.
pub async fn btrfs_lookup_csum(root: &BtrfsRoot, bytenr: u64) -> bool {
    let mut path = BtrfsPath::new();
    let found = btrfs_search_slot(None, root, &csum_key(bytenr), &mut path, 0, false).await;
    if found {
        return true;
    }
    let leaf = path.node(0).expect("a search ends at a leaf");
    let slot = path.slot(0);
    if slot == 0 {
        return false;
    }
    let it = leaf.item(slot - 1).expect("slot in range");
    let sectors = it.size as u64 / BTRFS_CSUM_SIZE as u64;
    it.key.objectid == BTRFS_EXTENT_CSUM_OBJECTID
        && it.key.ty == BTRFS_EXTENT_CSUM_KEY
        && bytenr < it.key.offset + sectors * BTRFS_SECTORSIZE
}

/// The csum item covering `bytenr` at the path's leaf (slot, or slot - 1
/// when the search landed past it): (slot, item) if it covers the sector.
fn covering_item(path: &BtrfsPath, found: bool, bytenr: u64) -> Option<(usize, LeafItem)> {
    let leaf = path.node(0)?;
    let slot = if found {
        path.slot(0)
    } else {
        path.slot(0).checked_sub(1)?
    };
    let it = leaf.item(slot)?;
    let end = it.key.offset + (it.size / BTRFS_CSUM_SIZE) as u64 * BTRFS_SECTORSIZE;
    (it.key.objectid == BTRFS_EXTENT_CSUM_OBJECTID
        && it.key.ty == BTRFS_EXTENT_CSUM_KEY
        && it.key.offset <= bytenr
        && bytenr < end)
        .then_some((slot, it))
}

/// `btrfs_lookup_bio_sums()` of a read bio of `len` bytes at disk `bytenr`
/// whose extents' largest generation is `max_generation`, with the newest
/// transaction `generation`: one `search_csum_tree` per csum item covered.
/// Returns the sectors whose csum was found.
pub async fn btrfs_lookup_bio_sums(
    csum_root: &BtrfsRoot,
    commit_root_sem: &RwSemaphore,
    policy: CsumLookup,
    bytenr: u64,
    len: u64,
    max_generation: u64,
    generation: u64,
) -> u64 {
    let commit_root = policy == CsumLookup::CommitRootForOld && max_generation < generation;
    // Held across the whole lookup (`down_read(&fs_info->commit_root_sem)`).
    let _sem = if commit_root {
        Some(commit_root_sem.down_read().await)
    } else {
        None
    };
    let mut found_sectors = 0;
    let mut at = bytenr;
    let end = bytenr + len;
    while at < end {
        let mut path = BtrfsPath::new();
        path.search_commit_root = commit_root;
        path.skip_locking = commit_root;
        let found = btrfs_search_slot(None, csum_root, &csum_key(at), &mut path, 0, false).await;
        match covering_item(&path, found, at) {
            Some((_, it)) => {
                let item_end =
                    it.key.offset + (it.size / BTRFS_CSUM_SIZE) as u64 * BTRFS_SECTORSIZE;
                let upto = item_end.min(end);
                found_sectors += (upto - at) / BTRFS_SECTORSIZE;
                at = upto;
            }
            // No csum (a hole or nodatasum): skip a sector.
            None => at += BTRFS_SECTORSIZE,
        }
    }
    found_sectors
}

/// `btrfs_del_csums()`: delete the checksums of disk range [bytenr,
/// bytenr + len), from its end backwards, one COW search (`ins_len` -1) per
/// item touched: an item inside the range is deleted, one overlapping its
/// end or start is truncated (`btrfs_truncate_item`), one spanning it is
/// split (`btrfs_split_item`: truncated, the tail inserted as a new item).
pub async fn btrfs_del_csums(
    trans: &BtrfsTransHandle,
    csum_root: &BtrfsRoot,
    bytenr: u64,
    len: u64,
) {
    let mut end = bytenr + len;
    while end > bytenr {
        let mut path = BtrfsPath::new();
        let last = end - BTRFS_SECTORSIZE;
        let found =
            btrfs_search_slot(Some(trans), csum_root, &csum_key(last), &mut path, -1, true).await;
        let Some((slot, it)) = covering_item(&path, found, last) else {
            // Nothing covers the last sector: look below it.
            end -= BTRFS_SECTORSIZE;
            continue;
        };
        let leaf = path.node(0).expect("a search ends at a leaf");
        let start = it.key.offset;
        let item_end = start + (it.size / BTRFS_CSUM_SIZE) as u64 * BTRFS_SECTORSIZE;
        let sectors = |a: u64, b: u64| ((b - a) / BTRFS_SECTORSIZE * BTRFS_CSUM_SIZE as u64) as u32;
        if start >= bytenr && item_end <= end {
            leaf.del_items(slot, 1);
        } else if start < bytenr && item_end <= end {
            leaf.set_item_size(slot, sectors(start, bytenr));
        } else if start >= bytenr {
            // Front truncation: the item now starts at `end`.
            leaf.set_item(
                slot,
                LeafItem {
                    key: csum_key(end),
                    size: sectors(end, item_end),
                },
            );
        } else {
            leaf.set_item_size(slot, sectors(start, bytenr));
            leaf.insert_item(
                slot + 1,
                LeafItem {
                    key: csum_key(end),
                    size: sectors(end, item_end),
                },
            );
        }
        leaf.mark_dirty();
        end = start.max(bytenr);
    }
}

/// `btrfs_csum_file_blocks()`: insert the checksums of a new data extent
/// [bytenr, bytenr + len), one COW search (`ins_len` = item size) and item
/// per [`MAX_CSUM_ITEMS`] sectors.
pub async fn btrfs_csum_file_blocks(
    trans: &BtrfsTransHandle,
    csum_root: &BtrfsRoot,
    bytenr: u64,
    len: u64,
) {
    for it in btrfs_csum_items(&[(bytenr, len)]) {
        let mut path = BtrfsPath::new();
        btrfs_search_slot(
            Some(trans),
            csum_root,
            &it.key,
            &mut path,
            (it.size + BTRFS_ITEM_SIZE) as i32,
            true,
        )
        .await;
        path.insert_item(it);
    }
}
