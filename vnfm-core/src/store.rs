//! Stores of VNF instances and LCM operation occurrences: the [`Store`] trait with its
//! [`StoreBatch`], [`Precondition`]s and [`Version`]s (re-exported from [`crate::driver`] with
//! the other driver traits), and an in-memory implementation.
//!
//! [`MemoryStore`] keeps everything in memory; clones share the same state, so one store can be
//! handed to several tasks. It is the store of tests and of embedders that persist nothing.
//! The `vnfm` CLI adds a persistent SQLite store (`vnfm_cli::store::SqliteStore`).
//!
//! Both implement [`Store`] with the same behaviour, checked by one suite,
//! `conformance` (feature `conformance`):
//!
//! - [`Store::commit`] applies puts of instances, then puts of operation occurrences, then
//!   deletes; all or nothing.
//! - Putting an instance that exists replaces it and keeps its operation occurrences.
//! - An operation occurrence must refer to an instance that exists once the batch's instance
//!   puts are applied; otherwise the whole batch fails with [`DriverError::Conflict`].
//! - Deleting an instance deletes its operation occurrences; deleting an unknown instance is a
//!   no-op.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use std::fmt::{self, Debug};

use serde::{Deserialize, Serialize};

use crate::error::DriverError;
use crate::id::{OpOccId, VnfInstanceId};
use crate::lcm::{VnfInstance, VnfLcmOpOcc};

/// The revision of a stored object: 1 when it is first put, one more on every put after.
/// Stores count it the same way, so a writer that read version `v` and puts once expects
/// `v + 1` to be its own.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Version(pub u64);

impl Version {
    /// The version after one more put.
    pub fn next(self) -> Self {
        Self(self.0.saturating_add(1))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An object as read from a [`Store`], with its [`Version`].
#[derive(Clone, Debug, PartialEq)]
pub struct Versioned<T> {
    /// The object.
    pub value: T,
    /// Its version when it was read.
    pub version: Version,
}

/// A condition of a [`StoreBatch`] (object_store's `PutMode::Update` / `Create`): when one does
/// not hold at commit time, the whole batch fails with [`DriverError::Conflict`] and nothing is
/// written: another writer got there first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Precondition {
    /// The instance exists at exactly this version.
    InstanceAt {
        /// The instance.
        id: VnfInstanceId,
        /// The version read.
        version: Version,
    },
    /// The occurrence exists at exactly this version.
    OpOccAt {
        /// The occurrence.
        id: OpOccId,
        /// The version read.
        version: Version,
    },
    /// No occurrence with this id exists.
    OpOccAbsent {
        /// The occurrence.
        id: OpOccId,
    },
}

impl Precondition {
    /// The [`DriverError::Conflict`] message when the condition does not hold: `found` is the
    /// stored version (`None`: no such object). Shared by the stores so they word it alike.
    pub fn conflict_message(&self, found: Option<Version>) -> String {
        let found = found.map_or_else(|| "none is stored".to_owned(), |v| format!("{v} is stored"));
        match self {
            Self::InstanceAt { id, version } => format!(
                "VNF instance {id} changed since it was read (version {version} expected, \
                 {found}): another writer got there first"
            ),
            Self::OpOccAt { id, version } => format!(
                "operation occurrence {id} changed since it was read (version {version} \
                 expected, {found}): another writer got there first"
            ),
            Self::OpOccAbsent { id } => {
                format!("operation occurrence {id} already exists (expected none; {found})")
            }
        }
    }
}

/// An atomic batch of writes to a [`Store`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoreBatch {
    /// Instances to insert or replace.
    pub put_instances: Vec<VnfInstance>,
    /// Instances to delete (with their operation occurrences).
    pub delete_instances: Vec<VnfInstanceId>,
    /// Operation occurrences to insert or replace.
    pub put_op_occs: Vec<VnfLcmOpOcc>,
    /// Conditions checked before anything is written (see [`Precondition`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preconditions: Vec<Precondition>,
    /// Documents (name, body) written with the batch, in the same transaction: what must be
    /// stored exactly when the batch is, e.g. the notifications it causes for an outbox. A
    /// store without documents ([`MemoryStore`]) keeps them beside its objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub documents: Vec<(String, String)>,
    /// Ranges of documents deleted with the batch: every name that starts with `.0` and sorts
    /// at or before `.1` (an outbox's oldest entries leaving as new ones come).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prune_documents: Vec<(String, String)>,
}

impl StoreBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds an instance to insert or replace.
    pub fn with_instance(mut self, inst: VnfInstance) -> Self {
        self.put_instances.push(inst);
        self
    }
    /// Adds an operation occurrence to insert or replace.
    pub fn with_op_occ(mut self, op: VnfLcmOpOcc) -> Self {
        self.put_op_occs.push(op);
        self
    }
    /// Adds an instance to delete.
    pub fn with_deleted_instance(mut self, id: VnfInstanceId) -> Self {
        self.delete_instances.push(id);
        self
    }
    /// Adds a condition: the batch applies only if it holds.
    pub fn with_precondition(mut self, p: Precondition) -> Self {
        self.preconditions.push(p);
        self
    }
}

