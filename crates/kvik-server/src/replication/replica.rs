//! The replica's side of a link: one thread that connects to the primary, authenticates, asks
//! PSYNC with its position, takes a full sync if the primary sends one, then applies the
//! stream of batches in order and acknowledges its offset. On any failure it reconnects after
//! a second, with the position it has applied, until the role changes or the server stops.
//! A full sync cut midway is resumed: the link thread keeps what it holds of the checkpoint
//! (`checkpoint::Progress`) and names it to the primary before the next PSYNC.

use super::checkpoint::{self, Progress};
use super::protocol::{self, ACK, BATCH, PING};
use super::LinkState;
use crate::server::Server;
use crate::storage::replica::{append_batch, group_marks, Position};
use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a connection attempt and a handshake reply may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Read timeout while streaming: how soon an idle link acknowledges what it applied.
const IDLE_POLL: Duration = Duration::from_millis(5);
/// Acknowledgement period during a burst.
const ACK_EVERY: Duration = Duration::from_millis(50);
/// An idle link acknowledges at least this often, so its primary knows it is alive (Redis's
/// replicas send REPLCONF ACK every second): `min-replicas-max-lag` counts from the last one.
const ACK_REFRESH: Duration = Duration::from_secs(1);
/// Silence (the primary pings every second) after which the link is considered dead.
const LINK_TIMEOUT: Duration = Duration::from_secs(60);
/// Most bytes of batches held back waiting for the end of an atomic group; beyond it they are
/// applied anyway (a group that never closes, e.g. its primary crashed in the middle).
const HOLD_LIMIT: usize = 64 << 20;
/// Most bytes of batches merged into one write while catching up.
const MERGE_LIMIT: usize = 4 << 20;
/// How often a full sync's progress is logged.
const LOG_EVERY: Duration = Duration::from_secs(5);
/// Pause before reconnecting.
const RETRY: Duration = Duration::from_secs(1);

