//! What a zone listing knows of the free capacity of its hosts ([`CapacityReport`]), and why
//! not where it does not ([`CapacityNote`], [`CapacityUnknown`]).
//!
//! The data alone, below both the [`placement`](crate::placement) reading that makes a report
//! and the [`Session`](crate::session::Session) that remembers the last one and a refusal
//! per token; reachable as `placement::CapacityReport` and at the crate root.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use vnfm_core::id::HostId;

/// Why the free capacity of a host (or of every host) is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CapacityUnknown {
    /// Placement was not asked: [`CloudConfig::free_capacity`](crate::CloudConfig::free_capacity)
    /// is off.
    Disabled,
    /// The listing names no compute host to ask about (Nova's default policy refuses
    /// `os-availability-zone/detail` to non-admin users, who get zones without hosts).
    NoHosts,
    /// The catalog has no `placement` endpoint.
    NoEndpoint,
    /// Placement refused the credentials (HTTP 403; its default policy lets only `admin` and
    /// `service` users read resource providers).
    Forbidden,
    /// Placement (or Nova's `os-hypervisors`) failed or answered something unreadable.
    Failed,
    /// No resource provider of the host was found, by name or through `os-hypervisors`.
    NoProvider,
    /// The host's providers have no inventory of `VCPU`, `MEMORY_MB` or `DISK_GB`.
    NoInventory,
}

impl CapacityUnknown {
    /// The kind's name as serialized (`forbidden`, `no_hosts`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            CapacityUnknown::Disabled => "disabled",
            CapacityUnknown::NoHosts => "no_hosts",
            CapacityUnknown::NoEndpoint => "no_endpoint",
            CapacityUnknown::Forbidden => "forbidden",
            CapacityUnknown::Failed => "failed",
            CapacityUnknown::NoProvider => "no_provider",
            CapacityUnknown::NoInventory => "no_inventory",
        }
    }
}

impl fmt::Display for CapacityUnknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why capacity is unknown: a kind for programs and a message for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CapacityNote {
    /// The kind of reason.
    pub reason: CapacityUnknown,
    /// What happened, naming the request or the host (e.g. `GET http://…/resource_providers:
    /// HTTP 403: Access was denied …`).
    pub message: String,
}

impl CapacityNote {
    /// A note.
    pub fn new(reason: CapacityUnknown, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

impl fmt::Display for CapacityNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.reason)
    }
}

/// What a zone listing knows of the free capacity of its hosts, and why not where it does
/// not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CapacityReport {
    /// Why no host has its free capacity, when that holds for the whole listing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<CapacityNote>,
    /// Hosts without their free capacity for a reason of their own (`unknown` is `None`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<HostId, CapacityNote>,
    /// The hosts whose free capacity is known.
    #[serde(default)]
    pub known: Vec<HostId>,
}

impl CapacityReport {
    /// A report of a listing where no host's capacity is known, for `note`'s reason.
    pub fn unknown(note: CapacityNote) -> Self {
        Self {
            unknown: Some(note),
            ..Self::default()
        }
    }

    /// True when every listed host has its free capacity.
    pub fn is_complete(&self) -> bool {
        self.unknown.is_none() && self.hosts.is_empty()
    }

    /// The note for `host`: its own, else the listing's; `None` when its capacity is known.
    pub fn note_for(&self, host: &HostId) -> Option<&CapacityNote> {
        self.hosts.get(host).or(self.unknown.as_ref())
    }

    /// One line per reason, for people (empty when the report is complete), e.g.
    /// `free capacity of hosts unknown: GET …/resource_providers: HTTP 403: … (forbidden)`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(n) = &self.unknown {
            out.push(format!("free capacity of hosts unknown: {n}"));
        }
        for (h, n) in &self.hosts {
            out.push(format!("free capacity of host {h} unknown: {n}"));
        }
        out
    }
}
