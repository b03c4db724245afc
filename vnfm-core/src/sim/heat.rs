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
//! `OS::Heat::AutoScalingGroup` (desired_capacity / min_size, resource), a key of the bundle's
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
//! A ResourceGroup shrinks by its highest indexes; an AutoScalingGroup by its newest members.
//! Resources no longer in the template are deleted.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::hot::{self, Scope, Template, PSEUDO_PARAMS};
use super::{format_path, not_found, status, Boot, Failure, GroupRec, State, DRIVER};
use crate::driver::{
    CreateStack, DriverError, MarkUnhealthy, Stack, StackAction, StackOutput, StackResource,
    StackState, StackStatus, UpdateStack,
};
use crate::id::{ServerId, StackId};

const SERVER_POLICIES: &[&str] = &["anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity"];
const MAX_NESTING: usize = 10;

/// What a resource is backed by.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ResKind {
    Plain,
    Server(ServerId),
    Group(String),
    Nested(StackId),
}

/// A resource of a stack.
#[derive(Clone, Debug)]
pub(crate) struct ResRec {
    name: String,
    rtype: String,
    physical_id: String,
    status: StackStatus,
    reason: String,
    kind: ResKind,
    props: Value,
    deps: Vec<String>,
    created: u64,
    unhealthy: bool,
    failure: Option<Failure>,
}

