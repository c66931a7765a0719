//! The index `primd run` serves, replaceable while it runs (`SIGHUP`, `install-index`)
//! and protected against tools that write into the file in place.
//!
//! Why a separate handle: a kiosk runs for months and its corpus changes. Restarting to
//! pick up a new index loses the utterance in flight and the warm caches; writing the
//! new file over the old one in place kills a process that maps it (SIGBUS). So:
//!
//! - **Reload** ([`LiveIndex::reload`], on SIGHUP): open the file at the configured path
//!   again, run the cheap checks and the CRC, check the model fingerprint (equal to the
//!   one the running model was checked against) and that it has the lexical section the
//!   retriever needs; only then stage it. Any failure is logged with its reason and the
//!   old index keeps serving. Validation runs on the signal thread, never on the
//!   retriever's.
//! - **Swap** ([`LiveIndex::take_staged`]): the retriever polls one atomic flag at an
//!   utterance boundary and takes the staged index there, so an utterance in flight
//!   finishes on the index it started on; the old index is unmapped when its last user
//!   (the output writer, for results still queued) drops it.
//! - **In-place writers**: by default the file is mapped with a read lease held on the
//!   same inode. A writer's `open` then waits while we copy the bytes into private memory
//!   at the same address (`index::detach`) and release the lease; the daemon
//!   keeps answering from the copy, and a later SIGHUP loads what was written. Leases
//!   need the daemon to own the file (or `CAP_LEASE`) and a local filesystem; when one
//!   cannot be taken this is logged, and `--index-in-ram` (read the file into memory,
//!   no mapping at all) is the alternative for small indexes.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::detach;
use super::{Fingerprint, Index, IndexError, Load};

/// How the daemon holds its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Serve {
    pub load: Load,
    /// Hold a read lease on the mapped file (Linux; ignored with `load.in_ram`).
    pub lease: bool,
}

impl Default for Serve {
    fn default() -> Self {
        Serve {
            load: Load {
                in_ram: false,
                populate: true,
            },
            lease: true,
        }
    }
}

/// Why a reload was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("{path:?} has no lexical section, which the {retriever} retriever needs")]
    NoLexical { path: PathBuf, retriever: String },
}

/// An index and the lease held on its file (dropping the file ends the lease).
struct Held {
    index: Arc<Index>,
    lease: Option<File>,
}

struct Slots {
    current: Held,
    /// Validated, waiting for the next utterance boundary.
    staged: Option<Held>,
    /// What a new index must have: the running model's fingerprint ...
    fingerprint: Fingerprint,
    /// ... and, when the retriever uses it, a lexical section (named here).
    lexical_for: Option<String>,
}

/// The served index plus at most one validated successor.
pub struct LiveIndex {
    path: PathBuf,
    serve: Serve,
    staged: AtomicBool,
    slots: Mutex<Slots>,
}

impl LiveIndex {
    /// Opens `path` as `serve` says (cheap checks only; `verify` is the caller's choice at
    /// start-up). The model fingerprint required of later reloads is this index's own
    /// (the daemon refuses to start unless it matches the model it loads).
    pub fn open(path: &Path, serve: Serve) -> Result<LiveIndex, IndexError> {
        let held = open_held(path, serve)?;
        let fingerprint = held.index.meta().fingerprint;
        Ok(LiveIndex {
            path: path.to_path_buf(),
            serve,
            staged: AtomicBool::new(false),
            slots: Mutex::new(Slots {
                current: held,
                staged: None,
                fingerprint,
                lexical_for: None,
            }),
        })
    }

    /// An index that is served as it is: no lease, and a reload opens its path again
    /// with the default [`Serve`] (tests, and callers that opened the index themselves).
    pub fn fixed(index: Arc<Index>) -> LiveIndex {
        let fingerprint = index.meta().fingerprint;
        LiveIndex {
            path: index.path().to_path_buf(),
            serve: Serve {
                lease: false,
                ..Serve::default()
            },
            staged: AtomicBool::new(false),
            slots: Mutex::new(Slots {
                current: Held { index, lease: None },
                staged: None,
                fingerprint,
                lexical_for: None,
            }),
        }
    }

