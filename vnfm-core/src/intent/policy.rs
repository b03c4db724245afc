//! The cloud-selection policy: the ONAP Casablanca "cloud agnostic intent" per VNFC, typed.
//!
//! An operator states, per VNFC (`resources`), a list of deployment intents
//! (`cloudDeploymentIntentList`), each optionally restricted to cloud types
//! (`"Cloud Type (Cloud Provider)"`), and whether cost counts. vnfm adds what the seed leaves
//! to the optimiser: the weights of distance and cost (`wd`, `wc` in the design note), the
//! objective mode, the allowed over-subscription percentages and a distance bound written as
//! in OOF's `distance_to_location` policies.
//!
//! ```json
//! {
//!   "service": "cloudDeploymentPolicy",
//!   "policyName": "vcpe.cloud_deployment_policy_vG",
//!   "content": {
//!     "resources": ["vG"],
//!     "cloudDeploymentIntentList": [
//!       { "Cloud Type (Cloud Provider)": ["VMware VIO"],
//!         "intentProperties": [
//!           { "deploymentIntent": "Infrastructure Resource Isolation for VNF",
//!             "intent-attributes": [
//!               {"intent-attribute-key": "Infrastructure Resource Isolation for VNF",
//!                "intent-attribute-value": "Burstable QoS", "operator": "=", "unit": ""},
//!               {"intent-attribute-key": "Burstable QoS Oversubscription Percentage",
//!                "intent-attribute-value": "25", "operator": "=", "unit": ""} ] } ] } ],
//!     "cloud-cost-evaluation": "TRUE",
//!     "allowedOversubscriptionPercentages": [25, 50],
//!     "objective": {"mode": "weighted", "weights": {"wd": 1, "wc": 2}},
//!     "distance": {"value": "1500", "operator": "<", "unit": "km"}
//!   }
//! }
//! ```
//!
//! The envelope (`service`, `policyName`, ...) is optional: a document without `content` is
//! read as the content itself. Booleans may be written `true` or as the seed's strings
//! (`"TRUE"`, `"False"`); numbers as numbers or numeric strings (`"25"`). Sets (`resources`,
//! cloud types, `cloudOwner`, `cloudRegion`) are lists; a single string is accepted as a
//! one-element set. The seed's `{"VMware VIO"}` set notation is not JSON: write it as a list.
//!
//! [`Policy::from_text`] parses JSON or YAML; [`Policy::load`] reads a file (the only IO of
//! this module). Every error is an [`Error::Invalid`] naming the file, the field path
//! (`content.cloudDeploymentIntentList[0].Cloud Type (Cloud Provider)`), the value and what
//! was expected.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Location, Result};

/// The seed's name of the HA intent.
pub const HA_INTENT: &str = "Infrastructure High Availability (HA) for VNF";
/// The seed's name of the resource isolation intent (and of its QoS attribute).
pub const ISOLATION_INTENT: &str = "Infrastructure Resource Isolation for VNF";
/// The seed's name of the over-subscription percentage attribute.
pub const OVERSUBSCRIPTION_ATTRIBUTE: &str = "Burstable QoS Oversubscription Percentage";
/// The seed's key for the cloud types of an intent entry.
pub const CLOUD_TYPE_KEY: &str = "Cloud Type (Cloud Provider)";

/// A cloud type (the seed's "Cloud Type (Cloud Provider)").
///
/// Known names are matched without regard to case and spacing variants (`openstack`,
/// `VMware VIO`, `vmware-vio`); any other name is kept as [`CloudType::Other`] and matched
/// exactly.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum CloudType {
    /// OpenStack (including distributions such as Wind River Titanium Cloud when so named).
    OpenStack,
    /// Kubernetes.
    Kubernetes,
    /// VMware Integrated OpenStack.
    VmwareVio,
    /// Microsoft Azure.
    Azure,
    /// Any other cloud type, by name.
    Other(String),
}

impl From<String> for CloudType {
    fn from(s: String) -> Self {
        let norm: String = s
            .chars()
            .filter(|c| c.is_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        match norm.as_str() {
            "openstack" => CloudType::OpenStack,
            "kubernetes" | "k8s" => CloudType::Kubernetes,
            "vmwarevio" | "vio" => CloudType::VmwareVio,
            "azure" => CloudType::Azure,
            _ => CloudType::Other(s),
        }
    }
}

impl From<CloudType> for String {
    fn from(c: CloudType) -> String {
        c.to_string()
    }
}

impl fmt::Display for CloudType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloudType::OpenStack => f.write_str("OpenStack"),
            CloudType::Kubernetes => f.write_str("Kubernetes"),
            CloudType::VmwareVio => f.write_str("VMware VIO"),
            CloudType::Azure => f.write_str("Azure"),
            CloudType::Other(s) => f.write_str(s),
        }
    }
}

/// Resource isolation (the seed's "Infrastructure Resource Isolation for VNF").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "qos", rename_all = "snake_case")]
pub enum Isolation {
    /// "Guaranteed QoS": reserved = maximum, no over-subscription.
    Guaranteed,
    /// "Burstable QoS" with its "Burstable QoS Oversubscription Percentage".
    Burstable {
        /// Over-subscription percentage (1..=100).
        percent: u32,
    },
}

