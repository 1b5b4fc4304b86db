//! JoinGroup and the end of a join phase (PreparingRebalance -> CompletingRebalance or
//! Empty).

use uuid::Uuid;

use super::group::{InitialJoin, Member};
use super::{
    GroupConfig, GroupError, GroupState, Groups, JoinRequest, JoinResponse, JoinWaiter,
    JoinedMember,
};
use crate::groups::Group;

impl Groups {
    /// Handles a JoinGroup. `reply` is completed at once or when the rebalance completes.
    pub fn join(&mut self, req: JoinRequest, now: u64, reply: JoinWaiter) {
        if req.group_id.is_empty() {
            let _ = reply.send(Err(GroupError::InvalidGroupId));
            return;
        }
        if !self.groups.contains_key(&req.group_id) {
            if !req.member_id.is_empty() {
                let _ = reply.send(Err(GroupError::UnknownMemberId));
                return;
            }
            self.groups
                .insert(req.group_id.clone(), Group::new(&req.group_id));
        }
        if let Some(g) = self.groups.get_mut(&req.group_id) {
            g.join(req, now, &self.config, reply);
        }
    }
}

impl Group {
    pub(crate) fn join(
        &mut self,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
        reply: JoinWaiter,
    ) {
        if self.state == GroupState::Dead {
            let _ = reply.send(Err(GroupError::CoordinatorNotAvailable));
            return;
        }
        if let Some(cg) = &self.consumer {
            // A live consumer-protocol group takes no classic member (Kafka's online
            // migration is not done here); an empty one goes back to the classic
            // protocol, keeping its offsets (Kafka's downgrade of an empty group).
            if !cg.members.is_empty() {
                let _ = reply.send(Err(GroupError::InconsistentGroupProtocol));
                return;
            }
            self.consumer = None;
            self.protocol_type = None;
            self.state = GroupState::Empty;
        }
        let session = req.session_timeout_ms as i64;
        if session < config.min_session_timeout_ms as i64
            || session > config.max_session_timeout_ms as i64
        {
            let _ = reply.send(Err(GroupError::InvalidSessionTimeout(session)));
            return;
        }
        let except = (!req.member_id.is_empty()).then_some(req.member_id.as_str());
        if !self.supports(&req.protocol_type, &req.protocols, except) {
            let _ = reply.send(Err(GroupError::InconsistentGroupProtocol));
            return;
        }
        if req.member_id.is_empty() {
            self.join_new(req, now, config, reply);
        } else {
            self.join_known(req, now, config, reply);
        }
    }

    fn join_new(&mut self, req: JoinRequest, now: u64, config: &GroupConfig, reply: JoinWaiter) {
        if let Some(instance) = req.group_instance_id.clone() {
            let new_id = format!("{instance}-{}", Uuid::new_v4());
            match self.static_members.get(&instance).cloned() {
                Some(old_id) if self.members.contains_key(&old_id) => {
                    self.replace_static_member(&old_id, new_id, req, now, config, reply)
                }
                _ => self.add_member_and_rebalance(new_id, req, now, config, reply),
            }
            return;
        }
        let prefix = if req.client_id.is_empty() {
            "member"
        } else {
            req.client_id.as_str()
        };
        let new_id = format!("{prefix}-{}", Uuid::new_v4());
        if req.require_known_member_id {
            // The member must come back with this id; until it does (or its session
            // timeout passes) the rebalance waits for it.
            let deadline = now + req.session_timeout_ms.max(0) as u64;
            self.pending_members.insert(new_id.clone(), deadline);
            let _ = reply.send(Err(GroupError::MemberIdRequired(new_id)));
            return;
        }
        self.add_member_and_rebalance(new_id, req, now, config, reply);
    }

