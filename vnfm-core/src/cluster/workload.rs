//! Workloads (Deployments, StatefulSets) as vnfm reads them from a manifest or from the API
//! server: replicas, selector, pod labels, and the pod (anti-)affinity and topology spread
//! terms that decide where their pods may go.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::driver::WorkloadKind;

/// Why a manifest is not a workload vnfm can read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}: {message}")]
pub struct WorkloadError {
    /// `Kind name` of the manifest (or `manifest` when unnamed).
    pub object: String,
    /// The field path.
    pub field: String,
    /// What was wrong and what was expected.
    pub message: String,
}

/// One requirement of a label selector's `matchExpressions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Requirement {
    /// `In`: the label is one of the values.
    In(String, BTreeSet<String>),
    /// `NotIn`: the label is absent or none of the values.
    NotIn(String, BTreeSet<String>),
    /// `Exists`.
    Exists(String),
    /// `DoesNotExist`.
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A Kubernetes label selector (`matchLabels` and `matchExpressions`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelector {
    /// `matchLabels`.
    pub match_labels: BTreeMap<String, String>,
    /// `matchExpressions`.
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// A selector of `matchLabels` only.
    pub fn labels(labels: BTreeMap<String, String>) -> Self {
        Self {
            match_labels: labels,
            match_expressions: Vec::new(),
        }
    }

    /// Parses the `kubectl -l` form: comma-separated `key`, `!key`, `key=value` or
    /// `key!=value` terms.
    ///
    /// # Errors
    /// An empty term or key, naming it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut out = LabelSelector::default();
        for term in text.split(',').map(str::trim) {
            if let Some((k, v)) = term.split_once("!=") {
                out.match_expressions.push(Requirement::NotIn(
                    k.trim().to_owned(),
                    BTreeSet::from([v.trim().to_owned()]),
                ));
            } else if let Some((k, v)) = term.split_once('=') {
                let k = k.trim_end_matches('=').trim();
                out.match_labels.insert(k.to_owned(), v.trim().to_owned());
            } else if let Some(k) = term.strip_prefix('!') {
                out.match_expressions
                    .push(Requirement::DoesNotExist(k.trim().to_owned()));
            } else {
                out.match_expressions
                    .push(Requirement::Exists(term.to_owned()));
            }
        }
        let empty_key = out.match_labels.keys().any(String::is_empty)
            || out.match_expressions.iter().any(|r| match r {
                Requirement::In(k, _)
                | Requirement::NotIn(k, _)
                | Requirement::Exists(k)
                | Requirement::DoesNotExist(k) => k.is_empty(),
            });
        if text.trim().is_empty() || empty_key {
            return Err(format!(
                "{text:?} is not a label selector: expected comma-separated key, !key, \
                 key=value or key!=value terms"
            ));
        }
        Ok(out)
    }

    /// True when `labels` satisfy every term. An empty selector matches everything (as the
    /// API server reads an empty `labelSelector` of an affinity term: every pod; a missing one
    /// is `None` at the call site and matches nothing).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            parts.push(match r {
                Requirement::In(k, vs) => format!("{k} in ({})", join(vs)),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", join(vs)),
                Requirement::Exists(k) => k.clone(),
                Requirement::DoesNotExist(k) => format!("!{k}"),
            });
        }
        f.write_str(&parts.join(","))
    }
}

fn join(vs: &BTreeSet<String>) -> String {
    vs.iter().cloned().collect::<Vec<_>>().join(",")
}

/// A pod affinity or anti-affinity term of a pod template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityTerm {
    /// True for `podAntiAffinity`, false for `podAffinity`.
    pub anti: bool,
    /// True for `requiredDuringSchedulingIgnoredDuringExecution`.
    pub required: bool,
    /// The weight of a preferred term (1-100; 0 for a required one).
    pub weight: i32,
    /// `topologyKey`.
    pub topology_key: String,
    /// The pods the term is about (`None`: the term names no selector and matches no pod).
    pub selector: Option<LabelSelector>,
}

