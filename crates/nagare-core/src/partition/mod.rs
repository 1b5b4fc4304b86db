//! One partition of a topic, and the only way into its log: the append path (size limit,
//! idempotent-producer sequence check, group commit, waking readers) in `append`, the
//! decoded-record reader in `records`, and the read methods front ends need below (file
//! slices for `sendfile`, offsets, time lookups). The log itself stays crate-private, so
//! this type is the seam a second storage backend sits behind: in cluster mode a
//! partition is backed by a [`RemoteLog`] instead (`remote.rs`), and every method below
//! answers from it, or says the embedded log's feature is not there.

mod append;
mod codec;
mod delete_records;
mod records;
mod remote;
mod sequence;
mod syncer;
mod txn;

use std::sync::Arc;
use std::time::Duration;

use nagare_log::{LogError, PartitionLog, ReadResult};
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::store::RemoteLog;
use crate::traffic::TrafficMeter;
use crate::{CoreError, TopicFlush};

pub use records::RecordsRead;
pub use txn::{AbortedTxn, ProducerStateInfo};

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

/// One partition of a topic: its log, its limits, the append queue, the idempotent
/// producers' sequence state and the watch that wakes readers.
pub struct Partition {
    topic: Arc<str>,
    index: i32,
    store: Store,
    flush: RwLock<TopicFlush>,
    max_message_bytes: RwLock<u32>,
    end_offset: watch::Sender<i64>,
    /// The last stable offset, for read-committed readers waiting for data.
    stable_offset: watch::Sender<i64>,
    appends: append::AppendQueue,
    /// Waiters for an fsync, and the one thread running them (group commit).
    syncer: Arc<syncer::Syncer>,
    producers: sequence::ProducerStates,
    /// Records and bytes in (counted by the append path) and out (reported by the front
    /// ends), into the broker's totals and the topic's counters.
    meter: TrafficMeter,
    /// The topic's `compression.type`, applied on append (`codec.rs`).
    codec: codec::TopicCodec,
    /// The topic is compacted: records need a key (`crate::cleaner::refuse_keyless`).
    compacted: std::sync::atomic::AtomicBool,
}

/// Where a partition's records are. The fields beside it that only the embedded log
/// uses (append queue, sequence state, codec) stay idle for a remote partition.
enum Store {
    /// The embedded log under the data directory.
    Local(Arc<PartitionLog>),
    /// A partition of the external cluster.
    Remote(Arc<dyn RemoteLog>),
}

