//! A share group's settings: Kafka's group configs (`share.*`), set with
//! IncrementalAlterConfigs on a GROUP resource, stored in the share-group log.

use std::collections::BTreeMap;

use super::ShareError;

/// Every group config a share group knows, with Kafka 4.3's defaults.
pub const GROUP_CONFIGS: &[(&str, &str)] = &[
    ("share.auto.offset.reset", "latest"),
    ("share.record.lock.duration.ms", "30000"),
    ("share.delivery.count.limit", "5"),
    ("share.session.timeout.ms", "45000"),
    ("share.heartbeat.interval.ms", "5000"),
    ("share.isolation.level", "read_uncommitted"),
];

/// The effective settings of one share group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareSettings {
    /// `share.auto.offset.reset=earliest`: a new share partition starts at the log start.
    pub earliest: bool,
    pub lock_ms: i64,
    pub delivery_limit: i16,
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i32,
}

impl ShareSettings {
    /// The settings given the overrides set on the group.
    pub fn from_overrides(overrides: &BTreeMap<String, String>) -> ShareSettings {
        let get = |name: &str| {
            overrides
                .get(name)
                .map(String::as_str)
                .or_else(|| default(name))
        };
        let num = |name: &str, fallback: i64| {
            get(name)
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(fallback)
        };
        ShareSettings {
            earliest: get("share.auto.offset.reset") == Some("earliest"),
            lock_ms: num("share.record.lock.duration.ms", 30_000),
            delivery_limit: num("share.delivery.count.limit", 5).clamp(1, i64::from(i16::MAX))
                as i16,
            session_timeout_ms: num("share.session.timeout.ms", 45_000),
            heartbeat_interval_ms: num("share.heartbeat.interval.ms", 5_000)
                .clamp(1, i64::from(i32::MAX)) as i32,
        }
    }
}

/// Kafka's default for a group config.
pub fn default(name: &str) -> Option<&'static str> {
    GROUP_CONFIGS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
}

/// Refuses unknown names and values out of Kafka's ranges.
pub(super) fn validate(overrides: &BTreeMap<String, String>) -> Result<(), ShareError> {
    for (name, value) in overrides {
        let bad = || ShareError::InvalidConfig(format!("invalid value {value:?} for {name}"));
        let range = |lo: i64, hi: i64| match value.parse::<i64>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(()),
            _ => Err(bad()),
        };
        match name.as_str() {
            "share.auto.offset.reset" => {
                if !matches!(value.as_str(), "latest" | "earliest") {
                    return Err(bad());
                }
            }
            "share.record.lock.duration.ms" => range(1_000, 3_600_000)?,
            "share.delivery.count.limit" => range(2, 10)?,
            "share.session.timeout.ms" => range(1_000, 3_600_000)?,
            "share.heartbeat.interval.ms" => range(100, 3_600_000)?,
            "share.isolation.level" => {
                if !matches!(value.as_str(), "read_uncommitted" | "read_committed") {
                    return Err(bad());
                }
            }
            _ => {
                return Err(ShareError::InvalidConfig(format!(
                    "unknown group config {name}"
                )))
            }
        }
    }
    Ok(())
}
