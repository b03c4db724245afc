"""The "external actions" of NotificationEndpoint.robot, performed by the harness.

ETSI's NotificationEndpoint.robot (SOL003 clause 5.4.20, test IDs 7.3.1.34.x) checks that the
VNFM delivers each kind of notification to the NFVO's endpoint. Its tests start with a keyword
such as `Trigger the creation of a VNF instance resource (external action)` whose body is
`#do nothing`: the test lab is to make the VNFM send the notification. scripts/sol003/harness.py
replaces each such body with `Harness Trigger    <kind>` (this library), which, as an NFVO
would:

1. deletes every subscription and subscribes the NFVO's endpoint anew, without a filter, at
   the moment the test's precondition names, the callback being the sink's `/endpoint` (the
   suite's `${callback_endpoint}`). Each test verifies that its endpoint received exactly one
   request of its schema, and every operation sends STARTING, PROCESSING and its result
   (SOL003 5.6.2.2), so the moment matters:
   - START ("a subscription ... is available", then an operation is triggered): an instance
     is created before the subscription (the suite's schema of the notification also accepts a
     creation notification) and its grant held by the lab's NFVO
     (scripts/sol003/grantnfvo.py, `POST /lab/hold`), so its instantiate stays STARTING and
     sends one START;
   - RESULT ("an operation is in progress, and a subscription ... is available"): the
     subscription is made once the operation is PROCESSING (the retryable package, whose stack
     takes RETRYABLE_CREATE_SECS), so only its result reaches it;
   - CREATION: subscribed, then an instance created: one creation notification;
   - DELETION ("a VNF instance resource is created, and a subscription ... is available"):
     the instance is created before the subscription (the suite's deletion schema also accepts
     a creation notification), then deleted;
2. performs the action that makes vnfm send that notification.

The sink answers the callback test of SOL003 5.4.18.3.1 (`GET callbackUri` -> 204) through an
expectation this library adds first, as the NFVO's endpoint would answer it.

`Harness Processing Occurrence` is the setup of CancelOperationWorkflow.robot's PROCESSING test
(test ID 7.3.1.19.2): an occurrence of the test's own, PROCESSING (harness.py's OWN_OCCURRENCE).
`Harness Retryable Occurrence` and `Harness Failed Temp Occurrence` are the setups of
RetryOperationWorkflow.robot's two tests (7.3.1.29.1 and .2): an occurrence FAILED_TEMP whose
retry succeeds, and one whose retry fails (harness.py's OWN_RETRY_OCCURRENCE).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import RETRYABLE_CREATE_SECS, RETRYABLE_VNFD, SLOW_VNFD, UNPLACEABLE_VNFD, Api  # noqa: E402,E501
from robot.libraries.BuiltIn import BuiltIn  # noqa: E402

DEMO_VNFD = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d"


class HarnessActions:
    ROBOT_LIBRARY_SCOPE = "GLOBAL"

    def __init__(self, vnfm_base, token, sink_base, endpoint="/endpoint", nfvo_base=None):
        self.vnfm = Api(vnfm_base.rstrip("/"), token)
        self.sink = Api(sink_base.rstrip("/"))
        self.nfvo = Api(nfvo_base.rstrip("/")) if nfvo_base else None
        self.sink_base = sink_base.rstrip("/")
        self.endpoint = endpoint

    def _must(self, method, path, body, status):
        got, headers, out = self.vnfm.call(method, path, body)
        if got != status:
            raise AssertionError(f"harness: {method} {path} answered {got}, expected {status}: "
                                 f"{out}")
        return headers, out

    def _wait(self, headers):
        loc = {k.lower(): v for k, v in headers.items()}["location"]
        op = loc.rsplit("/", 1)[-1]
        for _ in range(600):
            _, _, occ = self.vnfm.call("GET", f"/vnflcm/v2/vnf_lcm_op_occs/{op}")
            if isinstance(occ, dict) and occ.get("operationState") in (
                    "COMPLETED", "FAILED_TEMP", "FAILED", "ROLLED_BACK"):
                return occ
            time.sleep(0.1)
        raise AssertionError(f"harness: occurrence {op} did not end within 60 s")

    def _subscribe(self):
        self.sink.call("PUT", "/expectation", {
            "httpRequest": {"method": "GET", "path": self.endpoint},
            "httpResponse": {"statusCode": 204},
            "times": {"unlimited": True},
        })
        self._must("POST", "/vnflcm/v2/subscriptions",
                   {"callbackUri": self.sink_base + self.endpoint}, 201)

    def _unsubscribe_all(self):
        status, _, subs = self.vnfm.call("GET", "/vnflcm/v2/subscriptions?all_fields")
        if status != 200:
            raise AssertionError(f"harness: GET /subscriptions answered {status}: {subs}")
        for s in subs:
            self._must("DELETE", f"/vnflcm/v2/subscriptions/{s['id']}", None, 204)

    def _fresh_endpoint(self):
        """Deletes the NFVO's subscriptions (with the notifications an earlier test left
        undelivered) and resets its endpoint (the expectations and requests an earlier test left
        when it failed before its `Clear Requests`)."""
        self._unsubscribe_all()
        # A delivery of the deleted subscription may still be on its way (the suite's forward
        # to `/endpoint/check` waits 1 s): the endpoint is reset once nothing came for 2 s.
        seen = None
        for _ in range(30):
            _, _, got = self.sink.call("PUT", "/retrieve", {})
            if got is not None and seen is not None and len(got) == len(seen):
                break
            seen = got
            time.sleep(2)
        self.sink.call("PUT", "/reset", {})

    def _instantiate(self, vnfd, name, until):
        """An instance of `vnfd` and its instantiate occurrence, once it is in state `until`
        (it may pass through STARTING and PROCESSING on the way, nothing else)."""
        _, inst = self._must("POST", "/vnflcm/v2/vnf_instances",
                             {"vnfdId": vnfd, "vnfInstanceName": name}, 201)
        h, _ = self._must("POST", f"/vnflcm/v2/vnf_instances/{inst['id']}/instantiate",
                          {"flavourId": "default"}, 202)
        loc = {k.lower(): v for k, v in h.items()}["location"]
        op = loc.rsplit("/", 1)[-1]
        return self._wait_state(op, until)

    def _wait_state(self, op, until, within=30):
        for _ in range(int(within / 0.05)):
            _, _, occ = self.vnfm.call("GET", f"/vnflcm/v2/vnf_lcm_op_occs/{op}")
            state = occ.get("operationState") if isinstance(occ, dict) else None
            if state == until:
                return op
            if state not in ("STARTING", "PROCESSING"):
                raise AssertionError(f"harness: occurrence {op} is {state}, expected {until}")
            time.sleep(0.05)
        raise AssertionError(f"harness: occurrence {op} not {until} within {within} s")

    def _use(self, op):
        self._subscribe()
        BuiltIn().set_global_variable("${vnfLcmOpOccId}", op)
        return op

    def harness_processing_occurrence(self):
        """Sets `${vnfLcmOpOccId}` to an instantiate occurrence of its own, PROCESSING: the
        NFVO's endpoint is made fresh (`_fresh_endpoint`), an instance of the slow package
        (harness.py's SLOW_VNFD) is instantiated until its occurrence is PROCESSING, and the
        endpoint is subscribed anew (without a filter), as the harness subscribes it after a
        file's fixtures."""
        self._fresh_endpoint()
        op = self._instantiate(SLOW_VNFD, "processing", "PROCESSING")
        return self._use(op)

    def harness_retryable_occurrence(self):
        """Sets `${vnfLcmOpOccId}` to an instantiate occurrence of its own, FAILED_TEMP, whose
        retry succeeds: an instance of the retryable package (harness.py's RETRYABLE_VNFD,
        whose stack create takes RETRYABLE_CREATE_SECS) is instantiated and cancelled while
        PROCESSING, as an NFVO that gave up waiting does (SOL003 clause 5.4.17: FAILED_TEMP,
        the stack left as it is); a retry waits for the stack, which completes, and goes on
        (docs/serve.md, retry). The endpoint is fresh and subscribed as in
        `Harness Processing Occurrence`."""
        self._fresh_endpoint()
        op = self._instantiate(RETRYABLE_VNFD, "retryable", "PROCESSING")
        self._must("POST", f"/vnflcm/v2/vnf_lcm_op_occs/{op}/cancel",
                   {"cancelMode": "FORCEFUL"}, 202)
        self._wait_state(op, "FAILED_TEMP")
        return self._use(op)

    def harness_failed_temp_occurrence(self):
        """Sets `${vnfLcmOpOccId}` to an instantiate occurrence of its own, FAILED_TEMP, whose
        retry fails again: the unplaceable package's (harness.py's UNPLACEABLE_VNFD: no host
        has the memory its VDU1 asks for). The endpoint is fresh and subscribed as in
        `Harness Processing Occurrence`."""
        self._fresh_endpoint()
        op = self._instantiate(UNPLACEABLE_VNFD, "failed-temp", "FAILED_TEMP")
        return self._use(op)

    def harness_trigger(self, kind):
        """Subscribes the NFVO's endpoint, without a filter, at the moment the test's
        precondition names, and makes vnfm send the one notification of `kind` (START, RESULT,
        CREATION, DELETION): see the module's docs."""
        status, _, subs = self.vnfm.call("GET", "/vnflcm/v2/subscriptions?all_fields")
        if status != 200:
            raise AssertionError(f"harness: GET /subscriptions answered {status}: {subs}")
        for s in subs:
            self._must("DELETE", f"/vnflcm/v2/subscriptions/{s['id']}", None, 204)
        self.sink.call("PUT", "/expectation", {
            "httpRequest": {"method": "GET", "path": self.endpoint},
            "httpResponse": {"statusCode": 204},
            "times": {"unlimited": True},
        })
        create = {"vnfdId": DEMO_VNFD, "vnfInstanceName": f"trigger-{kind}"}
        subscribe = {"callbackUri": self.sink_base + self.endpoint}
        if kind == "RESULT":
            op = self._instantiate(RETRYABLE_VNFD, "trigger-RESULT", "PROCESSING")
            self._must("POST", "/vnflcm/v2/subscriptions", subscribe, 201)
            self._wait_state(op, "COMPLETED", within=RETRYABLE_CREATE_SECS + 30)
            return
        if kind == "CREATION":
            self._must("POST", "/vnflcm/v2/subscriptions", subscribe, 201)
            self._must("POST", "/vnflcm/v2/vnf_instances", create, 201)
            return
        # START and DELETION act on an instance that exists before the subscription (the
        # suite's schemas of those notifications also accept a creation notification).
        _, inst = self._must("POST", "/vnflcm/v2/vnf_instances", create, 201)
        if kind == "START":
            if self.nfvo is None:
                raise AssertionError("harness: the START trigger needs the lab NFVO (nfvo_base)")
            status, _, out = self.nfvo.call("POST", "/lab/hold", {"vnfInstanceId": inst["id"]})
            if status != 204:
                raise AssertionError(f"harness: the lab NFVO's hold answered {status}: {out}")
        self._must("POST", "/vnflcm/v2/subscriptions", subscribe, 201)
        if kind == "START":
            self._must("POST", f"/vnflcm/v2/vnf_instances/{inst['id']}/instantiate",
                       {"flavourId": "default"}, 202)
        else:
            self._must("DELETE", f"/vnflcm/v2/vnf_instances/{inst['id']}", None, 204)
