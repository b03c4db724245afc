#!/usr/bin/env python3
"""The `openstack vnflcm` suite: the real python-tackerclient (OpenStackClient's `openstack
vnflcm ...`, `--os-tacker-api-version 2`) driving `vnfm serve` through a whole VNF lifecycle.

Started by scripts/tackerclient.sh, which keeps the venv (docs/serve.md, "openstack vnflcm
(python-tackerclient)"). Starts `vnfm serve` on a free 127.0.0.1 port with a temporary state
file and `[server] api_token`, points the client at it with keystoneauth's `admin_token`
plugin (no Keystone: OS_AUTH_TYPE=admin_token, OS_ENDPOINT, OS_TOKEN, which the client sends
as `X-Auth-Token`), then runs `openstack vnflcm` commands as processes and checks each one's
exit status and what it prints (`-f json` where the command has it):

  versions; a wrong token (401, vnfm's ProblemDetails shown, exit 1); create, list, show,
  update (a PATCH: name and metadata); instantiate (its occurrence found with `op list --filter` and polled with `op show` until
  COMPLETED); scale out and in; heal of one VNFC; subsc create, list, show (the callback, a
  local HTTP server, receives the notifications of what follows), op list; terminate, delete,
  and show of the deleted instance (exit 1, "not found"); instantiate of an unknown instance
  (exit 1, vnfm's detail); `create --I` and `terminate --D`; with a package no host can hold
  (the demo package with 4 TiB VDU1s), an instantiate ending FAILED_TEMP, then op retry
  (FAILED_TEMP again), op rollback (ROLLED_BACK), and op fail (FAILED); subsc delete.

Exit 0 when every check holds, 1 on the first that does not (the command, its status, its
output and the end of the server's log are printed), 2 on a harness error.

    suite.py --vnfm BIN --openstack VENV/bin/openstack [--keep]
"""

import argparse
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO_VNFD = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d"
# The demo package with VDU1 asking for 4 TiB of memory, which no host of the demo cloud has:
# its instantiate starts and ends FAILED_TEMP (the grant finds no placement).
UNPLACEABLE_VNFD = "0e5a1f3c-7b2d-4c8e-9f10-5a6b7c8d9e0f"
TOKEN = "tackerclient-suite-token"
# One command's limit; the whole suite takes about a minute.
COMMAND_TIMEOUT = 120
WAIT_SECS = 60


class Failure(Exception):
    """A check that does not hold."""


def die(msg):
    print(f"tackerclient: {msg}", file=sys.stderr)
    sys.exit(2)


class Callback(http.server.BaseHTTPRequestHandler):
    """The subscription's callback: 204 to vnfm's test GET and to every notification."""

    received = []
    lock = threading.Lock()

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(204)
        self.end_headers()

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        try:
            doc = json.loads(body)
        except ValueError:
            doc = {"unreadable": body.decode(errors="replace")}
        with Callback.lock:
            Callback.received.append(doc)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


