//! The HOT subset the simulator interprets: template structure, parameters and intrinsic
//! functions. Messages follow Heat 27's wording where Heat has one.

use serde_json::{Map, Value};

/// Intrinsic functions the simulator evaluates.
const SUPPORTED: &[&str] = &[
    "get_param",
    "get_resource",
    "get_attr",
    "get_file",
    "list_join",
    "str_replace",
    "str_replace_strict",
    "str_replace_vstrict",
    "str_split",
    "map_merge",
    "list_concat",
    "equals",
    "not",
    "and",
    "or",
    "if",
    "contains",
];

/// Heat functions the simulator knows of but does not evaluate: using one is an error.
const UNSUPPORTED: &[&str] = &[
    "resource_facade",
    "repeat",
    "digest",
    "map_replace",
    "yaql",
    "filter",
    "make_url",
    "list_concat_unique",
    "Ref",
];

/// Pseudo parameters Heat defines for every stack.
pub(crate) const PSEUDO_PARAMS: &[&str] = &["OS::stack_name", "OS::stack_id", "OS::project_id"];

/// Keys Heat accepts inside a resource definition.
const RESOURCE_KEYS: &[&str] = &[
    "type",
    "properties",
    "depends_on",
    "condition",
    "metadata",
    "update_policy",
    "deletion_policy",
    "external_id",
    "description",
];

/// A declared parameter.
#[derive(Clone, Debug)]
pub(crate) struct ParamDef {
    pub name: String,
    pub ptype: String,
    pub default: Option<Value>,
}

/// A resource definition of a template.
#[derive(Clone, Debug)]
pub(crate) struct ResDef {
    pub name: String,
    pub rtype: String,
    pub properties: Value,
    pub depends_on: Vec<String>,
    pub condition: Option<Value>,
}

impl ResDef {
    /// Names of the resources of the same template this one refers to (`get_resource`,
    /// `get_attr`, `depends_on`), in first-use order, without duplicates.
    pub fn deps(&self, names: &[String]) -> Vec<String> {
        let mut out = self.depends_on.clone();
        collect_refs(&self.properties, &mut out);
        let mut seen = Vec::new();
        for d in out {
            if names.contains(&d) && !seen.contains(&d) && d != self.name {
                seen.push(d);
            }
        }
        seen
    }
}

/// A parsed template.
#[derive(Clone, Debug)]
pub(crate) struct Template {
    pub params: Vec<ParamDef>,
    pub resources: Vec<ResDef>,
    pub outputs: Vec<(String, Value)>,
    pub conditions: Map<String, Value>,
}

/// Parses template text (YAML or JSON) into a JSON value.
pub(crate) fn parse_text(text: &str) -> Result<Value, String> {
    if let Some((line, col)) = crate::input::too_deep(text.as_bytes()) {
        return Err(format!(
            "Error parsing template: `[` / `{{` nested deeper than {} levels at line {line}, \
             column {col}",
            crate::input::MAX_NESTING
        ));
    }
    serde_yaml::from_str::<Value>(text).map_err(|e| format!("Error parsing template: {e}"))
}

fn as_map<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} must be a mapping, found {}", kind_of(v)))
}

pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

