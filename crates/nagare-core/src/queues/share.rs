//! The pull side of a queue, what Kafka share groups (KIP-932) need: a member acquires
//! messages for a while (the acquisition lock), then accepts, releases or rejects each.
//! Acquired messages come from the same `ready` set STOMP consumers are pushed from, so a
//! STOMP consumer and a share-group member compete for one queue, each message going to
//! one of them at a time, and the delivery count is the queue's.

use std::sync::Arc;

use nagare_log::batch::Record;

use super::queue::{Queue, State};

/// The most messages [`Queue::acquire_batches`] hands out at once to finish a batch.
pub(crate) const WHOLE_BATCH_CAP: usize = 16_384;

/// Who holds acquired messages: one share-group member (numbered by the share groups).
pub type Holder = u64;

/// An acquisition lock: who holds the message and until when (ms since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub holder: Holder,
    pub deadline_ms: i64,
}

/// A message acquired by a share-group member.
#[derive(Debug, Clone)]
pub struct Acquired {
    pub offset: i64,
    pub record: Arc<Record>,
    /// 1 the first time it is handed out (to anyone), then one more per delivery.
    pub delivery_count: i16,
}

/// What a member says about an acquired message (Kafka's AcknowledgeType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Processed: never delivered again.
    Accept,
    /// Put back: delivered again (to anyone), unless it reached the delivery limit.
    Release,
    /// Unprocessable: archived, never delivered again.
    Reject,
    /// Still being processed: the acquisition lock starts again (KIP-1222's RENEW).
    Renew,
}

impl Queue {
    /// Acquires up to `max` messages for `holder`, locked until `now_ms + lock_ms`.
    pub fn acquire(&self, holder: Holder, max: usize, now_ms: i64, lock_ms: i64) -> Vec<Acquired> {
        self.acquire_up_to(holder, max, false, now_ms, lock_ms)
    }

    /// [`Queue::acquire`], but `max` is a soft limit: the last record batch it reaches is
    /// acquired whole (at most [`WHOLE_BATCH_CAP`] messages in all), as Kafka's share
    /// fetch does in its default batch-optimized mode. A consumer then needs one fetch per
    /// stored batch rather than one per `max` messages.
    pub fn acquire_batches(
        &self,
        holder: Holder,
        max: usize,
        now_ms: i64,
        lock_ms: i64,
    ) -> Vec<Acquired> {
        self.acquire_up_to(holder, max, true, now_ms, lock_ms)
    }

    fn acquire_up_to(
        &self,
        holder: Holder,
        max: usize,
        whole_batches: bool,
        now_ms: i64,
        lock_ms: i64,
    ) -> Vec<Acquired> {
        let mut st = self.state.lock();
        let mut out: Vec<Acquired> = Vec::new();
        let mut recounted = Vec::new();
        loop {
            if out.len() >= max {
                // Past the limit only to finish the batch of the last message, and only
                // with the next message of that batch already at hand.
                let Some(last) = out.last().map(|a| a.offset) else {
                    break;
                };
                let batch_goes_on = whole_batches
                    && out.len() < WHOLE_BATCH_CAP
                    && !st.batch_ends.contains(&last)
                    && st
                        .ready
                        .first_key_value()
                        .is_some_and(|(&o, _)| o == last + 1);
                if !batch_goes_on {
                    break;
                }
            }
            if st.ready.is_empty() && !self.refill(&mut st) {
                break;
            }
            let Some((offset, (record, again))) = st.ready.pop_first() else {
                break;
            };
            let count = st.counts.entry(offset).or_insert(i16::from(again));
            *count = count.saturating_add(1);
            let delivery_count = *count;
            if delivery_count >= 2 {
                recounted.push((offset, delivery_count));
            }
            st.in_flight.insert(offset, record.clone());
            st.leases.insert(
                offset,
                Lease {
                    holder,
                    deadline_ms: now_ms.saturating_add(lock_ms),
                },
            );
            out.push(Acquired {
                offset,
                record,
                delivery_count,
            });
        }
        if let Some(mark) = out.iter().map(|a| a.offset + 1).max() {
            self.note_delivered(&mut st, mark);
        }
        // Batch ends below everything still to hand out are of no more use.
        let next = st.ready.first_key_value().map_or(st.next_read, |(&o, _)| o);
        while st.batch_ends.first().is_some_and(|&e| e < next) {
            st.batch_ends.pop_first();
        }
        self.note_counts(recounted);
        out
    }

