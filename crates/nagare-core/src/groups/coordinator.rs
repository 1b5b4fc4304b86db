//! The driver around [`Groups`]: one lock, a timer task for the deadlines, and the
//! internal log `consumer_offsets` (an [`InternalLog`]) that stores the state changes in
//! the order they were made.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::CommittedOffset;
use super::{
    GroupConfig, GroupDescription, GroupError, GroupListing, Groups, JoinRequest, JoinResponse,
    LeavingMember, OffsetCommitRequest, PersistOp, ResetError, SyncRequest, SyncResponse,
    TopicPartition,
};
use crate::internal_log::{InternalLog, InternalLogWriter, InternalOp, Ticket};
use crate::{Broker, CoreError};
use parking_lot::Mutex;

/// Name of the internal log (`DATA/__nagare_consumer_offsets-0`).
pub const OFFSETS_LOG: &str = "consumer_offsets";

/// Longest sleep of the timer task when nothing is due.
const IDLE_TICK: Duration = Duration::from_secs(1);

/// The group coordinator of one broker.
pub struct GroupCoordinator {
    groups: Mutex<Groups>,
    started: Instant,
    wake: Arc<Notify>,
    log: Arc<InternalLog<PersistOp>>,
}

/// What the coordinator runs in the background: the internal log's writer and the timer
/// that runs the deadlines (session expiry, the end of join phases). Ends when the
/// coordinator is dropped.
#[must_use = "nothing is stored and no deadline runs until the background task runs"]
pub struct CoordinatorBackground {
    coordinator: Weak<GroupCoordinator>,
    wake: Arc<Notify>,
    writer: InternalLogWriter<PersistOp>,
}

impl CoordinatorBackground {
    /// Runs until the coordinator is dropped.
    pub async fn run(self) {
        tokio::join!(self.writer.run(), run_timer(self.coordinator, self.wake));
    }
}

impl GroupCoordinator {
    /// Replays the internal log. Blocking. The returned background task must be run
    /// (on the runtime) for changes to be stored and deadlines to fire.
    pub fn open(
        broker: &Broker,
        config: GroupConfig,
    ) -> Result<(Arc<GroupCoordinator>, CoordinatorBackground), CoreError> {
        let (log, stored, writer) = InternalLog::<PersistOp>::open(broker, OFFSETS_LOG)?;
        let mut groups = Groups::new(config);
        for op in PersistOp::snapshot(&stored) {
            groups.apply(op);
        }
        groups.after_replay();
        tracing::info!(groups = groups.groups.len(), "group coordinator loaded");
        let coordinator = Arc::new(GroupCoordinator {
            groups: Mutex::new(groups),
            started: Instant::now(),
            wake: Arc::new(Notify::new()),
            log,
        });
        let background = CoordinatorBackground {
            coordinator: Arc::downgrade(&coordinator),
            wake: coordinator.wake.clone(),
            writer,
        };
        Ok((coordinator, background))
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Runs `f` on the state under the lock, then queues what it changed for the log
    /// (in order; fsynced when `durable`) and wakes the timer, whose next deadline may
    /// have moved. The ticket says when the changes are stored.
    fn with<R>(&self, durable: bool, f: impl FnOnce(&mut Groups, u64) -> R) -> (R, Ticket) {
        let result = self.locked(durable, f);
        self.wake.notify_one();
        result
    }

    /// [`with`](Self::with) without waking the timer (the timer itself uses this, or it
    /// would wake itself forever).
    fn locked<R>(&self, durable: bool, f: impl FnOnce(&mut Groups, u64) -> R) -> (R, Ticket) {
        let now = self.now();
        let mut groups = self.groups.lock();
        let r = f(&mut groups, now);
        let ops = groups.drain_outbox();
        // Pushed under the lock: the log sees changes in the order they were made.
        let ticket = if ops.is_empty() {
            Ticket::ready()
        } else {
            self.log.push(ops, durable)
        };
        (r, ticket)
    }

    /// JoinGroup; waits for the rebalance when the member has to.
    pub async fn join(&self, req: JoinRequest) -> Result<JoinResponse, GroupError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.log.reserve().await;
        drop(self.with(false, |g, now| g.join(req, now, tx)));
        rx.await.unwrap_or(Err(GroupError::RebalanceInProgress))
    }

