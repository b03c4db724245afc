#!/usr/bin/env bash
# A throw-away PostgreSQL 15 cluster for vnfm's PostgreSQL store tests
# (vnfm-cli/src/store_postgres.rs), on 127.0.0.1 only: initdb in DIR (as the unprivileged user
# `postgres` when run as root: initdb refuses root), a free TCP port of 127.0.0.1, its Unix
# socket in DIR, trust authentication for loopback and the socket only, durability off (fsync,
# full_page_writes: a crash loses the cluster, which is thrown away anyway).
#
#   scripts/postgres-dev.sh start DIR [--tls]
#                                       install postgresql-15 if missing (apt-get), initdb in
#                                       DIR/data, start, wait until it accepts connections,
#                                       write the URL to DIR/url and print it as an export;
#                                       with --tls (or VNFM_PG_TLS=1) the cluster also speaks
#                                       TLS (below)
#   scripts/postgres-dev.sh env DIR     print the export again (the cluster must be running)
#   scripts/postgres-dev.sh stop DIR    stop the cluster started in DIR (fast shutdown, then
#                                       SIGKILL after VNFM_PG_TIMEOUT s); DIR itself is kept
#
# Typical use:   eval "$(scripts/postgres-dev.sh start /tmp/vnfm-pg)"
#                cargo test -p vnfm-cli --lib store_postgres
#                scripts/postgres-dev.sh stop /tmp/vnfm-pg
#
# Export printed by start and env:
#   VNFM_TEST_POSTGRES_URL   postgres://postgres@127.0.0.1:PORT/postgres (no password: trust
#                            on loopback); the tests create one database per test from it
#   VNFM_TEST_POSTGRES_TLS   with --tls only: DIR/tls, where ca.pem is the CA that signed the
#                            server's certificate (for `sslrootcert=DIR/tls/ca.pem`), and
#                            client.pem / client.key a client certificate of the role vnfm_cert
#
# --tls: openssl makes a CA (DIR/tls/ca.pem, ECDSA P-256, 30 days), the server's certificate
# (subjectAltName IP 127.0.0.1 and DNS localhost) and a client certificate (CN vnfm_cert);
# the cluster gets ssl = on with them and ssl_ca_file = ca.pem (client certificates asked for,
# not required). Authentication stays trust, plain or TLS, except two roles of the TLS tests
# (vnfm-cli/src/store_postgres/tls.rs), which the tests create: vnfm_scram (scram-sha-256,
# TLS only: channel binding) and vnfm_cert (its client certificate, TLS only). Plain
# connections are served as without --tls.
#
# Environment (all optional):
#   VNFM_PG_BIN      the PostgreSQL binaries (default: /usr/lib/postgresql/15/bin; when
#                    initdb is not there, `apt-get install postgresql-15`)
#   VNFM_PG_PORT     the port (default: a free port of 127.0.0.1, asked of the kernel)
#   VNFM_PG_TIMEOUT  seconds to wait for start and stop (default: 60)
#   VNFM_PG_TLS      1: as --tls
#
# DIR must be new or empty (start refuses a DIR with a cluster in it); as root it is handed to
# the user postgres, so its parent must be searchable by that user (e.g. a `mktemp -d` in /tmp).
# Measured on a 2-core machine: initdb + start 2-8 s (the longer while other builds run).
set -euo pipefail

BIN=${VNFM_PG_BIN:-/usr/lib/postgresql/15/bin}
TIMEOUT=${VNFM_PG_TIMEOUT:-60}
IP=127.0.0.1
PG_USER=postgres

say() { printf 'postgres-dev: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

# Runs a command as the cluster's owner: `postgres` when this script runs as root, else the
# calling user.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$PG_USER" -- "$@"
  else
    "$@"
  fi
}

