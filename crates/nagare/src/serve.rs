//! `nagare serve`: open the broker and its subsystems, bind every listener and run the
//! protocol front ends through the one listener layer ([`nagare_listener`]) until
//! SIGINT/SIGTERM, then stop accepting, let connections finish, flush and write the
//! clean-shutdown markers.
//!
//! In cluster mode (`--store kafka://...`) the broker's topics are an Apache Kafka
//! cluster's ([`nagare_cluster`]): the gateway starts whether the cluster answers or not
//! (its listeners bound, `/healthz` saying why it is not ready), and stops only if the
//! cluster turns out unusable for it (no share groups).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use nagare_core::{Broker, Subsystems};
use nagare_listener::{ConnectionLimits, ConnectionRegistry, ListenerOptions, TlsContext};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cli::ServeArgs;
use crate::config::{AuthMode, LogFormat, Settings};

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let (settings, warnings) = Settings::load(&args)?;
    init_tracing(&settings.log, settings.log_format);
    for w in warnings {
        tracing::warn!("{w}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("nagare")
        .build()?;
    runtime.block_on(serve(settings, args.ports_file))
}

fn init_tracing(filter: &str, format: LogFormat) {
    // rustls warns about harmless client quirks (an IP address sent as SNI, as the Ruby
    // STOMP gem does) on every handshake; keep its errors only unless asked for more.
    let filter = tracing_subscriber::EnvFilter::try_from_env("NAGARE_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if filter.contains("rustls") {
            filter.to_string()
        } else {
            format!("{filter},rustls=error")
        })
    });
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        // No ANSI codes inside JSON strings, whatever stderr is.
        LogFormat::Json => fmt.json().with_ansi(false).init(),
    }
}

async fn bind(name: &str, addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot bind the {name} listener to {addr}"))
}

/// One bound listener and how it serves.
struct Bound {
    protocol: &'static str,
    /// Its name in the ports file: the protocol for the main listener, `kafka.1`,
    /// `kafka.2`... for the `[[kafka.listeners]]` entries.
    name: String,
    tcp: TcpListener,
    addr: SocketAddr,
    tls: bool,
    auth: AuthMode,
    advertise: Option<String>,
    /// The protocol's main listener (`listen`).
    main: bool,
}

/// Binds every listener: the four main ones (in cluster mode the Kafka one only when
/// its address was given), then each `[[PROTOCOL.listeners]]` entry.
async fn bind_all(settings: &Settings, tls_on: bool) -> anyhow::Result<Vec<Bound>> {
    let auth = settings.security.auth;
    let mut out = Vec::new();
    let kafka = settings
        .kafka_listener_on()
        .then_some(("kafka", settings.kafka.listen));
    for (protocol, addr) in kafka.into_iter().chain([
        ("stomp", settings.stomp.listen),
        ("forward", settings.forward.listen),
        ("http", settings.http.listen),
    ]) {
        let tcp = bind(protocol, addr).await?;
        out.push(Bound {
            protocol,
            name: protocol.to_string(),
            addr: tcp.local_addr()?,
            tcp,
            tls: tls_on,
            auth,
            advertise: None,
            main: true,
        });
    }
    let mut counts = std::collections::HashMap::new();
    for (protocol, extra) in settings.extra_listeners() {
        let n = counts.entry(protocol).or_insert(0);
        *n += 1;
        let tcp = bind(protocol, extra.listen).await?;
        out.push(Bound {
            protocol,
            name: format!("{protocol}.{n}"),
            addr: tcp.local_addr()?,
            tcp,
            tls: extra.tls.unwrap_or(tls_on),
            auth: extra.auth.unwrap_or(auth),
            advertise: extra.advertise.clone(),
            main: false,
        });
    }
    Ok(out)
}

