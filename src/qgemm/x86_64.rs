//! x86_64 kernels, used only after the dispatcher has detected the CPU features named in
//! each function's `#[target_feature]` (that detection is what makes calling them sound).
//!
//! Both keep a 4-row × 16-channel tile of i32 sums in 8 ymm registers and, per group of
//! 4 input features, load the panel's 64 bytes once (2 ymm) and broadcast each row's
//! 4 activation bytes to all lanes.
//! - AVX-VNNI: `vpdpbusd` multiplies u8 × s8 and adds 4 products into each i32 lane
//!   without intermediate saturation: 32 MACs per instruction. It needs an unsigned
//!   side, so the activations are quantized as `q + 128` (`q ^ 0x80`,
//!   [`quantize_rows_avx2_u8`]) and the driver removes `128 · Σ w` per channel
//!   afterwards (exact).
//! - AVX2: `vpmaddubsw` (u8 × s8, pairs summed into *saturating* i16) then `vpmaddwd`
//!   with ones into i32. Feeding `q + 128` could saturate (255·127·2 > 32 767), so it uses
//!   the sign trick: `|q|` as the u8 side and `sign(q)·w` (`vpsignb`) as the s8 side;
//!   with both in `[-127, 127]` a pair is at most 32 258: exact.
//!
//! Quantizing the activations is the shared scalar code re-compiled with AVX2 (it
//! vectorises: `vmaxps`, `vroundps`, packs).

use std::arch::x86_64::*;

use std::ops::Range;

use super::{Activations, Epilogue, MR, MR_MAX, NR, Out, PackedWeights, gemm_driver};

/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn quantize_rows_avx2(
    x: &[f32],
    k: usize,
    q: &mut [i8],
    scale: &mut [f32],
    zero: &mut [i32],
) {
    super::quantize_rows_generic::<false>(x, k, q, scale, zero)
}

/// The same, storing `q + 128` as u8 for [`gemm_vnni`].
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn quantize_rows_avx2_u8(
    x: &[f32],
    k: usize,
    q: &mut [i8],
    scale: &mut [f32],
    zero: &mut [i32],
) {
    super::quantize_rows_generic::<true>(x, k, q, scale, zero)
}

/// # Safety
/// The CPU must support AVX2 and AVX-VNNI; `a` holds `R` rows of `kp` bytes, `q + 128`
/// as u8 (`kp` a multiple of 4), and `panel` `kp · 16` bytes.
#[target_feature(enable = "avx2,avxvnni")]
#[inline]
unsafe fn tile_vnni<const R: usize>(a: &[i8], kp: usize, panel: &[i8]) -> [[i32; NR]; R] {
    debug_assert!(a.len() >= R * kp && panel.len() >= kp * NR);
    let mut acc = [[_mm256_setzero_si256(); 2]; R];
    let (a, w) = (a.as_ptr(), panel.as_ptr());
    for g in 0..kp / 4 {
        // SAFETY: g < kp / 4, so both 32-byte loads lie in the panel (kp · NR bytes).
        let (w0, w1) = unsafe {
            (
                _mm256_loadu_si256(w.add(g * 4 * NR).cast()),
                _mm256_loadu_si256(w.add(g * 4 * NR + 32).cast()),
            )
        };
        for (r, acc_r) in acc.iter_mut().enumerate() {
            // SAFETY: r < R and 4g + 4 ≤ kp (4g + 8 for a pair): within row r of `a` (R · kp bytes).
            let x = unsafe { a.add(r * kp + 4 * g).cast::<i32>().read_unaligned() };
            let x = _mm256_set1_epi32(x);
            acc_r[0] = _mm256_dpbusd_avx_epi32(acc_r[0], x, w0);
            acc_r[1] = _mm256_dpbusd_avx_epi32(acc_r[1], x, w1);
        }
    }
    store(acc)
}

