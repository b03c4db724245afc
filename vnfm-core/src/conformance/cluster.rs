//! The behaviour of every [`ClusterDriver`]. The trait cannot delete a workload, so the
//! functions scale their workloads to zero and remove their labels when done.

use std::collections::BTreeMap;

use super::{ensure, expect_error, ConformanceError, Fixture, OrFail};
use crate::cluster::Workload;
use crate::driver::{
    ApplyWorkload, ClusterDriver, ClusterNode, DeletePod, DriverError, EvictPod, LabelNode,
    ListPods, ListWorkloads, ObjectRef, Pod, PodAntiAffinity, ScaleWorkload,
};
use crate::id::NodeName;

async fn nodes(
    cluster: &dyn ClusterDriver,
    behaviour: &'static str,
) -> Result<Vec<ClusterNode>, ConformanceError> {
    cluster.list_nodes().await.or_fail(behaviour, "list_nodes")
}

/// The nodes pods may go to: the fixture's, which must be listed, or every listed node.
fn schedulable(
    behaviour: &'static str,
    fx: &Fixture,
    listed: &[ClusterNode],
) -> Result<Vec<NodeName>, ConformanceError> {
    let out: Vec<NodeName> = if fx.cluster_nodes.is_empty() {
        listed.iter().map(|n| n.name.clone()).collect()
    } else {
        for n in &fx.cluster_nodes {
            if !listed.iter().any(|l| &l.name == n) {
                return Err(ConformanceError::fixture(
                    behaviour,
                    format!("cluster node {n} is not listed by list_nodes"),
                ));
            }
        }
        fx.cluster_nodes.clone()
    };
    if out.is_empty() {
        return Err(ConformanceError::fixture(
            behaviour,
            "the cluster has no node (expected at least one)",
        ));
    }
    Ok(out)
}

async fn label(
    cluster: &dyn ClusterDriver,
    behaviour: &'static str,
    node: &NodeName,
    key: &str,
    value: Option<&str>,
) -> Result<(), ConformanceError> {
    let labels = BTreeMap::from([(key.to_owned(), value.map(str::to_owned))]);
    cluster
        .label_node(LabelNode::new(node.clone(), labels))
        .await
        .or_fail(
            behaviour,
            &format!("label_node {node} {key}={}", value.unwrap_or("<remove>")),
        )
}

async fn labels_of(
    cluster: &dyn ClusterDriver,
    behaviour: &'static str,
    node: &NodeName,
) -> Result<BTreeMap<String, String>, ConformanceError> {
    nodes(cluster, behaviour)
        .await?
        .into_iter()
        .find(|n| &n.name == node)
        .map(|n| n.labels)
        .ok_or_else(|| {
            ConformanceError::mismatch(behaviour, format!("node {node} is no longer listed"))
        })
}

/// Lists the pods of `name` until `done` holds, polling as the fixture says.
async fn poll_pods(
    cluster: &dyn ClusterDriver,
    fx: &Fixture,
    behaviour: &'static str,
    name: &str,
    what: &str,
    done: impl Fn(&[Pod]) -> bool,
) -> Result<Vec<Pod>, ConformanceError> {
    let polls = fx.polling.max_polls.max(1);
    let mut last = Vec::new();
    for i in 0..polls {
        if i > 0 {
            fx.clock.sleep(fx.polling.interval).await;
        }
        last = cluster
            .list_pods(ListPods::new(&fx.namespace, name))
            .await
            .or_fail(behaviour, &format!("list_pods {}/{name}", fx.namespace))?;
        if done(&last) {
            return Ok(last);
        }
    }
    let seen: Vec<String> = last
        .iter()
        .map(|p| {
            format!(
                "{} on {} ({})",
                p.name,
                p.node.as_ref().map_or("-", NodeName::as_str),
                p.phase
            )
        })
        .collect();
    Err(ConformanceError::Timeout {
        behaviour,
        what: format!("workload {name}: expected {what}, last saw {seen:?}"),
        polls,
    })
}

/// Deletes a Deployment of the suite; a workload never created is fine.
async fn retire(
    cluster: &dyn ClusterDriver,
    fx: &Fixture,
    behaviour: &'static str,
    name: &str,
) -> Result<(), ConformanceError> {
    match cluster
        .delete_object(ObjectRef::new("apps/v1", "Deployment", &fx.namespace, name))
        .await
    {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(ConformanceError::driver(
            behaviour,
            format!("cleanup: delete Deployment {}/{name}", fx.namespace),
            e,
        )),
    }
}

