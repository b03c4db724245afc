//! Placement: the free capacity of compute hosts, for [`Nova`](crate::Nova)'s zone listing.
//!
//! The zone listing (`GET /os-availability-zone/detail`) names each zone's compute hosts; the
//! free capacity of a host comes from the Placement service of the catalog (service type
//! `placement`, every request with `OpenStack-API-Version: placement 1.29`):
//!
//! 1. `GET /resource_providers`: every provider's name, uuid and tree. A host's provider is
//!    the one named after it: Nova names a compute node's provider after the node's
//!    `hypervisor_hostname`, which is the service host with the fake driver (checked against
//!    Nova 34) and usually with libvirt. For a host with no provider of its name, Nova's
//!    `GET /os-hypervisors/detail` maps the service host (`service.host`) to its compute
//!    nodes, whose `id` (microversion 2.53 and later) is their provider's uuid, else whose
//!    `hypervisor_hostname` is their provider's name. A host with several nodes (Ironic) adds
//!    them up; a provider's whole tree (nested providers such as NUMA nodes) counts.
//! 2. `GET /allocation_candidates?resources=VCPU:1`: its `provider_summaries` give, in one call,
//!    the `capacity` and `used` of every resource class of every provider in each tree that
//!    can still take one VCPU.
//! 3. A tree missing there (no VCPU left, or an answer cut by Placement's
//!    `max_allocation_candidates`) is read provider by provider:
//!    `GET /resource_providers/{uuid}/inventories` and `.../usages`.
//!
//! A listing therefore costs two Placement requests (plus `os-hypervisors/detail` when a host
//! has no provider of its name, plus two per provider of a tree with no VCPU left).
//!
//! For each of `VCPU`, `MEMORY_MB` and `DISK_GB` a host's free amount is the sum over its
//! providers of `capacity - used` (zero when negative, as after a lowered allocation ratio),
//! where `capacity` is Placement's own `int((total - reserved) * allocation_ratio)`, truncated
//! toward zero as Python does. The sum over several providers is an upper bound for one
//! server, which takes its resources from one provider per class.
//!
//! When the capacity cannot be known the hosts keep `free: None` (unknown) and the listing
//! still succeeds; the [`CapacityReport`] of the listing says why, with a
//! [`CapacityUnknown`] kind and a message: Placement not asked
//! ([`CloudConfig::free_capacity`](crate::CloudConfig::free_capacity) off), no host listed
//! (Nova's `/detail` is refused to non-admin users by default), no `placement` endpoint,
//! Placement refusing the credentials (HTTP 403: its default policy lets only `admin` and
//! `service` users read providers), Placement failing, a host with no provider, or a host
//! whose providers have no inventory of a class (e.g. disk on shared storage, a sharing
//! provider, which is not looked at). A refusal (403, no endpoint) is remembered for the
//! token: later listings with the same token do not ask again.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use vnfm_core::id::HostId;
use vnfm_core::zone::{ComputeZone, Resources};

use crate::error::Error;
use crate::session::{Call, Reply, Session};

pub use crate::capacity::{CapacityNote, CapacityReport, CapacityUnknown};
pub use crate::service::placement::PLACEMENT_MICROVERSION;
use crate::service::placement::{SERVICE, TYPE};

/// The resource classes of [`Resources`], in its order.
const CLASSES: [&str; 3] = ["VCPU", "MEMORY_MB", "DISK_GB"];

/// Zones with the free capacity of their hosts, and what is known of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ZoneListing {
    /// The zones, as [`ZoneCatalog::list_zones`](vnfm_core::driver::ZoneCatalog::list_zones)
    /// returns them.
    pub zones: Vec<ComputeZone>,
    /// Which hosts have their free capacity, and why the others do not.
    pub capacity: CapacityReport,
}

/// `int((total - reserved) * allocation_ratio)` as Placement computes it (Python floats,
/// truncated toward zero), zero when negative.
pub(crate) fn capacity(total: u64, reserved: u64, allocation_ratio: f64) -> u64 {
    // u64 → f64 is exact below 2^53, far above any inventory; `as u64` truncates toward
    // zero and saturates (negative and NaN give 0), as `int()` truncates.
    ((total as f64 - reserved as f64) * allocation_ratio) as u64
}

/// Capacity and use of one resource class of one provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Amount {
    pub(crate) capacity: u64,
    pub(crate) used: u64,
}

