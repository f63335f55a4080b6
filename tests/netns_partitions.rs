//! Network partitions between real processes (issue 17): three `ringlog serve` voters, each in
//! a network namespace of its own, joined by one bridge, under acks=all produce load from the
//! root namespace. A partition is cut with blackhole routes between the nodes' namespaces, so
//! the producer (on the bridge's own address) still reaches every node, the isolated one too.
//!
//! The schedule, twice: isolate the topic partition's leader from both peers, heal; isolate a
//! follower, heal. Checked throughout and at the end:
//! - every record acknowledged is in the log afterwards (acks=all: a majority had it on disk);
//! - one leader per epoch, in every partition, over every node's log of leader changes;
//! - an isolated leader acknowledges nothing sent to it after the cut and, in time, stops
//!   answering as leader (check quorum);
//! - the majority elects a leader and keeps committing while the minority is cut off.
//!
//! Needs root and `ip` (iproute2): the test fails saying so where it cannot create namespaces.

mod quorum;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum::{CLUSTER_ID, RINGLOG, batch_of, eventually, read_partition_values, serial};
use ringlog_net::client::Client;
use ringlog_net::protocol::{Request, Response, produce_request};

const TOPIC: &str = "parted";
const PORT: u16 = 9092;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// Runs `ip ARGS`, panicking with its error output when it fails.
fn ip(args: &[&str]) {
    let output = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running `ip {}`: {e} (iproute2 is needed)", args.join(" ")));
    assert!(
        output.status.success(),
        "`ip {}` failed: {} (this test creates network namespaces: it needs root)",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

/// The namespaces, the bridge and the node processes; all removed on drop.
struct Net {
    tag: String,
    /// `10.a.b.0/24`: node i is `10.a.b.i`, the root namespace `10.a.b.254`.
    prefix: String,
    nodes: Vec<NetNode>,
    dir: tempfile::TempDir,
}

struct NetNode {
    id: usize,
    config: std::path::PathBuf,
    log: std::path::PathBuf,
    child: Option<Child>,
}

impl Net {
    fn new(count: usize) -> Net {
        let pid = std::process::id();
        let tag = format!("rl{}", pid % 100_000);
        let prefix = format!("10.{}.{}", 100 + pid % 100, (pid / 100) % 250);
        let bridge = format!("{tag}br");
        ip(&["link", "add", &bridge, "type", "bridge"]);
        let mut net = Net {
            tag: tag.clone(),
            prefix: prefix.clone(),
            nodes: Vec::new(),
            dir: tempfile::tempdir().unwrap(),
        };
        ip(&["addr", "add", &format!("{prefix}.254/24"), "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        for id in 1..=count {
            let ns = net.ns(id);
            let host_end = format!("{tag}h{id}");
            ip(&["netns", "add", &ns]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&[
                "link", "add", &host_end, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ]);
            ip(&["link", "set", &host_end, "master", &bridge]);
            ip(&["link", "set", &host_end, "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{prefix}.{id}/24"),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
        }
        let voters = (1..=count)
            .map(|id| format!("{id}@{prefix}.{id}:{PORT}"))
            .collect::<Vec<_>>()
            .join(",");
        for id in 1..=count {
            let config = net.dir.path().join(format!("node-{id}.properties"));
            let data = net.dir.path().join(format!("node-{id}"));
            std::fs::write(
                &config,
                format!(
                    "node.id={id}\ncontroller.quorum.voters={voters}\n\
                     listeners={prefix}.{id}:{PORT}\nmetadata.log.dir={}\n\
                     metadata.log.segment.bytes=1048576\n\
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
                .args(["format", "--cluster-id", CLUSTER_ID, "--config"])
                .arg(&config)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "format node {id}");
            net.nodes.push(NetNode {
                id,
                config,
                log: net.dir.path().join(format!("node-{id}.log")),
                child: None,
            });
        }
        net
    }

    fn ns(&self, id: usize) -> String {
        format!("{}n{id}", self.tag)
    }

    fn address(&self, id: usize) -> String {
        format!("{}.{id}:{PORT}", self.prefix)
    }

    fn addresses(&self) -> Vec<String> {
        self.nodes.iter().map(|n| self.address(n.id)).collect()
    }

    /// Starts every node inside its namespace (`ip netns exec` execs the node: the child is it).
    fn start_all(&mut self) {
        for index in 0..self.nodes.len() {
            let ns = self.ns(self.nodes[index].id);
            let node = &mut self.nodes[index];
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&node.log)
                .unwrap();
            let child = Command::new("ip")
                .args(["netns", "exec", &ns, RINGLOG, "serve", "--config"])
                .arg(&node.config)
                .env("RUST_LOG", "info")
                .env("NO_COLOR", "1")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap();
            node.child = Some(child);
        }
    }

    /// Cuts `a` off from `b` both ways (a blackhole route in each one's namespace).
    fn cut(&self, a: usize, b: usize) {
        ip(&[
            "-n",
            &self.ns(a),
            "route",
            "add",
            "blackhole",
            &format!("{}.{b}/32", self.prefix),
        ]);
        ip(&[
            "-n",
            &self.ns(b),
            "route",
            "add",
            "blackhole",
            &format!("{}.{a}/32", self.prefix),
        ]);
    }

    /// Cuts `node` off from every other node; the root namespace still reaches it.
    fn isolate(&self, node: usize) {
        for other in self.nodes.iter().map(|n| n.id).filter(|id| *id != node) {
            self.cut(node, other);
        }
    }

    /// Removes every cut.
    fn heal(&self) {
        for a in self.nodes.iter().map(|n| n.id) {
            for b in self.nodes.iter().map(|n| n.id).filter(|b| *b != a) {
                // Only the cuts that exist: deleting a missing route fails, which is fine here.
                let _ = Command::new("ip")
                    .args([
                        "-n",
                        &self.ns(a),
                        "route",
                        "del",
                        "blackhole",
                        &format!("{}.{b}/32", self.prefix),
                    ])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }

    fn logs(&self) -> String {
        quorum::log_tails(
            self.nodes.iter().map(|n| (n.id as i32, n.log.as_path())),
            40,
        )
    }

    /// (partition, epoch) → every leader some node logged for it.
    fn leaders_logged(&self) -> BTreeMap<(String, i64), BTreeSet<i64>> {
        let mut seen: BTreeMap<(String, i64), BTreeSet<i64>> = BTreeMap::new();
        for node in &self.nodes {
            let text = std::fs::read_to_string(&node.log).unwrap_or_default();
            for line in text.lines().filter(|l| l.contains("leader known")) {
                let field = |name: &str| {
                    line.split_whitespace()
                        .find_map(|w| w.strip_prefix(&format!("{name}=")))
                        .map(str::to_string)
                };
                let (Some(partition), Some(epoch), Some(leader)) =
                    (field("partition"), field("epoch"), field("leader"))
                else {
                    continue;
                };
                seen.entry((partition, epoch.parse().unwrap()))
                    .or_default()
                    .insert(leader.parse().unwrap());
            }
        }
        seen
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        for node in &self.nodes {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(node.id)])
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &format!("{}br", self.tag)])
            .status();
    }
}

/// An acks=all Produce of one record to `TOPIC`-0: `Ok(base offset)` once acknowledged,
/// `Err(error code)` when refused, `Err(-1)` when the connection failed or timed out.
fn produce(client: &mut Client, value: &str) -> Result<i64, i16> {
    let request = Request::Produce(produce_request::ProduceRequest {
        acks: -1,
        timeout_ms: 3_000,
        topic_data: vec![produce_request::TopicProduceData {
            name: TOPIC.into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: 0,
                records: Some(batch_of(value)),
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    match client.request(&request, 9) {
        Ok(Response::Produce(r)) => {
            let answer = &r.responses[0].partition_responses[0];
            if answer.error_code == 0 {
                Ok(answer.base_offset)
            } else {
                Err(answer.error_code)
            }
        }
        _ => Err(-1),
    }
}

/// The leader of `TOPIC`-0 as any of the nodes that answer names it (DescribeQuorum).
fn leader_as_seen_by(addresses: &[String], among: &[usize]) -> Option<usize> {
    among.iter().find_map(|id| {
        let view = Client::connect(&addresses[id - 1], Duration::from_millis(300))
            .ok()?
            .describe_quorum_of(TOPIC, 0)
            .ok()?;
        usize::try_from(view.partition.leader_id).ok()
    })
}

/// The producer: one record at a time, to the leader the majority names, until told to stop.
/// Each acknowledged value goes into `acked`.
fn produce_until(
    addresses: Vec<String>,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<(String, i64)>>>,
) {
    let mut client: Option<Client> = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if client.is_none() {
            let all = [1, 2, 3];
            let leader = leader_as_seen_by(&addresses, &all);
            client = leader.and_then(|id| {
                Client::connect(&addresses[id - 1], Duration::from_millis(500)).ok()
            });
            if client.is_none() {
                std::thread::park_timeout(Duration::from_millis(50));
                continue;
            }
        }
        let value = format!("record-{n}");
        n += 1;
        match produce(client.as_mut().expect("connected"), &value) {
            Ok(offset) => acked.lock().unwrap().push((value, offset)),
            // Refused or cut off: ask again who leads.
            Err(_) => client = None,
        }
    }
}

/// Waits until the producer has `more` acknowledgements beyond what it had.
fn wait_for_commits(acked: &Mutex<Vec<(String, i64)>>, more: usize, what: &str) {
    let from = acked.lock().unwrap().len();
    let target = from + more;
    eventually(Duration::from_secs(30), what, || {
        (acked.lock().unwrap().len() >= target).then_some(())
    });
}

/// `isolated` was the leader when it was cut off: nothing sent to it afterwards is
/// acknowledged, and it stops answering as the leader (it resigns on check quorum and answers
/// NOT_LEADER_OR_FOLLOWER) instead of timing out forever.
fn assert_isolated_leader_steps_down(net: &Net, isolated: usize) {
    let address = net.address(isolated);
    let mut sent = 0;
    eventually(
        Duration::from_secs(30),
        &format!("isolated node {isolated} to stop answering as leader"),
        || {
            let mut client = Client::connect(&address, Duration::from_millis(500)).ok()?;
            sent += 1;
            match produce(&mut client, &format!("to-the-isolated-{isolated}-{sent}")) {
                Ok(offset) => panic!(
                    "isolated node {isolated} acknowledged a record at offset {offset} after \
                     the cut\n{}",
                    net.logs()
                ),
                Err(NOT_LEADER_OR_FOLLOWER) => Some(()),
                Err(_) => None,
            }
        },
    );
}

#[test]
fn partitions_between_namespaces_lose_nothing_and_the_majority_commits() {
    let _serial = serial();
    let mut net = Net::new(3);
    net.start_all();
    let addresses = net.addresses();
    quorum::create_topic_at(&addresses, TOPIC, 1, &[]);
    eventually(Duration::from_secs(30), "a leader of the topic", || {
        leader_as_seen_by(&addresses, &[1, 2, 3])
    });

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let producer = {
        let (addresses, stop, acked) = (addresses.clone(), stop.clone(), acked.clone());
        std::thread::spawn(move || produce_until(addresses, stop, acked))
    };
    wait_for_commits(&acked, 200, "commits before any fault");

    for round in 0..2 {
        // The leader, cut off from both peers.
        let leader = eventually(Duration::from_secs(30), "an agreed leader", || {
            quorum::agreed_leader(&addresses, TOPIC, 0).map(|(l, _)| l as usize)
        });
        println!("round {round}: isolating leader {leader}");
        net.isolate(leader);
        assert_isolated_leader_steps_down(&net, leader);
        let majority: Vec<usize> = (1..=3).filter(|id| *id != leader).collect();
        eventually(
            Duration::from_secs(30),
            "a leader on the majority side",
            || leader_as_seen_by(&addresses, &majority).filter(|l| *l != leader),
        );
        wait_for_commits(
            &acked,
            200,
            "commits by the majority without the old leader",
        );
        net.heal();

        // A follower, cut off from both peers: the leader keeps committing with the other.
        let leader = eventually(
            Duration::from_secs(30),
            "an agreed leader after healing",
            || quorum::agreed_leader(&addresses, TOPIC, 0).map(|(l, _)| l as usize),
        );
        let follower = (1..=3).find(|id| *id != leader).expect("three nodes");
        println!("round {round}: isolating follower {follower} (leader {leader})");
        net.isolate(follower);
        wait_for_commits(&acked, 200, "commits without the isolated follower");
        net.heal();
    }
    eventually(
        Duration::from_secs(30),
        "an agreed leader at the end",
        || quorum::agreed_leader(&addresses, TOPIC, 0),
    );
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("the producer thread");

    // Every acknowledged record is in the log.
    let acked = acked.lock().unwrap().clone();
    let leader = eventually(Duration::from_secs(30), "the leader to read from", || {
        quorum::agreed_leader(&addresses, TOPIC, 0).map(|(l, _)| l as usize)
    });
    let mut client = Client::connect(&addresses[leader - 1], Duration::from_secs(5)).unwrap();
    let values: BTreeSet<Vec<u8>> = read_partition_values(&mut client, TOPIC)
        .unwrap_or_else(|e| panic!("reading {TOPIC}-0 back: {e}\n{}", net.logs()))
        .into_iter()
        .collect();
    let missing: Vec<&(String, i64)> = acked
        .iter()
        .filter(|(value, _)| !values.contains(value.as_bytes()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged records are missing, first {:?}\n{}",
        missing.len(),
        acked.len(),
        missing.first(),
        net.logs()
    );

    // One leader per epoch, in every partition, as every node logged it.
    for ((partition, epoch), leaders) in net.leaders_logged() {
        assert_eq!(
            leaders.len(),
            1,
            "{partition} epoch {epoch} had leaders {leaders:?}\n{}",
            net.logs()
        );
    }
    println!("{} records acknowledged and read back", acked.len());
}
