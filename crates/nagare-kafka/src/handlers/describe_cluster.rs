//! DescribeCluster (60): this node is the whole cluster and its controller.

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use nagare_core::security::acl::CLUSTER_NAME;
use nagare_core::security::{Operation, ResourceType};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors;
use crate::session::Session;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeCluster,
    advertised: (0, 1),
    accepted: (0, 1),
    call: |state, session, req| Box::pin(handle(state, session, req)),
};

async fn handle(
    state: Arc<KafkaState>,
    session: Arc<Session>,
    req: ParsedRequest,
) -> Result<Reply, KafkaError> {
    let request: DescribeClusterRequest = decode(&req)?;
    let node = BrokerId(state.node_id());
    // As Kafka (`computeDescribeClusterResponse`): anyone authenticated may describe the
    // cluster, as with Metadata; Describe on the cluster only gates the authorized
    // operations, which are 0 without it.
    let operations = if !request.include_cluster_authorized_operations {
        i32::MIN
    } else if session.cluster_allowed(Operation::Describe) {
        session.authorized_operations(ResourceType::Cluster, CLUSTER_NAME)
    } else {
        0
    };
    let response = DescribeClusterResponse::default()
        .with_cluster_authorized_operations(operations)
        .with_error_code(errors::NONE)
        .with_cluster_id(str_bytes(state.broker.cluster_id()))
        .with_controller_id(node)
        .with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(node)
            .with_host(str_bytes(state.advertised_host.clone()))
            .with_port(state.advertised_port)]);
    encode(&response, req.version)
}
