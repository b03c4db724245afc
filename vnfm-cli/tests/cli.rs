//! Command-line cases of `vnfm`: one `tests/cmd/*.toml` file per situation, each asserting
//! stdout, stderr and the exit status (trycmd).
//!
//! The cases run in the `vnfm-cli` directory, so their paths are relative (`tests/cmd/...`,
//! `../examples/...`) and show up as such in the expected output. Fixtures live beside the
//! cases: `tests/cmd/clouds/`, `tests/cmd/packages/`, `tests/cmd/config/`.
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
}
