//! How many of the I/O threads take connections (`io-threads-adaptive`).
//!
//! Two event loops carry a load that one cannot (pipelined writes gain a fifth to a half from
//! the second), but on a machine whose cores the clients share, two loops that each have little
//! to do cost more than one: each wakes for fewer requests, and the two queue for a core behind
//! each other and the clients, so a request that arrives while its thread sits in a run queue
//! waits a scheduler slice (GET -P 1 from 50 clients on two cores: p99 3.6 ms with two I/O
//! threads against 0.7-0.8 ms with one, and more requests a second; docs/benchmarks.md section
//! 37). Which count is faster depends on the load and on the machine, so the server tries and
//! keeps what serves more ([`Controller`]; thread 0 decides every [`WINDOW`]):
//!
//! - it tries one thread fewer when the active threads wait for a core (their run-queue time,
//!   from the kernel's schedstat, over [`TRY_FEWER_WAIT`] of a core together) while they are
//!   busy less than [`TRY_FEWER_BUSY`] of the time and their time on a core together would fit
//!   in one thread fewer ([`FEWER_FITS`]); on a machine with cores to spare nothing waits and
//!   nothing is tried;
//! - it tries one more when the active threads are saturated (busy over [`SATURATED`] of the
//!   wall time on average);
//! - a try is kept if the commands served per second over the [`TRIAL_WINDOWS`] windows after
//!   it are no fewer than before it (one thread more: 5% more; one fewer: at least as many,
//!   both before it and over [`CONFIRM_WINDOWS`] windows back at the old count, A B A, so that
//!   a load still warming up, or a compaction that ended during the try, is not taken for a
//!   gain of the count that saturates when wrong); else it is undone (at once if its first
//!   window serves a fifth less than before), and a try in the same direction waits twice as
//!   long as before ([`MIN_BACKOFF`] to [`MAX_BACKOFF`] windows) unless the load changes (its
//!   rate by a third). An idle server
//!   tries nothing, and a try that the load leaves (an idle window) ends unjudged at the tried
//!   count.
//!
//! A thread past the active count gives its connections away at the end of a turn, as an
//! `io-key-affinity` move does (never one in the pool, parked, paused or closing: those go
//! later); when the count grows, the active threads hand the new ones their share. Busy time is
//! the wall time of the event loop's turns, its polls excluded.

use parking_lot::Mutex;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize};
use std::time::Instant;

/// How often thread 0 measures and decides: one window.
pub const WINDOW: std::time::Duration = std::time::Duration::from_millis(500);
/// A thread busy over this share of the wall time is saturated.
pub const SATURATED: f64 = 0.9;
/// One thread fewer is tried only while the active threads are busy less than this on
/// average (pipelined writes keep two threads at 0.88-0.96 on two cores, and one thread is
/// far slower there).
pub const TRY_FEWER_BUSY: f64 = 0.85;
/// One thread fewer is tried only while the active threads' time on a core, together, is
/// under this many cores per thread that would remain: a try whose work cannot fit saturates
/// and is undone, and costs its windows (GET -P 1 from 50 clients: two threads on a core 0.95
/// of the time together, and one serves 8% more; GET at 2M keys, each read through RocksDB:
/// 1.1-1.2, and one thread saturates and serves a quarter less).
pub const FEWER_FITS: f64 = 1.05;
/// A try whose first measured window serves less than this share of its baseline is undone
/// at once.
const CLEAR_LOSS: f64 = 0.8;
/// Try one thread fewer when the active threads waited for a core more than this share of one
/// together ...
pub const TRY_FEWER_WAIT: f64 = 0.25;
/// ... over this many windows in a row (and one more after as many saturated windows).
const WANT_WINDOWS: u32 = 2;
/// Windows measured after a change (the first one after it is not: connections are moving).
pub const TRIAL_WINDOWS: u32 = 3;
/// Windows measured back at the old count after a try of one thread fewer that beat the rate
/// before it.
pub const CONFIRM_WINDOWS: usize = 2;
/// Windows of the rate the trial is held against.
const BASELINE_WINDOWS: usize = 3;
/// Windows before another try in a direction that failed: doubling from the first to the last.
pub const MIN_BACKOFF: u32 = 8;
pub const MAX_BACKOFF: u32 = 256;
/// Commands per second under which the server counts as idle: nothing is tried.
const IDLE_RATE: f64 = 1000.0;
/// A load whose rate moved this much (either way) from the one a failed try was measured at
/// is a new load: the wait before the next try in that direction ends.
const NEW_LOAD: f64 = 1.3;

