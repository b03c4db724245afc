#!/usr/bin/env python3
"""The SOL003 VNF LCM conformance harness (run by scripts/sol003-conformance.sh, which installs
Robot Framework and the suite's libraries and builds vnfm first).

Copies ETSI's NFV-TST010 SOL003 VNF LCM test descriptions (../shared/etsi-nfv-api-tests, never
copied into the project) to a temporary folder, configures them for `vnfm serve` (host, port,
`apiRoot` empty, `apiVersion` v2, a bearer token), replaces their request bodies with the
project's v3.3.1 bodies (tests/sol003/jsons/), applies the patches of PATCHES below (each with
the clause that proves the suite wrong), starts `vnfm serve` on the simulated cloud with the
demo package and the lab's NFVO as its granter (scripts/sol003/grantnfvo.py), creates the instances and occurrences each file's variables name through the API,
runs each file with Robot Framework and compares every test's outcome with
tests/sol003/expected.tsv. Exit status 1 on any difference (a test that passes where a failure
is expected too: the list must be kept true), 2 on a harness error.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grantnfvo import GrantNfvo  # noqa: E402
from mocksink import MockSink  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOKEN = "sol003-conformance-token"
# Small, so that the paging test of VNFInstances.robot has a next page with the fixtures of the
# files before it (a vnfm that does not know `page_size` refuses to start: use --no-page-size).
PAGE_SIZE = 2
DEMO_VNFD = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d"
# The demo package with VDU1 asking for 4 TiB of memory, which no host of the demo cloud has:
# its instantiate starts and ends in FAILED_TEMP (the grant finds no placement).
UNPLACEABLE_VNFD = "0e5a1f3c-7b2d-4c8e-9f10-5a6b7c8d9e0f"
# examples/packages/flavours-vnf: two deployment flavours (`small`, `large`), the package of
# the instance whose flavour the ChangeVNFFlavour files change (to `large`).
FLAVOURS_VNFD = "5c0e7a3d-2f14-4b8e-a6d9-8e1b3c7f0a42"
# The demo package with an OS::Heat::TestResource in its BaseHOT whose create waits
# SLOW_CREATE_SECS (Heat's `action_wait_secs`, which the simulated cloud runs on vnfm's clock):
# its instantiate stays PROCESSING that long, so that a cancel finds it running.
SLOW_VNFD = "3b9d6e2f-8a41-4c57-b0e3-6f2a9d1c4e87"
SLOW_CREATE_SECS = 120
# The same with a create of RETRYABLE_CREATE_SECS: an instantiate cancelled while PROCESSING
# is FAILED_TEMP with its stack still being created, and a retry waits for that stack and
# completes (the occurrence of RetryOperationWorkflow's successful test).
RETRYABLE_VNFD = "9f4c2b7e-1d36-4a58-8e0b-2c7d5f3a9e61"
RETRYABLE_CREATE_SECS = 6
# The suite's `${callback_endpoint}` (environment/variables.txt): where its notification checks
# expect the NFVO's endpoint.
ENDPOINT = "/endpoint"

# The files run, in order, with the instance each file's `${vnfInstanceId}` must be and the
# occurrence its `${vnfLcmOpOccId}` must be. Files for resources vnfm does not serve yet are run
# too: their tests are in the expectations as failures with the reason.
FILES = [
    # file, vnfInstanceId kind, vnfLcmOpOccId kind
    ("ApiVersion.robot", None, None),
    ("VNFInstances.robot", None, None),
    ("IndividualVNFInstance.robot", "instantiated", "failed_temp"),
    ("InstantiateVNFTask.robot", "not_instantiated", None),
    ("ScaleVNFTask.robot", "instantiated", None),
    ("ScaleVNFToLevelTask.robot", "instantiated", None),
    ("ChangeVNFFlavourTask.robot", "instantiated_small", None),
    ("TerminateVNFTask.robot", "instantiated", None),
    ("HealVNFTask.robot", "instantiated", None),
    ("OperateVNFTask.robot", "instantiated", None),
    ("ChangeExternalVNFConnectivityTask.robot", "instantiated", None),
    ("VnfLcmOperationOccurences.robot", "instantiated", None),
    ("IndividualVnfLcmOperationOccurence.robot", "instantiated", "completed"),
    ("RetryOperationTask.robot", "instantiated", "failed_temp"),
    ("RollbackOperationTask.robot", "instantiated", "failed_temp"),
    ("FailOperationTask.robot", "instantiated", "failed_temp"),
    ("CancelOperationTask.robot", "instantiated", "processing"),
    ("Subscriptions.robot", None, None),
    ("IndividualSubscription.robot", None, None),
    ("NotificationEndpoint.robot", None, None),
    ("CreateVNFWorkflow.robot", None, None),
    ("DeleteVNFWorkflow.robot", "not_instantiated", None),
    ("InstantiateVNFTaskWorkflow.robot", "not_instantiated", None),
    ("ModifyVNFInformationWorkflow.robot", "instantiated", None),
    ("ScaleVNFWorkflow.robot", "instantiated", None),
    ("HealVNFWorkflow.robot", "instantiated", None),
    ("TerminateVNFWorkflow.robot", "instantiated", None),
    ("FailOperationWorkflow.robot", "instantiated", "failed_temp"),
    # Each test's occurrence comes from its own setup (OWN_RETRY_OCCURRENCE).
    ("RetryOperationWorkflow.robot", "instantiated", None),
    ("RollBackOperationWorkflow.robot", "instantiated", "failed_temp"),
    ("CancelOperationWorkflow.robot", "instantiated", "starting"),
    ("ScaleVNFToLevelWorkflow.robot", "instantiated", None),
    ("ChangeVNFFlavourWorkflow.robot", "instantiated_small", None),
    ("OperateVNFWorkflow.robot", "instantiated", None),
    ("ChangeExternalVNFConnectivityWorkflow.robot", "instantiated", None),
]

# Text replacements in the temporary copy: (file, old, new, why), `old` a regular expression
# when it starts with "re:". Each must match in the file (else the suite changed and the harness
# stops). Only what the suite gets wrong, or what differs between SOL003 v2.6.1 (the suite) and
# v3.3.1 (vnfm), each with the clause that proves it.
RESPONSE_HEADER = "[v for k, v in $response['headers'].items() if k.lower() == '{}']"
PATCHES = [
    (
        "ApiVersion.robot",
        "${apiRoot}/${apiName}/v1/api_versions",
        "${apiRoot}/${apiName}/v2/api_versions",
        "SOL003 v3.3.1 clause 4.1 / SOL013 v3.3.1 clause 9.3: the VNF LCM API's major version is "
        "v2 (v1 is SOL003 v2.6.1's)",
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        "Check HTTP Response Header Contains\n    [Arguments]    ${CONTENT_TYPE}\n"
        "    Should Contain    ${response['headers']}    ${CONTENT_TYPE}",
        "Check HTTP Response Header Contains\n    [Arguments]    ${CONTENT_TYPE}\n"
        "    ${names}=    Evaluate    [k.lower() for k in $response['headers']]\n"
        "    Should Contain    ${names}    ${CONTENT_TYPE.lower()}",
        "RFC 9110 clause 5.1 (SOL013 clause 4.2): header field names are case-insensitive; "
        "the suite looks `Location` up case-sensitively",
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        "Get Value From Json    ${response['headers']}    $..Location",
        "Evaluate    " + RESPONSE_HEADER.format("location"),
        "RFC 9110 clause 5.1: header field names are case-insensitive (the suite's JSONPath "
        "`$..Location` is not)",
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        "Get Value From Json    ${response['headers']}    $..Link",
        "Evaluate    " + RESPONSE_HEADER.format("link"),
        "RFC 9110 clause 5.1: header field names are case-insensitive (the suite's JSONPath "
        "`$..Link` is not)",
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        "re:(?m)^(\\s+)(\\$\\{response\\}=\\s+(?:Post|Get|Put|Patch|Delete)\\s[^\\n]*)$",
        "\\1\\2\\n\\1Set Global Variable    ${response}    ${response}",
        "the suite's own mistake (Robot Framework User Guide 2.5.2: a variable assigned in a "
        "keyword is local to it): the workflow files' request keywords assign `${response}` "
        "locally and their tests read the global `{}` of variables.txt",
    ),
    (
        "schemas/VnfLcmOpOccs.schema.json",
        '"isAutomaticInvocation", "operationParams", "isCancelPending"]',
        '"isAutomaticInvocation", "isCancelPending"]',
        "SOL003 clause 5.4.12.3.2: `operationParams` is one of the attributes a list leaves out "
        "unless asked for (exclude_default, the default); the suite's list schema requires it",
    ),
    (
        "VnfLcmOperationOccurences.robot",
        "Check HTTP Response Status Code Is    202",
        "Check HTTP Response Status Code Is    200",
        "SOL003 clause 5.4.12.3.2: GET of the occurrences answers 200 OK (202 is no answer of "
        "a GET)",
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        "String    response body instantiationState    FAILED_TEMP",
        "String    response body operationState    FAILED_TEMP",
        "SOL003 clause 5.5.2.13: a VnfLcmOpOcc's state is `operationState` (`instantiationState` "
        "is a VnfInstance's)",
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        "String    response body instantiationState    FINALLY_FAILED",
        "String    response body operationState    FAILED",
        "SOL003 clause 5.5.2.13 and 5.5.4.3: `operationState`, and LcmOperationStateType has "
        "FAILED (no FINALLY_FAILED) for an occurrence that was failed",
    ),
    (
        "TerminateVNFTask.robot",
        "    POST Terminate VNF in NOT-INSTANTIATED state\n    Check HTTP Response Status Code Is"
        "    202",
        "    POST Terminate VNF in NOT-INSTANTIATED state\n    Check HTTP Response Status Code Is"
        "    409",
        "SOL003 clause 5.4.8.3.1: terminating a NOT_INSTANTIATED instance is 409 Conflict (the "
        "test's own title says Conflict; it expects 202)",
    ),
    (
        "IndividualVNFInstance.robot",
        "    PATCH individual vnfInstance\n    Check HTTP Response Status Code Is    412",
        "    PATCH individual vnfInstance with a stale If-Match\n"
        "    Check HTTP Response Status Code Is    412",
        "SOL003 clause 5.4.3.3.4 / RFC 9110 clause 13.1.1: 412 answers an If-Match that does not "
        "match the current ETag; the test sends no If-Match (its pre-condition `ETag mismatch` "
        "is never set up), so the harness sends a stale one",
    ),
    (
        "IndividualVNFInstance.robot",
        "    PATCH individual vnfInstance\n    Check HTTP Response Status Code Is    409",
        "    PATCH individual vnfInstance in conflict\n    Check HTTP Response Status Code Is"
        "    409",
        "SOL003 clause 5.4.3.3.4: 409 answers a PATCH of an instance whose LCM operation is not "
        "over; the test PATCHes the same idle instance as the success test, so the harness "
        "PATCHes `${conflicVnfInstanceId}`, whose instantiate is FAILED_TEMP",
    ),
    (
        "IndividualVNFInstance.robot",
        "*** Keywords ***\n",
        "*** Keywords ***\n"
        "PATCH individual vnfInstance with a stale If-Match\n"
        "    Set Headers    {\"Content-Type\": \"${CONTENT_TYPE_PATCH}\"}\n"
        "    Run Keyword If    ${AUTH_USAGE} == 1    Set Headers    "
        "{\"Authorization\":\"${AUTHORIZATION}\"}\n"
        "    ${body}=    Get File    jsons/patchBodyRequest.json\n"
        "    Patch    ${apiRoot}/${apiName}/${apiVersion}/vnf_instances/${vnfInstanceId}    "
        "${body}    headers={\"If-Match\": \"\\\\\"stale\\\\\"\"}\n"
        "    ${outputResponse}=    Output    response\n"
        "    Set Global Variable    ${response}    ${outputResponse}\n\n"
        "PATCH individual vnfInstance in conflict\n"
        "    Set Headers    {\"Content-Type\": \"${CONTENT_TYPE_PATCH}\"}\n"
        "    Run Keyword If    ${AUTH_USAGE} == 1    Set Headers    "
        "{\"Authorization\":\"${AUTHORIZATION}\"}\n"
        "    ${body}=    Get File    jsons/patchBodyRequest.json\n"
        "    Patch    ${apiRoot}/${apiName}/${apiVersion}/vnf_instances/${conflicVnfInstanceId}"
        "    ${body}\n"
        "    ${outputResponse}=    Output    response\n"
        "    Set Global Variable    ${response}    ${outputResponse}\n\n",
        "the two keywords of the two patches above",
    ),
]

NO_JAR = (
    "the MockServer 5.5.0 jar the suite starts with `java -jar` is a Maven Central artifact, "
    "which this project's machines do not reach; the harness runs its MockServer-compatible "
    "sink (scripts/sol003/mocksink.py) on `${callback_port}` for the whole run instead"
)
for _f in ("SubscriptionKeywords.robot", "NotificationEndpoint.robot"):
    PATCHES.append((
        _f,
        "re:(?m)^( +)Start Process +java +-jar +\\$\\{MOCK_SERVER_JAR\\}[^\\n]*\\n"
        " +Wait For Process +handle=mockInstance[^\\n]*\\n",
        "\\1Log    the harness's MockServer-compatible sink listens on ${callback_port}\\n",
        NO_JAR,
    ))
PATCHES += [
    (
        "NotificationEndpoint.robot",
        'Create Mock Response\theaders="Content-Type: application/json"  status_code=204',
        "Create Mock Response\tstatus_code=204    headers=${{ {'Content-Type': "
        "'application/json'} }}",
        "the suite's own mistake: robotframework-mockserver's `Create Mock Response` takes the "
        "headers as a dictionary (its keyword documentation); the string the suite passes makes "
        "the keyword fail (`'str' object has no attribute 'items'`) before any check",
    ),
    (
        "NotificationEndpoint.robot",
        "Library    MockServerLibrary\n",
        "Library    MockServerLibrary\n"
        "Library    ${HARNESS_LIBRARY}    ${VNFM_BASE}    ${HARNESS_TOKEN}    ${SINK_BASE}"
        "    nfvo_base=${NFVO_BASE}\n",
        "the library of the external actions below (scripts/sol003/HarnessActions.py)",
    ),
]
for _kw, _kind in (
    ("Trigger a VNF LCM operation (external action)", "START"),
    ("Trigger the completion of an VNF LCM operation (external action)", "RESULT"),
    ("Trigger the creation of a VNF instance resource (external action)", "CREATION"),
    ("Trigger the deletion of a VNF instance resource (external action)", "DELETION"),
):
    PATCHES.append((
        "NotificationEndpoint.robot",
        "re:(?m)^(" + re.escape(_kw) + ") *\\n +#do nothing\\n +Log +do nothing *$",
        "\\1\\n    Harness Trigger    " + _kind,
        "SOL003 clause 5.4.20 (test IDs 7.3.1.34.x): the suite leaves the action that makes the "
        "VNFM send the notification to the test lab (`#do nothing`); the harness performs it "
        "(scripts/sol003/HarnessActions.py: the NFVO subscribes without a filter, at the moment "
        "the test's precondition names, then the operation)",
    ))
PATCHES += [
    (
        "InstantiateVNFTaskWorkflow.robot",
        "re:(?m)^(\\s+)(\\$\\{response\\}=\\s+(?:Post|Get|Put|Patch|Delete)\\s[^\\n]*)$",
        "\\1\\2\\n\\1Set Global Variable    ${response}    ${response}",
        "the suite's own mistake (Robot Framework User Guide 2.5.2: a variable assigned in a "
        "keyword is local to it), as in VnfLcmMntOperationKeywords.robot: this file's own "
        "request keyword assigns `${response}` locally and its test reads the global one",
    ),
    (
        "NotificationEndpoint.robot",
        "re:(?m)^( +)(Create Mock Expectation  \\$\\{notification_request\\}  "
        "\\$\\{notification_response\\})$",
        "\\1\\2\\n\\1Set Global Variable    ${notification_request}",
        "the suite's own mistake (Robot Framework User Guide 2.5.2): the handler keywords assign "
        "`&{notification_request}` locally and the tests verify the global one of "
        "variables.txt (`[]`), which is no request matcher",
    ),
    (
        "CreateVNFWorkflow.robot",
        "    Check HTTP Response Header Contains    Location \n",
        "    Check HTTP Response Header Contains    Location \n"
        "    Set Global Variable    ${vnfInstanceId}    ${response['body']['id']}\n",
        "SOL003 clause 5.4.2.3.1: the id of the created instance is the 201's body's `id`; the "
        "test's notification check and postcondition read `${vnfInstanceId}`, which no step of "
        "the suite sets to it",
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        "re:(Post Create subscription - NO-DUPLICATION[^\\n]*\\n(?:(?! +Post )[^\\n]*\\n)*"
        " +Post +[^\\n]*/subscriptions +\\$\\{body\\})",
        "\\1    allow_redirects=false",
        "SOL003 clause 5.4.18.3.1 and RFC 9110 clause 15.4.4: the VNFM that refuses a duplicate "
        "answers 303 See Other; the test checks for the 303 but lets RESTinstance follow it (its "
        "default) and so sees the 200 of the existing subscription",
    ),
    (
        "IndividualSubscription.robot",
        "    Delete Individual subscription\n\tCheck HTTP Response Status Code Is    405",
        "    Delete Individual subscription\n\tCheck HTTP Response Status Code Is    204",
        "SOL003 clause 5.4.19.3.5: DELETE of an individual subscription terminates it and answers "
        "204 No Content (the test's own title says DELETE an individual subscription; 405 is "
        "for PUT and PATCH, clauses 5.4.19.3.3-4)",
    ),
]
PATCHES += [
    (
        "SubscriptionKeywords.robot",
        "Create Mock Response\t    status_code=${status}",
        "Create Mock Response\t    status_code=204",
        "SOL003 clause 5.4.20.3.1: the NFVO's endpoint answers a notification 204 No Content; "
        "`Configure Notification Status Handler` passes the operation state it waits for "
        "(`STARTING`, ...) as the HTTP status of the answer, which is no status code",
    ),
    (
        "SubscriptionKeywords.robot",
        "re:body_type='JSON'( +)body=\\$\\{json\\}",
        "body_type=JSON\\1body=${json}    exact=${False}",
        "the suite's own mistake: it passes `body_type='JSON'` (Robot Framework keeps the quotes) "
        "so robotframework-mockserver matches no body at all and the check counts every "
        "notification of the operation, whatever its state; and the body it matches is one "
        "field of the notification (`operationState` or `vnfInstanceId`, SOL003 clause "
        "5.5.2.17), which MockServer matches with ONLY_MATCHING_FIELDS (`exact=False`), not "
        "STRICT (the whole body)",
    ),
]
NOT_FOUND = (
    "SOL013 clause 6.4 (SOL003 clause 5.4.1.2): a request to a resource that does not exist is "
    "answered 404 Not Found (the test's own title says Not Found); SOL003 clause {}'s 409 is "
    "for an instance in the wrong state"
)
CANCEL_BODY = (
    "SOL003 clause 5.4.17.3.1 and 5.5.2.14: the body of a cancel is a CancelMode object "
    "(`{\"cancelMode\": \"GRACEFUL\"}`); the suite sends the bare word `GRACEFUL`, which is no "
    "JSON document and which vnfm answers 400"
)
NO_SETUP = (
    "the suite's own mistake: the file defines `Initialize System` (which opens the session to "
    "the NFVO's endpoint, `Create Mock Session`) but has no `Suite Setup`, unlike every other "
    "workflow file, so its notification checks find no session"
)
PATCHES += [
    (
        "ScaleVNFToLevelTask.robot",
        "    POST Scale vnfInstance to level with not existing VNF  \n"
        "    Check HTTP Response Status Code Is    409",
        "    POST Scale vnfInstance to level with not existing VNF  \n"
        "    Check HTTP Response Status Code Is    404",
        NOT_FOUND.format("5.4.6.3.1"),
    ),
    (
        "OperateVNFTask.robot",
        "    POST Operate VNF not existing\n    Check HTTP Response Status Code Is    409",
        "    POST Operate VNF not existing\n    Check HTTP Response Status Code Is    404",
        NOT_FOUND.format("5.4.10.3.1"),
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        "re:(/cancel +)\\$\\{CancelMode\\}",
        "\\1{\"cancelMode\": \"${CancelMode}\"}",
        CANCEL_BODY,
    ),
    (
        "TerminateVNFWorkflow.robot",
        "Library    Process\n\n\n*** Test Cases ***",
        "Library    Process\nSuite Setup    Initialize System\n\n\n*** Test Cases ***",
        NO_SETUP,
    ),
    (
        "RetryOperationWorkflow.robot",
        "re:(Library +Process *\\n)(\\s*\\n)*(\\*\\*\\* Test Cases \\*\\*\\*)",
        "\\1Suite Setup    Initialize System\\n\\n\\3",
        NO_SETUP,
    ),
    (
        "InstantiateVNFTaskWorkflow.robot",
        "Check HTTP Response Body Json Schema Is    vnfInstance.schema.json",
        "Check HTTP Response Body Json Schema Is    vnfInstance",
        "the suite's own mistake: `Check HTTP Response Body Json Schema Is` appends "
        "`.schema.json` to its argument; the test passes the whole file name",
    ),
    (
        "ModifyVNFInformationWorkflow.robot",
        "Check Operation Notification For Modify Info    start   ",
        "Check Operation Notification For Modify Info    STARTING   ",
        "SOL003 clause 5.5.2.17 and 5.5.4.3: the start notification of an operation carries "
        "`operationState` STARTING (`start` is no LcmOperationStateType; the suite's comment "
        "says it needs more information about the notification's content)",
    ),
    (
        "ModifyVNFInformationWorkflow.robot",
        "Check Operation Notification For Modify Info    result  ",
        "Check Operation Notification For Modify Info    COMPLETED  ",
        "SOL003 clause 5.5.2.17 and 5.5.4.3: the result notification of an operation that "
        "succeeded carries `operationState` COMPLETED (`result` is no LcmOperationStateType)",
    ),
    (
        "ChangeVNFFlavourWorkflow.robot",
        "re:(?m)^(    \\$\\{requestedFlavour\\}=    Get Value From Json    "
        "\\$\\{changeVnfFlavourRequest\\}    \\$\\.\\.newFlavourId *)$",
        "\\1\\n    Set Global Variable    ${requestedFlavour}",
        "the suite's own mistake (Robot Framework User Guide 2.5.2): `Initialize System` assigns "
        "`${requestedFlavour}` locally and the postcondition reads the global one of "
        "variables.txt",
    ),
    (
        "OperateVNFWorkflow.robot",
        "    ${requestedState}=    Get Value From Json    ${changeVnfOperateRequest}    "
        "$..changeStateTo \n",
        "    ${requestedState}=    Get Value From Json    ${changeVnfOperateRequest}    "
        "$..changeStateTo \n    Set Global Variable    ${requestedState}\n",
        "the suite's own mistake (Robot Framework User Guide 2.5.2): `Initialize System` assigns "
        "`${requestedState}` locally and the postcondition reads the global one of "
        "variables.txt",
    ),
]

OWN_OCCURRENCE = (
    "SOL003 clause 5.4.17.3.1 (test ID 7.3.1.19.2's pre-condition: an occurrence PROCESSING): "
    "the file's two tests share `${vnfLcmOpOccId}` with opposite pre-conditions (STARTING, then "
    "PROCESSING) and the first one's cancel ends it; the harness gives the second test an "
    "occurrence of its own, made PROCESSING by its setup (scripts/sol003/HarnessActions.py: an "
    "instantiate of the slow package, the NFVO subscribed anew after it)"
)
PATCHES += [
    (
        "CancelOperationWorkflow.robot",
        "Library    Process\n",
        "Library    Process\n"
        "Library    ${HARNESS_LIBRARY}    ${VNFM_BASE}    ${HARNESS_TOKEN}    ${SINK_BASE}\n",
        "the library of the setup below (scripts/sol003/HarnessActions.py)",
    ),
    (
        "CancelOperationWorkflow.robot",
        "    Send Cancel Operation Request\n    Check HTTP Response Status Code Is    202\n"
        "    Check Operation Notification For Cancel    FAILED_TEMP\n",
        "    [Setup]    Harness Processing Occurrence\n"
        "    Send Cancel Operation Request\n    Check HTTP Response Status Code Is    202\n"
        "    Check Operation Notification For Cancel    FAILED_TEMP\n",
        OWN_OCCURRENCE,
    ),
]

OWN_RETRY_OCCURRENCE = (
    "SOL003 clause 5.4.14.3.1 (test IDs 7.3.1.29.1 and .2: an occurrence FAILED_TEMP whose "
    "retry succeeds, then one whose retry fails): the file's two tests share `${vnfLcmOpOccId}` "
    "with opposite pre-conditions, and the first one's retry ends it; the harness gives each "
    "test an occurrence of its own from a setup (scripts/sol003/HarnessActions.py: an "
    "instantiate of the retryable package cancelled while PROCESSING, whose stack then "
    "completes; an instantiate of the unplaceable package), the NFVO subscribed anew after it"
)
PATCHES += [
    (
        "RetryOperationWorkflow.robot",
        "Library    Process\n",
        "Library    Process\n"
        "Library    ${HARNESS_LIBRARY}    ${VNFM_BASE}    ${HARNESS_TOKEN}    ${SINK_BASE}\n",
        "the library of the setups below (scripts/sol003/HarnessActions.py)",
    ),
    (
        "RetryOperationWorkflow.robot",
        "re:(Post-Conditions: The VNF lifecycle management operation occurrence is in COMPLETED "
        "state *\n)(    Send Retry Operation Request)",
        "\\1    [Setup]    Harness Retryable Occurrence\n\\2",
        OWN_RETRY_OCCURRENCE,
    ),
    (
        "RetryOperationWorkflow.robot",
        "re:(Post-Conditions: The VNF lifecycle management operation occurrence is in FAILED_TEMP "
        "state *\n)(    Send Retry Operation Request)",
        "\\1    [Setup]    Harness Failed Temp Occurrence\n\\2",
        OWN_RETRY_OCCURRENCE,
    ),
]

PATCHES += [
    (
        "ChangeExternalVNFConnectivityWorkflow.robot",
        "re:(?m)^(    \\$\\{changeVnfExtConnectivityRequest\\}=    evaluate    "
        "json\\.loads\\('''\\$\\{body\\}'''\\)    json *)$",
        "\\1\\n    Set Global Variable    ${changeVnfExtConnectivityRequest}",
        "the suite's own mistake (Robot Framework User Guide 2.5.2): `Initialize System` assigns "
        "`${changeVnfExtConnectivityRequest}` locally and the postcondition reads the global "
        "one of variables.txt (`{}`)",
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        "[Return]    ${vnfInstance.instantiatedVnfInfo.extVirtualLinkInfo.id}",
        "[Return]    ${vnfInstance['instantiatedVnfInfo']['extVirtualLinkInfo'][0]['id']}",
        "SOL003 clause 5.5.2.2 (InstantiatedVnfInfo.extVirtualLinkInfo, 0..N) and 5.5.3.2: "
        "`extVirtualLinkInfo` is an array of ExtVirtualLinkInfo, each with its `id`; the suite "
        "reads `.id` of the array, with the extended attribute syntax on the dictionary "
        "`Get Vnf Instance` returns, which has no attributes. The test's request (one link) "
        "leaves the instance, instantiated without links, with that one link first",
    ),
]


# The scale workflows (test IDs 7.3.1.32.1 and 7.3.1.31.1) send their request and check its
# notifications, then compare the aspect's scale level before and after. Every step of that
# comparison is written in a way Robot Framework does not run; each is patched to do what its
# words say, nothing more.
SCALE_ASPECT = (
    "the suite's own mistakes (Robot Framework User Guide 2.6.6 and 2.5.2): `${json.aspectId}` "
    "is the extended variable syntax, which reads an attribute, and the `json.loads` the keyword "
    "makes is a dict (`${json['aspectId']}`), so the keyword fails before it sends the request; "
    "and `${aspectId}` is assigned locally while the postcondition reads the global one of "
    "scaleVariables.txt"
)
SCALE_TO_LEVEL_ASPECT = (
    "SOL003 clause 5.5.2.6: a ScaleVnfToLevelRequest has no `aspectId` (the suite's own request "
    "is an `instantiationLevelId`, as the project's is); the suite reads `${json.aspectId}` "
    "(the extended variable syntax on a dict, Robot Framework User Guide 2.6.6), which fails "
    "before the request is sent. The postcondition compares every aspect of the level instead"
)
# The instantiation level the project's ScaleVnfToLevelRequest names
# (tests/sol003/jsons/scaleVnfToLevelRequest.json) and the scale level of each aspect there: the
# demo package's `large` (examples/packages/demo-vnf/Definitions/demo_df_default.yaml,
# tosca.policies.nfv.InstantiationLevels). It changes both aspects of the instance the file
# scales (instantiated at the default level, `small`: both at 0).
SCALE_TO_LEVEL = ("large", {"VDU1_scale": 2, "VDU2_scale": 1})
LEVEL_SCALE_INFO = (
    "the suite's own mistakes: it cannot tell the levels an `instantiationLevelId` names (its "
    "comment: 'How to use this info to get the instantiation scale level?'): they are the "
    "VNFD's (SOL001 tosca.policies.nfv.InstantiationLevels, SOL003 clause 5.5.2.6), which the "
    "harness gives; and `${scaleInfo}` is assigned locally while the postcondition reads the "
    "global one of scaleVariables.txt (Robot Framework User Guide 2.5.2)"
)
LEVEL_COMPARE = (
    "the suite's own mistakes (Robot Framework User Guide 2.5.3, 2.6.6): `FOR ... IN "
    "${old_scaleinfo}` iterates once over the whole list, `${element.aspectId}` reads an "
    "attribute of a dict, and `${aspectId}` is an aspect a ScaleVnfToLevelRequest does not "
    "have; the patch checks that every aspect of the level (SOL003 clause 5.5.2.6) is at its "
    "level in the instance's `scaleStatus` (SOL003 clause 5.5.3.3)"
)
SCALE_INFO_GLOBAL = (
    "the suite's own mistake (Robot Framework User Guide 2.5.2): `Initialize System` assigns "
    "`${scaleInfo}` locally and the postcondition reads the global one of scaleVariables.txt "
    "(empty)"
)
SCALE_COMPARE = (
    "the suite's own mistakes (Robot Framework User Guide 2.5.3, 2.6.6): `FOR ... IN "
    "${old_scaleinfo}` iterates once over the whole list, `${element.aspectId}` reads an "
    "attribute of a dict, and `Set Variable If    ${element.aspectId}==${aspectId}` evaluates "
    "two unquoted strings as Python names; the patch takes the `scaleLevel` of the ScaleInfo "
    "(SOL003 clause 5.5.3.3) whose `aspectId` is the request's, in the list `Get Value From "
    "Json` returns (its one match: the `scaleStatus` array, or the request's `scaleInfo`)"
)
SCALE_LOOPS = (
    "    FOR    ${element}    IN    ${old_scaleinfo}\n"
    "        ${old_level}=    Set Variable If    ${element.aspectId}==${aspectId}   "
    "${element.scaleLevel}\n"
    "        ${old_level_value}=    Convert To Integer    ${old_level}\n"
    "    END\n"
    "    FOR    ${element}    IN    ${new_scaleinfo}\n"
    "        ${new_level}=    Set Variable If    ${element.aspectId}==${aspectId}   "
    "${element.scaleLevel}\n"
    "        ${new_level_value}=    Convert To Integer    ${new_level}\n"
    "    END\n"
)
SCALE_LEVELS = (
    "    ${old_level_value}=    Evaluate    [int(e['scaleLevel']) for e in $old_scaleinfo[0] "
    "if e['aspectId'] == '${aspectId}'][0]\n"
    "    ${new_level_value}=    Evaluate    [int(e['scaleLevel']) for e in $new_scaleinfo[0] "
    "if e['aspectId'] == '${aspectId}'][0]\n"
)
SCALE_REQUEST = (
    "re:(jsons/{file}\\n    \\$\\{{json\\}}=    evaluate    json\\.loads\\('''\\$\\{{body\\}}'''\\)"
    "    json\\n)    \\$\\{{aspectId\\}}=    Set Variable    \\$\\{{json\\.aspectId\\}} *\\n"
)
PATCHES += [
    (
        "VnfLcmMntOperationKeywords.robot",
        SCALE_REQUEST.format(file="scaleVnfOutRequest\\.json"),
        "\\1    ${aspectId}=    Set Variable    ${json['aspectId']}\\n"
        "    Set Global Variable    ${aspectId}\\n",
        SCALE_ASPECT,
    ),
    (
        "VnfLcmMntOperationKeywords.robot",
        SCALE_REQUEST.format(file="scaleVnfToLevelRequest\\.json"),
        "\\1",
        SCALE_TO_LEVEL_ASPECT,
    ),
    (
        "ScaleVNFWorkflow.robot",
        "re:(Library +Process *\\n)(\\s*\\n)*(\\*\\*\\* Test Cases \\*\\*\\*)",
        "\\1Suite Setup    Initialize System\\n\\n\\3",
        NO_SETUP,
    ),
    (
        "ScaleVNFToLevelWorkflow.robot",
        "re:(Library +Process *\\n)(\\s*\\n)*(\\*\\*\\* Test Cases \\*\\*\\*)",
        "\\1Suite Setup    Initialize System\\n\\n\\3",
        NO_SETUP,
    ),
    (
        "ScaleVNFWorkflow.robot",
        "    ${scaleInfo}=    Get Vnf Scale Info    ${vnfInstanceId}\n    \n",
        "    ${scaleInfo}=    Get Vnf Scale Info    ${vnfInstanceId}\n"
        "    Set Global Variable    ${scaleInfo}\n    \n",
        SCALE_INFO_GLOBAL,
    ),
    (
        "ScaleVNFToLevelWorkflow.robot",
        "re:(?m)^    \\$\\{scaleInfo\\}=    Get Value From Json    "
        "\\$\\{scaleVnfToLevelRequest\\}    \\$\\.\\.scaleInfo *$",
        "    ${scaleInfo}=    Evaluate    " + repr([[
            {"aspectId": a, "scaleLevel": n} for a, n in SCALE_TO_LEVEL[1].items()
        ]]) + "\n    Set Global Variable    ${scaleInfo}",
        LEVEL_SCALE_INFO,
    ),
    ("ScaleVNFWorkflow.robot", SCALE_LOOPS, SCALE_LEVELS, SCALE_COMPARE),
    (
        "ScaleVNFToLevelWorkflow.robot",
        SCALE_LOOPS + "    Should be true    ${old_level_value}==${new_level_value}\n",
        "    ${levels}=    Evaluate    $old_scaleinfo[0]\n"
        "    FOR    ${element}    IN    @{levels}\n"
        "        ${aspect}=    Set Variable    ${element['aspectId']}\n"
        "        ${new_level}=    Evaluate    [int(e['scaleLevel']) for e in $new_scaleinfo[0] "
        "if e['aspectId'] == '${aspect}']\n"
        "        ${want}=    Evaluate    [int($element['scaleLevel'])]\n"
        "        Should Be Equal    ${new_level}    ${want}\n"
        "    END\n",
        LEVEL_COMPARE,
    ),
    (
        "ScaleVNFWorkflow.robot",
        "    Run Keyword If    ${type}==SCALE_OUT    Should Be True",
        "    Run Keyword If    '${type}'=='SCALE_OUT'    Should Be True",
        "the suite's own mistake (Robot Framework User Guide 2.6.6, evaluating expressions): "
        "`${type}==SCALE_OUT` evaluates `SCALE_OUT==SCALE_OUT`, two unquoted Python names",
    ),
]
# Files the suite names in one case and has in another: (wanted, present, why).
FILE_ALIASES = [
    (
        "schemas/Subscriptions.schema.json", "schemas/subscriptions.schema.json",
        "the suite's own mistake: the list tests of Subscriptions.robot read "
        "`Subscriptions.schema.json`; the suite's file is `subscriptions.schema.json` (it works "
        "only on a case-insensitive file system)",
    ),
    (
        "schemas/VnfIdentifierDeletionNotification.schema.json",
        "schemas/vnfIdentifierDeletionNotification.schema.json",
        "the suite's own mistake: the deletion notification checks read "
        "`VnfIdentifierDeletionNotification.schema.json`; the suite's file starts with a "
        "lower-case v",
    ),
]

# Files whose tests check notifications sent to `${callback_endpoint}` by an NFVO already
# subscribed (the suite's precondition): the harness subscribes the sink's /endpoint, without a
# filter, after the file's fixtures are made (so that only the file's own operations notify).
# A notification a test does not expect is answered 404 by the sink; vnfm retries it on its own
# back-off without holding back the ones after it (docs/serve.md, "Order").
SUBSCRIBED = {f for f, _, _ in FILES if f.endswith("Workflow.robot")}

# Variables of one file that differ from the suite's: (file, name, value, why).
FILE_VARIABLES = [
    (
        "VNFInstances.robot", "fields", "instantiatedVnfInfo,metadata",
        "the suite's `fields=criteria,objectInstanceIds` names no VnfInstance attribute (SOL003 "
        "clause 5.5.2.2; they are a PM job's), which vnfm answers 400 (SOL013 clause 5.3)",
    ),
    (
        "VnfLcmOperationOccurences.robot", "fields", "operationParams,error",
        "the suite's `fields=criteria,objectInstanceIds` names no VnfLcmOpOcc attribute (SOL003 "
        "clause 5.5.2.13), which vnfm answers 400 (SOL013 clause 5.3)",
    ),
    (
        "Subscriptions.robot", "sub_filter", "filter=(cont,callbackUri,/notification)",
        "the suite's `${sub_filter}` is `filter`, a placeholder without an expression (SOL013 "
        "clause 5.2: `filter=<expression>`), which vnfm answers 400; the harness gives it one",
    ),
    (
        "Subscriptions.robot", "fields", "filter",
        "the suite's `fields=criteria,objectInstanceIds` names no LccnSubscription attribute "
        "(SOL003 clause 5.5.2.16), which vnfm answers 400 (SOL013 clause 5.3)",
    ),
]

# ETSI's SOL003 Lifecycle Operation Granting API files (test IDs 7.3.2.x), run against the same
# `vnfm serve` as the NFVO of the Grant interface (docs/grants.md, "vnfm answering a VNFM"),
# with the expectations of tests/sol003/expected-granting.tsv; reported as `granting/<file>`.
GRANTING_FILES = ["ApiVersion.robot", "Grants.robot", "IndividualGrant.robot"]
# The Granting tests tagged `no-synchronous-mode` (SOL003 clause 9.4.3.3.2: a grant still being
# decided, 202; a grant rejected after its POST, 403), each run on its own against a grant the
# harness makes through an OAuth 2.0 client that accepts asynchronous answers (`asynchronous =
# true`, `[server.grants] approve = ["INSTANTIATE"]`): `pending` is left waiting for an
# operator, `rejected` is rejected through `/admin/grants/{id}/reject` (docs/grants.md,
# "Asynchronous grants: operator approval").
ASYNC_TESTS = [
    ("IndividualGrant.robot", "GET an individual grant - Process ongoing", "pending"),
    ("IndividualGrant.robot", "GET an individual grant - grant rejected", "rejected"),
]
ASYNC_CLIENT = ("sol003-async-nfvo-client", "sol003-async-nfvo-secret")
ASYNC_SIGNING_KEY = "sol003-conformance-signing-key-0123456789"
GRANTING_PATCHES = [
    (
        "Grants.robot",
        "Get Value From Json    ${response['headers']}    $..Location",
        "Evaluate    " + RESPONSE_HEADER.format("location"),
        "RFC 9110 clause 5.1 (SOL013 clause 4.2): header field names are case-insensitive (the "
        "suite's JSONPath `$..Location` is not)",
    ),
    (
        "Grants.robot",
        "    Get    ${response['headers']['Location']}\n",
        "    Get    ${apiRoot}/${apiName}/${apiVersion}/grants/${grantId}\n",
        "SOL003 clause 9.4.2.3.5: DELETE on the grants resource is 405 Method Not Allowed and "
        "creates nothing, so its answer has no `Location` (SOL003 clause 9.4.2.3.1: only a POST's "
        "201 or 202 has one); the test's post-condition (`resources are not deleted`) reads the "
        "`Location` of that 405 and fails on a missing key whatever the NFVO does. The harness "
        "reads an existing grant, `${grantId}`, instead (and RFC 9110 clause 5.1: the suite "
        "also looks `Location` up case-sensitively)",
    ),
    (
        "IndividualGrant.robot",
        "    Check HTTP Response Status Code Is    202\n"
        "    Check HTTP Response Body Json Schema Is    grant\n",
        "    Check HTTP Response Status Code Is    202\n"
        "    Should Be Empty    ${response['body']}\n",
        "SOL003 clause 9.4.3.3.2: a GET of an individual grant whose decision is still being made "
        "answers 202 Accepted, and \"the response body shall be empty\"; the test "
        "`GET an individual grant - Process ongoing` checks that body against the `grant` "
        "schema, which an empty body can never satisfy. The harness checks it is empty instead",
    ),
]
# The project's request bodies of the Granting files (tests/sol003/granting-jsons/): the one the
# suite expects to be rejected (7.3.2.1.3) asks for five VNFCs apart by zone, with no fallback,
# which the four zones of the demo cloud cannot hold; the suite's own body is an ordinary request
# that an NFVO has no reason to refuse. Both name the demo package's vnfdId and flavour: the
# suite's "myVnF" / "string" are no onboarded package, which vnfm refuses (422 naming vnfdId).


def die(msg):
    print(f"sol003-conformance: {msg}", file=sys.stderr)
    sys.exit(2)


class Api:
    """A small client of the running `vnfm serve` (also used by HarnessActions.py)."""

    def __init__(self, base, token=TOKEN):
        self.base = base
        self.token = token

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                text = r.read().decode()
                return r.status, dict(r.headers), (json.loads(text) if text else None)
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            return e.code, dict(e.headers), (json.loads(text) if text else None)

    def must(self, method, path, body, status):
        got, headers, out = self.call(method, path, body)
        if got != status:
            die(f"fixture: {method} {path} answered {got}, expected {status}: {out}")
        return headers, out

    def op_of(self, headers):
        loc = {k.lower(): v for k, v in headers.items()}.get("location", "")
        return loc.rsplit("/", 1)[-1]

    def wait_op(self, op_id, states):
        for _ in range(1200):
            _, _, op = self.call("GET", f"/vnflcm/v2/vnf_lcm_op_occs/{op_id}")
            state = (op or {}).get("operationState")
            if state in states:
                return op
            if state not in ("STARTING", "PROCESSING", "ROLLING_BACK", None):
                die(f"fixture: occurrence {op_id} is {state}, expected {states}: {op}")
            time.sleep(0.05)
        die(f"fixture: occurrence {op_id} did not reach {states} within 60 s")

    def list_all(self, path):
        """Every resource of a list, following its `Link: <...>; rel="next"` pages."""
        out = []
        for _ in range(10000):
            status, headers, page = self.call("GET", path)
            if status != 200 or not isinstance(page, list):
                die(f"fixture: GET {path} answered {status}: {page}")
            out.extend(page)
            link = {k.lower(): v for k, v in headers.items()}.get("link", "")
            m = re.match(r'\s*<([^>]*)>\s*;\s*rel="next"', link)
            if not m:
                return out
            path = m.group(1)
        die(f"fixture: GET {path}: more than 10000 pages")

    def unsubscribe_all(self):
        for sub in self.list_all("/vnflcm/v2/subscriptions?all_fields"):
            self.must("DELETE", f"/vnflcm/v2/subscriptions/{sub['id']}", None, 204)

    def clean(self):
        """Gives the cloud's capacity back between files: waits for the operations a file left
        running, fails every FAILED_TEMP occurrence and terminates every INSTANTIATED instance
        (the instances stay, for the lists)."""
        running = ("STARTING", "PROCESSING", "ROLLING_BACK")
        for _ in range(1200):
            ops = self.list_all("/vnflcm/v2/vnf_lcm_op_occs?all_fields")
            if not any(op.get("operationState") in running for op in ops):
                break
            time.sleep(0.05)
        slow = {i["id"] for i in self.list_all("/vnflcm/v2/vnf_instances?all_fields")
                if i.get("vnfdId") in (SLOW_VNFD, RETRYABLE_VNFD)}
        for op in ops:
            if op.get("operationState") != "FAILED_TEMP":
                continue
            if op.get("vnfInstanceId") in slow and op.get("operationType") == "INSTANTIATE":
                # A cancelled instantiate of a slow package: its stack (and servers) goes.
                status, h, _ = self.call("POST", f"/vnflcm/v2/vnf_lcm_op_occs/{op['id']}/rollback")
                if status == 202:
                    self.wait_op(op["id"], {"ROLLED_BACK", "FAILED_TEMP"})
                    continue
            self.call("POST", f"/vnflcm/v2/vnf_lcm_op_occs/{op['id']}/fail")
        for inst in self.list_all("/vnflcm/v2/vnf_instances?all_fields"):
            if inst.get("instantiationState") != "INSTANTIATED":
                continue
            status, h, _ = self.call(
                "POST", f"/vnflcm/v2/vnf_instances/{inst['id']}/terminate",
                {"terminationType": "FORCEFUL"},
            )
            if status == 202:
                self.wait_op(self.op_of(h), {"COMPLETED", "FAILED_TEMP"})

    def create(self, vnfd=DEMO_VNFD):
        _, inst = self.must(
            "POST", "/vnflcm/v2/vnf_instances", {"vnfdId": vnfd, "vnfInstanceName": "fixture"},
            201,
        )
        return inst["id"]

    def instantiate(self, inst, flavour="default", until=("COMPLETED",)):
        """Instantiates `inst` and waits until its occurrence is in one of `until`."""
        h, _ = self.must(
            "POST", f"/vnflcm/v2/vnf_instances/{inst}/instantiate", {"flavourId": flavour}, 202
        )
        op = self.op_of(h)
        self.wait_op(op, set(until))
        return op

    def starting(self, nfvo):
        """An instance of the demo package and its instantiate occurrence, STARTING: the lab's
        NFVO holds its grant (scripts/sol003/grantnfvo.py) until the file ends."""
        inst = self.create()
        nfvo.hold(inst)
        return inst, self.instantiate(inst, until=("STARTING",))

    def processing(self):
        """An instance of the slow package and its instantiate occurrence, PROCESSING (for
        SLOW_CREATE_SECS, unless cancelled)."""
        inst = self.create(SLOW_VNFD)
        return inst, self.instantiate(inst, until=("PROCESSING",))

    def failed_temp(self):
        """An instance and its instantiate occurrence left in FAILED_TEMP: the instantiate of the
        unplaceable package starts, finds no placement and stops (docs/serve.md)."""
        inst = self.create(UNPLACEABLE_VNFD)
        return inst, self.instantiate(inst, until=("FAILED_TEMP",))


def fixtures(api, nfvo, inst_kind, op_kind):
    """The variables of one file: fresh instances and occurrences for each file, so one file's
    deletes and terminates do not change another's."""
    v = {
        "notExistingVnfInstanceId": str(uuid.uuid4()),
        "notExistingVnfLcmOpOccId": str(uuid.uuid4()),
        "notExistingvnfLcmOpOccId": str(uuid.uuid4()),
        "subscriptionId": str(uuid.uuid4()),
    }
    not_inst = api.create()
    v["notInstantiatedVnfInstanceId"] = not_inst
    inst = api.create()
    completed = api.instantiate(inst)
    v["instantiatedVnfInstanceId"] = inst
    v["vnfLcmOpOccIdNotFailedTemp"] = completed
    v["vnfLcmOpOccIdNotStartingProcessingRollingback"] = completed
    if inst_kind == "not_instantiated":
        v["vnfInstanceId"] = not_inst
    elif inst_kind == "instantiated":
        v["vnfInstanceId"] = inst
    elif inst_kind == "instantiated_small":
        # The two-flavour package at `small`: its change to `large` is what the files test.
        small = api.create(FLAVOURS_VNFD)
        api.instantiate(small, "small")
        v["vnfInstanceId"] = small
    else:
        v["vnfInstanceId"] = str(uuid.uuid4())
    if op_kind == "starting":
        # On an instance of its own, whose grant the lab's NFVO holds.
        other, op = api.starting(nfvo)
        v["vnfLcmOpOccId"] = op
        v["conflicVnfInstanceId"] = other
    elif op_kind == "processing":
        # On an instance of its own, as a FAILED_TEMP one: a running occurrence blocks it.
        other, op = api.processing()
        v["vnfLcmOpOccId"] = op
        v["conflicVnfInstanceId"] = other
    elif op_kind == "failed_temp":
        # On an instance of its own: a FAILED_TEMP occurrence blocks its instance.
        other, op = api.failed_temp()
        v["vnfLcmOpOccId"] = op
        v["conflicVnfInstanceId"] = other
    else:
        v["vnfLcmOpOccId"] = completed
        v["conflicVnfInstanceId"] = inst
    return v


