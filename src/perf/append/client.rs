//! The load clients of `perf append`: each client thread keeps a pipelined connection per
//! leader ([`Pipeline`], up to `--in-flight` produce requests on it, a reader thread matching
//! the answers in order), sends on the closed- or open-loop schedule, and counts what was
//! acknowledged inside the measured window.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ringlog_net::protocol::{
    ApiKey, DecodeError, EncodeError, Request, RequestHeader, Response, decode_response,
    encode_request, produce_request, split_frame,
};

use super::AppendError;
use crate::perf::Totals;
use crate::perf::load::{self, RateSchedule};

/// What every client thread reads.
pub(super) struct Plan {
    pub(super) topic: String,
    /// Leader node id by partition index.
    pub(super) leaders: Vec<i32>,
    pub(super) batch: Bytes,
    pub(super) batch_records: u64,
    pub(super) acks: i16,
    pub(super) clients: usize,
    pub(super) rate: Option<f64>,
    pub(super) started: Instant,
    pub(super) window: Window,
}

#[derive(Clone, Copy)]
pub(super) struct Window {
    /// Requests due before this are warm-up.
    pub(super) measure_from: Instant,
    /// No request is due at or after this.
    pub(super) end: Instant,
}

/// Live counters for the progress line.
#[derive(Default)]
pub(super) struct Shared {
    pub(super) acknowledged_records: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) in_flight: AtomicU64,
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
pub(super) struct Pipeline {
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
    pub(super) fn connect(
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
pub(super) fn run_client(
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
