//! A full sync's files: the primary makes a RocksDB checkpoint under `<dir>/replication/` and
//! streams its files over the link; the replica writes them under `<dir>/replication/incoming`
//! for `Storage::load_checkpoint`. Kept apart from the rest of replication so one checkpoint
//! helper can serve both this and SAVE/BGSAVE.

use super::protocol::{self, CHECKPOINT_END, CHUNK, CHUNK_SIZE, FILE};
use crate::server::Server;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The directory replication keeps its files in.
pub fn base_dir(server: &Server) -> PathBuf {
    server.config.dir.read().join("replication")
}

/// Removes what an earlier process left behind (checkpoints being sent, a partial download).
pub fn clean(server: &Server) {
    let _ = fs::remove_dir_all(base_dir(server));
}

/// A checkpoint on disk, removed when dropped.
pub struct Made {
    pub dir: PathBuf,
    /// The sequence number of the last write it holds.
    pub seq: u64,
}

impl Drop for Made {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Makes a checkpoint of the live database (hard links; writes go on meanwhile).
pub fn make(server: &Server) -> io::Result<Made> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = base_dir(server);
    fs::create_dir_all(&base)?;
    let dir = base.join(format!(
        "checkpoint-{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    server.storage.checkpoint(&dir).map_err(io::Error::other)?;
    let mut made = Made { dir, seq: 0 };
    made.seq = crate::storage::replica::checkpoint_seq(&made.dir).map_err(io::Error::other)?;
    Ok(made)
}

/// Streams the checkpoint's files, then its sequence number; returns the bytes sent.
pub fn send(made: &Made, out: &mut impl Write) -> io::Result<u64> {
    let mut names: Vec<_> = fs::read_dir(&made.dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name())
        .collect();
    names.sort();
    let mut sent = 0u64;
    let mut buf = vec![0u8; CHUNK_SIZE];
    for name in names {
        let mut f = File::open(made.dir.join(&name))?;
        let size = f.metadata()?.len();
        let name = name.to_string_lossy().into_owned();
        protocol::write_frame(out, FILE, &[&size.to_le_bytes(), name.as_bytes()])?;
        let mut left = size;
        while left > 0 {
            let n = f.read(&mut buf[..CHUNK_SIZE.min(left as usize)])?;
            if n == 0 {
                return Err(io::Error::other(format!("{name} shrank while being sent")));
            }
            protocol::write_frame(out, CHUNK, &[&buf[..n]])?;
            left -= n as u64;
            sent += n as u64;
        }
    }
    protocol::write_frame(out, CHECKPOINT_END, &[&made.seq.to_le_bytes()])?;
    out.flush()?;
    Ok(sent)
}

/// Receives a checkpoint into `dir` (emptied first); returns its sequence number. `progress`
/// is called with the bytes received so far.
pub fn receive(r: &mut impl Read, dir: &Path, mut progress: impl FnMut(u64)) -> io::Result<u64> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir)?;
    let mut payload = Vec::new();
    let mut file: Option<(File, u64)> = None;
    let mut received = 0u64;
    loop {
        match protocol::read_frame(r, &mut payload)? {
            FILE => {
                finish(file.take())?;
                let size = protocol::u64_at(&payload)?;
                let name = std::str::from_utf8(&payload[8..])
                    .ok()
                    .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != "..")
                    .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad file name"))?;
                file = Some((File::create(dir.join(name))?, size));
            }
            CHUNK => {
                let (f, left) = file.as_mut().ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, "chunk outside a file")
                })?;
                if payload.len() as u64 > *left {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "file overrun"));
                }
                f.write_all(&payload)?;
                *left -= payload.len() as u64;
                received += payload.len() as u64;
                progress(received);
            }
            CHECKPOINT_END => {
                finish(file.take())?;
                return protocol::u64_at(&payload);
            }
            protocol::PING => {}
            t => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unexpected frame {t} during a full sync"),
                ))
            }
        }
    }
}

fn finish(file: Option<(File, u64)>) -> io::Result<()> {
    match file {
        Some((f, 0)) => f.sync_all(),
        Some(_) => Err(io::Error::new(io::ErrorKind::InvalidData, "file cut short")),
        None => Ok(()),
    }
}
