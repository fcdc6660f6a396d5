//! Standalone or ensemble, from the `server.N` lines.
//!
//! ZooKeeper 3.8 runs standalone when the config names at most one voting
//! server and `standaloneEnabled` is true (the default):
//! `QuorumPeerConfig.isDistributed()` is `quorumVerifier != null &&
//! (!standaloneEnabled || votingMembers > 1)`. So one `server.N` line (a
//! participant) runs standalone, and anything else runs a quorum. Observers
//! are not supported yet: a configuration that names one stops startup
//! (ignoring the line would change what the operator asked for).

use std::collections::BTreeMap;

use super::ServerSpec;

/// Whether the `server.N` lines ask for an ensemble; `Err((line, message))`
/// for what ringkeeper cannot run. `lines` gives each server id's line in
/// the file.
pub(super) fn check(
    servers: &BTreeMap<u64, ServerSpec>,
    lines: &BTreeMap<u64, usize>,
    standalone_enabled: bool,
) -> Result<bool, (usize, String)> {
    let Some((&first_line, first_id)) = lines.iter().map(|(id, l)| (l, id)).min() else {
        return Ok(false);
    };
    if let Some((id, _)) = servers.iter().find(|(_, s)| s.observer) {
        let line = lines.get(id).copied().unwrap_or(first_line);
        let why = if servers.len() == 1 {
            "the only server is an observer, which needs an ensemble".to_string()
        } else {
            "observers are not supported yet; run it as a participant or leave it out".to_string()
        };
        return Err((line, format!("server.{id}: {why}")));
    }
    if servers.len() > 1 || !standalone_enabled {
        let names: Vec<String> = servers.keys().map(|id| format!("server.{id}")).collect();
        tracing::info!(
            "server.{first_id}: an ensemble of {} servers ({})",
            servers.len(),
            names.join(", ")
        );
        return Ok(true);
    }
    tracing::info!(
        "server.{first_id} is the only server: running standalone, as ZooKeeper does with one server"
    );
    Ok(false)
}
