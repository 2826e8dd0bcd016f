//! Truncation at open and the last close: fs/open.c (`handle_truncate` ->
//! `do_truncate`), mm/truncate.c (`truncate_setsize`) and fs/file_table.c
//! (`__fput` -> `->release`).
//!
//! `open(O_TRUNC)` of a regular file (dd without `conv=notrunc`) truncates it
//! to zero under `inode_lock` through the filesystem's `->setattr`
//! ([`Filesystem::setsize_zero`]); the last close calls the filesystem's
//! `->release` ([`Filesystem::release_file`]). btrfs, ext4 and XFS all
//! start writeback at the close of a file that was truncated and written
//! again ("replace by truncate": btrfs `BTRFS_INODE_FLUSH_ON_CLOSE`, ext4
//! `auto_da_alloc`, XFS `XFS_ITRUNCATED`), so that a crash does not leave
//! the file empty.
//!
//! Not here: truncation to a non-zero size, `ftruncate(2)`, the
//! `->setattr` of filesystems that do not model freeing their blocks (only
//! btrfs implements [`Filesystem::setsize_zero`], with
//! [`truncate_setsize_zero`] for its page cache; the scenario checker
//! accepts `trunc` on btrfs files only), and the timestamps the truncate
//! updates.
//!
//! [`Filesystem::setsize_zero`]: crate::model::fs::vfs::Filesystem::setsize_zero
//! [`Filesystem::release_file`]: crate::model::fs::vfs::Filesystem::release_file

use std::rc::Rc;

use sim::Time;

use crate::model::fs::inode::InodeRef;
use crate::model::fs::read_write::File;
use crate::model::fs::super_::truncate_inode_pages_all;
use crate::model::fs::sync::filemap_fdatawait;
use crate::model::fs::vfs::{Machine, SuperBlock};

/// `handle_truncate` -> `do_truncate(dentry, 0, ATTR_MTIME | ATTR_CTIME |
/// ATTR_OPEN)`: `inode_lock` (the inode's `i_rwsem`, for write) around the
/// filesystem's `->setattr` with a size of zero.
pub async fn do_truncate(m: &Rc<Machine>, f: &File) {
    let _inode_lock = f.inode.i_rwsem.down_write().await;
    f.sb.fs.setsize_zero(m, &f.sb, &f.inode).await;
}

/// `fput` of the last reference: the filesystem's `->release`.
pub async fn fput(m: &Rc<Machine>, f: &File) {
    f.sb.fs.release_file(m, &f.sb, &f.inode).await;
}

/// `truncate_setsize(inode, 0)`: `i_size` to zero, then
/// `truncate_pagecache` -> `truncate_inode_pages`: every page of the file
/// leaves the page cache, dirty ones discarded, those under writeback
/// waited for first (the kernel waits folio by folio under the folio lock;
/// here for all of them, then drops the whole mapping at once). Pays the
/// filesystem's per-page cost of dropping a page (`evict_page_ns`).
pub async fn truncate_setsize_zero(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef) {
    inode.st.borrow_mut().i_size = 0;
    loop {
        filemap_fdatawait(m, inode).await;
        if inode.mapping.borrow().nr_writeback() == 0 {
            break;
        }
    }
    let d = truncate_inode_pages_all(m, sb, inode);
    let freed = (-d.cached).max(0) as Time;
    if freed > 0 {
        m.sched().cpu(freed * sb.fs.costs().evict_page_ns).await;
    }
}
