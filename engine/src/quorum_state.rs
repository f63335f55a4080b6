//! The `quorum-state` file (KIP-595): the election state a voter must never forget across a
//! restart: the latest leader epoch it knows, the leader if known, and whom it voted for in that
//! epoch. A vote may only leave the node after this file is durable.
//!
//! The content is JSON shaped like Kafka's `QuorumStateData` version 0 (as Kafka's
//! `FileQuorumState` writes it: camelCase field names plus `data_version`), e.g.
//!
//! ```json
//! {"clusterId":"rl-1","leaderId":2,"leaderEpoch":7,"votedId":2,"appliedOffset":0,
//!  "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}
//! ```
//!
//! The file is replaced atomically: write `quorum-state.tmp`, fdatasync it, rename it over
//! `quorum-state`, fsync the folder. A crash leaves the old or the new state, never a mix; a
//! garbage file is a typed error, never a panic and never a silently reset vote.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::io::{Io, IoError};
use crate::log::blocking;

pub const QUORUM_STATE_FILE_NAME: &str = "quorum-state";
/// The only `data_version` this file format writes and reads.
pub const QUORUM_STATE_DATA_VERSION: i16 = 0;
/// The line after the JSON that carries its CRC32C ([`QuorumStateData::encode_file`]).
const CHECKSUM_PREFIX: &str = "# crc32c ";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Voter {
    pub voter_id: i32,
}

/// The persisted election state. `-1` means "none" as in Kafka.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QuorumStateData {
    pub cluster_id: String,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub voted_id: i32,
    pub applied_offset: i64,
    pub current_voters: Option<Vec<Voter>>,
    #[serde(rename = "data_version")]
    pub data_version: i16,
}

impl QuorumStateData {
    /// The state of a voter that has never seen an election.
    pub fn initial(cluster_id: &str, voters: &[i32]) -> Self {
        QuorumStateData {
            cluster_id: cluster_id.to_string(),
            leader_id: -1,
            leader_epoch: 0,
            voted_id: -1,
            applied_offset: 0,
            current_voters: Some(voters.iter().map(|&voter_id| Voter { voter_id }).collect()),
            data_version: QUORUM_STATE_DATA_VERSION,
        }
    }

