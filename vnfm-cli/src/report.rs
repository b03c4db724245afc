//! The report types: what every command prints with `--json` (`--format json`).
//!
//! Each command's JSON document is the serde form of one named type of this render layer, and
//! each such type carries a `version` field ([`Version`], the format version of the document,
//! [`REPORT_VERSION`] today). [`crate::output::Output::data`] prints only [`Report`]s, so no
//! command can print an untyped or unversioned document.
//!
//! Compatibility rule: adding a field (or a new value where a field is open-ended) keeps the
//! version; removing or renaming a field, or changing the type or meaning of one, bumps the
//! version of that report (its `version: Version<2>`). Fields are listed in the order they are
//! printed; `version` is the last member of every document.
//!
//! | command | report |
//! |---|---|
//! | `config show` | [`ConfigReport`] |
//! | `cloud show` | `commands::cloud::CloudReport` |
//! | `cloud migrate` | [`MigrateReport`] |
//! | `package show` | `render::package::PackageReport` |
//! | `grant` | [`GrantReport`] (also when there is no grant: a [`PlacementOutcome`]) |
//! | `select` | `commands::intent::SelectReport`, `commands::intent::LinksReport` |
//! | `instantiate`, `scale`, `heal`, `terminate`, `op retry`, `op rollback` | [`OperationResultReport`] |
//! | `instance show`, `instance list` | [`InstanceReport`], [`InstancesReport`] |
//! | `op show`, `op fail`, `op list` | [`OpOccReport`], [`OpOccsReport`] |
//! | `reservation`, `allocation`, `capacity`, `provider` | [`LedgerReport`], [`ConflictReport`] |
//! | `cluster label`, `cluster verify`, `cluster reconcile` | [`LabelReport`], [`ClusterVerifyReport`], [`ReconcileReport`] |
//! | `demo` | `commands::demo::DemoReport` |

use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use vnfm_core::cluster::{Labelled, Reconciled, VerifyReport};
use vnfm_core::grant::{Grant, GrantRequest};
use vnfm_core::id::{HostId, ZoneId};
use vnfm_core::lcm::{VnfInstance, VnfLcmOpOcc};
use vnfm_core::lifecycle::FailureKind;
use vnfm_core::reservation::lcm::Provider;
use vnfm_core::reservation::{
    Allocation, CapacityReport, CounterOffer, Event, Pool, Reservation, ReservationQueryResult,
    SignedCapacity, UtilizationPoint, Window, ZoneFit,
};

use crate::config::Config;
use crate::render::lcm::VnfcLine;

/// The format version of the reports (see the compatibility rule in the module docs).
pub const REPORT_VERSION: u32 = 1;

/// The `version` field of a report: serialized as the number `N` (by default
/// [`REPORT_VERSION`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Version<const N: u32 = REPORT_VERSION>;

impl<const N: u32> Serialize for Version<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(N)
    }
}

/// A document a command prints with `--json`: a named, serializable type with a `version:
/// Version` field, its last (implemented with `reports!`).
pub trait Report: Serialize {}

/// Implements [`Report`] for each type named (each has a `version: Version<N>` field).
macro_rules! reports {
    ($($t:ty),* $(,)?) => {
        $(impl Report for $t {})*
    };
}
pub(crate) use reports;

reports!(
    ConfigReport<'_>,
    MigrateReport<'_>,
    GrantReport<'_>,
    OperationResultReport<'_>,
    InstanceReport<'_>,
    InstancesReport<'_>,
    OpOccReport<'_>,
    OpOccsReport<'_>,
    LedgerReport,
    ConflictReport<'_>,
    LabelReport<'_>,
    ClusterVerifyReport<'_>,
    ReconcileReport<'_>,
);

/// What `vnfm config show --json` prints.
#[derive(Debug, Serialize)]
pub struct ConfigReport<'a> {
    /// The configuration file read, or `null` (the defaults).
    pub file: Option<String>,
    /// The state file the configuration names.
    pub state_path: String,
    /// The configuration in effect (file, environment and flags).
    pub config: &'a Config,
    /// The format version.
    pub version: Version,
}

