//! [`ClusterDriver`] for [`KubeCluster`]: one request to the API server per call.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Event, Node, Pod as KubePod};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::{json, Value};
use vnfm_core::driver::{
    ApplyObject, ClusterDriver, ClusterEvent, ClusterNode, DeletePod, DriverError, EvictPod,
    LabelNode, ListEvents, ListPods, ListWorkloads, ObjectRef, Pod, ScaleWorkload, WorkloadKind,
};

use crate::error::Error;
use crate::kinds::{self, Resource};
use crate::{convert, KubeCluster, FIELD_MANAGER};

impl KubeCluster {
    /// Maps a kube error of `call` into a [`DriverError`].
    fn fail(&self, call: impl Into<String>) -> impl FnOnce(kube::Error) -> DriverError + '_ {
        let call = call.into();
        move |e| Error::from_kube(call, &self.server, e).into()
    }

    /// The namespace of a namespaced request: the one given, else the client's default.
    fn namespace<'a>(&'a self, namespace: &'a str) -> &'a str {
        if namespace.is_empty() {
            self.client.default_namespace()
        } else {
            namespace
        }
    }

    /// The resource serving `api_version` `kind`: the fixed table, what discovery found
    /// before, or API discovery of the group version now.
    async fn resource(&self, api_version: &str, kind: &str) -> Result<Resource, DriverError> {
        if let Some(r) = kinds::known(api_version, kind) {
            return Ok(r);
        }
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(r) = self
            .discovered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return Ok(r.clone());
        }
        let (group, version) = kinds::group_version(api_version);
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let unmapped = || {
            DriverError::from(Error::Request(format!(
                "kind {kind} of apiVersion {api_version} is not served by the API server at {} \
                 (not a kind vnfm maps, and discovery of {api_version} does not list it)",
                self.server
            )))
        };
        let (api, caps) = match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok(found) => found,
            Err(kube::Error::Discovery(_)) => return Err(unmapped()),
            Err(kube::Error::Api(s)) if s.code == 404 => return Err(unmapped()),
            Err(e) => return Err(self.fail(format!("discover {kind} of {api_version}"))(e)),
        };
        let r = Resource {
            api,
            namespaced: caps.scope == Scope::Namespaced,
        };
        self.discovered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, r.clone());
        Ok(r)
    }

    /// The dynamic API of `r` in `namespace` (ignored for cluster-scoped kinds).
    fn dynamic(&self, r: &Resource, namespace: &str) -> Api<DynamicObject> {
        if r.namespaced {
            Api::namespaced_with(self.client.clone(), self.namespace(namespace), &r.api)
        } else {
            Api::all_with(self.client.clone(), &r.api)
        }
    }

    fn workload(kind: WorkloadKind) -> Result<Resource, DriverError> {
        kinds::known("apps/v1", kind.as_str()).ok_or_else(|| {
            Error::Request(format!("workload kind {kind} is not in the kinds table")).into()
        })
    }
}

/// A manifest's `field`, which must be a non-empty string.
fn field<'a>(object: &'a Value, pointer: &str, what: &str) -> Result<&'a str, DriverError> {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::Request(format!("the manifest has no {what} ({pointer})")).into())
}

