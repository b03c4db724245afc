//! Navigating parsed YAML with the file and field path kept for error messages.

use std::path::{Path, PathBuf};

use serde_yaml::Value;

use crate::error::{Error, Location};

/// How deep `[` / `{` may nest in a YAML document vnfm reads: [`crate::input::MAX_NESTING`]
/// (serde_yaml parses a deeply nested document in time quadratic in its depth before it
/// reports its own recursion limit: 100,000 `[` took 28 s).
pub(crate) const MAX_YAML_NESTING: usize = crate::input::MAX_NESTING;

pub(crate) use crate::input::too_deep;

/// The error of a document nested too deep (see [`too_deep`]), at `loc`.
pub(crate) fn too_deep_error(loc: Location, at: (usize, usize)) -> Error {
    Error::invalid(
        loc.with_line(at.0),
        format!(
            "malformed YAML: `[` / `{{` nested deeper than {MAX_YAML_NESTING} levels at line {}, \
             column {}; expected at most {MAX_YAML_NESTING}",
            at.0, at.1
        ),
    )
}

/// Parses `bytes` as YAML (a leading byte order mark skipped); a syntax error names `file`
/// and the line.
pub(crate) fn parse(file: &Path, bytes: &[u8]) -> Result<Value, Error> {
    let bytes = crate::input::strip_bom_bytes(bytes);
    if let Some(at) = too_deep(bytes) {
        return Err(too_deep_error(Location::file(file), at));
    }
    serde_yaml::from_slice::<Value>(bytes).map_err(|e| {
        let mut loc = Location::file(file);
        if let Some(l) = e.location() {
            loc = loc.with_line(l.line());
        }
        Error::invalid(loc, format!("malformed YAML: {e}"))
    })
}

/// A short description of a value for "found ..." in messages.
pub(crate) fn found(v: &Value) -> String {
    match v {
        Value::Null => "nothing (null)".to_owned(),
        Value::Bool(b) => format!("`{b}`"),
        Value::Number(n) => format!("`{n}`"),
        Value::String(s) => {
            let mut t: String = s.chars().take(60).collect();
            if t.len() < s.len() {
                t.push_str("...");
            }
            format!("`{t:?}`")
        }
        Value::Sequence(s) => format!("a list of {} item(s)", s.len()),
        Value::Mapping(m) => format!("a mapping of {} key(s)", m.len()),
        Value::Tagged(t) => format!("a value tagged `{}`", t.tag),
    }
}

/// A value at a field path of a file.
#[derive(Clone, Debug)]
pub(crate) struct At<'a> {
    /// The value.
    pub v: &'a Value,
    /// The file, as shown in errors.
    pub file: &'a Path,
    /// The dotted field path (`topology_template.node_templates.VDU1`).
    pub path: String,
}

impl<'a> At<'a> {
    /// The root of a document.
    pub fn root(v: &'a Value, file: &'a Path) -> Self {
        Self {
            v,
            file,
            path: String::new(),
        }
    }

    fn child_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The location of this value.
    pub fn location(&self) -> Location {
        let loc = Location::file(PathBuf::from(self.file));
        if self.path.is_empty() {
            loc
        } else {
            loc.with_field(self.path.clone())
        }
    }

    /// An error at this value.
    pub fn err(&self, message: impl Into<String>) -> Error {
        Error::invalid(self.location(), message)
    }

    /// An error saying what was expected and what was found here.
    pub fn expected(&self, what: &str) -> Error {
        self.err(format!("expected {what}, found {}", found(self.v)))
    }

