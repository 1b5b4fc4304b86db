//! Authorization in the handlers, on a broker that demands authentication (so no ACL
//! means no access): the ACL APIs themselves, then each kind of check with the Kafka
//! error code a client sees, and decisions following ACL changes on a live connection.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use nagare_core::log::batch::{build_batch, NewRecord};
use nagare_core::security::SecurityConfig;

use super::str_bytes;
use super::test_support::{self, call, user};
use crate::session::Session;
use crate::KafkaState;

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const INVALID_REQUEST: i16 = 42;

fn state(dir: &std::path::Path) -> Arc<KafkaState> {
    let security = SecurityConfig {
        auth_required: true,
        super_users: vec!["admin".into()],
        allow_if_no_acl: None,
    };
    test_support::state_with(dir, security, &["open", "secret"])
}

/// One ACL creation: (resource type, name, pattern, principal, operation, permission).
fn creation(
    rt: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    op: i8,
    perm: i8,
) -> create_acls_request::AclCreation {
    create_acls_request::AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(str_bytes(name))
        .with_resource_pattern_type(pattern)
        .with_principal(str_bytes(principal))
        .with_host(str_bytes("*"))
        .with_operation(op)
        .with_permission_type(perm)
}

async fn create_acls(
    state: &Arc<KafkaState>,
    session: &Arc<Session>,
    creations: Vec<create_acls_request::AclCreation>,
) -> Vec<i16> {
    let r: CreateAclsResponse = call(
        state,
        session,
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(creations),
    )
    .await;
    r.results.iter().map(|r| r.error_code).collect()
}

/// One DeleteAcls filter on any principal and host: (resource type, name, pattern,
/// operation, permission).
fn delete_filter(
    rt: i8,
    name: &str,
    pattern: i8,
    op: i8,
    perm: i8,
) -> delete_acls_request::DeleteAclsFilter {
    delete_acls_request::DeleteAclsFilter::default()
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(rt)
        .with_resource_name_filter(Some(str_bytes(name)))
        .with_pattern_type_filter(pattern)
        .with_operation(op)
        .with_permission_type(perm)
}

fn any_filter() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1)
}

