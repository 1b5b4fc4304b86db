//! Where the store is (`--store local|kafka://HOST:PORT[,HOST:PORT...]`), the Kafka
//! client properties of `[store.kafka]`, and the librdkafka configurations of the
//! gateway's clients built from them.
//!
//! Properties are passed to librdkafka (and to the share client) as they are, under
//! Kafka's names, after nagare's own defaults, so they may change those (`linger.ms`,
//! `message.timeout.ms`, ...). The few that would break what the gateway promises its
//! clients are refused, with the reason; the rest are checked by librdkafka itself before
//! anything starts.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use nagare_share_client::ShareClientConfig;
use rdkafka::ClientConfig;

use crate::error::ClusterError;

/// How long a produced record may wait for the cluster's acknowledgement before the
/// client that sent it gets an error (librdkafka's `message.timeout.ms`): long enough to
/// ride out a leader election after a broker dies (Kafka notices within its
/// `broker.session.timeout.ms`, 9 s by default), short enough not to leave a client
/// hanging. `[store.kafka] "message.timeout.ms"` changes it.
pub const DEFAULT_MESSAGE_TIMEOUT_MS: u64 = 20_000;

/// Bound of one metadata or admin request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Where topics live (`--store`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StoreUrl {
    /// The embedded log under `--data-dir`.
    #[default]
    Local,
    /// An Apache Kafka cluster, by some of its brokers' `host:port`.
    Kafka(Vec<String>),
}

impl FromStr for StoreUrl {
    type Err = ClusterError;

    fn from_str(s: &str) -> Result<StoreUrl, ClusterError> {
        let bad = |reason: &str| ClusterError::StoreUrl {
            value: s.to_string(),
            reason: reason.to_string(),
        };
        let v = s.trim();
        if v == "local" {
            return Ok(StoreUrl::Local);
        }
        let Some(list) = v.strip_prefix("kafka://") else {
            return Err(bad("unknown kind of store"));
        };
        let mut brokers = Vec::new();
        for b in list.split(',').map(str::trim) {
            let Some((host, port)) = b.rsplit_once(':') else {
                return Err(bad(&format!("{b:?} has no port")));
            };
            let host_ok = !host.is_empty()
                && !host.contains(['/', '@', '?', '#', ' '])
                && (!host.starts_with('[') || host.ends_with(']'));
            if !host_ok {
                return Err(bad(&format!("{b:?} is not a host name or address")));
            }
            match port.parse::<u16>() {
                Ok(p) if p > 0 => brokers.push(b.to_string()),
                _ => return Err(bad(&format!("{b:?} has no valid port"))),
            }
        }
        Ok(StoreUrl::Kafka(brokers))
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Local => f.write_str("local"),
            StoreUrl::Kafka(b) => write!(f, "kafka://{}", b.join(",")),
        }
    }
}

/// Properties nagare sets itself, and why a user may not.
const OWN_PROPERTIES: &[(&str, &str)] = &[
    (
        "bootstrap.servers",
        "the store URL names the brokers (--store kafka://HOST:PORT,...)",
    ),
    (
        "metadata.broker.list",
        "the store URL names the brokers (--store kafka://HOST:PORT,...)",
    ),
    (
        "enable.idempotence",
        "the gateway's producer is idempotent with acks=all: that is what lets it acknowledge a \
         client only once the cluster has its data, and never store a retry twice",
    ),
    ("acks", "the gateway's producer always uses acks=all"),
    (
        "request.required.acks",
        "the gateway's producer always uses acks=all",
    ),
    (
        "group.id",
        "the gateway's readers assign themselves partitions, in no consumer group",
    ),
    (
        "group.instance.id",
        "the gateway's readers join no consumer group",
    ),
    (
        "enable.auto.commit",
        "the gateway's readers commit no offsets",
    ),
    (
        "enable.auto.offset.store",
        "the gateway's readers commit no offsets",
    ),
    (
        "isolation.level",
        "the gateway reads committed records only, as the embedded log does",
    ),
    (
        "enable.partition.eof",
        "set by the gateway for each of its readers",
    ),
];

/// How the gateway reaches the cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `host:port` of some brokers.
    pub bootstrap: Vec<String>,
    /// `[store.kafka]`: Kafka client properties, as they are.
    pub properties: Vec<(String, String)>,
    /// This gateway's `--node-id` (its reply topic, its clients' ids).
    pub node_id: i32,
}

impl ClusterConfig {
    /// Checks the properties without reaching the cluster: refused names, then librdkafka's
    /// own check of every name and value.
    pub fn check(&self) -> Result<(), ClusterError> {
        check_properties(&self.properties)
    }

    /// What every client of the gateway shares: the brokers, its id, the properties.
    fn base(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", self.bootstrap.join(","));
        c.set("client.id", format!("nagare-gateway-{}", self.node_id));
        // Small requests (a receipted SEND, an RPC reply) must not wait for Nagle's
        // algorithm and the peer's delayed ACK: tens of milliseconds each.
        c.set("socket.nagle.disable", "true");
        c
    }

    fn with_properties(&self, mut c: ClientConfig) -> ClientConfig {
        for (k, v) in &self.properties {
            c.set(k, v);
        }
        c
    }

    /// The producer: idempotent, `acks=all`, bounded delivery time.
    pub(crate) fn producer(&self) -> ClientConfig {
        let mut c = self.base();
        c.set("message.timeout.ms", DEFAULT_MESSAGE_TIMEOUT_MS.to_string());
        c.set("request.timeout.ms", "10000");
        let mut c = self.with_properties(c);
        c.set("enable.idempotence", "true");
        c.set("acks", "all");
        c
    }

