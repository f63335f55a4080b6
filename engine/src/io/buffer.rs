//! Owned, heap-allocated, aligned buffers for O_DIRECT I/O.
//!
//! O_DIRECT needs the buffer's address, the length and the file offset to be multiples of the
//! device's logical block size. A `Vec<u8>` only guarantees an alignment of 1, so the engine's
//! data buffers are [`AlignedBuf`]s: one allocation made with [`std::alloc`] and a [`Layout`] whose
//! alignment is the block size. The buffer moves by value into a backend (the kernel writes into it
//! while an io_uring read is in flight) and comes back in the [`Completion`](super::Completion);
//! moving the struct never moves the heap bytes.
//!
//! Every byte up to the capacity is initialised (the allocation is zeroed and growth zeroes the new
//! tail), so [`AlignedBuf::set_len`] is safe: growing the length shows zeros or bytes that were
//! written before, never uninitialised memory.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// A byte buffer whose first byte sits at an address that is a multiple of `align`.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
    align: usize,
    /// Whether allocations of [`HUGE_BUFFER_MIN_BYTES`] and more are huge-page mappings
    /// ([`AlignedBuf::with_capacity_in_huge_pages`]).
    huge_pages: bool,
}

// SAFETY: `AlignedBuf` owns its allocation exclusively (like `Vec<u8>`); no other handle to the
// bytes exists, so moving it to another thread or sharing `&AlignedBuf` is as safe as for a Vec.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only give `&[u8]`; mutation needs `&mut self`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// An empty buffer with room for `capacity` bytes, aligned to `align` (a power of two).
    ///
    /// # Panics
    /// If `align` is not a power of two or the capacity overflows `isize` (programming errors).
    pub fn with_capacity(capacity: usize, align: usize) -> Self {
        Self::allocate(capacity, align, false)
    }

    /// Like [`AlignedBuf::with_capacity`], for the large O_DIRECT writes of a group commit: once
    /// the buffer holds 1 MiB or more, its allocation is a mapping of
    /// its own, 2 MiB aligned, whole 2 MiB pages, offered to the kernel as transparent huge pages
    /// (`MADV_HUGEPAGE`). A write from physically contiguous memory is one segment for the block
    /// layer: a 1 MiB write from 4 KiB pages is 256 segments, more than a virtio disk takes in one
    /// request (`max_segments` 254), so it went to the device as two requests. Measured: +11 %
    /// append bandwidth (docs/log.md, "Performance"). Where the kernel has no huge page to give
    /// the buffer still works, page by page. Meant for a few long-lived, reused buffers: each
    /// allocation is an mmap.
    pub fn with_capacity_in_huge_pages(capacity: usize, align: usize) -> Self {
        Self::allocate(capacity, align, true)
    }

    fn allocate(capacity: usize, align: usize, huge_pages: bool) -> Self {
        assert!(
            align.is_power_of_two(),
            "alignment {align} is not a power of two"
        );
        let capacity = Self::capacity_for(capacity, align, huge_pages);
        let ptr = Self::allocate_zeroed(capacity, align, huge_pages);
        AlignedBuf {
            ptr,
            len: 0,
            capacity,
            align,
            huge_pages,
        }
    }

    /// A buffer of `len` zero bytes, aligned to `align`.
    pub fn zeroed(len: usize, align: usize) -> Self {
        let mut buf = Self::with_capacity(len, align);
        buf.len = len;
        buf
    }

    /// A copy of `data`, aligned to `align`.
    pub fn from_slice(data: &[u8], align: usize) -> Self {
        let mut buf = Self::with_capacity(data.len(), align);
        buf.extend_from_slice(data);
        buf
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Makes this buffer `len` bytes long (at most its capacity) for a read to fill again. Safe
    /// without zeroing: every byte of the allocation is initialised (it is zeroed when made and
    /// grown), and a read hands back only the bytes it read (`Completion::buf`).
    pub fn reuse_for_read(&mut self, len: usize) {
        assert!(
            len <= self.capacity,
            "a reused buffer of {} bytes cannot hold a read of {len}",
            self.capacity
        );
        self.len = len;
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The alignment this buffer was allocated with.
    pub fn align(&self) -> usize {
        self.align
    }

    /// Whether the buffer's address is a multiple of `align` (always true for `align <= self.align()`).
    pub fn is_aligned_to(&self, align: usize) -> bool {
        (self.ptr.as_ptr() as usize).is_multiple_of(align.max(1))
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `capacity >= len` initialised bytes (the allocation is zeroed
        // and every growth zeroes its tail), owned by `self` and borrowed immutably here.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The start address, for handing the buffer to the kernel (io_uring SQEs).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The start address for the kernel to write into (io_uring reads). The caller keeps the buffer
    /// alive and untouched until the operation completes.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Append `data`, growing the allocation (keeping the alignment) if needed.
    pub fn extend_from_slice(&mut self, data: &[u8]) {
        let new_len = self
            .len
            .checked_add(data.len())
            .expect("AlignedBuf length overflows usize");
        self.reserve_total(new_len);
        // SAFETY: `reserve_total` made the allocation at least `new_len` bytes long; the source
        // is a separate borrow, so the ranges cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.ptr.as_ptr().add(self.len),
                data.len(),
            );
        }
        self.len = new_len;
    }

    /// Set the length. Shrinking keeps the bytes for later reuse; growing shows zeros past the old
    /// length (the new bytes are zero-filled, so padding a block with `set_len` pads with zeros).
    pub fn set_len(&mut self, new_len: usize) {
        if new_len > self.len {
            self.reserve_total(new_len);
            // SAFETY: the allocation holds at least `new_len` bytes after `reserve_total`.
            unsafe {
                std::ptr::write_bytes(self.ptr.as_ptr().add(self.len), 0, new_len - self.len)
            };
        }
        self.len = new_len;
    }

    /// Same as `set_len(0)`: keeps the allocation for the next batch.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Make room for at least `additional` more bytes past the current length.
    pub fn reserve(&mut self, additional: usize) {
        let wanted = self
            .len
            .checked_add(additional)
            .expect("AlignedBuf length overflows usize");
        self.reserve_total(wanted);
    }

    /// Grow the allocation to hold `wanted` bytes, at least doubling so appends stay amortised O(1).
    fn reserve_total(&mut self, wanted: usize) {
        if wanted <= self.capacity {
            return;
        }
        let new_capacity = Self::capacity_for(
            wanted.max(self.capacity.saturating_mul(2)).max(self.align),
            self.align,
            self.huge_pages,
        );
        let new_ptr = Self::allocate_zeroed(new_capacity, self.align, self.huge_pages);
        // SAFETY: both allocations are valid for `self.len <= self.capacity <= new_capacity` bytes
        // and are distinct, so they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), new_ptr.as_ptr(), self.len) };
        Self::deallocate(self.ptr, self.capacity, self.align, self.huge_pages);
        self.ptr = new_ptr;
        self.capacity = new_capacity;
    }

    /// The capacity an allocation for `wanted` bytes gets: a huge-page buffer of
    /// [`HUGE_BUFFER_MIN_BYTES`] and more is whole huge pages.
    fn capacity_for(wanted: usize, align: usize, huge_pages: bool) -> usize {
        if Self::is_huge(wanted, align, huge_pages) {
            wanted.next_multiple_of(HUGE_PAGE_BYTES)
        } else {
            wanted
        }
    }

    /// Whether a buffer of `capacity` bytes lives in its own huge-page mapping.
    fn is_huge(capacity: usize, align: usize, huge_pages: bool) -> bool {
        huge_pages && capacity >= HUGE_BUFFER_MIN_BYTES && align <= HUGE_PAGE_BYTES
    }

    fn allocate_zeroed(capacity: usize, align: usize, huge_pages: bool) -> NonNull<u8> {
        if capacity == 0 {
            // A zero-sized allocation is not allowed; an aligned dangling pointer is the Vec idiom
            // and keeps `is_aligned_to` true for empty buffers.
            return NonNull::new(std::ptr::without_provenance_mut(align))
                .expect("align is non-zero");
        }
        if Self::is_huge(capacity, align, huge_pages) {
            debug_assert!(capacity.is_multiple_of(HUGE_PAGE_BYTES));
            return huge::map_zeroed(capacity);
        }
        let layout =
            Layout::from_size_align(capacity, align).expect("AlignedBuf layout overflows isize");
        // SAFETY: `layout` has a non-zero size (checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout))
    }

    fn deallocate(ptr: NonNull<u8>, capacity: usize, align: usize, huge_pages: bool) {
        if capacity == 0 {
            return;
        }
        if Self::is_huge(capacity, align, huge_pages) {
            huge::unmap(ptr, capacity);
            return;
        }
        let layout =
            Layout::from_size_align(capacity, align).expect("layout was valid at allocation");
        // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout and is freed only once
        // (callers replace or drop the owning `AlignedBuf` right after).
        unsafe { alloc::dealloc(ptr.as_ptr(), layout) };
    }
}

/// A transparent huge page on x86-64 (and aarch64 with 4 KiB base pages).
const HUGE_PAGE_BYTES: usize = 2 << 20;
/// A huge-page buffer this large or larger is mapped on its own, 2 MiB aligned.
const HUGE_BUFFER_MIN_BYTES: usize = 1 << 20;

mod huge {
    use super::HUGE_PAGE_BYTES;
    use std::ptr::NonNull;

    /// `len` (a multiple of [`HUGE_PAGE_BYTES`]) zeroed bytes at a 2 MiB aligned address.
    pub(super) fn map_zeroed(len: usize) -> NonNull<u8> {
        debug_assert!(len.is_multiple_of(HUGE_PAGE_BYTES));
        let mapped_len = len + HUGE_PAGE_BYTES;
        // SAFETY: an anonymous private mapping with no address hint; the kernel zero-fills it.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(len, HUGE_PAGE_BYTES).expect("valid layout"),
            );
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(HUGE_PAGE_BYTES);
        let head = aligned - start;
        let tail = mapped_len - head - len;
        // SAFETY: both ranges lie inside the mapping just made and outside [aligned, aligned+len).
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((aligned + len) as *mut libc::c_void, tail);
            }
            // Advisory: without huge pages the buffer still works, page by page.
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
        NonNull::new(aligned as *mut u8).expect("mmap never returns null on success")
    }

    pub(super) fn unmap(ptr: NonNull<u8>, len: usize) {
        // SAFETY: `ptr..ptr+len` is exactly one mapping made by `map_zeroed`, unmapped once.
        let rc = unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
        debug_assert_eq!(rc, 0, "munmap of a buffer mapping failed");
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        Self::deallocate(self.ptr, self.capacity, self.align, self.huge_pages);
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        let mut copy = Self::with_capacity(self.len.max(1), self.align);
        copy.extend_from_slice(self.as_slice());
        copy
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .field("align", &self.align)
            .finish_non_exhaustive()
    }
}

