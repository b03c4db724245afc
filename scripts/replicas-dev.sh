#!/usr/bin/env bash
# N `vnfm serve` replicas on one PostgreSQL database, on this machine (issue 27): each on a free
# port of 127.0.0.1, with its own replica id (VNFM_REPLICA_ID=replica-1 ... replica-N), its log
# in DIR.
#
#   scripts/replicas-dev.sh start DIR N [CONFIG]
#                                   start N replicas (1 to 16) on one database and print
#                                   `export VNFM_REPLICAS=http://127.0.0.1:P1,http://...` once
#                                   every one listens (and `export VNFM_STATE_URL=...`)
#   scripts/replicas-dev.sh stop DIR     SIGTERM every replica of DIR (SIGKILL after
#                                   VNFM_REPLICAS_TIMEOUT s), and the cluster start made, if any
#   scripts/replicas-dev.sh kill DIR I   SIGKILL replica I (a crash: its leases expire, another
#                                   replica takes its operations over)
#   scripts/replicas-dev.sh revive DIR I start replica I again (same id, a new port); prints the
#                                   new VNFM_REPLICAS
#   scripts/replicas-dev.sh env DIR      print the exports again
#
# The database: VNFM_STATE_URL when set; else a new database `vnfm_replicas_<time>` on the
# server of VNFM_TEST_POSTGRES_URL (what `scripts/postgres-dev.sh start` prints); else a
# cluster of its own started with scripts/postgres-dev.sh in DIR/pg (stopped by `stop`).
# A database made here is left after `stop` (to look into); the cluster in DIR/pg is not kept
# running.
#
# The configuration: CONFIG when given (its [server] listen is overridden: each replica gets
# VNFM_LISTEN=127.0.0.1:0), else DIR/vnfm.toml written with the simulated cloud (the built-in
# demo cloud, or VNFM_REPLICAS_CLOUD), zone reselection and best effort, both alert endpoints on
# without credentials (loopback only), loopback subscribers allowed, and `[state]
# lease_seconds = 10` so that a killed replica's operations are taken over within seconds.
#
# Files in DIR: replica-I.log (stderr and stdout), replica-I.pid, replica-I.addr, state-url,
# vnfm.toml (unless CONFIG).
#
# Environment (all optional):
#   VNFM_BIN               the binary (default: $CARGO_TARGET_DIR/debug/vnfm, else
#                          target/debug/vnfm of the repository)
#   VNFM_STATE_URL         the database (see above)
#   VNFM_REPLICAS_CLOUD    the cloud file of the default configuration
#   VNFM_REPLICAS_TIMEOUT  seconds to wait for a replica to listen or to stop (default 30)
#   VNFM_LOG, ...          every other VNFM_* variable reaches the replicas as it is
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TIMEOUT=${VNFM_REPLICAS_TIMEOUT:-30}
PSQL=${VNFM_PG_BIN:-/usr/lib/postgresql/15/bin}/psql