/// A deployment intent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "intent", rename_all = "snake_case")]
pub enum Intent {
    /// "Infrastructure High Availability (HA) for VNF": instances on distinct hosts.
    HighAvailability,
    /// "Infrastructure Resource Isolation for VNF".
    Isolation {
        /// Guaranteed or burstable.
        isolation: Isolation,
    },
}

impl Intent {
    /// The capability a cloud owner must support to honour this intent.
    pub fn feature(&self) -> Feature {
        match self {
            Intent::HighAvailability => Feature::HighAvailability,
            Intent::Isolation {
                isolation: Isolation::Guaranteed,
            } => Feature::GuaranteedQos,
            Intent::Isolation {
                isolation: Isolation::Burstable { .. },
            } => Feature::BurstableQos,
        }
    }
}

impl fmt::Display for Intent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Intent::Isolation {
                isolation: Isolation::Burstable { percent },
            } => write!(f, "Burstable QoS ({percent}% over-subscription)"),
            other => write!(f, "{}", other.feature()),
        }
    }
}

/// A capability of a cloud owner that an intent needs (the candidate file's `supports`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Feature {
    /// Host anti-affinity (server groups, availability sets).
    #[serde(rename = "HA")]
    HighAvailability,
    /// Flavours without over-subscription.
    #[serde(rename = "Guaranteed QoS")]
    GuaranteedQos,
    /// Over-subscribed flavour variants.
    #[serde(rename = "Burstable QoS")]
    BurstableQos,
}

impl Feature {
    /// Parses `HA`, the seed's HA intent name, `Guaranteed QoS` or `Burstable QoS` (case and
    /// spacing insensitive); `None` otherwise.
    pub fn parse(s: &str) -> Option<Feature> {
        let norm: String = s
            .chars()
            .filter(|c| c.is_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        match norm.as_str() {
            "ha" | "highavailability" | "infrastructurehighavailabilityhaforvnf" => {
                Some(Feature::HighAvailability)
            }
            "guaranteedqos" => Some(Feature::GuaranteedQos),
            "burstableqos" => Some(Feature::BurstableQos),
            _ => None,
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Feature::HighAvailability => "HA",
            Feature::GuaranteedQos => "Guaranteed QoS",
            Feature::BurstableQos => "Burstable QoS",
        })
    }
}

/// One entry of `cloudDeploymentIntentList`: intents for some cloud types (all when empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentEntry {
    /// The cloud types the intents apply to; empty means every cloud type.
    pub cloud_types: Vec<CloudType>,
    /// The intents.
    pub intents: Vec<Intent>,
}

/// A term of the objective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Term {
    /// The cost of the deployment in the candidate (the cost model's currency).
    Cost,
    /// The great-circle distance in km from the customer location to the region.
    Distance,
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Term::Cost => "cost",
            Term::Distance => "distance",
        })
    }
}

/// How survivors are compared.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum Objective {
    /// The design note: minimise `wd·distance + wc·cost`.
    #[default]
    Weighted,
    /// Casablanca HAS semantics: minimise `wd·(distance + cost)` (one weight for both, as
    /// HAS's `distance_between` adds the candidate cost to the distance).
    HasCasablanca,
    /// Compare the terms in this order; ties on one term go to the next.
    Lexicographic {
        /// Terms, most important first.
        order: Vec<Term>,
    },
}

/// The weights of the objective (`wd`, `wc` in the design note).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    /// Weight of the distance in km (`wd`).
    pub distance: f64,
    /// Weight of the cost (`wc`).
    pub cost: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            distance: 1.0,
            cost: 1.0,
        }
    }
}

/// A comparison operator of a distance bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Comparison {
    /// `<`
    #[serde(rename = "<")]
    Lt,
    /// `<=`
    #[serde(rename = "<=")]
    Le,
    /// `>`
    #[serde(rename = ">")]
    Gt,
    /// `>=`
    #[serde(rename = ">=")]
    Ge,
}

impl Comparison {
    /// True when `value <op> bound` holds.
    pub fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Comparison::Lt => value < bound,
            Comparison::Le => value <= bound,
            Comparison::Gt => value > bound,
            Comparison::Ge => value >= bound,
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Comparison::Lt => "<",
            Comparison::Le => "<=",
            Comparison::Gt => ">",
            Comparison::Ge => ">=",
        })
    }
}

/// A bound on the distance to the customer (OOF's `distance_to_location`), in km.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DistanceBound {
    /// The operator.
    pub operator: Comparison,
    /// The bound in km (miles are converted when read).
    pub km: f64,
}

impl fmt::Display for DistanceBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} km", self.operator, fmt_num(self.km))
    }
}

/// Whether and how cost counts (`cloud-cost-evaluation`, `dollarCostEvaluationVM-Type`,
/// `dollarCostEvaluationVM-FeatureGroup`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostEvaluation {
    /// Cost is a term of the objective (off: the cost term is absent, and no price is needed).
    pub enabled: bool,
    /// Feature-group discounts of the cost model apply.
    pub feature_groups: bool,
}

