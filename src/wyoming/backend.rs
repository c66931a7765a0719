//! What the Wyoming connections need of the retriever, as a small interface: open a
//! session, send it the turns' partials and finals, and (for the server's replies) wait
//! for a turn's final result. The connection code depends on this only, so it is tested
//! with a recording backend and runs on whichever daemon plumbing `primd run` has.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

/// A final result, as much of it as a Wyoming reply needs.
#[derive(Clone, Debug, PartialEq)]
pub struct FinalResult {
    /// The best passage: (title, text); `None` when nothing was found.
    pub top: Option<(String, String)>,
    /// The confidence is low: the top passage should not be presented as the answer.
    pub low_evidence: bool,
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

/// The daemon's single STT stream as a backend: turns become `jsonl` lines written to
/// the daemon's input (a pipe), results go to stdout only. Sessions share the stream:
/// two Wyoming connections speaking at once interleave into one utterance, so this is
/// for one connection at a time.
pub struct PipeBackend {
    pipe: Mutex<Box<dyn Write + Send>>,
}

impl PipeBackend {
    pub fn new(pipe: Box<dyn Write + Send>) -> Self {
        PipeBackend {
            pipe: Mutex::new(pipe),
        }
    }

    fn line(&self, key: &str, text: &str) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(&serde_json::json!({ key: text }))?;
        line.push(b'\n');
        let mut pipe = self.pipe.lock().unwrap_or_else(|p| p.into_inner());
        pipe.write_all(&line)?;
        Ok(())
    }
}

struct PipeSession<'a> {
    backend: &'a PipeBackend,
    newest: String,
}

impl Backend for &'static PipeBackend {
    fn open_session(&self, _name: &str) -> anyhow::Result<Box<dyn Session>> {
        Ok(Box::new(PipeSession {
            backend: self,
            newest: String::new(),
        }))
    }

    fn results(&self, _session: &str) -> anyhow::Result<Option<Box<dyn Results>>> {
        Ok(None)
    }
}

impl Session for PipeSession<'static> {
    fn partial(&mut self, _turn: u64, text: &str) -> anyhow::Result<()> {
        self.newest.clear();
        self.newest.push_str(text);
        self.backend.line("partial", text)
    }

    fn final_(&mut self, _turn: u64, text: &str) -> anyhow::Result<()> {
        self.newest.clear();
        self.backend.line("final", text)
    }

    fn end_of_speech(&mut self, _turn: u64) -> anyhow::Result<()> {
        let text = std::mem::take(&mut self.newest);
        self.backend.line("final", &text)
    }
}
