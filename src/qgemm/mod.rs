//! int8 linear layers (`y = x·Wᵀ + b`) for the encoder's weight matmuls.
//!
//! Why our own: tract 0.23.9 lowers every ONNX int8 recipe onto an i32 kernel that
//! widens bytes one by one (measured 25-300x slower than its fp32 path: the embedder
//! measurements, "Embedder: int8 vs fp32 vs onnxruntime"), so the int8 model calls
//! these kernels instead, through the tract op in `embed::int8`.
//!
//! Arithmetic (what the quality figures were measured with):
//! - weights: int8, symmetric, one scale per output channel, in `[-127, 127]`
//!   (a `-128` is clamped to `-127` when packing), packed once at load;
//! - activations: quantized per row (per token) with a dynamic, asymmetric scale: the
//!   row's range `[min(x, 0), max(x, 0)]` is mapped onto `[-127, 127]`, i.e.
//!   `x ≈ s · (q − z)` with `s = range / 254`, an integer zero point `z` and every `q` in
//!   `[-127, 127]`. Asymmetric because GELU outputs (the FFN-out input) are almost all
//!   positive: a symmetric scale would waste half the levels there;
//! - non-finite activations (a broken upstream op; the encoder never makes them from
//!   text) never make a non-finite output and never panic: a NaN is skipped by the row's
//!   range and quantizes to 127, i.e. counts as the row's top level `max(x, 0)`; a `±inf`
//!   makes the range infinite, so the row gets scale 0 and its output is the bias alone
//!   (test `non_finite_activations_follow_the_documented_rule`);
//! - exact i32 accumulation (exact for any `K` up to 66 000), then
//!   `y = ((Σ q·w − z · Σ w) as f32) · (s · s_w) + b`, with the same float operations in
//!   the same order in every kernel, so all kernels give bit-identical results.
//!
//! Kernels (chosen once at first use, `PRIMD_FORCE_SCALAR=1` forces the scalar one):
//! x86_64 AVX512-VNNI (512-bit `vpdpbusd`: one instruction per 16-channel × 4-feature
//! group), x86_64 AVX-VNNI `vpdpbusd` (4 u8×s8 products summed per i32 lane), x86_64 AVX2
//! `vpmaddubsw`+`vpmaddwd` (with the sign trick, exact), aarch64 `sdot` when the CPU has
//! the dot-product extension, plain NEON `smull`/`sadalp` otherwise, and the scalar
//! reference. Each computes a tile of up to [`MR`] rows × [`NR`] output channels; the
//! shared driver ([`gemm_driver!`]) quantizes nothing, loops over tiles and dequantizes.
//!
//! Packed weight layout (all kernels): panels of [`NR`] = 16 output channels; inside a
//! panel, for each group of 4 input features, 16 × 4 bytes: channel `c`'s 4 weights at
//! bytes `4c..4c+4`. One 256-bit load is 8 channels × 4 features (the shape of
//! `vpdpbusd`), one 128-bit load is 4 × 4 (the shape of `sdot`). `K` is padded to a
//! multiple of 4 and `N` to a multiple of 16 with zeros.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::OnceLock;

mod scalar;

#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
mod aarch64;

/// Output channels per packed panel (and per micro-kernel tile).
pub const NR: usize = 16;
/// Rows (tokens) per micro-kernel tile (the 256-bit and NEON kernels: their
/// accumulators fill the register file at 4 rows × 16 channels).
pub const MR: usize = 4;
/// The tallest tile any kernel uses (AVX-512, with 32 registers: 8 rows).
const MR_MAX: usize = 8;

/// An int8 weight matrix with per-output-channel scales and a float bias, packed for the
/// kernels.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedWeights {
    k: usize,
    n: usize,
    kp: usize,
    data: Vec<i8>,
    /// Per (padded) channel: sum of its packed weights (the u8-shift correction).
    col_sum: Vec<i32>,
    scale: Vec<f32>,
    bias: Vec<f32>,
}

