//! The SCRAM credential record of `__cluster_metadata-0` (Kafka's `UserScramCredentialRecord`,
//! and a tombstone for its `RemoveUserScramCredentialRecord`), and the credential image every
//! node derives from the metadata partition's key-value state.
//!
//! ```text
//! key   = "ringlog.scram.v1/<mechanism>/<user>"       e.g. ringlog.scram.v1/SCRAM-SHA-256/alice
//! value = "iterations=<n>\tsalt=<base64>\tstored_key=<base64>\tserver_key=<base64>"
//! ```
//!
//! One key per (user, mechanism), so the key-value state (and so every KIP-630 snapshot of it)
//! holds exactly the credentials in force, and a deletion is a tombstone under the same key.
//! The salted password a client sends is never written: the controller derives StoredKey and
//! ServerKey from it (`crate::sasl::ScramCredential::from_salted_password`). The mechanism's
//! name cannot hold a `/`, so the user name is everything after the second one, whatever it
//! holds.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;

use crate::sasl::{ScramCredential, ScramMechanism};

/// Every credential record's key starts with this.
pub const SCRAM_RECORD_KEY_PREFIX: &[u8] = b"ringlog.scram.v1/";

/// The key of `user`'s credential for `mechanism`.
pub fn scram_record_key(user: &str, mechanism: ScramMechanism) -> Vec<u8> {
    let mut key = SCRAM_RECORD_KEY_PREFIX.to_vec();
    key.extend_from_slice(mechanism.name().as_bytes());
    key.push(b'/');
    key.extend_from_slice(user.as_bytes());
    key
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScramRecordError {
    #[error("SCRAM credential record: {0}")]
    Malformed(&'static str),
}

/// Reads a key back into (user, mechanism).
pub fn decode_scram_record_key(key: &[u8]) -> Result<(String, ScramMechanism), ScramRecordError> {
    let rest = key
        .strip_prefix(SCRAM_RECORD_KEY_PREFIX)
        .ok_or(ScramRecordError::Malformed("key prefix"))?;
    let rest = std::str::from_utf8(rest).map_err(|_| ScramRecordError::Malformed("utf-8"))?;
    let (mechanism, user) = rest
        .split_once('/')
        .ok_or(ScramRecordError::Malformed("key without mechanism"))?;
    let mechanism =
        ScramMechanism::from_name(mechanism).ok_or(ScramRecordError::Malformed("mechanism"))?;
    if user.is_empty() {
        return Err(ScramRecordError::Malformed("empty user"));
    }
    Ok((user.to_string(), mechanism))
}

/// The record's value.
pub fn encode_scram_record_value(credential: &ScramCredential) -> Vec<u8> {
    format!(
        "iterations={}\tsalt={}\tstored_key={}\tserver_key={}",
        credential.iterations,
        BASE64.encode(&credential.salt),
        BASE64.encode(&credential.stored_key),
        BASE64.encode(&credential.server_key)
    )
    .into_bytes()
}

/// Reads a value back; the keys must be the mechanism's size and the iterations in Kafka's
/// range, as the controller wrote them.
pub fn decode_scram_record_value(
    mechanism: ScramMechanism,
    value: &[u8],
) -> Result<ScramCredential, ScramRecordError> {
    let text = std::str::from_utf8(value).map_err(|_| ScramRecordError::Malformed("utf-8"))?;
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    for field in text.split('\t') {
        let (k, v) = field
            .split_once('=')
            .ok_or(ScramRecordError::Malformed("field without '='"))?;
        fields.insert(k, v);
    }
    let iterations: i32 = fields
        .get("iterations")
        .and_then(|v| v.parse().ok())
        .filter(|i| (ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS).contains(i))
        .ok_or(ScramRecordError::Malformed("iterations"))?;
    let bytes = |name: &'static str| -> Result<Bytes, ScramRecordError> {
        let text = fields.get(name).ok_or(ScramRecordError::Malformed(name))?;
        BASE64
            .decode(text)
            .map(Bytes::from)
            .map_err(|_| ScramRecordError::Malformed(name))
    };
    let credential = ScramCredential {
        salt: bytes("salt")?,
        stored_key: bytes("stored_key")?,
        server_key: bytes("server_key")?,
        iterations,
    };
    if credential.stored_key.len() != mechanism.digest_size_bytes()
        || credential.server_key.len() != mechanism.digest_size_bytes()
    {
        return Err(ScramRecordError::Malformed("key size"));
    }
    Ok(credential)
}

/// The credentials in force on this node: the committed records applied (topic_image.rs calls
/// [`CredentialImage::refresh`] with the metadata key-value state). Shared with the server's
/// SASL exchanges through [`CredentialImage::shared`], on the same thread.
#[derive(Default)]
pub struct CredentialImage {
    credentials: Rc<RefCell<BTreeMap<(String, ScramMechanism), ScramCredential>>>,
    /// The metadata offset the image was last rebuilt at.
    applied_offset: Option<u64>,
}

/// A read-only handle on the credential image, for the server's SASL exchanges.
#[derive(Clone, Default)]
pub struct SharedCredentials(Rc<RefCell<BTreeMap<(String, ScramMechanism), ScramCredential>>>);

impl SharedCredentials {
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.0.borrow().get(&(user.to_string(), mechanism)).cloned()
    }
}

