//! `ringlog scram-user`: creates, changes or deletes a user's SASL/SCRAM credential with
//! AlterUserScramCredentials (Kafka's `kafka-configs --alter --entity-type users
//! --add-config 'SCRAM-SHA-256=[iterations=…,password=…]'`, `--bootstrap-controller` included).
//!
//! The salt is random (the OS's generator) and the password never leaves this process: the
//! request carries RFC 5802's SaltedPassword, from which the node derives StoredKey and
//! ServerKey (docs/clients.md, "SASL/SCRAM"). The first user of a cluster whose client listener
//! is SASL can only be created this way, through a listener that does not ask for SASL (a node's
//! controller listener): Kafka's clients follow Metadata to the SASL listener.

use std::time::Duration;

use bytes::Bytes;
use ringlog_net::client::Client;
use ringlog_net::protocol::{
    ErrorCode, Request, Response, alter_user_scram_credentials_request as req,
};
use ringlog_net::sasl::{ScramMechanism, hi};

/// What to do with `user`'s credential for `mechanism`.
pub(crate) struct ScramUser<'a> {
    pub bootstrap: &'a str,
    pub user: &'a str,
    pub mechanism: &'a str,
    /// `None`: delete the credential.
    pub password: Option<&'a str>,
    pub iterations: i32,
}

/// Sends the alteration and reports the node's answer for the user.
pub(crate) fn scram_user(command: ScramUser<'_>) -> Result<String, String> {
    let mechanism = ScramMechanism::from_name(command.mechanism).ok_or_else(|| {
        format!(
            "unknown mechanism {:?} (SCRAM-SHA-256 or SCRAM-SHA-512)",
            command.mechanism
        )
    })?;
    let mut request = req::AlterUserScramCredentialsRequest::default();
    match command.password {
        Some(password) => {
            let iterations = u32::try_from(command.iterations)
                .map_err(|_| format!("iterations {} must be positive", command.iterations))?;
            let mut salt = [0u8; 32];
            getrandom::fill(&mut salt).map_err(|e| format!("no random salt: {e}"))?;
            let salted = hi(mechanism, password.as_bytes(), &salt, iterations);
            request.upsertions.push(req::ScramCredentialUpsertion {
                name: command.user.to_string(),
                mechanism: mechanism.type_id(),
                iterations: command.iterations,
                salt: Bytes::copy_from_slice(&salt),
                salted_password: Bytes::from(salted),
            });
        }
        None => request.deletions.push(req::ScramCredentialDeletion {
            name: command.user.to_string(),
            mechanism: mechanism.type_id(),
        }),
    }
    let mut client = Client::connect(command.bootstrap, Duration::from_secs(10))
        .map_err(|e| format!("{}: {e}", command.bootstrap))?;
    let response = client
        .request(&Request::AlterUserScramCredentials(request), 0)
        .map_err(|e| format!("AlterUserScramCredentials: {e}"))?;
    let Response::AlterUserScramCredentials(response) = response else {
        return Err(format!(
            "not an AlterUserScramCredentials answer: {response:?}"
        ));
    };
    let result = response
        .results
        .iter()
        .find(|r| r.user == command.user)
        .ok_or_else(|| format!("the answer names no result for {:?}", command.user))?;
    if result.error_code != 0 {
        let name = ErrorCode::from_code(result.error_code).map_or_else(
            || format!("error {}", result.error_code),
            |e| e.name().to_string(),
        );
        return Err(format!(
            "{}: {name}{}",
            command.user,
            result
                .error_message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
    }
    Ok(match command.password {
        Some(_) => format!(
            "{}: {} credential set ({} iterations)",
            command.user,
            mechanism.name(),
            command.iterations
        ),
        None => format!("{}: {} credential deleted", command.user, mechanism.name()),
    })
}
