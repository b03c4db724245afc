#!/usr/bin/env bash
# The SOL003 VNF LCM conformance harness: runs ETSI's NFV-TST010 test descriptions for the SOL003
# VNF Lifecycle Management API (../shared/etsi-nfv-api-tests, edition 2.6.1) against `vnfm serve`
# on the simulated cloud with the demo package, then those of the Lifecycle Operation Granting
# API against the same server as an NFVO, and compares every test's outcome with
# tests/sol003/expected.tsv and tests/sol003/expected-granting.tsv (file, test, PASS|FAIL, the
# reason of every expected failure). Exit 1
# on any difference, 2 on a harness error. What it does and why: docs/serve.md#etsi-conformance.
#
#   scripts/sol003-conformance.sh [--files A.robot,B.robot] [--write FILE] [--keep]
#
# Installs Robot Framework 7 and the suite's libraries from PyPI into a venv of its own (the
# suite's pins need Python 3.7; a current Robot Framework runs it as the harness configures it),
# kept in $VNFM_SOL003_VENV (default ~/.cache/vnfm/sol003-venv) for the next run. Builds the
# `vnfm` binary unless VNFM_BIN names one. The suite is copied to a temporary folder and
# configured and patched there (scripts/sol003/harness.py says how); nothing of it is kept.
# Without the suite the run is a skip (recorded in $VNFM_SKIP_LOG: a failure under --strict).
# Cost: ~1 min once the venv exists (first run: +~30 s for pip).
set -euo pipefail
cd "$(dirname "$0")/.."

shared=${VNFM_SHARED_DIR:-../shared}
suite=$shared/etsi-nfv-api-tests/SOL003/VNFLifecycleManagement-API
if [ ! -d "$suite" ]; then
  why="$suite is absent (ETSI's NFV-TST010 SOL003 suite lives in ../shared beside the project)"
  echo "skipping sol003-conformance: the ETSI SOL003 VNF LCM suite: $why" >&2
  if [ -n "${VNFM_SKIP_LOG:-}" ]; then
    printf 'sol003-conformance\tthe ETSI SOL003 VNF LCM suite\t%s\n' "$why" >> "$VNFM_SKIP_LOG"
  fi
  exit 0
fi

# Current releases of the libraries of the suite's requirements.txt (RESTinstance for `REST`,
# JSONLibrary, JSONSchemaLibrary, DependencyLibrary, MockServerLibrary, RequestsLibrary).
requirements=(
  "robotframework==7.5"
  "RESTinstance==1.8.0"
  "robotframework-dependencylibrary==4.0.1"
  "robotframework-jsonlibrary==0.5"
  "robotframework-jsonschemalibrary==1.0"
  "robotframework-mockserver==0.0.7"
  "robotframework-requests==0.9.7"
)
venv=${VNFM_SOL003_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/vnfm/sol003-venv}
stamp="$venv/.vnfm-requirements"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${requirements[*]}" ]; then
  echo "sol003-conformance: installing Robot Framework and the suite's libraries into $venv" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "${requirements[@]}"
  echo "${requirements[*]}" > "$stamp"
fi

if [ -n "${VNFM_BIN:-}" ]; then
  bin=$VNFM_BIN
else
  cargo build --quiet --locked -p vnfm-cli --bin vnfm
  bin=${CARGO_TARGET_DIR:-target}/debug/vnfm
fi

# ETSI's Granting files (vnfm as the NFVO of the Grant interface), when the suite has them.
granting=()
grant_suite=$shared/etsi-nfv-api-tests/SOL003/VNFLifecycleOperationGranting-API
if [ -d "$grant_suite" ]; then
  granting=(--grant-suite "$grant_suite" --grant-expected tests/sol003/expected-granting.tsv)
else
  why="$grant_suite is absent"
  echo "skipping sol003-conformance granting: the ETSI SOL003 Granting suite: $why" >&2
  if [ -n "${VNFM_SKIP_LOG:-}" ]; then
    printf 'sol003-conformance\tthe ETSI SOL003 Granting suite\t%s\n' "$why" >> "$VNFM_SKIP_LOG"
  fi
fi

exec "$venv/bin/python" scripts/sol003/harness.py --suite "$suite" --vnfm "$bin" \
  --expected tests/sol003/expected.tsv "${granting[@]}" "$@"
