//! Nova: availability zones ([`ZoneCatalog`]) with the free capacity of their hosts from
//! Placement ([`crate::placement`]), server show ([`ComputeInventory`]), server groups. Every
//! request carries `X-OpenStack-Nova-API-Version`
//! ([`CloudConfig::nova_microversion`](crate::CloudConfig::nova_microversion)).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use vnfm_core::driver::{
    ComputeInventory, DriverError, ListZones, ServerFault, ServerInfo, ZoneCatalog,
};
use vnfm_core::id::{FlavorId, HostId, ServerId, ZoneId};
use vnfm_core::zone::{ComputeHost, ComputeZone};

use crate::error::Error;
use crate::placement::{self, CapacityReport, CapacityUnknown, ZoneListing};
use crate::service::nova::{SERVICE, TYPE};
use crate::session::{Call, Reply, Session};

/// The Nova client: implements [`ZoneCatalog`] and [`ComputeInventory`]; clones share the
/// session (token, counters, warnings).
#[derive(Clone)]
pub struct Nova {
    pub(crate) session: Arc<Session>,
}

impl fmt::Debug for Nova {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nova")
            .field("session", &self.session)
            .finish()
    }
}

/// A server as Nova's server show reports it (the fields vnfm reads).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NovaServer {
    /// `id`
    pub id: ServerId,
    /// `name`
    pub name: String,
    /// `status`
    pub status: String,
    /// `OS-EXT-SRV-ATTR:host` (admin only; `None` when unscheduled or hidden).
    pub host: Option<HostId>,
    /// `OS-EXT-SRV-ATTR:hypervisor_hostname` (admin only).
    pub hypervisor_hostname: Option<String>,
    /// `OS-EXT-AZ:availability_zone`
    pub zone: Option<ZoneId>,
    /// `hostId`: an opaque hash of the host per project, visible to every user (empty when
    /// unscheduled); two servers with the same `hostId` share a host.
    pub host_id: String,
    /// The IP addresses of every network (`addresses.*[].addr`).
    pub addresses: Vec<String>,
    /// The flavor's name (`flavor.original_name`, microversion 2.47 and later).
    pub flavor_name: Option<String>,
    /// The flavor's id (`flavor.id`, before 2.47).
    pub flavor_id: Option<String>,
    /// `server_groups` (2.71 and later).
    pub server_groups: Vec<String>,
    /// `fault`
    pub fault: Option<ServerFault>,
}

impl NovaServer {
    /// The driver's view of the server.
    pub fn to_info(&self) -> ServerInfo {
        ServerInfo {
            id: self.id.clone(),
            name: self.name.clone(),
            status: self.status.clone(),
            host: self.host.clone(),
            host_id: Some(self.host_id.clone()).filter(|h| !h.is_empty()),
            addresses: self.addresses.clone(),
            zone: self.zone.clone(),
            flavor: self.flavor_name.clone().map(FlavorId::new),
            server_groups: self.server_groups.clone(),
            fault: self.fault.clone(),
        }
    }
}

/// A Nova server group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ServerGroup {
    /// `id`
    pub id: String,
    /// `name`
    pub name: String,
    /// `policy` (2.64 and later) or the first of `policies`: `anti-affinity`, `affinity`,
    /// `soft-anti-affinity`, `soft-affinity`.
    pub policy: String,
    /// `members`: server ids.
    pub members: Vec<ServerId>,
}

impl Nova {
    /// `GET /servers/{id}`.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown server; the other kinds as mapped from the
    /// HTTP status.
    pub async fn show_server(&self, id: &ServerId) -> Result<NovaServer, DriverError> {
        let reply = self
            .session
            .call(Call::new(
                SERVICE,
                TYPE,
                Method::GET,
                vec!["servers", id.as_str()],
            ))
            .await?;
        Ok(parse_server(&reply)?)
    }

