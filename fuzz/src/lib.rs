//! The entry points of the fuzz targets of `fuzz/`, one function per target: each takes the
//! fuzzer's bytes, hands them to the parser `vnfm` uses for that input, and must never panic.
//!
//! Shared, unchanged, by the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs`, nightly) and by the
//! stable regression test `vnfm-cli/tests/fuzz_corpus.rs`, which feeds every committed corpus
//! and crash file to the same functions (it includes this file as a module). See
//! `docs/fuzzing.md`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use vnfm_core::driver::{CreateStack, ListResources, StackDriver, TemplateBundle};

/// Every target, by the name of its `fuzz_targets/` file and corpus directory.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("webhook", webhook),
    ("sol003", sol003),
    ("package_files", package_files),
    ("package_dir", package_dir),
    ("package_zip", package_zip),
    ("hot", hot),
    ("cloud", cloud),
    ("config", config),
    ("state", state),
    ("subscription", subscription),
    ("filter", filter),
    ("intent", intent),
];

/// The Alertmanager webhook body of `POST /alert/auto_healing|auto_scaling`: parsed, then
/// judged by the alert handler as the server judges it (the first byte picks the endpoint), so
/// the bounds on fingerprints and labels (issue 26) run on every input that parses.
pub fn webhook(data: &[u8]) {
    use vnfm_core::alert::{AlertHandler, Endpoint, PrometheusPluginConfig};
    let Ok(webhook) = vnfm_core::alert::Webhook::from_slice(data) else {
        return;
    };
    let endpoint = match data.first().map(|b| b % 2) {
        Some(0) => Endpoint::AutoHealing,
        _ => Endpoint::AutoScaling,
    };
    let mut h = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
    let none: BTreeMap<vnfm_core::id::VnfInstanceId, vnfm_core::lcm::VnfInstance> = BTreeMap::new();
    let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default();
    let _ = h.handle_alerts(endpoint, &webhook, &none, now);
}

/// The body of `POST /vnflcm/v2/subscriptions` (SOL003 `LccnSubscriptionRequest`): parsed as
/// the server parses it, its size bounds checked (issue 26 High 5), then validated.
pub fn subscription(data: &[u8]) {
    use vnfm_core::lcm_notify::{LccnSubscriptionRequest, SubscriptionLimits};
    let Ok(req) = serde_json::from_slice::<LccnSubscriptionRequest>(data) else {
        return;
    };
    if req.check_limits(&SubscriptionLimits::default()).is_ok() {
        let _ = req.validate();
    }
}

