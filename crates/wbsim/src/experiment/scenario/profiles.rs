//! Built-in block device profiles for `[[device]] profile = "..."`.
//!
//! What the block layer model (`block/`) needs of a device: sustained read
//! and write bandwidth, the service latency of one small request, the queue
//! depth the driver exposes (`blk-mq` `nr_requests`/`queue_depth`) and how
//! many requests the device serves at once. Values are physical and each has
//! its source; none is fitted to a published experiment result. Every value
//! can be overridden per `[[device]]`.

use serde::{Deserialize, Serialize};

/// Bytes per decimal megabyte, for datasheet figures in MB/s.
const MB: u64 = 1_000_000;

/// A device's performance parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    /// Sustained sequential write bandwidth, bytes/s.
    pub write_bw: u64,
    /// Sustained sequential read bandwidth, bytes/s.
    pub read_bw: u64,
    /// Service time of one 4k write, ns.
    pub write_lat_ns: u64,
    /// Service time of one 4k read, ns.
    pub read_lat_ns: u64,
    /// Requests the driver queues (blk-mq tags per hardware queue).
    pub queue_depth: u32,
    /// Requests the device serves concurrently (channels/dies/threads).
    pub parallelism: u32,
}

/// Names of the built-in profiles, in documentation order.
pub const PROFILE_NAMES: &[&str] = &["nvme-dc", "qemu-nvme", "loop-virtio", "pmem"];

/// The built-in profile `name`.
pub fn builtin_profile(name: &str) -> Option<DeviceProfile> {
    let p = match name {
        // Datacenter NVMe SSD, Samsung PM9A3 3.84 TB (U.2) datasheet: 6900 MB/s
        // sequential read, 4100 MB/s sequential write; 4k random read latency
        // ~80 us, write (into the drive's power-loss-protected cache) ~20 us.
        // queue_depth 1023: drivers/nvme/host/pci.c io_queue_depth default 1024,
        // minus one (a full queue keeps one slot empty). parallelism 32: the
        // flash channels x dies the datasheet's random IOPS imply
        // (1000k IOPS x 80 us / 1 = ~80 in flight; 32 keeps 4k sequential at
        // bandwidth), an estimate.
        "nvme-dc" => DeviceProfile {
            write_bw: 4100 * MB,
            read_bw: 6900 * MB,
            write_lat_ns: 20_000,
            read_lat_ns: 80_000,
            queue_depth: 1023,
            parallelism: 32,
        },
        // QEMU's emulated NVMe (hw/nvme) backed by an image file on a host
        // NVMe, aio=threads: each request costs a VM exit, a thread-pool hop
        // and a host I/O. Estimate: ~2 GB/s either way, ~40 us per request.
        // queue_depth 1023 (the guest driver's default, QEMU's MQES 2047 is
        // larger); parallelism 4 (QEMU's default aio thread pool keeps a few
        // requests in flight on the host), an estimate.
        "qemu-nvme" => DeviceProfile {
            write_bw: 2000 * MB,
            read_bw: 2000 * MB,
            write_lat_ns: 40_000,
            read_lat_ns: 40_000,
            queue_depth: 1023,
            parallelism: 4,
        },
        // A loop device with --direct-io=on over a file on a virtio-blk disk:
        // drivers/block/loop.c hw_queue_depth default 128; one loop worker
        // serialises the file I/O (parallelism 1). Bandwidth and latency:
        // virtio-blk on a host NVMe, ~1 GB/s and ~100 us, an estimate.
        "loop-virtio" => DeviceProfile {
            write_bw: 1000 * MB,
            read_bw: 1000 * MB,
            write_lat_ns: 100_000,
            read_lat_ns: 100_000,
            queue_depth: 128,
            parallelism: 1,
        },
        // Persistent memory (drivers/nvdimm/pmem.c, bio-based and synchronous:
        // the submitting CPU copies). Intel Optane PMem 100, one 256 GB DIMM,
        // published product brief: ~6.8 GB/s read, ~2.3 GB/s write; load
        // latency ~350 ns, store to the ADR domain ~100 ns. queue_depth 1,
        // parallelism 1 per submitter (no queue).
        "pmem" => DeviceProfile {
            write_bw: 2300 * MB,
            read_bw: 6800 * MB,
            write_lat_ns: 100,
            read_lat_ns: 350,
            queue_depth: 1,
            parallelism: 1,
        },
        _ => return None,
    };
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_profile_exists_and_is_sane() {
        for n in PROFILE_NAMES {
            let p = builtin_profile(n);
            assert!(
                p.as_ref()
                    .is_some_and(|p| p.write_bw > 0 && p.read_bw > 0 && p.queue_depth >= 1),
                "{n}"
            );
        }
        assert_eq!(builtin_profile("sata"), None);
    }
}
