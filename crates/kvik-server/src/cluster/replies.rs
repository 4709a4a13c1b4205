//! CLUSTER SLOTS, SHARDS and NODES: rendered from the [`State`] into RESP bytes, and cached.
//!
//! A reply depends only on the state (whose `generation` changes with every topology push and
//! SETSLOT), the RESP version and the endpoint kind, so each (reply, RESP version, endpoint kind)
//! has one cached copy tagged with the generation it was rendered at. A reader holds the state's
//! read lock while it compares generations and copies the bytes, and a renderer holds it while it
//! renders and stores, so a cached copy is never older than the state it is served with: a
//! change shows in the very next reply. With `cluster-reply-cache-verify yes` (and always in
//! debug builds) every cached reply is compared with a fresh rendering; a mismatch panics (the
//! command fails with an internal error and the log names the reply).

use super::{EndpointKind, State};
use kvik_resp::topology::TopologyNode;
use kvik_resp::{encode, Proto};
use parking_lot::RwLock;
use std::sync::Arc;

/// The cacheable replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Slots = 0,
    Shards = 1,
    Nodes = 2,
}

const VARIANTS: usize = 3 * 2 * 3;

/// A cached reply: the state generation it was rendered at, and its bytes.
type Cached = Option<(u64, Arc<[u8]>)>;

/// One cached copy per (reply, RESP version, endpoint kind).
#[derive(Default)]
pub struct ReplyCache {
    slots: [RwLock<Cached>; VARIANTS],
}

/// What the renderer needs besides the state.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub state: &'a State,
    pub myid: &'a str,
    /// This node's own port (shown when the topology does not list it).
    pub my_port: u16,
    pub proto: Proto,
    pub kind: EndpointKind,
}

impl ReplyCache {
    /// Appends reply `which` to `out`: the cached copy when `use_cache` and it is current,
    /// otherwise a fresh rendering (stored when `use_cache`).
    pub fn write(
        &self,
        which: Which,
        v: View<'_>,
        use_cache: bool,
        verify: bool,
        out: &mut Vec<u8>,
    ) {
        if !use_cache {
            render(which, v, out);
            return;
        }
        let idx = which as usize * 6 + (v.proto == Proto::Resp3) as usize * 3 + v.kind as usize;
        let cached = self.slots[idx]
            .read()
            .as_ref()
            .filter(|(g, _)| *g == v.state.generation)
            .map(|(_, b)| b.clone());
        if let Some(bytes) = cached {
            if verify || cfg!(debug_assertions) {
                let mut fresh = Vec::with_capacity(bytes.len());
                render(which, v, &mut fresh);
                assert!(
                    fresh[..] == bytes[..],
                    "cached CLUSTER {which:?} reply ({:?}, {}) differs from a fresh rendering",
                    v.proto,
                    v.kind.name()
                );
            }
            out.extend_from_slice(&bytes);
            return;
        }
        let start = out.len();
        render(which, v, out);
        let bytes: Arc<[u8]> = Arc::from(&out[start..]);
        *self.slots[idx].write() = Some((v.state.generation, bytes));
    }
}

/// Renders reply `which` into `out`.
pub fn render(which: Which, v: View<'_>, out: &mut Vec<u8>) {
    match which {
        Which::Slots => slots(v, out),
        Which::Shards => shards(v, out),
        Which::Nodes => {
            let text = nodes_text(v);
            encode::verbatim(out, b"txt", text.as_bytes(), v.proto);
        }
    }
}

/// The endpoint clients are sent to (CLUSTER SLOTS, MOVED/ASK): the topology's host, or "" for
/// `unknown-endpoint` in redirects.
pub fn redirect_host(host: &str, kind: EndpointKind) -> &str {
    match kind {
        EndpointKind::Unknown => "",
        _ => host,
    }
}

/// The replicas of the node at index `primary`, in topology order.
fn replicas_of<'a>(st: &'a State, primary: usize) -> impl Iterator<Item = &'a TopologyNode> + 'a {
    st.topology.replicas_of(&st.topology.nodes[primary].id)
}

