//! Replays the captured Heat 27.0.1 / Nova 34 rounds of
//! `shared/vectors/openstack/heat/captured-heat-27.0.1-asg/` on the simulator and compares,
//! round by round, the stack's status and reason, the `nested_depth=3` listing (names, types,
//! statuses, reasons, parent resources) and, on the Nova side, the status, zone and fault of
//! every server the listing names.
//!
//! - The cloud is the captured one: four zones, `az1` and `az2` with room, `az3` and `az4`
//!   with about 1 GB of RAM, too small for an `m1.large`. The servers of other stacks that were
//!   ACTIVE in `az1` / `az2` during the capture do not matter here (both zones have room), so
//!   they are not recreated.
//! - The templates are reconstructed from the captures' README (no template text is in the
//!   captures): an `OS::Heat::AutoScalingGroup` (min 2, desired 2) of a nested `VDU1.yaml`
//!   holding one `OS::Nova::Server` named `VDU1` in `{get_param: zone}`, with
//!   `rolling_updates: {max_batch_size: 4, min_in_service: 0, pause_time: 0}` for
//!   `heat-asgbatch-raw`; two plain servers `VDU1` / `VDU2` for `heat-srv-raw-*`.
//! - The first round creates the stack; a later round whose new events start a top-level
//!   `UPDATE` applies its `parameters_nfv` as a PATCH update; a round without one
//!   (`settled-after-update@az1`) only lists again.
//! - Members: Heat names them with random short ids, the simulator with its seeded ones. The
//!   captured members are mapped to the simulator's by creation order (first
//!   `CREATE_IN_PROGRESS` event ↔ first created member), and captured texts get the
//!   simulator's names before comparing. Members are compared as a set within their group's
//!   stack (Heat lists a stack's rows in database order, which the capture does not tie to
//!   creation); top-level resources in order.
//! - In-progress snapshots: the simulator converges synchronously, so it never lists a member
//!   still in progress beside a failed sibling, while three captured listings do (taken the
//!   moment the stack failed; other captures of the same situations show the siblings
//!   settled). A captured `*_IN_PROGRESS` row is compared against the state it settled to:
//!   the last event of that resource (same stack, same name) in the round's own events and the
//!   following rounds' new events, up to the next top-level update.
#![cfg(feature = "vectors")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{
    ComputeInventory, CreateStack, ListResources, Parameters, StackDriver, StackResource,
    TemplateBundle, UpdateStack,
};
use vnfm_core::id::StackId;
use vnfm_core::sim::SimCloud;
use vnfm_core::vectors::read_vector;

const DIR: &str = "openstack/heat/captured-heat-27.0.1-asg";

const CLOUD: &str = "
zones:
  az1: {hosts: {c1: {vcpus: 32, memory_mb: 65536, disk_gb: 400}}}
  az2: {hosts: {c2: {vcpus: 32, memory_mb: 65536, disk_gb: 400}}}
  az3: {hosts: {c3: {vcpus: 8, memory_mb: 1024, disk_gb: 40}}}
  az4: {hosts: {c4: {vcpus: 8, memory_mb: 1024, disk_gb: 40}}}
flavors:
  m1.large: {vcpus: 4, memory_mb: 4096, disk_gb: 20}
";

const ASG: &str = "
heat_template_version: 2013-05-23
parameters:
  nfv: {type: json}
resources:
  VDU1_scale_group:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 2
      max_size: 3
      desired_capacity: {get_param: [nfv, VDU, VDU1, desired_capacity]}
ROLLING
      resource:
        type: VDU1.yaml
        properties:
          flavor: {get_param: [nfv, VDU, VDU1, computeFlavourId]}
          image: cirros
          zone: {get_param: [nfv, VDU, VDU1, locationConstraints]}
";

const VDU1_YAML: &str = "
heat_template_version: 2013-05-23
parameters:
  flavor: {type: string}
  image: {type: string}
  zone: {type: string}
resources:
  VDU1:
    type: OS::Nova::Server
    properties:
      name: VDU1
      flavor: {get_param: flavor}
      image: {get_param: image}
      availability_zone: {get_param: zone}
";

const SERVERS: &str = "
heat_template_version: 2013-05-23
parameters:
  nfv: {type: json}
resources:
  VDU1:
    type: OS::Nova::Server
    properties:
      name: VDU1
      flavor: {get_param: [nfv, VDU, VDU1, computeFlavourId]}
      image: cirros
      availability_zone: {get_param: [nfv, VDU, VDU1, locationConstraints]}
  VDU2:
    type: OS::Nova::Server
    properties:
      name: VDU2
      flavor: {get_param: [nfv, VDU, VDU2, computeFlavourId]}
      image: cirros
      availability_zone: {get_param: [nfv, VDU, VDU2, locationConstraints]}
";

