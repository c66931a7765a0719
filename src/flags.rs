//! Command-line flag groups shared by `primd` and `build-index`: one definition of each
//! flag, its help and its limits, so the commands cannot drift apart.

use std::path::PathBuf;

use clap::Args;

pub mod choices;

use crate::config::{EMBEDDER_THREADS, Layer1};
use crate::embed::Precision;

/// The reader (a cross-encoder that picks the sentence that answers: `context`, the
/// spoken answer, `confidence`): `primd search|run|eval|bench`.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct ReaderArgs {
    /// Run without the reader, as primd did before it: sentences ranked by the
    /// embedder's cosine and term coverage
    #[arg(long, conflicts_with = "reader")]
    pub no_reader: bool,
    /// The reader's directory (model.onnx, tokenizer.json). Default: reader/ in the
    /// model directory, used when models/fetch has put it there
    #[arg(long, value_name = "DIR")]
    pub reader: Option<PathBuf>,
}

/// Which model to load and how: `primd embed|search|run|eval` and `build-index`.
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct ModelArgs {
    /// Model directory holding model-int8.onnx, model.onnx and tokenizer.json (made by
    /// models/fetch)
    #[arg(long, value_name = "DIR", default_value = "models")]
    pub model: PathBuf,
    /// fp32 weights (model.onnx). Default: the precision the index being read was built
    /// with (the `precision` config key); int8 without an index and in build-index
    #[arg(long, conflicts_with = "int8")]
    pub fp32: bool,
    /// int8 weight matmuls (model-int8.onnx, primd's int8 kernels)
    #[arg(long)]
    pub int8: bool,
    /// The precision by name, as the `precision` config key spells it (= --fp32 / --int8)
    #[arg(long, value_name = "NAME", conflicts_with_all = ["fp32", "int8"],
          value_parser = choices::parser(choices::PRECISIONS))]
    pub precision: Option<Precision>,
    /// Threads tract may use inside one embed (default 1, or the `embedder_threads`
    /// config key)
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(i64).range(EMBEDDER_THREADS))]
    pub embedder_threads: Option<i64>,
}

impl ModelArgs {
    /// The precision asked for; `None` leaves it to the index (or the default).
    pub fn precision(&self) -> Option<Precision> {
        match (self.fp32, self.int8) {
            (true, _) => Some(Precision::Fp32),
            (_, true) => Some(Precision::Int8),
            _ => self.precision,
        }
    }

    /// Threads inside one embed, for commands without a config file.
    pub fn threads(&self) -> usize {
        // Within EMBEDDER_THREADS (clap checked it): positive.
        self.embedder_threads.unwrap_or(1) as usize
    }

    /// The flags as config overrides of their keys (`precision`, `embedder_threads`).
    pub fn to_layer1(&self) -> Layer1 {
        Layer1 {
            precision: self.precision(),
            embedder_threads: self.embedder_threads,
            ..Layer1::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        model: ModelArgs,
    }

    #[test]
    fn model_flags_parse_into_config_overrides_within_the_config_limits() {
        let m = Cmd::try_parse_from(["t", "--fp32", "--embedder-threads", "4"])
            .unwrap()
            .model;
        let flags = m.to_layer1();
        assert_eq!(
            (flags.precision, flags.embedder_threads),
            (Some(Precision::Fp32), Some(4))
        );
        assert_eq!(
            crate::config::load(None, flags).unwrap().embedder_threads,
            4
        );
        let none = Cmd::try_parse_from(["t"]).unwrap().model;
        assert_eq!((none.precision(), none.threads()), (None, 1));
        let max = *EMBEDDER_THREADS.end();
        assert!(Cmd::try_parse_from(["t", "--embedder-threads", &max.to_string()]).is_ok());
        let over = (max + 1).to_string();
        assert!(Cmd::try_parse_from(["t", "--embedder-threads", &over]).is_err());
        assert!(Cmd::try_parse_from(["t", "--fp32", "--int8"]).is_err());
        let named = Cmd::try_parse_from(["t", "--precision", "fp32"])
            .unwrap()
            .model;
        assert_eq!(named.precision(), Some(Precision::Fp32));
        assert!(Cmd::try_parse_from(["t", "--precision", "fp16"]).is_err());
        assert!(Cmd::try_parse_from(["t", "--precision", "int8", "--fp32"]).is_err());
    }
}
