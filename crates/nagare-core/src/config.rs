use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use nagare_log::{FlushPolicy, LogConfig, OpenFiles, Storage};
use serde::{Deserialize, Serialize};

use crate::CoreError;

/// When a topic's appends are fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum TopicFlush {
    /// The default: fsync (group-committed) before acknowledging requests that ask for the
    /// strongest ack (Kafka `acks=all`, STOMP SEND with `receipt` to a queue, forward chunk
    /// with `chunk`); everything else rides the page cache.
    #[default]
    Acks,
    /// Page cache only, whatever the client asks for (Kafka's own default).
    Never,
    /// fsync in the background at most this many milliseconds after an append, and for
    /// strong-ack requests before acknowledging.
    Interval(u64),
    /// fsync before acknowledging every append.
    Always,
}

impl std::str::FromStr for TopicFlush {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "acks" || s == "default" {
            return Ok(TopicFlush::Acks);
        }
        // The log knows every policy but `acks`; name them all when none matches.
        if !matches!(s, "never" | "always") && !s.starts_with("interval:") {
            return Err(format!(
                "unknown flush policy {s:?} (expected acks, never, always or interval:<ms>)"
            ));
        }
        Ok(match s.parse::<FlushPolicy>()? {
            FlushPolicy::Never => TopicFlush::Never,
            FlushPolicy::Always => TopicFlush::Always,
            FlushPolicy::Interval(d) => TopicFlush::Interval(d.as_millis() as u64),
        })
    }
}

impl std::fmt::Display for TopicFlush {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TopicFlush::Acks => f.write_str("acks"),
            TopicFlush::Never => f.write_str("never"),
            TopicFlush::Interval(ms) => write!(f, "interval:{ms}"),
            TopicFlush::Always => f.write_str("always"),
        }
    }
}

impl From<TopicFlush> for String {
    fn from(f: TopicFlush) -> String {
        f.to_string()
    }
}

impl TryFrom<String> for TopicFlush {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

/// Per-topic settings. Field names follow Kafka's topic configs where one exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicConfig {
    pub flush: TopicFlush,
    /// `retention.ms`; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes` per partition; -1 is unlimited.
    pub retention_bytes: i64,
    /// `segment.bytes`.
    pub segment_bytes: u64,
    /// `segment.ms`.
    pub segment_ms: u64,
    /// `max.message.bytes`: the largest record batch accepted.
    pub max_message_bytes: u32,
    /// `cleanup.policy`: only `delete` is implemented.
    pub cleanup_policy: String,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            flush: TopicFlush::Acks,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            max_message_bytes: 1024 * 1024 + 12,
            cleanup_policy: "delete".to_string(),
        }
    }
}

impl TopicConfig {
    /// The log settings for one partition of this topic, on the default storage (see
    /// [`BrokerConfig::log_config`] for a broker's own).
    pub fn log_config(&self) -> LogConfig {
        LogConfig {
            segment_bytes: self.segment_bytes,
            segment_age: Duration::from_millis(self.segment_ms),
            index_interval_bytes: 4096,
            retention_bytes: (self.retention_bytes >= 0).then_some(self.retention_bytes as u64),
            retention: (self.retention_ms >= 0)
                .then(|| Duration::from_millis(self.retention_ms as u64)),
            max_batch_bytes: self.max_message_bytes,
            flush: match self.flush {
                TopicFlush::Always => FlushPolicy::Always,
                TopicFlush::Interval(ms) => FlushPolicy::Interval(Duration::from_millis(ms)),
                TopicFlush::Acks | TopicFlush::Never => FlushPolicy::Never,
            },
            ..LogConfig::default()
        }
    }

