//! Running one test: client threads, each with a mio event loop over its share of the
//! connections, sending requests and timing replies into HDR histograms.
//!
//! # Model
//!
//! A *client* is one of the `-c` parallel clients. In plain mode it owns one connection, to
//! server `i % servers`; in cluster mode it owns one connection per node it has needed so far
//! and routes each request by the slot of its first key, following MOVED (which also updates
//! the thread's slot map) and ASK.
//!
//! - **Closed loop** (default, redis-benchmark's model): a client with nothing in flight sends
//!   `-P` requests in one write and waits for all their replies. Latency runs from the send.
//! - **Open loop** (`--rate R`): client `i` has a schedule of intended send times every
//!   `clients / R` seconds. It sends whatever is due while it has fewer than `-P` requests in
//!   flight, and each latency runs from the *intended* time, not from the actual send. A server
//!   that stalls therefore shows its stall in every request scheduled behind it instead of
//!   hiding it (coordinated omission).
//!
//! Every test stops: by a request count shared by all threads (`-n`, claimed with an atomic),
//! by time (`--duration`: no new request after the deadline, then the in-flight ones drain),
//! or with an error after 30 s without any reply. Replies are only scanned for their end and
//! error marker (see [`crate::reply`]); error replies are counted per test and a few are kept
//! as samples, they never stop the run.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use kvik_resp::{Frame, Limits};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::args::{Config, Stop};
use crate::cluster::{key_slot, parse_redirect, SLOTS};
use crate::reply::scan;
use crate::workload::{Encoder, Test};

/// How long a run may go without any reply before it fails.
const STALL_LIMIT: Duration = Duration::from_secs(30);
/// Connect and handshake timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Error replies kept as examples per test.
const ERROR_SAMPLES: usize = 5;
/// Redirects one request may follow before it counts as an error.
const MAX_HOPS: u8 = 5;

/// A new histogram in microseconds (1 µs .. 1 h, 3 significant digits).
pub fn histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("histogram bounds");
    h.auto(true);
    h
}

/// Where requests go: the servers, and in cluster mode the slot map (slot -> index in
/// `nodes`).
#[derive(Clone, Debug)]
pub struct Route {
    pub nodes: Vec<SocketAddr>,
    pub slots: Option<Vec<u16>>,
    /// Addresses a redirect may lead to besides loopback: the hosts the user named.
    pub allowed_ips: Vec<IpAddr>,
}

/// One op's share of a test's results.
#[derive(Debug)]
pub struct OpResult {
    pub name: String,
    pub requests: u64,
    pub errors: u64,
    pub hist: Histogram<u64>,
}

impl OpResult {
    /// One empty result per operation of `test`, in the test's order (each client thread's
    /// tallies and the merged totals start from this).
    fn empty_for(test: &Test) -> Vec<OpResult> {
        test.ops
            .iter()
            .map(|(o, _)| OpResult {
                name: o.name.clone(),
                requests: 0,
                errors: 0,
                hist: histogram(),
            })
            .collect()
    }
}

/// A finished test.
#[derive(Debug)]
pub struct TestResult {
    pub name: String,
    pub ops: Vec<OpResult>,
    pub total: Histogram<u64>,
    pub requests: u64,
    pub errors: u64,
    pub error_samples: Vec<String>,
    pub redirects: u64,
    pub seconds: f64,
}