/// One I/O thread's counters, written by the thread, read by thread 0's tick.
#[derive(Default)]
struct ThreadLoad {
    busy_ns: AtomicU64,
    /// The kernel's id of the thread (0 until it runs), for its schedstat.
    tid: AtomicI32,
}

/// One thread's share of a core over the last window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    pub busy: f64,
    /// Time on a core (the kernel's count; `None` where it does not say).
    pub cpu: Option<f64>,
    /// Run-queue wait; `None` where the kernel does not say.
    pub wait: Option<f64>,
}

/// Thread 0's measuring between ticks.
struct Window {
    at: Instant,
    commands: u64,
    busy_ns: Vec<u64>,
    sched_ns: Vec<Option<(u64, u64)>>,
    last: Vec<Sample>,
    controller: Controller,
}

pub struct Balance {
    threads: usize,
    active: AtomicUsize,
    /// `DEBUG IO-THREADS-ACTIVE n`: the count held at `n` whatever the load (0: not held).
    pinned: AtomicUsize,
    loads: Box<[ThreadLoad]>,
    changes: AtomicU64,
    moves: AtomicU64,
    window: Mutex<Window>,
}

impl Balance {
    pub fn new(threads: usize) -> Balance {
        let threads = threads.max(1);
        Balance {
            threads,
            active: AtomicUsize::new(threads),
            pinned: AtomicUsize::new(0),
            loads: (0..threads).map(|_| ThreadLoad::default()).collect(),
            changes: AtomicU64::new(0),
            moves: AtomicU64::new(0),
            window: Mutex::new(Window {
                at: Instant::now(),
                commands: 0,
                busy_ns: vec![0; threads],
                sched_ns: vec![None; threads],
                last: vec![Sample::default(); threads],
                controller: Controller::new(threads),
            }),
        }
    }

    /// I/O threads taking connections now: threads `0..active()`.
    pub fn active(&self) -> usize {
        self.active.load(Relaxed)
    }