/// A provider as `GET /resource_providers` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Provider {
    pub(crate) uuid: String,
    pub(crate) name: String,
    pub(crate) root: String,
}

/// A compute node as `GET /os-hypervisors/detail` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hypervisor {
    pub(crate) id: String,
    pub(crate) hypervisor_hostname: String,
    pub(crate) host: Option<String>,
}

type Amounts = BTreeMap<String, Amount>;

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// The providers of a `GET /resource_providers` body.
pub(crate) fn providers_of(v: &Value) -> Result<Vec<Provider>, String> {
    let list = v
        .get("resource_providers")
        .and_then(Value::as_array)
        .ok_or("a `resource_providers` array")?;
    list.iter()
        .enumerate()
        .map(|(i, p)| {
            let uuid = str_of(p, "uuid")
                .ok_or_else(|| format!("resource_providers[{i}].uuid as a string"))?;
            Ok(Provider {
                uuid: uuid.to_owned(),
                name: str_of(p, "name").unwrap_or_default().to_owned(),
                root: str_of(p, "root_provider_uuid").unwrap_or(uuid).to_owned(),
            })
        })
        .collect()
}

/// The compute nodes of a `GET /os-hypervisors/detail` body.
pub(crate) fn hypervisors_of(v: &Value) -> Result<Vec<Hypervisor>, String> {
    let list = v
        .get("hypervisors")
        .and_then(Value::as_array)
        .ok_or("a `hypervisors` array")?;
    Ok(list
        .iter()
        .map(|h| Hypervisor {
            id: match h.get("id") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
            hypervisor_hostname: str_of(h, "hypervisor_hostname")
                .unwrap_or_default()
                .to_owned(),
            host: h
                .get("service")
                .and_then(|s| str_of(s, "host"))
                .map(str::to_owned),
        })
        .collect())
}

fn u64_of(v: &Value, what: impl Fn() -> String) -> Result<u64, String> {
    v.as_u64()
        .or_else(|| {
            // Placement writes integers, but a float with no fraction is the same amount
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        })
        .ok_or_else(|| format!("{} as a non-negative integer, got {v}", what()))
}

/// The amounts of every provider of an `allocation_candidates` body's `provider_summaries`.
pub(crate) fn summaries_of(v: &Value) -> Result<BTreeMap<String, Amounts>, String> {
    let sums = v
        .get("provider_summaries")
        .and_then(Value::as_object)
        .ok_or("a `provider_summaries` object")?;
    let mut out = BTreeMap::new();
    for (uuid, s) in sums {
        let res = s
            .get("resources")
            .and_then(Value::as_object)
            .ok_or_else(|| format!("provider_summaries.{uuid}.resources as an object"))?;
        let mut amounts = Amounts::new();
        for (class, r) in res {
            let at = |k: &str| format!("provider_summaries.{uuid}.resources.{class}.{k}");
            let capacity = u64_of(r.get("capacity").unwrap_or(&Value::Null), || at("capacity"))?;
            let used = u64_of(r.get("used").unwrap_or(&Value::Null), || at("used"))?;
            amounts.insert(class.clone(), Amount { capacity, used });
        }
        out.insert(uuid.clone(), amounts);
    }
    Ok(out)
}

/// The amounts of one provider from its `inventories` and `usages` bodies.
pub(crate) fn amounts_of(inventories: &Value, usages: &Value) -> Result<Amounts, String> {
    let inv = inventories
        .get("inventories")
        .and_then(Value::as_object)
        .ok_or("an `inventories` object")?;
    let used = usages
        .get("usages")
        .and_then(Value::as_object)
        .ok_or("a `usages` object")?;
    let mut out = Amounts::new();
    for (class, i) in inv {
        let at = |k: &str| format!("inventories.{class}.{k}");
        let total = u64_of(i.get("total").unwrap_or(&Value::Null), || at("total"))?;
        let reserved = match i.get("reserved") {
            None => 0,
            Some(r) => u64_of(r, || at("reserved"))?,
        };
        let ratio = match i.get("allocation_ratio") {
            None => 1.0,
            Some(r) => r
                .as_f64()
                .ok_or_else(|| format!("{} as a number, got {r}", at("allocation_ratio")))?,
        };
        let u = match used.get(class) {
            None => 0,
            Some(u) => u64_of(u, || format!("usages.{class}"))?,
        };
        out.insert(
            class.clone(),
            Amount {
                capacity: capacity(total, reserved, ratio),
                used: u,
            },
        );
    }
    Ok(out)
}

