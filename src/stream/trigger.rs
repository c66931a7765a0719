//! When to embed and search a partial: the fixed rule or a learned NO_QUERY/NEW_QUERY
//! classifier (Stream RAG, seed 003 §11-13).
//!
//! Why learned: the fixed rule (re-embed every `trigger_interval` new words) pays an
//! embed — milliseconds of the CPU the recognizer needs on a board — whether the new
//! words change what would be retrieved or not. The learned trigger asks a logistic
//! regression, on features primd has without an embed, whether a new dense query now
//! would change the evidence the previous useful query found: new words since that
//! query and how rare they are (the index's own BM25 idf: their mean, and their share
//! of the whole partial's idf mass), revisions, the partial's
//! length, partials since the query, the lexical top-1's score and margin and whether
//! the lexical top list moved since the query (the lexical query runs on every partial
//! anyway), and the cosine of the last two query embeddings. It costs a few dozen
//! multiply-adds per partial.
//!
//! The same decision is taken at end of utterance: when the final is judged NO_QUERY
//! the previous query's embedding answers (no embed after end of speech), so the
//! learned trigger needs no idle embedding to keep the final fast.
//!
//! The model is a small JSON file ([`TriggerModel`]): format name and version, the
//! feature list, standardisation, weights, threshold, and the fingerprint of the
//! embedding model (plus the lexical analyzer when lexical features are used) it was
//! trained for. A corrupt file, an unknown feature or a model for another embedder or
//! analyzer is refused with the reason. Training: `primd eval --train-trigger FILE`
//! ([`crate::eval::trigger`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::hits::Hit;
use crate::index::Index;
use crate::retriever::{HybridSearcher, Retriever};
use crate::stream::normalize::{common_prefix_words, word_count};

/// Which rule decides the dense work per partial (`trigger` in `[layer1]`, `--trigger`:
/// `flags::choices`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TriggerKind {
    /// Every `trigger_interval` new words (and idle embedding of the newest partial).
    #[default]
    Fixed,
    /// A trained NO_QUERY/NEW_QUERY classifier (`trigger_model`).
    Learned,
}

/// The trigger a retriever runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Trigger {
    #[default]
    Fixed,
    Learned(Arc<TriggerModel>),
}

impl Trigger {
    pub fn kind(&self) -> TriggerKind {
        match self {
            Trigger::Fixed => TriggerKind::Fixed,
            Trigger::Learned(_) => TriggerKind::Learned,
        }
    }

    pub fn model(&self) -> Option<&TriggerModel> {
        match self {
            Trigger::Fixed => None,
            Trigger::Learned(m) => Some(m),
        }
    }
}

/// Name of the file format.
pub const FORMAT: &str = "primd-trigger";
/// Version of the file format this primd reads and writes.
pub const VERSION: u32 = 1;

/// Number of features.
pub const N_FEATURES: usize = 12;
/// Feature names, in the order of a feature vector.
pub const FEATURES: [&str; N_FEATURES] = [
    "new_words",
    "dropped_words",
    "words",
    "partials_since_query",
    "first_query",
    "query_cosine",
    "new_idf",
    "lexical_margin",
    "lexical_top1_per_word",
    "lexical_top1_changed",
    "lexical_overlap",
    "new_idf_share",
];
/// Features from `FIRST_LEXICAL` on need the index's lexical section.
pub const FIRST_LEXICAL: usize = 6;
/// Lexical top list remembered at each query.
const LEX_TOP: usize = 10;

/// A feature vector (raw values, before standardisation).
pub type Features = [f32; N_FEATURES];

/// What the trigger remembers of the last dense query of the utterance.
#[derive(Clone, Debug, Default)]
pub struct TriggerState {
    lex_top: [u32; LEX_TOP],
    lex_len: usize,
    since: u32,
    queries: u32,
    query_cosine: f32,
}

impl TriggerState {
    pub fn new() -> Self {
        TriggerState {
            query_cosine: 1.0,
            ..Default::default()
        }
    }

