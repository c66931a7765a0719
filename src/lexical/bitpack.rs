//! Bit packing of posting blocks and LEB128 varints: how a block's doc-id gaps and term
//! frequencies are stored (`index/FORMAT.md`, "Lexical section").
//!
//! Packing is the writer's (`build`), unpacking the reader's; the unpacking loops
//! themselves are the per-architecture `kernels`, fed here with enough bytes after each
//! block ([`UNPACK_SPARE`]) that every SIMD load reads in place.

use super::format::BLOCK;
use super::kernels;

/// Bytes of `n` values packed at `width` bits.
#[inline]
pub(crate) fn packed_len(n: usize, width: u32) -> usize {
    (n * width as usize).div_ceil(8)
}

/// Bits needed for the largest of `values` (0 when all are 0).
pub(crate) fn bit_width(values: &[u32]) -> u32 {
    32 - values.iter().fold(0, |a, &v| a | v).leading_zeros()
}

/// Appends `values` packed at `width` bits each: value `i` is bits `i·width ..
/// (i+1)·width` of a little-endian bit stream (LSB first), padded with zero bits to a
/// whole byte. `width` 0 writes nothing (all values 0).
pub(crate) fn pack(values: &[u32], width: u32, out: &mut Vec<u8>) {
    let (mut acc, mut bits) = (0u64, 0u32);
    for &v in values {
        acc |= u64::from(v) << bits;
        bits += width;
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        out.push(acc as u8);
    }
}

/// Spare bytes after the packed values that let every kernel read each group in place
/// (the SIMD loads reach up to 16 bytes past a group's middle).
const UNPACK_SPARE: usize = 16;

/// Largest packed block (128 values of 32 bits) plus the spare bytes.
const UNPACK_BUF: usize = BLOCK * 4 + UNPACK_SPARE;

/// Unpacks `out.len()` (≤ [`BLOCK`]) values of `width` bits from the start of `src`;
/// missing bytes read as zero, `width` > 32 gives zeros (a corrupt block: garbage, never a
/// panic). Bytes of `src` past the packed values are read but masked off: callers pass
/// the rest of the list when they have it, so the common case reads in place (with the
/// `kernels`: SIMD where the CPU has it).
pub(crate) fn unpack(src: &[u8], width: u32, out: &mut [u32]) {
    let n = out.len().min(BLOCK);
    let out = &mut out[..n];
    if width == 0 || width > 32 {
        out.fill(0);
        return;
    }
    padded(src, packed_len(n, width), |b| {
        kernels::unpack(b, width, out)
    });
}

/// [`unpack`] of a block's gaps, turned into ids from `next` on (`doc = next + gap`,
/// `next = doc + 1`, wrapping); returns the final `next`.
pub(crate) fn unpack_docs(src: &[u8], width: u32, next: u32, out: &mut [u32]) -> u32 {
    let n = out.len().min(BLOCK);
    let out = &mut out[..n];
    if width == 0 || width > 32 {
        out.fill(0);
        return kernels::gaps_to_docs(out, next);
    }
    padded(src, packed_len(n, width), |b| {
        kernels::unpack_docs(b, width, next, out)
    })
}

/// Calls `f` with `src` when [`UNPACK_SPARE`] bytes follow its first `need`, else with a
/// zero-padded copy of them (near the end of a list), so every kernel load is in place.
#[inline]
fn padded<R>(src: &[u8], need: usize, f: impl FnOnce(&[u8]) -> R) -> R {
    if src.len() >= need + UNPACK_SPARE {
        f(src)
    } else {
        let mut buf = [0u8; UNPACK_BUF];
        let len = src.len().min(need).min(BLOCK * 4);
        buf[..len].copy_from_slice(&src[..len]);
        f(&buf)
    }
}

/// LEB128 varint (7 bits per byte, low first).
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*pos`, advancing it. `None` at the end of `b` or after 5 bytes
/// without a terminator (corrupt): the caller stops decoding. Bits past 32 are dropped.
#[inline]
pub(crate) fn get_varint(b: &[u8], pos: &mut usize) -> Option<u32> {
    let mut v: u32 = 0;
    for shift in [0u32, 7, 14, 21, 28] {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u32::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_stop_on_garbage() {
        let vals = [0u32, 1, 127, 128, 300, 16_383, 16_384, u32::MAX];
        let mut b = Vec::new();
        for v in vals {
            put_varint(&mut b, v);
        }
        let mut pos = 0;
        for v in vals {
            assert_eq!(get_varint(&b, &mut pos), Some(v));
        }
        assert_eq!(get_varint(&b, &mut pos), None);
        assert_eq!(get_varint(&[0xff; 9], &mut 0), None);
        assert_eq!(get_varint(&[0x80], &mut 0), None);
    }

    #[test]
    fn bit_packing_round_trips_at_every_width() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        for width in 0..=32u32 {
            for n in [0usize, 1, 7, 64, 127, 128] {
                let vals: Vec<u32> = (0..n)
                    .map(|_| {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        if width == 0 {
                            0
                        } else {
                            (rng as u32) >> (32 - width)
                        }
                    })
                    .collect();
                assert!(bit_width(&vals) <= width);
                let mut b = vec![0xee];
                pack(&vals, width, &mut b);
                assert_eq!(b.len(), 1 + packed_len(n, width), "width {width} n {n}");
                let mut got = vec![9u32; n];
                unpack(&b[1..], width, &mut got);
                assert_eq!(got, vals, "width {width} n {n}");
                // short input reads zeros instead of failing
                let mut short = vec![9u32; n];
                unpack(&b[1..(b.len() / 2).max(1)], width, &mut short);
            }
        }
        assert_eq!(bit_width(&[0, 0]), 0);
        assert_eq!(bit_width(&[1, 4]), 3);
        assert_eq!(bit_width(&[u32::MAX]), 32);
        let mut out = [7u32; 3];
        unpack(&[0xff; 20], 33, &mut out);
        assert_eq!(out, [0, 0, 0]);
    }
}
