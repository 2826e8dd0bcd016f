//! `/proc/meminfo` sampling: `Dirty`, `Writeback` and `Cached` over a job,
//! on a thread, every `interval`. Not kernel code; the live counterpart of
//! the model's `global_dirty_state` sampling. The values are machine-wide
//! (other activity on the host shows up too).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The fields the probe reads, in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meminfo {
    /// `Dirty`.
    pub dirty_kib: u64,
    /// `Writeback`.
    pub writeback_kib: u64,
    /// `Cached`.
    pub cached_kib: u64,
    /// `MemTotal`.
    pub total_kib: u64,
}

/// Parses `/proc/meminfo` text.
pub fn parse(text: &str) -> Meminfo {
    let mut m = Meminfo::default();
    for l in text.lines() {
        let mut it = l.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let v: u64 = v.parse().unwrap_or(0);
        match k {
            "Dirty:" => m.dirty_kib = v,
            "Writeback:" => m.writeback_kib = v,
            "Cached:" => m.cached_kib = v,
            "MemTotal:" => m.total_kib = v,
            _ => {}
        }
    }
    m
}

/// Reads `/proc/meminfo` now.
pub fn read() -> Meminfo {
    std::fs::read_to_string("/proc/meminfo")
        .map(|t| parse(&t))
        .unwrap_or_default()
}

/// One sample: ns since the sampler started, and the values.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// ns since start.
    pub t_ns: u64,
    /// The values.
    pub m: Meminfo,
}

/// A running sampler.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<Sample>>>,
}

impl Sampler {
    /// Starts sampling every `interval` (first sample at once).
    pub fn start(interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("probe-meminfo".into())
            .spawn(move || {
                let t0 = Instant::now();
                let mut out = Vec::new();
                loop {
                    let t_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    out.push(Sample { t_ns, m: read() });
                    if s2.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(interval);
                }
                out
            })
            .ok();
        Sampler { stop, handle }
    }

    /// Stops (after one last sample) and returns the samples.
    pub fn stop(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_fields() {
        let m = parse(
            "MemTotal:       24684000 kB\nCached:          1911000 kB\nDirty:               124 kB\nWriteback:             8 kB\nWritebackTmp:   0 kB\n",
        );
        assert_eq!(
            m,
            Meminfo {
                dirty_kib: 124,
                writeback_kib: 8,
                cached_kib: 1_911_000,
                total_kib: 24_684_000
            }
        );
    }
}
