//! Our message definitions, one `message!` table per struct (see `dsl.rs`). Written from the
//! Kafka JSON schemas' field lists; module names follow Kafka's message names so that
//! `vote_request::PartitionData` and `vote_response::PartitionData` can both exist.

mod acls;
mod admin;
mod admin_cluster;
mod admin_configs;
mod fetch;
mod groups;
mod metadata;
mod offsets;
mod produce;
mod raft;
mod sasl;

pub use acls::{
    create_acls_request, create_acls_response, delete_acls_request, delete_acls_response,
    describe_acls_request, describe_acls_response,
};
pub use admin::{
    create_topics_request, create_topics_response, delete_topics_request, delete_topics_response,
};
pub use admin_cluster::{
    create_partitions_request, create_partitions_response, delete_records_request,
    delete_records_response, describe_cluster_request, describe_cluster_response,
};
pub use admin_configs::{
    alter_configs_request, alter_configs_response, describe_configs_request,
    describe_configs_response, incremental_alter_configs_request,
    incremental_alter_configs_response,
};
pub use fetch::{fetch_request, fetch_response};
pub use groups::{
    delete_groups_request, delete_groups_response, describe_groups_request,
    describe_groups_response, find_coordinator_request, find_coordinator_response,
    heartbeat_request, heartbeat_response, join_group_request, join_group_response,
    leave_group_request, leave_group_response, list_groups_request, list_groups_response,
    offset_commit_request, offset_commit_response, offset_delete_request, offset_delete_response,
    offset_fetch_request, offset_fetch_response, sync_group_request, sync_group_response,
};
pub use metadata::{
    api_versions_request, api_versions_response, metadata_request, metadata_response,
};
pub use offsets::{
    allocate_producer_ids_request, allocate_producer_ids_response, init_producer_id_request,
    init_producer_id_response, list_offsets_request, list_offsets_response,
    offset_for_leader_epoch_request, offset_for_leader_epoch_response,
};
pub use produce::{produce_request, produce_response};
pub use raft::{
    add_raft_voter_request, add_raft_voter_response, begin_quorum_epoch_request,
    begin_quorum_epoch_response, describe_quorum_request, describe_quorum_response,
    end_quorum_epoch_request, end_quorum_epoch_response, fetch_snapshot_request,
    fetch_snapshot_response, remove_raft_voter_request, remove_raft_voter_response,
    update_raft_voter_request, update_raft_voter_response, vote_request, vote_response,
};

pub use sasl::{
    alter_user_scram_credentials_request, alter_user_scram_credentials_response,
    describe_user_scram_credentials_request, describe_user_scram_credentials_response,
    sasl_authenticate_request, sasl_authenticate_response, sasl_handshake_request,
    sasl_handshake_response,
};

