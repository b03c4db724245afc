#!/usr/bin/env bash
# The project's test command (the README's second set-up command; .ci/run calls it with
# --strict). Runs, in order: formatting check, clippy with warnings as errors, rustdoc with
# warnings as errors, every test and doctest of the workspace with all features (the README's
# library snippet is one), every example program under examples/examples/, ETSI's SOL003
# conformance suite against `vnfm serve` (scripts/sol003-conformance.sh), the real
# python-tackerclient's `openstack vnflcm` commands against it (scripts/tackerclient.sh), then
# (on CI, or when asked) the suites against real Prometheus / Alertmanager, a real Kubernetes
# control plane and real OpenStack services on 127.0.0.1, and ends with a summary of what ran
# and what was skipped, and why.
#
# On CI, or when asked, a throw-away PostgreSQL 15 (scripts/postgres-dev.sh) runs during the
# workspace tests, for the PostgreSQL store's conformance suite (vnfm-cli/src/store_postgres.rs).
#
# Reference payloads are read from ../shared/vectors when that folder exists beside the
# project; without it those tests skip (vnfm_core::vectors::skip). Every skip is recorded.
#
#   --strict (or VNFM_STRICT=1)  every skip is a failure: missing vectors, a real-service
#                                suite not run, a filter matching nothing. CI runs this way.
#   CI=true|1|yes|on             run the real-service suites (as VNFM_TEST_PROMETHEUS=1
#                                VNFM_TEST_K8S=1 VNFM_TEST_OPENSTACK=1 VNFM_TEST_TACKER=1
#                                VNFM_TEST_HW_AFFINITY=1 VNFM_TEST_POSTGRES=1); any of them
#                                set to 0 skips that suite (real-tacker runs on the OpenStack
#                                of real-openstack: it needs VNFM_TEST_OPENSTACK too)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# The usual spellings of a boolean variable; a typo is an error, not a silent "no".
truthy() {
  local v=${1:-}
  case "${v,,}" in
    1|true|yes|on) return 0 ;;
    ""|0|false|no|off) return 1 ;;
    *) echo "test.sh: '$v' is not a boolean (1, true, yes, on / 0, false, no, off)" >&2; exit 2 ;;
  esac
}
for arg in "$@"; do
  case "$arg" in
    --strict) export VNFM_STRICT=1 ;;
    *) echo "test.sh: unknown argument $arg (usage: scripts/test.sh [--strict])" >&2; exit 2 ;;
  esac
done
# Refuse a misspelled value at once (a subshell below could not stop the script).
for var in CI VNFM_STRICT VNFM_TEST_PROMETHEUS VNFM_TEST_K8S VNFM_TEST_OPENSTACK VNFM_TEST_HW_AFFINITY VNFM_TEST_POSTGRES VNFM_TEST_TACKER VNFM_TACKER_FRESH; do truthy "${!var:-}" || :; done
strict=0
if truthy "${VNFM_STRICT:-}"; then strict=1; export VNFM_STRICT=1; fi
on_ci() { truthy "${CI:-}" && echo 1 || echo 0; }
suite_on() { # suite_on VAR: is the real-service suite of VAR asked for (default: on CI)?
  local v=${!1:-$(on_ci)}
  truthy "$v" && echo 1 || echo 0
}

# Every skip of every test is appended here (suite, what, why); the summary reads it.
work=$(mktemp -d)
export VNFM_SKIP_LOG=$work/skips.tsv
: > "$VNFM_SKIP_LOG"
results=$work/results.txt   # "<suite> <passed> <failed> <ignored>" per test binary
: > "$results"
ran_suites=""
# Runs cargo test with the given arguments, keeping its output and the counts of every binary
# under the suite name $1.
run_tests() {
  local suite=$1; shift
  local log=$work/$suite.log
  set +e
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  awk -v s="$suite" '/^test result:/ {
      p=0; f=0; i=0
      for (k = 1; k <= NF; k++) {
        if ($(k+1) ~ /^passed/) p=$k; if ($(k+1) ~ /^failed/) f=$k; if ($(k+1) ~ /^ignored/) i=$k
      }
      print s, p, f, i }' "$log" >> "$results"
  return "$rc"
}