#[tokio::test]
async fn acl_apis_create_describe_delete() {
    let dir = tempfile::tempdir().unwrap();
    let s = state(dir.path());
    let admin = user(&s, "admin");
    let alice = user(&s, "alice");
    // Alice may not manage ACLs: CLUSTER_AUTHORIZATION_FAILED per creation / filter.
    assert_eq!(
        create_acls(&s, &alice, vec![creation(2, "t", 3, "User:alice", 3, 3)]).await,
        [CLUSTER_AUTHORIZATION_FAILED]
    );
    let d: DescribeAclsResponse = call(&s, &alice, ApiKey::DescribeAcls, 3, &any_filter()).await;
    assert_eq!(d.error_code, CLUSTER_AUTHORIZATION_FAILED);
    // The admin (a super user) adds two on one resource and one elsewhere; the invalid
    // ones are refused one by one, each with a message.
    for v in 1..=3 {
        let r: CreateAclsResponse = call(
            &s,
            &admin,
            ApiKey::CreateAcls,
            v,
            &CreateAclsRequest::default().with_creations(vec![
                creation(2, "orders", 3, "User:alice", 3, 3),
                creation(2, "orders", 3, "User:alice", 4, 2),
                creation(3, "grp", 4, "User:*", 2, 3),
                creation(1, "orders", 3, "User:alice", 3, 3), // ANY resource type
                creation(2, "orders", 2, "User:alice", 3, 3), // MATCH pattern
                creation(2, "orders", 3, "alice", 3, 3),      // no principal type
                creation(4, "other", 3, "User:alice", 7, 3),  // cluster not kafka-cluster
                creation(2, "", 3, "User:alice", 3, 3),       // empty name
            ]),
        )
        .await;
        let codes: Vec<i16> = r.results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, [0, 0, 0, 42, 42, 42, 42, 42], "v{v}");
        assert!(r.results[3..].iter().all(|r| r.error_message.is_some()));
    }
    for v in 1..=3 {
        let d: DescribeAclsResponse =
            call(&s, &admin, ApiKey::DescribeAcls, v, &any_filter()).await;
        assert_eq!(d.error_code, 0);
        let mut seen: Vec<(i8, String, i8, usize)> = d
            .resources
            .iter()
            .map(|r| {
                (
                    r.resource_type,
                    r.resource_name.to_string(),
                    r.pattern_type,
                    r.acls.len(),
                )
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                (2, "orders".to_string(), 3, 2),
                (3, "grp".to_string(), 4, 1)
            ],
            "v{v}"
        );
    }
    // MATCH finds the prefixed group ACL for a group named under it.
    let d: DescribeAclsResponse = call(
        &s,
        &admin,
        ApiKey::DescribeAcls,
        2,
        &any_filter()
            .with_resource_type_filter(3)
            .with_resource_name_filter(Some(str_bytes("grp-1")))
            .with_pattern_type_filter(2),
    )
    .await;
    assert_eq!(d.resources.len(), 1);
    assert_eq!(d.resources[0].acls[0].operation, 2);
    // An unknown filter code is INVALID_REQUEST.
    let d: DescribeAclsResponse = call(
        &s,
        &admin,
        ApiKey::DescribeAcls,
        2,
        &any_filter().with_operation(0),
    )
    .await;
    assert_eq!(d.error_code, INVALID_REQUEST);
    // Delete: the DENY only, then a filter that matches nothing, then an invalid one.
    let r: DeleteAclsResponse = call(
        &s,
        &admin,
        ApiKey::DeleteAcls,
        3,
        &DeleteAclsRequest::default().with_filters(vec![
            delete_filter(2, "orders", 3, 1, 2),
            delete_filter(6, "", 1, 1, 1),
            delete_filter(2, "", 0, 1, 1), // UNKNOWN pattern type
        ]),
    )
    .await;
    let f = &r.filter_results;
    assert_eq!(
        (f[0].error_code, f[1].error_code, f[2].error_code),
        (0, 0, INVALID_REQUEST)
    );
    assert_eq!(f[0].matching_acls.len(), 1);
    assert_eq!(f[0].matching_acls[0].permission_type, 2);
    assert_eq!(f[0].matching_acls[0].operation, 4);
    assert!(f[1].matching_acls.is_empty());
    let left = s
        .security
        .authorizer
        .describe(&nagare_core::security::AclFilter::any());
    assert_eq!(left.len(), 2);
    // Alice may not delete.
    let r: DeleteAclsResponse = call(
        &s,
        &alice,
        ApiKey::DeleteAcls,
        1,
        &DeleteAclsRequest::default().with_filters(vec![delete_filter(1, "", 1, 1, 1)]),
    )
    .await;
    assert_eq!(r.filter_results[0].error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(
        s.security
            .authorizer
            .describe(&nagare_core::security::AclFilter::any())
            .len(),
        2
    );
}

fn produce_request(topic: &str) -> ProduceRequest {
    let records = build_batch(&[NewRecord {
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: vec![],
        timestamp: 1,
    }])
    .freeze();
    ProduceRequest::default().with_acks(1).with_topic_data(vec![
        produce_request::TopicProduceData::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partition_data(vec![produce_request::PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))]),
    ])
}

async fn produce(s: &Arc<KafkaState>, session: &Arc<Session>, topic: &str) -> i16 {
    let r: ProduceResponse = call(s, session, ApiKey::Produce, 9, &produce_request(topic)).await;
    r.responses[0].partition_responses[0].error_code
}

