//! kvik-cluster: the admin tool of a kvik cluster.
//!
//! kvik nodes do not gossip. The topology (a version and, per node, its id, address and slot
//! ranges; see [`kvik_resp::topology`]) is whatever this tool last pushed to every node with
//! `CLUSTER SETTOPOLOGY`; a node refuses a topology that is not newer than its own. So every
//! change here reads the topology from every node, builds the next one on the newest, and pushes
//! it, with version = highest version seen + 1, to every node (a node that had fallen behind is
//! brought up to date by the same push).
//!
//! ```text
//! kvik-cluster create host:port...                 even slot split, topology version 1
//! kvik-cluster show host:port                      the topology, slot and key counts per node
//! kvik-cluster check host:port                     every slot covered once, every node agrees,
//!                                                  every replica follows its primary (ROLE)
//! kvik-cluster move-slots --from N --to N (--slots 0-100,200 | --count N) [--batch 100] host:port
//! kvik-cluster add-node new_host:port existing_host:port
//! kvik-cluster remove-node <id|host:port> existing_host:port
//! kvik-cluster add-replica replica_host:port <primary host:port|id> [--cluster host:port]
//! kvik-cluster failover <replica host:port|id> [--force] [--cluster host:port]
//! kvik-cluster sync host:port                      push the newest topology to every node
//! ```
//!
//! With `--etcd host:port[,host:port...]` every change is first committed to the cluster's
//! topology record in etcd ([`record`], the one `kvik-controller` keeps) by compare-and-swap on
//! the record's revision, then pushed: a change computed from a stale view fails instead of
//! racing the controller. The record's etcd client ([`etcd`]) and the node connection ([`Node`])
//! are public for kvik-controller.
//!
//! Nodes are named by id (40 hex characters) or by `host:port`. `-a password` (and `--user`)
//! authenticate to every node. The exit status is 0 on success, 1 when a node is unreachable,
//! disagrees or refuses, and 2 for a usage error.
//!
//! # Replicas and failover
//!
//! A replica is a node line `<id> <host> <port> replica-of <primary-id>`: the node follows its
//! primary with kvik's replication and serves its slots' reads to READONLY clients. `failover`
//! promotes a replica: with the primary alive it pauses the primary's writes (CLIENT PAUSE
//! WRITE), waits until the replica applied everything (its offset reached the primary's, which
//! stands still), then pushes the topology with the roles swapped (the replica first: it
//! promotes itself; then the old primary: it follows the new one) and unpauses (the held writes
//! get MOVED to the new primary). With `--force` an unreachable primary is left out: the push
//! goes to the nodes that answer, and `sync` brings the old primary up to date when it returns
//! (it then follows the new primary, its unreplicated writes dropped by a full sync).
//!
//! # Moving a slot (online)
//!
//! As Redis Cluster's resharding: `CLUSTER SETSLOT s IMPORTING <source>` on the target,
//! `SETSLOT s MIGRATING <target>` on the source, then `CLUSTER GETKEYSINSLOT` + `MIGRATE ...
//! REPLACE KEYS ...` in batches until the slot is empty on the source, then `SETSLOT s NODE
//! <target>` on the target and the source (effective at once) and a new topology version with
//! the slot owned by the target pushed to every node (which makes it permanent and clears the
//! migration states). Clients keep working throughout: the source serves the keys it still has
//! and answers ASK for the others; MIGRATE holds each key's lock from its export to its local
//! delete, so no write is lost.

pub mod etcd;
mod http;
mod link;
pub mod record;

use clap::{Parser, Subcommand};
use kvik_resp::topology::{even_split, is_node_id, Topology, TopologyNode};
use link::{error_text, Link};
use redis::Value;
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "kvik-cluster",
    version,
    about = "Administer a kvik cluster: create it, inspect it, move slots, add and remove nodes, \
             add replicas, fail over"
)]
struct Cli {
    /// Password of every node (AUTH).
    #[arg(short = 'a', long = "pass", global = true)]
    password: Option<String>,
    /// User name of every node (AUTH user password), with -a.
    #[arg(long, global = true)]
    user: Option<String>,
    /// Connect/read timeout for each node, in milliseconds.
    #[arg(long, global = true, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Go through the cluster's topology record in etcd (host:port of client URLs, several
    /// comma-separated), the one
    /// kvik-controller keeps: every change is committed there by compare-and-swap before it is
    /// pushed, so it cannot race the controller or another admin.
    #[arg(long, global = true)]
    etcd: Option<String>,
    /// The cluster's name in etcd (its keys are under /kvik/<name>/), with --etcd.
    #[arg(long, global = true, default_value = "kvik")]
    etcd_cluster: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Make a cluster of the given empty nodes, the 16384 slots split evenly in the order given.
    Create {
        #[arg(required = true, num_args = 1..)]
        nodes: Vec<String>,
    },
    /// Print the topology as the given node knows it, with slot and key counts.
    Show { node: String },
    /// Check that every slot is covered once and every node has the same topology.
    Check { node: String },
    /// Move slots (with their keys, online) from one node to another.
    MoveSlots {
        /// Source node: id or host:port.
        #[arg(long)]
        from: String,
        /// Target node: id or host:port.
        #[arg(long)]
        to: String,
        /// Slots to move: "0-100,200".
        #[arg(long, conflicts_with = "count", required_unless_present = "count")]
        slots: Option<String>,
        /// Move this many of the source's slots (its lowest).
        #[arg(long)]
        count: Option<usize>,
        /// Keys per GETKEYSINSLOT/MIGRATE round.
        #[arg(long, default_value_t = 100)]
        batch: usize,
        /// MIGRATE's timeout, in milliseconds.
        #[arg(long, default_value_t = 5_000)]
        migrate_timeout_ms: u64,
        /// Any node of the cluster.
        node: String,
    },
    /// Add an empty node to the cluster (it owns no slots until some are moved to it).
    AddNode { new: String, existing: String },
    /// Remove a node that owns no slots.
    RemoveNode { node: String, existing: String },
    /// Make a node (new, or one of the cluster owning no slots) a replica of a primary; waits
    /// until it is in sync.
    AddReplica {
        /// The replica: host:port.
        replica: String,
        /// Its primary: host:port or node id.
        primary: String,
        /// Any node of the cluster (needed when the primary is given by id).
        #[arg(long)]
        cluster: Option<String>,
        /// How long to wait for the replica's first sync, in milliseconds.
        #[arg(long, default_value_t = 120_000)]
        sync_timeout_ms: u64,
    },
    /// Promote a replica to primary of its shard; the old primary becomes its replica.
    Failover {
        /// The replica to promote: host:port or node id.
        replica: String,
        /// Promote even though the primary is unreachable (its writes not yet replicated are
        /// lost), or without waiting for the replica to catch up.
        #[arg(long)]
        force: bool,
        /// Any node of the cluster (needed when the replica is given by id).
        #[arg(long)]
        cluster: Option<String>,
        /// How long to wait for the replica to catch up (the primary's writes are paused
        /// meanwhile), in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        catch_up_timeout_ms: u64,
    },
    /// Push the newest topology (as a new version) to every node: brings up to date a node
    /// that missed a push (an old primary back after a forced failover).
    Sync { node: String },
}

