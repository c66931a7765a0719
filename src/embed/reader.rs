//! The reader: a cross-encoder that reads a question and one sentence together and says
//! how well the sentence answers it (one logit; `ms-marco-MiniLM-L-12-v2`).
//!
//! Why a second model: the embedder puts a question and a sentence in one space
//! separately, so it measures "about the same thing", not "answers it"; a cross-encoder
//! attends across both and tells "mentions the museum" from "says when it opens". It is
//! 12 layers against the embedder's 6 and reads both texts, so it is paid per pair: the
//! caller decides which sentences it sees (a few, prefiltered) and when (while the user
//! speaks).
//!
//! It runs on the embedder's int8 encoder ([`super::encoder`], weights from
//! onnxruntime's quantized file by [`super::encoder::ort`]), one thread, so that the
//! recognizer keeps the other cores. Pairs are `[CLS] question [SEP] sentence [SEP]`,
//! token types 0 then 1, as the model was trained; several pairs run as one batch (their
//! tokens are the rows of each GEMM: the weights are read once per batch). Buffers live
//! as long as the reader and only grow.

use std::path::{Path, PathBuf};

use super::EmbedError;
use super::encoder::{Head, Int8Encoder, Scratch};
use super::tokenize::WordPiece;
use crate::qgemm::Serial;

/// The reader's files, in the models directory.
pub const READER_DIR: &str = "reader";
pub const READER_MODEL_FILE: &str = "model.onnx";
pub const READER_TOKENIZER_FILE: &str = "tokenizer.json";

/// Most word pieces of the question a pair carries (its start: a question's words that
/// matter are rarely past its first 48).
pub const MAX_QUESTION_TOKENS: usize = 48;
/// Most word pieces of a sentence a pair carries (its start).
pub const MAX_SENTENCE_TOKENS: usize = 96;

/// A loaded reader and its buffers; one per thread that reads.
pub struct Reader {
    encoder: Int8Encoder,
    head: Head,
    tokenizer: WordPiece,
    dir: PathBuf,
    scratch: Scratch,
    /// The question's ids, `[CLS] … [SEP]`.
    question: Vec<u32>,
    sentence: Vec<u32>,
    ids: Vec<u32>,
    types: Vec<u8>,
    lens: Vec<usize>,
}

impl Reader {
    /// Loads `dir/model.onnx` and `dir/tokenizer.json` (`models/fetch` puts them in
    /// `models/reader/`).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let model = dir.join(READER_MODEL_FILE);
        if !model.is_file() {
            return Err(EmbedError::MissingFile { path: model });
        }
        let tokenizer = WordPiece::load(&dir.join(READER_TOKENIZER_FILE))?;
        let (encoder, head) = Int8Encoder::load_cross_encoder(&model)?;
        if tokenizer.vocab_size() > encoder.vocab_rows() || encoder.type_rows() < 2 {
            return Err(EmbedError::Model {
                path: model,
                reason: format!(
                    "{} token ids and {} token types: not the tokenizer of this \
                     cross-encoder ({} rows, 2 types needed)",
                    tokenizer.vocab_size(),
                    encoder.type_rows(),
                    encoder.vocab_rows()
                ),
            });
        }
        Ok(Reader {
            encoder,
            head,
            tokenizer,
            dir: dir.into(),
            scratch: Scratch::default(),
            question: Vec::new(),
            sentence: Vec::new(),
            ids: Vec::new(),
            types: Vec::new(),
            lens: Vec::new(),
        })
    }

    /// Where it was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Layers of its encoder (12 for the shipped model).
    pub fn depth(&self) -> usize {
        self.encoder.depth()
    }

    /// Sets the question the next [`score`](Self::score) calls read against.
    pub fn set_question(&mut self, question: &str) -> Result<(), EmbedError> {
        self.tokenizer.encode_into(question, &mut self.question)?;
        if self.question.len() > MAX_QUESTION_TOKENS + 1 {
            // Keep [CLS] and the first pieces, end with its [SEP].
            let sep = *self.question.last().expect("[SEP]");
            self.question.truncate(MAX_QUESTION_TOKENS);
            self.question.push(sep);
        }
        Ok(())
    }

    /// The word pieces a pair of the current question and `sentence` costs (the unit
    /// of the reader's work: a batch's time grows with it).
    pub fn pair_tokens(&mut self, sentence: &str) -> Result<usize, EmbedError> {
        self.tokenizer.encode_into(sentence, &mut self.sentence)?;
        Ok(self.question.len() + self.sentence.len().min(MAX_SENTENCE_TOKENS + 1) - 1)
    }

    /// The logit of each of `sentences` against the question (higher: answers it
    /// better), into `out` (one per sentence), as one batch.
    pub fn score(&mut self, sentences: &[&str], out: &mut [f32]) -> Result<(), EmbedError> {
        assert_eq!(sentences.len(), out.len(), "one logit per sentence");
        self.begin();
        for s in sentences {
            self.push_pair("", s)?;
        }
        self.run(out);
        Ok(())
    }

    /// [`score`](Self::score) of sentences each read after a heading (its passage's
    /// title, `"Title: sentence"`): a sentence that says "it" or "the city" is read
    /// knowing what about.
    pub fn score_titled(
        &mut self,
        pairs: &[(&str, &str)],
        out: &mut [f32],
    ) -> Result<(), EmbedError> {
        assert_eq!(pairs.len(), out.len(), "one logit per sentence");
        self.begin();
        for (title, s) in pairs {
            self.push_pair(title, s)?;
        }
        self.run(out);
        Ok(())
    }

    fn begin(&mut self) {
        self.ids.clear();
        self.types.clear();
        self.lens.clear();
    }

    /// Appends `[CLS] question [SEP] title : sentence [SEP]` (no heading when `title` is
    /// empty), the second segment cut to [`MAX_SENTENCE_TOKENS`].
    fn push_pair(&mut self, title: &str, sentence: &str) -> Result<(), EmbedError> {
        let start = self.ids.len();
        self.ids.extend_from_slice(&self.question);
        let q = self.question.len();
        let mut sep = 0;
        for (i, part) in [title, ":", sentence].into_iter().enumerate() {
            if title.is_empty() && i < 2 {
                continue;
            }
            self.tokenizer.encode_into(part, &mut self.sentence)?;
            // Drop the [CLS] and [SEP] each encoding brings.
            sep = *self.sentence.last().expect("[SEP]");
            let body = &self.sentence[1..self.sentence.len() - 1];
            let room = MAX_SENTENCE_TOKENS.saturating_sub(self.ids.len() - start - q);
            self.ids.extend_from_slice(&body[..body.len().min(room)]);
        }
        self.ids.push(sep);
        let second = self.ids.len() - start - q;
        self.types.extend(std::iter::repeat_n(0, q));
        self.types.extend(std::iter::repeat_n(1, second));
        self.lens.push(q + second);
        Ok(())
    }

    /// Runs the batch built by [`push_pair`](Self::push_pair) into `out`.
    fn run(&mut self, out: &mut [f32]) {
        if self.lens.is_empty() {
            return;
        }
        self.encoder.forward_batch(
            &self.ids,
            Some(&self.types),
            &self.lens,
            &Serial,
            &mut self.scratch,
        );
        let hidden = self.scratch.hidden();
        let mut start = 0;
        for (o, &len) in out.iter_mut().zip(&self.lens) {
            *o = self.head.logit(&hidden[start * super::DIM..][..super::DIM]);
            start += len;
        }
    }
}
