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
//! `include FILE` splices another file (relative to the including one), and
//! `${VAR}` expands from the environment, `$pagesize` to 4096. Options that
//! change nothing the model represents ([`super::options::NOT_MODELLED`]) are
//! accepted and returned once each as [`NotModelled`].
//!
//! A job without `size=` is accepted when its files are sized otherwise
//! (a block device, `fill_device`, or a file an earlier job lays out); the
//! size is then taken when the file is opened.
//!
//! Not supported (errors): `$ncpus`, `$mb_memory` and fio's `{ }` arithmetic,
//! options before the first section.

use super::job::{FioJob, OptionSource};
use super::options::{
    apply, closest_option, find_not_modelled, find_option, parse_value, supported_list, OptValue,
    OptionSpec,
};
use super::{FioError, FioErrorKind, NotModelled};

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

/// One line of the job file after `include` splicing and `${VAR}` expansion.
struct SrcLine {
    /// The file it came from (an included file names itself).
    origin: String,
    /// Its line there (line offset applied for the top-level text).
    line: u32,
    /// The text, comment stripped and variables expanded.
    text: String,
}

/// Deepest `include` nesting (fio has no limit; this catches a file that
/// includes itself).
const MAX_INCLUDE_DEPTH: u32 = 16;

/// fio's reserved keyword `$pagesize` (`init.c` `fio_keywords[]`): the page
/// size of the (modelled) machine, 4 KiB.
const PAGESIZE: &str = "4096";

