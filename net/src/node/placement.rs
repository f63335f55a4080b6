//! Where a topic's partitions live: each partition's replicas (its Raft group's voters),
//! chosen by the controller when the topic is created (or grown) and written into the topic
//! record, so every node applies the same placement (topics.rs, topic_image.rs).
//!
//! The assignment is Kafka's rack-unaware one (`StripedReplicaPlacer` /
//! `AdminUtils.assignReplicasToBrokersRackUnaware`): the first replica of partition p is node
//! `(p + start_index) mod n`, so first replicas (Kafka's preferred leaders) go round the
//! nodes; the other replicas follow it at a shift that grows by one every n partitions, so the
//! followers of one node's partitions are spread too. A new partition's first replica stands
//! for election at once, so it leads first; after a failover, leader_balance.rs hands the
//! partition back to it (docs/design.md, "First leaders" and "Preferred leaders"). With 3
//! nodes, RF 2, start 0, shift 0:
//!
//! ```text
//! partition 0: [1, 2]   partition 3: [1, 3]
//! partition 1: [2, 3]   partition 4: [2, 1]
//! partition 2: [3, 1]   partition 5: [3, 2]
//! ```
//!
//! The nodes are the metadata quorum's voter set in force (KIP-853: the VotersRecord latest
//! in this node's metadata log, or `controller.quorum.voters` while the log holds none), the
//! set admission.rs checks quorum traffic against: after a voter is replaced, new topics land
//! on the added voter and never on the removed one. Observers replicate every partition
//! without voting and are not placed (docs/design.md, "Replication factor").
//! [`place_partitions`] is the one entry point for CreateTopics, auto-creation and
//! CreatePartitions.
//!
//! A topic record without placement (`None`, written before replication factors, or for a
//! placement on every node) means "every configured voter": `controller.quorum.voters`, the
//! bootstrap set every node's configuration names alike, never the set in force. A
//! partition's replicas are its Raft group's voters, and a group's voters must not change
//! under it when the metadata quorum's set does (nodes apply a VotersRecord at different
//! moments; partition groups are not reconfigured). So, as Kafka's controller always writes
//! explicit replicas, a placement is recorded as `None` only when it is exactly that
//! configured set ([`recorded_placement`]); a placement over a changed voter set is recorded
//! as lists.

use ringlog_replication::{NodeId, Raft};

use crate::config::NodeConfig;
use crate::protocol::ErrorCode;

/// Why a placement cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Kafka: "Replication factor: {rf} larger than available brokers: {n}", or not positive.
    #[error("replication factor {requested} is not from 1 to the {nodes} nodes")]
    InvalidReplicationFactor { requested: i32, nodes: usize },
    /// A CreateTopics' own assignment that Kafka would refuse too (`ReplicationControlManager`).
    #[error("replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    #[error("{partitions} partitions from index {start_partition} cannot be placed")]
    InvalidPartitions {
        start_partition: i32,
        partitions: i32,
    },
}

impl PlacementError {
    pub fn error_code(&self) -> ErrorCode {
        match self {
            PlacementError::InvalidReplicationFactor { .. } => ErrorCode::InvalidReplicationFactor,
            PlacementError::InvalidPartitions { .. } => ErrorCode::InvalidPartitions,
            PlacementError::InvalidReplicaAssignment(_) => ErrorCode::InvalidReplicaAssignment,
        }
    }
}

/// The replication factor a CreateTopics (or CreatePartitions) asks for, resolved: -1 takes
/// `default_replication_factor` (`default.replication.factor`); anything else must be from 1
/// to the number of nodes (INVALID_REPLICATION_FACTOR otherwise, as in Kafka; the default too
/// is checked here, so a default above the node count refuses as Kafka does).
pub fn resolve_replication_factor(
    requested: i16,
    default_replication_factor: i16,
    nodes: usize,
) -> Result<usize, PlacementError> {
    let factor = if requested == -1 {
        default_replication_factor
    } else {
        requested
    };
    match usize::try_from(factor) {
        Ok(factor) if (1..=nodes).contains(&factor) => Ok(factor),
        _ => Err(PlacementError::InvalidReplicationFactor {
            requested: i32::from(factor),
            nodes,
        }),
    }
}

