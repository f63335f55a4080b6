//! What the host-driven simulator checks, from the hosts' outputs and their logs read back.
//!
//! Each node's log is followed through what its host reports (`LeaderAppended`,
//! `FollowerAppended`, `Truncated`), never by reading the disk while I/O is in flight (a read
//! could wait for a flush and so change the run); it is read back through the host only where
//! nothing is in flight: at each (re)start, after `Host::open` recovered it, and once the
//! cluster converged.
//!
//! | check | rule |
//! | --- | --- |
//! | one leader per epoch | KIP-595 election safety, after every event |
//! | what the host reported durable survives a crash | the recovered log holds every batch below the durable end offset the core had been told (`Persisted::Log`) |
//! | a granted vote survives a crash | a vote response left, so after a restart the quorum-state names that vote (or a later epoch, or a leader) |
//! | log matching | two logs holding a batch with the same (base offset, epoch) hold the same bytes and predecessor |
//! | committed prefix | every batch a `HighWatermark` output passes is the one first seen committed at that offset (same bytes, same epoch), was submitted by a client (or is a control batch), and no high-watermark splits a batch or moves back within a life |
//! | no committed truncation | a truncation never goes below the node's high-watermark nor removes a committed batch |
//! | final logs | once converged, every node's log read through its host equals the leader's from its log start, and holds every committed batch at or above it |
//! | a commit is durable on a majority | a leader's new high-watermark H: the batch ending at H − 1 is durable (the durable end its host reported, or the claim noted at a crash) on a majority of the voter set in force in the leader's log as its outputs describe it (KIP-853: a set is in force once appended) |
//! | one voter change at a time | consecutive voter sets in any log differ by one voter at most, and a leader appends a voter set only once the previous one in its log is below its high-watermark ([`super::reconfig`]) |

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::{Bytes, BytesMut};
use ringlog_engine::batch::batches;
use ringlog_engine::io::MemoryIo;

use crate::host::{Host, StorageError};
use crate::records::{is_control_batch, voter_sets_in};
use crate::sim::invariants::unstamped;
use crate::types::{Epoch, NodeId, PartitionId};
use crate::voters::VoterSet;

mod state;
mod voters;

/// One batch of a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Batch {
    pub base_offset: u64,
    pub last_offset: u64,
    pub epoch: Epoch,
    pub bytes: Bytes,
}

impl Batch {
    fn key(&self) -> BatchKey {
        (self.base_offset, self.epoch)
    }
}

/// A batch's identity in a log: (base offset, epoch).
type BatchKey = (u64, Epoch);

/// A log as its host described it: the batches from `start` (the first may begin below it
/// after a log-start advance).
#[derive(Debug, Default)]
pub(super) struct LogCopy {
    pub start: u64,
    pub batches: Vec<Batch>,
}

impl LogCopy {
    fn end(&self) -> u64 {
        self.batches
            .last()
            .map_or(self.start, |b| b.last_offset + 1)
    }
}

/// Reads a partition's whole log through the host (only while no I/O is in flight).
pub(super) fn read_log(
    host: &mut Host<MemoryIo>,
    partition: PartitionId,
) -> Result<LogCopy, StorageError> {
    let store = host.store(partition).expect("hosted partition");
    let start = store.log.log_start_offset().max(0) as u64;
    let end = store.log.log_end_offset().max(0) as u64;
    let mut log = LogCopy {
        start,
        batches: Vec::new(),
    };
    let mut offset = start;
    while offset < end {
        let bytes = host.read(partition, offset, 1 << 20)?;
        let parsed = parse(&bytes);
        let Some(last) = parsed.last() else {
            break;
        };
        let next = last.last_offset + 1;
        log.batches
            .extend(parsed.into_iter().filter(|b| b.last_offset >= offset));
        if next <= offset {
            break;
        }
        offset = next;
    }
    Ok(log)
}

/// The batches of `bytes` (whole, valid ones; the first error ends the list).
fn parse(bytes: &Bytes) -> Vec<Batch> {
    batches(bytes)
        .map_while(Result::ok)
        .map(|b| Batch {
            base_offset: b.base_offset() as u64,
            last_offset: b.last_offset() as u64,
            epoch: b.partition_leader_epoch() as Epoch,
            bytes: b.into_bytes(),
        })
        .collect()
}

