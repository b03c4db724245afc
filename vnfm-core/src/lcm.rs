//! ETSI NFV-SOL 003 v3.3.1 VNF Lifecycle Management data types (clause 5.5): the VNF instance
//! ([`VnfInstance`], [`InstantiatedVnfInfo`], [`VnfcResourceInfo`], [`VnfcInfo`],
//! [`ScaleInfo`]), the operation occurrence ([`VnfLcmOpOcc`], [`LcmOperationStateType`]) and
//! the request bodies ([`CreateVnfRequest`], [`InstantiateVnfRequest`], [`ScaleVnfRequest`],
//! [`HealVnfRequest`], [`TerminateVnfRequest`], [`VnfInfoModificationRequest`]).
//!
//! Names follow SOL003 exactly (camelCase attributes, UPPER_SNAKE_CASE values, `_links`);
//! `0..1` attributes are `Option`s omitted when `None`, `0..N` ones `Vec`s (or maps) omitted
//! when empty. Times are `chrono::DateTime<Utc>` in RFC 3339. Nested structures that no module
//! interprets yet (`vnfcCpInfo`, `vnfVirtualLinkResourceInfo`, `virtualStorageResourceInfo`,
//! `extVirtualLinkInfo`, `monitoringParameters`, `changedInfo`, ...) are kept as raw JSON so that
//! they round-trip unchanged.
//!
//! # Deserialization policy
//!
//! * **Mandatory attributes are always serialized**, except the two enumerations that
//!   fragments omit (`instantiationState`, `vnfState`), which are `Option`s: `None` only ever
//!   comes from a fragment, and is omitted again on output so that a fragment round-trips as
//!   itself.
//! * **The VNF instance is lenient.** Tacker's fixtures quote instances and their
//!   `instantiatedVnfInfo` as fragments (`{"instantiatedVnfInfo": null}`; `vnfcResourceInfo`
//!   entries with only `vduId` and `metadata`; `computeResource: {}`; `scaleStatus` without
//!   `scaleLevel`; no `_links`). So the mandatory attributes of [`VnfInstance`],
//!   [`InstantiatedVnfInfo`], [`VnfcResourceInfo`] and [`ScaleInfo`] default when absent
//!   (empty string, empty list, `None`, scale level 0) and [`VnfInstance::validate`] /
//!   [`InstantiatedVnfInfo::validate`] report them with a field path such as
//!   `instantiatedVnfInfo.vnfcResourceInfo[0].id`. A missing `scaleLevel` cannot be told from
//!   level 0 and is not reported.
//! * **Operation occurrences and requests are strict.** [`VnfLcmOpOcc`] (produced by this
//!   library, so always complete) and every request body reject a missing mandatory attribute
//!   with serde's ``missing field `name` `` error; `_links` is the one exception and defaults to
//!   empty (links are derived from the server's base URL). Their `validate` methods check what
//!   serde cannot (non-empty identifiers, `numberOfSteps` ≥ 1, mandatory links).
//! * Unknown attributes are ignored everywhere (Tacker's fixtures carry non-SOL003 ones such
//!   as `instantiatedVnfInfo.id`); unknown enumeration values are errors that name the value
//!   and the accepted ones.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Location};
use crate::grant::{
    index, path, require, require_links, validate_vim_connections, ExtManagedVirtualLinkData,
    ExtVirtualLinkData, KeyValuePairs, Links, ResourceHandle, VimConnectionInfo, VnfExtCpData,
};
use crate::id::{GrantId, OpOccId, VduId, VnfInstanceId, ZoneId};
use crate::problem::ProblemDetails;

// ---------------------------------------------------------------------------------------------
// enumerations

/// `VnfInstance.instantiationState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum InstantiationState {
    /// `NOT_INSTANTIATED`
    NotInstantiated,
    /// `INSTANTIATED`
    Instantiated,
}

/// SOL003 `VnfOperationalStateType`: `vnfState` of a VNF, `vnfcState` of a VNFC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum VnfOperationalStateType {
    /// `STARTED`
    Started,
    /// `STOPPED`
    Stopped,
}

/// SOL003 `LcmOperationType`: the operation of a [`VnfLcmOpOcc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LcmOperationType {
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
    /// `MODIFY_INFO`
    ModifyInfo,
    /// `CREATE_SNAPSHOT`
    CreateSnapshot,
    /// `REVERT_TO_SNAPSHOT`
    RevertToSnapshot,
    /// `CHANGE_VNFPKG`
    #[serde(rename = "CHANGE_VNFPKG")]
    ChangeVnfpkg,
}

/// SOL003 `LcmOperationStateType`: the state of a [`VnfLcmOpOcc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LcmOperationStateType {
    /// `STARTING`: waiting for the grant.
    Starting,
    /// `PROCESSING`
    Processing,
    /// `COMPLETED` (terminal)
    Completed,
    /// `FAILED_TEMP`: may be retried, rolled back or failed.
    FailedTemp,
    /// `FAILED` (terminal)
    Failed,
    /// `ROLLING_BACK`
    RollingBack,
    /// `ROLLED_BACK` (terminal)
    RolledBack,
}

/// Displays a SOL003 enum value with the standard's spelling (`FAILED_TEMP`, `SCALE`,
/// `INSTANTIATED`), i.e. its serde name.
macro_rules! display_as_serde {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match serde_json::to_value(self) {
                    Ok(serde_json::Value::String(s)) => f.write_str(&s),
                    _ => write!(f, "{self:?}"),
                }
            }
        }
    )*};
}

display_as_serde!(
    LcmOperationStateType,
    LcmOperationType,
    InstantiationState,
    VnfOperationalStateType
);

impl LcmOperationStateType {
    /// Whether the operation is over for good: `COMPLETED`, `FAILED` or `ROLLED_BACK`.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::RolledBack)
    }
}

/// SOL003 `CancelModeType`: `VnfLcmOpOcc.cancelMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CancelModeType {
    /// `GRACEFUL`
    Graceful,
    /// `FORCEFUL`
    Forceful,
}

/// `TerminateVnfRequest.terminationType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TerminationType {
    /// `FORCEFUL`: shut down immediately.
    Forceful,
    /// `GRACEFUL`: take the VNF out of service first.
    Graceful,
}

/// `ScaleVnfRequest.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ScaleType {
    /// `SCALE_OUT`
    ScaleOut,
    /// `SCALE_IN`
    ScaleIn,
}

/// `AffectedVnfc.changeType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChangeType {
    /// `ADDED`
    Added,
    /// `REMOVED`
    Removed,
    /// `MODIFIED`
    Modified,
    /// `TEMPORARY`
    Temporary,
}

// ---------------------------------------------------------------------------------------------
// VNF instance

/// SOL003 `ScaleInfo` (clause 5.5.3.3): the scale level of one aspect.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleInfo {
    /// `aspectId` (1)
    #[serde(default)]
    pub aspect_id: String,
    /// `vnfdId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfd_id: Option<String>,
    /// `scaleLevel` (1); 0 when absent from a fragment.
    #[serde(default)]
    pub scale_level: u32,
}

/// SOL003 `VnfcResourceInfo` (clause 5.5.3.5): the compute resource of one VNFC.
///
/// Lenient (see the module docs): `id`, `vduId` and `computeResource` default when absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfcResourceInfo {
    /// `id` (1)
    #[serde(default)]
    pub id: String,
    /// `vduId` (1)
    #[serde(default)]
    pub vdu_id: VduId,
    /// `vnfdId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfd_id: Option<String>,
    /// `computeResource` (1)
    #[serde(default)]
    pub compute_resource: ResourceHandle,
    /// `zoneId` (0..1): the zone the VIM placed the compute resource in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<ZoneId>,
    /// `storageResourceIds` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_resource_ids: Vec<String>,
    /// `reservationId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<String>,
    /// `vnfcCpInfo` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnfc_cp_info: Vec<serde_json::Value>,
    /// `metadata` (0..1); Tacker records the zone as `metadata.zone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<KeyValuePairs>,
}

impl VnfcResourceInfo {
    /// The zone of this VNFC: `zoneId`, else the string `metadata.zone` that Tacker records.
    pub fn zone(&self) -> Option<ZoneId> {
        self.zone_id.clone().or_else(|| {
            self.metadata
                .as_ref()?
                .get("zone")?
                .as_str()
                .map(ZoneId::from)
        })
    }

