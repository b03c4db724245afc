//! [`SimCloud`]: the simulated cloud as the driver traits see it, a handle on a shared
//! [`State`] that every call settles (quick stack deletes complete) and hands to the part of
//! the simulator that answers it (`nova`, `heat`, `cluster`).

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::failure::{not_found, BuildFault, StackDeleteFault, DRIVER};
use super::nova::host_id_of;
use super::state::State;
use crate::cloud::CloudFile;
use crate::driver::{
    ApplyObject, Clock, ClusterDriver, ClusterEvent, ClusterNode, ComputeInventory, CreateStack,
    DeletePod, DriverError, EvictPod, LabelNode, ListEvents, ListPods, ListResources,
    ListWorkloads, ListZones, MarkUnhealthy, ObjectRef, Pod, ScaleWorkload, ServerInfo, Stack,
    StackDriver, StackResource, UpdateStack, ZoneCatalog,
};
use crate::id::{HostId, ServerId, StackId};
use crate::zone::{ComputeHost, ComputeZone, Resources};

/// An in-memory simulated cloud implementing every driver trait. Clones share state.
///
/// ```
/// use vnfm_core::cloud::CloudFile;
/// use vnfm_core::driver::{ListZones, ZoneCatalog};
/// use vnfm_core::sim::SimCloud;
///
/// let cloud = CloudFile::from_yaml(
///     "inline",
///     "zones: {AZ-1: {hosts: {c1: {vcpus: 4, memory_mb: 8192, disk_gb: 80}}}}",
/// )?;
/// let sim = SimCloud::new(cloud, 42);
/// let zones = futures_lite_block_on(sim.list_zones(ListZones::default()))?;
/// assert_eq!(zones[0].name.as_str(), "AZ-1");
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SimCloud {
    state: Arc<Mutex<State>>,
}

impl SimCloud {
    /// A simulated cloud shaped like `cloud`, with every id drawn from `seed`.
    pub fn new(cloud: CloudFile, seed: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(State::new(cloud, seed))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-updated in a way that
        // matters more than losing the simulator, so a poisoned lock is simply taken over.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state, after completing the quick stack deletes (those without a planned
    /// [`StackDeleteFault`]) of every stack but `polled`: a call about anything else comes
    /// after the moment such a delete takes.
    fn settled(&self, polled: Option<&StackId>) -> MutexGuard<'_, State> {
        let mut st = self.lock();
        st.finish_quick_deletes(polled);
        st
    }

    /// The whole state of the simulated cloud (stacks, servers, capacity, ids, virtual time)
    /// as JSON, so that a later process can continue where this one stopped (the CLI keeps it
    /// in its state file).
    ///
    /// # Errors
    /// [`DriverError::Other`] if the state cannot be encoded (not expected).
    pub fn snapshot(&self) -> Result<String, DriverError> {
        serde_json::to_string(&*self.settled(None)).map_err(|e| DriverError::Other {
            driver: DRIVER,
            message: "cannot encode the simulator state".into(),
            source: Some(Box::new(e)),
        })
    }

    /// A simulated cloud continuing from a [`SimCloud::snapshot`].
    ///
    /// # Errors
    /// [`DriverError::Invalid`] naming what does not decode.
    pub fn restore(snapshot: &str) -> Result<SimCloud, DriverError> {
        let state: State = serde_json::from_str(snapshot).map_err(|e| DriverError::Invalid {
            driver: DRIVER,
            message: format!("the saved simulator state does not decode: {e}"),
        })?;
        Ok(SimCloud {
            state: Arc::new(Mutex::new(state)),
        })
    }

    /// Replaces the state of this cloud (and of its clones) with a [`SimCloud::snapshot`]'s,
    /// keeping its clock: a process that shares the saved cloud with others (replicas of
    /// `vnfm serve`) takes up what another one saved.
    ///
    /// # Errors
    /// [`DriverError::Invalid`] naming what does not decode; the state is left as it was.
    pub fn load(&self, snapshot: &str) -> Result<(), DriverError> {
        let mut state: State =
            serde_json::from_str(snapshot).map_err(|e| DriverError::Invalid {
                driver: DRIVER,
                message: format!("the saved simulator state does not decode: {e}"),
            })?;
        let mut st = self.lock();
        state.time = st.time.take();
        *st = state;
        Ok(())
    }

    /// Gives the simulator its time: what takes time in it (an `OS::Heat::TestResource`'s
    /// `wait_secs`) is measured on `clock`, normally the lifecycle's ([`Clock::now`] only; the
    /// simulator never sleeps). Without a clock time stands still. Clones share it; a
    /// [`SimCloud::restore`]d cloud needs it given again.
    pub fn set_clock(&self, clock: Arc<dyn Clock>) {
        self.lock().time = Some(clock);
    }

