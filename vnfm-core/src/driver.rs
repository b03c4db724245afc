//! The driver traits: the only way the core talks to the outside world.
//!
//! Each trait has one concern and is implemented by [`crate::sim::SimCloud`] (always), by
//! `vnfm-openstack` (stacks, zones, servers) and by `vnfm-k8s` (cluster). The core passes them
//! around as `Arc<dyn Trait>`. Required methods take request structs so that a new field does
//! not break callers.
//!
//! All traits share one error vocabulary, [`DriverError`]; adapters keep their detailed errors
//! as the `source` of [`DriverError::Other`] or map them onto the kinds below.

use std::collections::BTreeMap;
use std::fmt::{self, Debug};
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::id::{FlavorId, HostId, NodeName, ServerId, StackId, ZoneId};
use crate::zone::ComputeZone;

pub use crate::error::DriverError;
pub use crate::store::{
    InstanceQuery, OpOccFilter, Precondition, Store, StoreBatch, Version, Versioned,
};

// ---------------------------------------------------------------------------------------------
// Stacks
// ---------------------------------------------------------------------------------------------

/// A HOT template with the files it references, as Heat's stack-create `template` + `files`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateBundle {
    /// The top-level template (YAML text).
    pub template: String,
    /// Nested templates and other files by the name the top template uses (`nested/VDU1.yaml`
    /// may be referenced as `VDU1.yaml`; Heat resolves by the exact key).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

/// Stack parameters (Heat `parameters`), JSON values by name.
pub type Parameters = serde_json::Map<String, serde_json::Value>;

/// Request to create a stack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CreateStack {
    /// Stack name (unique per project).
    pub name: String,
    /// Template and files.
    pub template: TemplateBundle,
    /// Parameter values.
    pub parameters: Parameters,
    /// Heat `disable_rollback` (vnfm's default: true, so a failure leaves the resources for
    /// reselection to repair with an update).
    pub disable_rollback: bool,
    /// Heat `timeout_mins`.
    pub timeout_mins: Option<u32>,
}

impl CreateStack {
    /// A create request with rollback disabled and no timeout.
    pub fn new(name: impl Into<String>, template: TemplateBundle, parameters: Parameters) -> Self {
        Self {
            name: name.into(),
            template,
            parameters,
            disable_rollback: true,
            timeout_mins: None,
        }
    }
}

/// Request to update a stack with PATCH semantics (Heat `PATCH`, i.e. `existing: true`):
/// parameters given here are merged into the stack's current parameters, the template is kept
/// unless a new one is given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UpdateStack {
    /// The stack.
    pub id: StackId,
    /// Parameters to merge (top-level keys replace the current values).
    pub parameters: Parameters,
    /// A new template, or `None` to keep the current one.
    pub template: Option<TemplateBundle>,
}

impl UpdateStack {
    /// A parameter-only update.
    pub fn parameters(id: StackId, parameters: Parameters) -> Self {
        Self {
            id,
            parameters,
            template: None,
        }
    }
}

/// The action part of a Heat status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StackAction {
    /// `INIT`
    Init,
    /// `CREATE`
    Create,
    /// `UPDATE`
    Update,
    /// `DELETE`
    Delete,
    /// `ROLLBACK`
    Rollback,
    /// `CHECK`
    Check,
    /// `SUSPEND`
    Suspend,
    /// `RESUME`
    Resume,
    /// `ADOPT`
    Adopt,
    /// `SNAPSHOT`
    Snapshot,
}

/// The state part of a Heat status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackState {
    /// `IN_PROGRESS`
    InProgress,
    /// `COMPLETE`
    Complete,
    /// `FAILED`
    Failed,
}

/// A Heat stack or resource status such as `CREATE_FAILED`; serializes as that string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackStatus {
    /// What was being done.
    pub action: StackAction,
    /// How it went.
    pub state: StackState,
}