/// What a failed command says (exit status 1).
pub type Fail = String;

/// Runs the tool with `args` (args[0] is the program name); returns the exit status.
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let text = e.render().to_string();
            if code == 0 {
                let _ = write!(out, "{text}");
            } else {
                let _ = write!(err, "{text}");
            }
            return code;
        }
    };
    let opts = Opts {
        user: cli.user.clone(),
        password: cli.password.clone(),
        timeout: Duration::from_millis(cli.timeout_ms.max(1)),
        etcd: cli.etcd.as_deref().map(|addr| EtcdRecord {
            etcd: etcd::Etcd::new(addr, Duration::from_millis(cli.timeout_ms.max(1))),
            keys: record::Keys::new(&cli.etcd_cluster),
        }),
    };
    let mut ui = Ui { out, err };
    let result = match &cli.cmd {
        Cmd::Create { nodes } => create(&opts, &mut ui, nodes),
        Cmd::Show { node } => show(&opts, &mut ui, node),
        Cmd::Check { node } => check(&opts, &mut ui, node),
        Cmd::MoveSlots {
            from,
            to,
            slots,
            count,
            batch,
            migrate_timeout_ms,
            node,
        } => {
            let plan = MovePlan {
                from,
                to,
                slots: slots.as_deref(),
                count: *count,
                batch: (*batch).max(1),
                migrate_timeout: Duration::from_millis((*migrate_timeout_ms).max(1)),
            };
            move_slots(&opts, &mut ui, node, &plan)
        }
        Cmd::AddNode { new, existing } => add_node(&opts, &mut ui, new, existing),
        Cmd::RemoveNode { node, existing } => remove_node(&opts, &mut ui, node, existing),
        Cmd::AddReplica {
            replica,
            primary,
            cluster,
            sync_timeout_ms,
        } => add_replica(
            &opts,
            &mut ui,
            replica,
            primary,
            cluster.as_deref(),
            Duration::from_millis(*sync_timeout_ms),
        ),
        Cmd::Failover {
            replica,
            force,
            cluster,
            catch_up_timeout_ms,
        } => {
            let plan = FailoverPlan {
                replica,
                force: *force,
                seed: cluster.as_deref(),
                catch_up: Duration::from_millis((*catch_up_timeout_ms).max(1)),
            };
            failover(&opts, &mut ui, &plan)
        }
        Cmd::Sync { node } => sync(&opts, &mut ui, node),
    };
    match result {
        Ok(()) => 0,
        Err(msg) => {
            let _ = writeln!(ui.err, "[ERR] {msg}");
            1
        }
    }
}

/// Where messages go.
struct Ui<'a> {
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
}

impl Ui<'_> {
    fn say(&mut self, line: impl std::fmt::Display) {
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
    }
    fn warn(&mut self, line: impl std::fmt::Display) {
        let _ = writeln!(self.err, "[WARNING] {line}");
    }
}

/* ---- Talking to one node ---- */

/// Connection settings shared by every node.
pub struct Opts {
    pub user: Option<String>,
    pub password: Option<String>,
    /// Connect, read and write timeout of each node's connection.
    pub timeout: Duration,
    /// The record changes go through (`--etcd`); None: the nodes alone.
    pub etcd: Option<EtcdRecord>,
}

/// The cluster's topology record in etcd (see [`record`]).
#[derive(Clone, Debug)]
pub struct EtcdRecord {
    pub etcd: etcd::Etcd,
    pub keys: record::Keys,
}

impl EtcdRecord {
    /// The stored topology and its mod_revision (version 0, revision 0: none yet).
    fn read(&self) -> Result<(Topology, i64), Fail> {
        Ok(match record::load(&self.etcd, &self.keys)? {
            Some(s) => (s.topology, s.mod_revision),
            None => (Topology::default(), 0),
        })
    }

    /// Commits `next` if the record is still at `based_on`; returns the new mod_revision.
    fn commit(&self, based_on: i64, next: &Topology) -> Result<i64, Fail> {
        record::store(&self.etcd, &self.keys, None, based_on, next, None)?.ok_or_else(|| {
            format!(
                "the topology in etcd ({}) changed since it was read (kvik-controller or another \
                 admin acted): nothing was pushed; run the command again",
                self.keys.topology
            )
        })
    }
}

/// One node's connection.
pub struct Node {
    pub addr: String,
    host: String,
    port: u16,
    con: Link,
}

/// Splits "host:port" (the last colon separates, so IPv6 literals work).
pub fn split_addr(addr: &str) -> Result<(String, u16), Fail> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("'{addr}' is not host:port"))?;
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("'{addr}' has an invalid port"))?;
    if host.is_empty() {
        return Err(format!("'{addr}' has no host"));
    }
    Ok((host.trim_matches(['[', ']']).to_string(), port))
}

impl Node {
    pub fn connect(opts: &Opts, addr: &str) -> Result<Node, Fail> {
        let (host, port) = split_addr(addr)?;
        let con = Link::open(
            &host,
            port,
            opts.timeout,
            opts.user.as_deref(),
            opts.password.as_deref(),
        )
        .map_err(|e| format!("node {addr} is unreachable: {e}"))?;
        let mut node = Node {
            addr: addr.to_string(),
            host,
            port,
            con,
        };
        // A node that accepts but does not answer (stopped, or wedged) is unreachable; one
        // that answers with an error (NOAUTH: no password given) is reachable, and the command
        // that needs more says what.
        match node.con.request(&redis::cmd("PING")) {
            Err(e) if e.is_io_error() => Err(format!(
                "node {addr} is unreachable: no answer to PING: {}",
                error_text(&e)
            )),
            _ => Ok(node),
        }
    }

