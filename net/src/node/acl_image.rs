//! The ACL image: the bindings in force, as every node derives them from the records of
//! `__cluster_metadata-0` (their format: acls.rs). The authorizer reads it (authorize.rs);
//! the controller's ACL APIs (acls.rs) propose changes to it.

use std::collections::BTreeMap;

use bytes::Bytes;
use ringlog_replication::Raft;
use ringlog_replication::state_machine::StateMachine;

use crate::acl::AclBinding;
use crate::acl::binding::AclRecordError;

/// Every ACL record's key starts so; the binding's id (32 hex digits) follows.
pub const ACL_RECORD_KEY_PREFIX: &[u8] = b"ringlog.acl.v1/";

/// A binding's id: random, as Kafka's are.
pub(super) type AclId = [u8; 16];

/// The key of the binding `id`'s record.
pub fn acl_record_key(id: &AclId) -> Vec<u8> {
    let mut key = ACL_RECORD_KEY_PREFIX.to_vec();
    key.extend(id.iter().flat_map(|b| format!("{b:02x}").into_bytes()));
    key
}

/// The ACL image of `entries` (the metadata state machine's): every record under
/// [`ACL_RECORD_KEY_PREFIX`] that decodes, by id.
pub fn acl_image(entries: &BTreeMap<Bytes, Bytes>) -> BTreeMap<AclId, AclBinding> {
    let mut image = BTreeMap::new();
    let prefix = Bytes::from_static(ACL_RECORD_KEY_PREFIX);
    for (key, value) in entries.range(prefix..) {
        let Some(hex) = key.strip_prefix(ACL_RECORD_KEY_PREFIX) else {
            break;
        };
        match decode_id(hex).and_then(|id| Ok((id, AclBinding::decode_value(value)?))) {
            Ok((id, binding)) => {
                image.insert(id, binding);
            }
            Err(error) => tracing::warn!(%error, "ACL record skipped"),
        }
    }
    image
}

fn decode_id(hex: &[u8]) -> Result<AclId, AclRecordError> {
    let text = std::str::from_utf8(hex).map_err(|_| AclRecordError::new("id is not text"))?;
    if text.len() != 32 {
        return Err(AclRecordError::new("id is not 32 hex digits"));
    }
    let mut id = [0u8; 16];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
            .map_err(|_| AclRecordError::new("id is not hex"))?;
    }
    Ok(id)
}

/// The node's ACL image: the bindings in force, as the metadata state machine has applied
/// them. Every node derives it; the authorizer reads it (authorize.rs).
#[derive(Default)]
pub(super) struct AclImage {
    /// The metadata state machine's last applied offset the image was derived at.
    applied_offset: Option<i64>,
    pub(super) image: BTreeMap<AclId, AclBinding>,
    /// Whether the image has been caught up once ([`AclImage::loaded`]). Latched.
    loaded: bool,
    /// The first high-watermark of `__cluster_metadata-0` this node learned in this run
    /// (from its leader's Fetch answer, or its own as leader): every record committed before
    /// the node started is below it.
    first_high_watermark: Option<u64>,
}

impl AclImage {
    /// The bindings in force on this node (applied).
    pub(super) fn bindings(&self) -> impl Iterator<Item = &AclBinding> + Clone {
        self.image.values()
    }

    /// Brings the image up to the metadata state machine (called with every look at the
    /// applied metadata records, topic_image.rs). Returns the offset it applied to, or `None`
    /// when it has not moved.
    pub(super) fn apply(
        &mut self,
        state_machine: &ringlog_replication::state_machine::KeyValueStateMachine,
        metadata: &Raft,
    ) -> Option<i64> {
        let applied = state_machine.last_applied_offset();
        if self.applied_offset == Some(applied) {
            return None;
        }
        let image = acl_image(state_machine.entries());
        if self.image != image {
            tracing::info!(bindings = image.len(), "ACLs changed");
        }
        self.image = image;
        self.applied_offset = Some(applied);
        self.loaded(metadata);
        Some(applied)
    }

