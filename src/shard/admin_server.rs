//! A shard's side of ZooKeeper's AdminServer (see `admin::admin_server`
//! and `admin::commands`): on shard 0, the HTTP endpoint; each command's
//! side effects and data gathered as the four-letter words gather theirs.

use std::os::unix::io::{FromRawFd, IntoRawFd};
use std::rc::Rc;

use crate::admin::admin_server::{self, AdminSetup, Routed};
use crate::admin::commands;
use crate::admin::four_letter::Needs;
use crate::admin::health::ServerRole;
use crate::admin::httpd;
use crate::admin::json::Json;

use super::Shard;

impl Shard {
    /// Runs the command asked for as `name` (as ZooKeeper's runCommand).
    async fn admin_command(&self, name: &str, kwargs: Vec<(String, String)>) -> Json {
        let runs = commands::lookup(name).filter(|c| {
            let serving = self.is_read_only() || self.health.role() != ServerRole::Looking;
            serving || !c.server_required
        });
        let Some(command) = runs else {
            // Unknown, or not serving: no side effect, nothing to gather.
            let view = self.admin_view(Needs::Nothing, "").await;
            return commands::run(name, &kwargs, &view);
        };
        match command.primary() {
            "stat_reset" => self.admin_effects("srst", None).await,
            "connection_stat_reset" => self.admin_effects("crst", None).await,
            "set_trace_mask" => {
                if let Ok(Some(mask)) = commands::trace_mask_arg(&kwargs) {
                    self.admin_effects("stmk", Some(mask)).await;
                }
            }
            _ => {}
        }
        let (needs, tree_word) = commands::needs(command.primary());
        let mut view = self.admin_view(needs, tree_word).await;
        if commands::lists_snapshots(command.primary()) {
            view.last_snapshot = crate::snapshot::list(&self.config.data_dir)
                .ok()
                .and_then(|l| l.into_iter().next());
        }
        let name = name.to_string();
        let run = move || commands::run(&name, &kwargs, &view);
        // As the four-letter words: listing every connection, session or
        // watch in Java's orders is done off the shard's thread.
        if needs == Needs::Full {
            glommio::executor().spawn_blocking(run).await
        } else {
            run()
        }
    }
}

/// Starts the AdminServer on this (shard 0's) executor.
pub(super) fn start(shard: Rc<Shard>, setup: AdminSetup) {
    let addr = setup.listener.local_addr().ok();
    // SAFETY: the descriptor comes from a listening std socket whose
    // ownership `into_raw_fd` gives up; glommio's listener now owns it.
    let listener = unsafe { glommio::net::TcpListener::from_raw_fd(setup.listener.into_raw_fd()) };
    let admin = shard.config.admin.clone();
    tracing::info!(
        shard = shard.id,
        addr = ?addr,
        command_url = %admin.command_url,
        "Started AdminServer"
    );
    let limits = admin_server::limits(&admin);
    let handler = move |request: httpd::Request| {
        let shard = shard.clone();
        let url = admin.command_url.clone();
        async move {
            match admin_server::route(&request, &url) {
                Routed::Command {
                    name,
                    kwargs,
                    head_only,
                } => {
                    let json = shard.admin_command(&name, kwargs).await;
                    admin_server::command_response(&json, head_only)
                }
                Routed::Links { head_only } => admin_server::links_response(&url, head_only),
                Routed::Answer(response) => response,
            }
        }
    };
    glommio::spawn_local(httpd::serve(listener, limits, handler)).detach();
}
