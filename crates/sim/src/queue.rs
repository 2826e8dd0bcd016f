//! The pending-event queue: a 4-ary min-heap ordered by (time, sequence number).
//! The sequence number is the order of scheduling, so two events due at the same
//! instant fire in the order they were scheduled: deterministic tie-breaking.
//!
//! Why 4-ary and not `std::collections::BinaryHeap`: popping is the engine's
//! hottest path, and its cost is mostly a chain of dependent loads and
//! unpredictable branches, one per level. A 4-ary heap has half the levels, and
//! picking the least of four children is done on a single `u128` key, which
//! compiles to conditional moves rather than branches. Pop moves the hole to the
//! bottom first and then sifts the last entry up (Floyd's method), which saves a
//! comparison per level since that entry almost always belongs near the bottom.
//!
//! An entry is 16 bytes: the time, and one word holding a 32-bit sequence
//! number above the 32-bit index of the timer's slot (the executor never reuses
//! a slot while an entry names it, so no generation is needed here). Four
//! children then span 64 bytes instead of 96. The key `(time << 64) | word`
//! orders by time, then sequence; sequence numbers are unique among pending
//! entries, so the slot index never decides. When the 32-bit counter runs out
//! (every 4 billion events) the pending entries are renumbered in order, which
//! keeps their relative order and so the tie-breaking.
//!
//! A pop only marks the root as taken; the next push replaces it in one pass.

use crate::Time;

/// Children per node.
const D: usize = 4;

/// Sequence numbers run from 0 to this (exclusive) before a renumbering.
#[cfg(not(test))]
const SEQ_LIMIT: u64 = 1 << 32;
/// Small in tests, so that renumbering is exercised.
#[cfg(test)]
const SEQ_LIMIT: u64 = 1 << 15;

#[derive(Clone, Copy)]
pub(crate) struct Entry {
    time: Time,
    /// `seq << 32 | slot index`.
    word: u64,
}

impl Entry {
    /// The ordering key: time, then scheduling order.
    #[inline(always)]
    fn key(&self) -> u128 {
        (u128::from(self.time) << 64) | u128::from(self.word)
    }

    /// Due time, ns.
    #[inline(always)]
    pub fn time(&self) -> Time {
        self.time
    }

    /// Index of the timer slot this entry fires.
    #[inline(always)]
    pub fn slot(&self) -> u32 {
        self.word as u32
    }
}

pub(crate) struct EventQueue {
    heap: Vec<Entry>,
    next_seq: u64,
    /// The root was handed out by `pop_until` but is still in `heap`: the next
    /// push replaces it (one pass down and a short one up, instead of a pop and
    /// a push), and anything else removes it first. An event that schedules one
    /// event, the commonest case, thus costs one heap pass.
    top_taken: bool,
}

impl EventQueue {
    pub fn new() -> Self {
        EventQueue {
            heap: Vec::with_capacity(1024),
            next_seq: 0,
            top_taken: false,
        }
    }

    /// Adds an event for timer slot `slot`, due at `time`.
    #[inline]
    pub fn push(&mut self, time: Time, slot: u32) {
        if self.next_seq == SEQ_LIMIT {
            self.renumber();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let e = Entry {
            time,
            word: (seq << 32) | u64::from(slot),
        };
        if self.top_taken {
            self.top_taken = false;
            let hole = self.descend();
            self.sift_up(hole, e);
        } else {
            self.heap.push(e);
            self.sift_up(self.heap.len() - 1, e);
        }
    }

    /// Gives the pending entries sequence numbers 0.. in their current order
    /// (a sorted array is a valid heap).
    #[cold]
    fn renumber(&mut self) {
        self.settle();
        self.heap.sort_unstable_by_key(Entry::key);
        for (i, e) in self.heap.iter_mut().enumerate() {
            e.word = ((i as u64) << 32) | (e.word & 0xffff_ffff);
        }
        self.next_seq = self.heap.len() as u64;
        assert!(self.next_seq < SEQ_LIMIT, "more than 2^32 pending events");
    }

    /// Removes a root already handed out.
    #[inline]
    fn settle(&mut self) {
        if self.top_taken {
            self.top_taken = false;
            let last = self.heap.pop().expect("a taken top is in the heap");
            if !self.heap.is_empty() {
                let hole = self.descend();
                self.sift_up(hole, last);
            }
        }
    }

    /// Removes and returns the earliest event if it is due at or before
    /// `limit`; otherwise returns its time (`None` when empty).
    #[inline]
    pub fn pop_until(&mut self, limit: Time) -> Result<Entry, Option<Time>> {
        self.settle();
        match self.heap.first() {
            None => Err(None),
            Some(e) if e.time > limit => Err(Some(e.time)),
            Some(&e) => {
                self.top_taken = true;
                Ok(e)
            }
        }
    }

    /// Removes and returns the earliest event.
    #[cfg(test)]
    pub fn pop(&mut self) -> Option<Entry> {
        self.pop_until(Time::MAX).ok()
    }

    /// Moves the hole at the root down to a leaf, always following the least
    /// child (the root's entry is overwritten); returns the hole's position.
    #[inline]
    fn descend(&mut self) -> usize {
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
                return hole;
            }
        }
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
        self.heap.len() - usize::from(self.top_taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn k(i: u32) -> u32 {
        i
    }

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = EventQueue::new();
        q.push(10, k(0));
        q.push(5, k(1));
        q.push(10, k(2));
        q.push(5, k(3));
        let order: Vec<u32> = std::iter::from_fn(|| q.pop().map(|e| e.slot())).collect();
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
                let got = q.pop().map(|e| (e.time(), e.slot()));
                assert_eq!(got, want, "round {round}");
                if let Some((t, _)) = got {
                    now = t;
                }
                assert_eq!(q.len(), reference.len());
            }
        }
        assert!(pushed > 20_000);
    }

    /// The classic hold model (pop one, push one later) for several times
    /// `SEQ_LIMIT` events, with ties: renumbering keeps the order exact.
    #[test]
    fn order_survives_sequence_renumbering() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(9);
        let mut q = EventQueue::new();
        let mut reference = std::collections::BTreeSet::new(); // (time, push order)
        let mut pushed = 0u32;
        for _ in 0..500 {
            let t = rng.random_range(0..20);
            q.push(t, pushed);
            reference.insert((t, pushed));
            pushed += 1;
        }
        for _ in 0..4 * SEQ_LIMIT {
            let want = reference.pop_first().unwrap();
            let got = q.pop().map(|e| (e.time(), e.slot())).unwrap();
            assert_eq!(got, want);
            let t = got.0 + rng.random_range(0..20);
            q.push(t, pushed);
            reference.insert((t, pushed));
            pushed += 1;
        }
        assert!(u64::from(pushed) > 4 * SEQ_LIMIT);
    }
}
