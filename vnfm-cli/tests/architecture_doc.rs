//! `docs/architecture.md` matches the modules (issue 25, acceptance 5).
//!
//! The test reads the page and collects every module it names:
//! - file paths `vnfm-<crate>/src/....rs` and folder paths `vnfm-<crate>/src/.../`, each of which
//!   must exist in the workspace;
//! - Rust paths `vnfm_{core,cli,openstack,k8s}::a::b::...`: the segments up to the first one
//!   that is not snake_case (a type, a trait, a constant) are the candidate module path; its
//!   longest prefix that is a module (`src/a/b.rs` or `src/a/b/mod.rs`, the crate root for the
//!   empty prefix) is the module, and what is left must be at most one name: one the module's
//!   file mentions outside comments (a function, a constant) when it ends the path, an inline
//!   `mod` of that file when more follows. So `vnfm_core::lifecycle::Operation` checks
//!   `vnfm-core/src/lifecycle/mod.rs`, `vnfm_core::reservation::lcm::settle` checks
//!   `vnfm-core/src/reservation/lcm.rs` and that it names `settle`, and
//!   `vnfm_core::lifecycle::made_up::Thing` is reported.
//!
//! It also asserts that every top-level module of `vnfm-core` (each `pub mod` of
//! `vnfm-core/src/lib.rs`) is named on the page at least once, by its file, its folder or its
//! Rust path: a new module cannot be added without a line in the map.
//!
//! A failure lists every missing module at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The page, from the workspace root.
const DOC: &str = "docs/architecture.md";

/// The crates a Rust path may start with, and their folders.
const CRATES: &[(&str, &str)] = &[
    ("vnfm_core", "vnfm-core"),
    ("vnfm_cli", "vnfm-cli"),
    ("vnfm_openstack", "vnfm-openstack"),
    ("vnfm_k8s", "vnfm-k8s"),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("vnfm-cli sits in the workspace")
        .to_path_buf()
}

/// A module the page names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Named {
    /// A file path (`vnfm-core/src/lifecycle/run.rs`).
    File(String),
    /// A folder path (`vnfm-core/src/alert/`).
    Folder(String),
    /// A Rust path (`vnfm_core::lifecycle::Operation`), as written.
    Rust(String),
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `text[..at]` ends inside a word (so a match at `at` is part of a longer name).
fn in_word(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .next_back()
        .is_some_and(|c| is_ident(c) || c == '-')
}

/// The characters that end a path in prose, tables, code spans and diagrams.
fn ends_path(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            ')' | '`' | '(' | ',' | ';' | '|' | '"' | '\'' | '<' | '>' | '[' | ']' | '*'
        )
}

/// Every file and folder path `vnfm-<crate>/src/...` of `text`.
fn file_paths(text: &str, out: &mut BTreeSet<Named>) {
    for (at, _) in text.match_indices("vnfm-") {
        if in_word(text, at) {
            continue;
        }
        let rest = &text[at..];
        let krate_len = rest["vnfm-".len()..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
            .unwrap_or(rest.len() - "vnfm-".len());
        if krate_len == 0 {
            continue;
        }
        let after_crate = "vnfm-".len() + krate_len;
        if !rest[after_crate..].starts_with("/src/") {
            continue;
        }
        let end = rest.find(ends_path).unwrap_or(rest.len());
        let token = &rest[..end];
        if let Some(n) = token.rfind(".rs") {
            out.insert(Named::File(token[..n + ".rs".len()].to_owned()));
        } else if let Some(n) = token.rfind('/') {
            out.insert(Named::Folder(token[..=n].to_owned()));
        }
    }
}

/// Every Rust path `vnfm_<crate>::...` of `text`, as written (without a trailing `::`).
fn rust_paths(text: &str, out: &mut BTreeSet<Named>) {
    for (krate, _) in CRATES {
        for (at, _) in text.match_indices(krate) {
            if in_word(text, at) {
                continue;
            }
            let rest = &text[at..];
            let mut end = krate.len();
            if rest[end..].chars().next().is_some_and(is_ident) {
                continue; // a longer name (`vnfm_core_x`)
            }
            while rest[end..].starts_with("::") {
                let seg = &rest[end + 2..];
                let n = seg.find(|c: char| !is_ident(c)).unwrap_or(seg.len());
                if n == 0 || !seg.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                    break;
                }
                end += 2 + n;
            }
            if end > krate.len() {
                out.insert(Named::Rust(rest[..end].to_owned()));
            }
        }
    }
}

