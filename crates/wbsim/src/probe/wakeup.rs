//! `wbsim probe wakeup`: cross-CPU wakeup latency on the live machine,
//! from waking a task that sleeps on another, idle CPU until that task
//! runs (the IPI or wake list, the target's exit from idle/halt, the
//! schedule and the return to user space). The model needs it as a machine
//! parameter: a kernel worker woken on an idle CPU does not run at once.
//!
//! Not kernel code. Two threads, each pinned with `sched_setaffinity(2)`:
//! the sleeper blocks in `read(2)` on an empty pipe; the waker sleeps
//! [`GAP`] (`nanosleep`), so that the sleeper has gone back to sleep and
//! its CPU can idle, stores `CLOCK_MONOTONIC` (ns) in a shared `AtomicU64`
//! and writes one byte to the pipe. The sleeper reads `CLOCK_MONOTONIC` as
//! soon as `read` returns and records the difference. Each round starts
//! only after the sleeper has recorded the previous one (a second
//! `AtomicU64`), plus the gap. The interval includes the waker's
//! `write(2)` up to the wakeup (`pipe_write`, `try_to_wake_up`) and the
//! sleeper's return from `read(2)`: some syscall path on top of what the
//! kernel's own wakeup costs.
//!
//! Both directions run, CPU 0 waking CPU 1, then CPU 1 waking CPU 0,
//! [`ROUNDS`] rounds each ([`ROUNDS_QUICK`] with `--quick`; `--repeat N`
//! runs the pair N times).
//!
//! Was the target CPU idle? A 1 ms gap lets it idle, but on a shared
//! machine another task may be running there. A private tracefs instance
//! records the sleeper's `sched:sched_wakeup` (`pid == tid`) and
//! `sched:sched_switch` into it (`next_pid == tid`) with the `mono` trace
//! clock (CLOCK_MONOTONIC) into its ring buffer, read at the end of each
//! direction; each round is classified from its events between its wake
//! request and its return ([`classify`]): idle if the wakeup ran on the
//! target CPU in the idle task (queued to it and run from its IPI) or the
//! sleeper was switched in from the idle task; busy if it was switched in
//! from another task; unclassified otherwise (and every round of a
//! direction whose trace instance could not be made, with a note). Without
//! tracefs at all, only `wakeup.cross_cpu*` by direction and
//! `wakeup.run_delay` are recorded.
//!
//! Metrics (histograms recorded in ns, reported in us):
//! - `wakeup.cross_cpu`: every round, both directions;
//!   `wakeup.cross_cpu.0to1`, `wakeup.cross_cpu.1to0`: one direction each
//!   (waker CPU to sleeper CPU);
//! - `wakeup.cross_cpu.idle`: rounds whose target CPU was idle (the
//!   machine parameter); `wakeup.cross_cpu.busy`: rounds whose target CPU
//!   was running another task;
//! - `wakeup.cross_cpu.<dir>.idle_fraction` (fraction of the classified
//!   rounds of a direction that found the target idle),
//!   `wakeup.trace.unclassified` (rounds), `wakeup.trace.overrun` (events
//!   lost);
//! - `wakeup.run_delay`: per round, the growth of the sleeper's `run_delay`
//!   in `/proc/thread-self/schedstat` (time runnable on a runqueue but not
//!   running), read after the wake timestamp so not part of the interval;
//!   non-zero when the woken task waited for a task running on the target.
//!
//! The settings record the rounds, the gap, the cost of reading the clock,
//! the clocksource, the cpuidle driver and governor, and how busy each CPU
//! was during each direction (`/proc/stat`, all tasks including the
//! probe's own). Needs CPUs 0 and 1 in the probe's affinity mask; errors
//! otherwise.

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::guard::{Guard, StopToken};
use super::tracefs::{self, Instance};
use super::{progress, sys, Ctx};

/// Rounds per direction.
pub const ROUNDS: u32 = 2000;
/// Rounds per direction with `--quick`.
pub const ROUNDS_QUICK: u32 = 200;
/// Sleep of the waker before each wakeup: long enough for the sleeper to
/// block again and its CPU to enter idle.
pub const GAP: Duration = Duration::from_millis(1);
/// The CPUs used.
const CPUS: (usize, usize) = (0, 1);
/// How long the waker waits for the sleeper to finish a round.
const ROUND_TIMEOUT: Duration = Duration::from_secs(10);
/// Per-CPU ring buffer of the tracefs instance, KiB (one or two events of
/// ~70 bytes a round: room for several thousand rounds).
const TRACE_BUFFER_KIB: u64 = 1024;

