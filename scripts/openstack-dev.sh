#!/usr/bin/env bash
# Real OpenStack services for vnfm's tests, on 127.0.0.1 only: Keystone, Placement, Nova
# (api, conductor, scheduler, one nova-compute per fake host, fake virt driver), Glance,
# Heat (api + engine), RabbitMQ, and a Neutron stub that answers every list with [].
# Everything comes from PyPI (one venv, pinned versions) and Debian (rabbitmq-server,
# mariadb-server); every database lives in one MariaDB server of our own (its data under
# VNFM_OS_DIR, TCP on 127.0.0.1 only). sqlite was tried first: Nova and Heat on sqlite fail
# concurrent writes with "database is locked" even in WAL mode, which made the suites flaky.
#
#   scripts/openstack-dev.sh start   install what is missing, start what is not running,
#                                    seed flavors/image/zones, print the OS_* exports
#   scripts/openstack-dev.sh install install what is missing (Debian packages, the venv) and
#                                    start nothing (the test command runs it in the background
#                                    while the workspace builds)
#   scripts/openstack-dev.sh env     print the OS_* exports (services must be running)
#   scripts/openstack-dev.sh status  list the services and whether they run
#   scripts/openstack-dev.sh stop    stop every process this script started
#   scripts/openstack-dev.sh kill SERVICE    SIGKILL one service (e.g. heat-engine), as a crash
#   scripts/openstack-dev.sh revive SERVICE  start it again (keystone-api, nova-api, heat-api,
#                                    heat-engine) and wait until it answers
#
# Typical use:   eval "$(scripts/openstack-dev.sh start)"
#                VNFM_TEST_OPENSTACK=1 cargo test -p vnfm-openstack --test real_openstack
#
# Environment (all optional):
#   VNFM_OS_DIR        state and venv            (default: $HOME/.cache/vnfm-openstack)
#   VNFM_OS_PASSWORD   admin password            (default: secret)
#   VNFM_OS_MEMBER_USERNAME, VNFM_OS_MEMBER_PASSWORD, VNFM_OS_MEMBER_PROJECT
#                      a non-admin user (role `member`, the role Nova's and Heat's default
#                      policies ask of a project's users) in a project of its own, with
#                      unlimited quotas: it creates servers and stacks there and, through
#                      the policy.yaml written beside nova.conf, reads
#                      os-availability-zone/detail (the zones' hosts), but Placement and
#                      server hosts are refused to it
#                      (default: vnfm-member / member-secret / vnfm-member)
#   VNFM_OS_HOSTS      fake compute hosts        (default: "c1 c2")
#   VNFM_OS_ZONES      "zone:host,host ..."      (default: "az1:c1 az2:c2")
#   VNFM_OS_SMALL_HOSTS  hosts of VNFM_OS_HOSTS with about 1 GB of RAM to place (default:
#                      none): one m1.tiny fits, one m1.small (2 GB) does not, so a zone of
#                      such hosts stays a candidate but fails a bigger server with Nova's
#                      real "No valid host was found"
#   VNFM_OS_FRESH      1: stop what runs and start from empty databases and configuration
#                      (the venv is kept)   (default: 0)
#   VNFM_OS_CONSTRAINTS  pip constraints file    (default: ../shared/real-openstack/
#                      constraints.txt beside the project when it exists)
# Ports (fixed, 127.0.0.1): keystone 5000, nova 8774, placement 8778, glance 9292,
# heat 8004, neutron stub 9696, amqp 5672, epmd 4369, erlang distribution 25672, mariadb 3306.
#
# `start` is idempotent: a second run installs nothing, restarts nothing that runs, and only
# re-checks the seed data. Nothing listens on a non-loopback address.
set -euo pipefail

# Pinned versions (OpenStack 2025.2 "Flamingo" / 2026.1 era releases on PyPI).
KEYSTONE_VERSION=30.0.0
NOVA_VERSION=34.0.0
PLACEMENT_VERSION=16.0.0
GLANCE_VERSION=33.0.0
HEAT_VERSION=27.0.1
GUNICORN_VERSION=27.0.1
PYMYSQL_VERSION=1.1.1

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${VNFM_OS_DIR:-$HOME/.cache/vnfm-openstack}
PASSWORD=${VNFM_OS_PASSWORD:-secret}
MEMBER_USER=${VNFM_OS_MEMBER_USERNAME:-vnfm-member}
MEMBER_PASSWORD=${VNFM_OS_MEMBER_PASSWORD:-member-secret}
MEMBER_PROJECT=${VNFM_OS_MEMBER_PROJECT:-vnfm-member}
HOSTS=${VNFM_OS_HOSTS:-c1 c2}
ZONES=${VNFM_OS_ZONES:-az1:c1 az2:c2}
SMALL_HOSTS=${VNFM_OS_SMALL_HOSTS:-}
CONSTRAINTS=${VNFM_OS_CONSTRAINTS:-$ROOT/../shared/real-openstack/constraints.txt}
PY=${PYTHON:-python3}
IP=127.0.0.1
KS_PORT=5000
VENV=$DIR/venv
RUN=$DIR/run     # pid files and logs
CONF=$DIR/conf   # configuration
DATA=$DIR/data   # databases, images, instance state
DB_PORT=3306
DB_DIR=$DATA/mariadb
# every service's database URL is $DB/<name>
DB="mysql+pymysql://root@$IP:$DB_PORT"

