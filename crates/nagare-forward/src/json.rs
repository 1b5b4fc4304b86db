//! MessagePack record → JSON text in one pass over the bytes, no intermediate tree.
//!
//! Mapping (what Fluentd's JSON formatter does with Ruby values): str and bin → JSON
//! strings (invalid UTF-8 replaced by U+FFFD), non-string map keys → their JSON text as a
//! string, EventTime ext → float seconds, other ext → null, NaN/±inf → null.

use crate::error::DecodeError;
use crate::msgpack::{Head, Reader};

/// Deepest nesting converted; deeper records close the connection.
pub const MAX_DEPTH: usize = 64;

/// Appends the JSON form of the value at `src` (which must be exactly one value).
pub fn write_json(src: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    write_json_limited(src, out, usize::MAX)
}

/// [`write_json`] that gives up once `out` grows beyond `limit` bytes (JSON text can be
/// several times larger than the MessagePack it comes from).
pub fn write_json_limited(src: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), DecodeError> {
    let mut w = Writer {
        r: Reader::new(src),
        limit,
    };
    w.value(out, 0, false)
}

struct Writer<'a> {
    r: Reader<'a>,
    limit: usize,
}

impl Writer<'_> {
    /// `in_key`: inside a non-string map key being turned into text; nested keys are
    /// then written as raw text, because the outermost key escapes everything once
    /// (escaping at every level would double the size per level).
    fn value(&mut self, out: &mut Vec<u8>, depth: usize, in_key: bool) -> Result<(), DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::TooDeep(MAX_DEPTH));
        }
        if out.len() > self.limit {
            return Err(DecodeError::RecordTooLarge { limit: self.limit });
        }
        let r = &mut self.r;
        match r.head()? {
            Head::Nil => out.extend_from_slice(b"null"),
            Head::Bool(true) => out.extend_from_slice(b"true"),
            Head::Bool(false) => out.extend_from_slice(b"false"),
            Head::Uint(u) => push_u64(out, u),
            Head::Int(i) => push_i64(out, i),
            Head::F32(f) => push_f64(out, f as f64),
            Head::F64(f) => push_f64(out, f),
            Head::Str(n) | Head::Bin(n) => push_str(out, r.bytes(n)?),
            Head::Ext(ty, n) => {
                let b = r.bytes(n)?;
                if ty == 0 && n == 8 {
                    let secs = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                    let nanos = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
                    push_f64(out, secs as f64 + nanos as f64 / 1e9);
                } else {
                    out.extend_from_slice(b"null");
                }
            }
            Head::Array(n) => {
                out.push(b'[');
                for i in 0..n {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.value(out, depth + 1, in_key)?;
                }
                out.push(b']');
            }
            Head::Map(n) => {
                out.push(b'{');
                for i in 0..n {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.key(out, depth + 1, in_key)?;
                    out.push(b':');
                    self.value(out, depth + 1, in_key)?;
                }
                out.push(b'}');
            }
        }
        Ok(())
    }

    fn key(&mut self, out: &mut Vec<u8>, depth: usize, in_key: bool) -> Result<(), DecodeError> {
        match self.r.peek()? {
            Head::Str(_) | Head::Bin(_) => self.value(out, depth, in_key),
            _ if in_key => self.value(out, depth, true),
            _ => {
                let mut tmp = Vec::new();
                self.value(&mut tmp, depth, true)?;
                push_str(out, &tmp);
                Ok(())
            }
        }
    }
}

fn push_u64(out: &mut Vec<u8>, u: u64) {
    extend_small(out, itoa::Buffer::new().format(u).as_bytes());
}

fn push_i64(out: &mut Vec<u8>, i: i64) {
    if i < 0 {
        out.push(b'-');
    }
    push_u64(out, i.unsigned_abs());
}

fn push_f64(out: &mut Vec<u8>, f: f64) {
    if f.is_finite() {
        // serde_json prints the shortest representation that round-trips (ryu).
        let _ = serde_json::to_writer(&mut *out, &f);
    } else {
        out.extend_from_slice(b"null");
    }
}

/// A JSON string literal. One pass escapes and notes whether any byte is non-ASCII;
/// only then is the text checked as UTF-8 (and rewritten lossily if it is not).
pub fn push_str(out: &mut Vec<u8>, s: &[u8]) {
    let mark = out.len();
    if push_escaped(out, s) && std::str::from_utf8(s).is_err() {
        out.truncate(mark);
        push_escaped(out, String::from_utf8_lossy(s).as_bytes());
    }
}

