use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// nagare: one broker for Kafka, STOMP and Fluentd forward clients, all on one shared log.
#[derive(Debug, Parser)]
#[command(
    name = "nagare",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("NAGARE_GIT_COMMIT"), ")"),
    about,
    long_about = None
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the broker (Kafka, STOMP, forward and HTTP listeners on loopback by default).
    Serve(ServeArgs),
    /// Create, list, describe and delete topics of a running broker (HTTP admin API).
    Topic(crate::topic_cmd::TopicArgs),
    /// Add, list and delete users (offline with --data-dir, else the HTTP admin API).
    User(crate::user_cmd::UserArgs),
    /// Add, list and delete ACLs of a running broker (HTTP admin API).
    Acl(crate::acl_cmd::AclArgs),
    /// List, describe, reset the offsets of and delete consumer groups (HTTP admin API).
    Group(crate::group_cmd::GroupArgs),
    /// List, describe and purge STOMP queues (HTTP admin API).
    Queue(crate::queue_cmd::QueueArgs),
    /// One screen about a running broker: version, uptime, listeners, counts, rates.
    Status(crate::status_cmd::StatusArgs),
    /// Produce lines of standard input to a topic of a running broker (Kafka protocol).
    Produce(crate::client_cmds::ProduceArgs),
    /// Print the records of a topic of a running broker (Kafka protocol).
    Consume(crate::client_cmds::ConsumeArgs),
    /// Load generators: Kafka produce/consume, STOMP RPC, queue and fan-out, forward,
    /// compaction; against nagare or a peer.
    Bench(crate::bench::BenchArgs),
    /// TLS helpers: `nagare tls self-signed` writes a development CA and certificates.
    Tls(crate::tls_cmd::TlsArgs),
    /// Print the full default configuration as TOML.
    DefaultConfig,
}

/// Every setting can also come from a TOML file (`--config`) and from `NAGARE_*`
/// environment variables: `NAGARE_<SECTION>_<KEY>` for a key in a section (for example
/// `NAGARE_KAFKA_LISTEN`, `NAGARE_TOPICS_FLUSH`) and `NAGARE_<KEY>` for a top-level one
/// (`NAGARE_DATA_DIR`). Precedence: flags > environment > file > defaults.
#[derive(Debug, Args, Default)]
pub(crate) struct ServeArgs {
    /// TOML configuration file (see nagare.toml in the repository for every setting).
    #[arg(long, value_name = "FILE", env = "NAGARE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory holding the logs [default: ./data] [env: NAGARE_DATA_DIR]. In
    /// cluster mode it holds only the gateway's own state (users, ACLs, its lock).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Where topics live: `local` (the embedded log under --data-dir) or
    /// `kafka://HOST:PORT[,HOST:PORT...]` (cluster mode: nagare is a gateway in front of
    /// an Apache Kafka cluster; client properties in [store.kafka]) [default: local]
    /// [env: NAGARE_STORE]
    #[arg(long, value_name = "STORE")]
    pub store: Option<String>,
    /// This node's id; in cluster mode unique per gateway [default: 1]
    /// [env: NAGARE_NODE_ID]
    #[arg(long, value_name = "N")]
    pub node_id: Option<i32>,
    /// Kafka listener [default: 127.0.0.1:9092] [env: NAGARE_KAFKA_LISTEN]
    #[arg(long, value_name = "ADDR")]
    pub kafka_listen: Option<SocketAddr>,
    /// host:port given to Kafka clients in metadata [default: the listen address]
    /// [env: NAGARE_KAFKA_ADVERTISE]
    #[arg(long, value_name = "HOST:PORT")]
    pub kafka_advertise: Option<String>,
    /// STOMP listener [default: 127.0.0.1:61613] [env: NAGARE_STOMP_LISTEN]
    #[arg(long, value_name = "ADDR")]
    pub stomp_listen: Option<SocketAddr>,
    /// Fluentd forward listener, TCP and UDP heartbeats [default: 127.0.0.1:24224]
    /// [env: NAGARE_FORWARD_LISTEN]
    #[arg(long, value_name = "ADDR")]
    pub forward_listen: Option<SocketAddr>,
    /// HTTP admin listener: /healthz, /metrics, /topics [default: 127.0.0.1:9644]
    /// [env: NAGARE_HTTP_LISTEN]
    #[arg(long, value_name = "ADDR")]
    pub http_listen: Option<SocketAddr>,
    /// Log filter, e.g. `info` or `nagare_kafka=debug` [default: info] [env: NAGARE_LOG]
    #[arg(long, value_name = "FILTER")]
    pub log: Option<String>,
    /// Log line format on stderr: `text` or `json` (one object per line)
    /// [default: text] [env: NAGARE_LOG_FORMAT]
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub log_format: Option<crate::config::LogFormat>,
    /// Whether every listener demands authentication (Kafka SASL, STOMP login, forward
    /// users, HTTP basic auth) [default: none] [env: NAGARE_SECURITY_AUTH]
    #[arg(long, value_name = "MODE", value_enum)]
    pub auth: Option<crate::config::AuthMode>,
    /// Users that bypass ACLs, e.g. `alice,bob` [env: NAGARE_SECURITY_SUPER_USERS]
    #[arg(long, value_name = "USERS", value_delimiter = ',')]
    pub super_users: Option<Vec<String>>,
    /// Start even though a listener reachable from other machines has authentication
    /// off (refused by default) [env: NAGARE_SECURITY_ALLOW_ANONYMOUS_REMOTE]
    #[arg(long)]
    pub allow_anonymous_remote: bool,
    /// PEM certificate chain: with --tls-key, every listener speaks TLS (Kafka SSL /
    /// SASL_SSL, STOMP, forward, HTTPS) [env: NAGARE_TLS_CERT]
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert [env: NAGARE_TLS_KEY]
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Write the port each listener bound to this file as `name=addr` lines once all
    /// are up (useful with port 0 in tests).
    #[arg(long, value_name = "FILE")]
    pub ports_file: Option<PathBuf>,
}
