//! Producer ids unique across the cluster: Kafka's blocks allocated through the metadata log
//! (KIP-730, `ProducerIdControlManager` and `RPCProducerIdManager`).
//!
//! Every node hands out InitProducerId's ids from a block of [`PRODUCER_ID_BLOCK_SIZE`] ids
//! that the controller (the metadata partition's leader) gave it. The controller allocates a
//! block by committing a producer-ids record to `__cluster_metadata-0`, the next block's first
//! id, and answers only once the record is applied; a node asks with AllocateProducerIds
//! (forwarded over its control lane like the other requests to the controller), the controller
//! itself without a request. The record is Kafka's ProducerIdsRecord as a key-value entry:
//!
//! ```text
//! key   = "ringlog.producer_ids.v1"
//! value = "node_id=<requesting node>\tnode_epoch=-1\tnext_producer_id=<n>"
//! ```
//!
//! One key: the metadata partition's key-value state (and so its KIP-630 snapshot) keeps only
//! the latest, which is all a controller needs. The next block starts at the larger of that
//! applied `next_producer_id` and the end of the blocks this controller proposed in its epoch
//! and has not seen applied yet, so two blocks never overlap:
//!
//! | situation | next block's first id |
//! | --- | --- |
//! | no record applied, nothing proposed | 0 (Kafka's first block) |
//! | a record applied, nothing proposed since | its `next_producer_id` |
//! | blocks proposed in this epoch, not applied yet | the end of the last of them |
//! | a new controller | answers NOT_CONTROLLER until its image applied every record earlier epochs committed (controller.rs), then the applied value |
//!
//! A block is answered only after its record is applied in the epoch it was proposed in (in one
//! epoch the leader's record at an offset is its own, never truncated); a block whose epoch
//! ended is refused (NOT_CONTROLLER) even if its record did commit: those ids are skipped, never
//! handed out twice. After any restart or failover the applied record is above every block
//! ever answered, so no id repeats; a node that restarts forgets the rest of its block, as
//! Kafka's brokers do.
//!
//! On a node ([`ProducerIdManager`]): the first block is asked for once the node knows the
//! controller, before any InitProducerId (`prefetch_first_block`); InitProducerId takes the
//! next id of the current block;
//! when 90% of it is used the next block is asked for ahead of time (Kafka's
//! `PidPrefetchThreshold`); with no id left it answers COORDINATOR_LOAD_IN_PROGRESS and asks,
//! and the client retries (Kafka's answer: clients treat it as retriable). An ask unanswered
//! after `controller.quorum.request.timeout.ms` may be repeated.

use super::context::Cx;
use super::transport::Responder;
use crate::protocol::{
    ErrorCode, Request, RequestHeader, Response, allocate_producer_ids_request as apid_req,
    allocate_producer_ids_response as apid_resp, encode_response,
};

/// Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// The key of the producer-ids record in `__cluster_metadata-0`.
pub const PRODUCER_IDS_RECORD_KEY: &[u8] = b"ringlog.producer_ids.v1";

/// AllocateProducerIds' only version.
const ALLOCATE_PRODUCER_IDS_VERSION: i16 = 0;

/// How long a node waits before asking again for its first block when its ask was refused
/// or lost (Kafka's `retry.backoff.ms`).
const PREFETCH_RETRY_MS: u64 = 100;

/// Kafka's `PidPrefetchThreshold`: the next block is asked for when this share of the current
/// one is used (numerator over [`PREFETCH_DENOMINATOR`]).
const PREFETCH_NUMERATOR: i64 = 9;
const PREFETCH_DENOMINATOR: i64 = 10;

