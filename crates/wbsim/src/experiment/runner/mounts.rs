//! The runner's side of mounting: filesystems marked `mounted` are mounted
//! before the run starts, and actors' mount / umount / device-reuse steps
//! call into the model's mount lifecycle. Not kernel code.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::boot::{filesystem_type, Booted};
use crate::experiment::scenario::FilesystemConfig;
use crate::model::block::BlockDevice;
use crate::model::fs::super_::sget;
use crate::model::fs::LocalBoxFuture;
use crate::model::mm::backing_dev::BdiSettings;
use crate::workload::actor_exec::MountOps;
use crate::workload::world::World;

/// Mount operations over the scenario's filesystems.
pub struct RunnerMounts {
    configs: Vec<FilesystemConfig>,
    devices: BTreeMap<String, BlockDevice>,
    bdi_settings: BTreeMap<String, BdiSettings>,
}

impl RunnerMounts {
    /// Mounts every filesystem marked `mounted` (before time starts).
    pub fn new(b: &Booted) -> RunnerMounts {
        let r = RunnerMounts {
            configs: b.fs_configs.clone(),
            devices: b.devices.clone(),
            bdi_settings: b.bdi_settings.clone(),
        };
        for c in &r.configs {
            if c.mounted {
                if let Err(e) = r.mount_now(&b.world, &c.name) {
                    b.world.error(format!("mounting '{}' at boot: {e}", c.name));
                }
            }
        }
        r
    }

    fn mount_now(&self, w: &Rc<World>, name: &str) -> Result<(), String> {
        let c = self
            .configs
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| format!("no filesystem '{name}'"))?;
        let entry = w
            .fs(name)
            .ok_or_else(|| format!("no filesystem '{name}'"))?;
        if entry.sb.borrow().is_some() {
            return Err("EBUSY".into());
        }
        let fs = filesystem_type(c.fs_type)?;
        let dev = c.device.as_ref().and_then(|d| self.devices.get(d)).cloned();
        let settings = c
            .device
            .as_ref()
            .and_then(|d| self.bdi_settings.get(d))
            .cloned()
            .unwrap_or_default();
        let sb = sget(&w.m, &c.mountpoint, fs, dev, settings);
        *entry.sb.borrow_mut() = Some(sb);
        Ok(())
    }
}

impl MountOps for RunnerMounts {
    fn mount<'a>(
        &'a self,
        w: &'a Rc<World>,
        name: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move { self.mount_now(w, name) })
    }

    fn umount<'a>(
        &'a self,
        _w: &'a Rc<World>,
        name: &'a str,
        _lazy: bool,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            Err(format!(
                "umount of '{name}': the mount lifecycle is not modelled in this build"
            ))
        })
    }

    fn reuse_device<'a>(
        &'a self,
        _w: &'a Rc<World>,
        name: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            Err(format!(
                "reuse_device of '{name}': the mount lifecycle is not modelled in this build"
            ))
        })
    }
}
