//! The HTTP agent of the admin client; HTTPS is not built in yet.

use std::path::Path;

pub(crate) fn agent(https: bool, _ca: Option<&Path>) -> anyhow::Result<ureq::Agent> {
    if https {
        anyhow::bail!("this build of nagare cannot talk HTTPS to the admin API");
    }
    Ok(ureq::AgentBuilder::new().build())
}
