//! Every handler at every version it accepts, against a real broker on a temp dir: the
//! response must encode (no field set that the version lacks) and decode back.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use nagare_core::log::batch::{build_batch, NewRecord};

use super::test_support::state;
use super::{str_bytes, REGISTRY};
use crate::codec::ParsedRequest;
use crate::{Chunk, KafkaState, Reply};

fn state_with(
    dir: &std::path::Path,
    security: nagare_core::security::SecurityConfig,
) -> Arc<KafkaState> {
    super::test_support::state_with(dir, security, &[])
}

fn topic_name(s: &str) -> TopicName {
    TopicName(str_bytes(s))
}

fn body<T: Encodable>(msg: &T, version: i16) -> Bytes {
    let mut b = BytesMut::new();
    msg.encode(&mut b, version).unwrap();
    b.freeze()
}

/// A typical request of `key` at `version` (None: no case here yet for that API).
fn request(state: &KafkaState, key: ApiKey, version: i16) -> Option<Bytes> {
    let t = state.broker.topic_or_create("t").unwrap();
    let records = build_batch(&[NewRecord {
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from_static(b"v")),
        headers: vec![],
        timestamp: 1,
    }])
    .freeze();
    Some(match key {
        ApiKey::ApiVersions => body(&ApiVersionsRequest::default(), version),
        ApiKey::Metadata => body(
            &MetadataRequest::default().with_topics(if version == 0 { Some(vec![]) } else { None }),
            version,
        ),
        ApiKey::Produce => body(
            &ProduceRequest::default().with_acks(1).with_topic_data(vec![
                produce_request::TopicProduceData::default()
                    .with_name(topic_name("t"))
                    .with_partition_data(vec![produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records))]),
            ]),
            version,
        ),
        ApiKey::Fetch => body(
            &FetchRequest::default()
                .with_max_wait_ms(0)
                .with_max_bytes(1 << 20)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic(if version < 13 {
                        topic_name("t")
                    } else {
                        topic_name("")
                    })
                    .with_topic_id(if version >= 13 {
                        t.id()
                    } else {
                        uuid::Uuid::nil()
                    })
                    .with_partitions(vec![fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20)])]),
            version,
        ),
        ApiKey::ListOffsets => body(
            &ListOffsetsRequest::default().with_topics(vec![
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1)]),
            ]),
            version,
        ),
        ApiKey::InitProducerId => body(&InitProducerIdRequest::default(), version),
        ApiKey::CreateTopics => body(
            &CreateTopicsRequest::default().with_topics(vec![
                create_topics_request::CreatableTopic::default()
                    .with_name(topic_name(&format!("new-{version}")))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
                create_topics_request::CreatableTopic::default()
                    .with_name(topic_name("bad/name"))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
            version,
        ),
        ApiKey::DeleteTopics => {
            let name = format!("gone-{version}");
            state.broker.topic_or_create(&name).unwrap();
            let r = if version >= 6 {
                DeleteTopicsRequest::default().with_topics(vec![
                    delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(topic_name(&name))),
                    delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(topic_name("missing"))),
                ])
            } else {
                DeleteTopicsRequest::default()
                    .with_topic_names(vec![topic_name(&name), topic_name("missing")])
            };
            body(&r, version)
        }
        ApiKey::DescribeConfigs => body(
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(str_bytes("t")),
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(str_bytes("1")),
            ]),
            version,
        ),
        ApiKey::CreatePartitions => body(
            &CreatePartitionsRequest::default().with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(topic_name("t"))
                    .with_count(t.partition_count() as i32 + 1),
            ]),
            version,
        ),
        ApiKey::DescribeCluster => body(&DescribeClusterRequest::default(), version),
        ApiKey::OffsetForLeaderEpoch => body(
            &OffsetForLeaderEpochRequest::default().with_topics(vec![
                offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(topic_name("t"))
                    .with_partitions(vec![
                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_leader_epoch(0),
                    ]),
            ]),
            version,
        ),
        ApiKey::CreateAcls => body(
            &CreateAclsRequest::default().with_creations(vec![
                create_acls_request::AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(str_bytes("acl-t"))
                    .with_resource_pattern_type(3)
                    .with_principal(str_bytes("User:bob"))
                    .with_host(str_bytes("*"))
                    .with_operation(3)
                    .with_permission_type(3),
                // Invalid (ANY permission): answered on its own.
                create_acls_request::AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(str_bytes("acl-t"))
                    .with_resource_pattern_type(3)
                    .with_principal(str_bytes("User:bob"))
                    .with_host(str_bytes("*"))
                    .with_operation(3)
                    .with_permission_type(1),
            ]),
            version,
        ),
        ApiKey::DescribeAcls => body(
            &DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
            version,
        ),
        ApiKey::DeleteAcls => body(
            &DeleteAclsRequest::default().with_filters(vec![
                delete_acls_request::DeleteAclsFilter::default()
                    .with_resource_type_filter(2)
                    .with_resource_name_filter(Some(str_bytes("acl-t")))
                    .with_pattern_type_filter(1)
                    .with_operation(1)
                    .with_permission_type(1),
            ]),
            version,
        ),
        ApiKey::AddPartitionsToTxn => {
            let topics = vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![0]),
            ];
            let request = if version < 4 {
                AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(TransactionalId(str_bytes("tx")))
                    .with_v3_and_below_topics(topics)
            } else {
                AddPartitionsToTxnRequest::default().with_transactions(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                        .with_transactional_id(TransactionalId(str_bytes("tx")))
                        .with_verify_only(true)
                        .with_topics(topics),
                ])
            };
            body(&request, version)
        }
        ApiKey::AddOffsetsToTxn => body(
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(str_bytes("tx")))
                .with_group_id(GroupId(str_bytes("g"))),
            version,
        ),
        ApiKey::EndTxn => body(
            &EndTxnRequest::default().with_transactional_id(TransactionalId(str_bytes("tx"))),
            version,
        ),
        ApiKey::TxnOffsetCommit => body(
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(str_bytes("tx")))
                .with_group_id(GroupId(str_bytes("g")))
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic_name("t"))
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1),
                        ]),
                ]),
            version,
        ),
        ApiKey::DescribeTransactions => body(
            &DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![TransactionalId(str_bytes("tx"))]),
            version,
        ),
        ApiKey::ListTransactions => body(
            &ListTransactionsRequest::default()
                .with_state_filters(vec![str_bytes("Ongoing"), str_bytes("Nope")]),
            version,
        ),
        ApiKey::ConsumerGroupHeartbeat => body(
            &ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(str_bytes(format!("cg{version}"))))
                .with_member_id(str_bytes(format!("m{version}")))
                .with_rebalance_timeout_ms(10_000)
                .with_subscribed_topic_names(Some(vec![topic_name("t")]))
                .with_topic_partitions(Some(vec![])),
            version,
        ),
        ApiKey::ConsumerGroupDescribe => body(
            &ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(str_bytes("cg0")), GroupId(str_bytes("nope"))]),
            version,
        ),
        ApiKey::ShareGroupHeartbeat => body(
            &ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(str_bytes("sg")))
                .with_member_id(str_bytes("m1"))
                .with_subscribed_topic_names(Some(vec![topic_name("t")])),
            version,
        ),
        // v2 is v1 with fields more (see share_v2): built from the v1 body.
        ApiKey::ShareFetch if version >= 2 => super::share_v2::fetch_request_to_v2(
            &request(state, key, 1)?,
            super::share_v2::V2Fields::default(),
        ),
        ApiKey::ShareAcknowledge if version >= 2 => {
            super::share_v2::ack_request_to_v2(&request(state, key, 1)?, false)
        }
        ApiKey::ShareFetch => body(
            &ShareFetchRequest::default()
                .with_group_id(Some(GroupId(str_bytes("sg"))))
                .with_member_id(Some(str_bytes("m1")))
                .with_max_records(10)
                .with_topics(vec![share_fetch_request::FetchTopic::default()
                    .with_topic_id(t.id())
                    .with_partitions(vec![
                        share_fetch_request::FetchPartition::default().with_partition_index(0)
                    ])]),
            version,
        ),
        ApiKey::ShareAcknowledge => body(
            &ShareAcknowledgeRequest::default()
                .with_group_id(Some(GroupId(str_bytes("sg"))))
                .with_member_id(Some(str_bytes("m1")))
                .with_share_session_epoch(1),
            version,
        ),
        ApiKey::ShareGroupDescribe => body(
            &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(str_bytes("sg"))]),
            version,
        ),
        ApiKey::DescribeShareGroupOffsets => body(
            &DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(str_bytes("sg"))),
            ]),
            version,
        ),
        ApiKey::AlterShareGroupOffsets => body(
            &AlterShareGroupOffsetsRequest::default().with_group_id(GroupId(str_bytes("sg"))),
            version,
        ),
        ApiKey::DeleteShareGroupOffsets => body(
            &DeleteShareGroupOffsetsRequest::default().with_group_id(GroupId(str_bytes("sg"))),
            version,
        ),
        _ => return None,
    })
}

