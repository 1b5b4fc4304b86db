//! The HTTP agent of the admin client: plain HTTP, or HTTPS trusting the system's roots
//! or, with `--ca FILE`, the CA that signed the broker's certificate (a private or
//! `nagare tls self-signed` one).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

pub(crate) fn agent(https: bool, ca: Option<&Path>) -> anyhow::Result<ureq::Agent> {
    let builder = ureq::AgentBuilder::new();
    let Some(ca) = ca.filter(|_| https) else {
        return Ok(builder.build());
    };
    let pem = std::fs::read(ca).with_context(|| format!("reading the CA file {}", ca.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.with_context(|| format!("{}: not PEM certificates", ca.display()))?;
        roots
            .add(cert)
            .with_context(|| format!("{}: not a usable CA certificate", ca.display()))?;
    }
    anyhow::ensure!(!roots.is_empty(), "{}: no CERTIFICATE block", ca.display());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(builder.tls_config(Arc::new(config)).build())
}
