//! fio's own output of a `wbsim run`: `--output-format=normal|json|json+`
//! (fio's spelling, a comma list allowed), the log files of
//! `write_bw_log`/`write_lat_log`/`write_iops_log`, and the short fio-style
//! job summary printed after every run. Not kernel code: this mirrors fio's
//! `stat.c` (`show_run_stats()`, `show_thread_status_json()`,
//! `add_ddir_status_json()`, `show_thread_status_normal()`,
//! `show_group_stats()`), `lib/num2str.c` and `diskutil.c`.
//!
//! Deterministic: `timestamp`, `timestamp_ms` and `time` are the simulated
//! end of the run counted from the Unix epoch (never the wall clock), and
//! `fio version` is `wbsim-VERSION`. Which fields are left out, and why, is
//! listed in docs/fio-output.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use crate::experiment::results::Results;
use crate::workload::fio::iolog::{job_logs, LogFile, BATCH_LABELS, DEPTH_LABELS};
use crate::workload::fio::output::{
    FioBins, FioDdirStats, FioJobDetail, FioJobOutput, FioLatStats, LabelledDist, LAT_M_LABELS,
    LAT_NU_LABELS,
};
use crate::workload::fio::{FioJob, FIO_DEFAULT_PERCENTILES};

/// The output formats asked for, in the order given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// fio's human-readable text.
    Normal,
    /// fio's JSON.
    Json,
    /// fio's JSON with latency bins.
    JsonPlus,
}

/// The formats of one `--output-format`, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFormats(pub Vec<OutputFormat>);

/// Parses fio's `--output-format` value: `normal`, `json`, `json+`, or a
/// comma list of them (`terse` is not produced).
pub fn parse_output_formats(s: &str) -> Result<OutputFormats, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let f = match part.trim() {
            "normal" => OutputFormat::Normal,
            "json" => OutputFormat::Json,
            "json+" => OutputFormat::JsonPlus,
            "terse" => return Err("'terse' is not produced by wbsim (normal, json, json+)".into()),
            other => return Err(format!("'{other}': expected normal, json or json+")),
        };
        if !out.contains(&f) {
            out.push(f);
        }
    }
    // fio writes one JSON document: json+ includes json.
    if out.contains(&OutputFormat::JsonPlus) {
        out.retain(|f| *f != OutputFormat::Json);
    }
    Ok(OutputFormats(out))
}

/// An ordered JSON value (fio's key order; serde_json's map sorts keys).
#[derive(Clone, Debug, PartialEq)]
pub enum J {
    /// An object, keys in order.
    Obj(Vec<(String, J)>),
    /// An array.
    Arr(Vec<J>),
    /// A string.
    Str(String),
    /// An unsigned integer.
    U(u64),
    /// A signed integer.
    I(i64),
    /// A float (non-finite written as 0, as fio never writes NaN).
    F(f64),
}

impl Serialize for J {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            J::Obj(kv) => {
                let mut m = s.serialize_map(Some(kv.len()))?;
                for (k, v) in kv {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            J::Arr(a) => {
                let mut q = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    q.serialize_element(v)?;
                }
                q.end()
            }
            J::Str(x) => s.serialize_str(x),
            J::U(x) => s.serialize_u64(*x),
            J::I(x) => s.serialize_i64(*x),
            J::F(x) => s.serialize_f64(if x.is_finite() { *x } else { 0.0 }),
        }
    }
}

