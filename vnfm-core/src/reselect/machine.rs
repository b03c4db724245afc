//! The reselection state machine itself; see the [module docs](super).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::failure::{
    failed_path_from_reason, failed_top_resources, is_group_policy_race, resource_reason_matches,
    top_level_resource, InsufficientResourcePattern,
};
use crate::constraint::{Constraint, Scope};
use crate::driver::{StackResource, StackState};
use crate::id::{HostId, ServerId, StackId, VduId, ZoneId};
use crate::placement::{ExistingMember, Item, PlacementError, PlacementRequest, Selection};
use crate::zone::{ComputeZone, Resources};

/// How reselection behaves (`[placement]` of `vnfm.toml`).
#[derive(Clone, Debug)]
pub struct ReselectConfig {
    /// `reselect_zones`: reselect zones after an insufficient-resource failure (default false:
    /// such a failure ends the operation).
    pub enabled: bool,
    /// `insufficient_resource_pattern`.
    pub pattern: InsufficientResourcePattern,
    /// `max_reselections`: at most this many stack updates after the first attempt; `None`
    /// means no limit (the candidate zones bound it anyway).
    pub max_reselections: Option<u32>,
    /// `selection`: how a zone is chosen among the compliant ones.
    pub selection: Selection,
    /// Seed of the random choices.
    pub seed: u64,
    /// `group_race_retries`: how many times in one operation a stack that failed on Nova's
    /// server-group race ([`is_group_policy_race`](super::is_group_policy_race)) is applied
    /// again with the same zones; one race more and the machine gives up
    /// ([`GiveUp::GroupPolicyRace`]). The race is not a lack of capacity: the zones are kept
    /// (none is excluded), and these applies are not reselections.
    pub race_retries: u32,
}

/// A top-level stack resource that carries one zone: a VNFC (`VDU1-0`) in the StandardUserData
/// layout, or a whole VDU under an AutoScalingGroup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unit {
    /// The resource name in the top stack, also the member id in constraints.
    pub name: String,
    /// The VDU of its servers.
    pub vdu: VduId,
    /// The zone it is (to be) in.
    pub zone: ZoneId,
    /// False for units that existed before the operation: they never move.
    pub movable: bool,
    /// What the unit needs (the sum over its servers).
    pub demand: Resources,
}

impl Unit {
    /// A unit.
    pub fn new(
        name: impl Into<String>,
        vdu: impl Into<VduId>,
        zone: impl Into<ZoneId>,
        movable: bool,
        demand: Resources,
    ) -> Self {
        Self {
            name: name.into(),
            vdu: vdu.into(),
            zone: zone.into(),
            movable,
            demand,
        }
    }
}

/// What the caller must do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create the stack (first attempt) or update it (later attempts) with these zones per
    /// unit, wait for a terminal state, then call [`Reselection::handle_stack_succeeded`] or
    /// [`Reselection::handle_stack_failed`].
    ApplyStack {
        /// The zone of every unit.
        zones: BTreeMap<String, ZoneId>,
    },
    /// List the stack's resources with nested ones (Heat `nested_depth` ≥ 2) and call
    /// [`Reselection::handle_resources`].
    ListResources,
    /// Show these failed servers and call [`Reselection::handle_failed_servers`] with the zone
    /// the compute service reports for each (Nova's `OS-EXT-AZ:availability_zone`), `None`
    /// when it no longer knows the server. The zones excluded after a failure are the zones
    /// where the failed servers really were, not the zones the machine asked for: Heat's
    /// rolling update of an AutoScalingGroup rebuilds a member it has not replaced yet with
    /// its old definition, in its old zone (captured against real Heat 27).
    LocateFailedServers {
        /// The failed servers (physical ids of `OS::Nova::Server` resources in `*_FAILED`).
        servers: Vec<ServerId>,
    },
    /// List the compute zones and call [`Reselection::handle_zones`].
    ListZones,
    /// Show these servers (unit → server) and call [`Reselection::handle_hosts`] with the
    /// host of each (`None` when the compute inventory does not tell it). Asked only by the
    /// `capacity-aware` policy when the zone listing reports free capacity: the listing is
    /// taken once, before the operation, so the capacity the operation's own new servers took
    /// in earlier attempts is charged to the hosts they really run on.
    LocateServers {
        /// The server of every unit whose host is wanted.
        servers: BTreeMap<String, ServerId>,
    },
}

