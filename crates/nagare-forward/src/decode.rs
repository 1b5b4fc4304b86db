//! Sans-io decoder of forward-protocol requests: feed it the connection's receive buffer,
//! get whole requests back. The four modes are told apart by the second array element:
//! a time (Message), an array (Forward), or a str/bin of concatenated entries
//! (PackedForward, compressed or not).

use std::io::Read;
use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::error::DecodeError;
use crate::msgpack::{scan_resume, scan_value, Head, Reader, Scan, ScanState};

/// Limits applied while decoding; see [`crate::Config`].
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request (one top-level MessagePack value) buffered.
    pub max_chunk_bytes: usize,
    /// Largest decompressed PackedForward entry stream.
    pub max_decompressed_bytes: usize,
    /// Most events in one request.
    pub max_events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_chunk_bytes: 64 << 20,
            max_decompressed_bytes: 256 << 20,
            max_events: 1_000_000,
        }
    }
}

/// An event time: seconds and nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTime {
    pub secs: i64,
    pub nanos: u32,
}

impl EventTime {
    pub fn millis(self) -> i64 {
        self.secs
            .saturating_mul(1000)
            .saturating_add((self.nanos / 1_000_000) as i64)
    }

    pub fn total_nanos(self) -> i128 {
        self.secs as i128 * 1_000_000_000 + self.nanos as i128
    }

    fn now() -> EventTime {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        EventTime {
            secs: d.as_secs() as i64,
            nanos: d.subsec_nanos(),
        }
    }
}

/// One event: its time and where its record (a MessagePack map) lies in the request's
/// `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub time: EventTime,
    pub record: Range<usize>,
}

/// Which of the four modes a request came in (for logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Message,
    Forward,
    PackedForward,
    CompressedPackedForward,
}

impl Mode {
    pub const ALL: [Mode; 4] = [
        Mode::Message,
        Mode::Forward,
        Mode::PackedForward,
        Mode::CompressedPackedForward,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Message => "message",
            Mode::Forward => "forward",
            Mode::PackedForward => "packed_forward",
            Mode::CompressedPackedForward => "compressed_packed_forward",
        }
    }
}

/// A decoded event request.
#[derive(Debug, Clone)]
pub struct Request {
    pub mode: Mode,
    pub tag: Bytes,
    /// The `chunk` option's value as it was encoded (echoed byte for byte in the ack).
    pub chunk: Option<Bytes>,
    /// Bytes the entries' record ranges point into: the request itself, or the
    /// decompressed entry stream.
    pub source: Bytes,
    pub entries: Vec<Entry>,
}

/// A PING of the shared-key handshake: `["PING", hostname, salt, digest, user, pw_digest]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ping {
    pub hostname: Bytes,
    pub salt: Bytes,
    pub digest: Bytes,
    pub username: Bytes,
    pub password_digest: Bytes,
}

#[derive(Debug, Clone)]
pub enum Frame {
    /// A `nil` sent as a keepalive/heartbeat over TCP: ignored.
    Nil,
    Request(Request),
    Ping(Ping),
}

/// Incremental decoder over a connection's receive buffer.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    /// Bytes the buffer must hold before it is worth scanning again.
    need: usize,
    /// Where the scan of the request at the front of the buffer stopped.
    scan: ScanState,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(Limits::default())
    }
}

impl Decoder {
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            need: 0,
            scan: ScanState::start(0),
        }
    }

    /// Bytes the buffer must hold before the next frame can be complete (a hint for how
    /// much to read; 0 when unknown).
    pub fn need(&self) -> usize {
        self.need
    }

    /// Takes the next whole frame off the front of `buf`, `Ok(None)` if it is not all
    /// there yet.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, DecodeError> {
        if buf.is_empty() || buf.len() < self.need {
            return Ok(None);
        }
        match scan_resume(buf, &mut self.scan)? {
            Scan::Incomplete(need) => {
                if need > self.limits.max_chunk_bytes {
                    return Err(DecodeError::TooLarge {
                        size: need,
                        limit: self.limits.max_chunk_bytes,
                    });
                }
                self.need = need;
                Ok(None)
            }
            Scan::Complete(end) => {
                self.need = 0;
                self.scan = ScanState::start(0);
                if end > self.limits.max_chunk_bytes {
                    return Err(DecodeError::TooLarge {
                        size: end,
                        limit: self.limits.max_chunk_bytes,
                    });
                }
                let frame = buf.split_to(end).freeze();
                parse_frame(frame, &self.limits).map(Some)
            }
        }
    }
}