/// Reloads the certificate and key (and client CA) on every SIGHUP: new connections get
/// the new ones, open connections keep theirs. A file that does not load leaves the old
/// certificate in place, and says why. Without TLS the signal is still caught: its
/// default action would end the process, and `systemctl reload` sends it.
async fn reload_on_sighup(
    tls: Option<Arc<TlsContext>>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    loop {
        tokio::select! {
            got = hup.recv() => {
                if got.is_none() {
                    return Ok(());
                }
                let Some(tls) = &tls else {
                    tracing::info!("SIGHUP: nothing to reload (TLS is off)");
                    continue;
                };
                match tls.reload() {
                    Ok(()) => tracing::info!(cert = %tls.files().cert.display(), "SIGHUP: TLS certificate reloaded"),
                    Err(e) => tracing::warn!(error = %e, "SIGHUP: TLS certificate not reloaded; keeping the current one"),
                }
            }
            _ = stopped(&mut stop) => return Ok(()),
        }
    }
}

async fn serve(settings: Settings, ports_file: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        commit = crate::http_status::COMMIT,
        "nagare starting"
    );
    let started_at_ms = nagare_core::log::now_ms();
    let metrics = crate::metrics_scrape::install()?;
    let broker_config = settings.broker_config();
    // Cluster mode: the clients of the cluster are made here; nothing is asked of the
    // cluster before the listeners are up.
    let cluster = match settings.cluster_config()? {
        Some(c) => Some(nagare_cluster::KafkaCluster::connect(c).context("cluster mode")?),
        None => None,
    };
    let store = cluster
        .clone()
        .map(|c| c as Arc<dyn nagare_core::store::ClusterCatalog>);
    let broker = tokio::task::spawn_blocking(move || match store {
        Some(store) => Broker::open_cluster(broker_config, store),
        None => Broker::open(broker_config),
    })
    .await?
    .context("opening the data directory")?;
    // Every subsystem replays its internal log here, on the blocking pool, once for the
    // whole broker; the front ends receive them opened.
    let group_config = settings.kafka.protocol.group_config();
    let transaction_config = settings.kafka.protocol.transaction_config();
    let core_broker = broker.clone();
    let security_config = settings.security.core_config();
    let auth_required = security_config.auth_required;
    let (core, core_tasks) = tokio::task::spawn_blocking(move || {
        Subsystems::open_with(
            &core_broker,
            group_config,
            security_config,
            transaction_config,
        )
    })
    .await?
    .context("opening producer ids, consumer groups and queues")?;
    core_tasks.spawn();
    let data_dir = std::fs::canonicalize(broker.data_dir())
        .unwrap_or_else(|_| broker.data_dir().to_path_buf());
    match &cluster {
        None => tracing::info!(
            cluster_id = broker.cluster_id(),
            "data directory {}",
            data_dir.display()
        ),
        Some(c) => {
            c.start();
            tracing::info!(
                node_id = settings.node_id,
                "cluster mode: topics, queues and consumer groups live in the Kafka cluster at \
                 {}; the data directory {} holds this gateway's own users, ACLs and forward \
                 secrets",
                nagare_core::store::ClusterCatalog::location(c.as_ref()),
                data_dir.display()
            );
        }
    }

    let tls = match settings.tls.files()? {
        Some(files) => {
            let ctx = TlsContext::load(files).context("TLS certificate")?;
            tracing::info!(
                cert = %ctx.files().cert.display(),
                client_auth = ?ctx.files().client_auth,
                "TLS on (reloaded on SIGHUP)"
            );
            Some(ctx)
        }
        None => None,
    };
    let listeners = bind_all(&settings, tls.is_some()).await?;
    for l in &listeners {
        tracing::info!(
            listener = l.protocol,
            addr = %l.addr,
            tls = l.tls,
            auth = ?l.auth,
            "{} listener on {}{}",
            l.protocol,
            l.addr,
            if l.tls { " (TLS)" } else { "" }
        );
    }
    if let Some(path) = ports_file {
        write_ports_file(&path, &listeners)?;
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tasks.spawn({
        let upkeep = crate::metrics_scrape::upkeep(metrics.clone(), stop_rx.clone());
        async move {
            upkeep.await;
            Ok(())
        }
    });
    // One listener layer for every protocol: accept, limits, TLS, idle timeout, tracking,
    // graceful stop.
    let limits = ConnectionLimits::new(
        settings.listeners.max_connections,
        settings.listeners.max_connections_per_ip,
    );
    // The admin API counts on its own: clients filling the protocol listeners up to the
    // limits must not lock the operator out of /metrics and the admin routes.
    let http_limits = ConnectionLimits::new(
        settings.listeners.max_connections,
        settings.listeners.max_connections_per_ip,
    );
    let grace = Duration::from_millis(settings.listeners.shutdown_grace_ms);
    let idle = |ms: u64| (ms > 0).then(|| Duration::from_millis(ms));

    let stomp_state = nagare_stomp::StompState::new(
        broker.clone(),
        core.queues.clone(),
        core.security.clone(),
        settings.stomp.protocol.clone(),
    );
    let forward_state = nagare_forward::state(
        broker.clone(),
        settings.forward.protocol.clone(),
        core.security.clone(),
    )
    .context("forward listener")?;
    let listener_views = listeners
        .iter()
        .map(|l| crate::http_status::ListenerView {
            name: l.name.clone(),
            protocol: l.protocol.to_string(),
            address: l.addr.to_string(),
            tls: l.tls,
        })
        .collect();
    // Every connection of every listener, for /connections, /status and the metrics.
    let registry = ConnectionRegistry::new();
    let http_app = crate::http::app(
        metrics,
        crate::http_auth::HttpAuth {
            security: core.security.clone(),
            required: auth_required,
            token: (!settings.http.token.is_empty()).then(|| settings.http.token.as_str().into()),
            protect_metrics: settings.http.metrics_auth,
        },
        crate::http::Ops {
            broker: broker.clone(),
            security: core.security.clone(),
            connections: registry.clone(),
            core: Some(core.clone()),
            forward: Some(forward_state.clone()),
            started_at_ms,
            listeners: Arc::new(listener_views),
        },
    );

    for l in listeners {
        // The metrics' `listener` label: `kafka`, or `kafka.1` for an extra listener. A
        // handful of names made once at startup, so leaking them for `'static` is fine.
        let label: &'static str = if l.main {
            l.protocol
        } else {
            Box::leak(l.name.clone().into_boxed_str())
        };
        let options = ListenerOptions {
            name: label,
            protocol: l.protocol,
            registry: registry.clone(),
            limits: if l.protocol == "http" {
                http_limits.clone()
            } else {
                limits.clone()
            },
            grace,
            auth_required: l.auth == AuthMode::Required,
            tls: if l.tls { tls.clone() } else { None },
            idle_timeout: match l.protocol {
                "kafka" => idle(settings.listeners.kafka_idle_ms),
                "stomp" => idle(settings.listeners.stomp_idle_ms),
                "forward" => idle(settings.forward.protocol.idle_timeout_ms),
                _ => idle(settings.listeners.http_idle_ms),
            },
        };
        let stop = stop_rx.clone();
        match l.protocol {
            "kafka" => {
                let mut config = settings.kafka.protocol.clone();
                if l.advertise.is_some() {
                    config.advertise = l.advertise.clone();
                }
                // Without `advertise`, clients are told the bound address (the machine's
                // name for a wildcard bind).
                let state = Arc::new(nagare_kafka::KafkaState::new(
                    broker.clone(),
                    &core,
                    config,
                    &l.tcp,
                ));
                tasks.spawn(named(
                    "kafka",
                    nagare_listener::run(
                        l.tcp,
                        options,
                        move |conn| nagare_kafka::handle(conn, state.clone()),
                        stop,
                    ),
                ));
            }
            "stomp" => {
                let state = stomp_state.clone();
                let queues = core.queues.clone();
                tasks.spawn(named("stomp", async move {
                    let served = nagare_listener::run(
                        l.tcp,
                        options,
                        move |conn| nagare_stomp::handle(conn, state.clone()),
                        stop,
                    )
                    .await;
                    // Every STOMP connection of this listener is done (requeued what it
                    // had in flight): write the last queue acknowledgements.
                    if let Err(e) = queues.flush().await {
                        tracing::warn!(error = %e, "could not write queue acknowledgements at shutdown");
                    }
                    served
                }));
            }
            "forward" => {
                if l.main {
                    nagare_forward::start_udp_heartbeats(l.addr, &forward_state, stop.clone())
                        .await;
                }
                let state = forward_state.clone();
                tasks.spawn(named(
                    "forward",
                    nagare_listener::run(
                        l.tcp,
                        options,
                        move |conn| nagare_forward::handle(conn, state.clone()),
                        stop,
                    ),
                ));
            }
            _ => {
                let app = http_app.clone();
                tasks.spawn(named(
                    "http",
                    nagare_listener::run(
                        l.tcp,
                        options,
                        move |conn| crate::http::serve_connection(conn, app.clone()),
                        stop,
                    ),
                ));
            }
        }
    }
    tasks.spawn(reload_on_sighup(tls, stop_rx.clone()));
    tasks.spawn({
        let broker = broker.clone();
        let stop = stop_rx.clone();
        async move {
            broker.run_maintenance(stop).await;
            Ok(())
        }
    });
    tasks.spawn({
        let broker = broker.clone();
        let stop = stop_rx.clone();
        async move {
            broker.run_log_cleaner(stop).await;
            Ok(())
        }
    });
    if cluster.is_some() {
        tasks.spawn({
            let broker = broker.clone();
            let stop = stop_rx.clone();
            async move {
                broker.run_cluster_sync(CLUSTER_SYNC, stop).await;
                Ok(())
            }
        });
        let bootstrap = match settings.store.url()? {
            nagare_cluster::StoreUrl::Kafka(b) => b.join(","),
            nagare_cluster::StoreUrl::Local => String::new(),
        };
        if settings.kafka_listener_on() {
            tracing::info!(
                "Kafka clients should connect to the cluster (bootstrap.servers={bootstrap}); \
                 this gateway's Kafka listener serves metadata and produce only (see \
                 docs/cluster-mode.md)"
            );
        } else {
            tracing::info!(
                "Kafka clients connect to the cluster: bootstrap.servers={bootstrap} (the \
                 gateway's Kafka listener is off)"
            );
        }
    }
    if auth_required {
        tracing::info!(
            super_users = ?settings.security.super_users,
            "authentication required on every listener"
        );
    } else {
        tracing::info!("authentication off (--auth none): anonymous clients may connect");
    }
    tracing::info!(
        "nagare {} (commit {}) ready",
        env!("CARGO_PKG_VERSION"),
        crate::http_status::COMMIT
    );

    let mut failed = None;
    let unusable = async {
        match &cluster {
            Some(c) => c.failed().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        signal = shutdown_signal() => tracing::info!(signal, "shutting down"),
        reason = unusable => {
            tracing::error!(%reason, "shutting down");
            failed = Some(anyhow::anyhow!("{reason}"));
        }
        Some(done) = tasks.join_next() => {
            // A listener died on its own: shut everything down rather than half-serve.
            let err = match done {
                Ok(Ok(())) => anyhow::anyhow!("a listener stopped unexpectedly"),
                Ok(Err(e)) => e,
                Err(e) => anyhow::anyhow!("a listener panicked: {e}"),
            };
            tracing::error!(error = %err, "shutting down");
            failed = Some(err);
        }
    }
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(Duration::from_secs(3), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("some connections did not finish within 3 s; closing anyway");
        tasks.abort_all();
    }
    let b = broker.clone();
    tokio::task::spawn_blocking(move || b.shutdown()).await??;
    if let Some(c) = cluster {
        // Waits a little for records still unacknowledged (their clients had no ack).
        tokio::task::spawn_blocking(move || c.close()).await?;
    }
    tracing::info!("nagare stopped");
    failed.map_or(Ok(()), Err)
}

/// How often a gateway lists the cluster's topics (topics made by Kafka clients appear).
const CLUSTER_SYNC: Duration = Duration::from_secs(5);

async fn named<E: Into<anyhow::Error>>(
    name: &'static str,
    fut: impl std::future::Future<Output = Result<(), E>>,
) -> anyhow::Result<()> {
    fut.await
        .map_err(|e| e.into().context(format!("{name} listener")))
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

fn write_ports_file(path: &std::path::Path, bound: &[Bound]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    for l in bound {
        writeln!(f, "{}={}", l.name, l.addr)?;
    }
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
