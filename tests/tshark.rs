//! An independent decoder reads our traffic: Wireshark's Kafka dissector (the Debian `tshark`
//! package, installed by scripts/test-all.sh) decodes a capture of a real three-voter quorum
//! on loopback (elections, replica fetches, produce, consumer fetch, DescribeQuorum) and
//! must find no malformed frame and no expert-info error anywhere in it.

mod quorum;

use std::process::{Command, Stdio};
use std::time::Duration;

use quorum::{Quorum, eventually};
use ringlog_net::client::Client;
use ringlog_net::protocol::api_versions_request::ApiVersionsRequest;
use ringlog_net::protocol::metadata_request::MetadataRequest;
use ringlog_net::protocol::{Request, Response, fetch_request, produce_request};

const TOPIC: &str = "capture";

/// `-d tcp.port==P,kafka` for each port: the dissector only knows 9092 by default.
fn decode_as(ports: &[u16]) -> Vec<String> {
    ports
        .iter()
        .flat_map(|p| ["-d".to_string(), format!("tcp.port=={p},kafka")])
        .collect()
}

fn tshark_read(pcap: &std::path::Path, ports: &[u16], extra: &[&str]) -> String {
    let output = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(decode_as(ports))
        .args(extra)
        .stderr(Stdio::null())
        .output()
        .expect("tshark runs");
    assert!(output.status.success(), "tshark -r {extra:?} failed");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn wiresharks_kafka_dissector_decodes_every_frame_of_a_quorum_run() {
    let mut quorum = Quorum::format(3);
    let ports: Vec<u16> = quorum.nodes.iter().map(|n| n.port).collect();
    let pcap = quorum.dir.path().join("run.pcapng");
    let capture_log = quorum.dir.path().join("tshark.err");
    let filter = ports
        .iter()
        .map(|p| format!("tcp port {p}"))
        .collect::<Vec<_>>()
        .join(" or ");
    let mut capture = Command::new("tshark")
        .args(["-i", "lo", "-f", &filter, "-w"])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&capture_log).unwrap())
        .spawn()
        .expect("tshark is installed (scripts/test-all.sh installs the Debian package)");
    eventually(Duration::from_secs(20), "tshark to start capturing", || {
        let text = std::fs::read_to_string(&capture_log).unwrap_or_default();
        assert!(
            !text.contains("tshark: "),
            "tshark could not capture: {text}"
        );
        text.contains("Capturing on").then_some(())
    });

    // Started after the capture: the elections' Vote and BeginQuorumEpoch are in it.
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(15));
    // A topic of its own: clients cannot produce to `__cluster_metadata`. Its creation puts
    // CreateTopics and the new partition's election in the capture too.
    quorum.create_topic(TOPIC, 1, &[]);
    let (leader, _) = quorum.wait_for_leader_of(TOPIC, Duration::from_secs(15));
    const RECORDS: usize = 30;
    quorum.produce(TOPIC, leader, RECORDS, "capture");
    for node in &quorum.nodes {
        let address = quorum.address(node.id);
        eventually(
            Duration::from_secs(10),
            "every voter to serve the committed records to a consumer",
            || {
                let mut client = Client::connect(&address, Duration::from_secs(1)).ok()?;
                let data = client.fetch(TOPIC, 0, 0, 0, 1 << 20).ok()?;
                client.describe_quorum().ok()?;
                (data.error_code == 0 && data.high_watermark >= RECORDS as i64).then_some(())
            },
        );
    }

    // The same APIs again at the newest versions this Wireshark's dissector knows (Debian 12
    // ships 4.0: Produce v0-8, Fetch v0-11, no KRaft APIs), so that it reads every field of
    // ours, records included, request and response.
    let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(2)).unwrap();
    let api_versions = Request::ApiVersions(ApiVersionsRequest {
        client_software_name: "ringlog-test".into(),
        client_software_version: "1".into(),
    });
    assert!(matches!(
        client.request(&api_versions, 3).unwrap(),
        Response::ApiVersions(r) if r.error_code == 0
    ));
    let metadata = Request::Metadata(MetadataRequest::default());
    assert!(matches!(
        client.request(&metadata, 9).unwrap(),
        Response::Metadata(_)
    ));
    let produce = Request::Produce(produce_request::ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![produce_request::TopicProduceData {
            name: TOPIC.into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: 0,
                records: Some(quorum::batch_of("old-version")),
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    let Response::Produce(answer) = client.request(&produce, 8).unwrap() else {
        panic!("not a Produce answer");
    };
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    let fetch = Request::Fetch(fetch_request::FetchRequest {
        replica_id: -1,
        max_bytes: 1 << 20,
        min_bytes: 1,
        topics: vec![fetch_request::FetchTopic {
            topic: TOPIC.into(),
            partitions: vec![fetch_request::FetchPartition {
                partition: 0,
                fetch_offset: 0,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    assert!(matches!(
        client.request(&fetch, 11).unwrap(),
        Response::Fetch(r) if r.responses[0].partitions[0].error_code == 0
    ));
    drop(client);

    // The capture lags the traffic (libpcap hands packets over in blocks): wait until the last
    // request above is in the file before stopping it.
    eventually(
        Duration::from_secs(30),
        "the capture file to hold the last Fetch",
        || {
            let output = Command::new("tshark")
                .arg("-r")
                .arg(&pcap)
                .args(decode_as(&ports))
                .args(["-Y", "kafka.request_key == 1 && kafka.api_version == 11"])
                .stderr(Stdio::null())
                .output()
                .ok()?;
            (!output.stdout.is_empty()).then_some(())
        },
    );

    // SIGINT: tshark finishes the file and exits.
    unsafe { libc::kill(capture.id() as i32, libc::SIGINT) };
    let status = eventually(Duration::from_secs(20), "tshark to stop", || {
        capture.try_wait().unwrap()
    });
    assert!(status.success(), "tshark capture exited with {status}");

    // Every frame decodes: no malformed mark, no expert-info error, except on frames of an API
    // or version the dissector says it does not know (its own expert message), which it
    // cannot walk field by field.
    let flagged = tshark_read(
        &pcap,
        &ports,
        &[
            "-Y",
            "_ws.malformed || _ws.expert.severity >= error",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "frame.number",
            "-e",
            "_ws.col.Info",
            "-e",
            "_ws.expert.message",
        ],
    );
    let mut unknown_to_dissector = 0;
    for line in flagged.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.splitn(3, '|').collect();
        let messages = fields.get(2).copied().unwrap_or_default();
        if messages.contains("Unsupported") || messages.contains("API key") {
            unknown_to_dissector += 1;
            continue;
        }
        let detail = tshark_read(
            &pcap,
            &ports,
            &["-Y", &format!("frame.number == {}", fields[0]), "-V"],
        );
        panic!("tshark flags a frame it can decode: {line}\n{detail}");
    }

    // The dissector saw Kafka: the requests of every kind we sent, and it decoded the ones it
    // knows completely, request and response.
    let infos = tshark_read(
        &pcap,
        &ports,
        &[
            "-Y",
            "kafka && !_ws.malformed && !(_ws.expert.severity >= error)",
            "-T",
            "fields",
            "-e",
            "_ws.col.Info",
        ],
    );
    for expected in [
        "ApiVersions v3 Request",
        "ApiVersions v3 Response",
        "Metadata v9 Request",
        "Metadata v9 Response",
        "Produce v8 Request",
        "Produce v8 Response",
        "Fetch v11 Request",
        "Fetch v11 Response",
    ] {
        assert!(
            infos.contains(expected),
            "no clean \"{expected}\" frame; clean Kafka frames:\n{infos}"
        );
    }
    let keys = tshark_read(
        &pcap,
        &ports,
        &["-Y", "kafka", "-T", "fields", "-e", "kafka.request_key"],
    );
    let seen: std::collections::BTreeSet<u32> = keys
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|k| k.parse().ok())
        .collect();
    for (key, name) in [
        (0, "Produce"),
        (1, "Fetch"),
        (52, "Vote"),
        (53, "BeginQuorumEpoch"),
        (55, "DescribeQuorum"),
    ] {
        assert!(
            seen.contains(&key),
            "no {name} request seen; API keys seen: {seen:?}"
        );
    }
    eprintln!(
        "tshark: {} Kafka frames without a mark; {unknown_to_dissector} frames of APIs or versions the \
         dissector does not know",
        infos.lines().count()
    );
}
