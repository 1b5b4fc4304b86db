//! CreatePartitions (37): grows a topic to the requested partition count.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse};
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::CreatePartitions,
    advertised: (0, 3),
    accepted: (0, 3),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: CreatePartitionsRequest = decode(&req)?;
    let results = request
        .topics
        .iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            // Alter on the topic, checked before anything else about it.
            if !session.topic_allowed(Operation::Alter, &t.name) {
                return result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.counted())
                    .with_error_message(Some(str_bytes("not authorized to alter this topic")));
            }
            let outcome = if t.count <= 0 {
                Err(nagare_core::CoreError::InvalidPartitions(t.count as i64))
            } else {
                state
                    .broker
                    .create_partitions(&t.name, t.count as u32, request.validate_only)
            };
            match outcome {
                Ok(()) => result.with_error_code(errors::NONE),
                Err(e) => result
                    .with_error_code(core_error(&e).counted())
                    .with_error_message(Some(str_bytes(e.to_string()))),
            }
        })
        .collect();
    encode(
        &CreatePartitionsResponse::default().with_results(results),
        req.version,
    )
}
