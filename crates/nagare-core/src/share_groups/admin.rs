//! What operators ask of share groups: their start offsets per share partition
//! (DescribeShareGroupOffsets), moving them (AlterShareGroupOffsets), forgetting them
//! (DeleteShareGroupOffsets) and deleting whole groups (DeleteGroups). Altering and
//! deleting need a group without members, as in Kafka.

use super::{ShareError, ShareGroups};

/// A share partition's start offset: everything below it is settled for the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartOffset {
    pub topic: String,
    pub partition: i32,
    pub start_offset: i64,
}

impl ShareGroups {
    fn prefix(group: &str) -> String {
        format!("share/{group}/")
    }

    /// The share partitions `group` has state for, with their start offsets (the STOMP
    /// queue `/queue/<group>` included when its topic exists).
    pub fn start_offsets(&self, group: &str) -> Vec<StartOffset> {
        let prefix = Self::prefix(group);
        let mut out: Vec<StartOffset> = self
            .queues
            .share_keys(&prefix)
            .into_iter()
            .filter_map(|(key, start)| {
                // Topic names hold no '/', group ids may: split from the right.
                let rest = key.strip_prefix(&prefix)?;
                let (topic, partition) = rest.rsplit_once('/')?;
                if topic.contains('/') {
                    return None;
                }
                Some(StartOffset {
                    topic: topic.to_string(),
                    partition: partition.parse().ok()?,
                    start_offset: start,
                })
            })
            .collect();
        let stomp_topic = crate::queues::topic_for(group);
        if self.broker.topic(&stomp_topic).is_some() {
            if let Some(start) = self.queues.share_start(&stomp_topic) {
                out.push(StartOffset {
                    topic: stomp_topic,
                    partition: 0,
                    start_offset: start,
                });
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        out
    }

    fn refuse_if_busy(&self, group: &str) -> Result<(), ShareError> {
        if !self.exists(group) {
            return Err(ShareError::GroupNotFound(group.to_string()));
        }
        if self.has_members(group) {
            return Err(ShareError::GroupNotEmpty(group.to_string()));
        }
        Ok(())
    }

    /// Moves `group`'s start offset on a share partition; stored durably. A group not
    /// used yet is created (empty), as Kafka does.
    pub async fn alter_start_offset(
        &self,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(), ShareError> {
        if self.has_members(group) {
            return Err(ShareError::GroupNotEmpty(group.to_string()));
        }
        if Self::is_stomp_queue(group, topic, partition) {
            return Err(ShareError::InvalidRequest(format!(
                "{topic} is the STOMP queue /queue/{group}: purge it instead"
            )));
        }
        let p = self
            .broker
            .partition(topic, partition)
            .map_err(|e| ShareError::Core(e.to_string()))?;
        let offset = offset.clamp(p.log_start_offset(), p.log_end_offset());
        {
            let mut inner = self.inner.lock();
            self.remember(&mut inner, group);
        }
        self.queues
            .reset_share_queue(&Self::queue_key(group, topic, partition), offset)
            .await
            .map_err(|e| ShareError::Core(e.to_string()))
    }

    /// Forgets `group`'s state on every partition of `topic` (it starts afresh, per
    /// `share.auto.offset.reset`, when next used).
    pub async fn delete_start_offsets(&self, group: &str, topic: &str) -> Result<(), ShareError> {
        self.refuse_if_busy(group)?;
        // Not touched any more, so the expiry tick does not open them again.
        if let Some(t) = self.inner.lock().touched.get_mut(group) {
            t.retain(|(name, _)| name != topic);
        }
        let keys = self
            .queues
            .share_keys(&format!("{}{topic}/", Self::prefix(group)));
        for (key, _) in keys {
            self.queues
                .delete_share_queue(&key)
                .await
                .map_err(|e| ShareError::Core(e.to_string()))?;
        }
        Ok(())
    }

    /// Deletes an empty share group: its configs and its share partitions' state.
    pub async fn delete_group(&self, group: &str) -> Result<(), ShareError> {
        self.refuse_if_busy(group)?;
        self.inner.lock().touched.remove(group);
        let prefix = Self::prefix(group);
        // Only this group's keys: `share/<group>/<topic>/<p>` (a group `g/x` shares
        // the prefix of `g`).
        let own = |k: &str| {
            k.strip_prefix(&prefix)
                .is_some_and(|r| r.matches('/').count() == 1)
        };
        for (key, _) in self
            .queues
            .share_keys(&prefix)
            .into_iter()
            .filter(|(k, _)| own(k))
        {
            self.queues
                .delete_share_queue(&key)
                .await
                .map_err(|e| ShareError::Core(e.to_string()))?;
        }
        {
            let mut inner = self.inner.lock();
            inner.groups.remove(group);
            inner.overrides.remove(group);
            inner.touched.remove(group);
        }
        self.log
            .push(
                [super::persist::GroupOp {
                    group: group.to_string(),
                    overrides: None,
                }],
                true,
            )
            .stored()
            .await
            .map_err(|e| ShareError::Core(e.to_string()))
    }
}
