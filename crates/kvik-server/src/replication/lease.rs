//! The write lease (`cluster-write-lease-ms`, 0: off): a cluster primary that may have been
//! failed over stops accepting writes by itself, so two nodes never accept writes for one slot.
//!
//! A primary that the controller could not reach cannot tell whether it was replaced; it can
//! only know that nobody told it recently that it was not. So a primary with replicas accepts
//! writes only while one of two renewals is younger than the lease, both measured on its own
//! monotonic clock:
//! - the leader controller's probe (`CLUSTER RENEWLEASE`, sent only by the leader and only to
//!   the primaries of the etcd record): it first reads the node's clock, then renews from that
//!   reading, so a renewal that sat in a socket while the node was frozen renews nothing, or
//! - an echo from *every* replica its topology names: the primary stamps its replication PING
//!   frames with its own clock and each replica sends the newest stamp back in its ACK. The
//!   primary's lease runs from the oldest of these echoed stamps, so an ACK that was buffered
//!   while the primary was frozen carries an old stamp and renews nothing, and a replica that
//!   was promoted (its link closed) stops renewing it.
//!
//! The other side of the bargain: a node promoted from replica holds writes until one lease
//! (plus a margin for clock rates) after the last stamped PING it received, by which time the
//! old primary's echo lease has lapsed; a node also holds writes for one lease after it starts,
//! as it cannot know what it echoed before. The controller fails a primary over only when its
//! last successful probe is more than one lease old, so the controller's renewal has lapsed too.
//!
//! Not fenced: a primary whose topology gives it no replica (nobody can take its slots by
//! failover), a node outside cluster mode, a replica (READONLY covers it). With etcd or every
//! controller down, a primary keeps writing on its replicas' echoes; with a replica also gone,
//! its writes stop until the controller returns (CLUSTERDOWN, as Redis's minority primaries).

use crate::error::{CmdError, ErrorKind};
use crate::server::Server;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The process's monotonic clock in milliseconds, never 0 (0 means "never" below). Lease stamps
/// are only ever compared with the clock of the process that made them; it starts at a random
/// point so a stamp of an earlier run of the node (echoed late) is far from this run's clock.
pub fn own_ms() -> u64 {
    static BASE: OnceLock<(Instant, u64)> = OnceLock::new();
    let (at, offset) = BASE.get_or_init(|| (Instant::now(), rand::random::<u64>() >> 24));
    at.elapsed().as_millis() as u64 + offset + 1
}

/// How long a cached "writes allowed" answer is trusted before it is recomputed: bounds how
/// late a topology change (a replica added) is noticed, and keeps the per-write check to two
/// atomic loads.
const RECHECK_MS: u64 = 100;

/// The hold of a promoted node exceeds the lease by this fraction of it: clock rates differ
/// (NTP slews a monotonic clock by at most 0.05%), and a stamp takes time to arrive.
pub fn with_margin(lease_ms: u64) -> u64 {
    lease_ms + lease_ms / 16 + 10
}

/// A stamped PING is sent at least this often, so echoes renew well within the lease.
pub fn ping_every(lease_ms: u64) -> Option<Duration> {
    (lease_ms > 0).then(|| Duration::from_millis((lease_ms / 4).max(10)))
}

/// The lease state of one node.
pub struct Lease {
    /// When this process started using the lease clock.
    started: u64,
    /// The last renewal by the leader controller; 0: none.
    controller: AtomicU64,
    /// As a replica: when the last stamped PING arrived from the primary (kept after a
    /// promotion: it bounds the old primary's lease).
    ping_rx: AtomicU64,
    /// Writes allowed until then (a cached answer, at most [`RECHECK_MS`] ahead).
    valid_until: AtomicU64,
}

impl Default for Lease {
    fn default() -> Lease {
        Lease {
            started: own_ms(),
            controller: AtomicU64::new(0),
            ping_rx: AtomicU64::new(0),
            valid_until: AtomicU64::new(0),
        }
    }
}

macro_rules! expired {
    () => {
        "The cluster is down (kvik: this primary's write lease expired: no renewal from the \
         controller or from every replica; writes resume when one arrives)"
    };
}
macro_rules! held {
    () => {
        "The cluster is down (kvik: writes are held until the previous primary's write lease \
         has surely lapsed)"
    };
}

/// The error a fenced primary answers writes with: Redis's answer of a node that believes the
/// cluster is down for it (a primary on the minority side of a partition after node-timeout);
/// clients retry it after refreshing their slot map.
pub const LEASE_EXPIRED: CmdError = CmdError::new(ErrorKind::ClusterDown, expired!());
/// The error of a node holding writes after its start or promotion.
pub const LEASE_HELD: CmdError = CmdError::new(ErrorKind::ClusterDown, held!());

