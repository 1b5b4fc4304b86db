//! The dead-letter record of a refused event (`[forward] dead_letter_topic`).
//!
//! The value is the event's record exactly as the sender packed it (MessagePack): the
//! one form every refusal can keep (a record too deep for JSON has no JSON), and what
//! Fluentd's own secondary outputs write. Headers say where it came from and why:
//! `fluent.tag`, `fluent.time_ns` (as on stored events), `dead_letter.reason` (the
//! counter's label), `dead_letter.error` (the reason in words), `dead_letter.topic` (the
//! topic it was meant for). A record that does not fit even the dead-letter topic's
//! `max.message.bytes` keeps its first bytes, and `dead_letter.truncated` carries the
//! record's full size.

use bytes::BytesMut;
use nagare_core::log::batch::{BatchWriter, HEADER_LEN};

use crate::decode::EventTime;
use crate::ingest::{fmt_nanos, BATCH_MARGIN, RECORD_OVERHEAD, TAG_HEADER, TIME_HEADER};
use crate::reject::Reason;

pub const REASON_HEADER: &str = "dead_letter.reason";
pub const ERROR_HEADER: &str = "dead_letter.error";
pub const TOPIC_HEADER: &str = "dead_letter.topic";
pub const TRUNCATED_HEADER: &str = "dead_letter.truncated";

/// Header values beyond this are cut: a dead letter must fit even when the tag was absurd.
const MAX_HEADER_VALUE: usize = 1024;

/// What is known about one refused event.
pub struct Letter<'a> {
    pub record: &'a [u8],
    pub time: EventTime,
    pub tag: &'a [u8],
    pub reason: Reason,
    pub detail: &'a str,
    /// The topic the event was routed to.
    pub topic: &'a str,
}

/// One batch holding `letter` as one record of at most `max_message_bytes` bytes.
pub fn batch(letter: &Letter<'_>, max_message_bytes: usize) -> BytesMut {
    let tag = &letter.tag[..letter.tag.len().min(MAX_HEADER_VALUE)];
    let topic = &letter.topic.as_bytes()[..letter.topic.len().min(MAX_HEADER_VALUE)];
    let detail = &letter.detail.as_bytes()[..letter.detail.len().min(MAX_HEADER_VALUE)];
    let mut digits = itoa::Buffer::new();
    let ns = fmt_nanos(&mut digits, letter.time);
    let full = letter.record.len().to_string();
    let headers_len = [
        (TAG_HEADER, tag.len()),
        (TIME_HEADER, ns.len()),
        (REASON_HEADER, letter.reason.label().len()),
        (ERROR_HEADER, detail.len()),
        (TOPIC_HEADER, topic.len()),
        (TRUNCATED_HEADER, full.len()),
    ]
    .iter()
    .map(|(k, v)| k.len() + v + 10)
    .sum::<usize>();
    let room =
        max_message_bytes.saturating_sub(BATCH_MARGIN + HEADER_LEN + RECORD_OVERHEAD + headers_len);
    let truncated = letter.record.len() > room;
    let value = &letter.record[..letter.record.len().min(room)];
    let mut w = BatchWriter::new(value.len() + headers_len + RECORD_OVERHEAD);
    let base = [
        (TAG_HEADER, Some(tag)),
        (TIME_HEADER, Some(ns)),
        (REASON_HEADER, Some(letter.reason.label().as_bytes())),
        (ERROR_HEADER, Some(detail)),
        (TOPIC_HEADER, Some(topic)),
    ];
    if truncated {
        let with_marker = base
            .into_iter()
            .chain([(TRUNCATED_HEADER, Some(full.as_bytes()))]);
        w.push(
            letter.time.millis(),
            None,
            Some(value),
            with_marker.collect::<Vec<_>>(),
        );
    } else {
        w.push(letter.time.millis(), None, Some(value), base);
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use nagare_core::log::batch::decode_records;

    use super::*;

    fn letter(record: &[u8]) -> Letter<'_> {
        Letter {
            record,
            time: EventTime {
                secs: 1_700_000_000,
                nanos: 5,
            },
            tag: b"app.web",
            reason: Reason::TooLarge,
            detail: "too big",
            topic: "app",
        }
    }

    fn header<'a>(r: &'a nagare_core::log::batch::Record, name: &str) -> Option<&'a [u8]> {
        r.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
    }

    #[test]
    fn a_letter_that_fits_keeps_the_whole_record() {
        let b = batch(&letter(b"\x81\xa1k\xa1v"), 10_000);
        let recs = decode_records(&b).unwrap();
        assert_eq!(recs.len(), 1);
        let r = &recs[0];
        assert_eq!(r.value.as_deref(), Some(&b"\x81\xa1k\xa1v"[..]));
        assert_eq!(r.timestamp, 1_700_000_000_000);
        assert_eq!(header(r, TAG_HEADER), Some(&b"app.web"[..]));
        assert_eq!(header(r, TIME_HEADER), Some(&b"1700000000000000005"[..]));
        assert_eq!(header(r, REASON_HEADER), Some(&b"record_too_large"[..]));
        assert_eq!(header(r, ERROR_HEADER), Some(&b"too big"[..]));
        assert_eq!(header(r, TOPIC_HEADER), Some(&b"app"[..]));
        assert_eq!(header(r, TRUNCATED_HEADER), None);
    }

    #[test]
    fn a_letter_beyond_the_limit_is_truncated_with_a_marker() {
        let record = vec![7u8; 50_000];
        let limit = 10_000;
        let b = batch(&letter(&record), limit);
        assert!(b.len() <= limit - BATCH_MARGIN, "{}", b.len());
        let recs = decode_records(&b).unwrap();
        let r = &recs[0];
        let value = r.value.as_deref().unwrap();
        assert!(
            value.len() > 9_000 && record.starts_with(value),
            "{}",
            value.len()
        );
        assert_eq!(header(r, TRUNCATED_HEADER), Some(&b"50000"[..]));
    }
}