install() {
  [ -x "$BIN/initdb" ] && return 0
  [ -z "${VNFM_PG_BIN:-}" ] || die "VNFM_PG_BIN=$BIN has no initdb (expected PostgreSQL's bin directory)"
  [ "$(id -u)" = 0 ] || die "$BIN/initdb is missing and installing postgresql-15 needs root (apt-get)"
  say "installing postgresql-15 (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # Neither the package's own cluster nor its service are wanted: this script starts its own,
  # on loopback.
  mkdir -p /etc/postgresql-common
  [ -f /etc/postgresql-common/createcluster.conf ] ||
    echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.conf
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  # --force-confold: keep the createcluster.conf above when postgresql-common brings its own.
  apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confdef \
    -o Dpkg::Options::=--force-confold postgresql-15 >/dev/null
  rm -f /usr/sbin/policy-rc.d
  [ -x "$BIN/initdb" ] || die "apt-get installed postgresql-15 but $BIN/initdb is still missing"
}

free_port() {
  if [ -n "${VNFM_PG_PORT:-}" ]; then
    echo "$VNFM_PG_PORT"
  elif command -v python3 >/dev/null; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
  else
    # No python: a random port of 20000-59999 that nothing answers on.
    local p
    for _ in $(seq 1 100); do
      p=$((20000 + RANDOM % 40000))
      (exec 3<>"/dev/tcp/$IP/$p") 2>/dev/null || { echo "$p"; return 0; }
    done
    die "no free port of $IP found in 100 tries (set VNFM_PG_PORT)"
  fi
}