def configure(copy, host, port):
    """environment/configuration.txt for `vnfm serve`."""
    set_variables(os.path.join(copy, "environment", "configuration.txt"), {
        "VNFM_HOST": host,
        "VNFM_PORT": str(port),
        "VNFM_SCHEMA": "http",
        "AUTHORIZATION": f"Bearer {TOKEN}",
        "AUTH_USAGE": "1",
        "apiRoot": "${EMPTY}",
        "apiVersion": "v2",
        "NFVO_HOST": "127.0.0.1",
        "callback_uri": "http://127.0.0.1",
    })


def set_variables(path, values):
    """Gives each variable of `values` its value in the Robot variable file `path` (each must
    be defined there once)."""
    text = open(path).read()
    for name, value in values.items():
        text, n = re.subn(
            r"^\$\{" + re.escape(name) + r"\}[^\n]*$",
            lambda _m, name=name, value=value: "${" + name + "}    " + value,
            text,
            flags=re.M,
        )
        if n != 1:
            die(f"{path} has {n} definitions of ${{{name}}}, expected 1")
    open(path, "w").write(text)


def apply_patches(copy, patches):
    for name, old, new, _why in patches:
        path = os.path.join(copy, name)
        text = open(path).read()
        if old.startswith("re:"):
            text, n = re.subn(old[3:], new, text)
        else:
            n = text.count(old)
            text = text.replace(old, new)
        if n == 0:
            die(f"patch of {name} does not apply (the suite changed?): {old!r}")
        open(path, "w").write(text)


