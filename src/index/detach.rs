//! Linux system calls behind the daemon's protection against in-place writes: a read
//! lease on the index file, and moving a mapping off the file onto a private copy of
//! its bytes, at the same address.
//!
//! Why this exists: the daemon memory-maps its index. Another tool that writes into
//! that file in place (`cp new.idx live.idx` truncates it first) would change bytes under
//! a running search, and reading a page past the truncated end raises SIGBUS, which
//! kills the process (measured: exit 135, the question in flight lost). A read lease
//! (`fcntl(F_SETLEASE, F_RDLCK)`) makes the kernel hold such a writer's `open` and tell
//! us (SIGIO); we then copy the bytes into anonymous memory and `mremap` the copy over the
//! mapping, so every `&[u8]` handed out by the index keeps pointing at the same bytes,
//! now ours, and only then release the lease and let the writer proceed. No reader has
//! to be stopped or told: the address range never becomes unmapped (mremap replaces it
//! under the kernel's mm lock, which page faults also take).
//!
//! Everything unsafe of the hot-swap feature is in this file.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Takes a read lease on `file` (opened read-only). Fails when the file is open for
/// writing anywhere (`EAGAIN`), when we neither own it nor have `CAP_LEASE` (`EACCES`),
/// or when its filesystem has no leases (NFS, some FUSE).
pub fn take_read_lease(file: &File) -> io::Result<()> {
    // SAFETY: fcntl on a file descriptor we own (borrowed from a live `File`) with
    // integer arguments only; no memory is passed.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Releases the lease on `file`, which lets a writer waiting in `open` proceed.
pub fn release_lease(file: &File) -> io::Result<()> {
    // SAFETY: as in `take_read_lease`.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// True when the kernel is breaking the lease on `file` (a writer is waiting) or it is
/// already gone: `F_GETLEASE` reports the type the lease is being downgraded to.
pub fn lease_broken(file: &File) -> bool {
    // SAFETY: as in `take_read_lease`.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLEASE) };
    r != libc::F_RDLCK
}

/// Replaces the pages of the mapping that holds `bytes` with a private anonymous copy of
/// the same bytes, at the same address, read-only. `bytes` must be exactly a whole
/// mapping made by `mmap` at offset 0 (page-aligned start), as `Index` holds it.
///
/// Call it while the file's bytes are still intact (a lease holds the writer back).
pub fn detach(bytes: &[u8]) -> io::Result<()> {
    // SAFETY: sysconf has no memory arguments.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page).map_err(|_| io::Error::other("no page size"))?;
    let addr = bytes.as_ptr();
    if bytes.is_empty() || !(addr as usize).is_multiple_of(page) {
        return Err(io::Error::other("not a whole mapping"));
    }
    let len = bytes.len().div_ceil(page) * page;
    // SAFETY: a fresh private anonymous mapping; the kernel picks the address.
    let anon = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if anon == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `anon` is a new writable mapping of `len >= bytes.len()` bytes that nothing
    // else refers to; `bytes` is readable for its length (it is a live slice) and the two
    // ranges cannot overlap (different mappings).
    unsafe { std::ptr::copy_nonoverlapping(addr, anon.cast::<u8>(), bytes.len()) };
    // SAFETY: `anon`/`len` is exactly the mapping made above.
    if unsafe { libc::mprotect(anon, len, libc::PROT_READ) } == -1 {
        let e = io::Error::last_os_error();
        // SAFETY: unmaps only our own fresh mapping.
        unsafe { libc::munmap(anon, len) };
        return Err(e);
    }
    // SAFETY: moves our anonymous pages onto `[addr, addr + len)`, which is the whole
    // mapping behind `bytes` (page-aligned start, length rounded up to pages as mmap
    // did); the kernel unmaps the old file pages and installs ours atomically with
    // respect to page faults. The bytes at every address are the ones they were (we
    // copied them), so the `&[u8]`s that point into the range stay valid and unchanged,
    // and the owner's eventual munmap of the same range unmaps the copy instead.
    let moved = unsafe {
        libc::mremap(
            anon,
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            addr.cast_mut().cast::<libc::c_void>(),
        )
    };
    if moved == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        // SAFETY: the move failed, so `anon` is still our own mapping.
        unsafe { libc::munmap(anon, len) };
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A mapping detached from its file keeps its bytes when the file is then truncated
    /// and rewritten; without the detach, reading it would raise SIGBUS.
    #[test]
    fn detached_mapping_survives_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &content).unwrap();
        let f = File::open(&p).unwrap();
        // SAFETY: test-only mapping of a file this test owns.
        let map = unsafe { memmap2::Mmap::map(&f).unwrap() };
        detach(&map).unwrap();
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        w.write_all(b"short").unwrap();
        drop(w);
        assert_eq!(&map[..], &content[..]);
        assert_eq!(std::fs::read(&p).unwrap(), b"short");
    }

    #[test]
    fn a_slice_that_is_not_a_whole_mapping_is_refused() {
        let v = [1u8; 100];
        let off = if (v.as_ptr() as usize).is_multiple_of(4096) {
            &v[1..]
        } else {
            &v[..]
        };
        assert!(detach(off).is_err());
    }
}
