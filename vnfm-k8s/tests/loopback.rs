//! Mapping tests: the adapter against a loopback server that replays what a real
//! kube-apiserver 1.36.2 answered (`../shared/vectors/k8s/live-v1.36.2/`, read at test time;
//! see `replay/mod.rs`). Each test maps a capture to an adapter call, checks the request the
//! adapter sends (method, path, query, content type, body, bearer token) and what it makes of
//! the answer. Without `../shared/vectors` every test records a skip and returns.
//!
//! Where the adapter sends another request than the captured one (an error answer captured for
//! another call), the capture's answer is given to the adapter's request as is, and the test
//! says so.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod replay;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use vnfm_core::cluster::Workload;
use vnfm_core::driver::{
    ApplyObject, ApplyWorkload, ClusterDriver, DeletePod, DriverError, EvictPod, LabelNode,
    ListEvents, ListPods, ListWorkloads, ObjectRef, PodAntiAffinity, ScaleWorkload,
};
use vnfm_core::id::NodeName;
use vnfm_k8s::KubeCluster;

use replay::{capture, Capture, Replay, Reply};

/// The replay server and the adapter on its kubeconfig (`context`, or the admin's).
async fn cluster(context: Option<&str>) -> (Replay, KubeCluster) {
    let replay = Replay::start();
    let cluster = KubeCluster::from_kubeconfig(&replay.kubeconfig(), context)
        .await
        .unwrap();
    (replay, cluster)
}

/// The captures `names`, or `None` (skip recorded) without the vectors.
fn captures<const N: usize>(names: [&str; N]) -> Option<[Capture; N]> {
    let mut out = Vec::with_capacity(N);
    for n in names {
        out.push(capture(n)?);
    }
    out.try_into().ok()
}

fn labels(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
        .collect()
}

/// The request has the captured method, path and query, and the captured token.
fn assert_as_captured(req: &replay::Request, cap: &Capture) {
    assert_eq!(req.method, cap.method, "{}", cap.name);
    // kube writes `?` after a path without query parameters, `?&` before the first one
    let target = req.target.replacen("?&", "?", 1);
    assert_eq!(target.trim_end_matches('?'), cap.path, "{}", cap.name);
    let token = cap.auth.strip_prefix("bearer ").unwrap();
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {token}").as_str()),
        "{}",
        cap.name
    );
}

// ------------------------------------------------------------------------------------ nodes

#[tokio::test]
async fn list_nodes_reads_names_labels_and_addresses() {
    let Some([cap]) = captures(["47-list-nodes-final"]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    replay.push(cap.reply());
    let nodes = cluster.list_nodes().await.unwrap();
    assert_as_captured(&replay.request(), &cap);
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["worker-1", "worker-2", "worker-3"]);
    for (i, n) in nodes.iter().enumerate() {
        let c = format!("c{}", i + 1);
        assert_eq!(n.labels.get("CIS-node"), Some(&c), "{n:?}");
        assert_eq!(n.labels.get("topology.kubernetes.io/zone"), Some(&c));
        assert_eq!(
            n.labels.get("kubernetes.io/hostname").map(String::as_str),
            Some(n.name.as_str())
        );
        let ip = format!("198.51.100.{}", 11 + i);
        assert_eq!(n.addresses_of("InternalIP").collect::<Vec<_>>(), [ip]);
        assert_eq!(
            n.addresses_of("Hostname").collect::<Vec<_>>(),
            [n.name.as_str()]
        );
        // the captured nodes were created with an empty systemUUID and no providerID
        assert_eq!((&n.system_uuid, &n.provider_id), (&None, &None));
    }
}

