//! `vnfm select` and the `--intent` of `vnfm instantiate`: load the policy and the candidate
//! file, hand the core the free capacity of the regions' zone catalogues, print what the
//! core decided ([`vnfm_core::intent::deploy`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use vnfm_core::intent::candidates::{CandidateFile, Capacities, CapacitySource, GeoPoint, VimRef};
use vnfm_core::intent::deploy::{self, DeployError, RealisedPackage, RegionChoice};
use vnfm_core::intent::policy::Policy;
use vnfm_core::intent::realise::{Change, RealiseError};
use vnfm_core::intent::select::{pareto, Ranked};
use vnfm_core::package::VnfPackage;

use super::lcm::{default_flavour, load_package, open_state, runtime};
use crate::cli::SelectArgs;
use crate::config::{Config, VimKind};
use crate::error::CliError;
use crate::output::Output;
use crate::store::SqliteStore;

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
fn config_for(config: &Config, vim: Option<&VimRef>) -> Config {
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
async fn capacities(
    config: &Config,
    store: &SqliteStore,
    cloud_path: Option<&Path>,
    candidates: &CandidateFile,
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
        let from = book.ledger.now().unwrap_or_else(chrono::Utc::now);
        caps = caps.with_ledger(candidates, &book.ledger, from);
    }
    Ok(caps)
}

#[derive(Serialize)]
struct SelectReport<'a> {
    #[serde(flatten)]
    choice: &'a RegionChoice,
    #[serde(skip_serializing_if = "Option::is_none")]
    pareto: Option<BTreeMap<String, Vec<Ranked>>>,
}

/// `vnfm select`.
///
/// # Errors
/// A bad policy, candidate file, package or flag (exit 2); no candidate serves every VDU
/// (exit 3, after the ranking and the reasons are printed).
pub fn select(config: &Config, args: &SelectArgs, out: Output) -> Result<(), CliError> {
    let (Some(policy), Some(candidates)) = (&args.policy, &args.candidates) else {
        return match &args.links {
            Some(links) => select_links(links, out),
            None => Err(CliError::Usage(
                "vnfm select needs --policy and --candidates, or --links".into(),
            )),
        };
    };
    let policy = Policy::load(policy)?;
    let candidates = CandidateFile::load(candidates)?;
    let customer = parse_customer("--customer", args.customer.as_deref())?;
    let pkg = load_package(args.package.as_deref(), config, None)?;
    let flavour = default_flavour(&pkg, args.flavour.as_deref())?;
    let demands = deploy::package_demands(&pkg, &flavour, &policy, customer)?;
    let choice = runtime()?.block_on(async {
        let store = open_state(config)?;
        let caps = capacities(config, &store, args.cloud.as_deref(), &candidates).await?;
        Ok::<_, CliError>(deploy::choose_region(
            &policy,
            &candidates,
            &demands,
            &caps,
        )?)
    })?;
    let fronts = args.pareto.then(|| {
        choice
            .selections
            .iter()
            .map(|s| (s.demand.vnfc.clone(), pareto(&s.ranking)))
            .collect::<BTreeMap<_, _>>()
    });
    let mut human = choice.to_string();
    if let Some(f) = &fronts {
        for (vnfc, front) in f {
            human.push_str(&format!(
                "\nnon-dominated over (cost, distance) for {vnfc}:"
            ));
            for r in front {
                human.push_str(&format!("\n  {r}"));
            }
        }
    }
    out.data(
        &human,
        &SelectReport {
            choice: &choice,
            pareto: fronts,
        },
    )?;
    match &choice.chosen {
        Some(_) => Ok(()),
        None => Err(no_region(&choice)),
    }
}

fn no_region(choice: &RegionChoice) -> CliError {
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
    let store = open_state(config)?;
    let caps = capacities(config, &store, args.cloud.as_deref(), &candidates).await?;
    drop(store);
    let choice = deploy::choose_region(&policy, &candidates, &demands, &caps)?;
    out.progress(&choice.to_string());
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

#[derive(Serialize)]
struct LinksReport {
    /// PLA's answer: `[{vimAccountId, member-vnf-index}]`, or `null` when unsatisfiable.
    placement: Option<serde_json::Value>,
    /// The minimum total price.
    cost: Option<String>,
    /// Why no placement exists.
    unsatisfiable: Option<String>,
    /// Search nodes explored.
    nodes: u64,
}

/// `vnfm select --links FILE`: the exact linked placement of PLA's data.
fn select_links(path: &Path, out: Output) -> Result<(), CliError> {
    use vnfm_core::intent::links::Problem;
    let text = std::fs::read_to_string(path).map_err(|e| CliError::Config {
        file: path.to_path_buf(),
        message: "cannot read the linked-placement data (--links)".into(),
        source: Some(e),
    })?;
    let problem = Problem::from_pla_str(&text)
        .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    let sol = problem.solve();
    let req = problem.request();
    let (report, human) = match &sol.outcome {
        Ok(p) => {
            let mut h = format!("minimum total price {}:\n", p.cost);
            for (vnf, &vim) in req.vnfs.iter().zip(&p.vims) {
                let name = req.vims.get(vim).map(String::as_str).unwrap_or_default();
                h.push_str(&format!("  {} -> {name}\n", vnf.id));
            }
            h.push_str(&format!("({} search nodes)\n", sol.stats.nodes));
            (
                LinksReport {
                    placement: Some(problem.to_pla_placement(p)),
                    cost: Some(p.cost.to_string()),
                    unsatisfiable: None,
                    nodes: sol.stats.nodes,
                },
                h,
            )
        }
        Err(why) => (
            LinksReport {
                placement: None,
                cost: None,
                unsatisfiable: Some(why.to_string()),
                nodes: sol.stats.nodes,
            },
            format!("unsatisfiable: {why}\n"),
        ),
    };
    out.data(&human, &report)?;
    match &sol.outcome {
        Ok(_) => Ok(()),
        Err(why) => Err(CliError::Intent {
            detail: format!(
                "{}: no placement meets the links' bounds: {why}",
                path.display()
            ),
            infeasible: true,
        }),
    }
}