    pub fn query<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T, Fail> {
        let reply = self
            .con
            .request(cmd)
            .and_then(|v| redis::from_owned_redis_value(v));
        reply.map_err(|e| {
            let name = cmd
                .args_iter()
                .take(2)
                .map(|a| match a {
                    redis::Arg::Simple(b) => String::from_utf8_lossy(b).to_uppercase(),
                    redis::Arg::Cursor => String::new(),
                })
                .collect::<Vec<_>>()
                .join(" ");
            let hint = if e.code() == Some("NOAUTH") {
                " (give the password with -a)"
            } else {
                ""
            };
            format!(
                "node {}: {name} failed: {}{hint}",
                self.addr,
                error_text(&e)
            )
        })
    }

    pub fn myid(&mut self) -> Result<String, Fail> {
        let id: String = self.query(redis::cmd("CLUSTER").arg("MYID"))?;
        if !is_node_id(&id) {
            return Err(format!("node {}: CLUSTER MYID gave '{id}'", self.addr));
        }
        Ok(id)
    }

    /// The node's topology (version 0 and no nodes before any push).
    pub fn topology(&mut self) -> Result<Topology, Fail> {
        let v: Value = self.query(redis::cmd("CLUSTER").arg("TOPOLOGY"))?;
        let (version, lines): (u64, Vec<String>) = redis::from_redis_value(&v)
            .map_err(|e| format!("node {}: bad CLUSTER TOPOLOGY reply: {e}", self.addr))?;
        Topology::from_lines(version, &lines)
            .map_err(|e| format!("node {}: its topology is invalid: {e}", self.addr))
    }

    pub fn set_topology(&mut self, t: &Topology) -> Result<(), Fail> {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETTOPOLOGY").arg(t.version).arg(t.lines());
        let _: Value = self.query(&cmd)?;
        Ok(())
    }

    /// ROLE: the replication role and offset.
    pub fn role(&mut self) -> Result<Role, Fail> {
        let v: Value = self.query(&redis::cmd("ROLE"))?;
        let bad = || format!("node {}: unexpected ROLE reply {v:?}", self.addr);
        let Value::Array(items) = &v else {
            return Err(bad());
        };
        let text = |i: usize| -> Option<String> { redis::from_redis_value(items.get(i)?).ok() };
        let int = |i: usize| -> Option<i64> { redis::from_redis_value(items.get(i)?).ok() };
        match text(0).as_deref() {
            Some("master") => Ok(Role::Primary {
                offset: int(1).ok_or_else(bad)?.max(0) as u64,
            }),
            Some("slave") => Ok(Role::Replica {
                primary: format!("{}:{}", text(1).ok_or_else(bad)?, int(2).ok_or_else(bad)?),
                connected: text(3).as_deref() == Some("connected"),
                offset: int(4).ok_or_else(bad)?,
            }),
            _ => Err(bad()),
        }
    }

    fn dbsize(&mut self) -> Result<i64, Fail> {
        self.query(&redis::cmd("DBSIZE"))
    }

    fn setslot(&mut self, slot: u16, state: &str, id: &str) -> Result<(), Fail> {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(slot).arg(state).arg(id);
        let _: Value = self.query(&cmd)?;
        Ok(())
    }
}

/// A node's replication role (ROLE).
#[derive(Debug, PartialEq, Eq)]
pub enum Role {
    Primary {
        offset: u64,
    },
    Replica {
        /// "host:port" it follows.
        primary: String,
        /// The link is up and streaming.
        connected: bool,
        /// The offset applied (-1 while not connected).
        offset: i64,
    },
}

/* ---- The cluster as the nodes see it ---- */

/// Every node of the newest topology any node has, connected.
struct Cluster {
    /// The newest topology seen (the base of the next one).
    topology: Topology,
    /// Connections, in topology node order; `None` for a node that did not answer (only when
    /// loaded with [`Cluster::load_reachable`]).
    nodes: Vec<Option<Node>>,
    /// Each node's own version (same order), to report laggards.
    versions: Vec<u64>,
    /// With `--etcd`: the record and the mod_revision the next push is based on.
    record: Option<(EtcdRecord, i64)>,
}

/// The topology `seed` knows, with the connection to it; an error if it has none.
fn seed_topology(opts: &Opts, seed: &str) -> Result<(Node, Topology), Fail> {
    let mut node = Node::connect(opts, seed)?;
    let topology = node.topology()?;
    if topology.version == 0 || topology.nodes.is_empty() {
        return Err(format!(
            "node {seed} has no topology: it is not part of a cluster (use create)"
        ));
    }
    Ok((node, topology))
}

impl Cluster {
    /// Reads the topology from `seed`, then from every node it names; fails if one is
    /// unreachable. Uses the newest topology found (nodes may name more nodes).
    fn load(opts: &Opts, ui: &mut Ui<'_>, seed: &str) -> Result<Cluster, Fail> {
        let cluster = Cluster::load_reachable(opts, ui, seed)?;
        match cluster.nodes.iter().position(Option::is_none) {
            Some(i) => Err(format!(
                "node {} is unreachable",
                cluster.topology.nodes[i].addr()
            )),
            None => Ok(cluster),
        }
    }

    /// [`Cluster::load`], but a node that does not answer is left out (`None`, with a warning).
    fn load_reachable(opts: &Opts, ui: &mut Ui<'_>, seed: &str) -> Result<Cluster, Fail> {
        let (first, mut topology) = seed_topology(opts, seed)?;
        let mut seen: std::collections::HashMap<String, (Option<Node>, u64)> = Default::default();
        seen.insert(seed.to_string(), (Some(first), topology.version));
        // Follow newer topologies until no node knows a newer one (bounded: versions grow).
        for _ in 0..4 {
            let mut newest = topology.clone();
            for n in &topology.nodes {
                let addr = n.addr();
                if !seen.contains_key(&addr) {
                    let node = match Node::connect(opts, &addr) {
                        Ok(node) => Some(node),
                        Err(e) => {
                            ui.warn(&e);
                            None
                        }
                    };
                    seen.insert(addr.clone(), (node, 0));
                }
                let (node, version) = seen.get_mut(&addr).expect("inserted");
                let Some(node) = node else { continue };
                let t = node.topology()?;
                *version = t.version;
                if t.version > newest.version {
                    newest = t;
                }
            }
            if newest.version == topology.version {
                break;
            }
            topology = newest;
        }
        let mut nodes = Vec::new();
        let mut versions = Vec::new();
        for n in &topology.nodes {
            let (node, version) = seen.remove(&n.addr()).expect("connected above");
            let Some(mut node) = node else {
                nodes.push(None);
                versions.push(0);
                continue;
            };
            let id = node.myid()?;
            if id != n.id {
                return Err(format!(
                    "node {} has id {id}, but the topology says {} is there",
                    n.addr(),
                    n.id
                ));
            }
            if version != topology.version {
                ui.warn(format_args!(
                    "node {} has topology version {version}, the newest is {}: the next push \
                     brings it up to date",
                    n.addr(),
                    topology.version
                ));
            }
            nodes.push(Some(node));
            versions.push(version);
        }
        let record = match &opts.etcd {
            None => None,
            Some(rec) => {
                let (stored, revision) = rec.read()?;
                if stored.version > topology.version {
                    return Err(format!(
                        "etcd holds topology version {} but the nodes have at most {}: a change \
                         is being pushed (wait, or run `kvik-cluster --etcd .. sync`)",
                        stored.version, topology.version
                    ));
                }
                Some((rec.clone(), revision))
            }
        };
        Ok(Cluster {
            topology,
            nodes,
            versions,
            record,
        })
    }

