//! `[[actor]]`: scripted user-space processes for what fio does not do:
//! mount/umount(8), sync(1), cgroup mkdir/rmdir, dd-like writes, and reusing
//! a device right after a lazy umount.
//!
//! The steps name the syscalls the runner drives: `mount(2)`, `umount2(2)`
//! with or without `MNT_DETACH` (`fs/namespace.c` `path_umount()`),
//! `sync(2)` (`fs/sync.c` `ksys_sync()`), `syncfs(2)`, `fsync(2)`,
//! `mkdir`/`rmdir` in cgroupfs (`cgroup_mkdir()`, `cgroup_rmdir()`), a write
//! to `cgroup.procs` (`cgroup_enter`), `write(2)`/`read(2)` loops like dd,
//! `execve(2)` (a process start), and a device reuse (mount again or
//! `LOOP_CLR_FD`) that records `EBUSY` while the old superblock still holds
//! the device. This module only parses and checks them.

use std::collections::BTreeSet;

use toml::Spanned;

use super::error::{ErrorKind, ScenarioError, SourceMap};
use super::raw::SpannedTable;
use super::value::{as_bool, as_duration, as_int, as_size, as_str, KeyError};
use super::FsType;
pub use crate::workload::actor::{ActorConfig, Repeat, Step, StepOp};

/// Keys every step may have besides its op's.
const COMMON_KEYS: &[&str] = &["op", "record", "exec", "end_run_after"];

/// Every op: name, required keys, optional keys.
pub const STEP_OPS: &[(&str, &[&str], &[&str])] = &[
    ("mount", &["filesystem"], &[]),
    ("umount", &["filesystem"], &["lazy"]),
    ("sync", &[], &[]),
    ("syncfs", &["filesystem"], &[]),
    ("fsync", &["file"], &[]),
    ("sleep", &["for"], &[]),
    (
        "cgroup_mkdir",
        &["name"],
        &["memory_high", "memory_max", "cpus"],
    ),
    ("cgroup_rmdir", &["name"], &[]),
    ("cgroup_enter", &["name"], &[]),
    ("write", &["file", "size", "bs"], &["fsync", "trunc"]),
    ("read", &["file", "size", "bs"], &[]),
    ("exec", &[], &["cost"]),
    ("reuse_device", &["filesystem"], &[]),
    ("create_files", &["dir", "count", "size"], &[]),
];

/// What steps may refer to.
pub(crate) struct StepCtx<'a> {
    /// Filesystems: name, type, mountpoint.
    pub filesystems: Vec<(&'a str, FsType, &'a str)>,
    /// Cgroups from `[[cgroup]]`.
    pub cgroups: BTreeSet<String>,
    /// Cgroups some `cgroup_mkdir` step creates.
    pub made_cgroups: BTreeSet<String>,
    /// `machine.cpus`.
    pub cpus: u32,
}

/// The name a `cgroup_mkdir` step creates, if `t` is one.
pub(crate) fn mkdir_name(t: &SpannedTable) -> Option<String> {
    let get = |k: &str| {
        t.iter()
            .find(|(key, _)| key.get_ref() == k)
            .map(|(_, v)| v.get_ref())
    };
    (get("op")?.as_str()? == "cgroup_mkdir").then(|| get("name")?.as_str().map(str::to_string))?
}

