//! A group of Kafka's consumer group protocol (KIP-848): members heartbeat with their
//! subscription, the coordinator computes every member's target assignment with a
//! server-side assignor and moves each member towards it one epoch at a time. A
//! partition changes owner only after its previous owner has revoked it: until the old
//! owner reports (in a heartbeat) that it no longer owns it, the partition is "pending
//! revocation" and the new owner waits for it ("unreleased").
//!
//! This file holds the state and the per-member reconciliation; the heartbeat, leave,
//! expiry and describe transitions live in `consumer_heartbeat.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::assignor::Assignment;

/// A topic as the coordinator sees it when it resolves subscriptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub id: Uuid,
    pub partitions: i32,
}

/// Every topic of the broker by name, as a heartbeat sees it.
pub type TopicsSnapshot = BTreeMap<String, TopicMeta>;

/// Where a member is in moving towards its target assignment (Kafka's `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// At the group's assignment epoch, owning its whole target.
    Stable,
    /// Must revoke partitions before it gets the next epoch.
    UnrevokedPartitions,
    /// At the new epoch but waiting for partitions other members still own.
    UnreleasedPartitions,
}

/// One member of a consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub subscribed_topic_names: BTreeSet<String>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: u64,
    /// What the member owns now (as far as the coordinator told it).
    pub assigned: Assignment,
    /// What it was asked to give up and has not yet confirmed.
    pub pending_revocation: Assignment,
    /// The epoch at which each partition of `assigned` was given to it (KIP-1251: a
    /// commit with an older member epoch is fine for partitions owned since then).
    pub(crate) partition_epochs: BTreeMap<(String, i32), i32>,
    pub(crate) last_heartbeat_ms: u64,
    /// When a member that must revoke partitions is fenced if it has not.
    pub(crate) revoke_deadline_ms: Option<u64>,
    /// A static member that left with epoch -2: its assignment is kept for its
    /// instance id until its session runs out.
    pub(crate) left_static: bool,
}

impl ConsumerMember {
    /// Whether it owns `(topic, partition)` and has since `epoch` or earlier.
    pub(crate) fn owned_since(&self, topic: &str, partition: i32, epoch: i32) -> bool {
        has(&self.assigned, topic, partition)
            && self
                .partition_epochs
                .get(&(topic.to_string(), partition))
                .is_some_and(|e| *e <= epoch)
    }

    /// Forgets the epochs of partitions it no longer owns.
    fn trim_partition_epochs(&mut self) {
        let assigned = &self.assigned;
        self.partition_epochs
            .retain(|(t, p), _| has(assigned, t, *p));
    }

    pub(crate) fn new(member_id: &str, now: u64) -> ConsumerMember {
        ConsumerMember {
            member_id: member_id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            subscribed_topic_names: BTreeSet::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            rebalance_timeout_ms: 300_000,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            partition_epochs: BTreeMap::new(),
            last_heartbeat_ms: now,
            revoke_deadline_ms: None,
            left_static: false,
        }
    }
}

/// The consumer-protocol part of a group.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    /// Bumped on every change of membership, subscriptions or subscribed topics.
    pub group_epoch: i32,
    /// The group epoch the target assignment was computed for.
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// member id -> its target assignment at `assignment_epoch`.
    pub target: BTreeMap<String, Assignment>,
    /// instance id -> member id of the static member holding it.
    pub static_members: HashMap<String, String>,
    /// The subscribed topics (id, partition count) the target was computed from: a
    /// heartbeat that sees other values (a topic created, deleted, grown) bumps the epoch.
    pub subscription_metadata: BTreeMap<String, TopicMeta>,
    /// The assignor of the last target assignment.
    pub assignor: String,
}

impl ConsumerGroup {
    pub fn new(group_epoch: i32) -> ConsumerGroup {
        ConsumerGroup {
            group_epoch,
            assignment_epoch: group_epoch,
            assignor: super::assignor::DEFAULT_ASSIGNOR.to_string(),
            ..ConsumerGroup::default()
        }
    }

