use std::sync::Arc;

use super::*;
use crate::internal_log::InternalOp;

fn machine() -> Transactions {
    Transactions::new(TransactionConfig::default(), Default::default())
}

fn tp(t: &str, p: i32) -> (String, i32) {
    (t.to_string(), p)
}

/// Runs InitProducerId to the end (allocating producer ids from `next_pid`).
fn init(
    m: &mut Transactions,
    id: &str,
    expected: Option<(i64, i16)>,
    next_pid: &mut i64,
) -> Result<InitStep, TxnError> {
    let mut fresh = None;
    loop {
        match m.init_producer_id(id, 60_000, expected, fresh, 1_000)? {
            InitStep::NeedProducerId => {
                fresh = Some(*next_pid);
                *next_pid += 1;
            }
            step => return Ok(step),
        }
    }
}

fn store(m: &mut Transactions, t: Option<Transition>) {
    if let Some(t) = t {
        m.stored(t);
    }
}

/// A new producer of `id`: its (producer id, epoch).
fn ready(m: &mut Transactions, id: &str, next_pid: &mut i64) -> (i64, i16) {
    match init(m, id, None, next_pid) {
        Ok(InitStep::Store(t)) => {
            let r = (t.next.producer_id, t.next.producer_epoch);
            m.stored(t);
            r
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn new_ids_start_at_epoch_zero_and_bump_on_each_init() {
    let mut m = machine();
    let mut pid = 7;
    assert_eq!(ready(&mut m, "t", &mut pid), (7, 0));
    assert_eq!(ready(&mut m, "t", &mut pid), (7, 1));
    assert_eq!(ready(&mut m, "other", &mut pid), (8, 0));
}

#[test]
fn timeouts_are_validated() {
    let mut m = machine();
    assert_eq!(
        m.init_producer_id("t", 900_001, None, Some(1), 0),
        Err(TxnError::InvalidTransactionTimeout(900_001))
    );
    assert_eq!(
        m.init_producer_id("t", 0, None, Some(1), 0),
        Err(TxnError::InvalidTransactionTimeout(0))
    );
    assert!(matches!(
        m.init_producer_id("", 1000, None, Some(1), 0),
        Err(TxnError::InvalidRequest(_))
    ));
}

#[test]
fn commit_goes_through_prepare_and_complete() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e) = ready(&mut m, "t", &mut pid);
    let t = m
        .add_partitions("t", p, e, &[tp("a", 0), tp("b", 1)], 10)
        .unwrap();
    store(&mut m, t);
    assert_eq!(m.get("t").unwrap().state, TxnState::Ongoing);
    assert_eq!(m.get("t").unwrap().start_ms, 10);
    // Already in: nothing to store.
    assert_eq!(m.add_partitions("t", p, e, &[tp("a", 0)], 11), Ok(None));
    let t = m.end_txn("t", p, e, true, 20).unwrap();
    store(&mut m, t);
    assert_eq!(m.get("t").unwrap().state, TxnState::PrepareCommit);
    assert_eq!(m.prepared(), vec!["t".to_string()]);
    // While deciding: retriable.
    assert_eq!(
        m.add_partitions("t", p, e, &[tp("c", 0)], 21),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        m.end_txn("t", p, e, true, 21),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        m.end_txn("t", p, e, false, 21),
        Err(TxnError::InvalidTxnState)
    );
    let t = m.complete("t", 30);
    store(&mut m, t);
    let meta = m.get("t").unwrap();
    assert_eq!(meta.state, TxnState::CompleteCommit);
    assert!(meta.partitions.is_empty());
    // A retried EndTxn(commit) is fine; an abort now is not.
    assert_eq!(m.end_txn("t", p, e, true, 31), Ok(None));
    assert_eq!(
        m.end_txn("t", p, e, false, 31),
        Err(TxnError::InvalidTxnState)
    );
    // The next transaction starts afresh.
    let t = m.add_partitions("t", p, e, &[tp("c", 0)], 40).unwrap();
    store(&mut m, t);
    let meta = m.get("t").unwrap();
    assert_eq!(meta.start_ms, 40);
    assert_eq!(meta.partitions.len(), 1);
}

#[test]
fn end_without_transaction_is_invalid() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e) = ready(&mut m, "t", &mut pid);
    assert_eq!(
        m.end_txn("t", p, e, true, 1),
        Err(TxnError::InvalidTxnState)
    );
    assert_eq!(
        m.end_txn("nope", p, e, true, 1),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        m.end_txn("t", p + 1, e, true, 1),
        Err(TxnError::InvalidProducerIdMapping)
    );
}