impl TestResult {
    pub fn rps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.requests as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Counters shared by the threads of one test (and read by the progress line).
#[derive(Debug, Default)]
pub struct Shared {
    pub claimed: AtomicU64,
    pub done: AtomicU64,
    pub failed: AtomicBool,
    pub finished: AtomicUsize,
}

/// Sends `args` on a blocking stream and reads one whole reply.
pub fn query(s: &mut std::net::TcpStream, args: &[&[u8]]) -> Result<Frame, String> {
    let mut out = Vec::new();
    kvik_resp::encode::command(&mut out, args);
    s.write_all(&out).map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some((f, _)) =
            kvik_resp::parse_frame(&buf, &Limits::default()).map_err(|e| e.to_string())?
        {
            return Ok(f);
        }
        let n = s.read(&mut chunk).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("connection closed by server".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Opens a connection with timeouts, authenticates and selects the database.
pub fn handshake(addr: SocketAddr, cfg: &Config) -> Result<std::net::TcpStream, String> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| format!("Could not connect to server at {addr}: {e}"))?;
    s.set_read_timeout(Some(CONNECT_TIMEOUT)).ok();
    s.set_write_timeout(Some(CONNECT_TIMEOUT)).ok();
    s.set_nodelay(true).ok();
    if let Some(pw) = &cfg.password {
        let reply = match &cfg.user {
            Some(u) => query(&mut s, &[b"AUTH", u.as_bytes(), pw.as_bytes()])?,
            None => query(&mut s, &[b"AUTH", pw.as_bytes()])?,
        };
        if let Frame::Error(e) = reply {
            return Err(format!("AUTH failed on {addr}: {e}"));
        }
    }
    if cfg.dbnum != 0 {
        if let Frame::Error(e) = query(&mut s, &[b"SELECT", cfg.dbnum.to_string().as_bytes()])? {
            return Err(format!("SELECT failed on {addr}: {e}"));
        }
    }
    s.set_read_timeout(None).ok();
    s.set_write_timeout(None).ok();
    Ok(s)
}

#[derive(Debug)]
enum Kind {
    Normal,
    /// The reply to an ASKING we sent before a redirected request: dropped.
    Asking,
}

#[derive(Debug)]
struct Pending {
    intended: Instant,
    op: usize,
    client: usize,
    kind: Kind,
    hops: u8,
    /// The request bytes, kept in cluster mode to resend after a redirect.
    resend: Option<Vec<u8>>,
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    written: usize,
    inbuf: Vec<u8>,
    pending: VecDeque<Pending>,
    want_write: bool,
    dirty: bool,
}

#[derive(Debug)]
struct Client {
    /// Connection index per node.
    conns: Vec<Option<usize>>,
    home: usize,
    inflight: usize,
    next_due: Instant,
}

struct Worker<'a> {
    cfg: &'a Config,
    test: &'a Test,
    shared: &'a Shared,
    route: Route,
    poll: Poll,
    conns: Vec<Conn>,
    clients: Vec<Client>,
    dirty: Vec<usize>,
    enc: Encoder,
    rng: SmallRng,
    scratch: Vec<u8>,
    weight_total: u32,
    ops: Vec<OpResult>,
    errors_sample: Vec<String>,
    redirects: u64,
    last_reply: Option<Instant>,
    deadline: Option<Instant>,
    interval: Option<Duration>,
}

/// What one thread hands back.
#[derive(Debug)]
struct ThreadResult {
    ops: Vec<OpResult>,
    errors_sample: Vec<String>,
    redirects: u64,
    last_reply: Option<Instant>,
}