say() { printf 'replicas-dev: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

binary() {
  local bin=${VNFM_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/vnfm}
  case "$bin" in /*) ;; *) bin=$(pwd)/$bin ;; esac
  [ -x "$bin" ] || die "no vnfm binary at $bin (cargo build -p vnfm-cli, or set VNFM_BIN)"
  echo "$bin"
}

# The database URL for DIR: VNFM_STATE_URL, a new database on VNFM_TEST_POSTGRES_URL's
# server, or a cluster of its own in DIR/pg.
state_url() {
  local dir=$1
  if [ -n "${VNFM_STATE_URL:-}" ]; then
    echo "$VNFM_STATE_URL"
    return
  fi
  local admin=${VNFM_TEST_POSTGRES_URL:-}
  if [ -z "$admin" ]; then
    say "neither VNFM_STATE_URL nor VNFM_TEST_POSTGRES_URL is set: starting a cluster in $dir/pg"
    # As root the cluster runs as the user postgres, who must reach DIR/pg.
    [ "$(id -u)" = 0 ] && chmod o+x "$dir"
    admin=$("$ROOT/scripts/postgres-dev.sh" start "$dir/pg" | sed -n 's/^export VNFM_TEST_POSTGRES_URL=//p')
    [ -n "$admin" ] || die "scripts/postgres-dev.sh start $dir/pg printed no URL"
  fi
  [ -x "$PSQL" ] || die "no psql at $PSQL to create the database (set VNFM_STATE_URL instead)"
  local db
  db=vnfm_replicas_$(date +%s)_$$
  "$PSQL" "$admin" -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$db\" TEMPLATE template0" >&2 ||
    die "cannot create the database $db on ${admin%%\?*}"
  # The admin URL with its database replaced by $db.
  local scheme=${admin%%://*} rest=${admin#*://} query=""
  case "$rest" in *\?*) query="?${rest#*\?}"; rest=${rest%%\?*} ;; esac
  rest=${rest%%/*}
  echo "$scheme://$rest/$db$query"
}

default_config() {
  local file=$1 cloud=${VNFM_REPLICAS_CLOUD:-}
  {
    echo "# scripts/replicas-dev.sh: the replicas' configuration (the state: VNFM_STATE_URL)"
    if [ -n "$cloud" ]; then
      case "$cloud" in /*) ;; *) cloud=$(pwd)/$cloud ;; esac
      printf '[vim]\nkind = "sim"\ncloud = "%s"\n\n' "$cloud"
    else
      printf '[vim]\nkind = "sim"\n\n'
    fi
    cat <<'TOML'
[state]
lease_seconds = 10

[placement]
reselect_zones = true
fallback_best_effort = true

[notifications]
allow = ["127.0.0.0/8"]

[prometheus_plugin]
auto_healing = true
auto_scaling = true
timer_interval = 5
scale_cooldown = 30
TOML
  } >"$file"
}

# Starts replica I of DIR in the background; waits until it says where it listens.
start_one() {
  local dir=$1 i=$2 bin url config
  bin=$(binary)
  url=$(cat "$dir/state-url")
  config=$(cat "$dir/config-path")
  local log=$dir/replica-$i.log
  : >"$log"
  (
    cd "$ROOT"
    export VNFM_STATE_URL=$url VNFM_REPLICA_ID=replica-$i VNFM_LISTEN=127.0.0.1:0
    unset VNFM_STATE VNFM_TEST_POSTGRES_URL
    exec "$bin" --config "$config" serve
  ) >>"$log" 2>&1 </dev/null &
  echo $! >"$dir/replica-$i.pid"
  local waited=0 addr=""
  while [ -z "$addr" ]; do
    addr=$(sed -n 's/.*listening on http:\/\/\([0-9.:]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$addr" ] && break
    if ! kill -0 "$(cat "$dir/replica-$i.pid")" 2>/dev/null; then
      die "replica $i exited before listening; $log: $(tail -n 5 "$log")"
    fi
    [ "$waited" -ge $((TIMEOUT * 10)) ] && die "replica $i did not listen within $TIMEOUT s; see $log"
    sleep 0.1
    waited=$((waited + 1))
  done
  echo "http://$addr" >"$dir/replica-$i.addr"
  say "replica-$i pid $(cat "$dir/replica-$i.pid") on http://$addr (log $log)"
}

print_env() {
  local dir=$1 urls="" f
  for f in $(ls "$dir"/replica-*.addr 2>/dev/null | sort -V); do
    urls=${urls:+$urls,}$(cat "$f")
  done
  [ -n "$urls" ] || die "no replica started in $dir"
  printf 'export VNFM_REPLICAS=%s\n' "$urls"
  printf 'export VNFM_STATE_URL=%s\n' "$(cat "$dir/state-url")"
}

# Whether PID is a vnfm serve (a stale pid file may name a process reused since).
is_replica() {
  tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q -- " serve"
}

stop_one() {
  local dir=$1 i=$2 sig=$3 pid
  [ -f "$dir/replica-$i.pid" ] || return 0
  pid=$(cat "$dir/replica-$i.pid")
  if is_replica "$pid"; then
    kill "-$sig" "$pid" 2>/dev/null || true
    local waited=0
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt $((TIMEOUT * 10)) ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "replica-$i (pid $pid) did not stop within $TIMEOUT s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    say "replica-$i stopped (SIG$sig)"
  fi
  rm -f "$dir/replica-$i.pid" "$dir/replica-$i.addr"
}

cmd=${1:-}
dir=${2:-}
[ -n "$dir" ] || { echo "usage: $0 start DIR N [CONFIG] | stop DIR | kill DIR I | revive DIR I | env DIR" >&2; exit 2; }
case "$dir" in /*) ;; *) dir=$(pwd)/$dir ;; esac

case "$cmd" in
  start)
    n=${3:-}
    case "$n" in '' | *[!0-9]*) die "N must be a number of replicas (1 to 16), not '$n'" ;; esac
    [ "$n" -ge 1 ] && [ "$n" -le 16 ] || die "N must be 1 to 16, not $n"
    mkdir -p "$dir"
    ls "$dir"/replica-*.pid >/dev/null 2>&1 && die "$dir already has replicas (run stop first)"
    binary >/dev/null
    if [ -n "${4:-}" ]; then
      [ -f "$4" ] || die "no configuration file $4"
      config=$4
      case "$config" in /*) ;; *) config=$(pwd)/$config ;; esac
    else
      config=$dir/vnfm.toml
      default_config "$config"
    fi
    echo "$config" >"$dir/config-path"
    state_url "$dir" >"$dir/state-url"
    # The first replica migrates the schema alone; the others start together.
    start_one "$dir" 1
    for i in $(seq 2 "$n"); do start_one "$dir" "$i"; done
    print_env "$dir"
    ;;
  stop)
    for f in $(ls "$dir"/replica-*.pid 2>/dev/null); do
      i=${f##*/replica-}
      stop_one "$dir" "${i%.pid}" TERM
    done
    [ -d "$dir/pg" ] && "$ROOT/scripts/postgres-dev.sh" stop "$dir/pg"
    true
    ;;
  kill)
    [ -n "${3:-}" ] || die "usage: $0 kill DIR I"
    stop_one "$dir" "$3" KILL
    ;;
  revive)
    [ -n "${3:-}" ] || die "usage: $0 revive DIR I"
    [ -f "$dir/state-url" ] || die "no replicas were started in $dir"
    [ -f "$dir/replica-$3.pid" ] && is_replica "$(cat "$dir/replica-$3.pid")" &&
      die "replica-$3 is running"
    start_one "$dir" "$3"
    print_env "$dir"
    ;;
  env) print_env "$dir" ;;
  *) die "unknown command '$cmd' (start, stop, kill, revive, env)" ;;
esac
