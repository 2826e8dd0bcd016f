//! From the deserialized file ([`super::raw`]) to a validated [`Scenario`]:
//! one reader per section, each applying defaults, units, ranges, unique
//! names and references. Sections that set a model type go through their
//! key table ([`super::keys`]). Not kernel code.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;

use toml::Spanned;

use super::actor::{
    cpu_list, key_error, list, mkdir_name, parse_step, valid_metric_name, ActorConfig, Repeat,
    StepCtx,
};
use super::device::read_device;
use super::error::{ErrorKind, ScenarioError, SourceMap};
use super::keys::{apply_entries, check_name, entries, opt, read_section};
use super::machine::{machine_defaults, MachineConfig, MACHINE, SYSCTL};
use super::policy::POLICIES;
use super::raw::{RawFilesystem, RawJob, RawScenarioFile, RawSection, RawSweep, SpannedTable};
use super::value::{as_bool, as_choice, as_duration, as_int, as_size, as_u32, KeyError};
use super::variant::{
    apply_sweep, override_keys, set_override, SweepConfig, VariantConfig, DEFAULT_VARIANT,
};
use super::{
    CgroupConfig, DeviceConfig, FilesystemConfig, FioSource, FsOption, FsType, JobConfig,
    MeasureConfig, Scenario,
};

type R<T> = Result<T, ScenarioError>;

/// Fails if `name` was seen before in this kind of section.
fn unique(
    src: &SourceMap,
    seen: &mut BTreeMap<String, u32>,
    name: &Spanned<String>,
    section: &str,
) -> R<()> {
    let line = src.line(name.span().start);
    if let Some(first) = seen.insert(name.get_ref().clone(), line) {
        return Err(src.error(
            &name.span(),
            Some("name"),
            ErrorKind::Conflict,
            format!(
                "{section} name '{}' is already used at line {first}",
                name.get_ref()
            ),
        ));
    }
    Ok(())
}
/// Validates the whole file: one reader per section, in the order their
/// references need.
pub(crate) fn build(src: SourceMap) -> R<Scenario> {
    let raw: RawScenarioFile = toml::from_str(src.text()).map_err(|e| src.from_toml(&e))?;
    let h = read_header(&src, &raw)?;
    let machine = read_machine(&src, &raw)?;
    let devices = read_devices(&src, &raw, &machine)?;
    let filesystems = read_filesystems(&src, &raw, &devices)?;
    let cgroups = read_cgroups(&src, &raw, &machine)?;
    let variants = read_variants(&src, &raw, &machine)?;
    let variant_names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    let refs = Refs {
        src: &src,
        duration_ns: h.duration_ns,
        filesystems: &filesystems,
        cgroups: &cgroups,
    };
    let jobs = read_jobs(&refs, &raw, &variant_names)?;
    let actors = read_actors(&refs, &raw, &machine)?;
    let measure = read_measure(&refs, &raw)?;
    let sweep = match &raw.sweep {
        Some(s) => Some(read_sweep(&src, s.get_ref(), &variant_names)?),
        None => None,
    };
    let mut variants = variants;
    apply_sweep(&src, &mut variants, sweep.as_ref())?;
    let scenario = Scenario {
        name: h.name,
        description: h.description,
        duration_ns: h.duration_ns,
        repeat: h.repeat,
        seed: h.seed,
        quick_duration_ns: h.quick_duration_ns,
        quick_repeat: h.quick_repeat,
        machine,
        devices,
        filesystems,
        cgroups,
        jobs,
        actors,
        variants,
        measure,
        sweep,
        source: src,
    };
    // Every variant at every sweep point must resolve.
    for v in scenario.variant_names() {
        for p in scenario.sweep_points() {
            scenario.resolve(v, p)?;
        }
    }
    Ok(scenario)
}

/// `[scenario]`, read.
struct Header {
    name: String,
    description: String,
    duration_ns: u64,
    repeat: u32,
    seed: u64,
    quick_duration_ns: u64,
    quick_repeat: u32,
}

