//! What ShareFetch and ShareAcknowledge share: naming share partitions by topic id, the
//! ACL check on them, and settling a partition's acknowledgement batches
//! (GAP=0, ACCEPT=1, RELEASE=2, REJECT=3) on its queue.

use std::collections::HashMap;
use std::sync::Arc;

use nagare_core::queues::{Holder, Queue, Settle};
use nagare_core::security::Operation;
use uuid::Uuid;

use crate::errors::{self, core_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::KafkaState;

/// Topic ids of the request resolved to names once: `Err` is the error code for every
/// partition of that topic (unknown id, or not allowed to Read it).
pub(crate) struct TopicNames {
    names: HashMap<Uuid, Result<String, i16>>,
}

impl TopicNames {
    pub(crate) fn resolve(
        state: &KafkaState,
        session: &Session,
        ids: impl IntoIterator<Item = Uuid>,
    ) -> TopicNames {
        let mut names = HashMap::new();
        let mut topics = None;
        for id in ids {
            if names.contains_key(&id) {
                continue;
            }
            let all = topics.get_or_insert_with(|| state.broker.list_topics());
            let name = match all.iter().find(|t| t.id() == id) {
                Some(t) if session.topic_allowed(Operation::Read, t.name()) => {
                    Ok(t.name().to_string())
                }
                Some(_) => Err(ResponseError::TopicAuthorizationFailed.counted()),
                None => Err(ResponseError::UnknownTopicId.counted()),
            };
            names.insert(id, name);
        }
        TopicNames { names }
    }

    pub(crate) fn name(&self, id: Uuid) -> Result<&str, i16> {
        match self.names.get(&id) {
            Some(Ok(n)) => Ok(n),
            Some(Err(e)) => Err(*e),
            None => Err(ResponseError::UnknownTopicId.code()),
        }
    }
}

/// The queue of `group` over a share partition, or the partition's error code.
pub(crate) fn queue(
    state: &KafkaState,
    group: &str,
    topic: &str,
    partition: i32,
) -> Result<Arc<Queue>, i16> {
    state
        .share
        .queue(group, topic, partition)
        .map_err(|e| core_error(&e).counted())
}

/// One acknowledgement batch as the wire has it.
pub(crate) struct AckBatch<'a> {
    pub first: i64,
    pub last: i64,
    pub types: &'a [i8],
}

/// Settles a partition's acknowledgement batches for `holder`; the partition's
/// acknowledge error code (INVALID_REQUEST for malformed batches, INVALID_RECORD_STATE
/// when some record was not acquired by this member, e.g. its lock expired). RENEW (4,
/// v2 only) locks the records again until `renew_until`.
pub(crate) fn settle(
    queue: &Queue,
    holder: Holder,
    limit: i16,
    renew_until: Option<i64>,
    batches: &[AckBatch<'_>],
) -> i16 {
    let mut error = errors::NONE;
    for b in batches {
        let span = b.last - b.first + 1;
        let well_formed = b.last >= b.first
            && span <= 1_000_000
            && (b.types.len() == 1 || b.types.len() as i64 == span);
        let kinds: Option<Vec<Option<Settle>>> = b
            .types
            .iter()
            .map(|t| match t {
                0 => Some(None),
                1 => Some(Some(Settle::Accept)),
                2 => Some(Some(Settle::Release)),
                3 => Some(Some(Settle::Reject)),
                4 if renew_until.is_some() => Some(Some(Settle::Renew)),
                _ => None,
            })
            .collect();
        let Some(kinds) = kinds.filter(|_| well_formed) else {
            error = ResponseError::InvalidRequest.counted();
            continue;
        };
        let until = renew_until.unwrap_or(0);
        if !queue.settle_acquired(holder, b.first, b.last, &kinds, limit, until) {
            error = ResponseError::InvalidRecordState.counted();
        }
    }
    error
}
