//! The scenarios every share-group server must pass with this client, run against
//! nagare (`tests/nagare.rs`) and Apache Kafka (`tests/kafka.rs`): records are produced
//! with a real Kafka client over the wire (nagare's own, every codec), consumed with
//! `ShareConsumer`s.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use nagare_kafka::client::Connection;
use nagare_log::batch::{build_batch, Compression, NewRecord};
use nagare_log::recompress::{recompress, TargetCodec};
use nagare_share_client::{
    set_group_configs, AckKind, ShareClientConfig, ShareConsumer, ShareError, ShareRecord,
};

pub(crate) const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

pub(crate) fn config(bootstrap: &str) -> ShareClientConfig {
    // RUST_LOG=nagare_share_client=debug shows what the client does.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    ShareClientConfig {
        bootstrap: vec![bootstrap.to_string()],
        client_id: "share-client-test".into(),
        properties: vec![("fetch.wait.max.ms".into(), "200".into())],
        request_timeout: Duration::from_secs(10),
    }
}

/// Produces `values` to a partition in batches of `per_batch`, the codecs taking turns.
pub(crate) async fn produce(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    values: &[String],
    per_batch: usize,
) {
    let mut conn = Connection::connect(bootstrap)
        .await
        .expect("connect to produce");
    conn.ensure_topic(topic).await.expect("topic");
    for (i, chunk) in values.chunks(per_batch).enumerate() {
        let records: Vec<NewRecord> = chunk
            .iter()
            .map(|v| NewRecord {
                key: None,
                value: Some(Bytes::from(v.clone())),
                headers: vec![("n".into(), Some(Bytes::from(v.clone())))],
                timestamp: 1_700_000_000_000,
            })
            .collect();
        let plain = build_batch(&records);
        let codec = CODECS[i % CODECS.len()];
        let batch = match codec {
            Compression::None => plain,
            c => recompress(&plain, TargetCodec::default_for(c))
                .unwrap()
                .unwrap(),
        };
        let batch = batch.freeze();
        // A topic just created may not have its leader everywhere yet (Kafka answers
        // NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION for a moment).
        let mut tries = 0;
        loop {
            let answer = conn
                .produce(topic, partition, batch.clone(), -1)
                .await
                .expect("produce")
                .expect("an answer");
            tries += 1;
            match answer.error_code {
                0 => break,
                3 | 6 if tries < 50 => tokio::time::sleep(Duration::from_millis(100)).await,
                code => panic!("produce to {topic}-{partition}: error {code}"),
            }
        }
    }
}

pub(crate) fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// A group whose share partitions start at the earliest record.
pub(crate) async fn earliest(bootstrap: &str, group: &str) {
    set_group_configs(
        &config(bootstrap),
        group,
        &[("share.auto.offset.reset", "earliest")],
    )
    .await
    .expect("set share.auto.offset.reset");
}

pub(crate) async fn join(bootstrap: &str, group: &str, topic: &str) -> ShareConsumer {
    ShareConsumer::join(config(bootstrap), group, vec![topic.to_string()])
        .await
        .expect("join")
}

/// Polls until `n` records came or `limit` passed.
pub(crate) async fn poll_n(c: &ShareConsumer, n: usize, limit: Duration) -> Vec<ShareRecord> {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        got.extend(
            c.poll(n - got.len(), Duration::from_millis(300))
                .await
                .expect("poll"),
        );
    }
    got
}

/// Polls for `time` and returns whatever came.
pub(crate) async fn poll_for(c: &ShareConsumer, time: Duration) -> Vec<ShareRecord> {
    let deadline = Instant::now() + time;
    let mut got = Vec::new();
    while Instant::now() < deadline {
        got.extend(c.poll(100, Duration::from_millis(200)).await.expect("poll"));
    }
    got
}

fn value(r: &ShareRecord) -> String {
    String::from_utf8(r.record.value.clone().unwrap_or_default().to_vec()).unwrap()
}

