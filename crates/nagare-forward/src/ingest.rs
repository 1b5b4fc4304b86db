//! Decoded requests → record batches in the log.
//!
//! Each event becomes one record: timestamp = event time in milliseconds, value = the
//! record as a JSON object (or its original MessagePack, per route), headers
//! `fluent.tag` = tag and `fluent.time_ns` = the full event time in nanoseconds since
//! the epoch (decimal text). All events of one request (a whole PackedForward chunk)
//! become one record batch and one append; a chunk whose batch would exceed the topic's
//! `max_message_bytes` is split into several batches, all appended before the ack.
//! Batches are written directly ([`crate::batch`]) rather than through `NewRecord`.
//!
//! Everything goes to partition 0 of the topic: one tag's events then stay in the order
//! the sender emitted them, which is what log readers expect.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use nagare_core::{AckLevel, Broker, CoreError, Partition};

use crate::config::Format;
use crate::decode::{EventTime, Request};
use crate::error::DecodeError;
use crate::json::write_json_limited;
use crate::route::{Router, Target};
use nagare_core::log::batch::{BatchWriter, HEADER_LEN};

pub const TAG_HEADER: &str = "fluent.tag";
pub const TIME_HEADER: &str = "fluent.time_ns";

/// Kept free below `max_message_bytes` (the log's framing checks).
const BATCH_MARGIN: usize = 64;
/// Upper bound of a record's framing (length, attributes, varints, header names) beyond
/// its value and header values.
const RECORD_OVERHEAD: usize = 64;

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
    /// Reused scratch for one record's JSON text.
    json: Vec<u8>,
    pub events: u64,
}

impl Ingest {
    pub fn new(broker: Arc<Broker>, router: Arc<Router>) -> Ingest {
        Ingest {
            broker,
            router,
            cache: HashMap::new(),
            json: Vec::with_capacity(1024),
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
        // One batch at a time: memory stays bounded by the topic's batch limit however
        // much larger the records' JSON is than the request.
        let budget = max_batch.saturating_sub(BATCH_MARGIN).max(HEADER_LEN + 1);
        let mut last = -1;
        let mut from = 0;
        while from < req.entries.len() {
            let (batch, next) = self.build(req, from, format, budget)?;
            from = next;
            let info = partition
                .append(batch, AckLevel::None)
                .await
                .map_err(|source| IngestError::Core {
                    topic: partition.topic().to_string(),
                    source,
                })?;
            last = last.max(info.last_offset);
        }
        self.events += req.entries.len() as u64;
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

    fn build(
        &mut self,
        req: &Request,
        from: usize,
        format: Format,
        budget: usize,
    ) -> Result<(BytesMut, usize), DecodeError> {
        build_batch(req, from, format, budget, &mut self.json)
    }
}

/// Events of `req` from `from` on as one record batch of at most `budget` bytes (at least one
/// event); returns it with the index of the first event left out.
pub fn build_batch(
    req: &Request,
    from: usize,
    format: Format,
    budget: usize,
    json: &mut Vec<u8>,
) -> Result<(BytesMut, usize), DecodeError> {
    let rest = &req.entries[from..];
    let estimate = (req.source.len() + req.source.len() / 4 + rest.len() * 64).min(budget);
    let mut w = BatchWriter::new(estimate);
    // A record alone beyond the budget could never be appended.
    let value_limit = budget.saturating_sub(HEADER_LEN + RECORD_OVERHEAD + req.tag.len() + 40);
    for (i, e) in rest.iter().enumerate() {
        let record = &req.source[e.record.clone()];
        let value: &[u8] = match format {
            Format::Json => {
                json.clear();
                write_json_limited(record, json, value_limit)?;
                json
            }
            Format::Msgpack => record,
        };
        if value.len() > value_limit {
            return Err(DecodeError::RecordTooLarge { limit: value_limit });
        }
        let mut digits = [0u8; 40];
        let ns = fmt_nanos(&mut digits, e.time);
        let size = RECORD_OVERHEAD + value.len() + req.tag.len() + ns.len();
        if !w.is_empty() && w.len() + size > budget {
            return Ok((w.finish(), from + i));
        }
        w.push(
            e.time.millis(),
            None,
            Some(value),
            [(TAG_HEADER, Some(&req.tag[..])), (TIME_HEADER, Some(ns))],
        );
    }
    // Shrink the reused scratch if one huge record grew it.
    if json.capacity() > 1 << 20 {
        *json = Vec::with_capacity(1024);
    }
    Ok((w.finish(), req.entries.len()))
}

/// Decimal nanoseconds since the epoch. u64 arithmetic when it fits (until 2554):
/// 128-bit division by 10 is a slow library call, and this runs for every event.
fn fmt_nanos(buf: &mut [u8; 40], t: EventTime) -> &[u8] {
    if let Some(ns) = u64::try_from(t.secs)
        .ok()
        .and_then(|s| s.checked_mul(1_000_000_000))
        .and_then(|s| s.checked_add(t.nanos as u64))
    {
        let mut i = buf.len();
        let mut u = ns;
        loop {
            i -= 1;
            buf[i] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        return &buf[i..];
    }
    fmt_i128(buf, t.total_nanos())
}

/// Decimal digits of `v` in `buf`.
fn fmt_i128(buf: &mut [u8; 40], v: i128) -> &[u8] {
    let mut i = buf.len();
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// The reply to a request that carried `chunk`: `{"ack": <chunk>}` with the chunk value
/// copied byte for byte as the sender encoded it.
pub fn ack_bytes(out: &mut Vec<u8>, chunk: &[u8]) {
    out.extend_from_slice(&[0x81, 0xa3, b'a', b'c', b'k']);
    out.extend_from_slice(chunk);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanos_text_for_every_range() {
        let mut b = [0u8; 40];
        let t = |secs, nanos| EventTime { secs, nanos };
        assert_eq!(
            fmt_nanos(&mut b, t(1_700_000_000, 5)),
            b"1700000000000000005"
        );
        assert_eq!(fmt_nanos(&mut b, t(0, 0)), b"0");
        assert_eq!(fmt_nanos(&mut b, t(-1, 500_000_000)), b"-500000000");
        assert_eq!(
            fmt_nanos(&mut b, t(i64::MAX, 0)),
            (i64::MAX as i128 * 1_000_000_000).to_string().as_bytes()
        );
    }
}
