//! Known-answer tests of the calculator (limits, bandwidth, pauses).

use super::*;

const GIB_PAGES: u64 = (1 << 30) / PAGE_SIZE;
/// 24 GiB of dirtyable memory, pages.
const AVAIL_24G: u64 = 24 * GIB_PAGES;
const HZ1000: Hz = Hz::DEFAULT;
const MS: u64 = 1_000_000;

fn th24() -> DirtyThresholds {
    domain_dirty_limits(AVAIL_24G, &VmDirtyParams::default())
}

#[test]
fn thresholds_24g_default_ratios() {
    // ratio 20% -> 819/4096 per page, 10% -> 409/4096 (kernel precision).
    let t = th24();
    assert_eq!(t.thresh, 1_257_984);
    assert_eq!(t.bg_thresh, 628_224);
    assert_eq!(t.freerun_ceiling(), 943_104);
}

#[test]
fn dirty_bytes_take_precedence_and_bg_halves() {
    let mut p = VmDirtyParams::default();
    p.set_dirty_bytes((1 << 30) + 1).unwrap();
    assert_eq!(p.dirty_ratio, 0, "writing dirty_bytes clears dirty_ratio");
    let t = domain_dirty_limits(AVAIL_24G, &p);
    assert_eq!(t.thresh, GIB_PAGES + 1, "rounded up to whole pages");
    // bg from the 10% ratio (628224) >= thresh -> thresh / 2.
    assert_eq!(t.bg_thresh, t.thresh / 2);

    let mut p = VmDirtyParams::default();
    p.set_dirty_background_bytes(512 << 20).unwrap();
    let t = domain_dirty_limits(AVAIL_24G, &p);
    assert_eq!(t.thresh, 1_257_984);
    assert_eq!(t.bg_thresh, 131_072);
}

#[test]
fn bg_ratio_above_dirty_ratio_halves() {
    let p = VmDirtyParams {
        dirty_background_ratio: 30,
        ..Default::default()
    };
    let t = domain_dirty_limits(AVAIL_24G, &p);
    assert_eq!(t.thresh, 1_257_984);
    assert_eq!(t.bg_thresh, 628_992);
}

#[test]
fn rt_task_boost_and_param_errors() {
    let t = domain_dirty_limits_task(AVAIL_24G, &VmDirtyParams::default(), Some(1_257_984));
    assert_eq!(t.thresh, 1_257_984 + 314_496 + 39_312);
    assert_eq!(t.bg_thresh, 628_224 + 157_056 + 39_312);
    let mut p = VmDirtyParams::default();
    assert!(p.set_dirty_ratio(101).is_err());
    assert!(p.set_dirty_bytes(u64::MAX).is_err());
    assert!(VmDirtyParams {
        dirty_background_ratio: 200,
        ..Default::default()
    }
    .validate()
    .is_err());
    assert!(Hz::new(0).is_err());
    assert_eq!(p.dirty_expire_interval_ns(), 30_000 * MS);
    assert_eq!(p.dirty_writeback_interval_ns(), 5_000 * MS);
}

#[test]
fn dirtyable_memory_helper() {
    assert_eq!(global_dirtyable_memory(1000, 100, 500, 300), 1701);
    // Reserves larger than free memory do not underflow.
    assert_eq!(global_dirtyable_memory(50, 100, 500, 300), 801);
}

#[test]
fn dirty_limit_follows_up_at_once_down_slowly() {
    let mut dom = WbDomain::new(0);
    dom.dirty_limit = 1000;
    dom.update_dirty_limit(2000, 0);
    assert_eq!(dom.dirty_limit, 2000);
    dom.update_dirty_limit(1000, 500);
    assert_eq!(dom.dirty_limit, 2000 - (1000 >> 5));
    dom.dirty_limit = 2000;
    dom.update_dirty_limit(1000, 1900);
    assert_eq!(
        dom.dirty_limit,
        2000 - (100 >> 5),
        "dirty above thresh is the target"
    );
    // At most once per 200 ms.
    let mut dom = WbDomain::new(0);
    dom.dirty_limit = 2000;
    assert!(!dom.domain_update_dirty_limit(1000, 0, 199 * MS));
    assert!(dom.domain_update_dirty_limit(1000, 0, 200 * MS));
    assert!(!dom.domain_update_dirty_limit(1000, 0, 399 * MS));
    assert_eq!(dom.dirty_limit, 1969);
}

#[test]
fn write_bandwidth_smoothing() {
    let mut bw = WbBandwidth::new(0);
    // 2560 pages in 200 jiffies (12800 pages/s) over a 4096-jiffy window.
    let d = wb_update_write_bandwidth(&mut bw, 200, 2560, true, HZ1000);
    assert_eq!(bw.write_bandwidth, 24_975);
    assert_eq!(
        bw.avg_write_bandwidth, INIT_BW,
        "avg moves only when both agree"
    );
    assert_eq!(d, 0);
    bw.written_stamp = 2560;
    let d = wb_update_write_bandwidth(&mut bw, 200, 5120, true, HZ1000);
    assert_eq!(bw.write_bandwidth, 24_380);
    assert_eq!(bw.avg_write_bandwidth, INIT_BW - ((INIT_BW - 24_975) >> 3));
    assert_eq!(d, -78);
    // A gap longer than the window resets both to the measured rate.
    bw.written_stamp = 0;
    wb_update_write_bandwidth(&mut bw, 5000, 50_000, false, HZ1000);
    assert_eq!(
        (bw.write_bandwidth, bw.avg_write_bandwidth),
        (10_000, 10_000)
    );
}

