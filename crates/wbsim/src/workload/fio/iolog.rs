//! What fio samples per job beyond its latency histograms, and fio's log
//! files.
//!
//! Mirrors fio's `stat.c`: `add_bw_samples()` / `add_iops_samples()` (one
//! bandwidth and one IOPS sample per `bw_avg_time` / `iops_avg_time`, 500 ms
//! by default, giving `bw_min`/`bw_max`/`bw_mean`/`bw_dev`/`bw_samples` and
//! `iops_*`), `io_u_mark_depth()`, `io_u_mark_submit()`,
//! `io_u_mark_complete()` (the `iodepth_level`, `iodepth_submit`,
//! `iodepth_complete` maps), and the log writers `add_clat_sample()`,
//! `add_lat_sample()`, `add_slat_sample()`, `add_bw_sample()`,
//! `add_iops_sample()` with `iolog.c` `flush_log()`: one line
//! `time_ms, value, ddir, bs, prio` per entry, in files
//! `PREFIX_{bw,iops,clat,lat,slat}.N.log` (N: fio's 1-based thread number).
//! With `log_avg_msec=0` every I/O is a line (time of completion since the
//! clone started, bw = bytes * 10^6 / clat_ns, iops = 1, lat values in ns);
//! with `log_avg_msec=M` one line per direction per M ms window (time = the
//! window's end, bw in KiB/s and iops over the window, lat the window's
//! mean; bs 0), latency logs also for the last, partial window. Only jobs
//! with a log option keep anything for logs: every I/O with
//! `log_avg_msec=0` (as fio writes a line per I/O), else sums per window.
//!
//! Simplified: the bandwidth and IOPS statistics always use 500 ms windows of
//! the job (fio takes one sample per I/O when a per-I/O bw log is on, and
//! per clone before summing a group); the `prio` column is 0 (I/O priorities
//! are not modelled); `log_offset` columns are not written.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sim::Time;

/// fio's `bw_avg_time` and `iops_avg_time` defaults (`options.c`): 500 ms.
pub const BW_AVG_TIME_NS: u64 = 500_000_000;

/// Nanoseconds per millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// One completed I/O kept for the logs (only when the job writes logs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoSample {
    /// Completion time since the clone started, ns.
    pub t_ns: u64,
    /// fio's 1-based thread number of the clone (names the log file).
    pub thread: u32,
    /// A write (else a read).
    pub write: bool,
    /// Bytes.
    pub bs: u64,
    /// Submission latency, ns (async engines only).
    pub slat_ns: Option<u64>,
    /// Completion latency, ns.
    pub clat_ns: u64,
}

/// A job's samples beyond its histograms.
#[derive(Clone, Debug, Default)]
pub struct JobSamples {
    /// Start of the first bandwidth window (the job's measuring start), ns.
    origin: Option<Time>,
    /// Bytes and I/Os completed per [`BW_AVG_TIME_NS`] window: reads, writes.
    windows: [Vec<(u64, u64)>; 2],
    /// What the logs need, for jobs that write logs.
    logs: Option<LogData>,
    /// fio's `io_u_map`: submissions by in-flight depth.
    depth_level: [u64; 7],
    /// fio's `io_u_submit`: submit calls by I/Os submitted.
    submit: [u64; 7],
    /// fio's `io_u_complete`: reaps by I/Os completed.
    complete: [u64; 7],
    /// CPU time of the job's tasks, ns (all kernel work: the model charges
    /// no user-space CPU to fio).
    sys_ns: u64,
    /// Time the job's tasks existed (each from its clone's start to its
    /// end, summed), ns: what `sys_ns` is a share of.
    span_ns: u64,
}

/// fio's `io_u_mark_depth()` bucket for `depth` in flight.
fn depth_idx(depth: u64) -> usize {
    match depth {
        0..=1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
    }
}

/// fio's `io_u_mark_submit()` / `io_u_mark_complete()` bucket for `nr` I/Os.
fn batch_idx(nr: u64) -> usize {
    match nr {
        0 => 0,
        1..=4 => 1,
        5..=8 => 2,
        9..=16 => 3,
        17..=32 => 4,
        33..=64 => 5,
        _ => 6,
    }
}