/// `[scenario]`.
fn read_header(src: &SourceMap, raw: &RawScenarioFile) -> R<Header> {
    let Some(header) = &raw.scenario else {
        return Err(src.error(
            &(0..0),
            Some("scenario"),
            ErrorKind::MissingKey,
            "missing section [scenario] (with at least name and duration)",
        ));
    };
    let h = header.get_ref();
    let w = "[scenario]";
    let name = h.name.get_ref().clone();
    if name.trim().is_empty() {
        return Err(src.error(
            &h.name.span(),
            Some("name"),
            ErrorKind::InvalidValue,
            "'name' in [scenario] is empty",
        ));
    }
    let duration_ns = opt(src, &Some(h.duration.clone()), "duration", w, as_duration)?.unwrap_or(0);
    if duration_ns == 0 {
        return Err(src.error(
            &h.duration.span(),
            Some("duration"),
            ErrorKind::OutOfRange,
            "'duration' in [scenario] must be greater than 0",
        ));
    }
    let repeat = opt(src, &h.repeat, "repeat", w, |v| as_u32(v, 1, 1_000_000))?.unwrap_or(1);
    let seed = opt(src, &h.seed, "seed", w, |v| as_int(v, 0, i64::MAX as u64))?.unwrap_or(1);
    let quick_duration_ns = opt(src, &h.quick_duration, "quick_duration", w, as_duration)?
        .unwrap_or(duration_ns)
        .clamp(1, duration_ns);
    let quick_repeat = opt(src, &h.quick_repeat, "quick_repeat", w, |v| {
        as_u32(v, 1, 1_000_000)
    })?
    .unwrap_or(repeat)
    .min(repeat);
    let description = h
        .description
        .as_ref()
        .map(|d| d.get_ref().clone())
        .unwrap_or_default();
    Ok(Header {
        name,
        description,
        duration_ns,
        repeat,
        seed,
        quick_duration_ns,
        quick_repeat,
    })
}

/// `[machine]` and `[sysctl]`, through their key tables, on the model's
/// defaults.
fn read_machine(src: &SourceMap, raw: &RawScenarioFile) -> R<MachineConfig> {
    let Some(machine_raw) = &raw.machine else {
        return Err(src.error(
            &(0..0),
            Some("machine"),
            ErrorKind::MissingKey,
            "missing section [machine] (with at least cpus and memory)",
        ));
    };
    let mut machine = machine_defaults();
    read_section(
        src,
        &MACHINE,
        MACHINE.section,
        &mut machine,
        machine_raw.get_ref(),
        &machine_raw.span(),
    )?;
    if let Some(t) = &raw.sysctl {
        read_section(src, &SYSCTL, SYSCTL.section, &mut machine.dirty, t, &(0..0))?;
    }
    Ok(machine)
}

/// `[[device]]` with `[device.bdi]`.
fn read_devices(
    src: &SourceMap,
    raw: &RawScenarioFile,
    machine: &MachineConfig,
) -> R<Vec<DeviceConfig>> {
    let mut seen = BTreeMap::new();
    let mut devices = Vec::new();
    for d in &raw.device {
        let dev = read_device(src, d)?;
        if let Some(c) = dev.params.completion_cpu.filter(|&c| c >= machine.cpus) {
            let at = d
                .get_ref()
                .get("completion_cpu")
                .map_or(d.span(), |v| v.span());
            return Err(src.error(
                &at,
                Some("completion_cpu"),
                ErrorKind::OutOfRange,
                format!(
                    "[[device]] '{}': completion_cpu {c}, but the machine has CPUs 0-{}",
                    dev.name,
                    machine.cpus.saturating_sub(1)
                ),
            ));
        }
        let name = d.get_ref().get("name").map_or(d.span(), |v| v.span());
        unique(
            src,
            &mut seen,
            &Spanned::new(name, dev.name.clone()),
            "[[device]]",
        )?;
        devices.push(dev);
    }
    Ok(devices)
}

