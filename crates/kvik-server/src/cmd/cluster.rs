//! Cluster commands: the CLUSTER container (INFO MYID KEYSLOT COUNTKEYSINSLOT GETKEYSINSLOT SLOTS
//! SHARDS NODES REPLICAS SLAVES SETSLOT, and kvik's SETTOPOLOGY / TOPOLOGY), ASKING, READONLY, READWRITE. Each
//! answers "This instance has cluster support disabled" unless `cluster-enabled yes`. The
//! routing itself is in `crate::cluster::routing`.

use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{container, CommandSpec, Flags, KeySpec, Routing};
use crate::cluster::replies::{self, View, Which};
use crate::cluster::Node;
use crate::reply::Reply;
use crate::server::Server;
use kvik_resp::cluster::{key_slot, SLOTS};
use kvik_resp::topology::Topology;
use std::sync::atomic::Ordering::Relaxed;

const SLOW: &[&str] = &["slow"];

static SUBS: &[CommandSpec] = &[
    CommandSpec::new("info", 2, Flags::STALE, KeySpec::NONE, info)
        .acl(SLOW)
        .group("cluster")
        .doc(
            "Returns information about the state of a node.",
            "3.0.0",
            "O(1)",
        ),
    CommandSpec::new("myid", 2, Flags::STALE, KeySpec::NONE, myid)
        .acl(SLOW)
        .group("cluster")
        .doc("Returns the ID of a node.", "3.0.0", "O(1)"),
    CommandSpec::new("keyslot", 3, Flags::STALE, KeySpec::NONE, keyslot)
        .acl(SLOW)
        .group("cluster")
        .doc(
            "Returns the hash slot for a key.",
            "3.0.0",
            "O(N) where N is the number of bytes in the key",
        ),
    CommandSpec::new(
        "countkeysinslot",
        3,
        Flags::STALE,
        KeySpec::NONE,
        countkeysinslot,
    )
    .acl(SLOW)
    .group("cluster")
    .doc(
        "Returns the number of keys in a hash slot.",
        "3.0.0",
        "O(N) where N is the number of keys in the slot",
    ),
    CommandSpec::new(
        "getkeysinslot",
        4,
        Flags::STALE,
        KeySpec::NONE,
        getkeysinslot,
    )
    .acl(SLOW)
    .group("cluster")
    .doc(
        "Returns the key names in a hash slot.",
        "3.0.0",
        "O(N) where N is the number of requested keys",
    ),
    CommandSpec::new("slots", 2, Flags::STALE, KeySpec::NONE, slots)
        .rtc(|c, _| c.cluster_reply(Which::Slots))
        .acl(SLOW)
        .group("cluster")
        .doc(
            "Returns the mapping of cluster slots to nodes.",
            "3.0.0",
            "O(N) where N is the total number of Cluster nodes",
        ),
    CommandSpec::new("shards", 2, Flags::STALE, KeySpec::NONE, shards)
        .rtc(|c, _| c.cluster_reply(Which::Shards))
        .acl(SLOW)
        .group("cluster")
        .doc(
            "Returns the mapping of cluster slots to shards.",
            "7.0.0",
            "O(N) where N is the total number of cluster nodes",
        ),
    CommandSpec::new("nodes", 2, Flags::STALE, KeySpec::NONE, nodes)
        .rtc(|c, _| c.cluster_reply(Which::Nodes))
        .acl(SLOW)
        .group("cluster")
        .doc(
            "Returns the cluster configuration for a node.",
            "3.0.0",
            "O(N) where N is the total number of Cluster nodes",
        ),
    CommandSpec::new("replicas", 3, Flags::ADMIN.union(Flags::STALE), KeySpec::NONE, replicas)
        .acl(&["admin", "slow", "dangerous"])
        .group("cluster")
        .doc(
            "Lists the replica nodes of a master node.",
            "5.0.0",
            "O(N) where N is the number of replicas.",
        ),
    CommandSpec::new("slaves", 3, Flags::ADMIN.union(Flags::STALE), KeySpec::NONE, replicas)
        .acl(&["admin", "slow", "dangerous"])
        .group("cluster")
        .doc(
            "Lists the replica nodes of a master node.",
            "3.0.0",
            "O(N) where N is the number of replicas.",
        ),
    CommandSpec::new(
        "setslot",
        -4,
        Flags::ADMIN.union(Flags::STALE),
        KeySpec::NONE,
        setslot,
    )
    .acl(&["admin", "slow", "dangerous"])
    .group("cluster")
    .doc("Binds a hash slot to a node.", "3.0.0", "O(1)"),
    CommandSpec::new(
        "publish",
        4,
        Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE),
        KeySpec::NONE,
        super::pubsub::cluster_publish,
    )
    .acl(&["pubsub", "fast"])
    .group("cluster")
    .doc(
        "kvik: delivers a PUBLISH forwarded by another node of the cluster, on this node only.",
        "7.0.0",
        "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
    ),
    CommandSpec::new(
        "settopology",
        -3,
        Flags::ADMIN.union(Flags::STALE),
        KeySpec::NONE,
        settopology,
    )
    .acl(&["admin", "slow", "dangerous"])
    .group("cluster")
    .doc(
        "kvik: replaces the node's cluster topology with a newer version.",
        "7.0.0",
        "O(N) where N is the number of slots",
    ),
    CommandSpec::new("topology", 2, Flags::STALE, KeySpec::NONE, topology)
        .acl(SLOW)
        .group("cluster")
        .doc(
            "kvik: returns the topology version and node lines the node accepted.",
            "7.0.0",
            "O(N) where N is the number of nodes",
        ),
    CommandSpec::new(
        "renewlease",
        -2,
        Flags::ADMIN.union(Flags::STALE).union(Flags::LOADING),
        KeySpec::NONE,
        renewlease,
    )
    .acl(&["admin", "fast", "dangerous"])
    .group("cluster")
    .doc(
        "kvik: without an argument returns the node's lease clock; with one, renews the write lease from that earlier reading (the leader kvik-controller's probe).",
        "7.0.0",
        "O(1)",
    ),
    CommandSpec::new(
        "help",
        2,
        Flags::LOADING.union(Flags::STALE),
        KeySpec::NONE,
        help,
    )
    .acl(SLOW)
    .group("cluster")
    .doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
        "O(1)",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("cluster", -2, Flags::empty(), KeySpec::NONE, container)
        .acl(SLOW)
        .group("cluster")
        .doc(
            "A container for Redis Cluster commands.",
            "3.0.0",
            "Depends on subcommand.",
        )
        .subs(SUBS),
    CommandSpec::new("asking", 1, Flags::FAST, KeySpec::NONE, asking)
        .routing(Routing::Asking)
        .acl(&["fast", "connection"])
        .group("cluster")
        .doc(
            "Signals that a cluster client is following an -ASK redirect.",
            "3.0.0",
            "O(1)",
        ),
    CommandSpec::new(
        "readonly",
        1,
        Flags::FAST.union(Flags::LOADING).union(Flags::STALE),
        KeySpec::NONE,
        readonly,
    )
    .acl(&["fast", "connection"])
    .group("cluster")
    .doc(
        "Enables read-only queries for a connection to a Redis Cluster replica node.",
        "3.0.0",
        "O(1)",
    ),
    CommandSpec::new(
        "readwrite",
        1,
        Flags::FAST.union(Flags::LOADING).union(Flags::STALE),
        KeySpec::NONE,
        readwrite,
    )
    .acl(&["fast", "connection"])
    .group("cluster")
    .doc(
        "Enables read-write queries for a connection to a Redis Cluster replica node.",
        "3.0.0",
        "O(1)",
    ),
];

