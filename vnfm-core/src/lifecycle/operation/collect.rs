//! After the stack reached its state: the servers read back, the instance the operation
//! leaves, and the hooks of the plan's point.

use std::collections::BTreeMap;

use super::actions::OpAction;
use super::cnf_run;
use super::helpers::no_stack_failed;
use super::hooks::Hooks;
use super::machine::{Operation, Step};
use super::progress::Plan;
use crate::driver::{DriverError, ListResources, ServerInfo, StackResource};
use crate::grant::KeyValuePairs;
use crate::id::{ServerId, StackId};
use crate::lcm::{InstantiatedVnfInfo, InstantiationState, VnfInstance, VnfcResourceInfo};
use crate::lifecycle::failure::Failed;
use crate::lifecycle::groups;
use crate::lifecycle::hook::HookPoint;
use crate::lifecycle::plan::{self};
use crate::lifecycle::stack;
use crate::package::Flavour;

impl Operation {
    pub(super) fn collect(&mut self) {
        let Some(id) = self.progress.stack_id.clone() else {
            return self.fail(no_stack_failed());
        };
        self.step = Step::CollectList;
        self.next = Some(OpAction::ListResources(ListResources::new(id, 5)));
    }

    pub(super) fn on_collect_list(&mut self, r: Result<Vec<StackResource>, DriverError>) {
        let resources = match r {
            Ok(r) => r,
            Err(e) => return self.fail_driver(&e),
        };
        let (Some(p), Some(id)) = (self.placed.as_ref(), self.progress.stack_id.as_ref()) else {
            return self.internal("reading servers without a placement");
        };
        let prior = plan::prior_servers(&self.before);
        match stack::match_servers(id, &p.slots, &p.layouts, &prior, &resources) {
            Ok(found) => {
                let ids = found
                    .iter()
                    .map(|(_, s, _)| ServerId::from(s.clone()))
                    .collect();
                self.step = Step::CollectServers(found);
                self.next = Some(OpAction::ShowServers(ids));
            }
            Err(f) => self.fail(f),
        }
    }

    pub(super) fn on_collected(
        &mut self,
        found: Vec<stack::Found>,
        mut r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>,
    ) {
        let mut vnfcs = Vec::new();
        for (slot, server, parent) in &found {
            match r.remove(&ServerId::from(server.clone())) {
                Some(Ok(info)) => vnfcs.push(stack::vnfc_resource(
                    slot,
                    parent,
                    &info,
                    &self.cfg.vim_connection_id,
                )),
                Some(Err(e)) => return self.fail_driver(&e),
                None => {
                    return self.internal(&format!("server {server} was not shown"));
                }
            }
        }
        self.progress.vnfcs = Some(vnfcs);
        self.after_stack();
    }

    /// After the stack reached its state: the hooks of the plan's point, then the end.
    pub(super) fn after_stack(&mut self) {
        match self.progress.plan {
            Plan::CnfTerminate | Plan::CnfRollbackInstantiate if !self.progress.deleted => {
                self.cnf_delete();
            }
            Plan::CnfTerminate | Plan::CnfRollbackInstantiate => self.finish_deleted(),
            Plan::Terminate | Plan::RollbackInstantiate | Plan::FailInstantiate
                if !self.progress.deleted =>
            {
                self.delete_stack();
            }
            Plan::Terminate | Plan::RollbackInstantiate | Plan::FailInstantiate => {
                self.finish_deleted();
            }
            Plan::RollbackScaleOut | Plan::RollbackChangeFlavour | Plan::RollbackChangeExtConn => {
                let before = self.before.clone();
                self.finish(Ok(before));
            }
            _ => match self.new_instance() {
                Ok(inst) => {
                    self.after = Some(inst);
                    self.hooks_or(Self::finish_placed);
                }
                Err(f) => self.fail(f),
            },
        }
    }

    pub(super) fn finish_placed(&mut self) {
        match self.after.take() {
            Some(inst) => self.finish(Ok(inst)),
            None => self.internal("no instance to record"),
        }
    }

    /// A new `instantiatedVnfInfo` of `flavour_id` at `level` (instantiate, change flavour):
    /// `metadata` (the server groups are recorded into it), then the VNFCs, the external links
    /// and the server groups this operation leaves.
    pub(super) fn fresh_info(
        &self,
        flavour: &Flavour,
        flavour_id: &str,
        vnfcs: Vec<VnfcResourceInfo>,
        level: Option<&str>,
        metadata: Option<KeyValuePairs>,
    ) -> InstantiatedVnfInfo {
        let mut info = plan::instantiated_info(flavour, flavour_id, vnfcs, None);
        plan::set_level(&mut info, flavour, level);
        info.metadata = metadata;
        plan::set_links(&mut info, &self.links());
        if let Some(p) = &self.progress.server_groups {
            groups::record(&mut info, p);
        }
        info
    }

