//! Refused record batches never vanish silently: besides the error code in the produce
//! response, each refusal is counted in `nagare_rejected_total{protocol="kafka",reason}`
//! (the name the STOMP and forward front ends use) and logged, at most one line a second
//! per reason with the number of similar lines kept quiet.

use std::time::Instant;

use nagare_core::log_limiter::{LogLimiter, LOG_INTERVAL};

use crate::errors::ResponseError;

static LOG_LIMIT: LogLimiter = LogLimiter::new(LOG_INTERVAL);

/// The `reason` label for a produce error.
pub(crate) fn reason(error: ResponseError) -> &'static str {
    match error {
        ResponseError::MessageTooLarge | ResponseError::RecordListTooLarge => "record_too_large",
        ResponseError::CorruptMessage
        | ResponseError::InvalidRecord
        | ResponseError::UnsupportedForMessageFormat => "corrupt_batch",
        ResponseError::OutOfOrderSequenceNumber => "invalid_sequence",
        ResponseError::InvalidProducerEpoch => "invalid_producer_epoch",
        ResponseError::KafkaStorageError => "storage_error",
        ResponseError::UnknownTopicOrPartition => "unknown_topic",
        ResponseError::InvalidRequiredAcks => "invalid_acks",
        ResponseError::TransactionalIdAuthorizationFailed => "transactions_unsupported",
        ResponseError::TopicAuthorizationFailed => "not_authorized",
        ResponseError::NotLeaderOrFollower => "shutting_down",
        _ => "other",
    }
}

/// Counts and (rate-limited) logs the refusal of one partition's batches.
pub(crate) fn report(error: ResponseError, topic: &str, partition: i32, detail: Option<&str>) {
    let reason = reason(error);
    metrics::counter!("nagare_rejected_total", "protocol" => "kafka", "reason" => reason)
        .increment(1);
    let Some(suppressed) = LOG_LIMIT.allow(reason, Instant::now()) else {
        return;
    };
    tracing::warn!(
        topic,
        partition,
        reason,
        error = ?error,
        similar_not_logged = suppressed,
        "kafka record batch refused: {}",
        detail.unwrap_or("")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_the_cause() {
        assert_eq!(reason(ResponseError::MessageTooLarge), "record_too_large");
        assert_eq!(reason(ResponseError::CorruptMessage), "corrupt_batch");
        assert_eq!(
            reason(ResponseError::OutOfOrderSequenceNumber),
            "invalid_sequence"
        );
        assert_eq!(reason(ResponseError::KafkaStorageError), "storage_error");
        assert_eq!(
            reason(ResponseError::UnknownTopicOrPartition),
            "unknown_topic"
        );
    }
}
