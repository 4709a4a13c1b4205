//! [`Client`]: a reconnecting handle over one shared [`Connection`].
//!
//! The connection itself never reconnects or replays (see [`crate::conn`]); the client opens a
//! fresh one on the next call after a break, one reconnect at a time, and retries a command
//! only when the caller allowed it ([`ConnectOptions::retries`]) and the command is idempotent.

use std::time::Duration;

use kvik_resp::Frame;
use parking_lot::{Mutex, RwLock};

use crate::cmd::{cmd, Cmd, Pipeline, ToArg};
use crate::commands::{opt_bytes, Commands};
use crate::conn::{Connection, PipelineFuture, ReplyFuture};
use crate::error::{Error, Result};
use crate::options::ConnectOptions;

/// A thread-safe, reconnecting client of one server. Share it (`Arc<Client>` or `&Client`)
/// between any number of threads; they all multiplex onto one auto-batching connection.
#[derive(Debug)]
pub struct Client {
    addr: String,
    opts: ConnectOptions,
    conn: RwLock<Option<Connection>>,
    reconnect: Mutex<()>,
}

impl Client {
    /// Connects to `addr` ("host:port") now, so configuration errors show at once.
    pub fn connect(addr: &str, opts: ConnectOptions) -> Result<Client> {
        let c = Connection::connect(addr, &opts)?;
        Ok(Client {
            addr: addr.to_string(),
            opts,
            conn: RwLock::new(Some(c)),
            reconnect: Mutex::new(()),
        })
    }

    /// A client that connects on first use.
    pub fn lazy(addr: &str, opts: ConnectOptions) -> Client {
        Client {
            addr: addr.to_string(),
            opts,
            conn: RwLock::new(None),
            reconnect: Mutex::new(()),
        }
    }

    /// The server address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The options every connection of this client uses.
    pub fn options(&self) -> &ConnectOptions {
        &self.opts
    }

    /// The current connection, opening a new one if there is none or it broke.
    pub fn connection(&self) -> Result<Connection> {
        if let Some(c) = self.conn.read().as_ref() {
            if !c.is_broken() {
                return Ok(c.clone());
            }
        }
        let _one_at_a_time = self.reconnect.lock();
        if let Some(c) = self.conn.read().as_ref() {
            if !c.is_broken() {
                return Ok(c.clone());
            }
        }
        let c = Connection::connect(&self.addr, &self.opts)?;
        *self.conn.write() = Some(c.clone());
        Ok(c)
    }

    /// The local cache's counters of the current connection, if the cache is on.
    pub fn local_cache_stats(&self) -> Option<crate::LocalCacheStats> {
        self.conn.read().as_ref()?.local_cache_stats()
    }

    /// Runs one command with its own timeout; retries it after a connection error only if it
    /// is idempotent and `retries` allows.
    pub fn query_timeout(&self, c: &Cmd, timeout: Duration) -> Result<Frame> {
        let mut attempt = 0;
        loop {
            let r = self
                .connection()
                .and_then(|conn| conn.query_timeout(c, timeout));
            match r {
                Err(e)
                    if e.is_connection_error()
                        && c.is_idempotent()
                        && attempt < self.opts.retries =>
                {
                    attempt += 1;
                }
                r => return r,
            }
        }
    }

    /// Runs a command that the caller declares safe to replay (see [`Cmd::idempotent`]).
    pub fn query_idempotent(&self, c: Cmd) -> Result<Frame> {
        self.query_timeout(&c.idempotent(), self.opts.timeout)
    }

    /// Runs a pipeline (never replayed).
    pub fn pipeline(&self, p: &Pipeline) -> Result<Vec<Result<Frame>>> {
        self.connection()?.pipeline(p)
    }

    /// Starts a command asynchronously on the current connection (see
    /// [`Connection::query_async`]). Connecting, when needed, happens synchronously here.
    pub fn query_async(&self, c: &Cmd) -> Result<ReplyFuture> {
        Ok(self.connection()?.query_async(c))
    }

    /// Starts a pipeline asynchronously.
    pub fn pipeline_async(&self, p: &Pipeline) -> Result<PipelineFuture> {
        Ok(self.connection()?.pipeline_async(p))
    }

    /// `GET key`, asynchronously.
    pub async fn get_async<K: ToArg>(&self, key: K) -> Result<Option<Vec<u8>>> {
        opt_bytes(self.query_async(&cmd("GET").arg(key))?.await?)
    }

    /// `SET key value`, asynchronously.
    pub async fn set_async<K: ToArg, V: ToArg>(&self, key: K, value: V) -> Result<()> {
        match self.query_async(&cmd("SET").arg(key).arg(value))?.await? {
            Frame::Simple(_) => Ok(()),
            other => Err(Error::UnexpectedReply(format!("SET replied {other:?}"))),
        }
    }

    /// `DEL key...`, asynchronously.
    pub async fn del_async<K: ToArg>(&self, keys: &[K]) -> Result<i64> {
        let mut c = cmd("DEL");
        keys.iter().for_each(|k| c.push_arg(k));
        match self.query_async(&c)?.await? {
            Frame::Integer(n) => Ok(n),
            other => Err(Error::UnexpectedReply(format!("DEL replied {other:?}"))),
        }
    }

    /// `HGET key field`, asynchronously.
    pub async fn hget_async<K: ToArg, F: ToArg>(
        &self,
        key: K,
        field: F,
    ) -> Result<Option<Vec<u8>>> {
        opt_bytes(self.query_async(&cmd("HGET").arg(key).arg(field))?.await?)
    }
}

impl Commands for Client {
    fn query(&self, c: &Cmd) -> Result<Frame> {
        self.query_timeout(c, self.opts.timeout)
    }
}

impl Commands for Connection {
    fn query(&self, c: &Cmd) -> Result<Frame> {
        Connection::query(self, c)
    }
}
