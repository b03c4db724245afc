#!/usr/bin/env bash
# Real Prometheus (Debian 2.42) and Alertmanager (Debian 0.25) for the `vnfm serve` end-to-end
# suite (vnfm-cli/tests/serve_prometheus.rs). Everything listens on 127.0.0.1 only.
#
#   scripts/prometheus-dev.sh start    install (apt-get, only if missing), render configs, start
#   scripts/prometheus-dev.sh install  install them (apt-get, only if missing), start nothing
#   scripts/prometheus-dev.sh stop     stop both (SIGTERM, then SIGKILL after 10 s)
#   scripts/prometheus-dev.sh reload   POST /-/reload to Prometheus (after rewriting rules.yml)
#   scripts/prometheus-dev.sh env      print the settings as VAR=value lines
#
# Settings (environment, with defaults):
#   VNFM_PROM_DIR=${TMPDIR:-/tmp}/vnfm-prometheus   configs, data, logs, pid files, rules.yml
#   VNFM_PROM_PORT=19090  VNFM_AM_PORT=19093
#   VNFM_WEBHOOK_BASE=http://127.0.0.1:19890         where `vnfm serve` listens (loopback only)
#   VNFM_PROM_BASIC_USER=vnfm VNFM_PROM_BASIC_PASS=vnfm-secret VNFM_PROM_BEARER=vnfm-test-token
#   VNFM_PROM_EVAL=1s VNFM_AM_GROUP_WAIT=0s VNFM_AM_GROUP_INTERVAL=1s VNFM_PROM_RESEND=1s
#
# Routing (by labels, as Tacker's external-monitoring spec): receiver_type="tacker" and
# function_type="auto_heal" go to $BASE/alert/auto_healing with basic auth, function_type=
# "auto_scale" to $BASE/alert/auto_scaling with a bearer token. Two extra routes let a test
# check refused credentials: an alert labelled auth="none" is sent without credentials, one
# labelled auth="wrong" with a wrong password / token. Prometheus starts with an empty rules
# file ($VNFM_PROM_DIR/rules.yml); tests rewrite it and call `reload`.
#
# Timings: Prometheus sends its first notifications about 5 s after it starts (its notifier
# discovery is hard-coded to 5 s), then within ~1 s of a rule firing; a resolved rule reaches the
# webhook ~4 s after the reload; an alert POSTed to Alertmanager's API arrives in < 10 ms.
set -euo pipefail

