//! The controller loop: campaign for leadership; as leader, every probe interval read the
//! record from etcd, probe every node, and make the one change the evidence calls for.
//!
//! ```text
//!  standby --(leader key absent, create-if-absent txn won)--> leader
//!  leader  --(lease renewal failed past TTL - margin / lease gone)--> standby
//!  leader, each tick:
//!    record absent            -> bootstrap it from the seed nodes' newest topology
//!    a node has a newer one   -> adopt it into the record (a manual kvik-cluster change)
//!    a primary down for node-timeout, a second probe agrees, a replica answers
//!                             -> promote the replica with the highest applied offset:
//!                                CAS the swapped topology (version + 1) into etcd, then push it
//!    a node behind the record -> push the record to it (a returning old primary follows)
//! ```
//!
//! With the nodes' write lease on (`cluster-write-lease-ms`), the leader's probe of each
//! primary of the record renews its lease, and a primary is failed over only once it has been
//! unreachable for longer than a lease too (whichever of node-timeout and the lease is longer):
//! by then it has stopped accepting writes by itself, so the promoted replica is the only
//! primary of those slots that accepts writes.
//!
//! etcd unreachable means no record and, past the lease, no leader: nothing is decided and the
//! nodes keep their last topology. Every decision is logged with the probes it was based on.

use crate::etcd::Etcd;
use crate::health::{lease_clock, probe, probe_all, renew_lease, Probe, Renew};
use crate::leader::{campaign, Campaign, Leadership};
use crate::record::{self, Keys, Stored};
use kvik_cluster::{swapped, Node, Opts};
use kvik_resp::topology::Topology;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How a controller runs.
pub struct Config {
    /// etcd client address, host:port.
    pub etcd: String,
    /// The cluster's name: its keys live under /kvik/<cluster>/.
    pub cluster: String,
    /// This controller's id (stored in the leader key).
    pub id: String,
    /// Nodes to read the first topology from when etcd has none yet.
    pub seeds: Vec<String>,
    /// How long a primary must stay unreachable before it is failed over.
    pub node_timeout: Duration,
    /// How often the leader probes every node.
    pub probe_interval: Duration,
    /// The leader lease's TTL.
    pub lease_ttl: Duration,
    /// How nodes are reached (auth, the probe's connect/read timeout).
    pub node: Opts,
    /// Timeout of each etcd request.
    pub etcd_timeout: Duration,
}

/// A controller's state between ticks.
struct Controller<'a> {
    cfg: &'a Config,
    etcd: Etcd,
    keys: Keys,
    leadership: Option<Leadership>,
    /// Since when each unreachable node (by id) has failed its probes.
    down_since: HashMap<String, Instant>,
    /// The last problem logged, so a lasting condition is logged once, not every tick.
    last_problem: String,
    /// The leader last seen while standing by.
    seen_leader: String,
    /// The longest `cluster-write-lease-ms` any node reported: a failover waits past it.
    lease_ms: u64,
}

/// The failpoint for tests (`KVIK_CONTROLLER_FAILPOINT`): `exit-after-commit` exits the
/// process right after a failover's record is committed to etcd, before any push, as a leader
/// killed at the worst moment.
const FAILPOINT: &str = "KVIK_CONTROLLER_FAILPOINT";

/// How long a primary must be unreachable, at least, before its replica may take over: past
/// its write lease (the leader renewed it last before the first failed probe), with a margin
/// for clock rates.
fn lease_wait(lease_ms: u64) -> Duration {
    match lease_ms {
        0 => Duration::ZERO,
        ms => Duration::from_millis(ms + ms / 8 + 100),
    }
}

/// Runs until `stop` is set.
pub fn run(cfg: &Config, stop: &AtomicBool) {
    let mut c = Controller {
        cfg,
        etcd: Etcd::new(&cfg.etcd, cfg.etcd_timeout),
        keys: Keys::new(&cfg.cluster),
        leadership: None,
        down_since: HashMap::new(),
        last_problem: String::new(),
        seen_leader: String::new(),
        lease_ms: 0,
    };
    tracing::info!(
        id = %cfg.id, etcd = %cfg.etcd, cluster = %cfg.cluster,
        node_timeout_ms = cfg.node_timeout.as_millis() as u64,
        lease_ttl_s = cfg.lease_ttl.as_secs(),
        "kvik-controller started"
    );
    while !stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        c.step();
        let rest = cfg.probe_interval.saturating_sub(began.elapsed());
        std::thread::sleep(rest);
    }
    // Resign on the way out (dropping the leadership revokes the lease).
    c.leadership = None;
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

