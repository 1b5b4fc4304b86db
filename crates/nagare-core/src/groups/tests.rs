//! The group state machine against Kafka's classic state diagram, time passed by hand.

use bytes::Bytes;
use tokio::sync::oneshot;

use super::*;
use crate::internal_log::test_support;

type JoinRx = oneshot::Receiver<Result<JoinResponse, GroupError>>;
type SyncRx = oneshot::Receiver<Result<SyncResponse, GroupError>>;

const G: &str = "g";
const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

fn groups(initial_delay_ms: u64) -> Groups {
    Groups::new(GroupConfig {
        initial_rebalance_delay_ms: initial_delay_ms,
        ..GroupConfig::default()
    })
}

fn protocols(names: &[&str]) -> Vec<Protocol> {
    names
        .iter()
        .map(|n| Protocol {
            name: n.to_string(),
            metadata: Bytes::from(format!("meta-{n}")),
            topics: vec![],
        })
        .collect()
}

fn req(member_id: &str) -> JoinRequest {
    JoinRequest {
        group_id: G.into(),
        member_id: member_id.into(),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: protocols(&["range"]),
        ..JoinRequest::default()
    }
}

fn join(gs: &mut Groups, r: JoinRequest, now: u64) -> JoinRx {
    let (tx, rx) = oneshot::channel();
    gs.join(r, now, tx);
    rx
}

fn sync(
    gs: &mut Groups,
    member: &str,
    generation: i32,
    assign: &[(&str, &str)],
    now: u64,
) -> SyncRx {
    let (tx, rx) = oneshot::channel();
    let r = SyncRequest {
        group_id: G.into(),
        member_id: member.into(),
        generation,
        assignments: assign
            .iter()
            .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
            .collect(),
        ..SyncRequest::default()
    };
    gs.sync(r, now, tx);
    rx
}

/// The answer if there is one yet.
fn ready<T>(rx: &mut oneshot::Receiver<T>) -> Option<T> {
    rx.try_recv().ok()
}

fn state(gs: &Groups) -> GroupState {
    gs.group(G).map_or(GroupState::Dead, |g| g.state())
}

/// A new dynamic member, v4+ style: MEMBER_ID_REQUIRED, then the real join.
fn join_v4(gs: &mut Groups, now: u64) -> (String, JoinRx) {
    let mut first = join(
        gs,
        JoinRequest {
            require_known_member_id: true,
            ..req("")
        },
        now,
    );
    let id = match ready(&mut first) {
        Some(Err(GroupError::MemberIdRequired(id))) => id,
        other => panic!("expected MEMBER_ID_REQUIRED, got {other:?}"),
    };
    let rx = join(gs, req(&id), now);
    (id, rx)
}

/// A one-member group taken to Stable; returns the member id.
fn stable_single(gs: &mut Groups) -> String {
    let (id, mut rx) = join_v4(gs, 0);
    let j = ready(&mut rx).expect("joined").expect("ok");
    assert_eq!(j.leader, id);
    let mut s = sync(gs, &id, j.generation, &[(&id, "all")], 0);
    assert_eq!(ready(&mut s).unwrap().unwrap().assignment, "all");
    id
}

/// Two members taken to Stable at generation 1; returns (leader, follower).
fn stable_pair(gs: &mut Groups) -> (String, String) {
    let mut a = join(gs, req(""), 0);
    let mut b = join(gs, req(""), 10);
    assert!(
        ready(&mut a).is_none(),
        "initial delay holds the first join"
    );
    gs.tick(200);
    let ja = ready(&mut a).unwrap().unwrap();
    let jb = ready(&mut b).unwrap().unwrap();
    assert_eq!(ja.generation, 1);
    let (leader, follower) = if ja.member_id == ja.leader {
        (ja, jb)
    } else {
        (jb, ja)
    };
    assert_eq!(leader.members.len(), 2);
    assert!(follower.members.is_empty());
    let (l, f) = (leader.member_id.clone(), follower.member_id.clone());
    let mut sf = sync(gs, &f, 1, &[], 210);
    assert!(ready(&mut sf).is_none(), "follower waits for the leader");
    let mut sl = sync(gs, &l, 1, &[(&l, "L"), (&f, "F")], 220);
    assert_eq!(ready(&mut sl).unwrap().unwrap().assignment, "L");
    assert_eq!(ready(&mut sf).unwrap().unwrap().assignment, "F");
    assert_eq!(state(gs), GroupState::Stable);
    (l, f)
}