/// Expands `${VAR}` from the environment and the keyword `$pagesize`, as fio's
/// `init.c` `fio_option_dup_subs()` / `expand_keywords` do. An unset variable is
/// an error (fio would pass the text through and then fail on it).
fn expand_vars(s: &str, err: &dyn Fn(String) -> FioError) -> Result<String, FioError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(body) = after.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                return Err(err(format!("'{s}': '${{' without a closing '}}'")));
            };
            let name = &body[..end];
            match std::env::var(name) {
                Ok(v) => out.push_str(&v),
                Err(_) => {
                    return Err(err(format!(
                        "'{s}': environment variable '{name}' is not set (fio expands \
                         ${{{name}}} from the environment)"
                    )))
                }
            }
            rest = &body[end + 1..];
        } else if let Some(r) = after.strip_prefix("pagesize") {
            out.push_str(PAGESIZE);
            rest = r;
        } else {
            let word: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            return Err(err(format!(
                "'{s}': '${word}' is not supported: wbsim expands ${{VAR}} from the \
                 environment and $pagesize; $ncpus and $mb_memory depend on the host \
                 fio runs on, write the value out"
            )));
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Reads `text` into lines, splicing `include FILE` (relative to the including
/// file's directory, fio `init.c` `__parse_jobs_ini()`) and expanding
/// variables.
fn source_lines(
    text: &str,
    origin: &str,
    line_offset: u32,
    depth: u32,
    out: &mut Vec<SrcLine>,
) -> Result<(), FioError> {
    let ctx = Ctx { origin };
    for (idx, raw_line) in text.lines().enumerate() {
        let line = line_offset.saturating_add(u32::try_from(idx + 1).unwrap_or(u32::MAX));
        let s = strip_comment(raw_line);
        if s.is_empty() {
            continue;
        }
        let err = |m: String| ctx.err(line, None, FioErrorKind::Unsupported, m);
        let s = if s.contains('$') {
            expand_vars(s, &err)?
        } else {
            s.to_string()
        };
        if let Some(file) = s.strip_prefix("include ").map(str::trim) {
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(ctx.err(
                    line,
                    Some("include"),
                    FioErrorKind::Semantic,
                    format!("include nested deeper than {MAX_INCLUDE_DEPTH} (a loop?)"),
                ));
            }
            let base = std::path::Path::new(origin)
                .parent()
                .unwrap_or(std::path::Path::new(""));
            let path = base.join(file);
            let inc = std::fs::read_to_string(&path).map_err(|e| {
                ctx.err(
                    line,
                    Some("include"),
                    FioErrorKind::Io,
                    format!("include {file}: cannot read '{}': {e}", path.display()),
                )
            })?;
            source_lines(&inc, &path.display().to_string(), 0, depth + 1, out)?;
            continue;
        }
        out.push(SrcLine {
            origin: origin.to_string(),
            line,
            text: s,
        });
    }
    Ok(())
}

/// Parses job-file text. `line_offset` is added to every reported line (for
/// text embedded in a larger file: pass the line number just before the text).
pub fn parse_text(
    text: &str,
    origin: &str,
    line_offset: u32,
) -> Result<(Vec<FioJob>, Vec<NotModelled>), FioError> {
    let mut lines = Vec::new();
    source_lines(text, origin, line_offset, 0, &mut lines)?;
    let top = Ctx { origin };
    let mut globals: Vec<Assignment> = Vec::new();
    let mut raw_jobs: Vec<RawJob> = Vec::new();
    let mut cur = Section::None;
    let mut not_modelled: Vec<NotModelled> = Vec::new();

    for sl in &lines {
        let ctx = Ctx { origin: &sl.origin };
        let line = sl.line;
        let s = sl.text.as_str();
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
        if key == "include" {
            return Err(ctx.err(
                line,
                Some("include"),
                FioErrorKind::Syntax,
                "'include' takes a file name: include other.fio".to_string(),
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
        if let Some((name, why)) = find_not_modelled(key) {
            if !not_modelled.iter().any(|n| n.option == name) {
                not_modelled.push(NotModelled {
                    origin: sl.origin.clone(),
                    line,
                    option: name.to_string(),
                    why: why.to_string(),
                });
            }
            continue;
        }
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
        return Err(top.err(
            line_offset,
            None,
            FioErrorKind::Semantic,
            "no jobs defined (only [global] or nothing)".to_string(),
        ));
    }

    let mut jobs: Vec<FioJob> = Vec::with_capacity(raw_jobs.len());
    for rj in &raw_jobs {
        let mut job = FioJob::with_defaults(&rj.section, origin, rj.line);
        for a in rj.inherited.iter().chain(&rj.own) {
            apply(&mut job, a.spec, &a.value, &a.src);
        }
        check_job(&mut job, &jobs)?;
        jobs.push(job);
    }
    assign_groups(&mut jobs);
    Ok((jobs, not_modelled))
}

/// Whether fio can size `job`'s files without `size=`: a block device has
/// its capacity, `fill_device` writes until the device is full, and a file
/// an earlier job of the file lays out exists by the time this one opens it
/// (fio `filesetup.c` `get_file_sizes()`).
fn sized_elsewhere(job: &FioJob, earlier: &[FioJob]) -> bool {
    let files: Vec<String> = job.instances().into_iter().flat_map(|i| i.files).collect();
    let known = |f: &String| {
        f.starts_with("/dev/")
            || earlier
                .iter()
                .any(|e| e.instances().iter().any(|i| i.files.contains(f)))
    };
    job.fill_device || (!files.is_empty() && files.iter().all(known))
}

/// Semantic checks on a resolved job (`earlier`: the jobs before it in the
/// file); clamps `iodepth` for sync engines.
fn check_job(job: &mut FioJob, earlier: &[FioJob]) -> Result<(), FioError> {
    if job.size_bytes.is_none() && job.filesize_bytes.is_none() && !sized_elsewhere(job, earlier) {
        return Err(job.error_at(
            "size",
            "you need to specify size= (fio will not lay out a new file without size= or filesize=)",
        ));
    }
    if job.zonemode_strided && job.zonesize_bytes == 0 {
        return Err(job.error_at("zonemode", "zonemode=strided needs zonesize="));
    }
    if let Some(w) = &job.wait_for {
        if !earlier.iter().any(|e| &e.name == w) {
            return Err(job.error_at(
                "wait_for",
                format!("wait_for={w}: no earlier job of that name (fio waits only for a job defined before)"),
            ));
        }
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
    // rate_iops caps I/Os per second; the pacing works in bytes per second
    // (fio's rate code converts the same way: iops x block size). The lower
    // of rate and rate_iops wins.
    if let Some(iops) = job.rate_iops_read {
        let b = iops.saturating_mul(job.mean_bs(false));
        job.rate_read_bytes_per_s = Some(job.rate_read_bytes_per_s.map_or(b, |r| r.min(b)));
    }
    if let Some(iops) = job.rate_iops_write {
        let b = iops.saturating_mul(job.mean_bs(true));
        job.rate_write_bytes_per_s = Some(job.rate_write_bytes_per_s.map_or(b, |r| r.min(b)));
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
