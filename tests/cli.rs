//! The `ringlog` CLI against real processes: `ringlog dev` supervising its four nodes (a node
//! killed with kill -9 is restarted and rejoins, or stays down with `--no-restart`; a second run
//! on the same folder finds its data), `describe-quorum` of a topic partition, and `produce`
//! and `consume` with their default topic.
//!
//! Waits poll a condition up to a deadline (`quorum::eventually`), never a fixed time; every
//! process is stopped when the test ends, also when it fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ringlog_net::client::{Client, QuorumView};

mod quorum;
use quorum::{
    Quorum, RINGLOG, batch_of, eventually, free_port, read_partition_values, serial, text_of,
};

/// The topic the dev tests write (clients cannot produce to `__cluster_metadata`).
const TOPIC: &str = "dev-records";

/// A base port whose next seven ports are free too (`dev` takes eight in a row: four client
/// listeners, then four controller listeners): `free_port` hands each port out once and checks
/// it, so eight consecutive answers are eight free ports.
fn eight_free_ports() -> u16 {
    loop {
        let base = free_port();
        if (1..8).all(|step| free_port() == base + step) {
            return base;
        }
    }
}

/// A running `ringlog dev` with its stdout and stderr in files.
struct Dev {
    data_dir: PathBuf,
    base_port: u16,
    stdout: PathBuf,
    stderr: PathBuf,
    child: Option<Child>,
}

impl Dev {
    fn start(data_dir: &Path, base_port: u16, extra: &[&str], run: &str) -> Dev {
        let stdout = data_dir.with_extension(format!("{run}.stdout"));
        let stderr = data_dir.with_extension(format!("{run}.stderr"));
        Dev::start_writing_to(data_dir, base_port, extra, stdout, stderr)
    }

    /// [`Dev::start`] with its stdout and stderr in the given files (created, or a device).
    fn start_writing_to(
        data_dir: &Path,
        base_port: u16,
        extra: &[&str],
        stdout: PathBuf,
        stderr: PathBuf,
    ) -> Dev {
        let child = Command::new(RINGLOG)
            .arg("dev")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--base-port")
            .arg(base_port.to_string())
            // 1 MiB segments: four nodes reserving 1 GiB each (the default) made the disk
            // slow for the tests after these (freeing 4 GiB of extents).
            .args(["--segment-bytes", "1048576"])
            .args(extra)
            .env("NO_COLOR", "1")
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Dev {
            data_dir: data_dir.to_path_buf(),
            base_port,
            stdout,
            stderr,
            child: Some(child),
        }
    }

    fn address(&self, id: i32) -> String {
        format!("127.0.0.1:{}", self.base_port + id as u16 - 1)
    }

    /// DescribeQuorum of `TOPIC`-0 at node `id`.
    fn describe(&self, id: i32) -> Option<QuorumView> {
        Client::connect(&self.address(id), Duration::from_millis(500))
            .ok()?
            .describe_quorum_of(TOPIC, 0)
            .ok()
    }

    /// CreateTopics `TOPIC` at the voters' controller (a second run finds it in its data).
    fn create_topic(&self) {
        let voters: Vec<String> = (1..=3).map(|id| self.address(id)).collect();
        quorum::create_topic_at(&voters, TOPIC, 1, &[]);
    }

    /// The leader (id, epoch) of `TOPIC`-0 that the voters in `asked` agree on in an epoch
    /// after `after_epoch`, once they do.
    fn agreed_leader(&self, asked: &[i32], after_epoch: i32, timeout: Duration) -> (i32, i32) {
        eventually(timeout, "one agreed leader", || {
            let mut seen = None;
            for id in asked {
                let view = self.describe(*id)?;
                let now = (view.partition.leader_id, view.partition.leader_epoch);
                if now.0 < 0 || now.1 <= after_epoch || seen.is_some_and(|s| s != now) {
                    return None;
                }
                seen = Some(now);
            }
            seen
        })
    }

