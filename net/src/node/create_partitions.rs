//! CreatePartitions (37): more partitions for an existing topic, through the metadata log.
//!
//! The controller proposes the topic's record again with the same topic id and the new
//! partition count (`with_partitions`, placing the new partitions with the topic's
//! replication factor through placement.rs, as CreateTopics does, or where the request's
//! assignments say, `with_assigned_partitions`); every node
//! applies it (topic_image.rs) by starting the added partitions, like a new topic's. A node that
//! is not the controller forwards the request (context.rs, `Cx::forward_to_controller`). Partition
//! counts only grow (Kafka's rule), and the answer waits until the record is applied here.
//!
//! Kafka's errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not more than today, or
//! above 10000), INVALID_REPLICA_ASSIGNMENT (assignments that are not one list of distinct voters
//! per new partition, each as long as the topic's replication factor; with valid assignments the
//! new partitions go where the client said),
//! INVALID_REQUEST (a topic named twice, an internal topic: `__consumer_offsets`' count is the
//! groups' hashing and fixed by `offsets.topic.num.partitions`).

use ringlog_replication::Raft;

use super::NodeError;
use super::admin_answers::AdminResults;
use super::context::Cx;
use super::placement::{self, configured_voter_ids};
use super::topic_record::{TopicRecord, is_internal_topic};
use super::topics::Topics;
use super::transport::Responder;
use crate::config::NodeConfig;
use crate::protocol::{
    ErrorCode, Request, RequestHeader, create_partitions_request as cp_req,
    create_partitions_response as cp_resp,
};

/// The most partitions a topic may have (CreateTopics' bound, topics.rs).
const PARTITIONS_MAX: i32 = 10_000;

/// `topic` with `count` partitions: the partitions from its current count up to `count` are
/// new, and placed here with the topic's replication factor (placement.rs, as CreateTopics
/// places them, over the voter set in force). A topic on every configured voter (no
/// replica list in its record) stays so while the set in force is the configured one;
/// after a voter change its old partitions are written out as lists (their replicas
/// unchanged) and the new ones placed over the set in force.
fn with_partitions(
    config: &NodeConfig,
    metadata: &Raft,
    topic: &TopicRecord,
    count: i32,
) -> Result<TopicRecord, (ErrorCode, String)> {
    assert!(count > topic.partitions, "partitions only grow");
    let configured = configured_voter_ids(config);
    let existing: Vec<Vec<i32>> = (0..topic.partitions)
        .map(|index| topic.replicas_of(index, &configured))
        .collect();
    let replication_factor = existing.first().map_or(0, Vec::len) as i16;
    let added = placement::place_new_partitions(
        config,
        metadata,
        topic.partitions,
        count - topic.partitions,
        replication_factor,
    )
    .map_err(|e| (e.error_code(), e.to_string()))?;
    let replicas =
        placement::recorded_placement(existing.into_iter().chain(added).collect(), &configured);
    Ok(TopicRecord {
        partitions: count,
        replicas,
        ..topic.clone()
    })
}

