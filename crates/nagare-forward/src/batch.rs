//! Writes forward events straight into a Kafka record batch v2.
//!
//! Why not `nagare_log::batch::NewRecord` + `build_batch`: at a million events per
//! second, building a `NewRecord` per event (a header `Vec`, two header-name `String`s,
//! three reference-counted `Bytes`) and then copying everything into the batch cost about
//! a third of the receiver's CPU in malloc/free, refcounting and memmove (perf, `nagare
//! bench forward`). Here each event's record is appended to the batch buffer in place;
//! the finished batch goes through `Partition::append`, which validates it (sizes, CRC)
//! exactly as it validates any producer's batch. Tests decode what this writes with
//! `nagare_log::batch::decode_records`.

use bytes::{BufMut, BytesMut};

/// Bytes before the first record (Kafka's record batch v2 header).
pub const HEADER_LEN: usize = 61;

/// One batch being written.
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

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn count(&self) -> i32 {
        self.count
    }

    /// Appends one record: no key, `value`, and `headers` (name, value) in order. The
    /// record's size is computed first so it is written once, in place.
    pub fn push(&mut self, timestamp: i64, value: &[u8], headers: &[(&str, &[u8])]) {
        if self.count == 0 {
            self.base_ts = timestamp;
        }
        self.max_ts = self.max_ts.max(timestamp);
        let ts_delta = timestamp.wrapping_sub(self.base_ts);
        let offset_delta = self.count as i64;
        let mut size = 1
            + varlong_len(ts_delta)
            + varlong_len(offset_delta)
            + 1
            + varlong_len(value.len() as i64)
            + value.len()
            + varlong_len(headers.len() as i64);
        for (k, v) in headers {
            size += varlong_len(k.len() as i64) + k.len() + varlong_len(v.len() as i64) + v.len();
        }
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
        c.varlong(-1); // no key
        c.varlong(value.len() as i64);
        c.bytes(value);
        c.varlong(headers.len() as i64);
        for (k, v) in headers {
            c.varlong(k.len() as i64);
            c.bytes(k.as_bytes());
            c.varlong(v.len() as i64);
            c.bytes(v);
        }
        debug_assert_eq!(c.i, c.b.len());
        self.count += 1;
    }

    /// Fills in the header (base offset 0: the log assigns offsets) and the CRC.
    pub fn finish(mut self) -> BytesMut {
        let batch_length = (self.buf.len() - 12) as i32;
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
        // CRC-32C from the attributes to the end.
        let crc = crc32c::crc32c(&self.buf[21..]);
        self.buf[17..21].copy_from_slice(&crc.to_be_bytes());
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

    fn varlong(&mut self, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            self.byte((z as u8) | 0x80);
            z >>= 7;
        }
        self.byte(z as u8);
    }

    fn bytes(&mut self, s: &[u8]) {
        if s.len() <= 24 {
            for &x in s {
                self.byte(x);
            }
        } else {
            self.b[self.i..self.i + s.len()].copy_from_slice(s);
            self.i += s.len();
        }
    }
}

fn varlong_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    (64 - (z | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nagare_core::log::batch::{decode_records, validate};

    /// Zig-zag varint (Kafka's record fields), written into `out`; returns its length.
    fn varlong_into(out: &mut [u8; 10], v: i64) -> usize {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        let mut i = 0;
        while z >= 0x80 {
            out[i] = (z as u8) | 0x80;
            z >>= 7;
            i += 1;
        }
        out[i] = z as u8;
        i + 1
    }

    #[test]
    fn what_we_write_the_log_reads_back() {
        let mut w = BatchWriter::new(1024);
        let long = vec![b'x'; 300];
        w.push(
            1_700_000_000_123,
            b"{\"a\":1}",
            &[("fluent.tag", b"t"), ("n", b"1")],
        );
        w.push(1_700_000_000_001, &long, &[]);
        w.push(1_700_000_009_000, b"", &[("k", b"")]);
        let batch = w.finish();
        validate(&batch, 1 << 20).unwrap();
        let recs = decode_records(&batch).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].timestamp, 1_700_000_000_123);
        assert_eq!(recs[1].timestamp, 1_700_000_000_001);
        assert_eq!(recs[2].timestamp, 1_700_000_009_000);
        assert_eq!(recs[0].value.as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(recs[1].value.as_deref(), Some(&long[..]));
        assert!(recs[0].key.is_none());
        assert_eq!(recs[0].headers[0].0, "fluent.tag");
        assert_eq!(recs[0].headers[1].1.as_deref(), Some(&b"1"[..]));
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
            let mut tmp = [0u8; 10];
            assert_eq!(varlong_len(v), varlong_into(&mut tmp, v), "{v}");
        }
    }
}