/// Filter of [`Store::op_occs`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OpOccFilter {
    /// Only the occurrences of this instance.
    pub vnf_instance_id: Option<VnfInstanceId>,
}

impl OpOccFilter {
    /// Every occurrence.
    pub fn all() -> Self {
        Self::default()
    }
    /// The occurrences of one instance.
    pub fn instance(id: VnfInstanceId) -> Self {
        Self {
            vnf_instance_id: Some(id),
        }
    }
}

/// One page of instances to read with [`Store::instance_page`]: the instances whose id sorts
/// after `after` (keyset paging), at most `limit` of them, ordered by id (byte order),
/// optionally only those whose `vnfInstanceName` is one of `names` and whose id is one of
/// `ids`. A store answers it in SQL from an index, so a page costs O(page + log N) however
/// many instances are stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InstanceQuery {
    /// Only the instances whose id sorts after this one (none: from the first).
    pub after: Option<VnfInstanceId>,
    /// The most instances returned.
    pub limit: usize,
    /// Only the instances whose `vnfInstanceName` is one of these (an empty list: none; an
    /// instance without a name never matches).
    pub names: Option<Vec<String>>,
    /// Only the instances whose id is one of these (an empty list: none).
    pub ids: Option<Vec<VnfInstanceId>>,
}

impl InstanceQuery {
    /// The first `limit` instances.
    pub fn first(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }
    /// Only the instances whose id sorts after `after`.
    pub fn after(mut self, after: Option<VnfInstanceId>) -> Self {
        self.after = after;
        self
    }
    /// Only the instances named one of `names`.
    pub fn named(mut self, names: Vec<String>) -> Self {
        self.names = Some(names);
        self
    }
    /// Only the instances whose id is one of `ids`.
    pub fn with_ids(mut self, ids: Vec<VnfInstanceId>) -> Self {
        self.ids = Some(ids);
        self
    }
    /// Whether `inst` is one of the instances the query selects (its `after`, `names` and
    /// `ids`; not its `limit`).
    pub fn admits(&self, inst: &VnfInstance) -> bool {
        self.after.as_ref().is_none_or(|a| inst.id > *a)
            && self.names.as_ref().is_none_or(|names| {
                inst.vnf_instance_name
                    .as_ref()
                    .is_some_and(|n| names.iter().any(|x| x == n))
            })
            && self.ids.as_ref().is_none_or(|ids| ids.contains(&inst.id))
    }
}

/// Persists VNF instances and LCM operation occurrences.
///
/// # Contract
/// - [`Store::commit`] applies a whole [`StoreBatch`] or nothing: a crash never leaves half of
///   it. Deletes are applied after puts of the same batch.
/// - Loading an unknown id fails with [`DriverError::NotFound`].
/// - Lists are ordered: instances by id, operation occurrences by `startTime` then id.
/// - A stored object is returned exactly as it was written (serde round trip).
/// - Every put of an object makes its [`Version`] one more (1 for a new object); a batch's
///   [`Precondition`]s are checked against the versions before the batch, inside the same
///   atomic step, and a failed one fails the whole batch with [`DriverError::Conflict`]. This
///   is what keeps one LCM operation per instance across processes (see
///   [`crate::lifecycle::Lifecycle`]); a PostgreSQL store implements it with
///   `UPDATE .. WHERE version = $v` in one transaction.
#[async_trait]
pub trait Store: Send + Sync + Debug + 'static {
    /// Applies a batch atomically.
    async fn commit(&self, batch: StoreBatch) -> Result<(), DriverError>;
    /// Loads one instance.
    async fn instance(&self, id: &VnfInstanceId) -> Result<VnfInstance, DriverError>;
    /// Loads one instance with its version.
    async fn instance_entry(
        &self,
        id: &VnfInstanceId,
    ) -> Result<Versioned<VnfInstance>, DriverError>;
    /// Loads one operation occurrence with its version.
    async fn op_occ_entry(&self, id: &OpOccId) -> Result<Versioned<VnfLcmOpOcc>, DriverError>;
    /// Lists every instance.
    async fn instances(&self) -> Result<Vec<VnfInstance>, DriverError>;
    /// Reads one page of instances ([`InstanceQuery`]), ordered by id. The default reads every
    /// instance ([`Store::instances`]) and keeps the page: right for a store in memory; a
    /// store in a database answers it with one keyset query (`WHERE id > $after … ORDER BY id
    /// LIMIT $n`).
    async fn instance_page(&self, query: &InstanceQuery) -> Result<Vec<VnfInstance>, DriverError> {
        Ok(self
            .instances()
            .await?
            .into_iter()
            .filter(|i| query.admits(i))
            .take(query.limit)
            .collect())
    }
    /// Loads one operation occurrence.
    async fn op_occ(&self, id: &OpOccId) -> Result<VnfLcmOpOcc, DriverError>;
    /// Lists operation occurrences.
    async fn op_occs(&self, filter: OpOccFilter) -> Result<Vec<VnfLcmOpOcc>, DriverError>;
}

const DRIVER: &str = "memory";

