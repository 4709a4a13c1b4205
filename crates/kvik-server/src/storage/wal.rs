//! Group commit of the WAL: many writes, one `write(2)` (and with `appendfsync always`, one
//! fsync) for all of them, as Redis's AOF buffer is written once per event-loop turn.
//!
//! RocksDB runs with `manual_wal_flush`: a write lands in the memtable and in the WAL's
//! in-process buffer, and reaches the WAL file only when someone flushes. Whoever is about to
//! release replies that acknowledge writes (a worker at the end of its run, a worker that served
//! blocked clients, an I/O thread at the end of its turn) calls [`WalGroup::make_durable`] first:
//! it flushes everything buffered, by every thread, once; writers that arrive while a flush runs
//! wait for it and find their writes already covered, or flush the next group together.
//!
//! Which writes a thread must wait for is per thread ([`WalGroup::wrote`] notes the thread's
//! latest write), so a thread that only read never waits for somebody else's flush. With group
//! commit off (`group-commit no`), every write flushes (and syncs, with `always`) on its own,
//! as RocksDB does without `manual_wal_flush`: the switch the gain is measured against.

use parking_lot::Mutex;
use rocksdb::DB;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

thread_local! {
    /// Ticket of this thread's latest write not known to be durable yet; 0 = none.
    static PENDING: Cell<u64> = const { Cell::new(0) };
}

pub struct WalGroup {
    /// Tickets handed out: one per write, in the order the writes reached the WAL buffer.
    written: AtomicU64,
    /// Every write with a ticket up to this one is in the WAL file (synced if asked).
    durable: AtomicU64,
    /// Held by the one thread flushing; the others queue behind it and usually find their
    /// writes covered when they get it.
    flushing: Mutex<()>,
    grouped: AtomicBool,
    /// Testing only (`wal-flush-hold`): flushes wait while it is set, so a test can check that
    /// no reply of a write leaves before its WAL flush.
    hold: AtomicBool,
    flushes: AtomicU64,
}

impl Default for WalGroup {
    fn default() -> WalGroup {
        WalGroup {
            written: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            flushing: Mutex::new(()),
            grouped: AtomicBool::new(true),
            hold: AtomicBool::new(false),
            flushes: AtomicU64::new(0),
        }
    }
}

impl WalGroup {
    pub fn grouped(&self) -> bool {
        self.grouped.load(Ordering::Relaxed)
    }

    pub fn set_grouped(&self, on: bool) {
        self.grouped.store(on, Ordering::Relaxed);
    }

    pub fn set_hold(&self, on: bool) {
        self.hold.store(on, Ordering::Relaxed);
    }

    /// WAL flushes so far (INFO: how many writes share one).
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// A ticket for a write that just reached the WAL buffer (in buffer order); the write is
    /// in the WAL file once a flush covered it. Does not make this thread wait for it.
    pub fn ticket(&self) -> u64 {
        self.written.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Notes this thread's write that just got `ticket` (its [`WalGroup::make_durable`] will
    /// wait for it). Without grouping, flushes it at once; returns the ticket flushed up to, if
    /// this call flushed.
    pub fn wrote(&self, ticket: u64, db: &DB, sync: bool) -> Result<Option<u64>, rocksdb::Error> {
        PENDING.with(|p| p.set(ticket));
        if self.grouped() {
            return Ok(None);
        }
        self.make_durable(db, sync)
    }

    /// Holds this thread's replies as if it had written (its writes are buffered in a
    /// transaction, `txn`, not yet in the WAL), until its next [`WalGroup::make_durable`];
    /// the transaction's write then takes a real ticket.
    pub fn hold_here(&self) {
        PENDING.with(|p| {
            if p.get() == 0 {
                p.set(1);
            }
        });
    }

    /// True if this thread wrote since its last [`WalGroup::make_durable`].
    pub fn pending_here(&self) -> bool {
        PENDING.with(|p| p.get() != 0)
    }

    /// Makes this thread's writes durable: flushes the WAL buffer (syncing it with `sync`)
    /// unless a flush since its latest write already did. Cheap when the thread wrote nothing.
    /// Returns the ticket flushed up to, if this call flushed.
    pub fn make_durable(&self, db: &DB, sync: bool) -> Result<Option<u64>, rocksdb::Error> {
        let mine = self.take_pending_here();
        self.make_durable_through(mine, db, sync)
    }

    /// This thread's latest write not known to be durable (0: none), forgotten here: the caller
    /// makes it durable another way (`fsync-thread`: the WAL's sync thread,
    /// `net::wal_sync`).
    pub fn take_pending_here(&self) -> u64 {
        PENDING.with(|p| p.replace(0))
    }

    /// Every write with a ticket up to this one is in the WAL file (synced if asked).
    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// [`WalGroup::make_durable`] for the writes up to `mine`, whichever thread made them.
    pub fn make_durable_through(
        &self,
        mine: u64,
        db: &DB,
        sync: bool,
    ) -> Result<Option<u64>, rocksdb::Error> {
        if mine == 0 || self.durable.load(Ordering::Acquire) >= mine {
            return Ok(None);
        }
        let _flushing = self.flushing.lock();
        if self.durable.load(Ordering::Acquire) >= mine {
            return Ok(None); // the flush we waited for covered us
        }
        while self.hold.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Every ticket handed out so far belongs to a write already in the buffer.
        let upto = self.written.load(Ordering::Acquire);
        // On failure the caller closes the clients these writes would have acknowledged, and
        // this thread holds no reply for them any longer (RocksDB takes no write after a
        // failed WAL write until it recovers; `health` refuses writes meanwhile).
        db.flush_wal(sync)?;
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.durable.fetch_max(upto, Ordering::Release);
        Ok(Some(upto))
    }
}
