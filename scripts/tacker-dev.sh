#!/usr/bin/env bash
# OpenStack Tacker 16.0.0 (PyPI) on 127.0.0.1, with vnfm serve as its NFVO: tacker-server (the
# v2 API, /vnflcm/v2/...) and tacker-conductor, on SQLite and the RabbitMQ of
# scripts/openstack-dev.sh (start that first: Tacker's server and conductor talk over it, and
# Tacker deploys to that cloud). Used by the real-Tacker suite (scripts/tacker/real_tacker.py).
#
#   scripts/tacker-dev.sh start   install what is missing, (re)write tacker.conf, start what is
#                                 not running (restart both when tacker.conf changed), wait
#                                 until the API answers and the conductor listens, print the
#                                 exports
#   scripts/tacker-dev.sh install install Tacker's venv when missing and start nothing
#   scripts/tacker-dev.sh env     print the exports (Tacker must be running)
#   scripts/tacker-dev.sh status  whether tacker-server and tacker-conductor run
#   scripts/tacker-dev.sh stop    stop both (the conductor ignores SIGTERM: SIGKILL)
#
# Typical use:   eval "$(scripts/openstack-dev.sh start)"
#                VNFM_TACKER_NFVO=http://127.0.0.1:19890 VNFM_TACKER_CLIENT_SECRET=... \
#                    scripts/tacker-dev.sh start
#
# Environment (all optional):
#   VNFM_TACKER_DIR     venv, configuration, database, logs   (default: $HOME/.cache/vnfm-tacker)
#   VNFM_TACKER_PORT    tacker-server's port (default: the one of the last start, else a free
#                       port of 127.0.0.1)
#   VNFM_TACKER_NFVO    the base URL of vnfm serve, Tacker's NFVO  (default: http://127.0.0.1:19890)
#   VNFM_TACKER_CLIENT_ID, VNFM_TACKER_CLIENT_SECRET
#                       the OAuth 2.0 client of vnfm serve's [[server.oauth2.clients]] that
#                       Tacker authenticates as (default: tacker / tacker-secret)
#   VNFM_TACKER_FALLBACK_BEST_EFFORT  [v2_vnfm] placement_fallback_best_effort (default: False)
#   VNFM_TACKER_MTLS_CA, VNFM_TACKER_MTLS_CLIENT_CERT
#                       both set: Tacker's OAuth 2.0 over mutual TLS towards the NFVO
#                       ([v2_nfvo] use_client_secret_basic = False, mtls_ca_cert_file = the CA
#                       of vnfm serve's certificate, mtls_client_cert_file = Tacker's
#                       certificate and key in one PEM file; VNFM_TACKER_NFVO is then https://)
#   VNFM_TACKER_LOCAL_ZONES  set (e.g. "az3"): Tacker alone, no external NFVO ([v2_nfvo]
#                       use_external_nfvo = False): its built-in grant puts every VNFC in the
#                       first zone of this list (test_grant_zone_list), and the packages come
#                       from Tacker's own package API (scripts/tacker/crowded.py)
#   VNFM_TACKER_AMQP    transport_url (default: the RabbitMQ of scripts/openstack-dev.sh,
#                       rabbit://guest:guest@127.0.0.1:5672/)
#   VNFM_TACKER_FRESH   1: stop Tacker and start from an empty database (the venv is kept)
#   PYTHON              the interpreter the venv is made with (default: python3.11, else python3)
#
# Why it is set up this way (Tacker 16.0.0 facts, issue 29):
# - `tacker-db-manage upgrade head` fails on SQLite (its migrations ALTER COLUMN): the schema is
#   created from the models (`BASE.metadata.create_all` over tacker.db.migration.models.head),
#   then stamped (`tacker-db-manage stamp head`), as a migrated database would be.
# - SQLite in WAL mode: in the default journal mode the server's and the conductor's writes
#   collide and an instantiate fails "database is locked".
# - `auth_strategy = noauth`: Tacker's own API without Keystone (the VIM still is Keystone:
#   the instantiate request's vimConnectionInfo).
# - control_exchange = vnfm-tacker: Tacker's RPC topics are kept apart from any other Tacker
#   on the same RabbitMQ.
# - the conductor ignores SIGTERM for over a minute: stop SIGKILLs it.
set -euo pipefail

