#!/usr/bin/env bash
# The project's test command (the README's second set-up command; .ci/run calls it).
# Runs, in order: formatting check, clippy with warnings as errors, rustdoc with warnings as
# errors, every test and doctest of the workspace with all features, then (on CI, or when
# asked) the suites against real Prometheus / Alertmanager and real OpenStack services on
# 127.0.0.1. Reference payloads are read from ../shared/vectors when that folder exists beside
# the project (tests print "skipping ..." otherwise).
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
# Without the services: the real-service suites skip here, and run below once they are up
# (VNFM_TEST_PROMETHEUS=1 / VNFM_TEST_OPENSTACK=1 in the caller's environment asks for those).
env -u VNFM_TEST_PROMETHEUS -u VNFM_TEST_OPENSTACK cargo test --workspace --all-features --locked

# The real-service suites run on CI (CI=true) and when asked with VNFM_TEST_PROMETHEUS=1 /
# VNFM_TEST_OPENSTACK=1; set either to 0 to skip that suite. Each service script installs what
# is missing (apt, pip), binds 127.0.0.1 only, and stops what it started when its suite ends,
# even when the suite fails. The suites reuse the workspace build above (`--workspace`).
on_ci() { [ "${CI:-}" = "true" ] && echo 1 || echo 0; }

# Real Prometheus 2.42 + Alertmanager 0.25 (Debian): vnfm-cli/tests/serve_prometheus.rs.
if [ "${VNFM_TEST_PROMETHEUS:-$(on_ci)}" = "1" ]; then
  step "real Prometheus + Alertmanager suite"
  scripts/prometheus-dev.sh start
  trap 'scripts/prometheus-dev.sh stop' EXIT
  VNFM_TEST_PROMETHEUS=1 cargo test --workspace --all-features --locked --test serve_prometheus
  scripts/prometheus-dev.sh stop
  trap - EXIT
fi

# Real Keystone, Nova (fake virt driver), Placement, Glance and Heat on MariaDB and RabbitMQ
# (PyPI + Debian; first run ~3 min and 1.4 GB, then ~1 min): the conformance suite
# (vnfm-openstack/tests/real_openstack.rs), the LCM scenarios (real_scenarios.rs) and
# `vnfm --vim openstack` as a process (vnfm-cli/tests/real_openstack_lcm.rs). Four zones, two
# of them (az3, az4) too small for an m1.small: the AutoScalingGroup scenarios need a big zone
# that the group's anti-affinity rule forbids and a second small zone for reselection to try
# (the script exports VNFM_OS_TEST_SMALL_ZONE=az3 and VNFM_OS_TEST_SMALL_ZONES="az3 az4"); the
# service state starts empty on CI (VNFM_OS_FRESH=1), the installed venv is kept.
if [ "${VNFM_TEST_OPENSTACK:-$(on_ci)}" = "1" ]; then
  step "real OpenStack suites (Keystone, Nova, Placement, Glance, Heat on 127.0.0.1)"
  export VNFM_OS_HOSTS="c1 c2 c3 c4" VNFM_OS_ZONES="az1:c1 az2:c2 az3:c3 az4:c4"
  export VNFM_OS_SMALL_HOSTS="c3 c4"
  export VNFM_OS_FRESH=${VNFM_OS_FRESH:-$(on_ci)}
  trap 'scripts/openstack-dev.sh stop' EXIT
  os_env=$(scripts/openstack-dev.sh start)
  eval "$os_env"
  VNFM_TEST_OPENSTACK=1 cargo test --workspace --all-features --locked \
    --test real_openstack --test real_scenarios --test real_openstack_lcm -- --nocapture
  scripts/openstack-dev.sh stop
  trap - EXIT
fi
