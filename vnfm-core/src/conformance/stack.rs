//! The behaviour of every [`StackDriver`]: one function per behaviour, each creating the
//! stacks it needs under unique names and deleting them before it returns.

use serde_json::Value;

use super::templates::{self, ONE_SERVER, SERVER_GROUP};
use super::{ensure, expect_error, wait_stack, ConformanceError, Fixture, OrFail};
use crate::driver::{
    CreateStack, DriverError, ListResources, MarkUnhealthy, Parameters, Stack, StackAction,
    StackDriver, StackResource, StackState, StackStatus, TemplateBundle, UpdateStack,
};
use crate::id::StackId;
use crate::reselect::{failed_path_from_reason, InsufficientResourcePattern};

// ---------------------------------------------------------------------------------------------
// Helpers shared with the other modules of the suite
// ---------------------------------------------------------------------------------------------

/// Creates a stack and returns its id (nothing is awaited).
pub(crate) async fn create(
    stacks: &dyn StackDriver,
    behaviour: &'static str,
    name: &str,
    template: TemplateBundle,
    parameters: Parameters,
) -> Result<StackId, ConformanceError> {
    stacks
        .create_stack(CreateStack::new(name, template, parameters))
        .await
        .or_fail(behaviour, &format!("create_stack {name}"))
}

/// Waits until the stack is not in progress. A backend declared synchronous must be there
/// at the first read.
pub(crate) async fn settle(
    stacks: &dyn StackDriver,
    fx: &Fixture,
    id: &StackId,
    behaviour: &'static str,
) -> Result<Stack, ConformanceError> {
    if fx.capabilities.synchronous_stacks {
        let stack = stacks
            .show_stack(id)
            .await
            .or_fail(behaviour, &format!("show_stack {id}"))?;
        ensure(behaviour, !stack.stack_status.is_in_progress(), || {
            format!(
                "stack {id} is {} right after the call returned, but capabilities.synchronous_stacks is set",
                stack.stack_status
            )
        })?;
        return Ok(stack);
    }
    wait_stack(stacks, id, fx.clock.as_ref(), fx.polling, behaviour).await
}

/// Fails unless `stack` is in `ACTION_COMPLETE`.
pub(crate) fn expect_status(
    behaviour: &'static str,
    stack: &Stack,
    action: StackAction,
    state: StackState,
) -> Result<(), ConformanceError> {
    let want = StackStatus::new(action, state);
    ensure(behaviour, stack.stack_status == want, || {
        format!(
            "stack {} ({}) is {} ({:?}), expected {want}",
            stack.stack_name, stack.id, stack.stack_status, stack.stack_status_reason
        )
    })
}

/// Deletes a stack the suite created and waits until it is gone. Already gone is fine, and so
/// is a lingering `DELETE_COMPLETE` (the strict check is [`delete_then_not_found`]).
pub(crate) async fn remove(
    stacks: &dyn StackDriver,
    fx: &Fixture,
    id: &StackId,
    behaviour: &'static str,
) -> Result<(), ConformanceError> {
    match stacks.delete_stack(id).await {
        Ok(()) => wait_gone(stacks, fx, id, behaviour, false).await,
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(ConformanceError::driver(
            behaviour,
            format!("cleanup: delete_stack {id}"),
            e,
        )),
    }
}

/// Polls `show_stack` after a delete until it fails with `NotFound`; `DELETE_IN_PROGRESS` is
/// waited through; `DELETE_COMPLETE` is accepted only when not `strict`.
async fn wait_gone(
    stacks: &dyn StackDriver,
    fx: &Fixture,
    id: &StackId,
    behaviour: &'static str,
    strict: bool,
) -> Result<(), ConformanceError> {
    let polls = fx.polling.max_polls.max(1);
    let mut last = String::from("never shown");
    for i in 0..polls {
        if i > 0 {
            fx.clock.sleep(fx.polling.interval).await;
        }
        let stack = match stacks.show_stack(id).await {
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => {
                return Err(ConformanceError::driver(
                    behaviour,
                    format!("show_stack {id} after delete_stack (expected not found)"),
                    e,
                ))
            }
            Ok(s) => s,
        };
        let st = stack.stack_status;
        if st.is_in_progress() {
            last = st.to_string();
            continue;
        }
        if st == StackStatus::new(StackAction::Delete, StackState::Complete) && !strict {
            return Ok(());
        }
        return Err(ConformanceError::mismatch(
            behaviour,
            format!(
                "show_stack {id} after delete_stack reported {st} ({:?}), expected not found \
                 (the StackDriver contract: a deleted stack is unknown)",
                stack.stack_status_reason
            ),
        ));
    }
    Err(ConformanceError::Timeout {
        behaviour,
        what: format!("deleted stack {id} still shown as {last}"),
        polls,
    })
}

