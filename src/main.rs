//! `primd`: thin entry point. Parses the command line, runs one command, prints any
//! error once with its causes, and maps it to an exit code.

use std::process::ExitCode;

mod cli;
mod cmd;

fn main() -> ExitCode {
    env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or(primd::announce::DEFAULT_FILTER),
    )
    .init();
    let args = <cli::Cli as clap::Parser>::parse();
    match cmd::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if cmd::is_broken_pipe(&e) {
                // The reader went away (`primd embed ... | head`): not an error.
                return ExitCode::SUCCESS;
            }
            eprintln!("primd: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