impl PackedWeights {
    /// `w` holds `n` output channels of `k` weights each, row-major (`[out, in]`, the
    /// layout of a torch `Linear`); `scale` and `bias` have one value per channel.
    ///
    /// # Panics
    /// If a length does not match `n`, `k` (callers check shapes first).
    pub fn new(w: &[i8], n: usize, k: usize, scale: &[f32], bias: &[f32]) -> Self {
        assert_eq!(w.len(), n * k, "weights are n × k");
        assert_eq!(scale.len(), n, "one scale per output channel");
        assert_eq!(bias.len(), n, "one bias per output channel");
        let kp = k.div_ceil(4) * 4;
        let panels = n.div_ceil(NR);
        let mut data = vec![0i8; panels * kp * NR];
        let mut col_sum = vec![0i32; panels * NR];
        for (ch, row) in w.chunks_exact(k.max(1)).enumerate().take(n) {
            let (p, c) = (ch / NR, ch % NR);
            let panel = &mut data[p * kp * NR..][..kp * NR];
            for (i, &v) in row.iter().enumerate() {
                let v = v.max(-127);
                panel[(i / 4) * 4 * NR + 4 * c + i % 4] = v;
                col_sum[ch] += i32::from(v);
            }
        }
        let pad = |v: &[f32]| {
            let mut p = v.to_vec();
            p.resize(panels * NR, 0.0);
            p
        };
        PackedWeights {
            k,
            n,
            kp,
            data,
            col_sum,
            scale: pad(scale),
            bias: pad(bias),
        }
    }

    /// Input features (`K`).
    pub fn in_features(&self) -> usize {
        self.k
    }

    /// Output channels (`N`).
    pub fn out_features(&self) -> usize {
        self.n
    }

    /// Bytes held (for logs).
    pub fn heap_bytes(&self) -> usize {
        self.data.len() + 4 * (self.col_sum.len() + self.scale.len() + self.bias.len())
    }

    fn panels(&self) -> usize {
        self.data.len() / (self.kp * NR).max(1)
    }
}

/// Reusable buffers for the quantized activations of one call (keep one per thread so
/// that a call allocates nothing once the buffers have grown).
#[derive(Clone, Debug, Default)]
pub struct Scratch {
    q: Vec<i8>,
    scale: Vec<f32>,
    zero: Vec<i32>,
}

/// Activations of one call, quantized: `m` rows of `kp` bytes (zero padded), each with
/// its scale and zero point.
struct Activations<'a> {
    q: &'a [i8],
    scale: &'a [f32],
    zero: &'a [i32],
    m: usize,
}

/// `(x, k, q, scale, zero)`: quantizes rows of `k` floats (see `quantize_rows_generic`).
type QuantizeFn = unsafe fn(&[f32], usize, &mut [i8], &mut [f32], &mut [i32]);

#[derive(Clone, Copy)]
struct Kernels {
    name: &'static str,
    quantize: QuantizeFn,
    gemm: GemmFn,
}

/// `(a, w, epilogue, panels, out)`: the panels `panels` of `a · Wᵀ`, epilogue applied,
/// written into `out` (see [`gemm_driver!`]).
type GemmFn = unsafe fn(&Activations<'_>, &PackedWeights, Epilogue<'_>, Range<usize>, Out);

const SCALAR: Kernels = Kernels {
    name: "scalar",
    quantize: scalar::quantize_rows,
    gemm: scalar::gemm,
};

/// Every kernel set of this architecture, whether or not this CPU can run it (for the
/// CI check that the best ones were tested: `testing::require_kernels`).
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) const KERNEL_SETS: &[&str] = &[
    "scalar",
    "x86_64-avx2",
    "x86_64-avxvnni",
    "x86_64-avx512vnni",
];
#[cfg(all(test, target_arch = "aarch64"))]
pub(crate) const KERNEL_SETS: &[&str] = &["scalar", "aarch64-neon", "aarch64-neon-dotprod"];
#[cfg(all(test, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub(crate) const KERNEL_SETS: &[&str] = &["scalar"];

/// Every kernel set this CPU can run, best last. Only sets whose target features were
/// detected here are returned: that is what makes calling their functions sound.
fn supported() -> Vec<Kernels> {
    #[allow(unused_mut)]
    let mut sets = vec![SCALAR];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        sets.push(Kernels {
            name: "x86_64-avx2",
            quantize: x86_64::quantize_rows_avx2,
            gemm: x86_64::gemm_avx2,
        });
        if std::arch::is_x86_feature_detected!("avxvnni") {
            sets.push(Kernels {
                name: "x86_64-avxvnni",
                quantize: x86_64::quantize_rows_avx2_u8,
                gemm: x86_64::gemm_vnni,
            });
        }
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
        {
            sets.push(Kernels {
                name: "x86_64-avx512vnni",
                quantize: x86_64::quantize_rows_avx2_u8,
                gemm: x86_64::gemm_avx512,
            });
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        sets.push(Kernels {
            name: "aarch64-neon",
            quantize: scalar::quantize_rows,
            gemm: aarch64::gemm_neon,
        });
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            sets.push(Kernels {
                name: "aarch64-neon-dotprod",
                quantize: scalar::quantize_rows,
                gemm: aarch64::gemm_sdot,
            });
        }
    }
    sets
}

