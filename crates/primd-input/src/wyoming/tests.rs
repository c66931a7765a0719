use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/wyoming")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// Every frame of `bytes`: (type, text, payload length, raw bytes), or the error that
/// stopped the reading.
type Read = (String, Option<String>, usize, Vec<u8>);

fn frames(bytes: &[u8], payloads: Payloads, limits: Limits) -> (Vec<Read>, Option<FrameError>) {
    // A small buffer: headers, data and payloads span several reads.
    let mut r = FrameReader::with_limits(io::BufReader::with_capacity(7, bytes), payloads, limits);
    let mut out = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => {
                let ev = f.event().expect("content");
                out.push((
                    ev.kind.to_string(),
                    ev.text.map(|t| t.to_string()),
                    f.payload_len,
                    f.raw.to_vec(),
                ));
            }
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

fn all(bytes: &[u8], payloads: Payloads) -> Vec<Read> {
    let (f, err) = frames(bytes, payloads, Limits::default());
    assert!(err.is_none(), "{err:?}");
    f
}

#[test]
fn the_wyoming_packages_stream_is_read_frame_by_frame_with_payloads_skipped() {
    // Written by wyoming 1.10.2 (tools/wyoming-fixtures.py): every data in a separate
    // block, audio chunks with 2,048 and 1,000 byte payloads that hold newlines.
    let f = all(&fixture("asr-streaming.bin"), Payloads::Skip);
    let kinds: Vec<&str> = f.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "transcribe",
            "audio-start",
            "audio-chunk",
            "transcript-start",
            "transcript-chunk",
            "audio-chunk",
            "transcript-chunk",
            "transcript-chunk",
            "audio-stop",
            "transcript",
            "transcript-stop"
        ]
    );
    assert_eq!(f[2].2, 2048);
    assert_eq!(f[5].2, 1000);
    assert_eq!(f[4].1.as_deref(), Some("what is"));
    assert_eq!(f[6].1.as_deref(), Some(" the capital"));
    assert_eq!(f[9].1.as_deref(), Some("What is the capital of France?"));
    // Skipped payloads are not in the frame's bytes.
    assert!(f[2].3.len() < 200);
}

#[test]
fn kept_frames_are_the_input_byte_for_byte() {
    for name in ["asr-streaming.bin", "asr-plain.bin"] {
        let bytes = fixture(name);
        let f = all(&bytes, Payloads::Keep);
        let joined: Vec<u8> = f.iter().flat_map(|x| x.3.iter().copied()).collect();
        assert_eq!(joined, bytes, "{name}");
    }
    let bytes = fixture("asr-streaming.bin");
    let mut r = FrameReader::new(&bytes[..], Payloads::Keep);
    let mut seen = 0;
    while let Some(f) = r.next_frame().unwrap() {
        if f.kind == "audio-chunk" {
            let p = f.payload().expect("kept");
            assert_eq!(p.len(), f.payload_len);
            assert_eq!(&p[..4], &[0, 1, 2, 3]);
            seen += 1;
        }
    }
    assert_eq!(seen, 2);
}

#[test]
fn data_in_the_header_and_in_a_separate_block_are_merged() {
    // Inline only.
    let f = all(
        b"{\"type\":\"transcript\",\"data\":{\"text\":\"inline\"}}\n",
        Payloads::Skip,
    );
    assert_eq!(f[0].1.as_deref(), Some("inline"));
    // Block on top of inline: the block's text wins (Python's dict.update).
    let block = br#"{"text":"from block"}"#;
    let mut bytes = format!(
        "{{\"type\":\"transcript\",\"data\":{{\"text\":\"inline\",\"language\":\"en\"}},\"data_length\":{}}}\n",
        block.len()
    )
    .into_bytes();
    bytes.extend_from_slice(block);
    let f = all(&bytes, Payloads::Skip);
    assert_eq!(f[0].1.as_deref(), Some("from block"));
    // A block without text keeps the inline one.
    let block = br#"{"language":"en"}"#;
    let mut bytes = format!(
        "{{\"type\":\"transcript\",\"data\":{{\"text\":\"inline\"}},\"data_length\":{}}}\n",
        block.len()
    )
    .into_bytes();
    bytes.extend_from_slice(block);
    let f = all(&bytes, Payloads::Skip);
    assert_eq!(f[0].1.as_deref(), Some("inline"));
    // Null lengths and data are absent ones; unknown fields are ignored.
    let f = all(
        b"{\"type\":\"describe\",\"data\":null,\"data_length\":null,\"payload_length\":0,\"x\":[1]}\r\n",
        Payloads::Skip,
    );
    assert_eq!((f[0].0.as_str(), f[0].1.as_deref()), ("describe", None));
}

