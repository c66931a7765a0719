//! The body of the `dialects` fuzz target (`fuzz/`), here so that the saved corpus and
//! every crash regression also run as ordinary tests (`tests/fuzz_corpus.rs`) on the
//! code `cargo test` builds: the fuzzer and the tests drive the same function.

use std::io::BufReader;
use std::time::Instant;

use crate::protocol::{self, MAX_FRAME_BYTES, MAX_SESSION_BYTES, Request};
use crate::{Ctx, Dialect, DialectKind, EventKind, LineReader, MAX_TEXT_BYTES};

/// Every dialect parser behind the real line reader, driven as the daemon's reader
/// thread drives them. Byte 0 picks the dialect (incl. `auto`), byte 1 the reader's
/// buffer capacity (small ones split lines across reads and hand out pending redraws),
/// whether the daemon's silence reset is sprinkled in and the endpoint; the rest is the
/// input. Panics when a parser panics or breaks a promise of [`crate::Event`]s.
pub fn dialects(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let kind = DialectKind::ALL[data[0] as usize % DialectKind::ALL.len()];
    let capacity = 1 + (data[1] & 0x3f) as usize * 7;
    let silences = data[1] & 0x40 != 0;
    let endpoint_ms = if data[1] & 0x80 != 0 { 50 } else { 800 };
    let mut dialect = Dialect::new(kind, endpoint_ms);
    let mut lines = LineReader::new(BufReader::with_capacity(capacity, &data[2..]));
    let mut n = 0u64;
    loop {
        lines.set_mode(dialect.reader_mode());
        let Some((line_no, line)) = lines.next_line().expect("reading a byte slice") else {
            break;
        };
        let Ok((text, end)) = line.text() else {
            continue;
        };
        n += 1;
        if silences && n.is_multiple_of(3) {
            dialect.silence();
        }
        let cx = Ctx {
            line: line_no,
            received: Instant::now(),
        };
        let _ = dialect.parse(text, end, cx, &mut |ev| {
            assert!(ev.text.len() <= MAX_TEXT_BYTES);
            assert!(ev.line <= line_no, "events name a line already read");
            if ev.kind == EventKind::Partial {
                assert!(!ev.text.is_empty(), "empty partials are not reported");
            }
            assert_eq!(ev.text.trim(), ev.text.as_str(), "texts are trimmed");
        });
    }
}

/// The socket protocol's frame parser behind the real line reader, as a connection
/// thread drives it. Byte 0 picks the reader's buffer capacity and the frame limit
/// (the real one, or a small one so that oversized frames are common); the rest is what
/// a client sent. Panics when the parser panics or breaks a promise: a refusal carries
/// one of the documented codes; an accepted transcript names a valid, non-reserved
/// session.
pub fn protocol(data: &[u8]) {
    let Some((&config, data)) = data.split_first() else {
        return;
    };
    let capacity = 1 + (config & 0x3f) as usize * 11;
    let limit = if config & 0x80 != 0 {
        48
    } else {
        MAX_FRAME_BYTES
    };
    let mut lines = LineReader::with_limit(BufReader::with_capacity(capacity, data), limit);
    while let Some((_, line)) = lines.next_line().expect("reading a byte slice") {
        let Some(r) = protocol::parse_line(&line) else {
            continue;
        };
        match r {
            Ok(Request::Transcript { session, .. }) => {
                assert!(!session.is_empty() && session.len() <= MAX_SESSION_BYTES);
                assert!(!protocol::is_reserved(&session), "{session:?}");
            }
            Ok(Request::Command { .. }) => {}
            Err(refusal) => assert!(
                protocol::CODES.contains(&refusal.code),
                "undocumented code {:?}",
                refusal.code
            ),
        }
    }
}

/// The saved inputs of fuzz target `target` in this repository: its seed corpus
/// (`fuzz/seeds/<target>/`, which must not be empty) and every crash regression
/// (`fuzz/regressions/<target>/`), for tests that run them through the target's body.
pub fn saved_inputs(target: &str) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    // The package whose tests run, as cargo says at run time (this crate, or primd at the
    // root; `fuzz/` is at the repository root above either). Not only `env!`: cargo
    // reuses this library's build across checkouts that share a target folder, and the
    // compile-time path would then name the other checkout.
    let here = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    let fuzz = here
        .ancestors()
        .map(|d| d.join("fuzz"))
        .find(|f| f.join("seeds").is_dir())
        .unwrap_or_else(|| panic!("no fuzz/seeds in or above {here:?}"));
    let mut inputs = Vec::new();
    for kind in ["seeds", "regressions"] {
        let dir = fuzz.join(kind).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            assert_eq!(kind, "regressions", "{dir:?}: no saved corpus");
            continue;
        };
        for entry in entries {
            let path = entry.expect("listing a fuzz corpus").path();
            if path.is_file() {
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
                inputs.push((path, bytes));
            }
        }
    }
    inputs.sort();
    assert!(
        inputs
            .iter()
            .any(|(p, _)| p.components().any(|c| c.as_os_str() == "seeds")),
        "fuzz/seeds/{target}/ is empty"
    );
    inputs
}

/// The Wyoming framing and transcript state, driven as primd's Wyoming server and proxy
/// drive them. Byte 0: the reader's buffer capacity (bits 0-5), whether payloads are
/// kept (bit 6, the proxy) and small limits (bit 7, so that inputs reach them); the rest
/// is the stream. Panics when the reader panics, when kept frames are not the input
/// byte for byte, or when a turn breaks its promises.
pub fn wyoming(data: &[u8]) {
    use crate::wyoming::{FrameReader, Limits, Payloads, Transcripts, Turn};
    let Some((&config, input)) = data.split_first() else {
        return;
    };
    let capacity = 1 + (config & 0x3f) as usize * 5;
    let payloads = if config & 0x40 != 0 {
        Payloads::Keep
    } else {
        Payloads::Skip
    };
    let limits = if config & 0x80 != 0 {
        Limits {
            header: 200,
            data: 300,
            payload: 500,
        }
    } else {
        Limits::default()
    };
    let mut reader =
        FrameReader::with_limits(BufReader::with_capacity(capacity, input), payloads, limits);
    let mut transcripts = Transcripts::new();
    let mut consumed = 0usize;
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => {
                if payloads == Payloads::Keep {
                    assert_eq!(consumed, input.len(), "the frames are the whole input");
                }
                break;
            }
            Err(_) => break,
        };
        assert!(frame.header().len() <= limits.header);
        assert!(frame.data_block().len() <= limits.data);
        assert!(frame.payload_len <= limits.payload);
        if payloads == Payloads::Keep {
            assert_eq!(
                frame.raw,
                &input[consumed..consumed + frame.raw.len()],
                "a kept frame is the input byte for byte"
            );
            assert_eq!(frame.payload().map(<[u8]>::len), Some(frame.payload_len));
            consumed += frame.raw.len();
        }
        let Ok(ev) = frame.event() else {
            continue;
        };
        match transcripts.feed(&ev) {
            Some(Turn::Partial(t) | Turn::Final(t)) => {
                assert!(!t.is_empty() && t.len() <= MAX_TEXT_BYTES);
                assert_eq!(t.trim(), t, "turn texts are trimmed");
            }
            Some(Turn::Abandon) | None => {}
        }
    }
}