say() { printf 'openstack-dev: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
now() { date +%s; }

# RabbitMQ: loopback only. It runs as the `rabbitmq` user, which cannot enter $HOME of root:
# its state lives in its own home.
RABBIT=${VNFM_OS_RABBITMQ_DIR:-/var/lib/rabbitmq/vnfm-dev}
export RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_NODE_IP_ADDRESS=$IP RABBITMQ_NODE_PORT=5672 \
    RABBITMQ_DIST_PORT=25672 ERL_EPMD_ADDRESS=$IP \
    RABBITMQ_MNESIA_BASE=$RABBIT/mnesia RABBITMQ_LOG_BASE=$RABBIT/log \
    RABBITMQ_PID_FILE=$RABBIT/rabbitmq.pid \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"

is_running() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
port_open() { (exec 3<>"/dev/tcp/$IP/$1") 2>/dev/null; }
http_up() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$1" || true)" != 000 ]; }
wait_for() { # seconds description command...
    local secs=$1 what=$2; shift 2
    local end=$(( $(now) + secs ))
    until "$@"; do
        [ "$(now)" -lt "$end" ] || die "$what did not come up within ${secs}s (logs in $RUN)"
        sleep 0.3
    done
}

# ------------------------------------------------------------------------------------ stop
stop() {
    local f pid name pids=()
    for f in "$RUN"/*.pid; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .pid)
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
            pids+=("$pid" $(pgrep -P "$pid" || true))
            kill "$pid" 2>/dev/null || true
            say "stopped $name ($pid)"
        fi
        rm -f "$f"
    done
    local end=$(( $(now) + 15 ))
    for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && [ "$(now)" -lt "$end" ]; do sleep 0.2; done
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ -s "$RABBITMQ_PID_FILE" ]; then
        rabbitmqctl -n "$RABBITMQ_NODENAME" stop >/dev/null 2>&1 \
            || kill "$(cat "$RABBITMQ_PID_FILE")" 2>/dev/null || true
        rm -f "$RABBITMQ_PID_FILE"
        # epmd (started by rabbitmq) refuses to exit while the node is still registered
        local until=$(( $(now) + 30 ))
        while port_open 5672 && [ "$(now)" -lt "$until" ]; do sleep 0.5; done
        sleep 1
        epmd -kill >/dev/null 2>&1 || true
        say "stopped rabbitmq"
    fi
}

# ------------------------------------------------------------------------------------ install
install() {
    local debs=()
    command -v rabbitmq-server >/dev/null 2>&1 || debs+=(rabbitmq-server)
    [ -x /usr/sbin/mariadbd ] || debs+=(mariadb-server)
    if [ "${#debs[@]}" -gt 0 ]; then
        say "installing ${debs[*]} (apt)"
        apt-get update -qq >/dev/null
        # the packages' own services are not wanted: this script starts its own, on loopback
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${debs[@]}" >/dev/null
        rm -f /usr/sbin/policy-rc.d
    fi
    local want="keystone==$KEYSTONE_VERSION nova==$NOVA_VERSION \
openstack-placement==$PLACEMENT_VERSION glance==$GLANCE_VERSION \
openstack-heat==$HEAT_VERSION gunicorn==$GUNICORN_VERSION PyMySQL==$PYMYSQL_VERSION"
    if [ -f "$VENV/.installed" ] && [ "$(cat "$VENV/.installed")" = "$want" ]; then
        return 0
    fi
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    local c=()
    if [ -f "$CONSTRAINTS" ]; then c=(-c "$CONSTRAINTS"); fi
    say "installing $want into $VENV ${c[*]:+(constraints $CONSTRAINTS)}"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install -q --disable-pip-version-check "${c[@]}" $want \
        > "$RUN/pip.log" 2>&1 || { tail -30 "$RUN/pip.log" >&2; die "pip install failed"; }
    echo "$want" > "$VENV/.installed"
}

# ------------------------------------------------------------------------------------ config
write_config() {
    mkdir -p "$CONF"/{keystone,placement,nova,glance,heat-home/.heat} \
        "$DATA"/{fernet,credential,glance/images,glance/staging,glance/tasks,nova,lock}
    local auth="auth_url = http://$IP:$KS_PORT/v3
auth_type = password
username = admin
password = $PASSWORD
project_name = admin
user_domain_name = Default
project_domain_name = Default
region_name = RegionOne"
    # token_cache_time = -1: every service validates every token with Keystone, so a revoked
    # token is refused at once (the default in-process cache accepts it for 5 minutes)
    local authtoken="[keystone_authtoken]
www_authenticate_uri = http://$IP:$KS_PORT/v3
token_cache_time = -1
$auth"
    local mq="rabbit://guest:guest@$IP:5672/"

    cat > "$CONF/keystone/keystone.conf" <<EOF
[DEFAULT]
use_stderr = true
[database]
connection = $DB/keystone?charset=utf8
[token]
provider = fernet
[fernet_tokens]
key_repository = $DATA/fernet
[fernet_receipts]
key_repository = $DATA/fernet
[credential]
key_repository = $DATA/credential
[identity]
# cheap bcrypt: this is a throwaway test deployment
password_hash_rounds = 4
EOF
    cat > "$CONF/placement/placement.conf" <<EOF
[DEFAULT]
use_stderr = true
[placement_database]
connection = $DB/placement?charset=utf8
[api]
auth_strategy = keystone
$authtoken
EOF
    cp "$VENV/etc/nova/api-paste.ini" "$CONF/nova/api-paste.ini"
    cat > "$CONF/nova/nova.conf" <<EOF
[DEFAULT]
use_stderr = true
transport_url = $mq
compute_driver = fake.FakeDriverWithoutFakeNodes
state_path = $DATA/nova
my_ip = $IP
[api]
auth_strategy = keystone
[api_database]
connection = $DB/nova_api?charset=utf8
[database]
connection = $DB/nova_cell1?charset=utf8
[conductor]
workers = 1
[scheduler]
workers = 1
discover_hosts_in_cells_interval = 2
[wsgi]
api_paste_config = $CONF/nova/api-paste.ini
[oslo_concurrency]
lock_path = $DATA/lock
[vnc]
enabled = false
$authtoken
[placement]
$auth
[glance]
$auth
[neutron]
$auth
EOF
    # Nova's policy override (oslo.policy finds policy.yaml beside nova.conf and re-reads it
    # when it changes, so a running nova-api picks it up): a project `member` may read
    # os-availability-zone/detail, i.e. see the zones' hosts. Nova's default refuses that to
    # non-admins; this is what vnfm's warning (vnfm-openstack/src/nova.rs) tells operators to
    # grant, and it lets the tests see the other half: hosts listed, Placement still refusing
    # the member (HTTP 403), so the free capacity stays unknown and the granter falls back.
    cat > "$CONF/nova/policy.yaml" <<EOF
"os_compute_api:os-availability-zone:detail": "role:admin or role:member"
EOF
    local small
    for h in $HOSTS; do
        mkdir -p "$DATA/nova-$h"
        # the fake driver reports 800000 MB of RAM; a small host reserves all but 1000 MB
        small=512
        case " $SMALL_HOSTS " in *" $h "*) small=799000 ;; esac
        printf '[DEFAULT]\nhost = %s\nstate_path = %s\nreserved_host_memory_mb = %s\nmemory_allocation_ratio = 1.0\n' \
            "$h" "$DATA/nova-$h" "$small" > "$CONF/nova/compute-$h.conf"
    done
    cp "$VENV/etc/glance/glance-api-paste.ini" "$CONF/glance/glance-api-paste.ini"
    cat > "$CONF/glance/glance-api.conf" <<EOF
[DEFAULT]
use_stderr = true
enabled_backends = local:file
[glance_store]
default_backend = local
[local]
filesystem_store_datadir = $DATA/glance/images
[os_glance_staging_store]
filesystem_store_datadir = $DATA/glance/staging
[os_glance_tasks_store]
filesystem_store_datadir = $DATA/glance/tasks
[database]
connection = $DB/glance?charset=utf8
[paste_deploy]
flavor = keystone
config_file = $CONF/glance/glance-api-paste.ini
$authtoken
EOF
    # heat-api finds its configuration only in default places such as ~/.heat/: it runs
    # with HOME=$CONF/heat-home
    local hc=$CONF/heat-home/.heat
    cp "$VENV/etc/heat/api-paste.ini" "$hc/api-paste.ini"
    cat > "$hc/heat.conf" <<EOF
[DEFAULT]
use_stderr = true
transport_url = $mq
num_engine_workers = 1
# a server that went to ERROR fails its stack at once (the default re-creates it 5 times)
action_retry_limit = 0
region_name_for_services = RegionOne
heat_metadata_server_url = http://$IP:8000
heat_waitcondition_server_url = http://$IP:8000/v1/waitcondition
# the stack domain register_catalog creates (devstack's names)
stack_user_domain_name = heat
stack_domain_admin = heat_domain_admin
stack_domain_admin_password = $PASSWORD
[database]
connection = $DB/heat?charset=utf8
[paste_deploy]
api_paste_config = $hc/api-paste.ini
[oslo_concurrency]
lock_path = $DATA/lock
[clients_keystone]
auth_uri = http://$IP:$KS_PORT
[trustee]
$auth
$authtoken
EOF
    # gunicorn gets no command-line argument (keystone's oslo.config would parse them):
    # each service has a gunicorn.conf.py in its configuration folder, its working directory
    gunicorn_conf keystone keystone.wsgi.api:application "$KS_PORT" \
        "OS_KEYSTONE_CONFIG_DIR=$CONF/keystone"
    gunicorn_conf placement placement.wsgi.api:application 8778 \
        "OS_PLACEMENT_CONFIG_DIR=$CONF/placement"
    gunicorn_conf nova nova.wsgi.osapi_compute:application 8774 "OS_NOVA_CONFIG_DIR=$CONF/nova"
    gunicorn_conf glance glance.wsgi.api:application 9292 "OS_GLANCE_CONFIG_DIR=$CONF/glance"
    gunicorn_conf heat-home heat.wsgi.api:application 8004 "HOME=$CONF/heat-home"

    cat > "$CONF/neutron-stub.py" <<'EOF'
"""Stands in for Neutron: servers boot without networks, but Nova still lists ports."""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Stub(BaseHTTPRequestHandler):
    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        parts = [p for p in self.path.split("?", 1)[0].split("/") if p]
        if len(parts) <= 1:
            self.reply(200, {"versions": [{"id": "v2.0", "status": "CURRENT", "links": []}]})
        elif len(parts) == 2 and parts[0] == "v2.0":
            name = parts[1].removesuffix(".json").replace("-", "_")
            self.reply(200, {name: []})
        else:
            self.reply(404, {"NeutronError": {"type": "NotFound", "message": "stub", "detail": ""}})

    def log_message(self, *args):
        pass


ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Stub).serve_forever()
EOF
}

gunicorn_conf() { # folder app port env
    cat > "$CONF/$1/gunicorn.conf.py" <<EOF
wsgi_app = "$2"
bind = "$IP:$3"
workers = 1
threads = 4
timeout = 120
pidfile = "$RUN/$(basename "$1" -home)-api.pid"
control_socket_disable = True
raw_env = ["$4"]
EOF
}

# ------------------------------------------------------------------------------------ databases
sync_databases() {
    local b=$VENV/bin
    if [ ! -f "$DATA/.keystone-ready-mariadb" ]; then
        local km=("$b/keystone-manage" --config-file "$CONF/keystone/keystone.conf")
        {
            "${km[@]}" db_sync
            "${km[@]}" fernet_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)"
            "${km[@]}" credential_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)"
            "${km[@]}" bootstrap --bootstrap-password "$PASSWORD" --bootstrap-username admin \
                --bootstrap-project-name admin --bootstrap-role-name admin \
                --bootstrap-service-name keystone --bootstrap-region-id RegionOne \
                --bootstrap-admin-url "http://$IP:$KS_PORT/v3" \
                --bootstrap-internal-url "http://$IP:$KS_PORT/v3" \
                --bootstrap-public-url "http://$IP:$KS_PORT/v3"
        } > "$RUN/db-keystone.log" 2>&1 || die "keystone db setup failed, see $RUN/db-keystone.log"
        touch "$DATA/.keystone-ready-mariadb"
    fi
    if [ ! -f "$DATA/.dbs-ready-mariadb" ]; then
        local nm=("$b/nova-manage" --config-file "$CONF/nova/nova.conf")
        {
            "$b/placement-manage" --config-file "$CONF/placement/placement.conf" db sync
            "${nm[@]}" api_db sync
            "${nm[@]}" cell_v2 map_cell0 --database_connection "$DB/nova_cell0?charset=utf8"
            "${nm[@]}" cell_v2 list_cells | grep -q ' cell1 ' \
                || "${nm[@]}" cell_v2 create_cell --name cell1
            "${nm[@]}" db sync
            "$b/glance-manage" --config-file "$CONF/glance/glance-api.conf" db_sync
            "$b/heat-manage" --config-file "$CONF/heat-home/.heat/heat.conf" db_sync
        } > "$RUN/db-services.log" 2>&1 || die "database setup failed, see $RUN/db-services.log"
        touch "$DATA/.dbs-ready-mariadb"
    fi
}

# ------------------------------------------------------------------------------------ services
start_gunicorn() { # pidname folder env
    is_running "$1" && return 0
    (cd "$CONF/$2" || exit 1
     exec env "$3" setsid nohup "$VENV/bin/gunicorn" > "$RUN/$1.log" 2>&1 < /dev/null) &
}
start_daemon() { # name command...
    local name=$1; shift
    is_running "$name" && return 0
    # `sh` writes its own pid, then execs the service: the pid file names the service
    (cd "$DATA" || exit 1
     exec setsid nohup sh -c 'echo $$ > "$0"; exec "$@"' "$RUN/$name.pid" "$@" \
        > "$RUN/$name.log" 2>&1 < /dev/null) &
}

start_rabbitmq() {
    port_open 5672 && return 0
    mkdir -p "$RABBIT/mnesia" "$RABBIT/log"
    if id rabbitmq >/dev/null 2>&1; then chown -R rabbitmq:rabbitmq "$RABBIT"; fi
    (cd "$RABBIT" || exit 1
     exec setsid nohup rabbitmq-server > "$RUN/rabbitmq.log" 2>&1 < /dev/null) &
    wait_for 90 rabbitmq port_open 5672
}

# MariaDB for every service: data in $DB_DIR, TCP on 127.0.0.1 only, root without a password
# (a throwaway test deployment), log flushed once a second rather than at every commit.
start_mariadb() {
    if [ ! -d "$DB_DIR/mysql" ]; then
        mkdir -p "$DB_DIR"
        /usr/bin/mariadb-install-db --no-defaults --datadir="$DB_DIR" --user=root \
            --auth-root-authentication-method=normal --skip-test-db \
            > "$RUN/mariadb-install.log" 2>&1 \
            || die "mariadb-install-db failed, see $RUN/mariadb-install.log"
    fi
    if ! port_open "$DB_PORT"; then
        start_daemon mariadb /usr/sbin/mariadbd --no-defaults --datadir="$DB_DIR" --user=root \
            --bind-address="$IP" --port="$DB_PORT" --socket="$RUN/mariadb.sock" \
            --pid-file="$RUN/mariadbd.pidfile" --skip-name-resolve --max-connections=1000 \
            --innodb-flush-log-at-trx-commit=2 --character-set-server=utf8mb4 \
            --collation-server=utf8mb4_general_ci
        wait_for 60 mariadb port_open "$DB_PORT"
    fi
    # Foreign keys are not enforced, as on sqlite: Heat 27's convergence engine deletes the
    # previous raw_template of a stack while resources still reference it when an update follows
    # a failed one ("Cannot delete or update a parent row ... resource_ibfk_1"), which fails the
    # update with an IntegrityError on MySQL/MariaDB. That is Heat's bug, not a test's concern.
    local db sql="SET GLOBAL foreign_key_checks = 0;"
    for db in keystone placement nova_api nova_cell0 nova_cell1 glance heat; do
        sql+="CREATE DATABASE IF NOT EXISTS $db CHARACTER SET utf8;"
    done
    /usr/bin/mariadb --no-defaults --socket="$RUN/mariadb.sock" -uroot -e "$sql" \
        || die "cannot create the databases (log in $RUN/mariadb.log)"
}

start() {
    local t0 t1
    t0=$(now)
    if [ "${VNFM_OS_FRESH:-0}" = 1 ]; then
        stop
        say "fresh start: removing $DATA and $CONF"
        rm -rf "$DATA" "$CONF"
    fi
    mkdir -p "$RUN" "$CONF" "$DATA"
    install
    t1=$(now); say "installed ($(( t1 - t0 ))s)"
    write_config
    start_mariadb
    sync_databases
    t1=$(now); say "configured ($(( t1 - t0 ))s)"
    start_rabbitmq
    start_gunicorn keystone-api keystone "OS_KEYSTONE_CONFIG_DIR=$CONF/keystone"
    wait_for 120 keystone http_up "http://$IP:$KS_PORT/v3"
    # the services read the catalog when they start: it must be complete before
    register_catalog
    local started_at
    started_at=$(date -u +%Y-%m-%dT%H:%M:%S)
    local nova_conf=(--config-file "$CONF/nova/nova.conf")
    start_gunicorn placement-api placement "OS_PLACEMENT_CONFIG_DIR=$CONF/placement"
    start_gunicorn nova-api nova "OS_NOVA_CONFIG_DIR=$CONF/nova"
    start_gunicorn glance-api glance "OS_GLANCE_CONFIG_DIR=$CONF/glance"
    start_gunicorn heat-api heat-home "HOME=$CONF/heat-home"
    start_daemon neutron-stub "$PY" "$CONF/neutron-stub.py" "$IP" 9696
    start_daemon nova-conductor "$VENV/bin/nova-conductor" "${nova_conf[@]}"
    start_daemon nova-scheduler "$VENV/bin/nova-scheduler" "${nova_conf[@]}"
    for h in $HOSTS; do
        start_daemon "nova-compute-$h" "$VENV/bin/nova-compute" "${nova_conf[@]}" \
            --config-file "$CONF/nova/compute-$h.conf"
    done
    start_daemon heat-engine "$VENV/bin/heat-engine" --config-file "$CONF/heat-home/.heat/heat.conf"
    wait_for 120 placement http_up "http://$IP:8778/"
    wait_for 120 nova-api http_up "http://$IP:8774/"
    wait_for 120 glance http_up "http://$IP:9292/"
    wait_for 120 heat-api http_up "http://$IP:8004/"
    wait_for 30 neutron-stub http_up "http://$IP:9696/"
    seed "$started_at"
    say "ready in $(( $(now) - t0 ))s; logs in $RUN"
    check_loopback
    env_exports
}

# Registers Placement, Nova, Glance, the Neutron stub and Heat in the Keystone catalog (three
# interfaces each, RegionOne); existing entries are kept.
register_catalog() {
    "$VENV/bin/python" - "$IP" "$KS_PORT" "$PASSWORD" <<'EOF'
import json, sys, urllib.request

ip, ks_port, password = sys.argv[1:4]
KS = f"http://{ip}:{ks_port}/v3"


def req(method, url, body=None, token=None):
    r = urllib.request.Request(url, json.dumps(body).encode() if body is not None else None,
                               method=method)
    r.add_header("Content-Type", "application/json")
    if token:
        r.add_header("X-Auth-Token", token)
    with urllib.request.urlopen(r, timeout=60) as resp:
        raw = resp.read()
        return resp.headers, (json.loads(raw) if raw else None)


headers, _ = req("POST", KS + "/auth/tokens", {"auth": {"identity": {"methods": ["password"],
    "password": {"user": {"name": "admin", "domain": {"name": "Default"},
                          "password": password}}},
    "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}}}})
token = headers["X-Subject-Token"]
services = {s["type"]: s for s in req("GET", KS + "/services", token=token)[1]["services"]}
catalog = {
    "compute": ("nova", f"http://{ip}:8774/v2.1"),
    "placement": ("placement", f"http://{ip}:8778"),
    "image": ("glance", f"http://{ip}:9292"),
    "network": ("neutron", f"http://{ip}:9696"),
    "orchestration": ("heat", f"http://{ip}:8004/v1/%(project_id)s"),
}
for kind, (name, url) in catalog.items():
    svc = services.get(kind) or req("POST", KS + "/services", {"service": {
        "type": kind, "name": name, "enabled": True}}, token)[1]["service"]
    have = req("GET", KS + "/endpoints?service_id=" + svc["id"], token=token)[1]["endpoints"]
    for iface in ("public", "internal", "admin"):
        if not any(e["interface"] == iface and e["url"] == url for e in have):
            req("POST", KS + "/endpoints", {"endpoint": {"service_id": svc["id"],
                "interface": iface, "region_id": "RegionOne", "url": url}}, token)

# Heat's stack domain, as devstack and every real Heat deployment set it up: a template with an
# OS::Heat::ScalingPolicy (Tacker's and our k8s-cluster-vnf BaseHOT), a wait condition or a
# signal makes Heat create a user per stack in the domain `heat` with the role
# heat_stack_user, through heat_domain_admin (heat.conf stack_user_domain_name). Without it
# real Heat 27 fails the create: "Can't find role heat_stack_user" (found by
# vnfm-cli/tests/real_hw_affinity.rs).
def ks(method, path, body=None):
    return req(method, KS + path, body, token)[1]


if not ks("GET", "/roles?name=heat_stack_user")["roles"]:
    ks("POST", "/roles", {"role": {"name": "heat_stack_user"}})
domains = ks("GET", "/domains?name=heat")["domains"]
domain = domains[0] if domains else ks("POST", "/domains", {"domain": {
    "name": "heat", "description": "Heat's stack users", "enabled": True}})["domain"]
users = ks("GET", f"/users?name=heat_domain_admin&domain_id={domain['id']}")["users"]
dadmin = users[0] if users else ks("POST", "/users", {"user": {
    "name": "heat_domain_admin", "domain_id": domain["id"], "password": password,
    "enabled": True}})["user"]
admin_role = ks("GET", "/roles?name=admin")["roles"][0]
req("PUT", KS + f"/domains/{domain['id']}/users/{dadmin['id']}/roles/{admin_role['id']}",
    token=token)
EOF
}

# Waits for every Nova service to report in since this start (RPC casts
# sent earlier are lost), maps the compute hosts, waits for heat-engine, then creates what
# the tests use: image `tiny`, flavors m1.tiny, m1.small and vnfm.huge (bigger than any host),
# unlimited quotas, one aggregate per zone of VNFM_OS_ZONES, and the non-admin user.
seed() {
    VNFM_MEMBER="$MEMBER_USER:$MEMBER_PROJECT" VNFM_MEMBER_PASSWORD="$MEMBER_PASSWORD" \
    "$VENV/bin/python" - "$IP" "$KS_PORT" "$PASSWORD" "$1" "$ZONES" "$VENV/bin/nova-manage" \
        "$CONF/nova/nova.conf" $HOSTS <<'EOF'
import json, subprocess, sys, time, urllib.error, urllib.request

ip, ks_port, password, started_at, zones, nova_manage, nova_conf = sys.argv[1:8]
hosts = sys.argv[8:]
KS = f"http://{ip}:{ks_port}/v3"
NOVA = f"http://{ip}:8774/v2.1"
GLANCE = f"http://{ip}:9292/v2"


def req(method, url, body=None, token=None, data=None, ctype="application/json"):
    if body is not None:
        data = json.dumps(body).encode()
    r = urllib.request.Request(url, data=data, method=method)
    r.add_header("Content-Type", ctype)
    r.add_header("Accept", "application/json")
    r.add_header("X-OpenStack-Nova-API-Version", "2.79")
    if token:
        r.add_header("X-Auth-Token", token)
    with urllib.request.urlopen(r, timeout=60) as resp:
        raw = resp.read()
        return resp.headers, (json.loads(raw) if raw else None)


def login():
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "admin", "domain": {"name": "Default"}, "password": password}}},
        "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}}}}
    headers, tok = req("POST", KS + "/auth/tokens", body)
    return headers["X-Subject-Token"], tok["token"]["project"]["id"]


token, project = login()



def nova(method, path, body=None):
    return req(method, NOVA + path, body, token)[1]


deadline = time.time() + 180
while True:
    try:
        svcs = nova("GET", "/os-services")["services"]
    except urllib.error.URLError:
        svcs = []
    fresh = {(s["binary"], s["host"]) for s in svcs
             if s["state"] == "up" and (s["updated_at"] or "") >= started_at}
    missing = {b for b in ("nova-conductor", "nova-scheduler") if b not in {x for x, _ in fresh}}
    missing |= {f"nova-compute@{h}" for h in hosts if ("nova-compute", h) not in fresh}
    if not missing:
        found = {h["hypervisor_hostname"] for h in nova("GET", "/os-hypervisors")["hypervisors"]}
        if set(hosts) <= found:
            break
        subprocess.run([nova_manage, "--config-file", nova_conf, "cell_v2", "discover_hosts"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        missing = {"host mapping of " + h for h in set(hosts) - found}
    if time.time() > deadline:
        sys.exit(f"openstack-dev: nova services not ready: {sorted(missing)}")
    time.sleep(1)

deadline = time.time() + 60
while True:  # a stack list is an RPC call: it answers once heat-engine consumes its queue
    try:
        req("GET", f"http://{ip}:8004/v1/{project}/stacks", token=token)
        break
    except (urllib.error.URLError, TimeoutError):
        if time.time() > deadline:
            sys.exit("openstack-dev: heat-engine does not answer")
        time.sleep(1)

if not req("GET", GLANCE + "/images?name=tiny", token=token)[1]["images"]:
    image = req("POST", GLANCE + "/images", {"name": "tiny", "disk_format": "raw",
                "container_format": "bare", "visibility": "public"}, token)[1]
    req("PUT", GLANCE + f"/images/{image['id']}/file", token=token, data=b"\0" * 4096,
        ctype="application/octet-stream")

flavors = {f["name"] for f in nova("GET", "/flavors?is_public=None")["flavors"]}
for name, vcpus, ram, disk in (("m1.tiny", 1, 512, 1), ("m1.small", 1, 2048, 1),
                               ("vnfm.huge", 4096, 512, 1)):
    if name not in flavors:
        nova("POST", "/flavors", {"flavor": {"name": name, "vcpus": vcpus, "ram": ram,
                                             "disk": disk}})
nova("PUT", f"/os-quota-sets/{project}", {"quota_set": {
    "cores": -1, "ram": -1, "instances": -1, "server_groups": -1,
    "server_group_members": -1}})

aggregates = {a["name"]: a for a in nova("GET", "/os-aggregates")["aggregates"]}
for spec in zones.split():
    zone, members = spec.split(":", 1)
    agg = aggregates.get("vnfm-" + zone) or nova("POST", "/os-aggregates", {"aggregate": {
        "name": "vnfm-" + zone, "availability_zone": zone}})["aggregate"]
    for host in members.split(","):
        if host not in (agg.get("hosts") or []):
            nova("POST", f"/os-aggregates/{agg['id']}/action", {"add_host": {"host": host}})

# The non-admin user: role `member` (what Nova's and Heat's default policies ask of a project's
# users; Keystone's bootstrap makes it imply `reader`) on a project of its own.
import os
from urllib.parse import quote
member_user, member_project = os.environ["VNFM_MEMBER"].split(":", 1)
member_password = os.environ["VNFM_MEMBER_PASSWORD"]


def keystone(method, path, body=None):
    return req(method, KS + path, body, token)[1]


def one(path, kind, name, create):
    found = keystone("GET", f"{path}?name={quote(name)}&domain_id=default")[kind]
    return found[0] if found else keystone("POST", path, create)[kind[:-1]]


proj = one("/projects", "projects", member_project, {"project": {
    "name": member_project, "domain_id": "default", "enabled": True,
    "description": "vnfm tests: a non-admin user's project"}})
user = one("/users", "users", member_user, {"user": {
    "name": member_user, "domain_id": "default", "enabled": True,
    "password": member_password, "default_project_id": proj["id"]}})
try:  # a password changed since the user was created is set again
    req("POST", KS + "/auth/tokens", {"auth": {"identity": {"methods": ["password"],
        "password": {"user": {"id": user["id"], "password": member_password}}}}})
except urllib.error.HTTPError:
    keystone("PATCH", f"/users/{user['id']}", {"user": {"password": member_password}})
role = keystone("GET", "/roles?name=member")["roles"][0]
req("PUT", KS + f"/projects/{proj['id']}/users/{user['id']}/roles/{role['id']}", token=token)
nova("PUT", f"/os-quota-sets/{proj['id']}", {"quota_set": {
    "cores": -1, "ram": -1, "instances": -1, "server_groups": -1,
    "server_group_members": -1}})
EOF
}

# Fails when a process started here listens on anything but loopback.
check_loopback() {
    command -v ss >/dev/null 2>&1 || return 0
    local bad
    bad=$(ss -Hltnp 2>/dev/null | awk '{print $4, $6}' \
        | grep -E 'gunicorn|nova|heat|glance|beam|epmd|python|mariadb' \
        | grep -vE '^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\]):' || true)
    [ -z "$bad" ] || die "listening beyond loopback: $bad"
}

env_exports() {
    http_up "http://$IP:$KS_PORT/v3" || die "keystone is not running (run: $0 start)"
    local project
    project=$("$VENV/bin/python" - "$IP" "$KS_PORT" "$PASSWORD" <<'EOF'
import json, sys, urllib.request
ip, port, password = sys.argv[1:4]
body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
    "name": "admin", "domain": {"name": "Default"}, "password": password}}},
    "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}}}}
r = urllib.request.Request(f"http://{ip}:{port}/v3/auth/tokens", json.dumps(body).encode(),
                           {"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(r, timeout=30))["token"]["project"]["id"])
EOF
)
    # the zones whose hosts are all small (and the first of them): they stay candidates but
    # cannot hold an m1.small
    local small_zone="" small_zones="" spec h all
    for spec in $ZONES; do
        all=1
        for h in $(echo "${spec#*:}" | tr ',' ' '); do
            case " $SMALL_HOSTS " in *" $h "*) ;; *) all=0 ;; esac
        done
        if [ -n "$SMALL_HOSTS" ] && [ "$all" = 1 ]; then
            [ -n "$small_zone" ] || small_zone=${spec%%:*}
            small_zones="$small_zones${small_zones:+ }${spec%%:*}"
        fi
    done
    # the first zone of at least three hosts, none of them small: the zone of the cluster VNF's
    # workers in the hardware-affinity suite (vnfm-cli/tests/real_hw_affinity.rs)
    local worker_zone="" n big
    for spec in $ZONES; do
        n=0 big=1
        for h in $(echo "${spec#*:}" | tr ',' ' '); do
            n=$((n + 1))
            case " $SMALL_HOSTS " in *" $h "*) big=0 ;; esac
        done
        if [ -z "$worker_zone" ] && [ "$n" -ge 3 ] && [ "$big" = 1 ]; then
            worker_zone=${spec%%:*}
        fi
    done
    cat <<EOF
export OS_AUTH_URL=http://$IP:$KS_PORT/v3
export OS_IDENTITY_API_VERSION=3
export OS_USERNAME=admin
export OS_PASSWORD=$PASSWORD
export OS_PROJECT_NAME=admin
export OS_PROJECT_ID=$project
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_DOMAIN_NAME=Default
export OS_REGION_NAME=RegionOne
export OS_INTERFACE=public
export VNFM_OS_TEST_ZONES="$(for z in $ZONES; do printf '%s ' "${z%%:*}"; done | sed 's/ $//')"
export VNFM_OS_TEST_IMAGE=tiny
export VNFM_OS_TEST_FLAVOR=m1.tiny
export VNFM_OS_TEST_HUGE_FLAVOR=vnfm.huge
export VNFM_OS_TEST_SMALL_ZONE=$small_zone
export VNFM_OS_TEST_SMALL_ZONES="$small_zones"
export VNFM_OS_TEST_WORKER_ZONE=$worker_zone
export VNFM_OS_MEMBER_USERNAME=$MEMBER_USER
export VNFM_OS_MEMBER_PASSWORD=$MEMBER_PASSWORD
export VNFM_OS_MEMBER_PROJECT=$MEMBER_PROJECT
EOF
}

status() {
    local f
    for f in "$RUN"/*.pid; do
        [ -f "$f" ] || continue
        if is_running "$(basename "$f" .pid)"; then
            echo "$(basename "$f" .pid): running ($(cat "$f"))"
        else
            echo "$(basename "$f" .pid): stopped"
        fi
    done
}

# Fault injection for the real-service suite (issue 14): kill one service as a crash would
# (SIGKILL, children included), and start it again as `start` does, waiting until it answers.
kill_service() {
    local name=${1:?service name} pid
    is_running "$name" || die "$name is not running"
    pid=$(cat "$RUN/$name.pid")
    kill -9 "$pid" $(pgrep -P "$pid" || true) 2>/dev/null || true
    rm -f "$RUN/$name.pid"
    say "killed $name ($pid)"
}
revive_service() {
    local name=${1:?service name}
    case "$name" in
        keystone-api)
            start_gunicorn keystone-api keystone "OS_KEYSTONE_CONFIG_DIR=$CONF/keystone"
            wait_for 120 keystone http_up "http://$IP:$KS_PORT/v3" ;;
        nova-api)
            start_gunicorn nova-api nova "OS_NOVA_CONFIG_DIR=$CONF/nova"
            wait_for 120 nova-api http_up "http://$IP:8774/" ;;
        heat-api)
            start_gunicorn heat-api heat-home "HOME=$CONF/heat-home"
            wait_for 120 heat-api http_up "http://$IP:8004/" ;;
        heat-engine)
            start_daemon heat-engine "$VENV/bin/heat-engine" \
                --config-file "$CONF/heat-home/.heat/heat.conf" ;;
        *) die "revive: unknown service $name (keystone-api, nova-api, heat-api, heat-engine)" ;;
    esac
    say "revived $name"
}

case "${1:-}" in
    start) start ;;
    install) mkdir -p "$RUN"; install ;;
    stop) stop ;;
    env) env_exports ;;
    status) status ;;
    kill) kill_service "${2:-}" ;;
    revive) revive_service "${2:-}" ;;
    *) echo "usage: $0 start|install|stop|env|status|kill SERVICE|revive SERVICE" >&2; exit 2 ;;
esac
