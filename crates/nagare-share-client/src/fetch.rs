//! ShareFetch and ShareAcknowledge on the wire: building the requests of a share session
//! step (partitions added and forgotten, acknowledgement batches), and reading a fetched
//! partition: its record batches decoded (every codec, through `nagare_log::batch`) and
//! kept only where the broker acquired them for this member, each with its delivery
//! count. Acquired offsets that hold no record (transaction markers, compacted-away
//! records) are settled as GAP, and those of a batch that cannot be decoded as REJECT, as
//! Kafka's own consumer does, so they never sit locked until their lock runs out.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::share_fetch_response::AcquiredRecords;
use kafka_protocol::messages::{
    share_acknowledge_request as ack_req, share_fetch_request as fetch_req, GroupId,
    ShareAcknowledgeRequest, ShareFetchRequest,
};
use kafka_protocol::protocol::StrBytes;
use nagare_log::batch::{decode_records, parse_header};
use uuid::Uuid;

use crate::acks::{AckBatch, AckRange, AckType};
use crate::session::{FetchStep, SharePartition};
use crate::ShareRecord;

/// A batch's offset and length fields: what is needed to step over it.
const BATCH_PREFIX: usize = 12;

/// What one partition of a share fetch gave.
#[derive(Debug, Default)]
pub(crate) struct Fetched {
    pub records: Vec<ShareRecord>,
    /// Acquired offsets settled without the caller (GAP and REJECT).
    pub settle: Vec<AckRange>,
}

/// Acquired ranges, sorted, without overlaps or inverted ranges.
fn acquired_ranges(acquired: &[AcquiredRecords]) -> Vec<(i64, i64, i16)> {
    let mut ranges: Vec<(i64, i64, i16)> = acquired
        .iter()
        .filter(|a| a.last_offset >= a.first_offset)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect();
    ranges.sort_by_key(|r| r.0);
    let mut out: Vec<(i64, i64, i16)> = Vec::with_capacity(ranges.len());
    for r in ranges {
        if out.last().is_some_and(|prev| r.0 <= prev.1) {
            continue;
        }
        out.push(r);
    }
    out
}

/// The acquired range holding `offset`.
fn range_of(ranges: &[(i64, i64, i16)], offset: i64) -> Option<(i64, i64, i16)> {
    let i = ranges.partition_point(|r| r.1 < offset);
    ranges.get(i).copied().filter(|r| r.0 <= offset)
}

/// Reads one fetched partition: `records` (whole batches; a cut-off last one is left
/// out, as Kafka's consumer does) against the `acquired` ranges.
pub(crate) fn read_partition(
    topic: &Arc<str>,
    partition: i32,
    records: Option<&Bytes>,
    acquired: &[AcquiredRecords],
) -> Fetched {
    let ranges = acquired_ranges(acquired);
    let mut out = Fetched::default();
    if ranges.is_empty() {
        return out;
    }
    // Offsets accounted for (records returned, batches rejected), as ranges.
    let mut covered: Vec<(i64, i64)> = Vec::new();
    let data = records.cloned().unwrap_or_default();
    let mut at = 0usize;
    while data.len() - at >= BATCH_PREFIX {
        let rest = &data[at..];
        let base = i64::from_be_bytes(rest[..8].try_into().unwrap_or([0; 8]));
        let len = i32::from_be_bytes(rest[8..12].try_into().unwrap_or([0; 4]));
        let total = BATCH_PREFIX as i64 + i64::from(len);
        if len < 0 || total > rest.len() as i64 {
            break;
        }
        let batch = data.slice(at..at + total as usize);
        at += total as usize;
        match decode_records(&batch) {
            Ok(decoded) => {
                for record in decoded {
                    let Some((_, _, count)) = range_of(&ranges, record.offset) else {
                        continue;
                    };
                    if covered.last().is_some_and(|c| c.1 >= record.offset) {
                        continue;
                    }
                    covered.push((record.offset, record.offset));
                    out.records.push(ShareRecord {
                        topic: topic.clone(),
                        partition,
                        offset: record.offset,
                        delivery_count: count,
                        record,
                    });
                }
            }
            Err(e) => {
                let last = parse_header(&batch).map_or(base, |h| h.last_offset());
                tracing::warn!(%topic, partition, base, last, error = %e, "share fetch: undecodable record batch; its records are rejected");
                for (first, end, _) in &ranges {
                    let (lo, hi) = ((*first).max(base), (*end).min(last));
                    if lo <= hi {
                        out.settle.push(AckRange {
                            first: lo,
                            last: hi,
                            kind: AckType::Reject,
                        });
                        covered.push((lo, hi));
                    }
                }
            }
        }
    }
    covered.sort_unstable();
    // Whatever acquired offset nothing covers is a gap.
    let mut c = covered.iter().peekable();
    for (first, last, _) in &ranges {
        let mut next = *first;
        while let Some(&&(lo, hi)) = c.peek() {
            if lo > *last {
                break;
            }
            if lo > next {
                out.settle.push(AckRange {
                    first: next,
                    last: lo - 1,
                    kind: AckType::Gap,
                });
            }
            next = next.max(hi.saturating_add(1));
            c.next();
        }
        if next <= *last {
            out.settle.push(AckRange {
                first: next,
                last: *last,
                kind: AckType::Gap,
            });
        }
    }
    out
}

