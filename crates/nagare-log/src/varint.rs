//! Zigzag varints as the record format uses them (protobuf style, little-endian groups
//! of 7 bits). Decoders bound the number of bytes read so corrupt input cannot loop.

use crate::BatchError;

/// Encoders for the tests and the cleaner's marker rewrite; records are written by
/// `BatchWriter`.
pub(crate) fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_uvarlong(out, ((v << 1) ^ (v >> 31)) as u32 as u64);
}

pub(crate) fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_uvarlong(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_uvarlong(out: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

/// Reads an unsigned varint of at most `max_bytes` bytes; returns it and its length.
fn get_uvarlong(buf: &[u8], max_bytes: usize) -> Result<(u64, usize), BatchError> {
    let mut v: u64 = 0;
    for (i, &b) in buf.iter().take(max_bytes).enumerate() {
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((v, i + 1));
        }
    }
    if buf.len() < max_bytes {
        Err(BatchError::Corrupt("varint truncated"))
    } else {
        Err(BatchError::Corrupt("varint too long"))
    }
}

pub(crate) fn get_varint(buf: &[u8]) -> Result<(i32, usize), BatchError> {
    let (u, n) = get_uvarlong(buf, 5)?;
    let u = u as u32;
    Ok((((u >> 1) as i32) ^ -((u & 1) as i32), n))
}

pub(crate) fn get_varlong(buf: &[u8]) -> Result<(i64, usize), BatchError> {
    let (u, n) = get_uvarlong(buf, 10)?;
    Ok((((u >> 1) as i64) ^ -((u & 1) as i64), n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_extremes() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut b = Vec::new();
            put_varlong(&mut b, v);
            assert_eq!(get_varlong(&b).unwrap(), (v, b.len()));
        }
        for v in [0i32, 1, -1, 300, -300, i32::MAX, i32::MIN] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(get_varint(&b).unwrap(), (v, b.len()));
        }
        // Known encodings from the Kafka docs.
        let mut b = Vec::new();
        put_varint(&mut b, -1);
        assert_eq!(b, [0x01]);
        b.clear();
        put_varint(&mut b, 150);
        assert_eq!(b, [0xac, 0x02]);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(get_varint(&[]).is_err());
        assert!(get_varint(&[0x80, 0x80]).is_err());
        assert!(get_varint(&[0xff; 6]).is_err());
        assert!(get_varlong(&[0xff; 11]).is_err());
    }
}
