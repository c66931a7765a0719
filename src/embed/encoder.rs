//! The int8 MiniLM-L6 encoder as one hand-written forward pass over fused ops.
//!
//! Why not tract for the int8 model any more (issue #17): with the 36 linears on our own
//! kernels ([`super::int8`]) half of an embed was still outside them, in tract's f32
//! glue around them — attention as reshapes, transposes and batched matmuls, LayerNorm
//! spelled as seven element-wise nodes, GELU as four, residual adds, a fresh tensor per
//! node — ~3 ms of ~6 at 20 tokens for well under 1 % of the arithmetic. The graph is
//! fixed (`models/fetch` writes it, and this module checks that the file is that graph),
//! so the shortest path to removing that glue is to run it as the handful of fused ops it
//! really is, in a loop over 6 layers, on buffers that live as long as the embedder.
//! Rewriting tract's typed graph into fused nodes was the alternative: it would keep
//! tract's executor, but every fusion then needs a pattern matcher over the exporter's
//! spelling (LayerNorm alone is `ReduceMean/Sub/Mul/ReduceMean/Add/Sqrt/Div/Mul/Add`)
//! and tract would still allocate each node's output; a ~300-line forward pass is
//! smaller than those matchers and leaves no glue at all. The weights are read by
//! [`super::onnx`] (one copy, straight into their final buffers); tract runs the fp32
//! model, and the int8 graph too where a test compares this pass with it.
//!
//! One layer, `x` being the `S × 384` hidden states:
//! 1. `qkv = x · [Wq; Wk; Wv]ᵀ + b` — one int8 GEMM (1152 channels) instead of three;
//! 2. [`attention`]: per head, `softmax(q·kᵀ/√32)·v`, the scores of one query row at a
//!    time in a reused buffer, written straight into the `S × 384` context layout;
//! 3. `t = ctx · Woᵀ + b + x` (residual in the GEMM epilogue), [`layer_norm`] in place;
//! 4. `h = gelu(t · Wiᵀ + b)` (exact-erf GELU in the GEMM epilogue);
//! 5. `x = LayerNorm(h · Wfᵀ + b + t)` (residual in the epilogue again).
//!
//! The GEMMs quantize their input rows themselves (per token, dynamic: `qgemm`). Fusing
//! that quantisation into the LayerNorm that precedes them would save one read of a
//! 384-float row per GEMM, a few µs per embed against ~2 ms: not worth a second copy of
//! the quantizer. Every buffer lives in [`Scratch`] and only grows, so an embed after the
//! first allocates nothing here.
//!
//! Every op here is plain Rust (the SIMD is in `qgemm`, where the MACs are); each is
//! tested against an unfused, obviously-correct version of itself, and the whole pass
//! against the tract graph of the same file.

use std::path::Path;

use super::onnx::{self, OnnxFile};
use super::{DIM, EmbedError};
use crate::qgemm::{self, Epilogue, PackedWeights, Parallel};

const LAYERS: usize = 6;
const HEADS: usize = 12;
const HEAD_DIM: usize = DIM / HEADS;
const FFN: usize = 4 * DIM;
/// Keys per block of attention scores kept in registers (16 floats: 4 SSE / NEON
/// vectors); a head's transposed keys are padded to a multiple of it.
const KEY_BLOCK: usize = 16;
/// BERT's LayerNorm epsilon; the graph's `ln_eps` initializer is checked against it.
const LN_EPS: f32 = 1e-12;

/// A LayerNorm's scale and shift.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    qkv: PackedWeights,
    out: PackedWeights,
    norm1: Norm,
    ffn_in: PackedWeights,
    ffn_out: PackedWeights,
    norm2: Norm,
}