/// An object from `(key, value)` pairs.
fn obj(kv: Vec<(&str, J)>) -> J {
    J::Obj(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// A fio percentage map in the order of `labels`.
fn dist(d: &LabelledDist, labels: &[&str]) -> J {
    J::Obj(
        labels
            .iter()
            .map(|l| (l.to_string(), J::F(d.get(l))))
            .collect(),
    )
}

/// One results entry with what belongs to it.
pub struct Entry<'a> {
    /// The results' fio-shaped entry.
    pub out: FioJobOutput,
    /// The job it reports (None for results of another origin).
    pub job: Option<&'a FioJob>,
    /// Its bins and logged I/Os (None when the results were read from a
    /// file).
    pub detail: Option<&'a FioJobDetail>,
}

/// Pairs the results' job entries with their fio jobs: jobs run in file
/// order, each giving one entry (`group_reporting`) or one per clone.
pub fn entries<'a>(r: &'a Results, jobs: &'a [FioJob]) -> Vec<Entry<'a>> {
    let mut owners: Vec<&FioJob> = Vec::new();
    for j in jobs {
        let n = if j.group_reporting { 1 } else { j.numjobs };
        owners.extend(std::iter::repeat_n(j, n as usize));
    }
    r.jobs
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let out: FioJobOutput = serde_json::from_value(v.clone()).unwrap_or_default();
            let job = owners
                .get(i)
                .copied()
                .filter(|j| j.name == out.jobname)
                .or_else(|| jobs.iter().find(|j| j.name == out.jobname));
            Entry {
                out,
                job,
                detail: r.fio_detail.get(i),
            }
        })
        .collect()
}

/// The simulated end of the run, ns (`run.simulated_time`).
fn sim_end_ns(r: &Results) -> u64 {
    r.metrics
        .get("run.simulated_time")
        .and_then(|m| m.stat("value"))
        .map_or(0, |s| (s * 1e9).round() as u64)
}

/// C `ctime()` of `secs` since the epoch, UTC, without the newline
/// ("Thu Jan  1 00:00:10 1970").
pub fn ctime(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // humantime's RFC 3339 form, "YYYY-MM-DDTHH:MM:SSZ", re-ordered.
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    let iso = humantime::format_rfc3339_seconds(t).to_string();
    let (y, m, d, hms) = (&iso[0..4], &iso[5..7], &iso[8..10], &iso[11..19]);
    let month = m.parse::<usize>().unwrap_or(1).clamp(1, 12);
    let day: u32 = d.parse().unwrap_or(1);
    format!(
        "{} {} {day:>2} {hms} {y}",
        DAYS[((secs / 86_400) % 7) as usize],
        MONTHS[month - 1],
    )
}

/// Options of `section` as written, in file order (`"global"` for the
/// global ones), from every job's sources without repeats.
fn options_of(jobs: &[&FioJob], section: &str) -> J {
    let mut seen: Vec<(u32, String, String)> = Vec::new();
    for j in jobs {
        for src in j.sources.values() {
            if src.section == section && !seen.iter().any(|(_, k, _)| *k == src.key) {
                seen.push((
                    src.line,
                    src.key.clone(),
                    src.value.clone().unwrap_or_default(),
                ));
            }
        }
    }
    seen.sort();
    J::Obj(seen.into_iter().map(|(_, k, v)| (k, J::Str(v))).collect())
}

/// fio's latency object: min, max, mean, stddev, N; with `bins` (fio's
/// buckets) the percentiles computed from them as fio does, and the bins
/// themselves when `plus`.
fn lat_json(l: &FioLatStats, bins: Option<&FioBins>, plus: bool) -> J {
    let mut kv = vec![
        ("min", J::U(l.min)),
        ("max", J::U(l.max)),
        ("mean", J::F(l.mean)),
        ("stddev", J::F(l.stddev)),
        ("N", J::U(l.n)),
    ];
    if l.n > 0 {
        let pcts = match bins {
            Some(b) if b.total() > 0 => Some(b.percentiles(&FIO_DEFAULT_PERCENTILES)),
            Some(_) => None,
            // Results read back from a file: their stored percentiles.
            None => l.percentile.as_ref().map(|p| {
                p.0.iter()
                    .filter_map(|(k, v)| k.parse::<f64>().ok().map(|p| (p, *v)))
                    .collect()
            }),
        };
        if let Some(p) = pcts {
            kv.push((
                "percentile",
                J::Obj(
                    p.into_iter()
                        .map(|(p, v)| (format!("{p:.6}"), J::U(v)))
                        .collect(),
                ),
            ));
        }
        if plus {
            if let Some(b) = bins.filter(|b| b.total() > 0) {
                kv.push((
                    "bins",
                    J::Obj(
                        b.0.iter()
                            .map(|&(idx, c)| {
                                (
                                    crate::workload::fio::output::plat_idx_to_val(idx).to_string(),
                                    J::U(c),
                                )
                            })
                            .collect(),
                    ),
                ));
            }
        }
    }
    obj(kv)
}

