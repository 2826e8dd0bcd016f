//! The metadata side of a data overwrite (fs/btrfs/inode.c): btrfs never
//! overwrites data in place, so a rewrite of a file range gets a new extent
//! and the old one is freed through a delayed ref.
//!
//! `btrfs_finish_ordered_overwrite` models `btrfs_finish_one_ordered` for
//! one whole extent rewritten: the new extent's checksums inserted
//! (`add_pending_csums` -> `btrfs_csum_file_blocks`), the file extent item
//! updated in the fs tree (`insert_reserved_file_extent` after
//! `btrfs_drop_extents`, a COW search), the new `EXTENT_ITEM` inserted in
//! the extent tree (done at once here; the kernel queues an add ref), and
//! the old extent's reference dropped (`btrfs_free_extent` ->
//! a delayed ref drop, run at commit: extent_tree.rs).
//!
//! `btrfs_truncate_to_zero` models `btrfs_truncate_inode_items` of a
//! truncation to size zero (`open(O_TRUNC)`): each file extent item deleted
//! and each data extent's reference dropped through a delayed ref.
//!
//! Left out: the data I/O itself and the page cache (not wired to the
//! filesystem's write path yet), partial-extent overwrites, truncation to
//! a non-zero size, the inode item's update and the orphan item of a
//! truncate, extent maps beyond the generation kept with each extent.

use crate::model::fs::btrfs::ctree::{btrfs_search_slot, BtrfsPath, BTRFS_ITEM_SIZE};
use crate::model::fs::btrfs::delayed_ref::DelayedDataRefDrop;
use crate::model::fs::btrfs::disk_io::{
    BtrfsFsInfo, DataExtent, BTRFS_DATA_EXTENT_ITEM_SIZE, BTRFS_EXTENT_DATA_KEY,
    BTRFS_EXTENT_ITEM_KEY, BTRFS_FILE_EXTENT_ITEM_SIZE,
};
use crate::model::fs::btrfs::extent_io::{BtrfsKey, LeafItem};
use crate::model::fs::btrfs::file_item::btrfs_csum_file_blocks;
use crate::model::fs::btrfs::fs::{BtrfsTransHandle, TransKind};

/// `btrfs_finish_one_ordered` for the first write of file bytes
/// `[offset, offset + len)` of (`subvol`, `ino`): a new extent of the
/// running transaction (joining or starting one), its checksums inserted,
/// its file extent item in the fs tree and its extent item in the extent
/// tree, each with a COW search. Returns the new extent.
pub async fn btrfs_finish_ordered_new(
    fs: &BtrfsFsInfo,
    subvol: u64,
    ino: u64,
    offset: u64,
    len: u64,
) -> DataExtent {
    let trans = fs
        .transactions()
        .start_handle(fs.ctx().sched().sim(), TransKind::Join)
        .await;
    let new = DataExtent {
        bytenr: fs.alloc_data(len),
        len,
        subvol,
        ino,
        offset,
        generation: trans.transid,
    };
    btrfs_csum_file_blocks(&trans, fs.csum_root(), new.bytenr, new.len).await;
    if let Some(root) = fs.fs_root(subvol) {
        let item = LeafItem {
            key: BtrfsKey::new(ino, BTRFS_EXTENT_DATA_KEY, offset),
            size: BTRFS_FILE_EXTENT_ITEM_SIZE,
        };
        let mut path = BtrfsPath::new();
        let ins = (BTRFS_FILE_EXTENT_ITEM_SIZE + BTRFS_ITEM_SIZE) as i32;
        btrfs_search_slot(Some(&trans), root, &item.key, &mut path, ins, true).await;
        path.insert_item(item);
    }
    insert_data_extent_item(fs, &trans, &new).await;
    fs.add_extent(new);
    new
}