#[derive(Default)]
struct PartitionChecks {
    leaders_by_epoch: BTreeMap<Epoch, NodeId>,
    /// Log matching: every batch ever in any log, by (base offset, epoch).
    registry: HashMap<BatchKey, Bytes>,
    /// …and the batch before it, where a log showed it.
    predecessors: HashMap<BatchKey, BatchKey>,
    /// The committed batches by base offset, as first passed by a high-watermark.
    committed: BTreeMap<u64, Batch>,
    /// Unstamped client batches ever appended at a leader.
    submitted: HashSet<Bytes>,
    /// The committed voter sets (KIP-853 VotersRecord) by offset: the set in force at a log
    /// start that a snapshot moved past them.
    committed_voters: BTreeMap<u64, VoterSet>,
    /// KIP-630: the committed log replayed into a reference state machine.
    reference: state::Reference,
}

impl PartitionChecks {
    fn committed_end(&self) -> u64 {
        self.committed
            .last_key_value()
            .map_or(0, |(_, b)| b.last_offset + 1)
    }
}

#[derive(Default)]
pub(super) struct Checks {
    partitions: Vec<PartitionChecks>,
    /// Each live node's logs, as its outputs describe them.
    logs: BTreeMap<(NodeId, PartitionId), LogCopy>,
    /// The high-watermark each live node announced in this life.
    high_watermarks: BTreeMap<(NodeId, PartitionId), u64>,
    /// The newest vote each node let leave: (epoch, candidate).
    votes: BTreeMap<(NodeId, PartitionId), (Epoch, NodeId)>,
    /// At a crash: the durable end offset the host had reported to the core, and the batches
    /// below it, which the recovered log must still hold.
    durable_claims: BTreeMap<(NodeId, PartitionId), (u64, Vec<Batch>)>,
    /// The voter sets in each live node's log, as its outputs describe it: (offset, set).
    voter_sets: BTreeMap<(NodeId, PartitionId), Vec<(u64, VoterSet)>>,
    /// The configured voters: the set in force before any VotersRecord.
    bootstrap: Option<VoterSet>,
    /// Every node that was ever in a voter set of any log (never wiped but for a voter's disk
    /// replaced in reconfig runs, and the only ones that may lead).
    pub ever_voters: BTreeSet<NodeId>,
    pub violation: Option<String>,
}

impl Checks {
    pub fn new(partitions: PartitionId, bootstrap: VoterSet) -> Checks {
        Checks {
            partitions: (0..partitions)
                .map(|_| PartitionChecks::default())
                .collect(),
            ever_voters: bootstrap.iter_ids().collect(),
            bootstrap: Some(bootstrap),
            ..Checks::default()
        }
    }

    pub(super) fn fail(&mut self, message: String) {
        self.violation.get_or_insert(message);
    }

    pub fn committed_batches(&self) -> usize {
        self.partitions.iter().map(|p| p.committed.len()).sum()
    }

    pub fn client_batches_committed(&self) -> usize {
        self.partitions
            .iter()
            .flat_map(|p| p.committed.values())
            .filter(|b| !is_control_batch(&b.bytes))
            .count()
    }

    pub fn elections(&self) -> usize {
        self.partitions
            .iter()
            .map(|p| p.leaders_by_epoch.len())
            .sum()
    }

    /// A client's batches, as handed to a leader.
    pub fn on_submitted(&mut self, partition: PartitionId, batches: &[Bytes]) {
        let submitted = &mut self.partitions[partition as usize].submitted;
        for batch in batches {
            submitted.insert(unstamped(batch));
        }
    }

    /// KIP-595: at most one leader per epoch.
    pub fn on_leader(&mut self, node: NodeId, partition: PartitionId, epoch: Epoch) {
        let leaders = &mut self.partitions[partition as usize].leaders_by_epoch;
        match leaders.get(&epoch) {
            Some(&other) if other != node => self.fail(format!(
                "partition {partition}: two leaders in epoch {epoch}: {other} and {node}"
            )),
            Some(_) => {}
            None => {
                leaders.insert(epoch, node);
            }
        }
    }

    /// `node` let a granted vote for `candidate` in `epoch` leave.
    pub fn on_vote_sent(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        epoch: Epoch,
        candidate: NodeId,
    ) {
        let vote = self
            .votes
            .entry((node, partition))
            .or_insert((epoch, candidate));
        if epoch >= vote.0 {
            *vote = (epoch, candidate);
        }
    }

