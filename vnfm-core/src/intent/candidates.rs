//! The candidate file: cloud owners, their regions, cost models, flavours and capacity
//! sources, in YAML or JSON.
//!
//! ```yaml
//! owners:
//!   - name: vio-east
//!     cloud_type: VMware VIO                 # OpenStack, Kubernetes, VMware VIO, Azure or any name
//!     supports: [HA, Guaranteed QoS, Burstable QoS]
//!     cost: {fixed: 100}                     # price per instance, whatever the flavour
//!     flavours:                              # shared by the owner's regions (optional)
//!       - name: m1.xlarge
//!         vcpus: 16
//!         memory_mb: 32768
//!         disk_gb: 40
//!         oversubscription:                  # burstable variants: percent -> burst ceiling
//!           - {percent: 25, max_vcpus: 20, max_memory_mb: 40960, flavour: xyz.burst25}
//!   - name: azure
//!     cloud_type: Azure
//!     supports: [HA, Guaranteed QoS]
//!     cost:
//!       per_instance_type: {m1.xlarge: 80}   # price per instance of that type
//!       feature_group_discounts:             # applied when every listed feature is used
//!         - {features: [HA], percent: 10}
//! regions:
//!   - id: RegionOne
//!     owner: vio-east
//!     location: {lat: 40.71, lon: -74.01}
//!     tenant: vcpe                           # optional
//!     hosts: 4                               # compute hosts, for HA (optional)
//!     cost: 90                               # optional: fixed price per instance here
//!     capacity: {declared: {vcpus: 64, memory_mb: 131072, disk_gb: 2000}}
//!     # capacity: public                     # unlimited: always passes
//!     # capacity: {zones: all}               # free capacity of the region's zone catalogue
//!     # capacity: {zones: [AZ-1, AZ-2]}      # ... of these zones only
//!     # capacity: {reservation: pool-1}      # free capacity of a Promise pool
//!     flavours: []                           # region flavours; same names override the owner's
//!     vim: openstack:east                    # optional: simulated | openstack | openstack:<clouds.yaml entry>
//! ```
//!
//! One unit system, the project's [`Resources`]: vCPUs, memory in MiB, disk in GiB. A flavour's
//! `vcpus`/`memory_mb`/`disk_gb` are what one instance reserves (its guaranteed amount); an
//! over-subscription variant says how far a burstable instance may burst (`max_* >=` the
//! reserved amount).
//!
//! Capacity that is not in the file (zone catalogues, Promise pools) is given by the caller in
//! [`Capacities`]: the core stays pure. Errors name the file, the field path
//! (`regions[2].capacity.declared.vcpus`), the value and what was expected.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::policy::{parse_text, show, CloudType, Feature, Parser};
use crate::error::Result;
use crate::reservation::CapacityReport;
use crate::zone::{ComputeZone, Resources};

/// A point on Earth, in degrees.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GeoPoint {
    /// Latitude, -90..=90.
    pub lat: f64,
    /// Longitude, -180..=180.
    pub lon: f64,
}

impl GeoPoint {
    /// Mean Earth radius in km (IUGG), the radius HAS's haversine uses too (6371 km, rounded).
    pub const EARTH_RADIUS_KM: f64 = 6371.0;

    /// A point.
    pub const fn new(lat: f64, lon: f64) -> Self {
        GeoPoint { lat, lon }
    }

    /// Checks that the point is on Earth: a finite latitude from -90 to 90 and a finite
    /// longitude from -180 to 180 degrees. `field` names the point (`customer`) in the error,
    /// `source` what holds it.
    ///
    /// # Errors
    /// [`crate::error::Error::Invalid`] naming `field.lat` or `field.lon`, the value and the
    /// range.
    pub fn check(&self, source: &str, field: &str) -> Result<()> {
        for (name, x, max) in [("lat", self.lat, 90.0), ("lon", self.lon, 180.0)] {
            if !x.is_finite() || x.abs() > max {
                return Err(crate::error::Error::invalid(
                    crate::error::Location::file(source).with_field(format!("{field}.{name}")),
                    format!("value {x}: expected degrees from -{max} to {max}"),
                ));
            }
        }
        Ok(())
    }

    /// Great-circle (haversine) distance in km.
    pub fn distance_km(&self, other: &GeoPoint) -> f64 {
        let (p1, p2) = (self.lat.to_radians(), other.lat.to_radians());
        let dp = p2 - p1;
        let dl = (other.lon - self.lon).to_radians();
        let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
        2.0 * Self::EARTH_RADIUS_KM * a.sqrt().min(1.0).asin()
    }
}

/// An over-subscription variant of a flavour: how far a burstable instance may burst.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Oversubscription {
    /// The over-subscription percentage (1..=100).
    pub percent: u32,
    /// Burst ceiling of vCPUs.
    pub max_vcpus: u64,
    /// Burst ceiling of memory in MiB.
    pub max_memory_mb: u64,
    /// The variant's own flavour name (the instance type a burstable server is created
    /// with); written `flavour:` in the file, by default `<flavour>.burst<percent>`.
    pub flavour: String,
}

/// A flavour (instance type).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flavour {
    /// Name.
    pub name: String,
    /// What one instance reserves.
    pub resources: Resources,
    /// Burstable variants.
    pub oversubscription: Vec<Oversubscription>,
}