/// `[[filesystem]]`.
fn read_filesystems(
    src: &SourceMap,
    raw: &RawScenarioFile,
    devices: &[DeviceConfig],
) -> R<Vec<FilesystemConfig>> {
    let mut seen = BTreeMap::new();
    let mut seen_mp: BTreeMap<String, u32> = BTreeMap::new();
    let mut used_dev: BTreeMap<String, String> = BTreeMap::new();
    let mut filesystems = Vec::new();
    for f in &raw.filesystem {
        let r = f.get_ref();
        unique(src, &mut seen, &r.name, "[[filesystem]]")?;
        let fname = check_name(src, &r.name, "[[filesystem]]")?;
        let w = format!("[[filesystem]] '{fname}'");
        let fs_type = as_choice(
            &toml::Value::String(r.fs_type.get_ref().clone()),
            FsType::ALL,
        )
        .map_err(|e| key_error(src, &r.fs_type.span(), "type", &w, e))?;
        let device = fs_device(src, f, &w, fs_type, devices, &mut used_dev)?;
        let mountpoint = match &r.mountpoint {
            Some(m) => {
                let mp = m.get_ref().trim_end_matches('/').to_string();
                if !m.get_ref().starts_with('/') || mp.is_empty() {
                    return Err(src.error(&m.span(), Some("mountpoint"), ErrorKind::InvalidValue, format!("'mountpoint' in {w} must be an absolute path other than /, such as \"/mnt/{fname}\"")));
                }
                mp
            }
            None => format!("/mnt/{fname}"),
        };
        let line = src.line(f.span().start);
        if let Some(first) = seen_mp.insert(mountpoint.clone(), line) {
            let span = r.mountpoint.as_ref().map_or(f.span(), |m| m.span());
            return Err(src.error(&span, Some("mountpoint"), ErrorKind::Conflict, format!("mountpoint '{mountpoint}' of {w} is already used by the filesystem at line {first}")));
        }
        let options = fs_options(src, r.options.as_ref(), &w, fs_type)?;
        let mounted = opt(src, &r.mounted, "mounted", &w, as_bool)?.unwrap_or(true);
        filesystems.push(FilesystemConfig {
            name: fname,
            fs_type,
            device,
            mountpoint,
            options,
            mounted,
            line,
        });
    }
    Ok(filesystems)
}

/// The `device` of a `[[filesystem]]`: none for tmpfs, else an existing
/// `[[device]]` no other filesystem holds.
fn fs_device(
    src: &SourceMap,
    f: &Spanned<RawFilesystem>,
    w: &str,
    fs_type: FsType,
    devices: &[DeviceConfig],
    used_dev: &mut BTreeMap<String, String>,
) -> R<Option<String>> {
    let r = f.get_ref();
    let fname = r.name.get_ref();
    Ok(match (&r.device, fs_type) {
        (Some(d), FsType::Tmpfs) => {
            return Err(src.error(
                &d.span(),
                Some("device"),
                ErrorKind::InvalidValue,
                format!("'device' in {w}: tmpfs has no device; remove the key"),
            ));
        }
        (None, FsType::Tmpfs) => None,
        (None, _) => {
            return Err(src.error(
                &f.span(),
                Some("device"),
                ErrorKind::MissingKey,
                format!(
                    "missing key 'device' in {w} (a {} filesystem needs a [[device]])",
                    fs_type.name()
                ),
            ));
        }
        (Some(d), _) => {
            let dn = d.get_ref();
            if !devices.iter().any(|x: &DeviceConfig| &x.name == dn) {
                return Err(src.error(
                    &d.span(),
                    Some("device"),
                    ErrorKind::UnknownReference,
                    format!(
                        "'device' in {w} names device '{dn}', but no [[device]] has that name ({})",
                        list(devices.iter().map(|x| x.name.as_str()))
                    ),
                ));
            }
            if let Some(other) = used_dev.insert(dn.clone(), fname.clone()) {
                return Err(src.error(
                    &d.span(),
                    Some("device"),
                    ErrorKind::Conflict,
                    format!("device '{dn}' already holds filesystem '{other}'; give each filesystem its own [[device]]"),
                ));
            }
            Some(dn.clone())
        }
    })
}

