//! DescribeUserScramCredentials (50): the SCRAM mechanisms and iteration counts of users
//! in the broker's one user store (never a credential). Needs Describe on the cluster.

use crate::meters::Counted;
use std::sync::Arc;

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    ApiKey, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use nagare_core::security::{Operation, UserInfo};

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::session::Session;
use crate::{KafkaError, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::DescribeUserScramCredentials,
    advertised: (0, 0),
    accepted: (0, 0),
    call: |_state, session, req| Box::pin(handle(session, req)),
};

async fn handle(session: Arc<Session>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: DescribeUserScramCredentialsRequest = decode(&req)?;
    let mut response = DescribeUserScramCredentialsResponse::default();
    if !session.cluster_allowed(Operation::Describe) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.counted();
        return encode(&response, req.version);
    }
    let users = &session.security().users;
    response.results = match request.users.filter(|u| !u.is_empty()) {
        // Every user with a SCRAM credential.
        None => users
            .list()
            .iter()
            .filter(|u| !u.scram.is_empty())
            .map(described)
            .collect(),
        Some(names) => {
            let mut seen = std::collections::HashSet::new();
            names
                .iter()
                .map(|n| {
                    let name = n.name.as_str();
                    let mut r =
                        DescribeUserScramCredentialsResult::default().with_user(str_bytes(name));
                    if !seen.insert(name) {
                        r.error_code = ResponseError::DuplicateResource.counted();
                        r.error_message = Some(str_bytes("user named twice in one request"));
                        return r;
                    }
                    match users.get(name).filter(|u| !u.scram.is_empty()) {
                        Some(u) => described(&u),
                        None => {
                            r.error_code = ResponseError::ResourceNotFound.counted();
                            r.error_message =
                                Some(str_bytes(format!("no SCRAM credential for user {name}")));
                            r
                        }
                    }
                })
                .collect()
        }
    };
    response.error_code = errors::NONE;
    encode(&response, req.version)
}

fn described(u: &UserInfo) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(str_bytes(u.name.as_str()))
        .with_credential_infos(
            u.scram
                .iter()
                .map(|(m, i)| {
                    CredentialInfo::default()
                        .with_mechanism(m.kafka_type())
                        .with_iterations(*i as i32)
                })
                .collect(),
        )
}
