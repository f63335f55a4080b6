//! The table of every configuration key (`KEYS`): name, aliases, default and meaning; parsing
//! and validation are in `config.rs`.

use super::KeyDefinition;

/// Every key the node accepts. Kafka's names and defaults wherever Kafka has one; the KIPs' names
/// where they introduce one (see `shared/kips/README.md`), and the KIPs' other spellings
/// (KIP-595's `quorum.*`, KIP-630's `replica.fetch.response.max.bytes`) as aliases.
///
/// `controller.quorum.append.linger.ms` is not here: the node never used it (its group commit
/// flushes when the previous flush completes), so it is refused like any unknown key rather
/// than silently ignored.
pub const KEYS: &[KeyDefinition] = &[
    KeyDefinition {
        name: "node.id",
        aliases: &[],
        default: None,
        doc: "This node's id. A node whose id is in controller.quorum.voters is a voter; any other node is an observer and must be listed in controller.quorum.observers.",
    },
    KeyDefinition {
        name: "controller.quorum.voters",
        aliases: &["quorum.voters"],
        default: Some(""),
        doc: "The voters as id@host:port, comma separated: the bootstrap voter set, in force until the metadata log holds a voter change (KIP-853, `ringlog add-voter`/`remove-voter`), and what a topic record without a placement means. Every node, voter or observer, lists the same set. Required unless controller.quorum.bootstrap.servers is set.",
    },
    KeyDefinition {
        name: "controller.quorum.bootstrap.servers",
        aliases: &[],
        default: Some(""),
        doc: "KIP-853: quorum listeners to ask who leads, as host:port, comma separated, for a node started without controller.quorum.voters (set exactly one of the two). The node is an observer: it fetches from a bootstrap server, follows the leader that server names (at the endpoint the answer gives), and learns the voter set from the metadata log or snapshot; it may then be added with `ringlog add-voter`. Every voter must list it in controller.quorum.observers.",
    },
    KeyDefinition {
        name: "controller.quorum.observers",
        aliases: &[],
        default: Some(""),
        doc: "The observers (non-voting replicas) as node ids, comma separated. A replica Fetch or FetchSnapshot from a node id that is neither a voter nor listed here is refused with INCONSISTENT_VOTER_SET. Every node lists the same set; an observer lists itself.",
    },
    KeyDefinition {
        name: "listeners",
        aliases: &[],
        default: None,
        doc: "Where this node listens for Kafka protocol requests, as NAME://ip:port entries, comma separated (an entry without NAME:// is named PLAINTEXT). One listener serves peers and clients alike; with controller.listener.names, exactly one more listener (the client listener) is allowed.",
    },
    KeyDefinition {
        name: "controller.listener.names",
        aliases: &[],
        default: Some(""),
        doc: "The name of the listener that serves the quorum (Vote, BeginQuorumEpoch, EndQuorumEpoch, replica Fetch and FetchSnapshot, AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter); on the client listener those requests close the connection, as Kafka does for an API a listener does not expose. controller.quorum.voters then names controller listeners. Empty: the one listener serves everything.",
    },
    KeyDefinition {
        name: "listener.security.protocol.map",
        aliases: &[],
        default: Some(crate::config::listeners::DEFAULT_SECURITY_PROTOCOL_MAP),
        doc: "Each listener name's security protocol, NAME:PROTOCOL comma separated: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (SASL only on the client listener beside a separate controller listener). When the key is not set, the controller listener's name maps to PLAINTEXT as in Kafka.",
    },
    KeyDefinition {
        name: "sasl.enabled.mechanisms",
        aliases: &[],
        default: Some("GSSAPI"),
        doc: "The SASL mechanisms a SASL_PLAINTEXT or SASL_SSL listener accepts, comma separated: SCRAM-SHA-256 and SCRAM-SHA-512 (Kafka's default GSSAPI, and PLAIN and OAUTHBEARER, are refused when a listener uses SASL).",
    },
    KeyDefinition {
        name: "advertised.listeners",
        aliases: &[],
        default: Some(""),
        doc: "host:port clients are told to connect to (Metadata), or NAME://host:port entries of which the client listener's is used; empty means the client listener itself. With one listener for everything it is also the endpoint a voter has the leader record in the metadata quorum's voter set when it differs (KIP-853 UpdateRaftVoter at start).",
    },
    KeyDefinition {
        name: "voter.advertised.listeners",
        aliases: &[],
        default: Some(""),
        doc: "The other voters' client listeners as id@host:port, comma separated, for Metadata (observers that may be added as voters can be listed too) (Kafka learns them from broker registrations, which this node does not have). Required for every other voter when controller.listener.names separates the controller listener; without it Metadata names each voter at its controller.quorum.voters address.",
    },
    KeyDefinition {
        name: "ssl.keystore.type",
        aliases: &[],
        default: Some("PEM"),
        doc: "The keystore's format: PEM only (Kafka's default, JKS, and PKCS12 are refused).",
    },
    KeyDefinition {
        name: "ssl.keystore.location",
        aliases: &[],
        default: Some(""),
        doc: "A PEM file with this node's private key (unencrypted PKCS#8, PKCS#1 or SEC1) and its certificate chain, for SSL listeners and as the client certificate towards peers.",
    },
    KeyDefinition {
        name: "ssl.keystore.certificate.chain",
        aliases: &[],
        default: Some(""),
        doc: "This node's certificate chain as PEM text (with ssl.keystore.key, instead of ssl.keystore.location).",
    },
    KeyDefinition {
        name: "ssl.keystore.key",
        aliases: &[],
        default: Some(""),
        doc: "This node's private key as PEM text (unencrypted), with ssl.keystore.certificate.chain.",
    },
    KeyDefinition {
        name: "ssl.key.password",
        aliases: &[],
        default: Some(""),
        doc: "The password of an encrypted private key: not supported, refused when set (give an unencrypted key readable only by the node).",
    },
    KeyDefinition {
        name: "ssl.truststore.type",
        aliases: &[],
        default: Some("PEM"),
        doc: "The truststore's format: PEM only.",
    },
    KeyDefinition {
        name: "ssl.truststore.location",
        aliases: &[],
        default: Some(""),
        doc: "A PEM file of CA certificates: peers' certificates (and clients', with ssl.client.auth) must chain to one of them. Required when the controller listener is SSL.",
    },
    KeyDefinition {
        name: "ssl.truststore.certificates",
        aliases: &[],
        default: Some(""),
        doc: "The CA certificates as PEM text, instead of ssl.truststore.location.",
    },
    KeyDefinition {
        name: "ssl.client.auth",
        aliases: &[],
        default: Some("none"),
        doc: "Whether SSL listeners ask for client certificates: none, requested (checked if given) or required.",
    },
    KeyDefinition {
        name: "ssl.endpoint.identification.algorithm",
        aliases: &[],
        default: Some("https"),
        doc: "https: a peer's certificate must name the host of its controller.quorum.voters entry; empty: only its chain to the truststore is checked.",
    },
    KeyDefinition {
        name: "metadata.log.dir",
        aliases: &["log.dirs", "log.dir"],
        default: None,
        doc: "The data folder: meta.properties, one folder per partition with its segments, snapshots and quorum-state.",
    },
    KeyDefinition {
        name: "controller.quorum.election.timeout.ms",
        aliases: &["quorum.election.timeout.ms"],
        default: Some("1000"),
        doc: "How long a voter waits without a leader before it becomes a candidate, and how long a candidate waits for votes.",
    },
    KeyDefinition {
        name: "controller.quorum.election.backoff.max.ms",
        aliases: &["quorum.election.backoff.max.ms"],
        default: Some("1000"),
        doc: "Upper bound of the randomized backoff before a failed candidate starts the next election.",
    },
    KeyDefinition {
        name: "controller.quorum.retry.backoff.ms",
        aliases: &["quorum.retry.backoff.ms"],
        default: Some("20"),
        doc: "How soon a voter that answered a Vote or pre-vote with an error (it does not host the partition yet, say) is asked again; an unanswered request waits controller.quorum.request.timeout.ms.",
    },
    KeyDefinition {
        name: "controller.quorum.fetch.timeout.ms",
        aliases: &["quorum.fetch.timeout.ms"],
        default: Some("2000"),
        doc: "A follower that has not heard from its leader for this long starts an election; a leader not fetched from by a majority for this long resigns (check quorum).",
    },
    KeyDefinition {
        name: "controller.quorum.request.timeout.ms",
        aliases: &["quorum.request.timeout.ms"],
        default: Some("2000"),
        doc: "How long a peer request (Vote, BeginQuorumEpoch, Fetch, FetchSnapshot) may stay unanswered before it is retried.",
    },
    KeyDefinition {
        name: "controller.quorum.fetch.max.wait.ms",
        aliases: &[],
        default: Some("500"),
        doc: "How long the leader holds an empty Fetch (long poll) before answering it with no records.",
    },
    KeyDefinition {
        name: "metadata.log.segment.bytes",
        aliases: &["log.segment.bytes"],
        default: Some("1073741824"),
        doc: "A segment rolls once it holds this many bytes (every partition's, unless its topic sets segment.bytes); a new segment reserves this much disk when it is created.",
    },
    KeyDefinition {
        name: "metadata.log.max.record.bytes.between.snapshots",
        aliases: &["metadata.snapshot.min.records.size"],
        default: Some("20971520"),
        doc: "Bytes of committed records since the last snapshot before a new one may be taken (with controller.snapshot.minimum.records).",
    },
    KeyDefinition {
        name: "controller.snapshot.minimum.records",
        aliases: &[],
        default: Some("16384"),
        doc: "Committed records since the last snapshot before a new one may be taken.",
    },
    KeyDefinition {
        name: "metadata.snapshot.min.cleanable.ratio",
        aliases: &[],
        default: Some("0.5"),
        doc: "Share of keys changed since the last snapshot above which a snapshot is taken regardless of the byte threshold.",
    },
    KeyDefinition {
        name: "metadata.log.max.snapshot.interval.ms",
        aliases: &[],
        default: Some("3600000"),
        doc: "A snapshot is taken at least this often while there are new committed records (0 disables).",
    },
    KeyDefinition {
        name: "replica.fetch.snapshot.max.bytes",
        aliases: &[],
        default: Some("10485760"),
        doc: "The most snapshot bytes one partition may receive in one FetchSnapshot response.",
    },
    KeyDefinition {
        name: "replica.fetch.snapshot.response.max.bytes",
        aliases: &["replica.fetch.response.max.bytes"],
        default: Some("10485760"),
        doc: "The most snapshot bytes one FetchSnapshot response carries in all, shared fairly between its partitions.",
    },
    KeyDefinition {
        name: "max.replication.lag.ms",
        aliases: &["metadata.start.offset.lag.time.max.ms"],
        default: Some("604800000"),
        doc: "The leader advances the log begin offset past a replica that has not fetched it after this long.",
    },
    KeyDefinition {
        name: "socket.request.max.bytes",
        aliases: &[],
        default: Some("104857600"),
        doc: "The largest request frame accepted; a larger size prefix closes the connection before the body is read.",
    },
    KeyDefinition {
        name: "queued.max.request.bytes",
        aliases: &[],
        default: Some("104857600"),
        doc: "Request bytes being read across all connections (beyond each connection's 64 KiB read buffer, held until the request is answered) before connections whose frames do not fit stop being read until bytes are released. At least socket.request.max.bytes; -1 is unbounded (Kafka's default).",
    },
    KeyDefinition {
        name: "max.connections",
        aliases: &[],
        default: Some("4096"),
        doc: "Connections open at once; a connection over the limit is closed when it is accepted.",
    },
    KeyDefinition {
        name: "max.connections.per.ip",
        aliases: &[],
        default: Some("1024"),
        doc: "Connections open at once from one IP address; a connection over the limit is closed when it is accepted.",
    },
    KeyDefinition {
        name: "connections.max.idle.ms",
        aliases: &[],
        default: Some("600000"),
        doc: "A client connection that read no request and wrote no answer for this long, with nothing owed, is closed (Kafka's idle connection reaper); -1 keeps idle connections.",
    },
    KeyDefinition {
        name: "message.max.bytes",
        aliases: &[],
        default: Some("1048588"),
        doc: "The largest record batch a Produce request may carry (MESSAGE_TOO_LARGE above it).",
    },
    KeyDefinition {
        name: "idle.poll.us",
        aliases: &[],
        default: Some("400"),
        doc: "Not in Kafka. After a turn of the event loop that handled something, while records flow through the node at under 8 MiB/s, the loop polls for its next event for this many microseconds before it sleeps, so an answer that comes back within that time does not wait for a halted CPU to wake; 0 never polls. A node with no records flowing (idle, or electing) or a heavily loaded one does not poll.",
    },
    KeyDefinition {
        name: "metrics.listener",
        aliases: &[],
        default: Some(""),
        doc: "host:port of the Prometheus text endpoint; empty disables it.",
    },
    KeyDefinition {
        name: "auto.create.topics.enable",
        aliases: &[],
        default: Some("true"),
        doc: "Create a topic when a client's Metadata request names it and allows auto-creation (Kafka's producers do; a Produce to an unknown topic does not create it).",
    },
    KeyDefinition {
        name: "authorizer.class.name",
        aliases: &[],
        default: Some(""),
        doc: "The authorizer of client requests: empty (no authorizer: every request allowed, the ACL APIs answer SECURITY_DISABLED), or org.apache.kafka.metadata.authorizer.StandardAuthorizer (kafka.security.authorizer.AclAuthorizer is taken as the same): ACLs stored in the metadata log decide (docs/clients.md, \"ACLs and the authorizer\").",
    },
    KeyDefinition {
        name: "allow.everyone.if.no.acl.found",
        aliases: &[],
        default: Some("false"),
        doc: "With an authorizer: allow an operation on a resource that no ACL names at all (LITERAL, PREFIXED or the * wildcard of its type).",
    },
    KeyDefinition {
        name: "super.users",
        aliases: &[],
        default: Some(""),
        doc: "With an authorizer: principals allowed everything whatever the ACLs say, as Type:name separated by ';' (User:admin;User:CN=node1,O=example).",
    },
    KeyDefinition {
        name: "num.partitions",
        aliases: &[],
        default: Some("1"),
        doc: "Partitions of an automatically created topic.",
    },
    KeyDefinition {
        name: "default.replication.factor",
        aliases: &[],
        default: Some(""),
        doc: "Replicas of each partition of a topic created with replication factor -1 (CreateTopics' default, and automatically created topics); empty means the smaller of 3 and the number of voters in force when the topic is created (KIP-853: it grows with add-voter). From 1 to the number of configured voters.",
    },
    KeyDefinition {
        name: "offsets.topic.num.partitions",
        aliases: &[],
        default: Some("50"),
        doc: "Partitions of __consumer_offsets, created by the controller when a client first looks for a group coordinator; the leader of a group's partition is its coordinator. Read when the topic is created; its record keeps the count.",
    },
    KeyDefinition {
        name: "offsets.topic.segment.bytes",
        aliases: &[],
        default: Some("104857600"),
        doc: "segment.bytes of __consumer_offsets when it is created (its log is trimmed behind snapshots; a segment reserves disk 16 MiB ahead of its data, not its whole size).",
    },
    KeyDefinition {
        name: "offsets.commit.timeout.ms",
        aliases: &[],
        default: Some("5000"),
        doc: "An OffsetCommit (or DeleteGroups, OffsetDelete) whose records are not committed by then is answered REQUEST_TIMED_OUT.",
    },
    KeyDefinition {
        name: "offset.metadata.max.bytes",
        aliases: &[],
        default: Some("4096"),
        doc: "The longest metadata string an OffsetCommit may store with an offset (OFFSET_METADATA_TOO_LARGE above it).",
    },
    KeyDefinition {
        name: "controller.socket.timeout.ms",
        aliases: &[],
        default: Some("30000"),
        doc: "How long a client's admin request this node forwarded to the controller (topic configs, CreatePartitions) may wait for the controller's answer; then the client's connection is closed, as when no controller is known, and the client retries (Kafka's broker-to-controller channel uses the same key).",
    },
    KeyDefinition {
        name: "producer.id.expiration.ms",
        aliases: &[],
        default: Some("86400000"),
        doc: "An idempotent producer whose newest batch in a partition is older than this (by the batch's MaxTimestamp) is forgotten there: its state is dropped, from memory and from the next snapshot of the partition, and its next batch is taken at any sequence (Kafka's rule for an unknown producer). Checked every second.",
    },
    KeyDefinition {
        name: "offsets.retention.minutes",
        aliases: &[],
        default: Some("10080"),
        doc: "Committed offsets of a group without members expire this long after the group became empty (KIP-211; by their commit time for a group that never had members, or after a coordinator failover): the coordinator appends tombstones for them.",
    },
    KeyDefinition {
        name: "offsets.retention.check.interval.ms",
        aliases: &[],
        default: Some("600000"),
        doc: "How often a coordinator looks for expired offsets in the __consumer_offsets partitions it leads.",
    },
    KeyDefinition {
        name: "group.initial.rebalance.delay.ms",
        aliases: &[],
        default: Some("3000"),
        doc: "How long the first rebalance of an empty group waits for more members (again while new ones arrive, up to the rebalance timeout).",
    },
    KeyDefinition {
        name: "group.min.session.timeout.ms",
        aliases: &[],
        default: Some("6000"),
        doc: "The shortest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT below it).",
    },
    KeyDefinition {
        name: "group.max.session.timeout.ms",
        aliases: &[],
        default: Some("1800000"),
        doc: "The longest session timeout a group member may ask for (INVALID_SESSION_TIMEOUT above it).",
    },
];