#[tokio::test]
async fn label_node_sends_a_merge_patch_of_labels() {
    let Some([set, remove]) = captures([
        "10-patch-node-label-merge-patch",
        "15-patch-node-remove-label-merge-patch-null",
    ]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    replay.push(set.reply()).push(remove.reply());
    cluster
        .label_node(LabelNode::new(
            NodeName::new("worker-1"),
            labels(&[("CIS-node", Some("c1"))]),
        ))
        .await
        .unwrap();
    cluster
        .label_node(LabelNode::new(
            NodeName::new("worker-3"),
            labels(&[("tmp", None)]),
        ))
        .await
        .unwrap();
    let reqs = replay.requests();
    assert_eq!(reqs.len(), 2);
    for (req, cap) in reqs.iter().zip([&set, &remove]) {
        assert_as_captured(req, cap);
        assert_eq!(
            req.header("content-type"),
            Some("application/merge-patch+json")
        );
        assert_eq!(Some(req.json()), cap.body, "{}", cap.name);
    }
    assert_eq!(
        reqs[1].json(),
        json!({"metadata": {"labels": {"tmp": null}}})
    );
}

#[tokio::test]
async fn label_node_errors_keep_the_status_message() {
    let Some([missing, invalid, media]) = captures([
        "18-patch-node-missing-404",
        "16-patch-node-invalid-label-422",
        "17-patch-node-wrong-content-type-415",
    ]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    // 404: the captured request is the adapter's
    replay.push(missing.reply());
    let e = cluster
        .label_node(LabelNode::new(
            NodeName::new("no-such-node"),
            labels(&[("CIS-node", Some("c9"))]),
        ))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert!(
        e.to_string().contains(r#"nodes "no-such-node" not found"#),
        "{e}"
    );
    // 422: the captured request is the adapter's too
    replay.push(invalid.reply());
    let e = cluster
        .label_node(LabelNode::new(
            NodeName::new("worker-3"),
            labels(&[("bad label!", Some("x"))]),
        ))
        .await
        .unwrap_err();
    let DriverError::Invalid { message, .. } = &e else {
        panic!("expected Invalid, got {e:?}");
    };
    assert!(
        message.contains(
            r#"Node "worker-3" is invalid: metadata.labels: Invalid value: "bad label!""#
        ),
        "{message}"
    );
    assert!(message.contains("HTTP 422 Invalid"), "{message}");
    // 415: captured for a patch sent as application/json, which the adapter never sends; its
    // answer given to a label call
    replay.push(media.reply_to_any());
    let e = cluster
        .label_node(LabelNode::new(
            NodeName::new("worker-1"),
            labels(&[("CIS-node", Some("c1"))]),
        ))
        .await
        .unwrap_err();
    let DriverError::Invalid { message, .. } = &e else {
        panic!("expected Invalid, got {e:?}");
    };
    assert!(message.contains("415: Unsupported Media Type"), "{message}");
    let reqs = replay.requests();
    assert_as_captured(&reqs[0], &missing);
    assert_as_captured(&reqs[1], &invalid);
    assert_eq!(Some(reqs[1].json()), invalid.body);
}

#[tokio::test]
async fn bad_token_is_unauthenticated_and_no_role_is_permission_denied() {
    let Some([bad, forbidden]) =
        captures(["22-list-nodes-bad-token-401", "21-list-nodes-forbidden-403"])
    else {
        return;
    };
    let (replay, wrong) = cluster(Some("wrong")).await;
    replay.push(bad.reply());
    let e = wrong.list_nodes().await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Unauthenticated { message, .. } if message.contains("Unauthorized")),
        "{e:?}"
    );
    assert_as_captured(&replay.request(), &bad);

    let viewer = KubeCluster::from_kubeconfig(&replay.kubeconfig(), Some("viewer"))
        .await
        .unwrap();
    replay.push(forbidden.reply());
    let e = viewer.list_nodes().await.unwrap_err();
    let DriverError::PermissionDenied { message, .. } = &e else {
        panic!("expected PermissionDenied, got {e:?}");
    };
    assert!(
        message.contains(r#"User "viewer" cannot list resource "nodes""#),
        "{message}"
    );
    assert_as_captured(&replay.requests()[1], &forbidden);
}

// ------------------------------------------------------------------------------------ objects

#[tokio::test]
async fn apply_object_is_a_forced_server_side_apply_of_the_manifest() {
    let Some([created, duplicate, mismatch]) = captures([
        "23-create-deployment-required-antiaffinity-201",
        "25-create-deployment-duplicate-409",
        "26-create-deployment-selector-mismatch-422",
    ]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    let mut w = ApplyWorkload::new("default", "vdu1", 3);
    w.anti_affinity = Some(PodAntiAffinity {
        topology_key: "CIS-node".to_owned(),
        required: true,
    });
    let manifest = w.to_object();
    // the API server answers an apply that creates with the object, as it answered the POST
    // of capture 23
    replay.push(created.reply_to_any());
    cluster.apply_object(manifest.clone()).await.unwrap();
    let req = replay.request();
    assert_eq!(req.method, "PATCH");
    assert_eq!(
        req.path(),
        "/apis/apps/v1/namespaces/default/deployments/vdu1"
    );
    let mut query: Vec<&str> = req.query().split('&').filter(|q| !q.is_empty()).collect();
    query.sort_unstable();
    assert_eq!(query, ["fieldManager=vnfm", "force=true"]);
    assert_eq!(
        req.header("content-type"),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(req.json(), manifest.object);

    // 409 AlreadyExists and 422 Invalid, captured for a POST, given to an apply
    replay.push(duplicate.reply_to_any());
    let e = cluster.apply_object(manifest.clone()).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("apply Deployment default/vdu1: HTTP 409 AlreadyExists: "),
        "{e}"
    );
    assert!(
        matches!(&e, DriverError::AlreadyExists { what, .. } if what.contains(r#"deployments.apps "vdu1" already exists"#)),
        "{e:?}"
    );
    replay.push(mismatch.reply_to_any());
    let e = cluster.apply_object(manifest).await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid { message, .. } if message.contains("`selector` does not match template `labels`")),
        "{e:?}"
    );
}

#[tokio::test]
async fn apply_object_maps_kinds_and_refuses_unmapped_ones() {
    let replay = Replay::start();
    let cluster = KubeCluster::from_kubeconfig(&replay.kubeconfig(), None)
        .await
        .unwrap();
    let ok = Reply::json(200, json!({"metadata": {}}), "an applied object");
    for (api_version, kind, path) in [
        ("v1", "Service", "/api/v1/namespaces/ns1/services/x"),
        ("v1", "ConfigMap", "/api/v1/namespaces/ns1/configmaps/x"),
        ("v1", "Secret", "/api/v1/namespaces/ns1/secrets/x"),
        (
            "v1",
            "ServiceAccount",
            "/api/v1/namespaces/ns1/serviceaccounts/x",
        ),
        (
            "apps/v1",
            "StatefulSet",
            "/apis/apps/v1/namespaces/ns1/statefulsets/x",
        ),
        (
            "apps/v1",
            "DaemonSet",
            "/apis/apps/v1/namespaces/ns1/daemonsets/x",
        ),
        (
            "policy/v1",
            "PodDisruptionBudget",
            "/apis/policy/v1/namespaces/ns1/poddisruptionbudgets/x",
        ),
        ("v1", "Namespace", "/api/v1/namespaces/x"),
    ] {
        replay.push(ok.clone());
        let object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
        cluster
            .apply_object(ApplyObject::new("ns1", object))
            .await
            .unwrap();
        let reqs = replay.requests();
        let req = reqs.last().unwrap();
        assert_eq!((req.method.as_str(), req.path()), ("PATCH", path), "{kind}");
    }
    // a kind of no table is looked up by discovery; a group the server does not serve is
    // Invalid naming the kind
    replay.push(Reply::json(
        404,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
               "message": "the server could not find the requested resource",
               "reason": "NotFound", "code": 404}),
        "a 404 of discovery",
    ));
    let object =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}});
    let e = cluster
        .apply_object(ApplyObject::new("ns1", object))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid { message, .. } if message.contains("kind Widget of apiVersion example.com/v1")),
        "{e:?}"
    );
    assert_eq!(
        replay.requests().last().unwrap().path(),
        "/apis/example.com/v1"
    );
    // a manifest without kind or name is refused before any request
    let before = replay.requests().len();
    for object in [
        json!({"apiVersion": "v1", "metadata": {"name": "x"}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {}}),
    ] {
        let e = cluster
            .apply_object(ApplyObject::new("ns1", object))
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::Invalid { .. }), "{e:?}");
    }
    assert_eq!(replay.requests().len(), before);
}

