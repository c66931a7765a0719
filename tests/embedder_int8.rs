//! The int8 embedder (`--int8`, `models/model-int8.onnx`) against sentence-transformers,
//! against the fp32 embedder, and its errors.

mod common;

use std::fs;

use primd::embed::{
    DIM, Embed, EmbedError, Embedder, EmbedderOptions, MODEL_INT8_FILE, Precision, cosine,
    precision_of,
};

fn int8() -> EmbedderOptions {
    EmbedderOptions {
        precision: Precision::Int8,
        ..Default::default()
    }
}

fn load() -> Embedder {
    Embedder::load(&common::model_dir(), &int8()).unwrap()
}

#[test]
fn int8_matches_sentence_transformers_on_reference_sentences() {
    let refs = common::references();
    assert!(refs.len() >= 50);
    let mut e = load();
    assert_eq!(e.precision(), Precision::Int8);
    let mut v = [0.0; DIM];
    let mut cosines = Vec::new();
    for r in &refs {
        let tokens = e.embed_into(&r.text, &mut v).unwrap();
        assert_eq!(tokens, r.tokens, "token count differs for {:?}", r.text);
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
        cosines.push((cosine(&v, &r.embedding), &r.text));
    }
    let mean = cosines.iter().map(|c| c.0).sum::<f32>() / cosines.len() as f32;
    let (min, worst) = cosines.iter().fold((f32::MAX, &refs[0].text), |a, c| {
        if c.0 < a.0 { (c.0, c.1) } else { a }
    });
    eprintln!("int8 vs sentence-transformers: mean cosine {mean:.5}, min {min:.5}");
    // The acceptance bar of the int8 issue.
    assert!(mean >= 0.99, "mean cosine {mean}");
    assert!(min >= 0.98, "min cosine {min} for {worst:?}");
}

#[test]
fn int8_is_a_different_model_for_indexes_and_forks_agree() {
    let mut q = load();
    let fp32 = EmbedderOptions {
        precision: Precision::Fp32,
        threads: 1,
    };
    let f = Embedder::load(&common::model_dir(), &fp32).unwrap();
    // An index built with one must be refused by the other: fingerprints differ, and
    // each names its own model file, which is how a command follows an index.
    assert_ne!(q.fingerprint(), f.fingerprint());
    let dir = common::model_dir();
    assert_eq!(precision_of(&dir, &q.fingerprint()), Some(Precision::Int8));
    assert_eq!(precision_of(&dir, &f.fingerprint()), Some(Precision::Fp32));
    let mut foreign = f.fingerprint();
    foreign[20] ^= 1; // same model, another tokenizer
    assert_eq!(precision_of(&dir, &foreign), None);
    assert_eq!(precision_of(&dir.join("missing"), &f.fingerprint()), None);
    let mut fork = q.fork().unwrap();
    assert_eq!(fork.fingerprint(), q.fingerprint());
    let (mut a, mut b) = ([0.0; DIM], [0.0; DIM]);
    for t in ["", "turn off the kitchen lights", &"word ".repeat(400)] {
        q.embed_into(t, &mut a).unwrap();
        fork.embed_into(t, &mut b).unwrap();
        assert_eq!(
            a, b,
            "same model, same arithmetic: identical vectors for {t:?}"
        );
    }
}

#[test]
fn missing_or_corrupt_int8_model_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let src = common::model_dir();
    fs::copy(
        src.join("tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    // The fp32 model alone does not satisfy --int8.
    fs::copy(src.join("model.onnx"), dir.path().join("model.onnx")).unwrap();
    let err = |dir: &std::path::Path| match Embedder::load(dir, &int8()) {
        Ok(_) => panic!("loading {dir:?} with --int8 should fail"),
        Err(e) => e,
    };
    let e = err(dir.path());
    assert!(matches!(e, EmbedError::MissingFile { .. }), "{e:?}");
    assert!(e.to_string().contains(MODEL_INT8_FILE), "{e}");
    assert!(e.to_string().contains("models/fetch"), "{e}");

    let full = fs::read(src.join(MODEL_INT8_FILE)).unwrap();
    fs::write(dir.path().join(MODEL_INT8_FILE), &full[..full.len() / 2]).unwrap();
    let e = err(dir.path());
    assert!(matches!(e, EmbedError::Model { .. }), "{e:?}");
    assert!(e.to_string().contains(MODEL_INT8_FILE), "{e}");
}