/// Replicas for partitions `start_partition .. start_partition + partitions` over `nodes`
/// (Kafka's rack-unaware assignment, module doc). `start_index` picks the first replica of
/// partition 0, `replica_shift` the first follower offset; both are taken modulo the node
/// count. `nodes` must be distinct; the result's lists have `replication_factor` distinct
/// entries each, the first being the partition's preferred leader.
pub fn assign_replicas(
    nodes: &[NodeId],
    start_partition: i32,
    partitions: i32,
    replication_factor: usize,
    start_index: usize,
    replica_shift: usize,
) -> Result<Vec<Vec<NodeId>>, PlacementError> {
    let n = nodes.len();
    if replication_factor == 0 || replication_factor > n {
        return Err(PlacementError::InvalidReplicationFactor {
            requested: i32::try_from(replication_factor).unwrap_or(i32::MAX),
            nodes: n,
        });
    }
    if start_partition < 0 || partitions < 0 || start_partition.checked_add(partitions).is_none() {
        return Err(PlacementError::InvalidPartitions {
            start_partition,
            partitions,
        });
    }
    let start_index = start_index % n;
    let mut shift = replica_shift % n;
    let mut assignment = Vec::with_capacity(partitions as usize);
    for partition in start_partition..start_partition + partitions {
        let partition = partition as usize;
        // Kafka moves the followers' shift on by one each time the first replicas have gone
        // round every node once, so node a's followers are not always the same nodes.
        if partition > 0 && partition.is_multiple_of(n) {
            shift += 1;
        }
        let first = (partition + start_index) % n;
        let mut replicas = Vec::with_capacity(replication_factor);
        replicas.push(nodes[first]);
        for j in 0..replication_factor - 1 {
            // 1..n-1 steps after the first replica: never the first replica itself, and
            // distinct for distinct j because j < n - 1.
            let step = 1 + (shift + j) % (n - 1);
            replicas.push(nodes[(first + step) % n]);
        }
        debug_assert!({
            let mut sorted = replicas.clone();
            sorted.sort_unstable();
            sorted.dedup();
            sorted.len() == replication_factor
        });
        assignment.push(replicas);
    }
    Ok(assignment)
}

/// The placement of new partitions of a topic: the replication factor resolved
/// ([`resolve_replication_factor`]), then [`assign_replicas`] over `nodes` (sorted, the
/// configured voters) from a random start index and shift, as Kafka starts from random ones so
/// that topics created one after another do not all lead on the same node. CreateTopics passes
/// `start_partition` 0; CreatePartitions passes the topic's current partition count and the
/// topic's replication factor.
pub fn place_partitions(
    nodes: &[NodeId],
    start_partition: i32,
    partitions: i32,
    requested_replication_factor: i16,
    default_replication_factor: i16,
    random: u64,
) -> Result<Vec<Vec<NodeId>>, PlacementError> {
    let mut nodes = nodes.to_vec();
    nodes.sort_unstable();
    nodes.dedup();
    let factor = resolve_replication_factor(
        requested_replication_factor,
        default_replication_factor,
        nodes.len(),
    )?;
    let start_index = (random % 1_000_003) as usize;
    let replica_shift = ((random >> 32) % 1_000_003) as usize;
    assign_replicas(
        &nodes,
        start_partition,
        partitions,
        factor,
        start_index,
        replica_shift,
    )
}

