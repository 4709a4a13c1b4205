//! Reads see whole writes: no reader observes part of a multi-key write (MSET, EXEC, a script),
//! as no Redis client can, since Redis runs each of them in one go.
//!
//! Writers hold the stripe locks of every key they write from their first read to their last
//! cache update (`storage::locks`; EXEC and scripts lock all their keys up front), and RocksDB
//! commits each batch atomically; what a reader has to avoid is reading its keys while such a
//! writer is between its first and its last write. On a worker, a read command simply takes the
//! locks of its keys too ([`lock_read_keys`]). On an I/O thread, which never waits, a cached
//! read first checks that no writer holds one of its keys and, when it reads several, that no
//! write of any of them began or ended while it read ([`RtcRead`]); otherwise the pool runs it.
//! A worker runs the reads the I/O threads may run that way the same way first
//! ([`RtcRead::begin_on_worker`]), as its locks would stop the I/O threads' reads of those keys
//! meanwhile: while workers kept reading a hot key under its lock, the I/O threads' reads of it
//! found it held, went to the pool too and took the lock in turn, and the key stayed there for
//! as long as the load lasted. Reads without key arguments (KEYS, SCAN, DBSIZE) take no locks.

use super::spec::Flags;
use super::Entry;
use crate::cache::FillToken;
use crate::reply::Args;
use crate::server::Server;
use crate::storage::locks::KeyGuard;
use crate::storage::locks::Patience;
use std::sync::atomic::Ordering::Relaxed;

/// The keys `args` names, per `entry`'s spec (allocates only for movable keys).
fn keys<'a>(entry: &Entry, args: &'a Args) -> impl Iterator<Item = &'a [u8]> {
    let spec = entry.spec;
    let movable = spec.keys_fn.map(|f| f(args)).unwrap_or_default();
    let fixed = spec
        .keys_fn
        .is_none()
        .then(|| spec.keys.positions(args.len()));
    movable
        .into_iter()
        .chain(fixed.into_iter().flatten())
        .filter_map(move |i| args.get(i).map(|a| &a[..]))
}

/// On a worker: the locks of a read-only command's keys in database `db`, held while it runs.
pub(super) fn lock_read_keys<'s>(
    server: &'s Server,
    db: u16,
    entry: &Entry,
    args: &Args,
) -> Option<KeyGuard<'s>> {
    if !entry.spec.flags.contains(Flags::READONLY) {
        return None;
    }
    let mut keys = keys(entry, args).peekable();
    keys.peek()?;
    Some(server.storage.lock_in(keys.map(|k| (db, k))))
}

/// On an I/O thread: [`lock_read_keys`] without waiting; `Err(Busy)` if another thread holds
/// one of the stripes.
pub(super) fn try_lock_read_keys<'s>(
    server: &'s Server,
    db: u16,
    entry: &Entry,
    args: &Args,
) -> Result<Option<KeyGuard<'s>>, Busy> {
    if !entry.spec.flags.contains(Flags::READONLY) {
        return Ok(None);
    }
    let mut keys = keys(entry, args).peekable();
    if keys.peek().is_none() {
        return Ok(None);
    }
    server
        .storage
        .try_lock_in_for(
            keys.map(|k| (db, k)),
            Patience::uniform(std::time::Duration::ZERO),
        )
        .map(Some)
        .ok_or(Busy)
}

/// A writer holds one of the keys (see [`try_lock_read_keys`]).
pub(super) struct Busy;

/// A cached read on an I/O thread, checked against writes in progress.
pub(super) struct RtcRead {
    /// The cache write epochs of its keys when it began (only for reads of several keys).
    epochs: Vec<FillToken>,
}

impl RtcRead {
    /// `None` if a writer holds one of the keys: the pool runs the read (it waits for it).
    /// The epochs are noted before the locks are checked, so a writer that locks after the
    /// check and writes before [`RtcRead::still_whole`] is seen there.
    pub(super) fn begin(server: &Server, db: u16, entry: &Entry, args: &Args) -> Option<RtcRead> {
        let several = keys(entry, args).take(2).count() > 1;
        Self::begin_with(server, db, entry, args, several)
    }

    /// [`RtcRead::begin`] for a read its worker handler runs on an I/O thread
    /// (`CommandSpec::rtc_nowait_read`, and `rtc_storage` reads that missed the hot cache): the
    /// epoch of a single key is noted too, since its reads come from RocksDB (a hash's meta
    /// record, then a field), not from one cache entry read whole. Checking epochs instead of
    /// taking the keys' locks lets the I/O threads read one hot key at the same time (with
    /// locks, HGET of one big hash sent 14% of its calls to the pool, each waiting there for
    /// the other readers' locks).
    pub(super) fn begin_stored(
        server: &Server,
        db: u16,
        entry: &Entry,
        args: &Args,
    ) -> Option<RtcRead> {
        Self::begin_with(server, db, entry, args, true)
    }

    /// On a worker: [`RtcRead::begin_stored`] for a read the I/O threads run that way
    /// (`pool-reads-unlocked`); `None` means it takes its keys' locks ([`lock_read_keys`]), as
    /// it does again if the check fails after it ran.
    pub(super) fn begin_on_worker(
        server: &Server,
        db: u16,
        entry: &Entry,
        args: &Args,
    ) -> Option<RtcRead> {
        let spec = entry.spec;
        let unlocked = (spec.rtc_nowait_read || spec.rtc_storage)
            && spec.flags.contains(Flags::READONLY)
            && server.config.pool_reads_unlocked.load(Relaxed);
        if !unlocked || keys(entry, args).next().is_none() {
            return None;
        }
        Self::begin_stored(server, db, entry, args)
    }

    fn begin_with(
        server: &Server,
        db: u16,
        entry: &Entry,
        args: &Args,
        note_epochs: bool,
    ) -> Option<RtcRead> {
        let storage = &server.storage;
        let epochs = if note_epochs {
            keys(entry, args)
                .map(|key| storage.cache().fill_token(db, key))
                .collect()
        } else {
            Vec::new()
        };
        if keys(entry, args).any(|key| storage.key_locked(db, key)) {
            return None;
        }
        Some(RtcRead { epochs })
    }

    /// After the read: true if no write of its keys began or ended meanwhile (always for a
    /// cached read of one key: its cache entry is read whole).
    pub(super) fn still_whole(&self, server: &Server) -> bool {
        let cache = server.storage.cache();
        self.epochs.iter().all(|t| cache.unchanged(t))
    }
}
