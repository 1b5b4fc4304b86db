//! Settings: defaults, then the TOML file, then `NAGARE_*` environment variables, then
//! command-line flags. The environment overlay is generic: every scalar setting of the
//! TOML tree is reachable as `NAGARE_<SECTION>_<KEY>` (upper case, `.`/`-` as `_`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use nagare_core::{BrokerConfig, TopicConfig};
use serde::{Deserialize, Serialize};

use crate::cli::ServeArgs;
use crate::config_check::{self, strict};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Settings {
    pub data_dir: PathBuf,
    /// This node's id: the Kafka broker id of the embedded log, and in cluster mode the
    /// gateway's name (unique per gateway: its reply topic and client ids).
    pub node_id: i32,
    /// Where topics live: `local` or `kafka://HOST:PORT[,...]`, and `[store.kafka]`.
    pub store: crate::config_store::StoreSection,
    /// Log filter in `tracing` syntax.
    pub log: String,
    /// How log lines are written to stderr: text for people, JSON for log shippers.
    pub log_format: LogFormat,
    pub auto_create_topics: bool,
    pub default_partitions: u32,
    pub maintenance_interval_ms: u64,
    /// Defaults of new topics.
    pub topics: TopicConfig,
    pub kafka: KafkaSection,
    pub stomp: StompSection,
    pub forward: ForwardSection,
    pub http: HttpSection,
    /// Limits over every protocol listener (kafka, stomp, forward) together.
    pub listeners: ListenersSection,
    /// Authentication and authorization over every listener.
    pub security: SecuritySection,
    /// TLS for every listener, once a certificate and key are given.
    pub tls: TlsSection,
    /// Compaction of topics with `cleanup.policy=compact` (Kafka's `log.cleaner.*`).
    pub log_cleaner: LogCleanerSection,
    /// Whether the Kafka listener's address was given (flag, environment or file): in
    /// cluster mode the Kafka listener is off unless it was.
    #[serde(skip)]
    pub kafka_listen_given: bool,
}

/// The log cleaner: how often it looks for dirty partitions, its memory and I/O limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LogCleanerSection {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.backoff.ms`: pause between looks for partitions to clean.
    pub backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: memory of the key -> offset map.
    pub dedupe_buffer_bytes: u64,
    /// `log.cleaner.io.max.bytes.per.second`; 0: unlimited.
    pub io_max_bytes_per_sec: u64,
}

impl Default for LogCleanerSection {
    fn default() -> Self {
        let c = nagare_core::CleanerSettings::default();
        LogCleanerSection {
            enable: c.enabled,
            backoff_ms: c.backoff.as_millis() as u64,
            dedupe_buffer_bytes: c.dedupe_buffer_bytes as u64,
            io_max_bytes_per_sec: c.io_max_bytes_per_sec.unwrap_or(0),
        }
    }
}

impl LogCleanerSection {
    fn settings(&self) -> nagare_core::CleanerSettings {
        nagare_core::CleanerSettings {
            enabled: self.enable,
            backoff: std::time::Duration::from_millis(self.backoff_ms.max(10)),
            // At least a few thousand keys, whatever is configured.
            dedupe_buffer_bytes: (self.dedupe_buffer_bytes as usize).max(64 << 10),
            io_max_bytes_per_sec: (self.io_max_bytes_per_sec > 0)
                .then_some(self.io_max_bytes_per_sec),
        }
    }
}

/// The server's certificate (`--tls-cert`/`--tls-key`); with both set, every listener
/// speaks TLS unless an extra listener says `tls = false`. Empty paths: TLS off.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct TlsSection {
    /// PEM certificate chain, leaf first.
    pub cert: String,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: String,
    /// PEM CA certificates that sign client certificates; a verified client certificate
    /// logs the connection in as `User:<common name>`.
    pub client_ca: String,
    /// `none`, `requested` or `required` (Kafka's `ssl.client.auth`); empty: `requested`
    /// when `client_ca` is set, else `none`.
    pub client_auth: String,
}