/// Bytes that JSON strings must escape.
static ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Short runs are copied in fixed pieces of 8, 4, 2 and 1 bytes, each an inline move:
/// records are mostly short strings, and a memmove call per run (or a push per byte)
/// cost more than the copy.
fn extend_small(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() > 16 {
        out.extend_from_slice(s);
        return;
    }
    let mut rest = s;
    while let Some((piece, tail)) = rest.split_first_chunk::<8>() {
        out.extend_from_slice(piece);
        rest = tail;
    }
    if let Some((piece, tail)) = rest.split_first_chunk::<4>() {
        out.extend_from_slice(piece);
        rest = tail;
    }
    if let Some((piece, tail)) = rest.split_first_chunk::<2>() {
        out.extend_from_slice(piece);
        rest = tail;
    }
    if let Some(&b) = rest.first() {
        out.push(b);
    }
}

/// Writes the escaped literal; returns whether any byte was non-ASCII.
fn push_escaped(out: &mut Vec<u8>, s: &[u8]) -> bool {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    if is_plain(s) {
        extend_small(out, s);
        out.push(b'"');
        return false;
    }
    let mut start = 0;
    let mut i = 0;
    let mut high = false;
    while i < s.len() {
        // Eight plain ASCII bytes at a time (the common case), byte by byte otherwise.
        if let Some(w) = s.get(i..i + 8) {
            let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            if !needs_attention(w) {
                i += 8;
                continue;
            }
        }
        let b = s[i];
        i += 1;
        if b >= 0x80 {
            high = true;
            continue;
        }
        if !ESCAPE[b as usize] {
            continue;
        }
        extend_small(out, &s[start..i - 1]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
        }
        start = i;
    }
    extend_small(out, &s[start..]);
    out.push(b'"');
    high
}

/// Whether `s` is ASCII with nothing to escape (most keys and values are), a word at a
/// time: the last word overlaps the one before it, or is padded with spaces when `s` is
/// shorter than a word. `false` may be wrong (see `needs_attention`), `true` never is.
fn is_plain(s: &[u8]) -> bool {
    let mut words = s.chunks_exact(8);
    for w in &mut words {
        if let Ok(w) = <[u8; 8]>::try_from(w) {
            if needs_attention(u64::from_le_bytes(w)) {
                return false;
            }
        }
    }
    let tail = words.remainder();
    if tail.is_empty() {
        return true;
    }
    let last = match s.last_chunk::<8>() {
        Some(&w) => u64::from_le_bytes(w),
        // Shifted in within a register: bytes stored one by one to memory and then read
        // back as one word stall the load (store forwarding fails), which cost more than
        // all the rest of the check.
        None => tail.iter().fold(u64::from_le_bytes([b' '; 8]), |w, &b| {
            (w << 8) | u64::from(b)
        }),
    };
    !needs_attention(last)
}

