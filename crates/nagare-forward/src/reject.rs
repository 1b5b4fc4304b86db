//! Events refused one by one (the rest of their request is stored and acknowledged).
//!
//! A refused event must never vanish silently: each one is counted in
//! `nagare_rejected_total{protocol="forward",reason}`, logged (at most one line per
//! second per reason, with the number of refusals the limit kept quiet), and written to the
//! dead-letter topic ([`crate::dead_letter`]) when one is configured.

use std::time::Instant;

use nagare_core::log_limiter::{LogLimiter, LOG_INTERVAL};

/// Why an event was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The stored record would exceed the topic's `max.message.bytes`.
    TooLarge,
    /// The record nests deeper than JSON conversion follows.
    TooDeep,
}

impl Reason {
    /// The `reason` label of the counter and the dead-letter header.
    pub fn label(self) -> &'static str {
        match self {
            Reason::TooLarge => "record_too_large",
            Reason::TooDeep => "record_too_deep",
        }
    }
}

/// One refused event of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejected {
    /// Index of the event in the request's entries.
    pub index: usize,
    pub reason: Reason,
}

impl Rejected {
    /// The reason in words; a size limit is quoted the way Kafka quotes it.
    /// `record_len`: the record's size as sent.
    pub fn detail(&self, record_len: usize, topic: &str, max_message_bytes: u32) -> String {
        match self.reason {
            Reason::TooLarge => format!(
                "record of {record_len} bytes (as sent) exceeds max.message.bytes \
                 {max_message_bytes} of topic {topic:?} once stored"
            ),
            Reason::TooDeep => format!(
                "record nested deeper than {} levels cannot be stored as JSON",
                crate::json::MAX_DEPTH
            ),
        }
    }
}

/// Log lines about refused events: at most one per second per reason.
static LOG_LIMIT: LogLimiter = LogLimiter::new(LOG_INTERVAL);

/// Counts and (rate-limited) logs one refused event. `dead_letter` names where it went.
pub fn report(reason: Reason, detail: &str, tag: &str, topic: &str, dead_letter: Option<&str>) {
    metrics::counter!(
        "nagare_rejected_total",
        "protocol" => "forward",
        "reason" => reason.label()
    )
    .increment(1);
    let Some(suppressed) = LOG_LIMIT.allow(reason.label(), Instant::now()) else {
        return;
    };
    tracing::warn!(
        tag,
        topic,
        reason = reason.label(),
        dead_letter = dead_letter.unwrap_or("(disabled: event dropped)"),
        similar_not_logged = suppressed,
        "forward event refused: {}",
        detail
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_quote_the_limit_like_kafka() {
        let r = Rejected {
            index: 3,
            reason: Reason::TooLarge,
        };
        assert_eq!(r.reason.label(), "record_too_large");
        assert_eq!(
            r.detail(2_000_000, "app", 1_048_588),
            "record of 2000000 bytes (as sent) exceeds max.message.bytes 1048588 of topic \"app\" once stored"
        );
    }
}
