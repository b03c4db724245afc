//! The types of the grant requests built here and the links they carry.

use crate::grant::GrantRequest;
use crate::id::{OpOccId, VnfInstanceId};
use crate::lifecycle::userdata::VnfcSlot;

/// The `vnfcResourceInfo[].metadata` key holding the VNFC's index (Tacker's `vdu_idx`).
pub const VDU_IDX_KEY: &str = "vdu_idx";

/// The `vnfcResourceInfo[].metadata` key holding the name of the VNFC's resource in the top
/// stack (`VDU1-0`), read when [`VDU_IDX_KEY`] is absent.
pub const RESOURCE_NAME_KEY: &str = "parent_resource_name";

/// Options of the grant requests built here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GrantOptions {
    /// `fallbackBestEffort` of every placement constraint.
    pub fallback_best_effort: bool,
    /// The VIM connection of existing resources whose `computeResource` has no
    /// `vimConnectionId`: used in `RES_MGMT` references and in the `resource` of removed
    /// resources.
    pub vim_connection_id: Option<String>,
    /// `isAutomaticInvocation`: whether the operation was triggered automatically (auto-heal,
    /// auto-scale).
    pub is_automatic_invocation: bool,
}

/// One VNFC the grant request asks to create.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewVnfc {
    /// Its slot: VDU and index.
    pub slot: VnfcSlot,
    /// The id of its `COMPUTE` resource definition in `addResources`.
    pub resource_id: String,
    /// The ids of its `STORAGE` resource definitions in `addResources`, in the VDU's order.
    pub storages: Vec<String>,
}

/// A grant request and the new VNFCs it asks for.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedGrant {
    /// The request; it passes [`GrantRequest::validate`].
    pub request: GrantRequest,
    /// The VNFCs to create, in `addResources` order.
    pub new_vnfcs: Vec<NewVnfc>,
}

/// The `href` of the operation occurrence `id`: `/vnflcm/v2/vnf_lcm_op_occs/{id}`.
pub fn lcm_op_occ_href(id: &OpOccId) -> String {
    format!("/vnflcm/v2/vnf_lcm_op_occs/{id}")
}

/// The `href` of the VNF instance `id`: `/vnflcm/v2/vnf_instances/{id}`.
pub fn vnf_instance_href(id: &VnfInstanceId) -> String {
    format!("/vnflcm/v2/vnf_instances/{id}")
}
