//! CNFs ("VNF B"): a flavour whose VDUs are Kubernetes workloads of the package, in Tacker
//! v2's layout, as pure functions the [`super::Operation`] machine calls.
//!
//! - **Layout**: the manifests are the `.yaml` / `.yml` files directly under
//!   `Files/kubernetes/` ([`crate::package::VnfPackage::kubernetes`]); the request's
//!   `additionalParams.lcm-kubernetes-def-files` lists the ones to apply (in that order),
//!   otherwise all of them are applied, by path. A file may hold several YAML documents. Each
//!   VDU (`tosca.nodes.nfv.Vdu.Compute`) of the flavour is the Deployment or StatefulSet whose
//!   `metadata.name` is the VDU's `name`; its `spec.replicas` is set to the VDU's number of
//!   instances at the instantiation level (`VduInitialDelta` / `VduInstantiationLevels`), and
//!   a scaling aspect's `VduScalingAspectDeltas` add or remove replicas. Other objects
//!   (Services, ConfigMaps, ...) are applied and deleted with the instance.
//! - **Namespace**: `additionalParams.namespace`, else the configured one
//!   ([`super::LcmConfig::cnf_namespace`], `default`). A manifest naming another namespace is
//!   refused.
//! - **Preflight** (instantiate, over the cluster's nodes): a workload with a *required* pod
//!   anti-affinity among its own pods on the host label key
//!   ([`super::LcmConfig::host_label`]) and more replicas than the nodes have distinct values
//!   of that label is refused, naming both numbers (with `fallbackBestEffort`, it is allowed
//!   and reported); an anti-affinity term on another topology key is reported naming both keys.
//! - **VNFCs**: one per pod of a VDU's workload: `vnfcResourceInfo.id` and
//!   `computeResource.resourceId` are the pod name, `vimLevelResourceType` the workload kind
//!   (SOL003 for CNFs), `metadata` the namespace, the workload, the node (absent while
//!   pending) and, for a pending pod, the scheduler's reason.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::cluster::{LabelSelector, Workload};
use crate::driver::{ClusterNode, ObjectRef, Pod, WorkloadKind};
use crate::error::{Error, Location};
use crate::grant::{KeyValuePairs, ResourceHandle};
use crate::id::VduId;
use crate::lcm::{InstantiateVnfRequest, VnfInstance, VnfcResourceInfo};
use crate::package::{Flavour, VnfPackage};

/// `additionalParams` key of the instance's namespace.
pub const NAMESPACE_PARAM: &str = "namespace";
/// `additionalParams` key listing the manifest files to apply (Tacker v2's name).
pub const DEF_FILES_PARAM: &str = "lcm-kubernetes-def-files";
/// The instance metadata key of a CNF instance's [`CnfResources`].
pub const CNF_KEY: &str = "cnf";

/// The workload of one VDU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CnfWorkload {
    /// The VDU.
    pub vdu: VduId,
    /// Deployment or StatefulSet.
    pub kind: WorkloadKind,
    /// `metadata.name`.
    pub name: String,
    /// `spec.selector`: which pods are its.
    pub selector: LabelSelector,
    /// The replicas it should have.
    pub replicas: u32,
}

/// What a CNF instance is made of on its cluster, kept in the instance's `metadata.cnf`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CnfResources {
    /// The namespace of every object.
    pub namespace: String,
    /// The objects applied, in order.
    pub objects: Vec<ObjectRef>,
    /// The workload of every VDU.
    pub workloads: Vec<CnfWorkload>,
}

impl CnfResources {
    /// The resources of a CNF instance (`None` for a VM-based one).
    pub fn of(inst: &VnfInstance) -> Option<Self> {
        let v = inst.metadata.as_ref()?.get(CNF_KEY)?;
        serde_json::from_value(v.clone()).ok()
    }

    pub(crate) fn set(&self, inst: &mut VnfInstance) {
        inst.metadata
            .get_or_insert_with(Default::default)
            .insert(CNF_KEY.into(), json!(self));
    }

    pub(crate) fn clear(inst: &mut VnfInstance) {
        if let Some(m) = inst.metadata.as_mut() {
            m.remove(CNF_KEY);
        }
    }
}

/// The work of a CNF operation, saved in its progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CnfWork {
    /// The instance's resources after the operation (the replicas it asks for).
    pub resources: CnfResources,
    /// Instantiate: the manifests to apply, in order, replicas set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<Value>,
    /// Heal: the pods to delete (they must be gone from the listing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub heal_pods: Vec<String>,
    /// The preflight ran (a retry does not refuse again what it let through).
    #[serde(default)]
    pub checked: bool,
}

