"""A notification sink that speaks the part of MockServer's REST API that ETSI's SOL003 suite uses
(through robotframework-mockserver 0.0.7), for scripts/sol003/harness.py.

The suite's notification tests start MockServer 5.5.0 from a jar (`java -jar ...`) and drive it
with `Create Mock Expectation`, `Verify Mock Expectation` and `Clear Requests`. The jar is a Maven
Central artifact, which this project's machines do not reach (crates.io, PyPI, Debian and npm
only), so the harness runs this sink in its place on 127.0.0.1. It follows MockServer 5.5's
documented behaviour for what the library sends:

- `PUT /expectation` `{httpRequest, httpResponse | httpOverrideForwardedRequest, times}`: 201.
  Expectations are matched in the order they were created; the first one that matches and has
  times left answers. A request nothing matches is answered 404 (MockServer's default).
- A request matcher matches on `method` and `path` (an exact string or a regular expression that
  matches the whole path), and on `body` when it has one: `{"type": "JSON", "json": "...",
  "matchType": "STRICT" | "ONLY_MATCHING_FIELDS"}` (STRICT: no field beyond the expected ones,
  arrays in order; ONLY_MATCHING_FIELDS: the expected fields, arrays in any order) or
  `{"type": "JSON_SCHEMA", "jsonSchema": "..."}` (the body validates against the schema).
- `httpOverrideForwardedRequest` `{httpRequest: {path}, delay}`: after the delay, the request is
  sent on to the same server with its path replaced (MockServer forwards to the request's own
  Host), which records and answers it like any other request.
- `PUT /verify` `{httpRequest, times: {atLeast, atMost}}`: 202 when the number of recorded
  requests the matcher matches is within the bounds, else 406 with what was recorded.
- `PUT /clear` `{path}`: forgets the expectations and recorded requests of that path;
  `PUT /reset`: forgets everything; `PUT /retrieve`: the recorded requests (JSON).

Every request other than these control requests is recorded (forwarded ones too), whether an
expectation answered it or not, as MockServer's request log does.
"""

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

try:  # in the harness's venv (JSONSchemaLibrary depends on it)
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None

CONTROL = {"/expectation", "/verify", "/verifySequence", "/clear", "/reset", "/retrieve"}


def _text_matches(expected, actual):
    if expected is None:
        return True
    if expected == actual:
        return True
    try:
        return re.fullmatch(expected, actual) is not None
    except re.error:
        return False


