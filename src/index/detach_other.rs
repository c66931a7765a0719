//! Outside Linux there are no read leases and no `mremap`: the daemon maps its index
//! unguarded (publish by rename, or use `--index-in-ram`). Same interface as `detach.rs`.

use std::fs::File;
use std::io;

fn unsupported() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, "read leases need Linux")
}

pub fn take_read_lease(_: &File) -> io::Result<()> {
    Err(unsupported())
}

pub fn release_lease(_: &File) -> io::Result<()> {
    Err(unsupported())
}

pub fn lease_broken(_: &File) -> bool {
    false
}

pub fn detach(_: &[u8]) -> io::Result<()> {
    Err(unsupported())
}
