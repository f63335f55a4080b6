//! `ringlog perf append`: produce load against a topic's partition leaders.
//!
//! - The topic (`--topic`, default `perf`) is created with CreateTopics if missing
//!   (`--partitions`, the cluster's `default.replication.factor` (-1: at most 3, the voters in
//!   force; so one voter works), `--topic-config` KEY=VALUE pairs such as
//!   `cleanup.policy=snapshot`). An internal topic (`__cluster_metadata`, which `perf append`
//!   wrote before issue 17) is refused: only the nodes write their metadata log.
//! - Metadata names each partition's leader; request `k` of client `c` goes to partition
//!   `load::partition_for(c, k, partitions)`, on the client's connection to that leader.
//! - Up to `--in-flight` produce requests wait on each connection: Kafka answers a connection's
//!   requests in order, so one reader thread per connection matches answers to requests by
//!   order (and checks the correlation id).
//! - Closed loop by default (send as soon as the window has room); `--rate R` sends on an
//!   open-loop schedule of R records/s in total and measures latency from each request's due
//!   time (`load::RateSchedule`).
//! - Requests due in the first `--warmup-secs` are sent but not counted; the figures cover the
//!   `--duration-secs` after it. A progress line goes to stderr once a second; `--json` prints
//!   one summary object on stdout instead of the sentence.

mod client;
mod leaders;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_net::client::ClientError;
use ringlog_net::clients::TopicPartition;
use ringlog_net::protocol::ErrorCode;

use super::load::AppendSettings;
use super::{Totals, parse_acks};
use client::{Pipeline, Plan, Shared, Window, run_client};
pub(super) use leaders::leader_address;
use leaders::{ensure_topic, partition_leaders, voter_addresses};

#[derive(Args)]
pub struct AppendArgs {
    /// Any node of the quorum (or several, comma separated).
    #[arg(long)]
    bootstrap: String,
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Value bytes per record.
    #[arg(long, default_value_t = 1024)]
    record_size: usize,
    /// Records per produced batch (one batch per request).
    #[arg(long, default_value_t = 16)]
    batch_records: usize,
    /// 0, 1 or all.
    #[arg(long, default_value = "all")]
    acks: String,
    /// Measured seconds (after the warm-up).
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    /// The topic to write, created if missing (not an internal one: only the nodes write
    /// `__cluster_metadata`).
    #[arg(long, default_value = "perf")]
    topic: String,
    /// Partitions of a topic this command creates (an existing topic keeps its own).
    #[arg(long, default_value_t = 1)]
    partitions: i32,
    /// A config of a topic this command creates, as KEY=VALUE (repeatable), e.g.
    /// cleanup.policy=snapshot.
    #[arg(long = "topic-config", value_name = "KEY=VALUE")]
    topic_configs: Vec<String>,
    /// Produce requests in flight per connection (Kafka answers them in order).
    #[arg(long, default_value_t = 1)]
    in_flight: usize,
    /// Open loop: records/s in total over all clients, latency from each request's due time.
    #[arg(long)]
    rate: Option<f64>,
    /// Seconds of load before the measured window (sent, not counted).
    #[arg(long, default_value_t = 0)]
    warmup_secs: u64,
    /// Print one JSON summary object on stdout instead of the sentence.
    #[arg(long)]
    json: bool,
}

/// Why `perf append` could not run or stopped.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("{0}")]
    Usage(String),
    #[error("{operation}: {source}")]
    Client {
        operation: String,
        source: ClientError,
    },
    #[error("CreateTopics {topic}: {code:?} {message:?}")]
    CreateTopics {
        topic: String,
        code: Option<ErrorCode>,
        message: Option<String>,
    },
    #[error(
        "no leader for {partition} within {waited_secs} s (last errors: {})",
        some_errors(.errors)
    )]
    NoLeader {
        partition: TopicPartition,
        waited_secs: u64,
        errors: Vec<(TopicPartition, ErrorCode)>,
    },
    #[error("no address for node {node_id} (voters: {known:?})")]
    UnknownNode {
        node_id: i32,
        known: Vec<(i32, String)>,
    },
    #[error("connecting to {address}: {source}")]
    Connect {
        address: String,
        source: std::io::Error,
    },
    #[error("a client thread panicked")]
    ClientPanicked,
}

fn client_error(operation: impl Into<String>) -> impl FnOnce(ClientError) -> AppendError {
    let operation = operation.into();
    move |source| AppendError::Client { operation, source }
}