#[test]
fn single_member_member_id_required_then_stable() {
    let mut gs = groups(0);
    let (id, mut rx) = join_v4(&mut gs, 0);
    let j = ready(&mut rx).unwrap().unwrap();
    assert_eq!(j.member_id, id);
    assert_eq!(j.generation, 1);
    assert_eq!(j.protocol_name.as_deref(), Some("range"));
    assert_eq!(j.members.len(), 1);
    assert_eq!(j.members[0].metadata, "meta-range");
    assert_eq!(state(&gs), GroupState::CompletingRebalance);
    assert_eq!(gs.heartbeat(G, &id, None, 1, 5), Ok(()));
    let mut s = sync(&mut gs, &id, 1, &[(&id, "bytes")], 5);
    assert_eq!(ready(&mut s).unwrap().unwrap().assignment, "bytes");
    assert_eq!(state(&gs), GroupState::Stable);
    assert_eq!(gs.heartbeat(G, &id, None, 1, 10), Ok(()));
    assert_eq!(
        gs.heartbeat(G, &id, None, 0, 10),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        gs.heartbeat(G, "nobody", None, 1, 10),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn pending_member_id_lapses_after_session_timeout() {
    let mut gs = groups(0);
    let mut first = join(
        &mut gs,
        JoinRequest {
            require_known_member_id: true,
            ..req("")
        },
        0,
    );
    assert!(matches!(
        ready(&mut first),
        Some(Err(GroupError::MemberIdRequired(_)))
    ));
    assert_eq!(gs.next_deadline(), Some(SESSION as u64));
    gs.tick(SESSION as u64);
    assert_eq!(gs.next_deadline(), None);
}

#[test]
fn concurrent_joins_land_in_one_generation_after_the_initial_delay() {
    let mut gs = groups(100);
    let mut a = join(&mut gs, req(""), 0);
    let mut b = join(&mut gs, req(""), 60);
    gs.tick(120);
    // B extended the delay to 160.
    assert!(ready(&mut a).is_none());
    assert_eq!(state(&gs), GroupState::PreparingRebalance);
    gs.tick(160);
    let ja = ready(&mut a).unwrap().unwrap();
    let jb = ready(&mut b).unwrap().unwrap();
    assert_eq!((ja.generation, jb.generation), (1, 1));
    assert_eq!(ja.leader, jb.leader);
    assert_eq!(state(&gs), GroupState::CompletingRebalance);
}

#[test]
fn a_new_member_makes_the_others_rejoin() {
    let mut gs = groups(0);
    let a = stable_single(&mut gs);
    let (b, mut jb) = join_v4(&mut gs, 100);
    assert_eq!(state(&gs), GroupState::PreparingRebalance);
    assert!(ready(&mut jb).is_none(), "waits for A to rejoin");
    assert_eq!(
        gs.heartbeat(G, &a, None, 1, 110),
        Err(GroupError::RebalanceInProgress)
    );
    // Commits of the old generation still count while preparing.
    let commit = OffsetCommitRequest {
        group_id: G.into(),
        member_id: a.clone(),
        generation: 1,
        offsets: vec![OffsetCommit {
            topic: "t".into(),
            partition: 0,
            offset: 7,
            ..OffsetCommit::default()
        }],
        ..OffsetCommitRequest::default()
    };
    assert_eq!(gs.commit_offsets(commit, 115, 0), Ok(vec![Ok(())]));
    let mut ja = join(&mut gs, req(&a), 120);
    let ja = ready(&mut ja).unwrap().unwrap();
    let jb = ready(&mut jb).unwrap().unwrap();
    assert_eq!(ja.generation, 2);
    assert_eq!(ja.leader, a, "the leader stays the leader");
    assert_eq!(ja.members.len(), 2);
    assert!(jb.members.is_empty());
    let mut sb = sync(&mut gs, &b, 2, &[], 130);
    let mut sa = sync(&mut gs, &a, 2, &[(&a, "p0,p1"), (&b, "p2,p3")], 140);
    assert_eq!(ready(&mut sa).unwrap().unwrap().assignment, "p0,p1");
    assert_eq!(ready(&mut sb).unwrap().unwrap().assignment, "p2,p3");
}

#[test]
fn a_member_timing_out_mid_rebalance_is_dropped_and_the_rest_complete() {
    let mut gs = groups(100);
    let (a, b) = stable_pair(&mut gs);
    // C arrives; A rejoins at once, B never does and stops heartbeating.
    let (c, mut jc) = join_v4(&mut gs, 1_000);
    let mut ja = join(&mut gs, req(&a), 1_100);
    assert!(ready(&mut ja).is_none());
    // B's last sign of life was its sync at 210.
    let expiry = 210 + SESSION as u64;
    assert_eq!(gs.next_deadline(), Some(expiry));
    gs.tick(expiry - 1);
    assert!(ready(&mut ja).is_none());
    gs.tick(expiry);
    let ja = ready(&mut ja).unwrap().unwrap();
    let jc = ready(&mut jc).unwrap().unwrap();
    assert_eq!(ja.generation, 2);
    assert_eq!(jc.generation, 2);
    let leader = if ja.leader == a { &ja } else { &jc };
    let ids: Vec<_> = leader
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    assert!(ids.contains(&a.as_str()) && ids.contains(&c.as_str()));
    assert!(!ids.contains(&b.as_str()));
    assert_eq!(
        gs.heartbeat(G, &b, None, 1, expiry + 1),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn a_member_whose_connection_dropped_while_joining_expires_by_its_session() {
    let mut gs = groups(100);
    let (a, b) = stable_pair(&mut gs);
    let (_c, mut jc) = join_v4(&mut gs, 1_000);
    let mut ja = join(&mut gs, req(&a), 1_100);
    // B rejoins, then its client dies: nobody will read the answer.
    drop(join(&mut gs, req(&b), 1_200));
    let expiry = 1_200 + SESSION as u64;
    assert_eq!(
        gs.next_deadline(),
        Some(expiry),
        "not the rebalance timeout"
    );
    gs.tick(expiry);
    let ja = ready(&mut ja).unwrap().unwrap();
    assert!(ready(&mut jc).unwrap().is_ok());
    assert_eq!(ja.generation, 2);
    assert!(gs.group(G).unwrap().member(&b).is_none());
}

#[test]
fn rebalance_timeout_drops_members_that_keep_heartbeating_but_never_rejoin() {
    let mut gs = groups(100);
    let (a, b) = stable_pair(&mut gs);
    let mut ja = join(
        &mut gs,
        JoinRequest {
            protocols: protocols(&["range", "sticky"]),
            ..req(&a)
        },
        1_000,
    );
    // B heartbeats (and hears REBALANCE_IN_PROGRESS) but does not rejoin.
    let mut t = 1_000;
    while t < 1_000 + REBALANCE as u64 {
        t += 3_000;
        let _ = gs.heartbeat(G, &b, None, 1, t.min(1_000 + REBALANCE as u64 - 1));
        gs.tick(t.min(1_000 + REBALANCE as u64 - 1));
    }
    assert!(ready(&mut ja).is_none());
    gs.tick(1_000 + REBALANCE as u64);
    let ja = ready(&mut ja).unwrap().unwrap();
    assert_eq!(ja.members.len(), 1);
    assert_eq!(ja.generation, 2);
}

#[test]
fn the_leader_leaving_makes_another_member_leader() {
    let mut gs = groups(100);
    let (l, f) = stable_pair(&mut gs);
    let left = gs.leave(
        G,
        &[LeavingMember {
            member_id: l.clone(),
            group_instance_id: None,
        }],
        500,
    );
    assert_eq!(left, Ok(vec![Ok(())]));
    assert_eq!(state(&gs), GroupState::PreparingRebalance);
    assert_eq!(
        gs.heartbeat(G, &f, None, 1, 510),
        Err(GroupError::RebalanceInProgress)
    );
    let mut jf = join(&mut gs, req(&f), 520);
    let jf = ready(&mut jf).unwrap().unwrap();
    assert_eq!(jf.leader, f);
    assert_eq!(jf.generation, 2);
    assert_eq!(jf.members.len(), 1);
}

#[test]
fn the_last_member_leaving_empties_the_group() {
    let mut gs = groups(0);
    let a = stable_single(&mut gs);
    let left = gs.leave(
        G,
        &[LeavingMember {
            member_id: a,
            group_instance_id: None,
        }],
        100,
    );
    assert_eq!(left, Ok(vec![Ok(())]));
    assert_eq!(state(&gs), GroupState::Empty);
    assert_eq!(gs.group(G).unwrap().generation(), 2);
    assert_eq!(gs.delete_group(G), Ok(()));
    assert_eq!(state(&gs), GroupState::Dead);
    assert_eq!(gs.delete_group(G), Err(GroupError::GroupIdNotFound));
}

#[test]
fn a_member_leaving_during_completing_rebalance_sends_waiting_followers_back() {
    let mut gs = groups(0);
    let mut a = join(&mut gs, req(""), 0);
    let mut b = join(&mut gs, req(""), 0);
    let ja = ready(&mut a).unwrap().unwrap();
    // With no initial delay A completed alone; B started generation 2's join.
    assert_eq!(ja.generation, 1);
    let mut a2 = join(&mut gs, req(&ja.member_id), 1);
    let ja2 = ready(&mut a2).unwrap().unwrap();
    let jb = ready(&mut b).unwrap().unwrap();
    assert_eq!((ja2.generation, jb.generation), (2, 2));
    let (leader, follower) = if ja2.leader == ja2.member_id {
        (ja2.member_id.clone(), jb.member_id.clone())
    } else {
        (jb.member_id.clone(), ja2.member_id.clone())
    };
    let mut sf = sync(&mut gs, &follower, 2, &[], 5);
    assert!(ready(&mut sf).is_none());
    let _ = gs.leave(
        G,
        &[LeavingMember {
            member_id: leader,
            group_instance_id: None,
        }],
        6,
    );
    assert_eq!(
        ready(&mut sf).unwrap(),
        Err(GroupError::RebalanceInProgress)
    );
}

#[test]
fn a_leader_that_dies_before_syncing_is_expired() {
    let mut gs = groups(0);
    let mut a = join(&mut gs, req(""), 0);
    let mut b = join(&mut gs, req(""), 0);
    let ja = ready(&mut a).unwrap().unwrap();
    let mut a2 = join(&mut gs, req(&ja.member_id), 1);
    let _ = ready(&mut a2).unwrap().unwrap();
    let jb = ready(&mut b).unwrap().unwrap();
    let (leader, follower) = if jb.leader == jb.member_id {
        (jb.member_id.clone(), ja.member_id.clone())
    } else {
        (ja.member_id.clone(), jb.member_id.clone())
    };
    let mut sf = sync(&mut gs, &follower, 2, &[], 5);
    gs.tick(1 + SESSION as u64);
    assert_eq!(
        ready(&mut sf).unwrap(),
        Err(GroupError::RebalanceInProgress)
    );
    assert!(gs.group(G).unwrap().member(&leader).is_none());
}

#[test]
fn a_leader_that_heartbeats_but_never_syncs_is_removed_after_the_rebalance_timeout() {
    let mut gs = groups(100);
    let mut a = join(&mut gs, req(""), 0);
    let mut b = join(&mut gs, req(""), 0);
    gs.tick(100);
    let ja = ready(&mut a).unwrap().unwrap();
    let jb = ready(&mut b).unwrap().unwrap();
    let (leader, follower) = if ja.leader == ja.member_id {
        (ja.member_id, jb.member_id)
    } else {
        (jb.member_id, ja.member_id)
    };
    let mut sf = sync(&mut gs, &follower, 1, &[], 110);
    let mut t = 100;
    while t < 100 + REBALANCE as u64 - 1_000 {
        t += 1_000;
        assert_eq!(gs.heartbeat(G, &leader, None, 1, t), Ok(()));
        gs.tick(t);
    }
    assert!(ready(&mut sf).is_none());
    assert_eq!(gs.next_deadline(), Some(100 + REBALANCE as u64));
    gs.tick(100 + REBALANCE as u64);
    assert_eq!(
        ready(&mut sf).unwrap(),
        Err(GroupError::RebalanceInProgress)
    );
    assert!(gs.group(G).unwrap().member(&leader).is_none());
    assert_eq!(state(&gs), GroupState::PreparingRebalance);
}

#[test]
fn static_members_skip_member_id_required_and_rejoin_without_a_rebalance() {
    let mut gs = groups(0);
    let static_req = |member: &str| JoinRequest {
        group_instance_id: Some("i-1".into()),
        require_known_member_id: true,
        ..req(member)
    };
    let mut first = join(&mut gs, static_req(""), 0);
    let j1 = ready(&mut first).unwrap().unwrap();
    assert!(j1.member_id.starts_with("i-1-"));
    let (b, mut jb) = join_v4(&mut gs, 10);
    let mut again = join(&mut gs, static_req(&j1.member_id), 20);
    let j1 = ready(&mut again).unwrap().unwrap();
    let jb = ready(&mut jb).unwrap().unwrap();
    assert_eq!(j1.generation, 2);
    let leader = j1.leader.clone();
    let assign = [(j1.member_id.as_str(), "S"), (b.as_str(), "B")];
    if leader == b {
        let mut s1 = sync(&mut gs, &j1.member_id, 2, &[], 30);
        drop(sync(&mut gs, &b, 2, &assign, 30));
        assert_eq!(ready(&mut s1).unwrap().unwrap().assignment, "S");
    } else {
        drop(sync(&mut gs, &b, 2, &[], 30));
        drop(sync(&mut gs, &j1.member_id, 2, &assign, 30));
    }
    assert_eq!(state(&gs), GroupState::Stable);
    if leader != j1.member_id {
        // The static follower restarts: a new member id, same generation, no rebalance.
        let mut back = join(&mut gs, static_req(""), 40);
        let back = ready(&mut back).unwrap().unwrap();
        assert_ne!(back.member_id, j1.member_id);
        assert_eq!(back.generation, 2);
        assert_eq!(state(&gs), GroupState::Stable);
        let mut s = sync(&mut gs, &back.member_id, 2, &[], 50);
        assert_eq!(ready(&mut s).unwrap().unwrap().assignment, "S");
        assert_eq!(
            gs.heartbeat(G, &j1.member_id, Some("i-1"), 2, 60),
            Err(GroupError::FencedInstanceId)
        );
        assert_eq!(gs.heartbeat(G, &back.member_id, Some("i-1"), 2, 60), Ok(()));
    }
    let _ = jb;
    // Static leave by instance id with no member id (LeaveGroup v3+).
    let left = gs.leave(
        G,
        &[LeavingMember {
            member_id: String::new(),
            group_instance_id: Some("i-1".into()),
        }],
        70,
    );
    assert_eq!(left, Ok(vec![Ok(())]));
    assert_eq!(state(&gs), GroupState::PreparingRebalance);
}

#[test]
fn protocols_must_overlap_and_the_most_voted_common_one_wins() {
    let mut gs = groups(50);
    let mut a = join(
        &mut gs,
        JoinRequest {
            protocols: protocols(&["sticky", "range"]),
            ..req("")
        },
        0,
    );
    let mut b = join(
        &mut gs,
        JoinRequest {
            protocols: protocols(&["range", "sticky"]),
            ..req("")
        },
        0,
    );
    let mut c = join(
        &mut gs,
        JoinRequest {
            protocols: protocols(&["range"]),
            ..req("")
        },
        0,
    );
    let mut bad = join(
        &mut gs,
        JoinRequest {
            protocols: protocols(&["roundrobin"]),
            ..req("")
        },
        0,
    );
    let mut other_type = join(
        &mut gs,
        JoinRequest {
            protocol_type: "connect".into(),
            ..req("")
        },
        0,
    );
    assert_eq!(
        ready(&mut bad).unwrap(),
        Err(GroupError::InconsistentGroupProtocol)
    );
    assert_eq!(
        ready(&mut other_type).unwrap(),
        Err(GroupError::InconsistentGroupProtocol)
    );
    gs.tick(50);
    for rx in [&mut a, &mut b, &mut c] {
        assert_eq!(
            ready(rx).unwrap().unwrap().protocol_name.as_deref(),
            Some("range")
        );
    }
}

#[test]
fn join_validation_errors() {
    let mut gs = groups(0);
    let mut unknown = join(&mut gs, req("ghost"), 0);
    assert_eq!(
        ready(&mut unknown).unwrap(),
        Err(GroupError::UnknownMemberId)
    );
    let mut short = join(
        &mut gs,
        JoinRequest {
            session_timeout_ms: 10,
            ..req("")
        },
        0,
    );
    assert_eq!(
        ready(&mut short).unwrap(),
        Err(GroupError::InvalidSessionTimeout(10))
    );
    let mut no_group = join(
        &mut gs,
        JoinRequest {
            group_id: String::new(),
            ..req("")
        },
        0,
    );
    assert_eq!(
        ready(&mut no_group).unwrap(),
        Err(GroupError::InvalidGroupId)
    );
    let a = stable_single(&mut gs);
    let mut s = sync(&mut gs, &a, 7, &[], 10);
    assert_eq!(ready(&mut s).unwrap(), Err(GroupError::IllegalGeneration));
}

#[test]
fn a_follower_rejoining_stable_unchanged_keeps_its_generation() {
    let mut gs = groups(100);
    let (_l, f) = stable_pair(&mut gs);
    let mut again = join(&mut gs, req(&f), 300);
    let again = ready(&mut again).unwrap().unwrap();
    assert_eq!(again.generation, 1);
    assert_eq!(state(&gs), GroupState::Stable);
}

#[test]
fn offset_commit_checks_member_and_generation() {
    let mut gs = groups(0);
    let commit = |member: &str, generation: i32, offset: i64| OffsetCommitRequest {
        group_id: G.into(),
        member_id: member.into(),
        generation,
        offsets: vec![OffsetCommit {
            topic: "t".into(),
            partition: 1,
            offset,
            leader_epoch: -1,
            metadata: Some("meta".into()),
        }],
        ..OffsetCommitRequest::default()
    };
    // Unknown group: only a client without group management may commit.
    assert_eq!(
        gs.commit_offsets(commit("m", 3, 1), 0, 0),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(gs.commit_offsets(commit("", -1, 5), 0, 0), Ok(vec![Ok(())]));
    assert_eq!(state(&gs), GroupState::Empty);
    let got = gs.fetch_offsets(G, Some(&[("t".into(), 1), ("t".into(), 2)]));
    assert_eq!(got[0].1.as_ref().unwrap().offset, 5);
    assert_eq!(got[0].1.as_ref().unwrap().metadata, "meta");
    assert!(got[1].1.is_none());
    assert!(gs.fetch_offsets("other", None).is_empty());

    let (id, mut rx) = join_v4(&mut gs, 10);
    let j = ready(&mut rx).unwrap().unwrap();
    assert_eq!(
        gs.commit_offsets(commit(&id, j.generation, 6), 11, 0),
        Err(GroupError::RebalanceInProgress)
    );
    drop(sync(&mut gs, &id, j.generation, &[], 12));
    assert_eq!(
        gs.commit_offsets(commit(&id, j.generation, 6), 13, 0),
        Ok(vec![Ok(())])
    );
    assert_eq!(
        gs.commit_offsets(commit(&id, j.generation - 1, 7), 14, 0),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        gs.commit_offsets(commit("", -1, 7), 14, 0),
        Err(GroupError::UnknownMemberId)
    );
    let mut big = commit(&id, j.generation, 8);
    big.offsets[0].metadata = Some("x".repeat(5000));
    assert_eq!(
        gs.commit_offsets(big, 15, 0),
        Ok(vec![Err(GroupError::OffsetMetadataTooLarge(5000))])
    );
    assert_eq!(gs.fetch_offsets(G, None)[0].1.as_ref().unwrap().offset, 6);
    assert_eq!(gs.delete_group(G), Err(GroupError::NonEmptyGroup));
}

#[test]
fn offset_delete_keeps_subscribed_topics_of_a_live_group() {
    let mut gs = groups(0);
    let mut r = req("");
    r.protocols = vec![Protocol {
        name: "range".into(),
        metadata: Bytes::from_static(b"subscription"),
        topics: vec!["t".into()],
    }];
    let mut rx = join(&mut gs, r, 0);
    let j = ready(&mut rx).unwrap().unwrap();
    drop(sync(&mut gs, &j.member_id, 1, &[], 1));
    let commit = OffsetCommitRequest {
        group_id: G.into(),
        member_id: j.member_id.clone(),
        generation: 1,
        offsets: vec![
            OffsetCommit {
                topic: "t".into(),
                partition: 0,
                offset: 1,
                ..OffsetCommit::default()
            },
            OffsetCommit {
                topic: "u".into(),
                partition: 0,
                offset: 2,
                ..OffsetCommit::default()
            },
        ],
        ..OffsetCommitRequest::default()
    };
    assert!(gs.commit_offsets(commit, 2, 0).is_ok());
    let res = gs.delete_offsets(G, &[("t".into(), 0), ("u".into(), 0)]);
    assert_eq!(
        res,
        Ok(vec![Err(GroupError::GroupSubscribedToTopic), Ok(())])
    );
    assert_eq!(gs.fetch_offsets(G, None).len(), 1);
    assert_eq!(
        gs.delete_offsets("nope", &[]),
        Err(GroupError::GroupIdNotFound)
    );
}

#[test]
fn list_and_describe() {
    let mut gs = groups(100);
    let (l, _f) = stable_pair(&mut gs);
    let listed = gs.list_groups();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, GroupState::Stable);
    assert_eq!(listed[0].protocol_type, "consumer");
    let d = gs.describe_group(G);
    assert_eq!(d.protocol_name, "range");
    assert_eq!(d.members.len(), 2);
    let ld = d.members.iter().find(|m| m.member_id == l).unwrap();
    assert_eq!(ld.assignment, "L");
    assert_eq!(gs.describe_group("nope").state, GroupState::Dead);
}

#[test]
fn state_survives_a_replay_of_the_outbox_through_record_batches() {
    use nagare_log::batch::{build_batch, decode_records};
    let mut gs = groups(0);
    let a = stable_single(&mut gs);
    let commit = OffsetCommitRequest {
        group_id: G.into(),
        member_id: a.clone(),
        generation: 1,
        offsets: vec![
            OffsetCommit {
                topic: "t".into(),
                partition: 0,
                offset: 400,
                leader_epoch: 3,
                metadata: Some("m".into()),
            },
            OffsetCommit {
                topic: "t".into(),
                partition: 1,
                offset: 9,
                ..OffsetCommit::default()
            },
        ],
        ..OffsetCommitRequest::default()
    };
    assert!(gs.commit_offsets(commit, 1, 1_700_000_000_000).is_ok());
    let _ = gs.delete_offsets(G, &[]);
    let mut simple = OffsetCommitRequest {
        group_id: "gone".into(),
        generation: -1,
        ..OffsetCommitRequest::default()
    };
    simple.offsets.push(OffsetCommit {
        topic: "t".into(),
        partition: 0,
        offset: 1,
        ..OffsetCommit::default()
    });
    assert!(gs.commit_offsets(simple, 2, 0).is_ok());
    assert_eq!(gs.delete_group("gone"), Ok(()));
    let ops = gs.drain_outbox();
    assert!(gs.drain_outbox().is_empty());
    let records: Vec<_> = ops.iter().map(|op| op.to_record(0)).collect();
    let batch = build_batch(&records);
    let mut replayed = groups(0);
    for r in decode_records(&batch).unwrap() {
        replayed.apply(PersistOp::from_record(&r).unwrap());
    }
    assert!(replayed.group("gone").is_none());
    let g = replayed.group(G).unwrap();
    assert_eq!(g.state(), GroupState::Empty);
    assert_eq!(g.generation(), 1);
    assert_eq!(g.offsets(), gs.group(G).unwrap().offsets());
    assert_eq!(g.offsets()[&("t".to_string(), 0)].metadata, "m");
}

/// Opens a coordinator and runs its background task on the test's runtime.
fn open_coordinator(
    broker: &crate::Broker,
    config: GroupConfig,
) -> std::sync::Arc<GroupCoordinator> {
    let (c, background) = GroupCoordinator::open(broker, config).unwrap();
    tokio::spawn(background.run());
    c
}

#[tokio::test]
async fn the_coordinator_stores_offsets_in_the_internal_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..crate::BrokerConfig::default()
    };
    let group_config = GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    };
    {
        let broker = crate::Broker::open(config.clone()).unwrap();
        let c = open_coordinator(&broker, group_config.clone());
        let j = c.join(req("")).await.unwrap();
        let s = c
            .sync(SyncRequest {
                group_id: G.into(),
                member_id: j.member_id.clone(),
                generation: j.generation,
                assignments: vec![(j.member_id.clone(), Bytes::from_static(b"x"))],
                ..SyncRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(s.assignment, "x");
        let res = c
            .commit_offsets(OffsetCommitRequest {
                group_id: G.into(),
                member_id: j.member_id.clone(),
                generation: j.generation,
                offsets: vec![OffsetCommit {
                    topic: "t".into(),
                    partition: 2,
                    offset: 400,
                    leader_epoch: -1,
                    metadata: Some("kept".into()),
                }],
                ..OffsetCommitRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(res, vec![Ok(())]);
        broker.shutdown().unwrap();
    }
    let broker = crate::Broker::open(config).unwrap();
    let c = open_coordinator(&broker, group_config);
    let got = c.fetch_offsets(G, Some(&[("t".into(), 2)]));
    let o = got[0].1.clone().unwrap();
    assert_eq!((o.offset, o.metadata.as_str()), (400, "kept"));
    assert_eq!(c.describe_group(G).state, GroupState::Empty);
    // The old member is gone after the restart; its generation is remembered.
    assert_eq!(
        c.heartbeat(G, "whoever", None, 1),
        Err(GroupError::UnknownMemberId)
    );
}

/// The driver's timer completes parked joins at the end of the initial delay and
/// expires a silent member, with real (short) times.
#[tokio::test]
async fn the_driver_completes_waiting_joins_and_expires_silent_members() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::Broker::open(crate::BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..crate::BrokerConfig::default()
    })
    .unwrap();
    let c = open_coordinator(
        &broker,
        GroupConfig {
            initial_rebalance_delay_ms: 100,
            min_session_timeout_ms: 100,
            ..GroupConfig::default()
        },
    );
    let short = |member: &str| JoinRequest {
        session_timeout_ms: 300,
        rebalance_timeout_ms: 5_000,
        ..req(member)
    };
    let started = std::time::Instant::now();
    let (a, b) = tokio::join!(c.join(short("")), c.join(short("")));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(started.elapsed() >= std::time::Duration::from_millis(90));
    assert_eq!((a.generation, b.generation), (1, 1));
    assert_eq!(a.leader, b.leader);
    let sync = |m: &JoinResponse| SyncRequest {
        group_id: G.into(),
        member_id: m.member_id.clone(),
        generation: 1,
        assignments: m
            .members
            .iter()
            .map(|x| (x.member_id.clone(), Bytes::from_static(b"p")))
            .collect(),
        ..SyncRequest::default()
    };
    let (sa, sb) = tokio::join!(c.sync(sync(&a)), c.sync(sync(&b)));
    assert_eq!(sa.unwrap().assignment, "p");
    assert_eq!(sb.unwrap().assignment, "p");
    assert_eq!(c.describe_group(G).state, GroupState::Stable);
    // Nobody heartbeats: both sessions (300 ms) run out and the group empties.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while c.describe_group(G).state != GroupState::Empty {
        assert!(
            std::time::Instant::now() < deadline,
            "members never expired"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        c.heartbeat(G, &a.member_id, None, 1),
        Err(GroupError::UnknownMemberId)
    );
}

/// Many superseded commits are cleaned away on the next start; the state stays.
#[tokio::test]
async fn the_group_log_is_cleaned_on_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..crate::BrokerConfig::default()
    };
    let commit = |offset: i64| OffsetCommitRequest {
        group_id: G.into(),
        generation: -1,
        offsets: (0..3)
            .map(|partition| OffsetCommit {
                topic: "t".into(),
                partition,
                offset,
                ..OffsetCommit::default()
            })
            .collect(),
        ..OffsetCommitRequest::default()
    };
    {
        let broker = crate::Broker::open(config.clone()).unwrap();
        let c = open_coordinator(&broker, GroupConfig::default());
        for i in 0..500 {
            c.commit_offsets(commit(i)).await.unwrap();
        }
        broker.shutdown().unwrap();
    }
    for _ in 0..2 {
        let broker = crate::Broker::open(config.clone()).unwrap();
        let c = open_coordinator(&broker, GroupConfig::default());
        // The compaction runs first on the writer task; a commit queues behind it.
        c.commit_offsets(commit(499)).await.unwrap();
        let left = test_support::records(&broker, super::coordinator::OFFSETS_LOG).len();
        assert!(left <= 10, "log holds {left} records");
        let got = c.fetch_offsets(G, None);
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|(_, o)| o.as_ref().unwrap().offset == 499));
        broker.shutdown().unwrap();
    }
}

