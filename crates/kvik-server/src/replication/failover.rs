//! FAILOVER (standalone, as Redis 7.0): pause writes, wait until a replica acknowledged
//! everything, promote it (REPLICAOF NO ONE over its client port), then follow it. The old
//! history's id becomes the new primary's `master_replid2` at exactly this node's offset, so
//! this node continues without a full sync. A thread of its own runs it; FAILOVER replies at
//! once, as Redis does, and INFO shows `master_failover_state`.

use crate::server::Server;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a write waits while writes are paused, at most (then it runs, or, if the node has
/// become a replica meanwhile, gets READONLY).
pub const MAX_PAUSE: Duration = Duration::from_secs(10);

/// How long the offset must stay unchanged before the replica is promoted.
const SETTLE: Duration = Duration::from_millis(100);

const NONE: u8 = 0;
const WAITING: u8 = 1;
const IN_PROGRESS: u8 = 2;

/// The failover in progress, if any.
#[derive(Default)]
pub struct Failover {
    state: AtomicU8,
    paused: AtomicBool,
    abort: AtomicBool,
}

/// FAILOVER's options.
pub struct Request {
    pub target: Option<(String, u16)>,
    pub timeout: Option<Duration>,
    pub force: bool,
}

impl Failover {
    /// INFO's `master_failover_state`.
    pub fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            WAITING => "waiting-for-sync",
            IN_PROGRESS => "failover-in-progress",
            _ => "no-failover",
        }
    }

    /// Blocks a write while writes are paused (bounded by [`MAX_PAUSE`]).
    pub fn wait_if_paused(&self) {
        if !self.paused.load(Ordering::Acquire) {
            return;
        }
        let until = Instant::now() + MAX_PAUSE;
        while self.paused.load(Ordering::Acquire) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether writes are paused: the timer's own writes (active expiry, the counts' fold)
    /// pause too, so the offset the replica must reach stays put.
    pub fn writes_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    /// FAILOVER ABORT.
    pub fn abort(&self) -> Result<(), &'static str> {
        if self.state.load(Ordering::Relaxed) == NONE {
            return Err("No failover in progress.");
        }
        self.abort.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Checks `req` and starts the failover thread.
    pub fn start(server: &Arc<Server>, req: Request) -> Result<(), &'static str> {
        let repl = &server.repl;
        let f = &repl.failover;
        if repl.is_replica() {
            return Err("FAILOVER is not valid when server is a replica.");
        }
        if req.force && (req.target.is_none() || req.timeout.is_none()) {
            return Err(
                "FAILOVER with force option requires both a timeout and target HOST and IP.",
            );
        }
        let replicas = repl.snapshot(&server.storage).replicas;
        if replicas.is_empty() {
            return Err("FAILOVER requires connected replicas.");
        }
        if let Some((host, port)) = &req.target {
            if !replicas.iter().any(|r| &r.ip == host && r.port == *port) {
                return Err("FAILOVER target HOST and PORT is not a replica.");
            }
        }
        if f.state
            .compare_exchange(NONE, WAITING, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err("FAILOVER already in progress.");
        }
        f.abort.store(false, Ordering::SeqCst);
        f.paused.store(true, Ordering::SeqCst);
        let server = server.clone();
        let spawned = std::thread::Builder::new()
            .name("kvik-failover".into())
            .spawn(move || {
                let f = &server.repl.failover;
                if let Err(e) = run(&server, req) {
                    tracing::warn!(error = %e, "failover aborted");
                }
                f.paused.store(false, Ordering::SeqCst);
                f.state.store(NONE, Ordering::SeqCst);
            });
        if spawned.is_err() {
            f.paused.store(false, Ordering::SeqCst);
            f.state.store(NONE, Ordering::SeqCst);
        }
        Ok(())
    }
}

fn run(server: &Arc<Server>, req: Request) -> Result<(), String> {
    let repl = &server.repl;
    let f = &repl.failover;
    let deadline = req.timeout.map(|t| Instant::now() + t);
    // Wait until a replica acknowledged every write (writes already admitted may still
    // commit after the pause began, so the offset is read again each round).
    // The offset must also have stopped moving for a while (a timer write that began before
    // the pause may still land).
    let mut last = (server.storage.latest_seq(), Instant::now());
    let target = loop {
        if f.abort.load(Ordering::SeqCst) {
            return Err("FAILOVER ABORT".into());
        }
        let offset = server.storage.latest_seq();
        if offset != last.0 {
            last = (offset, Instant::now());
        }
        let settled = last.1.elapsed() >= SETTLE;
        let replicas = repl.snapshot(&server.storage).replicas;
        let caught_up = replicas.iter().find(|r| {
            r.ack >= offset
                && req
                    .target
                    .as_ref()
                    .is_none_or(|(h, p)| &r.ip == h && r.port == *p)
        });
        if let (Some(r), true) = (caught_up, settled) {
            break (r.ip.clone(), r.port);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            match (&req.target, req.force) {
                (Some(t), true) => break t.clone(),
                _ => return Err("no replica caught up before the timeout".into()),
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    f.state.store(IN_PROGRESS, Ordering::SeqCst);
    promote_remote(server, &target)
        .map_err(|e| format!("promoting {}:{}: {e}", target.0, target.1))?;
    *server.config.repl.replicaof.write() = Some(target.clone());
    repl.follow(server, target.0.clone(), target.1, None);
    tracing::info!(primary = %format!("{}:{}", target.0, target.1), "failover done: now a replica");
    Ok(())
}

/// Sends `REPLICAOF NO ONE` to the replica at `target` (authenticating with `masterauth`).
fn promote_remote(server: &Server, target: &(String, u16)) -> std::io::Result<()> {
    // Every step bounded: a target that does not answer fails the FAILOVER instead of
    // holding it (and the primary's paused writes) until the kernel gives up on the connect.
    let timeout = Duration::from_secs(10);
    let addr = (target.0.as_str(), target.1)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))?;
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    let mut send = |args: &[&str]| -> std::io::Result<String> {
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        w.write_all(req.as_bytes())?;
        let mut line = String::new();
        r.read_line(&mut line)?;
        if line.starts_with('+') {
            Ok(line)
        } else {
            Err(std::io::Error::other(line.trim_end().to_string()))
        }
    };
    let auth = server.config.repl.masterauth.read().clone();
    if let Some(pass) = auth {
        send(&["AUTH", &pass])?;
    }
    send(&["REPLICAOF", "NO", "ONE"])?;
    Ok(())
}
