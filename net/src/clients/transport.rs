//! How the clients reach the nodes: a [`Transport`] sends one request to one node (or to any
//! node, for Metadata) and returns its answer. [`Connections`] is the real one: blocking
//! [`Client`] connections by node id, addresses learnt from Metadata, bootstrap addresses for
//! the first contact. Unit tests put an in-process fake behind the same trait.
//!
//! [`fetch_metadata`] is shared by the consumer and the producer: which node leads each
//! partition, in which leader epoch (Metadata v7+ carries it, KIP-320).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::client::{Client, ClientError, DESCRIBE_QUORUM_VERSION};
use crate::protocol::METADATA_TOPIC;
use crate::protocol::{ErrorCode, Request, Response, metadata_request};

use super::TopicPartition;

/// Versions the clients speak (the node serves them, docs/clients.md).
pub const METADATA_VERSION: i16 = 12;
pub const FETCH_VERSION: i16 = 12;
pub const LIST_OFFSETS_VERSION: i16 = 7;
pub const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;
pub const PRODUCE_VERSION: i16 = 9;

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Any reachable node (bootstrap or a known broker): Metadata.
    Any,
    Node(i32),
}

pub trait Transport {
    /// Sends `request` at `version` and returns the answer.
    fn request(
        &mut self,
        target: Target,
        request: &Request,
        version: i16,
    ) -> Result<Response, ClientError>;
    /// Sends without waiting for an answer (Produce with acks=0).
    fn send(&mut self, target: Target, request: &Request, version: i16) -> Result<(), ClientError>;
    /// The brokers (node id, host:port) the latest Metadata named.
    fn set_brokers(&mut self, brokers: Vec<(i32, String)>);
}

/// Real connections: one blocking [`Client`] per node, opened on first use and dropped on
/// any error (the next request reconnects).
pub struct Connections {
    bootstrap: Vec<String>,
    brokers: BTreeMap<i32, String>,
    clients: HashMap<i32, Client>,
    /// The connection used for `Target::Any` when no broker is known yet.
    bootstrap_client: Option<Client>,
    next_bootstrap: usize,
    timeout: Duration,
}

impl Connections {
    /// `bootstrap`: comma-separated host:port list.
    pub fn new(bootstrap: &str, timeout: Duration) -> Connections {
        Connections {
            bootstrap: bootstrap
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            brokers: BTreeMap::new(),
            clients: HashMap::new(),
            bootstrap_client: None,
            next_bootstrap: 0,
            timeout,
        }
    }

    fn client(&mut self, node: i32) -> Result<&mut Client, ClientError> {
        if !self.clients.contains_key(&node) {
            let address = self
                .brokers
                .get(&node)
                .cloned()
                .ok_or_else(|| ClientError::Protocol(format!("no address for node {node}")))?;
            let client = Client::connect(&address, self.timeout)?;
            self.clients.insert(node, client);
        }
        Ok(self.clients.get_mut(&node).expect("inserted above"))
    }

    /// Any node: a known broker in turn, else the bootstrap addresses in turn.
    fn any_request(&mut self, request: &Request, version: i16) -> Result<Response, ClientError> {
        let mut last_error = None;
        let known: Vec<i32> = self.brokers.keys().copied().collect();
        for node in known {
            match self.client(node).and_then(|c| c.request(request, version)) {
                Ok(response) => return Ok(response),
                Err(error) => {
                    self.clients.remove(&node);
                    last_error = Some(error);
                }
            }
        }
        for _ in 0..self.bootstrap.len() {
            if self.bootstrap_client.is_none() {
                let address = &self.bootstrap[self.next_bootstrap % self.bootstrap.len()];
                self.next_bootstrap += 1;
                match Client::connect(address, self.timeout) {
                    Ok(client) => self.bootstrap_client = Some(client),
                    Err(error) => {
                        last_error = Some(error);
                        continue;
                    }
                }
            }
            let client = self.bootstrap_client.as_mut().expect("connected above");
            match client.request(request, version) {
                Ok(response) => return Ok(response),
                Err(error) => {
                    self.bootstrap_client = None;
                    last_error = Some(error);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| ClientError::Protocol("no bootstrap address".to_string())))
    }
}

impl Transport for Connections {
    fn request(
        &mut self,
        target: Target,
        request: &Request,
        version: i16,
    ) -> Result<Response, ClientError> {
        match target {
            Target::Any => self.any_request(request, version),
            Target::Node(node) => {
                let result = self.client(node).and_then(|c| c.request(request, version));
                if result.is_err() {
                    self.clients.remove(&node);
                }
                result
            }
        }
    }

    fn send(&mut self, target: Target, request: &Request, version: i16) -> Result<(), ClientError> {
        let Target::Node(node) = target else {
            return Err(ClientError::Protocol(
                "a request without answer needs a node".into(),
            ));
        };
        let result = self.client(node).and_then(|c| c.send(request, version));
        if result.is_err() {
            self.clients.remove(&node);
        }
        result.map(|_| ())
    }