fn slots(v: View<'_>, out: &mut Vec<u8>) {
    let ranges = v.state.ranges();
    encode::array_header(out, ranges.len());
    for (a, b, o) in ranges {
        // The primary, then its replicas (Redis 7.0's shape).
        let replicas: Vec<&TopologyNode> = replicas_of(v.state, o).collect();
        encode::array_header(out, 3 + replicas.len());
        encode::integer(out, a as i64);
        encode::integer(out, b as i64);
        slot_node(v, &v.state.topology.nodes[o], out);
        for r in replicas {
            slot_node(v, r, out);
        }
    }
}

/// One node of a CLUSTER SLOTS range: endpoint, port, id, metadata.
fn slot_node(v: View<'_>, n: &TopologyNode, out: &mut Vec<u8>) {
    encode::array_header(out, 4);
    match v.kind {
        EndpointKind::Unknown => encode::null(out, v.proto),
        _ => encode::bulk(out, n.host.as_bytes()),
    }
    encode::integer(out, n.port as i64);
    encode::bulk(out, n.id.as_bytes());
    // The networking metadata that is not the preferred endpoint (Redis 7): kvik knows one
    // name per node, the topology's host.
    match v.kind {
        EndpointKind::Ip => encode::map_header(out, 0, v.proto),
        _ => {
            encode::map_header(out, 1, v.proto);
            encode::bulk(out, b"ip");
            encode::bulk(out, n.host.as_bytes());
        }
    }
}

/// CLUSTER SHARDS: one shard per primary, its nodes the primary then its replicas.
fn shards(v: View<'_>, out: &mut Vec<u8>) {
    let st = v.state;
    let ranges = st.ranges();
    let primaries: Vec<usize> = (0..st.topology.nodes.len())
        .filter(|&i| !st.topology.nodes[i].is_replica())
        .collect();
    encode::array_header(out, primaries.len());
    for i in primaries {
        encode::map_header(out, 2, v.proto);
        encode::bulk(out, b"slots");
        let mine: Vec<_> = ranges.iter().filter(|r| r.2 == i).collect();
        encode::array_header(out, mine.len() * 2);
        for r in mine {
            encode::integer(out, r.0 as i64);
            encode::integer(out, r.1 as i64);
        }
        encode::bulk(out, b"nodes");
        let replicas: Vec<&TopologyNode> = replicas_of(st, i).collect();
        encode::array_header(out, 1 + replicas.len());
        shard_node(v, &st.topology.nodes[i], out);
        for r in replicas {
            shard_node(v, r, out);
        }
    }
}

/// One node of a CLUSTER SHARDS shard. kvik nodes do not exchange offsets (no gossip), so
/// `replication-offset` is 0 and `health` is what the topology says: online.
fn shard_node(v: View<'_>, n: &TopologyNode, out: &mut Vec<u8>) {
    let hostname = v.kind == EndpointKind::Hostname;
    encode::map_header(out, if hostname { 8 } else { 7 }, v.proto);
    encode::bulk(out, b"id");
    encode::bulk(out, n.id.as_bytes());
    encode::bulk(out, b"port");
    encode::integer(out, n.port as i64);
    encode::bulk(out, b"ip");
    encode::bulk(out, n.host.as_bytes());
    encode::bulk(out, b"endpoint");
    match v.kind {
        EndpointKind::Unknown => encode::bulk(out, b"?"),
        _ => encode::bulk(out, n.host.as_bytes()),
    }
    if hostname {
        encode::bulk(out, b"hostname");
        encode::bulk(out, n.host.as_bytes());
    }
    encode::bulk(out, b"role");
    encode::bulk(
        out,
        if n.is_replica() {
            &b"replica"[..]
        } else {
            b"master"
        },
    );
    encode::bulk(out, b"replication-offset");
    encode::integer(out, 0);
    encode::bulk(out, b"health");
    encode::bulk(out, b"online");
}

/// The bus port Redis would show: its default, client port + 10000 (kvik has no bus).
fn bus_port(port: u16) -> u32 {
    let p = port as u32 + 10000;
    if p > 65535 {
        0
    } else {
        p
    }
}