# Runs a suite script ($3...) with the binary the workspace tests built and records its outcome
# under the suite name $1: passed when it exits 0 having recorded no skip, failed (saying $2)
# when it does not. Returns the script's exit code.
run_script() {
  local suite=$1 failure=$2 before rc=0
  shift 2
  before=$(wc -l < "$VNFM_SKIP_LOG")
  VNFM_BIN="${CARGO_TARGET_DIR:-target}/debug/vnfm" "$@" || rc=$?
  if [ "$rc" = 0 ]; then
    if [ "$(wc -l < "$VNFM_SKIP_LOG")" = "$before" ]; then
      echo "$suite 1 0 0" >> "$results"
    fi
  else
    echo "$suite 0 1 0" >> "$results"
    echo "test.sh: $failure (above)" >&2
  fi
  return "$rc"
}

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, all features, -D warnings)"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

step "cargo doc (workspace, all features, warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --locked

# A throw-away PostgreSQL 15 cluster (scripts/postgres-dev.sh: installs postgresql-15 when
# missing, initdb as the user postgres, a free port of 127.0.0.1; ~2-8 s) for the PostgreSQL
# store's tests (vnfm-cli/src/store_postgres.rs), which run in the workspace pass below, each on a
# database of its own created from template0 and dropped after; it also speaks TLS (--tls: a CA
# and certificates made by openssl, in VNFM_TEST_POSTGRES_TLS) for store_postgres/tls.rs's tests
# (a VNFM_TEST_POSTGRES_URL of your own without VNFM_TEST_POSTGRES_TLS: they skip). Started once
# per run, on CI or with VNFM_TEST_POSTGRES=1, and stopped after that pass (and at exit, when a
# step fails).
# Without it (and without a VNFM_TEST_POSTGRES_URL of your own) those tests record a skip of the
# suite "postgres": a failure under --strict.
pg_dir=""
if [ "$(suite_on VNFM_TEST_POSTGRES)" = "1" ]; then
  step "throw-away PostgreSQL 15 (scripts/postgres-dev.sh)"
  pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/vnfm-postgres.XXXXXX")
  trap 'scripts/postgres-dev.sh stop "$pg_dir"; rm -rf "$pg_dir"' EXIT
  pg_env=$(scripts/postgres-dev.sh start "$pg_dir" --tls)
  eval "$pg_env"
  export VNFM_TEST_POSTGRES_URL VNFM_TEST_POSTGRES_TLS
fi

# The software of the OpenStack and Tacker suites (Debian packages, two venvs from PyPI: ~3-5 min
# on a fresh machine) is installed in the background while the workspace tests build and run;
# the OpenStack suites wait for it (scripts/openstack-dev.sh start and scripts/tacker-dev.sh
# start find it installed, or install it themselves and say why it failed). After PostgreSQL's
# start, so that two apt-get never run at once.
prefetch_pid=""
prefetch_log=$work/prefetch.log
if [ "$(suite_on VNFM_TEST_OPENSTACK)" = "1" ] || [ "$(suite_on VNFM_TEST_HW_AFFINITY)" = "1" ]; then
  step "installing the OpenStack and Tacker suites' software in the background (log: $prefetch_log)"
  tacker_too=$(suite_on VNFM_TEST_TACKER)
  ( scripts/openstack-dev.sh install
    if [ "$tacker_too" = "1" ]; then scripts/tacker-dev.sh install; fi ) > "$prefetch_log" 2>&1 &
  prefetch_pid=$!
fi
# Waits for the background install (once); its failure is reported, and left to the suite's own
# start to repeat and explain.
wait_prefetch() {
  [ -n "$prefetch_pid" ] || return 0
  local rc=0
  wait "$prefetch_pid" || rc=$?
  prefetch_pid=""
  if [ "$rc" != 0 ]; then
    echo "test.sh: the background install failed (exit $rc); the suites' start will try again:" >&2
    tail -20 "$prefetch_log" >&2
  fi
}