/// Whether any of the eight bytes in `w` is a control character, `"`, `\` or
/// non-ASCII (SWAR: may say yes for a clean word, never no for a dirty one).
fn needs_attention(w: u64) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(LO) & !x & HI;
    let control = w.wrapping_sub(LO * 0x20) & !w & HI;
    let quote = has_zero(w ^ (LO * b'"' as u64));
    let backslash = has_zero(w ^ (LO * b'\\' as u64));
    (control | quote | backslash | (w & HI)) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmpv::Value as V;

    fn json_of(v: &V) -> serde_json::Value {
        let mut b = Vec::new();
        rmpv::encode::write_value(&mut b, v).unwrap();
        let mut out = Vec::new();
        write_json(&b, &mut out).unwrap();
        serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
    }

    #[test]
    fn converts_every_kind() {
        let v = V::Map(vec![
            (V::from("s"), V::from("a\"b\\c\nd\u{1}é")),
            (V::from("u"), V::from(u64::MAX)),
            (V::from("i"), V::from(i64::MIN)),
            (V::from("f"), V::F64(1.25)),
            (V::from("nan"), V::F64(f64::NAN)),
            (V::from("b"), V::Binary(b"bin\xff".to_vec())),
            (V::from("t"), V::Ext(0, vec![0, 0, 0, 1, 0, 0, 0, 0])),
            (V::from("x"), V::Ext(9, vec![1])),
            (
                V::from(7),
                V::Array(vec![V::Nil, V::from(true), V::from(false)]),
            ),
            (V::from("m"), V::Map(vec![])),
        ]);
        let j = json_of(&v);
        assert_eq!(j["s"], "a\"b\\c\nd\u{1}é");
        assert_eq!(j["u"], u64::MAX);
        assert_eq!(j["i"], i64::MIN);
        assert_eq!(j["f"], 1.25);
        assert!(j["nan"].is_null());
        assert_eq!(j["b"], "bin\u{fffd}");
        assert_eq!(j["t"], 1.0);
        assert!(j["x"].is_null());
        assert_eq!(j["7"], serde_json::json!([null, true, false]));
        assert_eq!(j["m"], serde_json::json!({}));
    }

    #[test]
    fn nested_non_string_keys_grow_linearly() {
        // {{{...: 1}: 1}: 1} 60 levels deep: escaping per level would double each time.
        let mut v = V::from("x\"y");
        for _ in 0..60 {
            v = V::Map(vec![(v, V::from(1))]);
        }
        let mut b = Vec::new();
        rmpv::encode::write_value(&mut b, &v).unwrap();
        let mut out = Vec::new();
        write_json(&b, &mut out).unwrap();
        assert!(out.len() < 2000, "{}", out.len());
        let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(j.is_object());
    }

    #[test]
    fn output_limit_is_enforced() {
        let v = V::Array(vec![V::Nil; 1000]);
        let mut b = Vec::new();
        rmpv::encode::write_value(&mut b, &v).unwrap();
        let mut out = Vec::new();
        assert_eq!(
            write_json_limited(&b, &mut out, 100),
            Err(DecodeError::RecordTooLarge { limit: 100 })
        );
    }

    #[test]
    fn escaping_agrees_with_serde_json_for_every_byte_at_every_position() {
        // Every length up to 20: the short-string and overlapping-word checks too.
        for (b, len) in (0u8..0x80).flat_map(|b| (1..=20).map(move |len| (b, len))) {
            for pos in 0..len {
                let mut s = vec![b'a'; len];
                s[pos] = b;
                let mut out = Vec::new();
                push_str(&mut out, &s);
                let want = serde_json::to_string(std::str::from_utf8(&s).unwrap()).unwrap();
                let got: String = serde_json::from_slice(&out).unwrap();
                assert_eq!(got, std::str::from_utf8(&s).unwrap(), "{b} at {pos}");
                assert_eq!(serde_json::from_str::<String>(&want).unwrap(), got);
            }
        }
        for len in 1..=20 {
            for pos in 0..len {
                let mut s = vec![b'a'; len];
                s[pos] = 0xff;
                assert!(push_escaped(&mut Vec::new(), &s), "0xff at {pos} of {len}");
            }
        }
        let mixed = "añb\u{1}\"\\ü long enough to take the fast path twice ✓";
        let mut out = Vec::new();
        push_str(&mut out, mixed.as_bytes());
        assert_eq!(serde_json::from_slice::<String>(&out).unwrap(), mixed);
    }

    #[test]
    fn strings_and_integers_of_every_length_copy_whole() {
        for len in 0..40 {
            let s: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            for esc in [None, Some(len / 2)] {
                let mut s = s.clone();
                if let Some(at) = esc.filter(|&at| at < len) {
                    s[at] = b'"';
                }
                let mut out = b"x".to_vec();
                push_str(&mut out, &s);
                let got: String = serde_json::from_slice(&out[1..]).unwrap();
                assert_eq!(got.as_bytes(), &s[..], "length {len}");
            }
        }
        for u in [0, 9, 10, 99, 12345678, u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, u);
            assert_eq!(out, u.to_string().as_bytes());
        }
        let mut out = Vec::new();
        push_i64(&mut out, i64::MIN);
        assert_eq!(out, i64::MIN.to_string().as_bytes());
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut b = vec![0x91u8; 200];
        b.push(0xc0);
        let mut out = Vec::new();
        assert_eq!(
            write_json(&b, &mut out),
            Err(DecodeError::TooDeep(MAX_DEPTH))
        );
    }
}
