//! Settings of the forward listener: the `[forward]` table of nagare.toml (flattened in
//! by the binary, so every scalar is also a `NAGARE_FORWARD_<FIELD>` variable).
//!
//! ```toml
//! [forward]
//! shared_key = "secret"          # enables the HELO/PING/PONG handshake
//! self_hostname = "nagare"
//! max_chunk_bytes = 67108864     # largest request buffered (64 MiB)
//! max_decompressed_bytes = 268435456
//! max_events_per_request = 1000000
//! dead_letter_topic = "forward.dead-letter"   # refused events; "" disables
//! max_buffered_bytes = 268435456 # all connections' unacknowledged bytes (256 MiB)
//!
//! [[forward.user]]               # optional: user authentication in the handshake
//! username = "alice"
//! password = "pw"
//!
//! # Routes: Fluentd match syntax, first match wins; no match -> topic = the tag with
//! # characters outside [a-zA-Z0-9._-] replaced by '_'.
//! [[forward.route]]
//! match = "app.**"
//! topic = "app-logs"
//! format = "json"                # or "msgpack": the record as the sender packed it
//!
//! [[forward.route]]
//! match = "debug.** {noise,chatter}.*"
//! drop = true                    # acknowledged and discarded, like Fluentd's null output
//! ```

use serde::{Deserialize, Serialize};

/// How a record is stored as the Kafka record value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A JSON object (what Kafka and STOMP consumers expect).
    #[default]
    Json,
    /// The record's MessagePack map exactly as the sender packed it.
    Msgpack,
}

/// One `[[forward.route]]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Route {
    /// Fluentd match pattern(s): `*`, `**`, `{a,b}`, space-separated alternatives.
    #[serde(rename = "match")]
    pub pattern: String,
    /// Target topic; empty means the (sanitized) tag.
    pub topic: String,
    pub format: Format,
    /// Discard matching events (still acknowledged, as Fluentd's `@type null` does).
    pub drop: bool,
}

/// One `[[forward.user]]` for the handshake's user authentication.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct User {
    pub username: String,
    pub password: String,
}

/// Settings of the forward listener.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[[forward.route]]` tables, first match wins.
    #[serde(rename = "route")]
    pub routes: Vec<Route>,
    /// Format of events that match no route.
    pub default_format: Format,
    /// Non-empty: clients must pass the HELO/PING/PONG handshake with this key.
    pub shared_key: String,
    /// Name this server gives in PONG.
    pub self_hostname: String,
    /// Non-empty: PING must also carry one of these users' name and password digest.
    #[serde(rename = "user")]
    pub users: Vec<User>,
    /// Largest request (one MessagePack value) buffered; larger closes the connection.
    pub max_chunk_bytes: u64,
    /// Largest decompressed CompressedPackedForward entry stream (bomb guard).
    pub max_decompressed_bytes: u64,
    /// Most events in one request (tiny entries would otherwise turn a large request
    /// into many times its size in records).
    pub max_events_per_request: u64,
    /// Answer UDP heartbeats on the listener's address.
    pub udp_heartbeat: bool,
    /// Close connections idle this long (0: never); Fluentd's keepalive senders reconnect.
    pub idle_timeout_ms: u64,
    /// Topic that receives events refused one by one (a record beyond its topic's
    /// `max.message.bytes`, or too deep for JSON) with the reason in headers; empty:
    /// refused events are only counted and logged.
    pub dead_letter_topic: String,
    /// Bytes read but not yet appended and acknowledged, across all connections; beyond
    /// it connections stop reading until memory is released (backpressure). A single
    /// request larger than this is refused like one beyond `max_chunk_bytes`.
    pub max_buffered_bytes: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            routes: Vec::new(),
            default_format: Format::Json,
            shared_key: String::new(),
            self_hostname: "nagare".to_string(),
            users: Vec::new(),
            max_chunk_bytes: 64 << 20,
            max_decompressed_bytes: 256 << 20,
            max_events_per_request: 1_000_000,
            udp_heartbeat: true,
            idle_timeout_ms: 0,
            dead_letter_topic: "forward.dead-letter".to_string(),
            max_buffered_bytes: 256 << 20,
        }
    }
}

impl Config {
    pub(crate) fn limits(&self) -> crate::decode::Limits {
        crate::decode::Limits {
            max_chunk_bytes: usize::try_from(self.max_chunk_bytes).unwrap_or(usize::MAX),
            max_decompressed_bytes: usize::try_from(self.max_decompressed_bytes)
                .unwrap_or(usize::MAX),
            max_events: usize::try_from(self.max_events_per_request).unwrap_or(usize::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct File {
        forward: Config,
    }

    #[test]
    fn routes_and_users_parse_from_toml() {
        let f: File = toml_like(
            r#"{"forward": {"shared_key": "k", "route": [
                {"match": "app.**", "topic": "app-logs"},
                {"match": "raw.*", "format": "msgpack"},
                {"match": "x", "drop": true}],
                "user": [{"username": "u", "password": "p"}]}}"#,
        );
        let c = f.forward;
        assert_eq!(c.shared_key, "k");
        assert_eq!(c.routes.len(), 3);
        assert_eq!(c.routes[0].topic, "app-logs");
        assert_eq!(c.routes[1].format, Format::Msgpack);
        assert!(c.routes[2].drop);
        assert_eq!(c.users[0].username, "u");
        assert_eq!(c.max_chunk_bytes, 64 << 20);
    }

    fn toml_like(json: &str) -> File {
        serde_json::from_str(json).unwrap()
    }
}
