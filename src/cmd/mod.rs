//! One function per `primd` command. Each takes its parsed arguments and returns a
//! `Result`; `main` does the printing of errors.

mod embed;
mod eval;
mod run;
mod search;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Embed(args) => embed::run(&args),
        Command::Search(args) => search::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Eval(args) => eval::run(&args),
    }
}

/// True when `e` (or a cause) is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
