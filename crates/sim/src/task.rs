//! Tasks: one heap cell per task holding a small header and the future
//! itself, and the wakers that point at it.
//!
//! The cell is `#[repr(C)] TaskCell<F> { header, future }`: everything the
//! executor touches per wake and per poll (reference count, queued/done
//! flags, the task's id, the ready queue) is in the header, and the future
//! follows it in the same allocation, so a wake-then-poll touches one cell
//! (usually one or two adjacent cache lines) instead of a reference-counted
//! wake handle, a slab entry and a separately boxed future.
//!
//! A waker is a pointer to the header and owns one count of the cell's
//! (non-atomic) reference count: cloning one is an increment of a field in
//! the line the wake will touch anyway, with no allocation. The ready queue
//! holds counted references too ([`TaskRef`]), so a cell outlives every
//! waker, queue entry and slab entry that names it, and a stale waker (of a
//! task that finished or was cancelled) finds the `DONE` flag and does
//! nothing, even if the task's slab slot was reused since: the cell is not
//! the slot.
//!
//! The type-erased operations on a cell (poll the future, drop it, free the
//! cell) go through a per-future-type table of function pointers kept in the
//! header.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::ptr::NonNull;
use std::rc::Rc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use crate::slab::Key;

/// Identity of a task (slot and generation: a finished task's id is never reused
/// for another task).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(pub(crate) Key);

impl TaskId {
    /// A small integer naming the task's slot (for tables and traces).
    pub fn index(self) -> u32 {
        self.0.idx
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0.idx, self.0.gen)
    }
}

/// Tasks to poll, in the order they were woken (each at most once: see
/// [`QUEUED`]). Shared by the executor and every task cell.
pub(crate) type ReadyQueue = RefCell<VecDeque<TaskRef>>;

/// In the ready queue (a wake in that state does nothing).
const QUEUED: u8 = 1;
/// Finished or cancelled: its future is gone and wakes do nothing.
const DONE: u8 = 2;
/// Cancelled while being polled: finishes when the poll returns.
const CANCEL: u8 = 4;
/// Recorded what it blocks on (the slab entry's `waiting_on` is set).
const WAITING: u8 = 8;

/// The part of a task cell the executor touches per wake and per poll: 32
/// bytes, so with the cell aligned to a cache line the header and the start
/// of the future share the first line.
pub(crate) struct Header {
    /// Counted references: wakers, ready-queue entries, the slab's entry.
    refs: Cell<u32>,
    state: Cell<u8>,
    id: TaskId,
    vtable: &'static TaskVTable,
    ready: Rc<ReadyQueue>,
}

/// Operations that need the future's type.
struct TaskVTable {
    poll: unsafe fn(NonNull<Header>, &mut Context<'_>) -> Poll<()>,
    drop_future: unsafe fn(NonNull<Header>),
    dealloc: unsafe fn(NonNull<Header>),
}

const _: () = assert!(std::mem::size_of::<Header>() == 32);

/// A task's heap cell; the header first (`repr(C)`), so a pointer to the cell
/// is a pointer to its header. Aligned to a cache line: a wake and the poll
/// that follows touch the first line (and the next ones for a large future).
#[repr(C, align(64))]
struct TaskCell<F> {
    header: Header,
    /// `None` once the task finished or was cancelled. A `RefCell` so that a
    /// poll re-entering the same task (which the executor never does) would
    /// panic instead of aliasing.
    future: RefCell<Option<F>>,
}

struct VTableOf<F>(PhantomData<F>);

impl<F: Future<Output = ()> + 'static> VTableOf<F> {
    const VTABLE: &'static TaskVTable = &TaskVTable {
        poll: poll_impl::<F>,
        drop_future: drop_future_impl::<F>,
        dealloc: dealloc_impl::<F>,
    };
}

unsafe fn poll_impl<F: Future<Output = ()>>(p: NonNull<Header>, cx: &mut Context<'_>) -> Poll<()> {
    // SAFETY: `p` points at a live `TaskCell<F>` (the caller holds a counted
    // `TaskRef`, so the cell is not freed during the call), made by
    // `TaskRef::new::<F>`, which stored this function in its vtable.
    let cell = unsafe { p.cast::<TaskCell<F>>().as_ref() };
    let mut slot = cell.future.borrow_mut();
    match slot.as_mut() {
        // SAFETY: the future lives in the task's heap cell, which never moves,
        // and is never moved out of it: it is only dropped in place
        // (`drop_future_impl`, or with the cell). So it stays pinned.
        Some(f) => unsafe { Pin::new_unchecked(f) }.poll(cx),
        None => Poll::Ready(()),
    }
}

unsafe fn drop_future_impl<F: Future<Output = ()>>(p: NonNull<Header>) {
    // SAFETY: as in `poll_impl`: the caller holds a counted reference.
    let cell = unsafe { p.cast::<TaskCell<F>>().as_ref() };
    // Dropped in place (pinning), under the borrow. The drop may run model
    // code (cancel timers, wake others), which never reaches this future.
    *cell.future.borrow_mut() = None;
}

