//! One clock (issue 25, acceptance 4): the wall clock (`Utc::now`, `SystemTime::now`,
//! `Local::now`) is read in one module of the CLI, the clock (`vnfm-cli/src/app.rs`:
//! `SystemClock`); a monotonic instant (`Instant::now`, std's or tokio's) only for IO
//! deadlines, in the files [`MONOTONIC`] lists with the reason; `vnfm-core` reads no clock
//! at all (it is sans-IO: `now` comes in, through a `Clock` or an argument).
//!
//! The test reads the sources of `vnfm-core`, `vnfm-openstack`, `vnfm-k8s` and `vnfm-cli`
//! (every `.rs` file under their `src/`), with comments, string literals and `#[cfg(test)]`
//! items left out, as `module_cycles.rs` reads them. A reading is a path ending in one of
//! the clocks above and `::now` (`chrono::Utc::now()`, `Utc::now` passed as a function,
//! `tokio::time::Instant::now()`). Not seen: a clock renamed by a `use .. as`, and a file
//! that is only compiled for tests (`#[cfg(test)] mod tests;`) is read as code. A failure
//! names every reading out of place with its file and line.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod source_text;

use std::path::Path;

/// Where the wall clock may be read (path from the workspace root), and why.
const WALL_CLOCK: &[(&str, &str)] = &[(
    "vnfm-cli/src/app.rs",
    "the clock: `SystemClock`, the CLI's one reading of the wall clock; everything else \
         takes a `Clock` (or the lifecycle's)",
)];

/// Where a monotonic instant may be read (path from the workspace root), and why: IO
/// deadlines and pacing, on the timer the code sleeps on.
const MONOTONIC: &[(&str, &str)] = &[
    (
        "vnfm-cli/src/serve/conn.rs",
        "the server's connection handling: the IO deadlines of a request head, an idle \
         connection and a body, and the pacing of its error log",
    ),
    (
        "vnfm-cli/src/serve/mod.rs",
        "the request log: the latency of a request, from its head to its answer, on its line \
         (`front`)",
    ),
    (
        "vnfm-cli/src/serve/notify.rs",
        "outgoing deliveries: a subscriber's bearer token kept until its `expires_in` runs out, \
         and the retry back-off on tokio's timer, which the worker sleeps on (`sleep_until`)",
    ),
    (
        "vnfm-openstack/src/session.rs",
        "the adapter's connection to Keystone: a token's lifetime (Keystone's `expires_at` - \
         `issued_at`) counted from its receipt, so that this host's wall clock, right or \
         wrong, plays no part in when it is renewed",
    ),
];

/// The crates whose library code is read.
const CRATES: [&str; 4] = ["vnfm-core", "vnfm-openstack", "vnfm-k8s", "vnfm-cli"];

/// The clocks read through `<clock>::now`, and whether each is the wall clock.
const CLOCKS: [(&str, bool); 4] = [
    ("Utc", true),
    ("SystemTime", true),
    ("Local", true),
    ("Instant", false),
];

/// One reading of a clock in a file.
#[derive(Debug, PartialEq)]
struct Reading {
    /// 1-based.
    line: usize,
    /// `Utc::now`, `Instant::now`, ...
    what: String,
    /// The wall clock (else a monotonic instant).
    wall: bool,
}

