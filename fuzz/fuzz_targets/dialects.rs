//! Every dialect parser behind the real line reader, as the daemon's reader thread
//! drives them. Byte 0 picks the dialect (incl. `auto`), byte 1 the reader's buffer
//! capacity (small ones split lines across reads and hand out pending redraws) and
//! whether the daemon's silence reset is sprinkled in; the rest is the input.
#![no_main]

use std::io::BufReader;
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use primd_fuzz::input::{Ctx, Dialect, DialectKind, EventKind, LineReader, MAX_TEXT_BYTES};

const KINDS: [DialectKind; 8] = [
    DialectKind::Auto,
    DialectKind::Plain,
    DialectKind::Jsonl,
    DialectKind::WhisperCpp,
    DialectKind::WhisperStreaming,
    DialectKind::Whisperlive,
    DialectKind::Vosk,
    DialectKind::Deepgram,
];

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let kind = KINDS[data[0] as usize % KINDS.len()];
    let capacity = 1 + (data[1] & 0x3f) as usize * 7;
    let silences = data[1] & 0x40 != 0;
    let endpoint_ms = if data[1] & 0x80 != 0 { 50 } else { 800 };
    let mut dialect = Dialect::new(kind, endpoint_ms);
    let mut lines = LineReader::new(BufReader::with_capacity(capacity, &data[2..]));
    let mut n = 0u64;
    loop {
        lines.set_mode(dialect.reader_mode());
        let Some((line_no, line)) = lines.next_line().unwrap() else {
            break;
        };
        let Ok((text, end)) = line.text() else {
            continue;
        };
        n += 1;
        if silences && n % 3 == 0 {
            dialect.silence();
        }
        let cx = Ctx {
            line: line_no,
            received: Instant::now(),
        };
        let _ = dialect.parse(text, end, cx, &mut |ev| {
            assert!(ev.text.len() <= MAX_TEXT_BYTES);
            assert_eq!(
                ev.line,
                line_no.min(ev.line),
                "events name a line already read"
            );
            if ev.kind == EventKind::Partial {
                assert!(!ev.text.is_empty(), "empty partials are not reported");
                assert_eq!(ev.text.trim(), ev.text.as_str());
            }
        });
    }
});
