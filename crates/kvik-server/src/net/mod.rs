//! Networking: listeners, I/O threads and connections.
//!
//! `io-threads` event loops (mio) each own a set of connections. I/O thread 0 also owns the
//! listening sockets and deals new connections out round-robin. Each I/O thread reads its
//! sockets, parses every complete request in the buffer (pipelining), hands the run of commands
//! to the worker pool as one job, and writes the replies back when the job posts them to its
//! inbox ([`IoHandle`]: an MPSC channel plus a mio waker).
//!
//! Robustness rules, each covered by an integration test (tests/it/protocol.rs):
//! - a protocol error is answered with Redis's `-ERR Protocol error: ...` after the requests
//!   before it have run, and the connection is closed once the reply is out;
//! - memory per client is bounded on both sides: the query buffer by
//!   `client-query-buffer-limit`, the output by backpressure (a job stops once its replies pass
//!   [`conn::OUTPUT_BACKPRESSURE`] and the rest of its commands wait until the client reads) and
//!   by `client-output-buffer-limit`;
//! - on shutdown no new command starts; runs already in the pool finish and their replies are
//!   flushed before the connections close.

mod balance;
mod conn;
mod io_thread;
mod wal_sync;

pub use balance::Balance;
pub(crate) use wal_sync::{spawn as spawn_wal_sync, WalSync};

pub use conn::{parse_requests, SpareArgs};

use crate::cmd::run::Ran;
use crate::pool::Pool;
use crate::server::Server;
use crossbeam_channel::{Receiver, Sender};
use mio::{Token, Waker};
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Messages an I/O thread receives from other threads.
pub(crate) enum IoMsg {
    /// A freshly accepted connection to adopt.
    NewConn(mio::net::TcpStream, SocketAddr),
    /// A pool job finished a run of this connection's commands (boxed: a session is big, the
    /// other messages are small).
    Done(Box<Completion>),
    /// CLIENT KILL of this client id.
    Kill(u64),
    /// The blocked command of this client id was served (or unblocked): its reply. It may
    /// arrive before the completion of the job that blocked it.
    Unblocked(u64, Vec<u8>),
    /// Client id's pub/sub mailbox has messages to move to its output.
    Deliver(u64),
    /// A connection another I/O thread gave up to this one (`io-key-affinity`): its
    /// commands put off by a held key run here next (boxed: a connection is big).
    Moved(Box<conn::Conn>),
}

/// What a pool job sends back: the connection it ran for, and what running its commands gave
/// (the session it borrowed, the replies, the commands left for later).
pub(crate) struct Completion {
    pub token: Token,
    pub ran: Ran,
}

/// The inbox of one I/O thread, usable from any thread.
pub struct IoHandle {
    tx: Sender<IoMsg>,
    waker: Waker,
}

impl std::fmt::Debug for IoHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IoHandle")
    }
}

impl IoHandle {
    fn send(&self, msg: IoMsg) {
        // The receiver lives as long as the I/O thread; after it exits there is nobody to tell.
        let _ = self.tx.send(msg);
        self.wake();
    }

    /// Wakes the I/O thread so it re-checks shared state (shutdown).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }
}

impl crate::clients::ClientIo for IoHandle {
    fn notify_kill(&self, id: u64) {
        self.send(IoMsg::Kill(id));
    }

    fn notify_unblocked(&self, id: u64, reply: Vec<u8>) {
        self.send(IoMsg::Unblocked(id, reply));
    }

    fn notify_pubsub(&self, id: u64) {
        self.send(IoMsg::Deliver(id));
    }

    fn wake(&self) {
        IoHandle::wake(self);
    }
}

/// The running network side.
pub struct Net {
    pub handles: Vec<Arc<IoHandle>>,
    threads: Vec<JoinHandle<()>>,
}

impl Net {
    /// Waits until every I/O thread has exited (after shutdown).
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Binds the listeners and starts the I/O threads.
pub fn start(server: Arc<Server>, pool: Arc<dyn Pool>) -> Result<Net, String> {
    let port = server
        .config
        .port
        .load(std::sync::atomic::Ordering::Relaxed) as u16;
    let mut listeners = Vec::new();
    let mut bound_port = port;
    for addr in server.config.bind.read().iter() {
        let addr = addr.trim_start_matches('-');
        let ip: std::net::IpAddr = addr
            .parse()
            .map_err(|_| format!("invalid bind address '{addr}'"))?;
        let sock = SocketAddr::new(ip, bound_port);
        let l = std::net::TcpListener::bind(sock)
            .map_err(|e| format!("could not listen on {sock}: {e}"))?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        // With port 0 the first listener picks the port and the others reuse it.
        bound_port = l.local_addr().map_err(|e| e.to_string())?.port();
        listeners.push(mio::net::TcpListener::from_std(l));
    }
    server
        .port
        .store(bound_port, std::sync::atomic::Ordering::Relaxed);

    let n = server.config.io_threads();
    let mut polls = Vec::new();
    let mut handles = Vec::new();
    let mut inboxes: Vec<Receiver<IoMsg>> = Vec::new();
    for _ in 0..n.max(1) {
        let poll = mio::Poll::new().map_err(|e| e.to_string())?;
        let waker = Waker::new(poll.registry(), io_thread::WAKER).map_err(|e| e.to_string())?;
        let (tx, rx) = crossbeam_channel::unbounded();
        handles.push(Arc::new(IoHandle { tx, waker }));
        inboxes.push(rx);
        polls.push(poll);
    }
    let _ = server.io_balance.set(Arc::new(Balance::new(handles.len())));
    let mut threads = Vec::new();
    let mut listeners = Some(listeners);
    for (i, (poll, inbox)) in polls.into_iter().zip(inboxes).enumerate() {
        let thread = io_thread::IoThread::new(
            i,
            poll,
            inbox,
            handles.clone(),
            if i == 0 {
                listeners.take().unwrap_or_default()
            } else {
                Vec::new()
            },
            server.clone(),
            pool.clone(),
        )
        .map_err(|e| format!("cannot start I/O thread: {e}"))?;
        threads.push(
            std::thread::Builder::new()
                .name(format!("kvik-io-{i}"))
                .spawn(move || thread.run())
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(Net { handles, threads })
}
