//! `OS::Heat::TestResource` as Heat 27 defines it
//! (`heat/engine/resources/openstack/heat/test_resource.py`): a resource that stores a string
//! and can be told to take its time or to fail.
//!
//! Properties (all optional): `value` (string, default `test_string`), `fail` (boolean),
//! `update_replace` (boolean), `wait_secs` (number, default 0, `-1` waits forever),
//! `action_wait_secs` (map of `create`, `update`, `delete`: numbers, each defaulting to
//! `wait_secs`), `client_name`, `entity_name` (strings), `attr_wait_secs`,
//! `constraint_prop_secs` (numbers), `update_replace_value` (string, not updatable). Any other
//! property is refused as Heat refuses it (`Property error: resources.T.properties: Unknown
//! Property foo`), as is a key of `action_wait_secs` other than the three (Heat's schema has no
//! `snapshot`).
//!
//! What the simulator does with them:
//! - Create: the resource is `CREATE_IN_PROGRESS` (and so is its stack) until
//!   `action_wait_secs.create` (else `wait_secs`) seconds of the simulator's time have passed
//!   (Heat: `waited > wait_secs`); then `CREATE_COMPLETE`, or with `fail: true`
//!   `CREATE_FAILED` with Heat's `ValueError: resources.T: Test Resource failed T` (raised by
//!   `_check_status_complete` once the wait is over). A resource that does not fail gets
//!   Heat's `physical_resource_name()` as its id (`<stack>-<name>-<short id>`); one that fails
//!   has none.
//! - Update (only when a property changed): in place, waiting `action_wait_secs.update` (else
//!   `wait_secs`) when `value` changed and not at all otherwise, failing after it with `fail`;
//!   a changed `value` with `update_replace: true`, or a changed `update_replace_value`,
//!   replaces the resource (a create, as above).
//! - Delete: the stack's delete stays `DELETE_IN_PROGRESS` for the longest
//!   `action_wait_secs.delete` (else `wait_secs`) of its test resources; `fail` does not fail
//!   a delete (Heat: `self.action != self.DELETE`).
//! - The `output` attribute is the stored `value` (null for a resource whose create failed;
//!   a failed update keeps the old one).
//! - Not modelled: `attr_wait_secs` and `constraint_prop_secs` (Heat sleeps while resolving an
//!   attribute or a constraint: the simulator answers at once), `client_name` / `entity_name`
//!   (Heat polls that client while waiting), and resources that depend on a waiting test
//!   resource (Heat builds them after it; the simulator builds them at once, only the test
//!   resource's row and its stacks show the wait).

use serde_json::{Map, Value};

use super::failure::Failure;
use crate::driver::StackAction;

/// The resource type.
pub(crate) const TYPE: &str = "OS::Heat::TestResource";

/// The properties of Heat's schema.
const PROPERTIES: &[&str] = &[
    "value",
    "update_replace",
    "fail",
    "client_name",
    "entity_name",
    "wait_secs",
    "action_wait_secs",
    "attr_wait_secs",
    "constraint_prop_secs",
    "update_replace_value",
];

/// The keys of `action_wait_secs`.
const ACTIONS: &[&str] = &["create", "update", "delete"];

/// Heat's default `value`.
const DEFAULT_VALUE: &str = "test_string";

/// How long an action of a test resource takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Wait {
    /// Done at once (`wait_secs: 0`, Heat's default).
    None,
    /// That many seconds.
    Secs(f64),
    /// Never done (a negative `wait_secs`: Heat's "infinite").
    Forever,
}

/// Refuses the properties Heat's schema does not have (checked on the template as written).
pub(crate) fn check_keys(name: &str, props: &Value) -> Result<(), String> {
    for k in props.as_object().map(Map::keys).into_iter().flatten() {
        if !PROPERTIES.contains(&k.as_str()) {
            return Err(format!(
                "Property error: resources.{name}.properties: Unknown Property {k}"
            ));
        }
    }
    Ok(())
}

