//! The allocator of the Rust kernels: large buffers straight from `mmap`,
//! marked for transparent huge pages.
//!
//! The kernels fill buffers of tens to hundreds of MB once per call (10M
//! interned keys, their hash partitions, a CSR of the triples). With 4 KiB
//! pages each first touch of a page is a fault that zeroes it: perf showed a
//! sixth of building a 10M-triple Assoc in the kernel's page-fault path.
//! Huge pages take one fault per 2 MiB (on this machine `MADV_HUGEPAGE`
//! does it: its transparent huge pages are `madvise`), and a fresh mapping
//! is already zero, so zeroed buffers skip their memset. Small allocations
//! stay with the system allocator.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations from this size on are mapped on their own.
const LARGE: usize = 4 << 20;

/// The system allocator, with buffers of [`LARGE`] bytes or more mapped
/// with `MADV_HUGEPAGE`.
pub struct KernelAlloc;

fn mapped(layout: &Layout) -> bool {
    // mmap gives page-aligned memory: larger alignments stay with System
    layout.size() >= LARGE && layout.align() <= 4096
}

/// A fresh private anonymous mapping of `size` bytes (zeroed), or null.
unsafe fn map(size: usize) -> *mut u8 {
    let p = libc::mmap(
        std::ptr::null_mut(),
        size,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    if p == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    // a hint: where huge pages are off or short, the pages are small
    libc::madvise(p, size, libc::MADV_HUGEPAGE);
    p as *mut u8
}

// SAFETY: every pointer handed out is either System's (for layouts that are
// not `mapped`) or a mapping of exactly `layout.size()` bytes, and each is
// given back the same way, decided by the same layout.
unsafe impl GlobalAlloc for KernelAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mapped(&layout) {
            map(layout.size())
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(&layout) {
            map(layout.size()) // fresh anonymous pages read as zero
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mapped(&layout) {
            libc::munmap(ptr.cast(), layout.size());
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (mapped(&layout), mapped(&new_layout)) {
            (false, false) => System.realloc(ptr, layout, new_size),
            (true, true) => {
                let p = libc::mremap(ptr.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE);
                if p == libc::MAP_FAILED {
                    return std::ptr::null_mut();
                }
                libc::madvise(p, new_size, libc::MADV_HUGEPAGE);
                p as *mut u8
            }
            _ => {
                let moved = self.alloc(new_layout);
                if !moved.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn large_buffers_are_zeroed_grow_and_shrink_across_the_threshold() {
        let n = (super::LARGE / 8) + 3;
        let zeroed = vec![0u64; n];
        assert!(zeroed.iter().all(|&v| v == 0));
        // grow from small to large to larger, then shrink back to small
        let mut v: Vec<u64> = Vec::new();
        for i in 0..(3 * n) as u64 {
            v.push(i);
        }
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        v.truncate(10);
        v.shrink_to_fit();
        assert_eq!(v, (0..10).collect::<Vec<u64>>());
        let aligned = std::alloc::Layout::from_size_align(super::LARGE, 1 << 16).unwrap();
        // SAFETY: a valid non-zero layout, freed with the same layout
        unsafe {
            let p = std::alloc::alloc(aligned);
            assert!(!p.is_null() && (p as usize).is_multiple_of(1 << 16));
            std::alloc::dealloc(p, aligned);
        }
    }
}
