//! A fault-free cluster for the commit-throughput bench (benches/consensus.rs).

use super::{Cluster, Profile, SimOptions};
use crate::records::{KeyValue, build_batch};
use crate::sim::invariants::Checker;
use crate::sim::network::NetworkConfig;
use crate::types::{NodeId, QuorumConfig};

/// A fault-free cluster for measuring the core's commit throughput (benches/consensus.rs):
/// one partition, zero network delay, instant disks, every invariant still checked.
pub struct SteadyCluster {
    cluster: Cluster,
    next_batch: u64,
}

impl SteadyCluster {
    /// Starts `voters` voters and runs until one leads with everyone caught up.
    pub fn new(voters: usize, seed: u64) -> Self {
        let mut options = SimOptions::new(seed, Profile::Three);
        options.fault_phase_ms = 0;
        options.partitions = Some(1);
        let mut cluster = Cluster::new(options);
        assert!(
            (1..=3).contains(&voters),
            "the steady cluster has 1 to 3 voters"
        );
        let keep: Vec<NodeId> = (1..=voters as NodeId).collect();
        cluster.nodes.retain(|(id, _), _| keep.contains(id));
        cluster.node_ids.retain(|id| keep.contains(id));
        for n in cluster.nodes.values_mut() {
            n.config = QuorumConfig {
                voters: keep.clone(),
                ..n.config.clone()
            };
        }
        cluster.voters = keep.clone();
        cluster.checkers = vec![Checker::new(keep)];
        cluster.network.config = NetworkConfig {
            delay_min_ms: 0,
            delay_max_ms: 0,
            drop_per_mille: 0,
            duplicate_per_mille: 0,
        };
        cluster.disk_latency_max_ms = 0;
        cluster.faults_active = false;
        for id in cluster.node_ids.clone() {
            cluster.start_node(id);
        }
        let mut steady = Self {
            cluster,
            next_batch: 0,
        };
        steady.run_until(|c| c.converged());
        steady
    }

    fn run_until(&mut self, done: impl Fn(&Cluster) -> bool) {
        let c = &mut self.cluster;
        while !done(c) {
            let event = c
                .queue
                .pop()
                .expect("a live cluster always has a next event");
            c.now_ms = event.at_ms;
            c.events += 1;
            c.handle(event.kind);
            c.flush_fetchers();
            c.check_states();
            c.collect_violations();
            assert!(c.violation.is_none(), "{:?}", c.violation);
        }
    }

    /// Appends `batches` batches of `records_per_batch` records to the leader in one call and
    /// runs until the leader's high-watermark covers them. Returns the committed end offset.
    pub fn commit(&mut self, batches: usize, records_per_batch: usize) -> u64 {
        let leader = self
            .cluster
            .current_leader(0)
            .expect("a steady cluster has a leader");
        let mut proposals = Vec::with_capacity(batches);
        for _ in 0..batches {
            self.next_batch += 1;
            let value = self.next_batch.to_be_bytes();
            let pairs: Vec<KeyValue<'_>> = (0..records_per_batch)
                .map(|_| (None, Some(&value[..])))
                .collect();
            proposals.push(build_batch(&pairs, false, 0));
        }
        let now = self.cluster.now_ms;
        let raft = self
            .cluster
            .nodes
            .get_mut(&(leader, 0))
            .and_then(|n| n.raft.as_mut())
            .expect("alive leader");
        let (result, work) = raft
            .append(now, proposals.clone())
            .expect("leader accepts appends");
        for batch in proposals {
            self.cluster.checkers[0].submitted.insert(batch);
        }
        self.cluster.execute((leader, 0), work);
        self.cluster.reschedule_tick((leader, 0));
        let target = result.last_offset + 1;
        self.run_until(|c| {
            c.nodes[&(leader, 0)]
                .raft
                .as_ref()
                .is_some_and(|r| r.high_watermark() >= target)
        });
        target
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.cluster.events
    }
}
