//! Resignation and leadership transfer (KIP-595 EndQuorumEpoch): a leader or candidate steps
//! down naming its preferred successors (`resign`, graceful shutdown and check quorum), or
//! hands leadership to one named voter (`transfer_leadership`, a preferred-leader election),
//! holding client appends while that voter fetches the newest records; a voter told of a
//! resignation stands early, the more preferred the sooner.

use super::{Out, Raft};
use crate::error::{ErrorCode, RaftError};
use crate::message::{EndQuorumEpochRequest, EndQuorumEpochResponse, Message};
use crate::quorum::{EpochState, PendingTransfer, ResignedState};
use crate::types::NodeId;
use crate::work::Work;

impl Raft {
    /// Graceful resignation (KIP-595 EndQuorumEpoch) of a leader or a candidate, so that the
    /// next election starts without waiting for a timeout.
    pub fn resign(&mut self, now_ms: u64) -> Result<Vec<Work>, RaftError> {
        self.advance_clock(now_ms);
        let mut out = self.new_out();
        self.transition_to_resigned(&mut out, None)?;
        Ok(out.finish())
    }

    /// A leadership transfer (Kafka's preferred-leader election, done the KIP-595 way): the
    /// leader resigns naming `successor` first, which then stands at once. Only to a voter
    /// that has fetched everything this leader appended, so that it wins the election its
    /// EndQuorumEpoch starts (any voter may still win it: Raft's rules decide, not this call).
    /// A live successor that has everything committed but not the newest appends gets one
    /// election timeout to catch up, during which client appends are refused so that the log
    /// end stays put (the Raft thesis's transfer, §3.10); the leader resigns as soon as its
    /// fetch reaches the end, else goes on leading. One further behind is refused.
    pub fn transfer_leadership(
        &mut self,
        now_ms: u64,
        successor: NodeId,
    ) -> Result<Vec<Work>, RaftError> {
        self.advance_clock(now_ms);
        let EpochState::Leader(leader) = &self.state else {
            return Err(RaftError::NotLeader {
                leader_id: self.leader_id(),
                epoch: self.epoch(),
            });
        };
        let refused = |reason| RaftError::TransferRefused { successor, reason };
        if successor == self.config.node_id {
            return Err(refused("it is the leader"));
        }
        let Some(progress) = leader.voters.get(&successor) else {
            return Err(refused("not a voter"));
        };
        // As a voter change asks of a new voter (`check_caught_up`): a voter that stopped
        // fetching (paused, cut off) would not stand, and the others would wait for it.
        if progress
            .last_fetch_ms
            .is_none_or(|t| t + self.config.fetch_timeout_ms < self.now_ms)
        {
            return Err(refused("no fetch within the fetch timeout"));
        }
        let end_offset = progress.end_offset.unwrap_or(0);
        // Far behind (a restarted replica catching up): holding appends for it would stop the
        // partition for an election timeout and then give up. It must have what is committed.
        if end_offset < self.log.high_watermark() {
            return Err(refused("behind the high-watermark"));
        }
        let caught_up = end_offset >= self.log.log_end_offset();
        let deadline_ms = self.now_ms + self.config.election_timeout_ms;
        if let EpochState::Leader(leader) = &mut self.state {
            leader.transfer = Some(PendingTransfer {
                successor,
                deadline_ms,
            });
        }
        let mut out = self.new_out();
        if caught_up {
            self.transition_to_resigned(&mut out, Some(successor))?;
        }
        Ok(out.finish())
    }

