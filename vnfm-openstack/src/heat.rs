//! Heat: implements [`StackDriver`] over the orchestration API v1.
//!
//! Heat addresses a stack as `stacks/{name}/{id}`; a [`StackId`] holds the id only, so the
//! client looks the name up with `GET /stacks/{id}` (a 302 to the full address, never
//! followed blindly) and remembers it. Every request sends `Accept: application/json` (Heat
//! answers HTML otherwise).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use reqwest::header::LOCATION;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use vnfm_core::driver::{
    CreateStack, DriverError, ListResources, MarkUnhealthy, Parameters, Stack, StackAction,
    StackDriver, StackOutput, StackResource, StackState, StackStatus, UpdateStack,
};
use vnfm_core::id::StackId;

use crate::error::Error;
use crate::service::heat::{SERVICE, TYPE};
use crate::session::{Call, Reply, Session};

/// The Heat client: implements [`StackDriver`]; clones share the session and the cache of
/// stack names.
#[derive(Clone)]
pub struct Heat {
    pub(crate) session: Arc<Session>,
    pub(crate) names: Arc<Mutex<BTreeMap<String, String>>>,
}

impl fmt::Debug for Heat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heat")
            .field("session", &self.session)
            .field("known_stacks", &self.lock_names().len())
            .finish()
    }
}

/// A stack event (Heat's event list).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StackEvent {
    /// `id`
    pub id: String,
    /// `event_time`
    pub event_time: String,
    /// `resource_name`
    pub resource_name: String,
    /// `physical_resource_id`
    pub physical_resource_id: String,
    /// `resource_status`, e.g. `CREATE_FAILED` (kept as text: events also carry statuses such
    /// as `SIGNAL_COMPLETE`).
    pub resource_status: String,
    /// `resource_status_reason`
    pub resource_status_reason: String,
    /// The stack the event belongs to (the `stack` link).
    pub stack_id: Option<StackId>,
}

/// Request of [`Heat::events`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListEvents {
    /// The stack.
    pub id: StackId,
    /// Heat `nested_depth`.
    pub nested_depth: u32,
}

impl ListEvents {
    /// The events of `id` and of its nested stacks down to `nested_depth`, oldest first.
    pub fn new(id: StackId, nested_depth: u32) -> Self {
        Self { id, nested_depth }
    }
}

impl Heat {
    fn lock_names(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.names.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember(&self, id: &str, name: &str) {
        self.lock_names().insert(id.to_owned(), name.to_owned());
    }

    /// `(name, id)` of a stack: from the cache when `cached` allows it, else from
    /// `GET /stacks/{id}` (which Heat answers for live stacks only).
    async fn locate(&self, id: &StackId, cached: bool) -> Result<(String, String), Error> {
        if cached {
            if let Some(name) = self.lock_names().get(id.as_str()) {
                return Ok((name.clone(), id.0.clone()));
            }
        }
        let reply = self
            .session
            .call(Call::new(
                SERVICE,
                TYPE,
                Method::GET,
                vec!["stacks", id.as_str()],
            ))
            .await?;
        let (name, sid) = if reply.status.is_redirection() {
            let location = reply
                .headers
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| reply.unexpected("a Location header with the 302"))?;
            name_and_id(location).ok_or_else(|| {
                reply.unexpected(format!(
                    "a Location of the form .../stacks/{{name}}/{{id}}, got {location:?}"
                ))
            })?
        } else {
            let v: Value = reply.json()?;
            let st = v.get("stack").unwrap_or(&v);
            match (
                st.get("stack_name").and_then(Value::as_str),
                st.get("id").and_then(Value::as_str),
            ) {
                (Some(n), Some(i)) => (n.to_owned(), i.to_owned()),
                _ => return Err(reply.unexpected("a 302 or a stack with stack_name and id")),
            }
        };
        self.remember(&sid, &name);
        Ok((name, sid))
    }

    /// `GET /stacks/{name}/{id}/events?nested_depth=N&sort_dir=asc`.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown stack; the other kinds as mapped from the
    /// HTTP status.
    pub async fn events(&self, req: ListEvents) -> Result<Vec<StackEvent>, DriverError> {
        let (name, id) = self.locate(&req.id, true).await?;
        let mut call = Call::new(
            SERVICE,
            TYPE,
            Method::GET,
            vec!["stacks", &name, &id, "events"],
        )
        .query("sort_dir", "asc");
        if req.nested_depth > 0 {
            call = call.query("nested_depth", req.nested_depth.to_string());
        }
        let reply = self.session.call(call).await?;
        let v: Value = reply.json()?;
        let list = v
            .get("events")
            .and_then(Value::as_array)
            .ok_or_else(|| reply.unexpected("an `events` array"))?;
        Ok(list
            .iter()
            .map(|e| StackEvent {
                id: text(e, "id"),
                event_time: text(e, "event_time"),
                resource_name: text(e, "resource_name"),
                physical_resource_id: text(e, "physical_resource_id"),
                resource_status: text(e, "resource_status"),
                resource_status_reason: text(e, "resource_status_reason"),
                stack_id: link(e, "stack").map(|(_, id)| StackId::new(id)),
            })
            .collect())
    }

