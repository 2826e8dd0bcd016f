//! Running delayed refs (fs/btrfs/extent-tree.c): `btrfs_run_delayed_refs`
//! -> `run_delayed_data_ref` -> `__btrfs_free_extent` for each queued drop.
//!
//! Modelled: a data extent has one reference (no reflinks or snapshots), so
//! a drop is its last: the `EXTENT_ITEM` is deleted from the extent tree (a
//! COW search with `ins_len` -1) and `do_free_extent_accounting` deletes its
//! checksums (`btrfs_del_csums`, file_item.rs). Left out: reference counts
//! above one, tree block refs, free-space accounting and block group
//! updates, the CPU of the rbtree walk besides the searches.

use crate::model::fs::btrfs::ctree::{btrfs_search_slot, BtrfsPath};
use crate::model::fs::btrfs::disk_io::{BtrfsFsInfo, BTRFS_EXTENT_ITEM_KEY};
use crate::model::fs::btrfs::extent_io::BtrfsKey;
use crate::model::fs::btrfs::file_item::btrfs_del_csums;
use crate::model::fs::btrfs::fs::BtrfsTransHandle;

/// `btrfs_run_delayed_refs(trans, U64_MAX)`: run every drop queued by
/// transactions up to `trans`. Returns how many ran.
pub async fn btrfs_run_delayed_refs(trans: &BtrfsTransHandle, fs: &BtrfsFsInfo) -> usize {
    let drops = fs.delayed_refs().take_upto(trans.transid);
    for d in &drops {
        // __btrfs_free_extent: find and delete the extent item.
        let key = BtrfsKey::new(d.bytenr, BTRFS_EXTENT_ITEM_KEY, d.num_bytes);
        let mut path = BtrfsPath::new();
        let found =
            btrfs_search_slot(Some(trans), fs.extent_root(), &key, &mut path, -1, true).await;
        if found {
            let leaf = path.node(0).expect("a search ends at a leaf");
            leaf.del_items(path.slot(0), 1);
            leaf.mark_dirty();
        }
        drop(path);
        // do_free_extent_accounting -> btrfs_del_csums.
        btrfs_del_csums(trans, fs.csum_root(), d.bytenr, d.num_bytes).await;
    }
    drops.len()
}