#[tokio::test]
async fn delete_object_deletes_in_the_background() {
    let Some([cap]) = captures(["46-delete-deployment-200"]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    replay.push(cap.reply());
    cluster
        .delete_object(ObjectRef::new("apps/v1", "Deployment", "default", "vdu2"))
        .await
        .unwrap();
    let req = replay.request();
    assert_eq!(
        (req.method.as_str(), req.path()),
        ("DELETE", cap.path.as_str())
    );
    assert_eq!(req.json()["propagationPolicy"], "Background");
}

#[tokio::test]
async fn list_workloads_returns_manifests_the_core_reads() {
    let Some([deployment]) = captures(["31-get-deployment-vdu1-available-false"]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    // a list of the captured Deployment (list items carry no apiVersion and kind), no
    // StatefulSet
    let mut item = deployment.response.clone();
    let o = item.as_object_mut().unwrap();
    o.remove("apiVersion");
    o.remove("kind");
    replay.push(Reply::json(
        200,
        json!({"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": {}, "items": [item]}),
        "a DeploymentList of capture 31",
    ));
    replay.push(Reply::json(
        200,
        json!({"kind": "StatefulSetList", "apiVersion": "apps/v1", "metadata": {}, "items": []}),
        "an empty StatefulSetList",
    ));
    let listed = cluster
        .list_workloads(ListWorkloads::new("default"))
        .await
        .unwrap();
    let paths: Vec<String> = replay.requests().iter().map(|r| r.target.clone()).collect();
    assert_eq!(
        paths,
        [
            "/apis/apps/v1/namespaces/default/deployments?",
            "/apis/apps/v1/namespaces/default/statefulsets?"
        ]
    );
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["apiVersion"], "apps/v1");
    assert_eq!(listed[0]["kind"], "Deployment");
    assert_eq!(listed[0]["status"], deployment.response["status"]);
    let w = Workload::from_object(&listed[0], "default").unwrap();
    assert_eq!((w.name.as_str(), w.replicas), ("vdu1", 3));
    assert_eq!(w.affinity.len(), 1, "{w:?}");
}

#[tokio::test]
async fn scale_patches_the_scale_subresource() {
    let Some([scaled, missing, stale]) = captures([
        "32-patch-deployment-scale-to-4-merge-patch",
        "29-get-deployment-scale-missing-404",
        "35-put-deployment-scale-stale-resourceversion-409",
    ]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    replay.push(scaled.reply());
    cluster
        .scale_workload(ScaleWorkload::new("default", "vdu1", 4))
        .await
        .unwrap();
    let req = replay.request();
    assert_as_captured(&req, &scaled);
    assert_eq!(
        req.header("content-type"),
        Some("application/merge-patch+json")
    );
    assert_eq!(Some(req.json()), scaled.body);
    // a missing workload (the 404 of a GET of its scale) and a conflict (the 409 of a PUT)
    replay.push(missing.reply_to_any());
    let e = cluster
        .scale_workload(ScaleWorkload::new("default", "nope", 1))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert!(
        e.to_string()
            .contains(r#"deployments.apps "nope" not found"#),
        "{e}"
    );
    replay.push(stale.reply_to_any());
    let e = cluster
        .scale_workload(ScaleWorkload::new("default", "vdu1", 3))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DriverError::Conflict { message, .. } if message.contains("the object has been modified")),
        "{e:?}"
    );
    let reqs = replay.requests();
    assert_eq!(
        reqs[2].path(),
        "/apis/apps/v1/namespaces/default/deployments/vdu1/scale"
    );
}

// ------------------------------------------------------------------------------------ pods

#[tokio::test]
async fn list_pods_maps_nodes_and_the_unschedulable_condition() {
    let Some([cap]) = captures(["33-list-pods-vdu1-one-unschedulable"]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    replay.push(cap.reply());
    let pods = cluster
        .list_pods(ListPods::new("default", "vdu1"))
        .await
        .unwrap();
    assert_as_captured(&replay.request(), &cap);
    assert_eq!(pods.len(), 4);
    let mut nodes: Vec<&str> = pods
        .iter()
        .filter_map(|p| p.node.as_ref().map(NodeName::as_str))
        .collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["worker-1", "worker-2", "worker-3"]);
    for p in &pods {
        assert_eq!(p.namespace, "default");
        assert_eq!(p.labels.get("app").map(String::as_str), Some("vdu1"));
        assert_eq!(p.phase, "Pending", "no kubelet runs them");
        assert!(!p.deleting);
        let s = p.scheduled.as_ref().unwrap();
        assert_eq!(s.status, p.node.is_some(), "{p:?}");
    }
    let pending = pods.iter().find(|p| p.node.is_none()).unwrap();
    let s = pending.scheduled.as_ref().unwrap();
    assert_eq!(s.reason.as_deref(), Some("Unschedulable"));
    let m = s.message.as_deref().unwrap();
    assert!(
        m.starts_with("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules"),
        "{m}"
    );
}

#[tokio::test]
async fn a_pod_deleted_without_kubelet_is_listed_as_deleting() {
    let Some([cap]) = captures(["43-delete-bound-pod-graceful-no-kubelet"]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    // the captured answer of a graceful delete is the pod, deletionTimestamp set: as a list
    replay.push(Reply::json(
        200,
        json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [cap.response]}),
        "a PodList of capture 43",
    ));
    let pods = cluster
        .list_pods(ListPods::selected("default", BTreeMap::new()))
        .await
        .unwrap();
    assert_eq!(replay.request().target, "/api/v1/namespaces/default/pods?");
    assert_eq!(pods.len(), 1);
    assert!(pods[0].deleting && pods[0].node.is_some(), "{:?}", pods[0]);
}