impl StackStatus {
    /// A status from its parts.
    pub const fn new(action: StackAction, state: StackState) -> Self {
        Self { action, state }
    }
    /// True for `*_FAILED`.
    pub fn is_failed(&self) -> bool {
        self.state == StackState::Failed
    }
    /// True for `*_COMPLETE`.
    pub fn is_complete(&self) -> bool {
        self.state == StackState::Complete
    }
    /// True for `*_IN_PROGRESS`.
    pub fn is_in_progress(&self) -> bool {
        self.state == StackState::InProgress
    }
}

impl StackAction {
    /// Heat's spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            StackAction::Init => "INIT",
            StackAction::Create => "CREATE",
            StackAction::Update => "UPDATE",
            StackAction::Delete => "DELETE",
            StackAction::Rollback => "ROLLBACK",
            StackAction::Check => "CHECK",
            StackAction::Suspend => "SUSPEND",
            StackAction::Resume => "RESUME",
            StackAction::Adopt => "ADOPT",
            StackAction::Snapshot => "SNAPSHOT",
        }
    }
}

impl fmt::Display for StackStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            StackState::InProgress => "IN_PROGRESS",
            StackState::Complete => "COMPLETE",
            StackState::Failed => "FAILED",
        };
        write!(f, "{}_{}", self.action.as_str(), state)
    }
}

/// A string that is not a Heat status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a Heat status: {0:?} (expected ACTION_STATE such as CREATE_FAILED)")]
pub struct ParseStackStatusError(pub String);

impl FromStr for StackStatus {
    type Err = ParseStackStatusError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseStackStatusError(s.to_owned());
        let (action, state) = if let Some(a) = s.strip_suffix("_IN_PROGRESS") {
            (a, StackState::InProgress)
        } else if let Some(a) = s.strip_suffix("_COMPLETE") {
            (a, StackState::Complete)
        } else if let Some(a) = s.strip_suffix("_FAILED") {
            (a, StackState::Failed)
        } else {
            return Err(err());
        };
        let action = match action {
            "INIT" => StackAction::Init,
            "CREATE" => StackAction::Create,
            "UPDATE" => StackAction::Update,
            "DELETE" => StackAction::Delete,
            "ROLLBACK" => StackAction::Rollback,
            "CHECK" => StackAction::Check,
            "SUSPEND" => StackAction::Suspend,
            "RESUME" => StackAction::Resume,
            "ADOPT" => StackAction::Adopt,
            "SNAPSHOT" => StackAction::Snapshot,
            _ => return Err(err()),
        };
        Ok(StackStatus { action, state })
    }
}

impl Serialize for StackStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StackStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A stack output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StackOutput {
    /// `output_key`
    pub output_key: String,
    /// `output_value`
    pub output_value: serde_json::Value,
}

/// A stack as Heat's show-stack reports it (the fields vnfm reads).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stack {
    /// `id`
    pub id: StackId,
    /// `stack_name`
    pub stack_name: String,
    /// `stack_status`
    pub stack_status: StackStatus,
    /// `stack_status_reason`
    pub stack_status_reason: String,
    /// `parameters` (Heat reports every value as it was given; vnfm keeps JSON values)
    pub parameters: Parameters,
    /// `outputs`
    #[serde(default)]
    pub outputs: Vec<StackOutput>,
}

/// Request to list the resources of a stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListResources {
    /// The stack.
    pub id: StackId,
    /// Heat `nested_depth`: 0 lists the top stack only.
    pub nested_depth: u32,
}

impl ListResources {
    /// List the resources of `id` down to `nested_depth` levels of nested stacks.
    pub fn new(id: StackId, nested_depth: u32) -> Self {
        Self { id, nested_depth }
    }
}

