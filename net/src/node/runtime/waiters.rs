//! Storage completions and the API layer's waiters and deadlines. The host drains the ring,
//! reports durability to the core and releases what waited on it (`Host::pump`); the node then
//! delivers the host's output, answers produce waiters and sends the replica Fetches that a
//! later answer on their connection released, until nothing is left to do. What a routed
//! completion queued reaches the kernel before the event loop sleeps on the ring's readiness fd
//! (pump.rs). The deadlines of one loop turn (quorum requests, produces, parked fetches, groups,
//! DeleteRecords, voter changes) are run by `expire`.

use super::super::*;

impl Node {
    /// Drains storage completions through the host and acts on everything that follows from
    /// them, until nothing is left to do.
    pub(in crate::node) fn pump(&mut self) -> Result<(), NodeError> {
        let mut first = true;
        // A new turn: queued topic changes get their budget again (runtime/partitions.rs).
        self.topic_changes_until = None;
        loop {
            let now = self.now_ms();
            let began = Instant::now();
            let progressed = self.host.pump(now)?;
            self.stall.part(began, "pump: host");
            // One more round after anything happened: what the waiters' check did (retention's
            // snapshot, a topic's partitions started) is reported to the core in it.
            if !first
                && !progressed
                && !self.host.has_output()
                && !self.quorum.has_released_fetches()
            {
                return Ok(());
            }
            first = false;
            self.deliver()?;
            // Its stages are timed inside (handlers.rs).
            self.check_waiters()?;
            if self.quorum.has_released_fetches() {
                self.send_released_fetches()?;
            }
        }
    }

    /// The deadlines of one loop turn: the quorum's unanswered requests, the API layer's.
    pub(in crate::node) fn expire(&mut self, now: u64) {
        let mut q = qx!(self);
        self.quorum.expire(&mut q);
        self.handlers_expire(now);
        let mut cx = cx!(self);
        metadata::answer_parked_metadata(
            &mut cx,
            &mut self.handlers.topics,
            &self.offline,
            &mut self.remote_leaders,
        );
        if let Err(error) = self.after_call() {
            tracing::warn!(%error, "answering parked Metadata requests");
        }
    }

    /// After storage completions: the committed metadata records are applied first (a topic
    /// may have been created), then the groups, DeleteRecords, voter changes and producer id
    /// blocks move on, the produce waiters whose records are durable or committed are
    /// answered (handlers/produce.rs), and the parked consumer fetches whose partitions gained
    /// committed records (handlers/consumer_fetch.rs). Each stage is timed for the stall watch.
    pub(in crate::node) fn check_waiters(&mut self) -> Result<(), NodeError> {
        // Timed inside, by stage (runtime/partitions.rs).
        self.apply_metadata_records()?;
        let began = Instant::now();
        let env = groups::GroupsEnv {
            topics: &self.handlers.topics,
            message_max_bytes: self
                .handlers
                .broker_configs
                .message_max_bytes(&self.config)
                .0,
        };
        let call = self.handlers.groups.pump(&mut cx!(self), env);
        let after = self.after_call();
        call.and(after)?;
        self.stall.part(began, "pump: groups");
        let now = self.now_ms();
        self.handlers
            .delete_records
            .answer_ready(&self.host, &self.config, now)?;
        self.answer_voter_changes()?;
        self.handlers
            .producer_id_control
            .answer_blocks(&cx!(self), &mut self.handlers.producer_ids)?;
        self.handlers
            .produces
            .check_waiters(&cx!(self), &mut self.stall)?;
        let began = Instant::now();
        let lookup = metadata::PartitionLookup {
            topics: &self.handlers.topics,
            offline: &self.offline,
        };
        let woken = self.handlers.fetches.wake(&mut cx!(self), lookup);
        self.stall.part(began, "pump: wake_parked_fetches");
        woken
    }

    /// The API layer's deadlines: groups, DeleteRecords, voter changes, this voter's own
    /// endpoint update; produce requests past their timeout and parked fetches past their wait
    /// are answered.
    pub(in crate::node) fn handlers_expire(&mut self, now: u64) {
        let env = groups::GroupsEnv {
            topics: &self.handlers.topics,
            message_max_bytes: self
                .handlers
                .broker_configs
                .message_max_bytes(&self.config)
                .0,
        };
        let call = self.handlers.groups.tick(&mut cx!(self), env, now);
        let after = self.after_call();
        if let Err(error) = call.and(after) {
            tracing::warn!(%error, "group deadlines");
        }
        if let Err(error) = self
            .handlers
            .delete_records
            .answer_ready(&self.host, &self.config, now)
        {
            tracing::warn!(%error, "DeleteRecords deadlines");
        }
        if let Err(error) = self.answer_voter_changes() {
            tracing::warn!(%error, "voter change deadlines");
        }
        let mut cx = cx!(self);
        self.handlers
            .producer_ids
            .prefetch_first_block(&mut cx, &mut self.handlers.producer_id_control);
        self.handlers.own_endpoint.maybe_send_update(&mut cx);
        if let Err(error) = self.after_call() {
            tracing::warn!(%error, "sending UpdateRaftVoter");
        }
        self.handlers.produces.expire(&cx!(self), now);
        let lookup = metadata::PartitionLookup {
            topics: &self.handlers.topics,
            offline: &self.offline,
        };
        self.handlers.fetches.expire(&mut cx!(self), lookup, now);
    }

    /// Shutdown: every waiting produce, parked fetch, voter change and group request is
    /// answered now.
    pub(in crate::node) fn handlers_fail_all(&mut self, code: ErrorCode) -> Result<(), NodeError> {
        self.handlers.produces.fail_all(&cx!(self), code)?;
        let lookup = metadata::PartitionLookup {
            topics: &self.handlers.topics,
            offline: &self.offline,
        };
        self.handlers.fetches.answer_all(&mut cx!(self), lookup)?;
        self.handlers.voter_changes.fail_all(code)?;
        self.handlers.groups.fail_all()
    }

    /// Answers the voter changes whose record committed, was truncated, or ran out of time.
    pub(in crate::node) fn answer_voter_changes(&mut self) -> Result<(), NodeError> {
        let now = self.now_ms();
        self.handlers
            .voter_changes
            .answer(&self.host, &self.table, now)
    }

    /// The voter ids of the metadata partition's quorum in force (KIP-853: from its log, else
    /// `controller.quorum.voters`).
    pub(in crate::node) fn metadata_voter_ids(&self) -> Vec<NodeId> {
        self.metadata_raft().voter_set().ids()
    }
}
