//! The pending-event queue: a radix queue on the `u64` nanosecond time (a
//! hierarchical timing wheel with 64 buckets per level), popping events in
//! order of time and, at one instant, in the order they were pushed (FIFO):
//! deterministic tie-breaking without a sequence number.
//!
//! # Layout
//!
//! Every pending event is due at or after `base` (the time of the last event
//! popped, or the start of the last bucket split; the executor never schedules
//! before `now`, and `base <= now` whenever it schedules). Time is read as
//! eleven 6-bit digits. An event due at `t` lives at the *level* of the
//! highest digit where `t` differs from `base`, in the *bucket* given by that
//! digit of `t`:
//!
//! - level 0 holds events in `base`'s 64 ns block, one bucket per nanosecond:
//!   every event in a bucket is due at the same instant, so a bucket stores
//!   only timer slots, in push order;
//! - level `L >= 1` holds events in `base`'s block of `64^(L+1)` ns but another
//!   sub-block of `64^L` ns; its buckets store `(time, slot)`. At levels 1 to
//!   5 the digits above `L` are `base`'s and digit `L` is the bucket's, so an
//!   entry keeps only the `6 L <= 30` low bits of the time, in a `u32`: eight
//!   bytes an entry instead of sixteen, which halves the memory the queue
//!   streams through (PHOLD's events all pass through level 1).
//!
//! A 64-bit mask per level marks the non-empty buckets, so the earliest one is
//! a `trailing_zeros`. Popping takes the front of the lowest non-empty level-0
//! bucket. When level 0 is empty, the lowest non-empty bucket of the lowest
//! non-empty level is *split*: `base` moves to that bucket's start and its
//! events are pushed again, in their order, into the (then empty) lower
//! levels. An event is thus moved at most once per level, and in practice
//! once or twice (PHOLD's ~1 us delays land at level 1): the cost per event
//! does not grow with the number pending, unlike a heap's `log n` chain of
//! dependent loads, and every move is a sequential append.
//!
//! # Why the order is FIFO among ties
//!
//! All events due at one instant sit in one bucket (the bucket depends only on
//! the time and `base`, and moving `base` as above never separates equal
//! times). Pushes append; a split appends a bucket's events, in order, into
//! buckets that are empty (it only happens when every lower level is empty).
//! So within a bucket, events with equal times stay in push order, and level-0
//! buckets are consumed from the front.

use crate::Time;

/// Bits per digit (a level's bucket index).
const BITS: u32 = 6;
/// Buckets per level.
const SLOTS: usize = 1 << BITS;
/// Levels: enough 6-bit digits for 64-bit times (the top one has 4 bits).
const LEVELS: usize = 64_usize.div_ceil(BITS as usize);

/// Levels 1..=MID store [`Low`] entries (their low digits fit in 30 bits).
const MID: usize = 5;

/// An entry at level `L` in 1..=[`MID`]: the time's `6 L` low bits (the rest
/// is `base`'s, and the bucket's digit) and the timer slot.
#[derive(Clone, Copy)]
struct Low {
    low: u32,
    slot: u32,
}

/// No slot (in [`Next::Due`]'s hint).
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// A popped event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    time: Time,
    slot: u32,
}

impl Entry {
    /// Due time, ns.
    #[inline(always)]
    pub fn time(&self) -> Time {
        self.time
    }

    /// Index of the timer slot this entry fires.
    #[inline(always)]
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

/// What [`EventQueue::pop_until`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// The earliest event, removed from the queue, and the slot of the event
    /// after it at level 0 ([`NO_SLOT`] if none): probably the next to pop,
    /// a hint for prefetching.
    Due(Entry, u32),
    /// Events are pending, none at or before the limit.
    Later,
    /// Nothing is pending.
    Empty,
}

pub(crate) struct EventQueue {
    /// No pending event is due before this.
    base: Time,
    /// Level 0: timer slots by nanosecond of `base`'s 64 ns block.
    l0: Box<[Vec<u32>; SLOTS]>,
    /// Entries of the earliest level-0 bucket already popped (only the
    /// earliest bucket is ever popped from, so one cursor does).
    l0_head: usize,
    /// Levels 1..=MID: level `L`'s bucket `i` is `mid[L - 1][i]`.
    mid: Box<[[Vec<Low>; SLOTS]; MID]>,
    /// Levels MID+1..: level `L`'s bucket `i` is `high[L - 1 - MID][i]`.
    high: Box<[[Vec<Entry>; SLOTS]; LEVELS - 1 - MID]>,
    /// Per level, bit `i` set when bucket `i` is non-empty.
    masks: [u64; LEVELS],
    len: usize,
}

