//! Raw settings (TOML file, then command-line flags) → one checked [`RunConfig`].
//!
//! The file's `[layer1]` section has the design note's keys (`enabled`,
//! `trigger_interval`, `similarity_threshold`, `max_speculative_results`,
//! `embedder_threads`) plus primd's own, among them the retriever's (`retriever`:
//! dense|lexical|hybrid, unset = the index decides; `fusion`: convex|rrf;
//! `lexical_weight`; `lexical_candidates`; `revision_weight`; `low_evidence_threshold`;
//! `trigger`: fixed|learned and `trigger_model`, the learned trigger's file; `context_tokens`, the budget of each answer's `context`). Every key can be
//! overridden by a flag of the same name (`--trigger-interval`, ...). Unknown keys and out-of-range values are
//! refused with the key's name, so a typo never silently falls back to a default.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::embed::Precision;
use crate::fusion::{Fusion, FusionRule};
use crate::retriever::Retriever;
use crate::stream::StreamConfig;
use crate::stream::normalize::DEFAULT_FILLERS;
use crate::stream::trigger::{self, TriggerError, TriggerKind};

/// Everything `primd run` needs to know, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    pub stream: StreamConfig,
    pub embedder_threads: usize,
    /// `None`: the precision the index was built with.
    pub precision: Option<Precision>,
    /// `None`: decided by the index ([`Retriever::resolve`]), which then goes into
    /// `stream.retriever`.
    pub retriever: Option<Retriever>,
    /// Silence (no new partial) that ends an utterance, in milliseconds.
    pub endpoint_ms: u64,
    pub fillers: Vec<String>,
    /// Which trigger; `learned` loads `trigger_model` ([`RunConfig::load_trigger`]).
    pub trigger: TriggerKind,
    pub trigger_model: Option<PathBuf>,
    /// The `[conversation]` section (its flags are applied by the commands).
    pub conversation: crate::conversation::ConversationConfig,
    /// How the reader, when there is one, ranks and stops `context`.
    pub reader: crate::context::ReadSettings,
}

impl RunConfig {
    /// Decides the retriever for `index` (the one asked for, else the index's default:
    /// [`Retriever::resolve`]) and sets it in `stream`.
    pub fn resolve_retriever(
        &mut self,
        index: &crate::index::Index,
    ) -> Result<Retriever, crate::retriever::RetrieverError> {
        let r = Retriever::resolve(self.retriever, index)?;
        self.stream.retriever = r;
        Ok(r)
    }

    /// Loads the learned trigger's model (when `trigger` is learned), checks it against
    /// `index` and the resolved retriever, and sets it in `stream`. Call after
    /// [`resolve_retriever`](Self::resolve_retriever).
    pub fn load_trigger(&mut self, index: &crate::index::Index) -> Result<(), TriggerError> {
        self.stream.trigger = trigger::load_for(
            self.trigger,
            self.trigger_model.as_deref(),
            index,
            self.stream.retriever,
        )?;
        Ok(())
    }
}