/// A stack resource as Heat's resource list reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StackResource {
    /// `resource_name` (the name within its own stack: `VDU1`, `0`, `VDU1-0`).
    pub resource_name: String,
    /// `physical_resource_id` (empty when not created).
    pub physical_resource_id: String,
    /// `resource_type` (`OS::Nova::Server`, or a nested template name).
    pub resource_type: String,
    /// `resource_status`
    pub resource_status: StackStatus,
    /// `resource_status_reason`
    pub resource_status_reason: String,
    /// `parent_resource`: the resource of the parent stack that owns this resource's stack;
    /// `None` for top-level resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_resource: Option<String>,
    /// The stack this resource belongs to (Heat's `stack` link).
    pub stack_id: StackId,
    /// The nested stack this resource owns, if any (Heat's `nested` link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_stack_id: Option<StackId>,
}

/// Request to mark a resource unhealthy, so that the next update re-creates it (heal).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MarkUnhealthy {
    /// The stack that directly contains the resource (a nested stack for nested resources).
    pub stack_id: StackId,
    /// The resource's name in that stack.
    pub resource_name: String,
    /// Heat `resource_status_reason`.
    pub reason: String,
}

impl MarkUnhealthy {
    /// Mark `resource_name` of `stack_id` unhealthy for `reason`.
    pub fn new(
        stack_id: StackId,
        resource_name: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            stack_id,
            resource_name: resource_name.into(),
            reason: reason.into(),
        }
    }
}

/// Creates, updates, inspects and deletes stacks (Heat).
///
/// # Contract
/// - `create_stack` and `update_stack` return once the backend accepted the request; the stack
///   then moves through `*_IN_PROGRESS` to `*_COMPLETE` or `*_FAILED`, observed with
///   [`StackDriver::show_stack`]. Callers poll until the status is not in progress.
/// - `create_stack` with a name already in use fails with [`DriverError::AlreadyExists`]. A
///   template the backend cannot validate fails with [`DriverError::Invalid`] and creates
///   nothing.
/// - `update_stack` merges parameters (PATCH); a failed update leaves resources that were
///   created as they are (rollback disabled), so a later update can repair the stack.
/// - `show_stack`, `update_stack`, `list_resources`, `mark_unhealthy` on an unknown stack fail
///   with [`DriverError::NotFound`]; `delete_stack` on an unknown stack also fails with
///   `NotFound`, so a caller that wants idempotence ignores that kind.
/// - `list_resources` lists the top-level resources first, then nested ones, each nested
///   resource after its parent.
#[async_trait]
pub trait StackDriver: Send + Sync + Debug + 'static {
    /// Creates a stack.
    async fn create_stack(&self, req: CreateStack) -> Result<StackId, DriverError>;
    /// Updates a stack (PATCH semantics).
    async fn update_stack(&self, req: UpdateStack) -> Result<(), DriverError>;
    /// Shows a stack.
    async fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError>;
    /// Deletes a stack and its resources.
    async fn delete_stack(&self, id: &StackId) -> Result<(), DriverError>;
    /// Lists the resources of a stack, nested ones down to the requested depth.
    async fn list_resources(&self, req: ListResources) -> Result<Vec<StackResource>, DriverError>;
    /// Marks a resource unhealthy so the next update re-creates it.
    async fn mark_unhealthy(&self, req: MarkUnhealthy) -> Result<(), DriverError>;
}

// ---------------------------------------------------------------------------------------------
// Zones and servers
// ---------------------------------------------------------------------------------------------

/// Options of [`ZoneCatalog::list_zones`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListZones {}

/// Lists compute availability zones with their hosts (Nova `os-availability-zone/detail`).
///
/// # Contract
/// - Only compute zones are listed: zones whose hosts run no `nova-compute` service (Nova's
///   `internal`) are left out.
/// - A zone the backend reports with `hosts: null` is listed with `hosts: None`; it is not a
///   candidate (see [`ComputeZone::is_candidate`]).
/// - The order is the backend's; callers must not depend on it.
#[async_trait]
pub trait ZoneCatalog: Send + Sync + Debug + 'static {
    /// Lists the compute zones.
    async fn list_zones(&self, opts: ListZones) -> Result<Vec<ComputeZone>, DriverError>;
}