impl Flavour {
    /// The variant for `percent`.
    pub fn variant(&self, percent: u32) -> Option<&Oversubscription> {
        self.oversubscription.iter().find(|o| o.percent == percent)
    }
}

/// A discount for using a group of features together.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureDiscount {
    /// The features; the discount applies when every one is used.
    pub features: Vec<Feature>,
    /// Discount percentage, 0..=100.
    pub percent: f64,
}

/// How an owner prices a deployment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostModel {
    /// One price per instance, whatever the flavour.
    Fixed(f64),
    /// A price per instance type, with feature-group discounts.
    PerInstanceType {
        /// Price per instance, by flavour name.
        prices: BTreeMap<String, f64>,
        /// Discounts.
        feature_group_discounts: Vec<FeatureDiscount>,
    },
}

/// A cloud owner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CloudOwner {
    /// Name.
    pub name: String,
    /// Cloud type.
    pub cloud_type: CloudType,
    /// Supported intents.
    pub supports: Vec<Feature>,
    /// Cost model.
    pub cost: CostModel,
    /// Flavours shared by the owner's regions.
    pub flavours: Vec<Flavour>,
}

/// Where a region's free capacity comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacitySource {
    /// A public cloud: unlimited, the check always passes.
    Public,
    /// Free amounts written in the file.
    Declared(Resources),
    /// The region's zone catalogue ([`Capacities::with_zone_catalogue`] or
    /// [`Capacities::with_zone_free`]); `None`: every zone.
    Zones(Option<Vec<String>>),
    /// A Promise pool of the reservation ledger ([`Capacities::with_pool_free`]).
    Reservation(String),
}

impl fmt::Display for CapacitySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapacitySource::Public => f.write_str("public"),
            CapacitySource::Declared(_) => f.write_str("declared"),
            CapacitySource::Zones(None) => f.write_str("zone catalogue"),
            CapacitySource::Zones(Some(z)) => write!(f, "zone catalogue ({})", z.join(", ")),
            CapacitySource::Reservation(p) => write!(f, "reservation pool {p}"),
        }
    }
}

/// A cloud region: a candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Region {
    /// Region id.
    pub id: String,
    /// Owner name.
    pub owner: String,
    /// Location.
    pub location: GeoPoint,
    /// Tenant (OpenStack project) the capacity is checked for, when any.
    pub tenant: Option<String>,
    /// Capacity source.
    pub capacity: CapacitySource,
    /// Region flavours (override the owner's of the same name).
    pub flavours: Vec<Flavour>,
    /// Compute hosts, when known.
    pub hosts: Option<u64>,
    /// Fixed price per instance in this region, overriding the owner's cost model.
    pub cost: Option<f64>,
    /// The VIM connection that deploys into this region, when the region can be deployed
    /// to by vnfm (`vnfm instantiate --intent`); `None`: selection only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim: Option<VimRef>,
}

/// The VIM connection of a region: `simulated` (vnfm's simulated cloud), `openstack` (the
/// OpenStack of the `OS_*` variables / `OS_CLOUD`), or `openstack:<cloud>` (an entry of
/// `clouds.yaml`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum VimRef {
    /// The simulated cloud of the state file.
    Simulated,
    /// A real OpenStack; `cloud`: the `clouds.yaml` entry, else the environment's.
    OpenStack {
        /// The `clouds.yaml` entry.
        cloud: Option<String>,
    },
}

impl VimRef {
    /// Parses `simulated`, `openstack` or `openstack:<cloud>`.
    pub fn parse(s: &str) -> Option<VimRef> {
        match s.split_once(':') {
            None if s == "simulated" => Some(VimRef::Simulated),
            None if s == "openstack" => Some(VimRef::OpenStack { cloud: None }),
            Some(("openstack", c)) if !c.trim().is_empty() => Some(VimRef::OpenStack {
                cloud: Some(c.trim().to_owned()),
            }),
            _ => None,
        }
    }
}

impl fmt::Display for VimRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VimRef::Simulated => f.write_str("simulated"),
            VimRef::OpenStack { cloud: None } => f.write_str("openstack"),
            VimRef::OpenStack { cloud: Some(c) } => write!(f, "openstack:{c}"),
        }
    }
}

/// A validated candidate file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateFile {
    /// Cloud owners.
    pub owners: Vec<CloudOwner>,
    /// Regions, in candidate order (the tie-break order).
    pub regions: Vec<Region>,
}

impl CandidateFile {
    /// Parses and validates a candidate file written in YAML or JSON.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::error::Error::Invalid) naming the field, the value and the
    /// expectation: malformed text, unknown keys, an unknown feature, a negative or non-numeric amount or price, a bad
    /// location, a duplicate owner or region, a region of an unknown owner, a burst ceiling
    /// below the reserved amount.
    pub fn from_text(source_name: &str, text: &str) -> Result<CandidateFile> {
        let text = crate::input::strip_bom(text);
        let parser = Parser { file: source_name };
        // The streamed read first (each region checked as it is read, never the whole file as
        // one tree); the whole-document read decides every error, so messages are the same
        // whichever read found them.
        if let Some(file) = parser.streamed(text) {
            return Ok(file);
        }
        let doc = parse_text(source_name, text)?;
        parser.candidates(&doc)
    }

