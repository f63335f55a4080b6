//! DescribeCluster (60): the cluster id, the controller (the leader of `__cluster_metadata-0`,
//! as Metadata names it) and the nodes, the same list Metadata gives (`metadata_brokers`:
//! every voter, and this node when it is an observer). Nodes have no rack (`broker.rack` is
//! not a node property). Only the brokers endpoint type (1) is served: asking for the
//! controllers (2, KIP-919) answers UNSUPPORTED_ENDPOINT_TYPE as a broker does.

use super::Node;
use crate::protocol::{
    ErrorCode, describe_cluster_request as dcl_req, describe_cluster_response as dcl_resp,
};

/// DescribeCluster's endpoint type for brokers.
const ENDPOINT_TYPE_BROKERS: i8 = 1;

impl Node {
    pub(super) fn handle_describe_cluster(
        &self,
        request: &dcl_req::DescribeClusterRequest,
        requester: &super::authorize::Requester,
    ) -> dcl_resp::DescribeClusterResponse {
        if request.endpoint_type != ENDPOINT_TYPE_BROKERS {
            return dcl_resp::DescribeClusterResponse {
                error_code: ErrorCode::UnsupportedEndpointType.code(),
                error_message: Some("only brokers (endpoint type 1) are described".into()),
                endpoint_type: request.endpoint_type,
                cluster_id: self.cluster_id.clone(),
                ..Default::default()
            };
        }
        let brokers = super::metadata::metadata_brokers(&self.config, self.metadata_raft())
            .into_iter()
            .map(|b| dcl_resp::DescribeClusterBroker {
                broker_id: b.node_id,
                host: b.host,
                port: b.port,
                rack: b.rack,
                is_fenced: false,
            })
            .collect();
        dcl_resp::DescribeClusterResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            endpoint_type: ENDPOINT_TYPE_BROKERS,
            cluster_id: self.cluster_id.clone(),
            controller_id: self.metadata_raft().leader_id().unwrap_or(-1),
            brokers,
            // Kafka's: the operations on the cluster the requester may perform, when asked.
            cluster_authorized_operations: if request.include_cluster_authorized_operations {
                self.authorizer().authorized_operations(
                    requester,
                    crate::acl::ResourceType::Cluster,
                    crate::acl::binding::CLUSTER_RESOURCE_NAME,
                )
            } else {
                i32::MIN
            },
        }
    }
}