async fn fetch(s: &Arc<KafkaState>, session: &Arc<Session>, topic: &str, version: i16) -> i16 {
    let id = s.broker.topic(topic).map(|t| t.id()).unwrap_or_default();
    let r: FetchResponse = call(
        s,
        session,
        ApiKey::Fetch,
        version,
        &FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(str_bytes(if version < 13 { topic } else { "" })))
                .with_topic_id(if version >= 13 { id } else { uuid::Uuid::nil() })
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_partition_max_bytes(1 << 20)])]),
    )
    .await;
    r.responses[0].partitions[0].error_code
}

async fn metadata(
    s: &Arc<KafkaState>,
    session: &Arc<Session>,
    topics: Option<&[&str]>,
) -> MetadataResponse {
    call(
        s,
        session,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default()
            .with_allow_auto_topic_creation(true)
            .with_include_topic_authorized_operations(true)
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| {
                        metadata_request::MetadataRequestTopic::default()
                            .with_name(Some(TopicName(str_bytes(*t))))
                    })
                    .collect()
            })),
    )
    .await
}

#[tokio::test]
async fn topic_checks_follow_acl_changes_on_a_live_connection() {
    let dir = tempfile::tempdir().unwrap();
    let s = state(dir.path());
    let admin = user(&s, "admin");
    let alice = user(&s, "alice");
    // Nothing granted: every topic API refuses with TOPIC_AUTHORIZATION_FAILED.
    assert_eq!(
        produce(&s, &alice, "open").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        fetch(&s, &alice, "open", 12).await,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        fetch(&s, &alice, "open", 13).await,
        TOPIC_AUTHORIZATION_FAILED
    );
    // An unknown topic id is UNKNOWN_TOPIC_ID whoever asks.
    assert_eq!(fetch(&s, &alice, "nonexistent", 13).await, 100);
    let m = metadata(&s, &alice, None).await;
    assert!(m.topics.is_empty(), "{:?}", m.topics);
    let m = metadata(&s, &alice, Some(&["open", "brand-new"])).await;
    assert!(m
        .topics
        .iter()
        .all(|t| t.error_code == TOPIC_AUTHORIZATION_FAILED));
    assert!(s.broker.topic("brand-new").is_none(), "not auto-created");
    // Admin grants alice Read and Write on topics starting with "op" (one prefixed ACL
    // each), on alice's open connection: her cache must forget its refusals.
    let acls = vec![
        creation(2, "op", 4, "User:alice", 4, 3),
        creation(2, "op", 4, "User:alice", 3, 3),
    ];
    assert_eq!(create_acls(&s, &admin, acls).await, [0, 0]);
    assert_eq!(produce(&s, &alice, "open").await, 0);
    assert_eq!(fetch(&s, &alice, "open", 12).await, 0);
    assert_eq!(fetch(&s, &alice, "open", 13).await, 0);
    assert_eq!(
        produce(&s, &alice, "secret").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    // Metadata lists only "open" (Describe implied by Read/Write), with her operations:
    // Read (3), Write (4), Describe (8).
    let m = metadata(&s, &alice, None).await;
    let names: Vec<String> = m
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().to_string())
        .collect();
    assert_eq!(names, ["open"]);
    assert_eq!(
        m.topics[0].topic_authorized_operations,
        (1 << 3) | (1 << 4) | (1 << 8)
    );
    // Auto-creating "opera" needs Create, which she lacks.
    let m = metadata(&s, &alice, Some(&["opera"])).await;
    assert_eq!(m.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(s.broker.topic("opera").is_none());
    // A DENY beats the ALLOW.
    assert_eq!(
        create_acls(&s, &admin, vec![creation(2, "open", 3, "User:alice", 4, 2)]).await,
        [0]
    );
    assert_eq!(
        produce(&s, &alice, "open").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(fetch(&s, &alice, "open", 12).await, 0);
    // ListOffsets needs Describe.
    let lo: ListOffsetsResponse = call(
        &s,
        &alice,
        ApiKey::ListOffsets,
        7,
        &ListOffsetsRequest::default().with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(str_bytes("secret")))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1)
                ]),
        ]),
    )
    .await;
    assert_eq!(
        lo.topics[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    // CreateTopics / DeleteTopics need Create / Delete.
    let ct: CreateTopicsResponse = call(
        &s,
        &alice,
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default().with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(TopicName(str_bytes("opus")))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ]),
    )
    .await;
    assert_eq!(ct.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    let dt: DeleteTopicsResponse = call(
        &s,
        &alice,
        ApiKey::DeleteTopics,
        6,
        &DeleteTopicsRequest::default()
            .with_topics(vec![delete_topics_request::DeleteTopicState::default()
                .with_name(Some(TopicName(str_bytes("open"))))]),
    )
    .await;
    assert_eq!(dt.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert!(s.broker.topic("open").is_some());
}

#[tokio::test]
async fn idempotent_producers_need_idempotent_write_or_write_on_some_topic() {
    let dir = tempfile::tempdir().unwrap();
    let s = state(dir.path());
    let admin = user(&s, "admin");
    let alice = user(&s, "alice");
    let init_request = InitProducerIdRequest::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let init = async |session: &Arc<Session>| {
        let r: InitProducerIdResponse =
            call(&s, session, ApiKey::InitProducerId, 4, &init_request).await;
        r.error_code
    };
    assert_eq!(init(&alice).await, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(init(&admin).await, 0);
    assert_eq!(
        create_acls(&s, &admin, vec![creation(2, "x", 4, "User:alice", 4, 3)]).await,
        [0]
    );
    assert_eq!(init(&alice).await, 0);
    let bob = user(&s, "bob");
    assert_eq!(init(&bob).await, CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(
        create_acls(
            &s,
            &admin,
            vec![creation(4, "kafka-cluster", 3, "User:bob", 12, 3)]
        )
        .await,
        [0]
    );
    assert_eq!(init(&bob).await, 0);
}

#[tokio::test]
async fn group_checks() {
    let dir = tempfile::tempdir().unwrap();
    let s = state(dir.path());
    let admin = user(&s, "admin");
    let alice = user(&s, "alice");
    let find = async |session: &Arc<Session>, version: i16| {
        let r: FindCoordinatorResponse = call(
            &s,
            session,
            ApiKey::FindCoordinator,
            version,
            &FindCoordinatorRequest::default()
                .with_key(str_bytes(if version < 4 { "g1" } else { "" }))
                .with_coordinator_keys(if version >= 4 {
                    vec![str_bytes("g1")]
                } else {
                    vec![]
                }),
        )
        .await;
        if version >= 4 {
            r.coordinators[0].error_code
        } else {
            r.error_code
        }
    };
    assert_eq!(find(&alice, 3).await, GROUP_AUTHORIZATION_FAILED);
    assert_eq!(find(&alice, 4).await, GROUP_AUTHORIZATION_FAILED);
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(str_bytes("g1")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(str_bytes("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(str_bytes("range"))
        .with_metadata(Bytes::from_static(b"\0\0\0\0\0\0"))]);
    let j: JoinGroupResponse = call(&s, &alice, ApiKey::JoinGroup, 9, &join).await;
    assert_eq!(j.error_code, GROUP_AUTHORIZATION_FAILED);
    // The admin commits offsets for g1 on both topics; alice may see none of it.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(str_bytes("g1")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(
            ["open", "secret"]
                .iter()
                .map(|t| {
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(TopicName(str_bytes(*t)))
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_committed_offset(5),
                        ])
                })
                .collect(),
        );
    let c: OffsetCommitResponse = call(&s, &admin, ApiKey::OffsetCommit, 8, &commit).await;
    assert!(c.topics.iter().all(|t| t.partitions[0].error_code == 0));
    let c: OffsetCommitResponse = call(&s, &alice, ApiKey::OffsetCommit, 8, &commit).await;
    assert!(c
        .topics
        .iter()
        .all(|t| t.partitions[0].error_code == GROUP_AUTHORIZATION_FAILED));
    let lg: ListGroupsResponse = call(
        &s,
        &alice,
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default(),
    )
    .await;
    assert!(lg.groups.is_empty());
    // Read on the group and on "open" only.
    let acls = vec![
        creation(3, "g1", 3, "User:alice", 3, 3),
        creation(2, "open", 3, "User:alice", 3, 3),
    ];
    assert_eq!(create_acls(&s, &admin, acls).await, [0, 0]);
    assert_eq!(find(&alice, 4).await, 0);
    let lg: ListGroupsResponse = call(
        &s,
        &alice,
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default(),
    )
    .await;
    assert_eq!(lg.groups.len(), 1);
    let c: OffsetCommitResponse = call(&s, &alice, ApiKey::OffsetCommit, 8, &commit).await;
    let codes: Vec<i16> = c
        .topics
        .iter()
        .map(|t| t.partitions[0].error_code)
        .collect();
    assert_eq!(codes, [0, TOPIC_AUTHORIZATION_FAILED]);
    // Fetching all committed offsets leaves "secret" out; naming it gets 29.
    for v in [7, 8] {
        let req = if v >= 8 {
            OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(str_bytes("g1")))
                    .with_topics(None),
            ])
        } else {
            OffsetFetchRequest::default()
                .with_group_id(GroupId(str_bytes("g1")))
                .with_topics(None)
        };
        let r: OffsetFetchResponse = call(&s, &alice, ApiKey::OffsetFetch, v, &req).await;
        let names: Vec<String> = if v >= 8 {
            r.groups[0]
                .topics
                .iter()
                .map(|t| t.name.to_string())
                .collect()
        } else {
            r.topics.iter().map(|t| t.name.to_string()).collect()
        };
        assert_eq!(names, ["open"], "v{v}");
    }
    let r: OffsetFetchResponse = call(
        &s,
        &alice,
        ApiKey::OffsetFetch,
        7,
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(str_bytes("g1")))
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(TopicName(str_bytes("secret")))
                    .with_partition_indexes(vec![0]),
            ])),
    )
    .await;
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    // Another group stays closed; DescribeGroups and DeleteGroups say so per group.
    let dg: DescribeGroupsResponse = call(
        &s,
        &alice,
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(str_bytes("g1")), GroupId(str_bytes("g2"))])
            .with_include_authorized_operations(true),
    )
    .await;
    assert_eq!(dg.groups[0].error_code, 0);
    // Read (3) and the Describe (8) it implies.
    assert_eq!(dg.groups[0].authorized_operations, (1 << 3) | (1 << 8));
    assert_eq!(dg.groups[1].error_code, GROUP_AUTHORIZATION_FAILED);
    let del: DeleteGroupsResponse = call(
        &s,
        &alice,
        ApiKey::DeleteGroups,
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(str_bytes("g1"))]),
    )
    .await;
    assert_eq!(del.results[0].error_code, GROUP_AUTHORIZATION_FAILED);
}

