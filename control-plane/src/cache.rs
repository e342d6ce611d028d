//! The one in-memory cache primitive behind the server's caches (endpoints, API keys, people, unknown credentials,
//! issued job tokens, flow drafts): [`BoundedCache`], a map bounded by a number of entries and, optionally, by a
//! budget of weights (bytes, estimated by the caller), whose entries optionally live at most a TTL.
//!
//! Eviction is in insertion order: the entry inserted longest ago leaves first, one at a time, when an insert goes
//! past a bound (never everything at once: a flood of new entries pushes out the oldest and keeps the recent ones).
//! Inserting a key again moves it to the back; reading it does not (reads take a shared lock only, so lookups on
//! the hot paths do not contend). Since insertion order is also age order, expired entries are dropped from the
//! front on every insert; until then a lookup simply does not see them. [`BoundedCache::clear`] is for callers that
//! really mean everything (a lost NOTIFY connection, where any entry may be stale).

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

struct Slot<V> {
    value: V,
    at: Instant,
    /// The insert that made it, matched against [`Inner::order`] (an older position of a key is skipped).
    seq: u64,
    weight: usize,
}

struct Inner<K, V> {
    map: HashMap<K, Slot<V>>,
    /// Keys in insertion order, oldest first, with the insert that put them there; positions whose entry was
    /// removed or inserted again since are skipped, and compacted away when they outnumber the live ones.
    order: VecDeque<(K, u64)>,
    next: u64,
    weight: usize,
}

/// A thread-safe map bounded by entries (and optionally weight), with an optional TTL; see the module docs.
pub struct BoundedCache<K, V> {
    inner: RwLock<Inner<K, V>>,
    capacity: usize,
    budget: usize,
    weigh: fn(&V) -> usize,
    ttl: Option<Duration>,
}

