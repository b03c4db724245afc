//! Kubernetes objects to the core's types (pure functions).

use k8s_openapi::api::core::v1::{Event, Node, Pod as KubePod};
use vnfm_core::driver::{ClusterEvent, ClusterNode, NodeAddress, Pod, PodScheduled};
use vnfm_core::id::NodeName;

/// `Some(s)` unless `s` is empty.
fn non_empty(s: Option<&String>) -> Option<String> {
    s.filter(|s| !s.is_empty()).cloned()
}

/// A Node as the core sees it. An empty `providerID` or `systemUUID` is `None`.
pub(crate) fn node(n: &Node) -> ClusterNode {
    let status = n.status.as_ref();
    ClusterNode {
        name: NodeName::new(n.metadata.name.clone().unwrap_or_default()),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        provider_id: non_empty(n.spec.as_ref().and_then(|s| s.provider_id.as_ref())),
        system_uuid: non_empty(
            status
                .and_then(|s| s.node_info.as_ref())
                .map(|i| &i.system_uuid),
        ),
        addresses: status
            .and_then(|s| s.addresses.as_ref())
            .map(|a| {
                a.iter()
                    .map(|a| NodeAddress::new(a.type_.clone(), a.address.clone()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// A Pod as the core sees it: its node (`spec.nodeName`), phase (`Unknown` when the API
/// server wrote none), `PodScheduled` condition and whether it is being deleted.
pub(crate) fn pod(p: &KubePod) -> Pod {
    let status = p.status.as_ref();
    let scheduled = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
        .map(|c| PodScheduled {
            status: c.status == "True",
            reason: non_empty(c.reason.as_ref()),
            message: non_empty(c.message.as_ref()),
        });
    Pod {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        labels: p.metadata.labels.clone().unwrap_or_default(),
        node: non_empty(p.spec.as_ref().and_then(|s| s.node_name.as_ref())).map(NodeName::new),
        phase: non_empty(status.and_then(|s| s.phase.as_ref()))
            .unwrap_or_else(|| "Unknown".to_owned()),
        scheduled,
        deleting: p.metadata.deletion_timestamp.is_some(),
    }
}

/// A core/v1 Event as the core sees it. Events the scheduler writes through
/// `events.k8s.io/v1` have no `count` (their repetitions are in `series.count`): such an event
/// counts once, or as often as its series says.
pub(crate) fn event(e: &Event) -> ClusterEvent {
    let count = e
        .count
        .or_else(|| e.series.as_ref().and_then(|s| s.count))
        .unwrap_or(1);
    ClusterEvent {
        object_kind: e.involved_object.kind.clone().unwrap_or_default(),
        object_name: e.involved_object.name.clone().unwrap_or_default(),
        kind: e.type_.clone().unwrap_or_default(),
        reason: e.reason.clone().unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
        count: u32::try_from(count).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    #[test]
    fn node_fields() {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": "w1", "labels": {"a": "b"}},
            "spec": {"providerID": "openstack:///4f2c"},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                "nodeInfo": {"systemUUID": "4F2C", "machineID": "", "bootID": "",
                    "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                    "kubeletVersion": "", "kubeProxyVersion": "", "operatingSystem": "linux",
                    "architecture": "amd64"}
            }
        }))
        .unwrap();
        let c = node(&n);
        assert_eq!(c.name.as_str(), "w1");
        assert_eq!(c.labels.get("a").map(String::as_str), Some("b"));
        assert_eq!(c.provider_id.as_deref(), Some("openstack:///4f2c"));
        assert_eq!(c.system_uuid.as_deref(), Some("4F2C"));
        assert_eq!(
            c.addresses_of("InternalIP").collect::<Vec<_>>(),
            ["10.0.0.5"]
        );
        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "w2"}})).unwrap();
        let c = node(&bare);
        assert_eq!((c.provider_id, c.system_uuid), (None, None));
        assert!(c.addresses.is_empty() && c.labels.is_empty());
    }

    #[test]
    fn pod_fields() {
        let p: KubePod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"},
                "deletionTimestamp": "2026-11-21T11:08:06Z"},
            "spec": {"containers": [], "nodeName": "w1"},
            "status": {"phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}]}
        }))
        .unwrap();
        let c = pod(&p);
        assert_eq!(c.node.as_ref().map(NodeName::as_str), Some("w1"));
        assert_eq!(c.phase, "Pending");
        assert!(c.deleting);
        assert_eq!(
            c.scheduled,
            Some(PodScheduled {
                status: true,
                reason: None,
                message: None
            })
        );
        let bare: KubePod = serde_json::from_value(json!({"metadata": {"name": "q"}})).unwrap();
        let c = pod(&bare);
        assert_eq!(
            (c.node, c.phase.as_str(), c.scheduled, c.deleting),
            (None, "Unknown", None, false)
        );
    }

    #[test]
    fn event_count_falls_back_to_the_series() {
        let e: Event = serde_json::from_value(json!({
            "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "series": {"count": 4, "lastObservedTime": "2026-11-21T11:08:06.000000Z"},
            "type": "Warning", "reason": "FailedScheduling", "message": "m"
        }))
        .unwrap();
        assert_eq!(event(&e).count, 4);
    }
}
