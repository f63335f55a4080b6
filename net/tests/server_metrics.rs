//! The metrics endpoint serves Prometheus text that a line-based parser reads, with Kafka's
//! raft-metrics names; and the HTTP parser's fuzz corpus replays without a panic.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use ringlog_net::metrics::{
    MetricsRegistry, MetricsServer, RaftMetrics, WindowedStat, fuzz_metrics_request,
};

/// Starts the endpoint on its own runtime thread; the returned sender stops it.
fn start(registry: MetricsRegistry) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        tokio_uring::start(async move {
            let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), registry).unwrap();
            addr_tx.send(server.local_addr()).unwrap();
            let _ = stop_rx.await;
        })
    });
    (addr_rx.recv().unwrap(), stop_tx)
}

/// A restarted node's metrics endpoint waits for its port while the previous owner's
/// listener is still open (a kill -9'd process's io_uring is torn down after it was reaped),
/// as the Kafka listeners do: CI met "cannot listen on ...: Address already in use" here on
/// 2026-12-05, when the endpoint bound once and gave up. The port is released only once the
/// endpoint has met it in use (its wait's warning), so the bind can pass only by waiting.
#[test]
fn the_endpoint_waits_for_a_port_its_previous_owner_still_holds() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = held.local_addr().unwrap();
    let (met_in_use, in_use) = std::sync::mpsc::channel();
    let bound = std::thread::spawn(move || {
        let signal = SignalOnWarning(std::sync::Mutex::new(Some(met_in_use)));
        tracing::subscriber::with_default(signal, || {
            tokio_uring::start(async move {
                MetricsServer::start(address, MetricsRegistry::default()).map(|s| s.local_addr())
            })
        })
    });
    // Without the wait the bind fails at once and no warning comes: the deadline ends it.
    let warned = in_use.recv_timeout(Duration::from_secs(20)).is_ok();
    drop(held);
    let bound = bound.join().unwrap();
    assert!(warned, "no 'address in use' warning: {bound:?}");
    assert_eq!(bound.unwrap(), address);
}

/// A tracing subscriber that reports the first WARN event on a channel.
struct SignalOnWarning(std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>);

impl tracing::Subscriber for SignalOnWarning {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN
            && let Some(sender) = self.0.lock().unwrap().take()
        {
            let _ = sender.send(());
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn get(addr: SocketAddr, request: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("head and body");
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// Parses the text format line by line: `# HELP`/`# TYPE` comments, else
/// `name{labels} value`. Returns `name{labels}` → value.
fn parse_exposition(body: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    let mut typed = std::collections::HashSet::new();
    for line in body.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut words = comment.splitn(3, ' ');
            let kind = words.next().unwrap();
            assert!(kind == "HELP" || kind == "TYPE", "unknown comment {line:?}");
            let name = words.next().expect("metric name");
            if kind == "TYPE" {
                let metric_type = words.next().unwrap();
                assert!(["gauge", "counter"].contains(&metric_type), "{line:?}");
                typed.insert(name.to_string());
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("series and value");
        let name = series.split('{').next().unwrap();
        assert!(typed.contains(name), "{name} has no # TYPE line before it");
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "bad metric name {name:?}"
        );
        let labels = &series[name.len()..];
        assert!(
            labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
            "{line:?}"
        );
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        assert!(
            samples.insert(series.to_string(), value).is_none(),
            "duplicate {series}"
        );
    }
    samples
}

#[test]
fn metrics_endpoint_serves_parseable_raft_metrics() {
    let registry = MetricsRegistry::new();
    // The node's one event loop: every partition's group shows the same poll-idle-ratio.
    let poll_idle_ratio = WindowedStat::default();
    let raft = RaftMetrics::new(&registry, "__cluster_metadata-0", &poll_idle_ratio);
    let _other = RaftMetrics::new(&registry, "perf-0", &poll_idle_ratio);
    poll_idle_ratio.record(0.25);
    poll_idle_ratio.record(0.75);
    raft.current_state.set("leader");
    raft.current_epoch.set(7.0);
    raft.current_leader.set(1.0);
    raft.high_watermark.set(5120793.0);
    raft.commit_latency_ms.record(4.0);
    raft.commit_latency_ms.record(8.0);
    raft.append_records.record(300.0);
    raft.snapshots_generated.increment(2);
    let (addr, _stop) = start(registry);

    let (status, body) = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, "HTTP/1.0 200 OK");
    let samples = parse_exposition(&body);
    let partition = "{partition=\"__cluster_metadata-0\"}";
    let value = |name: &str| samples[&format!("kafka_server_raft_metrics_{name}{partition}")];
    assert_eq!(value("current_epoch"), 7.0);
    assert_eq!(value("current_leader"), 1.0);
    assert_eq!(value("high_watermark"), 5120793.0);
    assert_eq!(value("commit_latency_avg"), 6.0);
    assert_eq!(value("commit_latency_max"), 8.0);
    assert!(value("election_latency_avg").is_nan(), "no election yet");
    assert_eq!(
        value("append_records_rate"),
        10.0,
        "300 records over one 30 s window"
    );
    assert_eq!(value("snapshots_generated_total"), 2.0);
    for partition in ["__cluster_metadata-0", "perf-0"] {
        let series =
            |name: &str| format!("kafka_server_raft_metrics_{name}{{partition=\"{partition}\"}}");
        assert_eq!(samples[&series("poll_idle_ratio_avg")], 0.5, "{partition}");
        assert_eq!(samples[&series("poll_idle_ratio_max")], 0.75, "{partition}");
    }
    for state in RaftMetrics::STATES {
        let series = format!(
            "kafka_server_raft_metrics_current_state{{partition=\"__cluster_metadata-0\",state=\"{state}\"}}"
        );
        let expected = if *state == "leader" { 1.0 } else { 0.0 };
        assert_eq!(samples[&series], expected, "{series}");
    }

    let (status, _) = get(addr, "GET /other HTTP/1.0\r\n\r\n");
    assert_eq!(status, "HTTP/1.0 404 Not Found");
    let (status, _) = get(addr, "POST /metrics HTTP/1.0\r\n\r\n");
    assert_eq!(status, "HTTP/1.0 405 Method Not Allowed");
    let (status, _) = get(addr, "garbage\r\n\r\n");
    assert_eq!(status, "HTTP/1.0 400 Bad Request");
}

#[test]
fn metrics_request_corpus_replays() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/corpus/metrics_request"
    );
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        fuzz_metrics_request(&std::fs::read(entry.unwrap().path()).unwrap());
        count += 1;
    }
    assert!(count > 0, "empty corpus {dir}");
}