/// A deleted group leaves only tombstones, which the cleaner drops: a restart after a
/// clean knows nothing of it, and the other group keeps its offsets.
#[tokio::test]
async fn a_deleted_group_is_gone_after_a_clean_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..crate::BrokerConfig::default()
    };
    let commit = |group: &str, offset: i64| OffsetCommitRequest {
        group_id: group.into(),
        generation: -1,
        offsets: (0..3)
            .map(|partition| OffsetCommit {
                topic: "t".into(),
                partition,
                offset,
                ..OffsetCommit::default()
            })
            .collect(),
        ..OffsetCommitRequest::default()
    };
    {
        let broker = crate::Broker::open(config.clone()).unwrap();
        let c = open_coordinator(&broker, GroupConfig::default());
        c.commit_offsets(commit("gone", 5)).await.unwrap();
        c.commit_offsets(commit(G, 7)).await.unwrap();
        assert_eq!(c.delete_groups(&["gone".to_string()]).await, vec![Ok(())]);
        broker.shutdown().unwrap();
    }
    for round in 0..2 {
        let broker = crate::Broker::open(config.clone()).unwrap();
        test_support::clean_now(&broker, super::coordinator::OFFSETS_LOG);
        let c = open_coordinator(&broker, GroupConfig::default());
        assert!(c
            .fetch_offsets("gone", None)
            .iter()
            .all(|(_, o)| o.is_none()));
        assert!(c.list_groups().iter().all(|g| g.group_id != "gone"));
        let got = c.fetch_offsets(G, None);
        assert_eq!(got.len(), 3);
        assert!(got
            .iter()
            .all(|(_, o)| o.as_ref().unwrap().offset == 7 + round));
        if round == 1 {
            // The clean after the one that reached the tombstones dropped them.
            let left = test_support::records(&broker, super::coordinator::OFFSETS_LOG);
            assert_eq!(left.len(), 3, "G's offsets only");
            assert!(left.iter().all(|r| r.value.is_some()));
        }
        // Something new to clean next time.
        c.commit_offsets(commit(G, 8)).await.unwrap();
        broker.shutdown().unwrap();
    }
}

