//! The runner's side of mounting: filesystems marked `mounted` are mounted
//! when the run starts (before any workload task), and actors' mount / umount
//! / device-reuse steps call the model's mount lifecycle
//! (`model::fs::namespace`). Not kernel code.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::boot::{filesystem_type, Booted};
use crate::experiment::scenario::FilesystemConfig;
use crate::model::block::BlockDevice;
use crate::model::fs::namespace::{self, flags::MNT_DETACH};
use crate::model::fs::LocalBoxFuture;
use crate::model::mm::backing_dev::BdiSettings;
use crate::workload::actor_exec::{MountOps, StepError};
use crate::workload::world::World;

/// Mount operations over the scenario's filesystems.
pub struct RunnerMounts {
    configs: Vec<FilesystemConfig>,
    devices: BTreeMap<String, BlockDevice>,
    bdi_settings: BTreeMap<String, BdiSettings>,
}

impl RunnerMounts {
    /// The operations for a booted run.
    pub fn new(b: &Booted) -> RunnerMounts {
        RunnerMounts {
            configs: b.fs_configs.clone(),
            devices: b.devices.clone(),
            bdi_settings: b.bdi_settings.clone(),
        }
    }

    /// Mounts every filesystem marked `mounted`, running the simulation until
    /// they are (the mount syscalls take microseconds of simulated time).
    pub fn mount_at_boot(self: &Rc<Self>, w: &Rc<World>) -> Result<(), String> {
        let sim = w.m.sim().clone();
        let names: Vec<String> = self
            .configs
            .iter()
            .filter(|c| c.mounted)
            .map(|c| c.name.clone())
            .collect();
        let (me, w2) = (self.clone(), w.clone());
        let h = sim.spawn("mount(boot)", async move {
            for n in &names {
                me.do_mount(&w2, n)
                    .await
                    .map_err(|e| format!("mounting '{n}' at boot: {e}"))?;
            }
            Ok::<(), String>(())
        });
        sim.run_while(u64::MAX, || !h.is_finished())
            .map_err(|d| format!("the model deadlocked while mounting:\n{d}"))?;
        h.result()
            .unwrap_or_else(|| Err("boot mounts did not finish".into()))
    }

    async fn do_mount(&self, w: &Rc<World>, name: &str) -> Result<(), StepError> {
        let c = self
            .configs
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| format!("no filesystem '{name}'"))?;
        let entry = w
            .fs(name)
            .ok_or_else(|| format!("no filesystem '{name}'"))?;
        let fs = filesystem_type(c);
        let dev = c.device.as_ref().and_then(|d| self.devices.get(d)).cloned();
        let settings = c
            .device
            .as_ref()
            .and_then(|d| self.bdi_settings.get(d))
            .cloned()
            .unwrap_or_default();
        let mnt = namespace::do_mount(&w.m, &c.mountpoint, fs, dev, settings).await?;
        *entry.sb.borrow_mut() = Some(mnt.sb.clone());
        Ok(())
    }
}

impl MountOps for RunnerMounts {
    fn mount<'a>(
        &'a self,
        w: &'a Rc<World>,
        name: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), StepError>> {
        Box::pin(self.do_mount(w, name))
    }

    fn umount<'a>(
        &'a self,
        w: &'a Rc<World>,
        name: &'a str,
        lazy: bool,
    ) -> LocalBoxFuture<'a, Result<(), StepError>> {
        Box::pin(async move {
            let entry = w
                .fs(name)
                .ok_or_else(|| format!("no filesystem '{name}'"))?;
            let flags = if lazy { MNT_DETACH } else { 0 };
            namespace::umount(&w.m, &entry.mountpoint, flags).await?;
            // Gone from the namespace (a lazy umount's superblock may live on
            // until its grace period or last user).
            if let Some(sb) = entry.sb.borrow_mut().take() {
                w.forget_files_of(&sb);
            }
            Ok(())
        })
    }

    fn reuse_device<'a>(
        &'a self,
        w: &'a Rc<World>,
        name: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), StepError>> {
        Box::pin(async move {
            let dev = self
                .configs
                .iter()
                .find(|c| c.name == name)
                .and_then(|c| c.device.as_ref())
                .and_then(|d| self.devices.get(d))
                .ok_or_else(|| format!("reuse_device: filesystem '{name}' has no device"))?;
            Ok(namespace::reuse_device(&w.m, dev)?)
        })
    }
}
