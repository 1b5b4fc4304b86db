//! OffsetDelete (47): deletes committed offsets of topics the group no longer consumes.

use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};
use nagare_core::groups::TopicPartition;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, group_error, ResponseError};
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::OffsetDelete,
    advertised: (0, 0),
    accepted: (0, 0),
    call: |state, _session, req| Box::pin(handle(state, req)),
};

async fn handle(state: Arc<KafkaState>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: OffsetDeleteRequest = decode(&req)?;
    let partitions: Vec<TopicPartition> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let response = match state
        .groups
        .delete_offsets(&request.group_id.0, &partitions)
        .await
    {
        Err(e) => OffsetDeleteResponse::default().with_error_code(group_error(&e).code()),
        Ok(results) => {
            let mut results = results.into_iter();
            let topics = request
                .topics
                .iter()
                .map(|t| {
                    OffsetDeleteResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    let error = match results.next() {
                                        Some(Ok(())) => errors::NONE,
                                        Some(Err(e)) => group_error(&e).code(),
                                        None => ResponseError::UnknownServerError.code(),
                                    };
                                    OffsetDeleteResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(error)
                                })
                                .collect(),
                        )
                })
                .collect();
            OffsetDeleteResponse::default().with_topics(topics)
        }
    };
    encode(&response, req.version)
}
