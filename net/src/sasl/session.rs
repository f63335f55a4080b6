//! One connection's SASL state on a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's
//! `SaslServerAuthenticator` keeps it. The server layer (`crate::server::connection`) asks it
//! about every request read before the exchange has succeeded:
//!
//! | state | request | outcome |
//! | --- | --- | --- |
//! | awaiting handshake | ApiVersions | to the handler (answered as on any listener) |
//! | awaiting handshake | SaslHandshake, enabled mechanism | NONE + the enabled list; await the client-first message |
//! | awaiting handshake | SaslHandshake, other mechanism | UNSUPPORTED_SASL_MECHANISM + the enabled list, then close |
//! | awaiting client-first | SaslAuthenticate | server-first (nonce, salt, iterations), or SASL_AUTHENTICATION_FAILED and close |
//! | awaiting client-final | SaslAuthenticate | server-final (server signature): authenticated as `User:<name>`; or SASL_AUTHENTICATION_FAILED and close |
//! | authenticated | anything | to the handler, with the connection's [`SaslUser`] |
//! | not authenticated | anything else | close, unanswered |
//!
//! SaslHandshake v0 (whose exchange follows as raw tokens without Kafka headers) is answered
//! like v1, but only SaslAuthenticate carries the exchange: raw tokens are not a request and
//! close the connection. Every client since Kafka 1.0 and librdkafka 1.0 sends v1.

use bytes::Bytes;

use super::principal::SaslUser;
use super::scram::{ScramCredential, ScramError, ScramMechanism, ScramServer, server_nonce};
use crate::protocol::{
    ErrorCode, Request, Response, SaslAuthenticateResponse, SaslHandshakeResponse,
};

/// Finds a user's stored credential for a mechanism (the node's credential image).
pub type CredentialLookup<'a> = &'a dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>;

/// Where one connection is in the exchange.
#[derive(Debug)]
pub enum SaslSession {
    AwaitingHandshake,
    AwaitingClientFirst(ScramMechanism),
    /// Boxed: the exchange's state is large and lives only between two requests.
    AwaitingClientFinal(Box<ScramServer>),
    Authenticated(SaslUser),
    /// The exchange failed; the connection is closing.
    Failed,
}

/// What the server does with a request, per [`SaslSession::on_request`].
#[derive(Debug)]
pub enum SessionStep {
    /// Hand it to the request handler.
    Pass,
    /// Answer with this response (the server encodes it) and keep reading.
    Answer(Response),
    /// Answer with this response, then close the connection.
    AnswerAndClose(Response),
    /// Close without an answer.
    Close,
}

impl SaslSession {
    pub fn new() -> SaslSession {
        SaslSession::AwaitingHandshake
    }

    /// The authenticated user, once the exchange succeeded.
    pub fn user(&self) -> Option<SaslUser> {
        match self {
            SaslSession::Authenticated(user) => Some(*user),
            _ => None,
        }
    }

