//! Evaluation inputs: queries, qrels, recorded recognizer streams, and which passages of
//! an index each query counts as relevant.
//!
//! Formats (the files `primd eval --queries/--qrels/--streams` take, BEIR-style): queries
//! are JSON lines `{"id", "text"}`; qrels
//! are `query-id<TAB>corpus-id<TAB>score` with a header line (score > 0 = relevant);
//! streams are JSON lines `{"id", "partials": [{"t", "text"}], "final", "audio_s"}`.
//! A corpus id names a document; every chunk of it in the index is relevant. A bad line
//! is an error naming the file and line: an evaluation silently missing rows would
//! report figures for a different set than the user thinks.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::index::Index;

/// One typed question (`{"id", "text"}`, or BEIR's `{"_id", "text", "metadata"}`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct QueryRecord {
    #[serde(alias = "_id")]
    pub id: String,
    pub text: String,
}

/// One partial transcript and the audio time (seconds) at which it existed.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Partial {
    pub t: f64,
    pub text: String,
}

/// One recorded utterance.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct StreamRecord {
    pub id: String,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub audio_s: Option<f64>,
    pub partials: Vec<Partial>,
    #[serde(rename = "final")]
    pub final_text: String,
}

impl StreamRecord {
    /// Audio time of the final: the utterance's end (never before its last partial).
    pub fn final_t(&self) -> f64 {
        let last = self.partials.last().map_or(0.0, |p| p.t);
        self.audio_s.unwrap_or(last).max(last)
    }
}

/// Query id → relevant corpus ids.
pub type Qrels = HashMap<String, HashSet<String>>;

fn lines(path: &Path) -> anyhow::Result<impl Iterator<Item = (usize, std::io::Result<String>)>> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {path:?}"))?;
    Ok(std::io::BufReader::new(f)
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l)))
}

fn json_lines<T: for<'de> Deserialize<'de>>(path: &Path, what: &str) -> anyhow::Result<Vec<T>> {
    let mut out = Vec::new();
    for (no, line) in lines(path)? {
        let line = line.with_context(|| format!("reading {path:?}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(&line)
            .with_context(|| format!("{path:?} line {no}: expected {what}"))?;
        out.push(v);
    }
    Ok(out)
}

pub fn load_queries(path: &Path) -> anyhow::Result<Vec<QueryRecord>> {
    json_lines(path, "{\"id\", \"text\"}")
}

pub fn load_streams(path: &Path) -> anyhow::Result<Vec<StreamRecord>> {
    let streams: Vec<StreamRecord> = json_lines(
        path,
        "{\"id\", \"partials\": [{\"t\", \"text\"}], \"final\", \"audio_s\"}",
    )?;
    for (i, s) in streams.iter().enumerate() {
        if let Some(w) = s
            .partials
            .windows(2)
            .find(|w| w[1].t.partial_cmp(&w[0].t).is_none_or(|o| o.is_lt()))
        {
            bail!(
                "{path:?} utterance {} ({}): partial times go backwards ({} then {})",
                i + 1,
                s.id,
                w[0].t,
                w[1].t
            );
        }
    }
    Ok(streams)
}

/// Reads a qrels file: a header line, then `query-id<TAB>corpus-id<TAB>score`.
pub fn load_qrels(path: &Path) -> anyhow::Result<Qrels> {
    let mut qrels = Qrels::new();
    for (no, line) in lines(path)? {
        let line = line.with_context(|| format!("reading {path:?}"))?;
        if no == 1 || line.trim().is_empty() {
            continue; // header
        }
        let mut cols = line.split('\t');
        let (Some(q), Some(d), Some(s), None) =
            (cols.next(), cols.next(), cols.next(), cols.next())
        else {
            bail!("{path:?} line {no}: expected query-id<TAB>corpus-id<TAB>score");
        };
        let score: f64 = s
            .trim()
            .parse()
            .with_context(|| format!("{path:?} line {no}: score {s:?} is not a number"))?;
        if score > 0.0 {
            qrels
                .entry(q.to_string())
                .or_default()
                .insert(d.to_string());
        }
    }
    Ok(qrels)
}

/// Passage positions → document numbers, and each query's relevant documents: what
/// the replays need to judge a result list without touching strings.
pub struct Relevance {
    /// Document number of each passage position (chunks of a document share it).
    pub doc_of: Vec<u32>,
    docs: HashMap<String, u32>,
}

impl Relevance {
    pub fn new(index: &Index) -> anyhow::Result<Self> {
        let mut docs = HashMap::new();
        let mut doc_of = Vec::with_capacity(index.len());
        for i in 0..index.len() {
            let id = index.passage(i)?.id;
            let next = docs.len() as u32;
            doc_of.push(*docs.entry(id.to_string()).or_insert(next));
        }
        Ok(Relevance { doc_of, docs })
    }

    /// Document numbers of `query`'s relevant corpus ids that are in the index (sorted).
    pub fn relevant(&self, qrels: &Qrels, query: &str) -> Vec<u32> {
        let mut v: Vec<u32> = qrels
            .get(query)
            .into_iter()
            .flatten()
            .filter_map(|d| self.docs.get(d).copied())
            .collect();
        v.sort_unstable();
        v
    }

    /// Document number of a passage position.
    pub fn doc(&self, passage: u32) -> u32 {
        self.doc_of[passage as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qrels_keep_positive_scores_and_bad_lines_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.tsv");
        std::fs::write(
            &p,
            "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n",
        )
        .unwrap();
        let q = load_qrels(&p).unwrap();
        assert_eq!(q["q1"], HashSet::from(["d1".to_string()]));
        assert_eq!(q["q2"], HashSet::from(["d3".to_string()]));
        std::fs::write(&p, "h\nq1\td1\t1\nq1 d2 1\n").unwrap();
        let e = format!("{:#}", load_qrels(&p).unwrap_err());
        assert!(e.contains("line 3"), "{e}");
    }

    #[test]
    fn streams_parse_and_reject_time_going_backwards() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        std::fs::write(
            &p,
            r#"{"id": "a", "text": "x y", "audio_s": 1.2, "partials": [{"t": 0.5, "text": "x"}, {"t": 1.0, "text": "x y"}], "final": "x y"}"#,
        )
        .unwrap();
        let s = load_streams(&p).unwrap();
        assert_eq!((s.len(), s[0].final_t()), (1, 1.2));
        std::fs::write(
            &p,
            "\n{\"id\": \"a\", \"partials\": [{\"t\": 1.0, \"text\": \"x\"}, {\"t\": 0.5, \"text\": \"x y\"}], \"final\": \"x y\"}\n",
        )
        .unwrap();
        let e = format!("{:#}", load_streams(&p).unwrap_err());
        assert!(e.contains("backwards"), "{e}");
        std::fs::write(&p, "{\"id\": \"a\"}\n").unwrap();
        let e = format!("{:#}", load_streams(&p).unwrap_err());
        assert!(e.contains("line 1"), "{e}");
    }
}
