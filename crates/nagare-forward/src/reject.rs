//! Events refused one by one (the rest of their request is stored and acknowledged).
//!
//! A refused event must never vanish silently: each one is counted in
//! `nagare_rejected_total{protocol="forward",reason}`, logged (at most one line per
//! second, with the number of refusals the limit kept quiet), and written to the
//! dead-letter topic ([`crate::dead_letter`]) when one is configured.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// Log lines about refused events are limited to one per this interval.
const LOG_INTERVAL: Duration = Duration::from_secs(1);

static LAST_LOG: Mutex<Option<Instant>> = Mutex::new(None);
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);

/// Counts and (rate-limited) logs one refused event. `dead_letter` names where it went.
pub fn report(reason: Reason, detail: &str, tag: &str, topic: &str, dead_letter: Option<&str>) {
    metrics::counter!(
        "nagare_rejected_total",
        "protocol" => "forward",
        "reason" => reason.label()
    )
    .increment(1);
    if !log_allowed(Instant::now()) {
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let suppressed = SUPPRESSED.swap(0, Ordering::Relaxed);
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

fn log_allowed(now: Instant) -> bool {
    let mut last = match LAST_LOG.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    match *last {
        Some(t) if now.duration_since(t) < LOG_INTERVAL => false,
        _ => {
            *last = Some(now);
            true
        }
    }
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

    #[test]
    fn log_lines_are_rate_limited() {
        let t = Instant::now() + Duration::from_secs(3600);
        assert!(log_allowed(t));
        assert!(!log_allowed(t + Duration::from_millis(10)));
        assert!(log_allowed(t + LOG_INTERVAL));
    }
}
