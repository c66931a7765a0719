//! The inner loops of a lexical query, per architecture: bit unpacking and gaps to
//! document ids (decoding a posting block), and term-at-a-time BM25 scoring of a block.
//!
//! Why a module of its own: these loops are ~85% of a query on a kiosk-sized corpus
//! (perf on Spoken-SQuAD, 2026-12-02, AMD EPYC: scoring 47%, decoding 37%), and a query runs on
//! every partial. The block layout (`bitpack`: LSB-first bit stream, value `i` at bits
//! `i·W..(i+1)·W`) and the BM25 arithmetic (`bm25::Scorer`) are unchanged; what changes
//! is how many values one instruction sequence handles: one (scalar), four (NEON) or
//! eight (AVX2).
//!
//! As in `scan`: one portable reference (`scalar`) and one module per architecture, the
//! set chosen once from what the CPU reports and kept as plain function pointers in a
//! `OnceLock` (no lock, no feature check on the hot path); `PRIMD_FORCE_SCALAR=1` forces
//! the scalar kernels. Invariant: every kernel returns exactly what the scalar one
//! returns, for any input, including truncated or garbage bytes; the tests check every
//! set the running CPU supports against it.

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86_64;

use std::sync::OnceLock;

use super::bm25::Scorer;

/// Values per group: eight values of `W` bits are exactly `W` bytes.
const LANES: usize = 8;

/// The SIMD unpackers' per-width constants (architectures with SIMD kernels only).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod tables {
    use super::LANES;

    /// Widest values the SIMD kernels unpack: a value starting at bit offset ≤ 7 of its
    /// first byte must fit the 32-bit lane it is shifted in (7 + 25 = 32). Wider ones (a
    /// gap of over 33 million documents, a frequency that large) take the scalar path.
    pub(super) const MAX_SIMD_WIDTH: u32 = 25;

    /// Per-width constants of the SIMD unpackers, for a group of eight values.
    pub(super) struct Table {
        /// Byte shuffle: lane `j`'s four bytes start at byte `j·W / 8` of the group,
        /// counted from the start of its half's load (byte 0 for lanes 0-3, byte `W / 2`
        /// for lanes 4-7).
        pub(super) shuffle: [u8; 32],
        /// Right shift of lane `j`: `j·W mod 8`.
        pub(super) shifts: [u32; 8],
    }

    const fn table(w: usize) -> Table {
        let mut t = Table {
            shuffle: [0; 32],
            shifts: [0; 8],
        };
        let mut j = 0;
        while j < LANES {
            let bit = j * w;
            let base = if j < 4 { 0 } else { w / 2 };
            let mut k = 0;
            while k < 4 {
                t.shuffle[j * 4 + k] = (bit / 8 - base + k) as u8;
                k += 1;
            }
            t.shifts[j] = (bit % 8) as u32;
            j += 1;
        }
        t
    }

    pub(super) static TABLES: [Table; MAX_SIMD_WIDTH as usize + 1] = {
        let mut all = [const {
            Table {
                shuffle: [0; 32],
                shifts: [0; 8],
            }
        }; MAX_SIMD_WIDTH as usize + 1];
        let mut w = 1;
        while w <= MAX_SIMD_WIDTH as usize {
            all[w] = table(w);
            w += 1;
        }
        all
    };
}
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use tables::{MAX_SIMD_WIDTH, TABLES};

/// One query term, as the scoring kernels need it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TermScore {
    pub scorer: Scorer,
    pub idf: f32,
    /// The term's query weight (how often the query holds it, revision terms less).
    pub weight: f32,
}

type ScoreFn = unsafe fn(&[u32], &[u32], &[f32], &mut [f32], TermScore);

#[derive(Clone, Copy)]
struct Kernels {
    name: &'static str,
    unpack: unsafe fn(&[u8], u32, &mut [u32]),
    gaps_to_docs: unsafe fn(&mut [u32], u32) -> u32,
    unpack_docs: unsafe fn(&[u8], u32, u32, &mut [u32]) -> u32,
    score: ScoreFn,
}

