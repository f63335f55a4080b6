//! KIP-630 FetchSnapshot, both sides.
//!
//! Follower or observer: a Fetch answered with a SnapshotId pauses log fetching; the replica
//! asks the leader for that snapshot with FetchSnapshot(SnapshotId, Position, MaxBytes) until
//! Size bytes arrived, handing each chunk to the host (`Work::WriteSnapshotChunk`), then has the
//! host install it (`Work::InstallSnapshot`: freeze, load into the state machine, truncate the
//! log fully to start at the snapshot's end offset) and fetches on from there with
//! LastFetchedEpoch = the snapshot's epoch. Any error (SNAPSHOT_NOT_FOUND,
//! POSITION_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER, an epoch error, a size that changed) drops
//! the download: the next Fetch rediscovers which snapshot to load. A new epoch or leader drops
//! it too. A replica that restarts mid-download starts the snapshot again from position 0 (the
//! host truncates the leftover `.part`), so a `.part` is never loaded.
//!
//! Leader: the same epoch checks as Fetch, then the snapshot must be one the core knows (the
//! latest or the one at the log start); the host reads the bytes (`Work::SendFetchSnapshotResponse`).
//! A FetchSnapshot counts as a fetch for check quorum, so a voter catching up from a snapshot
//! does not make the leader resign.
//!
//! Elections need nothing extra: the log is reset only when the snapshot is complete, so while
//! downloading a replica votes and asks for votes with its log as it was, and a replica whose
//! log is empty (new, or wiped) with only an incomplete snapshot votes as if its log were
//! empty. After the install, (last epoch, end offset) is the snapshot's (`LogState`).

use super::{InFlightFetch, Out, Raft};
use crate::error::{ErrorCode, RaftError};
use crate::message::{FetchSnapshotRequest, FetchSnapshotResponse, Message};
use crate::quorum::EpochState;
use crate::types::{Epoch, NodeId, OffsetAndEpoch};
use crate::work::Work;

/// A snapshot download in progress, bound to the leader and epoch that told us about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SnapshotFetch {
    pub(crate) snapshot_id: OffsetAndEpoch,
    pub(crate) leader_id: NodeId,
    pub(crate) epoch: Epoch,
    /// Bytes received so far (the next Position).
    pub(crate) position: u64,
    /// The file's size, from the first response.
    pub(crate) size_bytes: Option<u64>,
}

impl Raft {
    /// The snapshot being downloaded, as (snapshot id, bytes received, size if known).
    pub fn snapshot_fetch_progress(&self) -> Option<(OffsetAndEpoch, u64, Option<u64>)> {
        self.snapshot_fetch
            .map(|f| (f.snapshot_id, f.position, f.size_bytes))
    }

    /// The download in progress, if it still belongs to the current leader and epoch; a stale
    /// one is dropped.
    pub(crate) fn current_snapshot_fetch(&mut self) -> Option<SnapshotFetch> {
        let fetch = self.snapshot_fetch?;
        match &self.state {
            EpochState::Follower(f) if f.leader_id == fetch.leader_id && f.epoch == fetch.epoch => {
                Some(fetch)
            }
            _ => {
                self.snapshot_fetch = None;
                None
            }
        }
    }

    /// A Fetch response named `snapshot_id`: start downloading it from the leader `from`.
    pub(crate) fn start_snapshot_fetch(&mut self, from: NodeId, snapshot_id: OffsetAndEpoch) {
        let EpochState::Follower(follower) = &self.state else {
            return;
        };
        if snapshot_id.offset < self.log.high_watermark() {
            // A leader sends a snapshot only to a replica whose log end is below its log start
            // or diverges below it; neither can be under our committed prefix. Installing it
            // would move committed state back, so refuse and fetch again.
            tracing::warn!(
                node_id = self.config.node_id,
                ?snapshot_id,
                high_watermark = self.log.high_watermark(),
                "leader named a snapshot below our high-watermark; ignored"
            );
            return;
        }
        self.snapshot_fetch = Some(SnapshotFetch {
            snapshot_id,
            leader_id: from,
            epoch: follower.epoch,
            position: 0,
            size_bytes: None,
        });
    }