    /// The index of the node named by `name` (id or host:port).
    fn find(&self, name: &str) -> Result<usize, Fail> {
        self.topology
            .nodes
            .iter()
            .position(|n| n.id == name || n.addr() == name)
            .ok_or_else(|| format!("no node '{name}' in the cluster (give an id or host:port)"))
    }

    /// The connection to node `i` (an error if it did not answer when loaded).
    fn node(&mut self, i: usize) -> Result<&mut Node, Fail> {
        let addr = self.topology.nodes[i].addr();
        self.nodes[i]
            .as_mut()
            .ok_or_else(|| format!("node {addr} is unreachable"))
    }

    /// Pushes `next` (its version set to the current one + 1) to every connected node, `first`
    /// ones first; a node that did not answer when loaded is skipped (`sync` catches it up
    /// later). Returns the version pushed.
    fn push(&mut self, mut next: Topology, first: &[usize]) -> Result<u64, Fail> {
        next.version = self.topology.version + 1;
        next.validate()
            .map_err(|e| format!("refusing to push an invalid topology: {e}"))?;
        if let Some((rec, revision)) = &mut self.record {
            // Committed in etcd first: the record orders this change with the controller's.
            *revision = rec.commit(*revision, &next)?;
        }
        let mut order: Vec<usize> = first.to_vec();
        order.extend((0..self.nodes.len()).filter(|i| !first.contains(i)));
        for i in order {
            // Nodes in `nodes` are the current topology's; `next` may have one more (add).
            let Some(node) = self.nodes.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            node.set_topology(&next)?;
            self.versions[i] = next.version;
        }
        let v = next.version;
        self.topology = next;
        Ok(v)
    }
}

