//! Command-line interface. Command and flag names are an interface that scripts rely
//! on: extend them, never rename them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use primd::embed::Precision;

#[derive(Parser, Debug)]
#[command(
    name = "primd",
    version,
    about = "On-device retriever that searches while the user speaks"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Embed texts with all-MiniLM-L6-v2; print one JSON line per text:
    /// {"text", "tokens", "embedding": [384 floats]}
    Embed(EmbedArgs),
}

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// Model directory holding model.onnx and tokenizer.json (made by models/fetch)
    #[arg(long, value_name = "DIR", default_value = "models")]
    pub model: PathBuf,
    /// fp32 weights (the default)
    #[arg(long, conflicts_with = "int8")]
    pub fp32: bool,
    /// int8 weight matmuls (not available yet: refused with an error)
    #[arg(long)]
    pub int8: bool,
    /// Threads tract may use inside one embed
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub embedder_threads: u16,
}

impl ModelArgs {
    pub fn precision(&self) -> Precision {
        if self.int8 {
            Precision::Int8
        } else {
            Precision::Fp32
        }
    }
}

#[derive(Args, Debug)]
pub struct EmbedArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Texts to embed; with none, one text per line is read from stdin
    pub text: Vec<String>,
}
