//! The voter set and its history in the log (KIP-595 "Quorum reassignment", shipped by Kafka as
//! KIP-853).
//!
//! The voter set lives in the log as a control record (KIP-853's `VotersRecord`: each voter's
//! id, directory id and endpoints). A replica acts on a voter set **as soon as it is appended**,
//! not when it is committed (KIP-595: "followers will begin acting with the new voter information
//! as soon as the log entry has been appended. They do not wait for it to be committed"), and
//! reverts to the previous one if the record is truncated. The leader allows one change in
//! flight: a new set is appended only once the previous one is committed, and each set differs
//! from the previous one by exactly one voter, so any majority of one set intersects any majority
//! of the next (Raft's single-server changes).
//!
//! [`VoterSetHistory`] is what a replica knows: the bootstrap set (`controller.quorum.voters`, in
//! force before any record) and every voter set record still in its log, by offset. Worked
//! example, bootstrap {1,2,3}:
//!
//! ```text
//! offset 40: VotersRecord {1,2,3,4}    entries [(40, {1,2,3,4})]        latest {1,2,3,4}
//! offset 90: VotersRecord {1,2,4}      entries [(40, ..), (90, {1,2,4})] latest {1,2,4}
//! truncate to 90 (DivergingEpoch)      entries [(40, {1,2,3,4})]        latest {1,2,3,4}
//! log start moves to 100 (snapshot)    entries [(90, {1,2,4})]          (the set at the start stays)
//! ```

use std::collections::BTreeMap;

use crate::error::RaftError;
use crate::types::NodeId;

/// KIP-853's "no directory id" (`Uuid.ZERO`): a replica or voter entry that names none, which
/// matches any directory id.
pub const NO_DIRECTORY_ID: [u8; 16] = [0; 16];

/// A KIP-853 listener endpoint of a voter (`Endpoints` in `VotersRecord`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// What the voter set records about one voter besides its id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct VoterInfo {
    /// KIP-853 `VoterDirectoryId` (a Uuid); all zeros until directory ids are assigned.
    pub directory_id: [u8; 16],
    pub endpoints: Vec<Endpoint>,
}

/// A set of voters: never empty, except [`VoterSet::unknown`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VoterSet {
    voters: BTreeMap<NodeId, VoterInfo>,
}

impl VoterSet {
    /// A set of the given ids with zero directory ids and no endpoints (a static
    /// `controller.quorum.voters`). Rejects an empty or duplicated list.
    pub fn from_ids(ids: &[NodeId]) -> Result<Self, RaftError> {
        let voters: BTreeMap<NodeId, VoterInfo> =
            ids.iter().map(|&id| (id, VoterInfo::default())).collect();
        if voters.is_empty() || voters.len() != ids.len() {
            return Err(RaftError::InvalidVoterSet(ids.to_vec()));
        }
        Ok(Self { voters })
    }

    /// KIP-853: the set of a replica started with only `controller.quorum.bootstrap.servers`
    /// before its log or a snapshot gave it one. Nobody is its voter, so that replica is an
    /// observer and never stands; the first set it fetches may differ from it by any number.
    pub fn unknown() -> Self {
        Self {
            voters: BTreeMap::new(),
        }
    }

    /// A set from voters with their details. Rejects an empty one.
    pub fn from_voters(voters: BTreeMap<NodeId, VoterInfo>) -> Result<Self, RaftError> {
        if voters.is_empty() {
            return Err(RaftError::InvalidVoterSet(Vec::new()));
        }
        Ok(Self { voters })
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.voters.contains_key(&id)
    }

    /// The directory id this set records for voter `id` (`None`: not a voter).
    pub fn directory_id_of(&self, id: NodeId) -> Option<[u8; 16]> {
        self.voters.get(&id).map(|info| info.directory_id)
    }

    /// KIP-853 `VoterSet.isVoter(ReplicaKey)`: replica `id` with disk `directory_id` is this
    /// set's voter `id` when the set records no directory id for it, or the same one. A replica
    /// whose disk was replaced (same id, new directory id) is not that voter: it is an
    /// observer until it is removed and added again with its new directory id.
    pub fn is_voter_key(&self, id: NodeId, directory_id: [u8; 16]) -> bool {
        self.voters.get(&id).is_some_and(|info| {
            info.directory_id == NO_DIRECTORY_ID || info.directory_id == directory_id
        })
    }

