//! ListGroups, DescribeGroups and DeleteGroups; for operators (the HTTP admin API), lag
//! per committed offset and offset resets (`kafka-consumer-groups.sh --reset-offsets`).

use bytes::Bytes;

use super::{
    CommittedOffset, Group, GroupCoordinator, GroupError, GroupState, Groups, PersistOp,
    TopicPartition,
};
use crate::Broker;

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
    /// `classic` or `consumer` (KIP-848), as ListGroups v5 shows it.
    pub group_type: &'static str,
    /// Kafka's state name: a consumer group's own states (Assigning, Reconciling...).
    pub state_name: &'static str,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it; unknown groups are `Dead` with no members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<MemberDescription>,
    /// `classic`, or `consumer` for a KIP-848 group (whose members DescribeGroups does
    /// not show: ConsumerGroupDescribe does).
    pub group_type: &'static str,
}

impl Groups {
    pub fn list_groups(&self) -> Vec<GroupListing> {
        self.groups
            .values()
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
                group_type: g.group_type(),
                state_name: g
                    .consumer
                    .as_ref()
                    .map_or(g.state.as_str(), |c| c.state_name()),
            })
            .collect()
    }

    pub fn describe_group(&self, group_id: &str) -> GroupDescription {
        let Some(g) = self.groups.get(group_id) else {
            return GroupDescription {
                group_id: group_id.to_string(),
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol_name: String::new(),
                members: Vec::new(),
                group_type: "classic",
            };
        };
        // As Kafka does: metadata and assignments only once they are settled.
        let stable = g.state == GroupState::Stable;
        let protocol = g.protocol_name.clone().unwrap_or_default();
        GroupDescription {
            group_id: g.id.clone(),
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol_name: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: g
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata_for(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                // Consumer-protocol members, without classic metadata or assignment bytes
                // (ConsumerGroupDescribe has their assignments): counted by the operator
                // views.
                .chain(g.consumer.iter().flat_map(|c| c.members.values()).map(|m| {
                    MemberDescription {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        metadata: Bytes::new(),
                        assignment: Bytes::new(),
                    }
                }))
                .collect(),
            group_type: g.group_type(),
        }
    }

    /// Deletes an empty group with its committed offsets.
    pub fn delete_group(&mut self, group_id: &str) -> Result<(), GroupError> {
        let g = self
            .groups
            .get(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        match g.state {
            GroupState::Dead => return Err(GroupError::GroupIdNotFound),
            GroupState::Empty => {}
            _ => return Err(GroupError::NonEmptyGroup),
        }
        let Some(mut g) = self.groups.remove(group_id) else {
            return Err(GroupError::GroupIdNotFound);
        };
        g.state = GroupState::Dead;
        self.outbox.append(&mut g.outbox);
        for (topic, partition) in g.offsets.keys() {
            self.outbox.push(PersistOp::Offset {
                group: g.id.clone(),
                topic: topic.clone(),
                partition: *partition,
                value: None,
            });
        }
        self.outbox.push(PersistOp::GroupDeleted {
            group: g.id.clone(),
        });
        Ok(())
    }
}

/// A group's committed offset beside the end of its partition: what an operator reads as
/// lag. `log_end_offset` and `lag` are `None` when the topic or partition no longer
/// exists (offsets outlive the topics they were committed for, as in Kafka).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetLag {
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
    pub log_end_offset: Option<i64>,
    pub lag: Option<i64>,
    pub metadata: String,
}

/// Where `reset_offsets` moves a group's offsets, as Kafka's `kafka-consumer-groups.sh
/// --reset-offsets` options do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    Earliest,
    Latest,
    /// An absolute offset, clamped to the partition's start and end (as Kafka's tool).
    Offset(i64),
    /// The first record at or after this time; the log end when every record is older.
    Timestamp(i64),
    /// The committed offset moved by this many (negative: back), clamped to the log;
    /// refused for a partition with nothing committed, as Kafka's `--shift-by`.
    ShiftBy(i64),
}

/// Why an offset reset was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResetError {
    #[error("group {0:?} has members: stop its consumers first")]
    NotEmpty(String),
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    #[error("topic {topic:?} has no partition {partition}")]
    UnknownPartition { topic: String, partition: i32 },
    #[error("cannot shift the offset of {topic}/{partition}: nothing is committed there")]
    NothingCommitted { topic: String, partition: i32 },
    #[error(transparent)]
    Group(#[from] GroupError),
}

/// The lag of `offset` on the partition `(topic, partition)` of `broker`.
fn lag_of(broker: &Broker, topic: &str, partition: i32, offset: &CommittedOffset) -> OffsetLag {
    let end = broker
        .topic(topic)
        .and_then(|t| t.partition(partition).ok())
        .map(|p| p.log_end_offset());
    OffsetLag {
        topic: topic.to_string(),
        partition,
        committed_offset: offset.offset,
        log_end_offset: end,
        lag: end.map(|e| (e - offset.offset).max(0)),
        metadata: offset.metadata.clone(),
    }
}