/// `k=v,k2=v2` of a `matchLabels` selector.
fn label_selector(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[async_trait]
impl ClusterDriver for KubeCluster {
    async fn list_nodes(&self) -> Result<Vec<ClusterNode>, DriverError> {
        let nodes = Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(self.fail("list nodes"))?;
        Ok(nodes.items.iter().map(convert::node).collect())
    }

    async fn label_node(&self, req: LabelNode) -> Result<(), DriverError> {
        let patch = json!({ "metadata": { "labels": req.labels } });
        Api::<Node>::all(self.client.clone())
            .patch(
                req.node.as_str(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(self.fail(format!("label node {}", req.node)))?;
        Ok(())
    }

    async fn apply_object(&self, req: ApplyObject) -> Result<(), DriverError> {
        let api_version = field(&req.object, "/apiVersion", "apiVersion")?;
        let kind = field(&req.object, "/kind", "kind")?;
        let name = field(&req.object, "/metadata/name", "name")?;
        let namespace = match req
            .object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            Some(ns) if req.namespace.is_empty() => ns,
            _ => req.namespace.as_str(),
        };
        let r = self.resource(api_version, kind).await?;
        let call = if r.namespaced {
            format!("apply {kind} {}/{name}", self.namespace(namespace))
        } else {
            format!("apply {kind} {name}")
        };
        self.dynamic(&r, namespace)
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&req.object),
            )
            .await
            .map_err(self.fail(call))?;
        Ok(())
    }

    async fn delete_object(&self, req: ObjectRef) -> Result<(), DriverError> {
        let r = self.resource(&req.api_version, &req.kind).await?;
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        self.dynamic(&r, &req.namespace)
            .delete(&req.name, &params)
            .await
            .map_err(self.fail(format!("delete {req}")))?;
        Ok(())
    }

    async fn list_workloads(&self, req: ListWorkloads) -> Result<Vec<Value>, DriverError> {
        let mut out = Vec::new();
        for kind in [WorkloadKind::Deployment, WorkloadKind::StatefulSet] {
            let r = Self::workload(kind)?;
            let call = format!("list {kind}s of {}", req.namespace);
            let list = self
                .dynamic(&r, &req.namespace)
                .list(&ListParams::default())
                .await
                .map_err(self.fail(call.clone()))?;
            for item in list.items {
                let mut object = serde_json::to_value(&item).map_err(|e| DriverError::Other {
                    driver: crate::error::DRIVER,
                    message: format!("{call}: cannot serialize an item"),
                    source: Some(Box::new(e)),
                })?;
                // list items carry no apiVersion and kind
                if let Some(o) = object.as_object_mut() {
                    o.insert("apiVersion".into(), Value::from(r.api.api_version.clone()));
                    o.insert("kind".into(), Value::from(r.api.kind.clone()));
                }
                out.push(object);
            }
        }
        Ok(out)
    }

    async fn scale_workload(&self, req: ScaleWorkload) -> Result<(), DriverError> {
        let r = Self::workload(req.kind)?;
        let patch = json!({ "spec": { "replicas": req.replicas } });
        self.dynamic(&r, &req.namespace)
            .patch_scale(&req.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(self.fail(format!(
                "scale {} {}/{} to {}",
                req.kind, req.namespace, req.name, req.replicas
            )))?;
        Ok(())
    }

    async fn list_pods(&self, req: ListPods) -> Result<Vec<Pod>, DriverError> {
        let mut params = ListParams::default();
        if !req.selector.is_empty() {
            params = params.labels(&label_selector(&req.selector));
        }
        let pods = Api::<KubePod>::namespaced(self.client.clone(), self.namespace(&req.namespace))
            .list(&params)
            .await
            .map_err(self.fail(format!(
                "list pods of {} selected by {:?}",
                req.namespace,
                label_selector(&req.selector)
            )))?;
        Ok(pods.items.iter().map(convert::pod).collect())
    }

    async fn delete_pod(&self, req: DeletePod) -> Result<(), DriverError> {
        let params = DeleteParams {
            grace_period_seconds: req.grace_seconds,
            ..DeleteParams::default()
        };
        Api::<KubePod>::namespaced(self.client.clone(), self.namespace(&req.namespace))
            .delete(&req.name, &params)
            .await
            .map_err(self.fail(format!("delete pod {}/{}", req.namespace, req.name)))?;
        Ok(())
    }

    async fn evict_pod(&self, req: EvictPod) -> Result<(), DriverError> {
        let namespace = self.namespace(&req.namespace);
        let eviction = json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": { "name": req.name, "namespace": namespace },
        });
        Api::<KubePod>::namespaced(self.client.clone(), namespace)
            .create_subresource::<_, Value>(
                "eviction",
                &req.name,
                &PostParams::default(),
                &eviction,
            )
            .await
            .map_err(self.fail(format!("evict pod {}/{}", req.namespace, req.name)))?;
        Ok(())
    }

    async fn list_events(&self, req: ListEvents) -> Result<Vec<ClusterEvent>, DriverError> {
        let events = Api::<Event>::namespaced(self.client.clone(), self.namespace(&req.namespace))
            .list(&ListParams::default())
            .await
            .map_err(self.fail(format!("list events of {}", req.namespace)))?;
        Ok(events.items.iter().map(convert::event).collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn selectors_and_manifest_fields() {
        let sel = BTreeMap::from([
            ("app".to_owned(), "vdu1".to_owned()),
            ("tier".to_owned(), "a".to_owned()),
        ]);
        assert_eq!(label_selector(&sel), "app=vdu1,tier=a");
        let o = json!({"kind": "Deployment", "metadata": {"name": ""}});
        assert_eq!(field(&o, "/kind", "kind").unwrap(), "Deployment");
        let e = field(&o, "/metadata/name", "name").unwrap_err();
        assert!(matches!(e, DriverError::Invalid { .. }), "{e}");
        assert!(e.to_string().contains("/metadata/name"), "{e}");
    }
}
