//! Command-line interface. Command and flag names are an interface that scripts rely
//! on: extend them, never rename them.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};
use primd::config::Layer1;
use primd::flags::choices;
pub use primd::flags::{ModelArgs, ReaderArgs};
use primd::fusion::FusionRule;
use primd::input::DialectKind;
use primd::retriever::Retriever;
use primd::stream::trigger::TriggerKind;

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
    /// Search an index; print one JSON line per query:
    /// {"id", "results": [{"id", "title", "score", "dense", "bm25", "text", "chunk"}], "ms": {...}}
    Search(SearchArgs),
    /// The daemon: read partial transcripts (stdin or a file), retrieve while the user
    /// speaks, print one JSON line per utterance
    Run(RunArgs),
    /// Measure on your data when queries stabilise (word-prefix replay) and what
    /// streaming hides on recorded recognizer streams; a Markdown report with plots
    Eval(EvalArgs),
    /// Publish a new index under a running daemon: check it (structure, checksum, model),
    /// write it beside PATH, fsync, rename over PATH, and send the daemon SIGHUP
    InstallIndex(InstallIndexArgs),
    /// Measure primd on this machine: CPU features and chosen kernels, embed latency
    /// per length and thread count, binary scan vs memory bandwidth, one speculative
    /// step on an index, index page-in, peak RSS (a table, or --json)
    Bench(BenchArgs),
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Model directory holding model-int8.onnx and tokenizer.json (made by models/fetch)
    #[arg(long, value_name = "DIR", default_value = "models")]
    pub model: PathBuf,
    /// Measure on this index (made by build-index); without it, on a synthetic one
    #[arg(long, value_name = "FILE")]
    pub index: Option<PathBuf>,
    /// Embed with 1..=N threads (default: the CPUs available)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: Option<u16>,
    /// A few runs per figure and a small synthetic index (CI, emulators)
    #[arg(long)]
    pub quick: bool,
    /// One JSON object on stdout (schema: docs/bench.md) instead of the table
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub reader: ReaderArgs,
}