#[tokio::test]
async fn delete_pod_sends_the_grace_period() {
    let Some([force, missing]) = captures([
        "44-delete-bound-pod-force-grace0",
        "40-delete-pod-missing-404",
    ]) else {
        return;
    };
    let name = force.path_only().rsplit('/').next().unwrap().to_owned();
    let (replay, cluster) = cluster(None).await;
    replay.push(force.reply());
    cluster
        .delete_pod(DeletePod::new("default", &name).with_grace(0))
        .await
        .unwrap();
    let req = replay.request();
    assert_as_captured(&req, &force);
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.json()["gracePeriodSeconds"], 0);
    // without a grace period the pod's own applies: none is sent
    let gone = missing.path_only().rsplit('/').next().unwrap().to_owned();
    replay.push(missing.reply());
    let e = cluster
        .delete_pod(DeletePod::new("default", &gone))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert!(
        e.to_string()
            .contains(&format!(r#"pods "{gone}" not found"#)),
        "{e}"
    );
    let req = &replay.requests()[1];
    assert_as_captured(req, &missing);
    assert_eq!(req.json().get("gracePeriodSeconds"), None);
}

#[tokio::test]
async fn evict_posts_an_eviction_and_a_budget_refusal_is_a_conflict() {
    let (replay, cluster) = cluster(None).await;
    // no capture has an eviction: the answers are the API server's documented ones
    replay.push(Reply::json(
        201,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        "an eviction accepted",
    ));
    cluster
        .evict_pod(EvictPod::new("default", "vdu1-a"))
        .await
        .unwrap();
    let req = replay.request();
    assert_eq!(req.method, "POST");
    assert_eq!(
        req.path(),
        "/api/v1/namespaces/default/pods/vdu1-a/eviction"
    );
    let body = req.json();
    assert_eq!(
        (
            &body["apiVersion"],
            &body["kind"],
            &body["metadata"]["name"]
        ),
        (&json!("policy/v1"), &json!("Eviction"), &json!("vdu1-a"))
    );
    replay.push(Reply::json(
        429,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Cannot evict pod as it would violate the pod's disruption budget.",
               "reason": "TooManyRequests",
               "details": {"causes": [{"reason": "DisruptionBudget",
                   "message": "The disruption budget vdu1 needs 3 healthy pods and has 3 currently"}]},
               "code": 429}),
        "an eviction a PodDisruptionBudget refuses",
    ));
    let e = cluster
        .evict_pod(EvictPod::new("default", "vdu1-a"))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DriverError::Conflict { message, .. } if message.contains("violate the pod's disruption budget")),
        "{e:?}"
    );
    assert_eq!(
        replay.requests().len(),
        2,
        "a 429 is not retried by the adapter"
    );
}

