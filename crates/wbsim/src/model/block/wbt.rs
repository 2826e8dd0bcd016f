//! Buffered writeback throttling (`block/blk-wbt.c`, `block/blk-rq-qos.c`):
//! the rq-qos policy every blk-mq device has by default (CONFIG_BLK_WBT_MQ),
//! which limits how many buffered-writeback requests may be in flight so that
//! reads and synchronous writes are not queued behind a flood of them.
//!
//! What it does, as the kernel does it:
//! - **Which requests count.** A write is tracked unless it carries both
//!   `REQ_SYNC` and `REQ_IDLE` (O_DIRECT writes and log writes do); reads,
//!   flushes and merged bios are not throttled (`wbt_should_throttle`; the
//!   merge attempt comes before `rq_qos_throttle` in `blk_mq_submit_bio`).
//! - **The limit** of a tracked write (`get_limit`): the full depth
//!   `max_depth` for `REQ_SYNC`/`REQ_META`/`REQ_PRIO` writes (WB_SYNC_ALL
//!   writeback, metadata) and whenever a task slept in `balance_dirty_pages`
//!   on the disk's bdi in the last second (`wb_recent_wait`); the background
//!   limit `(max_depth + 3) / 4` for `REQ_BACKGROUND` writes (background and
//!   periodic writeback) and for every write issued within 100 ms of a read
//!   issue or completion (`close_io`); otherwise the normal limit
//!   `(max_depth + 1) / 2` (e.g. RWF_DONTCACHE's inline writeback).
//! - **Waiting** (`rq_qos_wait`): a write over its limit, or arriving while
//!   others wait, sleeps in FIFO order; a wakeup hands out tokens from the
//!   head while the in-flight count is below each waiter's limit
//!   (`rq_qos_wake_function`).
//! - **Completion** (`wbt_rqw_done`): on a device with a volatile write
//!   cache and no recent `balance_dirty_pages` sleep the waiters are woken
//!   only when the in-flight count drains to zero; otherwise once it is
//!   below the normal limit by at least half the background limit.
//! - **Scaling** (`wb_timer_fn`, `rq_depth_calc_max_depth`): `max_depth`
//!   starts at min(16, queue depth) (`RWB_DEF_DEPTH`). A 100 ms window
//!   (`RWB_WINDOW_NSEC`, shrunk by sqrt(step + 1) when scaled down)
//!   collects completion latencies (dispatch to completion) of reads and
//!   writes. A window whose minimum read latency exceeds `min_lat` (2 ms on
//!   non-rotational devices, `wbt_default_latency_nsec`), or whose oldest
//!   read in flight is older than the window, scales down (halving the
//!   depth; a negative step snaps back to 0); a window with reads and
//!   writes within target scales up; a window with writes only (or writes
//!   in flight, or a recent `balance_dirty_pages` sleep) also scales up,
//!   past the default into negative steps that double the depth up to 3/4
//!   of the queue depth; five windows with nothing scale back towards 0.
//!
//! Left out: discards and kswapd's own wait queue (the model's reclaim
//! writes no pages itself), the sysfs knob (`wbt_lat_usec`, here the
//! profile's `wbt_lat_ns`), the `wbt_*` tracepoints, and the
//! `RWB_MIN_WRITE_SAMPLES` check's interplay with requests that straddle a
//! window (a window counts the completions that fall in it).

use std::collections::VecDeque;
use std::task::Waker;

use sim::{Time, MSEC};

use super::bio::BioFlags;

/// `RWB_DEF_DEPTH`: the depth at scale step 0, before the queue depth caps it.
pub const RWB_DEF_DEPTH: u32 = 16;
/// `RWB_WINDOW_NSEC`: the monitoring window, ns.
pub const RWB_WINDOW_NSEC: Time = 100 * MSEC;
/// `RWB_MIN_WRITE_SAMPLES`: write completions a window needs before its read
/// latencies are trusted.
pub const RWB_MIN_WRITE_SAMPLES: u64 = 3;
/// `RWB_UNKNOWN_BUMP`: windows without data before the step drifts back to 0.
pub const RWB_UNKNOWN_BUMP: u32 = 5;
/// `wb_recent_wait` / `close_io` horizons: `HZ` and `HZ / 10` jiffies, ns.
const RECENT_WAIT_NS: Time = 1_000 * MSEC;
const CLOSE_IO_NS: Time = 100 * MSEC;
/// `wbt_default_latency_nsec` for non-rotational devices, ns.
pub const WBT_DEFAULT_LAT_NS: Time = 2 * MSEC;

