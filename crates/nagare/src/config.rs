//! Settings: defaults, then the TOML file, then `NAGARE_*` environment variables, then
//! command-line flags. The environment overlay is generic: every scalar setting of the
//! TOML tree is reachable as `NAGARE_<SECTION>_<KEY>` (upper case, `.`/`-` as `_`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use nagare_core::{BrokerConfig, TopicConfig};
use serde::{Deserialize, Serialize};

use crate::cli::ServeArgs;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub node_id: i32,
    /// Log filter in `tracing` syntax.
    pub log: String,
    pub auto_create_topics: bool,
    pub default_partitions: u32,
    pub maintenance_interval_ms: u64,
    /// Defaults of new topics.
    pub topics: TopicConfig,
    pub kafka: KafkaSection,
    pub stomp: StompSection,
    pub forward: ForwardSection,
    pub http: HttpSection,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct KafkaSection {
    pub listen: SocketAddr,
    #[serde(flatten)]
    pub protocol: nagare_kafka::Config,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct StompSection {
    pub listen: SocketAddr,
    #[serde(flatten)]
    pub protocol: nagare_stomp::Config,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ForwardSection {
    pub listen: SocketAddr,
    #[serde(flatten)]
    pub protocol: nagare_forward::Config,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSection {
    pub listen: SocketAddr,
}

impl Default for KafkaSection {
    fn default() -> Self {
        KafkaSection {
            listen: ([127, 0, 0, 1], 9092).into(),
            protocol: Default::default(),
        }
    }
}

impl Default for StompSection {
    fn default() -> Self {
        StompSection {
            listen: ([127, 0, 0, 1], 61613).into(),
            protocol: Default::default(),
        }
    }
}

impl Default for ForwardSection {
    fn default() -> Self {
        ForwardSection {
            listen: ([127, 0, 0, 1], 24224).into(),
            protocol: Default::default(),
        }
    }
}

impl Default for HttpSection {
    fn default() -> Self {
        HttpSection {
            listen: ([127, 0, 0, 1], 9644).into(),
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        let broker = BrokerConfig::default();
        Settings {
            data_dir: broker.data_dir,
            node_id: broker.node_id,
            log: "info".to_string(),
            auto_create_topics: broker.auto_create_topics,
            default_partitions: broker.default_partitions,
            maintenance_interval_ms: broker.maintenance_interval.as_millis() as u64,
            topics: broker.topic_defaults,
            kafka: Default::default(),
            stomp: Default::default(),
            forward: Default::default(),
            http: Default::default(),
        }
    }
}

impl Settings {
    /// Builds the settings from every source, in precedence order.
    pub fn load(args: &ServeArgs) -> anyhow::Result<Settings> {
        let mut tree = toml::Value::try_from(Settings::default())?;
        if let Some(path) = &args.config {
            merge(&mut tree, read_file(path)?);
        }
        apply_env(&mut tree, "NAGARE", std::env::vars())?;
        let mut s: Settings = tree.try_into().context("invalid settings")?;
        s.apply_flags(args);
        Ok(s)
    }

    fn apply_flags(&mut self, a: &ServeArgs) {
        if let Some(v) = &a.data_dir {
            self.data_dir = v.clone();
        }
        if let Some(v) = a.kafka_listen {
            self.kafka.listen = v;
        }
        if let Some(v) = &a.kafka_advertise {
            self.kafka.protocol.advertise = Some(v.clone());
        }
        if let Some(v) = a.stomp_listen {
            self.stomp.listen = v;
        }
        if let Some(v) = a.forward_listen {
            self.forward.listen = v;
        }
        if let Some(v) = a.http_listen {
            self.http.listen = v;
        }
        if let Some(v) = &a.log {
            self.log = v.clone();
        }
    }

    pub fn broker_config(&self) -> BrokerConfig {
        BrokerConfig {
            data_dir: self.data_dir.clone(),
            node_id: self.node_id,
            auto_create_topics: self.auto_create_topics,
            default_partitions: self.default_partitions.max(1),
            topic_defaults: self.topics.clone(),
            maintenance_interval: std::time::Duration::from_millis(
                self.maintenance_interval_ms.max(10),
            ),
        }
    }

    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(toml::to_string_pretty(self)?)
    }
}

fn read_file(path: &Path) -> anyhow::Result<toml::Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    let value: toml::Value =
        toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))?;
    Ok(value)
}

