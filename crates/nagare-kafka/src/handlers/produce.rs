//! Produce (0): record batches are kept as the raw bytes the producer sent (v2 only, any
//! compression codec, stored as sent); the log validates each one (CRC, sizes) and assigns
//! its offsets, and idempotent batches go through the producer sequence check first.
//!
//! Transactional batches (the transactional attribute) come with the request's
//! `transactional_id`, which needs Write permission; the partition then tracks the open
//! transaction until the coordinator's marker. KIP-890 part 1
//! (`transaction.partition.verification.enable`, on by default as in Kafka): the first
//! transactional batch of a producer on a partition with no open transaction of its own
//! there is checked with the coordinator, and refused with INVALID_TXN_STATE (nothing
//! stored) unless the partition was added to the producer's ongoing transaction, so a
//! late batch of a transaction that already ended cannot open a hanging one. (The check
//! and the append are not one atomic step: a batch verified just before the coordinator
//! writes its marker can still land after it, which Kafka closes with a per-producer
//! verification guard that nagare does not have.) Control batches (markers) are written
//! only by the coordinator: a client sending one is refused with INVALID_RECORD, as Kafka
//! does.
//! Kafka's internal topics (`internal_topics.rs`) are written by their coordinators only:
//! INVALID_TOPIC_EXCEPTION, after the Write check, as Kafka.
//!
//! `CreateTime` timestamps outside the topic's `message.timestamp.before/after.max.ms`
//! refuse the partition's batches with INVALID_TIMESTAMP (`timestamps.rs`); on a
//! `LogAppendTime` topic the answer's `log_append_time_ms` is the time the broker stamped
//! (-1 otherwise, as Kafka).

use crate::meters::Counted;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::future::join_all;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use nagare_core::log::batch;
use nagare_core::security::{Operation, ResourceType};
use nagare_core::transactions::TxnError;
use nagare_core::AckLevel;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, batch_error, core_error, ResponseError};
use crate::internal_topics;
use crate::rejected;
use crate::session::Session;
use crate::timestamps;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::Produce,
    // Listed like a Kafka release does; 0-2 (message format v0/v1) are never answered.
    advertised: (0, 11),
    accepted: (3, 11),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

/// The outcome for one partition.
struct Outcome {
    error_code: i16,
    base_offset: i64,
    log_start_offset: i64,
    /// The broker's timestamp on a `LogAppendTime` topic, else -1.
    log_append_time: i64,
    message: Option<String>,
}

impl Outcome {
    fn error(error: ResponseError, message: impl Into<String>) -> Outcome {
        Outcome {
            error_code: error.counted(),
            base_offset: -1,
            log_start_offset: -1,
            log_append_time: -1,
            message: Some(message.into()),
        }
    }

