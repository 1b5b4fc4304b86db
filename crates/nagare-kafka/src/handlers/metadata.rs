//! Metadata (3): one broker (us, at the advertised address), which leads every partition.
//! A null topic list means every topic, an empty one none (v0: empty means every topic);
//! unknown topics are created when the client and the broker allow it.
//!
//! Authorization as in Kafka: Describe on a topic to see it (hidden from the all-topics
//! listing, TOPIC_AUTHORIZATION_FAILED when named), Create on the cluster or the topic to
//! have it auto-created.
//!
//! Kafka's internal topics (`__consumer_offsets`, `__transaction_state`) are listed with
//! `is_internal = true` once their coordinator runs: see `internal_topics.rs`.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use nagare_core::security::acl::CLUSTER_NAME;
use nagare_core::security::{Operation, ResourceType};
use nagare_core::Topic;
use uuid::Uuid;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{core_error, ResponseError};
use crate::internal_topics::{self, InternalTopic};
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::Metadata,
    advertised: (0, 12),
    accepted: (0, 12),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: MetadataRequest = decode(&req)?;
    let broker = &state.broker;
    let version = req.version;
    let all = match &request.topics {
        None => true,
        Some(t) => t.is_empty() && version == 0,
    };
    let auto_create =
        (version < 4 || request.allow_auto_topic_creation) && broker.config().auto_create_topics;
    let node = BrokerId(state.node_id());
    // Counted where it is used: only a refused topic is an error handed out.
    let denied = || ResponseError::TopicAuthorizationFailed.counted();
    let mut topics = Vec::new();
    // Described topics also carry what this client may do with them, when asked.
    let with_operations = |t: Described| {
        let name = t.name().to_string();
        let mut d = t.describe(node, version);
        if version >= 8 && request.include_topic_authorized_operations {
            d.topic_authorized_operations =
                session.authorized_operations(ResourceType::Topic, &name);
        }
        d
    };
    if all {
        // Topics the client may not describe are left out, not reported.
        let internal = internal_topics::all(broker)
            .into_iter()
            .map(Described::Internal);
        for t in broker
            .list_topics()
            .into_iter()
            .map(Described::Topic)
            .chain(internal)
        {
            if session.topic_allowed(Operation::Describe, t.name()) {
                topics.push(with_operations(t));
            }
        }
    } else {
        for wanted in request.topics.iter().flatten() {
            // A topic asked for by id may come with an empty name (the Java client
            // does when it resolves the topic ids of a KIP-848 assignment): the id
            // decides then, as in Kafka.
            let by_name = wanted
                .name
                .as_ref()
                .filter(|n| !n.is_empty() || wanted.topic_id.is_nil());
            let found = match by_name {
                Some(name) => {
                    let name: &str = name;
                    let failed = |code: i16| (code, Some(name.to_string()), Uuid::nil());
                    if !session.topic_allowed(Operation::Describe, name) {
                        // Checked before existence, so nothing is disclosed (and nothing
                        // created).
                        Err(failed(denied()))
                    } else if let Some(t) = internal_topics::by_name(broker, name) {
                        Ok(Described::Internal(t))
                    } else if let Some(t) = broker.topic(name) {
                        Ok(Described::Topic(t))
                    } else if auto_create && !may_create(&session, name) {
                        Err(failed(denied()))
                    } else if auto_create {
                        broker
                            .topic_or_create(name)
                            .map(Described::Topic)
                            .map_err(|e| failed(core_error(&e).counted()))
                    } else {
                        Err(failed(ResponseError::UnknownTopicOrPartition.counted()))
                    }
                }
                None => match broker
                    .list_topics()
                    .into_iter()
                    .find(|t| t.id() == wanted.topic_id)
                    .map(Described::Topic)
                    .or_else(|| {
                        internal_topics::by_id(broker, wanted.topic_id).map(Described::Internal)
                    }) {
                    None => Err((
                        ResponseError::UnknownTopicId.counted(),
                        None,
                        wanted.topic_id,
                    )),
                    // Ids are not secret: Kafka answers TOPIC_AUTHORIZATION_FAILED with
                    // the id (and no name) here.
                    Some(t) if !session.topic_allowed(Operation::Describe, t.name()) => {
                        Err((denied(), None, wanted.topic_id))
                    }
                    Some(t) => Ok(t),
                },
            };
            topics.push(match found {
                Ok(t) => with_operations(t),
                Err((error_code, name, id)) => MetadataResponseTopic::default()
                    .with_error_code(error_code)
                    .with_name(name.map(|n| TopicName(str_bytes(n))))
                    .with_topic_id(if version >= 10 { id } else { Uuid::nil() }),
            });
        }
    }
    let mut response = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(node)
            .with_host(str_bytes(state.advertised_host.clone()))
            .with_port(state.advertised_port)])
        .with_cluster_id((version >= 2).then(|| str_bytes(broker.cluster_id())))
        .with_controller_id(if version >= 1 { node } else { BrokerId(-1) })
        .with_topics(topics);
    // The field exists at v8-10 only; 0 (not the "not asked" sentinel) without Describe.
    if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = if session.cluster_allowed(Operation::Describe) {
            session.authorized_operations(ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        };
    }
    encode(&response, version)
}

/// Auto-creation needs Create on the cluster or on the topic itself.
fn may_create(session: &Session, topic: &str) -> bool {
    session.cluster_allowed(Operation::Create) || session.topic_allowed(Operation::Create, topic)
}

/// A topic found for the answer: an ordinary one or one of Kafka's internal topics.
enum Described {
    Topic(Arc<Topic>),
    Internal(InternalTopic),
}

impl Described {
    fn name(&self) -> &str {
        match self {
            Described::Topic(t) => t.name(),
            Described::Internal(t) => t.name,
        }
    }

    fn describe(&self, node: BrokerId, version: i16) -> MetadataResponseTopic {
        let (id, indexes, internal) = match self {
            Described::Topic(t) => (
                t.id(),
                t.partitions().iter().map(|p| p.index()).collect(),
                false,
            ),
            Described::Internal(t) => (t.id, vec![t.partition.index()], true),
        };
        let partitions = indexes
            .into_iter()
            .map(|index| {
                MetadataResponsePartition::default()
                    .with_partition_index(index)
                    .with_leader_id(node)
                    .with_leader_epoch(if version >= 7 { 0 } else { -1 })
                    .with_replica_nodes(vec![node])
                    .with_isr_nodes(vec![node])
            })
            .collect();
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(str_bytes(self.name().to_string()))))
            .with_topic_id(if version >= 10 { id } else { Uuid::nil() })
            .with_is_internal(internal)
            .with_partitions(partitions)
    }
}
