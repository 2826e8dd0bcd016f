//! Device profiles: the physical parameters of a block device and the
//! built-in profiles.
//!
//! A profile is what `/sys/block/DEV/queue/` and a datasheet say about a
//! device: bandwidth and per-request latency per direction, the number of tags
//! (`nr_requests` for a blk-mq device without a scheduler: the tag set's
//! `queue_depth`, set by the driver, e.g. `nvme_pci_alloc_tag_set()` in
//! `drivers/nvme/host/pci.c`), `max_sectors_kb` (requests are split to it by
//! `bio_split_rw()` in `block/blk-merge.c`), `write_cache` (`QUEUE_FLAG_WC`,
//! shown as "write back"/"write through" in `queue/write_cache`) and what a
//! cache flush and a FUA write cost. How [`super::BlockDevice`] uses these
//! numbers is described in the `block` module documentation.
//!
//! Left out: rotational devices (seek time, elevator sorting); `rotational` is
//! kept so a scenario can state it, and must be `false`. Steady-state
//! garbage-collection slowdowns of flash under sustained random writes are not
//! modelled: the numbers are fresh-drive (burst) figures.

use serde::{Deserialize, Serialize};

use sim::USEC;

/// 1 KiB in bytes.
const KIB: u64 = 1024;
/// 1 MB (decimal, as datasheets quote bandwidth) in bytes.
const MB: u64 = 1_000_000;

/// Service-time spread of a disk emulated by a hypervisor on a host file
/// (coefficient of variation of the latency phase, percent): 20. MEASURED on
/// this project's build machine (a KVM guest whose disk is virtio-blk,
/// 2026-11-25, load average 2.4): 3000 O_DIRECT 4 KiB random overwrites at
/// QD1 of a preallocated 256 MiB file on ext4 (a Python loop timing each
/// `pwritev` with `perf_counter_ns`) took p50 64.9 us, p90 77.4 us, p99
/// 139 us; below p99 their mean was 63.2 us with standard deviation 12.9 us
/// (CV 0.20). The 1% above p99 (up to 7.4 ms, host-side stalls of a shared
/// machine) is left out: a gamma with this CV stands for the body only.
pub const EMULATED_LATENCY_CV_PCT: u32 = 20;

/// The loop driver's `max_segments`: 128 (`/sys/block/loopN/queue`, read
/// on this project's machine on 2026-11-28, as is its `max_segment_size`
/// of 64 KiB: the block layer's defaults, `BLK_MAX_SEGMENTS` and
/// `BLK_MAX_SEGMENT_SIZE`, which the loop driver does not change).
const LOOP_MAX_SEGMENTS: u32 = 128;

/// Largest accepted [`DeviceProfile::latency_cv_pct`]: 1000 (a standard
/// deviation ten times the mean; beyond that a gamma's mass sits at zero).
pub const MAX_LATENCY_CV_PCT: u32 = 1000;

