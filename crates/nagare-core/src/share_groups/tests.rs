//! Share-group membership, sessions and configs over a real broker in a temp dir.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::{Broker, BrokerConfig, TopicConfig};

fn open(dir: &std::path::Path) -> (Arc<Broker>, Arc<ShareGroups>) {
    let broker = Broker::open(BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    })
    .unwrap();
    let (queues, qb) = Queues::open(broker.clone()).unwrap();
    tokio::spawn(qb.run());
    let (groups, gb) = ShareGroups::open(&broker, queues).unwrap();
    tokio::spawn(gb.run());
    (broker, groups)
}

fn join(g: &ShareGroups, member: &str, topics: &[&str]) -> Result<HeartbeatAnswer, ShareError> {
    g.heartbeat(
        "g",
        member,
        0,
        None,
        Some(topics.iter().map(|t| t.to_string()).collect()),
        &Client::default(),
        0,
    )
}

#[tokio::test]
async fn members_get_every_partition_and_epochs_fence_stale_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, groups) = open(dir.path());
    broker
        .create_topic("t", Some(3), TopicConfig::default())
        .unwrap();
    let a = join(&groups, "a", &["t", "missing"]).unwrap();
    let b = join(&groups, "b", &["t"]).unwrap();
    let parts = |h: &HeartbeatAnswer| h.assignment.clone().unwrap()["t"].1.clone();
    assert_eq!(parts(&a), vec![0, 1, 2]);
    assert_eq!(parts(&b), vec![0, 1, 2]);
    assert!(b.member_epoch > a.member_epoch);
    let hb = |m: &str, e: i32| groups.heartbeat("g", m, e, None, None, &Client::default(), 10);
    assert_eq!(hb("a", a.member_epoch).unwrap().assignment, None);
    assert_eq!(
        hb("a", a.member_epoch + 7),
        Err(ShareError::FencedMemberEpoch)
    );
    assert_eq!(hb("zz", 3), Err(ShareError::UnknownMemberId));
    assert_eq!(hb("a", -1).unwrap().member_epoch, -1);
    assert_eq!(groups.describe("g").unwrap().members.len(), 1);
    assert!(groups.exists("g"));
    assert!(!groups.exists("other"));
}

#[tokio::test]
async fn sessions_check_their_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, groups) = open(dir.path());
    let p = ("t".to_string(), 0);
    assert_eq!(
        groups.fetch_session("g", "m", 1, &[], &[]),
        Err(ShareError::SessionNotFound)
    );
    assert_eq!(
        groups
            .fetch_session("g", "m", 0, std::slice::from_ref(&p), &[])
            .unwrap(),
        vec![p.clone()]
    );
    assert_eq!(
        groups.fetch_session("g", "m", 2, &[], &[]),
        Err(ShareError::InvalidSessionEpoch)
    );
    assert_eq!(
        groups.fetch_session("g", "m", 1, &[], &[]).unwrap(),
        vec![p.clone()]
    );
    groups.ack_session("g", "m", 2).unwrap();
    assert_eq!(
        groups.ack_session("g", "m", 0),
        Err(ShareError::InvalidSessionEpoch)
    );
    assert!(groups
        .fetch_session("g", "m", 3, &[], &[p])
        .unwrap()
        .is_empty());
    groups.end_session("g", "m");
    assert_eq!(
        groups.ack_session("g", "m", 4),
        Err(ShareError::SessionNotFound)
    );
}

#[tokio::test]
async fn configs_are_checked_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (broker, groups) = open(dir.path());
        let bad = BTreeMap::from([("share.delivery.count.limit".to_string(), "1".to_string())]);
        assert!(groups.set_overrides("g", bad, false).is_err());
        let good = BTreeMap::from([
            (
                "share.auto.offset.reset".to_string(),
                "earliest".to_string(),
            ),
            (
                "share.record.lock.duration.ms".to_string(),
                "5000".to_string(),
            ),
        ]);
        groups.set_overrides("g", good, false).unwrap();
        groups.log.flush().await.unwrap();
        drop(groups);
        broker.shutdown().unwrap();
    }
    let (_broker, groups) = open(dir.path());
    let s = groups.settings("g");
    assert!(s.earliest);
    assert_eq!((s.lock_ms, s.delivery_limit), (5000, 5));
    assert_eq!(groups.list(), vec!["g".to_string()]);
}
