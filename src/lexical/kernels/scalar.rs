//! The portable reference kernels: what every SIMD kernel must return, bit for bit.

use super::{LANES, TermScore};

/// Unpacks `out.len()` values of `width` (1..=32) bits; see [`super::unpack`].
pub(crate) fn unpack(bytes: &[u8], width: u32, out: &mut [u32]) {
    macro_rules! widths {
        ($($w:literal)*) => {
            match width {
                $($w => unpack_w::<$w>(bytes, out),)*
                _ => out.fill(0),
            }
        };
    }
    widths!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);
}

/// [`unpack`] for one width, so the shifts and masks are constants the compiler unrolls.
/// Eight values of `W` bits are exactly `W` bytes, so values go by groups of eight: one
/// bounds check per group (`W + 8` bytes, so each value is one unaligned 8-byte load),
/// and every load offset and shift inside it a constant (a check and an `Option` per
/// value kept this loop at ~16 % of a query). A group whose bytes are missing reads as
/// zeros.
#[inline(always)]
fn unpack_w<const W: usize>(bytes: &[u8], out: &mut [u32]) {
    let done = out.len() / LANES * LANES;
    let mut groups = out.chunks_exact_mut(LANES);
    for (g, vals) in (&mut groups).enumerate() {
        match bytes.get(g * W..).and_then(|b| b.get(..W + 8)) {
            Some(src) => unpack_group::<W>(src, vals),
            None => unpack_tail(bytes, W as u32, g * LANES, vals),
        }
    }
    unpack_tail(bytes, W as u32, done, groups.into_remainder());
}

/// One whole group of eight from its `W + 8` bytes.
#[inline(always)]
fn unpack_group<const W: usize>(src: &[u8], vals: &mut [u32]) {
    let mask = (1u64 << W) - 1;
    for (j, v) in vals.iter_mut().enumerate() {
        let bit = j * W;
        let word = u64::from_le_bytes(src[bit / 8..bit / 8 + 8].try_into().expect("8"));
        *v = ((word >> (bit % 8)) & mask) as u32;
    }
}

/// Values `first..first + vals.len()` one at a time, missing bytes read as zero: the
/// end of a list, and the fallback of the SIMD kernels near it.
pub(crate) fn unpack_tail(bytes: &[u8], width: u32, first: usize, vals: &mut [u32]) {
    let mask = (1u64 << width) - 1;
    for (i, v) in vals.iter_mut().enumerate() {
        let bit = (first + i) * width as usize;
        let mut word = [0u8; 8];
        if let Some(b) = bytes.get(bit / 8..) {
            let n = b.len().min(8);
            word[..n].copy_from_slice(&b[..n]);
        }
        *v = ((u64::from_le_bytes(word) >> (bit % 8)) & mask) as u32;
    }
}

/// Turns gaps into document ids in place (`doc = next + gap`, then `next = doc + 1`,
/// wrapping) and returns the final `next`; see [`super::gaps_to_docs`].
pub(crate) fn gaps_to_docs(vals: &mut [u32], mut next: u32) -> u32 {
    for v in vals {
        let doc = next.wrapping_add(*v);
        *v = doc;
        next = doc.wrapping_add(1);
    }
    next
}

/// [`unpack`] then [`gaps_to_docs`]; see [`super::unpack_docs`].
pub(crate) fn unpack_docs(bytes: &[u8], width: u32, next: u32, out: &mut [u32]) -> u32 {
    if width == 0 || width > 32 {
        out.fill(0);
    } else {
        unpack(bytes, width, out);
    }
    gaps_to_docs(out, next)
}

/// Adds one query term's BM25 contributions to the accumulators; see [`super::score`].
pub(crate) fn score(docs: &[u32], tfs: &[u32], norms: &[f32], acc: &mut [f32], t: TermScore) {
    for (&d, &tf) in docs.iter().zip(tfs) {
        let (Some(&norm), Some(a)) = (norms.get(d as usize), acc.get_mut(d as usize)) else {
            continue;
        };
        *a += t.weight * t.scorer.score(t.idf, tf.saturating_add(1), norm);
    }
}

/// Adds decoded contributions to the accumulators; see [`super::add`].
#[inline]
pub(crate) fn add(docs: &[u32], contribs: &[f32], weight: f32, acc: &mut [f32]) {
    for (&d, &c) in docs.iter().zip(contribs) {
        if let Some(a) = acc.get_mut(d as usize) {
            *a += weight * c;
        }
    }
}

/// Adds a dense row of contributions to the accumulators; see [`super::add_row`].
#[inline]
pub(crate) fn add_row(row: &[f32], weight: f32, acc: &mut [f32]) {
    for (a, &c) in acc.iter_mut().zip(row) {
        *a += weight * c;
    }
}
