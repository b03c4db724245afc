//! Building the SOL003 [`GrantRequest`] of an operation from the VNF package and the VNF
//! instance, the way Tacker's v2 VNFM builds it (`vnflcm_driver_v2.py`), as pure functions.
//!
//! [`instantiate`], [`scale_out`] and [`heal`] return a [`PlannedGrant`]: the request, which
//! passes [`GrantRequest::validate`], and the new VNFCs it asks for, each with its
//! [`VnfcSlot`] (`<VDU>-<index>`, the name of its stack resource) and the ids of its resource
//! definitions, so that the caller can find the zone the grant gives each VNFC.
//! Resource definition ids come from the caller's [`IdGen`]: a `COMPUTE` definition has a fresh
//! UUID-shaped id, and the `STORAGE` definitions of the same VNFC are named
//! `<storage id>-<compute id>` (as Tacker names them).
//!
//! # Resources
//! - **Instantiate**: for every VDU of the flavour, `n` VNFCs at indexes `0..n`, where `n` is
//!   [`Flavour::initial_instances`] (the `VduInitialDelta`, else the count at the default
//!   instantiation level), else the VDU's `min_number_of_instances`. Each VNFC is one `COMPUTE`
//!   definition (`resourceTemplateId` and `vduId` the VDU id) followed by one `STORAGE`
//!   definition per virtual storage of the VDU (`resourceTemplateId` the storage id, `vduId`
//!   the VDU id), all in `addResources`.
//! - **Scale out**: `steps × delta` new VNFCs for every VDU the aspect scales
//!   ([`Flavour::aspect_delta`]), built like those of instantiate. Their indexes continue after
//!   the instance's existing VNFCs of the VDU: the first one is the largest existing index plus
//!   one; VNFCs whose index is unknown are counted, so the first new index is never below the
//!   number of existing VNFCs of the VDU.
//! - **Heal**: a healed VNFC is re-created in its slot (same VDU, same index). As SOL003
//!   (clause 9.5.2.2, `removeResources` / `addResources`) and Tacker's heal grant do it, the
//!   existing compute resource is listed in `removeResources` (a `COMPUTE` definition whose
//!   `resource` is the VNFC's `computeResource`) and its re-creation in `addResources` (a
//!   `COMPUTE` definition without `resource`). Storages are kept: a heal grant lists no
//!   `STORAGE` definition and the [`NewVnfc::storages`] of a healed VNFC is empty.
//!
//! Link ports and virtual links are not part of the grants built here.
//!
//! # Existing VNFCs
//! The existing VNFCs are the `instantiatedVnfInfo.vnfcResourceInfo` entries of the instance.
//! The index of one is read from its `metadata`:
//! - [`VDU_IDX_KEY`] (`vdu_idx`): a non-negative integer, or a string of digits, as Tacker's
//!   `StandardUserData` records it; any other value is an error naming the field;
//! - else [`RESOURCE_NAME_KEY`] (`parent_resource_name`): the name of its resource in the top
//!   stack, used when it has the form `<vduId>-<index>`; other names are ignored.
//!
//! A VNFC with neither has no known index: scale-out counts it (see above), and healing it is an
//! error.
//!
//! # Placement constraints
//! One [`PlacementConstraint`] per affinity or anti-affinity rule of the flavour, in document
//! order, with the rule's kind and scope (`zone` → `ZONE`, `zone_group` → `ZONE_GROUP`,
//! `nfvi_pop` → `NFVI_POP`, `nfvi_node` → `NFVI_NODE`, `cis_node` → `CIS_NODE`) and
//! `fallbackBestEffort` from [`GrantOptions::fallback_best_effort`]. Its resources are a `GRANT`
//! reference to every new `COMPUTE` definition of the rule's VDUs (in `addResources` order),
//! then a `RES_MGMT` reference to every existing VNFC of those VDUs (in `vnfcResourceInfo`
//! order; for heal, the VNFCs that are not healed): `resourceId` is its
//! `computeResource.resourceId`, `vimConnectionId` its `computeResource.vimConnectionId`, else
//! [`GrantOptions::vim_connection_id`]. As in Tacker, a rule is skipped when it references no
//! new resource (a constraint among existing resources only has nothing to place) or fewer than
//! two resources in all; skipping one rule never drops the others (Tacker's loop stops at the
//! first skipped rule; this one does not).
//!
//! [`GrantRequest`]: crate::grant::GrantRequest
//! [`GrantRequest::validate`]: crate::grant::GrantRequest::validate
//! [`VnfcSlot`]: crate::lifecycle::userdata::VnfcSlot
//! [`IdGen`]: crate::id::IdGen
//! [`Flavour::initial_instances`]: crate::package::Flavour::initial_instances
//! [`Flavour::aspect_delta`]: crate::package::Flavour::aspect_delta
//! [`PlacementConstraint`]: crate::grant::PlacementConstraint

