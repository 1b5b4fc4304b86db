//! The one engine behind the core's internal logs (producer ids, queue state, group
//! offsets, transactions, ACLs, users): a single-partition log
//! `DATA/__nagare_<name>-0` holding a stream of operations on some state.
//!
//! - **Replay on open.** [`InternalLog::open`] reads the whole log through
//!   [`Partition::records_from`] (so it shares that reader's corrupt-batch policy) and
//!   applies every operation to a fresh state, which it returns. Records this version
//!   cannot decode are skipped with a warning. Blocking.
//! - **An ordered, bounded writer.** [`InternalLog::push`] queues operations without
//!   waiting, in the order of the calls (so a caller holding its own state lock logs
//!   changes in the order it made them) and returns a [`Ticket`] that resolves once they
//!   are appended, and fsynced if asked. One background task, [`InternalLogWriter::run`],
//!   which the opener starts, appends everything queued at that moment as one batch and
//!   covers every durable waiter with one fsync (group commit). Callers that may wait
//!   call [`InternalLog::reserve`] first, which waits while more than
//!   `MAX_QUEUED_OPS` operations are queued.
//! - **Keyed, compacted by the log cleaner.** Every record is keyed by the entity it
//!   describes and holds its whole state, a null value deleting it, so the latest record
//!   of every key is the state: the log is compacted by the topics' log cleaner
//!   (`nagare_log::cleaner`). The writer rolls the active segment and runs cleaner
//!   passes (a small offset map, several passes if needed) once `COMPACT_MIN_RECORDS`
//!   (20,000 unless the op type says otherwise) and more than twice the live keys were
//!   appended since the last one; a crash mid-clean is recovered by the log itself.
//!   Every op type is keyed so:
//!   - producer ids (`producers.rs`): by producer id, the value its current epoch (the
//!     next id is the largest + 1);
//!   - group metadata and committed offsets (`groups/persist.rs`): by group, and by
//!     group and partition, like Kafka's `__consumer_offsets`; deleting a group writes a
//!     tombstone per committed offset and one for the group;
//!   - queue state (`queues/persist.rs`): by queue, the value its whole acknowledgement
//!     state (floor, acknowledged ranges above it, delivered mark);
//!   - transactions (`transactions/persist.rs`): by transactional id;
//!   - ACLs (`security/acl.rs`): by the whole binding, present = exists;
//!   - users (`security/users.rs`): by user and mechanism; forward secrets by user.
//! - **Coalesced appends.** Of the operations one append takes from the queue, only the
//!   last of each key is written (the others are applied to the state all the same):
//!   it supersedes them, so a fast writer of one key (a queue's acknowledgements) costs
//!   one record per append, not one per change. The writer encodes it against its copy
//!   of the state ([`InternalOp::encode_in`]), so an operation may be a small change
//!   (some acknowledged offsets) and its record still the key's whole state.
//! - **Migration of earlier formats.** Earlier versions wrote records that are not the
//!   latest state of their key (queue acknowledgement deltas, one key for every producer
//!   id, one ACL binding added or removed per resource name...). An op type reads them in
//!   [`InternalOp::replay`] and says [`Replayed::Legacy`]; the writer then first appends
//!   a full keyed snapshot of the replayed state, fsyncs it, and only then drops every
//!   record before it, so the cleaner never meets an old-format record (which it could
//!   otherwise resurrect, or keep in place of the state). A crash in between replays the
//!   old records and then the snapshot, which gives the same state, and migrates again.
//!   No cleaning happens before the migration succeeded.
//!
//! An operation type says how it is stored and what it does: [`InternalOp`].

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use nagare_log::batch::{NewRecord, Record};
use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};

use crate::blocking::off_runtime;
use crate::{AckLevel, Broker, CoreError, Partition};

