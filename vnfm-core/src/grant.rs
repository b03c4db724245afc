//! ETSI NFV-SOL 003 v3.3.1 VNF Lifecycle Operation Granting data types (clause 9.5):
//! [`GrantRequest`], [`Grant`] and their parts, plus the common types the LCM interface shares
//! with it ([`VimConnectionInfo`], [`ResourceHandle`], [`ExtVirtualLinkData`],
//! [`ExtManagedVirtualLinkData`], [`Link`], [`KeyValuePairs`]).
//!
//! Attribute names are exactly those of SOL003 (camelCase, `_links`), enumeration values are
//! UPPER_SNAKE_CASE. Cardinality maps to Rust as follows: `1` is a plain field, `0..1` an
//! `Option` omitted when `None`, `0..N` a `Vec` (or map) omitted when empty.
//!
//! # Deserialization policy
//!
//! * **Mandatory attributes are always serialized.** A value built in Rust and serialized is a
//!   complete SOL003 object as long as its mandatory strings are filled in; [`GrantRequest::validate`]
//!   and [`Grant::validate`] say whether they are.
//! * **Requests are strict.** [`GrantRequest`] and everything it carries
//!   ([`ResourceDefinition`], [`PlacementConstraint`], [`ConstraintResourceRef`],
//!   [`VimConstraint`]), [`VimConnectionInfo`], [`ZoneInfo`], [`GrantInfo`] and the external
//!   link data reject a body missing a mandatory attribute, with serde's
//!   ``missing field `name` `` error. Unknown enumeration values are rejected naming the value
//!   and the accepted ones.
//! * **Grants are lenient.** Tacker's fixtures quote grants as fragments (only `zones` and
//!   `addResources`), so the mandatory `id`, `vnfInstanceId` and `vnfLcmOpOccId` of a
//!   [`Grant`] default to the empty string; [`Grant::validate`] reports them.
//! * **`_links` is lenient everywhere.** Links are derived from the server's base URL and are
//!   often absent from stored or quoted objects; they default to an empty map and the
//!   `validate` methods report the mandatory link names that are missing.
//! * [`ResourceHandle::resource_id`] (mandatory) defaults to the empty string because Tacker
//!   quotes `computeResource: {}`; `validate` reports it.
//! * Unknown attributes are ignored (Tacker adds its own, such as `metadata` in places).
//!
//! `accessInfo` carries credentials: [`AccessInfo`]'s `Debug` redacts every member whose name
//! looks like a secret (password, secret, token, key, credential), at any depth.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Location};
use crate::id::{GrantId, OpOccId, VduId, VnfInstanceId, ZoneId};

/// SOL013 `KeyValuePairs`: a JSON object of arbitrary members.
pub type KeyValuePairs = serde_json::Map<String, serde_json::Value>;

/// SOL013 `Link`: a hyperlink to a related resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// `href` (1): the URI of the referenced resource.
    pub href: String,
}

impl Link {
    /// A link to `href`.
    pub fn new(href: impl Into<String>) -> Self {
        Self { href: href.into() }
    }
}

/// A `_links` object: link names (`self`, `vnfInstance`, `vnfLcmOpOcc`, ...) to links.
pub type Links = BTreeMap<String, Link>;

// ---------------------------------------------------------------------------------------------
// validation helpers (shared with `lcm`)

/// `prefix.attr`, or `attr` when `prefix` is empty.
pub(crate) fn path(prefix: &str, attr: &str) -> String {
    if prefix.is_empty() {
        attr.to_owned()
    } else {
        format!("{prefix}.{attr}")
    }
}

/// `prefix[index]`.
pub(crate) fn index(prefix: &str, attr: &str, i: usize) -> String {
    format!("{}[{i}]", path(prefix, attr))
}

/// An error at the field path `at` saying that the mandatory attribute of `object` is missing.
pub(crate) fn missing(at: String, object: &str) -> Error {
    let attr = at.rsplit('.').next().unwrap_or(&at).to_owned();
    Error::invalid(
        Location::default().with_field(at),
        format!("missing or empty mandatory attribute `{attr}` of SOL003 {object}"),
    )
}

/// Fails with [`missing`] when `value` is empty.
pub(crate) fn require(value: &str, prefix: &str, attr: &str, object: &str) -> Result<(), Error> {
    if value.is_empty() {
        Err(missing(path(prefix, attr), object))
    } else {
        Ok(())
    }
}

/// Fails when one of `names` is not a key of `links`.
pub(crate) fn require_links(
    links: &Links,
    names: &[&str],
    prefix: &str,
    object: &str,
) -> Result<(), Error> {
    for name in names {
        if !links.contains_key(*name) {
            return Err(Error::invalid(
                Location::default().with_field(path(&path(prefix, "_links"), name)),
                format!(
                    "missing mandatory link `{name}` of SOL003 {object}; expected {}",
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// enumerations

/// SOL003 `GrantedLcmOperationType`: the LCM operation a grant is requested for. Unlike
/// [`crate::lcm::LcmOperationType`] it has no `MODIFY_INFO` (modifying VNF information needs no
/// grant), so a grant request for it cannot even be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GrantedLcmOperationType {
    /// `INSTANTIATE`
    Instantiate,
    /// `SCALE`
    Scale,
    /// `SCALE_TO_LEVEL`
    ScaleToLevel,
    /// `CHANGE_FLAVOUR`
    ChangeFlavour,
    /// `TERMINATE`
    Terminate,
    /// `HEAL`
    Heal,
    /// `OPERATE`
    Operate,
    /// `CHANGE_EXT_CONN`
    ChangeExtConn,
    /// `CREATE_SNAPSHOT`
    CreateSnapshot,
    /// `REVERT_TO_SNAPSHOT`
    RevertToSnapshot,
    /// `CHANGE_VNFPKG`
    #[serde(rename = "CHANGE_VNFPKG")]
    ChangeVnfpkg,
}

/// `ResourceDefinition.type`: the kind of virtualised resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ResourceType {
    /// `COMPUTE`
    #[serde(rename = "COMPUTE")]
    Compute,
    /// `VL`
    #[serde(rename = "VL")]
    Vl,
    /// `STORAGE`
    #[serde(rename = "STORAGE")]
    Storage,
    /// `LINKPORT`
    #[serde(rename = "LINKPORT")]
    Linkport,
}

/// `PlacementConstraint.affinityOrAntiAffinity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AffinityOrAntiAffinity {
    /// `AFFINITY`: the resources go to the same scope instance.
    Affinity,
    /// `ANTI_AFFINITY`: the resources go to different scope instances.
    AntiAffinity,
}

/// `PlacementConstraint.scope`: where affinity is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConstraintScope {
    /// `NFVI_POP`
    NfviPop,
    /// `ZONE`: an availability zone.
    Zone,
    /// `ZONE_GROUP`
    ZoneGroup,
    /// `NFVI_NODE`: a compute host.
    NfviNode,
    /// `CIS_NODE`: a container infrastructure node.
    CisNode,
}

/// `ConstraintResourceRef.idType`: what `resourceId` identifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConstraintIdType {
    /// `RES_MGMT`: an existing resource, identified by the VIM.
    ResMgmt,
    /// `GRANT`: a `ResourceDefinition.id` of the same grant request.
    Grant,
}

// ---------------------------------------------------------------------------------------------
// common types

/// SOL003 `ResourceHandle` (clause 4.4.1.7): a resource managed by a VIM.
///
/// `resourceId` is mandatory but defaults to the empty string, because Tacker quotes
/// `computeResource: {}`; [`ResourceHandle::validate`] reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceHandle {
    /// `vimConnectionId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
    /// `resourceId` (1): the identifier in the VIM.
    #[serde(default)]
    pub resource_id: String,
    /// `vimLevelResourceType` (0..1), e.g. `OS::Nova::Server` or `Deployment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_level_resource_type: Option<String>,
}

