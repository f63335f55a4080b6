//! A real `ringlog serve` quorum on 127.0.0.1 for tests that look at a running node from the
//! outside (metrics scrape, packet capture). Free ports, data in a temp folder, every child
//! killed on drop; waits poll a condition up to a deadline, never a fixed time.
//!
//! The helpers below the `Quorum` (eventually, free_port, serial, log_tails, run_client_script,
//! checkpoints, segment_bases) are shared by every real-process test; node.rs, clients.rs,
//! kip320.rs and snapshot_node.rs keep their own cluster types because each starts nodes
//! differently (observers, rebuilt voter sets, wipes).
//!
//! Long because it is the shared harness of every real-process test (starting, killing and
//! pausing nodes, clients, waits, log reading); splitting it would only spread one API.

#![allow(dead_code)]

use std::io::{BufRead, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_net::client::Client;

pub const RINGLOG: &str = env!("CARGO_BIN_EXE_ringlog");
/// The cluster id every `Quorum` node is formatted with.
pub const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";

/// Polls `probe` until it returns `Some`, or fails the test with `what` at the deadline.
pub fn eventually<T>(timeout: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        // The pause between two probes of a condition, not a wait for the condition itself.
        std::thread::park_timeout(Duration::from_millis(20));
    }
}

/// Real-process tests in one file take this lock: each starts a whole quorum, and two quorums
/// sharing two cores make each other's timeouts fire (elections nobody caused).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A port on 127.0.0.1 that nothing listens on, for a node to bind.
///
/// Not "bind port 0 and drop": the kernel hands out the same ephemeral range for port 0 and for
/// the source ports of outgoing connections, so between the drop and the node's bind another
/// test's client or a node's peer connection could take the port ("address in use", seen once in
/// CI). These ports come from below the ephemeral range (Linux's default starts at 32768), which
/// the kernel never picks on its own, each one handed out once per test process (a counter from
/// a start that depends on the process id, so two test processes on one machine rarely meet),
/// and checked free before it is returned.
pub fn free_port() -> u16 {
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    // (how many ports from FIRST are below the ephemeral range and 32000, the next to try)
    static RANGE: LazyLock<(u32, AtomicU32)> = LazyLock::new(|| {
        let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
            .unwrap_or(32_768);
        let count = ephemeral_start.min(32_000).saturating_sub(FIRST);
        assert!(
            count > 0,
            "the ephemeral range starts at {ephemeral_start}, below {FIRST}"
        );
        (
            count,
            AtomicU32::new(std::process::id().wrapping_mul(7919) % count),
        )
    });
    let (count, next) = &*RANGE;
    for _ in 0..*count {
        let port = FIRST + next.fetch_add(1, Ordering::Relaxed) % count;
        let port = u16::try_from(port).expect("below 32000");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in [{FIRST}, {})", FIRST + count);
}

pub struct Node {
    pub id: i32,
    /// The client listener (the only one unless the quorum was formatted with controller
    /// listeners).
    pub port: u16,
    /// The separate controller listener (`controller.listener.names`), if any.
    pub controller_port: Option<u16>,
    pub metrics_port: u16,
    pub log: PathBuf,
    config: PathBuf,
    child: Option<Child>,
}

pub struct Quorum {
    pub dir: tempfile::TempDir,
    pub nodes: Vec<Node>,
    /// Environment of every node started from now on (e.g. `RINGLOG_IO`).
    pub env: Vec<(String, String)>,
}

impl Quorum {
    /// Voters 1..=voters, formatted and started, each with a metrics listener.
    pub fn start(voters: i32) -> Quorum {
        let mut quorum = Quorum::format(voters);
        quorum.start_all();
        quorum
    }

    /// Starts every node not yet running.
    pub fn start_all(&mut self) {
        let ids: Vec<i32> = self.nodes.iter().map(|n| n.id).collect();
        for id in ids {
            self.start_node(id);
        }
    }

    /// Starts node `id` unless it runs.
    pub fn start_node(&mut self, id: i32) {
        let env = self.env.clone();
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.id == id)
            .expect("known node");
        if node.child.is_some() {
            return;
        }
        let child = Command::new(RINGLOG)
            .arg("serve")
            .arg("--config")
            .arg(&node.config)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .envs(env)
            .stdout(Stdio::null())
            // Appended: a restarted node's log follows its earlier run's.
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&node.log)
                    .unwrap(),
            )
            .spawn()
            .unwrap();
        node.child = Some(child);
    }

    /// Voters 1..=voters with free ports, formatted, not started.
    pub fn format(voters: i32) -> Quorum {
        Quorum::format_with(voters, "")
    }

    /// [`Quorum::format`] with `extra` properties lines, each replacing the default line of
    /// the same key.
    pub fn format_with(voters: i32, extra: &str) -> Quorum {
        Quorum::format_listeners(voters, extra, None, &[])
    }

    /// [`Quorum::format_with`], each node formatted with `format_args` added to `ringlog
    /// format` (e.g. `--standalone`).
    pub fn format_with_args(voters: i32, extra: &str, format_args: &[&str]) -> Quorum {
        Quorum::format_listeners(voters, extra, None, format_args)
    }

    /// [`Quorum::format_with`], each node with a client listener (`PLAINTEXT`) and a separate
    /// controller listener (`CONTROLLER`, `controller.listener.names`) that
    /// `controller.quorum.voters` names; `voter.advertised.listeners` gives the client ones.
    pub fn format_with_controller_listeners(voters: i32, extra: &str) -> Quorum {
        Quorum::format_listeners(voters, extra, Some("PLAINTEXT"), &[])
    }

    /// [`Quorum::format_with_controller_listeners`] with the client listener named
    /// `client_name` (e.g. SSL, whose protocol Kafka's default map makes SSL).
    pub fn format_with_client_listener_named(
        voters: i32,
        client_name: &str,
        extra: &str,
    ) -> Quorum {
        Quorum::format_listeners(voters, extra, Some(client_name), &[])
    }

    fn format_listeners(
        voters: i32,
        extra: &str,
        client_name: Option<&str>,
        format_args: &[&str],
    ) -> Quorum {
        let separated = client_name.is_some();
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<(i32, u16, u16, Option<u16>)> = (1..=voters)
            .map(|id| {
                let controller_port = separated.then(free_port);
                (id, free_port(), free_port(), controller_port)
            })
            .collect();
        let voter_list = ids
            .iter()
            .map(|(id, port, _, controller_port)| {
                format!("{id}@127.0.0.1:{}", controller_port.unwrap_or(*port))
            })
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for &(id, port, metrics_port, controller_port) in &ids {
            let config = dir.path().join(format!("node-{id}.properties"));
            let data = dir.path().join(format!("node-{id}"));
            let listeners = match controller_port {
                None => format!("listeners=127.0.0.1:{port}\n"),
                Some(controller_port) => {
                    let others = ids
                        .iter()
                        .filter(|other| other.0 != id)
                        .map(|(other, other_port, _, _)| format!("{other}@127.0.0.1:{other_port}"))
                        .collect::<Vec<_>>()
                        .join(",");
                    format!(
                        "listeners={}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
                         controller.listener.names=CONTROLLER\nvoter.advertised.listeners={others}\n",
                        client_name.unwrap_or("PLAINTEXT")
                    )
                }
            };
            let text = format!(
                "node.id={id}\ncontroller.quorum.voters={voter_list}\n{listeners}\
                 metrics.listener=127.0.0.1:{metrics_port}\n\
                 metadata.log.dir={}\nmetadata.log.segment.bytes=1048576\n\
                 controller.quorum.election.timeout.ms=300\ncontroller.quorum.election.backoff.max.ms=200\n\
                 controller.quorum.fetch.timeout.ms=600\ncontroller.quorum.request.timeout.ms=500\n\
                 controller.quorum.fetch.max.wait.ms=100\n\
                 offsets.topic.num.partitions=3\noffsets.topic.segment.bytes=1048576\n",
                data.display()
            );
            let keys: Vec<&str> = extra
                .lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
                .collect();
            let mut text: String = text
                .lines()
                .filter(|l| !l.split_once('=').is_some_and(|(k, _)| keys.contains(&k)))
                .map(|l| format!("{l}\n"))
                .collect();
            text.push_str(extra);
            text.push('\n');
            std::fs::write(&config, text).unwrap();
            format_node(&config, format_args);
            nodes.push(Node {
                id,
                port,
                controller_port,
                metrics_port,
                log: dir.path().join(format!("node-{id}.log")),
                config,
                child: None,
            });
        }
        Quorum {
            dir,
            nodes,
            env: Vec::new(),
        }
    }

    /// A new node `id`, formatted, not started: not in `controller.quorum.voters` (the voters'
    /// list of node 1's configuration), so it starts as an observer; `extra` as in
    /// [`Quorum::format_with`] (e.g. `controller.quorum.observers`). KIP-853: it can be added
    /// as a voter once it has caught up.
    pub fn add_node(&mut self, id: i32, extra: &str) {
        let template = std::fs::read_to_string(&self.nodes[0].config).unwrap();
        let (port, metrics_port) = (free_port(), free_port());
        let data = self.dir.path().join(format!("node-{id}"));
        let config = self.dir.path().join(format!("node-{id}.properties"));
        let keys: Vec<&str> = extra
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
            .collect();
        let mut text: String = template
            .lines()
            .filter(|l| !l.split_once('=').is_some_and(|(k, _)| keys.contains(&k)))
            .map(|l| match l.split_once('=') {
                Some(("node.id", _)) => format!("node.id={id}\n"),
                Some(("listeners", _)) => format!("listeners=127.0.0.1:{port}\n"),
                Some(("metrics.listener", _)) => {
                    format!("metrics.listener=127.0.0.1:{metrics_port}\n")
                }
                Some(("metadata.log.dir", _)) => format!("metadata.log.dir={}\n", data.display()),
                _ => format!("{l}\n"),
            })
            .collect();
        text.push_str(extra);
        text.push('\n');
        std::fs::write(&config, text).unwrap();
        format_node(&config, &[]);
        self.nodes.push(Node {
            id,
            port,
            controller_port: None,
            metrics_port,
            log: self.dir.path().join(format!("node-{id}.log")),
            config,
            child: None,
        });
    }

    /// Moves stopped node `id` to a new free port: its `listeners` line is rewritten, the
    /// other nodes' `controller.quorum.voters` still name the old address (a voter whose
    /// machine changed address). Its metrics listener moves too: the killed process's
    /// listening sockets may stay bound a moment after its exit (io_uring tears its ring down
    /// asynchronously, with accepts pending on them). Returns the new port.
    pub fn move_listener(&mut self, id: i32) -> u16 {
        let port = free_port();
        let metrics_port = free_port();
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.id == id)
            .expect("known node");
        assert!(node.child.is_none(), "node {id} runs");
        let text = std::fs::read_to_string(&node.config).unwrap();
        let text: String = text
            .lines()
            .map(|l| match l.split_once('=') {
                Some(("listeners", _)) => format!("listeners=127.0.0.1:{port}\n"),
                Some(("metrics.listener", _)) => {
                    format!("metrics.listener=127.0.0.1:{metrics_port}\n")
                }
                _ => format!("{l}\n"),
            })
            .collect();
        std::fs::write(&node.config, text).unwrap();
        node.port = port;
        node.metrics_port = metrics_port;
        port
    }

    /// Waits until stopped node `id`'s listener and metrics ports can be bound again: a killed
    /// process's listening sockets may stay bound a moment after its exit (io_uring tears its
    /// ring down asynchronously, with accepts pending on them).
    pub fn wait_for_ports_released(&self, id: i32) {
        let node = self.node(id);
        for port in [node.port, node.metrics_port] {
            eventually(
                Duration::from_secs(10),
                &format!("port {port} of node {id} released"),
                || TcpListener::bind(("127.0.0.1", port)).ok().map(drop),
            );
        }
    }

    /// kill -9 one node (no resignation, no flush); `start_all` brings it back.
    pub fn kill(&mut self, id: i32) {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.id == id)
            .expect("known node");
        if let Some(mut child) = node.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// Nodes whose process ended on its own (the test did not kill it), with how it ended.
    pub fn exited(&mut self) -> Vec<(i32, std::process::ExitStatus)> {
        self.nodes
            .iter_mut()
            .filter_map(|node| {
                let status = node.child.as_mut()?.try_wait().ok()??;
                Some((node.id, status))
            })
            .collect()
    }

    /// CreateTopics `name` (replicated on every voter, `configs` as key/value pairs) at
    /// whichever node is the controller, retried until one answers NONE.
    pub fn create_topic(&self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let addresses: Vec<String> = self.nodes.iter().map(|n| self.address(n.id)).collect();
        create_topic_at(&addresses, name, partitions, configs);
    }

    /// The (leader, epoch) of `topic`-0 once every running node names the same one (each
    /// partition is its own quorum, with its own leader).
    pub fn wait_for_leader_of(&self, topic: &str, timeout: Duration) -> (i32, i32) {
        let running: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| self.address(n.id))
            .collect();
        eventually(timeout, &format!("one agreed leader of {topic}-0"), || {
            agreed_leader(&running, topic, 0)
        })
    }

    /// A client of the leader of `topic`-0 as Metadata names it, and its id.
    pub fn partition_leader(&self, topic: &str) -> Option<(Client, i32)> {
        use ringlog_net::clients::TopicPartition;
        use ringlog_net::clients::transport::{Connections, fetch_metadata};
        let mut connections = Connections::new(&self.bootstrap(), Duration::from_millis(500));
        let metadata = fetch_metadata(&mut connections, &[topic.to_string()]).ok()?;
        let leader = metadata
            .partitions
            .get(&TopicPartition::new(topic, 0))?
            .leader_id?;
        let client = Client::connect(&self.address(leader), Duration::from_secs(2)).ok()?;
        Some((client, leader))
    }

    /// Sets `lines` (`key=value` lines) in node `id`'s config file, replacing the lines of the
    /// same keys; its next start reads them.
    pub fn set_config(&self, id: i32, lines: &str) {
        let node = self.node(id);
        let key = |line: &str| line.split('=').next().unwrap_or("").trim().to_string();
        let new: Vec<&str> = lines
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let replaced: Vec<String> = new.iter().map(|l| key(l)).collect();
        let text = std::fs::read_to_string(&node.config).unwrap();
        let mut kept: Vec<&str> = text
            .lines()
            .filter(|l| !replaced.contains(&key(l)))
            .collect();
        kept.extend(new);
        std::fs::write(&node.config, kept.join("\n") + "\n").unwrap();
    }

    /// kill -9 every running node (no resignation, no flush); `start_all` brings them back.
    pub fn kill_all(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                child.kill().unwrap();
                child.wait().unwrap();
            }
        }
    }

    /// The comma-separated client addresses of every node.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A node's data folder (`metadata.log.dir`).
    pub fn data_dir(&self, id: i32) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    /// Removes a stopped node's data folder and formats it again (a lost disk).
    pub fn wipe(&mut self, id: i32) {
        assert!(self.node(id).child.is_none(), "wipe a stopped node");
        std::fs::remove_dir_all(self.data_dir(id)).unwrap();
        format_node(&self.node(id).config, &[]);
    }

    /// The process id of running node `id` (for /proc/<pid>/status).
    pub fn pid(&self, id: i32) -> u32 {
        self.node(id).child.as_ref().expect("the node runs").id()
    }

    pub fn node(&self, id: i32) -> &Node {
        self.nodes.iter().find(|n| n.id == id).expect("known node")
    }

    /// Node `id`'s client listener.
    pub fn address(&self, id: i32) -> String {
        format!("127.0.0.1:{}", self.node(id).port)
    }

    /// Node `id`'s controller listener (its client listener when it has no separate one).
    pub fn controller_address(&self, id: i32) -> String {
        let node = self.node(id);
        format!("127.0.0.1:{}", node.controller_port.unwrap_or(node.port))
    }

    /// Waits until every voter names the same leader in the same epoch; returns it.
    pub fn wait_for_leader(&self, timeout: Duration) -> (i32, i32) {
        eventually(timeout, "one agreed leader", || {
            let mut seen = None;
            for node in &self.nodes {
                // The client listener, else the controller listener: a SASL client listener
                // answers nothing but the exchange before a client authenticates
                // (tests/scram.rs), an SSL controller listener no plaintext client (tests/tls.rs).
                let ask = |address: String| {
                    Client::connect(&address, Duration::from_millis(300))
                        .ok()?
                        .describe_quorum()
                        .ok()
                };
                let view =
                    ask(self.address(node.id)).or_else(|| ask(self.controller_address(node.id)))?;
                let now = (view.partition.leader_id, view.partition.leader_epoch);
                if now.0 < 0 || seen.is_some_and(|s| s != now) {
                    return None;
                }
                seen = Some(now);
            }
            seen
        })
    }

    /// Produces `count` one-record batches with acks=all to `topic`-0 at its leader `leader`,
    /// each acknowledged.
    pub fn produce(&self, topic: &str, leader: i32, count: usize, prefix: &str) {
        let mut client = Client::connect(&self.address(leader), Duration::from_secs(2)).unwrap();
        for i in 0..count {
            let answer = client
                .produce(topic, 0, batch_of(&format!("{prefix}-{i}")), -1, 10_000)
                .unwrap()
                .expect("acks=all answers");
            assert_eq!(answer.error_code, 0, "produce: {:?}", answer.error_message);
        }
    }

    pub fn dump_logs(&self) -> String {
        log_tails(self.nodes.iter().map(|n| (n.id, n.log.as_path())), 15)
    }
}

