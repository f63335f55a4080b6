//! `ringlog`: the command line. A thin shell: every subcommand parses its arguments and calls
//! into `ringlog-net` (node, clients) or `ringlog-engine` (files); the only logic of its own is
//! `dev`'s process supervision and the output tables.

/// `println!` that never panics, for what `dev` says (and `format`, which it runs): `dev` keeps
/// supervising its nodes when its output cannot be written (stdout redirected to a full disk, a
/// closed pipe). `println!` panics then ("failed printing to stdout"), and until 2026-12-07 took
/// the whole quorum down with `dev` (tests/cli.rs).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// [`say!`] to stderr.
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod dev;
mod dump;
mod perf;
mod produce;
mod quorum_commands;
mod scram_user;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ringlog_net::client::Client;
use ringlog_net::clients::TopicPartition;
use ringlog_net::clients::consumer::{Consumer, ConsumerConfig, ConsumerError};
use ringlog_net::clients::group::{CommittedOffset, GroupConsumer, GroupConsumerConfig};
use ringlog_net::clients::producer::ProducerConfig;
use ringlog_net::config::NodeConfig;
use ringlog_net::meta_properties::{self, MetaProperties};
use ringlog_net::node::unclean;
use ringlog_net::protocol::ErrorCode;

use quorum_commands::{add_voter, describe_quorum, remove_voter};