async fn apply(
    cluster: &dyn ClusterDriver,
    fx: &Fixture,
    behaviour: &'static str,
    req: ApplyWorkload,
) -> Result<(), ConformanceError> {
    let what = format!("apply_object Deployment {}/{}", fx.namespace, req.name);
    cluster
        .apply_object(req.to_object())
        .await
        .or_fail(behaviour, &what)
}

fn bound(pods: &[Pod]) -> usize {
    pods.iter().filter(|p| p.node.is_some()).count()
}

/// Setting a label shows it on the node and leaves the other labels alone; setting it to the
/// value it has, and removing an absent label, are no-ops that succeed; a new value replaces
/// the old one.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn label_set_remove_idempotent(
    cluster: &dyn ClusterDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "cluster::label_set_remove_idempotent";
    fx.check(B)?;
    let listed = nodes(cluster, B).await?;
    let sched = schedulable(B, fx, &listed)?;
    let Some(node) = sched.first().cloned() else {
        return Err(ConformanceError::fixture(B, "no cluster node"));
    };
    let key = fx.unique("label");
    let before = labels_of(cluster, B, &node).await?;
    let expect = |want: Option<&str>, labels: &BTreeMap<String, String>, step: &str| {
        let mut expected = before.clone();
        if let Some(v) = want {
            expected.insert(key.clone(), v.to_owned());
        }
        ensure(B, labels == &expected, || {
            format!("after {step}, node {node} has labels {labels:?}, expected {expected:?}")
        })
    };
    let outcome = async {
        label(cluster, B, &node, &key, Some("a")).await?;
        expect(
            Some("a"),
            &labels_of(cluster, B, &node).await?,
            "setting the label",
        )?;
        label(cluster, B, &node, &key, Some("a")).await?;
        expect(
            Some("a"),
            &labels_of(cluster, B, &node).await?,
            "setting it again",
        )?;
        label(cluster, B, &node, &key, Some("b")).await?;
        expect(
            Some("b"),
            &labels_of(cluster, B, &node).await?,
            "changing its value",
        )?;
        label(cluster, B, &node, &key, None).await?;
        expect(None, &labels_of(cluster, B, &node).await?, "removing it")?;
        label(cluster, B, &node, &key, None).await?;
        expect(
            None,
            &labels_of(cluster, B, &node).await?,
            "removing it again",
        )
    }
    .await;
    let cleanup = label(cluster, B, &node, &key, None).await;
    outcome.and(cleanup)
}

/// `label_node` on an unknown node, `scale_workload` of an unknown workload and `delete_pod`
/// of an unknown pod fail with [`DriverError::NotFound`].
///
/// # Errors
/// A [`ConformanceError`] naming the call that answered otherwise.
pub async fn unknown_objects_not_found(
    cluster: &dyn ClusterDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "cluster::unknown_objects_not_found";
    fx.check(B)?;
    let node = NodeName::new(fx.unique("no-node"));
    let labels = BTreeMap::from([(fx.unique("label"), Some("x".to_owned()))]);
    expect_error(
        B,
        &format!("label_node {node} (unknown)"),
        cluster
            .label_node(LabelNode::new(node.clone(), labels))
            .await,
        "not found",
        DriverError::is_not_found,
    )?;
    let workload = fx.unique("no-workload");
    expect_error(
        B,
        &format!("scale_workload {}/{workload} (unknown)", fx.namespace),
        cluster
            .scale_workload(ScaleWorkload::new(&fx.namespace, &workload, 1))
            .await,
        "not found",
        DriverError::is_not_found,
    )?;
    let pod = fx.unique("no-pod");
    expect_error(
        B,
        &format!("delete_pod {}/{pod} (unknown)", fx.namespace),
        cluster
            .delete_pod(DeletePod::new(&fx.namespace, &pod))
            .await,
        "not found",
        DriverError::is_not_found,
    )?;
    expect_error(
        B,
        &format!("evict_pod {}/{pod} (unknown)", fx.namespace),
        cluster.evict_pod(EvictPod::new(&fx.namespace, &pod)).await,
        "not found",
        DriverError::is_not_found,
    )?;
    expect_error(
        B,
        &format!(
            "delete_object Deployment {}/{workload} (unknown)",
            fx.namespace
        ),
        cluster
            .delete_object(ObjectRef::new(
                "apps/v1",
                "Deployment",
                &fx.namespace,
                &workload,
            ))
            .await,
        "not found",
        DriverError::is_not_found,
    )
}

