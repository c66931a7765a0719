//! The real embedder against sentence-transformers, and its behaviour on bad input.

mod common;

use std::fs;

use primd::embed::{
    DIM, Embed, EmbedError, Embedder, EmbedderOptions, MAX_TOKENS, Precision, cosine,
};

/// The fp32 model (int8 has its own tests in embedder_int8.rs).
fn fp32() -> EmbedderOptions {
    EmbedderOptions {
        precision: Precision::Fp32,
        threads: 1,
    }
}

fn load() -> Embedder {
    Embedder::load(&common::model_dir(), &fp32()).unwrap()
}

#[test]
fn matches_sentence_transformers_on_reference_sentences() {
    let refs = common::references();
    assert!(
        refs.len() >= 50,
        "the issue asks for at least 50 reference texts"
    );
    let mut e = load();
    let mut v = [0.0; DIM];
    let mut cosines = Vec::new();
    for r in &refs {
        let tokens = e.embed_into(&r.text, &mut v).unwrap();
        assert_eq!(tokens, r.tokens, "token count differs for {:?}", r.text);
        cosines.push((cosine(&v, &r.embedding), &r.text));
    }
    let mean = cosines.iter().map(|c| c.0).sum::<f32>() / cosines.len() as f32;
    let (min, worst) = cosines.iter().fold((f32::MAX, &refs[0].text), |a, c| {
        if c.0 < a.0 { (c.0, c.1) } else { a }
    });
    assert!(mean >= 0.995, "mean cosine {mean}");
    assert!(min >= 0.99, "min cosine {min} for {worst:?}");
}

#[test]
fn empty_and_very_long_texts_embed_to_unit_vectors() {
    let mut e = load();
    let mut v = [0.0; DIM];
    assert_eq!(e.embed_into("", &mut v).unwrap(), 2, "[CLS] [SEP] only");
    assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
    let long = "word ".repeat(10_000);
    assert_eq!(
        e.embed_into(&long, &mut v).unwrap(),
        MAX_TOKENS,
        "truncated like sentence-transformers"
    );
    assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
    assert_eq!(e.count_tokens(&long).unwrap(), MAX_TOKENS);
}

#[test]
fn forks_threads_and_batches_give_the_same_vectors() {
    let mut a = load();
    let mut b = a.fork().unwrap();
    let opts = EmbedderOptions {
        threads: 2,
        ..fp32()
    };
    let mut c = Embedder::load(&common::model_dir(), &opts).unwrap();
    let texts = [
        "where is the nearest pharmacy",
        "turn off the kitchen lights",
    ];
    let mut batch = [[0.0; DIM]; 2];
    let counts = a.embed_batch(&texts, &mut batch).unwrap();
    for (i, t) in texts.iter().enumerate() {
        let (mut vb, mut vc) = ([0.0; DIM], [0.0; DIM]);
        assert_eq!(b.embed_into(t, &mut vb).unwrap(), counts[i]);
        c.embed_into(t, &mut vc).unwrap();
        assert!(cosine(&batch[i], &vb) > 0.99999);
        assert!(cosine(&batch[i], &vc) > 0.99999);
    }
}

fn temp_model_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = common::model_dir();
    fs::copy(
        src.join("tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    dir
}

fn load_err(dir: &std::path::Path, precision: Precision) -> EmbedError {
    let opts = EmbedderOptions {
        precision,
        ..Default::default()
    };
    match Embedder::load(dir, &opts) {
        Ok(_) => panic!("loading {dir:?} should fail"),
        Err(e) => e,
    }
}

#[test]
fn missing_directory_or_file_is_named_in_the_error() {
    let dir = temp_model_dir();
    let gone = dir.path().join("nope");
    let msg = load_err(&gone, Precision::Fp32).to_string();
    assert!(
        msg.contains("nope") && msg.contains("models/fetch"),
        "{msg}"
    );

    let msg = load_err(dir.path(), Precision::Fp32).to_string();
    assert!(
        msg.contains("model.onnx") && msg.contains("missing"),
        "{msg}"
    );
}

#[test]
fn corrupt_onnx_is_a_clear_error() {
    let dir = temp_model_dir();
    fs::write(
        dir.path().join("model.onnx"),
        b"this is not a protobuf at all \xff\xfe",
    )
    .unwrap();
    let e = load_err(dir.path(), Precision::Fp32);
    assert!(matches!(e, EmbedError::Model { .. }), "{e:?}");
    assert!(e.to_string().contains("model.onnx"), "{e}");

    // A truncated copy of the real model: the shape of a failed download.
    let full = fs::read(common::model_dir().join("model.onnx")).unwrap();
    fs::write(dir.path().join("model.onnx"), &full[..full.len() / 3]).unwrap();
    let e = load_err(dir.path(), Precision::Fp32);
    assert!(matches!(e, EmbedError::Model { .. }), "{e:?}");
}

#[test]
fn a_tokenizer_from_another_model_is_refused() {
    let dir = temp_model_dir();
    fs::copy(
        common::model_dir().join("model.onnx"),
        dir.path().join("model.onnx"),
    )
    .unwrap();
    // Same format, smaller vocabulary: what a tokenizer of another BERT looks like.
    let tok = dir.path().join("tokenizer.json");
    let mut json: serde_json::Value = serde_json::from_slice(&fs::read(&tok).unwrap()).unwrap();
    let vocab = json["model"]["vocab"].as_object_mut().unwrap();
    vocab.retain(|_, id| id.as_u64().unwrap() < 20_000);
    fs::write(&tok, serde_json::to_vec(&json).unwrap()).unwrap();
    let e = load_err(dir.path(), Precision::Fp32);
    assert!(matches!(e, EmbedError::Mismatch { .. }), "{e:?}");
    assert!(
        e.to_string().contains("20000") && e.to_string().contains("30522"),
        "{e}"
    );

    fs::write(&tok, b"{ not json").unwrap();
    let e = load_err(dir.path(), Precision::Fp32);
    assert!(matches!(e, EmbedError::Tokenizer { .. }), "{e:?}");
    assert!(e.to_string().contains("tokenizer.json"), "{e}");
}
