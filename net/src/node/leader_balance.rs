//! Preferred leaders, kept (Kafka's `auto.leader.rebalance.enable`): a partition's first
//! replica is its preferred leader (placement.rs), and a new topic's partitions are led by
//! their first replicas, so leaders go round the nodes. Later elections elect whichever replica
//! times out first: after a node restarts, the partitions it led are led by the others, and
//! stay so. Kafka's controller moves them back every `leader.imbalance.check.interval.seconds`
//! when more than `leader.imbalance.per.broker.percentage` of a broker's preferred partitions
//! are led elsewhere.
//!
//! Here there is no controller of partition leaders (each partition elects in its own Raft
//! group, docs/design.md), so each leader checks the partitions it leads. For each other node
//! B it counts the partitions it leads whose preferred leader is B, against every partition of
//! the topic image whose preferred leader is B. When that share is above the percentage, it
//! hands each of those partitions to B (`Raft::transfer_leadership`: EndQuorumEpoch naming B
//! first). A partition whose first replica is not a voter of its group is left alone. Kafka
//! counts every partition led away from B, and here each leader counts only its own, so the
//! share can be smaller than Kafka's. A transfer is refused while B lacks committed records
//! or has not fetched within the fetch timeout, and those moves are tried again every second
//! until the next check; a B that lacks only the newest appends gets one election timeout
//! with the partition's appends held (`Raft::transfer_leadership`).

use super::topics::TopicRecord;
use super::*;

/// How often moves a check wanted, refused because the successor was behind, are tried again.
const RETRY_INTERVAL_MS: u64 = 1_000;

#[derive(Default)]
pub(super) struct LeaderBalance {
    /// When the next check runs (node clock); `None` until the first turn sets it.
    next_check_ms: Option<u64>,
    /// Moves the last check wanted and that were refused, tried again until the next check.
    wanted: Vec<(PartitionId, NodeId)>,
    next_retry_ms: u64,
}

/// The partitions of the image whose preferred leader (first replica) is each node.
fn preferred_counts(
    image: &BTreeMap<String, TopicRecord>,
    configured: &[NodeId],
) -> BTreeMap<NodeId, u64> {
    let mut counts = BTreeMap::new();
    for topic in image.values() {
        for index in 0..topic.partitions {
            if let Some(&first) = topic.replicas_of(index, configured).first() {
                *counts.entry(first).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// Which of `led` (partition, preferred leader) to move: those whose preferred leader's share
/// led here is above `percentage` of every partition it prefers.
fn moves_wanted(
    led: Vec<(PartitionId, NodeId)>,
    preferred: &BTreeMap<NodeId, u64>,
    percentage: u64,
) -> Vec<(PartitionId, NodeId)> {
    let mut away: BTreeMap<NodeId, u64> = BTreeMap::new();
    for (_, node) in &led {
        *away.entry(*node).or_insert(0) += 1;
    }
    led.into_iter()
        .filter(|(_, node)| {
            let total = preferred.get(node).copied().unwrap_or(0).max(1);
            away[node] * 100 > percentage * total
        })
        .collect()
}

impl Node {
    /// Runs the check when due, and the retries of moves it wanted (module doc). Between work
    /// lists (`apply_metadata_records`): the pump delivers the EndQuorumEpoch requests a
    /// transfer queued in its next round.
    pub(in crate::node) fn maybe_balance_leaders(&mut self) -> Result<(), NodeError> {
        let Some(balance) = &self.config.leader_balance else {
            return Ok(());
        };
        let (interval_ms, percentage) = (balance.check_interval_ms, balance.per_node_percentage);
        let now = self.now_ms();
        let state = &mut self.handlers.leader_balance;
        // The first check one interval after the start, as Kafka's controller schedules its
        // first: a node that just started leads what its elections gave it.
        let next_check_ms = *state.next_check_ms.get_or_insert(now + interval_ms);
        let wanted = if now >= next_check_ms {
            state.next_check_ms = Some(now + interval_ms);
            self.leader_moves_wanted(percentage)
        } else if !state.wanted.is_empty() && now >= state.next_retry_ms {
            std::mem::take(&mut state.wanted)
        } else {
            return Ok(());
        };
        let mut refused = Vec::new();
        for (partition, successor) in wanted {
            match self.host.transfer_leadership(now, partition, successor) {
                Ok(()) => {
                    let handed = !self.host.raft(partition).is_some_and(|r| r.is_leader());
                    tracing::info!(
                        partition = %self.table.dir_name(partition),
                        successor,
                        "{}",
                        if handed {
                            "leadership handed to the preferred leader"
                        } else {
                            "leadership to be handed to the preferred leader once it has the newest records (appends held)"
                        }
                    );
                }
                Err(HostError::Raft(core::RaftError::TransferRefused { .. })) => {
                    refused.push((partition, successor))
                }
                // No longer its leader, or the partition is gone: nothing to move.
                Err(HostError::Raft(_)) => {}
                Err(HostError::Storage(error)) => return Err(error.into()),
            }
        }
        let state = &mut self.handlers.leader_balance;
        state.wanted = refused;
        state.next_retry_ms = now + RETRY_INTERVAL_MS;
        Ok(())
    }

    /// The partitions this node leads that the check moves, each with its preferred leader.
    fn leader_moves_wanted(&self, percentage: u64) -> Vec<(PartitionId, NodeId)> {
        let configured = placement::configured_voter_ids(&self.config);
        let topics = &self.handlers.topics;
        let local = self.config.node_id;
        let mut led = Vec::new();
        for id in self.table.ids() {
            // `None`: `__cluster_metadata-0`, or a topic being deleted.
            let Some(topic) = topics.topic_record(&self.table, id) else {
                continue;
            };
            let Some(raft) = self.host.raft(id).filter(|raft| raft.is_leader()) else {
                continue;
            };
            let index = self.table.get(id).index;
            let Some(&first) = topic.replicas_of(index, &configured).first() else {
                continue;
            };
            if first != local && raft.voter_set().contains(first) {
                led.push((id, first));
            }
        }
        if led.is_empty() {
            return led;
        }
        moves_wanted(
            led,
            &preferred_counts(&topics.image, &configured),
            percentage,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_s_partitions_move_back_once_enough_of_them_are_led_elsewhere() {
        // Node 2 prefers 10 partitions; this node leads 2 of them (20 %), node 3 prefers 10
        // and this node leads 1 (10 %, not above 10).
        let preferred = BTreeMap::from([(2, 10), (3, 10)]);
        let led = vec![(4, 2), (5, 3), (6, 2)];
        assert_eq!(
            moves_wanted(led.clone(), &preferred, 10),
            vec![(4, 2), (6, 2)]
        );
        // At 0 % every partition led away from its preferred leader moves.
        assert_eq!(moves_wanted(led.clone(), &preferred, 0), led);
        // At 100 % none does.
        assert_eq!(moves_wanted(led, &preferred, 100), vec![]);
    }
}
