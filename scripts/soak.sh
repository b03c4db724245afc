#!/usr/bin/env bash
# The soak of `vnfm serve` (issue 14, acceptance 5): docs/soak.md.
#
#   scripts/soak.sh [SECONDS]     (default 300)
#
# Runs the ignored test vnfm-cli/tests/soak.rs: a `vnfm serve` child on the simulated cloud
# under `ulimit -n 128` gets alerts (auto-heal with basic auth, auto-scale with a bearer token),
# LCM operations through the API and hostile clients (silent, header-trickling, idle) at once
# for SECONDS; open descriptors and RSS after the warm-up (a fifth of the time) and at the end
# must agree within 10 %, no answer may be a 5xx but the documented 503, and every alert of an
# accepted webhook must be counted as received, and as accepted or ignored. Prints the numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
VNFM_SOAK_SECS=$secs exec nice -n 10 cargo test -p vnfm-cli --test soak -- --ignored --nocapture
