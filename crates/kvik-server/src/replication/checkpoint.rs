//! A full sync's files: the primary makes a RocksDB checkpoint under `<dir>/replication/` and
//! streams its files over the link; the replica writes them under `<dir>/replication/incoming`
//! for `Storage::load_checkpoint`.
//!
//! A transfer is resumable: files go in name order, so what a replica holds is always "every
//! file before F, and the first N bytes of F" ([`Resume`]). A primary whose transfer was cut
//! keeps the checkpoint on its [`Shelf`] for `repl-fullsync-resume-ttl` seconds under a random
//! id; a replica that reconnects names the id, F and N, and the primary sends only the rest.

use super::protocol::{self, CHECKPOINT_END, CHUNK, CHUNK_SIZE, FILE, SYNC_START};
use super::throttle::Throttle;
use crate::server::Server;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Names it among the checkpoints kept for resuming (random, so a restarted primary never
    /// takes a replica's partial download for one of its own checkpoints).
    pub id: String,
    pub dir: PathBuf,
    /// The sequence number of the last write it holds.
    pub seq: u64,
}

impl Drop for Made {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Made {
    /// Its files, in the order they are sent, with their sizes.
    pub fn files(&self) -> io::Result<Vec<(String, u64)>> {
        let mut files = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            if e.file_type()?.is_file() {
                files.push((
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata()?.len(),
                ));
            }
        }
        files.sort();
        Ok(files)
    }
}

/// Makes a checkpoint of the live database (hard links; writes go on meanwhile).
pub fn make(server: &Server) -> io::Result<Made> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = base_dir(server);
    fs::create_dir_all(&base)?;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = base.join(format!("checkpoint-{n}"));
    let _ = fs::remove_dir_all(&dir);
    server.storage.checkpoint(&dir).map_err(io::Error::other)?;
    let mut made = Made {
        id: format!("{}-{n}", &super::new_replid()[..16]),
        dir,
        seq: 0,
    };
    made.seq = crate::storage::replica::checkpoint_seq(&made.dir).map_err(io::Error::other)?;
    Ok(made)
}

/// Where a cut transfer stands on the replica: every file before `file` and `offset` bytes of
/// `file`. Sent as `REPLCONF kvik-fullsync-resume "<id> <offset> <file>"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    pub id: String,
    pub file: String,
    pub offset: u64,
}

impl Resume {
    pub fn encode(&self) -> String {
        format!("{} {} {}", self.id, self.offset, self.file)
    }

    pub fn parse(s: &str) -> Option<Resume> {
        let mut it = s.splitn(3, ' ');
        let (id, offset, file) = (it.next()?, it.next()?.parse().ok()?, it.next()?);
        (!id.is_empty() && !file.is_empty()).then(|| Resume {
            id: id.to_string(),
            file: file.to_string(),
            offset,
        })
    }
}

/// Checkpoints whose transfer was cut, kept for a while so their replica can resume.
#[derive(Default)]
pub struct Shelf {
    kept: Mutex<HashMap<String, Shelved>>,
}

struct Shelved {
    made: Arc<Made>,
    /// The history it belongs to: after a role change it is no use.
    replid: String,
    until: Instant,
}

impl Shelf {
    /// Keeps `made` for `ttl` (nothing if zero); a timer thread forgets it after that.
    pub fn put(self: &Arc<Self>, made: Arc<Made>, replid: &str, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let id = made.id.clone();
        self.kept.lock().insert(
            id,
            Shelved {
                made,
                replid: replid.to_string(),
                until: Instant::now() + ttl,
            },
        );
        let shelf = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("kvik-repl-shelf".into())
            .spawn(move || {
                std::thread::sleep(ttl);
                if let Some(shelf) = shelf.upgrade() {
                    shelf.expire();
                }
            });
    }

    /// Takes the checkpoint `id` of history `replid`, if still kept.
    pub fn take(&self, id: &str, replid: &str) -> Option<Arc<Made>> {
        let mut kept = self.kept.lock();
        let s = kept.remove(id)?;
        (s.replid == replid && s.until > Instant::now()).then_some(s.made)
    }

