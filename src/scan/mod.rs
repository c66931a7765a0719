//! Search kernels: hamming top-k over binary codes, and int8 dot products.
//!
//! One portable reference (`scalar`) and one module per architecture. The kernel set is
//! chosen once, on first use, from what the CPU reports, and kept as plain function
//! pointers in a `OnceLock`: the hot path has no lock, no feature check and no allocation.
//! `PRIMD_FORCE_SCALAR=1` (read once, at that moment) forces the scalar kernels for A/B
//! runs.
//!
//! Invariant: every kernel returns exactly what the scalar one returns, for any lengths,
//! and top-k ties are broken by the smaller index, so results never depend on the machine.
//! The tests below check every kernel set the running CPU supports against naive
//! references and a sort. The kernel functions are `unsafe fn` pointers only because
//! of their `#[target_feature]`s: they are memory-safe for any input, and `supported()`
//! hands out only those whose features were detected.

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86_64;

use std::sync::OnceLock;

use heapless::binary_heap::{BinaryHeap, Max};

/// Largest k a [`TopK`] holds.
pub const MAX_K: usize = 1024;

/// A code's position in the scanned slice and its hamming distance to the query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbor {
    pub index: u32,
    pub distance: u32,
}

/// Fixed-capacity top-k by smallest hamming distance; ties broken by smaller index, so
/// every kernel returns identical results. No heap allocation (heapless).
pub struct TopK {
    /// Max-heap of `(distance, index)`: the root is the current worst kept item.
    heap: BinaryHeap<(u32, u32), Max, MAX_K>,
    k: usize,
}

impl Default for TopK {
    fn default() -> Self {
        Self::new()
    }
}

impl TopK {
    /// An empty top-k with k = [`MAX_K`].
    pub fn new() -> Self {
        TopK {
            heap: BinaryHeap::new(),
            k: MAX_K,
        }
    }

    /// Empties it and sets k, clamped to `1..=MAX_K`.
    pub fn reset(&mut self, k: usize) {
        self.k = k.clamp(1, MAX_K);
        self.heap.clear();
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// Keeps `(distance, index)` if it is among the k smallest seen so far.
    #[inline]
    pub fn push(&mut self, distance: u32, index: u32) {
        if self.heap.len() < self.k {
            // Cannot fail: len < k <= capacity.
            let _ = self.heap.push((distance, index));
        } else if let Some(mut worst) = self.heap.peek_mut()
            && (distance, index) < *worst
        {
            *worst = (distance, index); // sifts down when `worst` drops
        }
    }

    /// The distance a new item must beat: one at a larger distance is never kept, one at
    /// this distance only with a smaller index than the worst kept. `u32::MAX` while not
    /// full.
    #[inline]
    pub fn threshold(&self) -> u32 {
        match self.heap.peek() {
            Some(&(distance, _)) if self.heap.len() >= self.k => distance,
            _ => u32::MAX,
        }
    }

    /// Sorted ascending (distance, index) into `out` (cleared first); leaves `self` empty.
    pub fn drain_sorted(&mut self, out: &mut heapless::Vec<Neighbor, MAX_K>) {
        out.clear();
        while let Some((distance, index)) = self.heap.pop() {
            // Cannot fail: the heap holds at most MAX_K items.
            let _ = out.push(Neighbor { index, distance });
        }
        out.reverse();
    }
}

/// The top-k scan shared by all kernels, generic over the distance so that each kernel's
/// (possibly `#[target_feature]`) function inlines its own distance into the loop. The
/// common code sizes get a constant length, so the distance is fully unrolled.
#[inline(always)]
fn scan_with(codes: &[u8], query: &[u8], top: &mut TopK, dist: impl Fn(&[u8], &[u8]) -> u32) {
    match query.len() {
        0 => {}
        32 => scan_fixed::<32>(codes, query, top, dist),
        48 => scan_fixed::<48>(codes, query, top, dist),
        64 => scan_fixed::<64>(codes, query, top, dist),
        len => scan_loop(codes.chunks_exact(len), query, top, dist),
    }
}

#[inline(always)]
fn scan_fixed<const N: usize>(
    codes: &[u8],
    query: &[u8],
    top: &mut TopK,
    dist: impl Fn(&[u8], &[u8]) -> u32,
) {
    let (query, _) = query.as_chunks::<N>();
    let (codes, _) = codes.as_chunks::<N>();
    scan_loop(codes.iter().map(|c| &c[..]), &query[0], top, dist);
}

#[inline(always)]
fn scan_loop<'a>(
    codes: impl Iterator<Item = &'a [u8]>,
    query: &[u8],
    top: &mut TopK,
    dist: impl Fn(&[u8], &[u8]) -> u32,
) {
    // Cached: most codes lose against it, and then the heap is not touched at all.
    let mut threshold = top.threshold();
    for (i, code) in codes.enumerate() {
        let d = dist(code, query);
        if d <= threshold {
            top.push(d, i as u32);
            threshold = top.threshold();
        }
    }
}

