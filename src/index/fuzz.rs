//! The body of the `index_open` fuzz target (`fuzz/`), here so that its saved corpus and
//! crash regressions also run as ordinary tests (`tests/fuzz_corpus.rs`): the fuzzer
//! and the tests drive the same function. The fuzz crate compiles this module with the
//! rest of `src/index` and `src/lexical` by path (`fuzz/src/lib.rs`).

use std::io::Write;

use crate::hits::Hits;
use crate::lexical::LexicalSearcher;

use super::Index;

/// `Index::open` on arbitrary bytes, then every accessor of what it accepted, and
/// lexical searches when it has a lexical section: no file may make the reader panic or
/// read out of bounds (the index module's promise). Panics when one does.
pub fn open_bytes(data: &[u8]) {
    // Index::open maps a file: one per process and thread, in memory when /dev/shm exists.
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let thread = format!("{:?}", std::thread::current().id());
    let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
    let path = dir.join(format!("primd-fuzz-{}-{thread}.idx", std::process::id()));
    {
        let mut f = std::fs::File::create(&path).expect("creating the fuzz index file");
        f.write_all(data).expect("writing the fuzz index file");
    }
    if let Ok(index) = Index::open(&path) {
        let _ = index.verify();
        let _ = index.check_fingerprint(&index.meta().fingerprint);
        let codes = index.codes();
        assert_eq!(codes.len(), index.len() * index.code_bytes());
        for i in 0..index.len().min(4096) {
            assert_eq!(index.vector(i).len(), index.dim());
            let _ = index.scale(i);
            if let Ok(p) = index.passage(i) {
                let _ = (p.id.len(), p.title.len(), p.text.len());
            }
        }
        if let Some(lex) = index.lexical() {
            let mut searcher = LexicalSearcher::new();
            let mut hits = Hits::new();
            for query in ["the capital of france", "set a timer", "模型 während"] {
                searcher.search(&lex, query, "kitchen", 0.5, 10, &mut hits);
                assert!(hits.iter().all(|h| (h.index as usize) < index.len()));
                searcher.search_exhaustive(&lex, query, "", 0.0, 100, &mut hits);
                assert!(hits.iter().all(|h| (h.index as usize) < index.len()));
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}