pub use crate::lcm::{Attempt, AttemptOutcome};

/// What a reselection learned: every attempt, the zones excluded and the reselections spent.
/// An operation saves it with its progress at every commit, so that a resumed operation
/// (`vnfm op retry`) goes on with the same reselection ([`Reselection::resumed`]) and a
/// rollback or fail knows every attempt. An empty history is a reselection that has not
/// started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct History {
    /// Every stack apply so far, the running one (outcome `None`) last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// The zones excluded (where servers failed for lack of capacity): never applied again to
    /// a unit that moves.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub excluded: BTreeSet<ZoneId>,
    /// The reselections made (stack applies with new zones after a failure), counted against
    /// `max_reselections` across resumes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reselections: u32,
    /// The same-zone applies made after Nova's server-group race, counted against
    /// `group_race_retries` across resumes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub race_retries: u32,
}

impl History {
    /// Whether nothing was tried yet.
    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty()
            && self.excluded.is_empty()
            && self.reselections == 0
            && self.race_retries == 0
    }

    /// The history an occurrence saved by an older vnfm implies: its attempts, the zones they
    /// excluded, and one reselection per attempt after the first.
    pub fn from_attempts(attempts: Vec<Attempt>) -> Self {
        let excluded = attempts
            .iter()
            .flat_map(|a| a.failed_zones.iter().cloned())
            .collect();
        let reselections = u32::try_from(attempts.len().saturating_sub(1)).unwrap_or(u32::MAX);
        Self {
            attempts,
            excluded,
            reselections,
            race_retries: 0,
        }
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Why the machine stopped without success.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum GiveUp {
    /// The stack create or update request failed: nothing to reselect.
    #[error("the stack request failed: {reason}")]
    Refused {
        /// The refusal.
        reason: String,
    },
    /// The failure is not an insufficient-resource error: no reselection.
    #[error("the stack failed with an error that is not an insufficient-resource error: {reason}")]
    NotACapacityError {
        /// Heat's reason.
        reason: String,
    },
    /// Nova's late server-group check failed a build again after `retries` same-zone applies:
    /// members of an (anti-)affinity group scheduled at the same time were put on hosts that
    /// break the policy, and Nova's reschedules ran out. Not a lack of capacity; the
    /// operation may be retried.
    #[error(
        "Nova's server-group check failed a build (members scheduled at the same time broke \
         the group's policy and the reschedules ran out) after {retries} same-zone \
         retr{}; not a lack of capacity, retry the operation: {reason}",
        if *retries == 1 { "y" } else { "ies" }
    )]
    GroupPolicyRace {
        /// The same-zone applies made after the race.
        retries: u32,
        /// Heat's last reason.
        reason: String,
    },
    /// Reselection is disabled (`reselect_zones = false`).
    #[error("a zone ran out of resources and zone reselection is disabled: {reason}")]
    ReselectionDisabled {
        /// Heat's reason.
        reason: String,
    },
    /// The failed resource could not be mapped to a unit of the operation.
    #[error("cannot tell which VNFC failed (no failed server under a known unit): {reason}")]
    UnknownFailedUnit {
        /// Heat's reason.
        reason: String,
    },
    /// A unit that existed before the operation failed; it is never moved.
    #[error("existing VNFC {unit} failed and is never moved: {reason}")]
    FixedUnitFailed {
        /// The unit.
        unit: String,
        /// Heat's reason.
        reason: String,
    },
    /// No candidate zone is left.
    #[error("no availability zone left to try (tried {}): {reason}", join(tried))]
    NoCandidates {
        /// Every zone tried and excluded.
        tried: Vec<ZoneId>,
        /// Heat's last reason.
        reason: String,
    },
    /// `max_reselections` reached.
    #[error("reached the reselection limit of {limit}: {reason}")]
    RetryLimit {
        /// The limit.
        limit: u32,
        /// Heat's last reason.
        reason: String,
    },
    /// The remaining zones could honour the constraints, but not with the free capacity the
    /// zone catalogue reports (`capacity-aware`).
    #[error("no remaining zone has room for the VNFCs that honours the constraints: {why}")]
    NoRoom {
        /// The placement error under the reported capacity.
        why: String,
        /// Heat's last reason.
        reason: String,
    },
    /// The remaining zones cannot honour a constraint that is not best effort.
    #[error("no remaining zone honours the constraints: {why}")]
    Infeasible {
        /// The placement error.
        why: String,
        /// Heat's last reason.
        reason: String,
    },
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn join(z: &[ZoneId]) -> String {
    if z.is_empty() {
        return "none".into();
    }
    z.iter().map(ZoneId::as_str).collect::<Vec<_>>().join(", ")
}

