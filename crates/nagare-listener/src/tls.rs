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
    config_for(certs, key, files)
}

/// The server configuration for a certificate chain and key already read.
pub(crate) fn config_for(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    files: &TlsFiles,
) -> Result<Arc<ServerConfig>, TlsError> {
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
    parse_certs(&pem, path)
}

pub(crate) fn parse_certs(
    pem: &[u8],
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
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
    parse_key(&pem, path)
}

pub(crate) fn parse_key(pem: &[u8], path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| TlsError::Content {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    fn files(cert: PathBuf, key: PathBuf) -> TlsFiles {
        TlsFiles {
            cert,
            key,
            client_ca: None,
            client_auth: ClientAuth::None,
        }
    }

    #[test]
    fn loads_a_pair_and_names_the_file_at_fault() {
        let dir = tempfile::tempdir().expect("tempdir");
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        let cert = write(dir.path(), "c.pem", &made.cert.pem());
        let key = write(dir.path(), "k.pem", &made.key_pair.serialize_pem());
        let wrong_key = write(dir.path(), "w.pem", &other.key_pair.serialize_pem());
        let junk = write(dir.path(), "j.pem", "junk");
        let ctx = TlsContext::load(files(cert.clone(), key.clone())).expect("loads");
        assert!(ctx.reload().is_ok());
        let err = |f| {
            TlsContext::load(f)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(err(files(cert.clone(), wrong_key)).contains("w.pem"));
        assert!(err(files(junk.clone(), key.clone())).contains("j.pem"));
        assert!(err(files(dir.path().join("none.pem"), key.clone())).contains("none.pem"));
        let mut required = files(cert, key);
        required.client_auth = ClientAuth::Required;
        assert!(err(required).contains("client CA"));
    }

    #[test]
    fn a_client_certificate_names_its_common_name() {
        let mut params = rcgen::CertificateParams::new(vec!["x".into()]).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        assert_eq!(
            principal_of(Some(&[cert.der().clone()])),
            Principal::user("alice")
        );
        assert_eq!(principal_of(None), Principal::Anonymous);
        assert_eq!(
            principal_of(Some(&[CertificateDer::from(vec![1, 2, 3])])),
            Principal::Anonymous
        );
    }
}
