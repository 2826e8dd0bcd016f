//! Booting a machine, in start_kernel's order (init/main.c): the kernel
//! services, mm, the VFS ([`Machine::assemble`] in vfs.rs), then the
//! work items that mm/ runs but whose bodies live in fs/: the kernel's
//! `cleanup_offline_cgwbs_work` (mm/backing-dev.c) calls fs-writeback.c's
//! `cleanup_offline_cgwb`, which mm/ may not name here (mm/ never imports
//! fs/), so fs/ hands it the function at boot.

use std::rc::Rc;

use sim::Sim;

use crate::model::fs::fs_writeback::cleanup_offline_cgwb;
use crate::model::fs::vfs::Machine;
use crate::model::init::MachineConfig;
use crate::model::kernel::workqueue::Work;
use crate::model::mm::backing_dev::cleanup_offline_cgwbs_workfn;

impl Machine {
    /// Boots a machine in `sim`.
    pub fn new(sim: &Sim, cfg: MachineConfig) -> Result<Rc<Self>, String> {
        let m = Machine::assemble(sim, cfg)?;
        // cleanup_offline_cgwbs_work: mm/'s loop over killed cgwbs calling
        // fs/'s cleanup_offline_cgwb.
        let wm = Rc::downgrade(&m);
        m.mm()
            .set_cgwb_cleanup_work(Work::new("cleanup_offline_cgwbs", move || {
                let wm = wm.clone();
                async move {
                    if let Some(m) = wm.upgrade() {
                        let m2 = m.clone();
                        cleanup_offline_cgwbs_workfn(m.mm(), move |wb| {
                            let m3 = m2.clone();
                            async move { cleanup_offline_cgwb(&m3, wb).await }
                        })
                        .await;
                    }
                }
            }));
        Ok(m)
    }
}