/// What `latency_exceeded` found in a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LatStatus {
    Ok,
    Unknown,
    UnknownWrites,
    Exceeded,
}

/// The limits `get_limit` chooses from, with `close_io`, at one instant.
#[derive(Clone, Copy)]
struct Limits {
    max: u32,
    normal: u32,
    background: u32,
    close_io: bool,
}

impl Limits {
    /// `get_limit`: the full depth for `REQ_SYNC`/`REQ_META` writes and after
    /// a recent `balance_dirty_pages` sleep, the background limit for
    /// `REQ_BACKGROUND` writes and near reads, else the normal one.
    fn for_flags(self, flags: BioFlags, recent_wait: bool) -> u32 {
        if flags.sync || flags.meta || recent_wait {
            self.max
        } else if flags.background || self.close_io {
            self.background
        } else {
            self.normal
        }
    }
}

/// A sleeping tracked write (`struct rq_qos_wait_data`).
struct Waiter {
    id: u64,
    flags: BioFlags,
    got_token: bool,
    waker: Option<Waker>,
}

/// `struct rq_wb` with its `rq_depth` and the one `rq_wait` the model uses.
pub struct Wbt {
    /// `min_lat_nsec`: the read latency target, ns.
    min_lat_ns: Time,
    /// The device's queue depth (`blk_queue_depth`).
    queue_depth: u32,
    /// `QUEUE_FLAG_WC`: the device has a volatile write cache.
    write_cache: bool,
    /// `rq_depth.scale_step`: > 0 throttled harder, < 0 boosted.
    scale_step: i32,
    /// `rq_depth.scaled_max`: the last scale-up hit the ceiling.
    scaled_max: bool,
    /// `rq_depth.max_depth`.
    max_depth: u32,
    /// `wb_normal`, `wb_background`.
    wb_normal: u32,
    wb_background: u32,
    /// `unknown_cnt`.
    unknown_cnt: u32,
    /// `cur_win_nsec`.
    cur_win_ns: Time,
    /// Whether the window timer is armed (`blk_stat_is_active`).
    window_active: bool,
    /// This window's read completions and their minimum latency, and its
    /// write completions (`cb->stat[READ]`, `cb->stat[WRITE]`).
    win_reads: u64,
    win_read_min: Time,
    win_writes: u64,
    /// `sync_issue`/`sync_cookie`: the oldest tracked read at the device.
    sync_issue: Option<(u64, Time)>,
    /// `last_issue` / `last_comp`: the last read issue and completion, ns.
    last_read: Option<Time>,
    /// `rq_wait.inflight`: tracked requests allocated and not completed.
    inflight: u32,
    /// `rq_wait.wait`, FIFO.
    waiters: VecDeque<Waiter>,
    next_waiter: u64,
    /// Windows evaluated and how they ended (for the results).
    pub stats: WbtStats,
}

/// Counters for the results: how often writes waited and how the depth moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WbtStats {
    /// Tracked writes that slept in `rq_qos_wait`.
    pub throttled: u64,
    /// Scale steps up and down.
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// The largest and smallest `max_depth` reached.
    pub max_depth_seen: u32,
    pub min_depth_seen: u32,
}

impl Wbt {
    /// `wbt_init`: `min_lat_ns` latency target, the device's queue depth and
    /// write-cache flag. `wbt_update_limits` sets the depth at step 0.
    pub fn new(min_lat_ns: Time, queue_depth: u32, write_cache: bool) -> Self {
        let mut w = Wbt {
            min_lat_ns,
            queue_depth: queue_depth.max(1),
            write_cache,
            scale_step: 0,
            scaled_max: false,
            max_depth: 0,
            wb_normal: 0,
            wb_background: 0,
            unknown_cnt: 0,
            cur_win_ns: RWB_WINDOW_NSEC,
            window_active: false,
            win_reads: 0,
            win_read_min: Time::MAX,
            win_writes: 0,
            sync_issue: None,
            last_read: None,
            inflight: 0,
            waiters: VecDeque::new(),
            next_waiter: 0,
            stats: WbtStats::default(),
        };
        w.calc_max_depth();
        w.calc_wb_limits();
        w.stats.max_depth_seen = w.max_depth;
        w.stats.min_depth_seen = w.max_depth;
        w
    }

    /// `wbt_should_throttle`: writes without both `REQ_SYNC` and `REQ_IDLE`.
    pub fn tracks(flags: BioFlags) -> bool {
        !(flags.sync && flags.idle)
    }