    pub fn len(&self) -> usize {
        self.voters.len()
    }

    /// False except for [`VoterSet::unknown`].
    pub fn is_empty(&self) -> bool {
        self.voters.is_empty()
    }

    /// Votes (or durable copies) needed for a decision: a strict majority.
    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    /// The voter ids in increasing order.
    pub fn ids(&self) -> Vec<NodeId> {
        self.voters.keys().copied().collect()
    }

    pub fn iter_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.voters.keys().copied()
    }

    pub fn voters(&self) -> &BTreeMap<NodeId, VoterInfo> {
        &self.voters
    }

    /// This set with `id` added.
    pub fn with_voter(&self, id: NodeId, info: VoterInfo) -> VoterSet {
        let mut voters = self.voters.clone();
        voters.insert(id, info);
        VoterSet { voters }
    }

    /// This set without `id`; `None` if that would leave it empty.
    pub fn without_voter(&self, id: NodeId) -> Option<VoterSet> {
        let mut voters = self.voters.clone();
        voters.remove(&id);
        (!voters.is_empty()).then_some(VoterSet { voters })
    }

    /// How many ids are in exactly one of the two sets. Consecutive voter sets differ by at
    /// most one: then every majority of one intersects every majority of the other.
    pub fn id_difference(&self, other: &VoterSet) -> usize {
        let only_here = self
            .voters
            .keys()
            .filter(|id| !other.contains(**id))
            .count();
        let only_there = other
            .voters
            .keys()
            .filter(|id| !self.contains(**id))
            .count();
        only_here + only_there
    }
}

/// One voter set record found in the log (or the set a snapshot holds), for a restarting
/// replica: see [`crate::Raft::recover`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoterSetEntry {
    /// The record's offset; for the set read from the snapshot at the log start, any offset
    /// below the log start (e.g. the snapshot's end offset − 1).
    pub offset: u64,
    pub voters: VoterSet,
}

/// The voter sets a replica's log holds, by offset, over the bootstrap set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoterSetHistory {
    /// In force below the first entry (`controller.quorum.voters`).
    bootstrap: VoterSet,
    /// Strictly increasing offsets.
    entries: Vec<VoterSetEntry>,
}

impl VoterSetHistory {
    pub fn new(bootstrap: VoterSet) -> Self {
        Self {
            bootstrap,
            entries: Vec::new(),
        }
    }

    /// The history a restarting replica rebuilds from its snapshot and log. Offsets must
    /// increase.
    pub fn recovered(bootstrap: VoterSet, entries: Vec<VoterSetEntry>) -> Result<Self, RaftError> {
        if entries.windows(2).any(|w| w[0].offset >= w[1].offset) {
            return Err(RaftError::InvalidRecoveredState(
                "voter set records not in increasing offset order",
            ));
        }
        Ok(Self { bootstrap, entries })
    }

    /// The set in force before any record (`controller.quorum.voters`).
    pub fn bootstrap(&self) -> &VoterSet {
        &self.bootstrap
    }

    /// The newest voter set in the log (what the replica acts on).
    pub fn latest(&self) -> &VoterSet {
        self.entries.last().map_or(&self.bootstrap, |e| &e.voters)
    }

    /// The offset of the newest voter set record, `None` while only the bootstrap set applies.
    pub fn latest_offset(&self) -> Option<u64> {
        self.entries.last().map(|e| e.offset)
    }

    /// The committed voter set: the newest record below `high_watermark`, or the bootstrap set.
    pub fn committed(&self, high_watermark: u64) -> &VoterSet {
        let index = self.entries.partition_point(|e| e.offset < high_watermark);
        index
            .checked_sub(1)
            .map_or(&self.bootstrap, |i| &self.entries[i].voters)
    }

    /// The voter set in force at `offset`: the newest record at or below it.
    pub fn at(&self, offset: u64) -> &VoterSet {
        let index = self.entries.partition_point(|e| e.offset <= offset);
        if index == 0 {
            &self.bootstrap
        } else {
            &self.entries[index - 1].voters
        }
    }

