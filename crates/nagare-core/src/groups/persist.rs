//! How group state is kept in the internal `consumer_offsets` log: one record per change,
//! keyed by what it is about (a group, or a group's partition), the value being the new
//! state or a tombstone (no value). On start the whole log is replayed and the last value
//! per key wins ([`StoredGroups`]), which is also what the log cleaner keeps: deleting a
//! group writes a tombstone per committed offset before the group's own. A log where a
//! group's tombstone still finds offsets of that group (which only its op dropped) is
//! rewritten once on open (see `internal_log.rs`).

use std::collections::BTreeMap;

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};
use serde::{Deserialize, Serialize};

use super::{CommittedOffset, Group, GroupState, Groups};
use crate::internal_log::{InternalOp, Replayed};

/// One change of persistent group state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersistOp {
    /// The group's generation and protocol after a rebalance.
    Group {
        group: String,
        generation: i32,
        protocol_type: Option<String>,
        protocol_name: Option<String>,
        /// A consumer-protocol (KIP-848) group; `generation` is its group epoch.
        consumer: bool,
    },
    /// A committed offset, or its deletion.
    Offset {
        group: String,
        topic: String,
        partition: i32,
        value: Option<CommittedOffset>,
    },
    /// The group was deleted.
    GroupDeleted { group: String },
    /// A member of a consumer-protocol group (KIP-848), or its removal: kept so that
    /// members go on across a restart, as Kafka keeps them in `__consumer_offsets`.
    ConsumerMember {
        group: String,
        member: String,
        value: Option<StoredMember>,
    },
}

/// What is stored of a consumer-protocol member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMember {
    pub epoch: i32,
    #[serde(default)]
    pub instance_id: Option<String>,
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub client_host: String,
    #[serde(default)]
    pub subscribed_topic_names: Vec<String>,
    #[serde(default)]
    pub subscribed_topic_regex: Option<String>,
    #[serde(default)]
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: u64,
    /// Partitions by topic it owns, and those it was revoking.
    pub assigned: BTreeMap<String, Vec<i32>>,
    #[serde(default)]
    pub pending_revocation: BTreeMap<String, Vec<i32>>,
}

