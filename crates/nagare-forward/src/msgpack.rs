//! Bounded MessagePack reading straight from the receive buffer.
//!
//! Hand-written rather than `rmpv`: a PackedForward chunk holds thousands of small
//! `[time, record]` entries and we only need their byte ranges (the record is copied out
//! as-is or rewritten to JSON in one pass), so building a `Value` tree per event would be
//! pure allocation overhead on the hot path. Nothing here allocates from a length read
//! off the wire: lengths are only compared against what the buffer holds.

use crate::error::DecodeError;

/// The head of one MessagePack value: its kind and, for containers, the element count;
/// for str/bin/ext, the payload length that follows the head.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Head {
    Nil,
    Bool(bool),
    Uint(u64),
    Int(i64),
    F32(f32),
    F64(f64),
    Str(usize),
    Bin(usize),
    Array(usize),
    Map(usize),
    Ext(i8, usize),
}

/// Reads the head at `buf[pos..]`: `Ok(None)` when more bytes are needed, otherwise the
/// head and its length in bytes (payload not included).
///
/// Always inlined: its callers (the scanner, the JSON writer, the decoder) then keep
/// the head in registers instead of reading it back from memory after a call.
#[inline(always)]
pub fn read_head(buf: &[u8], pos: usize) -> Result<Option<(Head, usize)>, DecodeError> {
    let Some(&m) = buf.get(pos) else {
        return Ok(None);
    };
    let rest = &buf[pos + 1..];
    // Big-endian helpers over the bytes after the marker.
    let be = |n: usize| -> Option<u64> {
        rest.get(..n)
            .map(|b| b.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64))
    };
    macro_rules! need {
        ($n:expr) => {
            match be($n) {
                Some(v) => v,
                None => return Ok(None),
            }
        };
    }
    let head = match m {
        0x00..=0x7f => (Head::Uint(m as u64), 1),
        0x80..=0x8f => (Head::Map((m & 0x0f) as usize), 1),
        0x90..=0x9f => (Head::Array((m & 0x0f) as usize), 1),
        0xa0..=0xbf => (Head::Str((m & 0x1f) as usize), 1),
        0xc0 => (Head::Nil, 1),
        0xc1 => return Err(DecodeError::NotMsgpack { byte: m, at: pos }),
        0xc2 => (Head::Bool(false), 1),
        0xc3 => (Head::Bool(true), 1),
        0xc4 => (Head::Bin(need!(1) as usize), 2),
        0xc5 => (Head::Bin(need!(2) as usize), 3),
        0xc6 => (Head::Bin(need!(4) as usize), 5),
        0xc7 => {
            let len = need!(1) as usize;
            let ty = need!(2) as u8 as i8;
            (Head::Ext(ty, len), 3)
        }
        0xc8 => {
            let len = need!(2) as usize;
            let ty = need!(3) as u8 as i8;
            (Head::Ext(ty, len), 4)
        }
        0xc9 => {
            let len = need!(4) as usize;
            let ty = need!(5) as u8 as i8;
            (Head::Ext(ty, len), 6)
        }
        0xca => (Head::F32(f32::from_bits(need!(4) as u32)), 5),
        0xcb => (Head::F64(f64::from_bits(need!(8))), 9),
        0xcc => (Head::Uint(need!(1)), 2),
        0xcd => (Head::Uint(need!(2)), 3),
        0xce => (Head::Uint(need!(4)), 5),
        0xcf => (Head::Uint(need!(8)), 9),
        0xd0 => (Head::Int(need!(1) as u8 as i8 as i64), 2),
        0xd1 => (Head::Int(need!(2) as u16 as i16 as i64), 3),
        0xd2 => (Head::Int(need!(4) as u32 as i32 as i64), 5),
        0xd3 => (Head::Int(need!(8) as i64), 9),
        0xd4 => (Head::Ext(need!(1) as u8 as i8, 1), 2),
        0xd5 => (Head::Ext(need!(1) as u8 as i8, 2), 2),
        0xd6 => (Head::Ext(need!(1) as u8 as i8, 4), 2),
        0xd7 => (Head::Ext(need!(1) as u8 as i8, 8), 2),
        0xd8 => (Head::Ext(need!(1) as u8 as i8, 16), 2),
        0xd9 => (Head::Str(need!(1) as usize), 2),
        0xda => (Head::Str(need!(2) as usize), 3),
        0xdb => (Head::Str(need!(4) as usize), 5),
        0xdc => (Head::Array(need!(2) as usize), 3),
        0xdd => (Head::Array(need!(4) as usize), 5),
        0xde => (Head::Map(need!(2) as usize), 3),
        0xdf => (Head::Map(need!(4) as usize), 5),
        0xe0..=0xff => (Head::Int(m as i8 as i64), 1),
    };
    Ok(Some(head))
}

