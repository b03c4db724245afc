//! Realisation of a deployment intent in the example packages' Heat input, then deployed on
//! the simulated cloud: HA puts the VDU's servers in one anti-affinity group (so on distinct
//! hosts), burstable isolation swaps the flavour in the parameters.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value as Json};
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{
    ComputeInventory, CreateStack, Parameters, ServerInfo, StackDriver, StackState, TemplateBundle,
};
use vnfm_core::id::{VduId, ZoneId};
use vnfm_core::intent::realise::{
    burst_maximum, realise, Change, FlavourAt, GroupPolicy, Isolation, Oversubscription,
    Realisation, RealiseError, RealiseRequest, Realised, RegionFlavour, RegionOffer,
};
use vnfm_core::lifecycle::userdata::{self, NfvValues, VnfcSlot};
use vnfm_core::package::fs;
use vnfm_core::sim::SimCloud;

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

/// The Heat input of an instantiation of `package`/`flavour` with `counts` VNFCs per VDU, all
/// in `zone`, as the lifecycle builds it.
fn heat_input(
    package: &str,
    flavour: &str,
    counts: &[(&str, u32)],
    flavor: &str,
    zone: &str,
) -> (TemplateBundle, Parameters) {
    let pkg = fs::load(&examples().join("packages").join(package)).unwrap();
    let base = pkg.base_hot(flavour).unwrap().clone();
    let vdus: Vec<VduId> = counts.iter().map(|(v, _)| VduId::from(*v)).collect();
    let slots: Vec<VnfcSlot> = counts
        .iter()
        .flat_map(|(v, n)| (0..*n).map(move |i| VnfcSlot::new(*v, i)))
        .collect();
    let mut values = NfvValues::default();
    for (v, _) in counts {
        values.flavors.insert((*v).into(), flavor.into());
        for image in [v.to_string(), format!("{v}-BootVolume")] {
            values.images.insert(image, "cirros".into());
        }
        values.zones.insert((*v).into(), ZoneId::from(zone));
    }
    for s in &slots {
        values.zones.insert(s.name(), ZoneId::from(zone));
    }
    let input = userdata::build(package, &base.template, &vdus, &slots, &values).unwrap();
    let mut params = Parameters::new();
    params.insert("nfv".into(), input.nfv);
    (
        TemplateBundle {
            template: input.template,
            files: base.files,
        },
        params,
    )
}

fn region(hosts: u32) -> RegionOffer {
    RegionOffer {
        hosts,
        flavours: vec![
            RegionFlavour::new("m1.small", 1, 2048, 20).with_burstable(50, "m1.small.b50"),
            RegionFlavour {
                name: "m1.xlarge".into(),
                vcpus: 16,
                memory_mb: 32 * 1024,
                disk_gb: 160,
                oversubscribed: [
                    (
                        25,
                        Oversubscription {
                            flavour: "m1.xlarge.b25".into(),
                            max_vcpus: 20,
                            max_memory_mb: 40 * 1024,
                        },
                    ),
                    (
                        100,
                        Oversubscription {
                            flavour: "m1.xlarge.b100".into(),
                            max_vcpus: 32,
                            max_memory_mb: 64 * 1024,
                        },
                    ),
                ]
                .into(),
            },
        ],
    }
}

fn request(vdus: Vec<Realisation>, hosts: u32, best_effort: bool) -> RealiseRequest {
    RealiseRequest {
        vdus,
        region: region(hosts),
        best_effort,
    }
}

fn yaml(text: &str) -> serde_yaml::Value {
    serde_yaml::from_str(text).unwrap()
}

fn at<'v>(v: &'v serde_yaml::Value, path: &[&str]) -> &'v serde_yaml::Value {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .unwrap_or_else(|| panic!("no {path:?}"))
}

fn get_resource(v: &serde_yaml::Value) -> Option<&str> {
    v.get("get_resource").and_then(|r| r.as_str())
}

