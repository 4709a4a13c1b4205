//! One I/O thread: a mio event loop over its connections (and, on thread 0, the listeners).
//!
//! The request path, top to bottom, is [`IoThread::drive`]: read the socket, parse every complete
//! request, answer the leading cache hits right here ([`cmd::execute_cached`]: the command's
//! cache-only handler, with every check the pool path makes), hand the rest of the run to the
//! pool as one job running [`run_commands`] (the connection reads nothing more until the job's
//! [`Completion`] comes back), then write the replies. This thread never waits for a lock, a
//! disk read or a slow client: sockets are non-blocking and edge-triggered, so a connection that
//! stopped before its socket was drained (read budget, job in flight, output backpressure) is
//! driven again explicitly when the obstacle goes away. The writes it runs to completion in one
//! turn of the loop are written to RocksDB as one batch at the end of the turn ([`TurnWrites`]),
//! then made durable together ([`IoThread::flush_group`]) before their replies leave. After a
//! turn that served requests, the thread polls a little longer without sleeping
//! ([`IoThread::poll_spinning`]), so the next request under load costs no wake-up.
//!
//! A command whose key another thread holds past the thread's short wait (another I/O thread's
//! turn keeps the keys it wrote until its batch is written) is not handed to the pool at once:
//! it and the rest of its run wait in [`Conn::retry`] for this thread's next turn, after this
//! turn's batch let its own keys go (`rtc-lock-retries` turns, then the pool). A worker runs
//! each write as its own commit and would queue behind the same key, so under one hot key
//! written from both I/O threads the pool was slower and set the tail.
//!
//! Such a connection moves to the I/O thread its key belongs to (`io-key-affinity`; a hash of
//! the key picks the thread, the same on every thread), at the end of the turn, with the
//! commands it put off ([`IoThread::move_out`], [`IoMsg::Moved`]): the writers of one hot key
//! end up on one thread, whose turns batch them, instead of two threads taking the key's lock
//! in turn and sleeping on it. A connection moves at most once per [`AFFINITY_STAY`]; one that
//! is parked, paused, closing or in the pool does not move. The same move hands a thread's
//! connections on when fewer threads take connections (`io-threads-adaptive`, [`balance`]:
//! [`IoThread::place_connections`]); thread 0 measures the threads for that every window.
//!
//! A connection is closed only while no job holds its session; a close decided while a job runs
//! (write error, output limit, CLIENT KILL) is carried out when the job's completion arrives.
//!
//! A connection whose command blocked (BLPOP...; see [`crate::blocking`]) comes back from its job
//! parked: it holds no worker and runs nothing (its socket is still read, only to notice a
//! disconnect) until its reply arrives ([`IoMsg::Unblocked`], possibly before the completion), its
//! deadline passes (checked on every turn of the loop, at least every 100 ms), or it is closed,
//! which cancels its waiter.

use super::balance::{self, Balance};
use super::conn::{Conn, ReadOutcome, MAX_RUN, OUTPUT_BACKPRESSURE, READ_CHUNK};
use super::{Completion, IoHandle, IoMsg};
use crate::clients::{ClientInfo, NO_CMD};
use crate::cmd::ctx::Mode;
use crate::cmd::run::run_commands;
use crate::cmd::{self, Outcome};
use crate::fast_hash::FastHash;
use crate::pool::Pool;
use crate::reply::Reply;
use crate::server::Server;
use crate::session::Session;
use bytes::Bytes;
use crossbeam_channel::Receiver;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const WAKER: Token = Token(usize::MAX);
/// Most commands one connection may have answered on the I/O thread per turn of the event loop,
/// so a client pipelining cache hits cannot starve the others on its thread.
const RTC_BUDGET: usize = 4 * MAX_RUN;
/// Capacity of the reused RTC reply buffer above which it is given back to the allocator.
const RTC_BUF_KEEP: usize = 64 * 1024;
/// Listener tokens count down from here; connection tokens count up from 0.
const LISTENER_BASE: usize = usize::MAX - 1;

pub struct IoThread {
    index: usize,
    poll: Poll,
    inbox: Receiver<IoMsg>,
    handles: Vec<Arc<IoHandle>>,
    listeners: Vec<TcpListener>,
    server: Arc<Server>,
    pool: Arc<dyn Pool>,
    conns: HashMap<Token, Conn, FastHash>,
    next_token: usize,
    next_owner: usize,
    /// Connections to drive again without waiting for an event (see the module doc).
    again: Vec<Token>,
    /// Connections whose [`Conn::retry`] runs on the next turn.
    retry_next: Vec<Token>,
    /// Connections to give to another I/O thread at the end of this turn, which one, and why.
    moving: Vec<(Token, usize, Why)>,
    /// How many I/O threads take connections (`io-threads-adaptive`), shared by all.
    balance: Arc<Balance>,
    /// The active count this thread last placed its connections for.
    placed_for: usize,
    /// Connections that must still move for the balance (they could not at the last try).
    balance_pending: Vec<(Token, usize)>,
    /// Where every socket read of this thread lands before it is appended to a query buffer.
    scratch: Box<[u8]>,
    /// Reply buffer of run-to-completion commands, reused so a cache hit allocates nothing.
    rtc_buf: Vec<u8>,
    /// Client id -> token of this thread's connections.
    by_id: HashMap<u64, Token, FastHash>,
    /// Connections parked by a blocking command.
    parked: HashSet<Token, FastHash>,
    /// Connections whose output waits for this thread's writes to reach the WAL (see
    /// [`IoThread::write_out`]): flushed together at the end of the turn.
    unflushed: Vec<Token>,
    /// Turns' connections whose replies wait for the WAL's sync thread (`fsync-thread`), each
    /// group with the WAL ticket that must be durable first, oldest first (see
    /// [`IoThread::flush_group`]).
    syncing: VecDeque<(u64, Vec<Token>)>,
    /// Connections whose next command CLIENT PAUSE holds, tried again each turn.
    held: Vec<Token>,
    /// A part of this turn's writes could not be written (see [`TurnWrites`]): the replies
    /// held for the turn are not sent.
    turn_failed: bool,
    /// Busy turns left before the next spinning poll, and the length of the last such pause
    /// (see [`IoThread::poll_spinning`]).
    spin_skip: u32,
    spin_backoff: u32,
}

