//! Runs `[[actor]]`s: scripted user-space processes whose steps are system
//! calls on the modelled kernel (`mount(2)`, `umount2(2)`, `sync(2)`,
//! `syncfs(2)`, `fsync(2)`, cgroupfs `mkdir`/`rmdir`, dd-like loops, process
//! starts, device reuse). Each instance is one task in its cgroup; a step with
//! `record` has its elapsed time recorded (ms), one with `exec` first pays the
//! machine's process start (fork + exec + dynamic linking, as CPU time) inside
//! the recorded time, as `perf stat -- umount mnt` measures.
//!
//! Simplified: cgroup memory limits of `cgroup_mkdir` are kept but not enforced
//! (no memcg yet); `rmdir` forgets the cgroup (its CPU accounting stays).

use crate::model::mm::memcontrol::{mem_cgroup_css_online, mem_cgroup_rmdir};
use std::rc::Rc;

use super::actor::{ActorConfig, Repeat, Step, StepOp};
use super::world::World;
use crate::model::errno::Errno;
use crate::model::fs::open::{do_truncate, fput};
use crate::model::fs::read_write::{vfs_read, vfs_write, IoFlags};
use crate::model::fs::super_::SuperBlock;
use crate::model::fs::sync::{ksys_sync, sync_filesystem, vfs_fsync};
use crate::model::fs::LocalBoxFuture;
use crate::model::kernel::sched::CgroupId;
use crate::model::kernel::stats::ViolationObjects;
use crate::model::mm::page_writeback::TaskDirty;

/// Why a step failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepError {
    /// The system call returned this errno: counted (`STEP.EBUSY`, and
    /// `RECORD.EBUSY` for a recorded step), and the actor goes on, as a
    /// script that checks the return value would.
    Errno(Errno),
    /// The scenario asked for something that cannot be done (no such
    /// filesystem or file, a model error): ends the actor, reported as a
    /// run error.
    Fatal(String),
}

impl From<String> for StepError {
    fn from(s: String) -> Self {
        StepError::Fatal(s)
    }
}

impl From<Errno> for StepError {
    fn from(e: Errno) -> Self {
        StepError::Errno(e)
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Errno(e) => f.write_str(e.name()),
            StepError::Fatal(s) => f.write_str(s),
        }
    }
}

/// What actors need from the mount lifecycle (provided by the runner, which
/// knows the scenario's filesystems).
pub trait MountOps {
    /// `mount(2)` of filesystem `name`.
    fn mount<'a>(
        &'a self,
        w: &'a Rc<World>,
        name: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), StepError>>;
    /// `umount2(2)` of filesystem `name`, `MNT_DETACH` when `lazy`.
    fn umount<'a>(
        &'a self,
        w: &'a Rc<World>,
        name: &'a str,
        lazy: bool,
    ) -> LocalBoxFuture<'a, Result<(), StepError>>;
    /// Reuse the device of filesystem `name` right away (mount it again
    /// elsewhere, or detach its loop device): EBUSY while held.
    fn reuse_device<'a>(
        &'a self,
        w: &'a Rc<World>,
        name: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), StepError>>;
}

/// Starts every instance of `actor` in `cgroup`.
pub fn spawn_actor(w: &Rc<World>, actor: &ActorConfig, cgroup: CgroupId, ops: Rc<dyn MountOps>) {
    for instance in 0..actor.instances {
        let w2 = w.clone();
        let a = actor.clone();
        let ops = ops.clone();
        let finite = matches!(a.repeat, Repeat::Count(_));
        if finite {
            w.task_started();
        }
        let name = if actor.instances > 1 {
            format!("{}.{instance}", actor.name)
        } else {
            actor.name.clone()
        };
        w.m.sched().spawn(&name, cgroup, 0, async move {
            let sim = w2.m.sim().clone();
            sim.sleep_until(a.start_ns.max(sim.now())).await;
            let mut task = TaskDirty::default();
            let mut round = 0u64;
            'outer: loop {
                if let Repeat::Count(n) = a.repeat {
                    if round >= n {
                        break;
                    }
                }
                round += 1;
                for step in &a.steps {
                    if w2.end_requested.get() {
                        break 'outer;
                    }
                    if let Err(e) =
                        run_step(&w2, &a, (instance, round), step, &mut task, &*ops).await
                    {
                        w2.error(format!(
                            "actor '{}' step at line {}: {e}",
                            a.name, step.line
                        ));
                        break 'outer;
                    }
                }
            }
            if finite {
                w2.task_finished();
            }
        });
    }
}

