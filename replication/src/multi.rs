//! Several partitions on one node: one [`Raft`] group per partition over the same voter set.
//! Messages and work are tagged with the partition, so a host can batch the fetches (and
//! other messages) bound for one peer into one request, as Kafka's Fetch carries many
//! partitions.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::error::RaftError;
use crate::message::Message;
use crate::raft::{AppendResult, Raft};
use crate::types::{NodeId, OffsetAndEpoch, PartitionId, QuorumConfig, RecoveredState};
use crate::voters::{VoterInfo, VoterSet, VoterSetEntry};
use crate::work::{Persisted, Work};

/// A message for one partition's group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartitionMessage {
    pub partition: PartitionId,
    pub message: Message,
}

/// Work for one partition's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionWork {
    pub partition: PartitionId,
    pub work: Work,
}

#[derive(Clone, Debug)]
pub struct MultiRaft {
    node_id: NodeId,
    partitions: BTreeMap<PartitionId, Raft>,
    /// Which groups the next tick reaches.
    ticks: TickSchedule,
    /// The groups reached since the last [`MultiRaft::take_touched`] (stepped, ticked,
    /// appended to, told of a persisted write or a snapshot, added): only these can show a
    /// state other than the one a host's observer last saw, so it looks at them alone rather
    /// than at every group on every turn.
    touched: BTreeSet<PartitionId>,
    /// The simulator checks that a resting group's tick has no work, by ticking a clone of
    /// every resting group on every tick ([`MultiRaft::set_check_resting_ticks`]).
    #[cfg(feature = "sim")]
    check_resting_ticks: bool,
}

/// Which groups a tick reaches. A group rests after a tick until the deadline that tick
/// returned, unless anything else reaches it first (a step, an append, a persisted report...):
/// then it is awake, and the next tick reaches it. A tick of a resting group would have no
/// work: every timer a tick acts on is in [`Raft::next_deadline_ms`], and nothing else
/// changed. Groups whose idle tick is not a no-op ([`Raft::idle_tick_is_noop`]: standing for
/// election, a leader waiting to advance its log start) stay awake. The deadline a group
/// rests until is a lower bound: a leader's check-quorum deadline, counting the leader as
/// fetching now, would come out later from a later tick, so it is ticked once early.
///
/// Every group is either awake or resting, never both.
#[derive(Clone, Debug, Default)]
struct TickSchedule {
    awake: BTreeSet<PartitionId>,
    /// Resting groups by the deadline they rest until, earliest first.
    resting: BTreeSet<(u64, PartitionId)>,
    /// Each resting group's deadline (its key in `resting`).
    resting_until: BTreeMap<PartitionId, u64>,
}

impl TickSchedule {
    fn wake(&mut self, partition: PartitionId) {
        if let Some(due) = self.resting_until.remove(&partition) {
            self.resting.remove(&(due, partition));
        }
        self.awake.insert(partition);
    }

    fn rest(&mut self, partition: PartitionId, until_ms: u64) {
        debug_assert!(!self.awake.contains(&partition));
        self.resting.insert((until_ms, partition));
        let before = self.resting_until.insert(partition, until_ms);
        debug_assert!(before.is_none(), "partition {partition} rests twice");
    }

    fn forget(&mut self, partition: PartitionId) {
        if let Some(due) = self.resting_until.remove(&partition) {
            self.resting.remove(&(due, partition));
        }
        self.awake.remove(&partition);
    }

    /// Wakes the groups whose deadline came and takes every awake one, in partition order.
    fn take_due(&mut self, now_ms: u64) -> BTreeSet<PartitionId> {
        while let Some(&(due, partition)) = self.resting.first()
            && due <= now_ms
        {
            self.resting.pop_first();
            self.resting_until.remove(&partition);
            self.awake.insert(partition);
        }
        std::mem::take(&mut self.awake)
    }

    fn earliest_resting_ms(&self) -> u64 {
        self.resting.first().map_or(u64::MAX, |&(due, _)| due)
    }
}