    /// `GET /os-server-groups/{id}`.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown group; the other kinds as mapped from the
    /// HTTP status.
    pub async fn server_group(&self, id: &str) -> Result<ServerGroup, DriverError> {
        let reply = self
            .session
            .call(Call::new(
                SERVICE,
                TYPE,
                Method::GET,
                vec!["os-server-groups", id],
            ))
            .await?;
        let v: Value = reply.json()?;
        let g = v
            .get("server_group")
            .ok_or_else(|| reply.unexpected("a `server_group` object"))?;
        Ok(parse_group(&reply, g)?)
    }

    /// `GET /os-server-groups` (the project's groups).
    ///
    /// # Errors
    /// The kinds as mapped from the HTTP status.
    pub async fn server_groups(&self) -> Result<Vec<ServerGroup>, DriverError> {
        let reply = self
            .session
            .call(Call::new(
                SERVICE,
                TYPE,
                Method::GET,
                vec!["os-server-groups"],
            ))
            .await?;
        let v: Value = reply.json()?;
        let list = v
            .get("server_groups")
            .and_then(Value::as_array)
            .ok_or_else(|| reply.unexpected("a `server_groups` array"))?;
        Ok(list
            .iter()
            .map(|g| parse_group(&reply, g))
            .collect::<Result<_, _>>()?)
    }

    /// The compute zones (`GET /os-availability-zone/detail`, or `GET /os-availability-zone`
    /// when `/detail` is forbidden) with the free capacity of their hosts from Placement
    /// ([`crate::placement`] says how, and how many requests it costs), and a report of which
    /// hosts have it and why the others do not. Placement's refusal or failure does not fail
    /// the listing: the hosts keep `free: None`. The report is also kept as
    /// [`OpenStack::capacity_report`](crate::OpenStack::capacity_report), and a reason other
    /// than [`CapacityUnknown::Disabled`] or [`CapacityUnknown::NoHosts`] becomes a warning
    /// ([`OpenStack::warnings`](crate::OpenStack::warnings)).
    ///
    /// # Errors
    /// The kinds as mapped from Nova's HTTP status.
    pub async fn list_zones_with_capacity(&self) -> Result<ZoneListing, DriverError> {
        let mut zones = self.zones().await?;
        let capacity = self.fill_free_capacity(&mut zones).await;
        Ok(ZoneListing { zones, capacity })
    }

    /// Sets `free` of every host of `zones` from Placement (`None` where it cannot be known)
    /// and reports what is known, as [`Nova::list_zones_with_capacity`] does for its listing;
    /// never fails.
    pub async fn fill_free_capacity(&self, zones: &mut [ComputeZone]) -> CapacityReport {
        let report = placement::fill(&self.session, zones).await;
        if let Some(n) = &report.unknown {
            if !matches!(
                n.reason,
                CapacityUnknown::Disabled | CapacityUnknown::NoHosts
            ) {
                self.session.warn(format!(
                    "placement: the free capacity of hosts is unknown, zones are chosen without \
                     it: {}",
                    n.message
                ));
            }
        }
        for (h, n) in &report.hosts {
            self.session.warn(format!(
                "placement: the free capacity of host {h} is unknown: {}",
                n.message
            ));
        }
        self.session.set_last_capacity(report.clone());
        report
    }

    async fn zones(&self) -> Result<Vec<ComputeZone>, Error> {
        let detail = Call::new(
            SERVICE,
            TYPE,
            Method::GET,
            vec!["os-availability-zone", "detail"],
        );
        match self.session.call(detail).await {
            Ok(reply) => parse_zones(&reply),
            Err(e) if e.status() == Some(403) => {
                self.session.warn(format!(
                    "nova: GET /os-availability-zone/detail is forbidden to these credentials \
                     ({e}); zones are listed from GET /os-availability-zone, without hosts, so \
                     no zone is a reselection candidate (use admin credentials or grant \
                     os_compute_api:os-availability-zone:detail)"
                ));
                let reply = self
                    .session
                    .call(Call::new(
                        SERVICE,
                        TYPE,
                        Method::GET,
                        vec!["os-availability-zone"],
                    ))
                    .await?;
                parse_zones(&reply)
            }
            Err(e) => Err(e),
        }
    }
}

#[async_trait]
impl ZoneCatalog for Nova {
    async fn list_zones(&self, _opts: ListZones) -> Result<Vec<ComputeZone>, DriverError> {
        Ok(self.list_zones_with_capacity().await?.zones)
    }
}

