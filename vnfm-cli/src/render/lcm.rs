//! LCM objects as people read them: SOL003 enum spellings, VNFC lines, an operation's account.

use std::fmt::Write as _;

use serde::Serialize;
use vnfm_core::id::ZoneId;
use vnfm_core::lcm::{VnfInstance, VnfLcmOpOcc};
use vnfm_core::reselect::AttemptOutcome;

use crate::display::escape;

/// One VNFC of an instance.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfcLine {
    /// `vnfcResourceInfo.id`
    pub id: String,
    /// VDU
    pub vdu_id: String,
    /// Zone
    pub zone_id: Option<String>,
    /// Compute host
    pub host: Option<String>,
    /// Server id (a CNF's: the pod name)
    pub server_id: String,
    /// A CNF's VNFC: the kind of its workload (`vimLevelResourceType`: `Deployment`, ...)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_kind: Option<String>,
    /// A CNF's VNFC: the node its pod is bound to (absent while it is pending)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The VNFCs of an instance as lines.
pub fn vnfc_lines(inst: &VnfInstance) -> Vec<VnfcLine> {
    inst.instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
        .map(|v| VnfcLine {
            id: v.id.clone(),
            vdu_id: v.vdu_id.to_string(),
            zone_id: v.zone_id.as_ref().map(ToString::to_string),
            host: v
                .metadata
                .as_ref()
                .and_then(|m| m.get("host"))
                .and_then(|h| h.as_str())
                .map(str::to_owned),
            server_id: v.compute_resource.resource_id.clone(),
            workload_kind: v
                .compute_resource
                .vim_level_resource_type
                .clone()
                .filter(|k| !k.starts_with("OS::")),
            node: v
                .metadata
                .as_ref()
                .and_then(|m| m.get("node"))
                .and_then(|h| h.as_str())
                .map(str::to_owned),
        })
        .collect()
}

/// The SOL003 spelling of an enum value (`COMPLETED`, `SCALE`, `INSTANTIATED`).
pub fn sol<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::from("?"),
    }
}

/// The human-readable account of an operation.
pub fn human_operation(op: &VnfLcmOpOcc, inst: &VnfInstance) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} of VNF instance {}: {} (operation {})",
        sol(&op.operation),
        inst.id,
        sol(&op.operation_state),
        op.id
    );
    for (i, a) in op.attempts.iter().enumerate() {
        let zones: Vec<String> = a.zones.iter().map(|(u, z)| format!("{u}={z}")).collect();
        let outcome = match a.outcome {
            Some(AttemptOutcome::Succeeded) => "succeeded",
            Some(AttemptOutcome::Failed) => "failed",
            Some(AttemptOutcome::Refused) => "refused",
            None => "unfinished",
        };
        let _ = writeln!(s, "  attempt {}: {} -> {outcome}", i + 1, zones.join(" "));
        if let Some(r) = &a.status_reason {
            let _ = writeln!(s, "    reason: {}", escape(r));
        }
        if !a.failed_zones.is_empty() {
            let z: Vec<&str> = a.failed_zones.iter().map(ZoneId::as_str).collect();
            let _ = writeln!(s, "    excluded zones: {}", z.join(", "));
        }
        for r in &a.relaxed {
            let _ = writeln!(s, "    relaxed: {}", escape(&r.to_string()));
        }
    }
    if let Some(e) = &op.error {
        let _ = writeln!(s, "  error: {}", escape(&e.detail));
    }
    for w in &op.warnings {
        let _ = writeln!(s, "  warning: {}", escape(w));
    }
    let lines = vnfc_lines(inst);
    if !lines.is_empty() {
        let _ = writeln!(s, "  VNFCs:");
        for v in lines {
            if let Some(kind) = &v.workload_kind {
                let _ = writeln!(
                    s,
                    "    {:<8} pod of {kind} on node {}",
                    escape(&v.id),
                    v.node
                        .as_deref()
                        .map_or_else(|| "- (pending)".into(), escape)
                );
                continue;
            }
            let _ = writeln!(
                s,
                "    {:<8} zone {:<6} host {:<12} server {}",
                v.id,
                v.zone_id.as_deref().unwrap_or("-"),
                v.host.as_deref().unwrap_or("-"),
                v.server_id
            );
        }
    }
    s
}