/// Deep-merges `over` into `base`: tables merge key by key, anything else replaces.
fn merge(base: &mut toml::Value, over: toml::Value) {
    match (base, over) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Sets every scalar leaf whose variable `PREFIX_<PATH>` is present. Values are read as
/// TOML literals of the leaf's type, so `NAGARE_KAFKA_LISTEN=127.0.0.1:1` and
/// `NAGARE_AUTO_CREATE_TOPICS=false` both work.
fn apply_env(
    tree: &mut toml::Value,
    prefix: &str,
    vars: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<()> {
    let vars: std::collections::HashMap<String, String> = vars.into_iter().collect();
    walk(tree, prefix, &vars)
}

fn env_name(prefix: &str, key: &str) -> String {
    format!(
        "{prefix}_{}",
        key.to_ascii_uppercase().replace(['.', '-'], "_")
    )
}

fn walk(
    node: &mut toml::Value,
    name: &str,
    vars: &std::collections::HashMap<String, String>,
) -> anyhow::Result<()> {
    let toml::Value::Table(table) = node else {
        return Ok(());
    };
    for (key, value) in table.iter_mut() {
        let var = env_name(name, key);
        match value {
            toml::Value::Table(_) => walk(value, &var, vars)?,
            toml::Value::Array(_) => {}
            leaf => {
                if let Some(raw) = vars.get(&var) {
                    *leaf = parse_like(leaf, raw)
                        .with_context(|| format!("environment variable {var}={raw:?}"))?;
                }
            }
        }
    }
    Ok(())
}

fn parse_like(old: &toml::Value, raw: &str) -> anyhow::Result<toml::Value> {
    Ok(match old {
        toml::Value::String(_) => toml::Value::String(raw.to_string()),
        toml::Value::Integer(_) => toml::Value::Integer(raw.trim().parse()?),
        toml::Value::Float(_) => toml::Value::Float(raw.trim().parse()?),
        toml::Value::Boolean(_) => match raw.trim() {
            "true" | "1" | "yes" | "on" => toml::Value::Boolean(true),
            "false" | "0" | "no" | "off" => toml::Value::Boolean(false),
            other => bail!("expected a boolean, got {other:?}"),
        },
        _ => toml::Value::String(raw.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_with(file: Option<&str>, env: &[(&str, &str)], args: ServeArgs) -> Settings {
        let mut tree = toml::Value::try_from(Settings::default()).unwrap();
        if let Some(f) = file {
            merge(&mut tree, toml::from_str(f).unwrap());
        }
        apply_env(
            &mut tree,
            "NAGARE",
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        )
        .unwrap();
        let mut s: Settings = tree.try_into().unwrap();
        s.apply_flags(&args);
        s
    }

    #[test]
    fn defaults_match_the_contract() {
        let s = Settings::default();
        assert_eq!(s.data_dir, PathBuf::from("./data"));
        assert_eq!(s.kafka.listen.to_string(), "127.0.0.1:9092");
        assert_eq!(s.stomp.listen.to_string(), "127.0.0.1:61613");
        assert_eq!(s.forward.listen.to_string(), "127.0.0.1:24224");
        assert_eq!(s.http.listen.to_string(), "127.0.0.1:9644");
    }

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let file = "data_dir = \"/file\"\n[kafka]\nlisten = \"127.0.0.1:1\"\n[stomp]\nlisten = \"127.0.0.1:2\"\n";
        let env = [
            ("NAGARE_KAFKA_LISTEN", "127.0.0.1:3"),
            ("NAGARE_DATA_DIR", "/env"),
        ];
        let args = ServeArgs {
            data_dir: Some("/flag".into()),
            ..Default::default()
        };
        let s = load_with(Some(file), &env, args);
        assert_eq!(s.data_dir, PathBuf::from("/flag"));
        assert_eq!(s.kafka.listen.to_string(), "127.0.0.1:3");
        assert_eq!(s.stomp.listen.to_string(), "127.0.0.1:2");
        assert_eq!(s.forward.listen.to_string(), "127.0.0.1:24224");
    }

    #[test]
    fn env_reaches_nested_and_typed_settings() {
        let env = [
            ("NAGARE_AUTO_CREATE_TOPICS", "false"),
            ("NAGARE_TOPICS_FLUSH", "always"),
            ("NAGARE_TOPICS_RETENTION_MS", "1000"),
        ];
        let s = load_with(None, &env, ServeArgs::default());
        assert!(!s.auto_create_topics);
        assert_eq!(s.topics.flush, nagare_core::TopicFlush::Always);
        assert_eq!(s.topics.retention_ms, 1000);
    }

    #[test]
    fn example_config_parses() {
        let text = include_str!("../../../nagare.toml");
        let mut tree = toml::Value::try_from(Settings::default()).unwrap();
        merge(&mut tree, toml::from_str(text).unwrap());
        let _: Settings = tree.try_into().unwrap();
    }
}
