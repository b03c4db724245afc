//! `vnfm select`: load the policy and the candidate file, hand the core the free capacity of
//! the regions' zone catalogues ([`crate::intent`]), print what the core decided
//! ([`vnfm_core::intent::deploy`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use vnfm_core::intent::candidates::CandidateFile;
use vnfm_core::intent::deploy::{self, RegionChoice};
use vnfm_core::intent::policy::Policy;
use vnfm_core::intent::select::{pareto, Ranked};

use crate::app::{open_state, runtime};
use crate::cli::SelectArgs;
use crate::config::Config;
use crate::error::CliError;
use crate::inputs::{default_flavour, load_package};
use crate::intent::{capacities, no_region, parse_customer};
use crate::output::Output;

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
        let caps = capacities(
            config,
            &store,
            args.cloud.as_deref(),
            &candidates,
            crate::app::clock().as_ref(),
        )
        .await?;
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
    let text = vnfm_core::input::read_text(
        path,
        vnfm_core::input::MAX_INPUT_BYTES,
        "linked-placement data (--links)",
    )
    .map_err(|e| match e {
        vnfm_core::Error::Io { source, .. } => CliError::Config {
            file: path.to_path_buf(),
            message: "cannot read the linked-placement data (--links)".into(),
            source: Some(source),
        },
        e => CliError::Core(e),
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
