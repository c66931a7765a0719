//! aarch64 kernels. NEON is part of the aarch64 baseline; only `sdot` needs the
//! dot-product extension (Cortex-A55/A76 and later: Pi 5, Jetson Orin, RK3588; not the
//! Pi 4's A72), which the dispatcher detects before handing out [`gemm_sdot`].
//!
//! A tile is 4 rows × 16 channels; per group of 4 input features the panel's 64 bytes
//! are 4 q-registers of 4 channels × 4 features, and each row's 4 activation bytes are
//! broadcast to the 4 lanes.
//! - `sdot`: s8 × s8, 4 products added into each i32 lane: 16 MACs per instruction
//!   (against 4 for an fp32 `fmla`). Its intrinsic `vdotq_s32` is still unstable
//!   (`stdarch_neon_dotprod`), so it is issued with `asm!`, as in `scan::aarch64`.
//! - plain NEON: `smull`/`smull2` (8 exact i16 products) and `sadalp` (pairs into i32),
//!   which leaves each channel's sum split over two lanes; `addp` joins them at the end.

use std::arch::aarch64::*;
use std::arch::asm;

use std::ops::Range;

use super::{Activations, Epilogue, MR, MR_MAX, NR, Out, PackedWeights, gemm_driver};

/// # Safety
/// The CPU must have `dotprod`; `a` holds `R` rows of `kp` bytes (`kp` a multiple of 4)
/// and `panel` `kp · 16` bytes.
#[target_feature(enable = "dotprod")]
#[inline]
unsafe fn tile_sdot<const R: usize>(a: &[i8], kp: usize, panel: &[i8]) -> [[i32; NR]; R] {
    debug_assert!(a.len() >= R * kp && panel.len() >= kp * NR);
    let mut acc = [[vdupq_n_s32(0); 4]; R];
    let (a, w) = (a.as_ptr(), panel.as_ptr());
    for g in 0..kp / 4 {
        let load = |j: usize| {
            // SAFETY: g < kp / 4 and j < 4: the 16 bytes at g · 64 + 16j lie in the panel
            // (kp · NR bytes).
            unsafe { vld1q_s8(w.add(g * 64 + 16 * j)) }
        };
        let wv: [int8x16_t; 4] = std::array::from_fn(load);
        for (r, acc_r) in acc.iter_mut().enumerate() {
            // SAFETY: r < R and 4g + 4 ≤ kp: within row r of `a` (R · kp bytes).
            let x = unsafe { a.add(r * kp + 4 * g).cast::<i32>().read_unaligned() };
            let x = vreinterpretq_s8_s32(vdupq_n_s32(x));
            for (acc_c, wj) in acc_r.iter_mut().zip(wv) {
                // SAFETY: `sdot` only reads and writes the three vector registers named
                // here; `dotprod` was detected before this kernel was handed out.
                unsafe {
                    asm!(
                        "sdot {acc:v}.4s, {w:v}.16b, {x:v}.16b",
                        acc = inout(vreg) *acc_c,
                        w = in(vreg) wj,
                        x = in(vreg) x,
                        options(pure, nomem, nostack, preserves_flags),
                    );
                }
            }
        }
    }
    let mut out = [[0i32; NR]; R];
    for (o, a) in out.iter_mut().zip(acc) {
        for (j, v) in a.into_iter().enumerate() {
            // SAFETY: `o[4j..4j+4]` is in bounds (j < 4).
            unsafe { vst1q_s32(o.as_mut_ptr().add(4 * j), v) };
        }
    }
    out
}

/// # Safety
/// As [`tile_sdot`], without the `dotprod` requirement.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn tile_neon<const R: usize>(a: &[i8], kp: usize, panel: &[i8]) -> [[i32; NR]; R] {
    debug_assert!(a.len() >= R * kp && panel.len() >= kp * NR);
    // lo: channels 4j, 4j+1 as (c0 k01, c0 k23, c1 k01, c1 k23); hi: channels 4j+2, 4j+3.
    let mut lo = [[vdupq_n_s32(0); 4]; R];
    let mut hi = [[vdupq_n_s32(0); 4]; R];
    let (a, w) = (a.as_ptr(), panel.as_ptr());
    for g in 0..kp / 4 {
        let load = |j: usize| {
            // SAFETY: g < kp / 4 and j < 4: the 16 bytes at g · 64 + 16j lie in the panel
            // (kp · NR bytes).
            unsafe { vld1q_s8(w.add(g * 64 + 16 * j)) }
        };
        let wv: [int8x16_t; 4] = std::array::from_fn(load);
        for r in 0..R {
            // SAFETY: r < R and 4g + 4 ≤ kp: within row r of `a` (R · kp bytes).
            let x = unsafe { a.add(r * kp + 4 * g).cast::<i32>().read_unaligned() };
            let x = vreinterpretq_s8_s32(vdupq_n_s32(x));
            for j in 0..4 {
                lo[r][j] = vpadalq_s16(lo[r][j], vmull_s8(vget_low_s8(wv[j]), vget_low_s8(x)));
                hi[r][j] = vpadalq_s16(hi[r][j], vmull_high_s8(wv[j], x));
            }
        }
    }
    let mut out = [[0i32; NR]; R];
    for r in 0..R {
        for j in 0..4 {
            // SAFETY: `out[r][4j..4j+4]` is in bounds (j < 4).
            unsafe {
                vst1q_s32(
                    out[r].as_mut_ptr().add(4 * j),
                    vpaddq_s32(lo[r][j], hi[r][j]),
                )
            };
        }
    }
    out
}

/// # Safety
/// The CPU must have `dotprod`.
#[target_feature(enable = "dotprod")]
pub(super) unsafe fn gemm_sdot(
    a: &Activations<'_>,
    w: &PackedWeights,
    ep: Epilogue<'_>,
    panels: Range<usize>,
    out: Out<'_>,
) {
    gemm_driver!(a, w, ep, panels, out, 0, tile_sdot)
}

/// # Safety
/// None beyond the dispatcher's size checks (NEON is baseline on aarch64).
#[target_feature(enable = "neon")]
pub(super) unsafe fn gemm_neon(
    a: &Activations<'_>,
    w: &PackedWeights,
    ep: Epilogue<'_>,
    panels: Range<usize>,
    out: Out<'_>,
) {
    gemm_driver!(a, w, ep, panels, out, 0, tile_neon)
}
