//! Produce (0): record batches are kept as the raw bytes the producer sent (v2 only, any
//! compression codec, stored as sent); the log validates each one (CRC, sizes) and assigns
//! its offsets, and idempotent batches go through the producer sequence check first.
//!
//! Transactional batches (the transactional attribute) come with the request's
//! `transactional_id`, which needs Write permission; the partition then tracks the open
//! transaction until the coordinator's marker. Control batches (markers) are written only
//! by the coordinator: a client sending one is refused with INVALID_RECORD, as Kafka does.
//! Kafka's internal topics (`internal_topics.rs`) are written by their coordinators only:
//! INVALID_TOPIC_EXCEPTION, after the Write check, as Kafka.

use crate::meters::Counted;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::future::join_all;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use nagare_core::log::batch;
use nagare_core::security::{Operation, ResourceType};
use nagare_core::AckLevel;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, batch_error, core_error, ResponseError};
use crate::internal_topics;
use crate::rejected;
use crate::session::Session;
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
    message: Option<String>,
}

impl Outcome {
    fn error(error: ResponseError, message: impl Into<String>) -> Outcome {
        Outcome {
            error_code: error.counted(),
            base_offset: -1,
            log_start_offset: -1,
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
    let transactional = transactional_id.is_some();
    let mut topics = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name: String = topic.name.to_string();
        // One check per topic, not per partition or record (cached per connection).
        let authorized = session.topic_allowed(Operation::Write, &name);
        let work: Vec<_> = topic
            .partition_data
            .into_iter()
            .map(|p| {
                let state = state.clone();
                let name = name.clone();
                async move {
                    let outcome = match (ack, transaction_error) {
                        (None, _) => Outcome::error(
                            ResponseError::InvalidRequiredAcks,
                            "acks must be 0, 1 or -1",
                        ),
                        (Some(_), Some(reason)) => Outcome::error(
                            ResponseError::TransactionalIdAuthorizationFailed,
                            reason,
                        ),
                        (Some(_), None) if !authorized => Outcome::error(
                            ResponseError::TopicAuthorizationFailed,
                            "not authorized to write to this topic",
                        ),
                        (Some(ack), None) => {
                            produce_partition(&state, &name, p.index, p.records, ack, transactional)
                                .await
                        }
                    };
                    if let Some(error) = outcome.rejected() {
                        rejected::report(error, &name, p.index, outcome.message.as_deref());
                    }
                    (p.index, outcome)
                }
            })
            .collect();
        topics.push((name, join_all(work).await));
    }
    if request.acks == 0 {
        return Ok(Reply::Nothing);
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
                                .with_log_append_time_ms(-1)
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
    transactional: bool,
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
    if let Some(refusal) = ranges
        .iter()
        .find_map(|r| refuse_batch(&records[r.clone()], transactional))
    {
        return Outcome::error(ResponseError::InvalidRecord, refusal);
    }
    // The log rewrites base offsets in place, so each batch needs its own buffer.
    let batches = ranges
        .into_iter()
        .map(|range| BytesMut::from(&records[range]))
        .collect();
    let mut base_offset = -1;
    for answer in partition.append_batches(batches, ack).await {
        match answer {
            Ok(info) => {
                if base_offset < 0 {
                    base_offset = info.base_offset;
                }
            }
            Err(e) => return Outcome::error(core_error(&e), e.to_string()),
        }
    }
    Outcome {
        error_code: errors::NONE,
        base_offset,
        log_start_offset: partition.log_start_offset(),
        message: None,
    }
}

/// Why a client's batch is refused before the append path, if it is: a control batch
/// (only the transaction coordinator writes markers), or a transactional batch in a
/// request without a transactional id.
fn refuse_batch(batch: &[u8], transactional_request: bool) -> Option<&'static str> {
    let header = batch::parse_header(batch).ok()?;
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

    #[test]
    fn markers_and_stray_transactional_batches_are_refused() {
        let marker = build_control_batch(1, 0, true, 0, 0);
        assert!(refuse_batch(&marker, true).is_some());
        let mut b = batch::build_batch(&[batch::NewRecord::default()]);
        assert!(refuse_batch(&b, false).is_none());
        set_producer(&mut b, 1, 0, 0, true);
        assert!(refuse_batch(&b, false).is_some());
        assert!(refuse_batch(&b, true).is_none());
    }
}