/// A SOL013 query on a list (issue 26 High 1): the first byte picks the resource (instances,
/// occurrences, subscriptions); the bytes up to the next `\0` are the query string, the rest
/// a JSON document the parsed query is applied to, within a bounded budget.
pub fn filter(data: &[u8]) {
    use vnfm_core::query::{Budget, ListQuery, SUBSCRIPTIONS, VNF_INSTANCES, VNF_LCM_OP_OCCS};
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let resource = match pick % 3 {
        0 => VNF_INSTANCES,
        1 => VNF_LCM_OP_OCCS,
        _ => SUBSCRIPTIONS,
    };
    let (query, doc) = match rest.iter().position(|&b| b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(query) = std::str::from_utf8(query) else {
        return;
    };
    let Ok(q) = ListQuery::parse(Some(query), resource) else {
        return;
    };
    let items = match serde_json::from_slice::<serde_json::Value>(doc) {
        Ok(serde_json::Value::Array(items)) => items,
        Ok(v) => vec![v],
        Err(_) => Vec::new(),
    };
    let _ = q.apply_within(items, 4, &mut Budget::new(1_000_000));
}

/// The intent inputs (issue 26 Medium): the first byte picks a cloud-selection policy, a
/// candidate file, or OSM PLA's placement data for linked VNFs; the rest is the file. A
/// candidate file that reads is also chosen from with the example policy, and placement data
/// that reads is solved within small limits.
pub fn intent(data: &[u8]) {
    use vnfm_core::intent::candidates::{CandidateFile, Capacities, GeoPoint};
    use vnfm_core::intent::links::{Problem, SolveOptions};
    use vnfm_core::intent::policy::Policy;
    use vnfm_core::intent::select::Demand;
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match pick % 3 {
        0 => {
            let _ = Policy::from_text("fuzz.yaml", text);
        }
        1 => {
            let Ok(c) = CandidateFile::from_text("fuzz.yaml", text) else {
                return;
            };
            let Ok(policy) = Policy::from_text("policy.json", EXAMPLE_POLICY) else {
                return;
            };
            let mut d = Demand::new("VDU1", "m1.small", 2);
            d.customer = Some(GeoPoint::new(40.0, -75.0));
            let _ = vnfm_core::intent::deploy::choose_region(&policy, &c, &[d], &Capacities::new());
        }
        _ => {
            let Ok(p) = Problem::from_pla_str(text) else {
                return;
            };
            let _ = p.solve_with(&SolveOptions {
                node_limit: 200,
                work_limit: 1 << 20,
                should_stop: None,
            });
        }
    }
}

/// The example cloud-selection policy, for choices made from fuzzed candidate files.
const EXAMPLE_POLICY: &str = include_str!("../../examples/intent/policy-ha.json");

/// The SOL003 request bodies of `vnfm serve`: the first byte picks the request (create,
/// instantiate, scale, heal, terminate, PATCH), the rest is the body.
pub fn sol003(data: &[u8]) {
    use vnfm_cli::serve::LcmBody;
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let kind = match pick % 6 {
        0 => LcmBody::Create,
        1 => LcmBody::Instantiate,
        2 => LcmBody::Scale,
        3 => LcmBody::Heal,
        4 => LcmBody::Terminate,
        _ => LcmBody::Modify,
    };
    let _ = vnfm_cli::serve::check_lcm_body(kind, body);
}

/// Splits the fuzzer's bytes into package files: `name \0 content \0 name \0 content ...`
/// (a trailing name without content has empty content; an empty name with empty content,
/// as after the last file's closing `\0`, is no file).
pub fn split_files(data: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut parts = data.split(|&b| b == 0);
    while let Some(name) = parts.next() {
        let content = parts.next().unwrap_or_default();
        if name.is_empty() && content.is_empty() {
            // The end of the last file's content.
            continue;
        }
        files.insert(String::from_utf8_lossy(name).into_owned(), content.to_vec());
    }
    files
}

/// Looks at what a loaded package offers, as the commands do after loading one.
fn touch(pkg: &vnfm_core::package::VnfPackage) {
    for flavour in pkg.flavours.values() {
        for vdu in flavour.vdus.keys() {
            let _ = flavour.initial_instances(vdu);
            let _ = flavour.rules_for(vdu);
            for aspect in flavour.scaling_aspects.keys() {
                let _ = flavour.aspect_delta(aspect, vdu);
            }
        }
        let _ = pkg.base_hot(&flavour.id);
    }
}

/// The package reader on files in memory ([`split_files`]), what it reads from a directory.
pub fn package_files(data: &[u8]) {
    if let Ok(pkg) = vnfm_core::package::VnfPackage::from_files("fuzz", split_files(data)) {
        touch(&pkg);
    }
}

/// Whether `name` is a relative path that stays in its directory (for [`package_dir`]).
fn safe_relative(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 200
        && name.split('/').all(|c| {
            !c.is_empty()
                && c != "."
                && c != ".."
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-+ ".contains(&b))
        })
}

/// The package reader on a directory: the files of [`split_files`] (names that are not safe
/// relative paths skipped) written below a temporary directory, then `package::fs::load`.
pub fn package_dir(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    for (name, content) in split_files(data) {
        if !safe_relative(&name) {
            continue;
        }
        let path = dir.path().join(&name);
        if let Some(parent) = path.parent() {
            if std::fs::create_dir_all(parent).is_err() {
                continue;
            }
        }
        let _ = std::fs::write(&path, content);
    }
    if let Ok(pkg) = vnfm_core::package::fs::load(dir.path()) {
        touch(&pkg);
    }
}

/// The package reader on a zip archive (in memory, as a `.zip` file is read).
pub fn package_zip(data: &[u8]) {
    if let Ok(pkg) = vnfm_core::package::fs::load_zip_bytes("fuzz.zip", data) {
        touch(&pkg);
    }
}

/// Runs a future that never waits (the simulator's drivers answer at once).
fn now<F: Future>(f: F) -> Option<F::Output> {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

/// The simulated cloud of the HOT target: the demo cloud.
const HOT_CLOUD: &str = include_str!("../../examples/clouds/demo.yaml");

/// The simulator's HOT interpreter: a stack created on the demo cloud from
/// `template \0 name \0 content ...` (the top template, then its `files` as in
/// [`split_files`]; a file named `parameters` holds the JSON parameters), shown, listed and
/// deleted.
pub fn hot(data: &[u8]) {
    let (template, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let mut files = split_files(rest);
    let parameters = files
        .remove("parameters")
        .and_then(|p| serde_json::from_slice(&p).ok())
        .unwrap_or_default();
    let bundle = TemplateBundle {
        template: String::from_utf8_lossy(&template).into_owned(),
        files: files
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect(),
    };
    let Ok(cloud) = vnfm_core::cloud::CloudFile::from_yaml("demo.yaml", HOT_CLOUD) else {
        return;
    };
    let sim = vnfm_core::sim::SimCloud::new(cloud, 1);
    let Some(Ok(id)) = now(sim.create_stack(CreateStack::new("fuzz", bundle, parameters))) else {
        return;
    };
    let _ = now(sim.show_stack(&id));
    let _ = now(sim.list_resources(ListResources::new(id.clone(), 2)));
    let _ = now(sim.delete_stack(&id));
}

/// The cloud file (`--cloud`, `[vim] cloud`).
pub fn cloud(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = vnfm_core::cloud::CloudFile::from_yaml("fuzz.yaml", text);
    }
}

/// The configuration file (TOML).
pub fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = vnfm_cli::config::Config::from_toml(Path::new("fuzz.toml"), text);
    }
}