    /// The newest voter set record at or below `offset`; `None` while only the bootstrap set
    /// applies there (what a snapshot ending after `offset` carries, KIP-853).
    pub fn recorded_at(&self, offset: u64) -> Option<&VoterSet> {
        let index = self.entries.partition_point(|e| e.offset <= offset);
        index.checked_sub(1).map(|i| &self.entries[i].voters)
    }

    pub fn entries(&self) -> &[VoterSetEntry] {
        &self.entries
    }

    /// A voter set record was appended at `offset` (past every entry).
    pub fn add_at(&mut self, offset: u64, voters: VoterSet) {
        assert!(
            self.latest_offset().is_none_or(|last| last < offset),
            "voter set at {offset} appended before the latest at {:?}",
            self.latest_offset()
        );
        self.entries.push(VoterSetEntry { offset, voters });
    }

    /// The log was truncated to `offset`: records at and above it are gone, and the set in
    /// force reverts to the newest one left. Returns whether the latest set changed.
    pub fn truncate_from(&mut self, offset: u64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.offset < offset);
        self.entries.len() != before
    }

    /// The log now starts at `offset`: records below it go, except the newest of them, which
    /// is still in force there (and is also what the snapshot at `offset` holds).
    pub fn trim_before(&mut self, offset: u64) {
        let below = self.entries.partition_point(|e| e.offset < offset);
        if below > 1 {
            self.entries.drain(..below - 1);
        }
    }

    /// A fetched snapshot ending at `offset` was installed and the log reset to start there:
    /// the snapshot's voter set (none: the bootstrap set) is the only one left.
    pub fn reset_to_snapshot(&mut self, offset: u64, voters: Option<VoterSet>) {
        self.entries.clear();
        if let Some(voters) = voters {
            self.entries.push(VoterSetEntry {
                offset: offset.saturating_sub(1),
                voters,
            });
        }
    }
}

// ---- the VotersRecord value (KIP-853), Kafka's flexible encoding at version 0 ----

/// `VotersRecord` schema version written here.
pub const VOTERS_RECORD_VERSION: i16 = 0;

impl VoterSet {
    /// Encodes KIP-853's `VotersRecord` v0: Version int16, Voters compact array of {VoterId
    /// int32, VoterDirectoryId uuid, Endpoints compact array of {Name compact string, Host
    /// compact string, Port uint16, tagged fields}, KRaftVersionFeature {MinSupportedVersion
    /// int16, MaxSupportedVersion int16, tagged fields}, tagged fields}, tagged fields.
    pub fn encode_record_value(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&VOTERS_RECORD_VERSION.to_be_bytes());
        put_uvarint(&mut out, self.voters.len() as u64 + 1);
        for (id, info) in &self.voters {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&info.directory_id);
            put_uvarint(&mut out, info.endpoints.len() as u64 + 1);
            for endpoint in &info.endpoints {
                for text in [&endpoint.name, &endpoint.host] {
                    put_uvarint(&mut out, text.len() as u64 + 1);
                    out.extend_from_slice(text.as_bytes());
                }
                out.extend_from_slice(&endpoint.port.to_be_bytes());
                out.push(0); // tagged fields
            }
            // KRaftVersionFeature: this node supports kraft.version 0 to 1.
            out.extend_from_slice(&0i16.to_be_bytes());
            out.extend_from_slice(&1i16.to_be_bytes());
            out.push(0); // tagged fields of KRaftVersionFeature
            out.push(0); // tagged fields of Voter
        }
        out.push(0); // tagged fields of VotersRecord
        out
    }

    /// Decodes a `VotersRecord` value. Anything malformed is a typed error (the bytes came from
    /// a peer or a disk).
    pub fn decode_record_value(value: &[u8]) -> Result<VoterSet, RaftError> {
        let mut reader = ValueReader { data: value, at: 0 };
        let version = reader.i16()?;
        if version < 0 {
            return Err(malformed("negative version"));
        }
        let count = reader.compact_len()?.ok_or(malformed("null Voters"))?;
        let mut voters = BTreeMap::new();
        for _ in 0..count {
            let id = reader.i32()?;
            let mut directory_id = [0u8; 16];
            directory_id.copy_from_slice(reader.take(16)?);
            let endpoint_count = reader.compact_len()?.ok_or(malformed("null Endpoints"))?;
            let mut endpoints = Vec::new();
            for _ in 0..endpoint_count {
                let name = reader.compact_string()?;
                let host = reader.compact_string()?;
                let port = u16::from_be_bytes(reader.take(2)?.try_into().expect("2 bytes"));
                reader.skip_tagged_fields()?;
                endpoints.push(Endpoint { name, host, port });
            }
            reader.take(4)?; // KRaftVersionFeature min and max
            reader.skip_tagged_fields()?;
            reader.skip_tagged_fields()?;
            if voters
                .insert(
                    id,
                    VoterInfo {
                        directory_id,
                        endpoints,
                    },
                )
                .is_some()
            {
                return Err(malformed("duplicate voter id"));
            }
        }
        reader.skip_tagged_fields()?;
        if reader.at != value.len() {
            return Err(malformed("trailing bytes"));
        }
        VoterSet::from_voters(voters).map_err(|_| malformed("empty voter set"))
    }
}

