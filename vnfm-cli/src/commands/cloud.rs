//! `vnfm cloud show`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use vnfm_core::cloud::CloudFile;

use crate::error::CliError;
use crate::inputs::load_cloud;
use crate::output::Output;
use crate::report::{reports, Report, Version};

/// What `vnfm cloud show --json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudReport {
    /// The file (or built-in name).
    pub source: String,
    /// Zones in name order.
    pub zones: Vec<ZoneReport>,
    /// Flavors: name → vcpus, memory_mb, disk_gb.
    pub flavors: BTreeMap<String, vnfm_core::zone::Resources>,
    /// Known images, when the cloud restricts them.
    pub images: Option<Vec<String>>,
    /// The format version.
    pub version: Version,
}

reports!(CloudReport);

/// One zone of [`CloudReport`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneReport {
    /// Zone name.
    pub name: String,
    /// Zone availability.
    pub available: bool,
    /// Hosts with capacity and availability; `None` for `hosts: null`.
    pub hosts: Option<Vec<HostReport>>,
    /// Total capacity of the available hosts.
    pub capacity: vnfm_core::zone::Resources,
    /// How many servers of each flavor fit in the zone (host by host).
    pub fits: BTreeMap<String, u64>,
}

/// One host of [`ZoneReport`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostReport {
    /// Host name.
    pub name: String,
    /// nova-compute up and enabled.
    pub available: bool,
    /// Capacity.
    pub capacity: vnfm_core::zone::Resources,
}

/// Builds the report of a cloud file.
pub fn report(cloud: &CloudFile, source: &str) -> CloudReport {
    let flavors: BTreeMap<String, vnfm_core::zone::Resources> = cloud
        .flavors
        .iter()
        .map(|(n, f)| (n.clone(), f.resources()))
        .collect();
    let zones = cloud
        .zones
        .iter()
        .map(|(name, z)| {
            let hosts: Option<Vec<HostReport>> = z.hosts.as_ref().map(|hs| {
                hs.iter()
                    .map(|(h, spec)| HostReport {
                        name: h.clone(),
                        available: spec.available,
                        capacity: spec.capacity(),
                    })
                    .collect()
            });
            let usable: Vec<vnfm_core::zone::Resources> = hosts
                .iter()
                .flatten()
                .filter(|h| h.available && z.available)
                .map(|h| h.capacity)
                .collect();
            let capacity = usable
                .iter()
                .fold(vnfm_core::zone::Resources::default(), |a, c| {
                    a.saturating_add(c)
                });
            let fits = flavors
                .iter()
                .map(|(f, need)| {
                    let n = usable
                        .iter()
                        .map(|c| c.count_fitting(need))
                        .fold(0u64, u64::saturating_add);
                    (f.clone(), n)
                })
                .collect();
            ZoneReport {
                name: name.clone(),
                available: z.available,
                hosts,
                capacity,
                fits,
            }
        })
        .collect();
    CloudReport {
        source: source.to_owned(),
        zones,
        flavors,
        images: cloud.images.clone(),
        version: Version,
    }
}

/// The human-readable form of a [`CloudReport`].
pub fn human(r: &CloudReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "cloud {}", r.source);
    for z in &r.zones {
        let _ = writeln!(
            s,
            "  zone {}{}: {} vCPU, {} MiB, {} GiB available",
            z.name,
            if z.available { "" } else { " (unavailable)" },
            z.capacity.vcpus,
            z.capacity.memory_mb,
            z.capacity.disk_gb
        );
        match &z.hosts {
            None => {
                let _ = writeln!(s, "    hosts: null");
            }
            Some(hosts) => {
                for h in hosts {
                    let _ = writeln!(
                        s,
                        "    host {}{}: {} vCPU, {} MiB, {} GiB",
                        h.name,
                        if h.available {
                            ""
                        } else {
                            " (nova-compute down)"
                        },
                        h.capacity.vcpus,
                        h.capacity.memory_mb,
                        h.capacity.disk_gb
                    );
                }
            }
        }
        let fits: Vec<String> = z.fits.iter().map(|(f, n)| format!("{n} x {f}")).collect();
        if !fits.is_empty() {
            let _ = writeln!(s, "    fits: {}", fits.join(", "));
        }
    }
    let _ = writeln!(s, "  flavors:");
    for (n, f) in &r.flavors {
        let _ = writeln!(
            s,
            "    {n}: {} vCPU, {} MiB, {} GiB",
            f.vcpus, f.memory_mb, f.disk_gb
        );
    }
    if let Some(images) = &r.images {
        let _ = writeln!(s, "  images: {}", images.join(", "));
    }
    s
}

/// `vnfm cloud show [--cloud FILE]`.
///
/// # Errors
/// An unreadable or invalid cloud file (exit 2).
pub fn show(path: Option<&Path>, out: Output) -> Result<(), CliError> {
    let (cloud, source) = load_cloud(path)?;
    let r = report(&cloud, &source);
    out.data(&human(&r), &r)
}
