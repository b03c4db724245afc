//! The stack run of the placed plans: heal marking, the zones and the local grant, the
//! nested [`Reselection`] machine (apply, settle, locate; each apply is a [`StackApply`]
//! part), and the restore of the VNFCs that stay (scale-in, rollbacks).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::{DateTime, Utc};

use super::actions::OpAction;
use super::helpers::{chrono_of, give_up_failure, no_stack_failed, restore_config};
use super::machine::{Operation, Placed, Purpose, Step};
use super::progress::Plan;
use super::stack_apply::{StackApply, StackEnd};
use super::timers::Timer;
use super::units::UnitsInput;
use crate::driver::{
    CreateStack, DriverError, ListResources, MarkUnhealthy, ServerInfo, StackResource, UpdateStack,
};
use crate::grant::{ExtVirtualLinkData, Grant};
use crate::id::{ServerId, VduId, ZoneId};
use crate::intent::realise::GroupRule;
use crate::lifecycle::failure::{chain, Failed, FailureKind};
use crate::lifecycle::grant::{slots_of, PlannedGrant};
use crate::lifecycle::groups;
use crate::lifecycle::keep::scale_in_keep;
use crate::lifecycle::stack;
use crate::lifecycle::userdata::VnfcSlot;
use crate::package::{Flavour, VnfPackage};
use crate::reselect::{
    top_level_resource, Action as ReselectAction, Outcome, ReselectConfig, Reselection,
};
use crate::zone::ComputeZone;

impl Operation {
    pub(super) fn mark_list(&mut self) {
        let Some(id) = self.progress.stack_id.clone() else {
            return self.fail(no_stack_failed());
        };
        self.step = Step::MarkList;
        self.next = Some(OpAction::ListResources(ListResources::new(id, 5)));
    }

    pub(super) fn on_mark_list(&mut self, r: Result<Vec<StackResource>, DriverError>) {
        let resources = match r {
            Ok(r) => r,
            Err(e) => return self.fail_driver(&e),
        };
        let Some(stack_id) = self.progress.stack_id.clone() else {
            return self.fail(no_stack_failed());
        };
        let (slots, servers) = self.healed();
        let cause = match &self.progress.plan {
            Plan::Heal { cause } => cause.clone(),
            _ => None,
        };
        let reason = cause.as_deref().unwrap_or("healed by vnfm");
        let todo: VecDeque<MarkUnhealthy> = resources
            .iter()
            .filter(|r| r.resource_type == "OS::Nova::Server")
            .filter(|r| {
                top_level_resource(&stack_id, r, &resources).is_some_and(|top| {
                    slots.contains(&top) || servers.contains(&r.physical_resource_id)
                })
            })
            .map(|r| MarkUnhealthy::new(r.stack_id.clone(), r.resource_name.clone(), reason))
            .collect();
        self.on_marked(todo, Ok(()));
    }

    /// The slots a heal re-creates and the server ids they have now.
    pub(super) fn healed(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let slots: BTreeSet<String> = self
            .progress
            .planned
            .iter()
            .flat_map(|p| p.new_vnfcs.iter().map(|n| n.slot.name()))
            .collect();
        let servers = self
            .before
            .instantiated_vnf_info
            .iter()
            .flat_map(|i| i.vnfc_resource_info.iter())
            .filter(|v| {
                crate::lifecycle::grant::existing_slot(v)
                    .ok()
                    .flatten()
                    .is_some_and(|s| slots.contains(&s.name()))
            })
            .map(|v| v.compute_resource.resource_id.clone())
            .filter(|id| !id.is_empty())
            .collect();
        (slots, servers)
    }

    pub(super) fn on_marked(
        &mut self,
        mut todo: VecDeque<MarkUnhealthy>,
        r: Result<(), DriverError>,
    ) {
        if let Err(e) = r {
            return self.fail_driver(&e);
        }
        match todo.pop_front() {
            Some(m) => {
                self.step = Step::Marking(todo);
                self.next = Some(OpAction::MarkUnhealthy(m));
            }
            None => {
                self.progress.marked = true;
                self.step = Step::GrantZones;
                self.next = Some(OpAction::ListZones);
            }
        }
    }

    // placed plans: grant, then the reselection machine