/// A stack (top-level or nested).
#[derive(Clone, Debug)]
pub(crate) struct StackRec {
    id: StackId,
    name: String,
    parent: Option<StackId>,
    template: Value,
    files: Arc<BTreeMap<String, String>>,
    given: Map<String, Value>,
    status: StackStatus,
    reason: String,
    failure: Option<Failure>,
    resources: Vec<ResRec>,
}

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
                let members = || -> Vec<&ResRec> {
                    let mut m: Vec<&ResRec> = nested.resources.iter().collect();
                    if r.rtype == "OS::Heat::AutoScalingGroup" {
                        m.sort_by_key(|x| x.created);
                    }
                    m
                };
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
                                    self.attr_of(m, &a.unwrap_or_default(), path.get(1..).unwrap_or_default())
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
            hot::check(c, &format!("conditions.{k}"), &names, &t.params, &t.conditions)?;
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
                    return Err(format!("Invalid condition \"{c}\" (in resources.{})", r.name));
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
            let nested = hot::parse_text(text).map_err(|e| format!("resources.{name}<{rtype}>: {e}"))?;
            let t = Template::parse(&nested).map_err(|e| format!("resources.{name}<{rtype}>: {e}"))?;
            let keys: Vec<&String> = props.as_object().map(|m| m.keys().collect()).unwrap_or_default();
            for k in &keys {
                if !t.params.iter().any(|p| &p.name == *k) {
                    return Err(format!("Property error: resources.{name}.properties: Unknown Property {k}"));
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
                format!("Property error: resources.{name}.properties.{key}: Property type not assigned")
            })?;
            let mprops = def.get("properties").cloned().unwrap_or(Value::Object(Map::new()));
            return self.validate_type(name, mtype, &mprops, files, depth);
        }
        if rtype.starts_with("OS::") || rtype.starts_with("AWS::") {
            return Ok(());
        }
        Err(format!(
            "Failed to validate: resources.{name}: The Resource Type ({rtype}) could not be found."
        ))
    }

    /// Strict checks of property values (flavor, image, server group policy).
    fn validate_values(&self, name: &str, rtype: &str, props: &Value, scope: &dyn Scope) -> Result<(), String> {
        let value = |key: &str| -> Result<Option<String>, String> {
            match props.get(key) {
                None => Ok(None),
                Some(v) => Ok(text(Some(&hot::eval(v, scope)?))),
            }
        };
        let prop_error = |key: &str, v: &str, why: String| {
            Err(format!(
                "Property error: {}: Error validating value '{v}': {why}",
                format_path(&["resources".into(), name.into(), "properties".into(), key.into()])
            ))
        };
        match rtype {
            "OS::Nova::Server" => {
                match value("flavor")? {
                    Some(f) if self.cloud.flavors.contains_key(&f) => {}
                    Some(f) => return prop_error("flavor", &f, format!("The Flavor ID ({f}) could not be found.")),
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
            "OS::Nova::ServerGroup" => {
                let pols = match props.get("policies") {
                    Some(p) => hot::eval(p, scope)?,
                    None => Value::Array(props.get("policy").map(|p| hot::eval(p, scope)).transpose()?.into_iter().collect()),
                };
                for (i, p) in pols.as_array().cloned().unwrap_or_default().iter().enumerate() {
                    let p = p.as_str().unwrap_or_default();
                    if !SERVER_POLICIES.contains(&p) {
                        return Err(format!(
                            "Property error: resources.{name}.properties.policies[{i}]: \"{p}\" is not an allowed value {SERVER_POLICIES:?}"
                        ));
                    }
                }
            }
            "OS::Heat::ResourceGroup" | "OS::Heat::AutoScalingGroup" => {
                let key = if rtype == "OS::Heat::ResourceGroup" { "resource_def" } else { "resource" };
                if let Some(def) = props.get(key) {
                    let mtype = def.get("type").and_then(Value::as_str).unwrap_or_default();
                    let mprops = def.get("properties").cloned().unwrap_or(Value::Object(Map::new()));
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

    pub(crate) fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
        let s = self
            .stacks
            .get(id)
            .ok_or_else(|| not_found("stack", id.as_str()))?;
        let ctx = self.ctx(s);
        let mut parameters = Map::new();
        parameters.insert("OS::stack_id".into(), Value::from(s.id.as_str()));
        parameters.insert("OS::project_id".into(), Value::from(self.project_id.as_str()));
        parameters.insert("OS::stack_name".into(), Value::from(s.name.as_str()));
        parameters.extend(ctx.params.clone());
        let outputs = Template::parse(&s.template)
            .map(|t| t.outputs)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| StackOutput {
                output_key: k,
                output_value: hot::eval(&v, &ctx).unwrap_or(Value::Null),
            })
            .collect();
        Ok(Stack {
            id: s.id.clone(),
            stack_name: s.name.clone(),
            stack_status: s.status,
            stack_status_reason: s.reason.clone(),
            parameters,
            outputs,
        })
    }

    pub(crate) fn delete_stack(&mut self, id: &StackId) -> Result<(), DriverError> {
        if !self.stacks.contains_key(id) {
            return Err(not_found("stack", id.as_str()));
        }
        self.tick();
        self.delete_stack_rec(id);
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
        let mut out = Vec::new();
        let mut level: Vec<(StackId, Option<String>)> = vec![(id.clone(), None)];
        for d in 0..=depth {
            let mut next = Vec::new();
            for (sid, parent) in &level {
                let Some(s) = self.stacks.get(sid) else { continue };
                for r in listing_order(s) {
                    let nested = match &r.kind {
                        ResKind::Nested(n) if self.stacks.contains_key(n) => Some(n.clone()),
                        _ => None,
                    };
                    out.push(StackResource {
                        resource_name: r.name.clone(),
                        physical_resource_id: r.physical_id.clone(),
                        resource_type: r.rtype.clone(),
                        resource_status: r.status,
                        resource_status_reason: r.reason.clone(),
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
        let Some(stack) = self.stacks.get(sid) else { return };
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
        let mut order: Vec<&hot::ResDef> = Vec::new();
        while order.len() < active.len() {
            let next = active.iter().rev().find(|r| {
                !order.iter().any(|o| o.name == r.name)
                    && r.deps(&names).iter().all(|d| order.iter().any(|o| &o.name == d))
            });
            match next.or_else(|| active.iter().find(|r| !order.iter().any(|o| o.name == r.name))) {
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
                    self.record(sid, def, deps, ResKind::Plain, String::new(), StackAction::Create, Some(f));
                    continue;
                }
            };
            let files = self.stacks.get(sid).map(|s| s.files.clone()).unwrap_or_default();
            match def.rtype.as_str() {
                "OS::Nova::Server" => self.apply_server(sid, def, deps, props),
                "OS::Nova::ServerGroup" => self.apply_group(sid, def, deps, props),
                "OS::Heat::ResourceGroup" | "OS::Heat::AutoScalingGroup" => {
                    self.apply_nested(sid, def, deps, props, &files)
                }
                t if files.contains_key(t) => self.apply_nested(sid, def, deps, props, &files),
                _ => self.apply_plain(sid, def, deps, props),
            }
        }
        // keep the template order, report the first failure in it
        let Some(s) = self.stacks.get_mut(sid) else { return };
        s.resources
            .sort_by_key(|r| names.iter().position(|n| n == &r.name).unwrap_or(usize::MAX));
        let failed = s
            .resources
            .iter()
            .find(|r| r.status.is_failed() && r.status.action != StackAction::Check);
        match failed {
            Some(r) => {
                let f = r.failure.clone().unwrap_or_else(|| {
                    Failure::new(None, vec!["resources".into(), r.name.clone()], r.reason.clone())
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

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        sid: &StackId,
        def: &hot::ResDef,
        deps: Vec<String>,
        kind: ResKind,
        physical_id: String,
        action: StackAction,
        failure: Option<Failure>,
    ) {
        let now = self.tick();
        let created = match (action, self.find_res(sid, &def.name)) {
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

    fn apply_server(&mut self, sid: &StackId, def: &hot::ResDef, deps: Vec<String>, props: Value) {
        let flavor = text(props.get("flavor")).unwrap_or_default();
        let key = serde_json::json!({
            "flavor": flavor,
            "image": text(props.get("image")),
            "zone": text(props.get("availability_zone")),
            "group": text(props.get("scheduler_hints").and_then(|h| h.get("group"))),
        });
        let existing = self.find_res(sid, &def.name);
        if let Some(e) = &existing {
            let alive = matches!(&e.kind, ResKind::Server(id) if self.servers.contains_key(id));
            if alive && !e.status.is_failed() && !e.unhealthy && e.props == key {
                if let Some(r) = self
                    .stacks
                    .get_mut(sid)
                    .and_then(|s| s.resources.iter_mut().find(|r| r.name == def.name))
                {
                    r.deps = deps;
                }
                return;
            }
            self.delete_res(e);
        }
        let stack_name = self.stacks.get(sid).map(|s| s.name.clone()).unwrap_or_default();
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
        self.record(sid, def, deps, kind, pid, StackAction::Create, failure);
        self.set_props(sid, &def.name, key);
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
        self.record(sid, def, deps, ResKind::Group(id.clone()), id, StackAction::Create, None);
        self.set_props(sid, &def.name, key);
    }

    fn apply_plain(&mut self, sid: &StackId, def: &hot::ResDef, deps: Vec<String>, props: Value) {
        if let Some(e) = self.find_res(sid, &def.name) {
            if !e.status.is_failed() && !e.unhealthy && !e.physical_id.is_empty() {
                if e.props != props {
                    self.record(sid, def, deps, ResKind::Plain, e.physical_id, StackAction::Update, None);
                    self.set_props(sid, &def.name, props);
                }
                return;
            }
        }
        let id = self.uuid();
        self.record(sid, def, deps, ResKind::Plain, id, StackAction::Create, None);
        self.set_props(sid, &def.name, props);
    }

    /// The template and parameters of the nested stack of a group or template resource.
    fn nested_spec(
        &mut self,
        existing: Option<&StackId>,
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
            "OS::Heat::AutoScalingGroup" => {
                let desired = number(props.get("desired_capacity"))
                    .or_else(|| number(props.get("min_size")))
                    .unwrap_or(0) as usize;
                let mut names: Vec<(u64, String)> = existing
                    .and_then(|n| self.stacks.get(n))
                    .map(|s| s.resources.iter().map(|r| (r.created, r.name.clone())).collect())
                    .unwrap_or_default();
                names.sort();
                let mut names: Vec<String> = names.into_iter().map(|(_, n)| n).collect();
                names.truncate(desired);
                while names.len() < desired {
                    let n = self.short_id();
                    names.push(n);
                }
                let (t, p) = member(props.get("resource"));
                Ok((
                    generated(names.into_iter().map(|n| (n, t.clone(), p.clone())).collect()),
                    Map::new(),
                ))
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
        let action = if in_place { StackAction::Update } else { StackAction::Create };
        let validation_failure = |msg: String| {
            Some(Failure::new(
                Some("StackValidationFailed"),
                vec!["resources".into(), def.name.clone()],
                msg,
            ))
        };
        let spec = self
            .nested_spec(nested_id.as_ref().filter(|_| in_place), def, &props, files)
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
                self.record(sid, def, deps, kind, pid, action, validation_failure(msg));
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
                let parent_name = self.stacks.get(sid).map(|s| s.name.clone()).unwrap_or_default();
                let n = StackId::new(self.uuid());
                let name = format!("{parent_name}-{}-{}", def.name, self.short_id());
                self.stacks.insert(
                    n.clone(),
                    StackRec {
                        id: n.clone(),
                        name,
                        parent: Some(sid.clone()),
                        template: tv,
                        files: files.clone(),
                        given: params,
                        status: StackStatus::new(StackAction::Create, StackState::InProgress),
                        reason: String::new(),
                        failure: None,
                        resources: Vec::new(),
                    },
                );
                n
            }
        };
        self.converge(&nid, action);
        let failure = self.stacks.get(&nid).and_then(|n| {
            if !n.status.is_failed() {
                return None;
            }
            Some(match action {
                StackAction::Update => Failure::new(
                    None,
                    vec!["resources".into(), def.name.clone()],
                    n.reason.clone(),
                ),
                _ => n
                    .failure
                    .as_ref()
                    .map(|f| f.prefixed(&def.name))
                    .unwrap_or_else(|| Failure::new(None, vec!["resources".into(), def.name.clone()], n.reason.clone())),
            })
        });
        let pid = nid.0.clone();
        self.record(sid, def, deps, ResKind::Nested(nid), pid, action, failure);
    }
}

/// Heat's resource-list order within a stack: a resource comes after every resource that
/// depends on it (the captures list `vdus` before `grp`), otherwise template order.
fn listing_order(s: &StackRec) -> Vec<&ResRec> {
    let mut remaining: Vec<&ResRec> = s.resources.iter().collect();
    let mut out = Vec::with_capacity(remaining.len());
    while !remaining.is_empty() {
        let pick = remaining
            .iter()
            .position(|r| !remaining.iter().any(|o| o.deps.contains(&r.name)))
            .unwrap_or(0);
        out.push(remaining.remove(pick));
    }
    out
}
