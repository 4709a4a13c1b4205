//! [`ClusterClient`]: Redis Cluster routing over per-node auto-batch connections.
//!
//! DESIGN
//!
//! - Slot map from `CLUSTER SLOTS` (masters only): a 16,384-entry table of node indexes.
//! - A command is routed by the slot of its first key (CRC16/XMODEM of the key or of its
//!   `{hash tag}`); keyless commands go to any node.
//! - `MOVED slot addr`: the slot is pointed at `addr` at once (so the retry goes there) and a
//!   topology refresh is requested. `ASK slot addr`: `ASKING` + the command are sent to `addr`
//!   as one pipeline (contiguous on the shared connection), without changing the map. At most
//!   `MAX_REDIRECTS` hops.
//! - Refresh is single-flight (an atomic flag: callers that find a refresh running do not
//!   start another, they retry with the map they have) and rate-limited: at most one per
//!   `cooldown`, plus a random jitter of up to half the cooldown so many clients that saw the
//!   same MOVED do not all ask at once. The node asked is chosen at random among known nodes,
//!   falling back to the seeds.
//! - Multi-key commands are split by slot: MGET (results re-assembled in key order), DEL,
//!   UNLINK, EXISTS, TOUCH (counts summed), MSET (pairs grouped). Each part is routed (and
//!   redirected) on its own.
//! - [`ClusterClient::get_multi`] groups keys by node and, inside a node, one MGET per slot, and
//!   runs the same concurrent readiness loop as the sharded client; MGETs answered with a
//!   redirect are retried once through the routed path after a refresh.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvik_resp::Frame;
use parking_lot::{Mutex, RwLock};

use crate::cmd::{cmd, Cmd, Pipeline};
use crate::commands::Commands;
use crate::error::{Error, Result};
use crate::multiget::{self, Job, KeyOutcome, MultiGet, ServerHandle, ServerStatus};
use crate::sharded::ShardOptions;

/// Most redirects followed for one command.
pub const MAX_REDIRECTS: usize = 5;

pub use kvik_resp::cluster::{crc16, key_slot, parse_redirect, Redirect, SLOTS};

/// Slot ranges and the master serving each, as `CLUSTER SLOTS` reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotMap {
    /// (first slot, last slot, master "host:port").
    pub ranges: Vec<(u16, u16, String)>,
}

impl SlotMap {
    /// Parses a `CLUSTER SLOTS` reply. An empty host means "the node you asked": `asked_host`
    /// stands in for it.
    pub fn from_cluster_slots(reply: &Frame, asked_host: &str) -> Result<SlotMap> {
        let ranges =
            kvik_resp::cluster::parse_cluster_slots(reply, asked_host).map_err(Error::Cluster)?;
        Ok(SlotMap { ranges })
    }
}

struct Topology {
    /// Node index per slot (`u16::MAX`: unassigned).
    table: Vec<u16>,
    nodes: Vec<Arc<ServerHandle>>,
    by_addr: HashMap<String, usize>,
}

impl Topology {
    fn node_index(&mut self, addr: &str, opts: &ShardOptions) -> usize {
        if let Some(&i) = self.by_addr.get(addr) {
            return i;
        }
        self.nodes.push(Arc::new(ServerHandle::new(
            addr,
            &opts.conn,
            opts.down_backoff,
            opts.max_down_backoff,
        )));
        self.by_addr.insert(addr.to_string(), self.nodes.len() - 1);
        self.nodes.len() - 1
    }
}

/// A Redis Cluster client: routes by slot, follows MOVED/ASK, splits multi-key commands,
/// refreshes its topology one refresh at a time with a cooldown and jitter.
pub struct ClusterClient {
    seeds: Vec<String>,
    opts: ShardOptions,
    topo: RwLock<Topology>,
    refreshing: AtomicBool,
    last_refresh: Mutex<Option<(Instant, Duration)>>,
    cooldown: Duration,
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterClient")
            .field("seeds", &self.seeds)
            .field("nodes", &self.topo.read().nodes.len())
            .finish()
    }
}

/// A cheap random number (jitter, node choice); no cryptographic use.
fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish()
}