/// Two members of one group share `values.len()` records (produced over `partitions`):
/// each record reaches one of them once, both get some, and all are accepted.
pub(crate) async fn two_members_share(bootstrap: &str, topic: &str, partitions: i32, group: &str) {
    earliest(bootstrap, group).await;
    let all = values("shared", 1000);
    for p in 0..partitions {
        let part: Vec<String> = all
            .iter()
            .skip(p as usize)
            .step_by(partitions as usize)
            .cloned()
            .collect();
        produce(bootstrap, topic, p, &part, 50).await;
    }
    let seen = Arc::new(AtomicUsize::new(0));
    let member = |c: ShareConsumer| {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(60);
            while seen.load(Ordering::SeqCst) < 1000 && Instant::now() < deadline {
                let records = c.poll(20, Duration::from_millis(200)).await.expect("poll");
                for r in &records {
                    assert_eq!(r.delivery_count, 1, "no redelivery expected");
                    assert_eq!(r.record.headers[0].1.as_deref(), r.record.value.as_deref());
                    c.acknowledge(&r.topic, r.partition, r.offset, AckKind::Accept);
                    got.push((r.partition, r.offset, value(r)));
                }
                seen.fetch_add(records.len(), Ordering::SeqCst);
                // A little work per batch, so the other member gets its turn.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            c.flush().await.expect("flush");
            c.close().await.expect("close");
            got
        })
    };
    let a = member(join(bootstrap, group, topic).await);
    let b = member(join(bootstrap, group, topic).await);
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert!(
        !a.is_empty() && !b.is_empty(),
        "both members get records: {} and {}",
        a.len(),
        b.len()
    );
    let mut keys = BTreeSet::new();
    let mut got_values = BTreeSet::new();
    for (p, o, v) in a.iter().chain(&b) {
        assert!(keys.insert((*p, *o)), "record {p}-{o} delivered twice");
        got_values.insert(v.clone());
    }
    let missing: Vec<&String> = all.iter().filter(|v| !got_values.contains(*v)).collect();
    assert!(missing.is_empty(), "never delivered: {missing:?}");
    assert_eq!(got_values.len(), all.len());
    // Everything was accepted: a new member finds nothing.
    let c = join(bootstrap, group, topic).await;
    assert!(poll_for(&c, Duration::from_secs(2)).await.is_empty());
    c.close().await.unwrap();
}

/// A released record comes back, to the same member, with a higher delivery count.
pub(crate) async fn release_redelivers(bootstrap: &str, topic: &str, group: &str) {
    earliest(bootstrap, group).await;
    produce(bootstrap, topic, 0, &values("again", 1), 1).await;
    let c = join(bootstrap, group, topic).await;
    let first = poll_n(&c, 1, Duration::from_secs(20)).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].delivery_count, 1);
    c.acknowledge(topic, first[0].partition, first[0].offset, AckKind::Release);
    let second = poll_n(&c, 1, Duration::from_secs(20)).await;
    assert_eq!(second.len(), 1);
    assert_eq!(
        (second[0].offset, second[0].delivery_count),
        (first[0].offset, 2)
    );
    assert_eq!(value(&second[0]), "again-0");
    c.acknowledge(
        topic,
        second[0].partition,
        second[0].offset,
        AckKind::Accept,
    );
    c.flush().await.expect("flush");
    c.close().await.unwrap();
}

/// A rejected record is archived: nobody gets it again.
pub(crate) async fn reject_archives(bootstrap: &str, topic: &str, group: &str) {
    earliest(bootstrap, group).await;
    produce(bootstrap, topic, 0, &values("bad", 2), 2).await;
    let c = join(bootstrap, group, topic).await;
    let got = poll_n(&c, 2, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 2);
    c.acknowledge(topic, got[0].partition, got[0].offset, AckKind::Reject);
    c.acknowledge(topic, got[1].partition, got[1].offset, AckKind::Accept);
    c.flush().await.expect("flush");
    assert!(poll_for(&c, Duration::from_millis(1500)).await.is_empty());
    // Settling a record never acquired is refused, and flush says so. (Settling an
    // archived one again is too, by nagare; Kafka lets it pass.)
    c.acknowledge(
        topic,
        got[0].partition,
        got[1].offset + 1000,
        AckKind::Accept,
    );
    let err = c.flush().await.unwrap_err();
    assert_eq!(err.kafka_code(), Some(121), "INVALID_RECORD_STATE: {err}");
    c.close().await.unwrap();
    let other = join(bootstrap, group, topic).await;
    assert!(poll_for(&other, Duration::from_millis(1500))
        .await
        .is_empty());
    other.close().await.unwrap();
}