/// "0-5460" or "7" per range, comma separated.
fn ranges_text(ranges: &[(u16, u16)]) -> String {
    if ranges.is_empty() {
        return "-".to_string();
    }
    ranges
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Slots as sorted inclusive ranges.
fn to_ranges(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut sorted = slots.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<(u16, u16)> = Vec::new();
    for s in sorted {
        match out.last_mut() {
            Some(last) if last.1 + 1 == s => last.1 = s,
            _ => out.push((s, s)),
        }
    }
    out
}

/* ---- Commands ---- */

fn create(opts: &Opts, ui: &mut Ui<'_>, addrs: &[String]) -> Result<(), Fail> {
    for (i, a) in addrs.iter().enumerate() {
        split_addr(a)?;
        if addrs[..i].contains(a) {
            return Err(format!("node {a} is given twice"));
        }
    }
    let mut nodes = Vec::new();
    let mut version = 0;
    for a in addrs {
        let mut n = Node::connect(opts, a)?;
        let t = n.topology()?;
        if !t.nodes.is_empty() {
            return Err(format!(
                "node {a} already belongs to a cluster (topology version {}); \
                 use add-node to grow a cluster",
                t.version
            ));
        }
        let keys = n.dbsize()?;
        if keys > 0 {
            return Err(format!("node {a} is not empty ({keys} keys in database 0)"));
        }
        version = version.max(t.version);
        let id = n.myid()?;
        nodes.push((n, id));
    }
    let split = even_split(nodes.len());
    let topology = Topology {
        version: version + 1,
        nodes: nodes
            .iter()
            .zip(&split)
            .map(|((n, id), range)| {
                TopologyNode::primary(id.clone(), n.host.clone(), n.port, vec![*range])
            })
            .collect(),
    };
    let mut checked = topology.clone();
    checked.validate()?;
    if let Some(rec) = &opts.etcd {
        let (stored, revision) = rec.read()?;
        if stored.version > 0 {
            return Err(format!(
                "etcd already holds topology version {} for this cluster ({})",
                stored.version, rec.keys.topology
            ));
        }
        rec.commit(revision, &topology)?;
    }
    for (n, _) in &mut nodes {
        n.set_topology(&topology)?;
    }
    ui.say(format_args!(
        "[OK] cluster created: {} nodes, topology version {}",
        nodes.len(),
        topology.version
    ));
    for (n, r) in topology.nodes.iter().zip(&split) {
        ui.say(format_args!(
            "{} {} slots {} ({} slots)",
            n.id,
            n.addr(),
            ranges_text(&[*r]),
            n.slot_count()
        ));
    }
    Ok(())
}

fn show(opts: &Opts, ui: &mut Ui<'_>, seed: &str) -> Result<(), Fail> {
    let (_, t) = seed_topology(opts, seed)?;
    ui.say(format_args!(
        "topology version {} ({} nodes), as {seed} knows it",
        t.version,
        t.nodes.len()
    ));
    let mut unreachable = 0;
    for n in &t.nodes {
        let state = match Node::connect(opts, &n.addr()).and_then(|mut c| {
            let v = c.topology()?.version;
            Ok((c.dbsize()?, v))
        }) {
            Ok((keys, v)) if v == t.version => format!("{keys} keys"),
            Ok((keys, v)) => format!("{keys} keys, has topology version {v}"),
            Err(e) => {
                unreachable += 1;
                format!("UNREACHABLE ({e})")
            }
        };
        match &n.primary {
            Some(p) => ui.say(format_args!("{} {} replica of {p} {state}", n.id, n.addr())),
            None => ui.say(format_args!(
                "{} {} slots {} ({} slots) {state}",
                n.id,
                n.addr(),
                ranges_text(&n.slots),
                n.slot_count()
            )),
        }
    }
    let uncovered = t.uncovered();
    if !uncovered.is_empty() {
        ui.say(format_args!(
            "{} slots are not covered: {}",
            uncovered.len(),
            ranges_text(&to_ranges(&uncovered))
        ));
    }
    if unreachable > 0 {
        return Err(format!("{unreachable} node(s) unreachable"));
    }
    Ok(())
}

fn check(opts: &Opts, ui: &mut Ui<'_>, seed: &str) -> Result<(), Fail> {
    let (_, t) = seed_topology(opts, seed)?;
    ui.say(format_args!(
        "checking topology version {} ({} nodes) from {seed}",
        t.version,
        t.nodes.len()
    ));
    let mut problems: Vec<String> = Vec::new();
    for n in &t.nodes {
        let addr = n.addr();
        let mut node = match Node::connect(opts, &addr) {
            Ok(c) => c,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        match node.myid() {
            Ok(id) if id == n.id => {}
            Ok(id) => problems.push(format!(
                "node {addr} has id {id}, but the topology says {} is there",
                n.id
            )),
            Err(e) => problems.push(e),
        }
        match node.topology() {
            Ok(other) if other.version != t.version => problems.push(format!(
                "node {addr} disagrees: it has topology version {}, {seed} has {}",
                other.version, t.version
            )),
            Ok(other) if other != t => problems.push(format!(
                "node {addr} disagrees: same version {} but a different topology",
                t.version
            )),
            Ok(_) => {}
            Err(e) => problems.push(e),
        }
        let primary_addr = n
            .primary
            .as_deref()
            .and_then(|p| t.node(p))
            .map(|p| p.addr());
        match (node.role(), primary_addr) {
            (Ok(Role::Primary { .. }), None) => {}
            (
                Ok(Role::Replica {
                    primary, connected, ..
                }),
                Some(p),
            ) if primary == p => {
                if !connected {
                    ui.warn(format_args!(
                        "replica {addr} is not in sync with {p} yet (see its INFO replication)"
                    ));
                }
            }
            (Ok(role), want) => problems.push(format!(
                "node {addr} should be {} but ROLE says {role:?}",
                want.map_or("a primary".to_string(), |p| format!("a replica of {p}"))
            )),
            (Err(e), _) => problems.push(e),
        }
        if let Ok(nodes) = node.query::<String>(redis::cmd("CLUSTER").arg("NODES")) {
            let open: Vec<&str> = nodes
                .lines()
                .filter(|l| l.contains("myself"))
                .flat_map(|l| l.split(' '))
                .filter(|w| w.starts_with('[') && w.contains("->-") || w.contains("-<-"))
                .collect();
            if !open.is_empty() {
                ui.warn(format_args!(
                    "node {addr} has slots being migrated: {}",
                    open.join(" ")
                ));
            }
        }
    }
    let uncovered = t.uncovered();
    if !uncovered.is_empty() {
        problems.push(format!(
            "{} slots are not covered by any node: {}",
            uncovered.len(),
            ranges_text(&to_ranges(&uncovered))
        ));
    }
    if problems.is_empty() {
        ui.say(format_args!(
            "[OK] all 16384 slots are covered; all {} nodes agree on topology version {}",
            t.nodes.len(),
            t.version
        ));
        return Ok(());
    }
    for p in &problems {
        let _ = writeln!(ui.err, "[ERR] {p}");
    }
    Err(format!(
        "the cluster check found {} problem(s)",
        problems.len()
    ))
}

/// What move-slots was asked.
struct MovePlan<'a> {
    from: &'a str,
    to: &'a str,
    slots: Option<&'a str>,
    count: Option<usize>,
    batch: usize,
    migrate_timeout: Duration,
}

/// Parses "0-100,200" into slots.
fn parse_slots(text: &str) -> Result<Vec<u16>, Fail> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = kvik_resp::topology::parse_slot_range(part)?;
        out.extend(a..=b);
    }
    if out.is_empty() {
        return Err(format!("no slots in '{text}'"));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn move_slots(opts: &Opts, ui: &mut Ui<'_>, seed: &str, plan: &MovePlan<'_>) -> Result<(), Fail> {
    let mut cluster = Cluster::load(opts, ui, seed)?;
    let src = cluster.find(plan.from)?;
    let dst = cluster.find(plan.to)?;
    if src == dst {
        return Err("--from and --to name the same node".to_string());
    }
    let src_node = cluster.topology.nodes[src].clone();
    let dst_node = cluster.topology.nodes[dst].clone();
    if let Some(r) = [&src_node, &dst_node].into_iter().find(|n| n.is_replica()) {
        return Err(format!(
            "node {} is a replica: slots move between primaries",
            r.addr()
        ));
    }
    let owned: Vec<u16> = src_node.slots.iter().flat_map(|&(a, b)| a..=b).collect();
    let slots = match (plan.slots, plan.count) {
        (Some(text), _) => {
            let slots = parse_slots(text)?;
            if let Some(s) = slots.iter().find(|s| !owned.contains(s)) {
                let owner = cluster
                    .topology
                    .owner(*s)
                    .map_or("no node".to_string(), |n| {
                        format!("{} ({})", n.addr(), n.id)
                    });
                return Err(format!(
                    "slot {s} is owned by {owner}, not by {}",
                    src_node.addr()
                ));
            }
            slots
        }
        (None, Some(n)) => {
            if n > owned.len() {
                return Err(format!(
                    "{} owns {} slots, fewer than --count {n}",
                    src_node.addr(),
                    owned.len()
                ));
            }
            owned[..n].to_vec()
        }
        (None, None) => return Err("give --slots or --count".to_string()),
    };
    ui.say(format_args!(
        "moving {} slots ({}) from {} to {}",
        slots.len(),
        ranges_text(&to_ranges(&slots)),
        src_node.addr(),
        dst_node.addr()
    ));
    let started = Instant::now();
    let mut total_keys = 0u64;
    for (i, &slot) in slots.iter().enumerate() {
        let keys = move_one_slot(opts, &mut cluster, src, dst, slot, plan)?;
        total_keys += keys;
        let mut next = cluster.topology.clone();
        for n in &mut next.nodes {
            n.slots = remove_slot(&n.slots, slot);
        }
        next.nodes[dst].slots.push((slot, slot));
        let version = cluster.push(next, &[dst, src])?;
        ui.say(format_args!(
            "slot {slot}: {keys} keys moved, topology version {version} [{}/{}]",
            i + 1,
            slots.len()
        ));
    }
    ui.say(format_args!(
        "[OK] moved {} slots and {total_keys} keys from {} to {} in {:.1}s",
        slots.len(),
        src_node.addr(),
        dst_node.addr(),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// `ranges` without `slot`.
fn remove_slot(ranges: &[(u16, u16)], slot: u16) -> Vec<(u16, u16)> {
    let mut out = Vec::with_capacity(ranges.len() + 1);
    for &(a, b) in ranges {
        if slot < a || slot > b {
            out.push((a, b));
            continue;
        }
        if a < slot {
            out.push((a, slot - 1));
        }
        if slot < b {
            out.push((slot + 1, b));
        }
    }
    out
}

/// Opens `slot` for migration, moves its keys in batches, and flips it to the target with
/// SETSLOT NODE on both ends. Returns how many keys moved.
///
/// If the source still holds keys of the slot when asked to let it go (a write accepted there
/// after the last batch; the nodes' slot gate is meant to prevent it), it refuses SETSLOT NODE
/// ("still hold keys") and the slot is drained again before retrying.
fn move_one_slot(
    opts: &Opts,
    cluster: &mut Cluster,
    src: usize,
    dst: usize,
    slot: u16,
    plan: &MovePlan<'_>,
) -> Result<u64, Fail> {
    let src_id = cluster.topology.nodes[src].id.clone();
    let dst_id = cluster.topology.nodes[dst].id.clone();
    let target = (
        cluster.topology.nodes[dst].host.clone(),
        cluster.topology.nodes[dst].port,
    );
    cluster.node(dst)?.setslot(slot, "IMPORTING", &src_id)?;
    cluster.node(src)?.setslot(slot, "MIGRATING", &dst_id)?;
    let mut moved = drain_slot(opts, cluster.node(src)?, &target, slot, plan)?;
    cluster.node(dst)?.setslot(slot, "NODE", &dst_id)?;
    let mut attempt = 0;
    loop {
        match cluster.node(src)?.setslot(slot, "NODE", &dst_id) {
            Ok(()) => return Ok(moved),
            Err(e) if e.contains("still hold keys") && attempt < 50 => {
                attempt += 1;
                moved += drain_slot(opts, cluster.node(src)?, &target, slot, plan)?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// GETKEYSINSLOT + MIGRATE ... REPLACE KEYS on `source` until the slot is empty there.
fn drain_slot(
    opts: &Opts,
    source: &mut Node,
    (dst_host, dst_port): &(String, u16),
    slot: u16,
    plan: &MovePlan<'_>,
) -> Result<u64, Fail> {
    // MIGRATE may take up to its timeout per I/O step: let the reply take that long.
    let slow = (plan.migrate_timeout * 3).max(opts.timeout);
    source
        .con
        .set_read_timeout(slow)
        .map_err(|e| format!("node {}: {e}", source.addr))?;
    let mut moved = 0u64;
    let mut stalled = 0;
    loop {
        let keys: Vec<Vec<u8>> = source.query(
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(plan.batch),
        )?;
        if keys.is_empty() {
            break;
        }
        let mut cmd = redis::cmd("MIGRATE");
        cmd.arg(dst_host)
            .arg(*dst_port)
            .arg("")
            .arg(0)
            .arg(plan.migrate_timeout.as_millis() as u64)
            .arg("REPLACE");
        if let Some(pw) = &opts.password {
            match &opts.user {
                Some(u) => cmd.arg("AUTH2").arg(u).arg(pw),
                None => cmd.arg("AUTH").arg(pw),
            };
        }
        cmd.arg("KEYS").arg(&keys);
        match source.con.request(&cmd) {
            Ok(_) => {
                moved += keys.len() as u64;
                stalled = 0;
            }
            // Keys of the batch expired or were deleted between GETKEYSINSLOT and MIGRATE
            // (some: TRYAGAIN, all: ASK, if the node routes MIGRATE like other commands):
            // read the slot again.
            Err(e)
                if matches!(e.kind(), redis::ErrorKind::TryAgain | redis::ErrorKind::Ask)
                    && stalled < 100 =>
            {
                stalled += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                return Err(format!(
                    "node {}: MIGRATE of slot {slot} to {dst_host}:{dst_port} failed: {} \
                     (the slot stays open: run move-slots again for slot {slot})",
                    source.addr,
                    error_text(&e)
                ))
            }
        }
    }
    source
        .con
        .set_read_timeout(opts.timeout)
        .map_err(|e| format!("node {}: {e}", source.addr))?;
    Ok(moved)
}

fn add_node(opts: &Opts, ui: &mut Ui<'_>, new: &str, existing: &str) -> Result<(), Fail> {
    let (host, port) = split_addr(new)?;
    let mut cluster = Cluster::load(opts, ui, existing)?;
    let mut node = Node::connect(opts, new)?;
    let id = node.myid()?;
    if let Some(n) = cluster
        .topology
        .nodes
        .iter()
        .find(|n| n.id == id || n.addr() == format!("{host}:{port}"))
    {
        return Err(format!(
            "node {new} (id {id}) is already in the cluster as {} {}",
            n.id,
            n.addr()
        ));
    }
    let own = node.topology()?;
    if own.nodes.iter().any(|n| n.id != id) {
        return Err(format!(
            "node {new} belongs to another cluster (its topology version {} names other nodes)",
            own.version
        ));
    }
    // The new node must accept the push too: start above its own version.
    if own.version > cluster.topology.version {
        cluster.topology.version = own.version;
    }
    let mut next = cluster.topology.clone();
    next.nodes
        .push(TopologyNode::primary(id.clone(), host, port, Vec::new()));
    cluster.nodes.push(Some(node));
    cluster.versions.push(own.version);
    let last = cluster.nodes.len() - 1;
    let version = cluster.push(next, &[last])?;
    ui.say(format_args!(
        "[OK] node {new} (id {id}) added, topology version {version}; it owns no slots yet \
         (use move-slots)"
    ));
    Ok(())
}

fn remove_node(opts: &Opts, ui: &mut Ui<'_>, name: &str, existing: &str) -> Result<(), Fail> {
    let mut cluster = Cluster::load(opts, ui, existing)?;
    let i = cluster.find(name)?;
    let gone = cluster.topology.nodes[i].clone();
    if gone.slot_count() > 0 {
        return Err(format!(
            "node {} ({}) still owns {} slots ({}): move them to other nodes first with \
             move-slots",
            gone.addr(),
            gone.id,
            gone.slot_count(),
            ranges_text(&gone.slots)
        ));
    }
    if cluster.topology.nodes.len() == 1 {
        return Err("refusing to remove the last node of the cluster".to_string());
    }
    if let Some(r) = cluster.topology.replicas_of(&gone.id).next() {
        return Err(format!(
            "node {} has replicas ({} first): remove them or fail over to one first",
            gone.addr(),
            r.addr()
        ));
    }
    let mut next = cluster.topology.clone();
    next.nodes.remove(i);
    // Pushed to the removed node too, so it knows it owns nothing and redirects clients; it is
    // then forgotten.
    let version = cluster.push(next, &[])?;
    ui.say(format_args!(
        "[OK] node {} ({}) removed, topology version {version}",
        gone.addr(),
        gone.id
    ));
    Ok(())
}

/// The node to load the cluster from: `seed`, or `name` when it is an address.
fn seed_of<'a>(name: &'a str, seed: Option<&'a str>, what: &str) -> Result<&'a str, Fail> {
    match seed {
        Some(s) => Ok(s),
        None if split_addr(name).is_ok() => Ok(name),
        None => Err(format!(
            "the {what} is given by id: name any node of the cluster with --cluster host:port"
        )),
    }
}

fn add_replica(
    opts: &Opts,
    ui: &mut Ui<'_>,
    replica: &str,
    primary: &str,
    seed: Option<&str>,
    sync_timeout: Duration,
) -> Result<(), Fail> {
    let (host, port) = split_addr(replica)?;
    let mut cluster = Cluster::load(opts, ui, seed_of(primary, seed, "primary")?)?;
    let p = cluster.find(primary)?;
    let primary_node = cluster.topology.nodes[p].clone();
    if primary_node.is_replica() {
        return Err(format!(
            "node {} is a replica itself: name its primary",
            primary_node.addr()
        ));
    }
    let mut node = Node::connect(opts, replica)?;
    let id = node.myid()?;
    let mut next = cluster.topology.clone();
    let line = TopologyNode {
        id: id.clone(),
        host,
        port,
        slots: Vec::new(),
        primary: Some(primary_node.id.clone()),
    };
    let at = match cluster.topology.nodes.iter().position(|n| n.id == id) {
        Some(i) => {
            let n = &cluster.topology.nodes[i];
            if n.slot_count() > 0 {
                return Err(format!(
                    "node {replica} owns {} slots: move them away first",
                    n.slot_count()
                ));
            }
            if let Some(r) = cluster.topology.replicas_of(&id).next() {
                return Err(format!(
                    "node {replica} has replicas ({} first): a replica's primary is a primary",
                    r.addr()
                ));
            }
            next.nodes[i] = line;
            i
        }
        None => {
            let own = node.topology()?;
            if own.nodes.iter().any(|n| n.id != id) {
                return Err(format!(
                    "node {replica} belongs to another cluster (its topology version {} names \
                     other nodes)",
                    own.version
                ));
            }
            if own.version > cluster.topology.version {
                cluster.topology.version = own.version;
            }
            next.nodes.push(line);
            cluster.nodes.push(Some(node));
            cluster.versions.push(own.version);
            cluster.nodes.len() - 1
        }
    };
    let version = cluster.push(next, &[at])?;
    ui.say(format_args!(
        "node {replica} (id {id}) is now a replica of {} ({}), topology version {version}; \
         waiting for its sync",
        primary_node.addr(),
        primary_node.id
    ));
    let deadline = Instant::now() + sync_timeout;
    loop {
        if let Role::Replica {
            connected: true, ..
        } = cluster.node(at)?.role()?
        {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "node {replica} follows {} but is not in sync after {}s (see its INFO \
                 replication)",
                primary_node.addr(),
                sync_timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    ui.say(format_args!("[OK] replica {replica} is in sync"));
    Ok(())
}

/// What failover was asked.
struct FailoverPlan<'a> {
    replica: &'a str,
    force: bool,
    seed: Option<&'a str>,
    catch_up: Duration,
}

/// The topology with replica `r` promoted in place of its primary `p`: `r` takes `p`'s slots,
/// `p` and `p`'s other replicas follow `r`.
pub fn swapped(t: &Topology, r: usize, p: usize) -> Topology {
    let mut next = t.clone();
    let (old_id, new_id) = (t.nodes[p].id.clone(), t.nodes[r].id.clone());
    next.nodes[r].slots = std::mem::take(&mut next.nodes[p].slots);
    next.nodes[r].primary = None;
    for n in &mut next.nodes {
        if n.id == old_id || n.primary.as_deref() == Some(old_id.as_str()) {
            n.primary = Some(new_id.clone());
        }
    }
    next
}

fn failover(opts: &Opts, ui: &mut Ui<'_>, plan: &FailoverPlan<'_>) -> Result<(), Fail> {
    let seed = seed_of(plan.replica, plan.seed, "replica")?;
    let mut cluster = Cluster::load_reachable(opts, ui, seed)?;
    let r = cluster.find(plan.replica)?;
    let replica = cluster.topology.nodes[r].clone();
    let Some(primary_id) = replica.primary.clone() else {
        return Err(format!("node {} is not a replica", replica.addr()));
    };
    let p = cluster.find(&primary_id)?;
    let primary = cluster.topology.nodes[p].clone();
    cluster.node(r)?;
    let down: Vec<String> = (0..cluster.nodes.len())
        .filter(|i| cluster.nodes[*i].is_none())
        .map(|i| cluster.topology.nodes[i].addr())
        .collect();
    if !down.is_empty() && !plan.force {
        return Err(format!(
            "unreachable: {}; give --force to fail over without them (writes the primary did \
             not replicate are lost)",
            down.join(", ")
        ));
    }
    let alive = cluster.nodes[p].is_some();
    let paused = alive && !plan.force;
    let pause_began = Instant::now();
    if paused {
        ui.say(format_args!(
            "pausing writes on {} and waiting for {} to catch up",
            primary.addr(),
            replica.addr()
        ));
        let ms = plan.catch_up.as_millis() as u64 + opts.timeout.as_millis() as u64;
        let _: Value = cluster
            .node(p)?
            .query(redis::cmd("CLIENT").arg("PAUSE").arg(ms).arg("WRITE"))?;
        if let Err(e) = catch_up(&mut cluster, r, p, plan.catch_up) {
            let _ = cluster
                .node(p)?
                .query::<Value>(redis::cmd("CLIENT").arg("UNPAUSE"));
            return Err(e);
        }
    }
    let next = swapped(&cluster.topology, r, p);
    let pushed = cluster.push(next, &[r, p]);
    if paused {
        // The held writes now meet the new topology: MOVED to the new primary.
        let _ = cluster
            .node(p)?
            .query::<Value>(redis::cmd("CLIENT").arg("UNPAUSE"));
        ui.say(format_args!(
            "writes on {} were paused for {} ms",
            primary.addr(),
            pause_began.elapsed().as_millis()
        ));
    }
    let version = pushed?;
    ui.say(format_args!(
        "[OK] {} ({}) is the primary of slots {}, topology version {version}; {} {}",
        replica.addr(),
        replica.id,
        ranges_text(&primary.slots),
        primary.addr(),
        if alive {
            "follows it"
        } else {
            "is down: run `kvik-cluster sync` when it is back, it then follows the new primary"
        }
    ));
    Ok(())
}

/// Waits until replica `r` applied everything primary `p` has, and `p`'s offset stood still
/// meanwhile (a write admitted before the pause may still commit).
fn catch_up(cluster: &mut Cluster, r: usize, p: usize, limit: Duration) -> Result<(), Fail> {
    let deadline = Instant::now() + limit;
    let offset_of = |role: Role| match role {
        Role::Primary { offset } => Ok(offset as i64),
        Role::Replica { .. } => Err("the primary is a replica (a failover raced this one)"),
    };
    let mut target = offset_of(cluster.node(p)?.role()?)?;
    loop {
        let applied = match cluster.node(r)?.role()? {
            Role::Replica {
                connected: true,
                offset,
                ..
            } => offset,
            _ => -1,
        };
        if applied >= target {
            std::thread::sleep(Duration::from_millis(100));
            let now = offset_of(cluster.node(p)?.role()?)?;
            if now == target {
                return Ok(());
            }
            target = now;
            continue;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the replica applied offset {applied}, the primary is at {target}: not caught \
                 up within {}ms (writes unpaused; nothing changed)",
                limit.as_millis()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn sync(opts: &Opts, ui: &mut Ui<'_>, seed: &str) -> Result<(), Fail> {
    if let Some(rec) = &opts.etcd {
        let (stored, _) = rec.read()?;
        let (_, seen) = seed_topology(opts, seed)?;
        if stored.version > seen.version {
            return push_record(opts, ui, &stored);
        }
    }
    let mut cluster = Cluster::load(opts, ui, seed)?;
    let behind = cluster
        .versions
        .iter()
        .filter(|v| **v != cluster.topology.version)
        .count();
    let next = cluster.topology.clone();
    let version = cluster.push(next, &[])?;
    ui.say(format_args!(
        "[OK] topology version {version} pushed to {} nodes ({behind} were behind)",
        cluster.nodes.len()
    ));
    Ok(())
}

/// `sync --etcd` when etcd is ahead of the nodes (a push was cut short): pushes the record as
/// it is to every node behind it.
fn push_record(opts: &Opts, ui: &mut Ui<'_>, stored: &Topology) -> Result<(), Fail> {
    let mut behind = 0;
    for n in &stored.nodes {
        let mut node = match Node::connect(opts, &n.addr()) {
            Ok(node) => node,
            Err(e) => {
                ui.warn(e);
                continue;
            }
        };
        if node.topology()?.version < stored.version {
            node.set_topology(stored)?;
            behind += 1;
        }
    }
    ui.say(format_args!(
        "[OK] topology version {} from etcd pushed to the {behind} nodes that were behind",
        stored.version
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_lists_parse_and_print() {
        assert_eq!(parse_slots("0-3,7, 5").unwrap(), vec![0, 1, 2, 3, 5, 7]);
        assert!(parse_slots("16384").is_err());
        assert!(parse_slots("5-1").is_err());
        assert!(parse_slots(",").is_err());
        assert_eq!(to_ranges(&[7, 0, 1, 2, 5]), vec![(0, 2), (5, 5), (7, 7)]);
        assert_eq!(ranges_text(&[(0, 2), (5, 5)]), "0-2,5");
    }

    #[test]
    fn a_failover_swaps_roles_in_the_topology() {
        let id = |c: char| std::iter::repeat_n(c, 40).collect::<String>();
        let t = Topology::from_lines(
            4,
            &[
                format!("{} h 1 0-100", id('a')),
                format!("{} h 2 101-16383", id('b')),
                format!("{} h 3 replica-of {}", id('c'), id('a')),
                format!("{} h 4 replica-of {}", id('d'), id('a')),
            ],
        )
        .unwrap();
        let mut next = swapped(&t, 2, 0);
        next.validate().unwrap();
        assert_eq!(next.nodes[2].slots, vec![(0, 100)]);
        assert!(!next.nodes[2].is_replica());
        assert_eq!(next.nodes[0].primary.as_deref(), Some(id('c').as_str()));
        assert_eq!(next.nodes[3].primary.as_deref(), Some(id('c').as_str()));
        assert_eq!(next.nodes[1], t.nodes[1]);
    }

    #[test]
    fn removing_a_slot_splits_its_range() {
        assert_eq!(remove_slot(&[(0, 10)], 0), vec![(1, 10)]);
        assert_eq!(remove_slot(&[(0, 10)], 10), vec![(0, 9)]);
        assert_eq!(remove_slot(&[(0, 10)], 4), vec![(0, 3), (5, 10)]);
        assert_eq!(remove_slot(&[(3, 3), (9, 12)], 3), vec![(9, 12)]);
        assert_eq!(remove_slot(&[(3, 3)], 4), vec![(3, 3)]);
    }

    #[test]
    fn addresses_split_at_the_last_colon() {
        assert_eq!(
            split_addr("127.0.0.1:7001").unwrap(),
            ("127.0.0.1".into(), 7001)
        );
        assert_eq!(split_addr("[::1]:7001").unwrap(), ("::1".into(), 7001));
        assert!(split_addr("localhost").is_err());
        assert!(split_addr("h:0").is_err());
        assert!(split_addr(":5").is_err());
    }

    #[test]
    fn usage_errors_exit_2_and_help_exits_0() {
        let run_args = |a: &[&str]| {
            let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let code = run(&args, &mut out, &mut err);
            (
                code,
                String::from_utf8(out).unwrap(),
                String::from_utf8(err).unwrap(),
            )
        };
        assert_eq!(run_args(&["kvik-cluster"]).0, 2);
        assert_eq!(run_args(&["kvik-cluster", "create"]).0, 2);
        let (code, _, err) = run_args(&[
            "kvik-cluster",
            "move-slots",
            "--from",
            "a",
            "--to",
            "b",
            "h:1",
        ]);
        assert_eq!(code, 2, "{err}");
        let (code, out, _) = run_args(&["kvik-cluster", "--help"]);
        assert_eq!(code, 0);
        assert!(out.contains("move-slots"), "{out}");
        // A node that cannot be reached is a clear failure, not a panic.
        let port = kvik_testkit::free_port().to_string();
        let (code, _, err) = run_args(&["kvik-cluster", "check", &format!("127.0.0.1:{port}")]);
        assert_eq!(code, 1);
        assert!(err.contains("unreachable"), "{err}");
    }
}