/// A metric name: letters, digits, `_`, `.`, `-`.
pub(crate) fn valid_metric_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Parses step `idx` (0-based) of actor `actor`.
pub(crate) fn parse_step(
    src: &SourceMap,
    ctx: &StepCtx<'_>,
    actor: &str,
    idx: usize,
    step: &Spanned<SpannedTable>,
) -> Result<Step, ScenarioError> {
    let span = step.span();
    let table = step.get_ref();
    let where_ = format!("[[actor]] '{actor}' step {}", idx + 1);
    let get = |k: &str| table.iter().find(|(key, _)| key.get_ref() == k);
    let Some((_, op_val)) = get("op") else {
        return Err(src.error(
            &span,
            Some("op"),
            ErrorKind::MissingKey,
            format!("missing key 'op' in {where_}"),
        ));
    };
    let op_names = STEP_OPS.iter().map(|o| o.0).collect::<Vec<_>>().join(", ");
    let Some(op_name) = op_val.get_ref().as_str() else {
        return Err(src.error(
            &op_val.span(),
            Some("op"),
            ErrorKind::InvalidValue,
            format!("'op' in {where_} must be a string (one of: {op_names})"),
        ));
    };
    let Some(&(_, required, optional)) = STEP_OPS.iter().find(|o| o.0 == op_name) else {
        return Err(src.error(
            &op_val.span(),
            Some("op"),
            ErrorKind::UnknownValue,
            format!("unknown step op '{op_name}' in {where_} (expected one of: {op_names})"),
        ));
    };
    let where_ = format!("{where_} (op = \"{op_name}\")");
    for k in table.keys() {
        let k_name = k.get_ref().as_str();
        if !COMMON_KEYS.contains(&k_name)
            && !required.contains(&k_name)
            && !optional.contains(&k_name)
        {
            let allowed: Vec<&str> = COMMON_KEYS
                .iter()
                .chain(required)
                .chain(optional)
                .copied()
                .collect();
            return Err(src.error(
                &k.span(),
                Some(k_name),
                ErrorKind::UnknownKey,
                format!(
                    "key '{k_name}' unknown in {where_} (expected one of: {})",
                    allowed.join(", ")
                ),
            ));
        }
    }
    for r in required {
        if get(r).is_none() {
            return Err(src.error(
                &span,
                Some(r),
                ErrorKind::MissingKey,
                format!("missing key '{r}' in {where_}"),
            ));
        }
    }
    let r = StepReader {
        src,
        table,
        where_: &where_,
        span: &span,
    };
    macro_rules! val {
        ($k:expr, $f:expr) => {
            r.get($k, $f)?
        };
    }
    let string = |v: &toml::Value| as_str(v).map(str::to_string);
    let filesystem = |k: &str| -> Result<String, ScenarioError> {
        let name: String = val!(k, string).unwrap_or_default();
        if ctx.filesystems.iter().any(|f| f.0 == name) {
            return Ok(name);
        }
        Err(src.error(
            &r.value_span(k),
            Some(k),
            ErrorKind::UnknownReference,
            format!("'{k}' in {where_} names filesystem '{name}', but no [[filesystem]] has that name ({})", list(ctx.filesystems.iter().map(|f| f.0))),
        ))
    };
    let file = |k: &str| -> Result<String, ScenarioError> {
        let path: String = val!(k, string).unwrap_or_default();
        let vspan = r.value_span(k);
        let under = ctx.filesystems.iter().any(|f| {
            path.strip_prefix(f.2)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        });
        if !path.starts_with('/') || !under {
            let mps = list(ctx.filesystems.iter().map(|f| f.2));
            return Err(src.error(
                &vspan,
                Some(k),
                ErrorKind::UnknownReference,
                format!("'{k}' = \"{path}\" in {where_} is not an absolute path under a filesystem's mountpoint ({mps})"),
            ));
        }
        Ok(path)
    };
    let cgroup_ref = |k: &str| -> Result<String, ScenarioError> {
        let name: String = val!(k, string).unwrap_or_default();
        if ctx.cgroups.contains(&name) || ctx.made_cgroups.contains(&name) {
            return Ok(name);
        }
        let vspan = r.value_span(k);
        Err(src.error(
            &vspan,
            Some(k),
            ErrorKind::UnknownReference,
            format!(
                "'{k}' in {where_} names cgroup '{name}', which neither a [[cgroup]] nor a cgroup_mkdir step creates ({})",
                list(ctx.cgroups.iter().chain(&ctx.made_cgroups).map(String::as_str))
            ),
        ))
    };
    let size = |k: &str| -> Result<u64, ScenarioError> { Ok(val!(k, as_size).unwrap_or(0)) };
    let pos_size = |k: &str| -> Result<u64, ScenarioError> {
        let n = size(k)?;
        if n == 0 {
            let vspan = r.value_span(k);
            return Err(src.error(
                &vspan,
                Some(k),
                ErrorKind::OutOfRange,
                format!("'{k}' in {where_} must be greater than 0"),
            ));
        }
        Ok(n)
    };
    let flag = |k: &str| -> Result<bool, ScenarioError> { Ok(val!(k, as_bool).unwrap_or(false)) };

    let op = match op_name {
        "mount" => StepOp::Mount {
            filesystem: filesystem("filesystem")?,
        },
        "umount" => StepOp::Umount {
            filesystem: filesystem("filesystem")?,
            lazy: flag("lazy")?,
        },
        "sync" => StepOp::Sync,
        "syncfs" => StepOp::Syncfs {
            filesystem: filesystem("filesystem")?,
        },
        "fsync" => StepOp::Fsync {
            file: file("file")?,
        },
        "sleep" => StepOp::Sleep {
            ns: val!("for", as_duration).unwrap_or(0),
        },
        "cgroup_mkdir" => {
            let limit = |v: &toml::Value| -> Result<Option<u64>, KeyError> {
                if v.as_str() == Some("max") {
                    Ok(None)
                } else {
                    as_size(v).map(Some)
                }
            };
            let cpus_of = |v: &toml::Value| cpu_list(v, ctx.cpus);
            StepOp::CgroupMkdir {
                name: val!("name", string).unwrap_or_default(),
                memory_high: val!("memory_high", limit).flatten(),
                memory_max: val!("memory_max", limit).flatten(),
                cpus: val!("cpus", cpus_of),
            }
        }
        "cgroup_rmdir" => StepOp::CgroupRmdir {
            name: cgroup_ref("name")?,
        },
        "cgroup_enter" => StepOp::CgroupEnter {
            name: cgroup_ref("name")?,
        },
        "write" => {
            let path = file("file")?;
            let trunc = flag("trunc")?;
            if trunc {
                // The filesystem the file lies on: the longest mountpoint
                // that is a prefix of its path.
                let on = ctx
                    .filesystems
                    .iter()
                    .filter(|f| {
                        path.strip_prefix(f.2)
                            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                    })
                    .max_by_key(|f| f.2.len());
                if let Some(&(name, ty, _)) = on.filter(|f| f.1 != FsType::Btrfs) {
                    let vspan = r.value_span("trunc");
                    return Err(src.error(
                        &vspan,
                        Some("trunc"),
                        ErrorKind::InvalidValue,
                        format!(
                            "trunc in {where_}: '{path}' is on filesystem '{name}' ({}); open(O_TRUNC) is modelled on btrfs only",
                            ty.name()
                        ),
                    ));
                }
            }
            StepOp::Write {
                file: path,
                size: pos_size("size")?,
                bs: pos_size("bs")?,
                fsync: flag("fsync")?,
                trunc,
            }
        }
        "read" => StepOp::Read {
            file: file("file")?,
            size: pos_size("size")?,
            bs: pos_size("bs")?,
        },
        "exec" => StepOp::Exec {
            cost_ns: val!("cost", as_duration),
        },
        "reuse_device" => {
            let fs = filesystem("filesystem")?;
            if ctx
                .filesystems
                .iter()
                .any(|f| f.0 == fs && f.1 == FsType::Tmpfs)
            {
                let vspan = r.value_span("filesystem");
                return Err(src.error(
                    &vspan,
                    Some("filesystem"),
                    ErrorKind::InvalidValue,
                    format!("reuse_device in {where_}: filesystem '{fs}' is tmpfs and has no device to reuse"),
                ));
            }
            StepOp::ReuseDevice { filesystem: fs }
        }
        "create_files" => StepOp::CreateFiles {
            dir: file("dir")?,
            count: val!("count", |v| as_int(v, 1, u64::from(u32::MAX))).unwrap_or(1),
            size: size("size")?,
        },
        _ => unreachable_op(),
    };
    let record: Option<String> = val!("record", string);
    if let (Some(r), Some((_, v))) = (&record, get("record")) {
        if !valid_metric_name(r) {
            return Err(src.error(
                &v.span(),
                Some("record"),
                ErrorKind::InvalidValue,
                format!("'record' = \"{r}\" in {where_} is not a metric name (letters, digits, '_', '.', '-')"),
            ));
        }
    }
    Ok(Step {
        op,
        record,
        exec: flag("exec")?,
        end_run_after_ns: val!("end_run_after", as_duration),
        line: src.line(span.start),
    })
}

