//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server's side, as Kafka's
//! `ScramSaslServer` and `ScramFormatter` behave.
//!
//! ```text
//! SaltedPassword  = Hi(password, salt, iterations)        (the client computes it; Alter… sends it)
//! ClientKey       = HMAC(SaltedPassword, "Client Key")
//! StoredKey       = H(ClientKey)                            } kept by the broker, with the salt
//! ServerKey       = HMAC(SaltedPassword, "Server Key")      } and the iterations
//! AuthMessage     = client-first-bare + "," + server-first + "," + client-final-without-proof
//! ClientSignature = HMAC(StoredKey, AuthMessage)
//! ClientProof     = ClientKey XOR ClientSignature           (sent by the client)
//! ServerSignature = HMAC(ServerKey, AuthMessage)            (sent back: the server knew ServerKey)
//! ```
//!
//! The server checks a proof by recovering ClientKey = ClientProof XOR ClientSignature and
//! comparing H(ClientKey) with StoredKey in constant time. Everything here is a pure function of
//! its inputs: the server nonce comes in as a parameter ([`server_nonce`] draws one from the
//! OS), so RFC 7677's test vector is a unit test.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// A SCRAM mechanism, numbered as Kafka's `ScramMechanism` (the admin APIs' `Mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256 = 1,
    Sha512 = 2,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];
    /// Kafka's minimum iterations for both mechanisms (`ScramMechanism.minIterations`).
    pub const MIN_ITERATIONS: i32 = 4096;
    /// Kafka's controller refuses more (`ScramControlManager.MAX_ITERATIONS`).
    pub const MAX_ITERATIONS: i32 = 16384;

    /// The admin APIs' number: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512; anything else is unknown.
    pub fn from_type(mechanism: i8) -> Option<ScramMechanism> {
        match mechanism {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// The SASL mechanism name (`SCRAM-SHA-256`, `SCRAM-SHA-512`).
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn type_id(self) -> i8 {
        self as i8
    }

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The hash's output size: the size of every key and proof of this mechanism.
    pub fn digest_size_bytes(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }

    /// RFC 5802's H.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's HMAC(key, data).
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
                    .expect("HMAC takes a key of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut mac = <Hmac<Sha512> as KeyInit>::new_from_slice(key)
                    .expect("HMAC takes a key of any length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }
}

/// RFC 5802's Hi(password, salt, iterations): PBKDF2 with HMAC as the PRF and one block. The
/// broker never computes it (clients send SaltedPassword); the tests and ringlog's own client
/// side do.
pub fn hi(mechanism: ScramMechanism, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut first = salt.to_vec();
    first.extend_from_slice(&1u32.to_be_bytes());
    let mut u = mechanism.hmac(password, &first);
    let mut result = u.clone();
    for _ in 1..iterations {
        u = mechanism.hmac(password, &u);
        for (r, b) in result.iter_mut().zip(&u) {
            *r ^= b;
        }
    }
    result
}

/// What the broker keeps of one user's password for one mechanism (Kafka's
/// `UserScramCredentialRecord` without the name and mechanism, its key).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Bytes,
    pub stored_key: Bytes,
    pub server_key: Bytes,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // As Kafka's ScramCredentialValue: the keys are secrets.
        f.debug_struct("ScramCredential")
            .field("salt", &"[hidden]")
            .field("stored_key", &"[hidden]")
            .field("server_key", &"[hidden]")
            .field("iterations", &self.iterations)
            .finish()
    }
}

impl ScramCredential {
    /// The credential of a client's SaltedPassword (AlterUserScramCredentials' upsertion):
    /// StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
    /// "Server Key"). The salted password itself is not kept.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: Bytes::copy_from_slice(salt),
            stored_key: Bytes::from(mechanism.hash(&client_key)),
            server_key: Bytes::from(mechanism.hmac(salted_password, b"Server Key")),
            iterations,
        }
    }
}

/// Why an exchange failed. Every variant ends the connection with SASL_AUTHENTICATION_FAILED;
/// only [`ScramError::message`] is sent to the client, and it does not tell an unknown user
/// from a wrong password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    #[error("unknown user")]
    UnknownUser,
    #[error("the authorization id differs from the user name")]
    AuthorizationIdMismatch,
    #[error("the stored credential has {iterations} iterations, fewer than the minimum 4096")]
    TooFewIterations { iterations: i32 },
    #[error("the final message's nonce is not the one the server sent")]
    NonceMismatch,
    #[error("the channel binding is not the client's first gs2 header")]
    ChannelBindingMismatch,
    #[error("invalid client proof")]
    InvalidProof,
}

impl ScramError {
    /// What the client is told (Kafka's message for invalid credentials).
    pub fn message(&self, mechanism: ScramMechanism) -> String {
        format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
            mechanism.name()
        )
    }
}

