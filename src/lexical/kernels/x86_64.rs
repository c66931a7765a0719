//! AVX2 kernels: eight values per instruction sequence.
//!
//! Unpacking: the eight values of a group of `W` bits lie in its `W` bytes. The two halves
//! of a 256-bit register are loaded from the group's start and from byte `W / 2`, a byte
//! shuffle gives each lane the four bytes its value starts in, and a per-lane shift and a
//! mask leave the value (see [`super::TABLES`]). Gaps to ids: an inclusive prefix sum of
//! `gap + 1` in three shift-and-add steps, plus a scalar running base.

use std::arch::x86_64::*;

use super::{LANES, MAX_SIMD_WIDTH, TABLES, TermScore, scalar};

/// Per-width constants of [`unpack8`].
struct Unpacker {
    width: usize,
    shuffle: __m256i,
    shifts: __m256i,
    mask: __m256i,
}

impl Unpacker {
    /// For `width` in 1..=[`MAX_SIMD_WIDTH`].
    #[target_feature(enable = "avx2")]
    fn new(width: u32) -> Unpacker {
        let t = &TABLES[width as usize];
        // SAFETY: AVX2 is enabled; unaligned 32-byte loads of the 32-byte tables.
        let (shuffle, shifts) = unsafe {
            (
                _mm256_loadu_si256(t.shuffle.as_ptr().cast()),
                _mm256_loadu_si256(t.shifts.as_ptr().cast()),
            )
        };
        Unpacker {
            width: width as usize,
            shuffle,
            shifts,
            mask: _mm256_set1_epi32(((1u64 << width) - 1) as u32 as i32),
        }
    }

    /// Group `g` (values `8g..8g + 8`), or `None` when its loads would leave `bytes`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn group(&self, bytes: &[u8], g: usize) -> Option<__m256i> {
        let (at, half) = (g * self.width, self.width / 2);
        let src = bytes.get(at..at + half + 16)?;
        // SAFETY: AVX2 is enabled; two unaligned 16-byte loads inside `src`.
        let (lo, hi) = unsafe {
            (
                _mm_loadu_si128(src.as_ptr().cast()),
                _mm_loadu_si128(src[half..].as_ptr().cast()),
            )
        };
        let v = _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), self.shuffle);
        Some(_mm256_and_si256(
            _mm256_srlv_epi32(v, self.shifts),
            self.mask,
        ))
    }
}

/// Inclusive prefix sums of `gap + 1` over the eight lanes, and their total.
#[target_feature(enable = "avx2")]
#[inline]
fn prefix8(gaps: __m256i) -> (__m256i, u32) {
    let mut x = _mm256_add_epi32(gaps, _mm256_set1_epi32(1));
    // Prefix sums inside each 128-bit half, then the low half's total onto the high.
    x = _mm256_add_epi32(x, _mm256_slli_si256::<4>(x));
    x = _mm256_add_epi32(x, _mm256_slli_si256::<8>(x));
    let low_total = _mm256_permutevar8x32_epi32(x, _mm256_set1_epi32(3));
    let high = _mm256_blend_epi32::<0b1111_0000>(_mm256_setzero_si256(), low_total);
    x = _mm256_add_epi32(x, high);
    (x, _mm256_extract_epi32::<7>(x) as u32)
}

/// [`scalar::unpack`], eight values at a time for widths up to [`MAX_SIMD_WIDTH`].
///
/// # Safety
/// The CPU must support AVX2. Memory-safe for any input: every load is bounds-checked
/// (groups too near the end of `bytes` go through the scalar code).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn unpack_avx2(bytes: &[u8], width: u32, out: &mut [u32]) {
    if width == 0 || width > MAX_SIMD_WIDTH {
        return scalar::unpack(bytes, width, out);
    }
    let u = Unpacker::new(width);
    let mut groups = out.chunks_exact_mut(LANES);
    let mut g = 0;
    for vals in &mut groups {
        match u.group(bytes, g) {
            // SAFETY: AVX2 is enabled; `vals` is 8 u32s, an unaligned 32-byte store.
            Some(v) => unsafe { _mm256_storeu_si256(vals.as_mut_ptr().cast(), v) },
            None => scalar::unpack_tail(bytes, width, g * LANES, vals),
        }
        g += 1;
    }
    scalar::unpack_tail(bytes, width, g * LANES, groups.into_remainder());
}

/// [`scalar::gaps_to_docs`], eight ids at a time. Each group's prefix sums do not depend
/// on the ids before it; only a scalar running base does (one add per group), so the
/// groups overlap in the pipeline instead of waiting on a cross-lane shuffle each.
///
/// # Safety
/// The CPU must support AVX2. Memory-safe for any input.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn gaps_to_docs_avx2(vals: &mut [u32], next: u32) -> u32 {
    // The id before the first: each id is it plus the prefix sum of `gap + 1`.
    let mut base = next.wrapping_sub(1);
    let mut groups = vals.chunks_exact_mut(LANES);
    for g in &mut groups {
        // SAFETY: AVX2 is enabled; `g` is exactly 8 u32s (32 bytes), unaligned access.
        let (x, total) = prefix8(unsafe { _mm256_loadu_si256(g.as_ptr().cast()) });
        let ids = _mm256_add_epi32(x, _mm256_set1_epi32(base as i32));
        // SAFETY: as above.
        unsafe { _mm256_storeu_si256(g.as_mut_ptr().cast(), ids) };
        base = base.wrapping_add(total);
    }
    scalar::gaps_to_docs(groups.into_remainder(), base.wrapping_add(1))
}

