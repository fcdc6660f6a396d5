//! `server.N` lines while ringkeeper runs standalone only.
//!
//! ZooKeeper 3.8 runs standalone when the config names at most one voting
//! server and `standaloneEnabled` is true (the default):
//! `QuorumPeerConfig.isDistributed()` is `quorumVerifier != null &&
//! (!standaloneEnabled || votingMembers > 1)`. So one `server.N` line (a
//! participant) is accepted and runs standalone, as ZooKeeper does. Anything
//! that would make ZooKeeper run a quorum is refused: starting each server
//! of a copied 3-server zoo.cfg standalone would give three independent
//! data trees that each accept writes (split brain by configuration).

use std::collections::BTreeMap;

use super::ServerSpec;

/// `Err((line, message))` when the `server.N` lines ask for an ensemble;
/// `lines` gives each server id's line in the file.
pub(super) fn check(
    servers: &BTreeMap<u64, ServerSpec>,
    lines: &BTreeMap<u64, usize>,
    standalone_enabled: bool,
) -> Result<(), (usize, String)> {
    let Some((&first_line, first_id)) = lines.iter().map(|(id, l)| (l, id)).min() else {
        return Ok(());
    };
    let names: Vec<String> = servers.keys().map(|id| format!("server.{id}")).collect();
    let key = format!("server.{first_id}");
    let refuse = |why: String| {
        Err((
            first_line,
            format!(
                "{key}: {why}; ringkeeper does not run ensembles yet and refuses to start \
                 rather than run each server as an independent standalone copy (split brain)"
            ),
        ))
    };
    if servers.len() > 1 {
        return refuse(format!(
            "this configuration names an ensemble of {} servers ({})",
            servers.len(),
            names.join(", ")
        ));
    }
    if !standalone_enabled {
        return refuse("standaloneEnabled=false asks for quorum mode even with one server".into());
    }
    if servers.values().all(|s| s.observer) {
        return refuse("the only server is an observer, which needs an ensemble".into());
    }
    tracing::info!(
        "{key} is the only server: running standalone, as ZooKeeper does with one server"
    );
    Ok(())
}
