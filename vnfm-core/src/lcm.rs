//! SOL003 VNF LCM objects: `VnfInstance`, `VnfLcmOpOcc` and their parts.
//!
//! (Being filled in: see issue #2. The two structs below are the shape the store relies on.)

use serde::{Deserialize, Serialize};

use crate::id::{OpOccId, VnfInstanceId};

/// SOL003 `VnfInstance`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfInstance {
    /// `id`
    pub id: VnfInstanceId,
    /// `vnfdId`
    pub vnfd_id: String,
}

/// SOL003 `VnfLcmOpOcc`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfLcmOpOcc {
    /// `id`
    pub id: OpOccId,
    /// `vnfInstanceId`
    pub vnf_instance_id: VnfInstanceId,
    /// `startTime`
    pub start_time: chrono::DateTime<chrono::Utc>,
}
