//! The driver around [`Transactions`]: one lock, the internal log `transactions`, the
//! markers, the group offsets, and a timer for timeouts and expirations.
//!
//! Every change follows one pattern: compute the transition under the lock and push it to
//! the log while still holding it (so the log sees transitions in the order they were
//! made), wait for the fsync without the lock, then apply it (or give it up if storing
//! failed). Ending a transaction is three such steps: the decision (PrepareCommit or
//! PrepareAbort), the markers and offsets, the completion.
//!
//! Only the decision is waited for by EndTxn, as in Kafka: once it is fsynced the outcome
//! is settled (a restart finishes a prepared transaction), so the markers and the
//! completion run in the background, and a request of the same producer arriving
//! meanwhile waits for them ([`TransactionCoordinator::transit`]). The completion is not
//! fsynced on its own: every marker is durable before it is pushed, and if it is lost a
//! restart finds the transaction prepared and writes the (idempotent) markers again.

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::markers::{sync_partitions, write_markers};
use super::persist::TxnOp;
use super::{
    InitStep, PendingOffset, StoredTransactions, TransactionConfig, Transactions, Transition,
    TxnError, TxnListing, TxnMetadata, TxnState, TRANSACTIONS_LOG,
};
use crate::groups::{GroupCoordinator, GroupError, OffsetCommit};
use crate::internal_log::{now_ms, InternalLog, InternalLogWriter, Ticket};
use crate::producers::Producers;
use crate::{Broker, CoreError};

/// Longest sleep of the timer when nothing is due (it also wakes on every change).
const IDLE_TICK: Duration = Duration::from_secs(10);
/// First wait before writing the markers of a decided transaction again after a
/// failure; doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(10);
/// How long a request waits for a busy transactional id before answering
/// CONCURRENT_TRANSACTIONS.
const BUSY_WAIT: Duration = Duration::from_millis(200);

/// The transaction coordinator of one broker.
pub struct TransactionCoordinator {
    broker: Arc<Broker>,
    producers: Arc<Producers>,
    groups: Arc<GroupCoordinator>,
    state: Mutex<Transactions>,
    log: Arc<InternalLog<TxnOp>>,
    wake: Arc<Notify>,
    /// Wakes requests waiting for a busy id ([`TransactionCoordinator::transit`]).
    settled: Notify,
    /// The previous process did not shut down cleanly: its open transactions are aborted
    /// on start (their records may have been lost, see [`Transactions::abort_open`]).
    crashed: bool,
}

/// The background work: the log writer, the completion of transactions decided before
/// a restart, and the timer. Ends when the coordinator is dropped.
#[must_use = "nothing is stored and no transaction times out until the background task runs"]
pub struct TransactionsBackground {
    coordinator: Weak<TransactionCoordinator>,
    wake: Arc<Notify>,
    writer: InternalLogWriter<TxnOp>,
}

impl TransactionsBackground {
    pub async fn run(self) {
        let coordinator = self.coordinator.clone();
        let recover = async move {
            let Some(c) = coordinator.upgrade() else {
                return;
            };
            if c.crashed {
                c.abort_open();
            }
            let prepared = c.state.lock().prepared();
            drop(c);
            for id in prepared {
                tracing::info!(transactional_id = %id, "completing a transaction decided before the restart");
                finish_until_done(coordinator.clone(), id).await;
            }
        };
        tokio::join!(
            self.writer.run(),
            recover,
            run_timer(self.coordinator, self.wake)
        );
    }
}

impl TransactionCoordinator {
    /// Replays the internal log. Blocking. The returned background task must be run.
    pub fn open(
        broker: &Arc<Broker>,
        producers: Arc<Producers>,
        groups: Arc<GroupCoordinator>,
        config: TransactionConfig,
    ) -> Result<(Arc<TransactionCoordinator>, TransactionsBackground), CoreError> {
        let (log, stored, writer) = InternalLog::<TxnOp>::open(broker, TRANSACTIONS_LOG)?;
        let stored: StoredTransactions = stored;
        let transactions = Transactions::new(config, stored);
        let crashed = !log.partition().log().is_some_and(|l| l.opened_clean());
        tracing::info!(
            transactional_ids = transactions.len(),
            prepared = transactions.prepared().len(),
            "transaction coordinator loaded"
        );
        let coordinator = Arc::new(TransactionCoordinator {
            broker: broker.clone(),
            producers,
            groups,
            state: Mutex::new(transactions),
            log,
            wake: Arc::new(Notify::new()),
            settled: Notify::new(),
            crashed,
        });
        let background = TransactionsBackground {
            coordinator: Arc::downgrade(&coordinator),
            wake: coordinator.wake.clone(),
            writer,
        };
        Ok((coordinator, background))
    }