impl TlsSection {
    pub(crate) fn enabled(&self) -> bool {
        !self.cert.is_empty() || !self.key.is_empty()
    }

    /// The listener layer's view, `None` when TLS is off.
    pub(crate) fn files(&self) -> anyhow::Result<Option<nagare_listener::TlsFiles>> {
        use nagare_listener::ClientAuth;
        if !self.enabled() {
            return Ok(None);
        }
        if self.cert.is_empty() || self.key.is_empty() {
            bail!("TLS needs both a certificate and a key (--tls-cert FILE --tls-key FILE)");
        }
        let client_ca = (!self.client_ca.is_empty()).then(|| PathBuf::from(&self.client_ca));
        let client_auth = match self.client_auth.as_str() {
            "" if client_ca.is_some() => ClientAuth::Requested,
            "" | "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            other => bail!(
                "invalid [tls] client_auth {other:?}: expected \"none\", \"requested\" or \"required\""
            ),
        };
        Ok(Some(nagare_listener::TlsFiles {
            cert: PathBuf::from(&self.cert),
            key: PathBuf::from(&self.key),
            client_ca,
            client_auth,
        }))
    }
}

/// One more listener of a protocol beside its main `listen` address, with its own TLS
/// and authentication (like one entry of Kafka's `listeners`), e.g. a TLS + SASL listener
/// for other machines next to a plain one on loopback.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExtraListener {
    pub listen: SocketAddr,
    /// Speak TLS (with the [tls] certificate); default: as the main listeners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
    /// Demand authentication; default: [security] auth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthMode>,
    /// Kafka only: `host:port` given in metadata to clients that connected here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertise: Option<String>,
}

/// Whether listeners demand authentication (`--auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AuthMode {
    /// Anyone who reaches a port may connect (the default, refused off loopback unless
    /// `allow_anonymous_remote`).
    None,
    /// Every listener demands a login: Kafka SASL, STOMP login/passcode, the forward
    /// handshake with a user, HTTP basic auth or the token.
    Required,
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    /// One human-readable line per event (colored on a terminal).
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (with
    /// `message`) and the enclosing spans, for journald/Loki/Elasticsearch shippers.
    Json,
}

/// What an operation on a resource no ACL mentions gets (Kafka's
/// `allow.everyone.if.no.acl.found`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NoAclFound {
    /// Allow when `auth = "none"`, deny when `auth = "required"`.
    Auto,
    Allow,
    Deny,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct SecuritySection {
    pub auth: AuthMode,
    /// Users that bypass ACLs (names without `User:`).
    pub super_users: Vec<String>,
    /// Allow `auth = "none"` on a listener reachable from other machines.
    pub allow_anonymous_remote: bool,
    pub no_acl_found: NoAclFound,
}

impl Default for SecuritySection {
    fn default() -> Self {
        SecuritySection {
            auth: AuthMode::None,
            super_users: Vec::new(),
            allow_anonymous_remote: false,
            no_acl_found: NoAclFound::Auto,
        }
    }
}

impl SecuritySection {
    /// The core's view of these settings.
    pub(crate) fn core_config(&self) -> nagare_core::security::SecurityConfig {
        nagare_core::security::SecurityConfig {
            auth_required: self.auth == AuthMode::Required,
            super_users: self
                .super_users
                .iter()
                .map(|u| u.trim().trim_start_matches("User:").to_string())
                .filter(|u| !u.is_empty())
                .collect(),
            allow_if_no_acl: match self.no_acl_found {
                NoAclFound::Auto => None,
                NoAclFound::Allow => Some(true),
                NoAclFound::Deny => Some(false),
            },
        }
    }
}