    /// Reads and validates a candidate file.
    ///
    /// # Errors
    /// [`Error::Io`](crate::error::Error::Io) when the file cannot be read;
    /// [`Error::Invalid`](crate::error::Error::Invalid) when it is not a regular file or is
    /// larger than [`crate::input::MAX_INPUT_BYTES`]; else as [`CandidateFile::from_text`].
    pub fn load(path: impl AsRef<Path>) -> Result<CandidateFile> {
        let path = path.as_ref();
        let text =
            crate::input::read_text(path, crate::input::MAX_INPUT_BYTES, "a candidate file")?;
        Self::from_text(&path.display().to_string(), &text)
    }

    /// The regions whose capacity is a zone catalogue, grouped by the VIM that lists it
    /// (`None`: the caller's configured VIM, for regions that name none), in candidate order.
    pub fn zone_catalogue_regions(&self) -> BTreeMap<Option<&VimRef>, Vec<&Region>> {
        let mut out: BTreeMap<Option<&VimRef>, Vec<&Region>> = BTreeMap::new();
        for r in &self.regions {
            if matches!(r.capacity, CapacitySource::Zones(_)) {
                out.entry(r.vim.as_ref()).or_default().push(r);
            }
        }
        out
    }

    /// The owner named `name`.
    pub fn owner(&self, name: &str) -> Option<&CloudOwner> {
        self.owners.iter().find(|o| o.name == name)
    }

    /// The flavour `name` of `region`: the region's, else its owner's.
    pub fn flavour<'a>(&'a self, region: &'a Region, name: &str) -> Option<&'a Flavour> {
        region_flavour(self.owner(&region.owner), region, name)
    }

    /// The owners by name, for lookups in a loop over the regions (one hash look-up each, where
    /// [`CandidateFile::owner`] scans the list).
    pub fn owner_index(&self) -> HashMap<&str, &CloudOwner> {
        self.owners.iter().map(|o| (o.name.as_str(), o)).collect()
    }
}

/// The flavour `name` of `region` whose owner is `owner`: the region's, else its owner's.
pub(crate) fn region_flavour<'a>(
    owner: Option<&'a CloudOwner>,
    region: &'a Region,
    name: &str,
) -> Option<&'a Flavour> {
    region
        .flavours
        .iter()
        .find(|f| f.name == name)
        .or_else(|| owner.and_then(|o| o.flavours.iter().find(|f| f.name == name)))
}

/// At most ten names joined with ", ", then how many more there are: an error message lists
/// what was expected without echoing a whole file.
fn name_list<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 10;
    let total = names.len();
    let mut out = names.take(SHOWN).collect::<Vec<_>>().join(", ");
    if total > SHOWN {
        out.push_str(&format!(", ... and {} more", total - SHOWN));
    }
    out
}

/// Free capacity the caller knows and the file does not: zone catalogues per region and
/// Promise pools. Pure data: the caller reads the catalogue or the ledger, the core compares.
#[derive(Clone, Debug, Default)]
pub struct Capacities {
    catalogues: BTreeMap<String, Vec<ComputeZone>>,
    totals: BTreeMap<String, Resources>,
    pools: BTreeMap<String, Resources>,
}

/// What a capacity lookup found for a region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FreeCapacity {
    /// Unlimited (public cloud).
    Unlimited,
    /// This much is free; `hosts` is the count of available hosts when the source knows it.
    Free {
        /// Free amount.
        free: Resources,
        /// Available hosts, when known.
        hosts: Option<u64>,
    },
    /// Unknown, and why.
    Unknown(String),
}

impl Capacities {
    /// No capacity known.
    pub fn new() -> Self {
        Self::default()
    }

    /// The zone catalogue of `region` (as [`crate::driver`]'s `ZoneCatalog` lists it).
    pub fn with_zone_catalogue(mut self, region: impl Into<String>, zones: &[ComputeZone]) -> Self {
        self.catalogues.insert(region.into(), zones.to_vec());
        self
    }

    /// The free total of `region`'s zones, computed by the caller (used when no catalogue is
    /// given for the region).
    pub fn with_zone_free(mut self, region: impl Into<String>, free: Resources) -> Self {
        self.totals.insert(region.into(), free);
        self
    }

    /// The free amount of the Promise pool `pool`.
    pub fn with_pool_free(mut self, pool: impl Into<String>, free: Resources) -> Self {
        self.pools.insert(pool.into(), free);
        self
    }

    /// Every region whose capacity is a Promise pool, from the ledger: what the pool (a zone
    /// of the ledger) has available from `from` on, for good. A pool the ledger does not know
    /// is left out (the region is then dropped as "free capacity unknown").
    pub fn with_ledger(
        mut self,
        candidates: &CandidateFile,
        ledger: &crate::reservation::Ledger,
        from: chrono::DateTime<chrono::Utc>,
    ) -> Self {
        for region in &candidates.regions {
            if let CapacitySource::Reservation(pool) = &region.capacity {
                let window = crate::reservation::Window {
                    start: from,
                    end: None,
                };
                let zone = crate::id::ZoneId::new(pool.as_str());
                if let Ok(report) = ledger.capacity(&zone, window) {
                    self = self.with_pool_report(pool.clone(), &report);
                }
            }
        }
        self
    }

