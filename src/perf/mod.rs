//! `ringlog perf`: load generators against a running quorum, and the baseline they are judged by.
//!
//! - `append`: N client threads producing to a topic's partition leaders (`--topic`, created if
//!   missing; never an internal topic), up to `--in-flight` requests per
//!   connection, closed loop or open loop at `--rate`, after `--warmup-secs` (append.rs; the
//!   pure schedule, partition spreading and `--json` summary in load.rs).
//! - `fetch`: N client threads, each reading the committed log from `--from-offset` to the
//!   high-watermark seen at start with consumer Fetch requests of `--max-bytes`.
//! - `fetch-snapshot`: one client downloading the frozen snapshot `--snapshot` of a partition's
//!   leader (`--topic`, `--partition`: the metadata log or a `cleanup.policy=snapshot` topic)
//!   with FetchSnapshot requests of `--max-bytes` from position 0 to its Size, as a new
//!   follower (naming the cluster id, as a replica must).
//! - `sendfile-baseline`: a plain `sendfile(2)` of a file over a loopback TCP connection to a
//!   reader thread, the ceiling a zero-copy Fetch or FetchSnapshot is compared with.
//!
//! Every run prints records/s, MB/s (10^6 bytes of record batches) and the request latency
//! p50/p99/p99.9 from an HDR histogram (microsecond resolution, merged over clients).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use ringlog_net::client::{self, Client};
use ringlog_net::protocol::METADATA_TOPIC;
use ringlog_net::protocol::{Request, Response, fetch_request, fetch_response};

mod append;
mod load;

pub use append::AppendArgs;

#[derive(Subcommand)]
pub enum PerfCommand {
    /// Produce load: N clients, up to --in-flight requests each, closed loop or at --rate.
    Append(AppendArgs),
    /// Consumer-fetch load: N clients each read the committed log.
    Fetch(FetchArgs),
    /// KIP-630 download: FetchSnapshot of the leader's frozen snapshot FILE (its name gives
    /// the snapshot id), chunk after chunk from position 0 to its Size, as a new follower does.
    FetchSnapshot(FetchSnapshotArgs),
    /// Baseline: sendfile(2) of FILE over a loopback connection, read and discarded.
    SendfileBaseline {
        file: std::path::PathBuf,
        /// Repeat the transfer this many times (reported is the total).
        #[arg(long, default_value_t = 1)]
        repeat: u32,
    },
}

#[derive(Args)]
pub struct FetchArgs {
    /// The node to read from (consumer fetch reads below that node's high-watermark).
    #[arg(long)]
    bootstrap: String,
    #[arg(long, default_value_t = 1)]
    clients: usize,
    #[arg(long, default_value_t = 1 << 20)]
    max_bytes: i32,
    #[arg(long, default_value_t = 0)]
    from_offset: i64,
    /// The topic to read (from its partition's leader, by Metadata); `__cluster_metadata`
    /// reads the metadata log from the --bootstrap node itself.
    #[arg(long, default_value = "perf")]
    topic: String,
    #[arg(long, default_value_t = 0)]
    partition: i32,
    /// Print one JSON summary object on stdout instead of the sentence.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct FetchSnapshotArgs {
    /// Any node of the quorum; the leader is found with DescribeQuorum.
    #[arg(long)]
    bootstrap: String,
    /// The snapshot file in the leader's `checkpoints/` folder.
    #[arg(long)]
    snapshot: std::path::PathBuf,
    /// The snapshotted partition's topic: the metadata log or a cleanup.policy=snapshot topic.
    #[arg(long, default_value = "__cluster_metadata")]
    topic: String,
    #[arg(long, default_value_t = 0)]
    partition: i32,
    /// The fetching replica: a voter other than the leader.
    #[arg(long)]
    replica_id: i32,
    #[arg(long, default_value_t = 8 << 20)]
    max_bytes: i32,
}

const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

