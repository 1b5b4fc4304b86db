//! Decoded requests → record batches in the log.
//!
//! Each event becomes one record: timestamp = event time in milliseconds, value = the
//! record as a JSON object (or its original MessagePack, per route), headers
//! `fluent.tag` = tag and `fluent.time_ns` = the full event time in nanoseconds since
//! the epoch (decimal text). All events of one request (a whole PackedForward chunk)
//! become one record batch and one append; a chunk whose batch would exceed the topic's
//! `max_message_bytes` is split into several batches, all appended before the ack.
//!
//! Everything goes to partition 0 of the topic: one tag's events then stay in the order
//! the sender emitted them, which is what log readers expect.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use nagare_core::log::batch::NewRecord;
use nagare_core::{AckLevel, Broker, CoreError, Partition};

use crate::config::Format;
use crate::decode::Request;
use crate::error::DecodeError;
use crate::json::write_json;
use crate::route::{Router, Target};

pub const TAG_HEADER: &str = "fluent.tag";
pub const TIME_HEADER: &str = "fluent.time_ns";

/// Bytes of batch header plus a margin for record framing we do not count exactly.
const BATCH_OVERHEAD: usize = 61 + 64;
/// Per-record framing (attributes, varints, header keys) over the value and header values.
const RECORD_OVERHEAD: usize = 48;

/// Per-tag routing decisions are cached per connection; a sender rarely uses many tags,
/// and the bound keeps a tag-spraying client from growing it without limit.
const MAX_CACHED_TAGS: usize = 1024;

#[derive(Clone)]
enum Resolved {
    Drop,
    Store {
        partition: Arc<Partition>,
        format: Format,
        max_batch: usize,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("topic {topic:?}: {source}")]
    Core {
        topic: String,
        #[source]
        source: CoreError,
    },
}

/// What an append left to do before the ack may go out: the partition and the offset
/// that must be durable (`None` when nothing was stored or no fsync is needed).
pub struct Pending {
    pub sync: Option<(Arc<Partition>, i64)>,
}

/// Turns requests into appends for one connection.
pub struct Ingest {
    broker: Arc<Broker>,
    router: Arc<Router>,
    cache: HashMap<Bytes, Resolved>,
    /// Reused scratch for record values (JSON) and header texts.
    arena: Vec<u8>,
    pub events: u64,
}

impl Ingest {
    pub fn new(broker: Arc<Broker>, router: Arc<Router>) -> Ingest {
        Ingest {
            broker,
            router,
            cache: HashMap::new(),
            arena: Vec::new(),
            events: 0,
        }
    }

    fn resolve(&mut self, tag: &Bytes) -> Result<Resolved, IngestError> {
        if let Some(r) = self.cache.get(tag) {
            return Ok(r.clone());
        }
        // The decoder checked the tag is UTF-8.
        let tag_str = std::str::from_utf8(tag).unwrap_or_default();
        let resolved = match self.router.resolve(tag_str) {
            Target::Drop => Resolved::Drop,
            Target::Topic { name, format } => {
                let core = |source| IngestError::Core {
                    topic: name.clone(),
                    source,
                };
                let topic = self.broker.topic_or_create(&name).map_err(core)?;
                let partition = topic.partition(0).map_err(core)?;
                Resolved::Store {
                    partition,
                    format,
                    max_batch: topic.config().max_message_bytes as usize,
                }
            }
        };
        if self.cache.len() >= MAX_CACHED_TAGS {
            self.cache.clear();
        }
        self.cache.insert(tag.clone(), resolved.clone());
        Ok(resolved)
    }