    /// SyncGroup; followers wait for the leader's assignment.
    pub async fn sync(&self, req: SyncRequest) -> Result<SyncResponse, GroupError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.log.reserve().await;
        drop(self.with(false, |g, now| g.sync(req, now, tx)));
        rx.await.unwrap_or(Err(GroupError::RebalanceInProgress))
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        self.with(false, |g, now| {
            g.heartbeat(group_id, member_id, group_instance_id, generation, now)
        })
        .0
    }

    pub fn leave(
        &self,
        group_id: &str,
        members: &[LeavingMember],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.with(false, |g, now| g.leave(group_id, members, now)).0
    }

    /// OffsetCommit; answers once the offsets are in the internal log.
    pub async fn commit_offsets(
        &self,
        req: OffsetCommitRequest,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.log.reserve().await;
        let (results, stored) = self.with(true, |g, now| {
            g.commit_offsets(req, now, crate::internal_log::now_ms())
        });
        let results = results?;
        stored.stored().await.map_err(storage_error)?;
        Ok(results)
    }

    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Vec<(TopicPartition, Option<CommittedOffset>)> {
        self.groups.lock().fetch_offsets(group_id, partitions)
    }

    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.log.reserve().await;
        let (results, stored) = self.with(true, |g, _| g.delete_offsets(group_id, partitions));
        let results = results?;
        stored.stored().await.map_err(storage_error)?;
        Ok(results)
    }

    /// DeleteGroups: one result per group, in order.
    pub async fn delete_groups(&self, group_ids: &[String]) -> Vec<Result<(), GroupError>> {
        self.log.reserve().await;
        let (results, stored): (Vec<_>, _) = self.with(true, |g, _| {
            group_ids.iter().map(|id| g.delete_group(id)).collect()
        });
        match stored.stored().await.map_err(storage_error) {
            Ok(()) => results,
            Err(e) => results.into_iter().map(|_| Err(e.clone())).collect(),
        }
    }

    /// Stores offsets an operator set (see [`Groups::reset_offsets`]), fsynced.
    pub(super) async fn store_reset(
        &self,
        group_id: &str,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<(), ResetError> {
        self.log.reserve().await;
        let (result, stored) = self.with(true, |g, _| {
            g.reset_offsets(group_id, offsets, crate::internal_log::now_ms())
        });
        result?;
        stored.stored().await.map_err(storage_error)?;
        Ok(())
    }

    /// TxnOffsetCommit's member and generation checks (see
    /// [`Groups::check_txn_offset_commit`]).
    pub fn check_txn_offset_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        self.groups
            .lock()
            .check_txn_offset_commit(group_id, member_id, instance_id, generation)
    }

    /// Commits the offsets of a committed transaction; returns once they are stored.
    pub async fn commit_txn_offsets(
        &self,
        group_id: &str,
        offsets: Vec<super::OffsetCommit>,
    ) -> Result<(), GroupError> {
        self.log.reserve().await;
        let ((), stored) = self.with(true, |g, _| {
            g.commit_txn_offsets(group_id, offsets, crate::internal_log::now_ms())
        });
        stored.stored().await.map_err(storage_error)
    }

    /// ConsumerGroupHeartbeat (KIP-848); `topics` is every topic of the broker now.
    pub fn consumer_heartbeat(
        &self,
        req: super::ConsumerHeartbeat,
        topics: &super::TopicsSnapshot,
    ) -> Result<super::ConsumerHeartbeatResponse, GroupError> {
        self.with(false, |g, now| g.consumer_heartbeat(req, topics, now))
            .0
    }

    /// ConsumerGroupDescribe of one group.
    pub fn describe_consumer_group(
        &self,
        group_id: &str,
    ) -> Result<super::ConsumerGroupDescription, GroupError> {
        self.groups.lock().describe_consumer_group(group_id)
    }

    /// OffsetFetch v9+ member checks of a consumer group (see
    /// [`Groups::check_consumer_member`]).
    pub fn check_consumer_member(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        self.groups
            .lock()
            .check_consumer_member(group_id, member_id, member_epoch)
    }

    pub fn list_groups(&self) -> Vec<GroupListing> {
        self.groups.lock().list_groups()
    }

    pub fn describe_group(&self, group_id: &str) -> GroupDescription {
        self.groups.lock().describe_group(group_id)
    }

    /// Runs the due timeouts now (for the timer task, and for tests).
    pub fn tick(&self) -> Option<u64> {
        self.locked(false, |g, now| {
            g.tick(now);
            g.next_deadline().map(|d| d.saturating_sub(now))
        })
        .0
    }
}

/// A failed store as the group protocol reports it: a writer that is gone means the
/// coordinator is going away.
fn storage_error(e: CoreError) -> GroupError {
    match e {
        CoreError::ShuttingDown => GroupError::CoordinatorNotAvailable,
        e => {
            tracing::error!(error = %e, "could not store group state");
            GroupError::Storage(e.to_string())
        }
    }
}

/// Sleeps until the next deadline (or until a request moved it), then ticks.
async fn run_timer(coordinator: Weak<GroupCoordinator>, wake: Arc<Notify>) {
    loop {
        let wait = match coordinator.upgrade() {
            Some(c) => c.tick(),
            None => return,
        };
        let wait = wait.map_or(IDLE_TICK, |ms| {
            Duration::from_millis(ms.max(1)).min(IDLE_TICK)
        });
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = wake.notified() => {}
        }
    }
}
