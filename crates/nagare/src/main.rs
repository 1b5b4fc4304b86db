//! The `nagare` command: `serve` runs the broker; `topic`, `produce`, `consume` talk to a
//! running one; `bench` runs load generators against nagare or a peer broker.

mod acl_cmd;
mod acl_names;
mod admin_client;
mod admin_tls;
mod bench;
mod cli;
mod client_cmds;
mod config;
mod config_check;
mod config_store;
mod group_cmd;
mod http;
mod http_acls;
mod http_auth;
mod http_cluster;
mod http_connections;
mod http_console;
mod http_error;
mod http_forward;
mod http_groups;
mod http_messages;
mod http_queues;
mod http_status;
mod http_users;
mod metrics_groups;
mod metrics_process;
mod metrics_scrape;
mod output;
mod queue_cmd;
mod serve;
mod status_cmd;
mod tls_cmd;
mod topic_cmd;
mod user_cmd;

mod error_report;

use std::process::ExitCode;

use clap::Parser;

// mimalloc instead of glibc malloc: a STOMP or forward message allocates a few small
// buffers on its way through (headers, record, encoded frame), and in profiles of RPC
// over STOMP glibc's malloc and free took about a fifth of the broker's CPU. Built with
// `no_thp`: its advice to back its memory with 2 MiB transparent huge pages made the idle
// broker's RSS 20.6 MiB instead of 13.4 MiB.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error_report::render(&e));
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    match cli.command {
        cli::Command::Serve(args) => serve::run(args),
        cli::Command::Topic(args) => topic_cmd::run(args),
        cli::Command::User(args) => user_cmd::run(args),
        cli::Command::Acl(args) => acl_cmd::run(args),
        cli::Command::Group(args) => group_cmd::run(args),
        cli::Command::Queue(args) => queue_cmd::run(args),
        cli::Command::Status(args) => status_cmd::run(args),
        cli::Command::Produce(args) => client_cmds::produce(args),
        cli::Command::Consume(args) => client_cmds::consume(args),
        cli::Command::Bench(args) => bench::run(args),
        cli::Command::Tls(args) => tls_cmd::run(args),
        cli::Command::DefaultConfig => {
            print!("{}", config::Settings::default().to_toml()?);
            Ok(())
        }
    }
}
