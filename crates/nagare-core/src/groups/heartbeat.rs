//! Heartbeat, LeaveGroup and session expiry: the ways members prove they are alive or
//! go away (and so trigger a rebalance).

use super::{GroupConfig, GroupError, GroupState, Groups};
use crate::groups::Group;

/// A member leaving: by member id, or (static members, LeaveGroup v3+) by instance id
/// with the member id possibly empty.
#[derive(Debug, Clone, Default)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

impl Groups {
    /// Handles a Heartbeat.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation: i32,
        now: u64,
    ) -> Result<(), GroupError> {
        let g = self
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if g.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        g.check_member(member_id, group_instance_id)?;
        if generation != g.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if let Some(m) = g.members.get_mut(member_id) {
            m.last_heartbeat_ms = now;
        }
        match g.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// Handles a LeaveGroup: one result per member, in order.
    pub fn leave(
        &mut self,
        group_id: &str,
        members: &[LeavingMember],
        now: u64,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let config = self.config.clone();
        let g = self
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if g.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        Ok(members.iter().map(|m| g.leave(m, now, &config)).collect())
    }
}

impl Group {
    fn leave(
        &mut self,
        who: &LeavingMember,
        now: u64,
        config: &GroupConfig,
    ) -> Result<(), GroupError> {
        let id = match &who.group_instance_id {
            Some(instance) => {
                let current = self
                    .static_members
                    .get(instance)
                    .cloned()
                    .ok_or(GroupError::UnknownMemberId)?;
                if !who.member_id.is_empty() && who.member_id != current {
                    return Err(GroupError::FencedInstanceId);
                }
                current
            }
            None => {
                if self.pending_members.remove(&who.member_id).is_some() {
                    self.maybe_complete_join(now);
                    return Ok(());
                }
                if !self.members.contains_key(&who.member_id) {
                    return Err(GroupError::UnknownMemberId);
                }
                who.member_id.clone()
            }
        };
        self.remove_member_and_rebalance(&id, now, config);
        Ok(())
    }

    /// A member left or timed out: the others must rebalance without it.
    pub(crate) fn remove_member_and_rebalance(&mut self, id: &str, now: u64, config: &GroupConfig) {
        self.remove_member(id, GroupError::UnknownMemberId);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now, config)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Runs the timeouts due at `now`.
    pub(crate) fn expire(&mut self, now: u64, config: &GroupConfig) {
        let before = self.pending_members.len();
        self.pending_members.retain(|_, deadline| *deadline > now);
        if self.pending_members.len() != before {
            self.maybe_complete_join(now);
        }
        // A member with a JoinGroup or SyncGroup outstanding is waiting on us, not dead.
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                !m.is_awaiting_join()
                    && !m.is_awaiting_sync()
                    && m.last_heartbeat_ms + m.session_timeout_ms <= now
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.id, member = %id, "member session expired");
            self.remove_member_and_rebalance(&id, now, config);
        }
        if self.state == GroupState::CompletingRebalance
            && self.sync_deadline_ms.is_some_and(|d| now >= d)
        {
            // Whoever has not sent SyncGroup by now (the leader, at least) is out.
            let unsynced: Vec<String> = self
                .members
                .values()
                .filter(|m| !m.is_awaiting_sync())
                .map(|m| m.member_id.clone())
                .collect();
            for id in unsynced {
                tracing::info!(group = %self.id, member = %id, "member never synced; removed");
                self.remove_member_and_rebalance(&id, now, config);
            }
        }
        self.maybe_complete_join(now);
    }
}
