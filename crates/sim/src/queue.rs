//! The pending-event queue: a 4-ary min-heap ordered by (time, sequence number).
//! The sequence number is the order of scheduling, so two events due at the same
//! instant fire in the order they were scheduled: deterministic tie-breaking.
//!
//! Why 4-ary and not `std::collections::BinaryHeap`: popping is the engine's
//! hottest path, and its cost is mostly unpredictable branches, one per level.
//! A 4-ary heap has half the levels, and picking the least of four children is
//! done on a single `u128` key ((time << 64) | seq), which compiles to
//! conditional moves rather than branches. Pop moves the hole to the bottom
//! first and then sifts the last entry up (Floyd's method), which saves a
//! comparison per level since that entry almost always belongs near the bottom.

use crate::slab::Key;
use crate::Time;

/// Children per node.
const D: usize = 4;

#[derive(Clone, Copy)]
pub(crate) struct Entry {
    pub time: Time,
    pub seq: u64,
    pub timer: Key,
}

impl Entry {
    /// The ordering key: time, then scheduling order.
    #[inline(always)]
    fn key(&self) -> u128 {
        (u128::from(self.time) << 64) | u128::from(self.seq)
    }
}

pub(crate) struct EventQueue {
    heap: Vec<Entry>,
    next_seq: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        EventQueue {
            heap: Vec::with_capacity(1024),
            next_seq: 0,
        }
    }

    pub fn push(&mut self, time: Time, timer: Key) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let e = Entry { time, seq, timer };
        self.heap.push(e);
        self.sift_up(self.heap.len() - 1, e);
    }

    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.first().map(|e| e.time)
    }

    pub fn pop(&mut self) -> Option<Entry> {
        let last = self.heap.pop()?;
        if self.heap.is_empty() {
            return Some(last);
        }
        let top = self.heap[0];
        // Move the hole from the root to a leaf, always following the least child.
        let h = &mut self.heap[..];
        let n = h.len();
        let mut hole = 0;
        loop {
            let first = D * hole + 1;
            if first + D <= n {
                // All four children exist: branch-free selection of the least.
                let c = &h[first..first + D];
                let (k0, k1, k2, k3) = (c[0].key(), c[1].key(), c[2].key(), c[3].key());
                let (i01, k01) = if k1 < k0 { (1, k1) } else { (0, k0) };
                let (i23, k23) = if k3 < k2 { (3, k3) } else { (2, k2) };
                let i = if k23 < k01 { i23 } else { i01 };
                h[hole] = c[i];
                hole = first + i;
            } else if first < n {
                let mut best = first;
                for j in first + 1..n {
                    if h[j].key() < h[best].key() {
                        best = j;
                    }
                }
                h[hole] = h[best];
                hole = best;
            } else {
                break;
            }
        }
        // Put the old last entry in the hole and let it rise to its place.
        self.sift_up(hole, last);
        Some(top)
    }

    /// Places `e` at `pos` or above, moving greater ancestors down.
    #[inline]
    fn sift_up(&mut self, mut pos: usize, e: Entry) {
        let key = e.key();
        let h = &mut self.heap[..];
        while pos > 0 {
            let parent = (pos - 1) / D;
            if h[parent].key() <= key {
                break;
            }
            h[pos] = h[parent];
            pos = parent;
        }
        h[pos] = e;
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn k(i: u32) -> Key {
        Key { idx: i, gen: 0 }
    }

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = EventQueue::new();
        q.push(10, k(0));
        q.push(5, k(1));
        q.push(10, k(2));
        q.push(5, k(3));
        let order: Vec<u32> = std::iter::from_fn(|| q.pop().map(|e| e.timer.idx)).collect();
        assert_eq!(order, vec![1, 3, 0, 2]);
    }

    /// Against an ordered reference: random times with many ties, pops
    /// interleaved with pushes (as a run does), sizes from empty to a few thousand.
    #[test]
    fn matches_ordered_reference() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let mut q = EventQueue::new();
        let mut reference = std::collections::BTreeSet::new(); // (time, push order)
        let mut pushed = 0u32;
        let mut now = 0;
        for round in 0..20_000 {
            let grow = round < 10_000;
            if grow || rng.random_bool(0.3) {
                for _ in 0..rng.random_range(1..4) {
                    let t = now + rng.random_range(0..50);
                    q.push(t, k(pushed));
                    reference.insert((t, pushed));
                    pushed += 1;
                }
            }
            if !grow || rng.random_bool(0.5) {
                let want = reference.pop_first();
                let got = q.pop().map(|e| (e.time, e.timer.idx));
                assert_eq!(got, want, "round {round}");
                if let Some((t, _)) = got {
                    now = t;
                }
                assert_eq!(q.len(), reference.len());
            }
        }
        assert!(pushed > 20_000);
    }
}