impl MultiRaft {
    /// One group per recovered partition; each gets its own RNG stream derived from `seed`.
    pub fn new(
        config: &QuorumConfig,
        partitions: &BTreeMap<PartitionId, RecoveredState>,
        seed: u64,
        now_ms: u64,
    ) -> Result<Self, RaftError> {
        let mut groups = BTreeMap::new();
        for (&partition, recovered) in partitions {
            let partition_seed = partition_seed(seed, partition);
            groups.insert(
                partition,
                Raft::new(config.clone(), recovered, partition_seed, now_ms)?,
            );
        }
        Ok(Self {
            node_id: config.node_id,
            ticks: TickSchedule {
                awake: groups.keys().copied().collect(),
                ..TickSchedule::default()
            },
            touched: groups.keys().copied().collect(),
            partitions: groups,
            #[cfg(feature = "sim")]
            check_resting_ticks: false,
        })
    }

    /// Starts one more group (a partition created after the node started, e.g. by a topic
    /// record committed to the metadata log). Its RNG stream is derived from `seed` as in
    /// [`MultiRaft::new`].
    pub fn add_partition(
        &mut self,
        config: &QuorumConfig,
        partition: PartitionId,
        recovered: &RecoveredState,
        seed: u64,
        now_ms: u64,
    ) -> Result<(), RaftError> {
        assert!(
            !self.partitions.contains_key(&partition),
            "partition {partition} already has a group"
        );
        self.partitions.insert(
            partition,
            Raft::new(
                config.clone(),
                recovered,
                partition_seed(seed, partition),
                now_ms,
            )?,
        );
        self.ticks.wake(partition);
        self.touched.insert(partition);
        Ok(())
    }

    /// Stops a partition's group (its topic was deleted): no more work or messages come from
    /// it, and a message for it is refused with `UnknownPartition`. Returns the group.
    pub fn remove_partition(&mut self, partition: PartitionId) -> Option<Raft> {
        self.ticks.forget(partition);
        self.touched.remove(&partition);
        self.partitions.remove(&partition)
    }

    /// [`MultiRaft::add_partition`] for a partition with snapshots on disk (KIP-630: a
    /// `cleanup.policy=snapshot` topic's partition restarting) and the voter set records its
    /// host found in the log-start snapshot and the log (KIP-853, [`Raft::recover`]).
    // Raft::recover's inputs plus the partition: one more than clippy's limit.
    #[allow(clippy::too_many_arguments)]
    pub fn add_partition_recovered(
        &mut self,
        config: &QuorumConfig,
        partition: PartitionId,
        recovered: &RecoveredState,
        snapshots: crate::types::RecoveredSnapshots,
        voter_records: Vec<VoterSetEntry>,
        seed: u64,
        now_ms: u64,
    ) -> Result<(), RaftError> {
        assert!(
            !self.partitions.contains_key(&partition),
            "partition {partition} already has a group"
        );
        let partition_seed = partition_seed(seed, partition);
        self.partitions.insert(
            partition,
            Raft::recover(
                config.clone(),
                recovered,
                snapshots,
                voter_records,
                partition_seed,
                now_ms,
            )?,
        );
        self.ticks.wake(partition);
        self.touched.insert(partition);
        Ok(())
    }

    /// [`MultiRaft::new`] for hosts that keep snapshots (KIP-630) and voter set records
    /// (KIP-853): each partition's recovered snapshots and voter set records (missing entries:
    /// none).
    pub fn new_recovered(
        config: &QuorumConfig,
        partitions: &BTreeMap<PartitionId, RecoveredState>,
        snapshots: &BTreeMap<PartitionId, crate::types::RecoveredSnapshots>,
        mut voter_records: BTreeMap<PartitionId, Vec<VoterSetEntry>>,
        seed: u64,
        now_ms: u64,
    ) -> Result<Self, RaftError> {
        let mut multi = Self {
            node_id: config.node_id,
            partitions: BTreeMap::new(),
            ticks: TickSchedule::default(),
            touched: BTreeSet::new(),
            #[cfg(feature = "sim")]
            check_resting_ticks: false,
        };
        for (&partition, recovered) in partitions {
            multi.add_partition_recovered(
                config,
                partition,
                recovered,
                snapshots.get(&partition).copied().unwrap_or_default(),
                voter_records.remove(&partition).unwrap_or_default(),
                seed,
                now_ms,
            )?;
        }
        Ok(multi)
    }

