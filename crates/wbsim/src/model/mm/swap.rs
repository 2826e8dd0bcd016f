//! mm/swap.c's LRU-add batching: a folio new to the page cache
//! (`filemap_add_folio` -> `folio_add_lru`) is not put on its LRU list at
//! once but into the CPU's `cpu_fbatches.lru_add` folio_batch; the batch is
//! moved to the LRU lists (`folio_batch_move_lru`: the lruvec's `lru_lock`
//! taken with interrupts off, each folio added to its list) when it is full
//! (FOLIO_BATCH_SIZE folios) or when the folio added is large
//! (`folio_may_be_lru_cached` is false for large folios, so they drain the
//! batch at once). The task that fills the batch pays for all of it, so one
//! order-0 buffered write in 31 costs more: a tail from a mechanism.
//!
//! Left out: contention on `lru_lock` (only its uncontended cost is paid),
//! `lru_add_drain` from other paths (reclaim, `lru_add_drain_all`), the
//! memcg split of lruvecs, the other batches (activate, deactivate,
//! rotate). A task's CPU is its slot (as [`Mm::bdp_cpu_mut`] fixes it: the
//! model's scheduler does not place tasks on CPUs).

use sim::Time;

use super::state::Mm;

/// `FOLIO_BATCH_SIZE` (include/linux/folio_batch.h, formerly PAGEVEC_SIZE):
/// 31 folios per batch.
pub const FOLIO_BATCH_SIZE: u64 = 31;
/// CPU per folio moved to an LRU list by `folio_batch_move_lru`
/// (`lru_add`: flags, `lruvec_add_folio`, the LRU size counters, the
/// folio reference drop), ns: 110 ns. MEASURED on this project's VM
/// (2026-11-28, writer pinned to one vCPU, the other mostly idle): 65,536
/// 4 KiB pwrite(2)s into a preallocated 256 MiB xfs file, timed one by one
/// with CLOCK_MONOTONIC, sequential and random: the slow writes come every
/// 31st (1,864 and 1,867 gaps of 31) and take 5.72 and 5.93 us (medians)
/// against 2.25 and 2.41 us for all writes, so a drain costs 3.5 us; less
/// [`LRU_DRAIN_NS`], over 31 folios, 110 ns each. (Was an 80 ns estimate.)
pub const LRU_ADD_FOLIO_NS: Time = 110;
/// CPU of one drain besides its folios (`folio_lruvec_relock_irqsave`:
/// lruvec lookup, `lru_lock` taken and released with interrupts saved),
/// ns: 50 ns. Estimate (an uncontended spinlock with irqsave), not measured.
pub const LRU_DRAIN_NS: Time = 50;

/// `folio_add_lru` for `small` new order-0 folios then `large` new large
/// folios, from the current task: returns the CPU the drains cost, ns (the
/// caller pays it). Small folios fill the CPU's batch and drain it every
/// FOLIO_BATCH_SIZE; each large folio drains the batch with itself in it.
/// Within one call the order-0 folios are taken first (a write or read
/// creates folios of one kind in practice).
pub fn folio_add_lru(mm: &Mm, small: u64, large: u64) -> Time {
    if small == 0 && large == 0 {
        return 0;
    }
    let mut pending = mm.lru_add_pending_mut();
    let mut cost = 0;
    let total = *pending + small;
    let drains = total / FOLIO_BATCH_SIZE;
    cost += drains * (LRU_DRAIN_NS + FOLIO_BATCH_SIZE * LRU_ADD_FOLIO_NS);
    *pending = total % FOLIO_BATCH_SIZE;
    if large > 0 {
        // The first large folio drains what is pending with it; each later
        // one drains alone.
        cost += large * LRU_DRAIN_NS + (*pending + large) * LRU_ADD_FOLIO_NS;
        *pending = 0;
    }
    cost
}