/// Connection limits (Kafka's `max.connections` and `max.connections.per.ip`): a
/// connection over either is closed at once. 0 means unlimited.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ListenersSection {
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    /// After SIGTERM, how long connections may take to finish before they are closed.
    pub shutdown_grace_ms: u64,
    /// Close a Kafka connection that sent nothing for this long (Kafka's
    /// `connections.max.idle.ms`); 0: never.
    pub kafka_idle_ms: u64,
    /// The same for STOMP (heart-beats keep a quiet client alive); 0: never, the default:
    /// a subscriber may rightly stay silent.
    pub stomp_idle_ms: u64,
    /// The same for HTTP admin connections; 0: never.
    pub http_idle_ms: u64,
}

impl Default for ListenersSection {
    fn default() -> Self {
        ListenersSection {
            max_connections: 100_000,
            max_connections_per_ip: 10_000,
            shutdown_grace_ms: 2_000,
            kafka_idle_ms: 600_000,
            stomp_idle_ms: 0,
            http_idle_ms: 60_000,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct KafkaSection {
    pub listen: SocketAddr,
    /// More listeners beside `listen` (`[[kafka.listeners]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ExtraListener>,
    #[serde(flatten)]
    pub protocol: nagare_kafka::Config,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct StompSection {
    pub listen: SocketAddr,
    /// More listeners beside `listen` (`[[stomp.listeners]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ExtraListener>,
    #[serde(flatten)]
    pub protocol: nagare_stomp::Config,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ForwardSection {
    pub listen: SocketAddr,
    /// More listeners beside `listen` (`[[forward.listeners]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ExtraListener>,
    #[serde(flatten)]
    pub protocol: nagare_forward::Config,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct HttpSection {
    pub listen: SocketAddr,
    /// More listeners beside `listen` (`[[http.listeners]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ExtraListener>,
    /// A bearer token granting every right on the admin API when authentication is
    /// required (`Authorization: Bearer TOKEN`); empty: only users can log in.
    pub token: String,
    /// Whether `/metrics` demands credentials when authentication is required (turn off
    /// for a scraper that cannot authenticate).
    pub metrics_auth: bool,
}

impl Default for KafkaSection {
    fn default() -> Self {
        KafkaSection {
            listeners: Vec::new(),
            listen: ([127, 0, 0, 1], 9092).into(),
            protocol: Default::default(),
        }
    }
}

impl Default for StompSection {
    fn default() -> Self {
        StompSection {
            listeners: Vec::new(),
            listen: ([127, 0, 0, 1], 61613).into(),
            protocol: Default::default(),
        }
    }
}

impl Default for ForwardSection {
    fn default() -> Self {
        ForwardSection {
            listeners: Vec::new(),
            listen: ([127, 0, 0, 1], 24224).into(),
            protocol: Default::default(),
        }
    }
}

impl Default for HttpSection {
    fn default() -> Self {
        HttpSection {
            listeners: Vec::new(),
            listen: ([127, 0, 0, 1], 9644).into(),
            token: String::new(),
            metrics_auth: true,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        let broker = BrokerConfig::default();
        Settings {
            data_dir: broker.data_dir,
            node_id: broker.node_id,
            store: Default::default(),
            log: "info".to_string(),
            log_format: LogFormat::Text,
            auto_create_topics: broker.auto_create_topics,
            default_partitions: broker.default_partitions,
            maintenance_interval_ms: broker.maintenance_interval.as_millis() as u64,
            topics: broker.topic_defaults,
            kafka: Default::default(),
            stomp: Default::default(),
            forward: Default::default(),
            http: Default::default(),
            listeners: Default::default(),
            security: Default::default(),
            tls: Default::default(),
            log_cleaner: Default::default(),
            kafka_listen_given: false,
        }
    }
}

impl Settings {
    /// Builds the settings from every source, in precedence order, and checks them all
    /// (see [`crate::config_check`]). Also returns warnings to log once logging is up:
    /// `NAGARE_*` variables that name no setting.
    pub(crate) fn load(args: &ServeArgs) -> anyhow::Result<(Settings, Vec<String>)> {
        let mut tree = toml::Value::try_from(Settings::default())?;
        let mut kafka_listen_given = args.kafka_listen.is_some();
        if let Some(path) = &args.config {
            let file = read_file(path)?;
            Settings::from_tree(merged(&tree, file.clone()))
                .with_context(|| format!("invalid config file {}", path.display()))?;
            kafka_listen_given |= file.get("kafka").and_then(|k| k.get("listen")).is_some();
            merge(&mut tree, file);
        }
        kafka_listen_given |= std::env::var_os("NAGARE_KAFKA_LISTEN").is_some();
        let unknown_env = apply_env(&mut tree, "NAGARE", std::env::vars())?;
        let mut s = Settings::from_tree(tree).context("invalid settings")?;
        s.apply_flags(args);
        s.kafka_listen_given = kafka_listen_given;
        s.validate()?;
        Ok((s, unknown_env))
    }

    /// The settings of a merged tree, rejecting unknown keys in every section.
    fn from_tree(tree: toml::Value) -> anyhow::Result<Settings> {
        for section in ["kafka", "stomp", "forward"] {
            let Some(toml::Value::Table(table)) = tree.get(section) else {
                continue;
            };
            let mut table = table.clone();
            table.remove("listen");
            table.remove("listeners");
            let table = toml::Value::Table(table);
            match section {
                "kafka" => drop(strict::<nagare_kafka::Config>(
                    table,
                    section,
                    &["listen", "listeners"],
                )?),
                "stomp" => drop(strict::<nagare_stomp::Config>(
                    table,
                    section,
                    &["listen", "listeners"],
                )?),
                _ => drop(strict::<nagare_forward::Config>(
                    table,
                    section,
                    &["listen", "listeners"],
                )?),
            }
        }
        let defaults = toml::Value::try_from(TopicConfig::default())?;
        if let Some(topics) = tree.get("topics") {
            config_check::keys_within(topics, &defaults, "topics")?;
        }
        strict::<Settings>(tree, "", &[])
    }

    /// Cluster mode: the store is an external Kafka cluster.
    pub(crate) fn cluster_mode(&self) -> bool {
        matches!(self.store.url(), Ok(nagare_cluster::StoreUrl::Kafka(_)))
    }

    /// Whether the main Kafka listener runs: always with the embedded log; in cluster
    /// mode only when its address was given (Kafka clients use the cluster).
    pub(crate) fn kafka_listener_on(&self) -> bool {
        !self.cluster_mode() || self.kafka_listen_given
    }

    /// The cluster's client settings, in cluster mode.
    pub(crate) fn cluster_config(&self) -> anyhow::Result<Option<nagare_cluster::ClusterConfig>> {
        Ok(match self.store.url()? {
            nagare_cluster::StoreUrl::Local => None,
            nagare_cluster::StoreUrl::Kafka(bootstrap) => Some(nagare_cluster::ClusterConfig {
                bootstrap,
                properties: self.store.properties(),
                node_id: self.node_id,
            }),
        })
    }

    /// Checks across keys, done before anything is opened or bound.
    fn validate(&self) -> anyhow::Result<()> {
        self.store.validate()?;
        if self.cluster_mode() && self.node_id < 0 {
            bail!(
                "node_id {} is negative; in cluster mode each gateway needs its own id of 0 or more                  (--node-id N)",
                self.node_id
            );
        }
        let routes = &self.forward.protocol.routes;
        for (i, route) in routes.iter().enumerate() {
            if let Err(e) = nagare_forward::route::Router::new(
                std::slice::from_ref(route),
                self.forward.protocol.default_format,
            ) {
                let key = match e {
                    nagare_forward::route::PatternError::Topic(..) => "topic",
                    _ => "match",
                };
                bail!(
                    "invalid `{key}` in [[forward.route]] #{} (match = {:?}): {e}",
                    i + 1,
                    route.pattern
                );
            }
        }
        self.tls.files()?;
        let mut listeners = vec![
            ("stomp", self.stomp.listen, self.security.auth),
            ("forward", self.forward.listen, self.security.auth),
            ("http", self.http.listen, self.security.auth),
        ];
        if self.kafka_listener_on() {
            listeners.insert(0, ("kafka", self.kafka.listen, self.security.auth));
        }
        for (name, extra) in self.extra_listeners() {
            if extra.advertise.is_some() && name != "kafka" {
                bail!(
                    "[[{name}.listeners]] {}: `advertise` is for Kafka listeners only",
                    extra.listen
                );
            }
            if extra.tls == Some(true) && !self.tls.enabled() {
                bail!(
                    "[[{name}.listeners]] {} asks for TLS but no certificate is set \
                     (--tls-cert FILE --tls-key FILE, or [tls] cert and key)",
                    extra.listen
                );
            }
            listeners.push((name, extra.listen, extra.auth.unwrap_or(self.security.auth)));
        }
        if !self.security.allow_anonymous_remote {
            for (name, addr, auth) in &listeners {
                if *auth == AuthMode::None && !addr.ip().is_loopback() {
                    bail!(
                        "the {name} listener would bind {addr}, reachable from other machines, \
                         with authentication off (--auth none): anyone who reaches it could read \
                         and write everything. Turn authentication on (--auth required, users \
                         from `nagare user add`), or pass --allow-anonymous-remote to accept that"
                    );
                }
            }
        }
        for (i, (a, addr_a, _)) in listeners.iter().enumerate() {
            for (b, addr_b, _) in &listeners[i + 1..] {
                if addr_a.port() != 0 && addr_a == addr_b {
                    bail!("[{a}] and [{b}] both listen on {addr_a}; give each its own address");
                }
            }
        }
        Ok(())
    }

    /// Every `[[PROTOCOL.listeners]]` entry with its protocol's name.
    pub(crate) fn extra_listeners(&self) -> impl Iterator<Item = (&'static str, &ExtraListener)> {
        self.kafka
            .listeners
            .iter()
            .map(|l| ("kafka", l))
            .chain(self.stomp.listeners.iter().map(|l| ("stomp", l)))
            .chain(self.forward.listeners.iter().map(|l| ("forward", l)))
            .chain(self.http.listeners.iter().map(|l| ("http", l)))
    }

    fn apply_flags(&mut self, a: &ServeArgs) {
        if let Some(v) = &a.data_dir {
            self.data_dir = v.clone();
        }
        if let Some(v) = &a.store {
            self.store.url = v.clone();
        }
        if let Some(v) = a.node_id {
            self.node_id = v;
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
        if let Some(v) = a.log_format {
            self.log_format = v;
        }
        if let Some(v) = a.auth {
            self.security.auth = v;
        }
        if let Some(v) = &a.super_users {
            self.security.super_users = v.clone();
        }
        if a.allow_anonymous_remote {
            self.security.allow_anonymous_remote = true;
        }
        if let Some(v) = &a.tls_cert {
            self.tls.cert = v.display().to_string();
        }
        if let Some(v) = &a.tls_key {
            self.tls.key = v.display().to_string();
        }
    }

    pub(crate) fn broker_config(&self) -> BrokerConfig {
        BrokerConfig {
            data_dir: self.data_dir.clone(),
            node_id: self.node_id,
            auto_create_topics: self.auto_create_topics,
            default_partitions: self.default_partitions.max(1),
            topic_defaults: self.topics.clone(),
            maintenance_interval: std::time::Duration::from_millis(
                self.maintenance_interval_ms.max(10),
            ),
            log_cleaner: self.log_cleaner.settings(),
            ..BrokerConfig::default()
        }
    }

    pub(crate) fn to_toml(&self) -> anyhow::Result<String> {
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

fn merged(base: &toml::Value, over: toml::Value) -> toml::Value {
    let mut tree = base.clone();
    merge(&mut tree, over);
    tree
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

/// Variables read by the command line itself rather than the settings tree.
const ENV_OUTSIDE_TREE: &[&str] = &["NAGARE_CONFIG", "NAGARE_LOG"];

/// Sets every scalar leaf whose variable `PREFIX_<PATH>` is present. Values are read as
/// TOML literals of the leaf's type, so `NAGARE_KAFKA_LISTEN=127.0.0.1:1` and
/// `NAGARE_AUTO_CREATE_TOPICS=false` both work. Returns a warning for each `PREFIX_*`
/// variable that names no setting (a typo would otherwise be ignored in silence).
fn apply_env(
    tree: &mut toml::Value,
    prefix: &str,
    vars: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<Vec<String>> {
    let vars: std::collections::HashMap<String, String> = vars.into_iter().collect();
    // An unset optional setting is absent from the tree; give it its slot.
    if let (Some(v), Some(toml::Value::Table(kafka))) = (
        vars.get(&format!("{prefix}_KAFKA_ADVERTISE")),
        tree.get_mut("kafka"),
    ) {
        kafka
            .entry("advertise")
            .or_insert_with(|| toml::Value::String(v.clone()));
    }
    let mut known: Vec<String> = ENV_OUTSIDE_TREE.iter().map(|s| s.to_string()).collect();
    if prefix == "NAGARE" {
        known.extend(crate::config_store::apply_env(tree, &vars));
    }
    walk(tree, prefix, &vars, &mut known)?;
    let start = format!("{prefix}_");
    let mut warnings: Vec<String> = vars
        .keys()
        .filter(|k| k.starts_with(&start) && !known.contains(k))
        .map(|k| {
            let hint = config_check::nearest(k, known.iter().map(String::as_str))
                .map(|n| format!("; did you mean {n}?"))
                .unwrap_or_default();
            format!("environment variable {k} names no setting and is ignored{hint}")
        })
        .collect();
    warnings.sort();
    Ok(warnings)
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
    known: &mut Vec<String>,
) -> anyhow::Result<()> {
    let toml::Value::Table(table) = node else {
        return Ok(());
    };
    for (key, value) in table.iter_mut() {
        let var = env_name(name, key);
        match value {
            toml::Value::Table(_) => walk(value, &var, vars, known)?,
            toml::Value::Array(items) => {
                // Lists of names (super users) read as comma-separated values; lists of
                // tables ([[forward.route]]) are the file's alone.
                if items.iter().all(toml::Value::is_str) {
                    if let Some(raw) = vars.get(&var) {
                        *items = raw
                            .split(',')
                            .map(str::trim)
                            .filter(|v| !v.is_empty())
                            .map(|v| toml::Value::String(v.to_string()))
                            .collect();
                    }
                    known.push(var);
                }
            }
            leaf => {
                if let Some(raw) = vars.get(&var) {
                    *leaf = parse_like(leaf, raw)
                        .with_context(|| format!("environment variable {var}={raw:?}"))?;
                }
                known.push(var);
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
        let mut s = Settings::from_tree(tree).unwrap();
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
    fn security_from_file_env_and_flags() {
        let env = [
            ("NAGARE_SECURITY_AUTH", "required"),
            ("NAGARE_SECURITY_SUPER_USERS", "alice, User:bob"),
        ];
        let s = load_with(None, &env, ServeArgs::default());
        assert_eq!(s.security.auth, AuthMode::Required);
        let core = s.security.core_config();
        assert!(core.auth_required);
        assert_eq!(core.super_users, ["alice", "bob"]);
        assert!(!core.allow_if_no_acl());
        let file = "[security]\nno_acl_found = \"allow\"\n";
        let args = ServeArgs {
            auth: Some(AuthMode::Required),
            super_users: Some(vec!["carol".into()]),
            ..Default::default()
        };
        let s = load_with(Some(file), &[], args);
        assert_eq!(s.security.super_users, ["carol"]);
        assert!(s.security.core_config().allow_if_no_acl());
    }

    #[test]
    fn anonymous_off_loopback_is_refused_unless_allowed() {
        let args = ServeArgs {
            stomp_listen: Some("0.0.0.0:0".parse().unwrap()),
            ..Default::default()
        };
        let s = load_with(None, &[], args);
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("--allow-anonymous-remote"), "{err}");
        let args = ServeArgs {
            stomp_listen: Some("0.0.0.0:0".parse().unwrap()),
            allow_anonymous_remote: true,
            ..Default::default()
        };
        load_with(None, &[], args).validate().unwrap();
        let args = ServeArgs {
            stomp_listen: Some("0.0.0.0:0".parse().unwrap()),
            auth: Some(AuthMode::Required),
            ..Default::default()
        };
        load_with(None, &[], args).validate().unwrap();
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
    fn log_cleaner_from_env() {
        let s = load_with(
            None,
            &[("NAGARE_LOG_CLEANER_BACKOFF_MS", "100")],
            ServeArgs::default(),
        );
        assert_eq!(s.log_cleaner.backoff_ms, 100);
        assert_eq!(
            s.broker_config().log_cleaner.backoff,
            std::time::Duration::from_millis(100)
        );
    }

    #[test]
    fn example_config_parses() {
        let text = include_str!("../../../nagare.toml");
        let mut tree = toml::Value::try_from(Settings::default()).unwrap();
        merge(&mut tree, toml::from_str(text).unwrap());
        Settings::from_tree(tree).unwrap().validate().unwrap();
    }

    #[test]
    fn packaged_config_parses_and_stays_on_loopback() {
        let text = include_str!("../../../deploy/debian/nagare.toml");
        let mut tree = toml::Value::try_from(Settings::default()).unwrap();
        merge(&mut tree, toml::from_str(text).unwrap());
        let s = Settings::from_tree(tree).unwrap();
        s.validate().unwrap();
        assert_eq!(s.data_dir, PathBuf::from("/var/lib/nagare"));
        for addr in [
            s.kafka.listen,
            s.stomp.listen,
            s.forward.listen,
            s.http.listen,
        ] {
            assert!(addr.ip().is_loopback(), "{addr}");
        }
    }

    #[test]
    fn log_format_from_file_env_and_flag() {
        assert_eq!(Settings::default().log_format, LogFormat::Text);
        let s = load_with(None, &[("NAGARE_LOG_FORMAT", "json")], ServeArgs::default());
        assert_eq!(s.log_format, LogFormat::Json);
        let args = ServeArgs {
            log_format: Some(LogFormat::Text),
            ..ServeArgs::default()
        };
        let s = load_with(None, &[("NAGARE_LOG_FORMAT", "json")], args);
        assert_eq!(s.log_format, LogFormat::Text);
        let e = file_error("log_format = \"xml\"\n");
        assert!(e.contains("log_format"), "{e}");
    }

    #[test]
    fn extra_listeners_are_checked() {
        let e = file_error("[[kafka.listeners]]\nlisten = \"0.0.0.0:9093\"\n");
        assert!(e.contains("reachable from other machines"), "{e}");
        let e = file_error(
            "[security]\nauth = \"required\"\n[[stomp.listeners]]\nlisten = \"127.0.0.1:1\"\nadvertise = \"x:1\"\n",
        );
        assert!(e.contains("for Kafka listeners only"), "{e}");
        let e = file_error("[[forward.listeners]]\nlisten = \"127.0.0.1:1\"\ntls = true\n");
        assert!(e.contains("no certificate"), "{e}");
        let e = file_error("[[kafka.listeners]]\nlisten = \"127.0.0.1:1\"\ntsl = true\n");
        assert!(e.contains("tsl"), "{e}");
        let e = file_error("[tls]\ncert = \"c.pem\"\n");
        assert!(e.contains("both a certificate and a key"), "{e}");
        let e = file_error("[tls]\ncert = \"c\"\nkey = \"k\"\nclient_auth = \"maybe\"\n");
        assert!(e.contains("client_auth"), "{e}");
        // A remote TLS + SASL listener beside a local anonymous one is fine.
        let text = "[security]\nauth = \"required\"\n[tls]\ncert = \"c\"\nkey = \"k\"\n\
                    [[kafka.listeners]]\nlisten = \"0.0.0.0:9093\"\nadvertise = \"h:9093\"\n\
                    [[kafka.listeners]]\nlisten = \"127.0.0.1:9094\"\ntls = false\nauth = \"none\"\n";
        let mut tree = toml::Value::try_from(Settings::default()).unwrap();
        merge(&mut tree, toml::from_str(text).unwrap());
        let s = Settings::from_tree(tree).unwrap();
        s.validate().unwrap();
        assert_eq!(s.extra_listeners().count(), 2);
    }

    fn file_error(text: &str) -> String {
        let tree = merged(
            &toml::Value::try_from(Settings::default()).unwrap(),
            toml::from_str(text).unwrap(),
        );
        match Settings::from_tree(tree).and_then(|s| s.validate()) {
            Ok(()) => panic!("accepted {text:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unknown_keys_are_refused_in_every_section() {
        for (text, want) in [
            ("sharedkey = 1", "unknown key `sharedkey` in the top level"),
            (
                "[topics]\nretention_msec = 1",
                "unknown key `retention_msec` in [topics]; did you mean `retention_ms`?",
            ),
            (
                "[kafka]\nadvertize = \"h:1\"",
                "unknown key `advertize` in [kafka]; did you mean `advertise`?",
            ),
            (
                "[stomp]\nlogin_name = \"x\"",
                "unknown key `login_name` in [stomp]",
            ),
            (
                "[forward]\nsharedkey = \"s\"",
                "unknown key `sharedkey` in [forward]; did you mean `shared_key`?",
            ),
            (
                "[http]\nlisen = \"127.0.0.1:1\"",
                "unknown key `lisen` in [http]; did you mean `listen`?",
            ),
            (
                "[[forward.route]]\nmatch = \"a.**\"\ntopik = \"t\"",
                "unknown key `topik` in [[forward.route]] #1 (\"a.**\"); did you mean `topic`?",
            ),
        ] {
            let got = file_error(text);
            assert!(got.starts_with(want), "{text:?}: {got}");
        }
    }

    #[test]
    fn a_bad_route_names_route_and_key() {
        let got =
            file_error("[[forward.route]]\nmatch = \"a.*\"\n[[forward.route]]\nmatch = \"{x\"\n");
        assert!(
            got.starts_with("invalid `match` in [[forward.route]] #2 (match = \"{x\")"),
            "{got}"
        );
        let got = file_error("[[forward.route]]\nmatch = \"a.*\"\ntopic = \"bad name\"\n");
        assert!(
            got.starts_with("invalid `topic` in [[forward.route]] #1"),
            "{got}"
        );
    }

    #[test]
    fn the_flush_error_lists_every_policy() {
        let got = file_error("[topics]\nflush = \"sometimes\"");
        assert!(
            got.contains("acks, never, always or interval:<ms>"),
            "{got}"
        );
        assert!(got.contains("`flush` in [topics]"), "{got}");
    }

    #[test]
    fn two_listeners_on_one_address_are_refused() {
        let got = file_error(
            "[kafka]\nlisten = \"127.0.0.1:7000\"\n[stomp]\nlisten = \"127.0.0.1:7000\"",
        );
        assert!(
            got.contains("[kafka] and [stomp] both listen on 127.0.0.1:7000"),
            "{got}"
        );
    }

    #[test]
    fn unknown_nagare_variables_are_reported() {
        let mut tree = toml::Value::try_from(Settings::default()).unwrap();
        let warnings = apply_env(
            &mut tree,
            "NAGARE",
            [
                ("NAGARE_KAFKA_LISTN".to_string(), "x".to_string()),
                ("NAGARE_LOG".to_string(), "info".to_string()),
            ],
        )
        .unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("did you mean NAGARE_KAFKA_LISTEN?"),
            "{warnings:?}"
        );
    }

    #[test]
    fn kafka_advertise_comes_from_the_environment() {
        let s = load_with(
            None,
            &[("NAGARE_KAFKA_ADVERTISE", "h:1")],
            ServeArgs::default(),
        );
        assert_eq!(s.kafka.protocol.advertise.as_deref(), Some("h:1"));
    }
}
