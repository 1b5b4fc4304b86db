//! What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: which resource a
//! request names (a topic, the cluster-wide broker default `""`, or this node), the ACL
//! check for it, and applying a new set of overrides to it.

use std::collections::BTreeMap;

use nagare_core::security::Operation;
use nagare_core::{BrokerScope, CoreError};

use crate::errors::{core_error, ResponseError};
use crate::session::Session;
use crate::KafkaState;

/// Kafka `ConfigResource.Type` codes.
pub(crate) const TOPIC: i8 = 2;
pub(crate) const BROKER: i8 = 4;

/// A resource a config request may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resource {
    Topic(String),
    Broker(BrokerScope),
}

/// A refusal: the error code and its message.
pub(crate) type Refusal = (ResponseError, String);

/// The resource named by `(resource_type, name)` if the session may `op` it.
pub(crate) fn resolve(
    state: &KafkaState,
    session: &Session,
    op: Operation,
    resource_type: i8,
    name: &str,
) -> Result<Resource, Refusal> {
    match resource_type {
        TOPIC => {
            if !session.topic_allowed(op, name) {
                return Err((
                    ResponseError::TopicAuthorizationFailed,
                    format!("not authorized to {op:?} topic {name:?}"),
                ));
            }
            if state.broker.topic(name).is_none() {
                return Err((
                    ResponseError::UnknownTopicOrPartition,
                    format!("unknown topic {name:?}"),
                ));
            }
            Ok(Resource::Topic(name.to_string()))
        }
        BROKER => {
            if !session.cluster_allowed(op) {
                return Err((
                    ResponseError::ClusterAuthorizationFailed,
                    format!("not authorized to {op:?} the cluster"),
                ));
            }
            if name.is_empty() {
                return Ok(Resource::Broker(BrokerScope::ClusterDefault));
            }
            match name.parse::<i32>() {
                Ok(id) if id == state.broker.node_id() => Ok(Resource::Broker(BrokerScope::Node)),
                Ok(id) => Err((
                    ResponseError::InvalidRequest,
                    format!(
                        "unknown broker {id}: this cluster is node {}",
                        state.broker.node_id()
                    ),
                )),
                Err(_) => Err((
                    ResponseError::InvalidRequest,
                    format!("invalid broker id {name:?}"),
                )),
            }
        }
        other => Err((
            ResponseError::InvalidRequest,
            format!("unsupported config resource type {other}"),
        )),
    }
}

/// The configs set on a resource now (a topic's overrides, the dynamic broker configs).
pub(crate) fn current(
    state: &KafkaState,
    resource: &Resource,
) -> Result<BTreeMap<String, String>, Refusal> {
    match resource {
        Resource::Topic(name) => state.broker.topic_overrides(name).map_err(refusal),
        Resource::Broker(scope) => Ok(state.broker.dynamic_broker_configs(*scope)),
    }
}

/// Replaces the configs set on a resource.
pub(crate) fn replace(
    state: &KafkaState,
    resource: &Resource,
    configs: &BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), Refusal> {
    match resource {
        Resource::Topic(name) => state
            .broker
            .set_topic_overrides(name, configs, validate_only)
            .map_err(refusal),
        Resource::Broker(scope) => state
            .broker
            .set_dynamic_broker_configs(*scope, configs, validate_only)
            .map_err(refusal),
    }
}

/// The Kafka error and message of a core error.
pub(crate) fn refusal(e: CoreError) -> Refusal {
    (core_error(&e), e.to_string())
}

/// Whether `name` is a LIST config of the resource (APPEND/SUBTRACT apply to those only).
pub(crate) fn is_list(resource: &Resource, name: &str) -> bool {
    use nagare_core::config_catalog::{topic_config_def, topic_config_for_broker, ConfigType};
    let topic_name = match resource {
        Resource::Topic(_) => Some(name),
        Resource::Broker(_) => topic_config_for_broker(name).map(|(n, _)| n),
    };
    topic_name
        .and_then(topic_config_def)
        .is_some_and(|d| d.kind == ConfigType::List)
}

/// The value a config has on a resource now, default included (the base APPEND and
/// SUBTRACT start from when nothing is set).
pub(crate) fn effective_value(
    state: &KafkaState,
    resource: &Resource,
    name: &str,
) -> Option<String> {
    match resource {
        Resource::Topic(topic) => state
            .broker
            .topic(topic)
            .and_then(|t| t.config().entries().get(name).cloned()),
        Resource::Broker(scope) => state
            .broker
            .describe_broker_configs(*scope)
            .into_iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value),
    }
}
