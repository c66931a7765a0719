//! aarch64 kernels. NEON is part of the aarch64 baseline, so the NEON ones need no
//! run-time check; only `dot_i8_sdot` needs the `dotprod` extension (Pi 5, Jetson Orin;
//! not Pi 4), which the dispatcher detects before handing it out.
//!
//! Hamming: XOR, `vcntq_u8` (per-byte popcount) on 16-byte blocks, summed in u8 lanes
//! (at most 8 per block, so 31 blocks fit before the widening horizontal add
//! `vaddlvq_u8`); tails go to the scalar word loop.
//! int8 dot: `sdot` (4 products summed per i32 lane). Its intrinsic `vdotq_s32` is still
//! unstable (`stdarch_neon_dotprod`) on Rust 1.95/1.96, so it is issued with `asm!`.
//! Without dotprod: `vmull_s8` widening multiplies, accumulated pairwise into i32 lanes
//! with `vpadalq_s16` (never `vmlal_s8`: two products of -128·-128 overflow an i16).
//! Lane sums wrap exactly like the scalar reference.

use std::arch::aarch64::*;
use std::arch::asm;

use super::{TopK, scalar, scan_with};

#[inline(always)]
pub(super) fn hamming(a: &[u8], b: &[u8]) -> u32 {
    let (a16, _) = a.as_chunks::<16>();
    let (b16, _) = b.as_chunks::<16>();
    let mut total = 0u32;
    for (ra, rb) in a16.chunks(31).zip(b16.chunks(31)) {
        // SAFETY: NEON is enabled for every aarch64 Rust target (baseline), and each
        // pointer addresses a whole `[u8; 16]`, exactly what `vld1q_u8` reads (no
        // alignment requirement).
        total += unsafe {
            let mut acc = vdupq_n_u8(0);
            for (x, y) in ra.iter().zip(rb) {
                let (va, vb) = (vld1q_u8(x.as_ptr()), vld1q_u8(y.as_ptr()));
                acc = vaddq_u8(acc, vcntq_u8(veorq_u8(va, vb)));
            }
            u32::from(vaddlvq_u8(acc))
        };
    }
    let n = a16.len().min(b16.len()) * 16;
    total + scalar::hamming(&a[n..], &b[n..])
}

pub(super) fn hamming_top_k(codes: &[u8], query: &[u8], top: &mut TopK) {
    scan_with(codes, query, top, hamming);
}

pub(super) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let (a16, _) = a.as_chunks::<16>();
    let (b16, _) = b.as_chunks::<16>();
    // SAFETY: NEON is enabled for every aarch64 Rust target (baseline), and each pointer
    // addresses a whole `[i8; 16]`, exactly what `vld1q_s8` reads.
    let sum = unsafe {
        let mut acc = vdupq_n_s32(0);
        for (x, y) in a16.iter().zip(b16) {
            let (va, vb) = (vld1q_s8(x.as_ptr()), vld1q_s8(y.as_ptr()));
            acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(va), vget_low_s8(vb)));
            acc = vpadalq_s16(acc, vmull_high_s8(va, vb));
        }
        vaddvq_s32(acc)
    };
    let n = a16.len().min(b16.len()) * 16;
    sum.wrapping_add(scalar::dot_i8(&a[n..], &b[n..]))
}

#[target_feature(enable = "dotprod")]
pub(super) fn dot_i8_sdot(a: &[i8], b: &[i8]) -> i32 {
    let (a16, _) = a.as_chunks::<16>();
    let (b16, _) = b.as_chunks::<16>();
    let mut acc = vdupq_n_s32(0);
    for (x, y) in a16.iter().zip(b16) {
        // SAFETY: each pointer addresses a whole `[i8; 16]`, exactly what `vld1q_s8` reads.
        let (va, vb) = unsafe { (vld1q_s8(x.as_ptr()), vld1q_s8(y.as_ptr())) };
        // SAFETY: `sdot` only reads and writes the three vector registers named here (no
        // memory, stack or flags); this function is only called once the dispatcher has
        // detected `dotprod`, and `#[target_feature]` lets the assembler accept it.
        unsafe {
            asm!(
                "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
                acc = inout(vreg) acc,
                a = in(vreg) va,
                b = in(vreg) vb,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
    }
    let n = a16.len().min(b16.len()) * 16;
    vaddvq_s32(acc).wrapping_add(scalar::dot_i8(&a[n..], &b[n..]))
}