impl CredentialImage {
    pub fn shared(&self) -> SharedCredentials {
        SharedCredentials(self.credentials.clone())
    }

    /// Rebuilds the image from the key-value state when the applied offset moved (credentials
    /// are few; a rebuild is one range scan of their keys).
    pub fn refresh(&mut self, applied_offset: u64, entries: &BTreeMap<Bytes, Bytes>) {
        if self.applied_offset == Some(applied_offset) {
            return;
        }
        self.applied_offset = Some(applied_offset);
        let mut credentials = BTreeMap::new();
        let prefix = Bytes::from_static(SCRAM_RECORD_KEY_PREFIX);
        for (key, value) in entries.range(prefix..) {
            if !key.starts_with(SCRAM_RECORD_KEY_PREFIX) {
                break;
            }
            let decoded = decode_scram_record_key(key).and_then(|(user, mechanism)| {
                decode_scram_record_value(mechanism, value)
                    .map(|credential| ((user, mechanism), credential))
            });
            match decoded {
                Ok((id, credential)) => {
                    credentials.insert(id, credential);
                }
                Err(error) => tracing::warn!(%error, "SCRAM credential record skipped"),
            }
        }
        *self.credentials.borrow_mut() = credentials;
    }

    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.shared().get(user, mechanism)
    }

    /// Every user with a credential, in name order, with their (mechanism, iterations).
    pub fn users(&self) -> BTreeMap<String, Vec<(ScramMechanism, i32)>> {
        let mut users: BTreeMap<String, Vec<(ScramMechanism, i32)>> = BTreeMap::new();
        for ((user, mechanism), credential) in self.credentials.borrow().iter() {
            users
                .entry(user.clone())
                .or_default()
                .push((*mechanism, credential.iterations));
        }
        users
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(mechanism: ScramMechanism) -> ScramCredential {
        let salted = crate::sasl::hi(mechanism, b"pw", b"salt", 4096);
        ScramCredential::from_salted_password(mechanism, b"salt", &salted, 4096)
    }

    #[test]
    fn a_record_round_trips_with_any_user_name() {
        for user in ["alice", "a/b=c,d", "ü"] {
            for mechanism in ScramMechanism::ALL {
                let key = scram_record_key(user, mechanism);
                assert_eq!(
                    decode_scram_record_key(&key).unwrap(),
                    (user.to_string(), mechanism)
                );
                let c = credential(mechanism);
                let value = encode_scram_record_value(&c);
                assert_eq!(decode_scram_record_value(mechanism, &value).unwrap(), c);
            }
        }
    }

    #[test]
    fn a_value_with_the_wrong_key_size_or_iterations_is_malformed() {
        let c = credential(ScramMechanism::Sha256);
        let value = encode_scram_record_value(&c);
        assert!(decode_scram_record_value(ScramMechanism::Sha512, &value).is_err());
        let few = encode_scram_record_value(&ScramCredential {
            iterations: 100,
            ..c
        });
        assert!(decode_scram_record_value(ScramMechanism::Sha256, &few).is_err());
    }

    #[test]
    fn the_image_is_the_state_s_credential_records_and_nothing_else() {
        let mut entries = BTreeMap::new();
        let c = credential(ScramMechanism::Sha256);
        entries.insert(
            Bytes::from(scram_record_key("alice", ScramMechanism::Sha256)),
            Bytes::from(encode_scram_record_value(&c)),
        );
        entries.insert(
            Bytes::from_static(b"ringlog.topic.v2/t"),
            Bytes::from_static(b"x"),
        );
        entries.insert(
            Bytes::from(scram_record_key("bob", ScramMechanism::Sha512)),
            Bytes::from_static(b"garbage"),
        );
        let mut image = CredentialImage::default();
        let shared = image.shared();
        image.refresh(3, &entries);
        assert_eq!(shared.get("alice", ScramMechanism::Sha256), Some(c));
        assert_eq!(shared.get("alice", ScramMechanism::Sha512), None);
        assert_eq!(shared.get("bob", ScramMechanism::Sha512), None);
        assert_eq!(image.users().len(), 1);
        // A tombstone applied: the key is gone from the state, and from the image.
        entries.remove(scram_record_key("alice", ScramMechanism::Sha256).as_slice());
        image.refresh(4, &entries);
        assert_eq!(shared.get("alice", ScramMechanism::Sha256), None);
    }
}