/// Runs the experiment.
pub fn run(ctx: &mut Ctx) -> anyhow::Result<()> {
    let quick = ctx.opts.quick;
    let repeat = if quick { 1 } else { ctx.opts.repeat };
    let rounds = if quick { ROUNDS_QUICK } else { ROUNDS };
    let allowed = sys::allowed_cpus().context("sched_getaffinity")?;
    let (a, b) = CPUS;
    if !(allowed.contains(&a) && allowed.contains(&b)) {
        bail!(
            "wakeup needs CPUs {a} and {b}; this process may run on {allowed:?} \
             (a machine with fewer than 2 CPUs, or a restricted cpuset/affinity)"
        );
    }
    record_settings(ctx, rounds, repeat);
    // A private tracefs: which wakeups found the target CPU idle.
    let trace_root = match tracefs::mount(ctx.guard) {
        Ok(r) => Some(r),
        Err(e) => {
            ctx.notes.push(format!(
                "wakeups not classified idle/busy: mounting a private tracefs failed: {e:#}"
            ));
            None
        }
    };
    // Per direction: (idle, busy) classified rounds.
    let mut classes: BTreeMap<(usize, usize), (u64, u64)> = BTreeMap::new();
    let (mut unclassified, mut overrun) = (0u64, 0u64);
    let token = ctx.guard.token();
    for rep in 0..repeat {
        for (waker, sleeper) in [(a, b), (b, a)] {
            ctx.guard.check()?;
            progress(&format!(
                "wakeup: CPU {waker} wakes CPU {sleeper}, {rounds} rounds{}",
                if repeat > 1 {
                    format!(" (repeat {})", rep + 1)
                } else {
                    String::new()
                }
            ));
            let before = cpu_times();
            let t = Instant::now();
            let mut trace: Option<Instance> = None;
            let mut trace_err = None;
            let mut on_ready = |tid: i32| {
                if let Some(root) = &trace_root {
                    match sched_trace(ctx.guard, root, tid) {
                        Ok(t) => trace = Some(t),
                        Err(e) => trace_err = Some(e),
                    }
                }
                Ok(())
            };
            let out = direction(waker, sleeper, rounds, &token, &mut on_ready);
            let wall = t.elapsed();
            let after = cpu_times();
            let mut events = None;
            if let Some(inst) = trace {
                let got = inst.stop_and_read();
                inst.close(ctx.guard)?;
                let (lines, lost) = got?;
                overrun += lost;
                events = Some(sched_events(&lines));
            }
            if let Some(e) = trace_err {
                let n = format!("wakeups not classified idle/busy: {e:#}");
                if !ctx.notes.contains(&n) {
                    ctx.notes.push(n);
                }
            }
            let out = out?;
            let dir = format!("{waker}to{sleeper}");
            for r in &out.rounds {
                ctx.metrics
                    .record_as("wakeup.cross_cpu", "ns", "us", r.delta_ns);
                ctx.metrics
                    .record_as(&format!("wakeup.cross_cpu.{dir}"), "ns", "us", r.delta_ns);
                if let Some(d) = r.run_delay_ns {
                    ctx.metrics.record_as("wakeup.run_delay", "ns", "us", d);
                }
            }
            if let Some(ev) = events {
                let c = classes.entry((waker, sleeper)).or_default();
                for (r, idle) in out.rounds.iter().zip(classify(&out.rounds, &ev, sleeper)) {
                    match idle {
                        Some(true) => {
                            c.0 += 1;
                            ctx.metrics
                                .record_as("wakeup.cross_cpu.idle", "ns", "us", r.delta_ns);
                        }
                        Some(false) => {
                            c.1 += 1;
                            ctx.metrics
                                .record_as("wakeup.cross_cpu.busy", "ns", "us", r.delta_ns);
                        }
                        None => unclassified += 1,
                    }
                }
            } else {
                unclassified += out.rounds.len() as u64;
            }
            let note = "no wakeup.run_delay: /proc/thread-self/schedstat unreadable \
                        (CONFIG_SCHED_INFO off?)";
            if out.rounds.iter().all(|r| r.run_delay_ns.is_none())
                && !ctx.notes.iter().any(|n| n == note)
            {
                ctx.notes.push(note.into());
            }
            let busy = |c: usize| {
                busy_fraction(&before, &after, c)
                    .map(|f| format!("{:.1}%", f * 100.0))
                    .unwrap_or_else(|| "?".into())
            };
            ctx.settings.insert(
                format!("wakeup.{dir}.run{}", rep + 1),
                format!(
                    "{:.2} s; /proc/stat busy during it: CPU {a} {}, CPU {b} {}",
                    wall.as_secs_f64(),
                    busy(a),
                    busy(b)
                ),
            );
            if out.wrong_cpu > 0 {
                ctx.notes.push(format!(
                    "wakeup {dir}: the sleeper ran on a CPU other than {sleeper} \
                     in {} of {rounds} rounds (affinity not honoured?)",
                    out.wrong_cpu
                ));
            }
        }
    }
    if let Some(root) = trace_root {
        for ((waker, sleeper), (idle, busy)) in classes {
            if idle + busy > 0 {
                ctx.metrics.set(
                    &format!("wakeup.cross_cpu.{waker}to{sleeper}.idle_fraction"),
                    "fraction",
                    idle as f64 / (idle + busy) as f64,
                );
            }
        }
        ctx.metrics
            .set("wakeup.trace.unclassified", "rounds", unclassified as f64);
        ctx.metrics
            .set("wakeup.trace.overrun", "events", overrun as f64);
        super::loopdev::umount(ctx.guard, &root)?;
    }
    Ok(())
}

