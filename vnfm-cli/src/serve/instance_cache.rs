//! The server's bounded cache of VNF instances ([`InstanceCache`]): at most
//! [`INSTANCE_CACHE_CAPACITY`] instances, the least recently used evicted first, so that the
//! server's memory does not grow with the operator's fleet (the store holds every instance).
//!
//! Its readers are synchronous (the alert handler's `InstanceLookup`, the outbox's staging
//! under the commit's gate): each first [`InstanceCache::load`]s the few instances it names
//! (from the cache, the misses with one keyset query of the store,
//! `Store::instance_page` with their ids) into a map of its own, which it then reads without a
//! store call and without eviction getting in the way. The commits of this server update it
//! ([`InstanceCache::put`], [`InstanceCache::remove`]); another process's writes are seen once
//! an instance is evicted and read again (as before: the cache is per process).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use vnfm_core::driver::{DriverError, InstanceQuery, Store};
use vnfm_core::id::VnfInstanceId;
use vnfm_core::lcm::VnfInstance;

/// The most instances the cache keeps.
pub(crate) const INSTANCE_CACHE_CAPACITY: usize = 4096;

/// A bounded LRU cache of instances over a store.
pub(crate) struct InstanceCache {
    store: Arc<dyn Store>,
    capacity: usize,
    lru: Mutex<Lru>,
    /// Other processes change the instances while this one runs (replicas on PostgreSQL):
    /// [`InstanceCache::load`] reads every instance it is asked for from the store, never a
    /// cached copy another replica may have changed since.
    shared: bool,
}

impl std::fmt::Debug for InstanceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceCache")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

/// The entries and their order of use (a tick per use; the smallest is the oldest).
#[derive(Default)]
struct Lru {
    map: HashMap<VnfInstanceId, (VnfInstance, u64)>,
    order: BTreeMap<u64, VnfInstanceId>,
    tick: u64,
}

impl Lru {
    fn touch(&mut self, id: &VnfInstanceId) -> Option<VnfInstance> {
        self.tick += 1;
        let tick = self.tick;
        let (inst, used) = self.map.get_mut(id)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, id.clone());
        Some(inst.clone())
    }

    fn put(&mut self, inst: VnfInstance, capacity: usize) {
        self.tick += 1;
        let tick = self.tick;
        let id = inst.id.clone();
        if let Some((_, used)) = self.map.insert(id.clone(), (inst, tick)) {
            self.order.remove(&used);
        }
        self.order.insert(tick, id);
        while self.map.len() > capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.map.remove(&oldest);
        }
    }

    fn remove(&mut self, id: &VnfInstanceId) {
        if let Some((_, used)) = self.map.remove(id) {
            self.order.remove(&used);
        }
    }
}

impl InstanceCache {
    /// An empty cache of at most `capacity` instances (at least 1) of `store`.
    pub(crate) fn new(store: Arc<dyn Store>, capacity: usize) -> Self {
        Self {
            store,
            capacity: capacity.max(1),
            lru: Mutex::default(),
            shared: false,
        }
    }

    /// The cache of a store that other processes change while this one runs (replicas on
    /// PostgreSQL): every [`InstanceCache::load`] reads the store (one query), as a cached copy
    /// may be older than another replica's commit.
    pub(crate) fn shared(mut self) -> Self {
        self.shared = true;
        self
    }