#[test]
fn bandwidth_update_only_when_due() {
    let bw = WbBandwidth::new(0);
    assert!(!bw.update_due(200 * MS, HZ1000));
    assert!(bw.update_due(201 * MS, HZ1000));
    let mut bw = WbBandwidth::new(0);
    let d = wb_update_bandwidth(&mut bw, 201 * MS, 10, 2573, false, HZ1000);
    assert_eq!(d, 0);
    assert_eq!((bw.dirtied_stamp, bw.written_stamp), (10, 2573));
    assert_eq!(bw.bw_time_stamp_ns, 201 * MS);
    // Idle restart of the estimate window.
    wb_bandwidth_estimate_start(&mut bw, 1201 * MS, 20, 3000, 0, HZ1000);
    assert_eq!(bw.bw_time_stamp_ns, 201 * MS, "1 s is not idle yet");
    wb_bandwidth_estimate_start(&mut bw, 1202 * MS, 20, 3000, 0, HZ1000);
    assert_eq!((bw.bw_time_stamp_ns, bw.written_stamp), (1202 * MS, 3000));
}

#[test]
fn pos_ratio_polynom_shape() {
    let t = th24();
    let limit = t.thresh;
    let setpoint = (t.freerun_ceiling() + limit) / 2;
    assert_eq!(setpoint, 1_100_544);
    assert_eq!(pos_ratio_polynom(setpoint, setpoint, limit), 1024);
    assert_eq!(
        pos_ratio_polynom(setpoint, 0, limit),
        2048,
        "clamped at 2.0"
    );
    assert_eq!(
        pos_ratio_polynom(setpoint, t.freerun_ceiling(), limit),
        2045
    );
    assert!(pos_ratio_polynom(setpoint, limit, limit) <= 3);
    let mut prev = u64::MAX;
    for dirty in (t.freerun_ceiling()..limit).step_by(997) {
        let p = pos_ratio_polynom(setpoint, dirty, limit);
        assert!(p <= prev, "not monotonic at {dirty}");
        prev = p;
    }
}

fn single_wb_dtc(dirty: u64, write_bw: u64) -> (DirtyThrottleControl, u64) {
    let t = th24();
    let mut dtc = DirtyThrottleControl::new(dirty, t);
    dtc.wb_thresh = t.thresh;
    dtc.wb_bg_thresh = t.bg_thresh;
    dtc.wb_dirty = dirty;
    let p = wb_position_ratio(&mut dtc, t.thresh, write_bw, false);
    (dtc, p)
}

#[test]
fn wb_position_ratio_single_wb() {
    let t = th24();
    let (dtc, p) = single_wb_dtc(1_100_544, INIT_BW);
    assert_eq!(dtc.limit, t.thresh);
    assert!((1022..=1024).contains(&p), "about 1.0 at setpoint: {p}");
    let (_, p) = single_wb_dtc(t.thresh, INIT_BW);
    assert_eq!(p, 0, "0 at the limit");
    let (_, p) = single_wb_dtc(t.thresh + 10, INIT_BW);
    assert_eq!(p, 0, "0 above the limit");
    let mut prev = u64::MAX;
    for dirty in (t.freerun_ceiling()..t.thresh).step_by(1009) {
        let (_, p) = single_wb_dtc(dirty, INIT_BW);
        assert!(p <= prev, "not monotonic at {dirty}");
        prev = p;
    }
    // The wb line never drops below 1/4 of the global ratio.
    let mut dtc = DirtyThrottleControl::new(1_100_544, t);
    dtc.wb_thresh = t.thresh / 4;
    dtc.wb_bg_thresh = t.bg_thresh / 4;
    dtc.wb_dirty = 1_100_544;
    assert_eq!(wb_position_ratio(&mut dtc, t.thresh, INIT_BW, false), 256);
    // Reserve area: a nearly empty wb gets 8x.
    dtc.wb_dirty = 10;
    let p = wb_position_ratio(&mut dtc, t.thresh, INIT_BW, false);
    assert!(p > 8 * 1024, "{p}");
}

#[test]
fn wb_position_ratio_strictlimit() {
    let t = th24();
    let mut dtc = DirtyThrottleControl::new(10_000, t);
    dtc.wb_thresh = 12_579;
    dtc.wb_bg_thresh = 6_281;
    dtc.wb_dirty = (12_579 + 6_281) / 2;
    // Global ratio is 2.0 (far below freerun); the wb's own cubic gives 1.0.
    assert_eq!(wb_position_ratio(&mut dtc, t.thresh, INIT_BW, true), 1024);
    dtc.wb_dirty = 12_579;
    assert_eq!(wb_position_ratio(&mut dtc, t.thresh, INIT_BW, true), 0);
    dtc.wb_dirty = 7_000;
    let p = wb_position_ratio(&mut dtc, t.thresh, INIT_BW, true);
    assert!(p > 1024 && p <= 2048, "{p}");
}