impl EventQueue {
    pub fn new() -> Self {
        EventQueue {
            base: 0,
            l0: Box::new(std::array::from_fn(|_| Vec::new())),
            l0_head: 0,
            mid: Box::new(std::array::from_fn(|_| std::array::from_fn(|_| Vec::new()))),
            high: Box::new(std::array::from_fn(|_| std::array::from_fn(|_| Vec::new()))),
            masks: [0; LEVELS],
            len: 0,
        }
    }

    /// Adds an event for timer slot `slot`, due at `time` (not before the
    /// last event popped: the executor never schedules in the past).
    #[inline(always)]
    pub fn push(&mut self, time: Time, slot: u32) {
        assert!(time >= self.base, "event scheduled before the current time");
        self.len += 1;
        self.place(time, slot);
    }

    /// Files an event (due at or after `base`) in its bucket.
    #[inline(always)]
    fn place(&mut self, time: Time, slot: u32) {
        let diff = time ^ self.base;
        if diff < SLOTS as u64 {
            let i = (time % SLOTS as u64) as usize;
            self.l0[i].push(slot);
            self.masks[0] |= 1 << i;
        } else {
            let shift = (63 - diff.leading_zeros()) / BITS * BITS;
            let i = ((time >> shift) % SLOTS as u64) as usize;
            let level = (shift / BITS) as usize;
            if level <= MID {
                let low = (time & ((1 << shift) - 1)) as u32;
                self.mid[level - 1][i].push(Low { low, slot });
            } else {
                self.high[level - 1 - MID][i].push(Entry { time, slot });
            }
            self.masks[level] |= 1 << i;
        }
    }

    /// Removes and returns the earliest event if it is due at or before
    /// `limit`.
    #[inline]
    pub fn pop_until(&mut self, limit: Time) -> Next {
        loop {
            let m0 = self.masks[0];
            if m0 != 0 {
                let i = m0.trailing_zeros() as usize;
                let time = (self.base & !(SLOTS as u64 - 1)) | i as u64;
                if time > limit {
                    return Next::Later;
                }
                let bucket = &mut self.l0[i];
                let slot = bucket[self.l0_head];
                self.l0_head += 1;
                let next = if let Some(&next) = bucket.get(self.l0_head) {
                    next
                } else {
                    bucket.clear();
                    self.l0_head = 0;
                    self.masks[0] &= !(1 << i);
                    let m = self.masks[0];
                    if m == 0 {
                        NO_SLOT
                    } else {
                        self.l0[m.trailing_zeros() as usize][0]
                    }
                };
                self.base = time;
                self.len -= 1;
                return Next::Due(Entry { time, slot }, next);
            }
            if !self.split(limit) {
                return if self.len == 0 {
                    Next::Empty
                } else {
                    Next::Later
                };
            }
        }
    }

    /// Level 0 is empty: moves the earliest bucket of the lowest non-empty
    /// level down a level or more, unless that bucket starts after `limit`
    /// (then `base` stays, so events may still be pushed up to `limit`).
    /// Returns whether it moved anything.
    #[cold]
    #[inline(never)]
    fn split(&mut self, limit: Time) -> bool {
        let Some(level) = (1..LEVELS).find(|&l| self.masks[l] != 0) else {
            return false;
        };
        let i = self.masks[level].trailing_zeros() as u64;
        let shift = level as u32 * BITS;
        // `base` with this level's digit set to `i` and the lower ones cleared.
        let above = (!0u64).checked_shl(shift + BITS).unwrap_or(0);
        let start = (self.base & above) | (i << shift);
        if start > limit {
            return false;
        }
        self.base = start;
        self.masks[level] &= !(1 << i);
        if level <= MID {
            let mut bucket = std::mem::take(&mut self.mid[level - 1][i as usize]);
            if level == 1 {
                // The common case: everything lands in level 0.
                let mut mask = 0;
                for e in &bucket {
                    let j = (e.low % SLOTS as u32) as usize;
                    self.l0[j].push(e.slot);
                    mask |= 1 << j;
                }
                self.masks[0] = mask;
            } else {
                for e in &bucket {
                    self.place(start | u64::from(e.low), e.slot);
                }
            }
            bucket.clear();
            // Keep the allocation: this bucket fills again as time moves on.
            self.mid[level - 1][i as usize] = bucket;
        } else {
            let mut bucket = std::mem::take(&mut self.high[level - 1 - MID][i as usize]);
            for e in &bucket {
                self.place(e.time, e.slot);
            }
            bucket.clear();
            self.high[level - 1 - MID][i as usize] = bucket;
        }
        true
    }

