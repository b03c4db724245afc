//! Realisation: a deployment intent written into the Heat template that is sent to the chosen
//! region (ONAP Casablanca's "Infrastructure High Availability for VNF" and "Burstable QoS
//! Oversubscription Percentage" intents; the closest upstream code is Multi-Cloud's
//! `oof_directives` flavor swap, which rewrites Heat *stack parameters*).
//!
//! [`realise`] takes the Heat input of an operation (a [`TemplateBundle`] and its
//! [`Parameters`], typically what [`crate::lifecycle::userdata::build`] produced, or a BaseHOT
//! with its parameters) and one [`Realisation`] per VDU, and returns the modified bundle and
//! parameters, the typed list of [`Change`]s and a unified diff of the templates.
//!
//! # The servers of a VDU
//! A top-level resource belongs to VDU `V` when its name is `V` or `V-<index>` (the
//! StandardUserData copies), when the properties it passes read `{get_param: [nfv, VDU, V,
//! ...]}`, or when its (member) template is a nested file that defines an `OS::Nova::Server`
//! named `V`. The resource is an `OS::Nova::Server`, a nested template (a key of the bundle's
//! `files`), or an `OS::Heat::AutoScalingGroup` / `OS::Heat::ResourceGroup` whose member is
//! one of those two. In a nested file, the VDU's servers are the `OS::Nova::Server` resources
//! named `V` (or `V-<index>`), else every server of the file. One level of nesting is read.
//!
//! # High availability
//! The VDU's servers join one `OS::Nova::ServerGroup` of the top template with `policies:
//! [anti-affinity]` (Nova's `ServerGroupAntiAffinityFilter`: every server on a host of its
//! own, else "No valid host was found"). A server of the top template (or the inline member of
//! a group) gets `scheduler_hints: {group: {get_resource: G}}`; a server of a nested template
//! gets `scheduler_hints: {group: {get_param: P}}` with `P` a new string parameter of that
//! template, and every parent resource passes `P: {get_resource: G}` (a nested template cannot
//! reference its parent's resources). A nested template whose `scheduler_hints` is a whole
//! `json` parameter gets `{group: {get_resource: G}}` passed in that parameter.
//!
//! When the servers already reference a server group of the top template (directly, or through
//! a parameter their parent passes as `{get_resource: G}`), that group is reused; its policy
//! must be the one required, else [`RealiseError::GroupPolicy`]. Servers that reference no
//! group are added to it.
//!
//! The region must have at least as many hosts as the VDU has instances at most
//! ([`Realisation::max_instances`], else counted from the template: 1 per server, an
//! AutoScalingGroup's `max_size`, a ResourceGroup's `count`). With fewer hosts the
//! realisation is refused ([`RealiseError::TooFewHosts`]) unless
//! [`RealiseRequest::best_effort`] is set: the policy is then `soft-anti-affinity` (Nova API
//! microversion 2.15; spread as far as the hosts allow), an existing hard group is softened,
//! and [`Change::AntiAffinitySoftened`] reports it.
//!
//! # Server groups of the VNFD
//! [`server_groups`] applies the same machinery to the VNFD's `AffinityRule` and
//! `AntiAffinityRule` at `nfvi_node` scope ([`GroupRule`], any of the four Nova policies), for
//! the lifecycle when it builds a stack: the servers of every VDU of a rule join one group. A
//! group they already reference (the BaseHOT declares it, Tacker's UserData way) is left as
//! written and must be of the rule's kind (affinity or anti-affinity; required or soft is the
//! template's choice), else [`RealiseError::GroupPolicy`]; otherwise a group of the rule's
//! policy named after the rule is added (the TOSCA way). A VDU in two such rules is an error
//! ([`RealiseError::VduInTwoRules`]): a Nova server joins one server group at most. Nothing
//! here counts hosts; the lifecycle checks them against the zones it was granted.
//!
//! # Isolation (flavour)
//! The current flavour of every server of the VDU is looked up among the region's
//! [`RegionFlavour`]s (by name, or as the name of one of their over-subscription variants).
//! [`Isolation::Guaranteed`] keeps (or switches back to) the flavour without over-subscription;
//! [`Isolation::Burstable`] at `p` % switches to the variant keyed `p`, whose maximum must be
//! [`burst_maximum`] of the minimum (16 vCPU / 32 GB at 25 % → 20 / 40). A flavour written in a
//! template is changed there; a flavour read with `get_param` (also through a nested
//! template's parameter and its parent) is changed in the parameters, as Multi-Cloud's flavor
//! swap does (a parameter known only by its default gets a value in the parameters).
//!
//! # Output
//! Templates that change are written back with `serde_yaml` (comments and layout are not kept,
//! as in [`crate::lifecycle::userdata`]); other files are kept byte for byte. A nested file
//! that the bundle holds under two keys (`nested/VDU1.yaml` and its bare alias `VDU1.yaml`)
//! is changed under both. The diff compares the parsed-and-written form of each changed
//! template before and after, so it shows the realisation only.
//!
//! A parameter or literal shared with resources outside the realised VDUs is changed for them
//! too; two realised VDUs that need different values there are an error
//! ([`RealiseError::ConflictingFlavour`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value as Json;
use serde_yaml::{Mapping, Value as Yaml};

use crate::driver::{Parameters, TemplateBundle};
use crate::id::{rm_idx, VduId};

/// The Heat type of a Nova server.
pub const SERVER: &str = "OS::Nova::Server";
/// The Heat type of a Nova server group.
pub const SERVER_GROUP: &str = "OS::Nova::ServerGroup";
/// The Heat type of a resource group.
pub const RESOURCE_GROUP: &str = "OS::Heat::ResourceGroup";
/// The Heat type of an autoscaling group.
pub const AUTO_SCALING_GROUP: &str = "OS::Heat::AutoScalingGroup";

/// How a VDU's compute is isolated from its neighbours (the "Burstable QoS" intent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// No over-subscription: the flavour's vCPUs and memory are the server's, always.
    Guaranteed,
    /// Over-subscribed: the server may burst `percent` % above its guaranteed minimum.
    Burstable {
        /// The over-subscription percentage.
        percent: u32,
    },
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Isolation::Guaranteed => f.write_str("guaranteed"),
            Isolation::Burstable { percent } => write!(f, "burstable {percent} %"),
        }
    }
}

/// The intent for one VDU.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Realisation {
    /// The VDU.
    pub vdu: VduId,
    /// Infrastructure high availability: every instance on a host of its own.
    pub ha: bool,
    /// Compute isolation (flavour choice).
    pub isolation: Isolation,
    /// The VDU's maximum number of instances (from the VNFD's scaling aspects); `None` counts
    /// them from the template (see the [module docs](self)).
    pub max_instances: Option<u32>,
}

impl Realisation {
    /// No HA, guaranteed isolation, instances counted from the template.
    pub fn new(vdu: impl Into<VduId>) -> Self {
        Self {
            vdu: vdu.into(),
            ha: false,
            isolation: Isolation::Guaranteed,
            max_instances: None,
        }
    }

    /// The same with HA on.
    pub fn with_ha(mut self) -> Self {
        self.ha = true;
        self
    }

    /// The same with `isolation`.
    pub fn with_isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    /// The same with a known maximum number of instances.
    pub fn with_max_instances(mut self, max: u32) -> Self {
        self.max_instances = Some(max);
        self
    }
}

/// An over-subscribed variant of a region flavour.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Oversubscription {
    /// The variant's flavour name.
    pub flavour: String,
    /// The vCPUs a server may burst to.
    pub max_vcpus: u64,
    /// The memory a server may burst to (MB).
    pub max_memory_mb: u64,
}

/// A flavour the region offers, with its over-subscription variants.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegionFlavour {
    /// The flavour without over-subscription.
    pub name: String,
    /// Guaranteed vCPUs.
    pub vcpus: u64,
    /// Guaranteed memory (MB).
    pub memory_mb: u64,
    /// Disk (GB).
    pub disk_gb: u64,
    /// The variants by over-subscription percentage.
    #[serde(default)]
    pub oversubscribed: BTreeMap<u32, Oversubscription>,
}

impl RegionFlavour {
    /// A flavour with no variants.
    pub fn new(name: impl Into<String>, vcpus: u64, memory_mb: u64, disk_gb: u64) -> Self {
        Self {
            name: name.into(),
            vcpus,
            memory_mb,
            disk_gb,
            oversubscribed: BTreeMap::new(),
        }
    }

    /// The same with the variant `flavour` at `percent` %, whose maxima are [`burst_maximum`]
    /// of this flavour's vCPUs and memory.
    pub fn with_burstable(mut self, percent: u32, flavour: impl Into<String>) -> Self {
        self.oversubscribed.insert(
            percent,
            Oversubscription {
                flavour: flavour.into(),
                max_vcpus: burst_maximum(self.vcpus, percent),
                max_memory_mb: burst_maximum(self.memory_mb, percent),
            },
        );
        self
    }
}

/// What the chosen region offers.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegionOffer {
    /// The region's compute hosts (an anti-affinity group can have that many members).
    pub hosts: u32,
    /// The region's flavours.
    pub flavours: Vec<RegionFlavour>,
}

/// A realisation request: one [`Realisation`] per VDU, in one region.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RealiseRequest {
    /// The VDUs to realise (each at most once).
    pub vdus: Vec<Realisation>,
    /// The chosen region.
    pub region: RegionOffer,
    /// Accept a weaker realisation (soft-anti-affinity) where the region cannot honour the
    /// intent, and report it.
    pub best_effort: bool,
}

/// `ceil(min × (1 + percent / 100))`, the maximum of a variant at `percent` %.
pub fn burst_maximum(min: u64, percent: u32) -> u64 {
    let num = u128::from(min) * (100 + u128::from(percent));
    u64::try_from(num.div_ceil(100)).unwrap_or(u64::MAX)
}

/// A server group policy, serialized with Nova's names (`anti-affinity`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupPolicy {
    /// `anti-affinity`: every member on a host of its own.
    AntiAffinity,
    /// `soft-anti-affinity` (Nova microversion 2.15): spread as far as the hosts allow.
    SoftAntiAffinity,
    /// `affinity`: every member on the host of the first.
    Affinity,
    /// `soft-affinity` (Nova microversion 2.15): together as far as the hosts allow.
    SoftAffinity,
}

impl GroupPolicy {
    /// Every policy.
    pub const ALL: [GroupPolicy; 4] = [
        GroupPolicy::AntiAffinity,
        GroupPolicy::SoftAntiAffinity,
        GroupPolicy::Affinity,
        GroupPolicy::SoftAffinity,
    ];

    /// The Nova policy name.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupPolicy::AntiAffinity => "anti-affinity",
            GroupPolicy::SoftAntiAffinity => "soft-anti-affinity",
            GroupPolicy::Affinity => "affinity",
            GroupPolicy::SoftAffinity => "soft-affinity",
        }
    }

    /// The policy of a Nova policy name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// True for `soft-anti-affinity` and `soft-affinity` (Nova weighs, never refuses).
    pub fn is_soft(self) -> bool {
        matches!(
            self,
            GroupPolicy::SoftAntiAffinity | GroupPolicy::SoftAffinity
        )
    }

    /// True for `anti-affinity` and `soft-anti-affinity`.
    pub fn is_anti(self) -> bool {
        matches!(
            self,
            GroupPolicy::AntiAffinity | GroupPolicy::SoftAntiAffinity
        )
    }

    /// The required form of the policy (`soft-anti-affinity` → `anti-affinity`).
    pub fn hard(self) -> Self {
        match self {
            GroupPolicy::SoftAntiAffinity => GroupPolicy::AntiAffinity,
            GroupPolicy::SoftAffinity => GroupPolicy::Affinity,
            p => p,
        }
    }

    /// The best-effort form of the policy (`anti-affinity` → `soft-anti-affinity`).
    pub fn soft(self) -> Self {
        match self {
            GroupPolicy::AntiAffinity => GroupPolicy::SoftAntiAffinity,
            GroupPolicy::Affinity => GroupPolicy::SoftAffinity,
            p => p,
        }
    }
}

impl fmt::Display for GroupPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a flavour is written.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum FlavourAt {
    /// A literal in a template.
    Template {
        /// The template (the main template's source name, or a key of the bundle's `files`).
        file: String,
        /// The field path (`resources.VDU1.properties.flavor`).
        field: String,
    },
    /// A stack parameter value.
    Parameter {
        /// The path into the parameters (`nfv.VDU.VDU1-0.computeFlavourId`).
        path: String,
    },
}

impl fmt::Display for FlavourAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlavourAt::Template { file, field } => write!(f, "{file}: {field}"),
            FlavourAt::Parameter { path } => write!(f, "parameters: {path}"),
        }
    }
}