/// A fresh server nonce from the OS's random source: 32 alphanumeric characters (RFC 5802's
/// printable, never a comma).
pub fn server_nonce() -> Result<String, getrandom::Error> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    // 256 is not a multiple of 62, so the first 8 characters come up slightly more often
    // (5 byte values each instead of 4): the 32 characters still carry over 180 random bits,
    // and a nonce only has to be unpredictable and unique, not uniform.
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect())
}

/// The server after it answered the client-first message: what it needs to check the
/// client-final one.
pub struct ScramServer {
    mechanism: ScramMechanism,
    user: String,
    credential: ScramCredential,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl std::fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramServer")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl ScramServer {
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Reads the client-first message (`n,[a=authzid],n=user,r=client-nonce[,ext…]`), looks the
    /// user's credential up and returns the server-first message
    /// (`r=client-nonce+server-nonce,s=salt,i=iterations`).
    pub fn client_first(
        mechanism: ScramMechanism,
        message: &[u8],
        server_nonce: &str,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<(ScramServer, Vec<u8>), ScramError> {
        let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        // gs2-header: "n," (no channel binding: Kafka supports none), an optional authzid, ",".
        let rest = text
            .strip_prefix("n,")
            .ok_or(ScramError::Malformed("gs2 header must start with n,"))?;
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or(ScramError::Malformed("gs2 header"))?;
        let authzid = match authzid {
            "" => None,
            a => Some(decode_saslname(
                a.strip_prefix("a=")
                    .ok_or(ScramError::Malformed("authzid"))?,
            )?),
        };
        let gs2_header = &text[..text.len() - bare.len()];
        let mut fields = bare.split(',');
        let user = fields
            .next()
            .and_then(|f| f.strip_prefix("n="))
            .ok_or(ScramError::Malformed("no n= user name"))?;
        let user = decode_saslname(user)?;
        let client_nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(ScramError::Malformed("no r= nonce"))?;
        if !is_printable(client_nonce) {
            return Err(ScramError::Malformed("nonce"));
        }
        // Extensions (Kafka's tokenauth=…) must be `name=value` and are ignored, as Kafka
        // ignores those it does not support; delegation tokens do not exist here.
        for extension in fields {
            let valid = extension.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric())
            });
            if !valid || extension.starts_with("m=") {
                return Err(ScramError::Malformed("extension"));
            }
        }
        if let Some(authzid) = authzid
            && authzid != user
        {
            return Err(ScramError::AuthorizationIdMismatch);
        }
        let credential = lookup(&user).ok_or(ScramError::UnknownUser)?;
        if credential.iterations < ScramMechanism::MIN_ITERATIONS {
            return Err(ScramError::TooFewIterations {
                iterations: credential.iterations,
            });
        }
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let reply = server_first.clone().into_bytes();
        Ok((
            ScramServer {
                mechanism,
                user,
                credential,
                gs2_header: gs2_header.to_string(),
                client_first_bare: bare.to_string(),
                server_first,
                nonce,
            },
            reply,
        ))
    }

    /// Checks the client-final message (`c=channel-binding,r=nonce[,ext…],p=proof`) and returns
    /// the authenticated user and the server-final message (`v=server-signature`).
    pub fn client_final(self, message: &[u8]) -> Result<(String, Vec<u8>), ScramError> {
        let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no p= proof"))?;
        let mut fields = without_proof.split(',');
        let binding = fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .ok_or(ScramError::Malformed("no c= channel binding"))?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(ScramError::Malformed("no r= nonce"))?;
        let binding = BASE64
            .decode(binding)
            .map_err(|_| ScramError::Malformed("channel binding is not base64"))?;
        if binding != self.gs2_header.as_bytes() {
            return Err(ScramError::ChannelBindingMismatch);
        }
        if nonce != self.nonce {
            return Err(ScramError::NonceMismatch);
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("proof is not base64"))?;
        let mechanism = self.mechanism;
        if proof.len() != mechanism.digest_size_bytes() {
            return Err(ScramError::InvalidProof);
        }
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let client_signature = mechanism.hmac(&self.credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        let computed_stored_key = mechanism.hash(&client_key);
        if !bool::from(
            computed_stored_key
                .as_slice()
                .ct_eq(self.credential.stored_key.as_ref()),
        ) {
            return Err(ScramError::InvalidProof);
        }
        let server_signature = mechanism.hmac(&self.credential.server_key, auth_message.as_bytes());
        let server_final = format!("v={}", BASE64.encode(server_signature));
        Ok((self.user, server_final.into_bytes()))
    }
}

/// RFC 5802's saslname: `=2C` is a comma, `=3D` an equals sign, any other `=` is malformed.
fn decode_saslname(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("saslname escape")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// RFC 5802's printable: %x21-2B / %x2D-7E (no comma).
fn is_printable(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
