//! DescribeProducers (61): the producers each partition knows (idempotent and
//! transactional): epoch, last sequence and timestamp, the coordinator epoch of the
//! last marker and the start of an open transaction, as `kafka-transactions.sh
//! describe-producers` and the Admin client's `describeProducers` show them.
//!
//! Authorization as in Kafka: Read on the topic, else TOPIC_AUTHORIZATION_FAILED for
//! each of its partitions.

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use nagare_core::security::Operation;
use nagare_core::ProducerStateInfo;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeProducers,
    advertised: (0, 0),
    accepted: (0, 0),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DescribeProducersRequest = decode(&req)?;
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let allowed = session.topic_allowed(Operation::Read, &t.name);
        let topic = state.broker.topic(&t.name);
        let mut partitions = Vec::with_capacity(t.partition_indexes.len());
        for index in t.partition_indexes {
            let answer = PartitionResponse::default().with_partition_index(index);
            let partition = if !allowed {
                Err(ResponseError::TopicAuthorizationFailed)
            } else {
                match &topic {
                    None => Err(ResponseError::UnknownTopicOrPartition),
                    Some(topic) => topic.partition(index).map_err(|e| core_error(&e)),
                }
            };
            let answer = match partition {
                Err(e) => answer.with_error_code(e.counted()),
                Ok(p) => match p.load_producer_states().await {
                    Err(e) => answer.with_error_code(core_error(&e).counted()),
                    Ok(()) => answer
                        .with_error_code(errors::NONE)
                        .with_active_producers(p.producer_states().iter().map(wire).collect()),
                },
            };
            partitions.push(answer);
        }
        topics.push(
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    encode(
        &DescribeProducersResponse::default().with_topics(topics),
        req.version,
    )
}

fn wire(p: &ProducerStateInfo) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(p.producer_epoch as i32)
        .with_last_sequence(p.last_sequence)
        .with_last_timestamp(p.last_timestamp)
        .with_coordinator_epoch(p.coordinator_epoch)
        .with_current_txn_start_offset(p.current_txn_start_offset)
}
