//! `vnfm cluster label | verify | reconcile` and `vnfm cloud migrate`: wiring only; the core's
//! `cluster` module decides.

use std::fmt::Write as _;

use vnfm_core::cluster::{self, Labelled, Reconciled, VerifyReport};
use vnfm_core::driver::Store;
use vnfm_core::id::{ServerId, VnfInstanceId};

use crate::app::{check_vim, label_config, no_cluster, open_cluster, open_state, runtime};
use crate::cli::{ClusterArgs, ClusterCommand};
use crate::config::Config;
use crate::display::escape;
use crate::error::CliError;
use crate::output::Output;
use crate::report::{ClusterVerifyReport, LabelReport, MigrateReport, ReconcileReport, Version};
use crate::vim::{save_sim, Vim};

/// `vnfm cluster ...`.
///
/// # Errors
/// An unknown instance, no cluster, nodes that match no server (2); backend failures (5);
/// a violation found by `verify` (6, after the report is printed).
pub fn run(config: &Config, cmd: &ClusterCommand, out: Output) -> Result<(), CliError> {
    runtime()?.block_on(async {
        check_vim(config)?;
        let cfg = label_config(config)?;
        let store = open_state(config).await?;
        let vim = open_cluster(Vim::open(&store, None, config).await?, config).await?;
        let cluster = vim.cluster().ok_or_else(no_cluster)?;
        let compute = vim.compute();
        let args = match cmd {
            ClusterCommand::Label(a) | ClusterCommand::Verify(a) => a,
            ClusterCommand::Reconcile { args, .. } => args,
        };
        let id = VnfInstanceId::from(args.instance.as_str());
        let instance = store.instance(&id).await.map_err(|e| {
            if e.is_not_found() {
                CliError::Usage(format!(
                    "no VNF instance {} in {}",
                    escape(&args.instance),
                    config.state_path().display()
                ))
            } else {
                CliError::Driver(e)
            }
        })?;
        let namespace = namespace(config, args);
        let result = match cmd {
            ClusterCommand::Label(_) => {
                let l = cluster::label_workers(cluster.as_ref(), compute.as_ref(), &instance, &cfg)
                    .await?;
                let report = LabelReport {
                    labelled: &l,
                    version: Version,
                };
                out.data(&labelled_human(&l), &report)
            }
            ClusterCommand::Verify(_) => {
                let (_, report) = cluster::verify_cluster(
                    cluster.as_ref(),
                    compute.as_ref(),
                    &instance,
                    &namespace,
                    &cfg,
                )
                .await?;
                let json = ClusterVerifyReport {
                    report: &report,
                    version: Version,
                };
                out.data(&report_human(&report), &json)?;
                if report.violated() {
                    return Err(CliError::Violation(violation_summary(&report)));
                }
                Ok(())
            }
            ClusterCommand::Reconcile { evict, .. } => {
                let r = cluster::reconcile(
                    cluster.as_ref(),
                    compute.as_ref(),
                    &instance,
                    &namespace,
                    &cfg,
                    *evict,
                )
                .await?;
                let report = ReconcileReport {
                    reconciled: &r,
                    version: Version,
                };
                out.data(&reconciled_human(&r), &report)
            }
        };
        // the simulated cluster keeps its labels and pods in the state file
        save_sim(&store, &vim.sim).await?;
        result
    })
}

fn namespace(config: &Config, args: &ClusterArgs) -> String {
    args.namespace
        .clone()
        .or_else(|| config.cluster.namespace.clone())
        .unwrap_or_else(|| "default".to_owned())
}

fn labelled_human(l: &Labelled) -> String {
    let mut s = format!(
        "label {} from {} ({} patched, {} unchanged)\n",
        escape(&l.plan.key),
        l.plan.source,
        l.patched,
        l.plan.nodes.len().saturating_sub(l.plan.changed().count())
    );
    for n in &l.plan.nodes {
        let _ = writeln!(
            s,
            "  {:<16} {}={}  (server {} {}, matched by {}{})",
            escape(n.node.as_str()),
            escape(&l.plan.key),
            escape(&n.value),
            escape(&n.server_name),
            n.server,
            n.matched_by,
            match &n.previous {
                Some(p) if *p != n.value => format!(", was {}", escape(p)),
                None => ", new".to_owned(),
                _ => String::new(),
            }
        );
    }
    for r in &l.plan.removed {
        let _ = writeln!(
            s,
            "  {:<16} label removed (was {}; its server is gone)",
            escape(r.node.as_str()),
            escape(&r.previous)
        );
    }
    for u in &l.plan.unplaced {
        let _ = writeln!(
            s,
            "  {:<16} left as is: server {} is {} (on no host)",
            escape(u.node.as_str()),
            u.server,
            escape(&u.status)
        );
    }
    for w in &l.plan.warnings {
        let _ = writeln!(s, "warning: {}", escape(w));
    }
    s
}

