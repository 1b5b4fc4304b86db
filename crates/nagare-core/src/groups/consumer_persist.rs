//! How consumer-protocol (KIP-848) members are kept in the group log: one record per
//! member (its epoch, subscription and owned partitions), a tombstone when it leaves or
//! expires, and how they come back on open. The target assignment is not stored: it is
//! recomputed (stickily, from what members own) by the first heartbeat after a restart.

use std::collections::BTreeMap;

use super::assignor::Assignment;
use super::consumer::{ConsumerGroup, ConsumerMember, MemberState};
use super::persist::StoredMember;
use super::{Groups, PersistOp};

impl PersistOp {
    /// Whether this op stores a consumer-protocol group.
    pub fn is_consumer_group(&self) -> bool {
        matches!(self, PersistOp::Group { consumer: true, .. })
    }
}

/// The record that stores member `m` of `group`.
pub(super) fn member_op(group: &str, m: &ConsumerMember) -> PersistOp {
    let flat = |a: &Assignment| {
        a.iter()
            .map(|(t, ps)| (t.clone(), ps.iter().copied().collect()))
            .collect()
    };
    PersistOp::ConsumerMember {
        group: group.to_string(),
        member: m.member_id.clone(),
        value: Some(StoredMember {
            epoch: m.member_epoch,
            instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
            subscribed_topic_regex: m.subscribed_topic_regex.clone(),
            server_assignor: m.server_assignor.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            assigned: flat(&m.assigned),
            pending_revocation: flat(&m.pending_revocation),
        }),
    }
}

pub(super) fn tombstone(group: &str, member: &str) -> PersistOp {
    PersistOp::ConsumerMember {
        group: group.to_string(),
        member: member.to_string(),
        value: None,
    }
}

/// Brings back a stored member (on open). Its session starts again at the time of the
/// restart: a member that does not come back expires after its session timeout.
pub(crate) fn restore_member(cg: &mut ConsumerGroup, member_id: &str, v: StoredMember) {
    let unflat = |a: BTreeMap<String, Vec<i32>>| -> Assignment {
        a.into_iter()
            .map(|(t, ps)| (t, ps.into_iter().collect()))
            .collect()
    };
    let mut m = ConsumerMember::new(member_id, 0);
    m.member_epoch = v.epoch;
    m.previous_member_epoch = v.epoch;
    m.instance_id = v.instance_id;
    m.client_id = v.client_id;
    m.client_host = v.client_host;
    m.subscribed_topic_names = v.subscribed_topic_names.into_iter().collect();
    m.subscribed_topic_regex = v.subscribed_topic_regex;
    m.server_assignor = v.server_assignor;
    m.rebalance_timeout_ms = v.rebalance_timeout_ms;
    m.assigned = unflat(v.assigned);
    m.pending_revocation = unflat(v.pending_revocation);
    m.partition_epochs = m
        .assigned
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| ((t.clone(), *p), v.epoch)))
        .collect();
    if !super::consumer::is_empty(&m.pending_revocation) {
        m.state = MemberState::UnrevokedPartitions;
    }
    if let Some(inst) = &m.instance_id {
        cg.static_members
            .insert(inst.clone(), member_id.to_string());
    }
    cg.target.insert(member_id.to_string(), m.assigned.clone());
    cg.members.insert(member_id.to_string(), m);
}

impl Groups {
    /// After the log is replayed: the target assignments were not stored, so every
    /// consumer group with members moves to a new epoch, whose target the next heartbeat
    /// computes (sticky: from what the members own).
    pub fn after_replay(&mut self) {
        for g in self.groups.values_mut() {
            if let Some(cg) = g.consumer.as_mut() {
                if !cg.members.is_empty() {
                    cg.group_epoch = cg
                        .members
                        .values()
                        .map(|m| m.member_epoch)
                        .max()
                        .unwrap_or(0)
                        .max(cg.group_epoch)
                        + 1;
                }
            }
            g.sync_consumer_state();
        }
    }
}
