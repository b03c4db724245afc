//! The Kubernetes manifests of `deploy/kubernetes/` (issue 27, acceptance 6: "the Kubernetes
//! manifests are accepted by the real kube-apiserver in CI").
//!
//! - `manifests_parse_and_fit_together` runs everywhere: every document of every
//!   `deploy/kubernetes/*.yaml` parses, the kinds the issue asks for are there, and they fit
//!   together (the ConfigMap's `vnfm.toml` is a configuration this build accepts and listens
//!   on the port the probes, the container and the Service name; the Service and the budget
//!   select the Deployment's pods; the Secret has the keys the Deployment reads; ...).
//! - `the_real_apiserver_accepts_the_manifests` sends every document to a real kube-apiserver
//!   as a create with server-side dry run (`dryRun=All`) and strict field validation
//!   (`fieldValidation=Strict`: an unknown field, a misspelt `readinesProbe`, is refused
//!   rather than dropped), in a namespace it creates; each must be accepted. It also checks
//!   that the same request refuses broken copies of the Deployment (`replicas: "three"`, no
//!   container image, a misspelt field), so an accepted manifest means something; and that a
//!   pod of the Deployment's template is admitted in a namespace enforcing the restricted Pod
//!   Security Standard (as `namespace.yaml` does), where one without `runAsNonRoot` is not.
//!   Runs with `VNFM_TEST_K8S=1` and `VNFM_K8S_KUBECONFIG` (`eval "$(scripts/k8s-dev.sh
//!   start)"`; `scripts/test.sh` does it on CI); otherwise it records a skip of the suite
//!   `real-k8s`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod k8s_common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::Resource;
use serde_json::{json, Value};

/// The folder of the manifests, from the workspace root.
const DIR: &str = "deploy/kubernetes";

/// How long `vnfm serve` lets running operations finish at a stop (docs/serve.md, "Starting
/// and stopping"): the pods' grace period must be at least this.
const DRAIN_SECS: i64 = 30;

fn manifest_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("vnfm-cli sits in the workspace")
        .join(DIR)
}

/// Every document of every `*.yaml` of [`DIR`], in file-name order, as (file, document);
/// empty documents (a lone `---`) are left out.
fn manifests() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest_dir())
        .unwrap_or_else(|e| panic!("{DIR}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {DIR}");
    let mut docs = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, de) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            let yaml = <serde_yaml::Value as serde::Deserialize>::deserialize(de)
                .unwrap_or_else(|e| panic!("{DIR}/{name}: document {}: {e}", i + 1));
            if yaml.is_null() {
                continue;
            }
            let doc = serde_json::to_value(&yaml)
                .unwrap_or_else(|e| panic!("{DIR}/{name}: document {}: {e}", i + 1));
            for key in ["apiVersion", "kind"] {
                assert!(
                    doc[key].is_string(),
                    "{DIR}/{name}: document {} has no {key}",
                    i + 1
                );
            }
            assert!(
                doc["metadata"]["name"].is_string(),
                "{DIR}/{name}: document {} has no metadata.name",
                i + 1
            );
            docs.push((name.clone(), doc));
        }
    }
    docs
}

/// The one document of `kind`.
fn one<'a>(docs: &'a [(String, Value)], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|(_, d)| d["kind"] == kind)
        .map(|(_, d)| d)
        .collect();
    assert_eq!(found.len(), 1, "exactly one {kind} in {DIR}: {found:?}");
    found[0]
}

/// The container port named or numbered by `port` (a probe's or the Service's target).
fn container_port(container: &Value, port: &Value) -> i64 {
    let ports = container["ports"]
        .as_array()
        .expect("the container's ports");
    let found = ports.iter().find(|p| match port {
        Value::String(name) => p["name"] == name.as_str(),
        n => &p["containerPort"] == n,
    });
    found
        .and_then(|p| p["containerPort"].as_i64())
        .unwrap_or_else(|| panic!("port {port} is not a container port: {ports:?}"))
}