impl CnfWork {
    /// The work over `resources`, nothing to apply or delete yet.
    pub fn of(resources: CnfResources) -> Self {
        Self {
            resources,
            manifests: Vec::new(),
            heal_pods: Vec::new(),
            checked: true,
        }
    }
}

fn invalid(field: &str, message: String) -> Error {
    Error::invalid(Location::default().with_field(field), message)
}

/// The namespace and the manifests a CNF instantiate applies: see the [module docs](self).
///
/// # Errors
/// A file the request lists that the package lacks, a manifest that is not YAML or names
/// another namespace, a VDU without its workload.
pub(crate) fn plan_instantiate(
    pkg: &VnfPackage,
    flavour: &Flavour,
    req: &InstantiateVnfRequest,
    default_namespace: &str,
) -> Result<CnfWork, Error> {
    let params = req.additional_params.as_ref();
    let namespace = namespace_param(params, default_namespace)?;
    let files = def_files_param(pkg, params)?;
    let mut manifests = Vec::new();
    for f in &files {
        manifests.extend(read_manifests(pkg, f, &namespace)?);
    }
    let level = req.instantiation_level_id.as_deref();
    let mut workloads = Vec::new();
    for (id, vdu) in &flavour.vdus {
        let found = manifests.iter_mut().find(|o| {
            o.get("kind")
                .and_then(Value::as_str)
                .and_then(WorkloadKind::parse)
                .is_some()
                && o.pointer("/metadata/name").and_then(Value::as_str) == Some(vdu.name.as_str())
        });
        let Some(obj) = found else {
            return Err(invalid(
                "flavourId",
                format!(
                    "VDU {id} of flavour {} is no Deployment or StatefulSet named {:?} in {}",
                    flavour.id,
                    vdu.name,
                    files.join(", ")
                ),
            ));
        };
        if let Some(n) = flavour.instances_at_level(id, level) {
            obj["spec"]["replicas"] = json!(n);
        }
        let w = Workload::from_object(obj, &namespace)
            .map_err(|e| invalid("Files/kubernetes", e.to_string()))?;
        workloads.push(CnfWorkload {
            vdu: id.clone(),
            kind: w.kind,
            name: w.name,
            selector: w.selector,
            replicas: w.replicas,
        });
    }
    let objects = manifests
        .iter()
        .map(|o| object_ref(o, &namespace))
        .collect();
    Ok(CnfWork {
        resources: CnfResources {
            namespace,
            objects,
            workloads,
        },
        manifests,
        heal_pods: Vec::new(),
        checked: false,
    })
}

/// The instance's namespace: `additionalParams.namespace`, else `default_namespace`.
fn namespace_param(
    params: Option<&KeyValuePairs>,
    default_namespace: &str,
) -> Result<String, Error> {
    match params.and_then(|p| p.get(NAMESPACE_PARAM)) {
        None | Some(Value::Null) => Ok(default_namespace.to_owned()),
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(v) => Err(invalid(
            "additionalParams.namespace",
            format!("{v}: expected a namespace name"),
        )),
    }
}

/// The manifest files to apply: those `additionalParams` lists (each a manifest of the
/// package), else every manifest of the package.
fn def_files_param(pkg: &VnfPackage, params: Option<&KeyValuePairs>) -> Result<Vec<String>, Error> {
    match params.and_then(|p| p.get(DEF_FILES_PARAM)) {
        None | Some(Value::Null) => Ok(pkg.kubernetes.keys().cloned().collect()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|f| {
                let path = f.as_str().unwrap_or_default().trim_start_matches("./");
                if pkg.kubernetes.contains_key(path) {
                    Ok(path.to_owned())
                } else {
                    Err(invalid(
                        &format!("additionalParams.{DEF_FILES_PARAM}"),
                        format!(
                            "{f} is not a manifest of package {}; it has {}",
                            pkg.source,
                            super::plan::list(pkg.kubernetes.keys())
                        ),
                    ))
                }
            })
            .collect(),
        Some(v) => Err(invalid(
            &format!("additionalParams.{DEF_FILES_PARAM}"),
            format!("{v}: expected a list of paths (Files/kubernetes/...)"),
        )),
    }
}