mod requests;
mod resources;
mod types;

pub(crate) use requests::check_level;
pub use requests::{
    change_ext_conn, change_flavour, heal, instantiate, instantiate_at_level, scale_in, scale_out,
    scale_to_level, terminate,
};
pub use resources::existing_slot;
pub(crate) use resources::slots_of;
pub use types::{
    lcm_op_occ_href, vnf_instance_href, GrantOptions, NewVnfc, PlannedGrant, RESOURCE_NAME_KEY,
    VDU_IDX_KEY,
};

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use serde_json::{json, Value};

    use super::requests::*;
    use super::resources::*;
    use super::types::*;
    use crate::grant::{AffinityOrAntiAffinity, GrantedLcmOperationType, ResourceType};
    use crate::id::{IdGen, OpOccId};
    use crate::lcm::VnfInstance;
    use crate::lifecycle::userdata::VnfcSlot;
    use crate::package::{RuleKind, RuleScope, VnfPackage};
    use crate::vectors::read_vector;

    fn demo() -> VnfPackage {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf");
        crate::package::fs::load(&dir).unwrap()
    }

    fn op() -> OpOccId {
        OpOccId::new("op-1")
    }

    fn links() -> Value {
        json!({
            "vnfLcmOpOcc": {"href": "/vnflcm/v2/vnf_lcm_op_occs/op-1"},
            "vnfInstance": {"href": "/vnflcm/v2/vnf_instances/inst-1"}
        })
    }

    fn compute(id: &str, vdu: &str) -> Value {
        json!({"id": id, "type": "COMPUTE", "vduId": vdu, "resourceTemplateId": vdu})
    }

    fn storage(name: &str, compute_id: &str, vdu: &str) -> Value {
        json!({"id": format!("{name}-{compute_id}"), "type": "STORAGE", "vduId": vdu,
               "resourceTemplateId": name})
    }

    fn grant_ref(id: &str) -> Value {
        json!({"idType": "GRANT", "resourceId": id})
    }

    fn mgmt_ref(id: &str, vim: &str) -> Value {
        json!({"idType": "RES_MGMT", "resourceId": id, "vimConnectionId": vim})
    }

    fn anti(scope: &str, refs: Vec<Value>, fallback: bool) -> Value {
        json!({"affinityOrAntiAffinity": "ANTI_AFFINITY", "scope": scope, "resource": refs,
               "fallbackBestEffort": fallback})
    }

    /// The next `n` ids of a generator seeded like the one handed to the function under test.
    fn uuids(seed: u64, n: usize) -> Vec<String> {
        let mut g = IdGen::seeded(seed);
        (0..n).map(|_| g.next_uuid()).collect()
    }

    fn slots(p: &PlannedGrant) -> Vec<String> {
        p.new_vnfcs.iter().map(|n| n.slot.name()).collect()
    }

    fn opts() -> GrantOptions {
        GrantOptions {
            fallback_best_effort: true,
            vim_connection_id: Some("default-vim".into()),
            is_automatic_invocation: false,
        }
    }

    /// An instantiated demo instance: VDU1-0 (vdu_idx 0, vim1), VDU2-0 (vdu_idx "0", no VIM
    /// connection), VDU1-1 (index from its stack resource name, vim1).
    fn demo_instance(vnfd_id: &str, vdu1_level: u32) -> VnfInstance {
        serde_json::from_value(json!({
            "id": "inst-1",
            "vnfdId": vnfd_id,
            "instantiationState": "INSTANTIATED",
            "instantiatedVnfInfo": {
                "flavourId": "default",
                "vnfState": "STARTED",
                "scaleStatus": [
                    {"aspectId": "VDU1_scale", "scaleLevel": vdu1_level},
                    {"aspectId": "VDU2_scale", "scaleLevel": 0}
                ],
                "vnfcResourceInfo": [
                    {"id": "rsc-vdu1-0", "vduId": "VDU1",
                     "computeResource": {"resourceId": "srv-vdu1-0", "vimConnectionId": "vim1"},
                     "metadata": {"vdu_idx": 0}},
                    {"id": "rsc-vdu2-0", "vduId": "VDU2",
                     "computeResource": {"resourceId": "srv-vdu2-0"},
                     "metadata": {"vdu_idx": "0"}},
                    {"id": "rsc-vdu1-1", "vduId": "VDU1",
                     "computeResource": {"resourceId": "srv-vdu1-1", "vimConnectionId": "vim1"},
                     "metadata": {"parent_resource_name": "VDU1-1"}}
                ],
                "vnfcInfo": [
                    {"id": "vnfc-vdu2-0", "vduId": "VDU2", "vnfcResourceInfoId": "rsc-vdu2-0",
                     "vnfcState": "STARTED"}
                ]
            }
        }))
        .unwrap()
    }

    #[test]
    fn instantiate_demo_package() {
        let pkg = demo();
        let inst = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
        let p = instantiate(
            &pkg,
            "default",
            &inst,
            &op(),
            &opts(),
            &mut IdGen::seeded(1),
        )
        .unwrap();
        let [a, b, c] = <[String; 3]>::try_from(uuids(1, 3)).unwrap();
        let expect = json!({
            "vnfInstanceId": "inst-1",
            "vnfLcmOpOccId": "op-1",
            "vnfdId": pkg.descriptor_id,
            "flavourId": "default",
            "operation": "INSTANTIATE",
            "isAutomaticInvocation": false,
            "addResources": [
                compute(&a, "VDU1"), storage("VDU1-BootVolume", &a, "VDU1"),
                compute(&b, "VDU1"), storage("VDU1-BootVolume", &b, "VDU1"),
                compute(&c, "VDU2")
            ],
            "placementConstraints": [
                anti("ZONE", vec![grant_ref(&a), grant_ref(&b), grant_ref(&c)], true),
                anti("NFVI_NODE", vec![grant_ref(&a), grant_ref(&b)], true)
            ],
            "_links": links()
        });
        assert_eq!(serde_json::to_value(&p.request).unwrap(), expect);
        assert_eq!(slots(&p), ["VDU1-0", "VDU1-1", "VDU2-0"]);
        assert_eq!(p.new_vnfcs[0].resource_id, a);
        assert_eq!(p.new_vnfcs[0].storages, [format!("VDU1-BootVolume-{a}")]);
        assert!(p.new_vnfcs[2].storages.is_empty());
        assert!(p.request.validate().is_ok());
    }

    #[test]
    fn instantiate_at_a_level_takes_its_counts_and_names_it_and_an_unknown_level_is_refused() {
        let pkg = demo();
        let inst = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
        let at = |level| {
            instantiate_at_level(
                &pkg,
                "default",
                level,
                &inst,
                &op(),
                &opts(),
                &mut IdGen::seeded(1),
            )
        };
        let large = at(Some("large")).unwrap();
        assert_eq!(
            slots(&large),
            ["VDU1-0", "VDU1-1", "VDU1-2", "VDU1-3", "VDU2-0", "VDU2-1"]
        );
        assert_eq!(
            large.request.instantiation_level_id.as_deref(),
            Some("large")
        );
        assert_eq!(slots(&at(None).unwrap()), ["VDU1-0", "VDU1-1", "VDU2-0"]);
        let e = at(Some("huge")).unwrap_err().to_string();
        assert!(
            e.contains("instantiationLevelId")
                && e.contains("no instantiation level `huge`")
                && e.contains("large, small"),
            "{e}"
        );
    }

    #[test]
    fn instantiate_options_reach_the_request() {
        let pkg = demo();
        let inst = VnfInstance::new("inst-1", "");
        let o = GrantOptions {
            fallback_best_effort: false,
            vim_connection_id: None,
            is_automatic_invocation: true,
        };
        let p = instantiate(&pkg, "default", &inst, &op(), &o, &mut IdGen::seeded(1)).unwrap();
        // an instance without vnfdId takes the package's
        assert_eq!(p.request.vnfd_id, pkg.descriptor_id);
        assert!(p.request.is_automatic_invocation);
        assert!(p
            .request
            .placement_constraints
            .iter()
            .all(|c| c.fallback_best_effort == Some(false)));
    }

    #[test]
    fn scale_out_demo_package() {
        let pkg = demo();
        let inst = demo_instance(&pkg.descriptor_id, 0);
        let p = scale_out(
            &pkg,
            &inst,
            "VDU1_scale",
            2,
            &op(),
            &opts(),
            &mut IdGen::seeded(2),
        )
        .unwrap();
        let [d, e] = <[String; 2]>::try_from(uuids(2, 2)).unwrap();
        let expect = json!({
            "vnfInstanceId": "inst-1",
            "vnfLcmOpOccId": "op-1",
            "vnfdId": pkg.descriptor_id,
            "flavourId": "default",
            "operation": "SCALE",
            "isAutomaticInvocation": false,
            "addResources": [
                compute(&d, "VDU1"), storage("VDU1-BootVolume", &d, "VDU1"),
                compute(&e, "VDU1"), storage("VDU1-BootVolume", &e, "VDU1")
            ],
            "placementConstraints": [
                anti("ZONE", vec![
                    grant_ref(&d), grant_ref(&e),
                    mgmt_ref("srv-vdu1-0", "vim1"),
                    mgmt_ref("srv-vdu2-0", "default-vim"),
                    mgmt_ref("srv-vdu1-1", "vim1"),
                ], true),
                anti("NFVI_NODE", vec![
                    grant_ref(&d), grant_ref(&e),
                    mgmt_ref("srv-vdu1-0", "vim1"),
                    mgmt_ref("srv-vdu1-1", "vim1"),
                ], true)
            ],
            "_links": links()
        });
        assert_eq!(serde_json::to_value(&p.request).unwrap(), expect);
        // indexes continue after VDU1-0 (vdu_idx) and VDU1-1 (stack resource name)
        assert_eq!(slots(&p), ["VDU1-2", "VDU1-3"]);
    }

    #[test]
    fn scale_out_indexes_follow_the_largest_existing_one() {
        let pkg = demo();
        let mut inst = demo_instance(&pkg.descriptor_id, 0);
        let info = inst.instantiated_vnf_info.as_mut().unwrap();
        // VDU1 at index 0 and 5 (a gap): the next one is 6
        info.vnfc_resource_info[2].metadata = Some(
            json!({"vdu_idx": 5, "parent_resource_name": "VDU1-1"})
                .as_object()
                .unwrap()
                .clone(),
        );
        let p = scale_out(
            &pkg,
            &inst,
            "VDU1_scale",
            1,
            &op(),
            &opts(),
            &mut IdGen::seeded(3),
        )
        .unwrap();
        assert_eq!(slots(&p), ["VDU1-6"]);

        // VNFCs with no index are counted: two unknown VDU1 VNFCs → the next index is 2
        let info = inst.instantiated_vnf_info.as_mut().unwrap();
        for v in &mut info.vnfc_resource_info {
            v.metadata = None;
        }
        let p = scale_out(
            &pkg,
            &inst,
            "VDU1_scale",
            1,
            &op(),
            &opts(),
            &mut IdGen::seeded(3),
        )
        .unwrap();
        assert_eq!(slots(&p), ["VDU1-2"]);

        // a stack resource name of another shape gives no index
        let info = inst.instantiated_vnf_info.as_mut().unwrap();
        info.vnfc_resource_info[0].metadata = Some(
            json!({"parent_resource_name": "abcdef-9"})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(existing_slot(&info.vnfc_resource_info[0]).unwrap(), None);
        assert_eq!(
            existing_slot(
                &demo_instance("", 0)
                    .instantiated_vnf_info
                    .unwrap()
                    .vnfc_resource_info[2]
            )
            .unwrap(),
            Some(VnfcSlot::new("VDU1", 1))
        );
    }

    /// The error of a scale-out of `inst` by `steps` of `aspect`.
    fn scale_out_error(pkg: &VnfPackage, aspect: &str, steps: u32, inst: &VnfInstance) -> String {
        scale_out(
            pkg,
            inst,
            aspect,
            steps,
            &op(),
            &opts(),
            &mut IdGen::seeded(1),
        )
        .unwrap_err()
        .to_string()
    }

    #[test]
    fn scale_out_errors() {
        let pkg = demo();
        let inst = demo_instance(&pkg.descriptor_id, 0);
        let e = |aspect: &str, steps: u32, inst: &VnfInstance| {
            scale_out_error(&pkg, aspect, steps, inst)
        };
        assert_eq!(
            e("VDU3_scale", 1, &inst),
            "aspectId: unknown scaling aspect `VDU3_scale` of flavour `default`; expected one \
             of VDU1_scale, VDU2_scale"
        );
        assert_eq!(
            e("VDU1_scale", 3, &inst),
            "numberOfSteps: scaling aspect `VDU1_scale` out by 3 step(s) from scale level 0 \
             would reach level 3; expected at most its max_scale_level 2"
        );
        let at_one = demo_instance(&pkg.descriptor_id, 1);
        assert!(e("VDU1_scale", 2, &at_one).contains("from scale level 1 would reach level 3"));
        assert!(e("VDU1_scale", 0, &inst).starts_with("numberOfSteps: scale out by 0 steps"));

        // more VNFCs than max_number_of_instances (4): 3 existing VDU1 + 2
        let mut crowded = demo_instance(&pkg.descriptor_id, 0);
        let info = crowded.instantiated_vnf_info.as_mut().unwrap();
        let mut extra = info.vnfc_resource_info[0].clone();
        extra.id = "rsc-vdu1-2".into();
        extra.metadata = Some(json!({"vdu_idx": 2}).as_object().unwrap().clone());
        info.vnfc_resource_info.push(extra);
        assert_eq!(
            e("VDU1_scale", 2, &crowded),
            "numberOfSteps: scaling aspect `VDU1_scale` out by 2 step(s) would give VDU VDU1 5 \
             instance(s) (3 existing + 2 new); expected at most its max_number_of_instances 4"
        );
    }

    #[test]
    fn scale_out_errors_of_the_instance() {
        let pkg = demo();
        let e = |aspect: &str, steps: u32, inst: &VnfInstance| {
            scale_out_error(&pkg, aspect, steps, inst)
        };
        // a bad index is named with its field path
        let mut bad = demo_instance(&pkg.descriptor_id, 0);
        bad.instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info[0]
            .metadata = Some(json!({"vdu_idx": -1}).as_object().unwrap().clone());
        assert_eq!(
            e("VDU1_scale", 1, &bad),
            "instantiatedVnfInfo.vnfcResourceInfo[0].metadata.vdu_idx: VNFC `rsc-vdu1-0` has \
             the index -1; expected a non-negative integer of at most 4294967295"
        );

        // not instantiated
        let fresh = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
        assert_eq!(
            e("VDU1_scale", 1, &fresh),
            "instantiatedVnfInfo: VNF instance `inst-1` has no instantiatedVnfInfo; expected an \
             instantiated VNF"
        );

        // an existing VNFC without a VIM resource id cannot be referenced
        let mut anon = demo_instance(&pkg.descriptor_id, 0);
        anon.instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info[1]
            .compute_resource
            .resource_id
            .clear();
        assert!(e("VDU1_scale", 1, &anon).starts_with(
            "instantiatedVnfInfo.vnfcResourceInfo[1].computeResource.resourceId: existing VNFC \
             `rsc-vdu2-0` of VDU VDU2 has no computeResource.resourceId"
        ));

        // another package's instance
        let other = demo_instance("other-vnfd", 0);
        assert!(e("VDU1_scale", 1, &other)
            .starts_with("vnfdId: VNF instance `inst-1` is of VNFD `other-vnfd` but package "));
    }

    #[test]
    fn heal_demo_package() {
        let pkg = demo();
        let inst = demo_instance(&pkg.descriptor_id, 0);
        // one by its vnfcResourceInfo id, one by its vnfcInfo id
        let ids = ["rsc-vdu1-1".to_owned(), "vnfc-vdu2-0".to_owned()];
        let mut o = opts();
        o.is_automatic_invocation = true;
        let p = heal(&pkg, &inst, &ids, &op(), &o, &mut IdGen::seeded(4)).unwrap();
        let [r1, n1, r2, n2] = <[String; 4]>::try_from(uuids(4, 4)).unwrap();
        let expect = json!({
            "vnfInstanceId": "inst-1",
            "vnfLcmOpOccId": "op-1",
            "vnfdId": pkg.descriptor_id,
            "flavourId": "default",
            "operation": "HEAL",
            "isAutomaticInvocation": true,
            "addResources": [compute(&n1, "VDU1"), compute(&n2, "VDU2")],
            "removeResources": [
                {"id": r1, "type": "COMPUTE", "vduId": "VDU1", "resourceTemplateId": "VDU1",
                 "resource": {"resourceId": "srv-vdu1-1", "vimConnectionId": "vim1"}},
                {"id": r2, "type": "COMPUTE", "vduId": "VDU2", "resourceTemplateId": "VDU2",
                 "resource": {"resourceId": "srv-vdu2-0", "vimConnectionId": "default-vim"}}
            ],
            "placementConstraints": [
                anti("ZONE", vec![grant_ref(&n1), grant_ref(&n2),
                                  mgmt_ref("srv-vdu1-0", "vim1")], true),
                anti("NFVI_NODE", vec![grant_ref(&n1), mgmt_ref("srv-vdu1-0", "vim1")], true)
            ],
            "_links": links()
        });
        assert_eq!(serde_json::to_value(&p.request).unwrap(), expect);
        assert_eq!(slots(&p), ["VDU1-1", "VDU2-0"]);
        assert!(p.new_vnfcs.iter().all(|n| n.storages.is_empty()));

        // no id: every VNFC, so no existing resource is left to reference
        let p = heal(&pkg, &inst, &[], &op(), &opts(), &mut IdGen::seeded(4)).unwrap();
        assert_eq!(slots(&p), ["VDU1-0", "VDU2-0", "VDU1-1"]);
        assert_eq!(p.request.remove_resources.len(), 3);
        let c = &p.request.placement_constraints;
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].resource.len(), 3);
        assert!(c
            .iter()
            .flat_map(|c| &c.resource)
            .all(|r| r.id_type == crate::grant::ConstraintIdType::Grant));
    }

    #[test]
    fn heal_errors() {
        let pkg = demo();
        let inst = demo_instance(&pkg.descriptor_id, 0);
        let e = |ids: &[&str], inst: &VnfInstance| {
            let ids: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
            heal(&pkg, inst, &ids, &op(), &opts(), &mut IdGen::seeded(1))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e(&["rsc-vdu1-0", "ghost"], &inst),
            "vnfcInstanceId[1]: unknown VNFC `ghost`; expected one of the instance's VNFCs: \
             rsc-vdu1-0, rsc-vdu2-0, rsc-vdu1-1, vnfc-vdu2-0"
        );
        assert_eq!(
            e(&["rsc-vdu2-0", "vnfc-vdu2-0"], &inst),
            "vnfcInstanceId[1]: VNFC `vnfc-vdu2-0` is listed twice (as vnfcResourceInfo \
             `rsc-vdu2-0`); expected each VNFC once"
        );
        let mut no_idx = inst.clone();
        no_idx
            .instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info[0]
            .metadata = None;
        assert_eq!(
            e(&["rsc-vdu1-0"], &no_idx),
            "instantiatedVnfInfo.vnfcResourceInfo[0].metadata: VNFC `rsc-vdu1-0` of VDU VDU1 \
             has no index: expected metadata.vdu_idx or metadata.parent_resource_name \
             `VDU1-<index>` to re-create it in its slot"
        );
        let mut stray = inst.clone();
        stray
            .instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info[0]
            .vdu_id = "VDU9".into();
        assert_eq!(
            e(&["rsc-vdu1-0"], &stray),
            "instantiatedVnfInfo.vnfcResourceInfo[0].vduId: VNFC `rsc-vdu1-0` is of VDU `VDU9` \
             which flavour `default` does not have; expected one of VDU1, VDU2"
        );
        let mut empty = inst.clone();
        empty
            .instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info
            .clear();
        assert!(e(&[], &empty).contains("the VNF instance has no VNFC to heal"));
    }

    /// Change flavour large -> small of `flavours-vnf`: VDU1-0 is kept, VDU1-1 (beyond small's
    /// one VDU1) and VDU2-0 (no VDU2 in small) are removed, nothing is added; small -> large
    /// from VDU1-2 alone adds VDU1-0 (the free index) and VDU2-0.
    #[test]
    fn change_flavour_keeps_removes_and_adds() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/flavours-vnf");
        let pkg = crate::package::fs::load(&dir).unwrap();
        let mut inst = demo_instance(&pkg.descriptor_id, 0);
        inst.instantiated_vnf_info.as_mut().unwrap().flavour_id = "large".into();
        let mut ids = IdGen::seeded(7);
        let p = change_flavour(&pkg, "small", None, &inst, &op(), &opts(), &mut ids).unwrap();
        assert_eq!(p.request.operation, GrantedLcmOperationType::ChangeFlavour);
        assert_eq!(p.request.flavour_id.as_deref(), Some("small"));
        assert!(p.new_vnfcs.is_empty(), "{:?}", p.new_vnfcs);
        let removed: Vec<&str> = p
            .request
            .remove_resources
            .iter()
            .map(|r| r.resource.as_ref().unwrap().resource_id.as_str())
            .collect();
        assert_eq!(removed, ["srv-vdu2-0", "srv-vdu1-1"]);

        let mut one: VnfInstance = demo_instance(&pkg.descriptor_id, 0);
        let info = one.instantiated_vnf_info.as_mut().unwrap();
        info.flavour_id = "small".into();
        info.vnfc_resource_info.retain(|v| v.id == "rsc-vdu1-1");
        info.vnfc_info.clear();
        let p = change_flavour(&pkg, "large", None, &one, &op(), &opts(), &mut ids).unwrap();
        assert_eq!(slots(&p), ["VDU1-0", "VDU2-0"]);
        assert!(p.request.remove_resources.is_empty());
        let p =
            change_flavour(&pkg, "large", Some("peak"), &one, &op(), &opts(), &mut ids).unwrap();
        assert_eq!(slots(&p), ["VDU1-0", "VDU1-2", "VDU2-0"]);
        assert_eq!(p.request.instantiation_level_id.as_deref(), Some("peak"));
        let e = change_flavour(&pkg, "huge", None, &one, &op(), &opts(), &mut ids).unwrap_err();
        assert!(e.to_string().contains("newFlavourId"), "{e}");
    }

    #[test]
    fn unknown_flavour_is_named() {
        let pkg = demo();
        let inst = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
        let e = instantiate(&pkg, "gold", &inst, &op(), &opts(), &mut IdGen::seeded(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("flavourId: no deployment flavour `gold` in package "),
            "{e}"
        );
        assert!(e.ends_with("; expected one of default"), "{e}");

        let mut inst = demo_instance(&pkg.descriptor_id, 0);
        inst.instantiated_vnf_info.as_mut().unwrap().flavour_id = "gold".into();
        let e = heal(&pkg, &inst, &[], &op(), &opts(), &mut IdGen::seeded(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("instantiatedVnfInfo.flavourId: no deployment flavour `gold`"),
            "{e}"
        );

        let done = demo_instance(&pkg.descriptor_id, 0);
        let e = instantiate(
            &pkg,
            "default",
            &done,
            &op(),
            &opts(),
            &mut IdGen::seeded(1),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("instantiationState: VNF instance `inst-1` is already INSTANTIATED"),
            "{e}"
        );
    }

    #[test]
    fn rule_scopes_and_kinds_map_to_sol003() {
        for (s, expect) in [
            ("zone", "ZONE"),
            ("zone_group", "ZONE_GROUP"),
            ("nfvi_pop", "NFVI_POP"),
            ("nfvi_node", "NFVI_NODE"),
            ("cis_node", "CIS_NODE"),
        ] {
            let mapped = scope(RuleScope::parse(s).unwrap());
            assert_eq!(serde_json::to_value(mapped).unwrap(), expect);
        }
        assert_eq!(kind(RuleKind::Affinity), AffinityOrAntiAffinity::Affinity);
        assert_eq!(
            kind(RuleKind::AntiAffinity),
            AffinityOrAntiAffinity::AntiAffinity
        );
    }

    // -----------------------------------------------------------------------------------------
    // a small in-memory package in the shape of Tacker's sample1, with extra rules

    const VNFD: &str = r#"
tosca_definitions_version: tosca_simple_yaml_1_2
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
node_types:
  sample.VNF:
    derived_from: tosca.nodes.nfv.VNF
topology_template:
  substitution_mappings:
    node_type: sample.VNF
    properties:
      flavour_id: simple
  node_templates:
    VNF:
      type: sample.VNF
      properties:
        descriptor_id: sample-vnfd
    VDU1:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: VDU1
        vdu_profile:
          min_number_of_instances: 1
          max_number_of_instances: 5
    VDU2:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: VDU2
        vdu_profile:
          min_number_of_instances: 1
          max_number_of_instances: 1
    VDU3:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: VDU3
        vdu_profile:
          min_number_of_instances: 0
          max_number_of_instances: 2
  policies:
    - lonely:
        type: tosca.policies.nfv.AffinityRule
        targets: [ VDU3 ]
        properties:
          scope: zone
    - policy_antiaffinity_vdu:
        type: tosca.policies.nfv.AntiAffinityRule
        targets: [ VDU1, VDU2 ]
        properties:
          scope: nfvi_node
    - single:
        type: tosca.policies.nfv.AffinityRule
        targets: [ VDU2 ]
        properties:
          scope: zone_group
    - scaling_aspects:
        type: tosca.policies.nfv.ScalingAspects
        properties:
          aspects:
            VDU1_scale:
              name: VDU1_scale
              max_scale_level: 2
              step_deltas: [ delta_1 ]
            empty_scale:
              name: empty_scale
              max_scale_level: 2
              step_deltas: [ delta_1 ]
    - VDU1_initial_delta:
        type: tosca.policies.nfv.VduInitialDelta
        properties:
          initial_delta:
            number_of_instances: 3
        targets: [ VDU1 ]
    - VDU1_scaling_aspect_deltas:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties:
          aspect: VDU1_scale
          deltas:
            delta_1:
              number_of_instances: 1
        targets: [ VDU1 ]
"#;

    fn sample() -> VnfPackage {
        let files: BTreeMap<String, Vec<u8>> = [(
            "Definitions/sample.yaml".to_owned(),
            VNFD.as_bytes().to_vec(),
        )]
        .into();
        VnfPackage::from_files("sample", files).unwrap()
    }

    fn tacker_case(name: &str) -> Option<Value> {
        let text = read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/az_reselection/reselection_cases.json",
        )?;
        let doc: Value = serde_json::from_str(&text).unwrap();
        Some(doc["grant_placement_constraints"][name].clone())
    }

    #[test]
    fn tacker_instantiate_placement_constraints() {
        let pkg = sample();
        let inst = VnfInstance::new("inst-1", "sample-vnfd");
        let o = GrantOptions::default();
        let p = instantiate(&pkg, "simple", &inst, &op(), &o, &mut IdGen::seeded(9)).unwrap();
        // VDU1 × 3 (initial delta), VDU2 × 1 (min), VDU3 × 0 (min)
        assert_eq!(slots(&p), ["VDU1-0", "VDU1-1", "VDU1-2", "VDU2-0"]);
        // `lonely` (no VDU3 resource) and `single` (one resource) are skipped; the rule between
        // them is kept
        let got = serde_json::to_value(&p.request.placement_constraints).unwrap();
        let refs: Vec<Value> = p
            .new_vnfcs
            .iter()
            .map(|n| grant_ref(&n.resource_id))
            .collect();
        assert_eq!(got, json!([anti("NFVI_NODE", refs, false)]));

        let Some(case) = tacker_case("instantiate") else {
            return;
        };
        let add = case["add_compute"].as_object().unwrap();
        for (vdu, n) in add {
            let count = p
                .new_vnfcs
                .iter()
                .filter(|v| v.slot.vdu.as_str() == vdu)
                .count();
            assert_eq!(count as u64, n.as_u64().unwrap(), "{vdu}");
        }
        let expect = &case["expect"][0];
        let c = &got[0];
        for k in ["affinityOrAntiAffinity", "scope", "fallbackBestEffort"] {
            assert_eq!(c[k], expect[k], "{k}");
        }
        let total: u64 = add.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(c["resource"].as_array().unwrap().len() as u64, total);
        let compute_ids: Vec<&str> = p
            .request
            .add_resources
            .iter()
            .filter(|r| r.type_ == ResourceType::Compute)
            .map(|r| r.id.as_str())
            .collect();
        for r in c["resource"].as_array().unwrap() {
            assert_eq!(r["idType"], "GRANT");
            assert!(compute_ids.contains(&r["resourceId"].as_str().unwrap()));
        }
    }

    fn tacker_scale_instance() -> VnfInstance {
        let vnfc = |id: &str, vdu: &str, idx: u32| {
            json!({"id": id, "vduId": vdu,
                   "computeResource": {"resourceId": format!("res_id_{id}"),
                                       "vimConnectionId": "vim1"},
                   "metadata": {"vdu_idx": idx}})
        };
        serde_json::from_value(json!({
            "id": "inst-1",
            "vnfdId": "sample-vnfd",
            "instantiationState": "INSTANTIATED",
            "instantiatedVnfInfo": {
                "flavourId": "simple",
                "vnfState": "STARTED",
                "scaleStatus": [{"aspectId": "VDU1_scale", "scaleLevel": 1}],
                "vnfcResourceInfo": [
                    vnfc("VDU2", "VDU2", 0),
                    vnfc("VDU1_1", "VDU1", 0),
                    vnfc("VDU1_2", "VDU1", 1),
                    vnfc("VDU1_3", "VDU1", 2)
                ]
            }
        }))
        .unwrap()
    }

    #[test]
    fn tacker_scale_out_placement_constraints() {
        let pkg = sample();
        let inst = tacker_scale_instance();
        let o = GrantOptions::default();
        let p = scale_out(
            &pkg,
            &inst,
            "VDU1_scale",
            1,
            &op(),
            &o,
            &mut IdGen::seeded(5),
        )
        .unwrap();
        assert_eq!(slots(&p), ["VDU1-3"]);
        let new_id = &p.new_vnfcs[0].resource_id;
        let got = serde_json::to_value(&p.request.placement_constraints).unwrap();
        let mut expect = json!([anti(
            "NFVI_NODE",
            vec![
                grant_ref(new_id),
                mgmt_ref("res_id_VDU2", "vim1"),
                mgmt_ref("res_id_VDU1_1", "vim1"),
                mgmt_ref("res_id_VDU1_2", "vim1"),
                mgmt_ref("res_id_VDU1_3", "vim1"),
            ],
            false
        )]);
        assert_eq!(got, expect);

        let Some(case) = tacker_case("scale_out") else {
            return;
        };
        assert_eq!(case["add_compute"], json!({"VDU1": 1}));
        expect = case["expect"].clone();
        expect[0]["resource"][0]["resourceId"] = json!(new_id);
        assert_eq!(got, expect);
    }

    #[test]
    fn aspect_without_vdus_is_an_error() {
        let pkg = sample();
        let inst = tacker_scale_instance();
        let e = scale_out(
            &pkg,
            &inst,
            "empty_scale",
            1,
            &op(),
            &opts(),
            &mut IdGen::seeded(1),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(
                "aspectId: scaling aspect `empty_scale` of flavour `simple` scales no VDU"
            ),
            "{e}"
        );
    }
}
