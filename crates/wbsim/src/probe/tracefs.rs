//! A private tracefs instance counting writeback (or other) tracepoints.
//!
//! Not kernel code. The probe mounts tracefs on a directory of its own
//! (`DIR/tracefs-N`, so the machine's `/sys/kernel/tracing` mount, if any,
//! is left alone), creates `instances/wbsim-PID-N` (a separate ring buffer:
//! other tracing users are not disturbed), enables the `writeback:` events
//! asked for that exist on this kernel, filters those with a bdi field
//! (`name` or `bdi`) to the probe's own loop device (or, with
//! [`Instance::create_events`], other events such as `xfs:` ones with a
//! filter of the caller's, e.g. on the `dev` field), and counts events per
//! name by reading `trace_pipe` on a thread while a job runs. Or, with
//! [`Instance::start_buffered`] and [`Instance::stop_and_read`], leaves the
//! events in the ring buffer (no reader thread runs during the
//! measurement) and returns its lines at the end, for callers that parse
//! them with [`parse_line`] (e.g. with the `mono` trace clock set by
//! [`Instance::set_clock`]). The instance is removed on
//! [`Instance::close`] and, whatever happens, by the guard.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;

use super::guard::Guard;
use super::sys;
use crate::experiment::metrics::Metrics;

/// The writeback tracepoints the probe counts (those present are enabled).
pub const EVENTS: &[&str] = &[
    "writeback_start",
    "writeback_written",
    "writeback_queue",
    "writeback_wake_background",
    "writeback_single_inode",
    "balance_dirty_pages",
    "bdi_dirty_ratelimit",
    "global_dirty_state",
];

/// An instance with its enabled events.
pub struct Instance {
    dir: PathBuf,
    /// Events enabled, with whether they are filtered to the probe's bdi.
    pub events: Vec<(String, bool)>,
}

/// A reader counting events while a job runs.
pub struct Capture {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<BTreeMap<String, u64>>>,
}

/// Mounts a private tracefs under the guard's directory; returns its path.
pub fn mount(guard: &Guard) -> anyhow::Result<PathBuf> {
    let mnt = guard.unique("tracefs");
    guard.record("mountpoint", &mnt, &[])?;
    std::fs::create_dir(&mnt).with_context(|| format!("mkdir {}", mnt.display()))?;
    let _op = guard.op()?;
    guard.record("mount", &mnt, &["tracefs"])?;
    sys::run(
        "mount",
        &[
            "-t".as_ref(),
            "tracefs".as_ref(),
            "nodev".as_ref(),
            mnt.as_os_str(),
        ],
    )
    .context("mounting a private tracefs")?;
    Ok(mnt)
}

impl Instance {
    /// Creates `instances/wbsim-PID-N` under tracefs mount `root`, sets
    /// its per-CPU buffer to `buffer_kib` and enables [`EVENTS`] (filtered
    /// to `bdi` where the event has a bdi field).
    pub fn create(
        guard: &Guard,
        root: &Path,
        bdi: &str,
        buffer_kib: u64,
    ) -> anyhow::Result<Instance> {
        let filter = |format: &str| {
            let field = if format.contains(" name[") {
                "name"
            } else if format.contains(" bdi[") {
                "bdi"
            } else {
                return None;
            };
            (!bdi.is_empty()).then(|| format!("{field} == \"{bdi}\""))
        };
        Self::create_events(guard, root, "writeback", EVENTS, &filter, buffer_kib)
    }

