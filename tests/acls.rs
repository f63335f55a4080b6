//! ACLs and the authorizer, end to end with confluent-kafka against real `ringlog serve`
//! processes (tests/clients/acls.py): bindings created, described and deleted through the
//! metadata log and still there after every node restarted; StandardAuthorizer's rules
//! enforced on Produce (a DENY wins, `allow.everyone.if.no.acl.found=false` refuses a topic
//! without ACLs, a super user passes); and without an authorizer the ACL APIs answer
//! SECURITY_DISABLED while the authorized operations are all of a resource type's; on a TLS
//! listener a client certificate's subject DN is the principal the ACLs name.

use std::path::Path;
use std::time::Duration;

use ringlog_net::client::Client;

mod quorum;
use quorum::{Quorum, eventually, run_client_script, serial};

const STANDARD_AUTHORIZER: &str =
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// Sets `key=value` in every node's properties file, replacing the key's line if any.
fn set_property(quorum: &Quorum, key: &str, value: &str) {
    for node in &quorum.nodes {
        let path = quorum
            .dir
            .path()
            .join(format!("node-{}.properties", node.id));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.split_once('=').is_none_or(|(k, _)| k.trim() != key))
            .map(str::to_string)
            .collect();
        lines.push(format!("{key}={value}"));
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    }
}

fn restart_all(quorum: &mut Quorum) {
    quorum.kill_all();
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
}

#[test]
fn acls_round_trip_survive_restarts_and_are_enforced_on_produce() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(
        3,
        &format!("{STANDARD_AUTHORIZER}\nallow.everyone.if.no.acl.found=true"),
    );
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    let bootstrap = quorum.bootstrap();
    let mut phases = Vec::new();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "acls.py",
        "authorizer",
        Duration::from_secs(400),
        |quorum, line| {
            match line {
                // The bindings live in the metadata log: a restart of every node keeps them.
                "RESTART" => restart_all(quorum),
                // A topic without any ACL is refused once everyone is no longer allowed.
                "STRICT" => {
                    set_property(quorum, "allow.everyone.if.no.acl.found", "false");
                    restart_all(quorum);
                }
                // A super user passes whatever the ACLs say.
                "SUPER" => {
                    set_property(quorum, "super.users", "User:ANONYMOUS");
                    restart_all(quorum);
                }
                _ => return None,
            }
            phases.push(line.to_string());
            Some("done\n".into())
        },
    );
    assert_eq!(phases, ["RESTART", "STRICT", "SUPER"]);
}

#[test]
fn without_an_authorizer_acl_apis_are_disabled_and_every_operation_is_authorized() {
    let _serial = serial();
    let mut quorum = Quorum::start(1);
    quorum.wait_for_leader(Duration::from_secs(20));
    let bootstrap = quorum.bootstrap();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "acls.py",
        "disabled",
        Duration::from_secs(240),
        |_, _| None,
    );
}

/// PEM files in `dir`: a CA, the nodes' key and certificate (for 127.0.0.1), and two clients'
/// certificates and keys, `O=ringlog, CN=admin` and `O=ringlog, CN=alice` (Kafka prints them
/// last RDN first: `CN=admin,O=ringlog`). Returns the CA's and the keystore's paths.
fn make_certificates(dir: &Path) -> (String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
        ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    };
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "ringlog ACL test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let signed = |names: Vec<String>, organization: &str, common_name: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        // A fresh name: the default one starts with a CommonName, which a push would replace
        // in first place (the DER order would then be CN, O).
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, organization);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let certificate = params.signed_by(&key, &ca).unwrap();
        (certificate.pem(), key.serialize_pem())
    };
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let ca_path = write("ca.pem", &ca.pem());
    let (node, node_key) = signed(
        vec!["127.0.0.1".to_string(), "localhost".to_string()],
        "ringlog",
        "node",
    );
    let keystore = write("node.pem", &format!("{node_key}{node}"));
    for user in ["admin", "alice"] {
        let (certificate, key) = signed(Vec::new(), "ringlog", user);
        write(&format!("{user}.pem"), &certificate);
        write(&format!("{user}.key"), &key);
    }
    (ca_path, keystore)
}