/// fio's `add_ddir_status_json()` for one direction.
fn ddir_json(d: &FioDdirStats, detail: Option<&FioJobDetail>, dir: usize, plus: bool) -> J {
    let clat_bins = detail.map(|x| &x.clat_bins[dir]);
    // fio writes percentiles for clat only (lat_percentiles=0 by default).
    let no_pct = |l: &FioLatStats| FioLatStats {
        percentile: None,
        ..l.clone()
    };
    obj(vec![
        ("io_bytes", J::U(d.io_bytes)),
        ("io_kbytes", J::U(d.io_kbytes)),
        ("bw_bytes", J::U(d.bw_bytes)),
        ("bw", J::U(d.bw)),
        ("iops", J::F(d.iops)),
        ("runtime", J::U(d.runtime)),
        ("total_ios", J::U(d.total_ios)),
        ("short_ios", J::U(d.short_ios)),
        ("drop_ios", J::U(d.drop_ios)),
        ("slat_ns", lat_json(&no_pct(&d.slat_ns), None, false)),
        ("clat_ns", lat_json(&d.clat_ns, clat_bins, plus)),
        ("lat_ns", lat_json(&no_pct(&d.lat_ns), None, false)),
        ("bw_min", J::U(d.bw_min)),
        ("bw_max", J::U(d.bw_max)),
        ("bw_agg", J::F(d.bw_agg)),
        ("bw_mean", J::F(d.bw_mean)),
        ("bw_dev", J::F(d.bw_dev)),
        ("bw_samples", J::U(d.bw_samples)),
        ("iops_min", J::U(d.iops_min)),
        ("iops_max", J::U(d.iops_max)),
        ("iops_mean", J::F(d.iops_mean)),
        ("iops_stddev", J::F(d.iops_stddev)),
        ("iops_samples", J::U(d.iops_samples)),
    ])
}

