//! SOL003 "change external VNF connectivity" (`ChangeExtVnfConnectivityRequest`, v3.3.1 5.4.11,
//! 5.5.2.11): the request, what is checked before anything starts, and how the request's links
//! merge into the instance's (pure). The operation itself is a plan of the operation machine
//! ([`super::Plan::ChangeExtConn`]).
//!
//! # What it does
//! The instance's external virtual links are `instantiatedVnfInfo.extVirtualLinkInfo` (SOL003
//! 5.5.3.2: the link's `id`, its network as `resourceHandle`, `extLinkPorts`, and the CPs on it
//! with their `cpConfig` as `currentVnfExtCpData`), set at instantiation from
//! `InstantiateVnfRequest.extVirtualLinks` and changed here. The request's links merge into
//! them ([`merge`]):
//!
//! 1. a link of the request whose `id` is the id of a link of the instance replaces it (its
//!    network and CPs are the request's; CPs of the old link it does not name leave it);
//! 2. a link with a new `id` is added;
//! 3. a CP (`cpdId`) the request puts on a link is taken off every other link of the instance
//!    (a CP is on one external link);
//! 4. a link of the instance left without CPs is removed.
//!
//! The grant (`CHANGE_EXT_CONN`, through the local granter) adds and removes no resource. Then
//! the instance's stack is updated with the same template and VNFCs and the `nfv` parameter
//! with a `CP` section from the merged links, in Tacker's StandardUserData convention (see
//! [`super::userdata`]): every `get_param: [nfv, CP, <cp>, network]` of the BaseHOT (indexed
//! per VNFC as the VDU's, `VDU1_CP1-0`) reads the link's `resourceId`, `[nfv, CP, <cp>,
//! fixed_ips]` the CP's fixed IPs (`cpConfig.*.cpProtocolData[].ipOverEthernet.ipAddresses[]`:
//! `fixedAddresses[0]` as `ip_address`, `subnetId` as `subnet`, in order), and `nfv.CP.<cpdId>`
//! holds `{network, fixed_ips}` for every linked CP whatever the template reads. Heat updates
//! the ports a BaseHOT builds from those parameters (Neutron re-plugs them; the servers are
//! kept); a BaseHOT that reads no CP parameter keeps its ports as they are, and the instance
//! records the links all the same. Instantiate passes the same section for the links of its
//! request, and every later stack update (scale, heal, change flavour, reselection) passes the
//! instance's links, so no update re-plugs a port back to the template's default.
//!
//! The request's `vimConnectionInfo` entries are merged into the instance's (an entry replaces
//! the one of the same key); `additionalParams` is recorded in the occurrence. On success
//! `extVirtualLinkInfo` holds the merged links and each `extCpInfo` of a linked CP refers to
//! the `cpConfig` it took (the n-th CP instance of a CPD takes the n-th `cpConfig` key, in key
//! order; instances beyond keep their own id). A failed update ends `FAILED_TEMP` with Heat's
//! reason; a retry updates again; a rollback updates the stack back to the links before the
//! operation.
//!
//! # Refused
//! - 409: an instance not instantiated, another operation unfinished on the instance.
//! - 422 (each naming the field and the value): no `extVirtualLinks`; a link without `id`,
//!   `resourceId` or `extCps`, or with the `id` of another link of the request; a CP without
//!   `cpdId`, with a `cpdId` that is not an external CP of the instance's flavour (the
//!   flavour's are listed), or whose `cpdId` is on two links of the request; a `cpConfig` in
//!   SOL003 v2's array form (v3.3.1 has a map keyed by `cpConfigId`); a link's
//!   `vimConnectionId` that neither the instance, the request nor vnfm's VIM has; a
//!   `vimConnectionInfo` entry without `vimType`; a CNF (its pods' networks are the cluster's:
//!   the Kubernetes adapter has no external link to change).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::LcmError;
use crate::error::{Error, Location};
use crate::grant::{ExtVirtualLinkData, KeyValuePairs, VimConnectionInfo};
use crate::lcm::VnfInstance;
use crate::package::{Flavour, VnfPackage};

/// SOL003 `ChangeExtVnfConnectivityRequest` (v3.3.1 5.5.2.11).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeExtVnfConnectivityRequest {
    /// `extVirtualLinks` (1..N): the links to connect, merged into the instance's (see the
    /// [module docs](self)). Absent reads as empty, which [`check`] refuses (422).
    #[serde(default)]
    pub ext_virtual_links: Vec<ExtVirtualLinkData>,
    /// `vimConnectionInfo` (0..N): connection id to VIM connection, merged into the
    /// instance's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vim_connection_info: BTreeMap<String, VimConnectionInfo>,
    /// `additionalParams` (0..1): recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
}