/// The `wakeup.*` settings and the machine's clock and idle set-up.
fn record_settings(ctx: &mut Ctx, rounds: u32, repeat: u32) {
    let (a, b) = CPUS;
    for (k, v) in [
        (
            "wakeup.rounds",
            format!("{rounds} per direction per repeat"),
        ),
        ("wakeup.repeat", repeat.to_string()),
        (
            "wakeup.gap",
            format!("{} us nanosleep before each wakeup", GAP.as_micros()),
        ),
        ("wakeup.cpus", format!("{a} and {b}, both directions")),
        (
            "wakeup.method",
            "pipe: waker stores CLOCK_MONOTONIC in an AtomicU64 then write(2)s 1 byte; \
             sleeper blocked in read(2) reads CLOCK_MONOTONIC on return; idle/busy \
             target from the sleeper's sched_wakeup and sched_switch events"
                .to_string(),
        ),
        ("wakeup.clock_read", clock_read_cost()),
    ] {
        ctx.settings.insert(k.into(), v);
    }
    let sysfs = |p: &str| sys::read_trim(Path::new(p)).ok();
    if let Some(c) = sysfs("/sys/devices/system/clocksource/clocksource0/current_clocksource") {
        ctx.settings.insert("clocksource".into(), c);
    }
    let driver = sysfs("/sys/devices/system/cpu/cpuidle/current_driver");
    let governor = sysfs("/sys/devices/system/cpu/cpuidle/current_governor_ro")
        .or_else(|| sysfs("/sys/devices/system/cpu/cpuidle/current_governor"));
    ctx.settings.insert(
        "cpuidle".into(),
        format!(
            "driver {}, governor {}",
            driver.as_deref().unwrap_or("(unreadable)"),
            governor.as_deref().unwrap_or("(unreadable)")
        ),
    );
    if driver.as_deref() == Some("none") {
        ctx.notes.push(
            "no cpuidle driver: an idle CPU uses the architecture's default idle \
             (HLT on x86; in a VM the vCPU halts and the host must run it again)"
                .into(),
        );
    }
}

/// One round as the sleeper saw it.
#[derive(Clone, Copy, Debug)]
struct Round {
    /// `CLOCK_MONOTONIC` just before the waker's `write(2)`, ns.
    t0_ns: u64,
    /// `CLOCK_MONOTONIC` when the sleeper's `read(2)` returned, ns.
    t1_ns: u64,
    /// `t1_ns - t0_ns`.
    delta_ns: u64,
    /// Growth of the sleeper's schedstat `run_delay` over the round, ns.
    run_delay_ns: Option<u64>,
}

/// What one direction measured.
struct Direction {
    /// One per round.
    rounds: Vec<Round>,
    /// Rounds in which the sleeper was not on its CPU when it woke.
    wrong_cpu: u32,
}