    /// Removes and returns the earliest event.
    #[cfg(test)]
    pub fn pop(&mut self) -> Option<Entry> {
        match self.pop_until(Time::MAX) {
            Next::Due(e, _) => Some(e),
            _ => None,
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// The reference: `std`'s binary heap on (time, push order), the order the
    /// engine promises.
    #[derive(Default)]
    struct Reference {
        heap: BinaryHeap<Reverse<(Time, u64, u32)>>,
        pushed: u64,
    }

    impl Reference {
        fn push(&mut self, t: Time, slot: u32) {
            self.heap.push(Reverse((t, self.pushed, slot)));
            self.pushed += 1;
        }
        fn pop_until(&mut self, limit: Time) -> Next {
            match self.heap.peek() {
                None => Next::Empty,
                Some(Reverse((t, _, _))) if *t > limit => Next::Later,
                Some(_) => {
                    let Reverse((time, _, slot)) = self.heap.pop().unwrap();
                    Next::Due(Entry { time, slot }, NO_SLOT)
                }
            }
        }
    }

    /// The popped event without the prefetch hint (which the reference has
    /// not).
    fn without_hint(n: Next) -> Next {
        match n {
            Next::Due(e, _) => Next::Due(e, NO_SLOT),
            other => other,
        }
    }

    /// With no push in between, the hint names the slot that pops next
    /// whenever that one is already at level 0.
    #[test]
    fn prefetch_hint_names_the_next_event() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let mut q = EventQueue::new();
        for slot in 0..2000 {
            q.push(rng.random_range(0..5000), slot);
        }
        let mut hint = NO_SLOT;
        let mut exact = 0;
        while let Next::Due(e, next) = q.pop_until(Time::MAX) {
            if hint != NO_SLOT {
                assert_eq!(e.slot(), hint);
                exact += 1;
            }
            hint = next;
        }
        assert!(exact > 1900, "{exact}");
    }

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = EventQueue::new();
        q.push(10, 0);
        q.push(5, 1);
        q.push(10, 2);
        q.push(5, 3);
        q.push(1 << 40, 4);
        q.push(5, 5);
        let order: Vec<u32> = std::iter::from_fn(|| q.pop().map(|e| e.slot())).collect();
        assert_eq!(order, vec![1, 3, 5, 0, 2, 4]);
        assert_eq!(q.pop_until(Time::MAX), Next::Empty);
    }

    /// Ties at one far instant pushed at different times (so they first sit
    /// at different levels relative to `base`) and events pushed at the
    /// instant being popped stay FIFO.
    #[test]
    fn ties_stay_fifo_across_splits() {
        let mut q = EventQueue::new();
        let far = 5 * 64 * 64 * 64 + 7;
        q.push(far, 0);
        q.push(100, 1);
        q.push(far, 2);
        assert_eq!(q.pop().map(|e| (e.time(), e.slot())), Some((100, 1)));
        // `base` is now 100: `far` is still at the same level, pushed behind.
        q.push(far, 3);
        q.push(far - 64 * 64, 4);
        assert_eq!(q.pop().map(|e| (e.time(), e.slot())), Some((far - 4096, 4)));
        // `base` moved into `far`'s 4096 ns block: a new tie goes elsewhere
        // first, then the split brings the older ones down in order.
        q.push(far, 5);
        assert_eq!(q.pop().map(|e| e.slot()), Some(0));
        q.push(far, 6); // at the instant being popped: after the others
        let rest: Vec<u32> = std::iter::from_fn(|| q.pop().map(|e| e.slot())).collect();
        assert_eq!(rest, vec![2, 3, 5, 6]);
    }

    #[test]
    fn extreme_times() {
        let mut q = EventQueue::new();
        q.push(Time::MAX, 0);
        q.push(0, 1);
        q.push(Time::MAX - 1, 2);
        q.push(Time::MAX, 3);
        q.push(1 << 63, 4);
        let got: Vec<(Time, u32)> =
            std::iter::from_fn(|| q.pop().map(|e| (e.time(), e.slot()))).collect();
        assert_eq!(
            got,
            vec![
                (0, 1),
                (1 << 63, 4),
                (Time::MAX - 1, 2),
                (Time::MAX, 0),
                (Time::MAX, 3)
            ]
        );
    }

