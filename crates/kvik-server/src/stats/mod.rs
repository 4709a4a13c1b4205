//! Counters behind INFO: server-wide totals, per-command call statistics (commandstats) and
//! error counts by prefix (errorstats). Everything is a relaxed atomic: counters are read for
//! reporting only, never to make a decision another thread depends on.

pub mod info;
pub mod latency;
pub mod sharded;
pub mod slowlog;

use crate::error::CmdError;
use parking_lot::Mutex;
use sharded::ShardedU64;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Call statistics of one command or subcommand (INFO commandstats).
#[derive(Default, Debug)]
pub struct CommandStats {
    /// Its full name ("get", "config|get").
    pub name: String,
    pub calls: ShardedU64,
    pub usec: ShardedU64,
    /// Rejected before running (arity, auth ...).
    pub rejected_calls: AtomicU64,
    /// Ran and replied with an error.
    pub failed_calls: AtomicU64,
}

#[derive(Debug)]
pub struct Stats {
    pub total_connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_commands_processed: ShardedU64,
    pub total_error_replies: AtomicU64,
    pub keyspace_hits: ShardedU64,
    pub keyspace_misses: ShardedU64,
    pub expired_keys: AtomicU64,
    pub net_input_bytes: ShardedU64,
    pub net_output_bytes: ShardedU64,
    /// Commands answered on an I/O thread from the hot cache (run-to-completion).
    pub rtc_commands: ShardedU64,
    /// Run-to-completion tries on an I/O thread that would have waited and went to the pool.
    pub rtc_fallbacks: AtomicU64,
    /// Of those, the ones put off to the I/O thread's next turn (a key another thread held;
    /// `rtc-lock-retries`) instead of going to the pool.
    pub rtc_lock_retries: AtomicU64,
    /// Writes that read a key's record without holding its lock (`Ctx::lookup_write`): a
    /// command that forgot its lock, which a flush or another writer could fall inside. The
    /// integration tests expect 0.
    pub unlocked_write_lookups: AtomicU64,
    /// Connections moved to the I/O thread of a key another I/O thread held
    /// (`io-key-affinity`).
    pub io_key_affinity_moves: AtomicU64,
    /// Commands sent to the pool untried because their tries kept falling back
    /// (`cmd::rtc_backoff`).
    pub rtc_backoff_skips: AtomicU64,
    /// Times an I/O thread found its disk reads slow and left them to the pool for a while
    /// (`cmd::disk_gate`).
    pub rtc_disk_gate_closes: AtomicU64,
    /// Scripts an I/O thread aborted for running past their budget (`cmd::script`).
    pub rtc_script_budget_aborts: AtomicU64,
    /// Batches an I/O thread wrote for the writes of a turn (`rtc-write-batch`), and the key
    /// writes they carried.
    pub rtc_write_batches: AtomicU64,
    pub rtc_batched_writes: AtomicU64,
    /// Polls an I/O thread made without sleeping after a busy turn (`io-poll-spin-us`), and
    /// those that found work, which then needed no wake-up.
    pub io_poll_spins: AtomicU64,
    pub io_poll_spin_hits: AtomicU64,
    /// Commands run by the worker pool.
    pub pool_commands: ShardedU64,
    /// Reads a worker ran without their keys' locks (`pool-reads-unlocked`, `cmd::isolation`).
    pub pool_unlocked_reads: AtomicU64,
    /// Reads a worker ran without their keys' locks and again under them, as a write of their
    /// keys overlapped (`pool-reads-unlocked`, `cmd::isolation`).
    pub pool_read_retries: AtomicU64,
    /// Time runs of commands waited between the hand-off to the pool and a worker starting them.
    pub queue_wait: WaitHistogram,
    pub commands: Box<[CommandStats]>,
    errors: Mutex<BTreeMap<String, u64>>,
    /// (unix ms, total_commands_processed) of the last ops/sec sample, and the rate it gave.
    ops_sample: Mutex<(u64, u64, u64)>,
}

impl Stats {
    /// Counters for the commands named `commands`, indexed like the command table.
    pub fn new(commands: impl IntoIterator<Item = String>) -> Stats {
        Stats {
            total_connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            total_commands_processed: ShardedU64::default(),
            total_error_replies: AtomicU64::new(0),
            keyspace_hits: ShardedU64::default(),
            keyspace_misses: ShardedU64::default(),
            expired_keys: AtomicU64::new(0),
            net_input_bytes: ShardedU64::default(),
            net_output_bytes: ShardedU64::default(),
            rtc_commands: ShardedU64::default(),
            rtc_fallbacks: AtomicU64::new(0),
            rtc_lock_retries: AtomicU64::new(0),
            unlocked_write_lookups: AtomicU64::new(0),
            io_key_affinity_moves: AtomicU64::new(0),
            rtc_backoff_skips: AtomicU64::new(0),
            rtc_disk_gate_closes: AtomicU64::new(0),
            rtc_script_budget_aborts: AtomicU64::new(0),
            rtc_write_batches: AtomicU64::new(0),
            io_poll_spins: AtomicU64::new(0),
            io_poll_spin_hits: AtomicU64::new(0),
            rtc_batched_writes: AtomicU64::new(0),
            pool_commands: ShardedU64::default(),
            pool_read_retries: AtomicU64::new(0),
            pool_unlocked_reads: AtomicU64::new(0),
            queue_wait: WaitHistogram::default(),
            commands: commands
                .into_iter()
                .map(|name| CommandStats {
                    name,
                    ..Default::default()
                })
                .collect(),
            errors: Mutex::new(BTreeMap::new()),
            ops_sample: Mutex::new((0, 0, 0)),
        }
    }

