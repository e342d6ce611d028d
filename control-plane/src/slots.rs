//! A ceiling on work in flight per key (the nodes an organization tries at once): a slot is taken at once or
//! refused, and given back when its guard drops, however the work ended.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

/// At most `per_key` slots taken per key at once.
#[derive(Debug)]
pub struct KeyedSlots<K> {
    per_key: usize,
    taken: Arc<Mutex<HashMap<K, usize>>>,
}

/// A taken slot; dropping it gives it back.
#[derive(Debug)]
pub struct Slot<K: Eq + Hash> {
    taken: Arc<Mutex<HashMap<K, usize>>>,
    key: K,
}

fn locked<K>(map: &Mutex<HashMap<K, usize>>) -> MutexGuard<'_, HashMap<K, usize>> {
    map.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<K: Eq + Hash + Clone> KeyedSlots<K> {
    pub fn new(per_key: usize) -> Self {
        Self { per_key, taken: Arc::default() }
    }

    /// The ceiling per key.
    pub fn per_key(&self) -> usize {
        self.per_key
    }

    /// A slot of `key`, or `None` when its `per_key` slots are all taken.
    pub fn take(&self, key: K) -> Option<Slot<K>> {
        let mut taken = locked(&self.taken);
        let count = taken.entry(key.clone()).or_insert(0);
        if *count >= self.per_key {
            return None;
        }
        *count += 1;
        Some(Slot { taken: Arc::clone(&self.taken), key })
    }
}

impl<K: Eq + Hash> Drop for Slot<K> {
    fn drop(&mut self) {
        let mut taken = locked(&self.taken);
        if let Some(count) = taken.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                taken.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_its_slots_and_gets_them_back_when_dropped() {
        let slots = KeyedSlots::new(2);
        let (a, b) = (slots.take("a"), slots.take("a"));
        assert!(a.is_some() && b.is_some());
        assert!(slots.take("a").is_none(), "the third is refused");
        assert!(slots.take("b").is_some(), "another key has its own");
        drop(a);
        let again = slots.take("a");
        assert!(again.is_some(), "a dropped slot is given back");
        drop((b, again));
        assert!(locked(&slots.taken).is_empty(), "keys without slots taken are forgotten");
    }
}