impl PartialEq for AlignedBuf {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for AlignedBuf {}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_is_aligned_and_zero() {
        for align in [1, 512, 4096, 65536] {
            let buf = AlignedBuf::zeroed(3 * 4096, align);
            assert!(buf.is_aligned_to(align));
            assert_eq!(buf.len(), 3 * 4096);
            assert!(buf.as_slice().iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn extend_grows_and_keeps_alignment_and_contents() {
        let mut buf = AlignedBuf::with_capacity(0, 4096);
        assert!(buf.is_aligned_to(4096));
        let mut expected = Vec::new();
        for round in 0..100u32 {
            let chunk: Vec<u8> = (0..(round * 37 % 700)).map(|i| (i ^ round) as u8).collect();
            buf.extend_from_slice(&chunk);
            expected.extend_from_slice(&chunk);
            assert!(buf.is_aligned_to(4096));
            assert_eq!(buf.as_slice(), &expected[..]);
        }
        assert!(buf.capacity() >= buf.len());
    }

    #[test]
    fn set_len_zero_fills_growth_and_keeps_prefix() {
        let mut buf = AlignedBuf::from_slice(b"hello", 512);
        buf.set_len(2);
        assert_eq!(buf.as_slice(), b"he");
        // Growing again must show zeros, not the old "llo": padding must be deterministic filler.
        buf.set_len(5);
        assert_eq!(buf.as_slice(), b"he\0\0\0");
        buf.set_len(5000);
        assert_eq!(buf.len(), 5000);
        assert!(buf.as_slice()[2..].iter().all(|&b| b == 0));
        assert!(buf.is_aligned_to(512));
    }

    #[test]
    fn clone_and_mutation_are_independent() {
        let mut a = AlignedBuf::from_slice(&[1, 2, 3], 64);
        let b = a.clone();
        a.as_mut_slice()[0] = 9;
        assert_eq!(b.as_slice(), &[1, 2, 3]);
        assert_eq!(a.as_slice(), &[9, 2, 3]);
        assert!(b.is_aligned_to(64));
        let empty = AlignedBuf::with_capacity(0, 64).clone();
        assert!(empty.is_empty());
    }

    #[test]
    fn buffer_is_send_across_threads() {
        let buf = AlignedBuf::from_slice(b"abc", 4096);
        let back = std::thread::spawn(move || buf).join().expect("thread");
        assert_eq!(back.as_slice(), b"abc");
    }

    #[test]
    fn huge_page_buffer_grows_into_whole_aligned_huge_pages_keeping_contents() {
        let mut buf = AlignedBuf::with_capacity_in_huge_pages(4096, 4096);
        assert!(
            buf.capacity() < HUGE_BUFFER_MIN_BYTES,
            "small: an ordinary allocation"
        );
        let mut expected = Vec::new();
        let mut round = 0u32;
        // 1 KiB batches up to 5 MiB: crosses the 1 MiB threshold and several huge pages.
        while expected.len() < 5 << 20 {
            let chunk: Vec<u8> = (0..1024u32).map(|i| (i ^ round) as u8).collect();
            buf.extend_from_slice(&chunk);
            expected.extend_from_slice(&chunk);
            round += 1;
            assert!(buf.is_aligned_to(4096));
            if buf.capacity() >= HUGE_BUFFER_MIN_BYTES {
                assert!(buf.is_aligned_to(HUGE_PAGE_BYTES), "a mapping of its own");
                assert_eq!(buf.capacity() % HUGE_PAGE_BYTES, 0, "whole huge pages");
            }
        }
        assert_eq!(buf.as_slice(), &expected[..]);
        // Reuse as a write tail does it: cleared, refilled, padded with zeros.
        buf.clear();
        buf.extend_from_slice(b"tail");
        buf.set_len(3 << 20);
        assert_eq!(&buf.as_slice()[..4], b"tail");
        assert!(buf.as_slice()[4..].iter().all(|&b| b == 0));
        let copy = buf.clone();
        drop(buf);
        assert_eq!(&copy.as_slice()[..4], b"tail");
    }

    #[test]
    fn huge_page_buffer_made_large_is_mapped_at_once() {
        let buf = AlignedBuf::with_capacity_in_huge_pages(HUGE_BUFFER_MIN_BYTES + 1, 4096);
        assert!(buf.is_aligned_to(HUGE_PAGE_BYTES));
        assert_eq!(buf.capacity(), HUGE_PAGE_BYTES);
        let ordinary = AlignedBuf::with_capacity(HUGE_BUFFER_MIN_BYTES + 1, 4096);
        assert_eq!(
            ordinary.capacity(),
            HUGE_BUFFER_MIN_BYTES + 1,
            "only on request"
        );
    }
}
