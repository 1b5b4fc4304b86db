//! ACLs of the forward receiver: a route's topic needs Write for the connection's
//! principal (the handshake's user; `User:ANONYMOUS` without one). The dead-letter topic
//! is the receiver's own and needs none; dropped routes write nothing.
//!
//! A denied request is not stored and not acknowledged: it is counted in
//! `nagare_rejected_total{protocol="forward",reason="not_authorized"}`, logged (at most
//! one line per second) and the connection is closed after the requests before it are
//! acknowledged. Closing rather than waiting tells the sender at once; Fluentd's
//! `out_forward` then retries the chunk with its backoff instead of waiting out its ack
//! timeout, and a sender without acks learns of the refusal at all.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use nagare_core::log_limiter::{LogLimiter, LOG_INTERVAL};
use nagare_core::security::{AclCache, Authorizer, Operation, Principal, ResourceType, Security};

/// One connection's right to write topics, remembered per topic.
pub struct TopicAccess {
    authorizer: Arc<Authorizer>,
    cache: AclCache,
    peer: IpAddr,
}

/// Why a request was not stored.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{principal} is not authorized to Write topic {topic:?} (tag {tag:?})")]
pub struct Denied {
    pub principal: String,
    pub tag: String,
    pub topic: String,
}

static LOG_LIMIT: LogLimiter = LogLimiter::new(LOG_INTERVAL);

impl TopicAccess {
    pub fn new(security: &Security, principal: Principal, peer: IpAddr) -> TopicAccess {
        TopicAccess {
            authorizer: security.authorizer.clone(),
            cache: AclCache::new(security.authorizer.clone(), principal, peer),
            peer,
        }
    }

    /// Whether events of `tag` may be written to `topic`; a refusal is counted and logged.
    /// Costs one atomic load while the authorizer allows everything, a hash lookup after.
    pub fn check(&mut self, tag: &[u8], topic: &str) -> Result<(), Denied> {
        if self.authorizer.allows_everything()
            || self
                .cache
                .allowed(Operation::Write, ResourceType::Topic, topic)
        {
            return Ok(());
        }
        let denied = Denied {
            principal: self.cache.principal().to_string(),
            tag: String::from_utf8_lossy(tag).into_owned(),
            topic: topic.to_string(),
        };
        metrics::counter!(
            "nagare_rejected_total",
            "protocol" => "forward",
            "reason" => "not_authorized"
        )
        .increment(1);
        if let Some(suppressed) = LOG_LIMIT.allow("not_authorized", Instant::now()) {
            tracing::warn!(
                peer = %self.peer,
                principal = %denied.principal,
                tag = %denied.tag,
                topic = %denied.topic,
                similar_not_logged = suppressed,
                "forward request refused: not authorized to write the topic; not acknowledged, closing"
            );
        }
        Err(denied)
    }
}