/// Lists the resources of `id` down to `depth`.
pub(crate) async fn resources(
    stacks: &dyn StackDriver,
    id: &StackId,
    depth: u32,
    behaviour: &'static str,
) -> Result<Vec<StackResource>, ConformanceError> {
    stacks
        .list_resources(ListResources::new(id.clone(), depth))
        .await
        .or_fail(
            behaviour,
            &format!("list_resources {id} nested_depth {depth}"),
        )
}

/// The resource `name` of stack `stack` in a listing.
pub(crate) fn find<'a>(
    behaviour: &'static str,
    list: &'a [StackResource],
    stack: &StackId,
    name: &str,
) -> Result<&'a StackResource, ConformanceError> {
    list.iter()
        .find(|r| &r.stack_id == stack && r.resource_name == name)
        .ok_or_else(|| {
            ConformanceError::mismatch(
                behaviour,
                format!(
                    "no resource {name:?} of stack {stack} in the listing (found {})",
                    names(list)
                ),
            )
        })
}

/// The physical id of server resource `name` of `stack`, which must be set.
pub(crate) fn physical_id(
    behaviour: &'static str,
    list: &[StackResource],
    stack: &StackId,
    name: &str,
) -> Result<String, ConformanceError> {
    let r = find(behaviour, list, stack, name)?;
    ensure(behaviour, !r.physical_resource_id.is_empty(), || {
        format!(
            "resource {name:?} of stack {stack} has no physical_resource_id ({}: {:?})",
            r.resource_status, r.resource_status_reason
        )
    })?;
    Ok(r.physical_resource_id.clone())
}

fn names(list: &[StackResource]) -> String {
    let v: Vec<String> = list
        .iter()
        .map(|r| format!("{}@{}", r.resource_name, r.stack_id))
        .collect();
    format!("[{}]", v.join(", "))
}

/// True when a parameter value shown by the backend is the value given: equal JSON, or the
/// same text (Heat shows every value as a string).
fn same_param(given: &Value, shown: &Value) -> bool {
    if given == shown {
        return true;
    }
    match (given, shown) {
        (Value::Number(g), Value::Number(s)) => g.as_f64() == s.as_f64(),
        (Value::Number(g), Value::String(s)) => {
            s.trim().parse::<f64>().ok() == g.as_f64() || g.to_string() == *s
        }
        (Value::Bool(g), Value::String(s)) => g.to_string() == s.to_ascii_lowercase(),
        _ => false,
    }
}

fn expect_params(
    behaviour: &'static str,
    stack: &Stack,
    want: &Parameters,
) -> Result<(), ConformanceError> {
    for (k, v) in want {
        let shown = stack.parameters.get(k);
        ensure(behaviour, shown.is_some_and(|s| same_param(v, s)), || {
            format!(
                "parameter {k:?} of stack {} is {}, expected {v}",
                stack.id,
                shown.map_or_else(|| "missing".to_owned(), ToString::to_string)
            )
        })?;
    }
    Ok(())
}