/// Labels of fio's `iodepth_level` map.
pub const DEPTH_LABELS: [&str; 7] = ["1", "2", "4", "8", "16", "32", ">=64"];
/// Labels of fio's `iodepth_submit` / `iodepth_complete` maps.
pub const BATCH_LABELS: [&str; 7] = ["0", "4", "8", "16", "32", "64", ">=64"];

/// fio's `stat_calc_dist()`: percentages of `total`, at least 0.1 for a
/// non-empty bucket.
pub fn calc_dist(map: &[u64; 7], total: u64) -> [f64; 7] {
    let mut out = [0.0; 7];
    for (o, &n) in out.iter_mut().zip(map) {
        if total > 0 {
            *o = 100.0 * n as f64 / total as f64;
            if *o < 0.1 && n > 0 {
                *o = 0.1;
            }
        }
    }
    out
}

/// Sample statistics of a list (fio's `calc_lat()` on a bw/iops stat): min,
/// max, mean, sample standard deviation.
fn sample_stats(v: &[u64]) -> (u64, u64, f64, f64) {
    if v.is_empty() {
        return (0, 0, 0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let dev = if v.len() > 1 {
        (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    (
        *v.iter().min().unwrap_or(&0),
        *v.iter().max().unwrap_or(&0),
        mean,
        dev,
    )
}

/// Bandwidth (KiB/s) and IOPS sample statistics of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RateStats {
    /// `bw_min`, `bw_max` (KiB/s).
    pub bw_min: u64,
    pub bw_max: u64,
    /// `bw_mean`, `bw_dev` (KiB/s).
    pub bw_mean: f64,
    pub bw_dev: f64,
    /// `iops_min`, `iops_max`.
    pub iops_min: u64,
    pub iops_max: u64,
    /// `iops_mean`, `iops_stddev`.
    pub iops_mean: f64,
    pub iops_stddev: f64,
    /// `bw_samples` = `iops_samples`: full windows.
    pub samples: u64,
}

impl JobSamples {
    /// Samples of a job; `logs`: it writes fio logs, averaged over this
    /// many ms (0: every I/O).
    pub fn new(logs: Option<u64>) -> JobSamples {
        JobSamples {
            logs: logs.map(LogData::new),
            ..JobSamples::default()
        }
    }

    /// Sets the start of the first window (the earliest clone's measuring
    /// start).
    pub fn start(&mut self, from: Time) {
        self.origin = Some(self.origin.map_or(from, |o| o.min(from)));
    }

    /// Counts an I/O of `len` bytes completed at `now`; `sample` is kept for
    /// the logs when logging.
    pub fn record(&mut self, now: Time, write: bool, len: u64, sample: IoSample) {
        let origin = *self.origin.get_or_insert(now);
        let idx = (now.saturating_sub(origin) / BW_AVG_TIME_NS) as usize;
        let w = &mut self.windows[usize::from(write)];
        if w.len() <= idx {
            w.resize(idx + 1, (0, 0));
        }
        w[idx].0 += len;
        w[idx].1 += 1;
        if let Some(l) = &mut self.logs {
            l.add(sample);
        }
    }

    /// fio's `io_u_mark_depth()` for one I/O submitted with `depth` in flight
    /// (counting itself).
    pub fn mark_depth(&mut self, depth: u64) {
        self.depth_level[depth_idx(depth)] += 1;
    }

    /// fio's `io_u_mark_submit()`: one submit call of `nr` I/Os.
    pub fn mark_submit(&mut self, nr: u64) {
        self.submit[batch_idx(nr)] += 1;
    }

    /// fio's `io_u_mark_complete()`: one reap of `nr` I/Os.
    pub fn mark_complete(&mut self, nr: u64) {
        self.complete[batch_idx(nr)] += 1;
    }

    /// Adds the CPU time `ns` of one of the job's tasks, which ran for
    /// `span` ns.
    pub fn add_task_cpu(&mut self, ns: u64, span: u64) {
        self.sys_ns += ns;
        self.span_ns += span;
    }

    /// fio's `sys_cpu`: the tasks' CPU time as a percentage of their
    /// lifetime (0 when none ran).
    pub fn sys_cpu_pct(&self) -> f64 {
        if self.span_ns == 0 {
            0.0
        } else {
            100.0 * self.sys_ns as f64 / self.span_ns as f64
        }
    }

    /// `iodepth_level`, `iodepth_submit`, `iodepth_complete` in percent.
    pub fn depth_dists(&self) -> [[f64; 7]; 3] {
        let level_total: u64 = self.depth_level.iter().sum();
        let sub: u64 = self.submit.iter().sum();
        let comp: u64 = self.complete.iter().sum();
        [
            calc_dist(&self.depth_level, level_total),
            calc_dist(&self.submit, sub),
            calc_dist(&self.complete, comp),
        ]
    }

    /// Bandwidth and IOPS statistics of direction `write` over the windows
    /// that ended by `end` (fio drops the last, partial window).
    pub fn rate_stats(&self, write: bool, end: Time) -> RateStats {
        let Some(origin) = self.origin else {
            return RateStats::default();
        };
        let full = (end.saturating_sub(origin) / BW_AVG_TIME_NS) as usize;
        let w = &self.windows[usize::from(write)];
        if w.is_empty() {
            return RateStats::default();
        }
        let win_ms = BW_AVG_TIME_NS / NS_PER_MS;
        let get = |i: usize| w.get(i).copied().unwrap_or((0, 0));
        let bw: Vec<u64> = (0..full).map(|i| get(i).0 * 1000 / win_ms / 1024).collect();
        let iops: Vec<u64> = (0..full).map(|i| get(i).1 * 1000 / win_ms).collect();
        let (bw_min, bw_max, bw_mean, bw_dev) = sample_stats(&bw);
        let (iops_min, iops_max, iops_mean, iops_stddev) = sample_stats(&iops);
        RateStats {
            bw_min,
            bw_max,
            bw_mean,
            bw_dev,
            iops_min,
            iops_max,
            iops_mean,
            iops_stddev,
            samples: full as u64,
        }
    }

    /// What the logs need (None: the job writes none).
    pub fn logs(&self) -> Option<&LogData> {
        self.logs.as_ref()
    }
}

/// Which fio log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogKind {
    /// `_bw`: bandwidth.
    Bw,
    /// `_iops`.
    Iops,
    /// `_slat`: submission latency, ns.
    Slat,
    /// `_clat`: completion latency, ns.
    Clat,
    /// `_lat`: total latency, ns.
    Lat,
}

impl LogKind {
    /// The file name part (`PREFIX_bw.N.log`).
    pub fn suffix(self) -> &'static str {
        match self {
            LogKind::Bw => "bw",
            LogKind::Iops => "iops",
            LogKind::Slat => "slat",
            LogKind::Clat => "clat",
            LogKind::Lat => "lat",
        }
    }
}

/// One log file to write: its name and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFile {
    /// File name, `PREFIX_KIND.N.log`.
    pub name: String,
    /// The lines.
    pub text: String,
}

