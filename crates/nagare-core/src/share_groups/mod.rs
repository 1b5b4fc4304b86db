//! Kafka share groups (KIP-932) on nagare's queues. A share group `G` reading topic `T`
//! keeps one queue per partition of `T` (see [`crate::queues::Queue`]'s pull side): the
//! group's members acquire records from it, each record held by one member at a time
//! under an acquisition lock, and accept, release or reject it. The share group `Q` on
//! topic `queue.Q` is STOMP's `/queue/Q` itself, so STOMP consumers and share-group
//! members compete for one queue with one delivery state; any other share group over any
//! topic is an independent queue over that topic.
//!
//! Membership (heartbeats, the simple assignor: every member gets every partition of the
//! topics it subscribes to), share sessions and group configs live here; delivery state
//! lives in the queues (and their log). Plain Rust types and the time in ms only.

mod admin;
mod config;
mod error;
mod members;
mod persist;
mod sessions;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

pub use admin::StartOffset;
pub use config::{default as config_default, ShareSettings, GROUP_CONFIGS};
pub use error::ShareError;
pub use members::{Assignment, Client, HeartbeatAnswer, MemberInfo, ShareGroupInfo};
pub use sessions::SharePartition;

use crate::internal_log::{InternalLog, InternalLogWriter};
use crate::queues::{Holder, Queue, Queues};
use crate::{Broker, CoreError};
use members::Group;
use persist::GroupOp;
use sessions::Session;

/// How often acquisition locks and member sessions are checked for expiry.
const EXPIRY_TICK: Duration = Duration::from_millis(100);

/// Every share group of the broker.
pub struct ShareGroups {
    broker: Arc<Broker>,
    queues: Arc<Queues>,
    log: Arc<InternalLog<GroupOp>>,
    inner: Mutex<Inner>,
}

struct Inner {
    groups: HashMap<String, Group>,
    /// Config overrides of every group that exists (stored).
    overrides: HashMap<String, BTreeMap<String, String>>,
    /// Share sessions by (group, member).
    sessions: HashMap<(String, String), Session>,
    /// Holder numbers of members, by (group, member).
    holders: HashMap<(String, String), Holder>,
    next_holder: Holder,
    /// The share partitions each group has used since the start (whose queues hold its
    /// acquisitions).
    touched: HashMap<String, BTreeSet<(String, i32)>>,
}

/// The share groups' background work: their log's writer and the expiry of acquisition
/// locks and silent members. Ends when the [`ShareGroups`] is dropped.
#[must_use = "share-group state is not stored until the background task runs"]
pub struct ShareGroupsBackground {
    groups: Weak<ShareGroups>,
    writer: InternalLogWriter<GroupOp>,
}

