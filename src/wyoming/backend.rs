//! What the Wyoming connections need of the retriever, as a small interface: open a
//! session, send it the turns' partials and finals, and (for the server's replies) wait
//! for a turn's final result. The connection code depends on this only, so it is tested
//! with a recording backend and runs on whichever daemon plumbing `primd run` has.

use std::time::{Duration, Instant};

use crate::hub::{self, Client, Hub};

/// A final result, as much of it as a Wyoming reply needs.
#[derive(Clone, Debug, PartialEq)]
pub struct FinalResult {
    /// What is spoken, with the title of its passage: one sentence, the context's best
    /// (`best`); without a context of sentences, the best passage's first sentence.
    /// `None` when nothing was found.
    pub top: Option<(String, String)>,
    /// The confidence is low: the top passage should not be presented as the answer.
    pub low_evidence: bool,
    /// The line's `context` as it was (`None`: context off).
    pub context: Option<serde_json::Value>,
}

/// One session's transcripts, turn by turn (the whole hypothesis each time, not a
/// delta). Dropping it closes the session (an open turn is abandoned).
pub trait Session: Send {
    fn partial(&mut self, turn: u64, text: &str) -> anyhow::Result<()>;
    fn final_(&mut self, turn: u64, text: &str) -> anyhow::Result<()>;
    /// Turn `turn` ended without a final text: its newest partial is the final.
    fn end_of_speech(&mut self, turn: u64) -> anyhow::Result<()>;
}

/// The final results of one session, for the thread that replies to its peer.
pub trait Results: Send {
    /// The final result of `turn`, waiting at most `timeout`; results of other turns
    /// are skipped. `None`: none came in time (or the daemon stopped).
    fn final_of(&mut self, turn: u64, timeout: Duration) -> Option<FinalResult>;
}

pub trait Backend: Send + Sync {
    fn open_session(&self, name: &str) -> anyhow::Result<Box<dyn Session>>;
    /// Subscribes to `session`'s finals; `None` when this backend cannot deliver them.
    fn results(&self, session: &str) -> anyhow::Result<Option<Box<dyn Results>>>;
}

/// The daemon's hub ([`crate::hub`]) as the backend: each connection's session is a
/// lane of the one retriever; its results reach the socket API's subscribers (and
/// primd's stdout, where `primd run` subscribes a printer), and the server's replies
/// come from a client of the hub subscribed to its own session.
pub struct HubBackend(pub Hub);

impl Backend for HubBackend {
    fn open_session(&self, name: &str) -> anyhow::Result<Box<dyn Session>> {
        Ok(Box::new(self.0.open_session(name)?))
    }

    fn results(&self, session: &str) -> anyhow::Result<Option<Box<dyn Results>>> {
        let mut client = self.0.connect_internal(&format!("{session} replies"))?;
        client.subscribe(session, false)?;
        Ok(Some(Box::new(HubResults {
            client,
            buf: Vec::new(),
        })))
    }
}

impl Session for hub::Session {
    fn partial(&mut self, turn: u64, text: &str) -> anyhow::Result<()> {
        hub::Session::partial(self, turn, text)?;
        Ok(())
    }

    fn final_(&mut self, turn: u64, text: &str) -> anyhow::Result<()> {
        hub::Session::final_(self, turn, text)?;
        Ok(())
    }

    fn end_of_speech(&mut self, turn: u64) -> anyhow::Result<()> {
        hub::Session::end_of_speech(self, turn)?;
        Ok(())
    }
}

struct HubResults {
    client: Client,
    buf: Vec<u8>,
}

impl Results for HubResults {
    fn final_of(&mut self, turn: u64, timeout: Duration) -> Option<FinalResult> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let d = self.client.results().recv_timeout(left).ok()?;
            if !d.is_final() || d.turn != turn {
                continue;
            }
            // The protocol's line, read back: what a subscriber sees is what is spoken.
            self.buf.clear();
            d.encode(&mut self.buf).ok()?;
            return Some(final_result(&self.buf));
        }
    }
}