/// The `options = { ... }` of a `[[filesystem]]`: keys its type knows,
/// counts checked.
fn fs_options(
    src: &SourceMap,
    raw: Option<&SpannedTable>,
    w: &str,
    fs_type: FsType,
) -> R<BTreeMap<String, FsOption>> {
    let mut options = BTreeMap::new();
    for (k, v) in raw.into_iter().flatten() {
        let key = k.get_ref().as_str();
        let known = fs_type.known_options();
        if !known.contains(&key) {
            return Err(src.error(
                &k.span(),
                Some(key),
                ErrorKind::UnknownKey,
                format!(
                    "option '{key}' unknown for {} in {w} (expected one of: {})",
                    fs_type.name(),
                    known.join(", ")
                ),
            ));
        }
        let opt_w = format!("{w} options");
        let val = match v.get_ref() {
            toml::Value::Boolean(b) => FsOption::Bool(*b),
            toml::Value::Integer(i) => FsOption::Int(*i),
            toml::Value::Float(x) => FsOption::Float(*x),
            toml::Value::String(s) => FsOption::Str(s.clone()),
            other => {
                return Err(key_error(
                    src,
                    &v.span(),
                    key,
                    &opt_w,
                    KeyError::invalid(format!(
                        "expected a number, string or boolean, found {}",
                        super::value::type_name(other)
                    )),
                ));
            }
        };
        if matches!(
            key,
            "agcount" | "nr_wb_ctx" | "commit" | "subvolumes" | "nr_inodes" | "preload_files"
        ) {
            as_int(v.get_ref(), 1, u64::from(u32::MAX))
                .map_err(|e| key_error(src, &v.span(), key, &opt_w, e))?;
        }
        if key == "preload_size" {
            as_size(v.get_ref())
                .map(|_| ())
                .map_err(|e| key_error(src, &v.span(), key, &opt_w, e))?;
        }
        if matches!(fs_type, FsType::Xfs) {
            xfs_option(key, v.get_ref()).map_err(|e| key_error(src, &v.span(), key, &opt_w, e))?;
        }
        if key == "capacity" || (key == "size" && matches!(fs_type, FsType::Ext4)) {
            match as_size(v.get_ref()) {
                Ok(b) if b >= 1 << 20 => {}
                Ok(b) => {
                    return Err(key_error(
                        src,
                        &v.span(),
                        key,
                        &opt_w,
                        KeyError::range(format!("{key} {b} bytes: at least 1m")),
                    ))
                }
                Err(e) => return Err(key_error(src, &v.span(), key, &opt_w, e)),
            }
        }
        options.insert(key.to_string(), val);
    }
    Ok(options)
}

/// The xfs options with a constrained value (xfs(5), mkfs.xfs(8)):
/// `agsize` a multiple of the 4 KiB block from 16 MiB to 1 TiB
/// (XFS_MIN_AG_BYTES, XFS_MAX_AG_BYTES), `allocsize` a power of two from
/// 4 KiB to 1 GiB, `logbsize` one of 16k, 32k, 64k, 128k, 256k, `logsize`
/// (`mkfs.xfs -l size=`) a multiple of 4 KiB from 2 MiB (about the minimum
/// log the kernel accepts for the default geometry: `xfs_db -c logres`
/// reports minlogsize 259,968 x 8 bytes) to 2 GiB (`XFS_MAX_LOG_BYTES`),
/// `inode64` true (the `inode32` allocator is not modelled).
fn xfs_option(key: &str, v: &toml::Value) -> Result<(), KeyError> {
    match key {
        "agsize" => {
            let b = as_size(v)?;
            if b % 4096 != 0 || !((16u64 << 20)..=(1u64 << 40)).contains(&b) {
                return Err(KeyError::range(format!(
                    "agsize {b} bytes: must be a multiple of 4k from 16m to 1t"
                )));
            }
        }
        "allocsize" => {
            let b = as_size(v)?;
            if !b.is_power_of_two() || !(4096..=(1u64 << 30)).contains(&b) {
                return Err(KeyError::range(format!(
                    "allocsize {b} bytes: must be a power of two from 4k to 1g"
                )));
            }
        }
        "logbsize" => {
            let b = as_size(v)?;
            if !b.is_power_of_two() || !((16u64 << 10)..=(256u64 << 10)).contains(&b) {
                return Err(KeyError::range(format!(
                    "logbsize {b} bytes: must be one of 16k, 32k, 64k, 128k, 256k"
                )));
            }
        }
        "logsize" => {
            let b = as_size(v)?;
            if b % 4096 != 0 || !((2u64 << 20)..=(2u64 << 30)).contains(&b) {
                return Err(KeyError::range(format!(
                    "logsize {b} bytes: must be a multiple of 4k from 2m to 2g"
                )));
            }
        }
        "inode64" if !as_bool(v)? => {
            return Err(KeyError::invalid(
                "inode64 = false (the inode32 allocator) is not modelled",
            ));
        }
        _ => {}
    }
    Ok(())
}

