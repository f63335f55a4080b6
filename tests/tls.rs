//! Issue 17: TLS (rustls) on the listeners of real `ringlog serve` processes. Certificates are
//! made here with rcgen: a CA, one node certificate naming 127.0.0.1 signed by it (for every
//! node, as server and as client certificate), and a second CA nobody trusts.
//!
//! - The quorum over TLS: the controller listeners speak SSL and require client certificates;
//!   peers connect with TLS, elect, commit; garbage and plaintext on a TLS port close only
//!   that connection; a replica away while the others restarted catches up from their files
//!   (file regions read and encrypted).
//! - confluent-kafka with security.protocol=SSL and the CA produces and consumes on an SSL
//!   client listener; with another CA its handshake fails (tests/clients/tls_roundtrip.py).
//!
//! One quorum at a time (`quorum::serial`); waits poll a condition up to a deadline.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ringlog_net::client::Client;

mod quorum;
use quorum::{Quorum, eventually, read_partition_values, run_client_script, serial};

const TOPIC: &str = "encrypted";

/// PEM files in `dir`: `ca.pem` (the CA), `node.pem` (key and certificate chain, as
/// `ssl.keystore.location` takes them) and `other-ca.pem` (a CA that signed nothing here).
struct Certificates {
    ca: PathBuf,
    keystore: PathBuf,
    other_ca: PathBuf,
}

fn make_certificates(dir: &Path) -> Certificates {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa,
        KeyPair, KeyUsagePurpose,
    };
    let ca = |name: &str| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
    };
    let cluster_ca = ca("ringlog test CA");
    let other_ca = ca("a CA nobody trusts");
    let node_key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "ringlog node");
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let node = params.signed_by(&node_key, &cluster_ca).unwrap();
    let certificates = Certificates {
        ca: dir.join("ca.pem"),
        keystore: dir.join("node.pem"),
        other_ca: dir.join("other-ca.pem"),
    };
    std::fs::write(&certificates.ca, cluster_ca.pem()).unwrap();
    std::fs::write(&certificates.other_ca, other_ca.pem()).unwrap();
    std::fs::write(
        &certificates.keystore,
        format!("{}{}", node_key.serialize_pem(), node.pem()),
    )
    .unwrap();
    certificates
}

/// The `ssl.*` lines every node gets.
fn ssl_keys(certificates: &Certificates) -> String {
    format!(
        "ssl.keystore.location={}\nssl.truststore.location={}\nssl.client.auth=required\n",
        certificates.keystore.display(),
        certificates.ca.display()
    )
}

