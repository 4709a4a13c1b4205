//! Whether an I/O thread may read the disk itself while it runs a command to completion.
//!
//! A command run on an I/O thread must not wait, and a RocksDB read that leaves its memory
//! (memtables, block cache) was counted as a wait: it ended the try and the pool ran the
//! command again. At 2M-10M keys nearly every hot-cache miss is such a read, and the pool's
//! hop (a queue, a wake-up, two context switches, the reply handed back) cost more than the
//! read: the blocks were in the OS page cache, a copy and a checksum away (a profile of SET at
//! 2M keys put 17% of the server's CPU in the scheduler). So an I/O thread reads the disk
//! itself, the way Redis's one thread touches its memory, for as long as those reads stay
//! fast. A read that has to go to the device (tens to thousands of microseconds) would hold
//! up every client of the thread; the pool is for that. Each I/O thread therefore times its
//! tries that may read the disk, and when more than 16 of a window of 64 took longer than
//! `rtc-disk-read-slow-us` (1 ms: a network disk, not local flash or the page cache), it
//! keeps its reads in memory for a pause (doubling after each slow window, up to 16,384
//! tries), then tries the disk again: a device that turns fast, or
//! data that moved into the page cache, is noticed within one pause (the backoff of
//! `rtc_backoff`, with its own rule).
//!
//! Thread-local (an I/O thread's own counters; nothing shared on the path), and switchable:
//! `rtc-disk-read no` keeps an I/O thread's reads in memory, as before.

use super::rtc_backoff::{Backoff, Policy};
use std::cell::Cell;
use std::time::Duration;

/// Windows of 64 tries; more than 16 slow ones keep reads in memory for 1,024 tries, doubling
/// up to 16,384. A quarter, not a few: on a busy 2-core machine a thread is preempted by
/// compaction now and then, and a try that lost the CPU for a time slice is not a slow disk
/// (at 10M keys a rule of 4 of 64 at 50 us closed the gate after every few thousand tries and
/// lost most of the gain, docs/benchmarks.md section 24); a device slower than the limit
/// makes most misses slow.
const SLOW_READS: Policy = Policy {
    window: 64,
    bad_allowed: 16,
    first_pause: 1_024,
    max_pause: 16_384,
};

thread_local! {
    static GATE: Cell<Backoff> = const { Cell::new(Backoff::NEW) };
}

fn with_gate<T>(f: impl FnOnce(&mut Backoff) -> T) -> T {
    GATE.with(|cell| {
        let mut gate = cell.get();
        let result = f(&mut gate);
        cell.set(gate);
        result
    })
}

/// Whether this I/O thread's next try may read the disk (its recent ones were fast).
pub fn open() -> bool {
    with_gate(Backoff::should_try)
}

/// A try that was allowed the disk took `took`; `slow` is `rtc-disk-read-slow-us`. Returns
/// whether it closed this thread's gate.
pub fn record(took: Duration, slow: Duration) -> bool {
    with_gate(|g| g.record(&SLOW_READS, took > slow))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `n` tries whose slowness `slow(i)` says; returns how many were allowed the disk.
    const WINDOW: u16 = SLOW_READS.window;
    const MAX_PAUSE: u32 = SLOW_READS.max_pause;

    fn run(g: &mut Backoff, n: usize, slow: impl Fn(usize) -> bool) -> usize {
        let mut open = 0;
        for i in 0..n {
            if g.should_try() {
                open += 1;
                g.record(&SLOW_READS, slow(i));
            }
        }
        open
    }

    #[test]
    fn fast_reads_keep_the_gate_open() {
        let mut g = Backoff::NEW;
        assert_eq!(run(&mut g, 100_000, |_| false), 100_000);
    }

    #[test]
    fn an_occasional_slow_read_does_not_close_it() {
        let mut g = Backoff::NEW;
        // One in 8 slow: eight per window, under the limit.
        assert_eq!(run(&mut g, 100_000, |i| i % 8 == 0), 100_000);
    }

    #[test]
    fn a_slow_disk_is_read_by_the_pool_nearly_always() {
        let mut g = Backoff::NEW;
        let open = run(&mut g, 1_000_000, |_| true);
        // Windows of 64 between pauses doubling to 16,384: under 1% read here.
        assert!(open >= WINDOW as usize, "open {open}");
        assert!(open < 10_000, "open {open}");
    }

    #[test]
    fn a_disk_that_turns_fast_is_read_here_again() {
        let mut g = Backoff::NEW;
        run(&mut g, 1_000_000, |_| true);
        run(&mut g, (MAX_PAUSE + WINDOW as u32) as usize, |_| false);
        assert_eq!(g.paused(), 0);
        assert_eq!(run(&mut g, 10_000, |_| false), 10_000);
    }

    #[test]
    fn record_reports_the_try_that_closes() {
        let mut g = Backoff::NEW;
        let closed: Vec<bool> = (0..WINDOW).map(|_| g.record(&SLOW_READS, true)).collect();
        assert_eq!(closed.iter().filter(|c| **c).count(), 1);
        assert!(closed[WINDOW as usize - 1]);
        assert!(!g.should_try());
    }
}