/// The physical parameters of one block device. All fields are required in a
/// TOML/JSON description except `write_cache` (default `true`) and
/// `rotational` (default `false`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    /// Profile name (e.g. `nvme-dc`).
    pub name: String,
    /// Media read bandwidth, bytes/s.
    pub read_bw_bytes_per_sec: u64,
    /// Media write bandwidth, bytes/s.
    pub write_bw_bytes_per_sec: u64,
    /// Per-request read latency (command overhead + media access before the
    /// data moves), ns.
    pub read_latency_ns: u64,
    /// Per-request write latency, ns.
    pub write_latency_ns: u64,
    /// Tags: requests that can be allocated at once (`nr_requests`), per
    /// hardware queue ([`DeviceProfile::nr_hw_queues`]). A submitter sleeps
    /// when all of its queue's are in use, as in `blk_mq_get_tag()`.
    pub queue_depth: u32,
    /// Requests that can be in their latency phase at once (the device's
    /// internal channels / dies / worker threads).
    pub parallelism: u32,
    /// Largest request, bytes (`max_sectors_kb` * 1024).
    pub max_request_bytes: u64,
    /// Cost of a cache flush (`REQ_PREFLUSH` / `REQ_OP_FLUSH`) once the writes
    /// it covers are done, ns.
    pub flush_latency_ns: u64,
    /// Extra completion latency of a `REQ_FUA` write, ns.
    pub fua_latency_ns: u64,
    /// Whether the device has a volatile write cache (`QUEUE_FLAG_WC`). When
    /// `false` the block layer strips `REQ_PREFLUSH`/`REQ_FUA` and an empty
    /// flush completes at once (`submit_bio_noacct()`).
    #[serde(default = "default_true")]
    pub write_cache: bool,
    /// Rotational media; only `false` is modelled.
    #[serde(default)]
    pub rotational: bool,
    /// CPU per request spent by the driver's own worker thread, ns: the loop
    /// driver hands every request to a kworker (`loop_queue_work` ->
    /// `lo_rw_aio`, then the completion), which competes for CPUs with
    /// everything else. 0 (the default): submission runs in the submitter's
    /// context and is part of its costs (NVMe, virtio-blk).
    #[serde(default)]
    pub driver_cpu_ns: u64,
    /// Service-time variance: the coefficient of variation (standard
    /// deviation / mean) of a request's latency phase, percent. Each
    /// request's latency is drawn from a gamma distribution with the
    /// profile's mean latency and this spread, from the run's seeded RNG.
    /// 0 (the default): every request takes exactly the mean.
    #[serde(default)]
    pub latency_cv_pct: u32,
    /// Time one command occupies the controller's single command processor
    /// before its latency phase, ns: commands are fetched and decoded one at
    /// a time (an emulated controller's one emulation thread, a firmware
    /// front end), so this stage serialises them and bounds IOPS at
    /// `1 / cmd_ns` whatever the parallelism. 0 (the default): no such
    /// stage.
    #[serde(default)]
    pub cmd_ns: u64,
    /// Scatter-gather segments a request may have (`queue/max_segments`):
    /// `bio_split_rw_at()` ends a request where one more segment would
    /// exceed it, and `ll_back_merge_fn()` refuses a merge that would. A
    /// bio's segments are its physically contiguous runs
    /// ([`super::Bio::seg_bytes`]), each at most `max_segment_bytes`. 0 (the
    /// default): no limit.
    #[serde(default)]
    pub max_segments: u32,
    /// Largest segment, bytes (`queue/max_segment_size`): a longer
    /// contiguous run counts as several segments. 0 (the default): no
    /// limit.
    #[serde(default)]
    pub max_segment_bytes: u64,
    /// Command-processor time per segment of a read, ns, on top of `cmd_ns`
    /// (an emulator maps and copies each descriptor's buffer on its own).
    /// 0 (the default): segments cost nothing.
    #[serde(default)]
    pub read_seg_ns: u64,
    /// Command-processor time per segment of a write, ns (as
    /// `read_seg_ns`).
    #[serde(default)]
    pub write_seg_ns: u64,
    /// Descriptors in the device's ring (a virtqueue without indirect
    /// descriptors): a request holds one per segment plus two (virtio-blk's
    /// header and status) from dispatch to completion, and the driver stops
    /// dispatching while the next request does not fit (`virtio_queue_rq()`
    /// gets -ENOSPC and stops the hardware queue until a completion frees
    /// descriptors). So few requests of many segments can be in flight at
    /// once. 0 (the default): no ring limit (indirect descriptors, NVMe).
    #[serde(default)]
    pub ring_slots: u32,
    /// The device needs stable pages while they are written
    /// (`BLK_FEAT_STABLE_WRITES`: integrity protection with checksums
    /// computed over the data, as T10 PI or dm-integrity devices set):
    /// filesystems on it get `SB_I_STABLE_WRITES`, and a write into a folio
    /// under writeback waits for it. false (the default) for every built-in
    /// profile.
    #[serde(default)]
    pub stable_writes: bool,
    /// Writeback throttling's read-latency target (`wbt_lat_usec` in
    /// `/sys/block/*/queue`), ns; 0 turns blk-wbt off ([`super::Wbt`]).
    /// blk-mq devices have it on by default at 2 ms when non-rotational
    /// (`wbt_default_latency_nsec`, CONFIG_BLK_WBT_MQ); bio-based drivers
    /// (pmem) have no rq-qos. Default 2 ms.
    #[serde(default = "default_wbt_lat_ns")]
    pub wbt_lat_ns: u64,
    /// Extra time of a write request that reaches blocks the device has never
    /// written, ns, once per such request, in the device's serial stage (the
    /// data pipe): a device backed by a sparse file (a loop device over an
    /// image made with `truncate`, a thin-provisioned volume) allocates the
    /// backing blocks on the first write to them, under the backing file's
    /// lock, one request at a time. The device remembers which blocks it has
    /// written for as long as it exists (mkfs and unlink do not give the
    /// backing space back). 0 (the default): a fully allocated device.
    #[serde(default)]
    pub first_write_rq_ns: u64,
    /// As `first_write_rq_ns`, per 4 KiB block written for the first time.
    #[serde(default)]
    pub first_write_block_ns: u64,
    /// A request completes on the CPU that submitted it, so the work its
    /// completion queues on a per-CPU workqueue (XFS's unwritten-extent
    /// conversion on `xfs-conv`) runs there: an NVMe device has an I/O queue
    /// per CPU, each with its own interrupt vector bound to that CPU
    /// (drivers/nvme/host/pci.c `nvme_setup_irqs` with managed affinity,
    /// `blk_mq_map_hw_queues`), and a pmem write completes in its
    /// submitter's context. false: completions arrive on whichever CPU
    /// takes the interrupt of the device below (a loop device: its backing
    /// file's I/O, `lo_rw_aio_complete`), which the model leaves open.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub percpu_completion: bool,
    /// Without `percpu_completion`: the one CPU whose interrupt completes
    /// every request, where the device below takes its interrupts there
    /// (a loop device over a file on a single-queue virtio disk whose
    /// interrupt the kernel routed to one CPU: `/proc/irq/N/
    /// effective_affinity_list`). None: left open. A property of the
    /// machine, not of the device class, so no built-in profile sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_cpu: Option<usize>,
    /// Hardware queues (the tag set's `nr_hw_queues`), each with its own
    /// `queue_depth` tags and its own list of requests waiting for the
    /// device. A request goes to the queue of the CPU that submits it
    /// (`blk_mq_map_queues`: with fewer queues than CPUs, consecutive CPUs
    /// share one), and the device takes commands from the queues in turn
    /// (NVMe's default round-robin arbitration), so a submitter on another
    /// CPU neither sleeps for tags behind a busy CPU's requests nor waits
    /// behind all of them for the device. 1 (the default): one queue for
    /// every CPU (a loop device, a single-queue virtio disk, a bio-based
    /// driver).
    #[serde(default = "default_one", skip_serializing_if = "is_one")]
    pub nr_hw_queues: u32,
}