/// Asserts `session` gets GROUP_AUTHORIZATION_FAILED from `key` at each of `versions`,
/// the request built for the version and the code read from the answer by `code`.
async fn refused_at<Req: Encodable, Resp: Decodable>(
    s: &Arc<KafkaState>,
    session: &Arc<Session>,
    key: ApiKey,
    versions: std::ops::RangeInclusive<i16>,
    request: impl Fn(i16) -> Req,
    code: impl Fn(&Resp, i16) -> i16,
) {
    for v in versions {
        let r: Resp = call(s, session, key, v, &request(v)).await;
        assert_eq!(code(&r, v), GROUP_AUTHORIZATION_FAILED, "{key:?} v{v}");
    }
}

/// Every group API refuses at every version it accepts, and the refusal encodes.
#[tokio::test]
async fn group_refusals_at_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = state(dir.path());
    let bob = user(&s, "bob");
    let g = || GroupId(str_bytes("g"));
    let req = |_| {
        JoinGroupRequest::default()
            .with_group_id(g())
            .with_session_timeout_ms(10_000)
            .with_protocol_type(str_bytes("consumer"))
    };
    let code = |r: &JoinGroupResponse, _| r.error_code;
    refused_at(&s, &bob, ApiKey::JoinGroup, 0..=9, req, code).await;
    let req = |_| SyncGroupRequest::default().with_group_id(g());
    let code = |r: &SyncGroupResponse, _| r.error_code;
    refused_at(&s, &bob, ApiKey::SyncGroup, 0..=5, req, code).await;
    let req = |v| match v {
        3.. => LeaveGroupRequest::default()
            .with_group_id(g())
            .with_members(vec![leave_group_request::MemberIdentity::default()]),
        _ => LeaveGroupRequest::default().with_group_id(g()),
    };
    let code = |r: &LeaveGroupResponse, _| r.error_code;
    refused_at(&s, &bob, ApiKey::LeaveGroup, 0..=5, req, code).await;
    let req = |_| DescribeGroupsRequest::default().with_groups(vec![g()]);
    let code = |r: &DescribeGroupsResponse, _| r.groups[0].error_code;
    refused_at(&s, &bob, ApiKey::DescribeGroups, 0..=5, req, code).await;
    let req = |_| HeartbeatRequest::default().with_group_id(g());
    let code = |r: &HeartbeatResponse, _| r.error_code;
    refused_at(&s, &bob, ApiKey::Heartbeat, 0..=4, req, code).await;
    let req = |v| match v {
        8.. => OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(g())
                .with_topics(None),
        ]),
        _ => OffsetFetchRequest::default()
            .with_group_id(g())
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(TopicName(str_bytes("open")))
                    .with_partition_indexes(vec![0]),
            ])),
    };
    let code = |r: &OffsetFetchResponse, v| match v {
        8.. => r.groups[0].error_code,
        2.. => r.error_code,
        _ => r.topics[0].partitions[0].error_code,
    };
    refused_at(&s, &bob, ApiKey::OffsetFetch, 1..=9, req, code).await;
    let req = |_| DeleteGroupsRequest::default().with_groups_names(vec![g()]);
    let code = |r: &DeleteGroupsResponse, _| r.results[0].error_code;
    refused_at(&s, &bob, ApiKey::DeleteGroups, 0..=2, req, code).await;
    let req = |_| OffsetDeleteRequest::default().with_group_id(g());
    let code = |r: &OffsetDeleteResponse, _| r.error_code;
    refused_at(&s, &bob, ApiKey::OffsetDelete, 0..=0, req, code).await;
    // ListGroups is not refused: it lists only the groups the session may describe.
    for v in 0..=5 {
        let r: ListGroupsResponse = call(
            &s,
            &bob,
            ApiKey::ListGroups,
            v,
            &ListGroupsRequest::default(),
        )
        .await;
        assert!(r.groups.is_empty(), "ListGroups v{v}");
    }
}

