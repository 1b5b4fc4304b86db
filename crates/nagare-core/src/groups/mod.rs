//! Consumer groups (Kafka's classic group protocol and KIP-848's consumer protocol) and
//! committed offsets.
//!
//! [`Groups`] is a pure state machine: every transition takes the current time in
//! milliseconds, so it is unit-tested without timers. A JoinGroup or SyncGroup that must
//! wait for the rest of the group hands in a oneshot sender that the machine completes
//! when the rebalance (or the leader's assignment) is done. [`GroupCoordinator`] is the
//! thin driver around it: one lock, a timer task that calls [`Groups::tick`] at the next
//! deadline, and the internal log `consumer_offsets` (an
//! [`InternalLog`](crate::internal_log::InternalLog)) that stores the state changes and
//! is replayed (last value per key wins) on open. Both tasks are handed to the opener.
//!
//! Transitions, one file per family: `join` (JoinGroup, rebalance completion), `sync`
//! (SyncGroup), `heartbeat` (Heartbeat, LeaveGroup, session expiry), `offsets`
//! (OffsetCommit/Fetch/Delete), and `admin` (List/Describe/DeleteGroups).
//!
//! Groups of the consumer protocol (KIP-848) are the same [`Group`]s with a
//! [`ConsumerGroup`] part: `consumer` (state, reconciliation), `consumer_heartbeat`
//! (ConsumerGroupHeartbeat/Describe, expiry), `consumer_persist` (members in the log) and
//! `assignor` (uniform, range). Committed offsets are shared by both protocols.

mod admin;
#[cfg(test)]
mod admin_tests;
mod assignor;
mod consumer;
mod consumer_heartbeat;
mod consumer_persist;
#[cfg(test)]
mod consumer_tests;
mod coordinator;
mod error;
mod group;
mod heartbeat;
mod join;
mod offsets;
mod persist;
mod sync;
#[cfg(test)]
mod tests;
mod txn;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use admin::{
    GroupDescription, GroupListing, MemberDescription, OffsetLag, ResetError, ResetTo,
};
pub use assignor::{Assignment, DEFAULT_ASSIGNOR};
pub use consumer::{ConsumerGroup, ConsumerMember, MemberState, TopicMeta, TopicsSnapshot};
pub use consumer_heartbeat::{
    ConsumerGroupDescription, ConsumerHeartbeat, ConsumerHeartbeatResponse, RegexCache,
};
pub use coordinator::{CoordinatorBackground, GroupCoordinator, OFFSETS_LOG};
pub use error::GroupError;
pub use group::{
    CommittedOffset, Group, GroupState, JoinRequest, JoinResponse, JoinWaiter, JoinedMember,
    Member, Protocol, SyncRequest, SyncResponse, SyncWaiter,
};
pub use heartbeat::LeavingMember;
pub use offsets::{OffsetCommit, OffsetCommitRequest, TopicPartition};
pub use persist::{PersistOp, StoredGroups};

/// Settings of the group coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct GroupConfig {
    /// How long the first rebalance of an empty group waits for more members (Kafka's
    /// `group.initial.rebalance.delay.ms`, 3 s there; short here so a lone consumer starts
    /// at once). Every new member extends it, up to the rebalance timeout.
    pub initial_rebalance_delay_ms: u64,
    pub min_session_timeout_ms: u64,
    pub max_session_timeout_ms: u64,
    /// Longest `metadata` string accepted with a committed offset.
    pub max_offset_metadata_bytes: usize,
    /// Consumer-protocol (KIP-848) members not heard from for this long are removed
    /// (Kafka's `group.consumer.session.timeout.ms`).
    pub consumer_session_timeout_ms: u64,
    /// How often consumer-protocol members heartbeat (Kafka's
    /// `group.consumer.heartbeat.interval.ms`): also how soon a member learns of a new
    /// assignment, so it bounds rebalance time.
    pub consumer_heartbeat_interval_ms: u64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 50,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_offset_metadata_bytes: 4096,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
        }
    }
}

/// Every group of this coordinator.
#[derive(Debug, Default)]
pub struct Groups {
    pub(crate) config: GroupConfig,
    pub(crate) groups: BTreeMap<String, Group>,
    /// Changes of groups that no longer exist (their tombstones).
    pub(crate) outbox: Vec<PersistOp>,
    /// Compiled subscription regexes of consumer-protocol members.
    pub(crate) regexes: RegexCache,
}

impl Groups {
    pub fn new(config: GroupConfig) -> Groups {
        Groups {
            config,
            groups: BTreeMap::new(),
            outbox: Vec::new(),
            regexes: RegexCache::default(),
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub fn group(&self, id: &str) -> Option<&Group> {
        self.groups.get(id)
    }

    /// Runs every timeout that is due at `now`: session expiry, lapsed MEMBER_ID_REQUIRED
    /// ids, the end of join phases.
    pub fn tick(&mut self, now: u64) {
        for g in self.groups.values_mut() {
            g.expire(now, &self.config);
            g.expire_consumers(now, &self.config);
        }
    }

    /// When [`tick`](Self::tick) next has something to do.
    pub fn next_deadline(&self) -> Option<u64> {
        self.groups
            .values()
            .flat_map(|g| {
                [
                    g.next_deadline(&self.config),
                    g.next_consumer_deadline(&self.config),
                ]
            })
            .flatten()
            .min()
    }

    /// The state changes made since the last call, in order, for the internal log.
    pub fn drain_outbox(&mut self) -> Vec<PersistOp> {
        let mut out = std::mem::take(&mut self.outbox);
        for g in self.groups.values_mut() {
            out.append(&mut g.outbox);
        }
        out
    }
}
