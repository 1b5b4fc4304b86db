//! The client's settings, read once from a [`ShareClientConfig`]: the Kafka client
//! properties it understands (librdkafka's names, since the same `[store.kafka]` table
//! configures the rdkafka side), defaults for the rest. Properties it does not know are
//! ignored; a known one with a value it cannot honour is an error.

use std::time::Duration;

use crate::security::Security;
use crate::{ShareClientConfig, ShareError};

/// Kafka's `request.timeout.ms` default, used when the config leaves it at zero.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub(crate) struct Settings {
    pub bootstrap: Vec<String>,
    pub client_id: String,
    /// Bound of every round trip (connecting, TLS and SASL included); a share fetch gets
    /// its wait on top.
    pub request_timeout: Duration,
    /// Longest a share fetch waits at the broker for records (`fetch.wait.max.ms`).
    /// Capped at half the request timeout: a broker answers one request of a connection
    /// at a time, so a heartbeat queued behind a long fetch must still fit its timeout.
    pub fetch_wait_max: Duration,
    /// Most bytes a share fetch asks for (`fetch.max.bytes`).
    pub fetch_max_bytes: i32,
    /// Largest response accepted (`receive.message.max.bytes`).
    pub max_response_bytes: usize,
    /// First and longest pause between retries (`retry.backoff.ms`, `retry.backoff.max.ms`).
    pub backoff: Duration,
    pub backoff_max: Duration,
    /// Sent in the heartbeat (`client.rack`).
    pub rack: Option<String>,
    pub security: Security,
}

impl Settings {
    pub(crate) fn from_config(config: &ShareClientConfig) -> Result<Settings, ShareError> {
        let bootstrap: Vec<String> = config
            .bootstrap
            .iter()
            .flat_map(|b| b.split(','))
            .map(|b| b.trim().to_string())
            .filter(|b| !b.is_empty())
            .collect();
        if bootstrap.is_empty() {
            return Err(ShareError::Config("no bootstrap broker given".into()));
        }
        let get = |name: &str| {
            config
                .properties
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim())
        };
        let request_timeout = if config.request_timeout.is_zero() {
            DEFAULT_REQUEST_TIMEOUT
        } else {
            config.request_timeout
        };
        let ms = |name: &str, default: u64| -> Result<Duration, ShareError> {
            number(name, get(name), default, 0, 3_600_000).map(Duration::from_millis)
        };
        let fetch_wait_max = ms("fetch.wait.max.ms", 500)?.min(request_timeout / 2);
        let backoff = ms("retry.backoff.ms", 100)?.max(Duration::from_millis(1));
        let backoff_max = ms("retry.backoff.max.ms", 1000)?.max(backoff);
        let fetch_max_bytes = number(
            "fetch.max.bytes",
            get("fetch.max.bytes"),
            50 * 1024 * 1024,
            1,
            i32::MAX as u64,
        )? as i32;
        let max_response_bytes = number(
            "receive.message.max.bytes",
            get("receive.message.max.bytes"),
            100_000_000,
            1000,
            i32::MAX as u64,
        )? as usize;
        let client_id = if config.client_id.is_empty() {
            "nagare-share-client".to_string()
        } else {
            config.client_id.clone()
        };
        Ok(Settings {
            bootstrap,
            client_id,
            request_timeout,
            fetch_wait_max,
            fetch_max_bytes,
            max_response_bytes,
            backoff,
            backoff_max,
            rack: get("client.rack")
                .filter(|r| !r.is_empty())
                .map(str::to_string),
            security: Security::from_properties(&get)?,
        })
    }

    /// The pause before retry number `attempt` (0 for the first): doubling from
    /// `backoff` up to `backoff_max`.
    pub(crate) fn backoff_for(&self, attempt: u32) -> Duration {
        self.backoff
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.backoff_max)
    }
}

fn number(
    name: &str,
    value: Option<&str>,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, ShareError> {
    let Some(v) = value else {
        return Ok(default);
    };
    match v.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ShareError::Config(format!(
            "{name} must be a number from {min} to {max}, not {v:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(props: &[(&str, &str)]) -> ShareClientConfig {
        ShareClientConfig {
            bootstrap: vec!["a:1, b:2".into(), "c:3".into()],
            client_id: String::new(),
            properties: props
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            request_timeout: Duration::ZERO,
        }
    }

    #[test]
    fn defaults_and_bootstrap_lists() {
        let s = Settings::from_config(&config(&[("linger.ms", "5")])).unwrap();
        assert_eq!(s.bootstrap, ["a:1", "b:2", "c:3"]);
        assert_eq!(s.request_timeout, DEFAULT_REQUEST_TIMEOUT);
        assert_eq!(s.fetch_wait_max, Duration::from_millis(500));
        assert_eq!(s.client_id, "nagare-share-client");
        assert_eq!(s.backoff_for(0), Duration::from_millis(100));
        assert_eq!(s.backoff_for(2), Duration::from_millis(400));
        assert_eq!(s.backoff_for(40), Duration::from_millis(1000));
    }

    #[test]
    fn known_properties_are_checked() {
        let s = Settings::from_config(&config(&[
            ("fetch.wait.max.ms", "100"),
            ("fetch.max.bytes", "1048576"),
            ("client.rack", "r1"),
        ]))
        .unwrap();
        assert_eq!(s.fetch_wait_max, Duration::from_millis(100));
        assert_eq!(s.fetch_max_bytes, 1 << 20);
        assert_eq!(s.rack.as_deref(), Some("r1"));
        let err = Settings::from_config(&config(&[("fetch.max.bytes", "lots")])).unwrap_err();
        assert!(err.to_string().contains("fetch.max.bytes"), "{err}");
        let mut empty = config(&[]);
        empty.bootstrap = vec![" ".into()];
        assert!(matches!(
            Settings::from_config(&empty),
            Err(ShareError::Config(_))
        ));
    }

    #[test]
    fn a_long_fetch_wait_stays_under_the_request_timeout() {
        let mut c = config(&[("fetch.wait.max.ms", "60000")]);
        c.request_timeout = Duration::from_secs(2);
        let s = Settings::from_config(&c).unwrap();
        assert_eq!(s.fetch_wait_max, Duration::from_secs(1));
    }
}