    /// Called by I/O thread `index` as it starts.
    pub fn register_thread(&self, index: usize) {
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::gettid() };
        self.loads[index].tid.store(tid, Relaxed);
    }

    /// Adds a turn's wall time to thread `index`'s busy time.
    pub fn add_busy(&self, index: usize, ns: u64) {
        self.loads[index].busy_ns.fetch_add(ns, Relaxed);
    }

    /// Counts connections moved for the balance (INFO `io_balance_moves`).
    pub fn note_move(&self) {
        self.moves.fetch_add(1, Relaxed);
    }

    /// Thread 0, every [`WINDOW`]: measures the window since the last tick (`commands`:
    /// the server's count of commands processed so far) and sets the active count (every
    /// thread when `adaptive` is off).
    pub fn tick(&self, adaptive: bool, commands: u64) {
        let mut w = self.window.lock();
        let now = Instant::now();
        let span = now.duration_since(w.at).as_nanos().max(1) as f64;
        w.at = now;
        let rate = commands.saturating_sub(w.commands) as f64 * 1e9 / span;
        w.commands = commands;
        for i in 0..self.threads {
            let busy = self.loads[i].busy_ns.load(Relaxed);
            let sched = self.schedstat(i);
            let share = |now: u64, then: u64| now.saturating_sub(then) as f64 / span;
            let (cpu, wait) = match (sched, w.sched_ns[i]) {
                (Some(now), Some(then)) => (Some(share(now.0, then.0)), Some(share(now.1, then.1))),
                _ => (None, None),
            };
            w.last[i] = Sample {
                busy: share(busy, w.busy_ns[i]),
                cpu,
                wait,
            };
            w.busy_ns[i] = busy;
            w.sched_ns[i] = sched;
        }
        let before = self.active();
        let pinned = self.pinned.load(Relaxed);
        let next = if pinned > 0 {
            pinned
        } else if adaptive {
            let Window {
                last, controller, ..
            } = &mut *w;
            controller.step(rate, last)
        } else {
            w.controller = Controller::new(self.threads);
            self.threads
        };
        if next != before {
            self.active.store(next, Relaxed);
            self.changes.fetch_add(1, Relaxed);
            tracing::debug!(
                from = before,
                to = next,
                rate,
                "I/O threads taking connections"
            );
        }
    }

    /// Holds the active count at `n` (clamped to the threads there are; 0 lets the load decide
    /// again, from every thread), at once: for tests and diagnosis (`DEBUG IO-THREADS-ACTIVE`).
    pub fn pin(&self, n: usize) {
        let n = n.min(self.threads);
        self.pinned.store(n, Relaxed);
        let mut w = self.window.lock();
        w.controller = Controller::new(self.threads);
        let next = if n > 0 { n } else { self.threads };
        if self.active.swap(next, Relaxed) != next {
            self.changes.fetch_add(1, Relaxed);
        }
    }

    /// Thread `index`'s time on a core and time waiting for one, in nanoseconds, from
    /// `/proc/self/task/<tid>/schedstat` ("on-cpu-ns run-queue-ns slices").
    fn schedstat(&self, index: usize) -> Option<(u64, u64)> {
        let tid = self.loads[index].tid.load(Relaxed);
        if tid == 0 {
            return None;
        }
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
        Some((fields.next()??, fields.next()??))
    }

    /// INFO stats fields: the active count, its changes, the moves, and the last window's
    /// busy, on-core and run-queue shares per thread (percent of a core).
    pub fn info_fields(&self) -> Vec<(&'static str, String)> {
        let w = self.window.lock();
        let pct = |f: f64| format!("{:.0}", f * 100.0);
        let known = |f: Option<f64>| f.map_or_else(|| "-".into(), pct);
        let busy: Vec<String> = w.last.iter().map(|s| pct(s.busy)).collect();
        let cpu: Vec<String> = w.last.iter().map(|s| known(s.cpu)).collect();
        let wait: Vec<String> = w.last.iter().map(|s| known(s.wait)).collect();
        vec![
            ("io_threads_active", self.active().to_string()),
            (
                "io_threads_active_changes",
                self.changes.load(Relaxed).to_string(),
            ),
            ("io_balance_moves", self.moves.load(Relaxed).to_string()),
            ("io_threads_busy_pct", busy.join(",")),
            ("io_threads_cpu_pct", cpu.join(",")),
            ("io_threads_wait_pct", wait.join(",")),
        ]
    }
}

/// The I/O thread that a connection belongs to when `active` threads take connections.
pub fn home_of(client_id: u64, active: usize) -> usize {
    (client_id % active.max(1) as u64) as usize
}

/// The decision, fed one window at a time (see the module doc): a pure state machine, so its
/// rules are tested with made-up windows.
#[derive(Debug)]
pub struct Controller {
    threads: usize,
    active: usize,
    /// Commands per second of the windows in a row that asked for the same change, newest
    /// last (a try is held against them).
    rates: Vec<f64>,
    /// Windows in a row that asked for one thread fewer, one more.
    want_fewer: u32,
    want_more: u32,
    trial: Option<Trial>,
    /// When the next try of one thread fewer, one more, may start.
    fewer: Direction,
    more: Direction,
    /// Windows left to skip after a change, while connections move.
    settle: u32,
}

/// The tries in one direction.
#[derive(Debug)]
struct Direction {
    /// Windows to go before the next try may start.
    wait: u32,
    /// The wait after the next failure.
    backoff: u32,
    /// The rate the last failed try was held against.
    failed_at: f64,
}

impl Direction {
    fn new() -> Direction {
        Direction {
            wait: 0,
            backoff: MIN_BACKOFF,
            failed_at: 0.0,
        }
    }

    /// Counts a window down; a rate far from the failed try's means a new load: no wait.
    fn tick(&mut self, rate: f64) {
        self.wait = self.wait.saturating_sub(1);
        if rate > self.failed_at * NEW_LOAD || rate * NEW_LOAD < self.failed_at {
            self.wait = 0;
        }
    }
}

