//! ShareFetch (78): a share-group member's fetch (KIP-932). Runs the share-session step,
//! settles the acknowledgements piggybacked on it, then acquires records from the
//! group's queue of each session partition (long-polling up to MaxWaitMs for some),
//! answering them as record batches with their acquired ranges and delivery counts.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ShareFetchRequest, ShareFetchResponse};
use nagare_core::log::batch::{build_batch, set_base_offset, NewRecord};
use nagare_core::queues::{Acquired, Queue};
use nagare_core::security::Operation;
use nagare_core::share_groups::{now_ms, SharePartition};
use tokio::time::Instant;
use uuid::Uuid;

use super::share_common::{self, AckBatch, TopicNames};
use super::share_v2::{self, V2Fields};
use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, share_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ShareFetch,
    // kafka-protocol 0.18 has v1 only; v2 (acquire modes, renew acks) is v1 with two
    // fields more, cut out by `share_v2`.
    advertised: (1, 2),
    accepted: (1, 2),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

/// Records per fetch when the request says 0 (Kafka's `max.poll.records` default).
const DEFAULT_MAX_RECORDS: usize = 500;

/// One partition of the answer being built.
struct Part {
    topic_id: Uuid,
    index: i32,
    error: i16,
    ack_error: i16,
    acquired: Vec<Acquired>,
}

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    mut req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    // A v2 request is answered as v1: the answers are the same on the wire.
    let mut v2 = V2Fields::default();
    let renewing = req.version >= 2;
    if renewing {
        let (body, fields) = share_v2::fetch_request_to_v1(&req.body)
            .ok_or_else(|| KafkaError::Malformed("ShareFetch v2: body too short".into()))?;
        (req.body, req.version, v2) = (body, 1, fields);
    }
    let request: ShareFetchRequest = decode(&req)?;
    let whole = |e: ResponseError, message: String| {
        encode(
            &ShareFetchResponse::default()
                .with_error_code(e.counted())
                .with_error_message(Some(str_bytes(message))),
            req.version,
        )
    };
    let (Some(group), Some(member)) = (request.group_id.as_ref(), request.member_id.as_ref())
    else {
        return whole(
            ResponseError::InvalidRequest,
            "group and member id needed".into(),
        );
    };
    let (group, member) = (group.0.to_string(), member.to_string());
    if !session.group_allowed(
        Operation::Read,
        &request.group_id.clone().unwrap_or_default(),
    ) {
        return whole(
            ResponseError::GroupAuthorizationFailed,
            format!("not authorized to read group {group:?}"),
        );
    }
    let epoch = request.share_session_epoch;
    let has_acks = request.topics.iter().any(|t| {
        t.partitions
            .iter()
            .any(|p| !p.acknowledgement_batches.is_empty())
    });
    if epoch == 0 && has_acks {
        return whole(
            ResponseError::InvalidRequest,
            "acknowledgements in a request opening a share session".into(),
        );
    }
    let names = TopicNames::resolve(
        &state,
        &session,
        request
            .topics
            .iter()
            .map(|t| t.topic_id)
            .chain(request.forgotten_topics_data.iter().map(|t| t.topic_id)),
    );
    let add: Vec<SharePartition> = request
        .topics
        .iter()
        .filter_map(|t| Some((names.name(t.topic_id).ok()?, &t.partitions)))
        .flat_map(|(n, ps)| ps.iter().map(move |p| (n.to_string(), p.partition_index)))
        .collect();
    let forget: Vec<SharePartition> = request
        .forgotten_topics_data
        .iter()
        .filter_map(|t| Some((names.name(t.topic_id).ok()?, &t.partitions)))
        .flat_map(|(n, ps)| ps.iter().map(move |p| (n.to_string(), *p)))
        .collect();
    let fetch_from = match state
        .share
        .fetch_session(&group, &member, epoch, &add, &forget)
    {
        Ok(p) => p,
        Err(e) => return whole(share_error(&e), e.to_string()),
    };
    let holder = state.share.holder(&group, &member);
    let settings = state.share.settings(&group);
    tracing::debug!(%group, %member, epoch, ?add, ?forget, ?fetch_from, "share fetch");

    // Acknowledgements first: what they release may be acquired again below.
    let mut parts: Vec<Part> = Vec::new();
    for t in &request.topics {
        for p in &t.partitions {
            let mut part = Part {
                topic_id: t.topic_id,
                index: p.partition_index,
                error: errors::NONE,
                ack_error: errors::NONE,
                acquired: Vec::new(),
            };
            match names.name(t.topic_id) {
                Err(code) => part.error = code,
                Ok(name) if !p.acknowledgement_batches.is_empty() => {
                    match share_common::queue(&state, &group, name, p.partition_index) {
                        Ok(q) => {
                            let batches: Vec<AckBatch<'_>> = p
                                .acknowledgement_batches
                                .iter()
                                .map(|b| AckBatch {
                                    first: b.first_offset,
                                    last: b.last_offset,
                                    types: &b.acknowledge_types,
                                })
                                .collect();
                            let renew_until =
                                renewing.then(|| now_ms().saturating_add(settings.lock_ms));
                            part.ack_error = share_common::settle(
                                &q,
                                holder,
                                settings.delivery_limit,
                                renew_until,
                                &batches,
                            );
                        }
                        Err(code) => part.ack_error = code,
                    }
                }
                Ok(_) => continue,
            }
            parts.push(part);
        }
    }
    if epoch == -1 {
        state.share.end_session(&group, &member);
        return answer(&state, parts, settings.lock_ms, req.version);
    }
    // A renewing fetch (v2) only settles and renews: it acquires nothing.
    if v2.renew {
        return answer(&state, parts, settings.lock_ms, req.version);
    }

    // The session's partitions and their queues.
    let mut queues: Vec<(Uuid, i32, Arc<Queue>)> = Vec::new();
    for (topic, index) in &fetch_from {
        let Some(id) = state.broker.topic(topic).map(|t| t.id()) else {
            continue;
        };
        match share_common::queue(&state, &group, topic, *index) {
            Ok(q) => queues.push((id, *index, q)),
            Err(code) => parts.push(Part {
                topic_id: id,
                index: *index,
                error: code,
                ack_error: errors::NONE,
                acquired: Vec::new(),
            }),
        }
    }
    // MaxRecords is a hard limit only in v2's record-limit mode; otherwise (v1, and v2's
    // default batch-optimized mode) the last batch reached is handed out whole, as Kafka
    // does, so a consumer needs fewer fetches.
    let record_limit = v2.acquire_mode == 1;
    let max_records = match request.max_records {
        n if n > 0 => n as usize,
        _ => DEFAULT_MAX_RECORDS,
    };
    let wait = Duration::from_millis(
        (request.max_wait_ms.max(0) as u64).min(u64::from(state.config.max_fetch_wait_ms)),
    );
    let deadline = Instant::now() + wait;
    // Start after where the last request stopped, so no partition starves.
    loop {
        // Registered before trying, so a release or append in between still wakes us.
        let mut wakers: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = Vec::new();
        for (_, _, q) in &queues {
            wakers.push(Box::pin(q.available()));
            let mut rx = q.partition().subscribe();
            rx.borrow_and_update();
            wakers.push(Box::pin(async move {
                let _ = rx.changed().await;
            }));
        }
        let mut left = max_records;
        let now = now_ms();
        for (id, index, q) in &queues {
            if left == 0 {
                break;
            }
            let got = if record_limit {
                q.acquire(holder, left, now, settings.lock_ms)
            } else {
                q.acquire_batches(holder, left, now, settings.lock_ms)
            };
            if got.is_empty() {
                continue;
            }
            left = left.saturating_sub(got.len());
            match parts
                .iter_mut()
                .find(|p| p.topic_id == *id && p.index == *index)
            {
                Some(p) => p.acquired.extend(got),
                None => parts.push(Part {
                    topic_id: *id,
                    index: *index,
                    error: errors::NONE,
                    ack_error: errors::NONE,
                    acquired: got,
                }),
            }
        }
        if left < max_records || queues.is_empty() || Instant::now() >= deadline {
            break;
        }
        let _ = tokio::time::timeout_at(deadline, futures_util::future::select_all(wakers)).await;
    }
    for (id, index, q) in &queues {
        if let Some(p) = parts
            .iter()
            .find(|p| p.topic_id == *id && p.index == *index)
        {
            let bytes: usize = p
                .acquired
                .iter()
                .map(|a| a.record.value.as_ref().map_or(0, |v| v.len()))
                .sum();
            q.partition()
                .count_out(p.acquired.len() as u64, bytes as u64);
        }
    }
    answer(&state, parts, settings.lock_ms, req.version)
}