/// Checks the order and links of a nested listing of `root`: the resources of `root` first,
/// then nested ones, each after the resource that owns its stack (`nested_stack_id` equal to
/// its `stack_id`, `parent_resource` equal to that resource's name).
pub(crate) fn check_nesting(
    behaviour: &'static str,
    root: &StackId,
    list: &[StackResource],
) -> Result<(), ConformanceError> {
    let mut seen_nested = false;
    for (i, r) in list.iter().enumerate() {
        if &r.stack_id == root {
            ensure(behaviour, !seen_nested, || {
                format!(
                    "resource {:?} of the top stack is listed after nested resources: {}",
                    r.resource_name,
                    names(list)
                )
            })?;
            ensure(behaviour, r.parent_resource.is_none(), || {
                format!(
                    "resource {:?} of the top stack has parent_resource {:?}, expected none",
                    r.resource_name, r.parent_resource
                )
            })?;
        } else {
            seen_nested = true;
            let parent = list
                .get(..i)
                .unwrap_or_default()
                .iter()
                .find(|p| p.nested_stack_id.as_ref() == Some(&r.stack_id));
            let Some(parent) = parent else {
                return Err(ConformanceError::mismatch(
                    behaviour,
                    format!(
                        "nested resource {:?} of stack {} is not listed after a resource whose \
                         nested_stack_id is {}: {}",
                        r.resource_name,
                        r.stack_id,
                        r.stack_id,
                        names(list)
                    ),
                ));
            };
            ensure(
                behaviour,
                r.parent_resource.as_deref() == Some(parent.resource_name.as_str()),
                || {
                    format!(
                        "nested resource {:?} of stack {} has parent_resource {:?}, expected {:?}",
                        r.resource_name, r.stack_id, r.parent_resource, parent.resource_name
                    )
                },
            )?;
        }
        ensure(
            behaviour,
            r.nested_stack_id.as_ref() != Some(&r.stack_id),
            || {
                format!(
                    "resource {:?} names its own stack {} as its nested stack",
                    r.resource_name, r.stack_id
                )
            },
        )?;
    }
    Ok(())
}

/// Runs `body` on a freshly created stack, then deletes the stack whatever the outcome; the
/// body's error wins over a cleanup error.
macro_rules! with_stack {
    ($stacks:expr, $fx:expr, $b:expr, $id:ident, $body:block) => {{
        let outcome: Result<(), ConformanceError> = async { $body }.await;
        let cleanup = $crate::conformance::stack::remove($stacks, $fx, &$id, $b).await;
        outcome.and(cleanup)
    }};
}
pub(crate) use with_stack;

// ---------------------------------------------------------------------------------------------
// Behaviours
// ---------------------------------------------------------------------------------------------

/// A one-server stack reaches `CREATE_COMPLETE`; `show_stack` reports its id and name;
/// `list_resources` lists the server `CREATE_COMPLETE` with a physical id.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn create_complete(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::create_complete";
    fx.check(B)?;
    let name = fx.unique("create");
    let id = create(
        stacks,
        B,
        &name,
        templates::bundle(ONE_SERVER),
        templates::boot_params(fx, None),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Complete)?;
        ensure(B, stack.id == id && stack.stack_name == name, || {
            format!(
                "show_stack {id} reports id {} and name {:?}, expected {id} and {name:?}",
                stack.id, stack.stack_name
            )
        })?;
        let list = resources(stacks, &id, 0, B).await?;
        let server = find(B, &list, &id, "server")?;
        ensure(
            B,
            server.resource_type == "OS::Nova::Server"
                && server.resource_status
                    == StackStatus::new(StackAction::Create, StackState::Complete)
                && !server.physical_resource_id.is_empty()
                && server.nested_stack_id.is_none(),
            || {
                format!("resource \"server\" of stack {id} is {server:?}, expected an OS::Nova::Server in CREATE_COMPLETE with a physical id")
            },
        )?;
        Ok(())
    })
}

/// The parameters given at create are shown by `show_stack` (strings as given, numbers as
/// numbers or their text, as Heat shows them).
///
/// # Errors
/// A [`ConformanceError`] naming the parameter that differed, or the call that failed.
pub async fn parameters_round_trip(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::parameters_round_trip";
    fx.check(B)?;
    let mut params = templates::boot_params(fx, None);
    params.insert(
        "note".into(),
        Value::from("round trip: ü, spaces & \"quotes\""),
    );
    params.insert("answer".into(), Value::from(42));
    let id = create(
        stacks,
        B,
        &fx.unique("params"),
        templates::bundle(ONE_SERVER),
        params.clone(),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Complete)?;
        expect_params(B, &stack, &params)?;
        // show again: reading does not change anything
        let again = stacks
            .show_stack(&id)
            .await
            .or_fail(B, &format!("show_stack {id}"))?;
        expect_params(B, &again, &params)
    })
}

