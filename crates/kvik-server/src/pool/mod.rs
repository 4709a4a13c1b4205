//! The worker pool: threads that run commands which need storage, so I/O threads never block
//! on RocksDB.
//!
//! The interface is one method, [`Pool::submit`]: an I/O thread hands over a whole run of one
//! connection's commands as a single job, so per-connection order holds without any lock (a
//! connection never has two jobs in the pool). The job itself posts its replies back to the
//! owning I/O thread. Two pools plug in behind the trait, chosen by `pool-mode`:
//!
//! - [`adaptive::AdaptivePool`] (`adaptive`, the default): lock-free task lists shared by
//!   `workers-per-link` workers each, and a three-level wait (spin, yield while an adaptive credit
//!   allows, park). Its module header documents the wait and its tunables.
//! - [`classic::ClassicPool`] (`classic`): one queue under a mutex, workers parked on a condvar;
//!   the baseline the other is measured against.
//!
//! Commands that have been taking long run on threads of their own instead
//! ([`slow_lane::SlowLane`], `slow-lane-threads`), beside either pool.
//!
//! Both survive a panicking job (it is caught, logged and counted; the worker carries on) and
//! never drop a job: a full pool makes the producer wait. Timed work (active expiry, stats, WAL
//! sync) never rides on the pool; the server's timer thread runs it.

pub mod adaptive;
pub mod classic;
pub mod slow_lane;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// A unit of work: runs once, on some worker thread.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

pub trait Pool: Send + Sync {
    /// Queues `job`. Never drops it: a full pool makes the caller wait instead.
    fn submit(&self, job: Job);
    /// Runs every job already submitted, then stops and joins the workers. Jobs submitted after
    /// this began are not guaranteed to run.
    fn shutdown(&self);
    /// Counters for INFO (`kvik_pool_*`).
    fn stats(&self) -> PoolStats;
}

/// Runs one job, catching a panic so the worker survives it. Returns false if it panicked.
pub(crate) fn run_job(job: Job) -> bool {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
        Ok(()) => true,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(panic = %msg, "a pool job panicked; the worker carries on");
            false
        }
    }
}

/// Which pool runs commands (`pool-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMode {
    Classic,
    Adaptive,
}

impl PoolMode {
    pub fn parse(v: &str) -> Option<PoolMode> {
        match v.to_ascii_lowercase().as_str() {
            "classic" => Some(PoolMode::Classic),
            "adaptive" => Some(PoolMode::Adaptive),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PoolMode::Classic => "classic",
            PoolMode::Adaptive => "adaptive",
        }
    }
}

/// How an idle worker of the adaptive pool waits (`pool-wait`): `adaptive` spins, then yields
/// while the credit allows, then parks; `block` parks at once (the lock-free lists without the
/// spinning, to measure what the wait itself is worth).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    Adaptive,
    Block,
}

impl WaitMode {
    pub fn parse(v: &str) -> Option<WaitMode> {
        match v.to_ascii_lowercase().as_str() {
            "adaptive" => Some(WaitMode::Adaptive),
            "block" => Some(WaitMode::Block),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WaitMode::Adaptive => "adaptive",
            WaitMode::Block => "block",
        }
    }
}

/// The pool's settings as the config table stores them (read once, when the pool starts).
/// `workers` itself stays in the config.
#[derive(Debug)]
pub struct PoolSettings {
    pub mode: parking_lot::RwLock<PoolMode>,
    pub wait: parking_lot::RwLock<WaitMode>,
    pub workers_per_link: AtomicU64,
    pub spin: AtomicU64,
    pub max_yield_us: AtomicU64,
    pub slow_yield_us: AtomicU64,
    pub slow_yields: AtomicU64,
    pub sampling: AtomicU64,
    pub list_slow_size: AtomicU64,
    pub list_max_size: AtomicU64,
}

impl Default for PoolSettings {
    /// Placeholders only: `Config::default` applies every setting's declared default.
    fn default() -> Self {
        PoolSettings {
            mode: parking_lot::RwLock::new(PoolMode::Adaptive),
            wait: parking_lot::RwLock::new(WaitMode::Adaptive),
            workers_per_link: AtomicU64::new(0),
            spin: AtomicU64::new(0),
            max_yield_us: AtomicU64::new(0),
            slow_yield_us: AtomicU64::new(0),
            slow_yields: AtomicU64::new(0),
            sampling: AtomicU64::new(0),
            list_slow_size: AtomicU64::new(0),
            list_max_size: AtomicU64::new(0),
        }
    }
}