/// One change the realisation made.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Change {
    /// A server group was added to the top template.
    ServerGroupAdded {
        /// The VDU.
        vdu: VduId,
        /// The group's resource name.
        resource: String,
        /// Its policy.
        policy: GroupPolicy,
    },
    /// The server group the VDU's servers already referenced is used.
    ServerGroupReused {
        /// The VDU.
        vdu: VduId,
        /// The group's resource name.
        resource: String,
        /// Its policy.
        policy: GroupPolicy,
    },
    /// The policy of a reused group changed (softened under best effort).
    ServerGroupPolicyChanged {
        /// The VDU.
        vdu: VduId,
        /// The group's resource name.
        resource: String,
        /// The policy before.
        from: GroupPolicy,
        /// The policy after.
        to: GroupPolicy,
    },
    /// Best effort: the region has too few hosts for anti-affinity, soft-anti-affinity is used.
    AntiAffinitySoftened {
        /// The VDU.
        vdu: VduId,
        /// The region's hosts.
        hosts: u32,
        /// The VDU's maximum number of instances.
        max_instances: u32,
    },
    /// A server group was added for a VNFD rule ([`server_groups`]).
    RuleGroupAdded {
        /// The rule.
        rule: String,
        /// Its VDUs.
        vdus: Vec<VduId>,
        /// The group's resource name.
        resource: String,
        /// Its policy.
        policy: GroupPolicy,
    },
    /// The server group the rule's servers already referenced (the BaseHOT's) is used
    /// ([`server_groups`]).
    RuleGroupReused {
        /// The rule.
        rule: String,
        /// Its VDUs.
        vdus: Vec<VduId>,
        /// The group's resource name.
        resource: String,
        /// Its policy as written (of the rule's kind, required or soft).
        policy: GroupPolicy,
    },
    /// A server's `scheduler_hints.group` was set.
    SchedulerHintSet {
        /// The VDU.
        vdu: VduId,
        /// The template.
        file: String,
        /// The field path.
        field: String,
        /// The value, as YAML flow text.
        value: String,
    },
    /// A nested template got the parameter that carries the server group id.
    GroupParameterAdded {
        /// The VDU.
        vdu: VduId,
        /// The nested template.
        file: String,
        /// The parameter.
        parameter: String,
    },
    /// A parent resource passes the server group into its nested template.
    GroupPassed {
        /// The VDU.
        vdu: VduId,
        /// The template (the main template).
        file: String,
        /// The field path of the passed property.
        field: String,
        /// The value, as YAML flow text.
        value: String,
    },
    /// A flavour changed.
    FlavourChanged {
        /// The VDU.
        vdu: VduId,
        /// Where.
        at: FlavourAt,
        /// The flavour before.
        from: String,
        /// The flavour after.
        to: String,
        /// The isolation asked for.
        isolation: Isolation,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::ServerGroupAdded {
                vdu,
                resource,
                policy,
            } => write!(
                f,
                "{vdu}: added server group {resource} ({SERVER_GROUP}, policies [{policy}])"
            ),
            Change::ServerGroupReused {
                vdu,
                resource,
                policy,
            } => write!(f, "{vdu}: reused server group {resource} ({policy})"),
            Change::ServerGroupPolicyChanged {
                vdu,
                resource,
                from,
                to,
            } => write!(f, "{vdu}: server group {resource}: policy {from} -> {to}"),
            Change::RuleGroupAdded {
                rule,
                vdus,
                resource,
                policy,
            } => write!(
                f,
                "rule {rule} over {}: added server group {resource} ({SERVER_GROUP}, policies \
                 [{policy}])",
                join(vdus)
            ),
            Change::RuleGroupReused {
                rule,
                vdus,
                resource,
                policy,
            } => write!(
                f,
                "rule {rule} over {}: reused server group {resource} ({policy})",
                join(vdus)
            ),
            Change::AntiAffinitySoftened {
                vdu,
                hosts,
                max_instances,
            } => write!(
                f,
                "{vdu}: best effort: soft-anti-affinity (Nova microversion 2.15) instead of \
                 anti-affinity, the region has {hosts} hosts for up to {max_instances} instances"
            ),
            Change::SchedulerHintSet {
                vdu,
                file,
                field,
                value,
            } => write!(f, "{vdu}: {file}: {field} = {value}"),
            Change::GroupParameterAdded {
                vdu,
                file,
                parameter,
            } => write!(
                f,
                "{vdu}: {file}: added parameter {parameter} (the server group id)"
            ),
            Change::GroupPassed {
                vdu,
                file,
                field,
                value,
            } => write!(f, "{vdu}: {file}: {field} = {value}"),
            Change::FlavourChanged {
                vdu,
                at,
                from,
                to,
                isolation,
            } => write!(f, "{vdu}: {at}: flavour {from} -> {to} ({isolation})"),
        }
    }
}

/// The realised Heat input.
#[derive(Clone, Debug, PartialEq)]
pub struct Realised {
    /// The templates.
    pub template: TemplateBundle,
    /// The stack parameters.
    pub parameters: Parameters,
    /// What changed, in order.
    pub changes: Vec<Change>,
    /// A unified diff of the changed templates (empty when none changed).
    pub diff: String,
}

impl Realised {
    /// True when best effort weakened the intent somewhere.
    pub fn is_degraded(&self) -> bool {
        self.changes
            .iter()
            .any(|c| matches!(c, Change::AntiAffinitySoftened { .. }))
    }
}

fn join<T: fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".to_owned();
    }
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a realisation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RealiseError {
    /// A template is not valid YAML.
    #[error("{file}: not a valid HOT template")]
    Parse {
        /// The template.
        file: String,
        /// The cause.
        #[source]
        source: serde_yaml::Error,
    },
    /// A template does not have the expected structure.
    #[error("{file}: {message}")]
    Template {
        /// The template.
        file: String,
        /// What was expected.
        message: String,
    },
    /// A realised template could not be written.
    #[error("{file}: cannot write the realised template")]
    Write {
        /// The template.
        file: String,
        /// The cause.
        #[source]
        source: serde_yaml::Error,
    },
    /// The request lists a VDU twice.
    #[error("VDU {vdu} is listed more than once in the realisation request")]
    DuplicateVdu {
        /// The VDU.
        vdu: VduId,
    },
    /// No server of the VDU in the template.
    #[error(
        "VDU {vdu}: no server of it in {file}: expected a top-level resource named {vdu} (or \
         {vdu}-<index>) of type {SERVER} or a nested template, or a group whose member reads \
         [nfv, VDU, {vdu}, ...] or defines a server {vdu}"
    )]
    VduNotFound {
        /// The VDU.
        vdu: VduId,
        /// The main template.
        file: String,
    },
    /// The region has too few hosts for anti-affinity and best effort is off.
    #[error(
        "VDU {vdu}: the region has {hosts} hosts, fewer than the VDU's {max_instances} \
         instances at most, so anti-affinity cannot put every instance on a host of its own \
         (best effort would use soft-anti-affinity)"
    )]
    TooFewHosts {
        /// The VDU.
        vdu: VduId,
        /// The region's hosts.
        hosts: u32,
        /// The VDU's maximum number of instances.
        max_instances: u32,
    },
    /// The template does not tell how many instances the VDU may have.
    #[error(
        "VDU {vdu}: {file}: {field}: the maximum number of instances is unknown ({reason}); \
         give it in the request"
    )]
    MaxInstancesUnknown {
        /// The VDU.
        vdu: VduId,
        /// The template.
        file: String,
        /// The field path.
        field: String,
        /// Why.
        reason: String,
    },
    /// The VDU's servers reference more than one server group.
    #[error("VDU {vdu}: its servers reference several server groups ({}); expected one", join(.groups))]
    SeveralGroups {
        /// The VDU.
        vdu: VduId,
        /// The groups' resource names.
        groups: Vec<String>,
    },
    /// The server group the VDU's servers reference has another policy than required.
    #[error(
        "VDU {vdu}: {file}: resources.{resource}: server group policy `{policy}`, expected \
         {expected}"
    )]
    GroupPolicy {
        /// The VDU.
        vdu: VduId,
        /// The template.
        file: String,
        /// The group's resource name.
        resource: String,
        /// Its policy as written.
        policy: String,
        /// The policy required.
        expected: GroupPolicy,
    },
    /// A VNFD rule's server group cannot be realised.
    #[error("rule {rule}")]
    Rule {
        /// The rule.
        rule: String,
        /// Why.
        #[source]
        source: Box<RealiseError>,
    },
    /// A VDU is the target of two rules that each need a server group; a Nova server joins
    /// one group at most.
    #[error(
        "VDU {vdu} is a target of rules {first} and {second}, each a server group \
         (nfvi_node scope); a Nova server joins one server group at most"
    )]
    VduInTwoRules {
        /// The VDU.
        vdu: VduId,
        /// The first rule.
        first: String,
        /// The second rule.
        second: String,
    },
    /// A server's scheduler hints cannot be read or extended.
    #[error("VDU {vdu}: {file}: {field}: {message}")]
    SchedulerHints {
        /// The VDU.
        vdu: VduId,
        /// The template.
        file: String,
        /// The field path.
        field: String,
        /// What was found and expected.
        message: String,
    },
    /// A nested template that must change is also used by resources of other VDUs.
    #[error(
        "VDU {vdu}: {file} must change, but it is also the template of resources.{resource}, \
         which is not a server of the VDU"
    )]
    SharedTemplate {
        /// The VDU.
        vdu: VduId,
        /// The nested template.
        file: String,
        /// The other resource.
        resource: String,
    },
    /// A server's flavour cannot be determined.
    #[error("VDU {vdu}: {file}: {field}: cannot determine the flavour: {message}")]
    FlavourUnresolved {
        /// The VDU.
        vdu: VduId,
        /// The template.
        file: String,
        /// The field path.
        field: String,
        /// What was found.
        message: String,
    },
    /// A server's flavour is not one the region offers.
    #[error(
        "VDU {vdu}: flavour {flavour} is not offered by the region (flavours: {})",
        join(.offered)
    )]
    FlavourNotInRegion {
        /// The VDU.
        vdu: VduId,
        /// The flavour.
        flavour: String,
        /// The region's flavours without over-subscription.
        offered: Vec<String>,
    },
    /// The region has no variant at the requested percentage.
    #[error(
        "VDU {vdu}: flavour {flavour} has no burstable variant at {percent} % (allowed: {})",
        join(.allowed)
    )]
    UnsupportedPercent {
        /// The VDU.
        vdu: VduId,
        /// The flavour without over-subscription.
        flavour: String,
        /// The percentage asked for.
        percent: u32,
        /// The percentages the flavour has variants for.
        allowed: Vec<u32>,
    },
    /// A variant's declared maximum is not the burst maximum of its percentage.
    #[error(
        "flavour {flavour}: the {percent} % variant {variant} declares {declared_vcpus} vCPUs / \
         {declared_memory_mb} MB at most, expected {expected_vcpus} / {expected_memory_mb} \
         (ceil(minimum x (1 + {percent}/100)))"
    )]
    VariantMismatch {
        /// The flavour without over-subscription.
        flavour: String,
        /// The percentage.
        percent: u32,
        /// The variant.
        variant: String,
        /// Its declared vCPU maximum.
        declared_vcpus: u64,
        /// Its declared memory maximum.
        declared_memory_mb: u64,
        /// The expected vCPU maximum.
        expected_vcpus: u64,
        /// The expected memory maximum.
        expected_memory_mb: u64,
    },
    /// Two realised VDUs need different flavours in one place.
    #[error("{at}: VDU {first_vdu} needs flavour {first}, VDU {second_vdu} needs {second}")]
    ConflictingFlavour {
        /// Where.
        at: Box<FlavourAt>,
        /// The first VDU.
        first_vdu: VduId,
        /// Its flavour.
        first: String,
        /// The second VDU.
        second_vdu: VduId,
        /// Its flavour.
        second: String,
    },
}

type Result<T, E = RealiseError> = std::result::Result<T, E>;

/// Writes the intents of `request` into `bundle` and `parameters` (see the
/// [module docs](self)). `source` names the main template in changes, errors and the diff.
///
/// # Errors
/// A [`RealiseError`] naming the VDU, the template and the field when a template cannot be
/// read, a VDU has no server, the region cannot honour HA (and best effort is off), an
/// existing server group has another policy, or a flavour is unknown to the region (also under
/// [`Isolation::Guaranteed`]) or has no variant at the requested percentage.
///
/// # Example
/// ```
/// use vnfm_core::driver::{Parameters, TemplateBundle};
/// use vnfm_core::intent::realise::{
///     realise, Isolation, RealiseRequest, Realisation, RegionFlavour, RegionOffer,
/// };
///
/// let bundle = TemplateBundle {
///     template: "heat_template_version: 2018-08-31\nresources:\n  \
///                VDU1: {type: OS::Nova::Server, properties: {flavor: m1.large, image: cirros}}\n"
///         .into(),
///     files: Default::default(),
/// };
/// let request = RealiseRequest {
///     vdus: vec![Realisation::new("VDU1")
///         .with_ha()
///         .with_isolation(Isolation::Burstable { percent: 25 })],
///     region: RegionOffer {
///         hosts: 3,
///         flavours: vec![RegionFlavour::new("m1.large", 16, 32768, 80)
///             .with_burstable(25, "m1.large.b25")],
///     },
///     best_effort: false,
/// };
/// let out = realise("main.yaml", &bundle, &Parameters::new(), &request)?;
/// // a server group, the server's scheduler hint, the flavour
/// assert_eq!(out.changes.len(), 3);
/// assert!(out.template.template.contains("flavor: m1.large.b25"));
/// assert!(out.diff.contains("+      - anti-affinity"));
/// # Ok::<(), vnfm_core::intent::realise::RealiseError>(())
/// ```
pub fn realise(
    source: &str,
    bundle: &TemplateBundle,
    parameters: &Parameters,
    request: &RealiseRequest,
) -> Result<Realised> {
    let mut seen = BTreeSet::new();
    for r in &request.vdus {
        if !seen.insert(&r.vdu) {
            return Err(RealiseError::DuplicateVdu { vdu: r.vdu.clone() });
        }
    }
    let mut w = Work::new(source, bundle, parameters)?;
    for r in &request.vdus {
        let sites = w.sites(&r.vdu)?;
        if r.ha {
            w.ha(r, &sites, request)?;
        }
        w.flavours(r, &sites, &request.region)?;
    }
    w.finish()
}

