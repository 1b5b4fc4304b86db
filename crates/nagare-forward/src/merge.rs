//! Consecutive small requests of one tag and mode, as pipelined by senders in Message
//! mode (one event per request, fluent-logger's default), merged into one request: the
//! connection then appends them as one record batch — one write to the log for what was
//! one per event — and acks their chunks together once it is durable.
//!
//! The records are copied into one buffer (small by definition: at most
//! [`MAX_ENTRIES`] events per request and [`MAX_BYTES`] in all); large requests are
//! appended on their own, as before.

use bytes::{Bytes, BytesMut};

use crate::decode::{Entry, Mode, Request};

/// Requests with more events than this are already batches of their own.
const MAX_ENTRIES: usize = 16;
/// Bytes of records merged into one request at most (the log splits a merged request
/// into batches of the topic's `max.message.bytes` anyway; this bounds the copy).
const MAX_BYTES: usize = 1024 * 1024;

/// The requests merged so far (none: empty).
#[derive(Default)]
pub(crate) struct Merge {
    tag: Bytes,
    mode: Option<Mode>,
    source: BytesMut,
    entries: Vec<Entry>,
    /// The `chunk` options of the merged requests, in order: each is acked.
    chunks: Vec<Bytes>,
    requests: u64,
}

/// What [`Merge::take`] gives: one request standing for `requests` requests, and the
/// chunks to ack once it is durable.
pub(crate) struct Merged {
    pub request: Request,
    pub chunks: Vec<Bytes>,
    pub requests: u64,
}

impl Merge {
    /// Whether `req` is small enough to be merged at all.
    pub(crate) fn mergeable(req: &Request) -> bool {
        req.entries.len() <= MAX_ENTRIES && req.source.len() <= MAX_BYTES / 4
    }

    /// Whether `req` can join what is merged so far (same tag and mode, room left).
    pub(crate) fn accepts(&self, req: &Request) -> bool {
        match self.mode {
            None => true,
            Some(mode) => {
                mode == req.mode
                    && self.tag == req.tag
                    && self.source.len() + req.source.len() <= MAX_BYTES
            }
        }
    }

    /// Adds a request; the caller checked [`Merge::mergeable`] and [`Merge::accepts`].
    pub(crate) fn push(&mut self, req: Request) {
        if self.mode.is_none() {
            self.mode = Some(req.mode);
            self.tag = req.tag.clone();
        }
        for e in &req.entries {
            let Some(record) = req.source.get(e.record.clone()) else {
                continue;
            };
            let start = self.source.len();
            self.source.extend_from_slice(record);
            self.entries.push(Entry {
                time: e.time,
                record: start..self.source.len(),
            });
        }
        self.chunks.extend(req.chunk);
        self.requests += 1;
    }

    /// What was merged, leaving this empty.
    pub(crate) fn take(&mut self) -> Option<Merged> {
        let mode = self.mode.take()?;
        let merged = std::mem::take(self);
        Some(Merged {
            request: Request {
                mode,
                tag: merged.tag,
                chunk: None,
                source: merged.source.freeze(),
                entries: merged.entries,
            },
            chunks: merged.chunks,
            requests: merged.requests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::EventTime;

    fn message(tag: &str, record: &[u8], chunk: Option<&str>) -> Request {
        let mut source = vec![0xc0; 3];
        source.extend_from_slice(record);
        Request {
            mode: Mode::Message,
            tag: Bytes::from(tag.to_string()),
            chunk: chunk.map(|c| Bytes::from(c.to_string())),
            source: Bytes::from(source),
            entries: vec![Entry {
                time: EventTime { secs: 7, nanos: 9 },
                record: 3..3 + record.len(),
            }],
        }
    }

    #[test]
    fn merges_records_in_order_and_keeps_every_chunk() {
        let mut m = Merge::default();
        for (i, chunk) in [Some("a"), None, Some("c")].into_iter().enumerate() {
            let req = message("t", &[0x80 + i as u8], chunk);
            assert!(Merge::mergeable(&req) && m.accepts(&req));
            m.push(req);
        }
        assert!(!m.accepts(&message("other", b"\x80", None)));
        let mut forward = message("t", b"\x80", None);
        forward.mode = Mode::Forward;
        assert!(!m.accepts(&forward));
        let merged = m.take().expect("merged");
        assert!(m.take().is_none());
        assert_eq!(merged.requests, 3);
        assert_eq!(merged.chunks, vec![Bytes::from("a"), Bytes::from("c")]);
        let r = merged.request;
        assert_eq!(&r.tag[..], b"t");
        let records: Vec<&[u8]> = r
            .entries
            .iter()
            .map(|e| &r.source[e.record.clone()])
            .collect();
        assert_eq!(records, vec![&[0x80u8][..], &[0x81], &[0x82]]);
        assert!(r
            .entries
            .iter()
            .all(|e| e.time == EventTime { secs: 7, nanos: 9 }));
    }

    #[test]
    fn large_requests_are_not_merged() {
        let mut req = message("t", b"\x80", None);
        req.entries = vec![req.entries[0].clone(); MAX_ENTRIES + 1];
        assert!(!Merge::mergeable(&req));
    }
}
