//! [`ConnectOptions`]: how a connection reaches its server and behaves once there.

use std::time::Duration;

use kvik_resp::Proto;

/// Settings of one connection (and of every connection a sharded or cluster client opens).
///
/// The defaults suit a shared connection on a LAN: batching on, at most 64 commands or
/// 256 KiB per write, at most 4,096 commands in flight, a 5 s caller timeout.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// `AUTH` user name (`None`: the default user).
    pub username: Option<String>,
    /// `AUTH` password; sent on connect when set.
    pub password: Option<String>,
    /// Database selected on connect (`SELECT`), when not 0.
    pub db: u32,
    /// `CLIENT SETNAME` on connect.
    pub client_name: Option<String>,
    /// Protocol: RESP3 sends `HELLO 3` on connect (with AUTH and SETNAME folded in).
    pub proto: Proto,
    /// Bound on the TCP connect and the handshake.
    pub connect_timeout: Duration,
    /// Default per-call deadline, covering the wait for an in-flight permit, the queue, the
    /// write and the reply.
    pub timeout: Duration,
    /// Socket write timeout of the flusher; a server that stops reading for this long breaks
    /// the connection rather than blocking the flusher forever.
    pub write_timeout: Duration,
    /// Auto-batch flush on (default) or off (each caller writes its own command, one write per
    /// command, under a mutex), for comparison.
    pub batching: bool,
    /// At most this many commands per write.
    pub max_batch_commands: usize,
    /// At most about this many bytes per write (a single larger command is written alone).
    pub max_batch_bytes: usize,
    /// At most this many commands queued or awaiting a reply; a caller waits for room, and
    /// that wait counts against its timeout.
    pub max_in_flight: usize,
    /// Let blocking commands (BLPOP, XREAD BLOCK, WAIT...) and connection-state commands
    /// through. Only for a connection that a single caller uses at a time.
    pub allow_blocking: bool,
    /// How many times a [`Client`](crate::Client) retries an idempotent command (reads, or a
    /// generic command sent with `query_idempotent`) after a connection error, on a fresh
    /// connection. 0 (default): nothing is ever replayed.
    pub retries: u32,
    /// The local cache of GET replies (see [`crate::local_cache`]): at most this many keys,
    /// kept consistent by CLIENT TRACKING over RESP3. 0 (default): off.
    pub local_cache: usize,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            username: None,
            password: None,
            db: 0,
            client_name: None,
            proto: Proto::Resp2,
            connect_timeout: Duration::from_secs(2),
            timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
            batching: true,
            max_batch_commands: 64,
            max_batch_bytes: 256 * 1024,
            max_in_flight: 4096,
            allow_blocking: false,
            retries: 0,
            local_cache: 0,
        }
    }
}

impl ConnectOptions {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the password (and optionally the user) sent with AUTH.
    pub fn auth(mut self, username: Option<&str>, password: &str) -> Self {
        self.username = username.map(str::to_string);
        self.password = Some(password.to_string());
        self
    }

    /// Sets the database selected on connect.
    pub fn db(mut self, db: u32) -> Self {
        self.db = db;
        self
    }

    /// Sets the client name.
    pub fn client_name(mut self, name: &str) -> Self {
        self.client_name = Some(name.to_string());
        self
    }

    /// Chooses RESP2 or RESP3.
    pub fn proto(mut self, proto: Proto) -> Self {
        self.proto = proto;
        self
    }

    /// Sets the default per-call timeout.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// Turns auto-batch flush on or off.
    pub fn batching(mut self, on: bool) -> Self {
        self.batching = on;
        self
    }

    /// Sets the in-flight bound.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }

    /// Turns the local cache on for up to `max_keys` keys (0 turns it off). It needs RESP3,
    /// which this selects.
    pub fn local_cache(mut self, max_keys: usize) -> Self {
        self.local_cache = max_keys;
        if max_keys > 0 {
            self.proto = Proto::Resp3;
        }
        self
    }

    /// Sets the retry count for idempotent commands.
    pub fn retries(mut self, n: u32) -> Self {
        self.retries = n;
        self
    }
}
