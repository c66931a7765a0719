//! What a turn's words say about needing the earlier turns: a pronoun or a place word
//! standing for a topic named before ("who designed *it*?", "what is open *there*?"),
//! an elliptic lead ("*and* for children?", "*what about* the population?"), or a turn
//! too short to name a topic at all.
//!
//! Text only, so it can be checked on conversations that have no passages (TREC CAsT's
//! SE/FT/PT labels, `tools/eval/cast_cues.py`); the evidence of the search itself is
//! weighed apart ([`super::decide`]). Allocates nothing.

/// Words that stand for something named earlier. "that" and "this" count only when no
/// noun could follow (end of the turn, or a verb-like word after them): "that team"
/// names its own topic, "when was that built" does not.
const ANAPHORA: [&str; 17] = [
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "there",
    "he",
    "him",
    "his",
    "she",
    "her",
    "hers",
    "these",
    "those",
];

const DEICTIC: [&str; 2] = ["that", "this"];

/// Forms of "be" that make "there" existential ("is there a café?", "there are
/// lockers"), not a place named before ("what is open there?").
const EXISTENTIAL_BE: [&str; 7] = ["is", "are", "was", "were", "be", "been", "isn't"];

/// Words after "that"/"this" that show it is a pronoun, not a determiner.
const AFTER_PRONOUN: [&str; 36] = [
    "is", "was", "are", "were", "be", "been", "has", "have", "had", "do", "does", "did", "can",
    "could", "will", "would", "should", "may", "might", "in", "on", "at", "for", "to", "become",
    "became", "make", "makes", "mean", "means", "work", "works", "affect", "cause", "happen",
    "compare",
];

/// Words that name no topic: question words, auxiliaries, pronouns, determiners,
/// prepositions and the vaguest nouns and adjectives. A turn with at most
/// [`SHORT_CONTENT_WORDS`] other words ("what are the risks?", "how tough is the
/// exam?") names too little to stand alone.
const FUNCTION_WORDS: [&str; 96] = [
    "a", "an", "the", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is",
    "was", "are", "were", "be", "been", "being", "am", "do", "does", "did", "has", "have", "had",
    "can", "could", "will", "would", "should", "shall", "may", "might", "must", "of", "in", "on",
    "at", "for", "to", "from", "with", "by", "about", "as", "into", "than", "and", "or", "but",
    "not", "no", "so", "if", "i", "me", "my", "you", "your", "we", "our", "us", "it", "its",
    "they", "them", "their", "there", "that", "this", "these", "those", "he", "him", "his", "she",
    "her", "some", "any", "many", "much", "more", "most", "other", "else", "all", "one", "ones",
    "kind", "kinds", "type", "types", "thing", "things", "way",
];

/// See [`FUNCTION_WORDS`].
pub const SHORT_CONTENT_WORDS: usize = 2;

/// Leads of an elliptic follow-up.
const ELLIPTIC_LEADS: [&[&str]; 7] = [
    &["and"],
    &["what", "about"],
    &["how", "about"],
    &["also"],
    &["what", "else"],
    &["anything", "else"],
    &["same", "for"],
];

/// Turns of at most this many words name no topic of their own.
pub const SHORT_TURN_WORDS: usize = 3;

/// The cues of one turn's text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cues {
    /// A pronoun or place word standing for an earlier topic.
    pub anaphora: bool,
    /// Starts like a follow-up ("and ...", "what about ...").
    pub elliptic: bool,
    /// Words in the turn.
    pub words: usize,
    /// Words that are not [`FUNCTION_WORDS`].
    pub content: usize,
}

impl Cues {
    /// The words alone say the turn leans on earlier ones.
    pub fn need(&self) -> bool {
        self.strong() || self.weak()
    }

    /// A word stands for an earlier topic, the turn starts like a follow-up, or it is
    /// too short to name anything ("why?"): it leans on earlier turns whatever it is
    /// about.
    pub fn strong(&self) -> bool {
        self.anaphora || self.elliptic || (self.words > 0 && self.words <= SHORT_TURN_WORDS)
    }

