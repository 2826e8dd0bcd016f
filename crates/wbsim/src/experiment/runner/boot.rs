//! Boots the modelled machine a scenario variant describes: the kernel
//! (CPUs, RCU flavour, HZ, vm.dirty_* sysctls, policies), the block devices,
//! the cgroups, and the filesystems mounted at the start; and turns the
//! `[[job]]` tables into fio job sets. Not kernel code.

use crate::model::mm::memcontrol::mem_cgroup_css_online;
use std::collections::BTreeMap;
use std::rc::Rc;

use sim::Sim;

use crate::experiment::scenario::{
    parse_size, FilesystemConfig, FsOption, FsType, ResolvedVariant, Scenario,
};
use crate::model::block::BlockDevice;
use crate::model::fs::block_dev::{BlockDev, DEFAULT_BDEV_CAPACITY};
use crate::model::fs::btrfs::{Btrfs, BtrfsOptions};
use crate::model::fs::ext4::Ext4;
use crate::model::fs::tmpfs::Tmpfs;
use crate::model::fs::xfs::{Xfs, XfsOptions};
use crate::model::fs::Filesystem;
use crate::model::kernel::sched::CgroupId;
use crate::model::machine::Machine;
use crate::model::mm::backing_dev::BdiSettings;
use crate::model::mm::vmstat::PAGE_SIZE;
use crate::workload::fio;
use crate::workload::fio_exec::JobSet;
use crate::workload::world::{FsEntry, World};

/// A booted run, before anything is spawned.
pub struct Booted {
    pub world: Rc<World>,
    /// Devices by scenario name.
    pub devices: BTreeMap<String, BlockDevice>,
    /// The fio job sets, in `[[job]]` order.
    pub job_sets: Vec<JobSet>,
    /// The cgroup each actor starts in, in `[[actor]]` order.
    pub actor_cgroups: Vec<CgroupId>,
    /// The filesystem configurations, in scenario order.
    pub fs_configs: Vec<FilesystemConfig>,
    /// bdi settings per device.
    pub bdi_settings: BTreeMap<String, BdiSettings>,
}

/// The model of filesystem type `t`.
pub fn filesystem_type(c: &FilesystemConfig) -> Rc<dyn Filesystem> {
    match c.fs_type {
        FsType::Tmpfs => Rc::new(Tmpfs),
        FsType::Ext4 => Rc::new(match size_option(c, "size") {
            Some(b) => Ext4::with_size(b),
            None => Ext4::default(),
        }),
        FsType::Xfs => Rc::new(Xfs::with_options(xfs_options(c))),
        FsType::Btrfs => Rc::new(Btrfs::with_options(btrfs_options(c))),
        FsType::Bdev => Rc::new(BlockDev::new(
            size_option(c, "capacity").unwrap_or(DEFAULT_BDEV_CAPACITY),
        )),
    }
}

/// A size option (`"64k"` or bytes), validated by the scenario reader.
fn size_option(c: &FilesystemConfig, key: &str) -> Option<u64> {
    match c.options.get(key)? {
        FsOption::Int(i) => u64::try_from(*i).ok(),
        FsOption::Str(s) => parse_size(s).ok(),
        _ => None,
    }
}

/// The xfs options of a `[[filesystem]]` (`agcount`, `agsize`,
/// `allocsize`, `logbsize`, `logsize`; `inode64` is the only allocator
/// modelled), the
/// mkfs.xfs and mount defaults for those not given.
fn xfs_options(c: &FilesystemConfig) -> XfsOptions {
    let mut o = XfsOptions::default();
    if let Some(n) = c.option_int("agcount") {
        o.geo.agcount = u32::try_from(n).unwrap_or(o.geo.agcount);
    }
    if let Some(b) = size_option(c, "agsize") {
        o.geo.agblocks = b / PAGE_SIZE;
    }
    if let Some(b) = size_option(c, "allocsize") {
        o.allocsize_pages = Some((b / PAGE_SIZE).max(1));
    }
    if let Some(b) = size_option(c, "logbsize") {
        o.logbsize = b;
    }
    if let Some(b) = size_option(c, "logsize") {
        o.log_bytes = Some(b);
    }
    o
}

/// The btrfs options of a `[[filesystem]]`: `commit` (seconds),
/// `subvolumes`, `preload_files` (per subvolume), `preload_size`; the mount
/// defaults for those not given.
fn btrfs_options(c: &FilesystemConfig) -> BtrfsOptions {
    let mut o = BtrfsOptions::default();
    if let Some(n) = c.option_int("commit") {
        o.commit_interval = u64::try_from(n).unwrap_or(30) * sim::SEC;
    }
    if let Some(n) = c.option_int("subvolumes") {
        o.subvolumes = u64::try_from(n).unwrap_or(0);
    }
    if let Some(n) = c.option_int("preload_files") {
        o.preload_files = u64::try_from(n).unwrap_or(0);
    }
    if let Some(b) = size_option(c, "preload_size") {
        o.preload_size = b;
    }
    o
}

/// Boots the machine of `scenario` under `variant`.
pub fn boot(sim: &Sim, scenario: &Scenario, variant: &ResolvedVariant) -> Result<Booted, String> {
    let m = Machine::new(sim, variant.machine.clone())?;

    let mut devices = BTreeMap::new();
    let mut bdi_settings = BTreeMap::new();
    for d in &scenario.devices {
        let dev = BlockDevice::new(sim, &d.name, d.params.clone());
        dev.attach(m.sched());
        devices.insert(d.name.clone(), dev);
        bdi_settings.insert(d.name.clone(), d.bdi);
    }

    let mut cgroups = BTreeMap::new();
    for c in &scenario.cgroups {
        let cpus: Option<Vec<usize>> = c
            .cpus
            .as_ref()
            .map(|l| l.iter().map(|&n| n as usize).collect());
        let id = m.sched().add_cgroup(&c.name, cpus.as_deref())?;
        mem_cgroup_css_online(m.mm(), id, &c.name, c.memory_high, c.memory_max);
        cgroups.insert(c.name.clone(), id);
    }
    let cg_of = |name: &Option<String>| -> CgroupId {
        name.as_ref()
            .and_then(|n| cgroups.get(n).copied())
            .unwrap_or(CgroupId::ROOT)
    };

    let entries = scenario
        .filesystems
        .iter()
        .map(|f| FsEntry {
            name: f.name.clone(),
            mountpoint: f.mountpoint.clone(),
            sb: Default::default(),
        })
        .collect();
    let world = World::new(m.clone(), entries);
    *world.cgroups.borrow_mut() = cgroups.clone();

    let mut job_sets = Vec::new();
    for j in &scenario.jobs {
        let jf = fio::parse_str_at(&j.fio.text, &j.fio.origin, j.fio.line_offset)
            .map_err(|e| e.to_string())?;
        let root = match &j.filesystem {
            Some(n) => scenario
                .filesystem(n)
                .map(|f| f.mountpoint.clone())
                .ok_or_else(|| format!("[[job]] at line {}: no filesystem '{n}'", j.line))?,
            None => "/".to_string(),
        };
        if !j.runs_in(&variant.name) {
            continue;
        }
        job_sets.push(JobSet {
            jobs: jf.jobs,
            root,
            cgroup: cg_of(&j.cgroup),
            start_ns: j.start_ns,
            aggregate: false,
        });
    }
    let actor_cgroups = scenario.actors.iter().map(|a| cg_of(&a.cgroup)).collect();
    Ok(Booted {
        world,
        devices,
        job_sets,
        actor_cgroups,
        fs_configs: scenario.filesystems.clone(),
        bdi_settings,
    })
}