fn default_wbt_lat_ns() -> u64 {
    super::WBT_DEFAULT_LAT_NS
}

fn default_true() -> bool {
    true
}

fn default_one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// Why a profile cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("device profile '{name}': {field} must be at least {min}, got {value}")]
    TooSmall {
        name: String,
        field: &'static str,
        min: u64,
        value: u64,
    },
    #[error("device profile '{name}': {field} must be at most {max}, got {value}")]
    TooLarge {
        name: String,
        field: &'static str,
        max: u64,
        value: u64,
    },
    #[error("device profile '{0}': rotational devices are not modelled (set rotational = false)")]
    Rotational(String),
    #[error("unknown device profile '{0}' (built-in: {list})", list = DeviceProfile::BUILTIN_NAMES.join(", "))]
    Unknown(String),
}

impl DeviceProfile {
    /// Names accepted by [`DeviceProfile::builtin`].
    pub const BUILTIN_NAMES: &'static [&'static str] = &[
        "nvme-dc",
        "qemu-nvme",
        "loop-virtio",
        "loop-virtio-sparse",
        "pmem",
    ];

    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Option<Self> {
        match name {
            "nvme-dc" => Some(Self::nvme_dc()),
            "qemu-nvme" => Some(Self::qemu_nvme()),
            "loop-virtio" => Some(Self::loop_virtio()),
            "loop-virtio-sparse" => Some(Self::loop_virtio_sparse()),
            "pmem" => Some(Self::pmem()),
            _ => None,
        }
    }

    /// Every built-in profile, in [`DeviceProfile::BUILTIN_NAMES`] order.
    pub fn builtins() -> Vec<Self> {
        Self::BUILTIN_NAMES
            .iter()
            .filter_map(|n| Self::builtin(n))
            .collect()
    }

    /// Like [`DeviceProfile::builtin`], with an error naming the choices.
    pub fn lookup(name: &str) -> Result<Self, ProfileError> {
        Self::builtin(name).ok_or_else(|| ProfileError::Unknown(name.to_string()))
    }

    /// A datacentre PCIe 4.0 NVMe SSD with power-loss protection.
    ///
    /// Sources: Intel/Solidigm D7-P5510 3.84 TB product brief: sequential read
    /// 6500 MB/s, write 3400 MB/s; typical 4 KiB QD1 latency read 84 us,
    /// write 15 us; random 4 KiB read 700K IOPS. Samsung PM9A3 is in the same
    /// class (6.9 / 4.1 GB/s). Parallelism 64 gives 64 / 84 us = 762K read
    /// IOPS, near the quoted 700K. Queue depth 1023: the Linux NVMe driver's
    /// default `io_queue_depth` is 1024 and the tag set uses one entry less
    /// (`drivers/nvme/host/pci.c`), per hardware queue. Hardware queues 64:
    /// the driver asks for one I/O queue pair per possible CPU
    /// (`nvme_setup_io_queues`) and the controller grants up to its "Number
    /// of Queues" (estimate: datacentre drives of this class grant 64 or
    /// more), so each CPU of a machine up to 64 CPUs has its own queue.
    /// `max_sectors_kb` 128: MDTS = 5 (32 x 4 KiB), common on such drives
    /// (see `queue/max_hw_sectors_kb`). With power-loss protection the drive
    /// reports no volatile write cache (VWC = 0), so Linux never sends it
    /// flushes or FUA: `write_cache = false` and both costs 0.
    /// Writeback throttling (blk-wbt) at its default for a non-rotational
    /// blk-mq device, 2 ms (`wbt_lat_ns`).
    pub fn nvme_dc() -> Self {
        DeviceProfile {
            name: "nvme-dc".into(),
            read_bw_bytes_per_sec: 6500 * MB,
            write_bw_bytes_per_sec: 3400 * MB,
            read_latency_ns: 84 * USEC,
            write_latency_ns: 15 * USEC,
            queue_depth: 1023,
            parallelism: 64,
            max_request_bytes: 128 * KIB,
            flush_latency_ns: 0,
            fua_latency_ns: 0,
            write_cache: false,
            rotational: false,
            driver_cpu_ns: 0,
            latency_cv_pct: 0,
            cmd_ns: 0,
            max_segments: 0,
            max_segment_bytes: 0,
            read_seg_ns: 0,
            write_seg_ns: 0,
            ring_slots: 0,
            stable_writes: false,
            wbt_lat_ns: super::WBT_DEFAULT_LAT_NS,
            first_write_rq_ns: 0,
            first_write_block_ns: 0,
            percpu_completion: true,
            completion_cpu: None,
            nr_hw_queues: 64,
        }
    }

    /// A QEMU-emulated NVMe controller (`-device nvme`, `hw/nvme/ctrl.c`)
    /// backed by an image file on a host NVMe SSD, default `cache=writeback`,
    /// `aio=threads`, QEMU 7.1 or later (shadow doorbell buffer, which the
    /// Linux driver uses when the controller offers it).
    ///
    /// ioeventfd: the numbers below were measured with `ioeventfd=on`, but
    /// QEMU 7.1 shipped with it off by default ("hw/nvme: do not enable
    /// ioeventfd by default", K. Jensen, July 2022, a fix of 2e53b0b45024
    /// before the release). With it off a doorbell write that the shadow
    /// buffer's event index asks for is an MMIO exit to QEMU taken on the
    /// submitting vCPU; the guest driver writes the doorbell only when the
    /// event index says so, about once per batch of submissions, so the
    /// difference is a few microseconds of vCPU time per batch. It is not
    /// modelled (no figure for it is at hand), and it cannot explain a
    /// per-page cost of hundreds of microseconds.
    ///
    /// Sources: QEMU commit 0ebf76aae583 ("hw/nvme: Use ioeventfd to handle
    /// doorbell updates", J. Fan, 2022) measured fio 4 KiB random I/O on a
    /// Linux 5.19 guest with ioeventfd: 41 KIOPS at QD1, 313 KIOPS at QD64
    /// (133 at QD4, 258 at QD16). The emulation runs in one thread (QEMU's
    /// main loop: `nvme_process_sq` takes one command at a time), so the
    /// QD64 figure is that thread's limit: `cmd_ns` = 1 / 313K = 3.2 us per
    /// command. The QD1 figure is the whole round trip, 1 / 41K = 24.4 us =
    /// `cmd_ns` + latency + the 4 KiB transfer: latency = 24.4 - 3.2 - 2.7
    /// (write) or - 2.0 (read) us, so 18.5 us for writes and 19.2 us for
    /// reads (the commit does not say the direction; both use it).
    /// Bandwidth 1.5 GB/s write, 2.0 GB/s read: large sequential I/O through
    /// the host page cache and a host NVMe (estimate, not from the commit).
    /// Parallelism 64: QEMU's thread pool has at most 64 workers
    /// (`util/thread-pool.c`, `max_threads`). Queue depth 1023: QEMU's MQES
    /// (2048 entries) exceeds the driver's `io_queue_depth` (1024), less one,
    /// per hardware queue. Hardware queues 64: QEMU's `max_ioqpairs` default
    /// (`hw/nvme/ctrl.c`), so a guest of up to 64 vCPUs has one per vCPU;
    /// the one emulation thread still takes their commands one at a time.
    /// `max_request_bytes` 512 KiB: QEMU's default `mdts=7` (128 x 4 KiB).
    /// QEMU reports a volatile write cache; a flush is an `fdatasync` of the
    /// image on the host (~0.5 ms on a host NVMe, estimate), and FUA writes
    /// are completed with a host flush too. Service-time spread
    /// [`EMULATED_LATENCY_CV_PCT`]: the host side of an emulated disk. The
    /// guest's NVMe queue is blk-mq, so blk-wbt is on at its 2 ms default.
    ///
    /// A random 4 KiB buffered write reaches this device as one command:
    /// iomap opens a bio per discontiguous page (`XFS_BIO_NS` in the XFS
    /// model pays the guest's CPU for it), the scheduler `none` merges
    /// nothing, and the driver sends one NVMe write per request. QEMU then
    /// handles that command in its one emulation thread (`nvme_process_sq`
    /// -> `nvme_rw`: PRP mapping, `blk_aio_pwritev` handed to a thread-pool
    /// worker, the completion queue entry and MSI-X notification posted
    /// from the same thread): `cmd_ns` (3.2 us, the measured QD64 ceiling,
    /// which includes all of it); the pool worker's `pwritev` into the
    /// host page cache overlaps other commands and is part of the latency
    /// (18.5 us). What the guest's CPUs pay per command is not in this
    /// profile (`driver_cpu_ns` 0): `nvme_queue_rq`, a doorbell MMIO exit
    /// when the shadow doorbell's event index asks for one (QEMU's default
    /// since 7.1 is `ioeventfd=off`, so the exit is handled synchronously in
    /// QEMU), and the completion interrupt with `blk_mq_end_request` and
    /// `bio_endio` on the submitting vCPU; estimate 2-5 us per command,
    /// no figure for this setup is at hand.
    pub fn qemu_nvme() -> Self {
        DeviceProfile {
            name: "qemu-nvme".into(),
            read_bw_bytes_per_sec: 2000 * MB,
            write_bw_bytes_per_sec: 1500 * MB,
            read_latency_ns: 19_200,
            write_latency_ns: 18_500,
            queue_depth: 1023,
            parallelism: 64,
            max_request_bytes: 512 * KIB,
            flush_latency_ns: 500 * USEC,
            fua_latency_ns: 500 * USEC,
            write_cache: true,
            rotational: false,
            driver_cpu_ns: 0,
            latency_cv_pct: EMULATED_LATENCY_CV_PCT,
            cmd_ns: 3_200,
            max_segments: 0,
            max_segment_bytes: 0,
            read_seg_ns: 0,
            write_seg_ns: 0,
            ring_slots: 0,
            stable_writes: false,
            wbt_lat_ns: super::WBT_DEFAULT_LAT_NS,
            first_write_rq_ns: 0,
            first_write_block_ns: 0,
            percpu_completion: true,
            completion_cpu: None,
            nr_hw_queues: 64,
        }
    }

    /// A loop device with direct I/O (`losetup --direct-io=on`) over a file on
    /// a virtio-blk disk, like this project's build machines.
    ///
    /// Sources: queue depth 128 is the loop driver's `hw_queue_depth` default
    /// (`drivers/block/loop.c`, seen as `nr_requests` = 128 here), in its one
    /// hardware queue (`loop_add`: `nr_hw_queues` = 1), and
    /// `max_sectors_kb` is 1280 on those machines (both read from
    /// `/sys/block/loopN/queue` on 2026-11-28, as is `wbt_lat_usec` = 2000:
    /// blk-wbt on with a 2 ms target, `wbt_lat_ns`). The loop driver issues each
    /// request as AIO to the backing file; below it, the hypervisor's
    /// virtio-blk emulation serves the guest's requests one at a time.
    ///
    /// MEASURED on the project machine (2026-11-28, 03:10-03:15 UTC, load
    /// 1.0-1.5, Linux 6.18): fio 3 direct I/O on a fresh loop device over a
    /// zero-filled 4 GiB image on the root ext4 (`--direct=1`, psync at QD1,
    /// libaio at QD32, 5-8 s per point, two or three rounds; the first pass
    /// over the image was slower and is not used):
    /// - 4 KiB random writes at QD32: 48-63K IOPS, while the guest's CPUs
    ///   were busy 7.0-7.4 us per I/O (`/proc/stat`; fio included). The
    ///   limit is not guest CPU, so it is the host's one emulation thread:
    ///   `cmd_ns` = 18 us per command (1 / 55K).
    /// - Guest CPU per request: `driver_cpu_ns` = 7 us (the loop worker's
    ///   `lo_rw_aio`, the virtio submission and its exit, the completion),
    ///   the busy time per I/O above, which also holds fio's own system
    ///   calls, so an upper bound.
    /// - 4 KiB writes at QD1: 63-81 us per write (p50 52-78 us); less the
    ///   command (18 us), the driver (7 us) and the system call (~3 us), the
    ///   latency phase is `write_latency_ns` = 40 us. 4 KiB random reads at
    ///   QD1: 51 us, so `read_latency_ns` = 22 us.
    /// - 1 MiB sequential writes at QD32: 2.9-3.7 GiB/s (io_uring: 4.2-4.5);
    ///   at QD1: 281-374 us per write. 1 MiB reads at QD32: 1.35-1.8 GiB/s.
    ///   These are fio's malloc'd buffers: 4 KiB pages, each its own
    ///   segment, so each 1 MiB write is two requests of 128 segments (the
    ///   loop queue's `max_segments`), which the descriptor ring below lets
    ///   through one at a time. They set the rate of such requests, not the
    ///   pipe (next item).
    ///
    /// MEASURED again on 2026-11-28, 11:10-11:20 UTC (load 0.7, same
    /// method, 3 s per point), with fio's buffers in 2 MiB huge pages
    /// (`--iomem=shmhuge`: 64 KiB segments, the loop queue's
    /// `max_segment_size`) against malloc'd ones, writes at QD32:
    /// - 1 MiB: 7.0 GB/s in 1 MiB requests (16 segments) against 3.4 GB/s
    ///   in 512 KiB requests (128 segments); at QD1 5.9 against 3.0 GB/s.
    ///   256 KiB: 7.5 (4 segments) against 4.7 GB/s (64). 64 KiB: 4.3-4.9
    ///   either way. 1 MiB reads: 3.9 GB/s (16 segments) against 1.3 (128);
    ///   64 KiB reads: 2.6 (1) against 1.4 (16).
    /// - The guest's virtio disk (`vda`) has `max_segments` 254: its ring
    ///   has 256 descriptors and no indirect descriptors (virtio-blk then
    ///   sets `max_segments` to the ring size less 2, the request's header
    ///   and status), so a request of 128 segments (130 descriptors) is
    ///   alone on the ring, one of 64 shares it with two others, one of 16
    ///   with thirteen: `ring_slots` 256.
    /// - `write_bw` 7000 MB/s (the huge-page 1 MiB rate; a 2000 MiB run
    ///   gave 7.1 GB/s), `read_bw` 3900 MB/s (the same for reads).
    /// - Per segment on the command path, from pairs with the same bytes
    ///   and different segments: 256 KiB writes of 64 against 4 segments
    ///   differ by 20.5 us per request, `write_seg_ns` = 0.3 us; 64 KiB reads
    ///   of 16 segments take 46 us per request against `cmd_ns` 18 us,
    ///   `read_seg_ns` = 1.8 us (which also gives the 410 us per 512 KiB
    ///   malloc read: 18 + 128 x 1.8 + 22 + 134).
    /// - The model then gives the malloc'd 1 MiB writes at QD32 3.1 GB/s
    ///   (measured 3.4 here, 2.9-3.7 GiB/s at 03:10) and the huge-page ones
    ///   7.0 GB/s. Writeback of large folios (XFS, and ext4 since 6.16)
    ///   makes requests of few segments and gets the fast path: the 64 MiB
    ///   left dirty on xfs by the umount probe is written in 12-16 ms of
    ///   device time here (62 requests), 11-12 ms in docs/probe/umount.json.
    ///   This machine's host served 4 KiB writes at 130K IOPS at 11:10
    ///   (7.6 us each) against 55K at 03:10: the host varies; `cmd_ns`,
    ///   the latencies and the driver cost keep the 03:10 figures.
    /// - A flush (`fdatasync` of the block device after each 4 KiB write,
    ///   fio `--fdatasync=1`): 88-104 us, so `flush_latency_ns` = 95 us;
    ///   loop has no native FUA (the block layer turns it into a post-flush),
    ///   so `fua_latency_ns` is the same.
    ///
    /// Until 2026-11-28 11:00 the pipe was 3700 / 1650 MB/s (the malloc'd
    /// rates above) for every request. Before that, this profile took its
    /// write bandwidth from buffered
    /// writers (2800 MB/s, which includes the page cache's cost), guessed
    /// 150-200 us latencies, calibrated a 21 us per-request driver CPU on one
    /// dontcache job and 150 us flushes on the umount calls; the direct
    /// measurements above replace all of them. Parallelism 32 does not bind
    /// (the command thread does first). Service-time spread
    /// [`EMULATED_LATENCY_CV_PCT`], measured on the same virtio-blk disk.
    pub fn loop_virtio() -> Self {
        DeviceProfile {
            name: "loop-virtio".into(),
            read_bw_bytes_per_sec: 3900 * MB,
            write_bw_bytes_per_sec: 7000 * MB,
            read_latency_ns: 22 * USEC,
            write_latency_ns: 40 * USEC,
            queue_depth: 128,
            parallelism: 32,
            max_request_bytes: 1280 * KIB,
            flush_latency_ns: 95 * USEC,
            fua_latency_ns: 95 * USEC,
            write_cache: true,
            rotational: false,
            driver_cpu_ns: 7 * USEC,
            latency_cv_pct: EMULATED_LATENCY_CV_PCT,
            cmd_ns: 18 * USEC,
            max_segments: LOOP_MAX_SEGMENTS,
            max_segment_bytes: 64 * KIB,
            read_seg_ns: 1_800,
            write_seg_ns: 300,
            ring_slots: 256,
            stable_writes: false,
            wbt_lat_ns: super::WBT_DEFAULT_LAT_NS,
            first_write_rq_ns: 0,
            first_write_block_ns: 0,
            percpu_completion: false,
            completion_cpu: None,
            nr_hw_queues: 1,
        }
    }

    /// [`DeviceProfile::loop_virtio`] over a sparse image (`truncate`, as
    /// `wbsim probe` makes its images): the first write to a block of the
    /// image allocates it in the guest's root ext4 (a direct-I/O write into a
    /// hole of the backing file: an unwritten extent allocated under the
    /// file's lock held exclusive, converted at completion), which the
    /// device's serial stage pays ([`DeviceProfile::first_write_rq_ns`]).
    ///
    /// MEASURED on the project machine (2026-11-28, fourth session; fio
    /// direct I/O at QD32 with huge-page buffers on a loop device over a
    /// fresh sparse 4 GiB image, the first pass over the image against the
    /// second): 1 MiB writes 4.1 against 7.5 GB/s (+113 us per request),
    /// 64 KiB 2.3 against 4.5 GB/s (+13.7 us), 4 KiB 404 against 579 MB/s
    /// (+3.0 us): about 2.5 us per request plus 0.43 us per new 4 KiB block
    /// (the 1 MiB and 4 KiB points; the 64 KiB one gives 9.4 us against
    /// 13.7). The same measurement 2026-11-28 13:05 UTC (sixth session, 1 GiB
    /// per pass) gave +249, +22.6 and +11.6 us: the host's cost of a first
    /// write varies by a factor of two or more from hour to hour; the
    /// profile keeps the first, documented set.
    pub fn loop_virtio_sparse() -> Self {
        DeviceProfile {
            name: "loop-virtio-sparse".into(),
            first_write_rq_ns: 2_500,
            first_write_block_ns: 430,
            ..Self::loop_virtio()
        }
    }

    /// Persistent memory (Intel Optane DC PMem in App Direct mode) through the
    /// `pmem` block driver (`drivers/nvdimm/pmem.c`).
    ///
    /// Sources: Izraelevitz et al., "Basic Performance Measurements of the
    /// Intel Optane DC Persistent Memory Module" (2019): one DIMM sustains
    /// about 6.6 GB/s read and 2.3 GB/s write; we take 6.6 / 2.0 GB/s. The
    /// media is 100-300 ns away, but `pmem_submit_bio()` copies synchronously
    /// in the submitter's context, so the per-request cost is block-layer and
    /// memcpy overhead: ~1 us. The driver is bio-based (no tags, no splitting
    /// to `max_sectors`): queue depth and `max_request_bytes` are set large
    /// (1024, 4 MiB, one queue) so they never bind; parallelism 16 stands for the CPUs
    /// copying at once. Flush is `nvdimm_flush()` (a write to the flush-hint
    /// address, ~1 us); FUA costs nothing extra. No writeback throttling
    /// (`wbt_lat_ns` 0): blk-wbt is an rq-qos policy of blk-mq queues.
    pub fn pmem() -> Self {
        DeviceProfile {
            name: "pmem".into(),
            read_bw_bytes_per_sec: 6600 * MB,
            write_bw_bytes_per_sec: 2000 * MB,
            read_latency_ns: USEC,
            write_latency_ns: USEC,
            queue_depth: 1024,
            parallelism: 16,
            max_request_bytes: 4096 * KIB,
            flush_latency_ns: USEC,
            fua_latency_ns: 0,
            write_cache: true,
            rotational: false,
            driver_cpu_ns: 0,
            latency_cv_pct: 0,
            cmd_ns: 0,
            max_segments: 0,
            max_segment_bytes: 0,
            read_seg_ns: 0,
            write_seg_ns: 0,
            ring_slots: 0,
            stable_writes: false,
            wbt_lat_ns: 0,
            first_write_rq_ns: 0,
            first_write_block_ns: 0,
            percpu_completion: true,
            completion_cpu: None,
            nr_hw_queues: 1,
        }
    }

    /// Parses a profile from TOML text.
    pub fn from_toml(text: &str) -> Result<Self, anyhow::Error> {
        let p: DeviceProfile = toml::from_str(text)?;
        p.validate()?;
        Ok(p)
    }

    /// Checks the values the device model relies on.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let checks: [(&'static str, u64, u64); 6] = [
            ("nr_hw_queues", u64::from(self.nr_hw_queues), 1),
            ("read_bw_bytes_per_sec", self.read_bw_bytes_per_sec, 1),
            ("write_bw_bytes_per_sec", self.write_bw_bytes_per_sec, 1),
            ("queue_depth", u64::from(self.queue_depth), 1),
            ("parallelism", u64::from(self.parallelism), 1),
            ("max_request_bytes", self.max_request_bytes, 512),
        ];
        let at_least = |field: &'static str, value: u64, min: u64| {
            if value < min {
                return Err(ProfileError::TooSmall {
                    name: self.name.clone(),
                    field,
                    min,
                    value,
                });
            }
            Ok(())
        };
        for (field, value, min) in checks {
            at_least(field, value, min)?;
        }
        if self.rotational {
            return Err(ProfileError::Rotational(self.name.clone()));
        }
        if self.ring_slots > 0 {
            // A request needs its segments plus two descriptors: without a
            // segment limit, or with one the ring cannot hold, a request
            // could never be dispatched.
            if self.max_segments == 0 {
                at_least("max_segments (with ring_slots)", 0, 1)?;
            }
            at_least(
                "ring_slots",
                u64::from(self.ring_slots),
                u64::from(self.max_segments) + 2,
            )?;
        }
        if self.latency_cv_pct > MAX_LATENCY_CV_PCT {
            return Err(ProfileError::TooLarge {
                name: self.name.clone(),
                field: "latency_cv_pct",
                max: u64::from(MAX_LATENCY_CV_PCT),
                value: u64::from(self.latency_cv_pct),
            });
        }
        Ok(())
    }

    /// The segment size a bio of contiguous runs of `seg_bytes` has on this
    /// device: the run, at most `max_segment_bytes`, at least a sector.
    pub fn segment_bytes(&self, seg_bytes: u64) -> u64 {
        let s = if self.max_segment_bytes > 0 {
            seg_bytes.min(self.max_segment_bytes)
        } else {
            seg_bytes
        };
        s.max(512)
    }

    /// The largest request of segments of `seg_bytes` (see
    /// [`DeviceProfile::segment_bytes`]): `max_request_bytes`, or fewer
    /// when `max_segments` binds first (in whole sectors).
    pub fn max_request_for(&self, seg_bytes: u64) -> u64 {
        if self.max_segments == 0 {
            return self.max_request_bytes;
        }
        let by_segs = u64::from(self.max_segments) * self.segment_bytes(seg_bytes);
        self.max_request_bytes.min(by_segs / 512 * 512).max(512)
    }

    /// Segments of a request of `len` bytes made of runs of `seg_bytes`.
    pub fn segments(&self, len: u64, seg_bytes: u64) -> u64 {
        len.div_ceil(self.segment_bytes(seg_bytes)).max(1)
    }

    /// The command processor's time for a request of `segs` segments:
    /// `cmd_ns` plus the per-segment cost of its direction, ns.
    pub fn cmd_time_ns(&self, write: bool, segs: u64) -> u64 {
        let per = if write {
            self.write_seg_ns
        } else {
            self.read_seg_ns
        };
        self.cmd_ns.saturating_add(per.saturating_mul(segs))
    }

    /// Time to move `bytes` through the media pipe in the given direction at
    /// its bandwidth, ns, rounded up.
    pub fn transfer_ns(&self, write: bool, bytes: u64) -> u64 {
        let bw = if write {
            self.write_bw_bytes_per_sec
        } else {
            self.read_bw_bytes_per_sec
        }
        .max(1);
        let ns = (u128::from(bytes) * u128::from(sim::SEC)).div_ceil(u128::from(bw));
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}
