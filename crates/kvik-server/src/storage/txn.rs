//! Transactions written as one RocksDB batch: EXEC and scripts.
//!
//! Redis writes a transaction or a script to its AOF in one piece, so after a crash it is
//! there whole or not at all. kvik's commands each build a [`Batch`] and commit it; inside
//! [`Storage::begin_txn`] a commit does not reach RocksDB: the batch's operations are added to
//! one combined batch that the transaction's end ([`Txn::commit`]) writes as a single RocksDB
//! write (one WAL record), with the key counts and the expiry index worked out over all its
//! writes in order. Until then:
//!
//! - this thread's reads see the buffered writes over RocksDB ([`Overlay`]: point reads, member
//!   cursors and meta scans go through it), so a later command of the transaction reads what an
//!   earlier one wrote;
//! - the hot cache already holds the buffered values (the transaction applies each command's
//!   cache effect as it buffers it), which no other thread can see: the transaction holds the
//!   locks of every key it writes, and readers wait for them or, on an I/O thread, leave a locked
//!   key to the pool (`cmd::isolation`); the keys' writes stay in flight in the cache until the
//!   end, so no reader fills one of them with what RocksDB still holds;
//! - each key's state before the transaction is noted at its first write (from the hot cache or
//!   RocksDB), which is what the counts need at the end.
//!
//! A FLUSHDB or FLUSHALL inside a transaction first writes what is buffered (it range-deletes
//! RocksDB directly), so such a transaction is written in two parts. A transaction that buffers
//! more than [`MAX_BUFFERED_BYTES`] is written in parts too (memory stays bounded); both are
//! rare and documented in docs/compatibility.md.

use super::counts::KeyState;
use super::encoding::decode_meta_key;
use super::{Batch, CacheEffect, Storage, StorageResult, Wait, CF_DATA, CF_META, CF_SCORE};
use crate::fast_hash::FastHash;
use crate::key_list::KeyList;
use bytes::Bytes;
use hashbrown::HashTable;
use rocksdb::{DBRawIteratorWithThreadMode, DB};
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::Ordering;

/// A transaction's buffered batches past this size are written out (in parts; see the module
/// header).
pub const MAX_BUFFERED_BYTES: usize = 64 << 20;

