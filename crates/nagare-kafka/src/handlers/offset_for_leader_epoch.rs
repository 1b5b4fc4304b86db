//! OffsetForLeaderEpoch (23): one node, one leader epoch (0) that never ended: every
//! epoch's end offset is the log end offset.

use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::{decode, encode, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error};
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::OffsetForLeaderEpoch,
    advertised: (2, 4),
    accepted: (2, 4),
    call: |state, _session, req| Box::pin(handle(state, req)),
};

async fn handle(state: Arc<KafkaState>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: OffsetForLeaderEpochRequest = decode(&req)?;
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = EpochEndOffset::default().with_partition(p.partition);
                    match state.broker.partition(&t.topic, p.partition) {
                        Ok(part) => answer
                            .with_error_code(errors::NONE)
                            .with_leader_epoch(0)
                            .with_end_offset(part.log_end_offset()),
                        Err(e) => answer
                            .with_error_code(core_error(&e).code())
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
