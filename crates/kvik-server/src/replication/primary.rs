//! The primary's side of a link: answers PSYNC on a socket taken from its I/O thread, then
//! streams a checkpoint (full sync) and the WAL's batches to the replica, on a feeder thread
//! of its own; a second thread reads the replica's acknowledgements.
//!
//! The WAL is tailed with `get_updates_since`; each batch must start right after the previous
//! one, so a position the WAL no longer covers is found before anything is sent (full sync) or,
//! if the retention removes files under a slow replica, ends the link (its next PSYNC gets a
//! full sync). During a full sync RocksDB deletes no files until the stream from the
//! checkpoint's sequence number has caught up once, so a full sync is never in vain.

use super::checkpoint;
use super::protocol::{self, BATCH, PING};
use crate::server::Server;
use crate::storage::Storage;
use std::io::{self, BufWriter, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a write to a replica may block before the link is dropped (Redis's repl-timeout).
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// Heartbeat period while there is nothing to send.
const PING_EVERY: Duration = Duration::from_secs(1);
/// Sleep between looks at the WAL's end while idle.
const TAIL_SLEEP: Duration = Duration::from_millis(1);

/// A PSYNC request, as parsed by the command.
pub struct Request {
    pub replid: String,
    /// The first offset the replica wants (its applied offset + 1).
    pub offset: u64,
    /// REPLCONF listening-port, if sent.
    pub listening_port: Option<u16>,
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
    let link = repl.add_replica(ip, req.listening_port.unwrap_or(0));
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
            let started = Instant::now();
            let made = checkpoint::make(server)?;
            write!(out, "+FULLRESYNC {replid} {}\r\n", made.seq)?;
            let bytes = checkpoint::send(&made, &mut out)?;
            tracing::info!(
                seq = made.seq,
                bytes,
                ms = started.elapsed().as_millis() as u64,
                "full sync sent"
            );
            made.seq
        }
    };
    stream_wal(server, &mut out, after, &alive, link, &mut hold)
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

/// Streams every batch after `after` as it is written, until the link or the server ends.
fn stream_wal(
    server: &Server,
    out: &mut BufWriter<TcpStream>,
    mut after: u64,
    alive: &AtomicBool,
    link: u64,
    hold: &mut Option<FileHold<'_>>,
) -> io::Result<()> {
    let storage = &server.storage;
    let mut last_send = Instant::now();
    while alive.load(Ordering::Relaxed) && !server.is_shutting_down() {
        if server.repl.is_replica() {
            return Err(io::Error::other("this node became a replica"));
        }
        if storage.latest_seq() <= after {
            if let Some(h) = hold.as_mut() {
                h.release();
                server.repl.replica_synced(link);
            }
            if last_send.elapsed() >= PING_EVERY {
                protocol::write_frame(out, PING, &[])?;
                last_send = Instant::now();
            }
            out.flush()?;
            std::thread::sleep(TAIL_SLEEP);
            continue;
        }
        let it = storage.wal_after(after).map_err(io::Error::other)?;
        let before = after;
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
            last_send = Instant::now();
        }
        if after == before {
            // Written but still in the WAL's buffer (group commit flushes it with the replies,
            // the timer at least once a second).
            std::thread::sleep(TAIL_SLEEP);
        }
    }
    Ok(())
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
                            server.repl.replica_acked(link, off);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            alive.store(false, Ordering::SeqCst);
        });
}