/// fio's JSON document of a run (`plus`: json+, with clat bins).
pub fn fio_json(r: &Results, jobs: &[FioJob], plus: bool) -> J {
    let end_ns = sim_end_ns(r);
    let ts = end_ns / 1_000_000_000;
    let es = entries(r, jobs);
    let all: Vec<&FioJob> = jobs.iter().collect();
    let mut jv = Vec::new();
    for e in &es {
        let o = &e.out;
        let mine: Vec<&FioJob> = e.job.into_iter().collect();
        let sync_bins = e.detail.map(|d| &d.sync_bins);
        jv.push(obj(vec![
            ("jobname", J::Str(o.jobname.clone())),
            ("groupid", J::U(u64::from(o.groupid))),
            ("error", J::I(i64::from(o.error))),
            ("eta", J::U(0)),
            ("elapsed", J::U(end_ns.div_ceil(1_000_000_000))),
            (
                "job options",
                e.job
                    .map_or(J::Obj(Vec::new()), |j| options_of(&mine, &j.section)),
            ),
            ("read", ddir_json(&o.read, e.detail, 0, plus)),
            ("write", ddir_json(&o.write, e.detail, 1, plus)),
            ("trim", ddir_json(&FioDdirStats::default(), None, 2, plus)),
            (
                "sync",
                obj(vec![
                    ("total_ios", J::U(o.sync.total_ios)),
                    ("lat_ns", lat_json(&o.sync.lat_ns, sync_bins, false)),
                ]),
            ),
            ("job_runtime", J::U(o.job_runtime)),
            ("usr_cpu", J::F(o.usr_cpu)),
            ("sys_cpu", J::F(o.sys_cpu)),
            ("iodepth_level", dist(&o.iodepth_level, &DEPTH_LABELS)),
            ("iodepth_submit", dist(&o.iodepth_submit, &BATCH_LABELS)),
            ("iodepth_complete", dist(&o.iodepth_complete, &BATCH_LABELS)),
            ("latency_ns", dist(&o.latency_ns, &LAT_NU_LABELS)),
            ("latency_us", dist(&o.latency_us, &LAT_NU_LABELS)),
            ("latency_ms", dist(&o.latency_ms, &LAT_M_LABELS)),
            ("latency_depth", J::U(u64::from(o.latency_depth))),
            ("latency_target", J::U(o.latency_target)),
            ("latency_percentile", J::F(o.latency_percentile)),
            ("latency_window", J::U(o.latency_window)),
        ]));
    }
    let disks = r
        .fio_disks
        .iter()
        .map(|d| {
            obj(vec![
                ("name", J::Str(d.name.clone())),
                ("read_ios", J::U(d.read_ios)),
                ("write_ios", J::U(d.write_ios)),
                ("read_merges", J::U(d.read_merges)),
                ("write_merges", J::U(d.write_merges)),
                ("read_ticks", J::U(d.read_ticks)),
                ("write_ticks", J::U(d.write_ticks)),
                ("in_queue", J::U(d.in_queue)),
                ("util", J::F(d.util)),
            ])
        })
        .collect();
    obj(vec![
        (
            "fio version",
            J::Str(format!("wbsim-{}", env!("CARGO_PKG_VERSION"))),
        ),
        ("timestamp", J::U(ts)),
        ("timestamp_ms", J::U(end_ns / 1_000_000)),
        ("time", J::Str(ctime(ts))),
        ("global options", options_of(&all, "global")),
        ("jobs", J::Arr(jv)),
        ("disk_util", J::Arr(disks)),
    ])
}

/// fio's `num2str()`: `num` with at most `maxlen` digits, scaled by 1000
/// (SI) or 1024 (`pow2`, IEC), with `unit` appended.
pub fn num2str(num: u64, maxlen: usize, pow2: bool, unit: &str) -> String {
    const SI: [&str; 6] = ["", "k", "M", "G", "T", "P"];
    const IEC: [&str; 6] = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let prefixes = if pow2 { IEC } else { SI };
    let thousand: u64 = if pow2 { 1024 } else { 1000 };
    let mut num = num;
    let mut post = 0usize;
    let mut modulo: Option<u64> = None;
    let mut carry = false;
    while post < prefixes.len() {
        if num.to_string().len() <= maxlen {
            break;
        }
        let m = num % thousand;
        num /= thousand;
        carry = m >= thousand / 2;
        modulo = Some(m);
        post += 1;
    }
    let post = post.min(prefixes.len() - 1);
    let Some(m) = modulo else {
        return format!("{num}{}{unit}", prefixes[post]);
    };
    let len = num.to_string().len();
    let decimals = maxlen.saturating_sub(len);
    if decimals <= 1 {
        if carry {
            num += 1;
        }
        return format!("{num}{}{unit}", prefixes[post]);
    }
    let frac = format!("{:.*}", decimals - 1, m as f64 / thousand as f64);
    if frac.starts_with('1') {
        num += 1;
        let zeros = "0".repeat(decimals - 1);
        return format!("{num}.{zeros}{}{unit}", prefixes[post]);
    }
    format!("{num}.{}{}{unit}", &frac[2..], prefixes[post])
}

/// fio's `display_lat()` unit scaling: (divisor, name).
fn lat_scale(min: f64, max: f64, dev: f64) -> (f64, &'static str) {
    if min > 2_000_000.0 && max > 99_999_999.0 && dev > 1_000_000.0 {
        (1e6, "msec")
    } else if min > 2000.0 && max > 99_999.0 && dev > 1000.0 {
        (1e3, "usec")
    } else {
        (1.0, "nsec")
    }
}