/// Nova's `fault` of a server in ERROR.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerFault {
    /// `code` (500 for scheduling failures).
    pub code: u16,
    /// `message`, e.g. `No valid host was found. There are not enough hosts available.`
    pub message: String,
}

/// Where a server runs (Nova server show, admin view).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Server id.
    pub id: ServerId,
    /// Server name.
    pub name: String,
    /// Nova `status` (`ACTIVE`, `ERROR`, `BUILD`, ...).
    pub status: String,
    /// `OS-EXT-SRV-ATTR:host`; `None` when not scheduled or not visible (non-admin).
    pub host: Option<HostId>,
    /// Nova's `hostId`: a hash of the host per project, visible to every user; `None` when
    /// unscheduled. Two servers of one project with the same value share a host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
    /// The server's IP addresses over all its networks (`addresses.*[].addr`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// `OS-EXT-AZ:availability_zone`.
    pub zone: Option<ZoneId>,
    /// The flavor's name.
    pub flavor: Option<FlavorId>,
    /// Server groups the server belongs to.
    #[serde(default)]
    pub server_groups: Vec<String>,
    /// `fault`, for servers in ERROR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<ServerFault>,
}

/// Answers where a server runs (Nova).
///
/// # Contract
/// - An unknown server id fails with [`DriverError::NotFound`].
/// - `host` is `None` when the server is not scheduled, or when the credentials do not see
///   admin-only attributes; callers must handle both.
#[async_trait]
pub trait ComputeInventory: Send + Sync + Debug + 'static {
    /// Shows one server.
    async fn server(&self, id: &ServerId) -> Result<ServerInfo, DriverError>;

    /// Starts a stopped server (Nova `POST /servers/{id}/action {"os-start": null}`). Returns
    /// once the VIM accepted it; the server then goes `ACTIVE` ([`ComputeInventory::server`]
    /// tells). The default: not implemented by this driver.
    async fn start_server(&self, id: &ServerId) -> Result<(), DriverError> {
        let _ = id;
        Err(DriverError::NotImplemented {
            driver: "compute",
            operation: "starting a server",
        })
    }

    /// Stops a server (Nova `os-stop`: a graceful shutdown of the guest, then power off);
    /// it then goes `SHUTOFF`. The default: not implemented by this driver.
    async fn stop_server(&self, id: &ServerId) -> Result<(), DriverError> {
        let _ = id;
        Err(DriverError::NotImplemented {
            driver: "compute",
            operation: "stopping a server",
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Cluster (Kubernetes)
// ---------------------------------------------------------------------------------------------

/// One of a node's addresses (`status.addresses[]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    /// `InternalIP`, `ExternalIP`, `Hostname`, `InternalDNS`, `ExternalDNS`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The address.
    pub address: String,
}

impl NodeAddress {
    /// An address of `kind`.
    pub fn new(kind: impl Into<String>, address: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            address: address.into(),
        }
    }
}

/// A cluster node: its labels and what identifies the machine under it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterNode {
    /// Node name.
    pub name: NodeName,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `spec.providerID` (cloud-provider-openstack writes `openstack:///<server id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// `status.nodeInfo.systemUUID` (on Nova, the server id as the guest's SMBIOS shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_uuid: Option<String>,
    /// `status.addresses`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<NodeAddress>,
}

impl ClusterNode {
    /// A node with labels and nothing else known.
    pub fn new(name: impl Into<NodeName>, labels: BTreeMap<String, String>) -> Self {
        Self {
            name: name.into(),
            labels,
            ..Self::default()
        }
    }

    /// The addresses of `kind` (e.g. `InternalIP`).
    pub fn addresses_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.addresses
            .iter()
            .filter(move |a| a.kind == kind)
            .map(|a| a.address.as_str())
    }
}

/// Request to set or remove node labels (a JSON merge patch of `metadata.labels`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LabelNode {
    /// The node.
    pub node: NodeName,
    /// Labels to set (`Some`) or remove (`None`).
    pub labels: BTreeMap<String, Option<String>>,
}

impl LabelNode {
    /// Set or remove labels of `node`.
    pub fn new(node: NodeName, labels: BTreeMap<String, Option<String>>) -> Self {
        Self { node, labels }
    }
}

/// A workload's pod anti-affinity term among its own pods (required or preferred), for
/// [`ApplyWorkload`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodAntiAffinity {
    /// The topology key (e.g. `CIS-node`, `kubernetes.io/hostname`).
    pub topology_key: String,
    /// True for `requiredDuringSchedulingIgnoredDuringExecution`.
    pub required: bool,
}

/// A Deployment of `replicas` pods labelled `app: <name>`, optionally with anti-affinity among
/// its own pods: a convenience that builds the manifest [`ClusterDriver::apply_object`] takes
/// (the conformance suite's and the demo's workload).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApplyWorkload {
    /// Namespace.
    pub namespace: String,
    /// Workload name.
    pub name: String,
    /// Desired replicas.
    pub replicas: u32,
    /// Anti-affinity among the workload's own pods.
    pub anti_affinity: Option<PodAntiAffinity>,
}

impl ApplyWorkload {
    /// A workload without anti-affinity.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, replicas: u32) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            replicas,
            anti_affinity: None,
        }
    }

    /// The workload's `apps/v1` Deployment, ready for [`ClusterDriver::apply_object`].
    pub fn to_object(&self) -> ApplyObject {
        let app = serde_json::json!({ "app": self.name });
        let mut pod_spec = serde_json::json!({
            "containers": [{
                "name": "vdu",
                "image": "registry.k8s.io/pause:3.10",
                "resources": { "requests": { "cpu": "10m", "memory": "16Mi" } },
            }],
            "terminationGracePeriodSeconds": 0,
        });
        if let Some(a) = &self.anti_affinity {
            let term = serde_json::json!({
                "labelSelector": { "matchLabels": app },
                "topologyKey": a.topology_key,
            });
            let anti = if a.required {
                serde_json::json!({ "requiredDuringSchedulingIgnoredDuringExecution": [term] })
            } else {
                serde_json::json!({ "preferredDuringSchedulingIgnoredDuringExecution": [
                    { "weight": 100, "podAffinityTerm": term }
                ] })
            };
            pod_spec["affinity"] = serde_json::json!({ "podAntiAffinity": anti });
        }
        ApplyObject::new(
            self.namespace.clone(),
            serde_json::json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": { "name": self.name, "namespace": self.namespace, "labels": app },
                "spec": {
                    "replicas": self.replicas,
                    "selector": { "matchLabels": app },
                    "template": { "metadata": { "labels": app }, "spec": pod_spec },
                },
            }),
        )
    }
}

/// Request to create or update one object of the cluster from its manifest (server-side
/// apply: fields vnfm set before and no longer sets are removed, fields of other managers are
/// kept).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApplyObject {
    /// The namespace of a namespaced object (the manifest's own `metadata.namespace`, if any,
    /// must agree).
    pub namespace: String,
    /// The manifest: `apiVersion`, `kind`, `metadata.name`, and the rest.
    pub object: serde_json::Value,
}

impl ApplyObject {
    /// Apply `object` in `namespace`.
    pub fn new(namespace: impl Into<String>, object: serde_json::Value) -> Self {
        Self {
            namespace: namespace.into(),
            object,
        }
    }
}

/// Names one object of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ObjectRef {
    /// `apiVersion` (`v1`, `apps/v1`, ...).
    pub api_version: String,
    /// `kind` (`Deployment`, `Service`, ...).
    pub kind: String,
    /// Namespace (ignored for cluster-scoped kinds).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// The object `kind` `namespace/name` of `api_version`.
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The kinds of workload vnfm scales and reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WorkloadKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
}

impl WorkloadKind {
    /// The Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
        }
    }

    /// The kind named `kind`, if it is a workload vnfm knows.
    pub fn parse(kind: &str) -> Option<Self> {
        match kind {
            "Deployment" => Some(WorkloadKind::Deployment),
            "StatefulSet" => Some(WorkloadKind::StatefulSet),
            _ => None,
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Request to scale a workload (its `scale` subresource).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScaleWorkload {
    /// Namespace.
    pub namespace: String,
    /// Deployment or StatefulSet.
    pub kind: WorkloadKind,
    /// Workload name.
    pub name: String,
    /// Desired replicas.
    pub replicas: u32,
}

impl ScaleWorkload {
    /// Scale the Deployment `namespace/name` to `replicas`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, replicas: u32) -> Self {
        Self::of(WorkloadKind::Deployment, namespace, name, replicas)
    }

    /// Scale the `kind` `namespace/name` to `replicas`.
    pub fn of(
        kind: WorkloadKind,
        namespace: impl Into<String>,
        name: impl Into<String>,
        replicas: u32,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            kind,
            name: name.into(),
            replicas,
        }
    }
}

/// Request to list the Deployments and StatefulSets of a namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListWorkloads {
    /// Namespace.
    pub namespace: String,
}

impl ListWorkloads {
    /// The workloads of `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
        }
    }
}