#[derive(Parser)]
#[command(
    name = "ringlog",
    version,
    about = "A KRaft-style replicated, snapshotted log on io_uring"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Stamp a node's data folder with meta.properties (like kafka-storage format).
    Format {
        /// The node's properties file (node.id and metadata.log.dir are taken from it).
        #[arg(long)]
        config: PathBuf,
        /// The cluster id (22 characters of base64url); a new random one when omitted.
        #[arg(long)]
        cluster_id: Option<String>,
        /// The first voter of a new quorum of one, grown later with `add-voter` (like
        /// `kafka-storage format --standalone`): the configuration's `controller.quorum.voters`
        /// must name this node alone, else the format is refused.
        #[arg(long)]
        standalone: bool,
    },
    /// Print a new random cluster id (like kafka-storage random-uuid).
    RandomUuid,
    /// Run one node (voter or observer) until SIGTERM or Ctrl-C.
    Serve {
        #[arg(long)]
        config: PathBuf,
    },
    /// Run a local three-voter quorum plus one observer on 127.0.0.1 (child processes), and
    /// `--spares` more observers to grow the quorum with (`add-voter`); a node that exits is
    /// restarted after 1 s. Ctrl-C (or SIGTERM) stops them all.
    Dev {
        /// Where each node's folder, properties, log (node-N.log) and pid file (node-N.pid) go.
        #[arg(long, default_value = "ringlog-data")]
        data_dir: PathBuf,
        /// Port of node 1; nodes 2, 3 (voters), 4 (observer) and the spares take the next ones.
        #[arg(long, default_value_t = 9093)]
        base_port: u16,
        /// Spare nodes 5, 6, …: observers like node 4, to be added as voters with `ringlog
        /// add-voter` (KIP-853) and removed again with `ringlog remove-voter`. With 2 the
        /// metadata quorum can grow to five voters.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=16))]
        spares: u16,
        /// Leave a node that exits down instead of restarting it.
        #[arg(long)]
        no_restart: bool,
        /// `metadata.log.segment.bytes` of every node (a segment's space is reserved when it
        /// is created: four nodes take four times this at the start).
        #[arg(long, default_value_t = 1 << 30)]
        segment_bytes: u64,
    },
    /// Show a partition's quorum state (like kafka-metadata-quorum describe --status
    /// --replication); every partition is its own quorum over the same voters.
    DescribeQuorum {
        #[arg(long)]
        bootstrap: String,
        #[arg(long, default_value = "__cluster_metadata")]
        topic: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
    },
    /// Add a voter to the metadata quorum (KIP-853 AddRaftVoter, like kafka-metadata-quorum
    /// add-controller). The node must be running as an observer and caught up; the command
    /// returns once the new voter set is committed.
    AddVoter {
        /// Any node of the quorum; the request goes to the leader it names.
        #[arg(long, alias = "bootstrap")]
        bootstrap_server: String,
        #[arg(long)]
        node_id: i32,
        /// The new voter's listener (host:port), recorded in the voter set.
        #[arg(long)]
        endpoint: String,
        /// The new voter's directory id (22 characters of base64url); zero when omitted.
        #[arg(long)]
        directory_id: Option<String>,
        /// How long the leader may take to commit the change.
        #[arg(long, default_value_t = 30_000)]
        timeout_ms: i32,
    },
    /// Remove a voter from the metadata quorum (KIP-853 RemoveRaftVoter, like
    /// kafka-metadata-quorum remove-controller); the leader itself may be removed (it resigns
    /// once the change is committed).
    RemoveVoter {
        #[arg(long, alias = "bootstrap")]
        bootstrap_server: String,
        #[arg(long)]
        node_id: i32,
        /// The voter's directory id; any when omitted.
        #[arg(long)]
        directory_id: Option<String>,
    },
    /// Set or delete a user's SASL/SCRAM credential (like kafka-configs --alter --entity-type
    /// users --add-config 'SCRAM-SHA-256=[password=…]'). Point --bootstrap at a listener
    /// without SASL (a node's controller listener) to create a cluster's first user.
    ScramUser {
        #[arg(long)]
        bootstrap: String,
        #[arg(long)]
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-256")]
        mechanism: String,
        /// The new password (never sent: the request carries the salted password).
        #[arg(long, required_unless_present = "delete", conflicts_with = "delete")]
        password: Option<String>,
        /// 4096 to 16384, as Kafka's controller takes.
        #[arg(long, default_value_t = 8192)]
        iterations: i32,
        /// Delete the user's credential for --mechanism instead.
        #[arg(long)]
        delete: bool,
    },
    /// Print a segment or snapshot file batch by batch (like kafka-dump-log).
    Dump {
        file: PathBuf,
        /// Also print each record's key and value.
        #[arg(long)]
        print_records: bool,
    },
    /// Append each line of stdin as one record (acks=all by default), batched with linger, to
    /// a topic created if missing (when the cluster allows auto.create.topics.enable).
    Produce {
        #[arg(long)]
        bootstrap: String,
        #[arg(long, default_value = produce::DEFAULT_TOPIC)]
        topic: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
        /// 0, 1 or all.
        #[arg(long, default_value = "all")]
        acks: String,
        /// How long a batch waits for more records (linger.ms).
        #[arg(long, default_value_t = 5)]
        linger_ms: u64,
        /// A batch is sent once it holds this many bytes (batch.size).
        #[arg(long, default_value_t = 16384)]
        batch_size: usize,
        /// Retries of a batch (NOT_LEADER_OR_FOLLOWER: to the new leader).
        #[arg(long, default_value_t = 10)]
        retries: u32,
    },
    /// Print committed records (values, one per line) with the KIP-320 consumer (any topic,
    /// `__cluster_metadata` included).
    Consume {
        #[arg(long)]
        bootstrap: String,
        #[arg(long, default_value = produce::DEFAULT_TOPIC)]
        topic: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
        /// Start at offset 0 instead of the high-watermark (same as --offset earliest).
        #[arg(long)]
        from_beginning: bool,
        /// Start offset: a number, `earliest` or `latest` (default latest).
        #[arg(long)]
        offset: Option<String>,
        /// auto.offset.reset: earliest, latest or none (none: a detected log truncation or
        /// an out-of-range offset stops the command with an error). Default: none, or latest
        /// with --group (Kafka's default for a group without a committed offset).
        #[arg(long)]
        reset: Option<String>,
        /// Consume as a member of this consumer group (the classic protocol): the topic's
        /// partitions are shared with the group's other members, each starts at the group's
        /// committed offset (validated with its leader epoch, KIP-320), and the offset after
        /// each printed record is committed with that record's leader epoch.
        #[arg(long, conflicts_with_all = ["from_beginning", "offset"])]
        group: Option<String>,
        /// Stop after this many records.
        #[arg(long)]
        max_records: Option<u64>,
        /// Also print each record's offset and leader epoch.
        #[arg(long)]
        print_offsets: bool,
        /// Print the partition's full key-value state (`cleanup.policy=snapshot`: the latest
        /// snapshot through FetchSnapshot, then the log after it) as `key<TAB>value` lines in
        /// key order, then the snapshot and position on stderr, and exit.
        #[arg(long, conflicts_with_all = ["from_beginning", "offset", "max_records", "print_offsets"])]
        full_state: bool,
    },
    /// UNSAFE, opt-in: make this (stopped) node the leader of a partition whose quorum lost a
    /// majority for good, around a new voter set. Records other voters had are lost.
    UncleanRecover {
        /// The surviving node's properties file (its controller.quorum.voters is rewritten).
        #[arg(long)]
        config: PathBuf,
        #[arg(long, default_value = "__cluster_metadata")]
        topic: String,
        #[arg(long, default_value_t = 0)]
        partition: i32,
        /// The new voters as id@host:port, comma separated; must include this node.
        #[arg(long)]
        voters: String,
        /// A leader epoch at least this large (when lost voters reached epochs this one missed).
        #[arg(long)]
        leader_epoch: Option<i32>,
        /// Required: says you accept losing acknowledged records.
        #[arg(long)]
        i_accept_data_loss: bool,
    },
    /// Load generators (append, fetch) and their sendfile baseline.
    #[command(subcommand)]
    Perf(perf::PerfCommand),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Logging is best effort. With internal errors on, a log line that cannot be written
        // (stderr on a full disk: `ringlog dev` keeps each node's log in its data folder) is
        // reported with `eprintln!`, which panics when stderr cannot be written either: every
        // node of a quorum whose disk filled exited with 101, and `dev` restarted each into
        // the same panic (tests/disk_full.rs).
        .log_internal_errors(false)
        .init();
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve { .. } | Command::Dev { .. }) {
        // A one-shot command whose reader went away (`ringlog dump FILE | head`) ends as any
        // Unix filter does, by SIGPIPE, instead of panicking in `println!` on EPIPE. Rust
        // ignores SIGPIPE for the whole process; its sockets send with MSG_NOSIGNAL, so only
        // stdout and stderr see the default again. A node and `dev` keep ignoring it.
        // SAFETY: no other thread runs yet; SIG_DFL is a valid disposition for SIGPIPE.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            say_err!("ringlog: {message}");
            ExitCode::FAILURE
        }
    }
}