    fn validate_at(&self, prefix: &str) -> Result<(), Error> {
        const OBJ: &str = "VnfcResourceInfo";
        require(&self.id, prefix, "id", OBJ)?;
        require(self.vdu_id.as_str(), prefix, "vduId", OBJ)?;
        self.compute_resource
            .validate_at(&path(prefix, "computeResource"))
    }
}

/// SOL003 `VnfcInfo` (clause 5.5.3.23): information about one VNFC instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfcInfo {
    /// `id` (1)
    pub id: String,
    /// `vduId` (1)
    pub vdu_id: VduId,
    /// `vnfcResourceInfoId` (0..1): the `VnfcResourceInfo.id` of this VNFC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfc_resource_info_id: Option<String>,
    /// `vnfcState` (1)
    pub vnfc_state: VnfOperationalStateType,
    /// `vnfcConfigurableProperties` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfc_configurable_properties: Option<KeyValuePairs>,
}

/// SOL003 `VnfExtCpInfo` (clause 5.5.3.25): an external CP of the VNF.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfExtCpInfo {
    /// `id` (1)
    pub id: String,
    /// `cpdId` (1)
    pub cpd_id: String,
    /// `cpConfigId` (1)
    pub cp_config_id: String,
    /// `vnfdId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfd_id: Option<String>,
    /// `cpProtocolInfo` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cp_protocol_info: Vec<serde_json::Value>,
    /// `extLinkPortId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext_link_port_id: Option<String>,
    /// `metadata` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<KeyValuePairs>,
    /// `associatedVnfcCpId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub associated_vnfc_cp_id: Option<String>,
    /// `associatedVipCpId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub associated_vip_cp_id: Option<String>,
    /// `associatedVnfVirtualLinkId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub associated_vnf_virtual_link_id: Option<String>,
}

/// SOL003 `ExtVirtualLinkInfo` (clause 5.5.3.2): an external virtual link the instance is
/// connected to, with the external CPs on it as the NFVO gave them.
///
/// Lenient as the rest of the module: `resourceHandle` and `currentVnfExtCpData` default when
/// absent (a record written before vnfm filled them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtVirtualLinkInfo {
    /// `id` (1): the `ExtVirtualLinkData.id` it was given with.
    #[serde(default)]
    pub id: String,
    /// `resourceHandle` (1): the network in the VIM (`vimConnectionId`, `resourceProviderId`,
    /// `resourceId`).
    #[serde(default)]
    pub resource_handle: ResourceHandle,
    /// `extLinkPorts` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_link_ports: Vec<serde_json::Value>,
    /// `currentVnfExtCpData` (1..N): the external CPs on the link and their `cpConfig`.
    #[serde(default)]
    pub current_vnf_ext_cp_data: Vec<VnfExtCpData>,
}

impl ExtVirtualLinkInfo {
    /// The record of the link `data` as requested.
    pub fn of(data: &ExtVirtualLinkData) -> Self {
        Self {
            id: data.id.clone(),
            resource_handle: ResourceHandle {
                vim_connection_id: data.vim_connection_id.clone(),
                resource_provider_id: data.resource_provider_id.clone(),
                resource_id: data.resource_id.clone(),
                vim_level_resource_type: None,
            },
            ext_link_ports: data.ext_link_ports.clone(),
            current_vnf_ext_cp_data: data.ext_cps.clone(),
        }
    }

    /// The link as `ExtVirtualLinkData` again (what a later change merges into).
    pub fn to_data(&self) -> ExtVirtualLinkData {
        ExtVirtualLinkData {
            id: self.id.clone(),
            vim_connection_id: self.resource_handle.vim_connection_id.clone(),
            resource_provider_id: self.resource_handle.resource_provider_id.clone(),
            resource_id: self.resource_handle.resource_id.clone(),
            ext_cps: self.current_vnf_ext_cp_data.clone(),
            ext_link_ports: self.ext_link_ports.clone(),
        }
    }
}

/// `VnfInstance.instantiatedVnfInfo` (clause 5.5.2.2): what exists once the VNF is
/// instantiated.
///
/// Lenient (see the module docs): `flavourId`, `vnfState` and `extCpInfo` default when absent;
/// [`InstantiatedVnfInfo::validate`] reports them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstantiatedVnfInfo {
    /// `flavourId` (1)
    #[serde(default)]
    pub flavour_id: String,
    /// `vnfState` (1); `None` only for a fragment that omits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_state: Option<VnfOperationalStateType>,
    /// `scaleStatus` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale_status: Vec<ScaleInfo>,
    /// `maxScaleLevels` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub max_scale_levels: Vec<ScaleInfo>,
    /// `extCpInfo` (1..N)
    #[serde(default)]
    pub ext_cp_info: Vec<VnfExtCpInfo>,
    /// `extVirtualLinkInfo` (0..N): the external virtual links the instance is connected to
    /// (from `InstantiateVnfRequest.extVirtualLinks`, then changed by `CHANGE_EXT_CONN`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_virtual_link_info: Vec<ExtVirtualLinkInfo>,
    /// `extManagedVirtualLinkInfo` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_managed_virtual_link_info: Vec<serde_json::Value>,
    /// `monitoringParameters` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monitoring_parameters: Vec<serde_json::Value>,
    /// `localizationLanguage` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localization_language: Option<String>,
    /// `vnfcResourceInfo` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnfc_resource_info: Vec<VnfcResourceInfo>,
    /// `vnfVirtualLinkResourceInfo` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnf_virtual_link_resource_info: Vec<serde_json::Value>,
    /// `virtualStorageResourceInfo` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtual_storage_resource_info: Vec<serde_json::Value>,
    /// `vnfcInfo` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnfc_info: Vec<VnfcInfo>,
    /// `metadata` (0..1): not SOL003, a Tacker extension kept for compatibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<KeyValuePairs>,
}

impl InstantiatedVnfInfo {
    /// The scale level of `aspect_id` in `scaleStatus`, if listed.
    pub fn scale_level(&self, aspect_id: &str) -> Option<u32> {
        self.scale_status
            .iter()
            .find(|s| s.aspect_id == aspect_id)
            .map(|s| s.scale_level)
    }

    /// The VNFC resources of the VDU `vdu`.
    pub fn vnfcs_of<'a>(&'a self, vdu: &'a str) -> impl Iterator<Item = &'a VnfcResourceInfo> {
        self.vnfc_resource_info
            .iter()
            .filter(move |v| v.vdu_id.as_str() == vdu)
    }

    /// Reports the mandatory attributes a fragment lacks: `flavourId`, `vnfState`, `extCpInfo`
    /// (1..N), and in each `vnfcResourceInfo` entry `id`, `vduId`, `computeResource.resourceId`,
    /// and each `scaleStatus` / `maxScaleLevels` entry's `aspectId`.
    ///
    /// # Errors
    /// [`Error::Invalid`] with the field path, e.g. `vnfcResourceInfo[0].id`.
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_at("")
    }

    fn validate_at(&self, prefix: &str) -> Result<(), Error> {
        const OBJ: &str = "InstantiatedVnfInfo";
        require(&self.flavour_id, prefix, "flavourId", OBJ)?;
        if self.vnf_state.is_none() {
            return Err(crate::grant::missing(path(prefix, "vnfState"), OBJ));
        }
        for (name, list) in [
            ("scaleStatus", &self.scale_status),
            ("maxScaleLevels", &self.max_scale_levels),
        ] {
            for (i, s) in list.iter().enumerate() {
                require(
                    &s.aspect_id,
                    &index(prefix, name, i),
                    "aspectId",
                    "ScaleInfo",
                )?;
            }
        }
        if self.ext_cp_info.is_empty() {
            return Err(Error::invalid(
                Location::default().with_field(path(prefix, "extCpInfo")),
                "SOL003 InstantiatedVnfInfo has no extCpInfo; expected at least 1 external CP",
            ));
        }
        for (i, v) in self.vnfc_resource_info.iter().enumerate() {
            v.validate_at(&index(prefix, "vnfcResourceInfo", i))?;
        }
        Ok(())
    }
}

