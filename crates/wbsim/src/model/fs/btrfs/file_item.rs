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
//! Not yet modelled (later stages): `btrfs_lookup_bio_sums` per read bio
//! with the `csum_lookup` switch (commit root under `commit_root_sem`),
//! `btrfs_del_csums` run by delayed refs, inserting csums at ordered-extent
//! completion.

use crate::model::fs::btrfs::ctree::{
    btrfs_search_slot, BtrfsPath, BtrfsRoot, BTRFS_ITEM_SIZE, BTRFS_LEAF_DATA_SIZE,
};
use crate::model::fs::btrfs::extent_io::{BtrfsKey, LeafItem};

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