/// A server group a VNFD rule asks for: the servers of its VDUs in one
/// `OS::Nova::ServerGroup` of `policy` (an `AffinityRule` or `AntiAffinityRule` at `nfvi_node`
/// scope; see [`server_groups`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupRule {
    /// The rule's name; a group vnfm adds is named after it.
    pub rule: String,
    /// The VDUs whose servers join the group (a `PlacementGroup` target expanded).
    pub vdus: Vec<VduId>,
    /// The policy.
    pub policy: GroupPolicy,
}

/// Writes the server group of every rule of `rules` into `bundle` (see the
/// [module docs](self)): the servers of the rule's VDUs join the group of the top template
/// they already reference (the BaseHOT declares it: Tacker's UserData way), which is left as
/// written but must be of the rule's kind (`affinity` or `soft-affinity` for an affinity
/// policy, `anti-affinity` or `soft-anti-affinity` for an anti-affinity one), else a new
/// `OS::Nova::ServerGroup` of the rule's policy named after the rule (the TOSCA way), with the
/// scheduler hint on every server, nested templates included. The changes name the rule
/// ([`Change::RuleGroupAdded`], [`Change::RuleGroupReused`]) and then each hint.
///
/// # Errors
/// [`RealiseError::VduInTwoRules`] when two rules share a VDU; otherwise a
/// [`RealiseError::Rule`] naming the rule, whose source names the VDU, the template and the
/// field (no server of a VDU, a group whose policy disagrees, hints that cannot be extended).
///
/// # Example
/// ```
/// use vnfm_core::driver::{Parameters, TemplateBundle};
/// use vnfm_core::intent::realise::{server_groups, GroupPolicy, GroupRule};
///
/// let bundle = TemplateBundle {
///     template: "heat_template_version: 2018-08-31\nresources:\n  \
///                worker-0: {type: OS::Nova::Server, properties: {flavor: m1.small}}\n  \
///                worker-1: {type: OS::Nova::Server, properties: {flavor: m1.small}}\n"
///         .into(),
///     files: Default::default(),
/// };
/// let rules = [GroupRule {
///     rule: "workers_apart".into(),
///     vdus: vec!["worker".into()],
///     policy: GroupPolicy::AntiAffinity,
/// }];
/// let out = server_groups("main.yaml", &bundle, &Parameters::new(), &rules)?;
/// // the group, then one hint per server
/// assert_eq!(out.changes.len(), 3);
/// assert!(out.template.template.contains("workers_apart:"));
/// assert!(out.diff.contains("+        group:"));
/// # Ok::<(), vnfm_core::intent::realise::RealiseError>(())
/// ```
pub fn server_groups(
    source: &str,
    bundle: &TemplateBundle,
    parameters: &Parameters,
    rules: &[GroupRule],
) -> Result<Realised> {
    let mut owner: BTreeMap<&VduId, &str> = BTreeMap::new();
    for r in rules {
        for v in &r.vdus {
            if let Some(first) = owner.insert(v, &r.rule) {
                return Err(RealiseError::VduInTwoRules {
                    vdu: v.clone(),
                    first: first.to_owned(),
                    second: r.rule.clone(),
                });
            }
        }
    }
    let mut w = Work::new(source, bundle, parameters)?;
    for r in rules {
        let in_rule = |source: RealiseError| RealiseError::Rule {
            rule: r.rule.clone(),
            source: Box::new(source),
        };
        let mut members = Vec::new();
        for v in &r.vdus {
            members.push((v.clone(), w.sites(v).map_err(in_rule)?));
        }
        w.join_group(&members, &r.rule, r.policy, Existing::Agree, |j| {
            let (rule, vdus, resource, policy) =
                (r.rule.clone(), r.vdus.clone(), j.resource.clone(), j.policy);
            match j.how {
                How::Added => Change::RuleGroupAdded {
                    rule,
                    vdus,
                    resource,
                    policy,
                },
                How::Reused | How::Changed { .. } => Change::RuleGroupReused {
                    rule,
                    vdus,
                    resource,
                    policy,
                },
            }
        })
        .map_err(in_rule)?;
    }
    w.finish()
}

/// Which template.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Doc {
    Main,
    File(String),
}

/// A top-level resource holding servers of the VDU.
#[derive(Clone, Debug)]
struct Site {
    /// The resource's name.
    resource: String,
    /// Its type (server, file, or a group type).
    rtype: String,
    /// Path (in the main template) to the properties of the server or nested template.
    props: Vec<String>,
    /// A nested template, or `None` for a server defined in place.
    file: Option<String>,
    /// The servers of the VDU in the nested template.
    servers: Vec<String>,
}

/// What one server's scheduler hints need.
#[derive(Clone, Debug)]
enum Hint {
    /// References group `G` of the top template.
    Group(String),
    /// A server defined in place: add `group` to its hints.
    Inline,
    /// A nested server with no group: add a hint reading a parameter, pass it.
    NestedAdd { server: String },
    /// A nested server reads `group: {get_param: P}` that the parent does not pass.
    NestedPass { param: String },
    /// A nested server's hints are the json parameter `P`; the parent passes no group in it.
    JsonPass { param: String },
}

/// How a server group the servers already reference is taken.
#[derive(Clone, Copy, Debug)]
enum Existing {
    /// The HA intent: a required group is softened when best effort asks for a soft one.
    Soften,
    /// A VNFD rule: the group is left as written; its policy must be of the rule's kind
    /// (affinity or anti-affinity), required or soft as the template has it.
    Agree,
}

/// How the servers got their group.
#[derive(Clone, Copy, Debug)]
enum How {
    Added,
    Reused,
    Changed { from: GroupPolicy },
}

/// The group the servers joined.
#[derive(Clone, Debug)]
struct Joined {
    resource: String,
    policy: GroupPolicy,
    how: How,
}

struct Work<'a> {
    source: String,
    bundle: &'a TemplateBundle,
    main: Yaml,
    main_orig: Yaml,
    files: BTreeMap<String, (Yaml, Yaml)>,
    params: Parameters,
    changed: BTreeSet<Doc>,
    changes: Vec<Change>,
    /// Flavour locations set so far: value and VDU.
    set_flavours: BTreeMap<String, (String, VduId)>,
    /// The group parameter chosen per nested template.
    group_params: BTreeMap<String, String>,
}

fn parse(file: &str, text: &str) -> Result<Yaml> {
    if let Some((line, col)) = crate::input::too_deep(text.as_bytes()) {
        return Err(RealiseError::Template {
            file: file.to_owned(),
            message: format!(
                "`[` / `{{` nested deeper than {} levels at line {line}, column {col}",
                crate::input::MAX_NESTING
            ),
        });
    }
    let v: Yaml = serde_yaml::from_str(text).map_err(|source| RealiseError::Parse {
        file: file.to_owned(),
        source,
    })?;
    if !v.is_mapping() {
        return Err(RealiseError::Template {
            file: file.to_owned(),
            message: "expected a Heat template (a mapping)".to_owned(),
        });
    }
    Ok(v)
}

fn get<'v>(v: &'v Yaml, path: &[String]) -> Option<&'v Yaml> {
    path.iter().try_fold(v, |v, k| v.get(k.as_str()))
}

/// The mapping at `path`, created (replacing a non-mapping) where missing.
fn mapping_at<'v>(v: &'v mut Yaml, path: &[String]) -> Option<&'v mut Mapping> {
    let mut cur = v;
    for k in path {
        let m = cur.as_mapping_mut()?;
        let key = Yaml::from(k.as_str());
        if !m.get(&key).is_some_and(Yaml::is_mapping) {
            m.insert(key.clone(), Yaml::Mapping(Mapping::new()));
        }
        cur = m.get_mut(&key)?;
    }
    cur.as_mapping_mut()
}

fn field(path: &[String]) -> String {
    path.join(".")
}

fn with(path: &[String], more: &[&str]) -> Vec<String> {
    let mut p = path.to_vec();
    p.extend(more.iter().map(|s| (*s).to_owned()));
    p
}

fn flow(v: &Yaml) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn get_resource(name: &str) -> Yaml {
    let mut m = Mapping::new();
    m.insert(Yaml::from("get_resource"), Yaml::from(name));
    Yaml::Mapping(m)
}

fn get_param(name: &str) -> Yaml {
    let mut m = Mapping::new();
    m.insert(Yaml::from("get_param"), Yaml::from(name));
    Yaml::Mapping(m)
}

/// The argument of a one-key function mapping `{fun: arg}`.
fn function<'v>(v: &'v Yaml, fun: &str) -> Option<&'v Yaml> {
    let m = v.as_mapping()?;
    if m.len() != 1 {
        return None;
    }
    m.get(fun)
}

fn resource_name(v: &Yaml) -> Option<&str> {
    function(v, "get_resource").and_then(Yaml::as_str)
}

fn param_name(v: &Yaml) -> Option<&str> {
    function(v, "get_param").and_then(Yaml::as_str)
}

/// True when `v` contains a `get_param: [nfv, VDU, <vdu>, ...]`.
fn reads_vdu(v: &Yaml, vdu: &str) -> bool {
    match v {
        Yaml::Mapping(m) => m.iter().any(|(k, val)| {
            if k.as_str() == Some("get_param") {
                val.as_sequence().is_some_and(|seq| {
                    seq.len() >= 4
                        && seq.first().and_then(Yaml::as_str) == Some("nfv")
                        && seq.get(1).and_then(Yaml::as_str) == Some("VDU")
                        && seq.get(2).and_then(Yaml::as_str).map(rm_idx) == Some(vdu)
                })
            } else {
                reads_vdu(val, vdu)
            }
        }),
        Yaml::Sequence(s) => s.iter().any(|x| reads_vdu(x, vdu)),
        Yaml::Tagged(t) => reads_vdu(&t.value, vdu),
        _ => false,
    }
}

fn resources(doc: &Yaml) -> Vec<(String, Yaml)> {
    doc.get("resources")
        .and_then(Yaml::as_mapping)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.clone())))
                .collect()
        })
        .unwrap_or_default()
}

fn rtype(def: &Yaml) -> Option<&str> {
    def.get("type").and_then(Yaml::as_str)
}

/// The property path of a group's member definition, relative to the resource.
fn member_path(rtype: &str) -> Option<&'static [&'static str]> {
    match rtype {
        AUTO_SCALING_GROUP => Some(&["properties", "resource"]),
        RESOURCE_GROUP => Some(&["properties", "resource_def"]),
        _ => None,
    }
}

/// The VDU's servers of a nested template: those named after it, else all.
fn servers_of(doc: &Yaml, vdu: &str) -> Vec<String> {
    let all: Vec<String> = resources(doc)
        .into_iter()
        .filter(|(_, d)| rtype(d) == Some(SERVER))
        .map(|(n, _)| n)
        .collect();
    let named: Vec<String> = all.iter().filter(|n| rm_idx(n) == vdu).cloned().collect();
    if named.is_empty() {
        all
    } else {
        named
    }
}

/// A policy as written: `policies: [p]` or `policy: p`.
fn written_policy(def: &Yaml) -> Option<String> {
    let props = def.get("properties")?;
    match props.get("policies") {
        Some(Yaml::Sequence(s)) => {
            let ps: Vec<&str> = s.iter().filter_map(Yaml::as_str).collect();
            if ps.len() == s.len() {
                Some(ps.join(","))
            } else {
                None
            }
        }
        Some(Yaml::String(p)) => Some(p.clone()),
        Some(_) => None,
        None => props
            .get("policy")
            .and_then(Yaml::as_str)
            .map(str::to_owned),
    }
}

fn set_policy(def: &mut Yaml, policy: GroupPolicy) {
    let Some(props) = def.get_mut("properties").and_then(Yaml::as_mapping_mut) else {
        return;
    };
    if props.contains_key("policy") && !props.contains_key("policies") {
        props.insert(Yaml::from("policy"), Yaml::from(policy.as_str()));
    } else {
        props.insert(
            Yaml::from("policies"),
            Yaml::Sequence(vec![Yaml::from(policy.as_str())]),
        );
    }
}

