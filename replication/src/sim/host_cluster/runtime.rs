//! The runtime around each node's host, as net/src/node/mod.rs plays it in production: a
//! message delivered to the host (`step`), the loop turn after every host call (`settle`: tick,
//! carry out the outputs, pump while nothing is in flight), pumps and ticks scheduled later,
//! each [`Output`] carried out (`deliver()`'s arms), fetch answers routed back to their
//! requester, and the simulated network.

use std::collections::VecDeque;

use ringlog_engine::io::MemoryIo;

use super::super::network::Fate;
use super::{Cluster, EventKind, FetchOrigin};
use crate::host::{Host, HostError, Output};
use crate::message::{FetchResponse, Message};
use crate::multi::PartitionMessage;
use crate::types::{NodeId, PartitionId};

impl Cluster {
    pub(super) fn host_mut(&mut self, node: NodeId) -> &mut Host<MemoryIo> {
        self.nodes
            .get_mut(&node)
            .expect("node")
            .host
            .as_mut()
            .expect("alive")
    }

    /// A host call's result: a refused input is what the runtime logs and skips; here the core
    /// refusing a message it was built to take is a violation,
    /// and so is a storage error (no I/O error is injected).
    pub(super) fn host_result<T>(
        &mut self,
        node: NodeId,
        call: &str,
        result: Result<T, HostError>,
    ) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.fail(format!("node {node}: {call} failed: {error}"));
                None
            }
        }
    }

    /// A message reaches `to`'s host. A replica fetch gets a correlation id of the runtime's, so
    /// the answer can be routed back (the requesters' own ids collide).
    pub(super) fn deliver(
        &mut self,
        from: NodeId,
        from_incarnation: u64,
        to: NodeId,
        partition: PartitionId,
        mut message: Message,
    ) {
        let now = self.now_ms;
        if self.options.trace {
            eprintln!("{now} ms: {from} -> {to} /{partition}: {message:?}");
        }
        let node = self.nodes.get_mut(&to).expect("node");
        if let Message::VoteRequest(request) = &message {
            node.vote_requests_unanswered
                .entry((partition, from))
                .or_default()
                .push_back(request.pre_vote);
        }
        if let Message::FetchRequest(request) = &mut message {
            let id = node.next_fetch_id;
            node.next_fetch_id += 1;
            node.fetches.insert(
                id,
                FetchOrigin {
                    from,
                    from_incarnation,
                    correlation_id: request.correlation_id,
                },
            );
            request.correlation_id = id;
        }
        let host = node.host.as_mut().expect("alive");
        let result = host.step(now, from, PartitionMessage { partition, message });
        if self.host_result(to, "step", result).is_some() {
            self.settle(to);
        }
    }

    /// The runtime's loop turn for one node: tick the timers, carry out every output, and pump
    /// at once while no storage operation is in flight (a backend without a readiness fd);
    /// otherwise the disk's completion comes back as a later `Pump` event.
    pub(super) fn settle(&mut self, node: NodeId) {
        let now = self.now_ms;
        let mut deadline = u64::MAX;
        for round in 0.. {
            if round == 10_000 {
                self.fail(format!("node {node}: livelock in its loop at {now} ms"));
                return;
            }
            let Some(host) = self.nodes.get_mut(&node).and_then(|n| n.host.as_mut()) else {
                return;
            };
            let result = host.tick(now);
            match self.host_result(node, "tick", result) {
                Some(next) => deadline = next,
                None => return,
            }
            let outputs = self.host_mut(node).take_output();
            let had_outputs = !outputs.is_empty();
            for output in outputs {
                self.carry_out(node, output);
            }
            // The state machines once every output of the call is carried out: one call may
            // move a high-watermark twice, and the state machine is already at the second.
            if had_outputs {
                for partition in 0..self.partitions {
                    self.check_state(node, partition, "after an apply or install");
                }
            }
            if self.violation.is_some() || self.checks.violation.is_some() {
                return;
            }
            // No I/O error is injected: a partition a storage error took offline is a bug.
            if let Some((partition, offline)) =
                self.host_mut(node).offline_partitions().iter().next()
            {
                let message = format!("node {node}/{partition} went offline: {}", offline.error);
                self.fail(message);
                return;
            }
            let host = self.host_mut(node);
            if host.storage_in_flight() {
                break;
            }
            let result = host.pump(now);
            let Some(progressed) = self.host_result(node, "pump", result) else {
                return;
            };
            if !progressed && !had_outputs && !self.host_mut(node).has_output() {
                break;
            }
        }
        self.schedule_pump(node);
        self.schedule_tick(node, deadline);
    }

    pub(super) fn schedule_pump(&mut self, node: NodeId) {
        let latency = self.rng.below(self.disk_latency_max_ms + 1);
        let n = self.nodes.get_mut(&node).expect("node");
        let in_flight = n.host.as_ref().is_some_and(|h| h.storage_in_flight());
        if !in_flight || n.pump_scheduled {
            return;
        }
        n.pump_scheduled = true;
        let incarnation = n.incarnation;
        self.schedule(self.now_ms + latency, EventKind::Pump { node, incarnation });
    }

    pub(super) fn schedule_tick(&mut self, node: NodeId, deadline: u64) {
        let n = self.nodes.get_mut(&node).expect("node");
        if deadline == u64::MAX || n.scheduled_tick_ms == Some(deadline) {
            return;
        }
        n.scheduled_tick_ms = Some(deadline);
        let incarnation = n.incarnation;
        self.schedule(deadline, EventKind::Tick { node, incarnation });
    }

    /// What the node's runtime does with one output (net/src/node/mod.rs `deliver()`).
    pub(super) fn carry_out(&mut self, node: NodeId, output: Output) {
        match output {
            Output::Send {
                partition,
                to,
                message,
            } => {
                if let Message::VoteResponse(response) = &message {
                    let answers_pre_vote = self
                        .nodes
                        .get_mut(&node)
                        .expect("node")
                        .vote_requests_unanswered
                        .get_mut(&(partition, to))
                        .and_then(VecDeque::pop_front)
                        .unwrap_or(false);
                    if response.vote_granted && !answers_pre_vote {
                        let epoch = response.current_leader.leader_epoch;
                        self.checks.on_vote_sent(node, partition, epoch, to);
                    }
                }
                match message {
                    Message::FetchResponse(response) => {
                        self.answer_fetch(node, partition, response)
                    }
                    message => self.send(node, to, partition, message),
                }
            }
            Output::FetchResponse {
                partition,
                mut response,
                records,
            } => {
                if let Some(records) = records {
                    match self.host_mut(node).records_bytes(&records) {
                        Ok(bytes) => response.records = bytes,
                        Err(error) => {
                            self.fail(format!("node {node}: reading {records:?}: {error}"));
                            return;
                        }
                    }
                }
                self.answer_fetch(node, partition, response);
            }
            Output::FetchSnapshotResponse {
                partition,
                to,
                mut response,
                region,
            } => {
                if let Some(range) = region {
                    match self.host_mut(node).read_file_range(&range) {
                        Ok(bytes) => response.unaligned_records = bytes,
                        Err(error) => {
                            self.fail(format!("node {node}: reading {range:?}: {error}"));
                            return;
                        }
                    }
                }
                self.count("fetch-snapshot-answered");
                self.send(
                    node,
                    to,
                    partition,
                    Message::FetchSnapshotResponse(response),
                );
            }
            Output::LeaderAppended {
                partition,
                base_offset,
                batches,
            } => {
                // A partition a storage error took offline has no core left to ask.
                let Some(epoch) = self.host_mut(node).raft(partition).map(|raft| raft.epoch())
                else {
                    self.fail(format!("node {node}/{partition}: offline after appending"));
                    return;
                };
                self.checks
                    .on_leader_appended(node, partition, base_offset, epoch, &batches);
            }
            Output::FollowerAppended { partition, records } => {
                self.checks.on_follower_appended(node, partition, &records)
            }
            Output::Truncated {
                partition,
                offset,
                snapshot,
            } => {
                if snapshot {
                    self.count("snapshot-install");
                }
                self.checks.on_truncated(node, partition, offset, snapshot);
            }
            Output::HighWatermark {
                partition,
                high_watermark,
            } => {
                self.checks
                    .on_high_watermark(node, partition, high_watermark);
                self.check_commit_durable(node, partition, high_watermark);
            }
            Output::GenerateSnapshot {
                partition,
                dir,
                job,
            } => {
                let at = self.now_ms + 1 + self.rng.below(30);
                let incarnation = self.nodes[&node].incarnation;
                self.schedule(
                    at,
                    EventKind::SnapshotWritten {
                        node,
                        incarnation,
                        partition,
                        dir,
                        job,
                    },
                );
            }
        }
    }

    /// KIP-630: `node`'s state machine equals the committed log replayed to where it applied.
    pub(super) fn check_state(&mut self, node: NodeId, partition: PartitionId, what: &str) {
        let Some(host) = self.nodes.get(&node).and_then(|n| n.host.as_ref()) else {
            return;
        };
        // The bytes of chunks the node's logs count against their shared budget are the bytes
        // they hold (docs/log.md, "What lagging voters have not fetched").
        let held: u64 = host
            .stores()
            .map(|(_, store)| store.log.cached_bytes())
            .sum();
        if held != host.tail_cache_bytes() {
            self.checks.fail(format!(
                "node {node}: its logs hold {held} bytes of chunks, its budget counts {}",
                host.tail_cache_bytes()
            ));
        }
        let (Some(store), Some(raft)) = (host.store(partition), host.raft(partition)) else {
            return;
        };
        self.checks.check_state_machine(
            node,
            partition,
            &store.snapshots.state_machine,
            raft.high_watermark(),
            what,
        );
    }

    /// A fetch answer goes back to the request's sender, with the sender's correlation id.
    pub(super) fn answer_fetch(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        mut response: FetchResponse,
    ) {
        let Some(origin) = self
            .nodes
            .get_mut(&node)
            .expect("node")
            .fetches
            .remove(&response.correlation_id)
        else {
            return;
        };
        response.correlation_id = origin.correlation_id;
        self.send_to_incarnation(
            node,
            origin.from,
            origin.from_incarnation,
            partition,
            Message::FetchResponse(response),
        );
    }

    pub(super) fn send(
        &mut self,
        from: NodeId,
        to: NodeId,
        partition: PartitionId,
        message: Message,
    ) {
        let to_incarnation = self.nodes[&to].incarnation;
        self.send_to_incarnation(from, to, to_incarnation, partition, message);
    }

    pub(super) fn send_to_incarnation(
        &mut self,
        from: NodeId,
        to: NodeId,
        to_incarnation: u64,
        partition: PartitionId,
        message: Message,
    ) {
        let from_incarnation = self.nodes[&from].incarnation;
        for at in self.delivery_times(from, to) {
            self.schedule(
                at,
                EventKind::Deliver {
                    from,
                    from_incarnation,
                    to,
                    to_incarnation,
                    partition,
                    message: message.clone(),
                },
            );
        }
    }

    /// The network's fate for one message: its delivery times (none if lost).
    pub(super) fn delivery_times(&mut self, from: NodeId, to: NodeId) -> Vec<u64> {
        match self.network.fate(&mut self.rng, from, to) {
            Fate::Blocked => {
                self.count("partitioned-message");
                Vec::new()
            }
            Fate::Dropped => {
                self.count("drop");
                Vec::new()
            }
            Fate::Deliver(delays) => {
                if delays.len() > 1 {
                    self.count("duplicate");
                }
                let mut times = Vec::with_capacity(delays.len());
                for delay in delays {
                    let at = self.now_ms + delay;
                    let last = self.last_delivery_ms.entry((from, to)).or_default();
                    if at < *last {
                        *self.faults.entry("reorder").or_default() += 1;
                    } else {
                        *last = at;
                    }
                    times.push(at);
                }
                times
            }
        }
    }
}