impl ClusterClient {
    /// Connects to the cluster through any of `seeds` and loads the slot map. `cooldown` is the
    /// least time between two topology refreshes (1 s is reasonable).
    pub fn connect(
        seeds: &[&str],
        opts: ShardOptions,
        cooldown: Duration,
    ) -> Result<ClusterClient> {
        if seeds.is_empty() {
            return Err(Error::NoServers);
        }
        let c = ClusterClient {
            seeds: seeds.iter().map(|s| s.to_string()).collect(),
            opts,
            topo: RwLock::new(Topology {
                table: vec![u16::MAX; SLOTS],
                nodes: Vec::new(),
                by_addr: HashMap::new(),
            }),
            refreshing: AtomicBool::new(false),
            last_refresh: Mutex::new(None),
            cooldown,
        };
        c.refresh(true)?;
        Ok(c)
    }

    /// The slot map as last loaded (ranges merged from the table).
    pub fn slot_map(&self) -> SlotMap {
        let t = self.topo.read();
        let mut ranges: Vec<(u16, u16, String)> = Vec::new();
        for (slot, &n) in t.table.iter().enumerate() {
            if n == u16::MAX {
                continue;
            }
            let addr = &t.nodes[n as usize].addr;
            match ranges.last_mut() {
                Some((_, end, a)) if a == addr && *end as usize + 1 == slot => *end = slot as u16,
                _ => ranges.push((slot as u16, slot as u16, addr.clone())),
            }
        }
        SlotMap { ranges }
    }

    /// Reloads the slot map unless a refresh is running or the cooldown (plus jitter) has not
    /// passed; `force` skips the cooldown (not the single-flight). Returns whether it ran.
    pub fn refresh(&self, force: bool) -> Result<bool> {
        if self.refreshing.swap(true, Ordering::SeqCst) {
            return Ok(false);
        }
        let r = self.refresh_inner(force);
        self.refreshing.store(false, Ordering::SeqCst);
        r
    }

    fn refresh_inner(&self, force: bool) -> Result<bool> {
        let now = Instant::now();
        if !force {
            if let Some((last, wait)) = *self.last_refresh.lock() {
                if now < last + wait {
                    return Ok(false);
                }
            }
        }
        let mut candidates: Vec<String> = self
            .topo
            .read()
            .nodes
            .iter()
            .map(|n| n.addr.clone())
            .collect();
        if !candidates.is_empty() {
            let start = (random_u64() % candidates.len() as u64) as usize;
            candidates.rotate_left(start);
        }
        candidates.extend(self.seeds.iter().cloned());
        let mut last_err = None;
        for addr in candidates {
            let conn = match crate::Client::connect(&addr, self.opts.conn.clone()) {
                Ok(c) => c,
                Err(e) => {
                    last_err = Some(e);
                    continue;
                }
            };
            let reply = match conn.query(&cmd("CLUSTER").arg("SLOTS")) {
                Ok(r) => r,
                Err(e) => {
                    last_err = Some(e);
                    continue;
                }
            };
            let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or("127.0.0.1");
            let map = SlotMap::from_cluster_slots(&reply, host)?;
            if map.ranges.is_empty() {
                last_err = Some(Error::Cluster(format!("{addr} reports no slots")));
                continue;
            }
            let mut t = self.topo.write();
            let mut table = vec![u16::MAX; SLOTS];
            for (a, b, node) in &map.ranges {
                let i = t.node_index(node, &self.opts) as u16;
                table[*a as usize..=*b as usize].fill(i);
            }
            t.table = table;
            drop(t);
            let jitter_ms = self.cooldown.as_millis() as u64 / 2;
            let jitter = Duration::from_millis(if jitter_ms == 0 {
                0
            } else {
                random_u64() % jitter_ms
            });
            *self.last_refresh.lock() = Some((Instant::now(), self.cooldown + jitter));
            return Ok(true);
        }
        Err(last_err.unwrap_or_else(|| Error::Cluster("no node answered CLUSTER SLOTS".into())))
    }

    fn node_for_slot(&self, slot: u16) -> Result<Arc<ServerHandle>> {
        let t = self.topo.read();
        match t.table[slot as usize] {
            u16::MAX => Err(Error::Cluster(format!(
                "slot {slot} is not served by any node"
            ))),
            i => Ok(t.nodes[i as usize].clone()),
        }
    }