    /// The process died: what its outputs said is gone with it (the disk is read at restart),
    /// except what its host had reported durable (`durable_ends`, the core's view per
    /// partition), which the restart must find.
    pub fn on_crash(&mut self, node: NodeId, durable_ends: &[(PartitionId, u64)]) {
        for &(partition, durable_end) in durable_ends {
            let claimed = self
                .logs
                .get(&(node, partition))
                .map(|log| {
                    log.batches
                        .iter()
                        .filter(|b| b.last_offset < durable_end)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            self.durable_claims
                .insert((node, partition), (durable_end, claimed));
        }
        self.logs.retain(|(n, _), _| *n != node);
        self.high_watermarks.retain(|(n, _), _| *n != node);
        self.voter_sets.retain(|(n, _), _| *n != node);
    }

    /// `node`'s disk was replaced by an empty one (an observer, or a voter whose every voter set
    /// entry names the old disk, so the new one's votes and copies count for nothing until it is
    /// added again, KIP-853): nothing it held is expected back.
    pub fn on_wipe(&mut self, node: NodeId) {
        self.durable_claims.retain(|(n, _), _| *n != node);
        self.votes.retain(|(n, _), _| *n != node);
        self.logs.retain(|(n, _), _| *n != node);
        self.high_watermarks.retain(|(n, _), _| *n != node);
        self.voter_sets.retain(|(n, _), _| *n != node);
    }

    /// What the host reported durable before a crash is in the recovered log (Raft: a voter
    /// may not forget an entry it acknowledged).
    fn check_durable_claim(&mut self, node: NodeId, partition: PartitionId, log: &LogCopy) {
        let Some((durable_end, claimed)) = self.durable_claims.remove(&(node, partition)) else {
            return;
        };
        if log.start >= durable_end {
            return;
        }
        let lost = if log.end() < durable_end {
            Some(log.end())
        } else {
            claimed
                .iter()
                .filter(|b| b.base_offset >= log.start)
                .find(|b| {
                    let index = log
                        .batches
                        .partition_point(|r| r.base_offset < b.base_offset);
                    log.batches.get(index) != Some(b)
                })
                .map(|b| b.base_offset)
        };
        if let Some(offset) = lost {
            self.fail(format!(
                "partition {partition}: node {node} lost offset {offset} at a crash, below the durable end {durable_end} its host had reported (acknowledged before it was durable)"
            ));
        }
    }

    /// `node` (re)started: its recovered logs are read back, checked for log matching, and its
    /// quorum-state must still hold every vote it let leave (KIP-595: a vote is durable before
    /// its response leaves).
    pub fn on_start(&mut self, node: NodeId, host: &mut Host<MemoryIo>) {
        for partition in 0..self.partitions.len() as PartitionId {
            let raft = host.raft(partition).expect("hosted partition");
            let recovered = raft.election_state();
            let high_watermark = raft.high_watermark();
            if let Some(&(epoch, candidate)) = self.votes.get(&(node, partition)) {
                let kept = recovered.epoch > epoch
                    || (recovered.epoch == epoch
                        && (recovered.voted_for == Some(candidate)
                            || recovered.leader_id.is_some()));
                if !kept {
                    self.fail(format!(
                        "partition {partition}: node {node} granted its vote to {candidate} in epoch {epoch}, but after a crash its quorum-state holds {recovered:?}: the vote left before it was durable"
                    ));
                }
            }
            let log = match read_log(host, partition) {
                Ok(log) => log,
                Err(error) => {
                    self.fail(format!(
                        "partition {partition}: node {node}: reading the recovered log: {error}"
                    ));
                    return;
                }
            };
            self.check_durable_claim(node, partition, &log);
            let mut previous = None;
            self.voter_sets.insert((node, partition), Vec::new());
            self.logs.insert(
                (node, partition),
                LogCopy {
                    start: log.start,
                    batches: Vec::new(),
                },
            );
            for batch in &log.batches {
                self.register(node, partition, previous, batch);
                self.note_voter_sets(node, partition, batch, false);
                previous = Some(batch.key());
            }
            self.logs.insert((node, partition), log);
            self.high_watermarks
                .insert((node, partition), high_watermark);
        }
    }

    /// Log matching: a batch with the same (base offset, epoch) as one seen anywhere holds the
    /// same bytes and follows the same batch.
    fn register(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        previous: Option<BatchKey>,
        batch: &Batch,
    ) {
        let checks = &mut self.partitions[partition as usize];
        let key = batch.key();
        let mut differs = match checks.registry.get(&key) {
            Some(bytes) => *bytes != batch.bytes,
            None => {
                checks.registry.insert(key, batch.bytes.clone());
                false
            }
        };
        if let Some(previous) = previous {
            match checks.predecessors.get(&key) {
                Some(known) => differs |= *known != previous,
                None => {
                    checks.predecessors.insert(key, previous);
                }
            }
        }
        if differs {
            self.fail(format!(
                "partition {partition}: node {node}: batch at offset {} epoch {} differs from another replica's (log matching)",
                batch.base_offset, batch.epoch
            ));
        }
    }

    /// Appends to `node`'s copy of its log, checking that each batch continues it.
    fn append(&mut self, node: NodeId, partition: PartitionId, added: Vec<Batch>, as_leader: bool) {
        let Some(log) = self.logs.get_mut(&(node, partition)) else {
            return;
        };
        let mut previous = log.batches.last().map(Batch::key);
        let mut end = log.end();
        let mut registered = Vec::with_capacity(added.len());
        for batch in added {
            if batch.base_offset != end {
                let message = format!(
                    "partition {partition}: node {node} appended a batch at {} to a log ending at {end}",
                    batch.base_offset
                );
                self.fail(message);
                return;
            }
            end = batch.last_offset + 1;
            registered.push((previous, batch.clone()));
            previous = Some(batch.key());
            log.batches.push(batch);
        }
        for (previous, batch) in registered {
            self.register(node, partition, previous, &batch);
            self.note_voter_sets(node, partition, &batch, as_leader);
        }
    }

    /// The leader appended `batches` from `base_offset` in `epoch`: the engine stamps each
    /// batch's base offset and partition leader epoch (outside the CRC) and nothing else.
    pub fn on_leader_appended(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        base_offset: u64,
        epoch: Epoch,
        appended: &[Bytes],
    ) {
        let mut offset = base_offset;
        let mut added = Vec::with_capacity(appended.len());
        for batch in appended {
            let mut bytes = BytesMut::from(&batch[..]);
            bytes[0..8].copy_from_slice(&(offset as i64).to_be_bytes());
            bytes[12..16].copy_from_slice(&(epoch as i32).to_be_bytes());
            let last_offset_delta =
                u32::from_be_bytes([bytes[23], bytes[24], bytes[25], bytes[26]]);
            let last_offset = offset + u64::from(last_offset_delta);
            added.push(Batch {
                base_offset: offset,
                last_offset,
                epoch,
                bytes: bytes.freeze(),
            });
            offset = last_offset + 1;
        }
        self.append(node, partition, added, true);
    }

    pub fn on_follower_appended(&mut self, node: NodeId, partition: PartitionId, records: &Bytes) {
        self.append(node, partition, parse(records), false);
    }

    /// The log was cut at `offset` (a diverging tail), or, with `snapshot`, now starts and ends
    /// there (a fetched snapshot was installed).
    pub fn on_truncated(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        offset: u64,
        snapshot: bool,
    ) {
        let high_watermark = self
            .high_watermarks
            .get(&(node, partition))
            .copied()
            .unwrap_or(0);
        let Some(log) = self.logs.get_mut(&(node, partition)) else {
            return;
        };
        let voter_sets = self.voter_sets.entry((node, partition)).or_default();
        if snapshot {
            *log = LogCopy {
                start: offset,
                batches: Vec::new(),
            };
            voter_sets.clear();
            return;
        }
        voter_sets.retain(|(at, _)| *at < offset);
        let keep = log.batches.partition_point(|b| b.base_offset < offset);
        let removed = log.batches.split_off(keep);
        let split = log.batches.last().is_some_and(|b| b.last_offset >= offset);
        let checks = &self.partitions[partition as usize];
        let committed_removed = removed.iter().find(|b| {
            checks
                .committed
                .get(&b.base_offset)
                .is_some_and(|c| c.epoch == b.epoch)
        });
        if offset < high_watermark {
            self.fail(format!(
                "partition {partition}: node {node} truncated to {offset}, below its high-watermark {high_watermark}"
            ));
        } else if split {
            self.fail(format!(
                "partition {partition}: node {node} truncated to {offset}, inside a batch"
            ));
        } else if let Some(batch) = committed_removed {
            let base_offset = batch.base_offset;
            self.fail(format!(
                "partition {partition}: node {node} truncated committed batch at offset {base_offset}"
            ));
        }
    }

    /// `node`'s high-watermark moved to `high_watermark`: every batch it passes must be the
    /// committed one at its offset (recorded when first passed on any node).
    pub fn on_high_watermark(&mut self, node: NodeId, partition: PartitionId, high_watermark: u64) {
        let old = self
            .high_watermarks
            .insert((node, partition), high_watermark)
            .unwrap_or(0);
        if high_watermark < old {
            self.fail(format!(
                "partition {partition}: node {node}: high-watermark moved back from {old} to {high_watermark}"
            ));
            return;
        }
        let Some(log) = self.logs.get(&(node, partition)) else {
            return;
        };
        let checks = &mut self.partitions[partition as usize];
        let first = log.batches.partition_point(|b| b.last_offset < old);
        let mut violation = None;
        let mut newly_committed = Vec::new();
        for batch in &log.batches[first..] {
            if batch.base_offset >= high_watermark {
                break;
            }
            if batch.last_offset >= high_watermark {
                violation = Some(format!(
                    "node {node}: high-watermark {high_watermark} inside the batch at {}",
                    batch.base_offset
                ));
                break;
            }
            match checks.committed.get(&batch.base_offset) {
                Some(committed) if committed.bytes == batch.bytes => {}
                Some(committed) => {
                    violation = Some(format!(
                        "node {node}: committed offset {} holds a different batch (epoch {}) than first committed there (epoch {}): a committed record was lost",
                        batch.base_offset, batch.epoch, committed.epoch
                    ));
                    break;
                }
                None if batch.base_offset < checks.committed_end()
                    && checks
                        .committed
                        .range(..batch.base_offset)
                        .next_back()
                        .is_some_and(|(_, before)| before.last_offset >= batch.base_offset) =>
                {
                    violation = Some(format!(
                        "node {node}: committed batch at {} overlaps another committed batch",
                        batch.base_offset
                    ));
                    break;
                }
                None => {
                    if !is_control_batch(&batch.bytes)
                        && !checks.submitted.contains(&unstamped(&batch.bytes))
                    {
                        violation = Some(format!(
                            "node {node}: committed batch at {} was never submitted",
                            batch.base_offset
                        ));
                        break;
                    }
                    if is_control_batch(&batch.bytes) {
                        for (offset, voters) in voter_sets_in(&batch.bytes).unwrap_or_default() {
                            checks.committed_voters.insert(offset, voters);
                        }
                    }
                    checks.committed.insert(batch.base_offset, batch.clone());
                    newly_committed.push(batch.clone());
                }
            }
        }
        for batch in &newly_committed {
            self.feed_reference(partition, batch);
        }
        if let Some(violation) = violation {
            self.fail(format!("partition {partition}: {violation}"));
        }
    }

    /// After convergence: every node's log, read back through its host, equals the leader's
    /// from its own log start and holds every committed batch from there on.
    pub fn final_logs(
        &mut self,
        partition: PartitionId,
        leader: NodeId,
        logs: &BTreeMap<NodeId, LogCopy>,
    ) {
        let leader_log = &logs[&leader];
        let committed = &self.partitions[partition as usize].committed;
        let mut violation = None;
        'nodes: for (&node, log) in logs {
            if log.end() != leader_log.end() {
                violation = Some(format!(
                    "node {node}'s log ends at {}, the leader {leader}'s at {}",
                    log.end(),
                    leader_log.end()
                ));
                break;
            }
            let by_offset: BTreeMap<u64, &Batch> =
                log.batches.iter().map(|b| (b.base_offset, b)).collect();
            for batch in leader_log
                .batches
                .iter()
                .filter(|b| b.base_offset >= log.start)
            {
                if by_offset.get(&batch.base_offset) != Some(&batch) {
                    violation = Some(format!(
                        "node {node}'s log differs from the leader {leader}'s at offset {}",
                        batch.base_offset
                    ));
                    break 'nodes;
                }
            }
            for batch in committed.values().filter(|b| b.base_offset >= log.start) {
                if by_offset.get(&batch.base_offset) != Some(&batch) {
                    violation = Some(format!(
                        "node {node} lost the committed batch at offset {} (epoch {})",
                        batch.base_offset, batch.epoch
                    ));
                    break 'nodes;
                }
            }
        }
        if let Some(violation) = violation {
            self.fail(format!("partition {partition}: {violation}"));
        }
    }
}

#[cfg(test)]
mod tests {
    //! The restart checks can fail: fed a history the host must never produce, they report it.