    fn join_known(&mut self, req: JoinRequest, now: u64, config: &GroupConfig, reply: JoinWaiter) {
        let id = req.member_id.clone();
        if self.pending_members.remove(&id).is_some() {
            self.add_member_and_rebalance(id, req, now, config, reply);
            return;
        }
        if let Err(e) = self.check_member(&id, req.group_instance_id.as_deref()) {
            let _ = reply.send(Err(e));
            return;
        }
        let unchanged = self.members[&id].protocols == req.protocols;
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        match self.state {
            GroupState::Empty | GroupState::Dead => {
                let _ = reply.send(Err(GroupError::UnknownMemberId));
            }
            GroupState::PreparingRebalance => {
                self.update_member(&req, now, reply);
                self.maybe_complete_join(now);
            }
            // Joined already (its response was lost, say): the same answer again.
            GroupState::CompletingRebalance if unchanged => {
                let resp = self.join_response(&id, is_leader);
                let _ = reply.send(Ok(resp));
            }
            // A follower re-joining with nothing new keeps the current generation.
            GroupState::Stable if unchanged && !is_leader => {
                let resp = self.join_response(&id, false);
                let _ = reply.send(Ok(resp));
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.update_member(&req, now, reply);
                self.prepare_rebalance(now, config);
            }
        }
    }

