//! Small serde helpers so JSON dialects read nested arrays without allocating: the
//! first element of an array ([`First`]), the last few ([`Tail`]), and numbers that
//! some servers send as strings ([`Num`]).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};

/// The first element of a JSON array (the rest is skipped); `None` for `[]`.
pub struct First<T>(pub Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

/// The last `N` elements of a JSON array, in order (older ones are dropped).
pub struct Tail<T, const N: usize>(pub heapless::Deque<T, N>);

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Tail<T, N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, const N: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for V<T, N> {
            type Value = Tail<T, N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut q = heapless::Deque::new();
                while let Some(x) = seq.next_element()? {
                    if q.is_full() {
                        q.pop_front();
                    }
                    let _ = q.push_back(x);
                }
                Ok(Tail(q))
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

/// A number, or a string holding one (WhisperLive sends `"start": "1.240"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Num(pub f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Num, E> {
                v.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .map(Num)
                    .ok_or_else(|| E::custom("not a number"))
            }
        }
        d.deserialize_any(V)
    }
}

/// Parses one JSON object from `text` (an array or a scalar is an error: serde would
/// read an array as the struct's fields in order).
pub fn object<'a, T: Deserialize<'a>>(text: &'a str, line: u64) -> Result<T, super::ParseError> {
    if !text.trim_start().starts_with('{') {
        return Err(super::ParseError::Json {
            line,
            reason: "expected an object".into(),
        });
    }
    serde_json::from_str(text).map_err(|e| super::ParseError::Json {
        line,
        reason: e.to_string(),
    })
}