    /// The free amount of the Promise pool `pool` from a ledger capacity report
    /// ([`crate::reservation::Ledger::capacity`] over the deployment's window): `cores` →
    /// vCPUs, `ram` → memory (MiB); negative amounts count as zero. The ledger's compute lines
    /// have no root disk, so disk is not limited by a pool.
    pub fn with_pool_report(self, pool: impl Into<String>, report: &CapacityReport) -> Self {
        let a = &report.available;
        let free = Resources::new(
            u64::try_from(a.cores).unwrap_or(0),
            u64::try_from(a.ram).unwrap_or(0),
            u64::MAX,
        );
        self.with_pool_free(pool, free)
    }

    /// The free capacity of `region` by its source.
    pub fn free(&self, region: &Region) -> FreeCapacity {
        match &region.capacity {
            CapacitySource::Public => FreeCapacity::Unlimited,
            CapacitySource::Declared(r) => FreeCapacity::Free {
                free: *r,
                hosts: None,
            },
            CapacitySource::Reservation(pool) => match self.pools.get(pool) {
                Some(r) => FreeCapacity::Free {
                    free: *r,
                    hosts: None,
                },
                None => FreeCapacity::Unknown(format!("no free amount given for pool {pool}")),
            },
            CapacitySource::Zones(names) => {
                let Some(zones) = self.catalogues.get(&region.id) else {
                    return match self.totals.get(&region.id) {
                        Some(r) => FreeCapacity::Free {
                            free: *r,
                            hosts: None,
                        },
                        None => FreeCapacity::Unknown("no zone catalogue given".to_owned()),
                    };
                };
                if let Some(names) = names {
                    if let Some(missing) = names
                        .iter()
                        .find(|n| !zones.iter().any(|z| z.name.as_str() == n.as_str()))
                    {
                        return FreeCapacity::Unknown(format!(
                            "zone {missing} is not in the catalogue"
                        ));
                    }
                }
                let mut free = Resources::default();
                let mut hosts = 0u64;
                for z in zones.iter().filter(|z| {
                    names
                        .as_ref()
                        .is_none_or(|n| n.iter().any(|n| n.as_str() == z.name.as_str()))
                }) {
                    if !z.is_candidate() {
                        continue;
                    }
                    match z.free() {
                        Some(f) => free = free.saturating_add(&f),
                        None => {
                            return FreeCapacity::Unknown(format!(
                                "zone {} does not report free capacity",
                                z.name.as_str()
                            ))
                        }
                    }
                    hosts += z.hosts.iter().flatten().filter(|h| h.available).count() as u64;
                }
                FreeCapacity::Free {
                    free,
                    hosts: Some(hosts),
                }
            }
        }
    }
}

/// The regions of a candidate file as they are read ([`Parser::streamed`]): each region's
/// value is checked and dropped at once, so a file of 100,000 regions never exists as one
/// tree of values (a third of the read's time went to building and freeing it).
struct RegionsSeed<'p, 'f> {
    parser: &'p Parser<'f>,
    out: &'p mut Vec<Region>,
}

impl<'de> serde::de::DeserializeSeed<'de> for RegionsSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RegionsSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of regions")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<(), A::Error> {
        let mut i = 0usize;
        while let Some(crate::input::UniqueKeys(v)) = seq.next_element()? {
            // The message is the whole-document read's (see `Parser::streamed`).
            let r = self
                .parser
                .region(&v, &format!("regions[{i}]"))
                .map_err(|_| serde::de::Error::custom("region"))?;
            self.out.push(r);
            i += 1;
        }
        Ok(())
    }
}

/// The top mapping of a candidate file, its `regions` read through [`RegionsSeed`] and every
/// other key kept as a value.
struct TopSeed<'p, 'f> {
    parser: &'p Parser<'f>,
    regions: &'p mut Option<Vec<Region>>,
}

impl<'de> serde::de::DeserializeSeed<'de> for TopSeed<'_, '_> {
    type Value = serde_json::Map<String, Value>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for TopSeed<'_, '_> {
    type Value = serde_json::Map<String, Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a candidate file")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut rest = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "regions" {
                if self.regions.is_some() {
                    return Err(serde::de::Error::custom("duplicate key"));
                }
                let mut out = Vec::new();
                map.next_value_seed(RegionsSeed {
                    parser: self.parser,
                    out: &mut out,
                })?;
                *self.regions = Some(out);
            } else {
                let crate::input::UniqueKeys(v) = map.next_value()?;
                if rest.insert(key, v).is_some() {
                    return Err(serde::de::Error::custom("duplicate key"));
                }
            }
        }
        Ok(rest)
    }
}