TACKER_VERSION=16.0.0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${VNFM_TACKER_DIR:-$HOME/.cache/vnfm-tacker}
CONSTRAINTS=$ROOT/scripts/tacker/constraints.txt
NFVO=${VNFM_TACKER_NFVO:-http://127.0.0.1:19890}
NFVO=${NFVO%/}
CLIENT_ID=${VNFM_TACKER_CLIENT_ID:-tacker}
CLIENT_SECRET=${VNFM_TACKER_CLIENT_SECRET:-tacker-secret}
MTLS_CA=${VNFM_TACKER_MTLS_CA:-}
LOCAL_ZONES=${VNFM_TACKER_LOCAL_ZONES:-}
MTLS_CLIENT_CERT=${VNFM_TACKER_MTLS_CLIENT_CERT:-}
AMQP=${VNFM_TACKER_AMQP:-rabbit://guest:guest@127.0.0.1:5672/}
IP=127.0.0.1
VENV=$DIR/venv
RUN=$DIR/run     # pid files and logs
CONF=$DIR/conf
DATA=$DIR/data
DB=$DATA/tacker.sqlite

say() { printf 'tacker-dev: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
now() { date +%s; }
is_running() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
http_code() { curl -s -o /dev/null -w '%{http_code}' "$1" || true; }

case "${VNFM_TACKER_FALLBACK_BEST_EFFORT:-0}" in
    1|true|True|yes|on) FALLBACK=True ;;
    0|false|False|no|off|"") FALLBACK=False ;;
    *) die "VNFM_TACKER_FALLBACK_BEST_EFFORT=$VNFM_TACKER_FALLBACK_BEST_EFFORT is not a boolean" ;;
esac

python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"
    elif command -v python3.11 >/dev/null 2>&1; then echo python3.11
    else echo python3
    fi
}

stop() {
    local name pid
    for name in tacker-server tacker-conductor; do
        if is_running "$name"; then
            pid=$(cat "$RUN/$name.pid")
            # its process group (setsid at start): the conductor's worker too
            kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
            say "stopped $name ($pid)"
        fi
        rm -f "$RUN/$name.pid"
    done
}

install() {
    local want="tacker==$TACKER_VERSION $(sha256sum "$CONSTRAINTS" | cut -c1-16)"
    if [ -f "$VENV/.installed" ] && [ "$(cat "$VENV/.installed")" = "$want" ]; then
        return 0
    fi
    [ -x "$VENV/bin/python" ] || "$(python)" -m venv "$VENV"
    say "installing tacker==$TACKER_VERSION into $VENV (constraints $CONSTRAINTS; ~1 min)"
    "$VENV/bin/pip" install -q --disable-pip-version-check -c "$CONSTRAINTS" \
        "tacker==$TACKER_VERSION" > "$RUN/pip.log" 2>&1 \
        || { tail -30 "$RUN/pip.log" >&2; die "pip install failed (log: $RUN/pip.log)"; }
    echo "$want" > "$VENV/.installed"
}