    pub(super) fn on_grant_zones(&mut self, r: Result<Vec<ComputeZone>, DriverError>) {
        let listing = match r {
            Ok(z) => z,
            Err(e) => return self.fail_driver(&e),
        };
        self.settle_group_policies();
        if let Some(f) = self.unknown_pinned_zone(&listing) {
            return self.fail(f);
        }
        match self.with_flavour(|pkg, flavour| self.place(pkg, flavour, listing)) {
            Ok((placed, granted, grant)) => {
                self.progress.granted = Some(granted);
                if grant.is_some() {
                    self.grant = grant;
                }
                self.placed = Some(placed);
                self.drive_reselection();
            }
            Err(f) => self.fail(f),
        }
    }

    /// A zone pinned (by `--zone`, or by the NFVO's grant) that the catalogue does not know:
    /// the stack would fail on it as on a full zone.
    pub(super) fn unknown_pinned_zone(&self, listing: &[ComputeZone]) -> Option<Failed> {
        if self.progress.granted.is_some() {
            return None;
        }
        let (key, zone) = self
            .progress
            .pinned
            .iter()
            .find(|(_, z)| !listing.iter().any(|c| &c.name == *z))?;
        let known: Vec<&str> = listing.iter().map(|c| c.name.as_str()).collect();
        let by = match self.grant.as_ref() {
            Some(g) => format!("the NFVO's grant {}", g.id),
            None => "--zone".to_owned(),
        };
        Some(Failed::new(
            FailureKind::Invalid,
            "invalid request",
            format!(
                "{by} gives {key} zone {zone}, which is not in the zone catalogue; its zones \
                 are {}",
                known.join(", ")
            ),
        ))
    }

    /// Decides the policies of the rules' server groups once (see [`Progress::server_groups`]):
    /// an instantiation from the configuration, the other plans from the instance's record.
    pub(super) fn settle_group_policies(&mut self) {
        if self.progress.server_groups.is_some() {
            return;
        }
        self.progress.server_groups = match self.progress.plan {
            // The new flavour's rules: decided from the configuration as an instantiation does.
            Plan::Instantiate { .. } | Plan::ChangeFlavour { .. } => self
                .with_flavour(|_, f| Ok(groups::policies(f, self.cfg.fallback_best_effort)))
                .ok(),
            _ => groups::recorded(&self.before),
        };
    }

    /// The server group of every rule whose policy the operation knows.
    pub(super) fn group_rules(&self, flavour: &Flavour) -> Vec<GroupRule> {
        self.progress
            .server_groups
            .as_ref()
            .map(|p| groups::rules(flavour, p))
            .unwrap_or_default()
    }

