//! From the deserialized file ([`super::raw`]) to a validated [`Scenario`]:
//! defaults, units, ranges, unique names and references. Not kernel code.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;

use toml::Spanned;

use super::actor::{
    cpu_list, key_error, list, mkdir_name, parse_step, valid_metric_name, ActorConfig, Repeat,
    StepCtx,
};
use super::error::{ErrorKind, ScenarioError, SourceMap};
use super::machine::{MachineConfig, Sysctl};
use super::policy::Policies;
use super::profiles::{builtin_profile, PROFILE_NAMES};
use super::raw::{RawDevice, RawScenarioFile, RawVariant, SpannedTable};
use super::value::{as_bandwidth, as_bool, as_duration, as_int, as_size, as_u32, KeyError};
use super::variant::{apply, override_keys, Override, SweepConfig, VariantConfig, DEFAULT_VARIANT};
use super::{
    BdiConfig, CgroupConfig, DeviceConfig, FilesystemConfig, FioSource, FsOption, FsType,
    JobConfig, MeasureConfig, Scenario,
};

type R<T> = Result<T, ScenarioError>;

/// Reads an optional spanned value with `f`, locating errors at the value.
fn opt<T>(
    src: &SourceMap,
    v: &Option<Spanned<toml::Value>>,
    key: &str,
    where_: &str,
    f: impl Fn(&toml::Value) -> Result<T, KeyError>,
) -> R<Option<T>> {
    match v {
        Some(v) => f(v.get_ref())
            .map(Some)
            .map_err(|e| key_error(src, &v.span(), key, where_, e)),
        None => Ok(None),
    }
}

/// A name: non-empty, letters, digits, `_`, `-`, `.`.
fn check_name(src: &SourceMap, name: &Spanned<String>, where_: &str) -> R<String> {
    let n = name.get_ref();
    if n.is_empty()
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(src.error(
            &name.span(),
            Some("name"),
            ErrorKind::InvalidValue,
            format!("invalid name \"{n}\" in {where_}: use letters, digits, '_', '-', '.'"),
        ));
    }
    Ok(n.clone())
}

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

/// Applies a spanned table of keys with `set`, checking the
/// ratio/bytes exclusion of sysctls when `sysctl` is set.
fn apply_table(
    src: &SourceMap,
    table: &SpannedTable,
    where_: &str,
    sysctl_pairs: bool,
    mut set: impl FnMut(&str, &toml::Value) -> Result<(), KeyError>,
) -> R<()> {
    // File order, so errors and the last-write-wins of sysctls follow the text.
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    for (k, v) in &entries {
        if sysctl_pairs {
            if let Some(other) = Sysctl::excludes(k.get_ref()) {
                let clash = entries
                    .iter()
                    .find(|(k2, v2)| k2.get_ref() == other && Sysctl::is_nonzero(v2.get_ref()));
                if let (Some((k2, _)), true) = (clash, Sysctl::is_nonzero(v.get_ref())) {
                    if k2.span().start < k.span().start {
                        return Err(src.error(
                            &k.span(),
                            Some(k.get_ref()),
                            ErrorKind::Conflict,
                            format!("'{}' and '{other}' (line {}) are both set in {where_}; set only one (the kernel zeroes the other)", k.get_ref(), src.line(k2.span().start)),
                        ));
                    }
                }
            }
        }
        set(k.get_ref(), v.get_ref()).map_err(|e| match e {
            KeyError::Unknown(_) => key_error(src, &k.span(), k.get_ref(), where_, e),
            _ => key_error(src, &v.span(), k.get_ref(), where_, e),
        })?;
    }
    Ok(())
}

