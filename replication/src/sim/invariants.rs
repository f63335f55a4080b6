//! Helpers the host-driven simulator's checks share: a client batch as it was handed in, and
//! fingerprints of key-value states (the KIP-630 reference, `host_cluster/checks/state.rs`).

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

use crate::state_machine::KeyValueStateMachine;

/// A batch's bytes with the leader's stamps (base offset, partition leader epoch) cleared:
/// what the client handed in.
pub fn unstamped(bytes: &[u8]) -> Bytes {
    let mut out = BytesMut::from(bytes);
    out[0..8].fill(0);
    out[12..16].fill(0);
    out.freeze()
}

/// A fingerprint of a key-value state (FNV-1a over its entries in key order).
pub fn state_fingerprint(state: &KeyValueStateMachine) -> u64 {
    entries_fingerprint(state.entries())
}

/// [`state_fingerprint`] of a key-value map (a snapshot job's entries, say).
pub fn entries_fingerprint(entries: &BTreeMap<Bytes, Bytes>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for part in [&(bytes.len() as u64).to_be_bytes()[..], bytes] {
            for b in part {
                hash ^= u64::from(*b);
                hash = hash.wrapping_mul(0x100_0000_01b3);
            }
        }
    };
    for (key, value) in entries {
        eat(key);
        eat(value);
    }
    hash
}