/// Closing hands what a member held back to the group at once (not after the lock).
pub(crate) async fn close_hands_back(bootstrap: &str, topic: &str, group: &str) {
    earliest(bootstrap, group).await;
    produce(bootstrap, topic, 0, &values("held", 5), 5).await;
    let a = join(bootstrap, group, topic).await;
    let held = poll_n(&a, 5, Duration::from_secs(20)).await;
    assert_eq!(held.len(), 5);
    let b = join(bootstrap, group, topic).await;
    assert!(
        poll_for(&b, Duration::from_millis(500)).await.is_empty(),
        "a holds them"
    );
    let closed = Instant::now();
    a.close().await.expect("close");
    let back = poll_n(&b, 5, Duration::from_secs(10)).await;
    assert!(
        closed.elapsed() < Duration::from_secs(10),
        "well before the 30 s lock"
    );
    let mut offsets: Vec<(i64, i16)> = back.iter().map(|r| (r.offset, r.delivery_count)).collect();
    offsets.sort();
    let expected: Vec<(i64, i16)> = held.iter().map(|r| (r.offset, 2)).collect();
    assert_eq!(offsets, expected);
    for r in &back {
        b.acknowledge(topic, r.partition, r.offset, AckKind::Accept);
    }
    b.close().await.unwrap();
}

/// An accepted record stays accepted across members: after a close, another member gets
/// the released and the unacknowledged records, never the accepted one. `between` runs
/// after the first member closed (e.g. a server restart).
pub(crate) async fn accept_survives<F, Fut>(bootstrap: &str, topic: &str, group: &str, between: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = String>,
{
    earliest(bootstrap, group).await;
    produce(bootstrap, topic, 0, &values("keep", 3), 3).await;
    let a = join(bootstrap, group, topic).await;
    let got = poll_n(&a, 3, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 3);
    a.acknowledge(topic, 0, got[0].offset, AckKind::Accept);
    a.acknowledge(topic, 0, got[1].offset, AckKind::Release);
    a.flush().await.expect("flush");
    a.close().await.expect("close");
    let bootstrap = between().await;
    let b = join(&bootstrap, group, topic).await;
    let again = poll_n(&b, 2, Duration::from_secs(20)).await;
    let extra = poll_for(&b, Duration::from_secs(1)).await;
    let mut offsets: BTreeMap<i64, i16> = again
        .iter()
        .chain(&extra)
        .map(|r| (r.offset, r.delivery_count))
        .collect();
    assert_eq!(offsets.remove(&got[1].offset), Some(2));
    assert_eq!(offsets.remove(&got[2].offset), Some(2));
    assert!(
        offsets.is_empty(),
        "the accepted record came back: {offsets:?}"
    );
    b.close().await.unwrap();
}

/// What a share consumer says when the cluster is gone: an error, promptly.
pub(crate) async fn unreachable_promptly(c: &ShareConsumer, timeout: Duration) {
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < timeout * 3 {
        match c.poll(10, Duration::from_millis(300)).await {
            Err(e) => {
                last = Some(e);
                break;
            }
            Ok(_) => continue,
        }
    }
    let e = last.expect("poll kept answering Ok with the cluster gone");
    assert!(matches!(e, ShareError::Unreachable(_)), "{e}");
    assert!(
        started.elapsed() <= timeout * 2,
        "took {:?}",
        started.elapsed()
    );
}