fn kernels() -> &'static Kernels {
    static CHOSEN: OnceLock<Kernels> = OnceLock::new();
    CHOSEN.get_or_init(|| crate::simd::choose(SCALAR, &supported()))
}

/// Name of the kernel chosen at run time: "x86_64-avx512vnni", "x86_64-avxvnni",
/// "x86_64-avx2",
/// "aarch64-neon-dotprod", "aarch64-neon" or "scalar".
pub fn kernel_name() -> &'static str {
    kernels().name
}

/// `out[m × n] = quantize(x[m × k]) · Wᵀ` dequantized, plus bias.
///
/// # Panics
/// If `x.len() != m · k` or `out.len() != m · n`.
pub fn linear(x: &[f32], m: usize, w: &PackedWeights, scratch: &mut Scratch, out: &mut [f32]) {
    linear_with(kernels(), x, m, w, Epilogue::Bias, &Serial, scratch, out)
}

/// What the GEMM does to each output value after dequantizing it, while it is still in
/// registers: the fused epilogues of the encoder (issue #17). Every kernel applies the
/// same float operations in the same order, so results stay bit-identical across kernels.
#[derive(Clone, Copy, Debug)]
pub enum Epilogue<'a> {
    /// `y = acc · s + b` (the plain linear layer).
    Bias,
    /// `y = gelu(acc · s + b)`, exact-erf GELU ([`gelu`]): the FFN-in layer.
    BiasGelu,
    /// `y = (acc · s + b) + r[row, col]`, `r` being `m × n` like the output: the residual
    /// connection before a LayerNorm.
    BiasResidual(&'a [f32]),
}

/// Splits work across threads: [`Parallel::run`] calls `f(i)` exactly once for every `i`
/// in `0..parts()`, possibly concurrently, and returns when all calls have returned.
///
/// # Safety
/// The GEMM gives each part a disjoint set of output columns and writes them through a
/// shared pointer: an implementation that calls `f` twice with the same `i`, or returns
/// before every call has finished, would let two writers race or outlive the output.
pub unsafe trait Parallel: Sync {
    fn parts(&self) -> usize;
    fn run(&self, f: &(dyn Fn(usize) + Sync));
}

/// The calling thread alone.
pub struct Serial;

// SAFETY: one part, run once, on the calling thread, before returning.
unsafe impl Parallel for Serial {
    fn parts(&self) -> usize {
        1
    }
    fn run(&self, f: &(dyn Fn(usize) + Sync)) {
        f(0)
    }
}

/// `out[m × n] = epilogue(quantize(x[m × k]) · Wᵀ dequantized + bias)`, the output
/// channels split into `par.parts()` contiguous runs of panels computed concurrently
/// (the activations are quantized once, by the calling thread).
///
/// # Panics
/// If `x.len() != m · k`, `out.len() != m · n`, or a residual is not `m · n` long.
#[allow(clippy::too_many_arguments)]
pub fn linear_fused(
    x: &[f32],
    m: usize,
    w: &PackedWeights,
    epilogue: Epilogue<'_>,
    par: &dyn Parallel,
    scratch: &mut Scratch,
    out: &mut [f32],
) {
    linear_with(kernels(), x, m, w, epilogue, par, scratch, out)
}

/// Output of a GEMM shared by the threads of one call: each writes only the columns of
/// its own panels (see [`Parallel`]). Built from a `&mut [f32]` that outlives the call.
#[derive(Clone, Copy)]
struct Out<'a> {
    ptr: *mut f32,
    len: usize,
    _borrow: PhantomData<&'a mut [f32]>,
}

// SAFETY: `Out` is only handed to the parts of one `linear_with` call, which write
// disjoint column ranges (their own panels) of the borrowed slice and finish before the
// call returns (the `Parallel` contract).
unsafe impl Send for Out<'_> {}
// SAFETY: as for `Send`: shared by the parts of one call, which write disjoint columns.
unsafe impl Sync for Out<'_> {}