impl Drop for Quorum {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.dump_logs());
        }
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Produces three records (acks=all, ringlog's own producer) to each of `partitions`
/// partitions of `topic` and reads them back with its consumer from the beginning.
pub fn produce_and_consume_every_partition(bootstrap: &str, topic: &str, partitions: i32) {
    use ringlog_net::clients::TopicPartition;
    use ringlog_net::clients::consumer::{Consumer, ConsumerConfig, OffsetReset};
    use ringlog_net::clients::producer::{Producer, ProducerConfig};
    let mut producer = Producer::connect(
        bootstrap,
        ProducerConfig {
            acks: -1,
            linger_ms: 0,
            retries: 50,
            ..ProducerConfig::default()
        },
    );
    let mut sent = Vec::new();
    for partition in 0..partitions {
        let tp = TopicPartition::new(topic, partition);
        for n in 0..3 {
            let value = format!("{topic}-{partition}-{n}");
            producer.send(&tp, None, Some(value.as_bytes())).unwrap();
            sent.push(value);
        }
    }
    producer.flush().unwrap();
    assert_eq!(producer.take_acknowledged().len(), sent.len());

    let mut consumer = Consumer::connect(
        bootstrap,
        ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            fetch_max_wait_ms: 100,
            default_api_timeout_ms: 30_000,
            ..ConsumerConfig::default()
        },
    );
    consumer.assign((0..partitions).map(|p| TopicPartition::new(topic, p)));
    let mut received: Vec<String> = Vec::new();
    eventually(
        Duration::from_secs(30),
        "every produced record consumed",
        || {
            for record in consumer.poll(Duration::from_millis(200)).unwrap() {
                received.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
            }
            (received.len() >= sent.len()).then_some(())
        },
    );
    received.sort();
    sent.sort();
    assert_eq!(received, sent);
}

