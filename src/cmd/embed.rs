//! `primd embed`: texts in, one JSON line per text out.

use std::io::{BufRead, BufWriter, Write};

use anyhow::Context;
use primd::embed::{DIM, Embed, Embedder, EmbedderOptions};
use serde::Serialize;

use crate::cli::EmbedArgs;

#[derive(Serialize)]
struct Line<'a> {
    text: &'a str,
    tokens: usize,
    embedding: &'a [f32],
}

pub fn run(args: &EmbedArgs) -> anyhow::Result<()> {
    let opts = EmbedderOptions {
        precision: args.model.precision().unwrap_or_default(),
        threads: args.model.threads(),
    };
    let started = std::time::Instant::now();
    let mut embedder = Embedder::load(&args.model.model, &opts)?;
    log::info!(
        "{} model {:?} loaded in {:.1} ms",
        embedder.precision(),
        args.model.model,
        started.elapsed().as_secs_f64() * 1e3
    );
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut vector = [0.0f32; DIM];
    let mut emit = |text: &str, out: &mut BufWriter<_>| -> anyhow::Result<()> {
        let tokens = embedder.embed_into(text, &mut vector)?;
        serde_json::to_writer(
            &mut *out,
            &Line {
                text,
                tokens,
                embedding: &vector,
            },
        )?;
        out.write_all(b"\n")?;
        Ok(())
    };
    if !args.text.is_empty() {
        for text in &args.text {
            emit(text, &mut out)?;
        }
    } else {
        // One text per line. Invalid UTF-8 is replaced rather than fatal, and each
        // result is flushed so a script driving us line by line gets its answer.
        let mut stdin = std::io::stdin().lock();
        let mut buf = Vec::new();
        while stdin.read_until(b'\n', &mut buf).context("reading stdin")? > 0 {
            let line = String::from_utf8_lossy(&buf);
            emit(line.trim_end_matches(['\n', '\r']), &mut out)?;
            out.flush()?;
            buf.clear();
        }
    }
    out.flush()?;
    Ok(())
}