/// # Safety
/// As [`tile_vnni`], with AVX2 only.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn tile_avx2<const R: usize>(a: &[i8], kp: usize, panel: &[i8]) -> [[i32; NR]; R] {
    debug_assert!(a.len() >= R * kp && panel.len() >= kp * NR);
    let mut acc = [[_mm256_setzero_si256(); 2]; R];
    let ones = _mm256_set1_epi16(1);
    let (a, w) = (a.as_ptr(), panel.as_ptr());
    for g in 0..kp / 4 {
        // SAFETY: g < kp / 4, so both 32-byte loads lie in the panel (kp · NR bytes).
        let (w0, w1) = unsafe {
            (
                _mm256_loadu_si256(w.add(g * 4 * NR).cast()),
                _mm256_loadu_si256(w.add(g * 4 * NR + 32).cast()),
            )
        };
        for (r, acc_r) in acc.iter_mut().enumerate() {
            // SAFETY: r < R and 4g + 4 ≤ kp (4g + 8 for a pair): within row r of `a` (R · kp bytes).
            let x = unsafe { a.add(r * kp + 4 * g).cast::<i32>().read_unaligned() };
            let x = _mm256_set1_epi32(x);
            let ax = _mm256_abs_epi8(x);
            for (acc_c, wv) in acc_r.iter_mut().zip([w0, w1]) {
                let pairs = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv, x));
                *acc_c = _mm256_add_epi32(*acc_c, _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    store(acc)
}

#[target_feature(enable = "avx2")]
#[inline]
fn store<const R: usize>(acc: [[__m256i; 2]; R]) -> [[i32; NR]; R] {
    let mut out = [[0i32; NR]; R];
    for (o, a) in out.iter_mut().zip(acc) {
        // SAFETY: `o` is 16 i32 = two 32-byte stores; no alignment required.
        unsafe {
            _mm256_storeu_si256(o.as_mut_ptr().cast(), a[0]);
            _mm256_storeu_si256(o.as_mut_ptr().add(8).cast(), a[1]);
        }
    }
    out
}

/// # Safety
/// The CPU must support AVX2 and AVX-VNNI.
#[target_feature(enable = "avx2,avxvnni")]
pub(super) unsafe fn gemm_vnni(
    a: &Activations<'_>,
    w: &PackedWeights,
    ep: Epilogue<'_>,
    panels: Range<usize>,
    out: Out<'_>,
) {
    gemm_driver!(a, w, ep, panels, out, 1, tile_vnni)
}

/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gemm_avx2(
    a: &Activations<'_>,
    w: &PackedWeights,
    ep: Epilogue<'_>,
    panels: Range<usize>,
    out: Out<'_>,
) {
    gemm_driver!(a, w, ep, panels, out, 0, tile_avx2)
}

/// # Safety
/// The CPU must support AVX-512 F/BW and AVX512-VNNI; otherwise as [`tile_vnni`].
///
/// One 512-bit `vpdpbusd` covers the whole 16-channel × 4-feature group (64 MACs), so a
/// row needs one accumulator. Tiles are up to 8 rows (16 of the 32 registers hold sums:
/// a 5-token query is one tile), and even and odd groups go to two accumulator sets
/// (2R independent chains, so short tiles are not bound by the instruction's latency),
/// summed at the end (exact: i32 wrapping adds commute).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
#[allow(clippy::needless_range_loop)] // rows index three arrays and a pointer in step
unsafe fn tile_avx512<const R: usize>(a: &[i8], kp: usize, panel: &[i8]) -> [[i32; NR]; R] {
    debug_assert!(a.len() >= R * kp && panel.len() >= kp * NR);
    let mut even = [_mm512_setzero_si512(); R];
    let mut odd = [_mm512_setzero_si512(); R];
    let (a, w) = (a.as_ptr(), panel.as_ptr());
    let groups = kp / 4;
    let mut g = 0;
    while g + 2 <= groups {
        // SAFETY: g + 1 < kp / 4, so both 64-byte loads lie in the panel (kp · NR bytes).
        let (w0, w1) = unsafe {
            (
                _mm512_loadu_si512(w.add(g * 4 * NR).cast()),
                _mm512_loadu_si512(w.add((g + 1) * 4 * NR).cast()),
            )
        };
        for r in 0..R {
            // SAFETY: r < R and 4g + 4 ≤ kp (4g + 8 for a pair): within row r of `a` (R · kp bytes).
            let (x0, x1) = unsafe {
                (
                    a.add(r * kp + 4 * g).cast::<i32>().read_unaligned(),
                    a.add(r * kp + 4 * g + 4).cast::<i32>().read_unaligned(),
                )
            };
            even[r] = _mm512_dpbusd_epi32(even[r], _mm512_set1_epi32(x0), w0);
            odd[r] = _mm512_dpbusd_epi32(odd[r], _mm512_set1_epi32(x1), w1);
        }
        g += 2;
    }
    if g < groups {
        // SAFETY: g < kp / 4, as above.
        let w0 = unsafe { _mm512_loadu_si512(w.add(g * 4 * NR).cast()) };
        for r in 0..R {
            // SAFETY: r < R and 4g + 4 ≤ kp (4g + 8 for a pair): within row r of `a` (R · kp bytes).
            let x0 = unsafe { a.add(r * kp + 4 * g).cast::<i32>().read_unaligned() };
            even[r] = _mm512_dpbusd_epi32(even[r], _mm512_set1_epi32(x0), w0);
        }
    }
    let mut out = [[0i32; NR]; R];
    for r in 0..R {
        // SAFETY: `out[r]` is 16 i32 = one 64-byte store; no alignment required.
        unsafe {
            _mm512_storeu_si512(
                out[r].as_mut_ptr().cast(),
                _mm512_add_epi32(even[r], odd[r]),
            )
        };
    }
    out
}

/// # Safety
/// The CPU must support AVX-512 F/BW and AVX512-VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn gemm_avx512(
    a: &Activations<'_>,
    w: &PackedWeights,
    ep: Epilogue<'_>,
    panels: Range<usize>,
    out: Out<'_>,
) {
    gemm_driver!(a, w, ep, panels, out, 1, tile_avx512, 8)
}
