//! The on-disk index (the version it writes is `FORMAT_VERSION`, the oldest it reads
//! `OLDEST_SUPPORTED`, both in `format.rs`): written once by the offline `build-index`
//! tool, memory-mapped read-only by the daemon.
//!
//! Per passage the index holds a 1-bit sign code of its embedding (for the fast speculative
//! scan while the user is still speaking), an int8 vector with one `f32` scale (to rerank the
//! scan's candidates), and the passage itself (id, title, text, chunk position). From v2 on,
//! an optional lexical section holds a BM25 inverted index over the passages (`crate::lexical`);
//! from v6 on, an optional sentence section holds each passage's sentences (`sentences`,
//! for `crate::context`). The exact
//! layout is in `index/FORMAT.md` and the constants of `format.rs`; the short version: a fixed
//! 256-byte header with a section table, 64-byte aligned sections, and a 16-byte footer holding
//! a CRC-32 of everything before it.
//!
//! Why it is shaped this way:
//! - the daemon maps the file and searches it in place: no parse step at start-up, no copy, and
//!   on a small board the OS keeps only the touched pages resident;
//! - `Index::open` validates everything slicing relies on, cheaply, so no file (truncated,
//!   corrupted, hostile) can make the daemon panic; the full CRC pass pages in the whole file and
//!   is therefore opt-in (`Index::verify`, behind `--verify`);
//! - files are only ever replaced by renaming a complete new file over the old one, so a running
//!   daemon's mapping is never changed underneath it;
//! - the header records the model+tokenizer fingerprint, so vectors are never compared against
//!   queries embedded by a different model (`Index::check_fingerprint`).

#[cfg_attr(not(target_os = "linux"), path = "detach_other.rs")]
mod detach;
mod error;
mod format;
#[doc(hidden)]
pub mod fuzz;
pub mod live;
mod read;
mod sentences;
mod write;

pub use error::IndexError;
pub use format::{
    FORMAT_VERSION, Fingerprint, IndexMeta, MAGIC, OLDEST_SUPPORTED, PassageRecord, PassageRef,
    quantize_i8, sign_code,
};
pub use read::{Index, Load};
pub use sentences::{SentenceSpan, SentenceTable, Sentences};
pub use write::{WriteOptions, write_index, write_index_with};

/// The text that is embedded for a passage: its title, a newline, then the passage
/// (titles often name the topic a question is about, as in "title + text" retrieval
/// baselines). One definition, so `build-index` and tests embed passages alike.
pub fn passage_embed_text(title: &str, text: &str) -> String {
    if title.is_empty() {
        text.to_string()
    } else {
        format!("{title}\n{text}")
    }
}

/// Shared fixtures for the tests of this module's files.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{IndexMeta, PassageRecord};

    /// The test generator, under the name these tests know it by.
    pub use crate::testing::Rng as XorShift;

    /// A random unit vector (uniform on the sphere).
    pub fn unit_vector(rng: &mut XorShift, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim).map(|_| rng.gauss()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    pub fn meta(dim: u32) -> IndexMeta {
        let mut fingerprint = [0u8; 32];
        for (i, b) in fingerprint.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(11);
        }
        IndexMeta {
            dim,
            fingerprint,
            chunk_words: 120,
            overlap_words: 20,
        }
    }

    /// `count` passages (several chunks per document, some non-ASCII text, an empty title) and
    /// their random unit vectors.
    pub fn corpus(count: usize, dim: usize, seed: u64) -> (Vec<PassageRecord>, Vec<f32>) {
        let mut rng = XorShift::new(seed);
        let words = [
            "retrieval",
            "während",
            "voice",
            "agent",
            "ｐｉ",
            "board",
            "模型",
            "ARM",
        ];
        let passages = (0..count)
            .map(|i| {
                let n = 1 + rng.below(30) as usize;
                let text: Vec<&str> = (0..n).map(|_| words[rng.below(8) as usize]).collect();
                let chunk = (i % 3) as u32;
                PassageRecord {
                    id: format!("doc-{}", i / 3),
                    title: if i % 5 == 0 {
                        String::new()
                    } else {
                        format!("Title «{}»", i / 3)
                    },
                    text: text.join(" "),
                    chunk,
                    word_start: chunk * 100,
                    word_end: chunk * 100 + n as u32,
                }
            })
            .collect();
        let vectors = (0..count)
            .flat_map(|_| unit_vector(&mut rng, dim))
            .collect();
        (passages, vectors)
    }
}