/// The manifests parse and fit together (see the module docs), without a cluster.
#[test]
fn manifests_parse_and_fit_together() {
    let docs = manifests();
    let kinds: BTreeSet<&str> = docs
        .iter()
        .map(|(_, d)| d["kind"].as_str().unwrap())
        .collect();
    let want: BTreeSet<&str> = [
        "ConfigMap",
        "Deployment",
        "Namespace",
        "PodDisruptionBudget",
        "Secret",
        "Service",
    ]
    .into();
    assert_eq!(kinds, want);
    // Namespace-agnostic: applied with `-n` wherever the operator wants them.
    for (file, d) in &docs {
        assert!(
            d["metadata"]["namespace"].is_null(),
            "{file} names a namespace: {d}"
        );
    }

    let namespace = one(&docs, "Namespace");
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );

    let deploy = one(&docs, "Deployment");
    let spec = &deploy["spec"];
    // Three replicas on the database, rolled one pod at a time (docs/replicas.md).
    assert_eq!(spec["replicas"], 3);
    assert_eq!(spec["strategy"]["type"], "RollingUpdate");
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 1);
    let selector = &spec["selector"]["matchLabels"];
    let pod = &spec["template"];
    for (k, v) in selector.as_object().expect("matchLabels") {
        assert_eq!(&pod["metadata"]["labels"][k], v, "the pods carry {k}");
    }
    let pod = &pod["spec"];
    let grace = pod["terminationGracePeriodSeconds"].as_i64().unwrap();
    assert!(
        grace >= DRAIN_SECS,
        "grace period {grace} s < the drain's {DRAIN_SECS} s"
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let spread = &pod["affinity"]["podAntiAffinity"]
        ["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(&spread["labelSelector"]["matchLabels"], selector);
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    for r in ["requests", "limits"] {
        for what in ["cpu", "memory"] {
            assert!(
                c["resources"][r][what].is_string(),
                "resources.{r}.{what}: {c}"
            );
        }
    }
    let port = container_port(c, &json!("sol003"));
    for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], "/healthz", "{probe}");
        assert_eq!(container_port(c, &get["port"]), port, "{probe}");
    }

    // The mounts: what the configuration names must be there, and writable where written.
    let volumes = pod["volumes"].as_array().unwrap();
    let volume = |name: &str| {
        volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}"))
    };
    let mount_of = |path: &Path| {
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
            .unwrap_or_else(|| {
                panic!(
                    "{} is on no volume (the root file system is read-only)",
                    path.display()
                )
            })
    };
    let env = |name: &str| {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in the container's env"))
    };

    // The ConfigMap's vnfm.toml is what VNFM_CONFIG names, and this build accepts it.
    let config_map = one(&docs, "ConfigMap");
    let config_path = PathBuf::from(env("VNFM_CONFIG")["value"].as_str().unwrap());
    let m = mount_of(&config_path);
    let v = volume(m["name"].as_str().unwrap());
    assert_eq!(v["configMap"]["name"], config_map["metadata"]["name"]);
    let key = config_path
        .strip_prefix(m["mountPath"].as_str().unwrap())
        .unwrap();
    let toml = config_map["data"][key.to_str().unwrap()]
        .as_str()
        .unwrap_or_else(|| panic!("the ConfigMap has no {}", key.display()));
    // The packages folder is on its volume in the pod; here, where it does not exist, a
    // folder of the test stands in for it (the configuration refuses a missing one).
    let packages = toml::from_str::<toml::Value>(toml).unwrap()["packages"]["dir"]
        .as_str()
        .expect("[packages] dir")
        .to_owned();
    let here = tempfile::tempdir().unwrap();
    let toml = toml.replace(
        &format!("{packages:?}"),
        &format!("{:?}", here.path().display().to_string()),
    );
    let config = vnfm_cli::config::Config::from_toml(&config_path, &toml)
        .unwrap_or_else(|e| panic!("the ConfigMap's vnfm.toml: {e}"));
    assert_eq!(config.packages.dir.as_deref(), Some(here.path()));
    config.server.validate().unwrap();
    assert!(
        config.server.listen.ip().is_unspecified(),
        "{}",
        config.server.listen
    );
    assert_eq!(i64::from(config.server.listen.port()), port);
    // The state is the database's: no state file in the configuration (it would be refused
    // beside VNFM_STATE_URL), and no volume for one.
    assert_eq!(
        config.state.path, None,
        "[state] path beside the database URL"
    );
    assert!(config.state.url.is_none(), "the URL comes from the Secret");
    assert!(
        !volumes.iter().any(|v| v["name"] == "state"),
        "a state volume: the state is in the database"
    );
    mount_of(Path::new(&packages));

    // The database URL (required) and the API token (optional) come from the Secret, under
    // keys it has.
    let secret = one(&docs, "Secret");
    for (var, optional) in [("VNFM_STATE_URL", false), ("VNFM_API_TOKEN", true)] {
        let r = &env(var)["valueFrom"]["secretKeyRef"];
        assert_eq!(r["name"], secret["metadata"]["name"], "{var}");
        assert_eq!(r["optional"].as_bool().unwrap_or(false), optional, "{var}");
        let key = r["key"].as_str().unwrap();
        let value = secret["stringData"][key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key}"));
        assert!(
            value.contains("CHANGE-ME"),
            "the example Secret holds a placeholder: {key}"
        );
    }
    assert!(secret["stringData"]["url"]
        .as_str()
        .unwrap()
        .starts_with("postgres://"));

    let service = one(&docs, "Service");
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert_eq!(&service["spec"]["selector"], selector);
    let ports = service["spec"]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0]["port"], port);
    assert_eq!(container_port(c, &ports[0]["targetPort"]), port);

    let budget = one(&docs, "PodDisruptionBudget");
    assert_eq!(&budget["spec"]["selector"]["matchLabels"], selector);
    let b = &budget["spec"];
    assert!(
        b["maxUnavailable"] == 1 || b["minAvailable"] == 2,
        "one replica of three down at a time: {b}"
    );
}

