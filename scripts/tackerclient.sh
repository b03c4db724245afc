#!/usr/bin/env bash
# The `openstack vnflcm` suite: the real python-tackerclient (with python-openstackclient, the
# pins below) drives `vnfm serve` on the simulated cloud through a whole VNF lifecycle: create,
# list, show, update, instantiate, scale out and in, heal, op list/show, subscriptions,
# terminate, delete, `create --I` and `terminate --D`, op retry/rollback/fail on a FAILED_TEMP
# instantiate, and errors (a wrong token, an unknown instance) shown with vnfm's ProblemDetails.
# Each command runs as a process; its exit status and its output (`-f json`) are checked
# (scripts/tackerclient/suite.py says what). No Keystone: keystoneauth's `admin_token` plugin
# sends `[server] api_token` as `X-Auth-Token`. Exit 1 on a check that fails, 2 on a harness
# error. What it covers and what it found: docs/serve.md, "openstack vnflcm (python-tackerclient)".
#
#   scripts/tackerclient.sh [--keep]
#
# Installs the clients from PyPI into a venv of its own, kept in $VNFM_TACKERCLIENT_VENV
# (default ~/.cache/vnfm/tackerclient-venv) for the next run, made again when the pins change.
# Builds the `vnfm` binary unless VNFM_BIN names one. Without PyPI (no network) and without the
# venv the run is a skip (recorded in $VNFM_SKIP_LOG: a failure under --strict).
# Cost: ~1 min once the venv exists (first run: +~1 min for pip).
set -euo pipefail
cd "$(dirname "$0")/.."

requirements=(
  "python-tackerclient==2.6.0"
  "python-openstackclient==10.5.0"
)
venv=${VNFM_TACKERCLIENT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/vnfm/tackerclient-venv}
stamp="$venv/.vnfm-requirements"
if [ ! -x "$venv/bin/openstack" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${requirements[*]}" ]; then
  index=${PIP_INDEX_URL:-https://pypi.org/simple}
  if ! python3 - "$index" <<'EOF'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/python-tackerclient/", timeout=15).read(1)
except Exception as e:
    print(f"tackerclient: {sys.argv[1]} unreachable: {e}", file=sys.stderr)
    sys.exit(1)
EOF
  then
    why="the package index ($index) is unreachable and $venv is absent or has other pins"
    echo "skipping tackerclient: the openstack vnflcm suite: $why" >&2
    if [ -n "${VNFM_SKIP_LOG:-}" ]; then
      printf 'tackerclient\tthe openstack vnflcm suite\t%s\n' "$why" >> "$VNFM_SKIP_LOG"
    fi
    exit 0
  fi
  echo "tackerclient: installing ${requirements[*]} into $venv" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet "${requirements[@]}"; then
    rm -rf "$venv"
    echo "tackerclient: pip could not install ${requirements[*]}" >&2
    exit 2
  fi
  echo "${requirements[*]}" > "$stamp"
fi

if [ -n "${VNFM_BIN:-}" ]; then
  bin=$VNFM_BIN
else
  cargo build --quiet --locked -p vnfm-cli --bin vnfm
  bin=${CARGO_TARGET_DIR:-target}/debug/vnfm
fi

exec python3 scripts/tackerclient/suite.py --vnfm "$bin" --openstack "$venv/bin/openstack" "$@"
