//! What an operator wants to see of a consumer group member's assignment: the topics and
//! partitions it was given. The assignment bytes come from the group leader, a client,
//! so they are read by hand with every length checked against what is left (no
//! allocation sized by the input), best effort: an unreadable assignment shows nothing.

use bytes::{Buf, Bytes};

/// The topic partitions of a `ConsumerProtocolAssignment` (every version starts with
/// the same version + topic-partitions layout; later fields are ignored).
pub fn assignment_partitions(assignment: &Bytes) -> Vec<(String, Vec<i32>)> {
    read(&mut assignment.clone()).unwrap_or_default()
}

fn read(b: &mut Bytes) -> Option<Vec<(String, Vec<i32>)>> {
    if b.remaining() < 2 || b.get_i16() < 0 {
        return None;
    }
    let topics = count(b, 6)?;
    let mut out = Vec::new();
    for _ in 0..topics {
        if b.remaining() < 2 {
            return None;
        }
        let len = usize::try_from(b.get_i16()).ok()?;
        if b.remaining() < len {
            return None;
        }
        let name = String::from_utf8(b.split_to(len).to_vec()).ok()?;
        let n = count(b, 4)?;
        let partitions = (0..n).map(|_| b.get_i32()).collect();
        out.push((name, partitions));
    }
    Some(out)
}

/// An array length, refused when the bytes left cannot hold that many elements of at
/// least `min_size` bytes each.
fn count(b: &mut Bytes, min_size: usize) -> Option<usize> {
    if b.remaining() < 4 {
        return None;
    }
    let n = usize::try_from(b.get_i32()).unwrap_or(0);
    (n.checked_mul(min_size)? <= b.remaining()).then_some(n)
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};

    use super::*;

    #[test]
    fn reads_topics_and_partitions() {
        let mut b = BytesMut::new();
        b.put_i16(1);
        b.put_i32(2);
        for (t, ps) in [("a", vec![0, 2]), ("bb", vec![1])] {
            b.put_i16(t.len() as i16);
            b.put_slice(t.as_bytes());
            b.put_i32(ps.len() as i32);
            ps.iter().for_each(|p| b.put_i32(*p));
        }
        b.put_i32(-1); // user data: null
        let got = assignment_partitions(&b.freeze());
        assert_eq!(got, vec![("a".into(), vec![0, 2]), ("bb".into(), vec![1])]);
    }

    #[test]
    fn garbage_shows_nothing() {
        assert!(assignment_partitions(&Bytes::from_static(b"")).is_empty());
        assert!(assignment_partitions(&Bytes::from_static(b"\0\0\x7f\xff\xff\xff")).is_empty());
        assert!(assignment_partitions(&Bytes::from_static(b"\0\0\0\0\0\x01\0\x09ab")).is_empty());
    }
}