impl ResourceHandle {
    /// A handle on `resource_id`.
    pub fn new(resource_id: impl Into<String>) -> Self {
        Self {
            resource_id: resource_id.into(),
            ..Self::default()
        }
    }

    /// The same handle with a `vimConnectionId`.
    pub fn with_vim_connection_id(mut self, id: impl Into<String>) -> Self {
        self.vim_connection_id = Some(id.into());
        self
    }

    /// The same handle with a `vimLevelResourceType`.
    pub fn with_vim_level_resource_type(mut self, t: impl Into<String>) -> Self {
        self.vim_level_resource_type = Some(t.into());
        self
    }

    /// Reports a missing `resourceId`.
    ///
    /// # Errors
    /// [`Error::Invalid`] at the field path `resourceId`.
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_at("")
    }

    pub(crate) fn validate_at(&self, prefix: &str) -> Result<(), Error> {
        require(&self.resource_id, prefix, "resourceId", "ResourceHandle")
    }
}

/// The `accessInfo` of a [`VimConnectionInfo`]: credentials and other access parameters.
///
/// Serialized as a plain JSON object. Its `Debug` output replaces the value of every member
/// whose name contains `password`, `secret`, `token`, `key` or `credential`
/// (case-insensitive), at any depth, with `"<redacted>"`.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AccessInfo(pub KeyValuePairs);

impl AccessInfo {
    /// The member `key`, if present.
    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.get(key)
    }

    /// The member `key` as a string, if present and a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(serde_json::Value::as_str)
    }

    /// The members.
    pub fn as_map(&self) -> &KeyValuePairs {
        &self.0
    }

    /// Whether the member name `key` is treated as a secret by `Debug`.
    pub fn is_secret_name(key: &str) -> bool {
        let k = key.to_ascii_lowercase();
        ["password", "secret", "token", "key", "credential"]
            .iter()
            .any(|s| k.contains(s))
    }

    fn redacted(value: &serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(map) => serde_json::Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let v = if Self::is_secret_name(k) {
                            serde_json::Value::String("<redacted>".to_owned())
                        } else {
                            Self::redacted(v)
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(Self::redacted).collect())
            }
            other => other.clone(),
        }
    }
}

impl From<KeyValuePairs> for AccessInfo {
    fn from(map: KeyValuePairs) -> Self {
        Self(map)
    }
}

impl std::fmt::Debug for AccessInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = Self::redacted(&serde_json::Value::Object(self.0.clone()));
        f.debug_tuple("AccessInfo").field(&shown).finish()
    }
}

/// SOL003 `VimConnectionInfo` (clause 4.4.1.6): how to reach a VIM.
///
/// In SOL003 v3.3.1 the VIM connections of an object are a map from a connection id to this
/// structure (`vimConnectionInfo: {"vim1": {...}}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VimConnectionInfo {
    /// `vimId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_id: Option<String>,
    /// `vimType` (1), e.g. `ETSINFV.OPENSTACK_KEYSTONE.V_3`.
    pub vim_type: String,
    /// `interfaceInfo` (0..1), e.g. `{"endpoint": "http://.../identity"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_info: Option<KeyValuePairs>,
    /// `accessInfo` (0..1): credentials; redacted in `Debug`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_info: Option<AccessInfo>,
    /// `extra` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<KeyValuePairs>,
}

impl VimConnectionInfo {
    /// A connection to a VIM of type `vim_type`.
    pub fn new(vim_type: impl Into<String>) -> Self {
        Self {
            vim_type: vim_type.into(),
            ..Self::default()
        }
    }

    /// Reports an empty `vimType`.
    ///
    /// # Errors
    /// [`Error::Invalid`] at the field path `vimType`.
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_at("")
    }

    pub(crate) fn validate_at(&self, prefix: &str) -> Result<(), Error> {
        require(&self.vim_type, prefix, "vimType", "VimConnectionInfo")
    }
}

/// Validates every entry of a `vimConnectionInfo` map.
pub(crate) fn validate_vim_connections(
    map: &BTreeMap<String, VimConnectionInfo>,
    prefix: &str,
) -> Result<(), Error> {
    let at = path(prefix, "vimConnectionInfo");
    for (k, v) in map {
        v.validate_at(&path(&at, k))?;
    }
    Ok(())
}

/// SOL003 `VnfExtCpData` (clause 4.4.1.10): an external CP of the VNF and its configurations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfExtCpData {
    /// `cpdId` (1): the external CPD in the VNFD.
    pub cpd_id: String,
    /// `cpConfig` (0..N): map from a configuration id to its `VnfExtCpConfig`, kept as JSON.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub cp_config: KeyValuePairs,
}

/// SOL003 `ExtVirtualLinkData` (clause 4.4.1.11): an external VL to connect the VNF to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtVirtualLinkData {
    /// `id` (1)
    pub id: String,
    /// `vimConnectionId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
    /// `resourceId` (1): the network in the VIM.
    pub resource_id: String,
    /// `extCps` (1..N)
    pub ext_cps: Vec<VnfExtCpData>,
    /// `extLinkPorts` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_link_ports: Vec<serde_json::Value>,
}

/// SOL003 `ExtManagedVirtualLinkData` (clause 4.4.1.12): an externally managed internal VL.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtManagedVirtualLinkData {
    /// `id` (1)
    pub id: String,
    /// `vnfVirtualLinkDescId` (1)
    pub vnf_virtual_link_desc_id: String,
    /// `vnfdId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfd_id: Option<String>,
    /// `vimConnectionId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
    /// `resourceId` (1)
    pub resource_id: String,
    /// `vnfLinkPort` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnf_link_port: Vec<serde_json::Value>,
    /// `extManagedMultisiteVirtualLinkId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext_managed_multisite_virtual_link_id: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// grant request

