//! `nagare serve`: open the broker and its subsystems, bind every listener and run the
//! protocol front ends through the one listener layer ([`nagare_listener`]) until
//! SIGINT/SIGTERM, then stop accepting, let connections finish, flush and write the
//! clean-shutdown markers.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use nagare_core::{Broker, Subsystems};
use nagare_listener::{ConnectionLimits, ListenerOptions};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cli::ServeArgs;
use crate::config::Settings;

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let (settings, warnings) = Settings::load(&args)?;
    init_tracing(&settings.log);
    for w in warnings {
        tracing::warn!("{w}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("nagare")
        .build()?;
    runtime.block_on(serve(settings, args.ports_file))
}

fn init_tracing(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NAGARE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

async fn bind(name: &str, addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot bind the {name} listener to {addr}"))
}

async fn serve(settings: Settings, ports_file: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "nagare starting");
    let metrics = crate::http::install_metrics()?;
    let broker_config = settings.broker_config();
    let broker = tokio::task::spawn_blocking(move || Broker::open(broker_config))
        .await?
        .context("opening the data directory")?;
    // Every subsystem replays its internal log here, on the blocking pool, once for the
    // whole broker; the front ends receive them opened.
    let group_config = settings.kafka.protocol.group_config();
    let core_broker = broker.clone();
    let security_config = settings.security.core_config();
    let auth_required = security_config.auth_required;
    let (core, core_tasks) = tokio::task::spawn_blocking(move || {
        Subsystems::open(&core_broker, group_config, security_config)
    })
    .await?
    .context("opening producer ids, consumer groups and queues")?;
    core_tasks.spawn();
    let data_dir = std::fs::canonicalize(broker.data_dir())
        .unwrap_or_else(|_| broker.data_dir().to_path_buf());
    tracing::info!(
        cluster_id = broker.cluster_id(),
        "data directory {}",
        data_dir.display()
    );

    let kafka = bind("kafka", settings.kafka.listen).await?;
    let stomp = bind("stomp", settings.stomp.listen).await?;
    let forward = bind("forward", settings.forward.listen).await?;
    let http = bind("http", settings.http.listen).await?;
    let bound = [
        ("kafka", kafka.local_addr()?),
        ("stomp", stomp.local_addr()?),
        ("forward", forward.local_addr()?),
        ("http", http.local_addr()?),
    ];
    for (name, addr) in bound {
        tracing::info!(listener = name, %addr, "{name} listener on {addr}");
    }
    if let Some(path) = ports_file {
        write_ports_file(&path, &bound)?;
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    // One listener layer for every protocol: accept, limits, tracking, graceful stop.
    let limits = ConnectionLimits::new(
        settings.listeners.max_connections,
        settings.listeners.max_connections_per_ip,
    );
    let grace = Duration::from_millis(settings.listeners.shutdown_grace_ms);
    let options = |name| ListenerOptions {
        name,
        limits: limits.clone(),
        grace,
        auth_required,
    };

    // Without `advertise`, clients are told the bound address (the machine's name for a
    // wildcard bind).
    let kafka_config = settings.kafka.protocol.clone();
    let kafka_state = Arc::new(nagare_kafka::KafkaState::new(
        broker.clone(),
        &core,
        kafka_config,
        &kafka,
    ));
    tasks.spawn(named(
        "kafka",
        nagare_listener::run(
            kafka,
            options("kafka"),
            move |conn| nagare_kafka::handle(conn, kafka_state.clone()),
            stop_rx.clone(),
        ),
    ));

    let stomp_state = nagare_stomp::StompState::new(
        broker.clone(),
        core.queues.clone(),
        core.security.clone(),
        settings.stomp.protocol.clone(),
    );
    let queues = core.queues.clone();
    let stomp_stop = stop_rx.clone();
    let stomp_options = options("stomp");
    tasks.spawn(named("stomp", async move {
        let served = nagare_listener::run(
            stomp,
            stomp_options,
            move |conn| nagare_stomp::handle(conn, stomp_state.clone()),
            stomp_stop,
        )
        .await;
        // Every STOMP connection is done (requeued what it had in flight): write the
        // last queue acknowledgements.
        if let Err(e) = queues.flush().await {
            tracing::warn!(error = %e, "could not write queue acknowledgements at shutdown");
        }
        served
    }));

    let forward_state = nagare_forward::state(
        broker.clone(),
        settings.forward.protocol.clone(),
        core.security.clone(),
    )
    .context("forward listener")?;
    nagare_forward::start_udp_heartbeats(bound[2].1, &forward_state, stop_rx.clone()).await;
    tasks.spawn(named(
        "forward",
        nagare_listener::run(
            forward,
            options("forward"),
            move |conn| nagare_forward::handle(conn, forward_state.clone()),
            stop_rx.clone(),
        ),
    ));
    tasks.spawn(named(
        "http",
        crate::http::serve(
            http,
            crate::http::app(
                broker.clone(),
                metrics,
                crate::http_auth::HttpAuth {
                    security: core.security.clone(),
                    required: auth_required,
                    token: (!settings.http.token.is_empty())
                        .then(|| settings.http.token.as_str().into()),
                    protect_metrics: settings.http.metrics_auth,
                },
            ),
            stop_rx.clone(),
        ),
    ));
    tasks.spawn({
        let broker = broker.clone();
        let stop = stop_rx.clone();
        async move {
            broker.run_maintenance(stop).await;
            Ok(())
        }
    });
    if auth_required {
        tracing::info!(
            super_users = ?settings.security.super_users,
            "authentication required on every listener"
        );
    } else {
        tracing::info!("authentication off (--auth none): anonymous clients may connect");
    }
    tracing::info!("nagare {} ready", env!("CARGO_PKG_VERSION"));

    let mut failed = None;
    tokio::select! {
        signal = shutdown_signal() => tracing::info!(signal, "shutting down"),
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
    tracing::info!("nagare stopped");
    failed.map_or(Ok(()), Err)
}

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

fn write_ports_file(path: &std::path::Path, bound: &[(&str, SocketAddr)]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    for (name, addr) in bound {
        writeln!(f, "{name}={addr}")?;
    }
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
