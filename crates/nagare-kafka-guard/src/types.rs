//! Wire-type walkers with the names the crate's decoders use, so the generated checks read
//! like the crate's decode bodies. Each one consumes its bytes and keeps nothing.

use bytes::Buf;

use crate::error::{bail, Result};

fn skip(buf: &mut bytes::Bytes, n: usize) -> Result<()> {
    if buf.remaining() < n {
        bail!("need {n} bytes, have {}", buf.remaining());
    }
    buf.advance(n);
    Ok(())
}

macro_rules! fixed {
    ($($name:ident = $len:expr),* $(,)?) => {
        $(
            pub(crate) struct $name;
            impl $name {
                pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<()> {
                    skip(buf, $len)
                }
            }
        )*
    };
}

fixed!(
    Int8 = 1,
    Int16 = 2,
    UInt16 = 2,
    Int32 = 4,
    Int64 = 8,
    Float64 = 8,
    Boolean = 1,
    Uuid = 16
);

fn uvarint(buf: &mut bytes::Bytes) -> Result<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            bail!("truncated varint");
        }
        let b = buf.get_u8();
        if i == 4 && b > 0x0f {
            bail!("varint overflows 32 bits");
        }
        value |= ((b & 0x7f) as u32) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("varint too long")
}

pub(crate) struct UnsignedVarInt;
impl UnsignedVarInt {
    pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<u32> {
        uvarint(buf)
    }
}

fn length_prefixed(buf: &mut bytes::Bytes, len: i64) -> Result<()> {
    match len {
        -1 => Ok(()),
        n if n < 0 => bail!("negative length {n}"),
        n => skip(buf, n as usize),
    }
}

pub(crate) struct String;
impl String {
    pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<()> {
        if buf.remaining() < 2 {
            bail!("truncated string length");
        }
        let n = buf.get_i16() as i64;
        length_prefixed(buf, n)
    }
}

pub(crate) struct CompactString;
impl CompactString {
    pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<()> {
        let n = uvarint(buf)? as i64 - 1;
        length_prefixed(buf, n)
    }
}

pub(crate) struct Bytes;
impl Bytes {
    pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<()> {
        if buf.remaining() < 4 {
            bail!("truncated bytes length");
        }
        let n = buf.get_i32() as i64;
        length_prefixed(buf, n)
    }
}

pub(crate) struct CompactBytes;
impl CompactBytes {
    pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<()> {
        let n = uvarint(buf)? as i64 - 1;
        length_prefixed(buf, n)
    }
}

/// Anything an array can hold.
pub(crate) trait Element {
    fn check(&self, buf: &mut bytes::Bytes) -> Result<()>;
}

macro_rules! element {
    ($($name:ident),*) => {
        $(impl Element for $name {
            fn check(&self, buf: &mut bytes::Bytes) -> Result<()> {
                self.decode(buf).map(|_| ())
            }
        })*
    };
}

element!(
    Int8,
    Int16,
    UInt16,
    Int32,
    Int64,
    Float64,
    Boolean,
    Uuid,
    String,
    CompactString,
    Bytes,
    CompactBytes
);

/// A nested struct, walked by its generated check function.
pub(crate) struct Checked(
    pub(crate) fn(&mut bytes::Bytes, i16) -> Result<()>,
    pub(crate) i16,
);
impl Checked {
    pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<()> {
        (self.0)(buf, self.1)
    }
}
impl Element for Checked {
    fn check(&self, buf: &mut bytes::Bytes) -> Result<()> {
        self.decode(buf)
    }
}

/// An optional nested struct: a presence byte, then the struct when it is 1.
pub(crate) struct OptionChecked(
    pub(crate) fn(&mut bytes::Bytes, i16) -> Result<()>,
    pub(crate) i16,
);
impl OptionChecked {
    pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<()> {
        if !buf.has_remaining() {
            bail!("truncated optional struct");
        }
        if buf.get_i8() == 1 {
            (self.0)(buf, self.1)
        } else {
            Ok(())
        }
    }
}

fn elements<E: Element>(e: &E, buf: &mut bytes::Bytes, count: i64) -> Result<()> {
    if count < -1 {
        bail!("negative array length {count}");
    }
    // Every element takes at least one byte: a longer count is a lie.
    if count > buf.remaining() as i64 {
        bail!("array of {count} elements in {} bytes", buf.remaining());
    }
    for _ in 0..count.max(0) {
        e.check(buf)?;
    }
    Ok(())
}

pub(crate) struct Array<E>(pub(crate) E);
impl<E: Element> Array<E> {
    pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<()> {
        if buf.remaining() < 4 {
            bail!("truncated array length");
        }
        let n = buf.get_i32() as i64;
        elements(&self.0, buf, n)
    }
}

pub(crate) struct CompactArray<E>(pub(crate) E);
impl<E: Element> CompactArray<E> {
    pub(crate) fn decode(&self, buf: &mut bytes::Bytes) -> Result<()> {
        let n = uvarint(buf)? as i64 - 1;
        elements(&self.0, buf, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(b: &[u8]) -> bytes::Bytes {
        bytes::Bytes::copy_from_slice(b)
    }

    #[test]
    fn varints_stop_at_32_bits() {
        assert_eq!(UnsignedVarInt.decode(&mut bytes(&[0x7f])), Ok(127));
        assert_eq!(
            UnsignedVarInt.decode(&mut bytes(&[0xff, 0xff, 0xff, 0xff, 0x0f])),
            Ok(u32::MAX)
        );
        assert!(UnsignedVarInt
            .decode(&mut bytes(&[0xff, 0xff, 0xff, 0xff, 0x1f]))
            .is_err());
        assert!(UnsignedVarInt.decode(&mut bytes(&[0x80])).is_err());
    }

    #[test]
    fn lengths_are_null_or_bounded() {
        // -1 is null; any other negative length is refused.
        assert_eq!(String.decode(&mut bytes(&[0xff, 0xff])), Ok(()));
        assert!(String.decode(&mut bytes(&[0xff, 0xfe])).is_err());
        assert!(Bytes.decode(&mut bytes(&[0, 0, 0, 3, 1, 2])).is_err());
        // Compact: 0 is null, n is n - 1 bytes.
        let mut buf = bytes(&[0, 3, b'a', b'b', 9]);
        assert_eq!(CompactString.decode(&mut buf), Ok(()));
        assert_eq!(CompactBytes.decode(&mut buf), Ok(()));
        assert_eq!(buf.as_ref(), &[9]);
    }

    #[test]
    fn array_counts_are_bounded_by_the_bytes_left() {
        // Two Int8 elements in two bytes pass; a third claimed element is a lie.
        assert_eq!(Array(Int8).decode(&mut bytes(&[0, 0, 0, 2, 1, 2])), Ok(()));
        assert!(Array(Int8).decode(&mut bytes(&[0, 0, 0, 3, 1, 2])).is_err());
        assert_eq!(
            Array(Int8).decode(&mut bytes(&[0xff, 0xff, 0xff, 0xff])),
            Ok(())
        );
        assert!(Array(Int8)
            .decode(&mut bytes(&[0xff, 0xff, 0xff, 0xfe]))
            .is_err());
        // Compact: count + 1 on the wire.
        assert_eq!(CompactArray(Int16).decode(&mut bytes(&[2, 0, 1])), Ok(()));
        assert!(CompactArray(Int16).decode(&mut bytes(&[3, 0, 1])).is_err());
    }
}
