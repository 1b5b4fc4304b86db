//! Writes records straight into an uncompressed Kafka record batch v2.
//!
//! Each record's size is computed first, so the record is written once, in place, with
//! no per-record scratch buffer. The forward receiver calls this for every event (a
//! million a second); `build_batch` uses it for the STOMP and internal-state paths.

use bytes::{BufMut, BytesMut};

use crate::batch_layout::{pos, HEADER_LEN, LOG_OVERHEAD};

/// One batch being written. Base offset 0, no producer id: the log assigns offsets.
pub struct BatchWriter {
    buf: BytesMut,
    count: i32,
    base_ts: i64,
    max_ts: i64,
}

impl BatchWriter {
    /// A batch whose records are expected to take about `capacity` bytes.
    pub fn new(capacity: usize) -> BatchWriter {
        let mut buf = BytesMut::with_capacity(HEADER_LEN + capacity);
        buf.put_bytes(0, HEADER_LEN);
        BatchWriter {
            buf,
            count: 0,
            base_ts: 0,
            max_ts: i64::MIN,
        }
    }

    /// Bytes written so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn count(&self) -> i32 {
        self.count
    }

    /// Appends one record with its headers (name, value) in order.
    pub fn push<'h, H>(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: H,
    ) where
        H: IntoIterator<Item = (&'h str, Option<&'h [u8]>)>,
        H::IntoIter: Clone,
    {
        if self.count == 0 {
            self.base_ts = timestamp;
        }
        self.max_ts = self.max_ts.max(timestamp);
        let ts_delta = timestamp.wrapping_sub(self.base_ts);
        let offset_delta = self.count as i64;
        let headers = headers.into_iter();
        let mut header_count = 0i64;
        let mut size = 1
            + varlong_len(ts_delta)
            + varlong_len(offset_delta)
            + opt_bytes_len(key)
            + opt_bytes_len(value);
        for (k, v) in headers.clone() {
            header_count += 1;
            size += varlong_len(k.len() as i64) + k.len() + opt_bytes_len(v);
        }
        size += varlong_len(header_count);
        // Zero-fill once, then store bytes through a cursor: a record is a dozen tiny
        // fields, and a memmove call per field cost more than the copying itself.
        let old = self.buf.len();
        self.buf.resize(old + varlong_len(size as i64) + size, 0);
        let mut c = Cursor {
            b: &mut self.buf[old..],
            i: 0,
        };
        c.varlong(size as i64);
        c.byte(0); // attributes
        c.varlong(ts_delta);
        c.varlong(offset_delta);
        c.opt_bytes(key);
        c.opt_bytes(value);
        c.varlong(header_count);
        for (k, v) in headers {
            c.varlong(k.len() as i64);
            c.bytes(k.as_bytes());
            c.opt_bytes(v);
        }
        debug_assert_eq!(c.i, c.b.len());
        self.count += 1;
    }

    /// Fills in the header and the CRC.
    pub fn finish(mut self) -> BytesMut {
        let batch_length = (self.buf.len() - LOG_OVERHEAD) as i32;
        let max_ts = if self.count == 0 {
            self.base_ts
        } else {
            self.max_ts
        };
        let mut h = &mut self.buf[..HEADER_LEN];
        h.put_i64(0); // base offset
        h.put_i32(batch_length);
        h.put_i32(-1); // partition leader epoch
        h.put_i8(2); // magic
        h.put_u32(0); // crc, below
        h.put_i16(0); // attributes: uncompressed, create time
        h.put_i32((self.count - 1).max(0)); // last offset delta
        h.put_i64(self.base_ts);
        h.put_i64(max_ts);
        h.put_i64(-1); // producer id
        h.put_i16(-1); // producer epoch
        h.put_i32(-1); // base sequence
        h.put_i32(self.count);
        let crc = crc32c::crc32c(&self.buf[pos::ATTRIBUTES..]);
        self.buf[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        self.buf
    }
}

/// Writes into a slice sized exactly for the record.
struct Cursor<'a> {
    b: &'a mut [u8],
    i: usize,
}

