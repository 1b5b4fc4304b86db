//! What DescribeConfigs says about each config besides its value: Kafka's type, a line
//! of documentation, the broker configs that are a topic config's default (its
//! synonyms), and whether it does anything on this broker. The texts are nagare's own;
//! `docs/kafka-configs.md` lists the same facts for people.

/// Kafka's `ConfigType` (DescribeConfigs v3+ `config_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Password = 9,
}

/// Kafka's `ConfigSource`, in the order synonyms are listed (most specific first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigSource {
    TopicConfig = 1,
    DynamicBrokerConfig = 2,
    DynamicDefaultBrokerConfig = 3,
    StaticBrokerConfig = 4,
    DefaultConfig = 5,
    /// Set on a group (Kafka's DYNAMIC_GROUP_CONFIG: share groups' `share.*`).
    DynamicGroupConfig = 8,
}

/// One topic config.
pub struct TopicConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    /// The broker configs giving this one's default, the one to alter first.
    pub broker_synonyms: &'static [&'static str],
    /// False for configs accepted and stored but without effect on one node.
    pub effective: bool,
    pub doc: &'static str,
}

const fn t(
    name: &'static str,
    kind: ConfigType,
    broker_synonyms: &'static [&'static str],
    effective: bool,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        kind,
        broker_synonyms,
        effective,
        doc,
    }
}

use ConfigType::*;

/// Every topic config, sorted by name.
pub static TOPIC_CONFIGS: &[TopicConfigDef] = &[
    t("cleanup.policy", List, &["log.cleanup.policy"], true,
      "delete: old segments are removed by retention.ms/retention.bytes; compact: the latest record of each key is kept; both may be given."),
    t("compression.gzip.level", Int, &["compression.gzip.level"], true,
      "Level used when the topic recompresses with gzip (-1: the codec's default)."),
    t("compression.lz4.level", Int, &["compression.lz4.level"], true,
      "Level used when the topic recompresses with lz4."),
    t("compression.type", String, &["compression.type"], true,
      "Codec batches are stored with; producer keeps the producer's codec, otherwise batches in another codec are recompressed on append."),
    t("compression.zstd.level", Int, &["compression.zstd.level"], true,
      "Level used when the topic recompresses with zstd."),
    t("delete.retention.ms", Long, &["log.cleaner.delete.retention.ms"], true,
      "How long a tombstone (null value) of a compacted topic is kept after the cleaner reached it."),
    t("file.delete.delay.ms", Long, &["log.segment.delete.delay.ms"], false,
      "Kafka waits this long before deleting a removed segment's files; nagare deletes them at once (readers keep their open files)."),
    t("flush.messages", Long, &["log.flush.interval.messages"], true,
      "1 fsyncs every append (nagare.flush=always); other values leave fsync to nagare.flush."),
    t("flush.ms", Long, &["log.flush.interval.ms"], true,
      "fsync at most this long after an append (nagare.flush=interval:<ms>)."),
    t("follower.replication.throttled.replicas", List, &[], false,
      "Replication throttling; there is no replication on one node."),
    t("index.interval.bytes", Int, &["log.index.interval.bytes"], true,
      "Bytes appended between two entries of the sparse offset and time indexes."),
    t("leader.replication.throttled.replicas", List, &[], false,
      "Replication throttling; there is no replication on one node."),
    t("local.retention.bytes", Long, &["log.local.retention.bytes"], false,
      "Local part of tiered storage retention; there is no tiered storage here (-2: as retention.bytes)."),
    t("local.retention.ms", Long, &["log.local.retention.ms"], false,
      "Local part of tiered storage retention; there is no tiered storage here (-2: as retention.ms)."),
    t("max.compaction.lag.ms", Long, &["log.cleaner.max.compaction.lag.ms"], true,
      "A record older than this makes its segment eligible for compaction whatever the dirty ratio."),
    t("max.message.bytes", Int, &["message.max.bytes"], true,
      "Largest record batch accepted (after recompression)."),
    t("message.downconversion.enable", Boolean, &["log.message.downconversion.enable"], false,
      "Nothing is down-converted: every client reads the v2 record format."),
    t("message.timestamp.after.max.ms", Long, &["log.message.timestamp.after.max.ms"], false,
      "Stored; timestamps are not checked against it yet."),
    t("message.timestamp.before.max.ms", Long, &["log.message.timestamp.before.max.ms"], false,
      "Stored; timestamps are not checked against it yet."),
    t("message.timestamp.type", String, &["log.message.timestamp.type"], true,
      "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the append time."),
    t("min.cleanable.dirty.ratio", Double, &["log.cleaner.min.cleanable.ratio"], true,
      "Share of not-yet-compacted bytes above which the cleaner compacts a partition."),
    t("min.compaction.lag.ms", Long, &["log.cleaner.min.compaction.lag.ms"], true,
      "Records younger than this are never compacted."),
    t("min.insync.replicas", Int, &["min.insync.replicas"], false,
      "One node is the only replica; acks=all is satisfied by it."),
    t("preallocate", Boolean, &["log.preallocate"], false,
      "Segments grow as written; preallocation is not done."),
    t("remote.log.copy.disable", Boolean, &[], false,
      "Tiered storage is not available."),
    t("remote.log.delete.on.disable", Boolean, &[], false,
      "Tiered storage is not available."),
    t("remote.storage.enable", Boolean, &[], false,
      "Tiered storage is not available: only false is accepted."),
    t("retention.bytes", Long, &["log.retention.bytes"], true,
      "Old segments of a partition are deleted while it is larger than this (-1: no limit)."),
    t("retention.ms", Long, &["log.retention.ms", "log.retention.minutes", "log.retention.hours"], true,
      "Segments whose newest record is older than this are deleted (-1: kept forever)."),
    t("segment.bytes", Int, &["log.segment.bytes"], true,
      "A new segment is started once the active one reaches this size."),
    t("segment.index.bytes", Int, &["log.index.size.max.bytes"], false,
      "Index files grow as needed; the size is not preallocated."),
    t("segment.jitter.ms", Long, &["log.roll.jitter.ms", "log.roll.jitter.hours"], false,
      "Rolls are not jittered."),
    t("segment.ms", Long, &["log.roll.ms", "log.roll.hours"], true,
      "A new segment is started once the active one is this old."),
    t("unclean.leader.election.enable", Boolean, &["unclean.leader.election.enable"], false,
      "No leader election on one node."),
    t("nagare.flush", String, &[], true,
      "nagare's fsync policy: acks (fsync before answering acks=all), never, always or interval:<ms>."),
];

