//! Fetch (1): long poll, whole batches from the requested offset, served from the segment
//! files.
//!
//! The response is encoded by hand (`FetchEncoder`) rather than with the crate's
//! `FetchResponse`: the crate wants each partition's records as one in-memory `Bytes`, which
//! would mean reading every batch into user space. Writing the fields ourselves lets the
//! records be file ranges that the connection sends with `sendfile(2)` right after the bytes
//! in front of them. The request is still decoded with the crate.
//!
//! `isolation_level = 1` (read committed) serves only batches below the partition's
//! last stable offset, lists the aborted transactions overlapping what is sent (from the
//! `.txnindex`: the client drops their records until it meets the producer's ABORT
//! marker) and long-polls on the last stable offset instead of the end of the log.
//!
//! Kafka's internal topics are served read-only from nagare's internal logs (records in
//! nagare's own encoding, see `internal_topics.rs`).

use crate::meters::Counted;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use futures_util::future::select_all;
use kafka_protocol::messages::{ApiKey, FetchRequest};
use nagare_core::log::LogError;
use nagare_core::security::Operation;
use nagare_core::{AbortedTxn, CoreError, Partition};
use tokio::time::Instant;
use uuid::Uuid;

use super::{decode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::internal_topics;
use crate::session::Session;
use crate::{Chunk, KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::Fetch,
    // Topic ids from v13 on; v14-v17 only add fields we leave empty (tagged fields,
    // replica state and directory ids used by followers).
    advertised: (4, 17),
    accepted: (4, 17),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

/// One requested partition, resolved.
struct Target {
    index: i32,
    offset: i64,
    max_bytes: u64,
    partition: Result<Arc<Partition>, i16>,
}

struct TopicTarget {
    name: String,
    id: Uuid,
    partitions: Vec<Target>,
}

/// What one partition answers.
pub(crate) struct PartitionResult {
    pub index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// For read-committed fetches: the aborted transactions overlapping the records.
    pub aborted: Vec<AbortedTxn>,
    pub records: Vec<Chunk>,
}

pub(crate) struct TopicResult {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<PartitionResult>,
}

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: FetchRequest = decode(&req)?;
    let max_wait = Duration::from_millis(
        (request.max_wait_ms.max(0) as u64).min(state.config.max_fetch_wait_ms as u64),
    );
    let min_bytes = request.min_bytes.max(0) as u64;
    // Also kept well below i32::MAX: the response size is an i32 on the wire.
    let max_bytes = (request.max_bytes.max(0) as u64)
        .min(state.config.max_fetch_bytes as u64)
        .min(1 << 30);
    let targets = resolve(&state, &session, &request, req.version);
    let committed = request.isolation_level == 1;
    let deadline = Instant::now() + max_wait;
    loop {
        // Subscribe before reading so an append between the read and the wait still wakes
        // us. A read-committed fetch waits for the last stable offset to move instead.
        let mut watches: Vec<_> = targets
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter_map(|p| {
                p.partition.as_ref().ok().map(|p| {
                    if committed {
                        p.subscribe_stable()
                    } else {
                        p.subscribe()
                    }
                })
            })
            .collect();
        let (results, total, errors) = read_all(&targets, max_bytes, committed);
        if total >= min_bytes || errors || Instant::now() >= deadline {
            return Ok(Reply::Chunks(encode_response(req.version, &results)));
        }
        if watches.is_empty() {
            tokio::time::sleep_until(deadline).await;
            continue;
        }
        let changed = select_all(watches.iter_mut().map(|w| Box::pin(w.changed())));
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            let (results, _, _) = read_all(&targets, max_bytes, committed);
            return Ok(Reply::Chunks(encode_response(req.version, &results)));
        }
    }
}

/// Finds each requested partition, with Kafka's consumer checks: Read on the topic, else
/// TOPIC_AUTHORIZATION_FAILED. By name the check comes first, so an unauthorized client
/// learns nothing about which topics exist; an unknown topic id is UNKNOWN_TOPIC_ID
/// whoever asks (ids are not secret, as in Kafka).
fn resolve(
    state: &KafkaState,
    session: &Session,
    request: &FetchRequest,
    version: i16,
) -> Vec<TopicTarget> {
    let broker = &state.broker;
    // Counted where it is used: only a refused topic is an error handed out.
    let denied = || ResponseError::TopicAuthorizationFailed.counted();
    request
        .topics
        .iter()
        .map(|t| {
            let internal = if version >= 13 {
                internal_topics::by_id(broker, t.topic_id)
            } else {
                internal_topics::by_name(broker, &t.topic)
            };
            let source = if let Some(internal) = internal {
                if session.topic_allowed(Operation::Read, internal.name) {
                    Ok(Source::Internal(internal.partition))
                } else {
                    Err(denied())
                }
            } else if version >= 13 {
                broker
                    .list_topics()
                    .into_iter()
                    .find(|x| x.id() == t.topic_id)
                    .ok_or(ResponseError::UnknownTopicId.counted())
                    .and_then(|topic| {
                        if session.topic_allowed(Operation::Read, topic.name()) {
                            Ok(Source::Topic(topic))
                        } else {
                            Err(denied())
                        }
                    })
            } else if !session.topic_allowed(Operation::Read, &t.topic) {
                Err(denied())
            } else {
                broker
                    .topic(&t.topic)
                    .map(Source::Topic)
                    .ok_or(ResponseError::UnknownTopicOrPartition.counted())
            };
            let partitions = t
                .partitions
                .iter()
                .map(|p| Target {
                    index: p.partition,
                    offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes.max(0) as u64,
                    partition: source
                        .as_ref()
                        .map_err(|c| *c)
                        .and_then(|s| s.partition(p.partition)),
                })
                .collect();
            TopicTarget {
                name: t.topic.to_string(),
                id: t.topic_id,
                partitions,
            }
        })
        .collect()
}