impl<K, V> std::fmt::Debug for BoundedCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("BoundedCache")
            .field("len", &inner.map.len())
            .field("capacity", &self.capacity)
            .field("weight", &inner.weight)
            .field("budget", &self.budget)
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl<K: Hash + Eq + Clone, V> BoundedCache<K, V> {
    /// At most `capacity` entries (at least one), kept until pushed out.
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: RwLock::new(Inner { map: HashMap::new(), order: VecDeque::new(), next: 0, weight: 0 }),
            capacity: capacity.max(1),
            budget: usize::MAX,
            weigh: |_| 0,
            ttl: None,
        }
    }

    /// Entries are seen for `ttl` after their insert, then no more.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// The entries' weights (`weigh`, computed once on insert) sum to at most `budget`; an entry heavier than the
    /// whole budget is not kept.
    #[must_use]
    pub fn with_budget(mut self, budget: usize, weigh: fn(&V) -> usize) -> Self {
        self.budget = budget;
        self.weigh = weigh;
        self
    }

    fn read_inner(&self) -> RwLockReadGuard<'_, Inner<K, V>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_inner(&self) -> RwLockWriteGuard<'_, Inner<K, V>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn fresh(&self, slot: &Slot<V>) -> bool {
        self.ttl.is_none_or(|ttl| slot.at.elapsed() < ttl)
    }

    /// A clone of the value of `key`, unless absent or expired.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
        V: Clone,
    {
        self.read(key, |value, _| value.clone())
    }

    /// Whether `key` has a value that has not expired.
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.read(key, |_, _| ()).is_some()
    }

    /// `f` of the value of `key` and its age (since its insert), under the shared lock; `None` when absent or
    /// expired.
    pub fn read<Q, R>(&self, key: &Q, f: impl FnOnce(&V, Duration) -> R) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let inner = self.read_inner();
        let slot = inner.map.get(key).filter(|slot| self.fresh(slot))?;
        Some(f(&slot.value, slot.at.elapsed()))
    }

    /// `f` of the value of `key` and its age, under the exclusive lock, to change it in place (its weight, its
    /// place in the order and its insert time stay); `None` when absent or expired.
    pub fn update<Q, R>(&self, key: &Q, f: impl FnOnce(&mut V, Duration) -> R) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut inner = self.write_inner();
        let slot = inner.map.get_mut(key)?;
        if !self.fresh(slot) {
            return None;
        }
        let age = slot.at.elapsed();
        Some(f(&mut slot.value, age))
    }

    /// Keeps `value` for `key` (in place of any older one, now the newest entry); the oldest entries leave, one at
    /// a time, while a bound is exceeded, and expired ones with them. `false` (nothing changed) when the value
    /// alone is heavier than the budget.
    pub fn insert(&self, key: K, value: V) -> bool {
        let weight = (self.weigh)(&value);
        if weight > self.budget {
            return false;
        }
        self.insert_locked(&mut self.write_inner(), key, value, weight);
        true
    }

    /// `f` of the value of `key` and its age, under the exclusive lock; when absent or expired, `make()` is
    /// inserted first (as [`Self::insert`] does; its weight must fit the budget) and `f` sees it at age zero.
    pub fn upsert<R>(&self, key: K, make: impl FnOnce() -> V, f: impl FnOnce(&mut V, Duration) -> R) -> R {
        let mut guard = self.write_inner();
        if let Some(slot) = guard.map.get_mut(&key).filter(|slot| self.fresh(slot)) {
            let age = slot.at.elapsed();
            return f(&mut slot.value, age);
        }
        let value = make();
        let weight = (self.weigh)(&value).min(self.budget);
        self.insert_locked(&mut guard, key.clone(), value, weight);
        let slot = guard.map.get_mut(&key).expect("the newest entry is never pushed out");
        f(&mut slot.value, Duration::ZERO)
    }

    fn insert_locked(&self, inner: &mut Inner<K, V>, key: K, value: V, weight: usize) {
        if let Some(old) = inner.map.remove(&key) {
            inner.weight -= old.weight;
        }
        let seq = inner.next;
        inner.next += 1;
        inner.order.push_back((key.clone(), seq));
        inner.map.insert(key, Slot { value, at: Instant::now(), seq, weight });
        inner.weight += weight;
        let newest = seq;
        while let Some((oldest, seq)) = inner.order.front().filter(|(_, seq)| *seq != newest) {
            if let Some(slot) = inner.map.get(oldest).filter(|slot| slot.seq == *seq) {
                let over = inner.map.len() > self.capacity || inner.weight > self.budget;
                if !over && self.fresh(slot) {
                    break;
                }
                if let Some(gone) = inner.map.remove(oldest) {
                    inner.weight -= gone.weight;
                }
            }
            inner.order.pop_front();
        }
        if inner.order.len() > 2 * inner.map.len() + 64 {
            let map = &inner.map;
            inner.order.retain(|(key, seq)| map.get(key).is_some_and(|slot| slot.seq == *seq));
        }
    }

    /// Drops `key`, returning its value (expired or not).
    pub fn remove<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut inner = self.write_inner();
        let slot = inner.map.remove(key)?;
        inner.weight -= slot.weight;
        Some(slot.value)
    }

    /// Drops `key` and returns its value when it has not expired and `take` says yes to it (given its age);
    /// otherwise leaves it.
    pub fn remove_if<Q>(&self, key: &Q, take: impl FnOnce(&V, Duration) -> bool) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut inner = self.write_inner();
        let slot = inner.map.get(key)?;
        if !self.fresh(slot) || !take(&slot.value, slot.at.elapsed()) {
            return None;
        }
        let slot = inner.map.remove(key)?;
        inner.weight -= slot.weight;
        Some(slot.value)
    }

    /// Keeps only the entries `keep` says yes to (an invalidation of many, e.g. every entry of an organization).
    pub fn retain(&self, mut keep: impl FnMut(&K, &V) -> bool) {
        let mut guard = self.write_inner();
        let inner = &mut *guard;
        let mut dropped = 0;
        inner.map.retain(|key, slot| {
            let kept = keep(key, &slot.value);
            if !kept {
                dropped += slot.weight;
            }
            kept
        });
        inner.weight -= dropped;
        let map = &inner.map;
        inner.order.retain(|(key, seq)| map.get(key).is_some_and(|slot| slot.seq == *seq));
    }

    /// Drops everything: only where every entry may be wrong (notifications were missed), never to bound memory.
    pub fn clear(&self) {
        let mut inner = self.write_inner();
        inner.map.clear();
        inner.order.clear();
        inner.weight = 0;
    }

    /// Entries held (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.read_inner().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sum of the entries' weights.
    pub fn weight(&self) -> usize {
        self.read_inner().weight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_pushes_out_the_oldest_one_at_a_time_and_keeps_the_recent() {
        let cache = BoundedCache::new(1_000);
        for n in 0..10_000u32 {
            cache.insert(n, n);
            assert!(cache.len() <= 1_000);
        }
        assert_eq!(cache.len(), 1_000, "no cliff: full, not emptied");
        assert!((0..9_000).all(|n| !cache.contains(&n)), "the oldest left");
        assert!((9_000..10_000).all(|n| cache.get(&n) == Some(n)), "the most recent stayed");
        let positions = cache.read_inner().order.len();
        assert!(positions <= 2 * 1_000 + 64, "the order does not grow past the entries: {positions}");
    }

    #[test]
    fn inserting_again_makes_an_entry_the_newest() {
        let cache = BoundedCache::new(3);
        for n in 0..3 {
            cache.insert(n, n);
        }
        cache.insert(0, 10);
        cache.insert(3, 3);
        assert_eq!((cache.get(&0), cache.get(&1), cache.len()), (Some(10), None, 3));
        for _ in 0..1_000 {
            cache.insert(0, 0);
        }
        assert!(cache.read_inner().order.len() <= 2 * 3 + 64, "replaced positions are compacted away");
        assert_eq!((cache.get(&2), cache.get(&3)), (Some(2), Some(3)));
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let cache = BoundedCache::new(100).with_ttl(Duration::from_millis(50));
        cache.insert("old", 1);
        assert_eq!(cache.get("old"), Some(1));
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(cache.get("old"), None, "expired");
        assert_eq!(cache.update("old", |v, _| *v += 1), None);
        cache.insert("new", 2);
        assert_eq!((cache.len(), cache.get("new")), (1, Some(2)), "expired entries leave on the next insert");
    }

    #[test]
    fn the_weight_budget_is_kept() {
        let cache: BoundedCache<u32, usize> = BoundedCache::new(usize::MAX).with_budget(100, |w| *w);
        assert!(!cache.insert(0, 101), "heavier than the budget");
        for n in 0..10 {
            assert!(cache.insert(n, 30));
            assert!(cache.weight() <= 100);
        }
        assert_eq!((cache.len(), cache.weight()), (3, 90));
        assert!((7..10).all(|n| cache.contains(&n)));
        cache.insert(9, 10);
        assert_eq!(cache.weight(), 70, "a replaced entry no longer counts");
        assert_eq!(cache.remove(&8), Some(30));
        assert_eq!(cache.weight(), 40);
    }

    #[test]
    fn invalidations_drop_what_they_name() {
        let cache = BoundedCache::new(100);
        for n in 0..10u32 {
            cache.insert(n, n % 2);
        }
        cache.retain(|_, parity| *parity == 0);
        assert_eq!(cache.len(), 5);
        assert_eq!(cache.remove_if(&2, |v, _| *v == 1), None);
        assert_eq!(cache.remove_if(&2, |v, _| *v == 0), Some(0));
        assert_eq!(cache.update(&4, |v, _| std::mem::replace(v, 7)), Some(0));
        assert_eq!(cache.get(&4), Some(7));
        assert_eq!(cache.upsert(4, || 0, |v, _| std::mem::replace(v, 8)), 7, "an entry is changed in place");
        assert_eq!(cache.upsert(40, || 1, |v, age| (*v, age)), (1, Duration::ZERO), "a new one is made first");
        cache.clear();
        assert!(cache.is_empty() && cache.read_inner().order.is_empty());
    }
}