/// [`scalar::unpack_docs`]: [`unpack_avx2`] and [`gaps_to_docs_avx2`] in one pass, each
/// group's gaps turned into ids in registers.
///
/// # Safety
/// The CPU must support AVX2. Memory-safe for any input.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn unpack_docs_avx2(bytes: &[u8], width: u32, next: u32, out: &mut [u32]) -> u32 {
    if width == 0 || width > MAX_SIMD_WIDTH {
        return scalar::unpack_docs(bytes, width, next, out);
    }
    let u = Unpacker::new(width);
    let mut base = next.wrapping_sub(1);
    let mut groups = out.chunks_exact_mut(LANES);
    let mut g = 0;
    for vals in &mut groups {
        match u.group(bytes, g) {
            Some(v) => {
                let (x, total) = prefix8(v);
                let ids = _mm256_add_epi32(x, _mm256_set1_epi32(base as i32));
                // SAFETY: AVX2 is enabled; `vals` is 8 u32s, an unaligned 32-byte store.
                unsafe { _mm256_storeu_si256(vals.as_mut_ptr().cast(), ids) };
                base = base.wrapping_add(total);
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

/// [`scalar::score`], the arithmetic eight postings at a time (one `vdivps` for eight
/// quotients); the length norms are loaded one by one (as fast as `vgatherdps` on Zen 3,
/// measured) and the accumulators updated one by one, so repeated documents add up
/// exactly as in the scalar code.
///
/// # Safety
/// The CPU must support AVX2. Memory-safe for any input: a group whose ids are not all
/// inside `norms` and `acc` (or whose frequencies are absurd) goes through the scalar code.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn score_avx2(
    docs: &[u32],
    tfs: &[u32],
    norms: &[f32],
    acc: &mut [f32],
    t: TermScore,
) {
    let n = docs.len().min(tfs.len());
    let limit = norms.len().min(acc.len());
    if limit == 0 {
        return scalar::score(docs, tfs, norms, acc, t);
    }
    // Largest id that indexes both slices.
    let max_doc = _mm256_set1_epi32((limit - 1).min(u32::MAX as usize) as u32 as i32);
    // Frequencies stay far below the range where signed and unsigned conversions differ.
    let max_tf = _mm256_set1_epi32(1 << 30);
    let one = _mm256_set1_epi32(1);
    let k1p1 = _mm256_set1_ps(t.scorer.k1p1());
    let idf = _mm256_set1_ps(t.idf);
    let weight = _mm256_set1_ps(t.weight);
    let mut i = 0;
    while i + LANES <= n {
        let d8: [u32; LANES] = docs[i..i + LANES].try_into().expect("8 ids");
        let t8: [u32; LANES] = tfs[i..i + LANES].try_into().expect("8 frequencies");
        // SAFETY: AVX2 is enabled; `d8`/`t8` are 8 u32s; `norms` is read only at ids
        // checked to be ≤ `max_doc` < `norms.len()`.
        let s = unsafe {
            let d = _mm256_loadu_si256(d8.as_ptr().cast());
            let tf = _mm256_loadu_si256(t8.as_ptr().cast());
            let ok = _mm256_and_si256(
                _mm256_cmpeq_epi32(_mm256_max_epu32(d, max_doc), max_doc),
                _mm256_cmpeq_epi32(_mm256_max_epu32(tf, max_tf), max_tf),
            );
            if _mm256_movemask_epi8(ok) != -1 {
                scalar::score(&d8, &t8, norms, acc, t);
                i += LANES;
                continue;
            }
            let tf = _mm256_cvtepi32_ps(_mm256_add_epi32(tf, one));
            let norm = d8.map(|d| *norms.get_unchecked(d as usize));
            let norm = _mm256_loadu_ps(norm.as_ptr());
            // The order of `Scorer::score`, then the query weight: the same roundings.
            let q = _mm256_div_ps(_mm256_mul_ps(tf, k1p1), _mm256_add_ps(tf, norm));
            let mut s = [0f32; LANES];
            _mm256_storeu_ps(s.as_mut_ptr(), _mm256_mul_ps(weight, _mm256_mul_ps(idf, q)));
            s
        };
        for (&d, s) in d8.iter().zip(s) {
            // SAFETY: `d` ≤ `max_doc` < `acc.len()`, checked above.
            unsafe { *acc.get_unchecked_mut(d as usize) += s };
        }
        i += LANES;
    }
    scalar::score(&docs[i..n], &tfs[i..n], norms, acc, t)
}