    fn set_brokers(&mut self, brokers: Vec<(i32, String)>) {
        let brokers: BTreeMap<i32, String> = brokers.into_iter().collect();
        // A node whose address changed gets a new connection.
        self.clients
            .retain(|id, client| brokers.get(id).is_some_and(|a| a == client.address()));
        self.brokers = brokers;
    }
}

/// A partition's leader as Metadata reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderAndEpoch {
    /// `None` while no leader is known.
    pub leader_id: Option<i32>,
    /// -1 when unknown.
    pub leader_epoch: i32,
}

/// What one Metadata answer says about the asked partitions.
#[derive(Clone, Debug, Default)]
pub struct ClusterMetadata {
    pub partitions: HashMap<TopicPartition, LeaderAndEpoch>,
    /// Per-partition or per-topic errors (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE…).
    pub errors: HashMap<TopicPartition, ErrorCode>,
}

/// Asks any node for the leaders of `topics` and tells `transport` the brokers' addresses.
pub fn fetch_metadata<T: Transport + ?Sized>(
    transport: &mut T,
    topics: &[String],
) -> Result<ClusterMetadata, ClientError> {
    fetch_metadata_with(transport, topics, false)
}

/// [`fetch_metadata`], asking the node to create a missing topic when
/// `allow_auto_topic_creation` (as a Kafka producer's Metadata request does; the cluster's
/// `auto.create.topics.enable` decides): a topic being created is answered
/// LEADER_NOT_AVAILABLE, so the caller asks again.
pub fn fetch_metadata_with<T: Transport + ?Sized>(
    transport: &mut T,
    topics: &[String],
    allow_auto_topic_creation: bool,
) -> Result<ClusterMetadata, ClientError> {
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(
            topics
                .iter()
                .map(|t| metadata_request::MetadataRequestTopic {
                    name: Some(t.clone()),
                    ..Default::default()
                })
                .collect(),
        ),
        allow_auto_topic_creation,
        ..Default::default()
    });
    let Response::Metadata(response) =
        transport.request(Target::Any, &request, METADATA_VERSION)?
    else {
        return Err(ClientError::Protocol("not a Metadata answer".into()));
    };
    transport.set_brokers(
        response
            .brokers
            .iter()
            .map(|b| (b.node_id, format!("{}:{}", b.host, b.port)))
            .collect(),
    );
    let mut metadata = ClusterMetadata::default();
    for topic in &response.topics {
        let name = topic.name.clone().unwrap_or_default();
        let topic_error =
            ErrorCode::from_code(topic.error_code).unwrap_or(ErrorCode::UnknownServerError);
        if !topic_error.is_none() {
            metadata
                .errors
                .insert(TopicPartition::new(name.clone(), -1), topic_error);
        }
        for p in &topic.partitions {
            let tp = TopicPartition::new(name.clone(), p.partition_index);
            let error = ErrorCode::from_code(p.error_code).unwrap_or(ErrorCode::UnknownServerError);
            if !error.is_none() {
                metadata.errors.insert(tp.clone(), error);
            }
            metadata.partitions.insert(
                tp,
                LeaderAndEpoch {
                    leader_id: (p.leader_id >= 0).then_some(p.leader_id),
                    leader_epoch: p.leader_epoch,
                },
            );
        }
    }
    if topics.iter().any(|t| t == METADATA_TOPIC) {
        let tp = TopicPartition::new(METADATA_TOPIC, 0);
        if metadata
            .partitions
            .get(&tp)
            .is_none_or(|l| l.leader_id.is_none())
        {
            // KRaft does not list its own log in Metadata; DescribeQuorum names its leader.
            let leader = describe_quorum_leader(transport)?;
            metadata.errors.remove(&tp);
            metadata
                .errors
                .remove(&TopicPartition::new(METADATA_TOPIC, -1));
            metadata.partitions.insert(tp, leader);
        }
    }
    Ok(metadata)
}

/// The leader of `__cluster_metadata-0` by DescribeQuorum (the voters' endpoints become the
/// brokers' addresses).
fn describe_quorum_leader<T: Transport + ?Sized>(
    transport: &mut T,
) -> Result<LeaderAndEpoch, ClientError> {
    use crate::protocol::describe_quorum_request as d;
    let request = Request::DescribeQuorum(d::DescribeQuorumRequest {
        topics: vec![d::TopicData {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![d::PartitionData { partition_index: 0 }],
        }],
    });
    let Response::DescribeQuorum(r) =
        transport.request(Target::Any, &request, DESCRIBE_QUORUM_VERSION)?
    else {
        return Err(ClientError::Protocol("not a DescribeQuorum answer".into()));
    };
    let brokers = crate::client::node_endpoints(&r);
    if !brokers.is_empty() {
        transport.set_brokers(brokers);
    }
    let partition = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| ClientError::Protocol("DescribeQuorum answer without partition".into()))?;
    // A node that is not the leader answers NOT_LEADER_OR_FOLLOWER with the leader it knows.
    Ok(LeaderAndEpoch {
        leader_id: (partition.leader_id >= 0).then_some(partition.leader_id),
        leader_epoch: partition.leader_epoch,
    })
}
