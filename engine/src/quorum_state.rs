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
//! The file holds that JSON twice, each copy followed by a `# crc32c <n>` line
//! ([`QuorumStateData::encode_file`]): a bit flipped at rest is caught by the checksum and the
//! state read from the other copy (and the file written whole again), since a forgotten vote
//! cannot be taken back from a peer. The file is replaced atomically: write
//! `quorum-state.tmp`, fdatasync it, rename it over `quorum-state`, fsync the folder. A crash
//! leaves the old or the new state, never a mix; a garbage file (both copies) is a typed error,
//! never a panic and never a silently reset vote.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::io::{Io, IoError};
use crate::log::blocking;

pub const QUORUM_STATE_FILE_NAME: &str = "quorum-state";
/// The only `data_version` this file format writes and reads.
pub const QUORUM_STATE_DATA_VERSION: i16 = 0;
/// The line after the JSON that carries its CRC32C ([`QuorumStateData::encode_file`]).
const CHECKSUM_PREFIX: &str = "# crc32c ";
/// Each copy of the state fills a slot of a multiple of this many bytes, padded with spaces,
/// so that either copy can be written in place without touching the other
/// ([`crate::quorum_state_writer`]).
pub const QUORUM_STATE_SLOT_BYTES: usize = 4096;

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

    /// The file's content: two identical copies of Kafka's JSON followed by a line with its
    /// CRC32C, each padded with spaces to its slot ([`QuorumStateData::encode_slot`]). The
    /// checksum catches a bit flipped at rest rather than reading it as another epoch or vote
    /// (a JSON digit flips into another valid digit), and the second copy repairs it: at rest
    /// both are equal, and a vote forgotten to damage could not be taken back from a peer.
    pub fn encode_file(&self) -> String {
        self.encode_slot(None)
            .expect("a slot of its own size fits")
            .repeat(2)
    }

    /// One copy padded with spaces to `slot_bytes`, or to the least multiple of
    /// [`QUORUM_STATE_SLOT_BYTES`] that holds it (`None`); `None` if it does not fit.
    pub fn encode_slot(&self, slot_bytes: Option<usize>) -> Option<String> {
        let json = self.encode();
        let crc = crate::crc::crc32c(json.as_bytes());
        let copy = format!("{json}\n{CHECKSUM_PREFIX}{crc}\n");
        let slot =
            slot_bytes.unwrap_or_else(|| copy.len().next_multiple_of(QUORUM_STATE_SLOT_BYTES));
        (copy.len() <= slot).then(|| format!("{copy:<slot$}"))
    }

    /// The slot size of a file of `len_bytes` written as two slots (since 2026-12-07): its
    /// copies can be written in place. `None` for a file of the layout before (the copies back
    /// to back, a few hundred bytes), which is replaced whole.
    pub fn slot_bytes_of_file(len_bytes: u64) -> Option<usize> {
        let slot = (len_bytes / 2) as usize;
        (len_bytes > 0
            && len_bytes.is_multiple_of(2)
            && slot.is_multiple_of(QUORUM_STATE_SLOT_BYTES))
        .then_some(slot)
    }

    /// Parse the file's bytes; `path` only labels errors. The file's two halves are its two
    /// copies ([`QuorumStateData::encode_file`]): the first that passes its checksum is read
    /// (a damaged one is warned about); a file that is one copy (written earlier on
    /// 2026-12-03) or Kafka's JSON alone (before) is read whole. The first copy is the one
    /// written first in place (`quorum_state_writer`), so a first copy that reads is the newest
    /// state: a crash between the two writes leaves it whole and the second older or torn.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Self, QuorumStateError> {
        Self::decode_and_check(bytes, path).map(|(state, _)| state)
    }

    /// [`QuorumStateData::decode`], and whether the copies differ (one damaged, or a crash
    /// between the two writes in place): the file is then written whole again.
    fn decode_and_check(bytes: &[u8], path: &Path) -> Result<(Self, bool), QuorumStateError> {
        if bytes.len().is_multiple_of(2) && !bytes.is_empty() {
            let (first, second) = bytes.split_at(bytes.len() / 2);
            match Self::decode_copy(first, path) {
                Ok(state) => {
                    if first != second {
                        match Self::decode_copy(second, path) {
                            Err(error) => tracing::warn!(
                                path = %path.display(),
                                %error,
                                "quorum-state: the second copy is damaged, the first is read"
                            ),
                            Ok(_) => tracing::warn!(
                                path = %path.display(),
                                "quorum-state: the second copy is older (a crash between the two writes), the first is read"
                            ),
                        }
                        return Ok((state, true));
                    }
                    return Ok((state, false));
                }
                Err(first_error) => match Self::decode_copy(second, path) {
                    Ok(state) => {
                        tracing::warn!(
                            path = %path.display(),
                            error = %first_error,
                            "quorum-state: the first copy is damaged, the second is read"
                        );
                        return Ok((state, true));
                    }
                    Err(_) if first == second => return Err(first_error),
                    Err(_) => {}
                },
            }
        }
        Self::decode_copy(bytes, path).map(|state| (state, false))
    }

    /// One copy: Kafka's JSON, with or without its checksum line.
    fn decode_copy(bytes: &[u8], path: &Path) -> Result<Self, QuorumStateError> {
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
                // The slot's padding (spaces) after the line.
                let crc = std::str::from_utf8(&rest[marker.len()..])
                    .ok()
                    .map(|t| t.trim_end_matches(' '))
                    .and_then(|t| t.strip_suffix('\n'))
                    .and_then(|t| t.parse::<u32>().ok())
                    .ok_or_else(|| malformed("unreadable checksum line".into()))?;
                if crate::crc::crc32c(json) != crc {
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
            Some(bytes) => {
                let (state, damaged) = Self::decode_and_check(&bytes, path)?;
                if damaged {
                    // Both copies whole again before anything else happens, so damage does not
                    // accumulate until a later flip meets the other copy.
                    state.persist(io, path)?;
                    tracing::warn!(path = %path.display(), "quorum-state: written again whole");
                }
                Ok(Some(state))
            }
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
    fn every_flipped_bit_of_the_file_is_detected_and_read_from_the_other_copy() {
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
        assert_eq!(good.len(), 2 * QUORUM_STATE_SLOT_BYTES);
        assert_eq!(
            QuorumStateData::decode(&good, Path::new("q")).unwrap(),
            state
        );
        let legacy_one = state.encode_slot(None).unwrap().trim_end().to_string() + "\n";
        let legacy_one = legacy_one.into_bytes();
        for byte in 0..good.len() {
            for bit in 0..8 {
                let mut flipped = good.clone();
                flipped[byte] ^= 1 << bit;
                let decoded = QuorumStateData::decode(&flipped, Path::new("q"));
                assert_eq!(decoded.ok(), Some(state.clone()), "byte {byte} bit {bit}");
                // One copy alone (as written earlier on 2026-12-03, unpadded): every flip
                // is refused.
                if byte < legacy_one.len() {
                    let mut one = legacy_one.clone();
                    one[byte] ^= 1 << bit;
                    let decoded = QuorumStateData::decode(&one, Path::new("q"));
                    assert!(
                        decoded.is_err(),
                        "one copy, byte {byte} bit {bit}: {decoded:?}"
                    );
                }
            }
        }
        // Both copies damaged: refused.
        let mut both = good.clone();
        both[3] ^= 1;
        both[good.len() / 2 + 3] ^= 1;
        assert!(QuorumStateData::decode(&both, Path::new("q")).is_err());
        // The file of a node before the checksum line still reads.
        assert_eq!(
            QuorumStateData::decode(state.encode().as_bytes(), Path::new("q")).unwrap(),
            state
        );
    }

    fn state(epoch: i32) -> QuorumStateData {
        let mut state = QuorumStateData::initial("rl-1", &[1, 2, 3]);
        state.leader_epoch = epoch;
        state.voted_id = 2;
        state
    }

    /// A crash between the two writes in place: the first slot is new and read (and the file
    /// is to be written whole again); a torn first slot leaves the second, the old state.
    #[test]
    fn a_crash_between_the_slots_reads_the_first_whole_one() {
        let (old, new) = (state(3).encode_file(), state(4).encode_file());
        let slot = QUORUM_STATE_SLOT_BYTES;
        let first_new = [&new.as_bytes()[..slot], &old.as_bytes()[slot..]].concat();
        let (read, rewrite) =
            QuorumStateData::decode_and_check(&first_new, Path::new("q")).unwrap();
        assert_eq!((read.leader_epoch, rewrite), (4, true));
        let mut torn = first_new.clone();
        torn[100..600].fill(0);
        let (read, rewrite) = QuorumStateData::decode_and_check(&torn, Path::new("q")).unwrap();
        assert_eq!((read.leader_epoch, rewrite), (3, true));
        let (read, rewrite) =
            QuorumStateData::decode_and_check(new.as_bytes(), Path::new("q")).unwrap();
        assert_eq!((read.leader_epoch, rewrite), (4, false));
    }

    /// The layout before slots (two copies back to back) still reads, and is replaced whole.
    #[test]
    fn the_layout_before_slots_reads_and_is_not_written_in_place() {
        let copy = state(5).encode_slot(None).unwrap().trim_end().to_string() + "\n";
        let before = copy.repeat(2);
        assert_eq!(
            QuorumStateData::decode(before.as_bytes(), Path::new("q"))
                .unwrap()
                .leader_epoch,
            5
        );
        assert_eq!(
            QuorumStateData::slot_bytes_of_file(before.len() as u64),
            None
        );
        assert_eq!(
            QuorumStateData::slot_bytes_of_file(state(5).encode_file().len() as u64),
            Some(QUORUM_STATE_SLOT_BYTES)
        );
    }

    /// A state larger than a slot (a thousand voters) takes as many slot units as it needs.
    #[test]
    fn a_large_state_takes_larger_slots() {
        let voters: Vec<i32> = (1..=1000).collect();
        let big = QuorumStateData::initial("rl-1", &voters);
        let file = big.encode_file();
        let slot = QuorumStateData::slot_bytes_of_file(file.len() as u64).unwrap();
        assert!(slot > QUORUM_STATE_SLOT_BYTES && slot.is_multiple_of(QUORUM_STATE_SLOT_BYTES));
        assert_eq!(big.encode_slot(Some(QUORUM_STATE_SLOT_BYTES)), None);
        assert_eq!(
            QuorumStateData::decode(file.as_bytes(), Path::new("q")).unwrap(),
            big
        );
    }
}