/// A `topologySpreadConstraints` entry of a pod template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadConstraint {
    /// `maxSkew`.
    pub max_skew: u32,
    /// `topologyKey`.
    pub topology_key: String,
    /// True for `whenUnsatisfiable: DoNotSchedule`, false for `ScheduleAnyway`.
    pub hard: bool,
    /// `labelSelector` (`None` matches no pod).
    pub selector: Option<LabelSelector>,
}

/// A Deployment or StatefulSet as vnfm reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Deployment or StatefulSet.
    pub kind: WorkloadKind,
    /// Namespace (`metadata.namespace`, or the one it is applied in).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.replicas` (1 when absent, as the API server defaults it).
    pub replicas: u32,
    /// `spec.selector`.
    pub selector: LabelSelector,
    /// `spec.template.metadata.labels`.
    pub pod_labels: BTreeMap<String, String>,
    /// Pod affinity and anti-affinity terms of the template.
    pub affinity: Vec<AffinityTerm>,
    /// Topology spread constraints of the template.
    pub spread: Vec<SpreadConstraint>,
}

struct Reader<'a> {
    object: String,
    root: &'a Value,
}

impl Reader<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> WorkloadError {
        WorkloadError {
            object: self.object.clone(),
            field: field.to_owned(),
            message: message.into(),
        }
    }

    fn at(&self, path: &[&str]) -> Option<&Value> {
        path.iter().try_fold(self.root, |v, k| v.get(k))
    }

    fn str_map(&self, path: &[&str]) -> Result<BTreeMap<String, String>, WorkloadError> {
        let Some(v) = self.at(path) else {
            return Ok(BTreeMap::new());
        };
        str_map(v).ok_or_else(|| {
            self.err(
                &path.join("."),
                format!("expected a map of strings, found {}", brief(v)),
            )
        })
    }
}

fn str_map(v: &Value) -> Option<BTreeMap<String, String>> {
    if v.is_null() {
        return Some(BTreeMap::new());
    }
    v.as_object()?
        .iter()
        .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
        .collect()
}

/// A short rendering of a JSON value for messages (at most 60 characters).
pub(crate) fn brief(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

/// The label selector at `field` of `object` (e.g. a PodDisruptionBudget's `spec.selector`);
/// `object` names the object in errors.
pub(crate) fn selector_at(
    object: &str,
    root: &Value,
    field: &str,
) -> Result<LabelSelector, WorkloadError> {
    let r = Reader {
        object: object.to_owned(),
        root,
    };
    let path: Vec<&str> = field.split('.').collect();
    match r.at(&path) {
        Some(v) => selector(v, field, &r),
        None => Err(r.err(field, "missing")),
    }
}

fn selector(v: &Value, field: &str, r: &Reader<'_>) -> Result<LabelSelector, WorkloadError> {
    let match_labels = match v.get("matchLabels") {
        Some(m) => str_map(m).ok_or_else(|| {
            r.err(
                &format!("{field}.matchLabels"),
                format!("expected a map of strings, found {}", brief(m)),
            )
        })?,
        None => BTreeMap::new(),
    };
    let mut match_expressions = Vec::new();
    let exprs = v
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, e) in exprs.iter().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        let key = e
            .get("key")
            .and_then(Value::as_str)
            .ok_or_else(|| r.err(&format!("{at}.key"), "expected a string"))?
            .to_owned();
        let values: BTreeSet<String> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        match_expressions.push(match op {
            "In" => Requirement::In(key, values),
            "NotIn" => Requirement::NotIn(key, values),
            "Exists" => Requirement::Exists(key),
            "DoesNotExist" => Requirement::DoesNotExist(key),
            other => {
                return Err(r.err(
                    &format!("{at}.operator"),
                    format!(
                        "unknown operator {other:?}: expected In, NotIn, Exists or DoesNotExist"
                    ),
                ))
            }
        });
    }
    Ok(LabelSelector {
        match_labels,
        match_expressions,
    })
}