    /// The child `key`, when this is a mapping that has it with a non-null value.
    ///
    /// # Errors
    /// When this value is neither a mapping nor null.
    pub fn opt(&self, key: &str) -> Result<Option<At<'a>>, Error> {
        match self.v {
            Value::Null => Ok(None),
            Value::Mapping(m) => Ok(m.get(key).filter(|c| !c.is_null()).map(|c| At {
                v: c,
                file: self.file,
                path: self.child_path(key),
            })),
            _ => Err(self.expected("a mapping")),
        }
    }

    /// The child `key`, which must be present.
    ///
    /// # Errors
    /// When this value is not a mapping or has no (non-null) `key`.
    pub fn req(&self, key: &str) -> Result<At<'a>, Error> {
        match self.opt(key)? {
            Some(c) => Ok(c),
            None => Err(Error::invalid(
                Location::file(PathBuf::from(self.file)).with_field(self.child_path(key)),
                format!("missing required field `{key}`"),
            )),
        }
    }

    /// The entries of a mapping (null is an empty mapping), keys as strings.
    ///
    /// # Errors
    /// When this is not a mapping or a key is not a string.
    pub fn entries(&self) -> Result<Vec<(String, At<'a>)>, Error> {
        match self.v {
            Value::Null => Ok(Vec::new()),
            Value::Mapping(m) => m
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        other => {
                            return Err(self.err(format!(
                                "expected a name as mapping key, found {}",
                                found(other)
                            )))
                        }
                    };
                    let path = self.child_path(&key);
                    Ok((
                        key,
                        At {
                            v,
                            file: self.file,
                            path,
                        },
                    ))
                })
                .collect(),
            _ => Err(self.expected("a mapping")),
        }
    }

    /// The items of a sequence (null is an empty sequence), paths `field[i]`.
    ///
    /// # Errors
    /// When this is not a sequence.
    pub fn items(&self) -> Result<Vec<At<'a>>, Error> {
        match self.v {
            Value::Null => Ok(Vec::new()),
            Value::Sequence(s) => Ok(s
                .iter()
                .enumerate()
                .map(|(i, v)| At {
                    v,
                    file: self.file,
                    path: format!("{}[{i}]", self.path),
                })
                .collect()),
            _ => Err(self.expected("a list")),
        }
    }

    /// A TOSCA "list of single-key maps" (`policies`, `requirements`, `groups` in list form),
    /// also accepted as one mapping: `(name, value)` pairs in document order. The path of each
    /// value is `field[i].name` in list form and `field.name` in mapping form.
    ///
    /// # Errors
    /// When this is neither a mapping nor a list of single-key mappings.
    pub fn named_items(&self) -> Result<Vec<(String, At<'a>)>, Error> {
        match self.v {
            Value::Sequence(_) => {
                let mut out = Vec::new();
                for item in self.items()? {
                    let entries = item.entries()?;
                    if entries.len() != 1 {
                        return Err(item.expected("a mapping with exactly one key (a name)"));
                    }
                    out.extend(entries);
                }
                Ok(out)
            }
            _ => self.entries(),
        }
    }

    /// A string.
    ///
    /// # Errors
    /// When this is not a string.
    pub fn str(&self) -> Result<&'a str, Error> {
        match self.v {
            Value::String(s) => Ok(s),
            _ => Err(self.expected("a string")),
        }
    }

    /// A scalar as text: strings as they are, numbers and booleans as written (YAML reads an
    /// unquoted `1.0` as a number; versions are still text).
    ///
    /// # Errors
    /// When this is not a scalar.
    pub fn text(&self) -> Result<String, Error> {
        match self.v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            _ => Err(self.expected("a string")),
        }
    }

    /// A non-negative integer that fits in `u32`.
    ///
    /// # Errors
    /// When this is not such an integer.
    pub fn u32(&self) -> Result<u32, Error> {
        self.v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| self.expected("a non-negative integer"))
    }

    /// A list of strings.
    ///
    /// # Errors
    /// When this is not a list or an item is not a string.
    pub fn str_list(&self) -> Result<Vec<String>, Error> {
        self.items()?
            .iter()
            .map(|i| i.text())
            .collect::<Result<Vec<_>, _>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(s: &str) -> Value {
        parse(Path::new("f.yaml"), s.as_bytes()).unwrap()
    }

    #[test]
    fn malformed_yaml_names_file_and_line() {
        let e = parse(Path::new("d/x.yaml"), b"a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("d/x.yaml:line "), "{s}");
        assert!(s.contains("malformed YAML"), "{s}");
    }

    #[test]
    fn paths_and_expectations() {
        let v = doc("a:\n  b:\n    - x\n    - 3\n  n: five\n  l: [ {p: 1}, {q: 2} ]\n");
        let root = At::root(&v, Path::new("f.yaml"));
        let a = root.req("a").unwrap();
        assert_eq!(a.req("b").unwrap().str_list().unwrap(), vec!["x", "3"]);
        let e = a.req("n").unwrap().u32().unwrap_err().to_string();
        assert_eq!(
            e,
            "f.yaml: a.n: expected a non-negative integer, found `\"five\"`"
        );
        let e = a.req("missing").unwrap_err().to_string();
        assert_eq!(e, "f.yaml: a.missing: missing required field `missing`");
        let named = a.req("l").unwrap().named_items().unwrap();
        assert_eq!(named[1].0, "q");
        assert_eq!(named[1].1.path, "a.l[1].q");
        let e = a.req("b").unwrap().req("x").unwrap_err().to_string();
        assert!(
            e.contains("a.b: expected a mapping, found a list of 2"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod depth_tests {
    use super::*;

    #[test]
    fn deep_flow_nesting_is_refused_before_parsing_in_linear_time() {
        let deep = "[".repeat(100_000);
        let t = std::time::Instant::now();
        let e = parse(Path::new("pkg/Definitions/vnfd.yaml"), deep.as_bytes()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("pkg/Definitions/vnfd.yaml"), "{msg}");
        assert!(
            msg.contains("nested deeper than 64 levels at line 1, column 65"),
            "{msg}"
        );
        // Not a timing assertion on the code path, only a guard against the quadratic parse
        // coming back: 28 s before, microseconds now.
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn a_deep_cloud_file_is_refused_the_same_way() {
        let deep = format!("zones: {}", "{a: ".repeat(50_000));
        let e = crate::cloud::CloudFile::from_yaml("clouds/deep.yaml", &deep).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("clouds/deep.yaml") && msg.contains("nested deeper than 64"),
            "{msg}"
        );
    }

    #[test]
    fn brackets_in_quotes_and_comments_do_not_count_and_real_documents_pass() {
        let ok = format!(
            "a: \"{}\"\nb: '{}'\n# {}\nc: [[1, 2], {{x: [3]}}]\n",
            "[".repeat(200),
            "{".repeat(200),
            "[".repeat(200)
        );
        assert_eq!(too_deep(ok.as_bytes()), None);
        let nested = format!("x: {}{}\n", "[".repeat(64), "]".repeat(64));
        assert_eq!(too_deep(nested.as_bytes()), None);
        let over = format!("x: {}{}\n", "[".repeat(65), "]".repeat(65));
        assert_eq!(too_deep(over.as_bytes()), Some((1, 68)));
        // An apostrophe inside a plain scalar does not open a quote that hides what follows.
        let hidden = format!("a: don't\nb: {}\n", "[".repeat(65));
        assert_eq!(too_deep(hidden.as_bytes()), Some((2, 68)));
    }
}
