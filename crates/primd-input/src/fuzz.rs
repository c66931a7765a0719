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
    let fuzz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
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