    use super::*;
    use crate::QuorumConfig;
    use crate::host::{HostConfig, PartitionSpec};
    use crate::state_machine::SnapshotPolicyConfig;
    use ringlog_engine::log::LogConfig;

    fn open_fresh_host() -> Host<MemoryIo> {
        let quorum = QuorumConfig::new(1, &[1, 2, 3]).expect("three voters");
        let config = HostConfig::new(
            "checks".into(),
            vec![1, 2, 3],
            SnapshotPolicyConfig::default(),
            1 << 20,
        );
        let spec = PartitionSpec {
            id: 0,
            dir: "/data/partition-0".into(),
            log_config: LogConfig::default(),
            keeps_snapshots: false,
        };
        Host::open(MemoryIo::with_seed(1), config, &quorum, vec![spec], 1, 0).expect("open")
    }

    /// KIP-595: a vote response that left must be on disk; a node that restarts without it
    /// (a fresh quorum-state, epoch 0) is reported.
    #[test]
    fn a_vote_that_left_and_is_not_on_disk_after_a_restart_is_reported() {
        let mut checks = Checks::new(1, VoterSet::from_ids(&[1, 2, 3]).expect("voters"));
        checks.on_vote_sent(1, 0, 5, 2);
        checks.on_crash(1, &[(0, 0)]);
        checks.on_start(1, &mut open_fresh_host());
        let violation = checks.violation.expect("the forgotten vote is reported");
        assert!(violation.contains("before it was durable"), "{violation}");
    }

