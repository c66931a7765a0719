//! NEON kernels: four values per instruction sequence.
//!
//! The same scheme as the AVX2 kernels ([`super::TABLES`]): each half of a group of eight
//! is loaded from its own start (byte 0 or `W / 2`), a table lookup gives each lane the
//! four bytes its value starts in, a per-lane shift (negative: right) and a mask leave
//! the value. Gaps to ids: a prefix sum of `gap + 1` in two shift-and-add steps, plus a
//! scalar running base.

use std::arch::aarch64::*;

use super::{LANES, MAX_SIMD_WIDTH, TABLES, TermScore, scalar};

/// Per-width constants of a group's two halves.
struct Unpacker {
    width: usize,
    shuffle: [uint8x16_t; 2],
    shifts: [int32x4_t; 2],
    mask: uint32x4_t,
}

impl Unpacker {
    /// For `width` in 1..=[`MAX_SIMD_WIDTH`].
    #[target_feature(enable = "neon")]
    fn new(width: u32) -> Unpacker {
        let t = &TABLES[width as usize];
        // SAFETY: NEON is enabled; 16-byte loads inside the 32-byte tables.
        unsafe {
            Unpacker {
                width: width as usize,
                shuffle: [
                    vld1q_u8(t.shuffle.as_ptr()),
                    vld1q_u8(t.shuffle[16..].as_ptr()),
                ],
                shifts: [
                    vnegq_s32(vld1q_s32(t.shifts.as_ptr().cast())),
                    vnegq_s32(vld1q_s32(t.shifts[4..].as_ptr().cast())),
                ],
                mask: vdupq_n_u32(((1u64 << width) - 1) as u32),
            }
        }
    }

    /// Group `g` (values `8g..8g + 8`) as two halves, or `None` when its loads would
    /// leave `bytes`.
    #[target_feature(enable = "neon")]
    #[inline]
    fn group(&self, bytes: &[u8], g: usize) -> Option<[uint32x4_t; 2]> {
        let (at, half) = (g * self.width, self.width / 2);
        let src = bytes.get(at..at + half + 16)?;
        // SAFETY: NEON is enabled; two 16-byte loads inside `src`.
        let (lo, hi) = unsafe { (vld1q_u8(src.as_ptr()), vld1q_u8(src[half..].as_ptr())) };
        let lo = vreinterpretq_u32_u8(vqtbl1q_u8(lo, self.shuffle[0]));
        let hi = vreinterpretq_u32_u8(vqtbl1q_u8(hi, self.shuffle[1]));
        Some([
            vandq_u32(vshlq_u32(lo, self.shifts[0]), self.mask),
            vandq_u32(vshlq_u32(hi, self.shifts[1]), self.mask),
        ])
    }
}

/// Inclusive prefix sums of `gap + 1` over four lanes, and their total.
#[target_feature(enable = "neon")]
#[inline]
fn prefix4(gaps: uint32x4_t) -> (uint32x4_t, u32) {
    let zero = vdupq_n_u32(0);
    let mut x = vaddq_u32(gaps, vdupq_n_u32(1));
    x = vaddq_u32(x, vextq_u32::<3>(zero, x));
    x = vaddq_u32(x, vextq_u32::<2>(zero, x));
    (x, vgetq_lane_u32::<3>(x))
}

/// [`scalar::unpack`], a group of eight as two halves of four, for widths up to
/// [`MAX_SIMD_WIDTH`].
///
/// # Safety
/// The CPU must support NEON (every aarch64 CPU primd targets). Memory-safe for any input:
/// every load is bounds-checked (groups too near the end go through the scalar code).
#[target_feature(enable = "neon")]
pub(crate) unsafe fn unpack_neon(bytes: &[u8], width: u32, out: &mut [u32]) {
    if width == 0 || width > MAX_SIMD_WIDTH {
        return scalar::unpack(bytes, width, out);
    }
    let u = Unpacker::new(width);
    let mut groups = out.chunks_exact_mut(LANES);
    let mut g = 0;
    for vals in &mut groups {
        match u.group(bytes, g) {
            // SAFETY: NEON is enabled; `vals` is 8 u32s, two 16-byte stores.
            Some([lo, hi]) => unsafe {
                vst1q_u32(vals.as_mut_ptr(), lo);
                vst1q_u32(vals[4..].as_mut_ptr(), hi);
            },
            None => scalar::unpack_tail(bytes, width, g * LANES, vals),
        }
        g += 1;
    }
    scalar::unpack_tail(bytes, width, g * LANES, groups.into_remainder());
}