/// Runs `ringlog args…`; `Some(stdout)` when it exits 0 (its stderr is printed otherwise).
pub fn run_ringlog(args: &[&str]) -> Option<String> {
    let output = Command::new(RINGLOG)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !output.status.success() {
        eprintln!(
            "ringlog {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The metadata quorum's voter ids as node `address` knows them (DescribeQuorum v2's Nodes:
/// the voter set in force in its own log, KIP-853), sorted.
pub fn metadata_voters(address: &str) -> Option<Vec<i32>> {
    let view = Client::connect(address, Duration::from_millis(500))
        .ok()?
        .describe_quorum()
        .ok()?;
    let mut ids: Vec<i32> = view.nodes.iter().map(|n| n.node_id).collect();
    ids.sort_unstable();
    Some(ids)
}

/// CreateTopics `name` (the default replication factor: every voter; `configs` as key/value
/// pairs) at whichever of `addresses` is the controller, retried until one answers NONE.
pub fn create_topic_at(
    addresses: &[String],
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    use ringlog_net::protocol::{Request, Response, create_topics_request};
    let request = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: -1,
            configs: configs
                .iter()
                .map(|(key, value)| create_topics_request::CreatableTopicConfig {
                    name: (*key).into(),
                    value: Some((*value).into()),
                })
                .collect(),
            ..Default::default()
        }],
        timeout_ms: 5000,
        validate_only: false,
    });
    eventually(
        Duration::from_secs(20),
        &format!("topic {name} created"),
        || {
            addresses.iter().find_map(|address| {
                let mut client = Client::connect(address, Duration::from_secs(2)).ok()?;
                let Ok(Response::CreateTopics(r)) = client.request(&request, 7) else {
                    return None;
                };
                let code = r.topics[0].error_code;
                // 41: NOT_CONTROLLER, ask the next node.
                assert!(
                    code == 0 || code == 41,
                    "CreateTopics {name}: {code} {:?}",
                    r.topics[0].error_message
                );
                (code == 0).then_some(())
            })
        },
    );
}

