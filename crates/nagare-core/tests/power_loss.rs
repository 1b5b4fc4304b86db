//! Power loss under the whole core: topic partitions and the internal logs (idempotent
//! producer ids, queue acknowledgement state, consumer-group offsets) on a simulated disk.
//!
//! What is modelled: every log of the broker lives on `nagare_log::sim::SimFs`. A power cut
//! keeps what a completed fsync covered and a random subset of everything written since,
//! in any order, each write possibly torn to a prefix; a new, renamed or removed file name
//! survives for sure only once its directory was fsynced (see `nagare_log::sim` for the
//! details). Each seed runs a few rounds of: open a `Broker` with `Producers`, `Queues`
//! and a `GroupCoordinator` on the simulated disk (every topic with `flush = "acks"`),
//! run random operations, each acknowledged under the strongest ack, drop everything
//! without a clean shutdown, cut the power, reopen, and check against a model:
//! - recovery never fails;
//! - every record appended with `AckLevel::Durable` is at its offset, exactly once;
//! - a producer id handed out is never handed out again, and its acknowledged epoch is
//!   the current one after recovery (bumping it from there succeeds);
//! - every message published to a queue with `AckLevel::Durable` and not acknowledged is
//!   delivered after recovery exactly once, and no acknowledgement covered by a completed
//!   `Queues::flush` comes back as an undelivered message;
//! - the committed offset of every partition is the last acknowledged commit.
//!
//! What the core writes outside the simulated disk (real files, untouched by the power
//! cut, so these tests assume they are durable): the topic registry `DATA/topics.json`
//! (written to a temporary file, fsynced, renamed, directory fsynced), the data
//! directory's lock file `DATA/.lock`, the data directory itself and the removal of a
//! deleted topic's directories (`remove_dir_all`). Partition directories are created
//! through the storage trait, which the simulator treats as durable at once.
//!
//! Faults other than the power cut (full disk, failing fsyncs) are covered by nagare-log's
//! own power-loss tests; here every operation succeeds.
//!
//! `NAGARE_CORE_SIM_SEEDS` sets the number of seeds (default 100) and
//! `NAGARE_CORE_SIM_SEED` runs one.

mod sim;

use sim::{scratch, Rng};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use nagare_core::groups::{GroupConfig, GroupCoordinator, OffsetCommit, OffsetCommitRequest};
use nagare_core::log::batch::NewRecord;
use nagare_core::log::sim::SimFs;
use nagare_core::log::OpenFiles;
use nagare_core::producers::Producers;
use nagare_core::queues::{Delivery, QueueSink, Queues};
use nagare_core::{AckLevel, Broker, BrokerConfig, TopicConfig, TopicFlush};
use parking_lot::Mutex;

const TOPIC: &str = "events";
const PARTITIONS: i32 = 3;
const QUEUE: &str = "jobs";
const GROUP: &str = "readers";
const ROUNDS: usize = 3;
const OPS_PER_ROUND: usize = 40;

/// What the test knows was acknowledged.
#[derive(Default)]
struct Model {
    /// Durable appends to `TOPIC`, by partition and offset.
    records: BTreeMap<i32, BTreeMap<i64, Bytes>>,
    /// Every producer id handed out, with its last acknowledged epoch.
    producers: BTreeMap<i64, i16>,
    /// Durably published queue messages, by offset.
    queue_messages: BTreeMap<i64, Bytes>,
    /// Acknowledged messages covered by a completed `Queues::flush`.
    queue_acked_durable: BTreeSet<i64>,
    /// Acknowledged since the last flush: may or may not survive.
    queue_acked_maybe: BTreeSet<i64>,
    /// Delivered to this round's consumer and not acknowledged yet.
    queue_unacked: Vec<i64>,
    /// Last acknowledged commit per partition of `TOPIC`.
    committed: BTreeMap<i32, i64>,
}

#[derive(Default)]
struct Collect(Mutex<Vec<Delivery>>);

impl QueueSink for Collect {
    fn deliver(&self, d: Vec<Delivery>) -> bool {
        self.0.lock().extend(d);
        false
    }
}