/// `rounds` wakeups of a thread pinned to `sleeper_cpu` by one pinned to
/// `waker_cpu`. `on_ready` runs with the sleeper's thread id once it is
/// pinned, before the first wakeup.
fn direction(
    waker_cpu: usize,
    sleeper_cpu: usize,
    rounds: u32,
    token: &StopToken,
    on_ready: &mut dyn FnMut(i32) -> anyhow::Result<()>,
) -> anyhow::Result<Direction> {
    let (rfd, wfd) = sys::pipe().context("pipe")?;
    let sent = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let sleeper_gone = AtomicBool::new(false);
    let tid = AtomicI32::new(0);
    let (sent, done, sleeper_gone, tid) = (&sent, &done, &sleeper_gone, &tid);
    std::thread::scope(|s| {
        let sleeper = s.spawn(|| {
            // Tells the waker this thread has stopped, however it ends.
            struct Gone<'a>(&'a AtomicBool);
            impl Drop for Gone<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Release);
                }
            }
            let _gone = Gone(sleeper_gone);
            sys::pin_to_cpu(sleeper_cpu)
                .with_context(|| format!("pin the sleeper to CPU {sleeper_cpu}"))?;
            // SAFETY: gettid has no preconditions and cannot fail.
            tid.store(unsafe { libc::gettid() }, Ordering::Release);
            let mut delay = run_delay_ns();
            let mut out = Direction {
                rounds: Vec::with_capacity(rounds as usize),
                wrong_cpu: 0,
            };
            while sys::read_byte(rfd.as_fd()).context("read the pipe")? {
                let t1 = sys::monotonic_ns();
                let t0 = sent.load(Ordering::Acquire);
                if sys::current_cpu().is_some_and(|c| c != sleeper_cpu) {
                    out.wrong_cpu += 1;
                }
                // After the timestamp: not part of the measured interval.
                let now = run_delay_ns();
                out.rounds.push(Round {
                    t0_ns: t0,
                    t1_ns: t1,
                    delta_ns: t1.saturating_sub(t0),
                    run_delay_ns: delay.zip(now).map(|(a, b)| b.saturating_sub(a)),
                });
                delay = now;
                done.fetch_add(1, Ordering::Release);
            }
            anyhow::Ok(out)
        });
        // The sleeper's thread id, once it is pinned, for the caller's
        // set-up; the waker starts after it.
        let ready = loop {
            match tid.load(Ordering::Acquire) {
                0 if sleeper_gone.load(Ordering::Acquire) => break Ok(()),
                0 => std::thread::sleep(Duration::from_micros(100)),
                t => break on_ready(t),
            }
        };
        if let Err(e) = ready {
            drop(wfd);
            let _ = sleeper.join();
            return Err(e);
        }
        let waker = s.spawn(move || {
            // Owns the write end: dropping it (any return) ends the sleeper.
            let wfd = wfd;
            sys::pin_to_cpu(waker_cpu)
                .with_context(|| format!("pin the waker to CPU {waker_cpu}"))?;
            for i in 0..u64::from(rounds) {
                token.check()?;
                let deadline = Instant::now() + ROUND_TIMEOUT;
                while done.load(Ordering::Acquire) < i {
                    if sleeper_gone.load(Ordering::Acquire) {
                        bail!("the sleeper thread stopped early");
                    }
                    if Instant::now() > deadline {
                        bail!(
                            "the sleeper on CPU {sleeper_cpu} did not finish round {i} in {} s",
                            ROUND_TIMEOUT.as_secs()
                        );
                    }
                    std::thread::sleep(Duration::from_micros(20));
                }
                std::thread::sleep(GAP);
                sent.store(sys::monotonic_ns(), Ordering::Release);
                sys::write_byte(wfd.as_fd()).context("write the pipe")?;
            }
            anyhow::Ok(())
        });
        let w = waker
            .join()
            .map_err(|_| anyhow::anyhow!("the waker thread panicked"))?;
        let out = sleeper
            .join()
            .map_err(|_| anyhow::anyhow!("the sleeper thread panicked"))?;
        // The sleeper's error first: it explains a waker's "stopped early".
        let out = out?;
        w?;
        if out.rounds.len() != rounds as usize {
            bail!("the sleeper saw {} wakeups of {rounds}", out.rounds.len());
        }
        Ok(out)
    })
}

