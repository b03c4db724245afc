"""The test lab's NFVO Grant interface (SOL003 clause 9) for scripts/sol003/harness.py.

`vnfm serve` runs with `[grant] nfvo` pointing here, so every operation of the suite's run asks
this NFVO for its grant, as a VNFM in a lab with an NFVO does:

- `POST /grant/v1/grants`: 201 with a Grant for the request's occurrence (no zones: vnfm's own
  placement decides them), unless the request's instance is held (`hold`): then 202 with the
  grant's `Location`.
- `GET /grant/v1/grants/{n}`: 202 while the instance is held, then 200 with the Grant.

Holding an instance is how the harness gets an occurrence that stays STARTING (vnfm waits for
the grant), the precondition of CancelOperationWorkflow's "Cancel ... - STARTING" test and the
way NotificationEndpoint's START test receives exactly one START. `POST /lab/hold` with
`{"vnfInstanceId": ...}` (the lab's own control, not SOL003) holds an instance from the suite's
process (scripts/sol003/HarnessActions.py); every hold ends when the next file starts.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class GrantNfvo:
    def __init__(self):
        self.lock = threading.Lock()
        self.held = set()
        self.requests = []
        self.server = None

    def start(self):
        nfvo = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status, body=None, headers=()):
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                if self.path == "/lab/hold":
                    # The test lab's own control (HarnessActions.py): hold an instance's grants.
                    n = int(self.headers.get("Content-Length") or 0)
                    nfvo.hold(json.loads(self.rfile.read(n) or b"{}").get("vnfInstanceId"))
                    return self.answer(204)
                if self.path != "/grant/v1/grants":
                    return self.answer(404)
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                with nfvo.lock:
                    nfvo.requests.append(req)
                    k = len(nfvo.requests) - 1
                self.reply(k, polled=False)

            def do_GET(self):
                prefix = "/grant/v1/grants/g-"
                if not self.path.startswith(prefix):
                    return self.answer(404)
                try:
                    k = int(self.path[len(prefix):])
                    nfvo.requests[k]
                except (ValueError, IndexError):
                    return self.answer(404)
                self.reply(k, polled=True)

            def reply(self, k, polled):
                req = nfvo.requests[k]
                with nfvo.lock:
                    held = req.get("vnfInstanceId") in nfvo.held
                if held:
                    return self.answer(202, None, [("Location", f"/grant/v1/grants/g-{k}")])
                grant = {
                    "id": f"lab-grant-{k}",
                    "vnfInstanceId": req.get("vnfInstanceId"),
                    "vnfLcmOpOccId": req.get("vnfLcmOpOccId"),
                    "_links": {
                        "self": {"href": f"{nfvo.base_url}/grant/v1/grants/g-{k}"},
                        "vnfLcmOpOcc": req.get("_links", {}).get("vnfLcmOpOcc", {"href": "/"}),
                        "vnfInstance": req.get("_links", {}).get("vnfInstance", {"href": "/"}),
                    },
                }
                self.answer(200 if polled else 201, grant,
                            [("Location", f"/grant/v1/grants/g-{k}")])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def port(self):
        return self.server.server_address[1]

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}"

    def hold(self, instance):
        with self.lock:
            self.held.add(instance)

    def release_all(self):
        with self.lock:
            self.held.clear()

    def stop(self):
        self.server.shutdown()
