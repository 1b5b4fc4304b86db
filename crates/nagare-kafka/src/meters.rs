//! The Kafka front end's Prometheus metrics: requests by API and version, their
//! latency, and the error codes handed to clients.
//!
//! Handles are looked up once per (API key, version) and kept in a static table, so a
//! request costs two atomic updates and no label hashing.

use std::sync::OnceLock;
use std::time::Instant;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use metrics::{Counter, Histogram};

/// Wide enough for every API key Kafka defines (as the handler table).
const KEYS: usize = 128;
/// Versions counted apart; later ones share the last slot's handles.
const VERSIONS: usize = 20;

struct ApiMeter {
    requests: Counter,
    duration: Histogram,
}

static TABLE: [[OnceLock<ApiMeter>; VERSIONS]; KEYS] =
    [const { [const { OnceLock::new() }; VERSIONS] }; KEYS];

fn meter(key: ApiKey, version: i16) -> &'static ApiMeter {
    let k = (key as usize).min(KEYS - 1);
    let v = usize::try_from(version).unwrap_or(0).min(VERSIONS - 1);
    TABLE[k][v].get_or_init(|| {
        let api = format!("{key:?}");
        ApiMeter {
            requests: metrics::counter!(
                "nagare_kafka_requests_total",
                "api" => api.clone(),
                "version" => version.to_string()
            ),
            duration: metrics::histogram!("nagare_kafka_request_duration_seconds", "api" => api),
        }
    })
}

/// One request being served: counted when started, its latency recorded when answered.
pub(crate) struct RequestTimer {
    meter: &'static ApiMeter,
    started: Instant,
}

impl RequestTimer {
    pub(crate) fn start(key: ApiKey, version: i16) -> RequestTimer {
        let meter = meter(key, version);
        meter.requests.increment(1);
        RequestTimer {
            meter,
            started: Instant::now(),
        }
    }

    /// The answer is ready (from reading the request to its response being queued).
    pub(crate) fn done(self) {
        self.meter
            .duration
            .record(self.started.elapsed().as_secs_f64());
    }
}

/// An error code put in a response, counted in `nagare_kafka_errors_total{error}`.
pub(crate) trait Counted {
    /// The code, after counting it.
    fn counted(self) -> i16;
}

impl Counted for ResponseError {
    fn counted(self) -> i16 {
        metrics::counter!(
            "nagare_kafka_errors_total",
            "error" => format!("{self:?}"),
            "code" => self.code().to_string()
        )
        .increment(1);
        self.code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_cached_per_key_and_version() {
        let a = meter(ApiKey::Produce, 9) as *const ApiMeter;
        let b = meter(ApiKey::Produce, 9) as *const ApiMeter;
        assert_eq!(a, b);
        // Out-of-range versions share the last slot instead of panicking.
        let _ = meter(ApiKey::Fetch, 500);
        let _ = meter(ApiKey::Fetch, -1);
        assert_eq!(ResponseError::OffsetOutOfRange.counted(), 1);
    }
}