#[test]
fn wb_thresh_share_min_max_and_bump() {
    let share = |num, den, min, max, strict| WbShare {
        numerator: num,
        denominator: den,
        wb_min_ratio: min,
        wb_max_ratio: max,
        bdi_min_ratio_sum: min,
        strictlimit: strict,
    };
    let full = 100 * BDI_RATIO_SCALE;
    // Half of the completions -> half of thresh (dirty above thresh: no bump).
    assert_eq!(
        __wb_calc_thresh(1_000_000, 2_000_000, &share(1, 2, 0, full, false)),
        500_000
    );
    // min_ratio 10%: 90% shared, plus its 10%.
    assert_eq!(
        __wb_calc_thresh(
            1_000_000,
            2_000_000,
            &share(1, 2, 10 * BDI_RATIO_SCALE, full, false)
        ),
        450_000 + 100_000
    );
    // max_ratio 1% caps.
    assert_eq!(
        __wb_calc_thresh(1_000_000, 0, &share(1, 1, 0, BDI_RATIO_SCALE, false)),
        10_000
    );
    // An idle wb (no completions) gets (thresh - dirty) / 8, or /100 strict.
    assert_eq!(
        __wb_calc_thresh(1_000_000, 200_000, &share(0, 1, 0, full, false)),
        100_000
    );
    assert_eq!(
        __wb_calc_thresh(1_000_000, 200_000, &share(0, 1, 0, full, true)),
        8_000
    );
    // cgwb scaling of min/max by bandwidth share.
    let bdi = BdiDirtyConfig {
        min_ratio: 10 * BDI_RATIO_SCALE,
        max_ratio: 50 * BDI_RATIO_SCALE,
        ..Default::default()
    };
    assert_eq!(
        wb_min_max_ratio(&bdi, 100, 400),
        (25 * BDI_RATIO_SCALE / 10, 125 * BDI_RATIO_SCALE / 10)
    );
    assert_eq!(
        wb_min_max_ratio(&bdi, 400, 400),
        (bdi.min_ratio, bdi.max_ratio)
    );
    // wb_dirty_limits: wb_bg_thresh in proportion.
    let t = th24();
    let mut dtc = DirtyThrottleControl::new(2_000_000, t);
    let wb = WbCounts {
        reclaimable: 7,
        writeback: 3,
        ..Default::default()
    };
    wb_dirty_limits(&mut dtc, &share(1, 2, 0, full, false), &wb);
    assert_eq!(dtc.wb_thresh, t.thresh / 2);
    assert_eq!(dtc.wb_bg_thresh, t.bg_thresh / 2);
    assert_eq!(dtc.wb_dirty, 10);
}

#[test]
fn fprop_fractions_aging_and_cap() {
    let mut dom = WbDomain::new(0);
    dom.writeout_inc(1, 300, 0);
    dom.writeout_inc(2, 100, 0);
    assert_eq!(dom.wb_fraction(1), (300, 401));
    assert_eq!(dom.period_time_ns(), Some(3_000 * MS));
    assert!(!dom.age_if_due(2_999 * MS));
    assert!(dom.age_if_due(3_000 * MS));
    assert_eq!(dom.wb_fraction(1), (150, 200));
    assert_eq!(dom.period_time_ns(), Some(6_000 * MS));
    // A late (deferred) timer counts the missed period: two halvings.
    dom.writeout_period(10_000 * MS);
    assert_eq!(dom.wb_fraction(2), (12, 50));
    assert_eq!(dom.period_time_ns(), Some(12_000 * MS));
    assert_eq!(dom.wb_fraction(99), (0, 50));

    // max_prop_frac 10 (max_ratio 1%): the wb's counted share stays ~1%.
    let mut dom = WbDomain::new(0);
    for _ in 0..100 {
        dom.writeout_add(1, 10, 100, 0);
        dom.writeout_inc(2, 100, 0);
    }
    let (n, d) = dom.wb_fraction(1);
    assert!(n * 1000 <= d * 11 && n * 1000 >= d * 5, "{n}/{d}");
}

#[test]
fn pause_bounds() {
    assert_eq!(wb_max_pause(INIT_BW, 1000, HZ1000), 5);
    assert_eq!(wb_max_pause(INIT_BW, 10_000_000, HZ1000), 200);
    // One dirtier at 100 MB/s: target 10 ms -> 250 pages, min pause 6.
    assert_eq!(
        wb_min_pause(INIT_BW, INIT_BW, 200, INIT_BW, HZ1000),
        (6, 250)
    );
    // Four dirtiers: +2 doublings -> target 29 ms.
    assert_eq!(wb_min_pause(INIT_BW, 6400, 200, 6400, HZ1000), (15, 181));
    assert_eq!(dirty_poll_interval(943_104, 1_257_984), 512);
    assert_eq!(dirty_poll_interval(5, 5), 1);
    assert_eq!(wb_stat_error(8), 8 * 4 * 8);
}

