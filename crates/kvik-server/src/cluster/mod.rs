//! Cluster mode (`cluster-enabled yes`): Redis Cluster's 16384 slots and redirects, without
//! gossip. The admin tool pushes the whole topology (version, nodes, slot ranges) with
//! `CLUSTER SETTOPOLOGY`; a node accepts only a newer version, persists it in its directory
//! ([`persist`]) and reloads it at start.
//!
//! - [`Node`]: this node's id and its [`State`] (accepted topology, slot -> owner table with the
//!   local `SETSLOT ... NODE` overrides, MIGRATING / IMPORTING maps, a generation counter that
//!   changes with every change of any of these).
//! - [`routing`]: the per-command check (MOVED, ASK, TRYAGAIN, CROSSSLOT, CLUSTERDOWN) the
//!   dispatcher makes right after auth, on the pool path and the run-to-completion path alike.
//! - [`replies`]: CLUSTER SLOTS / SHARDS / NODES rendering, cached per (reply, RESP version,
//!   endpoint kind) and reused while the generation is unchanged.
//! - [`replicas`]: the node's replication role follows the topology (a node listed as a
//!   replica follows its primary; a node listed as a primary stops following).
//!
//! Only database 0 exists in cluster mode.

pub mod persist;
pub mod replicas;
pub mod replies;
pub mod routing;

use kvik_resp::cluster::SLOTS;
use kvik_resp::topology::Topology;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::OnceLock;

/// How a node's address is shown to clients (`cluster-preferred-endpoint-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointKind {
    /// The topology's host (the default).
    Ip = 0,
    /// The topology's host as the node's hostname (kvik knows one name per node).
    Hostname = 1,
    /// No endpoint: clients reuse the address they connected to.
    Unknown = 2,
}

impl EndpointKind {
    pub fn parse(s: &str) -> Option<EndpointKind> {
        match s.to_ascii_lowercase().as_str() {
            "ip" => Some(EndpointKind::Ip),
            "hostname" => Some(EndpointKind::Hostname),
            "unknown-endpoint" => Some(EndpointKind::Unknown),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            EndpointKind::Ip => "ip",
            EndpointKind::Hostname => "hostname",
            EndpointKind::Unknown => "unknown-endpoint",
        }
    }
    fn from_u8(v: u8) -> EndpointKind {
        match v {
            1 => EndpointKind::Hostname,
            2 => EndpointKind::Unknown,
            _ => EndpointKind::Ip,
        }
    }
}

/// The cluster settings (config.rs declares them in its table).
#[derive(Debug)]
pub struct ClusterSettings {
    pub enabled: AtomicBool,
    pub reply_cache: AtomicBool,
    pub reply_cache_verify: AtomicBool,
    pub require_full_coverage: AtomicBool,
    endpoint: AtomicU8,
}

impl Default for ClusterSettings {
    fn default() -> ClusterSettings {
        ClusterSettings {
            enabled: AtomicBool::new(false),
            reply_cache: AtomicBool::new(true),
            reply_cache_verify: AtomicBool::new(false),
            require_full_coverage: AtomicBool::new(true),
            endpoint: AtomicU8::new(0),
        }
    }
}

impl ClusterSettings {
    pub fn endpoint(&self) -> EndpointKind {
        EndpointKind::from_u8(self.endpoint.load(Relaxed))
    }
    pub fn set_endpoint(&self, k: EndpointKind) {
        self.endpoint.store(k as u8, Relaxed);
    }
}

/// The server's cluster side: empty unless `cluster-enabled yes`.
#[derive(Default)]
pub struct Cluster {
    node: OnceLock<Node>,
}

impl Cluster {
    /// This node, when cluster mode is on.
    pub fn node(&self) -> Option<&Node> {
        self.node.get()
    }

    /// Turns cluster mode on: loads (or creates and persists) the node id and the last accepted
    /// topology from `dir`.
    pub fn enable(&self, dir: &Path) -> Result<(), String> {
        let saved = persist::load(dir)?;
        let (myid, topology) = match saved {
            Some(s) => (s.myid, s.topology),
            None => {
                let id = random_id();
                let t = Topology::default();
                persist::save(dir, &id, &t)?;
                (id, t)
            }
        };
        tracing::info!(myid = %myid, version = topology.version, "cluster mode on");
        let state = State::new(&myid, topology);
        let _ = self.node.set(Node {
            myid,
            dir: dir.to_path_buf(),
            state: RwLock::new(state),
            replies: replies::ReplyCache::default(),
            gates: (0..GATES).map(|_| RwLock::new(())).collect(),
        });
        Ok(())
    }
}

fn random_id() -> String {
    (0..40)
        .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap())
        .collect()
}

/// This cluster node.
pub struct Node {
    /// 40 hex characters, made at first start and kept in the directory.
    pub myid: String,
    dir: PathBuf,
    pub state: RwLock<State>,
    pub replies: replies::ReplyCache,
    /// Slot gates (striped): a command on a MIGRATING or IMPORTING slot holds its slot's gate
    /// shared from the routing check to the end of its execution; MIGRATE holds it exclusive.
    /// So a key found present by the check cannot be moved away before the command writes it
    /// (and resurrected on the source afterwards).
    gates: Vec<RwLock<()>>,
}

/// Number of slot gate stripes.
const GATES: usize = 1024;

