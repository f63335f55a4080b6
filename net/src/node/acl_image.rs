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
    /// Whether the image has been caught up once: it applied every metadata record committed
    /// before the current metadata epoch ([`AclImage::loaded`]). Latched.
    loaded: bool,
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

    /// Whether this node's ACL image can be used: with an authorizer, a node that has just
    /// started holds the bindings of its own snapshot and log, which may miss the latest ones
    /// (a DENY added while it was down). Kafka's StandardAuthorizer refuses to authorize until
    /// its initial load is complete; here the image counts as loaded once the metadata state
    /// machine has applied past the first record of the current metadata epoch (the leader's
    /// LeaderChange, which every epoch of `__cluster_metadata` starts with): it then holds
    /// every binding committed before this epoch, as the controller's image does
    /// (controller.rs, `applied_past_epoch_start`). Once loaded, it stays so.
    pub(super) fn loaded(&mut self, metadata: &Raft) -> bool {
        if self.loaded {
            return true;
        }
        let (epoch, leader) = (metadata.epoch(), metadata.leader_id());
        let applied = self.applied_offset.unwrap_or(-1);
        let loaded = leader.is_some()
            && super::controller::applied_past_epoch_start(metadata.log(), epoch, applied);
        if loaded {
            tracing::info!(epoch, applied, "ACL image loaded; authorizing requests");
            self.loaded = true;
        }
        loaded
    }
}