/// `[[cgroup]]`.
fn read_cgroups(
    src: &SourceMap,
    raw: &RawScenarioFile,
    machine: &MachineConfig,
) -> R<Vec<CgroupConfig>> {
    let mut seen = BTreeMap::new();
    let mut cgroups = Vec::new();
    for c in &raw.cgroup {
        let r = c.get_ref();
        unique(src, &mut seen, &r.name, "[[cgroup]]")?;
        let cname = check_name(src, &r.name, "[[cgroup]]")?;
        let w = format!("[[cgroup]] '{cname}'");
        let limit = |v: &toml::Value| {
            if v.as_str() == Some("max") {
                Ok(None)
            } else {
                as_size(v).map(Some)
            }
        };
        let memory_high = opt(src, &r.memory_high, "memory_high", &w, limit)?.flatten();
        let memory_max = opt(src, &r.memory_max, "memory_max", &w, limit)?.flatten();
        let cpus = opt(src, &r.cpus, "cpus", &w, |v| cpu_list(v, cpus_u32(machine)))?;
        cgroups.push(CgroupConfig {
            name: cname,
            memory_high,
            memory_max,
            cpus,
            line: src.line(c.span().start),
        });
    }
    Ok(cgroups)
}

/// `[variants.*]`, in file order (one `"default"` if there are none).
fn read_variants(
    src: &SourceMap,
    raw: &RawScenarioFile,
    machine: &MachineConfig,
) -> R<Vec<VariantConfig>> {
    let mut variants = Vec::new();
    let mut raw_vars: Vec<_> = raw.variants.iter().flatten().collect();
    raw_vars.sort_by_key(|(k, _)| k.span().start);
    for (vname, table) in raw_vars {
        let vn = vname.get_ref();
        if vn.is_empty()
            || !vn
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(src.error(
                &vname.span(),
                Some("variants"),
                ErrorKind::InvalidValue,
                format!("invalid variant name \"{vn}\": use letters, digits, '_', '-', '.'"),
            ));
        }
        variants.push(read_variant(src, vn, table, machine)?);
    }
    if variants.is_empty() {
        variants.push(VariantConfig {
            name: DEFAULT_VARIANT.to_string(),
            machine: machine.clone(),
            points: Vec::new(),
            line: 0,
        });
    }
    Ok(variants)
}

/// One `[variants.NAME]`: policy keys, `machine.KEY` and `sysctl.KEY`, each
/// read once by its section's table, in file order, on top of `machine`.
fn read_variant(
    src: &SourceMap,
    name: &str,
    table: &Spanned<RawSection>,
    machine: &MachineConfig,
) -> R<VariantConfig> {
    let w = format!("[variants.{name}]");
    let r = table.get_ref();
    let mut all = entries(&r.values, "");
    let unknown = all
        .iter()
        .find(|e| POLICIES.key(&e.key).is_none())
        .map(|e| (e.key.clone(), e.key_span.clone()))
        .or_else(|| {
            r.subtables
                .keys()
                .find(|k| !matches!(k.get_ref().as_str(), "machine" | "sysctl"))
                .map(|k| (k.get_ref().clone(), k.span()))
        });
    if let Some((key, span)) = unknown {
        return Err(src.error(
            &span,
            Some(&key),
            ErrorKind::UnknownKey,
            format!(
                "key '{key}' unknown in {w} (expected one of: {}, machine, sysctl)",
                POLICIES.names.join(", ")
            ),
        ));
    }
    for (sect, names) in [("machine", MACHINE.names), ("sysctl", SYSCTL.names)] {
        let Some((_, sub)) = r.subtable(sect) else {
            continue;
        };
        for e in entries(sub, "") {
            if !names.contains(&e.key.as_str()) {
                return Err(src.error(
                    &e.key_span,
                    Some(&format!("{sect}.{}", e.key)),
                    ErrorKind::UnknownKey,
                    format!(
                        "key '{}' unknown in {w} {sect} overrides (expected one of: {})",
                        e.key,
                        names.join(", ")
                    ),
                ));
            }
        }
        all.extend(entries(sub, &format!("{sect}.")));
    }
    all.sort_by_key(|e| e.key_span.start);
    let mut m = machine.clone();
    apply_entries(src, &w, &mut m, &all, set_override)?;
    Ok(VariantConfig {
        name: name.to_string(),
        machine: m,
        points: Vec::new(),
        line: src.line(table.span().start),
    })
}

/// The CPU count as the step and cgroup readers take it.
fn cpus_u32(m: &MachineConfig) -> u32 {
    u32::try_from(m.cpus).unwrap_or(u32::MAX)
}