    /// `rq_depth_calc_max_depth`: returns true when the depth hit its ceiling.
    fn calc_max_depth(&mut self) -> bool {
        let mut at_max = false;
        if self.queue_depth == 1 {
            if self.scale_step > 0 {
                self.max_depth = 1;
            } else {
                self.max_depth = 2;
                at_max = true;
            }
            return at_max;
        }
        let mut depth = RWB_DEF_DEPTH.min(self.queue_depth);
        if self.scale_step > 0 {
            depth = 1 + ((depth - 1) >> (self.scale_step as u32).min(31));
        } else if self.scale_step < 0 {
            let maxd = 3 * self.queue_depth / 4;
            let shift = (-self.scale_step) as u32;
            let grown = 1u64 + (u64::from(depth - 1) << shift.min(40));
            if grown > u64::from(maxd) {
                depth = maxd;
                at_max = true;
            } else {
                depth = grown as u32;
            }
        }
        self.max_depth = depth;
        at_max
    }

    /// `calc_wb_limits`.
    fn calc_wb_limits(&mut self) {
        if self.min_lat_ns == 0 {
            self.wb_normal = 0;
            self.wb_background = 0;
        } else if self.max_depth <= 2 {
            self.wb_normal = self.max_depth;
            self.wb_background = 1;
        } else {
            self.wb_normal = self.max_depth.div_ceil(2);
            self.wb_background = self.max_depth.div_ceil(4);
        }
        self.stats.max_depth_seen = self.stats.max_depth_seen.max(self.max_depth);
        self.stats.min_depth_seen = self.stats.min_depth_seen.min(self.max_depth);
    }

    /// `scale_up` (`rq_depth_scale_up`); true if the depth changed, in which
    /// case the caller wakes every waiter (`rwb_wake_all`).
    fn scale_up(&mut self) -> bool {
        if self.scaled_max {
            return false;
        }
        self.scale_step -= 1;
        self.scaled_max = self.calc_max_depth();
        self.calc_wb_limits();
        self.unknown_cnt = 0;
        self.stats.scale_ups += 1;
        true
    }

    /// `scale_down` (`rq_depth_scale_down`).
    fn scale_down(&mut self, hard_throttle: bool) {
        if self.max_depth == 1 {
            return;
        }
        if self.scale_step < 0 && hard_throttle {
            self.scale_step = 0;
        } else {
            self.scale_step += 1;
        }
        self.scaled_max = false;
        self.calc_max_depth();
        self.calc_wb_limits();
        self.unknown_cnt = 0;
        self.stats.scale_downs += 1;
    }

    /// `get_limit` for a tracked write with `flags`, at `now`, with
    /// `recent_wait` = `wb_recent_wait()`.
    fn get_limit(&self, flags: BioFlags, now: Time, recent_wait: bool) -> u32 {
        self.limits_at(now).for_flags(flags, recent_wait)
    }

    /// The three limits and `close_io` as they stand at `now`.
    fn limits_at(&self, now: Time) -> Limits {
        Limits {
            max: self.max_depth,
            normal: self.wb_normal,
            background: self.wb_background,
            close_io: self.close_io(now),
        }
    }

    /// `close_io`: a read was issued or completed within the last 100 ms.
    fn close_io(&self, now: Time) -> bool {
        self.last_read
            .is_some_and(|t| now < t.saturating_add(CLOSE_IO_NS))
    }

    /// `wb_recent_wait` from the bdi's last `balance_dirty_pages` sleep.
    pub fn recent_wait(last_bdp_sleep: Option<Time>, now: Time) -> bool {
        last_bdp_sleep.is_some_and(|t| now < t.saturating_add(RECENT_WAIT_NS))
    }

    /// `rq_qos_wait`'s fast path: with nobody waiting, takes an in-flight
    /// slot if the write's limit allows (`rq_wait_inc_below`). Returns
    /// whether it got one; if not, the caller queues with [`Wbt::enqueue`].
    pub fn try_acquire(&mut self, flags: BioFlags, now: Time, recent_wait: bool) -> bool {
        if !self.waiters.is_empty() {
            return false;
        }
        let limit = self.get_limit(flags, now, recent_wait);
        if self.inflight < limit {
            self.inflight += 1;
            true
        } else {
            false
        }
    }

    /// Whether the window timer must be armed now (a tracked write was
    /// submitted and no window is active); marks it armed and returns its
    /// length.
    pub fn arm_if_idle(&mut self) -> Option<Time> {
        if self.window_active {
            return None;
        }
        Some(self.arm())
    }