pub(crate) fn report_human(r: &VerifyReport) -> String {
    let mut s = format!("pods per physical host (label {}):\n", escape(&r.key));
    for h in &r.hosts {
        let nodes: Vec<String> = h
            .nodes
            .iter()
            .map(|n| escape(n.as_str()).into_owned())
            .collect();
        let _ = writeln!(
            s,
            "  {:<24} nodes {:<24} pods {}",
            escape(&h.host),
            nodes.join(","),
            if h.pods.is_empty() {
                "-".to_owned()
            } else {
                h.pods
                    .iter()
                    .map(|p| escape(p))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        );
    }
    for g in &r.groups {
        let per: Vec<String> = g
            .per_host
            .iter()
            .map(|(h, n)| format!("{}:{n}", escape(h)))
            .collect();
        let _ = writeln!(
            s,
            "{} {:?} on {} ({}{}): {} of {} bound, skew {} [{}]{}",
            escape(&g.workload),
            g.kind,
            escape(&g.topology_key),
            if g.required { "required" } else { "preferred" },
            g.max_skew
                .map(|m| format!(", maxSkew {m}"))
                .unwrap_or_default(),
            g.bound,
            g.replicas,
            g.skew,
            per.join(" "),
            if g.violated { "  VIOLATED" } else { "" }
        );
        for p in &g.sharing {
            let _ = writeln!(
                s,
                "  {} and {} share host {}",
                escape(&p.pods[0]),
                escape(&p.pods[1]),
                escape(&p.host)
            );
        }
    }
    for p in &r.pending {
        let _ = writeln!(
            s,
            "pending {}: {} {}",
            escape(&p.pod),
            escape(p.reason.as_deref().unwrap_or("(not tried yet)")),
            escape(p.message.as_deref().unwrap_or(""))
        );
    }
    for l in &r.stale_labels {
        let _ = writeln!(
            s,
            "stale label: node {} says {} but its server runs on {}",
            escape(l.node.as_str()),
            escape(l.label.as_deref().unwrap_or("(none)")),
            escape(&l.host)
        );
    }
    for p in &r.on_unknown_nodes {
        let _ = writeln!(s, "pod {} is on a node of no known host", escape(p));
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {}", escape(w));
    }
    let _ = writeln!(
        s,
        "{}",
        if r.violated() {
            "VIOLATION"
        } else {
            "ok: every required group is spread over hardware"
        }
    );
    s
}

fn violation_summary(r: &VerifyReport) -> String {
    let pairs: usize = r
        .groups
        .iter()
        .filter(|g| g.violated)
        .map(|g| g.sharing.len())
        .sum();
    format!(
        "hardware spread violated: {pairs} pair(s) of pods share a host in required groups, \
         {} stale node label(s); `vnfm cluster reconcile --evict` fixes both",
        r.stale_labels.len()
    )
}

pub(crate) fn reconciled_human(r: &Reconciled) -> String {
    let mut s = labelled_human(&r.labelled);
    let pairs: Vec<String> = r
        .after
        .groups
        .iter()
        .flat_map(|g| &g.sharing)
        .map(|p| {
            format!(
                "{} and {} share host {}",
                escape(&p.pods[0]),
                escape(&p.pods[1]),
                escape(&p.host)
            )
        })
        .collect();
    if pairs.is_empty() {
        s.push_str("no pods share a host\n");
    } else {
        for p in pairs {
            let _ = writeln!(s, "{p}");
        }
    }
    for e in &r.evicted {
        let _ = writeln!(
            s,
            "evicted {}/{} (shared host {} in {})",
            escape(&e.namespace),
            escape(&e.pod),
            escape(&e.host),
            escape(&e.workload)
        );
    }
    for (e, why) in &r.refused {
        let _ = writeln!(
            s,
            "eviction of {}/{} refused: {}",
            escape(&e.namespace),
            escape(&e.pod),
            escape(why)
        );
    }
    s
}

/// `vnfm cloud migrate SERVER --to HOST` (the simulated cloud of the state file).
///
/// # Errors
/// Not the simulator, an unknown server or host (2), a host that cannot take it (2).
pub fn migrate(config: &Config, server: &str, to: &str, out: Output) -> Result<(), CliError> {
    runtime()?.block_on(async {
        check_vim(config)?;
        let store = open_state(config).await?;
        let vim = Vim::open(&store, None, config).await?;
        let Some(sim) = &vim.sim else {
            return Err(CliError::Usage(
                "vnfm cloud migrate moves servers of the simulated cloud only; on OpenStack use \
                 `openstack server migrate --live-migration --host HOST`"
                    .into(),
            ));
        };
        let id = ServerId::new(server);
        let from = sim.live_migrate(&id, to).map_err(|e| match e {
            vnfm_core::driver::DriverError::NotFound { .. }
            | vnfm_core::driver::DriverError::Conflict { .. } => {
                CliError::Usage(format!("cannot migrate: {e}"))
            }
            e => CliError::Driver(e),
        })?;
        save_sim(&store, &vim.sim).await?;
        let data = MigrateReport {
            server,
            from,
            to,
            version: Version,
        };
        out.data(
            &format!(
                "server {} moved from {} to {}\n",
                escape(server),
                data.from,
                escape(to)
            ),
            &data,
        )
    })
}