/// SOL003 `ResourceDefinition` (clause 9.5.3.2): a resource the operation adds, removes,
/// updates or uses temporarily.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDefinition {
    /// `id` (1): local to the grant request; `GrantInfo.resourceDefinitionId` refers to it.
    pub id: String,
    /// `type` (1)
    #[serde(rename = "type")]
    pub type_: ResourceType,
    /// `vduId` (0..1): the VDU, for `COMPUTE` and `STORAGE` resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vdu_id: Option<VduId>,
    /// `vnfdId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfd_id: Option<String>,
    /// `resourceTemplateId` (1): the VirtualComputeDesc, VnfVirtualLinkDesc, VnfExtCpd or
    /// VirtualStorageDesc in the VNFD.
    pub resource_template_id: String,
    /// `resource` (0..1): the existing resource, for removed, updated or temporary resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceHandle>,
    /// `snapshotResDef` (0..1), kept as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_res_def: Option<serde_json::Value>,
}

impl ResourceDefinition {
    /// A resource definition `id` of `type_` from the VNFD template `resource_template_id`.
    pub fn new(
        id: impl Into<String>,
        type_: ResourceType,
        resource_template_id: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            type_,
            vdu_id: None,
            vnfd_id: None,
            resource_template_id: resource_template_id.into(),
            resource: None,
            snapshot_res_def: None,
        }
    }

    /// The same definition with a `vduId`.
    pub fn with_vdu_id(mut self, vdu: impl Into<VduId>) -> Self {
        self.vdu_id = Some(vdu.into());
        self
    }

    /// The same definition with an existing `resource`.
    pub fn with_resource(mut self, resource: ResourceHandle) -> Self {
        self.resource = Some(resource);
        self
    }

    fn validate_at(&self, prefix: &str) -> Result<(), Error> {
        require(&self.id, prefix, "id", "ResourceDefinition")?;
        require(
            &self.resource_template_id,
            prefix,
            "resourceTemplateId",
            "ResourceDefinition",
        )?;
        if let Some(r) = &self.resource {
            r.validate_at(&path(prefix, "resource"))?;
        }
        Ok(())
    }
}

/// SOL003 `ConstraintResourceRef` (clause 9.5.3.7): a resource a constraint applies to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConstraintResourceRef {
    /// `idType` (1)
    pub id_type: ConstraintIdType,
    /// `resourceId` (1): a `ResourceDefinition.id` (`GRANT`) or a VIM resource id (`RES_MGMT`).
    pub resource_id: String,
    /// `vimConnectionId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
}

impl ConstraintResourceRef {
    /// A reference to the resource definition `id` of the same grant request (`GRANT`).
    pub fn grant(id: impl Into<String>) -> Self {
        Self {
            id_type: ConstraintIdType::Grant,
            resource_id: id.into(),
            vim_connection_id: None,
            resource_provider_id: None,
        }
    }

    /// A reference to the existing VIM resource `id` (`RES_MGMT`).
    pub fn res_mgmt(id: impl Into<String>) -> Self {
        Self {
            id_type: ConstraintIdType::ResMgmt,
            ..Self::grant(id)
        }
    }

    /// The same reference with a `vimConnectionId`.
    pub fn with_vim_connection_id(mut self, id: impl Into<String>) -> Self {
        self.vim_connection_id = Some(id.into());
        self
    }

    fn validate_at(&self, prefix: &str) -> Result<(), Error> {
        require(
            &self.resource_id,
            prefix,
            "resourceId",
            "ConstraintResourceRef",
        )
    }
}

/// Checks the `2..N` cardinality of a constraint's `resource` and each reference.
fn validate_refs(refs: &[ConstraintResourceRef], prefix: &str, object: &str) -> Result<(), Error> {
    if refs.len() < 2 {
        return Err(Error::invalid(
            Location::default().with_field(path(prefix, "resource")),
            format!(
                "SOL003 {object} references {} resource(s); expected at least 2",
                refs.len()
            ),
        ));
    }
    for (i, r) in refs.iter().enumerate() {
        r.validate_at(&index(prefix, "resource", i))?;
    }
    Ok(())
}

/// SOL003 `PlacementConstraint` (clause 9.5.3.6): affinity or anti-affinity between resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementConstraint {
    /// `affinityOrAntiAffinity` (1)
    pub affinity_or_anti_affinity: AffinityOrAntiAffinity,
    /// `scope` (1)
    pub scope: ConstraintScope,
    /// `resource` (2..N)
    pub resource: Vec<ConstraintResourceRef>,
    /// `fallbackBestEffort` (0..1): absent means `false`; see
    /// [`PlacementConstraint::is_fallback_best_effort`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_best_effort: Option<bool>,
}

impl PlacementConstraint {
    /// A constraint of `kind` in `scope` over `resource`.
    pub fn new(
        kind: AffinityOrAntiAffinity,
        scope: ConstraintScope,
        resource: Vec<ConstraintResourceRef>,
    ) -> Self {
        Self {
            affinity_or_anti_affinity: kind,
            scope,
            resource,
            fallback_best_effort: None,
        }
    }

    /// The same constraint with `fallbackBestEffort` set.
    pub fn with_fallback_best_effort(mut self, yes: bool) -> Self {
        self.fallback_best_effort = Some(yes);
        self
    }

    /// Whether the NFVO may relax this constraint when it cannot be met: `fallbackBestEffort`,
    /// `false` when absent (SOL003 9.5.3.6).
    pub fn is_fallback_best_effort(&self) -> bool {
        self.fallback_best_effort.unwrap_or(false)
    }

    /// Whether this is an `AFFINITY` constraint.
    pub fn is_affinity(&self) -> bool {
        self.affinity_or_anti_affinity == AffinityOrAntiAffinity::Affinity
    }

    /// Checks the `2..N` cardinality of `resource` and that every reference names a resource.
    ///
    /// # Errors
    /// [`Error::Invalid`] at the field path `resource` or `resource[i].resourceId`.
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_at("")
    }

    fn validate_at(&self, prefix: &str) -> Result<(), Error> {
        validate_refs(&self.resource, prefix, "PlacementConstraint")
    }
}

/// SOL003 `VimConstraint` (clause 9.5.3.8): resources that must share a VIM (and optionally a
/// resource group).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VimConstraint {
    /// `sameResourceGroup` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_resource_group: Option<bool>,
    /// `resource` (2..N)
    pub resource: Vec<ConstraintResourceRef>,
}

