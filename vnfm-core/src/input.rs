//! Reading inputs the same way everywhere: files read within a bound, a UTF-8 byte order mark
//! accepted at the start of any text, parser messages without a repeated position, and
//! excerpts of a long line cut to a bounded width.
//!
//! Every reader of a YAML, TOML or JSON input (cloud files, packages, candidate and policy
//! files, the CLI's configuration) goes through these, so the rules are one:
//!
//! - a file is read only when it is a regular file (a FIFO, a device such as `/dev/zero` or a
//!   folder is refused, naming what it is), and at most to a maximum that depends on its kind
//!   (the `MAX_*` constants here and in the readers); a larger one is refused, naming the
//!   size and the maximum, before it is parsed;
//! - a leading byte order mark (U+FEFF, `EF BB BF`), which some editors write, is skipped;
//! - an excerpt of the offending line in an error message is at most [`EXCERPT_WIDTH`]
//!   characters, around the column;
//! - YAML and JSON text is parsed only through [`yaml_value`] / [`parse_yaml`] /
//!   [`parse_json`] (or after [`check_nesting`]): flow collections (`[`, `{`) nested deeper than
//!   [`MAX_NESTING`] are refused before the parser runs, naming the source, the line and the
//!   column (serde_yaml takes time quadratic in the depth before its own recursion limit
//!   answers: 40,000 `[` took 9 s, 100,000 over 30 s). Packages, cloud files, Kubernetes
//!   manifests, intent policies and candidate lists, HOT templates and `clouds.yaml` all go
//!   through it.
//!
//! This module and the readers that call it (`package::fs`, `cloud::CloudFile::load`,
//! `intent`'s `load` functions) are the only ones here that read files.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Location};
use crate::Result;

/// The most bytes of a cloud file, a candidate list, a policy or another single-document
/// input file ([`read_text`] refuses a larger one).
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// How deep `[` / `{` may nest in a YAML or JSON document vnfm reads (a VNFD, a HOT template,
/// a policy or a cloud file nests a dozen levels).
pub const MAX_NESTING: usize = 64;

/// The widest excerpt of an input line an error message shows, in characters.
pub const EXCERPT_WIDTH: usize = 120;

/// The byte order mark, as UTF-8.
const BOM: &str = "\u{feff}";

/// `text` without a leading byte order mark.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// `bytes` without a leading UTF-8 byte order mark.
pub fn strip_bom_bytes(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM.as_bytes()).unwrap_or(bytes)
}

/// What kind of file `meta` is, for a message refusing a file that is not a regular one.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_dir() {
        return "a folder";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Reads the file at `path`, at most `max` bytes, as they are (a byte order mark included:
/// see [`read_text`] and [`strip_bom_bytes`]).
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened or read; [`Error::Invalid`] naming the file
/// when it is not a regular file (a folder, a FIFO, a device), or when it is larger than `max`
/// bytes (`what` names the kind of file in that message, e.g. `a cloud file`).
pub fn read_bytes(path: &Path, max: u64, what: &str) -> Result<Vec<u8>> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(Error::invalid(
            Location::file(path),
            format!("is {}; expected {what} (a regular file)", kind_of(&meta)),
        ));
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(Error::invalid(
            Location::file(path),
            format!(
                "is larger than {max} bytes ({}); expected {what} of at most {max} bytes",
                if meta.len() > max {
                    format!("{} bytes", meta.len())
                } else {
                    "it grew while read".to_owned()
                }
            ),
        ));
    }
    Ok(bytes)
}