// ---- the KRaftVersionRecord value (KIP-853, control type 5) ----

/// `kraft.version` 1: the voter set lives in the log (VotersRecord). Version 0 is the static
/// `controller.quorum.voters` set, which has no record.
pub const KRAFT_VERSION_DYNAMIC: i16 = 1;
/// `KRaftVersionRecord` schema version written here.
pub const KRAFT_VERSION_RECORD_VERSION: i16 = 0;

/// Encodes KIP-853's `KRaftVersionRecord` v0 (flexible): Version int16, KRaftVersion int16,
/// tagged fields.
pub fn encode_kraft_version_record(kraft_version: i16) -> Vec<u8> {
    let mut out = Vec::with_capacity(5);
    out.extend_from_slice(&KRAFT_VERSION_RECORD_VERSION.to_be_bytes());
    out.extend_from_slice(&kraft_version.to_be_bytes());
    out.push(0); // tagged fields
    out
}

/// Decodes a `KRaftVersionRecord` value: its `KRaftVersion`. Malformed bytes are a typed error.
pub fn decode_kraft_version_record(value: &[u8]) -> Result<i16, RaftError> {
    let malformed = RaftError::MalformedVotersRecord;
    let mut reader = ValueReader { data: value, at: 0 };
    let version = reader
        .i16()
        .map_err(|_| malformed("KRaftVersionRecord truncated"))?;
    if version < 0 {
        return Err(malformed("KRaftVersionRecord negative version"));
    }
    let kraft_version = reader
        .i16()
        .map_err(|_| malformed("KRaftVersionRecord truncated"))?;
    reader
        .skip_tagged_fields()
        .map_err(|_| malformed("KRaftVersionRecord tagged fields"))?;
    if reader.at != value.len() || kraft_version < 0 {
        return Err(malformed("KRaftVersionRecord malformed"));
    }
    Ok(kraft_version)
}

fn malformed(reason: &'static str) -> RaftError {
    RaftError::MalformedVotersRecord(reason)
}

fn put_uvarint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