/// The response: partitions grouped by topic, acquired records as batches.
fn answer(
    state: &KafkaState,
    parts: Vec<Part>,
    lock_ms: i64,
    version: i16,
) -> Result<Reply, KafkaError> {
    let mut topics: Vec<ShareFetchableTopicResponse> = Vec::new();
    for part in parts {
        let (records, acquired) = encode_acquired(&part.acquired);
        let data = PartitionData::default()
            .with_partition_index(part.index)
            .with_error_code(part.error)
            .with_acknowledge_error_code(part.ack_error)
            .with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(state.node_id())
                    .with_leader_epoch(0),
            )
            .with_records(records)
            .with_acquired_records(acquired);
        match topics.iter_mut().find(|t| t.topic_id == part.topic_id) {
            Some(t) => t.partitions.push(data),
            None => topics.push(
                ShareFetchableTopicResponse::default()
                    .with_topic_id(part.topic_id)
                    .with_partitions(vec![data]),
            ),
        }
    }
    encode(
        &ShareFetchResponse::default()
            .with_error_code(errors::NONE)
            .with_acquisition_lock_timeout_ms(lock_ms.clamp(0, i64::from(i32::MAX)) as i32)
            .with_responses(topics),
        version,
    )
}

/// The acquired records as record batches (one per run of consecutive offsets) and
/// their acquired ranges (one per run of consecutive offsets with one delivery count).
/// Records are never null in this response (the Java client refuses a null), so no
/// records is an empty set of batches.
fn encode_acquired(acquired: &[Acquired]) -> (Option<Bytes>, Vec<AcquiredRecords>) {
    if acquired.is_empty() {
        return (Some(Bytes::new()), Vec::new());
    }
    let mut sorted: Vec<&Acquired> = acquired.iter().collect();
    sorted.sort_by_key(|a| a.offset);
    let mut out = BytesMut::new();
    let mut ranges: Vec<AcquiredRecords> = Vec::new();
    let mut run: Vec<NewRecord> = Vec::new();
    let mut run_start = sorted[0].offset;
    let flush = |run: &mut Vec<NewRecord>, start: i64, out: &mut BytesMut| {
        if run.is_empty() {
            return;
        }
        let mut batch = build_batch(run);
        set_base_offset(&mut batch, start);
        out.extend_from_slice(&batch);
        run.clear();
    };
    for (i, a) in sorted.iter().enumerate() {
        if i > 0 && a.offset != sorted[i - 1].offset + 1 {
            flush(&mut run, run_start, &mut out);
            run_start = a.offset;
        }
        run.push(NewRecord {
            key: a.record.key.clone(),
            value: a.record.value.clone(),
            headers: a.record.headers.clone(),
            timestamp: a.record.timestamp,
        });
        match ranges.last_mut() {
            Some(r) if r.last_offset + 1 == a.offset && r.delivery_count == a.delivery_count => {
                r.last_offset = a.offset;
            }
            _ => ranges.push(
                AcquiredRecords::default()
                    .with_first_offset(a.offset)
                    .with_last_offset(a.offset)
                    .with_delivery_count(a.delivery_count),
            ),
        }
    }
    flush(&mut run, run_start, &mut out);
    (Some(out.freeze()), ranges)
}