    /// A partition's state machine finished writing a snapshot (KIP-630).
    pub fn on_snapshot_written(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        snapshot_id: OffsetAndEpoch,
    ) -> Result<Vec<PartitionWork>, RaftError> {
        let work = self
            .group(partition)?
            .on_snapshot_written(now_ms, snapshot_id)?;
        Ok(Self::tag(partition, work))
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    pub fn partition(&self, partition: PartitionId) -> Option<&Raft> {
        self.partitions.get(&partition)
    }

    pub fn partitions(&self) -> impl Iterator<Item = (PartitionId, &Raft)> {
        self.partitions.iter().map(|(p, r)| (*p, r))
    }

    /// The groups reached since the last call, in partition order (`touched`): a group not
    /// among them shows the state it showed at the last call.
    pub fn take_touched(&mut self) -> BTreeSet<PartitionId> {
        std::mem::take(&mut self.touched)
    }

    /// A group about to be reached by something other than a tick: due for the next tick.
    fn group(&mut self, partition: PartitionId) -> Result<&mut Raft, RaftError> {
        if self.partitions.contains_key(&partition) {
            self.ticks.wake(partition);
            self.touched.insert(partition);
        }
        self.partitions
            .get_mut(&partition)
            .ok_or(RaftError::UnknownPartition(partition))
    }

    fn tag(partition: PartitionId, work: Vec<Work>) -> Vec<PartitionWork> {
        work.into_iter()
            .map(|work| PartitionWork { partition, work })
            .collect()
    }

    pub fn step(
        &mut self,
        now_ms: u64,
        from: NodeId,
        message: PartitionMessage,
    ) -> Result<Vec<PartitionWork>, RaftError> {
        let work = self
            .group(message.partition)?
            .step(now_ms, from, message.message)?;
        Ok(Self::tag(message.partition, work))
    }

    /// Ticks every group that is due ([`TickSchedule`]); returns the work and the earliest
    /// next deadline of them all. This runs every turn of a host's loop, and with many
    /// partitions most of them rest between their timers.
    pub fn tick(&mut self, now_ms: u64) -> Result<(Vec<PartitionWork>, u64), RaftError> {
        #[cfg(feature = "sim")]
        if self.check_resting_ticks {
            self.check_resting_ticks(now_ms)?;
        }
        let mut all = Vec::new();
        let mut next = u64::MAX;
        let mut due = self.ticks.take_due(now_ms).into_iter();
        while let Some(partition) = due.next() {
            let raft = self
                .partitions
                .get_mut(&partition)
                .expect("a scheduled group is hosted");
            self.touched.insert(partition);
            let (work, deadline) = match raft.tick(now_ms) {
                Ok(ticked) => ticked,
                Err(error) => {
                    // Nothing is lost: this group and the ones after it tick next time.
                    self.ticks.wake(partition);
                    due.for_each(|partition| self.ticks.wake(partition));
                    return Err(error);
                }
            };
            all.extend(Self::tag(partition, work));
            if raft.idle_tick_is_noop() {
                self.ticks.rest(partition, deadline);
            } else {
                self.ticks.wake(partition);
            }
            next = next.min(deadline);
        }
        Ok((all, next.min(self.ticks.earliest_resting_ms())))
    }

    /// Whether every tick checks [`TickSchedule`]'s claim (the simulator's hosts do). Off by
    /// default: the check clones every resting group on every tick, which a `sim` build of the
    /// node (the workspace's test build) paid too until 2026-12-07, its loop busy with a
    /// thousand partitions and their elections churning.
    #[cfg(feature = "sim")]
    pub fn set_check_resting_ticks(&mut self, on: bool) {
        self.check_resting_ticks = on;
    }

    /// The simulator checks [`TickSchedule`]'s claim: a resting group's tick has no work.
    #[cfg(feature = "sim")]
    fn check_resting_ticks(&self, now_ms: u64) -> Result<(), RaftError> {
        for (&partition, &due) in &self.ticks.resting_until {
            if due <= now_ms {
                continue;
            }
            let (work, _) = self.partitions[&partition].clone().tick(now_ms)?;
            assert!(
                work.is_empty(),
                "partition {partition}: a tick before its deadline {due} (now {now_ms}) had work: \
                 {work:?}"
            );
        }
        Ok(())
    }

    /// [`Raft::stand_first`] for one partition.
    pub fn stand_first(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
    ) -> Result<Vec<PartitionWork>, RaftError> {
        let work = self.group(partition)?.stand_first(now_ms)?;
        Ok(Self::tag(partition, work))
    }

    pub fn on_persisted(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        persisted: Persisted,
    ) -> Result<Vec<PartitionWork>, RaftError> {
        let work = self.group(partition)?.on_persisted(now_ms, persisted)?;
        Ok(Self::tag(partition, work))
    }

    pub fn append(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        batches: Vec<Bytes>,
    ) -> Result<(AppendResult, Vec<PartitionWork>), RaftError> {
        let (result, work) = self.group(partition)?.append(now_ms, batches)?;
        Ok((result, Self::tag(partition, work)))
    }

    /// KIP-853 AddRaftVoter on one partition's leader ([`Raft::add_voter_with_info`]).
    pub fn add_voter(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        id: NodeId,
        info: VoterInfo,
    ) -> Result<(AppendResult, Vec<PartitionWork>), RaftError> {
        let (result, work) = self
            .group(partition)?
            .add_voter_with_info(now_ms, id, info)?;
        Ok((result, Self::tag(partition, work)))
    }

    /// KIP-853 RemoveRaftVoter on one partition's leader ([`Raft::remove_voter`]).
    pub fn remove_voter(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        id: NodeId,
    ) -> Result<(AppendResult, Vec<PartitionWork>), RaftError> {
        let (result, work) = self.group(partition)?.remove_voter(now_ms, id)?;
        Ok((result, Self::tag(partition, work)))
    }

    /// KIP-853 UpdateRaftVoter on one partition's leader ([`Raft::update_voter`]); `None` when
    /// nothing changes.
    pub fn update_voter(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        id: NodeId,
        info: VoterInfo,
    ) -> Result<Option<(AppendResult, Vec<PartitionWork>)>, RaftError> {
        Ok(self
            .group(partition)?
            .update_voter(now_ms, id, info)?
            .map(|(result, work)| (result, Self::tag(partition, work))))
    }

    /// KIP-630 + KIP-853: the host installed a fetched snapshot and read its voter set
    /// ([`Raft::on_snapshot_installed`]).
    pub fn on_snapshot_installed(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        snapshot_id: OffsetAndEpoch,
        voters: Option<VoterSet>,
    ) -> Result<Vec<PartitionWork>, RaftError> {
        let work = self
            .group(partition)?
            .on_snapshot_installed(now_ms, snapshot_id, voters);
        Ok(Self::tag(partition, work))
    }

    pub fn resign(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
    ) -> Result<Vec<PartitionWork>, RaftError> {
        let work = self.group(partition)?.resign(now_ms)?;
        Ok(Self::tag(partition, work))
    }

    pub fn transfer_leadership(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        successor: NodeId,
    ) -> Result<Vec<PartitionWork>, RaftError> {
        let work = self
            .group(partition)?
            .transfer_leadership(now_ms, successor)?;
        Ok(Self::tag(partition, work))
    }

    /// Groups the immediately sendable messages of a work list by destination peer (in
    /// partition order), so a host can put all of one peer's fetches into one request. Other
    /// work is returned in its original order.
    pub fn batch_sends_by_peer(
        work: Vec<PartitionWork>,
    ) -> (BTreeMap<NodeId, Vec<PartitionMessage>>, Vec<PartitionWork>) {
        let mut by_peer: BTreeMap<NodeId, Vec<PartitionMessage>> = BTreeMap::new();
        let mut rest = Vec::new();
        for item in work {
            match item.work {
                Work::Send { to, message } => {
                    by_peer.entry(to).or_default().push(PartitionMessage {
                        partition: item.partition,
                        message,
                    });
                }
                other => rest.push(PartitionWork {
                    partition: item.partition,
                    work: other,
                }),
            }
        }
        (by_peer, rest)
    }
}

/// Each partition's RNG stream: derived from the host's seed and the partition id, so one seed
/// replays every group's timeouts, and partitions added later get the same stream they would
/// have had from the start.
fn partition_seed(seed: u64, partition: PartitionId) -> u64 {
    seed ^ (u64::from(partition) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}