/// Where a fetched topic's partitions are: an ordinary topic, or one of Kafka's
/// internal topics (`internal_topics.rs`: one partition, index 0, an internal log).
enum Source {
    Topic(Arc<nagare_core::Topic>),
    Internal(Arc<Partition>),
}

impl Source {
    fn partition(&self, index: i32) -> Result<Arc<Partition>, i16> {
        match self {
            Source::Topic(topic) => topic.partition(index).map_err(|e| core_error(&e).counted()),
            Source::Internal(p) if p.index() == index => Ok(p.clone()),
            Source::Internal(_) => Err(ResponseError::UnknownTopicOrPartition.counted()),
        }
    }
}

/// Reads every partition (up to the request's byte budget); returns the results, the
/// bytes found, and whether any partition had an error (which answers at once).
fn read_all(
    targets: &[TopicTarget],
    max_bytes: u64,
    committed: bool,
) -> (Vec<TopicResult>, u64, bool) {
    let mut budget = max_bytes;
    let mut total = 0u64;
    let mut errors = false;
    let mut first = true;
    let results = targets
        .iter()
        .map(|t| TopicResult {
            name: t.name.clone(),
            id: t.id,
            partitions: t
                .partitions
                .iter()
                .map(|target| {
                    let r = read_one(target, budget, first, committed);
                    let got: u64 = r.records.iter().map(|c| c.len() as u64).sum();
                    if got > 0 {
                        first = false;
                    }
                    budget = budget.saturating_sub(got);
                    total += got;
                    errors |= r.error_code != errors::NONE;
                    r
                })
                .collect(),
        })
        .collect();
    (results, total, errors)
}

fn read_one(target: &Target, budget: u64, first: bool, committed: bool) -> PartitionResult {
    let mut result = PartitionResult {
        index: target.index,
        error_code: errors::NONE,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        aborted: Vec::new(),
        records: Vec::new(),
    };
    let partition = match &target.partition {
        Ok(p) => p,
        Err(c) => {
            result.error_code = *c;
            return result;
        }
    };
    result.high_watermark = partition.high_watermark();
    result.last_stable_offset = partition.last_stable_offset();
    result.log_start_offset = partition.log_start_offset();
    // Kafka returns at least one batch to the first partition with data even if it is
    // bigger than the limits, so a consumer never gets stuck; after that, budgets hold.
    let limit = target.max_bytes.min(budget);
    if limit == 0 && !first {
        return result;
    }
    let read = if committed {
        partition.read_committed(target.offset, limit.max(1))
    } else {
        partition.read(target.offset, limit.max(1))
    };
    match read {
        Ok(read) => {
            result.high_watermark = read.high_watermark;
            result.last_stable_offset = read.last_stable_offset;
            result.log_start_offset = read.log_start_offset;
            if committed && read.total_bytes > 0 {
                result.aborted = partition.aborted_transactions(target.offset, read.next_offset);
            }
            if read.total_bytes > 0 {
                // Records from the fetch offset on; the bytes are the whole batches sent.
                let records = (read.next_offset - target.offset).max(0) as u64;
                partition.count_out(records, read.total_bytes);
            }
            result.records = read.slices.into_iter().map(Chunk::File).collect();
            if !read.copied.is_empty() {
                result.records.push(Chunk::Mem(read.copied));
            }
        }
        Err(CoreError::Log(LogError::OffsetOutOfRange { .. })) => {
            result.error_code = ResponseError::OffsetOutOfRange.counted();
        }
        Err(e) => result.error_code = core_error(&e).counted(),
    }
    result
}

/// Writes the Fetch response body field by field; see the module docs for why.
struct FetchEncoder {
    flexible: bool,
    buf: BytesMut,
    out: Vec<Chunk>,
}

impl FetchEncoder {
    fn array_len(&mut self, n: usize) {
        if self.flexible {
            self.uvarint(n as u32 + 1);
        } else {
            self.buf.put_i32(n as i32);
        }
    }

    fn string(&mut self, s: &str) {
        let s = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
        if self.flexible {
            self.uvarint(s.len() as u32 + 1);
        } else {
            self.buf.put_i16(s.len() as i16);
        }
        self.buf.put_slice(s);
    }

    fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8);
    }

    fn tagged_fields(&mut self) {
        if self.flexible {
            self.buf.put_u8(0);
        }
    }

    fn records(&mut self, records: &[Chunk]) {
        let len: usize = records.iter().map(Chunk::len).sum();
        if self.flexible {
            self.uvarint(len as u32 + 1);
        } else {
            self.buf.put_i32(len as i32);
        }
        if len > 0 {
            self.out.push(Chunk::Mem(self.buf.split().freeze()));
            self.out.extend(records.iter().cloned());
        }
    }

    fn finish(mut self) -> Vec<Chunk> {
        if !self.buf.is_empty() {
            self.out.push(Chunk::Mem(self.buf.split().freeze()));
        }
        self.out
    }
}

/// The Fetch response body at `version` (4..=17) as memory and file pieces.
pub(crate) fn encode_response(version: i16, topics: &[TopicResult]) -> Vec<Chunk> {
    let mut e = FetchEncoder {
        flexible: version >= 12,
        buf: BytesMut::with_capacity(256),
        out: Vec::new(),
    };
    e.buf.put_i32(0); // throttle_time_ms
    if version >= 7 {
        e.buf.put_i16(errors::NONE);
        e.buf.put_i32(0); // session_id: no fetch sessions, clients send full requests
    }
    e.array_len(topics.len());
    for t in topics {
        if version >= 13 {
            e.buf.put_slice(t.id.as_bytes());
        } else {
            e.string(&t.name);
        }
        e.array_len(t.partitions.len());
        for p in &t.partitions {
            e.buf.put_i32(p.index);
            e.buf.put_i16(p.error_code);
            e.buf.put_i64(p.high_watermark);
            e.buf.put_i64(p.last_stable_offset);
            if version >= 5 {
                e.buf.put_i64(p.log_start_offset);
            }
            // Empty, never null, when there is nothing to skip.
            e.array_len(p.aborted.len());
            for a in &p.aborted {
                e.buf.put_i64(a.producer_id);
                e.buf.put_i64(a.first_offset);
                e.tagged_fields();
            }
            if version >= 11 {
                e.buf.put_i32(-1); // preferred_read_replica
            }
            e.records(&p.records);
            e.tagged_fields();
        }
        e.tagged_fields();
    }
    e.tagged_fields();
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::messages::FetchResponse;
    use kafka_protocol::protocol::Decodable;

    fn flatten(chunks: Vec<Chunk>) -> Bytes {
        let mut b = BytesMut::new();
        for c in chunks {
            match c {
                Chunk::Mem(m) => b.extend_from_slice(&m),
                Chunk::File(_) => unreachable!(),
            }
        }
        b.freeze()
    }

    #[test]
    fn hand_encoding_matches_the_schema_for_every_version() {
        let id = Uuid::new_v4();
        let topics = vec![TopicResult {
            name: "t".into(),
            id,
            partitions: vec![
                PartitionResult {
                    index: 0,
                    error_code: 0,
                    high_watermark: 10,
                    last_stable_offset: 8,
                    log_start_offset: 2,
                    aborted: vec![
                        AbortedTxn {
                            producer_id: 7,
                            first_offset: 3,
                        },
                        AbortedTxn {
                            producer_id: 9,
                            first_offset: 5,
                        },
                    ],
                    records: vec![
                        Chunk::Mem(Bytes::from_static(b"abc")),
                        Chunk::Mem(Bytes::from_static(b"de")),
                    ],
                },
                PartitionResult {
                    index: 1,
                    error_code: 1,
                    high_watermark: 5,
                    last_stable_offset: 5,
                    log_start_offset: 0,
                    aborted: vec![],
                    records: vec![],
                },
            ],
        }];
        for version in 4..=17 {
            let mut body = flatten(encode_response(version, &topics));
            let r = FetchResponse::decode(&mut body, version).unwrap();
            assert!(body.is_empty(), "v{version} left bytes");
            let t = &r.responses[0];
            if version >= 13 {
                assert_eq!(t.topic_id, id);
            } else {
                assert_eq!(&*t.topic, "t");
            }
            assert_eq!(t.partitions[0].records.as_deref(), Some(&b"abcde"[..]));
            assert_eq!(t.partitions[0].high_watermark, 10);
            assert_eq!(t.partitions[0].last_stable_offset, 8);
            let aborted: Vec<(i64, i64)> = t.partitions[0]
                .aborted_transactions
                .iter()
                .flatten()
                .map(|a| (a.producer_id.0, a.first_offset))
                .collect();
            assert_eq!(aborted, vec![(7, 3), (9, 5)]);
            assert_eq!(t.partitions[1].error_code, 1);
            assert_eq!(t.partitions[1].records.as_deref(), Some(&b""[..]));
            assert_eq!(
                t.partitions[1]
                    .aborted_transactions
                    .as_deref()
                    .map(|a| a.len()),
                Some(0)
            );
        }
    }
}