/// A reply as the bytes a client would read (file ranges read in).
pub(super) fn flatten(reply: Reply) -> Bytes {
    match reply {
        Reply::Body(b) => b,
        Reply::Nothing => Bytes::new(),
        Reply::Chunks(chunks) => {
            let mut out = Vec::new();
            for c in chunks {
                match c {
                    Chunk::Mem(m) => out.extend_from_slice(&m),
                    Chunk::File(f) => {
                        let mut buf = vec![0; f.len as usize];
                        std::os::unix::fs::FileExt::read_exact_at(&*f.file, &mut buf, f.position)
                            .unwrap();
                        out.extend_from_slice(&buf);
                    }
                }
            }
            out.into()
        }
    }
}

fn decode_response(key: ApiKey, mut b: Bytes, mut version: i16) {
    // The crate decodes share v2 answers as v1 (see share_v2).
    if key == ApiKey::ShareFetch && version >= 2 {
        version = 1;
    }
    if key == ApiKey::ShareAcknowledge && version >= 2 {
        b = super::share_v2::ack_response_to_v1(&b).0;
        version = 1;
    }
    let r = ResponseKind::decode(key, &mut b, version);
    assert!(r.is_ok(), "{key:?} v{version}: {:?}", r.err());
    assert!(
        b.is_empty(),
        "{key:?} v{version}: {} bytes left over",
        b.len()
    );
}

