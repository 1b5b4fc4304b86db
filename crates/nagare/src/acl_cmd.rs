//! `nagare acl ...`: manage the ACLs of a running broker through the HTTP admin API (the
//! same ACLs Kafka's CreateAcls/DescribeAcls/DeleteAcls manage).

use clap::{Args, Subcommand};

use crate::acl_names::AclWords;
use crate::admin_client::{path_segment, AdminClient, AdminConnection};
use crate::output::{print_json, Output};

#[derive(Debug, Args)]
pub(crate) struct AclArgs {
    #[command(flatten)]
    pub conn: AdminConnection,
    /// User to log in as (a super user, or one allowed Alter on the cluster).
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
    #[command(subcommand)]
    pub action: AclAction,
}

/// Which resource an ACL is about.
#[derive(Debug, Args, Default)]
#[group(multiple = false)]
pub(crate) struct Resource {
    /// A topic (STOMP `/topic/T` is topic T, `/queue/Q` is topic `queue.Q`).
    #[arg(long, value_name = "NAME")]
    topic: Option<String>,
    /// A consumer group.
    #[arg(long, value_name = "NAME")]
    group: Option<String>,
    /// A transactional id.
    #[arg(long, value_name = "ID")]
    transactional_id: Option<String>,
    /// The cluster (creating topics, managing users and ACLs, idempotent writes).
    #[arg(long)]
    cluster: bool,
}

impl Resource {
    fn words(&self) -> (Option<String>, Option<String>) {
        let named = |t: &str, n: &Option<String>| n.as_ref().map(|n| (t.to_string(), n.clone()));
        if self.cluster {
            return (Some("cluster".into()), None);
        }
        match named("topic", &self.topic)
            .or_else(|| named("group", &self.group))
            .or_else(|| named("transactional-id", &self.transactional_id))
        {
            Some((t, n)) => (Some(t), Some(n)),
            None => (None, None),
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum AclAction {
    /// Allow (or with --deny, refuse) operations on a resource to a principal.
    Add {
        /// `User:NAME`, `User:*` for everyone, `User:ANONYMOUS` for clients without a login.
        #[arg(long)]
        principal: String,
        /// read, write, create, delete, alter, describe, describe-configs, alter-configs,
        /// idempotent-write, all (repeat or comma-separate for several).
        #[arg(long, required = true, value_delimiter = ',')]
        operation: Vec<String>,
        #[command(flatten)]
        resource: Resource,
        /// The name is a prefix: the ACL covers every resource whose name starts with it.
        #[arg(long)]
        prefixed: bool,
        /// A DENY ACL (deny wins over any allow).
        #[arg(long)]
        deny: bool,
        /// Only for clients from this IP address [default: any].
        #[arg(long)]
        host: Option<String>,
    },
    /// List ACLs (all, or those matching the given fields).
    List {
        #[command(flatten)]
        filter: Filter,
        #[arg(long, value_enum, default_value_t)]
        output: Output,
    },
    /// Delete the ACLs matching the given fields (--all for every ACL).
    Delete {
        #[command(flatten)]
        filter: Filter,
        /// Delete every ACL.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct Filter {
    #[arg(long)]
    principal: Option<String>,
    #[arg(long)]
    operation: Option<String>,
    #[command(flatten)]
    resource: Resource,
    /// literal, prefixed, any, or match (every ACL that applies to the named resource).
    #[arg(long)]
    pattern: Option<String>,
    /// allow or deny.
    #[arg(long)]
    permission: Option<String>,
    #[arg(long)]
    host: Option<String>,
}

impl Filter {
    fn words(&self) -> AclWords {
        let (resource_type, name) = self.resource.words();
        AclWords {
            resource_type,
            name,
            pattern: self.pattern.clone(),
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: self.operation.clone(),
            permission: self.permission.clone(),
        }
    }
}

fn query(w: &AclWords) -> anyhow::Result<String> {
    let value = serde_json::to_value(w)?;
    let mut parts = Vec::new();
    if let serde_json::Value::Object(map) = value {
        for (k, v) in map {
            if let serde_json::Value::String(s) = v {
                parts.push(format!("{k}={}", path_segment(&s)));
            }
        }
    }
    Ok(if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    })
}

fn print(acls: &[AclWords]) {
    println!(
        "{:<16} {:<10} {:<30} {:<9} {:<18} {:<6} HOST",
        "PRINCIPAL", "TYPE", "RESOURCE", "PATTERN", "OPERATION", "PERM"
    );
    for a in acls {
        let f = |s: &Option<String>| s.clone().unwrap_or_default();
        println!(
            "{:<16} {:<10} {:<30} {:<9} {:<18} {:<6} {}",
            f(&a.principal),
            f(&a.resource_type),
            f(&a.name),
            f(&a.pattern),
            f(&a.operation),
            f(&a.permission),
            f(&a.host)
        );
    }
}

pub(crate) fn run(args: AclArgs) -> anyhow::Result<()> {
    let client = AdminClient::new(
        &args.conn,
        args.admin_user.as_deref(),
        args.admin_password.as_deref(),
    )?;
    match args.action {
        AclAction::Add {
            principal,
            operation,
            resource,
            prefixed,
            deny,
            host,
        } => {
            let (resource_type, name) = resource.words();
            if resource_type.is_none() {
                anyhow::bail!(
                    "say which resource: --topic, --group, --transactional-id or --cluster"
                );
            }
            let mut added = Vec::new();
            for op in operation {
                let words = AclWords {
                    resource_type: resource_type.clone(),
                    name: name.clone(),
                    pattern: Some(if prefixed { "prefixed" } else { "literal" }.into()),
                    principal: Some(principal.clone()),
                    host: host.clone(),
                    operation: Some(op),
                    permission: Some(if deny { "deny" } else { "allow" }.into()),
                };
                // Checked here too, so a typo fails before anything is sent.
                words.binding().map_err(anyhow::Error::msg)?;
                added.push(client.post::<AclWords, _>("/acls", &words)?);
            }
            print(&added);
        }
        AclAction::List { filter, output } => {
            let words = filter.words();
            words.filter().map_err(anyhow::Error::msg)?;
            let acls: Vec<AclWords> = client.get(&format!("/acls{}", query(&words)?))?;
            match output {
                Output::Json => print_json(&acls)?,
                Output::Table => print(&acls),
            }
        }
        AclAction::Delete { filter, all } => {
            let words = filter.words();
            if words == AclWords::default() && !all {
                anyhow::bail!("no field given: pass --all to delete every ACL");
            }
            words.filter().map_err(anyhow::Error::msg)?;
            let deleted: Vec<AclWords> = client.delete_json(&format!("/acls{}", query(&words)?))?;
            println!("deleted {} ACL(s)", deleted.len());
            print(&deleted);
        }
    }
    Ok(())
}
