//! ShareAcknowledge (79): a share-group member accepts, releases or rejects records it
//! acquired, outside a fetch (explicit acknowledgement, commitSync, close). Runs the
//! share-session step like ShareFetch; epoch -1 closes the session once settled.

use std::sync::Arc;

use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use nagare_core::security::Operation;
use nagare_core::share_groups::now_ms;

use super::share_common::{self, AckBatch, TopicNames};
use super::share_v2;
use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, share_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::ShareAcknowledge,
    // kafka-protocol 0.18 has v1 only; v2 (renew acknowledgements) is v1 with one field
    // more in the request and one in the answer, handled by `share_v2`.
    advertised: (1, 2),
    accepted: (1, 2),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    mut req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let v2 = req.version >= 2;
    if v2 {
        let (body, _renew) = share_v2::ack_request_to_v1(&req.body)
            .ok_or_else(|| KafkaError::Malformed("ShareAcknowledge v2: body too short".into()))?;
        (req.body, req.version) = (body, 1);
    }
    let lock_ms = |group: &str| {
        let ms = state.share.settings(group).lock_ms;
        ms.clamp(0, i64::from(i32::MAX)) as i32
    };
    let reply = |response: &ShareAcknowledgeResponse, lock: i32| -> Result<Reply, KafkaError> {
        let reply = encode(response, 1)?;
        match reply {
            Reply::Body(b) if v2 => share_v2::ack_response_to_v2(&b, lock)
                .map(Reply::Body)
                .ok_or_else(|| KafkaError::Encode("ShareAcknowledge v2 answer".into())),
            other => Ok(other),
        }
    };
    let request: ShareAcknowledgeRequest = decode(&req)?;
    let whole = |e: ResponseError, message: String| {
        reply(
            &ShareAcknowledgeResponse::default()
                .with_error_code(e.counted())
                .with_error_message(Some(str_bytes(message))),
            0,
        )
    };
    let (Some(group_id), Some(member)) = (request.group_id.as_ref(), request.member_id.as_ref())
    else {
        return whole(
            ResponseError::InvalidRequest,
            "group and member id needed".into(),
        );
    };
    let (group, member) = (group_id.0.to_string(), member.to_string());
    if !session.group_allowed(Operation::Read, group_id) {
        return whole(
            ResponseError::GroupAuthorizationFailed,
            format!("not authorized to read group {group:?}"),
        );
    }
    let epoch = request.share_session_epoch;
    if let Err(e) = state.share.ack_session(&group, &member, epoch) {
        return whole(share_error(&e), e.to_string());
    }
    let holder = state.share.holder(&group, &member);
    let limit = state.share.settings(&group).delivery_limit;
    let lock = lock_ms(&group);
    let names = TopicNames::resolve(&state, &session, request.topics.iter().map(|t| t.topic_id));
    let leader = LeaderIdAndEpoch::default()
        .with_leader_id(state.node_id())
        .with_leader_epoch(0);
    let mut topics = Vec::new();
    for t in &request.topics {
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let code = match names.name(t.topic_id) {
                Err(code) => code,
                Ok(name) => match share_common::queue(&state, &group, name, p.partition_index) {
                    Err(code) => code,
                    Ok(q) => {
                        let batches: Vec<AckBatch<'_>> = p
                            .acknowledgement_batches
                            .iter()
                            .map(|b| AckBatch {
                                first: b.first_offset,
                                last: b.last_offset,
                                types: &b.acknowledge_types,
                            })
                            .collect();
                        let renew_until = v2.then(|| now_ms().saturating_add(i64::from(lock)));
                        share_common::settle(&q, holder, limit, renew_until, &batches)
                    }
                },
            };
            partitions.push(
                PartitionData::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_current_leader(leader.clone()),
            );
        }
        topics.push(
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    if epoch == -1 {
        state.share.end_session(&group, &member);
    }
    reply(
        &ShareAcknowledgeResponse::default()
            .with_error_code(errors::NONE)
            .with_responses(topics),
        lock,
    )
}