fn node<'a>(ctx: &Ctx<'a>) -> Result<&'a Node, CmdError> {
    ctx.server
        .cluster
        .node()
        .ok_or_else(|| CmdError::err(CLUSTER_DISABLED))
}

const CLUSTER_DISABLED: &str = "This instance has cluster support disabled";

fn asking(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    node(ctx)?;
    ctx.session.asking = true;
    ctx.out.ok();
    Ok(())
}

fn readonly(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    node(ctx)?;
    ctx.session.readonly = true;
    ctx.out.ok();
    Ok(())
}

fn readwrite(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    node(ctx)?;
    ctx.session.readonly = false;
    ctx.out.ok();
    Ok(())
}

fn info(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    let n = node(ctx)?;
    let full = ctx
        .server
        .config
        .cluster
        .require_full_coverage
        .load(Relaxed);
    let text = replies::info_text(&n.state.read(), full);
    ctx.out.verbatim(text.as_bytes());
    Ok(())
}

fn myid(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    let n = node(ctx)?;
    ctx.out.bulk(n.myid.as_bytes());
    Ok(())
}

fn keyslot(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    node(ctx)?;
    ctx.out.int(key_slot(&args[2]) as i64);
    Ok(())
}

/// Calls `f` for every live key of `slot` (db 0) until it returns false.
fn for_each_key_in_slot(ctx: &Ctx<'_>, slot: u16, mut f: impl FnMut(&[u8]) -> bool) -> CmdResult {
    let storage = ctx.storage();
    let now = ctx.now_ms;
    let mut after: Option<Vec<u8>> = None;
    let mut go = true;
    loop {
        after = storage.scan_slot(0, slot, after.as_deref(), 1024, |k, m| {
            if m.expire_at_ms == 0 || m.expire_at_ms > now {
                go = f(k);
            }
            go
        })?;
        if after.is_none() || !go {
            return Ok(());
        }
    }
}