/// A pod's `PodScheduled` condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodScheduled {
    /// `True` once bound; `False` while the scheduler finds no node.
    pub status: bool,
    /// `Unschedulable` when the scheduler found no node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The scheduler's message (`0/3 nodes are available: ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The node it is bound to (`spec.nodeName`); `None` while not scheduled.
    pub node: Option<NodeName>,
    /// Pod phase (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
    pub phase: String,
    /// The `PodScheduled` condition, when the scheduler has written one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<PodScheduled>,
    /// True when the pod is being deleted (`metadata.deletionTimestamp` set).
    #[serde(default)]
    pub deleting: bool,
}

impl Pod {
    /// True when every label of `selector` is on the pod (a `matchLabels` selector).
    pub fn matches(&self, selector: &BTreeMap<String, String>) -> bool {
        selector.iter().all(|(k, v)| self.labels.get(k) == Some(v))
    }
}

/// Request to list pods by label selector (`matchLabels`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListPods {
    /// Namespace.
    pub namespace: String,
    /// Every label listed must be on the pod; empty lists every pod of the namespace.
    pub selector: BTreeMap<String, String>,
}

impl ListPods {
    /// The pods of `namespace` labelled `app: <app>` (the selector of an [`ApplyWorkload`]).
    pub fn new(namespace: impl Into<String>, app: impl Into<String>) -> Self {
        Self::selected(namespace, BTreeMap::from([("app".to_owned(), app.into())]))
    }

