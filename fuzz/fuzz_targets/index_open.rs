//! `Index::open` on arbitrary bytes, then every accessor of what it accepted, and lexical
//! searches when it has a lexical section: no file may make the reader panic or read out
//! of bounds (the index module's promise).
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use primd_fuzz::index::Index;
use primd_fuzz::lexical::LexicalSearcher;
use primd_fuzz::search::Hits;

fuzz_target!(|data: &[u8]| {
    // Index::open maps a file: write one per process, in memory when /dev/shm exists.
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let path = dir.join(format!("primd-fuzz-{}.idx", std::process::id()));
    {
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(data).unwrap();
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
});
