//! One consumer group of the classic protocol: its state, members and committed offsets.
//! The transitions live beside this file (join, sync, heartbeat/expiry, offsets); every
//! method takes the current time in milliseconds so the machine runs without timers.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::{GroupConfig, GroupError, PersistOp};

/// The states of Kafka's classic group state diagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members (possibly committed offsets).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Assignment handed out; members heartbeat.
    Stable,
    /// Deleted.
    Dead,
}

impl GroupState {
    /// The names Kafka uses in ListGroups/DescribeGroups.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// One protocol a member supports (for consumers: an assignor name and the subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    /// Opaque to the coordinator: handed to the group leader as the member sent it.
    pub metadata: Bytes,
    /// The topics the metadata subscribes to, as the front end decoded them (empty when
    /// it is not a consumer subscription). OffsetDelete keeps the offsets of these topics
    /// while the group is live.
    pub topics: Vec<String>,
}

/// What a member sends to join.
#[derive(Debug, Clone, Default)]
pub struct JoinRequest {
    pub group_id: String,
    /// Empty for a member joining for the first time.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// Kafka JoinGroup v4+: a new dynamic member gets MEMBER_ID_REQUIRED first.
    pub require_known_member_id: bool,
}

/// One member as the leader sees it in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Filled for the leader only.
    pub members: Vec<JoinedMember>,
}

/// What a member sends to get its assignment; the leader sends everyone's.
#[derive(Debug, Clone, Default)]
pub struct SyncRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation: i32,
    /// Checked against the group's when given (SyncGroup v5+).
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// member id -> assignment bytes (leader only).
    pub assignments: Vec<(String, Bytes)>,
}

/// The answer to a SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

pub type JoinWaiter = oneshot::Sender<Result<JoinResponse, GroupError>>;
pub type SyncWaiter = oneshot::Sender<Result<SyncResponse, GroupError>>;

/// A member of the group.
#[derive(Debug)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    pub protocols: Vec<Protocol>,
    pub assignment: Bytes,
    pub(crate) last_heartbeat_ms: u64,
    /// A JoinGroup waiting for the rebalance to complete.
    pub(crate) join_waiter: Option<JoinWaiter>,
    /// A SyncGroup waiting for the leader's assignment.
    pub(crate) sync_waiter: Option<SyncWaiter>,
}

impl Member {
    /// A JoinGroup of this member is parked and its client still waits for the answer.
    /// A closed receiver means the connection is gone: the member then counts as not
    /// rejoined, and its session can run out instead of stalling the rebalance until
    /// the (long) rebalance timeout.
    pub fn is_awaiting_join(&self) -> bool {
        self.join_waiter.as_ref().is_some_and(|w| !w.is_closed())
    }

    /// Likewise for a parked SyncGroup.
    pub fn is_awaiting_sync(&self) -> bool {
        self.sync_waiter.as_ref().is_some_and(|w| !w.is_closed())
    }

    pub(crate) fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    pub(crate) fn protocol_names(&self) -> impl Iterator<Item = &str> {
        self.protocols.iter().map(|p| p.name.as_str())
    }
}

/// A committed offset and what came with it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// A group and everything the coordinator knows about it.
#[derive(Debug)]
pub struct Group {
    pub(crate) id: String,
    pub(crate) state: GroupState,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol_name: Option<String>,
    pub(crate) leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    /// group.instance.id -> current member id of that static member.
    pub(crate) static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with when they lapse.
    pub(crate) pending_members: HashMap<String, u64>,
    /// When the current join phase ends at the latest.
    pub(crate) join_deadline_ms: Option<u64>,
    /// When a CompletingRebalance phase gives up on members that never sent SyncGroup
    /// (a leader that joined and then hangs would otherwise stall the group forever).
    pub(crate) sync_deadline_ms: Option<u64>,
    /// In the first join phase of an empty group: complete only when the (short)
    /// initial delay runs out, so members starting together land in one generation.
    pub(crate) initial_join: Option<InitialJoin>,
    pub(crate) offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Set for a group of the consumer protocol (KIP-848); its members live there and
    /// the classic member list stays empty.
    pub(crate) consumer: Option<super::ConsumerGroup>,
    /// Persistence operations produced by the last transitions, drained by the driver.
    pub(crate) outbox: Vec<PersistOp>,
}