DIR=${VNFM_PROM_DIR:-${TMPDIR:-/tmp}/vnfm-prometheus}
PROM_PORT=${VNFM_PROM_PORT:-19090}
AM_PORT=${VNFM_AM_PORT:-19093}
BASE=${VNFM_WEBHOOK_BASE:-http://127.0.0.1:19890}
USER_=${VNFM_PROM_BASIC_USER:-vnfm}
PASS=${VNFM_PROM_BASIC_PASS:-vnfm-secret}
BEARER=${VNFM_PROM_BEARER:-vnfm-test-token}
EVAL=${VNFM_PROM_EVAL:-1s}
GROUP_WAIT=${VNFM_AM_GROUP_WAIT:-0s}
GROUP_INTERVAL=${VNFM_AM_GROUP_INTERVAL:-1s}
RESEND=${VNFM_PROM_RESEND:-1s}

log() { echo "prometheus-dev: $*" >&2; }

wait_ready() { # URL NAME
  for _ in $(seq 1 300); do
    if curl -fsS -o /dev/null "$1"; then return 0; fi
    sleep 0.1
  done
  log "$2 not ready at $1 after 30 s; see $DIR/$2.log"
  return 1
}

install() {
  if ! command -v prometheus >/dev/null || ! command -v prometheus-alertmanager >/dev/null \
     || ! command -v curl >/dev/null; then
    log "installing prometheus, prometheus-alertmanager and curl with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager curl >/dev/null
  fi
}

start() {
  case "$BASE" in
    http://127.0.0.1:*|http://localhost:*|http://\[::1\]:*) ;;
    *) log "VNFM_WEBHOOK_BASE=$BASE is not a loopback URL; refusing"; exit 2 ;;
  esac
  install
  if [ -f "$DIR/prometheus.pid" ] || [ -f "$DIR/alertmanager.pid" ]; then
    log "already started in $DIR (run stop first)"; exit 2
  fi
  mkdir -p "$DIR"
  cat >"$DIR/alertmanager.yml" <<YAML
global:
  resolve_timeout: 5m
route:
  receiver: unrouted
  group_by: ['receiver_type', 'function_type', 'vnf_instance_id', 'vnfInstanceId', 'auth']
  group_wait: $GROUP_WAIT
  group_interval: $GROUP_INTERVAL
  repeat_interval: 1h
  routes:
    - receiver: heal-no-auth
      matchers: ['receiver_type="tacker"', 'function_type="auto_heal"', 'auth="none"']
    - receiver: heal-wrong-auth
      matchers: ['receiver_type="tacker"', 'function_type="auto_heal"', 'auth="wrong"']
    - receiver: scale-wrong-auth
      matchers: ['receiver_type="tacker"', 'function_type="auto_scale"', 'auth="wrong"']
    - receiver: heal
      matchers: ['receiver_type="tacker"', 'function_type="auto_heal"']
    - receiver: scale
      matchers: ['receiver_type="tacker"', 'function_type="auto_scale"']
receivers:
  - name: unrouted
  - name: heal
    webhook_configs:
      - url: '$BASE/alert/auto_healing'
        send_resolved: true
        http_config:
          basic_auth: {username: '$USER_', password: '$PASS'}
  - name: scale
    webhook_configs:
      - url: '$BASE/alert/auto_scaling'
        send_resolved: true
        http_config:
          authorization: {type: Bearer, credentials: '$BEARER'}
  - name: heal-no-auth
    webhook_configs:
      - url: '$BASE/alert/auto_healing'
        send_resolved: true
  - name: heal-wrong-auth
    webhook_configs:
      - url: '$BASE/alert/auto_healing'
        send_resolved: true
        http_config:
          basic_auth: {username: '$USER_', password: 'not-$PASS'}
  - name: scale-wrong-auth
    webhook_configs:
      - url: '$BASE/alert/auto_scaling'
        send_resolved: true
        http_config:
          authorization: {type: Bearer, credentials: 'not-$BEARER'}
YAML
  cat >"$DIR/prometheus.yml" <<YAML
global:
  scrape_interval: 1m
  evaluation_interval: $EVAL
rule_files: ['$DIR/rules.yml']
alerting:
  alertmanagers:
    - api_version: v2
      static_configs:
        - targets: ['127.0.0.1:$AM_PORT']
YAML
  echo 'groups: []' >"$DIR/rules.yml"
  # --cluster.listen-address= : no HA gossip (it would bind 0.0.0.0:9094 and delay sends).
  setsid prometheus-alertmanager \
    --config.file="$DIR/alertmanager.yml" --storage.path="$DIR/am" \
    --web.listen-address="127.0.0.1:$AM_PORT" --web.external-url="http://127.0.0.1:$AM_PORT/" \
    --cluster.listen-address= >"$DIR/alertmanager.log" 2>&1 </dev/null &
  echo $! >"$DIR/alertmanager.pid"
  # --rules.alert.resend-delay defaults to 1m, which delays the first notification by a minute.
  setsid prometheus \
    --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/tsdb" \
    --storage.tsdb.retention.time=1h \
    --web.listen-address="127.0.0.1:$PROM_PORT" --web.external-url="http://127.0.0.1:$PROM_PORT/" \
    --web.enable-lifecycle --rules.alert.resend-delay="$RESEND" \
    >"$DIR/prometheus.log" 2>&1 </dev/null &
  echo $! >"$DIR/prometheus.pid"
  wait_ready "http://127.0.0.1:$AM_PORT/-/ready" alertmanager
  wait_ready "http://127.0.0.1:$PROM_PORT/-/ready" prometheus
  log "prometheus on 127.0.0.1:$PROM_PORT, alertmanager on 127.0.0.1:$AM_PORT, webhooks to $BASE ($DIR)"
}

stop() {
  for p in prometheus alertmanager; do
    f="$DIR/$p.pid"
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$f"
  done
  log "stopped ($DIR)"
}

case "${1:-}" in
  start) start ;;
  install) install ;;
  stop) stop ;;
  reload) curl -fsS -X POST "http://127.0.0.1:$PROM_PORT/-/reload" ;;
  env)
    printf 'VNFM_PROM_DIR=%s\nVNFM_PROM_PORT=%s\nVNFM_AM_PORT=%s\nVNFM_WEBHOOK_BASE=%s\n' \
      "$DIR" "$PROM_PORT" "$AM_PORT" "$BASE" ;;
  *) echo "usage: $0 start|install|stop|reload|env" >&2; exit 2 ;;
esac
