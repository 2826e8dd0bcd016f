//! The job-file reader: sections, `key=value` lines, comments, resolution of
//! `[global]` into jobs, and semantic checks.
//!
//! Mirrors fio's `init.c` `parse_jobs_ini()`: lines starting with `;` or `#`
//! are comments, and `parse.c` `strip_blank_end()` cuts a line at the first
//! `;` or `#` (inline comments); `[global]` options go into the defaults that
//! every *later* job section copies when it starts (so a second `[global]`
//! affects only the jobs after it, and globals accumulate); a job's own options
//! then override them, the last assignment winning. Checks fio makes elsewhere
//! are applied per job: `filesetup.c` `setup_files()` "you need to specify
//! size=", `time_based` needing a runtime, engine options (`uncached`) only
//! for the engines that define them.
//!
//! Not supported (errors): `$VAR`/`${VAR}` expansion and fio's `$pagesize`
//! style keywords, `include`, options before the first section.

use super::job::{FioJob, OptionSource};
use super::options::{
    apply, closest_option, find_option, parse_value, supported_list, OptValue, OptionSpec,
};
use super::{FioError, FioErrorKind};

/// One `key[=value]` line, parsed.
#[derive(Clone, Debug)]
struct Assignment {
    spec: &'static OptionSpec,
    value: OptValue,
    src: OptionSource,
}

/// A job section as read: the globals in force at its header, then its own lines.
#[derive(Debug)]
struct RawJob {
    section: String,
    line: u32,
    inherited: Vec<Assignment>,
    own: Vec<Assignment>,
}

enum Section {
    None,
    Global,
    Job(usize),
}

struct Ctx<'a> {
    origin: &'a str,
}

impl Ctx<'_> {
    fn err(
        &self,
        line: u32,
        option: Option<&str>,
        kind: FioErrorKind,
        message: String,
    ) -> FioError {
        FioError {
            origin: self.origin.to_string(),
            line,
            option: option.map(str::to_string),
            kind,
            message,
        }
    }
}

/// Cuts a line at the first `;` or `#` and trims it (fio `strip_blank_end()`).
fn strip_comment(line: &str) -> &str {
    let end = line.find([';', '#']).unwrap_or(line.len());
    line[..end].trim()
}

/// Parses job-file text. `line_offset` is added to every reported line (for
/// text embedded in a larger file: pass the line number just before the text).
pub fn parse_text(text: &str, origin: &str, line_offset: u32) -> Result<Vec<FioJob>, FioError> {
    let ctx = Ctx { origin };
    let mut globals: Vec<Assignment> = Vec::new();
    let mut raw_jobs: Vec<RawJob> = Vec::new();
    let mut cur = Section::None;

    for (idx, raw_line) in text.lines().enumerate() {
        let line = line_offset.saturating_add(u32::try_from(idx + 1).unwrap_or(u32::MAX));
        let s = strip_comment(raw_line);
        if s.is_empty() {
            continue;
        }
        if s.contains('$') {
            return Err(ctx.err(
                line,
                None,
                FioErrorKind::Unsupported,
                format!("'{s}': variable expansion ('$...') is not supported; write the value out"),
            ));
        }
        if let Some(rest) = s.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(ctx.err(
                    line,
                    None,
                    FioErrorKind::Syntax,
                    format!("'{s}': a section header must look like [name]"),
                ));
            };
            let name = name.trim();
            if name.is_empty() || name.contains(['[', ']']) {
                return Err(ctx.err(
                    line,
                    None,
                    FioErrorKind::Syntax,
                    format!("'{s}': bad section name"),
                ));
            }
            if name == "global" {
                cur = Section::Global;
            } else {
                raw_jobs.push(RawJob {
                    section: name.to_string(),
                    line,
                    inherited: globals.clone(),
                    own: Vec::new(),
                });
                cur = Section::Job(raw_jobs.len() - 1);
            }
            continue;
        }
        let (key, value) = match s.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (s, None),
        };
        if key == "include" || key.starts_with("include ") {
            return Err(ctx.err(
                line,
                Some("include"),
                FioErrorKind::Unsupported,
                "'include' is not supported; put the jobs in this file".to_string(),
            ));
        }
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(ctx.err(
                line,
                None,
                FioErrorKind::Syntax,
                format!("'{s}': expected 'option=value' or a bare flag option"),
            ));
        }
        let where_ = match &cur {
            Section::None => {
                return Err(ctx.err(
                    line,
                    Some(key),
                    FioErrorKind::Syntax,
                    format!(
                        "option '{key}' outside of a [section]; put it under [global] or a job"
                    ),
                ))
            }
            Section::Global => "[global]".to_string(),
            Section::Job(i) => format!("job '{}'", raw_jobs[*i].section),
        };
        let Some(spec) = find_option(key) else {
            let hint = closest_option(key)
                .map(|c| format!("did you mean '{c}'? "))
                .unwrap_or_default();
            return Err(ctx.err(
                line,
                Some(key),
                FioErrorKind::UnknownOption,
                format!(
                    "unknown option '{key}' in {where_} ({hint}supported: {})",
                    supported_list()
                ),
            ));
        };
        let parsed = parse_value(spec, value).map_err(|reason| match value {
            None => ctx.err(
                line,
                Some(key),
                FioErrorKind::BadValue,
                format!("option '{key}' in {where_} needs a value (e.g. {key}=1)"),
            ),
            Some(v) => ctx.err(
                line,
                Some(key),
                FioErrorKind::BadValue,
                format!("bad value '{v}' for '{key}': {reason}"),
            ),
        })?;
        let section = match &cur {
            Section::Job(i) => raw_jobs[*i].section.clone(),
            _ => "global".to_string(),
        };
        let a = Assignment {
            spec,
            value: parsed,
            src: OptionSource {
                line,
                section,
                key: key.to_string(),
                value: value.map(str::to_string),
            },
        };
        match cur {
            Section::Job(i) => raw_jobs[i].own.push(a),
            _ => globals.push(a),
        }
    }

    if raw_jobs.is_empty() {
        return Err(ctx.err(
            line_offset,
            None,
            FioErrorKind::Semantic,
            "no jobs defined (only [global] or nothing)".to_string(),
        ));
    }

    let mut jobs = Vec::with_capacity(raw_jobs.len());
    for rj in &raw_jobs {
        let mut job = FioJob::with_defaults(&rj.section, origin, rj.line);
        for a in rj.inherited.iter().chain(&rj.own) {
            apply(&mut job, a.spec, &a.value, &a.src);
        }
        check_job(&mut job)?;
        jobs.push(job);
    }
    assign_groups(&mut jobs);
    Ok(jobs)
}

