//! The consumer group protocol (KIP-848) state machine: joins, the split of partitions,
//! revocation before reassignment, leaves, fencing, static members and expiry.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::*;

const G: &str = "g";

fn topics(list: &[(&str, i32)]) -> TopicsSnapshot {
    list.iter()
        .map(|(n, p)| {
            (
                n.to_string(),
                TopicMeta {
                    id: Uuid::new_v4(),
                    partitions: *p,
                },
            )
        })
        .collect()
}

fn join(member: &str, subscribed: &[&str]) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: G.to_string(),
        member_id: member.to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(subscribed.iter().map(|s| s.to_string()).collect()),
        owned: Some(Assignment::new()),
        ..ConsumerHeartbeat::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Option<&Assignment>) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: G.to_string(),
        member_id: member.to_string(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: owned.cloned(),
        ..ConsumerHeartbeat::default()
    }
}

fn parts(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

#[test]
fn two_members_split_after_the_first_revokes() {
    let t = topics(&[("t", 4)]);
    let mut gs = Groups::new(GroupConfig::default());
    let a = gs.consumer_heartbeat(join("a", &["t"]), &t, 0).unwrap();
    assert_eq!(a.member_epoch, 1);
    let a_owned = a.assignment.unwrap();
    assert_eq!(parts(&a_owned), 4);

    // b joins: it gets the epoch but nothing yet (a still owns everything).
    let b = gs.consumer_heartbeat(join("b", &["t"]), &t, 10).unwrap();
    assert_eq!(b.member_epoch, 2);
    assert_eq!(parts(b.assignment.as_ref().unwrap()), 0);
    // a is told to keep half: it stays at epoch 1 until it has revoked the rest.
    let a = gs.consumer_heartbeat(beat("a", 1, None), &t, 20).unwrap();
    assert_eq!(a.member_epoch, 1);
    let kept = a.assignment.unwrap();
    assert_eq!(parts(&kept), 2);
    // b still waits: the partitions are pending revocation.
    let b = gs.consumer_heartbeat(beat("b", 2, None), &t, 30).unwrap();
    assert!(b.assignment.is_none());
    assert_eq!(gs.describe_consumer_group(G).unwrap().state, "Reconciling");
    // a reports it revoked them: it moves to epoch 2; then b gets the other half.
    let a = gs
        .consumer_heartbeat(beat("a", 1, Some(&kept)), &t, 40)
        .unwrap();
    assert_eq!(a.member_epoch, 2);
    let b = gs.consumer_heartbeat(beat("b", 2, None), &t, 50).unwrap();
    let b_owned = b.assignment.unwrap();
    assert_eq!(parts(&b_owned), 2);
    assert!(kept["t"].is_disjoint(&b_owned["t"]));
    assert_eq!(gs.describe_consumer_group(G).unwrap().state, "Stable");
    assert_eq!(gs.list_groups()[0].group_type, "consumer");
}

#[test]
fn leave_gives_the_partitions_to_the_others() {
    let t = topics(&[("t", 2)]);
    let mut gs = Groups::new(GroupConfig::default());
    gs.consumer_heartbeat(join("a", &["t"]), &t, 0).unwrap();
    gs.consumer_heartbeat(join("b", &["t"]), &t, 0).unwrap();
    let a = gs.consumer_heartbeat(beat("a", 1, None), &t, 0).unwrap();
    let kept = a.assignment.unwrap();
    gs.consumer_heartbeat(beat("a", 1, Some(&kept)), &t, 0)
        .unwrap();
    gs.consumer_heartbeat(beat("b", 2, None), &t, 0).unwrap();
    let left = gs.consumer_heartbeat(beat("b", -1, None), &t, 0).unwrap();
    assert_eq!(left.member_epoch, -1);
    let a = gs.consumer_heartbeat(beat("a", 2, None), &t, 0).unwrap();
    assert_eq!(a.member_epoch, 3);
    assert_eq!(parts(&a.assignment.unwrap()), 2);
}

#[test]
fn fencing_and_unknown_members() {
    let t = topics(&[("t", 1)]);
    let mut gs = Groups::new(GroupConfig::default());
    gs.consumer_heartbeat(join("a", &["t"]), &t, 0).unwrap();
    assert_eq!(
        gs.consumer_heartbeat(beat("a", 7, None), &t, 0),
        Err(GroupError::FencedMemberEpoch)
    );
    assert_eq!(
        gs.consumer_heartbeat(beat("zz", 1, None), &t, 0),
        Err(GroupError::UnknownMemberId)
    );
    let mut bad = join("c", &["t"]);
    bad.server_assignor = Some("nope".into());
    assert!(matches!(
        gs.consumer_heartbeat(bad, &t, 0),
        Err(GroupError::UnsupportedAssignor(_))
    ));
    // Offsets: the member epoch must be current.
    let commit = |epoch| OffsetCommitRequest {
        group_id: G.into(),
        member_id: "a".into(),
        generation: epoch,
        offsets: vec![OffsetCommit {
            topic: "t".into(),
            partition: 0,
            offset: 5,
            ..OffsetCommit::default()
        }],
        ..OffsetCommitRequest::default()
    };
    // An older epoch is checked per partition (KIP-1251): t-0 came with epoch 1.
    assert_eq!(
        gs.commit_offsets(commit(0), 0, 0),
        Ok(vec![Err(GroupError::StaleMemberEpoch)])
    );
    assert_eq!(
        gs.commit_offsets(commit(2), 0, 0),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(gs.commit_offsets(commit(1), 0, 0), Ok(vec![Ok(())]));
}

#[test]
fn sessions_expire_and_topics_created_later_are_assigned() {
    let mut t = topics(&[("t", 1)]);
    let mut gs = Groups::new(GroupConfig::default());
    let mut req = join("a", &["t", "later"]);
    req.subscribed_topic_regex = Some("re-.*".into());
    gs.consumer_heartbeat(req, &t, 0).unwrap();
    t.insert(
        "later".into(),
        TopicMeta {
            id: Uuid::new_v4(),
            partitions: 2,
        },
    );
    t.insert(
        "re-x".into(),
        TopicMeta {
            id: Uuid::new_v4(),
            partitions: 1,
        },
    );
    let a = gs.consumer_heartbeat(beat("a", 1, None), &t, 100).unwrap();
    assert_eq!(a.member_epoch, 2);
    let got = a.assignment.unwrap();
    assert_eq!(parts(&got), 4);
    assert!(got.contains_key("re-x"));
    let deadline = gs.next_deadline().unwrap();
    assert_eq!(
        deadline,
        100 + GroupConfig::default().consumer_session_timeout_ms
    );
    gs.tick(deadline);
    assert_eq!(gs.describe_consumer_group(G).unwrap().state, "Empty");
    assert_eq!(gs.describe_group(G).state, GroupState::Empty);
}

#[test]
fn static_member_comes_back_with_its_assignment() {
    let t = topics(&[("t", 2)]);
    let mut gs = Groups::new(GroupConfig::default());
    let mut req = join("a1", &["t"]);
    req.instance_id = Some("i".into());
    let first = gs.consumer_heartbeat(req, &t, 0).unwrap();
    let mut leave = beat("a1", -2, None);
    leave.instance_id = Some("i".into());
    gs.consumer_heartbeat(leave, &t, 0).unwrap();
    let mut again = join("a2", &["t"]);
    again.instance_id = Some("i".into());
    let back = gs.consumer_heartbeat(again, &t, 0).unwrap();
    assert_eq!(back.member_epoch, first.member_epoch);
    assert_eq!(back.assignment, first.assignment);
    // A third incarnation while a2 is active is refused.
    let mut third = join("a3", &["t"]);
    third.instance_id = Some("i".into());
    assert_eq!(
        gs.consumer_heartbeat(third, &t, 0),
        Err(GroupError::UnreleasedInstanceId)
    );
}

#[test]
fn empty_classic_group_upgrades_and_downgrades() {
    let t = topics(&[("t", 1)]);
    let mut gs = Groups::new(GroupConfig::default());
    // A classic client commits without group management: an empty classic group.
    gs.commit_offsets(
        OffsetCommitRequest {
            group_id: G.into(),
            generation: -1,
            offsets: vec![OffsetCommit {
                topic: "t".into(),
                partition: 0,
                offset: 9,
                ..OffsetCommit::default()
            }],
            ..OffsetCommitRequest::default()
        },
        0,
        0,
    )
    .unwrap();
    gs.consumer_heartbeat(join("a", &["t"]), &t, 0).unwrap();
    assert_eq!(gs.group(G).unwrap().group_type(), "consumer");
    assert_eq!(gs.fetch_offsets(G, None)[0].1.as_ref().unwrap().offset, 9);
    // Its type is stored with it.
    let ops = gs.drain_outbox();
    assert!(ops.iter().any(PersistOp::is_consumer_group));
    let mut restored = Groups::new(GroupConfig::default());
    for op in ops {
        restored.apply(op);
    }
    assert_eq!(restored.group(G).unwrap().group_type(), "consumer");
    gs.consumer_heartbeat(beat("a", 1, None), &t, 0).unwrap();
    gs.consumer_heartbeat(beat("a", -1, None), &t, 0).unwrap();
    // Empty again: a classic JoinGroup turns it back into a classic group.
    let (tx, _rx) = tokio::sync::oneshot::channel();
    gs.join(
        JoinRequest {
            group_id: G.into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![Protocol {
                name: "range".into(),
                metadata: bytes::Bytes::new(),
                topics: vec!["t".into()],
            }],
            ..JoinRequest::default()
        },
        0,
        tx,
    );
    assert_eq!(gs.group(G).unwrap().group_type(), "classic");
    let _ = BTreeMap::<i32, i32>::new();
}

#[test]
fn members_survive_a_restart_and_go_on_with_their_partitions() {
    let t = topics(&[("t", 2)]);
    let mut gs = Groups::new(GroupConfig::default());
    let a = gs.consumer_heartbeat(join("a", &["t"]), &t, 0).unwrap();
    let owned = a.assignment.unwrap();
    gs.consumer_heartbeat(join("b", &["t"]), &t, 0).unwrap();
    gs.consumer_heartbeat(beat("b", -1, None), &t, 0).unwrap();
    // Through the log's compaction (last value per key), as on open.
    let mut stored = StoredGroups::default();
    for op in gs.drain_outbox() {
        crate::internal_log::InternalOp::apply(op, &mut stored);
    }
    let mut restored = Groups::new(GroupConfig::default());
    for op in <PersistOp as crate::internal_log::InternalOp>::snapshot(&stored) {
        restored.apply(op);
    }
    restored.after_replay();
    let d = restored.describe_consumer_group(G).unwrap();
    assert_eq!(d.members.len(), 1, "b left before the restart");
    let again = restored
        .consumer_heartbeat(beat("a", a.member_epoch, Some(&owned)), &t, 10)
        .unwrap();
    assert!(again.member_epoch > a.member_epoch);
    assert_eq!(again.assignment.unwrap(), owned);
    // A member that never comes back expires.
    restored.tick(10 + GroupConfig::default().consumer_session_timeout_ms);
    assert_eq!(restored.describe_consumer_group(G).unwrap().state, "Empty");
}

#[test]
fn a_commit_with_an_older_epoch_is_fine_for_partitions_owned_since() {
    let t = topics(&[("t", 2)]);
    let mut gs = Groups::new(GroupConfig::default());
    let a = gs.consumer_heartbeat(join("a", &["t"]), &t, 0).unwrap();
    assert_eq!(a.member_epoch, 1);
    gs.consumer_heartbeat(join("b", &["t"]), &t, 0).unwrap();
    let kept = gs
        .consumer_heartbeat(beat("a", 1, None), &t, 0)
        .unwrap()
        .assignment
        .unwrap();
    let a = gs
        .consumer_heartbeat(beat("a", 1, Some(&kept)), &t, 0)
        .unwrap();
    assert_eq!(a.member_epoch, 2);
    let (kept_p, gone_p) = if kept["t"].contains(&0) {
        (0, 1)
    } else {
        (1, 0)
    };
    let commit = |p| OffsetCommitRequest {
        group_id: G.into(),
        member_id: "a".into(),
        generation: 1,
        offsets: vec![OffsetCommit {
            topic: "t".into(),
            partition: p,
            offset: 1,
            ..OffsetCommit::default()
        }],
        ..OffsetCommitRequest::default()
    };
    assert_eq!(gs.commit_offsets(commit(kept_p), 0, 0), Ok(vec![Ok(())]));
    assert_eq!(
        gs.commit_offsets(commit(gone_p), 0, 0),
        Ok(vec![Err(GroupError::StaleMemberEpoch)])
    );
}

#[test]
fn a_deleted_topic_leaves_the_assignment() {
    let mut t = topics(&[("t", 1), ("u", 1)]);
    let mut gs = Groups::new(GroupConfig::default());
    let a = gs
        .consumer_heartbeat(join("a", &["t", "u"]), &t, 0)
        .unwrap();
    let owned = a.assignment.unwrap();
    assert_eq!(parts(&owned), 2);
    t.remove("u");
    // The member no longer reports u (its client dropped it with the topic).
    let mut still = owned.clone();
    still.remove("u");
    let a = gs
        .consumer_heartbeat(beat("a", 1, Some(&still)), &t, 10)
        .unwrap();
    let a = if a.member_epoch == 1 {
        gs.consumer_heartbeat(beat("a", 1, Some(&still)), &t, 20)
            .unwrap()
    } else {
        a
    };
    assert_eq!(a.member_epoch, 2);
    assert_eq!(a.assignment.unwrap(), still);
}