/// The weights of the int8 encoder, read once from `model-int8.onnx`.
pub(crate) struct Int8Encoder {
    /// int8 token embeddings, `vocab × 384`, one scale per row.
    words: Vec<i8>,
    word_scale: Vec<f32>,
    positions: Vec<f32>,
    /// Token-type (segment) embeddings, `types × 384`: one row for the embedder, two for
    /// the reader (question, then sentence).
    token_types: Vec<f32>,
    norm0: Norm,
    layers: Vec<Layer>,
}

/// Per-embedder buffers; they grow to the longest input seen and are then reused.
#[derive(Default)]
pub(crate) struct Scratch {
    x: Vec<f32>,
    t: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    h: Vec<f32>,
    scores: Vec<f32>,
    keys: Vec<f32>,
    q: qgemm::Scratch,
}

impl Scratch {
    /// The last hidden states of the last [`Int8Encoder::forward`], `S × 384`.
    pub(crate) fn hidden(&self) -> &[f32] {
        &self.x
    }
}

/// The initializers of the ONNX file, each read from the file straight into the buffer
/// that keeps it (see [`super::onnx`]: the file is never held in memory whole).
struct Initializers {
    path: std::path::PathBuf,
    file: OnnxFile,
}

impl Initializers {
    fn fail(&self, reason: String) -> EmbedError {
        EmbedError::Model {
            path: self.path.clone(),
            reason,
        }
    }

    /// The bytes of initializer `name`, which must have `shape` and element type `dt`.
    fn take(&mut self, name: &str, shape: &[usize], dt: i32) -> Result<Vec<u8>, EmbedError> {
        let init = self.file.initializers.remove(name).ok_or_else(|| {
            self.fail(format!(
                "no initializer {name:?}: not the int8 MiniLM-L6 graph models/fetch writes"
            ))
        })?;
        if init.dims != shape || init.data_type != dt {
            return Err(self.fail(format!(
                "{name} is {:?} of type {}, expected {shape:?} of type {dt}",
                init.dims, init.data_type
            )));
        }
        self.file
            .read(&init)
            .map_err(|e| self.fail(format!("{name}: {e}")))
    }

    /// First dimension of an initializer (0 when absent: `take` then names it).
    fn rows(&self, name: &str) -> usize {
        let d = self
            .file
            .initializers
            .get(name)
            .and_then(|t| t.dims.first().copied());
        d.unwrap_or(0)
    }

    fn f32s(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let bytes = self.take(name, shape, onnx::FLOAT)?;
        let f = |b: &[u8]| f32::from_le_bytes(b.try_into().expect("4 bytes"));
        Ok(bytes.chunks_exact(4).map(f).collect())
    }

    fn i8s(&mut self, name: &str, shape: &[usize]) -> Result<Vec<i8>, EmbedError> {
        let bytes = self.take(name, shape, onnx::INT8)?;
        // Same size and alignment: the collect reuses the buffer (no second copy).
        Ok(bytes.into_iter().map(|b| b as i8).collect())
    }

    fn norm(&mut self, prefix: &str) -> Result<Norm, EmbedError> {
        Ok(Norm {
            gamma: self.f32s(&format!("{prefix}.weight"), &[DIM])?,
            beta: self.f32s(&format!("{prefix}.bias"), &[DIM])?,
        })
    }

    /// Several `PrimdInt8Linear`s with the same input, stacked into one GEMM.
    fn linears(
        &mut self,
        prefixes: &[&str],
        k: usize,
        n: usize,
    ) -> Result<PackedWeights, EmbedError> {
        let (mut w, mut s, mut b) = (Vec::new(), Vec::new(), Vec::new());
        for p in prefixes {
            let wt = self.i8s(&format!("{p}.weight"), &[n, k])?;
            if wt.contains(&i8::MIN) {
                return Err(self.fail(format!("{p}: weights must be in [-127, 127]")));
            }
            w.extend(wt);
            s.extend(self.f32s(&format!("{p}.weight_scale"), &[n])?);
            b.extend(self.f32s(&format!("{p}.bias"), &[n])?);
        }
        Ok(PackedWeights::new(&w, n * prefixes.len(), k, &s, &b))
    }
}

