//! `primd bench`: flags to [`primd::bench::Options`], the report printed as a table or
//! JSON (`--json`). The measuring is the library's (`primd::bench`).

use primd::bench::{Options, table};

use crate::cli::BenchArgs;

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let options = Options {
        model: args.model.clone(),
        index: args.index.clone(),
        threads: args.threads,
        quick: args.quick,
        reader: super::reader_dir(&args.model, &args.reader)?,
    };
    let report = primd::bench::run(&options, |index| {
        let cfg = primd::config::load(None, Default::default())?;
        super::embedder_for(index, &args.model, &cfg)
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(())
}
