//! SASL/SCRAM and the SCRAM credential APIs on a three-voter quorum of real `ringlog serve`
//! processes whose client listeners are SASL_PLAINTEXT (SCRAM-SHA-256 and SCRAM-SHA-512) and
//! whose controller listeners are PLAINTEXT.
//!
//! - The first user is created over a controller listener (no SASL there) with ringlog's own
//!   client; the errors confluent-kafka cannot send (an empty user name, describing a user
//!   twice) are checked the same way.
//! - On a SASL listener, a request other than ApiVersions and the exchange's closes the
//!   connection unanswered; SaslHandshake with a mechanism that is not enabled answers
//!   UNSUPPORTED_SASL_MECHANISM with the enabled list, then closes.
//! - confluent-kafka, authenticated as that user, alters and describes credentials (every error
//!   Kafka's controller answers), and users produce and consume with SCRAM-SHA-256 and -512;
//!   wrong passwords and unknown users fail; every node restarts and the credentials are still
//!   there; a deleted credential no longer logs in (tests/clients/scram.py).

use std::time::Duration;

use bytes::Bytes;
use ringlog_net::client::Client;
use ringlog_net::protocol::{
    ErrorCode, Request, Response, SaslHandshakeRequest,
    alter_user_scram_credentials_request as alter_req,
    describe_user_scram_credentials_request as describe_req, metadata_request,
};
use ringlog_net::sasl::{ScramMechanism, hi};

mod quorum;
use quorum::{Quorum, eventually, run_client_script, serial};

/// Upserts `user`'s credential through the controller listeners (any node forwards to the
/// controller); returns each result's error code.
fn alter(
    quorum: &Quorum,
    request: &alter_req::AlterUserScramCredentialsRequest,
) -> Vec<(String, i16)> {
    eventually(
        Duration::from_secs(30),
        "an AlterUserScramCredentials answer",
        || {
            quorum.nodes.iter().find_map(|node| {
                let mut client =
                    Client::connect(&quorum.controller_address(node.id), Duration::from_secs(2))
                        .ok()?;
                match client
                    .request(&Request::AlterUserScramCredentials(request.clone()), 0)
                    .ok()?
                {
                    Response::AlterUserScramCredentials(r) => {
                        let results: Vec<(String, i16)> = r
                            .results
                            .into_iter()
                            .map(|r| (r.user, r.error_code))
                            .collect();
                        // NOT_CONTROLLER: a leader still catching up; ask again.
                        (!results
                            .iter()
                            .any(|(_, code)| *code == ErrorCode::NotController.code()))
                        .then_some(results)
                    }
                    other => panic!("answered {other:?}"),
                }
            })
        },
    )
}

fn upsertion(
    user: &str,
    mechanism: i8,
    iterations: i32,
    password: &[u8],
) -> alter_req::ScramCredentialUpsertion {
    let salt = b"0123456789abcdef";
    let salted = match ScramMechanism::from_type(mechanism) {
        Some(m) => hi(m, password, salt, iterations.max(1) as u32),
        None => vec![0; 32],
    };
    alter_req::ScramCredentialUpsertion {
        name: user.to_string(),
        mechanism,
        iterations,
        salt: Bytes::from_static(salt),
        salted_password: Bytes::from(salted),
    }
}

fn describe(quorum: &Quorum, users: &[&str]) -> Vec<(String, i16)> {
    let mut client =
        Client::connect(&quorum.controller_address(1), Duration::from_secs(2)).unwrap();
    let request = describe_req::DescribeUserScramCredentialsRequest {
        users: Some(
            users
                .iter()
                .map(|u| describe_req::UserName {
                    name: u.to_string(),
                })
                .collect(),
        ),
    };
    match client
        .request(&Request::DescribeUserScramCredentials(request), 0)
        .unwrap()
    {
        Response::DescribeUserScramCredentials(r) => r
            .results
            .into_iter()
            .map(|r| (r.user, r.error_code))
            .collect(),
        other => panic!("answered {other:?}"),
    }
}

/// Whether the node closes `client`'s connection instead of answering `request`.
fn closes_connection(client: &mut Client, request: Request, version: i16) -> bool {
    client.request(&request, version).is_err()
}

#[test]
fn scram_credentials_and_sasl_authentication_work_with_confluent_kafka() {
    let _serial = serial();
    let mut quorum = Quorum::format_with_client_listener_named(
        3,
        "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
    );
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));

    // The first user, over a controller listener.
    let created = alter(
        &quorum,
        &alter_req::AlterUserScramCredentialsRequest {
            deletions: Vec::new(),
            upsertions: vec![upsertion("admin", 2, 4096, b"admin-secret")],
        },
    );
    assert_eq!(created, vec![("admin".to_string(), 0)]);

    // ScramControlManager's checks that confluent-kafka refuses to send.
    let refused = alter(
        &quorum,
        &alter_req::AlterUserScramCredentialsRequest {
            deletions: Vec::new(),
            upsertions: vec![
                upsertion("", 1, 4096, b"x"),
                upsertion("erin", 3, 4096, b"x"),
            ],
        },
    );
    assert_eq!(
        refused,
        vec![
            (String::new(), ErrorCode::UnacceptableCredential.code()),
            (
                "erin".to_string(),
                ErrorCode::UnsupportedSaslMechanism.code()
            ),
        ]
    );
    let described = eventually(Duration::from_secs(10), "node 1 to apply the user", || {
        let d = describe(&quorum, &["admin", "", "x", "x"]);
        (d[0].1 == 0).then_some(d)
    });
    assert_eq!(
        described,
        vec![
            ("admin".to_string(), 0),
            (String::new(), ErrorCode::ResourceNotFound.code()),
            ("x".to_string(), ErrorCode::DuplicateResource.code()),
        ]
    );

    // A SASL listener before authentication: ApiVersions is answered, anything else closes.
    let sasl_address = quorum.address(1);
    let mut client = Client::connect(&sasl_address, Duration::from_secs(2)).unwrap();
    assert!(closes_connection(
        &mut client,
        Request::Metadata(metadata_request::MetadataRequest {
            topics: Some(Vec::new()),
            ..Default::default()
        }),
        12
    ));
    let mut client = Client::connect(&sasl_address, Duration::from_secs(2)).unwrap();
    match client
        .request(
            &Request::SaslHandshake(SaslHandshakeRequest {
                mechanism: "PLAIN".to_string(),
            }),
            1,
        )
        .unwrap()
    {
        Response::SaslHandshake(r) => {
            assert_eq!(r.error_code, ErrorCode::UnsupportedSaslMechanism.code());
            assert_eq!(r.mechanisms, vec!["SCRAM-SHA-256", "SCRAM-SHA-512"]);
        }
        other => panic!("answered {other:?}"),
    }
    assert!(closes_connection(
        &mut client,
        Request::SaslHandshake(SaslHandshakeRequest {
            mechanism: "SCRAM-SHA-256".to_string(),
        }),
        1
    ));

    let bootstrap = quorum.bootstrap();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "scram.py",
        "admin",
        Duration::from_secs(240),
        |_, _| None,
    );

    // Every node restarts: the credentials come back from the metadata log and snapshot.
    quorum.kill_all();
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    run_client_script(
        &mut quorum,
        &bootstrap,
        "scram.py",
        "after-restart",
        Duration::from_secs(240),
        |_, _| None,
    );
}