/// Parses one complete top-level value.
pub fn parse_frame(frame: Bytes, limits: &Limits) -> Result<Frame, DecodeError> {
    let mut r = Reader::new(&frame);
    let len = match r.head()? {
        Head::Nil => return Ok(Frame::Nil),
        Head::Array(n) => n,
        _ => return Err(DecodeError::Shape("a request must be an array")),
    };
    let tag = match r.head()? {
        Head::Str(n) | Head::Bin(n) => {
            let start = r.pos;
            r.bytes(n)?;
            start..r.pos
        }
        _ => return Err(DecodeError::Shape("the tag must be a string")),
    };
    if len == 6 && &frame[tag.clone()] == b"PING" {
        return parse_ping(&mut r, &frame);
    }
    if !(2..=4).contains(&len) {
        return Err(DecodeError::Shape("a request has 2 to 4 elements"));
    }
    if std::str::from_utf8(&frame[tag.clone()]).is_err() {
        return Err(DecodeError::Shape("the tag is not UTF-8"));
    }
    let tag_bytes = frame.slice(tag);
    // An array is Forward mode's entries, unless its first element is a time: then it
    // is a Message whose time carries metadata (`[EventTime, {...}]`, protocol v1.5).
    let forward = match r.peek()? {
        Head::Array(0) => true,
        Head::Array(_) => {
            let mut inner = Reader::new(r.buf);
            inner.pos = r.pos;
            inner.head()?;
            matches!(inner.peek()?, Head::Array(_))
        }
        _ => false,
    };
    match r.peek()? {
        Head::Array(_) if forward => {
            let entries = parse_entries_array(&mut r, limits.max_events)?;
            let chunk = parse_options(&mut r, &frame, len, 3)?.chunk;
            Ok(Frame::Request(Request {
                mode: Mode::Forward,
                tag: tag_bytes,
                chunk,
                source: frame,
                entries,
            }))
        }
        Head::Str(n) | Head::Bin(n) => {
            r.head()?;
            let start = r.pos;
            r.bytes(n)?;
            let packed = start..r.pos;
            let opts = parse_options(&mut r, &frame, len, 3)?;
            let (source, compressed) =
                decompress(frame.slice(packed), opts.compressed.as_deref(), limits)?;
            let entries = parse_packed(&source, limits.max_events)?;
            Ok(Frame::Request(Request {
                mode: if compressed {
                    Mode::CompressedPackedForward
                } else {
                    Mode::PackedForward
                },
                tag: tag_bytes,
                chunk: opts.chunk,
                source,
                entries,
            }))
        }
        _ => {
            if len < 3 {
                return Err(DecodeError::Shape("a Message needs a time and a record"));
            }
            let time = parse_time(&mut r, 0)?;
            let record = parse_record(&mut r)?;
            let chunk = parse_options(&mut r, &frame, len, 4)?.chunk;
            Ok(Frame::Request(Request {
                mode: Mode::Message,
                tag: tag_bytes,
                chunk,
                source: frame,
                entries: vec![Entry { time, record }],
            }))
        }
    }
}

fn parse_ping(r: &mut Reader<'_>, frame: &Bytes) -> Result<Frame, DecodeError> {
    let mut fields: [Range<usize>; 5] = Default::default();
    for f in fields.iter_mut() {
        match r.head()? {
            Head::Str(n) | Head::Bin(n) => {
                let start = r.pos;
                r.bytes(n)?;
                *f = start..r.pos;
            }
            Head::Nil => *f = r.pos..r.pos,
            _ => return Err(DecodeError::Shape("PING fields must be strings")),
        }
    }
    let [hostname, salt, digest, username, password_digest] = fields;
    Ok(Frame::Ping(Ping {
        hostname: frame.slice(hostname),
        salt: frame.slice(salt),
        digest: frame.slice(digest),
        username: frame.slice(username),
        password_digest: frame.slice(password_digest),
    }))
}