#[test]
fn a_new_producer_fences_the_old_and_aborts_its_transaction() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e0) = ready(&mut m, "t", &mut pid);
    let t = m.add_partitions("t", p, e0, &[tp("a", 0)], 10).unwrap();
    store(&mut m, t);
    // The second producer: its first attempt aborts the open transaction.
    let fence = match init(&mut m, "t", None, &mut pid) {
        Ok(InitStep::FenceOngoing(t)) => t,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(fence.next.state, TxnState::PrepareAbort);
    assert_eq!(fence.next.producer_epoch, e0 + 1);
    assert_eq!(fence.next.partitions.len(), 1);
    m.stored(fence);
    // The zombie is fenced everywhere.
    assert_eq!(
        m.add_partitions("t", p, e0, &[tp("b", 0)], 11),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        m.end_txn("t", p, e0, true, 11),
        Err(TxnError::ProducerFenced)
    );
    // Until the abort completes the new producer retries.
    assert_eq!(
        init(&mut m, "t", None, &mut pid),
        Err(TxnError::ConcurrentTransactions)
    );
    let t = m.complete("t", 12);
    store(&mut m, t);
    assert_eq!(m.get("t").unwrap().state, TxnState::CompleteAbort);
    assert_eq!(ready(&mut m, "t", &mut pid), (p, e0 + 2));
    // KIP-360 with the fenced epoch: refused.
    assert_eq!(
        init(&mut m, "t", Some((p, e0)), &mut pid),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn kip360_epoch_bump_and_its_retry() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e) = ready(&mut m, "t", &mut pid);
    let step = init(&mut m, "t", Some((p, e)), &mut pid).unwrap();
    let InitStep::Store(t) = step else {
        panic!("{step:?}")
    };
    assert_eq!(
        (t.next.producer_epoch, t.next.last_producer_epoch),
        (e + 1, e)
    );
    m.stored(t);
    // The same call again (its answer was lost): the same epoch.
    let step = init(&mut m, "t", Some((p, e)), &mut pid).unwrap();
    let InitStep::Store(t) = step else {
        panic!("{step:?}")
    };
    assert_eq!(t.next.producer_epoch, e + 1);
    m.stored(t);
    // Another producer id: fenced.
    assert_eq!(
        init(&mut m, "t", Some((p + 100, 0)), &mut pid),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn exhausted_epochs_rotate_the_producer_id() {
    let mut m = machine();
    let mut pid = 1;
    let (p, _) = ready(&mut m, "t", &mut pid);
    let mut meta = m.get("t").unwrap().clone();
    meta.producer_epoch = i16::MAX - 1;
    m.stored(Transition {
        id: "t".into(),
        next: meta,
    });
    let step = init(&mut m, "t", None, &mut pid).unwrap();
    let InitStep::Store(t) = step else {
        panic!("{step:?}")
    };
    assert_ne!(t.next.producer_id, p);
    assert_eq!(t.next.producer_epoch, 0);
    assert_eq!(t.next.last_producer_id, p);
}

#[test]
fn timed_out_transactions_are_aborted_with_a_bumped_epoch() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e) = ready(&mut m, "t", &mut pid);
    let t = m.add_partitions("t", p, e, &[tp("a", 0)], 1_000).unwrap();
    store(&mut m, t);
    assert_eq!(m.next_deadline(), Some(61_000));
    assert!(m.timed_out(60_999).is_empty());
    let due = m.timed_out(61_000);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].next.state, TxnState::PrepareAbort);
    assert_eq!(due[0].next.producer_epoch, e + 1);
    // Pending: not handed out twice.
    assert!(m.timed_out(70_000).is_empty());
    // A failed store does not bump twice.
    m.abandon(&due[0]);
    let again = m.timed_out(70_000);
    assert_eq!(again[0].next.producer_epoch, e + 1);
    m.stored(again[0].clone());
    assert_eq!(
        m.end_txn("t", p, e, true, 70_001),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn after_a_crash_every_open_transaction_is_aborted_and_fenced() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e) = ready(&mut m, "open", &mut pid);
    let t = m
        .add_partitions("open", p, e, &[tp("a", 0)], 1_000)
        .unwrap();
    store(&mut m, t);
    let (q, f) = ready(&mut m, "idle", &mut pid);
    let t = m
        .add_partitions("idle", q, f, &[tp("a", 1)], 1_000)
        .unwrap();
    store(&mut m, t);
    let t = m.end_txn("idle", q, f, true, 1_001).unwrap();
    store(&mut m, t);
    let t = m.complete("idle", 1_002);
    store(&mut m, t);
    // Long before any timeout: only the open one, with its epoch bumped.
    let aborted = m.abort_open(2_000);
    assert_eq!(aborted.len(), 1);
    assert_eq!(aborted[0].id, "open");
    assert_eq!(aborted[0].next.state, TxnState::PrepareAbort);
    assert_eq!(aborted[0].next.producer_epoch, e + 1);
    m.stored(aborted[0].clone());
    assert_eq!(
        m.end_txn("open", p, e, true, 2_001),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn offsets_need_the_group_in_the_transaction() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e) = ready(&mut m, "t", &mut pid);
    let offset = PendingOffset {
        group: "g".into(),
        topic: "in".into(),
        partition: 0,
        offset: 5,
        leader_epoch: -1,
        metadata: None,
    };
    assert_eq!(
        m.txn_offset_commit("t", p, e, "g", vec![offset.clone()], 1),
        Err(TxnError::TransactionAbortable)
    );
    let t = m.add_offsets("t", p, e, "g", 2).unwrap();
    store(&mut m, t);
    let t = m
        .txn_offset_commit("t", p, e, "g", vec![offset.clone()], 3)
        .unwrap();
    m.stored(t);
    let newer = PendingOffset {
        offset: 9,
        ..offset
    };
    let t = m.txn_offset_commit("t", p, e, "g", vec![newer], 4).unwrap();
    m.stored(t);
    assert_eq!(m.get("t").unwrap().offsets.len(), 1);
    assert_eq!(m.get("t").unwrap().offsets[0].offset, 9);
    assert!(m.has_pending_offset("g", "in", 0));
    let t = m.end_txn("t", p, e, false, 5).unwrap();
    store(&mut m, t);
    let t = m.complete("t", 6);
    store(&mut m, t);
    assert!(m.get("t").unwrap().offsets.is_empty());
    assert!(!m.has_pending_offset("g", "in", 0));
}

