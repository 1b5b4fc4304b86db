//! Decoded requests → record batches in the log.
//!
//! Each event becomes one record: timestamp = event time in milliseconds, value = the
//! record as a JSON object (or its original MessagePack, per route), headers
//! `fluent.tag` = tag and `fluent.time_ns` = the full event time in nanoseconds since
//! the epoch (decimal text). All events of one request (a whole PackedForward chunk)
//! become one record batch and one append; a chunk whose batch would exceed the topic's
//! `max_message_bytes` is split into several batches, all appended before the ack.
//! Batches are written directly ([`BatchWriter`]) rather than through `NewRecord`.
//!
//! An event that cannot be stored (its record alone exceeds the topic's
//! `max.message.bytes`, or is too deep for JSON) is refused on its own: the others are
//! stored, the refusal is counted and logged ([`crate::reject`]), and the event goes to
//! the dead-letter topic ([`crate::dead_letter`]) before the chunk is acknowledged.
//!
//! Everything goes to partition 0 of the topic: one tag's events then stay in the order
//! the sender emitted them, which is what log readers expect.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use nagare_core::{AckLevel, Broker, CoreError, Partition};

use crate::authz::{Denied, TopicAccess};
use crate::config::Format;
use crate::dead_letter::{self, Letter};
use crate::decode::{EventTime, Request};
use crate::error::DecodeError;
use crate::json::write_json_limited;
use crate::reject::{self, Reason, Rejected};
use crate::route::{Router, Target};
use nagare_core::log::batch::{BatchWriter, HEADER_LEN};

pub const TAG_HEADER: &str = "fluent.tag";
pub const TIME_HEADER: &str = "fluent.time_ns";

/// Kept free below `max_message_bytes` (the log's framing checks).
pub(crate) const BATCH_MARGIN: usize = 64;
/// Upper bound of a record's framing (length, attributes, varints, header names) beyond
/// its value and header values.
pub(crate) const RECORD_OVERHEAD: usize = 64;

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
        /// The route's counters in [`Router::stats`].
        route: usize,
    },
}

/// The dead-letter topic's partition, resolved on first use.
#[derive(Clone)]
struct DeadLetter {
    partition: Arc<Partition>,
    max_batch: usize,
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
    /// The connection may not write the request's topic (already counted and logged).
    #[error("not authorized: {0}")]
    NotAuthorized(#[from] Denied),
}

/// What an append left to do before the ack may go out: the partitions and offsets
/// that must be durable (`None` when nothing was stored or no fsync is needed).
pub struct Pending {
    pub sync: Option<(Arc<Partition>, i64)>,
    /// The dead-letter topic's, when events of the request were refused.
    pub dead_letter_sync: Option<(Arc<Partition>, i64)>,
}

impl Pending {
    const NONE: Pending = Pending {
        sync: None,
        dead_letter_sync: None,
    };

    /// Every (partition, offset) the ack waits for.
    pub fn syncs(self) -> impl Iterator<Item = (Arc<Partition>, i64)> {
        self.sync.into_iter().chain(self.dead_letter_sync)
    }
}

/// Turns requests into appends for one connection.
pub struct Ingest {
    broker: Arc<Broker>,
    router: Arc<Router>,
    cache: HashMap<Bytes, Resolved>,
    /// Where refused events go; empty: nowhere (they are counted and logged only).
    dead_letter_topic: Arc<str>,
    dead_letter: Option<DeadLetter>,
    /// Reused scratch for one record's JSON text.
    json: Vec<u8>,
    /// Reused list of the current request's refused events.
    rejected: Vec<Rejected>,
    pub events: u64,
    /// Events refused (and dead-lettered when a dead-letter topic is set).
    pub refused: u64,
    /// The connection's ACL checks; `None`: every topic may be written.
    access: Option<TopicAccess>,
}

impl Ingest {
    pub fn new(broker: Arc<Broker>, router: Arc<Router>, dead_letter_topic: &str) -> Ingest {
        Ingest {
            broker,
            router,
            cache: HashMap::new(),
            dead_letter_topic: dead_letter_topic.into(),
            dead_letter: None,
            json: Vec::with_capacity(1024),
            rejected: Vec::new(),
            events: 0,
            refused: 0,
            access: None,
        }
    }

    /// Checks every request's topic against the ACLs from now on.
    pub fn set_access(&mut self, access: TopicAccess) {
        self.access = Some(access);
    }