#[tokio::test]
async fn every_handler_answers_every_accepted_version() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(dir.path());
    for h in REGISTRY {
        for version in h.accepted.0..=h.accepted.1 {
            let Some(body) = request(&state, h.key, version) else {
                eprintln!("no test request for {:?}; add a case to request()", h.key);
                break;
            };
            let req = ParsedRequest {
                api_key: h.key,
                version,
                header: RequestHeader::default().with_request_api_key(h.key as i16),
                body,
                followed: false,
            };
            let reply = (h.call)(
                state.clone(),
                crate::session::Session::for_tests(&state),
                req,
            )
            .await
            .unwrap_or_else(|e| panic!("{:?} v{version}: {e}", h.key));
            decode_response(h.key, flatten(reply), version);
        }
    }
}

/// The refusals too must encode at every version: the same requests from a user no ACL
/// allows anything, on a broker that demands authentication.
#[tokio::test]
async fn every_handler_answers_refusals_at_every_accepted_version() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_with(
        dir.path(),
        nagare_core::security::SecurityConfig {
            auth_required: true,
            ..Default::default()
        },
    );
    let nobody =
        crate::session::Session::as_user(&state, nagare_core::security::Principal::user("nobody"));
    for h in REGISTRY {
        for version in h.accepted.0..=h.accepted.1 {
            let Some(body) = request(&state, h.key, version) else {
                break;
            };
            let req = ParsedRequest {
                api_key: h.key,
                version,
                header: RequestHeader::default().with_request_api_key(h.key as i16),
                body,
                followed: false,
            };
            let reply = (h.call)(state.clone(), nobody.clone(), req)
                .await
                .unwrap_or_else(|e| panic!("{:?} v{version}: {e}", h.key));
            decode_response(h.key, flatten(reply), version);
        }
    }
}

#[tokio::test]
async fn produce_then_fetch_returns_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(dir.path());
    let produce = super::lookup(ApiKey::Produce as i16).unwrap();
    let req = ParsedRequest {
        api_key: ApiKey::Produce,
        version: 9,
        header: RequestHeader::default(),
        body: request(&state, ApiKey::Produce, 9).unwrap(),
        followed: false,
    };
    let mut b = flatten(
        (produce.call)(
            state.clone(),
            crate::session::Session::for_tests(&state),
            req,
        )
        .await
        .unwrap(),
    );
    let r = ProduceResponse::decode(&mut b, 9).unwrap();
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let fetch = super::lookup(ApiKey::Fetch as i16).unwrap();
    let req = ParsedRequest {
        api_key: ApiKey::Fetch,
        version: 12,
        header: RequestHeader::default(),
        body: request(&state, ApiKey::Fetch, 12).unwrap(),
        followed: false,
    };
    let mut b = flatten(
        (fetch.call)(
            state.clone(),
            crate::session::Session::for_tests(&state),
            req,
        )
        .await
        .unwrap(),
    );
    let r = FetchResponse::decode(&mut b, 12).unwrap();
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, 1);
    let records = p.records.clone().unwrap();
    let decoded = nagare_core::log::batch::decode_records(&records).unwrap();
    assert_eq!(decoded[0].value.as_deref(), Some(&b"v"[..]));
}