    /// A partial was observed (counts partials since the last query).
    pub fn on_partial(&mut self) {
        self.since = self.since.saturating_add(1);
    }

    /// A dense query (embed) happened; `cosine` to the previous query's embedding when
    /// there was one; `lexical` the lexical hits it saw.
    pub fn on_query(&mut self, cosine: Option<f32>, lexical: &[Hit]) {
        self.queries += 1;
        self.since = 0;
        self.query_cosine = cosine.unwrap_or(1.0);
        self.lex_len = lexical.len().min(LEX_TOP);
        for (slot, h) in self.lex_top.iter_mut().zip(lexical) {
            *slot = h.index;
        }
    }

    pub fn reset(&mut self) {
        *self = TriggerState::new();
    }

    /// The features of `current` (normalised) against the last query's text `query_text`.
    /// `lexical`: the current partial's lexical hits, `None` when the retriever has no
    /// lexical side (lexical features are then 0). `searcher` gives the new words' idf.
    pub fn features(
        &self,
        current: &str,
        query_text: &str,
        lexical: Option<&[Hit]>,
        searcher: &mut HybridSearcher<'_>,
    ) -> Features {
        let words = word_count(current);
        let common = common_prefix_words(current, query_text).min(words);
        let new_words = words - common;
        let dropped = word_count(query_text).saturating_sub(common);
        let mut f = [0.0f32; N_FEATURES];
        f[0] = new_words.min(12) as f32;
        f[1] = dropped.min(12) as f32;
        f[2] = words.min(40) as f32;
        f[3] = self.since.min(12) as f32;
        f[4] = (self.queries == 0) as u8 as f32;
        f[5] = self.query_cosine;
        if let Some(lex) = lexical {
            let new_text = words_after(current, common);
            let (new_sum, new_n) = searcher.idf_mass(new_text).unwrap_or((0.0, 0));
            let (all_sum, _) = searcher.idf_mass(current).unwrap_or((0.0, 0));
            f[6] = if new_n == 0 {
                0.0
            } else {
                new_sum / new_n as f32
            };
            f[11] = if all_sum > 0.0 {
                new_sum / all_sum
            } else {
                0.0
            };
            let top1 = lex.first().map_or(0.0, |h| h.score);
            let top2 = lex.get(1).map_or(0.0, |h| h.score);
            f[7] = if top1 > 0.0 {
                (top1 - top2) / top1
            } else {
                0.0
            };
            f[8] = top1 / words.max(1) as f32;
            let before = &self.lex_top[..self.lex_len];
            f[9] = match (lex.first(), before.first()) {
                (Some(a), Some(b)) => (a.index != *b) as u8 as f32,
                (None, None) => 0.0,
                _ => 1.0,
            };
            let now = &lex[..lex.len().min(LEX_TOP)];
            f[10] = if now.is_empty() {
                0.0
            } else {
                now.iter().filter(|h| before.contains(&h.index)).count() as f32 / now.len() as f32
            };
        }
        f
    }
}

/// The words of normalised `text` after its first `n` (single spaces between words).
fn words_after(text: &str, n: usize) -> &str {
    if n == 0 {
        return text;
    }
    text.match_indices(' ')
        .nth(n - 1)
        .map_or("", |(i, _)| &text[i + 1..])
}

/// How the training went (informational, kept in the file).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainingInfo {
    /// Typed questions whose prefixes were labelled.
    pub questions: usize,
    pub rows: usize,
    pub new_query: usize,
    pub no_query: usize,
    /// Rows whose previous query was swapped for an unrelated question's.
    pub negative_samples: usize,
    /// The retriever the labels were made with.
    pub retriever: String,
    /// The index the labels were made on (its file name and passage count).
    pub index: String,
    pub passages: usize,
    pub command: String,
}

