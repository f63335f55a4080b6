//! Unmodified Kafka clients against a three-voter quorum of real `ringlog serve` processes:
//! confluent-kafka (librdkafka), kafka-python and kcat, driven by the Python scripts in
//! tests/clients/ (scripts/test-all.sh installs them). Each script exits non-zero with a
//! message naming what differed; the test shows its output and the nodes' logs.
//!
//! One cluster at a time (`SERIAL`), short Raft timeouts (election 300 ms, fetch 600 ms).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

const RINGLOG: &str = env!("CARGO_BIN_EXE_ringlog");

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct NodeProcess {
    id: i32,
    port: u16,
    log: PathBuf,
    child: Option<Child>,
}

struct Cluster {
    _dir: tempfile::TempDir,
    nodes: Vec<NodeProcess>,
}

impl Cluster {
    /// Three voters, formatted and started.
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<(i32, u16)> = (1..=3).map(|id| (id, free_port())).collect();
        let voters = ids
            .iter()
            .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for (id, port) in ids {
            let config = dir.path().join(format!("node-{id}.properties"));
            let data = dir.path().join(format!("node-{id}"));
            std::fs::write(
                &config,
                format!(
                    "node.id={id}\ncontroller.quorum.voters={voters}\nlisteners=127.0.0.1:{port}\n\
                     metadata.log.dir={}\nmetadata.log.segment.bytes=1048576\n\
                     controller.quorum.election.timeout.ms=300\n\
                     controller.quorum.election.backoff.max.ms=200\n\
                     controller.quorum.fetch.timeout.ms=600\n\
                     controller.quorum.request.timeout.ms=500\n\
                     controller.quorum.fetch.max.wait.ms=100\n",
                    data.display()
                ),
            )
            .unwrap();
            let status = Command::new(RINGLOG)
                .args([
                    "format",
                    "--cluster-id",
                    "MkU3OEVBNTcwNTJENDM2Qg",
                    "--config",
                ])
                .arg(&config)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "format node {id}");
            let log_path = dir.path().join(format!("node-{id}.log"));
            let log = std::fs::File::create(&log_path).unwrap();
            let child = Command::new(RINGLOG)
                .arg("serve")
                .arg("--config")
                .arg(&config)
                .env("RUST_LOG", "info")
                .env("NO_COLOR", "1")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap();
            nodes.push(NodeProcess {
                id,
                port,
                log: log_path,
                child: Some(child),
            });
        }
        Cluster { _dir: dir, nodes }
    }

    fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// kill -9: no resignation, no flush.
    fn kill(&mut self, id: i32) {
        let node = self.nodes.iter_mut().find(|n| n.id == id).expect("known");
        if let Some(mut child) = node.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    fn dump_logs(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let text = std::fs::read_to_string(&node.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            out.push_str(&format!("--- node {} ---\n", node.id));
            for line in tail.into_iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for Cluster {
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

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Runs a client script with (bootstrap, topic); `on_line` sees each output line and may
/// answer on the script's stdin. Fails the test when the script fails or outlives `timeout`.
fn run_script(
    cluster: &mut Cluster,
    script: &str,
    topic: &str,
    timeout: Duration,
    mut on_line: impl FnMut(&mut Cluster, &str) -> Option<String>,
) {
    let mut child = Command::new("python3")
        .arg(scripts().join(script))
        .arg(cluster.bootstrap())
        .arg(topic)
        .current_dir(scripts())
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
        let mut text = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    // The script's lines arrive on a channel so the deadline holds while it is silent.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + timeout;
    let mut output = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
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
        "{script} failed ({status}); output:\n{output}\nstderr (tail):\n{}",
        errors
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// CreateTopics through kafka-python's admin client; confluent-kafka and kafka-python each
/// produce (acks=all, idempotent and not) and consume back by assign+seek from the start and
/// the middle, byte for byte with offsets and leader epochs; kcat -L and kcat -C agree.
#[test]
fn kafka_clients_create_produce_and_consume_on_a_three_voter_quorum() {
    let _serial = serial();
    let mut cluster = Cluster::start();
    run_script(
        &mut cluster,
        "roundtrip.py",
        "roundtrip",
        Duration::from_secs(180),
        |_, _| None,
    );
}

/// The partition leader killed mid-stream (kill -9): the idempotent producer and the consumer
/// carry on to the new leader; every acknowledged record is read exactly once, in order.
#[test]
fn kafka_clients_carry_on_when_the_leader_is_killed() {
    let _serial = serial();
    let mut cluster = Cluster::start();
    let mut killed = None;
    run_script(
        &mut cluster,
        "failover.py",
        "failover",
        Duration::from_secs(240),
        |cluster, line| {
            let id: i32 = line.strip_prefix("KILL ")?.trim().parse().ok()?;
            cluster.kill(id);
            killed = Some(id);
            Some("killed\n".into())
        },
    );
    assert!(killed.is_some(), "the script never asked for the kill");
}