/// Record keys: JSON objects tagged with their kind, so keys of different kinds never
/// collide.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
enum Key {
    Group {
        group: String,
    },
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Member {
        group: String,
        member: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct GroupValue {
    generation: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    /// Absent in logs written before consumer-protocol groups existed.
    #[serde(default, skip_serializing_if = "is_false")]
    consumer: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn json(v: &impl Serialize) -> Option<Bytes> {
    serde_json::to_vec(v).ok().map(Bytes::from)
}

impl PersistOp {
    /// The key of the record that stores this change.
    fn record_key(&self) -> Option<Bytes> {
        let key = match self {
            PersistOp::Group { group, .. } | PersistOp::GroupDeleted { group } => Key::Group {
                group: group.clone(),
            },
            PersistOp::Offset {
                group,
                topic,
                partition,
                ..
            } => Key::Offset {
                group: group.clone(),
                topic: topic.clone(),
                partition: *partition,
            },
            PersistOp::ConsumerMember { group, member, .. } => Key::Member {
                group: group.clone(),
                member: member.clone(),
            },
        };
        json(&key)
    }

    /// The record that stores this change.
    pub fn to_record(&self, timestamp: i64) -> NewRecord {
        let value = match self {
            PersistOp::Group {
                generation,
                protocol_type,
                protocol_name,
                consumer,
                ..
            } => json(&GroupValue {
                generation: *generation,
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                consumer: *consumer,
            }),
            PersistOp::Offset { value, .. } => value.as_ref().and_then(json),
            PersistOp::ConsumerMember { value, .. } => value.as_ref().and_then(json),
            PersistOp::GroupDeleted { .. } => None,
        };
        NewRecord {
            key: self.record_key(),
            value,
            headers: Vec::new(),
            timestamp,
        }
    }

    /// The change a stored record describes; `None` for a record this version cannot read.
    pub fn from_record(r: &Record) -> Option<PersistOp> {
        let key: Key = serde_json::from_slice(r.key.as_deref()?).ok()?;
        Some(match key {
            Key::Group { group } => match &r.value {
                None => PersistOp::GroupDeleted { group },
                Some(v) => {
                    let v: GroupValue = serde_json::from_slice(v).ok()?;
                    PersistOp::Group {
                        group,
                        generation: v.generation,
                        protocol_type: v.protocol_type,
                        protocol_name: v.protocol_name,
                        consumer: v.consumer,
                    }
                }
            },
            Key::Offset {
                group,
                topic,
                partition,
            } => PersistOp::Offset {
                group,
                topic,
                partition,
                value: match &r.value {
                    None => None,
                    Some(v) => Some(serde_json::from_slice(v).ok()?),
                },
            },
            Key::Member { group, member } => PersistOp::ConsumerMember {
                group,
                member,
                value: match &r.value {
                    None => None,
                    Some(v) => Some(serde_json::from_slice(v).ok()?),
                },
            },
        })
    }
}

/// What the group log holds once superseded records are dropped: the last value per
/// key. The internal-log engine keeps it (to count live keys, and to migrate an old
/// log); the coordinator builds its [`Groups`] from it on open.
#[derive(Debug, Clone, Default)]
pub struct StoredGroups {
    groups: BTreeMap<String, GroupValue>,
    offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    members: BTreeMap<String, BTreeMap<String, StoredMember>>,
}

impl InternalOp for PersistOp {
    type State = StoredGroups;
    /// Group logs are small and read on every start: compact them early.
    const COMPACT_MIN_RECORDS: i64 = 1000;

    fn key(&self) -> Bytes {
        self.record_key().unwrap_or_default()
    }

    fn encode(&self, timestamp: i64) -> NewRecord {
        self.to_record(timestamp)
    }

    fn decode(record: &Record) -> Option<Self> {
        PersistOp::from_record(record)
    }

    fn replay(record: &Record, state: &mut StoredGroups) -> Replayed {
        let Some(op) = PersistOp::from_record(record) else {
            return Replayed::Unreadable;
        };
        // Offsets still there when their group's tombstone comes were dropped by that
        // op alone: the cleaner, keeping their records, would bring them back.
        let legacy =
            matches!(&op, PersistOp::GroupDeleted { group } if state.offsets.contains_key(group));
        op.apply(state);
        if legacy {
            Replayed::Legacy
        } else {
            Replayed::Current
        }
    }

    fn apply(self, state: &mut StoredGroups) {
        match self {
            PersistOp::Group {
                group,
                generation,
                protocol_type,
                protocol_name,
                consumer,
            } => {
                state.groups.insert(
                    group,
                    GroupValue {
                        generation,
                        protocol_type,
                        protocol_name,
                        consumer,
                    },
                );
            }
            PersistOp::Offset {
                group,
                topic,
                partition,
                value: Some(v),
            } => {
                state
                    .offsets
                    .entry(group)
                    .or_default()
                    .insert((topic, partition), v);
            }
            PersistOp::Offset {
                group,
                topic,
                partition,
                value: None,
            } => {
                if let Some(o) = state.offsets.get_mut(&group) {
                    o.remove(&(topic, partition));
                    if o.is_empty() {
                        state.offsets.remove(&group);
                    }
                }
            }
            PersistOp::ConsumerMember {
                group,
                member,
                value: Some(v),
            } => {
                state.members.entry(group).or_default().insert(member, v);
            }
            PersistOp::ConsumerMember {
                group,
                member,
                value: None,
            } => {
                if let Some(m) = state.members.get_mut(&group) {
                    m.remove(&member);
                    if m.is_empty() {
                        state.members.remove(&group);
                    }
                }
            }
            PersistOp::GroupDeleted { group } => {
                state.groups.remove(&group);
                // Only for logs of earlier versions (see `replay`): today every offset
                // of the group was deleted by its own tombstone before.
                state.offsets.remove(&group);
                state.members.remove(&group);
            }
        }
    }

    fn snapshot(state: &StoredGroups) -> Vec<Self> {
        let groups = state.groups.iter().map(|(group, v)| PersistOp::Group {
            group: group.clone(),
            generation: v.generation,
            protocol_type: v.protocol_type.clone(),
            protocol_name: v.protocol_name.clone(),
            consumer: v.consumer,
        });
        let offsets = state.offsets.iter().flat_map(|(group, offsets)| {
            offsets
                .iter()
                .map(move |((topic, partition), value)| PersistOp::Offset {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    value: Some(value.clone()),
                })
        });
        let members = state.members.iter().flat_map(|(group, members)| {
            members
                .iter()
                .map(move |(member, v)| PersistOp::ConsumerMember {
                    group: group.clone(),
                    member: member.clone(),
                    value: Some(v.clone()),
                })
        });
        groups.chain(offsets).chain(members).collect()
    }
}

impl Groups {
    /// Replays one stored change. Groups come back Empty: members re-join after a
    /// restart, but generations keep counting up so stale members stay fenced.
    pub fn apply(&mut self, op: PersistOp) {
        match op {
            PersistOp::Group {
                group,
                generation,
                protocol_type,
                consumer,
                ..
            } => {
                let g = self
                    .groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group));
                g.generation = generation;
                g.protocol_type = protocol_type;
                g.state = GroupState::Empty;
                // Members of a consumer group rejoin with epoch 0 after a restart; the
                // epoch keeps counting up from the stored one.
                if !consumer {
                    g.consumer = None;
                } else if let Some(cg) = g.consumer.as_mut() {
                    cg.group_epoch = generation;
                    cg.assignment_epoch = generation;
                } else {
                    g.consumer = Some(super::ConsumerGroup::new(generation));
                }
            }
            PersistOp::Offset {
                group,
                topic,
                partition,
                value,
            } => match value {
                Some(v) => {
                    let g = self
                        .groups
                        .entry(group.clone())
                        .or_insert_with(|| Group::new(&group));
                    g.offsets.insert((topic, partition), v);
                }
                None => {
                    if let Some(g) = self.groups.get_mut(&group) {
                        g.offsets.remove(&(topic, partition));
                    }
                }
            },
            PersistOp::GroupDeleted { group } => {
                self.groups.remove(&group);
            }
            PersistOp::ConsumerMember {
                group,
                member,
                value,
            } => {
                let g = self
                    .groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group));
                let epoch = g.generation;
                let cg = g
                    .consumer
                    .get_or_insert_with(|| super::ConsumerGroup::new(epoch));
                match value {
                    Some(v) => super::consumer_persist::restore_member(cg, &member, v),
                    None => {
                        cg.members.remove(&member);
                    }
                }
                g.sync_consumer_state();
            }
        }
    }
}