    /// A limit before the next bucket leaves `base` alone, so events can
    /// still be scheduled between the limit and that bucket.
    #[test]
    fn limit_does_not_move_base_past_it() {
        let mut q = EventQueue::new();
        q.push(1_000_000, 0);
        assert_eq!(q.pop_until(500), Next::Later);
        q.push(600, 1); // what run_until(500) then a schedule at 600 does
        assert_eq!(q.pop_until(599), Next::Later);
        assert_eq!(
            q.pop_until(600),
            Next::Due(Entry { time: 600, slot: 1 }, NO_SLOT)
        );
        assert_eq!(q.pop_until(999_999), Next::Later);
        assert_eq!(
            q.pop_until(Time::MAX),
            Next::Due(
                Entry {
                    time: 1_000_000,
                    slot: 0
                },
                NO_SLOT
            )
        );
        assert_eq!(q.len(), 0);
    }

    #[test]
    #[should_panic(expected = "before the current time")]
    fn pushing_into_the_past_is_refused() {
        let mut q = EventQueue::new();
        q.push(100, 0);
        q.pop();
        q.push(99, 1);
    }

    /// Against the reference heap: random delays over several scales (many
    /// ties, level-0 to level-5 distances), pops interleaved with pushes as a
    /// run does, limits like `run_until`'s, the size growing to thousands and
    /// draining to empty (so buckets empty and refill) several times.
    #[test]
    // Safe code, hundreds of thousands of operations: too slow under Miri.
    #[cfg_attr(miri, ignore)]
    fn matches_reference_heap() {
        for seed in 0..8 {
            let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            let mut q = EventQueue::new();
            let mut r = Reference::default();
            let mut now: Time = rng.random_range(0..1 << 40);
            let mut slot = 0u32;
            for round in 0..60_000 {
                let phase = (round / 5_000) % 3; // grow, steady, drain
                let pushes = match phase {
                    0 => rng.random_range(1..4),
                    1 => rng.random_range(0..3),
                    _ => usize::from(rng.random_bool(0.1)),
                };
                for _ in 0..pushes {
                    let scale = [4, 64, 1000, 5000, 300_000, 1 << 31][rng.random_range(0..6)];
                    let t = now + rng.random_range(0..scale);
                    q.push(t, slot);
                    r.push(t, slot);
                    slot += 1;
                }
                let limit = if rng.random_bool(0.05) {
                    now + rng.random_range(0..2000)
                } else {
                    Time::MAX
                };
                let want = r.pop_until(limit);
                let got = without_hint(q.pop_until(limit));
                assert_eq!(got, want, "seed {seed} round {round}");
                match got {
                    Next::Due(e, _) => now = e.time(),
                    // What run_until does: time moves to the limit.
                    Next::Later => now = now.max(limit),
                    Next::Empty => {}
                }
                assert_eq!(q.len(), r.heap.len());
            }
            while let Next::Due(e, _) = r.pop_until(Time::MAX) {
                assert_eq!(q.pop(), Some(e));
            }
            assert_eq!(q.pop_until(Time::MAX), Next::Empty);
        }
    }

    /// The classic hold model (pop one, push one a little later, with ties),
    /// a long run: buckets are reused many times over and times cross many
    /// block boundaries at every level up to 4 (delays on a 1 us grid, so
    /// ties are common).
    #[test]
    // Safe code, hundreds of thousands of operations: too slow under Miri.
    #[cfg_attr(miri, ignore)]
    fn hold_model_matches_reference() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(9);
        let mut q = EventQueue::new();
        let mut r = Reference::default();
        let mut slot = 0;
        for _ in 0..1000 {
            let t = rng.random_range(0..200) * 1000;
            q.push(t, slot);
            r.push(t, slot);
            slot += 1;
        }
        for _ in 0..300_000 {
            let want = r.pop_until(Time::MAX);
            let got = without_hint(q.pop_until(Time::MAX));
            assert_eq!(got, want);
            let Next::Due(e, _) = got else { unreachable!() };
            let d = if rng.random_bool(0.2) {
                rng.random_range(0..3)
            } else {
                rng.random_range(0..200) * 1000
            };
            let t = e.time() + d;
            q.push(t, slot);
            r.push(t, slot);
            slot += 1;
        }
        assert!(q.base > 64 * 64 * 64 * 64);
    }
}
