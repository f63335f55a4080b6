//! The consumer protocol's bytes and the range assignor (Kafka's `ConsumerProtocol` and
//! `RangeAssignor`), which a group member runs when it leads its group ([`super::group`]):
//! subscriptions go into JoinGroup, the leader's assignments into SyncGroup, and every member
//! reads its own from the SyncGroup answer.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};

use super::TopicPartition;

/// Kafka's RangeAssignor: per topic, the members subscribed to it in member id order each get
/// a contiguous range of its partitions, the first `partitions % members` one more.
pub fn range_assign(
    members: &[(String, Vec<String>)],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut assignment: BTreeMap<String, Vec<TopicPartition>> = members
        .iter()
        .map(|(member_id, _)| (member_id.clone(), Vec::new()))
        .collect();
    for (topic, &count) in partitions {
        let mut subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(member_id, _)| member_id)
            .collect();
        subscribers.sort();
        subscribers.dedup();
        if subscribers.is_empty() || count <= 0 {
            continue;
        }
        let per_member = count as usize / subscribers.len();
        let extra = count as usize % subscribers.len();
        for (i, member_id) in subscribers.into_iter().enumerate() {
            let start = i * per_member + i.min(extra);
            let length = per_member + usize::from(i < extra);
            let owned = assignment
                .get_mut(member_id)
                .expect("every member has an entry");
            owned.extend(
                (start..start + length).map(|p| TopicPartition::new(topic.clone(), p as i32)),
            );
        }
    }
    assignment
}

/// `ConsumerProtocolSubscription` v0: `version int16 | topics [string] | user_data bytes`.
pub fn encode_subscription(topics: &[String]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    buf.put_i32(topics.len() as i32);
    for topic in topics {
        buf.put_i16(topic.len() as i16);
        buf.put_slice(topic.as_bytes());
    }
    // Null user data.
    buf.put_i32(-1);
    buf.freeze()
}

/// `ConsumerProtocolAssignment` v0:
/// `version int16 | [topic string | partitions [int32]] | user_data bytes`.
pub fn encode_assignment(partitions: &[TopicPartition]) -> Bytes {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    buf.put_i32(by_topic.len() as i32);
    for (topic, partitions) in by_topic {
        buf.put_i16(topic.len() as i16);
        buf.put_slice(topic.as_bytes());
        buf.put_i32(partitions.len() as i32);
        for partition in partitions {
            buf.put_i32(partition);
        }
    }
    buf.put_i32(-1);
    buf.freeze()
}

/// Reads a `ConsumerProtocolAssignment` (any version: the fields after the partitions are not
/// read). Empty bytes are an empty assignment (a member the leader left out). `None` when the
/// bytes do not hold one; counts are checked against the bytes left before anything is
/// allocated.
pub fn decode_assignment(bytes: &[u8]) -> Option<Vec<TopicPartition>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let mut rest = bytes;
    let mut take = |n: usize| -> Option<&[u8]> {
        if rest.len() < n {
            return None;
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Some(head)
    };
    let _version = i16::from_be_bytes(take(2)?.try_into().ok()?);
    let topics = usize::try_from(i32::from_be_bytes(take(4)?.try_into().ok()?)).ok()?;
    if topics > bytes.len() / 6 {
        return None;
    }
    let mut assignment = Vec::new();
    for _ in 0..topics {
        let len = usize::try_from(i16::from_be_bytes(take(2)?.try_into().ok()?)).ok()?;
        let topic = std::str::from_utf8(take(len)?).ok()?.to_string();
        let count = usize::try_from(i32::from_be_bytes(take(4)?.try_into().ok()?)).ok()?;
        if count > bytes.len() / 4 {
            return None;
        }
        for _ in 0..count {
            let partition = i32::from_be_bytes(take(4)?.try_into().ok()?);
            assignment.push(TopicPartition::new(topic.clone(), partition));
        }
    }
    Some(assignment)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|(m, topics)| {
                (
                    m.to_string(),
                    topics.iter().map(|t| t.to_string()).collect(),
                )
            })
            .collect()
    }

    /// Kafka's RangeAssignor javadoc example: two consumers C0, C1 subscribed to t0 and t1,
    /// three partitions each: C0 [t0p0, t0p1, t1p0, t1p1], C1 [t0p2, t1p2].
    #[test]
    fn the_range_assignor_gives_kafkas_ranges() {
        let members = members(&[("C1", &["t0", "t1"]), ("C0", &["t0", "t1"])]);
        let partitions = BTreeMap::from([("t0".to_string(), 3), ("t1".to_string(), 3)]);
        let assignment = range_assign(&members, &partitions);
        let names =
            |m: &str| -> Vec<String> { assignment[m].iter().map(|tp| tp.to_string()).collect() };
        assert_eq!(names("C0"), ["t0-0", "t0-1", "t1-0", "t1-1"]);
        assert_eq!(names("C1"), ["t0-2", "t1-2"]);
    }

    #[test]
    fn a_member_not_subscribed_to_a_topic_gets_none_of_it() {
        let members = members(&[("a", &["x"]), ("b", &["x", "y"])]);
        let partitions = BTreeMap::from([("x".to_string(), 4), ("y".to_string(), 2)]);
        let assignment = range_assign(&members, &partitions);
        let names =
            |m: &str| -> Vec<String> { assignment[m].iter().map(|tp| tp.to_string()).collect() };
        assert_eq!(names("a"), ["x-0", "x-1"]);
        assert_eq!(names("b"), ["x-2", "x-3", "y-0", "y-1"]);
    }

    #[test]
    fn subscriptions_and_assignments_are_kafkas_bytes_and_read_back() {
        let subscription = encode_subscription(&["ab".to_string()]);
        assert_eq!(
            &subscription[..],
            b"\x00\x00\x00\x00\x00\x01\x00\x02ab\xff\xff\xff\xff"
        );
        assert_eq!(
            crate::groups::subscription_topics(&subscription),
            Some(vec!["ab".to_string()])
        );
        let assigned = vec![TopicPartition::new("t", 3), TopicPartition::new("t", 1)];
        let bytes = encode_assignment(&assigned);
        assert_eq!(
            &bytes[..],
            b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x01\xff\xff\xff\xff"
        );
        assert_eq!(decode_assignment(&bytes), Some(assigned));
        assert_eq!(decode_assignment(&[]), Some(Vec::new()));
    }

    /// Every byte from a socket is hostile: a count larger than the bytes could hold is
    /// refused before anything is allocated, and a cut assignment is `None`.
    #[test]
    fn unreadable_assignments_are_refused() {
        assert_eq!(decode_assignment(b"\x00\x00\x7f\xff\xff\xff"), None);
        assert_eq!(
            decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff"),
            None
        );
        let bytes = encode_assignment(&[TopicPartition::new("t", 1)]);
        for cut in 1..bytes.len() - 4 {
            assert_eq!(decode_assignment(&bytes[..cut]), None, "cut at {cut}");
        }
    }
}