/// What `vnfm cloud migrate --json` prints.
#[derive(Debug, Serialize)]
pub struct MigrateReport<'a> {
    /// The server moved.
    pub server: &'a str,
    /// The host it left.
    pub from: HostId,
    /// The host it is on now.
    pub to: &'a str,
    /// The format version.
    pub version: Version,
}

/// Why the local granter gave no grant (the `failure` of a [`GrantReport`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantFailure {
    /// `INFEASIBLE` (the constraints cannot be met, exit 3) or `CAPACITY_EXHAUSTED` (exit 4).
    pub failure_kind: FailureKind,
    /// Why, in words.
    pub detail: String,
}

/// What `vnfm grant --json` prints: the grant request and the grant, or `grant: null` and
/// the `failure` when the placement cannot be made.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantReport<'a> {
    /// The request.
    pub grant_request: &'a GrantRequest,
    /// The grant; `null` when there is none.
    pub grant: Option<&'a Grant>,
    /// What the grant drew from `--reservation` (one allocation per VNFC).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub allocations: &'a [Allocation],
    /// Why there is no grant; absent when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<&'a GrantFailure>,
    /// The format version.
    pub version: Version,
}

/// How a placement ended: placed, or a valid "no" with its exit code. A command that
/// answers "no" prints its report on stdout (e.g. a [`GrantReport`] with its `failure`) and
/// exits with [`PlacementOutcome::exit_code`]; it is a result, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementOutcome {
    /// The placement was made (exit 0).
    Placed,
    /// The placement cannot be made (exit 3 when infeasible, 4 when capacity is exhausted).
    Infeasible {
        /// Which "no" (see [`crate::exit`]).
        kind: FailureKind,
        /// The line printed on stderr.
        message: String,
    },
}

impl PlacementOutcome {
    /// The exit code: 0 when placed, else the code of the failure's kind.
    pub fn exit_code(&self) -> i32 {
        match self {
            PlacementOutcome::Placed => crate::exit::OK,
            PlacementOutcome::Infeasible { kind, .. } => crate::error::failure_exit_code(*kind),
        }
    }

    /// The line printed on stderr (`None` when placed).
    pub fn message(&self) -> Option<&str> {
        match self {
            PlacementOutcome::Placed => None,
            PlacementOutcome::Infeasible { message, .. } => Some(message),
        }
    }
}

/// What an LCM operation prints with `--json` (`instantiate`, `scale`, `heal`, `terminate`,
/// `op retry`, `op rollback`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationResultReport<'a> {
    /// The occurrence, with `attempts`.
    pub vnf_lcm_op_occ: &'a VnfLcmOpOcc,
    /// The instance after the operation.
    pub vnf_instance: &'a VnfInstance,
    /// Its VNFCs: id, VDU, zone, host.
    pub vnfcs: Vec<VnfcLine>,
    /// The grant, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<&'a Grant>,
    /// What `--reservation` drew for the new VNFCs (one allocation each).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub allocations: &'a [Allocation],
    /// The allocations given back (the VNFCs a scale-in removed, or a terminated instance's).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub released: &'a [Allocation],
    /// The format version.
    pub version: Version,
}

/// What `vnfm instance show --json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceReport<'a> {
    /// The instance.
    pub vnf_instance: &'a VnfInstance,
    /// Its VNFCs: id, VDU, zone, host.
    pub vnfcs: Vec<VnfcLine>,
    /// The format version.
    pub version: Version,
}

/// What `vnfm instance list --json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstancesReport<'a> {
    /// Every instance of the state file.
    pub vnf_instances: &'a [VnfInstance],
    /// The format version.
    pub version: Version,
}

/// What `vnfm op show --json` and `vnfm op fail --json` print.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpOccReport<'a> {
    /// The occurrence.
    pub vnf_lcm_op_occ: &'a VnfLcmOpOcc,
    /// The format version.
    pub version: Version,
}

/// What `vnfm op list --json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpOccsReport<'a> {
    /// The occurrences (of one instance with `--instance`).
    pub vnf_lcm_op_occs: &'a [VnfLcmOpOcc],
    /// The format version.
    pub version: Version,
}