/// `update_stack` has PATCH semantics: the parameters given are merged into the current ones,
/// the template is kept, and servers the update does not touch keep their physical id. Growing
/// a ResourceGroup from one server to two keeps member `0` and adds member `1`; changing only
/// a metadata parameter keeps both.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn update_patch_merges_and_keeps_servers(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::update_patch_merges_and_keeps_servers";
    fx.check(B)?;
    let mut params = templates::boot_params(fx, None);
    params.insert("note".into(), Value::from("before"));
    params.insert("count".into(), Value::from(1));
    let id = create(
        stacks,
        B,
        &fx.unique("update"),
        templates::bundle(SERVER_GROUP),
        params.clone(),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Complete)?;
        let members = |list: &[StackResource]| -> Result<StackId, ConformanceError> {
            let group = find(B, list, &id, "group")?;
            group.nested_stack_id.clone().ok_or_else(|| {
                ConformanceError::mismatch(
                    B,
                    format!("resource \"group\" of stack {id} has no nested_stack_id"),
                )
            })
        };
        let list = resources(stacks, &id, 1, B).await?;
        let nested = members(&list)?;
        let first = physical_id(B, &list, &nested, "0")?;

        let mut grow = Parameters::new();
        grow.insert("count".into(), Value::from(2));
        stacks
            .update_stack(UpdateStack::parameters(id.clone(), grow))
            .await
            .or_fail(B, &format!("update_stack {id} with count 2"))?;
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Update, StackState::Complete)?;
        params.insert("count".into(), Value::from(2));
        expect_params(B, &stack, &params)?;
        let list = resources(stacks, &id, 1, B).await?;
        let nested = members(&list)?;
        let kept = physical_id(B, &list, &nested, "0")?;
        ensure(B, kept == first, || {
            format!("member 0 was replaced by an update that only added member 1: {first} became {kept}")
        })?;
        let added = physical_id(B, &list, &nested, "1")?;
        ensure(B, added != first, || {
            format!("member 1 has the physical id of member 0 ({first})")
        })?;

        let mut note = Parameters::new();
        note.insert("note".into(), Value::from("after"));
        stacks
            .update_stack(UpdateStack::parameters(id.clone(), note))
            .await
            .or_fail(B, &format!("update_stack {id} with note"))?;
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Update, StackState::Complete)?;
        params.insert("note".into(), Value::from("after"));
        expect_params(B, &stack, &params)?;
        let list = resources(stacks, &id, 1, B).await?;
        let nested = members(&list)?;
        for (member, before) in [("0", &first), ("1", &added)] {
            let now = physical_id(B, &list, &nested, member)?;
            ensure(B, &now == before, || {
                format!(
                    "member {member} was replaced by a metadata-only update: {before} became {now}"
                )
            })?;
        }
        Ok(())
    })
}

/// `list_resources` honours `nested_depth` (0: the top stack only; 1 and 2: one and two
/// levels more) and lists nested resources after their parent with consistent `stack_id`,
/// `nested_stack_id` and `parent_resource`.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn nested_resources_listing(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::nested_resources_listing";
    fx.check(B)?;
    let id = create(
        stacks,
        B,
        &fx.unique("nested"),
        templates::nested_group(),
        templates::boot_params(fx, None),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Complete)?;
        let mut counts = Vec::new();
        for depth in 0..=2 {
            let list = resources(stacks, &id, depth, B).await?;
            check_nesting(B, &id, &list)?;
            counts.push(list.len());
            if depth == 0 {
                ensure(B, list.iter().all(|r| r.stack_id == id), || {
                    format!("nested_depth 0 lists nested resources: {}", names(&list))
                })?;
            }
            if depth == 2 {
                let group = find(B, &list, &id, "group")?;
                let Some(members) = group.nested_stack_id.clone() else {
                    return Err(ConformanceError::mismatch(
                        B,
                        "resource \"group\" has no nested_stack_id",
                    ));
                };
                let mut servers = Vec::new();
                for m in ["0", "1"] {
                    let member = find(B, &list, &members, m)?;
                    let Some(inner) = member.nested_stack_id.clone() else {
                        return Err(ConformanceError::mismatch(
                            B,
                            format!("member {m} (a template resource) has no nested_stack_id"),
                        ));
                    };
                    let server = find(B, &list, &inner, "server")?;
                    ensure(
                        B,
                        server.resource_type == "OS::Nova::Server"
                            && server.resource_status.is_complete(),
                        || format!("the server of member {m} is {server:?}"),
                    )?;
                    servers.push(physical_id(B, &list, &inner, "server")?);
                }
                ensure(B, servers.first() != servers.get(1), || {
                    format!("both members report the same server {servers:?}")
                })?;
            }
        }
        ensure(B, counts == [1, 3, 5], || {
            format!(
                "nested_depth 0, 1, 2 listed {counts:?} resources, expected [1, 3, 5] \
                 (group; + members 0 and 1; + their servers)"
            )
        })
    })
}

