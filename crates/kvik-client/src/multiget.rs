//! Concurrent multi-server multi-get: write to every server first, then drain every socket in
//! one readiness loop under one deadline.
//!
//! DESIGN
//!
//! A multi-get is split into one job per server (ring owner, or cluster node), each a run of
//! `MGET` commands of at most `chunk` keys (one per slot for a cluster). Every job gets a
//! non-blocking socket: an idle one from the server's small pool, or a fresh non-blocking
//! connect whose handshake commands (HELLO/AUTH/SETNAME/SELECT) are simply written ahead of the
//! MGETs and their replies checked first. All sockets are registered with one `mio::Poll`, and
//! the loop writes whatever each socket accepts and reads whatever each has, so a server never
//! waits on us and a large request never deadlocks against a large reply. One deadline bounds
//! the whole call.
//!
//! Outcome per server: `Ok` (all replies read, socket back to the pool), `TimedOut` (deadline
//! passed; the socket is dropped since its stream is no longer in step), `Failed` (connect
//! error, reset, EOF mid-reply, protocol error, error reply; the server is marked down), or
//! `Down` (skipped: marked down and its backoff has not elapsed). Keys of completed MGETs keep
//! their values even if a later chunk of the same server failed; every other key of a server
//! that did not finish is [`KeyOutcome::Unknown`]. One server's failure never hides another's
//! results.
//!
//! Health: a failure marks the server down for `down_backoff * 2^(failures-1)` (capped by
//! `max_down_backoff`); after that the next call tries it again, and a success clears it. A
//! timeout alone does not mark a server down (a slow server is not a dead one); its socket is
//! closed and the next call starts a fresh one.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use kvik_resp::{parse_frame, Frame, Limits};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use parking_lot::Mutex;

use crate::client::Client;
use crate::cmd::Cmd;
use crate::conn::{error_text, handshake_cmds};
use crate::options::ConnectOptions;

/// What a multi-get learned about one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyOutcome {
    /// The key exists; its value.
    Hit(Vec<u8>),
    /// The server answered: no such key (or not a string).
    Miss,
    /// Its server did not answer in time, failed, or is down: see [`MultiGet::servers`].
    Unknown,
}

impl KeyOutcome {
    /// The value, if the key was found.
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            KeyOutcome::Hit(v) => Some(v),
            _ => None,
        }
    }
}

/// How one server fared in a multi-get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerStatus {
    /// Every reply arrived.
    Ok,
    /// The deadline passed before all replies arrived.
    TimedOut,
    /// Connect error, broken connection, protocol error or error reply; the text says which.
    /// The server is now marked down.
    Failed(String),
    /// Skipped: marked down after an earlier failure, backoff not over.
    Down,
}

/// One server's part in a multi-get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerReport {
    /// The server's address.
    pub addr: String,
    /// How many of the requested keys it owns.
    pub keys: usize,
    /// How it fared.
    pub status: ServerStatus,
}

/// The result of a multi-get: one outcome per requested key (same order) and one report per
/// server that owned at least one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiGet {
    /// Per key, in request order.
    pub values: Vec<KeyOutcome>,
    /// Per server involved.
    pub servers: Vec<ServerReport>,
}

impl MultiGet {
    /// True when every server answered (every key is a hit or a miss).
    pub fn is_complete(&self) -> bool {
        self.servers.iter().all(|s| s.status == ServerStatus::Ok)
    }

    /// The value of the `i`-th requested key, if found.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.values.get(i).and_then(KeyOutcome::value)
    }

    /// How many keys were found.
    pub fn hits(&self) -> usize {
        self.values
            .iter()
            .filter(|v| matches!(v, KeyOutcome::Hit(_)))
            .count()
    }

    /// How many keys have no answer.
    pub fn unknown(&self) -> usize {
        self.values
            .iter()
            .filter(|v| matches!(v, KeyOutcome::Unknown))
            .count()
    }
}

#[derive(Debug, Default)]
struct Health {
    failures: u32,
    down_until: Option<Instant>,
}

/// One server as the sharded and cluster clients see it: a shared auto-batch client for
/// single-key commands, a pool of idle non-blocking sockets for multi-gets, and its health.
#[derive(Debug)]
pub(crate) struct ServerHandle {
    pub(crate) addr: String,
    pub(crate) client: Client,
    opts: ConnectOptions,
    pool: Mutex<Vec<TcpStream>>,
    health: Mutex<Health>,
    down_backoff: Duration,
    max_down_backoff: Duration,
}

/// Idle multi-get sockets kept per server.
const POOL_MAX: usize = 4;

impl ServerHandle {
    pub(crate) fn new(
        addr: &str,
        opts: &ConnectOptions,
        down_backoff: Duration,
        max_down_backoff: Duration,
    ) -> ServerHandle {
        ServerHandle {
            addr: addr.to_string(),
            client: Client::lazy(addr, opts.clone()),
            opts: opts.clone(),
            pool: Mutex::new(Vec::new()),
            health: Mutex::new(Health::default()),
            down_backoff,
            max_down_backoff,
        }
    }