/// `{instance}` in a path or name becomes the instance number, `{round}`
/// the round of the actor's step list (1, 2, ...).
fn inst(s: &str, (instance, round): (u32, u64)) -> String {
    s.replace("{instance}", &instance.to_string())
        .replace("{round}", &round.to_string())
}

async fn run_step(
    w: &Rc<World>,
    a: &ActorConfig,
    instance: (u32, u64),
    step: &Step,
    task: &mut TaskDirty,
    ops: &dyn MountOps,
) -> Result<(), StepError> {
    let m = &w.m;
    let t0 = m.now();
    if step.exec {
        m.sched().cpu(m.process_start_ns()).await;
    }
    let outcome: Result<(), StepError> = match &step.op {
        StepOp::Mount { filesystem } => ops.mount(w, filesystem).await,
        StepOp::Umount { filesystem, lazy } => ops.umount(w, filesystem, *lazy).await,
        StepOp::ReuseDevice { filesystem } => ops.reuse_device(w, filesystem).await,
        StepOp::Sync => {
            let dirtied = m.mm().vm().nr_dirtied;
            ksys_sync(m).await;
            let sbs: Vec<_> = m.vfs().supers();
            check_synced(w, "sync(2)", &sbs, dirtied);
            Ok(())
        }
        StepOp::Syncfs { filesystem } => {
            let sb = w
                .fs(filesystem)
                .and_then(|f| f.sb.borrow().clone())
                .ok_or_else(|| format!("syncfs: '{filesystem}' is not mounted"))?;
            let dirtied = m.mm().vm().nr_dirtied;
            sync_filesystem(m, &sb).await;
            check_synced(w, "syncfs(2)", std::slice::from_ref(&sb), dirtied);
            Ok(())
        }
        StepOp::Fsync { file } => {
            let f = w.open(&inst(file, instance))?;
            vfs_fsync(m, &f.sb, &f.inode, false).await;
            Ok(())
        }
        StepOp::Sleep { ns } => {
            m.sim().sleep(*ns).await;
            Ok(())
        }
        StepOp::CgroupMkdir {
            name,
            cpus,
            memory_high,
            memory_max,
        } => {
            let name = inst(name, instance);
            let cpus: Option<Vec<usize>> = cpus
                .as_ref()
                .map(|l| l.iter().map(|&c| c as usize).collect());
            // A cgroup made again after rmdir is a new cgroup.
            let unique = format!("{name}#{}", m.now());
            let id = m.sched().add_cgroup(&unique, cpus.as_deref())?;
            mem_cgroup_css_online(m.mm(), id, &unique, *memory_high, *memory_max);
            w.cgroups.borrow_mut().insert(name, id);
            Ok(())
        }
        StepOp::CgroupRmdir { name } => {
            let name = inst(name, instance);
            let mut cgs = w.cgroups.borrow_mut();
            let Some(gone) = cgs.remove(&name) else {
                return Err(format!("cgroup_rmdir: no cgroup '{name}'").into());
            };
            // Leave it: the actor moves back to its own cgroup.
            let own = a
                .cgroup
                .as_ref()
                .and_then(|c| cgs.get(c).copied())
                .unwrap_or(CgroupId::ROOT);
            drop(cgs);
            if let Some(id) = m.sim().current() {
                m.sched().set_cgroup(id, own);
            }
            // The memcg goes offline a grace period later (kill_css).
            mem_cgroup_rmdir(m.mm(), gone);
            Ok(())
        }
        StepOp::CgroupEnter { name } => {
            let name = inst(name, instance);
            let id = w
                .cgroups
                .borrow()
                .get(&name)
                .copied()
                .ok_or_else(|| format!("cgroup_enter: no cgroup '{name}'"))?;
            if let Some(t) = m.sim().current() {
                m.sched().set_cgroup(t, id);
            }
            Ok(())
        }
        StepOp::Write {
            file,
            size,
            bs,
            fsync,
            trunc,
        } => {
            let f = w.open(&inst(file, instance))?;
            if *trunc {
                do_truncate(m, &f).await;
            }
            let bs = (*bs).max(1);
            let mut pos = 0;
            while pos < *size {
                let len = bs.min(*size - pos);
                vfs_write(m, task, &f, pos, len, IoFlags::default())
                    .await
                    .map_err(|e| format!("write: {e:?}"))?;
                pos += len;
            }
            if *fsync {
                vfs_fsync(m, &f.sb, &f.inode, false).await;
            }
            fput(m, &f).await;
            Ok(())
        }
        StepOp::Read { file, size, bs } => {
            let f = w.open(&inst(file, instance))?;
            let bs = (*bs).max(1);
            let mut pos = 0;
            while pos < *size {
                let len = bs.min(*size - pos);
                vfs_read(m, &f, pos, len, IoFlags::default())
                    .await
                    .map_err(|e| format!("read: {e:?}"))?;
                pos += len;
            }
            Ok(())
        }
        StepOp::Exec { cost_ns } => {
            m.sched().cpu(cost_ns.unwrap_or(m.process_start_ns())).await;
            Ok(())
        }
        StepOp::CreateFiles { dir, count, size } => {
            let dir = inst(dir, instance);
            for i in 0..*count {
                let f = w.open(&format!("{}/{i}", dir.trim_end_matches('/')))?;
                if *size > 0 {
                    vfs_write(m, task, &f, 0, *size, IoFlags::default())
                        .await
                        .map_err(|e| format!("create_files: {e:?}"))?;
                }
            }
            Ok(())
        }
    };
    let elapsed = m.now() - t0;
    // An errno outcome is counted, not fatal: `umount` may get EBUSY, a device
    // reuse after a lazy umount may too. Other errors end the actor.
    let outcome = match outcome {
        Err(StepError::Errno(e)) => {
            let (what, e) = (step_name(&step.op), e.name());
            w.count(&format!("{what}.{e}"), 1);
            if let Some(r) = &step.record {
                w.count(&format!("{r}.{e}"), 1);
            }
            Ok(())
        }
        o => o,
    };
    outcome?;
    if let Some(r) = &step.record {
        w.record(r, "ns", elapsed);
        // A recorded sync also goes on the run's timeline (E2: each sync's
        // duration at its start, beside the commits).
        if matches!(step.op, StepOp::Sync) {
            w.timeline.borrow_mut().push((r.clone(), t0, elapsed));
        }
    }
    if step.end_run_after_ns.is_some_and(|t| m.now() >= t) {
        w.end_requested.set(true);
    }
    Ok(())
}

