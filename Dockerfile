# syntax=docker/dockerfile:1
# nagare in a container: a Rust builder stage, then a small Debian runtime running as an
# unprivileged user.
#
#   docker build -t nagare .
#   docker run --rm -i -v nagare-data:/var/lib/nagare nagare \
#       user add admin --password-stdin --data-dir /var/lib/nagare <<<"s3cret"
#   docker run -d --name nagare -v nagare-data:/var/lib/nagare \
#       -e NAGARE_SECURITY_SUPER_USERS=admin -e NAGARE_KAFKA_ADVERTISE=localhost:9092 \
#       -p 9092:9092 -p 61613:61613 -p 24224:24224 -p 24224:24224/udp -p 9644:9644 nagare
#
# Listeners bind every interface of the container, so authentication is on by default
# (see README "Install" and SECURITY.md).

FROM rust:1-bookworm AS builder
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY .cargo ./.cargo
COPY crates ./crates
# The release profile strips the binary (about 14.8 MB). Cache mounts keep the registry
# and the build between image builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p nagare \
    && install -D -m 0755 target/release/nagare /out/nagare

FROM debian:bookworm-slim
# curl answers the HEALTHCHECK; ca-certificates for `--http https://...` CLI calls.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 nagare \
    && useradd --system --uid 10001 --gid nagare --home-dir /var/lib/nagare \
        --shell /usr/sbin/nologin nagare \
    && install -d -o nagare -g nagare -m 0750 /var/lib/nagare
COPY --from=builder /out/nagare /usr/bin/nagare

# Every setting is a NAGARE_* variable (README "Running"); these make the container
# reachable through published ports and keep the data in the volume.
ENV NAGARE_DATA_DIR=/var/lib/nagare \
    NAGARE_KAFKA_LISTEN=0.0.0.0:9092 \
    NAGARE_STOMP_LISTEN=0.0.0.0:61613 \
    NAGARE_FORWARD_LISTEN=0.0.0.0:24224 \
    NAGARE_HTTP_LISTEN=0.0.0.0:9644 \
    NAGARE_SECURITY_AUTH=required

USER nagare:nagare
WORKDIR /var/lib/nagare
VOLUME ["/var/lib/nagare"]
# Kafka, STOMP, Fluentd forward (TCP, and UDP heartbeats), HTTP admin (/healthz, /metrics).
EXPOSE 9092 61613 24224 24224/udp 9644
# /healthz needs no login. With TLS on the HTTP listener, use https:// and -k.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD curl -fsS http://127.0.0.1:9644/healthz || exit 1
# SIGTERM stops nagare cleanly (connections finish, logs fsync); give it time to.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/nagare"]
CMD ["serve"]