/// The (leader, epoch) of `topic`-`partition` if every node at `addresses` names the same
/// one, and that leader is among them and answers for the partition itself.
pub fn agreed_leader(addresses: &[String], topic: &str, partition: i32) -> Option<(i32, i32)> {
    let mut seen = None;
    for address in addresses {
        let view = Client::connect(address, Duration::from_millis(500))
            .ok()?
            .describe_quorum_of(topic, partition)
            .ok()?;
        let now = (view.partition.leader_id, view.partition.leader_epoch);
        if now.0 < 0 || seen.is_some_and(|s| s != now) {
            return None;
        }
        seen = Some(now);
    }
    seen
}

fn format_node(config: &Path, format_args: &[&str]) {
    let status = Command::new(RINGLOG)
        .args(["format", "--cluster-id", CLUSTER_ID, "--config"])
        .arg(config)
        .args(format_args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "format {}", config.display());
}

/// A file's text; nothing for a device: a node or `dev` may write to /dev/full
/// (tests/disk_full.rs, tests/cli.rs), which reads as zeros without end.
pub fn text_of(path: &Path) -> String {
    if path.is_file() {
        std::fs::read_to_string(path).unwrap_or_default()
    } else {
        String::new()
    }
}

/// The last `lines` lines of each node's log, for a failing test's output.
pub fn log_tails<'a>(logs: impl IntoIterator<Item = (i32, &'a Path)>, lines: usize) -> String {
    let mut out = String::new();
    for (id, log) in logs {
        let text = text_of(log);
        let tail: Vec<&str> = text.lines().rev().take(lines).collect();
        out.push_str(&format!("--- node {id} ---\n"));
        for line in tail.into_iter().rev() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

pub fn batch_of(value: &str) -> Bytes {
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(0, None, Some(value.as_bytes()), &[]);
    builder.build().into_bytes()
}

/// Runs a Python client script from tests/clients with (bootstrap, arg); `on_line` sees each
/// output line and may answer on the script's stdin (e.g. "killed" after killing a leader).
/// Fails when the script fails, does not end with "OK", or outlives `timeout`; the lines
/// arrive on a channel so the deadline holds while the script is silent.
pub fn run_client_script<C>(
    cluster: &mut C,
    bootstrap: &str,
    script: &str,
    arg: &str,
    timeout: Duration,
    mut on_line: impl FnMut(&mut C, &str) -> Option<String>,
) {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
    let mut child = Command::new("python3")
        .arg(scripts.join(script))
        .arg(bootstrap)
        .arg(arg)
        .current_dir(&scripts)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/test-all.sh installs the clients)");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let lines: Vec<String> = std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + timeout;
    let mut output = String::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                output.push_str(&line);
                output.push('\n');
                if let Some(answer) = on_line(cluster, &line) {
                    stdin.write_all(answer.as_bytes()).unwrap();
                    stdin.flush().unwrap();
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                panic!("{script} ran longer than {timeout:?}; output:\n{output}");
            }
        }
    }
    let status = child.wait().unwrap();
    let errors = errors.join().unwrap_or_default();
    assert!(
        status.success() && output.lines().last() == Some("OK"),
        "{script} failed ({status}); output:\n{output}\nstderr (tail):\n{errors}"
    );
}

