//! SASL/SCRAM (RFC 5802, RFC 7677) as Kafka speaks it: the credentials a broker keeps
//! ([`ScramCredential`]: salt, StoredKey, ServerKey, iterations; never the password nor the
//! salted password), the server's side of the exchange ([`ScramServer`], pure: the server nonce
//! is a parameter), the per-connection state of a SASL listener ([`SaslSession`], used by the
//! server layer, `crate::server`) and the principal a successful exchange gives a connection
//! ([`SaslUser`]).
//!
//! The credentials are metadata records (`crate::node::scram_record`); how a client creates a
//! user and connects with it is in docs/clients.md.

mod principal;
mod scram;
mod session;

pub use principal::SaslUser;
pub use scram::{ScramCredential, ScramError, ScramMechanism, ScramServer, hi, server_nonce};
pub use session::{CredentialLookup, SaslSession, SessionStep};