/// CLUSTER NODES: one line per node, '\n' after each, as Redis 7.0.
pub fn nodes_text(v: View<'_>) -> String {
    let st = v.state;
    let epoch = st.topology.version;
    let ranges = st.ranges();
    let mut text = String::new();
    if st.me.is_none() {
        text.push_str(&format!(
            "{} :{}@{} myself,master - 0 0 0 connected\n",
            v.myid,
            v.my_port,
            bus_port(v.my_port)
        ));
    }
    for (i, n) in st.topology.nodes.iter().enumerate() {
        let me = st.me == Some(i);
        let role = match (me, n.is_replica()) {
            (true, false) => "myself,master",
            (true, true) => "myself,slave",
            (false, false) => "master",
            (false, true) => "slave",
        };
        text.push_str(&format!(
            "{} {}:{}@{} {role} {} 0 0 {epoch} connected",
            n.id,
            n.host,
            n.port,
            bus_port(n.port),
            n.primary.as_deref().unwrap_or("-"),
        ));
        for r in ranges.iter().filter(|r| r.2 == i) {
            if r.0 == r.1 {
                text.push_str(&format!(" {}", r.0));
            } else {
                text.push_str(&format!(" {}-{}", r.0, r.1));
            }
        }
        if me {
            for (s, id) in &st.migrating {
                text.push_str(&format!(" [{s}->-{id}]"));
            }
            for (s, id) in &st.importing {
                text.push_str(&format!(" [{s}-<-{id}]"));
            }
        }
        text.push('\n');
    }
    text
}

/// CLUSTER INFO's text (not cached: it is short and cheap).
pub fn info_text(st: &State, full_coverage: bool) -> String {
    let assigned = st.owner.iter().filter(|o| **o != super::NO_OWNER).count();
    let size = st
        .ranges()
        .iter()
        .map(|r| r.2)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let known = st.topology.nodes.len() + st.me.is_none() as usize;
    let my_epoch = if st.me.is_some() {
        st.topology.version
    } else {
        0
    };
    format!(
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\n\
         cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{known}\r\n\
         cluster_size:{size}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n\
         cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n",
        if st.ok(full_coverage) { "ok" } else { "fail" },
        st.topology.version,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvik_resp::topology::Topology;

    fn state() -> (State, String) {
        let id = "a".repeat(40);
        let t = Topology::from_lines(1, &[format!("{id} h 7000 0-100 102-16383")]).unwrap();
        (State::new(&id, t), id)
    }

    #[test]
    fn cached_reply_is_reused_and_equals_a_fresh_one() {
        let (st, id) = state();
        let cache = ReplyCache::default();
        for proto in [Proto::Resp2, Proto::Resp3] {
            let v = View {
                state: &st,
                myid: &id,
                my_port: 7000,
                proto,
                kind: EndpointKind::Ip,
            };
            let (mut a, mut b, mut fresh) = (Vec::new(), Vec::new(), Vec::new());
            cache.write(Which::Slots, v, true, true, &mut a);
            cache.write(Which::Slots, v, true, true, &mut b);
            render(Which::Slots, v, &mut fresh);
            assert_eq!(a, fresh);
            assert_eq!(b, fresh);
        }
        assert_eq!(st.ranges(), vec![(0, 100, 0), (102, 16383, 0)]);
    }

    #[test]
    #[should_panic(expected = "differs from a fresh rendering")]
    fn verify_catches_a_stale_cached_reply() {
        let (st, id) = state();
        let cache = ReplyCache::default();
        let v = View {
            state: &st,
            myid: &id,
            my_port: 7000,
            proto: Proto::Resp2,
            kind: EndpointKind::Ip,
        };
        let mut out = Vec::new();
        cache.write(Which::Slots, v, true, true, &mut out);
        *cache.slots[0].write() = Some((st.generation, Arc::from(&b"*0\r\n"[..])));
        cache.write(Which::Slots, v, true, true, &mut out);
    }
}
