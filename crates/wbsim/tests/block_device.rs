//! Known-answer tests of the block device model (`model::block`): service
//! times, IOPS and bandwidth limits, tags, splitting, merging, flushes,
//! statistics, trace events and profile parsing.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use sim::{Sim, TraceSink, MSEC, USEC};
use wbsim::model::block::{Bio, BioFlags, BlockDevice, DeviceProfile};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// A profile with round numbers: `bw` bytes/s both ways, `lat_ns` both ways.
fn profile(bw: u64, lat_ns: u64, queue_depth: u32, parallelism: u32, max: u64) -> DeviceProfile {
    DeviceProfile {
        name: "test".into(),
        read_bw_bytes_per_sec: bw,
        write_bw_bytes_per_sec: bw,
        read_latency_ns: lat_ns,
        write_latency_ns: lat_ns,
        queue_depth,
        parallelism,
        max_request_bytes: max,
        flush_latency_ns: 50 * USEC,
        fua_latency_ns: 30 * USEC,
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
        // Writeback throttling off: these tests check the device alone
        // (the wbt tests below turn it on).
        wbt_lat_ns: 0,
        first_write_rq_ns: 0,
        first_write_block_ns: 0,
        percpu_completion: false,
        completion_cpu: None,
        nr_hw_queues: 1,
    }
}

/// A recorder of completion times for `end_io` callbacks.
fn recorder(sim: &Sim, log: &Rc<RefCell<Vec<(u32, u64)>>>, tag: u32) -> Box<dyn FnOnce()> {
    let (s, l) = (sim.clone(), log.clone());
    Box::new(move || l.borrow_mut().push((tag, s.now())))
}

