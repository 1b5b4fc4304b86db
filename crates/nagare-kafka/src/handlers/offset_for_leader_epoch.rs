//! OffsetForLeaderEpoch (23): one node, one leader epoch (0) that never ended: every
//! epoch's end offset is the log end offset.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use nagare_core::security::Operation;

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::OffsetForLeaderEpoch,
    advertised: (2, 4),
    accepted: (2, 4),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: OffsetForLeaderEpochRequest = decode(&req)?;
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            // Describe on the topic, checked before its existence (as Kafka does).
            let authorized = session.topic_allowed(Operation::Describe, &t.topic);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = EpochEndOffset::default().with_partition(p.partition);
                    if !authorized {
                        return answer
                            .with_error_code(ResponseError::TopicAuthorizationFailed.counted())
                            .with_leader_epoch(-1)
                            .with_end_offset(-1);
                    }
                    match state.broker.partition(&t.topic, p.partition) {
                        Ok(part) => answer
                            .with_error_code(errors::NONE)
                            .with_leader_epoch(0)
                            .with_end_offset(part.log_end_offset()),
                        Err(e) => answer
                            .with_error_code(core_error(&e).counted())
                            .with_leader_epoch(-1)
                            .with_end_offset(-1),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    encode(
        &OffsetForLeaderEpochResponse::default().with_topics(topics),
        req.version,
    )
}
