//! Group metadata records (Kafka's `GroupMetadataKey` v2 / `GroupMetadataValue` v3): what a
//! group's coordinator knows about its generation, protocol, leader and members, written to the
//! group's `__consumer_offsets` partition next to its offsets, so that a new coordinator after a
//! failover holds the group as the old one did (docs/groups.md, "Group metadata records").
//!
//! ```text
//! key   = GroupMetadataKey   v2:  int16 2 | group string
//! value = GroupMetadataValue v3:  int16 3 | protocol_type string | generation int32
//!         | protocol nullable string | leader nullable string | current_state_timestamp int64
//!         | members [ member_id string | group_instance_id nullable string | client_id string
//!                     | client_host string | rebalance_timeout int32 | session_timeout int32
//!                     | subscription bytes | assignment bytes ]
//! tombstone (null value): the group is deleted
//! ```
//!
//! Values of versions 0–3 are read (v0 has no rebalance timeout: the session timeout; v0–1 no
//! state timestamp: -1; v0–2 no instance id). The keys (version 2) sort after every offset key
//! (version 1), so the offsets' ranges never meet them.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::{BufMut, Bytes, BytesMut};

use super::offsets::{OffsetRecordError, Reader, put_string, range_of};

/// Kafka's GroupMetadataKey version.
const KEY_VERSION: i16 = 2;
/// The GroupMetadataValue version written (3: with static members' instance ids).
const VALUE_VERSION: i16 = 3;