/// `topic` with `count` partitions, the new ones on the nodes the client named (one
/// assignment per new partition, in order), checked as Kafka's ReplicationControlManager
/// checks them: as many assignments as new partitions, each a list of distinct nodes of
/// the voter set in force, each as long as the topic's replication factor.
fn with_assigned_partitions(
    config: &NodeConfig,
    metadata: &Raft,
    topic: &TopicRecord,
    count: i32,
    assignments: &[cp_req::CreatePartitionsAssignment],
) -> Result<TopicRecord, (ErrorCode, String)> {
    let refused = |message: String| Err((ErrorCode::InvalidReplicaAssignment, message));
    let added = count - topic.partitions;
    if assignments.len() != added as usize {
        return refused(format!(
            "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        ));
    }
    let configured = configured_voter_ids(config);
    let existing: Vec<Vec<i32>> = (0..topic.partitions)
        .map(|index| topic.replicas_of(index, &configured))
        .collect();
    let replication_factor = existing.first().map_or(0, Vec::len);
    // check_assignment wants the whole topic from partition 0: the existing partitions
    // (valid by construction) and the new ones after them.
    let all = existing
        .iter()
        .cloned()
        .chain(assignments.iter().map(|a| a.broker_ids.clone()));
    let placed = placement::check_assignment(
        &placement::placement_nodes(metadata),
        all.enumerate().map(|(i, replicas)| (i as i32, replicas)),
    );
    let placed = match placed {
        Ok(placed) => placed,
        Err(error) => return refused(error.to_string()),
    };
    if let Some(bad) = assignments
        .iter()
        .find(|a| a.broker_ids.len() != replication_factor)
    {
        return refused(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {replication_factor} replica(s).",
            bad.broker_ids.len()
        ));
    }
    Ok(TopicRecord {
        partitions: count,
        replicas: placement::recorded_assignment(placed, &configured),
        ..topic.clone()
    })
}

impl Topics {
    pub(super) fn handle_create_partitions(
        &mut self,
        cx: &mut Cx,
        responder: Responder,
        header: &RequestHeader,
        request: cp_req::CreatePartitionsRequest,
    ) -> Result<(), NodeError> {
        if !cx.controller_active() {
            return cx.forward_to_controller(responder, header, Request::CreatePartitions(request));
        }
        let requester = responder.requester();
        let mut results = Vec::new();
        let mut waiting = Vec::new();
        for (index, topic) in request.topics.iter().enumerate() {
            let mut result = cp_resp::CreatePartitionsTopicResult {
                name: topic.name.clone(),
                error_code: 0,
                error_message: None,
            };
            let duplicate = request.topics[..index].iter().any(|t| t.name == topic.name);
            let outcome = if duplicate {
                Err((ErrorCode::InvalidRequest, "topic named twice".into()))
            } else if !cx.authorizer().allowed(
                &requester,
                crate::protocol::ApiKey::CreatePartitions,
                &topic.name,
            ) {
                Err((
                    ErrorCode::TopicAuthorizationFailed,
                    "Authorization failed.".into(),
                ))
            } else {
                self.grow_topic(cx, topic, request.validate_only)
            };
            match outcome {
                Ok(Some(offset)) => waiting.push((results.len(), offset)),
                Ok(None) => {}
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = Some(message);
                }
            }
            results.push(result);
        }
        cx.park_admin_answer(
            responder,
            header,
            request.timeout_ms,
            AdminResults::CreatePartitions(results),
            waiting,
        )
    }

    /// Validates one topic's growth and proposes it; `Some(offset)` of the proposed record.
    fn grow_topic(
        &mut self,
        cx: &mut Cx,
        request: &cp_req::CreatePartitionsTopic,
        validate_only: bool,
    ) -> Result<Option<u64>, (ErrorCode, String)> {
        let name = &request.name;
        if is_internal_topic(name) {
            return Err((
                ErrorCode::InvalidRequest,
                format!("{name} is internal; its partition count is a node setting"),
            ));
        }
        let epoch = cx.metadata_raft().epoch();
        let topic = self.latest_topic_record(name, epoch).ok_or((
            ErrorCode::UnknownTopicOrPartition,
            format!("no topic {name:?}"),
        ))?;
        if request.count == topic.partitions {
            return Err((
                ErrorCode::InvalidPartitions,
                format!("Topic already has {} partitions.", topic.partitions),
            ));
        }
        if request.count < topic.partitions {
            return Err((
                ErrorCode::InvalidPartitions,
                format!(
                    "Topic currently has {} partitions, which is higher than the requested {}.",
                    topic.partitions, request.count
                ),
            ));
        }
        if request.count > PARTITIONS_MAX {
            return Err((
                ErrorCode::InvalidPartitions,
                format!("at most {PARTITIONS_MAX} partitions"),
            ));
        }
        let assigned = request.assignments.as_ref().filter(|a| !a.is_empty());
        let record = match assigned {
            None => with_partitions(cx.config, cx.metadata_raft(), &topic, request.count)?,
            Some(assignments) => with_assigned_partitions(
                cx.config,
                cx.metadata_raft(),
                &topic,
                request.count,
                assignments,
            )?,
        };
        if validate_only {
            return Ok(None);
        }
        self.propose_topic_change(cx, &record)
            .map(Some)
            .map_err(|code| (code, "metadata append failed".into()))
    }
}