/// The objects of manifest file `f` of the package, each with a kind and a name, in
/// `namespace` or none.
fn read_manifests(pkg: &VnfPackage, f: &str, namespace: &str) -> Result<Vec<Value>, Error> {
    let text = pkg
        .kubernetes
        .get(f)
        .map(String::as_str)
        .unwrap_or_default();
    let mut out = Vec::new();
    for obj in parse_manifests(f, text)? {
        let at = |field: &str| Location::file(f).with_field(field.to_owned());
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind.is_empty() || name.is_empty() {
            return Err(Error::invalid(
                at("kind"),
                "expected a Kubernetes object with `kind` and `metadata.name`",
            ));
        }
        if let Some(ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str) {
            if ns != namespace {
                return Err(Error::invalid(
                    at("metadata.namespace"),
                    format!(
                        "{kind} {name} names namespace {ns:?}, the instance's is \
                         {namespace:?} (set additionalParams.namespace)"
                    ),
                ));
            }
        }
        out.push(obj);
    }
    Ok(out)
}

/// The reference to the object of manifest `o`, in `namespace`.
fn object_ref(o: &Value, namespace: &str) -> ObjectRef {
    let s = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    ObjectRef::new(s("/apiVersion"), s("/kind"), namespace, s("/metadata/name"))
}

/// The objects of one manifest file (its YAML documents; empty ones skipped).
fn parse_manifests(file: &str, text: &str) -> Result<Vec<Value>, Error> {
    crate::input::check_nesting(file, text)?;
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = serde_yaml::Value::deserialize(doc)
            .map_err(|e| Error::invalid(Location::file(file), format!("not YAML: {e}")))?;
        if v.is_null() {
            continue;
        }
        let j = serde_json::to_value(&v).map_err(|e| {
            Error::invalid(Location::file(file), format!("not a JSON-like object: {e}"))
        })?;
        if !j.is_object() {
            return Err(Error::invalid(
                Location::file(file),
                "expected each YAML document to be a Kubernetes object (a mapping)",
            ));
        }
        out.push(j);
    }
    Ok(out)
}

/// What the preflight found: warnings, and the refusal (when not best effort).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Preflight {
    pub warnings: Vec<String>,
    pub refused: Vec<String>,
}

/// The preflight of [the module docs](self) over the manifests of an instantiate and the
/// cluster's nodes.
pub(crate) fn preflight(
    manifests: &[Value],
    namespace: &str,
    nodes: &[ClusterNode],
    host_key: &str,
    best_effort: bool,
) -> Preflight {
    let mut out = Preflight::default();
    let hosts: BTreeSet<&str> = nodes
        .iter()
        .filter_map(|n| n.labels.get(host_key).map(String::as_str))
        .collect();
    for obj in manifests {
        let Ok(w) = Workload::from_object(obj, namespace) else {
            continue;
        };
        for t in w.self_anti_affinity() {
            if t.topology_key != host_key {
                out.warnings.push(format!(
                    "{} {}: its pod anti-affinity topologyKey is {:?}, not the host label key \
                     {host_key:?}: its pods are spread over {:?} values, not over compute hosts",
                    w.kind, w.name, t.topology_key, t.topology_key
                ));
                continue;
            }
            if !t.required || w.replicas as usize <= hosts.len() {
                continue;
            }
            let what = format!(
                "{} {} asks for {} replicas with required pod anti-affinity on {host_key:?}, \
                 and the cluster's nodes have {} distinct value(s) of that label{}",
                w.kind,
                w.name,
                w.replicas,
                hosts.len(),
                if hosts.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({})",
                        hosts.iter().copied().collect::<Vec<_>>().join(", ")
                    )
                },
            );
            if best_effort {
                out.warnings.push(format!(
                    "{what}: allowed by fallbackBestEffort; {} pod(s) will stay Pending",
                    w.replicas as usize - hosts.len()
                ));
            } else {
                out.refused
                    .push(format!("{what}: at most {} can be scheduled", hosts.len()));
            }
        }
    }
    out
}

/// The pods of each workload (being deleted or named in `excluded`: left out).
fn pods_of<'a>(
    res: &'a CnfResources,
    pods: &'a [Pod],
    excluded: &'a [String],
) -> impl Iterator<Item = (&'a CnfWorkload, Vec<&'a Pod>)> + 'a {
    res.workloads.iter().map(move |w| {
        let mut mine: Vec<&Pod> = pods
            .iter()
            .filter(|p| !p.deleting && !excluded.contains(&p.name))
            .filter(|p| w.selector.matches(&p.labels))
            .collect();
        mine.sort_by(|a, b| a.name.cmp(&b.name));
        (w, mine)
    })
}

