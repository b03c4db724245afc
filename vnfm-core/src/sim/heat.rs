//! The Heat part of the simulator: stacks, resources, nested stacks, create and update.
//!
//! # HOT subset
//! `heat_template_version`, `parameters` (types `string`, `number`, `json`,
//! `comma_delimited_list`, `boolean`; defaults), `resources`, `outputs`, `conditions`;
//! intrinsic functions `get_param` (with paths into `json` parameters and the pseudo parameters
//! `OS::stack_name`, `OS::stack_id`, `OS::project_id`), `get_resource`, `get_attr`,
//! `get_file`, `list_join`, `str_replace`, `str_split`, `map_merge`, `list_concat`, `equals`,
//! `not`, `and`, `or`, `if`, `contains`. Other Heat functions are rejected.
//!
//! Resource types: `OS::Nova::Server` (flavor, image, availability_zone,
//! scheduler_hints.group, name), `OS::Nova::ServerGroup` (`policies` or `policy`),
//! `OS::Heat::ResourceGroup` (count, resource_def with `%index%`),
//! `OS::Heat::AutoScalingGroup` (desired_capacity, min_size, max_size, resource,
//! rolling_updates), `OS::Heat::TestResource` (Heat's properties; its waits and `fail`, see
//! the `test_resource` module), a key of the bundle's
//! `files` (a nested stack whose parameters are the resource's properties); every other
//! `OS::*` / `AWS::*` type is tracked without capacity. Anything else is rejected.
//!
//! # Validation
//! Before creating or updating anything the template is validated as Heat does (HTTP 400 →
//! [`DriverError::Invalid`], nothing created): structure, types, references, parameters, and
//! for the top-level template the `flavor` / `image` of servers (`Property error:
//! resources.VDU1.properties.flavor: Error validating value 'm1.huge': The Flavor ID (m1.huge)
//! could not be found.`). Nested templates are validated strictly only when their nested stack
//! is created or updated (Heat validates nested stacks non-strictly with their parent); a bad
//! flavor there fails the parent resource with
//! `StackValidationFailed: resources.VDU1-0: Property error: resources.VDU1.properties.flavor: ...`.
//! That text is the simulator's choice, built from Heat's `StackValidationFailed` and
//! `FlavorMissing` messages; no capture of it exists.
//!
//! # Build order and reported failure
//! Resources are built in dependency order; resources independent of each other are built in
//! reverse template order (the captured Heat 27 / Nova 34 run built `vdus[1]` before
//! `vdus[0]`, so with one host `[1]` got it and `[0]` failed). Every resource whose
//! dependencies succeeded is attempted. A stack that failed reports the first failed resource
//! in template order (in the captured update both `[0]` and `[2]` failed and `[0]` was
//! reported). Reasons are Heat's: `Resource CREATE failed: ResourceInError:
//! resources.vdus.resources[0]: Went to status ERROR due to "Message: ..., Code: 500"` on
//! create; a nested stack updated in place reports `resources.vdus: <nested stack reason>`.
//!
//! # Update (PATCH)
//! Parameters are merged. Servers that failed, were marked unhealthy, or whose flavor, image,
//! availability zone or server group changed are replaced (new id); others are kept. Nested
//! stacks are always updated in place (Heat's `StackResource`), unless marked unhealthy.
//! A ResourceGroup shrinks by its highest indexes. Resources no longer in the template are
//! deleted.
//!
//! Replacement follows Heat's convergence engine (captured `heat-srv-raw-a`, `-b`): the new
//! server is built while the old row and its server stay (a healthy original then reads
//! `UPDATE_COMPLETE` / `The Resource VDU1 requires replacement.`); the old rows go when a
//! replacement succeeds. At the next update a failed replacement is dropped in favour of a
//! kept original that did not fail, which stays as it is when it matches the new definition.
//! A resource whose rows were all replaced moves to the end of its stack's listing (Heat lists
//! rows in id order).
//!
//! # Failure texts of nested stacks
//! A resource backed by a nested stack (template resource, group) fails with Heat's
//! `ResourceFailure` of the nested stack's reason: when that reason holds `Resource <ACTION>
//! failed: ` for the resource's own action it is split on `:` and re-glued as
//! `<error>: resources.<name>.<path>: <message>`, else kept whole behind
//! `resources.<name>: `. That gives the captured create form
//! `ResourceInError: resources.VDU1_scale_group.resources.3anlrib6cpvf.resources.VDU1: ...`
//! and the captured autoscaling-group update form
//! `resources.3anlrib6cpvf: resources.VDU1_scale_group.Resource CREATE failed: ResourceInError: resources.VDU1: ...`.
//!
//! # AutoScalingGroup (Heat 27 `autoscaling_group.py` / `instance_group.py`)
//! - Members are named by Heat's `short_id.generate_id()` (base32 of a uuid's 60 random
//!   bits, lowercased: `3anlrib6cpvf`), drawn from the seeded generator, and built oldest
//!   first.
//! - Each member keeps its own definition in the group's nested template. An update whose
//!   `resource` property differs from the one last applied with success is a rolling update:
//!   batches from Heat's `rolling_update.next_batch` (`rolling_updates.max_batch_size`
//!   default 1, `min_in_service` default 0 — kept in service by growing the group with new
//!   members during a batch; `pause_time` is not waited); each batch gives the new definition
//!   to as many members as it may in `grouputils.get_members` order (failed members first,
//!   then the oldest); the others keep their old definition, and a failed one is rebuilt with
//!   it (captured `update@az1`: one member came up in az1, the other failed again in az3).
//!   The first failed batch ends the update; the definition is remembered as applied only on
//!   success, so the same update again rolls on.
//! - Then the group is resized to `desired_capacity` (bounded by `min_size` / `max_size`):
//!   failed members are removed first, then the oldest.
//! - A group's nested stack reports its first failed member in get_members order.
//! - In-progress snapshots: Heat fails a stack the moment one member fails, so a listing
//!   taken right then may still show a sibling `*_IN_PROGRESS` (three of the seven failed
//!   captured rounds do, others of the same situations show it settled: timing). The
//!   simulator settles synchronously and never shows them; callers poll `list_resources`
//!   until nothing is in progress in both cases.
//!
//! # Delete
//! `delete_stack` sets `DELETE_IN_PROGRESS` (`Stack DELETE started`); the stack and its
//! servers (and their capacity) stay until the delete completes: at the second `show_stack`
//! of the stack, or as soon as the caller does anything else (another stack, zones, servers),
//! the time a delete takes having passed. With a planned [`StackDeleteFault`] only the shows
//! of the stack count ([`StackDeleteFault::Slow`]: after N of them). A completed delete is
//! [`DriverError::NotFound`], the `StackDriver` contract (real Heat keeps showing a deleted
//! stack as `DELETE_COMPLETE` by id, `show_deleted=True` in its `_get_stack`; the OpenStack
//! driver turns that into `NotFound`). [`StackDeleteFault::Failed`] ends a delete
//! `DELETE_FAILED`; the stack stays until deleted again. An update of a stack being deleted
//! (or whose delete failed) is refused as Heat refuses it: `Updating a stack when it is
//! deleting is not supported.`
//!
//! # Where the texts come from
//! Captured (Heat 27.0.1 / Nova 34, `shared/vectors/openstack/heat/`): the create and update
//! failure texts of servers, ResourceGroups, template resources and AutoScalingGroups
//! (`captured-heat-27.0.1`, `captured-heat-27.0.1-asg`; replayed by
//! `tests/heat_asg_replay.rs`), `state changed`, `Stack <ACTION> completed successfully`,
//! `The Resource VDU1 requires replacement.`. Taken from Heat's code, not captured:
//! `Stack DELETE started`, the `DELETE_FAILED` texts (`Server <name> delete failed: (500)
//! <message>` from Heat's Nova client plugin), `Updating a stack when it is deleting is not
//! supported.`, and the `StackValidationFailed` text of a nested flavor (see Validation).

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::failure::{
    format_path, not_found, resource_failure, status, Failure, StackDeleteFault, DRIVER,
};
use super::hot::{self, Scope, Template, PSEUDO_PARAMS};
use super::nova::Boot;
use super::state::{Busy, Deleting, GroupRec, ResKind, ResRec, StackRec, State};
use super::test_resource::{self as test, Wait};
use crate::driver::{
    CreateStack, DriverError, MarkUnhealthy, Stack, StackAction, StackOutput, StackResource,
    StackState, StackStatus, UpdateStack,
};
use crate::id::StackId;

const SERVER_POLICIES: &[&str] = &[
    "anti-affinity",
    "affinity",
    "soft-anti-affinity",
    "soft-affinity",
];
const MAX_NESTING: usize = 10;

fn invalid(message: impl Into<String>) -> DriverError {
    DriverError::Invalid {
        driver: DRIVER,
        message: message.into(),
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(a) => text(a.first()),
        _ => None,
    }
}

fn number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// What an action on a resource left: the row's kind, physical id, action and failure.
struct Converged {
    kind: ResKind,
    physical_id: String,
    action: StackAction,
    failure: Option<Failure>,
}

/// The scope of a stack for intrinsic functions.
struct Ctx<'a> {
    st: &'a State,
    stack: &'a StackRec,
    params: Map<String, Value>,
    conditions: Map<String, Value>,
}

impl Scope for Ctx<'_> {
    fn param(&self, name: &str) -> Option<Value> {
        match name {
            "OS::stack_name" => Some(Value::from(self.stack.name.as_str())),
            "OS::stack_id" => Some(Value::from(self.stack.id.as_str())),
            "OS::project_id" => Some(Value::from(self.st.project_id.as_str())),
            _ => self.params.get(name).cloned(),
        }
    }
    fn resource_ref(&self, name: &str) -> Value {
        self.stack
            .resources
            .iter()
            .find(|r| r.name == name && !r.physical_id.is_empty())
            .map_or(Value::Null, |r| Value::from(r.physical_id.as_str()))
    }
    fn resource_attr(&self, name: &str, attr: &str, path: &[Value]) -> Value {
        match self.stack.resources.iter().find(|r| r.name == name) {
            Some(r) => self.st.attr_of(r, attr, path),
            None => Value::Null,
        }
    }
    fn file(&self, name: &str) -> Option<String> {
        self.stack.files.get(name).cloned()
    }
    fn condition(&self, name: &str) -> Option<bool> {
        let c = self.conditions.get(name)?;
        hot::eval_condition(c, self).ok()
    }
}

/// The scope used to validate values before anything exists: resources evaluate to null.
struct ValidationScope<'a> {
    params: &'a Map<String, Value>,
    files: &'a BTreeMap<String, String>,
}

impl Scope for ValidationScope<'_> {
    fn param(&self, name: &str) -> Option<Value> {
        if PSEUDO_PARAMS.contains(&name) {
            return Some(Value::from(""));
        }
        self.params.get(name).cloned()
    }
    fn resource_ref(&self, _name: &str) -> Value {
        Value::Null
    }
    fn resource_attr(&self, _name: &str, _attr: &str, _path: &[Value]) -> Value {
        Value::Null
    }
    fn file(&self, name: &str) -> Option<String> {
        self.files.get(name).cloned()
    }
    fn condition(&self, _name: &str) -> Option<bool> {
        Some(true)
    }
}

impl State {
    fn ctx<'a>(&'a self, stack: &'a StackRec) -> Ctx<'a> {
        let t = Template::parse(&stack.template).ok();
        let params = t
            .as_ref()
            .and_then(|t| t.resolve_params(&stack.given).ok())
            .unwrap_or_default();
        Ctx {
            st: self,
            stack,
            params,
            conditions: t.map(|t| t.conditions).unwrap_or_default(),
        }
    }

    /// `get_attr` of a resource.
    fn attr_of(&self, r: &ResRec, attr: &str, path: &[Value]) -> Value {
        match &r.kind {
            ResKind::Server(id) => {
                let show = self.server_show(id);
                let v = match attr {
                    "show" => show,
                    "host" => hot::walk(&show, &[Value::from("OS-EXT-SRV-ATTR:host")]),
                    "availability_zone" => {
                        hot::walk(&show, &[Value::from("OS-EXT-AZ:availability_zone")])
                    }
                    other => hot::walk(&show, &[Value::from(other)]),
                };
                hot::walk(&v, path)
            }
            ResKind::Nested(sid) => {
                let Some(nested) = self.stacks.get(sid) else {
                    return Value::Null;
                };
                let members = || -> Vec<&ResRec> { nested.resources.iter().collect() };
                let is_group =
                    r.rtype == "OS::Heat::ResourceGroup" || r.rtype == "OS::Heat::AutoScalingGroup";
                if is_group {
                    match attr {
                        "refs" => {
                            let v = Value::Array(
                                members()
                                    .iter()
                                    .map(|m| Value::from(m.physical_id.as_str()))
                                    .collect(),
                            );
                            hot::walk(&v, path)
                        }
                        "refs_map" => {
                            let v = Value::Object(
                                members()
                                    .iter()
                                    .map(|m| (m.name.clone(), Value::from(m.physical_id.as_str())))
                                    .collect(),
                            );
                            hot::walk(&v, path)
                        }
                        "current_size" => Value::from(members().len()),
                        a if a.starts_with("resource.") => {
                            let rest = &a["resource.".len()..];
                            let (member, sub) = match rest.split_once('.') {
                                Some((m, s)) => (m, Some(s)),
                                None => (rest, None),
                            };
                            let Some(m) = nested.resources.iter().find(|x| x.name == member) else {
                                return Value::Null;
                            };
                            match sub {
                                Some(s) => self.attr_of(m, s, path),
                                None => {
                                    let a = path.first().map(|p| match p {
                                        Value::String(s) => s.clone(),
                                        other => other.to_string(),
                                    });
                                    self.attr_of(
                                        m,
                                        &a.unwrap_or_default(),
                                        path.get(1..).unwrap_or_default(),
                                    )
                                }
                            }
                        }
                        other => Value::Array(
                            members()
                                .iter()
                                .map(|m| self.attr_of(m, other, path))
                                .collect(),
                        ),
                    }
                } else {
                    let ctx = self.ctx(nested);
                    let t = Template::parse(&nested.template).ok();
                    let out = t
                        .and_then(|t| t.outputs.into_iter().find(|(k, _)| k == attr))
                        .and_then(|(_, v)| hot::eval(&v, &ctx).ok())
                        .unwrap_or(Value::Null);
                    hot::walk(&out, path)
                }
            }
            ResKind::Group(id) => match attr {
                "show" => {
                    let g = self.groups.get(id);
                    let v = serde_json::json!({
                        "id": id,
                        "policy": g.map(|g| g.policy.clone()),
                        "members": g.map(|g| g.members.iter().map(|m| m.as_str().to_owned()).collect::<Vec<_>>()),
                    });
                    hot::walk(&v, path)
                }
                _ => Value::Null,
            },
            ResKind::Plain if r.rtype == test::TYPE && attr == "output" => {
                if r.physical_id.is_empty() {
                    Value::Null
                } else {
                    hot::walk(&test::output(&r.props), path)
                }
            }
            ResKind::Plain => Value::Null,
        }
    }

    // -----------------------------------------------------------------------------------
    // Validation
    // -----------------------------------------------------------------------------------

    /// Validates a template as Heat does before accepting it. `given` are the parameter
    /// values (`None` for a nested template validated with its parent: its parameters come
    /// from the parent's properties). `strict` checks flavors and images against the cloud.
    fn validate(
        &self,
        tv: &Value,
        files: &BTreeMap<String, String>,
        given: Option<&Map<String, Value>>,
        strict: bool,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_NESTING {
            return Err(format!("Recursion depth exceeds {MAX_NESTING}."));
        }
        let t = Template::parse(tv)?;
        let params = match given {
            Some(g) => Some(t.resolve_params(g)?),
            None => None,
        };
        let names = t.names();
        for (k, c) in &t.conditions {
            hot::check(
                c,
                &format!("conditions.{k}"),
                &names,
                &t.params,
                &t.conditions,
            )?;
        }
        for r in &t.resources {
            let at = format!("resources.{}.properties", r.name);
            hot::check(&r.properties, &at, &names, &t.params, &t.conditions)?;
            for d in &r.depends_on {
                if !names.contains(d) {
                    return Err(format!(
                        "The specified reference \"{d}\" (in {}) is incorrect.",
                        r.name
                    ));
                }
            }
            if let Some(Value::String(c)) = &r.condition {
                if !t.conditions.contains_key(c) {
                    return Err(format!(
                        "Invalid condition \"{c}\" (in resources.{})",
                        r.name
                    ));
                }
            }
            self.validate_type(&r.name, &r.rtype, &r.properties, files, depth)?;
        }
        for (k, v) in &t.outputs {
            hot::check(v, &format!("outputs.{k}"), &names, &t.params, &t.conditions)?;
        }
        // dependency cycles
        let mut done: Vec<&str> = Vec::new();
        while done.len() < t.resources.len() {
            let next = t.resources.iter().find(|r| {
                !done.contains(&r.name.as_str())
                    && r.deps(&names).iter().all(|d| done.contains(&d.as_str()))
            });
            match next {
                Some(r) => done.push(&r.name),
                None => {
                    let left: Vec<&str> = t
                        .resources
                        .iter()
                        .map(|r| r.name.as_str())
                        .filter(|n| !done.contains(n))
                        .collect();
                    return Err(format!("Circular Dependency Found: {}", left.join(", ")));
                }
            }
        }
        if let (true, Some(params)) = (strict, params.as_ref()) {
            let scope = ValidationScope { params, files };
            for r in &t.resources {
                self.validate_values(&r.name, &r.rtype, &r.properties, &scope)?;
            }
        }
        Ok(())
    }