/// One write of a [`Batch`], kept while a transaction is open so the batch can be replayed into
/// the transaction's combined batch and its overlay.
pub(super) enum Op {
    Put(&'static str, Bytes, Bytes),
    Delete(&'static str, Bytes),
    DeleteRange(&'static str, Bytes, Bytes),
}

thread_local! {
    /// The transaction open on this thread, if any.
    static OPEN: RefCell<Option<Open>> = const { RefCell::new(None) };
    /// `OPEN.is_some()`, readable without a borrow: every new [`Batch`] asks it.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread has a transaction open: batches built now record their operations.
pub(super) fn recording() -> bool {
    RECORDING.with(Cell::get)
}

/// An open transaction's buffered state.
struct Open {
    /// Which storage it belongs to (tests open several in one process).
    storage: usize,
    /// The buffered batches' cache effects and flags; its RocksDB batch stays empty until the
    /// transaction is written, when `ops` are replayed into it.
    batch: Batch,
    /// Every buffered write, in order, and their bytes (keys and values).
    ops: Vec<Op>,
    ops_bytes: usize,
    /// Which of `ops` a later write of the same record replaces.
    superseded: Superseded,
    /// What this thread reads of the buffered writes: `ops[..overlay_upto]` applied (most
    /// turns of an I/O thread never read what they wrote, so they never build it).
    overlay: Overlay,
    overlay_upto: usize,
    prior: Prior,
    /// Set by [`Storage::txn_savepoint`]: what [`Storage::txn_rollback`] undoes.
    savepoint: Option<Undo>,
    /// A part was written already (`Storage::settle_txn`).
    settled: bool,
    /// The write of a part failed: the transaction's end reports it (replies already made
    /// for that part must not be sent as acknowledgements).
    failed: Option<super::StorageError>,
}

/// How to go back to a savepoint: the lengths then, and what the buffering since changed in
/// [`Prior`].
struct Undo {
    ops: usize,
    ops_bytes: usize,
    effects: usize,
    /// Keys whose prior state was noted since.
    noted: Vec<Bytes>,
    /// Keys whose latest state changed since, with the state before (in order).
    latest: Vec<(Bytes, Option<KeyState>)>,
    /// What [`Superseded::note`] changed since.
    superseded: SupersededUndo,
}

/// Which buffered writes a later write of the same record (column family and key) replaces.
/// The combined batch leaves them out: RocksDB's memtable insert is the largest cost of a
/// write, and a hot key written 200 times in an I/O thread's turn needs one, not 200. The
/// batch is written whole, so no reader could have seen the writes left out; the overlay
/// (this thread's reads of its buffered writes) still applies every write in order, and ends
/// the same. Range deletions are kept as they are.
#[derive(Default)]
struct Superseded {
    /// (hash of a record, index in `Open::ops` of its latest write). Only the hash is kept:
    /// a match is confirmed against the write itself, so noting a write copies nothing.
    latest: HashTable<(u64, usize)>,
    /// `left_out[i]`: `ops[i]` is replaced by a later write.
    left_out: Vec<bool>,
    /// How many of `left_out` are set.
    count: usize,
}

/// What [`Superseded::note`] changed after a savepoint, to undo it.
#[derive(Default)]
struct SupersededUndo {
    /// Writes marked replaced.
    left_out: Vec<usize>,
    /// Records whose latest write changed: (hash, the index after, the index before).
    latest: Vec<(u64, usize, Option<usize>)>,
}

thread_local! {
    /// The last transaction's buffers, emptied (see [`Room`]).
    static ROOM: RefCell<Room> = RefCell::default();
}

/// The buffers a transaction grows as it buffers writes, kept empty between transactions so
/// the thread's next one starts with their room: an I/O thread opens one per turn (~170
/// writes a turn under pipelined SETs), and growing them from nothing each time took ~3% of
/// the server's CPU (rehashing the key states; `ops` past 16 KiB takes jemalloc's large
/// allocation path at every doubling).
#[derive(Default)]
struct Room {
    ops: Vec<Op>,
    superseded: Superseded,
    states: HashMap<Bytes, KeyState, FastHash>,
    latest: HashMap<Bytes, KeyState, FastHash>,
}

/// Entries past which a buffer is dropped rather than kept (one EXEC of 100,000 writes would
/// otherwise pin its room on the thread for good).
const ROOM_KEEP: usize = 4096;

impl Room {
    /// Empty buffers, with the room the thread's last transaction left.
    fn take() -> Room {
        ROOM.with(|r| std::mem::take(&mut *r.borrow_mut()))
    }

    /// Empties the buffers and keeps them for the thread's next transaction.
    fn give_back(mut self) {
        fn keep<T: Default>(buffer: &mut T, room: fn(&T) -> usize, clear: fn(&mut T)) {
            if room(buffer) > ROOM_KEEP {
                *buffer = T::default();
            } else {
                clear(buffer);
            }
        }
        keep(&mut self.ops, Vec::capacity, Vec::clear);
        keep(&mut self.states, HashMap::capacity, HashMap::clear);
        keep(&mut self.latest, HashMap::capacity, HashMap::clear);
        keep(
            &mut self.superseded,
            |s| s.latest.capacity().max(s.left_out.capacity()),
            |s| {
                s.latest.clear();
                s.left_out.clear();
                s.count = 0;
            },
        );
        ROOM.with(|r| *r.borrow_mut() = self);
    }
}

/// The point record a write changes: its column family and key.
fn record(op: &Op) -> Option<(&'static str, &[u8])> {
    match op {
        Op::Put(cf, k, _) | Op::Delete(cf, k) => Some((cf, k)),
        Op::DeleteRange(..) => None,
    }
}

fn record_hash(cf: &'static str, key: &[u8]) -> u64 {
    crate::fast_hash::key_hash(crate::fast_hash::process_seed(), cf.len() as u16, key)
}

impl Superseded {
    /// Notes `ops[at..]`, just buffered: each point write replaces the record's earlier one.
    fn note(&mut self, ops: &[Op], at: usize, mut undo: Option<&mut SupersededUndo>) {
        self.left_out.resize(ops.len(), false);
        for (i, op) in ops.iter().enumerate().skip(at) {
            let Some((cf, key)) = record(op) else {
                continue;
            };
            let h = record_hash(cf, key);
            let same = |&(eh, j): &(u64, usize)| eh == h && record(&ops[j]) == Some((cf, key));
            let before = match self.latest.find_mut(h, same) {
                Some(entry) => Some(std::mem::replace(&mut entry.1, i)),
                None => {
                    self.latest.insert_unique(h, (h, i), |&(eh, _)| eh);
                    None
                }
            };
            if let Some(earlier) = before {
                self.left_out[earlier] = true;
                self.count += 1;
            }
            if let Some(undo) = undo.as_deref_mut() {
                undo.left_out.extend(before);
                undo.latest.push((h, i, before));
            }
        }
    }

    /// Goes back to a savepoint at `ops` writes: the writes marked since count again.
    fn undo(&mut self, undo: SupersededUndo, ops: usize) {
        for i in undo.left_out {
            if std::mem::replace(&mut self.left_out[i], false) {
                self.count -= 1;
            }
        }
        for (h, after, before) in undo.latest.into_iter().rev() {
            let Ok(entry) = self.latest.find_entry(h, |&(eh, j)| eh == h && j == after) else {
                continue;
            };
            match before {
                Some(j) => entry.into_mut().1 = j,
                None => {
                    entry.remove();
                }
            }
        }
        self.left_out.truncate(ops);
    }
}

/// The states of the keys a transaction writes, as they were before it.
#[derive(Default)]
pub(super) struct Prior {
    /// Raw meta key -> the key's state before the transaction.
    states: HashMap<Bytes, KeyState, FastHash>,
    /// Raw meta key -> its state after the transaction's latest write of it.
    latest: HashMap<Bytes, KeyState, FastHash>,
    /// The storage's flush count when the first state was noted: a FLUSHDB or FLUSHALL of
    /// another client since makes them stale.
    pub flushes: u64,
    /// The transaction is written in one piece: one RocksDB batch, which replicas apply as
    /// one, so it needs no atomic group mark (see `replica::AtomicGroup`).
    pub whole: bool,
}

impl Prior {
    pub fn state_of(&self, raw_key: &[u8]) -> Option<KeyState> {
        self.states.get(raw_key).copied()
    }
}

fn id(storage: &Storage) -> usize {
    storage as *const Storage as usize
}

/// Runs `f` on this thread's open transaction of `storage`, if there is one.
fn with_open<R>(storage: &Storage, f: impl FnOnce(&mut Open) -> R) -> Option<R> {
    if !recording() {
        return None;
    }
    OPEN.with(|o| {
        o.borrow_mut()
            .as_mut()
            .filter(|open| open.storage == id(storage))
            .map(f)
    })
}

/// A transaction: ends with [`Txn::commit`] (or, if dropped, commits then, logging an error).
/// Nested transactions (a script inside EXEC) join the outer one.
pub struct Txn<'a> {
    storage: &'a Storage,
    /// This `Txn` opened the transaction (not a nested one).
    owner: bool,
}

impl Storage {
    /// Opens a transaction on this thread (see the module header); a nested call joins it.
    pub fn begin_txn(&self) -> Txn<'_> {
        let owner = OPEN.with(|o| {
            let mut o = o.borrow_mut();
            if o.is_some() {
                return false;
            }
            let room = Room::take();
            *o = Some(Open {
                storage: id(self),
                batch: Batch::default(),
                ops: room.ops,
                ops_bytes: 0,
                superseded: room.superseded,
                overlay: Overlay::default(),
                overlay_upto: 0,
                prior: Prior {
                    states: room.states,
                    latest: room.latest,
                    ..Prior::default()
                },
                savepoint: None,
                settled: false,
                failed: None,
            });
            true
        });
        if owner {
            RECORDING.with(|r| r.set(true));
        }
        Txn {
            storage: self,
            owner,
        }
    }

    /// True if this thread has a transaction of this storage open.
    pub fn in_txn(&self) -> bool {
        with_open(self, |_| ()).is_some()
    }

    /// Key writes this thread's open transaction buffered so far (0 without one).
    pub fn txn_buffered(&self) -> usize {
        with_open(self, |open| open.batch.effects.len()).unwrap_or(0)
    }

    /// [`Storage::commit_with`] inside a transaction: notes the prior states of keys written
    /// for the first time, applies the batch's cache effects, and adds its operations to the
    /// combined batch and the overlay.
    pub(super) fn buffer(&self, mut batch: Batch, wait: Wait) -> StorageResult<()> {
        if batch.inner.as_ref().is_some_and(|b| !b.is_empty()) {
            // A write that bypassed the log: the batch cannot join the transaction, so it is
            // written on its own (a bug to fix, not a reason to lose the write).
            tracing::error!(
                "a batch's writes were not all logged: written outside its transaction"
            );
            return self.write_batch(batch, wait, None);
        }
        let log = batch.log.take().unwrap_or_default();
        // Most batches are one command's one key: no allocation for these lists then.
        let new_keys: SmallVec<[usize; 4]> = with_open(self, |open| {
            let mut seen = KeyList::with_capacity(batch.effects.len());
            batch
                .effects
                .iter()
                .enumerate()
                .filter(|(_, e)| {
                    let k = &e.raw_key[..];
                    seen.insert(k, ()) && open.prior.state_of(k).is_none()
                })
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default();
        // States before the transaction: nothing of it has touched these keys yet. The flush
        // count is read first, so a flush during the reads shows at the end.
        let flushes = self.flushes.load(Ordering::Acquire);
        // Replies that acknowledge this write wait for the transaction's write and its
        // group commit (an I/O thread holds the output of its turn until then).
        self.wal.hold_here();
        let mut states: SmallVec<[(Bytes, KeyState); 4]> = SmallVec::new();
        for &i in &new_keys {
            let (raw, read) = (&batch.effects[i].raw_key, batch.effects[i].prior);
            let cached = read.or_else(|| {
                decode_meta_key(raw).and_then(|(db, _, key)| self.cache.cached_state(db, key))
            });
            let state = match cached {
                Some(s) => s,
                None => {
                    let v = self
                        .db
                        .get_pinned_cf_opt(self.meta_cf(), raw, &wait.read_options())?;
                    KeyState::of_meta(v.as_deref())
                }
            };
            states.push((raw.clone(), state));
        }
        for e in &batch.effects {
            if let Some((db, _, key)) = decode_meta_key(&e.raw_key) {
                self.cache.begin_write(db, key);
                // As the values the entry shows (see `apply_value_held`): a big hash's edited
                // fields show the transaction's writes to its writer, and the hash's write
                // stays in flight, so readers of them look at RocksDB until it is written.
                let (put, update) = (e.put.as_ref(), e.update.as_ref());
                super::update_cache(&self.cache, db, key, put, update, true);
            }
        }
        let quiet = batch.quiet;
        let skip_superseded = self.skip_superseded.load(Ordering::Relaxed);
        let observers = self.observers.read();
        let wants_changes = observers.iter().any(|o| o.wants_changes());
        let now = crate::clock::unix_ms();
        let (oversized, changes) = with_open(self, |open| {
            if open.prior.states.is_empty() {
                open.prior.flushes = flushes;
            }
            if let Some(undo) = &mut open.savepoint {
                undo.noted.extend(states.iter().map(|(k, _)| k.clone()));
            }
            open.prior.states.extend(states);
            // Keys created, or whose expired record this write replaced: told now, in write
            // order, as a commit outside a transaction tells them (keyspace events `new` and
            // `expired` come before the command's own event, as in Redis).
            let mut changes = Vec::new();
            for e in &batch.effects {
                let before = open
                    .prior
                    .latest
                    .get(&e.raw_key[..])
                    .or_else(|| open.prior.states.get(&e.raw_key[..]))
                    .copied()
                    .unwrap_or(KeyState::Absent);
                let after = KeyState::of_meta(e.put.as_deref());
                if wants_changes {
                    let expired = matches!(before, KeyState::Present(at) if at != 0 && at <= now);
                    let created =
                        (expired || before == KeyState::Absent) && after != KeyState::Absent;
                    if expired || created {
                        changes.push((e.raw_key.clone(), expired, created));
                    }
                }
                let was = open.prior.latest.insert(e.raw_key.clone(), after);
                if let Some(undo) = &mut open.savepoint {
                    undo.latest.push((e.raw_key.clone(), was));
                }
            }
            open.ops_bytes += log.iter().map(Op::bytes).sum::<usize>();
            let at = open.ops.len();
            open.ops.extend(log);
            if skip_superseded {
                let undo = open.savepoint.as_mut().map(|u| &mut u.superseded);
                open.superseded.note(&open.ops, at, undo);
            }
            open.batch
                .effects
                .extend(batch.effects.drain(..).map(|e| CacheEffect {
                    quiet: e.quiet || quiet,
                    ..e
                }));
            for &(db, at) in &batch.field_expiry_min {
                open.batch.field_indexed(db, at);
            }
            (open.ops_bytes > MAX_BUFFERED_BYTES, changes)
        })
        .unwrap_or_default();
        if !changes.is_empty() {
            let changes: Vec<super::KeyChange<'_>> = changes
                .iter()
                .filter_map(|(raw, expired, created)| {
                    let (db, _, key) = decode_meta_key(raw)?;
                    Some(super::KeyChange {
                        db: self.dbs.logical(db),
                        key,
                        expired: *expired,
                        created: *created,
                    })
                })
                .collect();
            for o in observers.iter() {
                o.keys_changed(&changes);
            }
        }
        drop(observers);
        // Not on an I/O thread (it would wait for the write): there the run's time budget
        // ends a transaction that large first.
        if oversized && wait.allowed() {
            tracing::warn!(
                limit = MAX_BUFFERED_BYTES,
                "a transaction or script buffered more than its limit: writing it in parts"
            );
            self.settle_txn()?;
        }
        Ok(())
    }

    /// Writes what this thread's open transaction buffered so far, and goes on with an empty
    /// one (FLUSHDB inside EXEC, an oversized transaction, an I/O thread's turn that hands
    /// work to the pool).
    pub fn settle_txn(&self) -> StorageResult<()> {
        let taken = with_open(self, |open| {
            open.overlay = Overlay::default();
            open.overlay_upto = 0;
            open.ops_bytes = 0;
            open.savepoint = None;
            open.settled = true;
            (
                std::mem::take(&mut open.batch),
                std::mem::take(&mut open.ops),
                std::mem::take(&mut open.superseded),
                std::mem::take(&mut open.prior),
            )
        });
        let Some((batch, ops, superseded, prior)) = taken else {
            return Ok(());
        };
        let written = self.write_txn(batch, ops, superseded, prior, Wait::Allowed);
        with_open(self, |open| {
            // The write gave its buffers back emptied: the rest of the transaction goes on
            // in their room instead of growing new ones (an I/O thread's turn settles every
            // 256 key writes; MSET -P 16 past that in most turns).
            let room = Room::take();
            open.ops = room.ops;
            open.superseded = room.superseded;
            open.prior.states = room.states;
            open.prior.latest = room.latest;
            if let Err(e) = &written {
                open.failed.get_or_insert_with(|| e.clone());
            }
        });
        written
    }

    /// The transaction's one write: the combined batch, tallied from the states noted before
    /// it.
    fn write_txn(
        &self,
        mut batch: Batch,
        ops: Vec<Op>,
        superseded: Superseded,
        prior: Prior,
        wait: Wait,
    ) -> StorageResult<()> {
        let written = if ops.is_empty() && batch.effects.is_empty() {
            Ok(())
        } else {
            let left_out = |i: usize| superseded.left_out.get(i).copied().unwrap_or(false);
            for (i, op) in ops.iter().enumerate() {
                if !left_out(i) {
                    replay(self, super::rocks(&mut batch.inner), op);
                }
            }
            let written = self.write_batch(batch, wait, Some(&prior));
            if written.is_ok() && superseded.count > 0 {
                self.superseded_writes
                    .fetch_add(superseded.count as u64, Ordering::Relaxed);
            }
            written
        };
        Room {
            ops,
            superseded,
            states: prior.states,
            latest: prior.latest,
        }
        .give_back();
        written
    }

    /// Marks where this thread's open transaction stands, for [`Storage::txn_rollback`] (one
    /// at a time: a script run to completion on an I/O thread, inside the turn's
    /// transaction). False without an open transaction.
    pub fn txn_savepoint(&self) -> bool {
        with_open(self, |open| {
            open.savepoint = Some(Undo {
                ops: open.ops.len(),
                ops_bytes: open.ops_bytes,
                effects: open.batch.effects.len(),
                noted: Vec::new(),
                latest: Vec::new(),
                superseded: SupersededUndo::default(),
            });
        })
        .is_some()
    }

    /// Forgets the savepoint: what was buffered since stays.
    pub fn txn_release_savepoint(&self) {
        with_open(self, |open| open.savepoint = None);
    }

    /// Drops what the open transaction buffered since its savepoint: those writes are never
    /// written, and the hot cache forgets the values it showed for them.
    pub fn txn_rollback(&self) {
        let dropped = with_open(self, |open| {
            let undo = open.savepoint.take()?;
            open.ops.truncate(undo.ops);
            open.superseded.undo(undo.superseded, undo.ops);
            open.ops_bytes = undo.ops_bytes;
            if open.overlay_upto > undo.ops {
                open.overlay = Overlay::default();
                open.overlay_upto = 0;
            }
            for k in &undo.noted {
                open.prior.states.remove(&k[..]);
            }
            for (k, was) in undo.latest.into_iter().rev() {
                match was {
                    Some(state) => open.prior.latest.insert(k, state),
                    None => open.prior.latest.remove(&k[..]),
                };
            }
            Some(open.batch.effects.drain(undo.effects..).collect::<Vec<_>>())
        })
        .flatten();
        if dropped.is_some() {
            // Pops noted on writes that are now never made (see `forget_pop_notes`).
            self.forget_pop_notes();
        }
        for e in dropped.iter().flatten() {
            if let Some((db, _, key)) = decode_meta_key(&e.raw_key) {
                self.cache.end_write(db, key, true);
            }
        }
    }

    /// The keys `db` will have, and those with an expiry, once the open transaction is
    /// written, relative to now (DBSIZE inside EXEC).
    pub(super) fn txn_count_delta(&self, db: u16) -> (i64, i64) {
        with_open(self, |open| {
            let mut delta = (0, 0);
            for (raw, after) in &open.prior.latest {
                let before = open
                    .prior
                    .states
                    .get(raw)
                    .copied()
                    .unwrap_or(KeyState::Absent);
                if decode_meta_key(raw).is_some_and(|(d, _, _)| d == db) {
                    let (k0, e0) = before.counts();
                    let (k1, e1) = after.counts();
                    delta.0 += k1 - k0;
                    delta.1 += e1 - e0;
                }
            }
            delta
        })
        .unwrap_or((0, 0))
    }

    /// What this thread's open transaction buffered for raw key `key` of column family `cf`:
    /// `Some(Some(value))` written, `Some(None)` deleted, `None` not touched (read RocksDB).
    pub(super) fn txn_lookup(&self, cf: &'static str, key: &[u8]) -> Option<Option<Bytes>> {
        with_open(self, |open| open.overlay().cf(cf)?.lookup(key)).flatten()
    }

    /// A cursor over raw keys of `cf` in `[lower, upper)` that sees this thread's buffered
    /// writes over `it` (an iterator with the same bounds), or `it` itself outside a
    /// transaction or when nothing in the range was buffered.
    pub(super) fn txn_cursor<'a>(
        &self,
        cf: &'static str,
        lower: &[u8],
        upper: Option<&[u8]>,
        it: DBRawIteratorWithThreadMode<'a, DB>,
    ) -> RawCursor<'a> {
        let part = with_open(self, |open| {
            open.overlay().cf(cf).map(|o| o.part(lower, upper))
        })
        .flatten();
        match part {
            Some(part) if !part.is_empty() => RawCursor::Merged(Merged::new(it, part)),
            _ => RawCursor::Db(it),
        }
    }
}

impl Txn<'_> {
    /// Writes the transaction as one RocksDB batch (nothing for a nested `Txn`: its outer
    /// transaction writes it). On an error nothing of it was written and the hot cache holds
    /// none of its values.
    pub fn commit(self) -> StorageResult<()> {
        self.commit_with(Wait::Allowed)
    }

    /// [`Txn::commit`]; with [`Wait::Never`] (an I/O thread) it fails with `Incomplete`,
    /// having written nothing, rather than wait out a write stall.
    pub fn commit_with(mut self, wait: Wait) -> StorageResult<()> {
        self.finish(wait)
    }

    /// Drops everything the transaction buffered: nothing is written, and the hot cache
    /// forgets the values it showed the transaction. A nested `Txn` drops nothing (its caller
    /// rolls back to a savepoint it took, [`Storage::txn_rollback`]); the outer one stays open.
    pub fn abort(mut self) {
        if !std::mem::replace(&mut self.owner, false) {
            return;
        }
        let open = OPEN.with(|o| o.borrow_mut().take());
        RECORDING.with(|r| r.set(false));
        self.storage.forget_pop_notes();
        for e in open.iter().flat_map(|o| &o.batch.effects) {
            if let Some((db, _, key)) = decode_meta_key(&e.raw_key) {
                self.storage.cache.end_write(db, key, true);
            }
        }
        if open.is_some_and(|o| o.settled) {
            tracing::error!("a transaction written in parts was aborted after its first part");
        }
    }

    fn finish(&mut self, wait: Wait) -> StorageResult<()> {
        if !self.owner {
            return Ok(());
        }
        self.owner = false;
        let open = OPEN.with(|o| o.borrow_mut().take());
        RECORDING.with(|r| r.set(false));
        let Some(open) = open else {
            return Ok(());
        };
        let prior = Prior {
            whole: !open.settled,
            ..open.prior
        };
        let written = self
            .storage
            .write_txn(open.batch, open.ops, open.superseded, prior, wait);
        match open.failed {
            Some(e) => Err(e),
            None => written,
        }
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.finish(Wait::Allowed) {
            tracing::error!(error = %e, "a transaction's write failed");
        }
    }
}

impl Open {
    /// The overlay, with the writes buffered since it was last read applied.
    fn overlay(&mut self) -> &Overlay {
        for op in &self.ops[self.overlay_upto..] {
            self.overlay.apply(op);
        }
        self.overlay_upto = self.ops.len();
        &self.overlay
    }
}

impl Op {
    /// Bytes of its keys and value.
    fn bytes(&self) -> usize {
        match self {
            Op::Put(_, k, v) => k.len() + v.len(),
            Op::Delete(_, k) => k.len(),
            Op::DeleteRange(_, a, b) => a.len() + b.len(),
        }
    }
}

/// Adds one logged write to a RocksDB batch.
pub(super) fn replay(storage: &Storage, batch: &mut rocksdb::WriteBatch, op: &Op) {
    match op {
        Op::Put(cf, k, v) => batch.put_cf(storage.cf(cf), k, v),
        Op::Delete(cf, k) => batch.delete_cf(storage.cf(cf), k),
        Op::DeleteRange(cf, a, b) => batch.delete_range_cf(storage.cf(cf), a, b),
    }
}

/// What an open transaction buffered, per column family that commands read (meta, data,
/// score): the latest write of each raw key, and range deletions.
#[derive(Default)]
struct Overlay {
    meta: CfOverlay,
    data: CfOverlay,
    score: CfOverlay,
}

impl Overlay {
    fn cf(&self, cf: &str) -> Option<&CfOverlay> {
        match cf {
            CF_META => Some(&self.meta),
            CF_DATA => Some(&self.data),
            CF_SCORE => Some(&self.score),
            _ => None,
        }
    }

