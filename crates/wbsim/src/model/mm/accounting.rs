//! Page-state counter updates: what `folio_account_dirtied`,
//! `folio_clear_dirty_for_io`, `folio_start_writeback` and `folio_end_writeback`
//! (`__folio_end_writeback`, `wb_writeout_inc`) do to NR_FILE_DIRTY,
//! NR_WRITEBACK, NR_DIRTIED, NR_WRITTEN, NR_FILE_PAGES and the wb's
//! WB_RECLAIMABLE / WB_WRITEBACK / WB_DIRTIED / WB_WRITTEN, in one place.

use std::rc::Rc;

use crate::model::machine::Machine;
use crate::model::mm::backing_dev::Wb;
use crate::model::mm::filemap::Delta;

fn add(v: u64, d: i64, name: &str, m: &Machine) -> u64 {
    let r = v as i64 + d;
    if r < 0 {
        m.violation(format!("no negative counter: {name} would become {r}"));
        0
    } else {
        r as u64
    }
}

/// Applies a page-cache change to the global counters and to `wb`'s.
pub fn account_delta(m: &Rc<Machine>, wb: Option<&Rc<Wb>>, d: &Delta) {
    m.vm.borrow_mut().apply(d);
    if let Some(wb) = wb {
        let mut st = wb.stat.borrow_mut();
        st.reclaimable = add(st.reclaimable, d.dirty, "WB_RECLAIMABLE", m);
        st.writeback = add(st.writeback, d.writeback, "WB_WRITEBACK", m);
        st.dirtied += d.dirtied;
        st.written += d.written;
    }
    if d.written > 0 {
        if let Some(wb) = wb {
            m.gdom.borrow_mut().writeout_inc(wb.id, d.written, m.now());
        }
    }
}