    /// The error refusing this partition's batches, if any.
    fn rejected(&self) -> Option<ResponseError> {
        ResponseError::try_from_code(self.error_code)
    }
}

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: ProduceRequest = decode(&req)?;
    let ack = match request.acks {
        0 => Some(AckLevel::None),
        1 => Some(AckLevel::Leader),
        -1 => Some(AckLevel::Durable),
        _ => None,
    };
    let transactional_id = request
        .transactional_id
        .as_deref()
        .filter(|t| !t.is_empty());
    // As Kafka: a transactional producer needs Write on its transactional id before any
    // topic is looked at.
    let transaction_error = transactional_id.and_then(|id| {
        (!session.allowed(Operation::Write, ResourceType::TransactionalId, id))
            .then_some("not authorized to use this transactional id")
    });
    // Every partition of every topic is started at once, so that each queues its batches
    // in this turn: a pipelined request behind this one must not append anywhere before
    // this one has queued there (topics one after another would let it, from the second
    // topic on, and an idempotent producer would see its batches out of sequence).
    let mut topics: Vec<(String, Vec<(i32, Outcome)>)> =
        Vec::with_capacity(request.topic_data.len());
    let mut work = Vec::new();
    for (t, topic) in request.topic_data.into_iter().enumerate() {
        let name: String = topic.name.to_string();
        // One check per topic, not per partition or record (cached per connection).
        let authorized = session.topic_allowed(Operation::Write, &name);
        for p in topic.partition_data {
            let state = state.clone();
            let name = name.clone();
            work.push(async move {
                let outcome = match (ack, transaction_error) {
                    (None, _) => Outcome::error(
                        ResponseError::InvalidRequiredAcks,
                        "acks must be 0, 1 or -1",
                    ),
                    (Some(_), Some(reason)) => {
                        Outcome::error(ResponseError::TransactionalIdAuthorizationFailed, reason)
                    }
                    (Some(_), None) if !authorized => Outcome::error(
                        ResponseError::TopicAuthorizationFailed,
                        "not authorized to write to this topic",
                    ),
                    (Some(ack), None) => {
                        produce_partition(
                            &state,
                            &name,
                            p.index,
                            p.records,
                            ack,
                            transactional_id.map(|t| &**t),
                            req.followed,
                        )
                        .await
                    }
                };
                if let Some(error) = outcome.rejected() {
                    rejected::report(error, &name, p.index, outcome.message.as_deref());
                }
                (t, p.index, outcome)
            });
        }
        topics.push((name, Vec::new()));
    }
    for (t, index, outcome) in join_all(work).await {
        if let Some((_, parts)) = topics.get_mut(t) {
            parts.push((index, outcome));
        }
    }
    if request.acks == 0 {
        let failed = topics.iter().find_map(|(name, parts)| {
            parts
                .iter()
                .find(|(_, o)| o.error_code != 0)
                .map(|(index, o)| (name, *index, o.error_code))
        });
        return match failed {
            Some((topic, partition, code)) => Err(KafkaError::AcksZeroFailed {
                topic: topic.clone(),
                partition,
                code,
            }),
            None => Ok(Reply::Nothing),
        };
    }
    let version = req.version;
    let responses = topics
        .into_iter()
        .map(|(name, parts)| {
            TopicProduceResponse::default()
                .with_name(kafka_protocol::messages::TopicName(str_bytes(name)))
                .with_partition_responses(
                    parts
                        .into_iter()
                        .map(|(index, o)| {
                            PartitionProduceResponse::default()
                                .with_index(index)
                                .with_error_code(o.error_code)
                                .with_base_offset(o.base_offset)
                                .with_log_append_time_ms(o.log_append_time)
                                .with_log_start_offset(if version >= 5 {
                                    o.log_start_offset
                                } else {
                                    -1
                                })
                                .with_error_message(
                                    o.message.filter(|_| version >= 8).map(str_bytes),
                                )
                        })
                        .collect(),
                )
        })
        .collect();
    encode(
        &ProduceResponse::default().with_responses(responses),
        req.version,
    )
}

/// Appends one partition's batches through the core's append path, which owns the size
/// limit, the idempotent-producer sequence check, group commit and waking readers.
async fn produce_partition(
    state: &KafkaState,
    topic: &str,
    index: i32,
    records: Option<Bytes>,
    ack: AckLevel,
    transactional_id: Option<&str>,
    followed: bool,
) -> Outcome {
    if internal_topics::is_internal(topic) {
        return Outcome::error(
            ResponseError::InvalidTopicException,
            "clients cannot write to an internal topic",
        );
    }
    let topic = match state.broker.topic(topic) {
        Some(t) => t,
        None => return Outcome::error(ResponseError::UnknownTopicOrPartition, "unknown topic"),
    };
    let partition = match topic.partition(index) {
        Ok(p) => p,
        Err(e) => return Outcome::error(core_error(&e), e.to_string()),
    };
    let records = records.unwrap_or_default();
    if records.is_empty() {
        return Outcome::error(ResponseError::CorruptMessage, "no records");
    }
    let ranges = match batch::split_batches(&records) {
        Ok(r) => r,
        Err(e) => return Outcome::error(batch_error(&e), e.to_string()),
    };
    // Each header is parsed once for the checks below; a malformed batch (`None`) is
    // refused by the append path with its own error.
    let headers: Vec<Option<batch::BatchHeader>> = ranges
        .iter()
        .map(|r| batch::parse_header(&records[r.clone()]).ok())
        .collect();
    if let Some(refusal) = headers
        .iter()
        .flatten()
        .find_map(|h| refuse_batch(h, transactional_id.is_some()))
    {
        return Outcome::error(ResponseError::InvalidRecord, refusal);
    }
    let policy = topic.timestamp_policy();
    let now = nagare_core::log::now_ms();
    if let Some(why) = ranges.iter().zip(&headers).find_map(|(r, h)| {
        h.as_ref()
            .and_then(|h| timestamps::out_of_range(&records[r.clone()], h, policy, now))
    }) {
        return Outcome::error(ResponseError::InvalidTimestamp, why);
    }
    if let Some(id) = transactional_id {
        if let Err((error, why)) = verify_transaction(state, id, &partition, &headers) {
            return Outcome::error(error, why);
        }
    }
    // A transaction is acknowledged by its commit, and the coordinator fsyncs the
    // transaction's partitions before deciding it (a crash before that aborts it): its
    // records need no fsync of their own, even with acks=all.
    let ack = if ack == AckLevel::Durable && headers.iter().flatten().any(|h| h.is_transactional())
    {
        AckLevel::Leader
    } else {
        ack
    };
    // The log rewrites base offsets in place, so each batch needs its own buffer.
    let batches = ranges
        .into_iter()
        .map(|range| BytesMut::from(&records[range]))
        .collect();
    let mut base_offset = -1;
    let mut log_append_time = -1;
    // With more requests right behind this one, they queue first and share its write.
    let answers = if followed {
        partition.append_batches_together(batches, ack).await
    } else {
        partition.append_batches(batches, ack).await
    };
    for answer in answers {
        match answer {
            Ok(info) => {
                if base_offset < 0 {
                    base_offset = info.base_offset;
                    // A stamped batch's max timestamp is the broker's append time.
                    if policy.log_append_time {
                        log_append_time = info.max_timestamp;
                    }
                }
            }
            Err(e) => return Outcome::error(core_error(&e), e.to_string()),
        }
    }
    Outcome {
        error_code: errors::NONE,
        base_offset,
        log_start_offset: partition.log_start_offset(),
        log_append_time,
        message: None,
    }
}

