#!/usr/bin/env bash
# Captures real OpenStack answers as test fixtures of vnfm-openstack.
#
#   scripts/capture-openstack.sh placement OUTDIR
#
# `placement`: what the zone catalogue reads to report the free capacity of hosts. With the
# admin credentials of the OS_* variables it boots one server (flavor VNFM_OS_TEST_FLAVOR,
# default m1.tiny, in the first zone of VNFM_OS_TEST_ZONES, no network) so that some usage is
# not zero, then records, each body as the service sent it (pretty-printed, keys sorted):
#   nova-availability-zone-detail.json       GET /os-availability-zone/detail
#   nova-hypervisors-detail.json             GET /os-hypervisors/detail
#   placement-root.json                      GET /  (versions)
#   placement-resource-providers.json        GET /resource_providers
#   placement-allocation-candidates.json     GET /allocation_candidates?resources=VCPU:1
#   placement-inventories-<host>.json        GET /resource_providers/{uuid}/inventories
#   placement-usages-<host>.json             GET /resource_providers/{uuid}/usages
# and, with the non-admin user of VNFM_OS_MEMBER_USERNAME / _PASSWORD / _PROJECT:
#   member-placement-resource-providers-403.json, member-placement-allocation-candidates-403.json,
#   member-nova-availability-zone-detail-403.json, member-nova-availability-zone.json
# plus capture.json (versions, microversions, server, time). The server is deleted at the end,
# also when a request fails. Placement is asked at microversion $PLACEMENT_MICROVERSION, Nova at
# 2.79 (what the adapter sends).
#
# Typical use (services of scripts/openstack-dev.sh):
#   eval "$(scripts/openstack-dev.sh env)"
#   scripts/capture-openstack.sh placement vnfm-openstack/tests/fixtures/placement-16.0.0
set -euo pipefail

PLACEMENT_MICROVERSION=1.29
NOVA_MICROVERSION=2.79

usage() { echo "usage: $0 placement OUTDIR" >&2; exit 2; }
[ "$#" -eq 2 ] || usage
[ "$1" = placement ] || usage
OUT=$2
mkdir -p "$OUT"
: "${OS_AUTH_URL:?set the OS_* variables (eval \"\$(scripts/openstack-dev.sh env)\")}"
: "${VNFM_OS_MEMBER_USERNAME:?set VNFM_OS_MEMBER_USERNAME/_PASSWORD/_PROJECT (scripts/openstack-dev.sh env prints them)}"

exec python3 - "$OUT" "$PLACEMENT_MICROVERSION" "$NOVA_MICROVERSION" <<'EOF'
import json, os, sys, time, urllib.error, urllib.request

out, pmv, nmv = sys.argv[1:4]
env = os.environ
auth_url = env["OS_AUTH_URL"].rstrip("/")
if not auth_url.endswith("/v3"):
    auth_url += "/v3"


def http(method, url, token=None, body=None, headers=()):
    r = urllib.request.Request(url, json.dumps(body).encode() if body is not None else None,
                               method=method)
    r.add_header("Accept", "application/json")
    if body is not None:
        r.add_header("Content-Type", "application/json")
    if token:
        r.add_header("X-Auth-Token", token)
    for k, v in headers:
        r.add_header(k, v)
    try:
        with urllib.request.urlopen(r, timeout=60) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def login(user, password, project):
    status, headers, raw = http("POST", auth_url + "/auth/tokens", body={"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"name": env.get("OS_USER_DOMAIN_NAME", "Default")},
            "password": password}}},
        "scope": {"project": {"name": project, "domain": {
            "name": env.get("OS_PROJECT_DOMAIN_NAME", "Default")}}}}})
    if status != 201:
        sys.exit(f"capture: login of {user} failed: HTTP {status} {raw[:200]!r}")
    body = json.loads(raw)["token"]
    urls = {s["type"]: e["url"] for s in body["catalog"] for e in s["endpoints"]
            if e["interface"] == env.get("OS_INTERFACE", "public")}
    return headers["X-Subject-Token"], urls


def save(name, raw):
    with open(os.path.join(out, name), "wb") as f:
        f.write(json.dumps(json.loads(raw), indent=2, sort_keys=True).encode() + b"\n")
    print(f"capture: {name}", file=sys.stderr)