#[async_trait]
impl ComputeInventory for Nova {
    async fn server(&self, id: &ServerId) -> Result<ServerInfo, DriverError> {
        Ok(self.show_server(id).await?.to_info())
    }

    /// `POST /servers/{id}/action {"os-start": null}` (202); the server goes `ACTIVE`.
    async fn start_server(&self, id: &ServerId) -> Result<(), DriverError> {
        self.server_action(id, "os-start").await
    }

    /// `POST /servers/{id}/action {"os-stop": null}` (202); the server goes `SHUTOFF`.
    async fn stop_server(&self, id: &ServerId) -> Result<(), DriverError> {
        self.server_action(id, "os-stop").await
    }
}

impl Nova {
    /// `POST /servers/{id}/action` with `{action: null}`; Nova answers 202 and carries it out
    /// (a 409 for a server in a state that refuses it is [`DriverError::Conflict`]).
    async fn server_action(&self, id: &ServerId, action: &str) -> Result<(), DriverError> {
        let mut body = serde_json::Map::new();
        body.insert(action.to_owned(), Value::Null);
        self.session
            .call(
                Call::new(
                    SERVICE,
                    TYPE,
                    Method::POST,
                    vec!["servers", id.as_str(), "action"],
                )
                .body(Value::Object(body)),
            )
            .await?;
        Ok(())
    }
}

