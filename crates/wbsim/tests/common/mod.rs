//! Helpers shared by the experiment and behaviour tests: load a built-in
//! scenario, run a variant (quick or full) and insist on clean invariants,
//! read a statistic with a message naming the run.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use wbsim::experiment::results::Results;
use wbsim::experiment::runner::{run_one, RunOptions};
use wbsim::experiment::scenario::{load, parse_str, ResolvedVariant, Scenario};

/// The built-in scenario `scenarios/NAME.toml`.
pub fn builtin(name: &str) -> Scenario {
    let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `variant` of `s` with the scenario's seed, in its `--quick` form when
/// `quick`, and checks the invariants held.
pub fn run_variant(s: &Scenario, variant: &str, quick: bool) -> Results {
    let v = s.variant(variant).unwrap_or_else(|e| panic!("{e}"));
    run_resolved(s, &v, quick)
}

/// Runs the resolved variant `v` (one sweep point, say) of `s` with the
/// scenario's seed, in its `--quick` form when `quick`, and checks the
/// invariants held.
pub fn run_resolved(s: &Scenario, v: &ResolvedVariant, quick: bool) -> Results {
    let opts = RunOptions {
        quick,
        ..RunOptions::default()
    };
    let r = run_one(s, v, s.seed, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        r.invariants.violations.is_empty(),
        "{} [{}]: {:?}",
        s.origin(),
        v.label,
        r.invariants.violations
    );
    r
}

/// Parses scenario text and runs its single (default) variant.
pub fn run_text(text: &str) -> Results {
    let sc = parse_str(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    run_variant(&sc, "default", false)
}

/// Statistic `s` of metric `m`, or a panic naming the run.
pub fn stat(r: &Results, m: &str, s: &str) -> f64 {
    r.stat(m, s)
        .unwrap_or_else(|| panic!("{} [{}]: no metric {m} {s}", r.scenario, r.variant))
}

/// Runs the `wbsim` binary with `args` from the crate's directory (so
/// `../../scenarios/...` and `tests/fixtures/...` paths work).
pub fn wbsim(args: &[&str]) -> Output {
    wbsim_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

/// Runs the `wbsim` binary with `args` in `dir`.
pub fn wbsim_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("wbsim: {e}"))
}

/// What a run printed: stdout, then stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The setup of the model-level tests: a machine of `cfg` with one
/// filesystem `fs` mounted as "data" on a device "nvme0n1" of profile
/// `prof`, with the default bdi settings.
pub fn mounted(
    sim: &sim::Sim,
    cfg: wbsim::model::init::MachineConfig,
    prof: wbsim::model::block::DeviceProfile,
    fs: std::rc::Rc<dyn wbsim::model::fs::vfs::Filesystem>,
) -> (
    std::rc::Rc<wbsim::model::machine::Machine>,
    std::rc::Rc<wbsim::model::fs::vfs::SuperBlock>,
) {
    let m = wbsim::model::machine::Machine::new(sim, cfg).unwrap();
    let dev = wbsim::model::block::BlockDevice::new(sim, "nvme0n1", prof);
    let sb = wbsim::model::fs::super_::sget(
        &m,
        "data",
        fs,
        Some(dev),
        wbsim::model::mm::backing_dev::BdiSettings::default(),
    );
    (m, sb)
}

/// A machine of `cpus` CPUs and `memory` bytes with a btrfs on an `nvme-dc`
/// device mounted at /mnt/b: `subvolumes` subvolumes `subvolN`, each holding
/// one 20 MiB file laid out beforehand (E2's readers' files).
pub fn btrfs_with_preloaded_files(
    sim: &sim::Sim,
    cpus: usize,
    memory: u64,
    subvolumes: u64,
) -> (
    std::rc::Rc<wbsim::model::machine::Machine>,
    std::rc::Rc<wbsim::model::fs::vfs::SuperBlock>,
) {
    use wbsim::model::fs::btrfs::{Btrfs, BtrfsOptions};
    let m = wbsim::model::machine::Machine::new(
        sim,
        wbsim::model::init::MachineConfig::new(cpus, memory),
    )
    .unwrap();
    let dev = wbsim::model::block::BlockDevice::new(
        sim,
        "nvme0n1",
        wbsim::model::block::DeviceProfile::nvme_dc(),
    );
    let fs = Btrfs::with_options(BtrfsOptions {
        subvolumes,
        preload_files: 1,
        preload_size: 20 << 20,
        ..BtrfsOptions::default()
    });
    let sb = wbsim::model::fs::super_::sget(
        &m,
        "/mnt/b",
        std::rc::Rc::new(fs),
        Some(dev),
        wbsim::model::mm::backing_dev::BdiSettings::default(),
    );
    (m, sb)
}

/// Reads `f` from its start to `len` bytes in `bs`-byte read(2) calls, as
/// `dd bs=BS` or a reader looping over its file does.
pub async fn read_sequentially(
    m: &std::rc::Rc<wbsim::model::machine::Machine>,
    f: &wbsim::model::fs::read_write::File,
    len: u64,
    bs: u64,
) {
    use wbsim::model::fs::read_write::{vfs_read, IoFlags};
    let mut pos = 0;
    while pos < len {
        vfs_read(m, f, pos, bs, IoFlags::default()).await.unwrap();
        pos += bs;
    }
}

/// Writes `f` from its start to `len` bytes in 1 MiB write(2) calls, then
/// fsyncs it. Returns the simulated time of the writes alone and of the
/// whole, fsync included.
pub async fn write_then_fsync(
    m: std::rc::Rc<wbsim::model::machine::Machine>,
    f: wbsim::model::fs::read_write::File,
    len: u64,
) -> (sim::Time, sim::Time) {
    use wbsim::model::fs::read_write::{vfs_write, IoFlags};
    const MIB: u64 = 1 << 20;
    let t0 = m.now();
    let mut task = wbsim::model::mm::page_writeback::TaskDirty::default();
    let mut pos = 0;
    while pos < len {
        vfs_write(&m, &mut task, &f, pos, MIB, IoFlags::default())
            .await
            .unwrap();
        pos += MIB;
    }
    let writes = m.now() - t0;
    wbsim::model::fs::sync::vfs_fsync(&m, &f.sb, &f.inode, false).await;
    (writes, m.now() - t0)
}

/// A scenario on a 2-CPU, 8 GiB machine with one xfs, "data" at
/// /mnt/data, on the loop device `loop0` of `profile`; `device_keys` and
/// `bdi_keys` are extra `[[device]]` and `[device.bdi]` lines, `fio` the
/// job text.
pub fn xfs_on_loop0(profile: &str, device_keys: &str, bdi_keys: &str, fio: &str) -> String {
    format!(
        r#"
[scenario]
name = "xfs-on-loop0"
duration = "60s"

[machine]
cpus = 2
memory = "8g"

[[device]]
name = "loop0"
profile = "{profile}"
{device_keys}

[device.bdi]
{bdi_keys}

[[filesystem]]
name = "data"
type = "xfs"
device = "loop0"
mountpoint = "/mnt/data"

[[job]]
filesystem = "data"
fio = """
{fio}
"""
"#
    )
}