    /// A pending leadership transfer: resigns naming its successor once that voter's fetch
    /// reached the log end (appends were held meanwhile, so the end stays put), or gives up
    /// at its deadline, and appends resume.
    pub(crate) fn maybe_complete_transfer(&mut self, out: &mut Out) -> Result<(), RaftError> {
        let log_end_offset = self.log.log_end_offset();
        let now = self.now_ms;
        let EpochState::Leader(leader) = &mut self.state else {
            return Ok(());
        };
        let Some(transfer) = leader.transfer else {
            return Ok(());
        };
        let caught_up = leader
            .voters
            .get(&transfer.successor)
            .is_some_and(|p| p.end_offset.unwrap_or(0) >= log_end_offset);
        if caught_up {
            return self.transition_to_resigned(out, Some(transfer.successor));
        }
        if now >= transfer.deadline_ms {
            tracing::info!(
                successor = transfer.successor,
                "leadership transfer given up: the successor did not catch up"
            );
            leader.transfer = None;
        }
        Ok(())
    }

    // ---- EndQuorumEpoch and resignation ----

    /// Resigns (KIP-595 EndQuorumEpoch) naming the most caught-up voters first, or `first`
    /// ahead of them (a leadership transfer, `Raft::transfer_leadership`).
    pub(crate) fn transition_to_resigned(
        &mut self,
        out: &mut Out,
        first: Option<NodeId>,
    ) -> Result<(), RaftError> {
        if self.state.check_to_resigned().is_err() {
            return Err(RaftError::NothingToResign);
        }
        let epoch = self.epoch();
        let local = self.config.node_id;
        // Preferred successors: the most caught-up voters first (KIP-595).
        let mut successors: Vec<(u64, NodeId)> = match &self.state {
            EpochState::Leader(leader) => leader
                .voters
                .iter()
                .filter(|(id, _)| **id != local)
                .map(|(id, p)| (p.end_offset.unwrap_or(0), *id))
                .collect(),
            _ => self
                .voter_set()
                .iter_ids()
                .filter(|&v| v != local)
                .map(|v| (0, v))
                .collect(),
        };
        successors.sort_by(|a, b| {
            let named = |id: NodeId| Some(id) != first;
            named(a.1)
                .cmp(&named(b.1))
                .then(b.0.cmp(&a.0))
                .then(a.1.cmp(&b.1))
        });
        let preferred_successors: Vec<NodeId> = successors.into_iter().map(|(_, id)| id).collect();
        debug_assert!(first.is_none_or(|f| preferred_successors.first() == Some(&f)));
        let deadline = self.now_ms + self.random_election_timeout_ms();
        self.state = EpochState::Resigned(ResignedState {
            epoch,
            preferred_successors: preferred_successors.clone(),
            unacknowledged: preferred_successors.iter().copied().collect(),
            end_quorum_resend_ms: self.now_ms + self.config.request_timeout_ms,
            election_deadline_ms: deadline,
        });
        // The quorum-state keeps naming us (a candidate names nobody): nothing to rewrite.
        self.send_end_quorum_epoch(out);
        Ok(())
    }

    fn send_end_quorum_epoch(&mut self, out: &mut Out) {
        let EpochState::Resigned(resigned) = &self.state else {
            return;
        };
        let request = EndQuorumEpochRequest {
            leader_id: self.config.node_id,
            leader_epoch: resigned.epoch,
            preferred_successors: resigned.preferred_successors.clone(),
            preferred_successor_directory_ids: resigned
                .preferred_successors
                .iter()
                .map(|&id| self.voter_directory_id(id))
                .collect(),
        };
        let targets: Vec<NodeId> = resigned
            .preferred_successors
            .iter()
            .copied()
            .filter(|id| resigned.unacknowledged.contains(id))
            .collect();
        for voter in targets {
            out.send(voter, Message::EndQuorumEpochRequest(request.clone()));
        }
    }

    pub(crate) fn poll_resigned(&mut self, out: &mut Out) -> Result<(), RaftError> {
        let now = self.now_ms;
        let EpochState::Resigned(resigned) = &mut self.state else {
            return Ok(());
        };
        if now >= resigned.election_deadline_ms {
            if !self.may_stand() {
                // Removed from the voter set, and the removal committed: it may not stand; it
                // looks for the new leader.
                return self.transition_to_removed_observer();
            }
            return self.transition_to_prospective(out);
        }
        if now >= resigned.end_quorum_resend_ms && !resigned.unacknowledged.is_empty() {
            resigned.end_quorum_resend_ms = now + self.config.request_timeout_ms;
            self.send_end_quorum_epoch(out);
        }
        Ok(())
    }