    /// Creates an instance like [`Instance::create`] but for the events
    /// `events` of trace system `system` (e.g. `xfs`): those present on
    /// this kernel are enabled, each with the filter `filter` returns for
    /// its `format` text (None: unfiltered; a filter the kernel rejects
    /// leaves the event unfiltered, recorded in [`Instance::events`]). An
    /// error if none of the events exists.
    pub fn create_events(
        guard: &Guard,
        root: &Path,
        system: &str,
        events: &[&str],
        filter: &dyn Fn(&str) -> Option<String>,
        buffer_kib: u64,
    ) -> anyhow::Result<Instance> {
        let name = guard
            .unique(&format!("wbsim-{}", std::process::id()))
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = root.join("instances").join(&name);
        {
            let _op = guard.op()?;
            guard.record("instance", &dir, &[])?;
            std::fs::create_dir(&dir)
                .with_context(|| format!("creating tracefs instance {}", dir.display()))?;
            guard.add_instance(&dir);
        }
        let inst = Instance {
            dir,
            events: Vec::new(),
        };
        sys::write(&inst.dir.join("tracing_on"), "0")?;
        sys::write(&inst.dir.join("buffer_size_kb"), &buffer_kib.to_string())?;
        let mut enabled = Vec::new();
        for ev in events {
            let edir = inst.dir.join("events").join(system).join(ev);
            if !edir.is_dir() {
                continue;
            }
            let format = std::fs::read_to_string(edir.join("format")).unwrap_or_default();
            let filtered = match filter(&format) {
                Some(f) => sys::write(&edir.join("filter"), &f).is_ok(),
                None => false,
            };
            sys::write(&edir.join("enable"), "1")?;
            enabled.push((ev.to_string(), filtered));
        }
        if enabled.is_empty() {
            // Dropping `inst` would leave the directory to the guard: remove
            // it now.
            let e = anyhow::anyhow!(
                "none of the {system} tracepoints {} found in {}",
                events.join(", "),
                inst.dir.display()
            );
            inst.close(guard)?;
            return Err(e);
        }
        Ok(Instance {
            events: enabled,
            ..inst
        })
    }

    /// Sets the instance's `trace_clock` (e.g. `mono`: CLOCK_MONOTONIC, so
    /// line timestamps compare with the probe's own clock readings).
    pub fn set_clock(&self, clock: &str) -> anyhow::Result<()> {
        sys::write(&self.dir.join("trace_clock"), clock)
    }

    /// Clears the buffer and turns tracing on, with no reader: the events
    /// stay in the ring buffer (the oldest are overwritten when it is full,
    /// counted as overrun) for [`Instance::stop_and_read`].
    pub fn start_buffered(&self) -> anyhow::Result<()> {
        sys::write(&self.dir.join("trace"), "")?;
        sys::write(&self.dir.join("tracing_on"), "1")
    }