    /// Forgets the checkpoints whose time is up.
    pub fn expire(&self) {
        let now = Instant::now();
        self.kept.lock().retain(|_, s| s.until > now);
    }

    pub fn len(&self) -> usize {
        self.kept.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a sender needs besides the checkpoint: the rate limit, whether the link is still
/// wanted, and where to report the bytes sent and the throttle's waits (after each chunk).
pub struct Pace<'a> {
    pub throttle: &'a mut Throttle,
    pub limit: &'a dyn Fn() -> u64,
    pub keep_going: &'a dyn Fn() -> bool,
    pub progress: &'a mut dyn FnMut(u64, u64),
}

/// The plan of one transfer: the files, the total size, and what the replica already holds.
pub struct Plan {
    pub files: Vec<(String, u64)>,
    pub total: u64,
    /// Index of the first file to send and the offset to start it at.
    pub first: usize,
    pub first_offset: u64,
    /// Bytes not sent because the replica holds them.
    pub skipped: u64,
}

impl Plan {
    /// The whole checkpoint, or its rest after `resume` if that names a point inside it.
    pub fn new(made: &Made, resume: Option<&Resume>) -> io::Result<Plan> {
        let files = made.files()?;
        let total = files.iter().map(|(_, s)| s).sum();
        let point = resume.filter(|r| r.id == made.id).and_then(|r| {
            let i = files.iter().position(|(n, _)| *n == r.file)?;
            (r.offset <= files[i].1).then_some((i, r.offset))
        });
        let (first, first_offset) = point.unwrap_or((0, 0));
        let skipped = files[..first].iter().map(|(_, s)| s).sum::<u64>() + first_offset;
        Ok(Plan {
            files,
            total,
            first,
            first_offset,
            skipped,
        })
    }
}

/// Streams the planned part of the checkpoint, then its sequence number; returns the bytes
/// of file data sent.
pub fn send(made: &Made, plan: &Plan, out: &mut impl Write, pace: Pace<'_>) -> io::Result<u64> {
    protocol::write_frame(
        out,
        SYNC_START,
        &[
            &plan.total.to_le_bytes(),
            &plan.skipped.to_le_bytes(),
            made.id.as_bytes(),
        ],
    )?;
    let mut sent = 0u64;
    let mut buf = vec![0u8; CHUNK_SIZE];
    for (i, (name, size)) in plan.files.iter().enumerate().skip(plan.first) {
        let from = if i == plan.first {
            plan.first_offset
        } else {
            0
        };
        let mut f = File::open(made.dir.join(name))?;
        f.seek(SeekFrom::Start(from))?;
        protocol::write_frame(
            out,
            FILE,
            &[&size.to_le_bytes(), &from.to_le_bytes(), name.as_bytes()],
        )?;
        let mut left = size - from;
        while left > 0 {
            let chunk = Throttle::chunk((pace.limit)(), CHUNK_SIZE).min(left as usize);
            if !pace
                .throttle
                .admit(chunk as u64, pace.limit, pace.keep_going)
            {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "link closed"));
            }
            let n = f.read(&mut buf[..chunk])?;
            if n == 0 {
                return Err(io::Error::other(format!("{name} shrank while being sent")));
            }
            protocol::write_frame(out, CHUNK, &[&buf[..n]])?;
            left -= n as u64;
            sent += n as u64;
            (pace.progress)(sent, pace.throttle.waits);
        }
    }
    protocol::write_frame(out, CHECKPOINT_END, &[&made.seq.to_le_bytes()])?;
    out.flush()?;
    Ok(sent)
}

/// A replica's download: what it holds, kept across a cut link so the next one resumes.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// The checkpoint's id and total size (empty, 0: nothing started).
    pub id: String,
    pub total: u64,
    /// Bytes held from earlier transfers of this checkpoint, and read in this one.
    pub held: u64,
    pub read: u64,
    /// The file being written and how many of its bytes are on disk.
    pub file: String,
    pub file_offset: u64,
}

