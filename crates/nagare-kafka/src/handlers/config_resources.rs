//! What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share: which resource a
//! request names (a topic, the cluster-wide broker default `""`, or this node), the ACL
//! check for it, answering each resource of a request ([`answer_each`]), and applying a
//! new set of overrides to it.

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    alter_configs_request, alter_configs_response, describe_configs_request,
    describe_configs_response, incremental_alter_configs_request,
    incremental_alter_configs_response,
};
use kafka_protocol::protocol::StrBytes;
use nagare_core::security::Operation;
use nagare_core::{BrokerScope, CoreError};

use super::str_bytes;
use crate::errors::{self, core_error, ResponseError};
use crate::meters::Counted;
use crate::session::Session;
use crate::KafkaState;

/// Kafka `ConfigResource.Type` codes.
pub(crate) const TOPIC: i8 = 2;
pub(crate) const BROKER: i8 = 4;
pub(crate) const GROUP: i8 = 32;

/// A resource a config request may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resource {
    Topic(String),
    Broker(BrokerScope),
    /// A group's configs (Kafka 4.x's `share.*` group configs).
    Group(String),
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
        GROUP => {
            let op = if op == Operation::AlterConfigs {
                Operation::AlterConfigs
            } else {
                Operation::DescribeConfigs
            };
            if !session.allowed(op, nagare_core::security::ResourceType::Group, name) {
                return Err((
                    ResponseError::GroupAuthorizationFailed,
                    format!("not authorized to {op:?} group {name:?}"),
                ));
            }
            Ok(Resource::Group(name.to_string()))
        }
        other => Err((
            ResponseError::InvalidRequest,
            format!("unsupported config resource type {other}"),
        )),
    }
}

/// One resource of a config request, as the three APIs' request messages name it.
pub(crate) trait NamedResource {
    /// What the session must be allowed on the resource.
    const OPERATION: Operation;
    /// `(resource_type, resource_name)`.
    fn named(&self) -> (i8, &StrBytes);
}

/// The answer for one resource, as the three APIs' response messages carry it.
pub(crate) trait ResourceAnswer: Default {
    /// The answer naming the resource, error code NONE.
    fn for_resource(resource_type: i8, resource_name: StrBytes) -> Self;
    /// The same with an error code and its message.
    fn refused(self, error_code: i16, message: StrBytes) -> Self;
}

/// Implements [`NamedResource`] and [`ResourceAnswer`] on messages with Kafka's field
/// names (`resource_type`, `resource_name`, `error_code`, `error_message`).
macro_rules! config_resource_messages {
    (requests: $($q:ty => $op:ident),+; answers: $($a:ty),+ $(,)?) => {
        $(impl NamedResource for $q {
            const OPERATION: Operation = Operation::$op;
            fn named(&self) -> (i8, &StrBytes) {
                (self.resource_type, &self.resource_name)
            }
        })+
        $(impl ResourceAnswer for $a {
            fn for_resource(resource_type: i8, resource_name: StrBytes) -> Self {
                Self::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(resource_name)
                    .with_error_code(errors::NONE)
            }
            fn refused(self, error_code: i16, message: StrBytes) -> Self {
                self.with_error_code(error_code)
                    .with_error_message(Some(message))
            }
        })+
    };
}

config_resource_messages!(
    requests: describe_configs_request::DescribeConfigsResource => DescribeConfigs,
        alter_configs_request::AlterConfigsResource => AlterConfigs,
        incremental_alter_configs_request::AlterConfigsResource => AlterConfigs;
    answers: describe_configs_response::DescribeConfigsResult,
        alter_configs_response::AlterConfigsResourceResponse,
        incremental_alter_configs_response::AlterConfigsResourceResponse,
);

/// Answers every resource of a config request in order: each is resolved (the session
/// may do the request's operation on it, it exists) and handed to `act` with its answer (named, error NONE) to
/// fill in; a refusal of either becomes that answer's error code (counted) and message,
/// the other resources going on.
pub(crate) fn answer_each<Q: NamedResource, A: ResourceAnswer>(
    state: &KafkaState,
    session: &Session,
    resources: &[Q],
    mut act: impl FnMut(&Q, Resource, A) -> Result<A, Refusal>,
) -> Vec<A> {
    resources
        .iter()
        .map(|q| {
            let (resource_type, name) = q.named();
            let answer = || A::for_resource(resource_type, name.clone());
            resolve(state, session, Q::OPERATION, resource_type, name)
                .and_then(|resource| act(q, resource, answer()))
                .unwrap_or_else(|(error, message)| {
                    answer().refused(error.counted(), str_bytes(message))
                })
        })
        .collect()
}

/// The configs set on a resource now (a topic's overrides, the dynamic broker configs).
pub(crate) fn current(
    state: &KafkaState,
    resource: &Resource,
) -> Result<BTreeMap<String, String>, Refusal> {
    match resource {
        Resource::Topic(name) => state.broker.topic_overrides(name).map_err(refusal),
        Resource::Broker(scope) => Ok(state.broker.dynamic_broker_configs(*scope)),
        Resource::Group(name) => Ok(state.share.overrides(name)),
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
        Resource::Group(name) => state
            .share
            .set_overrides(name, configs.clone(), validate_only)
            .map_err(|e| (crate::errors::share_error(&e), e.to_string())),
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
        Resource::Group(_) => None,
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
        Resource::Group(_) => nagare_core::share_groups::config_default(name).map(str::to_string),
    }
}