/// Sends `bytes` to `address` and waits for the node to close the connection (end of stream
/// or reset); true if it did within the deadline.
fn closed_after(address: &str, bytes: &[u8]) -> bool {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let _ = stream.write_all(bytes);
    let mut sink = [0u8; 4096];
    loop {
        match stream.read(&mut sink) {
            Ok(0) => return true,
            // A TLS alert may come first; keep reading until the close.
            Ok(_) => continue,
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// Garbage and a plaintext Kafka request on a TLS port: each connection is closed, the node
/// goes on.
fn hostile_bytes_close_only_their_connection(address: &str) {
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    assert!(closed_after(address, &garbage), "garbage on {address}");
    // A plaintext ApiVersions v0 (size, api key 18, version 0, correlation id 1, no client id).
    let plaintext = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    assert!(closed_after(address, &plaintext), "plaintext on {address}");
}

/// KIP-595's quorum over TLS between real processes: the controller listeners speak SSL and
/// require a client certificate from the CA, so the peers' lanes must connect with TLS and
/// present their certificate for any vote or fetch to arrive. They elect a leader, commit
/// acks=all records that every replica serves, and survive garbage on their TLS port.
#[test]
fn the_quorum_commits_over_tls_between_real_processes() {
    let _serial = serial();
    let certificate_dir = tempfile::tempdir().unwrap();
    let certificates = make_certificates(certificate_dir.path());
    let extra = format!(
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL\n{}",
        ssl_keys(&certificates)
    );
    let mut quorum = Quorum::format_with_controller_listeners(3, &extra);
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    quorum.create_topic(TOPIC, 1, &[]);
    let (leader, _) = quorum.wait_for_leader_of(TOPIC, Duration::from_secs(30));
    quorum.produce(TOPIC, leader, 20, "before");

    for id in 1..=3 {
        hostile_bytes_close_only_their_connection(&quorum.controller_address(id));
    }
    // A plaintext client cannot talk to a TLS listener.
    assert!(
        Client::connect(&quorum.controller_address(leader), Duration::from_secs(2))
            .and_then(|mut client| client.describe_quorum())
            .is_err(),
        "a plaintext DescribeQuorum on the TLS controller listener was answered"
    );
    assert_eq!(quorum.exited(), Vec::new(), "a node exited");

    let (leader, _) = quorum.wait_for_leader_of(TOPIC, Duration::from_secs(30));
    quorum.produce(TOPIC, leader, 20, "after");
    for id in 1..=3 {
        let mut client = Client::connect(&quorum.address(id), Duration::from_secs(2)).unwrap();
        eventually(
            Duration::from_secs(15),
            "every replica serves the 40 records",
            || {
                let values = read_partition_values(&mut client, TOPIC).ok()?;
                (values.len() == 40).then_some(())
            },
        );
    }

    // A replica that was away catches up over TLS from nodes restarted meanwhile, which hold
    // no record in memory: the fetch answers carry file regions, read through the ring and
    // encrypted (the TLS writer's file path). 1,500 one-record batches are ~40 blocks.
    let away = (1..=3).find(|id| *id != leader).unwrap();
    quorum.kill(away);
    quorum.produce(TOPIC, leader, 1_500, "while-away");
    let others: Vec<i32> = (1..=3).filter(|id| *id != away).collect();
    for &id in &others {
        quorum.kill(id);
    }
    for &id in &others {
        quorum.start_node(id);
    }
    quorum.wait_for_leader_of(TOPIC, Duration::from_secs(30));
    quorum.start_node(away);
    let values = eventually(
        Duration::from_secs(30),
        "the replica that was away serves all 1,540 records",
        || {
            let mut client =
                Client::connect(&quorum.address(away), Duration::from_millis(500)).ok()?;
            let values = read_partition_values(&mut client, TOPIC).ok()?;
            (values.len() == 1_540).then_some(values)
        },
    );
    for (i, value) in values[40..].iter().enumerate() {
        assert_eq!(value, format!("while-away-{i}").as_bytes());
    }
    assert_eq!(quorum.exited(), Vec::new(), "a node exited");
}

/// confluent-kafka (librdkafka) with security.protocol=SSL and the cluster's CA creates a
/// topic, produces acks=all and consumes every record on the SSL client listeners; one that
/// trusts another CA fails its handshake. The nodes survive garbage on the SSL port.
#[test]
fn confluent_kafka_produces_and_consumes_over_tls() {
    let _serial = serial();
    let certificate_dir = tempfile::tempdir().unwrap();
    let certificates = make_certificates(certificate_dir.path());
    // Kafka's default map makes the listener named SSL speak SSL and the controller listener
    // (unmapped) PLAINTEXT. Clients bring no certificate.
    let extra = ssl_keys(&certificates).replace("ssl.client.auth=required", "ssl.client.auth=none");
    let mut quorum = Quorum::format_with_client_listener_named(3, "SSL", &extra);
    quorum.start_all();
    // The test's own client speaks plaintext: it watches the quorum on the controller
    // listeners, which serve DescribeQuorum too.
    eventually(Duration::from_secs(30), "a metadata leader", || {
        let view = Client::connect(&quorum.controller_address(1), Duration::from_millis(500))
            .ok()?
            .describe_quorum()
            .ok()?;
        (view.partition.leader_id >= 0).then_some(())
    });
    let bootstrap = (1..=3)
        .map(|id| quorum.address(id))
        .collect::<Vec<_>>()
        .join(",");
    let cas = format!(
        "{},{}",
        certificates.ca.display(),
        certificates.other_ca.display()
    );
    run_client_script(
        &mut quorum,
        &bootstrap,
        "tls_roundtrip.py",
        &cas,
        Duration::from_secs(180),
        |_, _| None,
    );
    for id in 1..=3 {
        hostile_bytes_close_only_their_connection(&quorum.address(id));
    }
    assert_eq!(quorum.exited(), Vec::new(), "a node exited");
}