const SCALAR: Kernels = Kernels {
    name: "scalar",
    unpack: scalar::unpack,
    gaps_to_docs: scalar::gaps_to_docs,
    unpack_docs: scalar::unpack_docs,
    score: scalar::score,
};

/// Every kernel set this CPU can run, best last (only detected ones: that is what makes
/// calling them sound).
fn supported() -> heapless::Vec<Kernels, 2> {
    let mut sets = heapless::Vec::new();
    let _ = sets.push(SCALAR);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let _ = sets.push(Kernels {
            name: "x86_64-avx2",
            unpack: x86_64::unpack_avx2,
            gaps_to_docs: x86_64::gaps_to_docs_avx2,
            unpack_docs: x86_64::unpack_docs_avx2,
            score: x86_64::score_avx2,
        });
    }
    #[cfg(target_arch = "aarch64")]
    if std::arch::is_aarch64_feature_detected!("neon") {
        let _ = sets.push(Kernels {
            name: "aarch64-neon",
            unpack: aarch64::unpack_neon,
            gaps_to_docs: aarch64::gaps_to_docs_neon,
            unpack_docs: aarch64::unpack_docs_neon,
            score: aarch64::score_neon,
        });
    }
    sets
}

fn kernels() -> &'static Kernels {
    static CHOSEN: OnceLock<Kernels> = OnceLock::new();
    CHOSEN.get_or_init(|| crate::simd::choose(SCALAR, &supported()))
}

/// Unpacks `out.len()` values of `width` bits from the start of `bytes` (value `i` =
/// bits `i·width..(i+1)·width`, LSB first). `width` 0 or > 32 gives zeros; bytes missing
/// at the end read as zero bits (a truncated list yields garbage, never a panic). Bytes
/// past the packed values are read but masked off: pass the rest of the list when there
/// is one, and most groups are read in place.
#[inline]
pub(crate) fn unpack(bytes: &[u8], width: u32, out: &mut [u32]) {
    if width == 0 || width > 32 {
        out.fill(0);
        return;
    }
    // SAFETY: `kernels()` holds only functions whose CPU features were detected.
    unsafe { (kernels().unpack)(bytes, width, out) }
}

/// Gaps to document ids, in place: `doc = next + gap`, then `next = doc + 1` (wrapping:
/// callers check beforehand that the sum stays in range). Returns the final `next`.
#[inline]
pub(crate) fn gaps_to_docs(vals: &mut [u32], next: u32) -> u32 {
    // SAFETY: as in `unpack`.
    unsafe { (kernels().gaps_to_docs)(vals, next) }
}

/// [`unpack`] then [`gaps_to_docs`] in one pass (the ids of a block from its packed
/// gaps); returns the final `next`.
#[inline]
pub(crate) fn unpack_docs(bytes: &[u8], width: u32, next: u32, out: &mut [u32]) -> u32 {
    // SAFETY: as in `unpack`.
    unsafe { (kernels().unpack_docs)(bytes, width, next, out) }
}

/// Term-at-a-time scoring of one decoded block: for each posting `(docs[i], tfs[i] + 1)`,
/// `acc[d] += weight · Scorer::score(idf, tf, norms[d])`, with exactly the scalar
/// roundings (the SIMD twins compute the same operations in the same order). A posting
/// whose id is outside `norms` or `acc` is skipped (only a corrupt list has one).
#[inline]
pub(crate) fn score(docs: &[u32], tfs: &[u32], norms: &[f32], acc: &mut [f32], t: TermScore) {
    // SAFETY: as in `unpack`.
    unsafe { (kernels().score)(docs, tfs, norms, acc, t) }
}

/// Term-at-a-time scoring from decoded postings ([`Decoded`](super::decoded::Decoded)):
/// `acc[docs[i]] += weight · contribs[i]`, the last multiply and add of [`score`] with
/// the same roundings. One scattered add per posting leaves nothing for SIMD to gain, so
/// this is the portable loop on every architecture. Ids outside `acc` are skipped.
#[inline]
pub(crate) fn add(docs: &[u32], contribs: &[f32], weight: f32, acc: &mut [f32]) {
    scalar::add(docs, contribs, weight, acc)
}

