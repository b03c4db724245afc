//! The HOT templates the suite creates stacks from. Every server boots with
//! `networks: [{allocate_network: none}]`, so that a Nova without Neutron can run them.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::Fixture;
use crate::driver::{Parameters, TemplateBundle};

/// The file name of the nested template of [`nested_group`].
pub(crate) const VDU_FILE: &str = "vnfm-conformance-vdu.yaml";

/// One server, `server`, booted from the `flavor`, `image` and `zone` parameters, with a
/// `note` (string) and an `answer` (number) that only land in its metadata.
pub(crate) const ONE_SERVER: &str = r#"heat_template_version: 2021-04-16
description: vnfm conformance suite, one server
parameters:
  flavor: {type: string}
  image: {type: string}
  zone: {type: string}
  note: {type: string, default: ""}
  answer: {type: number, default: 0}
resources:
  server:
    type: OS::Nova::Server
    properties:
      flavor: {get_param: flavor}
      image: {get_param: image}
      availability_zone: {get_param: zone}
      networks: [{allocate_network: none}]
      metadata:
        note: {get_param: note}
outputs:
  server_id:
    value: {get_resource: server}
"#;

/// A ResourceGroup `group` of `count` servers (members `0`, `1`, ...).
pub(crate) const SERVER_GROUP: &str = r#"heat_template_version: 2021-04-16
description: vnfm conformance suite, a group of servers
parameters:
  flavor: {type: string}
  image: {type: string}
  zone: {type: string}
  note: {type: string, default: ""}
  count: {type: number, default: 1}
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: count}
      resource_def:
        type: OS::Nova::Server
        properties:
          flavor: {get_param: flavor}
          image: {get_param: image}
          availability_zone: {get_param: zone}
          networks: [{allocate_network: none}]
          metadata:
            note: {get_param: note}
"#;

/// A ResourceGroup `group` of two members, each a nested stack of [`VDU_FILE`] holding one
/// server `server`: three levels.
const NESTED_GROUP: &str = r#"heat_template_version: 2021-04-16
description: vnfm conformance suite, nested stacks
parameters:
  flavor: {type: string}
  image: {type: string}
  zone: {type: string}
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: vnfm-conformance-vdu.yaml
        properties:
          flavor: {get_param: flavor}
          image: {get_param: image}
          zone: {get_param: zone}
"#;

const VDU: &str = r#"heat_template_version: 2021-04-16
description: vnfm conformance suite, one server of a group
parameters:
  flavor: {type: string}
  image: {type: string}
  zone: {type: string}
resources:
  server:
    type: OS::Nova::Server
    properties:
      flavor: {get_param: flavor}
      image: {get_param: image}
      availability_zone: {get_param: zone}
      networks: [{allocate_network: none}]
"#;

/// A bundle of `template` without files.
pub(crate) fn bundle(template: &str) -> TemplateBundle {
    TemplateBundle {
        template: template.to_owned(),
        files: BTreeMap::new(),
    }
}

/// The bundle of the nested-stack template.
pub(crate) fn nested_group() -> TemplateBundle {
    TemplateBundle {
        template: NESTED_GROUP.to_owned(),
        files: BTreeMap::from([(VDU_FILE.to_owned(), VDU.to_owned())]),
    }
}

/// `flavor`, `image` and `zone` for the fixture, with `flavor` overridden when given.
pub(crate) fn boot_params(fx: &Fixture, flavor: Option<&str>) -> Parameters {
    let mut p = Parameters::new();
    p.insert(
        "flavor".into(),
        Value::from(flavor.unwrap_or(fx.flavor.as_str())),
    );
    p.insert("image".into(), Value::from(fx.image.as_str()));
    p.insert("zone".into(), Value::from(fx.zone.as_str()));
    p
}

/// Templates every Heat rejects before creating anything, with what is wrong in each.
pub(crate) fn invalid(fx: &Fixture, missing_flavor: &str) -> Vec<(&'static str, TemplateBundle)> {
    let unknown_type = r#"heat_template_version: 2021-04-16
resources:
  thing:
    type: Vnfm::Conformance::NoSuchType
"#;
    let dangling = json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "server": {
                "type": "OS::Nova::Server",
                "properties": {
                    "flavor": fx.flavor,
                    "image": fx.image,
                    "networks": [{"allocate_network": "none"}],
                    "metadata": {"peer": {"get_resource": "no_such_resource"}},
                }
            }
        }
    });
    let no_version = "resources:\n  a:\n    type: OS::Heat::None\n";
    let missing_flavor = json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "server": {
                "type": "OS::Nova::Server",
                "properties": {
                    "flavor": missing_flavor,
                    "image": fx.image,
                    "availability_zone": fx.zone,
                    "networks": [{"allocate_network": "none"}],
                }
            }
        }
    });
    vec![
        ("an unknown resource type", bundle(unknown_type)),
        (
            "a reference to a missing resource",
            bundle(&dangling.to_string()),
        ),
        ("no heat_template_version", bundle(no_version)),
        (
            "a flavor that does not exist",
            bundle(&missing_flavor.to_string()),
        ),
        (
            "a template that is not a mapping",
            bundle("- just\n- a list\n"),
        ),
    ]
}
