//! `plain`: each line is the whole current hypothesis; an empty line ends the
//! utterance (its final is the last partial).

use super::{Ctx, Emit, Utterance};

#[derive(Default)]
pub struct Plain {
    pub(super) u: Utterance,
}

impl Plain {
    pub fn parse(&mut self, line: &str, cx: &Ctx, out: &mut Emit) {
        let text = line.trim();
        if text.is_empty() {
            self.u.finish(None, None, cx, out);
        } else {
            self.u.partial(text, None, cx, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{finals, fixture, run};
    use super::super::{DialectKind, EventKind};

    #[test]
    fn lines_are_partials_and_an_empty_line_ends_the_utterance() {
        let (ev, err) = run(DialectKind::Plain, b"what\nwhat time\n\n\nnext\n");
        assert!(err.is_empty());
        assert_eq!(
            ev,
            [
                (EventKind::Partial, "what".into()),
                (EventKind::Partial, "what time".into()),
                (EventKind::Final, "what time".into()),
                (EventKind::Partial, "next".into()),
            ],
            "a second empty line ends nothing"
        );
    }

    #[test]
    fn reads_its_fixture() {
        let (ev, err) = run(DialectKind::Plain, &fixture("plain.txt"));
        assert!(err.is_empty(), "{err:?}");
        assert_eq!(
            finals(&ev),
            [
                "what is the tallest mountain in africa",
                "turn off the kitchen lights"
            ]
        );
    }
}
