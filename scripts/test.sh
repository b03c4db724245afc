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

# The real OpenStack suites (vnfm-openstack/tests/real_openstack.rs: the conformance suite;
# vnfm-openstack/tests/real_scenarios.rs: the LCM scenarios; vnfm-cli/tests/real_openstack_lcm.rs:
# `vnfm --vim openstack` as a process): only when asked with VNFM_TEST_OPENSTACK=1. Not on
# CI=true: the sqlite-backed Nova and Heat still fail some deletes with "database is locked"
# under concurrent requests (see the README's "Against a real OpenStack"). The script installs
# what is missing (first run ~2 min, 1.3 GB), binds 127.0.0.1 only, and everything is stopped
# afterwards, even when a suite fails. Three zones, one of them (az3) too small for an m1.small.
if [ "${VNFM_TEST_OPENSTACK:-}" = "1" ]; then
  step "real OpenStack suites (Keystone, Nova, Placement, Glance, Heat on 127.0.0.1)"
  export VNFM_OS_HOSTS="c1 c2 c3" VNFM_OS_ZONES="az1:c1 az2:c2 az3:c3" VNFM_OS_SMALL_HOSTS="c3"
  os_env=$(scripts/openstack-dev.sh start)
  prev_trap=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT$/\1/")
  trap "scripts/openstack-dev.sh stop; ${prev_trap:-true}" EXIT
  eval "$os_env"
  cargo test -p vnfm-openstack --all-features --locked --test real_openstack
  cargo test -p vnfm-openstack --all-features --locked --test real_scenarios
  cargo test -p vnfm-cli --all-features --locked --test real_openstack_lcm
fi
