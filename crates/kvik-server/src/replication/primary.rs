//! The primary's side of a link: answers PSYNC on a socket taken from its I/O thread, then
//! streams a checkpoint (full sync) and the WAL's batches to the replica, on a feeder thread
//! of its own; a second thread reads the replica's acknowledgements.
//!
//! Batches come from the backlog in memory (`storage::backlog`: commits append and wake the
//! feeder) while it covers the replica's position; otherwise the WAL is tailed with
//! `get_updates_since` (after a full sync, a slow replica, `repl-backlog-size 0`). Each batch
//! must start right after the previous one, so a position the WAL no longer covers is found before anything is sent (full sync) or,
//! if the retention removes files under a slow replica, ends the link (its next PSYNC gets a
//! full sync). During a full sync RocksDB deletes no files until the stream from the
//! checkpoint's sequence number has caught up once, so a full sync is never in vain.
//!
//! The checkpoint is sent at `repl-fullsync-max-bytes-per-sec` at most. If its transfer is
//! cut, the checkpoint goes on the shelf (`checkpoint::Shelf`); the replica's next PSYNC names
//! it with what it holds, and, if the WAL still covers the checkpoint, only the rest is sent.

use super::checkpoint::{self, Made, Pace, Plan, Resume};
use super::lease;
use super::protocol::{self, BATCH, PING};
use super::throttle::Throttle;
use crate::server::Server;
use crate::storage::backlog::Look;
use crate::storage::Storage;
use std::io::{self, BufWriter, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a write to a replica may block before the link is dropped (Redis's repl-timeout).
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a full sync's progress is logged.
const LOG_EVERY: Duration = Duration::from_secs(5);
/// Heartbeat period while there is nothing to send.
const PING_EVERY: Duration = Duration::from_secs(1);
/// Sleep between looks at the WAL's end while idle (the backlog off or not covering).
const TAIL_SLEEP: Duration = Duration::from_millis(1);
/// Longest wait on the backlog before looking again (commits wake the feeder sooner).
const RING_WAIT: Duration = Duration::from_millis(100);
/// Bytes of backlog batches taken per look (sent in one flush).
const SERVE_BYTES: u64 = 256 * 1024;

/// A PSYNC request, as parsed by the command.
pub struct Request {
    pub replid: String,
    /// The first offset the replica wants (its applied offset + 1).
    pub offset: u64,
    /// REPLCONF listening-port, if sent.
    pub listening_port: Option<u16>,
    /// REPLCONF kvik-fullsync-resume: the part of a cut full sync the replica holds.
    pub resume: Option<Resume>,
}

/// Serves a replica on `stream` (blocking mode) until the link ends. Spawned by the PSYNC
/// command's hand-off.
pub fn spawn(server: Arc<Server>, stream: TcpStream, req: Request) {
    let _ = std::thread::Builder::new()
        .name("kvik-repl-feed".into())
        .spawn(move || {
            let peer = stream.peer_addr().ok();
            if let Err(e) = serve(&server, stream, req) {
                tracing::info!(replica = ?peer, error = %e, "replication link ended");
            }
        });
}

/// Keeps RocksDB from deleting files while held.
struct FileHold<'a> {
    storage: &'a Storage,
    held: bool,
}

impl<'a> FileHold<'a> {
    fn new(storage: &'a Storage) -> io::Result<FileHold<'a>> {
        storage.hold_files(true).map_err(io::Error::other)?;
        Ok(FileHold {
            storage,
            held: true,
        })
    }

    fn release(&mut self) {
        if std::mem::take(&mut self.held) {
            if let Err(e) = self.storage.hold_files(false) {
                tracing::warn!(error = %e, "re-enabling RocksDB file deletions failed");
            }
        }
    }
}

impl Drop for FileHold<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// The sequence number after which the WAL still holds every batch, if `after` is one: the
/// first batch after it must start at `after + 1`.
fn covered(storage: &Storage, after: u64) -> bool {
    if after >= storage.latest_seq() {
        return after == storage.latest_seq();
    }
    match storage.wal_after(after) {
        Ok(mut it) => matches!(it.next(), Some(Ok((seq, _))) if seq == after + 1),
        Err(_) => false,
    }
}

fn serve(server: &Arc<Server>, stream: TcpStream, req: Request) -> io::Result<()> {
    let storage = &server.storage;
    let repl = &server.repl;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let ip = stream
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let (replid, from) = repl.continue_from(&req.replid, req.offset);
    let partial = from.filter(|&after| covered(storage, after));
    let mut out = BufWriter::with_capacity(256 * 1024, stream.try_clone()?);
    let link = repl.add_replica(ip, req.listening_port.unwrap_or(0), stream.try_clone().ok());
    let alive = Arc::new(AtomicBool::new(true));
    let _unregister = Unregister {
        server: server.clone(),
        link,
        alive: alive.clone(),
        stream: stream.try_clone()?,
    };
    spawn_ack_reader(server.clone(), stream, link, alive.clone());

    let mut hold = None;
    let after = match partial {
        Some(after) => {
            repl.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            // The offset after which the stream continues: a replica that asked with this
            // node's previous history continues in this node's own numbering.
            write!(out, "+CONTINUE {replid} {after}\r\n")?;
            repl.replica_synced(link);
            after
        }
        None => {
            if req.replid != "?" {
                repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
            }
            repl.sync_full.fetch_add(1, Ordering::Relaxed);
            hold = Some(FileHold::new(storage)?);
            let (made, resume) = checkpoint_for(server, &replid, req.resume.as_ref())?;
            write!(out, "+FULLRESYNC {replid} {}\r\n", made.seq)?;
            if let Err(e) = send_checkpoint(server, &made, resume.as_ref(), &mut out, &alive, link)
            {
                // Kept for a while: the replica's next PSYNC resumes it.
                let ttl = server
                    .config
                    .repl
                    .fullsync_resume_ttl
                    .load(Ordering::Relaxed);
                repl.shelf.put(made, &replid, Duration::from_secs(ttl));
                return Err(e);
            }
            made.seq
        }
    };
    stream_wal(server, &mut out, after, &alive, link, &mut hold)
}

/// The checkpoint to send: the kept one the replica resumes, if it is still kept for this
/// history and the WAL still covers it (file deletions are held already), else a new one.
fn checkpoint_for(
    server: &Server,
    replid: &str,
    resume: Option<&Resume>,
) -> io::Result<(Arc<Made>, Option<Resume>)> {
    if let Some(r) = resume {
        match server.repl.shelf.take(&r.id, replid) {
            Some(made) if covered(&server.storage, made.seq) => {
                return Ok((made, Some(r.clone())));
            }
            Some(_) => tracing::info!(id = %r.id, "kept checkpoint no longer covered by the WAL"),
            None => tracing::info!(id = %r.id, "no kept checkpoint to resume"),
        }
    }
    Ok((Arc::new(checkpoint::make(server)?), None))
}

/// Sends the checkpoint (or its rest), rate-limited, reporting progress to INFO and the log.
fn send_checkpoint(
    server: &Server,
    made: &Made,
    resume: Option<&Resume>,
    out: &mut BufWriter<TcpStream>,
    alive: &AtomicBool,
    link: u64,
) -> io::Result<()> {
    let repl = &server.repl;
    let stats = &repl.fullsync;
    let plan = Plan::new(made, resume)?;
    if plan.skipped > 0 {
        stats.resumes_served.fetch_add(1, Ordering::Relaxed);
        stats
            .skipped_bytes
            .fetch_add(plan.skipped, Ordering::Relaxed);
    }
    tracing::info!(
        id = %made.id,
        seq = made.seq,
        total = plan.total,
        resumed_at = plan.skipped,
        "full sync: sending checkpoint"
    );
    repl.replica_sync_progress(link, plan.skipped, plan.total);
    let started = Instant::now();
    let mut logged = Instant::now();
    let mut throttle = Throttle::default();
    let (mut counted, mut waits) = (0u64, 0u64);
    let result = checkpoint::send(
        made,
        &plan,
        out,
        Pace {
            throttle: &mut throttle,
            limit: &|| server.config.repl.fullsync_max_bps.load(Ordering::Relaxed),
            keep_going: &|| alive.load(Ordering::Relaxed) && !server.is_shutting_down(),
            progress: &mut |sent, throttled| {
                stats
                    .sent_bytes
                    .fetch_add(sent - counted, Ordering::Relaxed);
                stats
                    .throttled_waits
                    .fetch_add(throttled - waits, Ordering::Relaxed);
                (counted, waits) = (sent, throttled);
                repl.replica_sync_progress(link, plan.skipped + sent, plan.total);
                if logged.elapsed() >= LOG_EVERY {
                    logged = Instant::now();
                    tracing::info!(
                        id = %made.id,
                        sent = plan.skipped + sent,
                        total = plan.total,
                        "full sync: sending"
                    );
                }
            },
        },
    );
    stats
        .throttled_waits
        .fetch_add(throttle.waits - waits, Ordering::Relaxed);
    repl.replica_sync_progress(link, 0, 0);
    match &result {
        Ok(bytes) => tracing::info!(
            id = %made.id,
            seq = made.seq,
            bytes,
            skipped = plan.skipped,
            ms = started.elapsed().as_millis() as u64,
            throttled_waits = throttle.waits,
            "full sync sent"
        ),
        Err(e) => tracing::info!(
            id = %made.id,
            sent = plan.skipped + counted,
            total = plan.total,
            error = %e,
            "full sync transfer cut; checkpoint kept for a resume"
        ),
    }
    result.map(|_| ())
}

/// Unregisters the replica and closes its socket when the feeder ends, however it ends.
struct Unregister {
    server: Arc<Server>,
    link: u64,
    alive: Arc<AtomicBool>,
    stream: TcpStream,
}

impl Drop for Unregister {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::SeqCst);
        let _ = self.stream.shutdown(Shutdown::Both);
        self.server.repl.remove_replica(self.link);
    }
}

