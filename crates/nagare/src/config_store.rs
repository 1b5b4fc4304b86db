//! The `store` setting: where topics live. `store = "local"` (the default: the embedded
//! log under `data_dir`) or `store = "kafka://HOST:PORT[,HOST:PORT...]"` (cluster mode),
//! from `--store`, `NAGARE_STORE` or the file. Kafka client properties for reaching the
//! cluster (TLS, SASL, ...) go in the `[store.kafka]` table under Kafka's names; TOML
//! cannot hold both `store = "..."` and a `[store.kafka]` table, so with properties the
//! location is written `url = "..."` inside `[store]`:
//!
//! ```toml
//! [store]
//! url = "kafka://k1:9093,k2:9093"
//! [store.kafka]
//! security.protocol = "SASL_SSL"      # dotted or quoted keys alike
//! "sasl.mechanism" = "SCRAM-SHA-512"
//! ```
//!
//! `NAGARE_STORE_KAFKA_<NAME>` sets the property `<name>` (lower case, `_` read as `.`:
//! `NAGARE_STORE_KAFKA_SASL_PASSWORD` is `sasl.password`), which keeps secrets out of
//! the file.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Environment variables that set `[store.kafka]` properties start with this.
pub(crate) const ENV_PROPERTY_PREFIX: &str = "NAGARE_STORE_KAFKA_";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreSection {
    /// `local` or `kafka://...`, checked by [`StoreSection::url`].
    pub url: String,
    /// `[store.kafka]`, flattened to Kafka property names.
    pub kafka: BTreeMap<String, String>,
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            url: "local".to_string(),
            kafka: BTreeMap::new(),
        }
    }
}

impl StoreSection {
    /// The parsed location.
    pub(crate) fn url(&self) -> anyhow::Result<nagare_cluster::StoreUrl> {
        Ok(self.url.parse()?)
    }