/// Kafka's ProducerIdsRecord: the node a block went to and the first id of the next block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIdsRecord {
    pub node_id: i32,
    /// Kafka's broker epoch; nodes here have none (-1).
    pub node_epoch: i64,
    pub next_producer_id: i64,
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProducerIdsRecordError {
    #[error("producer-ids record: {0}")]
    Malformed(&'static str),
}

impl ProducerIdsRecord {
    pub fn encode_value(&self) -> Vec<u8> {
        format!(
            "node_id={}\tnode_epoch={}\tnext_producer_id={}",
            self.node_id, self.node_epoch, self.next_producer_id
        )
        .into_bytes()
    }

    pub fn decode_value(value: &[u8]) -> Result<ProducerIdsRecord, ProducerIdsRecordError> {
        let malformed = ProducerIdsRecordError::Malformed;
        let text = std::str::from_utf8(value).map_err(|_| malformed("utf-8"))?;
        let (mut node_id, mut node_epoch, mut next_producer_id) = (None, None, None);
        for field in text.split('\t') {
            let (key, value) = field
                .split_once('=')
                .ok_or(malformed("field without '='"))?;
            match key {
                "node_id" => node_id = Some(value.parse().map_err(|_| malformed("node_id"))?),
                "node_epoch" => {
                    node_epoch = Some(value.parse().map_err(|_| malformed("node_epoch"))?)
                }
                "next_producer_id" => {
                    next_producer_id =
                        Some(value.parse().map_err(|_| malformed("next_producer_id"))?)
                }
                _ => return Err(malformed("unknown field")),
            }
        }
        let next_producer_id: i64 = next_producer_id.ok_or(malformed("no next_producer_id"))?;
        if next_producer_id < 0 {
            return Err(malformed("negative next_producer_id"));
        }
        Ok(ProducerIdsRecord {
            node_id: node_id.ok_or(malformed("no node_id"))?,
            node_epoch: node_epoch.unwrap_or(-1),
            next_producer_id,
        })
    }
}

/// A block of producer ids: `first..first + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIdsBlock {
    pub first: i64,
    pub len: i32,
}

impl ProducerIdsBlock {
    fn end(&self) -> i64 {
        self.first + i64::from(self.len)
    }
}

/// Who asked the controller for a block.
pub(super) enum BlockRequester {
    /// This node (it is the controller).
    Local,
    /// Another node's AllocateProducerIds, answered under its correlation id.
    Peer {
        node_id: i32,
        responder: Responder,
        correlation_id: i32,
        version: i16,
    },
}

/// A block proposed and waiting for its record to be applied.
struct ProposedBlock {
    block: ProducerIdsBlock,
    /// The record's offset in `__cluster_metadata-0` and the epoch it was proposed in.
    offset: u64,
    leader_epoch: u32,
    requester: BlockRequester,
}

/// The controller's side: the blocks proposed in its epoch and not applied yet.
#[derive(Default)]
pub(super) struct ProducerIdControl {
    proposed: Vec<ProposedBlock>,
    /// The end of the last block proposed, and the epoch it was proposed in.
    proposed_end: Option<(i64, u32)>,
}

/// Why the controller cannot allocate a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocationError {
    #[error("every producer id is allocated")]
    Exhausted,
    #[error("the applied producer-ids record is malformed")]
    MalformedRecord,
}

impl ProducerIdControl {
    /// The next block, given the applied record's value (`None`: no record yet) in
    /// `leader_epoch` (the table in the module doc).
    pub fn next_block(
        &self,
        applied: Option<&[u8]>,
        leader_epoch: u32,
    ) -> Result<ProducerIdsBlock, AllocationError> {
        let applied_next = match applied {
            None => 0,
            Some(value) => {
                ProducerIdsRecord::decode_value(value)
                    .map_err(|_| AllocationError::MalformedRecord)?
                    .next_producer_id
            }
        };
        let first = match self.proposed_end {
            Some((end, epoch)) if epoch == leader_epoch => end.max(applied_next),
            _ => applied_next,
        };
        if first > i64::MAX - PRODUCER_ID_BLOCK_SIZE {
            return Err(AllocationError::Exhausted);
        }
        Ok(ProducerIdsBlock {
            first,
            len: PRODUCER_ID_BLOCK_SIZE as i32,
        })
    }