pick_port() {
    if [ -n "${VNFM_TACKER_PORT:-}" ]; then echo "$VNFM_TACKER_PORT"; return; fi
    if [ -s "$DATA/port" ]; then cat "$DATA/port"; return; fi
    "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Writes tacker.conf to $1.
write_config() {
    local port=$1 out=$2
    cat > "$out" <<EOF
[DEFAULT]
auth_strategy = noauth
bind_host = $IP
bind_port = $port
api_workers = 1
transport_url = $AMQP
control_exchange = vnfm-tacker
state_path = $DATA
api_paste_config = $CONF/api-paste.ini
debug = True
use_stderr = True
[database]
connection = sqlite:///$DB
[oslo_concurrency]
lock_path = $DATA/lock
[vnf_package]
vnf_package_csar_path = $DATA/vnfpackages
[v2_vnfm]
endpoint = http://$IP:$port
placement_fallback_best_effort = $FALLBACK
openstack_vim_stack_create_timeout = 5
[v2_nfvo]
$(nfvo_section)
EOF
}

# [v2_nfvo]: vnfm serve as the external NFVO, or Tacker's built-in grant (VNFM_TACKER_LOCAL_ZONES).
nfvo_section() {
    if [ -n "$LOCAL_ZONES" ]; then
        printf 'use_external_nfvo = False\ntest_grant_zone_list = %s\n' "$LOCAL_ZONES"
        return
    fi
    printf 'use_external_nfvo = True\nendpoint = %s\ntoken_endpoint = %s/token\nclient_id = %s\n' \
        "$NFVO" "$NFVO" "$CLIENT_ID"
    nfvo_auth
    printf 'grant_api_version = 1.4.0\nvnfpkgm_api_version = 2.1.0\nvnf_package_cache_dir = %s\n' \
        "$DATA/vnf_package_cache"
}

# How Tacker authenticates to the NFVO's token endpoint: HTTP Basic with the secret, or its
# client certificate (OAuth 2.0 mutual TLS, RFC 8705) when both mTLS files are given.
nfvo_auth() {
    if [ -n "$MTLS_CA" ] && [ -n "$MTLS_CLIENT_CERT" ]; then
        printf 'use_client_secret_basic = False\nmtls_ca_cert_file = %s\nmtls_client_cert_file = %s\n' \
            "$MTLS_CA" "$MTLS_CLIENT_CERT"
    else
        printf 'client_password = %s\nuse_client_secret_basic = True\n' "$CLIENT_SECRET"
    fi
}

# Tacker alone onboards packages through its own v1 package API, which under noauth has no
# request context (a KeyError 'tacker.context': Tacker's v2 API makes its own, v1 does not): a
# paste filter of a few lines gives v1 requests the admin context, as v2's noauth does.
local_package_api() {
    local site; site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    cat > "$site/vnfm_tacker_noauth.py" <<'PY'
"""vnfm's test shim (scripts/tacker-dev.sh): the admin context for Tacker's v1 API under noauth."""
from tacker import context


def factory(global_conf, **local_conf):
    def filter_(app):
        def wrapped(environ, start_response):
            environ.setdefault("tacker.context", context.Context(
                user_id="vnfm-suite", tenant_id="6a1c0b2e-0f5d-4c3b-9a8e-7d6c5b4a3f21",
                is_admin=True, roles=["admin"]))
            return app(environ, start_response)
        return wrapped
    return filter_
PY
    sed -i 's/^noauth = request_id catch_errors vnfpkgmapp_v1$/noauth = request_id catch_errors vnfmnoauth vnfpkgmapp_v1/' "$CONF/api-paste.ini"
    printf '\n[filter:vnfmnoauth]\npaste.filter_factory = vnfm_tacker_noauth:factory\n' >> "$CONF/api-paste.ini"
}

create_db() {
    [ -f "$DB" ] && return 0
    say "creating the database $DB (create_all over the head models, WAL, stamp head)"
    "$VENV/bin/python" - "$DB" <<'EOF'
import sys
import sqlalchemy
from tacker.db.migration.models import head  # noqa: F401 (registers every model)
from tacker.db import model_base

engine = sqlalchemy.create_engine("sqlite:///" + sys.argv[1])
with engine.connect() as c:
    mode = c.exec_driver_sql("PRAGMA journal_mode=WAL").scalar()
    if mode != "wal":
        sys.exit(f"tacker-dev: journal_mode is {mode}, not wal")
model_base.BASE.metadata.create_all(engine)
EOF
    "$VENV/bin/tacker-db-manage" --config-file "$CONF/tacker.conf" stamp head \
        > "$RUN/db-manage.log" 2>&1 \
        || { tail -20 "$RUN/db-manage.log" >&2; rm -f "$DB"; die "tacker-db-manage stamp head failed"; }
}

start_daemon() { # name command...
    local name=$1; shift
    is_running "$name" && return 0
    ( cd "$DATA" && exec setsid "$@" ) >> "$RUN/$name.log" 2>&1 < /dev/null &
    echo $! > "$RUN/$name.pid"
    say "started $name ($!)"
}

# Whether a consumer reads the conductor's v2 RPC queue (kombu, from Tacker's venv).
conductor_listens() {
    "$VENV/bin/python" - "$AMQP" <<'EOF' 2>/dev/null
import sys
import kombu
url = sys.argv[1].replace("rabbit://", "amqp://", 1)  # kombu names the scheme amqp
with kombu.Connection(url, connect_timeout=5) as c:
    q = c.default_channel.queue_declare(queue="TACKER_CONDUCTOR_V2", passive=True)
    sys.exit(0 if q.consumer_count > 0 else 1)
EOF
}

start() {
    local t0; t0=$(now)
    mkdir -p "$RUN" "$CONF" "$DATA/lock" "$DATA/vnfpackages" "$DATA/vnf_package_cache"
    [ -f "$CONSTRAINTS" ] || die "no constraints file $CONSTRAINTS"
    (exec 3<>"/dev/tcp/$IP/5672") 2>/dev/null \
        || die "no RabbitMQ on $IP:5672 (start the OpenStack first: eval \"\$(scripts/openstack-dev.sh start)\")"
    local fresh=0
    case "${VNFM_TACKER_FRESH:-0}" in
        1|true|True|yes|on) fresh=1 ;;
        0|false|False|no|off|"") ;;
        *) die "VNFM_TACKER_FRESH=$VNFM_TACKER_FRESH is not a boolean" ;;
    esac
    if [ "$fresh" = 1 ]; then
        stop
        rm -f "$DB" "$DB-wal" "$DB-shm"
    fi
    install
    if [ -n "$MTLS_CA$MTLS_CLIENT_CERT" ] && { [ -z "$MTLS_CA" ] || [ -z "$MTLS_CLIENT_CERT" ]; }; then
        die "set both VNFM_TACKER_MTLS_CA and VNFM_TACKER_MTLS_CLIENT_CERT, or neither"
    fi
    local port; port=$(pick_port)
    cp "$VENV/etc/tacker/api-paste.ini" "$CONF/api-paste.ini"
    if [ -n "$LOCAL_ZONES" ]; then local_package_api; fi
    write_config "$port" "$CONF/tacker.conf.new"
    if ! cmp -s "$CONF/tacker.conf.new" "$CONF/tacker.conf" 2>/dev/null; then
        if is_running tacker-server || is_running tacker-conductor; then
            say "tacker.conf changed: restarting"
            stop
        fi
        mv "$CONF/tacker.conf.new" "$CONF/tacker.conf"
    else
        rm -f "$CONF/tacker.conf.new"
    fi
    echo "$port" > "$DATA/port"
    create_db
    start_daemon tacker-conductor "$VENV/bin/tacker-conductor" --config-file "$CONF/tacker.conf"
    start_daemon tacker-server "$VENV/bin/tacker-server" --config-file "$CONF/tacker.conf"
    local end=$(( $(now) + 180 ))
    until [ "$(http_code "http://$IP:$port/vnflcm/v2/api_versions")" = 200 ]; do
        is_running tacker-server || { tail -20 "$RUN/tacker-server.log" >&2; die "tacker-server exited (log: $RUN/tacker-server.log)"; }
        [ "$(now)" -lt "$end" ] || die "tacker-server did not answer within 180s (log: $RUN/tacker-server.log)"
        sleep 0.5
    done
    # the conductor is ready once its v2 RPC server consumes its queue on RabbitMQ
    until conductor_listens; do
        is_running tacker-conductor || { tail -20 "$RUN/tacker-conductor.log" >&2; die "tacker-conductor exited (log: $RUN/tacker-conductor.log)"; }
        [ "$(now)" -lt "$end" ] || die "tacker-conductor does not consume TACKER_CONDUCTOR_V2 after 180s (log: $RUN/tacker-conductor.log)"
        sleep 0.5
    done
    say "ready in $(( $(now) - t0 ))s on http://$IP:$port (NFVO $NFVO); logs in $RUN"
    env_exports
}

env_exports() {
    [ -s "$DATA/port" ] || die "Tacker was never started (run: $0 start)"
    local port; port=$(cat "$DATA/port")
    [ "$(http_code "http://$IP:$port/vnflcm/v2/api_versions")" = 200 ] \
        || die "tacker-server does not answer on $IP:$port (run: $0 start)"
    cat <<EOF
export VNFM_TACKER_URL=http://$IP:$port
export VNFM_TACKER_CONF=$CONF/tacker.conf
export VNFM_TACKER_LOGS=$RUN
EOF
}

status() {
    local name
    for name in tacker-server tacker-conductor; do
        if is_running "$name"; then echo "$name: running ($(cat "$RUN/$name.pid"))"
        else echo "$name: stopped"; fi
    done
}

case "${1:-}" in
    start) start ;;
    install) mkdir -p "$RUN"; [ -f "$CONSTRAINTS" ] || die "no constraints file $CONSTRAINTS"; install ;;
    stop) stop ;;
    env) env_exports ;;
    status) status ;;
    *) echo "usage: $0 start|install|stop|env|status" >&2; exit 2 ;;
esac