    /// The pid `dev` wrote to `node-N.pid` (absent while the node is down).
    fn pid(&self, id: i32) -> Option<i32> {
        std::fs::read_to_string(self.data_dir.join(format!("node-{id}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    fn stderr_text(&self) -> String {
        text_of(&self.stderr)
    }

    fn stdout_text(&self) -> String {
        text_of(&self.stdout)
    }

    /// SIGTERM to `dev` (as Ctrl-C): it stops every node and exits; returns its exit status.
    fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("dev runs");
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        eventually(Duration::from_secs(30), "dev exits", || {
            child.try_wait().unwrap()
        })
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- dev stdout ---\n{}--- dev stderr ---\n{}",
                self.stdout_text(),
                self.stderr_text()
            );
            let logs: Vec<(i32, PathBuf)> = (1..=4)
                .map(|id| (id, self.data_dir.join(format!("node-{id}.log"))))
                .collect();
            let logs = logs.iter().map(|(id, log)| (*id, log.as_path()));
            eprintln!("{}", quorum::log_tails(logs, 20));
        }
        if let Some(mut child) = self.child.take() {
            // kill -9 of dev: its nodes get SIGTERM from the kernel (PR_SET_PDEATHSIG).
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn is_alive(pid: i32) -> bool {
    // Signal 0: only checks that the process exists (a zombie of dev's counts until reaped).
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Produces each value (acks=all) to `TOPIC`-0 at its leader `address`.
fn produce(address: &str, values: &[&str]) {
    let mut client = Client::connect(address, Duration::from_secs(2)).unwrap();
    for value in values {
        let answer = client
            .produce(TOPIC, 0, batch_of(value), -1, 10_000)
            .unwrap()
            .expect("acks=all answers");
        assert_eq!(answer.error_code, 0, "produce {value}");
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `ringlog dev` keeps the quorum running when a node dies: the killed leader's successor is
/// elected (KIP-595: a follower that stops hearing from its leader becomes a candidate), the
/// killed node is restarted after a second and fetches from the new leader again. Ctrl-C
/// (SIGTERM) stops everything, and a second `dev` on the same folder finds the records.
#[test]
fn dev_restarts_a_killed_leader_which_rejoins_and_runs_again_on_its_folder() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let base_port = eight_free_ports();
    let mut dev = Dev::start(&data_dir, base_port, &[], "first");
    dev.create_topic();

    let (leader, epoch) = dev.agreed_leader(&[1, 2, 3], 0, Duration::from_secs(30));
    produce(&dev.address(leader), &["before-1", "before-2"]);
    let pid = dev.pid(leader).expect("node-N.pid of the leader");
    let killed_at_ms = unix_ms();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);

    // The other two voters elect a new leader in a later epoch.
    let others: Vec<i32> = [1, 2, 3].into_iter().filter(|id| *id != leader).collect();
    let (successor, new_epoch) = dev.agreed_leader(&others, epoch, Duration::from_secs(30));
    assert_ne!(successor, leader);
    assert!(new_epoch > epoch);
    produce(&dev.address(successor), &["after-1"]);

    // dev says what happened and starts the node again, with a new pid.
    eventually(Duration::from_secs(30), "the killed node restarted", || {
        dev.pid(leader).filter(|new| *new != pid && is_alive(*new))
    });
    let stderr = dev.stderr_text();
    assert!(
        stderr.contains(&format!("node {leader} exited (signal: 9")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("node {leader} restarted")),
        "{stderr}"
    );
    // It rejoins: it fetches from the new leader after the kill and holds the whole log.
    eventually(
        Duration::from_secs(30),
        "the restarted node caught up",
        || {
            let view = dev.describe(successor)?;
            let p = &view.partition;
            let replica = p.current_voters.iter().find(|r| r.replica_id == leader)?;
            (replica.last_fetch_timestamp > killed_at_ms
                && replica.log_end_offset >= p.high_watermark)
                .then_some(())
        },
    );

    // Ctrl-C: every node stops gracefully and dev exits cleanly, leaving no pid file.
    let status = dev.stop();
    assert!(status.success(), "dev exited with {status}");
    let stdout = dev.stdout_text();
    for id in 1..=4 {
        assert!(stdout.contains(&format!("node {id} stopped")), "{stdout}");
        assert_eq!(dev.pid(id), None, "node-{id}.pid left behind");
    }

    // A second run on the same folder starts the same cluster with its records.
    let dev = Dev::start(&data_dir, base_port, &[], "second");
    let (leader, _) = dev.agreed_leader(&[1, 2, 3], 0, Duration::from_secs(30));
    let values = eventually(Duration::from_secs(30), "the records again", || {
        let mut client = Client::connect(&dev.address(leader), Duration::from_secs(2)).ok()?;
        read_partition_values(&mut client, TOPIC)
            .ok()
            .filter(|values| values.len() >= 3)
    });
    let values: Vec<String> = values
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert_eq!(values, ["before-1", "before-2", "after-1"]);
    assert!(!dev.stdout_text().contains("Formatted"), "formatted again");
}

/// `dev` keeps supervising its quorum when its own output cannot be written (stdout and stderr
/// on a full disk; here /dev/full, which fails every write with ENOSPC). Until 2026-12-07 its
/// first `println!` panicked ("failed printing to stdout"), and the nodes went down with it.
#[test]
fn dev_keeps_supervising_when_its_output_cannot_be_written() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let full = PathBuf::from("/dev/full");
    let mut dev = Dev::start_writing_to(
        &data_dir,
        eight_free_ports(),
        &[],
        full.clone(),
        full.clone(),
    );
    dev.create_topic();
    let (leader, epoch) = dev.agreed_leader(&[1, 2, 3], 0, Duration::from_secs(30));
    produce(&dev.address(leader), &["unprinted"]);
    // A node that dies is still restarted (dev reports it on stderr, which fails).
    let pid = dev.pid(leader).expect("node-N.pid of the leader");
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    eventually(Duration::from_secs(30), "the killed node restarted", || {
        dev.pid(leader).filter(|new| *new != pid && is_alive(*new))
    });
    let others: Vec<i32> = [1, 2, 3].into_iter().filter(|id| *id != leader).collect();
    let (successor, _) = dev.agreed_leader(&others, epoch, Duration::from_secs(30));
    produce(&dev.address(successor), &["still unprinted"]);
    let status = dev.stop();
    assert!(status.success(), "dev exited with {status}");
}

/// With `--no-restart` a node that dies stays down, and the rest of the quorum keeps serving.
#[test]
fn dev_with_no_restart_leaves_a_killed_node_down() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let base_port = eight_free_ports();
    let dev = Dev::start(&data_dir, base_port, &["--no-restart"], "first");
    dev.create_topic();

    let (leader, epoch) = dev.agreed_leader(&[1, 2, 3], 0, Duration::from_secs(30));
    let pid = dev.pid(leader).expect("node-N.pid of the leader");
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);

    let others: Vec<i32> = [1, 2, 3].into_iter().filter(|id| *id != leader).collect();
    let (successor, _) = dev.agreed_leader(&others, epoch, Duration::from_secs(30));
    assert_ne!(successor, leader);
    produce(&dev.address(successor), &["without-the-killed-node"]);
    // dev decides when it sees the exit: restart 1 s later, or (--no-restart) never. Its
    // line saying which is the condition; the node must then be down and stay unscheduled.
    let stderr = eventually(Duration::from_secs(10), "dev reports the exit", || {
        let stderr = dev.stderr_text();
        stderr
            .contains(&format!("node {leader} exited (signal: 9"))
            .then_some(stderr)
    });
    assert!(stderr.contains("left down (--no-restart"), "{stderr}");
    assert!(!stderr.contains("restarted"), "{stderr}");
    assert_eq!(dev.pid(leader), None);
    assert!(Client::connect(&dev.address(leader), Duration::from_millis(500)).is_err());
}

/// A port `dev` needs is held by another program (here: a listener of this test on node 2's
/// controller port): `dev` refuses at once, naming the port and `--base-port`, and starts no
/// node. Before, its nodes waited for the address while `dev` reported whatever quorum answered
/// on those ports (another `dev` on another folder answered as if it were this one).
#[test]
fn dev_refuses_ports_another_program_holds() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let base_port = eight_free_ports();
    let held = base_port + 5;
    let _holder = std::net::TcpListener::bind(("127.0.0.1", held)).unwrap();
    let output = run_cli(
        &[
            "dev",
            "--data-dir",
            data_dir.to_str().unwrap(),
            "--base-port",
            &base_port.to_string(),
        ],
        "",
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("127.0.0.1:{held} is taken")) && stderr.contains("--base-port"),
        "{stderr}"
    );
    for id in 1..=4 {
        assert!(
            !data_dir.join(format!("node-{id}.pid")).exists(),
            "node {id} started"
        );
    }
}