impl Template {
    /// Checks the structure of a template and reads its sections.
    pub fn parse(v: &Value) -> Result<Template, String> {
        let top = v
            .as_object()
            .ok_or("The template is not a JSON object or YAML mapping.")?;
        match top.get("heat_template_version") {
            Some(Value::String(_)) => {}
            Some(other) => {
                return Err(format!(
                    "The template version is invalid: heat_template_version must be a date string such as \"2018-08-31\", found {}",
                    kind_of(other)
                ))
            }
            None => {
                return Err(
                    "The template version is invalid: heat_template_version is missing (expected e.g. \"2018-08-31\")"
                        .to_owned(),
                )
            }
        }
        for key in top.keys() {
            if ![
                "heat_template_version",
                "description",
                "parameter_groups",
                "parameters",
                "resources",
                "outputs",
                "conditions",
            ]
            .contains(&key.as_str())
            {
                return Err(format!("Unknown top-level section \"{key}\" in template"));
            }
        }
        let mut params = Vec::new();
        if let Some(p) = top.get("parameters").filter(|v| !v.is_null()) {
            for (name, def) in as_map(p, "parameters")? {
                let def = as_map(def, &format!("parameters.{name}"))?;
                let ptype = match def.get("type") {
                    Some(Value::String(t)) => t.clone(),
                    _ => return Err(format!("Missing parameter type for parameter: {name}")),
                };
                if ![
                    "string",
                    "number",
                    "json",
                    "comma_delimited_list",
                    "boolean",
                ]
                .contains(&ptype.as_str())
                {
                    return Err(format!(
                        "Invalid type ({ptype}) of parameter {name}: expected string, number, json, comma_delimited_list or boolean"
                    ));
                }
                params.push(ParamDef {
                    name: name.clone(),
                    ptype,
                    default: def.get("default").cloned(),
                });
            }
        }
        let mut resources = Vec::new();
        if let Some(r) = top.get("resources").filter(|v| !v.is_null()) {
            for (name, def) in as_map(r, "resources")? {
                let def = def.as_object().ok_or_else(|| {
                    format!("Resource {name} is not a mapping: found {}", kind_of(def))
                })?;
                for k in def.keys() {
                    if !RESOURCE_KEYS.contains(&k.as_str()) {
                        return Err(format!(
                            "\"{k}\" is not a valid keyword inside a resource definition (resources.{name})"
                        ));
                    }
                }
                let rtype = match def.get("type") {
                    Some(Value::String(t)) if !t.is_empty() => t.clone(),
                    _ => return Err(format!("Resource {name} is missing \"type\"")),
                };
                let depends_on = match def.get("depends_on") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::String(s)) => vec![s.clone()],
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|x| {
                            x.as_str().map(str::to_owned).ok_or_else(|| {
                                format!("resources.{name}.depends_on must list resource names")
                            })
                        })
                        .collect::<Result<_, _>>()?,
                    Some(other) => {
                        return Err(format!(
                        "resources.{name}.depends_on must be a name or a list of names, found {}",
                        kind_of(other)
                    ))
                    }
                };
                let properties = def
                    .get("properties")
                    .cloned()
                    .unwrap_or(Value::Object(Map::new()));
                if !properties.is_object() && !properties.is_null() {
                    return Err(format!(
                        "resources.{name}.properties must be a mapping, found {}",
                        kind_of(&properties)
                    ));
                }
                resources.push(ResDef {
                    name: name.clone(),
                    rtype,
                    properties: if properties.is_null() {
                        Value::Object(Map::new())
                    } else {
                        properties
                    },
                    depends_on,
                    condition: def.get("condition").cloned(),
                });
            }
        }
        let mut outputs = Vec::new();
        if let Some(o) = top.get("outputs").filter(|v| !v.is_null()) {
            for (name, def) in as_map(o, "outputs")? {
                let value = def
                    .as_object()
                    .and_then(|d| d.get("value"))
                    .cloned()
                    .ok_or_else(|| format!("Output {name} is missing \"value\""))?;
                outputs.push((name.clone(), value));
            }
        }
        let conditions = match top.get("conditions") {
            None | Some(Value::Null) => Map::new(),
            Some(c) => as_map(c, "conditions")?.clone(),
        };
        Ok(Template {
            params,
            resources,
            outputs,
            conditions,
        })
    }

    /// The resource names.
    pub fn names(&self) -> Vec<String> {
        self.resources.iter().map(|r| r.name.clone()).collect()
    }

    /// Applies defaults and types to given parameter values.
    pub fn resolve_params(&self, given: &Map<String, Value>) -> Result<Map<String, Value>, String> {
        for k in given.keys() {
            if !self.params.iter().any(|p| &p.name == k) && !PSEUDO_PARAMS.contains(&k.as_str()) {
                return Err(format!("The Parameter ({k}) was not defined in template."));
            }
        }
        let mut out = Map::new();
        for p in &self.params {
            let v = match given.get(&p.name).or(p.default.as_ref()) {
                Some(v) => v.clone(),
                None => return Err(format!("The Parameter ({}) was not provided.", p.name)),
            };
            out.insert(p.name.clone(), coerce(&p.name, &p.ptype, v)?);
        }
        Ok(out)
    }
}