#[test]
fn ratelimit_gate_and_set_ratelimit() {
    let mut dom = WbDomain::new(0);
    assert_eq!(writeback_set_ratelimit(&mut dom, 1_257_984, 1), 39_312);
    assert_eq!(dom.dirty_limit, 1_257_984);
    assert_eq!(writeback_set_ratelimit(&mut dom, 1_257_984, 8), 4_914);
    assert_eq!(writeback_set_ratelimit(&mut dom, 1000, 8), 16);

    let mut task = TaskDirtyState::default();
    let mut cpu = CpuDirtyRatelimit::default();
    account_task_dirtied(&mut task, &mut cpu, 31);
    assert_eq!(
        balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, false, 4914),
        None
    );
    account_task_dirtied(&mut task, &mut cpu, 1);
    assert_eq!(
        balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, false, 4914),
        Some(32)
    );
    assert_eq!(cpu.bdp_ratelimits, 0);
    // dirty_exceeded: every 8 pages.
    let mut task = TaskDirtyState::default();
    account_task_dirtied(&mut task, &mut cpu, 8);
    assert_eq!(
        balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, true, 4914),
        Some(8)
    );
    // A CPU that dirtied ratelimit_pages forces a balance.
    let mut task = TaskDirtyState::default();
    cpu.bdp_ratelimits = 4914;
    account_task_dirtied(&mut task, &mut cpu, 1);
    assert_eq!(
        balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, false, 4914),
        Some(1)
    );
    // Leaks of exited tasks are charged to the next dirtier.
    let exited = TaskDirtyState {
        nr_dirtied: 20,
        ..Default::default()
    };
    task_exit_dirty_leak(&exited, &mut cpu);
    let mut task = TaskDirtyState::default();
    account_task_dirtied(&mut task, &mut cpu, 12);
    assert_eq!(
        balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, false, 4914),
        Some(32)
    );
    assert_eq!(cpu.dirty_throttle_leaks, 0);
}

fn bdp_input<'a>(now_ns: u64, dirty: u64, writeback: u64, pages_dirtied: u64) -> BdpInput<'a> {
    BdpInput {
        now_ns,
        start_ns: now_ns,
        pages_dirtied,
        flags: BdpFlags::default(),
        thresholds: th24(),
        global: GlobalDirtyCounts {
            nr_file_dirty: dirty,
            nr_writeback: writeback,
        },
        wb_id: 1,
        wb: WbCounts {
            reclaimable: dirty,
            writeback,
            dirtied: 0,
            written: 0,
        },
        wb_has_dirty_io: true,
        writeback_in_progress: false,
        bdi: BdiDirtyConfig::default(),
        bdi_name: "8:0",
        bdi_min_ratio_sum: 0,
        tot_write_bandwidth: INIT_BW,
        local_throttle: false,
        nr_cpu_ids: 8,
        hz: HZ1000,
        mdtc: None,
    }
}

/// A domain where wb 1 did all recent writeout, and a fresh wb.
fn setup(now_ns: u64) -> (WbDomain, WbBandwidth) {
    let mut dom = WbDomain::new(0);
    writeback_set_ratelimit(&mut dom, th24().thresh, 8);
    dom.writeout_inc(1, 100_000, 0);
    let mut bw = WbBandwidth::new(0);
    bw.bw_time_stamp_ns = now_ns; // no bandwidth update in these calls
    (dom, bw)
}

#[test]
fn bdp_freerun_below_ceiling() {
    let now = 5_000 * MS;
    let (mut dom, mut bw) = setup(now);
    let mut task = TaskDirtyState {
        nr_dirtied: 32,
        ..Default::default()
    };
    let inp = bdp_input(now, 900_000, 43_104, 32);
    let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
    assert_eq!(
        step.action,
        BdpAction::Freerun {
            nr_dirtied_pause: 512
        }
    );
    assert!(step.start_background, "dirty 900000 > bg_thresh 628224");
    assert!(step.trace.is_none() && step.set_dirty_exceeded.is_none());
    assert_eq!(task.nr_dirtied, 0);
    assert_eq!(task.nr_dirtied_pause, 512);
    assert_eq!(task.dirty_paused_when_ns, now);
    // One page over the ceiling: throttled.
    let inp = bdp_input(now, 900_001, 43_104, 32);
    let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
    assert!(!matches!(step.action, BdpAction::Freerun { .. }));
    // Below bg_thresh with writeback running: nothing to start.
    let mut inp = bdp_input(now, 600_000, 0, 32);
    inp.writeback_in_progress = true;
    let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
    assert!(!step.start_background);
}

#[test]
fn bdp_short_pause_is_debt() {
    let now = 5_000 * MS;
    let (mut dom, mut bw) = setup(now);
    // At the setpoint, 32 pages at ~25600 pages/s = 1 jiffy < min_pause 6.
    let mut task = TaskDirtyState {
        nr_dirtied: 32,
        nr_dirtied_pause: 32,
        dirty_paused_when_ns: now,
    };
    let inp = bdp_input(now, 1_100_544, 0, 32);
    let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
    match step.action {
        BdpAction::NoPause {
            pause_ns,
            period_ns,
            ..
        } => {
            assert_eq!(pause_ns, MS as i64);
            assert_eq!(period_ns, MS);
        }
        a => panic!("{a:?}"),
    }
    assert_eq!(
        task.dirty_paused_when_ns,
        now + MS,
        "virtual time advanced by the period"
    );
    assert_eq!(task.nr_dirtied, 0);
    let tr = step.trace.unwrap();
    assert_eq!((tr.pause, tr.period, tr.think), (0, 1, 0));
}

