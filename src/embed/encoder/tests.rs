//! Each fused op against an unfused, obviously-correct version of itself (f64 where it
//! helps), and the whole pass against the tract graph of the same file.

use super::*;
use crate::embed::{Embed, Embedder, EmbedderOptions, Precision, cosine};

use crate::testing::Rng;

/// Attention as the ONNX graph spells it: split q, k, v into heads, a full score matrix
/// per head, softmax in f64, product with v, heads concatenated back.
fn attention_reference(qkv: &[f32], n: usize) -> Vec<f32> {
    let mut ctx = vec![0.0f32; n * DIM];
    let at = |t: usize, part: usize, h: usize, d: usize| {
        f64::from(qkv[t * 3 * DIM + part * DIM + h * HEAD_DIM + d])
    };
    for h in 0..HEADS {
        for i in 0..n {
            let scores: Vec<f64> = (0..n)
                .map(|j| {
                    (0..HEAD_DIM)
                        .map(|d| at(i, 0, h, d) * at(j, 1, h, d))
                        .sum::<f64>()
                        / (HEAD_DIM as f64).sqrt()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for d in 0..HEAD_DIM {
                let v: f64 = (0..n).map(|j| e[j] / sum * at(j, 2, h, d)).sum();
                ctx[i * DIM + h * HEAD_DIM + d] = v as f32;
            }
        }
    }
    ctx
}

#[test]
fn fused_attention_equals_the_per_head_reference() {
    let mut rng = Rng::new(7);
    for n in [1usize, 2, 5, 20, 33] {
        let qkv = rng.f32s(n * 3 * DIM, 4.0);
        let (mut scores, mut keys) = (vec![0.0; n], vec![f32::NAN; keys_len(n)]);
        let mut ctx = vec![f32::NAN; n * DIM];
        attention(&qkv, n, &mut scores, &mut keys, &mut ctx);
        let want = attention_reference(&qkv, n);
        for (i, (a, b)) in ctx.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 2e-5 * (1.0 + b.abs()),
                "n {n} at {i}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn layer_norm_equals_the_f64_formula() {
    let mut rng = Rng::new(11);
    let norm = Norm {
        gamma: rng.f32s(DIM, 2.0),
        beta: rng.f32s(DIM, 1.0),
    };
    let mut x = rng.f32s(3 * DIM, 5.0);
    x[7] = 80.0; // an outlier, as BERT's residual stream has
    let want: Vec<f32> = x
        .chunks_exact(DIM)
        .flat_map(|row| {
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / DIM as f64;
            let var = row
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / DIM as f64;
            let std = (var + f64::from(LN_EPS)).sqrt();
            row.iter()
                .zip(&norm.gamma)
                .zip(&norm.beta)
                .map(|((&v, &g), &b)| {
                    ((f64::from(v) - mean) / std * f64::from(g) + f64::from(b)) as f32
                })
                .collect::<Vec<_>>()
        })
        .collect();
    layer_norm(&mut x, &norm);
    for (a, b) in x.iter().zip(&want) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

#[test]
fn softmax_exp_is_within_a_few_ulp_of_std() {
    let mut x = 0.0f32;
    while x > -87.0 {
        let (a, b) = (exp(x), x.exp());
        assert!(
            (a - b).abs() <= 4.0 * f32::EPSILON * b,
            "exp({x}) = {a}, std {b}"
        );
        x -= 0.0137;
    }
    assert_eq!(exp(-1000.0), exp(-87.0));
    assert!(exp(-1000.0) < 1e-37);
}

#[test]
fn the_fused_pass_matches_the_tract_graph_of_the_same_file() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    if !dir.join(crate::embed::MODEL_INT8_FILE).is_file() {
        eprintln!("skipped: run models/fetch first");
        return;
    }
    let mut reference = Embedder::load_tract_int8(&dir).unwrap();
    let opts = |threads| EmbedderOptions {
        precision: Precision::Int8,
        threads,
    };
    let mut fused = Embedder::load(&dir, &opts(1)).unwrap();
    let mut threaded = Embedder::load(&dir, &opts(3)).unwrap();
    let (mut a, mut b, mut c) = ([0.0; DIM], [0.0; DIM], [0.0; DIM]);
    let long = "word ".repeat(400);
    for t in [
        "",
        "turn off the kitchen lights",
        "what is the capital of the country whose flag is red and white",
        &long,
    ] {
        let n = fused.embed_into(t, &mut a).unwrap();
        assert_eq!(reference.embed_into(t, &mut b).unwrap(), n);
        threaded.embed_into(t, &mut c).unwrap();
        // Splitting output channels over threads changes no arithmetic.
        assert_eq!(a, c, "threads changed the result for {t:?}");
        let cos = cosine(&a, &b);
        eprintln!("{n} tokens: fused vs tract int8 graph, cosine {cos}");
        // Not bit-identical: float order differs in attention/LayerNorm, and a value on a
        // rounding edge then quantizes one level apart. Queries agree to 1e-5; 256
        // copies of one word (sums over 256 equal scores) drift the most, 2.4e-4 here.
        let bar = if n <= 64 { 0.99999 } else { 0.9995 };
        assert!(cos > bar, "{n} tokens: cosine {cos}");
    }
}

#[test]
fn a_batch_gives_each_text_the_vector_it_gets_alone() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    if !dir.join(crate::embed::MODEL_INT8_FILE).is_file() {
        eprintln!("skipped: run models/fetch first");
        return;
    }
    let long = "passage ".repeat(300);
    let texts = [
        "turn off the kitchen lights",
        "",
        long.as_str(),
        "Normans\nThe Normans were the people who in the 10th and 11th centuries gave their name to Normandy",
        "what is the capital of the country whose flag is red and white",
    ];
    for threads in [1, 3] {
        let opts = EmbedderOptions {
            precision: Precision::Int8,
            threads,
        };
        let mut e = Embedder::load(&dir, &opts).unwrap();
        let mut batch = vec![[0.0; DIM]; texts.len()];
        let counts = e.embed_batch(&texts, &mut batch).unwrap();
        for (i, t) in texts.iter().enumerate() {
            let mut alone = [0.0; DIM];
            assert_eq!(e.embed_into(t, &mut alone).unwrap(), counts[i], "{t:?}");
            // Bit-identical: every op is row-wise or within one text, with the same
            // arithmetic whatever rows share a GEMM (so build-index's output does not
            // depend on which passages share a batch).
            assert_eq!(
                alone,
                batch[i],
                "{threads} threads, text {i}: batch and alone differ (cosine {})",
                cosine(&alone, &batch[i])
            );
        }
        // The batch after a longer one reuses the buffers and is still right.
        let mut again = vec![[0.0; DIM]; 2];
        e.embed_batch(&texts[..2], &mut again).unwrap();
        assert_eq!(again[..], batch[..2]);
    }
}

/// "No allocation per partial": once warm, embedding an English partial (tokenizer,
/// int8 encoder, pooling) allocates nothing on this thread (the counting allocator of
/// the stream tests).
#[test]
fn a_warm_embed_of_an_english_partial_allocates_nothing() {
    use crate::stream::tests::alloc_count;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    assert!(
        dir.join(crate::embed::MODEL_INT8_FILE).is_file(),
        "{dir:?}: run models/fetch first"
    );
    let opts = EmbedderOptions {
        precision: Precision::Int8,
        threads: 1,
    };
    let mut e = Embedder::load(&dir, &opts).unwrap();
    let mut out = [0.0f32; DIM];
    let longest = "what is the name of the river that flows through the capital city of France";
    e.embed_into(longest, &mut out).unwrap(); // warm-up: buffers grow to this length
    for partial in [
        "what is",
        "what is the name of the river",
        "What's the river, e.g. Seine?",
    ] {
        let before = alloc_count::count();
        e.embed_into(partial, &mut out).unwrap();
        let n = alloc_count::count() - before;
        assert_eq!(n, 0, "{n} allocations embedding {partial:?}");
    }
}
