//! Compute zones, hosts and resource amounts, as the zone catalogue reports them.

use serde::{Deserialize, Serialize};

use crate::id::{HostId, ZoneId};

/// An amount of compute resources: what a flavor asks for, or what a host has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resources {
    /// Virtual CPUs.
    pub vcpus: u64,
    /// Memory in MiB.
    pub memory_mb: u64,
    /// Root disk in GiB.
    pub disk_gb: u64,
}

impl Resources {
    /// A resource amount.
    pub const fn new(vcpus: u64, memory_mb: u64, disk_gb: u64) -> Self {
        Self {
            vcpus,
            memory_mb,
            disk_gb,
        }
    }

    /// True when `need` fits into `self` on every dimension.
    pub fn fits(&self, need: &Resources) -> bool {
        need.vcpus <= self.vcpus && need.memory_mb <= self.memory_mb && need.disk_gb <= self.disk_gb
    }

    /// `self - other`, saturating at zero on each dimension.
    pub fn saturating_sub(&self, other: &Resources) -> Resources {
        Resources {
            vcpus: self.vcpus.saturating_sub(other.vcpus),
            memory_mb: self.memory_mb.saturating_sub(other.memory_mb),
            disk_gb: self.disk_gb.saturating_sub(other.disk_gb),
        }
    }

    /// `self + other`, saturating at `u64::MAX` on each dimension.
    pub fn saturating_add(&self, other: &Resources) -> Resources {
        Resources {
            vcpus: self.vcpus.saturating_add(other.vcpus),
            memory_mb: self.memory_mb.saturating_add(other.memory_mb),
            disk_gb: self.disk_gb.saturating_add(other.disk_gb),
        }
    }

    /// How many copies of `unit` fit into `self` (`u64::MAX` when `unit` is all zero).
    pub fn count_fitting(&self, unit: &Resources) -> u64 {
        let per = |have: u64, need: u64| have.checked_div(need).unwrap_or(u64::MAX);
        per(self.vcpus, unit.vcpus)
            .min(per(self.memory_mb, unit.memory_mb))
            .min(per(self.disk_gb, unit.disk_gb))
    }
}

/// A compute host of a zone, as the zone catalogue reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeHost {
    /// Host name.
    pub name: HostId,
    /// True when the host runs a nova-compute service that is enabled and up
    /// (Nova: `available: true, active: true`).
    pub available: bool,
    /// Free capacity when the backend knows it (the simulator does; OpenStack does from
    /// Placement when the credentials may read it); `None` means unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<Resources>,
}

/// A compute availability zone, as the zone catalogue reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeZone {
    /// Zone name.
    pub name: ZoneId,
    /// Nova `zoneState.available`.
    pub available: bool,
    /// Hosts running nova-compute, or `None` when the backend reported `hosts: null`
    /// (Nova does so for unavailable zones).
    pub hosts: Option<Vec<ComputeHost>>,
}

impl ComputeZone {
    /// True when the zone is available and has at least one available compute host: the
    /// definition of a reselection candidate.
    pub fn is_candidate(&self) -> bool {
        self.available
            && self
                .hosts
                .as_ref()
                .is_some_and(|h| h.iter().any(|h| h.available))
    }

    /// The same zone with the free capacity of every host forgotten (`free: None`): what a
    /// policy that must ignore capacity (the spec's `random`) sees.
    pub fn without_capacity(mut self) -> ComputeZone {
        for h in self.hosts.iter_mut().flatten() {
            h.free = None;
        }
        self
    }

    /// Sum of the free capacity of the available hosts, when every one of them reports it.
    pub fn free(&self) -> Option<Resources> {
        let hosts = self.hosts.as_ref()?;
        hosts
            .iter()
            .filter(|h| h.available)
            .try_fold(Resources::default(), |acc, h| {
                h.free.map(|f| acc.saturating_add(&f))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_and_counts() {
        let host = Resources::new(8, 16384, 160);
        let small = Resources::new(1, 2048, 20);
        assert!(host.fits(&small));
        assert_eq!(host.count_fitting(&small), 8);
        assert!(!small.fits(&host));
        assert_eq!(host.saturating_sub(&small), Resources::new(7, 14336, 140));
    }

    #[test]
    fn candidate_needs_an_available_host() {
        let mut z = ComputeZone {
            name: "AZ-1".into(),
            available: true,
            hosts: None,
        };
        assert!(!z.is_candidate());
        z.hosts = Some(vec![ComputeHost {
            name: "c1".into(),
            available: false,
            free: None,
        }]);
        assert!(!z.is_candidate());
        z.hosts = Some(vec![ComputeHost {
            name: "c1".into(),
            available: true,
            free: Some(Resources::new(1, 1, 1)),
        }]);
        assert!(z.is_candidate());
        assert_eq!(z.free(), Some(Resources::new(1, 1, 1)));
    }
}