class Suite:
    def __init__(self, vnfm, openstack, work):
        self.vnfm = vnfm
        self.openstack = openstack
        self.work = work
        self.proc = None
        self.log_path = os.path.join(work, "serve.log")
        self.env = None
        self.checks = 0
        self.seen = set()
        self.current = "start"
        self.started = time.time()

    # --- the server -----------------------------------------------------------------------

    def start(self):
        packages = os.path.join(self.work, "packages")
        src = os.path.join(ROOT, "examples", "packages", "demo-vnf")
        dst = os.path.join(packages, "unplaceable")
        shutil.copytree(src, dst)
        found = [0, 0]
        for dirpath, _, files in os.walk(dst):
            for name in files:
                path = os.path.join(dirpath, name)
                text = open(path).read()
                found[0] += text.count(DEMO_VNFD)
                found[1] += text.count("virtual_mem_size: 2048 MiB")
                text = text.replace(DEMO_VNFD, UNPLACEABLE_VNFD)
                text = text.replace("virtual_mem_size: 2048 MiB", "virtual_mem_size: 4096 GiB")
                open(path, "w").write(text)
        if found[0] == 0 or found[1] != 1:
            die("examples/packages/demo-vnf changed: its vnfdId or VDU1's "
                f"`virtual_mem_size: 2048 MiB` not found once ({found})")
        cfg = os.path.join(self.work, "vnfm.toml")
        with open(cfg, "w") as f:
            f.write(f"""[state]
path = "{self.work}/state.sqlite"

[placement]            # the demo cloud has a full zone
reselect_zones = true
fallback_best_effort = true

[server]
listen = "127.0.0.1:0"
api_token = "{TOKEN}"

[packages]
dir = "{packages}"

[notifications]
retry_initial_ms = 200
retry_max_delay_ms = 1000
timeout = 5
# the suite's callback listens on loopback, refused by default
allow = ["127.0.0.0/8"]
""")
        log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(
            [self.vnfm, "--config", cfg, "serve"], stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for _ in range(600):
            log.seek(0)
            m = re.search(r"listening on (http://[0-9.]+:[0-9]+)", log.read())
            if m:
                self.base = m.group(1)
                break
            if self.proc.poll() is not None:
                log.seek(0)
                die(f"vnfm serve exited with {self.proc.returncode}:\n{log.read()}")
            time.sleep(0.05)
        else:
            die("vnfm serve did not start within 30 s")
        # OpenStackClient's settings, from the environment only (no clouds.yaml, no OS_* of
        # the caller's): the token stays out of the process list.
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        env.update({
            "OS_AUTH_TYPE": "admin_token",
            "OS_ENDPOINT": self.base,
            "OS_TOKEN": TOKEN,
            "OS_TACKER_API_VERSION": "2",
            "OS_CLIENT_CONFIG_FILE": os.path.join(self.work, "no-clouds.yaml"),
            "HOME": self.work,
        })
        self.env = env

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self, lines=40):
        try:
            return "".join(open(self.log_path).readlines()[-lines:])
        except OSError:
            return ""

    # --- running the client ---------------------------------------------------------------

    def osc(self, *args, rc=0, fmt=True, env=None):
        """Runs `openstack vnflcm ARGS` (with `-f json` when `fmt`); checks its exit status is
        `rc`; returns (parsed JSON or None, stdout, stderr)."""
        cmd = [self.openstack, "vnflcm", *args]
        if fmt:
            cmd += ["-f", "json"]
        try:
            p = subprocess.run(cmd, env=env or self.env, capture_output=True, text=True,
                               timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failure(f"`{' '.join(cmd[1:])}` did not end within {COMMAND_TIMEOUT} s")
        self.last = (cmd, p)
        if p.returncode != rc:
            raise Failure(f"`{' '.join(cmd[1:])}` exited {p.returncode}, expected {rc}:\n"
                          f"stdout: {p.stdout}\nstderr: {p.stderr}")
        out = None
        if fmt and rc == 0:
            # `create --I` prints a sentence before its JSON.
            text = p.stdout[min((i for i in (p.stdout.find("{"), p.stdout.find("["))
                                 if i >= 0), default=0):]
            try:
                out = json.loads(text)
            except ValueError:
                raise Failure(f"`{' '.join(cmd[1:])}` printed no JSON:\n{p.stdout}\n{p.stderr}")
        return out, p.stdout, p.stderr

    def check(self, cond, what):
        self.checks += 1
        if not cond:
            raise Failure(what)

    def wait_op(self, op_id, states):
        """Polls `op show` until the occurrence is in one of `states`."""
        deadline = time.time() + WAIT_SECS
        while True:
            op, _, _ = self.osc("op", "show", op_id)
            state = op.get("Operation State")
            if state in states:
                return op
            if state not in ("STARTING", "PROCESSING", "ROLLING_BACK"):
                raise Failure(f"occurrence {op_id} is {state}, expected {states}: {op}")
            if time.time() > deadline:
                raise Failure(f"occurrence {op_id} not {states} within {WAIT_SECS} s: {op}")
            time.sleep(0.3)

    def ops_of(self, inst, operation=None):
        """The instance's occurrences (`op list --filter`), oldest first as vnfm lists them."""
        flt = f"(eq,vnfInstanceId,{inst})"
        if operation:
            flt += f";(eq,operation,{operation})"
        ops, _, _ = self.osc("op", "list", "--filter", flt)
        self.check(all(o["VNF Instance ID"] == inst for o in ops),
                   f"op list --filter {flt} listed another instance's occurrence: {ops}")
        return ops

    def new_op(self, inst, operation):
        """The id of the one `operation` occurrence of `inst` that `op list` had not shown
        this method before (the one the last command started)."""
        ops = self.ops_of(inst, operation)
        new = [o["ID"] for o in ops if o["ID"] not in self.seen]
        self.check(len(new) == 1, f"not one new {operation} occurrence of {inst} in op list "
                   f"(known: {sorted(self.seen)}): {ops}")
        self.seen.add(new[0])
        return new[0]

    def param_file(self, name, doc):
        path = os.path.join(self.work, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    # --- the steps ------------------------------------------------------------------------

    def run(self):
        step = self.step
        step("versions")
        v, _, _ = self.osc("versions", "--major-version", "2")
        self.check(v.get("uriPrefix") == "/vnflcm/v2"
                   and any(a["version"].startswith("2.") for a in v["apiVersions"]),
                   f"versions: {v}")

        step("a wrong token: 401, vnfm's ProblemDetails detail, exit 1")
        env = dict(self.env, OS_TOKEN="not-the-token")
        _, _, err = self.osc("list", rc=1, env=env)
        self.check("the LCM API requires Authorization: Bearer <[server] api_token>" in err
                   and "X-Auth-Token" in err, f"stderr: {err}")

        inst_file = self.param_file("instantiate.json", {"flavourId": "default"})

        step("create")
        c, _, _ = self.osc("create", DEMO_VNFD, "--name", "tkc-demo", "--description",
                           "python-tackerclient suite")
        inst = c["ID"]
        self.check(c["Instantiation State"] == "NOT_INSTANTIATED"
                   and c["VNFD ID"] == DEMO_VNFD and c["VNF Instance Name"] == "tkc-demo"
                   and c["VNF Instance Description"] == "python-tackerclient suite"
                   and c["VNF Product Name"] and c["VNF Provider"],
                   f"create printed {c}")
        uuid.UUID(inst)

        step("list")
        ls, _, _ = self.osc("list")
        self.check([r["Instantiation State"] for r in ls if r["ID"] == inst]
                   == ["NOT_INSTANTIATED"], f"list: {ls}")

        step("show")
        s, _, _ = self.osc("show", inst)
        self.check(s["ID"] == inst and s["Instantiation State"] == "NOT_INSTANTIATED"
                   and s["VNFD ID"] == DEMO_VNFD, f"show: {s}")

        step("update (PATCH, application/merge-patch+json)")
        upd = self.param_file("update.json", {"vnfInstanceName": "tkc-renamed",
                                              "metadata": {"suite": "tackerclient"}})
        _, out, _ = self.osc("update", inst, "--I", upd, fmt=False)
        self.check(f"Update vnf:{inst}" in out, f"update printed {out!r}")
        self.wait_op(self.new_op(inst, "MODIFY_INFO"), {"COMPLETED"})
        s, _, _ = self.osc("show", inst)
        self.check(s["VNF Instance Name"] == "tkc-renamed"
                   and s["VNF Instance Description"] == "python-tackerclient suite"
                   and s.get("metadata", {}).get("suite") == "tackerclient",
                   f"show after update: {s}")

        step("subsc create, list, show (a local callback)")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Callback)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.callback = server
        uri = f"http://127.0.0.1:{server.server_address[1]}/notify"
        sub_file = self.param_file("subscription.json", {
            "filter": {"vnfInstanceSubscriptionFilter": {"vnfInstanceIds": [inst]},
                       "notificationTypes": ["VnfLcmOperationOccurrenceNotification"]},
            "callbackUri": uri,
        })
        sub, _, _ = self.osc("subsc", "create", sub_file)
        sub_id = sub["ID"]
        self.check(sub["Callback URI"] == uri
                   and sub["Filter"]["vnfInstanceSubscriptionFilter"]["vnfInstanceIds"]
                   == [inst], f"subsc create: {sub}")
        subs, _, _ = self.osc("subsc", "list")
        self.check([x["Callback URI"] for x in subs if x["ID"] == sub_id] == [uri],
                   f"subsc list: {subs}")
        shown, _, _ = self.osc("subsc", "show", sub_id)
        self.check(shown["ID"] == sub_id and shown["Callback URI"] == uri,
                   f"subsc show: {shown}")

        step("instantiate, op show until COMPLETED")
        _, out, _ = self.osc("instantiate", inst, inst_file, fmt=False)
        self.check(f"Instantiate request for VNF Instance {inst} has been accepted" in out,
                   f"instantiate printed {out!r}")
        op = self.wait_op(self.new_op(inst, "INSTANTIATE"), {"COMPLETED"})
        self.check(op["Operation"] == "INSTANTIATE" and op["VNF Instance ID"] == inst
                   and op["Operation Parameters"] == {"flavourId": "default"}
                   and op["Grant ID"], f"op show: {op}")
        s, _, _ = self.osc("show", inst)
        info = s["Instantiated Vnf Info"]
        self.check(s["Instantiation State"] == "INSTANTIATED" and info["flavourId"] == "default",
                   f"show after instantiate: {s}")
        vdu1 = [r for r in info["vnfcResourceInfo"] if r["vduId"] == "VDU1"]
        self.check(len(vdu1) >= 1 and self.level(info, "VDU1_scale") == 0,
                   f"instantiated: {info}")

        step("scale out VDU1_scale by 1")
        _, out, _ = self.osc("scale", "--type", "SCALE_OUT", "--aspect-id", "VDU1_scale",
                             "--number-of-steps", "1", inst, fmt=False)
        self.check(f"Scale request for VNF Instance {inst} has been accepted" in out, out)
        self.wait_op(self.new_op(inst, "SCALE"), {"COMPLETED"})
        info = self.osc("show", inst)[0]["Instantiated Vnf Info"]
        out_vdu1 = [r for r in info["vnfcResourceInfo"] if r["vduId"] == "VDU1"]
        self.check(self.level(info, "VDU1_scale") == 1 and len(out_vdu1) == len(vdu1) + 1,
                   f"after scale out: {info}")

        step("scale in VDU1_scale by 1")
        self.osc("scale", "--type", "SCALE_IN", "--aspect-id", "VDU1_scale", inst, fmt=False)
        self.check(len(self.ops_of(inst, "SCALE")) == 2, "two SCALE occurrences")
        self.wait_op(self.new_op(inst, "SCALE"), {"COMPLETED"})
        info = self.osc("show", inst)[0]["Instantiated Vnf Info"]
        in_vdu1 = [r for r in info["vnfcResourceInfo"] if r["vduId"] == "VDU1"]
        self.check(self.level(info, "VDU1_scale") == 0 and len(in_vdu1) == len(vdu1),
                   f"after scale in: {info}")

        step("heal one VNFC")
        victim = in_vdu1[0]
        _, out, _ = self.osc("heal", "--cause", "suite", "--vnfc-instance", victim["id"], "--",
                             inst, fmt=False)
        self.check(f"Heal request for VNF Instance {inst} has been accepted" in out, out)
        op = self.wait_op(self.new_op(inst, "HEAL"), {"COMPLETED"})
        self.check(op["Operation Parameters"].get("vnfcInstanceId") == [victim["id"]]
                   and op["Operation Parameters"].get("cause") == "suite", f"heal op: {op}")
        info = self.osc("show", inst)[0]["Instantiated Vnf Info"]
        after = {r["id"]: r["computeResource"]["resourceId"] for r in info["vnfcResourceInfo"]}
        self.check(victim["id"] in after
                   and after[victim["id"]] != victim["computeResource"]["resourceId"],
                   f"healed VNFC {victim['id']} not re-created: {info}")

        step("op list")
        ops, _, _ = self.osc("op", "list")
        mine = [(o["Operation"], o["Operation State"]) for o in ops if o["VNF Instance ID"] == inst]
        self.check(sorted(mine) == sorted([("MODIFY_INFO", "COMPLETED"),
                                           ("INSTANTIATE", "COMPLETED"), ("SCALE", "COMPLETED"),
                                           ("SCALE", "COMPLETED"), ("HEAL", "COMPLETED")]),
                   f"op list: {ops}")

        step("terminate")
        _, out, _ = self.osc("terminate", inst, fmt=False)
        self.check(f"Terminate request for VNF Instance '{inst}' has been accepted" in out, out)
        self.wait_op(self.new_op(inst, "TERMINATE"), {"COMPLETED"})
        s, _, _ = self.osc("show", inst)
        self.check(s["Instantiation State"] == "NOT_INSTANTIATED"
                   and not s.get("Instantiated Vnf Info"), f"show after terminate: {s}")

        step("the subscription's notifications")
        want = {(o, st) for o in ("INSTANTIATE", "SCALE", "HEAL", "TERMINATE")
                for st in ("STARTING", "PROCESSING", "COMPLETED")}
        deadline = time.time() + WAIT_SECS
        while True:
            with Callback.lock:
                got = {(n.get("operation"), n.get("operationState")) for n in Callback.received
                       if n.get("vnfInstanceId") == inst
                       and n.get("subscriptionId") == sub_id}
            if want <= got:
                break
            if time.time() > deadline:
                raise Failure(f"notifications missing: {sorted(want - got)} (got {sorted(got)})")
            time.sleep(0.2)

        step("delete, then show of the deleted instance")
        _, out, _ = self.osc("delete", inst, fmt=False)
        self.check(f"Vnf instance '{inst}' is deleted successfully" in out, out)
        _, _, err = self.osc("show", inst, rc=1)
        self.check(f"VNF instance {inst} not found" in err, f"stderr: {err}")

        step("instantiate of an unknown instance: vnfm's detail, exit 1")
        unknown = str(uuid.uuid4())
        _, _, err = self.osc("instantiate", unknown, inst_file, rc=1, fmt=False)
        self.check(f"VNF instance {unknown} not found" in err, f"stderr: {err}")

        step("create --I (create and instantiate), terminate --D (terminate and delete)")
        c, out, _ = self.osc("create", DEMO_VNFD, "--I", inst_file)
        inst2 = c["ID"]
        self.check(f"VNF Instance {inst2} is created and instantiation request has been "
                   "accepted" in out, out)
        self.wait_op(self.new_op(inst2, "INSTANTIATE"), {"COMPLETED"})
        _, out, _ = self.osc("terminate", "--D", inst2, fmt=False)
        self.check(f"VNF Instance '{inst2}' is deleted successfully" in out, out)
        ls, _, _ = self.osc("list")
        self.check(all(r["ID"] not in (inst, inst2) for r in ls), f"list after delete: {ls}")

        step("a FAILED_TEMP instantiate: op retry, op rollback")
        c, _, _ = self.osc("create", UNPLACEABLE_VNFD)
        inst3 = c["ID"]
        self.osc("instantiate", inst3, inst_file, fmt=False)
        op_id = self.new_op(inst3, "INSTANTIATE")
        op = self.wait_op(op_id, {"FAILED_TEMP"})
        self.check(op["Error"]["status"] and op["Error"]["detail"], f"FAILED_TEMP error: {op}")
        _, out, _ = self.osc("op", "retry", op_id, fmt=False)
        self.check(f"Retry request for LCM operation {op_id} has been accepted" in out, out)
        self.wait_op(op_id, {"FAILED_TEMP"})
        _, out, _ = self.osc("op", "rollback", op_id, fmt=False)
        self.check(f"Rollback request for LCM operation {op_id} has been accepted" in out, out)
        op = self.wait_op(op_id, {"ROLLED_BACK"})
        s, _, _ = self.osc("show", inst3)
        self.check(s["Instantiation State"] == "NOT_INSTANTIATED", f"after rollback: {s}")
        _, _, err = self.osc("op", "retry", op_id, rc=1, fmt=False)
        self.check("ROLLED_BACK" in err, f"retry of a ROLLED_BACK occurrence: {err}")

        step("a FAILED_TEMP instantiate: op fail")
        self.osc("instantiate", inst3, inst_file, fmt=False)
        op_id = self.new_op(inst3, "INSTANTIATE")
        self.wait_op(op_id, {"FAILED_TEMP"})
        failed, _, _ = self.osc("op", "fail", op_id)
        self.check(failed["ID"] == op_id and failed["Operation State"] == "FAILED"
                   and failed["Operation"] == "INSTANTIATE", f"op fail printed {failed}")
        op, _, _ = self.osc("op", "show", op_id)
        self.check(op["Operation State"] == "FAILED", f"op show after fail: {op}")
        self.osc("delete", inst3, fmt=False)

        step("subsc delete")
        _, out, _ = self.osc("subsc", "delete", sub_id, fmt=False)
        self.check(f"Lccn Subscription '{sub_id}' is deleted successfully" in out, out)
        subs, _, _ = self.osc("subsc", "list")
        self.check(all(x["ID"] != sub_id for x in subs), f"subsc list: {subs}")
        _, _, err = self.osc("subsc", "show", sub_id, rc=1)
        self.check(err.strip(), "subsc show of a deleted subscription printed no error")

    def step(self, name):
        self.current = name
        print(f"tackerclient: {time.time() - self.started:5.1f} s  {name}", flush=True)

    @staticmethod
    def level(info, aspect):
        for s in info.get("scaleStatus", []):
            if s["aspectId"] == aspect:
                return s["scaleLevel"]
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vnfm", required=True, help="the vnfm binary")
    ap.add_argument("--openstack", required=True, help="the venv's `openstack`")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (printed)")
    a = ap.parse_args()
    vnfm = os.path.abspath(a.vnfm)
    if not os.access(vnfm, os.X_OK):
        die(f"--vnfm {a.vnfm}: not an executable file")
    work = tempfile.mkdtemp(prefix="vnfm-tackerclient-")
    suite = Suite(vnfm, a.openstack, work)
    started = time.time()
    rc = 0
    try:
        suite.start()
        suite.run()
        print(f"tackerclient: passed ({suite.checks} checks, {time.time() - started:.0f} s)")
    except Failure as e:
        rc = 1
        print(f"tackerclient: FAILED at step `{suite.current}`: {e}", file=sys.stderr)
        print(f"--- the end of vnfm serve's log ---\n{suite.log_tail()}", file=sys.stderr)
    finally:
        suite.stop()
        if a.keep:
            print(f"tackerclient: work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
