//! The purgatory: requests parked until what they wait for happens or their deadline passes
//! (Kafka's `DelayedOperationPurgatory` for consumer fetches, its raft `FuturePurgatory` for
//! replica fetches). One type holds both kinds of long-polled Fetch:
//!
//! - a replica's Fetch, parked by the core on the leader (`LeaderState::parked`, keyed by the
//!   replica: a replica that fetches again replaces its parked fetch), answered when records
//!   arrive, the high-watermark moves (`QuorumConfig::prompt_high_watermark`), or its
//!   `max_wait_ms` ends;
//! - a consumer's Fetch, parked by the node (keyed by arrival order), answered when one of its
//!   partitions gains committed records or its `max_wait_ms` ends.
//!
//! Pure: the caller passes the clock (`now_ms`) and the condition; nothing here sleeps.

use std::collections::BTreeMap;

/// Parked entries of type `T` under keys `K`, each with the time its wait ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Purgatory<K: Ord, T> {
    entries: BTreeMap<K, (u64, T)>,
}

impl<K: Ord, T> Default for Purgatory<K, T> {
    fn default() -> Self {
        Purgatory {
            entries: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone, T> Purgatory<K, T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parks `entry` under `key` until `deadline_ms`; returns the entry it replaces, if any.
    pub fn park(&mut self, key: K, entry: T, deadline_ms: u64) -> Option<T> {
        self.entries
            .insert(key, (deadline_ms, entry))
            .map(|(_, old)| old)
    }

    /// Takes the entry under `key` out, if any.
    pub fn take(&mut self, key: &K) -> Option<T> {
        self.entries.remove(key).map(|(_, entry)| entry)
    }

    /// Takes out, in key order, every entry whose wait has ended at `now_ms` or for which
    /// `ready` holds.
    pub fn take_due(&mut self, now_ms: u64, mut ready: impl FnMut(&K, &T) -> bool) -> Vec<(K, T)> {
        self.take_matching(|key, deadline_ms, entry| now_ms >= deadline_ms || ready(key, entry))
    }

    /// Takes out, in key order, every entry for which `ready` holds, whatever its deadline.
    pub fn take_ready(&mut self, mut ready: impl FnMut(&K, &T) -> bool) -> Vec<(K, T)> {
        self.take_matching(|key, _, entry| ready(key, entry))
    }

    fn take_matching(&mut self, mut take: impl FnMut(&K, u64, &T) -> bool) -> Vec<(K, T)> {
        let due: Vec<K> = self
            .entries
            .iter()
            .filter(|(key, (deadline_ms, entry))| take(key, *deadline_ms, entry))
            .map(|(key, _)| key.clone())
            .collect();
        due.into_iter()
            .filter_map(|key| {
                let (_, entry) = self.entries.remove(&key)?;
                Some((key, entry))
            })
            .collect()
    }

    /// Takes every entry out, in key order.
    pub fn take_all(&mut self) -> Vec<(K, T)> {
        std::mem::take(&mut self.entries)
            .into_iter()
            .map(|(key, (_, entry))| (key, entry))
            .collect()
    }

    /// When the earliest wait ends (`u64::MAX` when nothing is parked).
    pub fn next_deadline_ms(&self) -> u64 {
        self.entries
            .values()
            .map(|(deadline_ms, _)| *deadline_ms)
            .min()
            .unwrap_or(u64::MAX)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The parked entries in key order, with their deadlines.
    pub fn iter(&self) -> impl Iterator<Item = (&K, u64, &T)> {
        self.entries
            .iter()
            .map(|(key, (deadline_ms, entry))| (key, *deadline_ms, entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_leaves_when_ready_or_due_never_before() {
        let mut purgatory: Purgatory<u32, &str> = Purgatory::new();
        assert_eq!(purgatory.next_deadline_ms(), u64::MAX);
        assert_eq!(purgatory.park(1, "a", 100), None);
        assert_eq!(purgatory.park(2, "b", 50), None);
        assert_eq!(purgatory.park(3, "c", 200), None);
        assert_eq!(purgatory.next_deadline_ms(), 50);
        assert!(purgatory.take_due(49, |_, _| false).is_empty());
        assert_eq!(purgatory.take_due(50, |_, _| false), vec![(2, "b")]);
        assert_eq!(
            purgatory.take_due(60, |_, entry| *entry == "c"),
            vec![(3, "c")]
        );
        assert_eq!(purgatory.len(), 1);
        assert!(purgatory.take_ready(|_, entry| *entry == "z").is_empty());
        assert_eq!(purgatory.take_all(), vec![(1, "a")]);
        assert!(purgatory.is_empty());
    }

    #[test]
    fn parking_again_under_a_key_replaces_the_entry_and_its_deadline() {
        let mut purgatory: Purgatory<u32, &str> = Purgatory::new();
        purgatory.park(7, "old", 10);
        assert_eq!(purgatory.park(7, "new", 500), Some("old"));
        assert!(purgatory.take_due(100, |_, _| false).is_empty());
        assert_eq!(purgatory.take(&7), Some("new"));
        assert_eq!(purgatory.take(&7), None);
    }
}