    /// Later reloads must have a lexical section, because `retriever` (named in the
    /// refusal) uses it.
    pub fn require_lexical(&self, retriever: &str) {
        self.lock().lexical_for = Some(retriever.to_string());
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The index being served.
    pub fn current(&self) -> Arc<Index> {
        self.lock().current.index.clone()
    }

    /// Whether a read lease guards the served file.
    pub fn leased(&self) -> bool {
        self.lock().current.lease.is_some()
    }

    /// Opens the file at the path again and validates it fully; stages it for the next
    /// utterance boundary. On error the served index is untouched.
    pub fn reload(&self) -> Result<Arc<Index>, ReloadError> {
        let held = open_held(&self.path, self.serve)?;
        held.index.verify()?;
        let mut slots = self.lock();
        held.index.check_fingerprint(&slots.fingerprint)?;
        if let Some(r) = &slots.lexical_for
            && held.index.lexical().is_none()
        {
            return Err(ReloadError::NoLexical {
                path: self.path.clone(),
                retriever: r.clone(),
            });
        }
        let index = held.index.clone();
        slots.staged = Some(held);
        self.staged.store(true, Ordering::Release);
        Ok(index)
    }

    /// True when a validated index waits to be swapped in: one atomic load, for the
    /// retriever's loop.
    #[inline]
    pub fn swap_pending(&self) -> bool {
        self.staged.load(Ordering::Acquire)
    }

    /// Makes the staged index the served one and returns it (None: nothing staged). The
    /// old one's lease is released; its mapping lives until its last user drops it.
    pub fn take_staged(&self) -> Option<Arc<Index>> {
        let mut slots = self.lock();
        self.staged.store(false, Ordering::Release);
        let next = slots.staged.take()?;
        let index = next.index.clone();
        slots.current = next;
        Some(index)
    }

    /// A writer wants into a leased file (SIGIO): every held index whose lease is being
    /// broken is moved onto a private copy of its bytes, then its lease released. Returns
    /// how many were detached.
    pub fn on_lease_break(&self) -> usize {
        let mut slots = self.lock();
        let Slots {
            current, staged, ..
        } = &mut *slots;
        let mut n = 0;
        for held in std::iter::once(current).chain(staged.as_mut()) {
            let Some(file) = &held.lease else { continue };
            if !detach::lease_broken(file) {
                continue;
            }
            match detach::detach(held.index.bytes()) {
                Ok(()) => {
                    n += 1;
                    log::warn!(
                        "another process opened {:?} for writing: serving a private copy of \
                         the index ({} bytes) from memory; publish indexes with \
                         `primd install-index` (write elsewhere + rename), then SIGHUP loads them",
                        held.index.path(),
                        held.index.bytes().len()
                    );
                }
                Err(e) => log::error!(
                    "could not copy {:?} out of the way of a writer ({e}); a truncation will \
                     crash primd",
                    held.index.path()
                ),
            }
            if let Err(e) = detach::release_lease(file) {
                log::warn!("releasing the lease on {:?}: {e}", held.index.path());
            }
            held.lease = None;
        }
        n
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        // A panic while holding the lock cannot leave the slots inconsistent (each
        // update is a single assignment), so a poisoned lock is still usable.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Opens `path`: the lease is taken on the descriptor before mapping it, so the lease
/// and the mapping are on the same inode whatever renames happen meanwhile.
fn open_held(path: &Path, serve: Serve) -> Result<Held, IndexError> {
    let io = |source| IndexError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let lease = serve.lease && !serve.load.in_ram;
    let leased = lease
        && match detach::take_read_lease(&file) {
            Ok(()) => true,
            Err(e) => {
                log::warn!(
                    "no read lease on {path:?} ({e}): a tool writing into this file in place \
                     (cp onto it) would crash primd. Publish indexes by rename \
                     (`primd install-index`), run primd as the file's owner, or use --index-in-ram"
                );
                false
            }
        };
    let index = Index::from_file(&file, path, serve.load)?;
    Ok(Held {
        index: Arc::new(index),
        lease: leased.then_some(file),
    })
}

/// SIGHUP (reload) and SIGIO (a lease being broken) for a [`LiveIndex`], handled on a
/// thread of their own. Registered before the index is opened: SIGIO's default action
/// kills the process, and SIGHUP's too.
pub struct Signals(signal_hook::iterator::Signals);

impl Signals {
    pub fn register() -> std::io::Result<Signals> {
        use signal_hook::consts::{SIGHUP, SIGIO};
        Ok(Signals(signal_hook::iterator::Signals::new([
            SIGHUP, SIGIO,
        ])?))
    }

    /// Handles the signals for `live` from now on (signals that arrived since
    /// [`register`](Self::register) are handled first).
    pub fn spawn(mut self, live: Arc<LiveIndex>) -> std::io::Result<()> {
        use signal_hook::consts::{SIGHUP, SIGIO};
        std::thread::Builder::new()
            .name("primd-index".into())
            .spawn(move || {
                for sig in self.0.forever() {
                    match sig {
                        SIGIO => {
                            live.on_lease_break();
                        }
                        SIGHUP => match live.reload() {
                            Ok(ix) => log::info!(
                                "SIGHUP: {:?} is valid ({} passages, checksum and model \
                                 fingerprint match): swapping it in at the next utterance",
                                live.path(),
                                ix.len()
                            ),
                            Err(e) => {
                                log::error!(
                                    "SIGHUP: index reload refused, still serving the old one: {e}"
                                );
                                crate::notify::Notifier::from_env()
                                    .status(&format!("index reload refused: {e}"));
                            }
                        },
                        _ => {}
                    }
                }
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::format::{OFF_SECTIONS, SEC_VECTORS};
    use crate::index::test_support::{corpus, meta};
    use crate::index::write_index;

    fn write(p: &Path, n: usize, seed: u64) {
        let (passages, vectors) = corpus(n, 64, seed);
        write_index(p, &meta(64), &passages, &vectors).unwrap();
    }

    fn no_lease() -> Serve {
        Serve {
            lease: false,
            ..Serve::default()
        }
    }

    #[test]
    fn reload_stages_a_good_index_and_swaps_only_when_taken() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("live.idx");
        write(&p, 5, 1);
        let live = LiveIndex::open(&p, no_lease()).unwrap();
        let old = live.current();
        write(&p, 9, 2); // write_index renames over the path
        assert!(!live.swap_pending());
        live.reload().unwrap();
        assert!(live.swap_pending());
        assert_eq!(live.current().len(), 5, "not before the boundary");
        let new = live.take_staged().unwrap();
        assert_eq!((new.len(), live.current().len()), (9, 9));
        assert!(!live.swap_pending());
        assert!(live.take_staged().is_none());
        // the old one still reads fine for whoever holds it
        assert_eq!(old.len(), 5);
        old.verify().unwrap();
    }

    #[test]
    fn bad_reloads_keep_the_served_index() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("live.idx");
        write(&p, 7, 3);
        let good = std::fs::read(&p).unwrap();
        let live = LiveIndex::open(&p, no_lease()).unwrap();
        let put = |bytes: &[u8]| {
            let tmp = dir.path().join("tmp");
            std::fs::write(&tmp, bytes).unwrap();
            std::fs::rename(&tmp, &p).unwrap();
        };
        // truncated
        put(&good[..good.len() / 2]);
        assert!(live.reload().is_err());
        // one flipped bit inside the vectors: only the CRC sees it
        let mut flipped = good.clone();
        let at = OFF_SECTIONS + 16 * SEC_VECTORS;
        let vectors = u64::from_le_bytes(good[at..at + 8].try_into().unwrap()) as usize;
        flipped[vectors + 1] ^= 0x10;
        put(&flipped);
        let e = live.reload().unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        // another model's index
        let (passages, vectors) = corpus(7, 64, 3);
        let mut other = meta(64);
        other.fingerprint[0] ^= 1;
        write_index(&p, &other, &passages, &vectors).unwrap();
        let e = live.reload().unwrap_err();
        assert!(
            matches!(e, ReloadError::Index(IndexError::ModelMismatch { .. })),
            "{e}"
        );
        // missing
        std::fs::remove_file(&p).unwrap();
        assert!(live.reload().is_err());
        assert!(!live.swap_pending());
        assert!(live.take_staged().is_none());
        assert_eq!(live.current().len(), 7);
        live.current().verify().unwrap();
    }

    #[test]
    fn a_retriever_that_needs_lexical_refuses_an_index_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("live.idx");
        write(&p, 4, 5);
        let live = LiveIndex::open(&p, no_lease()).unwrap();
        live.require_lexical("hybrid");
        let (passages, vectors) = corpus(4, 64, 5);
        let opts = crate::index::WriteOptions {
            lexical: None,
            sentences: None,
        };
        crate::index::write_index_with(&p, &meta(64), &passages, &vectors, &opts).unwrap();
        let e = live.reload().unwrap_err();
        assert!(matches!(e, ReloadError::NoLexical { .. }), "{e}");
        assert!(!live.swap_pending());
    }

    #[test]
    fn in_ram_index_ignores_writes_into_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("live.idx");
        write(&p, 6, 7);
        let serve = Serve {
            load: Load {
                in_ram: true,
                populate: false,
            },
            lease: true,
        };
        let live = LiveIndex::open(&p, serve).unwrap();
        assert!(!live.leased());
        let before = live.current().passage(5).unwrap().text.to_string();
        std::fs::write(&p, b"overwritten in place").unwrap();
        let ix = live.current();
        assert_eq!(ix.passage(5).unwrap().text, before);
        ix.verify().unwrap();
    }
}
