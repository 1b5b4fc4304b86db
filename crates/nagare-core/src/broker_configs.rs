//! Configs as Kafka's admin APIs see them: each topic's overrides over the broker's
//! defaults, dynamic broker configs (Kafka's AlterConfigs on a BROKER resource: `""` for
//! the cluster-wide default, this node's id for its own), and the described view of both
//! with sources and synonyms.
//!
//! Dynamic broker configs live in `DATA/.nagare/broker-configs.json`, rewritten atomically
//! (temp file + fsync + rename) on every change like the topic registry. Only broker
//! configs that are a topic config's default can change at run time (as Kafka's dynamic
//! log configs); a change reaches at once every topic that does not override it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::blocking::off_runtime;
use crate::config_catalog::{
    topic_config_for_broker, ConfigSource, ConfigType, BROKER_CONFIGS, TOPIC_CONFIGS,
};
use crate::{Broker, CoreError, TopicConfig};

/// Which dynamic broker configs: the cluster-wide default or this node's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerScope {
    ClusterDefault,
    Node,
}

/// One described config.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    pub kind: ConfigType,
    pub doc: &'static str,
    /// Where the value could come from, most specific first (Kafka's synonyms).
    pub synonyms: Vec<ConfigSynonym>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigSynonym {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct DynamicState {
    #[serde(default)]
    cluster: BTreeMap<String, String>,
    #[serde(default)]
    node: BTreeMap<String, String>,
}

pub(crate) struct DynamicConfigs {
    path: PathBuf,
    state: RwLock<DynamicState>,
    /// Serializes changes and the file.
    write: Mutex<()>,
}

impl DynamicConfigs {
    pub(crate) fn load(data_dir: &Path) -> Result<DynamicConfigs, CoreError> {
        let dir = data_dir.join(".nagare");
        std::fs::create_dir_all(&dir).map_err(|e| CoreError::io(&dir, e))?;
        let path = dir.join("broker-configs.json");
        let state = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                CoreError::io(
                    &path,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => DynamicState::default(),
            Err(e) => return Err(CoreError::io(&path, e)),
        };
        Ok(DynamicConfigs {
            path,
            state: RwLock::new(state),
            write: Mutex::new(()),
        })
    }

    fn save(&self, state: &DynamicState) -> Result<(), CoreError> {
        let bytes = serde_json::to_vec_pretty(state).map_err(|e| {
            CoreError::io(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            )
        })?;
        let tmp = self.path.with_extension("json.tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|e| CoreError::io(&self.path, e))
    }
}

/// `defaults` with the dynamic broker configs of `layers` applied, least specific first.
fn layered_defaults(
    static_defaults: &TopicConfig,
    layers: &[&BTreeMap<String, String>],
) -> TopicConfig {
    let mut config = static_defaults.clone();
    config.overrides.clear();
    for layer in layers {
        for (key, value) in layer.iter() {
            if let Some((topic_key, value)) = as_topic_setting(key, value) {
                // Validated when stored; a value refused now is skipped, not fatal.
                if let Err(e) = config.apply(topic_key, &value) {
                    tracing::warn!(config = key, error = %e, "ignoring a stored broker config");
                }
            }
        }
    }
    config
}

/// The topic setting a broker config gives, its value converted from hours or minutes.
fn as_topic_setting(key: &str, value: &str) -> Option<(&'static str, String)> {
    let (topic_key, factor) = topic_config_for_broker(key)?;
    if factor == 1 {
        return Some((topic_key, value.to_string()));
    }
    let v = value.trim().parse::<i64>().ok()?;
    Some((topic_key, v.saturating_mul(factor).to_string()))
}

impl Broker {
    /// The settings a new topic gets: the static `[topics]` defaults under the dynamic
    /// broker configs (cluster default, then this node's).
    pub fn topic_defaults(&self) -> TopicConfig {
        let state = self.dynamic.state.read();
        layered_defaults(
            &self.config().topic_defaults,
            &[&state.cluster, &state.node],
        )
    }

    /// The dynamic broker configs set at `scope`.
    pub fn dynamic_broker_configs(&self, scope: BrokerScope) -> BTreeMap<String, String> {
        let state = self.dynamic.state.read();
        match scope {
            BrokerScope::ClusterDefault => state.cluster.clone(),
            BrokerScope::Node => state.node.clone(),
        }
    }

    /// The configs set explicitly on a topic.
    pub fn topic_overrides(&self, topic: &str) -> Result<BTreeMap<String, String>, CoreError> {
        let t = self
            .topic(topic)
            .ok_or_else(|| CoreError::UnknownTopic(topic.to_string()))?;
        Ok(t.config().effective_overrides(&self.topic_defaults()))
    }

    /// Replaces a topic's overrides (what is not in `overrides` returns to the default).
    /// Blocking: fsyncs the topic registry.
    pub fn set_topic_overrides(
        &self,
        topic: &str,
        overrides: &BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), CoreError> {
        if self.topic(topic).is_none() {
            return Err(CoreError::UnknownTopic(topic.to_string()));
        }
        let config = TopicConfig::with_overrides(&self.topic_defaults(), overrides)?;
        if validate_only {
            return Ok(());
        }
        self.update_topic_config(topic, config)
    }

    /// Replaces the dynamic broker configs of `scope`; topics without an override of a
    /// changed default follow it. Only configs that are topic defaults may be set.
    /// Blocking: fsyncs the file and possibly the topic registry.
    pub fn set_dynamic_broker_configs(
        &self,
        scope: BrokerScope,
        configs: &BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), CoreError> {
        let mut probe = self.config().topic_defaults.clone();
        for (key, value) in configs {
            let Some((topic_key, value)) = as_topic_setting(key, value) else {
                let reason = if BROKER_CONFIGS.iter().any(|d| d.name == key) {
                    "cannot be updated dynamically (set it in the configuration file)"
                } else {
                    "unknown broker config"
                };
                return Err(CoreError::InvalidConfig {
                    key: key.clone(),
                    reason: reason.into(),
                });
            };
            probe.apply(topic_key, &value).map_err(|e| match e {
                CoreError::InvalidConfig { reason, .. } => CoreError::InvalidConfig {
                    key: key.clone(),
                    reason,
                },
                other => other,
            })?;
        }
        if validate_only {
            return Ok(());
        }
        off_runtime(|| {
            let _w = self.dynamic.write.lock();
            let old_defaults = self.topic_defaults();
            let mut next = self.dynamic.state.read().clone();
            match scope {
                BrokerScope::ClusterDefault => next.cluster = configs.clone(),
                BrokerScope::Node => next.node = configs.clone(),
            }
            self.dynamic.save(&next)?;
            let overrides: Vec<_> = self
                .list_topics()
                .into_iter()
                .map(|t| {
                    let o = t.config().effective_overrides(&old_defaults);
                    (t, o)
                })
                .collect();
            *self.dynamic.state.write() = next;
            let new_defaults = self.topic_defaults();
            for (topic, overrides) in overrides {
                match TopicConfig::with_overrides(&new_defaults, &overrides) {
                    Ok(config) if config != topic.config() => {
                        self.update_topic_config(topic.name(), config)?;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(topic = topic.name(), error = %e, "topic keeps its settings: its overrides conflict with the new defaults")
                    }
                }
            }
            Ok(())
        })
    }

    /// Every config of a topic with its source and synonyms.
    pub fn describe_topic_configs(&self, topic: &str) -> Result<Vec<ConfigEntry>, CoreError> {
        let t = self
            .topic(topic)
            .ok_or_else(|| CoreError::UnknownTopic(topic.to_string()))?;
        let defaults = self.topic_defaults();
        let config = t.config();
        let overrides = config.effective_overrides(&defaults);
        let values = config.entries();
        let layers = self.default_layers();
        Ok(TOPIC_CONFIGS
            .iter()
            .map(|def| {
                let mut synonyms = Vec::new();
                if let Some(v) = overrides.get(def.name) {
                    synonyms.push(ConfigSynonym {
                        name: def.name.to_string(),
                        value: Some(v.clone()),
                        source: ConfigSource::TopicConfig,
                    });
                }
                synonyms.extend(default_synonyms(def.name, def.broker_synonyms, &layers));
                let source = synonyms
                    .first()
                    .map_or(ConfigSource::DefaultConfig, |s| s.source);
                ConfigEntry {
                    name: def.name.to_string(),
                    value: values.get(def.name).cloned(),
                    source,
                    read_only: false,
                    sensitive: false,
                    kind: def.kind,
                    doc: def.doc,
                    synonyms,
                }
            })
            .collect())
    }

    /// The broker's configs: every topic default under its broker name, then the
    /// broker-only ones (`scope` Node), or only the cluster-wide dynamic ones
    /// (`ClusterDefault`, as Kafka answers for the resource `""`).
    pub fn describe_broker_configs(&self, scope: BrokerScope) -> Vec<ConfigEntry> {
        let layers = self.default_layers();
        let mut out = Vec::new();
        for def in TOPIC_CONFIGS {
            for (i, broker_name) in def.broker_synonyms.iter().enumerate() {
                let mut synonyms = default_synonyms(def.name, &[broker_name], &layers);
                if scope == BrokerScope::ClusterDefault {
                    synonyms.retain(|s| s.source == ConfigSource::DynamicDefaultBrokerConfig);
                    if synonyms.is_empty() {
                        continue;
                    }
                }
                // hours/minutes forms are listed only when set, as Kafka shows null.
                let set = synonyms
                    .first()
                    .filter(|s| s.source != ConfigSource::DefaultConfig);
                if i > 0 && set.is_none() {
                    continue;
                }
                let Some(first) = synonyms.first() else {
                    continue;
                };
                out.push(ConfigEntry {
                    name: broker_name.to_string(),
                    value: first.value.clone(),
                    source: first.source,
                    read_only: false,
                    sensitive: false,
                    kind: def.kind,
                    doc: def.doc,
                    synonyms,
                });
            }
        }
        if scope == BrokerScope::Node {
            let c = self.config();
            for def in BROKER_CONFIGS {
                let value = match def.name {
                    "auto.create.topics.enable" => c.auto_create_topics.to_string(),
                    "broker.id" | "node.id" => c.node_id.to_string(),
                    "log.dirs" => c.data_dir.display().to_string(),
                    "log.retention.check.interval.ms" => {
                        c.maintenance_interval.as_millis().to_string()
                    }
                    "num.partitions" => c.default_partitions.to_string(),
                    "process.roles" => "broker,controller".to_string(),
                    "delete.topic.enable" | "log.cleaner.enable" => "true".to_string(),
                    _ => "1".to_string(),
                };
                out.push(ConfigEntry {
                    name: def.name.to_string(),
                    value: Some(value.clone()),
                    source: ConfigSource::StaticBrokerConfig,
                    read_only: true,
                    sensitive: false,
                    kind: def.kind,
                    doc: def.doc,
                    synonyms: vec![ConfigSynonym {
                        name: def.name.to_string(),
                        value: Some(value),
                        source: ConfigSource::StaticBrokerConfig,
                    }],
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The layers a topic default can come from, most specific first.
    fn default_layers(&self) -> Vec<(ConfigSource, BTreeMap<String, String>)> {
        let state = self.dynamic.state.read();
        let builtin = TopicConfig::default().entries();
        let configured = self.config().topic_defaults.entries();
        // Static values: the `[topics]` settings that differ from Kafka's defaults,
        // under the broker names.
        let mut static_layer = BTreeMap::new();
        let mut default_layer = BTreeMap::new();
        for def in TOPIC_CONFIGS {
            let name = def.broker_synonyms.first().copied().unwrap_or(def.name);
            if let Some(v) = configured.get(def.name) {
                if builtin.get(def.name) != Some(v) {
                    static_layer.insert(name.to_string(), v.clone());
                }
            }
            if let Some(v) = builtin.get(def.name) {
                default_layer.insert(name.to_string(), v.clone());
            }
        }
        vec![
            (ConfigSource::DynamicBrokerConfig, state.node.clone()),
            (
                ConfigSource::DynamicDefaultBrokerConfig,
                state.cluster.clone(),
            ),
            (ConfigSource::StaticBrokerConfig, static_layer),
            (ConfigSource::DefaultConfig, default_layer),
        ]
    }
}

/// The synonyms of a topic config's default: each broker name in each layer where set,
/// most specific layer first. Values of the hours/minutes forms are shown as set.
fn default_synonyms(
    topic_name: &str,
    broker_names: &[&str],
    layers: &[(ConfigSource, BTreeMap<String, String>)],
) -> Vec<ConfigSynonym> {
    let mut out = Vec::new();
    for (source, layer) in layers {
        for name in broker_names {
            if let Some(v) = layer.get(*name) {
                out.push(ConfigSynonym {
                    name: name.to_string(),
                    value: Some(v.clone()),
                    source: *source,
                });
            }
        }
        // A topic config without a broker synonym (nagare.flush, throttles) has its
        // default under its own name.
        if broker_names.is_empty() {
            if let Some(v) = layer.get(topic_name) {
                out.push(ConfigSynonym {
                    name: topic_name.to_string(),
                    value: Some(v.clone()),
                    source: *source,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_convert_to_milliseconds() {
        assert_eq!(
            as_topic_setting("log.retention.hours", "2"),
            Some(("retention.ms", "7200000".to_string()))
        );
        assert_eq!(
            as_topic_setting("log.cleanup.policy", "compact"),
            Some(("cleanup.policy", "compact".to_string()))
        );
        assert_eq!(as_topic_setting("num.partitions", "3"), None);
    }

    #[test]
    fn node_layer_wins_over_cluster_layer() {
        let cluster = BTreeMap::from([("log.retention.ms".to_string(), "5000".to_string())]);
        let node = BTreeMap::from([("log.retention.ms".to_string(), "7000".to_string())]);
        let d = layered_defaults(&TopicConfig::default(), &[&cluster, &node]);
        assert_eq!(d.retention_ms, 7000);
        assert!(d.overrides.is_empty());
    }
}
