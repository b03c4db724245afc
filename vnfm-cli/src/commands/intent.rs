//! `vnfm select`: load the policy and the candidate file, hand the core the free capacity of
//! the regions' zone catalogues ([`crate::intent`]), print what the core decided
//! ([`vnfm_core::intent::deploy`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use vnfm_core::driver::Clock;
use vnfm_core::intent::candidates::CandidateFile;
use vnfm_core::intent::deploy::{self, RegionChoice};
use vnfm_core::intent::policy::Policy;
use vnfm_core::intent::select::{pareto, Head, Ranked};
use vnfm_core::lifecycle::FailureKind;

use crate::app::{open_state, runtime};
use crate::cli::SelectArgs;
use crate::config::Config;
use crate::error::CliError;
use crate::inputs::{default_flavour, load_package};
use crate::intent::{capacities, no_region, parse_customer, top_limit};
use crate::output::Output;
use crate::report::{reports, PlacementOutcome, Report, Version};

/// What `vnfm select --policy --candidates --json` prints: the core's choice (`selections`,
/// `ranking`, `dropped`, `chosen`), and the fronts with `--pareto`.
#[derive(Serialize)]
pub struct SelectReport<'a> {
    /// The core's choice.
    #[serde(flatten)]
    pub choice: &'a RegionChoice,
    /// With `--pareto`: per VNFC, the candidates no other beats on both cost and distance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pareto: Option<BTreeMap<String, Vec<Ranked>>>,
    /// The format version.
    pub version: Version,
}