#[test]
fn bdp_pause_capped_at_max_pause() {
    let now = 5_000 * MS;
    let (mut dom, mut bw) = setup(now);
    let mut task = TaskDirtyState {
        nr_dirtied: 4096,
        nr_dirtied_pause: 4096,
        dirty_paused_when_ns: now,
    };
    // Close to the limit: pos_ratio tiny, 4096 pages take far over 200 ms.
    let inp = bdp_input(now, 1_250_000, 0, 4096);
    let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
    let BdpAction::Pause(p) = step.action else {
        panic!("{:?}", step.action)
    };
    assert_eq!(p.pause_ns, 200 * MS);
    assert!(p.period_ns > 400 * MS, "{}", p.period_ns);
    assert!(p.pos_ratio < 1024 / 4);
    // now advanced by min(pause - max_pause, max_pause) = 200 ms, + pause.
    assert_eq!(p.dirty_paused_when_ns, now + 400 * MS);
    assert!(p.stop_after);
    assert_eq!(task.nr_dirtied, 4096, "untouched until the caller slept");
    task.after_pause(&p);
    assert_eq!(task.nr_dirtied, 0);
    assert_eq!(task.nr_dirtied_pause, p.nr_dirtied_pause);
    let tr = step.trace.unwrap();
    assert_eq!(tr.pause, 200);
    assert!(tr
        .to_string()
        .starts_with("bdi 8:0: limit=1257984 setpoint=1100544 dirty=1250000"));
}

#[test]
fn bdp_over_limit_pauses_max_and_loops() {
    let now = 5_000 * MS;
    let (mut dom, mut bw) = setup(now);
    let mut task = TaskDirtyState::default();
    let inp = bdp_input(now, 1_300_000, 0, 32);
    let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
    let BdpAction::Pause(p) = step.action else {
        panic!("{:?}", step.action)
    };
    assert_eq!((p.pos_ratio, p.task_ratelimit), (0, 0));
    assert_eq!(p.pause_ns, 200 * MS);
    assert!(p.dirty_exceeded && step.set_dirty_exceeded == Some(true));
    assert!(!p.stop_after, "zero rate: loop again after sleeping");
}

#[test]
fn bdp_async_would_block_instead_of_pausing() {
    let now = 5_000 * MS;
    let (mut dom, mut bw) = setup(now);
    let mut task = TaskDirtyState {
        nr_dirtied: 4096,
        nr_dirtied_pause: 4096,
        dirty_paused_when_ns: now,
    };
    let before = task;
    let mut inp = bdp_input(now, 1_200_000, 0, 4096);
    let sync = balance_dirty_pages(&inp, &mut task.clone(), &mut dom.clone(), &mut bw.clone());
    inp.flags.bdp_async = true;
    let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
    let (BdpAction::Pause(a), BdpAction::WouldBlock(b)) = (sync.action, step.action) else {
        panic!("{:?} / {:?}", sync.action, step.action)
    };
    assert_eq!(a, b);
    assert!(b.pause_ns > 0);
    assert_eq!(task, before, "-EAGAIN leaves the task state alone");
}

// ---- closed loop -------------------------------------------------------

struct Writer {
    task: TaskDirtyState,
    /// The writer's own clock, ns.
    t: u64,
    /// Iterate balance_dirty_pages again at wakeup: (pages_dirtied, start).
    again: Option<(u64, u64)>,
    dirtied: u64,
}

struct World {
    dom: WbDomain,
    bw: WbBandwidth,
    bdi: BdiDirtyConfig,
    th: DirtyThresholds,
    nr_dirty: u64,
    nr_writeback: u64,
    wb_dirtied: u64,
    wb_written: u64,
    dirty_exceeded: bool,
    flusher: bool,
    cpu: CpuDirtyRatelimit,
    ratelimit_pages: u64,
    writers: Vec<Writer>,
    /// Writer speed, pages/s.
    write_rate: u64,
    /// Device speed, pages/s.
    device_rate: u64,
    tot_bw: u64,
    now: u64,
}

const DT: u64 = 10 * MS;
const INFLIGHT: u64 = 1024;

impl World {
    fn new(n: usize, write_rate: u64, device_rate: u64, bdi: BdiDirtyConfig) -> Self {
        let th = th24();
        let mut dom = WbDomain::new(0);
        let ratelimit_pages = writeback_set_ratelimit(&mut dom, th.thresh, 4);
        World {
            dom,
            bw: WbBandwidth::new(0),
            bdi,
            th,
            nr_dirty: 0,
            nr_writeback: 0,
            wb_dirtied: 0,
            wb_written: 0,
            dirty_exceeded: false,
            flusher: false,
            cpu: CpuDirtyRatelimit::default(),
            ratelimit_pages,
            writers: (0..n)
                .map(|_| Writer {
                    task: TaskDirtyState::default(),
                    t: 0,
                    again: None,
                    dirtied: 0,
                })
                .collect(),
            write_rate,
            device_rate,
            tot_bw: INIT_BW,
            now: 0,
        }
    }