/// What `[[job]]`, `[[actor]]` and `[measure]` refer to.
struct Refs<'a> {
    src: &'a SourceMap,
    duration_ns: u64,
    filesystems: &'a [FilesystemConfig],
    cgroups: &'a [CgroupConfig],
}

impl Refs<'_> {
    /// A `cgroup = NAME` that must name a `[[cgroup]]`.
    fn cgroup_exists(&self, name: &Spanned<String>, w: &str) -> R<String> {
        if self.cgroups.iter().any(|c| &c.name == name.get_ref()) {
            return Ok(name.get_ref().clone());
        }
        Err(self.src.error(
            &name.span(),
            Some("cgroup"),
            ErrorKind::UnknownReference,
            format!(
                "'cgroup' in {w} names cgroup '{}', but no [[cgroup]] has that name ({})",
                name.get_ref(),
                list(self.cgroups.iter().map(|c| c.name.as_str()))
            ),
        ))
    }

    /// A time that must fall before the scenario's end.
    fn before_end(&self, t: u64, span: Range<usize>, key: &str, w: &str) -> R<u64> {
        if t >= self.duration_ns {
            return Err(self.src.error(
                &span,
                Some(key),
                ErrorKind::OutOfRange,
                format!(
                    "'{key}' in {w} is at or after the scenario's duration ({})",
                    super::format_duration(self.duration_ns)
                ),
            ));
        }
        Ok(t)
    }

    /// `start` of a [[job]] or [[actor]]: a duration before the scenario's end.
    fn start_of(&self, start: &Option<Spanned<toml::Value>>, w: &str) -> R<u64> {
        match start {
            Some(s) => self.before_end(
                opt(self.src, &Some(s.clone()), "start", w, as_duration)?.unwrap_or(0),
                s.span(),
                "start",
                w,
            ),
            None => Ok(0),
        }
    }
}

/// `[[job]]`.
fn read_jobs(refs: &Refs, raw: &RawScenarioFile, variant_names: &[&str]) -> R<Vec<JobConfig>> {
    let src = refs.src;
    let filesystems = refs.filesystems;
    let mut jobs = Vec::new();
    for (i, j) in raw.job.iter().enumerate() {
        let r = j.get_ref();
        let w = format!("[[job]] #{}", i + 1);
        let fio = job_fio(src, j, &w)?;
        let filesystem = match &r.filesystem {
            Some(n) if filesystems.iter().any(|f| &f.name == n.get_ref()) => {
                Some(n.get_ref().clone())
            }
            Some(n) => {
                return Err(src.error(
                    &n.span(),
                    Some("filesystem"),
                    ErrorKind::UnknownReference,
                    format!("'filesystem' in {w} names filesystem '{}', but no [[filesystem]] has that name ({})", n.get_ref(), list(filesystems.iter().map(|f| f.name.as_str()))),
                ));
            }
            None => None,
        };
        let cgroup = r
            .cgroup
            .as_ref()
            .map(|c| refs.cgroup_exists(c, &w))
            .transpose()?;
        let start_ns = refs.start_of(&r.start, &w)?;
        let only_variants = match &r.only_variants {
            Some(list_) => {
                let mut out = Vec::new();
                for v in list_ {
                    if !variant_names.contains(&v.get_ref().as_str()) {
                        return Err(src.error(
                            &v.span(),
                            Some("only_variants"),
                            ErrorKind::UnknownReference,
                            format!("'only_variants' in {w} names variant '{}', which is not defined (variants: {})", v.get_ref(), variant_names.join(", ")),
                        ));
                    }
                    out.push(v.get_ref().clone());
                }
                Some(out)
            }
            None => None,
        };
        jobs.push(JobConfig {
            fio,
            filesystem,
            cgroup,
            start_ns,
            only_variants,
            line: src.line(j.span().start),
        });
    }
    Ok(jobs)
}