/// `mark_unhealthy` on one member of a ResourceGroup, then an update without changes,
/// re-creates exactly that server (new physical id) and keeps the other. When
/// [`Capabilities::mark_unhealthy`](super::Capabilities::mark_unhealthy) is false,
/// `mark_unhealthy` must fail with [`DriverError::NotImplemented`].
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn mark_unhealthy_recreates_server(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::mark_unhealthy_recreates_server";
    fx.check(B)?;
    let mut params = templates::boot_params(fx, None);
    params.insert("count".into(), Value::from(2));
    let id = create(
        stacks,
        B,
        &fx.unique("heal"),
        templates::bundle(SERVER_GROUP),
        params,
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Complete)?;
        let list = resources(stacks, &id, 1, B).await?;
        let group = find(B, &list, &id, "group")?;
        let Some(nested) = group.nested_stack_id.clone() else {
            return Err(ConformanceError::mismatch(
                B,
                "resource \"group\" has no nested_stack_id",
            ));
        };
        let mark = MarkUnhealthy::new(nested.clone(), "0", "vnfm conformance: heal member 0");
        if !fx.capabilities.mark_unhealthy {
            return expect_error(
                B,
                "mark_unhealthy without the capability",
                stacks.mark_unhealthy(mark).await,
                "not implemented",
                |e| matches!(e, DriverError::NotImplemented { .. }),
            );
        }
        let m0 = physical_id(B, &list, &nested, "0")?;
        let m1 = physical_id(B, &list, &nested, "1")?;
        stacks
            .mark_unhealthy(mark)
            .await
            .or_fail(B, &format!("mark_unhealthy 0 of stack {nested}"))?;
        stacks
            .update_stack(UpdateStack::parameters(id.clone(), Parameters::new()))
            .await
            .or_fail(B, &format!("update_stack {id} after mark_unhealthy"))?;
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Update, StackState::Complete)?;
        let list = resources(stacks, &id, 1, B).await?;
        let group = find(B, &list, &id, "group")?;
        let nested = group.nested_stack_id.clone().unwrap_or(nested);
        let new0 = physical_id(B, &list, &nested, "0")?;
        let new1 = physical_id(B, &list, &nested, "1")?;
        ensure(B, new0 != m0, || {
            format!("member 0 was marked unhealthy but kept its server {m0} through the update")
        })?;
        ensure(B, new1 == m1, || {
            format!("member 1 was healthy but its server {m1} was replaced by {new1}")
        })?;
        let r0 = find(B, &list, &nested, "0")?;
        ensure(B, r0.resource_status.is_complete(), || {
            format!("the re-created member 0 is {}", r0.resource_status)
        })
    })
}

/// A server no host can hold fails the stack with `CREATE_FAILED`; the reason is one the
/// default [`InsufficientResourcePattern::standard`] matches, and
/// [`failed_path_from_reason`] reads the failing resource (`server`) from it.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn unschedulable_server_fails_with_capacity_reason(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::unschedulable_server_fails_with_capacity_reason";
    fx.check(B)?;
    let pattern = InsufficientResourcePattern::standard().map_err(|e| {
        ConformanceError::mismatch(B, format!("the default pattern does not compile: {e}"))
    })?;
    let id = create(
        stacks,
        B,
        &fx.unique("nohost"),
        templates::bundle(ONE_SERVER),
        templates::boot_params(fx, Some(fx.unschedulable_flavor.as_str())),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Failed)?;
        let reason = &stack.stack_status_reason;
        ensure(B, pattern.is_match(reason), || {
            format!(
                "the reason of stack {id} is not an insufficient-resource failure for the \
                 default pattern {:?}: {reason:?}",
                pattern.as_str()
            )
        })?;
        let path = failed_path_from_reason(reason);
        ensure(
            B,
            path.as_deref() == Some(&["server".to_owned()][..]),
            || {
                format!(
                    "failed_path_from_reason gives {path:?} for {reason:?}, expected [\"server\"]"
                )
            },
        )?;
        let list = resources(stacks, &id, 0, B).await?;
        let server = find(B, &list, &id, "server")?;
        ensure(
            B,
            server.resource_status == StackStatus::new(StackAction::Create, StackState::Failed),
            || {
                format!(
                    "resource \"server\" is {}, expected CREATE_FAILED",
                    server.resource_status
                )
            },
        )
    })
}

