//! The stream's own revisions: words that earlier partials of an utterance had and the
//! newest hypothesis has dropped.
//!
//! A recognizer often has a name right in an early partial and wrong in the final (or
//! the reverse). Those dropped words go to the lexical query as `extra` terms, down-
//! weighted (`revision_weight`), so a passage matching either spelling still scores.
//! The memory is bounded ([`MAX_WORDS`] distinct words, [`MAX_BYTES`] bytes, the first
//! ones of the utterance win): its buffers never grow after they are made.

/// Distinct words remembered per utterance.
pub const MAX_WORDS: usize = 64;
/// Bytes of remembered words (separators included).
pub const MAX_BYTES: usize = 1024;

/// Words of an utterance's partials, and a scratch buffer for the ones a text lacks.
#[derive(Clone, Debug)]
pub struct Revisions {
    /// Distinct words seen, single-space separated.
    seen: String,
    words: usize,
    /// Scratch: the words of `seen` a given text does not contain.
    dropped: String,
}

impl Default for Revisions {
    fn default() -> Self {
        Self::new()
    }
}

impl Revisions {
    pub fn new() -> Self {
        Revisions {
            seen: String::with_capacity(MAX_BYTES),
            words: 0,
            dropped: String::with_capacity(MAX_BYTES),
        }
    }

    /// Remembers the words of a normalised `text` not seen yet, while there is room.
    pub fn remember(&mut self, text: &str) {
        for w in text.split(' ').filter(|w| !w.is_empty()) {
            if self.words >= MAX_WORDS {
                return;
            }
            let sep = usize::from(!self.seen.is_empty());
            if self.seen.len() + sep + w.len() > MAX_BYTES || self.seen.split(' ').any(|s| s == w) {
                continue;
            }
            if sep == 1 {
                self.seen.push(' ');
            }
            self.seen.push_str(w);
            self.words += 1;
        }
    }

    /// The remembered words a normalised `text` does not contain, space-separated.
    pub fn dropped_from(&mut self, text: &str) -> &str {
        self.dropped.clear();
        for w in self.seen.split(' ').filter(|w| !w.is_empty()) {
            if !text.split(' ').any(|t| t == w) {
                if !self.dropped.is_empty() {
                    self.dropped.push(' ');
                }
                self.dropped.push_str(w);
            }
        }
        &self.dropped
    }

    /// Forgets the utterance (keeps the buffers).
    pub fn clear(&mut self) {
        self.seen.clear();
        self.dropped.clear();
        self.words = 0;
    }

    /// Words remembered.
    pub fn len(&self) -> usize {
        self.words
    }

    pub fn is_empty(&self) -> bool {
        self.words == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_only_earlier_partials_had() {
        let mut r = Revisions::new();
        r.remember("who was the duke of schwazel");
        r.remember("who was the duc de choiseul");
        assert_eq!(r.len(), 9);
        assert_eq!(
            r.dropped_from("who was the duc de choiseul"),
            "duke of schwazel"
        );
        assert_eq!(
            r.dropped_from("who was the duke of schwazel"),
            "duc de choiseul"
        );
        assert_eq!(
            r.dropped_from(""),
            "who was the duke of schwazel duc de choiseul"
        );
        r.clear();
        assert!(r.is_empty());
        assert_eq!(r.dropped_from("anything"), "");
    }

    #[test]
    fn memory_is_bounded_and_never_grows() {
        let mut r = Revisions::new();
        let (cap_seen, cap_dropped) = (r.seen.capacity(), r.dropped.capacity());
        for i in 0..1000 {
            r.remember(&format!("word{i} another{i}"));
            let _ = r.dropped_from("nothing in common");
        }
        assert_eq!(r.len(), MAX_WORDS);
        assert!(r.seen.len() <= MAX_BYTES);
        assert_eq!(
            (r.seen.capacity(), r.dropped.capacity()),
            (cap_seen, cap_dropped)
        );
        // One overlong word does not fit, and does not stop shorter ones.
        let mut r = Revisions::new();
        r.remember(&"x".repeat(MAX_BYTES + 1));
        r.remember("short");
        assert_eq!(r.dropped_from(""), "short");
    }
}
