use super::*;

use crate::testing::Rng;

/// The definition, written independently of the packing and the tiles: quantize each row,
/// exact i64 dot products with the clamped weights, then the documented float formula.
fn reference(x: &[f32], m: usize, k: usize, w: &[i8], n: usize, ws: &[f32], b: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; m * n];
    for r in 0..m {
        let row = &x[r * k..][..k];
        let lo = row.iter().fold(0.0f32, |a, v| a.min(*v));
        let hi = row.iter().fold(0.0f32, |a, v| a.max(*v));
        let (sa, inv, z) = if hi > lo {
            let inv = 254.0 / (hi - lo);
            (
                (hi - lo) / 254.0,
                inv,
                -127.0 - (lo * inv).round_ties_even(),
            )
        } else {
            (0.0, 0.0, 0.0)
        };
        let q: Vec<i64> = row
            .iter()
            .map(|v| ((v * inv).round_ties_even() + z).min(127.0) as i64)
            .collect();
        assert!(q.iter().all(|v| (-127..=127).contains(v)), "{q:?}");
        for c in 0..n {
            let dot: i64 = (0..k)
                .map(|i| (q[i] - z as i64) * i64::from(w[c * k + i].max(-127)))
                .sum();
            out[r * n + c] = (dot as i32 as f32) * (sa * ws[c]) + b[c];
        }
    }
    out
}

/// `m` rows of `x` through the layer with kernel set `set`, bias epilogue, one thread.
fn bias_layer(
    set: &Kernels,
    x: &[f32],
    m: usize,
    packed: &PackedWeights,
    scratch: &mut Scratch,
) -> Vec<f32> {
    // NaN-filled: a column a kernel forgets to write shows.
    let mut out = vec![f32::NAN; m * packed.n];
    linear_with(
        set,
        x,
        m,
        packed,
        Epilogue::Bias,
        &Serial,
        scratch,
        &mut out,
    );
    out
}

/// The tests below run every set `supported()` returns: this one says which, and fails
/// on CI when the CPU's best sets are not among them (`testing::require_kernels`).
#[test]
fn the_chosen_kernel_is_a_supported_one_and_ci_tests_the_best() {
    let names: Vec<_> = supported().iter().map(|k| k.name).collect();
    eprintln!("qgemm kernel chosen: {}", kernel_name());
    assert!(names.contains(&kernel_name()));
    assert_eq!(names[0], "scalar");
    crate::testing::require_kernels("qgemm", KERNEL_SETS, &names);
}

#[test]
fn every_kernel_equals_the_reference_bit_for_bit() {
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut scratch = Scratch::default();
    for (m, k, n) in [
        (1, 4, 16),
        (0, 8, 16),
        (5, 384, 32),
        (9, 37, 17),
        (4, 1, 1),
        (3, 5, 15),
        (7, 64, 40),
        (2, 1536, 16),
        (13, 96, 48),
    ] {
        let w = rng.i8s(n * k);
        let ws = rng
            .f32s(n, 0.01)
            .iter()
            .map(|v| v.abs())
            .collect::<Vec<_>>();
        let b = rng.f32s(n, 1.0);
        // Outliers in some rows, as BERT activations have.
        let mut x = rng.f32s(m * k, 3.0);
        if m * k > 0 {
            x[(rng.next() as usize) % (m * k)] = 60.0;
        }
        if n % 2 == 0 {
            // GELU-like rows: (almost) all positive, the asymmetric case.
            x.iter_mut().for_each(|v| *v = v.abs() - 0.05);
        }
        let want = reference(&x, m, k, &w, n, &ws, &b);
        let packed = PackedWeights::new(&w, n, k, &ws, &b);
        for set in supported() {
            let out = bias_layer(&set, &x, m, &packed, &mut scratch);
            assert_eq!(out, want, "{} m {m} k {k} n {n}", set.name);
        }
    }
}

#[test]
fn extreme_values_do_not_saturate_any_kernel() {
    // All weights ±127 (and -128, clamped) against activations that quantize to ±127:
    // the largest pair sums the AVX2 path (i16) and the u8 shift (VNNI) can meet.
    let (m, k, n) = (6, 256, 32);
    let mut scratch = Scratch::default();
    for (wv, xv) in [(127i8, 1.0f32), (-128, 1.0), (-127, -1.0), (127, -1.0)] {
        let w = vec![wv; n * k];
        let x: Vec<f32> = (0..m * k)
            .map(|i| if i % 3 == 0 { -xv } else { xv })
            .collect();
        let ws = vec![1.0f32; n];
        let b = vec![0.0f32; n];
        let want = reference(&x, m, k, &w, n, &ws, &b);
        let packed = PackedWeights::new(&w, n, k, &ws, &b);
        for set in supported() {
            let out = bias_layer(&set, &x, m, &packed, &mut scratch);
            assert_eq!(out, want, "{} w {wv} x {xv}", set.name);
        }
    }
}