    /// Kafka's JSON alone.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("plain data always serialises")
    }

    /// The file's content: Kafka's JSON, then a line with its CRC32C, so that a bit flipped at
    /// rest is caught rather than read as another epoch or vote (a JSON digit flips into
    /// another valid digit).
    pub fn encode_file(&self) -> String {
        let json = self.encode();
        let crc = crc32c::crc32c(json.as_bytes());
        format!("{json}\n{CHECKSUM_PREFIX}{crc}\n")
    }

    /// Parse the file's bytes; `path` only labels errors. A file with the checksum line must
    /// match it; one without (written before 2026-12-03) is Kafka's JSON alone.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Self, QuorumStateError> {
        let malformed = |reason: String| QuorumStateError::Malformed {
            path: path.display().to_string(),
            reason,
        };
        let marker = format!("\n{CHECKSUM_PREFIX}");
        let bytes = match bytes
            .windows(marker.len())
            .position(|w| w == marker.as_bytes())
        {
            None => bytes,
            Some(at) => {
                let (json, rest) = bytes.split_at(at);
                let crc = std::str::from_utf8(&rest[marker.len()..])
                    .ok()
                    .and_then(|t| t.strip_suffix('\n'))
                    .and_then(|t| t.parse::<u32>().ok())
                    .ok_or_else(|| malformed("unreadable checksum line".into()))?;
                if crc32c::crc32c(json) != crc {
                    return Err(malformed("checksum mismatch: the file is damaged".into()));
                }
                json
            }
        };
        let state: QuorumStateData =
            serde_json::from_slice(bytes).map_err(|error| QuorumStateError::Malformed {
                path: path.display().to_string(),
                reason: error.to_string(),
            })?;
        if state.data_version != QUORUM_STATE_DATA_VERSION {
            return Err(QuorumStateError::UnsupportedVersion {
                path: path.display().to_string(),
                data_version: state.data_version,
            });
        }
        if state.leader_epoch < -1 || state.leader_id < -1 || state.voted_id < -1 {
            return Err(QuorumStateError::Malformed {
                path: path.display().to_string(),
                reason: format!(
                    "negative id or epoch: leaderId {}, leaderEpoch {}, votedId {}",
                    state.leader_id, state.leader_epoch, state.voted_id
                ),
            });
        }
        Ok(state)
    }

    /// Read `path`. `Ok(None)` if there is no file yet (a new node).
    pub fn load<I: Io>(io: &mut I, path: &Path) -> Result<Option<Self>, QuorumStateError> {
        match blocking::read_whole_file(io, path)? {
            None => Ok(None),
            Some(bytes) => Self::decode(&bytes, path).map(Some),
        }
    }

    /// Replace `path` atomically and durably with this state. Returns only after the folder
    /// fsync, so the caller may then send the vote.
    pub fn persist<I: Io>(&self, io: &mut I, path: &Path) -> Result<(), QuorumStateError> {
        blocking::write_file_atomically(io, path, self.encode_file().as_bytes())?;
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QuorumStateError {
    #[error("malformed quorum-state file {path}: {reason}")]
    Malformed { path: String, reason: String },
    #[error("quorum-state file {path} has data_version {data_version}, this build reads 0")]
    UnsupportedVersion { path: String, data_version: i16 },
    #[error(transparent)]
    Io(#[from] IoError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_kafka_file_quorum_state() {
        let mut state = QuorumStateData::initial("rl-1", &[1, 2, 3]);
        state.leader_id = 2;
        state.leader_epoch = 7;
        state.voted_id = 2;
        assert_eq!(
            state.encode(),
            r#"{"clusterId":"rl-1","leaderId":2,"leaderEpoch":7,"votedId":2,"appliedOffset":0,"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}"#
        );
        assert_eq!(
            QuorumStateData::decode(state.encode().as_bytes(), Path::new("q")).unwrap(),
            state
        );
    }

    #[test]
    fn reads_null_voters() {
        let text = r#"{"clusterId":"","leaderId":-1,"leaderEpoch":3,"votedId":1,"appliedOffset":0,"currentVoters":null,"data_version":0}"#;
        let state = QuorumStateData::decode(text.as_bytes(), Path::new("q")).unwrap();
        assert_eq!(state.current_voters, None);
        assert_eq!(state.voted_id, 1);
    }

    #[test]
    fn garbage_is_a_typed_error_naming_the_file() {
        let cases: &[&[u8]] = &[
            b"",
            b"\x00\x00\x00",
            b"{",
            b"[]",
            br#"{"clusterId":"","leaderId":-1}"#,
            br#"{"clusterId":"","leaderId":-1,"leaderEpoch":3,"votedId":1,"appliedOffset":0,"currentVoters":null,"data_version":5}"#,
            br#"{"clusterId":"","leaderId":-9,"leaderEpoch":3,"votedId":1,"appliedOffset":0,"currentVoters":null,"data_version":0}"#,
            br#"{"clusterId":"","leaderId":-1,"leaderEpoch":3,"votedId":1,"appliedOffset":0,"currentVoters":null,"data_version":0,"extra":1}"#,
        ];
        for bytes in cases {
            let error = QuorumStateData::decode(bytes, Path::new("/d/quorum-state")).unwrap_err();
            assert!(error.to_string().contains("/d/quorum-state"), "{error}");
        }
    }

    #[test]
    fn every_flipped_bit_of_the_file_is_detected() {
        let state = QuorumStateData {
            cluster_id: "rl-1".into(),
            leader_id: 2,
            leader_epoch: 7,
            voted_id: 2,
            applied_offset: 0,
            current_voters: Some(vec![Voter { voter_id: 1 }, Voter { voter_id: 2 }]),
            data_version: 0,
        };
        let good = state.encode_file().into_bytes();
        assert_eq!(
            QuorumStateData::decode(&good, Path::new("q")).unwrap(),
            state
        );
        for byte in 0..good.len() {
            for bit in 0..8 {
                let mut flipped = good.clone();
                flipped[byte] ^= 1 << bit;
                let decoded = QuorumStateData::decode(&flipped, Path::new("q"));
                assert!(decoded.is_err(), "byte {byte} bit {bit}: {decoded:?}");
            }
        }
        // The file of a node before the checksum line still reads.
        assert_eq!(
            QuorumStateData::decode(state.encode().as_bytes(), Path::new("q")).unwrap(),
            state
        );
    }
}