/// SOL003 `GrantRequest` (clause 9.5.2.2): the VNFM asks the NFVO to grant an LCM operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantRequest {
    /// `vnfInstanceId` (1)
    pub vnf_instance_id: VnfInstanceId,
    /// `vnfLcmOpOccId` (1)
    pub vnf_lcm_op_occ_id: OpOccId,
    /// `vnfdId` (1)
    pub vnfd_id: String,
    /// `dstVnfdId` (0..1): the target VNFD of a `CHANGE_VNFPKG`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_vnfd_id: Option<String>,
    /// `flavourId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavour_id: Option<String>,
    /// `operation` (1)
    pub operation: GrantedLcmOperationType,
    /// `isAutomaticInvocation` (1)
    pub is_automatic_invocation: bool,
    /// `instantiationLevelId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiation_level_id: Option<String>,
    /// `addResources` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_resources: Vec<ResourceDefinition>,
    /// `tempResources` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub temp_resources: Vec<ResourceDefinition>,
    /// `removeResources` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_resources: Vec<ResourceDefinition>,
    /// `updateResources` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub update_resources: Vec<ResourceDefinition>,
    /// `placementConstraints` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placement_constraints: Vec<PlacementConstraint>,
    /// `vimConstraints` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vim_constraints: Vec<VimConstraint>,
    /// `additionalParams` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
    /// `_links` (1): `vnfLcmOpOcc` and `vnfInstance`; empty when absent (see the module docs).
    #[serde(rename = "_links", default)]
    pub links: Links,
}

impl GrantRequest {
    /// A request for `operation` on `vnf_instance_id` within the operation occurrence
    /// `vnf_lcm_op_occ_id`, with no resources, constraints or links.
    pub fn new(
        vnf_instance_id: impl Into<VnfInstanceId>,
        vnf_lcm_op_occ_id: impl Into<OpOccId>,
        vnfd_id: impl Into<String>,
        operation: GrantedLcmOperationType,
    ) -> Self {
        Self {
            vnf_instance_id: vnf_instance_id.into(),
            vnf_lcm_op_occ_id: vnf_lcm_op_occ_id.into(),
            vnfd_id: vnfd_id.into(),
            dst_vnfd_id: None,
            flavour_id: None,
            operation,
            is_automatic_invocation: false,
            instantiation_level_id: None,
            add_resources: Vec::new(),
            temp_resources: Vec::new(),
            remove_resources: Vec::new(),
            update_resources: Vec::new(),
            placement_constraints: Vec::new(),
            vim_constraints: Vec::new(),
            additional_params: None,
            links: Links::new(),
        }
    }

    /// The same request with `flavourId`.
    pub fn with_flavour_id(mut self, flavour: impl Into<String>) -> Self {
        self.flavour_id = Some(flavour.into());
        self
    }

    /// The same request with one more resource in `addResources`.
    pub fn with_add_resource(mut self, r: ResourceDefinition) -> Self {
        self.add_resources.push(r);
        self
    }

    /// The same request with one more placement constraint.
    pub fn with_placement_constraint(mut self, c: PlacementConstraint) -> Self {
        self.placement_constraints.push(c);
        self
    }

    /// The same request with the link `name` (`vnfLcmOpOcc`, `vnfInstance`) set to `href`.
    pub fn with_link(mut self, name: impl Into<String>, href: impl Into<String>) -> Self {
        self.links.insert(name.into(), Link::new(href));
        self
    }

    /// Reports what serde accepts but SOL003 forbids: empty mandatory identifiers, missing
    /// `_links` entries, constraints over fewer than two resources, `GRANT` references to
    /// resource definitions the request does not contain.
    ///
    /// # Errors
    /// [`Error::Invalid`] with the field path (such as `addResources[1].resourceTemplateId`
    /// or `placementConstraints[0].resource[2].resourceId`) and what was expected.
    pub fn validate(&self) -> Result<(), Error> {
        const OBJ: &str = "GrantRequest";
        require(self.vnf_instance_id.as_str(), "", "vnfInstanceId", OBJ)?;
        require(self.vnf_lcm_op_occ_id.as_str(), "", "vnfLcmOpOccId", OBJ)?;
        require(&self.vnfd_id, "", "vnfdId", OBJ)?;
        let lists = [
            ("addResources", &self.add_resources),
            ("tempResources", &self.temp_resources),
            ("removeResources", &self.remove_resources),
            ("updateResources", &self.update_resources),
        ];
        for (name, list) in lists {
            for (i, r) in list.iter().enumerate() {
                r.validate_at(&index("", name, i))?;
            }
        }
        for (i, c) in self.placement_constraints.iter().enumerate() {
            let at = index("", "placementConstraints", i);
            c.validate_at(&at)?;
            self.check_grant_refs(&c.resource, &at)?;
        }
        for (i, c) in self.vim_constraints.iter().enumerate() {
            let at = index("", "vimConstraints", i);
            validate_refs(&c.resource, &at, "VimConstraint")?;
            self.check_grant_refs(&c.resource, &at)?;
        }
        require_links(&self.links, &["vnfLcmOpOcc", "vnfInstance"], "", OBJ)
    }

    /// Every resource definition of the request, whatever its list.
    pub fn resource_definitions(&self) -> impl Iterator<Item = &ResourceDefinition> {
        self.add_resources
            .iter()
            .chain(&self.temp_resources)
            .chain(&self.remove_resources)
            .chain(&self.update_resources)
    }

    fn check_grant_refs(&self, refs: &[ConstraintResourceRef], at: &str) -> Result<(), Error> {
        for (i, r) in refs.iter().enumerate() {
            if r.id_type == ConstraintIdType::Grant
                && !self.resource_definitions().any(|d| d.id == r.resource_id)
            {
                return Err(Error::invalid(
                    Location::default().with_field(path(&index(at, "resource", i), "resourceId")),
                    format!(
                        "GRANT reference `{}` names no resource definition of this grant request; \
                         expected the id of an entry of addResources, tempResources, \
                         removeResources or updateResources",
                        r.resource_id
                    ),
                ));
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// grant

/// SOL003 `ZoneInfo` (clause 9.5.3.3): a resource zone the NFVO grants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneInfo {
    /// `id` (1): local to the grant; `GrantInfo.zoneId` refers to it.
    pub id: String,
    /// `zoneId` (1): the zone as the VIM names it (a Nova availability zone).
    pub zone_id: ZoneId,
    /// `vimConnectionId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
}

/// SOL003 `ZoneGroupInfo` (clause 9.5.3.4): zones among which the VNFM may choose.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneGroupInfo {
    /// `zoneId` (1..N): references to `ZoneInfo.id` of the same grant.
    pub zone_id: Vec<String>,
}

/// SOL003 `GrantInfo` (clause 9.5.3.5): what the NFVO granted for one resource definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantInfo {
    /// `resourceDefinitionId` (1): the `ResourceDefinition.id` of the grant request.
    pub resource_definition_id: String,
    /// `reservationId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<String>,
    /// `vimConnectionId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
    /// `zoneId` (0..1): a reference to `ZoneInfo.id` of the same grant (not a zone name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
    /// `resourceGroupId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group_id: Option<String>,
}

impl GrantInfo {
    /// A grant for the resource definition `id`, with nothing else set.
    pub fn new(resource_definition_id: impl Into<String>) -> Self {
        Self {
            resource_definition_id: resource_definition_id.into(),
            reservation_id: None,
            vim_connection_id: None,
            resource_provider_id: None,
            zone_id: None,
            resource_group_id: None,
        }
    }

