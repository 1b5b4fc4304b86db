//! DescribeConfigs (32): every config of a topic (its overrides, then the broker
//! defaults under it) or of this broker, with source, synonyms, type and documentation.

use std::sync::Arc;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use nagare_core::config_catalog::{ConfigSource, ConfigType};
use nagare_core::{BrokerScope, ConfigEntry, ConfigSynonym};

use super::config_resources::{answer_each, refusal, Resource};
use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeConfigs,
    advertised: (1, 4),
    accepted: (1, 4),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DescribeConfigsRequest = decode(&req)?;
    let act = |r: &DescribeConfigsResource, resource, answer: DescribeConfigsResult| {
        let entries = match &resource {
            Resource::Topic(name) => state.broker.describe_topic_configs(name).map_err(refusal)?,
            Resource::Broker(scope) => broker_entries(&state, *scope),
            Resource::Group(group) => group_entries(&state, group),
        };
        let keys = r.configuration_keys.as_ref();
        let configs = entries
            .into_iter()
            .filter(|e| keys.is_none_or(|keys| keys.iter().any(|k| **k == *e.name)))
            .map(|e| {
                to_wire(
                    e,
                    request.include_synonyms,
                    request.include_documentation,
                    req.version,
                )
            })
            .collect();
        Ok(answer.with_configs(configs))
    };
    let answers = answer_each(&state, &session, &request.resources, act);
    encode(
        &DescribeConfigsResponse::default().with_results(answers),
        req.version,
    )
}

/// A group's configs: every share-group config, set or default.
fn group_entries(state: &KafkaState, group: &str) -> Vec<ConfigEntry> {
    let set = state.share.overrides(group);
    nagare_core::share_groups::GROUP_CONFIGS
        .iter()
        .map(|(name, default)| {
            let (value, source) = match set.get(*name) {
                Some(v) => (v.clone(), ConfigSource::DynamicGroupConfig),
                None => (default.to_string(), ConfigSource::DefaultConfig),
            };
            ConfigEntry {
                name: name.to_string(),
                value: Some(value.clone()),
                source,
                read_only: false,
                sensitive: false,
                kind: if value.parse::<i64>().is_ok() {
                    ConfigType::Int
                } else {
                    ConfigType::String
                },
                doc: "",
                synonyms: vec![ConfigSynonym {
                    name: name.to_string(),
                    value: Some(value),
                    source,
                }],
            }
        })
        .collect()
}

/// The broker's entries: the core's, plus what only the Kafka front end knows.
fn broker_entries(state: &KafkaState, scope: BrokerScope) -> Vec<ConfigEntry> {
    let mut entries = state.broker.describe_broker_configs(scope);
    if scope == BrokerScope::Node {
        let fixed = |name: &str, value: String, kind: ConfigType, doc: &'static str| ConfigEntry {
            name: name.to_string(),
            value: Some(value.clone()),
            source: ConfigSource::StaticBrokerConfig,
            read_only: true,
            sensitive: false,
            kind,
            doc,
            synonyms: vec![ConfigSynonym {
                name: name.to_string(),
                value: Some(value),
                source: ConfigSource::StaticBrokerConfig,
            }],
        };
        entries.push(fixed(
            "socket.request.max.bytes",
            state.config.max_request_bytes.to_string(),
            ConfigType::Int,
            "Largest request accepted (the [kafka] max_request_bytes setting).",
        ));
        entries.push(fixed(
            "advertised.listeners",
            format!(
                "PLAINTEXT://{}:{}",
                state.advertised_host, state.advertised_port
            ),
            ConfigType::String,
            "The address clients are told to connect to.",
        ));
        let txn = state.config.transaction_config();
        entries.push(fixed(
            "transaction.max.timeout.ms",
            txn.max_timeout_ms.to_string(),
            ConfigType::Int,
            "Largest transaction.timeout.ms a transactional producer may ask for ([kafka] transaction_max_timeout_ms).",
        ));
        entries.push(fixed(
            "transactional.id.expiration.ms",
            txn.id_expiration_ms.to_string(),
            ConfigType::Int,
            "An idle transactional id with no transaction in progress is forgotten after this ([kafka] transactional_id_expiration_ms).",
        ));
        entries.push(fixed(
            "transaction.partition.verification.enable",
            txn.partition_verification.to_string(),
            ConfigType::Boolean,
            "KIP-890: a transaction's first batch on a partition is checked with the coordinator ([kafka] transaction_partition_verification_enable).",
        ));
        entries.sort_by(|a, b| a.name.cmp(&b.name));
    }
    entries
}

fn to_wire(
    e: ConfigEntry,
    synonyms: bool,
    documentation: bool,
    version: i16,
) -> DescribeConfigsResourceResult {
    let mut out = DescribeConfigsResourceResult::default()
        .with_name(str_bytes(e.name))
        .with_value(if e.sensitive {
            None
        } else {
            e.value.map(str_bytes)
        })
        .with_read_only(e.read_only)
        .with_config_source(e.source as i8)
        .with_is_sensitive(e.sensitive);
    if synonyms {
        out = out.with_synonyms(
            e.synonyms
                .into_iter()
                .map(|s| {
                    DescribeConfigsSynonym::default()
                        .with_name(str_bytes(s.name))
                        .with_value(s.value.map(str_bytes))
                        .with_source(s.source as i8)
                })
                .collect(),
        );
    }
    if version >= 3 {
        out = out.with_config_type(e.kind as i8);
        if documentation {
            out = out.with_documentation(Some(str_bytes(e.doc)));
        }
    }
    out
}
