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

/// `f(index, item)` over `items`, in this process's pool, or on the calling
/// thread when there are at most `serial` of them: handing a point query's one
/// chunk, segment or object to the pool woke a sleeping thread and waited for it,
/// which cost more than the work (a chunk's decode 80 against 37 µs, a stream's
/// point query 371 against 262 µs, one packed object 20.4 against 5.5 µs).
pub fn map<T: Sync, R: Send>(
    items: &[T],
    serial: usize,
    f: impl Fn(usize, &T) -> R + Sync + Send,
) -> Vec<R> {
    use rayon::prelude::*;
    if items.len() <= serial {
        return items.iter().enumerate().map(|(i, t)| f(i, t)).collect();
    }
    install(|| items.par_iter().enumerate().map(|(i, t)| f(i, t)).collect())
}

/// `f(index, item)` over `items`, in order: on the calling thread until `budget` has
/// passed, then the items left shared between this thread and the pool's, each taking
/// the next as it comes. Work of unknown size that is mostly small (a box search over
/// a few segments) then never waits for a sleeping thread, and big work keeps this
/// thread busy while the pool's wake up.
pub fn map_after<T: Sync, R: Send>(
    items: &[T],
    budget: std::time::Duration,
    f: impl Fn(usize, &T) -> R + Sync + Send,
) -> Vec<R> {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    let start = std::time::Instant::now();
    let mut out = Vec::with_capacity(items.len());
    while out.len() < items.len() && (out.is_empty() || start.elapsed() < budget) {
        let i = out.len();
        out.push(f(i, &items[i]));
    }
    let done = out.len();
    if done == items.len() {
        return out;
    }
    let slots: Vec<Mutex<Option<R>>> = (done..items.len()).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(done);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= items.len() {
            return;
        }
        let value = f(i, &items[i]);
        *slots[i - done].lock().expect("a slot of one item") = Some(value);
    };
    pool().in_place_scope(|scope| {
        for _ in 1..threads().max(2) {
            scope.spawn(|_| work());
        }
        work();
    });
    out.extend(slots.into_iter().map(|slot| {
        slot.into_inner()
            .expect("a slot of one item")
            .expect("every item was taken")
    }));
    out
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

/// What a block of a parallel scatter puts in one partition: items, or
/// items and their bytes.
pub(crate) trait Amount: Copy + Default + Send + Sync {
    fn plus(self, other: Self) -> Self;
}

impl Amount for usize {
    fn plus(self, other: Self) -> Self {
        self + other
    }
}

impl Amount for (usize, usize) {
    fn plus(self, other: Self) -> Self {
        (self.0 + other.0, self.1 + other.1)
    }
}

/// The layout of a parallel scatter by partition (see [`scatter_by_partition`]):
/// `starts[p]` is partition `p`'s first place (`starts[parts]` the total),
/// `firsts[b][p]` the first place of block `b` in partition `p`.
pub(crate) struct Scatter<A> {
    pub starts: Vec<A>,
    pub firsts: Vec<Vec<A>>,
}

/// A parallel, stable scatter of blocks of input into partitions laid out one
/// after another: each block counts what it puts in each partition (`count`,
/// blocks in parallel), and inside each partition the blocks' places follow
/// one another in block order. The caller sizes its buffers by the totals,
/// then [`Scatter::write`] has each block write its items from its own first
/// places. So the places blocks write are disjoint, and input order survives
/// within each partition (a counting sort when the blocks are in input order).
pub(crate) fn scatter_by_partition<B: Sync, A: Amount>(
    blocks: &[B],
    parts: usize,
    count: impl Fn(&B) -> Vec<A> + Sync,
) -> Scatter<A> {
    use rayon::prelude::*;
    let counts: Vec<Vec<A>> = blocks.par_iter().map(&count).collect();
    let mut totals = vec![A::default(); parts];
    for count in &counts {
        for (t, &c) in totals.iter_mut().zip(count) {
            *t = t.plus(c);
        }
    }
    let mut starts = Vec::with_capacity(parts + 1);
    let mut at = A::default();
    for &t in &totals {
        starts.push(at);
        at = at.plus(t);
    }
    starts.push(at);
    // (block by block, so that the layout is made in the order it is read)
    let mut running = starts[..parts].to_vec();
    let mut firsts = Vec::with_capacity(blocks.len());
    for count in &counts {
        firsts.push(running.clone());
        for (r, &c) in running.iter_mut().zip(count) {
            *r = r.plus(c);
        }
    }
    Scatter { starts, firsts }
}

impl<A: Amount> Scatter<A> {
    /// Everything scattered (items, or items and bytes).
    pub(crate) fn total(&self) -> A {
        *self.starts.last().unwrap_or(&A::default())
    }

    /// `write(block number, block, its first places)` for every block, in
    /// parallel: each writes its items from its own first places on.
    pub(crate) fn write<B: Sync>(&self, blocks: &[B], write: impl Fn(usize, &B, &[A]) + Sync) {
        use rayon::prelude::*;
        blocks
            .par_iter()
            .zip(self.firsts.par_iter())
            .enumerate()
            .for_each(|(b, (block, first))| write(b, block, first));
    }
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

    #[test]
    fn scatter_by_partition_is_a_stable_counting_sort() {
        let keys: Vec<usize> = (0..10_000u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59) as usize)
            .collect();
        let parts = 32;
        let blocks = input_blocks(keys.len());
        let mut out = vec![(0usize, 0usize); keys.len()];
        let writes = DisjointWrites::new(&mut out);
        let layout = install(|| {
            let layout = scatter_by_partition(&blocks, parts, |&(lo, hi)| {
                let mut count = vec![0usize; parts];
                keys[lo..hi].iter().for_each(|&k| count[k] += 1);
                count
            });
            layout.write(&blocks, |_, &(lo, hi), first| {
                let mut fill = first.to_vec();
                for i in lo..hi {
                    // SAFETY: the layout gives each block its own places
                    unsafe { *writes.base().add(fill[keys[i]]) = (keys[i], i) };
                    fill[keys[i]] += 1;
                }
            });
            layout
        });
        let mut expected: Vec<(usize, usize)> = keys.iter().copied().zip(0..).collect();
        expected.sort(); // by key, then input index: stable
        assert_eq!(out, expected);
        assert_eq!(layout.starts.len(), parts + 1);
        assert_eq!(layout.total(), keys.len());
        for p in 0..parts {
            let first = layout.starts[p];
            assert!(out[first..layout.starts[p + 1]]
                .iter()
                .all(|&(k, _)| k == p));
            assert_eq!(layout.firsts[0][p], first);
        }
    }

    #[test]
    fn map_after_gives_every_item_once_in_order_whatever_the_budget() {
        let items: Vec<u64> = (0..1000).collect();
        for budget in [
            std::time::Duration::ZERO,
            std::time::Duration::from_micros(50),
            std::time::Duration::from_secs(10),
        ] {
            let calls = std::sync::atomic::AtomicUsize::new(0);
            let out = map_after(&items, budget, |i, v| {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                assert_eq!(i as u64, *v);
                v * 2
            });
            assert_eq!(out, items.iter().map(|v| v * 2).collect::<Vec<_>>());
            assert_eq!(
                calls.load(std::sync::atomic::Ordering::Relaxed),
                items.len()
            );
        }
        assert!(map_after(&[] as &[u64], std::time::Duration::ZERO, |_, v| *v).is_empty());
    }
}