    fn proposed(
        &mut self,
        block: ProducerIdsBlock,
        offset: u64,
        leader_epoch: u32,
        requester: BlockRequester,
    ) {
        if let Some((end, epoch)) = self.proposed_end {
            assert!(
                epoch != leader_epoch || block.first >= end,
                "producer id blocks overlap: {block:?} after {end} in epoch {epoch}"
            );
        }
        self.proposed_end = Some((block.end(), leader_epoch));
        self.proposed.push(ProposedBlock {
            block,
            offset,
            leader_epoch,
            requester,
        });
    }

    /// The proposed blocks that are settled, given the offset after the last applied record
    /// and the current leader epoch (`None`: not the leader): those applied in the epoch they
    /// were proposed in are granted, those whose epoch ended are refused.
    fn settled(
        &mut self,
        applied_offset: u64,
        leader_epoch: Option<u32>,
    ) -> Vec<(ProposedBlock, bool)> {
        let mut settled = Vec::new();
        let mut index = 0;
        while index < self.proposed.len() {
            let p = &self.proposed[index];
            let same_epoch = leader_epoch == Some(p.leader_epoch);
            if !same_epoch || p.offset < applied_offset {
                let p = self.proposed.remove(index);
                settled.push((p, same_epoch));
            } else {
                index += 1;
            }
        }
        settled
    }
}

/// A node's side: the block it hands ids out of and the next one (Kafka's
/// `RPCProducerIdManager`).
#[derive(Debug, Default)]
pub struct ProducerIdManager {
    /// The block ids are handed out of, and the next id to hand out.
    current: Option<(ProducerIdsBlock, i64)>,
    next_block: Option<ProducerIdsBlock>,
    /// When the last ask for a block left (`None`: none in flight).
    asked_ms: Option<u64>,
    /// When the first block was last asked for ahead of any InitProducerId.
    prefetched_ms: Option<u64>,
}

/// What InitProducerId gets from the manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claimed {
    /// The id, or none: no block is here yet (COORDINATOR_LOAD_IN_PROGRESS).
    pub producer_id: Option<i64>,
    /// Whether the node should ask the controller for its next block now.
    pub ask: bool,
}

impl ProducerIdManager {
    /// Takes the next id. `now_ms` and `request_timeout_ms` decide whether an ask in flight
    /// has been waited on long enough to be sent again.
    pub fn claim(&mut self, now_ms: u64, request_timeout_ms: u64) -> Claimed {
        if self.current.is_none_or(|(block, next)| next >= block.end())
            && let Some(block) = self.next_block.take()
        {
            self.current = Some((block, block.first));
        }
        let may_ask = self.next_block.is_none()
            && self
                .asked_ms
                .is_none_or(|asked| now_ms >= asked.saturating_add(request_timeout_ms));
        match &mut self.current {
            Some((block, next)) if *next < block.end() => {
                let id = *next;
                *next += 1;
                let used = id - block.first + 1;
                let len = i64::from(block.len);
                Claimed {
                    producer_id: Some(id),
                    ask: may_ask && used * PREFETCH_DENOMINATOR >= len * PREFETCH_NUMERATOR,
                }
            }
            _ => Claimed {
                producer_id: None,
                ask: may_ask,
            },
        }
    }

    /// An ask for a block left.
    pub fn asked(&mut self, now_ms: u64) {
        self.asked_ms = Some(now_ms);
    }

    /// The controller's answer: a block, or a refusal (asked again at the next claim).
    pub fn answered(&mut self, block: Option<ProducerIdsBlock>) {
        self.asked_ms = None;
        let Some(block) = block else { return };
        // Kafka's sanity checks (`handleAllocateProducerIdsResponse`): a block must be valid
        // and above the current one.
        let valid = block.first >= 0
            && block.len > 0
            && block.first <= i64::MAX - i64::from(block.len)
            && self
                .current
                .is_none_or(|(current, _)| block.first >= current.end());
        if !valid {
            tracing::error!(?block, current = ?self.current, "producer id block refused: invalid or not above the current one");
            return;
        }
        tracing::info!(
            first = block.first,
            len = block.len,
            "producer id block received"
        );
        self.next_block = Some(block);
    }
}