    /// The VNFCs that stay, with their zones.
    pub(super) fn existing(&self) -> Vec<(VnfcSlot, ZoneId)> {
        let Some(info) = self.before.instantiated_vnf_info.as_ref() else {
            return Vec::new();
        };
        if let Plan::ChangeFlavour { level, .. } = &self.progress.plan {
            // The VNFCs of the instance the new flavour keeps.
            let all = slots_of(info);
            return self
                .with_flavour(|_, f| {
                    Ok(crate::lifecycle::change_flavour::kept(
                        f,
                        level.as_deref(),
                        all,
                    ))
                })
                .unwrap_or_default();
        }
        if let Plan::ScaleToLevel { levels, .. } = &self.progress.plan {
            // Of every VDU, its VNFCs up to its count at the new levels.
            let all = slots_of(info);
            return self
                .with_flavour(|_, f| {
                    crate::lifecycle::to_level::vdu_counts(f, info, levels)
                        .map(|counts| crate::lifecycle::to_level::kept(&counts, all))
                        .map_err(|e| {
                            Failed::new(FailureKind::Invalid, "invalid request", e.to_string())
                        })
                })
                .unwrap_or_default();
        }
        let (healed, _) = self.healed();
        slots_of(info)
            .into_iter()
            .filter(|(s, _)| {
                !matches!(self.progress.plan, Plan::Heal { .. }) || !healed.contains(&s.name())
            })
            .collect()
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn place(
        &self,
        pkg: &VnfPackage,
        flavour: &Flavour,
        listing: Vec<ComputeZone>,
    ) -> Result<(Placed, BTreeMap<String, ZoneId>, Option<Grant>), Failed> {
        let planned = self.progress.planned.clone().ok_or_else(|| {
            Failed::new(FailureKind::Invalid, "invalid request", "no grant request")
        })?;
        let layouts = stack::layouts(pkg, flavour)?;
        let groups = stack::group_resources(&layouts);
        let existing = self.existing();
        let group_zone = stack::group_zones(&groups, &existing);
        // The preflight of the rules' server groups, before the grant and once every VNFC has
        // its zone: no stack is created or updated for a required group that cannot be met.
        let host_groups = groups::effective(pkg, flavour, &self.group_rules(flavour))?;
        let members =
            |zones: Option<&BTreeMap<String, ZoneId>>| -> Vec<(VnfcSlot, Option<ZoneId>)> {
                let kept = existing.iter().map(|(s, z)| (s.clone(), Some(z.clone())));
                let new = planned.new_vnfcs.iter().map(|n| {
                    let zone = zones.and_then(|z| z.get(&n.slot.name())).cloned();
                    (n.slot.clone(), zone)
                });
                kept.chain(new).collect()
            };
        groups::check_hosts(flavour, &host_groups, &members(None), &listing)?;
        let (new_zones, grant) = match (&self.progress.granted, &self.progress.plan) {
            (Some(z), _) => (z.clone(), None),
            (None, Plan::Heal { .. }) => (self.heal_zones(&planned), None),
            (None, _) => {
                let (z, g) = self.grant(&planned, flavour, &groups, &group_zone, &listing)?;
                (z, Some(g))
            }
        };
        groups::check_hosts(flavour, &host_groups, &members(Some(&new_zones)), &listing)?;
        let units = UnitsInput {
            flavour,
            planned: &planned,
            groups: &groups,
            group_zone,
            existing: &existing,
            new_zones: &new_zones,
            resumed: &self.progress.zones,
        }
        .build()?;
        let constraints =
            stack::unit_constraints(&planned.request, &planned, &self.before, &groups);
        let mut slots: Vec<VnfcSlot> = existing.iter().map(|(s, _)| s.clone()).collect();
        slots.extend(planned.new_vnfcs.iter().map(|n| n.slot.clone()));
        slots.sort();
        let cfg = ReselectConfig {
            enabled: self.cfg.reselect_zones,
            pattern: self.cfg.pattern.clone(),
            max_reselections: self.cfg.max_reselections,
            selection: self.cfg.selection,
            seed: self.cfg.seed,
            race_retries: self.cfg.group_race_retries,
        };
        let m = Reselection::new(cfg, units, constraints)
            .with_zone_listing(listing)
            .resumed(self.progress.reselection.clone());
        let placed = Placed {
            layouts,
            slots,
            m,
            records: true,
        };
        Ok((placed, new_zones, grant))
    }

    /// The healed VNFCs start in the zone they are in, or the one the NFVO's grant gave.
    pub(super) fn heal_zones(&self, planned: &PlannedGrant) -> BTreeMap<String, ZoneId> {
        let current: BTreeMap<String, ZoneId> = self
            .before
            .instantiated_vnf_info
            .as_ref()
            .map(slots_of)
            .unwrap_or_default()
            .into_iter()
            .map(|(s, z)| (s.name(), z))
            .collect();
        planned
            .new_vnfcs
            .iter()
            .filter_map(|n| {
                let name = n.slot.name();
                self.progress
                    .pinned
                    .get(&name)
                    .or_else(|| current.get(&name))
                    .map(|z| (name, z.clone()))
            })
            .collect()
    }

    /// Asks the local granter (or takes the pinned zones): the zone of every new VNFC.
    pub(super) fn grant(
        &self,
        planned: &PlannedGrant,
        flavour: &Flavour,
        groups: &BTreeMap<VduId, String>,
        group_zone: &BTreeMap<VduId, ZoneId>,
        listing: &[ComputeZone],
    ) -> Result<(BTreeMap<String, ZoneId>, Grant), Failed> {
        let (_, answer) = stack::LocalGrant {
            planned,
            instance: &self.before,
            flavour,
            groups,
            group_zone,
            pinned: &self.progress.pinned,
            zones: listing,
            grant_id: self.progress.grant_id.clone().unwrap_or_default(),
            selection: self.cfg.grant_selection,
            seed: self.cfg.seed,
        }
        .grant();
        let g = answer?;
        let zones = planned
            .new_vnfcs
            .iter()
            .filter_map(|n| {
                g.zone_of(&n.resource_id)
                    .map(|z| (n.slot.name(), z.clone()))
            })
            .collect();
        Ok((zones, g))
    }

    pub(super) fn drive_reselection(&mut self) {
        let Some(p) = self.placed.as_mut() else {
            return self.internal("reselection without a placement");
        };
        let Some(action) = p.m.poll_action() else {
            return self.reselection_over();
        };
        match action {
            ReselectAction::ApplyStack { zones } => self.apply(zones),
            ReselectAction::ListResources => match self.progress.stack_id.clone() {
                Some(id) => {
                    self.step = Step::Settle {
                        deadline: self.now + chrono_of(self.cfg.stack_timeout),
                    };
                    self.next = Some(OpAction::ListResources(ListResources::new(id, 5)));
                }
                None => self.reselection_over(),
            },
            ReselectAction::ListZones => {
                self.step = Step::ReselectZones;
                self.next = Some(OpAction::ListZones);
            }
            ReselectAction::LocateFailedServers { servers } => {
                self.step = Step::FailedServers;
                self.next = Some(OpAction::ShowServers(servers));
            }
            ReselectAction::LocateServers { servers } => {
                let mut by_server: BTreeMap<ServerId, Vec<String>> = BTreeMap::new();
                for (unit, server) in servers {
                    by_server.entry(server).or_default().push(unit);
                }
                let ids = by_server.keys().cloned().collect();
                self.step = Step::Hosts(by_server);
                self.next = Some(OpAction::ShowServers(ids));
            }
        }
    }

    pub(super) fn apply(&mut self, zones: BTreeMap<String, ZoneId>) {
        let slots = match &self.placed {
            Some(p) => p.slots.clone(),
            None => return self.internal("an apply without a placement"),
        };
        let unit_zones = zones.clone();
        let input = self.with_flavour(|pkg, flavour| {
            stack::heat_input(
                pkg,
                flavour,
                &slots,
                &zones,
                &self.group_rules(flavour),
                &self.links(),
            )
        });
        let (bundle, params) = match input {
            Ok(x) => x,
            Err(f) => return self.fail(f),
        };
        self.progress.zones = unit_zones;
        let (timeout, poll) = (self.cfg.stack_timeout, self.cfg.poll_interval);
        let run = match self.progress.stack_id.clone() {
            Some(id) => StackApply::update(
                UpdateStack {
                    id,
                    parameters: params,
                    template: Some(bundle),
                },
                timeout,
                poll,
            ),
            None => StackApply::create(
                CreateStack::new(self.stack_name(), bundle, params),
                timeout,
                poll,
            ),
        };
        self.drive_stack(run, Purpose::Reselect);
    }

    /// The name of the stack the operation creates.
    pub(super) fn stack_name(&self) -> String {
        match &self.progress.plan {
            Plan::Instantiate { stack_name, .. } => stack_name.clone(),
            _ => format!("vnf-{}", self.before.id),
        }
    }

    /// Saves the stack's id the apply hands out (at once: a rollback or fail must know the
    /// stack even if the process dies now, and so must the attempt that runs), hands its
    /// action and timer out, or goes on once it ended.
    pub(super) fn drive_stack(&mut self, mut run: StackApply, purpose: Purpose) {
        if let Some(id) = run.poll_saved() {
            self.checkpoint |= self.progress.stack_id.is_none() || purpose == Purpose::Reselect;
            self.progress.stack_id = Some(id);
        }
        match run.poll_end() {
            Some(end) => self.stack_ended(end, purpose),
            None => {
                self.next = run.poll_action();
                self.timers.put(Timer::Step, run.poll_timeout());
                self.step = Step::Stack { run, purpose };
            }
        }
    }

    /// A stack apply ended: the reselection machine learns how (and goes on), a restore
    /// goes on or fails.
    pub(super) fn stack_ended(&mut self, end: StackEnd, purpose: Purpose) {
        match (end, purpose) {
            (StackEnd::Refused(e), _) => self.apply_refused(purpose, &e),
            (StackEnd::TimedOut(f) | StackEnd::Error(f), _) => self.fail(f),
            (end, Purpose::Reselect) => {
                if let Some(p) = self.placed.as_mut() {
                    match end {
                        StackEnd::Complete => p.m.handle_stack_succeeded(),
                        StackEnd::RolledBack(reason) => p.m.handle_stack_rolled_back(&reason),
                        StackEnd::Failed(reason) => p.m.handle_stack_failed(&reason),
                        // Ended above.
                        StackEnd::Refused(_) | StackEnd::TimedOut(_) | StackEnd::Error(_) => {}
                    }
                }
                self.drive_reselection();
            }
            (StackEnd::Complete, Purpose::Restore) => self.restored(),
            (StackEnd::Failed(reason) | StackEnd::RolledBack(reason), Purpose::Restore) => {
                self.fail(Failed::new(
                    FailureKind::StackFailed,
                    "stack update failed",
                    reason,
                ));
            }
        }
    }

    /// Heat refused the create or update: a reselection's attempt has that outcome; a stack
    /// of the name that exists already is named as such.
    pub(super) fn apply_refused(&mut self, purpose: Purpose, e: &DriverError) {
        if let Some(p) = self
            .placed
            .as_mut()
            .filter(|_| purpose == Purpose::Reselect)
        {
            // The attempt has an outcome: Heat refused it.
            p.m.handle_apply_refused(&chain(e));
        }
        if matches!(e, DriverError::AlreadyExists { .. }) {
            return self.fail(Failed::new(
                FailureKind::StackFailed,
                "stack already exists",
                format!(
                    "stack {} already exists in the VIM (a stack of that name that this \
                     operation did not create, e.g. one an earlier operation left): {}",
                    self.stack_name(),
                    chain(e)
                ),
            ));
        }
        self.fail_driver(e);
    }

    pub(super) fn wait_until(&mut self, deadline: DateTime<Utc>) {
        let at = (self.now + chrono_of(self.cfg.poll_interval)).min(deadline);
        self.timers.set(Timer::Step, at);
    }

    pub(super) fn on_settle(
        &mut self,
        deadline: DateTime<Utc>,
        r: Result<Vec<StackResource>, DriverError>,
    ) {
        let res = match r {
            Ok(r) => r,
            Err(e) => return self.fail_driver(&e),
        };
        if res.iter().any(|r| r.resource_status.is_in_progress()) && self.now < deadline {
            self.wait_until(deadline);
            self.step = Step::Settle { deadline };
            return;
        }
        if let (Some(p), Some(id)) = (self.placed.as_mut(), self.progress.stack_id.as_ref()) {
            p.m.handle_resources(id, &res);
        }
        self.drive_reselection();
    }

    pub(super) fn on_reselect_zones(&mut self, r: Result<Vec<ComputeZone>, DriverError>) {
        match r {
            Ok(z) => {
                if let Some(p) = self.placed.as_mut() {
                    p.m.handle_zones(z);
                }
                self.drive_reselection();
            }
            Err(e) => self.fail_driver(&e),
        }
    }

    /// Where Nova put each failed server; a server it cannot show is charged to the zone asked
    /// for, by the reselection machine.
    pub(super) fn on_failed_servers(
        &mut self,
        r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>,
    ) {
        let zones = r
            .into_iter()
            .map(|(id, s)| (id, s.ok().and_then(|s| s.zone)))
            .collect();
        if let Some(p) = self.placed.as_mut() {
            p.m.handle_failed_servers(zones);
        }
        self.drive_reselection();
    }

    /// Only the capacity estimate reads these hosts: a server the inventory cannot show is
    /// estimated instead, never a reason to fail the operation.
    pub(super) fn on_hosts(
        &mut self,
        units: &BTreeMap<ServerId, Vec<String>>,
        r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>,
    ) {
        let mut hosts = BTreeMap::new();
        for (server, names) in units {
            let host = r
                .get(server)
                .and_then(|s| s.as_ref().ok())
                .and_then(|s| s.host.clone());
            for n in names {
                hosts.insert(n.clone(), host.clone());
            }
        }
        if let Some(p) = self.placed.as_mut() {
            p.m.handle_hosts(hosts);
        }
        self.drive_reselection();
    }

    pub(super) fn reselection_over(&mut self) {
        let Some(p) = self.placed.as_ref() else {
            return self.internal("no reselection");
        };
        match p.m.outcome().cloned() {
            Some(Outcome::Succeeded) if self.progress.stack_id.is_some() => self.collect(),
            Some(Outcome::Succeeded) => self.fail(Failed::new(
                FailureKind::Backend,
                "no stack",
                "the stack was never created",
            )),
            Some(Outcome::GaveUp(g)) => {
                let f = give_up_failure(&g, p.m.excluded());
                self.fail(f);
            }
            None => self.fail(Failed::new(
                FailureKind::Backend,
                "unfinished",
                "reselection did not finish",
            )),
        }
    }

    // scale-in and scale-out rollback: update the stack to the VNFCs that stay

    pub(super) fn restore(&mut self) {
        let keep = match self.kept() {
            Ok(k) => k,
            Err(f) => return self.fail(f),
        };
        let Some(id) = self.progress.stack_id.clone() else {
            return self.fail(no_stack_failed());
        };
        let zones: BTreeMap<String, ZoneId> =
            keep.iter().map(|(s, z)| (s.name(), z.clone())).collect();
        let slots: Vec<VnfcSlot> = keep.iter().map(|(s, _)| s.clone()).collect();
        self.settle_group_policies();
        let input = self.with_flavour(|pkg, flavour| {
            let layouts = stack::layouts(pkg, flavour)?;
            let rules = self.group_rules(flavour);
            stack::heat_input(pkg, flavour, &slots, &zones, &rules, &self.links())
                .map(|x| (x, layouts))
        });
        let ((bundle, params), layouts) = match input {
            Ok(x) => x,
            Err(f) => return self.fail(f),
        };
        let m = Reselection::new(restore_config(&self.cfg), Vec::new(), Vec::new());
        self.placed = Some(Placed {
            layouts,
            slots,
            m,
            records: false,
        });
        let update = UpdateStack {
            id,
            parameters: params,
            template: Some(bundle),
        };
        let run = StackApply::update(update, self.cfg.stack_timeout, self.cfg.poll_interval);
        self.drive_stack(run, Purpose::Restore);
    }

    /// The VNFCs a scale-in keeps (the newest of every VDU the aspect scales go), or those
    /// before a scale-out that is rolled back.
    pub(super) fn kept(&self) -> Result<Vec<(VnfcSlot, ZoneId)>, Failed> {
        let existing = self
            .before
            .instantiated_vnf_info
            .as_ref()
            .map(slots_of)
            .unwrap_or_default();
        match &self.progress.plan {
            Plan::ScaleIn {
                aspect_id, steps, ..
            } => self
                .with_flavour(|_, flavour| Ok(scale_in_keep(flavour, aspect_id, *steps, existing))),
            _ => Ok(existing),
        }
    }

    /// The external virtual links the stack is connected to by this operation: an
    /// instantiation's request's (`operationParams.extVirtualLinks`), a change of external
    /// connectivity's merged links, else the instance's (so that no update re-plugs a port).
    pub(super) fn links(&self) -> Vec<ExtVirtualLinkData> {
        match &self.progress.plan {
            Plan::ChangeExtConn { links, .. } => links.clone(),
            Plan::Instantiate { .. } => self
                .op
                .operation_params
                .as_ref()
                .and_then(|p| p.get("extVirtualLinks"))
                .and_then(|l| serde_json::from_value(l.clone()).ok())
                .unwrap_or_default(),
            _ => crate::lifecycle::change_ext_conn::links_of(&self.before),
        }
    }

    /// The grant of a plan that adds and removes no resource (`CHANGE_EXT_CONN`): the local
    /// granter's answer to the planned request, once (a retry keeps it).
    pub(super) fn grant_unplaced(&mut self) -> Result<(), Failed> {
        if self.progress.granted.is_some() {
            return Ok(());
        }
        let Some(planned) = self.progress.planned.clone() else {
            return Ok(());
        };
        let grant = self.with_flavour(|_, flavour| {
            let none = BTreeMap::new();
            stack::LocalGrant {
                planned: &planned,
                instance: &self.before,
                flavour,
                groups: &BTreeMap::new(),
                group_zone: &BTreeMap::new(),
                pinned: &none,
                zones: &[],
                grant_id: self.progress.grant_id.clone().unwrap_or_default(),
                selection: self.cfg.grant_selection,
                seed: self.cfg.seed,
            }
            .grant()
            .1
        })?;
        self.progress.granted = Some(BTreeMap::new());
        self.grant = Some(grant);
        Ok(())
    }

    pub(super) fn restored(&mut self) {
        match self.progress.plan {
            Plan::RollbackScaleOut | Plan::RollbackChangeFlavour | Plan::RollbackChangeExtConn => {
                self.progress.vnfcs = Some(Vec::new());
                let before = self.before.clone();
                self.finish(Ok(before));
            }
            _ => self.collect(),
        }
    }
}
