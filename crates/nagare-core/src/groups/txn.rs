//! The group side of transactional offset commits (TxnOffsetCommit): the member check
//! when the offsets are handed to the transaction, and the commit itself once the
//! transaction commits (no member check then: the decision is already made).

use super::{CommittedOffset, Group, GroupError, GroupState, Groups, OffsetCommit, PersistOp};

impl Groups {
    /// TxnOffsetCommit's group checks (Kafka's `doTxnCommitOffsets`): a member id, when
    /// given, must be a member; a generation, when given, the current one. Clients that
    /// send neither (versions before 3, or no group management) pass.
    pub fn check_txn_offset_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let Some(g) = self.groups.get(group_id) else {
            if !member_id.is_empty() {
                return Err(GroupError::UnknownMemberId);
            }
            return if generation >= 0 {
                Err(GroupError::IllegalGeneration)
            } else {
                Ok(())
            };
        };
        if g.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        // A consumer-protocol group: the generation is the member epoch, and a wrong one
        // is ILLEGAL_GENERATION here (STALE_MEMBER_EPOCH in OffsetCommit), as in Kafka.
        if let Some(checked) = g.check_consumer_commit(member_id, generation) {
            return checked.map_err(|e| match e {
                GroupError::StaleMemberEpoch => GroupError::IllegalGeneration,
                other => other,
            });
        }
        if !member_id.is_empty() {
            g.check_member(member_id, instance_id)?;
        }
        if generation >= 0 && generation != g.generation {
            return Err(GroupError::IllegalGeneration);
        }
        Ok(())
    }

    /// Commits the offsets of a committed transaction (creating the group if it is
    /// gone); the changes are in the outbox.
    pub fn commit_txn_offsets(
        &mut self,
        group_id: &str,
        offsets: Vec<OffsetCommit>,
        timestamp_ms: i64,
    ) {
        let g = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id));
        for o in offsets {
            let value = CommittedOffset {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: o.metadata.unwrap_or_default(),
                commit_timestamp_ms: timestamp_ms,
            };
            g.outbox.push(PersistOp::Offset {
                group: g.id.clone(),
                topic: o.topic.clone(),
                partition: o.partition,
                value: Some(value.clone()),
            });
            g.offsets.insert((o.topic, o.partition), value);
        }
    }
}