/// Semantic checks on a resolved job; clamps `iodepth` for sync engines.
fn check_job(job: &mut FioJob) -> Result<(), FioError> {
    if job.size_bytes.is_none() && job.filesize_bytes.is_none() {
        return Err(job.error_at(
            "size",
            "you need to specify size= (fio will not lay out a new file without size= or filesize=)",
        ));
    }
    if job.time_based && job.runtime_ns.is_none() {
        return Err(job.error_at(
            "time_based",
            "time_based needs a runtime= (or it never ends)",
        ));
    }
    if job.sources.contains_key("uncached") && !job.ioengine.has_uncached_option() {
        return Err(job.error_at(
            "uncached",
            format!(
                "'uncached' is an option of the io_uring and pvsync2 engines, not of ioengine={}",
                job.ioengine.fio_name()
            ),
        ));
    }
    if job.direct && job.uncached {
        let direct_opt = ["direct", "buffered"]
            .into_iter()
            .max_by_key(|o| job.line_of(o).unwrap_or(0))
            .unwrap_or("direct");
        let direct_line = job.line_of(direct_opt).unwrap_or(job.section_line);
        let uncached_line = job.line_of("uncached").unwrap_or(job.section_line);
        let (at, other, other_line) = if uncached_line >= direct_line {
            ("uncached", direct_opt, direct_line)
        } else {
            (direct_opt, "uncached", uncached_line)
        };
        return Err(job.error_at(
            at,
            format!(
                "uncached=1 (RWF_DONTCACHE, buffered I/O only) conflicts with O_DIRECT \
                 ('{other}' set at line {other_line})"
            ),
        ));
    }
    if job.ioengine.is_sync() {
        job.iodepth = 1;
    }
    Ok(())
}

/// fio `init.c` `add_job()`: a job with `stonewall` or `new_group` starts a new
/// reporting group if the current group already has jobs.
fn assign_groups(jobs: &mut [FioJob]) {
    let mut groupid = 0u32;
    let mut jobs_in_group = 0u64;
    for job in jobs.iter_mut() {
        if (job.stonewall || job.new_group) && jobs_in_group > 0 {
            groupid += 1;
            jobs_in_group = 0;
        }
        job.groupid = groupid;
        jobs_in_group += u64::from(job.numjobs);
    }
}