/// A validated cloud-selection policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// `policyName`, when given.
    pub name: Option<String>,
    /// The VNFCs the policy covers (`resources`); empty means any.
    pub resources: Vec<String>,
    /// `cloudDeploymentIntentList`.
    pub intents: Vec<IntentEntry>,
    /// Over-subscription percentages a burstable intent may ask for; `None`: any in 1..=100.
    pub allowed_oversubscription: Option<Vec<u32>>,
    /// Whether cost counts.
    pub cost_evaluation: CostEvaluation,
    /// Whether capacity is checked (`capacityCheck`, default true).
    pub capacity_check: bool,
    /// Cloud owners allowed (`cloudOwner`); `None` for `All`.
    pub owners: Option<Vec<String>>,
    /// Cloud regions allowed (`cloudRegion`); `None` for `All`.
    pub regions: Option<Vec<String>>,
    /// Objective weights.
    pub weights: Weights,
    /// Objective mode.
    pub objective: Objective,
    /// Distance bound.
    pub distance: Option<DistanceBound>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            name: None,
            resources: Vec::new(),
            intents: Vec::new(),
            allowed_oversubscription: None,
            cost_evaluation: CostEvaluation::default(),
            capacity_check: true,
            owners: None,
            regions: None,
            weights: Weights::default(),
            objective: Objective::default(),
            distance: None,
        }
    }
}

const ENVELOPE_KEYS: &[&str] = &[
    "service",
    "policyName",
    "description",
    "policyDescription",
    "templateVersion",
    "version",
    "priority",
    "riskType",
    "riskLevel",
    "guard",
    "content",
];

const CONTENT_KEYS: &[&str] = &[
    "resources",
    "identity",
    "policyScope",
    "policyType",
    "applicableResources",
    "cloudDeploymentIntentList",
    "cloud-cost-evaluation",
    "dollarCostEvaluationVM-Type",
    "dollarCostEvaluationVM-FeatureGroup",
    "capacityCheck",
    "cloudOwner",
    "cloudRegion",
    "allowedOversubscriptionPercentages",
    "objective",
    "distance",
];

impl Policy {
    /// Parses and validates a policy written in JSON or YAML. `source_name` (a path or a name)
    /// is used in error locations.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the field, the value and the expectation: malformed text, an
    /// unknown key, a set that is not a list (or a single string), an unknown intent or
    /// attribute, an operator other than `=` on an intent attribute, a percentage outside the
    /// allowed ones, conflicting isolation intents for the same cloud type, bad weights or
    /// objective, a distance bound with an unknown operator or unit.
    pub fn from_text(source_name: &str, text: &str) -> Result<Policy> {
        let doc = parse_text(source_name, crate::input::strip_bom(text))?;
        let p = Parser { file: source_name };
        p.policy(&doc)
    }

    /// Reads and validates a policy file.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::Invalid`] when it is not a regular
    /// file or is larger than [`crate::input::MAX_INPUT_BYTES`]; else as [`Policy::from_text`].
    pub fn load(path: impl AsRef<Path>) -> Result<Policy> {
        let path = path.as_ref();
        let text = crate::input::read_text(path, crate::input::MAX_INPUT_BYTES, "a policy file")?;
        Self::from_text(&path.display().to_string(), &text)
    }

    /// The intents that apply to a candidate of cloud type `cloud`: those of the entries
    /// without cloud types and of the entries naming `cloud`. `None` when the policy names
    /// cloud types in every entry and none of them is `cloud` (such candidates are dropped).
    pub fn intents_for(&self, cloud: &CloudType) -> Option<Vec<Intent>> {
        let mut applies = self.intents.is_empty();
        let mut out: Vec<Intent> = Vec::new();
        for e in &self.intents {
            if e.cloud_types.is_empty() || e.cloud_types.contains(cloud) {
                applies = true;
                for i in &e.intents {
                    if !out.contains(i) {
                        out.push(*i);
                    }
                }
            }
        }
        applies.then_some(out)
    }

    /// The cloud types the policy names (empty when some entry applies to every type).
    pub fn named_cloud_types(&self) -> Vec<CloudType> {
        if self.intents.iter().any(|e| e.cloud_types.is_empty()) {
            return Vec::new();
        }
        let mut out: Vec<CloudType> = Vec::new();
        for t in self.intents.iter().flat_map(|e| e.cloud_types.iter()) {
            if !out.contains(t) {
                out.push(t.clone());
            }
        }
        out
    }

    /// True when the objective or the bound needs the distance to the customer.
    pub fn needs_distance(&self) -> bool {
        self.distance.is_some()
            || match &self.objective {
                Objective::Weighted | Objective::HasCasablanca => self.weights.distance != 0.0,
                Objective::Lexicographic { order } => order.contains(&Term::Distance),
            }
    }
}

/// Formats a number without a trailing `.0` (integers as integers, others to 2 decimals at
/// most).
pub(crate) fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// Parses JSON (text starting with `{` or `[`) or YAML into a JSON value, through the guarded
/// readers of [`crate::input`] (nesting deeper than [`crate::input::MAX_NESTING`] refused before
/// parsing), every mapping's keys unique ([`crate::input::UniqueKeys`]).
pub(crate) fn parse_text(source: &str, text: &str) -> Result<Value> {
    let crate::input::UniqueKeys(v) = if crate::input::is_json(text) {
        crate::input::parse_json(source, text)?
    } else {
        crate::input::parse_yaml(source, text)?
    };
    Ok(v)
}