    /// Settles the messages of `first..=last` that `holder` holds, as `kinds` say (one
    /// kind for the whole range, or one per offset; `None` is a gap: an offset holding
    /// no record, archived). A released message that reached `limit` deliveries is
    /// archived instead; a renewed one stays acquired, locked until `renew_until`.
    /// Returns false if some offset of the range was not held by `holder` (Kafka's
    /// INVALID_RECORD_STATE); the others are settled anyway.
    pub fn settle_acquired(
        &self,
        holder: Holder,
        first: i64,
        last: i64,
        kinds: &[Option<Settle>],
        limit: i16,
        renew_until: i64,
    ) -> bool {
        if last < first || kinds.is_empty() {
            return false;
        }
        let mut st = self.state.lock();
        let mut all_held = true;
        let mut archived = Vec::new();
        let mut released = false;
        for (i, offset) in (first..=last).enumerate() {
            let kind = if kinds.len() == 1 {
                kinds[0]
            } else {
                match kinds.get(i) {
                    Some(k) => *k,
                    None => break,
                }
            };
            let held = st.leases.get(&offset).is_some_and(|l| l.holder == holder);
            if !held {
                // A gap for an offset nobody holds (no record there) is fine.
                if kind.is_some() {
                    all_held = false;
                }
                continue;
            }
            if kind == Some(Settle::Renew) {
                if let Some(l) = st.leases.get_mut(&offset) {
                    l.deadline_ms = renew_until;
                }
                continue;
            }
            st.leases.remove(&offset);
            let Some(record) = st.in_flight.remove(&offset) else {
                continue;
            };
            match kind {
                Some(Settle::Release) if st.counts.get(&offset).copied().unwrap_or(0) < limit => {
                    st.ready.insert(offset, (record, true));
                    released = true;
                }
                _ => archived.push(offset),
            }
        }
        self.mark_acked(&mut st, &archived);
        if released {
            self.pump_locked(&mut st);
        }
        all_held
    }

    /// Puts back every message `holder` holds (the member left or closed its session).
    pub fn release_all(&self, holder: Holder, limit: i16) {
        self.release_where(limit, |l| l.holder == holder);
    }

    /// Puts back messages whose acquisition lock ran out (the member died or is slow).
    pub fn expire_leases(&self, now_ms: i64, limit: i16) {
        self.release_where(limit, |l| l.deadline_ms <= now_ms);
    }

    fn release_where(&self, limit: i16, pred: impl Fn(&Lease) -> bool) {
        let mut st = self.state.lock();
        if st.leases.is_empty() {
            return;
        }
        let gone: Vec<i64> = st
            .leases
            .iter()
            .filter(|(_, l)| pred(l))
            .map(|(&o, _)| o)
            .collect();
        if gone.is_empty() {
            return;
        }
        let archived = release_offsets(&mut st, &gone, limit);
        self.mark_acked(&mut st, &archived);
        self.pump_locked(&mut st);
    }

    /// Waits until messages may be available (new, released or expired ones). Callers
    /// create the future before trying to acquire, so a wake-up in between is not lost.
    pub fn available(&self) -> tokio::sync::futures::Notified<'_> {
        self.available.notified()
    }

    /// The delivery count of an unsettled message (0: never handed out).
    pub fn delivery_count(&self, offset: i64) -> i16 {
        self.state.lock().counts.get(&offset).copied().unwrap_or(0)
    }

    /// Acquired messages per holder, for ShareGroupDescribe-like views and tests.
    pub fn acquired_count(&self) -> usize {
        self.state.lock().leases.len()
    }

    /// The share-group start offset: nothing below it is delivered again.
    pub fn start_offset(&self) -> i64 {
        self.state.lock().acks.floor
    }
}

/// Moves `offsets` from acquired back to ready; returns those past the delivery limit,
/// which are to be archived instead.
fn release_offsets(st: &mut State, offsets: &[i64], limit: i16) -> Vec<i64> {
    let mut archived = Vec::new();
    for &offset in offsets {
        st.leases.remove(&offset);
        let Some(record) = st.in_flight.remove(&offset) else {
            continue;
        };
        if st.counts.get(&offset).copied().unwrap_or(0) >= limit {
            archived.push(offset);
        } else {
            st.ready.insert(offset, (record, true));
        }
    }
    archived
}
