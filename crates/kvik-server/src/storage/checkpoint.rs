//! Consistent on-disk copies of the whole database (RocksDB checkpoints): what SAVE and BGSAVE
//! write and `kvik-server --restore-from` starts from. The one place that makes or restores a
//! checkpoint, so every user of them (backups, a replica's full sync) shares it.
//!
//! A checkpoint is a directory RocksDB can open as it is: SST files hard-linked when the target
//! is on the same filesystem (so a checkpoint costs little space until compaction replaces the
//! live files), copied otherwise, plus a fresh MANIFEST, OPTIONS and the WAL up to the moment it
//! was taken. Every column family is in it: the keys, kvik's internal records (the database
//! table of SWAPDB, functions, the version floor) and the key counts, so a restored server needs
//! no recount.
//!
//! [`create`] replaces an existing checkpoint atomically: the new one is built beside it under
//! `<target>.tmp`, then renamed over it (the old one goes to `<target>.old` for the instant in
//! between and is then deleted), so a crash leaves either the old or the new checkpoint whole.

use super::{Storage, StorageError};
use std::path::{Path, PathBuf};

/// Why a checkpoint could not be made or restored.
#[derive(Debug)]
pub enum CheckpointError {
    Rocks(StorageError),
    Io(String, std::io::Error),
    /// `--restore-from` into a directory that already holds a database.
    NotEmpty(PathBuf),
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointError::Rocks(e) => write!(f, "{e}"),
            CheckpointError::Io(what, e) => write!(f, "{what}: {e}"),
            CheckpointError::NotEmpty(p) => write!(
                f,
                "{} already holds a database; restore into an empty directory",
                p.display()
            ),
        }
    }
}

fn io(what: impl FnOnce() -> String) -> impl FnOnce(std::io::Error) -> CheckpointError {
    move |e| CheckpointError::Io(what(), e)
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

impl Storage {
    /// Makes a RocksDB checkpoint (hard links to the SST files) in `dir`, which must not exist:
    /// the one way SAVE/BGSAVE and replication's full sync copy the live database.
    pub fn checkpoint(&self, dir: &Path) -> super::StorageResult<()> {
        rocksdb::checkpoint::Checkpoint::new(&self.db)?.create_checkpoint(dir)
    }
}

/// Writes a checkpoint of `storage` to the directory `target`, replacing one already there.
/// Returns the RocksDB sequence number it holds (writes after it are not in it).
pub fn create(storage: &Storage, target: &Path) -> Result<u64, CheckpointError> {
    let tmp = with_suffix(target, ".tmp");
    let old = with_suffix(target, ".old");
    for leftover in [&tmp, &old] {
        if leftover.exists() {
            std::fs::remove_dir_all(leftover)
                .map_err(io(|| format!("cannot remove {}", leftover.display())))?;
        }
    }
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(io(|| format!("cannot create {}", parent.display())))?;
    }
    let sequence = storage.db.latest_sequence_number();
    storage.checkpoint(&tmp).map_err(CheckpointError::Rocks)?;
    let replacing = target.exists();
    if replacing {
        std::fs::rename(target, &old)
            .map_err(io(|| format!("cannot move {} aside", target.display())))?;
    }
    std::fs::rename(&tmp, target)
        .map_err(io(|| format!("cannot rename to {}", target.display())))?;
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        // The rename is durable once the directory is synced.
        if let Ok(d) = std::fs::File::open(parent) {
            let _ = d.sync_all();
        }
    }
    if replacing {
        std::fs::remove_dir_all(&old).map_err(io(|| format!("cannot remove {}", old.display())))?;
    }
    Ok(sequence)
}

/// Copies the checkpoint `from` into the data directory `to` (created if needed), which must not
/// hold a database yet; the server then opens `to` as usual. The checkpoint is left untouched.
pub fn restore(from: &Path, to: &Path) -> Result<(), CheckpointError> {
    if !from.join("CURRENT").is_file() {
        return Err(CheckpointError::Io(
            format!("{} is not a checkpoint", from.display()),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        ));
    }
    if to.join("CURRENT").exists() {
        return Err(CheckpointError::NotEmpty(to.to_path_buf()));
    }
    std::fs::create_dir_all(to).map_err(io(|| format!("cannot create {}", to.display())))?;
    let entries =
        std::fs::read_dir(from).map_err(io(|| format!("cannot read {}", from.display())))?;
    for entry in entries {
        let entry = entry.map_err(io(|| format!("cannot read {}", from.display())))?;
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            let dst = to.join(entry.file_name());
            std::fs::copy(entry.path(), &dst)
                .map_err(io(|| format!("cannot copy to {}", dst.display())))?;
        }
    }
    Ok(())
}

impl Storage {
    /// RocksDB's latest sequence number: it grows with every write (INFO's changes since the
    /// last save are the difference).
    pub fn sequence(&self) -> u64 {
        self.db.latest_sequence_number()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::encoding::Meta;
    use crate::storage::Batch;

    fn put(s: &Storage, key: &[u8], v: &[u8]) {
        let mut b = Batch::default();
        b.put_meta(s, 0, key, &Meta::string(v.to_vec(), 0));
        s.commit(b).unwrap();
    }

    #[test]
    fn a_checkpoint_restores_to_the_state_it_was_taken_at() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("backup");
        {
            let s = Storage::open(&dir.path().join("data")).unwrap();
            put(&s, b"k", b"1");
            create(&s, &target).unwrap();
            put(&s, b"k", b"2");
            put(&s, b"j", b"x");
            // Replacing keeps exactly one checkpoint.
            create(&s, &target).unwrap();
            put(&s, b"k", b"3");
            assert!(!with_suffix(&target, ".tmp").exists());
            assert!(!with_suffix(&target, ".old").exists());
        }
        let restored = dir.path().join("restored");
        restore(&target, &restored).unwrap();
        assert!(matches!(
            restore(&target, &restored),
            Err(CheckpointError::NotEmpty(_))
        ));
        let s = Storage::open(&restored).unwrap();
        assert_eq!(s.get_meta(0, b"k").unwrap().unwrap().value, b"2");
        assert_eq!(s.key_count(0), 2);
    }
}
