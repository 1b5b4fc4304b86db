//! The group APIs at every version they accept, through the handlers: each response must
//! encode at that version (no field set that the version lacks) and decode back.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::*;

use super::str_bytes;
use super::test_support::{self, call_anonymous as call};
use crate::KafkaState;

fn state(dir: &std::path::Path) -> Arc<KafkaState> {
    test_support::state_with(dir, Default::default(), &["t"])
}

fn group(s: &str) -> GroupId {
    GroupId(str_bytes(s))
}

fn topic(s: &str) -> TopicName {
    TopicName(str_bytes(s))
}

fn join_request(g: &str, member: StrBytesAlias) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group(g))
        .with_member_id(member)
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(str_bytes("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(str_bytes("range"))
        .with_metadata(Bytes::from_static(b"\0\0\0\0\0\0"))])
}

type StrBytesAlias = kafka_protocol::protocol::StrBytes;

#[tokio::test]
async fn group_apis_answer_every_accepted_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = state(dir.path());
    for v in 0..=6 {
        let r: FindCoordinatorResponse = call(
            &s,
            ApiKey::FindCoordinator,
            v,
            &FindCoordinatorRequest::default()
                .with_key(if v < 4 { str_bytes("g") } else { str_bytes("") })
                .with_coordinator_keys(if v >= 4 { vec![str_bytes("g")] } else { vec![] }),
        )
        .await;
        let port = if v >= 4 {
            r.coordinators[0].port
        } else {
            r.port
        };
        assert_eq!(port, 9092, "v{v}");
    }
    for v in 0..=9i16 {
        let g = format!("g{v}");
        let mut j: JoinGroupResponse =
            call(&s, ApiKey::JoinGroup, v, &join_request(&g, str_bytes(""))).await;
        if v >= 4 {
            assert_eq!(j.error_code, 79, "v{v}: MEMBER_ID_REQUIRED first");
            j = call(&s, ApiKey::JoinGroup, v, &join_request(&g, j.member_id)).await;
        }
        assert_eq!(j.error_code, 0, "JoinGroup v{v}");
        assert_eq!(j.leader, j.member_id);
        assert_eq!(j.members.len(), 1);
        let sv = v.min(5);
        let sync: SyncGroupResponse = call(
            &s,
            ApiKey::SyncGroup,
            sv,
            &SyncGroupRequest::default()
                .with_group_id(group(&g))
                .with_generation_id(j.generation_id)
                .with_member_id(j.member_id.clone())
                .with_assignments(vec![
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(j.member_id.clone())
                        .with_assignment(Bytes::from_static(b"assigned")),
                ]),
        )
        .await;
        assert_eq!(
            (sync.error_code, &sync.assignment[..]),
            (0, &b"assigned"[..])
        );
        let hv = v.min(4);
        let hb: HeartbeatResponse = call(
            &s,
            ApiKey::Heartbeat,
            hv,
            &HeartbeatRequest::default()
                .with_group_id(group(&g))
                .with_generation_id(j.generation_id)
                .with_member_id(j.member_id.clone()),
        )
        .await;
        assert_eq!(hb.error_code, 0);
        let lv = v.min(5);
        let leave = if lv >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(group(&g))
                .with_members(vec![leave_group_request::MemberIdentity::default()
                    .with_member_id(j.member_id.clone())])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(group(&g))
                .with_member_id(j.member_id.clone())
        };
        let l: LeaveGroupResponse = call(&s, ApiKey::LeaveGroup, lv, &leave).await;
        assert_eq!(l.error_code, 0);
        if lv >= 3 {
            assert_eq!(l.members[0].error_code, 0);
        }
    }
    for v in 2..=9 {
        let r: OffsetCommitResponse = call(
            &s,
            ApiKey::OffsetCommit,
            v,
            &OffsetCommitRequest::default()
                .with_group_id(group("simple"))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic("t"))
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(40 + v as i64)
                                .with_committed_metadata(Some(str_bytes("m"))),
                        ]),
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic("missing"))
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default(),
                        ]),
                ]),
        )
        .await;
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
        assert_eq!(r.topics[1].partitions[0].error_code, 3);
    }
    for v in 1..=9 {
        let r: OffsetFetchResponse = if v >= 8 {
            call(
                &s,
                ApiKey::OffsetFetch,
                v,
                &OffsetFetchRequest::default().with_groups(vec![
                    offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(group("simple"))
                        .with_topics(Some(vec![
                            offset_fetch_request::OffsetFetchRequestTopics::default()
                                .with_name(topic("t"))
                                .with_partition_indexes(vec![0, 1]),
                        ])),
                    offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(group("simple"))
                        .with_topics(None),
                ]),
            )
            .await
        } else {
            call(
                &s,
                ApiKey::OffsetFetch,
                v,
                &OffsetFetchRequest::default()
                    .with_group_id(group("simple"))
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopic::default()
                            .with_name(topic("t"))
                            .with_partition_indexes(vec![0, 1]),
                    ])),
            )
            .await
        };
        // v8+ answers per group, older versions for the one group asked.
        let meta = |m: &Option<StrBytesAlias>| m.as_deref().unwrap_or("").to_string();
        let (offsets, metadata): (Vec<i64>, Vec<String>) = if v >= 8 {
            assert_eq!(r.groups[1].topics[0].partitions.len(), 1);
            let partitions = &r.groups[0].topics[0].partitions;
            partitions
                .iter()
                .map(|p| (p.committed_offset, meta(&p.metadata)))
                .unzip()
        } else {
            let partitions = &r.topics[0].partitions;
            partitions
                .iter()
                .map(|p| (p.committed_offset, meta(&p.metadata)))
                .unzip()
        };
        assert_eq!(offsets, vec![49, -1], "v{v}");
        assert_eq!(metadata[0], "m");
    }
    for v in 0..=5 {
        let r: ListGroupsResponse =
            call(&s, ApiKey::ListGroups, v, &ListGroupsRequest::default()).await;
        assert!(r.groups.iter().any(|g| &*g.group_id.0 == "simple"));
        let r: DescribeGroupsResponse = call(
            &s,
            ApiKey::DescribeGroups,
            v,
            &DescribeGroupsRequest::default().with_groups(vec![group("g9"), group("nope")]),
        )
        .await;
        assert_eq!(&*r.groups[0].group_state, "Empty");
        assert_eq!(&*r.groups[1].group_state, "Dead");
    }
    let r: OffsetDeleteResponse = call(
        &s,
        ApiKey::OffsetDelete,
        0,
        &OffsetDeleteRequest::default()
            .with_group_id(group("simple"))
            .with_topics(vec![
                offset_delete_request::OffsetDeleteRequestTopic::default()
                    .with_name(topic("t"))
                    .with_partitions(vec![
                        offset_delete_request::OffsetDeleteRequestPartition::default(),
                    ]),
            ]),
    )
    .await;
    assert_eq!((r.error_code, r.topics[0].partitions[0].error_code), (0, 0));
    for v in 0..=2 {
        let r: DeleteGroupsResponse = call(
            &s,
            ApiKey::DeleteGroups,
            v,
            &DeleteGroupsRequest::default()
                .with_groups_names(vec![group(&format!("g{v}")), group("nope")]),
        )
        .await;
        assert_eq!(r.results[0].error_code, 0);
        assert_eq!(r.results[1].error_code, 69);
    }
}
