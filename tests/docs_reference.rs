//! `docs/configuration.md` is the reference of every command-line flag and every
//! configuration key. These tests hold it to the code, both ways: each flag a command's
//! `--help` prints (for `build-index`, each `#[arg(long)]` field of its `Args`) and each
//! field of the `[layer1]` section (`Layer1`) must be documented in that command's (or
//! the file's) section, and each flag or key the reference lists must exist. A flag added
//! without its line, or a line left behind by a removed flag, fails here.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path:?}: {e}"))
}

/// The `## ` section of the reference whose heading contains `needle`.
fn section<'a>(doc: &'a str, needle: &str) -> &'a str {
    let mut found = None;
    for part in doc.split("\n## ").skip(1) {
        let heading = part.lines().next().unwrap_or("");
        if heading.contains(needle) {
            assert!(
                found.is_none(),
                "two sections of the reference match {needle:?}"
            );
            found = Some(part);
        }
    }
    found.unwrap_or_else(|| panic!("docs/configuration.md has no section {needle:?}"))
}

fn is_flag_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

/// The long flag at the start of `s` (which begins right after `--`), if any.
fn flag_at(s: &str) -> Option<String> {
    let name: String = s.chars().take_while(|&c| is_flag_char(c)).collect();
    (!name.is_empty() && !name.starts_with('-')).then(|| format!("--{name}"))
}

/// Whether `text` names `flag` in backticks (`` `--flag`` followed by a non-flag character).
fn mentions(text: &str, flag: &str) -> bool {
    let needle = format!("`{flag}");
    text.match_indices(&needle).any(|(i, _)| {
        text[i + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| !is_flag_char(c))
    })
}

/// The flags a section's tables document: the first `--flag` of each row's first cell.
fn table_flags(section: &str) -> BTreeSet<String> {
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `--"))
        .filter_map(flag_at)
        .collect()
}

/// The long flags `primd <command> --help` prints (each option line's first one).
fn help_flags(command: &str) -> BTreeSet<String> {
    let out = common::command(env!("CARGO_BIN_EXE_primd"))
        .args([command, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "primd {command} --help failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let flags: BTreeSet<String> = text
        .lines()
        .map(str::trim_start)
        // An option line starts `-k, --k` or `--index`; a possible value's starts `- `.
        .filter(|l| l.starts_with('-') && !l.starts_with("- "))
        .filter_map(|l| l.find("--").and_then(|i| flag_at(&l[i + 2..])))
        .filter(|f| f != "--help" && f != "--version")
        .collect();
    assert!(
        flags.len() >= 2,
        "no flags parsed from primd {command} --help:\n{text}"
    );
    flags
}

/// The `#[arg(long ...)]` fields of the struct `name` in a Rust source, as flags.
fn derived_flags(source: &str, name: &str) -> BTreeSet<String> {
    let start = source
        .find(&format!("struct {name} {{"))
        .unwrap_or_else(|| panic!("no struct {name}"));
    let body = &source[start..];
    let body = &body[..body.find("\n}").expect("struct end")];
    let mut flags = BTreeSet::new();
    let mut long = false;
    let mut in_attribute = false; // inside an attribute written over several lines
    for line in body.lines().map(str::trim) {
        if in_attribute || line.starts_with("#[") {
            if line.starts_with("#[arg(") || in_attribute {
                long |= line.contains("long");
            }
            in_attribute = !line.ends_with(']');
        } else if !line.starts_with("//") && line.contains(':') {
            let field = line
                .trim_start_matches("pub ")
                .split(':')
                .next()
                .unwrap()
                .trim();
            if long {
                flags.insert(format!("--{}", field.replace('_', "-")));
            }
            long = false;
        }
    }
    flags
}

/// The fields of `struct Layer1`, wherever in `src/` it is defined.
fn layer1_keys() -> BTreeSet<String> {
    fn find(dir: &Path) -> Option<String> {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if let Some(s) = find(&path) {
                    return Some(s);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                if text.contains("pub struct Layer1 {") {
                    return Some(text);
                }
            }
        }
        None
    }
    let source = find(&root().join("src")).expect("no `pub struct Layer1` in src/");
    let body = &source[source.find("pub struct Layer1 {").unwrap()..];
    let body = &body[..body.find("\n}").unwrap()];
    let keys: BTreeSet<String> = body
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter(|l| !l.starts_with("struct"))
        .map(|l| l.split(':').next().unwrap().trim().to_string())
        .collect();
    assert!(keys.len() >= 10, "Layer1 fields not found: {keys:?}");
    keys
}

/// Every flag of `code` is in `documented` (the section's text, or the model flags'),
/// and every flag the section's table lists is in `code`.
fn check_command(doc: &str, heading: &str, code: &BTreeSet<String>, with_model_flags: bool) {
    let own = section(doc, heading);
    let model = section(doc, "Model flags");
    let missing: Vec<_> = code
        .iter()
        .filter(|f| !(mentions(own, f) || (with_model_flags && mentions(model, f))))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md, section {heading:?}, does not document {missing:?}"
    );
    let stale: Vec<_> = table_flags(own)
        .into_iter()
        .filter(|f| !code.contains(f))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/configuration.md, section {heading:?}, lists flags the command does not have: {stale:?}"
    );
}

#[test]
fn every_primd_flag_is_in_the_reference_and_every_listed_flag_exists() {
    let doc = read("docs/configuration.md");
    for (command, with_model_flags) in [
        ("run", true),
        ("search", true),
        ("eval", true),
        ("embed", true),
        ("install-index", false),
        ("bench", false),
    ] {
        let code = help_flags(command);
        check_command(&doc, &format!("`primd {command}`"), &code, with_model_flags);
    }
    // The model flags' own table: exactly the flags of `primd embed`, which has no others.
    check_command(&doc, "Model flags", &help_flags("embed"), false);
}

#[test]
fn every_build_index_flag_is_in_the_reference_and_every_listed_flag_exists() {
    let doc = read("docs/configuration.md");
    let source = read("tools/build-index/src/main.rs");
    let code = derived_flags(&source, "Args");
    assert!(
        code.contains("--input") && code.contains("--chunk-words"),
        "{code:?}"
    );
    assert!(
        source.contains("model: ModelArgs"),
        "build-index no longer takes the shared model flags: update this test and the reference"
    );
    check_command(&doc, "`build-index`", &code, true);
    // The shared model flags, read from their definition, are all in the reference.
    let model_code = derived_flags(&read("src/flags.rs"), "ModelArgs");
    let model_doc = table_flags(section(&doc, "Model flags"));
    assert_eq!(model_code, model_doc, "model flags: code against reference");
}

#[test]
fn every_config_key_is_in_the_reference_and_every_listed_key_exists() {
    let doc = read("docs/configuration.md");
    let file = section(&doc, "Configuration file");
    let listed: BTreeSet<String> = file
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|k| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .map(str::to_string)
        .collect();
    let keys = layer1_keys();
    let missing: Vec<_> = keys.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&keys).collect();
    assert!(
        missing.is_empty(),
        "config keys not in the reference: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "keys in the reference that Layer1 lacks: {stale:?}"
    );
    // The example file names every key (set, or commented out with its default).
    for key in &keys {
        assert!(
            file.lines().any(|l| {
                let l = l.trim_start_matches(['#', ' ']);
                l.starts_with(key.as_str()) && l[key.len()..].trim_start().starts_with('=')
            }),
            "the example [layer1] file lacks {key}"
        );
    }
}
