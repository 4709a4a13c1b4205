//! Replicas in cluster mode: the pushed topology decides each node's replication role, so there
//! is one source of truth (REPLICAOF and FAILOVER are refused in cluster mode, as in Redis).
//!
//! At start, [`configure_at_start`] sets `replicaof` from the persisted topology before the
//! replication state is initialised, so a restarted replica resumes from its own position
//! (incrementally) instead of promoting itself. After every accepted topology [`reconcile`]
//! compares the node's role with the topology's: a node listed as `replica-of P` follows P's
//! address with the ordinary replication link (a primary turning replica asks with its own
//! history, so writes P never saw are dropped by the replication-id check and a full sync); a
//! node listed as a primary while it follows someone is promoted (`REPLICAOF NO ONE`), and so
//! is one a topology no longer lists (a removed replica). Before any topology the role is left
//! alone.

use crate::server::Server;
use std::sync::Arc;

/// What the topology asks of this node.
#[derive(Debug, PartialEq, Eq)]
enum Wanted {
    /// No topology yet: leave the role alone.
    Unlisted,
    /// A primary (also a node a topology no longer lists: a removed replica stops following).
    Primary,
    /// Follow the primary at (host, port).
    ReplicaOf(String, u16),
}

fn wanted(server: &Server) -> Wanted {
    let Some(node) = server.cluster.node() else {
        return Wanted::Unlisted;
    };
    let st = node.state.read();
    match (st.me, st.my_primary) {
        (None, _) if st.topology.nodes.is_empty() => Wanted::Unlisted,
        (None, _) => Wanted::Primary,
        (Some(_), None) => Wanted::Primary,
        (Some(_), Some(p)) => {
            let p = &st.topology.nodes[p];
            Wanted::ReplicaOf(p.host.clone(), p.port)
        }
    }
}

/// At start, before `Replication::init`: a node the persisted topology lists takes its role
/// from it (a replica follows its primary; a primary follows nobody, whatever the config file
/// says).
pub fn configure_at_start(server: &Server) {
    let target = match wanted(server) {
        Wanted::Unlisted => return,
        Wanted::Primary => None,
        Wanted::ReplicaOf(host, port) => Some((host, port)),
    };
    *server.config.repl.replicaof.write() = target;
}

/// Brings the replication role in line with the topology (see the module doc).
pub fn reconcile(server: &Arc<Server>) -> Result<(), String> {
    let repl = &server.repl;
    let following = repl.snapshot(&server.storage).following;
    match (wanted(server), following) {
        (Wanted::ReplicaOf(host, port), Some(f)) if f.host == host && f.port == port => Ok(()),
        (Wanted::ReplicaOf(host, port), _) => {
            let position = server
                .storage
                .repl_position()
                .map_err(|e| format!("cannot read the replication position: {e}"))?;
            tracing::info!(primary = %format!("{host}:{port}"), "cluster topology: now a replica");
            *server.config.repl.replicaof.write() = Some((host.clone(), port));
            repl.follow(server, host, port, position);
            Ok(())
        }
        (Wanted::Primary, Some(_)) => {
            tracing::info!("cluster topology: now a primary");
            repl.promote(&server.storage)
                .map_err(|e| format!("cannot promote: {e}"))?;
            *server.config.repl.replicaof.write() = None;
            Ok(())
        }
        (Wanted::Primary | Wanted::Unlisted, _) => Ok(()),
    }
}