    /// Takes one request read on the connection (see the module's table).
    pub fn on_request(
        &mut self,
        enabled: &[ScramMechanism],
        request: &Request,
        lookup: CredentialLookup<'_>,
    ) -> SessionStep {
        let state = std::mem::replace(self, SaslSession::Failed);
        let (next, step) = match (state, request) {
            (SaslSession::Authenticated(user), _) => {
                (SaslSession::Authenticated(user), SessionStep::Pass)
            }
            (SaslSession::AwaitingHandshake, Request::ApiVersions(_)) => {
                (SaslSession::AwaitingHandshake, SessionStep::Pass)
            }
            (SaslSession::AwaitingHandshake, Request::SaslHandshake(handshake)) => {
                let mechanisms = enabled.iter().map(|m| m.name().to_string()).collect();
                match ScramMechanism::from_name(&handshake.mechanism)
                    .filter(|m| enabled.contains(m))
                {
                    Some(mechanism) => (
                        SaslSession::AwaitingClientFirst(mechanism),
                        SessionStep::Answer(Response::SaslHandshake(SaslHandshakeResponse {
                            error_code: ErrorCode::None.code(),
                            mechanisms,
                        })),
                    ),
                    None => {
                        tracing::info!(mechanism = %handshake.mechanism, "SASL mechanism not enabled; closing connection");
                        (
                            SaslSession::Failed,
                            SessionStep::AnswerAndClose(Response::SaslHandshake(
                                SaslHandshakeResponse {
                                    error_code: ErrorCode::UnsupportedSaslMechanism.code(),
                                    mechanisms,
                                },
                            )),
                        )
                    }
                }
            }
            (SaslSession::AwaitingClientFirst(mechanism), Request::SaslAuthenticate(auth)) => {
                let nonce = match server_nonce() {
                    Ok(nonce) => nonce,
                    Err(error) => {
                        tracing::error!(%error, "no random server nonce from the OS; failing the SASL exchange");
                        return self.fail(mechanism, None);
                    }
                };
                match ScramServer::client_first(mechanism, &auth.auth_bytes, &nonce, |user| {
                    lookup(user, mechanism)
                }) {
                    Ok((server, server_first)) => (
                        SaslSession::AwaitingClientFinal(Box::new(server)),
                        SessionStep::Answer(authenticated_response(server_first)),
                    ),
                    Err(error) => return self.fail(mechanism, Some(error)),
                }
            }
            (SaslSession::AwaitingClientFinal(server), Request::SaslAuthenticate(auth)) => {
                let mechanism = server.mechanism();
                match server.client_final(&auth.auth_bytes) {
                    Ok((user, server_final)) => {
                        let user = SaslUser::intern(&user);
                        tracing::debug!(%user, mechanism = mechanism.name(), "SASL authentication succeeded");
                        (
                            SaslSession::Authenticated(user),
                            SessionStep::Answer(authenticated_response(server_final)),
                        )
                    }
                    Err(error) => return self.fail(mechanism, Some(error)),
                }
            }
            (state, other) => {
                tracing::info!(
                    api = other.api_key().name(),
                    state = state.name(),
                    "request before SASL authentication; closing connection"
                );
                (SaslSession::Failed, SessionStep::Close)
            }
        };
        *self = next;
        step
    }

    /// The exchange failed: SASL_AUTHENTICATION_FAILED with Kafka's message, then close.
    fn fail(&mut self, mechanism: ScramMechanism, error: Option<ScramError>) -> SessionStep {
        *self = SaslSession::Failed;
        if let Some(error) = &error {
            tracing::info!(%error, mechanism = mechanism.name(), "SASL authentication failed; closing connection");
        }
        let message = error.as_ref().map_or_else(
            || "Authentication failed: server error".to_string(),
            |e| e.message(mechanism),
        );
        SessionStep::AnswerAndClose(Response::SaslAuthenticate(SaslAuthenticateResponse {
            error_code: ErrorCode::SaslAuthenticationFailed.code(),
            error_message: Some(message),
            auth_bytes: Bytes::new(),
            session_lifetime_ms: 0,
        }))
    }

    fn name(&self) -> &'static str {
        match self {
            SaslSession::AwaitingHandshake => "awaiting handshake",
            SaslSession::AwaitingClientFirst(_) => "awaiting client-first",
            SaslSession::AwaitingClientFinal(_) => "awaiting client-final",
            SaslSession::Authenticated(_) => "authenticated",
            SaslSession::Failed => "failed",
        }
    }
}

impl Default for SaslSession {
    fn default() -> Self {
        SaslSession::new()
    }
}

fn authenticated_response(auth_bytes: Vec<u8>) -> Response {
    Response::SaslAuthenticate(SaslAuthenticateResponse {
        error_code: ErrorCode::None.code(),
        error_message: None,
        auth_bytes: Bytes::from(auth_bytes),
        // No re-authentication (KIP-368's connections.max.reauth.ms is not supported).
        session_lifetime_ms: 0,
    })
}