    /// Raft: a voter may not forget an entry its host reported durable; a restart whose log
    /// ends below that durable end is reported.
    #[test]
    fn a_durable_end_missing_after_a_restart_is_reported() {
        let mut checks = Checks::new(1, VoterSet::from_ids(&[1, 2, 3]).expect("voters"));
        checks.on_crash(1, &[(0, 3)]);
        checks.on_start(1, &mut open_fresh_host());
        let violation = checks
            .violation
            .expect("the lost durable records are reported");
        assert!(violation.contains("lost offset 0"), "{violation}");
    }

    /// A leader's high-watermark over a batch only it holds durably is reported; once a
    /// second voter of three reports it durable, the same move passes.
    #[test]
    fn a_commit_durable_on_a_minority_is_reported() {
        let mut checks = Checks::new(1, VoterSet::from_ids(&[1, 2, 3]).expect("voters"));
        let mut host = open_fresh_host();
        checks.on_start(1, &mut host);
        checks.on_start(2, &mut host);
        let batch = crate::records::build_batch(&[(None, Some(&b"v"[..]))], false, 0);
        checks.on_submitted(0, std::slice::from_ref(&batch));
        checks.on_leader_appended(1, 0, 0, 1, std::slice::from_ref(&batch));
        let alone = BTreeMap::from([(1, 1), (2, 0)]);
        checks.on_leader_high_watermark(1, 0, 1, &alone);
        let violation = checks
            .violation
            .take()
            .expect("a minority commit is reported");
        assert!(violation.contains("not on a majority"), "{violation}");
        let stamped = checks.logs[&(1, 0)].batches[0].bytes.clone();
        checks.on_follower_appended(2, 0, &stamped);
        let two = BTreeMap::from([(1, 1), (2, 1)]);
        checks.on_leader_high_watermark(1, 0, 1, &two);
        assert_eq!(checks.violation, None);
    }

    /// A node that restarts with what it reported is not reported.
    #[test]
    fn a_restart_that_keeps_everything_passes() {
        let mut checks = Checks::new(1, VoterSet::from_ids(&[1, 2, 3]).expect("voters"));
        checks.on_crash(1, &[(0, 0)]);
        checks.on_start(1, &mut open_fresh_host());
        assert_eq!(checks.violation, None);
    }
}