/// Every reading of a clock in the source `text` of a file.
fn readings(text: &str) -> Vec<Reading> {
    let code: Vec<char> = source_text::blank_test_items(&source_text::strip(text))
        .chars()
        .collect();
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < code.len() {
        if code[i] == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if !ident(code[i]) || (i > 0 && ident(code[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < code.len() && ident(code[i]) {
            i += 1;
        }
        let word: String = code[start..i].iter().collect();
        let Some(&(_, wall)) = CLOCKS.iter().find(|(name, _)| *name == word) else {
            continue;
        };
        // `::`, then `now` as a whole word, whitespace allowed around the `::`
        let mut j = i;
        let skip = |j: &mut usize| {
            while *j < code.len() && code[*j].is_whitespace() {
                *j += 1;
            }
        };
        skip(&mut j);
        if code.get(j) != Some(&':') || code.get(j + 1) != Some(&':') {
            continue;
        }
        j += 2;
        skip(&mut j);
        let now: String = code.iter().skip(j).take(3).collect();
        if now == "now" && !code.get(j + 3).is_some_and(|ch| ident(*ch)) {
            out.push(Reading {
                line,
                what: format!("{word}::now"),
                wall,
            });
        }
    }
    out
}

/// What is out of place among `files` (path from the workspace root → source text), one line
/// each: `path:line: what, why not there`.
fn misplaced(files: &[(String, String)]) -> Vec<String> {
    let allowed = |list: &[(&str, &str)], path: &str| list.iter().any(|(p, _)| *p == path);
    let mut out = Vec::new();
    for (path, text) in files {
        for r in readings(text) {
            let why = if path.starts_with("vnfm-core/") {
                "vnfm-core is sans-IO and reads no clock: `now` comes in (a `Clock` or an argument)"
            } else if r.wall && !allowed(WALL_CLOCK, path) {
                "the wall clock is read in the clock alone (vnfm-cli/src/app.rs): take a `Clock` \
                 or a `now`"
            } else if !r.wall && !allowed(MONOTONIC, path) {
                "an instant is read for IO deadlines alone, in the files the test lists: take a \
                 `Clock` or a `now`, or list the file with the reason"
            } else {
                continue;
            };
            out.push(format!("{path}:{}: {}, {why}", r.line, r.what));
        }
    }
    out
}

/// Every `.rs` file under `dir`, with its path from `root` (`/`-separated).
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for path in source_text::rust_files(dir) {
        let rel: Vec<String> = path
            .strip_prefix(root)
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        out.push((rel.join("/"), std::fs::read_to_string(&path).unwrap()));
    }
}

#[test]
fn every_reading_of_a_clock_is_where_it_may_be() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.join("..");
    let crates: Vec<&str> = if root.join("vnfm-core/src").is_dir() {
        CRATES.to_vec()
    } else {
        vec!["vnfm-cli"] // a packaged crate: only this one
    };
    let mut files = Vec::new();
    for krate in &crates {
        let src = root.join(krate).join("src");
        assert!(src.is_dir(), "{} has no sources", src.display());
        rust_files(&root, &src, &mut files);
    }
    for (path, text) in &files {
        for r in readings(text) {
            println!("{path}:{}: {}", r.line, r.what);
        }
    }
    // an allowance whose file no longer reads that clock is printed, to be struck
    for (list, wall) in [(WALL_CLOCK, true), (MONOTONIC, false)] {
        for (path, _) in list {
            let reads = files
                .iter()
                .any(|(p, t)| p == path && readings(t).iter().any(|r| r.wall == wall));
            if !reads && crates.iter().any(|k| path.starts_with(&format!("{k}/"))) {
                println!("{path} is allowed a reading it no longer makes: strike it");
            }
        }
    }
    let bad = misplaced(&files);
    let list = |l: &[(&str, &str)]| {
        l.iter()
            .map(|(p, why)| format!("  {p}: {why}\n"))
            .collect::<String>()
    };
    assert!(
        bad.is_empty(),
        "readings of a clock out of place:\n{}\nthe wall clock may be read in:\n{}an instant \
         in:\n{}",
        bad.join("\n"),
        list(WALL_CLOCK),
        list(MONOTONIC)
    );
}

/// The evidence that the check fails on a reading added on purpose, and names it.
#[test]
fn a_reading_added_elsewhere_is_found() {
    let file = |p: &str, t: &str| (p.to_owned(), t.to_owned());
    let files = [
        file(
            "vnfm-cli/src/app.rs",
            "fn now() -> DateTime<Utc> {\n    chrono::Utc::now()\n}\n",
        ),
        file(
            "vnfm-cli/src/serve/conn.rs",
            "fn head() -> Phase {\n    Phase::head(Instant::now(), true)\n}\n",
        ),
        file(
            "vnfm-cli/src/serve/packages.rs",
            "fn look() {\n    let at = Utc::now();\n    let t = std::time::Instant::now();\n}\n",
        ),
        file(
            "vnfm-cli/src/serve/outbox.rs",
            "fn now(c: Option<&dyn Clock>) -> DateTime<Utc> {\n    \
             c.map_or_else(chrono::Utc::now, |c| c.now())\n}\n",
        ),
        file(
            "vnfm-core/src/lifecycle/engine.rs",
            "fn started() -> u64 {\n    let t = tokio::time::Instant :: now();\n    \
             SystemTime::now();\n    chrono::Local::now();\n    0\n}\n",
        ),
    ];
    let bad = misplaced(&files);
    let at: Vec<&str> = bad.iter().map(|b| b.split(',').next().unwrap()).collect();
    assert_eq!(
        at,
        [
            "vnfm-cli/src/serve/packages.rs:2: Utc::now",
            "vnfm-cli/src/serve/packages.rs:3: Instant::now",
            "vnfm-cli/src/serve/outbox.rs:2: Utc::now",
            "vnfm-core/src/lifecycle/engine.rs:2: Instant::now",
            "vnfm-core/src/lifecycle/engine.rs:3: SystemTime::now",
            "vnfm-core/src/lifecycle/engine.rs:4: Local::now",
        ],
        "{bad:#?}"
    );
    assert!(bad[0].contains("in the clock alone"), "{}", bad[0]);
    assert!(bad[1].contains("for IO deadlines alone"), "{}", bad[1]);
    assert!(bad[3].contains("vnfm-core is sans-IO"), "{}", bad[3]);
}

/// Comments, literals and test items are no readings; the lines after them keep their
/// numbers.
#[test]
fn comments_strings_and_tests_are_not_readings() {
    let text = r##"
/// Reads `Utc::now()`.
/* a block
   Instant::now() */
const S: &str = "SystemTime::now()
";
const R: &str = r#"Local::now()"#;
fn nowhere() -> bool { MyUtc::now_ish(); Utc::nowhere(); true }
#[cfg(test)]
mod tests {
    fn t() { let _ = std::time::Instant::now(); }
}
#[ cfg( test ) ]
fn helper() -> u64 { chrono::Utc::now().timestamp() as u64 }
#[cfg(test)]
use std::time::Instant;
fn after() { let _ = Utc::now(); }
"##;
    assert_eq!(
        readings(text),
        [Reading {
            line: 17,
            what: "Utc::now".into(),
            wall: true
        }]
    );
}