/// The reply's part of a final result line (`primd run`'s JSON). What is spoken is one
/// sentence: the context's best one (`context.spans[context.best]`, a span of its own);
/// with an index built without sentences (`"unit": "passages"`) or with the context off,
/// the first sentence of the best passage.
pub fn final_result(line: &[u8]) -> FinalResult {
    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(default)]
        evidence: String,
        #[serde(default)]
        results: Vec<Passage>,
        #[serde(default)]
        context: Option<serde_json::Value>,
    }
    #[derive(serde::Deserialize)]
    struct Passage {
        #[serde(default)]
        id: String,
        #[serde(default)]
        chunk: u32,
        title: String,
        text: String,
    }
    #[derive(serde::Deserialize)]
    struct Context {
        #[serde(default)]
        unit: String,
        #[serde(default)]
        best: Option<usize>,
        #[serde(default)]
        spans: Vec<Span>,
    }
    #[derive(serde::Deserialize)]
    struct Span {
        passage: String,
        chunk: u32,
        start: usize,
        end: usize,
    }
    match serde_json::from_slice::<Line>(line) {
        Ok(l) => {
            // The context's best span, cut from its passage: one sentence (unit
            // "sentences"), else a passage's beginning.
            let best = l
                .context
                .as_ref()
                .and_then(|c| serde_json::from_value::<Context>(c.clone()).ok())
                .and_then(|c| {
                    let s = c.spans.into_iter().nth(c.best?)?;
                    let p = l
                        .results
                        .iter()
                        .find(|p| p.id == s.passage && p.chunk == s.chunk)?;
                    let text: String = p
                        .text
                        .chars()
                        .skip(s.start)
                        .take(s.end.saturating_sub(s.start))
                        .collect();
                    let text = match c.unit.as_str() {
                        "sentences" => text.trim().to_string(),
                        _ => first_sentence(&text),
                    };
                    (!text.is_empty()).then(|| (p.title.clone(), text))
                });
            let top = best.or_else(|| {
                let p = l.results.first()?;
                Some((p.title.clone(), first_sentence(&p.text)))
            });
            FinalResult {
                low_evidence: l.evidence != "ok",
                top,
                context: l.context,
            }
        }
        Err(e) => {
            log::error!("wyoming: a result line does not read back: {e}");
            FinalResult {
                top: None,
                low_evidence: true,
                context: None,
            }
        }
    }
}

/// The first sentence of `text` (as the index splits passages: `context::split`).
fn first_sentence(text: &str) -> String {
    let first = crate::context::split::sentences(text).into_iter().next();
    first.map_or(text, |r| &text[r]).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_line_gives_the_top_passage_and_its_evidence() {
        let line = br#"{"type":"final","session":"wyoming-1","turn":1,"evidence":"ok","results":[{"id":"a","title":"A","text":"first"},{"id":"b","title":"B","text":"second"}]}"#;
        assert_eq!(
            final_result(line),
            FinalResult {
                top: Some(("A".into(), "first".into())),
                low_evidence: false,
                context: None,
            }
        );
        let low = br#"{"type":"final","evidence":"low","results":[]}"#;
        assert_eq!(
            final_result(low),
            FinalResult {
                top: None,
                low_evidence: true,
                context: None,
            }
        );
        assert!(final_result(b"garbage").low_evidence);
    }

    #[test]
    fn with_a_context_the_answer_is_its_best_sentence() {
        let line = r#"{"type":"final","evidence":"ok","results":[{"id":"a","chunk":0,"title":"A","text":"Zürich is a big city. The capital is Bern."},{"id":"b","chunk":0,"title":"B","text":"other"}],"context":{"text":"Zürich is a big city. The capital is Bern.","tokens":11,"unit":"sentences","best":1,"spans":[{"passage":"a","chunk":0,"start":0,"end":21},{"passage":"a","chunk":0,"start":22,"end":42}]}}"#;
        let r = final_result(line.as_bytes());
        assert_eq!(r.top, Some(("A".into(), "The capital is Bern.".into())));
        assert!(r.context.is_some());
        // a span that points nowhere, or none: the top passage's first sentence
        for odd in [r#""best":7"#, r#""best":null"#] {
            let odd = line.replace(r#""best":1"#, odd);
            let spoken = final_result(odd.as_bytes()).top.unwrap().1;
            assert_eq!(spoken, "Zürich is a big city.");
        }
    }

    #[test]
    fn the_spoken_answer_is_one_sentence_never_a_merged_span() {
        let text = "Zürich is a big city. The capital is Bern. It has a clock tower.";
        // An index without sentences hands over whole passages: one sentence is spoken.
        let line = format!(
            r#"{{"type":"final","evidence":"ok","results":[{{"id":"a","chunk":0,"title":"A","text":"{text}"}}],"context":{{"text":"{text}","tokens":16,"unit":"passages","best":0,"spans":[{{"passage":"a","chunk":0,"start":0,"end":64}}]}}}}"#
        );
        assert_eq!(
            final_result(line.as_bytes()).top.unwrap().1,
            "Zürich is a big city."
        );
        // The context off: the top passage's first sentence, not the whole passage.
        let off = format!(
            r#"{{"type":"final","evidence":"ok","results":[{{"id":"a","chunk":0,"title":"A","text":"{text}"}}]}}"#
        );
        assert_eq!(
            final_result(off.as_bytes()).top.unwrap().1,
            "Zürich is a big city."
        );
        // An empty context (nothing packed): `best` is null, the top passage speaks.
        let empty = off.replace(
            "}]}",
            r#"}],"context":{"text":"","tokens":0,"unit":"sentences","best":null,"spans":[]}}"#,
        );
        assert_eq!(
            final_result(empty.as_bytes()).top.unwrap().1,
            "Zürich is a big city."
        );
    }
}