/// The `[layer1]` keys, each optional: from the file, or from flags that override it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Layer1 {
    pub enabled: Option<bool>,
    pub trigger_interval: Option<i64>,
    pub similarity_threshold: Option<f64>,
    pub max_speculative_results: Option<i64>,
    pub embedder_threads: Option<i64>,
    pub min_tokens: Option<i64>,
    pub reflector_threshold: Option<f64>,
    pub full_search_candidates: Option<i64>,
    pub top_k: Option<i64>,
    pub idle_embed: Option<bool>,
    pub endpoint_ms: Option<i64>,
    pub fillers: Option<Vec<String>>,
    pub precision: Option<Precision>,
    pub retriever: Option<Retriever>,
    pub lexical_weight: Option<f64>,
    pub fusion: Option<FusionRule>,
    pub lexical_candidates: Option<i64>,
    pub revision_weight: Option<f64>,
    pub low_evidence_threshold: Option<f64>,
    pub trigger: Option<TriggerKind>,
    pub trigger_model: Option<PathBuf>,
    pub context_tokens: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    layer1: Layer1,
    #[serde(default)]
    conversation: crate::conversation::settings::Keys,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path:?}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path:?}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("invalid layer1.{key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    #[error(transparent)]
    Conversation(#[from] crate::conversation::settings::Invalid),
}

impl Layer1 {
    /// `over`'s keys win over `self`'s.
    pub fn overridden_by(self, over: Layer1) -> Layer1 {
        macro_rules! pick {
            ($($k:ident),*) => { Layer1 { $($k: over.$k.or(self.$k)),* } };
        }
        pick!(
            enabled,
            trigger_interval,
            similarity_threshold,
            max_speculative_results,
            embedder_threads,
            min_tokens,
            reflector_threshold,
            full_search_candidates,
            top_k,
            idle_embed,
            endpoint_ms,
            fillers,
            precision,
            retriever,
            lexical_weight,
            fusion,
            lexical_candidates,
            revision_weight,
            low_evidence_threshold,
            trigger,
            trigger_model,
            context_tokens
        )
    }
}

/// Reads the optional file, applies `flags` over it, checks every value.
pub fn load(path: Option<&Path>, flags: Layer1) -> Result<RunConfig, ConfigError> {
    let mut conversation = Default::default();
    let file = match path {
        None => Layer1::default(),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Io {
                path: p.into(),
                source,
            })?;
            let parsed: FileConfig = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                path: p.into(),
                reason: e.to_string(),
            })?;
            conversation = parsed.conversation;
            parsed.layer1
        }
    };
    let mut cfg = check(file.overridden_by(flags))?;
    cfg.conversation = crate::conversation::settings::Keys::check(&conversation)?;
    Ok(cfg)
}

fn int(
    key: &'static str,
    v: Option<i64>,
    default: usize,
    min: i64,
    max: i64,
) -> Result<usize, ConfigError> {
    let Some(v) = v else { return Ok(default) };
    if !(min..=max).contains(&v) {
        return Err(ConfigError::Invalid {
            key,
            reason: format!("{v} is outside {min}..={max}"),
        });
    }
    Ok(v as usize)
}

fn real(
    key: &'static str,
    v: Option<f64>,
    default: f32,
    min: f64,
    max: f64,
) -> Result<f32, ConfigError> {
    let Some(v) = v else { return Ok(default) };
    if !(min..=max).contains(&v) {
        return Err(ConfigError::Invalid {
            key,
            reason: format!("{v} is outside {min}..={max}"),
        });
    }
    Ok(v as f32)
}

/// Threads tract may use inside one embed (`embedder_threads`, `--embedder-threads`):
/// the one limit of the config key and of every command's flag.
pub const EMBEDDER_THREADS: std::ops::RangeInclusive<i64> = 1..=64;