    /// True while the server is marked down.
    pub(crate) fn is_down(&self, now: Instant) -> bool {
        self.health.lock().down_until.is_some_and(|t| now < t)
    }

    pub(crate) fn mark_failed(&self) {
        let mut h = self.health.lock();
        h.failures = h.failures.saturating_add(1);
        let exp = (h.failures - 1).min(16);
        let backoff = self
            .down_backoff
            .saturating_mul(1u32 << exp)
            .min(self.max_down_backoff);
        h.down_until = Some(Instant::now() + backoff);
        self.pool.lock().clear();
    }

    pub(crate) fn mark_ok(&self) {
        let mut h = self.health.lock();
        if h.failures != 0 || h.down_until.is_some() {
            *h = Health::default();
        }
    }
}

/// One server's share of a multi-get: MGETs, each a list of key indexes.
pub(crate) struct Job<'a> {
    pub(crate) server: &'a ServerHandle,
    pub(crate) mgets: Vec<Vec<usize>>,
}

enum Expect {
    Handshake,
    Mget(usize),
}

struct Active {
    job: usize,
    stream: TcpStream,
    connecting: bool,
    out: Vec<u8>,
    written: usize,
    inbuf: Vec<u8>,
    start: usize,
    expect: VecDeque<Expect>,
    done: Option<ServerStatus>,
    /// Taken from the pool (may have gone stale while idle).
    reused: bool,
    received: usize,
}

/// Error replies to individual MGETs (e.g. `MOVED` in a cluster), by (job, mget index).
pub(crate) type MgetErrors = Vec<(usize, usize, String)>;

