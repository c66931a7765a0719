//! The model's fit: logistic regression on standardised features by Newton's method with
//! a small ridge, exact and deterministic.

use super::Row;

/// Ridge of the Newton fit (on standardised features).
const RIDGE: f64 = 1.0;

/// Logistic regression by Newton's method on standardised features `used` of `rows`:
/// (mean, scale, weights, bias), deterministic.
pub fn fit(rows: &[Row], used: &[usize]) -> (Vec<f32>, Vec<f32>, Vec<f32>, f32) {
    let d = used.len();
    let n = rows.len().max(1) as f64;
    let mut mean = vec![0.0f64; d];
    let mut var = vec![0.0f64; d];
    for r in rows {
        for (j, &s) in used.iter().enumerate() {
            mean[j] += r.x[s] as f64 / n;
        }
    }
    for r in rows {
        for (j, &s) in used.iter().enumerate() {
            var[j] += (r.x[s] as f64 - mean[j]).powi(2) / n;
        }
    }
    let scale: Vec<f64> = var
        .iter()
        .map(|v| if *v > 1e-12 { v.sqrt() } else { 1.0 })
        .collect();
    let z = |r: &Row| -> Vec<f64> {
        let mut v: Vec<f64> = used
            .iter()
            .enumerate()
            .map(|(j, &s)| (r.x[s] as f64 - mean[j]) / scale[j])
            .collect();
        v.push(1.0);
        v
    };
    let zs: Vec<Vec<f64>> = rows.iter().map(z).collect();
    let mut w = vec![0.0f64; d + 1];
    for _ in 0..50 {
        let mut g = vec![0.0f64; d + 1];
        let mut h = vec![vec![0.0f64; d + 1]; d + 1];
        for (r, x) in rows.iter().zip(&zs) {
            let t: f64 = x.iter().zip(&w).map(|(a, b)| a * b).sum();
            let p = 1.0 / (1.0 + (-t).exp());
            let y = f64::from(u8::from(r.new_query));
            let s = (p * (1.0 - p)).max(1e-9);
            for i in 0..=d {
                g[i] += (p - y) * x[i];
                for j in 0..=d {
                    h[i][j] += s * x[i] * x[j];
                }
            }
        }
        for i in 0..d {
            g[i] += RIDGE * w[i];
            h[i][i] += RIDGE;
        }
        let step = solve(h, g);
        let mut moved = 0.0f64;
        for i in 0..=d {
            w[i] -= step[i];
            moved = moved.max(step[i].abs());
        }
        if moved < 1e-8 {
            break;
        }
    }
    (
        mean.iter().map(|&v| v as f32).collect(),
        scale.iter().map(|&v| v as f32).collect(),
        w[..d].iter().map(|&v| v as f32).collect(),
        w[d] as f32,
    )
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting (a small, symmetric
/// positive definite system).
pub(super) fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n)
            .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
            .unwrap_or(c);
        a.swap(c, p);
        b.swap(c, p);
        let d = a[c][c];
        if d.abs() < 1e-300 {
            continue;
        }
        for r in c + 1..n {
            let f = a[r][c] / d;
            if f != 0.0 {
                let (top, bottom) = a.split_at_mut(r);
                for (x, y) in bottom[0][c..n].iter_mut().zip(&top[c][c..n]) {
                    *x -= f * y;
                }
                b[r] -= f * b[c];
            }
        }
    }
    let mut x = vec![0.0; n];
    for c in (0..n).rev() {
        let s: f64 = (c + 1..n).map(|k| a[c][k] * x[k]).sum();
        x[c] = if a[c][c].abs() < 1e-300 {
            0.0
        } else {
            (b[c] - s) / a[c][c]
        };
    }
    x
}
