//! DescribeCluster (60): this node is the whole cluster and its controller.

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors;
use crate::{KafkaError, KafkaState, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeCluster,
    advertised: (0, 1),
    accepted: (0, 1),
    call: |state, _session, req| Box::pin(handle(state, req)),
};

async fn handle(state: Arc<KafkaState>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let _request: DescribeClusterRequest = decode(&req)?;
    let node = BrokerId(state.node_id());
    let response = DescribeClusterResponse::default()
        .with_error_code(errors::NONE)
        .with_cluster_id(str_bytes(state.broker.cluster_id()))
        .with_controller_id(node)
        .with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(node)
            .with_host(str_bytes(state.advertised_host.clone()))
            .with_port(state.advertised_port)]);
    encode(&response, req.version)
}