    /// Notes a high-watermark of `__cluster_metadata-0` (the node calls it with each one the
    /// host reports); the first one is what [`AclImage::loaded`] waits for.
    pub(super) fn note_high_watermark(&mut self, high_watermark: u64) {
        self.first_high_watermark.get_or_insert(high_watermark);
    }

    /// Whether this node's ACL image can be used: with an authorizer, a node that has just
    /// started holds the bindings of its own snapshot and log, which may miss the latest ones
    /// (a DENY added while it was down). Kafka's StandardAuthorizer refuses to authorize until
    /// its initial load is complete; here the image counts as loaded once the metadata state
    /// machine has applied ([`caught_up`]):
    /// - past the first record of the current metadata epoch (the leader's LeaderChange, which
    ///   every epoch of `__cluster_metadata` starts with): it then holds every binding
    ///   committed before this epoch, as the controller's image does (controller.rs,
    ///   `applied_past_epoch_start`);
    /// - and up to the first high-watermark it learned in this run: it then also holds what
    ///   was committed in this epoch while it was down. The epoch rule alone missed that when
    ///   the node's log already held the epoch's start (it died in the epoch the DENY was
    ///   added in, and the leader kept that epoch): seen as tests/acls.rs failing now and then
    ///   on 2026-12-03, the restarted node answering a denied Produce.
    ///
    /// Once loaded, it stays so.
    pub(super) fn loaded(&mut self, metadata: &Raft) -> bool {
        if self.loaded {
            return true;
        }
        let applied = self.applied_offset.unwrap_or(-1);
        let loaded = caught_up(
            metadata.leader_id().is_some(),
            metadata.epoch(),
            metadata.log(),
            self.first_high_watermark,
            applied,
        );
        if loaded {
            tracing::info!(
                epoch = metadata.epoch(),
                applied,
                "ACL image loaded; authorizing requests"
            );
            self.loaded = true;
        }
        loaded
    }
}

/// The rule of [`AclImage::loaded`]: a leader is known, the image applied past the first
/// record of the current epoch, and up to the first high-watermark learned in this run.
fn caught_up(
    leader_known: bool,
    epoch: u32,
    log: &ringlog_replication::LogState,
    first_high_watermark: Option<u64>,
    applied: i64,
) -> bool {
    leader_known
        && super::controller::applied_past_epoch_start(log, epoch, applied)
        && first_high_watermark.is_some_and(|hw| applied + 1 >= hw as i64)
}

#[cfg(test)]
mod tests {
    use super::caught_up;
    use ringlog_replication::{
        ElectionState, LogState, OffsetAndEpoch, RecoveredSnapshots, RecoveredState,
    };

    /// A node that died in epoch 3 after its start (600) and restarted: its log ends at 650.
    fn restarted() -> LogState {
        let state = RecoveredState {
            election: ElectionState::default(),
            log_start_offset: 0,
            log_end_offset: 650,
            epoch_cache: vec![OffsetAndEpoch::new(0, 1), OffsetAndEpoch::new(600, 3)],
            repair_pending: false,
        };
        LogState::recovered_with_snapshots(&state, RecoveredSnapshots::default())
            .expect("a consistent log")
    }

    /// The leader kept epoch 3 and committed a DENY at 700 while this node was down. The node
    /// has applied its own log (to 649), past the epoch's start: before 2026-12-03 that was
    /// "loaded", and the DENY was not in the image. Now it waits for the high-watermark the
    /// leader gives it (710) and is loaded once it applied up to it.
    #[test]
    fn a_restarted_node_waits_for_what_its_epoch_committed_while_it_was_down() {
        let log = restarted();
        assert!(
            !caught_up(false, 3, &log, Some(710), 709),
            "no leader known"
        );
        assert!(
            !caught_up(true, 3, &log, None, 649),
            "no high-watermark learned yet"
        );
        assert!(
            !caught_up(true, 3, &log, Some(710), 649),
            "the DENY at 700 not applied"
        );
        assert!(caught_up(true, 3, &log, Some(710), 709));
        // A later epoch whose start is not applied yet.
        assert!(!caught_up(true, 4, &log, Some(710), 709));
    }
}
