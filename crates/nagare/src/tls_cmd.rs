//! `nagare tls self-signed`: a development CA and a server certificate signed by it (and,
//! on request, client certificates), written as PEM files ready for `--tls-cert`,
//! `--tls-key` and the clients' CA setting. For trying TLS out, not for production:
//! the CA's key sits beside the certificates.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

#[derive(Debug, Args)]
pub(crate) struct TlsArgs {
    #[command(subcommand)]
    command: TlsCommand,
}

#[derive(Debug, Subcommand)]
enum TlsCommand {
    /// Write a development CA (ca.pem, ca-key.pem), a server certificate it signed
    /// (server.pem, server-key.pem) for localhost, 127.0.0.1 and every --host, and a
    /// client certificate (NAME.pem, NAME-key.pem) for every --client.
    SelfSigned(SelfSignedArgs),
}

#[derive(Debug, Args)]
struct SelfSignedArgs {
    /// Directory to write the files to (created if missing).
    #[arg(long, visible_alias = "dir", value_name = "DIR", default_value = "tls")]
    out: PathBuf,
    /// More names or IP addresses the server is reached by (repeatable).
    #[arg(long = "host", value_name = "NAME")]
    hosts: Vec<String>,
    /// A client certificate for this user name (its common name), for mutual TLS
    /// (repeatable).
    #[arg(long = "client", value_name = "NAME")]
    clients: Vec<String>,
    /// Days the certificates stay valid.
    #[arg(long, default_value_t = 825)]
    days: u32,
    /// Replace files already there.
    #[arg(long)]
    force: bool,
}

pub(crate) fn run(args: TlsArgs) -> anyhow::Result<()> {
    match args.command {
        TlsCommand::SelfSigned(a) => self_signed(a),
    }
}

fn validity(params: &mut CertificateParams, days: u32) {
    let now = time::OffsetDateTime::now_utc();
    // A day of slack for clocks that run behind.
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(i64::from(days.max(1)));
}

fn named(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn.push(DnType::OrganizationName, "nagare development");
    dn
}

fn self_signed(a: SelfSignedArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut files = vec!["ca.pem", "ca-key.pem", "server.pem", "server-key.pem"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    for c in &a.clients {
        anyhow::ensure!(
            !c.is_empty()
                && c.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch)),
            "client name {c:?}: use letters, digits, '.', '_' and '-'"
        );
        files.push(format!("{c}.pem"));
        files.push(format!("{c}-key.pem"));
    }
    if !a.force {
        for f in &files {
            let p = a.out.join(f);
            anyhow::ensure!(
                !p.exists(),
                "{} exists already; pass --force to replace it",
                p.display()
            );
        }
    }

    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = named("nagare development CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut ca_params, a.days);
    let ca = ca_params.self_signed(&ca_key)?;

    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    names.extend(a.hosts.iter().cloned());
    names.dedup();
    let server_key = KeyPair::generate()?;
    let mut server = CertificateParams::new(names.clone())?;
    server.distinguished_name = named("localhost");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut server, a.days);
    let server = server.signed_by(&server_key, &ca, &ca_key)?;

    write(&a.out, "ca.pem", &ca.pem(), false)?;
    write(&a.out, "ca-key.pem", &ca_key.serialize_pem(), true)?;
    write(&a.out, "server.pem", &server.pem(), false)?;
    write(&a.out, "server-key.pem", &server_key.serialize_pem(), true)?;
    for c in &a.clients {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = named(c);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        validity(&mut params, a.days);
        let cert = params.signed_by(&key, &ca, &ca_key)?;
        write(&a.out, &format!("{c}.pem"), &cert.pem(), false)?;
        write(&a.out, &format!("{c}-key.pem"), &key.serialize_pem(), true)?;
    }
    let dir = a.out.display();
    println!(
        "wrote a development CA and certificates to {dir}/ (valid {} days)",
        a.days
    );
    println!("  server certificate for: {}", names.join(", "));
    println!("  start:   nagare serve --tls-cert {dir}/server.pem --tls-key {dir}/server-key.pem");
    println!("  clients: trust {dir}/ca.pem (e.g. ssl.ca.location={dir}/ca.pem)");
    for c in &a.clients {
        println!("  client certificate of User:{c}: {dir}/{c}.pem, key {dir}/{c}-key.pem");
    }
    Ok(())
}

fn write(dir: &Path, name: &str, pem: &str, secret: bool) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(pem.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