/// SOL003 `VnfInstance` (clause 5.5.2.2).
///
/// Lenient (see the module docs): every mandatory attribute defaults when absent;
/// [`VnfInstance::validate`] reports them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfInstance {
    /// `id` (1)
    #[serde(default)]
    pub id: VnfInstanceId,
    /// `vnfInstanceName` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_instance_name: Option<String>,
    /// `vnfInstanceDescription` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_instance_description: Option<String>,
    /// `vnfdId` (1)
    #[serde(default)]
    pub vnfd_id: String,
    /// `vnfProvider` (1)
    #[serde(default)]
    pub vnf_provider: String,
    /// `vnfProductName` (1)
    #[serde(default)]
    pub vnf_product_name: String,
    /// `vnfSoftwareVersion` (1)
    #[serde(default)]
    pub vnf_software_version: String,
    /// `vnfdVersion` (1)
    #[serde(default)]
    pub vnfd_version: String,
    /// `vnfConfigurableProperties` (0..1); see [`VnfInstance::is_autoheal_enabled`] and
    /// [`VnfInstance::is_autoscale_enabled`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_configurable_properties: Option<KeyValuePairs>,
    /// `vimConnectionInfo` (0..N): connection id to VIM connection.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vim_connection_info: BTreeMap<String, VimConnectionInfo>,
    /// `instantiationState` (1); `None` only for a fragment that omits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiation_state: Option<InstantiationState>,
    /// `instantiatedVnfInfo` (0..1); JSON `null` reads as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiated_vnf_info: Option<InstantiatedVnfInfo>,
    /// `metadata` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<KeyValuePairs>,
    /// `extensions` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<KeyValuePairs>,
    /// `_links` (1): at least `self`.
    #[serde(rename = "_links", default)]
    pub links: Links,
}

impl VnfInstance {
    /// A `NOT_INSTANTIATED` instance `id` of the VNFD `vnfd_id`, with nothing else set.
    pub fn new(id: impl Into<VnfInstanceId>, vnfd_id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            vnfd_id: vnfd_id.into(),
            instantiation_state: Some(InstantiationState::NotInstantiated),
            ..Self::default()
        }
    }

    /// Whether `instantiationState` is `INSTANTIATED`.
    pub fn is_instantiated(&self) -> bool {
        self.instantiation_state == Some(InstantiationState::Instantiated)
    }

    /// Whether `vnfConfigurableProperties.isAutohealEnabled` is JSON `true` (absent, `false`
    /// or not a boolean: `false`).
    pub fn is_autoheal_enabled(&self) -> bool {
        self.configurable_flag("isAutohealEnabled")
    }

    /// Whether `vnfConfigurableProperties.isAutoscaleEnabled` is JSON `true` (absent, `false`
    /// or not a boolean: `false`).
    pub fn is_autoscale_enabled(&self) -> bool {
        self.configurable_flag("isAutoscaleEnabled")
    }

    fn configurable_flag(&self, name: &str) -> bool {
        self.vnf_configurable_properties
            .as_ref()
            .and_then(|p| p.get(name))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    }

    /// Reports the mandatory attributes a fragment lacks, the `self` link, VIM connections
    /// without `vimType`, and the consistency of `instantiationState` with
    /// `instantiatedVnfInfo` (present exactly when `INSTANTIATED`).
    ///
    /// # Errors
    /// [`Error::Invalid`] with the field path, e.g. `instantiatedVnfInfo.vnfcResourceInfo[0].id`.
    pub fn validate(&self) -> Result<(), Error> {
        const OBJ: &str = "VnfInstance";
        require(self.id.as_str(), "", "id", OBJ)?;
        for (attr, value) in [
            ("vnfdId", &self.vnfd_id),
            ("vnfProvider", &self.vnf_provider),
            ("vnfProductName", &self.vnf_product_name),
            ("vnfSoftwareVersion", &self.vnf_software_version),
            ("vnfdVersion", &self.vnfd_version),
        ] {
            require(value, "", attr, OBJ)?;
        }
        validate_vim_connections(&self.vim_connection_info, "")?;
        let Some(state) = self.instantiation_state else {
            return Err(crate::grant::missing("instantiationState".into(), OBJ));
        };
        match (state, &self.instantiated_vnf_info) {
            (InstantiationState::Instantiated, Some(info)) => {
                info.validate_at("instantiatedVnfInfo")?
            }
            (InstantiationState::Instantiated, None) => {
                return Err(Error::invalid(
                    Location::default().with_field("instantiatedVnfInfo"),
                    "VnfInstance is INSTANTIATED but has no instantiatedVnfInfo; expected it \
                     to be present",
                ))
            }
            (InstantiationState::NotInstantiated, Some(_)) => {
                return Err(Error::invalid(
                    Location::default().with_field("instantiatedVnfInfo"),
                    "VnfInstance is NOT_INSTANTIATED but has an instantiatedVnfInfo; expected \
                     it to be absent",
                ))
            }
            (InstantiationState::NotInstantiated, None) => {}
        }
        require_links(&self.links, &["self"], "", OBJ)
    }
}

// ---------------------------------------------------------------------------------------------
// operation occurrence

/// SOL003 `AffectedVnfc` (clause 5.5.3.13): a VNFC an operation added, removed or changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AffectedVnfc {
    /// `id` (1): the `VnfcResourceInfo.id`.
    pub id: String,
    /// `vduId` (1)
    pub vdu_id: VduId,
    /// `vnfdId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfd_id: Option<String>,
    /// `changeType` (1)
    pub change_type: ChangeType,
    /// `computeResource` (1)
    pub compute_resource: ResourceHandle,
    /// `resourceDefinitionId` (0..1): the grant request's resource definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_definition_id: Option<String>,
    /// `zoneId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<ZoneId>,
    /// `metadata` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<KeyValuePairs>,
    /// `affectedVnfcCpIds` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affected_vnfc_cp_ids: Vec<String>,
    /// `addedStorageResourceIds` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_storage_resource_ids: Vec<String>,
    /// `removedStorageResourceIds` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_storage_resource_ids: Vec<String>,
}

/// `VnfLcmOpOcc.resourceChanges`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceChanges {
    /// `affectedVnfcs` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affected_vnfcs: Vec<AffectedVnfc>,
    /// `affectedVirtualLinks` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affected_virtual_links: Vec<serde_json::Value>,
    /// `affectedExtLinkPorts` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affected_ext_link_ports: Vec<serde_json::Value>,
    /// `affectedVirtualStorages` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affected_virtual_storages: Vec<serde_json::Value>,
}

/// SOL003 `VnfLcmOpOcc` (clause 5.5.2.13): one occurrence of an LCM operation.
///
/// Strict (see the module docs) except `_links`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfLcmOpOcc {
    /// `id` (1)
    pub id: OpOccId,
    /// `operationState` (1)
    pub operation_state: LcmOperationStateType,
    /// `stateEnteredTime` (1)
    pub state_entered_time: DateTime<Utc>,
    /// `startTime` (1)
    pub start_time: DateTime<Utc>,
    /// `vnfInstanceId` (1)
    pub vnf_instance_id: VnfInstanceId,
    /// `grantId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<GrantId>,
    /// `operation` (1)
    pub operation: LcmOperationType,
    /// `isAutomaticInvocation` (1)
    pub is_automatic_invocation: bool,
    /// `operationParams` (0..1): the request body of the operation, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_params: Option<serde_json::Value>,
    /// `isCancelPending` (1)
    pub is_cancel_pending: bool,
    /// `cancelMode` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_mode: Option<CancelModeType>,
    /// `error` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProblemDetails>,
    /// `resourceChanges` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_changes: Option<ResourceChanges>,
    /// `changedInfo` (0..1), kept as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_info: Option<serde_json::Value>,
    /// `changedExtConnectivity` (0..N), kept as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_ext_connectivity: Vec<serde_json::Value>,
    /// `_links` (1): at least `self` and `vnfInstance`.
    #[serde(rename = "_links", default)]
    pub links: Links,
    /// vnfm extension (not in SOL003): every stack create / update of the operation with the
    /// zones it used and how it ended, i.e. the availability-zone reselection trace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// vnfm extension: who runs the operation and until when it is presumed alive
    /// (renewed while it runs; absent once it stopped). An occurrence in `STARTING`,
    /// `PROCESSING` or `ROLLING_BACK` whose lease has expired (or that has none) was
    /// interrupted: any process may declare it `FAILED_TEMP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// vnfm extension: the end-of-operation hooks that ran, with their outcome.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookOutcome>,
    /// vnfm extension: where the operation stands (its plan and progress), saved with every
    /// commit so that retry, rollback and fail continue from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<serde_json::Value>,
    /// vnfm extension: what the operation reports without failing (e.g. a CNF's pods left
    /// `Pending` with the scheduler's reason, a pod anti-affinity on another topology key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The owner of a running operation and the time until which it is presumed alive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// Who runs it (`<program>:<host>:<pid>:<nonce>`).
    pub owner: String,
    /// Until when; renewed while the operation runs.
    pub expires: DateTime<Utc>,
}