    /// `rwb_arm_timer`: the window length for the current step.
    fn arm(&mut self) -> Time {
        self.cur_win_ns = if self.scale_step > 0 {
            // win_nsec << 4 / int_sqrt((step + 1) << 8)
            let r = (((self.scale_step as u64) + 1) << 8).isqrt().max(1);
            (RWB_WINDOW_NSEC << 4) / r
        } else {
            RWB_WINDOW_NSEC
        };
        self.window_active = true;
        self.win_reads = 0;
        self.win_read_min = Time::MAX;
        self.win_writes = 0;
        self.cur_win_ns
    }

    /// Queues a sleeping write; returns its ticket.
    pub fn enqueue(&mut self, flags: BioFlags) -> u64 {
        let id = self.next_waiter;
        self.next_waiter += 1;
        self.waiters.push_back(Waiter {
            id,
            flags,
            got_token: false,
            waker: None,
        });
        self.stats.throttled += 1;
        id
    }

    /// Whether waiter `id` has its token (then it is off the queue); if not,
    /// stores `waker` to be woken with one.
    pub fn poll_token(&mut self, id: u64, waker: &Waker) -> bool {
        match self.waiters.iter_mut().find(|w| w.id == id) {
            Some(w) if w.got_token => {
                self.waiters.retain(|w| w.id != id);
                true
            }
            Some(w) => {
                w.waker = Some(waker.clone());
                false
            }
            None => true,
        }
    }

    /// `wake_up_all` with `rq_qos_wake_function`: tokens to waiters from the
    /// head while each one's limit allows; stops at the first that cannot
    /// have one. Returns the wakers to wake.
    pub fn wake_all(&mut self, now: Time, recent_wait: bool) -> Vec<Waker> {
        let mut wake = Vec::new();
        let limits = self.limits_at(now);
        for w in self.waiters.iter_mut().filter(|w| !w.got_token) {
            if self.inflight >= limits.for_flags(w.flags, recent_wait) {
                break;
            }
            self.inflight += 1;
            w.got_token = true;
            if let Some(k) = w.waker.take() {
                wake.push(k);
            }
        }
        wake
    }

    /// `wbt_done` for a tracked write (`wbt_rqw_done`): one fewer in
    /// flight; returns the wakers to wake.
    pub fn done_tracked(&mut self, now: Time, recent_wait: bool) -> Vec<Waker> {
        self.inflight = self.inflight.saturating_sub(1);
        let limit = if self.write_cache && !recent_wait {
            0
        } else {
            self.wb_normal
        };
        if self.inflight > 0 && self.inflight >= limit {
            return Vec::new();
        }
        let pending = self.waiters.iter().any(|w| !w.got_token);
        if pending {
            let diff = limit.saturating_sub(self.inflight);
            if self.inflight == 0 || diff >= self.wb_background / 2 {
                return self.wake_all(now, recent_wait);
            }
        }
        Vec::new()
    }

    /// A read was dispatched to the device (`wbt_issue` and `wbt_wait`'s
    /// `last_issue`): remembered as the oldest read in flight if none is.
    pub fn read_issued(&mut self, rq: u64, now: Time) {
        self.last_read = Some(now);
        if self.sync_issue.is_none() {
            self.sync_issue = Some((rq, now));
        }
    }

    /// A request completed after `lat_ns` at the device (the blk-stat
    /// callback and `wbt_done` for untracked reads).
    pub fn completed(&mut self, rq: u64, read: bool, lat_ns: Time, now: Time) {
        if read {
            self.last_read = Some(now);
            if self.sync_issue.is_some_and(|(id, _)| id == rq) {
                self.sync_issue = None;
            }
            if self.window_active {
                self.win_reads += 1;
                self.win_read_min = self.win_read_min.min(lat_ns);
            }
        } else if self.window_active {
            self.win_writes += 1;
        }
    }

    /// `latency_exceeded`.
    fn latency_exceeded(&self, now: Time, recent_wait: bool) -> LatStatus {
        let thislat = self.sync_issue.map_or(0, |(_, t)| now.saturating_sub(t));
        if thislat > self.cur_win_ns || (thislat > self.min_lat_ns && self.win_reads == 0) {
            return LatStatus::Exceeded;
        }
        let valid = self.win_reads >= 1 && self.win_writes >= RWB_MIN_WRITE_SAMPLES;
        if !valid {
            if self.win_writes > 0 || recent_wait || self.inflight > 0 {
                return LatStatus::UnknownWrites;
            }
            return LatStatus::Unknown;
        }
        if self.win_read_min > self.min_lat_ns {
            return LatStatus::Exceeded;
        }
        LatStatus::Ok
    }