impl Parser<'_> {
    /// The candidate file read as a stream (JSON, or YAML through serde_yaml's events): every
    /// region checked as it is read, then the owners and the checks across regions. `None` on
    /// any error or any input it does not take (a document nested too deep, not a mapping,
    /// without `regions`...): the caller then reads the whole document, which says what is
    /// wrong exactly as it always has.
    fn streamed(&self, text: &str) -> Option<CandidateFile> {
        use serde::de::DeserializeSeed;
        crate::input::check_nesting(self.file, text).ok()?;
        let mut regions = None;
        let seed = TopSeed {
            parser: self,
            regions: &mut regions,
        };
        let rest = if crate::input::is_json(text) {
            let mut de = serde_json::Deserializer::from_str(text);
            let rest = seed.deserialize(&mut de).ok()?;
            de.end().ok()?;
            rest
        } else {
            seed.deserialize(serde_yaml::Deserializer::from_str(text))
                .ok()?
        };
        let mut top = rest;
        // Only the keys matter to the check of unknown keys.
        top.insert("regions".to_owned(), Value::Null);
        self.keys(&top, "", &["owners", "regions"]).ok()?;
        let owners = top.get("owners")?.as_array()?;
        let (owners, owner_names) = self.owners(owners).ok()?;
        let regions = regions?;
        self.check_regions(&owners, &owner_names, &regions).ok()?;
        Some(CandidateFile { owners, regions })
    }

    fn candidates(&self, doc: &Value) -> Result<CandidateFile> {
        let top = self.obj(doc, "<document>")?;
        self.keys(top, "", &["owners", "regions"])?;
        let list = |k: &str| -> Result<&Vec<Value>> {
            let v = top
                .get(k)
                .ok_or_else(|| self.err(k, format!("missing: expected a list of {k}")))?;
            v.as_array()
                .ok_or_else(|| self.err(k, format!("value {}: expected a list of {k}", show(v))))
        };
        let (owners, owner_names) = self.owners(list("owners")?)?;
        let mut regions: Vec<Region> = Vec::new();
        let mut seen = HashSet::new();
        for (i, v) in list("regions")?.iter().enumerate() {
            let r = self.region(v, &format!("regions[{i}]"))?;
            self.check_region(&owners, &owner_names, &mut seen, i, &r)?;
            regions.push(r);
        }
        Ok(CandidateFile { owners, regions })
    }

    /// The checks across regions, in region order: each region's owner is listed, and no
    /// region is listed twice for its owner.
    fn check_regions(
        &self,
        owners: &[CloudOwner],
        owner_names: &HashSet<String>,
        regions: &[Region],
    ) -> Result<()> {
        let mut seen = HashSet::new();
        for (i, r) in regions.iter().enumerate() {
            self.check_region(owners, owner_names, &mut seen, i, r)?;
        }
        Ok(())
    }

    /// One region's part of [`Parser::check_regions`]; `seen` holds the (owner, region) pairs
    /// of the regions before it.
    fn check_region(
        &self,
        owners: &[CloudOwner],
        owner_names: &HashSet<String>,
        seen: &mut HashSet<(String, String)>,
        i: usize,
        r: &Region,
    ) -> Result<()> {
        let at = || format!("regions[{i}]");
        if !owner_names.contains(&r.owner) {
            return Err(self.err(
                &format!("{}.owner", at()),
                format!(
                    "value {:?}: expected one of the owners ({})",
                    r.owner,
                    name_list(owners.iter().map(|o| o.name.as_str()))
                ),
            ));
        }
        if !seen.insert((r.owner.clone(), r.id.clone())) {
            return Err(self.err(
                &format!("{}.id", at()),
                format!(
                    "value {:?} listed twice for owner {:?}: expected unique regions",
                    r.id, r.owner
                ),
            ));
        }
        Ok(())
    }

    /// The owners of a candidate file, and their names.
    fn owners(&self, list: &[Value]) -> Result<(Vec<CloudOwner>, HashSet<String>)> {
        // Names seen so far, for the duplicate and unknown-owner checks: hashed, so that a file
        // of 100,000 regions is checked in linear time.
        let mut owner_names: HashSet<String> = HashSet::new();
        let mut owners: Vec<CloudOwner> = Vec::new();
        for (i, v) in list.iter().enumerate() {
            let at = format!("owners[{i}]");
            let o = self.owner(v, &at)?;
            if !owner_names.insert(o.name.clone()) {
                return Err(self.err(
                    &format!("{at}.name"),
                    format!(
                        "value {:?} listed twice: expected unique owner names",
                        o.name
                    ),
                ));
            }
            owners.push(o);
        }
        Ok((owners, owner_names))
    }

    fn required<'v>(
        &self,
        m: &'v serde_json::Map<String, Value>,
        at: &str,
        k: &str,
        what: &str,
    ) -> Result<&'v Value> {
        m.get(k)
            .ok_or_else(|| self.err(&format!("{at}.{k}"), format!("missing: expected {what}")))
    }

    fn owner(&self, v: &Value, at: &str) -> Result<CloudOwner> {
        let m = self.obj(v, at)?;
        self.keys(
            m,
            at,
            &["name", "cloud_type", "supports", "cost", "flavours"],
        )?;
        let name = self
            .string(
                self.required(m, at, "name", "an owner name")?,
                &format!("{at}.name"),
            )?
            .to_owned();
        let cloud_type = CloudType::from(
            self.string(
                self.required(
                    m,
                    at,
                    "cloud_type",
                    "a cloud type (OpenStack, Kubernetes, VMware VIO, Azure, ...)",
                )?,
                &format!("{at}.cloud_type"),
            )?
            .to_owned(),
        );
        let mut supports = Vec::new();
        if let Some(s) = m.get("supports") {
            let sat = format!("{at}.supports");
            for (i, f) in self.string_set(s, &sat)?.iter().enumerate() {
                supports.push(self.feature(f, &format!("{sat}[{i}]"))?);
            }
        }
        let cost_at = format!("{at}.cost");
        let cost = match m.get("cost") {
            None => CostModel::Fixed(0.0),
            Some(c) => {
                let cm = self.obj(c, &cost_at)?;
                self.keys(
                    cm,
                    &cost_at,
                    &["fixed", "per_instance_type", "feature_group_discounts"],
                )?;
                match (cm.get("fixed"), cm.get("per_instance_type")) {
                    (Some(x), None) => {
                        if cm.contains_key("feature_group_discounts") {
                            return Err(self.err(
                                &format!("{cost_at}.feature_group_discounts"),
                                "discounts with a fixed price: expected them with per_instance_type",
                            ));
                        }
                        CostModel::Fixed(self.non_negative(x, &format!("{cost_at}.fixed"))?)
                    }
                    (None, Some(p)) => {
                        let pat = format!("{cost_at}.per_instance_type");
                        let pm = self.obj(p, &pat)?;
                        let mut prices = BTreeMap::new();
                        for (k, x) in pm {
                            prices.insert(k.clone(), self.non_negative(x, &format!("{pat}.{k}"))?);
                        }
                        let mut feature_group_discounts = Vec::new();
                        if let Some(d) = cm.get("feature_group_discounts") {
                            let dat = format!("{cost_at}.feature_group_discounts");
                            let items = self.list(d, &dat, "discounts")?;
                            for (i, item) in items.iter().enumerate() {
                                let iat = format!("{dat}[{i}]");
                                let im = self.obj(item, &iat)?;
                                self.keys(im, &iat, &["features", "percent"])?;
                                let fat = format!("{iat}.features");
                                let mut features = Vec::new();
                                for (j, f) in self
                                    .string_set(
                                        self.required(im, &iat, "features", "a list of features")?,
                                        &fat,
                                    )?
                                    .iter()
                                    .enumerate()
                                {
                                    features.push(self.feature(f, &format!("{fat}[{j}]"))?);
                                }
                                let pcat = format!("{iat}.percent");
                                let percent = self.non_negative(
                                    self.required(im, &iat, "percent", "a discount percentage")?,
                                    &pcat,
                                )?;
                                if percent > 100.0 {
                                    return Err(self.err(
                                        &pcat,
                                        format!(
                                            "value {percent}: expected a percentage from 0 to 100"
                                        ),
                                    ));
                                }
                                feature_group_discounts.push(FeatureDiscount { features, percent });
                            }
                        }
                        CostModel::PerInstanceType {
                            prices,
                            feature_group_discounts,
                        }
                    }
                    _ => {
                        return Err(self.err(
                            &cost_at,
                            format!(
                                "value {}: expected exactly one of fixed or per_instance_type",
                                show(c)
                            ),
                        ))
                    }
                }
            }
        };
        let flavours = self.flavours(m.get("flavours"), &format!("{at}.flavours"))?;
        Ok(CloudOwner {
            name,
            cloud_type,
            supports,
            cost,
            flavours,
        })
    }

    fn feature(&self, s: &str, at: &str) -> Result<Feature> {
        Feature::parse(s).ok_or_else(|| {
            self.err(
                at,
                format!("value {s:?}: expected HA, Guaranteed QoS or Burstable QoS"),
            )
        })
    }

    fn flavours(&self, v: Option<&Value>, at: &str) -> Result<Vec<Flavour>> {
        let Some(v) = v else { return Ok(Vec::new()) };
        let items = self.list(v, at, "flavours")?;
        let mut out: Vec<Flavour> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let fat = format!("{at}[{i}]");
            let m = self.obj(item, &fat)?;
            self.keys(
                m,
                &fat,
                &["name", "vcpus", "memory_mb", "disk_gb", "oversubscription"],
            )?;
            let name = self
                .string(
                    self.required(m, &fat, "name", "a flavour name")?,
                    &format!("{fat}.name"),
                )?
                .to_owned();
            if out.iter().any(|f| f.name == name) {
                return Err(self.err(
                    &format!("{fat}.name"),
                    format!("value {name:?} listed twice: expected unique flavour names"),
                ));
            }
            let amount = |k: &str| -> Result<u64> {
                self.unsigned(
                    self.required(m, &fat, k, "a non-negative integer")?,
                    &format!("{fat}.{k}"),
                )
            };
            let resources =
                Resources::new(amount("vcpus")?, amount("memory_mb")?, amount("disk_gb")?);
            let mut oversubscription: Vec<Oversubscription> = Vec::new();
            if let Some(o) = m.get("oversubscription") {
                let oat = format!("{fat}.oversubscription");
                let list = self.list(o, &oat, "variants")?;
                for (j, x) in list.iter().enumerate() {
                    let vat = format!("{oat}[{j}]");
                    let vm = self.obj(x, &vat)?;
                    self.keys(
                        vm,
                        &vat,
                        &["percent", "max_vcpus", "max_memory_mb", "flavour"],
                    )?;
                    let percent = self.percent(
                        self.required(vm, &vat, "percent", "a percentage")?,
                        &format!("{vat}.percent"),
                    )?;
                    let max_vcpus = self.unsigned(
                        self.required(vm, &vat, "max_vcpus", "a vCPU ceiling")?,
                        &format!("{vat}.max_vcpus"),
                    )?;
                    let max_memory_mb = self.unsigned(
                        self.required(vm, &vat, "max_memory_mb", "a memory ceiling in MiB")?,
                        &format!("{vat}.max_memory_mb"),
                    )?;
                    if max_vcpus < resources.vcpus {
                        return Err(self.err(
                            &format!("{vat}.max_vcpus"),
                            format!(
                                "value {max_vcpus}: expected at least the reserved {} vCPUs",
                                resources.vcpus
                            ),
                        ));
                    }
                    if max_memory_mb < resources.memory_mb {
                        return Err(self.err(
                            &format!("{vat}.max_memory_mb"),
                            format!(
                                "value {max_memory_mb}: expected at least the reserved {} MiB",
                                resources.memory_mb
                            ),
                        ));
                    }
                    let variant_name = match vm.get("flavour") {
                        Some(n) => self.string(n, &format!("{vat}.flavour"))?.to_owned(),
                        None => format!("{name}.burst{percent}"),
                    };
                    if oversubscription.iter().any(|x| x.percent == percent) {
                        return Err(self.err(
                            &format!("{vat}.percent"),
                            format!(
                                "value {percent} listed twice: expected one variant per percentage"
                            ),
                        ));
                    }
                    oversubscription.push(Oversubscription {
                        percent,
                        max_vcpus,
                        max_memory_mb,
                        flavour: variant_name,
                    });
                }
            }
            out.push(Flavour {
                name,
                resources,
                oversubscription,
            });
        }
        Ok(out)
    }

    fn region(&self, v: &Value, at: &str) -> Result<Region> {
        let m = self.obj(v, at)?;
        self.keys(
            m,
            at,
            &[
                "id", "owner", "location", "tenant", "capacity", "flavours", "hosts", "cost", "vim",
            ],
        )?;
        // The fields every region has are read on their happy path first, the path of the
        // field (`regions[7].location.lat`) formatted only for an error: at 100,000 regions
        // the formatting was a tenth of the read.
        let text = |k: &str, what: &str| -> Result<String> {
            let v = self.required(m, at, k, what)?;
            match v.as_str() {
                Some(s) => Ok(s.to_owned()),
                None => self.string(v, &format!("{at}.{k}")).map(str::to_owned),
            }
        };
        let id = text("id", "a region id")?;
        let owner = text("owner", "an owner name")?;
        let lat_at = || format!("{at}.location");
        let lv = self.required(m, at, "location", "{lat, lon}")?;
        let lm = match lv.as_object() {
            Some(lm) => lm,
            None => self.obj(lv, &lat_at())?,
        };
        if lm.len() != 2 || !lm.contains_key("lat") || !lm.contains_key("lon") {
            self.keys(lm, &lat_at(), &["lat", "lon"])?;
        }
        let coord = |k: &str, max: f64| -> Result<f64> {
            if let Some(x) = lm.get(k).and_then(Value::as_f64) {
                if x.is_finite() && x.abs() <= max {
                    return Ok(x);
                }
            }
            let kat = format!("{}.{k}", lat_at());
            let x = self.number(
                lm.get(k)
                    .ok_or_else(|| self.err(&kat, "missing: expected degrees"))?,
                &kat,
            )?;
            if x.abs() > max {
                return Err(self.err(
                    &kat,
                    format!("value {x}: expected degrees from -{max} to {max}"),
                ));
            }
            Ok(x)
        };
        let location = GeoPoint::new(coord("lat", 90.0)?, coord("lon", 180.0)?);
        let tenant = m
            .get("tenant")
            .map(|t| self.string(t, &format!("{at}.tenant")).map(str::to_owned))
            .transpose()?;
        let cat = format!("{at}.capacity");
        let expect = "expected public, {declared: {vcpus, memory_mb, disk_gb}}, {zones: all | [names]} or {reservation: pool}";
        let cv = self.required(m, at, "capacity", expect)?;
        let capacity = match cv {
            Value::String(s) if s == "public" => CapacitySource::Public,
            Value::Object(cm) if cm.len() == 1 => {
                if let Some(d) = cm.get("declared") {
                    let dat = format!("{cat}.declared");
                    let dm = self.obj(d, &dat)?;
                    self.keys(dm, &dat, &["vcpus", "memory_mb", "disk_gb"])?;
                    let amount = |k: &str| -> Result<u64> {
                        let v = self.required(dm, &dat, k, "a non-negative integer")?;
                        match v.as_u64() {
                            Some(n) => Ok(n),
                            None => self.unsigned(v, &format!("{dat}.{k}")),
                        }
                    };
                    CapacitySource::Declared(Resources::new(
                        amount("vcpus")?,
                        amount("memory_mb")?,
                        amount("disk_gb")?,
                    ))
                } else if let Some(z) = cm.get("zones") {
                    match z {
                        Value::String(s) if s == "all" => CapacitySource::Zones(None),
                        _ => CapacitySource::Zones(Some(
                            self.string_set(z, &format!("{cat}.zones"))?,
                        )),
                    }
                } else if let Some(p) = cm.get("reservation") {
                    CapacitySource::Reservation(
                        self.string(p, &format!("{cat}.reservation"))?.to_owned(),
                    )
                } else {
                    return Err(self.err(&cat, format!("value {}: {expect}", show(cv))));
                }
            }
            _ => return Err(self.err(&cat, format!("value {}: {expect}", show(cv)))),
        };
        let flavours = self.flavours(m.get("flavours"), &format!("{at}.flavours"))?;
        let hosts = m
            .get("hosts")
            .map(|h| self.unsigned(h, &format!("{at}.hosts")))
            .transpose()?;
        let cost = m
            .get("cost")
            .map(|c| self.non_negative(c, &format!("{at}.cost")))
            .transpose()?;
        let vim = match m.get("vim") {
            None => None,
            Some(v) => {
                let vat = format!("{at}.vim");
                let text = self.string(v, &vat)?;
                Some(VimRef::parse(text).ok_or_else(|| {
                    self.err(
                        &vat,
                        format!(
                            "value {}: expected simulated, openstack or openstack:<clouds.yaml entry>",
                            show(v)
                        ),
                    )
                })?)
            }
        };
        Ok(Region {
            id,
            owner,
            location,
            tenant,
            capacity,
            flavours,
            hosts,
            cost,
            vim,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    const FILE: &str = "\
owners:
  - {name: os, cloud_type: openstack, supports: [HA, Guaranteed QoS], cost: {fixed: 10}}
regions:
  - {id: R1, owner: os, location: {lat: 0, lon: 0}, capacity: public}
";

    /// The streamed read gives what the whole-document read gives, in YAML and in JSON, and
    /// declines (so that the whole-document read names the error) what it does not take.
    #[test]
    fn the_streamed_read_is_the_whole_document_read() {
        let example = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/intent/candidates.yaml"
        ))
        .unwrap();
        let mut many = FILE.to_owned();
        for i in 0..300 {
            many.push_str(&format!(
                "  - {{id: R{}, owner: os, location: {{lat: {}, lon: -{}.5}}, hosts: {}, \
                 capacity: {{declared: {{vcpus: {i}, memory_mb: 1, disk_gb: 2}}}}}}\n",
                i + 2,
                i % 90,
                i % 180,
                i % 7
            ));
        }
        let p = Parser { file: "c" };
        for text in [FILE.to_owned(), example, many] {
            let whole = p.candidates(&parse_text("c", &text).unwrap()).unwrap();
            assert_eq!(p.streamed(&text).as_ref(), Some(&whole));
            let json =
                serde_json::to_string(&serde_yaml::from_str::<Value>(&text).unwrap()).unwrap();
            assert_eq!(p.streamed(&json).as_ref(), Some(&whole));
        }
        for bad in [
            FILE.replace("lat: 0", "lat: 95"),
            FILE.replace("owner: os,", "owner: nobody,"),
            FILE.replace("capacity: public", "capacity: public, capacity: public"),
            format!("{FILE}regions: []\n"),
            FILE.replace("regions:", "regionz:"),
            "[1, 2]".to_owned(),
        ] {
            assert_eq!(p.streamed(&bad), None, "{bad}");
            assert!(CandidateFile::from_text("c", &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_and_normalises_cloud_types() {
        let c = CandidateFile::from_text("c.yaml", FILE).unwrap();
        assert_eq!(c.owners[0].cloud_type, CloudType::OpenStack);
        assert_eq!(c.regions[0].capacity, CapacitySource::Public);
    }

    #[test]
    fn errors_name_file_field_value_and_expectation() {
        let bad = FILE.replace(
            "capacity: public",
            "capacity: {declared: {vcpus: -4, memory_mb: 1, disk_gb: 1}}",
        );
        let e = CandidateFile::from_text("c.yaml", &bad).unwrap_err();
        let s = e.to_string();
        assert!(
            s.starts_with("c.yaml: regions[0].capacity.declared.vcpus: value -4"),
            "{s}"
        );
        assert!(s.contains("expected a non-negative integer"), "{s}");
        let bad = FILE.replace("owner: os,", "owner: nobody,");
        let e = CandidateFile::from_text("c.yaml", &bad).unwrap_err();
        assert!(
            e.to_string()
                .contains("regions[0].owner: value \"nobody\": expected one of the owners (os)"),
            "{e}"
        );
        let bad = FILE.replace("Guaranteed QoS", "Turbo");
        let e = CandidateFile::from_text("c.yaml", &bad).unwrap_err();
        assert!(
            e.to_string()
                .contains("owners[0].supports[1]: value \"Turbo\""),
            "{e}"
        );
    }

    #[test]
    fn haversine_one_degree_of_latitude() {
        let d = GeoPoint::new(0.0, 0.0).distance_km(&GeoPoint::new(1.0, 0.0));
        assert!((d - 111.194_926_644_558_73).abs() < 1e-6, "{d}");
    }

    #[test]
    fn coordinates_out_of_range_are_refused() {
        assert!(GeoPoint::new(90.0, -180.0).check("b", "customer").is_ok());
        for (p, part) in [
            (
                GeoPoint::new(95.0, 0.0),
                "customer.lat: value 95: expected degrees from -90 to 90",
            ),
            (
                GeoPoint::new(0.0, 500.0),
                "customer.lon: value 500: expected degrees from -180",
            ),
            (GeoPoint::new(1e308, 0.0), "customer.lat: value 1000000"),
            (GeoPoint::new(0.0, f64::NAN), "customer.lon: value NaN"),
        ] {
            let e = p.check("request body", "customer").unwrap_err().to_string();
            assert!(e.contains(part) && e.starts_with("request body"), "{e}");
        }
    }
}