#[test]
fn verification_says_which_partitions_are_in() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e) = ready(&mut m, "t", &mut pid);
    let t = m.add_partitions("t", p, e, &[tp("a", 0)], 1).unwrap();
    store(&mut m, t);
    assert_eq!(
        m.verify_partitions("t", p, e, &[tp("a", 0), tp("a", 1)]),
        Ok(vec![true, false])
    );
    assert_eq!(
        m.verify_partitions("t", p, e + 1, &[tp("a", 0)]),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn list_filters_and_expiration() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e) = ready(&mut m, "a", &mut pid);
    ready(&mut m, "b", &mut pid);
    let t = m.add_partitions("a", p, e, &[tp("x", 0)], 1_000).unwrap();
    store(&mut m, t);
    let ongoing = m.list(&[TxnState::Ongoing], &[], -1, 2_000, |_| true);
    assert_eq!(ongoing.len(), 1);
    assert_eq!(ongoing[0].id, "a");
    assert_eq!(m.list(&[], &[p], -1, 2_000, |_| true).len(), 1);
    assert_eq!(
        m.list(&[TxnState::Ongoing], &[], 5_000, 2_000, |_| true)
            .len(),
        0
    );
    assert_eq!(m.list(&[], &[], -1, 2_000, |id| id == "b").len(), 1);
    let expiration = m.config().id_expiration_ms;
    assert_eq!(m.expire(1_000 + expiration), vec!["b".to_string()]);
    assert!(m.get("b").is_none());
    assert!(m.get("a").is_some(), "an open transaction never expires");
}

#[test]
fn records_round_trip() {
    let mut m = machine();
    let mut pid = 1;
    let (p, e) = ready(&mut m, "t", &mut pid);
    let t = m
        .add_partitions("t", p, e, &[tp("a", 3)], 1)
        .unwrap()
        .unwrap();
    let op = TxnOp::Put {
        id: "t".into(),
        meta: t.next.clone(),
    };
    let rec = op.encode(5);
    let record = nagare_log::batch::Record {
        offset: 0,
        timestamp: 5,
        key: rec.key,
        value: rec.value,
        headers: Vec::new(),
    };
    assert_eq!(TxnOp::decode(&record), Some(op));
    let tomb = TxnOp::Remove { id: "t".into() }.encode(5);
    let record = nagare_log::batch::Record {
        value: tomb.value,
        key: tomb.key,
        ..record
    };
    assert_eq!(
        TxnOp::decode(&record),
        Some(TxnOp::Remove { id: "t".into() })
    );
}