/// A one-record batch from an idempotent producer.
fn idempotent_batch(producer_id: i64, epoch: i16, sequence: i32, value: &'static [u8]) -> Bytes {
    let mut b = build_batch(&[NewRecord {
        key: None,
        value: Some(Bytes::from_static(value)),
        headers: vec![],
        timestamp: 1,
    }]);
    b[43..51].copy_from_slice(&producer_id.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// Produces one batch to t/0 over the handler; returns (error code, base offset).
async fn produce_batch(state: &Arc<KafkaState>, batch: Bytes) -> (i16, i64) {
    let version = 9;
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(topic_name("t"))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch)),
            ])]);
    let req = ParsedRequest {
        api_key: ApiKey::Produce,
        version,
        header: RequestHeader::default(),
        body: body(&req, version),
        followed: false,
    };
    let mut b = flatten(
        (super::lookup(ApiKey::Produce as i16).unwrap().call)(
            state.clone(),
            crate::session::Session::for_tests(state),
            req,
        )
        .await
        .unwrap(),
    );
    let r = ProduceResponse::decode(&mut b, version).unwrap();
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn init_producer_id(state: &Arc<KafkaState>, current: Option<(i64, i16)>) -> (i16, i64, i16) {
    let version = 4;
    let (id, epoch) = current.unwrap_or((-1, -1));
    let req = InitProducerIdRequest::default()
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch)
        .with_transaction_timeout_ms(60_000);
    let req = ParsedRequest {
        api_key: ApiKey::InitProducerId,
        version,
        header: RequestHeader::default(),
        body: body(&req, version),
        followed: false,
    };
    let mut b = flatten(
        (super::lookup(ApiKey::InitProducerId as i16).unwrap().call)(
            state.clone(),
            crate::session::Session::for_tests(state),
            req,
        )
        .await
        .unwrap(),
    );
    let r = InitProducerIdResponse::decode(&mut b, version).unwrap();
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

#[tokio::test]
async fn idempotent_producer_dedups_fences_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(dir.path());
    state.broker.topic_or_create("t").unwrap();
    let (err, pid, epoch) = init_producer_id(&state, None).await;
    assert_eq!((err, epoch), (0, 0));
    assert_eq!(
        produce_batch(&state, idempotent_batch(pid, 0, 0, b"a")).await,
        (0, 0)
    );
    assert_eq!(
        produce_batch(&state, idempotent_batch(pid, 0, 1, b"b")).await,
        (0, 1)
    );
    // A retry of an acknowledged batch: no error, its original offset, nothing written.
    assert_eq!(
        produce_batch(&state, idempotent_batch(pid, 0, 0, b"a")).await,
        (0, 0)
    );
    // A gap in the sequence.
    assert_eq!(
        produce_batch(&state, idempotent_batch(pid, 0, 5, b"x"))
            .await
            .0,
        45
    );
    // Epoch bump fences the old epoch.
    let (err, pid2, epoch2) = init_producer_id(&state, Some((pid, 0))).await;
    assert_eq!((err, pid2, epoch2), (0, pid, 1));
    assert_eq!(
        produce_batch(&state, idempotent_batch(pid, 1, 0, b"c")).await,
        (0, 2)
    );
    assert_eq!(
        produce_batch(&state, idempotent_batch(pid, 0, 2, b"z"))
            .await
            .0,
        47
    );
    assert_eq!(state.broker.partition("t", 0).unwrap().log_end_offset(), 3);
    // Restart: ids continue after the persisted ones, and the sequence state comes back
    // from the log, so a retry is still recognised.
    state.broker.shutdown().unwrap();
    drop(state);
    let state = self::state(dir.path());
    assert_eq!(
        produce_batch(&state, idempotent_batch(pid, 1, 0, b"c")).await,
        (0, 2)
    );
    assert_eq!(
        produce_batch(&state, idempotent_batch(pid, 1, 1, b"d")).await,
        (0, 3)
    );
    assert_eq!(
        produce_batch(&state, idempotent_batch(pid, 0, 9, b"old"))
            .await
            .0,
        47
    );
    let (err, next, epoch) = init_producer_id(&state, None).await;
    assert_eq!(err, 0);
    assert!(
        next > pid,
        "producer ids must not be reused after a restart"
    );
    assert_eq!(epoch, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_producers_share_group_appends() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(dir.path());
    state.broker.topic_or_create("t").unwrap();
    let mut tasks = Vec::new();
    for task in 0..8i64 {
        let state = state.clone();
        tasks.push(tokio::spawn(async move {
            let mut offsets = Vec::new();
            for seq in 0..50 {
                let batch = if task % 2 == 0 {
                    idempotent_batch(1000 + task, 0, seq, b"v")
                } else {
                    build_batch(&[NewRecord {
                        value: Some(Bytes::from_static(b"v")),
                        ..NewRecord::default()
                    }])
                    .freeze()
                };
                let (err, offset) = produce_batch(&state, batch.clone()).await;
                assert_eq!(err, 0);
                if task % 2 == 0 {
                    // A retry gets the same offset and writes nothing.
                    assert_eq!(produce_batch(&state, batch).await, (0, offset));
                }
                offsets.push(offset);
            }
            offsets
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    assert_eq!(all, (0..400).collect::<Vec<i64>>());
    assert_eq!(
        state.broker.partition("t", 0).unwrap().log_end_offset(),
        400
    );
}
