//! When a jiffies timeout really ends (kernel/time/timer.c): the timer wheel
//! behind `schedule_timeout()` / `io_schedule_timeout()`. A timer armed for
//! `expires` jiffies goes into a bucket of its wheel level, chosen by how far
//! away it is (`calc_wheel_index`), and the bucket's expiry is rounded up to
//! the level's granularity so the timer never fires early (`calc_index`:
//! `((expires >> LVL_SHIFT) + 1) << LVL_SHIFT`). Jiffies tick at multiples
//! of the tick period from boot, so a sleep of N jiffies started inside a
//! jiffy ends on a tick boundary, more than N jiffies later: by up to one
//! jiffy on level 0 (under 63 jiffies away), up to 8 on level 1 (under 504),
//! 64 on level 2 (under 4032), and so on.
//!
//! Left out: the timer base's clock lagging `jiffies` on an idle NOHZ CPU
//! (`base->clk` is taken as the current jiffy), timer migration, and the
//! softirq latency of running the expired timer.

use sim::Time;

/// `LVL_CLK_SHIFT`: each wheel level is 8 times coarser.
const LVL_CLK_SHIFT: u32 = 3;
/// `LVL_BITS`: 64 buckets per level.
const LVL_BITS: u32 = 6;
/// `LVL_DEPTH` at HZ > 100 (9 levels; 8 at HZ <= 100, which only matters for
/// timeouts of days).
const LVL_DEPTH: u32 = 9;

/// `LVL_START(n)`: first delta, jiffies, that goes to level `n`.
fn lvl_start(n: u32) -> u64 {
    ((1u64 << LVL_BITS) - 1) << ((n - 1) * LVL_CLK_SHIFT)
}

/// `calc_wheel_index`'s bucket expiry, jiffies, for a timer expiring at
/// jiffy `expires` armed at jiffy `clk`.
pub fn bucket_expiry(expires: u64, clk: u64) -> u64 {
    let delta = expires.saturating_sub(clk);
    if expires <= clk {
        return clk;
    }
    let mut lvl = 0;
    while lvl + 1 < LVL_DEPTH && delta >= lvl_start(lvl + 1) {
        lvl += 1;
    }
    let shift = lvl * LVL_CLK_SHIFT;
    ((expires >> shift) + 1) << shift
}

/// The time, ns, at which `schedule_timeout(timeout)` armed at `now_ns`
/// returns (if nothing wakes it first), with jiffies of `tick_ns`.
pub fn schedule_timeout_end(now_ns: Time, timeout: u64, tick_ns: Time) -> Time {
    let tick_ns = tick_ns.max(1);
    let jiffies = now_ns / tick_ns;
    bucket_expiry(jiffies + timeout, jiffies) * tick_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_zero_ends_on_the_tick_after_expiry() {
        // 10 jiffies of 1 ms armed 0.3 ms into jiffy 5: expires 15, fires at
        // the start of jiffy 16.
        assert_eq!(schedule_timeout_end(5_300_000, 10, 1_000_000), 16_000_000);
        // Armed right on a tick: still one jiffy late (the wheel cannot tell).
        assert_eq!(schedule_timeout_end(5_000_000, 10, 1_000_000), 16_000_000);
    }

    #[test]
    fn outer_levels_round_up_to_their_granularity() {
        // 200 jiffies (HZ=1000, a 200 ms MAX_PAUSE) is level 1: granularity 8.
        // Armed at jiffy 1003: expires 1203 -> (1203 >> 3) + 1 = 151 -> 1208.
        assert_eq!(bucket_expiry(1203, 1003), 1208);
        // 100 jiffies from 0: 100 -> 13 << 3 = 104.
        assert_eq!(bucket_expiry(100, 0), 104);
        // Level 2 (>= 504 jiffies away): granularity 64.
        assert_eq!(bucket_expiry(1000, 0), 1024);
        // Under 63 away: level 0.
        assert_eq!(bucket_expiry(62, 0), 63);
    }
}
