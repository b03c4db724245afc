"""Drives a running `vnfm serve` with Tacker 16.0.0's own NFVO client (nfvo_client.NfvoClient
over http_client.OAuth2AuthHandle), as tacker-conductor does with [v2_nfvo] use_external_nfvo:
a token from POST /token before each request, the VnfPkgInfo (ENABLED), the VNFD zip read by
Tacker's Vnfd.init_from_zip_data, the package content unpacked into Tacker's CSAR cache, and a
grant of two VNFCs of the demo VNFD apart by zone, parsed as Tacker's GrantV1.

Not part of the test command (it needs a Tacker venv). By hand:
  python3.11 -m venv /tmp/tk-venv && /tmp/tk-venv/bin/pip install tacker==16.0.0
  vnfm --config vnfm.toml serve   # [server] listen = "127.0.0.1:19890", a
                                  # [[server.oauth2.clients]] id = "tacker"
  /tmp/tk-venv/bin/python scripts/tacker/nfvo_client_check.py <client secret> [base URL]

Tacker's mutual-TLS mode (use_client_secret_basic = False; OAuth2MtlsAuthHandle: POST /token
with client_id only, over a connection presenting Tacker's certificate), against a vnfm serve
with [server.tls] cert, key and client_ca and a client of tls_client_auth_subject_dn:
  /tmp/tk-venv/bin/python scripts/tacker/nfvo_client_check.py --mtls <CA PEM> \
      <Tacker's certificate and key, one PEM> <client id> https://127.0.0.1:19890
"""
import sys
import tempfile
from tacker.sol_refactored.common import config
from tacker.sol_refactored import objects
from tacker.sol_refactored.common import vnfd_utils
from tacker.sol_refactored.nfvo import nfvo_client

CACHE = tempfile.mkdtemp()
CONF = config.CONF
CONF([], project='tacker')
objects.register_all()
if sys.argv[1] == "--mtls":
    ca, client_pem, client_id, base = sys.argv[2:6]
    auth = [("client_id", client_id), ("use_client_secret_basic", False),
            ("mtls_ca_cert_file", ca), ("mtls_client_cert_file", client_pem)]
else:
    base = sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:19890"
    auth = [("client_id", "tacker"), ("client_password", sys.argv[1]),
            ("use_client_secret_basic", True)]
for k, v in [("use_external_nfvo", True), ("endpoint", base),
             ("token_endpoint", base + "/token"), *auth,
             ("grant_api_version", "1.4.0"), ("vnfpkgm_api_version", "2.1.0"),
             ("vnf_package_cache_dir", CACHE)]:
    CONF.set_override(k, v, group="v2_nfvo")

c = nfvo_client.NfvoClient()
vnfd_id = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d"
info = c.get_vnf_package_info_vnfd(None, vnfd_id)
print("pkg info:", info.id, info.operationalState, info.onboardingState, info.vnfdVersion)
assert info.operationalState == "ENABLED"

# get_vnfd(all_contents=False): onboarded_show_vnfd then Vnfd.init_from_zip_data
z = c.onboarded_show_vnfd(None, vnfd_id)
vnfd = vnfd_utils.Vnfd(vnfd_id)
vnfd.init_from_zip_data(z)
print("vnfd: VDUs", sorted(vnfd.get_vdu_nodes("default").keys()))
# get_vnfd(all_contents=True): package_content into the csar cache
pc = c.onboarded_package_content(None, vnfd_id)
c._make_csar_cache(CACHE + "/" + vnfd_id, pc)
full = vnfd_utils.Vnfd(vnfd_id)
full.init_from_csar_dir(CACHE + "/" + vnfd_id)
print("package_content: base HOT", sorted(full.get_base_hot("default").keys()))

grant_req = objects.GrantRequestV1(
    vnfInstanceId="inst-1", vnfLcmOpOccId="op-1", vnfdId=vnfd_id, flavourId="default",
    operation="INSTANTIATE", isAutomaticInvocation=False,
    addResources=[objects.ResourceDefinitionV1(id="res-1", type="COMPUTE", vduId="VDU1",
                                               resourceTemplateId="VDU1"),
                  objects.ResourceDefinitionV1(id="res-2", type="COMPUTE", vduId="VDU1",
                                               resourceTemplateId="VDU1")],
    placementConstraints=[objects.PlacementConstraintV1(
        affinityOrAntiAffinity="ANTI_AFFINITY", scope="ZONE",
        resource=[objects.ConstraintResourceRefV1(idType="GRANT", resourceId="res-1"),
                  objects.ConstraintResourceRefV1(idType="GRANT", resourceId="res-2")],
        fallbackBestEffort=False)],
    _links=objects.GrantRequestV1_Links(
        vnfLcmOpOcc=objects.Link(href="http://tacker/op-1"),
        vnfInstance=objects.Link(href="http://tacker/inst-1")))
g = c.grant(None, grant_req)
zones = {z.id: z.zoneId for z in g.zones}
print("grant:", g.id, [(a.resourceDefinitionId, zones[a.zoneId]) for a in g.addResources])