/// Reads the text file at `path`, at most `max` bytes, as UTF-8: [`read_bytes`], decoded,
/// a leading byte order mark removed.
///
/// # Errors
/// As [`read_bytes`]; also [`Error::Invalid`] naming the file and the byte offset when the
/// text is not UTF-8.
pub fn read_text(path: &Path, max: u64, what: &str) -> Result<String> {
    let mut bytes = read_bytes(path, max, what)?;
    if bytes.starts_with(BOM.as_bytes()) {
        bytes.drain(..BOM.len());
    }
    String::from_utf8(bytes).map_err(|e| {
        Error::invalid(
            Location::file(path),
            format!(
                "is not UTF-8 text (invalid byte at offset {}); expected {what} in UTF-8",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// Where flow collections (`[`, `{`) of `text` nest deeper than [`MAX_NESTING`]: the line and
/// column (1-based) of the first bracket too deep. Linear in the input; quoted scalars and
/// comments are skipped (JSON is YAML here: its strings are double-quoted scalars).
pub fn too_deep(text: &[u8]) -> Option<(usize, usize)> {
    let (mut depth, mut line, mut col) = (0usize, 1usize, 0usize);
    let mut quote: Option<u8> = None;
    let mut comment = false;
    let mut prev = b'\n';
    let mut escaped = false;
    for &b in text {
        col += 1;
        if b == b'\n' {
            line += 1;
            col = 0;
            comment = false;
            prev = b;
            continue;
        }
        if comment {
            continue;
        }
        match quote {
            Some(b'"') if escaped => escaped = false,
            Some(b'"') if b == b'\\' => escaped = true,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => match b {
                b'#' if prev.is_ascii_whitespace() => comment = true,
                // A quote opens a quoted scalar only where a scalar starts (`don't` is plain
                // text: counting from its `'` would hide the brackets after it).
                b'"' | b'\''
                    if matches!(
                        prev,
                        b' ' | b'\t' | b'\n' | b':' | b'[' | b'{' | b',' | b'-'
                    ) =>
                {
                    quote = Some(b);
                }
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Some((line, col));
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = b;
    }
    None
}

/// The error of a document nested too deep at `at` (see [`too_deep`]), at `loc`.
pub fn too_deep_error(loc: Location, at: (usize, usize)) -> Error {
    Error::invalid(
        loc.with_line(at.0),
        format!(
            "`[` / `{{` nested deeper than {MAX_NESTING} levels at line {}, column {}; \
             expected at most {MAX_NESTING}",
            at.0, at.1
        ),
    )
}

/// Refuses `text` when its flow collections nest deeper than [`MAX_NESTING`] (see
/// [`too_deep`]); `source` names it.
///
/// # Errors
/// [`Error::Invalid`] naming `source`, the line and the column of the first bracket too deep.
pub fn check_nesting(source: &str, text: &str) -> Result<()> {
    match too_deep(text.as_bytes()) {
        Some(at) => Err(too_deep_error(Location::file(source), at)),
        None => Ok(()),
    }
}

/// Whether an input file's `text` is read as JSON (its first non-blank character opens an
/// object or an array) rather than YAML: the rule of every reader that takes either.
pub fn is_json(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with('{') || t.starts_with('[')
}

/// Parses `text` (a leading byte order mark skipped) as one YAML document, after
/// [`check_nesting`]; `source` names it in errors.
///
/// # Errors
/// [`Error::Invalid`] naming `source` (and the line, when the parser knows it): nested too
/// deep, or `malformed YAML: ...`.
pub fn yaml_value(source: &str, text: &str) -> Result<serde_yaml::Value> {
    parse_yaml(source, text)
}

/// [`yaml_value`] into any type: the nesting checked first, then serde_yaml.
///
/// # Errors
/// As [`yaml_value`]; a document of the wrong shape is `malformed YAML: ...` too.
pub fn parse_yaml<T: serde::de::DeserializeOwned>(source: &str, text: &str) -> Result<T> {
    let text = strip_bom(text);
    check_nesting(source, text)?;
    serde_yaml::from_str(text).map_err(|e| {
        let mut loc = Location::file(source);
        if let Some(l) = e.location() {
            loc = loc.with_line(l.line());
        }
        Error::invalid(loc, format!("malformed YAML: {e}"))
    })
}

/// Parses `text` (a leading byte order mark skipped) as JSON, after [`check_nesting`];
/// `source` names it in errors.
///
/// # Errors
/// [`Error::Invalid`] naming `source` and the line: nested too deep, or `malformed JSON
/// (column N): ...`.
pub fn parse_json<T: serde::de::DeserializeOwned>(source: &str, text: &str) -> Result<T> {
    let text = strip_bom(text);
    check_nesting(source, text)?;
    serde_json::from_str(text).map_err(|e| {
        Error::invalid(
            Location::file(source).with_line(e.line()),
            format!(
                "malformed JSON (column {}): {}",
                e.column(),
                json_message(&e)
            ),
        )
    })
}

/// A JSON value read from JSON or YAML text with every mapping's keys unique: a key given
/// twice is an error naming it (serde_json's own value keeps the last one silently, and a
/// policy or candidate file whose second `regions:` hides the first is a mistake to say, not to
/// guess at). Deserialised straight from the parser's events: YAML is not first built as a
/// `serde_yaml::Value` and then converted (at 100,000 regions the detour cost a third of the
/// read).
///
/// YAML keys that are scalars become strings (`1:` is the key `"1"`); a sequence or mapping
/// as a key, or a tagged node, is refused by the parser's own message.
#[derive(Debug, Clone, PartialEq)]
pub struct UniqueKeys(pub serde_json::Value);

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(UniqueKeysVisitor).map(UniqueKeys)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value (YAML without tags)")
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> std::result::Result<Self::Value, E> {
        // As serde_json's own value: a number JSON cannot write (NaN, infinity) is null.
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::String(v))
    }

    fn visit_none<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(UniqueKeys(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(serde_json::Value::Array(out))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key `{}`; expected each key once in a mapping",
                    shorten(&key, 64)
                )));
            }
            let UniqueKeys(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(serde_json::Value::Object(out))
    }
}

/// The message of a serde_json error without the position serde_json appends to it (`at line
/// 1 column 5`), for messages that give the position themselves.
pub fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(m) => m.to_owned(),
        None => text,
    }
}

/// At most [`EXCERPT_WIDTH`] characters of `line` around `column` (0-based, in characters),
/// with `...` where it was cut; and the column of `column` in the excerpt.
pub fn excerpt(line: &str, column: usize) -> (String, usize) {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= EXCERPT_WIDTH {
        return (line.to_owned(), column.min(chars.len()));
    }
    let half = EXCERPT_WIDTH / 2;
    let column = column.min(chars.len());
    let start = column.saturating_sub(half).min(chars.len() - EXCERPT_WIDTH);
    let end = start + EXCERPT_WIDTH;
    let mut out = String::new();
    let mut at = column - start;
    if start > 0 {
        out.push_str("...");
        at += 3;
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push_str("...");
    }
    (out, at)
}

/// `text` cut in its middle to at most `max` characters (`...` marking the cut): for a parser
/// message that quotes a long value, keeping what it found and what it expected.
pub fn shorten(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let n = text.chars().count();
    if n <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let keep = max.saturating_sub(3) / 2;
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(n - keep).collect();
    std::borrow::Cow::Owned(format!("{head}...{tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bom_is_skipped() {
        assert_eq!(strip_bom("\u{feff}a: 1"), "a: 1");
        assert_eq!(strip_bom("a: 1"), "a: 1");
        assert_eq!(strip_bom_bytes(b"\xef\xbb\xbf{}"), b"{}");
    }

    #[test]
    fn long_lines_are_cut_around_the_column() {
        assert_eq!(excerpt("short", 2), ("short".to_owned(), 2));
        let line: String = "x".repeat(100_000) + "!" + &"y".repeat(100_000);
        let (e, at) = excerpt(&line, 100_000);
        assert!(e.len() <= EXCERPT_WIDTH + 6, "{}", e.len());
        assert!(e.starts_with("...") && e.ends_with("..."));
        assert_eq!(e.chars().nth(at), Some('!'));
        let (e, at) = excerpt(&line, 0);
        assert!(e.starts_with('x') && e.ends_with("..."));
        assert_eq!(at, 0);
        let (e, at) = excerpt(&line, line.len());
        assert!(e.starts_with("...") && !e.ends_with("..."));
        assert_eq!(at, EXCERPT_WIDTH + 3);
    }

    #[test]
    fn long_messages_are_cut_in_the_middle() {
        assert_eq!(shorten("abc", 10), "abc");
        let long = format!("found `{}`, expected `x`", "v".repeat(1000));
        let s = shorten(&long, 40);
        assert_eq!(s.chars().count(), 39);
        assert!(
            s.starts_with("found `vv") && s.ends_with("expected `x`"),
            "{s}"
        );
    }

    #[test]
    fn keys_given_twice_are_refused_in_json_and_yaml() {
        let e = parse_json::<UniqueKeys>("t.json", "{\"a\": {\"b\": 1, \"b\": 2}}")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("duplicate key `b`") && e.contains("t.json"),
            "{e}"
        );
        let e = parse_yaml::<UniqueKeys>("t.yaml", "a: 1\nc:\n  - {x: 1, x: 2}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("duplicate key `x`") && e.contains("t.yaml"),
            "{e}"
        );
        let UniqueKeys(v) = parse_yaml("t.yaml", "1: [a, ~, 2.5, true]\nn: .nan\n").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"1": ["a", null, 2.5, true], "n": null})
        );
    }

    #[test]
    fn json_messages_lose_their_position_only() {
        let e = serde_json::from_str::<serde_json::Value>("{\"a\": }").unwrap_err();
        assert_eq!(json_message(&e), "expected value");
        let e = serde_json::from_str::<u8>("").unwrap_err();
        assert_eq!(json_message(&e), "EOF while parsing a value");
    }

    #[test]
    fn files_are_read_within_bounds_and_only_when_regular() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.yaml");
        std::fs::write(&p, b"\xef\xbb\xbfa: 1\n").unwrap();
        assert_eq!(read_text(&p, 100, "a file").unwrap(), "a: 1\n");
        let e = read_text(&p, 4, "a cloud file").unwrap_err().to_string();
        assert!(
            e.contains("larger than 4 bytes (8 bytes)") && e.contains("f.yaml"),
            "{e}"
        );
        let e = read_text(dir.path(), 100, "a cloud file")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a folder; expected a cloud file"), "{e}");
        #[cfg(unix)]
        {
            let e = read_text(Path::new("/dev/zero"), 100, "a configuration file")
                .unwrap_err()
                .to_string();
            assert!(e.contains("is a character device"), "{e}");
        }
        std::fs::write(&p, b"a: \xff\n").unwrap();
        let e = read_text(&p, 100, "a cloud file").unwrap_err().to_string();
        assert!(
            e.contains("not UTF-8 text (invalid byte at offset 3)"),
            "{e}"
        );
    }
}