/// Term-at-a-time scoring from a dense row of contributions (one per document, zero
/// where the term is absent): `acc[d] += weight · row[d]`, the same roundings as [`add`].
/// A sequential pass the compiler vectorises on every target (no fused multiply-add: Rust
/// never contracts), so this too is the portable loop.
#[inline]
pub(crate) fn add_row(row: &[f32], weight: f32, acc: &mut [f32]) {
    scalar::add_row(row, weight, acc)
}

/// Name of the kernel set chosen at run time, for logs and benchmarks: "x86_64-avx2",
/// "aarch64-neon" or "scalar".
pub fn kernel_name() -> &'static str {
    kernels().name
}

/// Every kernel set of this architecture (for the CI check that the best ones ran).
#[cfg(all(test, target_arch = "x86_64"))]
const KERNEL_SETS: &[&str] = &["scalar", "x86_64-avx2"];
#[cfg(all(test, target_arch = "aarch64"))]
const KERNEL_SETS: &[&str] = &["scalar", "aarch64-neon"];
#[cfg(all(test, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
const KERNEL_SETS: &[&str] = &["scalar"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// Bit-at-a-time reference, independent of the kernels' grouping.
    fn naive_unpack(bytes: &[u8], width: u32, n: usize) -> Vec<u32> {
        (0..n)
            .map(|i| {
                (0..width as usize).fold(0u32, |v, b| {
                    let bit = i * width as usize + b;
                    let set = bytes.get(bit / 8).is_some_and(|&x| x >> (bit % 8) & 1 == 1);
                    v | (u32::from(set) << b)
                })
            })
            .collect()
    }

    #[test]
    fn every_kernel_set_unpacks_like_the_reference() {
        let sets = supported();
        let mut rng = Rng::new(0xb17_9ac);
        for width in 0..=33u32 {
            for n in [0usize, 1, 5, 7, 8, 9, 15, 16, 17, 63, 64, 100, 127, 128] {
                // Exact length, a few spare bytes, and truncated: every load path.
                let exact = (n * width as usize).div_ceil(8);
                for len in [exact, exact + 3, exact + 8, exact + 40, exact / 2] {
                    let bytes = rng.bytes(len, &[0x00, 0xff, 0xa5, 0x5a, 0x13, 0xec]);
                    let want = match width {
                        1..=32 => naive_unpack(&bytes, width, n),
                        _ => vec![0; n],
                    };
                    for k in &sets {
                        let mut got = vec![0xdead_beef; n];
                        if (1..=32).contains(&width) {
                            // SAFETY: `supported()` returns only detected sets.
                            unsafe { (k.unpack)(&bytes, width, &mut got) };
                        } else {
                            got.fill(0);
                        }
                        assert_eq!(got, want, "{} width {width} n {n} len {len}", k.name);
                        // Fused with gaps to ids: the same as the two steps.
                        for next in [0u32, 5, u32::MAX - 3] {
                            let mut ids = want.clone();
                            let want_next = scalar::gaps_to_docs(&mut ids, next);
                            let mut got = vec![0xdead_beef; n];
                            // SAFETY: as above.
                            let got_next =
                                unsafe { (k.unpack_docs)(&bytes, width, next, &mut got) };
                            assert_eq!((got, got_next), (ids, want_next), "{} fused", k.name);
                        }
                    }
                }
            }
        }
        // The dispatching entry point too.
        let mut out = [7u32; 3];
        unpack(&[0xff; 20], 33, &mut out);
        assert_eq!(out, [0, 0, 0]);
        let names: Vec<&str> = sets.iter().map(|k| k.name).collect();
        crate::testing::require_kernels("lexical::kernels", KERNEL_SETS, &names);
    }

    #[test]
    fn every_kernel_set_scores_like_the_reference_bit_for_bit() {
        let sets = supported();
        let mut rng = Rng::new(0x5c0e);
        let scorer = Scorer::new(crate::lexical::Bm25::default(), 97.3);
        for n_docs in [0usize, 1, 9, 300] {
            let norms: Vec<f32> = (0..n_docs)
                .map(|_| scorer.norm(rng.below(400) as u32))
                .collect();
            for len in [0usize, 1, 3, 4, 7, 8, 9, 17, 128] {
                // Ascending ids as a block has them; then repeats, ids past the end and
                // absurd frequencies, as only a corrupt list has them.
                for case in 0..4 {
                    let mut docs: Vec<u32> = (0..len)
                        .map(|_| rng.below(n_docs.max(1) as u64) as u32)
                        .collect();
                    let mut tfs: Vec<u32> = (0..len).map(|_| rng.below(6) as u32).collect();
                    match case {
                        0 => docs.sort_unstable(),
                        1 => {}
                        2 => docs.iter_mut().step_by(3).for_each(|d| *d += n_docs as u32),
                        _ => {
                            tfs.iter_mut().step_by(5).for_each(|t| *t = u32::MAX - *t);
                            if let Some(d) = docs.first_mut() {
                                *d = u32::MAX;
                            }
                        }
                    }
                    let t = TermScore {
                        scorer,
                        idf: 0.25 + rng.unit() as f32 * 7.0,
                        weight: [1.0, 0.25, 2.0][case % 3],
                    };
                    let start: Vec<f32> = (0..n_docs).map(|_| rng.unit() as f32).collect();
                    let mut want = start.clone();
                    scalar::score(&docs, &tfs, &norms, &mut want, t);
                    for k in &sets {
                        let mut got = start.clone();
                        // SAFETY: `supported()` returns only detected sets.
                        unsafe { (k.score)(&docs, &tfs, &norms, &mut got, t) };
                        let (w, g): (Vec<u32>, Vec<u32>) = want
                            .iter()
                            .zip(&got)
                            .map(|(w, g)| (w.to_bits(), g.to_bits()))
                            .unzip();
                        assert_eq!(g, w, "{} docs {n_docs} len {len} case {case}", k.name);
                    }
                    // And the reference against the definition, on the valid case.
                    if case == 0 && n_docs > 0 {
                        let mut naive = start.clone();
                        for (&d, &tf) in docs.iter().zip(&tfs) {
                            let norm = norms[d as usize];
                            naive[d as usize] += t.weight * scorer.score(t.idf, tf + 1, norm);
                        }
                        assert_eq!(naive, want);
                    }
                }
            }
        }
        // A longer accumulator than norms (and the reverse) only limits the ids scored.
        let norms = [scorer.norm(10); 4];
        let t = TermScore {
            scorer,
            idf: 1.0,
            weight: 1.0,
        };
        for k in &sets {
            let mut acc = [0f32; 16];
            let docs: Vec<u32> = (0..16).collect();
            // SAFETY: as above.
            unsafe { (k.score)(&docs, &[0; 16], &norms, &mut acc, t) };
            assert!(acc[..4].iter().all(|&a| a > 0.0) && acc[4..].iter().all(|&a| a == 0.0));
        }
    }

    #[test]
    fn every_kernel_set_turns_gaps_into_ids_like_the_reference() {
        let sets = supported();
        let mut rng = Rng::new(0x9a95);
        for n in [0usize, 1, 3, 4, 7, 8, 9, 31, 64, 127, 128] {
            for max_gap in [1u64, 3, 1000, 1 << 32] {
                let gaps: Vec<u32> = (0..n).map(|_| rng.below(max_gap) as u32).collect();
                for next in [0u32, 1, 77, u32::MAX - 5] {
                    let mut want = gaps.clone();
                    let want_next = scalar::gaps_to_docs(&mut want, next);
                    // Against the definition too: id i = next + i + the gaps up to i.
                    let mut sum = u64::from(next);
                    for (i, &g) in gaps.iter().enumerate() {
                        sum += u64::from(g);
                        assert_eq!(want[i], (sum + i as u64) as u32);
                    }
                    for k in &sets {
                        let mut got = gaps.clone();
                        // SAFETY: `supported()` returns only detected sets.
                        let got_next = unsafe { (k.gaps_to_docs)(&mut got, next) };
                        assert_eq!(got, want, "{} n {n} next {next}", k.name);
                        assert_eq!(got_next, want_next, "{} n {n} next {next}", k.name);
                    }
                }
            }
        }
    }
}