/// One log window of one clone and direction: sums over its I/Os.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogWindow {
    /// Bytes completed.
    pub bytes: u64,
    /// I/Os completed.
    pub ios: u64,
    /// Sums of clat and lat, ns.
    pub clat_sum: u128,
    pub lat_sum: u128,
    /// Sum of slat, ns, and the I/Os that had one.
    pub slat_sum: u128,
    pub slat_n: u64,
}

/// What the logs of a job need: every I/O (`log_avg_msec=0`), or sums per
/// clone, window and direction (`log_avg_msec=M`, so memory does not grow
/// with the I/O count).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogData {
    /// The window, ns (0: every I/O kept).
    avg_ns: u64,
    /// Every I/O, when `avg_ns` is 0.
    per_io: Vec<IoSample>,
    /// Sums by (thread, window index, write).
    windows: BTreeMap<(u32, u64, bool), LogWindow>,
    /// Latest completion per thread, ns since its start.
    last: BTreeMap<u32, u64>,
}

impl LogData {
    /// Logs with `avg_ms` windows (0: a line per I/O).
    pub fn new(avg_ms: u64) -> LogData {
        LogData {
            avg_ns: avg_ms.saturating_mul(NS_PER_MS),
            ..LogData::default()
        }
    }

    /// Adds one completed I/O.
    pub fn add(&mut self, x: IoSample) {
        let last = self.last.entry(x.thread).or_insert(0);
        *last = (*last).max(x.t_ns);
        if self.avg_ns == 0 {
            self.per_io.push(x);
            return;
        }
        let w = self
            .windows
            .entry((x.thread, x.t_ns / self.avg_ns, x.write))
            .or_default();
        w.bytes += x.bs;
        w.ios += 1;
        w.clat_sum += u128::from(x.clat_ns);
        w.lat_sum += u128::from(x.slat_ns.unwrap_or(0) + x.clat_ns);
        if let Some(sl) = x.slat_ns {
            w.slat_sum += u128::from(sl);
            w.slat_n += 1;
        }
    }

