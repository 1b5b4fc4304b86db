//! Power loss under transactions. Produce acknowledges a transaction's records without an
//! fsync (as `AckLevel::Leader`), and EndTxn fsyncs the transaction's partitions before it
//! stores the commit decision; a crash before that aborts the open transaction on restart
//! and fences its producer. This checks the promise on a simulated disk
//! (`nagare_log::sim::SimFs`, see `power_loss.rs` for what it models).
//!
//! Each seed runs a few rounds of: open a `Broker` and its `Subsystems` on the simulated
//! disk, check what recovery found, run transactions (records appended as Produce appends
//! them, then a commit or an abort), leave one transaction open with records in it, drop
//! everything without a clean shutdown and cut the power. After each cut:
//! - every record of every acknowledged commit is readable by a read-committed reader,
//!   exactly once;
//! - no record of an aborted transaction, nor of the one left open, is;
//! - the transaction left open is aborted with its producer's epoch bumped, and nothing
//!   stays unstable (the last stable offset reaches the log end).
//!
//! `NAGARE_TXN_SIM_SEEDS` sets the number of seeds (default 30) and `NAGARE_TXN_SIM_SEED`
//! runs one.

mod sim;

use sim::{scratch, Rng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use nagare_core::log::batch::{build_batch, NewRecord};
use nagare_core::log::sim::SimFs;
use nagare_core::log::OpenFiles;
use nagare_core::transactions::{TxnError, TxnState};
use nagare_core::{AckLevel, Broker, BrokerConfig, Subsystems, TopicConfig, TopicFlush};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 2;
const TXN_ID: &str = "writer";
const ROUNDS: usize = 3;
const TXNS_PER_ROUND: usize = 4;

/// What the test knows was acknowledged.
#[derive(Default)]
struct Model {
    /// Values of committed transactions, by partition.
    committed: BTreeMap<i32, BTreeSet<Bytes>>,
    /// Values that must never be seen: aborted, or open at the power cut.
    discarded: BTreeSet<Bytes>,
    /// The producer epoch of the transaction left open at the last power cut.
    open_epoch: Option<i16>,
}

fn config(dir: &Path, sim: &Arc<SimFs>) -> BrokerConfig {
    BrokerConfig {
        data_dir: dir.to_path_buf(),
        topic_defaults: TopicConfig {
            flush: TopicFlush::Acks,
            segment_bytes: 600,
            ..TopicConfig::default()
        },
        storage: sim.storage(),
        open_files: OpenFiles::new(4),
        ..BrokerConfig::default()
    }
}

fn batch(pid: i64, epoch: i16, seq: i32, values: &[Bytes]) -> BytesMut {
    let records: Vec<NewRecord> = values
        .iter()
        .map(|v| NewRecord {
            value: Some(v.clone()),
            timestamp: 1_700_000_000_000,
            ..Default::default()
        })
        .collect();
    let mut b = build_batch(&records);
    nagare_core::log::control::set_producer(&mut b, pid, epoch, seq, true);
    b
}

/// Retries while the coordinator is busy (a completion running in the background).
async fn retry<T, F, Fut>(mut f: F) -> Result<T, TxnError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TxnError>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match f().await {
            Err(TxnError::ConcurrentTransactions) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            other => return other,
        }
    }
}