/// Rewrites the extent of (`subvol`, `ino`) at file `offset` into a new
/// extent of the running transaction (joining or starting one). Returns the
/// new extent, or None if the file has no extent there.
pub async fn btrfs_finish_ordered_overwrite(
    fs: &BtrfsFsInfo,
    subvol: u64,
    ino: u64,
    offset: u64,
) -> Option<DataExtent> {
    let old = fs
        .extents()
        .into_iter()
        .find(|e| e.subvol == subvol && e.ino == ino && e.offset == offset)?;
    let trans = fs
        .transactions()
        .start_handle(fs.ctx().sched().sim(), TransKind::Join)
        .await;
    let new = DataExtent {
        bytenr: fs.alloc_data(old.len),
        generation: trans.transid,
        ..old
    };
    btrfs_csum_file_blocks(&trans, fs.csum_root(), new.bytenr, new.len).await;
    // The file extent item now points at the new extent.
    if let Some(root) = fs.fs_root(subvol) {
        let key = BtrfsKey::new(ino, BTRFS_EXTENT_DATA_KEY, offset);
        let mut path = BtrfsPath::new();
        btrfs_search_slot(Some(&trans), root, &key, &mut path, 0, true).await;
        if let Some(leaf) = path.node(0) {
            leaf.mark_dirty();
        }
    }
    // The new extent item.
    insert_data_extent_item(fs, &trans, &new).await;
    fs.replace_extent(new);
    fs.delayed_refs().add_drop(DelayedDataRefDrop {
        bytenr: old.bytenr,
        num_bytes: old.len,
        transid: trans.transid,
    });
    Some(new)
}

/// `btrfs_truncate` of (`subvol`, `ino`) to size zero ->
/// `btrfs_truncate_inode_items`: in the running transaction (joining or
/// starting one), for each data extent of the file a COW search of the fs
/// tree (`ins_len` -1) deletes its file extent item, and the extent's
/// reference is dropped (`btrfs_free_extent` -> a delayed ref drop; its run
/// at commit deletes the extent item and the checksums, extent_tree.rs).
/// Returns how many extents were dropped.
pub async fn btrfs_truncate_to_zero(fs: &BtrfsFsInfo, subvol: u64, ino: u64) -> usize {
    let gone = fs.remove_extents_of(subvol, ino);
    if gone.is_empty() {
        return 0;
    }
    let trans = fs
        .transactions()
        .start_handle(fs.ctx().sched().sim(), TransKind::Start)
        .await;
    for x in &gone {
        if let Some(root) = fs.fs_root(subvol) {
            let key = BtrfsKey::new(ino, BTRFS_EXTENT_DATA_KEY, x.offset);
            let mut path = BtrfsPath::new();
            if btrfs_search_slot(Some(&trans), root, &key, &mut path, -1, true).await {
                let leaf = path.node(0).expect("a search ends at a leaf");
                leaf.del_items(path.slot(0), 1);
                leaf.mark_dirty();
            }
        }
        fs.delayed_refs().add_drop(DelayedDataRefDrop {
            bytenr: x.bytenr,
            num_bytes: x.len,
            transid: trans.transid,
        });
    }
    gone.len()
}

/// The extent item of a new data extent, inserted into the extent tree with
/// a COW search (`alloc_reserved_file_extent` through the delayed ref of
/// the new extent; here at once).
async fn insert_data_extent_item(fs: &BtrfsFsInfo, trans: &BtrfsTransHandle, new: &DataExtent) {
    let item = LeafItem {
        key: BtrfsKey::new(new.bytenr, BTRFS_EXTENT_ITEM_KEY, new.len),
        size: BTRFS_DATA_EXTENT_ITEM_SIZE,
    };
    let mut path = BtrfsPath::new();
    let ins = (BTRFS_DATA_EXTENT_ITEM_SIZE + BTRFS_ITEM_SIZE) as i32;
    btrfs_search_slot(
        Some(trans),
        fs.extent_root(),
        &item.key,
        &mut path,
        ins,
        true,
    )
    .await;
    path.insert_item(item);
}
