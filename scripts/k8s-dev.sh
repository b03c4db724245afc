#!/usr/bin/env bash
# A throw-away Kubernetes control plane for vnfm's real-cluster tests, on 127.0.0.1 only: etcd
# (Debian's etcd-server), kube-apiserver, kube-scheduler and kube-controller-manager, with a CA,
# certificates and tokens of its own. There are no kubelets: the tests create Nodes as a kubelet
# would (vnfm-k8s/tests/real_cluster.rs); the real scheduler binds pods to them and the real
# controller-manager runs Deployments and ReplicaSets. Pods stay Pending (nothing runs them).
#
#   scripts/k8s-dev.sh start [BIN_DIR]   install etcd if missing, start what is not running,
#                                        wait for health, print the exports below
#   scripts/k8s-dev.sh install           install etcd (and curl, openssl, xz) if missing, start nothing
#   scripts/k8s-dev.sh env               print the exports (the control plane must be running)
#   scripts/k8s-dev.sh status            say which component runs
#   scripts/k8s-dev.sh stop              stop the processes this script started
#
# Typical use:   eval "$(scripts/k8s-dev.sh start)"
#                cargo test -p vnfm-k8s --test real_cluster -- --nocapture
#
# Exports printed by start and env:
#   VNFM_K8S_KUBECONFIG         admin (group system:masters): bearer token, CA embedded
#   VNFM_K8S_KUBECONFIG_CERT    the same admin by client certificate and key, CA by file
#   VNFM_K8S_KUBECONFIG_VIEWER  a user with a valid token and no role (every request: 403)
#
# Environment (all optional):
#   VNFM_K8S_BIN_DIR   kube-apiserver, kube-scheduler, kube-controller-manager, plain or .xz
#                      (.xz files are unpacked into VNFM_K8S_DIR/bin, once); the first argument
#                      of start overrides it   (default: ../shared/k8s beside the project)
#   VNFM_K8S_DIR       state: unpacked binaries, certificates, kubeconfigs, etcd data, logs,
#                      pid files               (default: ${XDG_CACHE_HOME:-$HOME/.cache}/vnfm-k8s)
#   VNFM_K8S_ETCD      the etcd binary        (default: etcd from PATH; apt-get install
#                      etcd-server when there is none)
#   VNFM_K8S_PORT_BASE ports PORT_BASE+443 (apiserver), +379/+380 (etcd client/peer), +459
#                      (scheduler), +457 (controller-manager)   (default: 17000)
#   VNFM_K8S_TIMEOUT   seconds to wait for each component (default: 120)
#
# Every start begins with an empty etcd (the data of a previous run is removed); certificates,
# tokens and unpacked binaries are kept. Measured on a 2-core machine: the control plane is
# healthy 4-8 s after start (plus ~3 s the first time, to unpack the binaries).
#
# Flags that matter (from ../shared/k8s/README.md): --watch-cache=false on the apiserver (with
# etcd 3.4 a watch without resourceVersion otherwise answers a 504 ERROR event);
# --controllers=*,-node-lifecycle-controller (no kubelet heartbeats: it would taint every
# node); scheduler and controller-manager without --authentication-kubeconfig (no front-proxy
# CA).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${VNFM_K8S_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vnfm-k8s}
BIN_DIR=${VNFM_K8S_BIN_DIR:-$ROOT/../shared/k8s}
BASE=${VNFM_K8S_PORT_BASE:-17000}
TIMEOUT=${VNFM_K8S_TIMEOUT:-120}
API_PORT=$((BASE + 443))
ETCD_PORT=$((BASE + 379))
ETCD_PEER_PORT=$((BASE + 380))
SCHED_PORT=$((BASE + 459))
CM_PORT=$((BASE + 457))
IP=127.0.0.1
PKI=$DIR/pki
RUN=$DIR/run
COMPONENTS=(etcd kube-apiserver kube-scheduler kube-controller-manager)

