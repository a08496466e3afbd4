//! The thread pool of the parallel kernels, one per process.
//!
//! Rayon's global pool does not survive `fork()`: the child inherits a pool
//! whose threads do not exist there, and the first parallel kernel it runs
//! waits for them for ever. So the kernels run in a pool of our own, made
//! afresh the first time a process (a forked child included) needs one.

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::atomic::{AtomicPtr, Ordering};

struct ProcessPool {
    pid: u32,
    pool: ThreadPool,
}

/// A leaked `ProcessPool`; a forked child replaces its parent's (whose threads
/// are gone, so it is never dropped: dropping would signal threads that do not exist).
static POOL: AtomicPtr<ProcessPool> = AtomicPtr::new(std::ptr::null_mut());

fn pool() -> &'static ThreadPool {
    let pid = std::process::id();
    loop {
        let current = POOL.load(Ordering::Acquire);
        if !current.is_null() {
            // SAFETY: POOL only ever holds pointers from Box::into_raw that are never freed.
            let owned: &'static ProcessPool = unsafe { &*current };
            if owned.pid == pid {
                return &owned.pool;
            }
        }
        let pool = ThreadPoolBuilder::new()
            .thread_name(|i| format!("tessera-kernel-{i}"))
            .build()
            .expect("the kernel thread pool starts");
        let made = Box::into_raw(Box::new(ProcessPool { pid, pool }));
        if POOL
            .compare_exchange(current, made, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // another thread of this process installed one first: use that
            // SAFETY: `made` was never shared.
            drop(unsafe { Box::from_raw(made) });
        }
    }
}

/// Run `op` (and every parallel iterator in it) in this process's pool.
pub fn install<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    pool().install(op)
}

/// Threads of this process's pool.
pub fn threads() -> usize {
    pool().current_num_threads()
}

/// The `(start, end)` blocks `0..n` is cut into for a parallel scatter: two
/// per thread, so that a slow block leaves the other thread work to do.
pub fn input_blocks(n: usize) -> Vec<(usize, usize)> {
    let len = n.div_ceil(threads().max(1) * 2).max(1);
    (0..n).step_by(len).map(|b| (b, (b + len).min(n))).collect()
}

/// A buffer the blocks of a parallel scatter fill at disjoint places, through
/// its base pointer. Each use says (in its SAFETY comment) why the places
/// its blocks write do not overlap and lie inside the buffer.
pub(crate) struct DisjointWrites<T>(*mut T);
// SAFETY: the pointer is only written through at places no other block writes.
unsafe impl<T> Send for DisjointWrites<T> {}
unsafe impl<T> Sync for DisjointWrites<T> {}

impl<T> DisjointWrites<T> {
    pub(crate) fn new(buffer: &mut [T]) -> Self {
        DisjointWrites(buffer.as_mut_ptr())
    }

    /// The base pointer (a method, so closures capture the whole Sync wrapper).
    pub(crate) fn base(&self) -> *mut T {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn runs_parallel_work_in_one_pool() {
        let total: u64 = install(|| (0..1000u64).into_par_iter().sum());
        assert_eq!(total, 499_500);
        assert!(threads() >= 1);
        assert!(std::ptr::eq(pool(), pool()));
    }
}
