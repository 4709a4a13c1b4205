//! The WAL's sync thread (`fsync-thread`, with `appendfsync always`): an I/O thread ends its
//! turn by asking this thread to make the turn's writes durable, and goes on reading and running
//! other clients' commands while the fsync runs, instead of sitting in it. The replies that
//! acknowledge those writes wait, listed by the I/O thread, until the sync covering them is done
//! (this thread wakes it). Writes that arrive during one fsync all share the next: the group
//! grows with the fsync's length, where a thread that waited in the fsync left them unread.
//!
//! Workers still make their own runs durable before they hand their replies back
//! (`Storage::make_durable`); one sync covers everybody's writes buffered before it.

use crate::server::Server;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
pub struct WalSync {
    wanted: Mutex<Wanted>,
    wakeup: Condvar,
    /// The highest ticket a sync failed for: replies waiting for it or anything before it are
    /// not sent, their clients closed (as a failed flush does on the I/O thread).
    failed: AtomicU64,
}

#[derive(Default)]
struct Wanted {
    /// The highest WAL ticket an I/O thread asked to be durable.
    ticket: u64,
    /// The I/O threads to wake when the sync asked for is done, one bit each.
    waiters: u64,
    stop: bool,
}

impl WalSync {
    /// I/O thread `io` asks for every write up to `ticket` to be made durable, and to be woken
    /// when it is.
    pub fn request(&self, ticket: u64, io: usize) {
        let mut w = self.wanted.lock();
        w.ticket = w.ticket.max(ticket);
        w.waiters |= 1 << (io % 64);
        drop(w);
        self.wakeup.notify_one();
    }

    /// See [`WalSync::failed`].
    pub fn failed_through(&self) -> u64 {
        self.failed.load(Ordering::Acquire)
    }

    /// Ends the thread once the I/O threads are gone (nothing asks any more).
    pub fn stop(&self) {
        self.wanted.lock().stop = true;
        self.wakeup.notify_one();
    }
}

/// Starts the sync thread; `startup` stops and joins it after the I/O threads exit.
pub fn spawn(server: Arc<Server>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("kvik-wal-sync".into())
        .spawn(move || run(&server))
        .expect("spawn WAL sync thread")
}

fn run(server: &Server) {
    let sync = &server.wal_sync;
    loop {
        let (ticket, waiters) = {
            let mut w = sync.wanted.lock();
            while w.waiters == 0 && !w.stop {
                sync.wakeup.wait_for(&mut w, Duration::from_millis(200));
            }
            if w.waiters == 0 {
                return; // stopped, nobody waiting
            }
            (w.ticket, std::mem::take(&mut w.waiters))
        };
        // A worker's flush may have covered it meanwhile; then there is only the waking left.
        if server.storage.wal().durable() < ticket {
            if let Err(e) = server.storage.make_durable_through(ticket) {
                tracing::error!(error = %e, "WAL sync failed; closing the clients it would acknowledge");
                sync.failed.fetch_max(ticket, Ordering::AcqRel);
            }
        }
        let handles = server.io_handles.get().map(Vec::as_slice).unwrap_or(&[]);
        for (i, h) in handles.iter().enumerate() {
            if waiters & (1 << (i % 64)) != 0 {
                h.wake();
            }
        }
    }
}