    fn input(&self, now: u64, start: u64, pages: u64) -> BdpInput<'static> {
        BdpInput {
            now_ns: now,
            start_ns: start,
            pages_dirtied: pages,
            flags: BdpFlags::default(),
            thresholds: self.th,
            global: GlobalDirtyCounts {
                nr_file_dirty: self.nr_dirty,
                nr_writeback: self.nr_writeback,
            },
            wb_id: 1,
            wb: WbCounts {
                reclaimable: self.nr_dirty,
                writeback: self.nr_writeback,
                dirtied: self.wb_dirtied,
                written: self.wb_written,
            },
            wb_has_dirty_io: true,
            writeback_in_progress: self.flusher,
            bdi: self.bdi,
            bdi_name: "8:0",
            bdi_min_ratio_sum: 0,
            tot_write_bandwidth: self.tot_bw,
            local_throttle: false,
            nr_cpu_ids: 4,
            hz: HZ1000,
            mdtc: None,
        }
    }

    /// One balance_dirty_pages iteration for writer `i` at its clock.
    fn balance(&mut self, i: usize, pages: u64, start: u64) {
        let now = self.writers[i].t;
        let inp = self.input(now, start, pages);
        let w = &mut self.writers[i];
        let step = balance_dirty_pages(&inp, &mut w.task, &mut self.dom, &mut self.bw);
        if step.start_background {
            self.flusher = true;
        }
        if let Some(b) = step.bandwidth {
            self.tot_bw = (self.tot_bw as i64 + b.tot_write_bandwidth_delta) as u64;
        }
        if let Some(e) = step.set_dirty_exceeded {
            self.dirty_exceeded = e;
        }
        if let BdpAction::Pause(p) = step.action {
            w.t = now + p.pause_ns;
            w.task.after_pause(&p);
            w.again = if p.stop_after {
                None
            } else {
                Some((pages, start))
            };
        }
    }

    fn run_writer(&mut self, i: usize, end: u64) {
        while self.writers[i].t < end {
            if let Some((pages, start)) = self.writers[i].again.take() {
                self.balance(i, pages, start);
                continue;
            }
            let w = &mut self.writers[i];
            let want = w
                .task
                .nr_dirtied_pause
                .saturating_sub(w.task.nr_dirtied)
                .max(1);
            let room = ((end - w.t) as u128 * self.write_rate as u128 / 1_000_000_000) as u64;
            let n = want.min(room.max(1));
            w.t += (n as u128 * 1_000_000_000 / self.write_rate as u128) as u64;
            w.dirtied += n;
            account_task_dirtied(&mut w.task, &mut self.cpu, n);
            self.nr_dirty += n;
            self.wb_dirtied += n;
            let gate = balance_dirty_pages_ratelimited_gate(
                &mut w.task,
                &mut self.cpu,
                self.dirty_exceeded,
                self.ratelimit_pages,
            );
            if let Some(pages) = gate {
                let start = self.writers[i].t;
                self.balance(i, pages, start);
            }
        }
    }

    fn run_device(&mut self, now: u64) {
        let done = self.nr_writeback.min(self.device_rate * DT / 1_000_000_000);
        self.nr_writeback -= done;
        self.wb_written += done;
        if done > 0 {
            self.dom.writeout_add(1, self.bdi.max_prop_frac, done, now);
        }
        self.dom.age_if_due(now);
        if self.flusher {
            let share = WbShare::new(
                &mut self.dom,
                1,
                &self.bdi,
                0,
                self.bw.avg_write_bandwidth,
                self.tot_bw,
            );
            if wb_over_bg_thresh_counts(self.nr_dirty, self.th, self.nr_dirty, &share) {
                let sub = self.nr_dirty.min(INFLIGHT - self.nr_writeback);
                self.nr_dirty -= sub;
                self.nr_writeback += sub;
            } else if self.nr_writeback == 0 {
                self.flusher = false;
            }
            // do_writepages() updates the bandwidth once per chunk (about
            // half a second of writeback), not every step.
            if now.is_multiple_of(500 * MS) && self.bw.update_due(now, HZ1000) {
                let d = wb_update_bandwidth(
                    &mut self.bw,
                    now,
                    self.wb_dirtied,
                    self.wb_written,
                    true,
                    HZ1000,
                );
                self.tot_bw = (self.tot_bw as i64 + d) as u64;
            }
        }
    }

    /// Runs for `len_ns`; returns the mean and the max of dirty +
    /// writeback over the steps after `measure_from` (absolute time).
    fn run(&mut self, len_ns: u64, measure_from: u64) -> (u64, u64) {
        let (mut sum, mut n, mut max) = (0u64, 0u64, 0u64);
        let mut now = self.now;
        let end_ns = now + len_ns;
        while now < end_ns {
            let step_end = now + DT;
            for i in 0..self.writers.len() {
                self.run_writer(i, step_end);
            }
            now = step_end;
            self.run_device(now);
            if now >= measure_from {
                let d = self.nr_dirty + self.nr_writeback;
                sum += d;
                n += 1;
                max = max.max(d);
            }
        }
        self.now = now;
        (sum / n.max(1), max)
    }
}

const GB_S: u64 = (1 << 30) / PAGE_SIZE;
const MB100_S: u64 = 100 << (20 - PAGE_SHIFT);

#[test]
fn closed_loop_one_writer_settles_at_setpoint() {
    let mut w = World::new(1, GB_S, MB100_S, BdiDirtyConfig::default());
    let (mean, max) = w.run(30_000 * MS, 20_000 * MS);
    let th = w.th;
    let setpoint = (th.freerun_ceiling() + th.thresh) / 2;
    eprintln!(
        "1 writer: ratelimit {} avg_bw {} mean dirty {mean} max {max} setpoint {setpoint}",
        w.bw.dirty_ratelimit, w.bw.avg_write_bandwidth
    );
    let r = w.bw.dirty_ratelimit;
    assert!(
        r * 10 >= MB100_S * 8 && r * 10 <= MB100_S * 12,
        "ratelimit {r}"
    );
    assert!(
        mean > th.bg_thresh && max < th.thresh,
        "mean {mean} max {max}"
    );
    assert!(
        mean.abs_diff(setpoint) < setpoint / 20,
        "mean {mean} vs setpoint {setpoint}"
    );
}

