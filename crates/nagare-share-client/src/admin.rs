//! Setting a share group's configs (Kafka 4's GROUP config resource) with
//! IncrementalAlterConfigs: `share.auto.offset.reset=earliest` must be set before the
//! first member joins, or records produced before it are never delivered (the default
//! is `latest`). Any broker takes the request.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{ApiKey, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::config::Settings;
use crate::error::code;
use crate::{ShareClientConfig, ShareError};

/// ConfigResource type of a group (Kafka 4).
const RESOURCE_GROUP: i8 = 32;
/// IncrementalAlterConfigs' SET operation.
const SET: i8 = 0;

/// Sets `configs` (name, value) on share group `group`, e.g.
/// `[("share.auto.offset.reset", "earliest")]`. Other configs of the group are kept.
pub async fn set_group_configs(
    config: &ShareClientConfig,
    group: &str,
    configs: &[(&str, &str)],
) -> Result<(), ShareError> {
    let cluster = Cluster::new(Arc::new(Settings::from_config(config)?));
    let conn = cluster.any().await?;
    let v = conn.require(ApiKey::IncrementalAlterConfigs, 0..=1)?;
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(RESOURCE_GROUP)
            .with_resource_name(StrBytes::from_string(group.to_string()))
            .with_configs(
                configs
                    .iter()
                    .map(|(name, value)| {
                        AlterableConfig::default()
                            .with_name(StrBytes::from_string(name.to_string()))
                            .with_config_operation(SET)
                            .with_value(Some(StrBytes::from_string(value.to_string())))
                    })
                    .collect(),
            ),
    ]);
    let resp = conn.request(&req, v, Duration::ZERO).await?;
    match resp.responses.first() {
        Some(r) if r.error_code == code::NONE => Ok(()),
        Some(r) => Err(ShareError::kafka(r.error_code, r.error_message.as_ref())),
        None => Err(ShareError::Protocol(
            "IncrementalAlterConfigs answered no resource".into(),
        )),
    }
}
