//! `MODIFY_INFO`: a SOL003 `VnfInfoModificationRequest` (the body of `PATCH
//! /vnf_instances/{id}`) applied to an instance.
//!
//! - [`check`] validates the request: only [`MODIFIABLE`] members; `vnfInstanceName` and
//!   `vnfInstanceDescription` a string or `null` (removes it); `vnfConfigurableProperties` and
//!   `metadata` an object or `null`.
//! - [`apply`] is the pure part: the instance after the request (the two maps merged as a JSON
//!   merge patch, RFC 7396, see [`merge_patch`]) and the occurrence's `changedInfo` (the
//!   members the request changed, as given).
//! - The operation itself is a plan of the [`super::Operation`] machine,
//!   [`super::Lifecycle::modify_info`]: it takes the instance like every other operation (it
//!   refuses while another one is not over, SOL003: `FAILED_TEMP` too) and records the new
//!   instance with its `MODIFY_INFO` occurrence, `COMPLETED`.
//!
//! ```
//! use serde_json::json;
//! use vnfm_core::lcm::VnfInstance;
//! use vnfm_core::lifecycle::modify::apply;
//!
//! let inst = VnfInstance::new("i-1", "vnfd-1");
//! let patch = json!({"vnfInstanceName": "edge", "metadata": {"tier": "gold"}});
//! let (after, changed) = apply(&inst, patch.as_object().unwrap())?;
//! assert_eq!(after.vnf_instance_name.as_deref(), Some("edge"));
//! assert_eq!(changed["metadata"]["tier"], "gold");
//! # Ok::<(), vnfm_core::lifecycle::modify::ModifyError>(())
//! ```

use serde_json::Value;

use crate::driver::DriverError;
use crate::grant::KeyValuePairs;
use crate::id::{OpOccId, VnfInstanceId};
use crate::lcm::VnfInstance;

/// The members of a `VnfInfoModificationRequest` that vnfm applies.
pub const MODIFIABLE: [&str; 4] = [
    "vnfInstanceName",
    "vnfInstanceDescription",
    "vnfConfigurableProperties",
    "metadata",
];