/// The file, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerFile {
    format: String,
    version: u32,
    features: Vec<String>,
    mean: Vec<f32>,
    scale: Vec<f32>,
    weights: Vec<f32>,
    bias: f32,
    /// NEW_QUERY on a partial when the probability is at least this.
    threshold: f32,
    /// NEW_QUERY on the final (embed it after end of speech rather than keep the last
    /// query's embedding) when the probability is at least this: a final costs latency
    /// where a partial costs CPU, so it has its own.
    final_threshold: f32,
    /// Hex of the embedding model's fingerprint (as recorded in the index).
    model_fingerprint: String,
    /// The lexical analyzer the idf features were computed with (`AnalyzerSpec::id`, e.g.
    /// "char4+across+numbers"), when lexical features are used.
    lexical_analyzer: Option<String>,
    training: TrainingInfo,
}

#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    #[error("cannot read trigger model {path:?}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("trigger model {path:?} is not valid: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error(
        "trigger model {path:?} was trained for another {what} ({file}, this index: {index}): \
         train one for this index with `primd eval --train-trigger`"
    )]
    Mismatch {
        path: PathBuf,
        what: &'static str,
        file: String,
        index: String,
    },
    #[error(
        "trigger = \"learned\" needs a trigger model (trigger_model = FILE or --trigger-model FILE)"
    )]
    NoModel,
}

/// A loaded, checked learned trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct TriggerModel {
    file: TriggerFile,
    /// Per feature slot: weight / scale (0 for features the file does not use).
    w: Features,
    mean: Features,
    bias: f32,
    uses_lexical: bool,
}

