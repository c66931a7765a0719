//! The `[conversation]` section of the config file and its flags on `primd run` and
//! `primd search` (flags win over the file). Kept here, next to what they set, so the
//! shared config module only hands the section over.

use serde::Deserialize;

use super::{ConversationConfig, Decision};

/// A `[conversation]` value out of range.
#[derive(Debug, thiserror::Error)]
#[error("invalid conversation.{key}: {reason}")]
pub struct Invalid {
    pub key: &'static str,
    pub reason: String,
}

/// The `[conversation]` keys, each optional.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Keys {
    /// Carry context between turns (default true).
    pub enabled: Option<bool>,
    /// The STT pipe's conversation ends after this much silence, milliseconds.
    pub gap_ms: Option<i64>,
    pub topic_weight: Option<f64>,
    pub vector_weight: Option<f64>,
    pub decision: Option<Decision>,
}

fn bad(key: &'static str, v: impl std::fmt::Display, range: &str) -> Invalid {
    Invalid {
        key,
        reason: format!("{v} is outside {range}"),
    }
}

impl Keys {
    /// The checked settings (defaults for the keys not given).
    pub fn check(&self) -> Result<ConversationConfig, Invalid> {
        let d = ConversationConfig::default();
        let gap_ms = match self.gap_ms {
            None => d.gap_ms,
            Some(v) if (1_000..=86_400_000).contains(&v) => v as u64,
            Some(v) => return Err(bad("gap_ms", v, "1000..=86400000")),
        };
        let weight = |key, v: Option<f64>, d: f32| match v {
            None => Ok(d),
            Some(v) if (0.0..=4.0).contains(&v) => Ok(v as f32),
            Some(v) => Err(bad(key, v, "0..=4")),
        };
        Ok(ConversationConfig {
            enabled: self.enabled.unwrap_or(d.enabled),
            gap_ms,
            topic_weight: weight("topic_weight", self.topic_weight, d.topic_weight)?,
            vector_weight: weight("vector_weight", self.vector_weight, d.vector_weight)?,
            decision: self.decision.unwrap_or(d.decision),
            low_evidence_threshold: d.low_evidence_threshold,
        })
    }

    /// `over`'s keys win over `self`'s.
    pub fn overridden_by(&self, over: &Keys) -> Keys {
        Keys {
            enabled: over.enabled.or(self.enabled),
            gap_ms: over.gap_ms.or(self.gap_ms),
            topic_weight: over.topic_weight.or(self.topic_weight),
            vector_weight: over.vector_weight.or(self.vector_weight),
            decision: over.decision.or(self.decision),
        }
    }
}

impl From<ConversationConfig> for Keys {
    fn from(c: ConversationConfig) -> Keys {
        Keys {
            enabled: Some(c.enabled),
            gap_ms: Some(c.gap_ms as i64),
            topic_weight: Some(c.topic_weight as f64),
            vector_weight: Some(c.vector_weight as f64),
            decision: Some(c.decision),
        }
    }
}

/// The `[conversation]` keys as flags.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Flags {
    /// Retrieve every turn alone: no conversation context
    #[arg(long)]
    pub no_context: bool,
    /// The STT pipe's conversation ends after this much time without a turn (ms)
    #[arg(long, value_name = "MS")]
    pub conversation_gap_ms: Option<i64>,
    /// Lexical weight of the conversation's topic terms, 0..=4
    #[arg(long, value_name = "W")]
    pub topic_weight: Option<f64>,
    /// Weight of the topic's vector added to the turn's, 0..=4
    #[arg(long, value_name = "W")]
    pub vector_weight: Option<f64>,
    /// Which turns take the context search's results
    #[arg(long, value_enum, value_name = "RULE")]
    pub context_decision: Option<Decision>,
}

impl Flags {
    /// `cfg` with the flags given applied over it, checked.
    pub fn apply(&self, cfg: ConversationConfig) -> Result<ConversationConfig, Invalid> {
        Keys::from(cfg).overridden_by(&self.to_keys()).check()
    }

    pub fn to_keys(&self) -> Keys {
        Keys {
            enabled: self.no_context.then_some(false),
            gap_ms: self.conversation_gap_ms,
            topic_weight: self.topic_weight,
            vector_weight: self.vector_weight,
            decision: self.context_decision,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_and_flags_win() {
        let d = Keys::default().check().unwrap();
        assert_eq!(d, ConversationConfig::default());
        let file = Keys {
            gap_ms: Some(5_000),
            topic_weight: Some(0.25),
            ..Default::default()
        };
        let flags = Flags {
            no_context: true,
            topic_weight: Some(1.0),
            ..Default::default()
        };
        let c = file.overridden_by(&flags.to_keys()).check().unwrap();
        assert!(!c.enabled);
        assert_eq!((c.gap_ms, c.topic_weight), (5_000, 1.0));
        for bad in [
            Keys {
                gap_ms: Some(10),
                ..Default::default()
            },
            Keys {
                vector_weight: Some(-1.0),
                ..Default::default()
            },
            Keys {
                topic_weight: Some(f64::NAN),
                ..Default::default()
            },
        ] {
            let e = bad.check().unwrap_err().to_string();
            assert!(e.contains("conversation."), "{e}");
        }
    }
}
