//! DeleteRecords (21): moves each partition's log start (low watermark) to the offset
//! given (-1: the high watermark), deleting whole segments before it. Needs Delete on
//! the topic, as in Kafka.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, DeleteRecordsResponse};
use nagare_core::security::Operation;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DeleteRecords,
    advertised: (0, 2),
    accepted: (0, 2),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DeleteRecordsRequest = decode(&req)?;
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let authorized = session.topic_allowed(Operation::Delete, &t.name);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    if !authorized {
                        return result
                            .with_error_code(ResponseError::TopicAuthorizationFailed.counted());
                    }
                    let outcome = state
                        .broker
                        .partition(&t.name, p.partition_index)
                        .and_then(|partition| partition.delete_records_before(p.offset));
                    match outcome {
                        Ok(low) => result.with_error_code(errors::NONE).with_low_watermark(low),
                        Err(e) => result.with_error_code(core_error(&e).counted()),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    encode(
        &DeleteRecordsResponse::default().with_topics(topics),
        req.version,
    )
}
