//! Text built from input for terminals and logs, with its control characters escaped.
//!
//! Names, labels, fingerprints and messages come from requests, files and the VIM, and may hold
//! any character: an `ESC [31m` would recolour or rewrite the terminal, a NUL or a carriage
//! return hide what precedes it, a newline forge a whole log line, a bidi override reorder what
//! is shown. Every human-readable output and every log line goes through [`escape`] (a value
//! inside a line) or [`escape_text`] (text whose own line breaks are kept): the characters
//! below are shown as Rust's `escape_debug` shows them (`\u{1b}`, `\0`, `\n`, `\r`, `\t`,
//! `\u{202e}`), everything else as is. JSON output is not escaped here: serde escapes what JSON
//! needs and keeps the values exact.
//!
//! Escaped: the C0 controls (U+0000 to U+001F), DEL (U+007F), the C1 controls (U+0080 to
//! U+009F), the bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A to U+202E,
//! U+2066 to U+2069) and the line and paragraph separators (U+2028, U+2029).

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` is shown escaped (see the module docs).
pub(crate) fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

fn escape_where(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let unsafe_here = |c: char| is_unsafe(c) && !keep(c);
    if !s.chars().any(unsafe_here) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_here(c) {
            let _ = write!(out, "{}", c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` with every control character escaped, line breaks included: a value shown inside a
/// line, or a log line that must stay one line.
pub(crate) fn escape(s: &str) -> Cow<'_, str> {
    escape_where(s, |_| false)
}

/// `s` with every control character escaped but its line feeds and tabs: multi-line text (a
/// command's human output, an error and its causes), whose values were escaped with
/// [`escape`] where a line break in them would matter.
pub(crate) fn escape_text(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c == '\n' || c == '\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_escaped_and_the_rest_untouched() {
        assert!(matches!(escape("VDU1-0 ünïcode ✓"), Cow::Borrowed(_)));
        assert_eq!(escape("a\u{1b}[31mred\0"), "a\\u{1b}[31mred\\0");
        assert_eq!(escape("one\ntwo\r"), "one\\ntwo\\r");
        assert_eq!(escape("\u{7f}\u{85}\u{9b}"), "\\u{7f}\\u{85}\\u{9b}");
        assert_eq!(escape("x\u{202e}y\u{2066}"), "x\\u{202e}y\\u{2066}");
        assert_eq!(escape("\u{2028}"), "\\u{2028}");
        // A backslash is text, not an escape.
        assert_eq!(escape("a\\b"), "a\\b");
    }

    #[test]
    fn text_keeps_its_line_breaks() {
        assert_eq!(escape_text("a\tb\nc\u{1b}\r\n"), "a\tb\nc\\u{1b}\\r\n");
    }
}