/// Validates the whole file.
pub(crate) fn build(src: SourceMap) -> R<Scenario> {
    let raw: RawScenarioFile = toml::from_str(src.text()).map_err(|e| src.from_toml(&e))?;
    let at_start = 0..0;

    // [scenario]
    let Some(header) = &raw.scenario else {
        return Err(src.error(
            &at_start,
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
    let duration_ns =
        opt(&src, &Some(h.duration.clone()), "duration", w, as_duration)?.unwrap_or(0);
    if duration_ns == 0 {
        return Err(src.error(
            &h.duration.span(),
            Some("duration"),
            ErrorKind::OutOfRange,
            "'duration' in [scenario] must be greater than 0",
        ));
    }
    let repeat = opt(&src, &h.repeat, "repeat", w, |v| as_u32(v, 1, 1_000_000))?.unwrap_or(1);
    let seed = opt(&src, &h.seed, "seed", w, |v| as_int(v, 0, i64::MAX as u64))?.unwrap_or(1);
    let quick_duration_ns = opt(&src, &h.quick_duration, "quick_duration", w, as_duration)?
        .unwrap_or(duration_ns)
        .clamp(1, duration_ns);
    let quick_repeat = opt(&src, &h.quick_repeat, "quick_repeat", w, |v| {
        as_u32(v, 1, 1_000_000)
    })?
    .unwrap_or(repeat)
    .min(repeat);
    let description = h
        .description
        .as_ref()
        .map(|d| d.get_ref().clone())
        .unwrap_or_default();

    // [machine]
    let Some(machine_raw) = &raw.machine else {
        return Err(src.error(
            &at_start,
            Some("machine"),
            ErrorKind::MissingKey,
            "missing section [machine] (with at least cpus and memory)",
        ));
    };
    let mut machine = MachineConfig::unset();
    apply_table(&src, machine_raw.get_ref(), "[machine]", false, |k, v| {
        machine.set(k, v)
    })?;
    for req in MachineConfig::REQUIRED {
        if !machine_raw.get_ref().keys().any(|k| k.get_ref() == req) {
            return Err(src.error(
                &machine_raw.span(),
                Some(req),
                ErrorKind::MissingKey,
                format!("missing key '{req}' in [machine]"),
            ));
        }
    }

    // [sysctl]
    let mut sysctl = Sysctl::default();
    if let Some(t) = &raw.sysctl {
        apply_table(&src, t, "[sysctl]", true, |k, v| sysctl.set(k, v))?;
    }

    // [[device]]
    let mut seen = BTreeMap::new();
    let mut devices = Vec::new();
    for d in &raw.device {
        unique(&src, &mut seen, &d.get_ref().name, "[[device]]")?;
        devices.push(build_device(&src, d)?);
    }

    // [[filesystem]]
    let mut seen = BTreeMap::new();
    let mut seen_mp: BTreeMap<String, u32> = BTreeMap::new();
    let mut used_dev: BTreeMap<String, String> = BTreeMap::new();
    let mut filesystems = Vec::new();
    for f in &raw.filesystem {
        let r = f.get_ref();
        unique(&src, &mut seen, &r.name, "[[filesystem]]")?;
        let fname = check_name(&src, &r.name, "[[filesystem]]")?;
        let w = format!("[[filesystem]] '{fname}'");
        let types = FsType::ALL
            .iter()
            .map(|t| t.0)
            .collect::<Vec<_>>()
            .join(", ");
        let Some(&(_, fs_type)) = FsType::ALL.iter().find(|t| t.0 == r.fs_type.get_ref()) else {
            return Err(src.error(
                &r.fs_type.span(),
                Some("type"),
                ErrorKind::UnknownValue,
                format!(
                    "invalid 'type' in {w}: '{}' is not allowed (expected one of: {types})",
                    r.fs_type.get_ref()
                ),
            ));
        };
        let device = match (&r.device, fs_type) {
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
                        format!("'device' in {w} names device '{dn}', but no [[device]] has that name ({})", list(devices.iter().map(|x| x.name.as_str()))),
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
        };
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
        let mut options = BTreeMap::new();
        for (k, v) in r.options.iter().flatten() {
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
                        &src,
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
                "agcount" | "nr_wb_ctx" | "commit" | "subvolumes" | "nr_inodes"
            ) {
                as_int(v.get_ref(), 1, u64::from(u32::MAX))
                    .map_err(|e| key_error(&src, &v.span(), key, &opt_w, e))?;
            }
            options.insert(key.to_string(), val);
        }
        let mounted = opt(&src, &r.mounted, "mounted", &w, as_bool)?.unwrap_or(true);
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

    // [[cgroup]]
    let mut seen = BTreeMap::new();
    let mut cgroups = Vec::new();
    for c in &raw.cgroup {
        let r = c.get_ref();
        unique(&src, &mut seen, &r.name, "[[cgroup]]")?;
        let cname = check_name(&src, &r.name, "[[cgroup]]")?;
        let w = format!("[[cgroup]] '{cname}'");
        let limit = |v: &toml::Value| {
            if v.as_str() == Some("max") {
                Ok(None)
            } else {
                as_size(v).map(Some)
            }
        };
        let memory_high = opt(&src, &r.memory_high, "memory_high", &w, limit)?.flatten();
        let memory_max = opt(&src, &r.memory_max, "memory_max", &w, limit)?.flatten();
        let cpus = opt(&src, &r.cpus, "cpus", &w, |v| cpu_list(v, machine.cpus))?;
        cgroups.push(CgroupConfig {
            name: cname,
            memory_high,
            memory_max,
            cpus,
            line: src.line(c.span().start),
        });
    }

    // [variants.*], in file order.
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
        variants.push(build_variant(&src, vn, table, &machine, &sysctl)?);
    }
    if variants.is_empty() {
        variants.push(VariantConfig {
            name: DEFAULT_VARIANT.to_string(),
            overrides: Vec::new(),
            line: 0,
        });
    }
    let variant_names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();

    // [[job]]
    let cgroup_exists = |name: &Spanned<String>, w: &str| -> R<String> {
        if cgroups.iter().any(|c| &c.name == name.get_ref()) {
            return Ok(name.get_ref().clone());
        }
        Err(src.error(
            &name.span(),
            Some("cgroup"),
            ErrorKind::UnknownReference,
            format!(
                "'cgroup' in {w} names cgroup '{}', but no [[cgroup]] has that name ({})",
                name.get_ref(),
                list(cgroups.iter().map(|c| c.name.as_str()))
            ),
        ))
    };
    let before_end = |t: u64, span: Range<usize>, key: &str, w: &str| -> R<u64> {
        if t >= duration_ns {
            return Err(src.error(
                &span,
                Some(key),
                ErrorKind::OutOfRange,
                format!(
                    "'{key}' in {w} is at or after the scenario's duration ({})",
                    super::format_duration(duration_ns)
                ),
            ));
        }
        Ok(t)
    };
    // `start` of a [[job]] or [[actor]]: a duration before the scenario's end.
    let start_of = |start: &Option<Spanned<toml::Value>>, w: &str| -> R<u64> {
        match start {
            Some(s) => before_end(
                opt(&src, &Some(s.clone()), "start", w, as_duration)?.unwrap_or(0),
                s.span(),
                "start",
                w,
            ),
            None => Ok(0),
        }
    };
    let mut jobs = Vec::new();
    for (i, j) in raw.job.iter().enumerate() {
        let r = j.get_ref();
        let w = format!("[[job]] #{}", i + 1);
        let fio = match (&r.file, &r.fio) {
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
                line_offset: inline_line_offset(&src, &f.span()),
                path: None,
            },
        };
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
            .map(|c| cgroup_exists(c, &w))
            .transpose()?;
        let start_ns = start_of(&r.start, &w)?;
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

    // [[actor]]
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
    let ctx = StepCtx {
        filesystems: filesystems
            .iter()
            .map(|f| (f.name.as_str(), f.fs_type, f.mountpoint.as_str()))
            .collect(),
        cgroups: cgroups.iter().map(|c| c.name.clone()).collect(),
        made_cgroups,
        cpus: machine.cpus,
    };
    let mut seen = BTreeMap::new();
    let mut actors = Vec::new();
    for a in &raw.actor {
        let r = a.get_ref();
        unique(&src, &mut seen, &r.name, "[[actor]]")?;
        let aname = check_name(&src, &r.name, "[[actor]]")?;
        let w = format!("[[actor]] '{aname}'");
        let cgroup = r
            .cgroup
            .as_ref()
            .map(|c| cgroup_exists(c, &w))
            .transpose()?;
        let start_ns = start_of(&r.start, &w)?;
        let repeat = opt(&src, &r.repeat, "repeat", &w, |v| match v.as_str() {
            Some("forever") => Ok(Repeat::Forever),
            Some(s) => Err(KeyError::invalid(format!(
                "'{s}' is not allowed (expected a count >= 1 or \"forever\")"
            ))),
            None => as_int(v, 1, u64::MAX).map(Repeat::Count),
        })?
        .unwrap_or(Repeat::Count(1));
        let instances = opt(&src, &r.instances, "instances", &w, |v| {
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
            .map(|(i, s)| parse_step(&src, &ctx, &aname, i, s))
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

    // [measure]
    let mut measure = MeasureConfig::default();
    if let Some(m) = &raw.measure {
        let r = m.get_ref();
        let w = "[measure]";
        if let Some(si) = opt(&src, &r.sample_interval, "sample_interval", w, as_duration)? {
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
            measure.warmup_ns = before_end(
                opt(&src, &Some(wu.clone()), "warmup", w, as_duration)?.unwrap_or(0),
                wu.span(),
                "warmup",
                w,
            )?;
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

    // [sweep]
    let sweep = match &raw.sweep {
        Some(s) => Some(build_sweep(&src, s.get_ref(), &variant_names)?),
        None => None,
    };

    let scenario = Scenario {
        name,
        description,
        duration_ns,
        repeat,
        seed,
        quick_duration_ns,
        quick_repeat,
        machine,
        sysctl,
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

/// One `[[device]]`.
fn build_device(src: &SourceMap, d: &Spanned<RawDevice>) -> R<DeviceConfig> {
    let r = d.get_ref();
    let name = check_name(src, &r.name, "[[device]]")?;
    let w = format!("[[device]] '{name}'");
    let Some(mut params) = builtin_profile(r.profile.get_ref()) else {
        return Err(src.error(
            &r.profile.span(),
            Some("profile"),
            ErrorKind::UnknownValue,
            format!(
                "invalid 'profile' in {w}: '{}' is not a built-in profile (expected one of: {})",
                r.profile.get_ref(),
                PROFILE_NAMES.join(", ")
            ),
        ));
    };
    let pos =
        |v: &toml::Value, f: fn(&toml::Value) -> Result<u64, KeyError>| -> Result<u64, KeyError> {
            let n = f(v)?;
            if n == 0 {
                return Err(KeyError::range("must be greater than 0"));
            }
            Ok(n)
        };
    if let Some(v) = opt(src, &r.write_bw, "write_bw", &w, |v| pos(v, as_bandwidth))? {
        params.write_bw_bytes_per_sec = v;
    }
    if let Some(v) = opt(src, &r.read_bw, "read_bw", &w, |v| pos(v, as_bandwidth))? {
        params.read_bw_bytes_per_sec = v;
    }
    if let Some(v) = opt(src, &r.write_lat, "write_lat", &w, as_duration)? {
        params.write_latency_ns = v;
    }
    if let Some(v) = opt(src, &r.read_lat, "read_lat", &w, as_duration)? {
        params.read_latency_ns = v;
    }
    if let Some(v) = opt(src, &r.queue_depth, "queue_depth", &w, |v| {
        as_u32(v, 1, 65536)
    })? {
        params.queue_depth = v;
    }
    if let Some(v) = opt(src, &r.parallelism, "parallelism", &w, |v| {
        as_u32(v, 1, 65536)
    })? {
        params.parallelism = v;
    }
    if let Some(v) = opt(src, &r.driver_cpu, "driver_cpu", &w, as_duration)? {
        params.driver_cpu_ns = v;
    }
    let mut bdi = BdiConfig::default();
    if let Some(b) = &r.bdi {
        let rb = b.get_ref();
        let wb = format!("[device.bdi] of '{name}'");
        if let Some(v) = opt(src, &rb.strict_limit, "strict_limit", &wb, as_bool)? {
            bdi.strict_limit = v;
        }
        bdi.max_bytes = opt(src, &rb.max_bytes, "max_bytes", &wb, as_size)?;
        if let Some(v) = opt(src, &rb.min_ratio, "min_ratio", &wb, |v| as_u32(v, 0, 100))? {
            bdi.min_ratio = v;
        }
        if let Some(v) = opt(src, &rb.max_ratio, "max_ratio", &wb, |v| as_u32(v, 0, 100))? {
            bdi.max_ratio = v;
        }
        if bdi.min_ratio > bdi.max_ratio {
            let span = rb.min_ratio.as_ref().map_or(b.span(), |s| s.span());
            return Err(src.error(
                &span,
                Some("min_ratio"),
                ErrorKind::OutOfRange,
                format!(
                    "'min_ratio' {} exceeds 'max_ratio' {} in {wb}",
                    bdi.min_ratio, bdi.max_ratio
                ),
            ));
        }
    }
    Ok(DeviceConfig {
        name,
        profile: r.profile.get_ref().clone(),
        params,
        bdi,
        line: src.line(d.span().start),
    })
}

/// One `[variants.NAME]`: flattens `machine.x`/`sysctl.x` into dotted keys
/// and checks every value by applying it.
fn build_variant(
    src: &SourceMap,
    name: &str,
    table: &Spanned<RawVariant>,
    machine: &MachineConfig,
    sysctl: &Sysctl,
) -> R<VariantConfig> {
    let w = format!("[variants.{name}]");
    let r = table.get_ref();
    let mut overrides = Vec::new();
    let policies = [
        ("umount_drain", &r.umount_drain),
        ("csum_lookup", &r.csum_lookup),
        ("detach_release", &r.detach_release),
        ("wb_ctx_assign", &r.wb_ctx_assign),
        ("nr_wb_ctx", &r.nr_wb_ctx),
        ("dontcache_flush", &r.dontcache_flush),
    ];
    for (key, v) in policies {
        if let Some(v) = v {
            overrides.push(Override {
                key: key.to_string(),
                value: v.get_ref().clone(),
                line: src.line(v.span().start),
                span: v.span(),
            });
        }
    }
    for (sect, sub) in [("machine", &r.machine), ("sysctl", &r.sysctl)] {
        for (k, v) in sub.iter().flatten() {
            let key = format!("{sect}.{}", k.get_ref());
            let unknown = if sect == "machine" {
                !MachineConfig::KEYS.contains(&k.get_ref().as_str())
            } else {
                !Sysctl::KEYS.contains(&k.get_ref().as_str())
            };
            if unknown {
                let list = if sect == "machine" {
                    MachineConfig::KEYS
                } else {
                    Sysctl::KEYS
                };
                return Err(src.error(
                    &k.span(),
                    Some(&key),
                    ErrorKind::UnknownKey,
                    format!(
                        "key '{}' unknown in {w} {sect} overrides (expected one of: {})",
                        k.get_ref(),
                        list.join(", ")
                    ),
                ));
            }
            overrides.push(Override {
                key,
                value: v.get_ref().clone(),
                line: src.line(v.span().start),
                span: v.span(),
            });
        }
    }
    // File order.
    overrides.sort_by_key(|o| o.span.start);
    let mut p = Policies::default();
    let mut m = machine.clone();
    let mut s = sysctl.clone();
    let mut set_sysctl: Vec<(&str, u32)> = Vec::new();
    for o in &overrides {
        apply(&o.key, &o.value, &mut p, &mut m, &mut s)
            .map_err(|e| key_error(src, &o.span, &o.key, &w, e))?;
        if let Some(k) = o.key.strip_prefix("sysctl.") {
            if let Some(other) = Sysctl::excludes(k) {
                if let Some((_, line)) = set_sysctl.iter().find(|(n, _)| *n == other) {
                    if Sysctl::is_nonzero(&o.value) {
                        return Err(src.error(&o.span, Some(&o.key), ErrorKind::Conflict, format!("'sysctl.{k}' and 'sysctl.{other}' (line {line}) are both set in {w}; set only one (the kernel zeroes the other)")));
                    }
                }
            }
            if Sysctl::is_nonzero(&o.value) {
                set_sysctl.push((k, o.line));
            }
        }
    }
    Ok(VariantConfig {
        name: name.to_string(),
        overrides,
        line: src.line(table.span().start),
    })
}

/// `[sweep]`.
fn build_sweep(
    src: &SourceMap,
    s: &super::raw::RawSweep,
    variant_names: &[&str],
) -> R<SweepConfig> {
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