    /// Sends the next FetchSnapshot of the download in progress (the caller checked that no
    /// request is in flight). Returns false when there is no download.
    pub(crate) fn maybe_send_fetch_snapshot(&mut self, out: &mut Out) -> bool {
        let Some(fetch) = self.current_snapshot_fetch() else {
            return false;
        };
        let correlation_id = self.next_correlation_id();
        let request = FetchSnapshotRequest {
            correlation_id,
            replica_id: self.config.node_id,
            current_leader_epoch: fetch.epoch,
            snapshot_id: fetch.snapshot_id,
            position: fetch.position,
            max_bytes: self.config.fetch_max_bytes,
            replica_directory_id: self.config.directory_id,
        };
        self.fetch_in_flight = Some(InFlightFetch {
            correlation_id,
            to: fetch.leader_id,
            sent_at_ms: self.now_ms,
            resend_at_ms: self.now_ms + self.config.request_timeout_ms,
        });
        out.send(fetch.leader_id, Message::FetchSnapshotRequest(request));
        true
    }

    /// Leader side: epoch checks as for Fetch, then the snapshot must be one we hold.
    pub(crate) fn handle_fetch_snapshot_request(
        &mut self,
        from: NodeId,
        request: FetchSnapshotRequest,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        let known = [
            self.log.latest_snapshot_id(),
            self.log.log_start_snapshot_id(),
        ]
        .contains(&Some(request.snapshot_id));
        let error_code = if request.current_leader_epoch < self.epoch() {
            ErrorCode::FencedLeaderEpoch
        } else if request.current_leader_epoch > self.epoch() {
            ErrorCode::UnknownLeaderEpoch
        } else if !self.is_leader() {
            ErrorCode::NotLeaderOrFollower
        } else if from != request.replica_id {
            ErrorCode::InvalidRequest
        } else if !known {
            ErrorCode::SnapshotNotFound
        } else {
            ErrorCode::None
        };
        // A consumer (ReplicaId -1, reading a `cleanup.policy=snapshot` topic's full state) is
        // served like a replica but is no replica: it never counts as a live follower (whose
        // fetch offset would hold back the log start) nor toward the check quorum.
        if error_code == ErrorCode::None && from >= 0 {
            // A replica downloading a snapshot is alive and following us (check quorum).
            let now = self.now_ms;
            // KIP-853: as for Fetch, a voter is its id *and* its disk: a download from the
            // voter's id on another disk (a replaced one) is an observer's, and keeps neither
            // that voter alive for check quorum nor its endorsement.
            let is_voter = self.is_voter_key(from, request.replica_directory_id);
            if let EpochState::Leader(leader) = &mut self.state {
                let progress = if is_voter {
                    leader.endorsed.insert(from);
                    leader.voters.entry(from).or_default()
                } else {
                    // It is loading a snapshot: whatever it held before is not counted.
                    let progress = leader.observers.entry(from).or_default();
                    progress.end_offset = None;
                    progress.last_caught_up_ms = None;
                    progress.directory_id = request.replica_directory_id;
                    progress
                };
                progress.last_fetch_ms = Some(now);
            }
        }
        let response = FetchSnapshotResponse {
            correlation_id: request.correlation_id,
            error_code,
            current_leader: self.leader_and_epoch(),
            snapshot_id: request.snapshot_id,
            size: 0,
            position: request.position,
            unaligned_records: bytes::Bytes::new(),
        };
        let max_bytes = if error_code == ErrorCode::None {
            request.max_bytes
        } else {
            0
        };
        // As for a Fetch answer: it names our epoch, so not before that epoch is durable.
        if self.persisted_election.epoch < self.epoch() {
            out.send_after_persist(from, Message::FetchSnapshotResponse(response));
            return Ok(());
        }
        out.push(Work::SendFetchSnapshotResponse {
            to: from,
            response,
            max_bytes,
        });
        Ok(())
    }