def patch(copy, sink_port):
    apply_patches(copy, PATCHES)
    src = os.path.join(ROOT, "tests", "sol003", "jsons")
    for f in os.listdir(src):
        text = open(os.path.join(src, f)).read()
        # The project's bodies name the sink as 127.0.0.1:9091 (the suite's `${callback_port}`);
        # the sink listens on a free port.
        text = text.replace("127.0.0.1:9091", f"127.0.0.1:{sink_port}")
        open(os.path.join(copy, "jsons", f), "w").write(text)
    level = json.load(open(os.path.join(src, "scaleVnfToLevelRequest.json")))
    if level.get("instantiationLevelId") != SCALE_TO_LEVEL[0]:
        die(f"tests/sol003/jsons/scaleVnfToLevelRequest.json names {level}; the harness's "
            f"SCALE_TO_LEVEL is level {SCALE_TO_LEVEL[0]!r}")
    for wanted, present, _why in FILE_ALIASES:
        if not os.path.exists(os.path.join(copy, present)):
            die(f"{present} is not in the suite (the suite changed?)")
        shutil.copy(os.path.join(copy, present), os.path.join(copy, wanted))


def copy_package(work, example, name, replacements):
    """examples/packages/<example> copied to <work>/packages/<name>, each `(old, new)` of
    `replacements` replaced in every file; how many times each `old` was found."""
    dst = os.path.join(work, "packages", name)
    shutil.copytree(os.path.join(ROOT, "examples", "packages", example), dst)
    found = [0] * len(replacements)
    for d, _, files in os.walk(dst):
        for f in files:
            path = os.path.join(d, f)
            text = open(path).read()
            for i, (old, new) in enumerate(replacements):
                found[i] += text.count(old)
                text = text.replace(old, new)
            open(path, "w").write(text)
    return found