pub fn append(args: AppendArgs) -> Result<(), AppendError> {
    let acks = parse_acks(&args.acks).map_err(AppendError::Usage)?;
    if args.clients == 0 || args.batch_records == 0 || args.in_flight == 0 || args.partitions < 1 {
        return Err(AppendError::Usage(
            "--clients, --batch-records, --in-flight and --partitions must be at least 1".into(),
        ));
    }
    if args.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(AppendError::Usage(
            "--rate must be a positive number".into(),
        ));
    }
    if args.topic.starts_with("__") {
        return Err(AppendError::Usage(format!(
            "--topic {}: an internal topic, written only by the nodes",
            args.topic
        )));
    }
    let configs: Vec<(String, String)> = args
        .topic_configs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .ok_or_else(|| AppendError::Usage(format!("--topic-config {pair:?}: KEY=VALUE")))
        })
        .collect::<Result<_, _>>()?;
    let voters = voter_addresses(&args.bootstrap)?;
    let expected = ensure_topic(&voters, &args.topic, args.partitions, &configs)?;
    let leaders = partition_leaders(&voters, &args.topic, expected)?;
    let partitions = leaders.len() as i32;

    let value = vec![b'x'; args.record_size];
    let mut builder = RecordBatchBuilder::new(0);
    for _ in 0..args.batch_records {
        builder.append(0, None, Some(&value), &[]);
    }
    let batch: Bytes = builder.build().into_bytes();
    let settings = AppendSettings {
        topic: args.topic.clone(),
        partitions,
        clients: args.clients,
        in_flight: args.in_flight,
        rate_records_per_sec: args.rate,
        record_size_bytes: args.record_size,
        batch_records: args.batch_records,
        acks: args.acks.clone(),
        duration_secs: args.duration_secs.max(1),
        warmup_secs: args.warmup_secs,
    };
    if !args.json {
        println!(
            "append: {} clients × {} in flight, {} × {} B records per batch ({} B), acks={}, \
             topic {} ({partitions} partitions), {}, warm-up {} s, {} s",
            args.clients,
            args.in_flight,
            args.batch_records,
            args.record_size,
            batch.len(),
            args.acks,
            args.topic,
            args.rate.map_or("closed loop".to_string(), |r| format!(
                "open loop at {r} records/s"
            )),
            args.warmup_secs,
            settings.duration_secs,
        );
    }

    // Every connection opens before the clock starts.
    let shared = Arc::new(Shared::default());
    let mut clients = Vec::new();
    for client in 0..args.clients {
        let mut connections = HashMap::new();
        for leader in &leaders {
            if let Entry::Vacant(slot) = connections.entry(leader.node_id) {
                slot.insert(Pipeline::connect(
                    &leader.address,
                    args.in_flight,
                    acks,
                    shared.clone(),
                )?);
            }
        }
        clients.push((client, connections));
    }
    let started = Instant::now();
    let window = Window {
        measure_from: started + Duration::from_secs(args.warmup_secs),
        end: started + Duration::from_secs(args.warmup_secs + settings.duration_secs),
    };
    let plan = Arc::new(Plan {
        topic: args.topic.clone(),
        leaders: leaders.iter().map(|l| l.node_id).collect(),
        batch,
        batch_records: args.batch_records as u64,
        acks,
        clients: args.clients,
        rate: args.rate,
        started,
        window,
    });
    let writers: Vec<_> = clients
        .into_iter()
        .map(|(client, connections)| {
            let plan = plan.clone();
            let shared = shared.clone();
            std::thread::spawn(move || run_client(client, connections, &plan, &shared))
        })
        .collect();

    let mut last_records = 0;
    let mut last_tick = Instant::now();
    while !writers.iter().all(|w| w.is_finished()) {
        std::thread::sleep(Duration::from_millis(100));
        if last_tick.elapsed() >= Duration::from_secs(1) {
            let records = shared.acknowledged_records.load(Ordering::Relaxed);
            let phase = if Instant::now() < window.measure_from {
                "warm-up"
            } else if Instant::now() < window.end {
                "measuring"
            } else {
                "draining"
            };
            eprintln!(
                "[{:>4} s] {phase}: {:.0} records/s acknowledged, {} errors, {} requests in flight",
                started.elapsed().as_secs(),
                (records - last_records) as f64 / last_tick.elapsed().as_secs_f64(),
                shared.errors.load(Ordering::Relaxed),
                shared.in_flight.load(Ordering::Relaxed),
            );
            last_records = records;
            last_tick = Instant::now();
        }
    }
    let mut totals = Totals::new();
    let mut unsent = 0;
    for writer in writers {
        let (client_totals, client_unsent) =
            writer.join().map_err(|_| AppendError::ClientPanicked)?;
        totals.merge(client_totals);
        unsent += client_unsent;
    }
    let measured = Duration::from_secs(settings.duration_secs);
    if args.json {
        let settings = serde_json::to_value(&settings).expect("plain settings serialise");
        let summary = totals.summary("append", measured, unsent, settings);
        println!(
            "{}",
            serde_json::to_string(&summary).expect("plain summary serialises")
        );
    } else {
        totals.report("append", measured);
        if unsent > 0 {
            println!("append: {unsent} requests due in the window were never sent (client behind)");
        }
    }
    Ok(())
}

/// The first few of a Metadata answer's partition errors, and how many more there were: a
/// thousand-partition topic without leaders would otherwise print a thousand.
fn some_errors(errors: &[(TopicPartition, ErrorCode)]) -> String {
    const SHOWN: usize = 5;
    let mut text = format!("{:?}", &errors[..errors.len().min(SHOWN)]);
    if errors.len() > SHOWN {
        text.push_str(&format!(" and {} more", errors.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_no_leader_error_names_a_few_partitions_and_counts_the_rest() {
        let errors: Vec<_> = (0..7)
            .map(|p| (TopicPartition::new("t", p), ErrorCode::LeaderNotAvailable))
            .collect();
        let text = AppendError::NoLeader {
            partition: TopicPartition::new("t", 0),
            waited_secs: 30,
            errors,
        }
        .to_string();
        assert!(text.ends_with(" and 2 more)"), "{text}");
        assert_eq!(text.matches("LeaderNotAvailable").count(), 5, "{text}");
    }
}