impl<'a> Out<'a> {
    fn new(out: &'a mut [f32]) -> Self {
        Out {
            ptr: out.as_mut_ptr(),
            len: out.len(),
            _borrow: PhantomData,
        }
    }

    /// Writes the first `cols` values of `v` at `at..at + cols`.
    #[inline(always)]
    fn write(&self, at: usize, v: &[f32; NR], cols: usize) {
        assert!(
            cols <= NR && at + cols <= self.len,
            "GEMM output out of bounds"
        );
        // SAFETY: in bounds (checked above); no other part writes these columns and the
        // slice is borrowed mutably for the whole call (see the `Send`/`Sync` impls).
        unsafe {
            if cols == NR {
                // A whole panel: one fixed-size store, not a `memmove` call.
                self.ptr.add(at).cast::<[f32; NR]>().write_unaligned(*v)
            } else {
                self.ptr.add(at).copy_from_nonoverlapping(v.as_ptr(), cols)
            }
        }
    }
}

/// Panels `[p0, p1)` of part `i` of `parts`: contiguous, balanced, covering all.
fn part_panels(panels: usize, i: usize, parts: usize) -> Range<usize> {
    panels * i / parts..panels * (i + 1) / parts
}

#[allow(clippy::too_many_arguments)]
fn linear_with(
    set: &Kernels,
    x: &[f32],
    m: usize,
    w: &PackedWeights,
    epilogue: Epilogue<'_>,
    par: &dyn Parallel,
    scratch: &mut Scratch,
    out: &mut [f32],
) {
    assert_eq!(x.len(), m * w.k, "x is m × k");
    assert_eq!(out.len(), m * w.n, "out is m × n");
    if let Epilogue::BiasResidual(r) = epilogue {
        assert_eq!(r.len(), m * w.n, "the residual is m × n");
    }
    if m == 0 {
        return;
    }
    scratch.q.clear();
    scratch.q.resize(m * w.kp, 0);
    scratch.scale.clear();
    scratch.scale.resize(m, 0.0);
    scratch.zero.clear();
    scratch.zero.resize(m, 0);
    if w.k == 0 {
        // No panels to loop over: every output is its bias, then the epilogue.
        for (r, row) in out.chunks_exact_mut(w.n).enumerate() {
            for (c, y) in row.iter_mut().enumerate() {
                *y = match epilogue {
                    Epilogue::Bias => w.bias[c],
                    Epilogue::BiasGelu => gelu(w.bias[c]),
                    Epilogue::BiasResidual(res) => w.bias[c] + res[r * w.n + c],
                };
            }
        }
        return;
    }
    // SAFETY: `set` comes from `supported()` (or is SCALAR), so its CPU features were
    // detected; buffer sizes were set just above.
    unsafe {
        (set.quantize)(
            x,
            w.k,
            &mut scratch.q,
            &mut scratch.scale,
            &mut scratch.zero,
        )
    };
    let a = Activations {
        q: &scratch.q,
        scale: &scratch.scale,
        zero: &scratch.zero,
        m,
    };
    let out = Out::new(out);
    let (panels, parts) = (w.panels(), par.parts().max(1));
    let gemm = set.gemm;
    let part = |i: usize| {
        // SAFETY: as for the quantizer; `a` and `out` have the sizes checked above, and
        // each part gets its own panels.
        unsafe { gemm(&a, w, epilogue, part_panels(panels, i, parts), out) }
    };
    if parts == 1 || panels < 2 * parts {
        // Too little to split: the calling thread does it all.
        // SAFETY: as above, one part covering every panel.
        unsafe { gemm(&a, w, epilogue, 0..panels, out) }
    } else {
        par.run(&part);
    }
}