/// Records per append at most (and per migration snapshot batch).
const MAX_RECORDS_PER_APPEND: usize = 4096;
/// Operations queued beyond which [`InternalLog::reserve`] waits.
const MAX_QUEUED_OPS: usize = 65_536;
/// Cleaning needs more than this many times the live keys appended since the last
/// clean (and more than the op type's `COMPACT_MIN_RECORDS`).
const COMPACT_RATIO: i64 = 2;
/// How often an idle writer looks whether its log was dropped.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// One kind of change of an internal log's state. Its records are keyed by the entity
/// they describe and hold that entity's whole state (a null value deleting it): the
/// latest record of every key is the state, which is what the log cleaner keeps.
pub trait InternalOp: Sized + Send + 'static {
    /// What the operations build: replayed on open, snapshotted on migration.
    type State: Default + Clone + Send + 'static;
    /// No cleaning until this many records were appended since the last (optional).
    const COMPACT_MIN_RECORDS: i64 = 20_000;

    /// The key of the record storing this operation (what [`encode`](Self::encode)
    /// would put there; asked first so superseded operations are never encoded).
    fn key(&self) -> Bytes;
    /// The record storing this operation.
    fn encode(&self, timestamp: i64) -> NewRecord;
    /// The record storing this operation, given the state it is applied to: what the
    /// writer calls. The default is [`encode`](Self::encode); an op type whose
    /// operations are changes to their key's state rather than that whole state (a
    /// queue's acknowledgements) overrides it to write the key's state after the change.
    fn encode_in(&self, state: &Self::State, timestamp: i64) -> NewRecord {
        let _ = state;
        self.encode(timestamp)
    }
    /// The operation a stored record holds; `None` for one this version cannot read.
    fn decode(record: &Record) -> Option<Self>;
    /// Applies the operation to `state`. It may only change the state of its key.
    fn apply(self, state: &mut Self::State);
    /// Operations that rebuild `state` from the default one, one per live key.
    fn snapshot(state: &Self::State) -> Vec<Self>;

    /// Applies one stored record on open. Op types whose earlier versions wrote records
    /// in another format override this to read those too and answer
    /// [`Replayed::Legacy`] for them (see the module docs).
    fn replay(record: &Record, state: &mut Self::State) -> Replayed {
        match Self::decode(record) {
            Some(op) => {
                op.apply(state);
                Replayed::Current
            }
            None => Replayed::Unreadable,
        }
    }
}

/// What [`InternalOp::replay`] made of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replayed {
    /// Applied; in the current keyed format.
    Current,
    /// Applied; written by an earlier version in a format the cleaner must not see:
    /// the log is rewritten as a snapshot before any cleaning.
    Legacy,
    /// Not readable by this version: skipped.
    Unreadable,
}

/// What [`InternalLog::open`] returns: the handle, the replayed state and the writer.
pub type Opened<O> = (
    Arc<InternalLog<O>>,
    <O as InternalOp>::State,
    InternalLogWriter<O>,
);

/// Handle to an open internal log: queue operations, wait for them.
pub struct InternalLog<O: InternalOp> {
    partition: Arc<Partition>,
    queue: Mutex<Queued<O>>,
    /// Wakes the writer.
    wake: Arc<Notify>,
    /// The writer is gone (never run, or ended): pushes fail at once instead of waiting.
    closed: AtomicBool,
    /// Wakes callers of `reserve` when the queue shrinks.
    room: Notify,
}

/// Who waits for a push to be written (and, if durable, fsynced).
type Waiter = oneshot::Sender<Result<(), CoreError>>;

struct Queued<O> {
    ops: Vec<O>,
    waiters: Vec<Waiter>,
    durable: bool,
}

impl<O> Default for Queued<O> {
    fn default() -> Self {
        Queued {
            ops: Vec::new(),
            waiters: Vec::new(),
            durable: false,
        }
    }
}

/// Resolves once the operations of one [`InternalLog::push`] are stored.
#[must_use = "a ticket says when the operations are stored"]
pub struct Ticket(oneshot::Receiver<Result<(), CoreError>>);

impl Ticket {
    /// A ticket for nothing to store.
    pub fn ready() -> Ticket {
        let (tx, rx) = oneshot::channel();
        let _ = tx.send(Ok(()));
        Ticket(rx)
    }

    pub async fn stored(self) -> Result<(), CoreError> {
        self.0.await.unwrap_or(Err(CoreError::ShuttingDown))
    }
}

/// The background task of an internal log; [`run`](Self::run) it on the runtime. It ends
/// when every [`InternalLog`] handle is dropped.
#[must_use = "nothing is written to the internal log until the writer runs"]
pub struct InternalLogWriter<O: InternalOp> {
    log: Weak<InternalLog<O>>,
    partition: Arc<Partition>,
    name: String,
    state: O::State,
    /// Records appended since the last clean below which cleaning is not worth checking.
    next_check: i64,
    /// The log holds records in an earlier format: rewrite it as a snapshot first.
    migrate: bool,
    /// The log end when the cleaner last ran, and its offset map (kept between passes so
    /// it is allocated once).
    cleaned_at: i64,
    cleaner: Option<nagare_log::cleaner::Cleaner>,
}

