//! The real embedder: tokenizer + MiniLM encoder + mean pooling.
//!
//! `Precision::Fp32` loads `model.onnx` and runs it on tract; `Precision::Int8` reads the
//! weights of `model-int8.onnx` and runs the fused int8 forward pass of
//! [`super::encoder`] (with `embedder_threads` > 1, on a small persistent pool,
//! [`super::threads`]). In tests the int8 file also runs on tract, its
//! `PrimdInt8Linear` nodes registered by [`super::int8`], as the reference.
//!
//! The tract plan is built once per model with a symbolic sequence length `S`
//! (concretising per length costs 130-190 ms per new length and gains nothing) and shared
//! by every [`Embedder`] forked from it; each fork has its own run state, so index
//! building can embed on all cores from one loaded model.
//!
//! primd never pads: one text is one `[1, S]` run. A graph may take `input_ids` alone
//! (what `models/fetch` writes) or also `attention_mask` / `token_type_ids` (what torch
//! exports), which are then all ones / all zeros.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tract_onnx::prelude::*;

use super::encoder::{Int8Encoder, Scratch as EncoderScratch};
use super::pool::mean_pool_normalize;
use super::threads::Pool;
use super::tokenize::WordPiece;
use super::{DIM, Embed, EmbedError, Embedding, Fingerprint, Precision};

/// File names inside a model directory: the fp32 graph, the int8 one (see
/// [`super::int8`]), the tokenizer.
pub const MODEL_FILE: &str = "model.onnx";
pub const MODEL_INT8_FILE: &str = "model-int8.onnx";
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// Name of the token-embedding table in BERT exports (ours and torch's); its row count
/// must equal the tokenizer's vocabulary.
const WORD_EMBEDDINGS: &str = "embeddings.word_embeddings.weight";

/// How to build an [`Embedder`].
#[derive(Clone, Debug)]
pub struct EmbedderOptions {
    pub precision: Precision,
    /// Threads tract may use inside one embed (matmuls, element-wise ops). 1 = the
    /// calling thread only.
    pub threads: usize,
}