impl Lease {
    /// Whether the lease has expired at `now`.
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expires <= now
    }
}

/// The outcome of one end-of-operation hook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookOutcome {
    /// The hook's name.
    pub name: String,
    /// Where it ran (`instantiate_end`, `scale_end`, `heal_end`, `terminate_start`).
    pub point: String,
    /// Whether it succeeded.
    pub succeeded: bool,
    /// What it did, or why it failed.
    pub detail: String,
}

impl VnfLcmOpOcc {
    /// A new occurrence of `operation` on `vnf_instance_id`, `STARTING` at `now`, not
    /// automatic, no cancel pending.
    pub fn new(
        id: impl Into<OpOccId>,
        vnf_instance_id: impl Into<VnfInstanceId>,
        operation: LcmOperationType,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            id: id.into(),
            operation_state: LcmOperationStateType::Starting,
            state_entered_time: now,
            start_time: now,
            vnf_instance_id: vnf_instance_id.into(),
            grant_id: None,
            operation,
            is_automatic_invocation: false,
            operation_params: None,
            is_cancel_pending: false,
            cancel_mode: None,
            error: None,
            resource_changes: None,
            changed_info: None,
            changed_ext_connectivity: Vec::new(),
            links: Links::new(),
            attempts: Vec::new(),
            lease: None,
            hooks: Vec::new(),
            progress: None,
            warnings: Vec::new(),
        }
    }

    /// Whether the operation is running under a live lease at `now`: it is `STARTING`,
    /// `PROCESSING` or `ROLLING_BACK` and its owner renewed the lease recently. Such an
    /// occurrence is left alone by every other process.
    pub fn is_alive(&self, now: DateTime<Utc>) -> bool {
        self.is_running() && self.lease.as_ref().is_some_and(|l| !l.is_expired(now))
    }

    /// Whether the occurrence is `STARTING`, `PROCESSING` or `ROLLING_BACK` (running, or
    /// interrupted without anyone noticing yet).
    pub fn is_running(&self) -> bool {
        matches!(
            self.operation_state,
            LcmOperationStateType::Starting
                | LcmOperationStateType::Processing
                | LcmOperationStateType::RollingBack
        )
    }

    /// The same occurrence marked as automatically invoked (auto-heal, auto-scale).
    pub fn with_automatic_invocation(mut self, yes: bool) -> Self {
        self.is_automatic_invocation = yes;
        self
    }

    /// The same occurrence with `operationParams`.
    pub fn with_operation_params(mut self, params: serde_json::Value) -> Self {
        self.operation_params = Some(params);
        self
    }

    /// Whether the operation state is terminal (see [`LcmOperationStateType::is_terminal`]).
    pub fn is_terminal(&self) -> bool {
        self.operation_state.is_terminal()
    }

    /// Moves to `state` at `now` (sets `operationState` and `stateEnteredTime`).
    pub fn enter(&mut self, state: LcmOperationStateType, now: DateTime<Utc>) {
        self.operation_state = state;
        self.state_entered_time = now;
    }

    /// Reports empty identifiers, missing `self` / `vnfInstance` links, a `stateEnteredTime`
    /// before `startTime`, and an `error` in a state that cannot carry one (`STARTING`,
    /// `PROCESSING`, `COMPLETED`).
    ///
    /// # Errors
    /// [`Error::Invalid`] with the field path and what was expected.
    pub fn validate(&self) -> Result<(), Error> {
        const OBJ: &str = "VnfLcmOpOcc";
        require(self.id.as_str(), "", "id", OBJ)?;
        require(self.vnf_instance_id.as_str(), "", "vnfInstanceId", OBJ)?;
        if self.state_entered_time < self.start_time {
            return Err(Error::invalid(
                Location::default().with_field("stateEnteredTime"),
                format!(
                    "stateEnteredTime {} is before startTime {}; expected a later or equal time",
                    self.state_entered_time.to_rfc3339(),
                    self.start_time.to_rfc3339()
                ),
            ));
        }
        if self.error.is_some()
            && matches!(
                self.operation_state,
                LcmOperationStateType::Starting
                    | LcmOperationStateType::Processing
                    | LcmOperationStateType::Completed
            )
        {
            return Err(Error::invalid(
                Location::default().with_field("error"),
                format!(
                    "an error is set while operationState is {}; expected FAILED_TEMP, FAILED, \
                     ROLLING_BACK or ROLLED_BACK",
                    serde_json::to_value(self.operation_state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                ),
            ));
        }
        if let Some(e) = &self.error {
            e.validate().map_err(|err| match err {
                Error::Invalid { location, message } => Error::invalid(
                    Location::default()
                        .with_field(path("error", location.field.as_deref().unwrap_or_default())),
                    message,
                ),
                other => other,
            })?;
        }
        require_links(&self.links, &["self", "vnfInstance"], "", OBJ)
    }
}

// ---------------------------------------------------------------------------------------------
// requests

/// SOL003 `CreateVnfRequest` (clause 5.5.2.3): body of `POST /vnf_instances`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateVnfRequest {
    /// `vnfdId` (1)
    pub vnfd_id: String,
    /// `vnfInstanceName` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_instance_name: Option<String>,
    /// `vnfInstanceDescription` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_instance_description: Option<String>,
    /// `metadata` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<KeyValuePairs>,
}

impl CreateVnfRequest {
    /// A request for an instance of `vnfd_id`, with no name, description or metadata.
    pub fn new(vnfd_id: impl Into<String>) -> Self {
        Self {
            vnfd_id: vnfd_id.into(),
            vnf_instance_name: None,
            vnf_instance_description: None,
            metadata: None,
        }
    }

    /// Reports an empty `vnfdId`.
    ///
    /// # Errors
    /// [`Error::Invalid`] at the field path `vnfdId`.
    pub fn validate(&self) -> Result<(), Error> {
        require(&self.vnfd_id, "", "vnfdId", "CreateVnfRequest")
    }
}

/// SOL003 `InstantiateVnfRequest` (clause 5.5.2.4): body of `POST .../instantiate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstantiateVnfRequest {
    /// `flavourId` (1)
    pub flavour_id: String,
    /// `instantiationLevelId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiation_level_id: Option<String>,
    /// `extVirtualLinks` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_virtual_links: Vec<ExtVirtualLinkData>,
    /// `extManagedVirtualLinks` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ext_managed_virtual_links: Vec<ExtManagedVirtualLinkData>,
    /// `vimConnectionInfo` (0..N): connection id to VIM connection.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vim_connection_info: BTreeMap<String, VimConnectionInfo>,
    /// `localizationLanguage` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localization_language: Option<String>,
    /// `additionalParams` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
    /// `extensions` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<KeyValuePairs>,
    /// `vnfConfigurableProperties` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_configurable_properties: Option<KeyValuePairs>,
}

impl InstantiateVnfRequest {
    /// A request for the deployment flavour `flavour_id`, with nothing else set.
    pub fn new(flavour_id: impl Into<String>) -> Self {
        Self {
            flavour_id: flavour_id.into(),
            instantiation_level_id: None,
            ext_virtual_links: Vec::new(),
            ext_managed_virtual_links: Vec::new(),
            vim_connection_info: BTreeMap::new(),
            localization_language: None,
            additional_params: None,
            extensions: None,
            vnf_configurable_properties: None,
        }
    }

