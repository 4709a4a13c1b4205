//! Per-connection state that commands read and change: selected database, protocol version,
//! authentication. It travels with the connection's run of commands: the I/O thread owns it while
//! it reads, and hands it to the worker that executes the run (the connection reads nothing more
//! until the worker hands it back), so no lock guards it.

use crate::clients::ClientInfo;
use bytes::Bytes;
use kvik_resp::Proto;
use std::sync::Arc;

#[derive(Debug)]
pub struct Session {
    pub db: u16,
    pub proto: Proto,
    pub authenticated: bool,
    /// The ACL user the client authenticated as; `None` is the default user.
    pub user: Option<std::sync::Arc<crate::acl::UserCell>>,
    /// Set by QUIT (and protocol errors): send what is queued, then close.
    pub close_after_reply: bool,
    /// The shared, observable side of this client (CLIENT LIST, CLIENT KILL).
    pub client: Arc<ClientInfo>,
    /// Inside MULTI: the queued commands (see `cmd::multi`).
    pub multi: Option<MultiState>,
    /// WATCHed keys; dropping the session (disconnect) unwatches them.
    pub watches: crate::watch::Watches,
    /// Set while EXEC runs the queued commands: blocking commands must not block.
    pub in_exec: bool,
    /// Set while a script's `redis.call` runs a command (XREAD/XREADGROUP refuse BLOCK there).
    pub in_script: bool,
    /// Set when this client's command blocked (see `crate::blocking`): its I/O thread parks the
    /// connection until the client is served, times out or goes away.
    pub blocked: Option<crate::blocking::Blocked>,
    /// Cluster mode: ASKING was sent; lets the next command into an IMPORTING slot.
    pub asking: bool,
    /// Cluster mode: READONLY was sent; a replica serves this connection's reads of its
    /// primary's slots.
    pub readonly: bool,
    /// Pub/sub subscriptions; dropping the session (disconnect) unsubscribes them.
    pub subs: crate::pubsub::Subscriptions,
    /// Set by MONITOR; dropping it (disconnect, RESET) stops the feed.
    pub monitor: Option<crate::pubsub::monitor::MonitorGuard>,
    /// REPLCONF listening-port: the port a replica on this connection serves clients on.
    pub repl_port: Option<u16>,
    /// REPLCONF kvik-fullsync-resume: what a replica holds of a cut full sync.
    pub repl_resume: Option<crate::replication::checkpoint::Resume>,
    /// Set by PSYNC: once the replies are sent, the I/O thread gives the socket (blocking
    /// mode) to this and forgets the connection (see `crate::replication::primary`).
    pub handoff: Option<Handoff>,
    /// CLIENT TRACKING on: its flags and registration (dropping it turns tracking off).
    pub tracking: Option<crate::tracking::SessionTracking>,
    /// CLIENT REPLY.
    pub reply_mode: ReplyMode,
    /// The run's next command is held by CLIENT PAUSE (`Some(may_write)`): the I/O thread keeps
    /// the connection aside until [`crate::cmd::still_paused`] says the pause is over.
    pub paused: Option<bool>,
    /// While an I/O thread answers a run of this connection's commands back to back: the
    /// clock reading that ended the last one, which is the next one's start (see
    /// [`Session::begin_run`]).
    pub run_clock: Option<std::time::Instant>,
}

/// Takes over a connection's socket.
pub struct Handoff(pub Box<dyn FnOnce(std::net::TcpStream) + Send>);

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handoff")
    }
}

/// CLIENT REPLY's state: which replies the client is sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplyMode {
    #[default]
    On,
    /// No replies until CLIENT REPLY ON.
    Off,
    /// CLIENT REPLY SKIP ran: its own reply and the next command's are dropped.
    SkipNext,
    /// The command running now is the one SKIP drops.
    Skipping,
}

impl Session {
    pub fn new(client: Arc<ClientInfo>, authenticated: bool) -> Session {
        Session {
            db: 0,
            proto: Proto::Resp2,
            authenticated,
            user: None,
            close_after_reply: false,
            client,
            multi: None,
            watches: Default::default(),
            in_exec: false,
            in_script: false,
            blocked: None,
            asking: false,
            readonly: false,
            subs: Default::default(),
            monitor: None,
            repl_port: None,
            repl_resume: None,
            handoff: None,
            tracking: None,
            reply_mode: ReplyMode::On,
            paused: None,
            run_clock: None,
        }
    }

    /// Starts timing a run of commands answered back to back: each command's end reading
    /// (taken for its latency) is also the next one's start, so a pipelined run reads the
    /// clock once per command instead of twice (the two readings were ~4% of a cached GET
    /// -P 16's server CPU). [`Session::end_run`] stops it before the session goes elsewhere.
    pub fn begin_run(&mut self) {
        self.run_clock = Some(std::time::Instant::now());
    }

    pub fn end_run(&mut self) {
        self.run_clock = None;
    }

    /// When the next command starts: the end of the run's last command, or now.
    pub fn command_start(&self) -> std::time::Instant {
        self.run_clock.unwrap_or_else(std::time::Instant::now)
    }

    /// Records `end` as the end of the command just run, if a run is being timed.
    pub fn command_end(&mut self, end: std::time::Instant) {
        if self.run_clock.is_some() {
            self.run_clock = Some(end);
        }
    }

    pub fn id(&self) -> u64 {
        self.client.id
    }
}

/// The state of a session inside MULTI.
#[derive(Debug, Default)]
pub struct MultiState {
    pub(crate) queue: Vec<Queued>,
    /// A command was rejected while queueing: EXEC replies EXECABORT.
    pub(crate) failed: bool,
    /// Memory the queue accounts for (see `cmd::multi`).
    pub(crate) bytes: usize,
}

impl MultiState {
    /// Number of queued commands.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[derive(Debug)]
pub(crate) struct Queued {
    /// The resolved entry (command or subcommand) id.
    pub(crate) id: usize,
    pub(crate) args: Vec<Bytes>,
}