#[derive(Args, Debug)]
pub struct InstallIndexArgs {
    /// The new index (made by build-index); left as it is
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// The path the daemon serves (its --index); default on a packaged install
    /// (/etc/primd/primd.toml exists): /var/lib/primd/corpus.idx
    #[arg(long, value_name = "PATH")]
    pub to: Option<PathBuf>,
    /// Model directory the daemon loads (the new index must have been built with its
    /// model); default: models, on a packaged install /usr/share/primd/minilm
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Only check NEW as the daemon would (structure, checksum, model; and against the
    /// index at --to when there is one), install nothing
    #[arg(long, conflicts_with_all = ["pid", "pid_file"])]
    pub check: bool,
    /// Send SIGHUP to this process (the daemon) after installing
    #[arg(long, value_name = "PID", conflicts_with = "pid_file")]
    pub pid: Option<i32>,
    /// Send SIGHUP to the process whose pid this file holds (`primd run --pid-file`);
    /// default on a packaged install: /run/primd/primd.pid when it exists
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct EmbedArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Texts to embed; with none, one text per line is read from stdin
    pub text: Vec<String>,
}

#[derive(Args, Debug)]
pub struct SearchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub reader: ReaderArgs,
    /// Index file made by build-index
    #[arg(long, value_name = "FILE")]
    pub index: PathBuf,
    /// Results per query
    #[arg(long, short, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub k: u16,
    /// Candidates from the 1-bit scan that are reranked
    #[arg(long, value_name = "C", default_value_t = primd::dense::DEFAULT_CANDIDATES as u16,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub candidates: u16,
    /// Brute-force dense search over every passage (the reference for quality checks)
    #[arg(long)]
    pub exact: bool,
    /// Retriever (default: hybrid when the index has a lexical section, else dense)
    #[arg(long, value_name = "NAME", value_parser = choices::parser(choices::RETRIEVERS))]
    pub retriever: Option<Retriever>,
    #[command(flatten)]
    pub fusion: FusionFlags,
    #[command(flatten)]
    pub conversation: primd::conversation::settings::Flags,
    /// Check the index's full checksum before searching (reads the whole file)
    #[arg(long)]
    pub verify: bool,
    /// Queries; with none, JSON lines {"id", "text"} are read from stdin
    pub query: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub reader: ReaderArgs,
    /// Index file made by build-index
    #[arg(long, value_name = "FILE")]
    pub index: PathBuf,
    /// TOML file with a [layer1] section; flags override it
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where partial transcripts come from: - (stdin), a file, or a serial line
    /// serial:/dev/ttyUSB0[@115200] (reopened with backoff when it goes away); with
    /// --listen or --wyoming also `none` (their sessions only). With --listen or
    /// --wyoming the pipe is the session "stt", its end does not stop the daemon, and
    /// a terminal on stdin is not read
    #[arg(long, value_name = "SOURCE", default_value = "-")]
    pub input: String,
    /// Serve the socket API (docs/protocol.md) on unix:PATH or tcp:HOST:PORT
    /// (repeatable); runs until SIGINT/SIGTERM
    #[arg(long, value_name = "ADDR")]
    pub listen: Vec<primd::hub::listen::ListenAddr>,
    /// Allow --listen and --wyoming on non-loopback TCP addresses (neither protocol has
    /// authentication)
    #[arg(long)]
    pub allow_remote: bool,
    /// Input format (auto: detected from the first non-empty line, logged)
    #[arg(long, value_enum, default_value_t = DialectArg(DialectKind::Auto))]
    pub dialect: DialectArg,
    /// Also print an event per speculative search (for prefetching)
    #[arg(long)]
    pub emit_speculative: bool,
    /// Replay recorded input at its "t" timestamps, SPEED times faster than real time
    #[arg(long, value_name = "SPEED")]
    pub pace: Option<f64>,
    /// Check the index's full checksum at start (reads the whole file)
    #[arg(long)]
    pub verify: bool,
    /// Wait for the final transcript, then search (the baseline; layer1.enabled = false)
    #[arg(long)]
    pub no_streaming: bool,
    /// Silence that ends an utterance, in milliseconds
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub endpoint_ms: Option<i64>,
    /// After SIGINT/SIGTERM, how long to wait for a blocked output to take the last
    /// results before exiting without them (exit status 1)
    #[arg(long, value_name = "MS", default_value_t = primd::daemon::STOP_GRACE.as_millis() as u64)]
    pub stop_grace_ms: u64,
    /// Retriever (default: hybrid when the index has a lexical section, else dense)
    #[arg(long, value_name = "NAME", value_parser = choices::parser(choices::RETRIEVERS))]
    pub retriever: Option<Retriever>,
    #[command(flatten)]
    pub layer1: Layer1Flags,
    /// Read the whole index into memory instead of mapping it (small indexes, SD cards):
    /// costs its size in RAM; nothing written to the file can reach the daemon
    #[arg(long)]
    pub index_in_ram: bool,
    /// Write the daemon's pid here once it is serving (SIGHUP reloads the index;
    /// `primd install-index --pid-file` sends it); removed at exit
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    #[command(flatten)]
    pub wyoming: WyomingArgs,
    #[command(flatten)]
    pub conversation: primd::conversation::settings::Flags,
}

