#!/usr/bin/env python3
"""The memory of `vnfm serve` listing a large fleet (issue 27, state that scales).

Makes a SQLite state file with N instances (one created through `POST /vnf_instances`, the
others copies of its row with their own id and name, written straight into the file), starts
`vnfm serve` on it, reads the whole `GET /vnflcm/v2/vnf_instances` page by page (following
`Link: rel="next"`), asks `filter=(eq,vnfInstanceName,...)` a few times, and prints the time of
the walk, the time of the filter, and the server's resident memory (VmRSS during the walk, and
VmHWM, its peak, at the end).

    python3 benches/list_rss.py --vnfm target/release/vnfm --instances 100000
    python3 benches/list_rss.py --vnfm target/release/vnfm --postgres "$VNFM_TEST_POSTGRES_URL"

With `--postgres URL` (a server, as `VNFM_TEST_POSTGRES_URL`) the state is a database of its
own made there (and dropped at the end) instead of a SQLite file, the rows written with `psql`
(`--psql`, default: on the PATH or PostgreSQL 15's).

Only the standard library; the server listens on a free loopback port of its own.
"""

import argparse
import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

DEMO_VNFD = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024  # MiB
    return -1


def http(base, path, body=None):
    req = urllib.request.Request(base + path, data=body, method="POST" if body else "GET")
    if body:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, dict(r.headers), r.read()


def with_database(url, db):
    rest = url.index("://") + 3
    query = url.find("?", rest)
    query = len(url) if query < 0 else query
    slash = url.find("/", rest, query)
    path = query if slash < 0 else slash
    return f"{url[:path]}/{db}{url[query:]}"


def psql(tool, url, *args, stdin=None):
    subprocess.run([tool, url, "-v", "ON_ERROR_STOP=1", "-Atq", *args], input=stdin, check=True, text=True)


def start(vnfm, state, port):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VNFM_")}
    env["VNFM_LOG"] = "warn"
    args = [vnfm, "serve", "--listen", f"127.0.0.1:{port}"]
    if state.startswith("postgres"):
        env["VNFM_STATE_URL"] = state
    else:
        args += ["--state", state]
    p = subprocess.Popen(
        args,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            http(base, "/healthz")
            return p, base
        except OSError:
            time.sleep(0.1)
    p.kill()
    sys.exit("vnfm serve did not answer /healthz within 60 s")


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vnfm", default="target/release/vnfm")
    ap.add_argument("--instances", type=int, default=100_000)
    ap.add_argument("--postgres", help="a PostgreSQL server's URL: the state in a database there")
    default_psql = "psql" if shutil.which("psql") else "/usr/lib/postgresql/15/bin/psql"
    ap.add_argument("--psql", default=default_psql)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        state = os.path.join(d, "state.sqlite")
        if a.postgres:
            name = f"vnfm_rss_{os.getpid()}"
            psql(a.psql, a.postgres, "-c", f'CREATE DATABASE "{name}"')
            state = with_database(a.postgres, name)
        try:
            run(a, state)
        finally:
            if a.postgres:
                psql(a.psql, a.postgres, "-c", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(a, state):
    port = free_port()
    p, base = start(a.vnfm, state, port)
    body = json.dumps({"vnfdId": DEMO_VNFD, "vnfInstanceName": "seed"}).encode()
    code, _, out = http(base, "/vnflcm/v2/vnf_instances", body)
    assert code == 201, out
    seed = json.loads(out)["id"]
    stop(p)
    t0 = time.time()
    if state.startswith("postgres"):
        out = subprocess.run(
            [a.psql, state, "-Atq", "-c", f"SELECT body FROM vnf_instances WHERE id = '{seed}'"],
            check=True, capture_output=True, text=True,
        ).stdout
        template = out.rstrip("\n")
    else:
        db = sqlite3.connect(state)
        (row,) = db.execute("SELECT body FROM vnf_instances WHERE id = ?", (seed,)).fetchall()
        template = row[0]
    rows = []
    for i in range(a.instances - 1):
        iid = f"{i:08d}-0000-4000-8000-000000000000"
        b = template.replace(seed, iid).replace('"vnfInstanceName":"seed"', f'"vnfInstanceName":"vnf-{i}"')
        rows.append((iid, b, f"vnf-{i}"))
    if state.startswith("postgres"):
        # The name column holds the name as its JSON string on PostgreSQL.
        buf = io.StringIO()
        w = csv.writer(buf)
        for iid, b, n in rows:
            w.writerow((iid, b, 1, json.dumps(n)))
        psql(a.psql, state, "-c", "\\copy vnf_instances (id, body, version, name) FROM STDIN WITH (FORMAT csv)", stdin=buf.getvalue())
    else:
        db.executemany("INSERT INTO vnf_instances (id, body, version, name) VALUES (?, ?, 1, ?)", rows)
        db.commit()
        db.close()
    print(f"{a.instances} instances written in {time.time() - t0:.1f} s")

    p, base = start(a.vnfm, state, port)
    print(f"started: VmRSS {status(p.pid, 'VmRSS')} MiB")
    t0 = time.time()
    path, pages, n, peak = "/vnflcm/v2/vnf_instances", 0, 0, 0
    while path:
        code, headers, out = http(base, path)
        assert code == 200, out
        n += len(json.loads(out))
        pages += 1
        if pages % 50 == 0:
            peak = max(peak, status(p.pid, "VmRSS"))
        link = headers.get("Link") or headers.get("link")
        m = re.match(r'<([^>]*)>; rel="next"', link or "")
        path = m.group(1) if m else None
    walk = time.time() - t0
    assert n == a.instances, (n, a.instances)
    print(
        f"listed {n} in {pages} pages: {walk:.2f} s, {walk / n * 1000 * 1000:.1f} ms per 1,000; "
        f"VmRSS during the walk at most {peak} MiB"
    )
    times = []
    for i in (0, a.instances // 2, a.instances - 2):
        t0 = time.time()
        code, _, out = http(base, f"/vnflcm/v2/vnf_instances?filter=(eq,vnfInstanceName,vnf-{i})")
        times.append((time.time() - t0) * 1000)
        assert code == 200 and len(json.loads(out)) == 1, out
    print("name filter: " + ", ".join(f"{t:.1f} ms" for t in times))
    print(f"VmRSS {status(p.pid, 'VmRSS')} MiB, VmHWM (peak) {status(p.pid, 'VmHWM')} MiB")
    stop(p)


if __name__ == "__main__":
    main()