/// Creating a stack with the name of an existing one fails with
/// [`DriverError::AlreadyExists`].
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn duplicate_name_already_exists(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::duplicate_name_already_exists";
    fx.check(B)?;
    let name = fx.unique("dup");
    let id = create(
        stacks,
        B,
        &name,
        templates::bundle(ONE_SERVER),
        templates::boot_params(fx, None),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        settle(stacks, fx, &id, B).await?;
        let again = stacks
            .create_stack(CreateStack::new(
                &name,
                templates::bundle(ONE_SERVER),
                templates::boot_params(fx, None),
            ))
            .await;
        if let Ok(second) = &again {
            remove(stacks, fx, second, B).await?;
        }
        expect_error(
            B,
            &format!("create_stack {name} a second time"),
            again,
            "already exists",
            |e| matches!(e, DriverError::AlreadyExists { .. }),
        )
    })
}

/// Every call on a stack that does not exist fails with [`DriverError::NotFound`]:
/// `show_stack`, `update_stack`, `delete_stack`, `list_resources` and `mark_unhealthy` (or
/// [`DriverError::NotImplemented`] for the last without the capability).
///
/// # Errors
/// A [`ConformanceError`] naming the call that answered otherwise.
pub async fn unknown_stack_not_found(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::unknown_stack_not_found";
    fx.check(B)?;
    let id = StackId::new(fx.unique("missing"));
    let nf = |e: &DriverError| e.is_not_found();
    expect_error(
        B,
        "show_stack of an unknown stack",
        stacks.show_stack(&id).await,
        "not found",
        nf,
    )?;
    expect_error(
        B,
        "update_stack of an unknown stack",
        stacks
            .update_stack(UpdateStack::parameters(id.clone(), Parameters::new()))
            .await,
        "not found",
        nf,
    )?;
    expect_error(
        B,
        "delete_stack of an unknown stack",
        stacks.delete_stack(&id).await,
        "not found",
        nf,
    )?;
    expect_error(
        B,
        "list_resources of an unknown stack",
        stacks
            .list_resources(ListResources::new(id.clone(), 1))
            .await,
        "not found",
        nf,
    )?;
    let unimplemented_ok = !fx.capabilities.mark_unhealthy;
    expect_error(
        B,
        "mark_unhealthy in an unknown stack",
        stacks
            .mark_unhealthy(MarkUnhealthy::new(id.clone(), "server", "vnfm conformance"))
            .await,
        "not found",
        |e| {
            e.is_not_found()
                || (unimplemented_ok && matches!(e, DriverError::NotImplemented { .. }))
        },
    )
}

/// After `delete_stack`, `show_stack` fails with [`DriverError::NotFound`] (once a
/// `DELETE_IN_PROGRESS` is over), and so do a second `delete_stack` and `list_resources`.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn delete_then_not_found(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::delete_then_not_found";
    fx.check(B)?;
    let id = create(
        stacks,
        B,
        &fx.unique("delete"),
        templates::bundle(ONE_SERVER),
        templates::boot_params(fx, None),
    )
    .await?;
    let outcome = async {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Complete)?;
        stacks
            .delete_stack(&id)
            .await
            .or_fail(B, &format!("delete_stack {id}"))?;
        wait_gone(stacks, fx, &id, B, true).await?;
        expect_error(
            B,
            "delete_stack of a deleted stack",
            stacks.delete_stack(&id).await,
            "not found",
            DriverError::is_not_found,
        )?;
        expect_error(
            B,
            "list_resources of a deleted stack",
            stacks
                .list_resources(ListResources::new(id.clone(), 0))
                .await,
            "not found",
            DriverError::is_not_found,
        )
    }
    .await;
    if outcome.is_err() {
        // best effort: the error of the behaviour is what matters
        let _ = remove(stacks, fx, &id, B).await;
    }
    outcome
}

