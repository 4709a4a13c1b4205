//! The process allocator: jemalloc, which RocksDB's build links in without a prefix, so Rust's
//! allocations (through the system allocator) and RocksDB's C++ ones both go to it.
//!
//! Role: the two jemalloc settings that decide how soon memory the server frees leaves its
//! RSS, applied at startup and on CONFIG SET, and the allocator's name for INFO. jemalloc keeps
//! freed pages of each arena ("dirty") for `dirty_decay_ms` before it returns them to the
//! kernel (10 s by default), and without its background thread it returns them only when a
//! thread allocating in that arena passes by. Under writes at size the block cache gives up
//! blocks as the memtables grow, and compactions come and go: memory freed in one arena and
//! wanted in another, held in RSS meanwhile. The arenas themselves (one per CPU rather than
//! jemalloc's four) are fixed before the first allocation, by `malloc_conf` in the server's
//! `main.rs` (docs/benchmarks.md section 25).

use tikv_jemalloc_ctl::{arenas, background_thread, raw, version};

/// jemalloc's settings as kvik's settings `jemalloc-bg-thread` and `jemalloc-dirty-decay-ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// A background thread returns dirty pages on the decay schedule (Redis's default too).
    pub background_thread: bool,
    /// How long freed pages stay before they go back to the kernel: 0 at once, -1 never.
    pub dirty_decay_ms: i64,
}

/// Applies `tuning` to the running allocator: to the arenas that exist and, through
/// `arenas.dirty_decay_ms`, to those created later.
pub fn apply(tuning: Tuning) -> Result<(), String> {
    background_thread::write(tuning.background_thread)
        .map_err(|e| format!("jemalloc background_thread: {e}"))?;
    let decay = tuning.dirty_decay_ms as isize;
    // SAFETY: `arenas.dirty_decay_ms` is an ssize_t setting (jemalloc's mallctl manual), and
    // the name is NUL-terminated as raw::write requires.
    unsafe { raw::write(b"arenas.dirty_decay_ms\0", decay) }
        .map_err(|e| format!("jemalloc arenas.dirty_decay_ms: {e}"))?;
    let count = arenas::narenas::read().map_err(|e| format!("jemalloc arenas.narenas: {e}"))?;
    for arena in 0..count {
        let name = format!("arena.{arena}.dirty_decay_ms\0");
        // SAFETY: as above, per arena. An index whose arena was never created answers EFAULT,
        // which is ignored: it will take the `arenas.` default when it is.
        let _ = unsafe { raw::write(name.as_bytes(), decay) };
    }
    Ok(())
}

/// What the process runs, as Redis's INFO `mem_allocator` says it (`jemalloc-5.3.1`).
pub fn name() -> String {
    match version::read() {
        Ok(v) => format!("jemalloc-{}", v.split('-').next().unwrap_or(v)),
        Err(_) => "jemalloc".into(),
    }
}

/// How many arenas jemalloc runs (kvik-server starts it with one per CPU; see its `main.rs`).
pub fn arenas() -> Option<u32> {
    arenas::narenas::read().ok()
}

/// The allocator's current settings, read back (tests, INFO).
pub fn current() -> Result<Tuning, String> {
    let purging =
        background_thread::read().map_err(|e| format!("jemalloc background_thread: {e}"))?;
    // SAFETY: `arenas.dirty_decay_ms` is an ssize_t, NUL-terminated name.
    let decay: isize = unsafe { raw::read(b"arenas.dirty_decay_ms\0") }
        .map_err(|e| format!("jemalloc arenas.dirty_decay_ms: {e}"))?;
    Ok(Tuning {
        background_thread: purging,
        dirty_decay_ms: decay as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings reach jemalloc (the process allocator of the test binary too: the rocksdb
    /// dependency links it in) and read back; the name carries the version.
    #[test]
    fn settings_reach_the_allocator_and_read_back() {
        let before = current().unwrap();
        for tuning in [
            Tuning {
                background_thread: true,
                dirty_decay_ms: 1000,
            },
            Tuning {
                background_thread: false,
                dirty_decay_ms: 10_000,
            },
        ] {
            apply(tuning).unwrap();
            assert_eq!(current().unwrap(), tuning);
        }
        apply(before).unwrap();
        assert!(name().starts_with("jemalloc-5."), "{}", name());
    }
}
