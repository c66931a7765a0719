//! Pooling and vector arithmetic shared by every embedder.

use super::{DIM, Embedding};

/// Mean of `rows` (each `DIM` wide, row-major in `hidden`) into `out`, then L2 normalise.
///
/// primd never pads, so every token row has attention mask 1 and the masked mean of
/// sentence-transformers is the plain mean here (special tokens included, as there).
pub fn mean_pool_normalize(hidden: &[f32], out: &mut Embedding) {
    debug_assert!(hidden.len().is_multiple_of(DIM) && !hidden.is_empty());
    out.fill(0.0);
    let rows = hidden.len() / DIM;
    for row in hidden.chunks_exact(DIM) {
        for (o, h) in out.iter_mut().zip(row) {
            *o += *h;
        }
    }
    let inv = 1.0 / rows as f32;
    out.iter_mut().for_each(|o| *o *= inv);
    l2_normalize(out);
}

/// Scales `v` to unit length; leaves an all-zero vector as it is.
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    // sentence-transformers divides by max(norm, 1e-12); same here.
    let inv = 1.0 / norm.max(1e-12);
    v.iter_mut().for_each(|x| *x *= inv);
}

/// Cosine of two vectors (a plain dot when both have unit length, as embeddings do).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb).max(1e-12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_pool_is_the_normalised_mean_of_rows() {
        let mut hidden = vec![0.0f32; 2 * DIM];
        hidden[0] = 3.0; // row 0: (3, 0, ...)
        hidden[DIM + 1] = 4.0; // row 1: (0, 4, ...)
        let mut out = [0.0; DIM];
        mean_pool_normalize(&hidden, &mut out);
        assert!((out[0] - 0.6).abs() < 1e-6 && (out[1] - 0.8).abs() < 1e-6);
        assert!(out[2..].iter().all(|x| *x == 0.0));
    }

    #[test]
    fn cosine_ignores_length_and_zero_vectors_do_not_divide_by_zero() {
        assert!((cosine(&[1.0, 0.0], &[5.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 2.0]).abs() < 1e-6);
        let mut z = [0.0f32; 4];
        l2_normalize(&mut z);
        assert_eq!(z, [0.0; 4]);
        assert_eq!(cosine(&z, &z), 0.0);
    }
}