#[test]
fn limits_are_errors_that_name_them() {
    let small = Limits {
        header: 64,
        data: 16,
        payload: 32,
    };
    let long = format!("{{\"type\":\"{}\"}}\n", "x".repeat(100));
    let (f, e) = frames(long.as_bytes(), Payloads::Skip, small);
    assert!(f.is_empty());
    assert!(
        matches!(
            e,
            Some(FrameError::HeaderTooLong {
                frame: 1,
                limit: 64
            })
        ),
        "{e:?}"
    );
    // Exactly at the limit is accepted.
    let at = format!("{{\"type\":\"{}\"}}\n", "x".repeat(64 - 11));
    assert_eq!(at.len(), 65);
    assert_eq!(frames(at.as_bytes(), Payloads::Skip, small).0.len(), 1);

    let data = b"{\"type\":\"t\"}\n{\"type\":\"t\",\"data_length\":17}\n";
    let (f, e) = frames(data, Payloads::Skip, small);
    assert_eq!(f.len(), 1);
    assert!(
        matches!(
            e,
            Some(FrameError::DataTooLong {
                frame: 2,
                len: 17,
                limit: 16
            })
        ),
        "{e:?}"
    );
    // An announced length is not allocated: a huge one is refused at once.
    let huge = b"{\"type\":\"audio-chunk\",\"payload_length\":18446744073709551615}\n";
    let (_, e) = frames(huge, Payloads::Keep, Limits::default());
    assert!(
        matches!(e, Some(FrameError::PayloadTooLong { frame: 1, .. })),
        "{e:?}"
    );
    let msg = e.unwrap().to_string();
    assert!(
        msg.contains("payload_length") && msg.contains("limit"),
        "{msg}"
    );
}