/// A try of `to` active threads, from `from`.
#[derive(Debug)]
struct Trial {
    from: usize,
    to: usize,
    /// The rate at `from` before the try.
    baseline: f64,
    /// The windows measured so far: at `to`, then (once `tried_rate` is known) at `from` again.
    rates: Vec<f64>,
    /// The mean rate at `to`, once it beat the baseline.
    tried_rate: Option<f64>,
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

impl Controller {
    pub fn new(threads: usize) -> Controller {
        Controller {
            threads,
            active: threads,
            rates: Vec::with_capacity(BASELINE_WINDOWS + 1),
            want_fewer: 0,
            want_more: 0,
            trial: None,
            fewer: Direction::new(),
            more: Direction::new(),
            settle: 0,
        }
    }

    /// Takes one window (commands per second, each thread's sample) and returns the active
    /// count for the next.
    pub fn step(&mut self, rate: f64, samples: &[Sample]) -> usize {
        if self.settle > 0 {
            self.settle -= 1;
            return self.active;
        }
        if rate < IDLE_RATE {
            // The clients left: a try in progress can no longer be judged. It ends at the
            // tried count, which the load that started it asked for and which served its
            // first window without a clear loss; the next load tries again if it is wrong
            // (one thread too few saturates and asks for one more).
            if let Some(trial) = self.trial.take() {
                if self.active != trial.to {
                    self.switch_to(trial.to);
                }
            }
            self.want_fewer = 0;
            self.want_more = 0;
            self.rates.clear();
            return self.active;
        }
        if let Some(trial) = &mut self.trial {
            trial.rates.push(rate);
            let measured = match trial.tried_rate {
                None => {
                    trial.rates.len() >= TRIAL_WINDOWS as usize
                        || rate < CLEAR_LOSS * trial.baseline
                }
                Some(_) => trial.rates.len() >= CONFIRM_WINDOWS,
            };
            if measured {
                let trial = self.trial.take().expect("checked above");
                self.judge(trial);
            }
            return self.active;
        }
        let active = &samples[..self.active.min(samples.len())];
        let busy = active.iter().map(|s| s.busy).sum::<f64>() / active.len().max(1) as f64;
        let waited = active.iter().map(|s| s.wait).sum::<Option<f64>>();
        let on_core = active.iter().map(|s| s.cpu).sum::<Option<f64>>();
        let saturated = busy > SATURATED;
        let more = self.active < self.threads && saturated;
        let fits = |cpu: f64| cpu < FEWER_FITS * (self.active - 1) as f64;
        let fewer = self.active > 1
            && busy < TRY_FEWER_BUSY
            && waited.is_some_and(|w| w > TRY_FEWER_WAIT)
            && on_core.is_some_and(fits);
        self.want_more = if more { self.want_more + 1 } else { 0 };
        self.want_fewer = if fewer { self.want_fewer + 1 } else { 0 };
        self.fewer.tick(rate);
        self.more.tick(rate);
        if more || fewer {
            self.rates.push(rate);
            if self.rates.len() > BASELINE_WINDOWS {
                self.rates.remove(0);
            }
        } else {
            self.rates.clear();
        }
        if self.want_more >= WANT_WINDOWS && self.more.wait == 0 {
            self.start_trial(self.active + 1);
        } else if self.want_fewer >= WANT_WINDOWS && self.fewer.wait == 0 {
            self.start_trial(self.active - 1);
        }
        self.active
    }

    fn start_trial(&mut self, to: usize) {
        let trial = Trial {
            from: self.active,
            to,
            baseline: mean(&self.rates),
            rates: Vec::with_capacity(TRIAL_WINDOWS as usize),
            tried_rate: None,
        };
        self.trial = Some(trial);
        self.switch_to(to);
    }

