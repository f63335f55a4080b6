//! Committed offsets as records of `__consumer_offsets`, in Kafka's own format, and the reads
//! the coordinator makes of the partition's key-value state.
//!
//! One record per committed partition, keyed so the partition's key-value state machine
//! (latest value per key, a null value deletes; the same one snapshot topics use) holds
//! exactly the latest commit of each (group, topic, partition):
//!
//! ```text
//! key   = OffsetCommitKey   version 1:  int16 1 | group string | topic string | partition int32
//! value = OffsetCommitValue version 3:  int16 3 | offset int64 | leader_epoch int32
//!                                       | metadata string | commit_timestamp int64
//! ```
//!
//! (strings: int16 length + UTF-8, big-endian numbers; Kafka's
//! `OffsetCommitKey.json`/`OffsetCommitValue.json`, so Kafka's tools can read the topic).
//! A tombstone (null value) deletes a commit: OffsetDelete and DeleteGroups write them.
//!
//! All keys of one group share the prefix `int16 1 | group string`, and the state is an
//! ordered map, so a group's offsets are one range and the next group starts where the range
//! ends: OffsetFetch of a whole group and ListGroups never scan another group's keys.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::{BufMut, Bytes, BytesMut};

/// The internal topic holding committed offsets (Kafka's name).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's OffsetCommitKey version (0 and 1 have the same fields).
const KEY_VERSION: i16 = 1;
/// The OffsetCommitValue version written: 3 is the first with the leader epoch (KIP-320).
const VALUE_VERSION: i16 = 3;

/// A record of `__consumer_offsets` that this node cannot read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OffsetRecordError {
    #[error("offset commit record: {0}")]
    Malformed(&'static str),
    #[error("offset commit record: version {0} is not read")]
    Version(i16),
}

/// The `__consumer_offsets` partition that holds `group_id`'s offsets, and whose leader is
/// its coordinator: Kafka's `Utils.abs(groupId.hashCode) % partitions`, with Java's
/// `String.hashCode` over UTF-16 code units, so a group lands where Kafka would put it.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    assert!(
        partitions > 0,
        "__consumer_offsets has at least one partition"
    );
    let hash = group_id.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    // Kafka's Utils.abs: Integer.MIN_VALUE maps to 0.
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions
}

/// One committed offset (OffsetCommitValue).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// KIP-320: the leader epoch of the last consumed record, -1 when the client sent none.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// The longest string a record holds: its length is an int16. A compact string of a
/// flexible request version may be longer; such a group id or topic has no record.
pub const STRING_BYTES_MAX: usize = i16::MAX as usize;

/// The key of one committed partition; `None` if the group id or topic is longer than a
/// record string can be.
pub fn offset_key(group_id: &str, topic: &str, partition: i32) -> Option<Bytes> {
    let mut key = group_prefix(group_id)?;
    put_string(&mut key, topic)?;
    key.put_i32(partition);
    Some(key.freeze())
}

/// `int16 1 | group string`: what every key of the group starts with.
fn group_prefix(group_id: &str) -> Option<BytesMut> {
    let mut key = BytesMut::with_capacity(2 + 2 + group_id.len() + 2 + 32 + 4);
    key.put_i16(KEY_VERSION);
    put_string(&mut key, group_id)?;
    Some(key)
}

pub(super) fn put_string(buf: &mut BytesMut, text: &str) -> Option<()> {
    let len = i16::try_from(text.len()).ok()?;
    buf.put_i16(len);
    buf.put_slice(text.as_bytes());
    Some(())
}

/// The value of one commit (OffsetCommitValue version 3); `None` if the metadata is longer
/// than a record string can be (`offset.metadata.max.bytes` refuses it before this).
pub fn offset_value(committed: &CommittedOffset) -> Option<Bytes> {
    let mut value = BytesMut::with_capacity(2 + 8 + 4 + 2 + committed.metadata.len() + 8);
    value.put_i16(VALUE_VERSION);
    value.put_i64(committed.offset);
    value.put_i32(committed.leader_epoch);
    put_string(&mut value, &committed.metadata)?;
    value.put_i64(committed.commit_timestamp_ms);
    Some(value.freeze())
}

/// A bounded reader over one record's bytes.
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], OffsetRecordError> {
        if self.0.len() < n {
            return Err(OffsetRecordError::Malformed("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    pub(super) fn i16(&mut self) -> Result<i16, OffsetRecordError> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    pub(super) fn i32(&mut self) -> Result<i32, OffsetRecordError> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub(super) fn i64(&mut self) -> Result<i64, OffsetRecordError> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    pub(super) fn string(&mut self) -> Result<&'a str, OffsetRecordError> {
        let len = usize::try_from(self.i16()?)
            .map_err(|_| OffsetRecordError::Malformed("negative string length"))?;
        std::str::from_utf8(self.take(len)?).map_err(|_| OffsetRecordError::Malformed("utf-8"))
    }
    pub(super) fn end(&self) -> Result<(), OffsetRecordError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(OffsetRecordError::Malformed("bytes after the last field"))
        }
    }
}