    fn validate_type(
        &self,
        name: &str,
        rtype: &str,
        props: &Value,
        files: &BTreeMap<String, String>,
        depth: usize,
    ) -> Result<(), String> {
        if let Some(text) = files.get(rtype) {
            let nested =
                hot::parse_text(text).map_err(|e| format!("resources.{name}<{rtype}>: {e}"))?;
            let t =
                Template::parse(&nested).map_err(|e| format!("resources.{name}<{rtype}>: {e}"))?;
            let keys: Vec<&String> = props
                .as_object()
                .map(|m| m.keys().collect())
                .unwrap_or_default();
            for k in &keys {
                if !t.params.iter().any(|p| &p.name == *k) {
                    return Err(format!(
                        "Property error: resources.{name}.properties: Unknown Property {k}"
                    ));
                }
            }
            for p in &t.params {
                if p.default.is_none() && !keys.contains(&&p.name) {
                    return Err(format!(
                        "Property error: resources.{name}.properties: Property {} not assigned",
                        p.name
                    ));
                }
            }
            return self
                .validate(&nested, files, None, false, depth + 1)
                .map_err(|e| format!("resources.{name}<{rtype}>: {e}"));
        }
        if rtype == test::TYPE {
            test::check_keys(name, props)?;
        }
        let member = match rtype {
            "OS::Heat::ResourceGroup" => Some("resource_def"),
            "OS::Heat::AutoScalingGroup" => Some("resource"),
            _ => None,
        };
        if let Some(key) = member {
            let def = props.get(key).and_then(Value::as_object).ok_or_else(|| {
                format!("Property error: resources.{name}.properties: Property {key} not assigned")
            })?;
            let mtype = def.get("type").and_then(Value::as_str).ok_or_else(|| {
                format!(
                    "Property error: resources.{name}.properties.{key}: Property type not assigned"
                )
            })?;
            let mprops = def
                .get("properties")
                .cloned()
                .unwrap_or(Value::Object(Map::new()));
            return self.validate_type(name, mtype, &mprops, files, depth);
        }
        if is_known_heat_type(rtype) {
            return Ok(());
        }
        Err(format!(
            "Failed to validate: resources.{name}: The Resource Type ({rtype}) could not be found."
        ))
    }

