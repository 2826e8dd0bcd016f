//! Is the machine quiet enough to measure? The probe records, per round,
//! the load average, the runnable tasks other than itself, the CPU steal
//! and the kernel release ([`RoundConditions`]), and judges them against
//! [`Limits`]: it warns when the machine is busy and, with `--strict`,
//! refuses to start. Not kernel code.
//!
//! Sources: `/proc/loadavg` (1- and 5-minute load), `/proc/stat`
//! (`procs_running`: runnable tasks right now, the reader included; the
//! `cpu` line's `steal` column against the sum of all its columns).

use std::path::Path;
use std::time::Duration;

use crate::experiment::results::RoundConditions;

/// What counts as quiet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// The 1-minute load average must be below this (the shared quiet
    /// protocol of this project's machine waits for 0.6 on 2 CPUs).
    pub max_load_1m: f64,
    /// Median of other runnable tasks must be at most this.
    pub max_others_running: f64,
    /// CPU steal must be at most this percentage.
    pub max_steal_pct: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_load_1m: 0.6,
            max_others_running: 0.5,
            max_steal_pct: 5.0,
        }
    }
}

/// Whether reading `v` is known (not NaN, not the -1 of an unreadable
/// file) and below `max` (`strict`) or at most `max`.
fn ok(v: f64, max: f64, strict: bool) -> bool {
    let known = v >= 0.0;
    known && if strict { v < max } else { v <= max }
}

/// The reasons `c` is not quiet under `l` (empty: quiet). A reading that
/// is unknown (NaN, or -1 when its file could not be read) is not quiet.
pub fn assess(c: &RoundConditions, l: &Limits) -> Vec<String> {
    let mut v = Vec::new();
    if !ok(c.load_1m, l.max_load_1m, true) {
        v.push(format!(
            "1-minute load average {:.2} (quiet: below {:.2})",
            c.load_1m, l.max_load_1m
        ));
    }
    if !ok(c.others_running, l.max_others_running, false) {
        v.push(format!(
            "{:.1} other runnable task(s) (quiet: at most {:.1})",
            c.others_running, l.max_others_running
        ));
    }
    if !ok(c.steal_pct, l.max_steal_pct, false) {
        v.push(format!(
            "CPU steal {:.1}% (quiet: at most {:.1}%)",
            c.steal_pct, l.max_steal_pct
        ));
    }
    v
}

/// Load averages (1, 5 minutes) from `/proc/loadavg` text.
pub fn parse_loadavg(text: &str) -> Option<(f64, f64)> {
    let mut it = text.split_whitespace();
    let a = it.next()?.parse().ok()?;
    let b = it.next()?.parse().ok()?;
    Some((a, b))
}

/// `procs_running` and the `cpu` line's (steal, total) jiffies from
/// `/proc/stat` text.
pub fn parse_stat(text: &str) -> Option<(u64, (u64, u64))> {
    let mut running = None;
    let mut cpu = None;
    for l in text.lines() {
        if let Some(r) = l.strip_prefix("procs_running ") {
            running = r.trim().parse().ok();
        } else if let Some(r) = l.strip_prefix("cpu ") {
            let v: Vec<u64> = r
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal guest guest_nice;
            // guest time is already counted in user/nice.
            let total: u64 = v.iter().take(8).sum();
            cpu = Some((v.get(7).copied().unwrap_or(0), total));
        }
    }
    Some((running?, cpu?))
}

/// Steal as a percentage of the CPU time between two `(steal, total)`
/// readings (0 when no time passed).
pub fn steal_pct(before: (u64, u64), after: (u64, u64)) -> f64 {
    let dt = after.1.saturating_sub(before.1);
    if dt == 0 {
        return 0.0;
    }
    after.0.saturating_sub(before.0) as f64 * 100.0 / dt as f64
}

/// Median of a non-empty slice (mean of the middle two for even lengths);
/// NaN for an empty one.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn read(p: &str) -> String {
    std::fs::read_to_string(Path::new(p)).unwrap_or_default()
}

/// The `cpu` (steal, total) jiffies now.
pub fn cpu_times() -> (u64, u64) {
    parse_stat(&read("/proc/stat")).map_or((0, 0), |(_, c)| c)
}

/// The machine right now: load, other runnable tasks (median of 9 samples
/// 20 ms apart, less the probe's own reading thread) and steal over those
/// 160 ms; `steal_pct` is replaced by the round's when the round ends.
pub fn sample(round: u32, release: &str) -> RoundConditions {
    let (load_1m, load_5m) = parse_loadavg(&read("/proc/loadavg")).unwrap_or((f64::NAN, f64::NAN));
    let t0 = cpu_times();
    let mut others = Vec::new();
    for i in 0..9 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some((r, _)) = parse_stat(&read("/proc/stat")) {
            others.push(r.saturating_sub(1) as f64);
        }
    }
    RoundConditions {
        round,
        load_1m: if load_1m.is_nan() { -1.0 } else { load_1m },
        load_5m: if load_5m.is_nan() { -1.0 } else { load_5m },
        others_running: if others.is_empty() {
            -1.0
        } else {
            median(&others)
        },
        steal_pct: steal_pct(t0, cpu_times()),
        kernel_release: release.to_string(),
        not_quiet: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(load: f64, others: f64, steal: f64) -> RoundConditions {
        RoundConditions {
            round: 1,
            load_1m: load,
            load_5m: load,
            others_running: others,
            steal_pct: steal,
            kernel_release: "6.18.0".into(),
            not_quiet: Vec::new(),
        }
    }

    #[test]
    fn quiet_machine_passes_and_each_limit_is_reported() {
        let l = Limits::default();
        assert!(assess(&cond(0.2, 0.0, 0.5), &l).is_empty());
        let busy = assess(&cond(3.5, 0.0, 0.0), &l);
        assert_eq!(busy.len(), 1);
        assert!(busy[0].contains("load average 3.50"), "{busy:?}");
        let r = assess(&cond(0.1, 2.0, 0.0), &l);
        assert!(r.len() == 1 && r[0].contains("other runnable"), "{r:?}");
        let r = assess(&cond(0.1, 0.0, 12.0), &l);
        assert!(r.len() == 1 && r[0].contains("steal 12.0%"), "{r:?}");
        assert_eq!(assess(&cond(0.6, 1.0, 6.0), &l).len(), 3);
        // Unknown readings (NaN, or -1 for an unreadable file) are not
        // taken for quiet.
        assert_eq!(assess(&cond(f64::NAN, 0.0, 0.0), &l).len(), 1);
        assert_eq!(assess(&cond(0.1, -1.0, 0.0), &l).len(), 1);
        assert_eq!(assess(&cond(-1.0, 0.0, 0.0), &l).len(), 1);
    }

    #[test]
    fn parses_proc_files() {
        assert_eq!(
            parse_loadavg("0.35 0.28 0.11 1/234 5678\n"),
            Some((0.35, 0.28))
        );
        assert_eq!(parse_loadavg("garbage"), None);
        let stat =
            "cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3\nprocs_running 3\nprocs_blocked 0\n";
        assert_eq!(parse_stat(stat), Some((3, (40, 1000))));
        assert!((steal_pct((40, 1000), (90, 2000)) - 5.0).abs() < 1e-12);
        assert_eq!(steal_pct((40, 1000), (40, 1000)), 0.0);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
