//! The library's choices as the command line names them: `--retriever`, `--fusion`,
//! `--trigger`, `--precision`.
//!
//! Why here and not as `clap::ValueEnum` derives on the types: the types belong to the
//! layers that use them (`ranking`, `fusion`, `stream::trigger`, `embed`), which parse
//! their names from TOML with serde and know nothing of a command line; clap is the
//! command layer's (ripgrep's lowargs → hiargs). Each table gives a value's name (the
//! same as its `as_str`/`Display` and its serde name: tests check all three) and the
//! help text `--help` lists.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

use crate::embed::Precision;
use crate::fusion::FusionRule;
use crate::ranking::Retriever;
use crate::stream::trigger::TriggerKind;

/// A value, its name on the command line, and its help text (if any).
pub type Choice<T> = (T, &'static str, Option<&'static str>);

pub const RETRIEVERS: &[Choice<Retriever>] = &[
    (
        Retriever::Dense,
        "dense",
        Some("Embedding: 1-bit scan, int8 rerank"),
    ),
    (
        Retriever::Lexical,
        "lexical",
        Some("BM25 over the index's lexical section; no embedding"),
    ),
    (Retriever::Hybrid, "hybrid", Some("Both, fused")),
];

pub const FUSION_RULES: &[Choice<FusionRule>] = &[
    (
        FusionRule::Convex,
        "convex",
        Some("Convex combination of min-max-normalised scores (weight `lexical_weight`)"),
    ),
    (
        FusionRule::Rrf,
        "rrf",
        Some("Reciprocal-rank fusion (ranks only; `lexical_weight` is not used)"),
    ),
];

pub const TRIGGERS: &[Choice<TriggerKind>] = &[
    (
        TriggerKind::Fixed,
        "fixed",
        Some("Every `trigger_interval` new words (and idle embedding of the newest partial)"),
    ),
    (
        TriggerKind::Learned,
        "learned",
        Some("A trained NO_QUERY/NEW_QUERY classifier (`trigger_model`)"),
    ),
];

pub const PRECISIONS: &[Choice<Precision>] = &[
    (Precision::Fp32, "fp32", None),
    (Precision::Int8, "int8", None),
];

/// clap's parser for one of `choices`: offers their names (with help), and maps the name
/// given to its value.
pub fn parser<T: Copy + Send + Sync + 'static>(
    choices: &'static [Choice<T>],
) -> impl TypedValueParser<Value = T> {
    let names = choices.iter().map(|&(_, name, help)| match help {
        Some(help) => PossibleValue::new(name).help(help),
        None => PossibleValue::new(name),
    });
    PossibleValuesParser::new(names).try_map(move |given: String| {
        choices
            .iter()
            .find(|(_, name, _)| *name == given)
            .map(|&(value, ..)| value)
            .ok_or_else(|| format!("unknown value {given:?}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// A command with every choice, parsed as `primd` parses its flags.
    #[derive(Parser, Debug)]
    struct Cmd {
        #[arg(long, value_parser = parser(RETRIEVERS))]
        retriever: Option<Retriever>,
        #[arg(long, value_parser = parser(FUSION_RULES))]
        fusion: Option<FusionRule>,
        #[arg(long, value_parser = parser(TRIGGERS))]
        trigger: Option<TriggerKind>,
        #[arg(long, value_parser = parser(PRECISIONS))]
        precision: Option<Precision>,
    }

    fn parse(flag: &str, value: &str) -> Result<Cmd, clap::Error> {
        Cmd::try_parse_from(["primd", &format!("--{flag}"), value])
    }

    #[test]
    fn retriever_names_round_trip() {
        let values: Vec<Retriever> = RETRIEVERS.iter().map(|c| c.0).collect();
        assert_eq!(values, Retriever::ALL);
        for r in Retriever::ALL {
            assert_eq!(parse("retriever", r.as_str()).unwrap().retriever, Some(r));
            let json: Retriever = serde_json::from_str(&format!("{:?}", r.as_str())).unwrap();
            assert_eq!(json, r);
            assert_eq!(r.to_string(), r.as_str());
        }
        assert!(parse("retriever", "bm25").is_err());
        assert!(Retriever::Hybrid.uses_dense() && Retriever::Hybrid.uses_lexical());
        assert!(!Retriever::Lexical.uses_dense() && !Retriever::Dense.uses_lexical());
    }

    #[test]
    fn rule_names_round_trip() {
        for &(r, name, _) in FUSION_RULES {
            assert_eq!(name, r.as_str(), "clap's name is the displayed one");
            assert_eq!(parse("fusion", name).unwrap().fusion, Some(r));
            let json: FusionRule = serde_json::from_str(&format!("{:?}", r.as_str())).unwrap();
            assert_eq!(json, r, "serde's name is the displayed one");
        }
        assert!(parse("fusion", "sum").is_err());
    }

    #[test]
    fn trigger_and_precision_names_are_serde_names() {
        for &(t, name, _) in TRIGGERS {
            assert_eq!(parse("trigger", name).unwrap().trigger, Some(t));
            let json: TriggerKind = serde_json::from_str(&format!("{name:?}")).unwrap();
            assert_eq!(json, t);
        }
        for &(p, name, _) in PRECISIONS {
            assert_eq!(name, p.to_string());
            assert_eq!(parse("precision", name).unwrap().precision, Some(p));
            let json: Precision = serde_json::from_str(&format!("{name:?}")).unwrap();
            assert_eq!(json, p);
        }
        assert!(parse("trigger", "always").is_err());
        assert!(parse("precision", "fp16").is_err());
    }
}