/// Why a modification was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModifyError {
    /// A member vnfm does not modify (HTTP 422).
    #[error(
        "VnfInfoModificationRequest: {member} cannot be modified here; expected one of {}",
        MODIFIABLE.join(", ")
    )]
    Unmodifiable {
        /// The member.
        member: String,
    },
    /// A member of the wrong JSON type (HTTP 400).
    #[error("VnfInfoModificationRequest.{member} is {value}; expected {expected}")]
    BadMember {
        /// The member.
        member: &'static str,
        /// Its value, as JSON text.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// The instance does not exist (HTTP 404).
    #[error("VNF instance {0} not found")]
    NotFound(VnfInstanceId),
    /// Another operation of the instance is not over (HTTP 409).
    #[error("operation {op_occ} is {state} on VNF instance {instance}; fail it first")]
    Busy {
        /// The instance.
        instance: VnfInstanceId,
        /// The operation occurrence not over.
        op_occ: OpOccId,
        /// Its state, as SOL003 names it.
        state: String,
    },
    /// The store failed (HTTP 500).
    #[error("the state store failed")]
    Store(#[source] DriverError),
}

/// Merges `patch` into `target` as a JSON merge patch (RFC 7396): `null` removes a key, an
/// object merges into an object, anything else replaces.
pub fn merge_patch(target: &mut KeyValuePairs, patch: &KeyValuePairs) {
    for (k, v) in patch {
        match (v, target.get_mut(k)) {
            (Value::Null, _) => {
                target.remove(k);
            }
            (Value::Object(p), Some(Value::Object(t))) => merge_patch(t, p),
            (Value::Object(p), _) => {
                // A new object member is the patch without its nulls (RFC 7396).
                let mut fresh = KeyValuePairs::new();
                merge_patch(&mut fresh, p);
                target.insert(k.clone(), Value::Object(fresh));
            }
            _ => {
                target.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Checks a `VnfInfoModificationRequest` (see the module docs).
///
/// # Errors
/// [`ModifyError::Unmodifiable`] naming the first member vnfm does not modify;
/// [`ModifyError::BadMember`] naming a member of the wrong type and its value.
pub fn check(patch: &KeyValuePairs) -> Result<(), ModifyError> {
    if let Some(k) = patch.keys().find(|k| !MODIFIABLE.contains(&k.as_str())) {
        return Err(ModifyError::Unmodifiable { member: k.clone() });
    }
    let expect = |member: &'static str, ok: fn(&Value) -> bool, expected: &'static str| match patch
        .get(member)
    {
        Some(v) if !v.is_null() && !ok(v) => Err(ModifyError::BadMember {
            member,
            value: v.to_string(),
            expected,
        }),
        _ => Ok(()),
    };
    expect("vnfInstanceName", Value::is_string, "a string (or null)")?;
    expect(
        "vnfInstanceDescription",
        Value::is_string,
        "a string (or null)",
    )?;
    expect("vnfConfigurableProperties", Value::is_object, "an object")?;
    expect("metadata", Value::is_object, "an object")
}

/// The instance after `patch` (checked with [`check`]), and the `changedInfo` of its
/// occurrence (the request's members, as given).
///
/// # Errors
/// As [`check`].
pub fn apply(
    inst: &VnfInstance,
    patch: &KeyValuePairs,
) -> Result<(VnfInstance, KeyValuePairs), ModifyError> {
    check(patch)?;
    let mut out = inst.clone();
    let text = |k: &str| patch.get(k).map(|v| v.as_str().map(str::to_owned));
    if let Some(v) = text("vnfInstanceName") {
        out.vnf_instance_name = v;
    }
    if let Some(v) = text("vnfInstanceDescription") {
        out.vnf_instance_description = v;
    }
    let merged = |current: Option<KeyValuePairs>, member: &str| match patch.get(member) {
        Some(Value::Object(p)) => {
            let mut m = current.unwrap_or_default();
            merge_patch(&mut m, p);
            Some(m)
        }
        Some(Value::Null) => None,
        _ => current,
    };
    out.vnf_configurable_properties = merged(
        out.vnf_configurable_properties.take(),
        "vnfConfigurableProperties",
    );
    out.metadata = merged(out.metadata.take(), "metadata");
    Ok((out, patch.clone()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kv(v: Value) -> KeyValuePairs {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn merge_patch_adds_replaces_and_removes() {
        let mut t = kv(json!({"a": 1, "b": {"c": 2, "d": 3}, "e": 4}));
        let p = json!({"a": 5, "b": {"c": null, "x": 1}, "e": null, "n": true,
                       "o": {"k": null, "v": 1}});
        merge_patch(&mut t, p.as_object().unwrap());
        assert_eq!(
            Value::Object(t),
            json!({"a": 5, "b": {"d": 3, "x": 1}, "n": true, "o": {"v": 1}})
        );
    }

    #[test]
    fn bad_requests_name_the_member() {
        let err = check(&kv(json!({"flavourId": "x"}))).unwrap_err();
        assert!(matches!(err, ModifyError::Unmodifiable { .. }));
        assert!(
            err.to_string().contains("flavourId cannot be modified"),
            "{err}"
        );
        for (member, bad) in [
            ("metadata", json!([1])),
            ("vnfConfigurableProperties", json!("x")),
            ("vnfInstanceName", json!(3)),
        ] {
            let err = check(&kv(json!({ member: bad }))).unwrap_err();
            assert!(matches!(err, ModifyError::BadMember { .. }), "{err}");
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("VnfInfoModificationRequest.{member} is")),
                "{msg}"
            );
        }
        assert!(check(&kv(json!({"vnfInstanceName": null, "metadata": null}))).is_ok());
    }

    #[test]
    fn apply_merges_the_maps_and_reports_what_changed() {
        let mut inst = VnfInstance::new("i-1", "vnfd-1");
        inst.vnf_instance_name = Some("old".into());
        inst.vnf_instance_description = Some("keep".into());
        inst.metadata = Some(kv(json!({"a": 1, "b": 2})));
        let patch = kv(json!({
            "vnfInstanceName": null,
            "vnfConfigurableProperties": {"isAutohealEnabled": true},
            "metadata": {"b": null, "c": 3},
        }));
        let (after, changed) = apply(&inst, &patch).unwrap();
        assert_eq!(after.vnf_instance_name, None);
        assert_eq!(after.vnf_instance_description.as_deref(), Some("keep"));
        assert_eq!(
            after.vnf_configurable_properties,
            Some(kv(json!({"isAutohealEnabled": true})))
        );
        assert_eq!(after.metadata, Some(kv(json!({"a": 1, "c": 3}))));
        assert_eq!(changed, patch);
        // `null` for a whole map removes it.
        let (after, _) = apply(&after, &kv(json!({"metadata": null}))).unwrap();
        assert_eq!(after.metadata, None);
    }
}
