//! The pure state machine of the transaction coordinator: Kafka's transaction version 1
//! rules, one transactional id at a time.
//!
//! Every request that changes an id returns a [`Transition`] (its next metadata) and marks
//! the id *pending*: until the driver stores the transition ([`Transactions::stored`]) or
//! gives it up ([`Transactions::abandon`]), any other request on that id is answered
//! CONCURRENT_TRANSACTIONS, which clients retry. So the stored log and the state never
//! disagree, and two requests never race on one id.

use std::collections::BTreeMap;

use super::persist::StoredTransactions;
use super::{epoch_exhausted, PendingOffset, TransactionConfig, TxnError, TxnMetadata, TxnState};

/// The next metadata of one transactional id, to be stored before it takes effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub id: String,
    pub next: TxnMetadata,
}

/// What InitProducerId does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitStep {
    /// Store this; then answer its producer id and epoch.
    Store(Transition),
    /// The id had a transaction open: store this abort (epoch bumped, fencing the old
    /// producer), write its markers, and answer CONCURRENT_TRANSACTIONS so that the
    /// client retries (and bumps the epoch once more), as Kafka does.
    FenceOngoing(Transition),
    /// A new producer id is needed (new transactional id, or epochs exhausted): ask
    /// again with one.
    NeedProducerId,
}

/// One line of ListTransactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnListing {
    pub id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

#[derive(Debug)]
struct Entry {
    meta: TxnMetadata,
    /// A transition was handed out and is not stored yet. (A fence that could not be
    /// stored leaves `meta` as it was, so the next attempt bumps to the same epoch:
    /// what Kafka's `hasFailedEpochFence` achieves.)
    pending: bool,
}

/// Every transactional id of this coordinator.
#[derive(Debug, Default)]
pub struct Transactions {
    config: TransactionConfig,
    txns: BTreeMap<String, Entry>,
}

impl Transactions {
    pub fn new(config: TransactionConfig, stored: StoredTransactions) -> Transactions {
        let txns = stored
            .into_iter()
            .map(|(id, meta)| {
                let entry = Entry {
                    meta,
                    pending: false,
                };
                (id, entry)
            })
            .collect();
        Transactions { config, txns }
    }

    pub fn config(&self) -> &TransactionConfig {
        &self.config
    }