step "cargo test (workspace, all features, incl. doctests)"
# Without the services: the real-service suites skip here (deferred: they run below once their
# services are up, and the summary checks that they did).
VNFM_SKIP_DEFERRED=real-prometheus,real-k8s,real-openstack,real-hw-affinity \
  run_tests workspace env -u VNFM_TEST_PROMETHEUS -u VNFM_TEST_OPENSTACK -u VNFM_TEST_K8S \
  -u VNFM_TEST_HW_AFFINITY \
  -u VNFM_K8S_KUBECONFIG -u VNFM_K8S_KUBECONFIG_CERT -u VNFM_K8S_KUBECONFIG_VIEWER \
  cargo test --workspace --all-features --locked --no-fail-fast

# With a server, the PostgreSQL store's tests ran in that pass: the summary shows them as the
# suite "postgres" (moved out of the workspace counts, so that the totals stay the same); without
# one, their skips are listed.
if [ -n "${VNFM_TEST_POSTGRES_URL:-}" ]; then
  pg_tests='^test store_postgres::(tests|tls::tests::pg)::'
  pg_passed=$(grep -cE "$pg_tests.* ok\$" "$work/workspace.log" || :)
  pg_failed=$(grep -cE "$pg_tests.* FAILED\$" "$work/workspace.log" || :)
  echo "postgres $pg_passed $pg_failed 0" >> "$results"
  echo "workspace -$pg_passed -$pg_failed 0" >> "$results"
fi
if [ -n "$pg_dir" ]; then
  scripts/postgres-dev.sh stop "$pg_dir"
  rm -rf "$pg_dir"
  trap - EXIT
  unset VNFM_TEST_POSTGRES_URL VNFM_TEST_POSTGRES_TLS
fi

# Every example program (examples/examples/*.rs) runs to completion on the simulated cloud: the
# build above made them with these features, so this build compiles nothing again; each binary
# runs from the workspace root, and a non-zero exit fails the step (after all have run).
step "examples (each program under examples/examples/)"
example_bins=$work/examples.txt
cargo build --workspace --all-features --locked --examples --message-format=json-render-diagnostics |
  { grep '"kind":\["example"\]' || :; } |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' > "$example_bins"