    async fn show(&self, id: &StackId) -> Result<Stack, Error> {
        let (name, sid) = self.locate(id, true).await?;
        let reply = self
            .session
            .call(Call::new(
                SERVICE,
                TYPE,
                Method::GET,
                vec!["stacks", &name, &sid],
            ))
            .await?;
        parse_stack(&reply)
    }
}

fn text(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `(name, id)` of the link `rel` of a Heat object.
fn link(v: &Value, rel: &str) -> Option<(String, String)> {
    v.get("links")?
        .as_array()?
        .iter()
        .find(|l| l.get("rel").and_then(Value::as_str) == Some(rel))
        .and_then(|l| l.get("href")?.as_str())
        .and_then(name_and_id)
}

/// `(name, id)` from `.../stacks/{name}/{id}[/...]`.
fn name_and_id(href: &str) -> Option<(String, String)> {
    let path = href.split(['?', '#']).next()?;
    let rest = &path[path.rfind("/stacks/")? + "/stacks/".len()..];
    let mut parts = rest.split('/');
    let name = parts.next().filter(|s| !s.is_empty())?;
    let id = parts.next().filter(|s| !s.is_empty())?;
    Some((name.to_owned(), id.to_owned()))
}

fn status(reply: &Reply, field: &str, v: &Value) -> Result<StackStatus, Error> {
    let s = v.get(field).and_then(Value::as_str).unwrap_or_default();
    s.parse()
        .map_err(|e| reply.unexpected(format!("{field}: {e}")))
}

fn parse_stack(reply: &Reply) -> Result<Stack, Error> {
    let v: Value = reply.json()?;
    let st = v
        .get("stack")
        .ok_or_else(|| reply.unexpected("a `stack` object"))?;
    let id = st
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| reply.unexpected("stack.id"))?;
    let outputs = st
        .get("outputs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|o| StackOutput {
                    output_key: text(o, "output_key"),
                    output_value: o.get("output_value").cloned().unwrap_or(Value::Null),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Stack {
        id: StackId::new(id),
        stack_name: text(st, "stack_name"),
        stack_status: status(reply, "stack_status", st)?,
        stack_status_reason: text(st, "stack_status_reason"),
        parameters: st
            .get("parameters")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        outputs,
    })
}

/// Heat's resource list, ordered as the [`StackDriver`] contract says: the resources of
/// `root` first, then each nested stack's resources after the resource that owns it.
fn parse_resources(reply: &Reply, root: &str) -> Result<Vec<StackResource>, Error> {
    let v: Value = reply.json()?;
    let list = v
        .get("resources")
        .and_then(Value::as_array)
        .ok_or_else(|| reply.unexpected("a `resources` array"))?;
    let mut parsed = Vec::with_capacity(list.len());
    for r in list {
        let stack_id = link(r, "stack").map_or_else(|| root.to_owned(), |(_, id)| id);
        parsed.push(StackResource {
            resource_name: text(r, "resource_name"),
            physical_resource_id: text(r, "physical_resource_id"),
            resource_type: text(r, "resource_type"),
            resource_status: status(reply, "resource_status", r)?,
            resource_status_reason: text(r, "resource_status_reason"),
            parent_resource: r
                .get("parent_resource")
                .and_then(Value::as_str)
                .map(str::to_owned),
            stack_id: StackId::new(stack_id),
            nested_stack_id: link(r, "nested").map(|(_, id)| StackId::new(id)),
        });
    }
    let mut out = Vec::with_capacity(parsed.len());
    let mut left: Vec<Option<StackResource>> = parsed.into_iter().map(Some).collect();
    let mut queue = VecDeque::from([root.to_owned()]);
    while let Some(stack) = queue.pop_front() {
        for slot in &mut left {
            if slot.as_ref().is_some_and(|r| r.stack_id.as_str() == stack) {
                if let Some(r) = slot.take() {
                    if let Some(n) = &r.nested_stack_id {
                        queue.push_back(n.0.clone());
                    }
                    out.push(r);
                }
            }
        }
    }
    out.extend(left.into_iter().flatten());
    Ok(out)
}

#[async_trait]
impl StackDriver for Heat {
    async fn create_stack(&self, req: CreateStack) -> Result<StackId, DriverError> {
        let mut body = json!({
            "stack_name": req.name,
            "template": req.template.template,
            "files": req.template.files,
            "parameters": req.parameters,
            "disable_rollback": req.disable_rollback,
        });
        if let (Some(t), Value::Object(m)) = (req.timeout_mins, &mut body) {
            m.insert("timeout_mins".into(), Value::from(t));
        }
        let reply = self
            .session
            .call(Call::new(SERVICE, TYPE, Method::POST, vec!["stacks"]).body(body))
            .await?;
        let v: Value = reply.json().map_err(DriverError::from)?;
        let id = v
            .get("stack")
            .and_then(|s| s.get("id"))
            .and_then(Value::as_str)
            .ok_or_else(|| reply.unexpected("stack.id in the create answer"))?;
        self.remember(id, &req.name);
        Ok(StackId::new(id))
    }

