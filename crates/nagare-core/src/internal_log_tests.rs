//! The internal-log engine over a real log: replay, order, group commit, compaction.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::*;
use crate::BrokerConfig;

/// A test operation: set or remove a key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Set(String, Option<i64>);

impl InternalOp for Set {
    type State = BTreeMap<String, i64>;

    fn encode(&self, timestamp: i64) -> NewRecord {
        NewRecord {
            key: Some(Bytes::from(self.0.clone())),
            value: self.1.map(|v| Bytes::from(v.to_string())),
            headers: Vec::new(),
            timestamp,
        }
    }

    fn decode(r: &Record) -> Option<Self> {
        let key = String::from_utf8(r.key.as_deref()?.to_vec()).ok()?;
        let value = match &r.value {
            None => None,
            Some(v) => Some(std::str::from_utf8(v).ok()?.parse().ok()?),
        };
        Some(Set(key, value))
    }

    fn apply(self, state: &mut Self::State) {
        match self.1 {
            Some(v) => state.insert(self.0, v),
            None => state.remove(&self.0),
        };
    }

    fn snapshot(state: &Self::State) -> Vec<Self> {
        state
            .iter()
            .map(|(k, v)| Set(k.clone(), Some(*v)))
            .collect()
    }
}

fn broker(dir: &std::path::Path) -> Arc<Broker> {
    Broker::open(BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    })
    .unwrap()
}

#[tokio::test]
async fn operations_come_back_in_order_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = broker(dir.path());
        let (log, state, writer) = InternalLog::<Set>::open(&b, "test").unwrap();
        assert!(state.is_empty());
        let task = tokio::spawn(writer.run());
        let first = log.push([Set("a".into(), Some(1)), Set("b".into(), Some(2))], false);
        let second = log.push([Set("a".into(), Some(3)), Set("b".into(), None)], true);
        first.stored().await.unwrap();
        second.stored().await.unwrap();
        assert!(log.partition().flushed_offset() >= 4, "durable push fsyncs");
        drop(log);
        task.await.unwrap();
    }
    let b = broker(dir.path());
    let (_log, state, _writer) = InternalLog::<Set>::open(&b, "test").unwrap();
    assert_eq!(state, BTreeMap::from([("a".to_string(), 3)]));
}

#[tokio::test]
async fn a_log_of_mostly_history_is_compacted_to_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let total = 3 * Set::COMPACT_MIN_RECORDS;
    {
        let b = broker(dir.path());
        let (log, _, writer) = InternalLog::<Set>::open(&b, "test").unwrap();
        let task = tokio::spawn(writer.run());
        for i in 0..total {
            let _ = log.push([Set(format!("k{}", i % 10), Some(i))], false);
        }
        log.flush().await.unwrap();
        // Another round lets the writer look at the size again.
        log.push([Set("k0".into(), Some(-1))], true)
            .stored()
            .await
            .unwrap();
        let p = log.partition().clone();
        assert!(p.log_start_offset() > 0, "history was dropped");
        assert!(p.log_end_offset() - p.log_start_offset() < Set::COMPACT_MIN_RECORDS);
        drop(log);
        task.await.unwrap();
    }
    let b = broker(dir.path());
    let (_log, state, _writer) = InternalLog::<Set>::open(&b, "test").unwrap();
    assert_eq!(state.len(), 10);
    assert_eq!(state["k0"], -1);
    assert_eq!(state["k9"], total - 1);
}

#[tokio::test]
async fn without_a_writer_pushes_fail_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    let (log, _, writer) = InternalLog::<Set>::open(&b, "test").unwrap();
    let queued = log.push([Set("a".into(), Some(1))], true);
    drop(writer);
    assert!(queued.stored().await.is_err());
    assert!(log.push([], false).stored().await.is_err());
}

/// `Set` again, declared keyed: compacted by the log cleaner instead of snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyedSet(Set);

impl InternalOp for KeyedSet {
    type State = BTreeMap<String, i64>;
    const COMPACT_MIN_RECORDS: i64 = 2_000;
    const KEYED: bool = true;

    fn encode(&self, timestamp: i64) -> NewRecord {
        self.0.encode(timestamp)
    }
    fn decode(r: &Record) -> Option<Self> {
        Set::decode(r).map(KeyedSet)
    }
    fn apply(self, state: &mut Self::State) {
        self.0.apply(state)
    }
    fn snapshot(state: &Self::State) -> Vec<Self> {
        Set::snapshot(state).into_iter().map(KeyedSet).collect()
    }
}

#[tokio::test]
async fn a_keyed_log_is_compacted_by_the_log_cleaner() {
    let dir = tempfile::tempdir().unwrap();
    let total = 3 * KeyedSet::COMPACT_MIN_RECORDS;
    {
        let b = broker(dir.path());
        let (log, _, writer) = InternalLog::<KeyedSet>::open(&b, "keyed").unwrap();
        let task = tokio::spawn(writer.run());
        for i in 0..total {
            let _ = log.push([KeyedSet(Set(format!("k{}", i % 10), Some(i)))], false);
        }
        // Deleted keys: a tombstone, then nothing.
        log.push([KeyedSet(Set("k3".into(), None))], true)
            .stored()
            .await
            .unwrap();
        for i in 0..KeyedSet::COMPACT_MIN_RECORDS {
            let _ = log.push(
                [KeyedSet(Set(format!("k{}", i % 10 + 100), Some(i)))],
                false,
            );
        }
        log.push([KeyedSet(Set("k0".into(), Some(-1)))], true)
            .stored()
            .await
            .unwrap();
        let p = log.partition().clone();
        // History is gone from the cleaned segments, with no snapshot written.
        let mut live = 0;
        let mut offset = p.log_start_offset();
        while offset < p.log_end_offset() {
            let r = p.records_from(offset, 1 << 20).unwrap();
            live += r.records.len();
            offset = r.next_offset;
        }
        // (At most one round of appends waits in the active segment.)
        assert!(
            live <= KeyedSet::COMPACT_MIN_RECORDS as usize + 100,
            "{live} records left"
        );
        assert_eq!(p.log_start_offset(), 0, "no snapshot/delete-records path");
        drop(log);
        task.await.unwrap();
    }
    let b = broker(dir.path());
    let (_log, state, _writer) = InternalLog::<KeyedSet>::open(&b, "keyed").unwrap();
    assert_eq!(state.len(), 19);
    assert!(!state.contains_key("k3"));
    assert_eq!(state["k0"], -1);
    assert_eq!(state["k9"], total - 1);
}
