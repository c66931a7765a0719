//! primd's answer to `describe`: an `info` event in the schema of the `wyoming`
//! package (`wyoming/info.py`).
//!
//! Which service primd is, told truthfully: not `asr` (it hears no audio), not `intent`
//! (it recognises no intents), but `handle`: Wyoming's "intent handling" service takes
//! a final `transcript` and answers `handled` / `not-handled` with a text for the user,
//! which is how Home Assistant plugs in a conversation agent over Wyoming. primd handles
//! a transcript by retrieving: its answer is one sentence, the best of its index. It
//! streams no response (`supports_handled_streaming: false`) and controls no device
//! (`supports_home_control: false`). The one model is the index being served; its
//! language is English (all-MiniLM-L6-v2).

use serde_json::json;

use super::Options;

/// The program's name in `info` (what Home Assistant shows).
pub const PROGRAM: &str = "primd";

/// The `info` event's data, serialised.
pub fn info_data(opts: &Options) -> Vec<u8> {
    let attribution = json!({"name": "primd", "url": env!("CARGO_PKG_REPOSITORY")});
    let data = json!({
        "asr": [],
        "tts": [],
        "handle": [{
            "name": PROGRAM,
            "attribution": attribution,
            "installed": true,
            "description": "on-device passage retrieval: answers a transcript with the best-matching sentence of its passages",
            "version": env!("CARGO_PKG_VERSION"),
            "models": [{
                "name": opts.index_name,
                "attribution": attribution,
                "installed": true,
                "description": format!("{} passages, {} retrieval", opts.passages, opts.retriever),
                "version": null,
                "languages": ["en"],
            }],
            "supports_handled_streaming": false,
            "supports_home_control": false,
        }],
        "intent": [],
        "wake": [],
        "mic": [],
        "snd": [],
    });
    // Cannot fail: a Value.
    serde_json::to_vec(&data).unwrap_or_default()
}
