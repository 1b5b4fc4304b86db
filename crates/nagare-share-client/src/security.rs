//! Reaching a secured cluster, from Kafka client properties: `security.protocol`
//! PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; TLS with rustls (`ssl.ca.location`, a client
//! certificate with `ssl.certificate.location` and `ssl.key.location`,
//! `ssl.endpoint.identification.algorithm` https or none); SASL PLAIN, SCRAM-SHA-256 and
//! SCRAM-SHA-512 (`sasl.mechanism`, or librdkafka's `sasl.mechanisms`; `sasl.username`,
//! `sasl.password`) through SaslHandshake v1 and SaslAuthenticate.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::connection::Conn;
use crate::scram::{ScramClient, ScramHash};
use crate::ShareError;

/// CA bundles of common systems, tried in order when `ssl.ca.location` is not given
/// (librdkafka probes similar paths).
const SYSTEM_CA_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

#[derive(Debug, Default)]
pub(crate) struct Security {
    pub tls: Option<Tls>,
    pub sasl: Option<SaslLogin>,
}

pub(crate) struct Tls {
    connector: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mechanism {
    Plain,
    Scram(ScramHash),
}

impl Mechanism {
    fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(ScramHash::Sha256) => "SCRAM-SHA-256",
            Mechanism::Scram(ScramHash::Sha512) => "SCRAM-SHA-512",
        }
    }
}

pub(crate) struct SaslLogin {
    pub mechanism: Mechanism,
    pub username: String,
    password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

fn config_error(what: String) -> ShareError {
    ShareError::Config(what)
}

impl Security {
    /// Reads the security properties; `get` looks one up by name.
    pub(crate) fn from_properties<'a>(
        get: &dyn Fn(&str) -> Option<&'a str>,
    ) -> Result<Security, ShareError> {
        let protocol = get("security.protocol").unwrap_or("PLAINTEXT");
        let (tls, sasl) = match protocol.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => {
                return Err(config_error(format!(
                    "security.protocol {other} is not supported (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
                )))
            }
        };
        Ok(Security {
            tls: if tls {
                Some(Tls::from_properties(get)?)
            } else {
                None
            },
            sasl: if sasl {
                Some(SaslLogin::from_properties(get)?)
            } else {
                None
            },
        })
    }
}

impl SaslLogin {
    fn from_properties<'a>(get: &dyn Fn(&str) -> Option<&'a str>) -> Result<SaslLogin, ShareError> {
        let name = get("sasl.mechanism")
            .or_else(|| get("sasl.mechanisms"))
            .ok_or_else(|| {
                config_error(
                    "SASL needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)".into(),
                )
            })?;
        let mechanism = match name.to_ascii_uppercase().as_str() {
            "PLAIN" => Mechanism::Plain,
            "SCRAM-SHA-256" => Mechanism::Scram(ScramHash::Sha256),
            "SCRAM-SHA-512" => Mechanism::Scram(ScramHash::Sha512),
            other => {
                return Err(config_error(format!(
                    "sasl.mechanism {other} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
                )))
            }
        };
        let (Some(username), Some(password)) = (get("sasl.username"), get("sasl.password")) else {
            return Err(config_error(
                "SASL needs sasl.username and sasl.password".into(),
            ));
        };
        Ok(SaslLogin {
            mechanism,
            username: username.to_string(),
            password: password.to_string(),
        })
    }
}

fn read_pem(property: &str, path: &str) -> Result<Vec<u8>, ShareError> {
    std::fs::read(path).map_err(|e| config_error(format!("{property} {path}: {e}")))
}

impl Tls {
    fn from_properties<'a>(get: &dyn Fn(&str) -> Option<&'a str>) -> Result<Tls, ShareError> {
        if get("ssl.key.password").is_some_and(|p| !p.is_empty()) {
            return Err(config_error(
                "ssl.key.password is not supported: give an unencrypted key".into(),
            ));
        }
        if get("enable.ssl.certificate.verification")
            .is_some_and(|v| v.eq_ignore_ascii_case("false"))
        {
            return Err(config_error(
                "enable.ssl.certificate.verification=false is not supported: give the CA in ssl.ca.location".into(),
            ));
        }
        let (pem, from) = match get("ssl.ca.location").filter(|p| !p.is_empty()) {
            Some(path) => (read_pem("ssl.ca.location", path)?, path.to_string()),
            None => SYSTEM_CA_BUNDLES
                .iter()
                .find_map(|p| Some((std::fs::read(p).ok()?, p.to_string())))
                .ok_or_else(|| {
                    config_error("TLS needs ssl.ca.location (no system CA bundle found)".into())
                })?,
        };
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| config_error(format!("ssl.ca.location {from}: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| config_error(format!("ssl.ca.location {from}: {e}")))?;
        }
        if roots.is_empty() {
            return Err(config_error(format!(
                "ssl.ca.location {from}: no certificate"
            )));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error(format!("TLS: {e}")))?;
        let builder = match get("ssl.endpoint.identification.algorithm")
            .unwrap_or("https")
            .to_ascii_lowercase()
            .as_str()
        {
            "https" => builder.with_root_certificates(roots),
            "none" | "" => {
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| config_error(format!("TLS: {e}")))?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyName(webpki)))
            }
            other => {
                return Err(config_error(format!(
                    "ssl.endpoint.identification.algorithm {other} is not supported (https, none)"
                )))
            }
        };
        let config =
            match (get("ssl.certificate.location"), get("ssl.key.location")) {
                (Some(cert), Some(key)) => {
                    let certs = CertificateDer::pem_slice_iter(&read_pem(
                        "ssl.certificate.location",
                        cert,
                    )?)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| config_error(format!("ssl.certificate.location {cert}: {e}")))?;
                    let key = PrivateKeyDer::from_pem_slice(&read_pem("ssl.key.location", key)?)
                        .map_err(|e| config_error(format!("ssl.key.location {key}: {e}")))?;
                    builder
                        .with_client_auth_cert(certs, key)
                        .map_err(|e| config_error(format!("client certificate: {e}")))?
                }
                (None, None) => builder.with_no_client_auth(),
                _ => return Err(config_error(
                    "a client certificate needs both ssl.certificate.location and ssl.key.location"
                        .into(),
                )),
            };
        Ok(Tls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// The TLS handshake with the broker at `addr` (`host:port`), checked against `host`.
    pub(crate) async fn connect(
        &self,
        addr: &str,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, ShareError> {
        let host = match addr.rsplit_once(':') {
            Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
            None => addr,
        };
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| ShareError::Config(format!("{addr}: not a TLS server name: {e}")))?;
        self.connector.connect(name, tcp).await.map_err(|e| {
            // The broker's certificate refused (or ours by it) is not a network matter:
            // trying again will not help.
            let refused = e
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
            let what = format!("{addr}: TLS handshake failed: {e}");
            if refused {
                ShareError::Protocol(what)
            } else {
                ShareError::Unreachable(what)
            }
        })
    }
}