/// The longest pause, in busy turns, of spinning polls after one found nothing
/// ([`IoThread::poll_spinning`]).
const MAX_SPIN_BACKOFF: u32 = 64;

/// Why a connection moves to another I/O thread.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Why {
    /// Its command found its key held by another thread (`io-key-affinity`).
    Key,
    /// The number of active I/O threads changed (`io-threads-adaptive`).
    Balance,
}

/// Most key writes a turn buffers before it writes them (bounds the keys it keeps locked).
const TURN_MAX_WRITES: usize = 256;

/// The writes this I/O thread runs to completion in one turn of its event loop, buffered in
/// one transaction (`storage::txn`) and written to RocksDB as one batch at the end of the turn
/// (`rtc-write-batch`), right before the turn's group commit: one RocksDB write, one WAL
/// record for every write of the turn instead of one per command. The keys written stay
/// locked until then (`storage::locks::retain`), so no other thread reads or writes them
/// between a command and the batch; work handed to the pool first writes what is buffered
/// (`settle`), so a worker never waits for this thread's turn, and the pool's commands see
/// the connection's earlier writes.
struct TurnWrites<'s> {
    txn: Option<crate::storage::Txn<'s>>,
}

impl<'s> TurnWrites<'s> {
    fn begin(server: &'s Server) -> TurnWrites<'s> {
        let on = server.config.rtc_write_batch.load(Relaxed)
            && server.config.rtc_write.load(Relaxed)
            && server.storage.wal().grouped();
        if on {
            crate::storage::locks::retain(true);
        }
        TurnWrites {
            txn: on.then(|| server.storage.begin_txn()),
        }
    }

    /// The turn's writes so far go to RocksDB now (past [`TURN_MAX_WRITES`] with `only_if_full`).
    /// `false` if they could not be written.
    fn settle(server: &Server, only_if_full: bool) -> bool {
        let buffered = server.storage.txn_buffered();
        if only_if_full && buffered < TURN_MAX_WRITES {
            return true;
        }
        Self::count(server, buffered);
        let written = server.storage.settle_txn();
        server.storage.release_retained_locks();
        if let Err(e) = &written {
            tracing::error!(error = %e, "writing a turn's buffered writes failed");
        }
        written.is_ok()
    }

    /// INFO's `rtc_write_batches` and `rtc_batched_writes`.
    fn count(server: &Server, buffered: usize) {
        if buffered > 0 {
            let stats = &server.stats;
            stats.rtc_write_batches.fetch_add(1, Relaxed);
            stats.rtc_batched_writes.fetch_add(buffered as u64, Relaxed);
        }
    }

    /// Writes the turn's batch and lets its keys go; `false` if it could not be written.
    fn end(self, server: &Server) -> bool {
        let Some(txn) = self.txn else {
            return true;
        };
        Self::count(server, server.storage.txn_buffered());
        let written = txn.commit();
        server.storage.release_retained_locks();
        crate::storage::locks::retain(false);
        if let Err(e) = &written {
            tracing::error!(error = %e, "writing a turn's buffered writes failed");
        }
        written.is_ok()
    }
}

impl IoThread {
    pub fn new(
        index: usize,
        poll: Poll,
        inbox: Receiver<IoMsg>,
        handles: Vec<Arc<IoHandle>>,
        mut listeners: Vec<TcpListener>,
        server: Arc<Server>,
        pool: Arc<dyn Pool>,
    ) -> std::io::Result<IoThread> {
        let threads = handles.len();
        let balance = server
            .io_balance
            .get_or_init(|| Arc::new(Balance::new(threads)))
            .clone();
        for (i, l) in listeners.iter_mut().enumerate() {
            poll.registry()
                .register(l, Token(LISTENER_BASE - i), Interest::READABLE)?;
        }
        Ok(IoThread {
            index,
            poll,
            inbox,
            handles,
            listeners,
            server,
            pool,
            conns: HashMap::default(),
            next_token: 0,
            next_owner: 0,
            again: Vec::new(),
            retry_next: Vec::new(),
            moving: Vec::new(),
            placed_for: balance.active(),
            balance,
            balance_pending: Vec::new(),
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
            rtc_buf: Vec::with_capacity(RTC_BUF_KEEP),
            by_id: HashMap::default(),
            parked: HashSet::default(),
            unflushed: Vec::new(),
            syncing: VecDeque::new(),
            held: Vec::new(),
            turn_failed: false,
            spin_skip: 0,
            spin_backoff: 0,
        })
    }

    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut last_tick = Instant::now();
        let mut last_balance = last_tick;
        let server = self.server.clone();
        let mut busy = false;
        self.balance.register_thread(self.index);
        crate::stats::sharded::claim(self.index);
        loop {
            let waiting = !self.again.is_empty() || !self.retry_next.is_empty();
            let found =
                busy && !waiting && self.syncing.is_empty() && self.poll_spinning(&mut events);
            if !found {
                let timeout = if !waiting {
                    Duration::from_millis(100)
                } else {
                    Duration::ZERO
                };
                if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        tracing::error!(error = %e, "poll failed");
                    }
                    continue;
                }
            }
            busy = !events.is_empty();
            let turn_started = Instant::now();
            self.release_synced();
            let turn = TurnWrites::begin(&server);
            // First, while this turn keeps no key locked (the longer wait applies).
            for t in std::mem::take(&mut self.retry_next) {
                self.drive(t);
                self.turn_failed |= !TurnWrites::settle(&server, true);
            }
            for event in events.iter() {
                match event.token() {
                    WAKER => {}
                    t if t.0 > LISTENER_BASE - self.listeners.len() && t != WAKER => {
                        self.accept(LISTENER_BASE - t.0)
                    }
                    t => {
                        if event.is_writable() || event.is_write_closed() || event.is_error() {
                            self.on_writable(t);
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            if event.is_read_closed() || event.is_error() {
                                if let Some(conn) = self.conns.get_mut(&t) {
                                    conn.hangup_seen = true;
                                }
                            }
                            self.drive(t);
                            self.turn_failed |= !TurnWrites::settle(&server, true);
                        }
                    }
                }
            }
            self.drain_inbox();
            self.check_block_timeouts();
            for t in std::mem::take(&mut self.held) {
                if let Some(conn) = self.conns.get_mut(&t) {
                    conn.held = false;
                }
                self.drive(t);
                self.turn_failed |= !TurnWrites::settle(&server, true);
            }
            for t in std::mem::take(&mut self.again) {
                self.drive(t);
                self.turn_failed |= !TurnWrites::settle(&server, true);
            }
            self.turn_failed |= !turn.end(&server);
            self.flush_group();
            self.place_connections();
            self.move_out();
            let now = Instant::now();
            let turn_ns = now.duration_since(turn_started).as_nanos() as u64;
            self.balance.add_busy(self.index, turn_ns);
            if self.index == 0 && now.duration_since(last_balance) >= balance::WINDOW {
                last_balance = now;
                let adaptive = server.config.io_threads_adaptive.load(Relaxed);
                let commands = server.stats.total_commands_processed.load(Relaxed);
                self.balance.tick(adaptive, commands);
            }
            if now.duration_since(last_tick) >= Duration::from_secs(1) {
                last_tick = now;
                self.close_idle();
            }
            if self.server.is_shutting_down() && self.shutdown_step() {
                return;
            }
        }
    }

    /// After a busy turn, polls without sleeping for up to `io-poll-spin-us`, yielding the
    /// core between polls; true if that found events. Under a load of short requests a client's
    /// next request often arrives within microseconds of its reply: found this way, it costs
    /// no sleep and no wake-up, neither here nor in the sender's kernel path (waking a thread
    /// asleep in epoll is a large part of a loopback send). The yield gives the core to any
    /// other runnable thread (a worker, the client itself).
    ///
    /// It adapts to the load: a spin that finds nothing pauses spinning for the next 1, 2, 4 ...
    /// up to [`MAX_SPIN_BACKOFF`] busy turns, and one that finds work ends the pause. Under
    /// sparse requests (10,000 a second over 50 clients) nearly every spin would run its full
    /// length for nothing and cost most of a core; with the pause they are rare.
    ///
    /// Not while the thread's replies wait for the WAL's sync thread (`fsync-thread`): its
    /// waker ends the sleep when the fsync is done, and a spin would only take the core from
    /// the clients (SET -P 1 with `always`: 10% less CPU per request without it).
    fn poll_spinning(&mut self, events: &mut Events) -> bool {
        let spin = self.server.config.io_poll_spin_us.load(Relaxed);
        if spin == 0 {
            return false;
        }
        if self.spin_skip > 0 {
            self.spin_skip -= 1;
            return false;
        }
        let stats = &self.server.stats;
        stats.io_poll_spins.fetch_add(1, Relaxed);
        let until = Instant::now() + Duration::from_micros(spin);
        loop {
            if self.poll.poll(events, Some(Duration::ZERO)).is_ok() && !events.is_empty() {
                stats.io_poll_spin_hits.fetch_add(1, Relaxed);
                self.spin_backoff = 0;
                return true;
            }
            if Instant::now() >= until {
                self.spin_backoff = (self.spin_backoff * 2).clamp(1, MAX_SPIN_BACKOFF);
                self.spin_skip = self.spin_backoff;
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// Accepts every pending connection on listener `i` and deals them out round-robin.
    fn accept(&mut self, i: usize) {
        loop {
            let (stream, addr) = match self.listeners[i].accept() {
                Ok(s) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    return;
                }
            };
            let stats = &self.server.stats;
            let max = self.server.config.maxclients.load(Relaxed) as usize;
            if self.server.is_shutting_down() {
                continue; // dropping the socket closes it
            }
            if self.server.clients.len() >= max {
                stats.rejected_connections.fetch_add(1, Relaxed);
                let mut s = stream;
                let _ =
                    std::io::Write::write_all(&mut s, b"-ERR max number of clients reached\r\n");
                continue;
            }
            stats.total_connections_received.fetch_add(1, Relaxed);
            let _ = stream.set_nodelay(true);
            let owner = self.next_owner % self.balance.active();
            self.next_owner += 1;
            if owner == self.index {
                self.adopt(stream, addr);
            } else {
                self.handles[owner].send(IoMsg::NewConn(stream, addr));
            }
        }
    }

    /// A token for a connection new to this thread.
    fn new_token(&mut self) -> Token {
        let token = Token(self.next_token);
        self.next_token = (self.next_token + 1) % (LISTENER_BASE - 64);
        token
    }

    /// Registers a new connection on this thread.
    fn adopt(&mut self, mut stream: TcpStream, addr: SocketAddr) {
        if let Some(denied) = crate::acl::protected::check(&self.server.config, addr.ip()) {
            // Best effort, as Redis: the client reads why, then the connection closes.
            let _ = std::io::Write::write(&mut stream, denied);
            return;
        }
        let token = self.new_token();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!(error = %e, "cannot register connection");
            return;
        }
        let server = &self.server;
        let info = Arc::new(ClientInfo {
            id: server.clients.next_id(),
            addr: addr.to_string(),
            laddr: stream
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
            created_ms: crate::clock::unix_ms(),
            name: Default::default(),
            user: Default::default(),
            db: Default::default(),
            resp: 2.into(),
            last_cmd: NO_CMD.into(),
            last_interaction_ms: crate::clock::unix_ms().into(),
            qbuf: Default::default(),
            obuf: Default::default(),
            killed: Default::default(),
            io: parking_lot::RwLock::new(self.handles[self.index].clone()),
            io_thread: self.index.into(),
            mailbox: Default::default(),
            subs: Default::default(),
            state: Default::default(),
        });
        server.clients.add(info.clone());
        self.by_id.insert(info.id, token);
        let authenticated = server.config.acl.default_authenticated();
        let session = Session::new(info.clone(), authenticated);
        let id = info.id;
        self.conns.insert(token, Conn::new(stream, info, session));
        self.again.push(token);
        self.place_arrival(token, id);
    }

    fn drain_inbox(&mut self) {
        while let Ok(msg) = self.inbox.try_recv() {
            match msg {
                IoMsg::NewConn(stream, addr) => self.adopt(stream, addr),
                IoMsg::Done(done) => self.complete(*done),
                IoMsg::Kill(id) => {
                    let token = self
                        .conns
                        .iter()
                        .find(|(_, c)| c.client.id == id)
                        .map(|(t, _)| *t);
                    if let Some(t) = token {
                        self.again.push(t);
                    }
                }
                IoMsg::Deliver(id) => {
                    if let Some(&token) = self.by_id.get(&id) {
                        if self.conns.get(&token).is_some_and(|c| !c.in_pool()) {
                            self.deliver(token);
                            self.write_out(token);
                        }
                        // In the pool: the job's completion delivers, after its replies.
                    }
                }
                IoMsg::Moved(conn) => self.adopt_moved(*conn),
                IoMsg::Unblocked(id, reply) => {
                    let Some(&token) = self.by_id.get(&id) else {
                        continue; // closed meanwhile
                    };
                    let Some(conn) = self.conns.get_mut(&token) else {
                        continue;
                    };
                    if conn.in_pool() {
                        conn.wake = Some(reply); // the completion that parks it is on its way
                    } else if conn.parked().is_some() {
                        self.unpark(token, &reply);
                    }
                }
            }
        }
    }

    /// Gives away the connections chosen to move, once this turn's writes are durable and their
    /// replies out: to the I/O thread their key belongs to ([`Self::drive`], `io-key-affinity`;
    /// the connection takes its put-off commands along), or to an active thread
    /// ([`Self::place_connections`], `io-threads-adaptive`). One that cannot move now (in the
    /// pool, parked, paused, closing) tries again next turn.
    fn move_out(&mut self) {
        for (token, home, why) in std::mem::take(&mut self.moving) {
            let Some(conn) = self.conns.get_mut(&token) else {
                continue; // closed meanwhile
            };
            let stays = conn.in_pool()
                || conn.sync_wait != 0
                || conn.parked().is_some()
                || conn.held
                || conn.close_after_write
                || conn.peer_closed
                || conn.client.killed.load(Relaxed);
            if stays {
                match why {
                    Why::Key => self.retry_next.push(token),
                    Why::Balance => self.balance_pending.push((token, home)),
                }
                continue;
            }
            if self.poll.registry().deregister(&mut conn.stream).is_err() {
                self.close(token);
                continue;
            }
            let mut conn = self.conns.remove(&token).expect("found above");
            self.by_id.remove(&conn.client.id);
            conn.retries = 0;
            conn.moved_at = Some(Instant::now());
            // Notices sent from now on go to the new thread; one sent here before this line is
            // dropped, and the new thread checks for what it was about when it adopts the
            // connection (a kill, a mailbox).
            conn.client.move_to(self.handles[home].clone(), home);
            match why {
                Why::Key => {
                    self.server
                        .stats
                        .io_key_affinity_moves
                        .fetch_add(1, Relaxed);
                }
                Why::Balance => self.balance.note_move(),
            }
            self.handles[home].send(IoMsg::Moved(Box::new(conn)));
        }
    }

    /// Moves connections for the balance (`io-threads-adaptive`, see [`balance`]). When the
    /// number of active threads changed since this thread last looked, a thread no longer
    /// active gives every connection away and, when the number grew, an active one gives the
    /// new threads their share (the connections whose home is now one of them). Connections
    /// that could not move at their last try (in the pool, parked...) try again every turn.
    fn place_connections(&mut self) {
        let active = self.balance.active();
        let before = std::mem::replace(&mut self.placed_for, active);
        if active == before {
            let pending = self.balance_pending.drain(..);
            self.moving
                .extend(pending.map(|(token, home)| (token, home, Why::Balance)));
            return;
        }
        self.balance_pending.clear();
        let leaving = self.index >= active;
        for (&token, conn) in &self.conns {
            let home = balance::home_of(conn.client.id, active);
            if home != self.index && (leaving || (active > before && home >= before)) {
                self.moving.push((token, home, Why::Balance));
            }
        }
    }

    /// A connection that arrived on a thread no longer active (accepted for it, or moved to it,
    /// just before the count fell) moves on at the end of the turn.
    fn place_arrival(&mut self, token: Token, client_id: u64) {
        let active = self.balance.active();
        if self.index >= active {
            let home = balance::home_of(client_id, active);
            self.balance_pending.push((token, home));
        }
    }

    /// Takes over a connection another I/O thread moved here ([`Self::move_out`]).
    fn adopt_moved(&mut self, mut conn: Conn) {
        let token = self.new_token();
        if let Err(e) = self.poll.registry().register(
            &mut conn.stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!(error = %e, "cannot register a moved connection");
            self.server.clients.remove(conn.client.id);
            return;
        }
        let id = conn.client.id;
        self.by_id.insert(id, token);
        self.conns.insert(token, conn);
        self.deliver(token);
        self.again.push(token);
        self.place_arrival(token, id);
    }

    /// Moves the connection's pub/sub mailbox to its output (dropped if the socket failed).
    fn deliver(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        let messages = conn.client.mailbox.take();
        if !messages.is_empty() && !conn.write_failed {
            conn.queue_output(&messages);
        }
    }

    /// Un-parks a blocked connection with its command's reply, and carries on with it.
    fn unpark(&mut self, token: Token, reply: &[u8]) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        if !conn.write_failed {
            conn.queue_output(reply);
        }
        if let Some(s) = conn.session.as_mut() {
            s.blocked = None;
        }
        self.parked.remove(&token);
        self.again.push(token);
    }

    /// Answers the parked connections whose timeout passed with their timeout reply.
    fn check_block_timeouts(&mut self) {
        if self.parked.is_empty() {
            return;
        }
        let now = crate::clock::unix_ms();
        let due: Vec<(Token, crate::blocking::Blocked)> = self
            .parked
            .iter()
            .filter_map(|t| Some((*t, self.conns.get(t)?.parked()?)))
            .filter(|(_, b)| b.deadline_ms != 0 && b.deadline_ms <= now)
            .collect();
        for (token, b) in due {
            // Claimed: a worker is re-running it; its outcome decides (retry next turn).
            // Gone: it was served; the reply is in the inbox.
            if self.server.blocking.cancel(b.waiter) == crate::blocking::Cancel::Cancelled {
                let proto = self.conns[&token]
                    .session
                    .as_ref()
                    .map_or(kvik_resp::Proto::Resp2, |s| s.proto);
                let mut out = Vec::new();
                b.timeout.encode(&mut out, proto);
                self.unpark(token, &out);
            }
        }
    }

    /// The request path for one connection: read, parse, hand to the pool, write.
    fn drive(&mut self, token: Token) {
        let server = self.server.clone();
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        if conn.client.killed.load(Relaxed) && !conn.in_pool() {
            return self.close(token);
        }
        let home = &self.handles[self.index];
        let mut rtc_served = 0;
        // The socket was drained by a read of this call: once what it brought is parsed and
        // run, another read would only answer WouldBlock (a new edge will call us again).
        let mut drained = false;
        loop {
            if conn.in_pool() || conn.close_after_write {
                break;
            }
            if conn.parked().is_some() {
                // Read only to notice a disconnect (Redis frees a blocked client whose peer
                // closed); what arrives waits, unparsed, until the client is served.
                let limit = server.config.client_query_buffer_limit.load(Relaxed);
                if !conn.peer_closed && conn.query_len() as u64 <= limit {
                    match conn.read(&mut self.scratch) {
                        Ok((n, outcome)) => {
                            server.stats.net_input_bytes.fetch_add(n as u64, Relaxed);
                            match outcome {
                                ReadOutcome::Eof => conn.peer_closed = true,
                                ReadOutcome::MoreWaiting => self.again.push(token),
                                ReadOutcome::Drained => {}
                            }
                        }
                        Err(_) => {
                            conn.peer_closed = true;
                            conn.write_failed = true;
                        }
                    }
                }
                if conn.peer_closed || conn.query_len() as u64 > limit {
                    conn.close_after_write = true;
                    conn.write_failed = true;
                }
                break;
            }
            if rtc_served >= RTC_BUDGET {
                self.again.push(token);
                break;
            }
            if server.is_shutting_down() {
                break; // no new command starts; shutdown_step closes the connection
            }
            if conn.pending_output() > OUTPUT_BACKPRESSURE {
                conn.throttled = true; // write_out drives it again once the client reads
                break;
            }
            if conn.retry.is_empty() && !conn.leftover.is_empty() {
                if cmd::still_paused(&server, conn.session.as_mut().expect("not in pool")) {
                    if !conn.held {
                        conn.held = true;
                        self.held.push(token);
                    }
                    break;
                }
                let run = std::mem::take(&mut conn.leftover);
                let session = conn.session.take().expect("not in pool");
                self.turn_failed |= !TurnWrites::settle(&server, false);
                submit_run(&server, &self.pool, home, token, session, run, Mode::Normal);
                break;
            }
            let session = conn.session.as_ref().expect("not in pool");
            let limits = kvik_resp::Limits {
                max_bulk_len: server.config.proto_max_bulk_len.load(Relaxed),
                authenticated: session.authenticated,
                ..Default::default()
            };
            // Before AUTH succeeds, one request at a time: the pre-authentication limits must
            // apply only to requests that really arrive before authentication, as in Redis.
            let max_run = if session.authenticated { MAX_RUN } else { 1 };
            let mut run = if conn.retry.is_empty() {
                conn.parse_run(&limits, max_run)
            } else {
                std::mem::take(&mut conn.retry)
            };
            if !run.is_empty() {
                // Pushes (pub/sub, tracking invalidations) queued before these commands were
                // read go out before their replies, as in Redis.
                let pushed = conn.client.mailbox.take();
                if !pushed.is_empty() && !conn.write_failed {
                    conn.queue_output(&pushed);
                }
                // Run-to-completion: answer the leading cache hits here; the first command that
                // is not an rtc hit, and everything after it, goes to the pool in order.
                let mut first_mode = Mode::Normal;
                let mut contended = false;
                if server.config.rtc_read.load(Relaxed) || server.config.rtc_write.load(Relaxed) {
                    let session = conn.session.as_mut().expect("not in pool");
                    let mut reply = Reply {
                        buf: std::mem::take(&mut self.rtc_buf),
                        proto: session.proto,
                    };
                    let (mut served, mut prefetched) = (0, 0);
                    session.begin_run();
                    for (i, args) in run.iter().enumerate() {
                        if i == prefetched {
                            prefetched = i + cmd::prefetch_run(&server, session, &run[i..]);
                        }
                        match cmd::execute_cached(&server, session, &mut reply, args) {
                            Outcome::Done => served += 1,
                            Outcome::NotServed => break,
                            Outcome::Missed => {
                                first_mode = Mode::SkipCache;
                                break;
                            }
                            Outcome::Contended => {
                                contended = true;
                                break;
                            }
                        }
                        if reply.buf.len() > OUTPUT_BACKPRESSURE {
                            break;
                        }
                    }
                    session.end_run();
                    conn.queue_output(&reply.buf);
                    reply.buf.clear();
                    if reply.buf.capacity() > RTC_BUF_KEEP {
                        reply.buf = Vec::with_capacity(RTC_BUF_KEEP);
                    }
                    self.rtc_buf = reply.buf;
                    rtc_served += served;
                    for args in run.drain(..served) {
                        conn.spare.give_args(args);
                    }
                    if served > 0 {
                        conn.retries = 0;
                    }
                    let limit = server.config.rtc_lock_retries.load(Relaxed);
                    if contended && u64::from(conn.retries) < limit {
                        conn.retries += 1;
                        server.stats.rtc_lock_retries.fetch_add(1, Relaxed);
                        conn.retry = run;
                        let active = self.balance.active();
                        match affinity_home(&server, conn, active, self.index) {
                            Some(home) => self.moving.push((token, home, Why::Key)),
                            None => self.retry_next.push(token),
                        }
                        break;
                    }
                    if run.is_empty() {
                        conn.spare.give_run(run);
                        continue;
                    }
                    if first_mode == Mode::Normal
                        && served > 0
                        && conn.pending_output() > OUTPUT_BACKPRESSURE
                    {
                        conn.leftover = run;
                        continue;
                    }
                }
                conn.retries = 0;
                let session = conn.session.take().expect("not in pool");
                self.turn_failed |= !TurnWrites::settle(&server, false);
                submit_run(&server, &self.pool, home, token, session, run, first_mode);
                break;
            }
            if let Some(e) = conn.pending_error.take() {
                let mut msg = b"ERR ".to_vec();
                msg.extend_from_slice(&e.message_bytes());
                let mut out = Vec::new();
                kvik_resp::encode::error(&mut out, &msg);
                tracing::debug!(client = %conn.client.addr, error = %e, "closing client after a protocol error");
                conn.queue_output(&out);
                conn.close_after_write = true;
                break;
            }
            if conn.peer_closed {
                conn.close_after_write = true;
                break;
            }
            if conn.query_len() as u64 > server.config.client_query_buffer_limit.load(Relaxed) {
                tracing::warn!(client = %conn.client.addr, qbuf = conn.query_len(), "closing client that reached max query buffer length");
                conn.close_after_write = true;
                break;
            }
            if drained && !conn.hangup_seen {
                break;
            }
            match conn.read(&mut self.scratch) {
                Ok((n, outcome)) => {
                    server.stats.net_input_bytes.fetch_add(n as u64, Relaxed);
                    if n > 0 {
                        conn.client
                            .last_interaction_ms
                            .store(crate::clock::coarse_ms(), Relaxed);
                    }
                    match outcome {
                        ReadOutcome::Eof => conn.peer_closed = true,
                        ReadOutcome::MoreWaiting => {
                            // Parse what we have on the next turn, after the other connections
                            // of this thread had theirs.
                            self.again.push(token);
                            break;
                        }
                        ReadOutcome::Drained if n == 0 => break,
                        ReadOutcome::Drained => drained = true,
                    }
                }
                Err(_) => {
                    conn.peer_closed = true;
                    conn.close_after_write = true;
                    conn.write_failed = true;
                    break;
                }
            }
        }
        conn.client.qbuf.store(conn.query_len(), Relaxed);
        self.write_out(token);
    }

    /// Group commit for the writes this thread ran to completion: once per turn, makes them
    /// durable (one WAL write, or fsync with `always`, for all of them, as Redis writes its AOF
    /// before its replies), then lets out the replies that waited for it. If the WAL cannot be
    /// written, those clients are closed without their replies.
    fn flush_group(&mut self) {
        if self.unflushed.is_empty() {
            self.turn_failed = false;
            return;
        }
        if self.hand_to_sync_thread() {
            return;
        }
        let durable = self.server.storage.make_durable();
        if let Err(e) = &durable {
            tracing::error!(error = %e, "WAL flush failed; closing the clients it would acknowledge");
        }
        let failed = durable.is_err() || std::mem::take(&mut self.turn_failed);
        for token in std::mem::take(&mut self.unflushed) {
            if failed {
                if let Some(conn) = self.conns.get_mut(&token) {
                    conn.write_failed = true;
                    conn.close_after_write = true;
                }
            }
            self.write_out(token);
        }
    }

    /// With `appendfsync always` and `fsync-thread`, the group commit's fsync runs on the WAL's
    /// sync thread (`net::wal_sync`): the turn's connections wait, listed with the turn's
    /// latest WAL ticket, and this thread goes on serving; [`Self::release_synced`] lets them
    /// out once the sync covered them. False if this thread must flush the group itself.
    fn hand_to_sync_thread(&mut self) -> bool {
        let server = &self.server;
        if self.turn_failed
            || !server.config.fsync_thread.load(Relaxed)
            || server.storage.fsync_policy() != crate::storage::FsyncPolicy::Always
            || !server.storage.wal().grouped()
        {
            return false;
        }
        let ticket = server.storage.wal().take_pending_here();
        if ticket <= server.storage.wal().durable() {
            return false; // covered already: the flush below finds nothing to do
        }
        let tokens = std::mem::take(&mut self.unflushed);
        for token in &tokens {
            if let Some(conn) = self.conns.get_mut(token) {
                conn.sync_wait = ticket;
            }
        }
        self.syncing.push_back((ticket, tokens));
        server.wal_sync.request(ticket, self.index);
        true
    }

    /// Lets out the replies whose writes the WAL's sync thread made durable since this thread
    /// last looked (see [`Self::hand_to_sync_thread`]); closes, without their replies, the
    /// clients whose sync failed.
    fn release_synced(&mut self) {
        while let Some(&(ticket, _)) = self.syncing.front() {
            let durable = self.server.storage.wal().durable();
            let failed = ticket > durable && ticket <= self.server.wal_sync.failed_through();
            if ticket > durable && !failed {
                return;
            }
            let (_, tokens) = self.syncing.pop_front().expect("looked at above");
            for token in tokens {
                if let Some(conn) = self.conns.get_mut(&token) {
                    if conn.sync_wait <= ticket {
                        conn.sync_wait = 0;
                    }
                    if failed {
                        conn.write_failed = true;
                        conn.close_after_write = true;
                    }
                }
                self.write_out(token);
            }
        }
    }

    /// Flushes a connection's output, enforces its output limit, and closes it if it is done.
    /// While this thread has writes not yet in the WAL, the output waits for [`Self::flush_group`]
    /// at the end of the turn: it may hold their replies. A connection whose writes wait for
    /// the WAL's sync thread keeps its output until [`Self::release_synced`].
    fn write_out(&mut self, token: Token) {
        if self.server.storage.wal().pending_here() {
            if !self.unflushed.contains(&token) {
                self.unflushed.push(token);
            }
            return;
        }
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        if conn.sync_wait != 0 {
            return;
        }
        // Redis's client classes: a subscriber is limited as `pubsub`, others as `normal`.
        let class = if conn.client.subs.any() { 2 } else { 0 };
        let limit = self.server.config.client_output_buffer_limit.read()[class];
        if !conn.write_failed {
            match conn.flush() {
                Ok(n) => {
                    self.server
                        .stats
                        .net_output_bytes
                        .fetch_add(n as u64, Relaxed);
                    if n > 0 {
                        conn.client
                            .last_interaction_ms
                            .store(crate::clock::coarse_ms(), Relaxed);
                    }
                }
                Err(_) => {
                    conn.peer_closed = true;
                    conn.close_after_write = true;
                    conn.write_failed = true;
                }
            }
        }
        conn.client.obuf.store(conn.pending_output(), Relaxed);
        if !conn.close_after_write && conn.output_over_limit(limit) {
            tracing::warn!(client = %conn.client.addr, obuf = conn.pending_output(), "client scheduled to be closed for overcoming of output buffer limits");
            conn.close_after_write = true;
            conn.write_failed = true; // drop what is queued: the client is not reading it
        }
        let done = conn.close_after_write && (conn.pending_output() == 0 || conn.write_failed);
        if done && !conn.in_pool() {
            return self.close(token);
        }
        // Stopped for backpressure and now relieved (possibly by this very flush): nothing else
        // would drive it again, since its socket's readable edge may already have passed.
        if conn.throttled && conn.pending_output() <= OUTPUT_BACKPRESSURE {
            conn.throttled = false;
            self.again.push(token);
        }
    }

    fn on_writable(&mut self, token: Token) {
        self.write_out(token);
    }

    /// A pool job finished: take the session back, queue the replies, carry on.
    fn complete(&mut self, done: Completion) {
        let Some(conn) = self.conns.get_mut(&done.token) else {
            return;
        };
        let ran = done.ran;
        if !conn.write_failed {
            conn.queue_output(&ran.reply.buf);
        }
        if ran.session.close_after_reply {
            conn.close_after_write = true;
        } else {
            conn.leftover = ran.rest;
        }
        let mut session = ran.session;
        let handoff = session.handoff.take();
        conn.session = Some(session);
        if let Some(handoff) = handoff {
            return self.hand_off(done.token, handoff);
        }
        if conn.client.killed.load(Relaxed) {
            return self.close(done.token);
        }
        self.deliver(done.token);
        let Some(conn) = self.conns.get_mut(&done.token) else {
            return;
        };
        if conn.parked().is_some() {
            match conn.wake.take() {
                Some(reply) => {
                    // Served before this completion arrived.
                    if !conn.write_failed {
                        conn.queue_output(&reply);
                    }
                    if let Some(s) = conn.session.as_mut() {
                        s.blocked = None;
                    }
                }
                None => {
                    self.parked.insert(done.token);
                }
            }
        }
        self.drive(done.token);
    }

    /// Gives a connection's socket away (PSYNC: a replication feeder takes it), after writing
    /// the output still queued, in blocking mode. The connection is forgotten as if closed.
    fn hand_off(&mut self, token: Token, handoff: crate::session::Handoff) {
        let Some(mut conn) = self.conns.remove(&token) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.server.clients.remove(conn.client.id);
        self.by_id.remove(&conn.client.id);
        let (stream, pending) = conn.into_parts();
        let mut stream = std::net::TcpStream::from(stream);
        if stream.set_nonblocking(false).is_ok()
            && std::io::Write::write_all(&mut stream, &pending).is_ok()
        {
            (handoff.0)(stream);
        }
    }

    fn close(&mut self, token: Token) {
        if let Some(mut conn) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.server.clients.remove(conn.client.id);
            self.by_id.remove(&conn.client.id);
            if let Some(b) = conn.parked() {
                self.parked.remove(&token);
                // Claimed (a worker is serving it this very moment) cannot be undone: its reply
                // goes nowhere, as with a client that disconnects just after being served.
                self.server.blocking.cancel(b.waiter);
            }
        }
    }

    /// Closes clients idle for longer than `timeout` seconds (not blocked ones, not subscribers).
    fn close_idle(&mut self) {
        let timeout = self.server.config.timeout.load(Relaxed);
        if timeout == 0 {
            return;
        }
        let now = crate::clock::unix_ms();
        let idle: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                // Subscribers are never idle-closed, as in Redis (they only listen).
                !c.in_pool()
                    && c.parked().is_none()
                    && !c.client.subs.any()
                    && now.saturating_sub(c.client.last_interaction_ms.load(Relaxed))
                        > timeout * 1000
            })
            .map(|(t, _)| *t)
            .collect();
        for t in idle {
            self.close(t);
        }
    }

    /// One step of shutdown; true when this thread may exit. Listeners close first; connections
    /// whose runs are still in the pool are waited for so their replies go out.
    fn shutdown_step(&mut self) -> bool {
        for mut l in self.listeners.drain(..) {
            let _ = self.poll.registry().deregister(&mut l);
        }
        self.release_synced();
        if !self.syncing.is_empty() || self.conns.values().any(|c| c.in_pool()) {
            return false;
        }
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for t in tokens {
            if let Some(c) = self.conns.get_mut(&t) {
                if !c.write_failed {
                    let _ = c.flush();
                }
            }
            self.close(t);
        }
        true
    }
}