async fn round(
    dir: &Path,
    sim: &Arc<SimFs>,
    seed: u64,
    round: usize,
    rng: &mut Rng,
    m: &mut Model,
) {
    let broker = Broker::open(config(dir, sim)).expect("recovery failed: broker");
    let (core, tasks) = Subsystems::open(&broker, Default::default(), Default::default())
        .expect("recovery failed: subsystems");
    tasks.spawn();
    let topic = match broker.topic(TOPIC) {
        Some(t) => t,
        None => broker
            .create_topic(
                TOPIC,
                Some(PARTITIONS as u32),
                config(dir, sim).topic_defaults,
            )
            .unwrap(),
    };

    // The transaction left open by the crash is aborted and its producer fenced.
    if let Some(epoch) = m.open_epoch.take() {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let meta = core
                .transactions
                .get(TXN_ID)
                .expect("transactional id recovered");
            if meta.state == TxnState::CompleteAbort {
                assert!(
                    meta.producer_epoch > epoch,
                    "open transaction's producer not fenced"
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "open transaction not aborted after the crash: {:?}",
                meta.state
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // Read committed: every committed value once, nothing aborted or left open.
    for p in 0..PARTITIONS {
        let part = topic.partition(p).unwrap();
        assert_eq!(
            part.last_stable_offset(),
            part.log_end_offset(),
            "partition {p} left unstable"
        );
        let mut seen = BTreeSet::new();
        let mut offset = part.log_start_offset();
        while offset < part.last_stable_offset() {
            let read = part.records_from(offset, 1 << 20).unwrap();
            for r in read.records {
                let v = r.value.clone().unwrap_or_default();
                assert!(
                    !m.discarded.contains(&v),
                    "partition {p}: {v:?} of an aborted transaction is visible"
                );
                assert!(seen.insert(v.clone()), "partition {p}: {v:?} twice");
            }
            assert!(read.next_offset > offset, "reader stuck at {offset}");
            offset = read.next_offset;
        }
        for v in m.committed.get(&p).into_iter().flatten() {
            assert!(
                seen.contains(v),
                "partition {p} lost {v:?} of a committed transaction"
            );
        }
    }

    let (pid, epoch) = retry(|| core.transactions.init_producer_id(TXN_ID, 60_000, None))
        .await
        .expect("init producer id");
    let mut seqs = [0i32; PARTITIONS as usize];
    for t in 0..=TXNS_PER_ROUND {
        let last = t == TXNS_PER_ROUND;
        let parts: Vec<i32> = (0..PARTITIONS).filter(|_| rng.below(3) > 0).collect();
        let names: Vec<(String, i32)> = parts.iter().map(|p| (TOPIC.to_string(), *p)).collect();
        retry(|| core.transactions.add_partitions(TXN_ID, pid, epoch, &names))
            .await
            .expect("add partitions");
        let mut written: Vec<(i32, Bytes)> = Vec::new();
        for &p in &parts {
            for b in 0..=rng.below(2) {
                let values: Vec<Bytes> = (0..=rng.below(3))
                    .map(|i| Bytes::from(format!("{seed}/{round}/{t}/{p}/{b}/{i}")))
                    .collect();
                let count = values.len() as i32;
                let part = topic.partition(p).unwrap();
                // As Produce appends a transaction's records under acks=all.
                part.append(
                    batch(pid, epoch, seqs[p as usize], &values),
                    AckLevel::Leader,
                )
                .await
                .expect("transactional append");
                seqs[p as usize] += count;
                written.extend(values.into_iter().map(|v| (p, v)));
            }
        }
        if last {
            // Left open: the power is cut with these records acknowledged.
            m.discarded.extend(written.into_iter().map(|(_, v)| v));
            m.open_epoch = Some(epoch);
            break;
        }
        let commit = rng.below(4) > 0;
        retry(|| core.transactions.end_txn(TXN_ID, pid, epoch, commit))
            .await
            .expect("end txn");
        for (p, v) in written {
            if commit {
                m.committed.entry(p).or_default().insert(v);
            } else {
                m.discarded.insert(v);
            }
        }
    }
}

fn run_seed(seed: u64) {
    let dir = scratch();
    let sim = SimFs::new(seed);
    let mut rng = Rng(seed ^ 0x7A7A);
    let mut model = Model::default();
    for r in 0..=ROUNDS {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(round(dir.path(), &sim, seed, r, &mut rng, &mut model));
        // Dropping the runtime ends the background tasks holding the internal logs: after
        // it every file is closed, with no clean shutdown.
        rt.shutdown_timeout(Duration::from_secs(10));
        sim.power_cut().unwrap();
    }
}

#[test]
fn committed_transactions_survive_power_cuts_and_open_ones_abort() {
    sim::for_each_seed("NAGARE_TXN_SIM_SEED", "NAGARE_TXN_SIM_SEEDS", 30, run_seed);
}
