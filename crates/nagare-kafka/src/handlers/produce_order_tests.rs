//! Pipelined Produce requests of one idempotent producer, started together as the
//! connection starts the requests of one read (the first ones `followed`): every batch
//! must land in sequence on every partition, however many partitions (more than
//! `join_all` polls one by one) and topics a request carries.

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, RequestHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable};
use nagare_core::log::batch::{build_batch, NewRecord};
use nagare_core::log::control::set_producer;
use nagare_core::TopicConfig;

use super::test_support::state;
use super::tests::flatten;
use super::{lookup, str_bytes};
use crate::codec::ParsedRequest;
use crate::inflight::Inflight;
use crate::session::Session;

const TOPICS: [&str; 2] = ["seq-a", "seq-b"];
const PARTITIONS: i32 = 40;
const REQUESTS: i32 = 4;
const PRODUCER: i64 = 7;

/// Request `seq` of the producer: one batch with sequence `seq` on every partition of
/// every topic.
fn request(seq: i32) -> Bytes {
    let topic_data = TOPICS
        .iter()
        .map(|t| {
            TopicProduceData::default()
                .with_name(TopicName(str_bytes(*t)))
                .with_partition_data(
                    (0..PARTITIONS)
                        .map(|p| {
                            let mut batch = build_batch(&[NewRecord {
                                key: None,
                                value: Some(Bytes::from(format!("{seq}"))),
                                headers: vec![],
                                timestamp: 1,
                            }]);
                            set_producer(&mut batch, PRODUCER, 0, seq, false);
                            PartitionProduceData::default()
                                .with_index(p)
                                .with_records(Some(batch.freeze()))
                        })
                        .collect(),
                )
        })
        .collect();
    let mut body = bytes::BytesMut::new();
    ProduceRequest::default()
        .with_acks(1)
        .with_topic_data(topic_data)
        .encode(&mut body, 9)
        .expect("encodes");
    body.freeze()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_idempotent_requests_append_in_sequence_on_every_partition() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = state(dir.path());
    for t in TOPICS {
        state
            .broker
            .create_topic(t, Some(PARTITIONS as u32), TopicConfig::default())
            .expect("topic");
    }
    let session = Session::for_tests(&state);
    let produce = lookup(ApiKey::Produce as i16).expect("produce handler");
    let mut inflight = Inflight::default();
    for seq in 0..REQUESTS {
        let req = ParsedRequest {
            api_key: ApiKey::Produce,
            version: 9,
            header: RequestHeader::default(),
            body: request(seq),
            followed: seq + 1 < REQUESTS,
        };
        inflight.push_back((produce.call)(state.clone(), session.clone(), req));
    }
    for seq in 0..REQUESTS {
        let reply = inflight.next().await.expect("an answer").expect("a reply");
        let response = ProduceResponse::decode(&mut flatten(reply), 9).expect("decodes");
        for topic in &response.responses {
            for p in &topic.partition_responses {
                assert_eq!(
                    p.error_code, 0,
                    "request {seq}, {} partition {}",
                    topic.name.0, p.index
                );
                assert_eq!(p.base_offset, i64::from(seq));
            }
        }
    }
}