/// Checks the values (evaluated) against Heat's schema, with Heat's messages.
pub(crate) fn check_values(name: &str, props: &Value) -> Result<(), String> {
    let at = |key: &str| format!("Property error: resources.{name}.properties.{key}");
    let Some(map) = props.as_object() else {
        return Ok(());
    };
    for (k, v) in map {
        match k.as_str() {
            "value" | "client_name" | "entity_name" | "update_replace_value" => {
                let int = v.is_i64() || v.is_u64();
                if !int && !matches!(v, Value::String(_) | Value::Bool(_) | Value::Null) {
                    return Err(format!("{}: Value must be a string; got {v}", at(k)));
                }
            }
            "fail" | "update_replace" => {
                if let Value::String(s) = v {
                    let s = s.to_lowercase();
                    if s != "true" && s != "false" {
                        return Err(format!("{}: \"{s}\" is not a valid boolean", at(k)));
                    }
                } else if !matches!(v, Value::Bool(_) | Value::Null) {
                    return Err(format!("{}: \"{v}\" is not a valid boolean", at(k)));
                }
            }
            "wait_secs" | "attr_wait_secs" | "constraint_prop_secs" => check_number(&at(k), v)?,
            "action_wait_secs" => match v {
                Value::Null => {}
                Value::Object(m) => {
                    for (a, secs) in m {
                        if !ACTIONS.contains(&a.as_str()) {
                            return Err(format!("{}: Unknown Property {a}", at(k)));
                        }
                        check_number(&format!("{}.{a}", at(k)), secs)?;
                    }
                }
                other => return Err(format!("{}: \"{other}\" is not a map", at(k))),
            },
            _ => {}
        }
    }
    Ok(())
}

/// Heat's `Schema.str_to_num`: `int(value)`, else `float(value)`.
fn check_number(at: &str, v: &Value) -> Result<(), String> {
    match v {
        Value::Null | Value::Number(_) | Value::Bool(_) => Ok(()),
        Value::String(s) if s.trim().parse::<f64>().is_ok() => Ok(()),
        Value::String(s) => Err(format!("{at}: could not convert string to float: '{s}'")),
        other => Err(format!(
            "{at}: int() argument must be a string, a bytes-like object or a real number, not \
             '{}'",
            if other.is_array() { "list" } else { "dict" }
        )),
    }
}

fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

fn boolean(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// Whether the resource is to fail (`fail`).
pub(crate) fn fails(props: &Value) -> bool {
    boolean(props.get("fail"))
}

/// Heat's `_wait_secs` for `action`: `action_wait_secs.<action>`, else `wait_secs`.
pub(crate) fn wait(props: &Value, action: StackAction) -> Wait {
    let key = match action {
        StackAction::Create => "create",
        StackAction::Update => "update",
        StackAction::Delete => "delete",
        _ => return Wait::None,
    };
    let secs = number(props.get("action_wait_secs").and_then(|m| m.get(key)))
        .or_else(|| number(props.get("wait_secs")))
        .unwrap_or(0.0);
    if secs < 0.0 {
        Wait::Forever
    } else if secs > 0.0 {
        Wait::Secs(secs)
    } else {
        Wait::None
    }
}

/// Whether an update from `before` to `after` replaces the resource: a changed `value` with
/// `update_replace: true` (Heat's `needs_replace_with_prop_diff`), or a changed
/// `update_replace_value` (a property without `update_allowed`).
pub(crate) fn replaces(before: &Value, after: &Value) -> bool {
    let changed = |k: &str| before.get(k) != after.get(k);
    (changed("value") && boolean(after.get("update_replace"))) || changed("update_replace_value")
}

/// Whether `value` changed (an update waits only then).
pub(crate) fn value_changed(before: &Value, after: &Value) -> bool {
    before.get("value") != after.get("value")
}

/// The failure Heat's `_check_status_complete` raises once the wait is over.
pub(crate) fn failure(name: &str) -> Failure {
    Failure::new(
        Some("ValueError"),
        vec!["resources".into(), name.into()],
        format!("Test Resource failed {name}"),
    )
}

/// The `output` attribute: the stored value.
pub(crate) fn output(props: &Value) -> Value {
    match props.get("value") {
        Some(Value::Null) | None => Value::from(DEFAULT_VALUE),
        Some(v) => v.clone(),
    }
}
