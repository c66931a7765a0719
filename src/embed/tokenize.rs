//! The WordPiece tokenizer of all-MiniLM-L6-v2, configured as sentence-transformers
//! uses it.
//!
//! `tokenizer.json` as shipped pads every input to 128 tokens and truncates at 128;
//! padding would make a 5-token query cost 128 tokens of compute, and sentence-transformers
//! truncates at 256. Both are overridden here.

use std::path::{Path, PathBuf};

use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use super::{EmbedError, MAX_TOKENS};

pub(crate) struct WordPiece {
    inner: Tokenizer,
    path: PathBuf,
}

impl WordPiece {
    pub(crate) fn load(path: &Path) -> Result<Self, EmbedError> {
        if !path.is_file() {
            return Err(EmbedError::MissingFile { path: path.into() });
        }
        let fail = |reason: String| EmbedError::Tokenizer {
            path: path.into(),
            reason,
        };
        let mut inner = Tokenizer::from_file(path).map_err(|e| fail(e.to_string()))?;
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| fail(e.to_string()))?;
        Ok(WordPiece {
            inner,
            path: path.into(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Vocabulary size including added (special) tokens: every id it can emit is below it.
    pub(crate) fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Token ids of `text` with `[CLS]` and `[SEP]`, written into `ids` (cleared first).
    /// `encode_fast`: the same ids without computing offsets, which nothing here reads.
    pub(crate) fn encode_into(&self, text: &str, ids: &mut Vec<u32>) -> Result<(), EmbedError> {
        let enc = self
            .inner
            .encode_fast(text, true)
            .map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        ids.clear();
        ids.extend_from_slice(enc.get_ids());
        Ok(())
    }
}