/// Payload bytes that follow a head (str, bin and ext bodies).
pub fn payload_len(head: Head) -> usize {
    match head {
        Head::Str(n) | Head::Bin(n) | Head::Ext(_, n) => n,
        _ => 0,
    }
}

/// Whether the value starting at `start` is complete in `buf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// The value ends at this offset.
    Complete(usize),
    /// At least this many bytes (from the start of `buf`) are needed before it can be.
    Incomplete(usize),
}

/// Where a scan stopped: the next head to read and how many values are still pending.
/// Scanning resumes from here when more bytes arrive, so a large request trickling in
/// is scanned once in total, not once per read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanState {
    pub pos: usize,
    pub pending: u64,
}

impl ScanState {
    pub fn start(pos: usize) -> ScanState {
        ScanState { pos, pending: 1 }
    }
}

/// Finds where the value at `buf[start..]` ends without recursion or allocation: a
/// counter of values still to skip replaces the stack (an array of n adds n, a map 2n).
/// Each pending value takes at least one byte, which gives a lower bound on what is
/// still missing, so a caller can wait for that much instead of rescanning every read.
pub fn scan_value(buf: &[u8], start: usize) -> Result<Scan, DecodeError> {
    scan_resume(buf, &mut ScanState::start(start))
}

/// [`scan_value`] from a saved state, which it updates (a value's head is consumed only
/// once its payload is all there).
pub fn scan_resume(buf: &[u8], st: &mut ScanState) -> Result<Scan, DecodeError> {
    while st.pending > 0 {
        let pos = st.pos;
        let Some((head, hl)) = read_head(buf, pos)? else {
            // The head itself is cut: at least one byte beyond what is there.
            let need = need_at_least(pos, 1, st.pending - 1).max(buf.len() + 1);
            return Ok(Scan::Incomplete(need));
        };
        let end = pos + hl + payload_len(head);
        let mut pending = st.pending - 1;
        match head {
            Head::Array(n) => pending += n as u64,
            Head::Map(n) => pending += 2 * n as u64,
            _ => {}
        }
        if end > buf.len() {
            return Ok(Scan::Incomplete(need_at_least(end, 0, pending)));
        }
        st.pos = end;
        st.pending = pending;
        if pending > (buf.len() - end) as u64 {
            return Ok(Scan::Incomplete(need_at_least(end, 0, pending)));
        }
    }
    Ok(Scan::Complete(st.pos))
}

fn need_at_least(pos: usize, extra: usize, pending: u64) -> usize {
    let pending = usize::try_from(pending).unwrap_or(usize::MAX);
    pos.saturating_add(extra).saturating_add(pending)
}