/// Invariant: when nothing was dirtied while a sync ran (NR_DIRTIED did not
/// move), every page of the synced superblocks is clean and no writeback is
/// in flight when it returns: all dirty data was persisted.
fn check_synced(w: &World, what: &str, sbs: &[Rc<SuperBlock>], dirtied_before: u64) {
    let m = &w.m;
    if m.mm().vm().nr_dirtied != dirtied_before {
        return;
    }
    for sb in sbs.iter().filter(|s| s.bdi.can_writeback && s.active()) {
        let (dirty, wb) = sb.inodes.borrow().values().fold((0, 0), |(d, b), i| {
            let map = i.mapping.borrow();
            (d + map.nr_dirty(), b + map.nr_writeback())
        });
        if dirty + wb > 0 {
            m.violation(
                "persisted_after_sync",
                ViolationObjects {
                    superblock: Some(sb.id),
                    superblock_name: Some(sb.name.clone()),
                    fs_type: Some(sb.fs.name().to_string()),
                    ..ViolationObjects::default()
                },
                format!(
                    "persisted after sync: {what} returned with {dirty} dirty and {wb} writeback pages on {} though nothing was dirtied meanwhile",
                    sb.name
                ),
            );
        }
    }
}

/// The step's operation name (`umount`, `reuse_device`...), for counters.
fn step_name(op: &StepOp) -> &'static str {
    match op {
        StepOp::Mount { .. } => "mount",
        StepOp::Umount { lazy: true, .. } => "umount_lazy",
        StepOp::Umount { .. } => "umount",
        StepOp::ReuseDevice { .. } => "reuse_device",
        StepOp::Sync => "sync",
        StepOp::Syncfs { .. } => "syncfs",
        StepOp::Fsync { .. } => "fsync",
        StepOp::Sleep { .. } => "sleep",
        StepOp::CgroupMkdir { .. } => "cgroup_mkdir",
        StepOp::CgroupRmdir { .. } => "cgroup_rmdir",
        StepOp::CgroupEnter { .. } => "cgroup_enter",
        StepOp::Write { .. } => "write",
        StepOp::Read { .. } => "read",
        StepOp::Exec { .. } => "exec",
        StepOp::CreateFiles { .. } => "create_files",
    }
}