    /// The cloud file the simulator was built from.
    pub fn cloud(&self) -> CloudFile {
        self.lock().cloud.clone()
    }

    /// The virtual clock: a counter advanced by every state change.
    pub fn now(&self) -> u64 {
        self.lock().clock
    }

    /// Makes a zone available or not (Nova `zoneState.available`). Servers cannot be booted
    /// in an unavailable zone; existing ones keep running.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown zone.
    pub fn set_zone_available(&self, zone: &str, available: bool) -> Result<(), DriverError> {
        let mut st = self.settled(None);
        st.tick();
        let z = st
            .zones
            .get_mut(zone)
            .ok_or_else(|| not_found("zone", zone))?;
        z.available = available;
        Ok(())
    }

    /// Marks a host's nova-compute up or down. The scheduler filters out down hosts.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown host.
    pub fn set_host_available(&self, host: &str, available: bool) -> Result<(), DriverError> {
        let mut st = self.settled(None);
        st.tick();
        let h = st
            .hosts
            .get_mut(host)
            .ok_or_else(|| not_found("host", host))?;
        h.available = available;
        Ok(())
    }

    /// Changes a host's total capacity (e.g. cuts it). Servers already on the host stay; the
    /// free capacity is the new capacity minus their use, saturating at zero.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown host.
    pub fn set_host_capacity(&self, host: &str, capacity: Resources) -> Result<(), DriverError> {
        let mut st = self.settled(None);
        st.tick();
        let h = st
            .hosts
            .get_mut(host)
            .ok_or_else(|| not_found("host", host))?;
        h.capacity = capacity;
        Ok(())
    }

    /// The state with every server that should have joined the cluster joined.
    fn joined(&self) -> MutexGuard<'_, State> {
        let mut st = self.settled(None);
        st.join_nodes();
        st
    }

    /// Shows servers as a user without the admin role sees them (`OS-EXT-SRV-ATTR:host`
    /// hidden, `hostId` shown), or as an admin (the default).
    pub fn set_admin_view(&self, admin: bool) {
        self.lock().admin_view = admin;
    }

    /// Live-migrates a server to `host` as an operator forcing the target would: the host
    /// must be in the server's zone, up, and have room for it; the server group's policy is
    /// not checked (that is how two members of an anti-affinity group end up on one host).
    /// Returns the host the server left.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown server or host, [`DriverError::Conflict`] for
    /// a server that is not `ACTIVE`, a host of another zone, down, full, or the server's own.
    pub fn live_migrate(&self, server: &ServerId, host: &str) -> Result<HostId, DriverError> {
        let mut st = self.settled(None);
        let conflict = |message: String| DriverError::Conflict {
            driver: DRIVER,
            message,
        };
        let s = st
            .servers
            .get(server)
            .ok_or_else(|| not_found("server", server.as_str()))?;
        let to = HostId::new(host);
        let h = st.hosts.get(&to).ok_or_else(|| not_found("host", host))?;
        let from = s.host.clone().ok_or_else(|| {
            conflict(format!(
                "server {server} is not on any host (status {})",
                s.status
            ))
        })?;
        if s.status != "ACTIVE" {
            return Err(conflict(format!(
                "Cannot 'os-migrateLive' instance {server} while it is in vm_state {}",
                s.status.to_lowercase()
            )));
        }
        if from == to {
            return Err(conflict(format!("server {server} already runs on {host}")));
        }
        if Some(&h.zone) != s.zone.as_ref() || !h.available {
            return Err(conflict(format!(
                "host {host} cannot take server {server}: {}",
                if h.available {
                    "another availability zone"
                } else {
                    "nova-compute is down"
                }
            )));
        }
        let need = s.need;
        if !st.free(&to).fits(&need) {
            return Err(conflict(format!(
                "host {host} has no room for server {server} ({need:?} needed, {:?} free)",
                st.free(&to)
            )));
        }
        st.tick();
        if let Some(s) = st.servers.get_mut(server) {
            s.host = Some(to);
        }
        Ok(from)
    }

    /// The ids of every server, in id order.
    pub fn server_ids(&self) -> Vec<ServerId> {
        self.settled(None).servers.keys().cloned().collect()
    }

    /// Makes the next `n` server builds fail with `fault` ([`FaultySim::fail_next_builds`]).
    ///
    /// [`FaultySim::fail_next_builds`]: super::FaultySim::fail_next_builds
    pub(super) fn push_build_faults(&self, n: u32, fault: BuildFault) {
        let mut st = self.lock();
        for _ in 0..n {
            st.build_faults.push_back(fault.clone());
        }
    }

    /// Makes the next `n` stack deletes go as `fault` says
    /// ([`FaultySim::fail_next_stack_deletes`]).
    ///
    /// [`FaultySim::fail_next_stack_deletes`]: super::FaultySim::fail_next_stack_deletes
    pub(super) fn push_delete_faults(&self, n: u32, fault: StackDeleteFault) {
        let mut st = self.lock();
        for _ in 0..n {
            st.delete_faults.push_back(fault.clone());
        }
    }
}