fn s(v: &Value, k: &str) -> Option<String> {
    v.get(k)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn parse_server(reply: &Reply) -> Result<NovaServer, Error> {
    let v: Value = reply.json()?;
    let srv = v
        .get("server")
        .ok_or_else(|| reply.unexpected("a `server` object"))?;
    let id = s(srv, "id").ok_or_else(|| reply.unexpected("server.id"))?;
    let fault = match srv.get("fault") {
        Some(f) if f.is_object() => Some(ServerFault {
            code: f
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(0),
            message: f
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        }),
        _ => None,
    };
    let flavor = srv.get("flavor");
    Ok(NovaServer {
        id: ServerId::new(id),
        name: s(srv, "name").unwrap_or_default(),
        status: s(srv, "status").unwrap_or_default(),
        host: s(srv, "OS-EXT-SRV-ATTR:host").map(HostId::new),
        hypervisor_hostname: s(srv, "OS-EXT-SRV-ATTR:hypervisor_hostname"),
        zone: s(srv, "OS-EXT-AZ:availability_zone").map(ZoneId::new),
        host_id: s(srv, "hostId").unwrap_or_default(),
        addresses: srv
            .get("addresses")
            .and_then(Value::as_object)
            .map(|nets| {
                nets.values()
                    .filter_map(Value::as_array)
                    .flatten()
                    .filter_map(|a| s(a, "addr"))
                    .collect()
            })
            .unwrap_or_default(),
        flavor_name: flavor.and_then(|f| s(f, "original_name")),
        flavor_id: flavor.and_then(|f| s(f, "id")),
        server_groups: srv
            .get("server_groups")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        fault,
    })
}

fn parse_group(reply: &Reply, g: &Value) -> Result<ServerGroup, Error> {
    let policy = s(g, "policy").or_else(|| {
        g.get("policies")
            .and_then(Value::as_array)
            .and_then(|p| p.first())
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    Ok(ServerGroup {
        id: s(g, "id").ok_or_else(|| reply.unexpected("server_group.id"))?,
        name: s(g, "name").unwrap_or_default(),
        policy: policy.unwrap_or_default(),
        members: g
            .get("members")
            .and_then(Value::as_array)
            .map(|m| {
                m.iter()
                    .filter_map(Value::as_str)
                    .map(ServerId::from)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

fn parse_zones(reply: &Reply) -> Result<Vec<ComputeZone>, Error> {
    let v: Value = reply.json()?;
    zones_of(&v).map_err(|what| reply.unexpected(what))
}

/// The compute zones of an `os-availability-zone[/detail]` body: zones with at least one
/// host running `nova-compute` (that host `available` when the service is `available &&
/// active`), and zones with `hosts: null` (listed with `hosts: None`); the rest (`internal`,
/// zones without compute hosts) is left out.
pub(crate) fn zones_of(v: &Value) -> Result<Vec<ComputeZone>, String> {
    let list = v
        .get("availabilityZoneInfo")
        .and_then(Value::as_array)
        .ok_or("an `availabilityZoneInfo` array")?;
    let mut zones = Vec::new();
    for (i, z) in list.iter().enumerate() {
        let name = z
            .get("zoneName")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("availabilityZoneInfo[{i}].zoneName as a string"))?;
        let available = z
            .get("zoneState")
            .and_then(|s| s.get("available"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let hosts = match z.get("hosts") {
            None | Some(Value::Null) => None,
            Some(Value::Object(hosts)) => {
                let mut out = Vec::new();
                for (host, services) in hosts {
                    if let Some(compute) = services.get("nova-compute") {
                        let flag = |k: &str| compute.get(k).and_then(Value::as_bool) == Some(true);
                        out.push(ComputeHost {
                            name: HostId::new(host.as_str()),
                            available: flag("available") && flag("active"),
                            free: None,
                        });
                    }
                }
                if out.is_empty() {
                    continue;
                }
                Some(out)
            }
            Some(other) => {
                return Err(format!(
                    "availabilityZoneInfo[{i}].hosts as an object or null, got {other}"
                ))
            }
        };
        zones.push(ComputeZone {
            name: ZoneId::new(name),
            available,
            hosts,
        });
    }
    Ok(zones)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(rel: &str) -> Option<Value> {
        vnfm_core::vectors::read_vector(env!("CARGO_MANIFEST_DIR"), rel)
            .map(|s| serde_json::from_str(&s).unwrap())
    }

    #[test]
    fn tacker_multi_az_with_null_hosts() {
        let Some(v) = vector(
            "tacker/az_reselection/nova/os-availability-zone-detail.multi-az.synthesized.json",
        ) else {
            return;
        };
        let zones = zones_of(&v).unwrap();
        let names: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
        assert_eq!(names, ["nova", "az-1", "az-2", "az-4"]);
        let candidates: Vec<&str> = zones
            .iter()
            .filter(|z| z.is_candidate())
            .map(|z| z.name.as_str())
            .collect();
        assert_eq!(candidates, ["nova", "az-1", "az-2"]);
        let az2 = &zones[2];
        let hosts = az2.hosts.as_ref().unwrap();
        assert_eq!(hosts.len(), 2);
        assert!(hosts[0].available && !hosts[1].available);
        assert_eq!(zones[3].hosts, None);
        assert!(!zones[3].available);
    }

    /// The cases of `az_parse_cases.json` when this test was written.
    const N_PARSE_CASES: usize = 2;

    #[test]
    fn parse_cases_agree_with_expected_candidates() {
        let Some(cases) = vector("tacker/az_reselection/nova/az_parse_cases.json") else {
            return;
        };
        let cases = cases["cases"].as_array().unwrap();
        // A vector file that lost its cases must not pass by checking nothing.
        assert!(cases.len() >= N_PARSE_CASES, "{} cases", cases.len());
        for case in cases {
            let file = case["response"].as_str().unwrap();
            let v = vector(&format!("tacker/az_reselection/nova/{file}")).unwrap();
            let got: Vec<String> = zones_of(&v)
                .unwrap()
                .into_iter()
                .filter(|z| z.is_candidate())
                .map(|z| z.name.0)
                .collect();
            let want: Vec<String> =
                serde_json::from_value(case["expected_candidates"].clone()).unwrap();
            assert_eq!(got, want, "{file}");
        }
    }

    #[test]
    fn bad_shapes_are_named() {
        let e = zones_of(&serde_json::json!({"zones": []})).unwrap_err();
        assert!(e.contains("availabilityZoneInfo"), "{e}");
        let e =
            zones_of(&serde_json::json!({"availabilityZoneInfo": [{"zoneName": "a", "hosts": 3}]}))
                .unwrap_err();
        assert!(e.contains("availabilityZoneInfo[0].hosts"), "{e}");
    }
}