/// How long a connection stays on the I/O thread it moved to before it may move again
/// (`io-key-affinity`): one that writes two hot keys of different threads moves back and
/// forth at most this often.
const AFFINITY_STAY: Duration = Duration::from_secs(1);

/// The I/O thread a connection whose run stopped on a held key ([`Conn::retry`]) should move
/// to (`io-key-affinity`): the thread the key of the command it put off belongs to, if that is
/// another thread, the connection found the same key held the time before (a hot key, not two
/// writers meeting once on a random one) and it has not moved within [`AFFINITY_STAY`]. The
/// first time a command is put off counts; its tries again on later turns do not.
fn affinity_home(server: &Server, conn: &mut Conn, threads: usize, here: usize) -> Option<usize> {
    if threads < 2 || conn.retries > 1 || !server.config.io_key_affinity.load(Relaxed) {
        return None;
    }
    let session = conn.session.as_ref()?;
    let (db, key) = cmd::first_key(server, session, conn.retry.first()?)?;
    let hash = crate::fast_hash::key_hash(crate::fast_hash::process_seed(), db, key);
    if conn.contended_on.replace(hash) != Some(hash) {
        return None;
    }
    if conn.moved_at.is_some_and(|t| t.elapsed() < AFFINITY_STAY) {
        return None;
    }
    // Every thread computes the same home for a key.
    let home = (hash % threads as u64) as usize;
    (home != here).then_some(home)
}