/// The fio text of a `[[job]]`: `file = "x.fio"` (relative to the scenario)
/// or inline `fio = """..."""`, with its origin for fio's errors.
fn job_fio(src: &SourceMap, j: &Spanned<RawJob>, w: &str) -> R<FioSource> {
    let r = j.get_ref();
    Ok(match (&r.file, &r.fio) {
        (Some(_), Some(f)) => {
            return Err(src.error(
                &f.span(),
                Some("fio"),
                ErrorKind::Conflict,
                format!("{w} has both 'file' and 'fio'; use one"),
            ));
        }
        (None, None) => {
            return Err(src.error(
                &j.span(),
                Some("fio"),
                ErrorKind::MissingKey,
                format!("{w} needs 'file = \"x.fio\"' or 'fio = \"\"\"...\"\"\"'"),
            ));
        }
        (Some(f), None) => {
            let base = Path::new(src.origin()).parent().unwrap_or(Path::new(""));
            let path = base.join(f.get_ref());
            let text = std::fs::read_to_string(&path).map_err(|e| {
                src.error(
                    &f.span(),
                    Some("file"),
                    ErrorKind::Io,
                    format!("cannot read fio job file '{}' of {w}: {e}", path.display()),
                )
            })?;
            FioSource {
                text,
                origin: path.display().to_string(),
                line_offset: 0,
                path: Some(path),
            }
        }
        (None, Some(f)) => FioSource {
            text: f.get_ref().clone(),
            origin: src.origin().to_string(),
            line_offset: inline_line_offset(src, &f.span()),
            path: None,
        },
    })
}

/// The cgroups actors create with `cgroup_mkdir` (none may exist already).
fn made_cgroups(
    src: &SourceMap,
    raw: &RawScenarioFile,
    cgroups: &[CgroupConfig],
) -> R<BTreeSet<String>> {
    let mut made_cgroups = BTreeSet::new();
    for a in &raw.actor {
        for s in a.get_ref().steps.get_ref() {
            if let Some(n) = mkdir_name(s.get_ref()) {
                if cgroups.iter().any(|c| c.name == n) {
                    let span = s
                        .get_ref()
                        .iter()
                        .find(|(k, _)| k.get_ref() == "name")
                        .map_or(s.span(), |(_, v)| v.span());
                    return Err(src.error(&span, Some("name"), ErrorKind::Conflict, format!("cgroup_mkdir of '{n}': a [[cgroup]] of that name already exists (mkdir would fail with EEXIST)")));
                }
                made_cgroups.insert(n);
            }
        }
    }
    Ok(made_cgroups)
}

/// `[[actor]]`.
fn read_actors(refs: &Refs, raw: &RawScenarioFile, machine: &MachineConfig) -> R<Vec<ActorConfig>> {
    let src = refs.src;
    let (filesystems, cgroups) = (refs.filesystems, refs.cgroups);
    let made_cgroups = made_cgroups(src, raw, cgroups)?;
    let ctx = StepCtx {
        filesystems: filesystems
            .iter()
            .map(|f| (f.name.as_str(), f.fs_type, f.mountpoint.as_str()))
            .collect(),
        cgroups: cgroups.iter().map(|c| c.name.clone()).collect(),
        made_cgroups,
        cpus: cpus_u32(machine),
    };
    let mut seen = BTreeMap::new();
    let mut actors = Vec::new();
    for a in &raw.actor {
        let r = a.get_ref();
        unique(src, &mut seen, &r.name, "[[actor]]")?;
        let aname = check_name(src, &r.name, "[[actor]]")?;
        let w = format!("[[actor]] '{aname}'");
        let cgroup = r
            .cgroup
            .as_ref()
            .map(|c| refs.cgroup_exists(c, &w))
            .transpose()?;
        let start_ns = refs.start_of(&r.start, &w)?;
        let repeat = opt(src, &r.repeat, "repeat", &w, |v| match v.as_str() {
            Some("forever") => Ok(Repeat::Forever),
            Some(s) => Err(KeyError::invalid(format!(
                "'{s}' is not allowed (expected a count >= 1 or \"forever\")"
            ))),
            None => as_int(v, 1, u64::MAX).map(Repeat::Count),
        })?
        .unwrap_or(Repeat::Count(1));
        let instances = opt(src, &r.instances, "instances", &w, |v| {
            as_u32(v, 1, 1_000_000)
        })?
        .unwrap_or(1);
        if r.steps.get_ref().is_empty() {
            return Err(src.error(
                &r.steps.span(),
                Some("steps"),
                ErrorKind::MissingKey,
                format!("'steps' in {w} is empty"),
            ));
        }
        let steps = r
            .steps
            .get_ref()
            .iter()
            .enumerate()
            .map(|(i, s)| parse_step(src, &ctx, &aname, i, s))
            .collect::<R<Vec<_>>>()?;
        actors.push(ActorConfig {
            name: aname,
            cgroup,
            start_ns,
            repeat,
            instances,
            steps,
            line: src.line(a.span().start),
        });
    }
    Ok(actors)
}