#[derive(Default)]
struct Options {
    chunk: Option<Bytes>,
    compressed: Option<String>,
}

/// Reads the option map if the request has one (element `index` of `len`, 1-based).
fn parse_options(
    r: &mut Reader<'_>,
    frame: &Bytes,
    len: usize,
    index: usize,
) -> Result<Options, DecodeError> {
    let mut opts = Options::default();
    if len < index {
        return Ok(opts);
    }
    let n = match r.head()? {
        Head::Map(n) => n,
        Head::Nil => return Ok(opts),
        _ => return Err(DecodeError::Shape("the option must be a map")),
    };
    for _ in 0..n {
        let key = r.str_or_bin()?;
        match key {
            Some(b"chunk") => {
                let range = r.skip()?;
                opts.chunk = Some(frame.slice(range));
            }
            Some(b"compressed") => match r.str_or_bin()? {
                Some(v) => opts.compressed = Some(String::from_utf8_lossy(v).into_owned()),
                None => return Err(DecodeError::Shape("compressed must be a string")),
            },
            // `size` is never trusted (some senders put a byte count there), and unknown
            // options (fluent_signal, ...) are ignored, as Fluentd does.
            _ => {
                r.skip()?;
            }
        }
    }
    Ok(opts)
}

/// Returns the entry stream, decompressed when gzip (one or more members) or zstd. The
/// magic bytes decide, since an entry can never start with them (entries are arrays),
/// which also covers senders that send gzip as `str` or omit the option.
fn decompress(
    packed: Bytes,
    option: Option<&str>,
    limits: &Limits,
) -> Result<(Bytes, bool), DecodeError> {
    let gzip = packed.starts_with(&[0x1f, 0x8b]);
    let zstd = packed.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    match option {
        None | Some("text") | Some("") | Some("gzip") | Some("zstd") => {}
        Some(other) => return Err(DecodeError::UnsupportedCompression(other.to_string())),
    }
    if option == Some("gzip") && !gzip {
        return Err(DecodeError::BadCompression("no gzip header".into()));
    }
    if option == Some("zstd") && !zstd {
        return Err(DecodeError::BadCompression("no zstd magic".into()));
    }
    let max = limits.max_decompressed_bytes;
    let out = if gzip {
        bounded_read(
            flate2::read::MultiGzDecoder::new(&packed[..]),
            packed.len(),
            max,
        )?
    } else if zstd {
        let dec = zstd::stream::read::Decoder::with_buffer(&packed[..])
            .map_err(|e| DecodeError::BadCompression(e.to_string()))?;
        bounded_read(dec, packed.len(), max)?
    } else {
        return Ok((packed, false));
    };
    Ok((Bytes::from(out), true))
}

/// Reads at most `max` bytes; one more means a bomb.
fn bounded_read(rd: impl Read, input_len: usize, max: usize) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(input_len.saturating_mul(4).min(max).min(16 << 20));
    rd.take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| DecodeError::BadCompression(e.to_string()))?;
    if out.len() > max {
        return Err(DecodeError::DecompressedTooLarge { limit: max });
    }
    Ok(out)
}

/// Forward mode: `[[time, record], ...]`.
fn parse_entries_array(r: &mut Reader<'_>, max: usize) -> Result<Vec<Entry>, DecodeError> {
    let Head::Array(n) = r.head()? else {
        return Err(DecodeError::Shape("entries must be an array"));
    };
    if n > max {
        return Err(DecodeError::TooManyEvents { limit: max });
    }
    // Every entry takes at least 3 bytes: bound the allocation by what is really there.
    let mut entries = Vec::with_capacity(n.min((r.buf.len() - r.pos) / 3));
    for _ in 0..n {
        entries.push(parse_entry(r)?);
    }
    Ok(entries)
}

