//! The simulated network: per-message delay (which also reorders), drop and duplication, and
//! blocked links for one-way and two-way partitions.

use std::collections::BTreeSet;

use crate::rng::SplitMix64;
use crate::types::NodeId;

#[derive(Clone, Debug)]
pub struct NetworkConfig {
    pub delay_min_ms: u64,
    pub delay_max_ms: u64,
    pub drop_per_mille: u64,
    pub duplicate_per_mille: u64,
}

#[derive(Clone, Debug)]
pub struct Network {
    pub config: NetworkConfig,
    /// Directed links `(from, to)` that lose every message.
    pub blocked: BTreeSet<(NodeId, NodeId)>,
}

/// What the network does with one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    Blocked,
    Dropped,
    /// Delivered after each of these delays (two entries: duplicated).
    Deliver(Vec<u64>),
}

impl Network {
    pub fn new(config: NetworkConfig) -> Self {
        Self {
            config,
            blocked: BTreeSet::new(),
        }
    }

    pub fn fate(&self, rng: &mut SplitMix64, from: NodeId, to: NodeId) -> Fate {
        if self.blocked.contains(&(from, to)) {
            return Fate::Blocked;
        }
        if rng.chance(self.config.drop_per_mille, 1000) {
            return Fate::Dropped;
        }
        let spread = self.config.delay_max_ms - self.config.delay_min_ms + 1;
        let mut delays = vec![self.config.delay_min_ms + rng.below(spread)];
        if rng.chance(self.config.duplicate_per_mille, 1000) {
            delays.push(self.config.delay_min_ms + rng.below(spread));
        }
        Fate::Deliver(delays)
    }

    pub fn block(&mut self, from: NodeId, to: NodeId) {
        self.blocked.insert((from, to));
    }

    pub fn heal(&mut self) {
        self.blocked.clear();
    }
}
