//! The blocking client: one connection, one request at a time. The CLI (`describe-quorum`,
//! `produce`, `consume`, `add-voter`, …), `ringlog perf`, the Rust consumer and producer
//! (`crate::clients`) and the integration tests use it. It opens every connection with the
//! ApiVersions handshake and frames, bounds and matches answers through [`Exchange`].

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;

use super::exchange::Exchange;
use super::{ClientError, METADATA_TOPIC};
use crate::protocol::wire::Records;
use crate::protocol::{
    ApiKey, Request, Response, add_raft_voter_request, describe_quorum_request,
    describe_quorum_response, fetch_request, fetch_response, metadata_request, produce_request,
    produce_response, remove_raft_voter_request,
};

/// Versions the client speaks (every node accepts them).
pub const DESCRIBE_QUORUM_VERSION: i16 = 2;
pub const PRODUCE_VERSION: i16 = 9;
pub const CONSUMER_FETCH_VERSION: i16 = 12;
pub const METADATA_VERSION: i16 = 12;
pub const ADD_RAFT_VOTER_VERSION: i16 = 1;
pub const REMOVE_RAFT_VOTER_VERSION: i16 = 0;

/// The largest response the client accepts (a consumer Fetch answers up to its `max_bytes`).
pub const RESPONSE_BYTES_MAX: usize = 1 << 30;

pub struct Client {
    address: String,
    stream: TcpStream,
    exchange: Exchange,
}

impl Client {
    /// Connects within `timeout` and handshakes (ApiVersions). Reads wait at most
    /// `max(timeout, 5 s)` for an answer.
    pub fn connect(address: &str, timeout: Duration) -> Result<Client, ClientError> {
        let io = |source| ClientError::Io {
            address: address.to_string(),
            source,
        };
        let target = address
            .to_socket_addrs()
            .map_err(io)?
            .next()
            .ok_or_else(|| ClientError::Protocol(format!("{address}: no address")))?;
        let stream = TcpStream::connect_timeout(&target, timeout).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        stream
            .set_read_timeout(Some(timeout.max(Duration::from_secs(5))))
            .map_err(io)?;
        let mut client = Client {
            address: address.to_string(),
            stream,
            exchange: Exchange::new("ringlog-cli", RESPONSE_BYTES_MAX),
        };
        let (_, frame) = client.exchange.encode_handshake()?;
        client.write(&frame)?;
        let (_, answer) = client.read_response()?;
        client.exchange.on_api_versions(answer)?;
        Ok(client)
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// The highest version of `api` this client and the node both speak.
    pub fn max_common_version(&self, api: ApiKey) -> Option<i16> {
        self.exchange.max_common_version(api)
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            address: self.address.clone(),
            source,
        }
    }

    /// Sends a request without reading an answer (Produce with acks=0: the node sends none,
    /// so it is not kept as in flight).
    pub fn send(&mut self, request: &Request, version: i16) -> Result<i32, ClientError> {
        let (correlation_id, frame) = self.exchange.encode(request, version)?;
        self.exchange.unsend(correlation_id);
        self.write(&frame)?;
        Ok(correlation_id)
    }

    fn write(&mut self, frame: &[u8]) -> Result<(), ClientError> {
        use std::io::Write;
        self.stream.write_all(frame).map_err(|e| self.io(e))
    }

    /// Sends a request and reads its answer.
    pub fn request(&mut self, request: &Request, version: i16) -> Result<Response, ClientError> {
        let (correlation_id, frame) = self.exchange.encode(request, version)?;
        if let Err(error) = self.write(&frame) {
            self.exchange.reset();
            return Err(error);
        }
        match self.read_response() {
            Ok((answered, response)) => {
                debug_assert_eq!(answered, correlation_id, "the exchange matched it");
                Ok(response)
            }
            Err(error) => {
                // Out of step or gone: nothing more can be read on this connection.
                self.exchange.reset();
                Err(error)
            }
        }
    }

