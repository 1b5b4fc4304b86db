//! The internal-log engine over a real log: replay, order, group commit, coalescing,
//! cleaning, migration of an earlier format.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::test_support::partition_records;
use super::*;
use crate::BrokerConfig;

/// A test operation: set or remove a key. Its "earlier version" kept every change
/// under the one key `all`, the value `key=value` (`key=` removing).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Set(String, Option<i64>);

const LEGACY_KEY: &[u8] = b"all";

impl InternalOp for Set {
    type State = BTreeMap<String, i64>;
    const COMPACT_MIN_RECORDS: i64 = 2_000;

    fn key(&self) -> Bytes {
        Bytes::from(self.0.clone())
    }

    fn encode(&self, timestamp: i64) -> NewRecord {
        NewRecord {
            key: Some(self.key()),
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

    fn replay(r: &Record, state: &mut Self::State) -> Replayed {
        if r.key.as_deref() != Some(LEGACY_KEY) {
            return match Set::decode(r) {
                Some(op) => {
                    op.apply(state);
                    Replayed::Current
                }
                None => Replayed::Unreadable,
            };
        }
        let Some((k, v)) = r
            .value
            .as_deref()
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.split_once('='))
        else {
            return Replayed::Unreadable;
        };
        Set(k.to_string(), v.parse().ok()).apply(state);
        Replayed::Legacy
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
        first.stored().await.unwrap();
        let second = log.push([Set("a".into(), Some(3)), Set("b".into(), None)], true);
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
async fn one_append_writes_only_the_last_op_of_each_key() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = broker(dir.path());
        let (log, _, writer) = InternalLog::<Set>::open(&b, "test").unwrap();
        // Queued before the writer runs: its first append takes them all.
        let mut tickets = Vec::new();
        for i in 0..1000 {
            tickets.push(log.push([Set(format!("k{}", i % 3), Some(i))], false));
        }
        tickets.push(log.push([Set("k1".into(), None)], true));
        let task = tokio::spawn(writer.run());
        for t in tickets {
            t.stored().await.unwrap();
        }
        let p = log.partition().clone();
        assert_eq!(p.log_end_offset(), 3, "one record per key");
        let kept: Vec<_> = partition_records(&p)
            .iter()
            .map(|r| Set::decode(r).unwrap())
            .collect();
        assert_eq!(
            kept,
            vec![
                Set("k2".into(), Some(998)),
                Set("k0".into(), Some(999)),
                Set("k1".into(), None),
            ],
            "in the order of their last change"
        );
        drop(log);
        task.await.unwrap();
    }
    let b = broker(dir.path());
    let (_log, state, _writer) = InternalLog::<Set>::open(&b, "test").unwrap();
    assert_eq!(
        state,
        BTreeMap::from([("k0".to_string(), 999), ("k2".to_string(), 998)])
    );
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

#[tokio::test]
async fn the_log_is_compacted_by_the_log_cleaner() {
    let dir = tempfile::tempdir().unwrap();
    let total = 3 * Set::COMPACT_MIN_RECORDS;
    {
        let b = broker(dir.path());
        let (log, _, writer) = InternalLog::<Set>::open(&b, "keyed").unwrap();
        let task = tokio::spawn(writer.run());
        for i in 0..total {
            // One append each (waited for), so no coalescing hides the history.
            log.push([Set(format!("k{}", i % 10), Some(i))], false)
                .stored()
                .await
                .unwrap();
        }
        // Deleted keys: a tombstone, then nothing.
        log.push([Set("k3".into(), None)], true)
            .stored()
            .await
            .unwrap();
        for i in 0..Set::COMPACT_MIN_RECORDS {
            log.push([Set(format!("k{}", i % 10 + 100), Some(i))], false)
                .stored()
                .await
                .unwrap();
        }
        log.push([Set("k0".into(), Some(-1))], true)
            .stored()
            .await
            .unwrap();
        let p = log.partition().clone();
        // History is gone from the cleaned segments, with no snapshot written.
        let live = partition_records(&p).len();
        // (At most one round of appends waits in the active segment.)
        assert!(
            live <= Set::COMPACT_MIN_RECORDS as usize + 100,
            "{live} records left"
        );
        assert_eq!(p.log_start_offset(), 0, "no snapshot/delete-records path");
        drop(log);
        task.await.unwrap();
    }
    let b = broker(dir.path());
    let (_log, state, _writer) = InternalLog::<Set>::open(&b, "keyed").unwrap();
    assert_eq!(state.len(), 19);
    assert!(!state.contains_key("k3"));
    assert_eq!(state["k0"], -1);
    assert_eq!(state["k9"], total - 1);
}

/// Appends records of the earlier format straight to the log.
async fn write_legacy(b: &Broker, name: &str, changes: &[(&str, Option<i64>)]) {
    let p = b.internal_log(name).unwrap();
    let records: Vec<NewRecord> = changes
        .iter()
        .map(|(k, v)| NewRecord {
            key: Some(Bytes::from_static(LEGACY_KEY)),
            value: Some(Bytes::from(format!(
                "{k}={}",
                v.map(|v| v.to_string()).unwrap_or_default()
            ))),
            headers: Vec::new(),
            timestamp: 0,
        })
        .collect();
    p.append_records(&records, AckLevel::Leader).await.unwrap();
    p.sync_to(p.log_end_offset()).await.unwrap();
}

#[tokio::test]
async fn a_log_of_an_earlier_format_is_rewritten_once_then_cleaned_safely() {
    let dir = tempfile::tempdir().unwrap();
    let expected = BTreeMap::from([("a".to_string(), 3), ("c".to_string(), 5)]);
    {
        let b = broker(dir.path());
        write_legacy(
            &b,
            "old",
            &[
                ("a", Some(1)),
                ("b", Some(2)),
                ("a", Some(3)),
                ("b", None),
                ("c", Some(5)),
            ],
        )
        .await;
    }
    {
        let b = broker(dir.path());
        let (log, state, writer) = InternalLog::<Set>::open(&b, "old").unwrap();
        assert_eq!(state, expected, "the old format replays");
        let task = tokio::spawn(writer.run());
        // The writer migrates before its first append.
        log.push([Set("d".into(), Some(7))], true)
            .stored()
            .await
            .unwrap();
        let p = log.partition().clone();
        assert_eq!(p.log_start_offset(), 5, "every old record dropped");
        let kept = partition_records(&p);
        assert!(kept.iter().all(|r| r.key.as_deref() != Some(LEGACY_KEY)));
        assert_eq!(kept.len(), 3, "the snapshot (a, c) and the new change");
        // The cleaner now sees only keyed records: a full clean keeps the state.
        let mut cleaner = nagare_log::cleaner::Cleaner::new(INTERNAL_DEDUPE_BYTES, None);
        clean_all(&p, &mut cleaner).unwrap();
        drop(log);
        task.await.unwrap();
    }
    let b = broker(dir.path());
    let (log, state, writer) = InternalLog::<Set>::open(&b, "old").unwrap();
    let mut with_d = expected.clone();
    with_d.insert("d".into(), 7);
    assert_eq!(state, with_d);
    assert!(!writer.migrate, "rewritten once");
    drop((log, writer));
}

#[tokio::test]
async fn an_interrupted_migration_replays_the_same_state_and_migrates_again() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = broker(dir.path());
        write_legacy(&b, "old", &[("a", Some(1)), ("b", Some(2)), ("b", None)]).await;
        // As if the broker died after appending the snapshot, before dropping the prefix.
        let p = b.internal_log("old").unwrap();
        p.append_records(&[Set("a".into(), Some(1)).encode(0)], AckLevel::Leader)
            .await
            .unwrap();
    }
    let b = broker(dir.path());
    let (log, state, writer) = InternalLog::<Set>::open(&b, "old").unwrap();
    assert_eq!(state, BTreeMap::from([("a".to_string(), 1)]));
    assert!(writer.migrate);
    let task = tokio::spawn(writer.run());
    log.flush().await.unwrap();
    let p = log.partition().clone();
    assert_eq!(p.log_start_offset(), 4);
    assert_eq!(partition_records(&p).len(), 1);
    drop(log);
    task.await.unwrap();
}

#[tokio::test]
async fn an_old_log_whose_state_is_empty_is_emptied() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = broker(dir.path());
        write_legacy(&b, "old", &[("a", Some(1)), ("a", None)]).await;
    }
    let b = broker(dir.path());
    let (log, state, writer) = InternalLog::<Set>::open(&b, "old").unwrap();
    assert!(state.is_empty());
    let task = tokio::spawn(writer.run());
    log.flush().await.unwrap();
    let p = log.partition().clone();
    assert_eq!((p.log_start_offset(), p.log_end_offset()), (2, 2));
    drop(log);
    task.await.unwrap();
}