/// `consume` (alone and with `--group`) whose bootstrap answers nothing says so on stderr and
/// keeps retrying, as Kafka's consumers warn; before, it waited without a word.
#[test]
fn consume_says_when_no_node_answers() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: free_port checked it free, and nothing binds it here.
    let address = format!("127.0.0.1:{}", free_port());
    for (run, extra, what) in [
        ("alone", &[][..], "no Metadata answer from the cluster"),
        (
            "group",
            &["--group", "g"][..],
            "no FindCoordinator answer from the cluster",
        ),
    ] {
        let stderr_path = dir.path().join(format!("{run}.stderr"));
        let mut child = Command::new(RINGLOG)
            .args(["consume", "--bootstrap", &address])
            .args(extra)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let said = eventually(Duration::from_secs(30), what, || {
            let text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            text.contains(what).then_some(text)
        });
        assert!(
            child.try_wait().unwrap().is_none(),
            "it keeps retrying: {said}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// Every partition is its own quorum over the same voters: `describe-quorum --topic T
/// --partition P` shows that partition's leader, epoch and replicas, asked at any node.
#[test]
fn describe_quorum_shows_a_topic_partition() {
    let _serial = serial();
    let quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic("events", 2, &[]);

    // Every voter knows the leader (a node that started the partition a moment ago may not
    // have heard of it yet, and the CLI then rightly answers "no leader elected yet").
    let view = eventually(Duration::from_secs(20), "events-1 has a leader", || {
        let views: Vec<_> = (1..=3)
            .map(|id| {
                Client::connect(&quorum.address(id), Duration::from_secs(1))
                    .ok()?
                    .describe_quorum_of("events", 1)
                    .ok()
            })
            .collect::<Option<_>>()?;
        let leader = views[0].partition.leader_id;
        (leader >= 0 && views.iter().all(|v| v.partition.leader_id == leader))
            .then(|| views.into_iter().next().expect("three views"))
    });
    let leader = view.partition.leader_id;
    // Asked at a node that does not lead the partition, the CLI follows the leader.
    let asked = if leader == 1 { 2 } else { 1 };
    let output = Command::new(RINGLOG)
        .args(["describe-quorum", "--bootstrap"])
        .arg(quorum.address(asked))
        .args(["--topic", "events", "--partition", "1"])
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("Partition:              events-1"), "{text}");
    assert!(
        text.contains(&format!("LeaderId:               {leader}")),
        "{text}"
    );
    assert!(text.contains("CurrentVoters:          [1,2,3]"), "{text}");
    assert_eq!(text.matches("Leader\n").count(), 1, "{text}");

    let unknown = Command::new(RINGLOG)
        .args(["describe-quorum", "--bootstrap"])
        .arg(quorum.address(asked))
        .args(["--topic", "events", "--partition", "7"])
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    let error = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        error.contains("events-7: UNKNOWN_TOPIC_OR_PARTITION"),
        "{error}"
    );
}