const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Format {
            config,
            cluster_id,
            standalone,
        } => {
            let config = NodeConfig::load(&config).map_err(|error| error.to_string())?;
            if standalone {
                check_standalone(&config)?;
            }
            let cluster_id = match cluster_id {
                Some(id) => id,
                None => meta_properties::random_cluster_id().map_err(|error| error.to_string())?,
            };
            format(&config, &cluster_id)
        }
        Command::RandomUuid => {
            println!(
                "{}",
                meta_properties::random_cluster_id().map_err(|error| error.to_string())?
            );
            Ok(())
        }
        Command::Serve { config } => {
            let config = NodeConfig::load(&config).map_err(|error| error.to_string())?;
            ringlog_net::node::run(config).map_err(|error| error.to_string())
        }
        Command::Dev {
            data_dir,
            base_port,
            no_restart,
            segment_bytes,
            spares,
        } => dev::dev(&data_dir, base_port, !no_restart, segment_bytes, spares),
        Command::DescribeQuorum {
            bootstrap,
            topic,
            partition,
        } => describe_quorum(&bootstrap, &topic, partition),
        Command::AddVoter {
            bootstrap_server,
            node_id,
            endpoint,
            directory_id,
            timeout_ms,
        } => add_voter(
            &bootstrap_server,
            node_id,
            &endpoint,
            directory_id.as_deref(),
            timeout_ms,
        ),
        Command::RemoveVoter {
            bootstrap_server,
            node_id,
            directory_id,
        } => remove_voter(&bootstrap_server, node_id, directory_id.as_deref()),
        Command::ScramUser {
            bootstrap,
            user,
            mechanism,
            password,
            iterations,
            delete: _,
        } => scram_user::scram_user(scram_user::ScramUser {
            bootstrap: &bootstrap,
            user: &user,
            mechanism: &mechanism,
            password: password.as_deref(),
            iterations,
        })
        .map(|done| println!("{done}")),
        Command::Dump {
            file,
            print_records,
        } => dump::dump(&file, print_records),
        Command::Produce {
            bootstrap,
            topic,
            partition,
            acks,
            linger_ms,
            batch_size,
            retries,
        } => {
            let acks: i16 = match acks.as_str() {
                "all" | "-1" => -1,
                "1" => 1,
                "0" => 0,
                other => return Err(format!("--acks {other:?}: expected 0, 1 or all")),
            };
            let config = ProducerConfig {
                acks,
                linger_ms,
                batch_size_bytes: batch_size,
                retries,
                ..ProducerConfig::default()
            };
            produce::produce(&bootstrap, TopicPartition::new(topic, partition), config)
        }
        Command::Perf(command) => perf::run(command),
        Command::Consume {
            bootstrap,
            topic,
            partition,
            from_beginning,
            offset,
            reset,
            group,
            max_records,
            print_offsets,
            full_state,
        } => {
            if full_state {
                return print_full_state(&bootstrap, TopicPartition::new(topic, partition));
            }
            if let Some(group) = group {
                let config = ConsumerConfig {
                    auto_offset_reset: reset.as_deref().unwrap_or("latest").parse()?,
                    ..ConsumerConfig::default()
                };
                return consume_in_group(
                    &bootstrap,
                    &group,
                    topic,
                    config,
                    max_records,
                    print_offsets,
                );
            }
            let start = match (from_beginning, offset.as_deref()) {
                (true, _) | (false, Some("earliest")) => -2,
                (false, None | Some("latest")) => -1,
                (false, Some(number)) => number
                    .parse::<i64>()
                    .ok()
                    .filter(|o| *o >= 0)
                    .ok_or_else(|| format!("--offset {number:?}: a number, earliest or latest"))?,
            };
            let config = ConsumerConfig {
                auto_offset_reset: reset.as_deref().unwrap_or("none").parse()?,
                ..ConsumerConfig::default()
            };
            consume(
                &bootstrap,
                TopicPartition::new(topic, partition),
                start,
                config,
                max_records,
                print_offsets,
            )
        }
        Command::UncleanRecover {
            config,
            topic,
            partition,
            voters,
            leader_epoch,
            i_accept_data_loss,
        } => unclean_recover(
            &config,
            &topic,
            partition,
            &voters,
            leader_epoch,
            i_accept_data_loss,
        ),
    }
}