    fn apply(&mut self, op: &Op) {
        let cf = match op {
            Op::Put(cf, ..) | Op::Delete(cf, ..) | Op::DeleteRange(cf, ..) => *cf,
        };
        let o = match cf {
            CF_META => &mut self.meta,
            CF_DATA => &mut self.data,
            CF_SCORE => &mut self.score,
            _ => return,
        };
        match op {
            Op::Put(_, k, v) => {
                o.points.insert(k.clone(), Some(v.clone()));
            }
            Op::Delete(_, k) => {
                o.points.insert(k.clone(), None);
            }
            Op::DeleteRange(_, a, b) => o.delete_range(a, b),
        }
    }
}

/// One column family's buffered writes. A point write is always newer than every range that
/// covers it (a range deletion drops the point writes it covers), so a key's point entry, if
/// any, is its state; else a covering range means deleted; else RocksDB has it. Keys and values
/// are `Bytes`: a cursor's [`Part`] shares them instead of copying.
#[derive(Default)]
struct CfOverlay {
    points: BTreeMap<Bytes, Option<Bytes>>,
    ranges: Vec<(Bytes, Bytes)>,
}

impl CfOverlay {
    fn delete_range(&mut self, from: &Bytes, to: &Bytes) {
        if from >= to {
            return;
        }
        let covered: Vec<Bytes> = self
            .points
            .range::<[u8], _>((Bound::Included(&from[..]), Bound::Excluded(&to[..])))
            .map(|(k, _)| k.clone())
            .collect();
        for k in covered {
            self.points.remove(&k);
        }
        self.ranges.push((from.clone(), to.clone()));
    }

