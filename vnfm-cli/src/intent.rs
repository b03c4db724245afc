//! Intent-based cloud selection as the CLI wires it (`vnfm select`, the `--intent` of `vnfm
//! instantiate`, and the later operations of an instance created with it): the policy, the
//! candidate file and the free capacity of the regions (zone catalogues, the Promise ledger)
//! go to the core, which chooses the region and realises the package
//! ([`vnfm_core::intent::deploy`]).

use std::path::Path;

use vnfm_core::driver::Clock;
use vnfm_core::intent::candidates::{CandidateFile, Capacities, CapacitySource, GeoPoint, VimRef};
use vnfm_core::intent::deploy::{self, DeployError, RealisedPackage, RegionChoice};
use vnfm_core::intent::policy::Policy;
use vnfm_core::intent::realise::{Change, RealiseError};
use vnfm_core::package::VnfPackage;

use crate::app::open_state;
use crate::config::{Config, VimKind};
use crate::error::CliError;
use crate::inputs::default_flavour;
use crate::output::Output;
use crate::state_store::Documents;

/// `--top N` as a display limit: 0 is every entry.
pub(crate) fn top_limit(top: usize) -> Option<usize> {
    (top > 0).then_some(top)
}

/// Parses `LAT,LON` in degrees.
///
/// # Errors
/// [`CliError::Usage`] naming the flag and the value.
pub fn parse_customer(flag: &str, v: Option<&str>) -> Result<Option<GeoPoint>, CliError> {
    let Some(v) = v else { return Ok(None) };
    let bad = || {
        CliError::Usage(format!(
            "{flag} {v:?}: expected LAT,LON in degrees (latitude -90..90, longitude -180..180), \
             e.g. 40.71,-74.01"
        ))
    };
    let (a, b) = v.split_once(',').ok_or_else(bad)?;
    let lat: f64 = a.trim().parse().map_err(|_| bad())?;
    let lon: f64 = b.trim().parse().map_err(|_| bad())?;
    if !lat.is_finite() || !lon.is_finite() || lat.abs() > 90.0 || lon.abs() > 180.0 {
        return Err(bad());
    }
    Ok(Some(GeoPoint::new(lat, lon)))
}

/// The configuration that deploys through `vim` (the configured VIM for `None`).
pub(crate) fn config_for(config: &Config, vim: Option<&VimRef>) -> Config {
    let mut c = config.clone();
    match vim {
        None => {}
        Some(VimRef::Simulated) => c.vim.kind = VimKind::Sim,
        Some(VimRef::OpenStack { cloud }) => {
            c.vim.kind = VimKind::Openstack;
            if cloud.is_some() {
                c.vim.os_cloud.clone_from(cloud);
            }
        }
    }
    c
}

/// The free capacity the core needs: the zone catalogue of every region whose capacity source
/// is `zones`, listed once per VIM (the region's, the configured one when it names none), and
/// the state file's Promise ledger for regions backed by a pool.
pub(crate) async fn capacities(
    config: &Config,
    store: &dyn Documents,
    cloud_path: Option<&Path>,
    candidates: &CandidateFile,
    clock: &dyn Clock,
) -> Result<Capacities, CliError> {
    let mut caps = Capacities::new();
    for (vim, regions) in candidates.zone_catalogue_regions() {
        let c = config_for(config, vim);
        crate::vim::check(&c)?;
        let cloud = match c.vim.kind {
            VimKind::Sim => cloud_path,
            VimKind::Openstack => None,
        };
        let zones = crate::vim::Vim::open(store, cloud, &c)
            .await?
            .list_zones()
            .await?;
        for r in regions {
            caps = caps.with_zone_catalogue(r.id.clone(), &zones);
        }
    }
    if candidates
        .regions
        .iter()
        .any(|r| matches!(r.capacity, CapacitySource::Reservation(_)))
    {
        let book = crate::promise::load_or_new(store, config).await?;
        let from = book.ledger.now().unwrap_or_else(|| clock.now());
        caps = caps.with_ledger(candidates, &book.ledger, from);
    }
    Ok(caps)
}