    /// Appends the request's events. `durable` (the request carried `chunk`) asks for the
    /// strongest ack; the returned [`Pending`] says which fsync the ack must wait for.
    ///
    /// The append itself never waits: the caller fsyncs once for every request it took
    /// from the socket in one go (group commit across pipelined chunks), then acks.
    pub async fn append(&mut self, req: &Request, durable: bool) -> Result<Pending, IngestError> {
        let (partition, format, max_batch) = match self.resolve(&req.tag)? {
            Resolved::Drop => return Ok(Pending { sync: None }),
            Resolved::Store {
                partition,
                format,
                max_batch,
            } => (partition, format, max_batch),
        };
        if req.entries.is_empty() {
            return Ok(Pending { sync: None });
        }
        let records = self.build(req, format)?;
        let core = |source| IngestError::Core {
            topic: partition.topic().to_string(),
            source,
        };
        let mut last = -1;
        let budget = max_batch.saturating_sub(BATCH_OVERHEAD).max(1);
        let mut start = 0;
        let mut size = 0;
        for (i, r) in records.iter().enumerate() {
            let rs = record_size(r);
            if i > start && size + rs > budget {
                let info = partition
                    .append_records(&records[start..i], AckLevel::None)
                    .await
                    .map_err(core)?;
                last = info.last_offset;
                start = i;
                size = 0;
            }
            size += rs;
        }
        let info = partition
            .append_records(&records[start..], AckLevel::None)
            .await
            .map_err(core)?;
        last = last.max(info.last_offset);
        self.events += records.len() as u64;
        let level = if durable {
            AckLevel::Durable
        } else {
            AckLevel::Leader
        };
        let sync = partition
            .needs_sync(level)
            .then(|| (partition.clone(), last + 1));
        Ok(Pending { sync })
    }

    /// One record per event; values and header texts share one buffer, sliced without
    /// copying.
    fn build(&mut self, req: &Request, format: Format) -> Result<Vec<NewRecord>, DecodeError> {
        let arena = &mut self.arena;
        arena.clear();
        let per_event = if format == Format::Json { 24 } else { 20 };
        arena.reserve(
            req.entries.len() * per_event
                + if format == Format::Json {
                    req.source.len() + req.source.len() / 4
                } else {
                    0
                },
        );
        // (value range in arena or None for msgpack, time range)
        let mut spans = Vec::with_capacity(req.entries.len());
        for e in &req.entries {
            let value = if format == Format::Json {
                let s = arena.len();
                write_json(&req.source[e.record.clone()], arena)?;
                s..arena.len()
            } else {
                0..0
            };
            let t = arena.len();
            push_i128(arena, e.time.total_nanos());
            spans.push((value, t..arena.len()));
        }
        let shared = Bytes::copy_from_slice(arena);
        // Keep the grown buffer for the next request on this connection, but not a
        // huge one a single large chunk left behind.
        if arena.capacity() > 8 << 20 {
            *arena = Vec::new();
        }
        let tag = req.tag.clone();
        Ok(req
            .entries
            .iter()
            .zip(spans)
            .map(|(e, (value, time))| NewRecord {
                key: None,
                value: Some(if format == Format::Json {
                    shared.slice(value)
                } else {
                    req.source.slice(e.record.clone())
                }),
                headers: vec![
                    (TAG_HEADER.to_string(), Some(tag.clone())),
                    (TIME_HEADER.to_string(), Some(shared.slice(time))),
                ],
                timestamp: e.time.millis(),
            })
            .collect())
    }
}

fn record_size(r: &NewRecord) -> usize {
    RECORD_OVERHEAD
        + r.value.as_ref().map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum::<usize>()
}

fn push_i128(out: &mut Vec<u8>, v: i128) {
    let mut tmp = [0u8; 40];
    let mut i = tmp.len();
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        tmp[i] = b'-';
    }
    out.extend_from_slice(&tmp[i..]);
}

/// The reply to a request that carried `chunk`: `{"ack": <chunk>}` with the chunk value
/// copied byte for byte as the sender encoded it.
pub fn ack_bytes(out: &mut Vec<u8>, chunk: &[u8]) {
    out.extend_from_slice(&[0x81, 0xa3, b'a', b'c', b'k']);
    out.extend_from_slice(chunk);
}
