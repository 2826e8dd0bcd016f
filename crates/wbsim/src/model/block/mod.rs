//! The block layer: devices and their request queues.
//!
//! Models the parts of `block/blk-mq.c` (tags, request allocation, dispatch,
//! completion), `block/blk-merge.c` (splitting to `max_sectors`, back merges)
//! and `block/blk-flush.c` (`REQ_PREFLUSH`, `REQ_FUA`) that decide how fast
//! writeback's bios complete and when a submitter blocks; plus iostat-style
//! accounting (`/proc/diskstats`) and the `block_rq_issue` /
//! `block_rq_complete` tracepoints; and `block/blk-wbt.c`, the writeback
//! throttling every blk-mq queue has by default ([`Wbt`]: buffered-writeback
//! requests in flight limited by a depth that scales with read latency). I/O
//! schedulers, cgroup I/O control (blk-throttle, iocost, iolatency) and zoned
//! devices are left out.
//!
//! # Service model
//!
//! A bio is split into requests of at most `max_request_bytes` and
//! `max_segments` scatter-gather segments (a bio's segments are its
//! physically contiguous runs of memory, `Bio::seg_bytes`: a page each for
//! O_DIRECT user buffers and small folios, a folio each for large folios,
//! at most `max_segment_bytes` each). Each request
//! needs one of `queue_depth` tags for its whole life; a submitter with no tag
//! sleeps (FIFO) until one is freed, as in `blk_mq_get_tag()`. A bio that
//! starts where a same-direction request still in the queue ends (waiting for
//! a tag or for a device slot) is merged into it, up to `max_request_bytes`.
//!
//! A request with a tag is sent to the device (in order) once fewer than
//! `parallelism` requests are in their **latency phase** and, on a device
//! with a descriptor ring (`ring_slots` > 0: a virtqueue without indirect
//! descriptors), once the ring has room for its segments plus two; it holds
//! them until it completes, so requests of many segments go one or a few at
//! a time. A device with a
//! single command processor (`cmd_ns` > 0: an emulated controller's one
//! emulation thread) first passes each command through it, one at a time,
//! `cmd_ns` plus `read_seg_ns` / `write_seg_ns` per segment each; the
//! latency phase follows. That phase lasts
//! `read_latency_ns` or `write_latency_ns` on average and overlaps with other
//! requests' (media access in parallel channels). With `latency_cv_pct` > 0
//! each request's latency is drawn from a gamma distribution of that mean
//! and coefficient of variation, from the run's seeded random stream
//! `blk:NAME` (service-time variance: the same seed gives the same draws). Then the request
//! enters the **transfer phase**: it moves its bytes through one media pipe,
//! FIFO, taking `len / bw` of pipe time, where `bw` is the bandwidth of its
//! direction. It completes when its transfer ends (plus `fua_latency_ns` for
//! a FUA write), freeing its tag. Consequences:
//! - QD1 request of `n` bytes: `cmd_ns + latency + n / bw` (exactly, without
//!   spread; on average with it).
//! - Writers that together ask for more than the device gives share it: the
//!   tags, the command processor, the slots and the pipe are FIFO, so each
//!   gets a share in proportion to what it keeps queued.
//! - Many small requests: `min(1 / cmd_ns, parallelism / latency, bw / size)`
//!   per second.
//! - Deep queue of large requests: the pipe is always busy, throughput `bw`.
//!
//! **Reads and writes share one pipe.** A read occupies it for
//! `len / read_bw`, a write for `len / write_bw`, so a mix gets a
//! time-weighted share rather than the sum of both bandwidths. This is what
//! NAND SSDs do: reads and programs contend for the same dies and channels,
//! and mixed read/write workloads on NVMe reach less than either pure
//! workload's bandwidth (the PCIe link is full duplex, but it is not the
//! limit; the flash back end is). Separate pipes would overstate mixed
//! throughput by up to 2x.
//!
//! A flush (empty `REQ_OP_FLUSH` or the `REQ_PREFLUSH` of a write) takes a tag,
//! waits until every write submitted before it has completed, then takes
//! `flush_latency_ns` (not using a parallelism slot or the pipe); a preflush
//! write then proceeds as a normal request. On a device without a write cache
//! both flags are dropped and an empty flush completes at once, as Linux does.

mod bio;
mod device;
mod profile;
mod stats;
mod wbt;

pub use bio::{rwbs, Bio, BioFlags, BioOp, BIO_SEG_BYTES_DEFAULT, SECTOR_BYTES};
pub use device::{BlockDevice, EndIo};
pub use profile::{DeviceProfile, ProfileError};
pub use stats::{DeviceStats, IntervalStats};
pub use wbt::{Wbt, WbtStats, WBT_DEFAULT_LAT_NS};