impl PoolSettings {
    /// The adaptive pool's tunables as these settings give them.
    pub fn tunables(&self, workers: usize) -> adaptive::Tunables {
        adaptive::Tunables {
            workers: workers.max(1),
            workers_per_link: (self.workers_per_link.load(Relaxed) as usize).max(1),
            wait: *self.wait.read(),
            spin: self.spin.load(Relaxed) as u32,
            max_yield: std::time::Duration::from_micros(self.max_yield_us.load(Relaxed)),
            slow_yield: std::time::Duration::from_micros(self.slow_yield_us.load(Relaxed)),
            max_slow_yields: self.slow_yields.load(Relaxed) as u32,
            sampling: self.sampling.load(Relaxed).max(1) as u32,
            list_slow_size: self.list_slow_size.load(Relaxed) as usize,
            list_max_size: (self.list_max_size.load(Relaxed) as usize).max(1),
        }
    }
}

/// Starts the pool `settings` ask for (`pool-mode` and the `pool-*` tunables) with `workers`
/// threads.
pub fn start(settings: &PoolSettings, workers: usize) -> Arc<dyn Pool> {
    match *settings.mode.read() {
        PoolMode::Classic => Arc::new(classic::ClassicPool::new(workers)),
        PoolMode::Adaptive => Arc::new(adaptive::AdaptivePool::new(settings.tunables(workers))),
    }
}

/// What a pool has done so far, for INFO. Counters only the adaptive pool has are 0 in the
/// classic one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub mode: &'static str,
    pub wait: &'static str,
    pub workers: usize,
    pub lists: usize,
    /// Jobs handed to `submit`.
    pub submitted: u64,
    /// Jobs that ran (panicked or not).
    pub completed: u64,
    pub panics: u64,
    /// Times a worker took a non-empty list (adaptive) or a job (classic).
    pub batches: u64,
    /// Waits that ended in the spin level (work arrived while spinning).
    pub spin_hits: u64,
    /// Waits that entered the yield level, and of those, the ones that found work there.
    pub yield_entered: u64,
    pub yield_hits: u64,
    /// Yield levels cut short by too many slow yields (the CPU is busy with other threads).
    pub yield_slow_exits: u64,
    /// Waits that skipped the yield level because the credit was negative.
    pub yield_skipped: u64,
    /// Times a worker parked (futex/condvar).
    pub parks: u64,
    /// The yield credit now (RocksDB's `yield_credit`); negative means "park, don't yield".
    pub credit: i64,
    /// Producer pauses: yields at the slow size, blocks at the hard size.
    pub producer_yields: u64,
    pub producer_blocks: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_name() {
        assert_eq!(PoolMode::parse("CLASSIC"), Some(PoolMode::Classic));
        assert_eq!(PoolMode::parse("adaptive").unwrap().name(), "adaptive");
        assert_eq!(PoolMode::parse("lockfree"), None);
        assert_eq!(WaitMode::parse("block"), Some(WaitMode::Block));
        assert_eq!(WaitMode::parse("Adaptive").unwrap().name(), "adaptive");
        assert_eq!(WaitMode::parse("spin"), None);
    }

    /// The settings reach the pool: `pool-mode` picks it, the tunables shape it, and bad values
    /// are refused with Redis's wording.
    #[test]
    fn start_follows_the_settings() {
        use crate::config::Config;
        let from_config = |c: &Config| start(&c.pool, c.workers());
        let c = Config::default();
        c.apply("workers", "4").unwrap();
        let pool = from_config(&c);
        let s = pool.stats();
        assert_eq!(
            (s.mode, s.wait, s.workers, s.lists),
            ("adaptive", "adaptive", 4, 2)
        );
        pool.shutdown();

        c.apply("workers", "5").unwrap();
        c.apply("workers-per-link", "1").unwrap();
        c.apply("pool-wait", "block").unwrap();
        let pool = from_config(&c);
        let s = pool.stats();
        assert_eq!((s.wait, s.workers, s.lists), ("block", 5, 5));
        pool.shutdown();

        c.apply("pool-mode", "classic").unwrap();
        let pool = from_config(&c);
        assert_eq!(pool.stats().mode, "classic");
        pool.shutdown();

        assert!(c
            .apply("pool-mode", "fast")
            .unwrap_err()
            .contains("adaptive, classic"));
        assert!(c.apply("pool-slow-yields", "0").is_err());
        let t = c.pool.tunables(4);
        assert_eq!(t.spin, 200);
        assert_eq!(t.max_yield, std::time::Duration::from_micros(100));
        assert_eq!((t.max_slow_yields, t.sampling), (3, 256));
    }
}