    /// KIP-595: a voter told that the leader (or a candidate) of its epoch stepped down starts
    /// the next election soon; the more preferred it is, the sooner.
    pub(crate) fn handle_end_quorum_epoch_request(
        &mut self,
        from: NodeId,
        request: EndQuorumEpochRequest,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        let respond = |raft: &Raft, out: &mut Out, error_code: ErrorCode| {
            let current_leader = raft.leader_and_epoch();
            out.send(
                from,
                Message::EndQuorumEpochResponse(EndQuorumEpochResponse {
                    error_code,
                    current_leader,
                }),
            );
        };
        if let Some(error_code) =
            self.reject_leader_request(from, request.leader_id, request.leader_epoch)
        {
            respond(self, out, error_code);
            return Ok(());
        }
        if request.leader_epoch > self.epoch() {
            self.transition_to_unattached(request.leader_epoch, out)?;
        }
        let local = self.config.node_id;
        // KIP-853: named with another disk than ours, we are not the successor named.
        let own_directory_id = self.config.directory_id;
        let position = request
            .preferred_successors
            .iter()
            .enumerate()
            .position(|(i, &id)| {
                id == local
                    && request
                        .preferred_successor_directory_ids
                        .get(i)
                        .is_none_or(|d| {
                            *d == crate::voters::NO_DIRECTORY_ID || *d == own_directory_id
                        })
            });
        let backoff_max = self.config.election_backoff_max_ms;
        let jitter = self.rng.below(backoff_max / 10 + 1);
        let timeout = match position {
            // The first preferred successor stands almost at once, the next ones a step later.
            Some(p) => {
                (p as u64) * backoff_max / (request.preferred_successors.len() as u64).max(1)
                    + jitter
            }
            None => backoff_max + jitter,
        };
        let deadline = self.now_ms + timeout;
        self.resigned_leader = Some((request.leader_epoch, request.leader_id));
        match &mut self.state {
            EpochState::Follower(f) if f.leader_id == request.leader_id => {
                f.fetch_timeout_deadline_ms = f.fetch_timeout_deadline_ms.min(deadline);
                // Its leader is leaving: the successors' pre-votes must not be refused in its
                // name.
                self.fetched_from_leader = false;
            }
            EpochState::Unattached(u) => {
                u.election_deadline_ms = u.election_deadline_ms.map(|d| d.min(deadline));
            }
            EpochState::Voted(v) => v.election_deadline_ms = v.election_deadline_ms.min(deadline),
            _ => {}
        }
        respond(self, out, ErrorCode::None);
        Ok(())
    }

    pub(crate) fn handle_end_quorum_epoch_response(
        &mut self,
        from: NodeId,
        response: EndQuorumEpochResponse,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        if self.observe_leader(response.current_leader, out)? {
            return Ok(());
        }
        let retry_at_ms = self.now_ms + self.config.retry_backoff_ms;
        let EpochState::Resigned(resigned) = &mut self.state else {
            return Ok(());
        };
        if response.error_code != ErrorCode::None {
            // Not delivered (the host answers BROKER_NOT_AVAILABLE for a request its lane
            // lost: a quorum restarted at once, whose peers are not listening yet), or not
            // taken: tell that voter again after the retry backoff, as Kafka's request manager
            // does, rather than a request timeout later, by when the election timeout has
            // passed and the voters waited their fetch timeout (1.65 s after a restart of the
            // whole quorum, docs/benchmarks.md "Every node killed at once").
            if resigned.unacknowledged.contains(&from) {
                resigned.end_quorum_resend_ms = resigned.end_quorum_resend_ms.min(retry_at_ms);
            }
        } else if response.current_leader.leader_epoch == resigned.epoch {
            resigned.unacknowledged.remove(&from);
        }
        Ok(())
    }
}