    /// Only few content words ("what are the risks?", but also "where are the
    /// toilets?"): it may lean on earlier turns or be a short question of its own.
    /// Counted in [`need`](Self::need) (TREC CAsT's labels, docs/conversations.md), but
    /// not enough for retrieval to take the context ([`super::decide`]).
    pub fn weak(&self) -> bool {
        self.words > 0 && self.content <= SHORT_CONTENT_WORDS
    }
}

/// The words of `text` (letters, digits, apostrophes inside a word); `'s` is cut off
/// ("it's" → "it").
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
        .map(|w| w.strip_suffix("'s").unwrap_or(w))
}

/// "there" next to a form of "be" is existential, not a place.
fn is_be(w: Option<&str>) -> bool {
    w.is_some_and(|w| EXISTENTIAL_BE.iter().any(|b| eq(b, w)))
}

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// The cues of `text` (any case, punctuation ignored).
pub fn cues(text: &str) -> Cues {
    let mut c = Cues::default();
    let mut prev: Option<&str> = None;
    let mut lead = [""; 2];
    let mut before_prev: Option<&str> = None;
    for w in words(text) {
        if c.words < 2 {
            lead[c.words] = w;
        }
        c.words += 1;
        if !FUNCTION_WORDS.iter().any(|f| eq(f, w)) {
            c.content += 1;
        }
        if ANAPHORA.iter().any(|a| eq(a, w)) && !eq(w, "there") {
            c.anaphora = true;
        }
        if prev.is_some_and(|p| eq(p, "there")) && !is_be(before_prev) && !is_be(Some(w)) {
            c.anaphora = true;
        }
        if let Some(p) = prev
            && DEICTIC.iter().any(|d| eq(d, p))
            && AFTER_PRONOUN.iter().any(|a| eq(a, w))
        {
            c.anaphora = true;
        }
        before_prev = prev;
        prev = Some(w);
    }
    if let Some(p) = prev
        && DEICTIC.iter().any(|d| eq(d, p))
    {
        c.anaphora = true; // "... that?", "what about this"
    }
    if prev.is_some_and(|p| eq(p, "there")) && !is_be(before_prev) {
        c.anaphora = true; // "what is open there?"
    }
    c.elliptic = ELLIPTIC_LEADS
        .iter()
        .any(|l| l.iter().zip(lead.iter()).all(|(a, b)| eq(a, b)) && l.len() <= c.words);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pronouns_places_and_ellipsis_lean_on_earlier_turns() {
        for t in [
            "Who designed it?",
            "How much is it for children",
            "what is open there on sundays",
            "When was that built?",
            "and for children?",
            "What about the population?",
            "how old is he",
            "their capital",
            "why?",
            "What are the risks?",
            "How tough is the exam?",
            "How do I get there?",
            "what was built there in 1900",
        ] {
            assert!(cues(t).need(), "{t}");
        }
    }

    #[test]
    fn an_existential_there_is_no_place_named_before() {
        for t in [
            "Is there free Wi-Fi, and what's the password?",
            "Are there lockers for coats",
            "there are how many exits",
        ] {
            assert!(!cues(t).anaphora, "{t}");
        }
        assert!(cues("what is open there on sundays").anaphora);
    }

    #[test]
    fn few_content_words_are_a_weak_cue_pronouns_a_strong_one() {
        let toilets = cues("Where are the toilets?");
        assert!(toilets.weak() && !toilets.strong());
        let designed = cues("Who designed it?");
        assert!(designed.strong());
        let named = cues("When was the Victoria and Albert Museum built?");
        assert!(!named.weak() && !named.strong());
    }

    #[test]
    fn a_question_that_names_its_topic_stands_alone() {
        for t in [
            "When was the Victoria and Albert Museum built?",
            "Which NFL team won Super Bowl 50?",
            "What is the name of that team's stadium in Denver",
            "What was the population of Warsaw in 1939",
        ] {
            assert!(!cues(t).need(), "{t}");
        }
        assert_eq!(cues("").words, 0);
        assert!(!cues("").need());
        assert!(!cues("  ?! ").need());
    }

    #[test]
    fn cues_are_counted_without_regard_to_case_or_punctuation() {
        let c = cues("AND, what about THEM?");
        assert!(c.anaphora && c.elliptic);
        assert_eq!(c.words, 4);
    }
}