#[tokio::test]
async fn list_events_reads_failed_scheduling() {
    let Some([cap]) = captures(["45-list-events-failedscheduling"]) else {
        return;
    };
    let (replay, cluster) = cluster(None).await;
    replay.push(cap.reply());
    let events = cluster
        .list_events(ListEvents::new("default"))
        .await
        .unwrap();
    // the adapter lists every event of the namespace (the capture filtered by fieldSelector)
    assert_eq!(replay.request().path(), cap.path_only());
    assert_eq!(events.len(), 2);
    for e in &events {
        assert_eq!(
            (e.object_kind.as_str(), e.kind.as_str()),
            ("Pod", "Warning")
        );
        assert_eq!(e.reason, "FailedScheduling");
        assert!(e.object_name.starts_with("vdu1-"), "{e:?}");
        assert!(
            e.message.contains("didn't match pod anti-affinity rules"),
            "{e:?}"
        );
        assert_eq!(e.count, 1, "written through events.k8s.io/v1: no count");
    }
}

// ------------------------------------------------------------------------------------ failures

#[tokio::test]
async fn a_watch_timeout_status_is_unavailable() {
    let Some([cap]) = captures(["53-watch-pods-error-504-too-large-rv-etcd3.4-watchcache"]) else {
        return;
    };
    // the Status the ERROR event carries, answered to a list
    let status = find_status(&cap.response).expect("a Status in capture 53");
    let (replay, cluster) = cluster(None).await;
    let code = u16::try_from(status["code"].as_u64().unwrap()).unwrap();
    replay.push(Reply::json(code, status.clone(), "capture 53's Status"));
    let e = cluster.list_nodes().await.unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    assert!(
        e.to_string().contains(status["message"].as_str().unwrap()),
        "{e}"
    );
}