    /// Turns tracing off and returns the event lines of the `trace` file
    /// (a non-consuming read of every CPU's buffer, merged in time order;
    /// header lines dropped) and the number of events lost.
    pub fn stop_and_read(&self) -> anyhow::Result<(Vec<String>, u64)> {
        sys::write(&self.dir.join("tracing_on"), "0")?;
        let p = self.dir.join("trace");
        let text = std::fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))?;
        let lines = text
            .lines()
            .filter(|l| !l.starts_with('#') && event_name(l).is_some())
            .map(str::to_string)
            .collect();
        Ok((lines, self.overrun()))
    }

    /// Clears the buffer and starts counting (tracing on).
    pub fn start(&self) -> anyhow::Result<Capture> {
        sys::write(&self.dir.join("trace"), "")?;
        let pipe = self.dir.join("trace_pipe");
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe)
            .with_context(|| format!("open {}", pipe.display()))?;
        sys::write(&self.dir.join("tracing_on"), "1")?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("probe-trace".into())
            .spawn(move || {
                let mut counts = BTreeMap::new();
                let mut buf = vec![0u8; 1 << 16];
                let mut partial = Vec::new();
                loop {
                    match f.read(&mut buf) {
                        Ok(0) => std::thread::sleep(Duration::from_millis(10)),
                        Ok(n) => {
                            partial.extend_from_slice(&buf[..n]);
                            count_lines(&mut partial, &mut counts);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            if s2.load(Ordering::SeqCst) {
                                break;
                            }
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                counts
            })
            .context("starting the trace reader")?;
        Ok(Capture {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops tracing, drains the pipe and returns counts per event (every
    /// enabled event present, 0 if none), plus `overrun` (events lost) and
    /// the throttling fields of `balance_dirty_pages` and
    /// `bdi_dirty_ratelimit` events (keys `EVENT.FIELD`, units by
    /// [`key_unit`]).
    pub fn finish(&self, mut cap: Capture) -> anyhow::Result<BTreeMap<String, u64>> {
        sys::write(&self.dir.join("tracing_on"), "0")?;
        cap.stop.store(true, Ordering::SeqCst);
        let mut counts = cap
            .handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        for (ev, _) in &self.events {
            counts.entry(ev.clone()).or_insert(0);
        }
        zero_sleeps(&self.events, &mut counts);
        counts.insert("overrun".into(), self.overrun());
        Ok(counts)
    }

    /// [`Instance::finish`], adding the counts to `sums` (one job's rounds,
    /// for [`record_means`]).
    pub fn finish_into(
        &self,
        cap: Capture,
        sums: &mut BTreeMap<String, u64>,
    ) -> anyhow::Result<()> {
        for (k, v) in self.finish(cap)? {
            *sums.entry(k).or_insert(0) += v;
        }
        Ok(())
    }

    /// Events lost to a full ring buffer since the last clear.
    fn overrun(&self) -> u64 {
        let Ok(rd) = std::fs::read_dir(self.dir.join("per_cpu")) else {
            return 0;
        };
        rd.filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read_to_string(e.path().join("stats")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| l.strip_prefix("overrun:"))
                    .filter_map(|v| v.trim().parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// Removes the instance.
    pub fn close(self, guard: &Guard) -> anyhow::Result<()> {
        let _ = sys::write(&self.dir.join("tracing_on"), "0");
        std::fs::remove_dir(&self.dir)
            .with_context(|| format!("removing tracefs instance {}", self.dir.display()))?;
        guard.remove_instance(&self.dir);
        Ok(())
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Counts the complete lines in `buf` by event name, keeping a trailing
/// partial line. A line looks like
/// `  kworker/u8:2-123   [001] .....  12.345678: writeback_start: bdi 7:0: ...`.
fn count_lines(buf: &mut Vec<u8>, counts: &mut BTreeMap<String, u64>) {
    let Some(last_nl) = buf.iter().rposition(|&b| b == b'\n') else {
        return;
    };
    let rest = buf.split_off(last_nl + 1);
    for line in String::from_utf8_lossy(buf).lines() {
        if let Some(ev) = event_name(line) {
            *counts.entry(ev.to_string()).or_insert(0) += 1;
            fold_throttle_fields(line, counts);
        }
    }
    *buf = rest;
}

/// The value of `key=` in an event's text (`key=123`), if a number.
fn field(text: &str, key: &str) -> Option<i64> {
    text.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// Folds the throttling state of `balance_dirty_pages` and
/// `bdi_dirty_ratelimit` lines into `counts`, beside the event counts, so
/// a job's live throttling can be held against the model's `bdp.*` series:
/// - `balance_dirty_pages.paused`: events that slept (`pause` > 0), and
///   `balance_dirty_pages.pause_ms` the sum of those pauses, ms;
/// - `balance_dirty_pages.dirty_ratelimit_first` / `_last`, KB/s: the
///   bdi's base rate when the job was first and last throttled (the first
///   is the state the job started from, which the bdi's history sets);
/// - `bdi_dirty_ratelimit.dirty_ratelimit_first` / `_last` and
///   `bdi_dirty_ratelimit.awrite_bw_first` / `_last`, KB/s: the rate and
///   the smoothed write bandwidth estimate at the job's first and last
///   update.
fn fold_throttle_fields(line: &str, counts: &mut BTreeMap<String, u64>) {
    let Some(t) = parse_line(line) else { return };
    let mut first_last = |name: &str, v: i64| {
        let v = u64::try_from(v).unwrap_or(0);
        counts
            .entry(format!("{}.{name}_first", t.event))
            .or_insert(v);
        counts.insert(format!("{}.{name}_last", t.event), v);
    };
    match t.event {
        "balance_dirty_pages" => {
            if let Some(r) = field(t.text, "dirty_ratelimit") {
                first_last("dirty_ratelimit", r);
            }
            if let Some(p) = field(t.text, "pause").filter(|&p| p > 0) {
                *counts
                    .entry("balance_dirty_pages.paused".into())
                    .or_insert(0) += 1;
                *counts
                    .entry("balance_dirty_pages.pause_ms".into())
                    .or_insert(0) += p as u64;
            }
        }
        "bdi_dirty_ratelimit" => {
            if let Some(r) = field(t.text, "dirty_ratelimit") {
                first_last("dirty_ratelimit", r);
            }
            if let Some(b) = field(t.text, "awrite_bw") {
                first_last("awrite_bw", b);
            }
        }
        _ => {}
    }
}

/// The sleeps are counts too: with `balance_dirty_pages` enabled they are
/// 0 when nothing slept, so that a round without throttling pools as 0
/// (not as missing) with the rounds that were throttled.
fn zero_sleeps(events: &[(String, bool)], counts: &mut BTreeMap<String, u64>) {
    if events.iter().any(|(e, _)| e == "balance_dirty_pages") {
        for k in ["balance_dirty_pages.paused", "balance_dirty_pages.pause_ms"] {
            counts.entry(k.into()).or_insert(0);
        }
    }
}

/// Records job `job`'s trace counts, summed over `rounds` rounds
/// ([`Instance::finish_into`]), as their means: `fio.JOB.trace.KEY` in
/// [`key_unit`]'s unit.
pub fn record_means(metrics: &mut Metrics, job: &str, sums: BTreeMap<String, u64>, rounds: f64) {
    for (key, sum) in sums {
        metrics.set(
            &format!("fio.{job}.trace.{key}"),
            key_unit(&key),
            sum as f64 / rounds,
        );
    }
}

/// The unit of a key [`Instance::finish`] returns: `events` for an event
/// count, else that of the folded field ([`fold_throttle_fields`]).
pub fn key_unit(key: &str) -> &'static str {
    if key.ends_with("_first") || key.ends_with("_last") {
        "KB/s"
    } else if key.ends_with(".pause_ms") {
        "ms"
    } else {
        "events"
    }
}

/// One line of the `trace` text format,
/// `  <comm>-<pid>  [<cpu>] <flags> <secs>.<usecs>: <event>: <text>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceLine<'a> {
    /// The task that was current on the CPU when the event fired (0: the
    /// idle task, shown as `<idle>-0`).
    pub pid: i32,
    /// The CPU it fired on.
    pub cpu: usize,
    /// Timestamp in ns of the instance's trace clock (printed in
    /// microseconds, so the last three digits are 0).
    pub ts_ns: u64,
    /// Event name.
    pub event: &'a str,
    /// The event's own text (its fields).
    pub text: &'a str,
}

/// Splits one trace line; None for headers and lines of another shape.
pub fn parse_line(line: &str) -> Option<TraceLine<'_>> {
    let open = line.find(" [")?;
    let close = open + line[open..].find("] ")?;
    let pid = line[..open].trim().rsplit_once('-')?.1.parse().ok()?;
    let cpu = line[open + 2..close].parse().ok()?;
    let after_cpu = &line[close + 2..];
    let ts_end = after_cpu.find(": ")?;
    let ts = after_cpu[..ts_end].rsplit(' ').next()?;
    let (secs, frac) = ts.split_once('.')?;
    let frac_ns = format!("{frac:0<9}");
    let ts_ns =
        secs.parse::<u64>().ok()? * 1_000_000_000 + frac_ns.get(..9)?.parse::<u64>().ok()?;
    let after_ts = &after_cpu[ts_end + 2..];
    let (event, text) = after_ts.split_once(':')?;
    (!event.is_empty() && !event.contains(' ')).then_some(TraceLine {
        pid,
        cpu,
        ts_ns,
        event,
        text: text.trim_start(),
    })
}

/// The event name of one trace line.
fn event_name(line: &str) -> Option<&str> {
    let after_cpu = &line[line.find("] ")? + 2..];
    // Skip the flags and timestamp: the first ": " ends the timestamp.
    let after_ts = &after_cpu[after_cpu.find(": ")? + 2..];
    let end = after_ts.find(':')?;
    let name = &after_ts[..end];
    (!name.is_empty() && !name.contains(' ')).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_events_across_partial_reads() {
        let mut counts = BTreeMap::new();
        let mut buf = b"  kworker/u8:2-123   [001] ..... 12.345678: writeback_start: bdi 7:0: sb_dev 0:0\n  dd-9 [000] d.... 12.3: balance_dirty_pages: bdi 7:0: limit=1\n  dd-9 [000] d.... 12.4: balance_dir".to_vec();
        count_lines(&mut buf, &mut counts);
        assert_eq!(counts.get("writeback_start"), Some(&1));
        assert_eq!(counts.get("balance_dirty_pages"), Some(&1));
        buf.extend_from_slice(b"ty_pages: bdi 7:0: limit=2\n");
        count_lines(&mut buf, &mut counts);
        assert_eq!(counts.get("balance_dirty_pages"), Some(&2));
        assert!(buf.is_empty());
    }

    #[test]
    fn folds_the_throttling_fields() {
        let mut counts = BTreeMap::new();
        let mut buf = concat!(
            "             fio-1592    [000] .N... 38331.366906: balance_dirty_pages: bdi 7:0: limit=1215200 setpoint=1057382 dirty=32302 wb_setpoint=10289 wb_dirty=8960 dirty_ratelimit=34708 task_ratelimit=34672 dirtied=256 dirtied_pause=32 paused=0 pause=28 period=28 think=0 cgroup_ino=1\n",
            "             fio-1592    [000] .N.1. 38331.366905: bdi_dirty_ratelimit: bdi 7:0: write_bw=203216 awrite_bw=44332 dirty_rate=72 dirty_ratelimit=34708 task_ratelimit=34676 balanced_dirty_ratelimit=44332 cgroup_ino=1\n",
            "             fio-1592    [001] ..... 38331.411680: balance_dirty_pages: bdi 7:0: limit=1214723 setpoint=1057145 dirty=72255 wb_setpoint=57333 wb_dirty=48896 dirty_ratelimit=30000 task_ratelimit=34708 dirtied=256 dirtied_pause=128 paused=0 pause=-4 period=28 think=0 cgroup_ino=1\n",
            "             fio-1592    [000] .N.1. 38331.569420: bdi_dirty_ratelimit: bdi 7:0: write_bw=0 awrite_bw=4 dirty_rate=2228704 dirty_ratelimit=34708 task_ratelimit=34712 balanced_dirty_ratelimit=0 cgroup_ino=1\n",
        )
        .as_bytes()
        .to_vec();
        count_lines(&mut buf, &mut counts);
        let g = |k: &str| counts.get(k).copied();
        assert_eq!(g("balance_dirty_pages"), Some(2));
        assert_eq!(g("balance_dirty_pages.paused"), Some(1));
        assert_eq!(g("balance_dirty_pages.pause_ms"), Some(28));
        assert_eq!(g("balance_dirty_pages.dirty_ratelimit_first"), Some(34708));
        assert_eq!(g("balance_dirty_pages.dirty_ratelimit_last"), Some(30000));
        assert_eq!(g("bdi_dirty_ratelimit.awrite_bw_first"), Some(44332));
        assert_eq!(g("bdi_dirty_ratelimit.awrite_bw_last"), Some(4));
        assert_eq!(key_unit("bdi_dirty_ratelimit.awrite_bw_last"), "KB/s");
        assert_eq!(key_unit("balance_dirty_pages.pause_ms"), "ms");
        assert_eq!(key_unit("balance_dirty_pages"), "events");
        // A round that never slept still reports its sleeps, as 0.
        let mut quiet = BTreeMap::new();
        zero_sleeps(&[("balance_dirty_pages".into(), true)], &mut quiet);
        assert_eq!(quiet.get("balance_dirty_pages.paused"), Some(&0));
        assert_eq!(quiet.get("balance_dirty_pages.pause_ms"), Some(&0));
        zero_sleeps(&[("writeback_start".into(), true)], &mut counts);
        assert_eq!(counts.get("balance_dirty_pages.paused"), Some(&1));
    }

    #[test]
    fn parses_timestamp_and_event() {
        let l = "          <idle>-0       [001] d..2.   123.456789: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=wbsim next_pid=42 next_prio=120";
        let t = parse_line(l).unwrap();
        assert_eq!((t.pid, t.cpu, t.ts_ns), (0, 1, 123_456_789_000));
        assert_eq!(t.event, "sched_switch");
        assert!(
            t.text.starts_with("prev_comm=swapper/1 prev_pid=0 "),
            "{}",
            t.text
        );
        let l = " memfd:sealed-91-6448 [000] d.h2. 5.000001: sched_wakeup: comm=x pid=42 prio=120 target_cpu=001";
        let t = parse_line(l).unwrap();
        assert_eq!((t.pid, t.cpu, t.ts_ns), (6448, 0, 5_000_001_000));
        assert_eq!(t.event, "sched_wakeup");
        assert!(parse_line("# tracer: nop").is_none());
    }
}