unsafe fn dealloc_impl<F: Future<Output = ()>>(p: NonNull<Header>) {
    // SAFETY: `p` came from `Box::into_raw` of a `Box<TaskCell<F>>` in
    // `TaskRef::new::<F>`; the last counted reference is gone and no
    // reference into the cell is live, so the box is rebuilt and freed once.
    drop(unsafe { Box::from_raw(p.cast::<TaskCell<F>>().as_ptr()) });
}

/// A counted reference to a task cell.
pub(crate) struct TaskRef(NonNull<Header>);

impl TaskRef {
    /// A new task cell for `future`, with one reference (the one returned).
    pub fn new<F: Future<Output = ()> + 'static>(
        id: TaskId,
        future: F,
        ready: Rc<ReadyQueue>,
    ) -> TaskRef {
        let cell = Box::new(TaskCell {
            header: Header {
                refs: Cell::new(1),
                state: Cell::new(0),
                id,
                vtable: VTableOf::<F>::VTABLE,
                ready,
            },
            future: RefCell::new(Some(future)),
        });
        // SAFETY: `Box::into_raw` never returns null.
        TaskRef(unsafe { NonNull::new_unchecked(Box::into_raw(cell)) }.cast())
    }

    #[inline(always)]
    fn header(&self) -> &Header {
        // SAFETY: `self` owns a count, so the cell is live while `self` is.
        unsafe { self.0.as_ref() }
    }

    /// The task's id.
    #[inline]
    pub fn id(&self) -> TaskId {
        self.header().id
    }

    /// Marks the task finished or cancelled: wakes do nothing from now on.
    #[inline]
    pub fn set_done(&self) {
        let h = self.header();
        h.state.set(h.state.get() | DONE);
    }

    /// Asks for the task to finish after its current poll.
    pub fn request_cancel(&self) {
        let h = self.header();
        h.state.set(h.state.get() | CANCEL);
    }

    /// Whether [`TaskRef::request_cancel`] was called.
    #[inline]
    pub fn cancel_requested(&self) -> bool {
        self.header().state.get() & CANCEL != 0
    }

    /// Notes that the slab entry's `waiting_on` is set.
    pub fn set_waiting(&self) {
        let h = self.header();
        h.state.set(h.state.get() | WAITING);
    }

    /// Called when the task comes off the ready queue: clears `QUEUED` (a
    /// wake from now on queues it again) and `WAITING`. Returns whether the
    /// task is done (then it is not polled) and whether `WAITING` was set.
    #[inline]
    pub fn dequeued(&self) -> (bool, bool) {
        let h = self.header();
        let s = h.state.get();
        h.state.set(s & !(QUEUED | WAITING));
        (s & DONE != 0, s & WAITING != 0)
    }

    /// Polls the future (which must not be done).
    #[inline]
    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `self` holds a count, so the cell outlives the call; the
        // vtable was made for the cell's future type.
        unsafe { (self.header().vtable.poll)(self.0, cx) }
    }

    /// Drops the future in place (the cell stays while referenced).
    pub fn drop_future(&self) {
        // SAFETY: as in `poll`.
        unsafe { (self.header().vtable.drop_future)(self.0) }
    }

    /// Queues the task unless it is queued already or done.
    #[inline]
    pub fn wake_by_ref(&self) {
        let h = self.header();
        let s = h.state.get();
        if s & (QUEUED | DONE) == 0 {
            h.state.set(s | QUEUED);
            h.ready.borrow_mut().push_back(self.clone());
        }
    }

    /// As [`TaskRef::wake_by_ref`], moving this reference into the queue.
    #[inline]
    pub fn wake(self) {
        let h = self.header();
        let s = h.state.get();
        if s & (QUEUED | DONE) == 0 {
            h.state.set(s | QUEUED);
            // The queue takes over this reference's count (no increment and
            // decrement); `me` keeps the cell, and so `ready`, alive meanwhile.
            let me = ManuallyDrop::new(self);
            me.header().ready.borrow_mut().push_back(TaskRef(me.0));
        }
    }

    /// An owned waker (owning this reference's count).
    pub fn into_waker(self) -> Waker {
        let p = ManuallyDrop::new(self).0.as_ptr() as *const ();
        // SAFETY: the vtable's contract holds for `p`: it points at a live
        // header and the new waker owns one count (taken over from `self`).
        // See `WAKER_VTABLE` for the single-thread requirement.
        unsafe { Waker::from_raw(RawWaker::new(p, &WAKER_VTABLE)) }
    }

    /// A waker for polling, without touching the count: it must not be
    /// dropped (hence `ManuallyDrop`) nor outlive `self`. Clones made from it
    /// take their own counts.
    #[inline]
    pub fn borrowed_waker(&self) -> ManuallyDrop<Waker> {
        let p = self.0.as_ptr() as *const ();
        // SAFETY: `p` points at a live header for as long as `self` lives,
        // which outlives the poll the waker is used for; the waker is never
        // dropped, so it releases no count it did not take.
        ManuallyDrop::new(unsafe { Waker::from_raw(RawWaker::new(p, &WAKER_VTABLE)) })
    }

    /// Rebuilds the reference owned by a waker's data pointer.
    ///
    /// # Safety
    /// `p` must be a waker data pointer of [`WAKER_VTABLE`] whose count is
    /// being taken over (the waker is consumed).
    #[inline]
    unsafe fn from_waker_data(p: *const ()) -> TaskRef {
        // SAFETY: per the contract, `p` is a non-null header pointer.
        TaskRef(unsafe { NonNull::new_unchecked(p as *mut Header) })
    }
}