def get(token, url, headers, want, name=None):
    status, _, raw = http("GET", url, token, headers=headers)
    if status != want:
        raise SystemExit(f"capture: GET {url}: HTTP {status} (expected {want}): {raw[:300]!r}")
    if name:
        save(name, raw)
    return json.loads(raw)


admin, urls = login(env["OS_USERNAME"], env["OS_PASSWORD"], env["OS_PROJECT_NAME"])
nova, placement = urls["compute"].rstrip("/"), urls["placement"].rstrip("/")
NH = [("X-OpenStack-Nova-API-Version", nmv)]
PH = [("OpenStack-API-Version", f"placement {pmv}")]
zone = env.get("VNFM_OS_TEST_ZONES", "nova").split()[0]
flavor = env.get("VNFM_OS_TEST_FLAVOR", "m1.tiny")
image = env.get("VNFM_OS_TEST_IMAGE", "tiny")

images = json.loads(http("GET", urls["image"].rstrip("/") + "/v2/images?name=" + image,
                         admin)[2])["images"]
flavors = get(admin, nova + "/flavors", NH, 200)["flavors"]
flavor_id = next(f["id"] for f in flavors if f["name"] == flavor)
status, _, raw = http("POST", nova + "/servers", admin, {"server": {
    "name": f"vnfm-capture-{int(time.time())}", "imageRef": images[0]["id"],
    "flavorRef": flavor_id, "availability_zone": zone, "networks": "none"}}, NH)
if status != 202:
    sys.exit(f"capture: server create: HTTP {status} {raw[:300]!r}")
server = json.loads(raw)["server"]["id"]
try:
    deadline = time.time() + 120
    while True:
        s = get(admin, f"{nova}/servers/{server}", NH, 200)["server"]
        if s["status"] == "ACTIVE":
            break
        if s["status"] == "ERROR" or time.time() > deadline:
            sys.exit(f"capture: server {server} is {s['status']}: {s.get('fault')}")
        time.sleep(0.5)
    host = s.get("OS-EXT-SRV-ATTR:host")

    get(admin, nova + "/os-availability-zone/detail", NH, 200, "nova-availability-zone-detail.json")
    get(admin, nova + "/os-hypervisors/detail", NH, 200, "nova-hypervisors-detail.json")
    root = get(admin, placement + "/", PH, 200, "placement-root.json")
    rps = get(admin, placement + "/resource_providers", PH, 200,
              "placement-resource-providers.json")["resource_providers"]
    get(admin, placement + "/allocation_candidates?resources=VCPU:1", PH, 200,
        "placement-allocation-candidates.json")
    for rp in rps:
        base = f"{placement}/resource_providers/{rp['uuid']}"
        get(admin, base + "/inventories", PH, 200, f"placement-inventories-{rp['name']}.json")
        get(admin, base + "/usages", PH, 200, f"placement-usages-{rp['name']}.json")

    member, murls = login(env["VNFM_OS_MEMBER_USERNAME"], env["VNFM_OS_MEMBER_PASSWORD"],
                          env["VNFM_OS_MEMBER_PROJECT"])
    get(member, placement + "/resource_providers", PH, 403,
        "member-placement-resource-providers-403.json")
    get(member, placement + "/allocation_candidates?resources=VCPU:1", PH, 403,
        "member-placement-allocation-candidates-403.json")
    get(member, nova + "/os-availability-zone/detail", NH, 403,
        "member-nova-availability-zone-detail-403.json")
    get(member, nova + "/os-availability-zone", NH, 200, "member-nova-availability-zone.json")
    with open(os.path.join(out, "capture.json"), "w") as f:
        json.dump({"captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "placement_max_version": root["versions"][0]["max_version"],
                   "placement_microversion": pmv, "nova_microversion": nmv,
                   "server": {"id": server, "flavor": flavor, "zone": zone, "host": host}},
                  f, indent=2, sort_keys=True)
        f.write("\n")
finally:
    http("DELETE", f"{nova}/servers/{server}", admin, headers=NH)
    print(f"capture: deleted server {server}", file=sys.stderr)
EOF
