//! Cluster mode: PUBLISH reaches the subscribers of every node. Redis broadcasts a PUBLISH over
//! its cluster bus; kvik has no bus, so the node a client published on forwards the message to
//! the other nodes of the topology it knows, as `CLUSTER PUBLISH channel message` (which
//! delivers on that node only and forwards nothing).
//!
//! Forwarding never blocks the publisher: PUBLISH hands the message to a bounded queue and
//! replies at once (with the local receivers, as Redis's PUBLISH in a cluster does). One
//! thread, `kvik-pubsub-fwd`, keeps one connection per peer and writes the queued messages to
//! each in order, pipelined, then reads their replies, so one publisher's messages reach every
//! node in publish order. The guarantee is Redis's: at most once. A message is dropped when
//! the queue is full ([`FORWARD_QUEUE`]), or when a peer cannot be reached or fails mid-batch
//! (the connection is dropped and made again for the next batch); nothing is retried.

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// Messages waiting to be forwarded at most; beyond, PUBLISH drops the forwarding.
pub const FORWARD_QUEUE: usize = 64 * 1024;
/// Messages written to a peer per pipelined batch.
const BATCH: usize = 1024;
/// Connect, write and read timeout towards a peer.
const PEER_TIMEOUT: Duration = Duration::from_secs(2);

/// Where to forward: the other nodes' addresses and the password they expect (the cluster's
/// nodes share `requirepass`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Peers {
    pub addrs: Vec<(String, u16)>,
    pub password: Option<String>,
}

struct Job {
    peers: Arc<Peers>,
    channel: Bytes,
    message: Bytes,
}

/// The forwarding queue and its thread (started on first use).
pub struct Forwarder {
    tx: Sender<Job>,
    /// Messages not forwarded because the queue was full.
    pub dropped: AtomicU64,
    /// Messages lost towards a peer that failed.
    pub failed: Arc<AtomicU64>,
}

impl Forwarder {
    pub fn start() -> Forwarder {
        let (tx, rx) = crossbeam_channel::bounded(FORWARD_QUEUE);
        let failed = Arc::new(AtomicU64::new(0));
        let f = failed.clone();
        let spawned = std::thread::Builder::new()
            .name("kvik-pubsub-fwd".into())
            .spawn(move || run(rx, &f));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the pub/sub forwarder");
        }
        Forwarder {
            tx,
            dropped: AtomicU64::new(0),
            failed,
        }
    }

    /// Queues `message` for every peer; never waits.
    pub fn forward(&self, peers: Arc<Peers>, channel: &[u8], message: &[u8]) {
        if peers.addrs.is_empty() {
            return;
        }
        let job = Job {
            peers,
            channel: Bytes::copy_from_slice(channel),
            message: Bytes::copy_from_slice(message),
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(job) {
            self.dropped.fetch_add(1, Relaxed);
        }
    }
}

/// One connection to a peer: the socket and a reader over its replies.
struct PeerConn {
    stream: TcpStream,
    replies: BufReader<TcpStream>,
}

impl PeerConn {
    fn open(addr: &(String, u16), password: Option<&str>) -> std::io::Result<PeerConn> {
        let sock = (addr.0.as_str(), addr.1)
            .to_socket_addrs()?
            .next()
            .ok_or(std::io::ErrorKind::AddrNotAvailable)?;
        let stream = TcpStream::connect_timeout(&sock, PEER_TIMEOUT)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(PEER_TIMEOUT))?;
        stream.set_write_timeout(Some(PEER_TIMEOUT))?;
        let mut c = PeerConn {
            replies: BufReader::new(stream.try_clone()?),
            stream,
        };
        if let Some(p) = password {
            let mut req = Vec::new();
            kvik_resp::encode::command(&mut req, &[b"AUTH", p.as_bytes()]);
            c.stream.write_all(&req)?;
            c.read_replies(1)?;
        }
        Ok(c)
    }

    /// Reads `n` one-line replies (integers or errors: all CLUSTER PUBLISH and AUTH answer).
    fn read_replies(&mut self, n: usize) -> std::io::Result<()> {
        let mut line = Vec::new();
        for _ in 0..n {
            line.clear();
            if self.replies.read_until(b'\n', &mut line)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(())
    }
}

fn run(rx: Receiver<Job>, failed: &AtomicU64) {
    let mut conns: HashMap<(String, u16), PeerConn> = HashMap::new();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        let peers = batch.last().expect("one job at least").peers.clone();
        conns.retain(|addr, _| peers.addrs.contains(addr));
        let mut req = Vec::new();
        for j in &batch {
            kvik_resp::encode::command(&mut req, &[b"CLUSTER", b"PUBLISH", &j.channel, &j.message]);
        }
        for addr in &peers.addrs {
            let sent = match conns.remove(addr) {
                Some(c) => Ok(c),
                None => PeerConn::open(addr, peers.password.as_deref()),
            }
            .and_then(|mut c| {
                c.stream.write_all(&req)?;
                c.read_replies(batch.len())?;
                Ok(c)
            });
            match sent {
                Ok(c) => {
                    conns.insert(addr.clone(), c);
                }
                Err(e) => {
                    failed.fetch_add(batch.len() as u64, Relaxed);
                    tracing::debug!(peer = %format!("{}:{}", addr.0, addr.1), error = %e, "pub/sub forwarding failed");
                }
            }
        }
    }
}