/// The error of a choice without a region: exit 3.
pub(crate) fn no_region(choice: &RegionChoice) -> CliError {
    CliError::Intent {
        detail: format!(
            "no candidate region serves every VDU ({}): see the reasons above",
            choice
                .selections
                .iter()
                .map(|s| s.demand.vnfc.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        infeasible: true,
    }
}

/// What `--intent` decided for an instantiate: the configuration of the chosen region's VIM
/// and the realised package.
pub(crate) struct IntentPlan {
    /// The configuration that deploys through the chosen region's VIM.
    pub config: Config,
    /// The realised package.
    pub realised: RealisedPackage,
}

/// The `--intent` of `vnfm instantiate`: selects the region, realises the intent in `pkg`,
/// and prints both (progress lines, on stderr).
pub(crate) async fn plan(
    config: &Config,
    args: &crate::cli::InstantiateArgs,
    pkg: &VnfPackage,
    out: Output,
) -> Result<Option<IntentPlan>, CliError> {
    let (Some(policy), Some(cands)) = (&args.intent, &args.candidates) else {
        return Ok(None);
    };
    let policy = Policy::load(policy)?;
    let candidates = CandidateFile::load(cands)?;
    let customer = parse_customer("--customer", args.customer.as_deref())?;
    let flavour = default_flavour(pkg, args.flavour.as_deref())?;
    let demands = deploy::package_demands(pkg, &flavour, &policy, customer)?;
    let store = open_state(config).await?;
    let caps = capacities(
        config,
        &store,
        args.cloud.as_deref(),
        &candidates,
        crate::app::clock().as_ref(),
    )
    .await?;
    drop(store);
    let choice = deploy::choose_region(&policy, &candidates, &demands, &caps)?;
    out.progress(
        &choice
            .display_limited(Some(crate::cli::DEFAULT_TOP))
            .to_string(),
    );
    let Some(chosen) = choice.chosen.clone() else {
        return Err(no_region(&choice));
    };
    let region = candidates
        .regions
        .iter()
        .find(|r| r.id == chosen.region && r.owner == chosen.owner)
        .ok_or_else(|| CliError::Usage(format!("region {chosen} is not in the candidates")))?;
    let vim = region.vim.as_ref().ok_or_else(|| CliError::Intent {
        detail: format!(
            "{}: region {chosen} was chosen but has no `vim:` (simulated, openstack or \
             openstack:<cloud>): vnfm can select it but not deploy to it",
            cands.display()
        ),
        infeasible: false,
    })?;
    let request =
        deploy::realise_request(pkg, &flavour, &choice, &candidates, &caps, args.best_effort)?;
    let realised =
        deploy::realise_package(pkg, &flavour, chosen.clone(), request).map_err(|e| match e {
            DeployError::Package(e) => CliError::Core(e),
            DeployError::Realise(e) => CliError::Intent {
                infeasible: matches!(e, RealiseError::TooFewHosts { .. }),
                detail: format!("region {chosen}: {e}"),
            },
            other => CliError::Usage(other.to_string()),
        })?;
    out.note(&format!(
        "intent: region {chosen} chosen (VIM {vim}); realised: {}",
        describe_changes(&realised.changes)
    ));
    if !realised.diff.is_empty() {
        out.progress(&realised.diff);
    }
    Ok(Some(IntentPlan {
        config: config_for(config, Some(vim)),
        realised,
    }))
}

fn describe_changes(changes: &[Change]) -> String {
    if changes.is_empty() {
        return "nothing to change".into();
    }
    changes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The package of an instance as its intent realised it (the instance's
/// `metadata.vnfmIntent`), for its later operations; `pkg` unchanged without one.
///
/// # Errors
/// An unreadable record, or a package that can no longer be realised the same way (exit 2).
pub(crate) fn reapply(
    inst: &vnfm_core::lcm::VnfInstance,
    pkg: VnfPackage,
) -> Result<VnfPackage, CliError> {
    let Some(v) = inst
        .metadata
        .as_ref()
        .and_then(|m| m.get(deploy::IntentRecord::METADATA_KEY))
    else {
        return Ok(pkg);
    };
    let record: deploy::IntentRecord = serde_json::from_value(v.clone()).map_err(|e| {
        CliError::Usage(format!(
            "instance {}: metadata.{} is not an intent record: {e}",
            inst.id,
            deploy::IntentRecord::METADATA_KEY
        ))
    })?;
    deploy::reapply(&pkg, &record).map_err(|e| {
        CliError::Usage(format!(
            "instance {}: the package can no longer be realised as its intent was: {e}",
            inst.id
        ))
    })
}

/// The metadata of an instance created with `--intent`: its [`deploy::IntentRecord`].
pub(crate) fn record_metadata(
    plan: &IntentPlan,
) -> Result<serde_json::Map<String, serde_json::Value>, CliError> {
    let v = serde_json::to_value(&plan.realised.record)
        .map_err(|e| CliError::Output(std::io::Error::other(e.to_string())))?;
    let mut m = serde_json::Map::new();
    m.insert(deploy::IntentRecord::METADATA_KEY.into(), v);
    Ok(m)
}
