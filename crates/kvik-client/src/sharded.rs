//! [`ShardedClient`]: independent servers behind a weighted consistent-hash [`Ring`], with
//! concurrent [`get_multi`](ShardedClient::get_multi).

use std::time::{Duration, Instant};

use kvik_resp::Frame;

use crate::cmd::{Cmd, ToArg};
use crate::commands::Commands;
use crate::error::{Error, Result};
use crate::multiget::{self, Job, KeyOutcome, MultiGet, ServerHandle, ServerStatus};
use crate::options::ConnectOptions;
use crate::ring::Ring;

/// Settings of a [`ShardedClient`] (and of a cluster client's multi-get).
#[derive(Clone, Debug)]
pub struct ShardOptions {
    /// Options of every connection.
    pub conn: ConnectOptions,
    /// First down period after a failure; doubles with each consecutive failure.
    pub down_backoff: Duration,
    /// Longest down period.
    pub max_down_backoff: Duration,
    /// Default deadline of a whole `get_multi`.
    pub multiget_timeout: Duration,
    /// At most this many keys per MGET (a server's keys go out as several MGETs, pipelined).
    pub multiget_chunk: usize,
}

impl Default for ShardOptions {
    fn default() -> Self {
        ShardOptions {
            conn: ConnectOptions::default(),
            down_backoff: Duration::from_millis(500),
            max_down_backoff: Duration::from_secs(30),
            multiget_timeout: Duration::from_secs(1),
            multiget_chunk: 1000,
        }
    }
}

/// A client of several independent servers; each key lives on the server the ring assigns.
///
/// Single-key commands go through that server's shared auto-batch connection. A command
/// without a key, or whose keys span servers, must be sent to a chosen server with
/// [`ShardedClient::server`]; [`Commands::mget`] is answered by `get_multi` and fails if any
/// server did not answer.
#[derive(Debug)]
pub struct ShardedClient {
    servers: Vec<ServerHandle>,
    ring: Ring,
    opts: ShardOptions,
}

impl ShardedClient {
    /// A client over `(address, weight)` servers. Connections open lazily.
    pub fn new(servers: &[(&str, u32)], opts: ShardOptions) -> Result<ShardedClient> {
        if servers.is_empty() {
            return Err(Error::NoServers);
        }
        let handles = servers
            .iter()
            .map(|(a, _)| {
                ServerHandle::new(a, &opts.conn, opts.down_backoff, opts.max_down_backoff)
            })
            .collect();
        Ok(ShardedClient {
            servers: handles,
            ring: Ring::new(servers),
            opts,
        })
    }

    /// Number of servers.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Always false: a client has at least one server.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The index of the server owning `key`.
    pub fn server_for(&self, key: &[u8]) -> usize {
        self.ring.server_for(key).unwrap_or(0)
    }

    /// The address of server `i`.
    pub fn addr(&self, i: usize) -> &str {
        &self.servers[i].addr
    }

    /// Whether server `i` is currently marked down.
    pub fn is_down(&self, i: usize) -> bool {
        self.servers[i].is_down(Instant::now())
    }

    /// The shared client of server `i`, for commands the ring cannot route.
    pub fn server(&self, i: usize) -> &crate::Client {
        &self.servers[i].client
    }

    /// Runs a command on server `i`, honouring and updating its down state.
    pub fn query_on(&self, i: usize, c: &Cmd) -> Result<Frame> {
        let s = &self.servers[i];
        if s.is_down(Instant::now()) {
            return Err(Error::ServerDown(s.addr.clone()));
        }
        let r = s.client.query(c);
        match &r {
            Err(e) if e.is_connection_error() => s.mark_failed(),
            Err(Error::Timeout { .. }) => {}
            _ => s.mark_ok(),
        }
        r
    }

    /// Reads many keys from all their servers at once, within the default deadline.
    pub fn get_multi<K: AsRef<[u8]>>(&self, keys: &[K]) -> MultiGet {
        self.get_multi_timeout(keys, self.opts.multiget_timeout)
    }

    /// Reads many keys from all their servers at once: every server's MGETs are written first,
    /// then all sockets are drained in one readiness loop until `timeout`. The result has each
    /// key's value, absence or unknown state, and each server's status.
    pub fn get_multi_timeout<K: AsRef<[u8]>>(&self, keys: &[K], timeout: Duration) -> MultiGet {
        let deadline = Instant::now() + timeout;
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        let mut per_server: Vec<Vec<usize>> = vec![Vec::new(); self.servers.len()];
        for (i, k) in keys.iter().enumerate() {
            per_server[self.server_for(k)].push(i);
        }
        let chunk = self.opts.multiget_chunk.max(1);
        let jobs: Vec<Job<'_>> = per_server
            .into_iter()
            .enumerate()
            .filter(|(_, ks)| !ks.is_empty())
            .map(|(s, ks)| Job {
                server: &self.servers[s],
                mgets: ks.chunks(chunk).map(<[usize]>::to_vec).collect(),
            })
            .collect();
        let mut values = vec![KeyOutcome::Unknown; keys.len()];
        let (servers, errors) = multiget::run(&keys, &jobs, deadline, &mut values);
        let mut servers = servers;
        for (job, _, e) in errors {
            // An MGET error reply (e.g. -LOADING) leaves its keys unknown; report it.
            servers[job].status = ServerStatus::Failed(e);
        }
        MultiGet { values, servers }
    }

    /// Runs one command on the server owning its first key (argument 1).
    fn route(&self, c: &Cmd) -> Result<Frame> {
        let i = match c.args().get(1) {
            Some(k) => self.server_for(k),
            None => 0,
        };
        self.query_on(i, c)
    }
}

impl Commands for ShardedClient {
    fn query(&self, c: &Cmd) -> Result<Frame> {
        self.route(c)
    }

    fn mget<K: ToArg>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let owned: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| {
                let mut v = Vec::new();
                k.write_arg(&mut v);
                v
            })
            .collect();
        let r = self.get_multi(&owned);
        if let Some(bad) = r.servers.iter().find(|s| s.status != ServerStatus::Ok) {
            return Err(match &bad.status {
                ServerStatus::TimedOut => Error::Timeout { sent: true },
                ServerStatus::Down => Error::ServerDown(bad.addr.clone()),
                ServerStatus::Failed(why) => Error::ConnectionClosed(why.clone()),
                ServerStatus::Ok => unreachable!(),
            });
        }
        Ok(r.values
            .into_iter()
            .map(|v| match v {
                KeyOutcome::Hit(b) => Some(b),
                _ => None,
            })
            .collect())
    }
}