impl Groups {
    /// Sets committed offsets by hand (an operator's reset): only while no consumer is
    /// in the group, since live members would overwrite them with their next commit.
    /// A group that does not exist yet is created, as Kafka's tool does.
    pub fn reset_offsets(
        &mut self,
        group_id: &str,
        offsets: &[(TopicPartition, i64)],
        timestamp_ms: i64,
    ) -> Result<(), ResetError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId.into());
        }
        let g = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id));
        if !matches!(g.state, GroupState::Empty | GroupState::Dead) {
            return Err(ResetError::NotEmpty(group_id.to_string()));
        }
        for ((topic, partition), offset) in offsets {
            let value = CommittedOffset {
                offset: *offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: timestamp_ms,
            };
            g.outbox.push(PersistOp::Offset {
                group: g.id.clone(),
                topic: topic.clone(),
                partition: *partition,
                value: Some(value.clone()),
            });
            g.offsets.insert((topic.clone(), *partition), value);
        }
        Ok(())
    }
}

impl GroupCoordinator {
    /// Every committed offset of the group with its lag, by topic and partition.
    pub fn offsets_with_lag(&self, broker: &Broker, group_id: &str) -> Vec<OffsetLag> {
        self.fetch_offsets(group_id, None)
            .into_iter()
            .filter_map(|((topic, partition), o)| Some(lag_of(broker, &topic, partition, &o?)))
            .collect()
    }

    /// The group's total lag over the partitions it committed offsets for.
    pub fn total_lag(&self, broker: &Broker, group_id: &str) -> i64 {
        self.offsets_with_lag(broker, group_id)
            .iter()
            .filter_map(|o| o.lag)
            .sum()
    }

    /// Where a reset would put `group_id`'s offsets of `topic` (`partitions`, or all of
    /// them), without changing anything.
    pub fn plan_reset(
        &self,
        broker: &Broker,
        group_id: &str,
        topic: &str,
        partitions: Option<&[i32]>,
        to: ResetTo,
    ) -> Result<Vec<(TopicPartition, i64)>, ResetError> {
        let t = broker
            .topic(topic)
            .ok_or_else(|| ResetError::UnknownTopic(topic.to_string()))?;
        let chosen: Vec<i32> = match partitions {
            Some(list) => list.to_vec(),
            None => (0..t.partition_count() as i32).collect(),
        };
        let mut out = Vec::with_capacity(chosen.len());
        for partition in chosen {
            let p = t
                .partition(partition)
                .map_err(|_| ResetError::UnknownPartition {
                    topic: topic.to_string(),
                    partition,
                })?;
            let (start, end) = (p.log_start_offset(), p.log_end_offset());
            let target = match to {
                ResetTo::Earliest => start,
                ResetTo::Latest => end,
                ResetTo::Offset(o) => o.clamp(start, end),
                ResetTo::Timestamp(ts) => p.offset_for_timestamp(ts).map_or(end, |(o, _)| o),
                ResetTo::ShiftBy(n) => {
                    let tp = (topic.to_string(), partition);
                    let committed = self
                        .fetch_offsets(group_id, Some(std::slice::from_ref(&tp)))
                        .into_iter()
                        .find_map(|(_, o)| o)
                        .ok_or_else(|| ResetError::NothingCommitted {
                            topic: topic.to_string(),
                            partition,
                        })?;
                    committed.offset.saturating_add(n).clamp(start, end)
                }
            };
            out.push(((topic.to_string(), partition), target));
        }
        Ok(out)
    }

    /// What a reset would do, without doing it (`--dry-run`): the offsets it would set
    /// with their lag. Refused for a group with members, like the reset itself.
    pub fn preview_reset(
        &self,
        broker: &Broker,
        group_id: &str,
        topic: &str,
        partitions: Option<&[i32]>,
        to: ResetTo,
    ) -> Result<Vec<OffsetLag>, ResetError> {
        let plan = self.plan_reset_of_empty_group(broker, group_id, topic, partitions, to)?;
        Ok(as_lags(broker, &plan))
    }

    /// Resets the group's offsets of `topic` and stores them in the group log like a
    /// commit (fsynced before this returns). Refused while the group has members.
    pub async fn reset_offsets(
        &self,
        broker: &Broker,
        group_id: &str,
        topic: &str,
        partitions: Option<&[i32]>,
        to: ResetTo,
    ) -> Result<Vec<OffsetLag>, ResetError> {
        // Refused early for a live group; `store_reset` checks again under the lock.
        let plan = self.plan_reset_of_empty_group(broker, group_id, topic, partitions, to)?;
        self.store_reset(group_id, &plan).await?;
        Ok(as_lags(broker, &plan))
    }

    /// The reset's plan, refused while the group has members.
    fn plan_reset_of_empty_group(
        &self,
        broker: &Broker,
        group_id: &str,
        topic: &str,
        partitions: Option<&[i32]>,
        to: ResetTo,
    ) -> Result<Vec<(TopicPartition, i64)>, ResetError> {
        let plan = self.plan_reset(broker, group_id, topic, partitions, to)?;
        let state = self.describe_group(group_id).state;
        if !matches!(state, GroupState::Empty | GroupState::Dead) {
            return Err(ResetError::NotEmpty(group_id.to_string()));
        }
        Ok(plan)
    }
}

fn as_lags(broker: &Broker, plan: &[(TopicPartition, i64)]) -> Vec<OffsetLag> {
    plan.iter()
        .map(|((t, p), o)| {
            let committed = CommittedOffset {
                offset: *o,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 0,
            };
            lag_of(broker, t, *p, &committed)
        })
        .collect()
}