impl Cursor<'_> {
    fn byte(&mut self, v: u8) {
        self.b[self.i] = v;
        self.i += 1;
    }

    /// Zig-zag varint, as every record field uses.
    fn varlong(&mut self, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            self.byte((z as u8) | 0x80);
            z >>= 7;
        }
        self.byte(z as u8);
    }

    fn bytes(&mut self, s: &[u8]) {
        copy_short(&mut self.b[self.i..self.i + s.len()], s);
        self.i += s.len();
    }

    /// Length-prefixed bytes; -1 for null.
    fn opt_bytes(&mut self, s: Option<&[u8]>) {
        match s {
            None => self.varlong(-1),
            Some(s) => {
                self.varlong(s.len() as i64);
                self.bytes(s);
            }
        }
    }
}

/// Copies `src` into `dst` (of the same length); up to 32 bytes with two fixed-size moves
/// that overlap in the middle (the first and the last 16, 8, 4 or 2 bytes): header names
/// and values are a dozen bytes, and a memmove call, or a store per byte, cost more than
/// the copy itself.
fn copy_short(dst: &mut [u8], src: &[u8]) {
    fn two<const N: usize>(dst: &mut [u8], src: &[u8]) {
        debug_assert_eq!(dst.len(), src.len());
        let n = src.len();
        if let (Some(d), Some(s)) = (dst.first_chunk_mut::<N>(), src.first_chunk::<N>()) {
            *d = *s;
        }
        if let (Some(d), Some(s)) = (
            dst[n - N..].first_chunk_mut::<N>(),
            src[n - N..].first_chunk::<N>(),
        ) {
            *d = *s;
        }
    }
    match src.len() {
        0 => {}
        1 => dst[0] = src[0],
        2..=3 => two::<2>(dst, src),
        4..=7 => two::<4>(dst, src),
        8..=16 => two::<8>(dst, src),
        17..=32 => two::<16>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

fn varlong_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (64 - (z | 1).leading_zeros() as usize).div_ceil(7)
}

fn opt_bytes_len(s: Option<&[u8]>) -> usize {
    match s {
        None => 1,
        Some(s) => varlong_len(s.len() as i64) + s.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{decode_records, validate};

    #[test]
    fn short_copies_take_every_byte_at_every_length() {
        let src: Vec<u8> = (1..=40).collect();
        for n in 0..=40 {
            let mut dst = vec![0u8; n];
            copy_short(&mut dst, &src[..n]);
            assert_eq!(dst, src[..n], "length {n}");
        }
    }

    #[test]
    fn what_we_write_the_log_reads_back() {
        let mut w = BatchWriter::new(1024);
        let long = vec![b'x'; 300];
        w.push(
            1_700_000_000_123,
            None,
            Some(b"{\"a\":1}"),
            [("fluent.tag", Some(&b"t"[..])), ("n", Some(&b"1"[..]))],
        );
        w.push(1_700_000_000_001, Some(b"key"), Some(&long), []);
        w.push(
            1_700_000_009_000,
            None,
            None,
            [("k", Some(&b""[..])), ("z", None)],
        );
        let batch = w.finish();
        validate(&batch, 1 << 20).unwrap();
        let recs = decode_records(&batch).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].timestamp, 1_700_000_000_123);
        assert_eq!(recs[1].timestamp, 1_700_000_000_001);
        assert_eq!(recs[2].timestamp, 1_700_000_009_000);
        assert_eq!(recs[0].value.as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(recs[1].value.as_deref(), Some(&long[..]));
        assert_eq!(recs[1].key.as_deref(), Some(&b"key"[..]));
        assert!(recs[0].key.is_none());
        assert!(recs[2].value.is_none());
        assert_eq!(recs[0].headers[0].0, "fluent.tag");
        assert_eq!(recs[0].headers[1].1.as_deref(), Some(&b"1"[..]));
        assert_eq!(recs[2].headers[1], ("z".to_string(), None));
        assert_eq!(recs[2].offset, 2);
    }

    #[test]
    fn varlong_lengths_match_the_encoding() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            8191,
            8192,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = [0u8; 10];
            let mut c = Cursor { b: &mut out, i: 0 };
            c.varlong(v);
            assert_eq!(varlong_len(v), c.i, "{v}");
        }
    }
}