fn terms(
    r: &Reader<'_>,
    spec: &Value,
    base: &str,
    anti: bool,
) -> Result<Vec<AffinityTerm>, WorkloadError> {
    let kind = if anti {
        "podAntiAffinity"
    } else {
        "podAffinity"
    };
    let Some(aff) = spec.get("affinity").and_then(|a| a.get(kind)) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let required = aff
        .get("requiredDuringSchedulingIgnoredDuringExecution")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, t) in required.iter().enumerate() {
        let at =
            format!("{base}.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.push(term(r, t, &at, anti, true, 0)?);
    }
    let preferred = aff
        .get("preferredDuringSchedulingIgnoredDuringExecution")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, t) in preferred.iter().enumerate() {
        let at =
            format!("{base}.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        let weight = t
            .get("weight")
            .and_then(Value::as_i64)
            .and_then(|w| i32::try_from(w).ok())
            .filter(|w| (1..=100).contains(w))
            .ok_or_else(|| r.err(&format!("{at}.weight"), "expected an integer from 1 to 100"))?;
        let inner = t
            .get("podAffinityTerm")
            .ok_or_else(|| r.err(&format!("{at}.podAffinityTerm"), "required"))?;
        out.push(term(
            r,
            inner,
            &format!("{at}.podAffinityTerm"),
            anti,
            false,
            weight,
        )?);
    }
    Ok(out)
}

fn term(
    r: &Reader<'_>,
    t: &Value,
    at: &str,
    anti: bool,
    required: bool,
    weight: i32,
) -> Result<AffinityTerm, WorkloadError> {
    let topology_key = t
        .get("topologyKey")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| r.err(&format!("{at}.topologyKey"), "required: a node label key"))?
        .to_owned();
    let selector = match t.get("labelSelector") {
        Some(s) if !s.is_null() => Some(selector(s, &format!("{at}.labelSelector"), r)?),
        _ => None,
    };
    Ok(AffinityTerm {
        anti,
        required,
        weight,
        topology_key,
        selector,
    })
}

fn spread(
    r: &Reader<'_>,
    spec: &Value,
    base: &str,
) -> Result<Vec<SpreadConstraint>, WorkloadError> {
    let list = spec
        .get("topologySpreadConstraints")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("{base}.topologySpreadConstraints[{i}]");
        let max_skew = c
            .get("maxSkew")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                r.err(
                    &format!("{at}.maxSkew"),
                    "expected an integer of at least 1",
                )
            })?;
        let topology_key = c
            .get("topologyKey")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| r.err(&format!("{at}.topologyKey"), "required: a node label key"))?
            .to_owned();
        let hard = match c.get("whenUnsatisfiable").and_then(Value::as_str) {
            Some("DoNotSchedule") => true,
            Some("ScheduleAnyway") => false,
            other => {
                return Err(r.err(
                    &format!("{at}.whenUnsatisfiable"),
                    format!("{other:?}: expected DoNotSchedule or ScheduleAnyway"),
                ))
            }
        };
        let selector = match c.get("labelSelector") {
            Some(s) if !s.is_null() => Some(selector(s, &format!("{at}.labelSelector"), r)?),
            _ => None,
        };
        out.push(SpreadConstraint {
            max_skew,
            topology_key,
            hard,
            selector,
        });
    }
    Ok(out)
}