#[test]
fn closed_loop_slow_device_rate_converges_from_init_bw() {
    // 40 MB/s device: dirty_ratelimit must come down from INIT_BW (100 MB/s).
    let dev = 40 << (20 - PAGE_SHIFT);
    let mut w = World::new(1, GB_S, dev, BdiDirtyConfig::default());
    let (mean, max) = w.run(30_000 * MS, 20_000 * MS);
    eprintln!(
        "40MB/s: ratelimit {} avg_bw {} mean {mean} max {max}",
        w.bw.dirty_ratelimit, w.bw.avg_write_bandwidth
    );
    let r = w.bw.dirty_ratelimit;
    assert!(
        r * 10 >= dev * 8 && r * 10 <= dev * 12,
        "ratelimit {r} vs {dev}"
    );
    let bw = w.bw.avg_write_bandwidth;
    assert!(
        bw * 10 >= dev * 9 && bw * 10 <= dev * 11,
        "avg_write_bandwidth {bw}"
    );
    assert!(mean > w.th.bg_thresh && max < w.th.thresh);
}

#[test]
fn closed_loop_n_writers_share_bandwidth() {
    let n = 4u64;
    let mut w = World::new(n as usize, GB_S, MB100_S, BdiDirtyConfig::default());
    w.run(30_000 * MS, 30_000 * MS);
    let before: Vec<u64> = w.writers.iter().map(|x| x.dirtied).collect();
    let (mean, max) = w.run(10_000 * MS, 0);
    let fair = MB100_S / n;
    for (x, b) in w.writers.iter().zip(before) {
        let rate = (x.dirtied - b) / 10;
        eprintln!("writer rate {rate} fair {fair}");
        assert!(
            rate * 4 >= fair * 3 && rate * 4 <= fair * 5,
            "rate {rate} vs {fair}"
        );
    }
    let r = w.bw.dirty_ratelimit;
    eprintln!("4 writers: ratelimit {r} mean {mean} max {max}");
    assert!(
        r * 4 >= fair * 3 && r * 4 <= fair * 5,
        "ratelimit {r} vs {fair}"
    );
    assert!(mean > w.th.bg_thresh && max < w.th.thresh);
}

#[test]
fn closed_loop_strictlimit_keeps_wb_near_its_setpoint() {
    let mut bdi = BdiDirtyConfig {
        strictlimit: true,
        ..Default::default()
    };
    bdi.set_max_ratio(1).unwrap();
    assert_eq!(bdi.max_prop_frac, 10);
    let mut w = World::new(1, GB_S, MB100_S, bdi);
    let (mean, max) = w.run(30_000 * MS, 20_000 * MS);
    let wb_thresh = w.th.thresh / 100;
    let wb_bg = wb_thresh * w.th.bg_thresh / w.th.thresh;
    let wb_setpoint = (wb_thresh + wb_bg) / 2;
    eprintln!(
        "strict: mean {mean} max {max} wb_setpoint {wb_setpoint} wb_thresh {wb_thresh} ratelimit {}",
        w.bw.dirty_ratelimit
    );
    assert!(max <= wb_thresh, "max {max} > wb_thresh {wb_thresh}");
    assert!(mean.abs_diff(wb_setpoint) < wb_setpoint / 10, "mean {mean}");
    // Global dirty stays far below the global freerun ceiling.
    assert!(max < w.th.bg_thresh / 10);
}

/// A memcg domain for wb 1 (which did all of the memcg's recent writeout)
/// with `filepages` pages charged, `headroom` pages left under its limit and
/// `dirty` of its pages dirty or under writeback, on a machine with AVAIL_24G
/// dirtyable pages of which `global_dirty` are dirty or under writeback.
fn memcg_domain(
    filepages: u64,
    headroom: u64,
    dirty: u64,
    global_dirty: u64,
) -> (MdtcInput, WbDomain) {
    let avail = mdtc_calc_avail(filepages, headroom, dirty, AVAIL_24G, global_dirty);
    let thresholds = domain_dirty_limits_memcg(avail, AVAIL_24G, &VmDirtyParams::default(), None);
    let mut mdom = WbDomain::new(0);
    // A settled domain: its dirty_limit followed thresh up.
    mdom.dirty_limit = thresholds.thresh;
    mdom.writeout_inc(1, 100_000, 0);
    (MdtcInput { dirty, thresholds }, mdom)
}

#[test]
fn mdtc_avail_is_filepages_plus_bounded_headroom() {
    // 60000 file pages, 5536 pages to memory.max, plenty of clean cache.
    assert_eq!(
        mdtc_calc_avail(60_000, 5_536, 9_000, AVAIL_24G, 9_000),
        65_536
    );
    // No limit: the memcg's pages plus the other memcgs' clean pages.
    assert_eq!(
        mdtc_calc_avail(60_000, u64::MAX, 9_000, AVAIL_24G, 9_000),
        AVAIL_24G
    );
    // Little clean cache elsewhere bounds even a memcg with headroom.
    assert_eq!(mdtc_calc_avail(100, 1_000_000, 100, 5_000, 4_000), 1_100);
}

