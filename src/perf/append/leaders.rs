//! Where `perf append` sends: the voters from DescribeQuorum, the topic created if missing,
//! and each partition's leader from Metadata, waited for while a new topic elects them.

use std::time::{Duration, Instant};

use ringlog_net::client::{Client, ClientError};
use ringlog_net::clients::TopicPartition;
use ringlog_net::clients::transport::{Connections, fetch_metadata};
use ringlog_net::protocol::{ErrorCode, Request, Response, create_topics_request};

use super::{AppendError, client_error};
use crate::perf::CLIENT_TIMEOUT;

/// The voters' (node id, address) from DescribeQuorum at the first bootstrap that answers.
pub(super) fn voter_addresses(bootstrap: &str) -> Result<Vec<(i32, String)>, AppendError> {
    let mut last_error = None;
    for address in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        match Client::connect(address, CLIENT_TIMEOUT).and_then(|mut c| c.describe_quorum()) {
            Ok(view) => return Ok(view.endpoints),
            Err(error) => last_error = Some(error),
        }
    }
    Err(AppendError::Client {
        operation: format!("DescribeQuorum at {bootstrap}"),
        source: last_error.unwrap_or_else(|| ClientError::Protocol("no bootstrap address".into())),
    })
}

/// CreateTopics at each voter until the controller answers: NONE or TOPIC_ALREADY_EXISTS are
/// both fine; NOT_CONTROLLER asks the next voter.
pub(super) fn ensure_topic(
    voters: &[(i32, String)],
    topic: &str,
    partitions: i32,
    configs: &[(String, String)],
) -> Result<Partitions, AppendError> {
    let request = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: topic.into(),
            num_partitions: partitions,
            // The cluster's default (CreateTopics v4+): a quorum of one voter takes it too.
            replication_factor: -1,
            configs: configs
                .iter()
                .map(|(key, value)| create_topics_request::CreatableTopicConfig {
                    name: key.clone(),
                    value: Some(value.clone()),
                })
                .collect(),
            ..Default::default()
        }],
        timeout_ms: 5000,
        validate_only: false,
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for (_, address) in voters {
            let Ok(mut client) = Client::connect(address, CLIENT_TIMEOUT) else {
                continue;
            };
            let Ok(Response::CreateTopics(answer)) = client.request(&request, 7) else {
                continue;
            };
            let Some(result) = answer.topics.first() else {
                continue;
            };
            match ErrorCode::from_code(result.error_code) {
                Some(ErrorCode::None) => return Ok(Partitions::Exactly(partitions)),
                Some(ErrorCode::TopicAlreadyExists) => return Ok(Partitions::AsListed),
                Some(ErrorCode::NotController) => continue,
                code => {
                    return Err(AppendError::CreateTopics {
                        topic: topic.into(),
                        code,
                        message: result.error_message.clone(),
                    });
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(AppendError::CreateTopics {
                topic: topic.into(),
                code: Some(ErrorCode::NotController),
                message: Some("no voter answered as the controller within 20 s".into()),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The address of `topic`-`partition`'s leader (for `perf fetch`).
pub(in crate::perf) fn leader_address(
    bootstrap: &str,
    topic: &str,
    partition: i32,
) -> Result<String, AppendError> {
    let voters = voter_addresses(bootstrap)?;
    let leaders = partition_leaders(&voters, topic, Partitions::AsListed)?;
    leaders
        .into_iter()
        .nth(partition.max(0) as usize)
        .map(|leader| leader.address)
        .ok_or_else(|| AppendError::NoLeader {
            partition: TopicPartition::new(topic, partition),
            waited_secs: 0,
            errors: Vec::new(),
        })
}

/// How many partitions to wait for leaders of.
#[derive(Clone, Copy)]
pub(super) enum Partitions {
    /// Just created: this many.
    Exactly(i32),
    /// An existing topic: as many as Metadata lists (at least one).
    AsListed,
}

pub(super) struct Leader {
    pub(super) node_id: i32,
    pub(super) address: String,
}

/// Each partition's leader by Metadata, waited for (a new topic's partitions elect theirs).
pub(super) fn partition_leaders(
    voters: &[(i32, String)],
    topic: &str,
    expected: Partitions,
) -> Result<Vec<Leader>, AppendError> {
    let bootstrap = voters
        .iter()
        .map(|(_, a)| a.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let waited = Duration::from_secs(30);
    let deadline = Instant::now() + waited;
    loop {
        let mut connections = Connections::new(&bootstrap, CLIENT_TIMEOUT);
        let metadata = fetch_metadata(&mut connections, &[topic.to_string()])
            .map_err(client_error(format!("Metadata for {topic}")))?;
        let partitions = match expected {
            Partitions::Exactly(count) => count,
            Partitions::AsListed => (metadata.partitions.keys())
                .filter(|tp| tp.topic == topic)
                .count()
                .max(1) as i32,
        };
        let leaders: Option<Vec<i32>> = (0..partitions)
            .map(|p| {
                metadata
                    .partitions
                    .get(&TopicPartition::new(topic, p))?
                    .leader_id
            })
            .collect();
        if let Some(leaders) = leaders {
            return leaders
                .into_iter()
                .map(|node_id| {
                    let address = voters
                        .iter()
                        .find(|(id, _)| *id == node_id)
                        .map(|(_, a)| a.clone())
                        .ok_or_else(|| AppendError::UnknownNode {
                            node_id,
                            known: voters.to_vec(),
                        })?;
                    Ok(Leader { node_id, address })
                })
                .collect();
        }
        if Instant::now() >= deadline {
            let missing = (0..partitions)
                .map(|p| TopicPartition::new(topic, p))
                .find(|tp| {
                    metadata
                        .partitions
                        .get(tp)
                        .is_none_or(|l| l.leader_id.is_none())
                })
                .unwrap_or_else(|| TopicPartition::new(topic, 0));
            return Err(AppendError::NoLeader {
                partition: missing,
                waited_secs: waited.as_secs(),
                errors: metadata.errors.into_iter().collect(),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