impl ProducerIdManager {
    /// InitProducerId's new id: from this node's block, else COORDINATOR_LOAD_IN_PROGRESS
    /// while a block is asked for (of `control`, this node's controller side, when it is the
    /// controller; else of the controller, a request queued on `cx`).
    pub(super) fn claim_producer_id(
        &mut self,
        cx: &mut Cx,
        control: &mut ProducerIdControl,
    ) -> Result<i64, ErrorCode> {
        let now = cx.now_ms;
        let timeout = cx.config.request_timeout_ms;
        let claimed = self.claim(now, timeout);
        if claimed.ask {
            // Without a controller yet nothing leaves: the next InitProducerId asks again.
            let _asked = self.ask_for_block(cx, control, now);
        }
        claimed
            .producer_id
            .ok_or(ErrorCode::CoordinatorLoadInProgress)
    }

    /// Asks for this node's first block before any InitProducerId needs it, so the first
    /// idempotent producer a node serves is not answered COORDINATOR_LOAD_IN_PROGRESS and made
    /// to retry (Kafka's brokers ask at the first InitProducerId; a restart forgoes at most
    /// one block of ids, as it does when a block was in use). Asks only with no block here or
    /// coming, and no ask in flight (or one past the request timeout).
    pub(super) fn prefetch_first_block(&mut self, cx: &mut Cx, control: &mut ProducerIdControl) {
        let now = cx.now_ms;
        let timeout = cx.config.request_timeout_ms;
        let in_flight = self
            .asked_ms
            .is_some_and(|at| now < at.saturating_add(timeout));
        // A refusal (a controller just elected answers NOT_CONTROLLER until it has caught up)
        // or a failed connection clears `asked_ms` at once: `prefetched_ms` keeps the tries
        // `PREFETCH_RETRY_MS` apart. It is set only when an ask left, so a node that does not
        // know the controller yet asks in the turn it learns it.
        let retried = self
            .prefetched_ms
            .is_some_and(|at| now < at.saturating_add(PREFETCH_RETRY_MS));
        if self.current.is_none()
            && self.next_block.is_none()
            && !in_flight
            && !retried
            && self.ask_for_block(cx, control, now)
        {
            self.prefetched_ms = Some(now);
        }
    }

    /// Asks the controller for this node's next block: itself when it leads the metadata
    /// partition, else with AllocateProducerIds.
    /// Returns whether it asked (false: no controller known yet, or this node is the
    /// controller and still catching up).
    fn ask_for_block(&mut self, cx: &mut Cx, control: &mut ProducerIdControl, now: u64) -> bool {
        let raft = cx.metadata_raft();
        if raft.is_leader() {
            if !cx.controller_active() {
                // Catching up: asked again at the next InitProducerId.
                return false;
            }
            // Marked asked first: a refusal below answers at once and clears it.
            self.asked(now);
            if let Err(error) = control.allocate_block(cx, self, BlockRequester::Local) {
                tracing::warn!(%error, "producer id block not allocated");
            }
            return true;
        }
        let Some(controller) = raft.leader_id() else {
            return false;
        };
        let request = apid_req::AllocateProducerIdsRequest {
            broker_id: cx.config.node_id,
            broker_epoch: -1,
        };
        cx.send_to_peer(
            controller,
            Request::AllocateProducerIds(request),
            ALLOCATE_PRODUCER_IDS_VERSION,
            super::PeerPending::ProducerIdBlock,
            false,
        );
        tracing::debug!(controller, "producer id block asked for");
        self.asked(now);
        true
    }

    /// The controller's answer to this node's AllocateProducerIds (or its connection failed:
    /// `None`).
    pub(super) fn block_answered(
        &mut self,
        response: Option<&apid_resp::AllocateProducerIdsResponse>,
    ) {
        let block = response.and_then(|r| {
            if r.error_code != 0 {
                tracing::info!(
                    error = ?ErrorCode::from_code(r.error_code),
                    "producer id block refused; asked again (its first block 100 ms later, any other at the next InitProducerId)"
                );
                return None;
            }
            Some(ProducerIdsBlock {
                first: r.producer_id_start,
                len: r.producer_id_len,
            })
        });
        self.answered(block);
    }
}