impl Partition {
    pub(crate) fn new(
        topic: Arc<str>,
        index: i32,
        log: PartitionLog,
        flush: TopicFlush,
        max_message_bytes: u32,
        meter: TrafficMeter,
    ) -> Partition {
        let (end_offset, _) = watch::channel(log.log_end_offset());
        let (stable_offset, _) = watch::channel(log.last_stable_offset());
        Partition {
            topic,
            index,
            store: Store::Local(Arc::new(log)),
            flush: RwLock::new(flush),
            max_message_bytes: RwLock::new(max_message_bytes),
            end_offset,
            stable_offset,
            appends: append::AppendQueue::default(),
            syncer: Default::default(),
            producers: sequence::ProducerStates::default(),
            meter,
            codec: codec::TopicCodec::default(),
            compacted: Default::default(),
        }
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn index(&self) -> i32 {
        self.index
    }

    /// The embedded log, for the core's own maintenance (flush, retention, trimming,
    /// close); `None` for a partition of a cluster, which has nothing to maintain here.
    pub(crate) fn log(&self) -> Option<&Arc<PartitionLog>> {
        match &self.store {
            Store::Local(log) => Some(log),
            Store::Remote(_) => None,
        }
    }

    /// Whether the records are in an external cluster (cluster mode).
    pub fn is_remote(&self) -> bool {
        matches!(self.store, Store::Remote(_))
    }

    pub fn flush_policy(&self) -> TopicFlush {
        *self.flush.read()
    }

    /// The largest record batch this partition accepts (the topic's `max.message.bytes`).
    pub fn max_message_bytes(&self) -> u32 {
        *self.max_message_bytes.read()
    }

    /// Whether the topic's `cleanup.policy` includes `compact`.
    pub fn is_compacted(&self) -> bool {
        self.compacted.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn set_compacted(&self, compacted: bool) {
        self.compacted
            .store(compacted, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn set_limits(&self, flush: TopicFlush, max_message_bytes: u32) {
        *self.flush.write() = flush;
        *self.max_message_bytes.write() = max_message_bytes;
    }

    /// Whole batches from `offset` as file slices (for `sendfile`); see
    /// [`PartitionLog::read`]. Only the embedded log has files.
    pub fn read(&self, offset: i64, max_bytes: u64) -> Result<ReadResult, CoreError> {
        match &self.store {
            Store::Local(log) => Ok(log.read(offset, max_bytes)?),
            Store::Remote(_) => Err(CoreError::ClusterMode("reading record batches as files")),
        }
    }

    pub fn log_start_offset(&self) -> i64 {
        match &self.store {
            Store::Local(log) => log.log_start_offset(),
            Store::Remote(r) => r.cached_bounds().start,
        }
    }

    pub fn log_end_offset(&self) -> i64 {
        match &self.store {
            Store::Local(log) => log.log_end_offset(),
            Store::Remote(r) => r.cached_bounds().end,
        }
    }

    /// Single node: everything appended is committed. A cluster's partition: its end as
    /// last seen.
    pub fn high_watermark(&self) -> i64 {
        self.log_end_offset()
    }

    /// Offset below which everything appended is known to be on disk (for a cluster's
    /// partition, acknowledged by the cluster: all of it).
    pub fn flushed_offset(&self) -> i64 {
        match &self.store {
            Store::Local(log) => log.flushed_offset(),
            Store::Remote(r) => r.cached_bounds().end,
        }
    }

    /// Bytes of log on disk (0 for a cluster's partition: not on this machine).
    pub fn size_bytes(&self) -> u64 {
        self.log().map_or(0, |log| log.size_bytes())
    }

    /// Segment files of the log (the active one included).
    pub fn segment_count(&self) -> usize {
        self.log().map_or(0, |log| log.segment_count())
    }

    /// The largest record timestamp and the offset holding it (Kafka's MAX_TIMESTAMP).
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        self.log().and_then(|log| log.max_timestamp())
    }

    /// The first record at or after `timestamp`, as (offset, its timestamp).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Option<(i64, i64)> {
        self.log()
            .and_then(|log| log.offset_for_timestamp(timestamp))
    }

    /// Counts records and bytes a front end delivered to a client from this partition
    /// (the broker's `records_out`/`bytes_out` and the topic's counters).
    pub fn count_out(&self, records: u64, bytes: u64) {
        self.meter.count_out(records, bytes);
    }

    /// A receiver that changes whenever the log end offset moves.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        match &self.store {
            Store::Local(_) => self.end_offset.subscribe(),
            Store::Remote(r) => r.watch(),
        }
    }

    /// Waits until the log end offset is beyond `offset` or `timeout` passes; returns
    /// whether data is there.
    pub async fn wait_beyond(&self, offset: i64, timeout: Duration) -> bool {
        let mut rx = self.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|end| *end > offset)).await;
        matches!(waited, Ok(Ok(_)))
    }

    /// Called after an append, a truncation or retention so watchers see the new offsets.
    pub(crate) fn publish_end_offset(&self) {
        let Store::Local(log) = &self.store else {
            return;
        };
        self.end_offset.send_replace(log.log_end_offset());
        let stable = log.last_stable_offset();
        self.stable_offset
            .send_if_modified(|s| std::mem::replace(s, stable) != stable);
    }

    /// A log error of this partition as the core reports it: failed reads and writes of
    /// the storage (ENOSPC, EIO, ...) become [`CoreError::Storage`], so front ends can
    /// answer with their protocol's storage error.
    pub(crate) fn core_error(&self, e: LogError) -> CoreError {
        match e {
            LogError::Io { .. } => CoreError::Storage {
                topic: self.topic.to_string(),
                partition: self.index,
                source: e,
            },
            other => CoreError::Log(other),
        }
    }
}
