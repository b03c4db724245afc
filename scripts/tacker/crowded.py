"""Tacker alone against Tacker + vnfm on the crowded test cloud (issue 29, acceptance 2): how
many Heat stack attempts each needs to instantiate the same VNFs, and how many operations end
FAILED_TEMP. A measurement for docs/grants.md, run by hand (not in the test command):

    eval "$(VNFM_OS_FRESH=1 scripts/openstack-dev.sh start)"   # as scripts/test.sh starts it
    python3 scripts/tacker/crowded.py [N]                      # N VNFs per mode (default 3)

The cloud: four zones, az1 and az2 with room for hundreds of servers, az3 and az4 with room for
one m1.tiny each (VNFM_OS_TEST_SMALL_ZONES). The VNF: scripts/tacker/packages/tacker-vnf, two
VNFCs apart by zone (anti-affinity, Tacker's `placement_fallback_best_effort = True`, so that
Tacker reselects a zone after Heat fails). Each mode instantiates N VNFs one after the other,
keeping them, then terminates them all:

- **Tacker alone** (`[v2_nfvo] use_external_nfvo = False`): the package onboarded in Tacker
  itself; its built-in grant puts every VNFC in the first zone of `test_grant_zone_list`, here
  `az3` (a zone the operator listed and that has since filled up); when Heat fails for lack of
  room, Tacker's AZ reselection (`_update_stack_retry`) updates the stack with another zone,
  picked without looking at capacity, until it succeeds or runs out of zones.
- **Tacker + vnfm** (`vnfm serve` as its NFVO): vnfm's grant places each VNFC in a zone with
  room, by Placement's free capacity, apart by zone.

The stack attempts are counted in Heat: the stack-level CREATE and UPDATE events of each VNF's
stack (`vnf-<instance id>`). Prints a table and the raw numbers as JSON.
"""
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_tacker as rt  # noqa: E402


def heat_url(cloud):
    a = cloud.auth
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": a["username"], "domain": {"name": a["user_domain"]},
        "password": a["password"]}}},
        "scope": {"project": {"name": a["project"], "domain": {"name": a["project_domain"]}}}}}
    _, _, tok = rt.http("POST", a["auth_url"].rstrip("/") + "/auth/tokens", body)
    return next(ep["url"] for s in tok["token"]["catalog"] if s["type"] == "orchestration"
                for ep in s["endpoints"] if ep["interface"] == "public")


def stack_attempts(cloud, heat, inst_id):
    """The stack-level CREATE/UPDATE attempts of the VNF's stack (IN_PROGRESS events)."""
    name = f"vnf-{inst_id}"
    h = {"X-Auth-Token": cloud.token}
    status, _, body = rt.http("GET", f"{heat}/stacks/{name}/events?limit=1000", headers=h)
    if status != 200:
        return None
    return sum(1 for e in body.get("events", [])
               if e.get("resource_name") == name
               and e.get("resource_status") in ("CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS"))


def onboard_in_tacker(url):
    """Onboards the package in Tacker's own package API (v1); its vnfdId."""
    base = url.rstrip("/") + "/vnfpkgm/v1"
    h = {"Accept": "application/json"}
    status, _, pkg = rt.http("POST", base + "/vnf_packages", {}, h)
    if status != 201:
        raise rt.Fail(f"Tacker: POST /vnfpkgm/v1/vnf_packages: {status} {pkg}")
    buf = io.BytesIO()
    src = os.path.join(rt.PACKAGES, "tacker-vnf")
    # Tacker validates an onboarded CSAR with tosca-parser, which needs the ETSI SOL001 type
    # files the package imports (vnfm reads the VNFD without them; the package does not carry
    # them): the copies in Tacker's own wheel (its unit-test data) go into Definitions/.
    etsi = os.path.join(os.environ.get("VNFM_TACKER_DIR", os.path.expanduser("~/.cache/vnfm-tacker")),
                        "venv", "lib")
    types = {}
    for root, _, files in os.walk(etsi):
        for f in ("etsi_nfv_sol001_common_types.yaml", "etsi_nfv_sol001_vnfd_types.yaml"):
            if f in files and f not in types and root.endswith("etsi_nfv"):
                types[f] = os.path.join(root, f)
    if len(types) != 2:
        raise rt.Fail(f"the ETSI SOL001 type files are not in Tacker's venv under {etsi}")
    with zipfile.ZipFile(buf, "w") as z:
        for root, _, files in os.walk(src):
            for f in sorted(files):
                full = os.path.join(root, f)
                rel = os.path.relpath(full, src)
                if f == "tacker_df_simple.yaml":
                    # tosca-parser also wants every input the VNF node type's substitution
                    # mapping names declared (vnfm does not read them)
                    text = open(full).read().replace(
                        "  inputs:\n    descriptor_id:\n      type: string\n",
                        "  inputs:\n" + "".join(
                            f"    {i}:\n      type: string\n"
                            for i in ("descriptor_id", "descriptor_version", "provider",
                                      "product_name", "software_version"))
                        + "    vnfm_info:\n      type: list\n      entry_schema:\n"
                          "        type: string\n", 1)
                    # a hash of zeros is the integer 0 to YAML; tosca-parser wants a string
                    text = text.replace("hash: " + "0" * 64, "hash: '" + "0" * 64 + "'")
                    z.writestr(rel, text)
                else:
                    z.write(full, rel)
        for f, path in sorted(types.items()):
            z.write(path, f"Definitions/{f}")
    req = rt.urllib.request.Request(f"{base}/vnf_packages/{pkg['id']}/package_content",
                                    data=buf.getvalue(), method="PUT",
                                    headers={"Content-Type": "application/zip", **h})
    with rt.urllib.request.urlopen(req, timeout=60) as r:
        if r.status != 202:
            raise rt.Fail(f"Tacker: PUT package_content: {r.status}")
    end = time.time() + 120
    while True:
        _, _, info = rt.http("GET", f"{base}/vnf_packages/{pkg['id']}", headers=h)
        if info.get("onboardingState") == "ONBOARDED":
            return info["vnfdId"]
        if time.time() > end:
            raise rt.Fail(f"Tacker: the package is {info.get('onboardingState')} after 120s")
        time.sleep(1)