impl ChangeExtVnfConnectivityRequest {
    /// A request connecting `links`.
    pub fn new(links: Vec<ExtVirtualLinkData>) -> Self {
        Self {
            ext_virtual_links: links,
            vim_connection_info: BTreeMap::new(),
            additional_params: None,
        }
    }
}

fn invalid(field: String, detail: String) -> LcmError {
    LcmError::Invalid(Error::invalid(
        Location::default().with_field(field),
        detail,
    ))
}

/// The checks of a request body before it is read as a [`ChangeExtVnfConnectivityRequest`]:
/// the mandatory attributes of each link and CP (`id`, `resourceId`, `extCps`, `cpdId`) and
/// `cpConfig` as a map. A body that is not an object, or whose `extVirtualLinks` is not an
/// array, is left to the reader.
///
/// # Errors
/// [`LcmError::Invalid`] naming the field, e.g. `extVirtualLinks[0].resourceId`.
pub fn check_body(body: &Value) -> Result<(), LcmError> {
    let Some(links) = body.get("extVirtualLinks").and_then(Value::as_array) else {
        return Ok(());
    };
    for (i, link) in links.iter().enumerate() {
        let at = format!("extVirtualLinks[{i}]");
        for attr in ["id", "resourceId", "extCps"] {
            if link.get(attr).is_none_or(Value::is_null) {
                return Err(invalid(
                    format!("{at}.{attr}"),
                    format!("{at} (ExtVirtualLinkData) has no {attr}; SOL003 requires it"),
                ));
            }
        }
        let cps = link.get("extCps").and_then(Value::as_array);
        for (j, cp) in cps.into_iter().flatten().enumerate() {
            let at = format!("{at}.extCps[{j}]");
            if cp.get("cpdId").is_none_or(Value::is_null) {
                return Err(invalid(
                    format!("{at}.cpdId"),
                    format!("{at} (VnfExtCpData) has no cpdId; SOL003 requires it"),
                ));
            }
            if cp.get("cpConfig").is_some_and(Value::is_array) {
                return Err(invalid(
                    format!("{at}.cpConfig"),
                    format!(
                        "{at}.cpConfig is an array (SOL003 v2.x); SOL003 v3.3.1 \
                         VnfExtCpData.cpConfig is a map from a cpConfigId to its VnfExtCpConfig, \
                         e.g. {{\"VDU1_CP1_1\": {{\"cpProtocolData\": [...]}}}}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The external CPDs of `flavour`: the connection points its `substitution_mappings` map to
/// external virtual links.
pub fn external_cpds(flavour: &Flavour) -> BTreeSet<String> {
    flavour.external_links.values().cloned().collect()
}

/// The instance's external virtual links (`instantiatedVnfInfo.extVirtualLinkInfo`) as
/// `ExtVirtualLinkData`.
pub fn links_of(inst: &VnfInstance) -> Vec<ExtVirtualLinkData> {
    inst.instantiated_vnf_info
        .iter()
        .flat_map(|i| i.ext_virtual_link_info.iter())
        .map(crate::lcm::ExtVirtualLinkInfo::to_data)
        .collect()
}

/// The checks of SOL003 before a change of external connectivity starts (see the
/// [module docs](self)); `default_vim` is the VIM connection id vnfm records for its own VIM.
///
/// # Errors
/// [`LcmError::Conflict`] for an instance not instantiated; [`LcmError::Invalid`] for what the
/// module docs list, naming the field and the value.
pub fn check(
    pkg: &VnfPackage,
    inst: &VnfInstance,
    req: &ChangeExtVnfConnectivityRequest,
    default_vim: &str,
) -> Result<(), LcmError> {
    let info = super::plan::instantiated(inst, Some("changes its external connectivity"))?;
    if pkg.is_cnf(&info.flavour_id) || super::cnf::CnfResources::of(inst).is_some() {
        return Err(invalid(
            "extVirtualLinks".into(),
            format!(
                "VNF instance {} is a CNF (its VDUs are Kubernetes workloads, their networks \
                 the cluster's): vnfm changes the external connectivity of VNFs on a VIM (Heat) \
                 only",
                inst.id
            ),
        ));
    }
    if req.ext_virtual_links.is_empty() {
        return Err(invalid(
            "extVirtualLinks".into(),
            "the request has no extVirtualLinks; SOL003 ChangeExtVnfConnectivityRequest \
             requires at least 1"
                .into(),
        ));
    }
    crate::grant::validate_vim_connections(&req.vim_connection_info, "")
        .map_err(LcmError::Invalid)?;
    let flavour = super::plan::flavour_of(pkg, &info.flavour_id)?;
    let mut vims: BTreeSet<&str> = inst
        .vim_connection_info
        .keys()
        .map(String::as_str)
        .collect();
    vims.extend(req.vim_connection_info.keys().map(String::as_str));
    vims.insert(default_vim);
    let mut links = LinkCheck {
        pkg,
        inst,
        flavour,
        cpds: external_cpds(flavour),
        vims,
        link_ids: BTreeMap::new(),
        cp_at: BTreeMap::new(),
    };
    for (i, l) in req.ext_virtual_links.iter().enumerate() {
        links.link(i, l)?;
    }
    Ok(())
}

/// The requested links, checked in order: what they may name (the instance's and the
/// request's VIM connections, the flavour's external CPs) and what earlier links took (their
/// ids, their CPs).
struct LinkCheck<'a> {
    pkg: &'a VnfPackage,
    inst: &'a VnfInstance,
    flavour: &'a Flavour,
    /// The flavour's external CPDs.
    cpds: BTreeSet<String>,
    /// The VIM connection ids a link may name.
    vims: BTreeSet<&'a str>,
    /// Link id → its index in the request.
    link_ids: BTreeMap<&'a str, usize>,
    /// CPD id → where the request connects it (`extVirtualLinks[i].extCps[j]`).
    cp_at: BTreeMap<&'a str, String>,
}

impl<'a> LinkCheck<'a> {
    /// Checks `extVirtualLinks[i]`, `l`.
    fn link(&mut self, i: usize, l: &'a ExtVirtualLinkData) -> Result<(), LcmError> {
        let at = format!("extVirtualLinks[{i}]");
        if l.id.is_empty() {
            return Err(invalid(format!("{at}.id"), format!("{at}.id is empty")));
        }
        if let Some(first) = self.link_ids.insert(&l.id, i) {
            return Err(invalid(
                format!("{at}.id"),
                format!(
                    "{at}.id {:?} is also extVirtualLinks[{first}].id; expected each link once",
                    l.id
                ),
            ));
        }
        if l.resource_id.is_empty() {
            return Err(invalid(
                format!("{at}.resourceId"),
                format!("{at}.resourceId (the network of link {:?}) is empty", l.id),
            ));
        }
        if let Some(vim) = l.vim_connection_id.as_deref() {
            if !self.vims.contains(vim) {
                return Err(invalid(
                    format!("{at}.vimConnectionId"),
                    format!(
                        "{at}.vimConnectionId {vim:?} is no VIM connection of VNF instance {} or \
                         of the request; expected one of {}",
                        self.inst.id,
                        self.vims.iter().copied().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        if l.ext_cps.is_empty() {
            return Err(invalid(
                format!("{at}.extCps"),
                format!("{at}.extCps is empty; SOL003 ExtVirtualLinkData requires at least 1 CP"),
            ));
        }
        for (j, cp) in l.ext_cps.iter().enumerate() {
            self.cp(format!("{at}.extCps[{j}]"), &cp.cpd_id)?;
        }
        Ok(())
    }

    /// Checks the CP at `here` (`extVirtualLinks[i].extCps[j]`), of CPD `cpd_id`.
    fn cp(&mut self, here: String, cpd_id: &'a str) -> Result<(), LcmError> {
        if !self.cpds.contains(cpd_id) {
            return Err(invalid(
                format!("{here}.cpdId"),
                format!(
                    "{here}.cpdId {:?} is not an external CP of flavour {} of package {}; \
                     its external CPs are {}",
                    cpd_id,
                    self.flavour.id,
                    self.pkg.source,
                    super::plan::list(self.cpds.iter())
                ),
            ));
        }
        if let Some(first) = self.cp_at.insert(cpd_id, here.clone()) {
            return Err(invalid(
                format!("{here}.cpdId"),
                format!(
                    "{here}.cpdId {:?} is also {first}.cpdId; a CP is connected to one \
                     external virtual link",
                    cpd_id
                ),
            ));
        }
        Ok(())
    }
}

/// The instance's links `current` after the request's `requested` (see the
/// [module docs](self)): same id replaces, a new id is added (after the instance's, in the
/// request's order), a CP the request names leaves every other link, and a link left without
/// CPs goes.
pub fn merge(
    current: &[ExtVirtualLinkData],
    requested: &[ExtVirtualLinkData],
) -> Vec<ExtVirtualLinkData> {
    let named: BTreeSet<&str> = requested
        .iter()
        .flat_map(|l| l.ext_cps.iter().map(|c| c.cpd_id.as_str()))
        .collect();
    let by_id: BTreeMap<&str, &ExtVirtualLinkData> =
        requested.iter().map(|l| (l.id.as_str(), l)).collect();
    let mut out: Vec<ExtVirtualLinkData> = current
        .iter()
        .map(|l| match by_id.get(l.id.as_str()) {
            Some(new) => (*new).clone(),
            None => {
                let mut kept = l.clone();
                kept.ext_cps.retain(|c| !named.contains(c.cpd_id.as_str()));
                kept
            }
        })
        .collect();
    let had: BTreeSet<&str> = current.iter().map(|l| l.id.as_str()).collect();
    out.extend(
        requested
            .iter()
            .filter(|l| !had.contains(l.id.as_str()))
            .cloned(),
    );
    out.retain(|l| !l.ext_cps.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::grant::VnfExtCpData;

    fn link(id: &str, net: &str, cps: &[&str]) -> ExtVirtualLinkData {
        ExtVirtualLinkData {
            id: id.into(),
            vim_connection_id: None,
            resource_provider_id: None,
            resource_id: net.into(),
            ext_cps: cps
                .iter()
                .map(|c| VnfExtCpData {
                    cpd_id: (*c).into(),
                    cp_config: serde_json::Map::new(),
                })
                .collect(),
            ext_link_ports: vec![],
        }
    }

    fn shape(l: &[ExtVirtualLinkData]) -> Vec<(String, String, Vec<String>)> {
        l.iter()
            .map(|l| {
                (
                    l.id.clone(),
                    l.resource_id.clone(),
                    l.ext_cps.iter().map(|c| c.cpd_id.clone()).collect(),
                )
            })
            .collect()
    }

    fn s(id: &str, net: &str, cps: &[&str]) -> (String, String, Vec<String>) {
        (
            id.into(),
            net.into(),
            cps.iter().map(|c| (*c).to_owned()).collect(),
        )
    }

    #[test]
    fn a_link_of_the_same_id_replaces_and_a_new_id_is_added() {
        let cur = [link("a", "net-a", &["CP1", "CP2"])];
        let out = merge(&cur, &[link("a", "net-b", &["CP1", "CP2"])]);
        assert_eq!(shape(&out), [s("a", "net-b", &["CP1", "CP2"])]);
        let out = merge(&cur, &[link("b", "net-b", &["CP3"])]);
        assert_eq!(
            shape(&out),
            [s("a", "net-a", &["CP1", "CP2"]), s("b", "net-b", &["CP3"])]
        );
    }

    #[test]
    fn a_cp_moves_and_an_emptied_link_goes() {
        let cur = [
            link("a", "net-a", &["CP1", "CP2"]),
            link("c", "net-c", &["CP3"]),
        ];
        // CP2 moves to the new link b; CP3 to b too: c is left without CPs and goes.
        let out = merge(&cur, &[link("b", "net-b", &["CP2", "CP3"])]);
        assert_eq!(
            shape(&out),
            [s("a", "net-a", &["CP1"]), s("b", "net-b", &["CP2", "CP3"])]
        );
        // Replacing a with only CP1 drops CP2 from a (and from the instance).
        let out = merge(&cur, &[link("a", "net-x", &["CP1"])]);
        assert_eq!(
            shape(&out),
            [s("a", "net-x", &["CP1"]), s("c", "net-c", &["CP3"])]
        );
    }

    #[test]
    fn check_body_names_the_missing_field_and_the_v2_cp_config() {
        let e = check_body(&json!({"extVirtualLinks": [{"id": "l", "extCps": []}]})).unwrap_err();
        assert!(
            e.to_string().contains("extVirtualLinks[0].resourceId"),
            "{e}"
        );
        let e = check_body(&json!({"extVirtualLinks": [
            {"id": "l", "resourceId": "n", "extCps": [{"cpdId": "CP", "cpConfig": []}]}
        ]}))
        .unwrap_err();
        let m = e.to_string();
        assert!(m.contains("extVirtualLinks[0].extCps[0].cpConfig"), "{m}");
        assert!(m.contains("v3.3.1"), "{m}");
        let e = check_body(&json!({"extVirtualLinks": [
            {"id": "l", "resourceId": "n", "extCps": [{"cpConfig": {}}]}
        ]}))
        .unwrap_err();
        assert!(e.to_string().contains("extCps[0].cpdId"), "{e}");
        check_body(&json!({"extVirtualLinks": [
            {"id": "l", "resourceId": "n", "extCps": [{"cpdId": "CP", "cpConfig": {"c": {}}}]}
        ]}))
        .unwrap();
    }
}