#[test]
fn qd1_1mib_write_takes_latency_plus_transfer() {
    let sim = Sim::new(1);
    // 1000 MiB/s: 1 MiB moves in exactly 1 ms.
    let dev = BlockDevice::new(&sim, "d", profile(1000 * MIB, 20 * USEC, 32, 8, 4 * MIB));
    let (s, d) = (sim.clone(), dev.clone());
    let h = sim.spawn("dio", async move {
        d.submit_bio_wait(Bio::write(0, MIB)).await;
        s.now()
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(20 * USEC + MSEC));
    let st = dev.stats();
    assert_eq!((st.writes, st.write_bytes, st.reads), (1, MIB, 0));
    assert_eq!(st.w_await_ns(), (20 * USEC + MSEC) as f64);
    assert_eq!(st.busy_ns, 20 * USEC + MSEC);
    assert_eq!(st.max_in_flight, 1);
    assert_eq!(st.in_flight, 0);
}

/// 64 tasks doing QD1 random 4 KiB writes each: `n` writes per task.
fn random_4k_writers(dev: &BlockDevice, sim: &Sim, n: u64) {
    for t in 0..64u64 {
        let d = dev.clone();
        sim.spawn(format!("w{t}"), async move {
            for i in 0..n {
                // Far apart: never contiguous, never merged.
                let off = (t * 1_000_003 + i * 7919) * 64 * KIB;
                d.submit_bio_wait(Bio::write(off, 4 * KIB)).await;
            }
        });
    }
}

#[test]
fn random_4k_latency_bound_gives_parallelism_over_latency() {
    // 8 slots / 20 us = 400K IOPS; the pipe allows 4096e6 / 4096 = 1M IOPS.
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", profile(4_096_000_000, 20 * USEC, 1023, 8, MIB));
    random_4k_writers(&dev, &sim, 100);
    sim.run().unwrap();
    // 6400 requests, 8 per 20 us round: 800 rounds, then the last 8
    // transfers of 1 us each.
    assert_eq!(sim.now(), 800 * 20 * USEC + 8 * USEC);
    let st = dev.stats();
    assert_eq!(st.writes, 6400);
    assert_eq!(st.merges, 0);
    let iops = st.writes as f64 * 1e9 / sim.now() as f64;
    assert!((iops - 400_000.0).abs() / 400_000.0 < 0.001, "iops {iops}");
}

#[test]
fn random_4k_bandwidth_bound_gives_bw_over_size() {
    // 32 slots / 20 us = 1.6M IOPS; the pipe allows 409.6e6 / 4096 = 100K IOPS.
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", profile(409_600_000, 20 * USEC, 1023, 32, MIB));
    random_4k_writers(&dev, &sim, 50);
    sim.run().unwrap();
    // The pipe starts at 20 us and never idles: 3200 transfers of 10 us.
    assert_eq!(sim.now(), 20 * USEC + 3200 * 10 * USEC);
    assert_eq!(dev.stats().writes, 3200);
}

#[test]
fn deep_sequential_stream_reaches_bandwidth() {
    let sim = Sim::new(1);
    let mut p = DeviceProfile::builtin("nvme-dc").unwrap();
    // The device alone: no writeback throttling, whose window timer would
    // keep the run going after the stream (and limits it to 8 in flight).
    p.wbt_lat_ns = 0;
    let bw = p.write_bw_bytes_per_sec as f64;
    let dev = BlockDevice::new(&sim, "nvme0n1", p);
    let done = Rc::new(Cell::new(0u32));
    let (d, c) = (dev.clone(), done.clone());
    sim.spawn("writer", async move {
        for i in 0..256 {
            let c = c.clone();
            let end: Box<dyn FnOnce()> = Box::new(move || c.set(c.get() + 1));
            d.submit_bio(Bio::write(i * MIB, MIB), end).await;
        }
    });
    let before = dev.stats();
    sim.run().unwrap();
    let after = dev.stats();
    assert_eq!(done.get(), 256);
    // 1 MiB bios on a 128 KiB max_sectors device: 8 requests each.
    assert_eq!(after.writes, 256 * 8);
    assert_eq!(after.splits, 256 * 7);
    assert_eq!(after.write_bytes, 256 * MIB);
    let i = after.since(&before);
    assert!((i.write_bytes_per_sec - bw).abs() / bw < 0.001, "{i:?}");
    assert_eq!(i.util, 1.0);
}

#[test]
fn full_queue_blocks_the_submitter_until_a_tag_frees() {
    let sim = Sim::new(1);
    // 2 tags, 1 slot, 100 us latency, 4 KiB moves in 1 us.
    let dev = BlockDevice::new(&sim, "d", profile(4_096_000_000, 100 * USEC, 2, 1, MIB));
    let returned = Rc::new(RefCell::new(Vec::new()));
    let completed = Rc::new(RefCell::new(Vec::new()));
    let (s, d, r, c) = (
        sim.clone(),
        dev.clone(),
        returned.clone(),
        completed.clone(),
    );
    sim.spawn("submitter", async move {
        for i in 0..3u32 {
            let off = u64::from(i) * MIB;
            d.submit_bio(Bio::write(off, 4 * KIB), recorder(&s, &c, i))
                .await;
            r.borrow_mut().push(s.now());
        }
    });
    sim.run_until(50 * USEC).unwrap();
    assert_eq!(*returned.borrow(), vec![0, 0]);
    assert_eq!(dev.tags_in_use(), 2);
    assert_eq!(dev.tag_waiters(), 1);
    sim.run().unwrap();
    // The third submit returns when the first request frees its tag. Each
    // request starts its latency when the one before leaves the only slot.
    assert_eq!(*returned.borrow(), vec![0, 0, 101 * USEC]);
    assert_eq!(
        *completed.borrow(),
        vec![(0, 101 * USEC), (1, 201 * USEC), (2, 301 * USEC)]
    );
    assert_eq!(dev.stats().max_in_flight, 3);
}

#[test]
fn large_bio_is_split_into_max_sized_requests() {
    let sim = Sim::new(1);
    sim.set_trace(TraceSink::Memory(Vec::new()));
    // 1 MiB moves in 1 ms; one slot, so the pieces go one after another.
    let dev = BlockDevice::new(&sim, "sdx", profile(1000 * MIB, 10 * USEC, 32, 1, MIB));
    let log = Rc::new(RefCell::new(Vec::new()));
    let (s, d, l) = (sim.clone(), dev.clone(), log.clone());
    sim.spawn("w", async move {
        d.submit_bio(Bio::write(0, 4 * MIB), recorder(&s, &l, 0))
            .await;
    });
    sim.run().unwrap();
    let st = dev.stats();
    assert_eq!((st.writes, st.splits, st.write_bytes), (4, 3, 4 * MIB));
    // Piece k starts its latency when piece k-1 leaves it; the pipe is the
    // bottleneck: completion = 10 us + 4 * 1 ms. end_io runs once, then.
    assert_eq!(*log.borrow(), vec![(0, 10 * USEC + 4 * MSEC)]);
    let trace = sim.take_trace();
    let issued: Vec<&str> = trace
        .iter()
        .filter(|e| e.name == "block_rq_issue")
        .map(|e| e.fields.as_str())
        .collect();
    assert_eq!(
        issued,
        vec![
            "sdx W 0 + 2048 nr_bytes=1048576",
            "sdx W 2048 + 2048 nr_bytes=1048576",
            "sdx W 4096 + 2048 nr_bytes=1048576",
            "sdx W 6144 + 2048 nr_bytes=1048576",
        ]
    );
    let completes = trace
        .iter()
        .filter(|e| e.name == "block_rq_complete")
        .count();
    assert_eq!(completes, 4);
}

/// Submits a big write to keep the only slot busy, then `second` and `third`
/// (4 KiB each) behind it. Returns (stats, end_io log).
fn queued_behind_busy(
    second: Bio,
    third: Bio,
) -> (wbsim::model::block::DeviceStats, Vec<(u32, u64)>) {
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", profile(4_096_000_000, 100 * USEC, 32, 1, MIB));
    let log = Rc::new(RefCell::new(Vec::new()));
    let (s, d, l) = (sim.clone(), dev.clone(), log.clone());
    sim.spawn("w", async move {
        d.submit_bio(Bio::write(100 * MIB, 64 * KIB), recorder(&s, &l, 0))
            .await;
        d.submit_bio(second, recorder(&s, &l, 1)).await;
        d.submit_bio(third, recorder(&s, &l, 2)).await;
    });
    sim.run().unwrap();
    let v = log.borrow().clone();
    (dev.stats(), v)
}

#[test]
fn contiguous_bios_queued_behind_a_busy_device_merge() {
    let (st, log) = queued_behind_busy(Bio::write(0, 4 * KIB), Bio::write(4 * KIB, 4 * KIB));
    assert_eq!((st.merges, st.write_merges, st.writes), (1, 1, 2));
    assert_eq!(st.write_bytes, 72 * KIB);
    // First: 100 us + 16 us. The merged 8 KiB request enters its latency at
    // 100 us and moves 8 KiB in 2 us: both bios end together.
    assert_eq!(log, vec![(0, 116 * USEC), (1, 202 * USEC), (2, 202 * USEC)]);
}

#[test]
fn non_contiguous_or_mixed_bios_do_not_merge() {
    let (st, _) = queued_behind_busy(Bio::write(0, 4 * KIB), Bio::write(8 * KIB, 4 * KIB));
    assert_eq!((st.merges, st.writes), (0, 3));
    // A read right after a write is not merged into it.
    let (st, _) = queued_behind_busy(Bio::write(0, 4 * KIB), Bio::read(4 * KIB, 4 * KIB));
    assert_eq!((st.merges, st.writes, st.reads), (0, 2, 1));
    // Nor is a FUA write.
    let fua = Bio::write(4 * KIB, 4 * KIB).with_flags(BioFlags {
        fua: true,
        ..BioFlags::default()
    });
    let (st, _) = queued_behind_busy(Bio::write(0, 4 * KIB), fua);
    assert_eq!(st.merges, 0);
    // A merge never makes a request larger than max_request_bytes.
    let (st, _) = queued_behind_busy(
        Bio::write(0, MIB - 4 * KIB),
        Bio::write(MIB - 4 * KIB, 8 * KIB),
    );
    assert_eq!(st.merges, 0);
}

#[test]
fn flush_waits_for_prior_writes_then_costs_flush_latency() {
    let sim = Sim::new(1);
    // 1 MiB moves in 1 ms.
    let dev = BlockDevice::new(&sim, "d", profile(1000 * MIB, 20 * USEC, 32, 8, 4 * MIB));
    let log = Rc::new(RefCell::new(Vec::new()));
    let (s, d, l) = (sim.clone(), dev.clone(), log.clone());
    let h = sim.spawn("fsync", async move {
        d.submit_bio(Bio::write(0, MIB), recorder(&s, &l, 0)).await;
        d.flush().await;
        let t1 = s.now();
        // On an idle device a flush costs exactly its latency.
        d.flush().await;
        (t1, s.now())
    });
    sim.run().unwrap();
    let (t1, t2) = h.result().unwrap();
    assert_eq!(log.borrow()[0], (0, 20 * USEC + MSEC));
    assert_eq!(t1, 20 * USEC + MSEC + 50 * USEC);
    assert_eq!(t2, t1 + 50 * USEC);
    let st = dev.stats();
    assert_eq!((st.flushes, st.writes), (2, 1));
}

#[test]
fn preflush_fua_write_and_no_write_cache() {
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", profile(1000 * MIB, 20 * USEC, 32, 8, 4 * MIB));
    let (s, d) = (sim.clone(), dev.clone());
    let h = sim.spawn("commit", async move {
        let f = BioFlags {
            fua: true,
            sync: true,
            preflush: true,
            ..BioFlags::default()
        };
        // Journal commit block: flush (50 us), write (20 us + 1 ms), FUA (30 us).
        d.submit_bio_wait(Bio::write(0, MIB).with_flags(f)).await;
        s.now()
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(50 * USEC + 20 * USEC + MSEC + 30 * USEC));
    assert_eq!(dev.stats().flushes, 1);

    // Without a write cache the flags are dropped and a flush is free.
    let sim = Sim::new(1);
    let mut p = profile(1000 * MIB, 20 * USEC, 32, 8, 4 * MIB);
    p.write_cache = false;
    let dev = BlockDevice::new(&sim, "d", p);
    let (s, d) = (sim.clone(), dev.clone());
    let h = sim.spawn("commit", async move {
        d.submit_bio(Bio::write(0, MIB), Box::new(|| {})).await;
        d.flush().await;
        let t = s.now();
        let f = BioFlags {
            fua: true,
            sync: true,
            preflush: true,
            ..BioFlags::default()
        };
        d.submit_bio_wait(Bio::write(0, MIB).with_flags(f)).await;
        (t, s.now())
    });
    sim.run().unwrap();
    let (t, t2) = h.result().unwrap();
    assert_eq!(t, 0);
    assert_eq!(t2, 2 * (20 * USEC + MSEC) - 20 * USEC);
    assert_eq!(dev.stats().flushes, 0);
}

#[test]
fn utilisation_is_full_when_saturated_and_zero_when_idle() {
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", profile(1000 * MIB, 20 * USEC, 64, 8, MIB));
    // Idle for 1 ms.
    let s = sim.clone();
    sim.spawn("idle", async move { s.sleep(MSEC).await });
    let a = dev.stats();
    sim.run().unwrap();
    let b = dev.stats();
    let idle = b.since(&a);
    assert_eq!(
        (idle.util, idle.write_bytes_per_sec, b.busy_ns),
        (0.0, 0.0, 0)
    );
    // Saturated: 16 writers of back-to-back 1 MiB writes for 100 ms.
    for t in 0..16u64 {
        let d = dev.clone();
        sim.spawn_daemon(format!("w{t}"), async move {
            let mut i = 0;
            loop {
                d.submit_bio_wait(Bio::write((t * 100_000 + i) * 2 * MIB, MIB))
                    .await;
                i += 1;
            }
        });
    }
    sim.run_until(11 * MSEC).unwrap();
    let c = dev.stats();
    sim.run_until(101 * MSEC).unwrap();
    let d = dev.stats();
    let busy = d.since(&c);
    assert_eq!(busy.util, 1.0);
    // 1000 MiB/s for 90 ms.
    let bw = (1000 * MIB) as f64;
    assert!(
        (busy.write_bytes_per_sec - bw).abs() / bw < 0.02,
        "{busy:?}"
    );
    assert_eq!(d.in_flight, 16);
    assert!(busy.avg_queue_size > 15.9);
}

#[test]
fn end_io_runs_once_per_bio_at_completion() {
    let sim = Sim::new(1);
    // 4 KiB moves in 1 us; latency 10 us; 2 slots.
    let dev = BlockDevice::new(&sim, "d", profile(4_096_000_000, 10 * USEC, 32, 2, MIB));
    let log = Rc::new(RefCell::new(Vec::new()));
    let (s, d, l) = (sim.clone(), dev.clone(), log.clone());
    sim.spawn("w", async move {
        for i in 0..3u32 {
            d.submit_bio(Bio::write(u64::from(i) * MIB, 4 * KIB), recorder(&s, &l, i))
                .await;
        }
        d.submit_bio(Bio::read(50 * MIB, 8 * KIB), recorder(&s, &l, 3))
            .await;
    });
    sim.run().unwrap();
    // Two go at 0 and share the pipe (10, 11 us); the third and the read
    // start at 10 us (20 us latency end; 21, 23 us).
    assert_eq!(
        *log.borrow(),
        vec![
            (0, 11 * USEC),
            (1, 12 * USEC),
            (2, 21 * USEC),
            (3, 23 * USEC)
        ]
    );
    let st = dev.stats();
    assert_eq!((st.writes, st.reads, st.read_bytes), (3, 1, 8 * KIB));
    assert_eq!(st.r_await_ns(), (23 * USEC) as f64);
}

#[test]
fn reads_and_writes_share_the_media_pipe() {
    let sim = Sim::new(1);
    let mut p = profile(1000 * MIB, 0, 32, 8, 4 * MIB);
    p.read_bw_bytes_per_sec = 2000 * MIB;
    let dev = BlockDevice::new(&sim, "d", p);
    let log = Rc::new(RefCell::new(Vec::new()));
    let (s, d, l) = (sim.clone(), dev.clone(), log.clone());
    sim.spawn("w", async move {
        d.submit_bio(Bio::write(0, MIB), recorder(&s, &l, 0)).await;
        d.submit_bio(Bio::read(100 * MIB, MIB), recorder(&s, &l, 1))
            .await;
    });
    sim.run().unwrap();
    // The write takes the pipe for 1 ms, then the read for 0.5 ms.
    assert_eq!(*log.borrow(), vec![(0, MSEC), (1, MSEC + MSEC / 2)]);
}

#[test]
fn builtin_profiles_and_toml() {
    for name in DeviceProfile::BUILTIN_NAMES {
        let p = DeviceProfile::builtin(name).unwrap();
        assert_eq!(p.name, *name);
        p.validate().unwrap();
        // Round trip through TOML.
        let text = toml::to_string(&p).unwrap();
        assert_eq!(DeviceProfile::from_toml(&text).unwrap(), p);
    }
    assert_eq!(DeviceProfile::builtins().len(), 5);
    assert!(DeviceProfile::builtin("floppy").is_none());
    assert!(DeviceProfile::lookup("floppy")
        .unwrap_err()
        .to_string()
        .contains("nvme-dc"));
    let text = r#"
        name = "my-ssd"
        read_bw_bytes_per_sec = 3000000000
        write_bw_bytes_per_sec = 2000000000
        read_latency_ns = 80000
        write_latency_ns = 20000
        queue_depth = 256
        parallelism = 16
        max_request_bytes = 524288
        flush_latency_ns = 100000
        fua_latency_ns = 40000
        write_cache = false
        rotational = false
    "#;
    let p = DeviceProfile::from_toml(text).unwrap();
    assert_eq!(p.name, "my-ssd");
    assert_eq!(p.read_bw_bytes_per_sec, 3_000_000_000);
    assert_eq!(p.write_bw_bytes_per_sec, 2_000_000_000);
    assert_eq!((p.read_latency_ns, p.write_latency_ns), (80_000, 20_000));
    assert_eq!((p.queue_depth, p.parallelism), (256, 16));
    assert_eq!(p.max_request_bytes, 512 * KIB);
    assert_eq!((p.flush_latency_ns, p.fua_latency_ns), (100_000, 40_000));
    assert!(!p.write_cache && !p.rotational);
    // Defaults for write_cache / rotational; errors instead of panics.
    let short: String = text
        .lines()
        .filter(|l| !l.contains("write_cache") && !l.contains("rotational"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(DeviceProfile::from_toml(&short).unwrap().write_cache);
    assert!(
        DeviceProfile::from_toml(&text.replace("queue_depth = 256", "queue_depth = 0")).is_err()
    );
    assert!(DeviceProfile::from_toml(&text.replace("parallelism = 16", "")).is_err());
    assert!(
        DeviceProfile::from_toml(&text.replace("rotational = false", "rotational = true")).is_err()
    );
}

#[test]
fn runs_are_deterministic() {
    fn run() -> (u64, wbsim::model::block::DeviceStats) {
        let sim = Sim::new(7);
        let dev = BlockDevice::new(&sim, "d", DeviceProfile::builtin("qemu-nvme").unwrap());
        random_4k_writers(&dev, &sim, 20);
        sim.run().unwrap();
        (sim.now(), dev.stats())
    }
    assert_eq!(run(), run());
}

/// `n` tasks, each writing `per_task` sequential 1 MiB bios at QD1 to its own
/// region; returns each task's finish time.
fn qd1_streams(dev: &BlockDevice, sim: &Sim, n: u64, per_task: u64) -> Vec<Rc<Cell<u64>>> {
    (0..n)
        .map(|t| {
            let (d, s) = (dev.clone(), sim.clone());
            let done = Rc::new(Cell::new(0));
            let dn = done.clone();
            sim.spawn(format!("w{t}"), async move {
                for i in 0..per_task {
                    d.submit_bio_wait(Bio::write(t * 1024 * MIB + i * MIB, MIB))
                        .await;
                }
                dn.set(s.now());
            });
            done
        })
        .collect()
}

#[test]
fn two_writers_capped_by_the_device_share_its_bandwidth() {
    // 100 MiB/s: one 1 MiB write moves in 10 ms. Alone, a QD1 writer of
    // 1 MiB bios gets the whole pipe (latency 10 us, negligible).
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", profile(100 * MIB, 10 * USEC, 64, 8, MIB));
    let alone = qd1_streams(&dev, &sim, 1, 20);
    sim.run().unwrap();
    let t1 = alone[0].get();
    // 20 MiB at 100 MiB/s: 200 ms plus 20 latencies.
    assert_eq!(t1, 200 * MSEC + 20 * 10 * USEC);
    // Two such writers together ask for twice the device: each gets half,
    // so each takes about twice as long and they finish together.
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", profile(100 * MIB, 10 * USEC, 64, 8, MIB));
    let both = qd1_streams(&dev, &sim, 2, 20);
    sim.run().unwrap();
    let (a, b) = (both[0].get(), both[1].get());
    for t in [a, b] {
        assert!((385 * MSEC + 1..402 * MSEC).contains(&t), "{t}");
    }
    assert!(a.abs_diff(b) <= 11 * MSEC, "{a} {b}");
    let st = dev.stats();
    assert_eq!(st.write_bytes, 40 * MIB);
    // The pipe never idled: 40 MiB in about 400 ms.
    assert!(st.busy_ns >= 395 * MSEC, "{}", st.busy_ns);
}

#[test]
fn queue_depth_bound_device_makes_requests_wait_for_tags() {
    // 4 tags, 4 slots, 100 us latency: 16 tasks each submit one 4 KiB
    // write at t=0; 4 get tags, 12 sleep in blk_mq_get_tag.
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", profile(4_096_000_000, 100 * USEC, 4, 4, MIB));
    let done = Rc::new(RefCell::new(Vec::new()));
    for t in 0..16u64 {
        let (d, s, l) = (dev.clone(), sim.clone(), done.clone());
        sim.spawn(format!("w{t}"), async move {
            d.submit_bio_wait(Bio::write(t * MIB, 4 * KIB)).await;
            l.borrow_mut().push(s.now());
        });
    }
    sim.run_until(50 * USEC).unwrap();
    assert_eq!(dev.tags_in_use(), 4);
    assert_eq!(dev.tag_waiters(), 12);
    sim.run().unwrap();
    // Four waves of 4, each 100 us of latency plus 1 us of transfer per
    // request through the one pipe: the queue depth, not the device's
    // slots or pipe, sets the rate.
    let d = done.borrow();
    assert_eq!(d.len(), 16);
    let last = *d.iter().max().unwrap();
    assert!((400 * USEC..420 * USEC).contains(&last), "{last}");
    sim.run_until(0).unwrap();
    assert_eq!((dev.tags_in_use(), dev.tag_waiters()), (0, 0));
}

#[test]
fn service_time_variance_spreads_clat_around_the_mean() {
    // QD1 4 KiB writes, 100 us mean latency with a CV of 50%, 1 ns of
    // transfer: clat is the drawn latency.
    let mut p = profile(4_096_000_000_000, 100 * USEC, 32, 8, MIB);
    p.latency_cv_pct = 50;
    let run = |p: DeviceProfile| {
        let sim = Sim::new(3);
        let dev = BlockDevice::new(&sim, "d", p);
        let (d, s) = (dev.clone(), sim.clone());
        let h = sim.spawn("w", async move {
            let mut lat = Vec::new();
            for i in 0..4000u64 {
                let t0 = s.now();
                d.submit_bio_wait(Bio::write(i * MIB, 4 * KIB)).await;
                lat.push(s.now() - t0);
            }
            lat
        });
        sim.run().unwrap();
        h.result().unwrap()
    };
    let lat = run(p.clone());
    let n = lat.len() as f64;
    let mean = lat.iter().map(|&x| x as f64).sum::<f64>() / n;
    let sd = (lat.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
    // The known mean (100 us + 1 ns transfer) within 3%, the spread within
    // 10% of 50 us.
    assert!((mean - 100_001.0).abs() < 3_000.0, "mean {mean}");
    assert!((sd - 50_000.0).abs() < 5_000.0, "sd {sd}");
    let mut sorted = lat.clone();
    sorted.sort_unstable();
    let (p50, p99) = (sorted[2000], sorted[3960]);
    // A gamma with CV 0.5 (shape 4): p99 is about 2.5x the median.
    assert!(p99 > 2 * p50, "p50 {p50} p99 {p99}");
    // Same seed, same draws; no spread, every request the same.
    assert_eq!(run(p.clone()), lat);
    p.latency_cv_pct = 0;
    assert!(run(p).iter().all(|&x| x == 100 * USEC + 1));
}

#[test]
fn command_processor_serialises_commands() {
    // 10 us per command through one processor, 64 slots: 64 QD1 writers of
    // 4 KiB are bound at 100K IOPS, not 64 / latency.
    let mut p = profile(4_096_000_000_000, 20 * USEC, 1023, 64, MIB);
    p.cmd_ns = 10 * USEC;
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", p);
    random_4k_writers(&dev, &sim, 10);
    sim.run().unwrap();
    // 640 commands at 10 us each: 6.4 ms, plus the last one's latency.
    let t = sim.now();
    assert!((6_400 * USEC..6_440 * USEC).contains(&t), "{t}");
}

/// One task submitting `n` 4 KiB writes with `flags` without waiting for
/// them (as writeback does), far apart so that none merges.
fn async_writer(dev: &BlockDevice, sim: &Sim, n: u64, flags: BioFlags) {
    let d = dev.clone();
    sim.spawn("writeback", async move {
        for i in 0..n {
            let off = i * 1_000_003 * 4 * KIB;
            d.submit_bio(Bio::write(off, 4 * KIB).with_flags(flags), Box::new(|| {}))
                .await;
        }
    });
}

fn wbt_profile() -> DeviceProfile {
    DeviceProfile {
        wbt_lat_ns: 2 * MSEC,
        ..profile(4_096_000_000, 20 * USEC, 128, 32, MIB)
    }
}

#[test]
fn background_writeback_in_flight_is_held_to_the_wbt_limit() {
    let bg = BioFlags {
        background: true,
        ..BioFlags::default()
    };
    // 128 tags, but blk-wbt starts at depth min(16, 128) = 16: background
    // writeback may have (16 + 3) / 4 = 4 requests in flight, and with a
    // write cache the submitter waits for them all to drain.
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", wbt_profile());
    async_writer(&dev, &sim, 200, bg);
    sim.run().unwrap();
    let st = dev.stats();
    assert_eq!(st.writes, 200);
    assert_eq!(st.max_in_flight, 4, "{st:?}");
    let (w, _) = dev.wbt_stats().expect("wbt on");
    assert!(w.throttled > 40, "{w:?}");
    // Without blk-wbt the same submitter fills the tags.
    let sim = Sim::new(1);
    let dev = BlockDevice::new(
        &sim,
        "d",
        DeviceProfile {
            wbt_lat_ns: 0,
            ..wbt_profile()
        },
    );
    async_writer(&dev, &sim, 200, bg);
    sim.run().unwrap();
    assert!(dev.stats().max_in_flight >= 100, "{:?}", dev.stats());
}

#[test]
fn direct_io_writes_are_not_throttled_by_wbt() {
    let dio = BioFlags {
        sync: true,
        idle: true,
        ..BioFlags::default()
    };
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", wbt_profile());
    async_writer(&dev, &sim, 200, dio);
    sim.run().unwrap();
    assert!(dev.stats().max_in_flight >= 100, "{:?}", dev.stats());
    assert_eq!(dev.wbt_stats().expect("wbt on").0.throttled, 0);
}

#[test]
fn a_write_only_load_scales_the_wbt_depth_up() {
    let bg = BioFlags {
        background: true,
        ..BioFlags::default()
    };
    // Writes only, for about a second: every 100 ms window scales up
    // (LAT_UNKNOWN_WRITES) until the depth reaches 3/4 of the queue, 96,
    // whose background limit is (96 + 3) / 4 = 24.
    let sim = Sim::new(1);
    let dev = BlockDevice::new(
        &sim,
        "d",
        DeviceProfile {
            wbt_lat_ns: 2 * MSEC,
            ..profile(400_000_000, 200 * USEC, 128, 32, MIB)
        },
    );
    async_writer(&dev, &sim, 40_000, bg);
    sim.run().unwrap();
    let (w, limits) = dev.wbt_stats().expect("wbt on");
    assert_eq!(w.max_depth_seen, 96, "{w:?} {limits:?}");
    assert!(w.scale_ups >= 3, "{w:?}");
    let st = dev.stats();
    assert!(st.max_in_flight > 4 && st.max_in_flight <= 24, "{st:?}");
}

/// A virtio-like profile: 128 segments of at most 64 KiB per request, a
/// ring of 256 descriptors, 1 us of command processing per segment.
fn sg_profile() -> DeviceProfile {
    DeviceProfile {
        max_segments: 128,
        max_segment_bytes: 64 * KIB,
        write_seg_ns: USEC,
        read_seg_ns: USEC,
        ring_slots: 256,
        ..profile(1000 * MIB, 100 * USEC, 128, 32, 1280 * KIB)
    }
}

/// Time for `n` writes of `len` bytes made of runs of `seg` bytes, all
/// submitted at once; and the device's request count.
fn burst(n: u64, len: u64, seg: u64) -> (u64, u64) {
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", sg_profile());
    let done = Rc::new(Cell::new(0u64));
    for i in 0..n {
        let (d, s, done) = (dev.clone(), sim.clone(), done.clone());
        sim.spawn(format!("w{i}"), async move {
            d.submit_bio_wait(Bio::write(i * 16 * MIB, len).with_seg_bytes(seg))
                .await;
            done.set(done.get().max(s.now()));
        });
    }
    sim.run().unwrap();
    (done.get(), dev.stats().writes)
}

#[test]
fn a_bio_of_single_pages_is_split_at_max_segments() {
    // 1 MiB of 4 KiB pages is 256 segments: two requests of 128.
    let (_, reqs) = burst(1, MIB, 4 * KIB);
    assert_eq!(reqs, 2);
    // 1 MiB of 64 KiB folios is 16 segments: one request.
    let (_, reqs) = burst(1, MIB, 64 * KIB);
    assert_eq!(reqs, 1);
    // A 2 MiB folio still counts as 64 KiB segments (max_segment_size):
    // 1280 KiB (max_sectors) is 20 of them.
    let (_, reqs) = burst(1, 2 * MIB, 2 * MIB);
    assert_eq!(reqs, 2);
}

#[test]
fn requests_of_many_segments_are_serialised_by_the_descriptor_ring() {
    // 16 requests of 128 segments: 130 descriptors each, so one at a time
    // on a 256-descriptor ring: each pays its whole latency in turn.
    let (t_pages, reqs) = burst(8, MIB, 4 * KIB);
    assert_eq!(reqs, 16);
    // Per request: 128 us of segments + 100 us latency + 512 us transfer.
    assert_eq!(
        t_pages,
        16 * (128 * USEC + 100 * USEC + MIB / 2 * 1_000_000_000 / (1000 * MIB))
    );
    // 8 requests of 16 segments (64 KiB folios) fit the ring together:
    // latencies overlap and the pipe runs back to back.
    let (t_folios, reqs) = burst(8, MIB, 64 * KIB);
    assert_eq!(reqs, 8);
    assert!(t_folios < t_pages * 3 / 4, "{t_folios} vs {t_pages}");
    // Without the ring the page-made requests overlap too.
    let sim = Sim::new(1);
    let dev = BlockDevice::new(
        &sim,
        "d",
        DeviceProfile {
            ring_slots: 0,
            ..sg_profile()
        },
    );
    let d = dev.clone();
    let s = sim.clone();
    let h = sim.spawn("w", async move {
        d.submit_bio_wait(Bio::write(0, 8 * MIB)).await;
        s.now()
    });
    sim.run().unwrap();
    assert!(h.result().unwrap() < t_pages * 3 / 4);
}

#[test]
fn a_ring_that_cannot_hold_a_full_request_is_refused() {
    let p = DeviceProfile {
        ring_slots: 100,
        ..sg_profile()
    };
    let e = p.validate().unwrap_err().to_string();
    assert!(e.contains("ring_slots") && e.contains("130"), "{e}");
    let p = DeviceProfile {
        max_segments: 0,
        ..sg_profile()
    };
    assert!(p.validate().is_err());
    assert!(sg_profile().validate().is_ok());
}

#[test]
fn first_writes_to_a_sparse_backing_store_pay_once() {
    let sim = Sim::new(1);
    // 1000 MiB/s, 20 us: a 1 MiB write takes 1.02 ms at QD1; each new 4 KiB
    // block costs 1 us more in the serial stage, each request with new
    // blocks 10 us.
    let mut p = profile(1000 * MIB, 20 * USEC, 32, 8, 4 * MIB);
    p.first_write_rq_ns = 10 * USEC;
    p.first_write_block_ns = USEC;
    let dev = BlockDevice::new(&sim, "d", p);
    let (s, d) = (sim.clone(), dev.clone());
    let h = sim.spawn("dio", async move {
        let mut took = Vec::new();
        // New blocks; the same again; half old, half new.
        for off in [0, 0, MIB / 2] {
            let t0 = s.now();
            d.submit_bio_wait(Bio::write(off, MIB)).await;
            took.push(s.now() - t0);
        }
        took
    });
    sim.run().unwrap();
    let base = 20 * USEC + MSEC;
    assert_eq!(
        h.result().unwrap(),
        vec![
            base + 10 * USEC + 256 * USEC,
            base,
            base + 10 * USEC + 128 * USEC
        ]
    );
    assert_eq!(dev.stats().first_write_blocks, 384);
    // Reads and a device without the cost: nothing extra, nothing counted.
    let sim = Sim::new(1);
    let dev = BlockDevice::new(&sim, "d", profile(1000 * MIB, 20 * USEC, 32, 8, 4 * MIB));
    let (s, d) = (sim.clone(), dev.clone());
    let h = sim.spawn("dio", async move {
        d.submit_bio_wait(Bio::write(0, MIB)).await;
        s.now()
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(20 * USEC + MSEC));
    assert_eq!(dev.stats().first_write_blocks, 0);
}

/// Submits one 4 KiB write from a task on a 4-CPU machine to a device of
/// profile `p`. Returns the submitter's CPU and the CPU its completion ran
/// on (`Sched::this_cpu` inside `end_io`).
fn completion_cpu_of(p: DeviceProfile) -> (Option<usize>, Option<usize>) {
    use wbsim::model::kernel::sched::{CgroupId, Sched, SchedParams};
    let sim = Sim::new(1);
    let sched = Sched::new(&sim, SchedParams::for_cpus(4));
    let dev = BlockDevice::new(&sim, "d", p);
    dev.attach(&sched);
    let seen = Rc::new(Cell::new(None));
    let (s, d, seen2) = (sched.clone(), dev.clone(), seen.clone());
    let h = sched.spawn("submitter", CgroupId::ROOT, 0, async move {
        s.cpu(USEC).await;
        let me = s.current_cpu();
        let s2 = s.clone();
        let end: Box<dyn FnOnce()> = Box::new(move || seen2.set(Some(s2.this_cpu())));
        d.submit_bio(Bio::write(0, 4 * KIB), end).await;
        me
    });
    sim.run().unwrap();
    let me = h.result().unwrap();
    assert!(me.is_some());
    (me, seen.get().expect("the write completed"))
}

#[test]
fn a_per_cpu_device_completes_on_the_submitting_cpu() {
    let base = || profile(1000 * MIB, 20 * USEC, 32, 8, 4 * MIB);
    // NVMe-like: the completion's interrupt is the submitter's CPU.
    let (me, ran) = completion_cpu_of(DeviceProfile {
        percpu_completion: true,
        ..base()
    });
    assert_eq!(ran, me);
    // Otherwise the model leaves it open...
    assert_eq!(completion_cpu_of(base()).1, None);
    // ...unless the device's interrupts go to one CPU: everything there.
    let (_, ran) = completion_cpu_of(DeviceProfile {
        completion_cpu: Some(3),
        ..base()
    });
    assert_eq!(ran, Some(3));
}

/// A device with one request served at a time (1 ms each, 4 tags per
/// hardware queue) on a 2-CPU machine: a task bound to CPU 0 submits 8
/// writes at once, then a task bound to CPU 1 submits one. Returns when the
/// CPU 1 write completed, and the tags in use and sleepers right after it
/// was submitted.
fn second_cpu_write(nr_hw_queues: u32) -> (u64, u32, usize) {
    use wbsim::model::kernel::sched::{CgroupId, Sched, SchedParams};
    let sim = Sim::new(1);
    let sched = Sched::new(&sim, SchedParams::for_cpus(2));
    let dev = BlockDevice::new(
        &sim,
        "d",
        DeviceProfile {
            nr_hw_queues,
            ..profile(1_000_000 * MIB, MSEC, 4, 1, MIB)
        },
    );
    dev.attach(&sched);
    let (d, s) = (dev.clone(), sched.clone());
    let busy = sched.spawn("cpu0", CgroupId::ROOT, 0, async move {
        s.cpu(USEC).await;
        for i in 0..8u64 {
            d.submit_bio(Bio::write(i * MIB, 4 * KIB), Box::new(|| {}))
                .await;
        }
    });
    sched.bind_to_cpu(busy.id(), 0);
    let done = Rc::new(Cell::new(0));
    let seen = Rc::new(Cell::new((0, 0)));
    let (d, s, sm, dn, sn) = (
        dev.clone(),
        sched.clone(),
        sim.clone(),
        done.clone(),
        seen.clone(),
    );
    let other = sched.spawn("cpu1", CgroupId::ROOT, 0, async move {
        sm.sleep(10 * USEC).await;
        s.cpu(USEC).await;
        let sm2 = sm.clone();
        d.submit_bio(
            Bio::write(100 * MIB, 4 * KIB),
            Box::new(move || dn.set(sm2.now())),
        )
        .await;
        sn.set((d.tags_in_use(), d.tag_waiters()));
    });
    sched.bind_to_cpu(other.id(), 1);
    sim.run().unwrap();
    let (tags, waiters) = seen.get();
    (done.get(), tags, waiters)
}

#[test]
fn each_hardware_queue_has_its_own_tags_and_the_device_serves_them_in_turn() {
    // One queue: CPU 0's task holds the four tags and sleeps for a fifth;
    // the CPU 1 write sleeps behind it, gets the second tag freed (2 ms) and
    // is served behind CPU 0's five writes: done after 6 ms.
    let (t, _, _) = second_cpu_write(1);
    assert!((6 * MSEC..6 * MSEC + 100 * USEC).contains(&t), "{t}");
    // A queue per CPU: it takes a tag of its own queue at once (CPU 0's
    // four are in use and its task still sleeps for a fifth), and the
    // device, taking the queues in turn, serves it right after the request
    // in service: done after 2 ms.
    let (t, tags, waiters) = second_cpu_write(2);
    assert_eq!((tags, waiters), (5, 1));
    assert!((2 * MSEC..2 * MSEC + 100 * USEC).contains(&t), "{t}");
}