/// Home Assistant's Wyoming protocol (docs/wyoming.md).
#[derive(Args, Debug)]
pub struct WyomingArgs {
    /// Serve Wyoming on tcp:HOST:PORT (loopback only unless --allow-remote): each
    /// connection is a session wyoming-N; describe → info (a "handle" service)
    #[arg(long, value_name = "tcp:HOST:PORT")]
    pub wyoming: Option<String>,
    /// With --wyoming: relay every connection to this speech service byte for byte
    /// (tcp://HOST:PORT) and retrieve from the transcripts it sends back
    #[arg(long, value_name = "tcp://HOST:PORT", requires = "wyoming")]
    pub wyoming_proxy: Option<String>,
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub reader: ReaderArgs,
    /// With --answers: also report a grid of the reader's settings (sentences read,
    /// weight of the cheap score, where the context stops), the figures its defaults
    /// were chosen from
    #[arg(long, requires = "answers")]
    pub reader_sweep: bool,
    /// Index file made by build-index
    #[arg(long, value_name = "FILE")]
    pub index: PathBuf,
    /// Typed questions, JSON lines {"id", "text"}
    #[arg(long, value_name = "FILE", required_unless_present = "conversations")]
    pub queries: Option<PathBuf>,
    /// Conversations instead: JSON lines {"id", "text", "conversation"[, "kind"]}, one
    /// turn per line in order (docs/conversations.md); reports each kind of turn with
    /// the conversation's context on and off
    #[arg(long, value_name = "FILE", conflicts_with_all = ["streams", "train_trigger", "sweep"])]
    pub conversations: Option<PathBuf>,
    #[command(flatten)]
    pub conversation: primd::conversation::settings::Flags,
    /// Relevance judgements: a header line, then query-id<TAB>corpus-id<TAB>score
    #[arg(long, value_name = "FILE")]
    pub qrels: PathBuf,
    /// Recorded recognizer streams, JSON lines {"id", "partials": [{"t", "text"}], "final", "audio_s"}
    #[arg(long, value_name = "FILE")]
    pub streams: Option<PathBuf>,
    /// Write report.md, report.json and SVG plots into this directory
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the aggregate figures as one JSON object on stdout (the summary goes to stderr)
    #[arg(long)]
    pub json: bool,
    /// Also try a grid of trigger_interval × similarity_threshold on the streams and
    /// print the Pareto front (speculative searches, hit@10, p50 latency)
    #[arg(long, requires = "streams")]
    pub sweep: bool,
    /// Label the typed questions' word prefixes (NO_QUERY/NEW_QUERY), fit the learned
    /// trigger, choose its threshold and write the model to FILE; the questions of
    /// --streams are left out, and the streams then compare it with the fixed trigger
    #[arg(long, value_name = "FILE")]
    pub train_trigger: Option<PathBuf>,
    /// With --train-trigger: choose the thresholds on these recorded recognizer streams
    /// (same format as --streams; their questions are not trained on) instead of the
    /// typed questions: the cheapest pair within 0.01 of the fixed trigger's hit@10 that
    /// embeds no more finals after end of speech than it does
    #[arg(long, value_name = "FILE", requires = "train_trigger")]
    pub trigger_streams: Option<PathBuf>,
    /// Only the first N queries (and N streams)
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Gold answers (`{"id", "answers": [...]}` lines): also report answer-in-context
    /// against budget (32/64/128/256 word pieces) next to the top-1/3/10 passages
    #[arg(long, value_name = "FILE")]
    pub answers: Option<PathBuf>,
    /// Worker threads, each with its own embedder
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: u16,
    /// No progress bar, no summary on stderr
    #[arg(long, short)]
    pub quiet: bool,
    /// TOML file with a [layer1] section; flags override it (as for `primd run`)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Retrievers to measure, comma-separated: dense,lexical,hybrid (default: the one
    /// `primd run` would use on this index)
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = choices::parser(choices::RETRIEVERS))]
    pub retriever: Option<Vec<Retriever>>,
    #[command(flatten)]
    pub layer1: Layer1Flags,
}

/// The `[layer1]` keys as flags, shared by `primd run` and `primd eval`: a flag
/// overrides the config file's value. Numbers may carry a sign
/// (`allow_negative_numbers`): `--top-k -1` reaches the config's range check and is
/// named there, instead of being taken for a flag with a hint (`-- -1`) that would
/// make it a query.
#[derive(Args, Debug)]
pub struct Layer1Flags {
    /// New words between speculative searches
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub trigger_interval: Option<i64>,
    /// Skip a speculative search when the embedding moved less than this (cosine)
    #[arg(long, value_name = "COS", allow_negative_numbers = true)]
    pub similarity_threshold: Option<f64>,
    /// Candidates kept by a speculative scan
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_speculative_results: Option<i64>,
    /// Partials with fewer words never trigger, nor are embedded while idle
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub min_tokens: Option<i64>,
    /// Below this cosine between final and speculation, run a full search instead
    #[arg(long, value_name = "COS", allow_negative_numbers = true)]
    pub reflector_threshold: Option<f64>,
    /// Candidates of a full search (and, in eval, of each prefix search)
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub full_search_candidates: Option<i64>,
    /// Results per utterance
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    pub top_k: Option<i64>,
    /// Do not embed the newest partial while idle
    #[arg(long)]
    pub no_idle_embed: bool,
    /// Filler words and phrases removed before embedding, comma-separated
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub fillers: Option<Vec<String>>,
    /// Weight of words only earlier partials had in the lexical query (0: off)
    #[arg(long, value_name = "W", allow_negative_numbers = true)]
    pub revision_weight: Option<f64>,
    /// What decides the embed + speculative search per partial: fixed (every
    /// --trigger-interval new words) or learned (--trigger-model)
    #[arg(long, value_name = "KIND", value_parser = choices::parser(choices::TRIGGERS))]
    pub trigger: Option<TriggerKind>,
    /// The learned trigger's model file (primd eval --train-trigger FILE); implies
    /// --trigger learned
    #[arg(long, value_name = "FILE")]
    pub trigger_model: Option<PathBuf>,
    #[command(flatten)]
    pub fusion: FusionFlags,
}