impl ProducerIdControl {
    /// A node's AllocateProducerIds, on the controller: a block is proposed and answered once
    /// its record is applied ([`ProducerIdControl::answer_blocks`]). `manager` is this node's
    /// own side (given the blocks this node asked itself for).
    pub(super) fn handle_allocate_producer_ids(
        &mut self,
        cx: &mut Cx,
        manager: &mut ProducerIdManager,
        responder: Responder,
        header: &RequestHeader,
        request: &apid_req::AllocateProducerIdsRequest,
    ) -> Result<(), super::NodeError> {
        let requester = BlockRequester::Peer {
            node_id: request.broker_id,
            responder,
            correlation_id: header.correlation_id,
            version: header.api_version,
        };
        let known = cx.config.is_quorum_member(request.broker_id)
            || cx
                .metadata_raft()
                .voter_set()
                .voters()
                .contains_key(&request.broker_id);
        if !known {
            return answer_block(manager, requester, Err(ErrorCode::BrokerIdNotRegistered));
        }
        if !cx.controller_active() {
            return answer_block(manager, requester, Err(ErrorCode::NotController));
        }
        self.allocate_block(cx, manager, requester)
    }

    /// Proposes the next block's record (the controller only, once caught up).
    /// On failure the requester is answered here (a peer) or the error returned (this node).
    fn allocate_block(
        &mut self,
        cx: &mut Cx,
        manager: &mut ProducerIdManager,
        requester: BlockRequester,
    ) -> Result<(), super::NodeError> {
        let leader_epoch = cx.metadata_raft().epoch();
        let applied = cx
            .metadata_state()
            .entries()
            .get(PRODUCER_IDS_RECORD_KEY)
            .cloned();
        let block = match self.next_block(applied.as_deref(), leader_epoch) {
            Ok(block) => block,
            Err(error) => {
                tracing::error!(%error, "no producer id block can be allocated");
                return answer_block(manager, requester, Err(ErrorCode::UnknownServerError));
            }
        };
        let node_id = match &requester {
            BlockRequester::Local => cx.config.node_id,
            BlockRequester::Peer { node_id, .. } => *node_id,
        };
        let record = ProducerIdsRecord {
            node_id,
            node_epoch: -1,
            next_producer_id: block.end(),
        };
        let offset = match cx
            .propose_metadata_entry(PRODUCER_IDS_RECORD_KEY, Some(&record.encode_value()))
        {
            Ok(offset) => offset,
            Err(code) => return answer_block(manager, requester, Err(code)),
        };
        tracing::info!(
            first = block.first,
            len = block.len,
            node = record.node_id,
            offset,
            "producer id block proposed"
        );
        self.proposed(block, offset, leader_epoch, requester);
        Ok(())
    }

    /// Answers the blocks whose records are applied, and refuses those whose epoch ended;
    /// the blocks this node asked itself for go to `manager`.
    pub(super) fn answer_blocks(
        &mut self,
        cx: &Cx,
        manager: &mut ProducerIdManager,
    ) -> Result<(), super::NodeError> {
        let raft = cx.metadata_raft();
        let leader_epoch = raft.is_leader().then(|| raft.epoch());
        let settled = self.settled(cx.metadata_applied_offset, leader_epoch);
        for (proposed, granted) in settled {
            let answer = if granted {
                tracing::info!(first = proposed.block.first, "producer id block committed");
                Ok(proposed.block)
            } else {
                Err(ErrorCode::NotController)
            };
            answer_block(manager, proposed.requester, answer)?;
        }
        Ok(())
    }
}