/// A number, literal or read with `get_param` of a top-level parameter.
fn json_number(v: &Json) -> Option<u64> {
    match v {
        Json::Number(n) => n.as_u64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The parameter name and path of a `get_param` argument.
fn param_path(arg: &Yaml) -> Option<(String, Vec<Json>)> {
    match arg {
        Yaml::String(s) => Some((s.clone(), Vec::new())),
        Yaml::Sequence(seq) => {
            let (first, rest) = seq.split_first()?;
            let name = first.as_str()?.to_owned();
            let path = rest
                .iter()
                .map(|k| match k {
                    Yaml::String(s) => Some(Json::String(s.clone())),
                    Yaml::Number(n) => n.as_u64().map(Json::from),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            Some((name, path))
        }
        _ => None,
    }
}

fn walk<'j>(v: &'j Json, path: &[Json]) -> Option<&'j Json> {
    path.iter().try_fold(v, |v, k| match (v, k) {
        (Json::Object(m), Json::String(s)) => m.get(s),
        (Json::Array(a), Json::Number(n)) => a.get(usize::try_from(n.as_u64()?).ok()?),
        (Json::Array(a), Json::String(s)) => a.get(s.parse::<usize>().ok()?),
        _ => None,
    })
}

fn walk_mut<'j>(v: &'j mut Json, path: &[Json]) -> Option<&'j mut Json> {
    path.iter().try_fold(v, |v, k| match (v, k) {
        (Json::Object(m), Json::String(s)) => m.get_mut(s),
        (Json::Array(a), Json::Number(n)) => a.get_mut(usize::try_from(n.as_u64()?).ok()?),
        (Json::Array(a), Json::String(s)) => a.get_mut(s.parse::<usize>().ok()?),
        _ => None,
    })
}

fn path_text(name: &str, path: &[Json]) -> String {
    let mut s = name.to_owned();
    for k in path {
        s.push('.');
        match k {
            Json::String(k) => s.push_str(k),
            other => s.push_str(&other.to_string()),
        }
    }
    s
}

/// Where a flavour is written, as found.
#[derive(Clone, Debug)]
enum FlavourRef {
    /// A literal at `path` of a template.
    Literal { doc: Doc, path: Vec<String> },
    /// A nested template's parameter its parent does not pass (its default is used): pass it.
    Unpassed { path: Vec<String> },
    /// A stack parameter.
    Param { name: String, path: Vec<Json> },
}

impl<'a> Work<'a> {
    fn new(source: &str, bundle: &'a TemplateBundle, parameters: &Parameters) -> Result<Self> {
        let main = parse(source, &bundle.template)?;
        if !main.get("resources").is_some_and(Yaml::is_mapping) {
            return Err(RealiseError::Template {
                file: source.to_owned(),
                message: "expected a mapping of resources".to_owned(),
            });
        }
        let mut files = BTreeMap::new();
        for (_, def) in resources(&main) {
            let Some(t) = rtype(&def) else { continue };
            let member = member_path(t)
                .and_then(|p| get(&def, &with(&[], p)))
                .and_then(rtype);
            for t in [Some(t), member].into_iter().flatten() {
                if let Some(text) = bundle.files.get(t) {
                    if !files.contains_key(t) {
                        let doc = parse(t, text)?;
                        files.insert(t.to_owned(), (doc.clone(), doc));
                    }
                }
            }
        }
        Ok(Self {
            source: source.to_owned(),
            bundle,
            main_orig: main.clone(),
            main,
            files,
            params: parameters.clone(),
            changed: BTreeSet::new(),
            changes: Vec::new(),
            set_flavours: BTreeMap::new(),
            group_params: BTreeMap::new(),
        })
    }

    fn file_name(&self, doc: &Doc) -> String {
        match doc {
            Doc::Main => self.source.clone(),
            Doc::File(f) => f.clone(),
        }
    }

    fn doc(&self, doc: &Doc) -> Option<&Yaml> {
        match doc {
            Doc::Main => Some(&self.main),
            Doc::File(f) => self.files.get(f).map(|(d, _)| d),
        }
    }

    fn doc_mut(&mut self, doc: &Doc) -> Option<&mut Yaml> {
        self.changed.insert(doc.clone());
        match doc {
            Doc::Main => Some(&mut self.main),
            Doc::File(f) => self.files.get_mut(f).map(|(d, _)| d),
        }
    }

    /// The top-level resources that hold servers of `vdu`.
    fn sites(&self, vdu: &VduId) -> Result<Vec<Site>> {
        let v = vdu.as_str();
        let mut out = Vec::new();
        for (name, def) in resources(&self.main) {
            let Some(t) = rtype(&def) else { continue };
            let (props, member) = match member_path(t) {
                Some(p) => {
                    let member = get(&def, &with(&[], p)).and_then(rtype);
                    (with(&["resources".to_owned(), name.clone()], p), member)
                }
                None => (vec!["resources".to_owned(), name.clone()], Some(t)),
            };
            let props = with(&props, &["properties"]);
            let Some(member) = member else { continue };
            let file = match member {
                SERVER => None,
                f => match self.files.get(f) {
                    Some(_) => Some(f.to_owned()),
                    None => continue,
                },
            };
            let file_doc = file
                .as_ref()
                .and_then(|f| self.files.get(f))
                .map(|(d, _)| d);
            let belongs = rm_idx(&name) == v
                || get(&self.main, &props).is_some_and(|p| reads_vdu(p, v))
                || file_doc.is_some_and(|d| {
                    resources(d)
                        .iter()
                        .any(|(n, d)| rtype(d) == Some(SERVER) && rm_idx(n) == v)
                });
            if !belongs {
                continue;
            }
            let servers = file_doc.map(|d| servers_of(d, v)).unwrap_or_default();
            if file.is_some() && servers.is_empty() {
                continue;
            }
            out.push(Site {
                resource: name,
                rtype: t.to_owned(),
                props,
                file,
                servers,
            });
        }
        if out.is_empty() {
            return Err(RealiseError::VduNotFound {
                vdu: vdu.clone(),
                file: self.source.clone(),
            });
        }
        Ok(out)
    }

    /// A number read from the main template: literal or a top-level parameter.
    fn number(&self, v: &Yaml) -> Option<u64> {
        match v {
            Yaml::Number(n) => n.as_u64(),
            Yaml::String(s) => s.trim().parse().ok(),
            other => {
                let (name, path) = param_path(function(other, "get_param")?)?;
                let value = self.param_value(&name)?;
                json_number(walk(&value, &path)?)
            }
        }
    }

    /// A top-level parameter's value: given, else its default.
    fn param_value(&self, name: &str) -> Option<Json> {
        if let Some(v) = self.params.get(name) {
            return Some(v.clone());
        }
        let default = self.main.get("parameters")?.get(name)?.get("default")?;
        serde_json::to_value(default).ok()
    }

    fn max_instances(&self, vdu: &VduId, sites: &[Site]) -> Result<u32> {
        let mut total: u64 = 0;
        for s in sites {
            let per = u64::try_from(s.servers.len().max(1)).unwrap_or(u64::MAX);
            let base = vec![
                "resources".to_owned(),
                s.resource.clone(),
                "properties".into(),
            ];
            let size = match s.rtype.as_str() {
                AUTO_SCALING_GROUP => Some("max_size"),
                RESOURCE_GROUP => Some("count"),
                _ => None,
            };
            let n = match size {
                None => 1,
                Some(key) => {
                    let path = with(&base, &[key]);
                    match get(&self.main, &path) {
                        None if key == "count" => 1,
                        None => {
                            return Err(RealiseError::MaxInstancesUnknown {
                                vdu: vdu.clone(),
                                file: self.source.clone(),
                                field: field(&path),
                                reason: "not given".to_owned(),
                            })
                        }
                        Some(v) => {
                            self.number(v)
                                .ok_or_else(|| RealiseError::MaxInstancesUnknown {
                                    vdu: vdu.clone(),
                                    file: self.source.clone(),
                                    field: field(&path),
                                    reason: format!("{} is not a number or a parameter", flow(v)),
                                })?
                        }
                    }
                }
            };
            total = total.saturating_add(n.saturating_mul(per));
        }
        Ok(u32::try_from(total).unwrap_or(u32::MAX))
    }

    fn hints_err(&self, vdu: &VduId, doc: &Doc, path: &[String], message: String) -> RealiseError {
        RealiseError::SchedulerHints {
            vdu: vdu.clone(),
            file: self.file_name(doc),
            field: field(path),
            message,
        }
    }

    /// What the scheduler hints of each server of `site` need.
    fn hints(&self, vdu: &VduId, site: &Site) -> Result<Vec<Hint>> {
        let group_ref = |doc: &Doc, path: &[String], v: &Yaml| -> Result<String> {
            resource_name(v).map(str::to_owned).ok_or_else(|| {
                self.hints_err(
                    vdu,
                    doc,
                    path,
                    format!(
                        "{} where a server group of the top template is expected \
                         ({{get_resource: <group>}})",
                        flow(v)
                    ),
                )
            })
        };
        let Some(file) = &site.file else {
            let path = with(&site.props, &["scheduler_hints"]);
            return Ok(vec![match get(&self.main, &path) {
                None | Some(Yaml::Null) => Hint::Inline,
                Some(Yaml::Mapping(m)) => match m.get("group") {
                    None => Hint::Inline,
                    Some(g) => Hint::Group(group_ref(&Doc::Main, &with(&path, &["group"]), g)?),
                },
                Some(other) => {
                    return Err(self.hints_err(
                        vdu,
                        &Doc::Main,
                        &path,
                        format!("{} where a mapping is expected", flow(other)),
                    ))
                }
            }]);
        };
        let fdoc = Doc::File(file.clone());
        let nested = self.doc(&fdoc).cloned().unwrap_or_default();
        let mut out = Vec::new();
        for server in &site.servers {
            let path = vec![
                "resources".to_owned(),
                server.clone(),
                "properties".into(),
                "scheduler_hints".into(),
            ];
            let hint = match get(&nested, &path) {
                None | Some(Yaml::Null) => Hint::NestedAdd {
                    server: server.clone(),
                },
                Some(Yaml::Mapping(m)) if param_name(&Yaml::Mapping(m.clone())).is_none() => {
                    match m.get("group") {
                        None => Hint::NestedAdd {
                            server: server.clone(),
                        },
                        Some(g) => {
                            let gpath = with(&path, &["group"]);
                            let Some(p) = param_name(g) else {
                                return Err(self.hints_err(
                                    vdu,
                                    &fdoc,
                                    &gpath,
                                    format!(
                                        "{} where {{get_param: <parameter>}} is expected (a \
                                         nested template cannot reference a group of its \
                                         parent; a group of its own would not span instances)",
                                        flow(g)
                                    ),
                                ));
                            };
                            let passed = with(&site.props, &[p]);
                            match get(&self.main, &passed) {
                                Some(v) if !v.is_null() => {
                                    Hint::Group(group_ref(&Doc::Main, &passed, v)?)
                                }
                                _ => {
                                    let default = nested
                                        .get("parameters")
                                        .and_then(|ps| ps.get(p))
                                        .and_then(|d| d.get("default"));
                                    if let Some(d) =
                                        default.filter(|d| !d.is_null() && d.as_str() != Some(""))
                                    {
                                        return Err(self.hints_err(
                                            vdu,
                                            &fdoc,
                                            &gpath,
                                            format!(
                                                "reads parameter {p} whose default {} is a group \
                                                 this template cannot check",
                                                flow(d)
                                            ),
                                        ));
                                    }
                                    Hint::NestedPass {
                                        param: p.to_owned(),
                                    }
                                }
                            }
                        }
                    }
                }
                Some(v) => {
                    let Some(p) = param_name(v) else {
                        return Err(self.hints_err(
                            vdu,
                            &fdoc,
                            &path,
                            format!(
                                "{} where a mapping or {{get_param: <json parameter>}} is \
                                 expected",
                                flow(v)
                            ),
                        ));
                    };
                    let passed = with(&site.props, &[p]);
                    match get(&self.main, &passed) {
                        None | Some(Yaml::Null) => Hint::JsonPass {
                            param: p.to_owned(),
                        },
                        Some(Yaml::Mapping(m)) => match m.get("group") {
                            None => Hint::JsonPass {
                                param: p.to_owned(),
                            },
                            Some(g) => {
                                Hint::Group(group_ref(&Doc::Main, &with(&passed, &["group"]), g)?)
                            }
                        },
                        Some(other) => {
                            return Err(self.hints_err(
                                vdu,
                                &Doc::Main,
                                &passed,
                                format!("{} where a mapping of hints is expected", flow(other)),
                            ))
                        }
                    }
                }
            };
            out.push(hint);
        }
        Ok(out)
    }