impl Int8Encoder {
    /// Reads and checks the weights of `model-int8.onnx`.
    pub(crate) fn load(path: &Path) -> Result<Self, EmbedError> {
        let fail = |reason: String| EmbedError::Model {
            path: path.into(),
            reason,
        };
        let file = OnnxFile::open(path).map_err(fail)?;
        check_graph(&file.nodes).map_err(fail)?;
        let mut init = Initializers {
            path: path.into(),
            file,
        };
        let eps = init.f32s("ln_eps", &[])?;
        let scale = init.f32s("attn_scale", &[])?;
        if eps != [LN_EPS] || scale != [1.0 / (HEAD_DIM as f32).sqrt()] {
            return Err(fail(format!(
                "ln_eps {eps:?} / attn_scale {scale:?}: not the constants of MiniLM-L6"
            )));
        }
        let vocab = init.rows("embeddings.word_embeddings.weight");
        let words = init.i8s("embeddings.word_embeddings.weight", &[vocab, DIM])?;
        let word_scale = init.f32s("embeddings.word_embeddings.scale", &[vocab, 1])?;
        let max_pos = init.rows("embeddings.position_embeddings.weight");
        if max_pos < super::MAX_TOKENS {
            return Err(fail(format!(
                "{max_pos} position embeddings, primd needs {}",
                super::MAX_TOKENS
            )));
        }
        let positions = init.f32s("embeddings.position_embeddings.weight", &[max_pos, DIM])?;
        let token_types = init.f32s("embeddings.token_type_embeddings.0", &[DIM])?;
        let norm0 = init.norm("embeddings.LayerNorm")?;
        let mut layers = Vec::with_capacity(LAYERS);
        for i in 0..LAYERS {
            let p = format!("encoder.layer.{i}");
            let qkv = ["query", "key", "value"].map(|n| format!("{p}.attention.self.{n}"));
            layers.push(Layer {
                qkv: init.linears(&qkv.each_ref().map(String::as_str), DIM, DIM)?,
                out: init.linears(&[&format!("{p}.attention.output.dense")], DIM, DIM)?,
                norm1: init.norm(&format!("{p}.attention.output.LayerNorm"))?,
                ffn_in: init.linears(&[&format!("{p}.intermediate.dense")], DIM, FFN)?,
                ffn_out: init.linears(&[&format!("{p}.output.dense")], FFN, DIM)?,
                norm2: init.norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(Int8Encoder {
            words,
            word_scale,
            positions,
            token_types,
            norm0,
            layers,
        })
    }

    /// Rows of the token-embedding table (the tokenizer's vocabulary must match).
    pub(crate) fn vocab_rows(&self) -> usize {
        self.word_scale.len()
    }

    /// Bytes of weights held (for logs).
    pub(crate) fn heap_bytes(&self) -> usize {
        let f = |v: &[f32]| 4 * v.len();
        self.words.len()
            + f(&self.word_scale)
            + f(&self.positions)
            + self
                .layers
                .iter()
                .map(|l| {
                    l.qkv.heap_bytes()
                        + l.out.heap_bytes()
                        + l.ffn_in.heap_bytes()
                        + l.ffn_out.heap_bytes()
                })
                .sum::<usize>()
    }

    /// Runs the encoder on `ids` (at most [`super::MAX_TOKENS`], each below the vocabulary
    /// size: the tokenizer guarantees both); the hidden states end in `s.hidden()`.
    pub(crate) fn forward(&self, ids: &[u32], par: &dyn Parallel, s: &mut Scratch) {
        self.forward_batch(ids, None, &[ids.len()], par, s);
    }

    /// Runs the encoder on several sequences at once: `ids` holds them back to back,
    /// `lens` their lengths (each at most [`super::MAX_TOKENS`]). Their tokens are the
    /// rows of one GEMM per linear, so the weights are streamed once per batch instead
    /// of once per sequence (index building: many passages); embeddings, LayerNorm and
    /// attention stay per sequence. Every op is row-wise (per-token quantisation, per-row
    /// norms) except attention, which never crosses a sequence, so each sequence's rows
    /// are the ones [`forward`](Self::forward) alone would give. The hidden states end
    /// in `s.hidden()`, sequence `i` at rows `lens[..i].sum()..` onwards. `types` (one per
    /// id, each below [`type_rows`](Self::type_rows)) are the token types of a pair
    /// encoder; `None` is type 0 throughout.
    pub(crate) fn forward_batch(
        &self,
        ids: &[u32],
        types: Option<&[u8]>,
        lens: &[usize],
        par: &dyn Parallel,
        s: &mut Scratch,
    ) {
        let n = ids.len();
        assert_eq!(lens.iter().sum::<usize>(), n, "lens must cover ids");
        let max_len = lens.iter().copied().max().unwrap_or(0);
        assert!(
            max_len <= self.positions.len() / DIM,
            "{max_len} tokens: longer than the model"
        );
        let grow = |v: &mut Vec<f32>, len: usize| {
            v.clear();
            v.resize(len, 0.0);
        };
        grow(&mut s.x, n * DIM);
        grow(&mut s.t, n * DIM);
        grow(&mut s.qkv, n * 3 * DIM);
        grow(&mut s.ctx, n * DIM);
        grow(&mut s.h, n * FFN);
        grow(&mut s.scores, max_len);
        grow(&mut s.keys, keys_len(max_len));
        let mut start = 0;
        for &len in lens {
            let rows = start..start + len;
            let t = types.map(|t| &t[rows.clone()]);
            self.embed_tokens(&ids[rows], t, &mut s.x[start * DIM..(start + len) * DIM]);
            start += len;
        }
        layer_norm(&mut s.x, &self.norm0);
        for l in &self.layers {
            let lin = qgemm::linear_fused;
            lin(&s.x, n, &l.qkv, Epilogue::Bias, par, &mut s.q, &mut s.qkv);
            let mut start = 0;
            for &len in lens {
                let qkv = &s.qkv[start * 3 * DIM..(start + len) * 3 * DIM];
                let ctx = &mut s.ctx[start * DIM..(start + len) * DIM];
                attention(qkv, len, &mut s.scores, &mut s.keys, ctx);
                start += len;
            }
            let res = Epilogue::BiasResidual(&s.x);
            lin(&s.ctx, n, &l.out, res, par, &mut s.q, &mut s.t);
            layer_norm(&mut s.t, &l.norm1);
            lin(
                &s.t,
                n,
                &l.ffn_in,
                Epilogue::BiasGelu,
                par,
                &mut s.q,
                &mut s.h,
            );
            let res = Epilogue::BiasResidual(&s.t);
            lin(&s.h, n, &l.ffn_out, res, par, &mut s.q, &mut s.x);
            layer_norm(&mut s.x, &l.norm2);
        }
    }

    /// `x[i] = dequant(words[id_i]) + positions[i] + token_types[type_i]`, in the graph's
    /// order.
    fn embed_tokens(&self, ids: &[u32], types: Option<&[u8]>, x: &mut [f32]) {
        for (i, (&id, row)) in ids.iter().zip(x.chunks_exact_mut(DIM)).enumerate() {
            let id = id as usize;
            let w = &self.words[id * DIM..][..DIM];
            let s = self.word_scale[id];
            let pos = &self.positions[i * DIM..][..DIM];
            let ty = types.map_or(0, |t| usize::from(t[i]));
            let ty = &self.token_types[ty * DIM..][..DIM];
            for j in 0..DIM {
                row[j] = (f32::from(w[j]) * s + pos[j]) + ty[j];
            }
        }
    }

    /// Rows of the token-type table (1 for the embedder, 2 for the reader).
    pub(crate) fn type_rows(&self) -> usize {
        self.token_types.len() / DIM
    }

    /// Layers of the encoder.
    pub(crate) fn depth(&self) -> usize {
        self.layers.len()
    }
}

/// The node kinds `models/fetch` writes, with their counts in the int8 graph: a file with
/// other nodes computes something this pass does not, and is refused.
fn check_graph(nodes: &[onnx::Node]) -> Result<(), String> {
    let count = |op: &str| nodes.iter().filter(|n| n.op_type == op).count();
    let want = [
        (super::int8::OP_TYPE, LAYERS * 6),
        ("Softmax", LAYERS),
        ("Erf", LAYERS),
        ("ReduceMean", 2 * (2 * LAYERS + 1)),
        ("Gather", 2),
    ];
    for (op, n) in want {
        if count(op) != n {
            return Err(format!(
                "{} {op} nodes, the int8 MiniLM-L6 graph of models/fetch has {n}",
                count(op)
            ));
        }
    }
    const KNOWN: &[&str] = &[
        "PrimdInt8Linear",
        "Softmax",
        "Erf",
        "ReduceMean",
        "Gather",
        "Cast",
        "Mul",
        "Add",
        "Sub",
        "Div",
        "Sqrt",
        "Reshape",
        "Transpose",
        "MatMul",
        "Shape",
        "Slice",
        "Identity",
    ];
    match nodes.iter().find(|n| !KNOWN.contains(&n.op_type.as_str())) {
        Some(n) => Err(format!("unexpected {} node {:?}", n.op_type, n.name)),
        None => Ok(()),
    }
}

/// LayerNorm of each 384-wide row of `x`, in place: `(x − mean) / √(var + ε) · γ + β`,
/// the graph's formula (population variance of the centred row).
fn layer_norm(x: &mut [f32], norm: &Norm) {
    for row in x.chunks_exact_mut(DIM) {
        let mean = sum8(row) / DIM as f32;
        row.iter_mut().for_each(|v| *v -= mean);
        let var = dot8(row, row) / DIM as f32;
        let std = (var + LN_EPS).sqrt();
        for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *v = (*v / std) * g + b;
        }
    }
}

/// Self-attention of all 12 heads over `n` tokens: `qkv` holds per token `[q | k | v]`
/// (`3 × 384`, head `h` at `32h..32h + 32` in each); `ctx` receives per token the 12 heads'
/// outputs side by side (`n × 384`), the layout the output projection reads. `scores`
/// holds one query row's `n` scores at a time (softmax in place); `kt` (at least
/// [`keys_len`]`(n)`) one head's keys transposed, so a query row's scores are 32 multiply-adds
/// over contiguous rows of `n` — vector work with no horizontal sum per key (one dot
/// product per query and key, each ending in a horizontal sum, was half the attention's
/// time at 20 tokens).
fn attention(qkv: &[f32], n: usize, scores: &mut [f32], kt: &mut [f32], ctx: &mut [f32]) {
    const STRIDE: usize = 3 * DIM;
    const KB: usize = KEY_BLOCK;
    let np = n.div_ceil(KB) * KB;
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    let scores = &mut scores[..n];
    let kt = &mut kt[..HEAD_DIM * np];
    kt.fill(0.0); // the padding keys (j ≥ n) stay zero
    for h in 0..HEADS {
        let off = h * HEAD_DIM;
        for j in 0..n {
            let k = &qkv[j * STRIDE + DIM + off..][..HEAD_DIM];
            for (d, &v) in k.iter().enumerate() {
                kt[d * np + j] = v;
            }
        }
        for i in 0..n {
            let q: &[f32; HEAD_DIM] = qkv[i * STRIDE + off..][..HEAD_DIM]
                .try_into()
                .expect("HEAD_DIM wide");
            for j0 in (0..n).step_by(KB) {
                let mut acc = [0.0f32; KB];
                for (d, &qd) in q.iter().enumerate() {
                    let row: &[f32; KB] = kt[d * np + j0..][..KB].try_into().expect("KB wide");
                    for l in 0..KB {
                        acc[l] += qd * row[l];
                    }
                }
                let m = KB.min(n - j0);
                scores[j0..j0 + m].copy_from_slice(&acc[..m]);
            }
            scores.iter_mut().for_each(|sc| *sc *= scale);
            // Max, exp and sum as separate passes: each is a plain loop that vectorises.
            let max = max8(scores);
            scores.iter_mut().for_each(|sc| *sc = exp(*sc - max));
            let sum = sum8(scores);
            // A local, fixed-size accumulator: writing through `ctx` directly kept LLVM
            // from vectorising (it could not prove `ctx` and `qkv` apart), 32 scalar
            // stores per key (perf: most of the attention's time at 20 tokens).
            let mut acc = [0.0f32; HEAD_DIM];
            for (j, &p) in scores.iter().enumerate() {
                let v: &[f32; HEAD_DIM] = qkv[j * STRIDE + 2 * DIM + off..][..HEAD_DIM]
                    .try_into()
                    .expect("HEAD_DIM wide");
                for d in 0..HEAD_DIM {
                    acc[d] += p * v[d];
                }
            }
            let inv = 1.0 / sum;
            for (o, a) in ctx[i * DIM + off..][..HEAD_DIM].iter_mut().zip(&acc) {
                *o = a * inv;
            }
        }
    }
}

/// Floats of the transposed-keys buffer [`attention`] needs for `n` tokens.
fn keys_len(n: usize) -> usize {
    HEAD_DIM * n.div_ceil(KEY_BLOCK) * KEY_BLOCK
}

/// Maximum with 8 running maxima (NaN-free inputs: scores of finite activations).
#[inline]
fn max8(a: &[f32]) -> f32 {
    let pick = |m: f32, v: f32| if v > m { v } else { m };
    let mut acc = [f32::NEG_INFINITY; 8];
    let c = a.chunks_exact(8);
    let tail = c
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| pick(m, v));
    for x in c {
        for l in 0..8 {
            acc[l] = pick(acc[l], x[l]);
        }
    }
    acc.iter().fold(tail, |m, &v| pick(m, v))
}

/// Dot product with 8 running sums (a fixed order, so it vectorises without fast-math).
#[inline]
fn dot8(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[inline]
fn sum8(a: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let c = a.chunks_exact(8);
    let tail: f32 = c.remainder().iter().sum();
    for x in c {
        for l in 0..8 {
            acc[l] += x[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `e^x` for `x ≤ 0` (softmax arguments), branch-free: Cody-Waite reduction to
/// `e^r · 2^k`, a degree-6 minimax polynomial for `e^r` (tract-linalg's coefficients),
/// `2^k` built in the exponent field. Within a few ulp of `f32::exp`; below −87 it
/// returns 0 (those weights are under 1e-38 of the row's maximum anyway).
#[inline]
#[allow(clippy::excessive_precision)]
fn exp(x: f32) -> f32 {
    const POLY: [f32; 7] = [
        1.383684405e-03,
        8.374815793e-03,
        4.166822560e-02,
        1.666642017e-01,
        4.999999208e-01,
        1.000000036e+00,
        1.000000001e+00,
    ];
    let x = x.clamp(-87.0, 0.0);
    // `k = round(x · log₂e)`, also read from the mantissa bits: no saturating cast,
    // which would keep the loop scalar.
    let shifted = x * std::f32::consts::LOG2_E + 12_582_912.0;
    let kf = shifted - 12_582_912.0;
    let k = shifted.to_bits().wrapping_sub(12_582_912.0f32.to_bits()) as i32;
    let r = (x - kf * 0.693_145_75) - kf * 1.428_606_8e-6;
    let mut p = POLY[0];
    for c in &POLY[1..] {
        p = p * r + c;
    }
    p * f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

mod ort;
pub(crate) use ort::Head;

#[cfg(test)]
mod tests;
