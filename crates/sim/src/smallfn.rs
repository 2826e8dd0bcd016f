//! `SmallFn`: a `FnOnce()` kept inline, without a heap allocation, when it is
//! small (captures of up to two words, the common case: an `Rc` to a model
//! component and an index, or a `Waker`); a larger closure is boxed and the
//! box is kept inline. Three words in all, so that a timer-table slot (a
//! `SmallFn`, a generation and a free-list link) is 32 bytes, half a cache
//! line. Timer callbacks are created and consumed once per event, so
//! saving an allocation and a free per event is a measurable part of the
//! engine's cost (about a tenth on PHOLD).

use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};
use std::task::Waker;

/// Inline capacity, in words.
const WORDS: usize = 2;

pub(crate) struct SmallFn {
    buf: MaybeUninit<[usize; WORDS]>,
    /// How to call or drop what `buf` holds (one pointer, so a `SmallFn` is
    /// three words: it is moved several times per event).
    vtable: &'static VTable,
    /// The closure may hold `Rc`s: not `Send`, not `Sync`.
    _not_send: PhantomData<*const ()>,
}

struct VTable {
    /// Moves the closure out of `buf` and calls it.
    call: unsafe fn(*mut u8),
    /// Drops the closure in `buf` without calling it.
    drop: unsafe fn(*mut u8),
}

/// The vtable of closures of type `F` (a promoted constant: one static per `F`).
struct VTableOf<F>(PhantomData<F>);

impl<F: FnOnce()> VTableOf<F> {
    const VTABLE: &'static VTable = &VTable {
        call: call_impl::<F>,
        drop: drop_impl::<F>,
    };
}

unsafe fn call_impl<F: FnOnce()>(p: *mut u8) {
    // SAFETY: `p` points at a valid, properly aligned `F` written by
    // `SmallFn::new`, read exactly once: the caller (`SmallFn::call`) has
    // wrapped the `SmallFn` in `ManuallyDrop`, so it is never dropped again.
    let f = unsafe { std::ptr::read(p as *mut F) };
    f()
}

unsafe fn drop_impl<F>(p: *mut u8) {
    // SAFETY: as in `call_impl`; reached only from `Drop`, when the closure
    // was never called.
    unsafe { std::ptr::drop_in_place(p as *mut F) }
}

impl SmallFn {
    #[inline]
    pub fn new<F: FnOnce() + 'static>(f: F) -> Self {
        if size_of::<F>() <= size_of::<[usize; WORDS]>() && align_of::<F>() <= align_of::<usize>() {
            Self::inline(f)
        } else {
            // A `Box<F>` is one word and itself a `FnOnce()`.
            Self::inline(Box::new(f))
        }
    }

    #[inline]
    fn inline<F: FnOnce() + 'static>(f: F) -> Self {
        assert!(
            size_of::<F>() <= size_of::<[usize; WORDS]>() && align_of::<F>() <= align_of::<usize>()
        );
        let mut buf = MaybeUninit::<[usize; WORDS]>::uninit();
        // SAFETY: checked just above: `F` fits in `buf` and needs no stricter
        // alignment than `buf` has.
        unsafe { std::ptr::write(buf.as_mut_ptr() as *mut F, f) };
        SmallFn {
            buf,
            vtable: VTableOf::<F>::VTABLE,
            _not_send: PhantomData,
        }
    }

    /// A callback that wakes `waker` (what a task's timer does). Unlike a
    /// closure doing the same, it can name the waker ([`SmallFn::waker_ref`]),
    /// so the run loop can prefetch the task it will wake.
    #[inline]
    pub fn waker(waker: Waker) -> Self {
        const { assert!(size_of::<Waker>() <= size_of::<[usize; WORDS]>()) };
        const { assert!(align_of::<Waker>() <= align_of::<usize>()) };
        let mut buf = MaybeUninit::<[usize; WORDS]>::uninit();
        // SAFETY: a `Waker` fits in `buf` and needs no stricter alignment
        // (checked at compile time just above).
        unsafe { std::ptr::write(buf.as_mut_ptr() as *mut Waker, waker) };
        SmallFn {
            buf,
            vtable: &WAKE_VTABLE,
            _not_send: PhantomData,
        }
    }

    /// The waker, if this was made by [`SmallFn::waker`].
    #[inline]
    pub fn waker_ref(&self) -> Option<&Waker> {
        if std::ptr::eq(self.vtable, &WAKE_VTABLE) {
            // SAFETY: only `SmallFn::waker` uses `WAKE_VTABLE` (a `static`,
            // so its address is unique), and it wrote a `Waker` into `buf`.
            Some(unsafe { &*(self.buf.as_ptr() as *const Waker) })
        } else {
            None
        }
    }

    /// The waker, if this was made by [`SmallFn::waker`] (else `self`).
    #[inline]
    pub fn into_waker(self) -> Result<Waker, SmallFn> {
        if self.waker_ref().is_some() {
            let this = ManuallyDrop::new(self);
            // SAFETY: `buf` holds a `Waker` (checked just above), moved out
            // once: `this` is never dropped.
            Ok(unsafe { std::ptr::read(this.buf.as_ptr() as *const Waker) })
        } else {
            Err(self)
        }
    }

    /// Calls the closure (consuming it).
    #[inline]
    pub fn call(self) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `buf` holds the closure `call` was made for; `this` is never
        // dropped, so the closure is moved out exactly once (even if it panics).
        unsafe { (this.vtable.call)(this.buf.as_mut_ptr() as *mut u8) }
    }
}

