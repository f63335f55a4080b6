//! Faults (partitions, crashes, wipes, resignations) and the client workload.

use super::{Cluster, EventKind};
use crate::records::{KeyValue, build_batch};
use crate::sim::store::SimStore;
use crate::types::NodeId;

impl Cluster {
    pub(super) fn inject_fault(&mut self) {
        let ids = self.node_ids.clone();
        let heal_at = self.now_ms + 200 + self.rng.below(1_300);
        match self.rng.below(7) {
            6 => {
                let observers: Vec<NodeId> = ids
                    .iter()
                    .copied()
                    .filter(|id| !self.ever_voters.contains(id))
                    .collect();
                if !observers.is_empty() {
                    // An observer's disk is replaced: it rejoins empty, in every partition, so
                    // it needs several partitions' snapshots from their leaders at once. (A
                    // voter may not forget what it acknowledged, so only observers are wiped.)
                    let victim = observers[self.rng.below(observers.len() as u64) as usize];
                    self.trace_event(10, victim, 0);
                    self.count("wipe");
                    if self.is_alive(victim) {
                        self.crash_node(victim);
                    }
                    for partition in 0..self.partitions {
                        let n = self
                            .nodes
                            .get_mut(&(victim, partition))
                            .expect("replica exists");
                        n.store = SimStore::default();
                    }
                    let restart_at = self.now_ms + 50 + self.rng.below(1_500);
                    self.schedule(restart_at, EventKind::Restart { node: victim });
                }
            }
            0 => {
                let from = ids[self.rng.below(ids.len() as u64) as usize];
                let to = ids[self.rng.below(ids.len() as u64) as usize];
                if from != to {
                    self.count("one-way-partition");
                    self.network.block(from, to);
                    self.schedule(heal_at, EventKind::HealNetwork);
                }
            }
            1 => {
                let side: Vec<bool> = ids.iter().map(|_| self.rng.chance(1, 2)).collect();
                self.count("two-way-partition");
                for (i, a) in ids.iter().enumerate() {
                    for (j, b) in ids.iter().enumerate() {
                        if side[i] != side[j] {
                            self.network.block(*a, *b);
                        }
                    }
                }
                self.schedule(heal_at, EventKind::HealNetwork);
            }
            2 => {
                let partition = self.rng.below(u64::from(self.partitions)) as u32;
                if let Some(leader) = self.current_leader(partition) {
                    self.count("leader-isolation");
                    for &other in &ids {
                        if other != leader {
                            self.network.block(leader, other);
                            self.network.block(other, leader);
                        }
                    }
                    self.schedule(heal_at, EventKind::HealNetwork);
                }
            }
            3 | 4 => {
                let alive: Vec<NodeId> = ids
                    .iter()
                    .copied()
                    .filter(|&id| self.is_alive(id))
                    .collect();
                if !alive.is_empty() {
                    let victim = alive[self.rng.below(alive.len() as u64) as usize];
                    self.trace_event(7, victim, 0);
                    self.count("crash");
                    self.crash_node(victim);
                    let restart_at = self.now_ms + 50 + self.rng.below(1_500);
                    self.schedule(restart_at, EventKind::Restart { node: victim });
                }
            }
            _ => {
                let partition = self.rng.below(u64::from(self.partitions)) as u32;
                if let Some(leader) = self.current_leader(partition) {
                    self.trace_event(8, leader, u64::from(partition));
                    self.count("resign");
                    let replica = (leader, partition);
                    let raft = self
                        .nodes
                        .get_mut(&replica)
                        .and_then(|n| n.raft.as_mut())
                        .expect("alive leader");
                    match raft.resign(self.now_ms) {
                        Ok(work) => self.execute(replica, work),
                        Err(e) => self.fail(format!("node {replica:?}: resign failed: {e}")),
                    }
                    self.reschedule_tick(replica);
                }
            }
        }
    }

    /// 1–3 batches to one partition's leader (10 % to a random node, usually refused).
    pub(super) fn client_append(&mut self) {
        let partition = self.rng.below(u64::from(self.partitions)) as u32;
        let target = match self.current_leader(partition) {
            Some(leader) if self.rng.chance(9, 10) => leader,
            _ => self.node_ids[self.rng.below(self.node_ids.len() as u64) as usize],
        };
        let batch_count = 1 + self.rng.below(3);
        let mut batches = Vec::new();
        for _ in 0..batch_count {
            self.client_counter += 1;
            let records = 1 + self.rng.below(4) as usize;
            let values: Vec<Vec<u8>> = (0..records)
                .map(|r| {
                    format!(
                        "seed{}-batch{}-record{r}",
                        self.options.seed, self.client_counter
                    )
                    .into_bytes()
                })
                .collect();
            // Keys from a small set, some tombstones: the key-value state machine (and its
            // snapshots) then has overwrites and deletes to get right.
            let keys: Vec<Vec<u8>> = (0..records)
                .map(|_| format!("key{}", self.rng.below(12)).into_bytes())
                .collect();
            let tombstones: Vec<bool> = (0..records).map(|_| self.rng.chance(1, 6)).collect();
            let pairs: Vec<KeyValue<'_>> = values
                .iter()
                .zip(&keys)
                .zip(&tombstones)
                .map(|((v, k), &t)| (Some(k.as_slice()), (!t).then_some(v.as_slice())))
                .collect();
            batches.push(build_batch(&pairs, false, self.now_ms as i64));
        }
        let now = self.now_ms;
        let replica = (target, partition);
        let Some(raft) = self.nodes.get_mut(&replica).and_then(|n| n.raft.as_mut()) else {
            return;
        };
        match raft.append(now, batches.clone()) {
            Ok((result, work)) => {
                self.trace_event(9, target, result.base_offset);
                for batch in batches {
                    self.checkers[partition as usize].submitted.insert(batch);
                }
                self.execute(replica, work);
                self.reschedule_tick(replica);
            }
            Err(_) => self.count("append-to-non-leader"),
        }
    }
}
