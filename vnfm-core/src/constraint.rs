//! Placement constraints: affinity and anti-affinity between resources, at zone or host scope.
//!
//! A [`Constraint`] is the solver-side form of a SOL003 `PlacementConstraint`: a named rule
//! that its `members` (ids of resources to place and/or of resources already placed) must
//! share ([`ConstraintKind::Affinity`]) or must not share ([`ConstraintKind::AntiAffinity`])
//! a placement domain ([`Scope`]). When `fallback_best_effort` is true the solver may relax the
//! rule when it cannot be met, and reports that it did (see [`crate::placement`]).
//!
//! ## Scope mapping
//!
//! SOL003 names five scopes; the local granter knows two kinds of domain, the availability zone
//! and the compute host:
//!
//! | SOL003 `scope`                    | [`Scope`]      |
//! |-----------------------------------|----------------|
//! | `ZONE`, `ZONE_GROUP`, `NFVI_POP`  | [`Scope::Zone`] |
//! | `NFVI_NODE`, `CIS_NODE`           | [`Scope::Host`] |
//!
//! `ZONE_GROUP` and `NFVI_POP` are coarser-or-equal domains than a zone. The local granter, like
//! Tacker's, manages one site whose zone catalogue has no zone-group topology, so every zone is
//! its own zone group and the site is one NFVI-PoP whose placement domains are its zones; under
//! that model the three scopes coincide with the zone. A `CIS_NODE` (a Kubernetes worker) is a
//! compute node in the same sense as an `NFVI_NODE`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Location};

/// The placement domain a constraint is about.
///
/// Serialized with SOL003's names: `ZONE` and `NFVI_NODE`; the other SOL003 scopes are
/// accepted when deserializing (see the module docs for the mapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// The availability zone (SOL003 `ZONE`, `ZONE_GROUP`, `NFVI_POP`).
    #[serde(rename = "ZONE", alias = "ZONE_GROUP", alias = "NFVI_POP")]
    Zone,
    /// The compute host (SOL003 `NFVI_NODE`, `CIS_NODE`).
    #[serde(rename = "NFVI_NODE", alias = "CIS_NODE", alias = "HOST")]
    Host,
}

impl Scope {
    /// The scope for a SOL003 `scope` value (`ZONE`, `ZONE_GROUP`, `NFVI_POP`, `NFVI_NODE`,
    /// `CIS_NODE`).
    ///
    /// # Errors
    /// [`Error::Invalid`] at `location` naming the value and the accepted ones when `value` is
    /// none of them.
    pub fn from_sol003(value: &str, location: Location) -> Result<Self, Error> {
        match value {
            "ZONE" | "ZONE_GROUP" | "NFVI_POP" => Ok(Scope::Zone),
            "NFVI_NODE" | "CIS_NODE" => Ok(Scope::Host),
            other => Err(Error::invalid(
                location,
                format!(
                    "unknown placement scope {other:?}: expected one of ZONE, ZONE_GROUP, \
                     NFVI_POP, NFVI_NODE, CIS_NODE"
                ),
            )),
        }
    }

    /// The word used in messages: `zone` or `host`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Scope::Zone => "zone",
            Scope::Host => "host",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether the members must share the domain or must not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConstraintKind {
    /// All members in the same domain.
    Affinity,
    /// No two members in the same domain.
    AntiAffinity,
}

impl ConstraintKind {
    /// The word used in messages: `affinity` or `anti-affinity`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ConstraintKind::Affinity => "affinity",
            ConstraintKind::AntiAffinity => "anti-affinity",
        }
    }
}

impl fmt::Display for ConstraintKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A named affinity or anti-affinity rule over resources.
///
/// Members are ids of resources to place ([`crate::placement::Item::id`]) or of resources
/// already placed ([`crate::placement::ExistingMember::id`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Constraint {
    /// A name used in reports and errors (e.g. the policy name of the VNFD).
    pub name: String,
    /// Affinity or anti-affinity (SOL003 `affinityOrAntiAffinity`).
    #[serde(rename = "affinityOrAntiAffinity")]
    pub kind: ConstraintKind,
    /// The domain.
    pub scope: Scope,
    /// Ids of the resources the rule is about.
    pub members: Vec<String>,
    /// When true the rule may be relaxed when it cannot be met (SOL003 `fallbackBestEffort`).
    #[serde(default)]
    pub fallback_best_effort: bool,
}