    /// fio's log of `kind` for thread `thread`.
    pub fn render(&self, thread: u32, kind: LogKind) -> String {
        let mut s = String::new();
        if self.avg_ns == 0 {
            for x in self.per_io.iter().filter(|x| x.thread == thread) {
                let v = match kind {
                    // fio: bytes * 10^6 / the I/O's clat in ns.
                    LogKind::Bw => Some(x.bs * 1_000_000 / x.clat_ns.max(1)),
                    LogKind::Iops => Some(1),
                    LogKind::Slat => x.slat_ns,
                    LogKind::Clat => Some(x.clat_ns),
                    LogKind::Lat => Some(x.slat_ns.unwrap_or(0) + x.clat_ns),
                };
                if let Some(v) = v {
                    let _ = writeln!(
                        s,
                        "{}, {v}, {}, {}, 0",
                        x.t_ns / NS_PER_MS,
                        u8::from(x.write),
                        x.bs
                    );
                }
            }
            return s;
        }
        let Some(&last) = self.last.get(&thread) else {
            return s;
        };
        let avg_ms = self.avg_ns / NS_PER_MS;
        let latency = matches!(kind, LogKind::Slat | LogKind::Clat | LogKind::Lat);
        for (&(_, idx, write), w) in self
            .windows
            .range((thread, 0, false)..=(thread, u64::MAX, true))
        {
            // Rate logs take full windows only; latency logs flush the last.
            if !latency && (idx + 1) * self.avg_ns > last {
                continue;
            }
            let mean = |sum: u128, n: u64| (n > 0).then(|| (sum / u128::from(n)) as u64);
            let v = match kind {
                LogKind::Bw => Some(w.bytes * 1000 / avg_ms / 1024),
                LogKind::Iops => Some(w.ios * 1000 / avg_ms),
                LogKind::Slat => mean(w.slat_sum, w.slat_n),
                LogKind::Clat => mean(w.clat_sum, w.ios),
                LogKind::Lat => mean(w.lat_sum, w.ios),
            };
            if let Some(v) = v.filter(|_| w.ios > 0) {
                let _ = writeln!(s, "{}, {v}, {}, 0, 0", (idx + 1) * avg_ms, u8::from(write));
            }
        }
        s
    }
}

/// fio's log of `kind` for `samples` of one thread (completion order),
/// averaged over `avg_ms` windows when non-zero.
pub fn render_log(samples: &[IoSample], kind: LogKind, avg_ms: u64) -> String {
    let mut d = LogData::new(avg_ms);
    let mut thread = 0;
    for x in samples {
        thread = x.thread;
        d.add(*x);
    }
    d.render(thread, kind)
}