    pub fn config(&self) -> TransactionConfig {
        self.state.lock().config().clone()
    }

    /// Runs `f` under the lock; a transition it returns is pushed to the log before the
    /// lock is released.
    fn decide<R>(
        &self,
        durable: bool,
        f: impl FnOnce(&mut Transactions) -> Result<R, TxnError>,
        transition: impl FnOnce(&R) -> Option<&Transition>,
    ) -> Result<(R, Ticket), TxnError> {
        let mut state = self.state.lock();
        let r = f(&mut state)?;
        let ticket = match transition(&r) {
            Some(t) => self.log.push(
                [TxnOp::Put {
                    id: t.id.clone(),
                    meta: t.next.clone(),
                }],
                durable,
            ),
            None => Ticket::ready(),
        };
        Ok((r, ticket))
    }

    /// Waits for a pushed transition to be stored, then applies it (or gives it up).
    async fn settle(&self, t: &Transition, ticket: Ticket) -> Result<(), TxnError> {
        let stored = ticket.stored().await;
        let mut state = self.state.lock();
        match stored {
            Ok(()) => {
                state.stored(t.clone());
                drop(state);
                // The timer's next deadline may have moved.
                self.wake.notify_one();
                self.settled.notify_waiters();
                Ok(())
            }
            Err(e) => {
                state.abandon(t);
                self.settled.notify_waiters();
                if !matches!(e, CoreError::ShuttingDown) {
                    tracing::error!(transactional_id = %t.id, error = %e, "could not store transaction state");
                }
                Err(TxnError::CoordinatorNotAvailable)
            }
        }
    }

    /// Decides and stores in one go. A request that finds its id busy (another request
    /// of the same producer being stored, or its markers being written) waits a little
    /// for it before answering CONCURRENT_TRANSACTIONS: clients may send, say,
    /// AddPartitionsToTxn and TxnOffsetCommit at once, and a retry costs them a backoff.
    async fn transit(
        &self,
        f: impl Fn(&mut Transactions) -> Result<Option<Transition>, TxnError>,
    ) -> Result<Option<Transition>, TxnError> {
        self.transit_stored(true, f).await
    }