fn coerce(name: &str, ptype: &str, v: Value) -> Result<Value, String> {
    let bad = |v: &Value, what: &str| {
        Err(format!(
            "Parameter '{name}' is invalid: {v} is not {what} (type {ptype})"
        ))
    };
    match ptype {
        "number" => match &v {
            Value::Number(_) => Ok(v),
            Value::String(s) => {
                if let Ok(i) = s.trim().parse::<i64>() {
                    Ok(Value::from(i))
                } else if let Ok(f) = s.trim().parse::<f64>() {
                    Ok(Value::from(f))
                } else {
                    bad(&v, "a number")
                }
            }
            _ => bad(&v, "a number"),
        },
        "json" => match &v {
            Value::String(s) => serde_json::from_str(s).or_else(|_| bad(&v, "valid JSON")),
            Value::Object(_) | Value::Array(_) | Value::Null => Ok(v),
            _ => bad(&v, "a JSON mapping or list"),
        },
        "boolean" => match &v {
            Value::Bool(_) => Ok(v),
            Value::String(s) if ["true", "yes", "on", "1"].contains(&s.to_lowercase().as_str()) => {
                Ok(Value::Bool(true))
            }
            Value::String(s)
                if ["false", "no", "off", "0"].contains(&s.to_lowercase().as_str()) =>
            {
                Ok(Value::Bool(false))
            }
            _ => bad(&v, "a boolean"),
        },
        "comma_delimited_list" => match &v {
            Value::Array(_) => Ok(v),
            Value::String(s) if s.is_empty() => Ok(Value::Array(Vec::new())),
            Value::String(s) => Ok(Value::Array(
                s.split(',').map(|x| Value::from(x.trim())).collect(),
            )),
            _ => bad(&v, "a comma-delimited list"),
        },
        _ => match &v {
            Value::Number(n) => Ok(Value::from(n.to_string())),
            Value::Bool(b) => Ok(Value::from(b.to_string())),
            _ => Ok(v),
        },
    }
}

/// What an intrinsic function needs from its stack.
pub(crate) trait Scope {
    /// A parameter (or pseudo parameter) value.
    fn param(&self, name: &str) -> Option<Value>;
    /// `get_resource`: the physical id of a resource of the same stack.
    fn resource_ref(&self, name: &str) -> Value;
    /// `get_attr`: an attribute of a resource of the same stack, with the rest of the path.
    fn resource_attr(&self, name: &str, attr: &str, path: &[Value]) -> Value;
    /// `get_file`: a file of the bundle.
    fn file(&self, name: &str) -> Option<String>;
    /// A condition's value.
    fn condition(&self, name: &str) -> Option<bool>;
}

/// The function name when `v` is a function call (a one-key mapping whose key names a Heat
/// function, or looks like one).
pub(crate) fn function_of(v: &Value) -> Option<(&str, &Value)> {
    let m = v.as_object()?;
    if m.len() != 1 {
        return None;
    }
    let (k, arg) = m.iter().next()?;
    let looks = SUPPORTED.contains(&k.as_str())
        || UNSUPPORTED.contains(&k.as_str())
        || k.starts_with("get_")
        || k.starts_with("Fn::");
    looks.then_some((k.as_str(), arg))
}