/// A short rendering of a value for error messages.
pub(crate) fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        let cut: String = s.chars().take(77).collect();
        format!("{cut}...")
    } else {
        s
    }
}

/// Field-path helpers shared by the policy and candidate readers.
pub(crate) struct Parser<'a> {
    /// The file (or name) errors are located in.
    pub(crate) file: &'a str,
}

impl Parser<'_> {
    pub(crate) fn err(&self, field: &str, message: impl Into<String>) -> Error {
        Error::invalid(Location::file(self.file).with_field(field), message)
    }

    pub(crate) fn obj<'v>(&self, v: &'v Value, field: &str) -> Result<&'v Map<String, Value>> {
        v.as_object()
            .ok_or_else(|| self.err(field, format!("value {}: expected a mapping", show(v))))
    }

    pub(crate) fn keys(&self, m: &Map<String, Value>, field: &str, allowed: &[&str]) -> Result<()> {
        for k in m.keys() {
            if !allowed.contains(&k.as_str()) {
                let at = if field.is_empty() {
                    k.clone()
                } else {
                    format!("{field}.{k}")
                };
                return Err(self.err(
                    &at,
                    format!("unknown key {k:?}: expected one of {}", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }

    /// A JSON list; `what` names its items in the error ("a list of <what>").
    pub(crate) fn list<'v>(&self, v: &'v Value, field: &str, what: &str) -> Result<&'v [Value]> {
        v.as_array().map(Vec::as_slice).ok_or_else(|| {
            self.err(
                field,
                format!("value {}: expected a list of {what}", show(v)),
            )
        })
    }

    pub(crate) fn string<'v>(&self, v: &'v Value, field: &str) -> Result<&'v str> {
        v.as_str()
            .ok_or_else(|| self.err(field, format!("value {}: expected a string", show(v))))
    }

    /// A list of strings, or a single string as a one-element set.
    pub(crate) fn string_set(&self, v: &Value, field: &str) -> Result<Vec<String>> {
        let expect = "expected a list of strings (or a single string)";
        match v {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_str().map(str::to_owned).ok_or_else(|| {
                        self.err(
                            &format!("{field}[{i}]"),
                            format!("value {}: expected a string", show(x)),
                        )
                    })
                })
                .collect(),
            Value::Object(m) if m.values().all(Value::is_null) => Err(self.err(
                field,
                format!(
                    "value {} is a mapping (a brace set such as {{\"VMware VIO\"}} is not JSON): {expect}, e.g. [{}]",
                    show(v),
                    m.keys().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ")
                ),
            )),
            _ => Err(self.err(field, format!("value {}: {expect}", show(v)))),
        }
    }

    pub(crate) fn boolean(&self, v: &Value, field: &str) -> Result<bool> {
        match v {
            Value::Bool(b) => Ok(*b),
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "true" | "yes" => Ok(true),
                "false" | "no" => Ok(false),
                _ => Err(self.err(
                    field,
                    format!(
                        "value {}: expected true or false (or \"TRUE\"/\"FALSE\")",
                        show(v)
                    ),
                )),
            },
            _ => Err(self.err(
                field,
                format!(
                    "value {}: expected true or false (or \"TRUE\"/\"FALSE\")",
                    show(v)
                ),
            )),
        }
    }

    /// A finite number, or a string holding one.
    pub(crate) fn number(&self, v: &Value, field: &str) -> Result<f64> {
        let n = match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        match n {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(self.err(field, format!("value {}: expected a number", show(v)))),
        }
    }

    /// A non-negative finite number.
    pub(crate) fn non_negative(&self, v: &Value, field: &str) -> Result<f64> {
        let x = self.number(v, field)?;
        if x < 0.0 {
            return Err(self.err(
                field,
                format!("value {}: expected a non-negative number", show(v)),
            ));
        }
        Ok(x)
    }

    /// A non-negative integer, or a string holding one.
    pub(crate) fn unsigned(&self, v: &Value, field: &str) -> Result<u64> {
        let n = match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        n.ok_or_else(|| {
            self.err(
                field,
                format!("value {}: expected a non-negative integer", show(v)),
            )
        })
    }

    /// A percentage in 1..=100.
    pub(crate) fn percent(&self, v: &Value, field: &str) -> Result<u32> {
        match self.unsigned(v, field) {
            Ok(p) if (1..=100).contains(&p) => Ok(p as u32),
            _ => Err(self.err(
                field,
                format!(
                    "value {}: expected an integer percentage from 1 to 100",
                    show(v)
                ),
            )),
        }
    }

    fn policy(&self, doc: &Value) -> Result<Policy> {
        let top = self.obj(doc, "<document>")?;
        let (content, base, name) = if let Some(c) = top.get("content") {
            self.keys(top, "", ENVELOPE_KEYS)?;
            let name = match top.get("policyName") {
                Some(v) => Some(self.string(v, "policyName")?.to_owned()),
                None => None,
            };
            (self.obj(c, "content")?, "content.".to_owned(), name)
        } else {
            (top, String::new(), None)
        };
        let mut allowed_top: Vec<&str> = CONTENT_KEYS.to_vec();
        if base.is_empty() {
            allowed_top.extend(ENVELOPE_KEYS.iter().filter(|k| **k != "content"));
        }
        self.keys(content, base.trim_end_matches('.'), &allowed_top)?;
        let name = match (name, base.is_empty(), content.get("policyName")) {
            (Some(n), _, _) => Some(n),
            (None, true, Some(v)) => Some(self.string(v, "policyName")?.to_owned()),
            _ => None,
        };
        let f = |k: &str| format!("{base}{k}");
        let mut p = Policy {
            name,
            ..Policy::default()
        };
        if let Some(v) = content.get("policyType") {
            let t = self.string(v, &f("policyType"))?;
            if !matches!(
                t,
                "cloudDeploymentPolicy" | "cloudSelectionPolicy" | "AllPolicy"
            ) {
                return Err(self.err(
                    &f("policyType"),
                    format!(
                        "value {t:?}: expected cloudDeploymentPolicy, cloudSelectionPolicy or AllPolicy"
                    ),
                ));
            }
        }
        if let Some(v) = content.get("resources") {
            p.resources = self.string_set(v, &f("resources"))?;
        }
        if let Some(v) = content.get("policyScope") {
            self.string_set(v, &f("policyScope"))?;
        }
        if let Some(v) = content.get("allowedOversubscriptionPercentages") {
            let field = f("allowedOversubscriptionPercentages");
            let items = self.list(v, &field, "percentages")?;
            let mut list = Vec::new();
            for (i, x) in items.iter().enumerate() {
                list.push(self.percent(x, &format!("{field}[{i}]"))?);
            }
            p.allowed_oversubscription = Some(list);
        }
        let flag = |k: &str| -> Result<Option<bool>> {
            content.get(k).map(|v| self.boolean(v, &f(k))).transpose()
        };
        let cost_all = flag("cloud-cost-evaluation")?;
        let cost_type = flag("dollarCostEvaluationVM-Type")?;
        let cost_group = flag("dollarCostEvaluationVM-FeatureGroup")?;
        p.cost_evaluation = CostEvaluation {
            enabled: cost_type.or(cost_all).unwrap_or(false),
            feature_groups: cost_group.or(cost_all).unwrap_or(false),
        };
        if p.cost_evaluation.feature_groups && !p.cost_evaluation.enabled {
            return Err(self.err(
                &f("dollarCostEvaluationVM-FeatureGroup"),
                "value true while cost evaluation is off: expected dollarCostEvaluationVM-Type (or cloud-cost-evaluation) true as well",
            ));
        }
        p.capacity_check = flag("capacityCheck")?.unwrap_or(true);
        p.owners = self.all_or_set(content.get("cloudOwner"), &f("cloudOwner"))?;
        p.regions = self.all_or_set(content.get("cloudRegion"), &f("cloudRegion"))?;
        if let Some(v) = content.get("cloudDeploymentIntentList") {
            p.intents = self.intent_list(v, &f("cloudDeploymentIntentList"), &p)?;
        }
        if let Some(v) = content.get("objective") {
            let (w, o) = self.objective(v, &f("objective"), &p)?;
            p.weights = w;
            p.objective = o;
        }
        if let Some(v) = content.get("distance") {
            p.distance = Some(self.distance(v, &f("distance"))?);
        }
        Ok(p)
    }

    fn all_or_set(&self, v: Option<&Value>, field: &str) -> Result<Option<Vec<String>>> {
        let Some(v) = v else { return Ok(None) };
        let set = self.string_set(v, field)?;
        if set.iter().any(|s| s.eq_ignore_ascii_case("all")) {
            Ok(None)
        } else {
            Ok(Some(set))
        }
    }

    fn intent_list(&self, v: &Value, field: &str, p: &Policy) -> Result<Vec<IntentEntry>> {
        let items = self.list(v, field, "intent entries")?;
        let mut out: Vec<IntentEntry> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("{field}[{i}]");
            let m = self.obj(item, &at)?;
            self.keys(m, &at, &[CLOUD_TYPE_KEY, "intentProperties"])?;
            let cloud_types = match m.get(CLOUD_TYPE_KEY) {
                Some(v) => self
                    .string_set(v, &format!("{at}.{CLOUD_TYPE_KEY}"))?
                    .into_iter()
                    .map(CloudType::from)
                    .collect(),
                None => Vec::new(),
            };
            let props_at = format!("{at}.intentProperties");
            let props = m
                .get("intentProperties")
                .ok_or_else(|| self.err(&props_at, "missing: expected a list of intents"))?;
            let props = self.list(props, &props_at, "intents")?;
            let mut intents: Vec<Intent> = Vec::new();
            for (j, prop) in props.iter().enumerate() {
                let pat = format!("{props_at}[{j}]");
                if let Some(intent) = self.intent(prop, &pat, p)? {
                    let iso = |x: &Intent| matches!(x, Intent::Isolation { .. });
                    if iso(&intent) && intents.iter().any(iso) {
                        return Err(self.err(
                            &pat,
                            format!("a second isolation intent ({intent}): expected one isolation intent per entry"),
                        ));
                    }
                    intents.push(intent);
                }
            }
            let entry = IntentEntry {
                cloud_types,
                intents,
            };
            for prev in &out {
                let overlap = prev.cloud_types.is_empty()
                    || entry.cloud_types.is_empty()
                    || prev
                        .cloud_types
                        .iter()
                        .any(|t| entry.cloud_types.contains(t));
                let iso_of = |e: &IntentEntry| {
                    e.intents
                        .iter()
                        .find(|x| matches!(x, Intent::Isolation { .. }))
                        .copied()
                };
                if let (true, Some(a), Some(b)) = (overlap, iso_of(prev), iso_of(&entry)) {
                    if a != b {
                        return Err(self.err(
                            &at,
                            format!("isolation {b} conflicts with {a} of an earlier entry for the same cloud type: expected one isolation per cloud type"),
                        ));
                    }
                }
            }
            out.push(entry);
        }
        Ok(out)
    }

    fn intent(&self, v: &Value, at: &str, p: &Policy) -> Result<Option<Intent>> {
        let m = self.obj(v, at)?;
        self.keys(m, at, &["deploymentIntent", "intent-attributes"])?;
        let name_at = format!("{at}.deploymentIntent");
        let name = self.string(
            m.get("deploymentIntent")
                .ok_or_else(|| self.err(&name_at, "missing: expected an intent name"))?,
            &name_at,
        )?;
        let mut attrs: Vec<(String, String, Value)> = Vec::new();
        if let Some(a) = m.get("intent-attributes") {
            let aat = format!("{at}.intent-attributes");
            let list = self.list(a, &aat, "attributes")?;
            for (k, item) in list.iter().enumerate() {
                let iat = format!("{aat}[{k}]");
                let im = self.obj(item, &iat)?;
                self.keys(
                    im,
                    &iat,
                    &[
                        "intent-attribute-key",
                        "intent-attribute-value",
                        "operator",
                        "unit",
                    ],
                )?;
                let key_at = format!("{iat}.intent-attribute-key");
                let key = self.string(
                    im.get("intent-attribute-key")
                        .ok_or_else(|| self.err(&key_at, "missing: expected an attribute name"))?,
                    &key_at,
                )?;
                if let Some(op) = im.get("operator") {
                    let op_at = format!("{iat}.operator");
                    let o = self.string(op, &op_at)?;
                    if o != "=" {
                        return Err(self.err(
                            &op_at,
                            format!(
                                "value {o:?}: expected \"=\" (intent attributes state a value)"
                            ),
                        ));
                    }
                }
                if let Some(u) = im.get("unit") {
                    let u_at = format!("{iat}.unit");
                    let us = self.string(u, &u_at)?;
                    if !matches!(us, "" | "%") {
                        return Err(
                            self.err(&u_at, format!("value {us:?}: expected \"\" or \"%\""))
                        );
                    }
                }
                let val_at = format!("{iat}.intent-attribute-value");
                let val = im
                    .get("intent-attribute-value")
                    .cloned()
                    .ok_or_else(|| self.err(&val_at, "missing: expected a value"))?;
                attrs.push((key.to_owned(), val_at, val));
            }
        }
        let known = format!("expected {HA_INTENT:?} or {ISOLATION_INTENT:?}");
        if name == HA_INTENT {
            let mut on = true;
            for (key, at, val) in &attrs {
                if key != HA_INTENT {
                    return Err(self.err(
                        at.trim_end_matches(".intent-attribute-value"),
                        format!(
                            "unknown attribute {key:?} of {HA_INTENT:?}: expected {HA_INTENT:?}"
                        ),
                    ));
                }
                on = self.boolean(val, at)?;
            }
            Ok(on.then_some(Intent::HighAvailability))
        } else if name == ISOLATION_INTENT {
            let mut qos: Option<(String, String)> = None;
            let mut percent: Option<(u32, String)> = None;
            for (key, at, val) in &attrs {
                if key == ISOLATION_INTENT {
                    qos = Some((self.string(val, at)?.to_owned(), at.clone()));
                } else if key == OVERSUBSCRIPTION_ATTRIBUTE {
                    let pc = self.percent(val, at)?;
                    if let Some(allowed) = &p.allowed_oversubscription {
                        if !allowed.contains(&pc) {
                            return Err(self.err(
                                at,
                                format!(
                                    "percentage {pc} is not allowed: expected one of {} (allowedOversubscriptionPercentages)",
                                    allowed.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                                ),
                            ));
                        }
                    }
                    percent = Some((pc, at.clone()));
                } else {
                    return Err(self.err(
                        at.trim_end_matches(".intent-attribute-value"),
                        format!(
                            "unknown attribute {key:?} of {ISOLATION_INTENT:?}: expected {ISOLATION_INTENT:?} or {OVERSUBSCRIPTION_ATTRIBUTE:?}"
                        ),
                    ));
                }
            }
            let Some((q, qat)) = qos else {
                return Err(self.err(
                    &format!("{at}.intent-attributes"),
                    format!("no {ISOLATION_INTENT:?} attribute: expected \"Guaranteed QoS\" or \"Burstable QoS\""),
                ));
            };
            let isolation = match (Feature::parse(&q), percent) {
                (Some(Feature::GuaranteedQos), None) => Isolation::Guaranteed,
                (Some(Feature::GuaranteedQos), Some((_, pat))) => {
                    return Err(self.err(
                        &pat,
                        format!("{OVERSUBSCRIPTION_ATTRIBUTE:?} with Guaranteed QoS: expected it only with Burstable QoS"),
                    ))
                }
                (Some(Feature::BurstableQos), Some((percent, _))) => {
                    Isolation::Burstable { percent }
                }
                (Some(Feature::BurstableQos), None) => {
                    return Err(self.err(
                        &format!("{at}.intent-attributes"),
                        format!("Burstable QoS without {OVERSUBSCRIPTION_ATTRIBUTE:?}: expected a percentage"),
                    ))
                }
                _ => {
                    return Err(self.err(
                        &qat,
                        format!("value {q:?}: expected \"Guaranteed QoS\" or \"Burstable QoS\""),
                    ))
                }
            };
            Ok(Some(Intent::Isolation { isolation }))
        } else {
            Err(self.err(&name_at, format!("unknown intent {name:?}: {known}")))
        }
    }

    fn objective(&self, v: &Value, field: &str, p: &Policy) -> Result<(Weights, Objective)> {
        let m = self.obj(v, field)?;
        self.keys(m, field, &["mode", "weights", "order"])?;
        let mode_at = format!("{field}.mode");
        let mode = match m.get("mode") {
            Some(x) => self.string(x, &mode_at)?,
            None => "weighted",
        };
        let mut w = Weights::default();
        let mut wc_given = false;
        if let Some(ws) = m.get("weights") {
            let wat = format!("{field}.weights");
            let wm = self.obj(ws, &wat)?;
            self.keys(wm, &wat, &["wd", "wc"])?;
            if let Some(x) = wm.get("wd") {
                w.distance = self.non_negative(x, &format!("{wat}.wd"))?;
            }
            if let Some(x) = wm.get("wc") {
                w.cost = self.non_negative(x, &format!("{wat}.wc"))?;
                wc_given = true;
            }
        }
        let objective = match mode {
            "weighted" => Objective::Weighted,
            "has-casablanca" => {
                if wc_given && w.cost != w.distance {
                    return Err(self.err(
                        &format!("{field}.weights.wc"),
                        format!(
                            "value {}: Casablanca HAS has one weight for distance and cost (w·(distance + cost)): expected no wc, or wc equal to wd ({})",
                            fmt_num(w.cost),
                            fmt_num(w.distance)
                        ),
                    ));
                }
                w.cost = w.distance;
                Objective::HasCasablanca
            }
            "lexicographic" => {
                let oat = format!("{field}.order");
                let ov = m.get("order").ok_or_else(|| {
                    self.err(&oat, "missing: expected a list of terms (cost, distance)")
                })?;
                let names = self.string_set(ov, &oat)?;
                let mut order = Vec::new();
                for (i, n) in names.iter().enumerate() {
                    let t = match n.as_str() {
                        "cost" => Term::Cost,
                        "distance" => Term::Distance,
                        _ => {
                            return Err(self.err(
                                &format!("{oat}[{i}]"),
                                format!("value {n:?}: expected cost or distance"),
                            ))
                        }
                    };
                    if order.contains(&t) {
                        return Err(self.err(
                            &format!("{oat}[{i}]"),
                            format!("value {n:?} listed twice: expected each term once"),
                        ));
                    }
                    if t == Term::Cost && !p.cost_evaluation.enabled {
                        return Err(self.err(
                            &format!("{oat}[{i}]"),
                            "value \"cost\" while cost evaluation is off: expected cloud-cost-evaluation true, or no cost term",
                        ));
                    }
                    order.push(t);
                }
                if order.is_empty() {
                    return Err(self.err(&oat, "empty list: expected at least one term"));
                }
                Objective::Lexicographic { order }
            }
            other => {
                return Err(self.err(
                    &mode_at,
                    format!("value {other:?}: expected weighted, has-casablanca or lexicographic"),
                ))
            }
        };
        Ok((w, objective))
    }

    fn distance(&self, v: &Value, field: &str) -> Result<DistanceBound> {
        let m = self.obj(v, field)?;
        self.keys(m, field, &["value", "operator", "unit"])?;
        let val_at = format!("{field}.value");
        let value = self.non_negative(
            m.get("value")
                .ok_or_else(|| self.err(&val_at, "missing: expected a distance"))?,
            &val_at,
        )?;
        let op_at = format!("{field}.operator");
        let op = self.string(
            m.get("operator")
                .ok_or_else(|| self.err(&op_at, "missing: expected <, <=, > or >="))?,
            &op_at,
        )?;
        let operator = match op {
            "<" => Comparison::Lt,
            "<=" => Comparison::Le,
            ">" => Comparison::Gt,
            ">=" => Comparison::Ge,
            _ => return Err(self.err(&op_at, format!("value {op:?}: expected <, <=, > or >="))),
        };
        let unit_at = format!("{field}.unit");
        let unit = match m.get("unit") {
            Some(u) => self.string(u, &unit_at)?,
            None => "km",
        };
        let km = match unit {
            "km" => value,
            "mi" | "miles" => value * 1.609_344,
            _ => return Err(self.err(&unit_at, format!("value {unit:?}: expected km or mi"))),
        };
        Ok(DistanceBound { operator, km })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn field_of(e: &Error) -> String {
        match e {
            Error::Invalid { location, .. } => location.field.clone().unwrap_or_default(),
            other => panic!("not invalid: {other}"),
        }
    }

    #[test]
    fn malformed_json_gives_its_position_once() {
        let e = Policy::from_text("p.json", "{\n  \"resources\": }")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "p.json:line 2: malformed JSON (column 16): expected value"
        );
        // A BOM before the JSON is skipped.
        let e = Policy::from_text("p.json", "\u{feff}{\"x\": 1,}")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("p.json:line 1: malformed JSON (column 9): trailing comma"),
            "{e}"
        );
    }

    #[test]
    fn short_form_yaml_with_single_string_sets() {
        let p = Policy::from_text(
            "p.yaml",
            "resources: vG\ncloudDeploymentIntentList:\n  - Cloud Type (Cloud Provider): VMware VIO\n    intentProperties:\n      - deploymentIntent: Infrastructure High Availability (HA) for VNF\n",
        )
        .unwrap();
        assert_eq!(p.resources, vec!["vG".to_owned()]);
        assert_eq!(p.intents[0].cloud_types, vec![CloudType::VmwareVio]);
        assert_eq!(p.intents[0].intents, vec![Intent::HighAvailability]);
        assert_eq!(p.intents_for(&CloudType::Azure), None);
        assert_eq!(
            p.intents_for(&CloudType::VmwareVio),
            Some(vec![Intent::HighAvailability])
        );
    }

    #[test]
    fn yaml_brace_set_is_rejected_with_a_hint() {
        let e = Policy::from_text(
            "p.yaml",
            "cloudDeploymentIntentList:\n  - Cloud Type (Cloud Provider): {\"VMware VIO\"}\n    intentProperties: []\n",
        )
        .unwrap_err();
        assert_eq!(
            field_of(&e),
            "cloudDeploymentIntentList[0].Cloud Type (Cloud Provider)"
        );
        assert!(e.to_string().contains("expected a list of strings"), "{e}");
        assert!(e.to_string().contains("[\"VMware VIO\"]"), "{e}");
    }

    #[test]
    fn has_mode_rejects_a_separate_cost_weight() {
        let e = Policy::from_text(
            "p.json",
            r#"{"cloud-cost-evaluation": true, "objective": {"mode": "has-casablanca", "weights": {"wd": 1, "wc": 2}}}"#,
        )
        .unwrap_err();
        assert_eq!(field_of(&e), "objective.weights.wc");
        let p = Policy::from_text(
            "p.json",
            r#"{"objective": {"mode": "has-casablanca", "weights": {"wd": 3}}}"#,
        )
        .unwrap();
        assert_eq!(
            p.weights,
            Weights {
                distance: 3.0,
                cost: 3.0
            }
        );
    }

    #[test]
    fn distance_bound_units_and_operators() {
        let p = Policy::from_text(
            "p.json",
            r#"{"distance": {"value": "10", "operator": "<=", "unit": "mi"}}"#,
        )
        .unwrap();
        let d = p.distance.unwrap();
        assert_eq!(d.operator, Comparison::Le);
        assert!((d.km - 16.09344).abs() < 1e-9);
        let e = Policy::from_text(
            "p.json",
            r#"{"distance": {"value": "10", "operator": "=", "unit": "km"}}"#,
        )
        .unwrap_err();
        assert_eq!(field_of(&e), "distance.operator");
    }

    #[test]
    fn numbers_format_without_trailing_zeroes() {
        assert_eq!(fmt_num(290.0), "290");
        assert_eq!(fmt_num(12.5), "12.5");
        assert_eq!(fmt_num(1.234_567), "1.23");
    }

    #[test]
    fn deeply_nested_intent_yaml_is_refused() {
        // 100,000 `[`: over 30 s in serde_yaml before its own recursion limit answered.
        let deep = format!("intents: {}", "[".repeat(100_000));
        let e = Policy::from_text("p.yaml", &deep).unwrap_err().to_string();
        assert!(
            e.starts_with("p.yaml:line 1")
                && e.contains("nested deeper than 64 levels at line 1, column 74"),
            "{e}"
        );
        let e = crate::intent::candidates::CandidateFile::from_text("c.yaml", &deep)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.yaml") && e.contains("nested deeper than 64"),
            "{e}"
        );
        let e = Policy::from_text("p.json", &"[".repeat(100_000))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nested deeper than 64 levels at line 1, column 65"),
            "{e}"
        );
        // At the bound: parsed (and refused for what it is, not for its depth).
        let ok = format!("x: {}{}", "[".repeat(64), "]".repeat(64));
        let e = Policy::from_text("p.yaml", &ok).unwrap_err().to_string();
        assert!(!e.contains("nested deeper"), "{e}");
    }
}