    /// Keeps a tried count that served as many commands as before it (one fewer thread: at
    /// least as many, and as many as the old count measured again after it; one more: 5%
    /// more), else stays at (or goes back to) the old count and waits longer before the next
    /// such try. A kept try is a failed one for the other direction: the count it left was
    /// slower.
    fn judge(&mut self, mut trial: Trial) {
        let measured = mean(&trial.rates);
        let fewer = trial.to < trial.from;
        let needed = if fewer { 1.0 } else { 1.05 };
        let kept = match trial.tried_rate {
            // One more thread is kept on the windows before it alone: taken for a rising
            // load, it leaves the default count, which no load pays much for.
            None if !fewer => measured >= needed * trial.baseline,
            None if measured >= needed * trial.baseline => {
                trial.tried_rate = Some(measured);
                trial.rates.clear();
                self.switch_to(trial.from);
                self.trial = Some(trial);
                return;
            }
            None => false,
            Some(tried) => tried >= needed * measured,
        };
        let (tried, other) = if fewer {
            (&mut self.fewer, &mut self.more)
        } else {
            (&mut self.more, &mut self.fewer)
        };
        if kept {
            tried.backoff = MIN_BACKOFF;
            other.wait = other.backoff;
            other.failed_at = trial.tried_rate.unwrap_or(measured);
            self.switch_to(trial.to);
        } else {
            tried.wait = tried.backoff;
            tried.backoff = (tried.backoff * 2).min(MAX_BACKOFF);
            // Held against the old count's latest rate: the load as it is now.
            tried.failed_at = if trial.tried_rate.is_some() {
                measured
            } else {
                trial.baseline
            };
            if self.active != trial.from {
                self.switch_to(trial.from);
            }
        }
    }