impl Workload {
    /// Reads a Deployment or StatefulSet manifest (as written in a package, or as the API
    /// server returns it). `namespace` is used when the manifest names none.
    ///
    /// # Errors
    /// A manifest of another kind, or a field of the wrong shape, naming the field.
    pub fn from_object(object: &Value, namespace: &str) -> Result<Self, WorkloadError> {
        let kind_text = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = object
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let r = Reader {
            object: if name.is_empty() {
                format!("{kind_text} manifest")
            } else {
                format!("{kind_text} {name}")
            },
            root: object,
        };
        let kind = WorkloadKind::parse(kind_text).ok_or_else(|| {
            r.err(
                "kind",
                format!("{kind_text:?}: expected Deployment or StatefulSet"),
            )
        })?;
        if name.is_empty() {
            return Err(r.err("metadata.name", "required"));
        }
        let namespace = r
            .at(&["metadata", "namespace"])
            .and_then(Value::as_str)
            .unwrap_or(namespace)
            .to_owned();
        let replicas = match r.at(&["spec", "replicas"]) {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    r.err(
                        "spec.replicas",
                        format!("{}: expected a non-negative integer", brief(v)),
                    )
                })?,
        };
        let sel = r
            .at(&["spec", "selector"])
            .ok_or_else(|| r.err("spec.selector", "required"))?;
        let selector = selector(sel, "spec.selector", &r)?;
        let pod_labels = r.str_map(&["spec", "template", "metadata", "labels"])?;
        let pod_spec = r.at(&["spec", "template", "spec"]).unwrap_or(&Value::Null);
        let base = "spec.template.spec";
        let mut affinity = terms(&r, pod_spec, base, true)?;
        affinity.extend(terms(&r, pod_spec, base, false)?);
        let spread = spread(&r, pod_spec, base)?;
        Ok(Workload {
            kind,
            namespace,
            name: name.to_owned(),
            replicas,
            selector,
            pod_labels,
            affinity,
            spread,
        })
    }

    /// The anti-affinity terms of the workload that are about its own pods (the spread of a
    /// workload over a topology).
    pub fn self_anti_affinity(&self) -> impl Iterator<Item = &AffinityTerm> {
        self.affinity.iter().filter(|t| {
            t.anti
                && t.selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&self.pod_labels))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{ApplyWorkload, PodAntiAffinity};

    #[test]
    fn reads_the_builders_deployment() {
        let mut w = ApplyWorkload::new("ns", "vdu1", 3);
        w.anti_affinity = Some(PodAntiAffinity {
            topology_key: "CIS-node".into(),
            required: true,
        });
        let obj = w.to_object().object;
        let wl = Workload::from_object(&obj, "other").unwrap();
        assert_eq!(wl.kind, WorkloadKind::Deployment);
        assert_eq!((wl.namespace.as_str(), wl.name.as_str()), ("ns", "vdu1"));
        assert_eq!(wl.replicas, 3);
        let t: Vec<_> = wl.self_anti_affinity().collect();
        assert_eq!(t.len(), 1);
        assert!(t[0].required);
        assert_eq!(t[0].topology_key, "CIS-node");
    }

    #[test]
    fn reads_expressions_preferred_terms_and_spread() {
        let obj = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {
                "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 50, "podAffinityTerm": {"topologyKey": "h", "labelSelector": {"matchLabels": {"app": "db"}}}}
                    ]}},
                    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "h", "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "db"}}}]
                }}
            }
        });
        let wl = Workload::from_object(&obj, "default").unwrap();
        assert_eq!(wl.kind, WorkloadKind::StatefulSet);
        assert_eq!(wl.replicas, 1, "absent replicas default to 1");
        assert!(wl.selector.matches(&wl.pod_labels));
        assert_eq!(wl.affinity[0].weight, 50);
        assert!(!wl.affinity[0].required);
        assert!(wl.spread[0].hard);
    }

    #[test]
    fn errors_name_the_field() {
        let obj = serde_json::json!({"kind": "Deployment", "metadata": {"name": "x"},
            "spec": {"replicas": -1, "selector": {}}});
        let e = Workload::from_object(&obj, "d").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Deployment x: spec.replicas: -1: expected a non-negative integer"
        );
        let obj = serde_json::json!({"kind": "Service", "metadata": {"name": "s"}});
        assert!(Workload::from_object(&obj, "d")
            .unwrap_err()
            .to_string()
            .contains("expected Deployment or StatefulSet"));
        let obj = serde_json::json!({"kind": "Deployment", "metadata": {"name": "x"},
            "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}});
        assert!(Workload::from_object(&obj, "d")
            .unwrap_err()
            .to_string()
            .contains("spec.selector.matchExpressions[0].operator: unknown operator \"Near\""));
    }
}
