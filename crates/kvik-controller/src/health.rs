//! One health probe of one node: a fresh connection, PING, the topology version it has and its
//! replication state from `INFO replication`. The leader's probe of a primary of the record also
//! renews the node's write lease (`CLUSTER RENEWLEASE`, see the server's `replication::lease`):
//! a primary the leader can reach keeps accepting writes even with a replica down. The renewal
//! reads the node's lease clock first and renews from that reading once the probe succeeded,
//! so a renewal stuck in a frozen node's socket renews nothing when the node wakes up.
//!
//! A fresh connection per probe is deliberate: a node that accepts no new connection is down
//! for its clients too, and the second probe that confirms a failure is then independent of
//! the first.

use kvik_cluster::{Node, Opts};
use redis::Value;

/// What a probe saw.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// The error that made the node unreachable (None: it answered everything).
    pub error: Option<String>,
    /// The topology version the node has.
    pub version: u64,
    /// `role`: "master" or "slave".
    pub role: String,
    /// The replication offset it applied (`slave_repl_offset`, or `master_repl_offset`).
    pub offset: i64,
    /// A replica's `master_link_status` ("up"/"down"; empty on a primary).
    pub link: String,
    /// The node's `cluster-write-lease-ms` (0: off, or a node without the lease) and its
    /// state (`kvik_write_lease`: off, unfenced, valid, held, expired).
    pub lease_ms: u64,
    pub lease: String,
}

/// Whether a probe renews the node's write lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renew {
    /// Only the leader, and only for a primary of the record.
    Yes,
    No,
}

impl Probe {
    pub fn reachable(&self) -> bool {
        self.error.is_none()
    }

    /// One line of evidence for the log.
    pub fn summary(&self) -> String {
        match &self.error {
            Some(e) => format!("unreachable ({e})"),
            None if self.role == "slave" => format!(
                "replica, link {}, offset {}, topology v{}",
                self.link, self.offset, self.version
            ),
            None if self.lease_ms == 0 => format!(
                "primary, offset {}, topology v{}",
                self.offset, self.version
            ),
            None => format!(
                "primary, offset {}, topology v{}, write lease {}",
                self.offset, self.version, self.lease
            ),
        }
    }
}

/// A field of `INFO` text.
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// Probes every `(address, renew)` at once, one thread each: a frozen node's probe waits out
/// its timeout (`--probe-timeout-ms`) without delaying the other primaries' lease renewals or,
/// one after another, the controller loop past its own lease (five nodes probed in turn, one
/// frozen, took a loaded machine's loop past the 3 s leader lease).
pub fn probe_all(opts: &Opts, nodes: &[(String, Renew)]) -> Vec<Probe> {
    std::thread::scope(|s| {
        let running: Vec<_> = nodes
            .iter()
            .map(|(addr, renew)| s.spawn(move || probe(opts, addr, *renew)))
            .collect();
        running
            .into_iter()
            .map(|r| {
                r.join().unwrap_or_else(|_| Probe {
                    error: Some("the probe panicked".to_string()),
                    ..Probe::default()
                })
            })
            .collect()
    })
}

/// Probes `addr`.
pub fn probe(opts: &Opts, addr: &str, renew: Renew) -> Probe {
    match try_probe(opts, addr, renew) {
        Ok(p) => p,
        Err(e) => Probe {
            error: Some(e),
            ..Probe::default()
        },
    }
}

fn try_probe(opts: &Opts, addr: &str, renew: Renew) -> Result<Probe, String> {
    let mut node = Node::connect(opts, addr)?;
    let pong: String = node.query(&redis::cmd("PING"))?;
    if pong != "PONG" {
        return Err(format!("PING answered {pong}"));
    }
    // A node without the lease (an older kvik) refuses the subcommand: not a health issue.
    let stamp = match renew {
        Renew::Yes => lease_clock(&mut node),
        Renew::No => None,
    };
    let version = node.topology()?.version;
    let info: Value = node.query(redis::cmd("INFO").arg("replication"))?;
    let info: String = redis::from_redis_value(&info).map_err(|e| e.to_string())?;
    let role = info_field(&info, "role").unwrap_or("").to_string();
    let offset_field = if role == "slave" {
        "slave_repl_offset"
    } else {
        "master_repl_offset"
    };
    if let Some(stamp) = stamp {
        renew_lease(&mut node, stamp);
    }
    Ok(Probe {
        error: None,
        version,
        offset: info_field(&info, offset_field)
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1),
        link: info_field(&info, "master_link_status")
            .unwrap_or("")
            .to_string(),
        lease_ms: info_field(&info, "kvik_write_lease_ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        lease: info_field(&info, "kvik_write_lease")
            .unwrap_or("")
            .to_string(),
        role,
    })
}

/// The node's lease clock (`CLUSTER RENEWLEASE` without an argument), if it has one.
pub fn lease_clock(node: &mut Node) -> Option<u64> {
    node.query::<u64>(redis::cmd("CLUSTER").arg("RENEWLEASE"))
        .ok()
}

/// Renews the node's write lease from `stamp`, a reading of [`lease_clock`] taken before the
/// node was seen healthy (best effort: a failed renewal lets the lease lapse, which is safe).
pub fn renew_lease(node: &mut Node, stamp: u64) {
    let _ = node.query::<Value>(redis::cmd("CLUSTER").arg("RENEWLEASE").arg(stamp));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_found_by_exact_name() {
        let info =
            "# Replication\r\nrole:slave\r\nslave_repl_offset:42\r\nslave_read_repl_offset:41\r\n";
        assert_eq!(info_field(info, "role"), Some("slave"));
        assert_eq!(info_field(info, "slave_repl_offset"), Some("42"));
        assert_eq!(info_field(info, "master_link_status"), None);
    }
}