/// The module doc's rule for non-finite activations, in every kernel: a NaN counts as
/// the row's top level `max(x, 0)`; `±inf` (or a row of NaNs) gives the bias alone.
#[test]
fn non_finite_activations_follow_the_documented_rule() {
    let (k, n) = (37, 20);
    let mut rng = Rng::new(0x0bad_f10a7);
    let w = rng.i8s(n * k);
    let ws: Vec<f32> = rng.f32s(n, 0.01).iter().map(|v| v.abs()).collect();
    let b = rng.f32s(n, 1.0);
    let packed = PackedWeights::new(&w, n, k, &ws, &b);
    let row = rng.f32s(k, 2.0);
    let top = row.iter().fold(0.0f32, |a, &v| a.max(v));
    let with = |i: usize, v: f32| {
        let mut r = row.clone();
        r[i] = v;
        r
    };
    // Rows: NaN inside; the same row with the row's top level there; +inf; -inf; all NaN.
    let x: Vec<f32> = [
        with(5, f32::NAN),
        with(5, top),
        with(11, f32::INFINITY),
        with(0, f32::NEG_INFINITY),
        vec![f32::NAN; k],
    ]
    .concat();
    let mut scratch = Scratch::default();
    for set in supported() {
        let out = bias_layer(&set, &x, 5, &packed, &mut scratch);
        let rows: Vec<&[f32]> = out.chunks(n).collect();
        assert!(out.iter().all(|v| v.is_finite()), "{}: {out:?}", set.name);
        assert_eq!(rows[0], rows[1], "{}: NaN = the row's top level", set.name);
        assert_ne!(rows[0], &b[..], "{}: a NaN does not void its row", set.name);
        for (r, row) in rows.iter().enumerate().skip(2) {
            assert_eq!(*row, &b[..], "{}: row {r} is the bias alone", set.name);
        }
    }
}

#[test]
fn int8_linear_is_close_to_the_float_product() {
    // What a user of the model notices: the quantized layer approximates the fp32 one.
    let (m, k, n) = (10, 384, 64);
    let mut rng = Rng::new(17);
    let wf = rng.f32s(n * k, 0.1);
    let x = rng.f32s(m * k, 2.0);
    let b = rng.f32s(n, 0.5);
    let (mut wq, mut ws) = (vec![0i8; n * k], vec![0.0f32; n]);
    for c in 0..n {
        let row = &wf[c * k..][..k];
        let amax = row.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        ws[c] = amax / 127.0;
        for i in 0..k {
            wq[c * k + i] = (row[i] / ws[c]).round() as i8;
        }
    }
    let packed = PackedWeights::new(&wq, n, k, &ws, &b);
    let mut out = vec![0.0; m * n];
    linear(&x, m, &packed, &mut Scratch::default(), &mut out);
    let mut err2 = 0.0f64;
    let mut ref2 = 0.0f64;
    for r in 0..m {
        for c in 0..n {
            let exact: f32 = (0..k).map(|i| x[r * k + i] * wf[c * k + i]).sum::<f32>() + b[c];
            err2 += f64::from(out[r * n + c] - exact).powi(2);
            ref2 += f64::from(exact).powi(2);
        }
    }
    let rel = (err2 / ref2).sqrt();
    assert!(rel < 0.02, "relative error {rel}");
}

#[test]
fn zero_rows_and_empty_inputs_give_the_bias() {
    let (k, n) = (8, 3);
    let packed = PackedWeights::new(&[5; 24], n, k, &[1.0; 3], &[0.5, -1.0, 2.0]);
    let mut out = vec![9.0; 2 * n];
    linear(&[0.0; 16], 2, &packed, &mut Scratch::default(), &mut out);
    assert_eq!(out, [0.5, -1.0, 2.0, 0.5, -1.0, 2.0]);
    let empty = PackedWeights::new(&[], 2, 0, &[1.0; 2], &[3.0, 4.0]);
    let mut out = vec![0.0; 2];
    linear(&[], 1, &empty, &mut Scratch::default(), &mut out);
    assert_eq!(out, [3.0, 4.0]);
}

/// Parts on scoped threads: each `i` once, concurrently (the `Parallel` contract).
struct Scoped(usize);

// SAFETY: every part runs exactly once, and `scope` joins them all before returning.
unsafe impl Parallel for Scoped {
    fn parts(&self) -> usize {
        self.0
    }
    fn run(&self, f: &(dyn Fn(usize) + Sync)) {
        std::thread::scope(|s| {
            for i in 1..self.0 {
                s.spawn(move || f(i));
            }
            f(0)
        })
    }
}

