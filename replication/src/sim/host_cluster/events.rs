//! The simulator's event queue: what can happen (a delivery, a tick, a disk completion, a fault,
//! …), ordered by time and then by scheduling order, and the trace hash over it.

use std::cmp::Ordering;
use std::hash::Hasher;
use std::path::PathBuf;

use crate::host::SnapshotJob;
use crate::message::Message;
use crate::types::{NodeId, PartitionId};

/// FNV-1a, so trace hashes do not depend on std's hasher.
pub(super) struct Fnv(pub(super) u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
}

pub(super) enum EventKind {
    /// `to_incarnation`: the recipient's life when the message was sent (a restart means new
    /// connections, so nothing sent to an earlier life arrives); `from_incarnation`: the
    /// sender's, which a fetch answer is addressed to.
    Deliver {
        from: NodeId,
        from_incarnation: u64,
        to: NodeId,
        to_incarnation: u64,
        partition: PartitionId,
        message: Message,
    },
    Tick {
        node: NodeId,
        incarnation: u64,
    },
    /// The disk completed something: the runtime pumps the host.
    Pump {
        node: NodeId,
        incarnation: u64,
    },
    /// The snapshot writer (a thread in production) finished an `Output::GenerateSnapshot`.
    SnapshotWritten {
        node: NodeId,
        incarnation: u64,
        partition: PartitionId,
        dir: PathBuf,
        job: SnapshotJob,
    },
    Fault,
    HealNetwork,
    Restart {
        node: NodeId,
    },
    ClientAppend,
    /// KIP-853: a voter change on a random partition's leader (reconfig runs).
    VoterChange,
    EndFaults,
}

impl EventKind {
    /// For `--trace`.
    pub(super) fn name(&self) -> String {
        match self {
            EventKind::Deliver { .. } => "deliver".into(),
            EventKind::Tick { node, .. } => format!("tick {node}"),
            EventKind::Pump { node, .. } => format!("pump {node}"),
            EventKind::SnapshotWritten { node, job, .. } => {
                format!("snapshot written on {node} at {}", job.snapshot_id.offset)
            }
            EventKind::Fault => "fault".into(),
            EventKind::HealNetwork => "heal".into(),
            EventKind::Restart { node } => format!("restart {node}"),
            EventKind::ClientAppend => "client append".into(),
            EventKind::VoterChange => "voter change".into(),
            EventKind::EndFaults => "end of faults".into(),
        }
    }
}

pub(super) struct Event {
    pub(super) at_ms: u64,
    pub(super) seq: u64,
    pub(super) kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ms, self.seq) == (other.at_ms, other.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    // Reversed: BinaryHeap pops the earliest (time, sequence) first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at_ms, other.seq).cmp(&(self.at_ms, self.seq))
    }
}
