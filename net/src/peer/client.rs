//! [`KafkaClient`]: a blocking client for command-line tools (describe-quorum and friends),
//! the same [`PeerClient`] driven by a private tokio-uring runtime.

use super::{PeerClient, PeerConfig, PeerError};
use crate::protocol::describe_quorum_request::{PartitionData, TopicData};
use crate::protocol::{DescribeQuorumRequest, DescribeQuorumResponse, Request, Response};

pub struct KafkaClient {
    runtime: tokio_uring::Runtime,
    peer: PeerClient,
}

impl KafkaClient {
    /// Connects to `address` (`host:port`) and runs the ApiVersions handshake.
    pub fn connect(address: &str, config: PeerConfig) -> Result<KafkaClient, PeerError> {
        let runtime = tokio_uring::Runtime::new(&tokio_uring::builder()).map_err(|error| {
            PeerError::Runtime {
                reason: error.to_string(),
            }
        })?;
        let peer = PeerClient::new(address, config);
        runtime.block_on(peer.connect())?;
        Ok(KafkaClient { runtime, peer })
    }

    pub fn peer(&self) -> &PeerClient {
        &self.peer
    }

    /// Sends one request and waits for its response.
    pub fn send(&self, request: Request) -> Result<Response, PeerError> {
        self.runtime.block_on(self.peer.send(request))
    }

    /// DescribeQuorum for one partition (e.g. `__cluster_metadata`, 0).
    pub fn describe_quorum(
        &self,
        topic_name: &str,
        partition_index: i32,
    ) -> Result<DescribeQuorumResponse, PeerError> {
        let request = DescribeQuorumRequest {
            topics: vec![TopicData {
                topic_name: topic_name.into(),
                partitions: vec![PartitionData { partition_index }],
            }],
        };
        match self.send(Request::DescribeQuorum(request))? {
            Response::DescribeQuorum(response) => Ok(response),
            other => Err(PeerError::UnexpectedResponse {
                expected: crate::protocol::ApiKey::DescribeQuorum,
                got: other.api_key(),
            }),
        }
    }
}
