//! Portable reference kernels: the ground truth every SIMD kernel is tested against, and
//! the kernels used on other architectures or under `PRIMD_FORCE_SCALAR=1`.
//!
//! Invariants: no `unsafe`; any lengths (slices of different lengths are compared over
//! the shorter one); integer sums wrap, so `dot_i8` is exact whenever the true dot product
//! fits in an `i32` (always true up to 131 072 elements) and every kernel agrees even
//! beyond. The helpers are `#[inline(always)]` so the x86_64 module can re-instantiate
//! them inside `#[target_feature(enable = "popcnt")]` functions, where `count_ones`
//! becomes one `popcnt` instead of a bit-twiddling sequence.

use super::{TopK, scan_with};

/// Hamming distance over 8-byte words, then the byte tail.
#[inline(always)]
pub(super) fn hamming(a: &[u8], b: &[u8]) -> u32 {
    let (a8, a_tail) = a.as_chunks::<8>();
    let (b8, b_tail) = b.as_chunks::<8>();
    let words: u32 = a8
        .iter()
        .zip(b8)
        .map(|(x, y)| (u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y)).count_ones())
        .sum();
    let tail: u32 = a_tail
        .iter()
        .zip(b_tail)
        .map(|(x, y)| (x ^ y).count_ones())
        .sum();
    words + tail
}

#[inline(always)]
pub(super) fn hamming_top_k(codes: &[u8], query: &[u8], top: &mut TopK) {
    scan_with(codes, query, top, hamming);
}

#[inline(always)]
pub(super) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).fold(0i32, |acc, (&x, &y)| {
        acc.wrapping_add(i32::from(x) * i32::from(y))
    })
}