/// The first object of `v` (depth first) whose `kind` is `Status`.
fn find_status(v: &Value) -> Option<&Value> {
    match v {
        Value::Object(o) if o.get("kind") == Some(&json!("Status")) => Some(v),
        Value::Object(o) => o.values().find_map(find_status),
        Value::Array(a) => a.iter().find_map(find_status),
        _ => None,
    }
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable_naming_its_url() {
    // a port that was free a moment ago: nothing listens there
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    let url = format!("http://127.0.0.1:{port}");
    std::fs::write(&path, replay::kubeconfig(&url)).unwrap();
    let cluster = KubeCluster::from_kubeconfig(&path, None).await.unwrap();
    let e = cluster.list_nodes().await.unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    assert!(e.to_string().contains(&url), "{e}");
    assert!(e.to_string().contains("list nodes"), "{e}");
}

#[tokio::test]
async fn an_unknown_context_is_a_configuration_error() {
    let replay = Replay::start();
    let e = KubeCluster::from_kubeconfig(&replay.kubeconfig(), Some("nope"))
        .await
        .unwrap_err();
    assert!(matches!(e, vnfm_k8s::Error::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("context nope"), "{e}");
    let e = KubeCluster::from_kubeconfig(replay::nowhere(), None)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("/nonexistent/vnfm-k8s/kubeconfig"),
        "{e}"
    );
}