/// `format --standalone` (KIP-853's `kafka-storage format --standalone`): the node bootstraps a
/// quorum of one. Its bootstrap voter set is `controller.quorum.voters`, so that must be this
/// node alone: a standalone voter whose configuration named others would count them in its
/// majorities (and they, formatted as voters of that set, could elect a leader without it).
/// The nodes that join later are observers (in `controller.quorum.observers`, with the same
/// `controller.quorum.voters`) until `ringlog add-voter` adds them (docs/node.md).
fn check_standalone(config: &NodeConfig) -> Result<(), String> {
    match config.quorum_voters.as_slice() {
        [only] if only.node_id == config.node_id => Ok(()),
        voters => Err(format!(
            "--standalone: controller.quorum.voters must name node {} alone (a quorum of one, \
             grown with add-voter), not {}",
            config.node_id,
            voters
                .iter()
                .map(|v| format!("{}@{}:{}", v.node_id, v.host, v.port))
                .collect::<Vec<_>>()
                .join(",")
        )),
    }
}

pub(crate) fn format(config: &NodeConfig, cluster_id: &str) -> Result<(), String> {
    let meta = MetaProperties {
        cluster_id: cluster_id.to_string(),
        node_id: config.node_id,
        directory_id: Some(
            meta_properties::random_directory_id().map_err(|error| error.to_string())?,
        ),
    };
    MetaProperties::format(&config.metadata_log_dir, &meta).map_err(|error| error.to_string())?;
    say!(
        "Formatted {} for node {} in cluster {} (directory id {})",
        config.metadata_log_dir.display(),
        meta.node_id,
        meta.cluster_id,
        meta.directory_id
            .as_ref()
            .map(meta_properties::uuid_text)
            .unwrap_or_default()
    );
    Ok(())
}

// ---- dump -----------------------------------------------------------------------------------

fn consume(
    bootstrap: &str,
    partition: TopicPartition,
    start: i64,
    config: ConsumerConfig,
    max_records: Option<u64>,
    print_offsets: bool,
) -> Result<(), String> {
    let mut consumer = Consumer::connect(bootstrap, config);
    consumer.assign([partition.clone()]);
    consumer
        .seek(&partition, start)
        .map_err(|e| e.to_string())?;
    let mut printed = 0u64;
    let mut stdout = std::io::stdout();
    loop {
        for record in consumer
            .poll(Duration::from_secs(1))
            .map_err(|e| e.to_string())?
        {
            let value = record.value.as_deref().unwrap_or_default();
            let value = String::from_utf8_lossy(value);
            let line = if print_offsets {
                format!("{}\t{}\t{value}", record.offset, record.leader_epoch)
            } else {
                value.into_owned()
            };
            writeln!(stdout, "{line}").map_err(|e| e.to_string())?;
            printed += 1;
            if max_records.is_some_and(|max| printed >= max) {
                return Ok(());
            }
        }
    }
}

