use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use nagare_log::batch::{build_batch, parse_header, NewRecord};
use nagare_log::{AppendInfo, PartitionLog, ReadResult};
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::{CoreError, TopicFlush};

/// How strongly a producer wants its append acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckLevel {
    /// Fire and forget (Kafka `acks=0`): never waits for an fsync, even under `always`.
    None,
    /// Acknowledge once appended (page cache), unless the topic flushes `always`.
    Leader,
    /// The strongest ack (Kafka `acks=all`, a STOMP receipt on a queue, a forward `chunk`):
    /// fsynced before acknowledging unless the topic flushes `never`.
    Durable,
}

/// One partition of a topic: its log, its flush policy and the watch that wakes readers.
pub struct Partition {
    topic: Arc<str>,
    index: i32,
    log: Arc<PartitionLog>,
    flush: RwLock<TopicFlush>,
    max_message_bytes: RwLock<u32>,
    end_offset: watch::Sender<i64>,
}

impl Partition {
    pub(crate) fn new(
        topic: Arc<str>,
        index: i32,
        log: PartitionLog,
        flush: TopicFlush,
        max_message_bytes: u32,
    ) -> Partition {
        let (end_offset, _) = watch::channel(log.log_end_offset());
        Partition {
            topic,
            index,
            log: Arc::new(log),
            flush: RwLock::new(flush),
            max_message_bytes: RwLock::new(max_message_bytes),
            end_offset,
        }
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn index(&self) -> i32 {
        self.index
    }

    pub fn log(&self) -> &Arc<PartitionLog> {
        &self.log
    }

    pub fn flush_policy(&self) -> TopicFlush {
        *self.flush.read()
    }

    pub(crate) fn set_limits(&self, flush: TopicFlush, max_message_bytes: u32) {
        *self.flush.write() = flush;
        *self.max_message_bytes.write() = max_message_bytes;
    }

    /// Validates and appends one Kafka record batch v2, then waits for the fsync the
    /// flush policy and `ack` call for. Readers waiting on this partition are woken.
    pub async fn append(
        &self,
        mut batch: BytesMut,
        ack: AckLevel,
    ) -> Result<AppendInfo, CoreError> {
        let limit = *self.max_message_bytes.read() as usize;
        if batch.len() > limit {
            return Err(CoreError::MessageTooLarge {
                size: batch.len(),
                limit,
            });
        }
        let info = self.log.append(&mut batch)?;
        self.end_offset.send_replace(self.log.log_end_offset());
        if self.needs_sync(ack) {
            self.sync_to(info.last_offset + 1).await?;
        }
        Ok(info)
    }

    /// Builds one batch from plain records (STOMP, forward) and appends it.
    pub async fn append_records(
        &self,
        records: &[NewRecord],
        ack: AckLevel,
    ) -> Result<AppendInfo, CoreError> {
        self.append(build_batch(records), ack).await
    }

    /// Whether an append acknowledged at `ack` must wait for an fsync.
    pub fn needs_sync(&self, ack: AckLevel) -> bool {
        match (self.flush_policy(), ack) {
            (_, AckLevel::None) | (TopicFlush::Never, _) => false,
            (TopicFlush::Always, _) => true,
            (TopicFlush::Acks | TopicFlush::Interval(_), AckLevel::Durable) => true,
            (TopicFlush::Acks | TopicFlush::Interval(_), AckLevel::Leader) => false,
        }
    }

    /// Group commit: waits until every offset below `offset` is on disk. The fsync runs on
    /// the blocking pool; concurrent callers share one fsync.
    pub async fn sync_to(&self, offset: i64) -> Result<(), CoreError> {
        if self.log.flushed_offset() >= offset {
            return Ok(());
        }
        let log = self.log.clone();
        tokio::task::spawn_blocking(move || log.sync_to(offset))
            .await
            .map_err(|_| CoreError::ShuttingDown)??;
        Ok(())
    }

    /// Whole batches from `offset`; see [`PartitionLog::read`].
    pub fn read(&self, offset: i64, max_bytes: u64) -> Result<ReadResult, CoreError> {
        Ok(self.log.read(offset, max_bytes)?)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Single node: everything appended is committed.
    pub fn high_watermark(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// A receiver that changes whenever the log end offset moves.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.end_offset.subscribe()
    }

    /// Waits until the log end offset is beyond `offset` or `timeout` passes; returns
    /// whether data is there.
    pub async fn wait_beyond(&self, offset: i64, timeout: Duration) -> bool {
        let mut rx = self.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|end| *end > offset)).await;
        matches!(waited, Ok(Ok(_)))
    }

    /// Hands every stored batch, from the log start to the current end, to `on_batch` in
    /// order: how internal logs (producer ids, queue state, group offsets) are replayed
    /// on startup. Reads a few MiB at a time.
    pub fn replay_batches(
        &self,
        mut on_batch: impl FnMut(&bytes::Bytes) -> Result<(), CoreError>,
    ) -> Result<(), CoreError> {
        let end = self.log_end_offset();
        let mut offset = self.log_start_offset();
        while offset < end {
            let batches = self.log.read_batches(offset, 4 << 20)?;
            if batches.is_empty() {
                break;
            }
            for b in &batches {
                let header = parse_header(b).map_err(nagare_log::LogError::from)?;
                offset = offset.max(header.last_offset() + 1);
                on_batch(b)?;
            }
        }
        Ok(())
    }

    /// Called after a truncation or retention so watchers see the new offsets.
    pub(crate) fn publish_end_offset(&self) {
        self.end_offset.send_replace(self.log.log_end_offset());
    }
}