impl<'a> Worker<'a> {
    fn claim(&self, want: usize, now: Instant) -> usize {
        if self.shared.failed.load(Ordering::Relaxed) {
            return 0;
        }
        if matches!(self.deadline, Some(d) if now >= d) {
            return 0;
        }
        let limit = match self.cfg.stop {
            Stop::Count(n) => Some(n),
            Stop::Time(_, n) => n,
        };
        match limit {
            None => {
                self.shared
                    .claimed
                    .fetch_add(want as u64, Ordering::Relaxed);
                want
            }
            Some(limit) => {
                let prev =
                    self.shared
                        .claimed
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                            (c < limit).then(|| (c + want as u64).min(limit))
                        });
                match prev {
                    Ok(p) => (limit - p).min(want as u64) as usize,
                    Err(_) => 0,
                }
            }
        }
    }

    fn node_index(&mut self, addr: SocketAddr) -> Result<usize, String> {
        if let Some(i) = self.route.nodes.iter().position(|a| *a == addr) {
            return Ok(i);
        }
        if !addr.ip().is_loopback() && !self.route.allowed_ips.contains(&addr.ip()) {
            return Err(format!(
                "refusing redirect to {addr}: only loopback and the given hosts are reached"
            ));
        }
        self.route.nodes.push(addr);
        for c in &mut self.clients {
            c.conns.push(None);
        }
        Ok(self.route.nodes.len() - 1)
    }

    fn conn_for(&mut self, client: usize, node: usize) -> Result<usize, String> {
        if let Some(c) = self.clients[client].conns[node] {
            return Ok(c);
        }
        let s = handshake(self.route.nodes[node], self.cfg)?;
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        let mut stream = TcpStream::from_std(s);
        let idx = self.conns.len();
        self.poll
            .registry()
            .register(&mut stream, Token(idx), Interest::READABLE)
            .map_err(|e| e.to_string())?;
        self.conns.push(Conn {
            stream,
            out: Vec::with_capacity(16 * 1024),
            written: 0,
            inbuf: Vec::with_capacity(16 * 1024),
            pending: VecDeque::new(),
            want_write: false,
            dirty: false,
        });
        self.clients[client].conns[node] = Some(idx);
        Ok(idx)
    }

    fn pick_op(&mut self) -> usize {
        if self.test.ops.len() == 1 {
            return 0;
        }
        let mut r = self.rng.gen_range(0..self.weight_total);
        for (i, (_, w)) in self.test.ops.iter().enumerate() {
            if r < *w {
                return i;
            }
            r -= w;
        }
        self.test.ops.len() - 1
    }

    fn queue(&mut self, conn: usize, bytes: &[u8], p: Pending) {
        let c = &mut self.conns[conn];
        c.out.extend_from_slice(bytes);
        c.pending.push_back(p);
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(conn);
        }
    }

    fn send(&mut self, client: usize, intended: Instant) -> Result<(), String> {
        let op = self.pick_op();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let key = self
            .enc
            .encode(&self.test.ops[op].0, &mut scratch, &mut self.rng);
        let node = match (&self.route.slots, key) {
            (Some(slots), Some(k)) => slots[key_slot(&scratch[k]) as usize] as usize,
            (Some(_), None) => client % self.route.nodes.len(),
            (None, _) => self.clients[client].home,
        };
        let conn = self.conn_for(client, node)?;
        let resend = self.route.slots.is_some().then(|| scratch.clone());
        self.queue(
            conn,
            &scratch,
            Pending {
                intended,
                op,
                client,
                kind: Kind::Normal,
                hops: 0,
                resend,
            },
        );
        self.scratch = scratch;
        self.clients[client].inflight += 1;
        Ok(())
    }

    /// Sends what each client may send now; returns whether any client may still send later.
    fn issue(&mut self, now: Instant) -> Result<bool, String> {
        let p = self.cfg.pipeline;
        let mut more = false;
        for ci in 0..self.clients.len() {
            match self.interval {
                None => {
                    if self.clients[ci].inflight == 0 {
                        let k = self.claim(p, now);
                        for _ in 0..k {
                            self.send(ci, now)?;
                        }
                        more |= k > 0;
                    } else {
                        more = true;
                    }
                }
                Some(iv) => {
                    while self.clients[ci].inflight < p && self.clients[ci].next_due <= now {
                        if self.claim(1, now) == 0 {
                            break;
                        }
                        let due = self.clients[ci].next_due;
                        self.send(ci, due)?;
                        self.clients[ci].next_due = due + iv;
                    }
                    more |= self.claim_possible(now);
                }
            }
        }
        Ok(more)
    }

    fn claim_possible(&self, now: Instant) -> bool {
        if self.shared.failed.load(Ordering::Relaxed)
            || matches!(self.deadline, Some(d) if now >= d)
        {
            return false;
        }
        let limit = match self.cfg.stop {
            Stop::Count(n) => Some(n),
            Stop::Time(_, n) => n,
        };
        limit.is_none_or(|l| self.shared.claimed.load(Ordering::Relaxed) < l)
    }

    fn flush(&mut self, conn: usize) -> Result<(), String> {
        let c = &mut self.conns[conn];
        while c.written < c.out.len() {
            match c.stream.write(&c.out[c.written..]) {
                Ok(0) => return Err("server closed the connection".into()),
                Ok(n) => c.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        if c.written == c.out.len() {
            c.out.clear();
            c.written = 0;
        }
        let want = !c.out.is_empty();
        if want != c.want_write {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            self.poll
                .registry()
                .reregister(&mut c.stream, Token(conn), interest)
                .map_err(|e| e.to_string())?;
            c.want_write = want;
        }
        Ok(())
    }

    fn flush_dirty(&mut self) -> Result<(), String> {
        let dirty = std::mem::take(&mut self.dirty);
        for &c in &dirty {
            self.conns[c].dirty = false;
            self.flush(c)?;
        }
        self.dirty = dirty;
        self.dirty.clear();
        Ok(())
    }

    fn read(&mut self, conn: usize) -> Result<(), String> {
        let mut buf = std::mem::take(&mut self.conns[conn].inbuf);
        let mut closed = false;
        loop {
            if buf.capacity() - buf.len() < 16 * 1024 {
                buf.reserve(64 * 1024);
            }
            let len = buf.len();
            let cap = buf.capacity();
            buf.resize(cap, 0);
            match self.conns[conn].stream.read(&mut buf[len..]) {
                Ok(0) => {
                    buf.truncate(len);
                    closed = true;
                    break;
                }
                Ok(n) => buf.truncate(len + n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    buf.truncate(len);
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => buf.truncate(len),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        let now = Instant::now();
        let mut off = 0;
        while off < buf.len() {
            let Some(s) = scan(&buf[off..])? else {
                break;
            };
            self.reply(conn, &buf[off..off + s.len], s.error, now)?;
            off += s.len;
        }
        buf.drain(..off);
        self.conns[conn].inbuf = buf;
        if closed {
            return Err(format!(
                "server {} closed the connection",
                self.conns[conn]
                    .stream
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default()
            ));
        }
        Ok(())
    }

    fn reply(
        &mut self,
        conn: usize,
        reply: &[u8],
        error: bool,
        now: Instant,
    ) -> Result<(), String> {
        let p = self.conns[conn]
            .pending
            .pop_front()
            .ok_or("a reply arrived with no request waiting for it")?;
        if matches!(p.kind, Kind::Asking) {
            return Ok(());
        }
        self.last_reply = Some(now);
        let text = &reply[1..reply.len().saturating_sub(2).max(1)];
        if error && self.route.slots.is_some() && p.hops < MAX_HOPS {
            let from = self.conns[conn]
                .stream
                .peer_addr()
                .map(|a| a.ip())
                .unwrap_or(IpAddr::from([127, 0, 0, 1]));
            if let Some(r) = parse_redirect(text, from) {
                return self.redirect(p, r.slot, r.addr, r.ask);
            }
        }
        let us = now.saturating_duration_since(p.intended).as_micros().max(1) as u64;
        let o = &mut self.ops[p.op];
        o.hist.record(us).ok();
        o.requests += 1;
        if error {
            o.errors += 1;
            let msg = String::from_utf8_lossy(text);
            if self.errors_sample.len() < ERROR_SAMPLES
                && !self.errors_sample.iter().any(|s| *s == msg)
            {
                self.errors_sample.push(msg.into_owned());
            }
        }
        self.clients[p.client].inflight -= 1;
        self.shared.done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn redirect(
        &mut self,
        mut p: Pending,
        slot: u16,
        addr: SocketAddr,
        ask: bool,
    ) -> Result<(), String> {
        self.redirects += 1;
        let node = self.node_index(addr)?;
        if !ask {
            if let Some(slots) = self.route.slots.as_mut() {
                slots[slot as usize % SLOTS] = node as u16;
            }
        }
        let conn = self.conn_for(p.client, node)?;
        if ask {
            self.queue(
                conn,
                b"*1\r\n$6\r\nASKING\r\n",
                Pending {
                    intended: p.intended,
                    op: p.op,
                    client: p.client,
                    kind: Kind::Asking,
                    hops: 0,
                    resend: None,
                },
            );
        }
        p.hops += 1;
        let bytes = p.resend.take().unwrap_or_default();
        p.resend = Some(bytes.clone());
        self.queue(conn, &bytes, p);
        Ok(())
    }

    fn inflight(&self) -> usize {
        self.clients.iter().map(|c| c.inflight).sum()
    }

    fn next_wait(&self, now: Instant) -> Duration {
        let mut wait = Duration::from_millis(100);
        if let Some(d) = self.deadline {
            wait = wait.min(d.saturating_duration_since(now));
        }
        if self.interval.is_some() {
            for c in &self.clients {
                if c.inflight < self.cfg.pipeline {
                    wait = wait.min(c.next_due.saturating_duration_since(now));
                }
            }
        }
        wait
    }

    fn run(&mut self, start: Instant) -> Result<(), String> {
        // Spread the clients' first sends over one interval.
        let (interval, n) = (self.interval, self.clients.len());
        for (i, c) in self.clients.iter_mut().enumerate() {
            c.next_due = start
                + interval
                    .map(|iv| iv.mul_f64(i as f64 / n as f64))
                    .unwrap_or_default();
        }
        let mut events = Events::with_capacity(1024);
        let mut last_progress = start;
        let mut done_before = 0u64;
        loop {
            let now = Instant::now();
            let more = self.issue(now)?;
            self.flush_dirty()?;
            if !more && self.inflight() == 0 {
                return Ok(());
            }
            if self.shared.failed.load(Ordering::Relaxed) {
                return Err("stopped: another thread failed".into());
            }
            let wait = self.next_wait(now);
            let timeout = if wait >= Duration::from_millis(1) {
                wait
            } else {
                Duration::ZERO
            };
            self.poll
                .poll(&mut events, Some(timeout))
                .map_err(|e| format!("poll: {e}"))?;
            if events.is_empty() && timeout.is_zero() && !wait.is_zero() {
                // Under a millisecond to the next send: epoll cannot wait that precisely.
                std::thread::sleep(wait.min(Duration::from_micros(50)));
            }
            for ev in events.iter() {
                let c = ev.token().0;
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.read(c)?;
                }
                if ev.is_writable() {
                    self.flush(c)?;
                }
            }
            let done = self.ops.iter().map(|o| o.requests).sum::<u64>();
            let now = Instant::now();
            if done != done_before || self.inflight() == 0 {
                done_before = done;
                last_progress = now;
            } else if now.duration_since(last_progress) > STALL_LIMIT {
                return Err(format!(
                    "no reply for {} s with {} requests in flight",
                    STALL_LIMIT.as_secs(),
                    self.inflight()
                ));
            }
        }
    }
}

/// Runs `test` with the configuration's clients and threads; `progress` is called about every
/// 250 ms on the calling thread with (requests done, seconds elapsed).
pub fn run_test(
    cfg: &Config,
    test: &Test,
    route: &Route,
    mut progress: impl FnMut(u64, f64),
) -> Result<TestResult, String> {
    let shared = Shared::default();
    let threads = cfg.threads;
    let barrier = Barrier::new(threads + 1);
    let interval = cfg
        .rate
        .map(|r| Duration::from_secs_f64(cfg.clients as f64 / r));
    let seed = cfg.seed.unwrap_or_else(rand::random);
    let weight_total: u32 = test.ops.iter().map(|(_, w)| *w).sum();
    let (results, start) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (shared, barrier, route) = (&shared, &barrier, route.clone());
                scope.spawn(move || {
                    let r = run_thread(
                        cfg,
                        test,
                        shared,
                        barrier,
                        route,
                        t,
                        seed,
                        interval,
                        weight_total,
                    );
                    if r.is_err() {
                        shared.failed.store(true, Ordering::Relaxed);
                    }
                    shared.finished.fetch_add(1, Ordering::Relaxed);
                    r
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut shown = start;
        while shared.finished.load(Ordering::Relaxed) < threads {
            std::thread::sleep(Duration::from_millis(25));
            if shown.elapsed() >= Duration::from_millis(250) {
                shown = Instant::now();
                progress(
                    shared.done.load(Ordering::Relaxed),
                    start.elapsed().as_secs_f64(),
                );
            }
        }
        let results: Vec<Result<ThreadResult, String>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect();
        (results, start)
    });
    let run_len = start.elapsed();
    let mut total = histogram();
    let mut ops = OpResult::empty_for(test);
    let mut samples = Vec::new();
    let mut redirects = 0;
    let mut last: Option<Instant> = None;
    for r in results {
        let r = r?;
        for (acc, o) in ops.iter_mut().zip(r.ops) {
            acc.requests += o.requests;
            acc.errors += o.errors;
            acc.hist.add(&o.hist).ok();
        }
        for s in r.errors_sample {
            if samples.len() < ERROR_SAMPLES && !samples.contains(&s) {
                samples.push(s);
            }
        }
        redirects += r.redirects;
        last = last.max(r.last_reply);
    }
    for o in &ops {
        total.add(&o.hist).ok();
    }
    let seconds = last
        .map(|l| l.saturating_duration_since(start).as_secs_f64())
        .unwrap_or(run_len.as_secs_f64());
    Ok(TestResult {
        name: test.name.clone(),
        requests: ops.iter().map(|o| o.requests).sum(),
        errors: ops.iter().map(|o| o.errors).sum(),
        ops,
        total,
        error_samples: samples,
        redirects,
        seconds,
    })
}

#[allow(clippy::too_many_arguments)]
fn run_thread(
    cfg: &Config,
    test: &Test,
    shared: &Shared,
    barrier: &Barrier,
    route: Route,
    t: usize,
    seed: u64,
    interval: Option<Duration>,
    weight_total: u32,
) -> Result<ThreadResult, String> {
    let setup = || -> Result<Worker<'_>, String> {
        let nodes = route.nodes.len();
        let mut w = Worker {
            cfg,
            test,
            shared,
            poll: Poll::new().map_err(|e| e.to_string())?,
            conns: Vec::new(),
            clients: Vec::new(),
            dirty: Vec::new(),
            enc: Encoder::new(cfg, t),
            rng: SmallRng::seed_from_u64(seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            scratch: Vec::new(),
            weight_total: weight_total.max(1),
            ops: OpResult::empty_for(test),
            errors_sample: Vec::new(),
            redirects: 0,
            last_reply: None,
            deadline: None,
            interval,
            route,
        };
        // Client i of the whole run belongs to thread i % threads.
        for i in (t..cfg.clients).step_by(cfg.threads) {
            w.clients.push(Client {
                conns: vec![None; nodes],
                home: i % nodes,
                inflight: 0,
                next_due: Instant::now(),
            });
        }
        // Connect up front (in cluster mode to every master), so connection setup is not
        // timed; nodes a redirect reveals later are connected when first needed.
        for c in 0..w.clients.len() {
            if w.route.slots.is_some() {
                for node in 0..nodes {
                    w.conn_for(c, node)?;
                }
            } else {
                let home = w.clients[c].home;
                w.conn_for(c, home)?;
            }
        }
        Ok(w)
    };
    let w = setup();
    barrier.wait();
    let mut w = w?;
    let start = Instant::now();
    if let Stop::Time(d, _) = cfg.stop {
        w.deadline = Some(start + d);
    }
    w.run(start)?;
    Ok(ThreadResult {
        ops: w.ops,
        errors_sample: w.errors_sample,
        redirects: w.redirects,
        last_reply: w.last_reply,
    })
}
