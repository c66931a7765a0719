//! The Wyoming protocol's framing (Home Assistant's voice services), read from
//! untrusted bytes.
//!
//! A Wyoming event on the wire (the reference is the `wyoming` Python package,
//! `wyoming/event.py`):
//!
//! ```text
//! {"type":"transcript","data":{...},"data_length":N,"payload_length":M,"version":"1.7.2"}\n
//! <N bytes: a JSON object merged on top of the header's "data">
//! <M bytes: binary payload (PCM audio for audio-chunk)>
//! ```
//!
//! [`FrameReader`] cuts a byte stream into frames and keeps each frame's exact bytes
//! ([`Frame::raw`]), because primd's Wyoming proxy forwards frames unchanged: it never
//! re-serialises what it relays. Framing needs only the header's `type` and lengths;
//! the content (the merged `data`) is read separately by [`Frame::event`], so a frame
//! whose data primd does not understand is still relayed. Every size is bounded
//! ([`Limits`]): a header line, a data block or a payload over its limit is a
//! [`FrameError`] naming it, never an allocation of what the peer announced.
//!
//! [`Transcripts`] turns the speech-to-text events (`transcript-start`,
//! `transcript-chunk` deltas since protocol 1.7, `transcript`, `transcript-stop`) into
//! turns: the joined partial so far, then the final text, in a fixed-capacity string
//! (no allocation per chunk).

use std::borrow::Cow;
use std::fmt;
use std::io::{self, BufRead, Read};

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::{Text, to_text};

/// Longest header line accepted, in bytes (newline excluded). Headers are ~100 bytes;
/// an `info` event may carry its data inline, so this is generous.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Largest data block accepted (`data_length`): an `info` of a service with many
/// models is tens of KB.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;
/// Largest payload accepted (`payload_length`): an `audio-chunk` is a few KB of PCM
/// (Home Assistant sends 1,024 samples per chunk); a whole utterance of 16 kHz 16-bit
/// audio in one chunk is ~1 MB for 30 s.
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024 * 1024;

/// Size limits of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub header: usize,
    pub data: usize,
    pub payload: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header: MAX_HEADER_BYTES,
            data: MAX_DATA_BYTES,
            payload: MAX_PAYLOAD_BYTES,
        }
    }
}

/// Why a stream could not be cut into frames. After one of these the stream's framing
/// is lost (or the peer broke a limit): the connection should be closed.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame {frame}: header line longer than {limit} bytes")]
    HeaderTooLong { frame: u64, limit: usize },
    #[error("frame {frame}: data_length {len} over the limit of {limit} bytes")]
    DataTooLong { frame: u64, len: u64, limit: usize },
    #[error("frame {frame}: payload_length {len} over the limit of {limit} bytes")]
    PayloadTooLong { frame: u64, len: u64, limit: usize },
    #[error("frame {frame}: bad header: {reason}")]
    BadHeader { frame: u64, reason: String },
    #[error("frame {frame}: the stream ended inside the {part} ({got} of {want} bytes)")]
    Truncated {
        frame: u64,
        part: &'static str,
        got: usize,
        want: usize,
    },
    #[error("reading frame {frame}: {source}")]
    Io { frame: u64, source: io::Error },
}

/// A frame whose bytes are well framed but whose content is not a Wyoming event primd
/// can read (the data block is not a JSON object, `text` is not a string). A proxy
/// still forwards such a frame.
#[derive(Debug, thiserror::Error)]
#[error("frame {frame} ({kind}): bad data: {reason}")]
pub struct ContentError {
    pub frame: u64,
    pub kind: String,
    pub reason: String,
}

/// Whether a reader keeps payloads (a proxy forwards them) or skips them (primd's
/// own server reads only text events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payloads {
    Keep,
    Skip,
}

/// The header fields that frame an event.
#[derive(Deserialize)]
struct Header<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(default)]
    data_length: Option<u64>,
    #[serde(default)]
    payload_length: Option<u64>,
    #[serde(default, borrow)]
    version: Option<Cow<'a, str>>,
    #[serde(default)]
    data: Option<IgnoredAny>,
}

/// The header again, with its inline `data` read for content.
#[derive(Deserialize)]
struct HeaderData<'a> {
    #[serde(default, borrow)]
    data: Option<DataFields<'a>>,
}