impl<O: InternalOp> InternalLog<O> {
    /// Opens the internal log `name` and replays it (its writer migrates a log written in
    /// an earlier format, and cleans one that is mostly superseded). Blocking. Returns
    /// the handle, the replayed state and the writer task for the caller to run.
    pub fn open(broker: &Broker, name: &str) -> Result<Opened<O>, CoreError> {
        let partition = broker.internal_log(name)?;
        off_runtime(|| {
            let mut state = O::State::default();
            let mut skipped = 0usize;
            let mut legacy = 0usize;
            partition.replay_records(|r| {
                match O::replay(&r, &mut state) {
                    Replayed::Current => {}
                    Replayed::Legacy => legacy += 1,
                    Replayed::Unreadable => skipped += 1,
                }
                Ok(())
            })?;
            if legacy > 0 {
                tracing::info!(
                    log = name,
                    legacy,
                    "internal log holds records of an earlier format; it is rewritten"
                );
            }
            if skipped > 0 {
                tracing::warn!(
                    log = name,
                    skipped,
                    "skipped unreadable internal log records"
                );
            }
            let log = Arc::new(InternalLog {
                partition: partition.clone(),
                queue: Mutex::new(Queued::default()),
                wake: Arc::new(Notify::new()),
                closed: AtomicBool::new(false),
                room: Notify::new(),
            });
            let writer = InternalLogWriter {
                log: Arc::downgrade(&log),
                partition,
                name: name.to_string(),
                state: state.clone(),
                // The first round looks at once: the replayed log may be mostly history.
                next_check: 0,
                migrate: legacy > 0,
                cleaned_at: 0,
                cleaner: None,
            };
            Ok((log, state, writer))
        })
    }

    /// Queues `ops` to be appended after everything queued before; never waits. With
    /// `durable`, the ticket resolves only once they are fsynced.
    pub fn push(&self, ops: impl IntoIterator<Item = O>, durable: bool) -> Ticket {
        let (tx, rx) = oneshot::channel();
        if let Err(Some(tx)) = self.enqueue(ops, Some(tx), durable) {
            let _ = tx.send(Err(CoreError::ShuttingDown));
        }
        Ticket(rx)
    }

    /// [`InternalLog::push`] for ops nobody waits for (not durable): no ticket, so no
    /// channel allocated per push (queues push after every dispatch round).
    pub fn push_detached(&self, ops: impl IntoIterator<Item = O>) {
        // A closed log drops them, as `push` does (its ticket then says so).
        let _ = self.enqueue(ops, None, false);
    }

    /// Adds `ops` (and their waiter) to the queue and wakes the writer; hands the waiter
    /// back when the log is closed.
    fn enqueue(
        &self,
        ops: impl IntoIterator<Item = O>,
        waiter: Option<Waiter>,
        durable: bool,
    ) -> Result<(), Option<Waiter>> {
        let mut q = self.queue.lock();
        if self.closed.load(Ordering::Acquire) {
            return Err(waiter);
        }
        q.ops.extend(ops);
        q.waiters.extend(waiter);
        q.durable |= durable;
        drop(q);
        self.wake.notify_one();
        Ok(())
    }

    /// Waits while the writer is far behind (more than `MAX_QUEUED_OPS` queued): what
    /// keeps the queue bounded for callers that can wait before they push.
    pub async fn reserve(&self) {
        loop {
            let notified = self.room.notified();
            if self.queue.lock().ops.len() < MAX_QUEUED_OPS {
                return;
            }
            notified.await;
        }
    }

    /// Waits until everything pushed so far is appended and fsynced (on shutdown).
    pub async fn flush(&self) -> Result<(), CoreError> {
        self.push(std::iter::empty(), true).stored().await
    }

    /// The log's partition (for tests and metrics).
    pub fn partition(&self) -> &Arc<Partition> {
        &self.partition
    }
}

impl<O: InternalOp> InternalLogWriter<O> {
    /// Appends queued operations in order until the log handle is dropped; then writes
    /// what is left.
    pub async fn run(mut self) {
        self.maintain().await;
        loop {
            let Some(log) = self.log.upgrade() else {
                return;
            };
            let taken = {
                let mut q = log.queue.lock();
                if q.waiters.is_empty() && q.ops.is_empty() {
                    None
                } else {
                    Some(std::mem::take(&mut *q))
                }
            };
            let Some(Queued {
                ops,
                waiters,
                durable,
            }) = taken
            else {
                let wake = log.wake.clone();
                let notified = wake.notified();
                drop(log);
                // Re-check now and then so that dropping the handle ends the task.
                let _ = tokio::time::timeout(IDLE_CHECK, notified).await;
                continue;
            };
            log.room.notify_waiters();
            let result = self.write(ops, durable).await;
            for w in waiters {
                let _ = w.send(result.as_ref().map(|_| ()).map_err(CoreError::same));
            }
            if let Err(e) = result {
                tracing::error!(log = %self.name, error = %e, "could not write internal log");
            }
            self.maintain().await;
        }
    }