    /// Checks the location and the properties (librdkafka's check; no network).
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        match self.url()? {
            nagare_cluster::StoreUrl::Local if !self.kafka.is_empty() => anyhow::bail!(
                "[store.kafka] properties are set but the store is local; cluster mode needs \
                 --store kafka://HOST:PORT[,HOST:PORT...] (or `url` in [store])"
            ),
            nagare_cluster::StoreUrl::Local => Ok(()),
            nagare_cluster::StoreUrl::Kafka(_) => {
                Ok(nagare_cluster::check_properties(&self.properties())?)
            }
        }
    }

    pub(crate) fn properties(&self) -> Vec<(String, String)> {
        self.kafka
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl Serialize for StoreSection {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.kafka.is_empty() {
            return s.serialize_str(&self.url);
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("url", &self.url)?;
        m.serialize_entry("kafka", &self.kafka)?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for StoreSection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StoreSection, D::Error> {
        d.deserialize_any(StoreVisitor)
    }
}

struct StoreVisitor;

const STORE_KEYS: &[&str] = &["url", "kafka"];

impl<'de> Visitor<'de> for StoreVisitor {
    type Value = StoreSection;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"local\", \"kafka://HOST:PORT[,...]\" or a [store] table with `url` and [store.kafka]")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<StoreSection, E> {
        Ok(StoreSection {
            url: v.to_string(),
            kafka: BTreeMap::new(),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StoreSection, A::Error> {
        let mut out = StoreSection::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "url" => out.url = map.next_value()?,
                "kafka" => {
                    let table: toml::Value = map.next_value()?;
                    flatten("", &table, &mut out.kafka).map_err(de::Error::custom)?;
                }
                other => return Err(de::Error::unknown_field(other, STORE_KEYS)),
            }
        }
        Ok(out)
    }
}

/// `[store.kafka]` as Kafka property names: a dotted key (`security.protocol = ...`)
/// makes nested tables in TOML, read back here with dots; values as text.
fn flatten(
    prefix: &str,
    value: &toml::Value,
    out: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    let toml::Value::Table(table) = value else {
        return Err("[store.kafka] must be a table of Kafka client properties".to_string());
    };
    for (k, v) in table {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let text = match v {
            toml::Value::Table(_) => {
                flatten(&name, v, out)?;
                continue;
            }
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Datetime(_) | toml::Value::Array(_) => {
                return Err(format!(
                    "[store.kafka] property {name:?}: a value is a string, a number or a boolean"
                ))
            }
        };
        out.insert(name, text);
    }
    Ok(())
}

/// Applies `NAGARE_STORE` and `NAGARE_STORE_KAFKA_*` to the settings tree; returns the
/// variables it used (so they are not reported as unknown).
pub(crate) fn apply_env(
    tree: &mut toml::Value,
    vars: &std::collections::HashMap<String, String>,
) -> Vec<String> {
    let mut used = Vec::new();
    let Some(root) = tree.as_table_mut() else {
        return used;
    };
    let url = vars.get("NAGARE_STORE");
    let props: Vec<(&String, &String)> = vars
        .iter()
        .filter(|(k, _)| k.starts_with(ENV_PROPERTY_PREFIX) && k.len() > ENV_PROPERTY_PREFIX.len())
        .collect();
    if url.is_none() && props.is_empty() {
        return used;
    }
    let store = root
        .entry("store")
        .or_insert_with(|| toml::Value::String("local".into()));
    if !props.is_empty() {
        if let toml::Value::String(s) = store {
            let mut t = toml::map::Map::new();
            t.insert("url".into(), toml::Value::String(s.clone()));
            *store = toml::Value::Table(t);
        }
    }
    if let Some(u) = url {
        match &mut *store {
            toml::Value::Table(t) => {
                t.insert("url".into(), toml::Value::String(u.clone()));
            }
            other => *other = toml::Value::String(u.clone()),
        }
        used.push("NAGARE_STORE".to_string());
    }
    if let toml::Value::Table(t) = store {
        let kafka = t
            .entry("kafka")
            .or_insert_with(|| toml::Value::Table(toml::map::Map::new()));
        if let toml::Value::Table(kafka) = kafka {
            for (k, v) in props {
                let name = k[ENV_PROPERTY_PREFIX.len()..]
                    .to_ascii_lowercase()
                    .replace('_', ".");
                kafka.insert(name, toml::Value::String(v.clone()));
                used.push(k.clone());
            }
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> StoreSection {
        #[derive(Deserialize)]
        struct T {
            store: StoreSection,
        }
        toml::from_str::<T>(text).unwrap().store
    }

    #[test]
    fn a_string_or_a_table() {
        assert_eq!(parse("store = \"local\"\n"), StoreSection::default());
        let s = parse("store = \"kafka://a:1,b:2\"\n");
        assert_eq!(s.url, "kafka://a:1,b:2");
        assert!(s.kafka.is_empty());
        let s = parse(
            "[store]\nurl = \"kafka://a:1\"\n[store.kafka]\nsecurity.protocol = \"SASL_SSL\"\n\
             \"sasl.mechanism\" = \"PLAIN\"\n\"message.timeout.ms\" = 5000\n",
        );
        assert_eq!(s.url, "kafka://a:1");
        assert_eq!(
            s.properties(),
            [
                ("message.timeout.ms".to_string(), "5000".to_string()),
                ("sasl.mechanism".to_string(), "PLAIN".to_string()),
                ("security.protocol".to_string(), "SASL_SSL".to_string()),
            ]
        );
        s.validate().unwrap();
        // And back: the table form survives a round trip through TOML.
        let text = toml::to_string(
            &toml::Value::try_from(
                [("store", s.clone())]
                    .into_iter()
                    .collect::<BTreeMap<_, _>>(),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(parse(&text), s);
    }

    #[test]
    fn refused_with_the_reason() {
        let e = parse("store = \"kafka://nohost\"\n")
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("has no port"), "{e}");
        let e = parse("[store.kafka]\n\"sasl.username\" = \"u\"\n")
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("the store is local"), "{e}");
        let e = parse("[store]\nurl = \"kafka://h:1\"\n[store.kafka]\nacks = \"1\"\n")
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("acks=all"), "{e}");
    }

    #[test]
    fn environment_sets_the_url_and_properties() {
        let mut tree: toml::Value = toml::from_str("store = \"local\"\n").unwrap();
        let vars = [
            ("NAGARE_STORE", "kafka://h:1"),
            ("NAGARE_STORE_KAFKA_SASL_PASSWORD", "s3cret"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let used = apply_env(&mut tree, &vars);
        assert_eq!(used.len(), 2);
        let s: StoreSection = tree.get("store").unwrap().clone().try_into().unwrap();
        assert_eq!(s.url, "kafka://h:1");
        assert_eq!(
            s.kafka.get("sasl.password").map(String::as_str),
            Some("s3cret")
        );
    }
}