    /// Fails when `file` is the template of a top-level resource that is not a site.
    fn check_not_shared(&self, vdu: &VduId, file: &str, sites: &[Site]) -> Result<()> {
        for (name, def) in resources(&self.main) {
            let Some(t) = rtype(&def) else { continue };
            let member = member_path(t)
                .and_then(|p| get(&def, &with(&[], p)))
                .and_then(rtype);
            let uses = t == file || member == Some(file);
            if uses && !sites.iter().any(|s| s.resource == name) {
                return Err(RealiseError::SharedTemplate {
                    vdu: vdu.clone(),
                    file: file.to_owned(),
                    resource: name,
                });
            }
        }
        Ok(())
    }

    fn ha(&mut self, r: &Realisation, sites: &[Site], req: &RealiseRequest) -> Result<()> {
        let vdu = &r.vdu;
        let max = match r.max_instances {
            Some(m) => m,
            None => self.max_instances(vdu, sites)?,
        };
        let hosts = req.region.hosts;
        let policy = if hosts >= max {
            GroupPolicy::AntiAffinity
        } else if req.best_effort {
            self.changes.push(Change::AntiAffinitySoftened {
                vdu: vdu.clone(),
                hosts,
                max_instances: max,
            });
            GroupPolicy::SoftAntiAffinity
        } else {
            return Err(RealiseError::TooFewHosts {
                vdu: vdu.clone(),
                hosts,
                max_instances: max,
            });
        };
        let members = [(vdu.clone(), sites.to_vec())];
        let base = format!("{vdu}_anti_affinity");
        self.join_group(&members, &base, policy, Existing::Soften, |j| match j.how {
            How::Added => Change::ServerGroupAdded {
                vdu: vdu.clone(),
                resource: j.resource.clone(),
                policy: j.policy,
            },
            How::Reused => Change::ServerGroupReused {
                vdu: vdu.clone(),
                resource: j.resource.clone(),
                policy: j.policy,
            },
            How::Changed { from } => Change::ServerGroupPolicyChanged {
                vdu: vdu.clone(),
                resource: j.resource.clone(),
                from,
                to: j.policy,
            },
        })?;
        Ok(())
    }

    /// The servers of `members` (each VDU with its sites) join one server group of `policy`:
    /// the group of the top template they already reference (taken as `existing` says), else
    /// a new one named `base` (or `base_<n>` when taken). `announce` gives the change that
    /// records the group; the hints and passed parameters follow it.
    fn join_group(
        &mut self,
        members: &[(VduId, Vec<Site>)],
        base: &str,
        policy: GroupPolicy,
        existing: Existing,
        announce: impl FnOnce(&Joined) -> Change,
    ) -> Result<Joined> {
        let mut per_site = Vec::new();
        for (vdu, sites) in members {
            for s in sites {
                per_site.push((vdu, s, self.hints(vdu, s)?));
            }
        }
        // Each group referenced, with the first VDU whose servers reference it.
        let mut found: BTreeMap<String, &VduId> = BTreeMap::new();
        for (vdu, _, hints) in &per_site {
            for h in hints {
                if let Hint::Group(g) = h {
                    found.entry(g.clone()).or_insert(*vdu);
                }
            }
        }
        let mut groups = found.into_iter();
        let joined = match (groups.next(), groups.next()) {
            (None, _) => Joined {
                resource: self.add_group(base, policy)?,
                policy,
                how: How::Added,
            },
            (Some((g, vdu)), None) => self.reuse_group(vdu, &g, policy, existing)?,
            (Some((first, vdu)), Some((second, _))) => {
                return Err(RealiseError::SeveralGroups {
                    vdu: vdu.clone(),
                    groups: [first, second]
                        .into_iter()
                        .chain(groups.map(|(g, _)| g))
                        .collect(),
                })
            }
        };
        self.changes.push(announce(&joined));
        let all_sites: Vec<Site> = members
            .iter()
            .flat_map(|(_, s)| s.iter().cloned())
            .collect();
        for (vdu, site, hints) in per_site {
            for hint in hints {
                self.apply_hint(vdu, site, &all_sites, &joined.resource, hint)?;
            }
        }
        Ok(joined)
    }

    /// Adds an `OS::Nova::ServerGroup` of `policy` named `base` (or `base_<n>` when a resource
    /// has that name) to the top template.
    fn add_group(&mut self, base: &str, policy: GroupPolicy) -> Result<String> {
        let taken: BTreeSet<String> = resources(&self.main).into_iter().map(|(n, _)| n).collect();
        let name = std::iter::once(base.to_owned())
            .chain((2..).map(|i| format!("{base}_{i}")))
            .find(|n| !taken.contains(n))
            .unwrap_or_else(|| base.to_owned());
        let mut props = Mapping::new();
        props.insert(Yaml::from("name"), Yaml::from(name.as_str()));
        props.insert(
            Yaml::from("policies"),
            Yaml::Sequence(vec![Yaml::from(policy.as_str())]),
        );
        let mut def = Mapping::new();
        def.insert(Yaml::from("type"), Yaml::from(SERVER_GROUP));
        def.insert(Yaml::from("properties"), Yaml::Mapping(props));
        let source = self.source.clone();
        let res = self
            .doc_mut(&Doc::Main)
            .and_then(|d| d.get_mut("resources"))
            .and_then(Yaml::as_mapping_mut)
            .ok_or_else(|| RealiseError::Template {
                file: source,
                message: "expected a mapping of resources".to_owned(),
            })?;
        res.insert(Yaml::from(name.as_str()), Yaml::Mapping(def));
        Ok(name)
    }

    /// The group `group` the servers of `vdu` reference, taken for `policy`: the same policy
    /// is reused; with [`Existing::Soften`] the required form of a soft `policy` is softened,
    /// with [`Existing::Agree`] any policy of the same kind is kept; any other policy is an
    /// error (naming `policy` as expected).
    fn reuse_group(
        &mut self,
        vdu: &VduId,
        group: &str,
        policy: GroupPolicy,
        existing: Existing,
    ) -> Result<Joined> {
        let path = vec!["resources".to_owned(), group.to_owned()];
        let def = get(&self.main, &path).cloned();
        let Some(def) = def.filter(|d| rtype(d) == Some(SERVER_GROUP)) else {
            return Err(RealiseError::SchedulerHints {
                vdu: vdu.clone(),
                file: self.source.clone(),
                field: field(&path),
                message: format!(
                    "the VDU's servers reference {group}, which is not an {SERVER_GROUP} of the \
                     top template"
                ),
            });
        };
        let written = written_policy(&def).unwrap_or_else(|| "<not a literal>".to_owned());
        let err = |written: String| RealiseError::GroupPolicy {
            vdu: vdu.clone(),
            file: self.source.clone(),
            resource: group.to_owned(),
            policy: written,
            expected: policy,
        };
        let Some(current) = GroupPolicy::parse(&written) else {
            return Err(err(written));
        };
        let joined = |policy, how| Joined {
            resource: group.to_owned(),
            policy,
            how,
        };
        match existing {
            _ if current == policy => Ok(joined(policy, How::Reused)),
            Existing::Agree if current.hard() == policy.hard() => Ok(joined(current, How::Reused)),
            Existing::Soften if current == policy.hard() => {
                if let Some(d) = self.doc_mut(&Doc::Main).and_then(|d| get_mut(d, &path)) {
                    set_policy(d, policy);
                }
                Ok(joined(policy, How::Changed { from: current }))
            }
            _ => Err(err(written)),
        }
    }

    /// Sets `path` of the main template to `value` and records it as passed.
    fn pass(&mut self, vdu: &VduId, path: &[String], value: Yaml) {
        let Some((last, parent)) = path.split_last() else {
            return;
        };
        if get(&self.main, path) == Some(&value) {
            return;
        }
        if let Some(m) = self.doc_mut(&Doc::Main).and_then(|d| mapping_at(d, parent)) {
            m.insert(Yaml::from(last.as_str()), value.clone());
        }
        self.changes.push(Change::GroupPassed {
            vdu: vdu.clone(),
            file: self.source.clone(),
            field: field(path),
            value: flow(&value),
        });
    }

    /// The parameter of `file` that carries the group: the one a server's hint already reads,
    /// else a new one.
    fn group_param(&mut self, vdu: &VduId, file: &str) -> String {
        if let Some(p) = self.group_params.get(file) {
            return p.clone();
        }
        let doc = Doc::File(file.to_owned());
        let nested = self.doc(&doc).cloned().unwrap_or_default();
        let existing = resources(&nested).into_iter().find_map(|(_, d)| {
            let g = d.get("properties")?.get("scheduler_hints")?.get("group")?;
            param_name(g).map(str::to_owned)
        });
        let declared = |p: &str| nested.get("parameters").and_then(|ps| ps.get(p)).is_some();
        let name = existing.unwrap_or_else(|| {
            ["server_group", "anti_affinity_group"]
                .iter()
                .map(|s| (*s).to_owned())
                .chain((2..).map(|i| format!("anti_affinity_group_{i}")))
                .find(|p| !declared(p))
                .unwrap_or_default()
        });
        if !declared(&name) {
            let mut def = Mapping::new();
            def.insert(Yaml::from("type"), Yaml::from("string"));
            def.insert(
                Yaml::from("description"),
                Yaml::from("the server group the servers join (scheduler_hints.group)"),
            );
            if let Some(ps) = self
                .doc_mut(&doc)
                .and_then(|d| mapping_at(d, &["parameters".to_owned()]))
            {
                ps.insert(Yaml::from(name.as_str()), Yaml::Mapping(def));
            }
            self.changes.push(Change::GroupParameterAdded {
                vdu: vdu.clone(),
                file: file.to_owned(),
                parameter: name.clone(),
            });
        }
        self.group_params.insert(file.to_owned(), name.clone());
        name
    }

    fn apply_hint(
        &mut self,
        vdu: &VduId,
        site: &Site,
        sites: &[Site],
        group: &str,
        hint: Hint,
    ) -> Result<()> {
        match hint {
            Hint::Group(_) => {}
            Hint::Inline => {
                let path = with(&site.props, &["scheduler_hints", "group"]);
                let value = get_resource(group);
                if let Some(m) = self
                    .doc_mut(&Doc::Main)
                    .and_then(|d| mapping_at(d, &with(&site.props, &["scheduler_hints"])))
                {
                    m.insert(Yaml::from("group"), value.clone());
                }
                self.changes.push(Change::SchedulerHintSet {
                    vdu: vdu.clone(),
                    file: self.source.clone(),
                    field: field(&path),
                    value: flow(&value),
                });
            }
            Hint::NestedAdd { server } => {
                let Some(file) = site.file.clone() else {
                    return Ok(());
                };
                self.check_not_shared(vdu, &file, sites)?;
                let param = self.group_param(vdu, &file);
                let doc = Doc::File(file.clone());
                let hints = vec![
                    "resources".to_owned(),
                    server.clone(),
                    "properties".into(),
                    "scheduler_hints".into(),
                ];
                let value = get_param(&param);
                let already = self
                    .doc(&doc)
                    .and_then(|d| get(d, &with(&hints, &["group"])))
                    .is_some_and(|g| g == &value);
                if !already {
                    if let Some(m) = self.doc_mut(&doc).and_then(|d| mapping_at(d, &hints)) {
                        m.insert(Yaml::from("group"), value.clone());
                    }
                    self.changes.push(Change::SchedulerHintSet {
                        vdu: vdu.clone(),
                        file,
                        field: field(&with(&hints, &["group"])),
                        value: flow(&value),
                    });
                }
                self.pass(vdu, &with(&site.props, &[&param]), get_resource(group));
            }
            Hint::NestedPass { param } => {
                self.pass(vdu, &with(&site.props, &[&param]), get_resource(group));
            }
            Hint::JsonPass { param } => {
                let path = with(&site.props, &[&param]);
                let mut hints = get(&self.main, &path)
                    .and_then(Yaml::as_mapping)
                    .cloned()
                    .unwrap_or_default();
                hints.insert(Yaml::from("group"), get_resource(group));
                self.pass(vdu, &path, Yaml::Mapping(hints));
            }
        }
        Ok(())
    }

    fn unresolved(&self, vdu: &VduId, doc: &Doc, path: &[String], message: String) -> RealiseError {
        RealiseError::FlavourUnresolved {
            vdu: vdu.clone(),
            file: self.file_name(doc),
            field: field(path),
            message,
        }
    }

    /// A top-level `get_param` argument as a flavour location and its current value.
    fn flavour_param(
        &self,
        vdu: &VduId,
        doc: &Doc,
        path: &[String],
        arg: &Yaml,
    ) -> Result<(String, FlavourRef)> {
        let (name, ppath) = param_path(arg).ok_or_else(|| {
            self.unresolved(
                vdu,
                doc,
                path,
                format!("get_param {} is not a name or path", flow(arg)),
            )
        })?;
        let value = self.param_value(&name).ok_or_else(|| {
            self.unresolved(
                vdu,
                doc,
                path,
                format!("parameter {name} has no value in the parameters and no default"),
            )
        })?;
        match walk(&value, &ppath) {
            Some(Json::String(s)) => Ok((s.clone(), FlavourRef::Param { name, path: ppath })),
            other => Err(self.unresolved(
                vdu,
                doc,
                path,
                format!(
                    "parameter {} is {} where a flavour name is expected",
                    path_text(&name, &ppath),
                    other.map_or_else(|| "missing".to_owned(), ToString::to_string)
                ),
            )),
        }
    }