/// `ssl.endpoint.identification.algorithm=none`: the chain is verified as usual, the
/// certificate's names are not (brokers reached by an address their certificate omits).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// SaslHandshake v1 naming the mechanism, then SaslAuthenticate rounds: one for PLAIN,
/// two for SCRAM (whose server signature is checked).
pub(crate) async fn authenticate(conn: &Conn, login: &SaslLogin) -> Result<(), ShareError> {
    let v = conn.require(ApiKey::SaslHandshake, 1..=1)?;
    let resp = conn
        .request(
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str(login.mechanism.name())),
            v,
            Duration::ZERO,
        )
        .await?;
    if resp.error_code != 0 {
        let offered: Vec<String> = resp.mechanisms.iter().map(|m| m.to_string()).collect();
        return Err(ShareError::Kafka {
            code: resp.error_code,
            name: crate::error_names::error_name(resp.error_code),
            message: format!(
                "{} refused {}; it offers {}",
                conn.addr(),
                login.mechanism.name(),
                offered.join(", ")
            ),
        });
    }
    let v = conn.require(ApiKey::SaslAuthenticate, 0..=2)?;
    let round = |token: Vec<u8>| async move {
        let resp = conn
            .request(
                &SaslAuthenticateRequest::default().with_auth_bytes(token.into()),
                v,
                Duration::ZERO,
            )
            .await?;
        if resp.error_code != 0 {
            return Err(ShareError::kafka(
                resp.error_code,
                resp.error_message.as_ref(),
            ));
        }
        Ok(resp.auth_bytes)
    };
    match login.mechanism {
        Mechanism::Plain => {
            let token = format!("\0{}\0{}", login.username, login.password);
            round(token.into_bytes()).await?;
        }
        Mechanism::Scram(hash) => {
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            let mut scram = ScramClient::new(hash, &login.username, &login.password, &nonce);
            let server_first = round(scram.client_first()).await?;
            let server_final = round(scram.client_final(&server_first)?).await?;
            scram.verify_server_final(&server_final)?;
        }
    }
    tracing::debug!(addr = conn.addr(), user = %login.username, mechanism = login.mechanism.name(), "SASL login");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(props: &[(&str, &str)]) -> Result<Security, ShareError> {
        let get = |name: &str| props.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        Security::from_properties(&get)
    }

    #[test]
    fn protocols_and_mechanisms() {
        let s = parse(&[]).unwrap();
        assert!(s.tls.is_none() && s.sasl.is_none());
        let s = parse(&[
            ("security.protocol", "sasl_plaintext"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ])
        .unwrap();
        let login = s.sasl.unwrap();
        assert_eq!(login.mechanism, Mechanism::Scram(ScramHash::Sha512));
        assert!(!format!("{login:?}").contains("\"p\""));
        for bad in [
            &[("security.protocol", "SASL_GSSAPI")][..],
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "GSSAPI"),
            ],
            &[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "PLAIN"),
            ],
            &[("security.protocol", "SASL_PLAINTEXT")],
            &[
                ("security.protocol", "SSL"),
                ("ssl.ca.location", "/nonexistent.pem"),
            ],
            &[("security.protocol", "SSL"), ("ssl.key.password", "x")],
        ] {
            assert!(matches!(parse(bad), Err(ShareError::Config(_))), "{bad:?}");
        }
    }

    #[test]
    fn tls_from_a_ca_file() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, ca.cert.pem()).unwrap();
        let path = path.to_str().unwrap();
        for algorithm in ["https", "none"] {
            let s = parse(&[
                ("security.protocol", "SSL"),
                ("ssl.ca.location", path),
                ("ssl.endpoint.identification.algorithm", algorithm),
            ])
            .unwrap();
            assert!(s.tls.is_some());
        }
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "junk").unwrap();
        let err = parse(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", junk.to_str().unwrap()),
        ]);
        assert!(matches!(err, Err(ShareError::Config(ref m)) if m.contains("no certificate")));
    }
}