/// A tracefs instance recording, for thread `tid`, `sched:sched_wakeup`
/// (`pid == tid`) and `sched:sched_switch` into it (`next_pid == tid`) with
/// the `mono` clock into its ring buffer, tracing on; read with
/// [`Instance::stop_and_read`] at the end.
fn sched_trace(guard: &Guard, root: &Path, tid: i32) -> anyhow::Result<Instance> {
    let filter = |format: &str| {
        Some(if format.contains(" next_pid;") {
            format!("next_pid == {tid}")
        } else {
            format!("pid == {tid}")
        })
    };
    let inst = Instance::create_events(
        guard,
        root,
        "sched",
        &["sched_wakeup", "sched_switch"],
        &filter,
        TRACE_BUFFER_KIB,
    )?;
    let check = match inst.events.as_slice() {
        [(_, true), (_, true)] => inst.set_clock("mono").and_then(|()| inst.start_buffered()),
        other => Err(anyhow::anyhow!(
            "sched_wakeup and sched_switch filtered to the sleeper: got {other:?}"
        )),
    };
    if let Err(e) = check {
        inst.close(guard)?;
        return Err(e);
    }
    Ok(inst)
}

/// A traced scheduler event of the sleeper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SchedEvent {
    /// `sched_wakeup`: the CPU it ran on and the task current there.
    Wakeup { cpu: usize, current: i32 },
    /// `sched_switch` into the sleeper from `prev_pid`.
    SwitchIn { prev: i32 },
}

/// The sleeper's events from trace lines, with timestamps, in time order.
fn sched_events(lines: &[String]) -> Vec<(u64, SchedEvent)> {
    let mut v: Vec<(u64, SchedEvent)> = lines
        .iter()
        .filter_map(|l| {
            let t = tracefs::parse_line(l)?;
            let ev = match t.event {
                "sched_wakeup" => SchedEvent::Wakeup {
                    cpu: t.cpu,
                    current: t.pid,
                },
                "sched_switch" => SchedEvent::SwitchIn {
                    prev: t
                        .text
                        .split_whitespace()
                        .find_map(|f| f.strip_prefix("prev_pid="))?
                        .parse()
                        .ok()?,
                },
                _ => return None,
            };
            Some((t.ts_ns, ev))
        })
        .collect();
    v.sort_by_key(|e| e.0);
    v
}

/// For each round, whether the target CPU `target` was idle when woken,
/// from the sleeper's events between the wake request and its return
/// (timestamps are truncated to whole microseconds):
/// 1. a `sched_wakeup` that ran on the target CPU while the idle task was
///    current there (the wakeup was queued to the idle target and run from
///    its IPI): idle;
/// 2. else the first switch into the sleeper: from the idle task, idle;
///    from another task, busy (the sleeper had to preempt it or wait);
/// 3. else unknown (None). On this project's machine a switch from the idle
///    task into the sleeper was not traced on CPU 1 (it was on CPU 0), and
///    a wakeup run on the waker's CPU (a remote enqueue, which the kernel
///    does when the target's runqueue is not empty) says nothing by itself.
fn classify(rounds: &[Round], events: &[(u64, SchedEvent)], target: usize) -> Vec<Option<bool>> {
    rounds
        .iter()
        .map(|r| {
            let from = r.t0_ns.saturating_sub(999);
            let i = events.partition_point(|&(ts, _)| ts < from);
            let window = || events[i..].iter().take_while(|&&(ts, _)| ts <= r.t1_ns);
            let woke_idle = window().any(
                |&(_, e)| matches!(e, SchedEvent::Wakeup { cpu, current: 0 } if cpu == target),
            );
            if woke_idle {
                return Some(true);
            }
            window().find_map(|&(_, e)| match e {
                SchedEvent::SwitchIn { prev } => Some(prev == 0),
                SchedEvent::Wakeup { .. } => None,
            })
        })
        .collect()
}