pub fn run(command: PerfCommand) -> Result<(), String> {
    match command {
        PerfCommand::Append(args) => append::append(args).map_err(|e| e.to_string()),
        PerfCommand::Fetch(args) => fetch(args),
        PerfCommand::FetchSnapshot(args) => fetch_snapshot(args),
        PerfCommand::SendfileBaseline { file, repeat } => sendfile_baseline(&file, repeat),
    }
}

/// What all clients did, merged.
struct Totals {
    records: u64,
    bytes: u64,
    errors: u64,
    latency_us: Histogram<u64>,
}

impl Totals {
    fn new() -> Totals {
        Totals {
            records: 0,
            bytes: 0,
            errors: 0,
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
        }
    }

    fn merge(&mut self, other: Totals) {
        self.records += other.records;
        self.bytes += other.bytes;
        self.errors += other.errors;
        // Same bounds on both sides: the add cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
    }

    fn record_latency(&mut self, elapsed: Duration) {
        let micros = (elapsed.as_micros() as u64).clamp(1, 60_000_000);
        self.latency_us.saturating_record(micros);
    }

    fn latency_ms(&self) -> load::LatencyMs {
        let quantile_ms = |q: f64| self.latency_us.value_at_quantile(q) as f64 / 1000.0;
        load::LatencyMs {
            p50: quantile_ms(0.50),
            p99: quantile_ms(0.99),
            p999: quantile_ms(0.999),
            max: self.latency_us.max() as f64 / 1000.0,
        }
    }

    /// The `--json` object of a run that took `elapsed` (or measured over that window).
    fn summary(
        &self,
        command: &'static str,
        elapsed: Duration,
        requests_unsent: u64,
        settings: serde_json::Value,
    ) -> load::Summary {
        let seconds = elapsed.as_secs_f64().max(1e-9);
        load::Summary {
            command,
            records: self.records,
            bytes: self.bytes,
            seconds,
            records_per_sec: self.records as f64 / seconds,
            mb_per_sec: self.bytes as f64 / 1e6 / seconds,
            requests: self.latency_us.len(),
            errors: self.errors,
            requests_unsent,
            latency_ms: self.latency_ms(),
            settings,
        }
    }

    fn report(&self, what: &str, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64().max(1e-9);
        let latency = self.latency_ms();
        println!(
            "{what}: {} records, {:.1} MB in {:.2} s: {:.0} records/s, {:.1} MB/s; \
             latency ms p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} ({} requests, {} errors)",
            self.records,
            self.bytes as f64 / 1e6,
            seconds,
            self.records as f64 / seconds,
            self.bytes as f64 / 1e6 / seconds,
            latency.p50,
            latency.p99,
            latency.p999,
            latency.max,
            self.latency_us.len(),
            self.errors,
        );
    }
}