pub fn spawn(server: Arc<Server>, host: String, port: u16, generation: u64) {
    let _ = std::thread::Builder::new()
        .name("kvik-repl-link".into())
        .spawn(move || {
            // What this link holds of a full sync's checkpoint, across reconnections.
            let mut download = Progress::default();
            while server.repl.current(generation) && !server.is_shutting_down() {
                match follow_once(&server, &host, port, generation, &mut download) {
                    Ok(()) => {}
                    Err(e) => {
                        tracing::warn!(primary = %format!("{host}:{port}"), error = %e, "replication link down")
                    }
                }
                server.repl.set_link(generation, |f, _| {
                    f.state = LinkState::Connect;
                    f.sync_total = 0;
                    f.sync_read = 0;
                });
                let until = Instant::now() + RETRY;
                while Instant::now() < until
                    && server.repl.current(generation)
                    && !server.is_shutting_down()
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
}

fn connect(host: &str, port: u16) -> io::Result<TcpStream> {
    let mut last = io::Error::other("no address");
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, HANDSHAKE_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Sends one command and reads its one-line reply.
fn command(w: &mut TcpStream, r: &mut impl BufRead, args: &[&str]) -> io::Result<String> {
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    w.write_all(req.as_bytes())?;
    let mut line = String::new();
    r.read_line(&mut line)?;
    let line = line.trim_end().to_string();
    if line.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "primary closed the link",
        ));
    }
    Ok(line)
}

fn follow_once(
    server: &Arc<Server>,
    host: &str,
    port: u16,
    generation: u64,
    download: &mut Progress,
) -> io::Result<()> {
    let repl = &server.repl;
    let stream = connect(host, port)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    repl.set_link(generation, |f, _| {
        f.state = LinkState::Connecting;
        f.last_io = Some(Instant::now());
    });
    let mut w = stream.try_clone()?;
    let mut r = BufReader::with_capacity(256 * 1024, stream);
    let auth = server.config.repl.masterauth.read().clone();
    if let Some(pass) = auth {
        let reply = command(&mut w, &mut r, &["AUTH", &pass])?;
        if !reply.starts_with('+') {
            return Err(io::Error::other(format!("AUTH refused: {reply}")));
        }
    }
    // At start the link may run before the listener is bound.
    let port_known = Instant::now() + HANDSHAKE_TIMEOUT;
    while server.port.load(std::sync::atomic::Ordering::Relaxed) == 0 && Instant::now() < port_known
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let my_port = server
        .port
        .load(std::sync::atomic::Ordering::Relaxed)
        .to_string();
    let reply = command(&mut w, &mut r, &["REPLCONF", "listening-port", &my_port])?;
    if !reply.starts_with('+') {
        return Err(io::Error::other(format!("REPLCONF refused: {reply}")));
    }
    if let Some(resume) = download.resume() {
        let reply = command(
            &mut w,
            &mut r,
            &["REPLCONF", "kvik-fullsync-resume", &resume.encode()],
        )?;
        if !reply.starts_with('+') {
            *download = Progress::default();
        }
    }
    let mut position = None;
    repl.set_link(generation, |f, _| position = f.position.clone());
    let (id, next) = match &position {
        Some(p) => (p.replid.clone(), (p.offset + 1).to_string()),
        None => ("?".to_string(), "-1".to_string()),
    };
    let reply = command(&mut w, &mut r, &["PSYNC", &id, &next])?;
    let words: Vec<&str> = reply.split_whitespace().collect();
    let mut position = match words.as_slice() {
        ["+FULLRESYNC", replid, _offset] => {
            let replid = replid.to_string();
            full_sync(server, &mut r, generation, &replid, download)?
        }
        ["+CONTINUE", replid, after] => {
            if !download.id.is_empty() {
                *download = Progress::default();
                let _ = std::fs::remove_dir_all(checkpoint::base_dir(server).join("incoming"));
            }
            let mut p = position.ok_or_else(|| io::Error::other("CONTINUE without a position"))?;
            p.replid = replid.to_string();
            p.offset = after
                .parse()
                .map_err(|_| io::Error::other(format!("bad CONTINUE: {reply}")))?;
            tracing::info!(replid = %p.replid, offset = p.offset, "partial resynchronization accepted");
            p
        }
        _ => return Err(io::Error::other(format!("PSYNC refused: {reply}"))),
    };
    repl.set_link(generation, |f, replid| {
        f.state = LinkState::Connected;
        f.position = Some(position.clone());
        replid.clone_from(&position.replid);
    });
    stream_batches(server, &mut r, &mut w, generation, &mut position)
}

/// Receives and loads a full sync; returns the position it leaves.
fn full_sync(
    server: &Arc<Server>,
    r: &mut BufReader<TcpStream>,
    generation: u64,
    replid: &str,
    download: &mut Progress,
) -> io::Result<Position> {
    let repl = &server.repl;
    let stats = &repl.fullsync;
    repl.set_link(generation, |f, _| f.state = LinkState::Sync);
    r.get_ref().set_read_timeout(Some(LINK_TIMEOUT))?;
    let dir = checkpoint::base_dir(server).join("incoming");
    let started = Instant::now();
    let mut logged = Instant::now();
    let mut counted = 0u64;
    let received = checkpoint::receive(r, &dir, download, |p| {
        if p.read == 0 {
            counted = 0;
            if p.held > 0 {
                stats.resumes.fetch_add(1, Relaxed);
            }
            tracing::info!(id = %p.id, total = p.total, held = p.held, "full sync: receiving checkpoint");
        }
        stats.received_bytes.fetch_add(p.read - counted, Relaxed);
        counted = p.read;
        if logged.elapsed() >= LOG_EVERY {
            logged = Instant::now();
            tracing::info!(id = %p.id, received = p.have(), total = p.total, "full sync: receiving");
        }
        repl.set_link(generation, |f, _| {
            f.last_io = Some(Instant::now());
            f.sync_total = p.total;
            f.sync_read = p.have();
        });
        // A role change (REPLICAOF elsewhere, promotion) ends this download.
        repl.current(generation)
    });
    let seq = match received {
        Ok(seq) => seq,
        Err(e) => {
            tracing::info!(id = %download.id, held = download.have(), total = download.total, error = %e, "full sync transfer cut");
            return Err(e);
        }
    };
    // The checkpoint is whole: whatever happens next, a later full sync starts from zero.
    *download = Progress::default();
    repl.set_link(generation, |f, _| {
        f.sync_total = 0;
        f.sync_read = 0;
    });
    let position = Position {
        replid: replid.to_string(),
        offset: seq,
    };
    let copied = {
        let _applying = repl.apply_gate.lock();
        if !repl.current(generation) {
            return Err(io::Error::other("role changed during the full sync"));
        }
        server
            .storage
            .load_checkpoint(&dir, &position)
            .map_err(io::Error::other)?
    };
    let _ = std::fs::remove_dir_all(&dir);
    tracing::info!(
        records = copied,
        seq,
        ms = started.elapsed().as_millis() as u64,
        "full sync loaded"
    );
    Ok(position)
}

/// Batches received but not applied yet, merged into one write: the rest of an open atomic
/// group (EXEC, a script), or, while more frames are already buffered, the next batches
/// (a replica behind its primary catches up in large writes instead of one per batch).
struct Pending {
    data: Vec<u8>,
    /// Mark keys of the atomic groups opened and not closed yet.
    open: HashSet<Vec<u8>>,
    /// The sequence number the next batch must start at.
    expected: u64,
}

impl Pending {
    /// Adds one batch; false if it does not start where the previous one ended.
    fn add(&mut self, seq: u64, data: &[u8]) -> bool {
        if seq != self.expected {
            return false;
        }
        self.expected = seq + (rocksdb::WriteBatch::from_data(data).len() as u64).max(1);
        let (opens, closes) = group_marks(data);
        append_batch(&mut self.data, data);
        self.open.extend(opens);
        for c in &closes {
            self.open.remove(c);
        }
        if self.data.len() >= HOLD_LIMIT {
            self.open.clear(); // a group that never closes is applied anyway
        }
        true
    }

    /// Whether what is held may be applied now (no atomic group left open).
    fn ready(&self) -> bool {
        !self.data.is_empty() && self.open.is_empty()
    }
}

/// Applies the primary's batches in order until the link fails or the role changes.
fn stream_batches(
    server: &Arc<Server>,
    r: &mut BufReader<TcpStream>,
    w: &mut TcpStream,
    generation: u64,
    position: &mut Position,
) -> io::Result<()> {
    let repl = &server.repl;
    r.get_ref().set_read_timeout(Some(IDLE_POLL))?;
    let mut payload = Vec::new();
    let mut acked = None::<u64>;
    let mut last_ack = Instant::now();
    let mut last_io = Instant::now();
    // The newest lease stamp of the primary, echoed in every ACK with this node's cluster id
    // (`lease`; a node outside cluster mode echoes nothing).
    let node_id = server.cluster.node().map(|n| n.myid.clone());
    let mut stamp = None::<u64>;
    let send_ack = |w: &mut TcpStream, offset: u64, stamp: Option<u64>| -> io::Result<()> {
        let echo = stamp.zip(node_id.as_deref());
        protocol::write_frame(w, ACK, &[&protocol::ack_payload(offset, echo)])
    };
    send_ack(w, position.offset, stamp)?;
    let mut pending = Pending {
        data: Vec::new(),
        open: HashSet::new(),
        expected: position.offset + 1,
    };
    while repl.current(generation) && !server.is_shutting_down() {
        let tag = if frame_buffered(r) {
            protocol::read_frame(r, &mut payload)?
        } else {
            // Nothing (whole) buffered: apply what is held, acknowledge, then wait.
            if pending.ready() && !apply(server, generation, &mut pending, position)? {
                break;
            }
            if (acked != Some(position.offset)
                && (last_ack.elapsed() >= ACK_EVERY || r.buffer().is_empty()))
                || last_ack.elapsed() >= ACK_REFRESH
            {
                send_ack(w, position.offset, stamp)?;
                acked = Some(position.offset);
                last_ack = Instant::now();
            }
            match wait_readable(r)? {
                true => {
                    // A frame is read whole once its first byte is in: the long timeout.
                    r.get_ref().set_read_timeout(Some(LINK_TIMEOUT))?;
                    let t = protocol::read_frame(r, &mut payload);
                    r.get_ref().set_read_timeout(Some(IDLE_POLL))?;
                    t?
                }
                false => {
                    if last_io.elapsed() > LINK_TIMEOUT {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "primary silent"));
                    }
                    continue;
                }
            }
        };
        last_io = Instant::now();
        match tag {
            BATCH => {
                let seq = protocol::u64_at(&payload)?;
                if !pending.add(seq, &payload[8..]) {
                    return Err(io::Error::other(format!(
                        "batch at {seq}, expected {}",
                        pending.expected
                    )));
                }
                // Merged with the next ones while they are already here (up to MERGE_LIMIT).
                let now = pending.data.len() >= MERGE_LIMIT || !frame_buffered(r);
                if pending.ready() && now && !apply(server, generation, &mut pending, position)? {
                    break;
                }
            }
            PING => {
                repl.set_link(generation, |f, _| f.last_io = Some(Instant::now()));
                if let Ok(s) = protocol::u64_at(&payload) {
                    // Echoed at once: the primary's lease runs from this stamp.
                    repl.lease.ping_received();
                    // Unless this node was promoted or re-pointed while the thread waited for
                    // the frame (the role is checked only at the top of the loop): a fresh echo
                    // then would renew a primary that was failed over, frozen meanwhile and
                    // thawed, beside the new one (split brain). Checked after the PING is
                    // noted, under the role's lock: either the promotion comes later and its
                    // hold counts this PING (`lease`), or no echo leaves.
                    if !repl.current(generation) {
                        break;
                    }
                    stamp = Some(s);
                    send_ack(w, position.offset, stamp)?;
                    acked = Some(position.offset);
                    last_ack = Instant::now();
                }
            }
            t => return Err(io::Error::other(format!("unexpected frame {t}"))),
        }
        if (acked != Some(position.offset) && last_ack.elapsed() >= ACK_EVERY)
            || last_ack.elapsed() >= ACK_REFRESH
        {
            send_ack(w, position.offset, stamp)?;
            acked = Some(position.offset);
            last_ack = Instant::now();
        }
    }
    Ok(())
}