/// The fields of an event's `data` primd uses; the rest is skipped unread. A JSON
/// object only (serde would read a struct from an array too).
#[derive(Default)]
struct DataFields<'a> {
    /// `Some` when the key is there; `Some(None)` for `"text": null`, which the
    /// reference implementation writes for an optional text it was not given
    /// (`Ping()`, `Pong()`, `Transcribe()`): no text, as when the key is absent.
    text: Option<Option<Cow<'a, str>>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for DataFields<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = DataFields<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = DataFields::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "text" {
                        // The last one wins, as in Python's json.loads.
                        out.text = Some(map.next_value::<Option<Cow<'de, str>>>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

fn json_object<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, String> {
    let start = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if start != Some(&b'{') {
        return Err("not a JSON object".into());
    }
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

/// One frame, borrowed from the reader's buffer until the next read.
#[derive(Debug)]
pub struct Frame<'a> {
    /// 1-based frame number on this stream.
    pub number: u64,
    /// The frame's bytes exactly as received: header line with its newline, data
    /// block, payload (only with [`Payloads::Keep`]).
    pub raw: &'a [u8],
    /// The event type (`transcript`, `audio-chunk`, ...).
    pub kind: Cow<'a, str>,
    /// The sender's protocol version, when the header carries one.
    pub version: Option<Cow<'a, str>>,
    header_len: usize,
    data_len: usize,
    /// The payload's length (kept or skipped).
    pub payload_len: usize,
}

impl<'a> Frame<'a> {
    /// The header line, without its newline.
    pub fn header(&self) -> &'a [u8] {
        &self.raw[..self.header_len - 1]
    }

    /// The separate data block (empty when the header carries all of its data).
    pub fn data_block(&self) -> &'a [u8] {
        &self.raw[self.header_len..self.header_len + self.data_len]
    }

    /// The payload, when the reader keeps them.
    pub fn payload(&self) -> Option<&'a [u8]> {
        let start = self.header_len + self.data_len;
        (self.raw.len() == start + self.payload_len).then(|| &self.raw[start..])
    }

    /// The event's content: its type and `data.text`, the data block merged on top of
    /// the header's `data` as the reference implementation does.
    pub fn event(&self) -> Result<Event<'a>, ContentError> {
        let err = |reason: String| ContentError {
            frame: self.number,
            kind: self.kind.to_string(),
            reason,
        };
        let header: HeaderData<'a> = json_object(self.header()).map_err(&err)?;
        let mut text = header.data.and_then(|d| d.text);
        let block = self.data_block();
        if !block.is_empty() {
            let data: DataFields<'a> =
                json_object(block).map_err(|e| err(format!("data block: {e}")))?;
            if data.text.is_some() {
                text = data.text;
            }
        }
        Ok(Event {
            kind: self.kind.clone(),
            text: text.flatten(),
        })
    }
}

/// What primd reads of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event<'a> {
    pub kind: Cow<'a, str>,
    /// `data.text` (merged), when there is one.
    pub text: Option<Cow<'a, str>>,
}

/// Cuts a byte stream into Wyoming frames. The buffer is reused: no allocation per
/// frame once it reached its working size.
pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    limits: Limits,
    payloads: Payloads,
    frames: u64,
}

impl<R: BufRead> FrameReader<R> {
    pub fn new(inner: R, payloads: Payloads) -> Self {
        Self::with_limits(inner, payloads, Limits::default())
    }

    pub fn with_limits(inner: R, payloads: Payloads, limits: Limits) -> Self {
        FrameReader {
            inner,
            buf: Vec::with_capacity(4096),
            limits,
            payloads,
            frames: 0,
        }
    }

    /// Frames read so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The next frame; `Ok(None)` at the end of the stream between frames.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, FrameError> {
        self.buf.clear();
        let frame = self.frames + 1;
        let io_err = |source| FrameError::Io { frame, source };
        // The header line, bounded.
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(e)),
            };
            if chunk.is_empty() {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(FrameError::Truncated {
                    frame,
                    part: "header line",
                    got: self.buf.len(),
                    want: self.buf.len() + 1,
                });
            }
            let room = self.limits.header + 1 - self.buf.len();
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) if i < room => (i + 1, true),
                _ if chunk.len() < room => (chunk.len(), false),
                _ => {
                    return Err(FrameError::HeaderTooLong {
                        frame,
                        limit: self.limits.header,
                    });
                }
            };
            self.buf.extend_from_slice(&chunk[..take]);
            self.inner.consume(take);
            if done {
                break;
            }
        }
        self.frames = frame;
        let header_len = self.buf.len();
        let bad = |reason: String| FrameError::BadHeader { frame, reason };
        let (data_len, payload_len) = {
            let h: Header = json_object(&self.buf[..header_len - 1]).map_err(bad)?;
            if h.kind.is_empty() {
                return Err(bad("empty type".into()));
            }
            let _ = h.data;
            (h.data_length.unwrap_or(0), h.payload_length.unwrap_or(0))
        };
        if data_len > self.limits.data as u64 {
            return Err(FrameError::DataTooLong {
                frame,
                len: data_len,
                limit: self.limits.data,
            });
        }
        if payload_len > self.limits.payload as u64 {
            return Err(FrameError::PayloadTooLong {
                frame,
                len: payload_len,
                limit: self.limits.payload,
            });
        }
        let (data_len, payload_len) = (data_len as usize, payload_len as usize);
        self.append(data_len, frame, "data block")?;
        match self.payloads {
            Payloads::Keep => self.append(payload_len, frame, "payload")?,
            Payloads::Skip => {
                let got = io::copy(
                    &mut (&mut self.inner).take(payload_len as u64),
                    &mut io::sink(),
                )
                .map_err(io_err)? as usize;
                if got < payload_len {
                    return Err(FrameError::Truncated {
                        frame,
                        part: "payload",
                        got,
                        want: payload_len,
                    });
                }
            }
        }
        // Parsed again for the borrowed fields (a header is ~100 bytes).
        let h: Header = json_object(&self.buf[..header_len - 1]).map_err(bad)?;
        Ok(Some(Frame {
            number: frame,
            raw: &self.buf,
            kind: h.kind,
            version: h.version,
            header_len,
            data_len,
            payload_len,
        }))
    }

    /// Reads exactly `n` more bytes into the buffer.
    fn append(&mut self, n: usize, frame: u64, part: &'static str) -> Result<(), FrameError> {
        let start = self.buf.len();
        let got = (&mut self.inner)
            .take(n as u64)
            .read_to_end(&mut self.buf)
            .map_err(|source| FrameError::Io { frame, source })?;
        if got < n {
            self.buf.truncate(start);
            return Err(FrameError::Truncated {
                frame,
                part,
                got,
                want: n,
            });
        }
        Ok(())
    }
}