/// A label key or value the API server refuses is `Invalid`, and the node keeps its labels.
///
/// # Errors
/// A [`ConformanceError`] naming the call that answered otherwise.
pub async fn invalid_label_is_invalid(
    cluster: &dyn ClusterDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "cluster::invalid_label_is_invalid";
    fx.check(B)?;
    let listed = nodes(cluster, B).await?;
    let sched = schedulable(B, fx, &listed)?;
    let Some(node) = sched.first().cloned() else {
        return Err(ConformanceError::fixture(B, "no node"));
    };
    let before = labels_of(cluster, B, &node).await?;
    for (k, v) in [
        ("bad key!".to_owned(), "x".to_owned()),
        (fx.unique("label"), "-starts-with-dash".to_owned()),
    ] {
        expect_error(
            B,
            &format!("label_node {node} {k:?}={v:?}"),
            cluster
                .label_node(LabelNode::new(
                    node.clone(),
                    BTreeMap::from([(k.clone(), Some(v.clone()))]),
                ))
                .await,
            "invalid",
            |e| matches!(e, DriverError::Invalid { .. }),
        )?;
    }
    let after = labels_of(cluster, B, &node).await?;
    ensure(B, before == after, || {
        format!("node {node} labels changed by refused patches: {before:?} -> {after:?}")
    })
}

/// A workload with required pod anti-affinity on a topology key spreads its pods over
/// distinct values of that key and leaves the pods that fit nowhere `Pending` with no node.
/// The function labels every node with a fresh key, alternating two values over the
/// schedulable nodes, and asks for one replica more than there are values.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn required_anti_affinity_spreads(
    cluster: &dyn ClusterDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "cluster::required_anti_affinity_spreads";
    fx.check(B)?;
    let listed = nodes(cluster, B).await?;
    let sched = schedulable(B, fx, &listed)?;
    let key = fx.unique("topology");
    let mut values: BTreeMap<NodeName, String> = listed
        .iter()
        .map(|n| (n.name.clone(), "v0".to_owned()))
        .collect();
    for (i, n) in sched.iter().enumerate() {
        values.insert(n.clone(), format!("v{}", i % 2));
    }
    let distinct = sched.len().min(2);
    let replicas = distinct + 1;
    let name = fx.unique("spread");
    let outcome = async {
        for (n, v) in &values {
            label(cluster, B, n, &key, Some(v)).await?;
        }
        let mut req = ApplyWorkload::new(&fx.namespace, &name, replicas as u32);
        req.anti_affinity = Some(PodAntiAffinity {
            topology_key: key.clone(),
            required: true,
        });
        apply(cluster, fx, B, req).await?;
        poll_pods(
            cluster,
            fx,
            B,
            &name,
            &format!("{replicas} pods, {distinct} of them bound"),
            |p| p.len() == replicas && bound(p) == distinct,
        )
        .await?;
        // the scheduler says why the last one waits (it may take a moment to write it)
        let pods = poll_pods(
            cluster,
            fx,
            B,
            &name,
            "the pending pod's PodScheduled=False Unschedulable with a message",
            |p| {
                p.len() == replicas
                    && bound(p) == distinct
                    && p.iter().any(|x| {
                        x.node.is_none()
                            && x.scheduled.as_ref().is_some_and(|s| {
                                !s.status
                                    && s.reason.as_deref() == Some("Unschedulable")
                                    && s.message.as_deref().is_some_and(|m| {
                                        m.contains("didn't match pod anti-affinity rules")
                                    })
                            })
                    })
            },
        )
        .await?;
        let mut used = BTreeMap::new();
        for p in &pods {
            match &p.node {
                Some(n) => {
                    let v = values.get(n).cloned().unwrap_or_default();
                    ensure(B, sched.contains(n), || {
                        format!("pod {} went to node {n}, which is not schedulable", p.name)
                    })?;
                    if let Some(other) = used.insert(v.clone(), p.name.clone()) {
                        return Err(ConformanceError::mismatch(
                            B,
                            format!(
                                "pods {other} and {} share the value {v:?} of required \
                                 anti-affinity key {key}",
                                p.name
                            ),
                        ));
                    }
                }
                None => ensure(B, p.phase == "Pending", || {
                    format!(
                        "unscheduled pod {} is in phase {:?}, expected Pending",
                        p.name, p.phase
                    )
                })?,
            }
            ensure(
                B,
                p.labels.get("app") == Some(&name) && p.namespace == fx.namespace,
                || {
                    format!(
                        "pod {} of {} is listed for app {}/{name}",
                        p.name, p.namespace, name
                    )
                },
            )?;
        }
        Ok(())
    }
    .await;
    let mut cleanup = retire(cluster, fx, B, &name).await;
    for n in values.keys() {
        cleanup = cleanup.and(label(cluster, B, n, &key, None).await);
    }
    outcome.and(cleanup)
}