/// fio's `display_lat()` line.
fn display_lat(s: &mut String, name: &str, l: &FioLatStats) {
    if l.n == 0 {
        return;
    }
    let (div, base) = lat_scale(l.min as f64, l.max as f64, l.stddev);
    let min = (l.min as f64 / div) as u64;
    let max = (l.max as f64 / div) as u64;
    let _ = writeln!(
        s,
        "    {name} ({base}): min={}, max={}, avg={:5.02}, stdev={:5.02}",
        num2str(min, 6, false, ""),
        num2str(max, 6, false, ""),
        l.mean / div,
        l.stddev / div
    );
}

/// fio's `show_clat_percentiles()` block.
fn show_percentiles(s: &mut String, pre: &str, pcts: &[(f64, u64)]) {
    if pcts.is_empty() {
        return;
    }
    let minv = pcts.iter().map(|p| p.1).min().unwrap_or(0);
    let maxv = pcts.iter().map(|p| p.1).max().unwrap_or(0);
    let (scale_down, divisor, unit) = if minv > 2_000_000 && maxv > 99_999_999 {
        (2, 1_000_000u64, "msec")
    } else if minv > 2000 && maxv > 99_999 {
        (1, 1000, "usec")
    } else {
        (0, 1, "nsec")
    };
    let _ = write!(s, "    {pre} percentiles ({unit}):\n     |");
    let width = (((maxv / divisor) as f64).log10() as usize + 1).max(5);
    let per_line = (80 - 7) / (2 + 10 + width);
    for (j, &(p, v)) in pcts.iter().enumerate() {
        if j != 0 && j % per_line == 0 {
            s.push_str("     |");
        }
        let mut v = v;
        for _ in 0..scale_down {
            v = v.div_ceil(1000);
        }
        let last = j == pcts.len() - 1;
        let _ = write!(
            s,
            " {p:5.2}th=[{v:>width$}]{}",
            if last { '\n' } else { ',' }
        );
        if !last && j % per_line == per_line - 1 {
            s.push('\n');
        }
    }
}

/// fio's `show_lat()`: the non-zero buckets of a latency distribution.
fn show_lat(s: &mut String, d: &LabelledDist, labels: &[&str], msg: &str) {
    let mut line = 0;
    let mut shown = false;
    for label in labels {
        let v = d.get(label);
        if v <= 0.0 {
            continue;
        }
        if line == 0 {
            if shown {
                s.push('\n');
            }
            let _ = write!(s, "  lat ({msg})   : ");
        } else {
            s.push_str(", ");
        }
        shown = true;
        let _ = write!(s, "{label}={v:3.2}%");
        line = (line + 1) % 5;
    }
    if shown {
        s.push('\n');
    }
}

/// A direction's fio header line: `IOPS=..., BW=... (...)(io/runtime)`.
fn ddir_headline(d: &FioDdirStats) -> String {
    let iops = (1000 * d.total_ios).checked_div(d.runtime).unwrap_or(0);
    format!(
        "IOPS={}, BW={} ({})({}/{}msec)",
        num2str(iops, 4, false, ""),
        num2str(d.bw_bytes, 4, true, "B/s"),
        num2str(d.bw_bytes, 4, false, "B/s"),
        num2str(d.io_bytes, 4, true, "B"),
        d.runtime
    )
}