impl Controller<'_> {
    /// Logs `msg` as a warning unless it is the same as the last one.
    fn problem(&mut self, msg: String) {
        if msg != self.last_problem {
            tracing::warn!("{msg}");
            self.last_problem = msg;
        }
    }

    fn step(&mut self) {
        if let Some(l) = &self.leadership {
            if !l.is_valid() {
                tracing::warn!(
                    "leadership lost (lease not renewed within its TTL): no more actions"
                );
                self.leadership = None;
                self.down_since.clear();
            }
        }
        if self.leadership.is_none() && !self.try_lead() {
            return;
        }
        self.lead_tick();
        if let Some(l) = &self.leadership {
            l.progress();
        }
    }

    /// Campaigns when no leader key exists; returns whether this controller now leads.
    fn try_lead(&mut self) -> bool {
        let current = match self.etcd.get(&self.keys.leader) {
            Ok(kv) => kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned()),
            Err(e) => {
                self.problem(format!(
                    "etcd unreachable ({e}): not leading, no failover; nodes keep their last \
                     topology"
                ));
                return false;
            }
        };
        if let Some(leader) = current {
            if leader != self.seen_leader {
                tracing::info!(leader = %leader, "standing by: another controller leads");
                self.seen_leader = leader;
            }
            return false;
        }
        match campaign(
            &self.etcd,
            &self.keys.leader,
            &self.cfg.id,
            self.cfg.lease_ttl,
        ) {
            Ok(Campaign::Won(l)) => {
                tracing::info!(
                    lease = l.lease_id(),
                    "elected leader (leader key created at revision {})",
                    l.writer().revision
                );
                self.leadership = Some(l);
                self.last_problem.clear();
                true
            }
            Ok(Campaign::Lost { leader }) => {
                tracing::info!(leader = %leader, "lost the election: standing by");
                self.seen_leader = leader;
                false
            }
            Err(e) => {
                self.problem(format!("campaign failed ({e}): not leading"));
                false
            }
        }
    }

    fn leading(&self) -> bool {
        self.leadership.as_ref().is_some_and(Leadership::is_valid)
    }

    fn lead_tick(&mut self) {
        let stored = match record::load(&self.etcd, &self.keys) {
            Ok(s) => s,
            Err(e) => {
                self.problem(format!(
                    "etcd unreachable ({e}): no failover while it is; nodes keep their last \
                     topology"
                ));
                return;
            }
        };
        let Some(stored) = stored else {
            self.bootstrap();
            return;
        };
        let t = &stored.topology;
        let targets: Vec<(String, Renew)> = t
            .nodes
            .iter()
            .map(|n| {
                // Only the leader vouches for a node, and only for a primary of the record.
                let renew = match n.primary.is_none() && self.leading() {
                    true => Renew::Yes,
                    false => Renew::No,
                };
                (n.addr(), renew)
            })
            .collect();
        let probes = probe_all(&self.cfg.node, &targets);
        let lease_ms = probes
            .iter()
            .map(|p| p.lease_ms)
            .fold(self.lease_ms, u64::max);
        if lease_ms != self.lease_ms {
            tracing::info!(
                lease_ms,
                "the nodes run with a write lease: a primary is failed over after {} ms down \
                 (the longer of node-timeout and the lease with its margin)",
                self.cfg.node_timeout.max(lease_wait(lease_ms)).as_millis()
            );
            self.lease_ms = lease_ms;
        }
        let now = Instant::now();
        for (n, p) in t.nodes.iter().zip(&probes) {
            if p.reachable() {
                if let Some(since) = self.down_since.remove(&n.id) {
                    tracing::info!(node = %n.addr(), "node reachable again after {} ms",
                        since.elapsed().as_millis());
                }
            } else {
                self.down_since.entry(n.id.clone()).or_insert_with(|| {
                    tracing::warn!(node = %n.addr(), id = %n.id, "probe failed: {}", p.summary());
                    now
                });
            }
        }
        if self.adopt_newer(&stored, &probes) {
            return;
        }
        for (i, n) in t.nodes.iter().enumerate() {
            if n.primary.is_some() || n.slots.is_empty() || probes[i].reachable() {
                continue;
            }
            let down_for = self
                .down_since
                .get(&n.id)
                .map_or(Duration::ZERO, |s| s.elapsed());
            if down_for >= self.cfg.node_timeout.max(lease_wait(self.lease_ms)) {
                self.fail_over(&stored, i, &probes, down_for);
                return;
            }
        }
        self.catch_up_nodes(t, &probes);
    }

    /// Stores the newest topology the seed nodes have as the first record.
    fn bootstrap(&mut self) {
        let mut newest: Option<(String, Topology)> = None;
        for seed in &self.cfg.seeds {
            match Node::connect(&self.cfg.node, seed).and_then(|mut n| n.topology()) {
                Ok(t)
                    if t.version > 0
                        && newest.as_ref().is_none_or(|(_, b)| t.version > b.version) =>
                {
                    newest = Some((seed.clone(), t));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(seed = %seed, "seed unreachable: {e}"),
            }
        }
        let Some((seed, t)) = newest else {
            self.problem(
                "no topology in etcd and no seed node has one: waiting (create the cluster with \
                 kvik-cluster create, and give it with --seed)"
                    .to_string(),
            );
            return;
        };
        let writer = self.leadership.as_ref().map(|l| l.writer().clone());
        match record::store(&self.etcd, &self.keys, writer.as_ref(), 0, &t, None) {
            Ok(Some(_)) => tracing::info!(
                seed = %seed, version = t.version, nodes = t.nodes.len(),
                "record created in etcd from the seed's topology"
            ),
            Ok(None) => tracing::info!("record created meanwhile by another writer"),
            Err(e) => self.problem(format!("cannot store the first record: {e}")),
        }
    }

    /// A node with a newer topology than the record was changed by hand (kvik-cluster without
    /// --etcd): the record takes it, so the controller never pushes an older one over it.
    fn adopt_newer(&mut self, stored: &Stored, probes: &[Probe]) -> bool {
        let Some((i, _)) = probes
            .iter()
            .enumerate()
            .filter(|(_, p)| p.reachable() && p.version > stored.topology.version)
            .max_by_key(|(_, p)| p.version)
        else {
            return false;
        };
        let addr = stored.topology.nodes[i].addr();
        let newer = match Node::connect(&self.cfg.node, &addr).and_then(|mut n| n.topology()) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(node = %addr, "cannot read its newer topology: {e}");
                return true;
            }
        };
        if !self.leading() {
            return true;
        }
        let writer = self.leadership.as_ref().map(|l| l.writer().clone());
        match record::store(
            &self.etcd,
            &self.keys,
            writer.as_ref(),
            stored.mod_revision,
            &newer,
            None,
        ) {
            Ok(Some(_)) => tracing::info!(
                node = %addr, "adopted topology v{} found on the node (the record had v{}): \
                 changed by hand", newer.version, stored.topology.version
            ),
            Ok(None) => tracing::info!("record changed meanwhile; re-reading next tick"),
            Err(e) => self.problem(format!("cannot adopt v{}: {e}", newer.version)),
        }
        true
    }

    /// Promotes the best replica of primary `p` (down for `down_for`).
    fn fail_over(&mut self, stored: &Stored, p: usize, probes: &[Probe], down_for: Duration) {
        let t = &stored.topology;
        let primary = &t.nodes[p];
        // The second probe, on a fresh connection, right before deciding.
        let confirm = probe(&self.cfg.node, &primary.addr(), Renew::No);
        if confirm.reachable() {
            tracing::info!(node = %primary.addr(),
                "primary answered the confirming probe after {} ms down: no failover",
                down_for.as_millis());
            self.down_since.remove(&primary.id);
            return;
        }
        let replicas: Vec<usize> = (0..t.nodes.len())
            .filter(|&i| t.nodes[i].primary.as_deref() == Some(primary.id.as_str()))
            .collect();
        let evidence: Vec<String> = std::iter::once(format!(
            "primary {} down {} ms (node-timeout {} ms, write lease {} ms): first probe {}; \
             confirming probe {}",
            primary.addr(),
            down_for.as_millis(),
            self.cfg.node_timeout.as_millis(),
            self.lease_ms,
            probes[p].summary(),
            confirm.summary()
        ))
        .chain(
            replicas
                .iter()
                .map(|&i| format!("replica {}: {}", t.nodes[i].addr(), probes[i].summary())),
        )
        .collect();
        let best = replicas
            .iter()
            .copied()
            .filter(|&i| probes[i].reachable())
            .max_by_key(|&i| (probes[i].offset, std::cmp::Reverse(i)));
        let Some(r) = best else {
            self.problem(format!(
                "cannot fail over {}: no reachable replica; its slots stay down. Evidence: {}",
                primary.addr(),
                evidence.join("; ")
            ));
            return;
        };
        if !self.leading() {
            return;
        }
        let mut next = swapped(t, r, p);
        next.version = t.version + 1;
        if let Err(e) = next.validate() {
            self.problem(format!("refusing an invalid failover topology: {e}"));
            return;
        }
        let new_primary = &t.nodes[r];
        let entry = json!({
            "at_ms": now_ms() as u64,
            "version": next.version,
            "by": self.cfg.id,
            "failed": format!("{} {}", primary.id, primary.addr()),
            "promoted": format!("{} {}", new_primary.id, new_primary.addr()),
            "offset": probes[r].offset,
            "evidence": evidence.join("; "),
        })
        .to_string();
        let writer = self.leadership.as_ref().map(|l| l.writer().clone());
        match record::store(
            &self.etcd,
            &self.keys,
            writer.as_ref(),
            stored.mod_revision,
            &next,
            Some(entry),
        ) {
            Ok(Some(_)) => {}
            Ok(None) => {
                tracing::info!("record changed (or leadership ended) before the failover committed: re-evaluating next tick");
                return;
            }
            Err(e) => {
                self.problem(format!(
                    "etcd unreachable, no failover of {}: {e}",
                    primary.addr()
                ));
                return;
            }
        }
        tracing::warn!(
            failed = %primary.addr(), promoted = %new_primary.addr(), version = next.version,
            offset = probes[r].offset,
            "FAILOVER committed to etcd: {} takes slots of {}. Evidence: {}",
            new_primary.addr(), primary.addr(), evidence.join("; ")
        );
        if std::env::var(FAILPOINT).as_deref() == Ok("exit-after-commit") {
            tracing::warn!("failpoint {FAILPOINT}=exit-after-commit: exiting before the push");
            std::process::exit(3);
        }
        self.down_since.remove(&primary.id);
        // The new primary first (it promotes itself), then every other reachable node.
        let mut order = vec![r];
        order.extend((0..next.nodes.len()).filter(|&i| i != r && i != p && probes[i].reachable()));
        self.push(&next, &order);
    }

    /// Pushes the record to every reachable node that is behind it.
    fn catch_up_nodes(&mut self, t: &Topology, probes: &[Probe]) {
        let behind: Vec<usize> = (0..t.nodes.len())
            .filter(|&i| probes[i].reachable() && probes[i].version < t.version)
            .collect();
        for &i in &behind {
            tracing::info!(node = %t.nodes[i].addr(),
                "node has topology v{}, the record v{}: pushing it", probes[i].version, t.version);
        }
        self.push(t, &behind);
    }

    /// Pushes `t` to the nodes at `order`, checking leadership before each.
    fn push(&mut self, t: &Topology, order: &[usize]) {
        for &i in order {
            if !self.leading() {
                tracing::warn!("leadership ended mid-push: the next leader re-pushes");
                return;
            }
            let addr = t.nodes[i].addr();
            // A primary of the pushed record gets its write lease renewed with it: a promoted
            // replica need not wait for the next probe to accept writes.
            let primary = t.nodes[i].primary.is_none();
            let pushed = Node::connect(&self.cfg.node, &addr).and_then(|mut n| {
                n.set_topology(t)?;
                if let Some(stamp) = lease_clock(&mut n).filter(|_| primary) {
                    renew_lease(&mut n, stamp);
                }
                Ok(())
            });
            match pushed {
                Ok(()) => tracing::info!(node = %addr, "pushed topology v{}", t.version),
                Err(e) => tracing::warn!(node = %addr, "push of v{} failed: {e}", t.version),
            }
        }
    }
}