/// `scale_workload` grows and shrinks the pods of a workload to the requested count.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn scale_workload(
    cluster: &dyn ClusterDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "cluster::scale_workload";
    fx.check(B)?;
    let name = fx.unique("scale");
    let outcome = async {
        apply(cluster, fx, B, ApplyWorkload::new(&fx.namespace, &name, 2)).await?;
        poll_pods(cluster, fx, B, &name, "2 pods", |p| p.len() == 2).await?;
        for replicas in [3usize, 1] {
            cluster
                .scale_workload(ScaleWorkload::new(&fx.namespace, &name, replicas as u32))
                .await
                .or_fail(
                    B,
                    &format!("scale_workload {}/{name} to {replicas}", fx.namespace),
                )?;
            poll_pods(cluster, fx, B, &name, &format!("{replicas} pods"), |p| {
                p.len() == replicas
            })
            .await?;
            let listed = cluster
                .list_workloads(ListWorkloads::new(&fx.namespace))
                .await
                .or_fail(B, &format!("list_workloads {}", fx.namespace))?;
            let found = listed
                .iter()
                .filter_map(|o| Workload::from_object(o, &fx.namespace).ok())
                .find(|w| w.name == name);
            ensure(
                B,
                found.as_ref().map(|w| w.replicas) == Some(replicas as u32),
                || {
                    format!(
                        "list_workloads shows {name} with replicas {:?}, expected {replicas}",
                        found.as_ref().map(|w| w.replicas)
                    )
                },
            )?;
        }
        Ok(())
    }
    .await;
    outcome.and(retire(cluster, fx, B, &name).await)
}

/// Deleting a pod of a workload makes its controller create a replacement: the workload has
/// its replica count again, without the deleted pod, and the other pod is untouched.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn deleted_pod_is_recreated(
    cluster: &dyn ClusterDriver,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "cluster::deleted_pod_is_recreated";
    fx.check(B)?;
    let name = fx.unique("heal");
    let outcome = async {
        apply(cluster, fx, B, ApplyWorkload::new(&fx.namespace, &name, 2)).await?;
        let pods = poll_pods(cluster, fx, B, &name, "2 bound pods", |p| {
            p.len() == 2 && bound(p) == 2
        })
        .await?;
        let (Some(victim), Some(other)) = (pods.first(), pods.get(1)) else {
            return Err(ConformanceError::mismatch(
                B,
                "two pods were listed, then not",
            ));
        };
        cluster
            .delete_pod(DeletePod::new(&fx.namespace, &victim.name).with_grace(0))
            .await
            .or_fail(B, &format!("delete_pod {}/{}", fx.namespace, victim.name))?;
        let after = poll_pods(
            cluster,
            fx,
            B,
            &name,
            &format!("2 pods without {}", victim.name),
            |p| p.len() == 2 && p.iter().all(|x| x.name != victim.name),
        )
        .await?;
        ensure(B, after.iter().any(|p| p.name == other.name), || {
            format!(
                "pod {} was not deleted but is gone after {} was",
                other.name, victim.name
            )
        })
    }
    .await;
    outcome.and(retire(cluster, fx, B, &name).await)
}

/// Runs every function of this module in turn; stops at the first error.
///
/// # Errors
/// The first [`ConformanceError`].
pub async fn run_all(cluster: &dyn ClusterDriver, fx: &Fixture) -> Result<(), ConformanceError> {
    label_set_remove_idempotent(cluster, fx).await?;
    unknown_objects_not_found(cluster, fx).await?;
    invalid_label_is_invalid(cluster, fx).await?;
    required_anti_affinity_spreads(cluster, fx).await?;
    scale_workload(cluster, fx).await?;
    deleted_pod_is_recreated(cluster, fx).await
}
