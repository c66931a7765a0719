//! Text → unit vector, with all-MiniLM-L6-v2.
//!
//! Everything that knows about tokenizers, tract or ONNX lives in this module; the rest of
//! the crate sees only [`Embed`], [`Embedding`] and [`EmbedError`]. (Two places name
//! tract's kernels without running a model: [`crate::bench::kernel_report`] and `primd bench`
//! report which instruction set tract picked, for logs and bug reports.) That seam is what lets
//! the streaming state machine and the index be tested with [`HashEmbedder`], a
//! deterministic fake that needs no model files.
//!
//! Invariants every [`Embed`] implementation keeps:
//! - the whole text is embedded every time (the streaming retriever re-embeds each
//!   partial; it never averages old vectors);
//! - the result has unit L2 norm, so a dot product is a cosine;
//! - the token count returned is what the model saw (after truncation), so callers can
//!   count "new tokens" the same way the model does.

mod encoder;
mod error;
mod fake;
mod int8;
mod model;
mod onnx;
mod pool;
pub mod reader;
mod threads;
mod tokenize;

pub use error::EmbedError;
pub use fake::HashEmbedder;
pub use model::{
    Embedder, EmbedderOptions, MODEL_FILE, MODEL_INT8_FILE, TOKENIZER_FILE, model_file,
    precision_of,
};
/// The `onnx` fuzz target's body (not an API).
#[doc(hidden)]
pub use onnx::fuzz_bytes as fuzz_onnx_bytes;
pub use pool::{cosine, l2_normalize};

/// Width of a MiniLM-L6 sentence embedding.
pub const DIM: usize = 384;

/// sentence-transformers truncates all-MiniLM-L6-v2 input at 256 word pieces
/// (`max_seq_length` in its `sentence_bert_config.json`); we do the same so vectors match.
pub const MAX_TOKENS: usize = 256;

/// Identity of a model + tokenizer pair (two 128-bit xxh3 hashes).
pub type Fingerprint = [u8; 32];

/// One sentence embedding, unit length.
pub type Embedding = [f32; DIM];

/// Arithmetic used for the encoder's weight matmuls.
///
/// `Fp32` runs `model.onnx` on tract; `Int8` runs `model-int8.onnx`, whose 36 encoder
/// linears are int8 (per-channel weights, per-token dynamic activation scales, i32 sums:
/// [`crate::qgemm`]) and everything else f32 on tract.
///
/// Int8 is the default: measured against fp32 it embeds in 0.53-0.70x the time, peaks at
/// a third of the memory, and retrieves the same (Spoken-SQuAD hit@10 0.843 both); see
/// the README. An index remembers which model made it (its fingerprint), and the
/// commands that read an index load that one unless told otherwise.
/// Parsed once, from the command line (`--fp32` / `--int8` / `--precision`, see
/// `primd::flags::ModelArgs`) or by serde (the `precision` config key): `"fp32"` / `"int8"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    #[default]
    Int8,
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::Fp32 => "fp32",
            Precision::Int8 => "int8",
        })
    }
}

/// What the rest of primd needs from an embedder.
pub trait Embed: Send {
    /// Embeds the whole of `text` into `out` (unit length) and returns the number of
    /// tokens the model saw, special tokens included.
    fn embed_into(&mut self, text: &str, out: &mut Embedding) -> Result<usize, EmbedError>;

    /// How many tokens `embed_into` would see for `text`, without running the model.
    fn count_tokens(&mut self, text: &str) -> Result<usize, EmbedError>;

    /// Identifies the model and tokenizer: two embedders with the same fingerprint give
    /// the same vectors. Indexes record it so a mismatched model is refused.
    fn fingerprint(&self) -> Fingerprint;

    /// Embeds many texts, one output per text; returns the token counts. Index building
    /// uses this; the default runs them one by one (no padding is ever computed).
    fn embed_batch(
        &mut self,
        texts: &[&str],
        out: &mut [Embedding],
    ) -> Result<Vec<usize>, EmbedError> {
        assert_eq!(texts.len(), out.len(), "one output slot per text");
        texts
            .iter()
            .zip(out.iter_mut())
            .map(|(t, o)| self.embed_into(t, o))
            .collect()
    }
}