/// Every module `text` names.
fn named(text: &str) -> BTreeSet<Named> {
    let mut out = BTreeSet::new();
    file_paths(text, &mut out);
    rust_paths(text, &mut out);
    out
}

/// The file of module `segments` of the crate in folder `krate`, if it exists.
fn module_file(root: &Path, krate: &str, segments: &[&str]) -> Option<PathBuf> {
    let src = root.join(krate).join("src");
    if segments.is_empty() {
        return [src.join("lib.rs"), src.join("main.rs")]
            .into_iter()
            .find(|p| p.is_file());
    }
    let rel = segments.join("/");
    [src.join(format!("{rel}.rs")), src.join(&rel).join("mod.rs")]
        .into_iter()
        .find(|p| p.is_file())
}

/// Whether `code` (comments left out) mentions `name` as a whole word.
fn mentions(code: &str, name: &str) -> bool {
    code.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .any(|l| {
            l.match_indices(name).any(|(at, _)| {
                let before = l[..at].chars().next_back();
                let after = l[at + name.len()..].chars().next();
                !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
            })
        })
}

/// Why a Rust path names no module, or `None` when it does.
fn check_rust(root: &Path, path: &str) -> Option<String> {
    let mut parts = path.split("::");
    let krate = parts.next().unwrap_or_default();
    let Some((_, folder)) = CRATES.iter().find(|(k, _)| *k == krate) else {
        return Some(format!("{path}: unknown crate {krate}"));
    };
    let all: Vec<&str> = parts.collect();
    // The candidate module path: the snake_case segments before the first type-like one.
    let segments: Vec<&str> = all
        .iter()
        .copied()
        .take_while(|s| !s.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect();
    let Some((k, file)) = (0..=segments.len())
        .rev()
        .find_map(|k| module_file(root, folder, &segments[..k]).map(|f| (k, f)))
    else {
        return Some(format!("{path}: no crate root {folder}/src/lib.rs"));
    };
    let shown = file
        .strip_prefix(root)
        .unwrap_or(&file)
        .display()
        .to_string();
    let code = std::fs::read_to_string(&file).unwrap_or_default();
    match &segments[k..] {
        [] => None,
        // `module::item::Type`: the item must be an inline module of the file.
        [item] if all.len() > k + 1 => (!mentions(&code, &format!("mod {item}"))).then(|| {
            format!(
                "{path}: no module {folder}/src/{}, nor an inline `mod {item}` in {shown}",
                segments.join("/")
            )
        }),
        // `module::item`: a function, constant or inline module the file names.
        [item] => (!mentions(&code, item)).then(|| {
            format!(
                "{path}: no module {folder}/src/{}, and {shown} does not name `{item}`",
                segments.join("/")
            )
        }),
        _ => Some(format!(
            "{path}: no module {folder}/src/{} (nor .../mod.rs)",
            segments.join("/")
        )),
    }
}

/// Every named module that does not exist, one line each.
fn missing(root: &Path, names: &BTreeSet<Named>) -> Vec<String> {
    let mut out = Vec::new();
    for n in names {
        match n {
            Named::File(p) if !root.join(p).is_file() => out.push(format!("{p}: no such file")),
            Named::Folder(p) if !root.join(p).is_dir() => out.push(format!("{p}: no such folder")),
            Named::Rust(p) => out.extend(check_rust(root, p)),
            _ => {}
        }
    }
    out
}

/// The top-level modules of `vnfm-core` (`pub mod x;` in its `lib.rs`, whatever their `cfg`).
fn core_modules(root: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(root.join("vnfm-core/src/lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// Whether `names` names top-level module `m` of `vnfm-core`.
fn names_core_module(names: &BTreeSet<Named>, m: &str) -> bool {
    let file = format!("vnfm-core/src/{m}.rs");
    let folder = format!("vnfm-core/src/{m}/");
    let rust = format!("vnfm_core::{m}");
    names.iter().any(|n| match n {
        Named::File(p) => *p == file || p.starts_with(&folder),
        Named::Folder(p) => p.starts_with(&folder),
        Named::Rust(p) => *p == rust || p.starts_with(&format!("{rust}::")),
    })
}

fn doc_text(root: &Path) -> String {
    let path = root.join(DOC);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn every_module_the_architecture_page_names_exists() {
    let root = workspace_root();
    let names = named(&doc_text(&root));
    assert!(
        names.len() > 50,
        "{DOC} names only {} modules; is the extraction broken?",
        names.len()
    );
    let missing = missing(&root, &names);
    assert!(
        missing.is_empty(),
        "{DOC} names {} module(s) that do not exist:\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

#[test]
fn the_architecture_page_names_every_top_level_module_of_the_core() {
    let root = workspace_root();
    let names = named(&doc_text(&root));
    let modules = core_modules(&root);
    assert!(
        modules.len() > 10,
        "vnfm-core/src/lib.rs declares only {} modules; is the reading broken?",
        modules.len()
    );
    let unnamed: Vec<_> = modules
        .iter()
        .filter(|m| !names_core_module(&names, m))
        .collect();
    assert!(
        unnamed.is_empty(),
        "{DOC} does not name these modules of vnfm-core (add a line for each, as \
         `vnfm-core/src/<name>.rs`, `vnfm-core/src/<name>/` or `vnfm_core::<name>`): {unnamed:?}"
    );
}

#[test]
fn made_up_modules_are_reported() {
    let root = workspace_root();
    let text = "\
The machine is `vnfm_core::lifecycle::Operation` (`vnfm-core/src/lifecycle/operation/machine.rs`),
its loop `vnfm_core::lifecycle::run`, the draw `vnfm_core::reservation::lcm::settle`; the
store `vnfm-cli/src/app.rs::SimSavingStore` and the folder vnfm-core/src/alert/. The crate root
`vnfm_openstack::Heat` and `vnfm_cli::run` exist.
Made up: `vnfm_core::lifecycle::nested::Coordinator`, `vnfm_core::timers::TimerTable`,
`vnfm_core::lifecycle::made_up_fn`, (vnfm-core/src/lifecycle/timer.rs) and
vnfm-cli/src/serve/events/, and `vnfm_k8s::watch::Watcher`.
";
    let names = named(text);
    assert!(names.contains(&Named::File("vnfm-cli/src/app.rs".into())));
    assert!(names.contains(&Named::Folder("vnfm-core/src/alert/".into())));
    assert!(names.contains(&Named::Rust("vnfm_core::lifecycle::Operation".into())));
    let missing = missing(&root, &names);
    let reported = |what: &str| missing.iter().any(|m| m.starts_with(what));
    for made_up in [
        "vnfm_core::lifecycle::nested::Coordinator",
        "vnfm_core::timers::TimerTable",
        "vnfm_core::lifecycle::made_up_fn",
        "vnfm-core/src/lifecycle/timer.rs",
        "vnfm-cli/src/serve/events/",
        "vnfm_k8s::watch::Watcher",
    ] {
        assert!(reported(made_up), "{made_up} not reported: {missing:#?}");
    }
    assert_eq!(missing.len(), 6, "only the made-up ones: {missing:#?}");

    // Of the core's top-level modules, the text names these three only.
    let core_named: BTreeSet<String> = core_modules(&root)
        .into_iter()
        .filter(|m| names_core_module(&names, m))
        .collect();
    let expected: BTreeSet<String> = ["alert", "lifecycle", "reservation"]
        .map(String::from)
        .into();
    assert_eq!(core_named, expected);
}
