//! Test support shared by the unit tests, the integration tests and the benches: one
//! seeded random generator ([`Rng`]) and the CI check that the best kernels of the CPU
//! were the ones tested. Not part of primd's API.

/// xorshift64*: a tiny seeded generator, so tests and benches need no extra crate and
/// give the same inputs on every machine and run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits (an endless generator: no `Option`, hence no `Iterator`).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform-ish in `0..n` (`n > 0`), for indexing.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in `(0, 1)`.
    pub fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn gauss(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }

    /// `n` values uniform in `[-amp, amp)`.
    pub fn f32s(&mut self, n: usize, amp: f32) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * amp)
            .collect()
    }

    /// `n` uniform bytes as `i8`.
    pub fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| (self.next() >> 56) as i8).collect()
    }

    /// `n` bytes drawn from `alphabet`.
    pub fn bytes(&mut self, n: usize, alphabet: &[u8]) -> Vec<u8> {
        (0..n)
            .map(|_| alphabet[self.below(alphabet.len() as u64) as usize])
            .collect()
    }
}

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
    use crate::embed::{DIM, Embed, HashEmbedder};
    use crate::index::{Index, IndexMeta, PassageRecord, write_index};
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
                word_end: 0,
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
    write_index(&path, &meta, &passages, &vectors).unwrap();
    Index::open(&path).unwrap()
}