/// `consume --group`: a group member of `topic`. Each poll's printed records are committed
/// (the offset after the last one of each partition, with its leader epoch) before more are
/// printed, so a member that stops after `max_records` leaves the group with exactly what it
/// printed committed and the next member of the group resumes there.
fn consume_in_group(
    bootstrap: &str,
    group: &str,
    topic: String,
    config: ConsumerConfig,
    max_records: Option<u64>,
    print_offsets: bool,
) -> Result<(), String> {
    let group_config = GroupConsumerConfig {
        // Only what was printed is committed, never a position past it.
        enable_auto_commit: false,
        ..GroupConsumerConfig::new(group)
    };
    let mut consumer = GroupConsumer::connect(bootstrap, config, group_config);
    consumer.subscribe([topic]);
    let mut printed = 0u64;
    let mut stdout = std::io::stdout();
    loop {
        let records = consumer
            .poll(Duration::from_secs(1))
            .map_err(|e| e.to_string())?;
        let mut last: std::collections::BTreeMap<TopicPartition, CommittedOffset> =
            std::collections::BTreeMap::new();
        let mut done = false;
        for record in records {
            let value = record.value.as_deref().unwrap_or_default();
            let value = String::from_utf8_lossy(value);
            let line = if print_offsets {
                format!(
                    "{}\t{}\t{}\t{value}",
                    record.partition.partition, record.offset, record.leader_epoch
                )
            } else {
                value.into_owned()
            };
            writeln!(stdout, "{line}").map_err(|e| e.to_string())?;
            last.insert(
                record.partition.clone(),
                CommittedOffset {
                    offset: record.offset + 1,
                    leader_epoch: record.leader_epoch,
                },
            );
            printed += 1;
            if max_records.is_some_and(|max| printed >= max) {
                done = true;
                break;
            }
        }
        stdout.flush().map_err(|e| e.to_string())?;
        let last: Vec<_> = last.into_iter().collect();
        match consumer.commit_offsets(&last) {
            Ok(()) => {}
            // The group rebalanced under this poll: these partitions may be another member's
            // now, which starts at the last commit and prints them again (at least once).
            Err(ConsumerError::Group { error, .. })
                if matches!(
                    error,
                    ErrorCode::RebalanceInProgress
                        | ErrorCode::IllegalGeneration
                        | ErrorCode::UnknownMemberId
                ) =>
            {
                eprintln!("commit refused ({error}): the group rebalanced; rejoining");
            }
            Err(error) => return Err(error.to_string()),
        }
        if done {
            return consumer.close().map_err(|e| e.to_string());
        }
    }
}

fn print_full_state(bootstrap: &str, partition: TopicPartition) -> Result<(), String> {
    let mut consumer = Consumer::connect(bootstrap, ConsumerConfig::default());
    let state = consumer
        .read_full_state(&partition, Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    let mut stdout = std::io::stdout().lock();
    for (key, value) in &state.entries {
        writeln!(
            stdout,
            "{}\t{}",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(value)
        )
        .map_err(|e| e.to_string())?;
    }
    let snapshot = state.snapshot_id.map_or("none".to_string(), |id| {
        format!("end offset {} epoch {}", id.end_offset, id.epoch)
    });
    eprintln!(
        "{partition}: {} keys; snapshot {snapshot}; position {}",
        state.entries.len(),
        state.position.offset
    );
    Ok(())
}

fn unclean_recover(
    config: &Path,
    topic: &str,
    partition: i32,
    voters: &str,
    leader_epoch: Option<i32>,
    accepted: bool,
) -> Result<(), String> {
    if !accepted {
        return Err(
            "unclean-recover can lose acknowledged records: pass --i-accept-data-loss to \
             proceed (docs/kip320.md, \"Unclean recovery\")"
                .into(),
        );
    }
    let voters = ringlog_net::config::parse_voters(voters).map_err(|e| format!("--voters: {e}"))?;
    let done = unclean::unclean_recover(config, topic, partition, &voters, leader_epoch)
        .map_err(|e| e.to_string())?;
    eprintln!(
        "WARNING: unclean recovery of {topic}-{partition}: records at or after offset {} that \
         other voters had are LOST",
        done.log_end_offset
    );
    println!("partition_dir={}", done.partition_dir.display());
    println!("log_end_offset={}", done.log_end_offset);
    println!("last_log_epoch={}", done.last_log_epoch);
    println!("previous_epoch={}", done.previous_epoch);
    println!("new_epoch={}", done.new_epoch);
    println!("voters={}", unclean::format_voters(&done.voters));
    println!("config_backup={}", done.config_backup.display());
    Ok(())
}
