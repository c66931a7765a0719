//! x86_64 kernels, used only after the dispatcher has detected the CPU feature named in
//! each function's `#[target_feature]` (that detection is what makes calling them sound).
//!
//! Hamming: the scalar word loop re-compiled with `popcnt` enabled: XOR and one `popcnt`
//! per 8 bytes, 6 per 48-byte code. That already keeps up with memory on a 1M-code scan
//! (see `benches/scan.rs`, which compares with a plain read of the same bytes), as in
//! faiss's `IndexBinaryFlat`, so there is no AVX2 popcount: its horizontal reduction per
//! 48-byte code costs more than the 6 scalar popcounts it replaces.
//! int8 dot: AVX2 sign-extends 16 bytes to i16 and multiply-adds pairs into i32
//! (`vpmaddwd`); |-128·-128·2| = 32 768 cannot overflow an i32 lane, and lane sums wrap
//! exactly like the scalar reference.

use std::arch::x86_64::*;

use super::{TopK, scalar};

#[target_feature(enable = "popcnt")]
pub(super) fn hamming_popcnt(a: &[u8], b: &[u8]) -> u32 {
    scalar::hamming(a, b)
}

#[target_feature(enable = "popcnt")]
pub(super) fn hamming_top_k_popcnt(codes: &[u8], query: &[u8], top: &mut TopK) {
    scalar::hamming_top_k(codes, query, top)
}

#[target_feature(enable = "avx2")]
pub(super) fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    let (a16, _) = a.as_chunks::<16>();
    let (b16, _) = b.as_chunks::<16>();
    let mut acc = _mm256_setzero_si256();
    for (x, y) in a16.iter().zip(b16) {
        // SAFETY: each pointer addresses a whole `[i8; 16]`, exactly the 16 bytes that
        // `_mm_loadu_si128` reads; it has no alignment requirement.
        let (va, vb) = unsafe {
            (
                _mm_loadu_si128(x.as_ptr().cast::<__m128i>()),
                _mm_loadu_si128(y.as_ptr().cast::<__m128i>()),
            )
        };
        let prod = _mm256_madd_epi16(_mm256_cvtepi8_epi16(va), _mm256_cvtepi8_epi16(vb));
        acc = _mm256_add_epi32(acc, prod);
    }
    let s = _mm_add_epi32(
        _mm256_castsi256_si128(acc),
        _mm256_extracti128_si256::<1>(acc),
    );
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    let n = a16.len().min(b16.len()) * 16;
    _mm_cvtsi128_si32(s).wrapping_add(scalar::dot_i8(&a[n..], &b[n..]))
}