struct ValueReader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> ValueReader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], RaftError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.data.len())
            .ok_or(malformed("truncated"))?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn i16(&mut self) -> Result<i16, RaftError> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn i32(&mut self) -> Result<i32, RaftError> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn uvarint(&mut self) -> Result<u64, RaftError> {
        let mut value = 0u64;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed("varint too long"))
    }

    /// A compact array or string length: `None` for null. Bounded by the bytes left, so a
    /// hostile length allocates nothing.
    fn compact_len(&mut self) -> Result<Option<usize>, RaftError> {
        let raw = self.uvarint()?;
        if raw == 0 {
            return Ok(None);
        }
        let len = (raw - 1) as usize;
        if len > self.data.len() - self.at {
            return Err(malformed("length past the end"));
        }
        Ok(Some(len))
    }

    fn compact_string(&mut self) -> Result<String, RaftError> {
        let len = self.compact_len()?.ok_or(malformed("null string"))?;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| malformed("string not UTF-8"))
    }

    fn skip_tagged_fields(&mut self) -> Result<(), RaftError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            self.uvarint()?; // tag
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[NodeId]) -> VoterSet {
        VoterSet::from_ids(ids).unwrap()
    }

    #[test]
    fn history_follows_appends_truncations_and_the_log_start() {
        // The worked example of the module doc.
        let mut history = VoterSetHistory::new(set(&[1, 2, 3]));
        assert_eq!(history.latest(), &set(&[1, 2, 3]));
        history.add_at(40, set(&[1, 2, 3, 4]));
        history.add_at(90, set(&[1, 2, 4]));
        assert_eq!(history.at(39), &set(&[1, 2, 3]));
        assert_eq!(history.at(40), &set(&[1, 2, 3, 4]));
        assert_eq!(history.at(1000), &set(&[1, 2, 4]));
        assert_eq!(
            history.recorded_at(39),
            None,
            "only the bootstrap set applies"
        );
        assert_eq!(history.recorded_at(40), Some(&set(&[1, 2, 3, 4])));
        // KIP-595: a truncated voter set record is no longer in force.
        assert!(history.truncate_from(90));
        assert_eq!(history.latest(), &set(&[1, 2, 3, 4]));
        assert!(!history.truncate_from(91));
        history.add_at(95, set(&[1, 2, 4]));
        history.trim_before(100);
        assert_eq!(history.entries().len(), 1);
        assert_eq!(history.latest(), &set(&[1, 2, 4]));
        history.reset_to_snapshot(200, None);
        assert_eq!(history.latest(), &set(&[1, 2, 3]));
        assert_eq!(history.latest_offset(), None);
    }

    #[test]
    fn consecutive_sets_differ_by_one() {
        let a = set(&[1, 2, 3]);
        assert_eq!(a.id_difference(&a.with_voter(4, VoterInfo::default())), 1);
        assert_eq!(a.id_difference(&a.without_voter(3).unwrap()), 1);
        assert_eq!(a.id_difference(&set(&[1, 2, 4])), 2);
        assert!(set(&[1]).without_voter(1).is_none());
        assert_eq!(set(&[1, 2, 3, 4]).majority(), 3);
    }

    #[test]
    fn kraft_version_record_round_trips_and_rejects_garbage() {
        let value = encode_kraft_version_record(KRAFT_VERSION_DYNAMIC);
        // Kafka's bytes: Version 0, KRaftVersion 1, no tagged fields.
        assert_eq!(value, vec![0, 0, 0, 1, 0]);
        assert_eq!(decode_kraft_version_record(&value), Ok(1));
        for cut in 0..value.len() {
            assert!(decode_kraft_version_record(&value[..cut]).is_err(), "{cut}");
        }
        assert!(decode_kraft_version_record(&[0, 0, 0, 1, 0, 0]).is_err());
        assert!(decode_kraft_version_record(&[0, 0, 0xff, 0xff, 0]).is_err());
    }

    #[test]
    fn voters_record_round_trips_and_rejects_garbage() {
        let voters = set(&[1, 2]).with_voter(
            7,
            VoterInfo {
                directory_id: [9; 16],
                endpoints: vec![Endpoint {
                    name: "CONTROLLER".into(),
                    host: "localhost".into(),
                    port: 9093,
                }],
            },
        );
        let value = voters.encode_record_value();
        assert_eq!(VoterSet::decode_record_value(&value).unwrap(), voters);
        for cut in 0..value.len() {
            assert!(
                VoterSet::decode_record_value(&value[..cut]).is_err(),
                "{cut}"
            );
        }
        let mut longer = value.clone();
        longer.push(0);
        assert!(VoterSet::decode_record_value(&longer).is_err());
        // An empty voter set: Version 0, Voters = [] , no tags.
        assert!(VoterSet::decode_record_value(&[0, 0, 1, 0]).is_err());
        // A hostile length allocates nothing and fails.
        assert!(VoterSet::decode_record_value(&[0, 0, 0xff, 0xff, 0xff, 0x7f]).is_err());
    }
}
