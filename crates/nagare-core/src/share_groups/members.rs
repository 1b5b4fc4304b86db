//! Share-group membership: ShareGroupHeartbeat's join, heartbeat and leave, member and
//! group epochs, and the simple assignor (every member gets every partition of the
//! topics it subscribes to: the records of a partition are shared one at a time anyway).

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::{ShareError, ShareGroups};

/// Topic → (topic id, partitions) assigned to a member.
pub type Assignment = BTreeMap<String, (Uuid, Vec<i32>)>;

#[derive(Debug, Clone)]
pub(super) struct Member {
    epoch: i32,
    /// The epoch before the latest assignment change: a heartbeat still carrying it is
    /// not fenced (the answer with the new one may have been lost).
    previous_epoch: i32,
    topics: Vec<String>,
    rack: Option<String>,
    client_id: String,
    client_host: String,
    assignment: Assignment,
    last_seen: i64,
}

#[derive(Debug, Default)]
pub(super) struct Group {
    epoch: i32,
    members: HashMap<String, Member>,
}

/// What a heartbeat answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    /// -1 once the member left.
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Set when the member's assignment changed (or it is behind).
    pub assignment: Option<Assignment>,
}

/// One member as ShareGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub topics: Vec<String>,
    pub assignment: Assignment,
}

/// One share group as ShareGroupDescribe shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupInfo {
    pub group_id: String,
    /// "Empty" or "Stable".
    pub state: &'static str,
    pub epoch: i32,
    pub members: Vec<MemberInfo>,
}

/// Who sends a heartbeat (for ShareGroupDescribe).
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub client_id: String,
    pub client_host: String,
}

impl ShareGroups {
    /// ShareGroupHeartbeat: `epoch` 0 joins (with the topics subscribed to), -1 leaves,
    /// anything else is a heartbeat of a known member (`topics` `None`: unchanged).
    #[allow(clippy::too_many_arguments)]
    pub fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        epoch: i32,
        rack: Option<&str>,
        topics: Option<Vec<String>>,
        client: &Client,
        now: i64,
    ) -> Result<HeartbeatAnswer, ShareError> {
        let interval = self.settings(group).heartbeat_interval_ms;
        if epoch == -1 {
            self.release_member(group, member_id);
            self.close_session(group, member_id);
            self.forget_holder(group, member_id);
            let mut inner = self.inner.lock();
            if let Some(g) = inner.groups.get_mut(group) {
                if g.members.remove(member_id).is_some() {
                    g.epoch += 1;
                }
            }
            return Ok(HeartbeatAnswer {
                member_id: member_id.to_string(),
                member_epoch: -1,
                heartbeat_interval_ms: interval,
                assignment: None,
            });
        }
        if epoch == 0 && topics.as_ref().is_none_or(|t| t.is_empty()) {
            return Err(ShareError::InvalidRequest(
                "SubscribedTopicNames must be set when joining".into(),
            ));
        }
        if epoch < -1 {
            return Err(ShareError::InvalidRequest(format!(
                "invalid member epoch {epoch}"
            )));
        }
        let member_id = if member_id.is_empty() {
            Uuid::new_v4().simple().to_string()
        } else {
            member_id.to_string()
        };
        let mut inner = self.inner.lock();
        self.remember(&mut inner, group);
        let g = inner.groups.entry(group.to_string()).or_default();
        if epoch > 0 {
            match g.members.get(&member_id) {
                None => return Err(ShareError::UnknownMemberId),
                Some(m) if epoch != m.epoch && epoch != m.previous_epoch => {
                    return Err(ShareError::FencedMemberEpoch)
                }
                Some(_) => {}
            }
        }
        let known = g.members.get(&member_id).cloned();
        let topics = topics
            .or_else(|| known.as_ref().map(|m| m.topics.clone()))
            .unwrap_or_default();
        let assignment = self.assign(&topics);
        let mut member = known.clone().unwrap_or(Member {
            epoch: 0,
            previous_epoch: 0,
            topics: Vec::new(),
            rack: None,
            client_id: client.client_id.clone(),
            client_host: client.client_host.clone(),
            assignment: Assignment::new(),
            last_seen: now,
        });
        member.topics = topics;
        member.rack = rack.map(str::to_string).or(member.rack);
        member.last_seen = now;
        let changed = known.is_none() || epoch == 0 || member.assignment != assignment;
        if changed {
            g.epoch += 1;
            member.previous_epoch = member.epoch;
            member.epoch = g.epoch;
            member.assignment = assignment;
        }
        let answer = HeartbeatAnswer {
            member_id: member_id.clone(),
            member_epoch: member.epoch,
            heartbeat_interval_ms: interval,
            assignment: (changed || epoch != member.epoch).then(|| member.assignment.clone()),
        };
        g.members.insert(member_id, member);
        Ok(answer)
    }

    /// Every partition of every subscribed topic that exists.
    fn assign(&self, topics: &[String]) -> Assignment {
        topics
            .iter()
            .filter_map(|t| {
                let topic = self.broker.topic(t)?;
                let partitions = (0..topic.partition_count() as i32).collect();
                Some((t.clone(), (topic.id(), partitions)))
            })
            .collect()
    }

    /// Removes members not heard from for `timeout_ms`; returns them.
    pub(super) fn expire_members(&self, group: &str, now: i64, timeout_ms: i64) -> Vec<String> {
        let mut inner = self.inner.lock();
        let Some(g) = inner.groups.get_mut(group) else {
            return Vec::new();
        };
        let gone: Vec<String> = g
            .members
            .iter()
            .filter(|(_, m)| now - m.last_seen > timeout_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            g.members.remove(id);
        }
        if !gone.is_empty() {
            g.epoch += 1;
        }
        gone
    }

    /// Whether `group` has members now.
    pub fn has_members(&self, group: &str) -> bool {
        self.inner
            .lock()
            .groups
            .get(group)
            .is_some_and(|g| !g.members.is_empty())
    }

    /// ShareGroupDescribe of one group; `None` if it is not a share group.
    pub fn describe(&self, group: &str) -> Option<ShareGroupInfo> {
        let inner = self.inner.lock();
        let g = inner.groups.get(group);
        if g.is_none() && !inner.overrides.contains_key(group) {
            return None;
        }
        let mut members: Vec<MemberInfo> = g
            .map(|g| {
                g.members
                    .iter()
                    .map(|(id, m)| MemberInfo {
                        member_id: id.clone(),
                        member_epoch: m.epoch,
                        rack: m.rack.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        topics: m.topics.clone(),
                        assignment: m.assignment.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        Some(ShareGroupInfo {
            group_id: group.to_string(),
            state: if members.is_empty() {
                "Empty"
            } else {
                "Stable"
            },
            epoch: g.map_or(0, |g| g.epoch),
            members,
        })
    }
}