/// PackedForward: entries back to back until the end of the stream.
pub fn parse_packed(source: &[u8], max: usize) -> Result<Vec<Entry>, DecodeError> {
    let mut r = Reader::new(source);
    let mut entries = Vec::with_capacity(estimate_entries(source).min(max));
    while !r.at_end() {
        if entries.len() >= max {
            return Err(DecodeError::TooManyEvents { limit: max });
        }
        entries.push(parse_entry(&mut r)?);
    }
    Ok(entries)
}

/// A guess from the first entry's size, so a chunk of thousands of events does not
/// regrow its vector a dozen times (bounded by the stream size, never by the wire).
fn estimate_entries(source: &[u8]) -> usize {
    match scan_value(source, 0) {
        Ok(Scan::Complete(first)) if first > 0 => (source.len() / first + 1).min(source.len() / 3),
        _ => 0,
    }
}

/// One `[time, record]` entry (extra trailing elements are skipped).
fn parse_entry(r: &mut Reader<'_>) -> Result<Entry, DecodeError> {
    let n = match r.head()? {
        Head::Array(n) if n >= 2 => n,
        _ => return Err(DecodeError::Shape("an entry must be [time, record]")),
    };
    let time = parse_time(r, 0)?;
    let record = parse_record(r)?;
    for _ in 2..n {
        r.skip()?;
    }
    Ok(Entry { time, record })
}

fn parse_record(r: &mut Reader<'_>) -> Result<Range<usize>, DecodeError> {
    match r.peek()? {
        Head::Map(_) => r.skip(),
        _ => Err(DecodeError::Shape("a record must be a map")),
    }
}

/// Integer seconds, a float, EventTime (ext 0: u32 seconds, u32 nanoseconds, fixext8 or
/// ext8), or `[time, {metadata}]` (Forward protocol v1.5, Fluent Bit). `nil` and 0 mean
/// "now", as Fluentd's in_forward treats them.
fn parse_time(r: &mut Reader<'_>, depth: u8) -> Result<EventTime, DecodeError> {
    let t = match r.head()? {
        Head::Uint(0) | Head::Nil => EventTime::now(),
        Head::Uint(s) => EventTime {
            secs: i64::try_from(s).map_err(|_| DecodeError::Time("out of range"))?,
            nanos: 0,
        },
        Head::Int(s) => EventTime { secs: s, nanos: 0 },
        Head::F32(f) => float_time(f as f64)?,
        Head::F64(f) => float_time(f)?,
        Head::Ext(0, 8) => {
            let b = r.bytes(8)?;
            let secs = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            let nanos = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
            if nanos >= 1_000_000_000 {
                return Err(DecodeError::Time("nanoseconds beyond one second"));
            }
            EventTime {
                secs: secs as i64,
                nanos,
            }
        }
        Head::Ext(_, _) => return Err(DecodeError::Time("unknown extension type")),
        Head::Array(n) if n >= 1 && depth == 0 => {
            let t = parse_time(r, 1)?;
            for _ in 1..n {
                r.skip()?;
            }
            t
        }
        _ => return Err(DecodeError::Time("not a time")),
    };
    Ok(t)
}

fn float_time(f: f64) -> Result<EventTime, DecodeError> {
    if !f.is_finite() || f.abs() > 1e15 {
        return Err(DecodeError::Time("float out of range"));
    }
    if f == 0.0 {
        return Ok(EventTime::now());
    }
    let secs = f.floor();
    let nanos = (((f - secs) * 1e9).round() as u32).min(999_999_999);
    Ok(EventTime {
        secs: secs as i64,
        nanos,
    })
}

#[cfg(test)]
mod tests {
    use super::Mode;

    #[test]
    fn all_modes_are_listed_in_declaration_order() {
        // Per-mode tables are indexed with `mode as usize`.
        for (i, mode) in Mode::ALL.into_iter().enumerate() {
            assert_eq!(mode as usize, i);
        }
    }
}