def run_mode(cloud, heat, tacker, vnfd_id, n, label):
    """Instantiates n VNFs, keeps them, then terminates them: per VNF its outcome, stack
    attempts and zones."""
    rows, insts = [], []
    try:
        for i in range(n):
            status, _, inst = tacker.call("POST", "/vnf_instances",
                                          {"vnfdId": vnfd_id, "vnfInstanceName": f"{label}-{i}"})
            if status != 201:
                raise rt.Fail(f"{label}: create: {status} {inst}")
            insts.append(inst["id"])
            outcome = "COMPLETED"
            try:
                tacker.op(f"/vnf_instances/{inst['id']}/instantiate", {
                    "flavourId": "simple",
                    "vimConnectionInfo": cloud.vim_connection_info(),
                    "additionalParams": rt.USERDATA,
                }, f"{label} instantiate {i}")
            except rt.Fail as e:
                outcome = "FAILED_TEMP" if "FAILED_TEMP" in str(e) else f"failed: {e}"
            zones = []
            if outcome == "COMPLETED":
                for sid in rt.servers_of(tacker.instance(inst["id"])).values():
                    s = cloud.server(sid)
                    zones.append(s.get("OS-EXT-AZ:availability_zone") if s else None)
            rows.append({"vnf": i, "outcome": outcome,
                         "stack_attempts": stack_attempts(cloud, heat, inst["id"]),
                         "zones": sorted(z for z in zones if z)})
            rt.log(f"{label} VNF {i}: {rows[-1]}")
    finally:
        for inst_id in insts:
            try:
                if tacker.instance(inst_id).get("instantiationState") == "INSTANTIATED":
                    tacker.op(f"/vnf_instances/{inst_id}/terminate",
                              {"terminationType": "FORCEFUL", "additionalParams": rt.USERDATA},
                              f"{label} terminate")
            except rt.Fail as e:
                rt.log(f"{label} clean-up: {e}")
            tacker.call("DELETE", f"/vnf_instances/{inst_id}")
    return rows


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if not os.environ.get("OS_AUTH_URL"):
        sys.exit("crowded.py: no OS_AUTH_URL: eval \"$(scripts/openstack-dev.sh start)\" first")
    cloud = rt.Cloud()
    heat = heat_url(cloud)
    work = tempfile.mkdtemp(prefix="vnfm-crowded.")
    results = {}
    tacker_sh = os.path.join(rt.ROOT, "scripts", "tacker-dev.sh")
    try:
        # Tacker alone: its built-in grant, every VNFC in az3 first
        url = rt.start_tacker({"VNFM_TACKER_LOCAL_ZONES": "az3",
                               "VNFM_TACKER_FALLBACK_BEST_EFFORT": "1",
                               "VNFM_TACKER_FRESH": "1"})
        vnfd_id = onboard_in_tacker(url)
        results["tacker alone"] = run_mode(cloud, heat, rt.Tacker(url), vnfd_id, n,
                                           "tacker-alone")
        # Tacker + vnfm
        vnfm, base = rt.start_vnfm(work, ledger=False)
        try:
            url = rt.start_tacker({"VNFM_TACKER_NFVO": base,
                                   "VNFM_TACKER_CLIENT_ID": rt.CLIENT_ID,
                                   "VNFM_TACKER_CLIENT_SECRET": rt.CLIENT_SECRET,
                                   "VNFM_TACKER_FALLBACK_BEST_EFFORT": "1"})
            results["tacker + vnfm"] = run_mode(cloud, heat, rt.Tacker(url), rt.VNFD_ID, n,
                                                "tacker-vnfm")
        finally:
            vnfm.terminate()
            vnfm.wait(20)
    finally:
        subprocess.run([tacker_sh, "stop"])
    print("\n| mode | VNF | outcome | stack attempts | zones |")
    print("|---|---:|---|---:|---|")
    for mode, rows in results.items():
        for r in rows:
            print(f"| {mode} | {r['vnf']} | {r['outcome']} | {r['stack_attempts']} | "
                  f"{', '.join(r['zones'])} |")
    for mode, rows in results.items():
        total = sum(r["stack_attempts"] or 0 for r in rows)
        failed = sum(1 for r in rows if r["outcome"] != "COMPLETED")
        print(f"{mode}: {total} stack attempts for {len(rows)} VNFs, {failed} not COMPLETED")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