    /// Appends `ops` (a few batches when there are many), only the last one of each key
    /// (it supersedes the others), and applies them all to the copy of the state, then
    /// fsyncs once if asked.
    async fn write(&mut self, ops: Vec<O>, durable: bool) -> Result<(), CoreError> {
        let now = now_ms();
        let last = last_of_each_key(&ops);
        let mut records = Vec::with_capacity(last.len().min(MAX_RECORDS_PER_APPEND));
        let mut result = Ok(());
        let mut end = -1;
        for (i, op) in ops.into_iter().enumerate() {
            if last[i] {
                records.push(op.encode_in(&self.state, now));
            }
            // Applied even if the append fails, as the caller's own state is.
            op.apply(&mut self.state);
            if records.len() == MAX_RECORDS_PER_APPEND {
                self.append(&mut records, &mut end, &mut result).await;
            }
        }
        self.append(&mut records, &mut end, &mut result).await;
        result?;
        if durable && end >= 0 {
            self.partition.sync_to(end).await?;
        } else if durable {
            self.partition
                .sync_to(self.partition.log_end_offset())
                .await?;
        }
        Ok(())
    }

    async fn append(
        &self,
        records: &mut Vec<NewRecord>,
        end: &mut i64,
        result: &mut Result<(), CoreError>,
    ) {
        if records.is_empty() {
            return;
        }
        match self
            .partition
            .append_records(records, AckLevel::Leader)
            .await
        {
            Ok(info) => *end = (*end).max(info.last_offset + 1),
            Err(e) => {
                if result.is_ok() {
                    *result = Err(e);
                }
            }
        }
        records.clear();
    }

    /// Migrates a log of an earlier format, or cleans it when worth it; failures are
    /// logged and retried on the next round (a log still to migrate is never cleaned).
    async fn maintain(&mut self) {
        let result = if self.migrate {
            self.migrate().await
        } else {
            self.clean_if_worth_it().await
        };
        if let Err(e) = result {
            tracing::warn!(log = %self.name, error = %e, "internal log compaction failed; the log stays as it was");
        }
    }

    /// Rewrites the log as one keyed snapshot of the state: appends it, fsyncs it, and
    /// only then drops every record before it. Only this task appends to the log, so
    /// nothing lands between the state snapshotted and its records.
    async fn migrate(&mut self) -> Result<(), CoreError> {
        let before = self.partition.log_start_offset();
        let at = self.partition.log_end_offset();
        let now = now_ms();
        let records: Vec<NewRecord> = O::snapshot(&self.state)
            .iter()
            .map(|op| op.encode_in(&self.state, now))
            .collect();
        for chunk in records.chunks(MAX_RECORDS_PER_APPEND) {
            self.partition
                .append_records(chunk, AckLevel::Leader)
                .await?;
        }
        self.partition
            .sync_to(self.partition.log_end_offset())
            .await?;
        let partition = self.partition.clone();
        tokio::task::spawn_blocking(move || {
            partition
                .log()
                .ok_or(CoreError::ClusterMode("an internal log in the cluster"))?
                .delete_records_before(at)
                .map_err(|e| partition.core_error(e))?;
            partition.publish_end_offset();
            Ok::<(), CoreError>(())
        })
        .await
        .map_err(|_| CoreError::ShuttingDown)??;
        self.migrate = false;
        self.cleaned_at = at;
        tracing::info!(log = %self.name, dropped = at - before, live = records.len(), "internal log rewritten in the keyed format");
        Ok(())
    }

    /// Rolls and cleans the log once enough was appended since the last clean (see the
    /// module docs).
    async fn clean_if_worth_it(&mut self) -> Result<(), CoreError> {
        let end = self.partition.log_end_offset();
        let appended = end - self.cleaned_at;
        if appended < O::COMPACT_MIN_RECORDS.max(self.next_check) {
            return Ok(());
        }
        let live = O::snapshot(&self.state).len() as i64;
        self.next_check = COMPACT_RATIO * live;
        if appended <= self.next_check {
            return Ok(());
        }
        let partition = self.partition.clone();
        let mut cleaner = self
            .cleaner
            .take()
            .unwrap_or_else(|| nagare_log::cleaner::Cleaner::new(INTERNAL_DEDUPE_BYTES, None));
        let (cleaner, result) = tokio::task::spawn_blocking(move || {
            let result = clean_all(&partition, &mut cleaner);
            (cleaner, result)
        })
        .await
        .map_err(|_| CoreError::ShuttingDown)?;
        self.cleaner = Some(cleaner);
        let removed = result?;
        self.cleaned_at = end;
        tracing::info!(log = %self.name, removed, live, "internal log cleaned");
        Ok(())
    }
}

