//! Confirmation records waiting to be written alone (docs/log.md): a completed flush's record
//! joins the next flush of its log, and one whose next flush has not come
//! `CONFIRMATION_DELAY_MS` after it began to wait is written alone.
//!
//! With a hundred partitions nearly every log has a record waiting for its next flush, and
//! walking every store for them on every turn was ~2 % of a loaded voter's CPU (2026-12-06).
//! So each record's due time is stamped once, at the first call after it began to wait, kept in
//! order, and only the due ones are looked at. The partitions where a record can have begun or
//! stopped waiting are named to the watch ([`ConfirmationWatch::fresh`]); once per
//! `CONFIRMATION_SWEEP_MS` every store is looked at for one no path named, which simulator builds
//! do on every call, failing the run if they find one.

use std::collections::BTreeSet;

use ringlog_engine::io::Io;

use super::{Host, PartitionStore};
use crate::types::PartitionId;

/// How long a completed flush's confirmation record waits for the next flush of its log to
/// carry it before it is written alone. One record at a time flushes every ~0.5 ms here, so the
/// record nearly always rides; an idle log writes it 5 ms late, a small part of the window in
/// which it is not yet on the medium anyway (docs/log.md, "Known limits").
pub const CONFIRMATION_DELAY_MS: u64 = 5;

/// How often every store is looked at for a record that began or stopped waiting on a path that
/// did not name its partition; none is known.
const CONFIRMATION_SWEEP_MS: u64 = 100;

/// The host's bookkeeping of waiting confirmation records. A stamped record's due time is also
/// its store's `confirmation_due_ms`.
#[derive(Debug, Default)]
pub(super) struct ConfirmationWatch {
    /// Partitions whose record may have begun or stopped waiting since the last look: every
    /// owner of a drained completion (a flush completes), every partition a work list reached
    /// (a flush carries the record; a truncation's or roll's blocking wait completes one).
    pub(super) fresh: Vec<PartitionId>,
    /// The stamped records' due times, earliest first: before the first, nothing is written.
    due: BTreeSet<(u64, PartitionId)>,
    /// Partitions whose record waits while their log waits for disk space: no due time (the
    /// flush's retry carries the record), looked at on every call.
    out_of_space: BTreeSet<PartitionId>,
    /// When every store was last looked at.
    swept_ms: u64,
}

impl ConfirmationWatch {
    /// A partition left the host.
    pub(super) fn forget(&mut self, partition: PartitionId) {
        self.due.retain(|&(_, p)| p != partition);
        self.out_of_space.remove(&partition);
    }

    /// Takes a store's record off the due list.
    fn unstamp(&mut self, partition: PartitionId, store: &mut PartitionStore) {
        if let Some(due_ms) = store.confirmation_due_ms.take() {
            self.due.remove(&(due_ms, partition));
        }
    }
}

impl<I: Io> Host<I> {
    /// Writes alone the waiting records that are due, after stamping those that began to wait
    /// (module doc).
    pub(super) fn write_due_confirmations(&mut self, now_ms: u64) {
        // Simulator builds look every time, so a record that began or stopped waiting unseen
        // fails the run where it happened.
        if cfg!(feature = "sim") || now_ms >= self.confirmations.swept_ms + CONFIRMATION_SWEEP_MS {
            self.confirmations.swept_ms = now_ms;
            for (partition, store) in &self.stores {
                if self.confirmations.fresh.contains(partition) {
                    continue;
                }
                let waiting = store.log.confirmation_waiting();
                let known = store.confirmation_due_ms.is_some()
                    || self.confirmations.out_of_space.contains(partition);
                if waiting != known {
                    // Every way a record begins or stops waiting should have named its
                    // partition.
                    #[cfg(feature = "sim")]
                    panic!(
                        "partition {partition}: a confirmation record began or stopped waiting \
                         unseen (waiting {waiting})"
                    );
                    #[cfg(not(feature = "sim"))]
                    self.confirmations.fresh.push(*partition);
                }
            }
        }
        // A work list names its partition once per item.
        let mut fresh = std::mem::take(&mut self.confirmations.fresh);
        fresh.sort_unstable();
        fresh.dedup();
        for partition in fresh {
            self.look_at_confirmation(partition, now_ms, false);
        }
        // The due ones and those out of space, in partition order (the order their writes are
        // submitted in).
        let mut looked_at: Vec<PartitionId> = self
            .confirmations
            .due
            .iter()
            .take_while(|&&(due_ms, _)| due_ms <= now_ms)
            .map(|&(_, partition)| partition)
            .chain(self.confirmations.out_of_space.iter().copied())
            .collect();
        looked_at.sort_unstable();
        for partition in looked_at {
            self.look_at_confirmation(partition, now_ms, true);
        }
    }

    /// One partition's waiting record: stamped when first seen waiting, written alone when due
    /// (`write`), forgotten once it no longer waits.
    fn look_at_confirmation(&mut self, partition: PartitionId, now_ms: u64, write: bool) {
        let Some(store) = self.stores.get_mut(&partition) else {
            self.confirmations.forget(partition);
            return;
        };
        let watch = &mut self.confirmations;
        if !store.log.confirmation_waiting() {
            watch.unstamp(partition, store);
            watch.out_of_space.remove(&partition);
            return;
        }
        // A log out of space writes nothing alone: its flush's retry carries the record.
        if store.waiting_for_space() {
            watch.unstamp(partition, store);
            watch.out_of_space.insert(partition);
            return;
        }
        watch.out_of_space.remove(&partition);
        let due_ms = *store.confirmation_due_ms.get_or_insert_with(|| {
            let due_ms = now_ms + CONFIRMATION_DELAY_MS;
            watch.due.insert((due_ms, partition));
            due_ms
        });
        if write && due_ms <= now_ms {
            store.log.write_confirmation(&mut self.io);
            watch.unstamp(partition, store);
        }
    }

    /// When the next waiting confirmation record is due (`write_due_confirmations`): the
    /// runtime wakes then at the latest, whichever turn stamped it.
    pub fn next_confirmation_due_ms(&self) -> Option<u64> {
        self.confirmations.due.first().map(|&(due_ms, _)| due_ms)
    }
}