/// The shared quantizer: per row asymmetric scale and zero point (see the module doc),
/// round half to even, zero padding. With `U8`, each byte is stored as `q + 128`
/// (`q ^ 0x80`), the unsigned form `vpdpbusd` takes. `#[inline(always)]` so that the
/// x86_64 module re-instantiates it with AVX2 enabled, where it vectorises.
#[inline(always)]
fn quantize_rows_generic<const U8: bool>(
    x: &[f32],
    k: usize,
    q: &mut [i8],
    scale: &mut [f32],
    zero: &mut [i32],
) {
    let kp = q.len() / scale.len();
    let rows = x.chunks_exact(k).zip(q.chunks_exact_mut(kp));
    for ((row, qrow), (s, z)) in rows.zip(scale.iter_mut().zip(zero.iter_mut())) {
        // 8 running extremes: a plain `fold` with `f32::min` stays scalar. Comparisons
        // skip NaN exactly as `f32::min`/`max` do.
        let (mut lo8, mut hi8) = ([0.0f32; 8], [0.0f32; 8]);
        let chunks = row.chunks_exact(8);
        let (mut lo, mut hi) = (0.0f32, 0.0f32);
        for &v in chunks.remainder() {
            lo = if v < lo { v } else { lo };
            hi = if v > hi { v } else { hi };
        }
        for c in chunks {
            for l in 0..8 {
                lo8[l] = if c[l] < lo8[l] { c[l] } else { lo8[l] };
                hi8[l] = if c[l] > hi8[l] { c[l] } else { hi8[l] };
            }
        }
        for l in 0..8 {
            lo = if lo8[l] < lo { lo8[l] } else { lo };
            hi = if hi8[l] > hi { hi8[l] } else { hi };
        }
        let range = hi - lo;
        let (sc, inv, zp) = if range > 0.0 && range.is_finite() {
            let inv = 254.0 / range;
            // lo ≤ 0, so lo · inv is in [-254, 0] and zp in [-127, 127].
            (range / 254.0, inv, -127.0 - (lo * inv).round_ties_even())
        } else {
            (0.0, 0.0, 0.0)
        };
        *s = sc;
        *z = zp as i32;
        for (qv, xv) in qrow.iter_mut().zip(row) {
            // ≥ -127 because rounding is monotonic; `min` catches a rounding overshoot
            // at the top, and, returning its non-NaN operand, turns a NaN activation (or
            // the NaN of `±inf · 0` in a zero-scale row) into 127: see the module doc.
            let v = ((xv * inv).round_ties_even() + zp).min(127.0);
            // `v` is an integer in [-127, 127]: adding 1.5 · 2²³ puts it, two's
            // complement, in the low bits of the mantissa. Exact, and unlike `as i8`
            // (saturating) it vectorises: this loop was 12 % of an embed.
            let v = (v + 12_582_912.0).to_bits() as u8 as i8;
            *qv = if U8 { v ^ i8::MIN } else { v };
        }
    }
}

/// Exact-erf GELU as BERT defines it, `x/2 · (1 + erf(x/√2))`, with [`erf`].
/// `#[inline(always)]`: it is compiled inside each kernel's epilogue, where it vectorises.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// `erf` in f32 without branches (so loops over it vectorise): Abramowitz & Stegun
/// 7.1.28, `1 − (1 + a₁x + … + a₆x⁶)⁻¹⁶`, absolute error below 2e-6 in f32 (the 16th power amplifies rounding) — the formula
/// tract's `Erf` uses, so the fused path keeps the arithmetic the int8 model was
/// validated with. No `mul_add`: without FMA in the target it is a libm call.
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub fn erf(x: f32) -> f32 {
    const A: [f32; 6] = [
        0.0705230784,
        0.0422820123,
        0.0092705272,
        0.0001520143,
        0.0002765672,
        0.0000430638,
    ];
    let ax = x.abs();
    let mut p = A[5] * ax;
    p = (A[4] + p) * ax;
    p = (A[3] + p) * ax;
    p = (A[2] + p) * ax;
    p = (A[1] + p) * ax;
    p = (A[0] + p) * ax;
    let p2 = (p + 1.0) * (p + 1.0);
    let p4 = p2 * p2;
    let p8 = p4 * p4;
    let y = 1.0 - 1.0 / (p8 * p8);
    y.copysign(x)
}

