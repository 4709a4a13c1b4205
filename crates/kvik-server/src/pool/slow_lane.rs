//! The slow lane: a few threads of their own for the commands that have been taking long
//! (KEYS over a big keyspace, reads of whole big collections, long scripts, SORT ...), so
//! they cannot take every worker, and the cores with them, from the commands that are quick.
//!
//! On 2 cores, four clients looping `KEYS` held all four workers; the I/O threads, sharing the
//! cores with them, answered GET and SET at a quarter of their pace (docs/benchmarks.md
//! section 46). Redis, single-threaded, stops answering at all during such a command; Pika
//! users asked for this split (Pika #2085, #2566: "separate fast and slow commands", adapted
//! from measured durations).
//!
//! Which commands are slow is measured, not listed: every command's run time feeds a moving
//! average per command ([`SlowLane::observe`]), and a run of commands handed to the pool goes
//! to the lane while its first command's average is at least `slow-lane-threshold-us` (Redis's
//! `slowlog-log-slower-than` default, 10 ms). A command that turns quick again drifts back to
//! the workers. Commands Redis flags `fast` (GET, HGET, SET ...) never go (`cmd::slow_lane`). The lane keeps one connection's run in one job, as the pool does, so order
//! holds; a slow command merely waits for the slow ones before it.

use super::{classic::ClassicPool, Job, Pool};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The weight of the newest run time in a command's average: a quarter, so one long call
/// marks the command slow for a few calls, and a few quick ones clear it.
const NEWEST_SHARE: u32 = 4;

/// Calls shorter than this leave an average shorter than this alone: a quick command's calls
/// write no memory both I/O threads share. The lane's threshold is at least this.
pub const QUICK_US: u32 = 1000;

/// The lane, and the run-time averages that pick what goes there.
pub struct SlowLane {
    /// The lane's threads (`slow-lane-threads`; unset when 0: slow commands stay on the pool).
    pool: OnceLock<Arc<dyn Pool>>,
    /// Average run time in microseconds, by command table id.
    average_us: Box<[AtomicU32]>,
    /// Whether the command of each id may go to the lane at all.
    may_go: Box<[bool]>,
    /// Runs of commands sent to the lane.
    jobs: AtomicU64,
}

impl SlowLane {
    /// Averages for the command ids of `may_go` (true where the command may go to the lane);
    /// no threads until [`SlowLane::start`].
    pub fn new(may_go: impl IntoIterator<Item = bool>) -> SlowLane {
        let may_go: Box<[bool]> = may_go.into_iter().collect();
        SlowLane {
            pool: OnceLock::new(),
            average_us: may_go.iter().map(|_| AtomicU32::new(0)).collect(),
            may_go,
            jobs: AtomicU64::new(0),
        }
    }

    /// Starts `threads` lane threads (none for 0).
    pub fn start(&self, threads: usize) {
        if threads > 0 {
            let _ = self
                .pool
                .set(Arc::new(ClassicPool::named(threads, "kvik-slow")));
        }
    }

    /// Runs the jobs already queued, then stops the lane's threads.
    pub fn shutdown(&self) {
        if let Some(pool) = self.pool.get() {
            pool.shutdown();
        }
    }

    /// Notes that command `id` ran for `elapsed` (on any thread).
    pub fn observe(&self, id: usize, elapsed: Duration) {
        if !self.may_go.get(id).copied().unwrap_or(false) {
            return;
        }
        let average = &self.average_us[id];
        let sample = u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX);
        let old = average.load(Relaxed);
        if sample < QUICK_US && old < QUICK_US {
            return;
        }
        // A lost update between two threads only drops one sample from the average.
        let new = if sample >= old {
            old + (sample - old) / NEWEST_SHARE
        } else {
            old - (old - sample) / NEWEST_SHARE
        };
        average.store(new, Relaxed);
    }

    /// Whether command `id` may go to the lane and has been taking at least `threshold_us` on
    /// average.
    pub fn is_slow(&self, id: usize, threshold_us: u64) -> bool {
        self.may_go.get(id).copied().unwrap_or(false)
            && u64::from(self.average_us[id].load(Relaxed)) >= threshold_us
    }

    /// Queues `job`, whose first command is `id`, on the lane if that command is slow and the
    /// lane runs; gives the job back otherwise (for the pool).
    pub fn submit_if_slow(&self, id: usize, threshold_us: u64, job: Job) -> Option<Job> {
        match self.pool.get() {
            Some(lane) if self.is_slow(id, threshold_us) => {
                self.jobs.fetch_add(1, Relaxed);
                lane.submit(job);
                None
            }
            _ => Some(job),
        }
    }

    /// Lane threads (0: no lane) and runs sent to the lane, for INFO.
    pub fn counts(&self) -> (usize, u64) {
        let threads = self.pool.get().map_or(0, |p| p.stats().workers);
        (threads, self.jobs.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_long_call_marks_a_command_slow_and_quick_ones_clear_it() {
        let lane = SlowLane::new([true, true, true, false]);
        assert!(!lane.is_slow(1, 10_000));
        lane.observe(1, Duration::from_millis(800));
        assert!(lane.is_slow(1, 10_000), "one KEYS of 800 ms");
        assert!(!lane.is_slow(2, 10_000), "other commands are not touched");
        let mut quick_calls = 0;
        while lane.is_slow(1, 10_000) {
            lane.observe(1, Duration::from_micros(50));
            quick_calls += 1;
        }
        assert!((5..=20).contains(&quick_calls), "{quick_calls}");
        lane.observe(3, Duration::from_secs(1));
        assert!(
            !lane.is_slow(3, 10_000),
            "a command that may not go never does"
        );
        lane.observe(99, Duration::from_secs(1)); // an id past the table: ignored
        assert!(!lane.is_slow(99, 0));
    }

    #[test]
    fn without_threads_every_job_is_given_back() {
        let lane = SlowLane::new([true, true]);
        lane.observe(0, Duration::from_secs(1));
        assert!(lane.submit_if_slow(0, 10, Box::new(|| {})).is_some());
        assert_eq!(lane.counts(), (0, 0));
    }

    #[test]
    fn a_slow_command_runs_on_the_lane() {
        let lane = SlowLane::new([true, true]);
        lane.start(1);
        lane.observe(0, Duration::from_secs(1));
        let (tx, rx) = std::sync::mpsc::channel();
        let job: Job = Box::new(move || {
            let name = std::thread::current().name().map(str::to_string);
            tx.send(name).unwrap();
        });
        assert!(lane.submit_if_slow(0, 10_000, job).is_none());
        let ran_on = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(ran_on.as_deref(), Some("kvik-slow-0"));
        assert!(lane.submit_if_slow(1, 10_000, Box::new(|| {})).is_some());
        assert_eq!(lane.counts(), (1, 1));
        lane.shutdown();
    }
}