    /// A static member came back under a new member id: the old id is fenced.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
        reply: JoinWaiter,
    ) {
        let Some(mut m) = self.members.remove(old_id) else {
            return self.add_member_and_rebalance(new_id, req, now, config, reply);
        };
        if let Some(w) = m.join_waiter.take() {
            let _ = w.send(Err(GroupError::FencedInstanceId));
        }
        if let Some(w) = m.sync_waiter.take() {
            let _ = w.send(Err(GroupError::FencedInstanceId));
        }
        let unchanged = m.protocols == req.protocols;
        let was_leader = self.leader.as_deref() == Some(old_id);
        m.member_id = new_id.clone();
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        m.session_timeout_ms = req.session_timeout_ms.max(0) as u64;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms.max(0) as u64;
        m.protocols = req.protocols.clone();
        m.last_heartbeat_ms = now;
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        self.members.insert(new_id.clone(), m);
        if let Some(instance) = &req.group_instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        match self.state {
            // Same subscription: it takes over its old assignment without a rebalance.
            GroupState::Stable if unchanged && !was_leader => {
                let resp = self.join_response(&new_id, false);
                let _ = reply.send(Ok(resp));
            }
            GroupState::PreparingRebalance => {
                self.set_join_waiter(&new_id, reply);
                self.maybe_complete_join(now);
            }
            _ => {
                self.set_join_waiter(&new_id, reply);
                self.prepare_rebalance(now, config);
            }
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        id: String,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
        reply: JoinWaiter,
    ) {
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.group_instance_id {
            self.static_members.insert(instance.clone(), id.clone());
        }
        self.members.insert(
            id.clone(),
            Member {
                member_id: id.clone(),
                group_instance_id: req.group_instance_id.clone(),
                client_id: req.client_id,
                client_host: req.client_host,
                session_timeout_ms: req.session_timeout_ms.max(0) as u64,
                rebalance_timeout_ms: req.rebalance_timeout_ms.max(0) as u64,
                protocols: req.protocols,
                assignment: Default::default(),
                last_heartbeat_ms: now,
                join_waiter: Some(reply),
                sync_waiter: None,
            },
        );
        if self.leader.is_none() {
            self.leader = Some(id);
        }
        if self.state == GroupState::PreparingRebalance {
            if let Some(init) = self.initial_join {
                // Another member arrived during the initial delay: wait a little more.
                let deadline = (now + config.initial_rebalance_delay_ms).min(init.max_ms);
                self.join_deadline_ms = Some(deadline);
            }
            self.maybe_complete_join(now);
        } else {
            self.prepare_rebalance(now, config);
        }
    }

    fn update_member(&mut self, req: &JoinRequest, now: u64, reply: JoinWaiter) {
        if let Some(m) = self.members.get_mut(&req.member_id) {
            m.protocols = req.protocols.clone();
            m.session_timeout_ms = req.session_timeout_ms.max(0) as u64;
            m.rebalance_timeout_ms = req.rebalance_timeout_ms.max(0) as u64;
            m.last_heartbeat_ms = now;
        }
        self.set_join_waiter(&req.member_id, reply);
    }

    /// Parks a JoinGroup; a previous one of the same member (a retry) is answered with
    /// REBALANCE_IN_PROGRESS, which only makes that client join again.
    fn set_join_waiter(&mut self, id: &str, reply: JoinWaiter) {
        if let Some(m) = self.members.get_mut(id) {
            if let Some(old) = m.join_waiter.replace(reply) {
                let _ = old.send(Err(GroupError::RebalanceInProgress));
            }
        }
    }

    /// Starts a join phase (Stable/CompletingRebalance/Empty -> PreparingRebalance).
    pub(crate) fn prepare_rebalance(&mut self, now: u64, config: &GroupConfig) {
        if self.state == GroupState::CompletingRebalance {
            // Followers waiting for an assignment that will not come must rejoin.
            for m in self.members.values_mut() {
                m.assignment = Default::default();
                if let Some(w) = m.sync_waiter.take() {
                    let _ = w.send(Err(GroupError::RebalanceInProgress));
                }
            }
        }
        let timeout = self.rebalance_timeout_ms();
        if self.state == GroupState::Empty {
            let init = InitialJoin {
                max_ms: now + timeout,
            };
            self.initial_join = Some(init);
            self.join_deadline_ms =
                Some((now + config.initial_rebalance_delay_ms).min(init.max_ms));
        } else {
            self.initial_join = None;
            self.join_deadline_ms = Some(now + timeout);
        }
        self.state = GroupState::PreparingRebalance;
        self.maybe_complete_join(now);
    }

    /// Completes the join phase when every member has rejoined (after the initial delay
    /// of a new group) or when the phase's deadline has passed.
    pub(crate) fn maybe_complete_join(&mut self, now: u64) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let all_joined =
            self.pending_members.is_empty() && self.members.values().all(Member::is_awaiting_join);
        let due = self.join_deadline_ms.is_some_and(|d| now >= d);
        if due || (all_joined && self.initial_join.is_none()) {
            self.complete_join(now);
        }
    }

    fn complete_join(&mut self, now: u64) {
        // Members that did not rejoin in time are out.
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.is_awaiting_join())
            .map(|m| m.member_id.clone())
            .collect();
        for id in gone {
            self.remove_member(&id, GroupError::UnknownMemberId);
        }
        self.initial_join = None;
        self.join_deadline_ms = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol_name = None;
            self.leader = None;
            self.persist_metadata();
            return;
        }
        self.protocol_name = self.select_protocol();
        let leader_ok = self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l));
        if !leader_ok {
            self.leader = self.members.keys().next().cloned();
        }
        self.state = GroupState::CompletingRebalance;
        self.sync_deadline_ms = Some(now + self.rebalance_timeout_ms());
        self.persist_metadata();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let is_leader = self.leader.as_deref() == Some(id.as_str());
            let resp = self.join_response(&id, is_leader);
            if let Some(m) = self.members.get_mut(&id) {
                m.last_heartbeat_ms = now;
                if let Some(w) = m.join_waiter.take() {
                    let _ = w.send(Ok(resp));
                }
            }
        }
    }

    /// What a member is told about the current generation; the leader also gets every
    /// member's metadata for the chosen protocol.
    fn join_response(&self, member_id: &str, with_members: bool) -> JoinResponse {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if with_members {
            self.members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    metadata: m.metadata_for(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinResponse {
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members,
        }
    }

    /// Removes a member, answering whatever it still waits on with `why`.
    pub(crate) fn remove_member(&mut self, id: &str, why: GroupError) {
        if let Some(mut m) = self.members.remove(id) {
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(Err(why.clone()));
            }
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(Err(why));
            }
            if let Some(instance) = &m.group_instance_id {
                if self.static_members.get(instance).map(String::as_str) == Some(id) {
                    self.static_members.remove(instance);
                }
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = self.members.keys().next().cloned();
        }
    }
}