impl Default for EmbedderOptions {
    fn default() -> Self {
        EmbedderOptions {
            precision: Precision::default(),
            threads: 1,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum InputRole {
    Ids,
    Mask,
    TokenTypes,
}

type Plan = TypedRunnableModel;

/// What [`build_plan`] returns: the plan, the role of each input, and the row count of
/// the token-embedding table when the graph names it.
type LoadedGraph = (Arc<Plan>, Vec<InputRole>, Option<usize>);

/// all-MiniLM-L6-v2: fp32 on tract, int8 on [`Int8Encoder`]. Owns reusable buffers;
/// [`Embedder::fork`] makes another one sharing the loaded model.
pub struct Embedder {
    tokenizer: Arc<WordPiece>,
    engine: Engine,
    ids: Vec<u32>,
    precision: Precision,
    fingerprint: Fingerprint,
    threads: usize,
}

/// What runs the encoder.
enum Engine {
    /// A tract plan (the fp32 model; the int8 graph too in tests, as a reference).
    Tract {
        plan: Arc<Plan>,
        roles: Arc<[InputRole]>,
        state: Box<TypedSimpleState>,
        ids: Vec<i64>,
    },
    /// The fused int8 forward pass, with its buffers and its thread pool.
    Int8 {
        encoder: Arc<Int8Encoder>,
        scratch: Box<EncoderScratch>,
        pool: Option<Pool>,
    },
}

impl Engine {
    fn fork(&self, threads: usize) -> Result<Self, EmbedError> {
        Ok(match self {
            Engine::Tract { plan, roles, .. } => Engine::Tract {
                plan: plan.clone(),
                roles: roles.clone(),
                state: Box::new(plan.spawn().map_err(|e| inference(&e))?),
                ids: Vec::with_capacity(super::MAX_TOKENS),
            },
            Engine::Int8 { encoder, .. } => Engine::Int8 {
                encoder: encoder.clone(),
                scratch: Box::default(),
                pool: (threads > 1).then(|| Pool::new(threads)),
            },
        })
    }
}

impl Embedder {
    /// Loads the model file of `opts.precision` (`DIR/model.onnx` for fp32,
    /// `DIR/model-int8.onnx` for int8: [`model_file`]) and `DIR/tokenizer.json`, checks
    /// that they belong together (vocabulary size), and fingerprints both files.
    pub fn load(dir: &Path, opts: &EmbedderOptions) -> Result<Self, EmbedError> {
        if !dir.is_dir() {
            return Err(EmbedError::ModelDir { path: dir.into() });
        }
        let model_path = dir.join(model_file(opts.precision));
        if !model_path.is_file() {
            return Err(EmbedError::MissingFile { path: model_path });
        }
        let tokenizer = WordPiece::load(&dir.join(TOKENIZER_FILE))?;
        let (engine, vocab_rows) = match opts.precision {
            Precision::Int8 => {
                let encoder = Int8Encoder::load(&model_path)?;
                log::info!(
                    "int8 encoder: {:.1} MiB of weights, GEMMs on the {} kernel",
                    encoder.heap_bytes() as f64 / (1 << 20) as f64,
                    crate::qgemm::kernel_name()
                );
                let rows = encoder.vocab_rows();
                let engine = Engine::Int8 {
                    encoder: Arc::new(encoder),
                    scratch: Box::default(),
                    pool: None,
                };
                (engine.fork(opts.threads)?, Some(rows))
            }
            Precision::Fp32 => Self::tract_engine(&model_path, opts)?,
        };
        if let Some(rows) = vocab_rows
            && rows != tokenizer.vocab_size()
        {
            return Err(EmbedError::Mismatch {
                tokenizer: tokenizer.path().into(),
                model: model_path,
                reason: format!(
                    "the tokenizer has {} tokens but the model's embedding table has {rows} rows",
                    tokenizer.vocab_size()
                ),
            });
        }
        let mut fingerprint = [0u8; 32];
        fingerprint[..16].copy_from_slice(&file_hash(&model_path)?);
        fingerprint[16..].copy_from_slice(&file_hash(tokenizer.path())?);
        Ok(Embedder {
            tokenizer: Arc::new(tokenizer),
            engine,
            ids: Vec::with_capacity(super::MAX_TOKENS),
            precision: opts.precision,
            fingerprint,
            threads: opts.threads,
        })
    }

    fn tract_engine(
        model_path: &Path,
        opts: &EmbedderOptions,
    ) -> Result<(Engine, Option<usize>), EmbedError> {
        let (plan, roles, vocab_rows) = build_plan(model_path, opts)?;
        let state = plan.spawn().map_err(|e| inference(&e))?;
        let engine = Engine::Tract {
            plan,
            roles: roles.into(),
            state: Box::new(state),
            ids: Vec::with_capacity(super::MAX_TOKENS),
        };
        Ok((engine, vocab_rows))
    }

    /// The int8 model on tract (its `PrimdInt8Linear` nodes on [`super::int8`], the rest
    /// tract's f32 ops): the reference the fused pass is tested against.
    #[cfg(test)]
    pub(crate) fn load_tract_int8(dir: &Path) -> Result<Self, EmbedError> {
        let opts = EmbedderOptions {
            precision: Precision::Int8,
            threads: 1,
        };
        let mut e = Self::load(dir, &EmbedderOptions::default())?;
        e.engine = Self::tract_engine(&dir.join(MODEL_INT8_FILE), &opts)?.0;
        Ok(e)
    }

    /// Another embedder on the same loaded model, with its own buffers (for another thread).
    pub fn fork(&self) -> Result<Self, EmbedError> {
        Ok(Embedder {
            tokenizer: self.tokenizer.clone(),
            engine: self.engine.fork(self.threads)?,
            ids: Vec::with_capacity(super::MAX_TOKENS),
            precision: self.precision,
            fingerprint: self.fingerprint,
            threads: self.threads,
        })
    }

    pub fn precision(&self) -> Precision {
        self.precision
    }

    fn run(&mut self, out: &mut Embedding) -> Result<(), EmbedError> {
        match &mut self.engine {
            Engine::Int8 {
                encoder,
                scratch,
                pool,
            } => {
                let par: &dyn crate::qgemm::Parallel = match pool {
                    Some(p) => p,
                    None => &crate::qgemm::Serial,
                };
                encoder.forward(&self.ids, par, scratch);
                mean_pool_normalize(scratch.hidden(), out);
                Ok(())
            }
            Engine::Tract {
                roles, state, ids, ..
            } => {
                ids.clear();
                ids.extend(self.ids.iter().map(|&i| i64::from(i)));
                run_tract(roles, state, ids, out)
            }
        }
    }
}

fn run_tract(
    roles: &[InputRole],
    state: &mut TypedSimpleState,
    ids: &[i64],
    out: &mut Embedding,
) -> Result<(), EmbedError> {
    let n = ids.len();
    let ids = Tensor::from_shape(&[1, n], ids).map_err(|e| inference(&e))?;
    let inputs: TVec<TValue> = roles
        .iter()
        .map(|role| match role {
            InputRole::Ids => Ok(ids.clone().into_tvalue()),
            InputRole::Mask => Ok(Tensor::from_shape(&[1, n], &vec![1i64; n])?.into_tvalue()),
            InputRole::TokenTypes => Ok(Tensor::from_shape(&[1, n], &vec![0i64; n])?.into_tvalue()),
        })
        .collect::<TractResult<_>>()
        .map_err(|e| inference(&e))?;
    let outputs = state.run(inputs).map_err(|e| inference(&e))?;
    let view = outputs[0].try_as_plain_ram().map_err(|e| inference(&e))?;
    let hidden = view.as_slice::<f32>().map_err(|e| inference(&e))?;
    if hidden.len() != n * DIM {
        return Err(EmbedError::Inference(format!(
            "model returned {} values for {n} tokens, expected {}",
            hidden.len(),
            n * DIM
        )));
    }
    mean_pool_normalize(hidden, out);
    Ok(())
}

impl Embed for Embedder {
    fn embed_into(&mut self, text: &str, out: &mut Embedding) -> Result<usize, EmbedError> {
        self.tokenizer.encode_into(text, &mut self.ids)?;
        self.run(out)?;
        Ok(self.ids.len())
    }

    fn count_tokens(&mut self, text: &str) -> Result<usize, EmbedError> {
        self.tokenizer.encode_into(text, &mut self.ids)?;
        Ok(self.ids.len())
    }

    fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The int8 engine runs the whole batch as one forward pass (its tokens are the rows
    /// of each GEMM, [`Int8Encoder::forward_batch`]); the same vectors as one by one.
    fn embed_batch(
        &mut self,
        texts: &[&str],
        out: &mut [Embedding],
    ) -> Result<Vec<usize>, EmbedError> {
        assert_eq!(texts.len(), out.len(), "one output slot per text");
        if !matches!(self.engine, Engine::Int8 { .. }) {
            let each = texts.iter().zip(out.iter_mut());
            return each.map(|(t, o)| self.embed_into(t, o)).collect();
        }
        let (mut ids, mut lens) = (Vec::new(), Vec::with_capacity(texts.len()));
        for t in texts {
            self.tokenizer.encode_into(t, &mut self.ids)?;
            ids.extend_from_slice(&self.ids);
            lens.push(self.ids.len());
        }
        if let Engine::Int8 {
            encoder,
            scratch,
            pool,
        } = &mut self.engine
        {
            let par: &dyn crate::qgemm::Parallel = match pool {
                Some(p) => p,
                None => &crate::qgemm::Serial,
            };
            encoder.forward_batch(&ids, None, &lens, par, scratch);
            let mut rows = scratch.hidden();
            for (&len, o) in lens.iter().zip(out.iter_mut()) {
                let (mine, rest) = rows.split_at(len * DIM);
                mean_pool_normalize(mine, o);
                rows = rest;
            }
        }
        Ok(lens)
    }
}

/// The model file (in a model directory) that runs at `precision`.
pub fn model_file(precision: Precision) -> &'static str {
    match precision {
        Precision::Fp32 => MODEL_FILE,
        Precision::Int8 => MODEL_INT8_FILE,
    }
}

/// Which of `dir`'s model files, with its tokenizer, has `fingerprint`: int8 is tried
/// first (the default, and the file a board is most likely to carry), so an index is
/// usually matched by hashing only the file that will be loaded anyway. `None` when
/// neither matches or the files cannot be read; loading then reports what is wrong.
pub fn precision_of(dir: &Path, fingerprint: &Fingerprint) -> Option<Precision> {
    let tokenizer = file_hash(&dir.join(TOKENIZER_FILE)).ok()?;
    if tokenizer[..] != fingerprint[16..] {
        return None;
    }
    [Precision::Int8, Precision::Fp32]
        .into_iter()
        .find(|&p| file_hash(&dir.join(model_file(p))).is_ok_and(|h| h[..] == fingerprint[..16]))
}

/// xxh3-128 of a file's bytes, streamed (the model is 86 MiB: never hold it twice).
fn file_hash(path: &Path) -> Result<[u8; 16], EmbedError> {
    use std::io::Read;
    let fail = |e: std::io::Error| EmbedError::Model {
        path: path.into(),
        reason: e.to_string(),
    };
    let mut file = std::fs::File::open(path).map_err(fail)?;
    let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf).map_err(fail)? {
            0 => return Ok(hasher.digest128().to_le_bytes()),
            n => hasher.update(&buf[..n]),
        }
    }
}

fn inference(e: &TractError) -> EmbedError {
    EmbedError::Inference(format!("{e:#}"))
}

/// Loads, types, checks and optimises the graph; returns the plan, what each input is,
/// and the row count of the token-embedding table when the graph names it.
fn build_plan(path: &Path, opts: &EmbedderOptions) -> Result<LoadedGraph, EmbedError> {
    let fail = |reason: String| EmbedError::Model {
        path: PathBuf::from(path),
        reason,
    };
    // Exporters write their own dimension names (`batch`, `sequence`) which clash with
    // ours; ignore them and state the input facts ourselves.
    let mut onnx = tract_onnx::onnx();
    super::int8::register(&mut onnx.op_register);
    let mut model = onnx
        .with_ignore_output_shapes(true)
        .with_ignore_value_info(true)
        .model_for_path(path)
        .map_err(|e| fail(format!("{e:#}")))?;
    let s = model.sym("S");
    let mut roles = Vec::new();
    for ix in 0..model.inputs.len() {
        let name = model.node(model.inputs[ix].node).name.clone();
        roles.push(match name.as_str() {
            "input_ids" => InputRole::Ids,
            "attention_mask" => InputRole::Mask,
            "token_type_ids" => InputRole::TokenTypes,
            other => {
                return Err(fail(format!(
                    "unexpected input {other:?}: a BERT encoder takes input_ids \
                     (and optionally attention_mask, token_type_ids)"
                )));
            }
        });
        let fact = InferenceFact::dt_shape(i64::datum_type(), tvec![1.to_dim(), s.to_dim()]);
        model
            .set_input_fact(ix, fact)
            .map_err(|e| fail(format!("{e:#}")))?;
    }
    if !roles.iter().any(|r| matches!(r, InputRole::Ids)) {
        return Err(fail("the graph has no input named input_ids".into()));
    }
    // Initializers are const nodes named after themselves until the graph is typed.
    let vocab_rows = model
        .node_by_name(WORD_EMBEDDINGS)
        .ok()
        .and_then(|n| n.outputs[0].fact.shape.as_concrete_finite().ok().flatten())
        .and_then(|shape| shape.first().copied());
    let typed = model.into_typed().map_err(|e| fail(format!("{e:#}")))?;

    let out = typed.output_fact(0).map_err(|e| fail(format!("{e:#}")))?;
    let dims: Vec<TDim> = out.shape.iter().cloned().collect();
    if out.datum_type != f32::datum_type() || dims.len() != 3 || dims[2] != DIM.to_dim() {
        return Err(fail(format!(
            "output 0 is {:?} {dims:?}; primd expects f32 [1, S, {DIM}] (token states of a \
             384-wide MiniLM encoder)",
            out.datum_type
        )));
    }
    if vocab_rows.is_none() {
        log::warn!("{path:?} has no {WORD_EMBEDDINGS} table: tokenizer/model match not checked");
    }

    let options = RunOptions {
        executor: (opts.threads > 1)
            .then(|| tract_linalg::multithread::Executor::multithread(opts.threads)),
        ..Default::default()
    };
    let optimized = typed.into_optimized().map_err(|e| fail(format!("{e:#}")))?;
    let int8_linears = optimized
        .nodes()
        .iter()
        .filter(|n| n.op.name() == super::int8::OP_TYPE)
        .count();
    if opts.precision == Precision::Int8 {
        // The 36 encoder linears of MiniLM-L6 on our kernels; anything else means the
        // graph is not the one models/fetch writes (still correct, maybe slower).
        log::info!(
            "{int8_linears} int8 linears on the {} kernel",
            crate::qgemm::kernel_name()
        );
        if int8_linears == 0 {
            return Err(fail(format!(
                "no {} node: this is not an int8 model (models/fetch writes {})",
                super::int8::OP_TYPE,
                super::MODEL_INT8_FILE
            )));
        }
    }
    let plan = optimized
        .into_runnable_with_options(&options)
        .map_err(|e| fail(format!("{e:#}")))?;
    Ok((plan, roles, vocab_rows))
}
