//! Lag and offset resets for operators, on a real broker in a temporary directory.

use std::sync::Arc;

use bytes::Bytes;
use nagare_log::batch::{build_batch, NewRecord};

use super::*;
use crate::{AckLevel, Broker, BrokerConfig};

fn broker(dir: &std::path::Path) -> Arc<Broker> {
    Broker::open(BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    })
    .unwrap()
}

fn coordinator(broker: &Broker) -> Arc<GroupCoordinator> {
    let (c, background) = GroupCoordinator::open(broker, GroupConfig::default()).unwrap();
    tokio::spawn(background.run());
    c
}

async fn produce(broker: &Broker, topic: &str, partition: i32, n: usize) {
    let t = match broker.topic(topic) {
        Some(t) => t,
        None => broker
            .create_topic(topic, Some(2), broker.config().topic_defaults.clone())
            .unwrap(),
    };
    let records: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            value: Some(Bytes::from(format!("v{i}"))),
            timestamp: 1_000 + i as i64,
            ..NewRecord::default()
        })
        .collect();
    t.partition(partition)
        .unwrap()
        .append(build_batch(&records), AckLevel::Leader)
        .await
        .unwrap();
}

async fn commit(c: &GroupCoordinator, topic: &str, partition: i32, offset: i64) {
    c.commit_offsets(OffsetCommitRequest {
        group_id: "g".into(),
        generation: -1,
        offsets: vec![OffsetCommit {
            topic: topic.into(),
            partition,
            offset,
            leader_epoch: -1,
            metadata: Some("m".into()),
        }],
        ..OffsetCommitRequest::default()
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn lag_is_the_distance_to_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    let c = coordinator(&b);
    produce(&b, "t", 0, 10).await;
    commit(&c, "t", 0, 4).await;
    commit(&c, "gone", 0, 7).await;
    let lags = c.offsets_with_lag(&b, "g");
    assert_eq!(lags.len(), 2);
    let gone = lags.iter().find(|l| l.topic == "gone").unwrap();
    assert_eq!((gone.log_end_offset, gone.lag), (None, None));
    let t = lags.iter().find(|l| l.topic == "t").unwrap();
    assert_eq!(
        (t.committed_offset, t.log_end_offset, t.lag),
        (4, Some(10), Some(6))
    );
    assert_eq!(t.metadata, "m");
    assert_eq!(c.total_lag(&b, "g"), 6);
    assert_eq!(c.total_lag(&b, "nobody"), 0);
}

#[tokio::test]
async fn resets_move_offsets_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let b = broker(dir.path());
        let c = coordinator(&b);
        produce(&b, "t", 0, 10).await;
        produce(&b, "t", 1, 3).await;
        commit(&c, "t", 0, 9).await;
        let plan = c.plan_reset(&b, "g", "t", None, ResetTo::Earliest).unwrap();
        assert_eq!(plan, vec![(("t".into(), 0), 0), (("t".into(), 1), 0)]);
        // Clamped to the log, as Kafka's tool does.
        let plan = c
            .plan_reset(&b, "g", "t", Some(&[0]), ResetTo::Offset(99))
            .unwrap();
        assert_eq!(plan, vec![(("t".into(), 0), 10)]);
        let plan = c
            .plan_reset(&b, "g", "t", Some(&[0]), ResetTo::Timestamp(1_005))
            .unwrap();
        assert_eq!(plan, vec![(("t".into(), 0), 5)]);
        let plan = c
            .plan_reset(&b, "g", "t", Some(&[1]), ResetTo::Latest)
            .unwrap();
        assert_eq!(plan, vec![(("t".into(), 1), 3)]);
        assert_eq!(
            c.plan_reset(&b, "g", "t", Some(&[7]), ResetTo::Latest),
            Err(ResetError::UnknownPartition {
                topic: "t".into(),
                partition: 7
            })
        );
        assert_eq!(
            c.plan_reset(&b, "g", "nope", None, ResetTo::Latest),
            Err(ResetError::UnknownTopic("nope".into()))
        );
        // Shifted from the committed 9, clamped to the log end; refused where nothing
        // is committed.
        let plan = c
            .plan_reset(&b, "g", "t", Some(&[0]), ResetTo::ShiftBy(-4))
            .unwrap();
        assert_eq!(plan, vec![(("t".into(), 0), 5)]);
        let plan = c
            .plan_reset(&b, "g", "t", Some(&[0]), ResetTo::ShiftBy(7))
            .unwrap();
        assert_eq!(plan, vec![(("t".into(), 0), 10)]);
        assert_eq!(
            c.plan_reset(&b, "g", "t", Some(&[1]), ResetTo::ShiftBy(1)),
            Err(ResetError::NothingCommitted {
                topic: "t".into(),
                partition: 1
            })
        );
        let preview = c
            .preview_reset(&b, "g", "t", Some(&[0]), ResetTo::Latest)
            .unwrap();
        assert_eq!((preview[0].committed_offset, preview[0].lag), (10, Some(0)));
        // A preview changes nothing.
        assert_eq!(c.total_lag(&b, "g"), 1);
        let done = c
            .reset_offsets(&b, "g", "t", Some(&[0]), ResetTo::Offset(2))
            .await
            .unwrap();
        assert_eq!(done[0].lag, Some(8));
        // A group that does not exist yet gets its offsets, as with Kafka's tool.
        c.reset_offsets(&b, "fresh", "t", None, ResetTo::Latest)
            .await
            .unwrap();
        b.shutdown().unwrap();
    }
    let b = broker(dir.path());
    let c = coordinator(&b);
    let got = c.fetch_offsets("g", Some(&[("t".into(), 0)]));
    assert_eq!(got[0].1.as_ref().map(|o| o.offset), Some(2));
    assert_eq!(c.total_lag(&b, "fresh"), 0);
    assert_eq!(c.offsets_with_lag(&b, "fresh").len(), 2);
}

#[test]
fn a_group_with_members_is_not_reset() {
    let mut gs = Groups::new(GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    });
    let (tx, _rx) = tokio::sync::oneshot::channel();
    gs.join(
        JoinRequest {
            group_id: "g".into(),
            client_id: "c".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![Protocol {
                name: "range".into(),
                metadata: Bytes::new(),
                topics: vec![],
            }],
            ..JoinRequest::default()
        },
        0,
        tx,
    );
    assert_ne!(gs.group("g").unwrap().state(), GroupState::Empty);
    assert_eq!(
        gs.reset_offsets("g", &[(("t".into(), 0), 1)], 0),
        Err(ResetError::NotEmpty("g".into()))
    );
    assert_eq!(
        gs.reset_offsets("", &[], 0),
        Err(ResetError::Group(GroupError::InvalidGroupId))
    );
    gs.reset_offsets("other", &[(("t".into(), 0), 1)], 0)
        .unwrap();
    assert_eq!(gs.group("other").unwrap().offsets().len(), 1);
}