/// A held slot gate (see [`Node`]).
pub enum Gate<'a> {
    Shared(parking_lot::RwLockReadGuard<'a, ()>),
    Exclusive(parking_lot::RwLockWriteGuard<'a, ()>),
}

impl Node {
    /// Takes `slot`'s gate, exclusively for MIGRATE.
    pub fn gate(&self, slot: u16, exclusive: bool) -> Gate<'_> {
        let g = &self.gates[slot as usize % GATES];
        if exclusive {
            Gate::Exclusive(g.write())
        } else {
            Gate::Shared(g.read())
        }
    }
}

/// No owner in [`State::owner`].
pub const NO_OWNER: u16 = u16::MAX;

/// What a node knows of the cluster; changed only under the [`Node::state`] write lock.
pub struct State {
    pub topology: Topology,
    /// Changes with every change below (topology, SETSLOT): the reply cache's key.
    pub generation: u64,
    /// Per slot: index into `topology.nodes`, or [`NO_OWNER`]. Includes `overrides`.
    pub owner: Vec<u16>,
    /// `CLUSTER SETSLOT <slot> NODE <id>` until the next topology: slot -> node id.
    pub overrides: BTreeMap<u16, String>,
    /// Slot -> node id the slot is migrating to (slots this node owns).
    pub migrating: BTreeMap<u16, String>,
    /// Slot -> node id the slot is being imported from.
    pub importing: BTreeMap<u16, String>,
    /// This node's index in `topology.nodes`, if it is listed.
    pub me: Option<usize>,
    /// The index of the primary this node replicates, if the topology makes it a replica.
    pub my_primary: Option<usize>,
    /// Every slot has an owner (or full coverage is not required): `cluster_state:ok`.
    pub covered: bool,
}

impl State {
    fn new(myid: &str, topology: Topology) -> State {
        let mut s = State {
            topology,
            generation: 1,
            owner: vec![NO_OWNER; SLOTS],
            overrides: BTreeMap::new(),
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            me: None,
            my_primary: None,
            covered: false,
        };
        s.rebuild(myid);
        s
    }

    /// Recomputes the owner table, `me` and coverage; bumps the generation.
    fn rebuild(&mut self, myid: &str) {
        self.owner.iter_mut().for_each(|o| *o = NO_OWNER);
        for (i, n) in self.topology.nodes.iter().enumerate() {
            for &(a, b) in &n.slots {
                for s in a..=b {
                    self.owner[s as usize] = i as u16;
                }
            }
        }
        for (slot, id) in &self.overrides {
            if let Some(i) = self.index_of(id) {
                self.owner[*slot as usize] = i as u16;
            }
        }
        self.me = self.index_of(myid);
        self.my_primary = self
            .me
            .and_then(|i| self.topology.nodes[i].primary.as_deref())
            .and_then(|p| self.index_of(p));
        self.covered = self.owner.iter().all(|o| *o != NO_OWNER);
        self.generation += 1;
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.topology.nodes.iter().position(|n| n.id == id)
    }

    /// The index of the owner of `slot`.
    pub fn owner_of(&self, slot: u16) -> Option<usize> {
        match self.owner[slot as usize] {
            NO_OWNER => None,
            i => Some(i as usize),
        }
    }

    /// True if this node owns `slot`.
    pub fn mine(&self, slot: u16) -> bool {
        self.me.is_some() && self.owner_of(slot) == self.me
    }

    /// `cluster_state:ok`: every slot served (when `cluster-require-full-coverage` is on).
    pub fn ok(&self, require_full_coverage: bool) -> bool {
        self.covered || (!require_full_coverage && !self.topology.nodes.is_empty())
    }

    /// Contiguous runs of slots per owner, in slot order: (first, last, owner index).
    pub fn ranges(&self) -> Vec<(u16, u16, usize)> {
        let mut out: Vec<(u16, u16, usize)> = Vec::new();
        for (slot, &o) in self.owner.iter().enumerate() {
            if o == NO_OWNER {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.2 == o as usize && last.1 as usize + 1 == slot => {
                    last.1 = slot as u16
                }
                _ => out.push((slot as u16, slot as u16, o as usize)),
            }
        }
        out
    }
}

impl Node {
    /// `CLUSTER SETTOPOLOGY`: accepts `topology` if it is newer, persists it (synced), then
    /// applies it: the local SETSLOT NODE overrides go, MIGRATING is cleared for slots this node
    /// no longer owns and IMPORTING for slots it now owns (and both for unknown nodes).
    pub fn set_topology(&self, topology: Topology) -> Result<(), String> {
        let mut st = self.state.write();
        let cur = st.topology.version;
        if topology.version <= cur {
            return Err(format!(
                "topology version {} is not newer than the current version {cur}",
                topology.version
            ));
        }
        persist::save(&self.dir, &self.myid, &topology)
            .map_err(|e| format!("cannot persist the topology: {e}"))?;
        st.topology = topology;
        st.overrides.clear();
        st.rebuild(&self.myid);
        let st = &mut *st;
        let (owner, me, topo) = (&st.owner, st.me, &st.topology);
        let known = |id: &String| topo.nodes.iter().any(|n| &n.id == id);
        let owned = |slot: u16| me.is_some() && owner[slot as usize] as usize == me.unwrap_or(0);
        st.migrating.retain(|s, id| owned(*s) && known(id));
        st.importing.retain(|s, id| !owned(*s) && known(id));
        Ok(())
    }

    /// Runs `f` on the state under the write lock and bumps the generation (SETSLOT).
    pub fn update<R>(&self, f: impl FnOnce(&mut State, &str) -> R) -> R {
        let mut st = self.state.write();
        let r = f(&mut st, &self.myid);
        st.rebuild(&self.myid);
        r
    }
}