    /// Reports an empty `flavourId`, external links without `extCps`, and VIM connections
    /// without `vimType`.
    ///
    /// # Errors
    /// [`Error::Invalid`] with the field path, e.g. `extVirtualLinks[0].extCps`.
    pub fn validate(&self) -> Result<(), Error> {
        const OBJ: &str = "InstantiateVnfRequest";
        require(&self.flavour_id, "", "flavourId", OBJ)?;
        for (i, l) in self.ext_virtual_links.iter().enumerate() {
            let at = index("", "extVirtualLinks", i);
            require(&l.id, &at, "id", "ExtVirtualLinkData")?;
            require(&l.resource_id, &at, "resourceId", "ExtVirtualLinkData")?;
            if l.ext_cps.is_empty() {
                return Err(Error::invalid(
                    Location::default().with_field(path(&at, "extCps")),
                    "SOL003 ExtVirtualLinkData has no extCps; expected at least 1",
                ));
            }
        }
        for (i, l) in self.ext_managed_virtual_links.iter().enumerate() {
            let at = index("", "extManagedVirtualLinks", i);
            require(&l.id, &at, "id", "ExtManagedVirtualLinkData")?;
            require(
                &l.resource_id,
                &at,
                "resourceId",
                "ExtManagedVirtualLinkData",
            )?;
        }
        validate_vim_connections(&self.vim_connection_info, "")
    }
}

/// SOL003 `ScaleVnfRequest` (clause 5.5.2.5): body of `POST .../scale`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleVnfRequest {
    /// `type` (1)
    #[serde(rename = "type")]
    pub type_: ScaleType,
    /// `aspectId` (1)
    pub aspect_id: String,
    /// `numberOfSteps` (0..1): 1 when absent; see [`ScaleVnfRequest::steps`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_steps: Option<u32>,
    /// `additionalParams` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
}

impl ScaleVnfRequest {
    /// A request to scale `aspect_id` by one step.
    pub fn new(type_: ScaleType, aspect_id: impl Into<String>) -> Self {
        Self {
            type_,
            aspect_id: aspect_id.into(),
            number_of_steps: None,
            additional_params: None,
        }
    }

    /// The same request with `numberOfSteps`.
    pub fn with_number_of_steps(mut self, steps: u32) -> Self {
        self.number_of_steps = Some(steps);
        self
    }

    /// The number of steps: `numberOfSteps`, 1 when absent (SOL003 default).
    pub fn steps(&self) -> u32 {
        self.number_of_steps.unwrap_or(1)
    }

    /// Reports an empty `aspectId` and a `numberOfSteps` of 0.
    ///
    /// # Errors
    /// [`Error::Invalid`] at the field path `aspectId` or `numberOfSteps`.
    pub fn validate(&self) -> Result<(), Error> {
        require(&self.aspect_id, "", "aspectId", "ScaleVnfRequest")?;
        if self.number_of_steps == Some(0) {
            return Err(Error::invalid(
                Location::default().with_field("numberOfSteps"),
                "numberOfSteps is 0; expected a positive integer",
            ));
        }
        Ok(())
    }
}

/// SOL003 `HealVnfRequest` (clause 5.5.2.9): body of `POST .../heal`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealVnfRequest {
    /// `vnfcInstanceId` (0..N): the `VnfcInfo.id`s to heal; empty heals the whole VNF.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnfc_instance_id: Vec<String>,
    /// `cause` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// `additionalParams` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
    /// `healScript` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal_script: Option<String>,
}

/// SOL003 `TerminateVnfRequest` (clause 5.5.2.8): body of `POST .../terminate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminateVnfRequest {
    /// `terminationType` (1)
    pub termination_type: TerminationType,
    /// `gracefulTerminationTimeout` (0..1), in seconds; ignored when `FORCEFUL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_termination_timeout: Option<u64>,
    /// `additionalParams` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
}

/// SOL003 `VnfInfoModificationRequest` (clause 5.5.2.12): body of `PATCH /vnf_instances/{id}`,
/// applied as a JSON merge patch.
///
/// In `vimConnectionInfo`, a `null` entry (`None`) deletes that connection, as merge-patch
/// semantics require; `null` members of the key-value maps are kept as JSON `null` for the same
/// reason.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfInfoModificationRequest {
    /// `vnfInstanceName` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_instance_name: Option<String>,
    /// `vnfInstanceDescription` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_instance_description: Option<String>,
    /// `vnfdId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfd_id: Option<String>,
    /// `vnfConfigurableProperties` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_configurable_properties: Option<KeyValuePairs>,
    /// `metadata` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<KeyValuePairs>,
    /// `extensions` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<KeyValuePairs>,
    /// `vimConnectionInfo` (0..N): connection id to new value, or `None` to delete it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vim_connection_info: BTreeMap<String, Option<VimConnectionInfo>>,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttemptOutcome {
    /// The stack reached `*_COMPLETE`.
    Succeeded,
    /// The stack reached `*_FAILED`.
    Failed,
    /// The create or update request itself failed (Heat refused it, e.g. HTTP 400, or could
    /// not be reached): the stack was not changed by it.
    Refused,
}

