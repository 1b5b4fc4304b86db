//! ListGroups, DescribeGroups and DeleteGroups.

use bytes::Bytes;

use super::{GroupError, GroupState, Groups, PersistOp};

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
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
}

impl Groups {
    pub fn list_groups(&self) -> Vec<GroupListing> {
        self.groups
            .values()
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
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
                .collect(),
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
