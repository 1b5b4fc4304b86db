//! OffsetDelete (47): deletes committed offsets of topics the group no longer consumes.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetDeleteRequest, OffsetDeleteResponse};
use nagare_core::groups::TopicPartition;
use nagare_core::security::Operation;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, group_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::OffsetDelete,
    advertised: (0, 0),
    accepted: (0, 0),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: OffsetDeleteRequest = decode(&req)?;
    if !session.group_allowed(Operation::Delete, &request.group_id) {
        let response = OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.counted());
        return encode(&response, req.version);
    }
    // Read on each topic too: the partitions of others are answered
    // TOPIC_AUTHORIZATION_FAILED and left alone.
    let authorized: Vec<bool> = request
        .topics
        .iter()
        .map(|t| session.topic_allowed(Operation::Read, &t.name))
        .collect();
    let partitions: Vec<TopicPartition> = request
        .topics
        .iter()
        .zip(&authorized)
        .filter(|(_, ok)| **ok)
        .flat_map(|(t, _)| {
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
        Err(e) => OffsetDeleteResponse::default().with_error_code(group_error(&e).counted()),
        Ok(results) => {
            let mut results = results.into_iter();
            let topics = request
                .topics
                .iter()
                .zip(&authorized)
                .map(|(t, ok)| {
                    OffsetDeleteResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    let error = if !ok {
                                        ResponseError::TopicAuthorizationFailed.counted()
                                    } else {
                                        match results.next() {
                                            Some(Ok(())) => errors::NONE,
                                            Some(Err(e)) => group_error(&e).counted(),
                                            None => ResponseError::UnknownServerError.counted(),
                                        }
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