/// A client's own placement (CreateTopics `assignments`), checked as Kafka checks it: one entry
/// per partition index 0..n (in any order), each a non-empty list of distinct nodes among
/// `nodes`, every partition with as many replicas as the first. Returns the replicas in
/// partition order.
pub fn check_assignment(
    nodes: &[NodeId],
    assignments: impl IntoIterator<Item = (i32, Vec<NodeId>)>,
) -> Result<Vec<Vec<NodeId>>, PlacementError> {
    let refused = |why: String| Err(PlacementError::InvalidReplicaAssignment(why));
    let mut by_index: std::collections::BTreeMap<i32, Vec<NodeId>> = Default::default();
    for (index, replicas) in assignments {
        if by_index.insert(index, replicas).is_some() {
            return refused(format!("partition {index} is assigned twice"));
        }
    }
    let count = by_index.len();
    let mut placed = Vec::with_capacity(count);
    for (position, (index, replicas)) in by_index.into_iter().enumerate() {
        if usize::try_from(index).ok() != Some(position) {
            return refused(format!("partitions must be 0..{count}, found {index}"));
        }
        if replicas.is_empty() {
            return refused(format!("partition {index} has no replica"));
        }
        let mut distinct = replicas.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != replicas.len() {
            return refused(format!("partition {index} names a node twice"));
        }
        if let Some(unknown) = replicas.iter().find(|r| !nodes.contains(r)) {
            return refused(format!("node {unknown} is not a voter"));
        }
        if let Some(first) = placed.first().map(Vec::len)
            && first != replicas.len()
        {
            return refused("every partition must have as many replicas".into());
        }
        placed.push(replicas);
    }
    Ok(placed)
}

/// The placement as the topic record keeps it: `None` ("every configured voter", module doc)
/// when every partition is on exactly the configured voters `configured`, so such a topic
/// follows the configured voters as topics did before replication factors (an
/// `unclean-recover` that names a new voter set moves it with them, tests/kip320.rs); the
/// lists otherwise, which pin each partition to its nodes: a placement on a voter set that
/// changed since the bootstrap (an added voter, a removed one) is never `None`.
/// A client's own placement (CreateTopics or CreatePartitions `assignments`) as the topic record
/// keeps it: `None` only when every partition's list is, in order, what "every configured
/// voter" reads back as ([`TopicRecord::replicas_of`](super::topic_record::TopicRecord::replicas_of):
/// the configured voters rotated by the partition's index); the lists otherwise. The order is
/// the client's: the first replica is the preferred leader, and Metadata reports the replicas
/// in that order (librdkafka's 0081 checks it).
pub fn recorded_assignment(
    replicas: Vec<Vec<NodeId>>,
    configured: &[NodeId],
) -> Option<Vec<Vec<NodeId>>> {
    let as_every_voter = replicas.iter().enumerate().all(|(index, r)| {
        let mut rotated = configured.to_vec();
        if !rotated.is_empty() {
            rotated.rotate_left(index % configured.len());
        }
        *r == rotated
    });
    if as_every_voter { None } else { Some(replicas) }
}

pub fn recorded_placement(
    replicas: Vec<Vec<NodeId>>,
    configured: &[NodeId],
) -> Option<Vec<Vec<NodeId>>> {
    let mut configured = configured.to_vec();
    configured.sort_unstable();
    configured.dedup();
    let on_every_configured_voter = |r: &Vec<NodeId>| {
        let mut sorted = r.clone();
        sorted.sort_unstable();
        sorted == configured
    };
    if replicas.iter().all(on_every_configured_voter) {
        None
    } else {
        Some(replicas)
    }
}

/// The nodes new partitions are placed on: the metadata quorum's voter set in force (module
/// doc), as `metadata` (`__cluster_metadata-0`'s Raft group) holds it.
pub(super) fn placement_nodes(metadata: &Raft) -> Vec<NodeId> {
    metadata.voter_set().ids()
}

/// What a topic record without placement means: every configured voter
/// (`controller.quorum.voters`), in configuration order (module doc).
pub(super) fn configured_voter_ids(config: &NodeConfig) -> Vec<NodeId> {
    config.quorum_voters.iter().map(|v| v.node_id).collect()
}

/// `partitions` partitions on every voter in force, each starting at a different voter
/// as [`TopicRecord::replicas_of`](super::topic_record::TopicRecord::replicas_of) does
/// for "every voter", as recorded ([`recorded_placement`] against the configured voters):
/// `None` while the set in force is the configured one. `__consumer_offsets` is placed so
/// (docs/groups.md).
pub(super) fn every_voter_placement(
    config: &NodeConfig,
    metadata: &Raft,
    partitions: i32,
) -> Option<Vec<Vec<NodeId>>> {
    let mut voters = placement_nodes(metadata);
    voters.sort_unstable();
    voters.dedup();
    let placed = (0..partitions.max(0) as usize)
        .map(|index| {
            let mut rotated = voters.clone();
            if !rotated.is_empty() {
                rotated.rotate_left(index % voters.len());
            }
            rotated
        })
        .collect();
    recorded_placement(placed, &configured_voter_ids(config))
}