fn check(raw: Layer1) -> Result<RunConfig, ConfigError> {
    let d = StreamConfig::default();
    let stream = StreamConfig {
        enabled: raw.enabled.unwrap_or(d.enabled),
        trigger_interval: int(
            "trigger_interval",
            raw.trigger_interval,
            d.trigger_interval,
            1,
            64,
        )?,
        similarity_threshold: real(
            "similarity_threshold",
            raw.similarity_threshold,
            d.similarity_threshold,
            -1.0,
            1.0,
        )?,
        max_speculative_results: int(
            "max_speculative_results",
            raw.max_speculative_results,
            d.max_speculative_results,
            1,
            1024,
        )?,
        min_tokens: int("min_tokens", raw.min_tokens, d.min_tokens, 0, 64)?,
        reflector_threshold: real(
            "reflector_threshold",
            raw.reflector_threshold,
            d.reflector_threshold,
            -1.0,
            1.0,
        )?,
        full_search_candidates: int(
            "full_search_candidates",
            raw.full_search_candidates,
            d.full_search_candidates,
            1,
            1024,
        )?,
        top_k: int("top_k", raw.top_k, d.top_k, 1, 100)?,
        idle_embed: raw.idle_embed.unwrap_or(d.idle_embed),
        retriever: d.retriever,
        fusion: Fusion {
            rule: raw.fusion.unwrap_or(d.fusion.rule),
            lexical_weight: real(
                "lexical_weight",
                raw.lexical_weight,
                d.fusion.lexical_weight,
                0.0,
                1.0,
            )?,
        },
        lexical_candidates: int(
            "lexical_candidates",
            raw.lexical_candidates,
            d.lexical_candidates,
            1,
            1024,
        )?,
        revision_weight: real(
            "revision_weight",
            raw.revision_weight,
            d.revision_weight,
            0.0,
            1.0,
        )?,
        low_evidence_threshold: real(
            "low_evidence_threshold",
            raw.low_evidence_threshold,
            d.low_evidence_threshold,
            0.0,
            1.0,
        )?,
        trigger: d.trigger,
        context_tokens: int(
            "context_tokens",
            raw.context_tokens,
            d.context_tokens,
            0,
            crate::context::MAX_CONTEXT_TOKENS as i64,
        )?,
    };
    // A model given without `trigger` means: use it.
    let trigger = match (raw.trigger, &raw.trigger_model) {
        (Some(t), _) => t,
        (None, Some(_)) => TriggerKind::Learned,
        (None, None) => TriggerKind::Fixed,
    };
    if trigger == TriggerKind::Learned && raw.trigger_model.is_none() {
        return Err(ConfigError::Invalid {
            key: "trigger_model",
            reason: "trigger = \"learned\" needs a model file (primd eval --train-trigger FILE makes one)".into(),
        });
    }
    if stream.top_k > stream.max_speculative_results {
        return Err(ConfigError::Invalid {
            key: "top_k",
            reason: format!(
                "{} is more than max_speculative_results ({}): a rerank cannot return more than it was given",
                stream.top_k, stream.max_speculative_results
            ),
        });
    }
    Ok(RunConfig {
        stream,
        retriever: raw.retriever,
        embedder_threads: int(
            "embedder_threads",
            raw.embedder_threads,
            1,
            *EMBEDDER_THREADS.start(),
            *EMBEDDER_THREADS.end(),
        )?,
        precision: raw.precision,
        endpoint_ms: int("endpoint_ms", raw.endpoint_ms, 800, 50, 60_000)? as u64,
        fillers: raw
            .fillers
            .unwrap_or_else(|| DEFAULT_FILLERS.iter().map(|s| s.to_string()).collect()),
        trigger,
        trigger_model: raw.trigger_model,
        conversation: Default::default(),
        reader: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_toml(text: &str, flags: Layer1) -> Result<RunConfig, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("primd.toml");
        std::fs::write(&path, text).unwrap();
        load(Some(&path), flags)
    }

    #[test]
    fn defaults_file_values_and_flag_overrides() {
        let d = load(None, Layer1::default()).unwrap();
        assert_eq!(d.stream, StreamConfig::default());
        assert_eq!(
            (d.embedder_threads, d.endpoint_ms, d.precision),
            (1, 800, None)
        );

        let c = from_toml(
            "[layer1]\nenabled = true\ntrigger_interval = 2\nsimilarity_threshold = 0.9\n\
             max_speculative_results = 200\nembedder_threads = 2\nfillers = [\"like\"]\n",
            Layer1 {
                trigger_interval: Some(4),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.stream.trigger_interval, 4, "the flag wins");
        assert_eq!(
            (
                c.stream.similarity_threshold,
                c.stream.max_speculative_results
            ),
            (0.9, 200)
        );
        assert_eq!(
            (c.embedder_threads, c.fillers.as_slice()),
            (2, &["like".to_string()][..])
        );

        let fp32 = |flag: Option<Precision>| {
            let flags = Layer1 {
                precision: flag,
                ..Default::default()
            };
            from_toml("[layer1]\nprecision = \"fp32\"\n", flags)
                .unwrap()
                .precision
        };
        assert_eq!(fp32(None), Some(Precision::Fp32), "the file names it");
        assert_eq!(
            fp32(Some(Precision::Int8)),
            Some(Precision::Int8),
            "the flag wins"
        );
    }

    #[test]
    fn hybrid_keys_from_file_and_flags() {
        let d = load(None, Layer1::default()).unwrap();
        assert_eq!(d.retriever, None, "decided by the index");
        assert_eq!(d.stream.fusion, Fusion::default());
        assert_eq!(
            (d.stream.lexical_candidates, d.stream.revision_weight),
            (100, 0.0)
        );
        let c = from_toml(
            "[layer1]\nretriever = \"lexical\"\nfusion = \"rrf\"\nlexical_weight = 0.3\n\
             lexical_candidates = 50\nrevision_weight = 0.25\n",
            Layer1 {
                retriever: Some(Retriever::Hybrid),
                lexical_weight: Some(0.7),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.retriever, Some(Retriever::Hybrid), "the flag wins");
        assert_eq!(c.stream.fusion.rule, FusionRule::Rrf);
        assert!((c.stream.fusion.lexical_weight - 0.7).abs() < 1e-6);
        assert_eq!(c.stream.lexical_candidates, 50);
        assert!((c.stream.revision_weight - 0.25).abs() < 1e-6);
    }

    #[test]
    fn trigger_keys_default_to_fixed_and_a_model_means_learned() {
        let d = load(None, Layer1::default()).unwrap();
        assert_eq!((d.trigger, d.trigger_model), (TriggerKind::Fixed, None));
        let c = from_toml("[layer1]\ntrigger_model = \"t.json\"\n", Layer1::default()).unwrap();
        assert_eq!(
            c.trigger,
            TriggerKind::Learned,
            "a model given is a model used"
        );
        assert_eq!(c.trigger_model, Some(PathBuf::from("t.json")));
        let flags = Layer1 {
            trigger: Some(TriggerKind::Fixed),
            ..Default::default()
        };
        let c = from_toml("[layer1]\ntrigger_model = \"t.json\"\n", flags).unwrap();
        assert_eq!(c.trigger, TriggerKind::Fixed, "the flag wins");
        let e = from_toml("[layer1]\ntrigger = \"learned\"\n", Layer1::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("layer1.trigger_model"), "{e}");
        assert!(from_toml("[layer1]\ntrigger = \"sometimes\"\n", Layer1::default()).is_err());
    }

    #[test]
    fn invalid_values_name_their_key() {
        for (text, key) in [
            (
                "[layer1]\ntrigger_interval = 0\n",
                "layer1.trigger_interval",
            ),
            (
                "[layer1]\nsimilarity_threshold = 1.5\n",
                "layer1.similarity_threshold",
            ),
            (
                "[layer1]\nmax_speculative_results = 5000\n",
                "layer1.max_speculative_results",
            ),
            (
                "[layer1]\ntop_k = 50\nmax_speculative_results = 20\n",
                "layer1.top_k",
            ),
            (
                "[layer1]\nembedder_threads = 65\n",
                "layer1.embedder_threads",
            ),
            ("[layer1]\nlexical_weight = 1.5\n", "layer1.lexical_weight"),
            ("[layer1]\nlexical_weight = -0.1\n", "layer1.lexical_weight"),
            (
                "[layer1]\nlexical_candidates = 0\n",
                "layer1.lexical_candidates",
            ),
            (
                "[layer1]\nlexical_candidates = 2000\n",
                "layer1.lexical_candidates",
            ),
            (
                "[layer1]\nrevision_weight = 2.0\n",
                "layer1.revision_weight",
            ),
            (
                "[layer1]\nrevision_weight = nan\n",
                "layer1.revision_weight",
            ),
        ] {
            let e = from_toml(text, Layer1::default()).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
        // Enumerations are parsed by serde: the message names the key (the line it
        // quotes), the value and the accepted names.
        for (text, bad, names) in [
            (
                "[layer1]\nprecision = \"fp16\"\n",
                "fp16",
                "`fp32` or `int8`",
            ),
            ("[layer1]\nretriever = \"bm25\"\n", "bm25", "`hybrid`"),
            ("[layer1]\nfusion = \"sum\"\n", "sum", "`convex` or `rrf`"),
        ] {
            let e = from_toml(text, Layer1::default()).unwrap_err().to_string();
            let key = text[9..].split(' ').next().unwrap();
            assert!(
                e.contains(key) && e.contains(bad) && e.contains(names),
                "{text}: {e}"
            );
        }
        let e = from_toml("[layer1]\ntrigger_intervall = 3\n", Layer1::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("trigger_intervall"), "typos are refused: {e}");
        let e = from_toml(
            "[layer1]\ntrigger_interval = \"three\"\n",
            Layer1::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("primd.toml"), "{e}");
    }
}