/// fio's `show_ddir_status()` for one direction.
fn ddir_normal(s: &mut String, name: &str, d: &FioDdirStats, bins: Option<&FioBins>) {
    if d.runtime == 0 || d.total_ios == 0 {
        return;
    }
    let _ = writeln!(s, "  {name}: {}", ddir_headline(d));
    display_lat(s, "slat", &d.slat_ns);
    display_lat(s, "clat", &d.clat_ns);
    display_lat(s, " lat", &d.lat_ns);
    let pcts = bins
        .filter(|b| b.total() > 0)
        .map(|b| b.percentiles(&FIO_DEFAULT_PERCENTILES))
        .unwrap_or_default();
    show_percentiles(s, "clat", &pcts);
    if d.bw_samples > 0 {
        let (mut min, mut max, mut mean, mut dev, mut unit) =
            (d.bw_min as f64, d.bw_max as f64, d.bw_mean, d.bw_dev, "KiB");
        if mean > 1024.0 * 1024.0 {
            min /= 1024.0;
            max /= 1024.0;
            mean /= 1024.0;
            dev /= 1024.0;
            unit = "MiB";
        }
        let _ = writeln!(
            s,
            "   bw ({unit:>5}/s): min={:5}, max={:5}, per={:3.2}%, avg={mean:5.02}, stdev={dev:5.02}, samples={}",
            min as u64, max as u64, d.bw_agg, d.bw_samples
        );
        let _ = writeln!(
            s,
            "   iops        : min={:5}, max={:5}, avg={:5.02}, stdev={:5.02}, samples={}",
            d.iops_min, d.iops_max, d.iops_mean, d.iops_stddev, d.iops_samples
        );
    }
}