/// Bounds of the initial-delay phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InitialJoin {
    pub(crate) max_ms: u64,
}

impl Group {
    pub fn new(id: &str) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            join_deadline_ms: None,
            sync_deadline_ms: None,
            initial_join: None,
            offsets: BTreeMap::new(),
            consumer: None,
            outbox: Vec::new(),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }
    pub fn state(&self) -> GroupState {
        self.state
    }
    pub fn generation(&self) -> i32 {
        self.generation
    }
    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }
    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }
    pub fn member(&self, id: &str) -> Option<&Member> {
        self.members.get(id)
    }
    /// The consumer-protocol state, for a KIP-848 group.
    pub fn consumer(&self) -> Option<&super::ConsumerGroup> {
        self.consumer.as_ref()
    }
    /// `consumer` for a KIP-848 group, else `classic`.
    pub fn group_type(&self) -> &'static str {
        if self.consumer.is_some() {
            "consumer"
        } else {
            "classic"
        }
    }
    pub fn offsets(&self) -> &BTreeMap<(String, i32), CommittedOffset> {
        &self.offsets
    }

    /// The longest rebalance timeout of the members: how long a rebalance may wait.
    pub(crate) fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Checks that a member with `protocols` of `protocol_type` fits the group: the same
    /// type, and at least one protocol every (other) member supports too.
    pub(crate) fn supports(
        &self,
        protocol_type: &str,
        protocols: &[Protocol],
        except: Option<&str>,
    ) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        let others: Vec<&Member> = self
            .members
            .values()
            .filter(|m| Some(m.member_id.as_str()) != except)
            .collect();
        if others.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols.iter().any(|p| {
            others
                .iter()
                .all(|m| m.protocol_names().any(|n| n == p.name))
        })
    }

    /// Picks the protocol every member supports with the most first-choice votes; ties go
    /// to the order of the first member's preferences.
    pub(crate) fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .protocol_names()
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocol_names().any(|n| n == *name))
            })
            .collect();
        let mut best: Option<(&str, usize)> = None;
        for c in &candidates {
            let votes = self
                .members
                .values()
                .filter(|m| m.protocol_names().find(|n| candidates.contains(n)) == Some(*c))
                .count();
            if best.is_none_or(|(_, v)| votes > v) {
                best = Some((c, votes));
            }
        }
        best.map(|(name, _)| name.to_string())
    }

    /// Whether `member_id` claiming `instance_id` is fenced by a newer static member.
    pub(crate) fn is_fenced(&self, member_id: &str, instance_id: Option<&str>) -> bool {
        match instance_id.and_then(|i| self.static_members.get(i)) {
            Some(current) => current != member_id,
            None => false,
        }
    }

    /// Validates a member id (and instance id) of a request against the group.
    pub(crate) fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if self.is_fenced(member_id, instance_id) {
            return Err(GroupError::FencedInstanceId);
        }
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(())
    }

    pub(crate) fn persist_metadata(&mut self) {
        self.outbox.push(PersistOp::Group {
            group: self.id.clone(),
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            consumer: self.consumer.is_some(),
        });
    }

    /// The earliest moment something in this group times out.
    pub(crate) fn next_deadline(&self, config: &GroupConfig) -> Option<u64> {
        let _ = config;
        let mut next = self.join_deadline_ms;
        if self.state == GroupState::CompletingRebalance {
            next = self.sync_deadline_ms;
        }
        let mut consider = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        for m in self.members.values() {
            if !m.is_awaiting_join() && !m.is_awaiting_sync() {
                consider(m.last_heartbeat_ms + m.session_timeout_ms);
            }
        }
        for &t in self.pending_members.values() {
            consider(t);
        }
        next
    }
}