    /// Every setting as Kafka-style `(name, value)` pairs, defaults included.
    pub fn entries(&self) -> BTreeMap<&'static str, String> {
        let mut m = BTreeMap::new();
        m.insert("cleanup.policy", self.cleanup_policy.clone());
        m.insert("retention.ms", self.retention_ms.to_string());
        m.insert("retention.bytes", self.retention_bytes.to_string());
        m.insert("segment.bytes", self.segment_bytes.to_string());
        m.insert("segment.ms", self.segment_ms.to_string());
        m.insert("max.message.bytes", self.max_message_bytes.to_string());
        m.insert("nagare.flush", self.flush.to_string());
        let (flush_messages, flush_ms) = match self.flush {
            TopicFlush::Always => ("1".to_string(), "0".to_string()),
            TopicFlush::Interval(ms) => (i64::MAX.to_string(), ms.to_string()),
            TopicFlush::Acks | TopicFlush::Never => (i64::MAX.to_string(), i64::MAX.to_string()),
        };
        m.insert("flush.messages", flush_messages);
        m.insert("flush.ms", flush_ms);
        m.insert("compression.type", "producer".to_string());
        m.insert("message.timestamp.type", "CreateTime".to_string());
        m.insert("min.insync.replicas", "1".to_string());
        m
    }

    /// Applies one Kafka-style setting (as sent by CreateTopics / AlterConfigs).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), CoreError> {
        let bad = |reason: String| CoreError::InvalidConfig {
            key: key.to_string(),
            reason,
        };
        let int = |v: &str| v.trim().parse::<i64>().map_err(|e| bad(e.to_string()));
        match key {
            "cleanup.policy" => {
                if value != "delete" {
                    return Err(bad("only \"delete\" is supported".into()));
                }
                self.cleanup_policy = value.to_string();
            }
            "retention.ms" => self.retention_ms = int(value)?,
            "retention.bytes" => self.retention_bytes = int(value)?,
            "segment.bytes" => {
                let v = int(value)?;
                if v < 1024 {
                    return Err(bad("must be at least 1024".into()));
                }
                self.segment_bytes = v as u64;
            }
            "segment.ms" => {
                let v = int(value)?;
                if v < 1 {
                    return Err(bad("must be positive".into()));
                }
                self.segment_ms = v as u64;
            }
            "max.message.bytes" => {
                let v = int(value)?;
                if !(0..=i32::MAX as i64).contains(&v) {
                    return Err(bad("out of range".into()));
                }
                self.max_message_bytes = v as u32;
            }
            "nagare.flush" => self.flush = value.parse().map_err(bad)?,
            "flush.messages" => {
                if int(value)? <= 1 {
                    self.flush = TopicFlush::Always;
                }
            }
            "flush.ms" => {
                let v = int(value)?;
                if (0..i64::MAX).contains(&v) {
                    self.flush = TopicFlush::Interval(v as u64);
                }
            }
            // Accepted and ignored: they have no meaning on one node or are the only choice.
            "compression.type"
            | "message.timestamp.type"
            | "min.insync.replicas"
            | "unclean.leader.election.enable" => {}
            _ => return Err(bad("unknown config".into())),
        }
        Ok(())
    }
}

/// Settings of the whole broker.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub data_dir: PathBuf,
    pub node_id: i32,
    /// Create a topic on first use (Kafka `auto.create.topics.enable`).
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic (`num.partitions`).
    pub default_partitions: u32,
    /// Settings of new topics unless overridden.
    pub topic_defaults: TopicConfig,
    /// How often retention, segment age and interval flushes are checked.
    pub maintenance_interval: Duration,
    /// The file system every log (topics and internal logs) lives on: the real one unless
    /// a test simulates a disk.
    pub storage: Storage,
    /// The open-file budget every log shares (the process-wide one by default).
    pub open_files: OpenFiles,
}

impl BrokerConfig {
    /// The log settings for one partition of a topic with these settings, on this
    /// broker's storage and open-file budget.
    pub fn log_config(&self, topic: &TopicConfig) -> LogConfig {
        LogConfig {
            storage: self.storage.clone(),
            open_files: self.open_files.clone(),
            ..topic.log_config()
        }
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            data_dir: PathBuf::from("./data"),
            node_id: 1,
            auto_create_topics: true,
            default_partitions: 1,
            topic_defaults: TopicConfig::default(),
            maintenance_interval: Duration::from_secs(30),
            storage: Storage::default(),
            open_files: OpenFiles::global(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_parses_and_prints() {
        for s in ["acks", "never", "always", "interval:250"] {
            assert_eq!(s.parse::<TopicFlush>().unwrap().to_string(), s);
        }
        assert!("sometimes".parse::<TopicFlush>().is_err());
    }

    #[test]
    fn set_validates() {
        let mut c = TopicConfig::default();
        c.set("retention.ms", "1000").unwrap();
        assert_eq!(c.retention_ms, 1000);
        assert!(c.set("retention.ms", "x").is_err());
        assert!(c.set("no.such.key", "1").is_err());
        assert!(c.set("cleanup.policy", "compact").is_err());
    }
}