/// Collects the resource names referenced by `get_resource` / `get_attr` in `v`.
pub(crate) fn collect_refs(v: &Value, out: &mut Vec<String>) {
    if let Some((f, arg)) = function_of(v) {
        match (f, arg) {
            ("get_resource", Value::String(s)) => out.push(s.clone()),
            ("get_attr", Value::Array(a)) => {
                if let Some(Value::String(s)) = a.first() {
                    out.push(s.clone());
                }
                for x in a.iter().skip(1) {
                    collect_refs(x, out);
                }
            }
            _ => collect_refs(arg, out),
        }
        return;
    }
    match v {
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        Value::Object(m) => m.values().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// Checks the functions used in `v`: known names, argument shapes, references to resources
/// (`names`), parameters (`params`) and conditions. `at` names where `v` is (for messages).
pub(crate) fn check(
    v: &Value,
    at: &str,
    names: &[String],
    params: &[ParamDef],
    conditions: &Map<String, Value>,
) -> Result<(), String> {
    if let Some((f, arg)) = function_of(v) {
        if !SUPPORTED.contains(&f) {
            return Err(format!(
                "{at}: unknown or unsupported intrinsic function \"{f}\" (the simulator evaluates {})",
                SUPPORTED.join(", ")
            ));
        }
        let shape = |ok: bool, expected: &str| {
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "{at}: Arguments to \"{f}\" must be {expected}, found {}",
                    kind_of(arg)
                ))
            }
        };
        match f {
            "get_resource" => {
                let name = arg.as_str().ok_or_else(|| {
                    format!(
                        "{at}: Arguments to \"get_resource\" must be a resource name, found {}",
                        kind_of(arg)
                    )
                })?;
                if !names.iter().any(|n| n == name) {
                    return Err(format!(
                        "The specified reference \"{name}\" (in {at}) is incorrect."
                    ));
                }
                return Ok(());
            }
            "get_attr" => {
                let a = arg.as_array().filter(|a| a.len() >= 2);
                shape(a.is_some(), "a list of [resource name, attribute, ...]")?;
                let a = a.map(Vec::as_slice).unwrap_or_default();
                match a.first() {
                    Some(Value::String(name)) if names.iter().any(|n| n == name) => {}
                    Some(Value::String(name)) => {
                        return Err(format!(
                            "The specified reference \"{name}\" (in {at}) is incorrect."
                        ))
                    }
                    _ => return shape(false, "a list starting with a resource name"),
                }
                for x in a.iter().skip(1) {
                    check(x, at, names, params, conditions)?;
                }
                return Ok(());
            }
            "get_param" => {
                let name = match arg {
                    Value::String(s) => Some(s.as_str()),
                    Value::Array(a) => a.first().and_then(Value::as_str),
                    _ => None,
                };
                let name = name.ok_or_else(|| {
                    format!("{at}: Arguments to \"get_param\" must be a parameter name or a list starting with one, found {}", kind_of(arg))
                })?;
                if !params.iter().any(|p| p.name == name) && !PSEUDO_PARAMS.contains(&name) {
                    return Err(format!(
                        "The Parameter ({name}) was not defined in template (referenced in {at})."
                    ));
                }
                if let Value::Array(a) = arg {
                    for x in a.iter().skip(1) {
                        check(x, at, names, params, conditions)?;
                    }
                }
                return Ok(());
            }
            "get_file" => shape(arg.is_string(), "a file name")?,
            "list_join" => shape(
                arg.as_array().is_some_and(|a| !a.is_empty()),
                "[delimiter, list, ...]",
            )?,
            "str_replace" | "str_replace_strict" | "str_replace_vstrict" => shape(
                arg.as_object()
                    .is_some_and(|m| m.contains_key("template") && m.contains_key("params")),
                "a mapping with \"template\" and \"params\"",
            )?,
            "str_split" => shape(
                arg.as_array().is_some_and(|a| a.len() == 2 || a.len() == 3),
                "[delimiter, string] or [delimiter, string, index]",
            )?,
            "equals" => shape(
                arg.as_array().is_some_and(|a| a.len() == 2),
                "a list of two values",
            )?,
            "if" => {
                let a = arg.as_array().filter(|a| a.len() == 3);
                shape(a.is_some(), "[condition, value if true, value if false]")?;
                if let Some(Value::String(c)) = a.and_then(|a| a.first()) {
                    if !conditions.contains_key(c) {
                        return Err(format!("{at}: Invalid condition \"{c}\""));
                    }
                }
            }
            "contains" => shape(
                arg.as_array().is_some_and(|a| a.len() == 2),
                "[value, sequence]",
            )?,
            "map_merge" | "list_concat" | "and" | "or" => shape(arg.is_array(), "a list")?,
            _ => {}
        }
        return check(arg, at, names, params, conditions);
    }
    match v {
        Value::Array(a) => a
            .iter()
            .try_for_each(|x| check(x, at, names, params, conditions)),
        Value::Object(m) => m
            .values()
            .try_for_each(|x| check(x, at, names, params, conditions)),
        _ => Ok(()),
    }
}

/// Walks `v` along `path` (mapping keys and list indices); `Null` when a step is missing.
pub(crate) fn walk(v: &Value, path: &[Value]) -> Value {
    let mut cur = v;
    for p in path {
        let next = match (cur, p) {
            (Value::Object(m), Value::String(k)) => m.get(k),
            (Value::Object(m), Value::Number(n)) => m.get(&n.to_string()),
            (Value::Array(a), Value::Number(n)) => n.as_u64().and_then(|i| a.get(i as usize)),
            (Value::Array(a), Value::String(s)) => s.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return Value::Null,
        }
    }
    cur.clone()
}

