//! DeleteTopics (20): by name (v1-5) or by name or topic id (v6).

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use nagare_core::security::Operation;
use uuid::Uuid;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DeleteTopics,
    advertised: (1, 6),
    accepted: (1, 6),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DeleteTopicsRequest = decode(&req)?;
    let wanted: Vec<(Option<String>, Uuid)> = if req.version >= 6 {
        request
            .topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.to_string()), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| (Some(n.to_string()), Uuid::nil()))
            .collect()
    };
    let broker = &state.broker;
    let version = req.version;
    let responses = wanted
        .into_iter()
        .map(|(name, id)| {
            let result = DeletableTopicResult::default()
                .with_name(name.clone().map(|n| TopicName(str_bytes(n))))
                .with_topic_id(id);
            let denied = |result: DeletableTopicResult| {
                result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.counted())
                    .with_error_message(
                        (version >= 5).then(|| str_bytes("not authorized to delete this topic")),
                    )
            };
            let topic = match &name {
                // By name, Delete is checked before existence: nothing is disclosed.
                Some(n) if !session.topic_allowed(Operation::Delete, n) => return denied(result),
                Some(n) => broker.topic(n),
                // By id, a topic the client may not even describe stays unknown to it.
                None => broker
                    .list_topics()
                    .into_iter()
                    .find(|t| t.id() == id)
                    .filter(|t| session.topic_allowed(Operation::Describe, t.name())),
            };
            let Some(topic) = topic else {
                let error_code = if name.is_some() {
                    ResponseError::UnknownTopicOrPartition.counted()
                } else {
                    ResponseError::UnknownTopicId.counted()
                };
                return result.with_error_code(error_code);
            };
            let result = result
                .with_name(Some(TopicName(str_bytes(topic.name()))))
                .with_topic_id(topic.id());
            if !session.topic_allowed(Operation::Delete, topic.name()) {
                return denied(result);
            }
            match broker.delete_topic(topic.name()) {
                Ok(()) => result.with_error_code(errors::NONE),
                Err(e) => result
                    .with_error_code(core_error(&e).counted())
                    .with_error_message((version >= 5).then(|| str_bytes(e.to_string()))),
            }
        })
        .map(|r| {
            if version >= 6 {
                r
            } else {
                r.with_topic_id(Uuid::nil())
            }
        })
        .collect();
    encode(
        &DeleteTopicsResponse::default().with_responses(responses),
        req.version,
    )
}
