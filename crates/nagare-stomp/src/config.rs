use serde::{Deserialize, Serialize};

use crate::decode::Limits;

/// Settings of the STOMP listener (the `[stomp]` table of nagare.toml; every field is
/// also `NAGARE_STOMP_<FIELD>`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Largest frame accepted (headers and body).
    pub max_frame_bytes: usize,
    /// Most headers in one frame.
    pub max_headers: usize,
    /// Longest header line.
    pub max_header_bytes: usize,
    /// The heart-beat interval the server offers both ways (CONNECTED `heart-beat`), in
    /// ms; the negotiated interval is the larger of this and the client's. 0 disables.
    pub heartbeat_ms: u64,
    /// A peer is dropped when nothing arrived for this many negotiated intervals.
    pub heartbeat_tolerance: f64,
    /// When non-empty, CONNECT must carry credentials: this `login` and `passcode`, or a
    /// user of the broker's user store (which is asked in any case).
    pub login: String,
    pub passcode: String,
    /// When non-empty, the only accepted CONNECT `host` (a single virtual host); empty
    /// accepts any host.
    pub vhost: String,
    /// In-flight messages per queue subscription without a `prefetch-count` header.
    pub default_prefetch: usize,
    /// Upper bound of `prefetch-count` (0 in the header also means this).
    pub max_prefetch: usize,
    /// Bytes of frames waiting to be written to one connection before producers of topic
    /// and temp-queue messages to it wait (queue messages are bounded by prefetch). A
    /// topic subscription stops reading the log while it is full and catches up later.
    pub outbound_buffer_bytes: usize,
    /// Bytes of topic messages read from the log and not yet written, over all
    /// connections: beyond it topic subscriptions stop reading until sockets drain
    /// (publishers never wait for them).
    pub max_outbound_bytes: usize,
    /// Frames buffered in one transaction at most.
    pub max_transaction_frames: usize,
    /// Bytes of replies waiting in one temp queue (written to its owner's socket not yet).
    /// A reply beyond it is dropped, logged and counted in
    /// `nagare_rejected_total{protocol="stomp",reason="temp_queue_full"}`: a requester that
    /// never reads must not block the responder, which serves everyone else too.
    pub temp_queue_max_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        let l = Limits::default();
        Config {
            max_frame_bytes: l.max_frame_bytes,
            max_headers: l.max_headers,
            max_header_bytes: l.max_header_bytes,
            heartbeat_ms: 100,
            heartbeat_tolerance: 2.0,
            login: String::new(),
            passcode: String::new(),
            vhost: String::new(),
            default_prefetch: 256,
            max_prefetch: 65_536,
            outbound_buffer_bytes: 512 * 1024,
            max_outbound_bytes: 128 * 1024 * 1024,
            max_transaction_frames: 10_000,
            temp_queue_max_bytes: 4 * 1024 * 1024,
        }
    }
}

impl Config {
    pub fn limits(&self) -> Limits {
        Limits {
            max_frame_bytes: self.max_frame_bytes.max(1024),
            max_headers: self.max_headers.max(8),
            max_header_bytes: self.max_header_bytes.max(256),
        }
    }
}