fn bundle(file: &str) -> TemplateBundle {
    let rolling = "      rolling_updates: {max_batch_size: 4, min_in_service: 0, pause_time: 0}";
    let (template, files) = match file {
        "heat-asg-raw" => (ASG.replace("ROLLING\n", ""), true),
        "heat-asgbatch-raw" => (ASG.replace("ROLLING", rolling), true),
        _ => (SERVERS.to_owned(), false),
    };
    TemplateBundle {
        template,
        files: if files {
            BTreeMap::from([("VDU1.yaml".to_owned(), VDU1_YAML.to_owned())])
        } else {
            BTreeMap::new()
        },
    }
}

fn events(round: &Value) -> &[Value] {
    round["events"]["events"].as_array().unwrap()
}

fn link<'a>(v: &'a Value, rel: &str) -> &'a str {
    v["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["rel"] == rel)
        .and_then(|l| l["href"].as_str())
        .unwrap_or_default()
}

fn is_in_progress(status: &str) -> bool {
    status.ends_with("_IN_PROGRESS")
}

/// The events of `rounds[i]` and the new events of the rounds after it, up to the next
/// top-level `Stack UPDATE started` of a later round.
fn settling_window<'a>(rounds: &'a [Value], i: usize, stack: &str) -> Vec<&'a Value> {
    let mut window: Vec<&Value> = events(&rounds[i]).iter().collect();
    let mut seen: BTreeSet<&str> = window.iter().filter_map(|e| e["id"].as_str()).collect();
    'rounds: for r in &rounds[i + 1..] {
        for e in events(r) {
            let id = e["id"].as_str().unwrap();
            if !seen.insert(id) {
                continue;
            }
            if e["resource_name"] == stack && e["resource_status"] == "UPDATE_IN_PROGRESS" {
                break 'rounds;
            }
            window.push(e);
        }
    }
    window
}

/// The (status, reason) a captured in-progress row settled to.
fn settled(rounds: &[Value], i: usize, stack: &str, row: &Value) -> (String, String) {
    let name = row["resource_name"].as_str().unwrap();
    let in_stack = link(row, "stack");
    let last = settling_window(rounds, i, stack)
        .into_iter()
        .rfind(|e| e["resource_name"] == name && link(e, "stack") == in_stack)
        .unwrap_or_else(|| panic!("no event settles {name} in {in_stack}"));
    let status = last["resource_status"].as_str().unwrap().to_owned();
    assert!(
        !is_in_progress(&status),
        "{name} is still {status} after round {i}"
    );
    (
        status,
        last["resource_status_reason"].as_str().unwrap().to_owned(),
    )
}

/// Replaces the captured member names by the simulator's.
fn rename(text: &str, names: &BTreeMap<String, String>) -> String {
    names
        .iter()
        .fold(text.to_owned(), |t, (theirs, ours)| t.replace(theirs, ours))
}

fn key(parent: Option<&str>, name: &str) -> (String, String) {
    (parent.unwrap_or_default().to_owned(), name.to_owned())
}

#[derive(Default)]
struct Counts {
    rounds: usize,
    rows: usize,
    settled_rows: usize,
    servers: usize,
}