/// The free resources of a host whose providers have `amounts`, or the classes none of them
/// has.
pub(crate) fn free_of<'a>(
    amounts: impl IntoIterator<Item = &'a Amounts>,
) -> Result<Resources, Vec<&'static str>> {
    let mut free = [None::<u64>; 3];
    for a in amounts {
        for (slot, class) in free.iter_mut().zip(CLASSES) {
            if let Some(x) = a.get(class) {
                let f = x.capacity.saturating_sub(x.used);
                *slot = Some(slot.unwrap_or(0).saturating_add(f));
            }
        }
    }
    match free {
        [Some(vcpus), Some(memory_mb), Some(disk_gb)] => {
            Ok(Resources::new(vcpus, memory_mb, disk_gb))
        }
        _ => Err(CLASSES
            .iter()
            .zip(free)
            .filter(|(_, f)| f.is_none())
            .map(|(c, _)| *c)
            .collect()),
    }
}

/// The note for a failed request.
fn note_of(e: &Error) -> CapacityNote {
    let reason = match e {
        Error::NoEndpoint { .. } => CapacityUnknown::NoEndpoint,
        Error::Http { status: 403, .. } => CapacityUnknown::Forbidden,
        _ => CapacityUnknown::Failed,
    };
    let mut message = crate::error::chain(e);
    match reason {
        CapacityUnknown::Forbidden => message.push_str(
            "; Placement's default policy lets only admin and service users read resource \
             providers (use admin credentials, or grant placement:resource_providers:list and \
             placement:allocation_candidates:list)",
        ),
        CapacityUnknown::NoEndpoint => {
            message.push_str("; this cloud's catalog has no Placement service to ask");
        }
        _ => {}
    }
    CapacityNote::new(reason, message)
}

fn decode(reply: &Reply, what: String) -> CapacityNote {
    note_of(&reply.unexpected(what))
}

async fn get_json(session: &Session, call: Call<'_>) -> Result<Value, CapacityNote> {
    let reply = session.call(call).await.map_err(|e| note_of(&e))?;
    reply.json::<Value>().map_err(|e| note_of(&e))
}

fn placement_get(path: Vec<&str>) -> Call<'_> {
    Call::new(SERVICE, TYPE, Method::GET, path)
}

/// The amounts of one provider, read with two requests.
async fn read_provider(session: &Session, uuid: &str) -> Result<Amounts, CapacityNote> {
    let inv = get_json(
        session,
        placement_get(vec!["resource_providers", uuid, "inventories"]),
    )
    .await?;
    let used = get_json(
        session,
        placement_get(vec!["resource_providers", uuid, "usages"]),
    )
    .await?;
    amounts_of(&inv, &used).map_err(|what| {
        CapacityNote::new(
            CapacityUnknown::Failed,
            format!("resource provider {uuid}: unexpected inventories or usages: {what}"),
        )
    })
}