    /// The same grant placed in the `ZoneInfo` whose `id` is `zone_info_id`.
    pub fn with_zone_id(mut self, zone_info_id: impl Into<String>) -> Self {
        self.zone_id = Some(zone_info_id.into());
        self
    }

    /// The same grant with a `reservationId`.
    pub fn with_reservation_id(mut self, id: impl Into<String>) -> Self {
        self.reservation_id = Some(id.into());
        self
    }
}

/// SOL003 `VimComputeResourceFlavour` (clause 9.5.3.9): the VIM flavour for a compute
/// descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VimComputeResourceFlavour {
    /// `vimConnectionId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
    /// `vnfdVirtualComputeDescId` (1)
    pub vnfd_virtual_compute_desc_id: String,
    /// `vimFlavourId` (1)
    pub vim_flavour_id: String,
}

/// SOL003 `VimSoftwareImage` (clause 9.5.3.10): the VIM image for a software image of the
/// VNFD.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VimSoftwareImage {
    /// `vimConnectionId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_id: Option<String>,
    /// `resourceProviderId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_id: Option<String>,
    /// `vnfdSoftwareImageId` (1)
    pub vnfd_software_image_id: String,
    /// `vimSoftwareImageId` (1)
    pub vim_software_image_id: String,
}

/// `Grant.vimAssets`: flavours, images and snapshots to use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VimAssets {
    /// `computeResourceFlavours` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compute_resource_flavours: Vec<VimComputeResourceFlavour>,
    /// `softwareImages` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub software_images: Vec<VimSoftwareImage>,
    /// `snapshotResources` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshot_resources: Vec<serde_json::Value>,
}

/// SOL003 `Grant` (clause 9.5.2.3): the NFVO's answer to a [`GrantRequest`].
///
/// Lenient: `id`, `vnfInstanceId` and `vnfLcmOpOccId` default to empty (see the module docs);
/// [`Grant::validate`] reports them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// `id` (1)
    #[serde(default)]
    pub id: GrantId,
    /// `vnfInstanceId` (1)
    #[serde(default)]
    pub vnf_instance_id: VnfInstanceId,
    /// `vnfLcmOpOccId` (1)
    #[serde(default)]
    pub vnf_lcm_op_occ_id: OpOccId,
    /// `vimConnectionInfo` (0..N): connection id to VIM connection.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vim_connection_info: BTreeMap<String, VimConnectionInfo>,
    /// `zones` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<ZoneInfo>,
    /// `zoneGroups` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zone_groups: Vec<ZoneGroupInfo>,
    /// `addResources` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_resources: Vec<GrantInfo>,
    /// `tempResources` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub temp_resources: Vec<GrantInfo>,
    /// `removeResources` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_resources: Vec<GrantInfo>,
    /// `updateResources` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub update_resources: Vec<GrantInfo>,
    /// `vimAssets` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_assets: Option<VimAssets>,
    /// `extVirtualLinks` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_virtual_links: Vec<ExtVirtualLinkData>,
    /// `extManagedVirtualLinks` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_managed_virtual_links: Vec<ExtManagedVirtualLinkData>,
    /// `additionalParams` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
    /// `_links` (1): `self`, `vnfLcmOpOcc` and `vnfInstance`.
    #[serde(rename = "_links", default)]
    pub links: Links,
}

impl Grant {
    /// An empty grant `id` answering `request` (same instance and operation occurrence).
    pub fn for_request(id: impl Into<GrantId>, request: &GrantRequest) -> Self {
        Self {
            id: id.into(),
            vnf_instance_id: request.vnf_instance_id.clone(),
            vnf_lcm_op_occ_id: request.vnf_lcm_op_occ_id.clone(),
            ..Self::default()
        }
    }

    /// The zone name (`ZoneInfo.zoneId`) granted to the resource definition `id`: the
    /// `GrantInfo` of `addResources` (then `updateResources`, `tempResources`) for it, through
    /// its `zoneId` reference to `zones`.
    pub fn zone_of(&self, resource_definition_id: &str) -> Option<&ZoneId> {
        let info = self
            .add_resources
            .iter()
            .chain(&self.update_resources)
            .chain(&self.temp_resources)
            .find(|g| g.resource_definition_id == resource_definition_id)?;
        let zone_ref = info.zone_id.as_deref()?;
        self.zones
            .iter()
            .find(|z| z.id == zone_ref)
            .map(|z| &z.zone_id)
    }