fn config(dir: &Path, sim: &Arc<SimFs>) -> BrokerConfig {
    BrokerConfig {
        data_dir: dir.to_path_buf(),
        topic_defaults: TopicConfig {
            flush: TopicFlush::Acks,
            // Small segments: rolls, and the new files' directory entries, happen often.
            segment_bytes: 400,
            ..TopicConfig::default()
        },
        storage: sim.storage(),
        // A small budget, so segment files are also closed and reopened.
        open_files: OpenFiles::new(4),
        ..BrokerConfig::default()
    }
}

fn value(seed: u64, round: usize, op: usize, what: &str) -> Bytes {
    Bytes::from(format!("{what}/{seed}/{round}/{op}"))
}

fn record(v: &Bytes) -> NewRecord {
    NewRecord {
        value: Some(v.clone()),
        ..Default::default()
    }
}

/// One round: open, check the model against what recovery found, run random
/// operations, drop everything without a clean shutdown.
async fn round(
    dir: &Path,
    sim: &Arc<SimFs>,
    seed: u64,
    round: usize,
    rng: &mut Rng,
    m: &mut Model,
) {
    let broker = Broker::open(config(dir, sim)).expect("recovery failed: broker");
    let (producers, producer_writer) =
        Producers::open(&broker).expect("recovery failed: producers");
    tokio::spawn(producer_writer.run());
    let (queues, queue_background) = Queues::open(broker.clone()).expect("recovery failed: queues");
    tokio::spawn(queue_background.run());
    let (groups, group_background) =
        GroupCoordinator::open(&broker, GroupConfig::default()).expect("recovery failed: groups");
    tokio::spawn(group_background.run());
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

    // Records: every durable append is there once, at its offset.
    for p in 0..PARTITIONS {
        let part = topic.partition(p).unwrap();
        let mut found: BTreeMap<i64, Bytes> = BTreeMap::new();
        let mut values: HashMap<Bytes, i64> = HashMap::new();
        let mut offset = part.log_start_offset();
        while offset < part.log_end_offset() {
            let read = part.records_from(offset, 1 << 20).unwrap();
            for r in read.records {
                let v = r.value.clone().unwrap_or_default();
                if let Some(prev) = values.insert(v.clone(), r.offset) {
                    panic!("record {v:?} at offsets {prev} and {}", r.offset);
                }
                found.insert(r.offset, v);
            }
            assert!(read.next_offset > offset, "reader stuck at {offset}");
            offset = read.next_offset;
        }
        for (o, v) in m.records.get(&p).into_iter().flatten() {
            assert_eq!(
                found.get(o),
                Some(v),
                "partition {p} lost acknowledged offset {o}"
            );
        }
    }

    // Producer ids: the acknowledged epoch is current, and bumping it works.
    if let Some((&id, &epoch)) = m
        .producers
        .iter()
        .nth(rng.below(m.producers.len() as u64 + 1) as usize)
    {
        let got = producers.init_producer_id(Some((id, epoch))).await;
        assert_eq!(
            got.ok(),
            Some((id, epoch + 1)),
            "producer {id} epoch {epoch} not recovered"
        );
        m.producers.insert(id, epoch + 1);
    }

    // Queue: unacknowledged messages come back once; durably acknowledged ones never.
    let q = queues.queue(QUEUE).expect("recovery failed: queue");
    let sink = Arc::new(Collect::default());
    let consumer = q.subscribe(sink.clone(), 1 << 20);
    let delivered: Vec<i64> = sink.0.lock().drain(..).map(|d| d.offset).collect();
    let delivered_set: BTreeSet<i64> = delivered.iter().copied().collect();
    assert_eq!(
        delivered.len(),
        delivered_set.len(),
        "a message was delivered twice: {delivered:?}"
    );
    for o in &delivered {
        assert!(m.queue_messages.contains_key(o), "unknown message at {o}");
        assert!(
            !m.queue_acked_durable.contains(o),
            "acknowledged message {o} came back"
        );
    }
    for o in m.queue_messages.keys() {
        let acked = m.queue_acked_durable.contains(o) || m.queue_acked_maybe.contains(o);
        assert!(
            acked || delivered_set.contains(o),
            "unacknowledged message {o} lost"
        );
    }
    // What recovery found is now the truth: not delivered means acknowledged.
    for o in m.queue_messages.keys() {
        if !delivered_set.contains(o) {
            m.queue_acked_durable.insert(*o);
        }
    }
    m.queue_acked_maybe.clear();
    m.queue_unacked = delivered;

    // Offsets: the last acknowledged commit of every partition.
    let fetched = groups.fetch_offsets(GROUP, None);
    let fetched: BTreeMap<i32, i64> = fetched
        .into_iter()
        .filter_map(|((t, p), c)| (t == TOPIC).then_some((p, c?.offset)))
        .collect();
    assert_eq!(fetched, m.committed, "committed offsets after recovery");

    // The last round only checks.
    let ops = if round == ROUNDS { 0 } else { OPS_PER_ROUND };
    for op in 0..ops {
        m.queue_unacked
            .extend(sink.0.lock().drain(..).map(|d| d.offset));
        match rng.below(7) {
            0 | 1 => {
                let p = rng.below(PARTITIONS as u64) as i32;
                let v = value(seed, round, op, "record");
                let info = topic
                    .partition(p)
                    .unwrap()
                    .append_records(&[record(&v)], AckLevel::Durable)
                    .await
                    .unwrap();
                m.records.entry(p).or_default().insert(info.base_offset, v);
            }
            2 => {
                let (id, epoch) = producers.init_producer_id(None).await.unwrap();
                assert_eq!(epoch, 0);
                assert!(
                    m.producers.insert(id, epoch).is_none(),
                    "producer id {id} handed out twice"
                );
            }
            3 => {
                let v = value(seed, round, op, "message");
                let info = q.publish(&[record(&v)], AckLevel::Durable).await.unwrap();
                m.queue_messages.insert(info.base_offset, v);
            }
            4 if !m.queue_unacked.is_empty() => {
                let i = rng.below(m.queue_unacked.len() as u64) as usize;
                let o = m.queue_unacked.swap_remove(i);
                assert!(q.ack(consumer, o, false), "ack of {o} refused");
                m.queue_acked_maybe.insert(o);
            }
            5 => {
                queues.flush().await.unwrap();
                m.queue_acked_durable.append(&mut m.queue_acked_maybe);
            }
            _ => {
                let p = rng.below(PARTITIONS as u64) as i32;
                let offset = m.committed.get(&p).copied().unwrap_or(0) + 1 + rng.below(5) as i64;
                let results = groups
                    .commit_offsets(OffsetCommitRequest {
                        group_id: GROUP.to_string(),
                        member_id: String::new(),
                        group_instance_id: None,
                        generation: -1,
                        offsets: vec![OffsetCommit {
                            topic: TOPIC.to_string(),
                            partition: p,
                            offset,
                            leader_epoch: -1,
                            metadata: None,
                        }],
                    })
                    .await
                    .unwrap();
                assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
                m.committed.insert(p, offset);
            }
        }
    }
}

fn run_seed(seed: u64) {
    let dir = scratch();
    let sim = SimFs::new(seed);
    let mut rng = Rng(seed ^ 0x5EED);
    let mut model = Model::default();
    for r in 0..=ROUNDS {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(round(dir.path(), &sim, seed, r, &mut rng, &mut model));
        // Dropping the runtime ends the background writers, which hold the internal logs:
        // after it every file is closed, with no clean shutdown.
        rt.shutdown_timeout(Duration::from_secs(10));
        sim.power_cut().unwrap();
    }
}

#[test]
fn acknowledged_state_survives_power_cuts() {
    sim::for_each_seed(
        "NAGARE_CORE_SIM_SEED",
        "NAGARE_CORE_SIM_SEEDS",
        100,
        run_seed,
    );
}
