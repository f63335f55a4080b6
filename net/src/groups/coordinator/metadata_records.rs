//! The coordinator's side of the GroupMetadata records in `__consumer_offsets`: what a group's
//! record should hold now, and a group restored from its record by a new coordinator.

use super::*;

impl Coordinator {
    /// What `group_id`'s metadata record should hold now (Kafka writes it when a group
    /// becomes Stable with the leader's assignment and when it becomes empty), with its
    /// `__consumer_offsets` partition; `None` while it rebalances or when it is unknown here.
    /// `now_ms` is the coordinator's clock and `wall_now_ms` the wall clock, to place the
    /// emptying on the wall clock.
    pub fn group_metadata(
        &self,
        group_id: &str,
        now_ms: u64,
        wall_now_ms: i64,
    ) -> Option<(i32, GroupMetadata)> {
        if let Some(group) = self.groups.get(group_id) {
            if group.state != GroupState::Stable {
                return None;
            }
            let protocol = group.protocol_name.clone().unwrap_or_default();
            let members = group
                .members
                .values()
                .map(|m| MemberMetadata {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms.min(i32::MAX as u64) as i32,
                    session_timeout_ms: m.session_timeout_ms.min(i32::MAX as u64) as i32,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect();
            let metadata = GroupMetadata {
                protocol_type: group.protocol_type.clone().unwrap_or_default(),
                generation_id: group.generation_id,
                protocol_name: group.protocol_name.clone(),
                leader: group.leader.clone(),
                current_state_timestamp_ms: wall_now_ms,
                members,
            };
            return Some((group.partition, metadata));
        }
        let emptied = self.emptied_at_ms.get(group_id)?;
        let metadata = GroupMetadata {
            protocol_type: emptied.protocol_type.clone().unwrap_or_default(),
            generation_id: emptied.generation_id,
            protocol_name: None,
            leader: None,
            current_state_timestamp_ms: wall_now_ms - now_ms.saturating_sub(emptied.at_ms) as i64,
            members: Vec::new(),
        };
        Some((emptied.partition, metadata))
    }

    /// A new coordinator of `partition` takes `group_id` over from its metadata record: a
    /// group with members is held again, Stable in the recorded generation with the recorded
    /// members and assignments (each member's session starts now, so members that are gone
    /// expire as usual); an empty one is remembered as emptied at the recorded time.
    pub fn restore_group(
        &mut self,
        partition: i32,
        group_id: &str,
        metadata: &GroupMetadata,
        now_ms: u64,
        wall_now_ms: i64,
    ) {
        self.observe_clock(now_ms);
        if self.groups.contains_key(group_id) {
            return;
        }
        let protocol_type =
            (!metadata.protocol_type.is_empty()).then(|| metadata.protocol_type.clone());
        if metadata.members.is_empty() {
            if metadata.current_state_timestamp_ms >= 0 {
                let age_ms = wall_now_ms
                    .saturating_sub(metadata.current_state_timestamp_ms)
                    .max(0);
                let emptied = Emptied {
                    partition,
                    at_ms: now_ms.saturating_sub(age_ms as u64),
                    protocol_type,
                    generation_id: metadata.generation_id,
                };
                self.emptied_at_ms.insert(group_id.to_string(), emptied);
            }
            return;
        }
        let (Some(protocol_name), Some(leader)) = (&metadata.protocol_name, &metadata.leader)
        else {
            tracing::warn!(
                group_id,
                "a group metadata record with members but no protocol or leader: not restored"
            );
            return;
        };
        let mut group = Group::new(
            group_id.to_string(),
            partition,
            self.config.initial_rebalance_delay_ms,
        );
        for m in &metadata.members {
            let member = Member {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms.max(0) as u64,
                session_timeout_ms: m.session_timeout_ms.max(0) as u64,
                protocol_type: metadata.protocol_type.clone(),
                protocols: vec![(protocol_name.clone(), m.subscription.clone())],
                assignment: m.assignment.clone(),
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                heartbeat_deadline_ms: now_ms + m.session_timeout_ms.max(0) as u64,
            };
            if let Some(instance_id) = &member.group_instance_id {
                group
                    .static_members
                    .insert(instance_id.clone(), member.member_id.clone());
            }
            group.members.insert(member.member_id.clone(), member);
        }
        group.generation_id = metadata.generation_id;
        group.protocol_type = protocol_type;
        group.protocol_name = Some(protocol_name.clone());
        group.leader = Some(leader.clone());
        group.subscribed_topics = super::super::join::subscribed_topics(&group);
        // Restoring, not a transition: the group was Stable at the old coordinator.
        group.state = GroupState::Stable;
        self.emptied_at_ms.remove(group_id);
        self.groups.insert(group_id.to_string(), group);
        self.after_change(group_id);
    }
}