#[test]
fn fused_epilogues_and_thread_splits_equal_the_unfused_layer_bit_for_bit() {
    let mut rng = Rng::new(0x5eed);
    let mut scratch = Scratch::default();
    for (m, k, n) in [
        (1, 4, 16),
        (5, 384, 1152),
        (9, 37, 17),
        (20, 96, 80),
        (3, 64, 200),
    ] {
        let w = rng.i8s(n * k);
        let ws: Vec<f32> = rng.f32s(n, 0.01).iter().map(|v| v.abs()).collect();
        let b = rng.f32s(n, 1.0);
        let x = rng.f32s(m * k, 3.0);
        let res = rng.f32s(m * n, 2.0);
        let packed = PackedWeights::new(&w, n, k, &ws, &b);
        for set in supported() {
            let run = |ep: Epilogue<'_>, par: &dyn Parallel, scratch: &mut Scratch| {
                let mut out = vec![f32::NAN; m * n];
                linear_with(&set, &x, m, &packed, ep, par, scratch, &mut out);
                out
            };
            let plain = run(Epilogue::Bias, &Serial, &mut scratch);
            let gelu_want: Vec<f32> = plain.iter().map(|&v| gelu(v)).collect();
            let res_want: Vec<f32> = plain.iter().zip(&res).map(|(v, r)| v + r).collect();
            for par in [&Serial as &dyn Parallel, &Scoped(2), &Scoped(3)] {
                let name = format!("{} m {m} k {k} n {n} parts {}", set.name, par.parts());
                assert_eq!(run(Epilogue::Bias, par, &mut scratch), plain, "{name}");
                assert_eq!(
                    run(Epilogue::BiasGelu, par, &mut scratch),
                    gelu_want,
                    "{name}"
                );
                let got = run(Epilogue::BiasResidual(&res), par, &mut scratch);
                assert_eq!(got, res_want, "{name}");
            }
        }
    }
}

#[test]
fn stacked_weights_equal_separate_linears() {
    // The encoder's one QKV GEMM is three linears' rows stacked: same result per column.
    let mut rng = Rng::new(3);
    let (m, k, n) = (7, 384, 384);
    let x = rng.f32s(m * k, 2.0);
    let mut scratch = Scratch::default();
    let parts: Vec<(Vec<i8>, Vec<f32>, Vec<f32>)> = (0..3)
        .map(|_| {
            let ws = rng.f32s(n, 0.01).iter().map(|v| v.abs()).collect();
            (rng.i8s(n * k), ws, rng.f32s(n, 1.0))
        })
        .collect();
    let stacked = PackedWeights::new(
        &parts.iter().flat_map(|p| p.0.clone()).collect::<Vec<_>>(),
        3 * n,
        k,
        &parts.iter().flat_map(|p| p.1.clone()).collect::<Vec<_>>(),
        &parts.iter().flat_map(|p| p.2.clone()).collect::<Vec<_>>(),
    );
    let mut all = vec![0.0; m * 3 * n];
    linear(&x, m, &stacked, &mut scratch, &mut all);
    for (i, (w, ws, b)) in parts.iter().enumerate() {
        let mut one = vec![0.0; m * n];
        linear(
            &x,
            m,
            &PackedWeights::new(w, n, k, ws, b),
            &mut scratch,
            &mut one,
        );
        for r in 0..m {
            assert_eq!(
                one[r * n..][..n],
                all[r * 3 * n + i * n..][..n],
                "part {i} row {r}"
            );
        }
    }
}

/// erf by its Taylor series in f64 (exact enough for |x| ≤ 4), 1 beyond.
fn erf_reference(x: f64) -> f64 {
    if x.abs() > 4.5 {
        return x.signum();
    }
    let (mut term, mut sum, mut k) = (x, x, 0.0);
    while term.abs() > 1e-17 {
        k += 1.0;
        term *= -x * x / k;
        sum += term / (2.0 * k + 1.0);
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn erf_and_gelu_follow_their_definitions() {
    let (mut x, mut max_err) = (-6.0f32, 0.0f64);
    while x < 6.0 {
        let want = erf_reference(f64::from(x));
        let err = (f64::from(erf(x)) - want).abs();
        max_err = max_err.max(err);
        assert!(err < 2e-6, "erf({x}): error {err}");
        let g = 0.5 * f64::from(x) * (1.0 + erf_reference(f64::from(x) / 2f64.sqrt()));
        assert!(
            (f64::from(gelu(x)) - g).abs() < 2e-6 * (1.0 + g.abs()),
            "gelu({x})"
        );
        x += 0.00731;
    }
    eprintln!("erf: max abs error {max_err:e}");
    assert_eq!(erf(0.0), 0.0);
    assert_eq!(gelu(0.0), 0.0);
}
