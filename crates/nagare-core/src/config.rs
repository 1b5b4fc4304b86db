use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use nagare_log::{FlushPolicy, LogConfig, OpenFiles, Storage};
use serde::{Deserialize, Serialize};

use crate::config_kinds::{CleanupPolicy, CompressionType, TimestampType};
use crate::CoreError;

/// When a topic's appends are fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

crate::config_kinds::serde_as_string!(TopicFlush);

/// Per-topic settings. Field names follow Kafka's topic configs (dots as underscores), so
/// the TOML `[topics]` section and the stored topic registry use Kafka's words; every
/// field has a default, so registries written by older versions still load.
///
/// Configs without meaning on one node (replication, tiered storage, throttles) are
/// accepted, validated and stored so clients and tools that set them keep working; see
/// `docs/kafka-configs.md` for which ones act.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// `cleanup.policy`: `delete`, `compact` or both.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long a tombstone outlives the cleaning that reached it.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records younger than this are never compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: records older than this make their segment eligible for
    /// compaction whatever the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`: dirty bytes / total bytes above which the cleaner runs.
    pub min_cleanable_dirty_ratio: f64,
    /// `compression.type`: codec batches are stored with (`producer` keeps theirs).
    pub compression_type: CompressionType,
    /// `compression.gzip.level` (-1 is the codec's default, else 1-9).
    pub compression_gzip_level: i32,
    /// `compression.lz4.level` (1-17).
    pub compression_lz4_level: i32,
    /// `compression.zstd.level` (-131072 to 22).
    pub compression_zstd_level: i32,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: how far in the past a CreateTime may be.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a CreateTime may be.
    pub message_timestamp_after_max_ms: i64,
    /// `file.delete.delay.ms`.
    pub file_delete_delay_ms: i64,
    /// `index.interval.bytes`: bytes between sparse offset-index entries.
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`.
    pub segment_index_bytes: u32,
    /// `segment.jitter.ms`.
    pub segment_jitter_ms: i64,
    /// `preallocate`.
    pub preallocate: bool,
    /// `min.insync.replicas` (one node: always satisfied by 1).
    pub min_insync_replicas: i32,
    /// `unclean.leader.election.enable`.
    pub unclean_leader_election_enable: bool,
    /// `leader.replication.throttled.replicas`.
    pub leader_replication_throttled_replicas: String,
    /// `follower.replication.throttled.replicas`.
    pub follower_replication_throttled_replicas: String,
    /// `local.retention.ms` (-2: same as `retention.ms`).
    pub local_retention_ms: i64,
    /// `local.retention.bytes` (-2: same as `retention.bytes`).
    pub local_retention_bytes: i64,
    /// `remote.storage.enable`: tiered storage is not available, so only `false`.
    pub remote_storage_enable: bool,
    /// `remote.log.copy.disable`.
    pub remote_log_copy_disable: bool,
    /// `remote.log.delete.on.disable`.
    pub remote_log_delete_on_disable: bool,
    /// `message.downconversion.enable` (nothing is down-converted here).
    pub message_downconversion_enable: bool,
    /// The Kafka names set explicitly on this topic (CreateTopics, AlterConfigs, the HTTP
    /// API) with the value given, so DescribeConfigs can tell overrides from defaults and
    /// a changed broker default reaches the topics that did not override it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, String>,
}

const WEEK_MS: i64 = 7 * 24 * 3600 * 1000;

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            flush: TopicFlush::Acks,
            retention_ms: WEEK_MS,
            retention_bytes: -1,
            segment_bytes: 1 << 30,
            segment_ms: WEEK_MS as u64,
            max_message_bytes: 1024 * 1024 + 12,
            cleanup_policy: CleanupPolicy::DELETE,
            delete_retention_ms: 24 * 3600 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            compression_type: CompressionType::Producer,
            compression_gzip_level: -1,
            compression_lz4_level: 9,
            compression_zstd_level: 3,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3600 * 1000,
            file_delete_delay_ms: 60_000,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 * 1024 * 1024,
            segment_jitter_ms: 0,
            preallocate: false,
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            leader_replication_throttled_replicas: String::new(),
            follower_replication_throttled_replicas: String::new(),
            local_retention_ms: -2,
            local_retention_bytes: -2,
            remote_storage_enable: false,
            remote_log_copy_disable: false,
            remote_log_delete_on_disable: false,
            message_downconversion_enable: true,
            overrides: BTreeMap::new(),
        }
    }
}

/// Every topic config name [`TopicConfig::set`] knows and [`TopicConfig::entries`] lists,
/// besides `nagare.flush`.
pub const TOPIC_CONFIG_NAMES: &[&str] = &[
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
];

impl TopicConfig {
    /// The log settings for one partition of this topic, on the default storage (see
    /// [`BrokerConfig::log_config`] for a broker's own).
    pub fn log_config(&self) -> LogConfig {
        LogConfig {
            segment_bytes: self.segment_bytes,
            segment_age: Duration::from_millis(self.segment_ms),
            index_interval_bytes: self.index_interval_bytes,
            // Compaction alone keeps data forever; `compact,delete` applies both.
            retention_bytes: (self.cleanup_policy.delete() && self.retention_bytes >= 0)
                .then_some(self.retention_bytes as u64),
            retention: (self.cleanup_policy.delete() && self.retention_ms >= 0)
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
        m.insert("cleanup.policy", self.cleanup_policy.to_string());
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
        m.insert("delete.retention.ms", self.delete_retention_ms.to_string());
        m.insert(
            "min.compaction.lag.ms",
            self.min_compaction_lag_ms.to_string(),
        );
        m.insert(
            "max.compaction.lag.ms",
            self.max_compaction_lag_ms.to_string(),
        );
        m.insert(
            "min.cleanable.dirty.ratio",
            self.min_cleanable_dirty_ratio.to_string(),
        );
        m.insert("compression.type", self.compression_type.to_string());
        m.insert(
            "compression.gzip.level",
            self.compression_gzip_level.to_string(),
        );
        m.insert(
            "compression.lz4.level",
            self.compression_lz4_level.to_string(),
        );
        m.insert(
            "compression.zstd.level",
            self.compression_zstd_level.to_string(),
        );
        m.insert(
            "message.timestamp.type",
            self.message_timestamp_type.to_string(),
        );
        m.insert(
            "message.timestamp.before.max.ms",
            self.message_timestamp_before_max_ms.to_string(),
        );
        m.insert(
            "message.timestamp.after.max.ms",
            self.message_timestamp_after_max_ms.to_string(),
        );
        m.insert(
            "file.delete.delay.ms",
            self.file_delete_delay_ms.to_string(),
        );
        m.insert(
            "index.interval.bytes",
            self.index_interval_bytes.to_string(),
        );
        m.insert("segment.index.bytes", self.segment_index_bytes.to_string());
        m.insert("segment.jitter.ms", self.segment_jitter_ms.to_string());
        m.insert("preallocate", self.preallocate.to_string());
        m.insert("min.insync.replicas", self.min_insync_replicas.to_string());
        m.insert(
            "unclean.leader.election.enable",
            self.unclean_leader_election_enable.to_string(),
        );
        m.insert(
            "leader.replication.throttled.replicas",
            self.leader_replication_throttled_replicas.clone(),
        );
        m.insert(
            "follower.replication.throttled.replicas",
            self.follower_replication_throttled_replicas.clone(),
        );
        m.insert("local.retention.ms", self.local_retention_ms.to_string());
        m.insert(
            "local.retention.bytes",
            self.local_retention_bytes.to_string(),
        );
        m.insert(
            "remote.storage.enable",
            self.remote_storage_enable.to_string(),
        );
        m.insert(
            "remote.log.copy.disable",
            self.remote_log_copy_disable.to_string(),
        );
        m.insert(
            "remote.log.delete.on.disable",
            self.remote_log_delete_on_disable.to_string(),
        );
        m.insert(
            "message.downconversion.enable",
            self.message_downconversion_enable.to_string(),
        );
        m
    }

    /// Applies one Kafka-style setting (as sent by CreateTopics / AlterConfigs) and
    /// remembers it as an override of this topic.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), CoreError> {
        self.apply(key, value)?;
        self.overrides.insert(key.to_string(), value.to_string());
        Ok(())
    }

    /// The settings of a topic with these `overrides` over `defaults` (the broker's topic
    /// defaults): what a topic becomes when an override is removed or a default changes.
    pub fn with_overrides(
        defaults: &TopicConfig,
        overrides: &BTreeMap<String, String>,
    ) -> Result<TopicConfig, CoreError> {
        let mut config = defaults.clone();
        config.overrides.clear();
        for (key, value) in overrides {
            config.set(key, value)?;
        }
        config.check()?;
        Ok(config)
    }

    /// The names set explicitly; for a topic with none recorded (stored before overrides
    /// were), the names whose value differs from `defaults`.
    pub fn effective_overrides(&self, defaults: &TopicConfig) -> BTreeMap<String, String> {
        let mut out = self.overrides.clone();
        // Recorded overrides are the whole truth: inferring more would pin values
        // derived from them (nagare.flush from flush.ms) past their removal.
        if !out.is_empty() {
            return out;
        }
        let base = defaults.entries();
        for (key, value) in self.entries() {
            if base.get(key) != Some(&value) && !out.contains_key(key) {
                // flush.* are views of nagare.flush; one override names it.
                if key == "flush.messages" || key == "flush.ms" {
                    continue;
                }
                out.insert(key.to_string(), value);
            }
        }
        out
    }

    /// Cross-field rules Kafka enforces once every setting is known.
    pub fn check(&self) -> Result<(), CoreError> {
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms {
            return Err(CoreError::InvalidConfig {
                key: "min.compaction.lag.ms".into(),
                reason: format!(
                    "conflict: min.compaction.lag.ms {} is above max.compaction.lag.ms {}",
                    self.min_compaction_lag_ms, self.max_compaction_lag_ms
                ),
            });
        }
        Ok(())
    }

    pub(crate) fn apply(&mut self, key: &str, value: &str) -> Result<(), CoreError> {
        let bad = |reason: String| CoreError::InvalidConfig {
            key: key.to_string(),
            reason,
        };
        let int = |v: &str| v.trim().parse::<i64>().map_err(|e| bad(e.to_string()));
        let at_least = |v: &str, min: i64| -> Result<i64, CoreError> {
            let n = int(v)?;
            if n < min {
                return Err(bad(format!("must be at least {min}")));
            }
            Ok(n)
        };
        let within = |v: &str, min: i64, max: i64| -> Result<i64, CoreError> {
            let n = int(v)?;
            if !(min..=max).contains(&n) {
                return Err(bad(format!("must be within [{min}, {max}]")));
            }
            Ok(n)
        };
        let boolean = |v: &str| match v.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(bad(format!("expected true or false, got {v:?}"))),
        };
        let i32_max = i32::MAX as i64;
        match key {
            "cleanup.policy" => self.cleanup_policy = value.parse().map_err(bad)?,
            "retention.ms" => self.retention_ms = at_least(value, -1)?,
            "retention.bytes" => self.retention_bytes = at_least(value, -1)?,
            "segment.bytes" => self.segment_bytes = within(value, 1024, i32_max)? as u64,
            "segment.ms" => self.segment_ms = at_least(value, 1)? as u64,
            "max.message.bytes" => self.max_message_bytes = within(value, 0, i32_max)? as u32,
            "nagare.flush" => self.flush = value.parse().map_err(bad)?,
            "flush.messages" => {
                if at_least(value, 1)? <= 1 {
                    self.flush = TopicFlush::Always;
                }
            }
            "flush.ms" => {
                let v = at_least(value, 0)?;
                if v < i64::MAX {
                    self.flush = TopicFlush::Interval(v as u64);
                }
            }
            "delete.retention.ms" => self.delete_retention_ms = at_least(value, 0)?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = at_least(value, 0)?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = at_least(value, 1)?,
            "min.cleanable.dirty.ratio" => {
                let r = value
                    .trim()
                    .parse::<f64>()
                    .map_err(|e| bad(e.to_string()))?;
                if !(0.0..=1.0).contains(&r) {
                    return Err(bad("must be within [0, 1]".into()));
                }
                self.min_cleanable_dirty_ratio = r;
            }
            "compression.type" => self.compression_type = value.parse().map_err(bad)?,
            "compression.gzip.level" => {
                let v = within(value, -1, 9)?;
                if v == 0 {
                    return Err(bad("must be -1 or within [1, 9]".into()));
                }
                self.compression_gzip_level = v as i32;
            }
            "compression.lz4.level" => self.compression_lz4_level = within(value, 1, 17)? as i32,
            "compression.zstd.level" => {
                self.compression_zstd_level = within(value, -131072, 22)? as i32
            }
            "message.timestamp.type" => self.message_timestamp_type = value.parse().map_err(bad)?,
            "message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms = at_least(value, 0)?
            }
            "message.timestamp.after.max.ms" => {
                self.message_timestamp_after_max_ms = at_least(value, 0)?
            }
            // Removed in Kafka 4.0; older clients may still send it: it bounds both sides.
            "message.timestamp.difference.max.ms" => {
                let v = at_least(value, 0)?;
                self.message_timestamp_before_max_ms = v;
                self.message_timestamp_after_max_ms = v;
            }
            "file.delete.delay.ms" => self.file_delete_delay_ms = at_least(value, 0)?,
            "index.interval.bytes" => self.index_interval_bytes = within(value, 0, i32_max)? as u32,
            "segment.index.bytes" => self.segment_index_bytes = within(value, 4, i32_max)? as u32,
            "segment.jitter.ms" => self.segment_jitter_ms = at_least(value, 0)?,
            "preallocate" => self.preallocate = boolean(value)?,
            "min.insync.replicas" => self.min_insync_replicas = within(value, 1, i32_max)? as i32,
            "unclean.leader.election.enable" => {
                self.unclean_leader_election_enable = boolean(value)?
            }
            "leader.replication.throttled.replicas" => {
                self.leader_replication_throttled_replicas =
                    throttled_replicas(value).map_err(bad)?
            }
            "follower.replication.throttled.replicas" => {
                self.follower_replication_throttled_replicas =
                    throttled_replicas(value).map_err(bad)?
            }
            "local.retention.ms" => self.local_retention_ms = at_least(value, -2)?,
            "local.retention.bytes" => self.local_retention_bytes = at_least(value, -2)?,
            "remote.storage.enable" => {
                if boolean(value)? {
                    return Err(bad("tiered storage is not available on this broker".into()));
                }
                self.remote_storage_enable = false;
            }
            "remote.log.copy.disable" => self.remote_log_copy_disable = boolean(value)?,
            "remote.log.delete.on.disable" => self.remote_log_delete_on_disable = boolean(value)?,
            "message.downconversion.enable" => self.message_downconversion_enable = boolean(value)?,
            // Removed in Kafka 4.0 and meaningless here (one record format, v2).
            "message.format.version" => {}
            _ => return Err(bad("unknown config".into())),
        }
        Ok(())
    }
}

/// `*.replication.throttled.replicas`: empty, `*`, or `partition:broker` pairs.
fn throttled_replicas(value: &str) -> Result<String, String> {
    let v = value.trim();
    if v.is_empty() || v == "*" {
        return Ok(v.to_string());
    }
    for pair in v.split(',') {
        let ok = pair.trim().split_once(':').is_some_and(|(p, b)| {
            p.trim().parse::<u32>().is_ok() && b.trim().parse::<i32>().is_ok()
        });
        if !ok {
            return Err(format!(
                "expected a list of partition:broker pairs or *, got {pair:?}"
            ));
        }
    }
    Ok(v.to_string())
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
    /// The log cleaner of compacted topics.
    pub log_cleaner: crate::CleanerSettings,
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
            log_cleaner: Default::default(),
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
        assert!(c.set("cleanup.policy", "shrink").is_err());
        c.set("cleanup.policy", "compact,delete").unwrap();
        assert!(c.cleanup_policy.compact() && c.cleanup_policy.delete());
        assert_eq!(c.overrides.len(), 2);
    }

    #[test]
    fn every_standard_name_is_accepted_and_listed() {
        let defaults = TopicConfig::default();
        let entries = defaults.entries();
        for name in TOPIC_CONFIG_NAMES {
            let value = entries.get(name).expect(name).clone();
            let mut c = TopicConfig::default();
            c.set(name, &value)
                .unwrap_or_else(|e| panic!("{name}={value}: {e}"));
            assert_eq!(c.entries().get(name), Some(&value), "{name}");
        }
    }

    #[test]
    fn compaction_settings_validate() {
        let mut c = TopicConfig::default();
        c.set("delete.retention.ms", "100").unwrap();
        c.set("min.compaction.lag.ms", "5").unwrap();
        c.set("max.compaction.lag.ms", "10").unwrap();
        c.set("min.cleanable.dirty.ratio", "0.01").unwrap();
        c.set("compression.type", "snappy").unwrap();
        assert_eq!(c.delete_retention_ms, 100);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.01);
        assert_eq!(c.compression_type, CompressionType::Snappy);
        assert!(c.check().is_ok());
        c.set("min.compaction.lag.ms", "50").unwrap();
        assert!(c.check().is_err());
        assert!(c.set("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(c.set("delete.retention.ms", "-1").is_err());
        assert!(c.set("remote.storage.enable", "true").is_err());
        assert!(c.set("compression.gzip.level", "0").is_err());
        assert!(c
            .set("leader.replication.throttled.replicas", "0:1,1:1")
            .is_ok());
        assert!(c.set("leader.replication.throttled.replicas", "x").is_err());
    }

    #[test]
    fn compact_only_keeps_data_forever() {
        let mut c = TopicConfig::default();
        c.set("cleanup.policy", "compact").unwrap();
        assert!(c.log_config().retention.is_none());
        c.set("cleanup.policy", "compact,delete").unwrap();
        assert!(c.log_config().retention.is_some());
    }

    #[test]
    fn overrides_follow_new_defaults() {
        let mut c = TopicConfig::default();
        c.set("retention.ms", "1000").unwrap();
        let defaults = TopicConfig {
            segment_ms: 5000,
            ..TopicConfig::default()
        };
        let moved = TopicConfig::with_overrides(&defaults, &c.overrides).unwrap();
        assert_eq!(moved.retention_ms, 1000);
        assert_eq!(moved.segment_ms, 5000);
        // A derived value does not outlive the override it came from.
        let mut f = TopicConfig::default();
        f.set("flush.ms", "100").unwrap();
        let over = f.effective_overrides(&TopicConfig::default());
        assert_eq!(over.len(), 1);
    }

    #[test]
    fn old_stored_config_loads() {
        let old = r#"{"flush":"acks","retention_ms":1000,"retention_bytes":-1,
            "segment_bytes":1073741824,"segment_ms":604800000,
            "max_message_bytes":1048588,"cleanup_policy":"delete"}"#;
        let c: TopicConfig = serde_json::from_str(old).unwrap();
        assert_eq!(c.retention_ms, 1000);
        assert_eq!(c.cleanup_policy, CleanupPolicy::DELETE);
        assert_eq!(c.delete_retention_ms, 86_400_000);
        let over = c.effective_overrides(&TopicConfig::default());
        assert_eq!(over.get("retention.ms").map(String::as_str), Some("1000"));
        assert_eq!(over.len(), 1);
        let round: TopicConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(round, c);
    }
}