pub use add_raft_voter_request::AddRaftVoterRequest;
pub use add_raft_voter_response::AddRaftVoterResponse;
pub use allocate_producer_ids_request::AllocateProducerIdsRequest;
pub use allocate_producer_ids_response::AllocateProducerIdsResponse;
pub use alter_configs_request::AlterConfigsRequest;
pub use alter_configs_response::AlterConfigsResponse;
pub use alter_user_scram_credentials_request::AlterUserScramCredentialsRequest;
pub use alter_user_scram_credentials_response::AlterUserScramCredentialsResponse;
pub use api_versions_request::ApiVersionsRequest;
pub use api_versions_response::ApiVersionsResponse;
pub use begin_quorum_epoch_request::BeginQuorumEpochRequest;
pub use begin_quorum_epoch_response::BeginQuorumEpochResponse;
pub use create_acls_request::CreateAclsRequest;
pub use create_acls_response::CreateAclsResponse;
pub use create_partitions_request::CreatePartitionsRequest;
pub use create_partitions_response::CreatePartitionsResponse;
pub use create_topics_request::CreateTopicsRequest;
pub use create_topics_response::CreateTopicsResponse;
pub use delete_acls_request::DeleteAclsRequest;
pub use delete_acls_response::DeleteAclsResponse;
pub use delete_groups_request::DeleteGroupsRequest;
pub use delete_groups_response::DeleteGroupsResponse;
pub use delete_records_request::DeleteRecordsRequest;
pub use delete_records_response::DeleteRecordsResponse;
pub use delete_topics_request::DeleteTopicsRequest;
pub use delete_topics_response::DeleteTopicsResponse;
pub use describe_acls_request::DescribeAclsRequest;
pub use describe_acls_response::DescribeAclsResponse;
pub use describe_cluster_request::DescribeClusterRequest;
pub use describe_cluster_response::DescribeClusterResponse;
pub use describe_configs_request::DescribeConfigsRequest;
pub use describe_configs_response::DescribeConfigsResponse;
pub use describe_groups_request::DescribeGroupsRequest;
pub use describe_groups_response::DescribeGroupsResponse;
pub use describe_quorum_request::DescribeQuorumRequest;
pub use describe_quorum_response::DescribeQuorumResponse;
pub use describe_user_scram_credentials_request::DescribeUserScramCredentialsRequest;
pub use describe_user_scram_credentials_response::DescribeUserScramCredentialsResponse;
pub use end_quorum_epoch_request::EndQuorumEpochRequest;
pub use end_quorum_epoch_response::EndQuorumEpochResponse;
pub use fetch_request::FetchRequest;
pub use fetch_response::FetchResponse;
pub use fetch_snapshot_request::FetchSnapshotRequest;
pub use fetch_snapshot_response::FetchSnapshotResponse;
pub use find_coordinator_request::FindCoordinatorRequest;
pub use find_coordinator_response::FindCoordinatorResponse;
pub use heartbeat_request::HeartbeatRequest;
pub use heartbeat_response::HeartbeatResponse;
pub use incremental_alter_configs_request::IncrementalAlterConfigsRequest;
pub use incremental_alter_configs_response::IncrementalAlterConfigsResponse;
pub use init_producer_id_request::InitProducerIdRequest;
pub use init_producer_id_response::InitProducerIdResponse;
pub use join_group_request::JoinGroupRequest;
pub use join_group_response::JoinGroupResponse;
pub use leave_group_request::LeaveGroupRequest;
pub use leave_group_response::LeaveGroupResponse;
pub use list_groups_request::ListGroupsRequest;
pub use list_groups_response::ListGroupsResponse;
pub use list_offsets_request::ListOffsetsRequest;
pub use list_offsets_response::ListOffsetsResponse;
pub use metadata_request::MetadataRequest;
pub use metadata_response::MetadataResponse;
pub use offset_commit_request::OffsetCommitRequest;
pub use offset_commit_response::OffsetCommitResponse;
pub use offset_delete_request::OffsetDeleteRequest;
pub use offset_delete_response::OffsetDeleteResponse;
pub use offset_fetch_request::OffsetFetchRequest;
pub use offset_fetch_response::OffsetFetchResponse;
pub use offset_for_leader_epoch_request::OffsetForLeaderEpochRequest;
pub use offset_for_leader_epoch_response::OffsetForLeaderEpochResponse;
pub use produce_request::ProduceRequest;
pub use produce_response::ProduceResponse;
pub use remove_raft_voter_request::RemoveRaftVoterRequest;
pub use remove_raft_voter_response::RemoveRaftVoterResponse;
pub use sasl_authenticate_request::SaslAuthenticateRequest;
pub use sasl_authenticate_response::SaslAuthenticateResponse;
pub use sasl_handshake_request::SaslHandshakeRequest;
pub use sasl_handshake_response::SaslHandshakeResponse;
pub use sync_group_request::SyncGroupRequest;
pub use sync_group_response::SyncGroupResponse;
pub use update_raft_voter_request::UpdateRaftVoterRequest;
pub use update_raft_voter_response::UpdateRaftVoterResponse;
pub use vote_request::VoteRequest;
pub use vote_response::VoteResponse;