/// The calling thread's `run_delay` (ns runnable but waiting for a CPU; the
/// second field of `/proc/thread-self/schedstat`). Opened anew each time:
/// re-reading an open one from offset 0 returned stale values here.
fn run_delay_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Median cost of one `CLOCK_MONOTONIC` read (1001 back-to-back pairs).
fn clock_read_cost() -> String {
    let mut v: Vec<u64> = (0..1001)
        .map(|_| {
            let t = sys::monotonic_ns();
            sys::monotonic_ns().saturating_sub(t)
        })
        .collect();
    v.sort_unstable();
    format!("{} ns median per CLOCK_MONOTONIC read", v[v.len() / 2])
}

/// Per-CPU (busy, total) jiffies from `/proc/stat` (`cpuN` lines; idle and
/// iowait are not busy).
fn cpu_times() -> Vec<(usize, u64, u64)> {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: usize = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal (guest* are in user).
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            Some((cpu, total.saturating_sub(idle), total))
        })
        .collect()
}

/// Fraction of `cpu`'s time that was busy between two [`cpu_times`].
fn busy_fraction(
    before: &[(usize, u64, u64)],
    after: &[(usize, u64, u64)],
    cpu: usize,
) -> Option<f64> {
    let find = |v: &[(usize, u64, u64)]| v.iter().find(|x| x.0 == cpu).map(|x| (x.1, x.2));
    let (b0, t0) = find(before)?;
    let (b1, t1) = find(after)?;
    let dt = t1.checked_sub(t0).filter(|&d| d > 0)?;
    Some(b1.saturating_sub(b0) as f64 / dt as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_fraction_from_deltas() {
        let before = [(0, 10, 100), (1, 0, 100)];
        let after = [(0, 60, 200), (1, 0, 200)];
        assert_eq!(busy_fraction(&before, &after, 0), Some(0.5));
        assert_eq!(busy_fraction(&before, &after, 1), Some(0.0));
        assert_eq!(busy_fraction(&before, &after, 2), None);
    }

    #[test]
    fn cpu_times_reads_proc_stat() {
        let t = cpu_times();
        assert!(t.iter().any(|x| x.0 == 0), "{t:?}");
        assert!(t.iter().all(|x| x.1 <= x.2));
    }

    #[test]
    fn rounds_are_classified_from_wakeup_and_switch_events() {
        let lines: Vec<String> = [
            // Round 1: wakeup run in the idle task on the target (CPU 1);
            // the switch from idle is missing, as on CPU 1 here.
            " <idle>-0 [001] d.h2. 1.000012: sched_wakeup: comm=w pid=9 prio=120 target_cpu=001",
            // Round 2: remote enqueue from the waker (CPU 0), then a switch
            // from a running task.
            " wbsim-8 [000] d..2. 1.002005: sched_wakeup: comm=w pid=9 prio=120 target_cpu=001",
            " cc1-77 [001] d..2. 1.002020: sched_switch: prev_comm=cc1 prev_pid=77 prev_prio=120 prev_state=R+ ==> next_comm=w next_pid=9 next_prio=120",
            // Round 3: switch from idle only (as on CPU 0).
            " <idle>-0 [001] d..2. 1.004010: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=w next_pid=9 next_prio=120",
            // Round 4: a remote wakeup and nothing else.
            " wbsim-8 [000] d..2. 1.006005: sched_wakeup: comm=w pid=9 prio=120 target_cpu=001",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let ev = sched_events(&lines);
        assert_eq!(ev.len(), 5);
        assert_eq!(
            ev[0],
            (1_000_012_000, SchedEvent::Wakeup { cpu: 1, current: 0 })
        );
        assert_eq!(ev[2], (1_002_020_000, SchedEvent::SwitchIn { prev: 77 }));
        let round = |t0: u64, t1: u64| Round {
            t0_ns: t0,
            t1_ns: t1,
            delta_ns: t1 - t0,
            run_delay_ns: None,
        };
        let rounds = [
            // Wakeup at 1.000012 (truncated), wake request at 1.0000125.
            round(1_000_012_500, 1_000_030_000),
            round(1_002_000_000, 1_002_030_000),
            round(1_004_000_000, 1_004_030_000),
            round(1_006_000_000, 1_006_030_000),
            // Nothing traced.
            round(1_008_000_000, 1_008_030_000),
        ];
        assert_eq!(
            classify(&rounds, &ev, 1),
            vec![Some(true), Some(false), Some(true), None, None]
        );
        // The same wakeup seen as on the other CPU is no evidence of idle.
        assert_eq!(classify(&rounds[..1], &ev, 0), vec![None]);
    }
}