async fn replay(file: &str, counts: &mut Counts) -> Option<()> {
    let text = read_vector(env!("CARGO_MANIFEST_DIR"), &format!("{DIR}/{file}.json"))?;
    let capture: Value = serde_json::from_str(&text).unwrap();
    let stack_name = capture["name"].as_str().unwrap();
    let rounds = capture["rounds"].as_array().unwrap();
    let sim = SimCloud::new(CloudFile::from_yaml("captured", CLOUD).unwrap(), 27);
    let mut id: Option<StackId> = None;
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut seen_events: BTreeSet<String> = BTreeSet::new();
    for (i, round) in rounds.iter().enumerate() {
        let label = round["label"].as_str().unwrap();
        let at = format!("{file} round {i} ({label})");
        let nfv: Value = serde_json::from_str(round["parameters_nfv"].as_str().unwrap()).unwrap();
        let params: Parameters = serde_json::from_value(json!({ "nfv": nfv })).unwrap();
        let updates = events(round).iter().any(|e| {
            !seen_events.contains(e["id"].as_str().unwrap())
                && e["resource_name"] == stack_name
                && e["resource_status"] == "UPDATE_IN_PROGRESS"
        });
        seen_events.extend(
            events(round)
                .iter()
                .map(|e| e["id"].as_str().unwrap().to_owned()),
        );
        match &id {
            None => {
                id = Some(
                    sim.create_stack(CreateStack::new(stack_name, bundle(file), params))
                        .await
                        .unwrap(),
                )
            }
            Some(id) if updates => sim
                .update_stack(UpdateStack::parameters(id.clone(), params))
                .await
                .unwrap(),
            Some(_) => {}
        }
        let id = id.clone().unwrap();
        let ours = sim
            .list_resources(ListResources::new(id.clone(), 3))
            .await
            .unwrap();
        let theirs = round["resources"]["resources"].as_array().unwrap();
        if i == 0 {
            // members by creation order on both sides
            let captured: BTreeSet<&str> = theirs
                .iter()
                .filter(|r| r["parent_resource"] == "VDU1_scale_group")
                .filter_map(|r| r["resource_name"].as_str())
                .collect();
            let mut first_created: Vec<&str> = Vec::new();
            for e in events(round) {
                let n = e["resource_name"].as_str().unwrap();
                if captured.contains(n) && !first_created.contains(&n) {
                    first_created.push(n);
                }
            }
            let sim_members: Vec<&str> = ours
                .iter()
                .filter(|r| r.parent_resource.as_deref() == Some("VDU1_scale_group"))
                .map(|r| r.resource_name.as_str())
                .collect();
            assert_eq!(first_created.len(), sim_members.len(), "{at}: members");
            for (t, o) in first_created.iter().zip(&sim_members) {
                names.insert((*t).to_owned(), (*o).to_owned());
            }
        }
        let map = |n: &str| names.get(n).cloned().unwrap_or_else(|| n.to_owned());

        // the stack
        let shown = sim.show_stack(&id).await.unwrap();
        assert_eq!(
            shown.stack_status.to_string(),
            round["stack_status"].as_str().unwrap(),
            "{at}: stack status"
        );
        assert_eq!(
            shown.stack_status_reason,
            rename(round["stack_status_reason"].as_str().unwrap(), &names),
            "{at}: stack reason"
        );

        // the listing
        assert_eq!(ours.len(), theirs.len(), "{at}: listing length {ours:#?}");
        let top = |rows: Vec<(Option<String>, String)>| -> Vec<String> {
            rows.into_iter()
                .filter(|(p, _)| p.is_none())
                .map(|(_, n)| n)
                .collect()
        };
        assert_eq!(
            top(ours
                .iter()
                .map(|r| (r.parent_resource.clone(), r.resource_name.clone()))
                .collect()),
            top(theirs
                .iter()
                .map(|r| (
                    r["parent_resource"].as_str().map(str::to_owned),
                    r["resource_name"].as_str().unwrap().to_owned()
                ))
                .collect()),
            "{at}: top-level listing order"
        );
        let by_key: BTreeMap<(String, String), &StackResource> = ours
            .iter()
            .map(|r| (key(r.parent_resource.as_deref(), &r.resource_name), r))
            .collect();
        assert_eq!(by_key.len(), ours.len(), "{at}: duplicate rows");
        for t in theirs {
            let name = t["resource_name"].as_str().unwrap();
            let parent = t["parent_resource"].as_str().map(&map);
            let k = key(parent.as_deref(), &map(name));
            let o = by_key
                .get(&k)
                .unwrap_or_else(|| panic!("{at}: {k:?} not listed: {ours:#?}"));
            let what = format!("{at}: {k:?}");
            assert_eq!(
                o.resource_type,
                t["resource_type"].as_str().unwrap(),
                "{what}"
            );
            let (status, reason) = match t["resource_status"].as_str().unwrap() {
                s if is_in_progress(s) => {
                    counts.settled_rows += 1;
                    settled(rounds, i, stack_name, t)
                }
                s => (
                    s.to_owned(),
                    t["resource_status_reason"].as_str().unwrap().to_owned(),
                ),
            };
            assert_eq!(o.resource_status.to_string(), status, "{what}: status");
            assert_eq!(
                o.resource_status_reason,
                rename(&reason, &names),
                "{what}: reason"
            );
            counts.rows += 1;

            // Nova: the server the capture names, as Nova reported it
            if t["resource_type"] != "OS::Nova::Server" {
                continue;
            }
            let pid = t["physical_resource_id"].as_str().unwrap();
            let Some(srv) = round["nova_servers"]["servers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["id"] == pid)
            else {
                // an in-progress row names the server resource, not a server yet
                assert!(
                    is_in_progress(t["resource_status"].as_str().unwrap()),
                    "{what}"
                );
                continue;
            };
            let info = sim
                .server(&o.physical_resource_id.as_str().into())
                .await
                .unwrap();
            assert_eq!(
                info.status,
                srv["status"].as_str().unwrap(),
                "{what}: server"
            );
            assert_eq!(
                info.zone.as_ref().map(|z| z.as_str()),
                srv["OS-EXT-AZ:availability_zone"].as_str(),
                "{what}: server zone"
            );
            assert_eq!(
                info.fault.as_ref().map(|f| f.message.as_str()),
                srv["fault"]["message"].as_str(),
                "{what}: server fault"
            );
            counts.servers += 1;
        }
        counts.rounds += 1;
    }
    Some(())
}

#[tokio::test]
async fn captured_heat_asg_and_server_rounds_replay_on_the_simulator() {
    let mut counts = Counts::default();
    for file in [
        "heat-asg-raw",
        "heat-asgbatch-raw",
        "heat-srv-raw-a",
        "heat-srv-raw-b",
    ] {
        if replay(file, &mut counts).await.is_none() {
            return;
        }
    }
    // guards: a changed vector cannot silently compare less
    assert_eq!(counts.rounds, 15, "rounds compared");
    assert_eq!(counts.settled_rows, 4, "in-progress rows compared settled");
    assert_eq!(counts.rows, 54, "rows compared");
    assert_eq!(counts.servers, 30, "servers compared");
}