/// Streams every batch after `after` as it is written, until the link or the server ends:
/// from the backlog in memory while it covers the position, else from the WAL.
fn stream_wal(
    server: &Server,
    out: &mut BufWriter<TcpStream>,
    mut after: u64,
    alive: &AtomicBool,
    link: u64,
    hold: &mut Option<FileHold<'_>>,
) -> io::Result<()> {
    let storage = &server.storage;
    let backlog = storage.backlog();
    let _following = backlog.follow();
    let mut ready = Vec::new();
    let mut last_send = Instant::now();
    // The WAL is read when the backlog does not cover the position, and, after two waits,
    // when RocksDB holds more than the backlog (a write the backlog did not see).
    let mut idle_waits = 0;
    let mut last_stamp = Instant::now();
    while alive.load(Ordering::Relaxed) && !server.is_shutting_down() {
        if server.repl.is_replica() {
            return Err(io::Error::other("this node became a replica"));
        }
        // With the write lease on, stamps go out on a busy link too: they renew the lease.
        let lease_ms = server.config.repl.write_lease_ms.load(Ordering::Relaxed);
        if lease::ping_every(lease_ms).is_some_and(|every| last_stamp.elapsed() >= every) {
            send_ping(out)?;
            out.flush()?;
            last_stamp = Instant::now();
        }
        let look = match backlog.look(after, SERVE_BYTES, &mut ready) {
            Look::Nothing if idle_waits >= 2 && storage.latest_seq() > after => Look::Elsewhere,
            look => look,
        };
        match look {
            Look::Ready => {
                // The backlog reached: the full sync's stream no longer needs old files.
                if let Some(h) = hold.as_mut() {
                    h.release();
                    server.repl.replica_synced(link);
                }
                for e in ready.drain(..) {
                    protocol::write_frame(out, BATCH, &[&e.seq.to_le_bytes(), &e.data])?;
                    after = e.last();
                }
                out.flush()?;
                last_send = Instant::now();
                idle_waits = 0;
            }
            Look::Nothing | Look::Unflushed => {
                idle(server, out, after, link, hold, &mut last_send)?;
                backlog.wait(after, RING_WAIT);
                // Counted only while RocksDB is past the position: a commit in flight ends
                // such a wait with its WAL flush; a write the backlog missed never does.
                match look {
                    Look::Nothing if storage.latest_seq() > after => idle_waits += 1,
                    _ => idle_waits = 0,
                }
            }
            Look::Elsewhere => {
                idle_waits = 0;
                let before = after;
                if storage.latest_seq() > after {
                    server.repl.wal_reads.fetch_add(1, Ordering::Relaxed);
                    after = send_from_wal(storage, out, after)?;
                }
                if after == before {
                    // Nothing new, or written but still in the WAL's buffer (group commit
                    // flushes it with the replies, the timer at least once a second).
                    idle(server, out, after, link, hold, &mut last_send)?;
                    std::thread::sleep(TAIL_SLEEP);
                } else {
                    last_send = Instant::now();
                }
            }
        }
    }
    Ok(())
}