    /// `wb_timer_fn` at the end of a window: scales, then returns the next
    /// window's length if it must be re-armed (a step away from 0 or
    /// writes in flight), and the wakers a scale-up releases.
    pub fn window_end(&mut self, now: Time, recent_wait: bool) -> (Option<Time>, Vec<Waker>) {
        self.window_active = false;
        let status = self.latency_exceeded(now, recent_wait);
        let mut wake = Vec::new();
        match status {
            LatStatus::Exceeded => self.scale_down(true),
            LatStatus::Ok | LatStatus::UnknownWrites => {
                if self.scale_up() {
                    wake = self.wake_all(now, recent_wait);
                }
            }
            LatStatus::Unknown => {
                self.unknown_cnt += 1;
                if self.unknown_cnt >= RWB_UNKNOWN_BUMP {
                    if self.scale_step > 0 {
                        if self.scale_up() {
                            wake = self.wake_all(now, recent_wait);
                        }
                    } else if self.scale_step < 0 {
                        self.scale_down(false);
                    }
                }
            }
        }
        let rearm = (self.scale_step != 0 || self.inflight > 0).then(|| self.arm());
        (rearm, wake)
    }

    /// The current `max_depth`, normal and background limits.
    pub fn limits(&self) -> (u32, u32, u32) {
        (self.max_depth, self.wb_normal, self.wb_background)
    }

    /// Tracked writes in flight.
    pub fn inflight(&self) -> u32 {
        self.inflight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bg() -> BioFlags {
        BioFlags {
            background: true,
            ..BioFlags::default()
        }
    }

    #[test]
    fn default_limits_follow_the_queue_depth() {
        let w = Wbt::new(WBT_DEFAULT_LAT_NS, 128, true);
        // min(16, 128) = 16: normal (16 + 1) / 2 = 8, background (16 + 3) / 4 = 4.
        assert_eq!(w.limits(), (16, 8, 4));
        let w = Wbt::new(WBT_DEFAULT_LAT_NS, 4, true);
        assert_eq!(w.limits(), (4, 2, 1));
    }

    #[test]
    fn direct_writes_are_not_tracked() {
        let dio = BioFlags {
            sync: true,
            idle: true,
            ..BioFlags::default()
        };
        assert!(!Wbt::tracks(dio));
        assert!(Wbt::tracks(BioFlags::default()));
        assert!(Wbt::tracks(bg()));
    }

    #[test]
    fn background_writes_stop_at_the_background_limit_and_wait_for_drain_with_a_write_cache() {
        let mut w = Wbt::new(WBT_DEFAULT_LAT_NS, 128, true);
        for _ in 0..4 {
            assert!(w.try_acquire(bg(), 0, false));
        }
        assert!(!w.try_acquire(bg(), 0, false));
        let t = w.enqueue(bg());
        // With a write cache and no recent dirty-throttle sleep, waiters are
        // woken only once everything in flight has completed.
        for _ in 0..3 {
            assert!(w.done_tracked(0, false).is_empty());
        }
        let waker = futures_noop_waker();
        assert!(!w.poll_token(t, &waker));
        let woken = w.done_tracked(0, false);
        assert_eq!(woken.len(), 1);
        assert!(w.poll_token(t, &waker));
        assert_eq!(w.inflight(), 1);
    }

    #[test]
    fn a_recent_dirty_throttle_sleep_opens_the_full_depth() {
        let mut w = Wbt::new(WBT_DEFAULT_LAT_NS, 128, true);
        for _ in 0..16 {
            assert!(w.try_acquire(bg(), 0, true));
        }
        assert!(!w.try_acquire(bg(), 0, true));
    }

    #[test]
    fn writes_alone_scale_the_depth_up_to_three_quarters_of_the_queue() {
        let mut w = Wbt::new(WBT_DEFAULT_LAT_NS, 128, true);
        let mut t = 0;
        for _ in 0..10 {
            w.arm_if_idle();
            w.completed(1, false, 10_000, t);
            t += RWB_WINDOW_NSEC;
            w.window_end(t, false);
        }
        assert_eq!(w.limits().0, 96);
    }

    #[test]
    fn slow_reads_scale_the_depth_down() {
        let mut w = Wbt::new(WBT_DEFAULT_LAT_NS, 128, true);
        w.arm_if_idle();
        w.completed(1, true, 5 * MSEC, 10);
        for i in 0..3 {
            w.completed(10 + i, false, 10_000, 20);
        }
        w.window_end(RWB_WINDOW_NSEC, false);
        assert_eq!(w.limits().0, 8);
    }

    fn futures_noop_waker() -> Waker {
        use std::sync::Arc;
        use std::task::Wake;
        struct Noop;
        impl Wake for Noop {
            fn wake(self: Arc<Self>) {}
        }
        Waker::from(Arc::new(Noop))
    }
}