/// (group, topic, partition) of an offset commit key. Other keys (Kafka's group metadata,
/// version 2) are `Version` errors: not offsets.
pub fn decode_offset_key(key: &[u8]) -> Result<(&str, &str, i32), OffsetRecordError> {
    let mut r = Reader(key);
    let version = r.i16()?;
    if !(0..=KEY_VERSION).contains(&version) {
        return Err(OffsetRecordError::Version(version));
    }
    let group = r.string()?;
    let topic = r.string()?;
    let partition = r.i32()?;
    r.end()?;
    Ok((group, topic, partition))
}

/// An OffsetCommitValue of version 0 to 3 (version 1 carries an expire timestamp, ignored;
/// versions before 3 have no leader epoch: -1).
pub fn decode_offset_value(value: &[u8]) -> Result<CommittedOffset, OffsetRecordError> {
    let mut r = Reader(value);
    let version = r.i16()?;
    if !(0..=VALUE_VERSION).contains(&version) {
        return Err(OffsetRecordError::Version(version));
    }
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.string()?.to_string();
    let commit_timestamp_ms = r.i64()?;
    if version == 1 {
        let _expire_timestamp = r.i64()?;
    }
    r.end()?;
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

/// The first key after every key that starts with `prefix` (`None`: nothing sorts after).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

pub(super) fn range_of(prefix: &[u8]) -> (Bound<Bytes>, Bound<Bytes>) {
    let start = Bound::Included(Bytes::copy_from_slice(prefix));
    let end = prefix_end(prefix).map_or(Bound::Unbounded, |e| Bound::Excluded(Bytes::from(e)));
    (start, end)
}

/// One committed offset of a group, as the partition's state holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOffset {
    pub topic: String,
    pub partition: i32,
    pub committed: CommittedOffset,
}

/// Every committed offset of `group_id` in `state` (a `__consumer_offsets` partition's
/// key-value state), in (topic, partition) key order. Records this node cannot read are
/// skipped (only the node writes this topic; a skipped record is logged at debug).
pub fn group_offsets(state: &BTreeMap<Bytes, Bytes>, group_id: &str) -> Vec<GroupOffset> {
    let Some(prefix) = group_prefix(group_id) else {
        return Vec::new();
    };
    state
        .range(range_of(&prefix))
        .filter_map(|(key, value)| {
            let decoded = decode_offset_key(key).and_then(|(group, topic, partition)| {
                Ok((group, topic, partition, decode_offset_value(value)?))
            });
            match decoded {
                Ok((group, topic, partition, committed)) if group == group_id => {
                    Some(GroupOffset {
                        topic: topic.to_string(),
                        partition,
                        committed,
                    })
                }
                Ok(_) => None,
                Err(error) => {
                    tracing::debug!(%error, "unreadable __consumer_offsets record skipped");
                    None
                }
            }
        })
        .collect()
}

/// Whether a group's offsets may expire, as its coordinator sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupActivity {
    /// The group has members (or is rebalancing). `subscribed`: the topics its members
    /// subscribe to, known for a Stable group of the consumer protocol; the offsets of other
    /// topics expire by their commit time (Kafka's rule). `None`: every offset is kept.
    Members {
        subscribed: Option<std::collections::BTreeSet<String>>,
    },
    /// No member. `since_ms`: when it became empty (wall-clock ms), if the coordinator knows.
    Empty { since_ms: Option<i64> },
}

/// The keys of the offsets that expired at `now_ms` (wall-clock ms) with
/// `offsets.retention.minutes` = `retention_ms`, KIP-211's rule: a group with members keeps
/// every offset (a Stable consumer group only those of the topics it subscribes to: the others
/// expire `retention_ms` after their commit); a group without members loses an offset once `retention_ms` passed since the
/// later of its commit and the moment the group became empty (when known; Kafka counts from
/// the emptying alone, and from the commit for a group that never had members). The caller
/// appends a tombstone per key through the log, so every replica and every snapshot drops the
/// same offsets; no replica decides on its own clock.
pub fn expired_offset_keys(
    state: &BTreeMap<Bytes, Bytes>,
    now_ms: i64,
    retention_ms: i64,
    mut activity: impl FnMut(&str) -> GroupActivity,
) -> Vec<Bytes> {
    let mut expired = Vec::new();
    for group_id in groups_with_offsets(state) {
        let (since_ms, subscribed) = match activity(&group_id) {
            GroupActivity::Members { subscribed: None } => continue,
            GroupActivity::Members {
                subscribed: Some(topics),
            } => (i64::MIN, Some(topics)),
            GroupActivity::Empty { since_ms } => (since_ms.unwrap_or(i64::MIN), None),
        };
        for o in group_offsets(state, &group_id) {
            if subscribed.as_ref().is_some_and(|t| t.contains(&o.topic)) {
                continue;
            }
            let base_ms = o.committed.commit_timestamp_ms.max(since_ms);
            if base_ms.saturating_add(retention_ms) <= now_ms
                && let Some(key) = offset_key(&group_id, &o.topic, o.partition)
            {
                expired.push(key);
            }
        }
    }
    expired
}

