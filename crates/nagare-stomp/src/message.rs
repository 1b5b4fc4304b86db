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

/// A delivery count as text without a heap allocation.
fn itoa_i16(n: i16) -> MessageId {
    let mut id = MessageId::empty();
    id.put_number(n);
    id
}

/// Headers of a SEND that never travel with the message.
pub(crate) const SEND_ONLY: &[&str] = &["destination", "receipt", "transaction", "content-length"];

/// The header a SEND uses to set the record key (and a MESSAGE shows it under).
pub(crate) const KEY_HEADER: &str = "key";

/// A message id formatted on the stack: one is made per MESSAGE, and a `format!`
/// per message showed up among the allocations of the RPC path.
pub(crate) struct MessageId {
    buf: [u8; MessageId::MAX_LEN],
    len: usize,
}

impl MessageId {
    /// The longest id: what the stack buffer holds.
    pub(crate) const MAX_LEN: usize = 64;

    /// `t-<n>`: a temp-queue message (never acknowledged, only unique).
    pub(crate) fn temp(n: u64) -> MessageId {
        let mut id = MessageId::empty();
        id.put(b"t-");
        id.put_number(n);
        id
    }

    /// `<connection>-<subscription>-<offset>`: a queue message, all an ACK needs.
    pub(crate) fn queue(conn: u64, sub: u64, offset: i64) -> MessageId {
        let mut id = MessageId::empty();
        id.put_number(conn);
        id.put(b"-");
        id.put_number(sub);
        id.put(b"-");
        id.put_number(offset);
        id
    }

    fn empty() -> MessageId {
        MessageId {
            buf: [0; MessageId::MAX_LEN],
            len: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.len..end) {
            dst.copy_from_slice(bytes);
            self.len = end;
        }
    }

    /// Decimal, with a sign if negative (three 64-bit numbers always fit).
    fn put_number(&mut self, n: impl itoa::Integer) {
        self.put(itoa::Buffer::new().format(n).as_bytes());
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII digits, `-` and `t` are ever written.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

/// What is the same for every MESSAGE of one subscription.
#[derive(Debug, Clone)]
pub(crate) struct MessageHead {
    version: Version,
    destination: String,
    /// Whether to add the 1.2 `ack` header (client ack modes).
    ack_header: bool,
    /// The `destination` and `subscription` header lines, escaped for `version`: every
    /// MESSAGE of the subscription starts with them, so they are encoded once (checking
    /// and copying them header by header showed in the RPC profile).
    lead: Vec<u8>,
}

impl MessageHead {
    pub(crate) fn new(
        version: Version,
        destination: String,
        subscription: &str,
        ack_header: bool,
    ) -> MessageHead {
        let mut head = MessageHead {
            version,
            destination: String::new(),
            ack_header,
            lead: Vec::new(),
        };
        head.retarget(destination, subscription);
        head
    }

    /// Points later MESSAGEs at another destination and subscription (a temp queue its
    /// owner subscribes to or unsubscribes from).
    pub(crate) fn retarget(&mut self, destination: String, subscription: &str) {
        let mut lead = BytesMut::new();
        FrameWriter::headers_only(&mut lead, self.version, Command::Message)
            .header("destination", &destination)
            .header("subscription", subscription);
        self.lead = lead.to_vec();
        self.destination = destination;
    }

    /// The destination MESSAGEs show.
    pub(crate) fn destination(&self) -> &str {
        &self.destination
    }

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
            let digits = itoa_i16(n);
            w.header("delivery-count", digits.as_str());
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

    /// About the bytes [`encode_record`](Self::encode_record) writes for `record` with a
    /// message id of up to `id_len` bytes (escapes aside), to size a buffer once.
    pub(crate) fn frame_size_estimate(&self, id_len: usize, record: &Record) -> usize {
        // Command, header names, separators, content-length digits and the NUL.
        const FIXED: usize = 96;
        let ids = if self.ack_header { 2 * id_len } else { id_len };
        let headers: usize = record
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()) + 2)
            .sum();
        FIXED
            + self.lead.len()
            + ids
            + headers
            + record.key.as_ref().map_or(0, |k| k.len() + 16)
            + record.value.as_ref().map_or(0, |v| v.len())
    }

    /// A SEND's headers and body as a MESSAGE (temp queues: no log in between).
    pub(crate) fn encode_frame<'h>(
        &self,
        out: &mut BytesMut,
        message_id: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        body: &[u8],
    ) {
        let mut w = self.begin(out, message_id, Some(false));
        for (k, v) in headers {
            if !RESERVED.contains(&k) && !SEND_ONLY.contains(&k) {
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
        w.encoded(&self.lead).header("message-id", message_id);
        if self.ack_header {
            w.header("ack", message_id);
        }
        // Nothing to escape in these, in any version.
        match redelivered {
            Some(true) => w.encoded(b"redelivered:true\n"),
            Some(false) => w.encoded(b"redelivered:false\n"),
            None => &mut w,
        };
        w
    }
}

#[cfg(test)]
mod tests {
    use super::MessageId;

    #[test]
    fn message_ids_read_as_before() {
        assert_eq!(MessageId::temp(0).as_str(), "t-0");
        assert_eq!(
            MessageId::temp(u64::MAX).as_str(),
            format!("t-{}", u64::MAX)
        );
        assert_eq!(MessageId::queue(3, 1, 42).as_str(), "3-1-42");
        let widest = MessageId::queue(u64::MAX, u64::MAX, i64::MIN);
        assert_eq!(
            widest.as_str(),
            format!("{}-{}-{}", u64::MAX, u64::MAX, i64::MIN)
        );
        assert_eq!(super::itoa_i16(-3).as_str(), "-3");
    }
}