/// The `result` of a ledger command that changed the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LedgerResult {
    /// The request was carried out.
    Ok,
    /// The request does not fit (see [`ConflictReport`]).
    Conflict,
}

/// What a ledger command (`vnfm reservation | allocation | capacity | provider`) prints with
/// `--json`: `result` when it changed the ledger, its members, the events it caused.
#[derive(Debug, Serialize)]
pub struct LedgerReport {
    /// `"ok"` for a change (create, update, cancel, destroy, increase, decrease, add); absent
    /// for a read (show, query, fit, list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<LedgerResult>,
    /// The members of the command's answer.
    #[serde(flatten)]
    pub body: LedgerBody,
    /// The events the command caused, in time order; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    /// The format version.
    pub version: Version,
}

/// The members of a [`LedgerReport`], one variant per answer.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum LedgerBody {
    /// `reservation create | update`.
    #[serde(rename_all = "camelCase")]
    Reserved {
        /// Its id.
        reservation_id: String,
        /// The reservation.
        reservation: Reservation,
    },
    /// `reservation cancel | show`.
    Reservation {
        /// The reservation.
        reservation: Reservation,
    },
    /// `reservation query`: `reservations`, and `utilization` with `--utilization`.
    Reservations(ReservationQueryResult),
    /// `allocation create`.
    #[serde(rename_all = "camelCase")]
    Allocated {
        /// Its id.
        allocation_id: String,
        /// The allocation.
        allocation: Allocation,
        /// The reservation it drew from; absent when it drew from the zone.
        #[serde(skip_serializing_if = "Option::is_none")]
        reservation: Option<Reservation>,
    },
    /// `allocation destroy`.
    Allocation {
        /// The allocation, ended.
        allocation: Allocation,
    },
    /// `capacity query --zone Z`.
    Capacity(ZoneCapacity),
    /// `capacity query` without `--zone`.
    Zones {
        /// One [`ZoneCapacity`] per zone.
        zones: Vec<ZoneCapacity>,
    },
    /// `capacity query --zone Z --utilization`.
    Utilization {
        /// The zone.
        zone: String,
        /// The window.
        window: Window,
        /// The figures from each instant on at which they change.
        utilization: Vec<UtilizationLine>,
    },
    /// `capacity increase | decrease`.
    Pool {
        /// The pool added.
        pool: Pool,
    },
    /// `capacity fit`.
    Fit {
        /// How many instances of the amounts fit in each zone.
        fit: Vec<ZoneFit>,
    },
    /// `provider list`.
    Providers {
        /// The providers.
        providers: Vec<Provider>,
    },
    /// `provider add`.
    ProviderAdded {
        /// The provider as registered (`null` when it added no pool).
        provider: Option<Provider>,
        /// The pools added.
        pools: Vec<Pool>,
    },
}

/// The capacity of one zone over a window, each figure at its worst instant.
#[derive(Debug, Serialize)]
pub struct ZoneCapacity {
    /// The zone.
    pub zone: ZoneId,
    /// The window.
    pub window: Window,
    /// What its pools give.
    pub total: SignedCapacity,
    /// What reservations hold.
    pub reserved: SignedCapacity,
    /// What allocations use.
    pub used: SignedCapacity,
    /// What is left.
    pub available: SignedCapacity,
}

impl From<CapacityReport> for ZoneCapacity {
    fn from(c: CapacityReport) -> Self {
        ZoneCapacity {
            zone: c.zone,
            window: c.window,
            total: c.total,
            reserved: c.reserved,
            used: c.usage,
            available: c.available,
        }
    }
}

/// The figures of a zone from one instant on (`capacity query --utilization`).
#[derive(Debug, Serialize)]
pub struct UtilizationLine {
    /// From when.
    pub timestamp: DateTime<Utc>,
    /// What its pools give.
    pub total: SignedCapacity,
    /// What reservations hold.
    pub reserved: SignedCapacity,
    /// What allocations use.
    pub used: SignedCapacity,
    /// What is left.
    pub available: SignedCapacity,
}