    fn resolve(&mut self, tag: &Bytes) -> Result<Resolved, IngestError> {
        if let Some(r) = self.cache.get(tag) {
            return Ok(r.clone());
        }
        // The decoder checked the tag is UTF-8.
        let tag_str = std::str::from_utf8(tag).unwrap_or_default();
        let (route, target) = self.router.resolve_route(tag_str);
        let resolved = match target {
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
                    route,
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
        let (partition, format, max_batch, route) = match self.resolve(&req.tag)? {
            Resolved::Drop => return Ok(Pending::NONE),
            Resolved::Store {
                partition,
                format,
                max_batch,
                route,
            } => (partition, format, max_batch, route),
        };
        if let Some(access) = &mut self.access {
            access.check(&req.tag, partition.topic())?;
        }
        if req.entries.is_empty() {
            return Ok(Pending::NONE);
        }
        // One batch at a time: memory stays bounded by the topic's batch limit however
        // much larger the records' JSON is than the request.
        let budget = max_batch.saturating_sub(BATCH_MARGIN).max(HEADER_LEN + 1);
        let mut last = -1;
        let mut from = 0;
        let mut bytes = 0u64;
        self.rejected.clear();
        while from < req.entries.len() {
            let (batch, next) = build_batch(
                req,
                from,
                format,
                budget,
                &mut self.json,
                &mut self.rejected,
            )?;
            from = next;
            let Some(batch) = batch else { continue };
            bytes += batch.len() as u64;
            let info = partition
                .append(batch, AckLevel::None)
                .await
                .map_err(|source| IngestError::Core {
                    topic: partition.topic().to_string(),
                    source,
                })?;
            last = last.max(info.last_offset);
        }
        let refused = self.rejected.len();
        let stored = (req.entries.len() - refused) as u64;
        self.events += stored;
        if let Some(stats) = self.router.stats().get(route) {
            stats.stored(stored, bytes);
            if refused > 0 {
                stats.dead_lettered(refused as u64);
                metrics::counter!("nagare_forward_dead_lettered_total").increment(refused as u64);
            }
        }
        let level = if durable {
            AckLevel::Durable
        } else {
            AckLevel::Leader
        };
        let sync =
            (last >= 0 && partition.needs_sync(level)).then(|| (partition.clone(), last + 1));
        let dead_letter_sync = if refused > 0 {
            self.refuse(req, &partition, max_batch, level).await?
        } else {
            None
        };
        Ok(Pending {
            sync,
            dead_letter_sync,
        })
    }

    /// Reports this request's refused events and appends them to the dead-letter topic;
    /// returns what the ack must wait for there.
    async fn refuse(
        &mut self,
        req: &Request,
        partition: &Partition,
        max_batch: usize,
        level: AckLevel,
    ) -> Result<Option<(Arc<Partition>, i64)>, IngestError> {
        let rejected = std::mem::take(&mut self.rejected);
        let dead_letter = self.dead_letter()?;
        let tag = String::from_utf8_lossy(&req.tag);
        let topic = partition.topic();
        let max_message_bytes = u32::try_from(max_batch).unwrap_or(u32::MAX);
        let mut last = -1;
        for r in &rejected {
            let entry = &req.entries[r.index];
            let record = &req.source[entry.record.clone()];
            let detail = r.detail(record.len(), topic, max_message_bytes);
            reject::report(
                r.reason,
                &detail,
                &tag,
                topic,
                dead_letter.as_ref().map(|d| d.partition.topic()),
            );
            self.refused += 1;
            let Some(dl) = &dead_letter else { continue };
            let letter = Letter {
                record,
                time: entry.time,
                tag: &req.tag,
                reason: r.reason,
                detail: &detail,
                topic,
            };
            let batch = dead_letter::batch(&letter, dl.max_batch);
            let info = dl
                .partition
                .append(batch, AckLevel::None)
                .await
                .map_err(|source| IngestError::Core {
                    topic: dl.partition.topic().to_string(),
                    source,
                })?;
            last = last.max(info.last_offset);
        }
        self.rejected = rejected;
        Ok(dead_letter.and_then(|dl| {
            (last >= 0 && dl.partition.needs_sync(level)).then(|| (dl.partition, last + 1))
        }))
    }

    /// The dead-letter topic's partition (created on first use), `None` when disabled.
    fn dead_letter(&mut self) -> Result<Option<DeadLetter>, IngestError> {
        if self.dead_letter_topic.is_empty() {
            return Ok(None);
        }
        if let Some(d) = &self.dead_letter {
            return Ok(Some(d.clone()));
        }
        let core = |source| IngestError::Core {
            topic: self.dead_letter_topic.to_string(),
            source,
        };
        let topic = self
            .broker
            .topic_or_create(&self.dead_letter_topic)
            .map_err(core)?;
        let d = DeadLetter {
            partition: topic.partition(0).map_err(core)?,
            max_batch: topic.config().max_message_bytes as usize,
        };
        self.dead_letter = Some(d.clone());
        Ok(Some(d))
    }
}

/// Events of `req` from `from` on as one record batch of at most `budget` bytes (at least one
/// event unless all are refused); returns it with the index of the first event left out.
/// Events that cannot be stored at all are left out and listed in `rejected`.
pub fn build_batch(
    req: &Request,
    from: usize,
    format: Format,
    budget: usize,
    json: &mut Vec<u8>,
    rejected: &mut Vec<Rejected>,
) -> Result<(Option<BytesMut>, usize), DecodeError> {
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
                match write_json_limited(record, json, value_limit) {
                    Ok(()) => json,
                    Err(DecodeError::RecordTooLarge { .. }) => {
                        rejected.push(refused(from + i, Reason::TooLarge));
                        continue;
                    }
                    Err(DecodeError::TooDeep(_)) => {
                        rejected.push(refused(from + i, Reason::TooDeep));
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            Format::Msgpack => record,
        };
        if value.len() > value_limit {
            rejected.push(refused(from + i, Reason::TooLarge));
            continue;
        }
        let mut digits = itoa::Buffer::new();
        let ns = fmt_nanos(&mut digits, e.time);
        let size = RECORD_OVERHEAD + value.len() + req.tag.len() + ns.len();
        if !w.is_empty() && w.len() + size > budget {
            return Ok((Some(w.finish()), from + i));
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
    Ok(((!w.is_empty()).then(|| w.finish()), req.entries.len()))
}

fn refused(index: usize, reason: Reason) -> Rejected {
    Rejected { index, reason }
}

/// Decimal nanoseconds since the epoch. u64 formatting when it fits (until 2554):
/// 128-bit division is a slow library call, and this runs for every event.
pub(crate) fn fmt_nanos(buf: &mut itoa::Buffer, t: EventTime) -> &[u8] {
    match u64::try_from(t.secs)
        .ok()
        .and_then(|s| s.checked_mul(1_000_000_000))
        .and_then(|s| s.checked_add(t.nanos as u64))
    {
        Some(ns) => buf.format(ns).as_bytes(),
        None => buf.format(t.total_nanos()).as_bytes(),
    }
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
        let mut b = itoa::Buffer::new();
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