def unplaceable_package(work):
    """The demo package (examples/packages/demo-vnf) as UNPLACEABLE_VNFD, VDU1 needing 4 TiB;
    the folder of the packages."""
    found = copy_package(work, "demo-vnf", "unplaceable", [
        (DEMO_VNFD, UNPLACEABLE_VNFD),
        ("virtual_mem_size: 2048 MiB", "virtual_mem_size: 4096 GiB"),
    ])
    if found[1] != 1:
        die("examples/packages/demo-vnf changed: VDU1's `virtual_mem_size: 2048 MiB` not found")
    return os.path.join(work, "packages")


def flavours_package(work):
    """examples/packages/flavours-vnf with its image `tiny` (the dev OpenStack's) replaced by
    `cirros`, an image of the simulated cloud vnfm serves on."""
    found = copy_package(work, "flavours-vnf", "flavours", [("name: tiny", "name: cirros")])
    top = os.path.join(work, "packages", "flavours", "Definitions", "flavours_top.vnfd.yaml")
    if found[0] == 0 or FLAVOURS_VNFD not in open(top).read():
        die("examples/packages/flavours-vnf changed: its vnfdId or image `tiny` not found")


def slow_package(work, name="slow", vnfd=SLOW_VNFD, secs=SLOW_CREATE_SECS):
    """The demo package as `vnfd` (SLOW_VNFD), its BaseHOT with an OS::Heat::TestResource whose
    create waits `secs` (SLOW_CREATE_SECS)."""
    found = copy_package(work, "demo-vnf", name, [
        (DEMO_VNFD, vnfd),
        ("outputs: {}",
         "  # The harness's: holds the stack CREATE_IN_PROGRESS (Heat 27's TestResource).\n"
         "  slow_create:\n"
         "    type: OS::Heat::TestResource\n"
         "    properties:\n"
         "      value: sol003-harness\n"
         f"      action_wait_secs: {{ create: {secs} }}\n\n"
         "outputs: {}"),
    ])
    if found[0] == 0 or found[1] != 1:
        die("examples/packages/demo-vnf changed: its vnfdId or the BaseHOT's `outputs: {}` not "
            f"found once ({found})")