/// With nothing to send: once caught up, releases the full sync's file hold; heartbeats; sends
/// what is buffered.
fn idle(
    server: &Server,
    out: &mut BufWriter<TcpStream>,
    after: u64,
    link: u64,
    hold: &mut Option<FileHold<'_>>,
    last_send: &mut Instant,
) -> io::Result<()> {
    if server.storage.latest_seq() <= after {
        if let Some(h) = hold.as_mut() {
            h.release();
            server.repl.replica_synced(link);
        }
    }
    if last_send.elapsed() >= PING_EVERY {
        send_ping(out)?;
        *last_send = Instant::now();
    }
    out.flush()
}

/// A PING frame stamped with this node's lease clock: the replica echoes the stamp in its ACK
/// (`lease`).
fn send_ping(out: &mut BufWriter<TcpStream>) -> io::Result<()> {
    protocol::write_frame(out, PING, &[&lease::own_ms().to_le_bytes()])
}

/// Sends the batches the WAL file holds after `after`; returns the new position. Each batch
/// must start right after the previous one.
fn send_from_wal(
    storage: &Storage,
    out: &mut BufWriter<TcpStream>,
    mut after: u64,
) -> io::Result<u64> {
    let it = storage.wal_after(after).map_err(io::Error::other)?;
    for item in it {
        let (seq, batch) = item.map_err(io::Error::other)?;
        if seq != after + 1 {
            return Err(io::Error::other(format!(
                "the WAL no longer holds sequence {} (next batch at {seq})",
                after + 1
            )));
        }
        protocol::write_frame(out, BATCH, &[&seq.to_le_bytes(), batch.data()])?;
        after = seq + (batch.len() as u64).max(1) - 1;
    }
    Ok(after)
}

/// Reads the replica's acknowledgements until the link closes.
fn spawn_ack_reader(server: Arc<Server>, stream: TcpStream, link: u64, alive: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("kvik-repl-acks".into())
        .spawn(move || {
            let mut r = io::BufReader::new(stream);
            let mut payload = Vec::new();
            loop {
                match protocol::read_frame(&mut r, &mut payload) {
                    Ok(protocol::ACK) => {
                        if let Ok(off) = protocol::u64_at(&payload) {
                            let echo = protocol::ack_echo(&payload);
                            server.repl.replica_acked(link, off, echo);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            alive.store(false, Ordering::SeqCst);
        });
}
