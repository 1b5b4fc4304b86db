//! The cleaner's key -> latest offset map, of fixed size (Kafka's `SkimpyOffsetMap`):
//! a flat open-addressing table of 24-byte slots (a 128-bit hash of the key and the
//! offset), allocated once from `log.cleaner.dedupe.buffer.size`. Keys themselves are
//! never stored, so memory does not grow with key size; a hash collision (2^-128 per
//! pair) would drop a record, the same trade Kafka makes with MD5.

use std::hash::{Hash, Hasher};

/// Bytes one slot takes: 16 of hash, 8 of offset.
pub const SLOT_BYTES: usize = 24;

/// A fixed-capacity map from key hash to the latest offset seen for that key.
pub struct OffsetMap {
    /// (hash, offset + 1); offset 0 marks an empty slot.
    slots: Vec<(u128, i64)>,
    /// Entries allowed before the map counts as full (load factor, as Kafka's 0.9).
    max_entries: usize,
    entries: usize,
    /// Largest offset put in since the last clear.
    latest: i64,
}

impl OffsetMap {
    /// A map using about `bytes` of memory, filled up to `load_factor` of its slots.
    pub fn with_memory(bytes: usize, load_factor: f64) -> OffsetMap {
        let slots = (bytes / SLOT_BYTES).max(2);
        let max_entries = ((slots as f64 * load_factor.clamp(0.1, 0.95)) as usize).max(1);
        OffsetMap {
            slots: vec![(0, 0); slots],
            max_entries,
            entries: 0,
            latest: -1,
        }
    }

    /// How many distinct keys it can hold before counting as full.
    pub fn capacity(&self) -> usize {
        self.max_entries
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Room for `n` more keys (if they were all new).
    pub fn has_room_for(&self, n: usize) -> bool {
        self.entries.saturating_add(n) <= self.max_entries
    }

    /// Memory held by the slots, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * SLOT_BYTES
    }

    pub fn latest_offset(&self) -> i64 {
        self.latest
    }

    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = (0, 0));
        self.entries = 0;
        self.latest = -1;
    }

    /// Records `offset` as the latest for `key` (offsets are put in increasing order).
    /// Returns false, changing nothing, when the key is new and the map is full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let hash = key_hash(key);
        let i = self.find(hash);
        if self.slots[i].1 == 0 {
            if self.entries >= self.max_entries {
                return false;
            }
            self.entries += 1;
        }
        self.slots[i] = (hash, offset + 1);
        self.latest = self.latest.max(offset);
        true
    }

    /// The latest offset recorded for `key`.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        let slot = self.slots[self.find(key_hash(key))];
        (slot.1 != 0).then_some(slot.1 - 1)
    }

    /// The slot holding `hash`, or the empty one where it would go (linear probing; the
    /// load factor below 1 guarantees an empty slot exists).
    fn find(&self, hash: u128) -> usize {
        let n = self.slots.len();
        let mut i = (hash as u64 % n as u64) as usize;
        loop {
            let (h, o) = self.slots[i];
            if o == 0 || h == hash {
                return i;
            }
            i = (i + 1) % n;
        }
    }
}

/// 128 bits from two differently seeded SipHash runs (std's hasher has fixed keys, so
/// the value is stable within the process, which is all the map needs).
fn key_hash(key: &[u8]) -> u128 {
    let mut a = std::hash::DefaultHasher::new();
    key.hash(&mut a);
    let mut b = std::hash::DefaultHasher::new();
    0x9e37_79b9_7f4a_7c15u64.hash(&mut b);
    key.hash(&mut b);
    ((a.finish() as u128) << 64) | b.finish() as u128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_and_refuses_new_keys_when_full() {
        let mut m = OffsetMap::with_memory(SLOT_BYTES * 10, 0.5);
        assert_eq!(m.capacity(), 5);
        for (i, k) in ["a", "b", "a", "c"].iter().enumerate() {
            assert!(m.put(k.as_bytes(), i as i64));
        }
        assert_eq!(m.get(b"a"), Some(2));
        assert_eq!(m.get(b"b"), Some(1));
        assert_eq!(m.get(b"z"), None);
        assert!(m.put(b"d", 4) && m.put(b"e", 5));
        assert!(!m.put(b"f", 6), "full: a new key is refused");
        assert!(m.put(b"a", 7), "an existing key still updates");
        assert_eq!(m.get(b"a"), Some(7));
        assert_eq!((m.len(), m.latest_offset()), (5, 7));
        m.clear();
        assert!(m.is_empty() && m.get(b"a").is_none());
    }
}