fn to_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Null => false,
        Value::String(s) => !s.is_empty() && s != "false",
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// Evaluates a condition expression (a condition name, a boolean, or a function).
pub(crate) fn eval_condition(v: &Value, scope: &dyn Scope) -> Result<bool, String> {
    match v {
        Value::String(name) => scope
            .condition(name)
            .ok_or_else(|| format!("Invalid condition \"{name}\"")),
        other => Ok(truthy(&eval(other, scope)?)),
    }
}

/// Evaluates every intrinsic function in `v`.
pub(crate) fn eval(v: &Value, scope: &dyn Scope) -> Result<Value, String> {
    if let Some((f, arg)) = function_of(v) {
        return call(f, arg, scope);
    }
    Ok(match v {
        Value::Array(a) => {
            Value::Array(a.iter().map(|x| eval(x, scope)).collect::<Result<_, _>>()?)
        }
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                out.insert(k.clone(), eval(x, scope)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

fn call(f: &str, arg: &Value, scope: &dyn Scope) -> Result<Value, String> {
    let list = |a: &Value| -> Result<Vec<Value>, String> {
        match eval(a, scope)? {
            Value::Array(a) => Ok(a),
            other => Err(format!(
                "Arguments to \"{f}\" must be a list, found {}",
                kind_of(&other)
            )),
        }
    };
    match f {
        "get_param" => {
            let (name, path) = match arg {
                Value::String(s) => (s.clone(), Vec::new()),
                Value::Array(a) => {
                    let a = a
                        .iter()
                        .map(|x| eval(x, scope))
                        .collect::<Result<Vec<_>, _>>()?;
                    let name = a.first().and_then(Value::as_str).map(str::to_owned);
                    (name.unwrap_or_default(), a.into_iter().skip(1).collect())
                }
                _ => return Err("Arguments to \"get_param\" must be a name or a list".into()),
            };
            let v = scope
                .param(&name)
                .ok_or_else(|| format!("The Parameter ({name}) was not provided."))?;
            if path.is_empty() {
                Ok(v)
            } else {
                // Heat returns '' when a path component does not exist.
                match walk(&v, &path) {
                    Value::Null => Ok(Value::from("")),
                    found => Ok(found),
                }
            }
        }
        "get_resource" => Ok(scope.resource_ref(arg.as_str().unwrap_or_default())),
        "get_attr" => {
            let a = list(arg)?;
            let name = a.first().and_then(Value::as_str).unwrap_or_default();
            let attr = a.get(1).map(to_text).unwrap_or_default();
            Ok(scope.resource_attr(name, &attr, a.get(2..).unwrap_or_default()))
        }
        "get_file" => {
            let name = arg.as_str().unwrap_or_default();
            scope.file(name).map(Value::from).ok_or_else(|| {
                format!("Could not retrieve file \"{name}\" (not in the bundle's files)")
            })
        }
        "list_join" => {
            let a = list(arg)?;
            let delim = a.first().map(to_text).unwrap_or_default();
            let mut parts = Vec::new();
            for l in a.iter().skip(1) {
                match l {
                    Value::Array(items) => parts.extend(items.iter().map(to_text)),
                    other => {
                        return Err(format!(
                            "Arguments to \"list_join\" must be lists, found {}",
                            kind_of(other)
                        ))
                    }
                }
            }
            Ok(Value::from(parts.join(&delim)))
        }
        "str_replace" | "str_replace_strict" | "str_replace_vstrict" => {
            let m = eval(arg, scope)?;
            let template = m.get("template").map(to_text).unwrap_or_default();
            let params = m
                .get("params")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let mut out = template;
            let mut keys: Vec<&String> = params.keys().collect();
            keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
            for k in keys {
                if let Some(v) = params.get(k) {
                    out = out.replace(k.as_str(), &to_text(v));
                }
            }
            Ok(Value::from(out))
        }
        "str_split" => {
            let a = list(arg)?;
            let delim = a.first().map(to_text).unwrap_or_default();
            let s = a.get(1).map(to_text).unwrap_or_default();
            let parts: Vec<Value> = if delim.is_empty() {
                vec![Value::from(s)]
            } else {
                s.split(delim.as_str()).map(Value::from).collect()
            };
            match a.get(2) {
                Some(i) => Ok(walk(&Value::Array(parts), std::slice::from_ref(i))),
                None => Ok(Value::Array(parts)),
            }
        }
        "map_merge" => {
            let mut out = Map::new();
            for m in list(arg)? {
                if let Value::Object(m) = m {
                    out.extend(m);
                }
            }
            Ok(Value::Object(out))
        }
        "list_concat" => Ok(Value::Array(
            list(arg)?
                .into_iter()
                .flat_map(|l| match l {
                    Value::Array(a) => a,
                    other => vec![other],
                })
                .collect(),
        )),
        "equals" => {
            let a = list(arg)?;
            Ok(Value::Bool(a.first() == a.get(1)))
        }
        "not" => Ok(Value::Bool(!eval_condition(arg, scope)?)),
        "and" | "or" => {
            let items = arg.as_array().cloned().unwrap_or_default();
            let mut acc = f == "and";
            for c in &items {
                let b = eval_condition(c, scope)?;
                acc = if f == "and" { acc && b } else { acc || b };
            }
            Ok(Value::Bool(acc))
        }
        "if" => {
            let a = arg.as_array().cloned().unwrap_or_default();
            let cond = eval_condition(a.first().unwrap_or(&Value::Null), scope)?;
            eval(
                a.get(if cond { 1 } else { 2 }).unwrap_or(&Value::Null),
                scope,
            )
        }
        "contains" => {
            let a = list(arg)?;
            let hay = a
                .get(1)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            Ok(Value::Bool(a.first().is_some_and(|x| hay.contains(x))))
        }
        other => Err(format!(
            "unknown or unsupported intrinsic function \"{other}\""
        )),
    }
}

/// Replaces `%index%` in every string of `v` (ResourceGroup's `index_var`).
pub(crate) fn replace_index(v: &Value, index: usize) -> Value {
    match v {
        Value::String(s) => Value::from(s.replace("%index%", &index.to_string())),
        Value::Array(a) => Value::Array(a.iter().map(|x| replace_index(x, index)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), replace_index(x, index)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct S;
    impl Scope for S {
        fn param(&self, name: &str) -> Option<Value> {
            match name {
                "nfv" => Some(json!({
                    "VDU": {"VDU1": {"locationConstraints": "AZ-2"}},
                    "CP": {"VDU1_CP1-0": {"network": "net-b", "fixed_ips": [{"ip_address": "10.0.0.5"}]}}
                })),
                "OS::stack_name" => Some(json!("vnf1")),
                "n" => Some(json!(3)),
                _ => None,
            }
        }
        fn resource_ref(&self, name: &str) -> Value {
            json!(format!("id-of-{name}"))
        }
        fn resource_attr(&self, name: &str, attr: &str, path: &[Value]) -> Value {
            json!(format!("{name}.{attr}.{}", path.len()))
        }
        fn file(&self, name: &str) -> Option<String> {
            (name == "f.txt").then(|| "content".to_owned())
        }
        fn condition(&self, name: &str) -> Option<bool> {
            (name == "yes").then_some(true)
        }
    }

    fn ev(v: Value) -> Value {
        eval(&v, &S).unwrap()
    }

    #[test]
    fn get_param_paths_and_pseudo_params() {
        assert_eq!(
            ev(json!({"get_param": ["nfv", "VDU", "VDU1", "locationConstraints"]})),
            json!("AZ-2")
        );
        assert_eq!(
            ev(json!({"get_param": ["nfv", "VDU", "VDU9", "x"]})),
            json!("")
        );
        // The CP section of a change of external connectivity (Tacker's convention).
        assert_eq!(
            ev(json!({"get_param": ["nfv", "CP", "VDU1_CP1-0", "network"]})),
            json!("net-b")
        );
        assert_eq!(
            ev(json!({"get_param": ["nfv", "CP", "VDU1_CP1-0", "fixed_ips", 0, "ip_address"]})),
            json!("10.0.0.5")
        );
        assert_eq!(ev(json!({"get_param": "OS::stack_name"})), json!("vnf1"));
        assert!(eval(&json!({"get_param": "nope"}), &S).is_err());
    }

    #[test]
    fn string_functions() {
        assert_eq!(
            ev(json!({"list_join": ["-", [{"get_param": "OS::stack_name"}, "VDU1-multi"]]})),
            json!("vnf1-VDU1-multi")
        );
        assert_eq!(
            ev(json!({"str_replace": {"template": "a-$x-$xy", "params": {"$x": "1", "$xy": 2}}})),
            json!("a-1-2")
        );
        assert_eq!(ev(json!({"str_split": [",", "a,b,c", 1]})), json!("b"));
        assert_eq!(ev(json!({"get_file": "f.txt"})), json!("content"));
        assert_eq!(
            ev(json!({"map_merge": [{"a": 1}, {"b": 2}]})),
            json!({"a": 1, "b": 2})
        );
    }

    #[test]
    fn references_and_conditions() {
        assert_eq!(ev(json!({"get_resource": "grp"})), json!("id-of-grp"));
        assert_eq!(
            ev(json!({"get_attr": ["vdus", "show", "x"]})),
            json!("vdus.show.1")
        );
        assert_eq!(ev(json!({"if": ["yes", 1, 2]})), json!(1));
        assert_eq!(ev(json!({"equals": [{"get_param": "n"}, 3]})), json!(true));
        // a one-key mapping that is not a function is data
        assert_eq!(ev(json!({"group": "g"})), json!({"group": "g"}));
    }

    #[test]
    fn check_rejects_bad_references_and_functions() {
        let names = vec!["grp".to_owned()];
        let params = vec![ParamDef {
            name: "az".into(),
            ptype: "string".into(),
            default: None,
        }];
        let c = Map::new();
        assert!(check(&json!({"get_resource": "grp"}), "x", &names, &params, &c).is_ok());
        let e = check(
            &json!({"get_resource": "nope"}),
            "resources.a.properties",
            &names,
            &params,
            &c,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "The specified reference \"nope\" (in resources.a.properties) is incorrect."
        );
        let e = check(
            &json!({"yaql": {"expression": "1"}}),
            "outputs.o",
            &names,
            &params,
            &c,
        )
        .unwrap_err();
        assert!(e.contains("unsupported intrinsic function \"yaql\""), "{e}");
        let e = check(&json!({"get_thing": 1}), "outputs.o", &names, &params, &c).unwrap_err();
        assert!(e.contains("\"get_thing\""), "{e}");
        let e = check(
            &json!({"get_param": "zone"}),
            "resources.a",
            &names,
            &params,
            &c,
        )
        .unwrap_err();
        assert!(e.contains("The Parameter (zone) was not defined"), "{e}");
        assert!(check(&json!({"get_attr": ["grp"]}), "x", &names, &params, &c).is_err());
    }

    #[test]
    fn template_structure_errors() {
        assert_eq!(
            Template::parse(&json!([1])).unwrap_err(),
            "The template is not a JSON object or YAML mapping."
        );
        assert!(Template::parse(&json!({"resources": {}}))
            .unwrap_err()
            .contains("heat_template_version is missing"));
        let e = Template::parse(
            &json!({"heat_template_version": "2018-08-31", "resources": {"a": {"properties": {}}}}),
        )
        .unwrap_err();
        assert_eq!(e, "Resource a is missing \"type\"");
        let e = Template::parse(&json!({"heat_template_version": "2018-08-31", "resources": {"a": {"type": "OS::Nova::Server", "propertes": {}}}})).unwrap_err();
        assert!(e.contains("\"propertes\" is not a valid keyword"), "{e}");
    }

    #[test]
    fn parameters_resolve_with_defaults_and_types() {
        let t = Template::parse(&json!({
            "heat_template_version": "2018-08-31",
            "parameters": {"count": {"type": "number", "default": 2}, "nfv": {"type": "json"}, "az": {"type": "string"}}
        }))
        .unwrap();
        let given: Map<String, Value> =
            serde_json::from_value(json!({"nfv": "{\"a\": 1}", "az": "AZ-1"})).unwrap();
        let p = t.resolve_params(&given).unwrap();
        assert_eq!(p["count"], json!(2));
        assert_eq!(p["nfv"], json!({"a": 1}));
        let missing: Map<String, Value> = serde_json::from_value(json!({"nfv": {}})).unwrap();
        assert_eq!(
            t.resolve_params(&missing).unwrap_err(),
            "The Parameter (az) was not provided."
        );
        let unknown: Map<String, Value> =
            serde_json::from_value(json!({"nfv": {}, "az": "x", "zz": 1})).unwrap();
        assert_eq!(
            t.resolve_params(&unknown).unwrap_err(),
            "The Parameter (zz) was not defined in template."
        );
        let bad: Map<String, Value> =
            serde_json::from_value(json!({"nfv": {}, "az": "x", "count": "many"})).unwrap();
        assert!(t
            .resolve_params(&bad)
            .unwrap_err()
            .contains("Parameter 'count' is invalid"));
    }
}