/// DescribeCluster is open to everyone, as in Kafka; only the authorized operations need
/// Describe on the cluster (0 without it).
#[tokio::test]
async fn describe_cluster_and_authorized_operations() {
    let dir = tempfile::tempdir().unwrap();
    let s = state(dir.path());
    let ask = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let r: DescribeClusterResponse =
        call(&s, &user(&s, "alice"), ApiKey::DescribeCluster, 1, &ask).await;
    assert_eq!((r.error_code, r.cluster_authorized_operations), (0, 0));
    let r: DescribeClusterResponse =
        call(&s, &user(&s, "admin"), ApiKey::DescribeCluster, 1, &ask).await;
    // Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe.
    let all = [5, 9, 10, 11, 12, 7, 8].iter().fold(0, |b, c| b | 1 << c);
    assert_eq!(r.cluster_authorized_operations, all);
    let r: DescribeClusterResponse = call(
        &s,
        &user(&s, "alice"),
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default(),
    )
    .await;
    assert_eq!(r.cluster_authorized_operations, i32::MIN, "not asked for");
}

/// Transactional ids as Kafka checks them: Write on the id for InitProducerId,
/// AddPartitionsToTxn and EndTxn (53 without it), Write on the topics added (29),
/// Describe on the id for FindCoordinator, DescribeTransactions and ListTransactions.
#[tokio::test]
async fn transactional_id_checks() {
    const TXN_ID_AUTHORIZATION_FAILED: i16 = 53;
    let dir = tempfile::tempdir().unwrap();
    let s = state(dir.path());
    let admin = user(&s, "admin");
    let alice = user(&s, "alice");
    let bob = user(&s, "bob");
    let init_request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(str_bytes("tx"))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let init = async |session: &Arc<Session>| {
        let r: InitProducerIdResponse =
            call(&s, session, ApiKey::InitProducerId, 4, &init_request).await;
        (r.error_code, r.producer_id.0, r.producer_epoch)
    };
    let find_request = FindCoordinatorRequest::default()
        .with_key(str_bytes("tx"))
        .with_key_type(1);
    let find = async |session: &Arc<Session>| {
        let r: FindCoordinatorResponse =
            call(&s, session, ApiKey::FindCoordinator, 3, &find_request).await;
        r.error_code
    };
    assert_eq!(init(&alice).await.0, TXN_ID_AUTHORIZATION_FAILED);
    assert_eq!(find(&alice).await, TXN_ID_AUTHORIZATION_FAILED);
    // Write on the transactional id (resource type 5) implies Describe.
    assert_eq!(
        create_acls(&s, &admin, vec![creation(5, "tx", 3, "User:alice", 4, 3)]).await,
        [0]
    );
    assert_eq!(find(&alice).await, 0);
    let (code, pid, epoch) = init(&alice).await;
    assert_eq!(code, 0);
    let add_request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(str_bytes("tx")))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(TopicName(str_bytes("open")))
                .with_partitions(vec![0]),
        ]);
    let add = async |session: &Arc<Session>| {
        let r: AddPartitionsToTxnResponse =
            call(&s, session, ApiKey::AddPartitionsToTxn, 3, &add_request).await;
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    };
    assert_eq!(add(&bob).await, TXN_ID_AUTHORIZATION_FAILED);
    assert_eq!(add(&alice).await, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        create_acls(&s, &admin, vec![creation(2, "open", 3, "User:alice", 4, 3)]).await,
        [0]
    );
    assert_eq!(add(&alice).await, 0);
    let end_request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(str_bytes("tx")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(true);
    let end = async |session: &Arc<Session>| {
        let r: EndTxnResponse = call(&s, session, ApiKey::EndTxn, 3, &end_request).await;
        r.error_code
    };
    assert_eq!(end(&bob).await, TXN_ID_AUTHORIZATION_FAILED);
    assert_eq!(end(&alice).await, 0);
    let describe_request = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(str_bytes("tx"))]);
    let describe = async |session: &Arc<Session>| {
        let r: DescribeTransactionsResponse = call(
            &s,
            session,
            ApiKey::DescribeTransactions,
            0,
            &describe_request,
        )
        .await;
        let t = &r.transaction_states[0];
        (t.error_code, t.transaction_state.to_string())
    };
    assert_eq!(describe(&bob).await.0, TXN_ID_AUTHORIZATION_FAILED);
    // EndTxn answers once the decision is stored; the completion follows shortly.
    let mut seen = describe(&alice).await;
    for _ in 0..500 {
        if seen.1 == "CompleteCommit" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        seen = describe(&alice).await;
    }
    assert_eq!(seen, (0, "CompleteCommit".to_string()));
    let list_request = ListTransactionsRequest::default().with_duration_filter(-1);
    let list = async |session: &Arc<Session>| {
        let r: ListTransactionsResponse =
            call(&s, session, ApiKey::ListTransactions, 1, &list_request).await;
        r.transaction_states.len()
    };
    assert_eq!(list(&bob).await, 0);
    assert_eq!(list(&alice).await, 1);
}