#[test]
fn memcg_bytes_settings_become_ratios_of_the_global_domain() {
    let mut p = VmDirtyParams::default();
    p.set_dirty_bytes(AVAIL_24G / 10 * PAGE_SIZE).unwrap();
    // dirty_bytes is 10% of the global domain: 10% of the memcg's 65536.
    let t = domain_dirty_limits_memcg(65_536, AVAIL_24G, &p, None);
    assert!((6_500..=6_600).contains(&t.thresh), "{t:?}");
    // Without bytes settings: the plain ratios (20% / 10%).
    let t = domain_dirty_limits_memcg(65_536, AVAIL_24G, &VmDirtyParams::default(), None);
    assert_eq!(t, domain_dirty_limits(65_536, &VmDirtyParams::default()));
}

#[test]
fn bdp_memcg_with_small_max_throttles_at_its_own_limit() {
    let now = 5_000 * MS;
    let (mut dom, mut bw) = setup(now);
    // 256 MiB memory.max (65536 pages), 60000 charged, 12000 dirty: over
    // the memcg's freerun ceiling (~9830) while the machine's 12000 dirty
    // pages are ~1% of its 1.26M-page threshold.
    let (m, mut mdom) = memcg_domain(60_000, 5_536, 12_000, 12_000);
    assert!(m.thresholds.thresh < 14_000, "{:?}", m.thresholds);
    let mut inp = bdp_input(now, 12_000, 0, 32);
    let mut task = TaskDirtyState {
        nr_dirtied: 32,
        ..Default::default()
    };
    let global_only = balance_dirty_pages(&inp, &mut task.clone(), &mut dom, &mut bw.clone());
    assert!(matches!(global_only.action, BdpAction::Freerun { .. }));

    inp.mdtc = Some(m);
    let step = balance_dirty_pages_domains(&inp, &mut task, &mut dom, Some(&mut mdom), &mut bw);
    let pos_ratio = match step.action {
        BdpAction::Pause(p) => p.pos_ratio,
        BdpAction::NoPause { pos_ratio, .. } => pos_ratio,
        a => panic!("memcg writer not throttled: {a:?}"),
    };
    let mdtc = step.mdtc.expect("memcg control");
    // The memcg's control set the pace (sdtc), below 1.0 past its setpoint.
    assert_eq!(step.dtc, mdtc);
    assert_eq!(step.dtc.thresh, m.thresholds.thresh);
    assert!(
        pos_ratio < 1 << RATELIMIT_CALC_SHIFT,
        "pos_ratio {pos_ratio}"
    );
    assert!(step.start_background);

    // At the memcg's hard limit the ratio is 0: a max_pause sleep.
    let (m, mut mdom) = memcg_domain(65_536, 0, 14_000, 14_000);
    inp.mdtc = Some(m);
    let mut task = TaskDirtyState::default();
    let step = balance_dirty_pages_domains(&inp, &mut task, &mut dom, Some(&mut mdom), &mut bw);
    match step.action {
        BdpAction::Pause(p) => assert_eq!(p.task_ratelimit, 0),
        a => panic!("not paused at the memcg limit: {a:?}"),
    }
}

#[test]
fn bdp_memcg_without_limits_behaves_as_global() {
    let now = 5_000 * MS;
    // The memcg's writer is the machine's only dirtier; plenty of clean
    // cache: the memcg domain has the global one's size and counts.
    for (dirty, writeback) in [(900_000, 43_104), (1_100_544, 0), (1_300_000, 0)] {
        let (mut dom, mut bw) = setup(now);
        let (mut dom2, mut bw2) = setup(now);
        let inp = bdp_input(now, dirty, writeback, 32);
        let mut t1 = TaskDirtyState {
            nr_dirtied: 32,
            ..Default::default()
        };
        let mut t2 = t1;
        let a = balance_dirty_pages(&inp, &mut t1, &mut dom, &mut bw);
        let (m, mut mdom) = memcg_domain(
            dirty + writeback + 500_000,
            u64::MAX,
            dirty + writeback,
            dirty + writeback,
        );
        let mut inp2 = inp;
        inp2.mdtc = Some(m);
        let b = balance_dirty_pages_domains(&inp2, &mut t2, &mut dom2, Some(&mut mdom), &mut bw2);
        assert_eq!(a.action, b.action, "dirty {dirty} {:?} {:?}", a.dtc, b.mdtc);
        assert_eq!(t1, t2);
        assert_eq!(a.dtc.pos_ratio, b.dtc.pos_ratio);
    }
}

#[test]
fn throttle_traces_of_several_tasks_merge_in_time_order() {
    let a = ThrottleTrace {
        bdp_events: 3,
        paused: 2,
        pause_ns: 16_000_000,
        bdp_ratelimit: Some(((10, 100), (50, 90))),
        updates: 1,
        update_rates: Some(((20, 100, 400), (20, 100, 400))),
    };
    let b = ThrottleTrace {
        bdp_events: 2,
        paused: 2,
        pause_ns: 8_000_000,
        bdp_ratelimit: Some(((5, 110), (40, 95))),
        updates: 0,
        update_rates: None,
    };
    let mut m = a;
    m.merge(&b);
    assert_eq!((m.bdp_events, m.paused, m.pause_ns), (5, 4, 24_000_000));
    // The earliest first and the latest last, whichever task saw them.
    assert_eq!(m.bdp_ratelimit, Some(((5, 110), (50, 90))));
    assert_eq!((m.updates, m.update_rates), (1, a.update_rates));
    let mut e = ThrottleTrace::default();
    e.merge(&a);
    assert_eq!(e, a);
}