#[test]
fn truncated_frames_and_garbage_are_errors_not_panics() {
    let cases: &[(&[u8], &str)] = &[
        (b"{\"type\":\"t\"", "header line"),
        (b"{\"type\":\"t\",\"data_length\":10}\n{\"te", "data block"),
        (b"{\"type\":\"t\",\"payload_length\":10}\nabc", "payload"),
    ];
    for (bytes, part) in cases {
        for payloads in [Payloads::Keep, Payloads::Skip] {
            let (_, e) = frames(bytes, payloads, Limits::default());
            match e {
                Some(FrameError::Truncated { part: p, .. }) => assert_eq!(&p, part),
                other => panic!("{part}: {other:?}"),
            }
        }
    }
    for bad in [
        &b"not json\n"[..],
        b"\n",
        b"[\"type\",\"t\"]\n",
        b"{\"data\":{}}\n",
        b"{\"type\":\"\"}\n",
        b"{\"type\":5}\n",
        b"{\"type\":\"t\",\"data_length\":-1}\n",
        b"{\"type\":\"t\",\"payload_length\":1.5}\n",
        b"{\"type\":\"t\"}}\n",
        b"\xff\xfe{\"type\":\"t\"}\n",
    ] {
        let (f, e) = frames(bad, Payloads::Skip, Limits::default());
        assert!(f.is_empty());
        assert!(
            matches!(e, Some(FrameError::BadHeader { frame: 1, .. })),
            "{:?}: {e:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn content_errors_keep_the_framing() {
    // A data block that is not an object, a text that is not a string: the frame is
    // still cut right (a proxy forwards it) and the next one is read.
    let bytes = b"{\"type\":\"transcript\",\"data_length\":3}\n[1]{\"type\":\"transcript\",\"data\":{\"text\":7}}\n{\"type\":\"ping\"}\n";
    let mut r = FrameReader::new(&bytes[..], Payloads::Keep);
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!(f.data_block(), b"[1]");
    let e = f.event().unwrap_err();
    assert!(e.to_string().contains("data block"), "{e}");
    let f = r.next_frame().unwrap().unwrap();
    assert!(f.event().is_err());
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!(f.event().unwrap().kind, "ping");
    assert!(r.next_frame().unwrap().is_none());
    assert_eq!(r.frames(), 3);
}

fn turns(events: &[(&str, Option<&str>)]) -> Vec<String> {
    let mut t = Transcripts::new();
    let mut out = Vec::new();
    for (kind, text) in events {
        let ev = Event {
            kind: Cow::Borrowed(kind),
            text: text.map(Cow::Borrowed),
        };
        match t.feed(&ev) {
            Some(Turn::Partial(p)) => out.push(format!("partial:{p}")),
            Some(Turn::Final(f)) => out.push(format!("final:{f}")),
            Some(Turn::Abandon) => out.push("abandon".into()),
            None => {}
        }
    }
    out
}

#[test]
fn chunk_deltas_are_joined_into_the_partial_and_the_transcript_is_final() {
    let from_fixture: Vec<(String, Option<String>)> =
        all(&fixture("asr-streaming.bin"), Payloads::Skip)
            .into_iter()
            .map(|f| (f.0, f.1))
            .collect();
    let events: Vec<(&str, Option<&str>)> = from_fixture
        .iter()
        .map(|(k, t)| (k.as_str(), t.as_deref()))
        .collect();
    assert_eq!(
        turns(&events),
        [
            "partial:what is",
            "partial:what is the capital",
            "partial:what is the capital of france",
            "final:What is the capital of France?",
        ]
    );
}

#[test]
fn a_stop_without_transcript_ends_the_turn_with_the_joined_chunks() {
    assert_eq!(
        turns(&[
            ("transcript-start", None),
            ("transcript-chunk", Some(" lights ")),
            ("transcript-chunk", Some("off ")),
            ("transcript-stop", None),
            ("transcript-stop", None),
        ]),
        ["partial:lights", "partial:lights off", "final:lights off"]
    );
}

#[test]
fn a_new_start_abandons_the_open_turn_and_empty_ones_give_nothing() {
    assert_eq!(
        turns(&[
            ("transcript-chunk", Some("half a")),
            ("transcript-start", None),
            ("transcript-chunk", Some("second")),
            ("transcript", Some("  ")),
            ("transcript-start", None),
            ("transcript-stop", None),
            ("transcript", Some("plain final")),
            ("audio-chunk", Some("ignored")),
        ]),
        [
            "partial:half a",
            "abandon",
            "partial:second",
            "abandon",
            "final:plain final"
        ]
    );
}

#[test]
fn joined_chunks_are_cut_on_a_character_boundary() {
    let mut t = Transcripts::new();
    let chunk = "é".repeat(100); // 200 bytes
    let mut last = 0;
    for _ in 0..20 {
        let ev = Event {
            kind: Cow::Borrowed("transcript-chunk"),
            text: Some(Cow::Borrowed(&chunk)),
        };
        if let Some(Turn::Partial(p)) = t.feed(&ev) {
            assert!(p.len() <= crate::MAX_TEXT_BYTES && p.chars().all(|c| c == 'é'));
            last = p.len();
        }
    }
    assert_eq!(last, crate::MAX_TEXT_BYTES);
}

#[test]
fn written_events_read_back() {
    let mut out = Vec::new();
    write_event(&mut out, "info", br#"{"handle":[]}"#, "1.10.2");
    write_event(&mut out, "ping", b"", "1.10.2");
    let f = all(&out, Payloads::Keep);
    assert_eq!(f[0].0, "info");
    assert_eq!(f[1].0, "ping");
    assert_eq!(f.iter().map(|x| x.3.len()).sum::<usize>(), out.len());
}

#[test]
fn a_null_text_is_no_text_as_the_wyoming_package_writes_it() {
    // wyoming 1.10.2's Ping() writes `{"text": null}` (Home Assistant's and the
    // satellites' health check): an event without text, not unreadable data.
    let got = all(&fixture("handle-client.bin"), Payloads::Skip);
    let events: Vec<(&str, Option<&str>)> = got
        .iter()
        .map(|(kind, text, _, _)| (kind.as_str(), text.as_deref()))
        .collect();
    assert_eq!(
        events,
        [
            ("ping", None),
            ("ping", Some("are you there")),
            ("describe", None),
            ("transcript", Some("Can I bring my dog?")),
        ]
    );
    // Inline in the header too, and a null in the data block wins over the header's
    // text as the block's keys do (the reference merges the block on top).
    let bytes = b"{\"type\":\"ping\",\"data\":{\"text\":null}}\n{\"type\":\"transcript\",\"data\":{\"text\":\"x\"},\"data_length\":13}\n{\"text\":null}";
    let got = all(bytes, Payloads::Keep);
    assert_eq!((got[0].0.as_str(), got[0].1.as_deref()), ("ping", None));
    assert_eq!(
        (got[1].0.as_str(), got[1].1.as_deref()),
        ("transcript", None)
    );
}
