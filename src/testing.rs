//! Test support shared by the unit tests, the integration tests and the benches: one
//! seeded random generator ([`Rng`]), the CI check that the best kernels of the CPU
//! were the ones tested, and a small index embedded by the fake embedder
//! ([`hash_index`]). Not part of primd's API. (`primd bench` seeds its synthetic index
//! with [`Rng`] too.)

/// The one seeded test generator (it lives in the input crate, the lowest of the
/// workspace, so that crate's tests use it too).
pub use primd_input::testing::Rng;

/// Environment variable listing the kernel sets that must have been tested,
/// comma-separated (`x86_64-avx2,x86_64-avx512vnni,...`): `.ci/run` sets it from what the
/// CI machine's CPU supports.
#[cfg(test)]
pub const REQUIRE_KERNELS: &str = "PRIMD_REQUIRE_KERNELS";

/// Reports which kernel sets of `module` the tests ran (`ran`, out of `catalogue`: every
/// set this architecture has) and fails when one named in [`REQUIRE_KERNELS`] did not
/// run, or when `CI` is set but [`REQUIRE_KERNELS`] is not: on CI a CPU without the best
/// kernels cannot silently skip them. Elsewhere, without the variable, any CPU passes.
#[cfg(test)]
pub fn require_kernels(module: &str, catalogue: &[&str], ran: &[&str]) {
    eprintln!("{module}: kernel sets tested: {ran:?} (this architecture has {catalogue:?})");
    for name in ran {
        assert!(
            catalogue.contains(name),
            "{module}: {name} missing from the catalogue"
        );
    }
    let required = match std::env::var(REQUIRE_KERNELS) {
        Ok(list) => list,
        Err(_) if std::env::var_os("CI").is_some() => panic!(
            "CI is set but {REQUIRE_KERNELS} is not: CI must name the kernel sets its CPU \
             supports (.ci/run does)"
        ),
        Err(_) => return,
    };
    let known: Vec<&str> = crate::qgemm::KERNEL_SETS
        .iter()
        .chain(crate::scan::KERNEL_SETS)
        .copied()
        .collect();
    for name in required.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        assert!(
            known.contains(&name),
            "{REQUIRE_KERNELS} names {name:?}, which is no kernel set of this architecture \
             ({known:?})"
        );
        if catalogue.contains(&name) {
            assert!(
                ran.contains(&name),
                "{module}: {name} is required ({REQUIRE_KERNELS}) but was not tested: \
                 this CPU does not report its features"
            );
        }
    }
}

/// An index of `(id, text)` passages embedded by the deterministic fake embedder
/// ([`HashEmbedder`](crate::embed::HashEmbedder)), written (with its lexical section) to
/// `dir/t.idx` and opened: the small hand-made corpus of unit tests.
pub fn hash_index(dir: &std::path::Path, corpus: &[(&str, &str)]) -> crate::index::Index {
    hash_index_with(dir, corpus, false)
}

/// [`hash_index`], with the sentence section (`sentences`) or without (an index as
/// built before format v6).
pub fn hash_index_with(
    dir: &std::path::Path,
    corpus: &[(&str, &str)],
    sentences: bool,
) -> crate::index::Index {
    use crate::embed::{DIM, Embed, HashEmbedder};
    use crate::index::{Index, IndexMeta, PassageRecord, WriteOptions, write_index_with};
    let mut e = HashEmbedder;
    let mut vectors = Vec::new();
    let passages: Vec<_> = corpus
        .iter()
        .map(|(id, text)| {
            let mut v = [0.0; DIM];
            e.embed_into(text, &mut v).unwrap();
            vectors.extend_from_slice(&v);
            PassageRecord {
                id: (*id).into(),
                title: String::new(),
                text: (*text).into(),
                chunk: 0,
                word_start: 0,
                word_end: text.split_whitespace().count() as u32,
            }
        })
        .collect();
    let meta = IndexMeta {
        dim: DIM as u32,
        fingerprint: e.fingerprint(),
        chunk_words: 0,
        overlap_words: 0,
    };
    let path = dir.join("t.idx");
    let options = WriteOptions {
        sentences: sentences.then(|| crate::context::sentence_table(&mut e, &passages).unwrap()),
        ..WriteOptions::default()
    };
    write_index_with(&path, &meta, &passages, &vectors, &options).unwrap();
    Index::open(&path).unwrap()
}