/// `vnfm select`: the region chosen, or a valid "no" ([`PlacementOutcome::Infeasible`], exit
/// 3) when no candidate serves every VDU or linked VNFs cannot meet their bounds, after the
/// ranking and the reasons are printed.
///
/// # Errors
/// A bad policy, candidate file, package or flag (exit 2).
pub fn select(
    config: &Config,
    args: &SelectArgs,
    out: Output,
) -> Result<PlacementOutcome, CliError> {
    let (Some(policy), Some(candidates)) = (&args.policy, &args.candidates) else {
        return match &args.links {
            Some(links) => select_links(config, args, links, out, crate::app::clock().as_ref()),
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
        let store = open_state(config).await?;
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
    let limit = top_limit(args.top);
    let mut human = choice.display_limited(limit).to_string();
    if let Some(f) = &fronts {
        for (vnfc, front) in f {
            human.push_str(&format!(
                "\nnon-dominated over (cost, distance) for {vnfc}:"
            ));
            for line in Head::new(front, limit).to_string().lines() {
                human.push('\n');
                human.push_str(line);
            }
        }
    }
    out.data(
        &human,
        &SelectReport {
            choice: &choice,
            pareto: fronts,
            version: Version,
        },
    )?;
    Ok(match &choice.chosen {
        Some(_) => PlacementOutcome::Placed,
        None => PlacementOutcome::Infeasible {
            kind: FailureKind::Infeasible,
            message: no_region(&choice).to_string(),
        },
    })
}

/// What `vnfm select --links --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LinksReport {
    /// PLA's answer: `[{vimAccountId, member-vnf-index}]`, or `null` when unsatisfiable (or
    /// nothing was found within the limits).
    pub placement: Option<serde_json::Value>,
    /// The total price of the placement: the minimum when `optimal`.
    pub cost: Option<String>,
    /// Whether the answer is proven (optimal placement, or no placement exists).
    pub optimal: bool,
    /// A proven lower bound on every placement's cost.
    pub lower_bound: Option<String>,
    /// `100 * (cost - lowerBound) / cost`, in percent (0 when optimal).
    pub gap: Option<f64>,
    /// Why no placement exists (or was found within the limits).
    pub unsatisfiable: Option<String>,
    /// Search nodes explored.
    pub nodes: u64,
    /// The format version.
    pub version: Version,
}

reports!(SelectReport<'_>, LinksReport);

/// The default of `--time-limit` and `[placement] links_time_limit`, in seconds.
const DEFAULT_LINKS_TIME_LIMIT: f64 = 10.0;

/// `--time-limit` / `links_time_limit`: a positive number of seconds, at most a day.
fn links_time_limit(config: &Config, args: &SelectArgs) -> Result<std::time::Duration, CliError> {
    let (value, name) = match (args.time_limit, config.placement.links_time_limit) {
        (Some(v), _) => (v, "--time-limit"),
        (None, Some(v)) => (v, "[placement] links_time_limit"),
        (None, None) => (DEFAULT_LINKS_TIME_LIMIT, "the default time limit"),
    };
    if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
        return Err(CliError::Usage(format!(
            "{name} is {value}; expected a number of seconds above 0 and at most 86400"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(value))
}

/// `vnfm select --links FILE`: the exact linked placement of PLA's data, within a time and a
/// node limit (then the best placement found, its lower bound and gap).
fn select_links(
    config: &Config,
    args: &SelectArgs,
    path: &Path,
    out: Output,
    clock: &dyn Clock,
) -> Result<PlacementOutcome, CliError> {
    use std::cell::Cell;

    use chrono::{DateTime, Utc};
    use vnfm_core::intent::links::{Problem, Progress, SolveOptions, DEFAULT_NODE_LIMIT};
    let time_limit = links_time_limit(config, args)?;
    let node_limit = args
        .node_limit
        .or(config.placement.links_node_limit)
        .unwrap_or(DEFAULT_NODE_LIMIT);
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
    let start = clock.now();
    let last_line = Cell::new(start);
    let price = |p: Option<vnfm_core::intent::links::Price>| {
        p.map_or_else(|| "none yet".to_owned(), |p| p.to_string())
    };
    // From `earlier` to `now` on the clock (zero if it went back).
    let since =
        |earlier: DateTime<Utc>, now: DateTime<Utc>| (now - earlier).to_std().unwrap_or_default();
    // The clock is the CLI's: the core asks this every few nodes. A progress line every second
    // once the search has taken a second (on a terminal, without --json or --quiet).
    let should_stop = |p: &Progress| {
        let now = clock.now();
        if since(last_line.get(), now).as_secs() >= 1 {
            last_line.set(now);
            out.progress(&format!(
                "searching: {} nodes, best {}, lower bound {}, {:.0} s",
                p.nodes,
                price(p.best),
                price(p.lower_bound),
                since(start, now).as_secs_f64()
            ));
        }
        since(start, now) >= time_limit
    };
    let sol = problem.solve_with(&SolveOptions {
        node_limit,
        // The time limit bounds the work (the library's default work limit is for callers
        // without a clock).
        work_limit: u64::MAX,
        should_stop: Some(&should_stop),
    });
    let req = problem.request();
    let gap = sol.gap_percent();
    let (report, human) = match &sol.outcome {
        Ok(p) => {
            let mut h = if sol.optimal {
                format!("minimum total price {} (proven optimal):\n", p.cost)
            } else if sol.lower_bound == Some(p.cost) {
                format!(
                    "minimum total price {} (cost proven minimal; the search stopped before \
                     settling which placement of that cost comes first):\n",
                    p.cost
                )
            } else {
                format!(
                    "best found, not proven optimal: total price {}, lower bound {}, gap {:.2} %:\n",
                    p.cost,
                    price(sol.lower_bound),
                    gap.unwrap_or(100.0)
                )
            };
            for (vnf, &vim) in req.vnfs.iter().zip(&p.vims) {
                let name = req.vims.get(vim).map(String::as_str).unwrap_or_default();
                h.push_str(&format!("  {} -> {name}\n", vnf.id));
            }
            h.push_str(&format!("({} search nodes)\n", sol.stats.nodes));
            (
                LinksReport {
                    placement: Some(problem.to_pla_placement(p)),
                    cost: Some(p.cost.to_string()),
                    optimal: sol.optimal,
                    lower_bound: sol.lower_bound.map(|b| b.to_string()),
                    gap,
                    unsatisfiable: None,
                    nodes: sol.stats.nodes,
                    version: Version,
                },
                h,
            )
        }
        Err(why) => (
            LinksReport {
                placement: None,
                cost: None,
                optimal: sol.optimal,
                lower_bound: None,
                gap: None,
                unsatisfiable: Some(why.to_string()),
                nodes: sol.stats.nodes,
                version: Version,
            },
            if sol.optimal {
                format!("unsatisfiable: {why}\n")
            } else {
                format!("{why}\n")
            },
        ),
    };
    out.data(&human, &report)?;
    let infeasible = |message: String| PlacementOutcome::Infeasible {
        kind: FailureKind::Infeasible,
        message,
    };
    Ok(match &sol.outcome {
        Ok(_) => PlacementOutcome::Placed,
        Err(why) if sol.optimal => infeasible(format!(
            "{}: no placement meets the links' bounds: {why}",
            path.display()
        )),
        Err(why) => infeasible(format!(
            "{}: {why} (raise --time-limit or --node-limit)",
            path.display()
        )),
    })
}