/// Runs the jobs; `keys` are all requested keys, `values` is filled for the jobs' keys.
pub(crate) fn run(
    keys: &[&[u8]],
    jobs: &[Job<'_>],
    deadline: Instant,
    values: &mut [KeyOutcome],
) -> (Vec<ServerReport>, MgetErrors) {
    let mut reports: Vec<ServerReport> = jobs
        .iter()
        .map(|j| ServerReport {
            addr: j.server.addr.clone(),
            keys: j.mgets.iter().map(Vec::len).sum(),
            status: ServerStatus::TimedOut,
        })
        .collect();
    let mut mget_errors = Vec::new();
    let mut poll = match Poll::new() {
        Ok(p) => p,
        Err(e) => {
            for r in &mut reports {
                r.status = ServerStatus::Failed(format!("poll: {e}"));
            }
            return (reports, mget_errors);
        }
    };
    let now = Instant::now();
    let mut active: Vec<Active> = Vec::new();
    for (ji, job) in jobs.iter().enumerate() {
        if job.server.is_down(now) {
            reports[ji].status = ServerStatus::Down;
            continue;
        }
        let mut expect = VecDeque::new();
        let mut out = Vec::new();
        let (stream, connecting) = match job.server.pool.lock().pop() {
            Some(s) => (s, false),
            None => match open(&job.server.addr) {
                Ok(s) => {
                    for c in handshake_cmds(&job.server.opts) {
                        c.encode(&mut out);
                        expect.push_back(Expect::Handshake);
                    }
                    (s, true)
                }
                Err(e) => {
                    reports[ji].status = ServerStatus::Failed(e);
                    job.server.mark_failed();
                    continue;
                }
            },
        };
        encode_mgets(keys, job, &mut out, &mut expect);
        let mut a = Active {
            job: ji,
            stream,
            connecting,
            out,
            written: 0,
            inbuf: Vec::new(),
            start: 0,
            expect,
            done: None,
            reused: !connecting,
            received: 0,
        };
        let token = Token(active.len());
        if let Err(e) = poll.registry().register(
            &mut a.stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            reports[ji].status = ServerStatus::Failed(format!("register: {e}"));
            continue;
        }
        active.push(a);
    }

    let limits = Limits::default();
    let mut events = Events::with_capacity(64);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut pending = active.len();
    while pending > 0 {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if let Err(e) = poll.poll(&mut events, Some(deadline - now)) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        for ev in events.iter() {
            let a = &mut active[ev.token().0];
            if a.done.is_some() {
                continue;
            }
            let job = &jobs[a.job];
            let mut status = step(a, job, values, &limits, &mut chunk, &mut mget_errors);
            if matches!(status, Some(ServerStatus::Failed(_))) && a.reused && a.received == 0 {
                // An idle pooled socket the server closed meanwhile: retry once on a fresh
                // connection instead of blaming the server.
                let _ = poll.registry().deregister(&mut a.stream);
                a.reused = false;
                status = match open(&job.server.addr) {
                    Ok(s) => {
                        a.stream = s;
                        a.connecting = true;
                        let mut out = Vec::new();
                        let mut expect = VecDeque::new();
                        for c in handshake_cmds(&job.server.opts) {
                            c.encode(&mut out);
                            expect.push_back(Expect::Handshake);
                        }
                        encode_mgets(keys, job, &mut out, &mut expect);
                        a.out = out;
                        a.expect = expect;
                        a.written = 0;
                        a.inbuf.clear();
                        a.start = 0;
                        match poll.registry().register(
                            &mut a.stream,
                            ev.token(),
                            Interest::READABLE | Interest::WRITABLE,
                        ) {
                            Ok(()) => None,
                            Err(e) => Some(ServerStatus::Failed(format!("register: {e}"))),
                        }
                    }
                    Err(e) => Some(ServerStatus::Failed(e)),
                };
            }
            if let Some(st) = status {
                a.done = Some(st);
                pending -= 1;
            }
        }
    }

    for mut a in active {
        let job = &jobs[a.job];
        match a.done.take() {
            Some(ServerStatus::Ok) => {
                reports[a.job].status = ServerStatus::Ok;
                job.server.mark_ok();
                let _ = poll.registry().deregister(&mut a.stream);
                let mut pool = job.server.pool.lock();
                if pool.len() < POOL_MAX {
                    pool.push(a.stream);
                }
            }
            Some(st) => {
                if matches!(st, ServerStatus::Failed(_)) {
                    job.server.mark_failed();
                }
                reports[a.job].status = st;
            }
            None => reports[a.job].status = ServerStatus::TimedOut,
        }
    }
    (reports, mget_errors)
}

fn encode_mgets(keys: &[&[u8]], job: &Job<'_>, out: &mut Vec<u8>, expect: &mut VecDeque<Expect>) {
    for (mi, idxs) in job.mgets.iter().enumerate() {
        let mut c = Cmd::new("MGET");
        idxs.iter().for_each(|&k| c.push_arg(keys[k]));
        c.encode(out);
        expect.push_back(Expect::Mget(mi));
    }
}

fn open(addr: &str) -> std::result::Result<TcpStream, String> {
    let sa: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| format!("resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("resolve {addr}: no address"))?;
    let s = TcpStream::connect(sa).map_err(|e| format!("connect to {addr}: {e}"))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// Advances one socket on a readiness event; returns its final status once finished.
fn step(
    a: &mut Active,
    job: &Job<'_>,
    values: &mut [KeyOutcome],
    limits: &Limits,
    chunk: &mut [u8],
    mget_errors: &mut MgetErrors,
) -> Option<ServerStatus> {
    let addr = &job.server.addr;
    if a.connecting {
        if let Ok(Some(e)) | Err(e) = a.stream.take_error() {
            return Some(ServerStatus::Failed(format!("connect to {addr}: {e}")));
        }
        match a.stream.peer_addr() {
            Ok(_) => a.connecting = false,
            Err(e) if e.kind() == ErrorKind::NotConnected => return None,
            Err(e) => return Some(ServerStatus::Failed(format!("connect to {addr}: {e}"))),
        }
    }
    // Write whatever the socket takes.
    while a.written < a.out.len() {
        match a.stream.write(&a.out[a.written..]) {
            Ok(0) => return Some(ServerStatus::Failed(format!("write to {addr}: closed"))),
            Ok(n) => a.written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Some(ServerStatus::Failed(format!("write to {addr}: {e}"))),
        }
    }
    // Read whatever has arrived (edge-triggered: until WouldBlock).
    let mut eof = false;
    loop {
        match a.stream.read(chunk) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => {
                a.received += n;
                a.inbuf.extend_from_slice(&chunk[..n]);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Some(ServerStatus::Failed(format!("read from {addr}: {e}"))),
        }
    }
    loop {
        let frame = match parse_frame(&a.inbuf[a.start..], limits) {
            Ok(Some((f, used))) => {
                a.start += used;
                f
            }
            Ok(None) => break,
            Err(e) => return Some(ServerStatus::Failed(format!("bad reply from {addr}: {e}"))),
        };
        if matches!(frame, Frame::Push(_)) {
            continue;
        }
        match a.expect.pop_front() {
            None => {
                return Some(ServerStatus::Failed(format!(
                    "{addr} sent a reply with no command pending"
                )))
            }
            Some(Expect::Handshake) => {
                if let Some(e) = error_text(&frame) {
                    return Some(ServerStatus::Failed(format!("{addr}: {e}")));
                }
            }
            Some(Expect::Mget(mi)) => {
                let idxs = &job.mgets[mi];
                match frame {
                    Frame::Array(items) if items.len() == idxs.len() => {
                        for (item, &k) in items.into_iter().zip(idxs) {
                            values[k] = match item {
                                Frame::Bulk(b) => KeyOutcome::Hit(b),
                                _ => KeyOutcome::Miss,
                            };
                        }
                    }
                    other => match error_text(&other) {
                        Some(e) => mget_errors.push((a.job, mi, e)),
                        None => {
                            return Some(ServerStatus::Failed(format!(
                                "{addr}: MGET of {} keys replied {other:?}",
                                idxs.len()
                            )))
                        }
                    },
                }
            }
        }
    }
    if a.start == a.inbuf.len() {
        a.inbuf.clear();
        a.start = 0;
    }
    if a.expect.is_empty() && a.written == a.out.len() {
        return Some(ServerStatus::Ok);
    }
    if eof {
        let when = if a.received == 0 {
            "before replying"
        } else {
            "in the middle of a reply"
        };
        return Some(ServerStatus::Failed(format!(
            "{addr} closed the connection {when}"
        )));
    }
    None
}
