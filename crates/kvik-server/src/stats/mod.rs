//! Counters behind INFO: server-wide totals, per-command call statistics (commandstats) and
//! error counts by prefix (errorstats). Everything is a relaxed atomic: counters are read for
//! reporting only, never to make a decision another thread depends on.

pub mod info;
pub mod slowlog;

use crate::cmd::ctx::CmdError;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Call statistics of one command or subcommand (INFO commandstats).
#[derive(Default, Debug)]
pub struct CommandStats {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    /// Rejected before running (arity, auth ...).
    pub rejected_calls: AtomicU64,
    /// Ran and replied with an error.
    pub failed_calls: AtomicU64,
}

#[derive(Debug)]
pub struct Stats {
    pub total_connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_commands_processed: AtomicU64,
    pub total_error_replies: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub expired_keys: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub commands: Box<[CommandStats]>,
    errors: Mutex<BTreeMap<String, u64>>,
    /// (unix ms, total_commands_processed) of the last ops/sec sample, and the rate it gave.
    ops_sample: Mutex<(u64, u64, u64)>,
}

impl Stats {
    pub fn new(commands: usize) -> Stats {
        Stats {
            total_connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            total_commands_processed: AtomicU64::new(0),
            total_error_replies: AtomicU64::new(0),
            keyspace_hits: AtomicU64::new(0),
            keyspace_misses: AtomicU64::new(0),
            expired_keys: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            commands: (0..commands).map(|_| CommandStats::default()).collect(),
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
            &self.total_commands_processed,
            &self.total_error_replies,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.expired_keys,
            &self.net_input_bytes,
            &self.net_output_bytes,
        ] {
            a.store(0, Relaxed);
        }
        for c in self.commands.iter() {
            for a in [&c.calls, &c.usec, &c.rejected_calls, &c.failed_calls] {
                a.store(0, Relaxed);
            }
        }
        self.errors.lock().clear();
    }
}