/// The free capacity of `hosts`: known ones in the map, the others with a note each; or a
/// note for all of them when Placement cannot be asked.
pub(crate) async fn free_capacity(
    session: &Session,
    hosts: &[HostId],
) -> Result<(BTreeMap<HostId, Resources>, BTreeMap<HostId, CapacityNote>), CapacityNote> {
    let reply = session
        .call(placement_get(vec!["resource_providers"]))
        .await
        .map_err(|e| note_of(&e))?;
    let body: Value = reply.json().map_err(|e| note_of(&e))?;
    let providers = providers_of(&body).map_err(|w| decode(&reply, w))?;

    // host -> the roots of its trees
    let mut roots: BTreeMap<HostId, BTreeSet<String>> = BTreeMap::new();
    let root_of_uuid: BTreeMap<&str, &str> = providers
        .iter()
        .map(|p| (p.uuid.as_str(), p.root.as_str()))
        .collect();
    let root_of_name = |name: &str| -> Option<String> {
        providers
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.root.clone())
    };
    let mut unmatched = Vec::new();
    for h in hosts {
        match root_of_name(h.as_str()) {
            Some(r) => {
                roots.entry(h.clone()).or_default().insert(r);
            }
            None => unmatched.push(h.clone()),
        }
    }
    let mut notes: BTreeMap<HostId, CapacityNote> = BTreeMap::new();
    if !unmatched.is_empty() {
        let nodes = get_json(
            session,
            Call::new(
                crate::service::nova::SERVICE,
                crate::service::nova::TYPE,
                Method::GET,
                vec!["os-hypervisors", "detail"],
            ),
        )
        .await
        .and_then(|v| {
            hypervisors_of(&v).map_err(|what| {
                CapacityNote::new(
                    CapacityUnknown::Failed,
                    format!("GET /os-hypervisors/detail: unexpected answer: {what}"),
                )
            })
        });
        for h in unmatched {
            let found: BTreeSet<String> = match &nodes {
                Ok(nodes) => nodes
                    .iter()
                    .filter(|n| n.host.as_deref() == Some(h.as_str()))
                    .filter_map(|n| {
                        root_of_uuid
                            .get(n.id.as_str())
                            .map(|r| (*r).to_owned())
                            .or_else(|| root_of_name(&n.hypervisor_hostname))
                    })
                    .collect(),
                Err(_) => BTreeSet::new(),
            };
            if found.is_empty() {
                let why = match &nodes {
                    Ok(_) => "and no compute node of that service host in GET \
                              /os-hypervisors/detail has a provider"
                        .to_owned(),
                    Err(n) => format!("and its compute nodes could not be listed: {}", n.message),
                };
                notes.insert(
                    h.clone(),
                    CapacityNote::new(
                        CapacityUnknown::NoProvider,
                        format!("no Placement resource provider is named {h}, {why}"),
                    ),
                );
            } else {
                roots.insert(h, found);
            }
        }
    }
    if roots.is_empty() {
        return Ok((BTreeMap::new(), notes));
    }

    let reply = session
        .call(placement_get(vec!["allocation_candidates"]).query("resources", "VCPU:1"))
        .await
        .map_err(|e| note_of(&e))?;
    let body: Value = reply.json().map_err(|e| note_of(&e))?;
    let mut amounts = summaries_of(&body).map_err(|w| decode(&reply, w))?;

    // trees not summarized (no VCPU left, or a cut answer): provider by provider
    let wanted: BTreeSet<&String> = roots.values().flatten().collect();
    let mut tree_errors: BTreeMap<String, CapacityNote> = BTreeMap::new();
    for root in wanted {
        let members: Vec<&Provider> = providers.iter().filter(|p| &p.root == root).collect();
        if members.iter().all(|p| amounts.contains_key(&p.uuid)) {
            continue;
        }
        for p in members {
            if amounts.contains_key(&p.uuid) {
                continue;
            }
            match read_provider(session, &p.uuid).await {
                Ok(a) => {
                    amounts.insert(p.uuid.clone(), a);
                }
                Err(n) => {
                    tree_errors.insert(root.clone(), n);
                    break;
                }
            }
        }
    }

    let mut free = BTreeMap::new();
    for (h, host_roots) in roots {
        if let Some(n) = host_roots.iter().find_map(|r| tree_errors.get(r)) {
            notes.insert(h, n.clone());
            continue;
        }
        let of_host = providers
            .iter()
            .filter(|p| host_roots.contains(&p.root))
            .filter_map(|p| amounts.get(&p.uuid));
        match free_of(of_host) {
            Ok(f) => {
                free.insert(h, f);
            }
            Err(missing) => {
                notes.insert(
                    h.clone(),
                    CapacityNote::new(
                        CapacityUnknown::NoInventory,
                        format!(
                            "the resource providers of host {h} ({}) have no inventory of {}",
                            host_roots.into_iter().collect::<Vec<_>>().join(", "),
                            missing.join(", ")
                        ),
                    ),
                );
            }
        }
    }
    Ok((free, notes))
}

