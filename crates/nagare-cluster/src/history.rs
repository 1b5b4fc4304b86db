//! The catch-up reader: reads what a partition's window no longer (or not yet) holds,
//! for readers that start behind the end (`x-stream-offset: first`, an offset) or fell
//! behind the window. One consumer per gateway on a thread of its own, one read at a
//! time: each read assigns the partition at the wanted offset and returns what arrives
//! until about `max_bytes`, the partition's end, or a short deadline.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nagare_core::{CoreError, RecordsRead};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tokio::sync::oneshot;

use crate::context::Context;
use crate::error::ClusterError;
use crate::health::Health;
use crate::tail::record_of;

/// How long one read waits for records at most.
const READ_DEADLINE: Duration = Duration::from_secs(2);
/// What librdkafka may read ahead for the catch-up reader (KiB).
pub(crate) const BUFFER_KIB: u32 = 2048;

/// What a read found: the records, and whether it reached the partition's end.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub read: RecordsRead,
    pub at_end: bool,
}

struct Request {
    topic: String,
    partition: i32,
    offset: i64,
    max_bytes: u64,
    reply: oneshot::Sender<Result<Found, CoreError>>,
}

pub(crate) struct History {
    requests: parking_lot::Mutex<mpsc::Sender<Request>>,
    stop: Arc<AtomicBool>,
}

impl History {
    pub(crate) fn start(
        config: ClientConfig,
        health: &Arc<Health>,
    ) -> Result<History, ClusterError> {
        let consumer: BaseConsumer<Context> =
            config.create_with_context(Context::new(health, "catch-up reader"))?;
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::Builder::new()
            .name("nagare-catchup".into())
            .spawn(move || serve(consumer, rx, stopping))?;
        Ok(History {
            requests: parking_lot::Mutex::new(tx),
            stop,
        })
    }

    /// Records of `topic`/`partition` from `offset` on, about `max_bytes`.
    pub(crate) async fn read(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: u64,
    ) -> Result<Found, CoreError> {
        let (reply, answer) = oneshot::channel();
        let request = Request {
            topic: topic.to_string(),
            partition,
            offset,
            max_bytes,
            reply,
        };
        if self.requests.lock().send(request).is_err() {
            return Err(CoreError::ShuttingDown);
        }
        answer.await.unwrap_or(Err(CoreError::ShuttingDown))
    }

    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(
    consumer: BaseConsumer<Context>,
    requests: mpsc::Receiver<Request>,
    stop: Arc<AtomicBool>,
) {
    loop {
        let request = match requests.recv_timeout(Duration::from_millis(500)) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) if !stop.load(Ordering::SeqCst) => continue,
            Err(_) => return,
        };
        let found = read_once(&consumer, &request);
        // Stop fetching until the next read.
        if let Err(e) = consumer.unassign() {
            tracing::debug!(error = %e, "catch-up reader");
        }
        let _ = request.reply.send(found);
    }
}

fn read_once(consumer: &BaseConsumer<Context>, r: &Request) -> Result<Found, CoreError> {
    let unavailable = |e: KafkaError| CoreError::Unavailable(e.to_string());
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&r.topic, r.partition, Offset::Offset(r.offset))
        .map_err(unavailable)?;
    consumer.assign(&tpl).map_err(unavailable)?;
    let mut found = Found {
        read: RecordsRead {
            records: Vec::new(),
            next_offset: r.offset,
            batch_ends: Vec::new(),
        },
        at_end: false,
    };
    let deadline = Instant::now() + READ_DEADLINE;
    let mut bytes = 0u64;
    while bytes < r.max_bytes {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match consumer.poll(left) {
            None => break,
            Some(Ok(m)) => {
                if m.topic() != r.topic || m.partition() != r.partition || m.offset() < r.offset {
                    continue;
                }
                let record = record_of(&m);
                bytes += 64
                    + record.value.as_ref().map_or(0, |v| v.len() as u64)
                    + record.key.as_ref().map_or(0, |k| k.len() as u64);
                found.read.next_offset = record.offset + 1;
                // librdkafka hands out records, not batches: each counts as a batch of
                // its own, so a batch-optimized acquisition never runs past its limit.
                found.read.batch_ends.push(record.offset);
                found.read.records.push(record);
            }
            Some(Err(KafkaError::PartitionEOF(_))) => {
                found.at_end = true;
                // Nothing left: past any gap (a transaction marker) up to the end.
                if let Ok(position) = consumer.position() {
                    if let Some(Offset::Offset(o)) = position
                        .find_partition(&r.topic, r.partition)
                        .map(|p| p.offset())
                    {
                        found.read.next_offset = found.read.next_offset.max(o);
                    }
                }
                break;
            }
            Some(Err(e)) if found.read.records.is_empty() => return Err(unavailable(e)),
            Some(Err(_)) => break,
        }
    }
    Ok(found)
}