    fn node_by_addr(&self, addr: &str) -> Arc<ServerHandle> {
        let mut t = self.topo.write();
        let i = t.node_index(addr, &self.opts);
        t.nodes[i].clone()
    }

    /// Runs `c` on the node serving `slot` (or any node when `None`), following redirects.
    pub fn query_slot(&self, slot: Option<u16>, c: &Cmd) -> Result<Frame> {
        let mut ask_to: Option<String> = None;
        for _ in 0..=MAX_REDIRECTS {
            let r = if let Some(addr) = ask_to.take() {
                let node = self.node_by_addr(&addr);
                let p = Pipeline::new().with(cmd("ASKING")).with(c.clone());
                let mut rs = node.client.pipeline(&p)?;
                rs.pop()
                    .unwrap_or_else(|| Err(Error::Cluster("empty ASK reply".into())))
            } else {
                let node = match slot {
                    Some(s) => self.node_for_slot(s)?,
                    None => {
                        let t = self.topo.read();
                        t.nodes
                            .first()
                            .cloned()
                            .ok_or_else(|| Error::Cluster("no known node".into()))?
                    }
                };
                let r = node.client.query(c);
                if matches!(&r, Err(e) if e.is_connection_error()) {
                    let _ = self.refresh(false);
                }
                r
            };
            match r {
                Err(Error::Server(msg)) => {
                    if let Some(rd) = parse_redirect(&msg) {
                        if rd.ask {
                            ask_to = Some(rd.addr);
                        } else {
                            {
                                let mut t = self.topo.write();
                                let i = t.node_index(&rd.addr, &self.opts) as u16;
                                t.table[rd.slot as usize] = i;
                            }
                            let _ = self.refresh(false);
                        }
                        continue;
                    }
                    if msg.starts_with("TRYAGAIN") {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    if msg.starts_with("CLUSTERDOWN") {
                        let _ = self.refresh(false);
                    }
                    return Err(Error::Server(msg));
                }
                r => return r,
            }
        }
        Err(Error::Cluster(format!(
            "more than {MAX_REDIRECTS} redirects for {}",
            c.name_upper()
        )))
    }

    /// Reads many keys from all their nodes at once (see the module docs); same result shape
    /// as [`ShardedClient::get_multi`](crate::ShardedClient::get_multi).
    pub fn get_multi<K: AsRef<[u8]>>(&self, keys: &[K]) -> MultiGet {
        let deadline = Instant::now() + self.opts.multiget_timeout;
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        // node index -> slot -> key indexes
        let (nodes, groups) = {
            let t = self.topo.read();
            let mut groups: HashMap<usize, HashMap<u16, Vec<usize>>> = HashMap::new();
            for (i, k) in keys.iter().enumerate() {
                let slot = key_slot(k);
                let n = t.table[slot as usize];
                let n = if n == u16::MAX { 0 } else { n as usize };
                groups
                    .entry(n)
                    .or_default()
                    .entry(slot)
                    .or_default()
                    .push(i);
            }
            (t.nodes.clone(), groups)
        };
        let mut values = vec![KeyOutcome::Unknown; keys.len()];
        if nodes.is_empty() {
            return MultiGet {
                values,
                servers: Vec::new(),
            };
        }
        let chunk = self.opts.multiget_chunk.max(1);
        let jobs: Vec<Job<'_>> = groups
            .into_iter()
            .map(|(n, slots)| Job {
                server: &nodes[n],
                mgets: slots
                    .into_values()
                    .flat_map(|ks| ks.chunks(chunk).map(<[usize]>::to_vec).collect::<Vec<_>>())
                    .collect(),
            })
            .collect();
        let (mut servers, errors) = multiget::run(&keys, &jobs, deadline, &mut values);
        if !errors.is_empty() {
            let _ = self.refresh(false);
        }
        for (job, mi, e) in errors {
            let idxs = &jobs[job].mgets[mi];
            let mut c = cmd("MGET");
            idxs.iter().for_each(|&k| c.push_arg(keys[k]));
            match self.query_slot(Some(key_slot(keys[idxs[0]])), &c) {
                Ok(Frame::Array(items)) if items.len() == idxs.len() => {
                    for (item, &k) in items.into_iter().zip(idxs) {
                        values[k] = match item {
                            Frame::Bulk(b) => KeyOutcome::Hit(b),
                            _ => KeyOutcome::Miss,
                        };
                    }
                }
                _ => servers[job].status = ServerStatus::Failed(e),
            }
        }
        MultiGet { values, servers }
    }

    fn split_by_slot(keys: &[Vec<u8>]) -> Vec<(u16, Vec<usize>)> {
        let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
        let mut index: HashMap<u16, usize> = HashMap::new();
        for (i, k) in keys.iter().enumerate() {
            let s = key_slot(k);
            let g = *index.entry(s).or_insert_with(|| {
                groups.push((s, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(i);
        }
        groups
    }

    fn multi_key(&self, c: &Cmd) -> Option<Result<Frame>> {
        let name = c.name_upper();
        let args = c.args();
        match name.as_str() {
            "MGET" | "DEL" | "UNLINK" | "EXISTS" | "TOUCH" if args.len() > 2 => {
                let keys = &args[1..];
                let groups = Self::split_by_slot(keys);
                if groups.len() == 1 {
                    return None;
                }
                let mut out = vec![Frame::Null; keys.len()];
                let mut sum = 0i64;
                for (slot, idxs) in groups {
                    let mut part = Cmd::new(&name);
                    idxs.iter().for_each(|&i| part.push_arg(&keys[i]));
                    match self.query_slot(Some(slot), &part) {
                        Ok(Frame::Array(items)) if name == "MGET" => {
                            for (item, &i) in items.into_iter().zip(&idxs) {
                                out[i] = item;
                            }
                        }
                        Ok(Frame::Integer(n)) => sum += n,
                        Ok(other) => {
                            return Some(Err(Error::UnexpectedReply(format!(
                                "{name} part replied {other:?}"
                            ))))
                        }
                        Err(e) => return Some(Err(e)),
                    }
                }
                Some(Ok(if name == "MGET" {
                    Frame::Array(out)
                } else {
                    Frame::Integer(sum)
                }))
            }
            "MSET" if args.len() > 3 && args.len() % 2 == 1 => {
                let keys: Vec<Vec<u8>> = args[1..].chunks(2).map(|p| p[0].clone()).collect();
                let groups = Self::split_by_slot(&keys);
                if groups.len() == 1 {
                    return None;
                }
                for (slot, idxs) in groups {
                    let mut part = Cmd::new("MSET");
                    for i in idxs {
                        part.push_arg(&args[1 + 2 * i]);
                        part.push_arg(&args[2 + 2 * i]);
                    }
                    if let Err(e) = self.query_slot(Some(slot), &part) {
                        return Some(Err(e));
                    }
                }
                Some(Ok(Frame::Simple("OK".into())))
            }
            _ => None,
        }
    }
}

impl Commands for ClusterClient {
    fn query(&self, c: &Cmd) -> Result<Frame> {
        if let Some(r) = self.multi_key(c) {
            return r;
        }
        let slot = c.args().get(1).map(|k| key_slot(k));
        self.query_slot(slot, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_slots_reply_parses() {
        let node = |h: &str, p: i64| {
            Frame::Array(vec![
                Frame::Bulk(h.as_bytes().to_vec()),
                Frame::Integer(p),
                Frame::Bulk(b"id".to_vec()),
            ])
        };
        let reply = Frame::Array(vec![
            Frame::Array(vec![
                Frame::Integer(5461),
                Frame::Integer(16383),
                node("", 7001),
                node("10.0.0.9", 7004),
            ]),
            Frame::Array(vec![
                Frame::Integer(0),
                Frame::Integer(5460),
                node("10.0.0.1", 7000),
            ]),
        ]);
        let m = SlotMap::from_cluster_slots(&reply, "10.0.0.2").unwrap();
        assert_eq!(
            m.ranges,
            vec![
                (0, 5460, "10.0.0.1:7000".to_string()),
                (5461, 16383, "10.0.0.2:7001".to_string())
            ]
        );
        assert!(SlotMap::from_cluster_slots(&Frame::Integer(1), "h").is_err());
    }
}