    /// The current flavour of each server of `site` and where it is written.
    fn flavour_refs(&self, vdu: &VduId, site: &Site) -> Result<Vec<(String, FlavourRef)>> {
        let Some(file) = &site.file else {
            let path = with(&site.props, &["flavor"]);
            return Ok(vec![self.flavour_at_main(vdu, &path)?]);
        };
        let fdoc = Doc::File(file.clone());
        let nested = self.doc(&fdoc).cloned().unwrap_or_default();
        let mut out = Vec::new();
        for server in &site.servers {
            let path = vec![
                "resources".to_owned(),
                server.clone(),
                "properties".into(),
                "flavor".into(),
            ];
            match get(&nested, &path) {
                Some(Yaml::String(s)) => out.push((
                    s.clone(),
                    FlavourRef::Literal {
                        doc: fdoc.clone(),
                        path,
                    },
                )),
                Some(v) => {
                    let Some(p) = param_name(v) else {
                        return Err(self.unresolved(
                            vdu,
                            &fdoc,
                            &path,
                            format!("{} is not a name or {{get_param: <parameter>}}", flow(v)),
                        ));
                    };
                    let passed = with(&site.props, &[p]);
                    if get(&self.main, &passed).is_some_and(|v| !v.is_null()) {
                        out.push(self.flavour_at_main(vdu, &passed)?);
                        continue;
                    }
                    let default = nested
                        .get("parameters")
                        .and_then(|ps| ps.get(p))
                        .and_then(|d| d.get("default"))
                        .and_then(Yaml::as_str);
                    let Some(d) = default else {
                        return Err(self.unresolved(
                            vdu,
                            &fdoc,
                            &path,
                            format!(
                                "parameter {p} is neither passed by resources.{} nor has a \
                                 default",
                                site.resource
                            ),
                        ));
                    };
                    out.push((d.to_owned(), FlavourRef::Unpassed { path: passed }));
                }
                None => {
                    return Err(self.unresolved(vdu, &fdoc, &path, "not given".to_owned()));
                }
            }
        }
        Ok(out)
    }

    fn flavour_at_main(&self, vdu: &VduId, path: &[String]) -> Result<(String, FlavourRef)> {
        match get(&self.main, path) {
            Some(Yaml::String(s)) => Ok((
                s.clone(),
                FlavourRef::Literal {
                    doc: Doc::Main,
                    path: path.to_vec(),
                },
            )),
            Some(v) => match function(v, "get_param") {
                Some(arg) => self.flavour_param(vdu, &Doc::Main, path, arg),
                None => Err(self.unresolved(
                    vdu,
                    &Doc::Main,
                    path,
                    format!("{} is not a name or a get_param", flow(v)),
                )),
            },
            None => Err(self.unresolved(vdu, &Doc::Main, path, "not given".to_owned())),
        }
    }

    fn flavours(&mut self, r: &Realisation, sites: &[Site], region: &RegionOffer) -> Result<()> {
        for site in sites {
            for (current, at) in self.flavour_refs(&r.vdu, site)? {
                let target = target_flavour(&r.vdu, &current, r.isolation, region)?;
                self.set_flavour(r, sites, &current, &target, at)?;
            }
        }
        Ok(())
    }

    fn set_flavour(
        &mut self,
        r: &Realisation,
        sites: &[Site],
        current: &str,
        target: &str,
        at: FlavourRef,
    ) -> Result<()> {
        let shown = match &at {
            FlavourRef::Literal { doc, path } => FlavourAt::Template {
                file: self.file_name(doc),
                field: field(path),
            },
            FlavourRef::Unpassed { path } => FlavourAt::Template {
                file: self.source.clone(),
                field: field(path),
            },
            FlavourRef::Param { name, path } => FlavourAt::Parameter {
                path: path_text(name, path),
            },
        };
        let key = shown.to_string();
        if let Some((first, first_vdu)) = self.set_flavours.get(&key) {
            if first != target {
                return Err(RealiseError::ConflictingFlavour {
                    at: Box::new(shown),
                    first_vdu: first_vdu.clone(),
                    first: first.clone(),
                    second_vdu: r.vdu.clone(),
                    second: target.to_owned(),
                });
            }
            return Ok(());
        }
        self.set_flavours
            .insert(key, (target.to_owned(), r.vdu.clone()));
        if current == target {
            return Ok(());
        }
        match &at {
            FlavourRef::Literal { doc, path } => {
                if let Doc::File(f) = doc {
                    self.check_not_shared(&r.vdu, f, sites)?;
                }
                self.set_literal(doc, path, target);
            }
            FlavourRef::Unpassed { path } => self.set_literal(&Doc::Main, path, target),
            FlavourRef::Param { name, path } => {
                if !self.params.contains_key(name) {
                    if let Some(v) = self.param_value(name) {
                        self.params.insert(name.clone(), v);
                    }
                }
                if let Some(leaf) = self.params.get_mut(name).and_then(|v| walk_mut(v, path)) {
                    *leaf = Json::String(target.to_owned());
                }
            }
        }
        self.changes.push(Change::FlavourChanged {
            vdu: r.vdu.clone(),
            at: shown,
            from: current.to_owned(),
            to: target.to_owned(),
            isolation: r.isolation,
        });
        Ok(())
    }

    fn set_literal(&mut self, doc: &Doc, path: &[String], value: &str) {
        if let Some((last, parent)) = path.split_last() {
            if let Some(m) = self.doc_mut(doc).and_then(|d| mapping_at(d, parent)) {
                m.insert(Yaml::from(last.as_str()), Yaml::from(value));
            }
        }
    }

    fn finish(self) -> Result<Realised> {
        let mut template = self.bundle.clone();
        let mut diff = String::new();
        for doc in &self.changed {
            let (now, before) = match doc {
                Doc::Main => (&self.main, &self.main_orig),
                Doc::File(f) => match self.files.get(f) {
                    Some((now, before)) => (now, before),
                    None => continue,
                },
            };
            let name = self.file_name(doc);
            let write = |v: &Yaml| {
                serde_yaml::to_string(v).map_err(|source| RealiseError::Write {
                    file: name.clone(),
                    source,
                })
            };
            let (new_text, old_text) = (write(now)?, write(before)?);
            diff.push_str(&unified_diff(
                &format!("a/{name}"),
                &format!("b/{name}"),
                &old_text,
                &new_text,
            ));
            match doc {
                Doc::Main => template.template = new_text,
                Doc::File(f) => {
                    let orig = self.bundle.files.get(f).cloned().unwrap_or_default();
                    for (k, text) in template.files.iter_mut() {
                        if k == f || (*text == orig && !self.files.contains_key(k)) {
                            *text = new_text.clone();
                        }
                    }
                }
            }
        }
        Ok(Realised {
            template,
            parameters: self.params,
            changes: self.changes,
            diff,
        })
    }
}

fn get_mut<'v>(v: &'v mut Yaml, path: &[String]) -> Option<&'v mut Yaml> {
    path.iter().try_fold(v, |v, k| v.get_mut(k.as_str()))
}

/// The flavour `isolation` needs in place of `current`.
fn target_flavour(
    vdu: &VduId,
    current: &str,
    isolation: Isolation,
    region: &RegionOffer,
) -> Result<String> {
    let base = region
        .flavours
        .iter()
        .find(|f| f.name == current || f.oversubscribed.values().any(|o| o.flavour == current))
        .ok_or_else(|| RealiseError::FlavourNotInRegion {
            vdu: vdu.clone(),
            flavour: current.to_owned(),
            offered: region.flavours.iter().map(|f| f.name.clone()).collect(),
        })?;
    let percent = match isolation {
        Isolation::Guaranteed => return Ok(base.name.clone()),
        Isolation::Burstable { percent } => percent,
    };
    let variant =
        base.oversubscribed
            .get(&percent)
            .ok_or_else(|| RealiseError::UnsupportedPercent {
                vdu: vdu.clone(),
                flavour: base.name.clone(),
                percent,
                allowed: base.oversubscribed.keys().copied().collect(),
            })?;
    let (ev, em) = (
        burst_maximum(base.vcpus, percent),
        burst_maximum(base.memory_mb, percent),
    );
    if variant.max_vcpus != ev || variant.max_memory_mb != em {
        return Err(RealiseError::VariantMismatch {
            flavour: base.name.clone(),
            percent,
            variant: variant.flavour.clone(),
            declared_vcpus: variant.max_vcpus,
            declared_memory_mb: variant.max_memory_mb,
            expected_vcpus: ev,
            expected_memory_mb: em,
        });
    }
    Ok(variant.flavour.clone())
}

/// A unified diff (`---`/`+++` headers, `@@` hunks with 3 lines of context) of `old` and
/// `new`, line by line; empty when they are equal.
pub fn unified_diff(old_name: &str, new_name: &str, old: &str, new: &str) -> String {
    const CONTEXT: usize = 3;
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = line_ops(&a, &b);
    if ops.iter().all(|o| matches!(o, Op::Same(..))) {
        return String::new();
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !matches!(o, Op::Same(..)))
        .map(|(i, _)| i)
        .collect();
    // Group changed ops whose context windows touch.
    let mut hunks: Vec<(usize, usize)> = Vec::new();
    for &i in &changed {
        let start = i.saturating_sub(CONTEXT);
        let end = (i + CONTEXT + 1).min(ops.len());
        match hunks.last_mut() {
            Some(h) if start <= h.1 => h.1 = end,
            _ => hunks.push((start, end)),
        }
    }
    for (start, end) in hunks {
        let slice = ops.get(start..end).unwrap_or_default();
        let (mut a0, mut b0) = (None, None);
        let (mut na, mut nb) = (0, 0);
        for o in slice {
            match o {
                Op::Same(i, j) => {
                    a0.get_or_insert(*i);
                    b0.get_or_insert(*j);
                    na += 1;
                    nb += 1;
                }
                Op::Del(i, j) => {
                    a0.get_or_insert(*i);
                    b0.get_or_insert(*j);
                    na += 1;
                }
                Op::Ins(i, j) => {
                    a0.get_or_insert(*i);
                    b0.get_or_insert(*j);
                    nb += 1;
                }
            }
        }
        let show = |s: Option<usize>, n: usize| {
            let s = s.unwrap_or(0);
            if n == 0 {
                format!("{s},0")
            } else {
                format!("{},{n}", s + 1)
            }
        };
        out.push_str(&format!("@@ -{} +{} @@\n", show(a0, na), show(b0, nb)));
        for o in slice {
            let (sign, line) = match o {
                Op::Same(i, _) => (' ', a.get(*i)),
                Op::Del(i, _) => ('-', a.get(*i)),
                Op::Ins(_, j) => ('+', b.get(*j)),
            };
            out.push(sign);
            out.push_str(line.copied().unwrap_or_default());
            out.push('\n');
        }
    }
    out
}

/// A line operation: positions in the old and new text (for insertions and deletions the
/// position the line goes at in the other text).
#[derive(Clone, Copy, Debug)]
enum Op {
    Same(usize, usize),
    Del(usize, usize),
    Ins(usize, usize),
}

/// A shortest edit script by longest common subsequence (quadratic; templates are small,
/// and past 4 million cells the changed middle is shown replaced whole).
fn line_ops(a: &[&str], b: &[&str]) -> Vec<Op> {
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let mut ops: Vec<Op> = (0..pre).map(|i| Op::Same(i, i)).collect();
    let (n, m) = (ma.len(), mb.len());
    if n.saturating_mul(m) > 4_000_000 {
        ops.extend((0..n).map(|i| Op::Del(pre + i, pre)));
        ops.extend((0..m).map(|j| Op::Ins(pre + n, pre + j)));
    } else {
        // lcs[i][j]: LCS length of ma[i..] and mb[j..].
        let w = m + 1;
        let mut lcs = vec![0_u32; (n + 1) * w];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                let v = if ma.get(i) == mb.get(j) {
                    lcs.get((i + 1) * w + j + 1).copied().unwrap_or(0) + 1
                } else {
                    let down = lcs.get((i + 1) * w + j).copied().unwrap_or(0);
                    let right = lcs.get(i * w + j + 1).copied().unwrap_or(0);
                    down.max(right)
                };
                if let Some(c) = lcs.get_mut(i * w + j) {
                    *c = v;
                }
            }
        }
        let at = |i: usize, j: usize| lcs.get(i * w + j).copied().unwrap_or(0);
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && ma.get(i) == mb.get(j) {
                ops.push(Op::Same(pre + i, pre + j));
                i += 1;
                j += 1;
            } else if i < n && (j == m || at(i + 1, j) >= at(i, j + 1)) {
                ops.push(Op::Del(pre + i, pre + j));
                i += 1;
            } else {
                ops.push(Op::Ins(pre + i, pre + j));
                j += 1;
            }
        }
    }
    let (sa, sb) = (a.len() - suf, b.len() - suf);
    ops.extend((0..suf).map(|k| Op::Same(sa + k, sb + k)));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: &str = "main.yaml";

    fn bundle(top: &str, files: &[(&str, &str)]) -> TemplateBundle {
        TemplateBundle {
            template: top.to_owned(),
            files: files
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn region(hosts: u32) -> RegionOffer {
        RegionOffer {
            hosts,
            flavours: vec![
                RegionFlavour::new("m1.small", 1, 2048, 20)
                    .with_burstable(25, "m1.small.b25")
                    .with_burstable(50, "m1.small.b50"),
                RegionFlavour::new("x16", 16, 32768, 160).with_burstable(25, "x16.b25"),
            ],
        }
    }

    fn req(r: Realisation, hosts: u32, best_effort: bool) -> RealiseRequest {
        RealiseRequest {
            vdus: vec![r],
            region: region(hosts),
            best_effort,
        }
    }

    fn doc(text: &str) -> Yaml {
        serde_yaml::from_str(text).unwrap()
    }

    fn at<'v>(v: &'v Yaml, path: &str) -> &'v Yaml {
        path.split('.')
            .try_fold(v, |v, k| v.get(k))
            .unwrap_or_else(|| panic!("no {path} in {v:?}"))
    }

    const PLAIN: &str = "
