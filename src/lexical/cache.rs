//! A small direct-mapped cache of term-dictionary lookups (term bytes → ordinal, or "not
//! in the corpus"), one per [`LexicalSearcher`](super::LexicalSearcher).
//!
//! Why: walking the fst costs about 150 ns a term, an eighth of a char-4-gram query over
//! a kiosk-sized corpus (38 lookups for ~18k postings). The lexical query runs on every
//! partial, and a partial repeats nearly all of the previous one's n-grams; questions
//! also share their common ones ("_wha", "the_", "tion"). A hit costs a hash and a
//! 16-byte compare.
//!
//! Entries are only valid for the dictionary they were read from. The cache remembers
//! which one ([`DictId`]: where its bytes are, how many, and the CRC32C the fst stores
//! over them) and empties itself when asked about another, so an index swapped under a
//! running daemon never gets the old index's ordinals. A term longer than [`KEY`] bytes
//! (an n-gram of four- or five-byte characters) goes to the fst every time.

use super::read::{DictId, Lexical};

/// Slots: 24 KiB, a few queries' distinct terms with room to spare.
const SLOTS: usize = 1024;
/// Longest term the cache keeps (a char-4-gram of ASCII or 2-3-byte characters fits).
const KEY: usize = 16;
/// The ordinal stored for "not in the dictionary".
const ABSENT: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Term length; 0 marks an empty slot (the analyzer never yields an empty term, and
    /// one is never cached).
    len: u8,
    key: [u8; KEY],
    ord: u32,
}

const EMPTY: Slot = Slot {
    len: 0,
    key: [0; KEY],
    ord: ABSENT,
};

#[derive(Debug, Default)]
pub(crate) struct TermCache {
    dict: Option<DictId>,
    slots: Vec<Slot>,
}

impl TermCache {
    /// `lex.lookup(term)`, remembered.
    #[inline]
    pub fn lookup(&mut self, lex: &Lexical<'_>, term: &[u8]) -> Option<u32> {
        if term.is_empty() || term.len() > KEY {
            return lex.lookup(term);
        }
        let dict = lex.dict_id();
        if self.dict != Some(dict) {
            self.slots.clear();
            self.slots.resize(SLOTS, EMPTY);
            self.dict = Some(dict);
        }
        let mut key = [0u8; KEY];
        key[..term.len()].copy_from_slice(term);
        let slot = &mut self.slots[slot_of(&key, term.len())];
        if usize::from(slot.len) != term.len() || slot.key != key {
            let ord = lex.lookup(term).filter(|&o| o != ABSENT);
            *slot = Slot {
                len: term.len() as u8,
                key,
                ord: ord.unwrap_or(ABSENT),
            };
        }
        (slot.ord != ABSENT).then_some(slot.ord)
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.capacity()
    }
}

/// The slot of a zero-padded key (a multiplicative hash of its two halves and length).
#[inline]
fn slot_of(key: &[u8; KEY], len: usize) -> usize {
    let (a, b) = key.split_at(8);
    let a = u64::from_le_bytes(a.try_into().expect("8 bytes"));
    let b = u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let h = (a ^ b.rotate_left(29) ^ len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}