/// `[measure]`.
fn read_measure(refs: &Refs, raw: &RawScenarioFile) -> R<MeasureConfig> {
    let src = refs.src;
    let mut measure = MeasureConfig::default();
    if let Some(m) = &raw.measure {
        let r = m.get_ref();
        let w = "[measure]";
        if let Some(si) = opt(src, &r.sample_interval, "sample_interval", w, as_duration)? {
            if si == 0 {
                let span = r.sample_interval.as_ref().map_or(m.span(), |s| s.span());
                return Err(src.error(
                    &span,
                    Some("sample_interval"),
                    ErrorKind::OutOfRange,
                    "'sample_interval' in [measure] must be greater than 0",
                ));
            }
            measure.sample_interval_ns = si;
        }
        if let Some(wu) = &r.warmup {
            measure.warmup_ns = refs.before_end(
                opt(src, &Some(wu.clone()), "warmup", w, as_duration)?.unwrap_or(0),
                wu.span(),
                "warmup",
                w,
            )?;
        }
        if let Some(pj) = opt(src, &r.per_job, "per_job", w, as_bool)? {
            measure.per_job = pj;
        }
        if let Some(list_) = &r.metrics {
            let mut out = Vec::new();
            for n in list_ {
                let name = n.get_ref();
                if !valid_metric_name(name.strip_suffix('*').unwrap_or(name)) {
                    return Err(src.error(&n.span(), Some("metrics"), ErrorKind::InvalidValue, format!("'{name}' in [measure] metrics is not a metric name (letters, digits, '_', '.', '-'; a trailing '*' matches a prefix)")));
                }
                out.push(name.clone());
            }
            measure.metrics = Some(out);
        }
    }
    Ok(measure)
}

/// The scenario line just before the first line of an inline `fio` string
/// whose value starts at `span` (a newline right after `"""` is not part of
/// the string, as TOML says).
fn inline_line_offset(src: &SourceMap, span: &Range<usize>) -> u32 {
    let text = src.text().get(span.clone()).unwrap_or("");
    let quote = if text.starts_with("\"\"\"") || text.starts_with("'''") {
        3
    } else {
        1
    };
    let after = &text[quote.min(text.len())..];
    let skips_newline = quote == 3 && (after.starts_with('\n') || after.starts_with("\r\n"));
    let first_line = src.line(span.start) + u32::from(skips_newline);
    first_line - 1
}
/// `[sweep]`.
fn read_sweep(src: &SourceMap, s: &RawSweep, variant_names: &[&str]) -> R<SweepConfig> {
    let key = s.key.get_ref();
    let (variant, target) = match key.strip_prefix("variants.") {
        Some(rest) => match rest.split_once('.') {
            Some(("*", t)) => (None, t),
            Some((v, t)) => {
                if !variant_names.contains(&v) {
                    return Err(src.error(
                        &s.key.span(),
                        Some("key"),
                        ErrorKind::UnknownReference,
                        format!("'key' in [sweep] names variant '{v}', which is not defined (variants: {})", variant_names.join(", ")),
                    ));
                }
                (Some(v.to_string()), t)
            }
            None => (None, rest),
        },
        None => (None, key.as_str()),
    };
    let keys = override_keys();
    if !keys.iter().any(|k| k == target) {
        return Err(src.error(
            &s.key.span(),
            Some("key"),
            ErrorKind::UnknownKey,
            format!("'key' = \"{key}\" in [sweep] is not a key a sweep can set (expected one of: {}; optionally prefixed by variants.*. or variants.NAME.)", keys.join(", ")),
        ));
    }
    if s.values.get_ref().is_empty() {
        return Err(src.error(
            &s.values.span(),
            Some("values"),
            ErrorKind::MissingKey,
            "'values' in [sweep] is empty",
        ));
    }
    Ok(SweepConfig {
        key: key.clone(),
        variant,
        target: target.to_string(),
        values: s
            .values
            .get_ref()
            .iter()
            .map(|v| v.get_ref().clone())
            .collect(),
        line: src.line(s.key.span().start),
        value_spans: s.values.get_ref().iter().map(|v| v.span()).collect(),
    })
}
