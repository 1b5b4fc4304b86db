//! AlterUserScramCredentials (51): sets and removes SCRAM credentials in the broker's
//! one user store (as `kafka-configs --alter --add-config SCRAM-SHA-256=...` and
//! AdminClient do). The client sends the salted password, never the password. Needs Alter
//! on the cluster. One result per user, Kafka's errors: a user named twice (same
//! mechanism) is a DUPLICATE_RESOURCE, an unknown mechanism UNSUPPORTED_SASL_MECHANISM,
//! bad iterations or salt UNACCEPTABLE_CREDENTIAL, deleting a missing credential
//! RESOURCE_NOT_FOUND.

use crate::meters::Counted;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
};
use nagare_core::security::scram::ScramMechanism;
use nagare_core::security::Operation;

use super::{decode, encode, str_bytes, Handler};
use crate::codec::ParsedRequest;
use crate::errors::{self, ResponseError};
use crate::session::Session;
use crate::{KafkaError, Reply};

pub(crate) const HANDLER: Handler = Handler {
    key: ApiKey::AlterUserScramCredentials,
    advertised: (0, 0),
    accepted: (0, 0),
    call: |_state, session, req| Box::pin(handle(session, req)),
};

type Outcome = (i16, Option<String>);

async fn handle(session: Arc<Session>, req: ParsedRequest) -> Result<Reply, KafkaError> {
    let request: AlterUserScramCredentialsRequest = decode(&req)?;
    let allowed = session.cluster_allowed(Operation::Alter);
    // One outcome per user, the first error winning.
    let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut seen: HashSet<(String, i8)> = HashSet::new();
    let fail =
        |outcomes: &mut BTreeMap<String, Outcome>, user: &str, e: ResponseError, m: String| {
            let entry = outcomes
                .entry(user.to_string())
                .or_insert((errors::NONE, None));
            if entry.0 == errors::NONE {
                *entry = (e.counted(), Some(m));
            }
        };
    let names = request
        .deletions
        .iter()
        .map(|d| (d.name.as_str(), d.mechanism))
        .chain(
            request
                .upsertions
                .iter()
                .map(|u| (u.name.as_str(), u.mechanism)),
        );
    for (name, mechanism) in names {
        outcomes
            .entry(name.to_string())
            .or_insert((errors::NONE, None));
        if !allowed {
            fail(
                &mut outcomes,
                name,
                ResponseError::ClusterAuthorizationFailed,
                "Alter on the cluster is required".into(),
            );
        } else if !seen.insert((name.to_string(), mechanism)) {
            fail(
                &mut outcomes,
                name,
                ResponseError::DuplicateResource,
                "a user's mechanism named twice in one request".into(),
            );
        } else if ScramMechanism::from_kafka_type(mechanism).is_none() {
            fail(
                &mut outcomes,
                name,
                ResponseError::UnsupportedSaslMechanism,
                format!("unknown SCRAM mechanism {mechanism}"),
            );
        }
    }
    let users = &session.security().users;
    for d in &request.deletions {
        let name = d.name.as_str();
        if outcomes.get(name).is_some_and(|o| o.0 != errors::NONE) {
            continue;
        }
        let Some(m) = ScramMechanism::from_kafka_type(d.mechanism) else {
            continue;
        };
        match users.delete_scram(name, m).await {
            Ok(true) => {
                tracing::info!(user = name, by = %session.principal(), mechanism = m.sasl_name(), "SCRAM credential deleted")
            }
            Ok(false) => fail(
                &mut outcomes,
                name,
                ResponseError::ResourceNotFound,
                format!("user {name} has no {} credential", m.sasl_name()),
            ),
            Err(e) => fail(
                &mut outcomes,
                name,
                ResponseError::UnknownServerError,
                e.to_string(),
            ),
        }
    }
    for u in &request.upsertions {
        let name = u.name.as_str();
        if outcomes.get(name).is_some_and(|o| o.0 != errors::NONE) {
            continue;
        }
        let Some(m) = ScramMechanism::from_kafka_type(u.mechanism) else {
            continue;
        };
        let iterations = u32::try_from(u.iterations).unwrap_or(0);
        match users
            .upsert_scram(name, m, iterations, &u.salt, &u.salted_password)
            .await
        {
            Ok(()) => {
                tracing::info!(user = name, by = %session.principal(), mechanism = m.sasl_name(), "SCRAM credential set")
            }
            Err(e) => fail(
                &mut outcomes,
                name,
                ResponseError::UnacceptableCredential,
                e.to_string(),
            ),
        }
    }
    let results = outcomes
        .into_iter()
        .map(|(user, (code, message))| {
            AlterUserScramCredentialsResult::default()
                .with_user(str_bytes(user))
                .with_error_code(code)
                .with_error_message(message.map(str_bytes))
        })
        .collect();
    encode(
        &AlterUserScramCredentialsResponse::default().with_results(results),
        req.version,
    )
}
