//! The pending-event queue: a binary min-heap ordered by (time, sequence number).
//! The sequence number is the order of scheduling, so two events due at the same
//! instant fire in the order they were scheduled: deterministic tie-breaking.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::slab::Key;
use crate::Time;

#[derive(Clone, Copy)]
pub(crate) struct Entry {
    pub time: Time,
    pub seq: u64,
    pub timer: Key,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed so that `BinaryHeap` (a max-heap) pops the earliest entry.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .cmp(&self.time)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    next_seq: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            next_seq: 0,
        }
    }

    pub fn push(&mut self, time: Time, timer: Key) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { time, seq, timer });
    }

    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.time)
    }

    pub fn pop(&mut self) -> Option<Entry> {
        self.heap.pop()
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = EventQueue::new();
        let k = |i| Key { idx: i, gen: 0 };
        q.push(10, k(0));
        q.push(5, k(1));
        q.push(10, k(2));
        q.push(5, k(3));
        let order: Vec<u32> = std::iter::from_fn(|| q.pop().map(|e| e.timer.idx)).collect();
        assert_eq!(order, vec![1, 3, 0, 2]);
    }
}
