use super::*;

/// RFC 7677, section 3: user "user", password "pencil", SCRAM-SHA-256.
const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc7677_credential() -> ScramCredential {
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let salted = hi(ScramMechanism::Sha256, b"pencil", &salt, 4096);
    ScramCredential::from_salted_password(ScramMechanism::Sha256, &salt, &salted, 4096)
}

fn lookup_user(name: &str) -> Option<ScramCredential> {
    (name == "user").then(rfc7677_credential)
}

#[test]
fn rfc7677_test_vector_server_steps() {
    let (server, server_first) = ScramServer::client_first(
        ScramMechanism::Sha256,
        CLIENT_FIRST.as_bytes(),
        SERVER_NONCE,
        lookup_user,
    )
    .unwrap();
    assert_eq!(std::str::from_utf8(&server_first).unwrap(), SERVER_FIRST);
    let (user, server_final) = server.client_final(CLIENT_FINAL.as_bytes()).unwrap();
    assert_eq!(user, "user");
    assert_eq!(std::str::from_utf8(&server_final).unwrap(), SERVER_FINAL);
}

#[test]
fn rfc7677_a_wrong_proof_fails() {
    let (server, _) = ScramServer::client_first(
        ScramMechanism::Sha256,
        CLIENT_FIRST.as_bytes(),
        SERVER_NONCE,
        lookup_user,
    )
    .unwrap();
    // The RFC's proof with its first byte changed ('d' -> 'e' in the base64).
    let wrong = CLIENT_FINAL.replace("p=dHzb", "p=eHzb");
    assert_eq!(
        server.client_final(wrong.as_bytes()).unwrap_err(),
        ScramError::InvalidProof
    );
}

#[test]
fn rfc7677_credential_keeps_no_password_material() {
    // The credential Kafka would store for the RFC's user: StoredKey and ServerKey, never the
    // salted password.
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let salted = hi(ScramMechanism::Sha256, b"pencil", &salt, 4096);
    let credential = rfc7677_credential();
    assert_ne!(credential.stored_key.as_ref(), salted.as_slice());
    assert_ne!(credential.server_key.as_ref(), salted.as_slice());
    assert_eq!(credential.stored_key.len(), 32);
    assert_eq!(credential.server_key.len(), 32);
}

#[test]
fn an_unknown_user_fails_at_the_first_message() {
    let first = "n,,n=nobody,r=abc";
    let error = ScramServer::client_first(
        ScramMechanism::Sha256,
        first.as_bytes(),
        SERVER_NONCE,
        lookup_user,
    )
    .unwrap_err();
    assert_eq!(error, ScramError::UnknownUser);
}

#[test]
fn the_final_nonce_and_channel_binding_must_be_the_exchange_s() {
    let start = || {
        ScramServer::client_first(
            ScramMechanism::Sha256,
            CLIENT_FIRST.as_bytes(),
            SERVER_NONCE,
            lookup_user,
        )
        .unwrap()
        .0
    };
    let other_nonce = CLIENT_FINAL.replace("$k0,p=", "$k1,p=");
    assert_eq!(
        start().client_final(other_nonce.as_bytes()).unwrap_err(),
        ScramError::NonceMismatch
    );
    // "eSws" is base64 of "y,,": not the gs2 header the client sent.
    let other_binding = CLIENT_FINAL.replace("c=biws", "c=eSws");
    assert_eq!(
        start().client_final(other_binding.as_bytes()).unwrap_err(),
        ScramError::ChannelBindingMismatch
    );
}

#[test]
fn malformed_first_messages_are_refused() {
    for message in [
        "",
        "y,,n=user,r=abc",
        "p=tls-unique,,n=user,r=abc",
        "n,,r=abc",
        "n,,n=user",
        "n,,n=us=er,r=abc",
        "n,,n=user,r=a,b",
        "n,,n=user,r=a,m=mandatory",
    ] {
        assert!(
            matches!(
                ScramServer::client_first(
                    ScramMechanism::Sha256,
                    message.as_bytes(),
                    SERVER_NONCE,
                    lookup_user
                ),
                Err(ScramError::Malformed(_))
            ),
            "{message:?}"
        );
    }
    assert_eq!(
        ScramServer::client_first(
            ScramMechanism::Sha256,
            b"n,a=admin,n=user,r=abc",
            SERVER_NONCE,
            lookup_user
        )
        .unwrap_err(),
        ScramError::AuthorizationIdMismatch
    );
}

#[test]
fn escaped_user_names_are_decoded() {
    assert_eq!(decode_saslname("a=2Cb=3Dc").unwrap(), "a,b=c");
    assert!(decode_saslname("a=2").is_err());
}

/// A client's side of the exchange, written from RFC 5802, for the mechanisms the RFC gives no
/// vector for.
fn client_final_for(
    mechanism: ScramMechanism,
    password: &[u8],
    client_first_bare: &str,
    server_first: &str,
) -> (String, Vec<u8>) {
    let mut salt = None;
    let mut iterations = None;
    let mut nonce = None;
    for field in server_first.split(',') {
        if let Some(v) = field.strip_prefix("s=") {
            salt = Some(BASE64.decode(v).unwrap());
        } else if let Some(v) = field.strip_prefix("i=") {
            iterations = Some(v.parse::<u32>().unwrap());
        } else if let Some(v) = field.strip_prefix("r=") {
            nonce = Some(v.to_string());
        }
    }
    let salted = hi(mechanism, password, &salt.unwrap(), iterations.unwrap());
    let client_key = mechanism.hmac(&salted, b"Client Key");
    let stored_key = mechanism.hash(&client_key);
    let without_proof = format!("c=biws,r={}", nonce.unwrap());
    let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
    let signature = mechanism.hmac(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let server_key = mechanism.hmac(&salted, b"Server Key");
    let expected_server_final = format!(
        "v={}",
        BASE64.encode(mechanism.hmac(&server_key, auth_message.as_bytes()))
    );
    (
        format!("{without_proof},p={}", BASE64.encode(proof)),
        expected_server_final.into_bytes(),
    )
}

#[test]
fn sha512_exchange_round_trips_and_refuses_a_wrong_password() {
    let mechanism = ScramMechanism::Sha512;
    let salt = b"some salt";
    let salted = hi(mechanism, b"secret", salt, 4096);
    let credential = ScramCredential::from_salted_password(mechanism, salt, &salted, 4096);
    assert_eq!(credential.stored_key.len(), 64);
    for (password, ok) in [(&b"secret"[..], true), (&b"guess"[..], false)] {
        let lookup = |name: &str| (name == "alice").then(|| credential.clone());
        let (server, server_first) =
            ScramServer::client_first(mechanism, b"n,,n=alice,r=fyko", "3rfcNHYJY", lookup)
                .unwrap();
        let server_first = String::from_utf8(server_first).unwrap();
        let (client_final, expected) =
            client_final_for(mechanism, password, "n=alice,r=fyko", &server_first);
        let outcome = server.client_final(client_final.as_bytes());
        if ok {
            assert_eq!(outcome.unwrap(), ("alice".to_string(), expected));
        } else {
            assert_eq!(outcome.unwrap_err(), ScramError::InvalidProof);
        }
    }
}

#[test]
fn server_nonces_are_printable_and_differ() {
    let a = server_nonce().unwrap();
    let b = server_nonce().unwrap();
    assert_eq!(a.len(), 32);
    assert!(is_printable(&a));
    assert_ne!(a, b);
}
