//! What a snapshot file's header carries beyond the state (KIP-630, KIP-853): the voter set
//! and kraft.version in force at its end offset, and the producer state (docs/snapshots.md);
//! and the conversion between the core's and the engine's snapshot ids.

use super::*;

pub(super) fn engine_id(id: OffsetAndEpoch) -> SnapshotId {
    SnapshotId {
        end_offset: id.offset as i64,
        epoch: id.epoch as i32,
    }
}

pub(super) fn core_id(id: SnapshotId) -> OffsetAndEpoch {
    OffsetAndEpoch::new(id.end_offset.max(0) as u64, id.epoch.max(0) as u32)
}

/// KIP-853: the voter set a snapshot carries (its `VotersRecord`, after the header), if any.
/// A record that does not decode makes the snapshot unusable: its files cannot be trusted.
pub fn voters_of_snapshot(contents: &SnapshotContents) -> Result<Option<VoterSet>, StorageError> {
    let Some((_, value)) = contents
        .header_control_records
        .iter()
        .rev()
        .find(|(record_type, _)| *record_type == ControlRecordType::KRaftVoters)
    else {
        return Ok(None);
    };
    let value = value.as_deref().unwrap_or_default();
    VoterSet::decode_record_value(value)
        .map(Some)
        .map_err(|error| StorageError::Inconsistent {
            path: contents.path.display().to_string(),
            reason: format!("snapshot voter set: {error}"),
        })
}

/// The control records after a snapshot's header (Kafka's layout): with a voter set in the log
/// (kraft.version 1), the `KRaftVersionRecord` and then the `VotersRecord` in force at its end
/// offset (KIP-853; none while only `controller.quorum.voters` applies); then the partition's
/// producer state at its end offset, when the runtime gave one (a `ProducerState` record,
/// ringlog's own: docs/snapshots.md).
pub(super) fn header_records(
    voters: Option<&VoterSet>,
    producer_state: Option<&Bytes>,
) -> Vec<(ControlRecordType, Bytes)> {
    let mut records = Vec::new();
    if let Some(voters) = voters {
        records.push((
            ControlRecordType::KRaftVersion,
            Bytes::from(crate::voters::encode_kraft_version_record(
                crate::voters::KRAFT_VERSION_DYNAMIC,
            )),
        ));
        records.push((
            ControlRecordType::KRaftVoters,
            Bytes::from(voters.encode_record_value()),
        ));
    }
    if let Some(producer_state) = producer_state {
        records.push((ControlRecordType::ProducerState, producer_state.clone()));
    }
    records
}

/// The producer state a snapshot carries (its `ProducerState` record's value, opaque here: the
/// runtime encodes and reads it), if any: snapshots written before it existed have none.
pub fn producer_state_of_snapshot(contents: &SnapshotContents) -> Option<Bytes> {
    contents
        .header_control_records
        .iter()
        .rev()
        .find(|(record_type, _)| *record_type == ControlRecordType::ProducerState)
        .map(|(_, value)| value.clone().unwrap_or_default())
}

/// KIP-853: the kraft.version a snapshot's `KRaftVersionRecord` names, if it holds one.
pub fn kraft_version_of_snapshot(contents: &SnapshotContents) -> Result<Option<i16>, StorageError> {
    let Some((_, value)) = contents
        .header_control_records
        .iter()
        .rev()
        .find(|(record_type, _)| *record_type == ControlRecordType::KRaftVersion)
    else {
        return Ok(None);
    };
    crate::voters::decode_kraft_version_record(value.as_deref().unwrap_or_default())
        .map(Some)
        .map_err(|error| StorageError::Inconsistent {
            path: contents.path.display().to_string(),
            reason: format!("snapshot kraft.version: {error}"),
        })
}