/// Hands a run of one connection's commands to the pool as one job ([`run_commands`], the first
/// in `first_mode`), or to the slow lane if its first command has been taking long (outside a
/// transaction, where it would only be queued); the job posts the result back to the owning
/// I/O thread.
fn submit_run(
    server: &Arc<Server>,
    pool: &Arc<dyn Pool>,
    home: &Arc<IoHandle>,
    token: Token,
    session: Session,
    run: Vec<Vec<Bytes>>,
    first_mode: Mode,
) {
    let first = match (&session.multi, run.first()) {
        (None, Some(args)) => cmd::table().resolve(args).ok().map(|e| e.id),
        _ => None,
    };
    let job: crate::pool::Job = Box::new({
        let server = server.clone();
        let home = home.clone();
        let submitted = Instant::now();
        move || {
            let queue_wait = submitted.elapsed();
            let ran = run_commands(
                &server,
                session,
                run,
                first_mode,
                queue_wait,
                OUTPUT_BACKPRESSURE,
            );
            home.send(IoMsg::Done(Box::new(Completion { token, ran })));
        }
    });
    let slow_after_us = server.config.slow_lane_threshold_us.load(Relaxed);
    let job = match first {
        Some(id) => server.slow_lane.submit_if_slow(id, slow_after_us, job),
        None => Some(job),
    };
    if let Some(job) = job {
        pool.submit(job);
    }
}