    /// The pods of `namespace` matching `selector`.
    pub fn selected(namespace: impl Into<String>, selector: BTreeMap<String, String>) -> Self {
        Self {
            namespace: namespace.into(),
            selector,
        }
    }
}

/// Request to delete one pod (heal: its controller re-creates it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeletePod {
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// `gracePeriodSeconds` of the delete; `None` takes the pod's own. `Some(0)` removes the
    /// pod object at once, without waiting for its kubelet (heal of a node that is gone).
    pub grace_seconds: Option<u32>,
}

impl DeletePod {
    /// Delete `namespace/name` with the pod's own grace period.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            grace_seconds: None,
        }
    }

    /// The same delete with `gracePeriodSeconds`.
    pub fn with_grace(mut self, seconds: u32) -> Self {
        self.grace_seconds = Some(seconds);
        self
    }
}

/// Request to evict one pod through the Eviction API (honours PodDisruptionBudgets).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EvictPod {
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
}

impl EvictPod {
    /// Evict `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// A core/v1 Event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterEvent {
    /// The kind of the object it is about (`involvedObject.kind`).
    pub object_kind: String,
    /// The name of the object it is about.
    pub object_name: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Reason (`FailedScheduling`, `Scheduled`, ...).
    pub reason: String,
    /// Message.
    pub message: String,
    /// How many times it happened.
    pub count: u32,
}