fn countkeysinslot(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    node(ctx)?;
    let slot = kvik_resp::parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    if !(0..SLOTS as i64).contains(&slot) {
        return Err(CmdError::err("Invalid slot"));
    }
    let mut n = 0i64;
    for_each_key_in_slot(ctx, slot as u16, |_| {
        n += 1;
        true
    })?;
    ctx.out.int(n);
    Ok(())
}

fn getkeysinslot(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    node(ctx)?;
    let slot = kvik_resp::parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    let max = kvik_resp::parse_i64(&args[3]).ok_or(CmdError::not_integer())?;
    if !(0..SLOTS as i64).contains(&slot) || max < 0 {
        return Err(CmdError::err("Invalid slot or number of keys"));
    }
    let mut keys: Vec<Vec<u8>> = Vec::new();
    if max > 0 {
        for_each_key_in_slot(ctx, slot as u16, |k| {
            keys.push(k.to_vec());
            (keys.len() as i64) < max
        })?;
    }
    ctx.out.array(keys.len());
    for k in &keys {
        ctx.out.bulk(k);
    }
    Ok(())
}

fn cached(ctx: &mut Ctx<'_>, which: Which) -> CmdResult {
    write_topology_reply(ctx.server, ctx.out, which)
}

/// Writes CLUSTER SLOTS / SHARDS / NODES from the reply rendered once per topology change. A
/// read of shared state only, so the I/O thread answers it too (`CacheCtx::cluster_reply`).
pub(super) fn write_topology_reply(server: &Server, out: &mut Reply, which: Which) -> CmdResult {
    let n = server
        .cluster
        .node()
        .ok_or_else(|| CmdError::err(CLUSTER_DISABLED))?;
    let settings = &server.config.cluster;
    let st = n.state.read();
    let view = View {
        state: &st,
        myid: &n.myid,
        my_port: server.port.load(Relaxed),
        proto: out.proto,
        kind: settings.endpoint(),
    };
    n.replies.write(
        which,
        view,
        settings.reply_cache.load(Relaxed),
        settings.reply_cache_verify.load(Relaxed),
        &mut out.buf,
    );
    Ok(())
}

fn slots(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    cached(ctx, Which::Slots)
}

fn shards(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    cached(ctx, Which::Shards)
}

fn nodes(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    cached(ctx, Which::Nodes)
}

/// CLUSTER REPLICAS / SLAVES <node-id>: the replicas' CLUSTER NODES lines, one bulk string each.
fn replicas(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let n = node(ctx)?;
    let id = String::from_utf8_lossy(&args[2]).into_owned();
    let st = n.state.read();
    let Some(primary) = st.topology.node(&id) else {
        return Err(CmdError::err(format_args!("Unknown node {id}")));
    };
    if primary.is_replica() {
        return Err(CmdError::err("The specified node is not a master"));
    }
    let view = View {
        state: &st,
        myid: &n.myid,
        my_port: ctx.server.port.load(Relaxed),
        proto: ctx.out.proto,
        kind: ctx.server.config.cluster.endpoint(),
    };
    let text = replies::nodes_text(view);
    let ids: Vec<&str> = st
        .topology
        .replicas_of(&id)
        .map(|r| r.id.as_str())
        .collect();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| ids.iter().any(|r| l.split(' ').next() == Some(*r)))
        .collect();
    ctx.out.array(lines.len());
    for l in lines {
        ctx.out.bulk(l.as_bytes());
    }
    Ok(())
}

