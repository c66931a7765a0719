//! `primd search`: queries in, one JSON line of results per query out.
//!
//! A malformed input line is reported on stderr with its line number and skipped; the
//! remaining queries are still answered.

use std::io::{BufRead, BufWriter, Write};
use std::time::Instant;

use anyhow::Context;
use primd::embed::{DIM, Embed};
use primd::index::Index;
use primd::output::ResultJson;
use primd::search::{Hits, Query, Searcher};
use serde::{Deserialize, Serialize};

use crate::cli::SearchArgs;

#[derive(Deserialize)]
struct InputLine {
    id: serde_json::Value,
    text: String,
}

#[derive(Serialize)]
struct Timings {
    embed: f64,
    scan: f64,
    rerank: f64,
}

#[derive(Serialize)]
struct OutputLine<'a> {
    id: &'a serde_json::Value,
    results: Vec<ResultJson<'a>>,
    ms: Timings,
}

pub fn run(args: &SearchArgs) -> anyhow::Result<()> {
    let index = Index::open(&args.index)?;
    if args.verify {
        index.verify()?;
    }
    let mut embedder = super::embedder_for(
        &index,
        &args.model.model,
        args.model.precision(),
        args.model.embedder_threads as usize,
    )?;
    let mut searcher = Searcher::new(&index)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut answer =
        |id: &serde_json::Value, text: &str, out: &mut BufWriter<_>| -> anyhow::Result<()> {
            let t0 = Instant::now();
            let mut v = [0.0f32; DIM];
            embedder.embed_into(text, &mut v)?;
            let query = Query::new(&v);
            let t1 = Instant::now();
            let mut hits = Hits::new();
            let (scan_ms, rerank_ms);
            if args.exact {
                searcher.exact(&query, args.k as usize, &mut hits);
                (scan_ms, rerank_ms) = (ms(t1.elapsed()), 0.0);
            } else {
                let mut cands = primd::search::Candidates::new();
                searcher.binary_scan(&query, args.candidates.max(args.k) as usize, &mut cands);
                let t2 = Instant::now();
                searcher.rerank(&cands, &query, args.k as usize, &mut hits);
                (scan_ms, rerank_ms) = (ms(t2 - t1), ms(t2.elapsed()));
            }
            let results = hits
                .iter()
                .map(|h| Ok(ResultJson::new(index.passage(h.index as usize)?, h.score)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let line = OutputLine {
                id,
                results,
                ms: Timings {
                    embed: ms(t1 - t0),
                    scan: scan_ms,
                    rerank: rerank_ms,
                },
            };
            serde_json::to_writer(&mut *out, &line)?;
            out.write_all(b"\n")?;
            Ok(())
        };
    if !args.query.is_empty() {
        for (i, q) in args.query.iter().enumerate() {
            answer(&serde_json::Value::from(i), q, &mut out)?;
        }
        out.flush()?;
        return Ok(());
    }
    let mut stdin = std::io::stdin().lock();
    let mut buf = Vec::new();
    let mut lineno = 0;
    while stdin.read_until(b'\n', &mut buf).context("reading stdin")? > 0 {
        lineno += 1;
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim();
        if !line.is_empty() {
            match serde_json::from_str::<InputLine>(line) {
                Ok(q) => {
                    answer(&q.id, &q.text, &mut out)?;
                    out.flush()?;
                }
                Err(e) => {
                    log::error!("stdin line {lineno}: skipped, expected {{\"id\", \"text\"}}: {e}")
                }
            }
        }
        buf.clear();
    }
    out.flush()?;
    Ok(())
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