/// Applies what `pending` holds and moves `position`; false if the role changed first.
fn apply(
    server: &Server,
    generation: u64,
    pending: &mut Pending,
    position: &mut Position,
) -> io::Result<bool> {
    let repl = &server.repl;
    let next = Position {
        replid: position.replid.clone(),
        offset: pending.expected - 1,
    };
    {
        let _applying = repl.apply_gate.lock();
        if !repl.current(generation) {
            return Ok(false);
        }
        server
            .storage
            .apply_replicated(&pending.data, &next)
            .map_err(io::Error::other)?;
    }
    pending.data.clear();
    *position = next;
    let p = position.clone();
    repl.set_link(generation, |f, _| {
        f.position = Some(p);
        f.last_io = Some(Instant::now());
    });
    Ok(true)
}

/// True if a whole frame is already in the reader's buffer.
fn frame_buffered(r: &BufReader<TcpStream>) -> bool {
    let b = r.buffer();
    b.len() >= 5 && b.len() - 5 >= u32::from_le_bytes([b[1], b[2], b[3], b[4]]) as usize
}

/// True once a byte is buffered or readable; false when the idle poll timed out.
fn wait_readable(r: &mut BufReader<TcpStream>) -> io::Result<bool> {
    match r.fill_buf() {
        Ok([]) => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "primary closed the link",
        )),
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