/// A client certificate's subject is its principal: `User:CN=alice,O=ringlog` is refused a
/// topic until an ACL names exactly that principal, and `User:CN=admin,O=ringlog` in
/// `super.users` may do anything (tests/clients/acls.py `tls`).
#[test]
fn a_client_certificate_s_subject_dn_is_the_principal_acls_name() {
    let _serial = serial();
    let certificate_dir = tempfile::tempdir().unwrap();
    let (ca, keystore) = make_certificates(certificate_dir.path());
    let extra = format!(
        "ssl.keystore.location={keystore}\nssl.truststore.location={ca}\n\
         ssl.client.auth=required\n{STANDARD_AUTHORIZER}\n\
         allow.everyone.if.no.acl.found=false\nsuper.users=User:CN=admin,O=ringlog"
    );
    // The SSL client listener requires certificates; the controller listener (PLAINTEXT) is
    // not subject to ACLs.
    let mut quorum = Quorum::format_with_client_listener_named(1, "SSL", &extra);
    quorum.start_all();
    eventually(Duration::from_secs(30), "a metadata leader", || {
        let view = Client::connect(&quorum.controller_address(1), Duration::from_millis(500))
            .ok()?
            .describe_quorum()
            .ok()?;
        (view.partition.leader_id >= 0).then_some(())
    });
    let bootstrap = quorum.address(1);
    let folder = certificate_dir.path().display().to_string();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "acls.py",
        &format!("tls:{folder}"),
        Duration::from_secs(180),
        |_, _| None,
    );
}

/// CreateAcls and DeleteAcls sent to a node that is not the controller are forwarded to it and
/// answered once applied; every node then describes the same bindings. CreateAcls refuses per
/// binding, with INVALID_REQUEST, what Kafka's controller refuses (sent raw: Kafka's clients
/// check these before sending).
#[test]
fn acl_writes_through_a_follower_reach_every_node_and_invalid_bindings_are_refused() {
    use ringlog_net::protocol::{
        Request, Response, create_acls_request as ca, delete_acls_request as da,
        describe_acls_request as dsa,
    };
    let _serial = serial();
    let mut quorum = Quorum::format_with(
        3,
        &format!("{STANDARD_AUTHORIZER}\nallow.everyone.if.no.acl.found=true"),
    );
    quorum.start_all();
    let (leader, _) = quorum.wait_for_leader(Duration::from_secs(20));
    let follower = if leader == 1 { 2 } else { 1 };
    let creation = |pattern_type: i8, principal: &str| ca::AclCreation {
        resource_type: 2,
        resource_name: "orders".into(),
        resource_pattern_type: pattern_type,
        principal: principal.into(),
        host: "*".into(),
        operation: 3,
        permission_type: 3,
    };
    let request = Request::CreateAcls(ca::CreateAclsRequest {
        creations: vec![
            creation(3, "User:alice"),
            // MATCH is a filter's pattern type, not a binding's.
            creation(2, "User:bob"),
            // A principal is Type:name.
            creation(3, "carol"),
        ],
    });
    let answer = eventually(
        Duration::from_secs(30),
        "CreateAcls through a follower",
        || {
            let mut client =
                Client::connect(&quorum.address(follower), Duration::from_millis(500)).ok()?;
            match client.request(&request, 3) {
                Ok(Response::CreateAcls(r)) if r.results[0].error_code == 0 => Some(r),
                _ => None,
            }
        },
    );
    let codes: Vec<i16> = answer.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [0, 42, 42], "{answer:?}");

    let describe = Request::DescribeAcls(dsa::DescribeAclsRequest {
        resource_type_filter: 1,
        pattern_type_filter: 1,
        operation: 1,
        permission_type: 1,
        ..Default::default()
    });
    let principals_at = |id: i32| -> Option<Vec<String>> {
        let mut client = Client::connect(&quorum.address(id), Duration::from_millis(500)).ok()?;
        let Ok(Response::DescribeAcls(r)) = client.request(&describe, 3) else {
            return None;
        };
        Some(
            r.resources
                .iter()
                .flat_map(|res| res.acls.iter().map(|a| a.principal.clone()))
                .collect(),
        )
    };
    for id in 1..=3 {
        eventually(Duration::from_secs(30), "the binding on every node", || {
            (principals_at(id)? == ["User:alice"]).then_some(())
        });
    }

    let delete = Request::DeleteAcls(da::DeleteAclsRequest {
        filters: vec![da::DeleteAclsFilter {
            resource_type_filter: 2,
            resource_name_filter: Some("orders".into()),
            pattern_type_filter: 3,
            principal_filter: None,
            host_filter: None,
            operation: 1,
            permission_type: 1,
        }],
    });
    let mut client = Client::connect(&quorum.address(follower), Duration::from_secs(5)).unwrap();
    let Ok(Response::DeleteAcls(deleted)) = client.request(&delete, 3) else {
        panic!("DeleteAcls through the follower answered");
    };
    let matched: Vec<&str> = deleted.filter_results[0]
        .matching_acls
        .iter()
        .map(|a| a.principal.as_str())
        .collect();
    assert_eq!(matched, ["User:alice"], "{deleted:?}");
    for id in 1..=3 {
        eventually(
            Duration::from_secs(30),
            "the binding gone on every node",
            || principals_at(id)?.is_empty().then_some(()),
        );
    }
}