/// InitProducerId for a new idempotent producer (no transactional id, no id or epoch yet).
pub fn new_producer_request() -> ringlog_net::protocol::Request {
    use ringlog_net::protocol::{Request, init_producer_id_request::InitProducerIdRequest};
    Request::InitProducerId(InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: -1,
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    })
}

/// A node's `GET /metrics` (`metrics.listener`) over HTTP/1.0: sample name (with labels) →
/// value.
pub fn scrape_metrics(port: u16) -> Option<std::collections::HashMap<String, f64>> {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    Some(
        body.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let (name, value) = l.rsplit_once(' ')?;
                Some((name.to_string(), value.parse().ok()?))
            })
            .collect(),
    )
}

/// A node's high-watermark of `partition` (e.g. `__cluster_metadata-0`) from its raft-metrics.
/// The node sets it and applies the batches below it in one step of its loop, so once a scrape
/// shows it, the state machine (if the partition has one) has applied them.
pub fn high_watermark(node: &Node, partition: &str) -> Option<i64> {
    let samples = scrape_metrics(node.metrics_port)?;
    let name = format!("kafka_server_raft_metrics_high_watermark{{partition=\"{partition}\"}}");
    samples.get(&name).map(|value| *value as i64)
}

/// End offsets of the frozen KIP-630 snapshots in a partition folder, ascending.
pub fn checkpoints(partition_dir: &Path) -> Vec<u64> {
    let mut ends: Vec<u64> = std::fs::read_dir(partition_dir.join("checkpoints"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| name.ends_with(".checkpoint"))
                .filter_map(|name| name.split('-').next()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    ends.sort_unstable();
    ends
}

/// Base offsets of the log's segment files, ascending.
pub fn segment_bases(partition_dir: &Path) -> Vec<u64> {
    let mut bases: Vec<u64> = std::fs::read_dir(partition_dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter_map(|name| name.strip_suffix(".log")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    bases.sort_unstable();
    bases
}

/// Every record value of `topic`-0 from offset 0 to its high-watermark (control batches
/// skipped), read with consumer Fetch v12 through `client`, which must be the leader. An error
/// code or a fetch below the high-watermark that returns nothing is an `Err` naming it.
pub fn read_partition_values(client: &mut Client, topic: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut values = Vec::new();
    for batch in read_partition_batches(client, topic)? {
        if batch.is_control() {
            continue;
        }
        for record in batch.records().map_err(|e| format!("records: {e}"))? {
            let record = record.map_err(|e| format!("record: {e}"))?;
            values.push(record.value().map(|v| v.to_vec()).unwrap_or_default());
        }
    }
    Ok(values)
}

/// Every batch of `topic`-0 from offset 0 to its high-watermark, control batches included,
/// as stored (consumer Fetch v12 through `client`, which must be the leader).
pub fn read_partition_batches(
    client: &mut Client,
    topic: &str,
) -> Result<Vec<ringlog_engine::batch::RecordBatch>, String> {
    read_partition_batches_from(client, topic, 0)
}

/// [`read_partition_batches`] from `from` (the first batch may start below it, as a fetch
/// inside a batch returns the whole batch).
pub fn read_partition_batches_from(
    client: &mut Client,
    topic: &str,
    from: i64,
) -> Result<Vec<ringlog_engine::batch::RecordBatch>, String> {
    use ringlog_engine::batch::BatchIter;
    use ringlog_net::protocol::Response;
    let mut batches = Vec::new();
    let mut offset = from;
    loop {
        let request = consumer_fetch_request(topic, offset, 0);
        let response = client
            .request(&request, 12)
            .map_err(|e| format!("Fetch at {offset}: {e}"))?;
        let Response::Fetch(f) = response else {
            return Err(format!("not a Fetch answer: {response:?}"));
        };
        let data = f
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or("a Fetch answer without the partition")?;
        if data.error_code != 0 {
            return Err(format!("Fetch at {offset}: error {}", data.error_code));
        }
        if offset >= data.high_watermark {
            return Ok(batches);
        }
        let before = offset;
        for batch in BatchIter::new(ringlog_net::client::fetched_records(data)) {
            let batch = batch.map_err(|e| format!("batch at {offset}: {e}"))?;
            offset = batch.next_offset();
            batches.push(batch);
        }
        if offset == before {
            return Err(format!(
                "a fetch at {offset} below the high-watermark {} returned nothing",
                data.high_watermark
            ));
        }
    }
}

/// DeleteRecords (v2) of `topic`-0 below `offset` through `client` (the leader), waiting up to
/// `timeout_ms`: the partition's (error code, low watermark).
pub fn delete_records(
    client: &mut Client,
    topic: &str,
    offset: i64,
    timeout_ms: i32,
) -> (i16, i64) {
    use ringlog_net::protocol::{Request, Response, delete_records_request as dr_req};
    let request = Request::DeleteRecords(dr_req::DeleteRecordsRequest {
        topics: vec![dr_req::DeleteRecordsTopic {
            name: topic.to_string(),
            partitions: vec![dr_req::DeleteRecordsPartition {
                partition_index: 0,
                offset,
            }],
        }],
        timeout_ms,
    });
    match client.request(&request, 2).unwrap() {
        Response::DeleteRecords(r) => {
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.low_watermark)
        }
        other => panic!("DeleteRecords answered {other:?}"),
    }
}

/// Every batch line of `ringlog dump` over a partition folder's segments, without the byte
/// position (two replicas may cut segments at other bytes): offsets, count, epoch, CRC.
pub fn dumped_batches(partition_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for base in segment_bases(partition_dir) {
        let lines = dumped_batch_lines(&partition_dir.join(format!("{base:020}.log")))
            .unwrap_or_else(|error| panic!("{error}"));
        for line in lines {
            let head = line.split(" position: ").next().unwrap();
            let crc = line.split(" crc: ").nth(1).unwrap_or("");
            out.push(format!("{head} crc: {crc}"));
        }
    }
    out
}

/// The batch lines (`baseOffset: ...`) `ringlog dump` prints for one segment file, or why it
/// could not run.
pub fn dumped_batch_lines(segment: &Path) -> Result<Vec<String>, String> {
    let output = Command::new(RINGLOG)
        .arg("dump")
        .arg(segment)
        .output()
        .map_err(|error| format!("ringlog dump runs: {error}"))?;
    if !output.status.success() {
        return Err(format!("{output:?}"));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with("baseOffset: "))
        .map(str::to_owned)
        .collect())
}

/// A consumer Fetch (v12 fields: replica id -1, no epochs, 1 MiB) of `topic`-0 at `offset`.
pub fn consumer_fetch_request(
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
) -> ringlog_net::protocol::Request {
    use ringlog_net::protocol::{Request, fetch_request};
    Request::Fetch(fetch_request::FetchRequest {
        replica_id: -1,
        max_wait_ms,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![fetch_request::FetchTopic {
            topic: topic.into(),
            partitions: vec![fetch_request::FetchPartition {
                partition: 0,
                fetch_offset: offset,
                partition_max_bytes: 1 << 20,
                current_leader_epoch: -1,
                last_fetched_epoch: -1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// (error code, base offset) of an acks=all Produce (v9) of `records` to `topic`-`partition` at
/// `client`; the request waits up to 10 s for the commit.
pub fn produce_to(client: &mut Client, topic: &str, partition: i32, records: Bytes) -> (i16, i64) {
    let answer = client
        .produce(topic, partition, records, -1, 10_000)
        .unwrap()
        .expect("acks=all is answered");
    (answer.error_code, answer.base_offset)
}

/// A topic's leader left alone with one record it cannot commit (listeners.rs, trust.rs).
pub struct LoneLeader {
    pub leader: i32,
    pub epoch: i32,
    /// The killed followers.
    pub followers: Vec<i32>,
    /// The leader's log end after the record.
    pub log_end_offset: i64,
}

/// Creates `topic` (one partition), kills its leader's followers and appends `value` at the
/// leader with acks=1: the leader holds a record no follower has. Give the quorum a long
/// `controller.quorum.fetch.timeout.ms` so the leader keeps leading (check quorum) meanwhile.
pub fn leave_leader_alone_with_a_record(
    quorum: &mut Quorum,
    topic: &str,
    value: &str,
) -> LoneLeader {
    use ringlog_net::protocol::{Request, Response, produce_request};
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(topic, 1, &[]);
    let (leader, epoch) = quorum.wait_for_leader_of(topic, Duration::from_secs(20));
    let followers: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    for id in &followers {
        quorum.kill(*id);
    }
    let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(2)).unwrap();
    let produce = Request::Produce(produce_request::ProduceRequest {
        acks: 1,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: topic.into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: 0,
                records: Some(batch_of(value)),
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    let Response::Produce(answer) = client.request(&produce, 9).unwrap() else {
        panic!("not a Produce answer");
    };
    let answer = &answer.responses[0].partition_responses[0];
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    LoneLeader {
        leader,
        epoch,
        followers,
        log_end_offset: answer.base_offset + 1,
    }
}