impl Progress {
    /// Bytes of the checkpoint on disk.
    pub fn have(&self) -> u64 {
        self.held + self.read
    }

    /// Where to ask the primary to resume, if anything is held.
    pub fn resume(&self) -> Option<Resume> {
        (!self.id.is_empty() && !self.file.is_empty()).then(|| Resume {
            id: self.id.clone(),
            file: self.file.clone(),
            offset: self.file_offset,
        })
    }
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Receives a checkpoint into `dir`; returns its sequence number. A transfer that starts from
/// zero empties `dir` first; one that resumes must continue exactly where `progress` stands.
/// `progress` is kept current (also when this fails) and `on_progress` is called after the
/// start frame and after every chunk; when it returns false the transfer is abandoned.
pub fn receive(
    r: &mut impl Read,
    dir: &Path,
    progress: &mut Progress,
    mut on_progress: impl FnMut(&Progress) -> bool,
) -> io::Result<u64> {
    let mut payload = Vec::new();
    loop {
        match protocol::read_frame(r, &mut payload)? {
            SYNC_START => break,
            protocol::PING => {}
            t => return Err(bad(&format!("unexpected frame {t} before a full sync"))),
        }
    }
    let total = protocol::u64_at(&payload)?;
    let skipped = protocol::u64_at(payload.get(8..).unwrap_or_default())?;
    let id = String::from_utf8_lossy(&payload[16..]).into_owned();
    if skipped == 0 {
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir)?;
        *progress = Progress::default();
    } else if id != progress.id || skipped != progress.have() {
        *progress = Progress::default();
        return Err(bad(
            "the primary resumed a transfer this replica does not hold",
        ));
    }
    progress.id = id;
    progress.total = total;
    progress.held = skipped;
    progress.read = 0;
    let abandoned = || io::Error::other("full sync abandoned");
    if !on_progress(progress) {
        return Err(abandoned());
    }
    let mut file: Option<(File, u64)> = None;
    loop {
        match protocol::read_frame(r, &mut payload)? {
            FILE => {
                finish(file.take())?;
                let size = protocol::u64_at(&payload)?;
                let from = protocol::u64_at(payload.get(8..).unwrap_or_default())?;
                let name = std::str::from_utf8(&payload[16..])
                    .ok()
                    .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != "..")
                    .ok_or_else(|| bad("bad file name"))?;
                if from > size {
                    return Err(bad("file offset past its size"));
                }
                let path = dir.join(name);
                let f = if from == 0 {
                    File::create(&path)?
                } else {
                    let held = OpenOptions::new().append(true).open(&path);
                    match held {
                        Ok(f) if name == progress.file && f.metadata()?.len() == from => f,
                        _ => {
                            // Not what this replica holds after all: the next sync starts
                            // from zero rather than failing the same way again.
                            *progress = Progress::default();
                            return Err(bad("resumed file does not match what is held"));
                        }
                    }
                };
                progress.file = name.to_string();
                progress.file_offset = from;
                file = Some((f, size - from));
            }
            CHUNK => {
                let (f, left) = file.as_mut().ok_or_else(|| bad("chunk outside a file"))?;
                if payload.len() as u64 > *left {
                    return Err(bad("file overrun"));
                }
                f.write_all(&payload)?;
                *left -= payload.len() as u64;
                progress.read += payload.len() as u64;
                progress.file_offset += payload.len() as u64;
                if !on_progress(progress) {
                    return Err(abandoned());
                }
            }
            CHECKPOINT_END => {
                finish(file.take())?;
                return protocol::u64_at(&payload);
            }
            protocol::PING => {}
            t => return Err(bad(&format!("unexpected frame {t} during a full sync"))),
        }
    }
}