    fn lru(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The instances cached now.
    pub(crate) fn len(&self) -> usize {
        self.lru().map.len()
    }

    /// The instance `id` if it is cached (made the most recently used).
    pub(crate) fn cached(&self, id: &VnfInstanceId) -> Option<VnfInstance> {
        self.lru().touch(id)
    }

    /// Keeps `inst` as committed (evicting the least recently used beyond the capacity).
    pub(crate) fn put(&self, inst: VnfInstance) {
        self.lru().put(inst, self.capacity);
    }

    /// Forgets `id` (deleted).
    pub(crate) fn remove(&self, id: &VnfInstanceId) {
        self.lru().remove(id);
    }

    /// The instances among `ids` that exist: the cached ones, the others read from the store
    /// with one query (and cached). An id absent from the result has no instance.
    ///
    /// # Errors
    /// The store's, when the misses cannot be read.
    pub(crate) async fn load(
        &self,
        ids: impl IntoIterator<Item = VnfInstanceId>,
    ) -> Result<BTreeMap<VnfInstanceId, VnfInstance>, DriverError> {
        let ids: BTreeSet<VnfInstanceId> = ids.into_iter().collect();
        let mut out = BTreeMap::new();
        let mut misses = Vec::new();
        if self.shared {
            misses.extend(ids);
        } else {
            let mut lru = self.lru();
            for id in ids {
                match lru.touch(&id) {
                    Some(inst) => {
                        out.insert(id, inst);
                    }
                    None => misses.push(id),
                }
            }
        }
        if misses.is_empty() {
            return Ok(out);
        }
        let query = InstanceQuery::first(misses.len()).with_ids(misses.clone());
        let found = self.store.instance_page(&query).await?;
        for inst in found {
            self.put(inst.clone());
            out.insert(inst.id.clone(), inst);
        }
        // Deleted (by another process): not kept as if it still existed.
        for id in misses.iter().filter(|id| !out.contains_key(*id)) {
            self.remove(id);
        }
        Ok(out)
    }

    /// [`InstanceCache::load`], or when the store cannot be read, the cached ones only (the
    /// caller decides as if the others did not exist; its commit meets the same store).
    pub(crate) async fn load_or_cached(
        &self,
        ids: impl IntoIterator<Item = VnfInstanceId>,
    ) -> BTreeMap<VnfInstanceId, VnfInstance> {
        let ids: Vec<VnfInstanceId> = ids.into_iter().collect();
        match self.load(ids.iter().cloned()).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read VNF instances for the instance cache");
                ids.into_iter()
                    .filter_map(|id| self.cached(&id).map(|i| (id, i)))
                    .collect()
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use vnfm_core::driver::StoreBatch;
    use vnfm_core::store::{conformance::instance, MemoryStore};

    fn id(s: &str) -> VnfInstanceId {
        VnfInstanceId::new(s)
    }

    #[tokio::test]
    async fn keeps_at_most_its_capacity_evicting_the_least_recently_used() {
        let store = MemoryStore::new();
        let cache = InstanceCache::new(Arc::new(store.clone()), 2);
        cache.put(instance("a", "v"));
        cache.put(instance("b", "v"));
        assert!(
            cache.cached(&id("a")).is_some(),
            "a used: b is the oldest now"
        );
        cache.put(instance("c", "v"));
        assert_eq!(cache.len(), 2);
        assert!(cache.cached(&id("b")).is_none(), "b evicted");
        assert!(cache.cached(&id("a")).is_some() && cache.cached(&id("c")).is_some());
        cache.remove(&id("a"));
        assert_eq!(cache.len(), 1);
    }

    #[tokio::test]
    async fn loads_the_misses_from_the_store_and_says_which_do_not_exist() {
        let store = MemoryStore::new();
        let batch = (0..5).fold(StoreBatch::new(), |b, i| {
            b.with_instance(instance(&format!("i{i}"), "v"))
        });
        store.commit(batch).await.unwrap();
        let cache = InstanceCache::new(Arc::new(store.clone()), 3);
        // A cached copy is what this server committed: it wins over the store's.
        let mut mine = instance("i1", "v");
        mine.vnf_instance_name = Some("committed here".into());
        cache.put(mine.clone());
        let got = cache
            .load([id("i1"), id("i3"), id("nope"), id("i3")])
            .await
            .unwrap();
        assert_eq!(
            got.keys().cloned().collect::<Vec<_>>(),
            [id("i1"), id("i3")]
        );
        assert_eq!(got[&id("i1")], mine);
        assert_eq!(got[&id("i3")], instance("i3", "v"));
        assert_eq!(cache.len(), 2, "the miss is cached, the absent one is not");
        // More than the capacity at once: all are returned, the cache stays bounded.
        let all = cache
            .load((0..5).map(|i| id(&format!("i{i}"))))
            .await
            .unwrap();
        assert_eq!(all.len(), 5);
        assert_eq!(cache.len(), 3);
    }
}