    /// Accounts a command that ran (`error` is its error reply, if any).
    pub fn record_call(&self, id: usize, elapsed: Duration, error: Option<&CmdError>) {
        let c = &self.commands[id];
        c.calls.fetch_add(1, Relaxed);
        c.usec.fetch_add(elapsed.as_micros() as u64, Relaxed);
        self.total_commands_processed.fetch_add(1, Relaxed);
        if let Some(e) = error {
            c.failed_calls.fetch_add(1, Relaxed);
            self.record_error(e);
        }
    }

    /// Accounts a command rejected before it ran (`id` is None for an unknown command).
    pub fn record_rejected(&self, id: Option<usize>, error: &CmdError) {
        if let Some(id) = id {
            self.commands[id].rejected_calls.fetch_add(1, Relaxed);
        }
        self.total_commands_processed.fetch_add(1, Relaxed);
        self.record_error(error);
    }

    fn record_error(&self, error: &CmdError) {
        self.total_error_replies.fetch_add(1, Relaxed);
        *self
            .errors
            .lock()
            .entry(error.prefix().to_string())
            .or_default() += 1;
    }

    /// Error counts by prefix, for INFO errorstats.
    pub fn error_counts(&self) -> Vec<(String, u64)> {
        self.errors
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// Called by the server timer: updates the instantaneous ops/sec estimate.
    pub fn sample_ops(&self, now_ms: u64) {
        let total = self.total_commands_processed.load(Relaxed);
        let mut s = self.ops_sample.lock();
        let (t0, n0, _) = *s;
        if t0 != 0 && now_ms > t0 {
            let rate = (total.saturating_sub(n0)) * 1000 / (now_ms - t0);
            *s = (now_ms, total, rate);
        } else {
            *s = (now_ms, total, s.2);
        }
    }

    pub fn instantaneous_ops_per_sec(&self) -> u64 {
        self.ops_sample.lock().2
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for a in [
            &self.total_connections_received,
            &self.rejected_connections,
            &self.total_error_replies,
            &self.expired_keys,
            &self.rtc_fallbacks,
            &self.rtc_lock_retries,
            &self.unlocked_write_lookups,
            &self.io_key_affinity_moves,
            &self.rtc_backoff_skips,
            &self.rtc_disk_gate_closes,
            &self.rtc_script_budget_aborts,
            &self.rtc_write_batches,
            &self.rtc_batched_writes,
            &self.io_poll_spins,
            &self.io_poll_spin_hits,
            &self.pool_read_retries,
            &self.pool_unlocked_reads,
        ] {
            a.store(0, Relaxed);
        }
        for a in [
            &self.total_commands_processed,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.rtc_commands,
            &self.pool_commands,
        ] {
            a.store(0, Relaxed);
        }
        self.queue_wait.reset();
        for c in self.commands.iter() {
            c.calls.store(0, Relaxed);
            c.usec.store(0, Relaxed);
            c.rejected_calls.store(0, Relaxed);
            c.failed_calls.store(0, Relaxed);
        }
        self.errors.lock().clear();
    }
}

/// A lock-free latency histogram in microseconds: 4 linear sub-buckets per power of two, so a
/// percentile is reported within 25% (the bucket's upper bound).
#[derive(Debug)]
pub struct WaitHistogram {
    buckets: [AtomicU64; WaitHistogram::BUCKETS],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Default for WaitHistogram {
    fn default() -> WaitHistogram {
        WaitHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
        }
    }
}

impl WaitHistogram {
    const BUCKETS: usize = 4 * 40;

    fn bucket(us: u64) -> usize {
        if us < 4 {
            return us as usize;
        }
        let exp = 63 - us.leading_zeros() as usize; // >= 2
        let sub = ((us >> (exp - 2)) & 3) as usize;
        (4 * (exp - 1) + sub).min(Self::BUCKETS - 1)
    }

    /// The largest value that falls into bucket `b`.
    fn upper(b: usize) -> u64 {
        if b < 4 {
            return b as u64;
        }
        let exp = b / 4 + 1;
        let sub = (b % 4) as u64;
        ((4 + sub + 1) << (exp - 2)) - 1
    }

    pub fn record(&self, d: Duration) {
        let us = d.as_micros() as u64;
        self.buckets[Self::bucket(us)].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Mean in microseconds (0 when empty).
    pub fn mean_us(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            0.0
        } else {
            self.sum_us.load(Relaxed) as f64 / n as f64
        }
    }

    /// The `q` quantile (0..=1) in microseconds, as its bucket's upper bound.
    pub fn quantile_us(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = ((n as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, c) in self.buckets.iter().enumerate() {
            seen += c.load(Relaxed);
            if seen >= rank {
                return Self::upper(b);
            }
        }
        Self::upper(Self::BUCKETS - 1)
    }

    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Relaxed);
        }
        self.count.store(0, Relaxed);
        self.sum_us.store(0, Relaxed);
    }
}

#[cfg(test)]
mod wait_tests {
    use super::*;

    #[test]
    fn histogram_quantiles_bound_the_values() {
        let h = WaitHistogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let p99 = h.quantile_us(0.99);
        assert!((990..=1250).contains(&p99), "{p99}");
        let p50 = h.quantile_us(0.5);
        assert!((500..=640).contains(&p50), "{p50}");
        assert!((h.mean_us() - 500.5).abs() < 0.01);
        for us in [0u64, 1, 3, 4, 5, 7, 8, 100, 1 << 20] {
            assert!(
                WaitHistogram::upper(WaitHistogram::bucket(us)) >= us,
                "{us}"
            );
        }
    }
}