    /// Kafka's consumer group states.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.member_epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Whether `(topic, partition)` is owned or still being revoked by a member other
    /// than `except`.
    fn owned_by_other(&self, except: &str, topic: &str, partition: i32) -> bool {
        self.members.values().any(|m| {
            m.member_id != except
                && (has(&m.assigned, topic, partition)
                    || has(&m.pending_revocation, topic, partition))
        })
    }

    /// Moves `member_id` towards its target (Kafka's `CurrentAssignmentBuilder`).
    /// `owned` is what the member reported owning in this heartbeat, if it did.
    pub(crate) fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, now: u64) {
        let epoch = self.assignment_epoch;
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let Some(m) = self.members.get(member_id) else {
            return;
        };
        let mut m = m.clone();
        if m.state == MemberState::UnrevokedPartitions {
            let revoked = owned.is_some_and(|o| !overlaps(o, &m.pending_revocation));
            if !revoked {
                // Still revoking; the target may have moved again meanwhile.
                let (keep, revoke) = split(&m.assigned, &target);
                if !is_empty(&revoke) {
                    m.assigned = keep;
                    merge(&mut m.pending_revocation, &revoke);
                    m.trim_partition_epochs();
                }
                self.members.insert(member_id.to_string(), m);
                return;
            }
            m.pending_revocation.clear();
            m.revoke_deadline_ms = None;
            m.state = MemberState::Stable;
        }
        if m.state == MemberState::Stable && m.member_epoch == epoch && m.assigned == target {
            self.members.insert(member_id.to_string(), m);
            return;
        }
        let (keep, revoke) = split(&m.assigned, &target);
        if !is_empty(&revoke) {
            m.assigned = keep;
            m.pending_revocation = revoke;
            m.trim_partition_epochs();
            m.state = MemberState::UnrevokedPartitions;
            m.revoke_deadline_ms = Some(now + m.rebalance_timeout_ms);
            self.members.insert(member_id.to_string(), m);
            return;
        }
        let mut unreleased = false;
        for (topic, parts) in &target {
            for &p in parts {
                if has(&m.assigned, topic, p) {
                    continue;
                }
                if self.owned_by_other(member_id, topic, p) {
                    unreleased = true;
                } else {
                    m.assigned.entry(topic.clone()).or_default().insert(p);
                    m.partition_epochs.insert((topic.clone(), p), epoch);
                }
            }
        }
        if m.member_epoch != epoch {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = epoch;
        }
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        self.members.insert(member_id.to_string(), m);
    }

    /// Every topic some member subscribes to by name.
    pub fn subscribed_topic_names(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed_topic_names.iter().cloned())
            .chain(self.subscription_metadata.keys().cloned())
            .collect()
    }
}

pub(crate) fn has(a: &Assignment, topic: &str, partition: i32) -> bool {
    a.get(topic).is_some_and(|p| p.contains(&partition))
}

pub(crate) fn is_empty(a: &Assignment) -> bool {
    a.values().all(BTreeSet::is_empty)
}

fn overlaps(a: &Assignment, b: &Assignment) -> bool {
    a.iter().any(|(t, ps)| ps.iter().any(|&p| has(b, t, p)))
}

/// `a` split into what is also in `target` and what is not.
fn split(a: &Assignment, target: &Assignment) -> (Assignment, Assignment) {
    let mut keep = Assignment::new();
    let mut drop = Assignment::new();
    for (t, ps) in a {
        for &p in ps {
            let side = if has(target, t, p) {
                &mut keep
            } else {
                &mut drop
            };
            side.entry(t.clone()).or_default().insert(p);
        }
    }
    (keep, drop)
}

fn merge(into: &mut Assignment, from: &Assignment) {
    for (t, ps) in from {
        into.entry(t.clone())
            .or_default()
            .extend(ps.iter().copied());
    }
}

/// Whether every partition of `a` is in `b`.
pub(crate) fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    a.iter().all(|(t, ps)| ps.iter().all(|&p| has(b, t, p)))
}