    /// [`TransactionCoordinator::transit`], fsynced or not.
    async fn transit_stored(
        &self,
        durable: bool,
        f: impl Fn(&mut Transactions) -> Result<Option<Transition>, TxnError>,
    ) -> Result<Option<Transition>, TxnError> {
        let give_up = tokio::time::Instant::now() + BUSY_WAIT;
        loop {
            self.log.reserve().await;
            let settled = self.settled.notified();
            match self.decide(durable, &f, |t| t.as_ref()) {
                Ok((t, ticket)) => {
                    if let Some(t) = &t {
                        self.settle(t, ticket).await?;
                    }
                    return Ok(t);
                }
                Err(TxnError::ConcurrentTransactions) if tokio::time::Instant::now() < give_up => {
                    let _ = tokio::time::timeout_at(give_up, settled).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// InitProducerId with a transactional id: the producer id and epoch to use.
    pub async fn init_producer_id(
        self: &Arc<Self>,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        // A new producer id is allocated (and stored) outside the lock when the machine
        // will need one; at worst one goes unused, as in Kafka.
        let mut fresh = None;
        for _ in 0..3 {
            if fresh.is_none() && self.state.lock().needs_producer_id(id) {
                let (pid, _) = self
                    .producers
                    .init_producer_id(None)
                    .await
                    .map_err(|_| TxnError::CoordinatorNotAvailable)?;
                fresh = Some(pid);
            }
            self.log.reserve().await;
            let now = now_ms();
            let (step, ticket) = self.decide(
                true,
                |s| s.init_producer_id(id, timeout_ms, expected, fresh, now),
                |step| match step {
                    InitStep::Store(t) | InitStep::FenceOngoing(t) => Some(t),
                    InitStep::NeedProducerId => None,
                },
            )?;
            match step {
                InitStep::NeedProducerId => continue,
                InitStep::Store(t) => {
                    self.settle(&t, ticket).await?;
                    tracing::info!(
                        transactional_id = id,
                        producer_id = t.next.producer_id,
                        epoch = t.next.producer_epoch,
                        "transactional producer initialized"
                    );
                    return Ok((t.next.producer_id, t.next.producer_epoch));
                }
                InitStep::FenceOngoing(t) => {
                    self.settle(&t, ticket).await?;
                    tracing::info!(
                        transactional_id = id,
                        "aborting the open transaction of the previous producer"
                    );
                    self.finish_or_retry_later(id).await;
                    return Err(TxnError::ConcurrentTransactions);
                }
            }
        }
        Err(TxnError::ConcurrentTransactions)
    }

    /// AddPartitionsToTxn (one transactional id).
    pub async fn add_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<(), TxnError> {
        let now = now_ms();
        self.transit(|s| s.add_partitions(id, producer_id, epoch, partitions, now))
            .await
            .map(|_| ())
    }

    /// AddPartitionsToTxn v4+ `verify_only`: whether each partition is in the open
    /// transaction.
    pub fn verify_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, TxnError> {
        self.state
            .lock()
            .verify_partitions(id, producer_id, epoch, partitions)
    }

    /// AddOffsetsToTxn.
    pub async fn add_offsets(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
    ) -> Result<(), TxnError> {
        let now = now_ms();
        self.transit(|s| s.add_offsets(id, producer_id, epoch, group, now))
            .await
            .map(|_| ())
    }

    /// TxnOffsetCommit: the group checks (member, generation), then the offsets are held
    /// by the transaction.
    #[allow(clippy::too_many_arguments)]
    pub async fn txn_offset_commit(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        offsets: Vec<PendingOffset>,
    ) -> Result<(), TxnError> {
        self.groups
            .check_txn_offset_commit(group, member_id, instance_id, generation)?;
        let now = now_ms();
        self.transit(|s| {
            s.txn_offset_commit(id, producer_id, epoch, group, offsets.clone(), now)
                .map(Some)
        })
        .await
        .map(|_| ())
    }

    /// EndTxn: stores the decision and answers; the markers, the committed offsets and
    /// the completion follow in the background (retried until done: the decision stands,
    /// as in Kafka).
    pub async fn end_txn(
        self: &Arc<Self>,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), TxnError> {
        if commit {
            self.make_data_durable(id, producer_id, epoch).await?;
        }
        let now = now_ms();
        let decided = self
            .transit(|s| s.end_txn(id, producer_id, epoch, commit, now))
            .await?;
        if decided.is_some() {
            let this = self.clone();
            let id = id.to_string();
            drop(tokio::spawn(async move {
                this.finish_or_retry_later(&id).await
            }));
        }
        Ok(())
    }

    /// Before a commit is decided, every record of the transaction is fsynced: Produce
    /// acknowledges transactional records without waiting for the disk (a transaction is
    /// acknowledged by its commit, as a database acknowledges at COMMIT), so one fsync per
    /// partition per transaction replaces one per Produce. A crash before the decision
    /// aborts the transaction on restart ([`Transactions::abort_open`]).
    async fn make_data_durable(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
    ) -> Result<(), TxnError> {
        let partitions = match self.state.lock().get(id) {
            Some(meta)
                if meta.state == TxnState::Ongoing
                    && meta.producer_id == producer_id
                    && meta.producer_epoch == epoch =>
            {
                meta.partitions.clone()
            }
            // Not an open transaction of this producer: end_txn answers with the error.
            _ => return Ok(()),
        };
        sync_partitions(&self.broker, &partitions).await.map_err(|e| {
            tracing::error!(transactional_id = id, error = %e, "could not fsync the records of a transaction before its commit");
            TxnError::CoordinatorNotAvailable
        })
    }

    /// After a crash: aborts every open transaction, fencing its producer.
    fn abort_open(self: &Arc<Self>) {
        let now = now_ms();
        let due = {
            let mut state = self.state.lock();
            let open = state.abort_open(now);
            self.push_fenced(open)
        };
        for (t, _) in &due {
            tracing::info!(transactional_id = %t.id, "aborting a transaction left open by a crash; producer fenced");
        }
        self.settle_fenced(due);
    }

    /// Pushes coordinator-made aborts (called under the state lock, so the log sees them in
    /// the order they were made).
    fn push_fenced(&self, aborts: Vec<Transition>) -> Vec<(Transition, Ticket)> {
        aborts
            .into_iter()
            .map(|t| {
                let ticket = self.log.push(
                    [TxnOp::Put {
                        id: t.id.clone(),
                        meta: t.next.clone(),
                    }],
                    true,
                );
                (t, ticket)
            })
            .collect()
    }

    /// Waits for pushed aborts in the background, then writes their markers.
    fn settle_fenced(self: &Arc<Self>, due: Vec<(Transition, Ticket)>) {
        for (t, ticket) in due {
            let this = self.clone();
            drop(tokio::spawn(async move {
                if this.settle(&t, ticket).await.is_ok() {
                    tracing::info!(transactional_id = %t.id, epoch = t.next.producer_epoch, "transaction aborted, producer fenced");
                    this.finish_or_retry_later(&t.id).await;
                }
            }));
        }
    }

    /// Finishes a decided transaction now, or leaves it to a background retry loop.
    async fn finish_or_retry_later(self: &Arc<Self>, id: &str) {
        if let Err(e) = self.finish(id).await {
            tracing::warn!(transactional_id = id, error = %e, "transaction markers not written yet; retrying in the background");
            drop(tokio::spawn(finish_until_done(
                Arc::downgrade(self),
                id.to_string(),
            )));
        }
    }

    /// Markers, group offsets and completion of a transaction in PrepareCommit or
    /// PrepareAbort (a no-op for any other state). Every step may be repeated.
    async fn finish(&self, id: &str) -> Result<(), String> {
        let Some(meta) = self.get(id) else {
            return Ok(());
        };
        if !meta.state.is_prepared() {
            return Ok(());
        }
        let commit = meta.state == TxnState::PrepareCommit;
        write_markers(
            &self.broker,
            &meta.partitions,
            meta.producer_id,
            meta.producer_epoch,
            commit,
        )
        .await
        .map_err(|e| format!("markers: {e}"))?;
        if commit {
            self.commit_offsets(&meta.offsets)
                .await
                .map_err(|e| format!("offsets: {e}"))?;
        }
        let now = now_ms();
        self.transit_stored(false, |s| Ok(s.complete(id, now)))
            .await
            .map(|_| ())
            .map_err(|e| format!("completion: {e}"))
    }

    /// Hands the offsets of a committed transaction to their groups.
    async fn commit_offsets(&self, offsets: &[PendingOffset]) -> Result<(), GroupError> {
        let mut by_group: std::collections::BTreeMap<&str, Vec<OffsetCommit>> = Default::default();
        for o in offsets {
            by_group.entry(&o.group).or_default().push(OffsetCommit {
                topic: o.topic.clone(),
                partition: o.partition,
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: o.metadata.clone(),
            });
        }
        for (group, offsets) in by_group {
            self.groups.commit_txn_offsets(group, offsets).await?;
        }
        Ok(())
    }

    /// The metadata of one transactional id (DescribeTransactions).
    pub fn get(&self, id: &str) -> Option<TxnMetadata> {
        self.state.lock().get(id).cloned()
    }

    /// ListTransactions.
    pub fn list(
        &self,
        states: &[TxnState],
        producer_ids: &[i64],
        min_duration_ms: i64,
        id_matches: impl Fn(&str) -> bool,
    ) -> Vec<TxnListing> {
        self.state
            .lock()
            .list(states, producer_ids, min_duration_ms, now_ms(), id_matches)
    }

    /// Whether a transaction holds an uncommitted offset for this group's partition.
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.state
            .lock()
            .has_pending_offset(group, topic, partition)
    }

    /// Aborts the timed-out transactions and forgets expired ids now; returns how long
    /// until the next deadline (for the timer task, and for tests).
    pub async fn tick(self: &Arc<Self>) -> Option<Duration> {
        let now = now_ms();
        // Everything is pushed under the lock, so that the log orders these changes
        // with any request's (a tombstone pushed later could otherwise land after a new
        // producer's first record for the same id and erase it on replay).
        let due: Vec<(Transition, Ticket)> = {
            let mut state = self.state.lock();
            let expired = state.expire(now);
            if !expired.is_empty() {
                tracing::info!(count = expired.len(), "transactional ids expired");
                let tombstones = expired.into_iter().map(|id| TxnOp::Remove { id });
                drop(self.log.push(tombstones, false));
            }
            let timed_out = state.timed_out(now);
            for t in &timed_out {
                tracing::info!(transactional_id = %t.id, "transaction timed out");
            }
            self.push_fenced(timed_out)
        };
        self.settle_fenced(due);
        let next = self.state.lock().next_deadline()?;
        Some(Duration::from_millis(
            u64::try_from(next.saturating_sub(now_ms())).unwrap_or(0),
        ))
    }
}

/// Retries [`TransactionCoordinator::finish`] with a growing pause until it succeeds or
/// the coordinator is gone.
async fn finish_until_done(coordinator: Weak<TransactionCoordinator>, id: String) {
    let mut pause = FIRST_RETRY;
    loop {
        let Some(c) = coordinator.upgrade() else {
            return;
        };
        match c.finish(&id).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(transactional_id = %id, error = %e, "could not complete transaction; retrying");
            }
        }
        drop(c);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_RETRY);
    }
}

/// Sleeps until the next deadline (or until a change moved it), then ticks.
async fn run_timer(coordinator: Weak<TransactionCoordinator>, wake: Arc<Notify>) {
    loop {
        let notified = wake.notified();
        let wait = match coordinator.upgrade() {
            Some(c) => c.tick().await,
            None => return,
        };
        let wait = wait.map_or(IDLE_TICK, |w| w.min(IDLE_TICK));
        let _ = tokio::time::timeout(wait, notified).await;
    }
}