    fn covered(ranges: &[(Bytes, Bytes)], key: &[u8]) -> bool {
        ranges.iter().any(|(a, b)| &a[..] <= key && key < &b[..])
    }

    fn lookup(&self, key: &[u8]) -> Option<Option<Bytes>> {
        if let Some(v) = self.points.get(key) {
            return Some(v.clone());
        }
        Self::covered(&self.ranges, key).then_some(None)
    }

    /// The part of this overlay within `[lower, upper)`, for a cursor.
    fn part(&self, lower: &[u8], upper: Option<&[u8]>) -> Part {
        let hi = upper.map_or(Bound::Unbounded, Bound::Excluded);
        let mut part = Part::default();
        for (k, v) in self.points.range::<[u8], _>((Bound::Included(lower), hi)) {
            part.points.push(k.clone());
            if let Some(v) = v {
                part.visible.push((k.clone(), v.clone()));
            }
        }
        part.ranges = self
            .ranges
            .iter()
            .filter(|(a, b)| &b[..] > lower && upper.is_none_or(|u| &a[..] < u))
            .cloned()
            .collect();
        part
    }
}

/// An overlay's part within a cursor's bounds: entries it shows, and the raw keys whose
/// RocksDB entries it hides (every point write, put or delete, and the range deletions).
#[derive(Default)]
pub(super) struct Part {
    visible: Vec<(Bytes, Bytes)>,
    /// Sorted, as the overlay's map.
    points: Vec<Bytes>,
    ranges: Vec<(Bytes, Bytes)>,
}

impl Part {
    fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }

