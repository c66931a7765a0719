//! `IndexError`: everything that can go wrong writing, opening or reading an index.
//!
//! These messages reach the person running the daemon or `build-index`, usually in a log on a
//! headless board, so every variant names the file it is about and says what to do next
//! (most often: rebuild the index with `build-index`). Error paths may allocate; the success
//! paths of the reader never construct one.

use std::path::PathBuf;

/// An error about one index file; every variant carries that file's path.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("I/O error on index {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "index {} is truncated: it has {size} bytes but needs at least {needed} \
         (an interrupted copy or build?); rebuild it with build-index",
        .path.display()
    )]
    Truncated {
        path: PathBuf,
        size: u64,
        needed: u64,
    },

    #[error("{} is not a primd index (wrong magic bytes)", .path.display())]
    BadMagic { path: PathBuf },

    #[error("{}", unsupported_version_message(.path, *.found, *.supported))]
    UnsupportedVersion {
        path: PathBuf,
        /// The file's format version (or its `min_reader_version` if that is what we lack).
        found: u32,
        /// The range this reader supports: `(OLDEST_SUPPORTED, FORMAT_VERSION)`.
        supported: (u32, u32),
    },

    #[error("index {} is corrupt: {what}; rebuild it with build-index", .path.display())]
    Corrupt { path: PathBuf, what: String },

    #[error(
        "index {} failed its checksum (stored {stored:08x}, computed {computed:08x}): \
         the file is damaged; rebuild it with build-index",
        .path.display()
    )]
    Checksum {
        path: PathBuf,
        stored: u32,
        computed: u32,
    },

    #[error(
        "index {} was built with a different model/tokenizer than the one loaded \
         (index fingerprint {index}…, loaded model {model}…): rebuild the index with this \
         model, or pass the model it was built with",
        .path.display()
    )]
    ModelMismatch {
        path: PathBuf,
        /// Hex prefix of the fingerprint stored in the index.
        index: String,
        /// Hex prefix of the loaded model's fingerprint.
        model: String,
    },

    #[error("index {}: no passages (empty corpus); an index needs at least one", .path.display())]
    Empty { path: PathBuf },

    #[error(
        "cannot write index {}: passage id {id:?} chunk {chunk} occurs more than once \
         ((id, chunk) pairs must be unique)",
        .path.display()
    )]
    DuplicateId {
        path: PathBuf,
        id: String,
        chunk: u32,
    },

    #[error("cannot write index {}: {what}", .path.display())]
    Invalid { path: PathBuf, what: String },
}

impl IndexError {
    /// The file this error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            IndexError::Io { path, .. }
            | IndexError::Truncated { path, .. }
            | IndexError::BadMagic { path }
            | IndexError::UnsupportedVersion { path, .. }
            | IndexError::Corrupt { path, .. }
            | IndexError::Checksum { path, .. }
            | IndexError::ModelMismatch { path, .. }
            | IndexError::Empty { path }
            | IndexError::DuplicateId { path, .. }
            | IndexError::Invalid { path, .. } => path,
        }
    }
}

fn unsupported_version_message(
    path: &std::path::Path,
    found: u32,
    supported: (u32, u32),
) -> String {
    let (oldest, newest) = supported;
    if found > newest {
        format!(
            "index {} was built by a newer primd (format version {found}; this primd reads \
             {oldest}..={newest}): upgrade primd, or rebuild the index with this version's \
             build-index",
            path.display()
        )
    } else {
        format!(
            "index {} uses format version {found}, which is too old (this primd reads \
             {oldest}..={newest}): rebuild it with build-index",
            path.display()
        )
    }
}

/// The first 8 bytes of a fingerprint as 16 hex digits: enough to tell two models apart in a log.
pub(crate) fn hex_prefix(fp: &[u8; 32]) -> String {
    use std::fmt::Write;
    fp[..8].iter().fold(String::with_capacity(16), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_file_and_the_remedy() {
        let path = PathBuf::from("/var/lib/primd/wiki.idx");
        let newer = IndexError::UnsupportedVersion {
            path: path.clone(),
            found: 3,
            supported: (1, 1),
        };
        let s = newer.to_string();
        assert!(s.contains("wiki.idx") && s.contains("newer primd"), "{s}");
        let older = IndexError::UnsupportedVersion {
            path: path.clone(),
            found: 0,
            supported: (1, 1),
        };
        let s = older.to_string();
        assert!(
            s.contains("too old") && s.contains("rebuild it with build-index"),
            "{s}"
        );
        let bad = IndexError::BadMagic { path: path.clone() };
        assert!(bad.to_string().contains("is not a primd index"));
        let cs = IndexError::Checksum {
            path: path.clone(),
            stored: 1,
            computed: 0xdead_beef,
        };
        let s = cs.to_string();
        assert!(
            s.contains("00000001") && s.contains("deadbeef") && s.contains("rebuild"),
            "{s}"
        );
        assert_eq!(cs.path(), path.as_path());
    }

    #[test]
    fn hex_prefix_is_16_digits() {
        let mut fp = [0u8; 32];
        fp[0] = 0xab;
        fp[7] = 0x01;
        fp[8] = 0xff; // not shown
        assert_eq!(hex_prefix(&fp), "ab00000000000001");
    }
}