    pub fn len(&self) -> usize {
        self.txns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Whether InitProducerId of `id` will need a fresh producer id (it is unknown, or
    /// its epochs are used up). The driver allocates one before asking, outside the lock.
    pub fn needs_producer_id(&self, id: &str) -> bool {
        match self.txns.get(id) {
            None => true,
            Some(e) => epoch_exhausted(e.meta.producer_epoch),
        }
    }

    /// InitProducerId with a transactional id: a new id gets a producer id at epoch 0;
    /// a known one gets its epoch bumped (fencing the previous producer), after aborting
    /// its open transaction. `expected` is the producer id and epoch the client has
    /// (KIP-360, to recover from an abortable error without being fenced).
    pub fn init_producer_id(
        &mut self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        fresh_producer_id: Option<i64>,
        now: i64,
    ) -> Result<InitStep, TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id"));
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout(timeout_ms));
        }
        if !self.txns.contains_key(id) {
            let Some(producer_id) = fresh_producer_id else {
                return Ok(InitStep::NeedProducerId);
            };
            // A placeholder at epoch -1, as Kafka creates it; it is stored only with the
            // transition below (and dropped if that fails).
            let meta = TxnMetadata {
                producer_id,
                last_producer_id: -1,
                producer_epoch: -1,
                last_producer_epoch: -1,
                timeout_ms,
                state: TxnState::Empty,
                partitions: Default::default(),
                groups: Default::default(),
                offsets: Vec::new(),
                start_ms: -1,
                last_update_ms: now,
            };
            let entry = Entry {
                meta,
                pending: false,
            };
            self.txns.insert(id.to_string(), entry);
        }
        let Some(entry) = self.txns.get_mut(id) else {
            return Err(TxnError::CoordinatorNotAvailable);
        };
        if entry.pending {
            return Err(TxnError::ConcurrentTransactions);
        }
        let meta = &entry.meta;
        if let Some((pid, epoch)) = expected {
            // Kafka's isValidProducerId: a brand-new id, the current producer id, or the
            // previous one with its epochs used up (a retry after a rotation).
            let valid = meta.producer_epoch == -1
                || pid == meta.producer_id
                || (pid == meta.last_producer_id && epoch_exhausted(epoch));
            if !valid {
                return Err(TxnError::ProducerFenced);
            }
        }
        let step = match meta.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut next = meta.clone();
                next.state = TxnState::Empty;
                next.timeout_ms = timeout_ms;
                next.partitions.clear();
                next.groups.clear();
                next.offsets.clear();
                next.start_ms = -1;
                next.last_update_ms = now;
                if epoch_exhausted(meta.producer_epoch)
                    && expected.is_none_or(|(_, e)| e == meta.producer_epoch)
                {
                    let Some(producer_id) = fresh_producer_id else {
                        return Ok(InitStep::NeedProducerId);
                    };
                    next.last_producer_id = meta.producer_id;
                    next.producer_id = producer_id;
                    next.producer_epoch = 0;
                    next.last_producer_epoch = if expected.is_some() {
                        meta.producer_epoch
                    } else {
                        -1
                    };
                } else {
                    let bumped = meta.producer_epoch.saturating_add(1);
                    let (epoch, last) = match expected {
                        None => (bumped, -1),
                        Some((_, e)) if meta.producer_epoch == -1 || e == meta.producer_epoch => {
                            (bumped, meta.producer_epoch)
                        }
                        // A retry of a bump that succeeded: the same answer again.
                        Some((_, e)) if e == meta.last_producer_epoch => {
                            (meta.producer_epoch, meta.last_producer_epoch)
                        }
                        Some(_) => return Err(TxnError::ProducerFenced),
                    };
                    next.producer_epoch = epoch;
                    next.last_producer_epoch = last;
                }
                InitStep::Store(Transition {
                    id: id.to_string(),
                    next,
                })
            }
            TxnState::Ongoing => InitStep::FenceOngoing(Transition {
                id: id.to_string(),
                next: fence(entry, now),
            }),
            TxnState::Dead | TxnState::PrepareEpochFence => return Err(TxnError::InvalidTxnState),
        };
        entry.pending = true;
        Ok(step)
    }

    /// AddPartitionsToTxn: the partitions join the transaction (starting it if none is
    /// open). `None` when they all are in it already (nothing to store).
    pub fn add_partitions(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        now: i64,
    ) -> Result<Option<Transition>, TxnError> {
        let entry = self.open_entry(id, producer_id, epoch)?;
        let meta = &entry.meta;
        if meta.state == TxnState::Ongoing && partitions.iter().all(|p| meta.partitions.contains(p))
        {
            return Ok(None);
        }
        let mut next = begin(meta, now);
        next.partitions.extend(partitions.iter().cloned());
        entry.pending = true;
        Ok(Some(Transition {
            id: id.to_string(),
            next,
        }))
    }

    /// AddOffsetsToTxn: the group's offsets may be committed in the transaction.
    pub fn add_offsets(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        now: i64,
    ) -> Result<Option<Transition>, TxnError> {
        let entry = self.open_entry(id, producer_id, epoch)?;
        let meta = &entry.meta;
        if meta.state == TxnState::Ongoing && meta.groups.contains(group) {
            return Ok(None);
        }
        let mut next = begin(meta, now);
        next.groups.insert(group.to_string());
        entry.pending = true;
        Ok(Some(Transition {
            id: id.to_string(),
            next,
        }))
    }

    /// TxnOffsetCommit: offsets held by the transaction until it ends (committed to the
    /// group on commit, dropped on abort). The group must have been added first.
    pub fn txn_offset_commit(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        offsets: Vec<PendingOffset>,
        now: i64,
    ) -> Result<Transition, TxnError> {
        let entry = self.open_entry(id, producer_id, epoch)?;
        let meta = &entry.meta;
        if meta.state != TxnState::Ongoing || !meta.groups.contains(group) {
            return Err(TxnError::TransactionAbortable);
        }
        let mut next = meta.clone();
        for o in offsets {
            next.offsets.retain(|p| {
                !(p.group == o.group && p.topic == o.topic && p.partition == o.partition)
            });
            next.offsets.push(o);
        }
        next.last_update_ms = now;
        entry.pending = true;
        Ok(Transition {
            id: id.to_string(),
            next,
        })
    }

    /// KIP-890 verification (AddPartitionsToTxn v4+ `verify_only`): whether each
    /// partition is in the open transaction of this producer. Changes nothing.
    pub fn verify_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, TxnError> {
        let meta = &self
            .txns
            .get(id)
            .ok_or(TxnError::InvalidProducerIdMapping)?
            .meta;
        if meta.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if meta.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced);
        }
        if meta.state.is_prepared() {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|p| meta.partitions.contains(p))
            .collect())
    }

    /// EndTxn from the client: the decision (PrepareCommit or PrepareAbort) to store.
    /// `None` for a retry of an end that already completed the same way.
    pub fn end_txn(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now: i64,
    ) -> Result<Option<Transition>, TxnError> {
        let entry = self
            .txns
            .get_mut(id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        let meta = &entry.meta;
        if meta.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if meta.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced);
        }
        if entry.pending {
            return Err(TxnError::ConcurrentTransactions);
        }
        let next_state = match (meta.state, commit) {
            (TxnState::Ongoing, true) => TxnState::PrepareCommit,
            (TxnState::Ongoing, false) => TxnState::PrepareAbort,
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => return Ok(None),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                return Err(TxnError::ConcurrentTransactions)
            }
            _ => return Err(TxnError::InvalidTxnState),
        };
        let mut next = meta.clone();
        next.state = next_state;
        next.last_update_ms = now;
        entry.pending = true;
        Ok(Some(Transition {
            id: id.to_string(),
            next,
        }))
    }

    /// Once the markers are written (and, on commit, the offsets handed to the groups):
    /// CompleteCommit or CompleteAbort, with the transaction's partitions cleared.
    pub fn complete(&mut self, id: &str, now: i64) -> Option<Transition> {
        let entry = self.txns.get_mut(id)?;
        if entry.pending || !entry.meta.state.is_prepared() {
            return None;
        }
        let mut next = entry.meta.clone();
        next.state = if next.state == TxnState::PrepareCommit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        next.partitions.clear();
        next.groups.clear();
        next.offsets.clear();
        next.last_update_ms = now;
        entry.pending = true;
        Some(Transition {
            id: id.to_string(),
            next,
        })
    }

    /// Open transactions past their timeout: each is aborted with its epoch bumped, so
    /// that its producer is fenced (Kafka's `abortTimedOutTransactions`).
    pub fn timed_out(&mut self, now: i64) -> Vec<Transition> {
        self.fence_where(now, |meta| meta.deadline_ms().is_some_and(|d| d <= now))
    }

    /// Every open transaction, aborted with its epoch bumped: after a crash, records of an
    /// open transaction were acknowledged without an fsync (they are made durable when it
    /// commits) and may be gone, so the transaction cannot go on.
    pub fn abort_open(&mut self, now: i64) -> Vec<Transition> {
        self.fence_where(now, |meta| meta.state == TxnState::Ongoing)
    }

    fn fence_where(&mut self, now: i64, due: impl Fn(&TxnMetadata) -> bool) -> Vec<Transition> {
        let mut out = Vec::new();
        for (id, entry) in self.txns.iter_mut() {
            if due(&entry.meta) && !entry.pending {
                let next = fence(entry, now);
                entry.pending = true;
                out.push(Transition {
                    id: id.clone(),
                    next,
                });
            }
        }
        out
    }

    /// Ids with no transaction in progress and unused for `transactional.id.expiration.ms`:
    /// forgotten now; the caller stores their tombstones.
    pub fn expire(&mut self, now: i64) -> Vec<String> {
        let expiration = self.config.id_expiration_ms;
        let expired: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, e)| {
                !e.pending
                    && is_idle(e.meta.state)
                    && e.meta.last_update_ms.saturating_add(expiration) <= now
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            self.txns.remove(id);
        }
        expired
    }

    /// The transition is stored: it takes effect.
    pub fn stored(&mut self, t: Transition) {
        if let Some(entry) = self.txns.get_mut(&t.id) {
            entry.meta = t.next;
            entry.pending = false;
        }
    }

    /// The transition could not be stored: the id stays as it was.
    pub fn abandon(&mut self, t: &Transition) {
        let Some(entry) = self.txns.get_mut(&t.id) else {
            return;
        };
        entry.pending = false;
        if entry.meta.producer_epoch == -1 {
            // The placeholder of a new id: nothing of it was ever stored.
            self.txns.remove(&t.id);
        }
    }

    pub fn get(&self, id: &str) -> Option<&TxnMetadata> {
        self.txns.get(id).map(|e| &e.meta)
    }

    /// Decided transactions whose markers are not all written (after a restart, or a
    /// failed marker write).
    pub fn prepared(&self) -> Vec<String> {
        self.txns
            .iter()
            .filter(|(_, e)| !e.pending && e.meta.state.is_prepared())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// ListTransactions: ids matching every given filter (an empty filter matches all;
    /// a negative `min_duration_ms` too).
    pub fn list(
        &self,
        states: &[TxnState],
        producer_ids: &[i64],
        min_duration_ms: i64,
        now: i64,
        id_matches: impl Fn(&str) -> bool,
    ) -> Vec<TxnListing> {
        self.txns
            .iter()
            .filter(|(id, e)| {
                let m = &e.meta;
                m.producer_epoch >= 0
                    && (states.is_empty() || states.contains(&m.state))
                    && (producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
                    && (min_duration_ms < 0 || now.saturating_sub(m.start_ms) > min_duration_ms)
                    && id_matches(id)
            })
            .map(|(id, e)| TxnListing {
                id: id.clone(),
                producer_id: e.meta.producer_id,
                state: e.meta.state,
            })
            .collect()
    }

    /// Whether an open or committing transaction holds an offset for this group's
    /// partition (OffsetFetch with `require_stable` then answers UNSTABLE_OFFSET_COMMIT).
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.txns.values().any(|e| {
            matches!(e.meta.state, TxnState::Ongoing | TxnState::PrepareCommit)
                && e.meta
                    .offsets
                    .iter()
                    .any(|o| o.group == group && o.topic == topic && o.partition == partition)
        })
    }

    /// When [`timed_out`](Self::timed_out) or [`expire`](Self::expire) next has
    /// something to do.
    pub fn next_deadline(&self) -> Option<i64> {
        let expiration = self.config.id_expiration_ms;
        self.txns
            .values()
            .filter(|e| !e.pending)
            .filter_map(|e| {
                e.meta.deadline_ms().or_else(|| {
                    is_idle(e.meta.state).then(|| e.meta.last_update_ms.saturating_add(expiration))
                })
            })
            .min()
    }

    /// The checks every request of a producer inside its transaction shares.
    fn open_entry(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
    ) -> Result<&mut Entry, TxnError> {
        if id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id"));
        }
        let entry = self
            .txns
            .get_mut(id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        if entry.meta.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if entry.meta.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced);
        }
        if entry.pending || entry.meta.state.is_prepared() {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(entry)
    }
}

fn is_idle(state: TxnState) -> bool {
    matches!(
        state,
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
    )
}

/// The metadata of a transaction being (re)opened: Ongoing, started now unless it was
/// already open.
fn begin(meta: &TxnMetadata, now: i64) -> TxnMetadata {
    let mut next = meta.clone();
    if meta.state != TxnState::Ongoing {
        next.start_ms = now;
        next.partitions.clear();
        next.groups.clear();
        next.offsets.clear();
    }
    next.state = TxnState::Ongoing;
    next.last_update_ms = now;
    next
}

/// The abort of an open transaction by the coordinator (timeout, or a new producer with
/// the same id): the epoch is bumped so the producer still using the old one is fenced
/// by every partition the abort marker reaches, and by the coordinator.
fn fence(entry: &Entry, now: i64) -> TxnMetadata {
    let mut next = entry.meta.clone();
    next.producer_epoch = next.producer_epoch.saturating_add(1);
    next.last_producer_epoch = -1;
    next.state = TxnState::PrepareAbort;
    next.last_update_ms = now;
    next
}