#[derive(Clone, Copy)]
struct Kernels {
    name: &'static str,
    hamming: unsafe fn(&[u8], &[u8]) -> u32,
    top_k: unsafe fn(&[u8], &[u8], &mut TopK),
    dot_i8: unsafe fn(&[i8], &[i8]) -> i32,
}

const SCALAR: Kernels = Kernels {
    name: "scalar",
    hamming: scalar::hamming,
    top_k: scalar::hamming_top_k,
    dot_i8: scalar::dot_i8,
};

/// Every kernel set of this architecture, whether or not this CPU can run it (for the
/// CI check that the best ones were tested: `testing::require_kernels`).
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) const KERNEL_SETS: &[&str] = &["scalar", "x86_64-popcnt", "x86_64-avx2"];
#[cfg(all(test, target_arch = "aarch64"))]
pub(crate) const KERNEL_SETS: &[&str] = &["scalar", "aarch64-neon", "aarch64-neon-dotprod"];
#[cfg(all(test, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub(crate) const KERNEL_SETS: &[&str] = &["scalar"];

/// Every kernel set this CPU can run, best last. Only sets whose target features were
/// detected here are returned: that is what makes calling their functions sound.
fn supported() -> heapless::Vec<Kernels, 4> {
    let mut sets = heapless::Vec::new();
    let _ = sets.push(SCALAR);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        let popcnt = Kernels {
            name: "x86_64-popcnt",
            hamming: x86_64::hamming_popcnt,
            top_k: x86_64::hamming_top_k_popcnt,
            dot_i8: scalar::dot_i8,
        };
        let _ = sets.push(popcnt);
        if std::arch::is_x86_feature_detected!("avx2") {
            let avx2 = Kernels {
                name: "x86_64-avx2",
                dot_i8: x86_64::dot_i8_avx2,
                ..popcnt
            };
            let _ = sets.push(avx2);
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let neon = Kernels {
            name: "aarch64-neon",
            hamming: aarch64::hamming,
            top_k: aarch64::hamming_top_k,
            dot_i8: aarch64::dot_i8,
        };
        let _ = sets.push(neon);
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            let dotprod = Kernels {
                name: "aarch64-neon-dotprod",
                dot_i8: aarch64::dot_i8_sdot,
                ..neon
            };
            let _ = sets.push(dotprod);
        }
    }
    sets
}

fn kernels() -> &'static Kernels {
    static CHOSEN: OnceLock<Kernels> = OnceLock::new();
    CHOSEN.get_or_init(|| crate::simd::choose(SCALAR, &supported()))
}

/// Hamming distance of two equal-length byte codes.
#[inline]
pub fn hamming(a: &[u8], b: &[u8]) -> u32 {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: `kernels()` holds only functions whose CPU features were detected.
    unsafe { (kernels().hamming)(a, b) }
}

/// Scans `codes` (n codes of `query.len()` bytes each, contiguous) and keeps the k nearest
/// in `top` (`top` is NOT reset here; indices are 0-based positions in `codes`). A
/// trailing partial code is ignored; an empty query scans nothing.
pub fn hamming_top_k(codes: &[u8], query: &[u8], top: &mut TopK) {
    // SAFETY: `kernels()` holds only functions whose CPU features were detected.
    unsafe { (kernels().top_k)(codes, query, top) }
}

/// The scalar scan, whatever the CPU: for benchmarks and A/B checks.
#[doc(hidden)]
pub fn scalar_hamming_top_k(codes: &[u8], query: &[u8], top: &mut TopK) {
    scalar::hamming_top_k(codes, query, top)
}

/// Dot product of two equal-length int8 vectors, exact i32 (wrapping only if the true
/// value does not fit, identically in every kernel).
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    debug_assert_eq!(a.len(), b.len());
    // SAFETY: `kernels()` holds only functions whose CPU features were detected.
    unsafe { (kernels().dot_i8)(a, b) }
}

