//! A fault-free cluster for the commit-throughput bench (benches/consensus.rs): the production
//! host on every node over the in-memory disk with no delays, zero network delay, one
//! partition, every check of the host-driven simulator still on.

use super::{Cluster, EventKind, HostSimOptions};
use crate::records::{KeyValue, build_batch};

/// One client appending to the leader and waiting for the commit, round after round.
pub struct SteadyCluster {
    cluster: Cluster,
    next_batch: u64,
}

impl SteadyCluster {
    /// Starts `voters` voters (1–5) and runs until one leads with everyone caught up.
    pub fn new(voters: usize, seed: u64) -> SteadyCluster {
        let mut options = HostSimOptions::new(seed);
        options.voters = Some(voters);
        options.observers = Some(0);
        options.partitions = Some(1);
        options.fault_phase_ms = 0;
        let mut cluster = Cluster::new(options);
        cluster.faults_active = false;
        cluster.network.config.delay_min_ms = 0;
        cluster.network.config.delay_max_ms = 0;
        cluster.network.config.drop_per_mille = 0;
        cluster.network.config.duplicate_per_mille = 0;
        cluster.memory_faults.delay_probability = 0.0;
        cluster.memory_faults.reorder_completions = false;
        cluster.disk_latency_max_ms = 0;
        for id in cluster.node_ids.clone() {
            let disk = cluster.new_disk(id, 0);
            cluster.nodes.get_mut(&id).expect("node").disk = Some(disk);
            cluster.start_node(id);
        }
        let mut steady = SteadyCluster {
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
            if matches!(event.kind, EventKind::ClientAppend | EventKind::Fault) {
                continue;
            }
            c.handle(event.kind);
            c.check_leaders();
            c.collect_violation();
            assert!(c.violation.is_none(), "{:?}", c.violation);
        }
    }

    /// Appends `batches` batches of `records_per_batch` records to the leader in one call and
    /// runs until the leader's high-watermark covers them. Returns the committed end offset.
    pub fn commit(&mut self, batches: usize, records_per_batch: usize) -> u64 {
        let (leader, _) = self
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
        self.cluster.checks.on_submitted(0, &proposals);
        let now = self.cluster.now_ms;
        let appended = self
            .cluster
            .host_mut(leader)
            .append(now, 0, proposals)
            .expect("the leader accepts appends");
        self.cluster.settle(leader);
        let target = appended.last_offset + 1;
        self.run_until(|c| {
            c.nodes[&leader]
                .host
                .as_ref()
                .and_then(|h| h.raft(0))
                .is_some_and(|r| r.high_watermark() >= target)
        });
        target
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.cluster.events
    }
}

#[cfg(test)]
mod tests {
    use super::SteadyCluster;

    /// Every round commits what it appended, on 1, 3 and 5 voters.
    #[test]
    fn a_steady_cluster_commits_every_round() {
        for voters in [1, 3, 5] {
            let mut cluster = SteadyCluster::new(voters, 1);
            let first = cluster.commit(1, 4);
            let second = cluster.commit(64, 4);
            assert!(
                second >= first + 64 * 4,
                "{voters} voters: {first} then {second}"
            );
            assert!(cluster.events() > 0);
        }
    }
}
