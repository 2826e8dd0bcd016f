//! The timer table: the callback of every timer whose queue entry has not
//! popped yet, by slot, with a generation per slot so that a stale
//! [`TimerId`](crate::TimerId) (of a fired timer whose slot was reused) is
//! recognised.
//!
//! A slot is taken from `insert` until its queue entry pops (`fire`), even
//! when the timer is cancelled in between (the slot then holds no callback):
//! a queue entry therefore never names a reused slot and carries no
//! generation. Free slots form a LIFO list threaded through the slots, so
//! inserting and firing cost a few loads and stores and no allocation once
//! the table has grown to the peak number of pending timers.

use crate::slab::Key;
use crate::smallfn::SmallFn;

/// End of the free list.
const NIL: u32 = u32::MAX;

/// 32 bytes, aligned to 32: a slot never straddles two cache lines, so the
/// one random access per event is one line, and one prefetch covers it.
#[repr(align(32))]
struct Slot {
    /// Bumped each time the slot is freed.
    gen: u32,
    /// Next free slot, while this one is free.
    next_free: u32,
    /// The callback of a pending timer (`None` once cancelled, or free).
    f: Option<SmallFn>,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 32);

pub(crate) struct TimerTable {
    slots: Vec<Slot>,
    free: u32,
    /// Timers pending and not cancelled.
    live: usize,
}

impl TimerTable {
    pub fn new() -> Self {
        TimerTable {
            slots: Vec::new(),
            free: NIL,
            live: 0,
        }
    }

    /// Timers pending and not cancelled.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Stores a pending timer's callback; returns its slot and generation.
    #[inline]
    pub fn insert(&mut self, f: SmallFn) -> Key {
        self.live += 1;
        let idx = self.free;
        if let Some(slot) = self.slots.get_mut(idx as usize) {
            self.free = slot.next_free;
            let old = slot.f.replace(f);
            debug_assert!(old.is_none());
            // A free slot holds no callback: nothing to drop.
            std::mem::forget(old);
            Key { idx, gen: slot.gen }
        } else {
            self.push(f)
        }
    }

    #[cold]
    fn push(&mut self, f: SmallFn) -> Key {
        let idx = u32::try_from(self.slots.len())
            .ok()
            .filter(|&i| i != NIL)
            .expect("more than 2^32 - 1 pending timers");
        self.slots.push(Slot {
            gen: 0,
            next_free: NIL,
            f: Some(f),
        });
        Key { idx, gen: 0 }
    }

    /// Asks the CPU to start loading slot `idx` (whose timer fires soon) into
    /// the cache. With many timers pending the table outgrows the caches and
    /// the slot of each firing timer is a random access: started one event
    /// ahead, its latency overlaps the current event's work.
    #[inline(always)]
    pub fn prefetch(&self, idx: u32) {
        if let Some(slot) = self.slots.get(idx as usize) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `_mm_prefetch` needs SSE, part of the x86-64 baseline;
            // a prefetch is only a hint and never faults (the address is
            // anyway a live element here).
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>((slot as *const Slot).cast());
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = slot;
        }
    }

    /// If slot `idx` holds a waker of one of this executor's tasks, asks the
    /// CPU to start loading that task's cell: called one event ahead (once
    /// the slot itself has arrived, see [`TimerTable::prefetch`]), so that
    /// the wake and the poll that follow find it in the cache.
    #[inline(always)]
    pub fn prefetch_woken(&self, idx: u32) {
        if let Some(Slot { f: Some(f), .. }) = self.slots.get(idx as usize) {
            if let Some(w) = f.waker_ref() {
                crate::task::prefetch_cell(w);
            }
        }
    }

    /// The queue entry of slot `idx` popped: frees the slot and returns the
    /// callback, unless the timer was cancelled.
    #[inline]
    pub fn fire(&mut self, idx: u32) -> Option<SmallFn> {
        let slot = &mut self.slots[idx as usize];
        slot.gen = slot.gen.wrapping_add(1);
        slot.next_free = self.free;
        self.free = idx;
        let f = slot.f.take();
        self.live -= usize::from(f.is_some());
        f
    }

    /// Cancels the timer `key` if it is still pending, returning its callback
    /// (to be dropped by the caller). The slot stays taken until it fires.
    pub fn cancel(&mut self, key: Key) -> Option<SmallFn> {
        let slot = self.slots.get_mut(key.idx as usize)?;
        if slot.gen != key.gen {
            return None;
        }
        let f = slot.f.take();
        self.live -= usize::from(f.is_some());
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn fire_cancel_and_stale_keys() {
        let hits = Rc::new(Cell::new(0));
        let mut t = TimerTable::new();
        let h = hits.clone();
        let a = t.insert(SmallFn::new(move || h.set(h.get() + 1)));
        let h = hits.clone();
        let b = t.insert(SmallFn::new(move || h.set(h.get() + 10)));
        assert_eq!(t.live(), 2);
        // Cancelled: the slot stays taken until its entry pops.
        assert!(t.cancel(b).is_some());
        assert!(t.cancel(b).is_none());
        assert_eq!(t.live(), 1);
        let h = hits.clone();
        let c = t.insert(SmallFn::new(move || h.set(h.get() + 100)));
        assert_ne!(c.idx, b.idx);
        t.fire(a.idx).expect("pending").call();
        assert!(t.fire(b.idx).is_none());
        assert_eq!(t.live(), 1);
        // The freed slots are reused with a new generation.
        let d = t.insert(SmallFn::new(|| ()));
        assert_eq!(d.idx, b.idx);
        assert_ne!(d.gen, b.gen);
        assert!(t.cancel(b).is_none());
        assert!(t.cancel(a).is_none());
        t.fire(c.idx).expect("pending").call();
        assert_eq!(hits.get(), 101);
        assert_eq!(t.live(), 1);
        assert!(t.cancel(d).is_some());
        assert_eq!(t.live(), 0);
        assert_eq!(Rc::strong_count(&hits), 1);
    }
}