/// A node restarted while the rest of the quorum is stopped holds only the ACLs of its own
/// log, which miss the DENY created while it was down. With an authorizer it serves no client
/// request before its ACL image is loaded (the connection is closed unanswered, node/acls.rs
/// `acls_loaded`), so it never lets the DENY be bypassed, though it leads a partition on its own;
/// once the quorum is back its image loads and the DENY is enforced. Before the latch the
/// produce below was written.
#[test]
fn a_restarted_node_authorizes_nothing_before_its_acls_are_loaded() {
    use ringlog_net::protocol::{
        Request, Response, create_acls_request as ca, create_topics_request as ct,
    };
    let _serial = serial();
    let mut quorum = Quorum::format_with(
        3,
        &format!("{STANDARD_AUTHORIZER}\nallow.everyone.if.no.acl.found=true"),
    );
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    // `guarded`'s only replica is node 3: it leads it alone whatever the others do.
    let create = Request::CreateTopics(ct::CreateTopicsRequest {
        topics: vec![ct::CreatableTopic {
            name: "guarded".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![ct::CreatableReplicaAssignment {
                partition_index: 0,
                broker_ids: vec![3],
            }],
            ..Default::default()
        }],
        timeout_ms: 5000,
        validate_only: false,
    });
    eventually(Duration::from_secs(30), "CreateTopics guarded", || {
        (1..=3).find_map(|id| {
            let mut client = Client::connect(&quorum.address(id), Duration::from_secs(2)).ok()?;
            let Ok(Response::CreateTopics(r)) = client.request(&create, 7) else {
                return None;
            };
            (r.topics[0].error_code == 0).then_some(())
        })
    });
    let produce = |client: &mut Client| -> Option<i16> {
        let answer = client
            .produce("guarded", 0, quorum::batch_of("v"), -1, 5_000)
            .ok()??;
        Some(answer.error_code)
    };
    eventually(Duration::from_secs(30), "a first record at node 3", || {
        let mut client = Client::connect(&quorum.address(3), Duration::from_secs(2)).ok()?;
        (produce(&mut client)? == 0).then_some(())
    });

    // Node 3 down, a DENY of every write to `guarded` created and applied by nodes 1 and 2.
    quorum.kill(3);
    let deny = Request::CreateAcls(ca::CreateAclsRequest {
        creations: vec![ca::AclCreation {
            resource_type: 2,
            resource_name: "guarded".into(),
            resource_pattern_type: 3,
            principal: "User:*".into(),
            host: "*".into(),
            operation: 4,
            permission_type: 2,
        }],
    });
    eventually(Duration::from_secs(30), "CreateAcls DENY", || {
        (1..=2).find_map(|id| {
            let mut client = Client::connect(&quorum.address(id), Duration::from_secs(2)).ok()?;
            match client.request(&deny, 3) {
                Ok(Response::CreateAcls(r)) if r.results[0].error_code == 0 => Some(()),
                _ => None,
            }
        })
    });
    // CreateAcls is answered once the controller applied the binding: committed on nodes 1
    // and 2, the majority node 3 was not part of.

    // Nodes 1 and 2 stopped, node 3 back alone: it cannot learn the DENY.
    let stopped: Vec<i32> = [1, 2].iter().map(|id| quorum.pid(*id) as i32).collect();
    for pid in &stopped {
        // SAFETY: signals to child processes this test started.
        unsafe { libc::kill(*pid, libc::SIGSTOP) };
    }
    quorum.start_node(3);
    // With nodes 1 and 2 stopped node 3 can never load its ACLs, so one produce once it
    // accepts connections decides: any answer at all (before the latch it answered, and
    // took the record) fails; now the connection is closed unanswered.
    let mut client = eventually(
        Duration::from_secs(30),
        "node 3 accepting connections",
        || Client::connect(&quorum.address(3), Duration::from_millis(500)).ok(),
    );
    let answer = produce(&mut client);
    for pid in &stopped {
        // SAFETY: signals to child processes this test started.
        unsafe { libc::kill(*pid, libc::SIGCONT) };
    }
    assert_eq!(
        answer, None,
        "node 3 answered a produce before its ACLs were loaded"
    );
    // The quorum back: node 3 loads its ACLs and the DENY is enforced there.
    let code = eventually(Duration::from_secs(30), "node 3 to answer", || {
        let mut client = Client::connect(&quorum.address(3), Duration::from_secs(2)).ok()?;
        produce(&mut client)
    });
    assert_eq!(code, 29, "TOPIC_AUTHORIZATION_FAILED");
}