/// The committed offset of one partition, if any.
pub fn committed_offset(
    state: &BTreeMap<Bytes, Bytes>,
    group_id: &str,
    topic: &str,
    partition: i32,
) -> Option<CommittedOffset> {
    let value = state.get(&offset_key(group_id, topic, partition)?)?;
    decode_offset_value(value).ok()
}

/// Whether `group_id` has any committed offset in `state`.
pub fn has_offsets(state: &BTreeMap<Bytes, Bytes>, group_id: &str) -> bool {
    group_prefix(group_id).is_some_and(|prefix| state.range(range_of(&prefix)).next().is_some())
}

/// The groups with committed offsets in `state`, in key order, each found with one lookup:
/// after a group's first key the search jumps past the group's whole range.
pub fn groups_with_offsets(state: &BTreeMap<Bytes, Bytes>) -> Vec<String> {
    let mut groups = Vec::new();
    let mut version_prefix = BytesMut::new();
    version_prefix.put_i16(KEY_VERSION);
    let (_, end) = range_of(&version_prefix);
    let mut from: Bound<Bytes> = Bound::Included(version_prefix.freeze());
    while let Some((key, _)) = state.range((from.clone(), end.clone())).next() {
        from = match decode_offset_key(key) {
            Ok((group, _, _)) => {
                groups.push(group.to_string());
                // A decoded group id fits a record string, so it has a prefix.
                match group_prefix(group).and_then(|prefix| prefix_end(&prefix)) {
                    Some(next) => Bound::Included(Bytes::from(next)),
                    None => break,
                }
            }
            Err(_) => Bound::Excluded(key.clone()),
        };
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(offset: i64) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp_ms: 1_700_000_000_000,
        }
    }

    /// Kafka's coordinator placement: `Utils.abs(groupId.hashCode) % partitions`, with the
    /// hash codes Java's `String.hashCode` gives (31·h + UTF-16 unit, wrapping).
    #[test]
    fn a_group_lands_on_the_partition_kafka_would_choose() {
        // "my-group".hashCode() == -1906497762: abs, then modulo.
        assert_eq!(partition_for("my-group", 50), 1_906_497_762 % 50);
        assert_eq!(partition_for("", 50), 0);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs gives 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // "groupe-é".hashCode() == 506365602 (é is one UTF-16 unit, two UTF-8 bytes).
        assert_eq!(partition_for("groupe-é", 50), 506_365_602 % 50);
        // "g😀".hashCode() == 1871882: the emoji is a surrogate pair, two units.
        assert_eq!(partition_for("g\u{1F600}", 10), 1_871_882 % 10);
    }

    #[test]
    fn keys_and_values_are_kafkas_bytes_and_read_back() {
        let key = offset_key("g", "t", 2).unwrap();
        assert_eq!(
            key.as_ref(),
            &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 2],
            "OffsetCommitKey v1"
        );
        assert_eq!(decode_offset_key(&key), Ok(("g", "t", 2)));
        let value = offset_value(&committed(42)).unwrap();
        assert_eq!(&value[..2], &[0, 3], "OffsetCommitValue v3");
        assert_eq!(decode_offset_value(&value), Ok(committed(42)));
        // Version 1 (with the expire timestamp) and 0 read too, without an epoch.
        let mut v1 = BytesMut::new();
        v1.put_i16(1);
        v1.put_i64(5);
        v1.put_i16(0);
        v1.put_i64(10);
        v1.put_i64(20);
        let read = decode_offset_value(&v1).unwrap();
        assert_eq!((read.offset, read.leader_epoch), (5, -1));
    }

    #[test]
    fn unreadable_records_are_typed_errors_never_panics() {
        let value = offset_value(&committed(1)).unwrap();
        for cut in 0..value.len() {
            assert!(decode_offset_value(&value[..cut]).is_err(), "cut at {cut}");
        }
        let key = offset_key("group", "topic", 0).unwrap();
        for cut in 0..key.len() {
            assert!(decode_offset_key(&key[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(
            decode_offset_key(&[0, 2, 0, 1, b'g']),
            Err(OffsetRecordError::Version(2))
        );
        assert!(
            decode_offset_key(&[0, 1, 0xff, 0xff]).is_err(),
            "negative length"
        );
        // A compact string of a flexible request may pass 32767 bytes: no key, no panic.
        let long = "x".repeat(STRING_BYTES_MAX + 1);
        assert_eq!(offset_key(&long, "t", 0), None);
        assert_eq!(offset_key("g", &long, 0), None);
        assert!(!has_offsets(&BTreeMap::new(), &long));
        let mut longer = value.to_vec();
        longer.push(0);
        assert!(decode_offset_value(&longer).is_err());
    }

    /// KIP-211: a group with members keeps its offsets however old; a group without members
    /// loses them `retention` after the later of the commit and the moment it became empty; a
    /// group whose emptying is not known (it never had members here) counts from each commit.
    #[test]
    fn offsets_expire_retention_after_the_group_became_empty() {
        let retention_ms = 60_000;
        let mut state = BTreeMap::new();
        let mut put = |group: &str, partition: i32, commit_timestamp_ms: i64| {
            let value = CommittedOffset {
                commit_timestamp_ms,
                ..committed(5)
            };
            state.insert(
                offset_key(group, "t", partition).unwrap(),
                offset_value(&value).unwrap(),
            );
        };
        put("live", 0, 1_000);
        put("emptied", 0, 1_000);
        put("simple", 0, 1_000);
        put("simple", 1, 50_000);
        state.insert(
            offset_key("live", "unsubscribed", 0).unwrap(),
            offset_value(&CommittedOffset {
                commit_timestamp_ms: 1_000,
                ..committed(5)
            })
            .unwrap(),
        );
        let activity = |group: &str| match group {
            "live" => GroupActivity::Members {
                subscribed: Some(["t".to_string()].into()),
            },
            "emptied" => GroupActivity::Empty {
                since_ms: Some(30_000),
            },
            _ => GroupActivity::Empty { since_ms: None },
        };
        let expired = |now_ms| -> Vec<(String, i32)> {
            expired_offset_keys(&state, now_ms, retention_ms, activity)
                .iter()
                .map(|key| {
                    let (group, _, partition) = decode_offset_key(key).unwrap();
                    (group.to_string(), partition)
                })
                .collect()
        };
        assert_eq!(expired(60_999), []);
        // The commit of simple-0 is 60 s old; emptied's commit too, but it emptied at 30 s.
        // A Stable group's offsets of a topic it no longer subscribes to expire by commit time.
        assert_eq!(
            expired(61_000),
            [("live".to_string(), 0), ("simple".to_string(), 0)]
        );
        assert_eq!(
            expired(90_000),
            // Key order: a group id's length comes first.
            [
                ("live".to_string(), 0),
                ("simple".to_string(), 0),
                ("emptied".to_string(), 0)
            ]
        );
        assert_eq!(expired(110_000).len(), 4);
        let keys = expired_offset_keys(&state, i64::MAX, retention_ms, activity);
        assert_eq!(keys.len(), 4);
        assert!(
            !keys.contains(&offset_key("live", "t", 0).unwrap()),
            "a group with members keeps the offsets of the topics it subscribes to"
        );
    }

    #[test]
    fn a_groups_offsets_are_one_range_and_groups_are_listed_once_each() {
        let mut state = BTreeMap::new();
        for (group, topic, partition, offset) in [
            ("a", "t", 0, 1),
            ("a", "t", 1, 2),
            ("a", "u", 0, 3),
            ("ab", "t", 0, 4),
            ("b", "t", 0, 5),
        ] {
            state.insert(
                offset_key(group, topic, partition).unwrap(),
                offset_value(&committed(offset)).unwrap(),
            );
        }
        // A record nobody can read, and Kafka's group metadata key (version 2): skipped.
        state.insert(Bytes::from_static(&[0, 1, 0, 1]), Bytes::from_static(b"?"));
        state.insert(
            Bytes::from_static(&[0, 2, 0, 1, b'a']),
            Bytes::from_static(b"?"),
        );
        let a: Vec<(String, i32, i64)> = group_offsets(&state, "a")
            .into_iter()
            .map(|o| (o.topic, o.partition, o.committed.offset))
            .collect();
        assert_eq!(
            a,
            vec![("t".into(), 0, 1), ("t".into(), 1, 2), ("u".into(), 0, 3)],
            "group \"ab\" is not part of \"a\""
        );
        assert_eq!(groups_with_offsets(&state), vec!["a", "b", "ab"]);
        assert!(has_offsets(&state, "ab"));
        assert!(!has_offsets(&state, "c"));
        assert_eq!(
            committed_offset(&state, "b", "t", 0).map(|c| c.offset),
            Some(5)
        );
    }
}
