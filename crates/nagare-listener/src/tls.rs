//! TLS for every listener: one rustls server configuration built from PEM files, shared
//! by every listener that has TLS on, and swapped in place on reload (SIGHUP) so new
//! connections get the new certificate while open ones keep theirs.
//!
//! A client certificate, when the configuration asks for one and the client presents one
//! signed by `client_ca`, names the connection's principal: `User:<common name>` (Kafka's
//! default principal is the whole distinguished name; the common name is what its
//! `ssl.principal.mapping.rules` are most often written to extract).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nagare_core::security::Principal;
use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// Whether clients must show a certificate (Kafka's `ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// Never asked for.
    #[default]
    None,
    /// Asked for and verified when given; a client without one logs in by its protocol.
    Requested,
    /// The handshake fails without a valid one.
    Required,
}

/// Where the certificate, key and client CA are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

/// What can go wrong loading the files; names the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {what}")]
    Content { path: PathBuf, what: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The live TLS configuration of the server.
pub struct TlsContext {
    files: TlsFiles,
    current: RwLock<Arc<ServerConfig>>,
}

impl TlsContext {
    /// Loads the files once; fails with a message naming the file at fault.
    pub fn load(files: TlsFiles) -> Result<Arc<TlsContext>, TlsError> {
        let config = build(&files)?;
        Ok(Arc::new(TlsContext {
            files,
            current: RwLock::new(config),
        }))
    }

    /// Reads the files again and, if they make a valid configuration, uses it for every
    /// connection from now on; on error the old one stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = build(&self.files)?;
        *self.current.write() = config;
        Ok(())
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.read().clone())
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn build(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = read_certs(&files.cert)?;
    let key = read_key(&files.key)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match (&files.client_ca, files.client_auth) {
        (_, ClientAuth::None) => builder.with_no_client_auth(),
        (None, _) => {
            return Err(TlsError::Config(
                "client certificates are asked for but no client CA is set (tls.client_ca)".into(),
            ))
        }
        (Some(ca), mode) => {
            let mut roots = RootCertStore::empty();
            for c in read_certs(ca)? {
                roots.add(c).map_err(|e| TlsError::Content {
                    path: ca.clone(),
                    what: format!("not a usable CA certificate: {e}"),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            let verifier = if mode == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| TlsError::Config(e.to_string()))?,
            )
        }
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Content {
            path: files.key.clone(),
            what: format!("does not go with the certificate: {e}"),
        })?;
    Ok(Arc::new(config))
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Content {
            path: path.to_path_buf(),
            what: format!("not PEM certificates: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Content {
            path: path.to_path_buf(),
            what: "no CERTIFICATE block in the file".into(),
        });
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError::Content {
        path: path.to_path_buf(),
        what: format!("no usable PEM private key: {e}"),
    })
}

/// The principal a verified client certificate names: `User:<CN>`; anonymous when there
/// is none or it has no common name.
pub(crate) fn principal_of(certs: Option<&[CertificateDer<'_>]>) -> Principal {
    let Some(leaf) = certs.and_then(|c| c.first()) else {
        return Principal::Anonymous;
    };
    match x509_parser::parse_x509_certificate(leaf.as_ref()) {
        Ok((_, cert)) => cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .filter(|cn| !cn.is_empty())
            .map(Principal::user)
            .unwrap_or(Principal::Anonymous),
        Err(_) => Principal::Anonymous,
    }
}