/// One stack create or update of an operation (the availability-zone reselection trace in
/// `VnfLcmOpOcc.attempts`; the [`crate::reselect`] machine records them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// The zone of every unit in this attempt.
    pub zones: BTreeMap<String, ZoneId>,
    /// How it ended; `None` while it runs.
    pub outcome: Option<AttemptOutcome>,
    /// Heat's `stack_status_reason` when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// The units found failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_units: Vec<String>,
    /// The zones excluded because of this failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_zones: Vec<ZoneId>,
    /// Constraints relaxed (best effort) to choose these zones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relaxed: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::{AccessInfo, Link};
    use crate::vectors::read_vector;
    use chrono::TimeZone;
    use serde_json::json;

    fn kv(v: serde_json::Value) -> KeyValuePairs {
        match v {
            serde_json::Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    fn vim() -> VimConnectionInfo {
        VimConnectionInfo {
            vim_id: Some("vim-uuid".into()),
            interface_info: Some(kv(json!({"endpoint": "http://127.0.0.1/identity"}))),
            access_info: Some(AccessInfo(kv(json!({"username": "u", "password": "p"})))),
            ..VimConnectionInfo::new("ETSINFV.OPENSTACK_KEYSTONE.V_3")
        }
    }

    fn full_info() -> InstantiatedVnfInfo {
        InstantiatedVnfInfo {
            flavour_id: "simple".into(),
            vnf_state: Some(VnfOperationalStateType::Started),
            scale_status: vec![ScaleInfo {
                aspect_id: "VDU1_scale".into(),
                vnfd_id: Some("vnfd-1".into()),
                scale_level: 1,
            }],
            max_scale_levels: vec![ScaleInfo {
                aspect_id: "VDU1_scale".into(),
                vnfd_id: None,
                scale_level: 2,
            }],
            ext_cp_info: vec![VnfExtCpInfo {
                id: "cp-1".into(),
                cpd_id: "VDU1_CP1".into(),
                cp_config_id: "VDU1_CP1_1".into(),
                vnfd_id: None,
                cp_protocol_info: vec![json!({"layerProtocol": "IP_OVER_ETHERNET"})],
                ext_link_port_id: Some("lp-1".into()),
                metadata: None,
                associated_vnfc_cp_id: Some("vnfc-cp-1".into()),
                associated_vip_cp_id: None,
                associated_vnf_virtual_link_id: None,
            }],
            ext_virtual_link_info: vec![ExtVirtualLinkInfo {
                id: "ext_vl_id_net1".into(),
                resource_handle: ResourceHandle::new("net1"),
                ext_link_ports: vec![],
                current_vnf_ext_cp_data: vec![VnfExtCpData {
                    cpd_id: "VDU1_CP1".into(),
                    cp_config: kv(json!({"VDU1_CP1_1": {"cpProtocolData": []}})),
                }],
            }],
            ext_managed_virtual_link_info: vec![json!({"id": "ext_managed_vl_1"})],
            monitoring_parameters: vec![json!({"id": "m", "performanceMetric": "cpu"})],
            localization_language: Some("en".into()),
            vnfc_resource_info: vec![
                VnfcResourceInfo {
                    id: "vnfc-res-1".into(),
                    vdu_id: VduId::new("VDU1"),
                    vnfd_id: Some("vnfd-1".into()),
                    compute_resource: ResourceHandle::new("srv-1")
                        .with_vim_connection_id("vim1")
                        .with_vim_level_resource_type("OS::Nova::Server"),
                    zone_id: Some(ZoneId::new("az-1")),
                    storage_resource_ids: vec!["vol-1".into()],
                    reservation_id: Some("resv".into()),
                    vnfc_cp_info: vec![json!({"id": "vnfc-cp-1", "cpdId": "VDU1_CP1"})],
                    metadata: Some(kv(json!({"creation_time": "2024-01-01T00:00:00Z"}))),
                },
                VnfcResourceInfo {
                    id: "vnfc-res-2".into(),
                    vdu_id: VduId::new("VDU2"),
                    compute_resource: ResourceHandle::new("srv-2"),
                    metadata: Some(kv(json!({"zone": "az-2"}))),
                    ..VnfcResourceInfo::default()
                },
            ],
            vnf_virtual_link_resource_info: vec![json!({"id": "vl-res"})],
            virtual_storage_resource_info: vec![json!({"id": "st-res"})],
            vnfc_info: vec![VnfcInfo {
                id: "VDU1-vnfc-res-1".into(),
                vdu_id: VduId::new("VDU1"),
                vnfc_resource_info_id: Some("vnfc-res-1".into()),
                vnfc_state: VnfOperationalStateType::Started,
                vnfc_configurable_properties: Some(kv(json!({"k": "v"}))),
            }],
            metadata: Some(kv(json!({"stack_id": "s"}))),
        }
    }

    fn full_instance() -> VnfInstance {
        let mut i = VnfInstance::new("inst-1", "vnfd-1");
        i.vnf_instance_name = Some("sample6".into());
        i.vnf_instance_description = Some("desc".into());
        i.vnf_provider = "Company".into();
        i.vnf_product_name = "Sample VNF".into();
        i.vnf_software_version = "1.0".into();
        i.vnfd_version = "1.0".into();
        i.vnf_configurable_properties = Some(kv(
            json!({"isAutohealEnabled": true, "isAutoscaleEnabled": false}),
        ));
        i.vim_connection_info.insert("vim1".into(), vim());
        i.instantiation_state = Some(InstantiationState::Instantiated);
        i.instantiated_vnf_info = Some(full_info());
        i.metadata = Some(kv(json!({"tenant": "t"})));
        i.extensions = Some(kv(json!({"ext": 1})));
        i.links.insert(
            "self".into(),
            Link::new("http://vnfm/vnflcm/v2/vnf_instances/inst-1"),
        );
        i.links
            .insert("heal".into(), Link::new("http://vnfm/.../heal"));
        i
    }

    fn full_op_occ() -> VnfLcmOpOcc {
        let mut o = VnfLcmOpOcc::new("op-1", "inst-1", LcmOperationType::Scale, t(0))
            .with_automatic_invocation(true)
            .with_operation_params(json!({"type": "SCALE_OUT", "aspectId": "VDU1_scale"}));
        o.enter(LcmOperationStateType::FailedTemp, t(30));
        o.grant_id = Some(GrantId::new("grant-1"));
        o.is_cancel_pending = true;
        o.cancel_mode = Some(CancelModeType::Graceful);
        o.error = Some(ProblemDetails::new(422, "No valid host was found").with_title("Error"));
        o.resource_changes = Some(ResourceChanges {
            affected_vnfcs: vec![AffectedVnfc {
                id: "vnfc-res-3".into(),
                vdu_id: VduId::new("VDU1"),
                vnfd_id: None,
                change_type: ChangeType::Added,
                compute_resource: ResourceHandle::new("srv-3"),
                resource_definition_id: Some("res-new-1".into()),
                zone_id: Some(ZoneId::new("az-3")),
                metadata: None,
                affected_vnfc_cp_ids: vec!["cp".into()],
                added_storage_resource_ids: vec!["vol".into()],
                removed_storage_resource_ids: vec![],
            }],
            affected_virtual_links: vec![json!({"id": "vl"})],
            affected_ext_link_ports: vec![],
            affected_virtual_storages: vec![json!({"id": "st"})],
        });
        o.changed_info = Some(json!({"vnfInstanceName": "x"}));
        o.changed_ext_connectivity = vec![json!({"id": "ext"})];
        o.links.insert("self".into(), Link::new("http://vnfm/op-1"));
        o.links
            .insert("vnfInstance".into(), Link::new("http://vnfm/inst-1"));
        o
    }

    fn round_trip<T>(v: &T) -> T
    where
        T: Serialize + serde::de::DeserializeOwned,
    {
        serde_json::from_str(&serde_json::to_string(v).unwrap()).unwrap()
    }

    #[test]
    fn vnf_instance_round_trips() {
        let i = full_instance();
        assert!(i.validate().is_ok(), "{:?}", i.validate());
        assert_eq!(round_trip(&i), i);
        // a minimal instance too
        let m = VnfInstance::new("i", "d");
        assert_eq!(round_trip(&m), m);
    }

    #[test]
    fn op_occ_round_trips_and_states() {
        let o = full_op_occ();
        assert!(o.validate().is_ok(), "{:?}", o.validate());
        assert_eq!(round_trip(&o), o);
        assert!(!o.is_terminal());
        use LcmOperationStateType::*;
        for s in [Completed, Failed, RolledBack] {
            assert!(s.is_terminal(), "{s:?}");
        }
        for s in [Starting, Processing, FailedTemp, RollingBack] {
            assert!(!s.is_terminal(), "{s:?}");
        }
    }

    #[test]
    fn requests_round_trip() {
        let create = CreateVnfRequest {
            vnfd_id: "vnfd-1".into(),
            vnf_instance_name: Some("n".into()),
            vnf_instance_description: Some("d".into()),
            metadata: Some(kv(json!({"a": "b"}))),
        };
        assert_eq!(round_trip(&create), create);

        let mut inst = InstantiateVnfRequest::new("simple");
        inst.instantiation_level_id = Some("instantiation_level_1".into());
        inst.ext_virtual_links = vec![ExtVirtualLinkData {
            id: "ext_vl_id_net1".into(),
            vim_connection_id: None,
            resource_provider_id: None,
            resource_id: "net1".into(),
            ext_cps: vec![VnfExtCpData {
                cpd_id: "VDU1_CP1".into(),
                cp_config: kv(json!({"VDU1_CP1_1": {"cpProtocolData": []}})),
            }],
            ext_link_ports: vec![],
        }];
        inst.ext_managed_virtual_links = vec![ExtManagedVirtualLinkData {
            id: "m".into(),
            vnf_virtual_link_desc_id: "internalVL1".into(),
            vnfd_id: None,
            vim_connection_id: None,
            resource_provider_id: None,
            resource_id: "net_mgmt".into(),
            vnf_link_port: vec![],
            ext_managed_multisite_virtual_link_id: None,
        }];
        inst.vim_connection_info.insert("vim1".into(), vim());
        inst.localization_language = Some("ja".into());
        inst.additional_params = Some(kv(json!({"lcm-operation-user-data": "./x.py"})));
        inst.extensions = Some(kv(json!({"e": 1})));
        inst.vnf_configurable_properties = Some(kv(json!({"isAutohealEnabled": true})));
        assert!(inst.validate().is_ok());
        assert_eq!(round_trip(&inst), inst);

        let scale = ScaleVnfRequest {
            additional_params: Some(kv(json!({"p": 1}))),
            ..ScaleVnfRequest::new(ScaleType::ScaleIn, "VDU1_scale").with_number_of_steps(2)
        };
        assert_eq!(round_trip(&scale), scale);

        let heal = HealVnfRequest {
            vnfc_instance_id: vec!["VDU1-a".into(), "VDU2-b".into()],
            cause: Some("alarm".into()),
            additional_params: Some(kv(json!({"all": true}))),
            heal_script: Some("script".into()),
        };
        assert_eq!(round_trip(&heal), heal);

        let term = TerminateVnfRequest {
            termination_type: TerminationType::Graceful,
            graceful_termination_timeout: Some(60),
            additional_params: Some(kv(json!({"x": null}))),
        };
        assert_eq!(round_trip(&term), term);

        let mut modify = VnfInfoModificationRequest {
            vnf_instance_name: Some("new".into()),
            vnf_instance_description: Some("d".into()),
            vnfd_id: Some("vnfd-2".into()),
            vnf_configurable_properties: Some(kv(json!({"isAutoscaleEnabled": null}))),
            metadata: Some(kv(json!({"m": 1}))),
            extensions: Some(kv(json!({"e": 2}))),
            ..VnfInfoModificationRequest::default()
        };
        modify
            .vim_connection_info
            .insert("vim1".into(), Some(vim()));
        modify.vim_connection_info.insert("vim2".into(), None);
        assert_eq!(round_trip(&modify), modify);
        let out = serde_json::to_value(&modify).unwrap();
        assert_eq!(out["vimConnectionInfo"]["vim2"], serde_json::Value::Null);
    }

    #[test]
    fn sol003_names_on_literal_json() {
        let i: VnfInstance = serde_json::from_value(json!({
            "id": "i1", "vnfdId": "d", "vnfProvider": "p", "vnfProductName": "n",
            "vnfSoftwareVersion": "1", "vnfdVersion": "1",
            "instantiationState": "INSTANTIATED",
            "instantiatedVnfInfo": {
                "flavourId": "simple", "vnfState": "STOPPED",
                "extCpInfo": [{"id": "c", "cpdId": "VDU1_CP1", "cpConfigId": "x"}],
                "scaleStatus": [{"aspectId": "a", "scaleLevel": 3}],
                "vnfcResourceInfo": [{"id": "r", "vduId": "VDU1",
                    "computeResource": {"resourceId": "srv", "vimLevelResourceType": "OS::Nova::Server"},
                    "zoneId": "az-1"}],
                "vnfcInfo": [{"id": "v", "vduId": "VDU1", "vnfcState": "STARTED"}]
            },
            "_links": {"self": {"href": "http://x/i1"}}
        }))
        .unwrap();
        assert!(i.is_instantiated());
        assert!(i.validate().is_ok(), "{:?}", i.validate());
        let info = i.instantiated_vnf_info.as_ref().unwrap();
        assert_eq!(info.vnf_state, Some(VnfOperationalStateType::Stopped));
        assert_eq!(info.scale_level("a"), Some(3));
        assert_eq!(info.vnfcs_of("VDU1").count(), 1);
        assert_eq!(info.vnfc_resource_info[0].zone(), Some(ZoneId::new("az-1")));

        let o: VnfLcmOpOcc = serde_json::from_str(
            r#"{"id": "o1", "operationState": "FAILED_TEMP",
                "stateEnteredTime": "2024-05-01T10:00:05Z", "startTime": "2024-05-01T10:00:00Z",
                "vnfInstanceId": "i1", "operation": "CHANGE_EXT_CONN",
                "isAutomaticInvocation": false, "isCancelPending": false,
                "cancelMode": "FORCEFUL",
                "error": {"status": 500, "detail": "boom"},
                "_links": {"self": {"href": "h"}, "vnfInstance": {"href": "h2"}}}"#,
        )
        .unwrap();
        assert_eq!(o.operation, LcmOperationType::ChangeExtConn);
        assert_eq!(o.operation_state, LcmOperationStateType::FailedTemp);
        assert_eq!(
            o.start_time,
            Utc.with_ymd_and_hms(2024, 5, 1, 10, 0, 0).unwrap()
        );
        assert!(o.validate().is_ok());

        let out = serde_json::to_value(full_op_occ()).unwrap();
        assert_eq!(out["operationState"], "FAILED_TEMP");
        assert_eq!(out["operation"], "SCALE");
        assert_eq!(out["startTime"], "2023-11-14T22:13:20Z");
        assert_eq!(out["isCancelPending"], true);
        assert_eq!(out["cancelMode"], "GRACEFUL");
        assert_eq!(out["grantId"], "grant-1");
        assert_eq!(
            out["resourceChanges"]["affectedVnfcs"][0]["changeType"],
            "ADDED"
        );
        assert_eq!(out["_links"]["vnfInstance"]["href"], "http://vnfm/inst-1");
        assert_eq!(
            serde_json::to_value(LcmOperationType::ChangeVnfpkg).unwrap(),
            "CHANGE_VNFPKG"
        );
        assert_eq!(
            serde_json::to_value(LcmOperationStateType::RolledBack).unwrap(),
            "ROLLED_BACK"
        );

        let out = serde_json::to_value(full_instance()).unwrap();
        assert_eq!(out["instantiationState"], "INSTANTIATED");
        assert_eq!(
            out["instantiatedVnfInfo"]["vnfcResourceInfo"][0]["computeResource"]
                ["vimLevelResourceType"],
            "OS::Nova::Server"
        );
        assert_eq!(
            out["instantiatedVnfInfo"]["maxScaleLevels"][0]["scaleLevel"],
            2
        );
        assert_eq!(out["vnfConfigurableProperties"]["isAutohealEnabled"], true);

        let s: ScaleVnfRequest =
            serde_json::from_str(r#"{"type": "SCALE_OUT", "aspectId": "VDU1_scale"}"#).unwrap();
        assert_eq!(s.type_, ScaleType::ScaleOut);
        assert_eq!(s.steps(), 1);
        let tr: TerminateVnfRequest = serde_json::from_str(
            r#"{"terminationType": "GRACEFUL", "gracefulTerminationTimeout": 30}"#,
        )
        .unwrap();
        assert_eq!(tr.termination_type, TerminationType::Graceful);
        let h: HealVnfRequest =
            serde_json::from_str(r#"{"vnfcInstanceId": ["a"], "cause": "c"}"#).unwrap();
        assert_eq!(h.vnfc_instance_id, vec!["a".to_owned()]);
    }

    #[test]
    fn autoheal_and_autoscale_flags() {
        let mut i = VnfInstance::new("i", "d");
        assert!(!i.is_autoheal_enabled() && !i.is_autoscale_enabled());
        i.vnf_configurable_properties = Some(kv(json!({"isAutohealEnabled": true})));
        assert!(i.is_autoheal_enabled() && !i.is_autoscale_enabled());
        i.vnf_configurable_properties = Some(kv(
            json!({"isAutoscaleEnabled": true, "isAutohealEnabled": "true"}),
        ));
        assert!(!i.is_autoheal_enabled(), "a string is not a boolean");
        assert!(i.is_autoscale_enabled());
    }

    #[test]
    fn strict_types_name_missing_and_unknown_values() {
        let e = serde_json::from_str::<InstantiateVnfRequest>(r#"{"instantiationLevelId": "l"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `flavourId`"), "{e}");
        let e = serde_json::from_str::<ScaleVnfRequest>(r#"{"type": "SCALE_UP", "aspectId": "a"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `SCALE_UP`"), "{e}");
        assert!(e.contains("SCALE_OUT") && e.contains("SCALE_IN"), "{e}");
        let e = serde_json::from_str::<VnfLcmOpOcc>(r#"{"id": "o"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field"), "{e}");
        let e = serde_json::from_str::<VnfInstance>(r#"{"instantiationState": "RUNNING"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `RUNNING`"), "{e}");
    }

    #[test]
    fn vnf_instance_validate_reports_paths() {
        let mut i = full_instance();
        i.instantiated_vnf_info.as_mut().unwrap().vnfc_resource_info[0]
            .id
            .clear();
        assert_eq!(
            i.validate().unwrap_err().to_string(),
            "instantiatedVnfInfo.vnfcResourceInfo[0].id: missing or empty mandatory attribute \
             `id` of SOL003 VnfcResourceInfo"
        );

        let mut i = full_instance();
        i.instantiated_vnf_info.as_mut().unwrap().vnfc_resource_info[1]
            .compute_resource
            .resource_id
            .clear();
        assert!(i
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("instantiatedVnfInfo.vnfcResourceInfo[1].computeResource.resourceId: "));

        let mut i = full_instance();
        i.instantiated_vnf_info.as_mut().unwrap().vnf_state = None;
        assert!(i
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("instantiatedVnfInfo.vnfState: "));

        let mut i = full_instance();
        i.instantiated_vnf_info
            .as_mut()
            .unwrap()
            .ext_cp_info
            .clear();
        assert!(i
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("instantiatedVnfInfo.extCpInfo: "));

        let mut i = full_instance();
        i.instantiated_vnf_info = None;
        assert!(i
            .validate()
            .unwrap_err()
            .to_string()
            .contains("INSTANTIATED but has no instantiatedVnfInfo"));

        let mut i = full_instance();
        i.instantiation_state = None;
        assert!(i
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("instantiationState: "));

        let mut i = full_instance();
        i.vnf_provider.clear();
        assert!(i
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("vnfProvider: "));

        let mut i = full_instance();
        i.links.clear();
        assert!(i
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("_links.self: missing mandatory link"));
    }

    #[test]
    fn op_occ_and_request_validate_errors() {
        let mut o = full_op_occ();
        o.state_entered_time = t(-5);
        assert!(o
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("stateEnteredTime: "));
        let mut o = full_op_occ();
        o.enter(LcmOperationStateType::Completed, t(60));
        assert!(o
            .validate()
            .unwrap_err()
            .to_string()
            .contains("while operationState is COMPLETED"));
        let mut o = full_op_occ();
        o.error = Some(ProblemDetails::new(500, ""));
        assert!(o
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("error.detail: "));
        let mut o = full_op_occ();
        o.links.remove("vnfInstance");
        assert!(o
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("_links.vnfInstance: "));

        let s = ScaleVnfRequest::new(ScaleType::ScaleOut, "a").with_number_of_steps(0);
        assert_eq!(
            s.validate().unwrap_err().to_string(),
            "numberOfSteps: numberOfSteps is 0; expected a positive integer"
        );
        assert!(ScaleVnfRequest::new(ScaleType::ScaleOut, "")
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("aspectId: "));
        let mut r = InstantiateVnfRequest::new("simple");
        r.vim_connection_info
            .insert("vim1".into(), VimConnectionInfo::default());
        assert!(r
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("vimConnectionInfo.vim1.vimType: "));
        assert!(CreateVnfRequest {
            vnfd_id: String::new(),
            vnf_instance_name: None,
            vnf_instance_description: None,
            metadata: None
        }
        .validate()
        .unwrap_err()
        .to_string()
        .starts_with("vnfdId: "));
    }

    // ---- shared vectors -----------------------------------------------------------------

    const AZ: &str = "tacker/az_reselection";

    #[test]
    fn tacker_reselection_inst_objects_deserialize() {
        let Some(text) = read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/az_reselection/reselection_cases.json",
        ) else {
            return;
        };
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut objects = 0;
        let mut files = 0;
        for case in doc["unit"].as_array().unwrap() {
            match case.get("inst") {
                Some(serde_json::Value::Object(_)) => {
                    let inst: VnfInstance = serde_json::from_value(case["inst"].clone()).unwrap();
                    assert_eq!(inst.instantiated_vnf_info, None);
                    // a fragment: mandatory attributes are reported, not invented
                    assert!(inst.validate().unwrap_err().to_string().starts_with("id: "));
                    objects += 1;
                }
                Some(serde_json::Value::String(file)) => {
                    let text =
                        read_vector(env!("CARGO_MANIFEST_DIR"), &format!("{AZ}/{file}")).unwrap();
                    let info: InstantiatedVnfInfo = serde_json::from_str(&text).unwrap();
                    assert!(!info.vnfc_resource_info.is_empty());
                    files += 1;
                }
                _ => {}
            }
        }
        assert!(objects >= 2 && files >= 1, "{objects} {files}");
    }

    #[test]
    fn tacker_instantiated_vnf_info_fragment_deserializes() {
        let Some(text) = read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/az_reselection/instantiated_vnfinfo_update_retry.json",
        ) else {
            return;
        };
        let info: InstantiatedVnfInfo = serde_json::from_str(&text).unwrap();
        let zones: Vec<_> = info
            .vnfc_resource_info
            .iter()
            .map(|v| (v.vdu_id.as_str().to_owned(), v.zone()))
            .collect();
        assert_eq!(
            zones,
            vec![
                ("VDU1".to_owned(), Some(ZoneId::new("az-1"))),
                ("VDU2".to_owned(), Some(ZoneId::new("az-2")))
            ]
        );
        // the fragment round-trips to itself apart from the defaulted mandatory attributes
        assert_eq!(round_trip(&info), info);
        let e = info.validate().unwrap_err().to_string();
        assert!(e.starts_with("flavourId: "), "{e}");
        let complete = InstantiatedVnfInfo {
            flavour_id: "simple".into(),
            vnf_state: Some(VnfOperationalStateType::Started),
            ext_cp_info: full_info().ext_cp_info,
            ..info
        };
        assert_eq!(
            complete.validate().unwrap_err().to_string(),
            "vnfcResourceInfo[0].id: missing or empty mandatory attribute `id` of SOL003 \
             VnfcResourceInfo"
        );
    }

    #[test]
    fn tacker_functional_requests_deserialize() {
        let Some(text) = read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/az_reselection/functional_requests.json",
        ) else {
            return;
        };
        let placeholder = regex::Regex::new(r"\{\{[^}]*\}\}").unwrap();
        let text = placeholder.replace_all(&text, "sample-value");
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();

        let create: CreateVnfRequest =
            serde_json::from_value(doc["sample6_create"].clone()).unwrap();
        assert_eq!(create.vnfd_id, "sample-value");
        assert_eq!(create.vnf_instance_name.as_deref(), Some("sample6"));
        create.validate().unwrap();

        let scale: ScaleVnfRequest =
            serde_json::from_value(doc["sample6_scale_out"].clone()).unwrap();
        assert_eq!(scale.type_, ScaleType::ScaleOut);
        assert_eq!(scale.steps(), 1);
        scale.validate().unwrap();

        let term: TerminateVnfRequest =
            serde_json::from_value(doc["sample6_terminate"].clone()).unwrap();
        assert_eq!(term.termination_type, TerminationType::Forceful);

        let inst: InstantiateVnfRequest =
            serde_json::from_value(doc["sample6_instantiate"].clone()).unwrap();
        assert_eq!(inst.flavour_id, "simple");
        assert_eq!(inst.ext_virtual_links[0].ext_cps[0].cpd_id, "VDU1_CP1");
        assert_eq!(
            inst.ext_managed_virtual_links[0].vnf_virtual_link_desc_id,
            "internalVL1"
        );
        let vim1 = &inst.vim_connection_info["vim1"];
        assert_eq!(vim1.vim_type, "ETSINFV.OPENSTACK_KEYSTONE.V_3");
        assert!(!format!("{inst:?}").contains("devstack"));
        inst.validate().unwrap();

        // every request body re-serializes to the JSON it came from
        for (key, out) in [
            ("sample6_create", serde_json::to_value(&create).unwrap()),
            ("sample6_scale_out", serde_json::to_value(&scale).unwrap()),
            ("sample6_terminate", serde_json::to_value(&term).unwrap()),
            ("sample6_instantiate", serde_json::to_value(&inst).unwrap()),
        ] {
            assert_eq!(out, doc[key], "{key}");
        }
    }

    #[test]
    fn tacker_prometheus_vnf_instances_deserialize() {
        let Some(text) = read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/prometheus/unit_vnf_instances.json",
        ) else {
            return;
        };
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut flags = Vec::new();
        for (key, value) in doc.as_object().unwrap() {
            if !key.starts_with("_inst") {
                continue;
            }
            let inst: VnfInstance =
                serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(inst.id.as_str(), "test_id");
            assert_eq!(inst.vnfd_id, "vnfdId");
            let info = inst.instantiated_vnf_info.as_ref().unwrap();
            assert_eq!(info.vnfc_resource_info.len(), 2);
            assert_eq!(
                info.vnfc_resource_info[0].compute_resource,
                ResourceHandle::default()
            );
            assert_eq!(
                info.vnfc_resource_info[1]
                    .compute_resource
                    .vim_level_resource_type
                    .as_deref(),
                Some("Deployment")
            );
            assert_eq!(
                info.vnfc_info[0].vnfc_state,
                VnfOperationalStateType::Started
            );
            assert_eq!(info.scale_level("aspect"), Some(0));
            // fragments: no flavourId, no _links
            assert!(inst.validate().is_err());
            flags.push((
                key.clone(),
                inst.is_instantiated(),
                inst.is_autoheal_enabled(),
                inst.is_autoscale_enabled(),
            ));
        }
        let expected: Vec<(String, bool, bool, bool)> = vec![
            ("_inst1".into(), false, false, false),
            ("_inst2".into(), true, false, true),
            ("_inst3".into(), true, false, false),
            ("_inst4".into(), true, false, false),
            ("_inst5".into(), true, true, false),
        ];
        assert_eq!(flags, expected);
    }
}