/// How long after a pod of the namespace was last seen terminating (or was deleted by the
/// operation) a scheduler's `Unschedulable` verdict is still provisional. The real
/// kube-scheduler still counts a deleted pod (its cache lags the API) and may refuse the
/// replacement for anti-affinity; on the delete event it tries again after the pod's back-off
/// (1 s after one attempt, doubling to 10 s) and binds it (found against the real control
/// plane: a heal ended with its replacement reported pending, bound a moment later).
pub(crate) const VERDICT_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// True when a pod of the namespace that one of the workloads selects is terminating: listed
/// with a deletion timestamp, or named in `excluded` (healed) and still listed.
pub(crate) fn terminating(res: &CnfResources, pods: &[Pod], excluded: &[String]) -> bool {
    pods.iter().any(|p| {
        (p.deleting || excluded.contains(&p.name))
            && res.workloads.iter().any(|w| w.selector.matches(&p.labels))
    })
}

/// `Ok` when every workload has exactly its replicas listed, none of them `excluded`, and the
/// scheduler has decided about each: bound to a node, or with a `PodScheduled` condition
/// (`Unschedulable` and its message) while `verdicts_final` (see [`VERDICT_SETTLE`]). A pod
/// the scheduler has not looked at yet is not an outcome: a real kube-scheduler binds a few
/// milliseconds after the ReplicaSet controller creates the pod, and an operation ending in
/// between would report a bindable pod as pending without a reason (found against the real
/// control plane). Otherwise what is missing.
pub(crate) fn ready(
    res: &CnfResources,
    pods: &[Pod],
    excluded: &[String],
    verdicts_final: bool,
) -> Result<(), String> {
    let mut missing = Vec::new();
    for (w, mine) in pods_of(res, pods, excluded) {
        if mine.len() != w.replicas as usize {
            missing.push(format!(
                "{} {} has {} pod(s) of {}",
                w.kind,
                w.name,
                mine.len(),
                w.replicas
            ));
            continue;
        }
        let unseen: Vec<&str> = mine
            .iter()
            .filter(|p| p.node.is_none() && p.scheduled.is_none())
            .map(|p| p.name.as_str())
            .collect();
        if !unseen.is_empty() {
            missing.push(format!(
                "{} {}: the scheduler has not placed {} yet",
                w.kind,
                w.name,
                unseen.join(", ")
            ));
        }
        let provisional: Vec<&str> = mine
            .iter()
            .filter(|p| p.node.is_none() && p.scheduled.is_some() && !verdicts_final)
            .map(|p| p.name.as_str())
            .collect();
        if !provisional.is_empty() {
            missing.push(format!(
                "{} {}: the scheduler may still place {} (a pod was deleted less than {}s ago)",
                w.kind,
                w.name,
                provisional.join(", "),
                VERDICT_SETTLE.as_secs()
            ));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

/// The VNFCs (one per pod) and a note per pending pod with the scheduler's reason.
pub(crate) fn vnfcs(
    res: &CnfResources,
    pods: &[Pod],
    excluded: &[String],
    vim_connection_id: &str,
) -> (Vec<VnfcResourceInfo>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for (w, mine) in pods_of(res, pods, excluded) {
        for p in mine {
            let mut md = KeyValuePairs::new();
            md.insert("namespace".into(), json!(res.namespace));
            md.insert("workload".into(), json!(w.name));
            md.insert("phase".into(), json!(p.phase));
            if let Some(n) = &p.node {
                md.insert("node".into(), json!(n));
            } else {
                let (reason, message) = p
                    .scheduled
                    .as_ref()
                    .map(|s| {
                        (
                            s.reason.clone().unwrap_or_default(),
                            s.message.clone().unwrap_or_default(),
                        )
                    })
                    .unwrap_or_default();
                if !reason.is_empty() {
                    md.insert("reason".into(), json!(reason));
                }
                notes.push(format!(
                    "pod {} of {} {} is {}{}",
                    p.name,
                    w.kind,
                    w.name,
                    p.phase,
                    if reason.is_empty() && message.is_empty() {
                        String::new()
                    } else {
                        format!(": {reason}: {message}")
                    }
                ));
            }
            out.push(VnfcResourceInfo {
                id: p.name.clone(),
                vdu_id: w.vdu.clone(),
                compute_resource: ResourceHandle::new(p.name.clone())
                    .with_vim_connection_id(vim_connection_id.to_owned())
                    .with_vim_level_resource_type(w.kind.as_str()),
                metadata: Some(md),
                ..VnfcResourceInfo::default()
            });
        }
    }
    (out, notes)
}

/// The resources after `steps` steps of `aspect` out (`out`) or in: every VDU the aspect
/// scales gets its delta times the steps more (or fewer) replicas.
pub(crate) fn scaled(
    flavour: &Flavour,
    res: &CnfResources,
    aspect: &str,
    steps: u32,
    out: bool,
) -> CnfResources {
    let mut res = res.clone();
    for w in &mut res.workloads {
        let Some(delta) = flavour.aspect_delta(aspect, &w.vdu) else {
            continue;
        };
        let by = delta.saturating_mul(steps);
        w.replicas = if out {
            w.replicas.saturating_add(by)
        } else {
            w.replicas.saturating_sub(by)
        };
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::driver::PodScheduled;
    use crate::id::NodeName;

    fn res(replicas: u32) -> CnfResources {
        CnfResources {
            namespace: "ns".into(),
            objects: Vec::new(),
            workloads: vec![CnfWorkload {
                vdu: VduId::new("VDU1"),
                kind: WorkloadKind::Deployment,
                name: "vdu1".into(),
                selector: LabelSelector::labels(BTreeMap::from([("app".into(), "vdu1".into())])),
                replicas,
            }],
        }
    }

    fn pod(name: &str, node: Option<&str>, scheduled: Option<PodScheduled>) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: name.into(),
            labels: BTreeMap::from([("app".into(), "vdu1".into())]),
            node: node.map(NodeName::new),
            phase: "Pending".into(),
            scheduled,
            deleting: false,
        }
    }

    #[test]
    fn a_pod_the_scheduler_has_not_seen_is_not_an_outcome() {
        let unschedulable = PodScheduled {
            status: false,
            reason: Some("Unschedulable".into()),
            message: Some("0/3 nodes are available".into()),
        };
        let bound = [pod("a", Some("n1"), None), pod("b", Some("n2"), None)];
        assert_eq!(ready(&res(2), &bound, &[], true), Ok(()));
        // created by the ReplicaSet controller, not yet looked at by the scheduler
        let fresh = [pod("a", Some("n1"), None), pod("b", None, None)];
        let err = ready(&res(2), &fresh, &[], true).unwrap_err();
        assert!(err.contains("has not placed b yet"), "{err}");
        // the scheduler's verdict is an outcome: reported, not waited for
        let refused = [
            pod("a", Some("n1"), None),
            pod("b", None, Some(unschedulable)),
        ];
        assert_eq!(ready(&res(2), &refused, &[], true), Ok(()));
        // too few pods
        let err = ready(&res(3), &bound, &[], true).unwrap_err();
        assert!(err.contains("has 2 pod(s) of 3"), "{err}");
    }

    #[test]
    fn a_verdict_soon_after_a_deletion_is_provisional() {
        let unschedulable = PodScheduled {
            status: false,
            reason: Some("Unschedulable".into()),
            message: Some("didn't match pod anti-affinity rules".into()),
        };
        // a heal: the victim `a` still listed (terminating), its replacement `c` refused
        let mut victim = pod("a", Some("n1"), None);
        victim.deleting = true;
        let pods = [
            victim.clone(),
            pod("b", Some("n2"), None),
            pod("c", None, Some(unschedulable.clone())),
        ];
        assert!(terminating(&res(2), &pods, &[]));
        let err = ready(&res(2), &pods, &[], false).unwrap_err();
        assert!(err.contains("may still place c"), "{err}");
        // the healed pod named in `excluded` counts as terminating while listed
        victim.deleting = false;
        let named = [victim, pod("b", Some("n2"), None)];
        assert!(terminating(&res(2), &named, &["a".to_string()]));
        assert!(!terminating(&res(2), &named[1..], &["a".to_string()]));
        // a pod of another application does not hold the verdict back
        let mut other = pod("x", Some("n3"), None);
        other.labels = BTreeMap::from([("app".into(), "other".into())]);
        other.deleting = true;
        assert!(!terminating(&res(2), &[other], &[]));
        // once settled the verdict is the outcome
        assert_eq!(ready(&res(2), &pods[1..], &[], true), Ok(()));
    }
}
