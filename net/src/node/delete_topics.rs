//! DeleteTopics (API 20), and what deleting a topic does on every node.
//!
//! The controller (the metadata partition's leader) commits a tombstone (null value) for the
//! topic's key to `__cluster_metadata-0`; the key-value state drops the key, so a KIP-630
//! snapshot taken after it no longer holds the topic. Every node notices the topic missing from
//! its image (topic_image.rs, `Topics::apply_image`) and stops it (mod.rs, `Node::stop_topic`):
//! the partitions' Raft groups leave the `MultiRaft`, their logs are closed (waiting for
//! in-flight I/O), and each folder is renamed to `<topic>-<n>.<topic id>-delete` (the parent
//! folder fsynced) and removed by a background thread, as Kafka does. The DeleteTopics answer
//! goes back once the tombstone is applied on the controller, i.e. committed.
//!
//! A restart mid-way must not bring the topic back: every partition folder names its topic
//! id, and what a deletion leaves on disk is cleaned up as the metadata log is applied
//! (partition_dirs.rs).

use super::NodeError;
use super::admin_answers::AdminResults;
use super::context::Cx;
use super::topic_record::{TopicRecord, validate_topic_name};
use super::topics::Topics;
use super::transport::Responder;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ErrorCode, RequestHeader, delete_topics_request as dt_req, delete_topics_response as dt_resp,
};

impl Topics {
    // ---- DeleteTopics -------------------------------------------------------------------------

    pub(super) fn handle_delete_topics(
        &mut self,
        cx: &mut Cx,
        responder: Responder,
        header: &RequestHeader,
        request: dt_req::DeleteTopicsRequest,
    ) -> Result<(), NodeError> {
        // A leader still applying what earlier epochs committed is not the controller yet.
        let leading = cx.controller_active();
        let requester = responder.requester();
        // v0-5 name topics; v6 names or ids.
        let asked: Vec<(Option<String>, Uuid)> = if header.api_version >= 6 {
            request
                .topics
                .iter()
                .map(|t| (t.name.clone(), t.topic_id))
                .collect()
        } else {
            request
                .topic_names
                .iter()
                .map(|n| (Some(n.clone()), Uuid::default()))
                .collect()
        };
        let mut results = Vec::new();
        let mut waiting = Vec::new();
        for (name, topic_id) in asked {
            let by_id = name.is_none() && topic_id != Uuid::default();
            let found: Option<TopicRecord> = match &name {
                Some(name) => self.image.get(name).cloned(),
                None => self
                    .image
                    .values()
                    .find(|t| t.topic_id == topic_id)
                    .cloned(),
            };
            let mut result = dt_resp::DeletableTopicResult {
                name: name.clone(),
                topic_id,
                error_code: 0,
                error_message: None,
            };
            let outcome: Result<u64, (ErrorCode, String)> = (|| {
                if !leading {
                    return Err((ErrorCode::NotController, "ask the controller".into()));
                }
                let named = name.as_ref().or(found.as_ref().map(|t| &t.name));
                if let Some(named) = named
                    && !cx.authorizer().allowed(
                        &requester,
                        crate::protocol::ApiKey::DeleteTopics,
                        named,
                    )
                {
                    return Err((
                        ErrorCode::TopicAuthorizationFailed,
                        "Authorization failed.".into(),
                    ));
                }
                // By name, or by the id of an internal topic (__consumer_offsets): internal
                // topics are the node's own state.
                if let Some(name) = name.as_ref().or(found.as_ref().map(|t| &t.name))
                    && validate_topic_name(name).is_err()
                {
                    return Err((
                        ErrorCode::InvalidTopicException,
                        format!("{name:?} cannot be deleted"),
                    ));
                }
                let Some(topic) = &found else {
                    return Err(if by_id {
                        (ErrorCode::UnknownTopicId, "no topic has this id".into())
                    } else {
                        (ErrorCode::UnknownTopicOrPartition, "no such topic".into())
                    });
                };
                if topic_id != Uuid::default() && topic_id != topic.topic_id {
                    return Err((ErrorCode::UnknownTopicId, "the topic has another id".into()));
                }
                let offset = cx
                    .propose_metadata_record(&topic.name, None)
                    .map_err(|c| (c, "metadata append failed".into()))?;
                let epoch = cx.metadata_raft().epoch();
                self.changed
                    .insert(topic.name.clone(), (None, offset, epoch));
                tracing::info!(topic = %topic.name, offset, "topic deletion proposed");
                Ok(offset)
            })();
            if let Some(topic) = &found {
                result.name = Some(topic.name.clone());
                result.topic_id = topic.topic_id;
            }
            match outcome {
                Ok(offset) => waiting.push((results.len(), offset)),
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
            AdminResults::Delete(results),
            waiting,
        )
    }
}