/// The current time in ms since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl ShareGroups {
    /// Replays the share-group log. Blocking.
    pub fn open(
        broker: &Arc<Broker>,
        queues: Arc<Queues>,
    ) -> Result<(Arc<ShareGroups>, ShareGroupsBackground), CoreError> {
        let (log, overrides, writer) = InternalLog::<GroupOp>::open(broker, persist::STATE_LOG)?;
        let groups = Arc::new(ShareGroups {
            broker: broker.clone(),
            queues,
            log,
            inner: Mutex::new(Inner {
                groups: HashMap::new(),
                overrides,
                sessions: HashMap::new(),
                holders: HashMap::new(),
                next_holder: 1,
                touched: HashMap::new(),
            }),
        });
        let background = ShareGroupsBackground {
            groups: Arc::downgrade(&groups),
            writer,
        };
        Ok((groups, background))
    }

    /// The effective settings of `group`.
    pub fn settings(&self, group: &str) -> ShareSettings {
        let inner = self.inner.lock();
        match inner.overrides.get(group) {
            Some(o) => ShareSettings::from_overrides(o),
            None => ShareSettings::from_overrides(&BTreeMap::new()),
        }
    }

    /// Whether `group` is a share group (it exists: stored or with members).
    pub fn exists(&self, group: &str) -> bool {
        let inner = self.inner.lock();
        inner.overrides.contains_key(group) || inner.groups.contains_key(group)
    }

    /// Every share group's id.
    pub fn list(&self) -> Vec<String> {
        let inner = self.inner.lock();
        let mut out: Vec<String> = inner
            .overrides
            .keys()
            .chain(inner.groups.keys())
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The config overrides set on `group` (none for a group that does not exist).
    pub fn overrides(&self, group: &str) -> BTreeMap<String, String> {
        self.inner
            .lock()
            .overrides
            .get(group)
            .cloned()
            .unwrap_or_default()
    }

    /// Replaces the config overrides of `group` (creating the group, as Kafka does when
    /// configs are set for a group id not yet used); stored in the background.
    pub fn set_overrides(
        &self,
        group: &str,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ShareError> {
        config::validate(&overrides)?;
        if validate_only {
            return Ok(());
        }
        self.inner
            .lock()
            .overrides
            .insert(group.to_string(), overrides.clone());
        drop(self.log.push(
            [GroupOp {
                group: group.to_string(),
                overrides: Some(overrides),
            }],
            true,
        ));
        Ok(())
    }

    /// Notes that `group` exists (its first member joined), storing it if new.
    fn remember(&self, inner: &mut Inner, group: &str) {
        if !inner.overrides.contains_key(group) {
            inner.overrides.insert(group.to_string(), BTreeMap::new());
            drop(self.log.push(
                [GroupOp {
                    group: group.to_string(),
                    overrides: Some(BTreeMap::new()),
                }],
                false,
            ));
        }
    }

    /// The holder number of a member (what its acquisitions are recorded under).
    pub fn holder(&self, group: &str, member: &str) -> Holder {
        let mut inner = self.inner.lock();
        let key = (group.to_string(), member.to_string());
        if let Some(h) = inner.holders.get(&key) {
            return *h;
        }
        let h = inner.next_holder;
        inner.next_holder += 1;
        inner.holders.insert(key, h);
        h
    }

    /// The key of the queue of `group` over `topic`/`partition` in the queue log.
    fn queue_key(group: &str, topic: &str, partition: i32) -> String {
        format!("share/{group}/{topic}/{partition}")
    }

    /// Whether `group` over `topic`/`partition` is the STOMP queue `/queue/<group>`.
    fn is_stomp_queue(group: &str, topic: &str, partition: i32) -> bool {
        partition == 0 && topic == crate::queues::topic_for(group)
    }

    /// The queue of `group` over `topic`/`partition`, opened on first use. Blocking the
    /// first time.
    pub fn queue(&self, group: &str, topic: &str, partition: i32) -> Result<Arc<Queue>, CoreError> {
        {
            let mut inner = self.inner.lock();
            let touched = inner.touched.entry(group.to_string()).or_default();
            if !touched.contains(&(topic.to_string(), partition)) {
                touched.insert((topic.to_string(), partition));
            }
        }
        if Self::is_stomp_queue(group, topic, partition) {
            return self.queues.queue(group);
        }
        let earliest = self.settings(group).earliest;
        self.queues.share_queue(
            &Self::queue_key(group, topic, partition),
            topic,
            partition,
            earliest,
        )
    }

    /// The queues of `group` opened so far, with their topic and partition.
    fn open_queues(&self, group: &str) -> Vec<Arc<Queue>> {
        let keys: Vec<(String, i32)> = self
            .inner
            .lock()
            .touched
            .get(group)
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        keys.iter()
            .filter_map(|(t, p)| self.queue(group, t, *p).ok())
            .collect()
    }

    /// Releases everything `member` of `group` holds (it left, or its session closed).
    pub fn release_member(&self, group: &str, member: &str) {
        let holder = self.holder(group, member);
        let limit = self.settings(group).delivery_limit;
        for q in self.open_queues(group) {
            q.release_all(holder, limit);
        }
    }

    /// Expires acquisition locks and members not heard from (the background tick).
    fn expire(&self, now: i64) {
        let groups: Vec<String> = {
            let inner = self.inner.lock();
            inner.touched.keys().cloned().collect()
        };
        for g in groups {
            let settings = self.settings(&g);
            for q in self.open_queues(&g) {
                q.expire_leases(now, settings.delivery_limit);
            }
            for member in self.expire_members(&g, now, settings.session_timeout_ms) {
                self.release_member(&g, &member);
                self.close_session(&g, &member);
                self.forget_holder(&g, &member);
            }
        }
    }
}

impl ShareGroupsBackground {
    /// Runs until the [`ShareGroups`] is dropped.
    pub async fn run(self) {
        let tick = async {
            let mut tick = tokio::time::interval(EXPIRY_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(groups) = self.groups.upgrade() else {
                    return;
                };
                // Opening a queue may read the partition: off the runtime's threads.
                let _ = tokio::task::spawn_blocking(move || groups.expire(now_ms())).await;
            }
        };
        tokio::join!(self.writer.run(), tick);
    }
}