/// A group as its metadata record holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMetadata {
    pub protocol_type: String,
    pub generation_id: i32,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    /// When the group entered its current state (wall-clock ms; -1 unknown). For an empty
    /// group: when it became empty (KIP-211's offset expiry counts from it).
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberMetadata>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberMetadata {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

impl GroupMetadata {
    /// The same group apart from the state timestamp (a record is written again only when
    /// this differs).
    pub fn same_group(&self, other: &GroupMetadata) -> bool {
        GroupMetadata {
            current_state_timestamp_ms: 0,
            ..self.clone()
        } == GroupMetadata {
            current_state_timestamp_ms: 0,
            ..other.clone()
        }
    }
}

/// The key of `group_id`'s metadata; `None` if the id is longer than a record string can be.
pub fn group_metadata_key(group_id: &str) -> Option<Bytes> {
    let mut key = BytesMut::with_capacity(4 + group_id.len());
    key.put_i16(KEY_VERSION);
    put_string(&mut key, group_id)?;
    Some(key.freeze())
}

/// The group id of a group metadata key (offset keys are `Version` errors).
pub fn decode_group_metadata_key(key: &[u8]) -> Result<&str, OffsetRecordError> {
    let mut r = Reader(key);
    let version = r.i16()?;
    if version != KEY_VERSION {
        return Err(OffsetRecordError::Version(version));
    }
    let group = r.string()?;
    r.end()?;
    Ok(group)
}

fn put_nullable_string(buf: &mut BytesMut, text: Option<&str>) -> Option<()> {
    match text {
        Some(text) => put_string(buf, text),
        None => {
            buf.put_i16(-1);
            Some(())
        }
    }
}

fn put_bytes(buf: &mut BytesMut, bytes: &[u8]) -> Option<()> {
    buf.put_i32(i32::try_from(bytes.len()).ok()?);
    buf.put_slice(bytes);
    Some(())
}

/// A GroupMetadataValue v3; `None` if a string is longer than a record string can be.
pub fn encode_group_metadata(group: &GroupMetadata) -> Option<Bytes> {
    let mut value = BytesMut::new();
    value.put_i16(VALUE_VERSION);
    put_string(&mut value, &group.protocol_type)?;
    value.put_i32(group.generation_id);
    put_nullable_string(&mut value, group.protocol_name.as_deref())?;
    put_nullable_string(&mut value, group.leader.as_deref())?;
    value.put_i64(group.current_state_timestamp_ms);
    value.put_i32(i32::try_from(group.members.len()).ok()?);
    for member in &group.members {
        put_string(&mut value, &member.member_id)?;
        put_nullable_string(&mut value, member.group_instance_id.as_deref())?;
        put_string(&mut value, &member.client_id)?;
        put_string(&mut value, &member.client_host)?;
        value.put_i32(member.rebalance_timeout_ms);
        value.put_i32(member.session_timeout_ms);
        put_bytes(&mut value, &member.subscription)?;
        put_bytes(&mut value, &member.assignment)?;
    }
    Some(value.freeze())
}

fn nullable_string(r: &mut Reader<'_>) -> Result<Option<String>, OffsetRecordError> {
    let mut peek = Reader(r.0);
    if peek.i16()? == -1 {
        r.i16()?;
        return Ok(None);
    }
    Ok(Some(r.string()?.to_string()))
}

fn bytes(r: &mut Reader<'_>) -> Result<Bytes, OffsetRecordError> {
    let len = usize::try_from(r.i32()?)
        .map_err(|_| OffsetRecordError::Malformed("negative bytes length"))?;
    Ok(Bytes::copy_from_slice(r.take(len)?))
}

/// A GroupMetadataValue of version 0 to 3. Every count is checked against the bytes left
/// before anything is allocated for it.
pub fn decode_group_metadata(value: &[u8]) -> Result<GroupMetadata, OffsetRecordError> {
    let mut r = Reader(value);
    let version = r.i16()?;
    if !(0..=VALUE_VERSION).contains(&version) {
        return Err(OffsetRecordError::Version(version));
    }
    let protocol_type = r.string()?.to_string();
    let generation_id = r.i32()?;
    let protocol_name = nullable_string(&mut r)?;
    let leader = nullable_string(&mut r)?;
    let current_state_timestamp_ms = if version >= 2 { r.i64()? } else { -1 };
    let count = usize::try_from(r.i32()?)
        .map_err(|_| OffsetRecordError::Malformed("negative member count"))?;
    // A member takes at least 2 + 2 + 2 + 4 + 4 + 4 + 4 bytes (v0: without the timeout).
    if count > r.0.len() / 18 {
        return Err(OffsetRecordError::Malformed(
            "member count beyond the record",
        ));
    }
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let member_id = r.string()?.to_string();
        let group_instance_id = if version >= 3 {
            nullable_string(&mut r)?
        } else {
            None
        };
        let client_id = r.string()?.to_string();
        let client_host = r.string()?.to_string();
        let rebalance_timeout_ms = if version >= 1 { Some(r.i32()?) } else { None };
        let session_timeout_ms = r.i32()?;
        members.push(MemberMetadata {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: rebalance_timeout_ms.unwrap_or(session_timeout_ms),
            session_timeout_ms,
            subscription: bytes(&mut r)?,
            assignment: bytes(&mut r)?,
        });
    }
    r.end()?;
    Ok(GroupMetadata {
        protocol_type,
        generation_id,
        protocol_name,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

/// `group_id`'s metadata in `state`, if it has a readable record.
pub fn group_metadata(state: &BTreeMap<Bytes, Bytes>, group_id: &str) -> Option<GroupMetadata> {
    let value = state.get(&group_metadata_key(group_id)?)?;
    decode_group_metadata(value)
        .inspect_err(|error| tracing::debug!(%error, group_id, "unreadable group metadata"))
        .ok()
}

/// Every group metadata record of `state`, in group id order (unreadable ones skipped).
pub fn all_group_metadata(state: &BTreeMap<Bytes, Bytes>) -> Vec<(String, GroupMetadata)> {
    let mut version_prefix = BytesMut::new();
    version_prefix.put_i16(KEY_VERSION);
    let range: (Bound<Bytes>, Bound<Bytes>) = range_of(&version_prefix);
    state
        .range(range)
        .filter_map(|(key, value)| {
            let group_id = decode_group_metadata_key(key).ok()?;
            let group = decode_group_metadata(value)
                .inspect_err(|error| tracing::debug!(%error, group_id, "unreadable group metadata"))
                .ok()?;
            Some((group_id.to_string(), group))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> GroupMetadata {
        GroupMetadata {
            protocol_type: "consumer".into(),
            generation_id: 4,
            protocol_name: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp_ms: 1_700_000_000_000,
            members: vec![MemberMetadata {
                member_id: "m-1".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 30_000,
                session_timeout_ms: 10_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"assigned"),
            }],
        }
    }

    #[test]
    fn group_metadata_is_kafkas_v3_and_reads_back() {
        let key = group_metadata_key("g").unwrap();
        assert_eq!(key.as_ref(), &[0, 2, 0, 1, b'g'], "GroupMetadataKey v2");
        assert_eq!(decode_group_metadata_key(&key), Ok("g"));
        assert!(
            decode_group_metadata_key(&crate::groups::offsets::offset_key("g", "t", 0).unwrap())
                .is_err()
        );
        let value = encode_group_metadata(&group()).unwrap();
        assert_eq!(&value[..2], &[0, 3]);
        assert_eq!(decode_group_metadata(&value), Ok(group()));
        let empty = GroupMetadata {
            protocol_name: None,
            leader: None,
            members: Vec::new(),
            ..group()
        };
        let bytes = encode_group_metadata(&empty).unwrap();
        assert_eq!(decode_group_metadata(&bytes), Ok(empty));
    }

    /// Every byte of the log is checked: a cut or an impossible count is an error, never a
    /// panic or an allocation of the count.
    #[test]
    fn unreadable_group_metadata_is_an_error() {
        let value = encode_group_metadata(&group()).unwrap();
        for cut in 0..value.len() {
            assert!(
                decode_group_metadata(&value[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut huge = value[..value.len()].to_vec();
        // The member count sits after the state timestamp.
        let at = 2 + 2 + 8 + 4 + 2 + 5 + 2 + 3 + 8;
        huge[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_group_metadata(&huge).is_err());
    }

    #[test]
    fn group_metadata_records_sort_apart_from_the_offsets() {
        let mut state = BTreeMap::new();
        state.insert(
            crate::groups::offsets::offset_key("a", "t", 0).unwrap(),
            Bytes::from_static(b"offset"),
        );
        state.insert(
            group_metadata_key("b").unwrap(),
            encode_group_metadata(&group()).unwrap(),
        );
        assert_eq!(all_group_metadata(&state), vec![("b".to_string(), group())]);
        assert_eq!(crate::groups::offsets::groups_with_offsets(&state), ["a"]);
        assert_eq!(group_metadata(&state, "b"), Some(group()));
        assert_eq!(group_metadata(&state, "a"), None);
    }
}