impl Header {
    /// Takes one more count.
    #[inline(always)]
    fn acquire(&self) {
        let n = self.refs.get().wrapping_add(1);
        if n == 0 {
            // 2^32 live references can only be a leak; wrapping would free
            // the cell under its users.
            std::process::abort();
        }
        self.refs.set(n);
    }
}

impl Clone for TaskRef {
    #[inline]
    fn clone(&self) -> TaskRef {
        self.header().acquire();
        TaskRef(self.0)
    }
}

impl Drop for TaskRef {
    #[inline]
    fn drop(&mut self) {
        let h = self.header();
        let refs = h.refs.get() - 1;
        h.refs.set(refs);
        if refs == 0 {
            self.last_ref_dropped();
        }
    }
}

impl TaskRef {
    #[cold]
    #[inline(never)]
    fn last_ref_dropped(&mut self) {
        let h = self.header();
        // A task no one can reach any more, whose future may still be there
        // (a daemon dropped with its simulation). Drop the future first, with
        // a count held so that the cell stays valid if the future's drop
        // code clones and drops a waker of this task; free the cell only if
        // no count is left then.
        h.refs.set(1);
        h.state.set(h.state.get() | DONE);
        self.drop_future();
        let h = self.header();
        let refs = h.refs.get() - 1;
        h.refs.set(refs);
        if refs == 0 {
            let dealloc = h.vtable.dealloc;
            // SAFETY: no count is left and nothing borrows the cell (`h` is
            // not used again), so it is freed exactly once.
            unsafe { dealloc(self.0) }
        }
    }
}

/// Wakes `w`: for a waker of this executor's, without the two indirect calls
/// of `Waker::wake` (the run loop does this for every task timer).
#[inline(always)]
pub(crate) fn wake(w: Waker) {
    if std::ptr::eq(w.vtable(), &WAKER_VTABLE) {
        let p = ManuallyDrop::new(w).data();
        // SAFETY: a waker of `WAKER_VTABLE`, consumed (never dropped): its
        // count moves to the `TaskRef`.
        unsafe { TaskRef::from_waker_data(p) }.wake();
    } else {
        w.wake();
    }
}

/// Asks the CPU to start loading the cell of the task `w` wakes, if it is
/// one of this executor's: its first two cache lines (the header and the
/// start of the future).
#[inline(always)]
pub(crate) fn prefetch_cell(w: &Waker) {
    if std::ptr::eq(w.vtable(), &WAKER_VTABLE) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `_mm_prefetch` needs SSE, part of the x86-64 baseline; a
        // prefetch is only a hint and never faults. The address is the live
        // cell the waker owns a count of (and the line after it, inside the
        // cell or at worst just past it, which a prefetch may name).
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = w.data() as *const i8;
            _mm_prefetch::<_MM_HINT_T0>(p);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
        }
    }
}

// The wakers of this executor use a non-atomic count: a simulation and every
// waker it hands out live on one thread (a `Sim` is `!Send`, and so is every
// model future, since they hold `Rc`s). `Waker` is `Send + Sync` by type, so
// this relies on model code never moving a waker to another thread, which
// nothing in wbsim does (parallelism is only across whole, independent runs).
static WAKER_VTABLE: RawWakerVTable = RawWakerVTable::new(w_clone, w_wake, w_wake_by_ref, w_drop);

unsafe fn w_clone(p: *const ()) -> RawWaker {
    // SAFETY: the waker being cloned owns (or, while polling, borrows) a
    // count, so `p` points at a live header; we take one more for the clone.
    unsafe { &*(p as *const Header) }.acquire();
    RawWaker::new(p, &WAKER_VTABLE)
}

unsafe fn w_wake(p: *const ()) {
    // SAFETY: `wake` consumes the waker: its count moves to the `TaskRef`.
    unsafe { TaskRef::from_waker_data(p) }.wake();
}

unsafe fn w_wake_by_ref(p: *const ()) {
    // SAFETY: the waker is alive for the call, so is its count; the
    // `TaskRef` is never dropped, so it releases nothing.
    let t = ManuallyDrop::new(unsafe { TaskRef::from_waker_data(p) });
    t.wake_by_ref();
}

unsafe fn w_drop(p: *const ()) {
    // SAFETY: an owned waker's count, released here.
    drop(unsafe { TaskRef::from_waker_data(p) });
}
