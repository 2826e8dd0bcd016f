//! iostat-style device statistics.
//!
//! Models the per-partition counters of `block/blk-core.c` /
//! `block/blk-mq.c` (`blk_account_io_start()`, `blk_account_io_done()`,
//! `update_io_ticks()`), which `/proc/diskstats` exports and `iostat -x`
//! turns into r/s, w/s, rkB/s, wkB/s, rrqm/s, wrqm/s, r_await, w_await,
//! aqu-sz and %util. A snapshot holds running totals; [`DeviceStats::since`]
//! turns two snapshots into rates over the interval between them, as iostat
//! does.
//!
//! Simplified: `io_ticks` (here `busy_ns`) is exact time with at least one
//! request in flight, where the kernel samples it in jiffies; await counts
//! from the request's creation (the first bio's submission, so it includes
//! time waiting for a tag, like time in an I/O scheduler) to its completion.
//! Flushes are counted, not timed.

use serde::Serialize;

/// Running totals for one device at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceStats {
    /// When the snapshot was taken, ns.
    pub time_ns: u64,
    /// Read requests completed (`/proc/diskstats` field 1).
    pub reads: u64,
    /// Write requests completed (field 5).
    pub writes: u64,
    /// Bytes read (sectors read * 512).
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Read bios merged into an existing request (field 2).
    pub read_merges: u64,
    /// Write bios merged into an existing request (field 6).
    pub write_merges: u64,
    /// All merges (read + write).
    pub merges: u64,
    /// Requests made by splitting bios larger than `max_request_bytes`
    /// (beyond the first piece of each).
    pub splits: u64,
    /// Cache flushes completed (empty flushes and preflushes sent to a device
    /// with a write cache).
    pub flushes: u64,
    /// Time with at least one request in flight, ns (`io_ticks`).
    pub busy_ns: u64,
    /// Sum over completed reads of queue + service time, ns (field 4).
    pub read_time_ns: u64,
    /// Sum over completed writes of queue + service time, ns (field 8).
    pub write_time_ns: u64,
    /// Integral of requests in flight over time, request-ns (field 11,
    /// `time_in_queue`), for aqu-sz.
    pub in_flight_time_ns: u64,
    /// Requests in flight now: created and not yet completed (field 9).
    pub in_flight: u64,
    /// Most requests ever in flight at once.
    pub max_in_flight: u64,
    /// 4 KiB blocks written for the first time on a device with a
    /// first-write cost (`DeviceProfile::first_write_rq_ns`).
    #[serde(skip_serializing_if = "is_zero")]
    pub first_write_blocks: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl DeviceStats {
    /// Mean read queue + service time, ns (iostat `r_await`); 0 with no reads.
    pub fn r_await_ns(&self) -> f64 {
        mean(self.read_time_ns, self.reads)
    }

    /// Mean write queue + service time, ns (iostat `w_await`).
    pub fn w_await_ns(&self) -> f64 {
        mean(self.write_time_ns, self.writes)
    }

    /// Rates over the interval from `earlier` to `self`.
    pub fn since(&self, earlier: &DeviceStats) -> IntervalStats {
        let dt = self.time_ns.saturating_sub(earlier.time_ns);
        let per_sec = |d: u64| {
            if dt == 0 {
                0.0
            } else {
                d as f64 * 1e9 / dt as f64
            }
        };
        let reads = self.reads.saturating_sub(earlier.reads);
        let writes = self.writes.saturating_sub(earlier.writes);
        let busy = self.busy_ns.saturating_sub(earlier.busy_ns);
        let queue = self
            .in_flight_time_ns
            .saturating_sub(earlier.in_flight_time_ns);
        IntervalStats {
            interval_ns: dt,
            read_bytes_per_sec: per_sec(self.read_bytes.saturating_sub(earlier.read_bytes)),
            write_bytes_per_sec: per_sec(self.write_bytes.saturating_sub(earlier.write_bytes)),
            reads_per_sec: per_sec(reads),
            writes_per_sec: per_sec(writes),
            read_merges_per_sec: per_sec(self.read_merges.saturating_sub(earlier.read_merges)),
            write_merges_per_sec: per_sec(self.write_merges.saturating_sub(earlier.write_merges)),
            r_await_ns: mean(
                self.read_time_ns.saturating_sub(earlier.read_time_ns),
                reads,
            ),
            w_await_ns: mean(
                self.write_time_ns.saturating_sub(earlier.write_time_ns),
                writes,
            ),
            avg_queue_size: if dt == 0 {
                0.0
            } else {
                queue as f64 / dt as f64
            },
            util: if dt == 0 {
                0.0
            } else {
                busy as f64 / dt as f64
            },
        }
    }
}

fn mean(total: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        total as f64 / n as f64
    }
}

/// What `iostat -x INTERVAL` prints for one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct IntervalStats {
    pub interval_ns: u64,
    /// rkB/s * 1024.
    pub read_bytes_per_sec: f64,
    /// wkB/s * 1024.
    pub write_bytes_per_sec: f64,
    /// r/s.
    pub reads_per_sec: f64,
    /// w/s.
    pub writes_per_sec: f64,
    /// rrqm/s.
    pub read_merges_per_sec: f64,
    /// wrqm/s.
    pub write_merges_per_sec: f64,
    /// r_await, ns.
    pub r_await_ns: f64,
    /// w_await, ns.
    pub w_await_ns: f64,
    /// aqu-sz: mean requests in flight.
    pub avg_queue_size: f64,
    /// %util / 100: fraction of the interval with a request in flight.
    pub util: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_rates() {
        let a = DeviceStats {
            time_ns: 1_000_000_000,
            writes: 10,
            write_bytes: 1 << 20,
            write_time_ns: 1000,
            busy_ns: 100,
            ..Default::default()
        };
        let b = DeviceStats {
            time_ns: 3_000_000_000,
            writes: 30,
            write_bytes: 5 << 20,
            write_time_ns: 5000,
            busy_ns: 1_000_000_100,
            ..Default::default()
        };
        let i = b.since(&a);
        assert_eq!(i.write_bytes_per_sec, (2u64 << 20) as f64);
        assert_eq!(i.writes_per_sec, 10.0);
        assert_eq!(i.w_await_ns, 200.0);
        assert_eq!(i.util, 0.5);
        assert_eq!(i.read_bytes_per_sec, 0.0);
        assert_eq!(a.since(&a).util, 0.0);
    }
}