def json_matches(expected, actual, strict):
    """JSONAssert's comparison as MockServer uses it: STRICT (not extensible, arrays in order) or
    ONLY_MATCHING_FIELDS (extensible objects, arrays of the same length in any order)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        if strict and set(actual) != set(expected):
            return False
        return all(k in actual and json_matches(v, actual[k], strict) for k, v in expected.items())
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return False
        if strict:
            return all(json_matches(e, a, strict) for e, a in zip(expected, actual))
        left = list(actual)
        for e in expected:
            for i, a in enumerate(left):
                if json_matches(e, a, strict):
                    del left[i]
                    break
            else:
                return False
        return True
    return expected == actual


def _body_matches(matcher, body):
    if not isinstance(matcher, dict):
        return matcher is None or matcher == body.decode("utf-8", "replace")
    kind = matcher.get("type")
    try:
        actual = json.loads(body) if body else None
    except ValueError:
        return False
    if kind == "JSON":
        expected = matcher.get("json")
        if isinstance(expected, str):
            expected = json.loads(expected)
        return json_matches(expected, actual, matcher.get("matchType") == "STRICT")
    if kind == "JSON_SCHEMA":
        schema = matcher.get("jsonSchema")
        if isinstance(schema, str):
            schema = json.loads(schema)
        if jsonschema is None:
            raise RuntimeError("JSON_SCHEMA matching needs the jsonschema package")
        return jsonschema.Draft4Validator(schema).is_valid(actual)
    raise RuntimeError(f"body matcher of type {kind!r} is not supported by the sink")


def request_matches(matcher, req):
    """Whether a request matcher (MockServer's `httpRequest`) matches a recorded request."""
    if not _text_matches(matcher.get("method"), req["method"]):
        return False
    if not _text_matches(matcher.get("path"), req["path"]):
        return False
    if "body" in matcher and not _body_matches(matcher["body"], req["body"]):
        return False
    return True


class MockSink:
    """The sink: `start()` it, then point the suite's MockServer session at `base_url`."""

    def __init__(self):
        self.lock = threading.Lock()
        self.expectations = []  # dicts: request, response | forward, remaining (None: unlimited)
        self.log = []  # recorded requests: method, path, headers, body (bytes)
        self.server = None
        self.port = None

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                path = urlsplit(self.path).path
                status, headers, out = sink.handle(self.command, path, dict(self.headers), body)
                try:
                    self.send_response(status)
                    for k, v in headers:
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    # The client went away (vnfm's attempt timed out, or it stopped): the
                    # request is recorded all the same, as MockServer's log would have it.
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    # -- the control API ----------------------------------------------------------------------

    def expect(self, request, response=None, forward=None, times=None):
        """Adds an expectation (what `PUT /expectation` does)."""
        remaining = None
        if times and not times.get("unlimited", False):
            remaining = int(times.get("remainingTimes", 1))
        with self.lock:
            self.expectations.append(
                {"request": request, "response": response, "forward": forward,
                 "remaining": remaining}
            )

    def reset(self):
        with self.lock:
            self.expectations.clear()
            self.log.clear()

    def recorded(self, matcher=None):
        with self.lock:
            return [r for r in self.log if matcher is None or request_matches(matcher, r)]

    def handle(self, method, path, headers, body):
        """Answers one request: (status, [(header, value)], body)."""
        if method == "PUT" and path.removeprefix("/mockserver") in CONTROL:
            return self._control(path.removeprefix("/mockserver"), body)
        return self._serve({"method": method, "path": path, "headers": headers, "body": body})

    def _control(self, path, body):
        try:
            data = json.loads(body) if body else {}
            if path == "/expectation":
                for e in data if isinstance(data, list) else [data]:
                    self.expect(e.get("httpRequest", {}), e.get("httpResponse"),
                                e.get("httpOverrideForwardedRequest"), e.get("times"))
                return 201, [], b""
            if path == "/reset":
                self.reset()
                return 200, [], b""
            if path == "/clear":
                with self.lock:
                    self.expectations = [
                        e for e in self.expectations
                        if not _text_matches(data.get("path"), e["request"].get("path", ""))
                    ]
                    self.log = [r for r in self.log if not request_matches(data, r)]
                return 200, [], b""
            if path == "/retrieve":
                out = [{"method": r["method"], "path": r["path"],
                        "body": r["body"].decode("utf-8", "replace")}
                       for r in self.recorded(data or None)]
                return 200, [("Content-Type", "application/json")], json.dumps(out).encode()
            if path == "/verify":
                times = data.get("times", {})
                n = len(self.recorded(data.get("httpRequest", {})))
                lo, hi = int(times.get("atLeast", 1)), times.get("atMost")
                if n >= lo and (hi is None or n <= int(hi)):
                    return 202, [], b""
                paths = [(r["method"], r["path"]) for r in self.recorded()]
                msg = (f"Request not found {n} times (wanted at least {lo}, at most {hi}): "
                       f"{json.dumps(data.get('httpRequest'))}; recorded: {paths}")
                return 406, [("Content-Type", "text/plain")], msg.encode()
            return 400, [], f"{path} is not supported by the harness's sink".encode()
        except (ValueError, RuntimeError, AttributeError, TypeError) as e:
            return 400, [("Content-Type", "text/plain")], f"bad {path} request: {e}".encode()

    def _serve(self, req):
        with self.lock:
            self.log.append(req)
            chosen = None
            for e in self.expectations:
                if e["remaining"] == 0:
                    continue
                try:
                    ok = request_matches(e["request"], req)
                except (ValueError, RuntimeError):
                    ok = False
                if ok:
                    chosen = e
                    if e["remaining"] is not None:
                        e["remaining"] -= 1
                    break
        if chosen is None:
            return 404, [], b""
        if chosen["forward"] is not None:
            fwd = chosen["forward"]
            delay = fwd.get("delay") or {}
            unit = {"MILLISECONDS": 0.001, "SECONDS": 1.0, "MINUTES": 60.0}.get(
                delay.get("timeUnit", "SECONDS"), 1.0)
            time.sleep(float(delay.get("value", 0)) * unit)
            override = fwd.get("httpRequest") or {}
            forwarded = dict(req)
            if override.get("path"):
                forwarded["path"] = override["path"]
            if override.get("method"):
                forwarded["method"] = override["method"]
            return self._serve(forwarded)
        rsp = chosen["response"] or {}
        headers = []
        for h in rsp.get("headers") or []:
            for v in h.get("values", []):
                headers.append((h["name"], v.strip()))
        body = rsp.get("body", b"")
        if isinstance(body, dict):
            body = body.get("json") or body.get("string") or ""
        if isinstance(body, str):
            body = body.encode()
        return int(rsp.get("statusCode", 200)), headers, body