    async fn update_stack(&self, req: UpdateStack) -> Result<(), DriverError> {
        let (name, id) = self.locate(&req.id, true).await?;
        let mut body = json!({ "parameters": Value::Object(req.parameters) });
        if let (Some(t), Value::Object(m)) = (req.template, &mut body) {
            m.insert("template".into(), Value::from(t.template));
            m.insert("files".into(), json!(t.files));
        }
        self.session
            .call(Call::new(SERVICE, TYPE, Method::PATCH, vec!["stacks", &name, &id]).body(body))
            .await?;
        Ok(())
    }

    async fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
        let stack = self.show(id).await?;
        if stack.stack_status == StackStatus::new(StackAction::Delete, StackState::Complete) {
            return Err(DriverError::NotFound {
                driver: SERVICE,
                what: format!("stack {id} (DELETE_COMPLETE)"),
            });
        }
        Ok(stack)
    }

    async fn delete_stack(&self, id: &StackId) -> Result<(), DriverError> {
        let (name, sid) = self.locate(id, false).await?;
        self.session
            .call(Call::new(
                SERVICE,
                TYPE,
                Method::DELETE,
                vec!["stacks", &name, &sid],
            ))
            .await?;
        Ok(())
    }

    async fn list_resources(&self, req: ListResources) -> Result<Vec<StackResource>, DriverError> {
        let (name, id) = self.locate(&req.id, true).await?;
        let mut call = Call::new(
            SERVICE,
            TYPE,
            Method::GET,
            vec!["stacks", &name, &id, "resources"],
        );
        if req.nested_depth > 0 {
            call = call.query("nested_depth", req.nested_depth.to_string());
        }
        let path = call.path.clone();
        let query = call.query.clone();
        let mut reply = self.session.call(call).await;
        // Right after an update that replaced servers, Heat may answer a nested listing with a
        // 404 about its own bookkeeping ("ResourcePropertiesData with id 59 not found") while
        // it cleans the replaced resources up: the stack is there, so ask again (twice at most).
        for _ in 0..2 {
            match &reply {
                Err(crate::Error::Http {
                    status: 404,
                    message,
                    ..
                }) if message.contains("ResourcePropertiesData") => {
                    let mut again = Call::new(SERVICE, TYPE, Method::GET, path.clone());
                    again.query = query.clone();
                    reply = self.session.call(again).await;
                }
                _ => break,
            }
        }
        let reply = reply?;
        let list = parse_resources(&reply, &id)?;
        if list.is_empty() {
            // Heat finds deleted stacks by id and lists them empty: the contract says NotFound
            let shown = self
                .session
                .call(Call::new(
                    SERVICE,
                    TYPE,
                    Method::GET,
                    vec!["stacks", &name, &id],
                ))
                .await?;
            let stack = parse_stack(&shown)?;
            if stack.stack_status == StackStatus::new(StackAction::Delete, StackState::Complete) {
                return Err(DriverError::NotFound {
                    driver: SERVICE,
                    what: format!("stack {} (DELETE_COMPLETE)", req.id),
                });
            }
        }
        let v: Value = reply.json()?;
        if let Some(a) = v.get("resources").and_then(Value::as_array) {
            for r in a {
                for rel in ["stack", "nested"] {
                    if let Some((n, i)) = link(r, rel) {
                        self.remember(&i, &n);
                    }
                }
            }
        }
        Ok(list)
    }

    async fn mark_unhealthy(&self, req: MarkUnhealthy) -> Result<(), DriverError> {
        let (name, id) = self.locate(&req.stack_id, true).await?;
        let body = json!({
            "mark_unhealthy": true,
            "resource_status_reason": req.reason,
        });
        self.session
            .call(
                Call::new(
                    SERVICE,
                    TYPE,
                    Method::PATCH,
                    vec!["stacks", &name, &id, "resources", &req.resource_name],
                )
                .body(body),
            )
            .await?;
        Ok(())
    }
}

/// Parameters as Heat shows them, without the pseudo parameters (`OS::stack_id`,
/// `OS::project_id`, `OS::stack_name`) Heat adds.
pub fn user_parameters(stack: &Stack) -> Parameters {
    stack
        .parameters
        .iter()
        .filter(|(k, _)| !k.starts_with("OS::"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_give_name_and_id() {
        assert_eq!(
            name_and_id("http://127.0.0.1:8004/v1/p/stacks/vnf1-vdus-oz7/d786?x=1"),
            Some(("vnf1-vdus-oz7".into(), "d786".into()))
        );
        assert_eq!(
            name_and_id("http://h/v1/p/stacks/vnf1/f00d/resources/grp"),
            Some(("vnf1".into(), "f00d".into()))
        );
        assert_eq!(name_and_id("http://h/v1/p/stacks/vnf1"), None);
        assert_eq!(name_and_id("http://h/other"), None);
    }
}