/// The tile loop every kernel shares: for each panel of 16 channels in `$panels` and
/// each group of up to 4 rows, `$tile::<R>(a, kp, panel) -> [[i32; NR]; R]` computes the
/// integer sums `Σ q·w` (plus `128 · Σ w` when `$shift` is 1: the kernel fed `q + 128` as
/// u8), then the zero points are removed, the sums dequantized, the [`Epilogue`] applied
/// and the row written into `$out`. A macro, not a function, so that the whole loop
/// (epilogue included: GELU vectorises there) is compiled inside each kernel's
/// `#[target_feature]` function.
macro_rules! gemm_driver {
    ($a:expr, $w:expr, $ep:expr, $panels:expr, $out:expr, $shift:expr, $tile:ident) => {
        gemm_driver!($a, $w, $ep, $panels, $out, $shift, $tile, MR)
    };
    ($a:expr, $w:expr, $ep:expr, $panels:expr, $out:expr, $shift:expr, $tile:ident, $mr:expr) => {{
        let (a, w, ep, panels, out): (
            &Activations<'_>,
            &PackedWeights,
            super::Epilogue<'_>,
            std::ops::Range<usize>,
            super::Out<'_>,
        ) = ($a, $w, $ep, $panels, $out);
        const {
            assert!(
                $mr >= 1 && $mr <= MR_MAX,
                "the tile match below covers 1..=8 rows"
            )
        };
        let (kp, n) = (w.kp, w.n);
        for p in panels {
            let panel = &w.data[p * kp * NR..][..kp * NR];
            let c0 = p * NR;
            let cols = NR.min(n - c0);
            // Fixed-size views: indexing them needs no bounds check, so the per-channel
            // epilogue below vectorises (with `w.col_sum[c0 + c]` it stayed scalar).
            let arr = |v: &[f32]| -> [f32; NR] { v[c0..c0 + NR].try_into().expect("NR wide") };
            let (scale, bias) = (arr(&w.scale), arr(&w.bias));
            let col_sum: [i32; NR] = w.col_sum[c0..c0 + NR].try_into().expect("NR wide");
            let mut r0 = 0;
            while r0 < a.m {
                let rows = ($mr).min(a.m - r0);
                let mut acc = [[0i32; NR]; MR_MAX];
                {
                    let base = &a.q[r0 * kp..(r0 + rows) * kp];
                    // SAFETY: `base` holds `rows` rows of `kp` bytes and `panel` `kp · NR`
                    // bytes: exactly what a tile of `rows` rows reads.
                    unsafe {
                        match rows {
                            1 => acc[..1].copy_from_slice(&$tile::<1>(base, kp, panel)),
                            2 => acc[..2].copy_from_slice(&$tile::<2>(base, kp, panel)),
                            3 => acc[..3].copy_from_slice(&$tile::<3>(base, kp, panel)),
                            4 => acc[..4].copy_from_slice(&$tile::<4>(base, kp, panel)),
                            // Only kernels whose tile holds more rows get here.
                            5 if $mr >= 5 => acc[..5].copy_from_slice(&$tile::<5>(base, kp, panel)),
                            6 if $mr >= 6 => acc[..6].copy_from_slice(&$tile::<6>(base, kp, panel)),
                            7 if $mr >= 7 => acc[..7].copy_from_slice(&$tile::<7>(base, kp, panel)),
                            8 if $mr >= 8 => acc[..8].copy_from_slice(&$tile::<8>(base, kp, panel)),
                            _ => unreachable!("rows ≤ the tile height"),
                        }
                    }
                }
                // Dequantize (and add the residual) row by row, then GELU over the whole
                // tile in one loop: its erf is a long dependency chain, and one row (one
                // vector) at a time left the core waiting on it (perf: GELU was 17 % of a
                // 20-token embed); a loop over `rows × 16` independent values interleaves
                // the chains. The operations per value are the same either way.
                let mut ys = [[0.0f32; NR]; MR_MAX];
                for (r, (acc_r, y)) in acc.iter().zip(ys.iter_mut()).enumerate().take(rows) {
                    let (sa, z) = (a.scale[r0 + r], $shift * 128 + a.zero[r0 + r]);
                    for c in 0..NR {
                        let exact = acc_r[c].wrapping_sub(z.wrapping_mul(col_sum[c]));
                        y[c] = (exact as f32) * (sa * scale[c]) + bias[c];
                    }
                    if let super::Epilogue::BiasResidual(res) = ep {
                        let at = (r0 + r) * n + c0;
                        for (v, r) in y.iter_mut().zip(&res[at..at + cols]) {
                            *v += *r;
                        }
                    }
                }
                if let super::Epilogue::BiasGelu = ep {
                    let flat = ys[..rows].as_flattened_mut();
                    flat.iter_mut().for_each(|v| *v = super::gelu(*v));
                }
                for (r, y) in ys.iter().enumerate().take(rows) {
                    out.write((r0 + r) * n + c0, y, cols);
                }
                r0 += rows;
            }
        }
    }};
}
use gemm_driver;

#[cfg(test)]
mod tests;