/// Reads typed values of one step's keys.
struct StepReader<'a> {
    src: &'a SourceMap,
    table: &'a SpannedTable,
    where_: &'a str,
    span: &'a std::ops::Range<usize>,
}

impl StepReader<'_> {
    /// The value of `k` read with `f` (None if absent); errors point at the value.
    fn get<T>(
        &self,
        k: &str,
        f: impl Fn(&toml::Value) -> Result<T, KeyError>,
    ) -> Result<Option<T>, ScenarioError> {
        match self.table.iter().find(|(key, _)| key.get_ref() == k) {
            Some((_, v)) => f(v.get_ref())
                .map(Some)
                .map_err(|e| key_error(self.src, &v.span(), k, self.where_, e)),
            None => Ok(None),
        }
    }

    /// The span of `k`'s value, or of the whole step.
    fn value_span(&self, k: &str) -> std::ops::Range<usize> {
        self.table
            .iter()
            .find(|(key, _)| key.get_ref() == k)
            .map_or(self.span.clone(), |(_, v)| v.span())
    }
}

/// Ops are matched against `STEP_OPS` above; a name there without a case
/// here would be a programming error, reported as a plain `sync`.
fn unreachable_op() -> StepOp {
    StepOp::Sync
}

/// A list of CPU numbers, each below `cpus`, no duplicates.
pub(crate) fn cpu_list(v: &toml::Value, cpus: u32) -> Result<Vec<u32>, KeyError> {
    let Some(arr) = v.as_array() else {
        return Err(KeyError::invalid(
            "expected a list of CPU numbers such as [0, 1, 2, 3]",
        ));
    };
    if arr.is_empty() {
        return Err(KeyError::invalid("the CPU list is empty"));
    }
    let mut out = Vec::with_capacity(arr.len());
    for c in arr {
        let n = c.as_integer().ok_or_else(|| {
            KeyError::invalid("expected a list of CPU numbers such as [0, 1, 2, 3]")
        })?;
        let n = u32::try_from(n).ok().filter(|&n| n < cpus).ok_or_else(|| {
            KeyError::range(format!(
                "CPU {n} is out of range: machine.cpus = {cpus} (CPUs 0..={})",
                cpus.saturating_sub(1)
            ))
        })?;
        if out.contains(&n) {
            return Err(KeyError::invalid(format!("CPU {n} is listed twice")));
        }
        out.push(n);
    }
    Ok(out)
}

/// Turns a [`KeyError`] about `key` at `span` into a located error.
pub(crate) fn key_error(
    src: &SourceMap,
    span: &std::ops::Range<usize>,
    key: &str,
    where_: &str,
    e: KeyError,
) -> ScenarioError {
    match e {
        KeyError::Unknown(allowed) => src.error(
            span,
            Some(key),
            ErrorKind::UnknownKey,
            format!(
                "key '{key}' unknown in {where_} (expected one of: {})",
                allowed.join(", ")
            ),
        ),
        KeyError::Invalid(kind, msg) => src.error(
            span,
            Some(key),
            kind,
            format!("invalid '{key}' in {where_}: {msg}"),
        ),
    }
}

/// "known: a, b" or "none defined".
pub(crate) fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.collect();
    if v.is_empty() {
        "none defined".to_string()
    } else {
        format!("known: {}", v.join(", "))
    }
}