    fn read_response(&mut self) -> Result<(i32, Response), ClientError> {
        loop {
            if let Some(answer) = self.exchange.next_response()? {
                return Ok(answer);
            }
            // Read straight into the buffer's spare room, sized for the whole frame once its
            // length is known: one kernel-to-user copy per byte (no bounce buffer, no regrowth),
            // and the previous frame's allocation is reclaimed once its response was dropped.
            let buf = self.exchange.reserve_for_read();
            let spare = buf.spare_capacity_mut();
            // SAFETY: the kernel writes at most `spare.len()` bytes into the buffer's own spare
            // capacity; exactly the `n` bytes it reports are then marked initialised.
            let n = unsafe {
                libc::recv(
                    std::os::fd::AsRawFd::as_raw_fd(&self.stream),
                    spare.as_mut_ptr().cast(),
                    spare.len(),
                    0,
                )
            };
            if n < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(self.io(error));
            }
            if n == 0 {
                return Err(self.io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            // SAFETY: the `n` bytes after the current length were just written by recv.
            unsafe { buf.set_len(buf.len() + n as usize) };
        }
    }

    /// The cluster id, from Metadata (no topics asked). A replica's quorum requests must name
    /// it, or the node refuses them with INCONSISTENT_CLUSTER_ID.
    pub fn cluster_id(&mut self) -> Result<String, ClientError> {
        let request = Request::Metadata(metadata_request::MetadataRequest {
            topics: Some(Vec::new()),
            ..Default::default()
        });
        let Response::Metadata(r) = self.request(&request, METADATA_VERSION)? else {
            return Err(ClientError::Protocol("not a Metadata answer".into()));
        };
        r.cluster_id
            .ok_or_else(|| ClientError::Protocol("a Metadata answer without a cluster id".into()))
    }

    /// DescribeQuorum for `__cluster_metadata-0`: the partition data and the voters' endpoints.
    pub fn describe_quorum(&mut self) -> Result<QuorumView, ClientError> {
        self.describe_quorum_of(METADATA_TOPIC, 0)
    }

    /// DescribeQuorum for any partition: every partition is its own Raft quorum over the same
    /// voters, each with its own leader, epoch and high-watermark.
    pub fn describe_quorum_of(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Result<QuorumView, ClientError> {
        let request = Request::DescribeQuorum(describe_quorum_request::DescribeQuorumRequest {
            topics: vec![describe_quorum_request::TopicData {
                topic_name: topic.into(),
                partitions: vec![describe_quorum_request::PartitionData {
                    partition_index: partition,
                }],
            }],
        });
        let Response::DescribeQuorum(r) = self.request(&request, DESCRIBE_QUORUM_VERSION)? else {
            return Err(ClientError::Protocol("not a DescribeQuorum answer".into()));
        };
        let partition = r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .cloned()
            .ok_or_else(|| {
                ClientError::Protocol("DescribeQuorum answer without partition".into())
            })?;
        let endpoints = node_endpoints(&r);
        Ok(QuorumView {
            partition,
            endpoints,
            nodes: r.nodes,
        })
    }

    /// KIP-853 AddRaftVoter to this node (the metadata quorum's leader, or the answer is
    /// NOT_LEADER_OR_FOLLOWER): answered once the new voter set is committed. Returns the error
    /// code and message.
    pub fn add_raft_voter(
        &mut self,
        cluster_id: &str,
        voter_id: i32,
        directory_id: [u8; 16],
        listeners: Vec<(String, String, u16)>,
        timeout_ms: i32,
    ) -> Result<(i16, Option<String>), ClientError> {
        let request = Request::AddRaftVoter(add_raft_voter_request::AddRaftVoterRequest {
            cluster_id: Some(cluster_id.into()),
            timeout_ms,
            voter_id,
            voter_directory_id: crate::protocol::Uuid(directory_id),
            listeners: listeners
                .into_iter()
                .map(|(name, host, port)| add_raft_voter_request::Listener { name, host, port })
                .collect(),
            ack_when_committed: true,
        });
        let Response::AddRaftVoter(r) = self.request(&request, ADD_RAFT_VOTER_VERSION)? else {
            return Err(ClientError::Protocol("not an AddRaftVoter answer".into()));
        };
        Ok((r.error_code, r.error_message))
    }

    /// KIP-853 RemoveRaftVoter (see [`Client::add_raft_voter`]).
    pub fn remove_raft_voter(
        &mut self,
        cluster_id: &str,
        voter_id: i32,
        directory_id: [u8; 16],
    ) -> Result<(i16, Option<String>), ClientError> {
        let request = Request::RemoveRaftVoter(remove_raft_voter_request::RemoveRaftVoterRequest {
            cluster_id: Some(cluster_id.into()),
            voter_id,
            voter_directory_id: crate::protocol::Uuid(directory_id),
        });
        let Response::RemoveRaftVoter(r) = self.request(&request, REMOVE_RAFT_VOTER_VERSION)?
        else {
            return Err(ClientError::Protocol("not a RemoveRaftVoter answer".into()));
        };
        Ok((r.error_code, r.error_message))
    }

    /// Produces `records` (RecordBatch v2 bytes) to `topic`-`partition`. `None` for acks=0.
    /// Internal topics (`__cluster_metadata`) are refused by the node with
    /// INVALID_TOPIC_EXCEPTION: only the node writes them.
    pub fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Bytes,
        acks: i16,
        timeout_ms: i32,
    ) -> Result<Option<produce_response::PartitionProduceResponse>, ClientError> {
        let request = Request::Produce(produce_request::ProduceRequest {
            acks,
            timeout_ms,
            topic_data: vec![produce_request::TopicProduceData {
                name: topic.into(),
                partition_data: vec![produce_request::PartitionProduceData {
                    index: partition,
                    records: Some(records),
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        if acks == 0 {
            self.send(&request, PRODUCE_VERSION)?;
            return Ok(None);
        }
        let Response::Produce(r) = self.request(&request, PRODUCE_VERSION)? else {
            return Err(ClientError::Protocol("not a Produce answer".into()));
        };
        r.responses
            .into_iter()
            .next()
            .and_then(|t| t.partition_responses.into_iter().next())
            .map(Some)
            .ok_or_else(|| ClientError::Protocol("Produce answer without partition".into()))
    }

    /// Consumer-style Fetch (replica id -1) of `topic`-`partition` from `offset` (any topic,
    /// internal ones included).
    pub fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_wait_ms: i32,
        max_bytes: i32,
    ) -> Result<fetch_response::PartitionData, ClientError> {
        let request = Request::Fetch(fetch_request::FetchRequest {
            replica_id: -1,
            max_wait_ms,
            min_bytes: 1,
            max_bytes,
            topics: vec![fetch_request::FetchTopic {
                topic: topic.into(),
                partitions: vec![fetch_request::FetchPartition {
                    partition,
                    fetch_offset: offset,
                    partition_max_bytes: max_bytes,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        let Response::Fetch(r) = self.request(&request, CONSUMER_FETCH_VERSION)? else {
            return Err(ClientError::Protocol("not a Fetch answer".into()));
        };
        r.responses
            .into_iter()
            .next()
            .and_then(|t| t.partitions.into_iter().next())
            .ok_or_else(|| ClientError::Protocol("Fetch answer without partition".into()))
    }
}

/// What DescribeQuorum tells a client.
/// Each node's first listener in a DescribeQuorum answer, as `host:port` (KIP-853's Nodes).
pub fn node_endpoints(r: &describe_quorum_response::DescribeQuorumResponse) -> Vec<(i32, String)> {
    r.nodes
        .iter()
        .filter_map(|n| {
            n.listeners
                .first()
                .map(|l| (n.node_id, format!("{}:{}", l.host, l.port)))
        })
        .collect()
}

#[derive(Clone, Debug)]
pub struct QuorumView {
    pub partition: describe_quorum_response::PartitionData,
    /// (node id, host:port) of every voter.
    pub endpoints: Vec<(i32, String)>,
    /// Every voter with all its listeners (DescribeQuorum v2's Nodes).
    pub nodes: Vec<describe_quorum_response::Node>,
}

impl QuorumView {
    pub fn leader_address(&self) -> Option<String> {
        let leader = self.partition.leader_id;
        self.endpoints
            .iter()
            .find(|(id, _)| *id == leader)
            .map(|(_, a)| a.clone())
    }
}

/// The records of a fetch answer, as bytes.
pub fn fetched_records(data: &fetch_response::PartitionData) -> Bytes {
    match &data.records {
        Some(Records::Bytes(b)) => b.clone(),
        _ => Bytes::new(),
    }
}

/// Asks `bootstrap` who leads `__cluster_metadata-0` and connects to the leader.
pub fn connect_to_leader(bootstrap: &str, timeout: Duration) -> Result<Client, ClientError> {
    connect_to_partition_leader(bootstrap, METADATA_TOPIC, 0, timeout)
}

/// Asks `bootstrap` who leads `topic`-`partition` (each partition is its own quorum with its
/// own leader) and connects to that leader.
pub fn connect_to_partition_leader(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> Result<Client, ClientError> {
    let view = Client::connect(bootstrap, timeout)?.describe_quorum_of(topic, partition)?;
    if view.partition.leader_id < 0 {
        return Err(ClientError::Protocol("no leader elected yet".into()));
    }
    let address = view.leader_address().ok_or_else(|| {
        ClientError::Protocol(format!(
            "no address for leader {}",
            view.partition.leader_id
        ))
    })?;
    Client::connect(&address, timeout)
}