impl From<UtilizationPoint> for UtilizationLine {
    fn from(p: UtilizationPoint) -> Self {
        UtilizationLine {
            timestamp: p.timestamp,
            total: p.total,
            reserved: p.reserved,
            used: p.usage,
            available: p.available,
        }
    }
}

/// What a reservation (or allocation) request that does not fit prints with `--json`, before
/// exiting 4: the refusal and the counter-offer.
#[derive(Debug, Serialize)]
pub struct ConflictReport<'a> {
    /// Always `"conflict"`.
    pub result: LedgerResult,
    /// The refusal.
    pub message: &'a str,
    /// The counter-offer.
    pub offer: Offer<'a>,
    /// The format version.
    pub version: Version,
}

impl<'a> ConflictReport<'a> {
    /// The report of a refusal with its counter-offer.
    pub fn new(message: &'a str, offer: &'a CounterOffer) -> Self {
        ConflictReport {
            result: LedgerResult::Conflict,
            message,
            offer: Offer {
                max: &offer.largest,
                earliest_start: offer.earliest.map(|w| w.start),
                earliest_end: offer.earliest.and_then(|w| w.end),
            },
            version: Version,
        }
    }
}

/// The counter-offer of a [`ConflictReport`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Offer<'a> {
    /// The largest amounts that fit over the whole window.
    pub max: &'a vnfm_core::reservation::Capacity,
    /// The start of the earliest window of the requested length where it fits (`null`: none
    /// within the policy's ranges).
    pub earliest_start: Option<DateTime<Utc>>,
    /// Its end.
    pub earliest_end: Option<DateTime<Utc>>,
}

/// What `vnfm cluster label --json` prints: the labels as planned and the patches sent.
#[derive(Debug, Serialize)]
pub struct LabelReport<'a> {
    /// The core's account.
    #[serde(flatten)]
    pub labelled: &'a Labelled,
    /// The format version.
    pub version: Version,
}

/// What `vnfm cluster verify --json` prints (before exiting 6 on a violation).
#[derive(Debug, Serialize)]
pub struct ClusterVerifyReport<'a> {
    /// The core's report.
    #[serde(flatten)]
    pub report: &'a VerifyReport,
    /// The format version.
    pub version: Version,
}

/// What `vnfm cluster reconcile --json` prints.
#[derive(Debug, Serialize)]
pub struct ReconcileReport<'a> {
    /// What the core found and did.
    #[serde(flatten)]
    pub reconciled: &'a Reconciled,
    /// The format version.
    pub version: Version,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_a_number_and_the_last_member() {
        assert_eq!(serde_json::to_string(&Version::<1>).unwrap(), "1");
        assert_eq!(serde_json::to_string(&Version::<2>).unwrap(), "2");
        let r = MigrateReport {
            server: "s1",
            from: HostId::from("h1"),
            to: "h2",
            version: Version,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"server":"s1","from":"h1","to":"h2","version":1}"#
        );
    }

    #[test]
    fn a_ledger_report_flattens_its_body_between_result_and_events() {
        let r = LedgerReport {
            result: None,
            body: LedgerBody::Fit {
                fit: vec![ZoneFit {
                    zone: ZoneId::new("AZ-1"),
                    count: 3,
                }],
            },
            events: Vec::new(),
            version: Version,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"fit":[{"zone":"AZ-1","count":3}],"version":1}"#
        );
    }

    #[test]
    fn no_placement_exits_with_the_code_of_its_kind() {
        let no = PlacementOutcome::Infeasible {
            kind: FailureKind::Infeasible,
            message: "no grant: x".into(),
        };
        assert_eq!(no.exit_code(), crate::exit::INFEASIBLE);
        assert_eq!(no.message(), Some("no grant: x"));
        let full = PlacementOutcome::Infeasible {
            kind: FailureKind::CapacityExhausted,
            message: String::new(),
        };
        assert_eq!(full.exit_code(), crate::exit::CAPACITY);
        assert_eq!(PlacementOutcome::Placed.exit_code(), crate::exit::OK);
        assert_eq!(PlacementOutcome::Placed.message(), None);
    }
}