fn progress_bar(length: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(length);
    let template = format!("{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

fn parse_acks(acks: &str) -> Result<i16, String> {
    match acks {
        "0" => Ok(0),
        "1" => Ok(1),
        "all" | "-1" => Ok(-1),
        other => Err(format!("--acks must be 0, 1 or all, not {other:?}")),
    }
}

fn fetch(args: FetchArgs) -> Result<(), String> {
    if args.clients == 0 {
        return Err("--clients must be at least 1".into());
    }
    let address = if args.topic == METADATA_TOPIC {
        args.bootstrap.clone()
    } else {
        append::leader_address(&args.bootstrap, &args.topic, args.partition)
            .map_err(|e| e.to_string())?
    };
    let target = Arc::new(FetchTarget {
        topic: args.topic.clone(),
        partition: args.partition,
    });
    let mut probe = Client::connect(&address, CLIENT_TIMEOUT).map_err(|e| e.to_string())?;
    let high_watermark = target
        .fetch(&mut probe, args.from_offset, 1)
        .map_err(|e| e.to_string())?
        .high_watermark;
    if high_watermark <= args.from_offset {
        return Err(format!(
            "nothing committed to read: high-watermark {high_watermark}, from {}",
            args.from_offset
        ));
    }
    let per_client = (high_watermark - args.from_offset) as u64;
    if !args.json {
        println!(
            "fetch: {} clients each read {}-{} offsets {}..{high_watermark} from {address} \
             with max_bytes {}",
            args.clients, args.topic, args.partition, args.from_offset, args.max_bytes
        );
    }
    let mut clients = Vec::new();
    for _ in 0..args.clients {
        clients.push(Client::connect(&address, CLIENT_TIMEOUT).map_err(|e| e.to_string())?);
    }
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = clients
        .into_iter()
        .map(|mut client: Client| {
            let done = done.clone();
            let target = target.clone();
            let (from, max_bytes) = (args.from_offset, args.max_bytes);
            std::thread::spawn(move || -> Result<Totals, String> {
                let mut totals = Totals::new();
                let mut offset = from;
                while offset < high_watermark {
                    let sent = Instant::now();
                    let data = target
                        .fetch(&mut client, offset, max_bytes)
                        .map_err(|e| format!("fetch at {offset}: {e}"))?;
                    totals.record_latency(sent.elapsed());
                    if data.error_code != 0 {
                        return Err(format!("fetch at {offset}: error {}", data.error_code));
                    }
                    let records = client::fetched_records(&data);
                    let headers = ringlog_replication::records::batch_headers(&records)
                        .map_err(|e| format!("fetch at {offset}: {e}"))?;
                    let Some(last) = headers.last() else {
                        return Err(format!(
                            "fetch at {offset}: no records below {high_watermark}"
                        ));
                    };
                    let next = last.last_offset as i64 + 1;
                    totals.records += (next - offset) as u64;
                    totals.bytes += records.len() as u64;
                    done.fetch_add((next - offset) as u64, Ordering::Relaxed);
                    offset = next;
                }
                Ok(totals)
            })
        })
        .collect();
    let bar = progress_bar(per_client * args.clients as u64, "records");
    while !workers.iter().all(|w| w.is_finished()) {
        std::thread::sleep(Duration::from_millis(100));
        bar.set_position(done.load(Ordering::Relaxed));
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    let mut totals = Totals::new();
    for worker in workers {
        totals.merge(worker.join().map_err(|_| "a client thread panicked")??);
    }
    if args.json {
        let settings = serde_json::json!({
            "topic": args.topic,
            "partition": args.partition,
            "clients": args.clients,
            "max_bytes": args.max_bytes,
            "from_offset": args.from_offset,
            "high_watermark": high_watermark,
        });
        let summary = totals.summary("fetch", elapsed, 0, settings);
        println!(
            "{}",
            serde_json::to_string(&summary).expect("plain summary serialises")
        );
    } else {
        totals.report("fetch", elapsed);
    }
    Ok(())
}

/// The partition `perf fetch` reads, as a consumer (replica id -1).
struct FetchTarget {
    topic: String,
    partition: i32,
}

impl FetchTarget {
    fn fetch(
        &self,
        client: &mut Client,
        offset: i64,
        max_bytes: i32,
    ) -> Result<fetch_response::PartitionData, client::ClientError> {
        let request = Request::Fetch(fetch_request::FetchRequest {
            replica_id: -1,
            max_wait_ms: 0,
            min_bytes: 1,
            max_bytes,
            topics: vec![fetch_request::FetchTopic {
                topic: self.topic.clone(),
                partitions: vec![fetch_request::FetchPartition {
                    partition: self.partition,
                    fetch_offset: offset,
                    partition_max_bytes: max_bytes,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        let Response::Fetch(answer) = client.request(&request, client::CONSUMER_FETCH_VERSION)?
        else {
            return Err(client::ClientError::Protocol("not a Fetch answer".into()));
        };
        answer
            .responses
            .into_iter()
            .next()
            .and_then(|t| t.partitions.into_iter().next())
            .ok_or_else(|| client::ClientError::Protocol("Fetch answer without partition".into()))
    }
}

/// A reader thread drains a loopback socket while this thread `sendfile`s the whole file into
/// it: the same kernel path a zero-copy Fetch takes, without any protocol around it.
fn fetch_snapshot(args: FetchSnapshotArgs) -> Result<(), String> {
    use ringlog_engine::snapshot::naming::parse_file_name;
    use ringlog_net::protocol::{FetchSnapshotRequest, fetch_snapshot_request};

    let name = args
        .snapshot
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_file_name)
        .ok_or_else(|| format!("{}: not a snapshot file name", args.snapshot.display()))?;
    let mut client = client::connect_to_partition_leader(
        &args.bootstrap,
        &args.topic,
        args.partition,
        CLIENT_TIMEOUT,
    )
    .map_err(|e| format!("connecting to the leader: {e}"))?;
    let epoch = client
        .describe_quorum_of(&args.topic, args.partition)
        .map_err(|e| e.to_string())?
        .partition
        .leader_epoch;
    // A replica's FetchSnapshot names the cluster, or the leader refuses it.
    let cluster_id = client.cluster_id().map_err(|e| e.to_string())?;
    let mut totals = Totals::new();
    let mut position = 0i64;
    let started = Instant::now();
    loop {
        let request = Request::FetchSnapshot(FetchSnapshotRequest {
            cluster_id: Some(cluster_id.clone()),
            replica_id: args.replica_id,
            max_bytes: args.max_bytes,
            topics: vec![fetch_snapshot_request::TopicSnapshot {
                name: args.topic.clone(),
                partitions: vec![fetch_snapshot_request::PartitionSnapshot {
                    partition: args.partition,
                    current_leader_epoch: epoch,
                    snapshot_id: fetch_snapshot_request::SnapshotId {
                        end_offset: name.snapshot_id.end_offset,
                        epoch: name.snapshot_id.epoch,
                    },
                    position,
                    ..Default::default()
                }],
            }],
        });
        let sent = Instant::now();
        let Response::FetchSnapshot(response) =
            client.request(&request, 0).map_err(|e| e.to_string())?
        else {
            return Err("not a FetchSnapshot response".into());
        };
        totals.record_latency(sent.elapsed());
        let part = response
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or("a FetchSnapshot response without the partition")?;
        if response.error_code != 0 || part.error_code != 0 {
            return Err(format!(
                "FetchSnapshot at {position}: error {} / {}",
                response.error_code, part.error_code
            ));
        }
        let length = part.unaligned_records.size_bytes() as i64;
        totals.bytes += length as u64;
        position += length;
        if length == 0 || position >= part.size {
            break;
        }
    }
    totals.report("fetch-snapshot", started.elapsed());
    Ok(())
}

fn sendfile_baseline(path: &std::path::Path, repeat: u32) -> Result<(), String> {
    use std::io::Read;
    use std::os::fd::AsRawFd;

    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let length = file.metadata().map_err(|e| e.to_string())?.len();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let expected = length * u64::from(repeat);
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let mut stream = std::net::TcpStream::connect(address)?;
        let mut buffer = vec![0u8; 1 << 20];
        let mut total = 0u64;
        while total < expected {
            let n = stream.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        Ok(total)
    });
    let (socket, _) = listener.accept().map_err(|e| e.to_string())?;
    let started = Instant::now();
    for _ in 0..repeat {
        let mut offset: libc::off_t = 0;
        let mut remaining = length as usize;
        while remaining > 0 {
            // SAFETY: both descriptors are open for the whole loop; `offset` is a valid pointer.
            let sent = unsafe {
                libc::sendfile(
                    socket.as_raw_fd(),
                    file.as_raw_fd(),
                    &mut offset,
                    remaining.min(1 << 30),
                )
            };
            if sent <= 0 {
                return Err(format!("sendfile: {}", std::io::Error::last_os_error()));
            }
            remaining -= sent as usize;
        }
    }
    drop(socket);
    let received = reader
        .join()
        .map_err(|_| "the reader thread panicked")?
        .map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();
    if received != expected {
        return Err(format!("received {received} of {expected} bytes"));
    }
    println!(
        "sendfile-baseline: {:.1} MB in {:.3} s: {:.1} MB/s",
        received as f64 / 1e6,
        elapsed.as_secs_f64(),
        received as f64 / 1e6 / elapsed.as_secs_f64()
    );
    Ok(())
}
