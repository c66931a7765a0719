//! Portable reference kernels: the ground truth every SIMD kernel is tested against, and
//! what runs on other architectures or under `PRIMD_FORCE_SCALAR=1`. The functions are
//! `unsafe fn` only to share the dispatch table's type with the SIMD kernels; their bodies
//! hold no `unsafe` block (checked slice indexing only). Integer sums wrap, so they are
//! exact whenever the true sums fit in an i32.

use std::ops::Range;

use super::{Activations, Epilogue, MR, MR_MAX, NR, Out, PackedWeights, gemm_driver};

/// Quantizes `x` (rows of `k` floats) into `q` (rows of `q.len() / scale.len()` bytes).
///
/// # Safety
/// None needed (the signature is `unsafe fn` only to share the dispatch table type).
pub(super) unsafe fn quantize_rows(
    x: &[f32],
    k: usize,
    q: &mut [i8],
    scale: &mut [f32],
    zero: &mut [i32],
) {
    super::quantize_rows_generic::<false>(x, k, q, scale, zero)
}

/// One tile: `R` rows of `a` (stride `kp`) against a 16-channel panel.
///
/// # Safety
/// None needed: slices are indexed with checks.
pub(super) unsafe fn tile<const R: usize>(a: &[i8], kp: usize, panel: &[i8]) -> [[i32; NR]; R] {
    let mut acc = [[0i32; NR]; R];
    for (g, wg) in panel.chunks_exact(4 * NR).enumerate() {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let x = &a[r * kp + 4 * g..][..4];
            for (c, acc_c) in acc_r.iter_mut().enumerate() {
                let w = &wg[4 * c..4 * c + 4];
                let dot: i32 = (0..4).map(|j| i32::from(x[j]) * i32::from(w[j])).sum();
                *acc_c = acc_c.wrapping_add(dot);
            }
        }
    }
    acc
}

/// # Safety
/// None needed beyond the dispatcher's size checks.
pub(super) unsafe fn gemm(
    a: &Activations<'_>,
    w: &PackedWeights,
    ep: Epilogue<'_>,
    panels: Range<usize>,
    out: Out<'_>,
) {
    gemm_driver!(a, w, ep, panels, out, 0, tile)
}