/// The log files of one job: for each log option set (prefix given), one
/// file per log kind and thread. `threads` are the job's fio thread numbers
/// (a file per thread, empty if it did nothing).
pub fn job_logs(
    data: &LogData,
    threads: &[u32],
    bw: Option<&str>,
    lat: Option<&str>,
    iops: Option<&str>,
) -> Vec<LogFile> {
    let mut out = Vec::new();
    let mut add = |prefix: Option<&str>, kinds: &[LogKind]| {
        let Some(p) = prefix else { return };
        for &th in threads {
            for &k in kinds {
                out.push(LogFile {
                    name: format!("{p}_{}.{th}.log", k.suffix()),
                    text: data.render(th, k),
                });
            }
        }
    };
    add(bw, &[LogKind::Bw]);
    add(lat, &[LogKind::Slat, LogKind::Clat, LogKind::Lat]);
    add(iops, &[LogKind::Iops]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(t_ms: u64, write: bool, clat: u64) -> IoSample {
        IoSample {
            t_ns: t_ms * NS_PER_MS,
            thread: 1,
            write,
            bs: 4096,
            slat_ns: None,
            clat_ns: clat,
        }
    }

    #[test]
    fn per_io_log_lines_are_fios() {
        let s = [io(0, true, 18_350), io(1, true, 3_725)];
        assert_eq!(
            render_log(&s, LogKind::Bw, 0),
            "0, 223215, 1, 4096, 0\n1, 1099597, 1, 4096, 0\n"
        );
        assert_eq!(
            render_log(&s, LogKind::Clat, 0),
            "0, 18350, 1, 4096, 0\n1, 3725, 1, 4096, 0\n"
        );
        assert_eq!(render_log(&s, LogKind::Iops, 0).lines().count(), 2);
        // Sync engines have no slat: an empty slat log, as fio writes.
        assert_eq!(render_log(&s, LogKind::Slat, 0), "");
    }

    #[test]
    fn windowed_log_averages_and_drops_partial_rate_windows() {
        // 100 writes of 4 KiB in each of two 100 ms windows, then one more.
        let mut s: Vec<IoSample> = (0..200).map(|i| io(i, true, 1000 + i)).collect();
        s.push(io(250, true, 5000));
        let bw = render_log(&s, LogKind::Bw, 100);
        // 100 x 4 KiB per 100 ms = 4000 KiB/s; the partial window is left out.
        assert_eq!(bw, "100, 4000, 1, 0, 0\n200, 4000, 1, 0, 0\n");
        let clat = render_log(&s, LogKind::Clat, 100);
        let lines: Vec<&str> = clat.lines().collect();
        assert_eq!(lines.len(), 3, "{clat}");
        assert_eq!(lines[0], "100, 1049, 1, 0, 0");
        assert_eq!(lines[2], "300, 5000, 1, 0, 0");
    }

    #[test]
    fn rate_stats_over_full_windows() {
        let mut j = JobSamples::new(None);
        j.start(0);
        let s = io(0, true, 1);
        // 1 MiB in window 0, 3 MiB in window 1, 1 MiB in the partial window 2.
        j.record(100 * NS_PER_MS, true, 1 << 20, s);
        j.record(600 * NS_PER_MS, true, 3 << 20, s);
        j.record(1100 * NS_PER_MS, true, 1 << 20, s);
        let r = j.rate_stats(true, 1200 * NS_PER_MS);
        assert_eq!(r.samples, 2);
        assert_eq!((r.bw_min, r.bw_max), (2048, 6144));
        assert_eq!(r.bw_mean, 4096.0);
        assert!((r.bw_dev - 2896.3).abs() < 0.1, "{}", r.bw_dev);
        assert_eq!((r.iops_min, r.iops_max), (2, 2));
        assert_eq!(j.rate_stats(false, 1200 * NS_PER_MS).samples, 0);
    }

    #[test]
    fn depth_maps_use_fios_buckets() {
        let mut j = JobSamples::new(None);
        for d in [1, 1, 2, 3, 4, 64] {
            j.mark_depth(d);
        }
        j.mark_submit(1);
        j.mark_complete(5);
        let [level, sub, comp] = j.depth_dists();
        assert!((level[0] - 33.333).abs() < 0.01);
        assert!((level[1] - 33.333).abs() < 0.01);
        assert!((level[6] - 16.666).abs() < 0.01);
        assert_eq!(sub[1], 100.0);
        assert_eq!(comp[2], 100.0);
    }
}
