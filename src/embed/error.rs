//! Errors of the embedding layer. Each names the file it concerns, so a user who
//! points `--model` at the wrong folder learns which file is missing or broken.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "model directory {path:?} does not exist or is not a directory (run models/fetch, or pass --model DIR)"
    )]
    ModelDir { path: PathBuf },

    #[error("{path:?} is missing (run models/fetch to create it)")]
    MissingFile { path: PathBuf },

    #[error("cannot load tokenizer {path:?}: {reason}")]
    Tokenizer { path: PathBuf, reason: String },

    #[error("cannot load ONNX model {path:?}: {reason}")]
    Model { path: PathBuf, reason: String },

    #[error("{tokenizer:?} does not match {model:?}: {reason}")]
    Mismatch {
        tokenizer: PathBuf,
        model: PathBuf,
        reason: String,
    },

    #[error("tokenizing failed: {0}")]
    Tokenize(String),

    #[error("model inference failed: {0}")]
    Inference(String),
}
