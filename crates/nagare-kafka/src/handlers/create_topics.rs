//! CreateTopics (19): -1 partitions / replication factor take the defaults; a replication
//! factor above 1 cannot be honoured by one node and is refused; configs are Kafka names.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
use nagare_core::security::Operation;
use nagare_core::{CoreError, TopicConfig};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, core_error, ResponseError};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::CreateTopics,
    advertised: (2, 7),
    accepted: (2, 7),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

/// Kafka `ConfigSource` values of the configs returned (v5+).
const TOPIC_CONFIG: i8 = 1;
const DEFAULT_CONFIG: i8 = 5;

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: CreateTopicsRequest = decode(&req)?;
    // Create on the cluster covers every topic; otherwise each needs Create on itself.
    let cluster_create = session.cluster_allowed(Operation::Create);
    let topics = request
        .topics
        .iter()
        .map(|t| {
            if !cluster_create && !session.topic_allowed(Operation::Create, &t.name) {
                return CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(ResponseError::TopicAuthorizationFailed.counted())
                    .with_error_message(Some(str_bytes("Authorization failed.")))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_configs((req.version < 5).then(Vec::new));
            }
            let mut result = create(&state, t, request.validate_only, req.version);
            // The resulting configs are shown only with DescribeConfigs on the topic.
            if req.version >= 5 && !session.topic_allowed(Operation::DescribeConfigs, &t.name) {
                result.topic_config_error_code = ResponseError::TopicAuthorizationFailed.counted();
                result.configs = None;
            }
            result
        })
        .collect();
    encode(
        &CreateTopicsResponse::default().with_topics(topics),
        req.version,
    )
}

fn create(
    state: &KafkaState,
    t: &CreatableTopic,
    validate_only: bool,
    version: i16,
) -> CreatableTopicResult {
    let mut result = create_full(state, t, validate_only);
    // Fields a version does not have must stay at their defaults for the encoder.
    if version < 7 {
        result = result.with_topic_id(uuid::Uuid::nil());
    }
    if version < 5 {
        result = result
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_configs(Some(Vec::new()));
    }
    result
}

fn create_full(
    state: &KafkaState,
    t: &CreatableTopic,
    validate_only: bool,
) -> CreatableTopicResult {
    let broker = &state.broker;
    let result = CreatableTopicResult::default().with_name(t.name.clone());
    let fail = |error_code: i16, message: String| {
        result
            .clone()
            .with_error_code(error_code)
            .with_error_message(Some(str_bytes(message)))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
    };
    if t.replication_factor > 1 || t.replication_factor == 0 || t.replication_factor < -1 {
        return fail(
            ResponseError::InvalidReplicationFactor.counted(),
            format!(
                "replication factor {} but this cluster has one broker",
                t.replication_factor
            ),
        );
    }
    let partitions = if !t.assignments.is_empty() {
        Some(t.assignments.len() as u32)
    } else if t.num_partitions == -1 {
        None
    } else if t.num_partitions <= 0 {
        return fail(
            ResponseError::InvalidPartitions.counted(),
            format!("invalid partition count {}", t.num_partitions),
        );
    } else {
        Some(t.num_partitions as u32)
    };
    // Every config given is an override of the topic over the broker's current defaults.
    let mut config: TopicConfig = broker.topic_defaults();
    for c in &t.configs {
        if let Some(v) = &c.value {
            if let Err(e) = config.set(&c.name, v) {
                return fail(core_error(&e).counted(), e.to_string());
            }
        }
    }
    if let Err(e) = config.check() {
        return fail(core_error(&e).counted(), e.to_string());
    }
    let created: Result<(uuid::Uuid, u32), CoreError> = if validate_only {
        broker.validate_new_topic(&t.name, partitions).map(|()| {
            (
                uuid::Uuid::nil(),
                partitions.unwrap_or(broker.config().default_partitions.max(1)),
            )
        })
    } else {
        broker
            .create_topic(&t.name, partitions, config.clone())
            .map(|topic| (topic.id(), topic.partition_count() as u32))
    };
    match created {
        Ok((id, count)) => result
            .with_error_code(errors::NONE)
            .with_topic_id(id)
            .with_num_partitions(count as i32)
            .with_replication_factor(1)
            .with_configs(Some(
                config
                    .entries()
                    .into_iter()
                    .map(|(k, v)| {
                        let source = if config.overrides.contains_key(k) {
                            TOPIC_CONFIG
                        } else {
                            DEFAULT_CONFIG
                        };
                        CreatableTopicConfigs::default()
                            .with_name(str_bytes(k))
                            .with_value(Some(str_bytes(v)))
                            .with_config_source(source)
                    })
                    .collect(),
            )),
        Err(e) => fail(core_error(&e).counted(), e.to_string()),
    }
}