fn setslot(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let n = node(ctx)?;
    let slot = kvik_resp::parse_i64(&args[2])
        .filter(|s| (0..SLOTS as i64).contains(s))
        .ok_or_else(|| CmdError::err("Invalid or out of range slot"))? as u16;
    let action = args[3].to_ascii_lowercase();
    let target = args.get(4).map(|a| String::from_utf8_lossy(a).into_owned());
    let bad_action =
        || CmdError::err("Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP");
    match (action.as_slice(), args.len(), target) {
        (b"migrating", 5, Some(id)) => n.update(|st, _| {
            if !st.mine(slot) {
                return Err(CmdError::err(format_args!(
                    "I'm not the owner of hash slot {slot}"
                )));
            }
            if st.index_of(&id).is_none() {
                return Err(CmdError::err(format_args!("I don't know about node {id}")));
            }
            st.migrating.insert(slot, id);
            Ok(())
        })?,
        (b"importing", 5, Some(id)) => n.update(|st, _| {
            if st.mine(slot) {
                return Err(CmdError::err(format_args!(
                    "I'm already the owner of hash slot {slot}"
                )));
            }
            if st.index_of(&id).is_none() {
                return Err(CmdError::err(format_args!("I don't know about node {id}")));
            }
            st.importing.insert(slot, id);
            Ok(())
        })?,
        (b"stable", 4, None) => n.update(|st, _| {
            st.migrating.remove(&slot);
            st.importing.remove(&slot);
        }),
        (b"node", 5, Some(id)) => {
            // Keys are counted before the state lock is taken (a storage scan); the admin tool
            // runs SETSLOT NODE only after MIGRATE emptied the slot.
            let mut has_keys = false;
            for_each_key_in_slot(ctx, slot, |_| {
                has_keys = true;
                false
            })?;
            n.update(|st, myid| {
                let Some(i) = st.index_of(&id) else {
                    return Err(CmdError::err(format_args!("Unknown node {id}")));
                };
                if st.mine(slot) && id != myid && has_keys {
                    return Err(CmdError::err(format_args!(
                        "Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                    )));
                }
                if !has_keys {
                    st.migrating.remove(&slot);
                }
                if id == myid {
                    st.importing.remove(&slot);
                }
                st.overrides.insert(slot, st.topology.nodes[i].id.clone());
                Ok(())
            })?
        }
        _ => return Err(bad_action()),
    }
    ctx.out.ok();
    Ok(())
}

fn settopology(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let n = node(ctx)?;
    let version = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| {
            CmdError::err("invalid topology: the version must be a non-negative integer")
        })?;
    let lines: Vec<String> = args[3..]
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    let topology = Topology::from_lines(version, &lines)
        .map_err(|e| CmdError::err(format_args!("invalid topology: {e}")))?;
    n.set_topology(topology).map_err(CmdError::err)?;
    if let Some(server) = ctx.server.arc() {
        crate::cluster::replicas::reconcile(&server).map_err(CmdError::err)?;
    }
    ctx.out.ok();
    Ok(())
}

fn topology(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    let n = node(ctx)?;
    let st = n.state.read();
    let lines = st.topology.lines();
    ctx.out.array(2);
    ctx.out.int(st.topology.version as i64);
    ctx.out.array(lines.len());
    for l in &lines {
        ctx.out.bulk(l.as_bytes());
    }
    Ok(())
}

/// The leader controller's renewal of this node's write lease, in two steps: without an
/// argument, the node's lease clock now; with that reading, the leader vouches that the node
/// was a primary of the record at that instant, and the lease runs from it
/// (`replication::lease`). A renewal delayed in a socket while the node was frozen so renews
/// nothing past the lease of its reading.
fn renewlease(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    node(ctx)?;
    let lease = &ctx.server.repl.lease;
    match args.get(2) {
        None => ctx.out.int(crate::replication::lease::own_ms() as i64),
        Some(stamp) => {
            let stamp = std::str::from_utf8(stamp)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(CmdError::not_integer)?;
            lease.renew_by_controller(stamp).map_err(CmdError::err)?;
            ctx.out.ok();
        }
    }
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _: &Args) -> CmdResult {
    node(ctx)?;
    const LINES: &[&str] = &[
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MYID",
        "    Return the node id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "REPLICAS <node-id>",
        "    Return <node-id> replicas.",
        "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
        "    Set slot state.",
        "RENEWLEASE [<clock>]",
        "    kvik: return the node's lease clock; with a reading of it, renew the write",
        "    lease (cluster-write-lease-ms) from then (the leader kvik-controller's probe).",
        "SETTOPOLOGY <version> <node-line> [<node-line> ...]",
        "    kvik: replace the topology (newer versions only). A node line is",
        "    '<node-id> <host> <port> [<slot>|<first>-<last> ...]' or",
        "    '<node-id> <host> <port> replica-of <primary-id>'.",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "SLAVES <node-id>",
        "    Return <node-id> replicas (same as REPLICAS).",
        "TOPOLOGY",
        "    kvik: return the topology version and its node lines.",
    ];
    super::admin::help_reply(ctx.out, "CLUSTER", LINES);
    Ok(())
}