/// A log where a group's tombstone dropped offsets without their own tombstones (which
/// the cleaner would bring back) is rewritten once on open.
#[tokio::test]
async fn a_group_tombstone_that_dropped_offsets_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..crate::BrokerConfig::default()
    };
    let offset = |group: &str, offset: i64| PersistOp::Offset {
        group: group.into(),
        topic: "t".into(),
        partition: 0,
        value: Some(CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 0,
        }),
    };
    {
        let broker = crate::Broker::open(config.clone()).unwrap();
        let old = vec![
            offset("gone", 3).to_record(0),
            offset(G, 4).to_record(0),
            PersistOp::GroupDeleted {
                group: "gone".into(),
            }
            .to_record(0),
        ];
        test_support::append_raw(&broker, super::coordinator::OFFSETS_LOG, old);
        broker.shutdown().unwrap();
    }
    {
        let broker = crate::Broker::open(config.clone()).unwrap();
        let c = open_coordinator(&broker, GroupConfig::default());
        // The migration runs first on the writer task; a commit queues behind it.
        c.commit_offsets(OffsetCommitRequest {
            group_id: "other".into(),
            generation: -1,
            offsets: vec![OffsetCommit {
                topic: "t".into(),
                partition: 0,
                offset: 1,
                ..OffsetCommit::default()
            }],
            ..OffsetCommitRequest::default()
        })
        .await
        .unwrap();
        let log = broker
            .internal_log(super::coordinator::OFFSETS_LOG)
            .unwrap();
        assert_eq!(log.log_start_offset(), 3, "the old records are dropped");
        test_support::clean_now(&broker, super::coordinator::OFFSETS_LOG);
        broker.shutdown().unwrap();
    }
    let broker = crate::Broker::open(config).unwrap();
    let c = open_coordinator(&broker, GroupConfig::default());
    assert!(c
        .fetch_offsets("gone", None)
        .iter()
        .all(|(_, o)| o.is_none()));
    assert_eq!(c.fetch_offsets(G, None)[0].1.as_ref().unwrap().offset, 4);
}