impl TriggerModel {
    /// A model from its parts; `features` names the used features (any subset of
    /// [`FEATURES`]), `mean`, `scale` and `weights` are parallel to it.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        features: &[&str],
        mean: &[f32],
        scale: &[f32],
        weights: &[f32],
        bias: f32,
        thresholds: (f32, f32),
        fingerprint: &[u8; 32],
        lexical_analyzer: Option<String>,
        training: TrainingInfo,
    ) -> Result<Self, String> {
        let file = TriggerFile {
            format: FORMAT.into(),
            version: VERSION,
            features: features.iter().map(|s| s.to_string()).collect(),
            mean: mean.to_vec(),
            scale: scale.to_vec(),
            weights: weights.to_vec(),
            bias,
            threshold: thresholds.0,
            final_threshold: thresholds.1,
            model_fingerprint: hex(fingerprint),
            lexical_analyzer,
            training,
        };
        Self::from_file(file)
    }

    fn from_file(f: TriggerFile) -> Result<Self, String> {
        if f.format != FORMAT {
            return Err(format!("format is {:?}, expected {FORMAT:?}", f.format));
        }
        if f.version != VERSION {
            return Err(format!(
                "format version {} (this primd reads version {VERSION})",
                f.version
            ));
        }
        let n = f.features.len();
        if n == 0 || f.mean.len() != n || f.scale.len() != n || f.weights.len() != n {
            return Err(format!(
                "{n} features but {} means, {} scales and {} weights",
                f.mean.len(),
                f.scale.len(),
                f.weights.len()
            ));
        }
        let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
        if !finite(&f.mean) || !finite(&f.weights) || !f.bias.is_finite() {
            return Err("a weight, mean or the bias is not a finite number".into());
        }
        if !f.scale.iter().all(|s| s.is_finite() && *s > 0.0) {
            return Err("a scale is not a positive finite number".into());
        }
        for t in [f.threshold, f.final_threshold] {
            if !(0.0..=1.0).contains(&t) {
                return Err(format!("threshold {t} is outside 0..=1"));
            }
        }
        if f.model_fingerprint.len() != 64
            || !f.model_fingerprint.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err("model_fingerprint is not 64 hex digits".into());
        }
        let (mut w, mut mean) = ([0.0; N_FEATURES], [0.0; N_FEATURES]);
        let mut uses_lexical = false;
        for (i, name) in f.features.iter().enumerate() {
            let slot = FEATURES.iter().position(|k| k == name).ok_or_else(|| {
                format!("unknown feature {name:?} (known: {})", FEATURES.join(", "))
            })?;
            if f.features[..i].contains(name) {
                return Err(format!("feature {name:?} listed twice"));
            }
            w[slot] = f.weights[i] / f.scale[i];
            mean[slot] = f.mean[i];
            uses_lexical |= slot >= FIRST_LEXICAL;
        }
        if uses_lexical && f.lexical_analyzer.is_none() {
            return Err("lexical features are used but lexical_analyzer is missing".into());
        }
        Ok(TriggerModel {
            bias: f.bias,
            file: f,
            w,
            mean,
            uses_lexical,
        })
    }

    /// Parses and checks a model file's text (`path` only names it in errors).
    pub fn from_json(text: &str, path: &Path) -> Result<Self, TriggerError> {
        let invalid = |reason: String| TriggerError::Invalid {
            path: path.into(),
            reason,
        };
        let file: TriggerFile = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        Self::from_file(file).map_err(invalid)
    }

    pub fn load(path: &Path) -> Result<Self, TriggerError> {
        let bytes = std::fs::read(path).map_err(|source| TriggerError::Io {
            path: path.into(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| TriggerError::Invalid {
            path: path.into(),
            reason: "not UTF-8 text".into(),
        })?;
        Self::from_json(&text, path)
    }

    pub fn to_json(&self) -> String {
        // Serialising plain numbers and strings cannot fail.
        serde_json::to_string_pretty(&self.file).unwrap_or_default()
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.to_json() + "\n")
    }

    /// Refuses a model trained for another embedding model or lexical analyzer, or one
    /// needing lexical features that `retriever` on `index` cannot give.
    pub fn check(
        &self,
        index: &Index,
        retriever: Retriever,
        path: &Path,
    ) -> Result<(), TriggerError> {
        let fp = hex(&index.meta().fingerprint);
        if fp != self.file.model_fingerprint {
            return Err(TriggerError::Mismatch {
                path: path.into(),
                what: "embedding model",
                file: format!("fingerprint {}…", &self.file.model_fingerprint[..16]),
                index: format!("{}…", &fp[..16]),
            });
        }
        if self.uses_lexical {
            let analyzer = index.lexical().map(|l| l.spec().id());
            let lexical_ok = retriever.uses_lexical() && analyzer.is_some();
            if !lexical_ok || analyzer != self.file.lexical_analyzer {
                return Err(TriggerError::Mismatch {
                    path: path.into(),
                    what: "lexical analyzer",
                    file: self.file.lexical_analyzer.clone().unwrap_or_default(),
                    index: match (analyzer, retriever.uses_lexical()) {
                        (Some(a), true) => a,
                        (Some(_), false) => format!("none: the {retriever} retriever"),
                        (None, _) => "none: no lexical section".into(),
                    },
                });
            }
        }
        Ok(())
    }

    /// Probability of NEW_QUERY.
    pub fn probability(&self, x: &Features) -> f32 {
        let z: f32 = self.bias
            + x.iter()
                .zip(&self.mean)
                .zip(&self.w)
                .map(|((x, m), w)| (x - m) * w)
                .sum::<f32>();
        1.0 / (1.0 + (-z).exp())
    }

    /// NEW_QUERY on a partial: embed and search now.
    pub fn new_query(&self, x: &Features) -> bool {
        self.probability(x) >= self.file.threshold
    }

    /// NEW_QUERY on the final: embed it (else keep the last query's embedding).
    pub fn new_query_final(&self, x: &Features) -> bool {
        self.probability(x) >= self.file.final_threshold
    }

    /// (partial, final) thresholds.
    pub fn thresholds(&self) -> (f32, f32) {
        (self.file.threshold, self.file.final_threshold)
    }

    /// The same model with other (partial, final) thresholds.
    pub fn with_thresholds(&self, t: (f32, f32)) -> Self {
        let mut m = self.clone();
        m.file.threshold = t.0;
        m.file.final_threshold = t.1;
        m
    }

    pub fn uses_lexical(&self) -> bool {
        self.uses_lexical
    }

    pub fn features(&self) -> &[String] {
        &self.file.features
    }

    pub fn training(&self) -> &TrainingInfo {
        &self.file.training
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Loads and checks the model `kind` asks for: `Trigger::Fixed` for the fixed rule
/// (a model path is then ignored), the checked model for `learned`.
pub fn load_for(
    kind: TriggerKind,
    path: Option<&Path>,
    index: &Index,
    retriever: Retriever,
) -> Result<Trigger, TriggerError> {
    match kind {
        TriggerKind::Fixed => Ok(Trigger::Fixed),
        TriggerKind::Learned => {
            let path = path.ok_or(TriggerError::NoModel)?;
            let m = TriggerModel::load(path)?;
            m.check(index, retriever, path)?;
            Ok(Trigger::Learned(Arc::new(m)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(fp: &[u8; 32]) -> TriggerModel {
        TriggerModel::new(
            &["new_words", "query_cosine", "new_idf"],
            &[1.0, 0.9, 3.0],
            &[2.0, 0.1, 1.5],
            &[1.5, -0.7, 0.4],
            -0.2,
            (0.35, 0.2),
            fp,
            Some("char4".into()),
            TrainingInfo {
                questions: 3,
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn the_model_file_round_trips() {
        let m = model(&[7; 32]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trigger.json");
        m.save(&path).unwrap();
        let back = TriggerModel::load(&path).unwrap();
        assert_eq!(back, m);
        let mut x = [0.0; N_FEATURES];
        x[0] = 3.0;
        x[5] = 0.8;
        x[6] = 4.0;
        let z: f32 =
            -0.2 + 1.5 * (3.0 - 1.0) / 2.0 - 0.7 * (0.8 - 0.9) / 0.1 + 0.4 * (4.0 - 3.0) / 1.5;
        let p = 1.0 / (1.0 + (-z).exp());
        assert!((back.probability(&x) - p).abs() < 1e-5);
        assert_eq!(back.new_query(&x), p >= 0.35);
        assert_eq!(back.new_query_final(&x), p >= 0.2);
        assert!(back.uses_lexical());
    }

    #[test]
    fn corrupt_or_unknown_files_are_refused_with_the_reason() {
        let good = model(&[7; 32]).to_json();
        let path = Path::new("trigger.json");
        let refused = |text: &str, needle: &str| {
            let e = TriggerModel::from_json(text, path).unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} should mention {needle:?}");
            assert!(e.contains("trigger.json"), "{e:?} names the file");
        };
        refused(&good[..good.len() / 2], "EOF");
        refused("", "EOF");
        refused(&good.replace("primd-trigger", "other"), "format");
        refused(
            &good.replace("\"version\": 1", "\"version\": 2"),
            "version 2",
        );
        refused(&good.replace("new_idf", "colour"), "unknown feature");
        refused(
            &good.replace("\"threshold\": 0.35", "\"threshold\": 1.5"),
            "threshold",
        );
        refused(
            &good.replace("\"final_threshold\": 0.2", "\"final_threshold\": -1"),
            "threshold",
        );
        refused(
            &good.replace("\"final_threshold\": 0.2,", ""),
            "final_threshold",
        );
        refused(&good.replace("\"new_idf\"", "\"new_words\""), "twice");
        refused(&good.replacen("1.5,", "", 1), "weights");
        refused(
            &good.replace("\"bias\": -0.2", "\"bias\": \"x\""),
            "expected f32",
        );
        refused(&good.replace("\"char4\"", "null"), "lexical_analyzer");
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("b.json");
        std::fs::write(&bin, [0xff, 0xfe, 0x00]).unwrap();
        assert!(
            TriggerModel::load(&bin)
                .unwrap_err()
                .to_string()
                .contains("UTF-8")
        );
        let missing = TriggerModel::load(&dir.path().join("none.json")).unwrap_err();
        assert!(matches!(missing, TriggerError::Io { .. }));
    }

    #[test]
    fn words_after_skips_whole_words() {
        assert_eq!(words_after("set a timer", 0), "set a timer");
        assert_eq!(words_after("set a timer", 1), "a timer");
        assert_eq!(words_after("set a timer", 3), "");
    }
}