    /// Follower side.
    pub(crate) fn handle_fetch_snapshot_response(
        &mut self,
        from: NodeId,
        response: FetchSnapshotResponse,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        match self.fetch_in_flight {
            Some(f) if f.correlation_id == response.correlation_id && f.to == from => {
                self.fetch_in_flight = None
            }
            // A duplicate or a late answer to a request we gave up on.
            _ => return Ok(()),
        }
        self.last_fetch_response_ms = Some(self.now_ms);
        if self.observe_leader(response.current_leader, out)? {
            self.snapshot_fetch = None;
            return Ok(());
        }
        let now = self.now_ms;
        let retry_backoff_ms = self
            .config
            .request_timeout_ms
            .min(self.config.fetch_max_wait_ms)
            .max(1);
        let Some(mut fetch) = self.current_snapshot_fetch() else {
            return Ok(());
        };
        let size_changed = fetch.size_bytes.is_some_and(|size| size != response.size);
        let end = response
            .position
            .checked_add(response.unaligned_records.len() as u64);
        let valid = response.error_code == ErrorCode::None
            && from == fetch.leader_id
            && response.current_leader.leader_epoch == fetch.epoch
            && response.snapshot_id == fetch.snapshot_id
            && response.position == fetch.position
            && !size_changed
            && response.size > 0
            && end.is_some_and(|end| end <= response.size);
        if !valid {
            // KIP-630: SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER (or
            // anything else unexpected): forget this download and rediscover with a Fetch.
            self.snapshot_fetch = None;
            self.fetch_backoff_until_ms = now + retry_backoff_ms;
            return Ok(());
        }
        if let EpochState::Follower(follower) = &mut self.state
            && self.resigned_leader != Some((follower.epoch, from))
        {
            follower.fetch_timeout_deadline_ms = now + self.config.fetch_timeout_ms;
            self.fetched_from_leader = true;
        }
        self.discovery_index = 0;
        fetch.size_bytes = Some(response.size);
        if !response.unaligned_records.is_empty() {
            let len = response.unaligned_records.len() as u64;
            out.push(Work::WriteSnapshotChunk {
                snapshot_id: fetch.snapshot_id,
                size_bytes: response.size,
                position: fetch.position,
                bytes: response.unaligned_records,
            });
            fetch.position += len;
        } else if fetch.position < response.size {
            // No progress (the leader had no bytes to spare): ask again a little later.
            self.fetch_backoff_until_ms = now + retry_backoff_ms;
        }
        if fetch.position < response.size {
            self.snapshot_fetch = Some(fetch);
            return Ok(());
        }
        self.install_fetched_snapshot(fetch.snapshot_id, out);
        Ok(())
    }

    /// Every byte arrived: the host freezes and loads the snapshot and resets the log to start
    /// at its end offset; fetching resumes from there with the snapshot's epoch.
    fn install_fetched_snapshot(&mut self, snapshot_id: OffsetAndEpoch, out: &mut Out) {
        self.snapshot_fetch = None;
        let old_high_watermark = self.log.high_watermark();
        self.log.install_snapshot(snapshot_id);
        self.requested_flush = None;
        out.push(Work::InstallSnapshot { snapshot_id });
        // The log is reset: its voter set records go. The host reports the snapshot's own
        // voter set with `on_snapshot_installed` right after executing the install.
        self.on_log_truncated(0, out);
        if self.log.high_watermark() > old_high_watermark {
            out.push(Work::HighWatermarkChanged {
                high_watermark: self.log.high_watermark(),
            });
        }
        // The snapshot may be older than the leader's log start already; the next Fetch tells.
        self.maybe_advance_log_start_offset(out);
    }
}