/// How the machine finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The last attempt succeeded.
    Succeeded,
    /// It gave up.
    GaveUp(GiveUp),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Applying,
    AwaitResources,
    AwaitFailedZones,
    AwaitZones,
    AwaitHosts,
    Finished,
}

/// The reselection state machine of one operation. See the [module docs](super).
///
/// Methods: getters ([`Reselection::attempts`], [`Reselection::zones`],
/// [`Reselection::outcome`], [`Reselection::excluded`]), event handlers (`handle_*`) and
/// [`Reselection::poll_action`].
#[derive(Debug)]
pub struct Reselection {
    config: ReselectConfig,
    units: BTreeMap<String, Unit>,
    constraints: Vec<Constraint>,
    state: State,
    pending: VecDeque<Action>,
    attempts: Vec<Attempt>,
    excluded: BTreeSet<ZoneId>,
    /// Reselections made, those of earlier runs of the operation included.
    reselections: u32,
    /// Same-zone applies after Nova's server-group race, those of earlier runs included.
    race_retries: u32,
    zones: Option<Vec<ComputeZone>>,
    /// The units that move this round: the failed ones and the new ones in a failed zone.
    round_affected: BTreeSet<String>,
    /// Whether the last failure's top-level reason matched the pattern.
    top_matched: bool,
    /// The failed units of the round being read.
    round_failed_units: BTreeSet<String>,
    /// The failed servers of the round being read, with their unit.
    failed_servers: BTreeMap<ServerId, String>,
    /// Failed units of the round with no failed server to locate (Nova refused the server, or
    /// only the reason names them): charged to the zone they were asked in.
    unlocated_units: BTreeSet<String>,
    /// The completed servers of the round being read.
    round_resources_servers: BTreeMap<String, ServerId>,
    /// The server of each unit whose server completed in the last attempt.
    servers: BTreeMap<String, ServerId>,
    /// The host of each unit, as last located.
    hosts: BTreeMap<String, HostId>,
    last_reason: String,
    outcome: Option<Outcome>,
    rng: ChaCha8Rng,
}