    /// Reports empty mandatory identifiers, missing `_links` entries, VIM connections without
    /// `vimType`, and `zoneId` / `zoneGroups` references to a `ZoneInfo.id` that `zones` does
    /// not contain.
    ///
    /// # Errors
    /// [`Error::Invalid`] with the field path (such as `addResources[0].zoneId`) and what was
    /// expected.
    pub fn validate(&self) -> Result<(), Error> {
        const OBJ: &str = "Grant";
        require(self.id.as_str(), "", "id", OBJ)?;
        require(self.vnf_instance_id.as_str(), "", "vnfInstanceId", OBJ)?;
        require(self.vnf_lcm_op_occ_id.as_str(), "", "vnfLcmOpOccId", OBJ)?;
        validate_vim_connections(&self.vim_connection_info, "")?;
        let known = |r: &str| self.zones.iter().any(|z| z.id == r);
        let unknown_zone = |at: String, r: &str| {
            Error::invalid(
                Location::default().with_field(at),
                format!(
                    "zone reference `{r}` names no entry of zones; expected one of [{}]",
                    self.zones
                        .iter()
                        .map(|z| z.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        };
        let lists = [
            ("addResources", &self.add_resources),
            ("tempResources", &self.temp_resources),
            ("removeResources", &self.remove_resources),
            ("updateResources", &self.update_resources),
        ];
        for (name, list) in lists {
            for (i, g) in list.iter().enumerate() {
                let at = index("", name, i);
                require(
                    &g.resource_definition_id,
                    &at,
                    "resourceDefinitionId",
                    "GrantInfo",
                )?;
                if let Some(z) = g.zone_id.as_deref() {
                    if !known(z) {
                        return Err(unknown_zone(path(&at, "zoneId"), z));
                    }
                }
            }
        }
        for (i, group) in self.zone_groups.iter().enumerate() {
            let at = index("", "zoneGroups", i);
            if group.zone_id.is_empty() {
                return Err(missing(path(&at, "zoneId"), "ZoneGroupInfo"));
            }
            for (j, z) in group.zone_id.iter().enumerate() {
                if !known(z) {
                    return Err(unknown_zone(index(&at, "zoneId", j), z));
                }
            }
        }
        require_links(
            &self.links,
            &["self", "vnfLcmOpOcc", "vnfInstance"],
            "",
            OBJ,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::{read_vector, shared_vectors};
    use serde_json::json;

    #[test]
    fn modify_info_is_no_granted_operation() {
        let e = serde_json::from_value::<GrantedLcmOperationType>(json!("MODIFY_INFO"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("MODIFY_INFO"), "{e}");
        let ok: GrantedLcmOperationType = serde_json::from_value(json!("CHANGE_VNFPKG")).unwrap();
        assert_eq!(ok, GrantedLcmOperationType::ChangeVnfpkg);
    }

    fn kv(v: serde_json::Value) -> KeyValuePairs {
        match v {
            serde_json::Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    fn full_request() -> GrantRequest {
        let mut r = GrantRequest::new(
            "c9b4a1d6-inst",
            "5f0e2a7b-opocc",
            "b1bb0ce7-vnfd",
            GrantedLcmOperationType::Scale,
        )
        .with_flavour_id("simple")
        .with_add_resource(
            ResourceDefinition::new("res-new-1", ResourceType::Compute, "VDU1").with_vdu_id("VDU1"),
        )
        .with_placement_constraint(
            PlacementConstraint::new(
                AffinityOrAntiAffinity::AntiAffinity,
                ConstraintScope::Zone,
                vec![
                    ConstraintResourceRef::grant("res-new-1"),
                    ConstraintResourceRef::res_mgmt("srv-0").with_vim_connection_id("vim1"),
                ],
            )
            .with_fallback_best_effort(true),
        )
        .with_link(
            "vnfLcmOpOcc",
            "http://vnfm/vnflcm/v2/vnf_lcm_op_occs/5f0e2a7b-opocc",
        )
        .with_link(
            "vnfInstance",
            "http://vnfm/vnflcm/v2/vnf_instances/c9b4a1d6-inst",
        );
        r.dst_vnfd_id = Some("dst-vnfd".into());
        r.is_automatic_invocation = true;
        r.instantiation_level_id = Some("instantiation_level_1".into());
        r.temp_resources.push(ResourceDefinition::new(
            "tmp-1",
            ResourceType::Storage,
            "VirtualStorage",
        ));
        r.remove_resources.push(
            ResourceDefinition::new("rm-1", ResourceType::Compute, "VDU2")
                .with_vdu_id("VDU2")
                .with_resource(
                    ResourceHandle::new("srv-9")
                        .with_vim_connection_id("vim1")
                        .with_vim_level_resource_type("OS::Nova::Server"),
                ),
        );
        r.update_resources.push(ResourceDefinition {
            vnfd_id: Some("b1bb0ce7-vnfd".into()),
            snapshot_res_def: Some(json!({"vnfSnapshotId": "snap-1"})),
            ..ResourceDefinition::new("up-1", ResourceType::Linkport, "VDU1_CP1")
        });
        r.add_resources.push(ResourceDefinition::new(
            "vl-1",
            ResourceType::Vl,
            "internalVL1",
        ));
        r.vim_constraints.push(VimConstraint {
            same_resource_group: Some(true),
            resource: vec![
                ConstraintResourceRef::grant("res-new-1"),
                ConstraintResourceRef::grant("vl-1"),
            ],
        });
        r.additional_params = Some(kv(
            json!({"lcm-operation-user-data-class": "StandardUserData"}),
        ));
        r
    }

    fn vim() -> VimConnectionInfo {
        VimConnectionInfo {
            vim_id: Some("vim_id_1".into()),
            interface_info: Some(kv(json!({"endpoint": "http://127.0.0.1/identity"}))),
            access_info: Some(AccessInfo(kv(json!({
                "username": "nfv_user",
                "password": "devstack",
                "project": "nfv",
                "oidc": {"client_secret": "s3cr3t", "clientId": "tacker"}
            })))),
            extra: Some(kv(json!({"dummy-key": "dummy-val"}))),
            ..VimConnectionInfo::new("ETSINFV.OPENSTACK_KEYSTONE.V_3")
        }
    }

    fn full_grant() -> Grant {
        let mut g = Grant::for_request("grant-1", &full_request());
        g.vim_connection_info.insert("vim1".into(), vim());
        g.zones = vec![
            ZoneInfo {
                id: "zi-1".into(),
                zone_id: ZoneId::new("az-1"),
                vim_connection_id: Some("vim1".into()),
                resource_provider_id: None,
            },
            ZoneInfo {
                id: "zi-2".into(),
                zone_id: ZoneId::new("az-2"),
                vim_connection_id: None,
                resource_provider_id: Some("rp".into()),
            },
        ];
        g.zone_groups = vec![ZoneGroupInfo {
            zone_id: vec!["zi-1".into(), "zi-2".into()],
        }];
        g.add_resources = vec![GrantInfo::new("res-new-1")
            .with_zone_id("zi-2")
            .with_reservation_id("resv-1")];
        g.temp_resources = vec![GrantInfo::new("tmp-1")];
        g.remove_resources = vec![GrantInfo {
            vim_connection_id: Some("vim1".into()),
            ..GrantInfo::new("rm-1")
        }];
        g.update_resources = vec![GrantInfo {
            resource_group_id: Some("rg".into()),
            resource_provider_id: Some("rp".into()),
            ..GrantInfo::new("up-1").with_zone_id("zi-1")
        }];
        g.vim_assets = Some(VimAssets {
            compute_resource_flavours: vec![VimComputeResourceFlavour {
                vim_connection_id: Some("vim1".into()),
                resource_provider_id: None,
                vnfd_virtual_compute_desc_id: "VDU1".into(),
                vim_flavour_id: "m1.tiny".into(),
            }],
            software_images: vec![VimSoftwareImage {
                vim_connection_id: None,
                resource_provider_id: None,
                vnfd_software_image_id: "VDU1".into(),
                vim_software_image_id: "cirros".into(),
            }],
            snapshot_resources: vec![json!({"vimSnapshotResourceId": "s"})],
        });
        g.ext_virtual_links = vec![ExtVirtualLinkData {
            id: "ext_vl_id_net1".into(),
            vim_connection_id: Some("vim1".into()),
            resource_provider_id: None,
            resource_id: "net1".into(),
            ext_cps: vec![VnfExtCpData {
                cpd_id: "VDU1_CP1".into(),
                cp_config: kv(json!({"VDU1_CP1_1": {"cpProtocolData": []}})),
            }],
            ext_link_ports: vec![json!({"id": "lp1"})],
        }];
        g.ext_managed_virtual_links = vec![ExtManagedVirtualLinkData {
            id: "ext_managed_vl_1".into(),
            vnf_virtual_link_desc_id: "internalVL1".into(),
            vnfd_id: None,
            vim_connection_id: None,
            resource_provider_id: None,
            resource_id: "net_mgmt".into(),
            vnf_link_port: vec![],
            ext_managed_multisite_virtual_link_id: Some("ms".into()),
        }];
        g.additional_params = Some(kv(json!({"a": 1})));
        g.links.insert(
            "self".into(),
            Link::new("http://nfvo/grant/v1/grants/grant-1"),
        );
        g.links
            .insert("vnfLcmOpOcc".into(), Link::new("http://vnfm/op"));
        g.links
            .insert("vnfInstance".into(), Link::new("http://vnfm/inst"));
        g
    }

    #[test]
    fn grant_request_round_trips() {
        let r = full_request();
        assert!(r.validate().is_ok(), "{:?}", r.validate());
        let s = serde_json::to_string(&r).unwrap();
        let back: GrantRequest = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn grant_round_trips_and_resolves_zones() {
        let g = full_grant();
        assert!(g.validate().is_ok(), "{:?}", g.validate());
        let s = serde_json::to_string(&g).unwrap();
        let back: Grant = serde_json::from_str(&s).unwrap();
        assert_eq!(back, g);
        assert_eq!(g.zone_of("res-new-1"), Some(&ZoneId::new("az-2")));
        assert_eq!(g.zone_of("up-1"), Some(&ZoneId::new("az-1")));
        assert_eq!(g.zone_of("tmp-1"), None);
        assert_eq!(g.zone_of("nope"), None);
    }

    #[test]
    fn placement_constraint_and_vim_connection_round_trip() {
        let c = full_request().placement_constraints.remove(0);
        let back: PlacementConstraint =
            serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        let v = vim();
        let back: VimConnectionInfo =
            serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn grant_request_uses_sol003_names() {
        let r: GrantRequest = serde_json::from_value(json!({
            "vnfInstanceId": "i1",
            "vnfLcmOpOccId": "o1",
            "vnfdId": "d1",
            "flavourId": "simple",
            "operation": "SCALE_TO_LEVEL",
            "isAutomaticInvocation": false,
            "addResources": [
                {"id": "r1", "type": "COMPUTE", "vduId": "VDU1", "resourceTemplateId": "VDU1"},
                {"id": "r2", "type": "LINKPORT", "resourceTemplateId": "VDU1_CP1"}
            ],
            "placementConstraints": [{
                "affinityOrAntiAffinity": "ANTI_AFFINITY",
                "scope": "NFVI_NODE",
                "resource": [
                    {"idType": "GRANT", "resourceId": "r1"},
                    {"idType": "RES_MGMT", "resourceId": "srv", "vimConnectionId": "vim1"}
                ]
            }],
            "_links": {
                "vnfLcmOpOcc": {"href": "http://x/op"},
                "vnfInstance": {"href": "http://x/inst"}
            }
        }))
        .unwrap();
        assert_eq!(r.operation, GrantedLcmOperationType::ScaleToLevel);
        assert_eq!(r.add_resources[1].type_, ResourceType::Linkport);
        assert_eq!(r.add_resources[0].vdu_id, Some(VduId::new("VDU1")));
        let c = &r.placement_constraints[0];
        assert_eq!(c.scope, ConstraintScope::NfviNode);
        assert_eq!(c.resource[1].id_type, ConstraintIdType::ResMgmt);
        assert!(r.validate().is_ok());

        // serialized names, including enum values that need explicit renames
        let out = serde_json::to_value(&r).unwrap();
        assert_eq!(out["operation"], "SCALE_TO_LEVEL");
        assert_eq!(out["addResources"][1]["type"], "LINKPORT");
        assert_eq!(out["addResources"][0]["resourceTemplateId"], "VDU1");
        assert_eq!(
            out["placementConstraints"][0]["affinityOrAntiAffinity"],
            "ANTI_AFFINITY"
        );
        assert_eq!(out["_links"]["vnfInstance"]["href"], "http://x/inst");
        assert!(
            out.get("tempResources").is_none(),
            "empty 0..N lists are omitted"
        );
        assert!(
            out.get("dstVnfdId").is_none(),
            "absent 0..1 attributes are omitted"
        );
        assert_eq!(
            out["isAutomaticInvocation"], false,
            "mandatory always serialized"
        );
        for (v, s) in [
            (GrantedLcmOperationType::ChangeVnfpkg, "CHANGE_VNFPKG"),
            (GrantedLcmOperationType::ChangeExtConn, "CHANGE_EXT_CONN"),
            (
                GrantedLcmOperationType::RevertToSnapshot,
                "REVERT_TO_SNAPSHOT",
            ),
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), s);
        }
        for (v, s) in [
            (ConstraintScope::NfviPop, "NFVI_POP"),
            (ConstraintScope::ZoneGroup, "ZONE_GROUP"),
            (ConstraintScope::CisNode, "CIS_NODE"),
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), s);
        }
        assert_eq!(serde_json::to_value(ResourceType::Vl).unwrap(), "VL");
    }

    #[test]
    fn grant_uses_sol003_names() {
        let out = serde_json::to_value(full_grant()).unwrap();
        assert_eq!(out["vnfLcmOpOccId"], "5f0e2a7b-opocc");
        assert_eq!(out["zones"][0]["zoneId"], "az-1");
        assert_eq!(out["zoneGroups"][0]["zoneId"], json!(["zi-1", "zi-2"]));
        assert_eq!(out["addResources"][0]["resourceDefinitionId"], "res-new-1");
        assert_eq!(out["addResources"][0]["reservationId"], "resv-1");
        assert_eq!(
            out["vimAssets"]["computeResourceFlavours"][0]["vimFlavourId"],
            "m1.tiny"
        );
        assert_eq!(
            out["vimConnectionInfo"]["vim1"]["vimType"],
            "ETSINFV.OPENSTACK_KEYSTONE.V_3"
        );
        assert_eq!(
            out["vimConnectionInfo"]["vim1"]["accessInfo"]["password"],
            "devstack"
        );
        assert_eq!(
            out["extManagedVirtualLinks"][0]["vnfVirtualLinkDescId"],
            "internalVL1"
        );
    }

    #[test]
    fn fallback_best_effort_absent_is_false() {
        let c: PlacementConstraint = serde_json::from_str(
            r#"{"affinityOrAntiAffinity": "AFFINITY", "scope": "ZONE",
                "resource": [{"idType": "GRANT", "resourceId": "a"},
                             {"idType": "GRANT", "resourceId": "b"}]}"#,
        )
        .unwrap();
        assert_eq!(c.fallback_best_effort, None);
        assert!(!c.is_fallback_best_effort());
        assert!(c.is_affinity());
        assert!(serde_json::to_value(&c)
            .unwrap()
            .get("fallbackBestEffort")
            .is_none());
        assert!(c
            .clone()
            .with_fallback_best_effort(true)
            .is_fallback_best_effort());
        assert!(!c.with_fallback_best_effort(false).is_fallback_best_effort());
    }

    #[test]
    fn unknown_enum_values_and_missing_attributes_are_named() {
        let e = serde_json::from_str::<PlacementConstraint>(
            r#"{"affinityOrAntiAffinity": "SAME", "scope": "ZONE", "resource": []}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown variant `SAME`"), "{e}");
        assert!(e.contains("AFFINITY") && e.contains("ANTI_AFFINITY"), "{e}");
        let e = serde_json::from_str::<ResourceDefinition>(r#"{"id": "r", "type": "COMPUTE"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `resourceTemplateId`"), "{e}");
        let e = serde_json::from_str::<VimConnectionInfo>(r#"{"vimId": "v"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `vimType`"), "{e}");
    }

    #[test]
    fn access_info_debug_redacts_secrets() {
        let dbg = format!("{:?}", vim());
        assert!(!dbg.contains("devstack"), "{dbg}");
        assert!(!dbg.contains("s3cr3t"), "{dbg}");
        assert!(dbg.contains("<redacted>"), "{dbg}");
        assert!(dbg.contains("nfv_user") && dbg.contains("tacker"), "{dbg}");
        // and through an enclosing grant
        let dbg = format!("{:?}", full_grant());
        assert!(!dbg.contains("devstack"), "{dbg}");
        assert!(AccessInfo::is_secret_name("bearer_token"));
        assert!(AccessInfo::is_secret_name("Password"));
        assert!(!AccessInfo::is_secret_name("username"));
    }

    #[test]
    fn grant_request_validate_reports_paths() {
        let mut r = full_request();
        r.add_resources[0].resource_template_id.clear();
        let e = r.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "addResources[0].resourceTemplateId: missing or empty mandatory attribute \
             `resourceTemplateId` of SOL003 ResourceDefinition"
        );

        let mut r = full_request();
        r.placement_constraints[0].resource.truncate(1);
        let e = r.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "placementConstraints[0].resource: SOL003 PlacementConstraint references 1 \
             resource(s); expected at least 2"
        );

        let mut r = full_request();
        r.placement_constraints[0].resource[0] = ConstraintResourceRef::grant("ghost");
        let e = r.validate().unwrap_err().to_string();
        assert!(
            e.starts_with(
                "placementConstraints[0].resource[0].resourceId: GRANT reference `ghost`"
            ),
            "{e}"
        );

        let mut r = full_request();
        r.remove_resources[0].resource = Some(ResourceHandle::default());
        let e = r.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("removeResources[0].resource.resourceId: "),
            "{e}"
        );

        let mut r = full_request();
        r.links.remove("vnfInstance");
        let e = r.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("_links.vnfInstance: missing mandatory link"),
            "{e}"
        );

        let mut r = full_request();
        r.vnfd_id.clear();
        assert!(r
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("vnfdId: "));
    }

    #[test]
    fn grant_validate_reports_dangling_zone_references() {
        let mut g = full_grant();
        g.add_resources[0].zone_id = Some("zi-9".into());
        let e = g.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "addResources[0].zoneId: zone reference `zi-9` names no entry of zones; \
             expected one of [zi-1, zi-2]"
        );
        let mut g = full_grant();
        g.zone_groups[0].zone_id.push("zz".into());
        assert!(g
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("zoneGroups[0].zoneId[2]: "));
        let mut g = full_grant();
        g.vim_connection_info
            .insert("vim2".into(), VimConnectionInfo::default());
        assert!(g
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("vimConnectionInfo.vim2.vimType: "));
        let g: Grant = serde_json::from_str("{}").unwrap();
        assert!(g.validate().unwrap_err().to_string().starts_with("id: "));
    }

    #[test]
    fn tacker_placement_constraint_vector_deserializes() {
        let Some(text) = read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/az_reselection/reselection_cases.json",
        ) else {
            return;
        };
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let expect = &doc["grant_placement_constraints"]["scale_out"]["expect"];
        let cs: Vec<PlacementConstraint> = serde_json::from_value(expect.clone()).unwrap();
        assert_eq!(cs.len(), 1);
        let c = &cs[0];
        assert_eq!(
            c.affinity_or_anti_affinity,
            AffinityOrAntiAffinity::AntiAffinity
        );
        assert_eq!(c.scope, ConstraintScope::NfviNode);
        assert!(!c.is_fallback_best_effort());
        assert_eq!(c.resource.len(), 5);
        assert_eq!(c.resource[0].id_type, ConstraintIdType::Grant);
        assert!(c.resource[1..]
            .iter()
            .all(|r| r.id_type == ConstraintIdType::ResMgmt
                && r.vim_connection_id.as_deref() == Some("vim1")));
        assert!(c.validate().is_ok());
        // and back to the same JSON
        assert_eq!(&serde_json::to_value(&cs).unwrap(), expect);
    }

    #[test]
    fn tacker_vim_connection_info_vector_deserializes() {
        let Some(text) = read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/az_reselection/vim_connection_info_example.json",
        ) else {
            return;
        };
        let v: VimConnectionInfo = serde_json::from_str(&text).unwrap();
        assert_eq!(v.vim_type, "ETSINFV.OPENSTACK_KEYSTONE.V_3");
        assert_eq!(v.vim_id.as_deref(), Some("vim_id_1"));
        let access = v.access_info.as_ref().unwrap();
        assert_eq!(access.str("projectDomain"), Some("Default"));
        assert!(v.validate().is_ok());
        assert!(!format!("{v:?}").contains("devstack"));
        let original: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(&v).unwrap(), original);
    }

    #[test]
    fn tacker_grant_fragment_from_pod_affinity_vector_deserializes() {
        let Some(dir) = shared_vectors(env!("CARGO_MANIFEST_DIR"), "pod affinity grant") else {
            return;
        };
        // The vectors exist: a missing file is a broken test, not a skip.
        let text =
            std::fs::read_to_string(dir.join("tacker/pod_affinity/label_cases.json")).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut seen = 0;
        for case in doc["cases"].as_array().unwrap() {
            if let Some(grant) = case.get("grant").filter(|g| g.is_object()) {
                let g: Grant = serde_json::from_value(grant.clone()).unwrap();
                let def = &g.add_resources[0].resource_definition_id;
                assert_eq!(g.zone_of(def), Some(&ZoneId::new("az-1")));
                // a fragment: the mandatory id is reported by validate
                assert!(g.validate().unwrap_err().to_string().starts_with("id: "));
                seen += 1;
            }
        }
        assert!(seen > 0);
    }
}