#[async_trait]
impl StackDriver for SimCloud {
    async fn create_stack(&self, req: CreateStack) -> Result<StackId, DriverError> {
        self.settled(None).create_stack(req)
    }
    async fn update_stack(&self, req: UpdateStack) -> Result<(), DriverError> {
        self.settled(Some(&req.id)).update_stack(req)
    }
    async fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
        self.settled(Some(id)).show_stack_polled(id)
    }
    async fn delete_stack(&self, id: &StackId) -> Result<(), DriverError> {
        self.settled(Some(id)).delete_stack(id)
    }
    async fn list_resources(&self, req: ListResources) -> Result<Vec<StackResource>, DriverError> {
        self.settled(Some(&req.id))
            .list_resources(&req.id, req.nested_depth)
    }
    async fn mark_unhealthy(&self, req: MarkUnhealthy) -> Result<(), DriverError> {
        self.settled(Some(&req.stack_id)).mark_unhealthy(req)
    }
}

#[async_trait]
impl ZoneCatalog for SimCloud {
    async fn list_zones(&self, _opts: ListZones) -> Result<Vec<ComputeZone>, DriverError> {
        let st = self.settled(None);
        Ok(st
            .zones
            .iter()
            .map(|(name, z)| ComputeZone {
                name: name.clone(),
                available: z.available,
                hosts: (!z.hosts_null).then(|| {
                    st.hosts
                        .iter()
                        .filter(|(_, h)| &h.zone == name)
                        .map(|(hn, h)| ComputeHost {
                            name: hn.clone(),
                            available: h.available,
                            free: Some(st.free(hn)),
                        })
                        .collect()
                }),
            })
            .collect())
    }
}

#[async_trait]
impl ComputeInventory for SimCloud {
    async fn server(&self, id: &ServerId) -> Result<ServerInfo, DriverError> {
        let st = self.settled(None);
        let s = st
            .servers
            .get(id)
            .ok_or_else(|| not_found("server", id.as_str()))?;
        Ok(ServerInfo {
            id: s.id.clone(),
            name: s.name.clone(),
            status: if s.stopped && s.status == "ACTIVE" {
                "SHUTOFF".to_owned()
            } else {
                s.status.clone()
            },
            host: s.host.clone().filter(|_| st.admin_view),
            host_id: s
                .host
                .as_ref()
                .map(|h| host_id_of(&st.project_id, h.as_str())),
            addresses: s.ip.iter().cloned().collect(),
            zone: s.zone.clone(),
            flavor: Some(s.flavor.as_str().into()),
            server_groups: s.group.iter().cloned().collect(),
            fault: s.fault.clone(),
        })
    }

    async fn start_server(&self, id: &ServerId) -> Result<(), DriverError> {
        self.settled(None).set_power(id, true)
    }

    async fn stop_server(&self, id: &ServerId) -> Result<(), DriverError> {
        self.settled(None).set_power(id, false)
    }
}

