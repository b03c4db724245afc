#!/usr/bin/env bash
# The project's test command (the README's second set-up command; .ci/run calls it).
# Runs, in order: formatting check, clippy with warnings as errors, rustdoc with warnings as
# errors, every test and doctest of the workspace with all features. Reference payloads are
# read from ../shared/vectors when that folder exists beside the project (tests print
# "skipping ..." otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, all features, -D warnings)"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

step "cargo doc (workspace, all features, warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --locked

step "cargo test (workspace, all features, incl. doctests)"
cargo test --workspace --all-features --locked

# The real Prometheus / Alertmanager suite (vnfm-cli/tests/serve_prometheus.rs): on CI, or when
# asked with VNFM_TEST_PROMETHEUS=1. The script installs both from Debian if missing and binds
# 127.0.0.1 only; they are stopped afterwards, even when the suite fails.
if [ "${CI:-}" = "true" ] || [ "${VNFM_TEST_PROMETHEUS:-}" = "1" ]; then
  step "real Prometheus + Alertmanager suite"
  scripts/prometheus-dev.sh start
  trap 'scripts/prometheus-dev.sh stop' EXIT
  VNFM_TEST_PROMETHEUS=1 cargo test --workspace --all-features --locked --test serve_prometheus
fi