/// An in-memory [`Store`]. Clones share the same state.
///
/// ```
/// use vnfm_core::driver::{Store, StoreBatch};
/// use vnfm_core::store::MemoryStore;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let view = store.clone();
/// store.commit(StoreBatch::new()).await?;
/// assert!(view.instances().await?.is_empty());
/// # Ok::<(), vnfm_core::driver::DriverError>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    instances: BTreeMap<VnfInstanceId, (VnfInstance, Version)>,
    op_occs: BTreeMap<OpOccId, (VnfLcmOpOcc, Version)>,
    documents: BTreeMap<String, String>,
}

impl State {
    fn check(&self, p: &Precondition) -> Result<(), DriverError> {
        let (holds, found) = match p {
            Precondition::InstanceAt { id, version } => {
                let found = self.instances.get(id).map(|(_, v)| *v);
                (found == Some(*version), found)
            }
            Precondition::OpOccAt { id, version } => {
                let found = self.op_occs.get(id).map(|(_, v)| *v);
                (found == Some(*version), found)
            }
            Precondition::OpOccAbsent { id } => {
                let found = self.op_occs.get(id).map(|(_, v)| *v);
                (found.is_none(), found)
            }
        };
        if holds {
            Ok(())
        } else {
            Err(DriverError::Conflict {
                driver: DRIVER,
                message: p.conflict_message(found),
            })
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The document `name` a batch wrote ([`StoreBatch::documents`]), if any.
    pub fn document(&self, name: &str) -> Option<String> {
        self.lock().documents.get(name).cloned()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is only mutated after a batch has been validated, by code that cannot
        // panic half-way, so a poisoned lock still guards consistent data.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn commit(&self, batch: StoreBatch) -> Result<(), DriverError> {
        let mut state = self.lock();
        // Validate everything first, then apply: nothing below can fail.
        for p in &batch.preconditions {
            state.check(p)?;
        }
        let put_ids: BTreeSet<&VnfInstanceId> = batch.put_instances.iter().map(|i| &i.id).collect();
        for op in &batch.put_op_occs {
            let id = &op.vnf_instance_id;
            if !put_ids.contains(id) && !state.instances.contains_key(id) {
                return Err(DriverError::Conflict {
                    driver: DRIVER,
                    message: unknown_instance_message(&op.id, id),
                });
            }
        }
        let StoreBatch {
            put_instances,
            delete_instances,
            put_op_occs,
            preconditions: _,
            documents,
            prune_documents,
        } = batch;
        for (prefix, upto) in &prune_documents {
            state
                .documents
                .retain(|name, _| !(name.starts_with(prefix.as_str()) && name <= upto));
        }
        state.documents.extend(documents);
        for inst in put_instances {
            let v = state
                .instances
                .get(&inst.id)
                .map_or(Version(1), |(_, v)| v.next());
            state.instances.insert(inst.id.clone(), (inst, v));
        }
        for op in put_op_occs {
            let v = state
                .op_occs
                .get(&op.id)
                .map_or(Version(1), |(_, v)| v.next());
            state.op_occs.insert(op.id.clone(), (op, v));
        }
        let deleted: BTreeSet<VnfInstanceId> = delete_instances.into_iter().collect();
        if !deleted.is_empty() {
            state.instances.retain(|id, _| !deleted.contains(id));
            state
                .op_occs
                .retain(|_, (op, _)| !deleted.contains(&op.vnf_instance_id));
        }
        Ok(())
    }

    async fn instance(&self, id: &VnfInstanceId) -> Result<VnfInstance, DriverError> {
        self.instance_entry(id).await.map(|e| e.value)
    }

    async fn instance_entry(
        &self,
        id: &VnfInstanceId,
    ) -> Result<Versioned<VnfInstance>, DriverError> {
        self.lock()
            .instances
            .get(id)
            .map(|(value, version)| Versioned {
                value: value.clone(),
                version: *version,
            })
            .ok_or_else(|| DriverError::NotFound {
                driver: DRIVER,
                what: format!("VNF instance {id}"),
            })
    }

    async fn instances(&self) -> Result<Vec<VnfInstance>, DriverError> {
        Ok(self
            .lock()
            .instances
            .values()
            .map(|(i, _)| i.clone())
            .collect())
    }

    async fn instance_page(&self, query: &InstanceQuery) -> Result<Vec<VnfInstance>, DriverError> {
        use std::ops::Bound;
        let state = self.lock();
        let from = query
            .after
            .as_ref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        Ok(state
            .instances
            .range::<VnfInstanceId, _>((from, Bound::Unbounded))
            .map(|(_, (i, _))| i)
            .filter(|i| query.admits(i))
            .take(query.limit)
            .cloned()
            .collect())
    }

    async fn op_occ(&self, id: &OpOccId) -> Result<VnfLcmOpOcc, DriverError> {
        self.op_occ_entry(id).await.map(|e| e.value)
    }

    async fn op_occ_entry(&self, id: &OpOccId) -> Result<Versioned<VnfLcmOpOcc>, DriverError> {
        self.lock()
            .op_occs
            .get(id)
            .map(|(value, version)| Versioned {
                value: value.clone(),
                version: *version,
            })
            .ok_or_else(|| DriverError::NotFound {
                driver: DRIVER,
                what: format!("VNF LCM operation occurrence {id}"),
            })
    }

    async fn op_occs(&self, filter: OpOccFilter) -> Result<Vec<VnfLcmOpOcc>, DriverError> {
        let state = self.lock();
        let mut out: Vec<VnfLcmOpOcc> = state
            .op_occs
            .values()
            .map(|(op, _)| op)
            .filter(|op| {
                filter
                    .vnf_instance_id
                    .as_ref()
                    .is_none_or(|id| *id == op.vnf_instance_id)
            })
            .cloned()
            .collect();
        out.sort_by(|a, b| (a.start_time, &a.id).cmp(&(b.start_time, &b.id)));
        Ok(out)
    }
}

/// The message of the [`DriverError::Conflict`] a store returns for an operation occurrence
/// whose instance does not exist, shared by the store implementations so that they word it
/// the same way.
pub fn unknown_instance_message(op: &OpOccId, instance: &VnfInstanceId) -> String {
    format!(
        "operation occurrence {op} refers to VNF instance {instance}, which does not exist \
         (expected an instance stored before or put in the same batch)"
    )
}

/// The behaviour every [`Store`] must have, one `pub async fn` per behaviour.
///
/// Each function takes an **empty** store (it asserts so), panics with a message when the
/// store misbehaves, and returns normally otherwise. A store's tests call every function,
/// each with a fresh store:
///
/// ```
/// # #[cfg(feature = "conformance")]
/// # async fn demo() {
/// use vnfm_core::store::{conformance, MemoryStore};
/// conformance::round_trip(&MemoryStore::new()).await;
/// conformance::batch_is_atomic(&MemoryStore::new()).await;
/// # }
/// ```
#[cfg(any(test, feature = "conformance"))]
#[allow(clippy::unwrap_used, clippy::expect_used)] // a test suite: failing means panicking
pub mod conformance {
    use serde_json::json;

    use super::{InstanceQuery, OpOccFilter, Precondition, Store, StoreBatch, Version};
    use crate::error::DriverError;
    use crate::id::{OpOccId, VnfInstanceId};
    use crate::lcm::{VnfInstance, VnfLcmOpOcc};

    /// A `VnfInstance` with every attribute SOL003 makes mandatory, built from its JSON form
    /// so that fields added to the struct later do not break callers.
    ///
    /// # Panics
    /// When the JSON no longer deserializes (the model changed incompatibly).
    pub fn instance(id: &str, vnfd_id: &str) -> VnfInstance {
        serde_json::from_value(json!({
            "id": id,
            "vnfInstanceName": format!("vnf-{id}"),
            "vnfdId": vnfd_id,
            "vnfProvider": "Company",
            "vnfProductName": "Sample VNF",
            "vnfSoftwareVersion": "1.0",
            "vnfdVersion": "1.0",
            "instantiationState": "NOT_INSTANTIATED",
            "_links": {
                "self": { "href": format!("/vnflcm/v2/vnf_instances/{id}") }
            }
        }))
        .expect("a SOL003 VnfInstance JSON object deserializes")
    }

    /// A `VnfLcmOpOcc` of `instance` started at `start_time` (RFC 3339), with every attribute
    /// SOL003 makes mandatory, built from its JSON form.
    ///
    /// # Panics
    /// When `start_time` is not RFC 3339 or the model changed incompatibly.
    pub fn op_occ(id: &str, instance: &str, start_time: &str) -> VnfLcmOpOcc {
        serde_json::from_value(json!({
            "id": id,
            "operationState": "COMPLETED",
            "stateEnteredTime": start_time,
            "startTime": start_time,
            "vnfInstanceId": instance,
            "operation": "INSTANTIATE",
            "isAutomaticInvocation": false,
            "isCancelPending": false,
            "_links": {
                "self": { "href": format!("/vnflcm/v2/vnf_lcm_op_occs/{id}") },
                "vnfInstance": { "href": format!("/vnflcm/v2/vnf_instances/{instance}") }
            }
        }))
        .expect("a SOL003 VnfLcmOpOcc JSON object deserializes")
    }

    async fn assert_empty(store: &dyn Store) {
        assert!(
            store.instances().await.unwrap().is_empty()
                && store.op_occs(OpOccFilter::all()).await.unwrap().is_empty(),
            "conformance functions expect an empty store: {store:?}"
        );
    }

    fn op_ids(ops: &[VnfLcmOpOcc]) -> Vec<&str> {
        ops.iter().map(|o| o.id.as_str()).collect()
    }

    fn inst_ids(insts: &[VnfInstance]) -> Vec<&str> {
        insts.iter().map(|i| i.id.as_str()).collect()
    }

    /// What is written is read back exactly (also as JSON), and a put replaces an object
    /// without losing the operation occurrences of a replaced instance.
    pub async fn round_trip(store: &dyn Store) {
        assert_empty(store).await;
        let inst = instance("inst-1", "vnfd-a");
        let op = op_occ("op-1", "inst-1", "2024-05-01T10:20:30.123456789Z");
        store
            .commit(
                StoreBatch::new()
                    .with_instance(inst.clone())
                    .with_op_occ(op.clone()),
            )
            .await
            .unwrap();
        let loaded = store.instance(&VnfInstanceId::new("inst-1")).await.unwrap();
        assert_eq!(loaded, inst);
        assert_eq!(
            serde_json::to_value(&loaded).unwrap(),
            serde_json::to_value(&inst).unwrap()
        );
        let loaded = store.op_occ(&OpOccId::new("op-1")).await.unwrap();
        assert_eq!(loaded, op);
        assert_eq!(loaded.start_time, op.start_time, "nanoseconds are kept");
        assert_eq!(store.instances().await.unwrap(), vec![inst]);
        assert_eq!(store.op_occs(OpOccFilter::all()).await.unwrap(), vec![op]);

        // Replacing the instance keeps its operation occurrence.
        let replaced = instance("inst-1", "vnfd-b");
        store
            .commit(StoreBatch::new().with_instance(replaced.clone()))
            .await
            .unwrap();
        assert_eq!(
            store.instance(&VnfInstanceId::new("inst-1")).await.unwrap(),
            replaced
        );
        assert_eq!(
            op_ids(&store.op_occs(OpOccFilter::all()).await.unwrap()),
            ["op-1"],
            "replacing an instance must keep its operation occurrences"
        );

        // Replacing the operation occurrence (new start time) replaces it, not adds one.
        let moved = op_occ("op-1", "inst-1", "2024-05-02T00:00:00Z");
        store
            .commit(StoreBatch::new().with_op_occ(moved.clone()))
            .await
            .unwrap();
        assert_eq!(
            store.op_occs(OpOccFilter::all()).await.unwrap(),
            vec![moved]
        );

        // An empty batch changes nothing.
        store.commit(StoreBatch::new()).await.unwrap();
        assert_eq!(store.instances().await.unwrap(), vec![replaced]);
    }

    /// Instances are listed by id; operation occurrences by `startTime` (to the nanosecond,
    /// whatever the precision they were written with), then id; the filter selects one
    /// instance's occurrences.
    pub async fn list_ordering(store: &dyn Store) {
        assert_empty(store).await;
        store
            .commit(
                StoreBatch::new()
                    .with_instance(instance("b", "vnfd"))
                    .with_instance(instance("c", "vnfd")),
            )
            .await
            .unwrap();
        store
            .commit(
                StoreBatch::new()
                    .with_instance(instance("a", "vnfd"))
                    .with_instance(instance("B", "vnfd")),
            )
            .await
            .unwrap();
        assert_eq!(
            inst_ids(&store.instances().await.unwrap()),
            ["B", "a", "b", "c"],
            "instances are ordered by id (byte order)"
        );

        let batch = StoreBatch::new()
            .with_op_occ(op_occ("op-late", "a", "2024-01-02T00:00:00Z"))
            .with_op_occ(op_occ("op-half", "b", "2024-01-01T00:00:00.5Z"))
            .with_op_occ(op_occ("op-z", "a", "2024-01-01T00:00:00Z"))
            .with_op_occ(op_occ("op-y", "b", "2024-01-01T00:00:00Z"))
            .with_op_occ(op_occ("op-early", "c", "2023-12-31T23:59:59.999999999Z"))
            .with_op_occ(op_occ("op-nano", "a", "2024-01-01T00:00:00.000000001Z"));
        store.commit(batch).await.unwrap();
        assert_eq!(
            op_ids(&store.op_occs(OpOccFilter::all()).await.unwrap()),
            ["op-early", "op-y", "op-z", "op-nano", "op-half", "op-late"],
            "operation occurrences are ordered by startTime, then id"
        );
        assert_eq!(
            op_ids(
                &store
                    .op_occs(OpOccFilter::instance(VnfInstanceId::new("a")))
                    .await
                    .unwrap()
            ),
            ["op-z", "op-nano", "op-late"]
        );
        assert!(store
            .op_occs(OpOccFilter::instance(VnfInstanceId::new("B")))
            .await
            .unwrap()
            .is_empty());
    }

    /// [`Store::instance_page`]: pages ordered by id after a marker (one that names no
    /// instance too), at most `limit`; the name and id restrictions, which follow a rename and
    /// a delete.
    pub async fn instance_pages(store: &dyn Store) {
        assert_empty(store).await;
        let named = |id: &str, name: Option<&str>| {
            let mut i = instance(id, "vnfd");
            i.vnf_instance_name = name.map(str::to_owned);
            i
        };
        store
            .commit(
                StoreBatch::new()
                    .with_instance(named("c", Some("edge")))
                    .with_instance(named("B", Some("vnf-B")))
                    .with_instance(named("d", None))
                    .with_instance(named("a", Some("edge")))
                    .with_instance(named("b", Some("core"))),
            )
            .await
            .unwrap();
        let page = |q: InstanceQuery| async move {
            inst_ids(&store.instance_page(&q).await.unwrap())
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<String>>()
        };
        let id = |s: &str| Some(VnfInstanceId::new(s));
        assert_eq!(
            page(InstanceQuery::first(2)).await,
            ["B", "a"],
            "the first page, by id"
        );
        assert_eq!(
            page(InstanceQuery::first(2).after(id("a"))).await,
            ["b", "c"]
        );
        assert_eq!(page(InstanceQuery::first(2).after(id("c"))).await, ["d"]);
        assert!(page(InstanceQuery::first(2).after(id("d")))
            .await
            .is_empty());
        assert_eq!(
            page(InstanceQuery::first(10).after(id("a0"))).await,
            ["b", "c", "d"],
            "a marker that names no instance: the ids after it"
        );
        assert!(page(InstanceQuery::first(0)).await.is_empty(), "limit 0");
        let edge = || vec!["edge".to_owned()];
        assert_eq!(
            page(InstanceQuery::first(10).named(edge())).await,
            ["a", "c"]
        );
        assert_eq!(page(InstanceQuery::first(1).named(edge())).await, ["a"]);
        assert_eq!(
            page(InstanceQuery::first(10).named(edge()).after(id("a"))).await,
            ["c"]
        );
        assert_eq!(
            page(InstanceQuery::first(10).named(vec!["edge".into(), "vnf-B".into()])).await,
            ["B", "a", "c"]
        );
        assert!(page(InstanceQuery::first(10).named(vec![]))
            .await
            .is_empty());
        assert!(page(InstanceQuery::first(10).named(vec!["nope".into()]))
            .await
            .is_empty());
        let ids = |v: &[&str]| v.iter().map(|s| VnfInstanceId::new(*s)).collect::<Vec<_>>();
        assert_eq!(
            page(InstanceQuery::first(10).with_ids(ids(&["c", "B", "zz"]))).await,
            ["B", "c"]
        );
        assert_eq!(
            page(
                InstanceQuery::first(10)
                    .with_ids(ids(&["c", "B"]))
                    .named(edge())
            )
            .await,
            ["c"]
        );
        assert!(page(InstanceQuery::first(10).with_ids(vec![]))
            .await
            .is_empty());
        // A marker or an id may be any text (a client's): a NUL included.
        assert_eq!(
            page(InstanceQuery::first(10).after(id("a\u{0}x"))).await,
            ["b", "c", "d"]
        );
        assert_eq!(
            page(InstanceQuery::first(10).with_ids(ids(&["a\u{0}", "b"]))).await,
            ["b"]
        );

        // A rename and a delete are followed.
        store
            .commit(
                StoreBatch::new()
                    .with_instance(named("a", Some("core")))
                    .with_deleted_instance(VnfInstanceId::new("c")),
            )
            .await
            .unwrap();
        assert!(page(InstanceQuery::first(10).named(edge()))
            .await
            .is_empty());
        assert_eq!(
            page(InstanceQuery::first(10).named(vec!["core".into()])).await,
            ["a", "b"]
        );
        // Any text is a name: a NUL, quotes, a backslash (a PostgreSQL text cannot hold a NUL).
        let odd = "n\u{0}l \"q\" \\ é";
        store
            .commit(StoreBatch::new().with_instance(named("e", Some(odd))))
            .await
            .unwrap();
        assert_eq!(
            page(InstanceQuery::first(10).named(vec![odd.into()])).await,
            ["e"]
        );
        assert!(page(InstanceQuery::first(10).named(vec!["n".into()]))
            .await
            .is_empty());
        assert_eq!(
            store
                .instance_page(&InstanceQuery::first(1).after(id("a")))
                .await
                .unwrap(),
            vec![named("b", Some("core"))],
            "a page holds the instances as written"
        );
    }

    /// Unknown ids fail with `NotFound`; listing the occurrences of an unknown instance is an
    /// empty list.
    pub async fn not_found(store: &dyn Store) {
        assert_empty(store).await;
        let err = store
            .instance(&VnfInstanceId::new("nope"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, DriverError::NotFound { .. }),
            "loading an unknown instance: {err:?}"
        );
        assert!(err.to_string().contains("nope"), "{err}");
        let err = store.op_occ(&OpOccId::new("nope-op")).await.unwrap_err();
        assert!(
            matches!(err, DriverError::NotFound { .. }),
            "loading an unknown op occ: {err:?}"
        );
        assert!(err.to_string().contains("nope-op"), "{err}");
        assert!(store
            .op_occs(OpOccFilter::instance(VnfInstanceId::new("nope")))
            .await
            .unwrap()
            .is_empty());
    }

    /// Deleting an instance deletes its operation occurrences and nothing else; deletes come
    /// after the puts of the same batch; deleting an unknown instance is a no-op.
    pub async fn delete_cascades(store: &dyn Store) {
        assert_empty(store).await;
        store
            .commit(
                StoreBatch::new()
                    .with_instance(instance("keep", "vnfd"))
                    .with_instance(instance("gone", "vnfd"))
                    .with_op_occ(op_occ("op-keep", "keep", "2024-01-01T00:00:00Z"))
                    .with_op_occ(op_occ("op-gone-1", "gone", "2024-01-01T00:00:01Z"))
                    .with_op_occ(op_occ("op-gone-2", "gone", "2024-01-01T00:00:02Z")),
            )
            .await
            .unwrap();
        store
            .commit(StoreBatch::new().with_deleted_instance(VnfInstanceId::new("gone")))
            .await
            .unwrap();
        assert!(store
            .instance(&VnfInstanceId::new("gone"))
            .await
            .unwrap_err()
            .is_not_found());
        for op in ["op-gone-1", "op-gone-2"] {
            assert!(
                store
                    .op_occ(&OpOccId::new(op))
                    .await
                    .unwrap_err()
                    .is_not_found(),
                "{op} must be deleted with its instance"
            );
        }
        assert!(store
            .op_occs(OpOccFilter::instance(VnfInstanceId::new("gone")))
            .await
            .unwrap()
            .is_empty());
        assert_eq!(inst_ids(&store.instances().await.unwrap()), ["keep"]);
        assert_eq!(
            op_ids(&store.op_occs(OpOccFilter::all()).await.unwrap()),
            ["op-keep"]
        );

        // Put and delete in one batch: the delete wins, occurrence included.
        store
            .commit(
                StoreBatch::new()
                    .with_instance(instance("brief", "vnfd"))
                    .with_op_occ(op_occ("op-brief", "brief", "2024-01-03T00:00:00Z"))
                    .with_deleted_instance(VnfInstanceId::new("brief")),
            )
            .await
            .unwrap();
        assert!(store
            .instance(&VnfInstanceId::new("brief"))
            .await
            .unwrap_err()
            .is_not_found());
        assert!(store
            .op_occ(&OpOccId::new("op-brief"))
            .await
            .unwrap_err()
            .is_not_found());

        // Deleting an unknown instance changes nothing.
        store
            .commit(StoreBatch::new().with_deleted_instance(VnfInstanceId::new("never")))
            .await
            .unwrap();
        assert_eq!(inst_ids(&store.instances().await.unwrap()), ["keep"]);
    }

    /// A batch whose last part fails (an operation occurrence of an unknown instance) fails
    /// with `Conflict` naming both ids and leaves the store exactly as it was.
    pub async fn batch_is_atomic(store: &dyn Store) {
        assert_empty(store).await;
        let old = instance("old", "vnfd-1");
        let old_op = op_occ("op-old", "old", "2024-01-01T00:00:00Z");
        store
            .commit(
                StoreBatch::new()
                    .with_instance(old.clone())
                    .with_op_occ(old_op.clone()),
            )
            .await
            .unwrap();

        let bad = StoreBatch::new()
            .with_instance(instance("new", "vnfd-1"))
            .with_instance(instance("old", "vnfd-2"))
            .with_op_occ(op_occ("op-new", "new", "2024-01-02T00:00:00Z"))
            .with_op_occ(op_occ("op-old", "old", "2024-01-05T00:00:00Z"))
            .with_op_occ(op_occ("op-orphan", "missing", "2024-01-03T00:00:00Z"))
            .with_deleted_instance(VnfInstanceId::new("old"));
        let err = store.commit(bad).await.unwrap_err();
        assert!(
            matches!(err, DriverError::Conflict { .. }),
            "an op occ of an unknown instance is a conflict: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("op-orphan") && msg.contains("missing"),
            "the error names the op occ and the instance: {msg}"
        );

        assert!(
            store
                .instance(&VnfInstanceId::new("new"))
                .await
                .unwrap_err()
                .is_not_found(),
            "a failed batch must not leave its instances"
        );
        assert!(
            store
                .op_occ(&OpOccId::new("op-new"))
                .await
                .unwrap_err()
                .is_not_found(),
            "a failed batch must not leave its operation occurrences"
        );
        assert_eq!(store.instances().await.unwrap(), vec![old]);
        assert_eq!(
            store.op_occs(OpOccFilter::all()).await.unwrap(),
            vec![old_op]
        );
    }

    /// Every put makes an object's version one more (1 when new); a batch whose precondition
    /// does not hold fails whole with a conflict naming the object and both versions, and
    /// writes nothing: of two writers that read one version, exactly one wins.
    pub async fn versions_and_preconditions(store: &dyn Store) {
        assert!(
            store.instances().await.unwrap().is_empty(),
            "store not empty"
        );
        let i = instance("inst-v", "vnfd-1");
        store
            .commit(StoreBatch::new().with_instance(i.clone()))
            .await
            .unwrap();
        let e = store.instance_entry(&i.id).await.unwrap();
        assert_eq!(e.version, Version(1), "a new instance is at version 1");
        assert_eq!(e.value, i);
        // Two writers read version 1; the first wins, the second conflicts.
        let mut a = i.clone();
        a.vnf_instance_name = Some("a".into());
        let mut b = i.clone();
        b.vnf_instance_name = Some("b".into());
        let at1 = Precondition::InstanceAt {
            id: i.id.clone(),
            version: Version(1),
        };
        store
            .commit(
                StoreBatch::new()
                    .with_instance(a.clone())
                    .with_precondition(at1.clone()),
            )
            .await
            .unwrap();
        let op = op_occ("op-v", "inst-v", "2026-01-01T00:00:00Z");
        let err = store
            .commit(
                StoreBatch::new()
                    .with_instance(b)
                    .with_op_occ(op.clone())
                    .with_precondition(at1),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, DriverError::Conflict { .. }),
            "stale version: expected a conflict, got {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("inst-v")
                && msg.contains("version 1 expected")
                && msg.contains("2 is stored"),
            "the conflict names the instance and both versions: {msg}"
        );
        let e = store.instance_entry(&i.id).await.unwrap();
        assert_eq!(
            (e.version, e.value),
            (Version(2), a),
            "the loser wrote nothing"
        );
        assert!(
            store.op_occ(&op.id).await.unwrap_err().is_not_found(),
            "the loser's occurrence was not written"
        );
        // Occurrences: absent, then versioned.
        let absent = Precondition::OpOccAbsent { id: op.id.clone() };
        store
            .commit(
                StoreBatch::new()
                    .with_op_occ(op.clone())
                    .with_precondition(absent.clone()),
            )
            .await
            .unwrap();
        let err = store
            .commit(
                StoreBatch::new()
                    .with_op_occ(op.clone())
                    .with_precondition(absent),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, DriverError::Conflict { .. }), "{err:?}");
        assert_eq!(
            store.op_occ_entry(&op.id).await.unwrap().version,
            Version(1)
        );
        store
            .commit(StoreBatch::new().with_op_occ(op.clone()).with_precondition(
                Precondition::OpOccAt {
                    id: op.id.clone(),
                    version: Version(1),
                },
            ))
            .await
            .unwrap();
        let err = store
            .commit(StoreBatch::new().with_op_occ(op.clone()).with_precondition(
                Precondition::OpOccAt {
                    id: op.id.clone(),
                    version: Version(1),
                },
            ))
            .await
            .unwrap_err();
        assert!(matches!(err, DriverError::Conflict { .. }), "{err:?}");
        assert_eq!(
            store.op_occ_entry(&op.id).await.unwrap().version,
            Version(2)
        );
        // A precondition on an unknown object does not hold.
        let err = store
            .commit(
                StoreBatch::new().with_precondition(Precondition::InstanceAt {
                    id: "nope".into(),
                    version: Version(1),
                }),
            )
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("none is stored"),
            "unknown object: {err}"
        );
    }

    /// Data committed through one handle is there, unchanged, in a handle obtained by
    /// `reopen` after the first one was dropped (for a persistent store: reopening the same
    /// file; for an in-memory store: a clone).
    pub async fn survives_reopen<F>(store: Box<dyn Store>, reopen: F)
    where
        F: FnOnce() -> Box<dyn Store>,
    {
        assert_empty(store.as_ref()).await;
        let inst = instance("persisted", "vnfd");
        let op = op_occ(
            "op-persisted",
            "persisted",
            "2024-02-29T12:00:00.000000042Z",
        );
        store
            .commit(
                StoreBatch::new()
                    .with_instance(inst.clone())
                    .with_op_occ(op.clone()),
            )
            .await
            .unwrap();
        drop(store);
        let store = reopen();
        assert_eq!(store.instances().await.unwrap(), vec![inst]);
        assert_eq!(store.op_occs(OpOccFilter::all()).await.unwrap(), vec![op]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_round_trip() {
        conformance::round_trip(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn memory_list_ordering() {
        conformance::list_ordering(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn memory_instance_pages() {
        conformance::instance_pages(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn memory_not_found() {
        conformance::not_found(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn memory_delete_cascades() {
        conformance::delete_cascades(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn memory_batch_is_atomic() {
        conformance::batch_is_atomic(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn conformance_versions_and_preconditions() {
        conformance::versions_and_preconditions(&MemoryStore::new()).await;
    }

    #[tokio::test]
    async fn memory_clones_share_state() {
        let store = MemoryStore::new();
        let clone = store.clone();
        conformance::survives_reopen(Box::new(store), move || Box::new(clone)).await;
    }

    #[tokio::test]
    async fn memory_separate_stores_do_not_share() {
        let a = MemoryStore::new();
        let b = MemoryStore::new();
        a.commit(StoreBatch::new().with_instance(conformance::instance("x", "v")))
            .await
            .unwrap();
        assert!(b.instances().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn memory_concurrent_commits_from_tasks() {
        let store = MemoryStore::new();
        let mut handles = Vec::new();
        for t in 0..4 {
            let store = store.clone();
            handles.push(std::thread::spawn(move || {
                for i in 0..25 {
                    let id = format!("t{t}-{i:02}");
                    let batch = StoreBatch::new()
                        .with_instance(conformance::instance(&id, "v"))
                        .with_op_occ(conformance::op_occ(
                            &format!("op-{id}"),
                            &id,
                            "2024-01-01T00:00:00Z",
                        ));
                    block_on(store.commit(batch)).unwrap();
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(store.instances().await.unwrap().len(), 100);
        assert_eq!(store.op_occs(OpOccFilter::all()).await.unwrap().len(), 100);
    }

    /// Runs a future that never waits (the memory store's) to completion on this thread.
    fn block_on<F: std::future::Future>(fut: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(fut)
    }

    #[test]
    fn unknown_instance_message_names_both_ids() {
        let m = unknown_instance_message(&OpOccId::new("op-9"), &VnfInstanceId::new("vnf-7"));
        assert!(m.contains("op-9") && m.contains("vnf-7"), "{m}");
    }
}