    /// The CNF instance the operation leaves: its VNFCs (pods) and resources.
    pub(super) fn cnf_instance(&self) -> Result<VnfInstance, Failed> {
        let vnfcs = self.progress.vnfcs.clone().unwrap_or_default();
        let work = self.cnf_work()?;
        self.with_flavour(|_, flavour| {
            let plan = &self.progress.plan;
            Ok(cnf_run::instance(&self.before, plan, flavour, vnfcs, &work))
        })
    }

    /// The instance the operation leaves.
    pub(super) fn new_instance(&self) -> Result<VnfInstance, Failed> {
        if self.progress.plan.is_cnf() {
            return self.cnf_instance();
        }
        let vnfcs = self.progress.vnfcs.clone().unwrap_or_default();
        let stack_id = self.progress.stack_id.clone().ok_or_else(no_stack_failed)?;
        let plan = self.progress.plan.clone();
        self.with_flavour(|_, flavour| {
            let before = &self.before;
            Ok(match &plan {
                Plan::Instantiate {
                    flavour_id,
                    configurable,
                    level,
                    ..
                } => {
                    let mut new = before.clone();
                    new.instantiation_state = Some(InstantiationState::Instantiated);
                    let level = level.as_deref();
                    let info = self.fresh_info(flavour, flavour_id, vnfcs, level, None);
                    new.instantiated_vnf_info = Some(info);
                    plan::set_stack_id(&mut new, &stack_id);
                    if let Some(p) = configurable {
                        let mut props = new.vnf_configurable_properties.take().unwrap_or_default();
                        props.extend(p.clone());
                        new.vnf_configurable_properties = Some(props);
                    }
                    new
                }
                Plan::ChangeFlavour { flavour_id, level } => {
                    let mut new = before.clone();
                    // The instance keeps its metadata and its external virtual links.
                    let metadata = before
                        .instantiated_vnf_info
                        .as_ref()
                        .and_then(|p| p.metadata.clone());
                    let level = level.as_deref();
                    let info = self.fresh_info(flavour, flavour_id, vnfcs, level, metadata);
                    new.instantiated_vnf_info = Some(info);
                    plan::set_stack_id(&mut new, &stack_id);
                    new
                }
                // The same instantiation on new VNFCs.
                other => restacked(other, before, flavour, vnfcs, &stack_id),
            })
        })
    }

    // hooks

    /// Runs the hooks of the plan's point that have not succeeded yet, then goes on (the
    /// stack deleted at `terminate_start`, else the end); without a point, `then`.
    pub(super) fn hooks_or(&mut self, then: fn(&mut Self)) {
        let Some(point) = self.progress.plan.hook_point() else {
            return then(self);
        };
        let h = Hooks::new(point, &self.hooks, &self.op.hooks);
        self.drive_hooks(h);
    }

    /// Hands the next hook out, or goes on once every hook succeeded (or one failed).
    pub(super) fn drive_hooks(&mut self, mut h: Hooks) {
        match h.poll_end() {
            Some(Ok(())) if h.point() == HookPoint::TerminateStart => self.delete_stack(),
            Some(Ok(())) => self.finish_placed(),
            Some(Err(f)) => self.fail(f),
            None => {
                let instance = self.after.as_ref().unwrap_or(&self.before);
                self.next = h.poll_action(&self.op.id, instance);
                self.step = Step::Hooks(h);
            }
        }
    }
}

/// The instance after an operation that keeps its instantiation and changes its VNFCs (scale,
/// scale to level, change of external connectivity, heal, ...): `before` with `vnfcs` on the
/// stack `stack_id`, and what the plan changes besides.
pub(super) fn restacked(
    done: &Plan,
    before: &VnfInstance,
    flavour: &Flavour,
    vnfcs: Vec<VnfcResourceInfo>,
    stack_id: &StackId,
) -> VnfInstance {
    match done {
        Plan::ScaleOut {
            aspect_id,
            new_level,
        }
        | Plan::ScaleIn {
            aspect_id,
            new_level,
            ..
        } => plan::with_vnfcs(
            before,
            flavour,
            vnfcs,
            stack_id,
            Some((aspect_id, *new_level)),
        ),
        Plan::ScaleToLevel { levels, .. } => {
            let mut new = plan::with_vnfcs(before, flavour, vnfcs, stack_id, None);
            if let Some(info) = new.instantiated_vnf_info.as_mut() {
                for s in &mut info.scale_status {
                    if let Some(l) = levels.get(&s.aspect_id) {
                        s.scale_level = *l;
                    }
                }
            }
            new
        }
        Plan::ChangeExtConn {
            links,
            vim_connection_info,
        } => {
            let mut new = plan::with_vnfcs(before, flavour, vnfcs, stack_id, None);
            if let Some(info) = new.instantiated_vnf_info.as_mut() {
                plan::set_links(info, links);
            }
            new.vim_connection_info.extend(
                vim_connection_info
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            new
        }
        _ => plan::with_vnfcs(before, flavour, vnfcs, stack_id, None),
    }
}