/// [`check`] for a script's write command, as the error line the script sees.
pub fn check_line(server: &Server) -> Result<(), &'static str> {
    check(server).map_err(|e| {
        if e == LEASE_HELD {
            concat!("CLUSTERDOWN ", held!())
        } else {
            concat!("CLUSTERDOWN ", expired!())
        }
    })
}

impl Lease {
    /// CLUSTER RENEWLEASE from the leader controller, with the reading of [`own_ms`] it took
    /// at the start of its probe; refused when the reading is not of this node's clock.
    pub fn renew_by_controller(&self, stamp: u64) -> Result<(), String> {
        let now = own_ms();
        if stamp == 0 || stamp > now {
            return Err(format!(
                "the lease clock reading {stamp} is not one of this node's (now {now})"
            ));
        }
        self.controller.fetch_max(stamp, Relaxed);
        Ok(())
    }

    /// Writes are held for a lease (with margin) from this instant: the start, or the last
    /// stamped PING received as a replica.
    fn held_from(&self) -> u64 {
        self.started.max(self.ping_rx.load(Relaxed))
    }

    /// A stamped PING arrived from this node's primary.
    pub fn ping_received(&self) {
        self.ping_rx.fetch_max(own_ms(), Relaxed);
    }

    /// What INFO shows: "off", "unfenced" (a replica, or a primary without replicas),
    /// "valid" (with the milliseconds left), "held" or "expired".
    pub fn describe(&self, server: &Server) -> (&'static str, u64) {
        let lease = lease_ms(server);
        if lease == 0 {
            return ("off", 0);
        }
        let now = own_ms();
        match evaluate(server, lease, now) {
            Verdict::Unfenced => ("unfenced", 0),
            Verdict::Valid(until) => ("valid", until.saturating_sub(now)),
            Verdict::Held => ("held", 0),
            Verdict::Expired => ("expired", 0),
        }
    }
}

fn lease_ms(server: &Server) -> u64 {
    server.config.repl.write_lease_ms.load(Relaxed)
}

/// Whether this node may accept a write now (see the module doc): two atomic loads while a
/// recent answer holds.
pub fn check(server: &Server) -> Result<(), CmdError> {
    let lease = lease_ms(server);
    if lease == 0 {
        return Ok(());
    }
    let l = &server.repl.lease;
    let now = own_ms();
    let holding = now < l.held_from() + with_margin(lease);
    if !holding && now < l.valid_until.load(Relaxed) {
        return Ok(());
    }
    match evaluate(server, lease, now) {
        Verdict::Unfenced => {
            l.valid_until.fetch_max(now + RECHECK_MS, Relaxed);
            Ok(())
        }
        Verdict::Valid(until) => {
            l.valid_until
                .fetch_max(until.min(now + RECHECK_MS), Relaxed);
            Ok(())
        }
        Verdict::Held => Err(LEASE_HELD),
        Verdict::Expired => Err(LEASE_EXPIRED),
    }
}

/// Where a node stands with its lease.
enum Verdict {
    /// Outside cluster mode, a replica, or a primary without replicas: no lease applies.
    Unfenced,
    /// Writes allowed until this instant of [`own_ms`].
    Valid(u64),
    /// Started or promoted less than a lease (with margin) ago.
    Held,
    /// No renewal within the lease.
    Expired,
}

fn evaluate(server: &Server, lease: u64, now: u64) -> Verdict {
    let Some(node) = server.cluster.node() else {
        return Verdict::Unfenced;
    };
    if server.repl.is_replica() {
        return Verdict::Unfenced;
    }
    let l = &server.repl.lease;
    if now < l.held_from() + with_margin(lease) {
        return Verdict::Held;
    }
    let replicas: Vec<String> = {
        let st = node.state.read();
        let Some(me) = st.me.filter(|_| st.my_primary.is_none()) else {
            return Verdict::Unfenced;
        };
        let my_id = &st.topology.nodes[me].id;
        st.topology
            .nodes
            .iter()
            .filter(|n| n.primary.as_ref() == Some(my_id))
            .map(|n| n.id.clone())
            .collect()
    };
    if replicas.is_empty() {
        return Verdict::Unfenced;
    }
    let by_controller = match l.controller.load(Relaxed) {
        0 => 0,
        at => at + lease,
    };
    let by_replicas = server
        .repl
        .oldest_echo(&replicas)
        .map_or(0, |stamp| stamp + lease);
    match by_controller.max(by_replicas) {
        until if now < until => Verdict::Valid(until),
        _ => Verdict::Expired,
    }
}
