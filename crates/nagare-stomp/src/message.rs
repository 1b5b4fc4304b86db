//! MESSAGE frames: from log records (topics, queues) and from SEND frames (temp queues).
//! Sender headers travel as record headers; the broker's own headers come first, so they
//! win over a sender's header of the same name (the first of repeated headers wins), and
//! such duplicates are dropped.

use bytes::BytesMut;
use nagare_core::log::batch::Record;

use crate::encode::FrameWriter;
use crate::frame::{Command, Version};

/// Headers the broker sets on MESSAGE frames itself.
const RESERVED: &[&str] = &[
    "destination",
    "message-id",
    "subscription",
    "ack",
    "content-length",
    "redelivered",
    "delivery-count",
];

/// Headers of a SEND that never travel with the message.
pub(crate) const SEND_ONLY: &[&str] = &["destination", "receipt", "transaction", "content-length"];

/// The header a SEND uses to set the record key (and a MESSAGE shows it under).
pub(crate) const KEY_HEADER: &str = "key";

/// What is the same for every MESSAGE of one subscription.
#[derive(Debug, Clone)]
pub(crate) struct MessageHead {
    pub version: Version,
    pub destination: String,
    pub subscription: String,
    /// Whether to add the 1.2 `ack` header (client ack modes).
    pub ack_header: bool,
}

impl MessageHead {
    /// A record as a MESSAGE. `redelivered` is set for queue messages, and so is
    /// `delivery_count` (the `delivery-count` header: the queue's count, shared with
    /// Kafka share groups, 1 on the first delivery).
    pub(crate) fn encode_record(
        &self,
        out: &mut BytesMut,
        message_id: &str,
        redelivered: Option<bool>,
        delivery_count: Option<i16>,
        record: &Record,
    ) {
        let mut w = self.begin(out, message_id, redelivered);
        if let Some(n) = delivery_count {
            w.header("delivery-count", &n.to_string());
        }
        let mut has_key_header = false;
        for (k, v) in &record.headers {
            if RESERVED.contains(&k.as_str()) {
                continue;
            }
            has_key_header |= k == KEY_HEADER;
            let v = v.as_deref().unwrap_or_default();
            match std::str::from_utf8(v) {
                Ok(s) => w.header(k, s),
                Err(_) => w.header(k, &String::from_utf8_lossy(v)),
            };
        }
        if let (Some(key), false) = (&record.key, has_key_header) {
            w.header(KEY_HEADER, &String::from_utf8_lossy(key));
        }
        w.body(record.value.as_deref().unwrap_or_default(), true);
    }

    /// A SEND's headers and body as a MESSAGE (temp queues: no log in between).
    pub(crate) fn encode_frame(
        &self,
        out: &mut BytesMut,
        message_id: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) {
        let mut w = self.begin(out, message_id, Some(false));
        for (k, v) in headers {
            if !RESERVED.contains(&k.as_str()) && !SEND_ONLY.contains(&k.as_str()) {
                w.header(k, v);
            }
        }
        w.body(body, true);
    }

    fn begin<'a>(
        &self,
        out: &'a mut BytesMut,
        message_id: &str,
        redelivered: Option<bool>,
    ) -> FrameWriter<'a> {
        let mut w = FrameWriter::begin(out, self.version, Command::Message);
        w.header("destination", &self.destination)
            .header("message-id", message_id)
            .header("subscription", &self.subscription);
        if self.ack_header {
            w.header("ack", message_id);
        }
        if let Some(r) = redelivered {
            w.header("redelivered", if r { "true" } else { "false" });
        }
        w
    }
}