/// [`place_partitions`] over the voter set in force with its `default.replication.factor`
/// (unset: the smaller of 3 and the voters in force, so a quorum grown from one voter by
/// `add-voter` gets replicated topics): what CreateTopics, auto-creation and
/// CreatePartitions call (the controller only, so the placement is written into the topic
/// record once and every node applies it).
pub(super) fn place_new_partitions(
    config: &NodeConfig,
    metadata: &Raft,
    start_partition: i32,
    partitions: i32,
    requested_replication_factor: i16,
) -> Result<Vec<Vec<NodeId>>, PlacementError> {
    let nodes = placement_nodes(metadata);
    let default_replication_factor = if config.default_replication_factor_follows_voters {
        nodes.len().clamp(1, 3) as i16
    } else {
        config.default_replication_factor
    };
    place_partitions(
        &nodes,
        start_partition,
        partitions,
        requested_replication_factor,
        default_replication_factor,
        super::random_seed(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The module doc's example, as Kafka's assignment gives it.
    #[test]
    fn three_nodes_two_replicas_follow_kafkas_assignment() {
        let placed = assign_replicas(&[1, 2, 3], 0, 6, 2, 0, 0).unwrap();
        assert_eq!(
            placed,
            vec![
                vec![1, 2],
                vec![2, 3],
                vec![3, 1],
                vec![1, 3],
                vec![2, 1],
                vec![3, 2],
            ]
        );
    }

    /// Kafka's checks of a client's own assignment.
    #[test]
    fn a_clients_assignment_is_checked_as_kafka_checks_it() {
        let nodes = [1, 2, 3];
        assert_eq!(
            check_assignment(&nodes, [(1, vec![3, 1]), (0, vec![2, 3])]),
            Ok(vec![vec![2, 3], vec![3, 1]])
        );
        for bad in [
            vec![(0, vec![1]), (0, vec![2])],
            vec![(1, vec![1])],
            vec![(0, vec![])],
            vec![(0, vec![1, 1])],
            vec![(0, vec![4])],
            vec![(0, vec![1]), (1, vec![1, 2])],
            vec![(-1, vec![1])],
        ] {
            let refused = check_assignment(&nodes, bad.clone()).unwrap_err();
            assert_eq!(
                refused.error_code(),
                ErrorCode::InvalidReplicaAssignment,
                "{bad:?}"
            );
        }
    }

    /// A placement on every configured voter is recorded as "every voter"; one on fewer keeps
    /// its lists.
    #[test]
    fn a_placement_on_every_node_is_recorded_as_every_voter() {
        let everywhere = assign_replicas(&[1, 2, 3], 0, 2, 3, 0, 0).unwrap();
        assert_eq!(recorded_placement(everywhere, &[3, 1, 2]), None);
        let two = assign_replicas(&[1, 2, 3], 0, 2, 2, 0, 0).unwrap();
        assert_eq!(recorded_placement(two.clone(), &[1, 2, 3]), Some(two));
    }

    /// A client's assignment keeps its order unless it is exactly what "every voter" reads
    /// back as.
    #[test]
    fn a_client_s_assignment_keeps_its_order() {
        let rotated = vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]];
        assert_eq!(recorded_assignment(rotated, &[1, 2, 3]), None);
        let reordered = vec![vec![1, 2, 3], vec![3, 2, 1], vec![3, 1, 2]];
        assert_eq!(
            recorded_assignment(reordered.clone(), &[1, 2, 3]),
            Some(reordered)
        );
    }

    /// KIP-853: after voter 3 is replaced by 4, a placement on every voter in force {1, 2, 4}
    /// is not "every configured voter" {1, 2, 3}: it is kept as lists, so the partitions stay
    /// on 1, 2 and 4 whatever the voter set becomes; so is one on a grown set {1..5}.
    #[test]
    fn a_placement_on_a_changed_voter_set_keeps_its_lists() {
        let replaced = assign_replicas(&[1, 2, 4], 0, 3, 3, 0, 0).unwrap();
        assert_eq!(
            recorded_placement(replaced.clone(), &[1, 2, 3]),
            Some(replaced)
        );
        let grown = assign_replicas(&[1, 2, 3, 4, 5], 0, 5, 5, 0, 0).unwrap();
        assert_eq!(recorded_placement(grown.clone(), &[1, 2, 3]), Some(grown));
        let shrunk = assign_replicas(&[1, 2], 0, 2, 2, 0, 0).unwrap();
        assert_eq!(recorded_placement(shrunk.clone(), &[1, 2, 3]), Some(shrunk));
    }

    /// Leaders and replicas spread evenly: over a multiple of n partitions every node is first
    /// replica equally often and holds equally many replicas, whatever the start and shift.
    #[test]
    fn first_replicas_and_replicas_spread_evenly() {
        for n in 1..=6usize {
            let nodes: Vec<NodeId> = (1..=n as i32).collect();
            for factor in 1..=n {
                for start in 0..n {
                    for shift in 0..n {
                        let partitions = (n * 4) as i32;
                        let placed =
                            assign_replicas(&nodes, 0, partitions, factor, start, shift).unwrap();
                        let mut first: BTreeMap<NodeId, usize> = BTreeMap::new();
                        let mut held: BTreeMap<NodeId, usize> = BTreeMap::new();
                        for replicas in &placed {
                            assert_eq!(replicas.len(), factor);
                            let mut distinct = replicas.clone();
                            distinct.sort_unstable();
                            distinct.dedup();
                            assert_eq!(distinct.len(), factor, "{replicas:?}");
                            *first.entry(replicas[0]).or_default() += 1;
                            for r in replicas {
                                *held.entry(*r).or_default() += 1;
                            }
                        }
                        assert!(
                            first.values().all(|c| *c == 4),
                            "n {n} rf {factor}: {first:?}"
                        );
                        assert!(
                            held.values().all(|c| *c == 4 * factor),
                            "n {n} rf {factor}: {held:?}"
                        );
                    }
                }
            }
        }
    }

    /// CreatePartitions continues the same stripe: placing 0..6 at once or 0..3 then 3..6 with
    /// the same start and shift gives the same replicas.
    #[test]
    fn placing_more_partitions_continues_the_stripe() {
        let all = assign_replicas(&[1, 2, 3], 0, 6, 2, 1, 2).unwrap();
        let mut parts = assign_replicas(&[1, 2, 3], 0, 3, 2, 1, 2).unwrap();
        parts.extend(assign_replicas(&[1, 2, 3], 3, 3, 2, 1, 2).unwrap());
        assert_eq!(all, parts);
    }

    /// Kafka: a replication factor above the node count (or below 1) is
    /// INVALID_REPLICATION_FACTOR; -1 takes the default, which is checked the same way.
    #[test]
    fn replication_factors_outside_one_to_the_node_count_are_refused() {
        assert_eq!(resolve_replication_factor(-1, 3, 3), Ok(3));
        assert_eq!(resolve_replication_factor(1, 3, 3), Ok(1));
        assert_eq!(resolve_replication_factor(3, 1, 3), Ok(3));
        for bad in [0, 4, -2, i16::MIN, i16::MAX] {
            let refused = resolve_replication_factor(bad, 3, 3).unwrap_err();
            assert_eq!(refused.error_code(), ErrorCode::InvalidReplicationFactor);
        }
        assert!(resolve_replication_factor(-1, 3, 1).is_err());
        assert!(place_partitions(&[1, 2, 3], 0, 2, 4, 3, 7).is_err());
        assert!(assign_replicas(&[1, 2], i32::MAX, 2, 1, 0, 0).is_err());
        assert!(assign_replicas(&[], 0, 1, 1, 0, 0).is_err());
    }

    #[test]
    fn random_placements_keep_every_rule() {
        for random in [0u64, 1, 7, u64::MAX, 0xdead_beef_0bad_cafe] {
            let placed = place_partitions(&[3, 1, 2], 0, 5, 2, 3, random).unwrap();
            assert_eq!(placed.len(), 5);
            for replicas in placed {
                assert_eq!(replicas.len(), 2);
                assert_ne!(replicas[0], replicas[1]);
                assert!(replicas.iter().all(|r| (1..=3).contains(r)));
            }
        }
    }
}