#[async_trait]
impl ClusterDriver for SimCloud {
    async fn list_nodes(&self) -> Result<Vec<ClusterNode>, DriverError> {
        Ok(self.joined().cluster.list_nodes())
    }
    async fn label_node(&self, req: LabelNode) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.label_node(req, ids)
    }
    async fn apply_object(&self, req: ApplyObject) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.apply_object(req, ids)
    }
    async fn delete_object(&self, req: ObjectRef) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.delete_object(&req, ids)
    }
    async fn list_workloads(
        &self,
        req: ListWorkloads,
    ) -> Result<Vec<serde_json::Value>, DriverError> {
        Ok(self.joined().cluster.list_workloads(&req.namespace))
    }
    async fn scale_workload(&self, req: ScaleWorkload) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.scale_workload(req, ids)
    }
    async fn list_pods(&self, req: ListPods) -> Result<Vec<Pod>, DriverError> {
        Ok(self.joined().cluster.list_pods(&req))
    }
    async fn delete_pod(&self, req: DeletePod) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.delete_pod(&req, ids)
    }
    async fn evict_pod(&self, req: EvictPod) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.evict_pod(&req, ids)
    }
    async fn list_events(&self, req: ListEvents) -> Result<Vec<ClusterEvent>, DriverError> {
        Ok(self.joined().cluster.list_events(&req.namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::ServerFault;
    use crate::sim::nova::tests::{boot, cloud, TWO_ZONES};

    #[tokio::test]
    async fn load_replaces_the_state_of_every_clone_and_keeps_the_clock() {
        let a = SimCloud::new(cloud(TWO_ZONES), 7);
        a.set_clock(Arc::new(crate::driver::VirtualClock::new(
            chrono::Utc::now(),
        )));
        let clone = a.clone();
        let other = SimCloud::new(cloud(TWO_ZONES), 7);
        boot(&mut other.lock(), "a", "m1.small", Some("AZ-1"), None);
        let saved = other.snapshot().unwrap();
        assert_ne!(a.snapshot().unwrap(), saved);
        a.load(&saved).unwrap();
        assert_eq!(
            clone.snapshot().unwrap(),
            saved,
            "clones share the loaded state"
        );
        let e = a.load("{").unwrap_err();
        assert!(e.to_string().contains("does not decode"), "{e}");
        assert_eq!(
            a.snapshot().unwrap(),
            saved,
            "a bad snapshot changes nothing"
        );
        assert!(a.lock().time.is_some(), "the clock is kept");
    }

    #[tokio::test]
    async fn zones_report_free_capacity_and_null_hosts() {
        let sim = SimCloud::new(cloud(TWO_ZONES), 3);
        {
            let mut st = sim.lock();
            boot(&mut st, "a", "m1.small", Some("AZ-1"), None);
        }
        let zones = sim.list_zones(ListZones::default()).await.unwrap();
        assert_eq!(zones.len(), 2);
        let az1 = &zones[0];
        assert!(az1.is_candidate());
        let hosts = az1.hosts.as_ref().unwrap();
        assert_eq!(hosts[0].free, Some(Resources::new(4, 4096, 40)));
        assert_eq!(hosts[1].free, Some(Resources::new(3, 6144, 20)));
        assert!(!zones[1].available);
        assert!(zones[1].hosts.is_none());
    }

    #[tokio::test]
    async fn mutators_change_what_the_scheduler_sees() {
        let sim = SimCloud::new(cloud(TWO_ZONES), 3);
        let clone = sim.clone();
        sim.set_zone_available("AZ-1", false).unwrap();
        let zones = clone.list_zones(ListZones::default()).await.unwrap();
        assert!(!zones[0].available);
        sim.set_zone_available("AZ-1", true).unwrap();
        sim.set_host_available("c2", false).unwrap();
        sim.set_host_capacity("c1", Resources::new(1, 1024, 10))
            .unwrap();
        let zones = clone.list_zones(ListZones::default()).await.unwrap();
        let hosts = zones[0].hosts.as_ref().unwrap();
        assert_eq!(hosts[0].free, Some(Resources::new(1, 1024, 10)));
        assert!(!hosts[1].available);
        let (_, f) = boot(&mut sim.lock(), "x", "m1.small", Some("AZ-1"), None);
        // c1 is too small (placement), c2 fits but is down (filter)
        assert!(f
            .unwrap()
            .message
            .contains("There are not enough hosts available."));
        assert!(sim
            .set_zone_available("nope", true)
            .unwrap_err()
            .is_not_found());
        assert!(sim
            .set_host_available("nope", true)
            .unwrap_err()
            .is_not_found());
        assert!(sim
            .set_host_capacity("nope", Resources::default())
            .unwrap_err()
            .is_not_found());
    }

    #[tokio::test]
    async fn server_show_reports_host_zone_and_fault() {
        let sim = SimCloud::new(cloud(TWO_ZONES), 3);
        let (ok, _) = boot(&mut sim.lock(), "vdu-1", "m1.small", Some("AZ-1"), None);
        let (bad, _) = boot(&mut sim.lock(), "vdu-2", "huge", Some("AZ-1"), None);
        let s = sim.server(&ok.unwrap()).await.unwrap();
        assert_eq!(s.status, "ACTIVE");
        assert_eq!(s.host.unwrap().as_str(), "c2");
        assert_eq!(s.zone.unwrap().as_str(), "AZ-1");
        assert_eq!(s.flavor.unwrap().as_str(), "m1.small");
        let s = sim.server(&bad.unwrap()).await.unwrap();
        assert_eq!(s.status, "ERROR");
        assert_eq!(s.host, None);
        assert_eq!(s.zone.unwrap().as_str(), "AZ-1");
        assert_eq!(
            s.fault.unwrap(),
            ServerFault {
                code: 500,
                message: "No valid host was found. ".into()
            }
        );
        assert!(sim.server(&"nope".into()).await.unwrap_err().is_not_found());
    }
}