/// The documents of the state file: the first byte picks the document (the alert handler's
/// snapshot, its generation, an alert journal entry whose name is the first line, an instance
/// row, an operation occurrence row, the simulated cloud's snapshot, the reservation ledger),
/// the rest is its body.
pub fn state(data: &[u8]) {
    use vnfm_cli::serve::AlertDocument;
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let Ok(body) = std::str::from_utf8(body) else {
        return;
    };
    match pick % 7 {
        0 => {
            let _ = vnfm_cli::serve::check_alert_document(AlertDocument::Snapshot, "", body);
        }
        1 => {
            let _ = vnfm_cli::serve::check_alert_document(AlertDocument::Generation, "", body);
        }
        2 => {
            let (name, body) = body.split_once('\n').unwrap_or((body, ""));
            let _ = vnfm_cli::serve::check_alert_document(AlertDocument::JournalEntry, name, body);
        }
        3 => {
            let _ = vnfm_cli::store::decode_row(vnfm_cli::store::RowKind::Instance, body);
        }
        4 => {
            let _ = vnfm_cli::store::decode_row(vnfm_cli::store::RowKind::OpOcc, body);
        }
        5 => {
            if let Ok(sim) = vnfm_core::sim::SimCloud::restore(body) {
                let _ = sim.snapshot();
            }
        }
        _ => {
            let _ = vnfm_cli::promise::PromiseBook::decode(body);
        }
    }
}