/// [`scalar::gaps_to_docs`], four ids at a time; only a scalar running base chains the
/// groups (see the AVX2 twin).
///
/// # Safety
/// The CPU must support NEON. Memory-safe for any input.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn gaps_to_docs_neon(vals: &mut [u32], next: u32) -> u32 {
    let mut base = next.wrapping_sub(1);
    let mut quads = vals.chunks_exact_mut(4);
    for q in &mut quads {
        // SAFETY: NEON is enabled; `q` is exactly 4 u32s.
        let (x, total) = prefix4(unsafe { vld1q_u32(q.as_ptr()) });
        // SAFETY: as above.
        unsafe { vst1q_u32(q.as_mut_ptr(), vaddq_u32(x, vdupq_n_u32(base))) };
        base = base.wrapping_add(total);
    }
    scalar::gaps_to_docs(quads.into_remainder(), base.wrapping_add(1))
}

/// [`scalar::unpack_docs`]: [`unpack_neon`] and [`gaps_to_docs_neon`] in one pass.
///
/// # Safety
/// The CPU must support NEON. Memory-safe for any input.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn unpack_docs_neon(bytes: &[u8], width: u32, next: u32, out: &mut [u32]) -> u32 {
    if width == 0 || width > MAX_SIMD_WIDTH {
        return scalar::unpack_docs(bytes, width, next, out);
    }
    let u = Unpacker::new(width);
    let mut base = next.wrapping_sub(1);
    let mut groups = out.chunks_exact_mut(LANES);
    let mut g = 0;
    for vals in &mut groups {
        match u.group(bytes, g) {
            Some([lo, hi]) => {
                let (lo, lo_total) = prefix4(lo);
                let lo = vaddq_u32(lo, vdupq_n_u32(base));
                base = base.wrapping_add(lo_total);
                let (hi, hi_total) = prefix4(hi);
                let hi = vaddq_u32(hi, vdupq_n_u32(base));
                base = base.wrapping_add(hi_total);
                // SAFETY: NEON is enabled; `vals` is 8 u32s, two 16-byte stores.
                unsafe {
                    vst1q_u32(vals.as_mut_ptr(), lo);
                    vst1q_u32(vals[4..].as_mut_ptr(), hi);
                }
            }
            None => {
                scalar::unpack_tail(bytes, width, g * LANES, vals);
                base = scalar::gaps_to_docs(vals, base.wrapping_add(1)).wrapping_sub(1);
            }
        }
        g += 1;
    }
    let rest = groups.into_remainder();
    scalar::unpack_tail(bytes, width, g * LANES, rest);
    scalar::gaps_to_docs(rest, base.wrapping_add(1))
}

/// [`scalar::score`], the arithmetic four postings at a time (one `fdiv` for four
/// quotients; NEON has no gather, so the norms are loaded one by one); the accumulators
/// are updated one by one, so repeated documents add up exactly as in the scalar code.
///
/// # Safety
/// The CPU must support NEON. Memory-safe for any input: a group whose ids are not all
/// inside `norms` and `acc` (or whose frequencies are absurd) goes through the scalar code.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn score_neon(
    docs: &[u32],
    tfs: &[u32],
    norms: &[f32],
    acc: &mut [f32],
    t: TermScore,
) {
    let n = docs.len().min(tfs.len());
    let limit = norms.len().min(acc.len());
    let k1p1 = vdupq_n_f32(t.scorer.k1p1());
    let idf = vdupq_n_f32(t.idf);
    let weight = vdupq_n_f32(t.weight);
    let mut i = 0;
    while i + 4 <= n {
        let d4: [u32; 4] = docs[i..i + 4].try_into().expect("4 ids");
        let t4: [u32; 4] = tfs[i..i + 4].try_into().expect("4 frequencies");
        // SAFETY: NEON is enabled; `d4`/`t4` are 4 u32s.
        let (dmax, tmax) = unsafe {
            (
                vmaxvq_u32(vld1q_u32(d4.as_ptr())),
                vmaxvq_u32(vld1q_u32(t4.as_ptr())),
            )
        };
        if dmax as usize >= limit || tmax >= 1 << 30 {
            scalar::score(&d4, &t4, norms, acc, t);
            i += 4;
            continue;
        }
        // SAFETY: every id in `d4` is < `limit` ≤ `norms.len()`, checked above.
        let norm = unsafe { d4.map(|d| *norms.get_unchecked(d as usize)) };
        let s = unsafe {
            let tf = vcvtq_f32_u32(vaddq_u32(vld1q_u32(t4.as_ptr()), vdupq_n_u32(1)));
            let norm = vld1q_f32(norm.as_ptr());
            // The order of `Scorer::score`, then the query weight: the same roundings.
            let q = vdivq_f32(vmulq_f32(tf, k1p1), vaddq_f32(tf, norm));
            let mut s = [0f32; 4];
            vst1q_f32(s.as_mut_ptr(), vmulq_f32(weight, vmulq_f32(idf, q)));
            s
        };
        for (&d, s) in d4.iter().zip(s) {
            // SAFETY: `d` < `limit` ≤ `acc.len()`, checked above.
            unsafe { *acc.get_unchecked_mut(d as usize) += s };
        }
        i += 4;
    }
    scalar::score(&docs[i..n], &tfs[i..n], norms, acc, t)
}
