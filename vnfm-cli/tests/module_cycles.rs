//! The modules of `vnfm-cli` import each other without a cycle (issue 11, acceptance 7), and
//! `vnfm-core`'s `error` module sits below every other module of the core.
//!
//! The test reads the sources, not the compiled crate: every `.rs` file under `src/` is a
//! module (`foo/mod.rs` is `foo`, `lib.rs` the crate root), and a module depends on another
//! when its code (comments, strings and `#[cfg(test)]` items left out) names a path into it:
//! `use crate::a::b`, `crate::a::f()`, `super::x`, `self::x`, a group such as
//! `use crate::{a, b::{c, d}}`, or a child module by its bare name (`child::f()`).
//! Declaring a child (`mod child;`) is not a dependency. A path resolves to the longest
//! module that prefixes it. Run with `--nocapture` to see the graph.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`""` for the crate root, `serve::promise`, ...) → its source text.
type Sources = BTreeMap<String, String>;
/// Module → the modules it depends on.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn read_modules(src: &Path) -> Sources {
    fn walk(dir: &Path, src: &Path, out: &mut Sources) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, src, out);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            match parts.last().map(String::as_str) {
                Some("main") if parts.len() == 1 => continue, // the binary is its own crate
                Some("lib" | "mod") => {
                    parts.pop();
                }
                _ => {}
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(parts.join("::"), text);
        }
    }
    let mut out = Sources::new();
    walk(src, src, &mut out);
    out
}

/// The code with comments, string and character literals blanked out.
fn strip(text: &str) -> String {
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
        } else if c[i] == 'r'
            && (!prev_ident || (i > 0 && c[i - 1] == 'b' && !(i > 1 && ident(c[i - 2]))))
            && matches!(c.get(i + 1), Some('"' | '#'))
        {
            // raw string r"..", r#".."#, br".."
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
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
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

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Open(char),
    Close(char),
    Comma,
    Other(char),
}

fn tokens(code: &str) -> Vec<Tok> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
            continue;
        }
        match ch {
            ':' if c.get(i + 1) == Some(&':') => {
                out.push(Tok::PathSep);
                i += 1;
            }
            '{' | '(' | '[' => out.push(Tok::Open(ch)),
            '}' | ')' | ']' => out.push(Tok::Close(ch)),
            ',' => out.push(Tok::Comma),
            c if c.is_whitespace() => {}
            c => out.push(Tok::Other(c)),
        }
        i += 1;
    }
    out
}

/// Drops `#[cfg(test)]` items: a `mod { .. }` to its closing brace, anything else to its `;`.
fn drop_test_items(toks: Vec<Tok>) -> Vec<Tok> {
    let attr = [
        Tok::Other('#'),
        Tok::Open('['),
        Tok::Ident("cfg".into()),
        Tok::Open('('),
        Tok::Ident("test".into()),
        Tok::Close(')'),
        Tok::Close(']'),
    ];
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i..].starts_with(&attr) {
            i += attr.len();
            let mut depth = 0usize;
            while i < toks.len() {
                match &toks[i] {
                    Tok::Open(_) => depth += 1,
                    Tok::Close(_) => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 && toks[i] == Tok::Close('}') {
                            i += 1;
                            break;
                        }
                    }
                    Tok::Other(';') if depth == 0 => {
                        i += 1;
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
            continue;
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

/// Parses the path starting at `toks[i]` (an identifier) with `prefix` before it, expanding
/// groups; pushes every full path to `out` and returns the index after it.
fn parse_path(toks: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i) {
            Some(Tok::Ident(s))
                if s == "self" && !path.is_empty() && prefix.len() == path.len() =>
            {
                // `use a::{self, ..}`: the prefix itself
                i += 1;
            }
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                i += 1;
            }
            _ => break,
        }
        if toks.get(i) != Some(&Tok::PathSep) {
            break;
        }
        i += 1;
        if toks.get(i) == Some(&Tok::Open('{')) {
            i += 1;
            while i < toks.len() && toks[i] != Tok::Close('}') {
                match toks[i] {
                    Tok::Ident(_) => i = parse_path(toks, i, &path, out),
                    _ => i += 1,
                }
            }
            return i + 1;
        }
        if toks.get(i) == Some(&Tok::Other('*')) {
            i += 1;
            break;
        }
    }
    out.push(path);
    i
}

/// Every path the code names, with whether it stands right after `use`.
fn paths(toks: &[Tok]) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let after_sep = i > 0 && toks[i - 1] == Tok::PathSep;
        let visibility =
            i > 1 && toks[i - 1] == Tok::Open('(') && toks[i - 2] == Tok::Ident("pub".into());
        match &toks[i] {
            Tok::Ident(_) if !after_sep && !visibility => {
                let used = i > 0 && toks[i - 1] == Tok::Ident("use".into());
                let mut found = Vec::new();
                i = parse_path(toks, i, &[], &mut found);
                out.extend(found.into_iter().map(|p| (p, used)));
            }
            _ => i += 1,
        }
    }
    out
}

fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_owned())
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_owned()
    } else {
        format!("{a}::{b}")
    }
}

/// The module a path of `module` points into, if any (and not `module` itself).
fn resolve(module: &str, path: &[String], used: bool, modules: &Sources) -> Option<String> {
    let (mut base, rest) = match path.first().map(String::as_str) {
        Some("crate") => (String::new(), &path[1..]),
        Some("self") => (module.to_owned(), &path[1..]),
        Some("super") => {
            let mut base = module.to_owned();
            let mut n = 0;
            while path.get(n).map(String::as_str) == Some("super") {
                base = parent(&base);
                n += 1;
            }
            (base, &path[n..])
        }
        Some(first) => {
            let child = join(module, first);
            // a bare name is a child module only as a path prefix or after `use`
            if !modules.contains_key(&child) || (path.len() < 2 && !used) {
                return None;
            }
            (child, &path[1..])
        }
        None => return None,
    };
    for seg in rest {
        let next = join(&base, seg);
        if !modules.contains_key(&next) {
            break;
        }
        base = next;
    }
    (base != module).then_some(base)
}

fn graph(modules: &Sources) -> Graph {
    let mut g = Graph::new();
    for (module, text) in modules {
        let toks = drop_test_items(tokens(&strip(text)));
        let deps = g.entry(module.clone()).or_default();
        for (path, used) in paths(&toks) {
            if let Some(dep) = resolve(module, &path, used, modules) {
                deps.insert(dep);
            }
        }
    }
    g
}

/// The graph with every module folded into its top-level ancestor (`a::b` → `a`).
fn top_level(g: &Graph) -> Graph {
    let top = |m: &str| m.split("::").next().unwrap_or("").to_owned();
    let mut out = Graph::new();
    for (m, deps) in g {
        let e = out.entry(top(m)).or_default();
        e.extend(deps.iter().map(|d| top(d)).filter(|d| *d != top(m)));
    }
    out
}

/// The strongly connected components with more than one module (Tarjan), each sorted.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            if !t.index.contains_key(w.as_str()) {
                visit(t, w);
                let lw = t.low[w.as_str()];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w.as_str()) {
                let iw = t.index[w.as_str()];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                scc.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

fn show(g: &Graph) -> String {
    g.iter()
        .map(|(m, deps)| {
            let m = if m.is_empty() { "<crate root>" } else { m };
            let deps: Vec<&str> = deps
                .iter()
                .map(|d| if d.is_empty() { "<crate root>" } else { d })
                .collect();
            format!("{m} -> {}\n", deps.join(", "))
        })
        .collect()
}

#[test]
fn cli_modules_have_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&read_modules(&src));
    println!("{}", show(&g));
    let found = cycles(&g);
    assert!(
        found.is_empty(),
        "import cycles between the modules of vnfm-cli: {found:?}\n{}",
        show(&g)
    );
}

#[test]
fn core_error_depends_on_no_other_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vnfm-core/src");
    if !src.is_dir() {
        return; // not in the workspace (a packaged crate)
    }
    let g = top_level(&graph(&read_modules(&src)));
    println!("{}", show(&g));
    let error = g.get("error").cloned().unwrap_or_default();
    assert!(
        error.is_empty(),
        "vnfm-core's error module imports {error:?}"
    );
    // `error` imports nothing, so no cycle runs through it (the old one was
    // error → driver → lcm → error); the cycles left are printed for the record.
    println!("vnfm-core import cycles: {:?}", cycles(&g));
}

#[test]
fn the_parser_sees_what_a_module_names() {
    let modules: Sources = ["", "a", "a::b", "c", "d"]
        .into_iter()
        .map(|m| (m.to_owned(), String::new()))
        .collect();
    let code = r##"
        use crate::{c, a::{self, b::X}};
        // use crate::d;
        const S: &str = "crate::d";
        const R: &str = r#"crate::d"#;
        pub(crate) fn f<'a>(x: &'a str) -> char { b::g(); super::h(); 'x' }
        #[cfg(test)]
        mod tests { use crate::d; }
    "##;
    let toks = drop_test_items(tokens(&strip(code)));
    let deps: BTreeSet<_> = paths(&toks)
        .into_iter()
        .filter_map(|(p, used)| resolve("a", &p, used, &modules))
        .collect();
    let want: BTreeSet<String> = ["c", "a::b", ""].into_iter().map(String::from).collect();
    assert_eq!(deps, want);
    let g: Graph = [
        ("x", vec!["y"]),
        ("y", vec!["z"]),
        ("z", vec!["x"]),
        ("w", vec!["x"]),
    ]
    .into_iter()
    .map(|(m, d)| (m.to_owned(), d.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(cycles(&g), vec![vec!["x", "y", "z"]]);
}