/// The percentages of a fio map as `label=x.x%` joined by ", ".
fn map_line(d: &LabelledDist, labels: &[&str]) -> String {
    labels
        .iter()
        .map(|l| format!("{l}={:3.1}%", d.get(l)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// fio's normal (human) output of a run.
pub fn fio_normal(r: &Results, jobs: &[FioJob]) -> String {
    let mut s = String::new();
    let end_ns = sim_end_ns(r);
    for j in jobs {
        let bs = |b: u64| format!("{b}B-{b}B");
        let _ = writeln!(
            s,
            "{}: (g={}): rw={}, bs=(R) {}, (W) {}, (T) {}, ioengine={}, iodepth={}",
            j.name,
            j.groupid,
            j.rw.fio_name(),
            bs(j.bs_read_bytes),
            bs(j.bs_write_bytes),
            bs(j.bs_read_bytes),
            j.ioengine.fio_name(),
            j.iodepth
        );
    }
    let clones: u32 = jobs.iter().map(|j| j.numjobs).sum();
    let _ = writeln!(
        s,
        "wbsim-{} (simulated)\nStarting {clones} process{}\n",
        env!("CARGO_PKG_VERSION"),
        if clones == 1 { "" } else { "es" }
    );
    let es = entries(r, jobs);
    for e in &es {
        let o = &e.out;
        let n = e
            .job
            .map_or(1, |j| if j.group_reporting { j.numjobs } else { 1 });
        let _ = writeln!(
            s,
            "{}: (groupid={}, jobs={n}): err={:2}: {}",
            o.jobname,
            o.groupid,
            o.error,
            ctime(end_ns / 1_000_000_000)
        );
        let bins = |dir: usize| e.detail.map(|d| &d.clat_bins[dir]);
        ddir_normal(&mut s, "read", &o.read, bins(0));
        ddir_normal(&mut s, "write", &o.write, bins(1));
        if o.sync.total_ios > 0 {
            s.push_str("  fsync/fdatasync/sync_file_range/syncfs:\n");
            display_lat(&mut s, "sync", &o.sync.lat_ns);
            if let Some(d) = e.detail {
                show_percentiles(
                    &mut s,
                    "sync",
                    &d.sync_bins.percentiles(&FIO_DEFAULT_PERCENTILES),
                );
            }
        }
        show_lat(&mut s, &o.latency_ns, &LAT_NU_LABELS, "nsec");
        show_lat(&mut s, &o.latency_us, &LAT_NU_LABELS, "usec");
        show_lat(&mut s, &o.latency_ms, &LAT_M_LABELS, "msec");
        let _ = writeln!(
            s,
            "  cpu          : usr={:3.2}%, sys={:3.2}%",
            o.usr_cpu, o.sys_cpu
        );
        let _ = writeln!(
            s,
            "  IO depths    : {}",
            map_line(&o.iodepth_level, &DEPTH_LABELS)
        );
        let _ = writeln!(
            s,
            "     submit    : {}",
            map_line(&o.iodepth_submit, &BATCH_LABELS)
        );
        let _ = writeln!(
            s,
            "     complete  : {}",
            map_line(&o.iodepth_complete, &BATCH_LABELS)
        );
        let _ = writeln!(
            s,
            "     issued rwts: total={},{},0,0 short=0,0,0,0 dropped=0,0,0,0",
            o.read.total_ios, o.write.total_ios
        );
        let _ = writeln!(
            s,
            "     latency   : target={}, window={}, percentile={:.2}%, depth={}",
            o.latency_target, o.latency_window, o.latency_percentile, o.latency_depth
        );
    }
    // fio's show_group_stats(), per reporting group and direction.
    let mut groups: Vec<u32> = es.iter().map(|e| e.out.groupid).collect();
    groups.sort_unstable();
    groups.dedup();
    for g in groups {
        let _ = writeln!(s, "\nRun status group {g} (all jobs):");
        for (label, pick) in [
            (
                "   READ",
                (|o: &FioJobOutput| &o.read) as fn(&FioJobOutput) -> &FioDdirStats,
            ),
            ("  WRITE", |o: &FioJobOutput| &o.write),
        ] {
            let ds: Vec<&FioDdirStats> = es
                .iter()
                .filter(|e| e.out.groupid == g)
                .map(|e| pick(&e.out))
                .filter(|d| d.runtime > 0)
                .collect();
            if ds.is_empty() {
                continue;
            }
            let io: u64 = ds.iter().map(|d| d.io_bytes).sum();
            let max_run = ds.iter().map(|d| d.runtime).max().unwrap_or(1).max(1);
            let min_run = ds.iter().map(|d| d.runtime).min().unwrap_or(0);
            let agg = io * 1000 / max_run;
            let min_bw = ds.iter().map(|d| d.bw_bytes).min().unwrap_or(0);
            let max_bw = ds.iter().map(|d| d.bw_bytes).max().unwrap_or(0);
            let _ = writeln!(
                s,
                "{label}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={min_run}-{max_run}msec",
                num2str(agg, 4, true, "B/s"),
                num2str(agg, 4, false, "B/s"),
                num2str(min_bw, 4, true, "B/s"),
                num2str(max_bw, 4, true, "B/s"),
                num2str(min_bw, 4, false, "B/s"),
                num2str(max_bw, 4, false, "B/s"),
                num2str(io, 4, true, "B"),
                num2str(io, 4, false, "B"),
            );
        }
    }
    if !r.fio_disks.is_empty() {
        s.push_str("\nDisk stats (read/write):\n");
        for d in &r.fio_disks {
            let _ = writeln!(
                s,
                "  {}: ios={}/{}, merge={}/{}, ticks={}/{}, in_queue={}, util={:3.2}%",
                d.name,
                d.read_ios,
                d.write_ios,
                d.read_merges,
                d.write_merges,
                d.read_ticks,
                d.write_ticks,
                d.in_queue,
                d.util
            );
        }
    }
    s
}

/// The short fio-style summary printed after a run: per job and direction
/// IOPS, bandwidth and clat percentiles (p50, p99, p99.9), and jobs that
/// did not finish their size.
pub fn job_summary(r: &Results, jobs: &[FioJob]) -> String {
    let mut s = String::new();
    let es = entries(r, jobs);
    if es.is_empty() {
        return s;
    }
    s.push_str("  fio jobs (as fio reports them):\n");
    for (i, e) in es.iter().enumerate() {
        let o = &e.out;
        let name = r.jobs[i]
            .get("jobname")
            .and_then(|n| n.as_str())
            .unwrap_or(&o.jobname);
        let unfinished = r
            .unfinished_jobs
            .iter()
            .any(|u| u == name || *u == o.jobname);
        let _ = writeln!(
            s,
            "  {}: (groupid={}) err={}{}",
            o.jobname,
            o.groupid,
            o.error,
            if unfinished {
                "  NOT FINISHED: cut off before doing its size"
            } else {
                ""
            }
        );
        for (dir, label, d) in [(0, "read", &o.read), (1, "write", &o.write)] {
            if d.total_ios == 0 {
                continue;
            }
            let pcts = e
                .detail
                .map(|x| x.clat_bins[dir].percentiles(&[50.0, 99.0, 99.9]))
                .filter(|p| p.len() == 3)
                .unwrap_or_else(|| {
                    [50.0, 99.0, 99.9]
                        .iter()
                        .map(|&p| {
                            (
                                p,
                                d.clat_ns
                                    .percentile
                                    .as_ref()
                                    .and_then(|x| x.get(p))
                                    .unwrap_or(0),
                            )
                        })
                        .collect()
                });
            let us = |v: u64| format!("{:.1}", v as f64 / 1000.0);
            let _ = writeln!(
                s,
                "    {label:>5}: {}  clat (usec): p50={}, p99={}, p99.9={}",
                ddir_headline(d),
                us(pcts[0].1),
                us(pcts[1].1),
                us(pcts[2].1)
            );
        }
    }
    s
}

/// Writes the log files of every job that asked for them into `dir` (fio
/// writes them to its working directory); returns their paths.
pub fn write_logs(r: &Results, jobs: &[FioJob], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<LogFile> = Vec::new();
    for e in entries(r, jobs) {
        let (Some(j), Some(d)) = (e.job, e.detail) else {
            continue;
        };
        let Some(logs) = &d.logs else {
            continue;
        };
        files.extend(job_logs(
            logs,
            &d.threads,
            j.log_prefix(&j.write_bw_log).as_deref(),
            j.log_prefix(&j.write_lat_log).as_deref(),
            j.log_prefix(&j.write_iops_log).as_deref(),
        ));
    }
    let mut out = Vec::new();
    for f in files {
        let p = dir.join(&f.name);
        if let Some(parent) = p.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", parent.display()))?;
            }
        }
        std::fs::write(&p, f.text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
        out.push(p);
    }
    Ok(out)
}

/// The documents of `formats` for one run, in order (JSON pretty-printed
/// as fio does, each followed by a newline).
pub fn render(r: &Results, jobs: &[FioJob], formats: &[OutputFormat]) -> String {
    let mut s = String::new();
    for f in formats {
        match f {
            OutputFormat::Normal => s.push_str(&fio_normal(r, jobs)),
            OutputFormat::Json | OutputFormat::JsonPlus => {
                let doc = fio_json(r, jobs, *f == OutputFormat::JsonPlus);
                s.push_str(&serde_json::to_string_pretty(&doc).unwrap_or_default());
                s.push('\n');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num2str_matches_fio() {
        // Figures from a fio 3.33 run on this machine (see docs/fio-output.md).
        assert_eq!(num2str(37_117_734, 4, true, "B/s"), "35.4MiB/s");
        assert_eq!(num2str(37_117_734, 4, false, "B/s"), "37.1MB/s");
        assert_eq!(num2str(128_000, 4, false, ""), "128k");
        assert_eq!(num2str(9061, 4, false, ""), "9061");
        assert_eq!(num2str(524_288_000, 4, true, "B/s"), "500MiB/s");
        assert_eq!(num2str(524_288_000, 4, false, "B/s"), "524MB/s");
        assert_eq!(num2str(8_388_608, 4, true, "B"), "8192KiB");
        assert_eq!(num2str(8_388_608, 4, false, "B"), "8389kB");
    }

    #[test]
    fn ctime_is_cs() {
        assert_eq!(ctime(10), "Thu Jan  1 00:00:10 1970");
        assert_eq!(ctime(1_795_603_155), "Wed Nov 25 10:39:15 2026");
    }

    #[test]
    fn formats_parse_as_fio_spells_them() {
        assert_eq!(
            parse_output_formats("json,normal").unwrap().0,
            vec![OutputFormat::Json, OutputFormat::Normal]
        );
        assert_eq!(
            parse_output_formats("json+,json").unwrap().0,
            vec![OutputFormat::JsonPlus]
        );
        assert!(parse_output_formats("terse").is_err());
        assert!(parse_output_formats("xml").is_err());
    }
}