/// How lexical and dense results are fused, and when the top-1 is flagged as a guess:
/// `[layer1]` keys, also on `primd search`.
#[derive(Args, Debug)]
pub struct FusionFlags {
    /// Weight of the normalised BM25 score in the convex fusion, 0..=1
    #[arg(long, value_name = "W", allow_negative_numbers = true)]
    pub lexical_weight: Option<f64>,
    /// Fusion rule: convex (weighted normalised scores) or rrf (reciprocal ranks)
    #[arg(long, value_name = "RULE", value_parser = choices::parser(choices::FUSION_RULES))]
    pub fusion: Option<FusionRule>,
    /// Candidates of each lexical search
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub lexical_candidates: Option<i64>,
    /// Flag results whose top-1 confidence is below this as `evidence: "low"`, 0..=1
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    pub low_evidence_threshold: Option<f64>,
    /// Word pieces of the `context` each answer carries: the best sentences of the top
    /// passages (0: none; default 128)
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = context_budget)]
    pub context_tokens: Option<i64>,
}

/// `--context-tokens N`: 0..=1,000,000, checked here so that a negative number is
/// named as a bad budget (clap would otherwise take `-1` for a flag and suggest
/// `-- -1`, which makes it a query).
fn context_budget(s: &str) -> Result<i64, String> {
    let max = primd::context::MAX_CONTEXT_TOKENS as i64;
    match s.trim().parse::<i64>() {
        Ok(n) if (0..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "context budget must be 0..={max} word pieces (0: no context)"
        )),
    }
}

impl FusionFlags {
    /// The flags as config overrides of their keys (others unset).
    pub fn to_layer1(&self) -> Layer1 {
        Layer1 {
            lexical_weight: self.lexical_weight,
            fusion: self.fusion,
            lexical_candidates: self.lexical_candidates,
            low_evidence_threshold: self.low_evidence_threshold,
            context_tokens: self.context_tokens,
            ..Default::default()
        }
    }
}

impl Layer1Flags {
    /// These flags and the model's as config overrides (`enabled`, `endpoint_ms` and
    /// `retriever` are left to the command).
    pub fn to_layer1(&self, model: &ModelArgs) -> Layer1 {
        Layer1 {
            enabled: None,
            trigger_interval: self.trigger_interval,
            similarity_threshold: self.similarity_threshold,
            max_speculative_results: self.max_speculative_results,
            embedder_threads: model.embedder_threads,
            min_tokens: self.min_tokens,
            reflector_threshold: self.reflector_threshold,
            full_search_candidates: self.full_search_candidates,
            top_k: self.top_k,
            idle_embed: self.no_idle_embed.then_some(false),
            endpoint_ms: None,
            fillers: self.fillers.clone(),
            precision: model.precision(),
            retriever: None,
            revision_weight: self.revision_weight,
            trigger: self.trigger,
            trigger_model: self.trigger_model.clone(),
            ..self.fusion.to_layer1()
        }
    }
}

/// `--dialect`: the parsers crate knows nothing of clap, so its names and help texts
/// ([`DialectKind::name`], [`DialectKind::help`]) are offered here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DialectArg(pub DialectKind);

impl ValueEnum for DialectArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [DialectArg; DialectKind::ALL.len()] = {
            let mut all = [DialectArg(DialectKind::Auto); DialectKind::ALL.len()];
            let mut i = 0;
            while i < all.len() {
                all[i] = DialectArg(DialectKind::ALL[i]);
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.0.help()))
    }
}
