//! Which pages of a file region the page cache holds, asked without reading them.
//!
//! `sendfile(2)` of a page the cache does not hold reads the disk on the calling thread, which is
//! the node's only one. The writer asks first, piece by piece, and reads a piece the cache does
//! not hold through the runtime's ring instead (`writer.rs`).
//!
//! How it asks: a read-only shared mapping of the region, never touched (no page is faulted
//! in), and `mincore(2)` over it, which reports a page of a file mapping as resident only once
//! its read has completed (`folio_test_uptodate`): a page the kernel's read-ahead is still
//! reading counts as missing, where `cachestat(2)` would count it as cached and `sendfile` would
//! then wait for its read. The node owns its files, so the kernel answers for every page of
//! the file (for a file it could not write it would report only pages in its own page tables:
//! none, and every piece would be read through the ring, which is slower, never wrong).

use std::io;
use std::os::fd::RawFd;

/// A mapping of a file region, only for asking which of its pages are cached.
pub(crate) struct CachedPages {
    address: *mut libc::c_void,
    map_length: usize,
    /// The file position of the mapping's first byte (page aligned).
    map_start: u64,
    page_bytes: u64,
    /// One byte per page of the last question (`mincore`'s answer).
    answer: Vec<u8>,
}

impl CachedPages {
    /// Maps `[position, position + length)` of `fd` (rounded out to whole pages).
    pub(crate) fn map(fd: RawFd, position: u64, length: u64) -> io::Result<CachedPages> {
        assert!(length > 0, "an empty region needs no mapping");
        // SAFETY: sysconf has no preconditions.
        let page_bytes = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            bytes if bytes > 0 => bytes as u64,
            _ => 4096,
        };
        let map_start = position / page_bytes * page_bytes;
        let end = position
            .checked_add(length)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "region past u64::MAX"))?;
        let map_length = usize::try_from(end - map_start)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "region too long"))?;
        let offset = libc::off_t::try_from(map_start)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "position past off_t"))?;
        // SAFETY: a new mapping chosen by the kernel, read-only; nothing dereferences it (only
        // `mincore` looks at it), so a file cut shorter meanwhile cannot fault this process.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_length,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                offset,
            )
        };
        if address == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(CachedPages {
            address,
            map_length,
            map_start,
            page_bytes,
            answer: Vec::new(),
        })
    }

    /// Whether the page cache holds every page of `[position, position + length)`, read in
    /// completely. The range must lie inside the mapped region. A failed question answers
    /// `false` (the caller then reads, which is always correct).
    pub(crate) fn all_cached(&mut self, position: u64, length: u64) -> bool {
        assert!(
            position >= self.map_start
                && position + length <= self.map_start + self.map_length as u64,
            "the range {position}+{length} lies inside the mapping {}+{}",
            self.map_start,
            self.map_length
        );
        if length == 0 {
            return true;
        }
        let first_page = (position - self.map_start) / self.page_bytes;
        let end_page = (position + length - self.map_start).div_ceil(self.page_bytes);
        let pages = (end_page - first_page) as usize;
        self.answer.clear();
        self.answer.resize(pages, 0);
        let offset = (first_page * self.page_bytes) as usize;
        let bytes = (pages as u64 * self.page_bytes) as usize;
        // SAFETY: `[address + offset, + bytes)` lies inside the mapping (asserted above, the
        // mapping being whole pages), and `answer` holds one byte per page of it.
        let result = unsafe {
            libc::mincore(
                self.address.cast::<u8>().add(offset).cast(),
                bytes.min(self.map_length - offset),
                self.answer.as_mut_ptr(),
            )
        };
        result == 0 && self.answer.iter().all(|page| page & 1 == 1)
    }
}

impl Drop for CachedPages {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe {
            libc::munmap(self.address, self.map_length);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// A page written through the cache is cached; after the cache drops it (`POSIX_FADV_DONTNEED`
    /// of a clean page), it is not, and reading it back makes it cached again.
    #[test]
    fn pages_read_in_are_cached_and_dropped_ones_are_not() {
        // Beside the build (a disk), not in a tmpfs /tmp whose pages the cache cannot drop.
        let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
        let dir = if target.is_dir() {
            tempfile::tempdir_in(target).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        let path = dir.path().join("region");
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&vec![7u8; 64 * 1024]).unwrap();
        file.sync_all().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let fd = file.as_raw_fd();
        let mut pages = CachedPages::map(fd, 100, 40_000).unwrap();
        std::fs::read(&path).unwrap();
        assert!(pages.all_cached(100, 40_000));
        // SAFETY: plain syscall on an open descriptor.
        let dropped = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(dropped, 0);
        assert!(!pages.all_cached(100, 40_000));
        assert!(!pages.all_cached(30_000, 1));
        std::fs::read(&path).unwrap();
        assert!(pages.all_cached(30_000, 10_100));
    }
}
