//! What the source-reading tests share: the `.rs` files of a folder, and the code of a Rust
//! file with its comments and literals (and, on demand, its `#[cfg(test)]` items) blanked out.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively, in path order.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for path in entries {
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The code with comments, string and character literals blanked out; every line stays where
/// it was (the newlines inside a comment or a string are kept), so positions in it are
/// positions in the file.
pub fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let prev_ident = i > 0 && ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let start = i;
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            push_newlines(&mut out, &c[start..i.min(c.len())]);
        } else if c[i] == 'r'
            && (!prev_ident || (i > 0 && c[i - 1] == 'b' && !(i > 1 && ident(c[i - 2]))))
            && matches!(c.get(i + 1), Some('"' | '#'))
        {
            // raw string r"..", r#".."#, br".."
            let start = i;
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
            push_newlines(&mut out, &c[start..i.min(c.len())]);
        } else if c[i] == '"' {
            let start = i;
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            push_newlines(&mut out, &c[start..i.min(c.len())]);
        } else if c[i] == '\'' {
            // a character literal ('x', '\n', '\u{..}') or a lifetime ('a)
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// `code` (already stripped of comments and literals) with every `#[cfg(test)]` item blanked
/// out, newlines kept: a `mod { .. }` (or any item with a body) to its closing brace,
/// anything else to its `;`, as the compiler drops them
/// outside tests.
pub fn blank_test_items(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let c: Vec<char> = code.chars().collect();
    let mut out: Vec<char> = Vec::with_capacity(c.len());
    let mut i = 0;
    while i < c.len() {
        // the attribute, whitespace inside it allowed
        let mut j = i;
        let mut matched = true;
        for want in ATTR.chars() {
            while j < c.len() && c[j].is_whitespace() && j > i {
                j += 1;
            }
            if c.get(j) != Some(&want) {
                matched = false;
                break;
            }
            j += 1;
        }
        if !matched {
            out.push(c[i]);
            i += 1;
            continue;
        }
        let mut depth = 0usize;
        while j < c.len() {
            match c[j] {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 && c[j] == '}' {
                        j += 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    j += 1;
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        out.extend(
            c[i..j.min(c.len())]
                .iter()
                .map(|ch| if *ch == '\n' { '\n' } else { ' ' }),
        );
        i = j;
    }
    out.into_iter().collect()
}

/// Pushes to `out` as many newlines as `blanked` holds.
fn push_newlines(out: &mut String, blanked: &[char]) {
    out.extend(blanked.iter().filter(|ch| **ch == '\n'));
}