impl Reselection {
    /// A machine for `units` (every unit of the stack after the operation, with the zones of
    /// the grant) under `constraints` (only zone-scope constraints matter to it; others are
    /// kept by the stack's server groups). The first action is the stack apply with the
    /// granted zones.
    pub fn new(config: ReselectConfig, units: Vec<Unit>, constraints: Vec<Constraint>) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        let units: BTreeMap<String, Unit> =
            units.into_iter().map(|u| (u.name.clone(), u)).collect();
        let constraints = constraints
            .into_iter()
            .filter(|c| c.scope == Scope::Zone)
            .collect();
        let mut m = Self {
            config,
            units,
            constraints,
            state: State::Applying,
            pending: VecDeque::new(),
            attempts: Vec::new(),
            excluded: BTreeSet::new(),
            reselections: 0,
            race_retries: 0,
            zones: None,
            round_affected: BTreeSet::new(),
            top_matched: false,
            round_failed_units: BTreeSet::new(),
            failed_servers: BTreeMap::new(),
            unlocated_units: BTreeSet::new(),
            round_resources_servers: BTreeMap::new(),
            servers: BTreeMap::new(),
            hosts: BTreeMap::new(),
            last_reason: String::new(),
            outcome: None,
            rng,
        };
        m.start_attempt(Vec::new());
        m
    }

    /// The same machine with the zone catalogue already listed (e.g. for the grant of the
    /// same operation), so it does not ask with [`Action::ListZones`].
    pub fn with_zone_listing(mut self, zones: Vec<ComputeZone>) -> Self {
        self.zones = Some(zones);
        self
    }

    /// The same machine going on with what an earlier run of the operation learned
    /// (`history`, as [`Reselection::history`] gave it): its attempts come first, its excluded
    /// zones stay excluded and its reselections count against `max_reselections`. An attempt
    /// the earlier run left without an outcome (the process died while the stack ran) is the
    /// one this run applies again, not a new one. A unit that moves and stands in an excluded
    /// zone (the last apply failed there) is reselected before anything is applied, which is
    /// a reselection: at the limit, the machine gives up at once ([`GiveUp::RetryLimit`]),
    /// without applying. Call it after [`Reselection::with_zone_listing`], before the first
    /// [`Reselection::poll_action`].
    pub fn resumed(mut self, history: History) -> Self {
        if history.is_empty() || self.state != State::Applying {
            return self;
        }
        let mut prior = history.attempts;
        if prior.last().is_some_and(|a| a.outcome.is_none()) {
            prior.pop();
        }
        self.last_reason = prior
            .iter()
            .rev()
            .find_map(|a| a.status_reason.clone())
            .unwrap_or_default();
        self.excluded.extend(history.excluded);
        self.reselections = self.reselections.max(history.reselections);
        self.race_retries = self.race_retries.max(history.race_retries);
        let first = std::mem::take(&mut self.attempts);
        self.attempts = prior;
        let stale: BTreeSet<String> = self
            .units
            .values()
            .filter(|u| u.movable && self.excluded.contains(&u.zone))
            .map(|u| u.name.clone())
            .collect();
        if stale.is_empty() {
            self.attempts.extend(first);
            return self;
        }
        // The zones of the last apply are excluded: reselect them before applying.
        self.pending.clear();
        self.round_affected = stale;
        if self.zones.is_none() {
            self.state = State::AwaitZones;
            self.pending.push_back(Action::ListZones);
        } else {
            self.locate_or_reselect();
        }
        self
    }

    /// What the machine learned so far (see [`History`]).
    pub fn history(&self) -> History {
        History {
            attempts: self.attempts.clone(),
            excluded: self.excluded.clone(),
            reselections: self.reselections,
            race_retries: self.race_retries,
        }
    }

    // --- getters -------------------------------------------------------------------------

    /// Every attempt so far, the running one last.
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// The units, with their current zones.
    pub fn units(&self) -> Vec<&Unit> {
        self.units.values().collect()
    }

    /// The current zone of every unit.
    pub fn zones(&self) -> BTreeMap<String, ZoneId> {
        self.units
            .iter()
            .map(|(n, u)| (n.clone(), u.zone.clone()))
            .collect()
    }

    /// The zones excluded so far.
    pub fn excluded(&self) -> &BTreeSet<ZoneId> {
        &self.excluded
    }

    /// How the machine finished, once it has.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// True once finished.
    pub fn is_finished(&self) -> bool {
        self.state == State::Finished
    }

    // --- poll ----------------------------------------------------------------------------

    /// The next action to carry out, or `None` when waiting for an event or finished.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.pending.pop_front()
    }

    // --- events --------------------------------------------------------------------------

    /// The stack applied by the last [`Action::ApplyStack`] reached `*_COMPLETE`.
    pub fn handle_stack_succeeded(&mut self) {
        if self.state != State::Applying {
            return;
        }
        if let Some(a) = self.attempts.last_mut() {
            a.outcome = Some(AttemptOutcome::Succeeded);
        }
        self.finish(Outcome::Succeeded);
    }

    /// The stack applied by the last [`Action::ApplyStack`] reached `*_FAILED` with `reason`
    /// (Heat's `stack_status_reason`).
    pub fn handle_stack_failed(&mut self, reason: &str) {
        if self.state != State::Applying {
            return;
        }
        self.last_reason = reason.to_owned();
        if let Some(a) = self.attempts.last_mut() {
            a.outcome = Some(AttemptOutcome::Failed);
            a.status_reason = Some(reason.to_owned());
        }
        // Nova's server-group race: the zone has room, the members were scheduled at once.
        // Applied again with the same zones, Heat replaces the failed server, which Nova now
        // schedules knowing where the others are.
        if is_group_policy_race(reason) {
            if self.race_retries >= self.config.race_retries {
                return self.give_up(GiveUp::GroupPolicyRace {
                    retries: self.race_retries,
                    reason: reason.to_owned(),
                });
            }
            self.race_retries += 1;
            return self.start_attempt(Vec::new());
        }
        // A reason the pattern does not know is not the end yet: a failed resource of the
        // listing whose own reason matches makes it a capacity failure too.
        self.top_matched = self.config.pattern.is_match(reason);
        if self.top_matched && !self.config.enabled {
            return self.give_up(GiveUp::ReselectionDisabled {
                reason: reason.to_owned(),
            });
        }
        self.state = State::AwaitResources;
        self.pending.push_back(Action::ListResources);
    }

    /// The stack applied by the last [`Action::ApplyStack`] was rolled back by Heat
    /// (`ROLLBACK_COMPLETE` or `ROLLBACK_FAILED`, a stack created with rollback enabled): the
    /// attempt failed, and as the rollback deleted what failed there is nothing to read or
    /// reselect: the machine gives up ([`GiveUp::NotACapacityError`] with `reason`).
    pub fn handle_stack_rolled_back(&mut self, reason: &str) {
        self.end_attempt(
            AttemptOutcome::Failed,
            reason,
            GiveUp::NotACapacityError {
                reason: reason.to_owned(),
            },
        );
    }

    /// The create or update request of the last [`Action::ApplyStack`] was refused (`reason`:
    /// the refusal, e.g. Heat's HTTP 400); the attempt ends [`AttemptOutcome::Refused`] and the
    /// machine gives up.
    pub fn handle_apply_refused(&mut self, reason: &str) {
        self.end_attempt(
            AttemptOutcome::Refused,
            reason,
            GiveUp::Refused {
                reason: reason.to_owned(),
            },
        );
    }

    /// Ends the running attempt with `outcome` and Heat's `reason`, and gives up with `why`.
    fn end_attempt(&mut self, outcome: AttemptOutcome, reason: &str, why: GiveUp) {
        if self.state != State::Applying {
            return;
        }
        self.last_reason = reason.to_owned();
        if let Some(a) = self.attempts.last_mut() {
            a.outcome = Some(outcome);
            a.status_reason = Some(reason.to_owned());
        }
        self.give_up(why);
    }

    /// The resources of the stack (`root`), nested ones included, after a failure.
    pub fn handle_resources(&mut self, root: &StackId, resources: &[StackResource]) {
        if self.state != State::AwaitResources {
            return;
        }
        let reason = self.last_reason.clone();
        let capacity = self.top_matched
            || resources
                .iter()
                .any(|r| resource_reason_matches(&self.config.pattern, r));
        if !capacity {
            return self.give_up(GiveUp::NotACapacityError { reason });
        }
        if !self.config.enabled {
            return self.give_up(GiveUp::ReselectionDisabled { reason });
        }
        let mut failed: BTreeSet<String> = failed_top_resources(root, resources)
            .into_iter()
            .filter(|n| self.units.contains_key(n))
            .collect();
        if let Some(first) =
            failed_path_from_reason(&self.last_reason).and_then(|p| p.into_iter().next())
        {
            if self.units.contains_key(&first) {
                failed.insert(first);
            }
        }
        if failed.is_empty() {
            return self.give_up(GiveUp::UnknownFailedUnit { reason });
        }
        if let Some(fixed) = failed
            .iter()
            .find(|n| self.units.get(*n).is_some_and(|u| !u.movable))
        {
            let unit = fixed.clone();
            return self.give_up(GiveUp::FixedUnitFailed { unit, reason });
        }
        self.failed_servers = failed_servers(root, resources, &self.units);
        self.unlocated_units = failed
            .iter()
            .filter(|u| !self.failed_servers.values().any(|s| s == *u))
            .cloned()
            .collect();
        self.round_failed_units = failed;
        self.round_resources_servers = completed_servers(root, resources, &self.units);
        if self.failed_servers.is_empty() {
            return self.attribute(&BTreeMap::new());
        }
        self.state = State::AwaitFailedZones;
        self.pending.push_back(Action::LocateFailedServers {
            servers: self.failed_servers.keys().cloned().collect(),
        });
    }

    /// The zones of the failed servers of the last [`Action::LocateFailedServers`] (`None`, or
    /// a missing server, when the compute service no longer knows it: the zone the machine
    /// asked for that server's unit is excluded instead).
    pub fn handle_failed_servers(&mut self, zones: BTreeMap<ServerId, Option<ZoneId>>) {
        if self.state != State::AwaitFailedZones {
            return;
        }
        self.attribute(&zones);
    }

    /// Excludes the zones where the round's failed servers were, then lists zones, locates
    /// servers or reselects.
    fn attribute(&mut self, located: &BTreeMap<ServerId, Option<ZoneId>>) {
        let mut failed_zones: BTreeSet<ZoneId> = BTreeSet::new();
        for (server, unit) in &self.failed_servers {
            let known = located
                .get(server)
                .cloned()
                .flatten()
                .filter(|z| !z.as_str().is_empty());
            match known {
                Some(z) => {
                    failed_zones.insert(z);
                }
                None => failed_zones.extend(self.units.get(unit).map(|u| u.zone.clone())),
            }
        }
        for unit in &self.unlocated_units {
            failed_zones.extend(self.units.get(unit).map(|u| u.zone.clone()));
        }
        let failed = std::mem::take(&mut self.round_failed_units);
        if let Some(a) = self.attempts.last_mut() {
            a.failed_units = failed.iter().cloned().collect();
            a.failed_zones = failed_zones.iter().cloned().collect();
        }
        self.excluded.extend(failed_zones.iter().cloned());
        self.round_affected = self
            .units
            .values()
            .filter(|u| u.movable && (failed.contains(&u.name) || failed_zones.contains(&u.zone)))
            .map(|u| u.name.clone())
            .collect();
        self.servers = std::mem::take(&mut self.round_resources_servers);
        if self.zones.is_none() {
            self.state = State::AwaitZones;
            self.pending.push_back(Action::ListZones);
        } else {
            self.locate_or_reselect();
        }
    }

    /// The compute zones (asked once per operation).
    pub fn handle_zones(&mut self, zones: Vec<ComputeZone>) {
        if self.state != State::AwaitZones {
            return;
        }
        self.zones = Some(zones);
        self.locate_or_reselect();
    }

    /// The hosts of the servers of the last [`Action::LocateServers`] (unit → host; `None`
    /// or a missing unit when the inventory does not tell).
    pub fn handle_hosts(&mut self, hosts: BTreeMap<String, Option<HostId>>) {
        if self.state != State::AwaitHosts {
            return;
        }
        self.hosts = hosts
            .into_iter()
            .filter_map(|(u, h)| Some((u, h?)))
            .collect();
        self.reselect();
    }

    // --- internals -----------------------------------------------------------------------

    fn start_attempt(&mut self, relaxed: Vec<String>) {
        let zones = self.zones();
        self.attempts.push(Attempt {
            zones: zones.clone(),
            outcome: None,
            status_reason: None,
            failed_units: Vec::new(),
            failed_zones: Vec::new(),
            relaxed,
        });
        self.state = State::Applying;
        self.pending.push_back(Action::ApplyStack { zones });
    }

    /// The units whose capacity is charged in [`Self::net_of_new_units`]: new units that stay
    /// where they are this round.
    fn staying_new_units(&self) -> impl Iterator<Item = &Unit> {
        self.units
            .values()
            .filter(|u| u.movable && !self.round_affected.contains(&u.name))
    }

    /// Asks where the staying new units' servers run when `capacity-aware` will read the
    /// listing's capacity; reselects otherwise.
    fn locate_or_reselect(&mut self) {
        let has_capacity = self
            .zones
            .iter()
            .flatten()
            .any(|z| z.is_candidate() && z.free().is_some());
        let servers: BTreeMap<String, ServerId> =
            if self.config.selection == Selection::CapacityAware && has_capacity {
                self.staying_new_units()
                    .filter_map(|u| Some((u.name.clone(), self.servers.get(&u.name)?.clone())))
                    .collect()
            } else {
                BTreeMap::new()
            };
        self.hosts.clear();
        if servers.is_empty() {
            return self.reselect();
        }
        self.state = State::AwaitHosts;
        self.pending.push_back(Action::LocateServers { servers });
    }

    fn reselect(&mut self) {
        let reason = self.last_reason.clone();
        if let Some(limit) = self.config.max_reselections {
            if self.reselections >= limit {
                return self.give_up(GiveUp::RetryLimit { limit, reason });
            }
        }
        let candidates: Vec<ComputeZone> = self
            .zones
            .iter()
            .flatten()
            .filter(|z| z.is_candidate() && !self.excluded.contains(&z.name))
            .cloned()
            .collect();
        if candidates.is_empty() {
            let tried = self.excluded.iter().cloned().collect();
            return self.give_up(GiveUp::NoCandidates { tried, reason });
        }
        let affected = self.round_affected.clone();
        match self.choose(&affected, &candidates) {
            Ok((zones, relaxed)) => {
                for (name, zone) in zones {
                    if let Some(u) = self.units.get_mut(&name) {
                        u.zone = zone;
                    }
                }
                self.reselections = self.reselections.saturating_add(1);
                self.start_attempt(relaxed);
            }
            Err(g) => self.give_up(g),
        }
    }

    /// New zones for the `affected` units among `candidates`, every other unit staying where it
    /// is, under the zone-scope constraints (best-effort ones may be relaxed).
    fn choose(
        &mut self,
        affected: &BTreeSet<String>,
        candidates: &[ComputeZone],
    ) -> Result<(BTreeMap<String, ZoneId>, Vec<String>), GiveUp> {
        let items: Vec<Item> = self
            .units
            .values()
            .filter(|u| affected.contains(&u.name))
            .map(|u| Item::new(u.name.clone(), u.vdu.clone(), u.demand))
            .collect();
        // Units that stay count for the constraints by their zone; their host does not matter
        // at zone scope, so each gets a host name of its own that no catalogue lists.
        let existing: Vec<ExistingMember> = self
            .units
            .values()
            .filter(|u| !affected.contains(&u.name))
            .map(|u| {
                ExistingMember::new(
                    u.name.clone(),
                    u.zone.clone(),
                    format!("{}@{}", u.name, u.zone),
                )
            })
            .collect();
        let seed = rand::RngCore::next_u64(&mut self.rng);
        // `random` is the spec's (and Tacker's) policy: any zone that honours the constraints,
        // whatever its free capacity; only `capacity-aware` reads the catalogue's capacity.
        let zones: Vec<ComputeZone> = match self.config.selection {
            Selection::CapacityAware => self.net_of_new_units(candidates, affected),
            Selection::Random => candidates
                .iter()
                .cloned()
                .map(ComputeZone::without_capacity)
                .collect(),
        };
        let request_for = |zones: Vec<ComputeZone>| {
            PlacementRequest::new(zones)
                .with_items(items.clone())
                .with_existing(existing.clone())
                .with_constraints(self.constraints.clone())
                .with_excluded(self.excluded.iter().cloned())
                .with_selection(self.config.selection)
                .with_seed(seed)
        };
        let reason = self.last_reason.clone();
        match request_for(zones).place() {
            Ok(p) => Ok((
                p.assignments.into_iter().map(|a| (a.id, a.zone)).collect(),
                p.relaxed.iter().map(ToString::to_string).collect(),
            )),
            Err(
                PlacementError::NoCandidateZone { .. } | PlacementError::CapacityExhausted { .. },
            ) => Err(GiveUp::NoCandidates {
                tried: self.excluded.iter().cloned().collect(),
                reason,
            }),
            // Constraints that hold when capacity is ignored are blocked by capacity: no zone
            // left with room, not an infeasible request (as the granter decides).
            Err(e @ PlacementError::Infeasible { .. })
                if self.config.selection == Selection::CapacityAware
                    && request_for(
                        candidates
                            .iter()
                            .cloned()
                            .map(ComputeZone::without_capacity)
                            .collect(),
                    )
                    .place()
                    .is_ok() =>
            {
                Err(GiveUp::NoRoom {
                    why: error_chain(&e),
                    reason,
                })
            }
            Err(e) => Err(GiveUp::Infeasible {
                why: error_chain(&e),
                reason,
            }),
        }
    }

    /// The candidates' free capacity less what this operation's own new units that stay
    /// already took. The zone listing is taken once, before the operation: it is net of the
    /// VNFCs that existed before, not of those the operation created in its earlier attempts.
    /// Each such unit is charged to the host its server runs on ([`Action::LocateServers`]);
    /// when that is unknown, to the host Nova's RAM weigher would have picked (the one with the
    /// most free memory that fits it, ties by name) — an estimate: the order in which Heat
    /// created the servers is not known here (a property test found a case where the estimate
    /// put a zone's last free slot on the wrong host).
    fn net_of_new_units(
        &self,
        candidates: &[ComputeZone],
        affected: &BTreeSet<String>,
    ) -> Vec<ComputeZone> {
        let mut zones = candidates.to_vec();
        for u in self
            .units
            .values()
            .filter(|u| u.movable && !affected.contains(&u.name))
        {
            let Some(hosts) = zones
                .iter_mut()
                .find(|z| z.name == u.zone)
                .and_then(|z| z.hosts.as_mut())
            else {
                continue;
            };
            if let Some(h) = self
                .hosts
                .get(&u.name)
                .and_then(|name| hosts.iter_mut().find(|h| &h.name == name))
            {
                h.free = h.free.map(|f| f.saturating_sub(&u.demand));
                continue;
            }
            let best = hosts
                .iter_mut()
                .filter(|h| h.available && h.free.is_some_and(|f| f.fits(&u.demand)))
                .max_by(|a, b| {
                    let fa = a.free.map_or(0, |f| f.memory_mb);
                    let fb = b.free.map_or(0, |f| f.memory_mb);
                    fa.cmp(&fb).then_with(|| b.name.cmp(&a.name))
                });
            if let Some(h) = best {
                h.free = h.free.map(|f| f.saturating_sub(&u.demand));
            }
        }
        zones
    }

    fn give_up(&mut self, why: GiveUp) {
        self.finish(Outcome::GaveUp(why));
    }

    fn finish(&mut self, outcome: Outcome) {
        self.state = State::Finished;
        self.pending.clear();
        self.outcome = Some(outcome);
    }
}