/// A template the backend cannot validate fails `create_stack` with
/// [`DriverError::Invalid`] and creates nothing: the name stays free for a valid template.
///
/// # Errors
/// A [`ConformanceError`] naming the template that was not rejected, or the call that failed.
pub async fn invalid_template_creates_nothing(
    stacks: &dyn StackDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "stack::invalid_template_creates_nothing";
    fx.check(B)?;
    let name = fx.unique("invalid");
    let missing_flavor = fx.unique("no-such-flavor");
    for (what, bundle) in templates::invalid(fx, &missing_flavor) {
        let result = stacks
            .create_stack(CreateStack::new(&name, bundle, Parameters::new()))
            .await;
        if let Ok(id) = &result {
            remove(stacks, fx, id, B).await?;
        }
        expect_error(
            B,
            &format!("create_stack with {what}"),
            result,
            "invalid",
            |e| matches!(e, DriverError::Invalid { .. }),
        )?;
    }
    let id = create(
        stacks,
        B,
        &name,
        templates::bundle(ONE_SERVER),
        templates::boot_params(fx, None),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Complete)
    })
}

/// Runs every function of this module in turn; stops at the first error.
///
/// # Errors
/// The first [`ConformanceError`].
pub async fn run_all(stacks: &dyn StackDriver, fx: &Fixture) -> Result<(), ConformanceError> {
    create_complete(stacks, fx).await?;
    parameters_round_trip(stacks, fx).await?;
    update_patch_merges_and_keeps_servers(stacks, fx).await?;
    nested_resources_listing(stacks, fx).await?;
    mark_unhealthy_recreates_server(stacks, fx).await?;
    unschedulable_server_fails_with_capacity_reason(stacks, fx).await?;
    duplicate_name_already_exists(stacks, fx).await?;
    unknown_stack_not_found(stacks, fx).await?;
    delete_then_not_found(stacks, fx).await?;
    invalid_template_creates_nothing(stacks, fx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(name: &str, stack: &str, nested: Option<&str>, parent: Option<&str>) -> StackResource {
        StackResource {
            resource_name: name.into(),
            physical_resource_id: format!("p-{name}"),
            resource_type: "T".into(),
            resource_status: StackStatus::new(StackAction::Create, StackState::Complete),
            resource_status_reason: String::new(),
            parent_resource: parent.map(Into::into),
            stack_id: stack.into(),
            nested_stack_id: nested.map(Into::into),
        }
    }

    #[test]
    fn nesting_accepts_parents_first_and_rejects_the_rest() {
        let root = StackId::new("root");
        let good = vec![
            res("group", "root", Some("n1"), None),
            res("0", "n1", Some("n2"), Some("group")),
            res("server", "n2", None, Some("0")),
        ];
        assert!(check_nesting("b", &root, &good).is_ok());

        let child_first = vec![good[1].clone(), good[0].clone()];
        let e = check_nesting("b", &root, &child_first).unwrap_err();
        assert!(e.to_string().contains("not listed after"), "{e}");

        let top_late = vec![
            good[0].clone(),
            good[1].clone(),
            res("x", "root", None, None),
        ];
        let e = check_nesting("b", &root, &top_late).unwrap_err();
        assert!(e.to_string().contains("after nested resources"), "{e}");

        let wrong_parent = vec![good[0].clone(), res("0", "n1", None, Some("other"))];
        let e = check_nesting("b", &root, &wrong_parent).unwrap_err();
        assert!(
            e.to_string().contains("parent_resource Some(\"other\")"),
            "{e}"
        );

        let self_nested = vec![res("loop", "root", Some("root"), None)];
        assert!(check_nesting("b", &root, &self_nested).is_err());
    }

    #[test]
    fn parameters_compare_as_heat_shows_them() {
        assert!(same_param(&Value::from("a"), &Value::from("a")));
        assert!(same_param(&Value::from(42), &Value::from("42")));
        assert!(same_param(&Value::from(2), &Value::from(2.0)));
        assert!(same_param(&Value::from(true), &Value::from("True")));
        assert!(!same_param(&Value::from("a"), &Value::from("b")));
        assert!(!same_param(&Value::from(42), &Value::from("43")));
        assert!(!same_param(&Value::from("42"), &Value::from(42)));
    }
}