/// Sets the free capacity of the hosts of `zones` from Placement (hosts it cannot tell keep
/// `free: None`) and reports what is known.
pub(crate) async fn fill(session: &Session, zones: &mut [ComputeZone]) -> CapacityReport {
    let mut hosts: Vec<HostId> = zones
        .iter()
        .flat_map(|z| z.hosts.iter().flatten())
        .map(|h| h.name.clone())
        .collect();
    hosts.sort();
    hosts.dedup();
    if !session.config.free_capacity {
        return CapacityReport::unknown(CapacityNote::new(
            CapacityUnknown::Disabled,
            "Placement is not asked (CloudConfig::free_capacity is off)",
        ));
    }
    if hosts.is_empty() {
        return CapacityReport::unknown(CapacityNote::new(
            CapacityUnknown::NoHosts,
            "the zone listing names no compute host (non-admin users get zones without \
             hosts: Nova's default policy refuses them GET /os-availability-zone/detail), so \
             there is no host to look up in Placement",
        ));
    }
    if let Some(n) = session.capacity_refusal() {
        return CapacityReport::unknown(n);
    }
    match free_capacity(session, &hosts).await {
        Ok((free, notes)) => {
            for h in zones.iter_mut().flat_map(|z| z.hosts.iter_mut().flatten()) {
                h.free = free.get(&h.name).copied();
            }
            CapacityReport {
                unknown: None,
                hosts: notes,
                known: free.into_keys().collect(),
            }
        }
        Err(n) => {
            if matches!(
                n.reason,
                CapacityUnknown::Forbidden | CapacityUnknown::NoEndpoint
            ) {
                session.remember_capacity_refusal(n.clone());
            }
            CapacityReport::unknown(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_truncates_as_python_int() {
        assert_eq!(capacity(1000, 0, 4.0), 4000);
        assert_eq!(capacity(800_000, 799_000, 1.0), 1000);
        assert_eq!(capacity(7, 2, 1.5), 7); // 7.5
        assert_eq!(capacity(16, 1, 0.9), 13); // 13.5
        assert_eq!(capacity(3, 3, 16.0), 0);
        assert_eq!(capacity(1, 2, 1.0), 0, "negative gives 0, not a wrap");
    }

    #[test]
    fn free_sums_providers_and_names_missing_classes() {
        let a = |c: u64, u: u64| Amount {
            capacity: c,
            used: u,
        };
        let root: Amounts = [
            ("MEMORY_MB".into(), a(1000, 512)),
            ("DISK_GB".into(), a(10, 1)),
        ]
        .into_iter()
        .collect();
        let numa0: Amounts = [("VCPU".into(), a(8, 2))].into_iter().collect();
        let numa1: Amounts = [("VCPU".into(), a(8, 9))].into_iter().collect();
        assert_eq!(
            free_of([&root, &numa0, &numa1]),
            Ok(Resources::new(6, 488, 9)),
            "over-allocated numa1 counts 0"
        );
        assert_eq!(free_of([&root]), Err(vec!["VCPU"]));
        assert_eq!(free_of([]), Err(CLASSES.to_vec()));
    }

    #[test]
    fn inventories_and_usages_use_the_formula() {
        let inv = serde_json::json!({"inventories": {
            "VCPU": {"total": 10, "reserved": 1, "allocation_ratio": 1.5},
            "MEMORY_MB": {"total": 4096, "reserved": 512, "allocation_ratio": 1.0},
            "CUSTOM_X": {"total": 1}}});
        let used = serde_json::json!({"usages": {"VCPU": 3, "MEMORY_MB": 1024}});
        let a = amounts_of(&inv, &used).unwrap();
        assert_eq!(
            a["VCPU"],
            Amount {
                capacity: 13,
                used: 3
            }
        );
        assert_eq!(
            a["MEMORY_MB"],
            Amount {
                capacity: 3584,
                used: 1024
            }
        );
        assert_eq!(
            a["CUSTOM_X"],
            Amount {
                capacity: 1,
                used: 0
            }
        );
        let e = amounts_of(
            &serde_json::json!({"inventories": {"VCPU": {"total": -1}}}),
            &used,
        )
        .unwrap_err();
        assert!(e.contains("inventories.VCPU.total"), "{e}");
    }

    #[test]
    fn report_lines_and_notes() {
        let mut r = CapacityReport::unknown(CapacityNote::new(CapacityUnknown::Forbidden, "no"));
        assert!(!r.is_complete());
        assert_eq!(
            r.lines(),
            ["free capacity of hosts unknown: no (forbidden)"]
        );
        assert_eq!(
            r.note_for(&"c1".into()).map(|n| n.reason),
            Some(CapacityUnknown::Forbidden)
        );
        r.unknown = None;
        assert!(r.is_complete());
        let v = serde_json::to_value(CapacityReport::unknown(CapacityNote::new(
            CapacityUnknown::NoHosts,
            "m",
        )))
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"unknown": {"reason": "no_hosts", "message": "m"}, "known": []})
        );
    }
}