/// A create of `doc` with server-side dry run and strict field validation, in `ns` when its
/// kind is namespaced: the apiserver's answer (the object as it would store it).
async fn dry_run_create(
    client: &kube::Client,
    ns: &str,
    doc: &Value,
) -> Result<Value, kube::Error> {
    let api_version = doc["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().unwrap());
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await?;
    let url = match caps.scope {
        Scope::Namespaced => DynamicObject::url_path(&ar, Some(ns)),
        Scope::Cluster => DynamicObject::url_path(&ar, None),
    };
    let req = axum::http::Request::post(format!(
        "{url}?dryRun=All&fieldValidation=Strict&fieldManager=vnfm-manifests-test"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(doc).unwrap())
    .unwrap();
    client.request::<Value>(req).await
}

/// The status code and message of an apiserver refusal.
fn refusal(r: Result<Value, kube::Error>, what: &str) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message.clone()),
        other => panic!("{what}: expected a refusal from the apiserver, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_apiserver_accepts_the_manifests() {
    if !vnfm_core::vectors::real_suite_enabled(
        "VNFM_TEST_K8S",
        "real-k8s",
        module_path!(),
        "set VNFM_TEST_K8S=1 and VNFM_K8S_KUBECONFIG (eval \"$(scripts/k8s-dev.sh start)\")",
    ) {
        return;
    }
    let kubeconfig = PathBuf::from(
        std::env::var("VNFM_K8S_KUBECONFIG").expect("VNFM_K8S_KUBECONFIG (scripts/k8s-dev.sh)"),
    );
    let client = k8s_common::client(&kubeconfig).await;
    let stamp = chrono::Utc::now().timestamp_millis() % 100_000_000;
    let ns = format!("vnfm-manifests-{stamp}");
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    // Restricted, as namespace.yaml: the pods must meet the restricted Pod Security Standard.
    let n = serde_json::from_value(json!({"metadata": {"name": ns, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted"}}}))
    .unwrap();
    namespaces.create(&PostParams::default(), &n).await.unwrap();

    let docs = manifests();
    let mut failures = Vec::new();
    for (file, doc) in &docs {
        let what = format!("{file}: {} {}", doc["kind"], doc["metadata"]["name"]);
        match dry_run_create(&client, &ns, doc).await {
            Ok(got) => {
                // The apiserver's object: the same kind and name, with its defaults filled in.
                assert_eq!(got["kind"], doc["kind"], "{what}: {got}");
                assert_eq!(got["metadata"]["name"], doc["metadata"]["name"], "{what}");
                eprintln!("accepted {what}");
            }
            // A cluster-scoped object that exists already (the optional Namespace on a
            // cluster that has it): the apiserver validates before it looks for it, so it is
            // valid.
            Err(kube::Error::Api(s))
                if s.code == 409 && s.reason == "AlreadyExists" && doc["kind"] == "Namespace" =>
            {
                eprintln!("accepted {what} (exists already)");
            }
            Err(e) => failures.push(format!("{what}: {e}")),
        }
    }

    // The same request refuses broken copies of the Deployment: acceptance means something.
    let deploy = one(&docs, "Deployment").clone();
    let mut three = deploy.clone();
    three["spec"]["replicas"] = json!("three");
    let (code, message) = refusal(
        dry_run_create(&client, &ns, &three).await,
        "replicas: \"three\"",
    );
    if !(matches!(code, 400 | 422) && message.contains("replicas")) {
        failures.push(format!(
            "replicas: \"three\" refused with {code}: {message}"
        ));
    }
    let mut no_image = deploy.clone();
    no_image["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("image");
    let (code, message) = refusal(dry_run_create(&client, &ns, &no_image).await, "no image");
    if !(code == 422 && message.contains("image")) {
        failures.push(format!("no image refused with {code}: {message}"));
    }
    let mut misspelt = deploy.clone();
    let c = misspelt["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap();
    let probe = c.remove("readinessProbe").unwrap();
    c.insert("readinesProbe".into(), probe);
    let (code, message) = refusal(
        dry_run_create(&client, &ns, &misspelt).await,
        "readinesProbe",
    );
    if !(matches!(code, 400 | 422) && message.contains("readinesProbe")) {
        failures.push(format!(
            "a misspelt readinesProbe refused with {code}: {message}"
        ));
    }

    // The pods the Deployment makes are admitted in the restricted namespace (Pod Security
    // Admission judges pods, not their Deployment), and one running as root would not be.
    let template = &deploy["spec"]["template"];
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "vnfm-pod", "labels": template["metadata"]["labels"]},
        "spec": template["spec"]});
    if let Err(e) = dry_run_create(&client, &ns, &pod).await {
        failures.push(format!("a pod of the Deployment's template: {e}"));
    }
    let mut root = pod.clone();
    root["spec"]["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("runAsNonRoot");
    let (code, message) = refusal(dry_run_create(&client, &ns, &root).await, "runAsNonRoot");
    if !(code == 403 && message.contains("runAsNonRoot")) {
        failures.push(format!(
            "a pod without runAsNonRoot refused with {code}: {message}"
        ));
    }

    // A dry run stores nothing.
    let deployments =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns);
    let stored = deployments.list(&ListParams::default()).await.unwrap();
    if !stored.items.is_empty() {
        failures.push(format!(
            "the dry runs stored {} Deployments",
            stored.items.len()
        ));
    }

    if let Err(e) = namespaces.delete(&ns, &DeleteParams::default()).await {
        eprintln!("cleanup: delete namespace {ns}: {e}");
    }
    assert!(failures.is_empty(), "{DIR}:\n{}", failures.join("\n"));
}