say() { printf 'k8s-dev: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
ms() { date +%s%3N; }

# ------------------------------------------------------------------------------- processes
# A recorded pid that still runs the binary it was started as (not a zombie, not reused).
running() { # NAME
    local f=$RUN/$1.pid pid exe st
    [ -s "$f" ] || return 1
    pid=$(cat "$f")
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ -n "$st" ] && [ "$st" != Z ] || return 1
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    exe=${exe% (deleted)}
    [ "$(basename "$exe")" = "$(cat "$RUN/$1.exe" 2>/dev/null)" ]
}

stop_one() { # NAME
    local name=$1 pid
    if running "$name"; then
        pid=$(cat "$RUN/$name.pid")
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do running "$name" || break; sleep 0.1; done
        if running "$name"; then
            say "$name (pid $pid) still runs 10 s after SIGTERM: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do running "$name" || break; sleep 0.1; done
        fi
        say "stopped $name (pid $pid)"
    fi
    rm -f "$RUN/$name.pid" "$RUN/$name.exe"
}

stop() {
    local i
    [ -d "$RUN" ] || { say "nothing started from $DIR"; return 0; }
    for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop_one "${COMPONENTS[$i]}"; done
}

launch() { # NAME BINARY ARGS...
    local name=$1 bin=$2
    shift 2
    setsid "$bin" "$@" >"$RUN/$name.log" 2>&1 </dev/null &
    echo $! >"$RUN/$name.pid"
    basename "$(readlink -f "$bin")" >"$RUN/$name.exe"
}

wait_healthy() { # NAME URL CURL-ARGS...
    local name=$1 url=$2 t0 until
    shift 2
    t0=$(ms)
    until=$(($(date +%s) + TIMEOUT))
    until curl -fsS -o /dev/null --max-time 2 "$@" "$url" 2>/dev/null; do
        if ! running "$name"; then
            tail -n 20 "$RUN/$name.log" >&2 || true
            stop
            die "$name exited while starting; see $RUN/$name.log"
        fi
        if [ "$(date +%s)" -ge "$until" ]; then
            tail -n 20 "$RUN/$name.log" >&2 || true
            stop
            die "$name not healthy after ${TIMEOUT} s at $url; see $RUN/$name.log"
        fi
        sleep 0.1
    done
    say "$name healthy ($(($(ms) - t0)) ms of waiting)"
}

# ------------------------------------------------------------------------------- install
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install() {
    local debs=()
    if [ -z "${VNFM_K8S_ETCD:-}" ] && ! command -v etcd >/dev/null 2>&1; then debs+=(etcd-server); fi
    command -v curl >/dev/null 2>&1 || debs+=(curl)
    command -v openssl >/dev/null 2>&1 || debs+=(openssl)
    command -v xz >/dev/null 2>&1 || debs+=(xz-utils)
    [ "${#debs[@]}" -gt 0 ] || return 0
    say "installing ${debs[*]} (apt-get)"
    as_root apt-get update -qq >/dev/null
    # the package's own etcd service is not wanted: this script starts its own, on loopback
    local rcd=/usr/sbin/policy-rc.d placed=0
    if [ ! -e "$rcd" ]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee "$rcd" >/dev/null
        as_root chmod +x "$rcd"
        placed=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${debs[@]}" >/dev/null
    if [ "$placed" = 1 ]; then as_root rm -f "$rcd"; fi
}

# A Kubernetes binary: BIN_DIR/NAME when executable, else BIN_DIR/NAME.xz unpacked into DIR/bin.
binary() { # NAME
    local c=$1
    if [ -x "$BIN_DIR/$c" ] && [ ! -d "$BIN_DIR/$c" ]; then echo "$BIN_DIR/$c"; return; fi
    [ -f "$BIN_DIR/$c.xz" ] || die "neither $BIN_DIR/$c nor $BIN_DIR/$c.xz exists (set VNFM_K8S_BIN_DIR)"
    if [ ! -x "$DIR/bin/$c" ] || [ "$BIN_DIR/$c.xz" -nt "$DIR/bin/$c" ]; then
        say "unpacking $c.xz into $DIR/bin"
        xz -dc "$BIN_DIR/$c.xz" >"$DIR/bin/$c.part"
        chmod +x "$DIR/bin/$c.part"
        mv "$DIR/bin/$c.part" "$DIR/bin/$c"
    fi
    echo "$DIR/bin/$c"
}