    /// Strict checks of property values (flavor, image, server group policy).
    fn validate_values(
        &self,
        name: &str,
        rtype: &str,
        props: &Value,
        scope: &dyn Scope,
    ) -> Result<(), String> {
        let value = |key: &str| -> Result<Option<String>, String> {
            match props.get(key) {
                None => Ok(None),
                Some(v) => Ok(text(Some(&hot::eval(v, scope)?))),
            }
        };
        let prop_error = |key: &str, v: &str, why: String| {
            Err(format!(
                "Property error: {}: Error validating value '{v}': {why}",
                format_path(&[
                    "resources".into(),
                    name.into(),
                    "properties".into(),
                    key.into()
                ])
            ))
        };
        match rtype {
            "OS::Nova::Server" => {
                match value("flavor")? {
                    Some(f) if self.cloud.flavors.contains_key(&f) => {}
                    Some(f) => {
                        return prop_error(
                            "flavor",
                            &f,
                            format!("The Flavor ID ({f}) could not be found."),
                        )
                    }
                    None if props.get("flavor").is_none() => {
                        return Err(format!(
                        "Property error: resources.{name}.properties: Property flavor not assigned"
                    ))
                    }
                    None => {}
                }
                self.check_image(name, value("image")?, prop_error)?;
            }
            "OS::Cinder::Volume" => self.check_image(name, value("image")?, prop_error)?,
            test::TYPE => test::check_values(name, &hot::eval(props, scope)?)?,
            "OS::Nova::ServerGroup" => {
                let pols = match props.get("policies") {
                    Some(p) => hot::eval(p, scope)?,
                    None => Value::Array(
                        props
                            .get("policy")
                            .map(|p| hot::eval(p, scope))
                            .transpose()?
                            .into_iter()
                            .collect(),
                    ),
                };
                for (i, p) in pols
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                {
                    let p = p.as_str().unwrap_or_default();
                    if !SERVER_POLICIES.contains(&p) {
                        return Err(format!(
                            "Property error: resources.{name}.properties.policies[{i}]: \"{p}\" is not an allowed value {SERVER_POLICIES:?}"
                        ));
                    }
                }
            }
            "OS::Heat::ResourceGroup" | "OS::Heat::AutoScalingGroup" => {
                let key = if rtype == "OS::Heat::ResourceGroup" {
                    "resource_def"
                } else {
                    "resource"
                };
                if let Some(def) = props.get(key) {
                    let mtype = def.get("type").and_then(Value::as_str).unwrap_or_default();
                    let mprops = def
                        .get("properties")
                        .cloned()
                        .unwrap_or(Value::Object(Map::new()));
                    self.validate_values(name, mtype, &mprops, scope)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn check_image(
        &self,
        _name: &str,
        image: Option<String>,
        prop_error: impl Fn(&str, &str, String) -> Result<(), String>,
    ) -> Result<(), String> {
        match (&self.cloud.images, image) {
            (Some(images), Some(i)) if !images.contains(&i) => {
                prop_error("image", &i, format!("The Image ({i}) could not be found."))
            }
            _ => Ok(()),
        }
    }

    // -----------------------------------------------------------------------------------
    // Stack API
    // -----------------------------------------------------------------------------------

    pub(crate) fn create_stack(&mut self, req: CreateStack) -> Result<StackId, DriverError> {
        if req.name.trim().is_empty() {
            return Err(invalid("stack_name must not be empty"));
        }
        if self
            .stacks
            .values()
            .any(|s| s.parent.is_none() && s.name == req.name)
        {
            return Err(DriverError::AlreadyExists {
                driver: DRIVER,
                what: format!("stack {}", req.name),
            });
        }
        let tv = hot::parse_text(&req.template.template).map_err(invalid)?;
        let files = Arc::new(req.template.files);
        self.validate(&tv, &files, Some(&req.parameters), true, 0)
            .map_err(invalid)?;
        self.tick();
        let id = StackId::new(self.uuid());
        self.stacks.insert(
            id.clone(),
            StackRec {
                id: id.clone(),
                name: req.name,
                parent: None,
                template: tv,
                files,
                given: req.parameters,
                status: StackStatus::new(StackAction::Create, StackState::InProgress),
                reason: "Stack CREATE started".into(),
                failure: None,
                resources: Vec::new(),
                asg: false,
                deleting: None,
                create_shows_left: self.cloud.stack_create_shows,
            },
        );
        self.converge(&id, StackAction::Create);
        Ok(id)
    }

    pub(crate) fn update_stack(&mut self, req: UpdateStack) -> Result<(), DriverError> {
        let stack = self
            .stacks
            .get(&req.id)
            .ok_or_else(|| not_found("stack", req.id.as_str()))?;
        if stack.status.action == StackAction::Delete {
            // Heat's engine refuses with NotSupported (HTTP 400)
            return Err(invalid(
                "Updating a stack when it is deleting is not supported.",
            ));
        }
        let (tv, files) = match &req.template {
            Some(b) => (
                hot::parse_text(&b.template).map_err(invalid)?,
                Arc::new(b.files.clone()),
            ),
            None => (stack.template.clone(), stack.files.clone()),
        };
        let mut given = stack.given.clone();
        for (k, v) in req.parameters {
            given.insert(k, v);
        }
        let strict = stack.parent.is_none();
        self.validate(&tv, &files, Some(&given), strict, 0)
            .map_err(invalid)?;
        self.tick();
        if let Some(s) = self.stacks.get_mut(&req.id) {
            s.template = tv;
            s.files = files;
            s.given = given;
        }
        self.converge(&req.id, StackAction::Update);
        Ok(())
    }

    /// `show_stack` as a poller sees it: a stack being deleted shows `DELETE_IN_PROGRESS` for
    /// as many calls as its delete was given, then the delete completes (the stack is gone,
    /// or stays `DELETE_FAILED` when a [`StackDeleteFault::Failed`] was planned). A stack
    /// created on a cloud with `stack_create_shows: N` shows `CREATE_IN_PROGRESS` to its first
    /// N polls (until it is updated or deleted).
    pub(crate) fn show_stack_polled(&mut self, id: &StackId) -> Result<Stack, DriverError> {
        let id = &self.named(id);
        if let Some(s) = self.stacks.get_mut(id).filter(|s| s.create_shows_left > 0) {
            s.create_shows_left -= 1;
            if s.status.action == StackAction::Create && s.deleting.is_none() {
                let mut shown = self.show_stack(id)?;
                shown.stack_status = StackStatus::new(StackAction::Create, StackState::InProgress);
                shown.stack_status_reason = "Stack CREATE started".into();
                return Ok(shown);
            }
        }
        let now = self.time_now();
        if let Some(d) = self.stacks.get_mut(id).and_then(|s| s.deleting.as_mut()) {
            if d.busy.is_some_and(|b| b.at(now)) {
                // a test resource's delete wait: in progress, the polls do not count
            } else if d.shows_left > 0 {
                d.shows_left -= 1;
            } else {
                self.finish_delete(id);
            }
        }
        self.show_stack(id)
    }

    /// Completes the quick deletes (see [`Deleting::quick`]) of every stack but `polled`.
    pub(crate) fn finish_quick_deletes(&mut self, polled: Option<&StackId>) {
        let quick: Vec<StackId> = self
            .stacks
            .values()
            .filter(|s| s.deleting.as_ref().is_some_and(|d| d.quick))
            .filter(|s| Some(&s.id) != polled)
            .map(|s| s.id.clone())
            .collect();
        for id in quick {
            self.finish_delete(&id);
        }
    }

    /// Completes the delete in progress of a stack.
    fn finish_delete(&mut self, id: &StackId) {
        self.tick();
        let Some(d) = self.stacks.get_mut(id).and_then(|s| s.deleting.take()) else {
            return;
        };
        match d.fail {
            None => self.delete_stack_rec(id),
            Some(message) => self.fail_delete(id, &message),
        }
    }

    /// Ends a stack delete `DELETE_FAILED`: the first server (listing order, depth first)
    /// could not be deleted; the failure climbs the nested stacks as Heat words it.
    fn fail_delete(&mut self, id: &StackId, message: &str) {
        // the chain (stack, resource) from the top stack down to the server's resource
        let mut chain: Vec<(StackId, String)> = Vec::new();
        let mut found_server: Option<String> = None;
        let mut at = id.clone();
        'down: for _ in 0..=MAX_NESTING {
            let Some(s) = self.stacks.get(&at) else { break };
            let order: Vec<&ResRec> = listing_order(s);
            // a server of this stack, else the first nested stack holding one
            if let Some(r) = order.iter().find(|r| matches!(r.kind, ResKind::Server(_))) {
                if let ResKind::Server(sv) = &r.kind {
                    found_server = Some(
                        self.servers
                            .get(sv)
                            .map_or_else(|| r.name.clone(), |x| x.name.clone()),
                    );
                }
                chain.push((at.clone(), r.name.clone()));
                break 'down;
            }
            let next = order.iter().find_map(|r| match &r.kind {
                ResKind::Nested(n) if self.has_server(n) => Some((r.name.clone(), n.clone())),
                _ => None,
            });
            match next {
                Some((name, n)) => {
                    chain.push((at.clone(), name));
                    at = n;
                }
                None => {
                    if let Some(r) = order.first() {
                        chain.push((at.clone(), r.name.clone()));
                    }
                    break 'down;
                }
            }
        }
        let delete_failed = StackStatus::new(StackAction::Delete, StackState::Failed);
        let mut failure = match (&found_server, chain.last()) {
            (Some(server), Some((_, res))) => Failure::new(
                Some("ResourceInError"),
                vec!["resources".into(), res.clone()],
                format!(
                    "Went to status ERROR due to \"Server {server} delete failed: (500) {message}\""
                ),
            ),
            (None, Some((_, res))) => Failure::new(
                Some("Error"),
                vec!["resources".into(), res.clone()],
                message,
            ),
            (_, None) => Failure::new(Some("Error"), Vec::new(), message),
        };
        if chain.is_empty() {
            if let Some(s) = self.stacks.get_mut(id) {
                s.status = delete_failed;
                s.reason = format!("Resource DELETE failed: {failure}");
                s.failure = Some(failure);
            }
            return;
        }
        for (i, (sid, res)) in chain.iter().enumerate().rev() {
            if i + 1 < chain.len() {
                // a nested stack resource: Heat's ResourceFailure of its stack's reason
                failure = resource_failure(
                    &format!("Resource DELETE failed: {failure}"),
                    res,
                    StackAction::Delete,
                );
            }
            if let Some(s) = self.stacks.get_mut(sid) {
                if let Some(r) = s.resources.iter_mut().find(|r| &r.name == res) {
                    r.status = delete_failed;
                    r.reason = failure.to_string();
                    r.failure = Some(failure.clone());
                }
                s.status = delete_failed;
                s.reason = format!("Resource DELETE failed: {failure}");
                s.failure = Some(failure.clone());
            }
        }
    }

    /// Whether a stack or one of its nested stacks holds a server.
    fn has_server(&self, id: &StackId) -> bool {
        self.stacks.get(id).is_some_and(|s| {
            s.resources.iter().any(|r| match &r.kind {
                ResKind::Server(_) => true,
                ResKind::Nested(n) => self.has_server(n),
                _ => false,
            })
        })
    }

    /// The id of the top-level stack `id` names: itself when it is an id, else the id of the
    /// stack of that name (Heat finds a stack by its name as by its id, answering `302` with
    /// its canonical address: `stack-find-response-302.json` of real Heat 27); unchanged when
    /// neither exists.
    pub(crate) fn named(&self, id: &StackId) -> StackId {
        if self.stacks.contains_key(id) {
            return id.clone();
        }
        self.stacks
            .values()
            .find(|s| s.parent.is_none() && s.name == id.as_str())
            .map_or_else(|| id.clone(), |s| s.id.clone())
    }

    pub(crate) fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
        let id = &self.named(id);
        let s = self
            .stacks
            .get(id)
            .ok_or_else(|| not_found("stack", id.as_str()))?;
        let ctx = self.ctx(s);
        let mut parameters = Map::new();
        parameters.insert("OS::stack_id".into(), Value::from(s.id.as_str()));
        parameters.insert(
            "OS::project_id".into(),
            Value::from(self.project_id.as_str()),
        );
        parameters.insert("OS::stack_name".into(), Value::from(s.name.as_str()));
        // Real Heat 27 shows a `json` parameter as JSON text, a string (found by the real
        // OpenStack scenario change_ext_conn_updates_the_stack_in_place: `nfv` came back as
        // `"{\"VDU\": ...}"`).
        parameters.extend(ctx.params.iter().map(|(k, v)| {
            let shown = match v {
                Value::Object(_) | Value::Array(_) => Value::String(v.to_string()),
                _ => v.clone(),
            };
            (k.clone(), shown)
        }));
        let outputs = Template::parse(&s.template)
            .map(|t| t.outputs)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| StackOutput {
                output_key: k,
                output_value: hot::eval(&v, &ctx).unwrap_or(Value::Null),
            })
            .collect();
        let (stack_status, stack_status_reason) = if self.masked(s, self.time_now()) {
            let action = s.status.action;
            (
                StackStatus::new(action, StackState::InProgress),
                format!("Stack {} started", action.as_str()),
            )
        } else {
            (s.status, s.reason.clone())
        };
        Ok(Stack {
            id: s.id.clone(),
            stack_name: s.name.clone(),
            stack_status,
            stack_status_reason,
            parameters,
            outputs,
        })
    }

    /// Starts deleting a stack (see [`State::show_stack_polled`] for when it completes). A
    /// stack already being deleted is left as it is, as Heat accepts a repeated delete.
    pub(crate) fn delete_stack(&mut self, id: &StackId) -> Result<(), DriverError> {
        let deleting = match self.stacks.get(id) {
            None => return Err(not_found("stack", id.as_str())),
            Some(s) => s.deleting.is_some(),
        };
        if deleting {
            return Ok(());
        }
        self.tick();
        let busy = self.delete_wait(id);
        let d = match self.delete_faults.pop_front() {
            Some(StackDeleteFault::Slow { shows }) => Deleting {
                shows_left: shows,
                fail: None,
                quick: false,
                busy,
            },
            Some(StackDeleteFault::Failed { message }) => Deleting {
                shows_left: 1,
                fail: Some(message),
                quick: false,
                busy,
            },
            None => Deleting {
                shows_left: 1,
                fail: None,
                quick: busy.is_none(),
                busy,
            },
        };
        if let Some(s) = self.stacks.get_mut(id) {
            s.status = StackStatus::new(StackAction::Delete, StackState::InProgress);
            s.reason = "Stack DELETE started".into();
            s.failure = None;
            s.deleting = Some(d);
        }
        Ok(())
    }

    pub(crate) fn list_resources(
        &self,
        id: &StackId,
        depth: u32,
    ) -> Result<Vec<StackResource>, DriverError> {
        if !self.stacks.contains_key(id) {
            return Err(not_found("stack", id.as_str()));
        }
        let now = self.time_now();
        let mut out = Vec::new();
        let mut level: Vec<(StackId, Option<String>)> = vec![(id.clone(), None)];
        for d in 0..=depth {
            let mut next = Vec::new();
            for (sid, parent) in &level {
                let Some(s) = self.stacks.get(sid) else {
                    continue;
                };
                for r in listing_order(s) {
                    let nested = match &r.kind {
                        ResKind::Nested(n) if self.stacks.contains_key(n) => Some(n.clone()),
                        _ => None,
                    };
                    let (resource_status, resource_status_reason) = if self.res_busy(r, now) {
                        (
                            StackStatus::new(r.status.action, StackState::InProgress),
                            "state changed".to_owned(),
                        )
                    } else {
                        (r.status, r.reason.clone())
                    };
                    out.push(StackResource {
                        resource_name: r.name.clone(),
                        physical_resource_id: r.physical_id.clone(),
                        resource_type: r.rtype.clone(),
                        resource_status,
                        resource_status_reason,
                        parent_resource: parent.clone(),
                        stack_id: sid.clone(),
                        nested_stack_id: nested.clone(),
                    });
                    if let (Some(n), true) = (nested, d < depth) {
                        next.push((n, Some(r.name.clone())));
                    }
                }
            }
            level = next;
        }
        Ok(out)
    }

    pub(crate) fn mark_unhealthy(&mut self, req: MarkUnhealthy) -> Result<(), DriverError> {
        self.tick();
        let s = self
            .stacks
            .get_mut(&req.stack_id)
            .ok_or_else(|| not_found("stack", req.stack_id.as_str()))?;
        let r = s
            .resources
            .iter_mut()
            .find(|r| r.name == req.resource_name)
            .ok_or_else(|| {
                not_found(
                    "resource",
                    &format!("{} in stack {}", req.resource_name, req.stack_id),
                )
            })?;
        r.unhealthy = true;
        r.status = StackStatus::new(StackAction::Check, StackState::Failed);
        r.reason = req.reason;
        Ok(())
    }

    // -----------------------------------------------------------------------------------
    // The engine
    // -----------------------------------------------------------------------------------

    fn delete_stack_rec(&mut self, id: &StackId) {
        if let Some(s) = self.stacks.remove(id) {
            for r in s.resources.iter().rev() {
                self.delete_res(r);
            }
        }
    }

    fn delete_res(&mut self, r: &ResRec) {
        match &r.kind {
            ResKind::Server(id) => self.delete_server(id),
            ResKind::Group(g) => {
                self.groups.remove(g);
            }
            ResKind::Nested(n) => self.delete_stack_rec(n),
            ResKind::Plain => {}
        }
        for o in &r.older {
            self.delete_res(o);
        }
    }

    fn find_res(&self, sid: &StackId, name: &str) -> Option<ResRec> {
        self.stacks
            .get(sid)?
            .resources
            .iter()
            .find(|r| r.name == name)
            .cloned()
    }

    fn upsert(&mut self, sid: &StackId, rec: ResRec) {
        if let Some(s) = self.stacks.get_mut(sid) {
            match s.resources.iter_mut().find(|r| r.name == rec.name) {
                Some(r) => *r = rec,
                None => s.resources.push(rec),
            }
        }
    }

    /// Creates or updates the resources of a stack to match its template and parameters.
    fn converge(&mut self, sid: &StackId, action: StackAction) {
        let Some(stack) = self.stacks.get(sid) else {
            return;
        };
        let forward = stack.asg;
        let parsed = Template::parse(&stack.template)
            .and_then(|t| t.resolve_params(&stack.given).map(|p| (t, p)));
        let (t, _) = match parsed {
            Ok(x) => x,
            Err(msg) => {
                if let Some(s) = self.stacks.get_mut(sid) {
                    s.status = status(action, false);
                    s.reason = msg;
                }
                return;
            }
        };
        let active: Vec<hot::ResDef> = {
            let ctx = self.ctx(stack);
            t.resources
                .iter()
                .filter(|r| {
                    r.condition
                        .as_ref()
                        .is_none_or(|c| hot::eval_condition(c, &ctx).unwrap_or(false))
                })
                .cloned()
                .collect()
        };
        let names: Vec<String> = active.iter().map(|r| r.name.clone()).collect();
        // delete what the template no longer has
        let removed: Vec<ResRec> = stack
            .resources
            .iter()
            .filter(|r| !names.contains(&r.name))
            .cloned()
            .collect();
        for r in removed.iter().rev() {
            self.delete_res(r);
        }
        if let Some(s) = self.stacks.get_mut(sid) {
            s.resources.retain(|r| names.contains(&r.name));
            s.status = StackStatus::new(action, StackState::InProgress);
        }
        // build order: dependencies first, independent resources in reverse template order
        // (an autoscaling group's members in template order: oldest first)
        let mut order: Vec<&hot::ResDef> = Vec::new();
        while order.len() < active.len() {
            let pick = |r: &&hot::ResDef| {
                !order.iter().any(|o| o.name == r.name)
                    && r.deps(&names)
                        .iter()
                        .all(|d| order.iter().any(|o| &o.name == d))
            };
            let next = if forward {
                active.iter().find(pick)
            } else {
                active.iter().rev().find(pick)
            };
            match next.or_else(|| {
                active
                    .iter()
                    .find(|r| !order.iter().any(|o| o.name == r.name))
            }) {
                Some(r) => order.push(r),
                None => break,
            }
        }
        for def in order {
            let deps = def.deps(&names);
            let blocked = deps.iter().any(|d| {
                self.find_res(sid, d)
                    .is_none_or(|r| r.status.is_failed() || r.status.action == StackAction::Init)
            });
            if blocked {
                if self.find_res(sid, &def.name).is_none() {
                    let rec = ResRec {
                        name: def.name.clone(),
                        rtype: def.rtype.clone(),
                        physical_id: String::new(),
                        status: StackStatus::new(StackAction::Init, StackState::Complete),
                        reason: String::new(),
                        kind: ResKind::Plain,
                        props: Value::Null,
                        deps,
                        created: self.clock,
                        unhealthy: false,
                        failure: None,
                        older: Vec::new(),
                        relisted: None,
                        busy: None,
                    };
                    self.upsert(sid, rec);
                }
                continue;
            }
            let props = match self.stacks.get(sid) {
                Some(s) => hot::eval(&def.properties, &self.ctx(s)),
                None => return,
            };
            let props = match props {
                Ok(p) => p,
                Err(msg) => {
                    let f = Failure::new(
                        Some("StackValidationFailed"),
                        vec!["resources".into(), def.name.clone()],
                        msg,
                    );
                    self.record(
                        sid,
                        def,
                        deps,
                        Converged {
                            kind: ResKind::Plain,
                            physical_id: String::new(),
                            action: StackAction::Create,
                            failure: Some(f),
                        },
                    );
                    continue;
                }
            };
            let files = self
                .stacks
                .get(sid)
                .map(|s| s.files.clone())
                .unwrap_or_default();
            match def.rtype.as_str() {
                "OS::Nova::Server" => self.apply_server(sid, def, deps, props),
                "OS::Nova::ServerGroup" => self.apply_group(sid, def, deps, props),
                "OS::Heat::ResourceGroup" => self.apply_nested(sid, def, deps, props, &files),
                "OS::Heat::AutoScalingGroup" => self.apply_asg(sid, def, deps, props, &files),
                test::TYPE => self.apply_test(sid, def, deps, props),
                t if files.contains_key(t) => self.apply_nested(sid, def, deps, props, &files),
                _ => self.apply_plain(sid, def, deps, props),
            }
        }
        // keep the template order, report the first failure in it
        let Some(s) = self.stacks.get_mut(sid) else {
            return;
        };
        s.resources.sort_by_key(|r| {
            names
                .iter()
                .position(|n| n == &r.name)
                .unwrap_or(usize::MAX)
        });
        let failed = s
            .resources
            .iter()
            .find(|r| r.status.is_failed() && r.status.action != StackAction::Check);
        match failed {
            Some(r) => {
                let f = r.failure.clone().unwrap_or_else(|| {
                    Failure::new(
                        None,
                        vec!["resources".into(), r.name.clone()],
                        r.reason.clone(),
                    )
                });
                s.reason = format!("Resource {} failed: {}", r.status.action.as_str(), f);
                s.failure = Some(f);
                s.status = status(action, false);
            }
            None => {
                s.reason = format!("Stack {} completed successfully", action.as_str());
                s.failure = None;
                s.status = status(action, true);
            }
        }
    }

    /// Writes the row of resource `def` of stack `sid` after an action on it.
    fn record(&mut self, sid: &StackId, def: &hot::ResDef, deps: Vec<String>, done: Converged) {
        let Converged {
            kind,
            physical_id,
            action,
            failure,
        } = done;
        let now = self.tick();
        let previous = self.find_res(sid, &def.name);
        let relisted = previous.as_ref().and_then(|p| p.relisted);
        let created = match (action, previous) {
            (StackAction::Update, Some(old)) => old.created,
            _ => now,
        };
        let rec = ResRec {
            name: def.name.clone(),
            rtype: def.rtype.clone(),
            physical_id,
            status: status(action, failure.is_none()),
            reason: failure
                .as_ref()
                .map_or_else(|| "state changed".to_owned(), ToString::to_string),
            kind,
            props: Value::Null,
            deps,
            created,
            unhealthy: false,
            failure,
            older: Vec::new(),
            relisted,
            busy: None,
        };
        self.upsert(sid, rec);
    }

    fn set_props(&mut self, sid: &StackId, name: &str, props: Value) {
        if let Some(r) = self
            .stacks
            .get_mut(sid)
            .and_then(|s| s.resources.iter_mut().find(|r| r.name == name))
        {
            r.props = props;
        }
    }

    /// Whether the server behind a resource row still exists.
    fn alive(&self, r: &ResRec) -> bool {
        matches!(&r.kind, ResKind::Server(id) if self.servers.contains_key(id))
    }

    /// A server resource, the way Heat's convergence engine treats its rows: a server whose
    /// definition changed (or that failed, or was marked unhealthy) gets a new row and a new
    /// server while the old row and its server are kept (the original reads `UPDATE_COMPLETE`
    /// / `The Resource VDU1 requires replacement.`); the old rows are deleted when a
    /// replacement succeeds. At the next update a failed replacement is dropped in favour of
    /// a kept original that did not fail (Heat's `_get_best_existing_rsrc_db`), which is kept
    /// as it is when it matches the new definition (captured `heat-srv-raw-a`).
    fn apply_server(&mut self, sid: &StackId, def: &hot::ResDef, deps: Vec<String>, props: Value) {
        let flavor = text(props.get("flavor")).unwrap_or_default();
        let key = serde_json::json!({
            "flavor": flavor,
            "image": text(props.get("image")),
            "zone": text(props.get("availability_zone")),
            "group": text(props.get("scheduler_hints").and_then(|h| h.get("group"))),
        });
        let failed = |r: &ResRec| r.status.is_failed() || r.unhealthy;
        let mut older: Vec<ResRec> = Vec::new();
        let mut relisted = None;
        let replacing = match self.find_res(sid, &def.name) {
            None => false,
            Some(mut cur) => {
                older = std::mem::take(&mut cur.older);
                relisted = cur.relisted;
                if failed(&cur) {
                    let back = older
                        .iter()
                        .rposition(|o| !failed(o) && self.alive(o))
                        .map(|pos| older.remove(pos));
                    if let Some(back) = back {
                        self.delete_res(&cur);
                        cur = back;
                    }
                }
                let alive = self.alive(&cur);
                if alive && !failed(&cur) && cur.props == key {
                    cur.deps = deps;
                    cur.older = older;
                    cur.relisted = relisted;
                    self.upsert(sid, cur);
                    return;
                }
                if alive {
                    if !failed(&cur) {
                        cur.status = StackStatus::new(StackAction::Update, StackState::Complete);
                        cur.reason = format!("The Resource {} requires replacement.", def.name);
                    }
                    older.push(cur);
                }
                true
            }
        };
        let stack_name = self
            .stacks
            .get(sid)
            .map(|s| s.name.clone())
            .unwrap_or_default();
        let name = match text(props.get("name")) {
            Some(n) => n,
            None => format!("{stack_name}-{}-{}", def.name, self.short_id()),
        };
        let boot = Boot {
            name,
            flavor,
            zone: text(props.get("availability_zone")),
            group: text(props.get("scheduler_hints").and_then(|h| h.get("group"))),
        };
        let (id, failure) = self.boot(&def.name, boot);
        let (kind, pid) = match id {
            Some(id) => (ResKind::Server(id.clone()), id.0),
            None => (ResKind::Plain, String::new()),
        };
        let ok = failure.is_none();
        self.record(
            sid,
            def,
            deps,
            Converged {
                kind,
                physical_id: pid,
                action: StackAction::Create,
                failure,
            },
        );
        if ok {
            for o in older.drain(..) {
                self.delete_res(&o);
            }
            if replacing {
                relisted = Some(self.tick());
            }
        }
        if let Some(r) = self
            .stacks
            .get_mut(sid)
            .and_then(|s| s.resources.iter_mut().find(|r| r.name == def.name))
        {
            r.props = key;
            r.older = older;
            r.relisted = relisted;
        }
    }

    fn apply_group(&mut self, sid: &StackId, def: &hot::ResDef, deps: Vec<String>, props: Value) {
        let policy = text(props.get("policies"))
            .or_else(|| text(props.get("policy")))
            .unwrap_or_else(|| "anti-affinity".to_owned());
        let key = Value::from(policy.as_str());
        if let Some(e) = self.find_res(sid, &def.name) {
            if matches!(&e.kind, ResKind::Group(g) if self.groups.contains_key(g))
                && !e.status.is_failed()
                && !e.unhealthy
                && e.props == key
            {
                return;
            }
            self.delete_res(&e);
        }
        let id = self.uuid();
        self.groups.insert(
            id.clone(),
            GroupRec {
                policy,
                members: Vec::new(),
            },
        );
        self.record(
            sid,
            def,
            deps,
            Converged {
                kind: ResKind::Group(id.clone()),
                physical_id: id,
                action: StackAction::Create,
                failure: None,
            },
        );
        self.set_props(sid, &def.name, key);
    }

    fn apply_plain(&mut self, sid: &StackId, def: &hot::ResDef, deps: Vec<String>, props: Value) {
        if let Some(e) = self.find_res(sid, &def.name) {
            if !e.status.is_failed() && !e.unhealthy && !e.physical_id.is_empty() {
                if e.props != props {
                    self.record(
                        sid,
                        def,
                        deps,
                        Converged {
                            kind: ResKind::Plain,
                            physical_id: e.physical_id,
                            action: StackAction::Update,
                            failure: None,
                        },
                    );
                    self.set_props(sid, &def.name, props);
                }
                return;
            }
        }
        let id = self.uuid();
        self.record(
            sid,
            def,
            deps,
            Converged {
                kind: ResKind::Plain,
                physical_id: id,
                action: StackAction::Create,
                failure: None,
            },
        );
        self.set_props(sid, &def.name, props);
    }

    /// An `OS::Heat::TestResource` (see the `test_resource` module): created, updated in place
    /// or replaced with its outcome decided at once; its wait only shows it in progress.
    fn apply_test(&mut self, sid: &StackId, def: &hot::ResDef, deps: Vec<String>, props: Value) {
        let now = self.time_now();
        let name = def.name.as_str();
        let existing = self
            .find_res(sid, name)
            .filter(|e| !e.status.is_failed() && !e.unhealthy && !e.physical_id.is_empty());
        if let Some(e) = existing {
            if e.props == props {
                return;
            }
            if !test::replaces(&e.props, &props) {
                let fails = test::fails(&props);
                let wait = if test::value_changed(&e.props, &props) {
                    test::wait(&props, StackAction::Update)
                } else {
                    Wait::None
                };
                let failure = fails.then(|| test::failure(name));
                self.record(
                    sid,
                    def,
                    deps,
                    Converged {
                        kind: ResKind::Plain,
                        physical_id: e.physical_id,
                        action: StackAction::Update,
                        failure,
                    },
                );
                // a failed update keeps the stored value (Heat: `data_set` only without `fail`)
                self.set_props(sid, name, if fails { e.props } else { props });
                self.set_busy(sid, name, Busy::of(wait, now));
                return;
            }
        }
        let fails = test::fails(&props);
        let physical_id = if fails {
            String::new()
        } else {
            // Heat's `physical_resource_name()`
            let stack = self
                .stacks
                .get(sid)
                .map(|s| s.name.clone())
                .unwrap_or_default();
            format!("{stack}-{name}-{}", self.short_id())
        };
        let wait = test::wait(&props, StackAction::Create);
        let failure = fails.then(|| test::failure(name));
        self.record(
            sid,
            def,
            deps,
            Converged {
                kind: ResKind::Plain,
                physical_id,
                action: StackAction::Create,
                failure,
            },
        );
        self.set_props(sid, name, props);
        self.set_busy(sid, name, Busy::of(wait, now));
    }

    fn set_busy(&mut self, sid: &StackId, name: &str, busy: Option<Busy>) {
        if let Some(r) = self
            .stacks
            .get_mut(sid)
            .and_then(|s| s.resources.iter_mut().find(|r| r.name == name))
        {
            r.busy = busy;
        }
    }

    /// Whether a resource row shows its action in progress at `now`: a test resource that
    /// waits, or a nested stack that shows in progress.
    fn res_busy(&self, r: &ResRec, now: DateTime<Utc>) -> bool {
        if r.status.action == StackAction::Check {
            return false;
        }
        r.busy.is_some_and(|b| b.at(now))
            || matches!(&r.kind, ResKind::Nested(n) if self.stacks.get(n).is_some_and(|ns| self.masked(ns, now)))
    }

    /// Whether a created or updated stack shows in progress at `now` although the simulator
    /// settled it: one of its resources waits and none of the others failed (Heat fails a
    /// stack the moment one of its resources fails).
    fn masked(&self, s: &StackRec, now: DateTime<Utc>) -> bool {
        s.deleting.is_none()
            && matches!(s.status.action, StackAction::Create | StackAction::Update)
            && s.resources.iter().any(|r| self.res_busy(r, now))
            && !s.resources.iter().any(|r| {
                r.status.is_failed()
                    && r.status.action != StackAction::Check
                    && !self.res_busy(r, now)
            })
    }

    /// How long the delete of a stack takes: the longest delete wait of its test resources
    /// (nested stacks included), from now.
    fn delete_wait(&self, id: &StackId) -> Option<Busy> {
        let now = self.time_now();
        let mut longest: Option<Busy> = None;
        let mut todo = vec![id.clone()];
        while let Some(sid) = todo.pop() {
            let Some(s) = self.stacks.get(&sid) else {
                continue;
            };
            for r in &s.resources {
                match &r.kind {
                    ResKind::Nested(n) => todo.push(n.clone()),
                    ResKind::Plain if r.rtype == test::TYPE => {
                        let b = Busy::of(test::wait(&r.props, StackAction::Delete), now);
                        longest = match (longest, b) {
                            (Some(Busy::Forever), _) | (_, Some(Busy::Forever)) => {
                                Some(Busy::Forever)
                            }
                            (Some(Busy::Until(a)), Some(Busy::Until(b))) => {
                                Some(Busy::Until(a.max(b)))
                            }
                            (a, b) => a.or(b),
                        };
                    }
                    _ => {}
                }
            }
        }
        longest
    }

    /// The template and parameters of the nested stack of a group or template resource.
    fn nested_spec(
        &self,
        def: &hot::ResDef,
        props: &Value,
        files: &BTreeMap<String, String>,
    ) -> Result<(Value, Map<String, Value>), String> {
        let member = |mdef: Option<&Value>| -> (String, Value) {
            let t = mdef
                .and_then(|d| d.get("type"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let p = mdef
                .and_then(|d| d.get("properties"))
                .cloned()
                .unwrap_or(Value::Object(Map::new()));
            (t, p)
        };
        let generated = |members: Vec<(String, String, Value)>| {
            let mut res = Map::new();
            for (n, t, p) in members {
                res.insert(n, serde_json::json!({"type": t, "properties": p}));
            }
            serde_json::json!({"heat_template_version": "2015-04-30", "resources": res})
        };
        match def.rtype.as_str() {
            "OS::Heat::ResourceGroup" => {
                let count = number(props.get("count")).unwrap_or(1);
                let (t, p) = member(props.get("resource_def"));
                let members = (0..count as usize)
                    .map(|i| (i.to_string(), t.clone(), hot::replace_index(&p, i)))
                    .collect();
                Ok((generated(members), Map::new()))
            }
            other => {
                let text = files.get(other).cloned().unwrap_or_default();
                let tv = hot::parse_text(&text)?;
                Ok((tv, props.as_object().cloned().unwrap_or_default()))
            }
        }
    }

    fn apply_nested(
        &mut self,
        sid: &StackId,
        def: &hot::ResDef,
        deps: Vec<String>,
        props: Value,
        files: &Arc<BTreeMap<String, String>>,
    ) {
        let existing = self.find_res(sid, &def.name);
        let nested_id = existing.as_ref().and_then(|e| match &e.kind {
            ResKind::Nested(n) if self.stacks.contains_key(n) => Some(n.clone()),
            _ => None,
        });
        let in_place = nested_id.is_some() && !existing.as_ref().is_some_and(|e| e.unhealthy);
        let action = if in_place {
            StackAction::Update
        } else {
            StackAction::Create
        };
        let validation_failure = |msg: String| {
            Some(Failure::new(
                Some("StackValidationFailed"),
                vec!["resources".into(), def.name.clone()],
                msg,
            ))
        };
        let spec = self
            .nested_spec(def, &props, files)
            .and_then(|(tv, params)| {
                self.validate(&tv, files, Some(&params), true, 0)?;
                Ok((tv, params))
            });
        let (tv, params) = match spec {
            Ok(x) => x,
            Err(msg) => {
                let (kind, pid) = match (&nested_id, in_place) {
                    (Some(n), true) => (ResKind::Nested(n.clone()), n.0.clone()),
                    _ => (ResKind::Plain, String::new()),
                };
                self.record(
                    sid,
                    def,
                    deps,
                    Converged {
                        kind,
                        physical_id: pid,
                        action,
                        failure: validation_failure(msg),
                    },
                );
                return;
            }
        };
        let nid = match (nested_id, in_place) {
            (Some(n), true) => {
                if let Some(s) = self.stacks.get_mut(&n) {
                    s.template = tv;
                    s.given = params;
                    s.files = files.clone();
                }
                n
            }
            (old, _) => {
                if let (Some(e), Some(_)) = (&existing, old) {
                    self.delete_res(e);
                }
                self.new_nested(sid, &def.name, tv, params, files, false)
            }
        };
        self.converge(&nid, action);
        let failure = self.nested_failure(&nid, &def.name, action);
        let pid = nid.0.clone();
        self.record(
            sid,
            def,
            deps,
            Converged {
                kind: ResKind::Nested(nid),
                physical_id: pid,
                action,
                failure,
            },
        );
    }
    /// A new nested stack for resource `res` of stack `sid` (not converged yet).
    fn new_nested(
        &mut self,
        sid: &StackId,
        res: &str,
        template: Value,
        given: Map<String, Value>,
        files: &Arc<BTreeMap<String, String>>,
        asg: bool,
    ) -> StackId {
        let parent_name = self
            .stacks
            .get(sid)
            .map(|s| s.name.clone())
            .unwrap_or_default();
        let n = StackId::new(self.uuid());
        let name = format!("{parent_name}-{res}-{}", self.short_id());
        self.stacks.insert(
            n.clone(),
            StackRec {
                id: n.clone(),
                name,
                parent: Some(sid.clone()),
                template,
                files: files.clone(),
                given,
                status: StackStatus::new(StackAction::Create, StackState::InProgress),
                reason: String::new(),
                failure: None,
                resources: Vec::new(),
                asg,
                deleting: None,
                create_shows_left: 0,
            },
        );
        n
    }

    /// The failure of a resource backed by nested stack `nid`, if that stack failed: Heat's
    /// `ResourceFailure` of the nested stack's reason.
    fn nested_failure(&self, nid: &StackId, res: &str, action: StackAction) -> Option<Failure> {
        let n = self.stacks.get(nid)?;
        n.status
            .is_failed()
            .then(|| resource_failure(&n.reason, res, action))
    }

    /// The members of an autoscaling group's nested stack with their definitions, in the
    /// order Heat's `grouputils.get_member_definitions(include_failed=True)` gives them:
    /// failed members first, then by creation time, then by name.
    fn asg_members(&self, nid: &StackId) -> Vec<(String, Value)> {
        let Some(s) = self.stacks.get(nid) else {
            return Vec::new();
        };
        let defs = s.template.get("resources").and_then(Value::as_object);
        let mut rows: Vec<&ResRec> = s.resources.iter().collect();
        rows.sort_by(|a, b| {
            (!a.status.is_failed(), a.created, &a.name).cmp(&(
                !b.status.is_failed(),
                b.created,
                &b.name,
            ))
        });
        rows.into_iter()
            .filter_map(|r| {
                defs.and_then(|d| d.get(&r.name))
                    .map(|d| (r.name.clone(), d.clone()))
            })
            .collect()
    }

    /// Heat's `heat.scaling.template.member_definitions`: `num` members, the first of
    /// `old` dropped when shrinking, new members (named by [`State::short_id`]) with
    /// `new_def`, and among the kept ones the first `num_new` minus the new ones whose
    /// definition differs get `new_def`; the others keep their own (old) definition.
    fn member_definitions(
        &mut self,
        old: &[(String, Value)],
        new_def: &Value,
        num: usize,
        num_new: usize,
    ) -> Vec<(String, Value)> {
        let old = &old[old.len().saturating_sub(num)..];
        let num_create = num - old.len();
        let mut num_replace = num_new as i64 - num_create as i64;
        let mut out = Vec::with_capacity(num);
        for i in 0..num {
            match old.get(i) {
                Some((name, odef)) => {
                    if odef != new_def && num_replace > 0 {
                        num_replace -= 1;
                        out.push((name.clone(), new_def.clone()));
                    } else {
                        out.push((name.clone(), odef.clone()));
                    }
                }
                None => {
                    let name = self.short_id();
                    out.push((name, new_def.clone()));
                }
            }
        }
        out
    }

    /// Replaces the template of an autoscaling group's nested stack with these members and
    /// converges it. Returns the failure of the group resource, if any.
    fn asg_apply_members(
        &mut self,
        nid: &StackId,
        res: &str,
        members: Vec<(String, Value)>,
        files: &Arc<BTreeMap<String, String>>,
        action: StackAction,
    ) -> Option<Failure> {
        let mut r = Map::new();
        for (n, d) in members {
            r.insert(n, d);
        }
        let tv = serde_json::json!({"heat_template_version": "2015-04-30", "resources": r});
        if let Err(msg) = self.validate(&tv, files, Some(&Map::new()), true, 0) {
            return Some(Failure::new(
                Some("StackValidationFailed"),
                vec!["resources".into(), res.to_owned()],
                msg,
            ));
        }
        if let Some(s) = self.stacks.get_mut(nid) {
            s.template = tv;
            s.given = Map::new();
            s.files = files.clone();
        }
        self.converge(nid, action);
        self.nested_failure(nid, res, action)
    }

    /// An `OS::Heat::AutoScalingGroup` as Heat 27 runs one (`autoscaling_group.py`,
    /// `instance_group.py`):
    /// - create: `desired_capacity` (else `min_size`) members named by [`State::short_id`];
    /// - update, when the `resource` property differs from the one last applied with
    ///   success: a rolling update in the batches of `heat.scaling.rolling_update.next_batch`
    ///   (`rolling_updates`: `max_batch_size` default 1, `min_in_service` default 0;
    ///   `pause_time` is not waited), each batch giving the new definition to as many
    ///   members as it may, failed members first, then the oldest; the other members keep
    ///   their own definition (a failed one is rebuilt with it). The first batch that fails
    ///   ends the update;
    /// - then the resize to `desired_capacity` (bounded by `min_size` / `max_size`), which
    ///   removes failed members first, then the oldest.
    ///
    /// The definition is remembered as applied only when the update succeeds, so a failed
    /// update followed by the same one rolls on (captured `update-again@az1`).
    fn apply_asg(
        &mut self,
        sid: &StackId,
        def: &hot::ResDef,
        deps: Vec<String>,
        props: Value,
        files: &Arc<BTreeMap<String, String>>,
    ) {
        let member_def = props
            .get("resource")
            .cloned()
            .unwrap_or(Value::Object(Map::new()));
        let desired = number(props.get("desired_capacity")).map(|n| n as usize);
        let min_size = number(props.get("min_size")).map(|n| n as usize);
        let max_size = number(props.get("max_size")).map(|n| n as usize);
        let rolling = props.get("rolling_updates");
        let batch_size =
            number(rolling.and_then(|r| r.get("max_batch_size"))).map_or(1, |n| n.max(1) as usize);
        let min_in_service =
            number(rolling.and_then(|r| r.get("min_in_service"))).map_or(0, |n| n as usize);

        let existing = self.find_res(sid, &def.name);
        let nested_id = existing.as_ref().and_then(|e| match &e.kind {
            ResKind::Nested(n) if self.stacks.contains_key(n) => Some(n.clone()),
            _ => None,
        });
        let applied = existing
            .as_ref()
            .and_then(|e| e.props.get("member").cloned());
        let in_place = nested_id.is_some() && !existing.as_ref().is_some_and(|e| e.unhealthy);
        let (nid, action, failure) = match (nested_id, in_place) {
            (Some(nid), true) => {
                let mut failure = None;
                if applied.as_ref() != Some(&member_def) {
                    let capacity = self.asg_members(&nid).len();
                    let target = desired.filter(|d| *d > 0).unwrap_or(capacity).min(capacity);
                    for (total, num_new) in
                        rolling_batches(target, capacity, batch_size, min_in_service)
                    {
                        let old = self.asg_members(&nid);
                        let members = self.member_definitions(&old, &member_def, total, num_new);
                        failure = self.asg_apply_members(
                            &nid,
                            &def.name,
                            members,
                            files,
                            StackAction::Update,
                        );
                        if failure.is_some() {
                            break;
                        }
                    }
                }
                if failure.is_none() {
                    let old = self.asg_members(&nid);
                    let healthy = self.stacks.get(&nid).map_or(0, |s| {
                        s.resources.iter().filter(|r| !r.status.is_failed()).count()
                    });
                    let mut size = desired.filter(|d| *d > 0).unwrap_or(healthy);
                    if let Some(max) = max_size {
                        size = size.min(max);
                    }
                    if let Some(min) = min_size {
                        size = size.max(min);
                    }
                    let members = self.member_definitions(&old, &member_def, size, 0);
                    failure = self.asg_apply_members(
                        &nid,
                        &def.name,
                        members,
                        files,
                        StackAction::Update,
                    );
                }
                (nid, StackAction::Update, failure)
            }
            (old, _) => {
                if let (Some(e), Some(_)) = (&existing, old) {
                    self.delete_res(e);
                }
                // Heat: `desired_capacity or min_size` (0 counts as not given)
                let count = desired.filter(|d| *d > 0).or(min_size).unwrap_or(0);
                let nid = self.new_nested(
                    sid,
                    &def.name,
                    Value::Object(Map::new()),
                    Map::new(),
                    files,
                    true,
                );
                let members = self.member_definitions(&[], &member_def, count, count);
                let failure =
                    self.asg_apply_members(&nid, &def.name, members, files, StackAction::Create);
                (nid, StackAction::Create, failure)
            }
        };
        let keep = if failure.is_none() || action == StackAction::Create {
            Some(member_def)
        } else {
            applied
        };
        let pid = nid.0.clone();
        self.record(
            sid,
            def,
            deps,
            Converged {
                kind: ResKind::Nested(nid),
                physical_id: pid,
                action,
                failure,
            },
        );
        self.set_props(
            sid,
            &def.name,
            serde_json::json!({ "member": keep.unwrap_or(Value::Null) }),
        );
    }
}

/// The batches of a rolling update, as Heat's `InstanceGroup._get_batches` iterates
/// `heat.scaling.rolling_update.next_batch`: each is (size of the group after the batch,
/// members that may get the new definition in it).
fn rolling_batches(
    target: usize,
    capacity: usize,
    batch_size: usize,
    min_in_service: usize,
) -> Vec<(usize, usize)> {
    let (target, mut capacity) = (target as i64, capacity as i64);
    let (batch_size, min_in_service) = (batch_size as i64, min_in_service as i64);
    let mut updated = 0i64;
    let mut out = Vec::new();
    // needs_update; the bound only guards against a loop Heat's arithmetic never makes
    while !(updated >= capacity && capacity == target) && out.len() < 1000 {
        let (new_capacity, efft_batch) =
            next_batch(target, capacity, updated, batch_size, min_in_service);
        out.push((new_capacity.max(0) as usize, efft_batch.max(0) as usize));
        capacity = new_capacity;
        updated += efft_batch;
    }
    out
}

/// One batch of a rolling update (Heat's `rolling_update.next_batch`): the group's size after
/// it and how many members get the new definition. `min_in_service` members are kept in
/// service by growing the group during the batch (with new members) instead of replacing
/// members in place; the extra members are removed when the update ends.
fn next_batch(
    target: i64,
    capacity: i64,
    updated: i64,
    batch_size: i64,
    min_in_service: i64,
) -> (i64, i64) {
    let efft_min = min_in_service.min(target).min(capacity);
    let efft_batch = batch_size.min((target - updated).max(0));
    let new_capacity = efft_batch + capacity.min(target - efft_batch).max(efft_min);
    (new_capacity, efft_batch)
}

/// Heat's resource-list order within a stack: a resource comes after every resource that
/// depends on it (the captures list `vdus` before `grp`), otherwise template order; a
/// resource whose rows were all replaced by a new one comes last (Heat lists rows in id
/// order; captured `heat-srv-raw-b`: `VDU2` before `VDU1`).
fn listing_order(s: &StackRec) -> Vec<&ResRec> {
    let (mut moved, mut remaining): (Vec<&ResRec>, Vec<&ResRec>) =
        s.resources.iter().partition(|r| r.relisted.is_some());
    moved.sort_by_key(|r| r.relisted);
    let mut out = Vec::with_capacity(s.resources.len());
    while !remaining.is_empty() {
        let pick = remaining
            .iter()
            .position(|r| !remaining.iter().any(|o| o.deps.contains(&r.name)))
            .unwrap_or(0);
        out.push(remaining.remove(pick));
    }
    out.extend(moved);
    out
}

/// Resource types of Heat 27's registry the simulator accepts (tracked without capacity unless
/// the simulator models them). Nova, Neutron, Cinder, Glance and Heat types are listed by
/// name, so a misspelling fails as Heat fails it; the other services' namespaces are accepted
/// whole.
fn is_known_heat_type(rtype: &str) -> bool {
    const EXACT: &[&str] = &[
        "OS::Nova::Flavor",
        "OS::Nova::FloatingIP",
        "OS::Nova::FloatingIPAssociation",
        "OS::Nova::HostAggregate",
        "OS::Nova::KeyPair",
        "OS::Nova::Quota",
        "OS::Nova::Server",
        "OS::Nova::ServerGroup",
        "OS::Neutron::AddressScope",
        "OS::Neutron::ExtraRoute",
        "OS::Neutron::ExtraRouteSet",
        "OS::Neutron::Firewall",
        "OS::Neutron::FirewallPolicy",
        "OS::Neutron::FirewallRule",
        "OS::Neutron::FloatingIP",
        "OS::Neutron::FloatingIPAssociation",
        "OS::Neutron::FloatingIPPortForward",
        "OS::Neutron::L2Gateway",
        "OS::Neutron::L2GatewayConnection",
        "OS::Neutron::MeteringLabel",
        "OS::Neutron::MeteringRule",
        "OS::Neutron::Net",
        "OS::Neutron::NetworkGateway",
        "OS::Neutron::Port",
        "OS::Neutron::ProviderNet",
        "OS::Neutron::QoSBandwidthLimitRule",
        "OS::Neutron::QoSDscpMarkingRule",
        "OS::Neutron::QoSMinimumBandwidthRule",
        "OS::Neutron::QoSMinimumPacketRateRule",
        "OS::Neutron::QoSPolicy",
        "OS::Neutron::Quota",
        "OS::Neutron::RBACPolicy",
        "OS::Neutron::Router",
        "OS::Neutron::RouterInterface",
        "OS::Neutron::SecurityGroup",
        "OS::Neutron::SecurityGroupRule",
        "OS::Neutron::Segment",
        "OS::Neutron::Subnet",
        "OS::Neutron::SubnetPool",
        "OS::Neutron::TaaS::TapFlow",
        "OS::Neutron::TaaS::TapService",
        "OS::Neutron::Trunk",
        "OS::Neutron::VPNService",
        "OS::Neutron::IKEPolicy",
        "OS::Neutron::IPsecPolicy",
        "OS::Neutron::IPsecSiteConnection",
        "OS::Cinder::EncryptedVolumeType",
        "OS::Cinder::QoSAssociation",
        "OS::Cinder::QoSSpecs",
        "OS::Cinder::Quota",
        "OS::Cinder::Volume",
        "OS::Cinder::VolumeAttachment",
        "OS::Cinder::VolumeType",
        "OS::Glance::Image",
        "OS::Glance::WebImage",
        "OS::Heat::AccessPolicy",
        "OS::Heat::AutoScalingGroup",
        "OS::Heat::CloudConfig",
        "OS::Heat::DeployedServer",
        "OS::Heat::InstanceGroup",
        "OS::Heat::MultipartMime",
        "OS::Heat::None",
        "OS::Heat::RandomString",
        "OS::Heat::ResourceChain",
        "OS::Heat::ResourceGroup",
        "OS::Heat::ScalingPolicy",
        "OS::Heat::SoftwareComponent",
        "OS::Heat::SoftwareConfig",
        "OS::Heat::SoftwareDeployment",
        "OS::Heat::SoftwareDeploymentGroup",
        "OS::Heat::Stack",
        "OS::Heat::StructuredConfig",
        "OS::Heat::StructuredDeployment",
        "OS::Heat::StructuredDeploymentGroup",
        "OS::Heat::SwiftSignal",
        "OS::Heat::SwiftSignalHandle",
        "OS::Heat::TestResource",
        "OS::Heat::UpdateWaitConditionHandle",
        "OS::Heat::Value",
        "OS::Heat::WaitCondition",
        "OS::Heat::WaitConditionHandle",
    ];
    const NAMESPACES: &[&str] = &[
        "OS::Aodh::",
        "OS::Barbican::",
        "OS::Blazar::",
        "OS::Designate::",
        "OS::Ironic::",
        "OS::Keystone::",
        "OS::Magnum::",
        "OS::Manila::",
        "OS::Mistral::",
        "OS::Monasca::",
        "OS::Octavia::",
        "OS::Sahara::",
        "OS::Senlin::",
        "OS::Swift::",
        "OS::Tacker::",
        "OS::Trove::",
        "OS::Vitrage::",
        "OS::Zaqar::",
        "OS::Zun::",
        "AWS::",
    ];
    EXACT.contains(&rtype) || NAMESPACES.iter().any(|ns| rtype.starts_with(ns))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use crate::cloud::CloudFile;
    use crate::driver::*;
    use crate::id::StackId;
    use crate::sim::{BuildFault, FaultKind, FaultySim, Method, SimCloud, StackDeleteFault};
    use crate::vectors::read_vector;
    use crate::zone::Resources;

    const DIR: &str = env!("CARGO_MANIFEST_DIR");

    fn sim(yaml: &str) -> SimCloud {
        SimCloud::new(CloudFile::from_yaml("test", yaml).unwrap(), 11)
    }

    fn params(v: serde_json::Value) -> Parameters {
        serde_json::from_value(v).unwrap()
    }

    fn bundle(template: &str, files: &[(&str, &str)]) -> TemplateBundle {
        TemplateBundle {
            template: template.to_owned(),
            files: files
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    async fn create(s: &SimCloud, name: &str, b: TemplateBundle, p: serde_json::Value) -> Stack {
        let id = s
            .create_stack(CreateStack::new(name, b, params(p)))
            .await
            .unwrap();
        s.show_stack(&id).await.unwrap()
    }

    async fn patch(s: &SimCloud, id: &StackId, p: serde_json::Value) -> Stack {
        s.update_stack(UpdateStack::parameters(id.clone(), params(p)))
            .await
            .unwrap();
        s.show_stack(id).await.unwrap()
    }

    fn output(stack: &Stack, key: &str) -> serde_json::Value {
        stack
            .outputs
            .iter()
            .find(|o| o.output_key == key)
            .map(|o| o.output_value.clone())
            .unwrap()
    }

    // --- captured Heat 27.0.1 / Nova 34.0.0 run ----------------------------------------

    const CAPTURED_CLOUD: &str = "
zones:
  az1:
    hosts:
      c1: {vcpus: 8, memory_mb: 7680, disk_gb: 60}
  nova:
    hosts:
      c2: {vcpus: 8, memory_mb: 7680, disk_gb: 60}
flavors:
  m1.tiny: {vcpus: 1, memory_mb: 512, disk_gb: 1}
  huge: {vcpus: 2000, memory_mb: 512, disk_gb: 1}
";

    fn vector(rel: &str) -> Option<serde_json::Value> {
        read_vector(DIR, rel).map(|t| serde_json::from_str(&t).unwrap())
    }

    /// Compares resources field by field (ids differ; everything else must match).
    fn assert_resources(ours: &[StackResource], captured: &serde_json::Value) {
        let theirs = captured["resources"].as_array().unwrap();
        assert_eq!(ours.len(), theirs.len(), "{ours:#?}");
        for (o, t) in ours.iter().zip(theirs) {
            assert_eq!(o.resource_name, t["resource_name"].as_str().unwrap());
            assert_eq!(o.resource_type, t["resource_type"].as_str().unwrap());
            assert_eq!(
                o.resource_status.to_string(),
                t["resource_status"].as_str().unwrap(),
                "{}",
                o.resource_name
            );
            assert_eq!(
                o.resource_status_reason,
                t["resource_status_reason"].as_str().unwrap(),
                "{}",
                o.resource_name
            );
            assert_eq!(
                o.parent_resource.as_deref(),
                t["parent_resource"].as_str(),
                "{}",
                o.resource_name
            );
            assert_eq!(
                o.physical_resource_id.is_empty(),
                t["physical_resource_id"].as_str().unwrap().is_empty()
            );
            let has_nested = t["links"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["rel"] == "nested");
            assert_eq!(
                o.nested_stack_id.is_some(),
                has_nested,
                "{}",
                o.resource_name
            );
        }
    }

    #[tokio::test]
    async fn reproduces_the_captured_heat_run_field_by_field() {
        let base = "openstack/heat/captured-heat-27.0.1";
        let Some(req) = vector(&format!("{base}/stack-create-request.json")) else {
            return;
        };
        let s = sim(CAPTURED_CLOUD);
        let b = bundle(&req["template"].to_string(), &[]);
        let mut create =
            CreateStack::new(req["stack_name"].as_str().unwrap(), b, Parameters::new());
        create.timeout_mins = Some(10);
        let id = s.create_stack(create).await.unwrap();

        // create: CREATE_FAILED, reason and outputs as captured
        let shown = s.show_stack(&id).await.unwrap();
        let cap = vector(&format!("{base}/stack-show-create-failed-novalidhost.json")).unwrap();
        assert_eq!(
            shown.stack_name,
            cap["stack"]["stack_name"].as_str().unwrap()
        );
        assert_eq!(
            shown.stack_status.to_string(),
            cap["stack"]["stack_status"].as_str().unwrap()
        );
        assert_eq!(
            shown.stack_status_reason,
            cap["stack"]["stack_status_reason"].as_str().unwrap()
        );
        assert_eq!(
            output(&shown, "hosts"),
            cap["stack"]["outputs"][0]["output_value"]
        );
        assert_eq!(shown.parameters["az"], json!("az1"));
        let res = s
            .list_resources(ListResources::new(id.clone(), 2))
            .await
            .unwrap();
        assert_resources(
            &res,
            &vector(&format!(
                "{base}/resources-list-nested-depth-2-create-failed.json"
            ))
            .unwrap(),
        );
        let top = s
            .list_resources(ListResources::new(id.clone(), 0))
            .await
            .unwrap();
        assert_resources(
            &top,
            &vector(&format!("{base}/resources-list-create-failed.json")).unwrap(),
        );
        let kept = res
            .iter()
            .find(|r| r.resource_name == "1")
            .unwrap()
            .physical_resource_id
            .clone();
        let failed0 = res
            .iter()
            .find(|r| r.resource_name == "0")
            .unwrap()
            .physical_resource_id
            .clone();

        // PATCH count=3: UPDATE_FAILED
        let p1 = vector(&format!("{base}/stack-update-patch-request.json")).unwrap();
        let shown = patch(&s, &id, p1["parameters"].clone()).await;
        let cap = vector(&format!("{base}/stack-show-update-failed-novalidhost.json")).unwrap();
        assert_eq!(
            shown.stack_status.to_string(),
            cap["stack"]["stack_status"].as_str().unwrap()
        );
        assert_eq!(
            shown.stack_status_reason,
            cap["stack"]["stack_status_reason"].as_str().unwrap()
        );
        assert_eq!(
            output(&shown, "hosts"),
            cap["stack"]["outputs"][0]["output_value"]
        );
        let res = s
            .list_resources(ListResources::new(id.clone(), 1))
            .await
            .unwrap();
        assert_resources(
            &res,
            &vector(&format!(
                "{base}/resources-list-nested-depth-1-update-failed.json"
            ))
            .unwrap(),
        );
        let get = |name: &str| {
            res.iter()
                .find(|r| r.resource_name == name)
                .unwrap()
                .physical_resource_id
                .clone()
        };
        assert_eq!(get("1"), kept, "the healthy member is untouched");
        assert_ne!(get("0"), failed0, "the failed member is replaced");

        // PATCH count=1, az=nova: UPDATE_COMPLETE on c2
        let p2 = vector(&format!("{base}/stack-update-patch-request-2.json")).unwrap();
        let shown = patch(&s, &id, p2["parameters"].clone()).await;
        let cap = vector(&format!("{base}/stack-show-update-complete.json")).unwrap();
        assert_eq!(
            shown.stack_status.to_string(),
            cap["stack"]["stack_status"].as_str().unwrap()
        );
        assert_eq!(
            shown.stack_status_reason,
            cap["stack"]["stack_status_reason"].as_str().unwrap()
        );
        assert_eq!(
            output(&shown, "hosts"),
            cap["stack"]["outputs"][0]["output_value"]
        );
        let res = s
            .list_resources(ListResources::new(id.clone(), 1))
            .await
            .unwrap();
        assert_resources(
            &res,
            &vector(&format!(
                "{base}/resources-list-nested-depth-1-update-complete.json"
            ))
            .unwrap(),
        );
        // the removed members' servers are gone: only the new one is left
        assert_eq!(s.server_ids().len(), 1);
    }

    #[tokio::test]
    async fn server_faults_match_captured_nova_server_shows() {
        let base = "openstack/nova/captured-nova-34.0.0";
        let Some(aa) = vector(&format!(
            "{base}/server-show-error-novalidhost-antiaffinity-admin.v2.104.json"
        )) else {
            return;
        };
        let placement = vector(&format!(
            "{base}/server-show-error-novalidhost-placement-admin.v2.104.json"
        ))
        .unwrap();
        let active = vector(&format!("{base}/server-show-active-admin.v2.104.json")).unwrap();
        let s = sim(CAPTURED_CLOUD);
        let t = r#"
heat_template_version: 2018-08-31
resources:
  grp: {type: OS::Nova::ServerGroup, properties: {name: vnf-aa, policies: [anti-affinity]}}
  a: {type: OS::Nova::Server, properties: {name: vdu-1, flavor: m1.tiny, image: cirros, availability_zone: az1, scheduler_hints: {group: {get_resource: grp}}}}
  b: {type: OS::Nova::Server, depends_on: a, properties: {name: vdu-2, flavor: m1.tiny, image: cirros, availability_zone: az1, scheduler_hints: {group: {get_resource: grp}}}}
  h: {type: OS::Nova::Server, properties: {name: vdu-huge, flavor: huge, image: cirros, availability_zone: az1}}
"#;
        let st = create(&s, "s", bundle(t, &[]), json!({})).await;
        let res = s
            .list_resources(ListResources::new(st.id.clone(), 0))
            .await
            .unwrap();
        let server = |name: &str| {
            let id = res
                .iter()
                .find(|r| r.resource_name == name)
                .unwrap()
                .physical_resource_id
                .clone();
            let s = s.clone();
            async move { s.server(&id.into()).await.unwrap() }
        };
        let (a, b, h) = (server("a").await, server("b").await, server("h").await);
        for (ours, cap) in [(&a, &active), (&b, &aa), (&h, &placement)] {
            let cap = &cap["server"];
            assert_eq!(ours.name, cap["name"].as_str().unwrap());
            assert_eq!(ours.status, cap["status"].as_str().unwrap());
            assert_eq!(
                ours.host.as_ref().map(|h| h.as_str()),
                cap["OS-EXT-SRV-ATTR:host"].as_str()
            );
            assert_eq!(
                ours.zone.as_ref().map(|z| z.as_str()),
                cap["OS-EXT-AZ:availability_zone"].as_str()
            );
            assert_eq!(
                ours.fault.as_ref().map(|f| f.code),
                cap["fault"]["code"].as_u64().map(|c| c as u16)
            );
            assert_eq!(
                ours.fault.as_ref().map(|f| f.message.as_str()),
                cap["fault"]["message"].as_str()
            );
            assert_eq!(
                ours.server_groups.len(),
                cap["server_groups"].as_array().unwrap().len()
            );
        }
        // the first failure in template order is reported
        assert_eq!(
            st.stack_status_reason,
            "Resource CREATE failed: ResourceInError: resources.b: Went to status ERROR due to \"Message: No valid host was found. There are not enough hosts available., Code: 500\""
        );
    }

    // --- Tacker StandardUserData (VDU1-0 / VDU1-1 of a nested VDU1.yaml) -----------------

    const TACKER_TOP: &str = r#"
heat_template_version: 2013-05-23
parameters:
  nfv: {type: json}
resources:
  VDU1-0:
    type: VDU1.yaml
    properties:
      flavor: {get_param: [nfv, VDU, VDU1-0, computeFlavourId]}
      image-VDU1-VirtualStorage: {get_param: [nfv, VDU, VDU1-VirtualStorage, vcImageId]}
      zone: {get_param: [nfv, VDU, VDU1-0, locationConstraints]}
      net1: {get_param: [nfv, CP, VDU1_CP1, network]}
      net2: {get_resource: internalVL1}
      net3: {get_resource: internalVL2}
  VDU1-1:
    type: VDU1.yaml
    properties:
      flavor: {get_param: [nfv, VDU, VDU1-1, computeFlavourId]}
      image-VDU1-VirtualStorage: {get_param: [nfv, VDU, VDU1-VirtualStorage, vcImageId]}
      zone: {get_param: [nfv, VDU, VDU1-1, locationConstraints]}
      net1: {get_param: [nfv, CP, VDU1_CP1, network]}
      net2: {get_resource: internalVL1}
      net3: {get_resource: internalVL2}
  internalVL1: {type: OS::Neutron::Net}
  internalVL2: {type: OS::Neutron::Net}
  nfvi_node_affinity:
    type: OS::Nova::ServerGroup
    properties: {name: nfvi_node_affinity, policies: [affinity]}
outputs:
  zones:
    value: [{get_attr: [VDU1-0, zone_out]}, {get_attr: [VDU1-1, zone_out]}]
"#;

    const TACKER_CLOUD: &str = "
zones:
  az-1:
    hosts:
      full-1: {vcpus: 1, memory_mb: 1024, disk_gb: 10}
  az-2:
    hosts:
      roomy-1: {vcpus: 16, memory_mb: 65536, disk_gb: 500}
      roomy-2: {vcpus: 16, memory_mb: 65536, disk_gb: 500}
flavors:
  sample4G: {vcpus: 2, memory_mb: 4096, disk_gb: 40}
";

    fn nfv(z0: &str, z1: &str) -> serde_json::Value {
        json!({"nfv": {"VDU": {
            "VDU1-0": {"computeFlavourId": "sample4G", "locationConstraints": z0},
            "VDU1-1": {"computeFlavourId": "sample4G", "locationConstraints": z1},
            "VDU1-VirtualStorage": {"vcImageId": "cirros"}},
            "CP": {"VDU1_CP1": {"network": "net0"}}}})
    }

    fn tacker_bundle(nested: &str) -> TemplateBundle {
        // the nested template gets an output, as Tacker's samples may have
        let nested = format!("{nested}\noutputs:\n  zone_out:\n    value: {{get_attr: [VDU1, OS-EXT-AZ:availability_zone]}}\n");
        bundle(TACKER_TOP, &[("VDU1.yaml", &nested)])
    }

    #[tokio::test]
    async fn tacker_standard_user_data_texts_match_exactly() {
        let Some(nested) = read_vector(DIR, "tacker/az_reselection/hot/nested/VDU1.yaml") else {
            return;
        };
        let reasons: serde_json::Value = serde_json::from_str(
            &read_vector(DIR, "tacker/az_reselection/stack_status_reasons.json").unwrap(),
        )
        .unwrap();
        let reason = |i: usize| {
            reasons[i]["stack_status_reason"]
                .as_str()
                .unwrap()
                .to_owned()
        };

        // VDU1-0 in the full zone
        let s = sim(TACKER_CLOUD);
        let st = create(&s, "vnf-a", tacker_bundle(&nested), nfv("az-1", "az-2")).await;
        assert_eq!(st.stack_status.to_string(), "CREATE_FAILED");
        assert_eq!(st.stack_status_reason, reason(0));
        let st = patch(&s, &st.id, nfv("az-1", "az-2")).await;
        assert_eq!(st.stack_status.to_string(), "UPDATE_FAILED");
        assert_eq!(st.stack_status_reason, reason(1));
        // reselected: both in az-2
        let st = patch(&s, &st.id, nfv("az-2", "az-2")).await;
        assert_eq!(
            st.stack_status_reason,
            "Stack UPDATE completed successfully"
        );
        assert_eq!(output(&st, "zones"), json!(["az-2", "az-2"]));

        // VDU1-1 in the full zone
        let s = sim(TACKER_CLOUD);
        let st = create(&s, "vnf-b", tacker_bundle(&nested), nfv("az-2", "az-1")).await;
        assert_eq!(st.stack_status_reason, reason(2));
        let st = patch(&s, &st.id, nfv("az-2", "az-1")).await;
        assert_eq!(st.stack_status_reason, reason(3));

        // nested listing: VDU1-0's resources carry parent_resource and the nested stack id
        let res = s
            .list_resources(ListResources::new(st.id.clone(), 1))
            .await
            .unwrap();
        let vdu = res
            .iter()
            .find(|r| r.resource_name == "VDU1" && r.parent_resource.as_deref() == Some("VDU1-1"))
            .unwrap();
        assert_eq!(vdu.resource_status.to_string(), "CREATE_FAILED");
        let parent = res.iter().find(|r| r.resource_name == "VDU1-1").unwrap();
        assert_eq!(parent.resource_type, "VDU1.yaml");
        assert_eq!(parent.nested_stack_id.as_ref(), Some(&vdu.stack_id));
        assert_eq!(parent.resource_status.to_string(), "UPDATE_FAILED");
    }

    #[tokio::test]
    async fn retries_exhausted_fault_gives_novas_text() {
        let Some(nested) = read_vector(DIR, "tacker/az_reselection/hot/nested/VDU1.yaml") else {
            return;
        };
        let faulty = FaultySim::new(sim(TACKER_CLOUD));
        faulty.fail_next_builds(1, BuildFault::RetriesExhausted);
        let id = faulty
            .create_stack(CreateStack::new(
                "v",
                tacker_bundle(&nested),
                params(nfv("az-2", "az-2")),
            ))
            .await
            .unwrap();
        let st = faulty.show_stack(&id).await.unwrap();
        // builds run in reverse template order: VDU1-1 takes the fault
        let re = regex::Regex::new(r#"^Resource CREATE failed: ResourceInError: resources\.VDU1-1\.resources\.VDU1: Went to status ERROR due to "Message: Exceeded maximum number of retries\. Exhausted all hosts available for retrying build failures for instance [0-9a-f-]{36}\., Code: 500"$"#).unwrap();
        assert!(
            re.is_match(&st.stack_status_reason),
            "{}",
            st.stack_status_reason
        );
    }

    #[tokio::test]
    async fn tacker_pod_affinity_hot_spreads_workers_over_hosts() {
        let base = "tacker/pod_affinity/hot";
        let Some(top) = read_vector(DIR, &format!("{base}/podaffinity_hot_top.yaml")) else {
            return;
        };
        let master = read_vector(
            DIR,
            &format!("{base}/nested/podaffinity_nested_master.yaml"),
        )
        .unwrap();
        let worker = read_vector(
            DIR,
            &format!("{base}/nested/podaffinity_nested_worker.yaml"),
        )
        .unwrap();
        let s = sim("
zones:
  nova:
    hosts:
      h1: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
      h2: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
      h3: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
flavors:
  m1.medium: {vcpus: 2, memory_mb: 4096, disk_gb: 40}
");
        let b = bundle(
            &top,
            &[
                ("podaffinity_nested_master.yaml", &master),
                ("podaffinity_nested_worker.yaml", &worker),
            ],
        );
        let nfv = json!({"nfv": {"VDU": {
            "masterNode": {"flavor": "m1.medium", "image": "ubuntu"},
            "workerNode": {"flavor": "m1.medium", "image": "ubuntu"}},
            "CP": {"masterNode_CP1": {"network": "n"}, "workerNode_CP2": {"network": "n"}}}});
        let st = create(&s, "k8s", b, nfv).await;
        assert_eq!(
            st.stack_status.to_string(),
            "CREATE_COMPLETE",
            "{}",
            st.stack_status_reason
        );
        let res = s
            .list_resources(ListResources::new(st.id.clone(), 2))
            .await
            .unwrap();
        let mut worker_hosts = Vec::new();
        for r in res.iter().filter(|r| r.resource_name == "workerNode") {
            let info = s
                .server(&r.physical_resource_id.as_str().into())
                .await
                .unwrap();
            assert_eq!(info.server_groups.len(), 1);
            worker_hosts.push(info.host.unwrap());
        }
        assert_eq!(worker_hosts.len(), 2);
        assert_ne!(
            worker_hosts[0], worker_hosts[1],
            "anti-affinity server group"
        );
        assert_eq!(
            res.iter()
                .filter(|r| r.resource_name == "masterNode")
                .count(),
            3
        );
        // an update that changes nothing keeps every server
        let before = s.server_ids();
        let st = patch(&s, &st.id, json!({})).await;
        assert_eq!(st.stack_status.to_string(), "UPDATE_COMPLETE");
        assert_eq!(s.server_ids(), before);
    }

    #[tokio::test]
    async fn demo_vnf_does_not_fit_in_the_small_demo_zone() {
        let s = SimCloud::new(
            CloudFile::from_yaml("demo", include_str!("../../../examples/clouds/demo.yaml"))
                .unwrap(),
            1,
        );
        let t = r#"
heat_template_version: 2018-08-31
parameters:
  z1: {type: string}
  z2: {type: string}
resources:
  VDU1:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def: {type: OS::Nova::Server, properties: {flavor: m1.small, image: cirros, availability_zone: {get_param: z1}}}
  VDU2: {type: OS::Nova::Server, properties: {flavor: m1.medium, image: cirros, availability_zone: {get_param: z2}}}
"#;
        let st = create(
            &s,
            "demo",
            bundle(t, &[]),
            json!({"z1": "AZ-1", "z2": "AZ-2"}),
        )
        .await;
        assert_eq!(
            st.stack_status_reason,
            "Resource CREATE failed: ResourceInError: resources.VDU1.resources[0]: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\""
        );
        let st = patch(&s, &st.id, json!({"z1": "AZ-3"})).await;
        assert_eq!(st.stack_status.to_string(), "UPDATE_COMPLETE");
    }

    // --- autoscaling groups and stack deletes ------------------------------------------

    #[test]
    fn rolling_update_batches_follow_heat() {
        use super::{next_batch, rolling_batches};
        // (target, current, updated, batch size, min in service) -> batch, from Heat's
        // heat/tests/autoscaling/test_rolling_update.py scenarios
        for (args, want) in [
            ((4, 4, 0, 1, 0), (4, 1)),
            ((4, 4, 0, 1, 4), (5, 1)),
            ((4, 5, 4, 1, 4), (4, 0)),
            ((4, 4, 0, 2, 4), (6, 2)),
            ((5, 5, 4, 2, 0), (5, 1)),
        ] {
            let (t, c, u, b, m) = args;
            assert_eq!(next_batch(t, c, u, b, m), want, "{args:?}");
        }
        // no rolling_updates: one member per batch; a batch of the group's size: one batch
        assert_eq!(rolling_batches(2, 2, 1, 0), vec![(2, 1), (2, 1)]);
        assert_eq!(rolling_batches(2, 2, 4, 0), vec![(2, 2)]);
        // min_in_service 2 of 2: the group grows by a new member, then shrinks back
        assert_eq!(rolling_batches(2, 2, 1, 2), vec![(3, 1), (3, 1), (2, 0)]);
    }

    const ASG_TOP: &str = "
heat_template_version: 2013-05-23
parameters:
  zone: {type: string}
  n: {type: number, default: 2}
resources:
  grp:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 0
      max_size: 4
      desired_capacity: {get_param: n}
ROLLING
      resource:
        type: member.yaml
        properties: {zone: {get_param: zone}}
";

    const ASG_MEMBER: &str = "
heat_template_version: 2013-05-23
parameters:
  zone: {type: string}
resources:
  VDU1: {type: OS::Nova::Server, properties: {name: VDU1, flavor: m1.small, image: cirros, availability_zone: {get_param: zone}}}
";

    fn asg_bundle(rolling: &str) -> TemplateBundle {
        bundle(
            &ASG_TOP.replace("ROLLING", rolling),
            &[("member.yaml", ASG_MEMBER)],
        )
    }

    async fn member_zones(s: &SimCloud, id: &StackId) -> Vec<(String, String, String)> {
        let res = s
            .list_resources(ListResources::new(id.clone(), 2))
            .await
            .unwrap();
        let mut out = Vec::new();
        for r in res.iter().filter(|r| r.resource_name == "VDU1") {
            let info = s
                .server(&r.physical_resource_id.as_str().into())
                .await
                .unwrap();
            out.push((
                r.parent_resource.clone().unwrap(),
                info.zone.map(|z| z.0).unwrap_or_default(),
                info.status,
            ));
        }
        out.sort();
        out
    }

    #[tokio::test]
    async fn autoscaling_group_rolls_one_member_per_batch_and_stops_at_a_failed_batch() {
        // AZ-1 has room for 4 m1.small, AZ-2 for 1
        let s = sim("
zones:
  AZ-1: {hosts: {c1: {vcpus: 8, memory_mb: 8192, disk_gb: 80}}}
  AZ-2: {hosts: {c2: {vcpus: 1, memory_mb: 2048, disk_gb: 20}}}
flavors:
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
");
        let st = create(&s, "a", asg_bundle(""), json!({"zone": "AZ-1"})).await;
        assert_eq!(st.stack_status.to_string(), "CREATE_COMPLETE");
        let first = s
            .list_resources(ListResources::new(st.id.clone(), 1))
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.parent_resource.as_deref() == Some("grp"))
            .unwrap()
            .resource_name;
        // no rolling_updates: batches of one; the first moves the oldest member into AZ-2's
        // only slot, the second fails there and ends the update
        let st = patch(&s, &st.id, json!({"zone": "AZ-2"})).await;
        assert_eq!(st.stack_status.to_string(), "UPDATE_FAILED");
        assert!(
            st.stack_status_reason.starts_with("Resource UPDATE failed: resources.")
                && st.stack_status_reason.ends_with(": resources.grp.Resource CREATE failed: ResourceInError: resources.VDU1: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\"")
                && !st.stack_status_reason.contains(&first),
            "{}",
            st.stack_status_reason
        );
        let members = member_zones(&s, &st.id).await;
        assert!(
            members.contains(&(first.clone(), "AZ-2".into(), "ACTIVE".into())),
            "{members:?}"
        );
        assert_eq!(
            members.iter().filter(|m| m.2 == "ERROR").count(),
            1,
            "{members:?}"
        );
        // the second member's old server in AZ-1 is kept while its replacement failed
        assert_eq!(s.server_ids().len(), 3);
    }

    #[tokio::test]
    async fn a_whole_group_batch_moves_every_member_in_one_update() {
        let s = sim(DEMO);
        let rolling =
            "      rolling_updates: {max_batch_size: 2, min_in_service: 0, pause_time: 0}";
        let st = create(&s, "w", asg_bundle(rolling), json!({"zone": "AZ-1"})).await;
        assert_eq!(st.stack_status.to_string(), "CREATE_COMPLETE");
        let st = patch(&s, &st.id, json!({"zone": "AZ-2"})).await;
        assert_eq!(st.stack_status.to_string(), "UPDATE_COMPLETE");
        let members = member_zones(&s, &st.id).await;
        assert!(members.iter().all(|m| m.1 == "AZ-2"), "{members:?}");
        assert_eq!(s.server_ids().len(), 2, "the old servers are gone");
    }

    /// `stack_create_shows: 2`: a create is seen in progress by two polls, then complete; an
    /// update is not slowed.
    #[tokio::test]
    async fn slow_stack_creates() {
        let s = sim(&format!("{DEMO}stack_create_shows: 2\n"));
        let id = s
            .create_stack(CreateStack::new(
                "slow",
                bundle(ONE_VM, &[]),
                params(json!({})),
            ))
            .await
            .unwrap();
        for _ in 0..2 {
            let shown = s.show_stack(&id).await.unwrap();
            assert_eq!(shown.stack_status.to_string(), "CREATE_IN_PROGRESS");
        }
        let shown = s.show_stack(&id).await.unwrap();
        assert_eq!(shown.stack_status.to_string(), "CREATE_COMPLETE");
        // A snapshot keeps the count; an update is at once.
        let s = sim(&format!("{DEMO}stack_create_shows: 5\n"));
        let id = s
            .create_stack(CreateStack::new(
                "slow",
                bundle(ONE_VM, &[]),
                params(json!({})),
            ))
            .await
            .unwrap();
        let _ = s.show_stack(&id).await.unwrap();
        let s = SimCloud::restore(&s.snapshot().unwrap()).unwrap();
        let shown = s.show_stack(&id).await.unwrap();
        assert_eq!(shown.stack_status.to_string(), "CREATE_IN_PROGRESS");
        s.update_stack(UpdateStack::parameters(id.clone(), params(json!({}))))
            .await
            .unwrap();
        let shown = s.show_stack(&id).await.unwrap();
        assert_eq!(shown.stack_status.to_string(), "UPDATE_COMPLETE");
    }

    /// A stack of one `OS::Heat::TestResource` `t` with the given properties, and outputs of
    /// its `output` attribute and its id.
    fn test_resource(props: &str) -> String {
        format!(
            "heat_template_version: 2018-08-31\nresources:\n  t:\n    type: OS::Heat::TestResource\n    properties: {props}\noutputs:\n  out: {{value: {{get_attr: [t, output]}}}}\n  id: {{value: {{get_resource: t}}}}\n"
        )
    }

    fn clocked() -> (SimCloud, VirtualClock) {
        let s = sim(DEMO);
        let clock =
            VirtualClock::new(chrono::DateTime::UNIX_EPOCH + chrono::Duration::days(20_000));
        s.set_clock(std::sync::Arc::new(clock.clone()));
        (s, clock)
    }

    async fn shown(s: &SimCloud, id: &StackId) -> (String, String) {
        let st = s.show_stack(id).await.unwrap();
        (st.stack_status.to_string(), st.stack_status_reason)
    }

    async fn row(s: &SimCloud, id: &StackId) -> (String, String) {
        let r = s
            .list_resources(ListResources::new(id.clone(), 0))
            .await
            .unwrap();
        (
            r[0].resource_status.to_string(),
            r[0].resource_status_reason.clone(),
        )
    }

    /// Heat's `_check_status_complete`: in progress until more than `action_wait_secs.create`
    /// seconds passed (`wait_secs` when the map has no `create`), on the simulator's clock;
    /// the `output` attribute is `value`, the id Heat's `physical_resource_name()`.
    #[tokio::test]
    async fn a_test_resource_holds_its_create_for_its_wait() {
        let (s, clock) = clocked();
        let t = test_resource("{value: hello, wait_secs: 5, action_wait_secs: {create: 30}}");
        let id = s
            .create_stack(CreateStack::new("tr", bundle(&t, &[]), params(json!({}))))
            .await
            .unwrap();
        let started = (
            "CREATE_IN_PROGRESS".to_owned(),
            "Stack CREATE started".to_owned(),
        );
        assert_eq!(shown(&s, &id).await, started);
        assert_eq!(row(&s, &id).await.0, "CREATE_IN_PROGRESS");
        clock.advance(Duration::from_secs(30));
        assert_eq!(shown(&s, &id).await, started, "waited > wait_secs, not >=");
        // a restored cloud keeps the wait once given its clock again
        let s = SimCloud::restore(&s.snapshot().unwrap()).unwrap();
        assert_eq!(
            shown(&s, &id).await,
            started,
            "without a clock, time stands still"
        );
        s.set_clock(std::sync::Arc::new(clock.clone()));
        assert_eq!(shown(&s, &id).await, started);
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            shown(&s, &id).await,
            (
                "CREATE_COMPLETE".to_owned(),
                "Stack CREATE completed successfully".to_owned()
            )
        );
        assert_eq!(
            row(&s, &id).await,
            ("CREATE_COMPLETE".to_owned(), "state changed".to_owned())
        );
        let st = s.show_stack(&id).await.unwrap();
        assert_eq!(output(&st, "out"), json!("hello"));
        let pid = output(&st, "id");
        let pid = pid.as_str().unwrap();
        assert!(
            pid.starts_with("tr-t-") && pid.len() == "tr-t-".len() + 12,
            "{pid}"
        );

        // `wait_secs` alone; without a clock the wait never ends
        let t = test_resource("{wait_secs: 5}");
        let id = s
            .create_stack(CreateStack::new("tr2", bundle(&t, &[]), params(json!({}))))
            .await
            .unwrap();
        clock.advance(Duration::from_secs(5));
        assert_eq!(shown(&s, &id).await.0, "CREATE_IN_PROGRESS");
        clock.advance(Duration::from_secs(1));
        let st = s.show_stack(&id).await.unwrap();
        assert_eq!(st.stack_status.to_string(), "CREATE_COMPLETE");
        assert_eq!(
            output(&st, "out"),
            json!("test_string"),
            "Heat's default value"
        );
        let unclocked = sim(DEMO);
        let id = unclocked
            .create_stack(CreateStack::new("tr3", bundle(&t, &[]), params(json!({}))))
            .await
            .unwrap();
        for _ in 0..5 {
            assert_eq!(shown(&unclocked, &id).await.0, "CREATE_IN_PROGRESS");
        }
    }

    /// `fail: true`: the resource and its stack fail once the wait is over, with Heat's
    /// `ValueError` (the text of Heat's own `test_exception.py`); no id, no output.
    #[tokio::test]
    async fn a_failing_test_resource_fails_after_its_wait() {
        let (s, clock) = clocked();
        let t = test_resource("{fail: true, action_wait_secs: {create: 10}}");
        let id = s
            .create_stack(CreateStack::new("bad", bundle(&t, &[]), params(json!({}))))
            .await
            .unwrap();
        assert_eq!(shown(&s, &id).await.0, "CREATE_IN_PROGRESS");
        assert_eq!(row(&s, &id).await.0, "CREATE_IN_PROGRESS");
        clock.advance(Duration::from_secs(11));
        assert_eq!(
            shown(&s, &id).await,
            (
                "CREATE_FAILED".to_owned(),
                "Resource CREATE failed: ValueError: resources.t: Test Resource failed t"
                    .to_owned()
            )
        );
        assert_eq!(
            row(&s, &id).await,
            (
                "CREATE_FAILED".to_owned(),
                "ValueError: resources.t: Test Resource failed t".to_owned()
            )
        );
        let st = s.show_stack(&id).await.unwrap();
        assert_eq!(output(&st, "out"), json!(null));
        assert_eq!(output(&st, "id"), json!(null));
        // without a wait it fails at once ("true" as a string is a boolean to Heat)
        let t = test_resource("{fail: \"True\"}");
        let st = create(&s, "bad2", bundle(&t, &[]), json!({})).await;
        assert_eq!(st.stack_status.to_string(), "CREATE_FAILED");
    }

    /// Properties outside Heat's schema are refused before anything is created, with Heat's
    /// messages (`Unknown Property`, `str_to_num`, `_get_bool`).
    #[tokio::test]
    async fn a_test_resource_takes_heats_properties_only() {
        let (s, _clock) = clocked();
        let ok = test_resource(
            "{value: v, update_replace: false, fail: false, client_name: nova, entity_name: servers, wait_secs: 0, action_wait_secs: {create: 1, update: 2, delete: 3}, attr_wait_secs: 0, constraint_prop_secs: 0, update_replace_value: x}",
        );
        create(&s, "ok", bundle(&ok, &[]), json!({})).await;
        for (props, want) in [
            ("{foo: 1}", "Property error: resources.t.properties: Unknown Property foo"),
            (
                "{action_wait_secs: {snapshot: 1}}",
                "Property error: resources.t.properties.action_wait_secs: Unknown Property snapshot",
            ),
            (
                "{wait_secs: abc}",
                "Property error: resources.t.properties.wait_secs: could not convert string to float: 'abc'",
            ),
            (
                "{action_wait_secs: {create: soon}}",
                "Property error: resources.t.properties.action_wait_secs.create: could not convert string to float: 'soon'",
            ),
            ("{fail: Yes}", "Property error: resources.t.properties.fail: \"yes\" is not a valid boolean"),
        ] {
            let e = s
                .create_stack(CreateStack::new("bad", bundle(&test_resource(props), &[]), params(json!({}))))
                .await
                .unwrap_err();
            match e {
                DriverError::Invalid { message, .. } => assert_eq!(message, want, "{props}"),
                other => panic!("{props}: {other:?}"),
            }
        }
        // every refusal above reused the name `bad`: none of them created a stack
    }

    /// Update: in place, waiting `action_wait_secs.update` only when `value` changed;
    /// `update_replace` replaces (a create, new id). Delete: in progress for
    /// `action_wait_secs.delete`, whatever the polls.
    #[tokio::test]
    async fn a_test_resource_waits_on_update_and_delete() {
        let (s, clock) = clocked();
        let t = "heat_template_version: 2018-08-31\nparameters:\n  v: {type: string, default: a}\n  r: {type: boolean, default: false}\n  w: {type: number, default: 0}\nresources:\n  t:\n    type: OS::Heat::TestResource\n    properties: {value: {get_param: v}, update_replace: {get_param: r}, wait_secs: {get_param: w}, action_wait_secs: {update: 10, delete: 20}}\noutputs:\n  out: {value: {get_attr: [t, output]}}\n  id: {value: {get_resource: t}}\n";
        let st = create(&s, "up", bundle(t, &[]), json!({})).await;
        assert_eq!(st.stack_status.to_string(), "CREATE_COMPLETE");
        let first = output(&st, "id");
        // another property than `value`: at once
        let st = patch(&s, &st.id, json!({"w": 1})).await;
        assert_eq!(st.stack_status.to_string(), "UPDATE_COMPLETE");
        // `value`: ten seconds
        let st = patch(&s, &st.id, json!({"v": "b"})).await;
        assert_eq!(
            (st.stack_status.to_string(), st.stack_status_reason.as_str()),
            ("UPDATE_IN_PROGRESS".to_owned(), "Stack UPDATE started")
        );
        assert_eq!(row(&s, &st.id).await.0, "UPDATE_IN_PROGRESS");
        clock.advance(Duration::from_secs(11));
        let st = s.show_stack(&st.id).await.unwrap();
        assert_eq!(st.stack_status.to_string(), "UPDATE_COMPLETE");
        assert_eq!(output(&st, "out"), json!("b"));
        assert_eq!(output(&st, "id"), first, "updated in place");
        // `update_replace` with a new value: replaced, with the create wait (`wait_secs` 1)
        let st = patch(&s, &st.id, json!({"v": "c", "r": true})).await;
        assert_eq!(st.stack_status.to_string(), "UPDATE_IN_PROGRESS");
        clock.advance(Duration::from_secs(2));
        let st = s.show_stack(&st.id).await.unwrap();
        assert_eq!(st.stack_status.to_string(), "UPDATE_COMPLETE");
        assert_ne!(output(&st, "id"), first, "replaced");
        // delete: twenty seconds of polls in progress, then gone
        s.delete_stack(&st.id).await.unwrap();
        for _ in 0..5 {
            assert_eq!(shown(&s, &st.id).await.0, "DELETE_IN_PROGRESS");
        }
        clock.advance(Duration::from_secs(21));
        let mut gone = false;
        for _ in 0..3 {
            if s.show_stack(&st.id).await.is_err() {
                gone = true;
                break;
            }
        }
        assert!(gone, "the delete completes once its wait is over");
    }

    #[tokio::test]
    async fn slow_and_failed_stack_deletes() {
        let f = FaultySim::new(sim(DEMO));
        let s = f.sim().clone();
        // kept in progress for three shows
        let st = create(&s, "slow", bundle(ONE_VM, &[]), json!({})).await;
        f.fail_next_stack_deletes(1, StackDeleteFault::Slow { shows: 3 });
        f.delete_stack(&st.id).await.unwrap();
        for _ in 0..3 {
            let shown = f.show_stack(&st.id).await.unwrap();
            assert_eq!(shown.stack_status.to_string(), "DELETE_IN_PROGRESS");
            assert_eq!(s.server_ids().len(), 1, "a slow delete holds its servers");
            let zones = s.list_zones(ListZones::default()).await.unwrap();
            assert_eq!(zones[0].free(), Some(Resources::new(7, 14336, 140)));
        }
        assert!(f.show_stack(&st.id).await.unwrap_err().is_not_found());
        assert!(s.server_ids().is_empty());

        // a failed delete of a stack whose server is in a group's nested stack
        let st = create(&s, "fails", asg_bundle(""), json!({"zone": "AZ-1"})).await;
        f.fail_next_stack_deletes(
            1,
            StackDeleteFault::Failed {
                message: "boom".into(),
            },
        );
        f.delete_stack(&st.id).await.unwrap();
        let shown = f.show_stack(&st.id).await.unwrap();
        assert_eq!(shown.stack_status.to_string(), "DELETE_IN_PROGRESS");
        let shown = f.show_stack(&st.id).await.unwrap();
        assert_eq!(shown.stack_status.to_string(), "DELETE_FAILED");
        let re = regex::Regex::new(r#"^Resource DELETE failed: ResourceInError: resources\.grp\.resources\.[a-z2-7]{12}\.resources\.VDU1: Went to status ERROR due to "Server VDU1 delete failed: \(500\) boom"$"#).unwrap();
        assert!(
            re.is_match(&shown.stack_status_reason),
            "{}",
            shown.stack_status_reason
        );
        let res = f
            .list_resources(ListResources::new(st.id.clone(), 2))
            .await
            .unwrap();
        assert_eq!(res[0].resource_status.to_string(), "DELETE_FAILED");
        assert_eq!(s.server_ids().len(), 2, "nothing was deleted");
        assert!(matches!(
            f.update_stack(UpdateStack::parameters(st.id.clone(), Parameters::new()))
                .await,
            Err(DriverError::Invalid { .. })
        ));
        // it stays DELETE_FAILED until deleted again, and then it goes
        let shown = f.show_stack(&st.id).await.unwrap();
        assert_eq!(shown.stack_status.to_string(), "DELETE_FAILED");
        f.delete_stack(&st.id).await.unwrap();
        assert_eq!(
            f.show_stack(&st.id).await.unwrap().stack_status.to_string(),
            "DELETE_IN_PROGRESS"
        );
        assert!(f.show_stack(&st.id).await.unwrap_err().is_not_found());
        assert!(s.server_ids().is_empty());
        let zones = s.list_zones(ListZones::default()).await.unwrap();
        assert_eq!(zones[0].free(), Some(Resources::new(8, 16384, 160)));
    }

    // --- HOT features ------------------------------------------------------------------

    const DEMO: &str = "
zones:
  AZ-1:
    hosts:
      c1: {vcpus: 4, memory_mb: 8192, disk_gb: 80}
      c2: {vcpus: 4, memory_mb: 8192, disk_gb: 80}
  AZ-2:
    hosts:
      c3: {vcpus: 4, memory_mb: 8192, disk_gb: 80}
flavors:
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
images: [cirros]
";

    /// Real Heat 27 shows a `json` parameter as JSON text (found by the real OpenStack
    /// scenario change_ext_conn_updates_the_stack_in_place); templates still read it as data.
    #[tokio::test]
    async fn a_json_parameter_is_shown_as_json_text() {
        let s = sim(DEMO);
        let t = r#"
heat_template_version: 2018-08-31
parameters:
  nfv: {type: json}
resources: {}
outputs:
  net: {value: {get_param: [nfv, CP, VDU1_CP1, network]}}
"#;
        let nfv = json!({"CP": {"VDU1_CP1": {"network": "net-a"}}});
        let st = create(&s, "j", bundle(t, &[]), json!({ "nfv": nfv })).await;
        assert_eq!(st.stack_status.to_string(), "CREATE_COMPLETE");
        let serde_json::Value::String(text) = &st.parameters["nfv"] else {
            panic!("nfv shown as {}", st.parameters["nfv"]);
        };
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(text).unwrap(),
            nfv
        );
        assert_eq!(st.outputs[0].output_value, json!("net-a"));
    }

    #[tokio::test]
    async fn resource_group_index_and_outputs() {
        let s = sim(DEMO);
        let t = r#"
heat_template_version: 2018-08-31
parameters:
  n: {type: number, default: 2}
resources:
  g:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: n}
      resource_def:
        type: OS::Nova::Server
        properties: {name: "vm-%index%", flavor: m1.small, image: cirros, availability_zone: AZ-1}
outputs:
  names: {value: {get_attr: [g, name]}}
  zones: {value: {get_attr: [g, availability_zone]}}
  refs: {value: {get_attr: [g, refs]}}
  first: {value: {get_attr: [g, resource.0, OS-EXT-SRV-ATTR:host]}}
  joined: {value: {list_join: ["/", [{get_param: OS::stack_name}, x]]}}
"#;
        let st = create(&s, "rg", bundle(t, &[]), json!({})).await;
        assert_eq!(st.stack_status.to_string(), "CREATE_COMPLETE");
        assert_eq!(
            st.stack_status_reason,
            "Stack CREATE completed successfully"
        );
        assert_eq!(output(&st, "names"), json!(["vm-0", "vm-1"]));
        assert_eq!(output(&st, "zones"), json!(["AZ-1", "AZ-1"]));
        assert_eq!(output(&st, "refs").as_array().unwrap().len(), 2);
        assert!(output(&st, "first").is_string());
        assert_eq!(output(&st, "joined"), json!("rg/x"));
    }

    #[tokio::test]
    async fn autoscaling_group_scales_in_by_its_oldest_members_as_heat_does() {
        let s = sim(DEMO);
        let worker = r#"
heat_template_version: 2013-05-23
parameters:
  flavor: {type: string}
  scheduler_hints: {type: string}
resources:
  workerNode:
    type: OS::Nova::Server
    properties:
      flavor: {get_param: flavor}
      image: cirros
      scheduler_hints: {group: {get_param: scheduler_hints}}
outputs:
  host: {value: {get_attr: [workerNode, host]}}
"#;
        let t = r#"
heat_template_version: 2013-05-23
parameters:
  size: {type: number, default: 2}
resources:
  srvgroup: {type: OS::Nova::ServerGroup, properties: {name: g, policies: [anti-affinity]}}
  workers:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 4
      desired_capacity: {get_param: size}
      resource:
        type: worker.yaml
        properties:
          flavor: m1.small
          scheduler_hints: {get_resource: srvgroup}
  scale_out:
    type: OS::Heat::ScalingPolicy
    properties: {scaling_adjustment: 1, auto_scaling_group_id: {get_resource: workers}, adjustment_type: change_in_capacity}
outputs:
  hosts: {value: {get_attr: [workers, host]}}
  size: {value: {get_attr: [workers, current_size]}}
"#;
        let st = create(&s, "asg", bundle(t, &[("worker.yaml", worker)]), json!({})).await;
        assert_eq!(
            st.stack_status.to_string(),
            "CREATE_COMPLETE",
            "{}",
            st.stack_status_reason
        );
        let hosts = output(&st, "hosts");
        assert_eq!(hosts.as_array().unwrap().len(), 2);
        assert_ne!(hosts[0], hosts[1], "anti-affinity spreads the workers");
        let members = |s: SimCloud, id: StackId| async move {
            let r = s.list_resources(ListResources::new(id, 1)).await.unwrap();
            r.into_iter()
                .filter(|r| r.parent_resource.as_deref() == Some("workers"))
                .map(|r| r.resource_name)
                .collect::<Vec<_>>()
        };
        let before = members(s.clone(), st.id.clone()).await;
        let st = patch(&s, &st.id, json!({"size": 3})).await;
        assert_eq!(output(&st, "size"), json!(3));
        let grown = members(s.clone(), st.id.clone()).await;
        assert_eq!(&grown[..2], &before[..]);
        let st = patch(&s, &st.id, json!({"size": 1})).await;
        assert_eq!(st.stack_status.to_string(), "UPDATE_COMPLETE");
        // Heat's member_definitions keeps the last members of get_members' order (failed
        // first, then oldest first): the newest is kept
        assert_eq!(
            members(s.clone(), st.id.clone()).await,
            vec![grown[2].clone()],
            "the newest is kept"
        );
        for m in &grown {
            assert_eq!(m.len(), 12);
            assert!(
                m.bytes()
                    .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b)),
                "Heat's short id alphabet: {m}"
            );
        }
        assert_eq!(s.server_ids().len(), 1);
    }

    #[tokio::test]
    async fn conditions_and_other_resources() {
        let s = sim(DEMO);
        let t = r#"
heat_template_version: 2018-08-31
parameters:
  with_vm: {type: boolean, default: false}
conditions:
  vm: {equals: [{get_param: with_vm}, true]}
resources:
  net: {type: OS::Neutron::Net}
  port: {type: OS::Neutron::Port, properties: {network: {get_resource: net}}}
  vol: {type: OS::Cinder::Volume, properties: {image: cirros, size: 1}}
  vm:
    type: OS::Nova::Server
    condition: vm
    properties: {flavor: m1.small, image: cirros, networks: [{port: {get_resource: port}}]}
outputs:
  ip: {value: {get_attr: [port, fixed_ips, 0, ip_address]}}
"#;
        let st = create(&s, "c", bundle(t, &[]), json!({})).await;
        assert_eq!(st.stack_status.to_string(), "CREATE_COMPLETE");
        assert_eq!(output(&st, "ip"), serde_json::Value::Null);
        assert!(s.server_ids().is_empty());
        let st = patch(&s, &st.id, json!({"with_vm": true})).await;
        assert_eq!(st.stack_status.to_string(), "UPDATE_COMPLETE");
        assert_eq!(s.server_ids().len(), 1);
        let res = s
            .list_resources(ListResources::new(st.id.clone(), 0))
            .await
            .unwrap();
        let names: Vec<_> = res.iter().map(|r| r.resource_name.as_str()).collect();
        assert_eq!(
            names,
            ["vol", "vm", "port", "net"],
            "dependents before their dependencies"
        );
    }

    // --- validation ----------------------------------------------------------------------

    async fn rejected(
        s: &SimCloud,
        t: &str,
        files: &[(&str, &str)],
        p: serde_json::Value,
    ) -> String {
        match s
            .create_stack(CreateStack::new("bad", bundle(t, files), params(p)))
            .await
        {
            Err(DriverError::Invalid { message, .. }) => {
                assert!(s.server_ids().is_empty(), "nothing is created");
                assert!(s
                    .show_stack(&StackId::new("bad"))
                    .await
                    .unwrap_err()
                    .is_not_found());
                message
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn bad_templates_are_rejected_and_create_nothing() {
        let s = sim(DEMO);
        let vm = "heat_template_version: 2018-08-31\nresources:\n  VDU1: {type: OS::Nova::Server, properties: {flavor: m1.huge, image: cirros}}\n";
        assert_eq!(
            rejected(&s, vm, &[], json!({})).await,
            "Property error: resources.VDU1.properties.flavor: Error validating value 'm1.huge': The Flavor ID (m1.huge) could not be found."
        );
        let img = "heat_template_version: 2018-08-31\nresources:\n  VDU1: {type: OS::Nova::Server, properties: {flavor: m1.small, image: ubuntu}}\n";
        assert_eq!(
            rejected(&s, img, &[], json!({})).await,
            "Property error: resources.VDU1.properties.image: Error validating value 'ubuntu': The Image (ubuntu) could not be found."
        );
        assert_eq!(
            rejected(&s, "- a\n- b\n", &[], json!({})).await,
            "The template is not a JSON object or YAML mapping."
        );
        assert!(rejected(&s, "resources: {}\n", &[], json!({}))
            .await
            .contains("heat_template_version is missing"));
        assert!(rejected(&s, "a: [\n", &[], json!({}))
            .await
            .starts_with("Error parsing template"));
        let unknown = "heat_template_version: 2018-08-31\nresources:\n  x: {type: My::Thing}\n";
        assert_eq!(
            rejected(&s, unknown, &[], json!({})).await,
            "Failed to validate: resources.x: The Resource Type (My::Thing) could not be found."
        );
        let bad_ref = "heat_template_version: 2018-08-31\nresources:\n  p: {type: OS::Neutron::Port, properties: {network: {get_resource: nope}}}\n";
        assert_eq!(
            rejected(&s, bad_ref, &[], json!({})).await,
            "The specified reference \"nope\" (in resources.p.properties) is incorrect."
        );
        let bad_fn = "heat_template_version: 2018-08-31\nresources:\n  p: {type: OS::Neutron::Port, properties: {network: {yaql: {expression: x}}}}\n";
        assert!(rejected(&s, bad_fn, &[], json!({}))
            .await
            .contains("\"yaql\""));
        let param =
            "heat_template_version: 2018-08-31\nparameters:\n  az: {type: string}\nresources: {}\n";
        assert_eq!(
            rejected(&s, param, &[], json!({})).await,
            "The Parameter (az) was not provided."
        );
        let policy = "heat_template_version: 2018-08-31\nresources:\n  g: {type: OS::Nova::ServerGroup, properties: {policies: [spread]}}\n";
        assert!(rejected(&s, policy, &[], json!({}))
            .await
            .contains("\"spread\" is not an allowed value"));
        let cycle = "heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None, depends_on: b}\n  b: {type: OS::Heat::None, depends_on: a}\n";
        assert!(rejected(&s, cycle, &[], json!({}))
            .await
            .starts_with("Circular Dependency Found"));
        let nested_bad = "heat_template_version: 2018-08-31\nresources:\n  n: {type: n.yaml, properties: {x: 1}}\n";
        let n = "heat_template_version: 2018-08-31\nparameters: {}\nresources: {}\n";
        assert_eq!(
            rejected(&s, nested_bad, &[("n.yaml", n)], json!({})).await,
            "Property error: resources.n.properties: Unknown Property x"
        );
        let n2 = "heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Nova::Server, properties: {flavor: {get_resource: zz}}}\n";
        let top = "heat_template_version: 2018-08-31\nresources:\n  n: {type: n.yaml}\n";
        assert!(rejected(&s, top, &[("n.yaml", n2)], json!({}))
            .await
            .contains("resources.n<n.yaml>: The specified reference \"zz\""));
    }

    #[tokio::test]
    async fn bad_flavor_in_a_nested_template_fails_the_nested_resource() {
        let s = sim(DEMO);
        let n = "heat_template_version: 2018-08-31\nparameters:\n  flavor: {type: string}\nresources:\n  VDU1: {type: OS::Nova::Server, properties: {flavor: {get_param: flavor}, image: cirros}}\n";
        let top = "heat_template_version: 2018-08-31\nresources:\n  VDU1-0: {type: VDU1.yaml, properties: {flavor: m1.huge}}\n";
        let st = create(&s, "n", bundle(top, &[("VDU1.yaml", n)]), json!({})).await;
        assert_eq!(st.stack_status.to_string(), "CREATE_FAILED");
        assert_eq!(
            st.stack_status_reason,
            "Resource CREATE failed: StackValidationFailed: resources.VDU1-0: Property error: resources.VDU1.properties.flavor: Error validating value 'm1.huge': The Flavor ID (m1.huge) could not be found."
        );
    }

    #[tokio::test]
    async fn unavailable_zone_is_a_bad_request() {
        let s = sim(DEMO);
        s.set_zone_available("AZ-2", false).unwrap();
        let t = "heat_template_version: 2018-08-31\nresources:\n  VDU1: {type: OS::Nova::Server, properties: {flavor: m1.small, image: cirros, availability_zone: AZ-2}}\n";
        let st = create(&s, "z", bundle(t, &[]), json!({})).await;
        assert!(st.stack_status_reason.starts_with(
            "Resource CREATE failed: BadRequest: resources.VDU1: The requested availability zone is not available (HTTP 400) (Request-ID: req-"
        ), "{}", st.stack_status_reason);
    }

    // --- lifecycle -----------------------------------------------------------------------

    const ONE_VM: &str = "
heat_template_version: 2018-08-31
parameters:
  az: {type: string, default: AZ-1}
  flavor: {type: string, default: m1.small}
resources:
  vm: {type: OS::Nova::Server, properties: {flavor: {get_param: flavor}, image: cirros, availability_zone: {get_param: az}}}
outputs:
  host: {value: {get_attr: [vm, OS-EXT-SRV-ATTR:host]}}
  id: {value: {get_resource: vm}}
";

    #[tokio::test]
    async fn deleting_a_stack_frees_capacity() {
        let s = sim("zones: {Z: {hosts: {h: {vcpus: 1, memory_mb: 2048, disk_gb: 20}}}}\nflavors: {m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}}\n");
        let a = create(&s, "a", bundle(ONE_VM, &[]), json!({"az": "Z"})).await;
        assert_eq!(a.stack_status.to_string(), "CREATE_COMPLETE");
        let b = create(&s, "b", bundle(ONE_VM, &[]), json!({"az": "Z"})).await;
        assert_eq!(b.stack_status.to_string(), "CREATE_FAILED");
        let zones = s.list_zones(ListZones::default()).await.unwrap();
        assert_eq!(zones[0].free(), Some(Resources::default()));
        s.delete_stack(&a.id).await.unwrap();
        let shown = s.show_stack(&a.id).await.unwrap();
        assert_eq!(shown.stack_status.to_string(), "DELETE_IN_PROGRESS");
        assert_eq!(shown.stack_status_reason, "Stack DELETE started");
        s.delete_stack(&a.id).await.unwrap();
        assert!(s
            .update_stack(UpdateStack::parameters(a.id.clone(), Parameters::new()))
            .await
            .is_err_and(|e| matches!(e, DriverError::Invalid { .. })));
        assert!(s.show_stack(&a.id).await.unwrap_err().is_not_found());
        assert!(s.delete_stack(&a.id).await.unwrap_err().is_not_found());
        let zones = s.list_zones(ListZones::default()).await.unwrap();
        assert_eq!(zones[0].free(), Some(Resources::new(1, 2048, 20)));
        let b = patch(&s, &b.id, json!({})).await;
        assert_eq!(
            b.stack_status.to_string(),
            "UPDATE_COMPLETE",
            "a failed server is retried"
        );
        // a quick delete is over once the caller looks at anything else
        s.delete_stack(&b.id).await.unwrap();
        let zones = s.list_zones(ListZones::default()).await.unwrap();
        assert_eq!(zones[0].free(), Some(Resources::new(1, 2048, 20)));
        assert!(s.show_stack(&b.id).await.unwrap_err().is_not_found());
    }

    #[tokio::test]
    async fn update_keeps_unchanged_servers_and_replaces_changed_or_unhealthy_ones() {
        let s = sim(DEMO);
        let st = create(&s, "u", bundle(ONE_VM, &[]), json!({})).await;
        let id0 = output(&st, "id");
        let st = patch(&s, &st.id, json!({})).await;
        assert_eq!(output(&st, "id"), id0, "unchanged: same server");
        let st = patch(&s, &st.id, json!({"az": "AZ-2"})).await;
        let id1 = output(&st, "id");
        assert_ne!(id1, id0, "zone change: replaced");
        assert_eq!(output(&st, "host"), json!("c3"));
        assert!(s
            .server(&id0.as_str().unwrap().into())
            .await
            .unwrap_err()
            .is_not_found());
        s.mark_unhealthy(MarkUnhealthy::new(st.id.clone(), "vm", "heal"))
            .await
            .unwrap();
        let res = s
            .list_resources(ListResources::new(st.id.clone(), 0))
            .await
            .unwrap();
        assert_eq!(res[0].resource_status.to_string(), "CHECK_FAILED");
        assert_eq!(res[0].resource_status_reason, "heal");
        let st = patch(&s, &st.id, json!({})).await;
        assert_ne!(output(&st, "id"), id1, "unhealthy: replaced");
        assert_eq!(st.stack_status.to_string(), "UPDATE_COMPLETE");
        assert!(s
            .mark_unhealthy(MarkUnhealthy::new(st.id.clone(), "nope", "x"))
            .await
            .unwrap_err()
            .is_not_found());
        // a bad update is rejected and changes nothing
        let e = s
            .update_stack(UpdateStack::parameters(
                st.id.clone(),
                params(json!({"flavor": "m1.huge"})),
            ))
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::Invalid { .. }));
        assert_eq!(
            s.show_stack(&st.id).await.unwrap().parameters["flavor"],
            json!("m1.small")
        );
        let e = s
            .update_stack(UpdateStack::parameters(
                StackId::new("nope"),
                Parameters::new(),
            ))
            .await
            .unwrap_err();
        assert!(e.is_not_found());
    }

    #[tokio::test]
    async fn names_are_unique() {
        let s = sim(DEMO);
        create(&s, "dup", bundle(ONE_VM, &[]), json!({})).await;
        let e = s
            .create_stack(CreateStack::new(
                "dup",
                bundle(ONE_VM, &[]),
                Parameters::new(),
            ))
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::AlreadyExists { .. }));
    }

    #[tokio::test]
    async fn deterministic_and_clones_share_state() {
        let run = || async {
            let s = sim(DEMO);
            let st = create(&s, "d", bundle(ONE_VM, &[]), json!({})).await;
            (st.id.clone(), output(&st, "id"), output(&st, "host"))
        };
        assert_eq!(run().await, run().await);
        let s = sim(DEMO);
        let clone = s.clone();
        let st = create(&s, "shared", bundle(ONE_VM, &[]), json!({})).await;
        assert_eq!(clone.show_stack(&st.id).await.unwrap().stack_name, "shared");
        assert!(clone.now() > 0);
    }

    #[tokio::test]
    async fn injected_call_faults_come_first_then_pass_through() {
        let f = FaultySim::new(sim(DEMO));
        f.fail_next(Method::ListZones, 2, FaultKind::Unavailable);
        f.fail_next(Method::CreateStack, 1, FaultKind::QuotaExceeded);
        assert_eq!(f.pending(Method::ListZones), 2);
        for _ in 0..2 {
            let e = f.list_zones(ListZones::default()).await.unwrap_err();
            assert!(e.is_retryable());
        }
        assert_eq!(f.list_zones(ListZones::default()).await.unwrap().len(), 2);
        let e = f
            .create_stack(CreateStack::new(
                "q",
                bundle(ONE_VM, &[]),
                Parameters::new(),
            ))
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::QuotaExceeded { .. }));
        assert!(f.sim().server_ids().is_empty());
        f.fail_next_builds(
            1,
            BuildFault::Rejected {
                message: "Image 3b2a could not be found.".into(),
            },
        );
        let id = f
            .create_stack(CreateStack::new(
                "q",
                bundle(ONE_VM, &[]),
                Parameters::new(),
            ))
            .await
            .unwrap();
        let st = f.show_stack(&id).await.unwrap();
        assert!(st.stack_status_reason.starts_with("Resource CREATE failed: BadRequest: resources.vm: Image 3b2a could not be found. (HTTP 400)"), "{}", st.stack_status_reason);
        f.fail_next_builds(
            1,
            BuildFault::Fault {
                code: 500,
                message: "boom".into(),
            },
        );
        f.update_stack(UpdateStack::parameters(id.clone(), Parameters::new()))
            .await
            .unwrap();
        let st = f.show_stack(&id).await.unwrap();
        assert_eq!(st.stack_status_reason, "Resource CREATE failed: ResourceInError: resources.vm: Went to status ERROR due to \"Message: boom, Code: 500\"");
        f.fail_next(Method::Server, 1, FaultKind::NotFound);
        assert!(f.server(&"x".into()).await.unwrap_err().is_not_found());
    }
}
