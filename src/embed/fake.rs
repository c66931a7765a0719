//! A deterministic embedder for tests: no model files, same text → same vector.
//!
//! Each lower-cased word maps to a pseudo-random ±1 vector seeded by its FNV-1a hash;
//! a text's embedding is the normalised sum of its words' vectors. Texts that share
//! words therefore have high cosine, which is enough to exercise triggers, the
//! similarity gate, candidate reranking and reflector decisions with known outcomes.

use super::{Embed, EmbedError, Embedding, Fingerprint, l2_normalize};

#[derive(Clone, Debug, Default)]
pub struct HashEmbedder;

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

impl Embed for HashEmbedder {
    fn embed_into(&mut self, text: &str, out: &mut Embedding) -> Result<usize, EmbedError> {
        out.fill(0.0);
        let mut n = 0;
        for w in words(text) {
            n += 1;
            let mut state = fnv1a(w.to_lowercase().as_bytes()) | 1;
            for o in out.iter_mut() {
                // xorshift64: cheap, deterministic, good enough spread for a test fake.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *o += if state & 1 == 0 { 1.0 } else { -1.0 };
            }
        }
        if n == 0 {
            out[0] = 1.0; // a fixed unit vector for text with no words
        }
        l2_normalize(out);
        Ok(n + 2) // as if [CLS] and [SEP] were added
    }

    fn count_tokens(&mut self, text: &str) -> Result<usize, EmbedError> {
        Ok(words(text).count() + 2)
    }

    fn fingerprint(&self) -> Fingerprint {
        let mut f = [0u8; 32];
        f[..22].copy_from_slice(b"primd-hash-embedder-v1");
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::{DIM, cosine};

    #[test]
    fn same_text_same_vector_and_shared_words_raise_cosine() {
        let mut e = HashEmbedder;
        let (mut a, mut b, mut c) = ([0.0; DIM], [0.0; DIM], [0.0; DIM]);
        e.embed_into("set a timer for ten minutes", &mut a).unwrap();
        e.embed_into("Set a timer for ten", &mut b).unwrap();
        e.embed_into("what is the capital of peru", &mut c).unwrap();
        let mut a2 = [0.0; DIM];
        e.embed_into("set a timer for ten minutes", &mut a2)
            .unwrap();
        assert_eq!(a, a2);
        assert!(cosine(&a, &b) > 0.8, "{}", cosine(&a, &b));
        assert!(cosine(&a, &c) < 0.5, "{}", cosine(&a, &c));
        assert!((a.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
    }
}