    fn switch_to(&mut self, active: usize) {
        self.active = active;
        self.settle = 1;
        self.rates.clear();
        self.want_fewer = 0;
        self.want_more = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(busy: f64, wait: f64) -> Sample {
        Sample {
            busy,
            cpu: Some(busy),
            wait: Some(wait),
        }
    }

    /// Feeds `windows` copies of one window; returns the active count after each.
    fn feed(c: &mut Controller, windows: usize, rate: f64, samples: &[Sample]) -> Vec<usize> {
        (0..windows).map(|_| c.step(rate, samples)).collect()
    }

    const LIGHT: [Sample; 2] = [
        Sample {
            busy: 0.45,
            cpu: Some(0.47),
            wait: Some(0.4),
        },
        Sample {
            busy: 0.45,
            cpu: Some(0.47),
            wait: Some(0.4),
        },
    ];

    #[test]
    fn a_light_load_that_waits_for_cores_tries_one_thread_and_keeps_it_if_no_slower() {
        let mut c = Controller::new(2);
        assert_eq!(feed(&mut c, 2, 60_000.0, &LIGHT), [2, 1]);
        // The settle window, then the trial's windows at one thread, 10% faster: back to two
        // to measure them again (the settle window and two more), no faster: one is kept.
        let one = [s(0.8, 0.02), s(0.0, 0.0)];
        assert_eq!(
            feed(&mut c, 1 + TRIAL_WINDOWS as usize, 66_000.0, &one),
            [1, 1, 1, 2]
        );
        assert_eq!(
            feed(&mut c, 1 + CONFIRM_WINDOWS, 60_000.0, &LIGHT),
            [2, 2, 1]
        );
        assert_eq!(feed(&mut c, 20, 66_000.0, &one), [1; 20]);
    }

    #[test]
    fn a_try_that_gained_from_a_rising_load_is_not_kept() {
        // A server warming up (or a compaction ending): the rate rises through the try, and
        // the old count, measured again, serves more than the try did.
        let mut c = Controller::new(2);
        assert_eq!(feed(&mut c, 2, 30_000.0, &LIGHT), [2, 1]);
        let one = [s(0.8, 0.02), s(0.0, 0.0)];
        assert_eq!(
            feed(&mut c, 1 + TRIAL_WINDOWS as usize, 45_000.0, &one),
            [1, 1, 1, 2]
        );
        assert_eq!(
            feed(&mut c, 1 + CONFIRM_WINDOWS, 55_000.0, &LIGHT),
            [2, 2, 2]
        );
        assert_eq!(
            (c.fewer.wait, c.fewer.backoff),
            (MIN_BACKOFF, 2 * MIN_BACKOFF)
        );
        assert_eq!(feed(&mut c, 5, 55_000.0, &LIGHT), [2; 5]);
    }

    #[test]
    fn a_slower_trial_is_undone_and_the_next_waits_twice_as_long() {
        let mut c = Controller::new(2);
        assert_eq!(feed(&mut c, 2, 200_000.0, &LIGHT), [2, 1]);
        let one = [s(0.99, 0.02), s(0.0, 0.0)];
        let steps = feed(&mut c, 1 + TRIAL_WINDOWS as usize, 180_000.0, &one);
        assert_eq!(steps, [1, 1, 1, 2]);
        assert_eq!(
            (c.fewer.wait, c.fewer.backoff),
            (MIN_BACKOFF, 2 * MIN_BACKOFF)
        );
        // Back at two: after the settle window, no new try for MIN_BACKOFF windows, then one.
        let steps = feed(&mut c, 16, 200_000.0, &LIGHT);
        let first_try = steps.iter().position(|&a| a == 1).expect("tries again");
        assert_eq!(first_try, MIN_BACKOFF as usize, "{steps:?}");
    }

    #[test]
    fn nothing_is_tried_without_waiting_for_a_core_or_without_schedstat_or_idle() {
        let mut c = Controller::new(2);
        assert_eq!(
            feed(&mut c, 10, 60_000.0, &[s(0.3, 0.0), s(0.3, 0.01)]),
            [2; 10]
        );
        let unknown = Sample {
            busy: 0.3,
            cpu: None,
            wait: None,
        };
        assert_eq!(feed(&mut c, 10, 60_000.0, &[unknown, unknown]), [2; 10]);
        assert_eq!(feed(&mut c, 10, 10.0, &LIGHT), [2; 10]);
    }

    #[test]
    fn saturated_threads_try_one_more_and_keep_it_only_if_faster() {
        let mut c = Controller::new(2);
        // Saturated threads that also wait are not offered a thread fewer.
        assert_eq!(
            feed(&mut c, 5, 200_000.0, &[s(0.95, 0.4), s(0.95, 0.4)]),
            [2; 5]
        );
        let mut c = Controller::new(2);
        assert_eq!(feed(&mut c, 2, 60_000.0, &LIGHT), [2, 1]);
        let one = [s(0.8, 0.02), s(0.0, 0.0)];
        feed(&mut c, 1 + TRIAL_WINDOWS as usize, 60_000.0, &one);
        assert_eq!(
            feed(&mut c, 1 + CONFIRM_WINDOWS, 60_000.0, &LIGHT),
            [2, 2, 1]
        );
        // Saturated at one thread: the kept try of one thread says two were slower, so two
        // are tried only after a wait (and the settle window of the switch back to one);
        // then they serve no more: back to one.
        let busy_one = [s(0.97, 0.02), s(0.0, 0.0)];
        let steps = feed(&mut c, MIN_BACKOFF as usize + 1, 60_000.0, &busy_one);
        assert_eq!(steps[..MIN_BACKOFF as usize], [1; MIN_BACKOFF as usize]);
        assert_eq!(steps.last(), Some(&2));
        let two = [s(0.6, 0.3), s(0.6, 0.3)];
        assert_eq!(
            feed(&mut c, 1 + TRIAL_WINDOWS as usize, 61_000.0, &two),
            [2, 2, 2, 1]
        );
        // Saturated again, but the next try in that direction waits.
        let steps = feed(&mut c, 6, 60_000.0, &busy_one);
        assert!(steps.iter().all(|&a| a == 1), "{steps:?}");
        // A load that two threads serve faster keeps two.
        let mut c = Controller::new(2);
        c.switch_to(1);
        feed(&mut c, 1, 100_000.0, &busy_one);
        assert_eq!(feed(&mut c, 2, 100_000.0, &busy_one), [1, 2]);
        let two = [s(0.93, 0.2), s(0.93, 0.2)];
        assert_eq!(feed(&mut c, 10, 140_000.0, &two), [2; 10]);
    }

    #[test]
    fn a_clear_loss_is_undone_after_one_window_and_busy_threads_try_nothing() {
        let mut c = Controller::new(2);
        assert_eq!(feed(&mut c, 2, 300_000.0, &LIGHT), [2, 1]);
        let one = [s(0.99, 0.01), s(0.0, 0.0)];
        assert_eq!(feed(&mut c, 2, 200_000.0, &one), [1, 2]);
        // Threads busy 88% of the time (pipelined writes) are not offered one fewer.
        let mut c = Controller::new(2);
        let busy = [s(0.88, 0.35), s(0.88, 0.35)];
        assert_eq!(feed(&mut c, 10, 300_000.0, &busy), [2; 10]);
    }

    #[test]
    fn work_that_one_thread_fewer_cannot_hold_is_not_tried() {
        // GET at 2M keys: two threads waiting for cores, on a core 1.2 of the time together.
        let mut c = Controller::new(2);
        let at_size = |cpu: f64| Sample {
            busy: 0.6,
            cpu: Some(cpu),
            wait: Some(0.4),
        };
        assert_eq!(
            feed(&mut c, 10, 50_000.0, &[at_size(0.5), at_size(0.7)]),
            [2; 10]
        );
        // The same waits with 0.95 of a core together: tried.
        assert_eq!(
            feed(&mut c, 2, 50_000.0, &[at_size(0.45), at_size(0.5)]),
            [2, 1]
        );
    }

    #[test]
    fn an_idle_window_ends_a_try_unjudged() {
        let mut c = Controller::new(2);
        assert_eq!(feed(&mut c, 2, 60_000.0, &LIGHT), [2, 1]);
        let one = [s(0.8, 0.02), s(0.0, 0.0)];
        assert_eq!(feed(&mut c, 2, 60_000.0, &one), [1, 1]);
        // The clients stop: the try ends at one thread, unjudged (no wait, no longer backoff).
        let idle = [s(0.0, 0.0), s(0.0, 0.0)];
        assert_eq!(feed(&mut c, 3, 0.0, &idle), [1, 1, 1]);
        assert!(c.trial.is_none());
        assert_eq!((c.fewer.wait, c.fewer.backoff), (0, MIN_BACKOFF));
        // And while confirming: the idle windows are not the old count's rate.
        let mut c = Controller::new(2);
        feed(&mut c, 2, 60_000.0, &LIGHT);
        assert_eq!(feed(&mut c, 4, 66_000.0, &one), [1, 1, 1, 2]);
        assert_eq!(feed(&mut c, 3, 0.0, &idle), [2, 1, 1]);
        assert!(c.trial.is_none());
        assert_eq!((c.fewer.wait, c.fewer.backoff), (0, MIN_BACKOFF));
        // A heavier load next saturates the one thread: one more is tried after two windows.
        let busy_one = [s(0.97, 0.02), s(0.0, 0.0)];
        assert_eq!(feed(&mut c, 3, 200_000.0, &busy_one), [1, 2, 2]);
    }

    #[test]
    fn a_new_load_ends_the_wait_after_a_failed_try() {
        let mut c = Controller::new(2);
        c.switch_to(1);
        let busy_one = [s(0.97, 0.02), s(0.0, 0.0)];
        feed(&mut c, 1, 60_000.0, &busy_one);
        assert_eq!(feed(&mut c, 2, 60_000.0, &busy_one), [1, 2]);
        let two = [s(0.6, 0.3), s(0.6, 0.3)];
        assert_eq!(feed(&mut c, 4, 60_000.0, &two), [2, 2, 2, 1]);
        assert!(c.more.wait > 0);
        // Within the noise of the same load: still waiting.
        assert_eq!(feed(&mut c, 3, 65_000.0, &busy_one), [1, 1, 1]);
        // Three times the rate (pipelining clients came): tried at once.
        assert_eq!(feed(&mut c, 1, 180_000.0, &busy_one), [2]);
    }

    #[test]
    fn homes_cover_the_active_threads_only() {
        assert!((0..100).all(|id| home_of(id, 1) == 0));
        let homes: std::collections::HashSet<usize> = (0..100).map(|id| home_of(id, 3)).collect();
        assert_eq!(homes.len(), 3);
        assert!(homes.iter().all(|&h| h < 3));
        assert_eq!(home_of(7, 0), 0);
    }
}