/// What a speech-to-text event means for the turn it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn<'a> {
    /// The whole hypothesis so far (the chunks joined), trimmed, not empty.
    Partial(&'a str),
    /// The turn's final text, trimmed, not empty.
    Final(&'a str),
    /// The open turn ended without a final text (a new `transcript-start`, an empty
    /// transcript, a stop with nothing said): no result is wanted for it.
    Abandon,
}

/// The transcript events of one connection → turns.
///
/// - `transcript-start`: a new turn (an open one without its final is abandoned).
/// - `transcript-chunk`: a delta (protocol ≥ 1.7), appended to the turn's text as is
///   (chunks carry their own spaces); the joined text is the partial.
/// - `transcript`: the final text; the turn ends. A streaming service sends it after
///   its chunks, before `transcript-stop`, for older clients.
/// - `transcript-stop`: ends a turn still open with the joined chunks as its final.
///
/// Every other event type is no business of this state.
#[derive(Default)]
pub struct Transcripts {
    /// The chunks of the open turn, joined (cut at [`crate::MAX_TEXT_BYTES`]).
    joined: Text,
    /// A turn is open: started, or chunks arrived, and no final yet.
    open: bool,
    /// The final text, kept for the returned borrow.
    last: Text,
}

impl Transcripts {
    pub fn new() -> Self {
        Self::default()
    }

    /// A turn is open (partials seen or a start, no final yet).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Feeds one event; returns what it means for the turn, if anything.
    pub fn feed(&mut self, ev: &Event) -> Option<Turn<'_>> {
        let text = ev.text.as_deref().unwrap_or("");
        match ev.kind.as_ref() {
            "transcript-start" => {
                let was_open = self.open && !self.joined.trim().is_empty();
                self.joined.clear();
                self.open = true;
                was_open.then_some(Turn::Abandon)
            }
            "transcript-chunk" => {
                self.open = true;
                push_cut(&mut self.joined, text);
                let t = self.joined.trim();
                (!t.is_empty()).then_some(Turn::Partial(t))
            }
            "transcript" => {
                let had = self.open && !self.joined.trim().is_empty();
                self.open = false;
                self.joined.clear();
                self.last = to_text(text.trim()).0;
                let t = self.last.trim();
                if !t.is_empty() {
                    Some(Turn::Final(t))
                } else {
                    had.then_some(Turn::Abandon)
                }
            }
            "transcript-stop" => {
                if !self.open {
                    return None;
                }
                self.open = false;
                self.last = to_text(self.joined.trim()).0;
                self.joined.clear();
                if self.last.is_empty() {
                    None
                } else {
                    Some(Turn::Final(&self.last))
                }
            }
            _ => None,
        }
    }
}

/// Appends `s` to `t`, cut at a character boundary where `t` is full.
fn push_cut(t: &mut Text, s: &str) {
    let room = t.capacity() - t.len();
    let mut end = s.len().min(room);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    // Cannot fail: `end` ≤ room.
    let _ = t.push_str(&s[..end]);
}

/// Writes one event in the reference implementation's layout (header line with
/// `data_length`, then the data block), for primd's replies (`info`, `error`,
/// `handled`). `data` is a serialised JSON object, or empty for no data.
pub fn write_event(out: &mut Vec<u8>, kind: &str, data: &[u8], version: &str) {
    let header = if data.is_empty() {
        serde_json::json!({"type": kind, "version": version})
    } else {
        serde_json::json!({"type": kind, "version": version, "data_length": data.len()})
    };
    // Cannot fail: a Value of strings and numbers.
    let _ = serde_json::to_writer(&mut *out, &header);
    out.push(b'\n');
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests;