heat_template_version: 2018-08-31
parameters:
  flavor: {type: string, default: m1.small}
resources:
  VDU1-0: {type: OS::Nova::Server, properties: {flavor: m1.small, image: cirros}}
  VDU1-1: {type: OS::Nova::Server, properties: {flavor: m1.small, image: cirros, scheduler_hints: {different_host: x}}}
  VDU2: {type: OS::Nova::Server, properties: {flavor: {get_param: flavor}, image: cirros}}
";

    #[test]
    fn burst_maximum_rounds_up() {
        assert_eq!(burst_maximum(16, 25), 20);
        assert_eq!(burst_maximum(32 * 1024, 25), 40 * 1024);
        assert_eq!(burst_maximum(1, 25), 2);
        assert_eq!(burst_maximum(3, 0), 3);
    }

    #[test]
    fn ha_on_plain_servers_adds_one_group_and_every_hint() {
        let out = realise(
            MAIN,
            &bundle(PLAIN, &[]),
            &Parameters::new(),
            &req(Realisation::new("VDU1").with_ha(), 2, false),
        )
        .unwrap();
        let d = doc(&out.template.template);
        let groups: Vec<_> = resources(&d)
            .into_iter()
            .filter(|(_, d)| rtype(d) == Some(SERVER_GROUP))
            .collect();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].0, "VDU1_anti_affinity");
        assert_eq!(
            written_policy(&groups[0].1).as_deref(),
            Some("anti-affinity")
        );
        for s in ["VDU1-0", "VDU1-1"] {
            let g = at(
                &d,
                &format!("resources.{s}.properties.scheduler_hints.group"),
            );
            assert_eq!(resource_name(g), Some("VDU1_anti_affinity"));
        }
        // other hints kept, other VDUs untouched
        assert_eq!(
            at(
                &d,
                "resources.VDU1-1.properties.scheduler_hints.different_host"
            )
            .as_str(),
            Some("x")
        );
        assert!(at(&d, "resources.VDU2.properties")
            .get("scheduler_hints")
            .is_none());
        assert!(out.diff.contains("+  VDU1_anti_affinity:"), "{}", out.diff);
        assert!(out
            .diff
            .starts_with("--- a/main.yaml\n+++ b/main.yaml\n@@ "));
        assert!(!out.is_degraded());
        let texts: Vec<String> = out.changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts[0],
            "VDU1: added server group VDU1_anti_affinity (OS::Nova::ServerGroup, policies [anti-affinity])"
        );
    }

    #[test]
    fn too_few_hosts_refused_or_softened() {
        let r = Realisation::new("VDU1").with_ha().with_max_instances(3);
        let e = realise(
            MAIN,
            &bundle(PLAIN, &[]),
            &Parameters::new(),
            &req(r.clone(), 2, false),
        )
        .unwrap_err();
        assert!(matches!(
            e,
            RealiseError::TooFewHosts {
                hosts: 2,
                max_instances: 3,
                ..
            }
        ));
        assert!(
            e.to_string().contains("VDU VDU1: the region has 2 hosts"),
            "{e}"
        );
        let out = realise(
            MAIN,
            &bundle(PLAIN, &[]),
            &Parameters::new(),
            &req(r, 2, true),
        )
        .unwrap();
        assert!(out.is_degraded());
        let d = doc(&out.template.template);
        assert_eq!(
            written_policy(at(&d, "resources.VDU1_anti_affinity")).as_deref(),
            Some("soft-anti-affinity")
        );
        assert!(out.changes[0].to_string().contains("microversion 2.15"));
    }

    #[test]
    fn flavour_literal_and_get_param_default() {
        let burst = Isolation::Burstable { percent: 25 };
        let mut rq = req(Realisation::new("VDU1").with_isolation(burst), 2, false);
        rq.vdus.push(Realisation::new("VDU2").with_isolation(burst));
        let out = realise(MAIN, &bundle(PLAIN, &[]), &Parameters::new(), &rq).unwrap();
        let d = doc(&out.template.template);
        assert_eq!(
            at(&d, "resources.VDU1-0.properties.flavor").as_str(),
            Some("m1.small.b25")
        );
        assert_eq!(
            at(&d, "resources.VDU1-1.properties.flavor").as_str(),
            Some("m1.small.b25")
        );
        // get_param: the template keeps reading the parameter; the parameter gets the value
        assert_eq!(
            param_name(at(&d, "resources.VDU2.properties.flavor")),
            Some("flavor")
        );
        assert_eq!(out.parameters["flavor"], Json::from("m1.small.b25"));
        assert!(out.changes.iter().any(|c| matches!(
            c,
            Change::FlavourChanged { at: FlavourAt::Parameter { path }, .. } if path == "flavor"
        )));
        // back to guaranteed from a variant
        let mut back = Parameters::new();
        back.insert("flavor".into(), Json::from("m1.small.b50"));
        let out = realise(
            MAIN,
            &bundle(PLAIN, &[]),
            &back,
            &req(Realisation::new("VDU2"), 2, false),
        )
        .unwrap();
        assert_eq!(out.parameters["flavor"], Json::from("m1.small"));
        assert!(out.diff.is_empty());
        assert_eq!(out.template.template, PLAIN);
    }

    #[test]
    fn unsupported_percent_and_unknown_flavour() {
        let r = Realisation::new("VDU1").with_isolation(Isolation::Burstable { percent: 30 });
        let e = realise(
            MAIN,
            &bundle(PLAIN, &[]),
            &Parameters::new(),
            &req(r, 2, false),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "VDU VDU1: flavour m1.small has no burstable variant at 30 % (allowed: 25, 50)"
        );
        let mut rq = req(Realisation::new("VDU1"), 2, false);
        rq.region.flavours.remove(0);
        let e = realise(MAIN, &bundle(PLAIN, &[]), &Parameters::new(), &rq).unwrap_err();
        assert_eq!(
            e.to_string(),
            "VDU VDU1: flavour m1.small is not offered by the region (flavours: x16)"
        );
        let mut rq = req(
            Realisation::new("VDU1").with_isolation(Isolation::Burstable { percent: 25 }),
            2,
            false,
        );
        if let Some(v) = rq.region.flavours[0].oversubscribed.get_mut(&25) {
            v.max_vcpus = 1;
        }
        let e = realise(MAIN, &bundle(PLAIN, &[]), &Parameters::new(), &rq).unwrap_err();
        assert!(
            matches!(
                e,
                RealiseError::VariantMismatch {
                    expected_vcpus: 2,
                    ..
                }
            ),
            "{e}"
        );
    }

    const GROUPED: &str = "
heat_template_version: 2018-08-31
resources:
  aa: {type: OS::Nova::ServerGroup, properties: {name: aa, policies: [anti-affinity]}}
  aff: {type: OS::Nova::ServerGroup, properties: {name: aff, policies: [affinity]}}
  VDU1-0: {type: OS::Nova::Server, properties: {flavor: m1.small, scheduler_hints: {group: {get_resource: aa}}}}
  VDU1-1: {type: OS::Nova::Server, properties: {flavor: m1.small}}
  VDU2: {type: OS::Nova::Server, properties: {flavor: m1.small, scheduler_hints: {group: {get_resource: aff}}}}
";

    #[test]
    fn existing_group_reused_softened_or_refused() {
        let out = realise(
            MAIN,
            &bundle(GROUPED, &[]),
            &Parameters::new(),
            &req(Realisation::new("VDU1").with_ha(), 2, false),
        )
        .unwrap();
        let d = doc(&out.template.template);
        assert_eq!(
            resource_name(at(&d, "resources.VDU1-1.properties.scheduler_hints.group")),
            Some("aa")
        );
        assert!(
            matches!(&out.changes[0], Change::ServerGroupReused { resource, .. } if resource == "aa")
        );
        assert_eq!(
            resources(&d)
                .iter()
                .filter(|(_, d)| rtype(d) == Some(SERVER_GROUP))
                .count(),
            2
        );
        // best effort softens the reused group
        let out = realise(
            MAIN,
            &bundle(GROUPED, &[]),
            &Parameters::new(),
            &req(Realisation::new("VDU1").with_ha(), 1, true),
        )
        .unwrap();
        let d = doc(&out.template.template);
        assert_eq!(
            written_policy(at(&d, "resources.aa")).as_deref(),
            Some("soft-anti-affinity")
        );
        assert!(out.changes.iter().any(|c| matches!(
            c,
            Change::ServerGroupPolicyChanged {
                to: GroupPolicy::SoftAntiAffinity,
                ..
            }
        )));
        // an affinity group is not anti-affinity
        let e = realise(
            MAIN,
            &bundle(GROUPED, &[]),
            &Parameters::new(),
            &req(Realisation::new("VDU2").with_ha(), 2, false),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "VDU VDU2: main.yaml: resources.aff: server group policy `affinity`, expected anti-affinity"
        );
    }

    const RG_TOP: &str = "
heat_template_version: 2018-08-31
parameters:
  size: {type: number, default: 3}
resources:
  VDU1_group:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: size}
      resource_def:
        type: vdu1.yaml
        properties: {flavor: m1.small}
  other: {type: vdu1.yaml, properties: {flavor: m1.small}}
";
    const RG_NESTED: &str = "
heat_template_version: 2018-08-31
parameters:
  flavor: {type: string}
resources:
  VDU1: {type: OS::Nova::Server, properties: {flavor: {get_param: flavor}, image: cirros}}