# The CA, server and client certificates of --tls, in DIR/tls (openssl, ECDSA P-256).
make_certs() {
  local tls=$1/tls
  if ! command -v openssl >/dev/null; then
    [ "$(id -u)" = 0 ] || die "--tls needs the openssl command (apt-get install openssl, as root)"
    say "installing openssl (apt)"
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null; } \
      || die "--tls needs the openssl command and apt-get could not install it"
  fi
  mkdir -p "$tls"
  # Each step checked: the subshell runs with `set -e` outside any `||` or `if` (where errexit
  # would be ignored); openssl's messages kept in DIR/tls/openssl.log, shown when a step fails.
  local made=0
  set +e
  (
    set -e
    cd "$tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
      -out ca.pem -days 30 -subj "/CN=vnfm test CA" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
      2>>openssl.log
    printf 'subjectAltName=IP:%s,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' \
      "$IP" >server.ext
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' \
      >client.ext
    for who in server client; do
      local cn=localhost
      [ "$who" = client ] && cn=vnfm_cert
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$who.key" \
        -out "$who.csr" -subj "/CN=$cn" 2>>openssl.log
      openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
        -out "$who.pem" -days 30 -extfile "$who.ext" 2>>openssl.log
    done
    rm -f ./*.csr ./*.ext ca.srl
    chmod 600 ./*.key
  )
  made=$?
  set -e
  if [ "$made" != 0 ]; then
    cat "$tls/openssl.log" >&2 2>/dev/null
    die "openssl could not make the certificates in $tls"
  fi
  [ "$(id -u)" = 0 ] && chown -R "$PG_USER:" "$tls"
  return 0
}

url_of() { printf 'postgres://%s@%s:%s/postgres' "$PG_USER" "$IP" "$1"; }

start() {
  local dir=$1 tls=$2
  install
  if [ "$(id -u)" = 0 ] && ! id -u "$PG_USER" >/dev/null 2>&1; then
    say "creating the system user $PG_USER (initdb refuses root)"
    useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/bash "$PG_USER"
  fi
  [ -f "$dir/data/PG_VERSION" ] && die "$dir already holds a cluster (run stop, then remove it)"
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    chown "$PG_USER:" "$dir"
    chmod 700 "$dir"
    as_owner test -w "$dir" ||
      die "the user $PG_USER cannot write $dir (is a parent directory closed to it?)"
  fi
  local port
  port=$(free_port)
  as_owner "$BIN/initdb" --pgdata="$dir/data" --username="$PG_USER" --auth=trust \
    --encoding=UTF8 --locale=C.UTF-8 --no-instructions >"$dir/initdb.log" 2>&1 ||
    die "initdb failed in $dir/data; see $dir/initdb.log: $(tail -n 3 "$dir/initdb.log")"
  # Loopback and the socket only (initdb's trust lines also allow ::1, which is not listened on).
  local hba=""
  if [ "$tls" = 1 ]; then
    make_certs "$dir"
    # The roles of the TLS tests: a password with channel binding, a client certificate.
    hba="hostssl all vnfm_scram $IP/32 scram-sha-256
hostssl all vnfm_cert $IP/32 cert
host    all vnfm_scram,vnfm_cert $IP/32 reject
"
  fi
  cat >"$dir/data/pg_hba.conf" <<CONF
local all all trust
${hba}host  all all $IP/32 trust
CONF
  cat >>"$dir/data/postgresql.conf" <<CONF

# scripts/postgres-dev.sh: a throw-away test cluster
listen_addresses = '$IP'
port = $port
unix_socket_directories = '$dir'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
log_min_messages = warning
CONF
  if [ "$tls" = 1 ]; then
    cat >>"$dir/data/postgresql.conf" <<CONF
ssl = on
ssl_cert_file = '$dir/tls/server.pem'
ssl_key_file = '$dir/tls/server.key'
ssl_ca_file = '$dir/tls/ca.pem'
CONF
  fi
  if ! as_owner "$BIN/pg_ctl" --pgdata="$dir/data" --log="$dir/postgres.log" --wait \
    --timeout="$TIMEOUT" start >/dev/null; then
    die "PostgreSQL did not start on $IP:$port within $TIMEOUT s; see $dir/postgres.log: $(tail -n 3 "$dir/postgres.log" 2>/dev/null)"
  fi
  as_owner "$BIN/pg_isready" -h "$IP" -p "$port" -U "$PG_USER" -t "$TIMEOUT" >/dev/null ||
    die "PostgreSQL started but does not answer on $IP:$port; see $dir/postgres.log"
  url_of "$port" >"$dir/url"
  say "PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') on $IP:$port ($dir)"
  env_ "$dir"
}

env_() {
  local dir=$1
  [ -f "$dir/url" ] || die "no cluster started in $dir (no $dir/url)"
  printf 'export VNFM_TEST_POSTGRES_URL=%s\n' "$(cat "$dir/url")"
  if grep -q '^ssl = on' "$dir/data/postgresql.conf" 2>/dev/null; then
    printf 'export VNFM_TEST_POSTGRES_TLS=%s\n' "$dir/tls"
  fi
}

stop() {
  local dir=$1
  if [ ! -f "$dir/data/postmaster.pid" ]; then
    say "nothing running in $dir"
    return 0
  fi
  local pid
  pid=$(head -n 1 "$dir/data/postmaster.pid")
  if ! as_owner "$BIN/pg_ctl" --pgdata="$dir/data" --mode=fast --wait --timeout="$TIMEOUT" \
    stop >/dev/null 2>&1; then
    # Only the postmaster of this DIR: a stale pid file may name a process reused since.
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "postgres.*$dir/data"; then
      say "PostgreSQL (pid $pid) did not stop within $TIMEOUT s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    else
      say "no PostgreSQL of $dir runs (stale pid file naming $pid)"
    fi
    rm -f "$dir/data/postmaster.pid"
  fi
  rm -f "$dir/url"
  say "stopped ($dir)"
}

cmd=${1:-}
dir=${2:-}
tls=${VNFM_PG_TLS:-0}
case "${3:-}" in
  "") ;;
  --tls) [ "$cmd" = start ] || die "--tls goes with start only"; tls=1 ;;
  *) die "usage: $0 start DIR [--tls]" ;;
esac
case "$cmd" in
  start | env | stop) [ -n "$dir" ] || die "usage: $0 $cmd DIR" ;;
  *) echo "usage: $0 start DIR [--tls] | env DIR | stop DIR" >&2; exit 2 ;;
esac
case "$dir" in /*) ;; *) dir=$(pwd)/$dir ;; esac
case "$cmd" in
  start) start "$dir" "$tls" ;;
  env) env_ "$dir" ;;
  stop) stop "$dir" ;;
esac
