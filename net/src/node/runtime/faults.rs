//! Storage faults as the node sees them (storage_faults.rs holds the state): the retry of flushes
//! waiting for space, and partitions the host took offline forgotten everywhere the node keeps
//! them.

use super::super::*;

impl Node {
    /// Runs the retry of flushes waiting for space when it is due, and takes in the partitions
    /// the host took offline. Returns the retry's deadline, for the loop's sleep.
    pub(in crate::node) fn watch_storage_faults(
        &mut self,
        now_ms: u64,
    ) -> Result<Option<u64>, NodeError> {
        let waiting = self.host.partitions_waiting_for_space();
        let retried = self.space_retry.due(!waiting.is_empty(), now_ms);
        if retried {
            let asked = self.host.retry_flushes();
            tracing::debug!(
                asked,
                "asking the partitions waiting for space to flush again"
            );
        }
        // Requests waiting on a partition that waits for space are answered now rather than
        // at their timeout (their records may still become durable and committed later, as
        // after any error following an append; an idempotent producer's retry is answered as
        // the duplicate it is).
        for partition in &waiting {
            self.handlers.produces.fail_partition(
                &cx!(self),
                *partition,
                ErrorCode::KafkaStorageError,
            )?;
        }
        self.adopt_offline_partitions()?;
        // Only a retry can have changed which wait (a flush starts waiting for space when its
        // completion is routed, in `pump`): the second walk over every store is for then.
        let still_waiting = if retried {
            self.host.partitions_waiting_for_space().len()
        } else {
            waiting
                .iter()
                .filter(|partition| self.host.waiting_for_space(**partition))
                .count()
        };
        self.observer
            .observe_storage_faults(self.offline.by_name.len(), still_waiting);
        Ok(self.space_retry.deadline_ms())
    }

    /// Forgets every partition the host took offline since the last call: its requests are
    /// answered KAFKA_STORAGE_ERROR, lookups skip it, Metadata reports it offline. Called after
    /// every host call (`deliver`), before anything looks the partition up again.
    pub(in crate::node) fn adopt_offline_partitions(&mut self) -> Result<(), NodeError> {
        for (id, name, error) in self.offline.take_new(&self.host, &self.table)? {
            self.forget_partition(id, ErrorCode::KafkaStorageError)?;
            self.offline.record(name, error);
        }
        Ok(())
    }

    /// The error of an offline partition of this node, if `topic`-`index` is one.
    pub(in crate::node) fn offline_partition_error(&self, topic: &str, index: i32) -> Option<&str> {
        self.offline.error_of(topic, index)
    }
}