def start_server(vnfm, work, page_size, nfvo):
    packages = unplaceable_package(work)
    flavours_package(work)
    slow_package(work)
    slow_package(work, "retryable", RETRYABLE_VNFD, RETRYABLE_CREATE_SECS)
    cfg = os.path.join(work, "vnfm.toml")
    with open(cfg, "w") as f:
        f.write(
            f"""[state]
path = "{work}/state.sqlite"

[placement]
reselect_zones = true
fallback_best_effort = true

[server]
listen = "127.0.0.1:0"
api_token = "{TOKEN}"
{page_size}


[server.oauth2]
signing_key = "{ASYNC_SIGNING_KEY}"

[[server.oauth2.clients]]
id = "{ASYNC_CLIENT[0]}"
secret = "{ASYNC_CLIENT[1]}"
asynchronous = true

[server.grants]
approve = ["INSTANTIATE"]

[packages]
dir = "{packages}"

[grant]
nfvo = "{nfvo.base_url}/grant/v1"
poll_interval = 1

[notifications]
retry_initial_ms = 200
retry_max_delay_ms = 1000
max_attempts = 600
timeout = 5
# the suite's and the harness's callbacks listen on loopback, refused by default
allow = ["127.0.0.0/8"]
"""
        )
    log = open(os.path.join(work, "serve.log"), "w+")
    proc = subprocess.Popen(
        [vnfm, "--config", cfg, "serve"], stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    for _ in range(600):
        log.seek(0)
        m = re.search(r"listening on http://([0-9.]+):([0-9]+)", log.read())
        if m:
            return proc, m.group(1), int(m.group(2))
        if proc.poll() is not None:
            log.seek(0)
            die(f"vnfm serve exited with {proc.returncode}:\n{log.read()}")
        time.sleep(0.05)
    proc.kill()
    die("vnfm serve did not start within 30 s")


def robot_run(python, copy, name, variables, out, extra=()):
    args = [python, "-m", "robot", "--output", out, "--log", "NONE", "--report", "NONE",
            "--console", "dotted", "--loglevel", "INFO", *extra]
    for k, v in variables.items():
        args += ["--variable", f"{k}:{v}"]
    args.append(name)
    subprocess.run(args, cwd=copy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from robot.api import ExecutionResult  # the venv's

    result = ExecutionResult(out)
    rows = []

    def walk(suite):
        for t in suite.tests:
            rows.append((t.name, t.status, " ".join(t.message.split())[:300]))
        for s in suite.suites:
            walk(s)

    walk(result.suite)
    return rows


def run_granting(suite, work, api, host, port, wanted):
    """ETSI's Granting files against the running `vnfm serve`; rows `(granting/<file>, test,
    status, message)`."""
    copy = os.path.join(work, "granting")
    shutil.copytree(suite, copy)
    apply_patches(copy, GRANTING_PATCHES)
    src = os.path.join(ROOT, "tests", "sol003", "granting-jsons")
    for f in os.listdir(src):
        shutil.copy(os.path.join(src, f), os.path.join(copy, "jsons", f))
    set_variables(os.path.join(copy, "environment", "variables.txt"), {
        "NFVO_HOST": host,
        "NFVO_PORT": str(port),
        "NFVO_SCHEMA": "http",
        "VNFM_HOST": host,
        "VNFM_PORT": str(port),
        "VNFM_SCHEMA": "http",
        "AUTHORIZATION": f"Bearer {TOKEN}",
        "AUTH_USAGE": "1",
        "apiRoot": "${EMPTY}",
        "SYNC_MODE": "1",
    })
    body = json.load(open(os.path.join(copy, "jsons", "grantRequest.json")))
    _, grant = api.must("POST", "/grant/v1/grants", body, 201)
    grants = async_grants(api, body)
    rows = []
    for name in GRANTING_FILES:
        if wanted and f"granting/{name}" not in wanted:
            continue
        out = os.path.join(work, "granting-" + name.replace(".robot", ".xml"))
        alone = [t for f, t, _ in ASYNC_TESTS if f == name]
        extra = ["--exclude", "no-synchronous-mode"] if alone else []
        for test, status, msg in robot_run(
            sys.executable, copy, name, {"grantId": grant["id"]}, out, extra
        ):
            rows.append((f"granting/{name}", test, status, msg))
        for i, (f, test, which) in enumerate(ASYNC_TESTS):
            if f != name:
                continue
            out = os.path.join(work, f"granting-async-{i}.xml")
            for t, status, msg in robot_run(
                sys.executable, copy, name, {"grantId": grants[which]}, out, ["--test", test]
            ):
                rows.append((f"granting/{name}", t, status, msg))
    return rows


def async_grants(api, body):
    """The grants of ASYNC_TESTS: asked as the asynchronous client (a token of `POST /token`,
    HTTP Basic), each answered 202 with its `Location`; `rejected` is then rejected by the
    operator. Returns `{"pending": id, "rejected": id}`."""
    import base64

    basic = base64.b64encode(f"{ASYNC_CLIENT[0]}:{ASYNC_CLIENT[1]}".encode()).decode()
    req = urllib.request.Request(api.base + "/token", data=b"grant_type=client_credentials",
                                 method="POST")
    req.add_header("Authorization", f"Basic {basic}")
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            token = json.loads(r.read().decode())["access_token"]
    except urllib.error.HTTPError as e:
        die(f"fixture: POST /token answered {e.code}: {e.read().decode()}")
    client = Api(api.base, token)
    ids = {}
    for which in ("pending", "rejected"):
        headers, out = client.must("POST", "/grant/v1/grants", body, 202)
        loc = {k.lower(): v for k, v in headers.items()}.get("location", "")
        if not loc.startswith("/grant/v1/grants/"):
            die(f"fixture: the asynchronous grant's 202 has no Location: {headers}")
        ids[which] = loc.rsplit("/", 1)[-1]
    api.must("POST", f"/admin/grants/{ids['rejected']}/reject",
             {"by": "the conformance harness",
              "reason": "rejected for ETSI test 7.3.2.2.4 (GET an individual grant - grant "
                        "rejected)"}, 200)
    return ids


def read_expected(path):
    exp = {}
    for n, line in enumerate(open(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.rstrip("\n").split("\t")
        if len(cols) < 3 or cols[2] not in ("PASS", "FAIL"):
            die(f"{path}:{n}: expected `file<TAB>test<TAB>PASS|FAIL[<TAB>reason]`")
        if cols[2] == "FAIL" and (len(cols) < 4 or not cols[3].strip()):
            die(f"{path}:{n}: a FAIL needs its reason")
        exp[(cols[0], cols[1])] = (cols[2], cols[3] if len(cols) > 3 else "")
    return exp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", required=True)
    ap.add_argument("--vnfm", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("--grant-suite",
                    help="ETSI's SOL003 VNFLifecycleOperationGranting-API folder (run after the "
                         "LCM files)")
    ap.add_argument("--grant-expected", help="the expectations of the Granting files")
    ap.add_argument("--files", help="comma-separated file names (default: every file of FILES)")
    ap.add_argument("--write", help="also write the outcomes as an expectations file here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--no-page-size", action="store_true",
                    help="leave [server] page_size out (a vnfm older than the key)")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="vnfm-sol003-")
    copy = os.path.join(work, "suite")
    shutil.copytree(a.suite, copy)
    sink = MockSink().start()
    patch(copy, sink.port)
    page_size = "" if a.no_page_size else f"page_size = {PAGE_SIZE}"
    nfvo = GrantNfvo().start()
    proc, host, port = start_server(os.path.abspath(a.vnfm), work, page_size, nfvo)
    wanted = set(a.files.split(",")) if a.files else None
    results = []
    try:
        api = Api(f"http://{host}:{port}")
        configure(copy, host, port)
        for name, ik, ok in FILES:
            if wanted and name not in wanted:
                continue
            api.unsubscribe_all()
            nfvo.release_all()
            api.clean()
            variables = fixtures(api, nfvo, ik, ok)
            variables.update({k: v for f, k, v, _ in FILE_VARIABLES if f == name})
            variables.update({
                "callback_port": str(sink.port),
                "VNFM_BASE": f"http://{host}:{port}",
                "HARNESS_TOKEN": TOKEN,
                "SINK_BASE": sink.base_url,
                "NFVO_BASE": nfvo.base_url,
                "HARNESS_LIBRARY": os.path.join(HERE, "HarnessActions.py"),
            })
            # The test lab's NFVO: its endpoints answer the callback test (GET -> 204), and the
            # files that check notifications find it subscribed.
            sink.reset()
            for path in (ENDPOINT, "/notification"):
                sink.expect({"method": "GET", "path": path}, {"statusCode": 204},
                            times={"unlimited": True})
            if name in ("Subscriptions.robot", "IndividualSubscription.robot"):
                # Subscriptions to list (three, so that a page of PAGE_SIZE has a next one) and
                # the one `${subscriptionId}` names; each with a filter of its own, so that the
                # suite's own request body is not a duplicate of one of them.
                subs = []
                for _ in range(3):
                    _, sub = api.must("POST", "/vnflcm/v2/subscriptions", {
                        "callbackUri": sink.base_url + "/notification",
                        "filter": {"vnfInstanceSubscriptionFilter": {
                            "vnfInstanceIds": [str(uuid.uuid4())]}},
                    }, 201)
                    subs.append(sub["id"])
                variables["subscriptionId"] = subs[0]
            if name in SUBSCRIBED:
                sub = {"callbackUri": sink.base_url + ENDPOINT}
                api.must("POST", "/vnflcm/v2/subscriptions", sub, 201)
            out = os.path.join(work, name.replace(".robot", ".xml"))
            rows = robot_run(sys.executable, copy, name, variables, out)
            for test, status, msg in rows:
                results.append((name, test, status, msg))
        if a.grant_suite:
            api.unsubscribe_all()
            nfvo.release_all()
            results += run_granting(a.grant_suite, work, api, host, port, wanted)
    finally:
        sink.stop()
        nfvo.stop()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
    if a.write:
        with open(a.write, "w") as f:
            for name, test, status, msg in results:
                f.write(f"{name}\t{test}\t{status}\t{msg}\n")
    exp = read_expected(a.expected)
    lcm_failures = sum(1 for v in exp.values() if v[0] == "FAIL")
    if a.grant_suite:
        if not a.grant_expected:
            die("--grant-suite needs --grant-expected")
        for (name, test), v in read_expected(a.grant_expected).items():
            exp[(f"granting/{name}", test)] = v
    per_file = {}
    diffs = []
    seen = set()
    for name, test, status, msg in results:
        seen.add((name, test))
        p = per_file.setdefault(name, [0, 0])
        p[0 if status == "PASS" else 1] += 1
        want = exp.get((name, test))
        if want is None:
            diffs.append(f"{name}: {test}: {status}, not in the expectations ({msg})")
        elif want[0] != status:
            diffs.append(f"{name}: {test}: {status}, expected {want[0]} ({want[1]}) {msg}")
    for (name, test), _ in exp.items():
        if (wanted is None or name in wanted) and (name, test) not in seen:
            diffs.append(f"{name}: {test}: expected but not run")
    print(f"{'file':48} pass fail")
    for name, (p, f) in per_file.items():
        print(f"{name:48} {p:4} {f:4}")
    tp = sum(p for p, _ in per_file.values())
    tf = sum(f for _, f in per_file.values())
    print(f"{'total':48} {tp:4} {tf:4}")
    known = [v[1] for v in exp.values() if v[0] == "FAIL"]
    kinds = {}
    for r in known:
        k = r.split(":", 1)[0]
        kinds[k] = kinds.get(k, 0) + 1
    files = a.expected + (f", {a.grant_expected}" if a.grant_suite else "")
    print(f"expected failures listed: {len(known)} ({files}): "
          + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    if lcm_failures > 20:
        diffs.append(
            f"{lcm_failures} expected failures of the LCM files are listed; issue 16 allows at "
            "most 20: patch the "
            "suite's mistakes in the harness, or make vnfm pass"
        )
    if a.keep:
        print(f"kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    if diffs:
        print(f"\n{len(diffs)} difference(s) from the expectations:", file=sys.stderr)
        for d in diffs:
            print("  " + d, file=sys.stderr)
        sys.exit(1)
    print("every test as expected")


if __name__ == "__main__":
    main()
