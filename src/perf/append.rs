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

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use clap::Args;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_net::client::{Client, ClientError};
use ringlog_net::clients::TopicPartition;
use ringlog_net::clients::transport::{Connections, fetch_metadata};
use ringlog_net::protocol::{
    ApiKey, DecodeError, EncodeError, ErrorCode, Request, RequestHeader, Response,
    create_topics_request, decode_response, encode_request, produce_request, split_frame,
};

use super::load::{self, AppendSettings, RateSchedule};
use super::{CLIENT_TIMEOUT, Totals, parse_acks};

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

/// The voters' (node id, address) from DescribeQuorum at the first bootstrap that answers.
fn voter_addresses(bootstrap: &str) -> Result<Vec<(i32, String)>, AppendError> {
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
fn ensure_topic(
    voters: &[(i32, String)],
    topic: &str,
    partitions: i32,
    configs: &[(String, String)],
) -> Result<Partitions, AppendError> {
    let request = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: topic.into(),
            num_partitions: partitions,
            // The node accepts exactly 3 today (every voter holds every partition).
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
pub(super) fn leader_address(
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
enum Partitions {
    /// Just created: this many.
    Exactly(i32),
    /// An existing topic: as many as Metadata lists (at least one).
    AsListed,
}

struct Leader {
    node_id: i32,
    address: String,
}

/// Each partition's leader by Metadata, waited for (a new topic's partitions elect theirs).
fn partition_leaders(
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

/// What every client thread reads.
struct Plan {
    topic: String,
    /// Leader node id by partition index.
    leaders: Vec<i32>,
    batch: Bytes,
    batch_records: u64,
    acks: i16,
    clients: usize,
    rate: Option<f64>,
    started: Instant,
    window: Window,
}

#[derive(Clone, Copy)]
struct Window {
    /// Requests due before this are warm-up.
    measure_from: Instant,
    /// No request is due at or after this.
    end: Instant,
}

/// Live counters for the progress line.
#[derive(Default)]
struct Shared {
    acknowledged_records: AtomicU64,
    errors: AtomicU64,
    in_flight: AtomicU64,
}

/// One request on its way: what its answer is matched against and counted as.
struct Sent {
    correlation_id: i32,
    /// Latency is measured from here: the due time (open loop) or the send time.
    since: Instant,
    /// Due inside the measured window (not warm-up).
    counted: bool,
    records: u64,
    bytes: u64,
}

/// One connection with up to `limit` requests in flight: this side writes, a reader thread
/// reads the answers in order.
struct Pipeline {
    stream: TcpStream,
    next_correlation_id: i32,
    sent: mpsc::Sender<Sent>,
    slots: Arc<Slots>,
    reader: std::thread::JoinHandle<Totals>,
}

/// The in-flight window: a counter under a mutex, and whether the reader has stopped.
struct Slots {
    state: Mutex<(usize, bool)>,
    freed: Condvar,
    limit: usize,
}

impl Slots {
    /// Waits for room; false once the reader stopped (the connection is broken).
    fn acquire(&self) -> bool {
        let mut state = self.state.lock().expect("slots lock");
        while state.0 >= self.limit && !state.1 {
            state = self.freed.wait(state).expect("slots lock");
        }
        if state.1 {
            return false;
        }
        state.0 += 1;
        true
    }

    fn release(&self) {
        self.state.lock().expect("slots lock").0 -= 1;
        self.freed.notify_one();
    }

    fn close(&self) {
        self.state.lock().expect("slots lock").1 = true;
        self.freed.notify_all();
    }
}

impl Pipeline {
    fn connect(
        address: &str,
        limit: usize,
        acks: i16,
        shared: Arc<Shared>,
    ) -> Result<Pipeline, AppendError> {
        let io = |source| AppendError::Connect {
            address: address.to_string(),
            source,
        };
        let stream = TcpStream::connect(address).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(io)?;
        let read_half = stream.try_clone().map_err(io)?;
        let (sent, queue) = mpsc::channel();
        let slots = Arc::new(Slots {
            state: Mutex::new((0, false)),
            freed: Condvar::new(),
            limit,
        });
        let reader = {
            let slots = slots.clone();
            std::thread::spawn(move || {
                let totals = read_answers(read_half, &queue, &slots, acks, &shared);
                slots.close();
                totals
            })
        };
        Ok(Pipeline {
            stream,
            next_correlation_id: 1,
            sent,
            slots,
            reader,
        })
    }
}

/// Why a connection's reader stopped early.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error("reading: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("answer {got} while waiting for {expected}")]
    OutOfOrder { got: i32, expected: i32 },
    #[error("not a Produce answer")]
    NotProduce,
}

/// The reader side of a [`Pipeline`]: answers come in request order; each one frees a slot.
fn read_answers(
    mut stream: TcpStream,
    queue: &mpsc::Receiver<Sent>,
    slots: &Slots,
    acks: i16,
    shared: &Shared,
) -> Totals {
    let mut totals = Totals::new();
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    // Hands the writer's counters over when the queue closes (the writer is done).
    while let Ok(sent) = queue.recv() {
        let outcome = if acks == 0 {
            Ok(true)
        } else {
            read_one(&mut stream, &mut buffer, &mut chunk, sent.correlation_id)
        };
        let latency = sent.since.elapsed();
        shared.in_flight.fetch_sub(1, Ordering::Relaxed);
        slots.release();
        match outcome {
            Ok(true) => {
                shared
                    .acknowledged_records
                    .fetch_add(sent.records, Ordering::Relaxed);
                if sent.counted {
                    totals.record_latency(latency);
                    totals.records += sent.records;
                    totals.bytes += sent.bytes;
                }
            }
            Ok(false) => {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                totals.errors += u64::from(sent.counted);
            }
            Err(error) => {
                eprintln!("append: connection stopped: {error}");
                shared.errors.fetch_add(1, Ordering::Relaxed);
                totals.errors += 1;
                break;
            }
        }
    }
    totals
}

/// Reads the answer to `correlation_id`: true when every partition accepted the batch.
fn read_one(
    stream: &mut TcpStream,
    buffer: &mut BytesMut,
    chunk: &mut [u8],
    correlation_id: i32,
) -> Result<bool, ReadError> {
    loop {
        if let Some(frame) = split_frame(buffer, 1 << 30)? {
            let (header, response) = decode_response(ApiKey::Produce, PRODUCE_VERSION, frame)?;
            if header.correlation_id != correlation_id {
                return Err(ReadError::OutOfOrder {
                    got: header.correlation_id,
                    expected: correlation_id,
                });
            }
            let Response::Produce(answer) = response else {
                return Err(ReadError::NotProduce);
            };
            return Ok(answer
                .responses
                .iter()
                .flat_map(|t| &t.partition_responses)
                .all(|p| p.error_code == 0));
        }
        let n = stream.read(chunk)?;
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

const PRODUCE_VERSION: i16 = 9;

fn produce_frame(plan: &Plan, partition: i32, correlation_id: i32) -> Result<Bytes, EncodeError> {
    let request = Request::Produce(produce_request::ProduceRequest {
        acks: plan.acks,
        timeout_ms: 30_000,
        topic_data: vec![produce_request::TopicProduceData {
            name: plan.topic.clone(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: partition,
                records: Some(plan.batch.clone()),
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    let header = RequestHeader {
        api_key: ApiKey::Produce.key(),
        api_version: PRODUCE_VERSION,
        correlation_id,
        client_id: Some("ringlog-perf".into()),
    };
    encode_request(&header, &request)
}

/// One client: sends on its schedule (or as fast as the windows allow) until the window ends,
/// then closes its queues and collects its readers' totals. Returns them with the number of
/// requests that were due but never sent.
fn run_client(
    client: usize,
    mut connections: HashMap<i32, Pipeline>,
    plan: &Plan,
    shared: &Shared,
) -> (Totals, u64) {
    let schedule = plan
        .rate
        .map(|rate| RateSchedule::new(rate, plan.batch_records, plan.clients, client));
    let mut totals = Totals::new();
    let mut unsent = 0;
    let mut sequence = 0u64;
    'sending: loop {
        let due = schedule.map(|s| plan.started + s.due(sequence));
        let now = Instant::now();
        if due.unwrap_or(now) >= plan.window.end || now >= plan.window.end {
            if let (Some(s), Some(_)) = (schedule, due) {
                unsent = s.due_before(sequence, plan.window.end - plan.started);
            }
            break;
        }
        if let Some(due) = due
            && due > now
        {
            std::thread::sleep(due - now);
        }
        let partition = load::partition_for(client, sequence, plan.leaders.len() as i32);
        let pipeline = connections
            .get_mut(&plan.leaders[partition as usize])
            .expect("a connection to every leader");
        if !pipeline.slots.acquire() {
            break 'sending;
        }
        let since = due.unwrap_or_else(Instant::now);
        let correlation_id = pipeline.next_correlation_id;
        pipeline.next_correlation_id += 1;
        let frame = match produce_frame(plan, partition, correlation_id) {
            Ok(frame) => frame,
            Err(error) => {
                eprintln!("append: encoding a produce request: {error}");
                totals.errors += 1;
                break;
            }
        };
        shared.in_flight.fetch_add(1, Ordering::Relaxed);
        if let Err(error) = pipeline.stream.write_all(&frame) {
            eprintln!(
                "append: sending to {:?}: {error}",
                pipeline.stream.peer_addr()
            );
            shared.in_flight.fetch_sub(1, Ordering::Relaxed);
            totals.errors += 1;
            break;
        }
        let counted = since >= plan.window.measure_from;
        if pipeline
            .sent
            .send(Sent {
                correlation_id,
                since,
                counted,
                records: plan.batch_records,
                bytes: plan.batch.len() as u64,
            })
            .is_err()
        {
            break;
        }
        sequence += 1;
    }
    for (_, pipeline) in connections {
        drop(pipeline.sent);
        match pipeline.reader.join() {
            Ok(reader_totals) => totals.merge(reader_totals),
            Err(_) => totals.errors += 1,
        }
    }
    (totals, unsent)
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