/// Acknowledgement batches of a partition, ready for a request.
pub(crate) type PartitionAcks = (SharePartition, Vec<AckBatch>);

/// Partitions grouped by topic id, in first-seen order.
fn by_topic<T>(items: impl IntoIterator<Item = (Uuid, T)>) -> Vec<(Uuid, Vec<T>)> {
    let mut out: Vec<(Uuid, Vec<T>)> = Vec::new();
    let mut index: HashMap<Uuid, usize> = HashMap::new();
    for (id, item) in items {
        let i = *index.entry(id).or_insert_with(|| {
            out.push((id, Vec::new()));
            out.len() - 1
        });
        out[i].1.push(item);
    }
    out
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Fetch limits of one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_wait_ms: i32,
    pub max_records: i32,
    pub max_bytes: i32,
}

/// The ShareFetch of a session step, with `acks` (partitions of the session) riding on it.
pub(crate) fn fetch_request(
    group: &str,
    member: &str,
    step: &FetchStep,
    acks: &[PartitionAcks],
    limits: Limits,
) -> ShareFetchRequest {
    let mut listed: Vec<(Uuid, fetch_req::FetchPartition)> = Vec::new();
    let ack_of = |sp: &SharePartition| {
        acks.iter()
            .find(|(p, _)| p == sp)
            .map(|(_, b)| batches_for_fetch(b))
            .unwrap_or_default()
    };
    for sp in &step.add {
        listed.push((
            sp.id,
            fetch_req::FetchPartition::default()
                .with_partition_index(sp.partition)
                .with_acknowledgement_batches(ack_of(sp)),
        ));
    }
    for (sp, _) in acks {
        if !step.add.contains(sp) {
            listed.push((
                sp.id,
                fetch_req::FetchPartition::default()
                    .with_partition_index(sp.partition)
                    .with_acknowledgement_batches(ack_of(sp)),
            ));
        }
    }
    let topics = by_topic(listed)
        .into_iter()
        .map(|(id, partitions)| {
            fetch_req::FetchTopic::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect();
    let forgotten = by_topic(step.forget.iter().map(|sp| (sp.id, sp.partition)))
        .into_iter()
        .map(|(id, partitions)| {
            fetch_req::ForgottenTopic::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect();
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(str_bytes(group))))
        .with_member_id(Some(str_bytes(member)))
        .with_share_session_epoch(step.epoch)
        .with_max_wait_ms(limits.max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(limits.max_bytes)
        .with_max_records(limits.max_records)
        .with_batch_size(limits.max_records)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten)
}

fn batches_for_fetch(batches: &[AckBatch]) -> Vec<fetch_req::AcknowledgementBatch> {
    batches
        .iter()
        .map(|b| {
            fetch_req::AcknowledgementBatch::default()
                .with_first_offset(b.first)
                .with_last_offset(b.last)
                .with_acknowledge_types(b.types.clone())
        })
        .collect()
}

/// A ShareAcknowledge at `epoch` (-1 also closes the session).
pub(crate) fn acknowledge_request(
    group: &str,
    member: &str,
    epoch: i32,
    acks: &[PartitionAcks],
) -> ShareAcknowledgeRequest {
    let topics = by_topic(acks.iter().map(|(sp, batches)| {
        (
            sp.id,
            ack_req::AcknowledgePartition::default()
                .with_partition_index(sp.partition)
                .with_acknowledgement_batches(
                    batches
                        .iter()
                        .map(|b| {
                            ack_req::AcknowledgementBatch::default()
                                .with_first_offset(b.first)
                                .with_last_offset(b.last)
                                .with_acknowledge_types(b.types.clone())
                        })
                        .collect(),
                ),
        )
    }))
    .into_iter()
    .map(|(id, partitions)| {
        ack_req::AcknowledgeTopic::default()
            .with_topic_id(id)
            .with_partitions(partitions)
    })
    .collect();
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(str_bytes(group))))
        .with_member_id(Some(str_bytes(member)))
        .with_share_session_epoch(epoch)
        .with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use nagare_log::batch::{build_batch, set_base_offset, Compression, NewRecord};
    use nagare_log::recompress::{recompress, TargetCodec};

    fn batch(base: i64, values: &[&str], codec: Compression) -> BytesMut {
        let records: Vec<NewRecord> = values
            .iter()
            .map(|v| NewRecord {
                value: Some(Bytes::copy_from_slice(v.as_bytes())),
                timestamp: 1,
                ..Default::default()
            })
            .collect();
        let mut b = build_batch(&records);
        if codec != Compression::None {
            b = recompress(&b, TargetCodec::default_for(codec))
                .unwrap()
                .unwrap();
        }
        set_base_offset(&mut b, base);
        b
    }

    fn acquired(first: i64, last: i64, count: i16) -> AcquiredRecords {
        AcquiredRecords::default()
            .with_first_offset(first)
            .with_last_offset(last)
            .with_delivery_count(count)
    }

    fn offsets(f: &Fetched) -> Vec<(i64, i16)> {
        f.records
            .iter()
            .map(|r| (r.offset, r.delivery_count))
            .collect()
    }

    #[test]
    fn only_acquired_records_are_returned_with_their_counts() {
        let topic: Arc<str> = "t".into();
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut data = batch(10, &["a", "b", "c", "d"], codec);
            data.extend_from_slice(&batch(14, &["e", "f"], codec));
            let data = data.freeze();
            let f = read_partition(
                &topic,
                3,
                Some(&data),
                &[acquired(15, 15, 2), acquired(11, 12, 1)],
            );
            assert_eq!(offsets(&f), [(11, 1), (12, 1), (15, 2)], "{codec:?}");
            assert_eq!(f.records[0].record.value.as_deref(), Some(&b"b"[..]));
            assert_eq!(f.records[2].partition, 3);
            assert!(f.settle.is_empty(), "{codec:?}: {:?}", f.settle);
        }
    }

    #[test]
    fn acquired_offsets_without_records_are_gaps() {
        let topic: Arc<str> = "t".into();
        // Offsets 0-1 hold records, 2-4 nothing (a marker, compaction), 5 a record; the
        // broker acquired 0..=7 (6 and 7 beyond the data).
        let mut data = batch(0, &["a", "b"], Compression::None);
        data.extend_from_slice(&batch(5, &["f"], Compression::None));
        let data = data.freeze();
        let f = read_partition(&topic, 0, Some(&data), &[acquired(0, 7, 1)]);
        assert_eq!(offsets(&f), [(0, 1), (1, 1), (5, 1)]);
        assert_eq!(
            f.settle,
            [
                AckRange {
                    first: 2,
                    last: 4,
                    kind: AckType::Gap
                },
                AckRange {
                    first: 6,
                    last: 7,
                    kind: AckType::Gap
                }
            ]
        );
        // A huge acquired range costs nothing per offset.
        let f = read_partition(&topic, 0, None, &[acquired(0, i64::MAX - 1, 1)]);
        assert_eq!(f.settle.len(), 1);
    }

    #[test]
    fn an_undecodable_batch_is_rejected_and_a_cut_batch_ignored() {
        let topic: Arc<str> = "t".into();
        let mut bad = batch(0, &["a", "b"], Compression::Gzip);
        let n = bad.len();
        bad[n - 3] ^= 0xff; // the gzip stream's checksum no longer matches
        bad[n - 5] ^= 0xff;
        let mut data = bad;
        data.extend_from_slice(&batch(2, &["c"], Compression::None));
        let cut = batch(3, &["d"], Compression::None);
        data.extend_from_slice(&cut[..cut.len() - 2]);
        let data = data.freeze();
        let f = read_partition(&topic, 0, Some(&data), &[acquired(0, 2, 1)]);
        assert_eq!(offsets(&f), [(2, 1)]);
        assert_eq!(
            f.settle,
            [AckRange {
                first: 0,
                last: 1,
                kind: AckType::Reject
            }]
        );
        // Garbage lengths end the walk without panicking.
        let junk = Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 2]);
        let f = read_partition(&topic, 0, Some(&junk), &[acquired(0, 0, 1)]);
        assert!(f.records.is_empty());
        assert_eq!(
            f.settle,
            [AckRange {
                first: 0,
                last: 0,
                kind: AckType::Gap
            }]
        );
    }

    #[test]
    fn requests_group_partitions_by_topic() {
        let sp = |t: &str, p: i32, id: u128| SharePartition {
            topic: t.into(),
            partition: p,
            id: Uuid::from_u128(id),
        };
        let step = FetchStep {
            epoch: 4,
            add: vec![sp("a", 0, 1), sp("b", 0, 2), sp("a", 1, 1)],
            forget: vec![sp("c", 5, 3)],
        };
        let acks = vec![
            (
                sp("a", 1, 1),
                vec![AckBatch {
                    first: 7,
                    last: 9,
                    types: vec![1],
                }],
            ),
            (
                sp("d", 0, 4),
                vec![AckBatch {
                    first: 0,
                    last: 0,
                    types: vec![2],
                }],
            ),
        ];
        let limits = Limits {
            max_wait_ms: 100,
            max_records: 10,
            max_bytes: 1000,
        };
        let req = fetch_request("g", "m", &step, &acks, limits);
        assert_eq!(req.share_session_epoch, 4);
        let shape: Vec<(u128, Vec<(i32, usize)>)> = req
            .topics
            .iter()
            .map(|t| {
                (
                    t.topic_id.as_u128(),
                    t.partitions
                        .iter()
                        .map(|p| (p.partition_index, p.acknowledgement_batches.len()))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (1, vec![(0, 0), (1, 1)]),
                (2, vec![(0, 0)]),
                (4, vec![(0, 1)])
            ]
        );
        assert_eq!(req.forgotten_topics_data[0].partitions, [5]);
        assert_eq!(req.max_records, 10);
        let req = acknowledge_request("g", "m", -1, &acks);
        assert_eq!(req.share_session_epoch, -1);
        assert_eq!(req.topics.len(), 2);
        assert_eq!(
            req.topics[0].partitions[0].acknowledgement_batches[0].last_offset,
            9
        );
    }
}