/// The server groups of the main template, by resource name.
fn groups(t: &serde_yaml::Value) -> Vec<(String, String)> {
    t.get("resources")
        .and_then(|r| r.as_mapping())
        .unwrap()
        .iter()
        .filter(|(_, d)| d.get("type").and_then(|t| t.as_str()) == Some("OS::Nova::ServerGroup"))
        .map(|(k, d)| {
            (
                k.as_str().unwrap().to_owned(),
                at(d, &["properties", "policies"])[0]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

fn demo_sim() -> SimCloud {
    SimCloud::new(
        CloudFile::load(examples().join("clouds/demo.yaml")).unwrap(),
        7,
    )
}

/// Creates the realised stack and returns its final status and the servers whose name starts
/// with `prefix`.
async fn deploy(sim: &SimCloud, out: &Realised, prefix: &str) -> (bool, String, Vec<ServerInfo>) {
    let id = sim
        .create_stack(CreateStack::new(
            "vnf",
            out.template.clone(),
            out.parameters.clone(),
        ))
        .await
        .unwrap();
    let st = sim.show_stack(&id).await.unwrap();
    let mut servers = Vec::new();
    for sid in sim.server_ids() {
        let s = sim.server(&sid).await.unwrap();
        if s.name.starts_with(prefix) {
            servers.push(s);
        }
    }
    (
        st.stack_status.state == StackState::Complete,
        st.stack_status_reason,
        servers,
    )
}

fn distinct_hosts(servers: &[ServerInfo]) -> usize {
    servers
        .iter()
        .filter_map(|s| s.host.clone())
        .collect::<BTreeSet<_>>()
        .len()
}

#[tokio::test]
async fn ha_on_nested_servers_adds_one_group_and_spreads_them_on_hosts() {
    let (b, p) = heat_input(
        "os-vnf",
        "anti",
        &[("VDU1", 2), ("VDU2", 1)],
        "m1.small",
        "AZ-3",
    );
    let out = realise(
        "os.yaml",
        &b,
        &p,
        &request(vec![Realisation::new("VDU1").with_ha()], 2, false),
    )
    .unwrap();
    let t = yaml(&out.template.template);
    assert_eq!(
        groups(&t),
        vec![("VDU1_anti_affinity".to_owned(), "anti-affinity".to_owned())]
    );
    for r in ["VDU1-0", "VDU1-1"] {
        let passed = at(&t, &["resources", r, "properties", "server_group"]);
        assert_eq!(get_resource(passed), Some("VDU1_anti_affinity"));
    }
    assert!(at(&t, &["resources", "VDU2-0", "properties"])
        .get("server_group")
        .is_none());
    // the nested template reads the group from a new parameter; its alias key changed too
    for key in ["VDU1.yaml", "nested/VDU1.yaml"] {
        let n = yaml(&out.template.files[key]);
        assert_eq!(
            at(
                &n,
                &[
                    "resources",
                    "VDU1",
                    "properties",
                    "scheduler_hints",
                    "group",
                    "get_param"
                ]
            )
            .as_str(),
            Some("server_group")
        );
        assert_eq!(
            at(&n, &["parameters", "server_group", "type"]).as_str(),
            Some("string")
        );
    }
    assert_eq!(out.template.files["VDU2.yaml"], b.files["VDU2.yaml"]);
    assert!(out.diff.contains("--- a/os.yaml"), "{}", out.diff);
    assert!(out.diff.contains("--- a/VDU1.yaml"), "{}", out.diff);
    assert!(out.diff.contains("+      server_group:"), "{}", out.diff);
    assert!(!out.diff.contains("--- a/VDU2.yaml"));

    let sim = demo_sim();
    let (ok, reason, servers) = deploy(&sim, &out, "VDU1").await;
    assert!(ok, "{reason}");
    assert_eq!(servers.len(), 2);
    assert_eq!(distinct_hosts(&servers), 2);
    assert!(servers.iter().all(|s| s.server_groups.len() == 1));
}

#[tokio::test]
async fn ha_under_an_autoscaling_group_refused_softened_or_spread() {
    let (b, p) = heat_input(
        "asg-vnf",
        "default",
        &[("VDU1", 2), ("VDU2", 1)],
        "m1.small",
        "AZ-3",
    );
    let ha = || vec![Realisation::new("VDU1").with_ha()];
    // worker_group's max_size is 4: two hosts cannot take four instances apart
    let e = realise("asg.yaml", &b, &p, &request(ha(), 2, false)).unwrap_err();
    assert!(
        matches!(
            e,
            RealiseError::TooFewHosts {
                hosts: 2,
                max_instances: 4,
                ..
            }
        ),
        "{e}"
    );
    let soft = realise("asg.yaml", &b, &p, &request(ha(), 2, true)).unwrap();
    assert!(soft.is_degraded());
    assert_eq!(
        groups(&yaml(&soft.template.template)),
        vec![(
            "VDU1_anti_affinity".to_owned(),
            GroupPolicy::SoftAntiAffinity.to_string()
        )]
    );
    assert!(soft.changes.contains(&Change::AntiAffinitySoftened {
        vdu: "VDU1".into(),
        hosts: 2,
        max_instances: 4
    }));

    let out = realise("asg.yaml", &b, &p, &request(ha(), 4, false)).unwrap();
    let t = yaml(&out.template.template);
    assert_eq!(
        groups(&t),
        vec![("VDU1_anti_affinity".to_owned(), "anti-affinity".to_owned())]
    );
    let member = at(
        &t,
        &[
            "resources",
            "worker_group",
            "properties",
            "resource",
            "properties",
        ],
    );
    assert_eq!(
        get_resource(&member["server_group"]),
        Some("VDU1_anti_affinity")
    );
    let worker = yaml(&out.template.files["worker.yaml"]);
    assert_eq!(
        at(
            &worker,
            &[
                "resources",
                "VDU1",
                "properties",
                "scheduler_hints",
                "group",
                "get_param"
            ]
        )
        .as_str(),
        Some("server_group")
    );

    let sim = demo_sim();
    let (ok, reason, servers) = deploy(&sim, &out, "worker").await;
    assert!(ok, "{reason}");
    assert_eq!(servers.len(), 2);
    assert_eq!(distinct_hosts(&servers), 2);

    // the simulator enforces the group as Nova does: a third member in a two-host zone fails
    let (b3, p3) = heat_input(
        "asg-vnf",
        "default",
        &[("VDU1", 3), ("VDU2", 1)],
        "m1.small",
        "AZ-3",
    );
    let out3 = realise("asg.yaml", &b3, &p3, &request(ha(), 4, false)).unwrap();
    let (ok, reason, _) = deploy(&demo_sim(), &out3, "worker").await;
    assert!(!ok);
    assert!(
        reason.contains("No valid host was found. There are not enough hosts available."),
        "{reason}"
    );
    // soft-anti-affinity lets the third one share a host
    let soft3 = realise("asg.yaml", &b3, &p3, &request(ha(), 2, true)).unwrap();
    let (ok, reason, servers) = deploy(&demo_sim(), &soft3, "worker").await;
    assert!(ok, "{reason}");
    assert_eq!(servers.len(), 3);
    assert_eq!(distinct_hosts(&servers), 2);
}

#[tokio::test]
async fn ha_under_a_resource_group_with_a_nested_template() {
    let top = "
heat_template_version: 2018-08-31
resources:
  VDU1:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: member.yaml
        properties: {flavor: m1.small, zone: AZ-2}
";
    let member = "
heat_template_version: 2018-08-31
parameters:
  flavor: {type: string}
  zone: {type: string}
resources:
  VDU1:
    type: OS::Nova::Server
    properties: {name: rg-vdu1, flavor: {get_param: flavor}, image: cirros, availability_zone: {get_param: zone}}
";
    let b = TemplateBundle {
        template: top.into(),
        files: [("member.yaml".to_owned(), member.to_owned())].into(),
    };
    let out = realise(
        "rg.yaml",
        &b,
        &Parameters::new(),
        &request(vec![Realisation::new("VDU1").with_ha()], 2, false),
    )
    .unwrap();
    let t = yaml(&out.template.template);
    assert_eq!(groups(&t).len(), 1);
    let def = at(
        &t,
        &[
            "resources",
            "VDU1",
            "properties",
            "resource_def",
            "properties",
        ],
    );
    assert_eq!(
        get_resource(&def["server_group"]),
        Some("VDU1_anti_affinity")
    );
    let (ok, reason, servers) = deploy(&demo_sim(), &out, "rg-vdu1").await;
    assert!(ok, "{reason}");
    assert_eq!(servers.len(), 2);
    assert_eq!(distinct_hosts(&servers), 2);
}

#[tokio::test]
async fn demo_vnf_reuses_its_anti_affinity_group() {
    let (b, p) = heat_input(
        "demo-vnf",
        "default",
        &[("VDU1", 2), ("VDU2", 1)],
        "m1.small",
        "AZ-3",
    );
    let out = realise(
        "demo.yaml",
        &b,
        &p,
        &request(vec![Realisation::new("VDU1").with_ha()], 2, false),
    )
    .unwrap();
    assert_eq!(
        out.changes,
        vec![Change::ServerGroupReused {
            vdu: "VDU1".into(),
            resource: "VDU1_host_spread".into(),
            policy: GroupPolicy::AntiAffinity
        }]
    );
    assert_eq!(out.template, b);
    assert!(out.diff.is_empty());
    let (ok, reason, servers) = deploy(&demo_sim(), &out, "VDU1").await;
    assert!(ok, "{reason}");
    assert_eq!(distinct_hosts(&servers), 2);

    // VDU2's nested template takes its hints as a json parameter: the group is passed in it
    let out = realise(
        "demo.yaml",
        &b,
        &p,
        &request(vec![Realisation::new("VDU2").with_ha()], 2, false),
    )
    .unwrap();
    let t = yaml(&out.template.template);
    let hints = at(
        &t,
        &["resources", "VDU2-0", "properties", "scheduler_hints"],
    );
    assert_eq!(get_resource(&hints["group"]), Some("VDU2_anti_affinity"));
    assert_eq!(groups(&t).len(), 2);
    assert_eq!(out.template.files, b.files);
    let (ok, reason, servers) = deploy(&demo_sim(), &out, "VDU2").await;
    assert!(ok, "{reason}");
    assert_eq!(servers[0].server_groups.len(), 1);
}

#[test]
fn burstable_25_percent_swaps_16_32_for_20_40_in_the_parameters() {
    let r = region(2);
    let x = &r.flavours[1];
    let v = &x.oversubscribed[&25];
    assert_eq!((x.vcpus, x.memory_mb / 1024), (16, 32));
    assert_eq!((v.max_vcpus, v.max_memory_mb / 1024), (20, 40));
    assert_eq!(burst_maximum(x.vcpus, 25), v.max_vcpus);

    let (b, p) = heat_input(
        "demo-vnf",
        "default",
        &[("VDU1", 2), ("VDU2", 1)],
        "m1.xlarge",
        "AZ-3",
    );
    let burst = Isolation::Burstable { percent: 25 };
    let out = realise(
        "demo.yaml",
        &b,
        &p,
        &request(
            vec![Realisation::new("VDU1").with_isolation(burst)],
            2,
            false,
        ),
    )
    .unwrap();
    // the flavour is read with get_param: the template is kept, the parameter changes
    assert_eq!(out.template, b);
    assert!(out.diff.is_empty());
    let nfv = &out.parameters["nfv"]["VDU"];
    assert_eq!(nfv["VDU1-0"]["computeFlavourId"], json!("m1.xlarge.b25"));
    assert_eq!(nfv["VDU1-1"]["computeFlavourId"], json!("m1.xlarge.b25"));
    assert_eq!(nfv["VDU2-0"]["computeFlavourId"], json!("m1.xlarge"));
    assert_eq!(
        out.changes[0],
        Change::FlavourChanged {
            vdu: "VDU1".into(),
            at: FlavourAt::Parameter {
                path: "nfv.VDU.VDU1-0.computeFlavourId".into()
            },
            from: "m1.xlarge".into(),
            to: "m1.xlarge.b25".into(),
            isolation: burst,
        }
    );
    assert_eq!(
        out.changes[0].to_string(),
        "VDU1: parameters: nfv.VDU.VDU1-0.computeFlavourId: flavour m1.xlarge -> m1.xlarge.b25 (burstable 25 %)"
    );

    // guaranteed switches back
    let back = realise(
        "demo.yaml",
        &b,
        &out.parameters,
        &request(vec![Realisation::new("VDU1")], 2, false),
    )
    .unwrap();
    assert_eq!(back.parameters, p);
}

#[test]
fn unsupported_percent_lists_the_allowed_ones() {
    let (b, p) = heat_input(
        "demo-vnf",
        "default",
        &[("VDU1", 1), ("VDU2", 1)],
        "m1.xlarge",
        "AZ-3",
    );
    let r = Realisation::new("VDU1").with_isolation(Isolation::Burstable { percent: 30 });
    let e = realise("demo.yaml", &b, &p, &request(vec![r], 2, false)).unwrap_err();
    assert!(
        matches!(&e, RealiseError::UnsupportedPercent { allowed, .. } if allowed == &[25, 100])
    );
    assert_eq!(
        e.to_string(),
        "VDU VDU1: flavour m1.xlarge has no burstable variant at 30 % (allowed: 25, 100)"
    );
}

#[test]
fn onap_oof_directives_shape_flavour_param_changed_in_parameters() {
    // multicloud infra_workload_oof_directives: the server reads `flavor` with get_param; the
    // swap goes to the stack parameters, the template stays as it is.
    let v: Json = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/vectors/onap/multicloud/infra_workload_oof_directives.extracted.json"
        ))
        .unwrap_or_else(|_| {
            json!({"request_body": {"template_data": {
                "parameters": {"flavor1": "m1.heat"},
                "template": {"heat_template_version": "2013-05-23",
                    "parameters": {"flavor": {"default": "m1.tiny", "type": "string"}},
                    "resources": {"hello_world": {"type": "OS::Nova::Server",
                        "properties": {"flavor": {"get_param": "flavor"}}}}}}}})
            .to_string()
        }),
    )
    .unwrap();
    let data = &v["request_body"]["template_data"];
    let b = TemplateBundle {
        template: serde_yaml::to_string(&data["template"]).unwrap(),
        files: Default::default(),
    };
    let params: Parameters = data["parameters"].as_object().unwrap().clone();
    let region = RegionOffer {
        hosts: 1,
        flavours: vec![RegionFlavour::new("m1.tiny", 1, 512, 1).with_burstable(100, "m1.tiny.b100")],
    };
    let out = realise(
        "template",
        &b,
        &params,
        &RealiseRequest {
            vdus: vec![Realisation::new("hello_world")
                .with_isolation(Isolation::Burstable { percent: 100 })],
            region,
            best_effort: false,
        },
    )
    .unwrap();
    assert_eq!(out.template, b);
    // the parameter known only by its default gets a value; the others are kept
    assert_eq!(out.parameters["flavor"], json!("m1.tiny.b100"));
    assert_eq!(out.parameters["flavor1"], json!("m1.heat"));
}