/// Request to list the events of a namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListEvents {
    /// Namespace.
    pub namespace: String,
}

impl ListEvents {
    /// The events of `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
        }
    }
}

/// Talks to a container cluster (Kubernetes): nodes and their labels, the objects of a CNF,
/// its workloads and pods, events.
///
/// # Contract
/// - `label_node` on an unknown node fails with [`DriverError::NotFound`]; setting a label to
///   the value it has is a no-op; removing an absent label is a no-op. An invalid label key or
///   value fails with [`DriverError::Invalid`] carrying the API server's message.
/// - `apply_object` creates or updates (server-side apply, vnfm's field manager); a manifest
///   the API server refuses fails with `Invalid`; a kind the driver cannot map fails with
///   `Invalid` naming it.
/// - `delete_object`, `scale_workload`, `delete_pod` and `evict_pod` on an unknown object
///   fail with `NotFound`. An eviction refused by a PodDisruptionBudget fails with
///   [`DriverError::Conflict`] carrying the API server's message.
/// - `list_workloads` returns the Deployments and StatefulSets of the namespace as manifests
///   (`apiVersion`, `kind`, `metadata`, `spec`, `status`), for `cluster::Workload` to read.
/// - Pods that cannot be scheduled are listed with `node: None`, phase `Pending`, and (once
///   the scheduler tried) `scheduled` `False` with the scheduler's reason and message; that is
///   not an error.
/// - Errors of the API server (401, 403, 404, 409, 415, 422, a watch's ERROR event) map to the
///   matching [`DriverError`] with the Status message kept.
#[async_trait]
pub trait ClusterDriver: Send + Sync + Debug + 'static {
    /// Lists the nodes.
    async fn list_nodes(&self) -> Result<Vec<ClusterNode>, DriverError>;
    /// Sets or removes node labels.
    async fn label_node(&self, req: LabelNode) -> Result<(), DriverError>;
    /// Creates or updates one object from its manifest.
    async fn apply_object(&self, req: ApplyObject) -> Result<(), DriverError>;
    /// Deletes one object (its dependents are deleted in the background).
    async fn delete_object(&self, req: ObjectRef) -> Result<(), DriverError>;
    /// Lists the Deployments and StatefulSets of a namespace.
    async fn list_workloads(
        &self,
        req: ListWorkloads,
    ) -> Result<Vec<serde_json::Value>, DriverError>;
    /// Scales a workload.
    async fn scale_workload(&self, req: ScaleWorkload) -> Result<(), DriverError>;
    /// Lists pods by label selector.
    async fn list_pods(&self, req: ListPods) -> Result<Vec<Pod>, DriverError>;
    /// Deletes a pod.
    async fn delete_pod(&self, req: DeletePod) -> Result<(), DriverError>;
    /// Evicts a pod (Eviction API).
    async fn evict_pod(&self, req: EvictPod) -> Result<(), DriverError>;
    /// Lists the events of a namespace.
    async fn list_events(&self, req: ListEvents) -> Result<Vec<ClusterEvent>, DriverError>;
}

// ---------------------------------------------------------------------------------------------
// Clock
// ---------------------------------------------------------------------------------------------

/// Time as the lifecycle loop sees it: virtual in the simulator and in tests, real in the CLI.
///
/// # Contract
/// - `now` never goes backwards.
/// - `sleep` returns after `now` has advanced by at least `duration`; a virtual clock advances
///   itself and returns at once.
#[async_trait]
pub trait Clock: Send + Sync + Debug + 'static {
    /// The current time.
    fn now(&self) -> chrono::DateTime<chrono::Utc>;
    /// Waits for `duration`.
    async fn sleep(&self, duration: std::time::Duration);
}

