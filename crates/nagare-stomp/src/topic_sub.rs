//! A subscription to `/topic/T`: one task per partition follows the log from its start
//! offset, woken by the partition's end-offset watch, and sends every record as a MESSAGE.
//! It reserves room in its connection's outbound budget (and the listener-wide one) before
//! each read and reads only what fits: a subscriber that does not read its socket stops
//! reading the log and falls behind, holding no backlog in memory, and catches up from
//! the log once its socket drains. Producers and other subscribers never wait for it.
//!
//! The same code follows a partition of an external cluster (cluster mode): the core
//! answers these reads from the gateway's window of recent records, or from the
//! cluster, and its end-offset watch wakes the task the same way.

use std::sync::Arc;

use bytes::BytesMut;
use nagare_core::{CoreError, Partition};
use tokio::task::JoinHandle;

use crate::message::MessageHead;
use crate::writer::ConnOut;

/// Bytes read from the log per round at most (less when the budget is smaller).
const READ_BYTES: usize = 256 * 1024;

/// Where a new subscription starts, from the `x-stream-offset` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartAt {
    /// Only messages published from now on (the default).
    Next,
    First,
    Offset(i64),
}

impl StartAt {
    pub(crate) fn parse(v: Option<&str>) -> Option<StartAt> {
        Some(match v {
            None | Some("next") | Some("last") => StartAt::Next,
            Some("first") => StartAt::First,
            Some(n) => StartAt::Offset(n.parse().ok()?),
        })
    }

    fn resolve(self, p: &Partition) -> i64 {
        let (start, end) = (p.log_start_offset(), p.log_end_offset());
        match self {
            // The committed end: records of a transaction still open there come later.
            StartAt::Next => p.last_stable_offset(),
            StartAt::First => start,
            StartAt::Offset(o) => o.clamp(start, end),
        }
    }
}

/// Starts following `partition` from `start`. The offsets are made current first (a
/// cluster's partition asks the cluster), so that `next` means what is appended after
/// the SUBSCRIBE, wherever it is appended.
pub(crate) async fn spawn(
    partition: Arc<Partition>,
    start: StartAt,
    out: ConnOut,
    head: MessageHead,
) -> Result<JoinHandle<()>, CoreError> {
    partition.prepare_read().await?;
    let offset = start.resolve(&partition);
    Ok(tokio::spawn(async move {
        if let Err(e) = follow(partition, offset, out, head).await {
            tracing::warn!(error = %e, "topic subscription stopped");
        }
    }))
}

async fn follow(
    partition: Arc<Partition>,
    mut offset: i64,
    out: ConnOut,
    head: MessageHead,
) -> Result<(), CoreError> {
    let mut changes = partition.subscribe();
    let mut buf = BytesMut::new();
    // Message ids are `topic@partition:offset`: the prefix is written once, and each
    // record only rewrites the offset after it.
    let mut id = format!("{}@{}:", partition.topic(), partition.index());
    let prefix = id.len();
    loop {
        if offset >= partition.log_end_offset() {
            if changes.changed().await.is_err() || out.is_closed() {
                return Ok(());
            }
            continue;
        }
        // Room first, then the read: while the socket is full nothing is read.
        let Some(room) = out.reserve(READ_BYTES).await else {
            return Ok(());
        };
        // Undecodable batches are skipped by the core's reader (one policy for every
        // reader), so a subscription never dies on one bad batch.
        let read = partition.read_records(offset, room.len() as u64).await?;
        // The whole round's frames in one allocation: grown put by put, the buffer was
        // reallocated and copied several times a round, for every subscriber.
        let wanted: usize = read
            .records
            .iter()
            .map(|r| head.frame_size_estimate(prefix + 20, r))
            .sum();
        buf.reserve(wanted);
        for r in &read.records {
            id.truncate(prefix);
            id.push_str(itoa::Buffer::new().format(r.offset));
            head.encode_record(&mut buf, &id, Some(false), None, r);
        }
        if !read.records.is_empty() {
            partition.count_out(read.records.len() as u64, buf.len() as u64);
            crate::meters::messages_sent("topic", read.records.len());
        }
        if !buf.is_empty() && !out.send_reserved(buf.split().freeze(), room) {
            return Ok(());
        }
        if read.next_offset > offset {
            offset = read.next_offset;
        } else if changes.changed().await.is_err() {
            // Nothing readable yet at this offset; wait for the next append.
            return Ok(());
        }
    }
}