/// The vtable of [`SmallFn::waker`].
static WAKE_VTABLE: VTable = VTable {
    call: wake_impl,
    drop: drop_impl::<Waker>,
};

unsafe fn wake_impl(p: *mut u8) {
    // SAFETY: as in `call_impl`, for the `Waker` written by `SmallFn::waker`.
    let w = unsafe { std::ptr::read(p as *mut Waker) };
    w.wake()
}

impl Drop for SmallFn {
    fn drop(&mut self) {
        // SAFETY: `buf` holds the closure (`call` was not run: it forgets self).
        unsafe { (self.vtable.drop)(self.buf.as_mut_ptr() as *mut u8) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn small_and_large_closures_are_called_once_or_dropped() {
        let hits = Rc::new(Cell::new(0));
        let h = hits.clone();
        let small = SmallFn::new(move || h.set(h.get() + 1));
        let big_payload = [7u64; 16];
        let h = hits.clone();
        let big = SmallFn::new(move || h.set(h.get() + big_payload.iter().sum::<u64>() as i32));
        assert_eq!(Rc::strong_count(&hits), 3);
        small.call();
        big.call();
        assert_eq!(hits.get(), 1 + 112);
        // Both closures (and their captured Rc clones) are gone.
        assert_eq!(Rc::strong_count(&hits), 1);
        let h = hits.clone();
        let never = SmallFn::new(move || h.set(-1));
        assert_eq!(Rc::strong_count(&hits), 2);
        drop(never);
        assert_eq!(Rc::strong_count(&hits), 1);
        assert_eq!(hits.get(), 113);
    }

    /// A waker callback names its waker, wakes it when called, drops it
    /// otherwise; a closure names none.
    #[test]
    fn waker_callback() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        use std::task::Wake;
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let w = Waker::from(count.clone());
        let f = SmallFn::waker(w.clone());
        // (Compared by data pointer: `will_wake` also compares vtable addresses,
        // which need not be unique for `std`'s `Arc` wakers.)
        assert!(f.waker_ref().is_some_and(|x| x.data() == w.data()));
        assert!(SmallFn::new(|| ()).waker_ref().is_none());
        assert!(SmallFn::new(|| ()).into_waker().is_err());
        let Ok(back) = SmallFn::waker(w.clone()).into_waker() else {
            panic!("a waker callback gave no waker");
        };
        assert_eq!(back.data(), w.data());
        drop(back);
        assert_eq!(Arc::strong_count(&count), 3);
        f.call();
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert_eq!(Arc::strong_count(&count), 2);
        drop(SmallFn::waker(w));
        assert_eq!(Arc::strong_count(&count), 1);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
    }
}
