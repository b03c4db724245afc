//! Command-line cases of `vnfm`: one `tests/cmd/*.toml` file per situation, each asserting
//! stdout, stderr and the exit status (trycmd).
//!
//! The cases run in the `vnfm-cli` directory, so their paths are relative (`tests/cmd/...`,
//! `../examples/...`) and show up as such in the expected output. Fixtures live beside the
//! cases: `tests/cmd/clouds/`, `tests/cmd/packages/`, `tests/cmd/config/`.
//!
//! The scripted cases, `tests/cmd/*.md`, are sequences of commands on one state file: each runs
//! in a sandbox of its own (a temporary directory, which the `<name>.out/` folder beside it
//! asks for) with `VNFM_STATE=state.sqlite` and `VNFM_ID_SALT=1`, so the ids they print are the
//! same in every run. Standard error follows standard output there; timestamps are elided with
//! `[..]`.
//!
//! To refresh the expected outputs after an intended change of the output:
//! `TRYCMD=overwrite cargo test -p vnfm-cli --test cli`, then review the diff (and restore the
//! `[..]` wildcards the overwrite replaced).

/// The environment variables `vnfm` reads; an inherited one would change what the cases print.
const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_ID_SALT",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
];

#[test]
fn cli_cases() {
    // This is the only test of this binary, so no other thread reads the environment while
    // it changes; the children spawned below inherit the cleaned environment.
    for var in VNFM_ENV {
        std::env::remove_var(var);
    }
    // The default state file is below $XDG_STATE_HOME: point it at a known absolute
    // directory (never created: `config show` only prints the path).
    let state_home = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdg-state");
    let cases = trycmd::TestCases::new();
    cases
        .env("XDG_STATE_HOME", state_home.display().to_string())
        // Help text is wrapped to $COLUMNS when no stream is a terminal.
        .env("COLUMNS", "100")
        .insert_var("[STATE_HOME]", state_home.display().to_string())
        .expect("a valid trycmd variable");
    cases.case("tests/cmd/*.toml");
    // Run them now: the scripted cases below get another environment.
    drop(cases);

    let scripts = trycmd::TestCases::new();
    scripts
        .env("XDG_STATE_HOME", state_home.display().to_string())
        .env("COLUMNS", "100")
        .env("VNFM_STATE", "state.sqlite")
        .env("VNFM_ID_SALT", "1");
    let dir = std::path::Path::new("tests/cmd");
    for entry in std::fs::read_dir(dir).expect("tests/cmd is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            // Without `<name>.out/` trycmd would run the script in this directory and leave
            // its state file here.
            assert!(
                path.with_extension("out").is_dir(),
                "{} needs a folder {} (with a .keep) to run in a sandbox",
                path.display(),
                path.with_extension("out").display()
            );
            scripts.case(path);
        }
    }
}
