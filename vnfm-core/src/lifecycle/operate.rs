//! SOL003 "operate" (`OperateVnfRequest`, v3.3.1 5.4.10): start or stop an instance's
//! servers through the VIM (Nova `os-start` / `os-stop`; the simulator keeps a power state).
//! What is checked before anything starts (pure); the operation itself is a plan of the
//! operation machine ([`super::Plan::Operate`]).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Location};
use crate::grant::KeyValuePairs;
use crate::id::ServerId;
use crate::lcm::{VnfInstance, VnfOperationalStateType};

use super::types::LcmError;

/// SOL003 `StopType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StopType {
    /// `FORCEFUL`
    Forceful,
    /// `GRACEFUL`
    Graceful,
}

/// SOL003 `OperateVnfRequest`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperateVnfRequest {
    /// `vnfcInstanceId` (0..N): not supported (every VNFC of the instance changes state).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnfc_instance_id: Vec<String>,
    /// `changeStateTo` (1): `STARTED` or `STOPPED`.
    pub change_state_to: VnfOperationalStateType,
    /// `stopType` (0..1): `FORCEFUL` or `GRACEFUL`, recorded; Nova's `os-stop` shuts the guest
    /// down gracefully within Nova's own `shutdown_timeout` either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_type: Option<StopType>,
    /// `gracefulStopTimeout` (0..1), seconds: recorded (see `stopType`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_stop_timeout: Option<u64>,
    /// `additionalParams` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
}

/// The servers of `inst` to start (`true`) or stop.
///
/// # Errors
/// [`LcmError::Conflict`] for an instance not instantiated, or already in the state asked
/// (SOL003: 409); [`LcmError::Invalid`] for `vnfcInstanceId` (vnfm operates the whole
/// instance), a `stopType`/`gracefulStopTimeout` with `STARTED`, and an instance without
/// servers (a CNF: its pods are the cluster's).
pub fn plan(
    inst: &VnfInstance,
    req: &OperateVnfRequest,
) -> Result<(bool, Vec<ServerId>), LcmError> {
    let bad = |field: &str, m: String| {
        LcmError::Invalid(Error::invalid(Location::default().with_field(field), m))
    };
    let info = super::plan::instantiated(inst, None)?;
    if !req.vnfc_instance_id.is_empty() {
        return Err(bad(
            "vnfcInstanceId",
            "vnfm starts or stops the whole instance: omit vnfcInstanceId".into(),
        ));
    }
    let on = req.change_state_to == VnfOperationalStateType::Started;
    if on && (req.stop_type.is_some() || req.graceful_stop_timeout.is_some()) {
        return Err(bad(
            "stopType",
            "stopType and gracefulStopTimeout apply to changeStateTo STOPPED only".into(),
        ));
    }
    if info.vnf_state == Some(req.change_state_to) {
        return Err(LcmError::Conflict(format!(
            "VNF instance {} is {} already",
            inst.id, req.change_state_to
        )));
    }
    let servers: Vec<ServerId> = info
        .vnfc_resource_info
        .iter()
        .map(|v| ServerId::new(v.compute_resource.resource_id.clone()))
        .collect();
    if servers.is_empty() || crate::lifecycle::cnf::CnfResources::of(inst).is_some() {
        return Err(bad(
            "changeStateTo",
            format!(
                "VNF instance {} has no servers to start or stop (a CNF's pods are the \
                 cluster's): vnfm operates VNFs on a VIM",
                inst.id
            ),
        ));
    }
    Ok((on, servers))
}