/// Name of the kernel chosen at run time, for logs and benchmarks: "x86_64-avx2",
/// "x86_64-popcnt", "aarch64-neon", "aarch64-neon-dotprod" or "scalar".
pub fn kernel_name() -> &'static str {
    kernels().name
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::Rng;

    const ANY: &[u8] = &{
        let mut all = [0u8; 256];
        let mut i = 0;
        while i < 256 {
            all[i] = i as u8;
            i += 1;
        }
        all
    };

    fn naive_hamming(a: &[u8], b: &[u8]) -> u32 {
        a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
    }

    fn naive_dot(a: &[i8], b: &[i8]) -> i32 {
        let exact: i64 = a
            .iter()
            .zip(b)
            .map(|(x, y)| i64::from(*x) * i64::from(*y))
            .sum();
        i32::try_from(exact).expect("test inputs are small")
    }

    fn naive_top_k(codes: &[u8], query: &[u8], k: usize) -> Vec<Neighbor> {
        let mut all: Vec<Neighbor> = codes
            .chunks_exact(query.len())
            .enumerate()
            .map(|(i, c)| Neighbor {
                index: i as u32,
                distance: naive_hamming(c, query),
            })
            .collect();
        all.sort_by_key(|n| (n.distance, n.index));
        all.truncate(k);
        all
    }

    fn as_i8(v: &[u8]) -> Vec<i8> {
        v.iter().map(|&x| x as i8).collect()
    }

    /// The tests below run every set `supported()` returns: this one says which, and
    /// fails on CI when the CPU's best sets are not among them.
    #[test]
    fn the_chosen_kernel_is_a_supported_one_and_ci_tests_the_best() {
        let names: Vec<_> = supported().iter().map(|k| k.name).collect();
        eprintln!("scan kernel chosen: {}", kernel_name());
        assert!(names.contains(&kernel_name()));
        assert_eq!(names[0], "scalar");
        crate::testing::require_kernels("scan", KERNEL_SETS, &names);
    }

    #[test]
    fn every_kernel_equals_the_reference_on_all_lengths() {
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        for set in supported() {
            for len in 0..=200 {
                let mut cases = Vec::new();
                for _ in 0..4 {
                    cases.push((rng.bytes(len, ANY), rng.bytes(len, ANY)));
                }
                for (x, y) in [
                    (0x00, 0xff),
                    (0xff, 0xff),
                    (0x80, 0x80),
                    (0x80, 0x7f),
                    (0x7f, 0x7f),
                ] {
                    cases.push((vec![x; len], vec![y; len]));
                }
                for (a, b) in &cases {
                    // SAFETY: `supported()` returns only kernel sets this CPU can run.
                    let (h, d) =
                        unsafe { ((set.hamming)(a, b), (set.dot_i8)(&as_i8(a), &as_i8(b))) };
                    assert_eq!(h, naive_hamming(a, b), "{} hamming, len {len}", set.name);
                    assert_eq!(
                        d,
                        naive_dot(&as_i8(a), &as_i8(b)),
                        "{} dot, len {len}",
                        set.name
                    );
                }
            }
        }
    }

    #[test]
    fn every_kernel_top_k_equals_a_sort_including_ties() {
        let mut rng = Rng::new(42);
        let tiny: &[u8] = &[0x00, 0x01, 0xff];
        let shapes = [
            (48usize, 3000usize, ANY),
            (48, 2000, tiny),
            (32, 1500, tiny),
            (64, 1500, ANY),
            (13, 800, tiny),
            (40, 800, ANY),
            (1, 300, tiny),
        ];
        for (code_len, n, alphabet) in shapes {
            let mut codes = rng.bytes(code_len * n, alphabet);
            codes.extend_from_slice(&rng.bytes(code_len / 2, alphabet)); // partial code: ignored
            let query = rng.bytes(code_len, alphabet);
            for k in [1usize, 7, 100, 1024] {
                let want = naive_top_k(&codes, &query, k);
                for set in supported() {
                    let mut top = TopK::new();
                    top.reset(k);
                    // SAFETY: `supported()` returns only kernel sets this CPU can run.
                    unsafe { (set.top_k)(&codes, &query, &mut top) };
                    let mut got = heapless::Vec::new();
                    top.drain_sorted(&mut got);
                    assert_eq!(
                        got.as_slice(),
                        &want[..],
                        "{} len {code_len} k {k}",
                        set.name
                    );
                }
            }
        }
    }

    #[test]
    fn public_entry_points_match_the_reference() {
        let mut rng = Rng::new(7);
        let codes = rng.bytes(48 * 500, &[0, 3, 0xf0]);
        let query = rng.bytes(48, &[0, 3, 0xf0]);
        let mut top = TopK::new();
        top.reset(10);
        hamming_top_k(&codes, &query, &mut top);
        let mut got = heapless::Vec::new();
        top.drain_sorted(&mut got);
        assert_eq!(got.as_slice(), &naive_top_k(&codes, &query, 10)[..]);
        assert_eq!(
            hamming(&codes[..48], &query),
            naive_hamming(&codes[..48], &query)
        );
        let (a, b) = (as_i8(&codes[..384]), as_i8(&codes[384..768]));
        assert_eq!(dot_i8(&a, &b), naive_dot(&a, &b));
        hamming_top_k(&codes, &[], &mut top);
        assert_eq!(top.threshold(), u32::MAX);
    }

    #[test]
    fn top_k_clamps_k_orders_ties_by_index_and_drains_sorted() {
        let mut top = TopK::new();
        assert_eq!(top.k(), MAX_K);
        top.reset(0);
        assert_eq!(top.k(), 1);
        top.reset(5000);
        assert_eq!(top.k(), MAX_K);
        top.reset(3);
        assert_eq!(top.threshold(), u32::MAX);
        for (d, i) in [(5, 9), (1, 4), (5, 2)] {
            top.push(d, i);
        }
        assert_eq!(top.threshold(), 5);
        for (d, i) in [(1, 3), (9, 0), (5, 1), (5, 8)] {
            top.push(d, i);
        }
        let mut out = heapless::Vec::new();
        top.drain_sorted(&mut out);
        let got: Vec<_> = out.iter().map(|n| (n.distance, n.index)).collect();
        assert_eq!(got, [(1, 3), (1, 4), (5, 1)]);
        assert_eq!(top.threshold(), u32::MAX, "drained");
        top.drain_sorted(&mut out);
        assert!(out.is_empty(), "out is cleared first");
    }
}