    /// A reader of committed records that assigns itself partitions: it never joins a
    /// consumer group nor commits (librdkafka only wants a `group.id` to allow
    /// assignments; `role` makes it this gateway's own). `eof`: report reaching the end of
    /// a partition (the catch-up reader stops there). `buffer_kib`: what librdkafka may
    /// read ahead per partition.
    pub(crate) fn reader(&self, role: &str, eof: bool, buffer_kib: u32) -> ClientConfig {
        let mut c = self.base();
        c.set("queued.max.messages.kbytes", buffer_kib.to_string());
        c.set("fetch.wait.max.ms", "100");
        c.set("auto.offset.reset", "earliest");
        let mut c = self.with_properties(c);
        c.set("enable.auto.commit", "false");
        c.set("enable.auto.offset.store", "false");
        c.set("isolation.level", "read_committed");
        c.set("allow.auto.create.topics", "false");
        c.set("enable.partition.eof", if eof { "true" } else { "false" });
        c.set(
            "group.id",
            format!("nagare-gateway-{}-{role}", self.node_id),
        );
        c
    }

    /// The admin client (topics).
    pub(crate) fn admin(&self) -> ClientConfig {
        self.with_properties(self.base())
    }

    /// The share client's configuration (queues).
    pub(crate) fn share(&self) -> ShareClientConfig {
        ShareClientConfig {
            bootstrap: self.bootstrap.clone(),
            client_id: format!("nagare-gateway-{}", self.node_id),
            properties: self.properties.clone(),
            request_timeout: REQUEST_TIMEOUT,
        }
    }
}

/// Refuses the properties nagare sets itself and SASL GSSAPI (not built in), then asks
/// librdkafka to check every name and value.
pub fn check_properties(properties: &[(String, String)]) -> Result<(), ClusterError> {
    let mut c = ClientConfig::new();
    for (name, value) in properties {
        if let Some((_, why)) = OWN_PROPERTIES.iter().find(|(n, _)| n == name) {
            return Err(ClusterError::Property {
                name: name.clone(),
                reason: format!("nagare sets it: {why}"),
            });
        }
        if (name == "sasl.mechanism" || name == "sasl.mechanisms")
            && value.eq_ignore_ascii_case("GSSAPI")
        {
            return Err(ClusterError::Property {
                name: name.clone(),
                reason: "GSSAPI (Kerberos) is not built into nagare; use PLAIN, SCRAM-SHA-256, \
                         SCRAM-SHA-512 or OAUTHBEARER"
                    .to_string(),
            });
        }
        c.set(name, value);
        if let Err(e) = c.create_native_config() {
            return Err(ClusterError::Property {
                name: name.clone(),
                reason: e.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn store_urls_parse_and_print() {
        assert_eq!("local".parse::<StoreUrl>().unwrap(), StoreUrl::Local);
        let u: StoreUrl = "kafka://127.0.0.1:9092,b2:19093, [::1]:9094"
            .parse()
            .unwrap();
        assert_eq!(
            u,
            StoreUrl::Kafka(vec![
                "127.0.0.1:9092".into(),
                "b2:19093".into(),
                "[::1]:9094".into()
            ])
        );
        assert_eq!(u.to_string(), "kafka://127.0.0.1:9092,b2:19093,[::1]:9094");
        for bad in [
            "",
            "kafka",
            "kafka://",
            "kafka://host",
            "kafka://host:0",
            "kafka://host:99999",
            "kafka://:9092",
            "kafka://a:1,,b:2",
            "kafka://user@host:9092",
            "pulsar://h:1",
            "file:///tmp",
        ] {
            let e = bad.parse::<StoreUrl>().unwrap_err().to_string();
            assert!(e.contains("expected `local` or `kafka://"), "{bad}: {e}");
        }
    }

    #[test]
    fn properties_are_checked_by_librdkafka() {
        check_properties(&props(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
            ("linger.ms", "2"),
        ]))
        .unwrap();
        let e = check_properties(&props(&[("no.such.property", "1")])).unwrap_err();
        assert!(e.to_string().contains("no.such.property"), "{e}");
        let e = check_properties(&props(&[("security.protocol", "carrier-pigeon")])).unwrap_err();
        assert!(e.to_string().contains("security.protocol"), "{e}");
    }

    #[test]
    fn properties_nagare_owns_are_refused_with_the_reason() {
        let e = check_properties(&props(&[("enable.idempotence", "false")])).unwrap_err();
        assert!(e.to_string().contains("acks=all"), "{e}");
        let e = check_properties(&props(&[("bootstrap.servers", "h:1")])).unwrap_err();
        assert!(e.to_string().contains("--store"), "{e}");
        let e = check_properties(&props(&[("sasl.mechanism", "gssapi")])).unwrap_err();
        assert!(e.to_string().contains("Kerberos"), "{e}");
    }

    #[test]
    fn user_properties_come_after_the_defaults_but_not_over_the_guarantees() {
        let c = ClusterConfig {
            bootstrap: vec!["h:1".into()],
            properties: props(&[("message.timeout.ms", "5000"), ("linger.ms", "1")]),
            node_id: 3,
        };
        let p = c.producer();
        assert_eq!(p.get("message.timeout.ms"), Some("5000"));
        assert_eq!(p.get("enable.idempotence"), Some("true"));
        assert_eq!(p.get("acks"), Some("all"));
        assert_eq!(p.get("client.id"), Some("nagare-gateway-3"));
        let r = c.reader("history", true, 1024);
        assert_eq!(r.get("enable.partition.eof"), Some("true"));
        assert_eq!(r.get("group.id"), Some("nagare-gateway-3-history"));
        assert_eq!(c.share().bootstrap, vec!["h:1".to_string()]);
    }
}
