//! `nagare user add|list|delete`: manages the user store, either offline on the data
//! directory of a stopped broker (`--data-dir`, taking the directory's lock as `serve`
//! does) or through the HTTP admin API of a running one. Passwords are never printed.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use nagare_core::security::UserStore;
use nagare_core::{Broker, BrokerConfig, CoreError};

use crate::admin_client::{path_segment, AdminClient, AdminConnection};
use crate::http_users::{view, AddUser, UserView};
use crate::output::Output;

#[derive(Debug, Args)]
pub(crate) struct UserArgs {
    #[command(flatten)]
    pub conn: AdminConnection,
    /// User to log in to the admin API as (a super user, or one allowed Alter on the
    /// cluster).
    #[arg(long, env = "NAGARE_ADMIN_USER", global = true)]
    pub admin_user: Option<String>,
    /// Password of --admin-user.
    #[arg(
        long,
        env = "NAGARE_ADMIN_PASSWORD",
        hide_env_values = true,
        global = true
    )]
    pub admin_password: Option<String>,
    /// Work offline on this data directory (the broker must be stopped) instead of
    /// through the HTTP admin API of the running broker.
    #[arg(long, value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub action: UserAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum UserAction {
    /// Create a user, or replace its password: PLAIN and SCRAM-SHA-256/512 credentials
    /// (salted hashes; the password itself is not stored).
    Add {
        name: String,
        /// The user's password.
        #[arg(long, required_unless_present = "password_stdin")]
        password: Option<String>,
        /// Read the password from the first line of standard input instead.
        #[arg(long, conflicts_with = "password")]
        password_stdin: bool,
        /// Also let the user log in over Fluentd forward. The forward handshake needs the
        /// password itself, so it is kept (apart, readable by the broker's OS user only).
        #[arg(long)]
        forward: bool,
    },
    /// List users and their credential kinds.
    List {
        #[arg(long, value_enum, default_value_t)]
        output: Output,
    },
    /// Delete a user and every credential.
    Delete { name: String },
}

pub(crate) fn run(args: UserArgs) -> anyhow::Result<()> {
    let action = match args.action {
        UserAction::Add {
            name,
            password,
            password_stdin,
            forward,
        } => {
            let password = match password {
                Some(p) if !password_stdin => p,
                _ => read_password_line()?,
            };
            Action::Add {
                name,
                password,
                forward,
            }
        }
        UserAction::List { output } => Action::List(output),
        UserAction::Delete { name } => Action::Delete(name),
    };
    match &args.data_dir {
        Some(dir) => offline(dir, action),
        None => {
            let client = AdminClient::new(
                &args.conn,
                args.admin_user.as_deref(),
                args.admin_password.as_deref(),
            )?;
            online(&client, action)
        }
    }
}

enum Action {
    Add {
        name: String,
        password: String,
        forward: bool,
    },
    List(Output),
    Delete(String),
}

fn read_password_line() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from standard input")?;
    let password = line.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        anyhow::bail!("no password on standard input");
    }
    Ok(password)
}

fn online(client: &AdminClient, action: Action) -> anyhow::Result<()> {
    match action {
        Action::Add {
            name,
            password,
            forward,
        } => {
            let body = AddUser {
                name,
                password,
                forward,
            };
            let u: UserView = client.post("/users", &body)?;
            println!("user {} saved{}", u.name, forward_note(u.forward));
        }
        Action::List(output) => print_users(&client.get::<Vec<UserView>>("/users")?, output)?,
        Action::Delete(name) => {
            client.delete(&format!("/users/{}", path_segment(&name)))?;
            println!("deleted user {name}");
        }
    }
    Ok(())
}

fn forward_note(forward: bool) -> &'static str {
    if forward {
        " (also for forward)"
    } else {
        ""
    }
}

fn offline(dir: &Path, action: Action) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = BrokerConfig {
            data_dir: dir.to_path_buf(),
            ..BrokerConfig::default()
        };
        let broker = tokio::task::spawn_blocking(move || Broker::open(config))
            .await?
            .map_err(|e| match e {
                CoreError::DataDirLocked { .. } => anyhow::anyhow!(
                    "{e}\nthe broker is running on {}: drop --data-dir to manage users \
                     through its HTTP admin API",
                    dir.display()
                ),
                e => anyhow::Error::from(e).context(format!("opening {}", dir.display())),
            })?;
        let b = broker.clone();
        let (store, writers) = tokio::task::spawn_blocking(move || UserStore::open(&b)).await??;
        let writing = tokio::spawn(writers.run());
        let result = apply(&store, action).await;
        let flushed = store.flush().await;
        drop(store);
        let _ = writing.await;
        let b = broker.clone();
        tokio::task::spawn_blocking(move || b.shutdown()).await??;
        flushed?;
        result
    })
}

async fn apply(store: &UserStore, action: Action) -> anyhow::Result<()> {
    match action {
        Action::Add {
            name,
            password,
            forward,
        } => {
            store.add(&name, &password, forward).await?;
            println!("user {name} saved{}", forward_note(forward));
        }
        Action::List(output) => {
            print_users(&store.list().iter().map(view).collect::<Vec<_>>(), output)?;
        }
        Action::Delete(name) => {
            if !store.delete(&name).await? {
                anyhow::bail!("no user {name:?}");
            }
            println!("deleted user {name}");
        }
    }
    Ok(())
}

fn print_users(users: &[UserView], output: Output) -> anyhow::Result<()> {
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(users)?),
        Output::Table => {
            println!(
                "{:<32} {:<6} {:<14} {:<14} {:<7}",
                "USER", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "FORWARD"
            );
            for u in users {
                let iterations = |m: &str| {
                    u.scram
                        .iter()
                        .find(|s| s.mechanism == m)
                        .map_or("-".to_string(), |s| format!("i={}", s.iterations))
                };
                println!(
                    "{:<32} {:<6} {:<14} {:<14} {:<7}",
                    u.name,
                    if u.plain { "yes" } else { "-" },
                    iterations("SCRAM-SHA-256"),
                    iterations("SCRAM-SHA-512"),
                    if u.forward { "yes" } else { "-" },
                );
            }
        }
    }
    Ok(())
}
