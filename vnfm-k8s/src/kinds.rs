//! Which resource of the API server serves a manifest's `apiVersion` and `kind`.
//!
//! A fixed table names the kinds a CNF is made of (below); they are mapped without asking the
//! API server. Any other kind (a CustomResourceDefinition's, or a built-in kind not in the
//! table) is looked up once through API discovery of its group version
//! (`GET /api/v1` or `GET /apis/<group>/<version>`) and remembered by the [`KubeCluster`]
//! (clones share what was discovered).
//!
//! | apiVersion | kinds |
//! |---|---|
//! | `v1` | ConfigMap, Secret, Service, ServiceAccount, Pod, PersistentVolumeClaim, Endpoints, LimitRange, ResourceQuota; Namespace, PersistentVolume (cluster-scoped) |
//! | `apps/v1` | Deployment, StatefulSet, DaemonSet, ReplicaSet |
//! | `policy/v1` | PodDisruptionBudget |
//! | `batch/v1` | Job, CronJob |
//! | `autoscaling/v2` | HorizontalPodAutoscaler |
//! | `networking.k8s.io/v1` | NetworkPolicy, Ingress |
//! | `rbac.authorization.k8s.io/v1` | Role, RoleBinding; ClusterRole, ClusterRoleBinding (cluster-scoped) |
//! | `scheduling.k8s.io/v1` | PriorityClass (cluster-scoped) |
//! | `storage.k8s.io/v1` | StorageClass (cluster-scoped) |
//!
//! [`KubeCluster`]: crate::KubeCluster

use kube::core::{ApiResource, GroupVersionKind};

/// A resource of the API server: what a manifest's `apiVersion` and `kind` map to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// Group, version, kind and plural.
    pub api: ApiResource,
    /// True for namespaced kinds, false for cluster-scoped ones.
    pub namespaced: bool,
}

/// `(apiVersion, kind, plural, namespaced)` of the kinds mapped without discovery.
const TABLE: &[(&str, &str, &str, bool)] = &[
    ("v1", "ConfigMap", "configmaps", true),
    ("v1", "Secret", "secrets", true),
    ("v1", "Service", "services", true),
    ("v1", "ServiceAccount", "serviceaccounts", true),
    ("v1", "Pod", "pods", true),
    (
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
    ),
    ("v1", "Endpoints", "endpoints", true),
    ("v1", "LimitRange", "limitranges", true),
    ("v1", "ResourceQuota", "resourcequotas", true),
    ("v1", "Namespace", "namespaces", false),
    ("v1", "PersistentVolume", "persistentvolumes", false),
    ("apps/v1", "Deployment", "deployments", true),
    ("apps/v1", "StatefulSet", "statefulsets", true),
    ("apps/v1", "DaemonSet", "daemonsets", true),
    ("apps/v1", "ReplicaSet", "replicasets", true),
    (
        "policy/v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    ("batch/v1", "Job", "jobs", true),
    ("batch/v1", "CronJob", "cronjobs", true),
    (
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    (
        "networking.k8s.io/v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    ("networking.k8s.io/v1", "Ingress", "ingresses", true),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    (
        "scheduling.k8s.io/v1",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses", false),
];

/// The group and version of an `apiVersion` (`v1` is the core group `""`).
pub fn group_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// The resource of `api_version` `kind` from the fixed table, if it is there.
pub fn known(api_version: &str, kind: &str) -> Option<Resource> {
    TABLE
        .iter()
        .find(|(v, k, _, _)| *v == api_version && *k == kind)
        .map(|&(v, k, plural, namespaced)| {
            let (group, version) = group_version(v);
            Resource {
                api: ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk(group, version, k),
                    plural,
                ),
                namespaced,
            }
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn the_kinds_of_a_cnf_are_mapped() {
        for (v, k, plural, namespaced) in [
            ("apps/v1", "Deployment", "deployments", true),
            ("apps/v1", "StatefulSet", "statefulsets", true),
            ("apps/v1", "DaemonSet", "daemonsets", true),
            ("v1", "Service", "services", true),
            ("v1", "ConfigMap", "configmaps", true),
            ("v1", "Secret", "secrets", true),
            ("v1", "ServiceAccount", "serviceaccounts", true),
            (
                "policy/v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                true,
            ),
            ("v1", "Namespace", "namespaces", false),
        ] {
            let r = known(v, k).unwrap();
            assert_eq!(r.api.api_version, v);
            assert_eq!(r.api.kind, k);
            assert_eq!(r.api.plural, plural);
            assert_eq!(r.namespaced, namespaced, "{k}");
        }
        let r = known("policy/v1", "PodDisruptionBudget").unwrap();
        assert_eq!(
            (r.api.group.as_str(), r.api.version.as_str()),
            ("policy", "v1")
        );
        assert!(known("apps/v1beta1", "Deployment").is_none());
        assert!(known("example.com/v1", "Widget").is_none());
        assert_eq!(group_version("v1"), ("", "v1"));
    }
}