/// The driver against a real broker: a decided transaction survives a restart and is
/// completed by the next start; group offsets reach the group only on commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_commits_offsets_and_recovers_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..Default::default()
    };
    let broker = crate::Broker::open(config.clone()).unwrap();
    let (core, tasks) =
        crate::Subsystems::open(&broker, Default::default(), Default::default()).unwrap();
    tasks.spawn();
    let tc = core.transactions.clone();
    let (p, e) = tc.init_producer_id("tx", 60_000, None).await.unwrap();
    tc.add_offsets("tx", p, e, "g").await.unwrap();
    let offset = PendingOffset {
        group: "g".into(),
        topic: "in".into(),
        partition: 0,
        offset: 42,
        leader_epoch: -1,
        metadata: None,
    };
    tc.txn_offset_commit("tx", p, e, "g", "", None, -1, vec![offset])
        .await
        .unwrap();
    let fetched = core.groups.fetch_offsets("g", None);
    assert!(fetched.is_empty(), "not committed before the transaction");
    tc.end_txn("tx", p, e, true).await.unwrap();
    // EndTxn answers once the decision is stored; the rest follows in the background.
    for _ in 0..500 {
        if tc.get("tx").unwrap().state == TxnState::CompleteCommit {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let fetched = core.groups.fetch_offsets("g", None);
    assert_eq!(fetched.len(), 1);
    assert_eq!(fetched[0].1.as_ref().map(|o| o.offset), Some(42));
    assert_eq!(tc.get("tx").unwrap().state, TxnState::CompleteCommit);

    // An open transaction is kept across a restart, with its epoch.
    tc.add_offsets("tx", p, e, "g").await.unwrap();
    drop((tc, core));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    broker.shutdown().unwrap();
    drop(broker);
    let broker = crate::Broker::open(config).unwrap();
    let (core, tasks) =
        crate::Subsystems::open(&broker, Default::default(), Default::default()).unwrap();
    tasks.spawn();
    let meta = core.transactions.get("tx").unwrap();
    assert_eq!(meta.state, TxnState::Ongoing);
    assert_eq!((meta.producer_id, meta.producer_epoch), (p, e));
    let tc: Arc<TransactionCoordinator> = core.transactions.clone();
    assert_eq!(
        tc.init_producer_id("tx", 60_000, None).await,
        Err(TxnError::ConcurrentTransactions)
    );
    let (p2, e2) = tc.init_producer_id("tx", 60_000, None).await.unwrap();
    assert_eq!((p2, e2), (p, e + 2));
}

/// A transaction found decided (PrepareCommit) after a crash is completed by the next
/// start: its marker is written and its offsets reach the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_transactions_are_completed_on_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..Default::default()
    };
    let broker = crate::Broker::open(config.clone()).unwrap();
    broker
        .create_topic("t", Some(1), crate::TopicConfig::default())
        .unwrap();
    // What a crash between the decision and the markers leaves behind.
    {
        let (log, _, writer) =
            crate::internal_log::InternalLog::<TxnOp>::open(&broker, TRANSACTIONS_LOG).unwrap();
        let task = tokio::spawn(writer.run());
        let meta = TxnMetadata {
            producer_id: 5,
            last_producer_id: -1,
            producer_epoch: 3,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: [tp("t", 0)].into_iter().collect(),
            groups: ["g".to_string()].into_iter().collect(),
            offsets: vec![PendingOffset {
                group: "g".into(),
                topic: "t".into(),
                partition: 0,
                offset: 7,
                leader_epoch: -1,
                metadata: None,
            }],
            start_ms: 1,
            last_update_ms: 2,
        };
        log.push(
            [TxnOp::Put {
                id: "tx".into(),
                meta,
            }],
            true,
        )
        .stored()
        .await
        .unwrap();
        drop(log);
        task.await.unwrap();
    }
    let end_before = broker.partition("t", 0).unwrap().log_end_offset();
    let (core, tasks) =
        crate::Subsystems::open(&broker, Default::default(), Default::default()).unwrap();
    assert_eq!(
        core.transactions.get("tx").unwrap().state,
        TxnState::PrepareCommit
    );
    tasks.spawn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while core.transactions.get("tx").unwrap().state != TxnState::CompleteCommit {
        assert!(std::time::Instant::now() < deadline, "not completed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let partition = broker.partition("t", 0).unwrap();
    assert_eq!(
        partition.log_end_offset(),
        end_before + 1,
        "one commit marker"
    );
    let fetched = core.groups.fetch_offsets("g", None);
    assert_eq!(fetched[0].1.as_ref().map(|o| o.offset), Some(7));
}
