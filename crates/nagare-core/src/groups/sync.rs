//! SyncGroup: the leader hands in the assignment, every member gets its part
//! (CompletingRebalance -> Stable).

use bytes::Bytes;

use super::{GroupError, GroupState, Groups, SyncRequest, SyncResponse, SyncWaiter};
use crate::groups::Group;

impl Groups {
    /// Handles a SyncGroup. `reply` is completed at once or when the leader's assignment
    /// arrives.
    pub fn sync(&mut self, req: SyncRequest, now: u64, reply: SyncWaiter) {
        match self.groups.get_mut(&req.group_id) {
            Some(g) => g.sync(req, now, reply),
            None => {
                let _ = reply.send(Err(GroupError::UnknownMemberId));
            }
        }
    }
}

impl Group {
    fn sync(&mut self, req: SyncRequest, now: u64, reply: SyncWaiter) {
        if let Err(e) = self.check_sync(&req) {
            let _ = reply.send(Err(e));
            return;
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => {
                let _ = reply.send(Err(GroupError::UnknownMemberId));
            }
            GroupState::PreparingRebalance => {
                let _ = reply.send(Err(GroupError::RebalanceInProgress));
            }
            GroupState::Stable => {
                let resp = self.sync_response(&req.member_id);
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    m.last_heartbeat_ms = now;
                }
                let _ = reply.send(Ok(resp));
            }
            GroupState::CompletingRebalance => {
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    m.last_heartbeat_ms = now;
                    m.sync_waiter = Some(reply);
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    self.apply_assignment(req.assignments);
                }
            }
        }
    }

    fn check_sync(&self, req: &SyncRequest) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.check_member(&req.member_id, req.group_instance_id.as_deref())?;
        if req.generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        let type_ok = req
            .protocol_type
            .as_deref()
            .is_none_or(|t| self.protocol_type.as_deref() == Some(t));
        let name_ok = req
            .protocol_name
            .as_deref()
            .is_none_or(|n| self.protocol_name.as_deref() == Some(n));
        if !type_ok || !name_ok {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        Ok(())
    }

    /// Stores the leader's assignment (relayed byte for byte), goes Stable and answers
    /// every member waiting in SyncGroup.
    fn apply_assignment(&mut self, assignments: Vec<(String, Bytes)>) {
        for m in self.members.values_mut() {
            m.assignment = assignments
                .iter()
                .find(|(id, _)| *id == m.member_id)
                .map(|(_, a)| a.clone())
                .unwrap_or_default();
        }
        self.state = GroupState::Stable;
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let resp = self.sync_response(&id);
            if let Some(w) = self.members.get_mut(&id).and_then(|m| m.sync_waiter.take()) {
                let _ = w.send(Ok(resp));
            }
        }
    }

    fn sync_response(&self, member_id: &str) -> SyncResponse {
        SyncResponse {
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }
}