/// For each of `ops`, whether no later one has its key.
fn last_of_each_key<O: InternalOp>(ops: &[O]) -> Vec<bool> {
    let mut seen: HashSet<Bytes> = HashSet::with_capacity(ops.len());
    let mut last = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate().rev() {
        last[i] = seen.insert(op.key());
    }
    last
}

impl<O: InternalOp> Drop for InternalLogWriter<O> {
    /// Whatever is still queued will never be written: its waiters are told so, and
    /// later pushes fail at once.
    fn drop(&mut self) {
        if let Some(log) = self.log.upgrade() {
            let mut q = log.queue.lock();
            log.closed.store(true, Ordering::Release);
            for w in std::mem::take(&mut q.waiters) {
                let _ = w.send(Err(CoreError::ShuttingDown));
            }
        }
    }
}

/// Offset map memory of an internal log's cleaner: 40,000 keys a pass.
const INTERNAL_DEDUPE_BYTES: usize = 1 << 20;

/// Rolls an internal log and cleans it completely (as many passes as the map needs);
/// returns the records removed. Tombstones go on the pass after the one that reached
/// them: every older record of their key is gone by then, so replay loses nothing.
fn clean_all(
    partition: &Partition,
    cleaner: &mut nagare_log::cleaner::Cleaner,
) -> Result<u64, CoreError> {
    let log = partition
        .log()
        .ok_or(CoreError::ClusterMode("an internal log in the cluster"))?;
    let config = nagare_log::cleaner::CompactionConfig {
        delete_retention_ms: 0,
        min_cleanable_dirty_ratio: 0.0,
        ..Default::default()
    };
    log.roll_for_cleaning()
        .map_err(|e| partition.core_error(e))?;
    let mut removed = 0;
    loop {
        let stats = log
            .clean(cleaner, &config, now_ms())
            .map_err(|e| partition.core_error(e))?;
        removed += stats.records_removed;
        if !stats.map_full {
            return Ok(removed);
        }
    }
}

pub(crate) use nagare_log::now_ms;

/// What the op types' tests need to check their records against the cleaner and the
/// migration: a full clean now, and records of an earlier format written as they were.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// Cleans the internal log `name` completely, as its writer does. Tombstones go on
    /// the first clean with something new to clean after the one that reached them.
    pub(crate) fn clean_now(broker: &Broker, name: &str) {
        let partition = broker.internal_log(name).expect("internal log");
        let mut cleaner = nagare_log::cleaner::Cleaner::new(INTERNAL_DEDUPE_BYTES, None);
        clean_all(&partition, &mut cleaner).expect("clean");
    }

    /// Appends `records` to the internal log `name` as they are, fsynced (an earlier
    /// version's log). Blocking: runs its own small runtime on a plain thread.
    pub(crate) fn append_raw(broker: &Arc<Broker>, name: &str, records: Vec<NewRecord>) {
        let broker = broker.clone();
        let name = name.to_string();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let p = broker.internal_log(&name).expect("internal log");
                p.append_records(&records, AckLevel::Leader)
                    .await
                    .expect("append");
                p.sync_to(p.log_end_offset()).await.expect("sync");
            });
        })
        .join()
        .expect("append thread");
    }

    /// Every record of the internal log `name`.
    pub(crate) fn records(broker: &Broker, name: &str) -> Vec<Record> {
        partition_records(&broker.internal_log(name).expect("internal log"))
    }

    /// Every record of an internal log's partition.
    pub(crate) fn partition_records(p: &Partition) -> Vec<Record> {
        let mut out = Vec::new();
        let mut offset = p.log_start_offset();
        while offset < p.log_end_offset() {
            let r = p.records_from(offset, 1 << 20).expect("read");
            out.extend(r.records);
            offset = r.next_offset;
        }
        out
    }

    /// A keyed record with a JSON or text value (`None`: a tombstone).
    pub(crate) fn raw(key: &str, value: Option<&str>) -> NewRecord {
        NewRecord {
            key: Some(Bytes::copy_from_slice(key.as_bytes())),
            value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: Vec::new(),
            timestamp: 0,
        }
    }
}

#[cfg(test)]
#[path = "internal_log_tests.rs"]
mod tests;