/// KIP-890 part 1: a transactional batch of a producer with no open transaction on this
/// partition must belong to the producer's ongoing transaction at the coordinator (the
/// partition added by AddPartitionsToTxn). Errors as Kafka's verification gives them to
/// Produce: retriable NOT_ENOUGH_REPLICAS while the coordinator is busy ending the
/// transaction, INVALID_PRODUCER_EPOCH for a fenced producer.
fn verify_transaction(
    state: &KafkaState,
    transactional_id: &str,
    partition: &nagare_core::Partition,
    headers: &[Option<batch::BatchHeader>],
) -> Result<(), (ResponseError, String)> {
    let Some(header) = headers.iter().flatten().find(|h| h.is_transactional()) else {
        return Ok(());
    };
    // Later batches of a transaction already open here pay nothing, and the coordinator's
    // lock is taken only for the first one.
    if partition.in_transaction(header.producer_id)
        || !state.transactions.config().partition_verification
    {
        return Ok(());
    }
    let here = [(partition.topic().to_string(), partition.index())];
    match state.transactions.verify_partitions(
        transactional_id,
        header.producer_id,
        header.producer_epoch,
        &here,
    ) {
        Ok(found) if found.first() == Some(&true) => Ok(()),
        Ok(_) => Err((
            ResponseError::InvalidTxnState,
            "the partition is not in the producer's ongoing transaction (KIP-890 verification)"
                .to_string(),
        )),
        Err(TxnError::ConcurrentTransactions | TxnError::CoordinatorNotAvailable) => Err((
            ResponseError::NotEnoughReplicas,
            "the transaction is being ended; retry".to_string(),
        )),
        Err(e) => Err((errors::txn_error(&e, false, false), e.to_string())),
    }
}

/// Why a client's batch is refused before the append path, if it is: a control batch
/// (only the transaction coordinator writes markers), or a transactional batch in a
/// request without a transactional id.
fn refuse_batch(header: &batch::BatchHeader, transactional_request: bool) -> Option<&'static str> {
    if header.is_control() {
        return Some("control batches cannot be produced by clients");
    }
    if header.is_transactional() && !transactional_request {
        return Some("a transactional batch needs the request's transactional id");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::log::control::{build_control_batch, set_producer};

    fn header(b: &[u8]) -> batch::BatchHeader {
        batch::parse_header(b).unwrap()
    }

    #[test]
    fn markers_and_stray_transactional_batches_are_refused() {
        let marker = build_control_batch(1, 0, true, 0, 0);
        assert!(refuse_batch(&header(&marker), true).is_some());
        let mut b = batch::build_batch(&[batch::NewRecord::default()]);
        assert!(refuse_batch(&header(&b), false).is_none());
        set_producer(&mut b, 1, 0, 0, true);
        assert!(refuse_batch(&header(&b), false).is_some());
        assert!(refuse_batch(&header(&b), true).is_none());
    }
}