/// A cursor over a value known to be complete (or over a nested byte string that must
/// hold whole values); running off the end is an error, never a wait.
pub struct Reader<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Reads a head and moves past it (not past its payload).
    #[inline]
    pub fn head(&mut self) -> Result<Head, DecodeError> {
        match read_head(self.buf, self.pos)? {
            Some((h, hl)) => {
                self.pos += hl;
                Ok(h)
            }
            None => Err(DecodeError::Truncated("value head")),
        }
    }

    /// The head at the cursor without moving.
    pub fn peek(&self) -> Result<Head, DecodeError> {
        match read_head(self.buf, self.pos)? {
            Some((h, _)) => Ok(h),
            None => Err(DecodeError::Truncated("value head")),
        }
    }

    /// Takes `n` payload bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(DecodeError::Truncated("payload"))?;
        let b = &self.buf[self.pos..end];
        self.pos = end;
        Ok(b)
    }

    /// The byte range of the next whole value, moving past it.
    pub fn skip(&mut self) -> Result<std::ops::Range<usize>, DecodeError> {
        let start = self.pos;
        match scan_value(self.buf, start)? {
            Scan::Complete(end) => {
                self.pos = end;
                Ok(start..end)
            }
            Scan::Incomplete(_) => Err(DecodeError::Truncated("value")),
        }
    }

    /// A str or bin value's bytes.
    pub fn str_or_bin(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.head()? {
            Head::Str(n) | Head::Bin(n) => Ok(Some(self.bytes(n)?)),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(v: &rmpv::Value) -> Vec<u8> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, v).unwrap();
        out
    }

    #[test]
    fn scan_finds_the_end_of_nested_values_and_waits_for_splits() {
        use rmpv::Value as V;
        let v = V::Array(vec![
            V::from("tag"),
            V::Array(vec![V::Array(vec![
                V::from(1u64 << 40),
                V::Map(vec![(V::from("k"), V::from(-3.5f64))]),
            ])]),
            V::Map(vec![(V::from("chunk"), V::Binary(vec![1, 2, 3]))]),
        ]);
        let bytes = pack(&v);
        assert_eq!(scan_value(&bytes, 0).unwrap(), Scan::Complete(bytes.len()));
        for cut in 0..bytes.len() {
            match scan_value(&bytes[..cut], 0).unwrap() {
                Scan::Incomplete(need) => assert!(need > cut && need <= bytes.len()),
                Scan::Complete(_) => panic!("complete at {cut}"),
            }
        }
    }

    #[test]
    fn resumed_scans_agree_with_whole_scans() {
        use rmpv::Value as V;
        let v = V::Array(
            (0..50)
                .map(|i| {
                    V::Array(vec![
                        V::from(i),
                        V::Map(vec![(V::from("k"), V::from("v".repeat(i)))]),
                    ])
                })
                .collect(),
        );
        let bytes = pack(&v);
        let mut st = ScanState::start(0);
        for cut in 0..bytes.len() {
            assert!(
                matches!(scan_resume(&bytes[..cut], &mut st).unwrap(), Scan::Incomplete(n) if n > cut)
            );
        }
        assert_eq!(
            scan_resume(&bytes, &mut st).unwrap(),
            Scan::Complete(bytes.len())
        );
    }

    #[test]
    fn huge_declared_lengths_only_ask_for_more_bytes() {
        // array32 of 2^32-1 elements, bin32 of 4 GiB: nothing is allocated, we just wait.
        let arr = [0xdd, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(matches!(scan_value(&arr, 0), Ok(Scan::Incomplete(n)) if n > 1 << 31));
        let bin = [0xc6, 0xff, 0xff, 0xff, 0xff, 0x00];
        assert!(matches!(scan_value(&bin, 0), Ok(Scan::Incomplete(n)) if n > 1 << 31));
    }

    #[test]
    fn reserved_marker_is_not_msgpack() {
        assert_eq!(
            scan_value(&[0x91, 0xc1], 0),
            Err(DecodeError::NotMsgpack { byte: 0xc1, at: 1 })
        );
    }

    #[test]
    fn every_marker_round_trips_through_rmp() {
        use rmpv::Value as V;
        let values = vec![
            V::Nil,
            V::from(true),
            V::from(200u8),
            V::from(60000u16),
            V::from(4_000_000_000u32),
            V::from(u64::MAX),
            V::from(-5i8),
            V::from(-100i8),
            V::from(-30000i16),
            V::from(-2_000_000_000i32),
            V::from(i64::MIN),
            V::F32(1.5),
            V::F64(-2.25),
            V::from("x".repeat(40).as_str()),
            V::from("y".repeat(300).as_str()),
            V::from("z".repeat(70000).as_str()),
            V::Binary(vec![7; 300]),
            V::Ext(0, vec![0; 8]),
            V::Ext(5, vec![1; 3]),
            V::Ext(-1, vec![1; 16]),
            V::Ext(2, vec![1; 300]),
            V::Array(vec![V::Nil; 20]),
            V::Map(vec![(V::Nil, V::Nil); 20]),
        ];
        for v in values {
            let b = pack(&v);
            assert_eq!(scan_value(&b, 0).unwrap(), Scan::Complete(b.len()), "{v:?}");
        }
    }
}
