//! SCRAM (RFC 5802, RFC 7677) on the server side: credentials and the two-message
//! exchange Kafka's SaslAuthenticate carries.

use super::users::UserStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// `SCRAM-SHA-256` / `SCRAM-SHA-512`.
    pub fn sasl_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_sasl_name(name: &str) -> Option<ScramMechanism> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// Kafka's mechanism number (DescribeUserScramCredentials): 1 = SHA-256, 2 = SHA-512.
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_type(t: i8) -> Option<ScramMechanism> {
        match t {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }
}

/// What the server keeps of a SCRAM password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

/// Why an exchange failed; the message is safe to show the client.
#[derive(Debug, thiserror::Error)]
pub enum ScramError {
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    #[error("authentication failed")]
    Failed { user: String },
}

/// One server-side SCRAM exchange: client-first → server-first → client-final →
/// server-final.
pub struct ServerExchange {
    mechanism: ScramMechanism,
}

impl ServerExchange {
    pub fn new(mechanism: ScramMechanism) -> ServerExchange {
        ServerExchange { mechanism }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Takes the client-first message, answers the server-first one.
    pub fn client_first(&mut self, _msg: &[u8], _users: &UserStore) -> Result<Vec<u8>, ScramError> {
        Err(ScramError::Malformed("not implemented yet"))
    }

    /// Takes the client-final message; on success answers the server-final message and
    /// the authenticated user name.
    pub fn client_final(&mut self, _msg: &[u8]) -> Result<(Vec<u8>, String), ScramError> {
        Err(ScramError::Malformed("not implemented yet"))
    }
}