/// Gives a block (or a refusal) to whoever asked: this node's `manager`, or a peer's
/// AllocateProducerIds.
fn answer_block(
    manager: &mut ProducerIdManager,
    requester: BlockRequester,
    answer: Result<ProducerIdsBlock, ErrorCode>,
) -> Result<(), super::NodeError> {
    let (responder, correlation_id, version) = match requester {
        BlockRequester::Local => {
            manager.answered(answer.ok());
            return Ok(());
        }
        BlockRequester::Peer {
            responder,
            correlation_id,
            version,
            ..
        } => (responder, correlation_id, version),
    };
    let response = match answer {
        Ok(block) => apid_resp::AllocateProducerIdsResponse {
            producer_id_start: block.first,
            producer_id_len: block.len,
            ..Default::default()
        },
        Err(code) => apid_resp::AllocateProducerIdsResponse {
            error_code: code.code(),
            producer_id_start: -1,
            producer_id_len: 0,
            ..Default::default()
        },
    };
    let frame = encode_response(
        correlation_id,
        version,
        &Response::AllocateProducerIds(response),
    )?;
    responder.send(Some(frame));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(next: i64) -> Vec<u8> {
        ProducerIdsRecord {
            node_id: 1,
            node_epoch: -1,
            next_producer_id: next,
        }
        .encode_value()
    }

    #[test]
    fn the_record_round_trips_and_a_malformed_one_is_refused() {
        let r = ProducerIdsRecord {
            node_id: 3,
            node_epoch: -1,
            next_producer_id: 42_000,
        };
        assert_eq!(ProducerIdsRecord::decode_value(&r.encode_value()), Ok(r));
        for bad in [
            &b"node_id=1"[..],
            b"node_id=1\tnext_producer_id=-5",
            b"node_id=1\tnext_producer_id=x",
            b"node_id=1\tnext_producer_id=5\tother=1",
            b"\xff",
        ] {
            assert!(ProducerIdsRecord::decode_value(bad).is_err(), "{bad:?}");
        }
        let control = ProducerIdControl::default();
        assert_eq!(
            control.next_block(Some(b"garbage"), 1),
            Err(AllocationError::MalformedRecord)
        );
    }

    /// The table in the module doc, row by row.
    #[test]
    fn the_next_block_starts_after_everything_applied_or_proposed_in_this_epoch() {
        let mut control = ProducerIdControl::default();
        let first = control.next_block(None, 4).unwrap();
        assert_eq!(
            first,
            ProducerIdsBlock {
                first: 0,
                len: 1000
            }
        );
        control.proposed(first, 10, 4, BlockRequester::Local);
        // Proposed, not applied: the next block follows it, not the (absent) record.
        let second = control.next_block(None, 4).unwrap();
        assert_eq!(second.first, 1000);
        control.proposed(second, 11, 4, BlockRequester::Local);
        // Applied: the record says 2000, the proposals agree.
        assert_eq!(
            control.next_block(Some(&record(2000)), 4).unwrap().first,
            2000
        );
        // A new epoch knows only what was applied: a proposal of the old epoch that did not
        // commit leaves its ids to be handed out again (nobody got them).
        assert_eq!(
            control.next_block(Some(&record(1000)), 5).unwrap().first,
            1000
        );
        assert_eq!(
            control.next_block(Some(&record(9000)), 4).unwrap().first,
            9000
        );
        assert_eq!(
            control.next_block(Some(&record(i64::MAX - 10)), 4),
            Err(AllocationError::Exhausted)
        );
    }

    /// A block is granted only once its record is applied in the epoch it was proposed in;
    /// one whose epoch ended is refused even if its record committed.
    #[test]
    fn blocks_are_granted_when_applied_and_refused_when_their_epoch_ends() {
        let mut control = ProducerIdControl::default();
        let a = control.next_block(None, 2).unwrap();
        control.proposed(a, 7, 2, BlockRequester::Local);
        let b = control.next_block(None, 2).unwrap();
        control.proposed(b, 8, 2, BlockRequester::Local);
        assert!(control.settled(7, Some(2)).is_empty());
        let settled = control.settled(8, Some(2));
        assert_eq!(settled.len(), 1);
        assert_eq!((settled[0].0.block, settled[0].1), (a, true));
        // The epoch ends before offset 8 is applied: refused.
        let settled = control.settled(9, Some(3));
        assert_eq!(settled.len(), 1);
        assert_eq!((settled[0].0.block, settled[0].1), (b, false));
        assert!(control.settled(100, None).is_empty());
    }

    /// Ids handed out across controller failovers never repeat: a model of the metadata log
    /// where each epoch's controller proposes blocks, some commit, some are truncated with the
    /// epoch, and a new controller starts from what was applied (deterministic pseudo-random
    /// histories).
    #[test]
    fn granted_blocks_never_overlap_across_failovers() {
        for seed in 0..200u64 {
            let mut rng = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut next = || {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                rng >> 33
            };
            // The committed log: (offset, value) of each producer-ids record.
            let mut applied: Option<Vec<u8>> = None;
            let mut offset = 0u64;
            let mut granted: Vec<ProducerIdsBlock> = Vec::new();
            let mut control = ProducerIdControl::default();
            for epoch in 1..20u32 {
                // Records proposed in this epoch, in log order.
                let mut in_flight: Vec<(u64, Vec<u8>)> = Vec::new();
                for _ in 0..next() % 5 {
                    let block = control.next_block(applied.as_deref(), epoch).unwrap();
                    offset += 1;
                    let value = ProducerIdsRecord {
                        node_id: (next() % 3) as i32,
                        node_epoch: -1,
                        next_producer_id: block.end(),
                    }
                    .encode_value();
                    control.proposed(block, offset, epoch, BlockRequester::Local);
                    in_flight.push((offset, value));
                    // Some records commit and are applied while the epoch lasts.
                    if next() % 2 == 0 {
                        let (committed_offset, value) = in_flight.pop().expect("pushed");
                        in_flight.clear();
                        applied = Some(value);
                        for (p, ok) in control.settled(committed_offset + 1, Some(epoch)) {
                            if ok {
                                granted.push(p.block);
                            }
                        }
                    }
                }
                // The epoch ends: the rest either commits later (under the next leader) or
                // is truncated; either way nobody was granted it.
                if next() % 2 == 0
                    && let Some((_, value)) = in_flight.pop()
                {
                    applied = Some(value);
                }
                for (p, ok) in control.settled(offset + 1, Some(epoch + 1)) {
                    assert!(!ok, "{:?} granted after its epoch", p.block);
                }
            }
            granted.sort_by_key(|b| b.first);
            for pair in granted.windows(2) {
                assert!(
                    pair[0].end() <= pair[1].first,
                    "seed {seed}: {:?} overlaps {:?}",
                    pair[0],
                    pair[1]
                );
            }
        }
    }

    #[test]
    fn a_node_hands_out_its_block_prefetches_the_next_and_asks_when_empty() {
        let mut m = ProducerIdManager::default();
        // No block: no id, ask.
        assert_eq!(
            m.claim(0, 100),
            Claimed {
                producer_id: None,
                ask: true
            }
        );
        m.asked(0);
        // Asked and not answered: not again until the request timeout.
        assert!(!m.claim(50, 100).ask);
        assert!(m.claim(100, 100).ask);
        m.answered(Some(ProducerIdsBlock {
            first: 5000,
            len: 1000,
        }));
        let mut asked_at = None;
        for i in 0..1000 {
            let c = m.claim(200, 100);
            assert_eq!(c.producer_id, Some(5000 + i));
            if c.ask && asked_at.is_none() {
                asked_at = Some(i);
                m.asked(200);
            }
        }
        // Kafka's prefetch: the next block is asked for at 90% of the current one.
        assert_eq!(asked_at, Some(899));
        // A block below the current one is refused; one above is taken when this one ends.
        m.answered(Some(ProducerIdsBlock {
            first: 0,
            len: 1000,
        }));
        assert_eq!(m.claim(300, 100).producer_id, None);
        m.answered(Some(ProducerIdsBlock {
            first: 9000,
            len: 1000,
        }));
        assert_eq!(m.claim(300, 100).producer_id, Some(9000));
    }
}