impl Constraint {
    /// A constraint; `fallback_best_effort` is false.
    pub fn new<I, S>(
        name: impl Into<String>,
        kind: ConstraintKind,
        scope: Scope,
        members: I,
    ) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            name: name.into(),
            kind,
            scope,
            members: members.into_iter().map(Into::into).collect(),
            fallback_best_effort: false,
        }
    }

    /// An affinity constraint; `fallback_best_effort` is false.
    pub fn affinity<I, S>(name: impl Into<String>, scope: Scope, members: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::new(name, ConstraintKind::Affinity, scope, members)
    }

    /// An anti-affinity constraint; `fallback_best_effort` is false.
    pub fn anti_affinity<I, S>(name: impl Into<String>, scope: Scope, members: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::new(name, ConstraintKind::AntiAffinity, scope, members)
    }

    /// The same constraint with `fallback_best_effort` set.
    pub fn with_fallback_best_effort(mut self, fallback: bool) -> Self {
        self.fallback_best_effort = fallback;
        self
    }

    /// True for an affinity constraint.
    pub fn is_affinity(&self) -> bool {
        self.kind == ConstraintKind::Affinity
    }

    /// True when `domains`, the domain of each member in `members` order, honours the rule:
    /// all equal for affinity, pairwise distinct for anti-affinity.
    pub fn is_met_by<T: Ord>(&self, domains: &[T]) -> bool {
        match self.kind {
            ConstraintKind::Affinity => domains.windows(2).all(|w| w[0] == w[1]),
            ConstraintKind::AntiAffinity => {
                let mut sorted: Vec<&T> = domains.iter().collect();
                sorted.sort();
                sorted.windows(2).all(|w| w[0] != w[1])
            }
        }
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?} at {} scope", self.kind, self.name, self.scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sol003_scopes_map_to_zone_or_host() {
        for s in ["ZONE", "ZONE_GROUP", "NFVI_POP"] {
            assert_eq!(
                Scope::from_sol003(s, Location::default()).unwrap(),
                Scope::Zone
            );
        }
        for s in ["NFVI_NODE", "CIS_NODE"] {
            assert_eq!(
                Scope::from_sol003(s, Location::default()).unwrap(),
                Scope::Host
            );
        }
        let err = Scope::from_sol003("RACK", Location::default().with_field("scope"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("scope: unknown placement scope \"RACK\""),
            "{err}"
        );
        assert!(err.contains("NFVI_NODE"), "{err}");
    }

    #[test]
    fn serde_uses_sol003_names() {
        let c = Constraint::anti_affinity("spread", Scope::Zone, ["VDU1-0", "VDU1-1"])
            .with_fallback_best_effort(true);
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["affinityOrAntiAffinity"], "ANTI_AFFINITY");
        assert_eq!(json["scope"], "ZONE");
        assert_eq!(json["fallbackBestEffort"], true);
        let back: Constraint = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
        let host: Constraint = serde_json::from_str(
            r#"{"name":"h","affinityOrAntiAffinity":"AFFINITY","scope":"CIS_NODE","members":["a"]}"#,
        )
        .unwrap();
        assert_eq!(host.scope, Scope::Host);
        assert!(host.is_affinity());
        assert!(!host.fallback_best_effort);
        let pop: Constraint = serde_json::from_str(
            r#"{"name":"p","affinityOrAntiAffinity":"AFFINITY","scope":"NFVI_POP","members":[]}"#,
        )
        .unwrap();
        assert_eq!(pop.scope, Scope::Zone);
    }

    #[test]
    fn is_met_by_checks_domains() {
        let a = Constraint::affinity("a", Scope::Zone, ["x", "y"]);
        assert!(a.is_met_by(&["AZ-1", "AZ-1"]));
        assert!(!a.is_met_by(&["AZ-1", "AZ-2"]));
        let n = Constraint::anti_affinity("n", Scope::Host, ["x", "y", "z"]);
        assert!(n.is_met_by(&["c1", "c2", "c3"]));
        assert!(!n.is_met_by(&["c1", "c2", "c1"]));
        assert_eq!(n.to_string(), "anti-affinity \"n\" at host scope");
    }
}