    fn hides(&self, key: &[u8]) -> bool {
        self.points.binary_search_by(|p| p[..].cmp(key)).is_ok()
            || CfOverlay::covered(&self.ranges, key)
    }
}

/// A raw cursor over one column family: RocksDB's, or RocksDB's merged with an open
/// transaction's writes. The methods are those of RocksDB's raw iterator.
pub enum RawCursor<'a> {
    Db(DBRawIteratorWithThreadMode<'a, DB>),
    Merged(Merged<'a>),
}

impl RawCursor<'_> {
    pub fn seek_to_first(&mut self) {
        match self {
            RawCursor::Db(it) => it.seek_to_first(),
            RawCursor::Merged(m) => m.seek_to_first(),
        }
    }
    pub fn seek_to_last(&mut self) {
        match self {
            RawCursor::Db(it) => it.seek_to_last(),
            RawCursor::Merged(m) => m.seek_to_last(),
        }
    }
    pub fn seek(&mut self, key: &[u8]) {
        match self {
            RawCursor::Db(it) => it.seek(key),
            RawCursor::Merged(m) => m.seek(key),
        }
    }
    pub fn seek_for_prev(&mut self, key: &[u8]) {
        match self {
            RawCursor::Db(it) => it.seek_for_prev(key),
            RawCursor::Merged(m) => m.seek_for_prev(key),
        }
    }
    pub fn next(&mut self) {
        match self {
            RawCursor::Db(it) => it.next(),
            RawCursor::Merged(m) => m.next(),
        }
    }
    pub fn prev(&mut self) {
        match self {
            RawCursor::Db(it) => it.prev(),
            RawCursor::Merged(m) => m.prev(),
        }
    }
    pub fn valid(&self) -> bool {
        match self {
            RawCursor::Db(it) => it.valid(),
            RawCursor::Merged(m) => m.current().is_some(),
        }
    }
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            RawCursor::Db(it) => it.key(),
            RawCursor::Merged(m) => m.key(),
        }
    }
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            RawCursor::Db(it) => it.value(),
            RawCursor::Merged(m) => m.value(),
        }
    }
    pub fn status(&self) -> StorageResult<()> {
        match self {
            RawCursor::Db(it) => it.status(),
            RawCursor::Merged(m) => m.db.status(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dir {
    Forward,
    Backward,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Db,
    Overlay,
}

/// RocksDB's entries minus those the overlay hides, merged with the overlay's visible
/// entries. Both sides stay positioned in the cursor's direction: forward, each at its first
/// entry at or after the current one; backward, at or before; a change of direction
/// re-positions the side that is not current.
pub struct Merged<'a> {
    db: DBRawIteratorWithThreadMode<'a, DB>,
    part: Part,
    /// Position in `part.visible`: forward, the first entry not yet passed (`len` past the
    /// end); backward, one past the entry (0 before the start).
    at: usize,
    dir: Dir,
    /// False until the first seek, as RocksDB's iterator is invalid until then.
    positioned: bool,
}

impl<'a> Merged<'a> {
    fn new(db: DBRawIteratorWithThreadMode<'a, DB>, part: Part) -> Merged<'a> {
        Merged {
            db,
            part,
            at: 0,
            dir: Dir::Forward,
            positioned: false,
        }
    }

    fn skip_hidden(&mut self) {
        while self.db.valid() && self.db.key().is_some_and(|k| self.part.hides(k)) {
            match self.dir {
                Dir::Forward => self.db.next(),
                Dir::Backward => self.db.prev(),
            }
        }
    }

    fn overlay_key(&self) -> Option<&[u8]> {
        if !self.positioned {
            return None;
        }
        let i = match self.dir {
            Dir::Forward => self.at,
            Dir::Backward => self.at.checked_sub(1)?,
        };
        self.part.visible.get(i).map(|(k, _)| &k[..])
    }

    fn current(&self) -> Option<Side> {
        let d = if self.db.valid() { self.db.key() } else { None };
        match (d, self.overlay_key()) {
            (None, None) => None,
            (Some(_), None) => Some(Side::Db),
            (None, Some(_)) => Some(Side::Overlay),
            (Some(d), Some(o)) => {
                let db_first = match self.dir {
                    Dir::Forward => d < o,
                    Dir::Backward => d > o,
                };
                Some(if db_first { Side::Db } else { Side::Overlay })
            }
        }
    }

    fn key(&self) -> Option<&[u8]> {
        match self.current()? {
            Side::Db => self.db.key(),
            Side::Overlay => self.overlay_key(),
        }
    }

    fn value(&self) -> Option<&[u8]> {
        match self.current()? {
            Side::Db => self.db.value(),
            Side::Overlay => {
                let i = match self.dir {
                    Dir::Forward => self.at,
                    Dir::Backward => self.at - 1,
                };
                Some(&self.part.visible[i].1)
            }
        }
    }

    /// First visible overlay entry with key >= `key` (or > with `strict`).
    fn overlay_from(&self, key: &[u8], strict: bool) -> usize {
        self.part.visible.partition_point(
            |(k, _)| {
                if strict {
                    &k[..] <= key
                } else {
                    &k[..] < key
                }
            },
        )
    }

    fn seek_to_first(&mut self) {
        self.dir = Dir::Forward;
        self.positioned = true;
        self.db.seek_to_first();
        self.skip_hidden();
        self.at = 0;
    }

    fn seek_to_last(&mut self) {
        self.dir = Dir::Backward;
        self.positioned = true;
        self.db.seek_to_last();
        self.skip_hidden();
        self.at = self.part.visible.len();
    }

    fn seek(&mut self, key: &[u8]) {
        self.dir = Dir::Forward;
        self.positioned = true;
        self.db.seek(key);
        self.skip_hidden();
        self.at = self.overlay_from(key, false);
    }

    fn seek_for_prev(&mut self, key: &[u8]) {
        self.dir = Dir::Backward;
        self.positioned = true;
        self.db.seek_for_prev(key);
        self.skip_hidden();
        // One past the last entry <= key.
        self.at = self.overlay_from(key, true);
    }

    fn next(&mut self) {
        let Some(side) = self.current() else { return };
        if self.dir == Dir::Backward {
            // Both sides to the first entry after the current one.
            let key = self.key().map(<[u8]>::to_vec).unwrap_or_default();
            self.dir = Dir::Forward;
            self.db.seek(&key);
            if self.db.valid() && self.db.key() == Some(&key[..]) {
                self.db.next();
            }
            self.skip_hidden();
            self.at = self.overlay_from(&key, true);
            return;
        }
        match side {
            Side::Db => {
                self.db.next();
                self.skip_hidden();
            }
            Side::Overlay => self.at += 1,
        }
    }

    fn prev(&mut self) {
        let Some(side) = self.current() else { return };
        if self.dir == Dir::Forward {
            // Both sides to the last entry before the current one.
            let key = self.key().map(<[u8]>::to_vec).unwrap_or_default();
            self.dir = Dir::Backward;
            self.db.seek_for_prev(&key);
            if self.db.valid() && self.db.key() == Some(&key[..]) {
                self.db.prev();
            }
            self.skip_hidden();
            self.at = self.overlay_from(&key, false);
            return;
        }
        match side {
            Side::Db => {
                self.db.prev();
                self.skip_hidden();
            }
            Side::Overlay => self.at -= 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::encoding::Meta;
    use super::super::{Batch, Cf, Coll, Storage};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn put(s: &Storage, key: &[u8], v: &str, at: u64) {
        let mut b = Batch::default();
        b.put_meta(s, 0, key, &Meta::string(v.as_bytes().to_vec(), at));
        s.commit(b).unwrap();
    }

    fn del(s: &Storage, key: &[u8]) {
        let mut b = Batch::default();
        b.delete_meta(s, 0, key);
        s.commit(b).unwrap();
    }

    fn value(s: &Storage, key: &[u8]) -> Option<String> {
        s.get_meta(0, key)
            .unwrap()
            .map(|m| String::from_utf8(m.value).unwrap())
    }

    /// Another thread's view of `key`: what RocksDB holds.
    fn seen_elsewhere(s: &Storage, key: &[u8]) -> Option<String> {
        std::thread::scope(|t| t.spawn(|| value(s, key)).join().unwrap())
    }

    #[test]
    fn a_transaction_reads_its_writes_and_nobody_else_does_until_it_commits() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        put(&s, b"a", "old", 0);
        let seq = s.latest_seq();
        let txn = s.begin_txn();
        put(&s, b"a", "new", 0);
        put(&s, b"b", "1", 0);
        del(&s, b"a");
        put(&s, b"a", "newest", 0);
        assert_eq!(value(&s, b"a").as_deref(), Some("newest"));
        assert_eq!(value(&s, b"b").as_deref(), Some("1"));
        assert_eq!(seen_elsewhere(&s, b"a").as_deref(), Some("old"));
        assert_eq!(seen_elsewhere(&s, b"b"), None);
        assert_eq!(s.latest_seq(), seq, "nothing reached RocksDB yet");
        assert_eq!(
            s.key_count(0),
            2,
            "DBSIZE inside counts the buffered writes"
        );
        txn.commit().unwrap();
        assert_eq!(seen_elsewhere(&s, b"a").as_deref(), Some("newest"));
        assert_eq!(seen_elsewhere(&s, b"b").as_deref(), Some("1"));
        assert_eq!(s.key_count(0), 2);
    }

    #[test]
    fn a_transaction_leaves_its_room_to_the_next_unless_it_grew_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let writes = |n: usize, last: &str| {
            let txn = s.begin_txn();
            for i in 0..n {
                put(&s, format!("k{i}").as_bytes(), last, 0);
            }
            txn.commit().unwrap();
        };
        let room = || {
            let r = super::Room::take();
            let sizes = (r.ops.capacity(), r.states.capacity());
            r.give_back();
            sizes
        };
        writes(300, "a");
        let (ops, states) = room();
        assert!(ops >= 300 && states >= 300, "{ops} {states}");
        // An empty transaction (an I/O thread's quiet turn) keeps it too.
        writes(0, "b");
        assert_eq!(room(), (ops, states));
        // Kept empty: the next transaction sees only its own writes.
        writes(2, "c");
        assert_eq!(value(&s, b"k0").as_deref(), Some("c"));
        assert_eq!(value(&s, b"k299").as_deref(), Some("a"));
        assert_eq!(s.key_count(0), 300);
        // Past the bound the buffers go: a thread keeps no giant transaction's memory.
        writes(super::ROOM_KEEP + 1, "d");
        assert_eq!(room(), (0, 0));
        assert_eq!(s.key_count(0), super::ROOM_KEEP as u64 + 1);
    }

    #[test]
    fn a_transaction_settled_part_way_goes_on_in_its_own_room() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let txn = s.begin_txn();
        for i in 0..300 {
            put(&s, format!("k{i}").as_bytes(), "a", 0);
        }
        s.settle_txn().unwrap();
        let capacities =
            || super::with_open(&s, |o| (o.ops.capacity(), o.prior.states.capacity())).unwrap();
        let (ops, states) = capacities();
        assert!(
            ops >= 300 && states >= 300,
            "regrown from nothing: {ops} {states}"
        );
        assert_eq!(super::with_open(&s, |o| o.ops.len()), Some(0));
        put(&s, b"k0", "b", 0);
        put(&s, b"new", "b", 0);
        txn.commit().unwrap();
        assert_eq!(value(&s, b"k0").as_deref(), Some("b"));
        assert_eq!(value(&s, b"k299").as_deref(), Some("a"));
        assert_eq!(s.key_count(0), 301);
    }

    #[test]
    fn counts_and_expiry_index_are_exact_over_a_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let far = crate::clock::unix_ms() + 3_600_000;
        put(&s, b"x", "1", far);
        put(&s, b"y", "1", 0);
        {
            let txn = s.begin_txn();
            put(&s, b"x", "2", 0); // loses its expiry
            put(&s, b"z", "1", far); // new, with one
            put(&s, b"z", "2", far + 5); // and another
            del(&s, b"y");
            put(&s, b"w", "1", 0);
            del(&s, b"w"); // created and gone
            assert_eq!((s.key_count(0), s.expires_count(0)), (2, 1));
            txn.commit().unwrap();
        }
        assert_eq!((s.key_count(0), s.expires_count(0)), (2, 1));
        super::super::count_tests::assert_consistent(&s, 1);
        drop(s);
        let s = Storage::open(dir.path()).unwrap();
        assert_eq!((s.key_count(0), s.expires_count(0)), (2, 1));
    }

    #[test]
    fn a_flush_inside_writes_what_came_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let txn = s.begin_txn();
        put(&s, b"a", "1", 0);
        s.flush_db(0).unwrap();
        put(&s, b"b", "1", 0);
        assert_eq!(value(&s, b"a"), None);
        txn.commit().unwrap();
        assert_eq!(seen_elsewhere(&s, b"a"), None);
        assert_eq!(seen_elsewhere(&s, b"b").as_deref(), Some("1"));
        assert_eq!(s.key_count(0), 1);
    }

    #[test]
    fn a_rollback_drops_what_came_after_the_savepoint_only() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        put(&s, b"kept", "0", 0);
        let txn = s.begin_txn();
        put(&s, b"a", "1", 0);
        assert!(s.txn_savepoint());
        put(&s, b"a", "2", 0);
        put(&s, b"b", "1", 0);
        del(&s, b"kept");
        assert_eq!(value(&s, b"a").as_deref(), Some("2"));
        assert_eq!(s.key_count(0), 2);
        s.txn_rollback();
        assert_eq!(
            value(&s, b"a").as_deref(),
            Some("1"),
            "the write before stays"
        );
        assert_eq!(value(&s, b"b"), None);
        assert_eq!(value(&s, b"kept").as_deref(), Some("0"));
        assert_eq!(s.key_count(0), 2, "kept and a");
        put(&s, b"c", "1", 0);
        txn.commit().unwrap();
        assert_eq!(seen_elsewhere(&s, b"a").as_deref(), Some("1"));
        assert_eq!(seen_elsewhere(&s, b"b"), None);
        assert_eq!(seen_elsewhere(&s, b"kept").as_deref(), Some("0"));
        assert_eq!(seen_elsewhere(&s, b"c").as_deref(), Some("1"));
        assert_eq!(s.key_count(0), 3);
        super::super::count_tests::assert_consistent(&s, 1);
    }

    #[test]
    fn writes_a_later_write_replaces_are_left_out_and_the_end_is_the_same() {
        use std::sync::atomic::Ordering::Relaxed;
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        put(&s, b"gone", "0", 0);
        let txn = s.begin_txn();
        for v in 1..=5 {
            put(&s, b"hot", &v.to_string(), 0);
        }
        put(&s, b"gone", "1", 0);
        del(&s, b"gone");
        put(&s, b"back", "1", 0);
        del(&s, b"back");
        put(&s, b"back", "2", 0);
        assert!(s.txn_savepoint());
        put(&s, b"hot", "6", 0);
        put(&s, b"new", "1", 0);
        s.txn_rollback();
        assert_eq!(value(&s, b"hot").as_deref(), Some("5"));
        txn.commit().unwrap();
        // hot: 4 of 5 left out (the rolled-back sixth revived the fifth); gone: 1 of 2;
        // back: 2 of 3.
        assert_eq!(s.superseded_writes.load(Relaxed), 7);
        assert_eq!(seen_elsewhere(&s, b"hot").as_deref(), Some("5"));
        assert_eq!(seen_elsewhere(&s, b"gone"), None);
        assert_eq!(seen_elsewhere(&s, b"back").as_deref(), Some("2"));
        assert_eq!(seen_elsewhere(&s, b"new"), None);
        assert_eq!(s.key_count(0), 2);
        super::super::count_tests::assert_consistent(&s, 2);
        // Switched off, every write is written.
        s.set_skip_superseded(false);
        let txn = s.begin_txn();
        put(&s, b"hot", "7", 0);
        put(&s, b"hot", "8", 0);
        txn.commit().unwrap();
        assert_eq!(s.superseded_writes.load(Relaxed), 7);
        assert_eq!(seen_elsewhere(&s, b"hot").as_deref(), Some("8"));
    }

    #[test]
    fn a_nested_transaction_joins_the_outer_one() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let outer = s.begin_txn();
        {
            let inner = s.begin_txn();
            put(&s, b"a", "1", 0);
            inner.commit().unwrap();
        }
        assert_eq!(seen_elsewhere(&s, b"a"), None);
        outer.commit().unwrap();
        assert_eq!(seen_elsewhere(&s, b"a").as_deref(), Some("1"));
    }

    /// A step of a member cursor, checked against a model of what it should see.
    #[derive(Clone, Debug)]
    enum Step {
        First,
        Last,
        Seek(u8),
        SeekBack(u8),
        Next,
        Prev,
    }

    #[derive(Clone, Debug)]
    enum Write {
        Put(u8, u8),
        Delete(u8),
        DeleteRange(u8, u8),
    }

    fn member(m: u8) -> Vec<u8> {
        vec![b'm', m]
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            Just(Step::First),
            Just(Step::Last),
            (0u8..24).prop_map(Step::Seek),
            (0u8..24).prop_map(Step::SeekBack),
            Just(Step::Next),
            Just(Step::Next),
            Just(Step::Prev),
            Just(Step::Prev),
        ]
    }

    fn write() -> impl Strategy<Value = Write> {
        prop_oneof![
            (0u8..24, any::<u8>()).prop_map(|(m, v)| Write::Put(m, v)),
            (0u8..24).prop_map(Write::Delete),
            (0u8..24, 0u8..24).prop_map(|(a, b)| Write::DeleteRange(a, b)),
        ]
    }

    fn apply(s: &Storage, coll: &Coll, w: &Write, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
        let mut b = Batch::default();
        match *w {
            Write::Put(m, v) => {
                b.put_member(s, Cf::Data, coll, &member(m), &[v]);
                model.insert(member(m), vec![v]);
            }
            Write::Delete(m) => {
                b.delete_member(s, Cf::Data, coll, &member(m));
                model.remove(&member(m));
            }
            // RocksDB refuses an empty or reversed range; the writers never make one.
            Write::DeleteRange(a, z) if a >= z => return,
            Write::DeleteRange(a, z) => {
                b.delete_member_range(s, coll, &member(a), &member(z));
                model.retain(|k, _| !(k[..] >= member(a)[..] && k[..] < member(z)[..]));
            }
        }
        s.commit(b).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A member cursor inside a transaction walks RocksDB's entries merged with the
        /// buffered writes exactly as a map of the final state would, in both directions.
        #[test]
        fn merged_cursor_matches_a_model(
            committed in proptest::collection::vec(write(), 0..30),
            buffered in proptest::collection::vec(write(), 0..30),
            steps in proptest::collection::vec(step(), 1..40),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let s = Storage::open(dir.path()).unwrap();
            let meta = Meta::collection(super::super::encoding::Kind::Hash, 7, 0);
            let coll = Coll::new(0, b"h", &meta);
            let mut model = BTreeMap::new();
            for w in &committed {
                apply(&s, &coll, w, &mut model);
            }
            let txn = s.begin_txn();
            for w in &buffered {
                apply(&s, &coll, w, &mut model);
            }
            let view = s.view();
            let mut c = view.members(Cf::Data, &coll);
            // The model's position: the current member, if any.
            let mut at: Option<Vec<u8>> = None;
            for st in &steps {
                match st {
                    Step::First => { c.first(); at = model.keys().next().cloned(); }
                    Step::Last => { c.last(); at = model.keys().next_back().cloned(); }
                    Step::Seek(m) => { c.seek(&member(*m)); at = model.range(member(*m)..).next().map(|(k, _)| k.clone()); }
                    Step::SeekBack(m) => { c.seek_back(&member(*m)); at = model.range(..=member(*m)).next_back().map(|(k, _)| k.clone()); }
                    Step::Next => {
                        if let Some(k) = at.take() {
                            c.next();
                            at = model.range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded)).next().map(|(k, _)| k.clone());
                        }
                    }
                    Step::Prev => {
                        if let Some(k) = at.take() {
                            c.prev();
                            at = model.range(..k).next_back().map(|(k, _)| k.clone());
                        }
                    }
                }
                let got = c.entry().map(|(m, v)| (m.to_vec(), v.to_vec()));
                let want = at.as_ref().map(|k| (k.clone(), model[k].clone()));
                prop_assert_eq!(got, want, "after {:?}", st);
            }
            drop(c);
            drop(view);
            for m in 0u8..24 {
                let got = s.latest().get_member(&coll, &member(m)).unwrap();
                prop_assert_eq!(got, model.get(&member(m)).cloned());
            }
            txn.commit().unwrap();
            let all = std::thread::scope(|t| t.spawn(|| {
                let mut got = Vec::new();
                s.view().for_each_member(Cf::Data, &coll, |m, v| { got.push((m.to_vec(), v.to_vec())); true }).unwrap();
                got
            }).join().unwrap());
            prop_assert_eq!(all, model.into_iter().collect::<Vec<_>>());
        }
    }
}