/// A virtual clock: starts at a given instant and advances only when slept on or told to.
/// Clones share the same time.
#[derive(Clone, Debug)]
pub struct VirtualClock {
    now: std::sync::Arc<std::sync::Mutex<chrono::DateTime<chrono::Utc>>>,
}

impl VirtualClock {
    /// A clock reading `start`.
    pub fn new(start: chrono::DateTime<chrono::Utc>) -> Self {
        Self {
            now: std::sync::Arc::new(std::sync::Mutex::new(start)),
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: std::time::Duration) {
        let delta = chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX);
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now = now.checked_add_signed(delta).unwrap_or(*now);
    }
}

#[async_trait]
impl Clock for VirtualClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        *self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn sleep(&self, duration: std::time::Duration) {
        self.advance(duration);
    }
}

/// What an NFVO answered to a SOL003 grant request (`POST /grant/v1/grants`, then `GET` of
/// the grant it is creating): see [`GrantDriver`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum GrantAnswer {
    /// `201 Created` (or `200 OK` to a poll): the grant.
    Granted(Box<crate::grant::Grant>),
    /// `202 Accepted`: the NFVO is still deciding; ask again at `location` (the answer's
    /// `Location` header), not before `retry_after` when it said (`Retry-After`).
    Pending {
        /// The grant's URI, to poll.
        location: String,
        /// How long the NFVO asked to wait, if it said.
        retry_after: Option<std::time::Duration>,
    },
    /// `403 Forbidden`: the NFVO rejected the grant (SOL003 clause 5.4.2.3.1), with its
    /// `ProblemDetails`.
    Rejected(crate::problem::ProblemDetails),
}

/// The NFVO's Grant interface (SOL003 clause 9), for a VNFM that asks an NFVO for its grants
/// instead of granting locally.
///
/// Contract:
/// - `request_grant` sends the request once; `poll_grant` reads the grant at a `location` a
///   [`GrantAnswer::Pending`] gave. Neither retries: the operation machine decides when to ask
///   again (it stays `STARTING` meanwhile, and gives up at the grant timeout).
/// - An answer the NFVO could not be reached for, or a `5xx`, is
///   [`DriverError::Unavailable`] (the machine asks again); any other answer that is neither
///   a grant, a `202` nor a `403` is the matching [`DriverError`] (`Invalid` for a `400` or
///   `422` or a body that is no `Grant`, `Unauthenticated` for a `401`, `NotFound` for a `404`
///   of a poll), with the NFVO's `detail` kept; the machine does not ask again.
#[async_trait]
pub trait GrantDriver: Send + Sync + Debug + 'static {
    /// Sends a grant request.
    async fn request_grant(
        &self,
        req: &crate::grant::GrantRequest,
    ) -> Result<GrantAnswer, DriverError>;
    /// Reads the grant being created at `location`.
    async fn poll_grant(&self, location: &str) -> Result<GrantAnswer, DriverError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_status_round_trips() {
        for s in [
            "CREATE_FAILED",
            "UPDATE_COMPLETE",
            "ROLLBACK_IN_PROGRESS",
            "INIT_COMPLETE",
        ] {
            let st: StackStatus = s.parse().unwrap();
            assert_eq!(st.to_string(), s);
            let j = serde_json::to_string(&st).unwrap();
            assert_eq!(j, format!("\"{s}\""));
        }
        let e = "CREATE_BROKEN".parse::<StackStatus>().unwrap_err();
        assert!(e.to_string().contains("CREATE_BROKEN"));
    }

    #[tokio::test]
    async fn virtual_clock_advances_when_slept_on() {
        let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let c = VirtualClock::new(start);
        let c2 = c.clone();
        c.sleep(std::time::Duration::from_secs(90)).await;
        assert_eq!(c2.now(), start + chrono::Duration::seconds(90));
    }
}