ex_passed=0
ex_failed=0
for src in examples/examples/*.rs; do
  name=$(basename "$src" .rs)
  bin=$(grep "/examples/$name\$" "$example_bins" || :)
  printf '\n--- example %s\n' "$name"
  if [ -n "$bin" ] && "$bin"; then
    ex_passed=$((ex_passed + 1))
  else
    ex_failed=$((ex_failed + 1))
    echo "test.sh: example $name failed (cargo run -p vnfm-examples --example $name)" >&2
  fi
done
echo "examples $ex_passed $ex_failed 0" >> "$results"
if [ "$ex_failed" -gt 0 ]; then
  echo "test.sh: $ex_failed example(s) failed" >&2
  exit 1
fi

# The real-service suites run on CI and when asked with VNFM_TEST_PROMETHEUS=1 /
# VNFM_TEST_K8S=1 / VNFM_TEST_OPENSTACK=1; set one to 0 to skip that suite (a failure under
# --strict). Each service script installs what is missing (apt, pip), binds 127.0.0.1 only, and
# stops what it started when its suite ends, even when the suite fails. The suites reuse the
# workspace build above (`--workspace`).
#
# Real Prometheus 2.42 + Alertmanager 0.25 (Debian): vnfm-cli/tests/serve_prometheus.rs.
prometheus_suite() {
  scripts/prometheus-dev.sh start
  VNFM_TEST_PROMETHEUS=1 run_tests real-prometheus \
    cargo test --workspace --all-features --locked --no-fail-fast --test serve_prometheus
}
# A real Kubernetes control plane: kube-apiserver, kube-scheduler and kube-controller-manager
# 1.36.2 (the binaries of ../shared/k8s, or of VNFM_K8S_BIN_DIR) on Debian's etcd (installed by
# the script when missing), no kubelet; healthy ~4-8 s after start, the suites ~15 s: the
# conformance suite and the adapter's own behaviours (vnfm-k8s/tests/real_cluster.rs), and
# `vnfm serve` healing and scaling a CNF from Alertmanager alerts (vnfm-cli/tests/serve_k8s.rs),
# against nodes the tests create as kubelets would, and the manifests of deploy/kubernetes/ sent
# to the apiserver with server-side dry run (vnfm-cli/tests/k8s_manifests.rs). Every start begins
# with an empty etcd.
k8s_suite() {
  local k8s_env
  k8s_env=$(scripts/k8s-dev.sh start)
  eval "$k8s_env"
  VNFM_TEST_K8S=1 run_tests real-k8s cargo test --workspace --all-features --locked \
    --no-fail-fast --test real_cluster --test serve_k8s --test k8s_manifests -- --nocapture
}
# These two share nothing with each other nor with the SOL003 run (their own services, ports
# and processes; cargo builds nothing again), so they run side by side with it, each in the
# background with its output in a log printed when it ends. Their Debian packages are installed
# one after the other (apt-get takes one lock) before anything starts.
bg_pids=""
bg_names=""
start_bg() { # name function: runs the suite in the background, output to $work/bg-<name>.out
  local name=$1 fn=$2
  ( set -e; "$fn" ) > "$work/bg-$name.out" 2>&1 &
  bg_pids="$bg_pids $!"
  bg_names="$bg_names $name"
}
stop_bg_services() { # the services of the suites started here, and only those
  for pid in $bg_pids; do kill "$pid" 2>/dev/null || :; done
  case " $bg_names " in *" real-prometheus "*) scripts/prometheus-dev.sh stop >/dev/null 2>&1 || : ;; esac
  case " $bg_names " in *" real-k8s "*) scripts/k8s-dev.sh stop >/dev/null 2>&1 || : ;; esac
}
wait_prefetch   # its apt-get first
trap stop_bg_services EXIT
if [ "$(suite_on VNFM_TEST_PROMETHEUS)" = "1" ]; then
  step "real Prometheus + Alertmanager suite (in the background, beside the SOL003 run)"
  scripts/prometheus-dev.sh install
  start_bg real-prometheus prometheus_suite
fi
if [ "$(suite_on VNFM_TEST_K8S)" = "1" ]; then
  step "real Kubernetes control plane suite (etcd, kube-apiserver, scheduler, controller-manager on 127.0.0.1; in the background, beside the SOL003 run)"
  scripts/k8s-dev.sh install
  start_bg real-k8s k8s_suite
fi

# ETSI's SOL003 VNF LCM conformance suite (NFV-TST010, ../shared/etsi-nfv-api-tests) against
# `vnfm serve` on the simulated cloud, with the binary the workspace tests built: every test's
# outcome must be the one tests/sol003/expected.tsv lists (docs/serve.md#etsi-conformance).
# ~5 min, plus ~1.5 min the first time for the venv (PyPI). Without ../shared it skips (a
# failure under --strict, as every skip).
step "ETSI SOL003 VNF LCM conformance (scripts/sol003-conformance.sh)"
sol003_rc=0
run_script sol003-conformance \
  "the SOL003 conformance run differs from tests/sol003/expected.tsv" \
  scripts/sol003-conformance.sh || sol003_rc=$?

# The `openstack vnflcm` suite: the real python-tackerclient 2.6.0 (python-openstackclient
# 10.5.0) through a whole lifecycle against `vnfm serve` on the simulated cloud
# (docs/serve.md#openstack-vnflcm-python-tackerclient). ~1 min, plus ~1 min the first time for
# its venv (PyPI). Without PyPI and without the venv it skips (a failure under --strict).
step "openstack vnflcm (python-tackerclient) against vnfm serve (scripts/tackerclient.sh)"
tackerclient_rc=0
run_script tackerclient "the openstack vnflcm (python-tackerclient) suite failed" \
  scripts/tackerclient.sh || tackerclient_rc=$?

# The background suites: each one's output, then its outcome.
bg_failed=""
set -- $bg_names
for pid in $bg_pids; do
  name=$1; shift
  rc=0
  wait "$pid" || rc=$?
  step "$name (ran in the background; its output follows)"
  cat "$work/bg-$name.out"
  if [ "$rc" = 0 ]; then
    ran_suites="$ran_suites $name"
  else
    bg_failed="$bg_failed $name"
    echo "test.sh: the $name suite failed (exit $rc, above)" >&2
  fi
done
bg_pids=""
stop_bg_services
trap - EXIT
if [ "$sol003_rc" != 0 ] || [ "${tackerclient_rc:-0}" != 0 ] || [ -n "$bg_failed" ]; then
  exit 1
fi
# Real Keystone, Nova (fake virt driver), Placement, Glance and Heat on MariaDB and RabbitMQ
# (PyPI + Debian; first run ~3 min and 1.4 GB, then ~1 min): the conformance suite
# (vnfm-openstack/tests/real_openstack.rs), the LCM scenarios (real_scenarios.rs) and
# `vnfm --vim openstack` as a process (vnfm-cli/tests/real_openstack_lcm.rs). Four zones, two
# of them (az3, az4) too small for an m1.small: the AutoScalingGroup scenarios need a big zone
# that the group's anti-affinity rule forbids and a second small zone for reselection to try
# (the script exports VNFM_OS_TEST_SMALL_ZONE=az3 and VNFM_OS_TEST_SMALL_ZONES="az3 az4"); the
# service state starts empty on CI (VNFM_OS_FRESH=1), the installed venv is kept.
if [ "$(suite_on VNFM_TEST_OPENSTACK)" = "1" ]; then
  step "real OpenStack suites (Keystone, Nova, Placement, Glance, Heat on 127.0.0.1)"
  export VNFM_OS_HOSTS="c1 c2 c3 c4" VNFM_OS_ZONES="az1:c1 az2:c2 az3:c3 az4:c4"
  export VNFM_OS_SMALL_HOSTS="c3 c4"
  export VNFM_OS_FRESH=${VNFM_OS_FRESH:-$(on_ci)}
  trap 'scripts/openstack-dev.sh stop' EXIT
  os_env=$(scripts/openstack-dev.sh start)
  eval "$os_env"
  VNFM_TEST_OPENSTACK=1 run_tests real-openstack cargo test --workspace --all-features --locked \
    --no-fail-fast --test real_openstack --test real_scenarios --test real_openstack_lcm -- --nocapture
  # Real Tacker 16.0.0 (PyPI) with `vnfm serve` as its NFVO, on this same OpenStack (its
  # RabbitMQ too): instantiate, scale-out, heal and terminate through Tacker's v2 API, each
  # granted by vnfm, every server in the zone vnfm granted (scripts/tacker/real_tacker.py,
  # docs/grants.md "vnfm behind Tacker (how-to)"). ~4 min, plus ~2 min the first time for
  # Tacker's venv (scripts/tacker-dev.sh); Tacker's database starts empty on CI.
  if [ "$(suite_on VNFM_TEST_TACKER)" = "1" ]; then
    step "real Tacker suite (Tacker 16.0.0, vnfm serve as its NFVO, on the OpenStack above)"
    trap 'scripts/tacker-dev.sh stop; scripts/openstack-dev.sh stop' EXIT
    skips_before=$(wc -l < "$VNFM_SKIP_LOG")
    set +e
    VNFM_TEST_TACKER=1 VNFM_TACKER_FRESH=${VNFM_TACKER_FRESH:-$(on_ci)} \
      VNFM_BIN="${CARGO_TARGET_DIR:-target}/debug/vnfm" python3 scripts/tacker/real_tacker.py
    tacker_rc=$?
    set -e
    scripts/tacker-dev.sh stop
    trap 'scripts/openstack-dev.sh stop' EXIT
    if [ "$tacker_rc" != 0 ]; then
      echo "real-tacker 0 1 0" >> "$results"
      echo "test.sh: the real-Tacker suite failed (above)" >&2
      exit 1
    fi
    if [ "$(wc -l < "$VNFM_SKIP_LOG")" = "$skips_before" ]; then
      echo "real-tacker 1 0 0" >> "$results"
      ran_suites="$ran_suites real-tacker"
    fi
  fi
  scripts/openstack-dev.sh stop
  trap - EXIT
  ran_suites="$ran_suites real-openstack"
fi

# Hardware-aware pod affinity end to end (vnfm-cli/tests/real_hw_affinity.rs): both real
# services at once. OpenStack again, from empty state, with one zone of three compute hosts
# (the suites above need one host per zone), so that Nova's scheduler, not the zones, puts the
# cluster VNF's three workers of an anti-affinity server group on three hosts; the Kubernetes
# control plane beside it. ~1-3 min to start, the test ~3 min (admin, then non-admin).
if [ "$(suite_on VNFM_TEST_HW_AFFINITY)" = "1" ]; then
  step "real OpenStack + real Kubernetes: hardware-aware pod affinity end to end"
  trap 'scripts/openstack-dev.sh stop; scripts/k8s-dev.sh stop' EXIT
  os_env=$(VNFM_OS_HOSTS="w1 w2 w3" VNFM_OS_ZONES="azw:w1,w2,w3" VNFM_OS_SMALL_HOSTS="" \
    VNFM_OS_FRESH=1 scripts/openstack-dev.sh start)
  eval "$os_env"
  k8s_env=$(scripts/k8s-dev.sh start)
  eval "$k8s_env"
  VNFM_TEST_HW_AFFINITY=1 run_tests real-hw-affinity cargo test --workspace --all-features \
    --locked --no-fail-fast --test real_hw_affinity -- --nocapture
  scripts/k8s-dev.sh stop
  scripts/openstack-dev.sh stop
  trap - EXIT
  ran_suites="$ran_suites real-hw-affinity"
fi

# The summary: tests run per suite, and every skip with its reason. A deferred suite that
# skipped in the workspace pass and ran afterwards is not a skip.
step "summary"
awk '{ p[$1] += $2; f[$1] += $3; i[$1] += $4 }
     END { for (s in p) printf "  %-16s %6d passed, %d failed, %d ignored\n", s, p[s], f[s], i[s] }' \
  "$results" | sort
skipped=0
while IFS=$'\t' read -r suite what why; do
  case " $ran_suites " in *" $suite "*) continue ;; esac
  skipped=$((skipped + 1))
  printf '  skipped %s: %s: %s\n' "$suite" "$what" "$why"
done < "$VNFM_SKIP_LOG"
for suite in real-prometheus real-k8s real-openstack real-tacker real-hw-affinity; do
  case " $ran_suites " in
    *" $suite "*) ;;
    *) if ! grep -q "^$suite"$'\t' "$VNFM_SKIP_LOG"; then
         skipped=$((skipped + 1))
         printf '  skipped %s: the whole suite: not asked for (CI unset, or its VNFM_TEST_* is 0)\n' "$suite"
       fi ;;
  esac
done
passed=$(awk '{ n += $2 } END { print n + 0 }' "$results")
failed=$(awk '{ n += $3 } END { print n + 0 }' "$results")
rm -rf "$work"
if [ "$strict" = "1" ] && [ "$skipped" -gt 0 ]; then
  echo "strict mode: $skipped skipped (listed above); every test must run" >&2
  echo "summary: $passed passed, $failed failed, $skipped skipped"
  exit 1
fi
echo "summary: $passed passed, $failed failed, $skipped skipped"
