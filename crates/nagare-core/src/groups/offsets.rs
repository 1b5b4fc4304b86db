//! OffsetCommit, OffsetFetch and OffsetDelete on a group's committed offsets.

use std::collections::BTreeSet;

use super::{CommittedOffset, GroupError, GroupState, Groups, PersistOp};
use crate::groups::Group;

/// A topic name and a partition index.
pub type TopicPartition = (String, i32);

/// One offset to commit.
#[derive(Debug, Clone, Default)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// An OffsetCommit: from a group member (generation >= 0) or from a client managing its
/// own assignment (generation -1, empty member id) on a group with no members.
#[derive(Debug, Clone, Default)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation: i32,
    pub offsets: Vec<OffsetCommit>,
}

impl Groups {
    /// Commits offsets: a group-level error, or one result per offset in order. The
    /// changes are in the outbox; the caller answers once they are stored.
    pub fn commit_offsets(
        &mut self,
        req: OffsetCommitRequest,
        now: u64,
        timestamp_ms: i64,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        if req.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        if !self.groups.contains_key(&req.group_id) {
            // Only a client that does not use group management may create a group by
            // committing; anything else is from a generation that no longer exists.
            if req.generation >= 0 {
                return Err(GroupError::IllegalGeneration);
            }
            self.groups
                .insert(req.group_id.clone(), Group::new(&req.group_id));
        }
        let max_metadata = self.config.max_offset_metadata_bytes;
        let g = self
            .groups
            .get_mut(&req.group_id)
            .ok_or(GroupError::CoordinatorNotAvailable)?;
        g.check_commit(&req, now)?;
        // A consumer-protocol member committing with an older epoch (KIP-1251): only
        // partitions it has owned since that epoch or earlier.
        let older_epoch = g.consumer_commit_needs_partition_check(&req.member_id, req.generation);
        let mut results = Vec::with_capacity(req.offsets.len());
        for o in req.offsets {
            if let Some(m) = &older_epoch {
                if !m.owned_since(&o.topic, o.partition, req.generation) {
                    results.push(Err(GroupError::StaleMemberEpoch));
                    continue;
                }
            }
            let metadata = o.metadata.unwrap_or_default();
            if metadata.len() > max_metadata {
                results.push(Err(GroupError::OffsetMetadataTooLarge(metadata.len())));
                continue;
            }
            let value = CommittedOffset {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata,
                commit_timestamp_ms: timestamp_ms,
            };
            g.outbox.push(PersistOp::Offset {
                group: g.id.clone(),
                topic: o.topic.clone(),
                partition: o.partition,
                value: Some(value.clone()),
            });
            g.offsets.insert((o.topic, o.partition), value);
            results.push(Ok(()));
        }
        Ok(results)
    }

    /// Committed offsets of `partitions` (all of the group's when `None`); `None` where
    /// nothing is committed. An unknown group has nothing committed.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Vec<(TopicPartition, Option<CommittedOffset>)> {
        let group = self.groups.get(group_id);
        match partitions {
            Some(list) => list
                .iter()
                .map(|tp| (tp.clone(), group.and_then(|g| g.offsets.get(tp).cloned())))
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .map(|(tp, o)| (tp.clone(), Some(o.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Deletes committed offsets (OffsetDelete): a group-level error, or one result per
    /// partition. Offsets of topics the live group subscribes to stay.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let g = self
            .groups
            .get_mut(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        let subscribed = match g.state {
            GroupState::Dead => return Err(GroupError::GroupIdNotFound),
            GroupState::Empty => BTreeSet::new(),
            _ if g.protocol_type.as_deref() == Some("consumer") => g.subscribed_topics(),
            _ => return Err(GroupError::NonEmptyGroup),
        };
        let mut results = Vec::with_capacity(partitions.len());
        for tp in partitions {
            if subscribed.contains(&tp.0) {
                results.push(Err(GroupError::GroupSubscribedToTopic));
                continue;
            }
            if g.offsets.remove(tp).is_some() {
                g.outbox.push(PersistOp::Offset {
                    group: g.id.clone(),
                    topic: tp.0.clone(),
                    partition: tp.1,
                    value: None,
                });
            }
            results.push(Ok(()));
        }
        Ok(results)
    }
}

impl Group {
    fn check_commit(&mut self, req: &OffsetCommitRequest, now: u64) -> Result<(), GroupError> {
        if self.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if let Some(checked) = self.check_consumer_commit(&req.member_id, req.generation) {
            return checked;
        }
        if req.generation < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        self.check_member(&req.member_id, req.group_instance_id.as_deref())?;
        if req.generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if self.state == GroupState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        // Commits during PreparingRebalance are fine (consumers commit before they
        // rejoin); a commit counts as a sign of life.
        if let Some(m) = self.members.get_mut(&req.member_id) {
            m.last_heartbeat_ms = now;
        }
        Ok(())
    }

    /// Topics in the members' consumer-protocol subscriptions.
    fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| &m.protocols)
            .flat_map(|p| p.topics.iter().cloned())
            .chain(
                self.consumer
                    .iter()
                    .flat_map(|c| c.subscribed_topic_names()),
            )
            .collect()
    }
}