/// The definition of a topic config by name.
pub fn topic_config_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// The topic config a broker config is the default of (`log.retention.ms` →
/// `retention.ms`), with the factor its value is in (hours and minutes to milliseconds).
pub fn topic_config_for_broker(name: &str) -> Option<(&'static str, i64)> {
    let factor = if name.ends_with(".hours") {
        3_600_000
    } else if name.ends_with(".minutes") {
        60_000
    } else {
        1
    };
    TOPIC_CONFIGS
        .iter()
        .find(|d| d.broker_synonyms.contains(&name))
        .map(|d| (d.name, factor))
}

/// A broker config that is not a topic default: its type, documentation and whether it
/// does anything here. All read-only (set in the TOML file or fixed).
pub struct BrokerConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    pub effective: bool,
    pub doc: &'static str,
}

const fn b(
    name: &'static str,
    kind: ConfigType,
    effective: bool,
    doc: &'static str,
) -> BrokerConfigDef {
    BrokerConfigDef {
        name,
        kind,
        effective,
        doc,
    }
}

/// Broker-only configs, sorted by name. Values come from the broker's settings (see
/// `Broker::describe_broker_configs`) or the Kafka default for those nagare fixes.
pub static BROKER_CONFIGS: &[BrokerConfigDef] = &[
    b(
        "auto.create.topics.enable",
        Boolean,
        true,
        "Create a topic on first use (the auto_create_topics setting).",
    ),
    b(
        "broker.id",
        Int,
        true,
        "This node's id (the node_id setting).",
    ),
    b(
        "default.replication.factor",
        Int,
        false,
        "Always 1: one node.",
    ),
    b(
        "delete.topic.enable",
        Boolean,
        true,
        "Topics can always be deleted.",
    ),
    b(
        "log.cleaner.enable",
        Boolean,
        true,
        "The cleaner runs for topics whose cleanup.policy has compact.",
    ),
    b(
        "log.dirs",
        String,
        true,
        "The data directory (the data_dir setting).",
    ),
    b(
        "log.retention.check.interval.ms",
        Long,
        true,
        "How often retention and segment age are checked (the maintenance_interval_ms setting).",
    ),
    b(
        "node.id",
        Int,
        true,
        "This node's id (the node_id setting).",
    ),
    b(
        "num.partitions",
        Int,
        true,
        "Partitions of an auto-created topic (the default_partitions setting).",
    ),
    b(
        "offsets.topic.replication.factor",
        Short,
        false,
        "Always 1: committed offsets live in an internal log on this node.",
    ),
    b(
        "process.roles",
        List,
        false,
        "One process is broker and controller.",
    ),
    b(
        "transaction.state.log.min.isr",
        Int,
        false,
        "Always 1: one node.",
    ),
    b(
        "transaction.state.log.replication.factor",
        Short,
        false,
        "Always 1: one node.",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_topic_config_has_a_definition() {
        for name in crate::TOPIC_CONFIG_NAMES {
            assert!(topic_config_def(name).is_some(), "{name}");
        }
        let names: Vec<_> = TOPIC_CONFIGS.iter().map(|d| d.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names.len(), sorted.len());
    }

    #[test]
    fn broker_synonyms_map_back() {
        assert_eq!(
            topic_config_for_broker("log.retention.hours"),
            Some(("retention.ms", 3_600_000))
        );
        assert_eq!(
            topic_config_for_broker("message.max.bytes"),
            Some(("max.message.bytes", 1))
        );
        assert_eq!(topic_config_for_broker("num.partitions"), None);
    }
}
