//! Faults and the client workload of the host-driven simulator.

use super::{Cluster, EventKind};
use crate::error::RaftError;
use crate::host::HostError;
use crate::records::{KeyValue, build_batch};
use crate::types::{NodeId, PartitionId};

impl Cluster {
    /// One fault, drawn from the seed: a partition of the network (one-way, two-way, the
    /// leader's), a crash of one node, a power loss of a majority of the voters at once, a
    /// pause, a graceful resignation, or the disk of an observer that was never a voter replaced
    /// by an empty one.
    pub(super) fn inject_fault(&mut self) {
        let ids = self.node_ids.clone();
        let heal_at = self.now_ms + 200 + self.rng.below(1_300);
        match self.rng.below(9) {
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
                let partition = self.random_partition();
                if let Some((leader, _)) = self.current_leader(partition) {
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
                // Often the leader of some partition: the node whose disk holds the newest
                // acknowledged records.
                let partition = self.random_partition();
                let victim = match self.current_leader(partition) {
                    Some((leader, _)) if self.rng.chance(1, 2) => leader,
                    _ => ids[self.rng.below(ids.len() as u64) as usize],
                };
                if self.is_alive(victim) {
                    self.count("crash");
                    self.crash_node(victim);
                    let restart_at = self.now_ms + 50 + self.rng.below(1_500);
                    self.schedule(restart_at, EventKind::Restart { node: victim });
                }
            }
            5 => {
                // A power loss of a majority at once: what each disk did not sync is gone on
                // all of them, so a record acknowledged before its flush is gone everywhere.
                // The voters in force at a random partition's leader (the configured ones
                // when it has none).
                self.count("power-loss-majority");
                let partition = self.random_partition();
                let voters = match self.current_leader(partition) {
                    Some((leader, _)) => self.checks.voter_set_in_force(leader, partition).ids(),
                    None => self.voter_ids.clone(),
                };
                let majority = voters.len() / 2 + 1;
                let mut victims = voters;
                while victims.len() > majority {
                    let drop = self.rng.below(victims.len() as u64) as usize;
                    victims.remove(drop);
                }
                for victim in victims {
                    if self.is_alive(victim) {
                        self.crash_node(victim);
                        let restart_at = self.now_ms + 50 + self.rng.below(800);
                        self.schedule(restart_at, EventKind::Restart { node: victim });
                    }
                }
            }
            6 => {
                let victim = ids[self.rng.below(ids.len() as u64) as usize];
                if self.is_alive(victim) {
                    self.count("pause");
                    let until = self.now_ms + 50 + self.rng.below(800);
                    let node = self.nodes.get_mut(&victim).expect("node");
                    node.paused_until_ms = node.paused_until_ms.max(until);
                }
            }
            8 => {
                let observers: Vec<NodeId> = ids
                    .iter()
                    .copied()
                    .filter(|id| !self.checks.ever_voters.contains(id))
                    .collect();
                // KIP-853, reconfig runs: a voter's disk is replaced instead whenever one may be
                // (`replaceable_voter_disks`), and half the time a leader of a partition it votes
                // in crashes with it (one rack lost): the voters left must elect a leader
                // holding every commit without the old disk's copy, nor the new disk's vote.
                let replaceable = if self.options.reconfig {
                    self.replaceable_voter_disks()
                } else {
                    Vec::new()
                };
                if !replaceable.is_empty() {
                    // The most caught-up of them: the copy commits most often rested on.
                    let victim = replaceable
                        .iter()
                        .copied()
                        .max_by_key(|&id| self.durable_ends_total(id))
                        .expect("not empty");
                    self.count("voter-disk-replaced");
                    let leader = (0..self.partitions)
                        .filter_map(|p| self.current_leader(p).map(|(leader, _)| (p, leader)))
                        .find(|&(p, leader)| {
                            leader != victim
                                && self.checks.voter_set_in_force(leader, p).contains(victim)
                        })
                        .map(|(_, leader)| leader);
                    self.wipe_node(victim);
                    // A new disk is in place quickly: it may be asked to vote at once.
                    let restart_at = self.now_ms + 50 + self.rng.below(300);
                    self.schedule(restart_at, EventKind::Restart { node: victim });
                    if let Some(leader) = leader
                        && self.rng.chance(1, 2)
                    {
                        self.count("voter-disk-replaced-with-leader");
                        self.crash_node(leader);
                        let restart_at = self.now_ms + 50 + self.rng.below(1_500);
                        self.schedule(restart_at, EventKind::Restart { node: leader });
                    }
                } else if !observers.is_empty() {
                    let victim = observers[self.rng.below(observers.len() as u64) as usize];
                    self.count("wipe");
                    self.wipe_node(victim);
                    let restart_at = self.now_ms + 50 + self.rng.below(1_500);
                    self.schedule(restart_at, EventKind::Restart { node: victim });
                }
            }
            _ => {
                let partition = self.random_partition();
                if let Some((leader, _)) = self.current_leader(partition)
                    && self.nodes[&leader].paused_until_ms <= self.now_ms
                {
                    let now = self.now_ms;
                    let others: Vec<NodeId> = self
                        .checks
                        .voter_set_in_force(leader, partition)
                        .ids()
                        .into_iter()
                        .filter(|&id| id != leader)
                        .collect();
                    if others.is_empty() || self.rng.chance(1, 2) {
                        self.count("resign");
                        let result = self.host_mut(leader).resign(now, partition);
                        if self.host_result(leader, "resign", result).is_some() {
                            self.settle(leader);
                        }
                    } else {
                        // A preferred-leader election (net's leader_balance.rs): refused
                        // while the successor lacks committed records or is silent; appends
                        // held while it lacks only the newest.
                        let successor = others[self.rng.below(others.len() as u64) as usize];
                        let result = self
                            .host_mut(leader)
                            .transfer_leadership(now, partition, successor);
                        match result {
                            Err(HostError::Raft(RaftError::TransferRefused { .. })) => {
                                self.count("transfer-refused");
                            }
                            result => {
                                if self.host_result(leader, "transfer", result).is_some() {
                                    self.count("transfer");
                                    self.settle(leader);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn random_partition(&mut self) -> PartitionId {
        self.rng.below(u64::from(self.partitions)) as PartitionId
    }

    /// 1–3 batches of 1–4 records (unique values, keys from a small set, some tombstones) to a
    /// random partition's leader (now and then to a random node, which refuses).
    pub(super) fn client_append(&mut self) {
        let partition = self.random_partition();
        let target: NodeId = match self.current_leader(partition) {
            Some((leader, _)) if self.rng.chance(9, 10) => leader,
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
        if !self.is_alive(target) || self.nodes[&target].paused_until_ms > self.now_ms {
            return;
        }
        self.checks.on_submitted(partition, &batches);
        let now = self.now_ms;
        // A node that does not lead refuses (NotLeader): the client retries elsewhere later.
        match self.host_mut(target).append(now, partition, batches) {
            Ok(appended) => self.trace_event(9, target, appended.base_offset),
            Err(HostError::Raft(_)) => {}
            Err(error) => {
                self.fail(format!("node {target}: append failed: {error}"));
                return;
            }
        }
        self.settle(target);
    }
}