# ------------------------------------------------------------------------------- credentials
credentials() {
    mkdir -p "$PKI"
    chmod 700 "$PKI"
    if [ ! -s "$PKI/ca.crt" ]; then
        say "making a CA, the apiserver's certificate, service-account keys, a client certificate"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" \
            -days 3650 -sha256 -subj "/CN=vnfm-test-kubernetes-ca" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout "$PKI/apiserver.key" -out "$PKI/apiserver.csr" \
            -subj "/CN=kube-apiserver" 2>/dev/null
        printf '%s\n' "basicConstraints=CA:FALSE" \
            "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
            "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" \
            >"$PKI/apiserver.ext"
        openssl x509 -req -in "$PKI/apiserver.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
            -CAcreateserial -days 3650 -sha256 -extfile "$PKI/apiserver.ext" \
            -out "$PKI/apiserver.crt" 2>/dev/null
        # the admin by client certificate: O= is the group, CN= the user
        openssl req -newkey rsa:2048 -nodes -keyout "$PKI/admin.key" -out "$PKI/admin.csr" \
            -subj "/O=system:masters/CN=vnfm-admin" 2>/dev/null
        printf '%s\n' "basicConstraints=CA:FALSE" \
            "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=clientAuth" \
            >"$PKI/client.ext"
        openssl x509 -req -in "$PKI/admin.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
            -CAcreateserial -days 3650 -sha256 -extfile "$PKI/client.ext" \
            -out "$PKI/admin.crt" 2>/dev/null
        openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
        openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
        rm -f "$PKI"/*.csr
    fi
    if [ ! -s "$PKI/tokens.csv" ]; then
        (
            umask 077
            printf '%s,vnfm-admin,vnfm-admin-uid,"system:masters"\n' "$(openssl rand -hex 24)"
            printf '%s,vnfm-viewer,vnfm-viewer-uid\n' "$(openssl rand -hex 24)"
        ) >"$PKI/tokens.csv"
    fi
    local admin viewer ca
    admin=$(sed -n 1p "$PKI/tokens.csv" | cut -d, -f1)
    viewer=$(sed -n 2p "$PKI/tokens.csv" | cut -d, -f1)
    ca=$(base64 -w0 <"$PKI/ca.crt")
    kubeconfig() { # FILE USER-YAML CLUSTER-CA-YAML
        (
            umask 077
            cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: vnfm-dev
  cluster:
    server: https://$IP:$API_PORT
    $3
users:
- name: user
  user:
$2
contexts:
- name: vnfm-dev
  context: {cluster: vnfm-dev, user: user, namespace: default}
current-context: vnfm-dev
EOF
        )
    }
    kubeconfig "$DIR/kubeconfig" "    token: $admin" "certificate-authority-data: $ca"
    kubeconfig "$DIR/kubeconfig-cert" "    client-certificate: pki/admin.crt
    client-key: pki/admin.key" "certificate-authority: pki/ca.crt"
    kubeconfig "$DIR/kubeconfig-viewer" "    token: $viewer" "certificate-authority-data: $ca"
}

# ------------------------------------------------------------------------------- start
print_env() {
    printf 'export VNFM_K8S_KUBECONFIG=%s\n' "$DIR/kubeconfig"
    printf 'export VNFM_K8S_KUBECONFIG_CERT=%s\n' "$DIR/kubeconfig-cert"
    printf 'export VNFM_K8S_KUBECONFIG_VIEWER=%s\n' "$DIR/kubeconfig-viewer"
}

start() {
    local t0 etcd api sched cm busy=""
    t0=$(ms)
    install
    mkdir -p "$DIR/bin" "$RUN"
    local all=1 c
    for c in "${COMPONENTS[@]}"; do running "$c" || all=0; done
    if [ "$all" = 1 ]; then
        say "already running from $DIR"
        print_env
        return 0
    fi
    stop # whatever half of it runs
    for p in "$API_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" "$SCHED_PORT" "$CM_PORT"; do
        if (exec 3<>"/dev/tcp/$IP/$p") 2>/dev/null; then busy="$busy $p"; fi
    done
    [ -z "$busy" ] || die "port(s)$busy of 127.0.0.1 in use by another process (set VNFM_K8S_PORT_BASE)"
    etcd=${VNFM_K8S_ETCD:-$(command -v etcd)} || die "etcd not found"
    api=$(binary kube-apiserver)
    sched=$(binary kube-scheduler)
    cm=$(binary kube-controller-manager)
    credentials
    rm -rf "$DIR/etcd"
    local t1
    t1=$(ms)

    launch etcd "$etcd" --name=vnfm-dev --data-dir="$DIR/etcd" \
        --listen-client-urls="http://$IP:$ETCD_PORT" --advertise-client-urls="http://$IP:$ETCD_PORT" \
        --listen-peer-urls="http://$IP:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls="http://$IP:$ETCD_PEER_PORT" \
        --initial-cluster="vnfm-dev=http://$IP:$ETCD_PEER_PORT" --initial-cluster-state=new \
        --logger=zap --log-level=warn
    wait_healthy etcd "http://$IP:$ETCD_PORT/health"

    launch kube-apiserver "$api" --etcd-servers="http://$IP:$ETCD_PORT" \
        --bind-address=$IP --advertise-address=$IP --secure-port="$API_PORT" \
        --cert-dir="$PKI/generated" --tls-cert-file="$PKI/apiserver.crt" \
        --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
        --token-auth-file="$PKI/tokens.csv" --authorization-mode=RBAC \
        --service-account-issuer=https://kubernetes.default.svc \
        --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
        --service-cluster-ip-range=10.96.0.0/24 --endpoint-reconciler-type=none \
        --watch-cache=false
    wait_healthy kube-apiserver "https://$IP:$API_PORT/readyz" --cacert "$PKI/ca.crt" \
        -H "Authorization: Bearer $(sed -n 1p "$PKI/tokens.csv" | cut -d, -f1)"

    launch kube-scheduler "$sched" --kubeconfig="$DIR/kubeconfig" --leader-elect=false \
        --bind-address=$IP --secure-port="$SCHED_PORT" --cert-dir="$PKI/generated-scheduler"
    launch kube-controller-manager "$cm" --kubeconfig="$DIR/kubeconfig" --leader-elect=false \
        --bind-address=$IP --secure-port="$CM_PORT" --cert-dir="$PKI/generated-cm" \
        --controllers='*,-node-lifecycle-controller' --root-ca-file="$PKI/ca.crt" \
        --service-account-private-key-file="$PKI/sa.key" \
        --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
        --service-cluster-ip-range=10.96.0.0/24
    wait_healthy kube-scheduler "https://$IP:$SCHED_PORT/healthz" -k
    wait_healthy kube-controller-manager "https://$IP:$CM_PORT/healthz" -k
    say "control plane up in $(($(ms) - t1)) ms ($(($(ms) - t0)) ms with preparation): https://$IP:$API_PORT, state in $DIR"
    print_env
}

status() {
    local c
    for c in "${COMPONENTS[@]}"; do
        if running "$c"; then echo "$c running (pid $(cat "$RUN/$c.pid"))"; else echo "$c stopped"; fi
    done
}

case "${1:-}" in
    start)
        if [ -n "${2:-}" ]; then BIN_DIR=$2; fi
        start ;;
    install) install ;;
    stop) stop ;;
    env)
        running kube-apiserver || die "the control plane is not running (scripts/k8s-dev.sh start)"
        print_env ;;
    status) status ;;
    *) echo "usage: $0 start [BIN_DIR] | install | env | status | stop" >&2; exit 2 ;;
esac