/// Runs `ringlog ARGS` with `stdin` as its input; fails the test if it runs past `timeout`.
fn run_cli(args: &[&str], stdin: &str, timeout: Duration) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(RINGLOG)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Closed after writing: the command sees the end of its input. A command that exits before
    // reading its input (a refused topic) closes the pipe first: that is not the test's failure.
    let written = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    if let Err(error) = written {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    let started = Instant::now();
    eventually(timeout, &format!("ringlog {args:?} to exit"), || {
        let done = child.try_wait().unwrap().is_some();
        if !done && started.elapsed() + Duration::from_millis(100) >= timeout {
            let _ = child.kill();
        }
        done.then_some(())
    });
    child.wait_with_output().unwrap()
}

/// Issue 17: `ringlog produce` used to write `__cluster_metadata` by default. Now, without
/// `--topic`, it writes `quickstart-events`, created on first use (its Metadata request allows
/// auto-creation, as a Kafka producer's does), `ringlog consume` reads the same topic back, the
/// metadata log holds none of the lines, and `--topic __cluster_metadata` is refused before
/// stdin is read, naming the topic.
#[test]
fn produce_writes_its_default_topic_and_never_the_metadata_log() {
    let _serial = serial();
    let quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(20));
    let bootstrap = quorum.address(1);

    let produced = run_cli(
        &["produce", "--bootstrap", &bootstrap],
        "one\ntwo\nthree\n",
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&produced.stdout);
    let stderr = String::from_utf8_lossy(&produced.stderr);
    assert!(produced.status.success(), "{stdout}{stderr}");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("offset ")).count(),
        3,
        "{stdout}"
    );
    let view = Client::connect(&bootstrap, Duration::from_secs(2))
        .unwrap()
        .describe_quorum_of("quickstart-events", 0)
        .unwrap();
    assert_ne!(view.partition.error_code, 3, "quickstart-events-0 exists");

    let consumed = run_cli(
        &[
            "consume",
            "--bootstrap",
            &bootstrap,
            "--offset",
            "earliest",
            "--max-records",
            "3",
        ],
        "",
        Duration::from_secs(60),
    );
    let lines = String::from_utf8_lossy(&consumed.stdout);
    assert!(consumed.status.success(), "{lines}");
    assert_eq!(lines.lines().collect::<Vec<_>>(), ["one", "two", "three"]);

    let mut metadata =
        ringlog_net::client::connect_to_leader(&bootstrap, Duration::from_secs(2)).unwrap();
    let values = read_partition_values(&mut metadata, "__cluster_metadata").unwrap();
    assert!(
        !values
            .iter()
            .any(|v| [&b"one"[..], b"two", b"three"].contains(&v.as_slice())),
        "a produced line in __cluster_metadata"
    );

    let refused = run_cli(
        &[
            "produce",
            "--bootstrap",
            &bootstrap,
            "--topic",
            "__cluster_metadata",
        ],
        "x\n",
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("__cluster_metadata is an internal topic"),
        "{stderr}"
    );
}

/// On a cluster that does not create topics on first use, `ringlog produce` to a missing topic
/// stops at once and says what to do, instead of retrying into a generic error.
#[test]
fn produce_to_a_missing_topic_names_it_when_the_cluster_creates_none() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(1, "auto.create.topics.enable=false");
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    let refused = run_cli(
        &[
            "produce",
            "--bootstrap",
            &quorum.address(1),
            "--topic",
            "missing",
        ],
        "x\n",
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("topic missing does not exist")
            && stderr.contains("auto.create.topics.enable=false"),
        "{stderr}"
    );
}

/// `ringlog perf append` creates its topic with the cluster's default replication factor, so it
/// runs against a quorum of one voter too (it asked for 3 and stopped with "replication factor 3
/// is not from 1 to the 1 nodes").
#[test]
fn perf_append_runs_against_a_single_voter() {
    let _serial = serial();
    let quorum = Quorum::start(1);
    quorum.wait_for_leader(Duration::from_secs(20));
    let address = quorum.address(1);
    let output = run_cli(
        &[
            "perf",
            "append",
            "--bootstrap",
            &address,
            "--clients",
            "1",
            "--duration-secs",
            "1",
            "--json",
        ],
        "",
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains('{'), "one JSON summary: {stdout}");
}
