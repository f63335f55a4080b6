//! Kafka's error codes, with Kafka's numbers and names.
//!
//! Checked against apache/kafka `clients/src/main/java/org/apache/kafka/common/protocol/Errors.java`
//! (codes -1 to 129) and cross-checked in `tests/protocol_differential.rs` against the
//! `kafka-protocol` crate. Message fields keep the raw `i16` so that any code round-trips;
//! convert with [`ErrorCode::from_code`] and [`ErrorCode::code`].

use std::fmt;

macro_rules! error_codes {
    ($($variant:ident = $code:literal => $name:literal,)*) => {
        /// A Kafka error code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i16)]
        pub enum ErrorCode {
            $($variant = $code,)*
        }

        impl ErrorCode {
            /// Every code we know, in numeric order.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code on the wire.
            pub const fn code(self) -> i16 {
                self as i16
            }

            /// `None` for a code this build does not know (a newer server's).
            pub const fn from_code(code: i16) -> Option<ErrorCode> {
                match code {
                    $($code => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }

            /// Kafka's name, e.g. `NOT_LEADER_OR_FOLLOWER`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                }
            }
        }
    };
}

error_codes! {
    UnknownServerError = -1 => "UNKNOWN_SERVER_ERROR",
    None = 0 => "NONE",
    OffsetOutOfRange = 1 => "OFFSET_OUT_OF_RANGE",
    CorruptMessage = 2 => "CORRUPT_MESSAGE",
    UnknownTopicOrPartition = 3 => "UNKNOWN_TOPIC_OR_PARTITION",
    InvalidFetchSize = 4 => "INVALID_FETCH_SIZE",
    LeaderNotAvailable = 5 => "LEADER_NOT_AVAILABLE",
    NotLeaderOrFollower = 6 => "NOT_LEADER_OR_FOLLOWER",
    RequestTimedOut = 7 => "REQUEST_TIMED_OUT",
    BrokerNotAvailable = 8 => "BROKER_NOT_AVAILABLE",
    ReplicaNotAvailable = 9 => "REPLICA_NOT_AVAILABLE",
    MessageTooLarge = 10 => "MESSAGE_TOO_LARGE",
    StaleControllerEpoch = 11 => "STALE_CONTROLLER_EPOCH",
    OffsetMetadataTooLarge = 12 => "OFFSET_METADATA_TOO_LARGE",
    NetworkException = 13 => "NETWORK_EXCEPTION",
    CoordinatorLoadInProgress = 14 => "COORDINATOR_LOAD_IN_PROGRESS",
    CoordinatorNotAvailable = 15 => "COORDINATOR_NOT_AVAILABLE",
    NotCoordinator = 16 => "NOT_COORDINATOR",
    InvalidTopicException = 17 => "INVALID_TOPIC_EXCEPTION",
    RecordListTooLarge = 18 => "RECORD_LIST_TOO_LARGE",
    NotEnoughReplicas = 19 => "NOT_ENOUGH_REPLICAS",
    NotEnoughReplicasAfterAppend = 20 => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    InvalidRequiredAcks = 21 => "INVALID_REQUIRED_ACKS",
    IllegalGeneration = 22 => "ILLEGAL_GENERATION",
    InconsistentGroupProtocol = 23 => "INCONSISTENT_GROUP_PROTOCOL",
    InvalidGroupId = 24 => "INVALID_GROUP_ID",
    UnknownMemberId = 25 => "UNKNOWN_MEMBER_ID",
    InvalidSessionTimeout = 26 => "INVALID_SESSION_TIMEOUT",
    RebalanceInProgress = 27 => "REBALANCE_IN_PROGRESS",
    InvalidCommitOffsetSize = 28 => "INVALID_COMMIT_OFFSET_SIZE",
    TopicAuthorizationFailed = 29 => "TOPIC_AUTHORIZATION_FAILED",
    GroupAuthorizationFailed = 30 => "GROUP_AUTHORIZATION_FAILED",
    ClusterAuthorizationFailed = 31 => "CLUSTER_AUTHORIZATION_FAILED",
    InvalidTimestamp = 32 => "INVALID_TIMESTAMP",
    UnsupportedSaslMechanism = 33 => "UNSUPPORTED_SASL_MECHANISM",
    IllegalSaslState = 34 => "ILLEGAL_SASL_STATE",
    UnsupportedVersion = 35 => "UNSUPPORTED_VERSION",
    TopicAlreadyExists = 36 => "TOPIC_ALREADY_EXISTS",
    InvalidPartitions = 37 => "INVALID_PARTITIONS",
    InvalidReplicationFactor = 38 => "INVALID_REPLICATION_FACTOR",
    InvalidReplicaAssignment = 39 => "INVALID_REPLICA_ASSIGNMENT",
    InvalidConfig = 40 => "INVALID_CONFIG",
    NotController = 41 => "NOT_CONTROLLER",
    InvalidRequest = 42 => "INVALID_REQUEST",
    UnsupportedForMessageFormat = 43 => "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    PolicyViolation = 44 => "POLICY_VIOLATION",
    OutOfOrderSequenceNumber = 45 => "OUT_OF_ORDER_SEQUENCE_NUMBER",
    DuplicateSequenceNumber = 46 => "DUPLICATE_SEQUENCE_NUMBER",
    InvalidProducerEpoch = 47 => "INVALID_PRODUCER_EPOCH",
    InvalidTxnState = 48 => "INVALID_TXN_STATE",
    InvalidProducerIdMapping = 49 => "INVALID_PRODUCER_ID_MAPPING",
    InvalidTransactionTimeout = 50 => "INVALID_TRANSACTION_TIMEOUT",
    ConcurrentTransactions = 51 => "CONCURRENT_TRANSACTIONS",
    TransactionCoordinatorFenced = 52 => "TRANSACTION_COORDINATOR_FENCED",
    TransactionalIdAuthorizationFailed = 53 => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    SecurityDisabled = 54 => "SECURITY_DISABLED",
    OperationNotAttempted = 55 => "OPERATION_NOT_ATTEMPTED",
    KafkaStorageError = 56 => "KAFKA_STORAGE_ERROR",
    LogDirNotFound = 57 => "LOG_DIR_NOT_FOUND",
    SaslAuthenticationFailed = 58 => "SASL_AUTHENTICATION_FAILED",
    UnknownProducerId = 59 => "UNKNOWN_PRODUCER_ID",
    ReassignmentInProgress = 60 => "REASSIGNMENT_IN_PROGRESS",
    DelegationTokenAuthDisabled = 61 => "DELEGATION_TOKEN_AUTH_DISABLED",
    DelegationTokenNotFound = 62 => "DELEGATION_TOKEN_NOT_FOUND",
    DelegationTokenOwnerMismatch = 63 => "DELEGATION_TOKEN_OWNER_MISMATCH",
    DelegationTokenRequestNotAllowed = 64 => "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
    DelegationTokenAuthorizationFailed = 65 => "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    DelegationTokenExpired = 66 => "DELEGATION_TOKEN_EXPIRED",
    InvalidPrincipalType = 67 => "INVALID_PRINCIPAL_TYPE",
    NonEmptyGroup = 68 => "NON_EMPTY_GROUP",
    GroupIdNotFound = 69 => "GROUP_ID_NOT_FOUND",
    FetchSessionIdNotFound = 70 => "FETCH_SESSION_ID_NOT_FOUND",
    InvalidFetchSessionEpoch = 71 => "INVALID_FETCH_SESSION_EPOCH",
    ListenerNotFound = 72 => "LISTENER_NOT_FOUND",
    TopicDeletionDisabled = 73 => "TOPIC_DELETION_DISABLED",
    FencedLeaderEpoch = 74 => "FENCED_LEADER_EPOCH",
    UnknownLeaderEpoch = 75 => "UNKNOWN_LEADER_EPOCH",
    UnsupportedCompressionType = 76 => "UNSUPPORTED_COMPRESSION_TYPE",
    StaleBrokerEpoch = 77 => "STALE_BROKER_EPOCH",
    OffsetNotAvailable = 78 => "OFFSET_NOT_AVAILABLE",
    MemberIdRequired = 79 => "MEMBER_ID_REQUIRED",
    PreferredLeaderNotAvailable = 80 => "PREFERRED_LEADER_NOT_AVAILABLE",
    GroupMaxSizeReached = 81 => "GROUP_MAX_SIZE_REACHED",
    FencedInstanceId = 82 => "FENCED_INSTANCE_ID",
    EligibleLeadersNotAvailable = 83 => "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    ElectionNotNeeded = 84 => "ELECTION_NOT_NEEDED",
    NoReassignmentInProgress = 85 => "NO_REASSIGNMENT_IN_PROGRESS",
    GroupSubscribedToTopic = 86 => "GROUP_SUBSCRIBED_TO_TOPIC",
    InvalidRecord = 87 => "INVALID_RECORD",
    UnstableOffsetCommit = 88 => "UNSTABLE_OFFSET_COMMIT",
    ThrottlingQuotaExceeded = 89 => "THROTTLING_QUOTA_EXCEEDED",
    ProducerFenced = 90 => "PRODUCER_FENCED",
    ResourceNotFound = 91 => "RESOURCE_NOT_FOUND",
    DuplicateResource = 92 => "DUPLICATE_RESOURCE",
    UnacceptableCredential = 93 => "UNACCEPTABLE_CREDENTIAL",
    InconsistentVoterSet = 94 => "INCONSISTENT_VOTER_SET",
    InvalidUpdateVersion = 95 => "INVALID_UPDATE_VERSION",
    FeatureUpdateFailed = 96 => "FEATURE_UPDATE_FAILED",
    PrincipalDeserializationFailure = 97 => "PRINCIPAL_DESERIALIZATION_FAILURE",
    SnapshotNotFound = 98 => "SNAPSHOT_NOT_FOUND",
    PositionOutOfRange = 99 => "POSITION_OUT_OF_RANGE",
    UnknownTopicId = 100 => "UNKNOWN_TOPIC_ID",
    DuplicateBrokerRegistration = 101 => "DUPLICATE_BROKER_REGISTRATION",
    BrokerIdNotRegistered = 102 => "BROKER_ID_NOT_REGISTERED",
    InconsistentTopicId = 103 => "INCONSISTENT_TOPIC_ID",
    InconsistentClusterId = 104 => "INCONSISTENT_CLUSTER_ID",
    TransactionalIdNotFound = 105 => "TRANSACTIONAL_ID_NOT_FOUND",
    FetchSessionTopicIdError = 106 => "FETCH_SESSION_TOPIC_ID_ERROR",
    IneligibleReplica = 107 => "INELIGIBLE_REPLICA",
    NewLeaderElected = 108 => "NEW_LEADER_ELECTED",
    OffsetMovedToTieredStorage = 109 => "OFFSET_MOVED_TO_TIERED_STORAGE",
    FencedMemberEpoch = 110 => "FENCED_MEMBER_EPOCH",
    UnreleasedInstanceId = 111 => "UNRELEASED_INSTANCE_ID",
    UnsupportedAssignor = 112 => "UNSUPPORTED_ASSIGNOR",
    StaleMemberEpoch = 113 => "STALE_MEMBER_EPOCH",
    MismatchedEndpointType = 114 => "MISMATCHED_ENDPOINT_TYPE",
    UnsupportedEndpointType = 115 => "UNSUPPORTED_ENDPOINT_TYPE",
    UnknownControllerId = 116 => "UNKNOWN_CONTROLLER_ID",
    UnknownSubscriptionId = 117 => "UNKNOWN_SUBSCRIPTION_ID",
    TelemetryTooLarge = 118 => "TELEMETRY_TOO_LARGE",
    InvalidRegistration = 119 => "INVALID_REGISTRATION",
    TransactionAbortable = 120 => "TRANSACTION_ABORTABLE",
    InvalidRecordState = 121 => "INVALID_RECORD_STATE",
    ShareSessionNotFound = 122 => "SHARE_SESSION_NOT_FOUND",
    InvalidShareSessionEpoch = 123 => "INVALID_SHARE_SESSION_EPOCH",
    FencedStateEpoch = 124 => "FENCED_STATE_EPOCH",
    InvalidVoterKey = 125 => "INVALID_VOTER_KEY",
    DuplicateVoter = 126 => "DUPLICATE_VOTER",
    VoterNotFound = 127 => "VOTER_NOT_FOUND",
    InvalidRegularExpression = 128 => "INVALID_REGULAR_EXPRESSION",
    RebootstrapRequired = 129 => "REBOOTSTRAP_REQUIRED",
}

impl ErrorCode {
    pub const fn is_none(self) -> bool {
        matches!(self, ErrorCode::None)
    }
}

impl From<ErrorCode> for i16 {
    fn from(e: ErrorCode) -> i16 {
        e.code()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}