fn finish(file: Option<(File, u64)>) -> io::Result<()> {
    match file {
        Some((f, 0)) => f.sync_all(),
        Some(_) => Err(bad("file cut short")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made_with(files: &[(&str, usize)]) -> (tempfile::TempDir, Made) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ckpt");
        fs::create_dir_all(&dir).unwrap();
        for (name, size) in files {
            let data: Vec<u8> = (0..*size).map(|i| (i * 7 % 251) as u8).collect();
            fs::write(dir.join(name), data).unwrap();
        }
        let made = Made {
            id: "abc-1".into(),
            dir,
            seq: 42,
        };
        (tmp, made)
    }

    fn send_all(made: &Made, resume: Option<&Resume>) -> (Vec<u8>, Plan) {
        let plan = Plan::new(made, resume).unwrap();
        let mut out = Vec::new();
        let mut throttle = Throttle::default();
        send(
            made,
            &plan,
            &mut out,
            Pace {
                throttle: &mut throttle,
                limit: &|| 0,
                keep_going: &|| true,
                progress: &mut |_, _| {},
            },
        )
        .unwrap();
        (out, plan)
    }

    #[test]
    fn a_cut_transfer_resumes_where_it_stopped() {
        let (tmp, made) =
            made_with(&[("000001.sst", 700_000), ("CURRENT", 16), ("MANIFEST", 3000)]);
        let into = tmp.path().join("incoming");
        let (whole, plan) = send_all(&made, None);
        assert_eq!(plan.skipped, 0);
        // The link dies inside the first file.
        let mut progress = Progress::default();
        let mut cut = &whole[..400_000];
        assert!(receive(&mut cut, &into, &mut progress, |_| true).is_err());
        let resume = progress.resume().unwrap();
        assert_eq!(resume.file, "000001.sst");
        assert_eq!(resume.offset, CHUNK_SIZE as u64); // the one whole chunk received
        assert_eq!(Resume::parse(&resume.encode()), Some(resume.clone()));
        // The rest only.
        let (rest, plan) = send_all(&made, Some(&resume));
        assert_eq!(plan.skipped, resume.offset);
        // Only the frames' headers are sent again, not the bytes held.
        assert!(rest.len() as u64 + resume.offset <= whole.len() as u64 + 64);
        let seq = receive(&mut rest.as_slice(), &into, &mut progress, |_| true).unwrap();
        assert_eq!(seq, 42);
        assert_eq!(progress.have(), plan.total);
        for (name, _) in made.files().unwrap() {
            assert_eq!(
                fs::read(into.join(&name)).unwrap(),
                fs::read(made.dir.join(&name)).unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn an_unknown_resume_point_sends_everything() {
        let (_tmp, made) = made_with(&[("a", 10), ("b", 20)]);
        for r in [
            Resume {
                id: "other".into(),
                file: "a".into(),
                offset: 5,
            },
            Resume {
                id: "abc-1".into(),
                file: "zz".into(),
                offset: 5,
            },
            Resume {
                id: "abc-1".into(),
                file: "a".into(),
                offset: 11,
            },
        ] {
            let plan = Plan::new(&made, Some(&r)).unwrap();
            assert_eq!((plan.first, plan.first_offset, plan.skipped), (0, 0, 0));
        }
        let r = Resume {
            id: "abc-1".into(),
            file: "b".into(),
            offset: 20,
        };
        let plan = Plan::new(&made, Some(&r)).unwrap();
        assert_eq!((plan.first, plan.skipped, plan.total), (1, 30, 30));
    }

    #[test]
    fn a_resume_the_replica_does_not_hold_is_refused() {
        let (tmp, made) = made_with(&[("a", 1000)]);
        let r = Resume {
            id: "abc-1".into(),
            file: "a".into(),
            offset: 500,
        };
        let (rest, _) = send_all(&made, Some(&r));
        let mut progress = Progress::default();
        let into = tmp.path().join("incoming");
        assert!(receive(&mut rest.as_slice(), &into, &mut progress, |_| true).is_err());
        assert!(progress.resume().is_none());
        // It claims the bytes, but its file is gone: the next sync starts from zero.
        let mut progress = Progress {
            id: "abc-1".into(),
            total: 1000,
            held: 500,
            read: 0,
            file: "a".into(),
            file_offset: 500,
        };
        assert!(receive(&mut rest.as_slice(), &into, &mut progress, |_| true).is_err());
        assert!(progress.resume().is_none());
    }
}