";

    #[test]
    fn resource_group_counts_and_shared_nested_template() {
        let b = bundle(RG_TOP, &[("vdu1.yaml", RG_NESTED)]);
        // `other` also uses vdu1.yaml: it belongs to VDU1 (the file defines server VDU1)
        let out = realise(
            MAIN,
            &b,
            &Parameters::new(),
            &req(Realisation::new("VDU1").with_ha(), 2, true),
        )
        .unwrap();
        // 3 in the group + 1 = 4 > 2 hosts
        assert!(matches!(
            out.changes[0],
            Change::AntiAffinitySoftened {
                max_instances: 4,
                hosts: 2,
                ..
            }
        ));
        let d = doc(&out.template.template);
        for p in [
            "resources.VDU1_group.properties.resource_def.properties.server_group",
            "resources.other.properties.server_group",
        ] {
            assert_eq!(resource_name(at(&d, p)), Some("VDU1_anti_affinity"));
        }
        let n = doc(&out.template.files["vdu1.yaml"]);
        assert_eq!(
            param_name(at(&n, "resources.VDU1.properties.scheduler_hints.group")),
            Some("server_group")
        );
        assert_eq!(
            at(&n, "parameters.server_group.type").as_str(),
            Some("string")
        );
        assert!(out.diff.contains("--- a/vdu1.yaml"), "{}", out.diff);

        // a resource of another name reading the file for another VDU: shared
        let top = RG_TOP.replace("other: {type: vdu1.yaml", "VDU9: {type: vdu1.yaml");
        let b = bundle(&top, &[("vdu1.yaml", RG_NESTED)]);
        let e = realise(
            MAIN,
            &b,
            &Parameters::new(),
            &req(Realisation::new("VDU9").with_ha(), 9, false),
        )
        .unwrap_err();
        assert!(
            matches!(e, RealiseError::SharedTemplate { ref resource, .. } if resource == "VDU1_group"),
            "{e}"
        );
    }

    #[test]
    fn conflicts_duplicates_and_missing_vdus() {
        let top = "
heat_template_version: 2018-08-31
parameters:
  flavor: {type: string, default: m1.small}
resources:
  VDU1: {type: OS::Nova::Server, properties: {flavor: {get_param: flavor}}}
  VDU2: {type: OS::Nova::Server, properties: {flavor: {get_param: flavor}}}
";
        let mut rq = req(
            Realisation::new("VDU1").with_isolation(Isolation::Burstable { percent: 25 }),
            2,
            false,
        );
        rq.vdus.push(Realisation::new("VDU2"));
        let e = realise(MAIN, &bundle(top, &[]), &Parameters::new(), &rq).unwrap_err();
        assert_eq!(
            e.to_string(),
            "parameters: flavor: VDU VDU1 needs flavour m1.small.b25, VDU VDU2 needs m1.small"
        );
        rq.vdus[1] = Realisation::new("VDU1");
        assert!(matches!(
            realise(MAIN, &bundle(top, &[]), &Parameters::new(), &rq),
            Err(RealiseError::DuplicateVdu { .. })
        ));
        let e = realise(
            MAIN,
            &bundle(top, &[]),
            &Parameters::new(),
            &req(Realisation::new("VDU7"), 2, false),
        )
        .unwrap_err();
        assert!(matches!(e, RealiseError::VduNotFound { .. }));
        let rq = req(Realisation::new("VDU1"), 2, false);
        let e = realise(MAIN, &bundle("a: [", &[]), &Parameters::new(), &rq).unwrap_err();
        assert!(matches!(e, RealiseError::Parse { .. }));
    }

    #[test]
    fn nested_literal_flavour_and_unusable_hints() {
        let top = "
heat_template_version: 2018-08-31
resources:
  VDU1: {type: v.yaml}
  VDU2: {type: w.yaml, properties: {flavor: m1.small}}
";
        let v = "
heat_template_version: 2018-08-31
resources:
  VDU1: {type: OS::Nova::Server, properties: {flavor: m1.small, scheduler_hints: {group: abc-uuid}}}
";
        let w = "
heat_template_version: 2018-08-31
parameters:
  flavor: {type: string, default: m1.small}
  grp: {type: string}
resources:
  VDU2: {type: OS::Nova::Server, properties: {flavor: {get_param: flavor}, scheduler_hints: {group: {get_param: grp}}}}
";
        let b = bundle(top, &[("v.yaml", v), ("w.yaml", w)]);
        let burst = Isolation::Burstable { percent: 50 };
        let out = realise(
            MAIN,
            &b,
            &Parameters::new(),
            &req(Realisation::new("VDU1").with_isolation(burst), 2, false),
        )
        .unwrap();
        let n = doc(&out.template.files["v.yaml"]);
        assert_eq!(
            at(&n, "resources.VDU1.properties.flavor").as_str(),
            Some("m1.small.b50")
        );
        let e = realise(
            MAIN,
            &b,
            &Parameters::new(),
            &req(Realisation::new("VDU1").with_ha(), 2, false),
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "VDU VDU1: v.yaml: resources.VDU1.properties.scheduler_hints.group: \"abc-uuid\" where {get_param: <parameter>} is expected"
            ),
            "{e}"
        );
        // the nested parameter `grp` is passed the new group; `flavor` is passed a literal
        let mut rq = req(
            Realisation::new("VDU2").with_ha().with_isolation(burst),
            2,
            false,
        );
        rq.region.hosts = 1;
        let out = realise(MAIN, &b, &Parameters::new(), &rq).unwrap();
        let d = doc(&out.template.template);
        assert_eq!(
            resource_name(at(&d, "resources.VDU2.properties.grp")),
            Some("VDU2_anti_affinity")
        );
        assert_eq!(
            at(&d, "resources.VDU2.properties.flavor").as_str(),
            Some("m1.small.b50")
        );
        assert_eq!(out.template.files["w.yaml"], w);
    }

    /// A cluster in the UserData way: the top template declares the workers' group and the
    /// AutoScalingGroup passes it to the nested server's `scheduler_hints.group`.
    const CLUSTER_TOP: &str = "
heat_template_version: 2013-05-23
parameters:
  nfv: {type: json}
resources:
  srvgroup: {type: OS::Nova::ServerGroup, properties: {name: srvgroup, policies: [anti-affinity]}}
  worker_group:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 4
      resource:
        type: worker.yaml
        properties:
          flavor: {get_param: [nfv, VDU, worker, computeFlavourId]}
          group: {get_resource: srvgroup}
  master-0: {type: master.yaml, properties: {flavor: m1.small}}
";
    const CLUSTER_WORKER: &str = "
heat_template_version: 2013-05-23
parameters:
  flavor: {type: string}
  group: {type: string}
resources:
  worker: {type: OS::Nova::Server, properties: {flavor: {get_param: flavor}, scheduler_hints: {group: {get_param: group}}}}
";
    const CLUSTER_MASTER: &str = "
heat_template_version: 2013-05-23
parameters:
  flavor: {type: string}
resources:
  master: {type: OS::Nova::Server, properties: {flavor: {get_param: flavor}}}
";

    fn cluster(top: &str, worker: &str) -> TemplateBundle {
        bundle(
            top,
            &[("worker.yaml", worker), ("master.yaml", CLUSTER_MASTER)],
        )
    }

    /// `e` and its sources, joined by `: `.
    fn chain(e: &dyn std::error::Error) -> String {
        std::iter::successors(Some(e), |e| e.source())
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(": ")
    }

    fn rule(name: &str, vdus: &[&str], policy: GroupPolicy) -> GroupRule {
        GroupRule {
            rule: name.to_owned(),
            vdus: vdus.iter().map(|v| VduId::new(*v)).collect(),
            policy,
        }
    }

    #[test]
    fn group_policies_are_nova_names_with_a_required_and_a_soft_form() {
        for p in GroupPolicy::ALL {
            assert_eq!(
                serde_json::to_value(p).unwrap(),
                serde_json::json!(p.as_str())
            );
            assert_eq!(GroupPolicy::parse(p.as_str()), Some(p));
            assert!(!p.hard().is_soft() && p.soft().is_soft());
            assert_eq!(
                (p.hard().is_anti(), p.soft().is_anti()),
                (p.is_anti(), p.is_anti())
            );
        }
        assert_eq!(GroupPolicy::parse("spread"), None);
    }

    #[test]
    fn a_rule_group_the_basehot_declares_is_left_as_written() {
        let b = cluster(CLUSTER_TOP, CLUSTER_WORKER);
        let groups = |policy| {
            server_groups(
                MAIN,
                &b,
                &Parameters::new(),
                &[rule("workers_apart", &["worker"], policy)],
            )
        };
        let out = groups(GroupPolicy::AntiAffinity).unwrap();
        assert_eq!(
            out.changes,
            vec![Change::RuleGroupReused {
                rule: "workers_apart".into(),
                vdus: vec![VduId::new("worker")],
                resource: "srvgroup".into(),
                policy: GroupPolicy::AntiAffinity,
            }]
        );
        assert_eq!(out.template, b);
        assert_eq!(out.diff, "");
        assert_eq!(
            out.changes[0].to_string(),
            "rule workers_apart over worker: reused server group srvgroup (anti-affinity)"
        );

        // required or soft is the template's choice: kept, and reported as it is
        let out = groups(GroupPolicy::SoftAntiAffinity).unwrap();
        assert!(matches!(
            &out.changes[..],
            [Change::RuleGroupReused {
                policy: GroupPolicy::AntiAffinity,
                ..
            }]
        ));
        assert_eq!(out.template, b);
        let soft = CLUSTER_TOP.replace("[anti-affinity]", "[soft-anti-affinity]");
        let soft = cluster(&soft, CLUSTER_WORKER);
        let out = server_groups(
            MAIN,
            &soft,
            &Parameters::new(),
            &[rule(
                "workers_apart",
                &["worker"],
                GroupPolicy::AntiAffinity,
            )],
        )
        .unwrap();
        assert!(matches!(
            &out.changes[..],
            [Change::RuleGroupReused {
                policy: GroupPolicy::SoftAntiAffinity,
                ..
            }]
        ));
        assert_eq!(out.template, soft);

        // a group that disagrees with the VNFD is refused, naming both policies
        for (asked, shown) in [
            (GroupPolicy::Affinity, "expected affinity"),
            (GroupPolicy::SoftAffinity, "expected soft-affinity"),
        ] {
            let e = groups(asked).unwrap_err();
            assert!(matches!(&e, RealiseError::Rule { rule, .. } if rule == "workers_apart"));
            let chain = chain(&e);
            assert_eq!(
                chain,
                format!(
                    "rule workers_apart: VDU worker: main.yaml: resources.srvgroup: server \
                     group policy `anti-affinity`, {shown}"
                )
            );
        }
    }

    #[test]
    fn a_rule_group_is_added_with_every_hint_nested_templates_too() {
        // the TOSCA way: no group, no hints; one rule over two VDUs (a PlacementGroup's)
        let top = CLUSTER_TOP
            .replace(
                "  srvgroup: {type: OS::Nova::ServerGroup, properties: {name: srvgroup, policies: [anti-affinity]}}\n",
                "  apart: {type: OS::Neutron::Net}\n",
            )
            .replace("          group: {get_resource: srvgroup}\n", "");
        let worker = CLUSTER_WORKER
            .replace(", scheduler_hints: {group: {get_param: group}}", "")
            .replace("  group: {type: string}\n", "");
        let b = cluster(&top, &worker);
        let rules = [rule(
            "apart",
            &["worker", "master"],
            GroupPolicy::AntiAffinity,
        )];
        let out = server_groups(MAIN, &b, &Parameters::new(), &rules).unwrap();
        // `apart` is taken by another resource: the group is apart_2
        assert_eq!(
            out.changes[0],
            Change::RuleGroupAdded {
                rule: "apart".into(),
                vdus: vec![VduId::new("worker"), VduId::new("master")],
                resource: "apart_2".into(),
                policy: GroupPolicy::AntiAffinity,
            }
        );
        let d = doc(&out.template.template);
        assert_eq!(
            at(&d, "resources.apart_2.type").as_str(),
            Some(SERVER_GROUP)
        );
        assert_eq!(
            at(&d, "resources.apart_2.properties.policies"),
            &doc("[anti-affinity]")
        );
        for p in [
            "resources.worker_group.properties.resource.properties.server_group",
            "resources.master-0.properties.server_group",
        ] {
            assert_eq!(resource_name(at(&d, p)), Some("apart_2"), "{p}");
        }
        for (file, server) in [("worker.yaml", "worker"), ("master.yaml", "master")] {
            let n = doc(&out.template.files[file]);
            assert_eq!(
                param_name(at(
                    &n,
                    &format!("resources.{server}.properties.scheduler_hints.group")
                )),
                Some("server_group"),
                "{file}"
            );
            assert_eq!(
                at(&n, "parameters.server_group.type").as_str(),
                Some("string")
            );
        }
        // realised again, the output is stable: the group is found and reused
        let again = server_groups(MAIN, &out.template, &Parameters::new(), &rules).unwrap();
        assert!(matches!(
            &again.changes[..],
            [Change::RuleGroupReused { resource, .. }] if resource == "apart_2"
        ));
        assert_eq!(again.diff, "");
    }

    #[test]
    fn rule_groups_on_plain_servers_any_policy_and_one_group_per_vdu() {
        let out = server_groups(
            MAIN,
            &bundle(PLAIN, &[]),
            &Parameters::new(),
            &[
                rule("near", &["VDU1"], GroupPolicy::SoftAffinity),
                rule("alone", &["VDU2"], GroupPolicy::Affinity),
            ],
        )
        .unwrap();
        let d = doc(&out.template.template);
        assert_eq!(
            at(&d, "resources.near.properties.policies"),
            &doc("[soft-affinity]")
        );
        assert_eq!(
            at(&d, "resources.alone.properties.policies"),
            &doc("[affinity]")
        );
        for (server, group) in [("VDU1-0", "near"), ("VDU1-1", "near"), ("VDU2", "alone")] {
            assert_eq!(
                resource_name(at(
                    &d,
                    &format!("resources.{server}.properties.scheduler_hints.group")
                )),
                Some(group)
            );
        }

        let e = server_groups(
            MAIN,
            &bundle(PLAIN, &[]),
            &Parameters::new(),
            &[
                rule("near", &["VDU1"], GroupPolicy::Affinity),
                rule("apart", &["VDU2", "VDU1"], GroupPolicy::AntiAffinity),
            ],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "VDU VDU1 is a target of rules near and apart, each a server group (nfvi_node \
             scope); a Nova server joins one server group at most"
        );
        let e = server_groups(
            MAIN,
            &bundle(PLAIN, &[]),
            &Parameters::new(),
            &[rule("ghost", &["VDU7"], GroupPolicy::Affinity)],
        )
        .unwrap_err();
        assert!(
            chain(&e).starts_with("rule ghost: VDU VDU7: no server"),
            "{e}"
        );
    }

    #[test]
    fn unified_diff_hunks() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
        let new = "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\n";
        assert_eq!(
            unified_diff("a/x", "b/x", old, new),
            "--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -8,3 +8,4 @@\n h\n i\n j\n+k\n"
        );
        assert_eq!(unified_diff("a", "b", old, old), "");
        assert_eq!(
            unified_diff("a", "b", "", "x\n"),
            "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+x\n"
        );
    }
}
