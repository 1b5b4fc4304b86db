//! DescribeConfigs (32): every entry of a topic's configuration, defaults included, and a
//! few broker-level entries.

use crate::meters::Counted;
use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeConfigs,
    advertised: (1, 4),
    accepted: (1, 4),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// Kafka `ConfigSource` values.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DescribeConfigsRequest = decode(&req)?;
    let broker = &state.broker;
    let results = request
        .resources
        .iter()
        .map(|r| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            // DescribeConfigs on the topic, or on the cluster for the broker's entries.
            let refused = match r.resource_type {
                TOPIC if !session.topic_allowed(Operation::DescribeConfigs, &r.resource_name) => {
                    Some(ResponseError::TopicAuthorizationFailed)
                }
                BROKER if !session.cluster_allowed(Operation::DescribeConfigs) => {
                    Some(ResponseError::ClusterAuthorizationFailed)
                }
                _ => None,
            };
            if let Some(error) = refused {
                return result
                    .with_error_code(error.counted())
                    .with_error_message(Some(str_bytes("not authorized to describe configs")));
            }
            let entries: Vec<(String, String, i8)> = match r.resource_type {
                TOPIC => match broker.topic(&r.resource_name) {
                    Some(t) => {
                        let defaults = broker.config().topic_defaults.entries();
                        t.config()
                            .entries()
                            .into_iter()
                            .map(|(k, v)| {
                                let source = if defaults.get(k) == Some(&v) {
                                    DEFAULT_CONFIG
                                } else {
                                    DYNAMIC_TOPIC_CONFIG
                                };
                                (k.to_string(), v, source)
                            })
                            .collect()
                    }
                    None => {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.counted())
                            .with_error_message(Some(str_bytes("unknown topic")))
                    }
                },
                BROKER => broker_entries(&state),
                _ => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.counted())
                        .with_error_message(Some(str_bytes("unsupported resource type")))
                }
            };
            let keys = r.configuration_keys.as_ref();
            let configs = entries
                .into_iter()
                .filter(|(k, _, _)| keys.is_none_or(|keys| keys.iter().any(|x| &**x == k)))
                .map(|(k, v, source)| {
                    DescribeConfigsResourceResult::default()
                        .with_name(str_bytes(k))
                        .with_value(Some(str_bytes(v)))
                        .with_config_source(source)
                })
                .collect();
            result.with_error_code(errors::NONE).with_configs(configs)
        })
        .collect();
    encode(
        &DescribeConfigsResponse::default().with_results(results),
        req.version,
    )
}

fn broker_entries(state: &KafkaState) -> Vec<(String, String, i8)> {
    let c = state.broker.config();
    let mut m = BTreeMap::new();
    m.insert("broker.id", c.node_id.to_string());
    m.insert("node.id", c.node_id.to_string());
    m.insert("num.partitions", c.default_partitions.to_string());
    m.insert(
        "auto.create.topics.enable",
        c.auto_create_topics.to_string(),
    );
    m.insert("log.dirs", c.data_dir.display().to_string());
    m.insert(
        "socket.request.max.bytes",
        state.config.max_request_bytes.to_string(),
    );
    m.insert("default.replication.factor", "1".to_string());
    m.insert("min.insync.replicas", "1".to_string());
    m.insert(
        "message.max.bytes",
        c.topic_defaults.max_message_bytes.to_string(),
    );
    m.into_iter()
        .map(|(k, v)| (k.to_string(), v, STATIC_BROKER_CONFIG))
        .collect()
}