/// Every `OS::Nova::Server` of `resources` in `*_FAILED` that Nova created (a physical id) and
/// that hangs under a unit of `units`, with that unit.
fn failed_servers(
    root: &StackId,
    resources: &[StackResource],
    units: &BTreeMap<String, Unit>,
) -> BTreeMap<ServerId, String> {
    resources
        .iter()
        .filter(|r| {
            r.resource_type == "OS::Nova::Server"
                && r.resource_status.state == StackState::Failed
                && !r.physical_resource_id.is_empty()
        })
        .filter_map(|r| {
            let top = top_level_resource(root, r, resources).filter(|t| units.contains_key(t))?;
            Some((ServerId::from(r.physical_resource_id.clone()), top))
        })
        .collect()
}

/// The server of every unit of `units` that has exactly one `OS::Nova::Server` under it in
/// `resources` and whose server completed (units under an AutoScalingGroup are not units of
/// their own servers, so they are not located).
fn completed_servers(
    root: &StackId,
    resources: &[StackResource],
    units: &BTreeMap<String, Unit>,
) -> BTreeMap<String, ServerId> {
    let mut per_unit: BTreeMap<String, Vec<&StackResource>> = BTreeMap::new();
    for r in resources
        .iter()
        .filter(|r| r.resource_type == "OS::Nova::Server")
    {
        if let Some(top) = top_level_resource(root, r, resources).filter(|t| units.contains_key(t))
        {
            per_unit.entry(top).or_default().push(r);
        }
    }
    per_unit
        .into_iter()
        .filter_map(|(unit, servers)| match servers.as_slice() {
            [s] if s.resource_status.state == StackState::Complete
                && !s.physical_resource_id.is_empty() =>
            {
                Some((unit, ServerId::from(s.physical_resource_id.clone())))
            }
            _ => None,
        })
        .collect()
}
