//! The adaptive pool (`pool-mode adaptive`): lock-free task lists and a three-level wait.
//!
//! # How it works
//!
//! `workers` threads are split into groups of `workers-per-link`; each group shares one
//! [`TaskList`] (kvik-pool-list), so there are `ceil(workers / workers-per-link)` lists.
//! [`submit`](Pool::submit) picks a list round-robin with one atomic counter and pushes the job
//! with a CAS: producers (the I/O threads) never take a lock unless a worker of that list is
//! parked and must be woken. A worker swaps the whole list out at once, which hands it every
//! job queued so far in arrival order, runs that batch, and looks again. Only when its list is
//! empty does it wait, in three levels:
//!
//! 1. spin with the CPU's pause instruction for `pool-spin` checks (about a microsecond);
//! 2. SOMETIMES yield the CPU in a loop for up to `pool-max-yield-us` (100 µs);
//! 3. park on the list's condvar (a futex) until a producer wakes it.
//!
//! Why not park at once: waking a parked thread costs a futex syscall on the producer's side
//! and a few microseconds (more under load) before the worker runs, paid per request when the
//! pool keeps emptying between requests, which is exactly the case at moderate load. Why not
//! always yield: a yielding worker is runnable, so on a machine with fewer cores than busy
//! threads it takes CPU time from the I/O threads and from the workers that do have jobs. The
//! pool cannot know which case it is in, so it measures, like RocksDB's
//! `WriteThread::AwaitState`, whose rule this is:
//!
//! - A wait is *short* if work arrives within `pool-max-yield-us`, *long* otherwise. Long waits
//!   should park at once; short ones should yield.
//! - A yield that takes at least `pool-slow-yield-us` (3 µs) means another thread ran on this
//!   core meanwhile: the CPU is contended, and yielding steals from someone. After
//!   `pool-slow-yields` (3) such yields in one wait the worker gives up and parks. The count is
//!   3, not 1, because single slow yields happen on idle machines too (an interrupt, a timer).
//! - Level 2 is entered only while the shared *yield credit* is non-negative, or when the wait is
//!   sampled (one wait in `pool-sampling` = 256, so the credit can recover once it went
//!   negative).
//!
//! # The credit
//!
//! `credit` is an `i32` holding a fixed-point exponential moving average of level-2 outcomes.
//! A sampled wait, and every wait that gave up because of slow yields, updates it:
//!
//! ```text
//! v' = v - v/1024 + (found work ? +2^17 : -2^17)
//! ```
//!
//! so each outcome decays with weight 1/1024 (about the last thousand updates count). If every
//! update is a success, v converges to 2^17 * 1024 = 2^27 and never passes it: at v = 2^27 the
//! decay (2^17) cancels the step exactly; symmetric for failures. |v| <= 2^27 is far from the
//! 2^31 limit, so the arithmetic cannot overflow (unit test
//! `credit_is_bounded_and_follows_outcomes`). Starting at 0, one success makes it positive;
//! from saturation it takes 1024·ln 2 ≈ 710 failures in a row to turn it negative (and as many
//! successes to come back), so a burst does not flip the policy, while a sustained change
//! (a few hundred slow-yield exits, a fraction of a second under load) does.
//! Slow-yield exits always update (not only when sampled): contention is the signal to learn
//! fastest. On 2 cores under redis-benchmark load the credit went negative within the first
//! few seconds and stayed there, so level 2 ran only for the 1-in-256 samples: most sampled
//! yields ended at the 100 µs limit without work (40-55% found some), few by slow yields
//! (see docs/bench-sections/6.md).
//!
//! # Tunables (settings; read when the pool starts)
//!
//! | setting              | default | meaning                                                    |
//! |----------------------|---------|------------------------------------------------------------|
//! | `pool-wait`          | adaptive| `block` skips levels 1 and 2 (lists only, park at once)    |
//! | `workers-per-link`   | 2       | workers sharing one list (Pika measured 2 as the best)     |
//! | `pool-spin`          | 200     | level-1 checks, each followed by one pause                 |
//! | `pool-max-yield-us`  | 100     | longest level-2 wait                                       |
//! | `pool-slow-yield-us` | 3       | a yield at least this long counts as slow                  |
//! | `pool-slow-yields`   | 3       | slow yields that end level 2                               |
//! | `pool-sampling`      | 256     | one wait in this many enters level 2 whatever the credit   |
//! | `pool-list-slow-size`| 1024    | above it a producer yields once before pushing             |
//! | `pool-list-max-size` | 65536   | at it a producer blocks until a worker takes the list      |
//!
//! Measured where this was written (2 vCPUs, `model name: AMD EPYC`, Linux 6.18; criterion
//! `pause/200`): 200 `std::hint::spin_loop()` calls (x86 `pause`) take 6.5 µs idle and about
//! 10 µs with the machine busy, i.e. ~33 ns per pause, not the ~7 ns RocksDB's comment assumes
//! for the Xeons of its day: `pause` latency differs by an order of magnitude between CPU
//! generations, so the default 200 spins for ~6 µs here, not ~1 µs. Re-measure with
//! `cargo bench --profile release -p kvik-server --bench pool -- pause` before tuning
//! `pool-spin` on other hardware; `bench/pool.sh` (which can also run `adaptive-spinN`) compares
//! the pools on the server, `bench/pool_idle.sh` measures the idle cost. The results and what
//! the credit learned on 2 cores are in docs/bench-sections/6.md.
//!
//! # Fields, orderings, and who touches what
//!
//! - `Link::list`: pushed by any producer, taken by any worker of that link (see
//!   kvik-pool-list for its orderings: push and take are `SeqCst`).
//! - `Link::sleepers` / `Link::has_work`: the park handshake. A worker takes `lock`, adds
//!   itself to `sleepers` (`SeqCst`), re-checks the list (`SeqCst`) and waits on `has_work`,
//!   which releases `lock`. A producer pushes (`SeqCst`); if its push made the list non-empty,
//!   it reads `sleepers` (`SeqCst`) and, if non-zero, takes and releases `lock`, then notifies
//!   one. (A push onto a non-empty list wakes no one: a worker parks only on an empty list, so
//!   the push that ended that emptiness already woke it or was seen by it.) Both sides write
//!   one location and then read the other, all `SeqCst`, so at least one sees the other's
//!   write: either the worker sees the job and does not sleep, or the producer sees the
//!   sleeper; taking `lock` orders the notify after the worker is queued on the condvar. No
//!   wakeup is lost, and producers take no lock while no worker of that list is parked.
//! - `Link::blocked` / `Link::has_room`: the same handshake for producers at the hard size,
//!   mirrored: the worker subtracts from the list's length (in `take_all`), then reads
//!   `blocked`. Producers also re-check every 10 ms, so a bug here would cost latency, not a
//!   hang.
//! - `credit`: load and store, `Relaxed`, by any worker. Two workers updating at once may lose
//!   one update; that is fine for an average sampled one time in 256, and cheaper than a CAS
//!   loop on a shared line.
//! - `next`: `fetch_add`, `Relaxed`, by producers: only spreads jobs, orders nothing. It also
//!   counts submitted jobs.
//! - `stopping`: set once by `shutdown` (`SeqCst`, then every link's `lock` is taken and all
//!   waiters notified, as for a push). A worker exits only when its list is empty and
//!   `stopping` is set, so every job submitted before `shutdown` runs.
//! - `WorkerCounters`: written by its own worker only (`Relaxed`), read by INFO; each on its own
//!   cache line.
//!
//! Lock order: `Link::lock` is the only lock and nothing else is taken while it is held.
//! Order of jobs: one producer's jobs to one list run in push order when that list has one
//! worker; with more workers per list, batches start in order but may overlap. kvik needs no
//! more: a connection never has two jobs in the pool.

use super::{run_job, Job, Pool, PoolStats, WaitMode};
use crossbeam_utils::CachePadded;
use kvik_pool_list::TaskList;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use Ordering::{Relaxed, SeqCst};

/// The credit step, 2^17, as in RocksDB.
const CREDIT_STEP: i32 = 1 << 17;
/// How often a producer blocked at the hard size re-checks without being woken.
const ROOM_RECHECK: Duration = Duration::from_millis(10);

/// The adaptive pool's parameters (see the module docs; `PoolSettings::tunables` builds them
/// from the config).
#[derive(Clone, Debug)]
pub struct Tunables {
    pub workers: usize,
    pub workers_per_link: usize,
    pub wait: WaitMode,
    pub spin: u32,
    pub max_yield: Duration,
    pub slow_yield: Duration,
    pub max_slow_yields: u32,
    pub sampling: u32,
    pub list_slow_size: usize,
    pub list_max_size: usize,
}

impl Default for Tunables {
    /// The settings' defaults, with 4 workers.
    fn default() -> Tunables {
        Tunables {
            workers: 4,
            workers_per_link: 2,
            wait: WaitMode::Adaptive,
            spin: 200,
            max_yield: Duration::from_micros(100),
            slow_yield: Duration::from_micros(3),
            max_slow_yields: 3,
            sampling: 256,
            list_slow_size: 1024,
            list_max_size: 65536,
        }
    }
}

/// One task list and the wait/wake machinery of the workers that share it.
struct Link {
    list: TaskList<Job>,
    /// Held only across the park/unpark handshakes; guards no data.
    lock: Mutex<()>,
    has_work: Condvar,
    has_room: Condvar,
    /// Workers of this link parked or about to park on `has_work`.
    sleepers: AtomicUsize,
    /// Producers waiting on `has_room`.
    blocked: AtomicUsize,
}

/// Counters of one worker; only that worker writes them.
#[derive(Default)]
struct WorkerCounters {
    completed: AtomicU64,
    panics: AtomicU64,
    batches: AtomicU64,
    spin_hits: AtomicU64,
    yield_entered: AtomicU64,
    yield_hits: AtomicU64,
    yield_slow_exits: AtomicU64,
    yield_skipped: AtomicU64,
    parks: AtomicU64,
}

struct Shared {
    t: Tunables,
    links: Box<[CachePadded<Link>]>,
    next: CachePadded<AtomicU64>,
    credit: CachePadded<AtomicI32>,
    stopping: AtomicBool,
    counters: Box<[CachePadded<WorkerCounters>]>,
    producer_yields: AtomicU64,
    producer_blocks: AtomicU64,
}

/// See the module docs.
pub struct AdaptivePool {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// The credit after one level-2 outcome: `v - v/1024 ± 2^17` (see the module docs).
pub fn next_credit(v: i32, found_work: bool) -> i32 {
    v - v / 1024
        + if found_work {
            CREDIT_STEP
        } else {
            -CREDIT_STEP
        }
}

/// A tiny per-worker xorshift generator for the 1-in-`sampling` draw (no shared state, no
/// syscalls).
struct Sampler(u64);

impl Sampler {
    fn new(seed: usize) -> Sampler {
        use std::hash::{BuildHasher, Hasher};
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Sampler(((seed as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ random) | 1)
    }

    fn one_in(&mut self, n: u32) -> bool {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        n <= 1 || x.is_multiple_of(n as u64)
    }
}

impl AdaptivePool {
    pub fn new(t: Tunables) -> AdaptivePool {
        let workers = t.workers.max(1);
        let per_link = t.workers_per_link.clamp(1, workers);
        let nlinks = workers.div_ceil(per_link);
        let links = (0..nlinks)
            .map(|_| {
                CachePadded::new(Link {
                    list: TaskList::new(),
                    lock: Mutex::new(()),
                    has_work: Condvar::new(),
                    has_room: Condvar::new(),
                    sleepers: AtomicUsize::new(0),
                    blocked: AtomicUsize::new(0),
                })
            })
            .collect();
        let shared = Arc::new(Shared {
            t: Tunables {
                workers,
                workers_per_link: per_link,
                ..t
            },
            links,
            next: CachePadded::new(AtomicU64::new(0)),
            credit: CachePadded::new(AtomicI32::new(0)),
            stopping: AtomicBool::new(false),
            counters: (0..workers).map(|_| CachePadded::default()).collect(),
            producer_yields: AtomicU64::new(0),
            producer_blocks: AtomicU64::new(0),
        });
        let threads = (0..workers)
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("kvik-worker-{i}"))
                    .spawn(move || shared.worker_loop(i))
                    .expect("spawn worker thread")
            })
            .collect();
        AdaptivePool {
            shared,
            threads: Mutex::new(threads),
        }
    }
}

impl Shared {
    fn worker_loop(&self, index: usize) {
        let link = &self.links[index / self.t.workers_per_link];
        let me = &self.counters[index];
        let mut sampler = Sampler::new(index);
        loop {
            let batch = link.list.take_all();
            if !batch.is_empty() {
                me.batches.fetch_add(1, Relaxed);
                if link.blocked.load(SeqCst) > 0 {
                    drop(link.lock.lock());
                    link.has_room.notify_all();
                }
                for job in batch {
                    if !run_job(job) {
                        me.panics.fetch_add(1, Relaxed);
                    }
                    me.completed.fetch_add(1, Relaxed);
                }
                continue;
            }
            if self.stopping.load(SeqCst) {
                return;
            }
            self.await_work(link, me, &mut sampler);
        }
    }

    /// Whether a waiting worker of `link` should look again.
    fn ready(&self, link: &Link) -> bool {
        !link.list.is_empty() || self.stopping.load(Relaxed)
    }

    /// Returns when `link` may have work or the pool is stopping: spin, then maybe yield, then
    /// park (the three levels of the module docs).
    fn await_work(&self, link: &Link, me: &WorkerCounters, sampler: &mut Sampler) {
        if self.t.wait == WaitMode::Adaptive {
            // Level 1: a bounded spin with the pause instruction.
            for _ in 0..self.t.spin {
                if self.ready(link) {
                    me.spin_hits.fetch_add(1, Relaxed);
                    return;
                }
                std::hint::spin_loop();
            }
            // Level 2: yield, while the credit says it pays.
            if self.yield_level(link, me, sampler) {
                return;
            }
        }
        // Level 3: park until a producer (or shutdown) wakes us.
        let mut guard = link.lock.lock();
        link.sleepers.fetch_add(1, SeqCst);
        let mut parked = false;
        while link.list.is_empty() && !self.stopping.load(SeqCst) {
            parked = true;
            link.has_work.wait(&mut guard);
        }
        link.sleepers.fetch_sub(1, SeqCst);
        if parked {
            me.parks.fetch_add(1, Relaxed);
        }
    }

    /// Level 2. Returns true if work arrived while yielding.
    fn yield_level(&self, link: &Link, me: &WorkerCounters, sampler: &mut Sampler) -> bool {
        let sampled = sampler.one_in(self.t.sampling);
        if !sampled && self.credit.load(Relaxed) < 0 {
            me.yield_skipped.fetch_add(1, Relaxed);
            return false;
        }
        me.yield_entered.fetch_add(1, Relaxed);
        let mut update = sampled;
        let start = Instant::now();
        let mut iter_begin = start;
        let mut slow = 0;
        let found = loop {
            std::thread::yield_now();
            if self.ready(link) {
                break true;
            }
            let now = Instant::now();
            if now - iter_begin >= self.t.slow_yield {
                slow += 1;
                if slow >= self.t.max_slow_yields {
                    // Contention: always learn from it, sampled or not.
                    update = true;
                    me.yield_slow_exits.fetch_add(1, Relaxed);
                    break false;
                }
            }
            if now - start >= self.t.max_yield {
                break false;
            }
            iter_begin = now;
        };
        if found {
            me.yield_hits.fetch_add(1, Relaxed);
        }
        if update {
            let v = self.credit.load(Relaxed);
            self.credit.store(next_credit(v, found), Relaxed);
        }
        found
    }

    /// A producer at the hard size waits here until a worker takes the list.
    fn wait_for_room(&self, link: &Link) {
        self.producer_blocks.fetch_add(1, Relaxed);
        link.blocked.fetch_add(1, SeqCst);
        let mut guard = link.lock.lock();
        while link.list.len() >= self.t.list_max_size && !self.stopping.load(SeqCst) {
            link.has_room.wait_for(&mut guard, ROOM_RECHECK);
        }
        link.blocked.fetch_sub(1, SeqCst);
    }

    fn stop(&self) {
        self.stopping.store(true, SeqCst);
        for link in self.links.iter() {
            drop(link.lock.lock());
            link.has_work.notify_all();
            link.has_room.notify_all();
        }
    }
}

impl Pool for AdaptivePool {
    fn submit(&self, job: Job) {
        let s = &*self.shared;
        let n = s.next.fetch_add(1, Relaxed);
        let link = &s.links[(n % s.links.len() as u64) as usize];
        let len = link.list.len();
        if len >= s.t.list_max_size {
            s.wait_for_room(link);
        } else if len > s.t.list_slow_size {
            s.producer_yields.fetch_add(1, Relaxed);
            std::thread::yield_now();
        }
        // Only the push that makes the list non-empty wakes a parked worker (see the docs of
        // `Pushed::was_empty`): later pushes find it awake, or woken, or about to look.
        if link.list.push(job).was_empty && link.sleepers.load(SeqCst) > 0 {
            drop(link.lock.lock());
            link.has_work.notify_one();
        }
    }

    fn shutdown(&self) {
        self.shared.stop();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }

    fn stats(&self) -> PoolStats {
        let s = &*self.shared;
        let sum = |f: fn(&WorkerCounters) -> &AtomicU64| {
            s.counters.iter().map(|c| f(c).load(Relaxed)).sum::<u64>()
        };
        PoolStats {
            mode: "adaptive",
            wait: s.t.wait.name(),
            workers: s.t.workers,
            lists: s.links.len(),
            submitted: s.next.load(Relaxed),
            completed: sum(|c| &c.completed),
            panics: sum(|c| &c.panics),
            batches: sum(|c| &c.batches),
            spin_hits: sum(|c| &c.spin_hits),
            yield_entered: sum(|c| &c.yield_entered),
            yield_hits: sum(|c| &c.yield_hits),
            yield_slow_exits: sum(|c| &c.yield_slow_exits),
            yield_skipped: sum(|c| &c.yield_skipped),
            parks: sum(|c| &c.parks),
            credit: s.credit.load(Relaxed) as i64,
            producer_yields: s.producer_yields.load(Relaxed),
            producer_blocks: s.producer_blocks.load(Relaxed),
        }
    }
}

impl Drop for AdaptivePool {
    /// Stops the workers if `shutdown` was not called (they hold the shared state, so they
    /// would otherwise live on).
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU8;
    use std::sync::Barrier;

    fn tunables(workers: usize, per_link: usize, wait: WaitMode) -> Tunables {
        Tunables {
            workers,
            workers_per_link: per_link,
            wait,
            ..Tunables::default()
        }
    }

    /// Many producers, many workers: every job runs exactly once, and shutdown drains.
    fn every_job_runs_once(t: Tunables) {
        const PRODUCERS: usize = 8;
        const PER: usize = 5_000;
        let pool = Arc::new(AdaptivePool::new(t));
        let runs: Arc<Vec<AtomicU8>> =
            Arc::new((0..PRODUCERS * PER).map(|_| AtomicU8::new(0)).collect());
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let pool = pool.clone();
                let runs = runs.clone();
                std::thread::spawn(move || {
                    for i in 0..PER {
                        let runs = runs.clone();
                        pool.submit(Box::new(move || {
                            runs[p * PER + i].fetch_add(1, Relaxed);
                        }));
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        pool.shutdown();
        let counts: Vec<u8> = runs.iter().map(|r| r.load(Relaxed)).collect();
        assert!(
            counts.iter().all(|&c| c == 1),
            "a job was lost or ran twice"
        );
        let stats = pool.stats();
        assert_eq!(stats.submitted, (PRODUCERS * PER) as u64);
        assert_eq!(stats.completed, (PRODUCERS * PER) as u64);
        assert_eq!(stats.panics, 0);
    }

    #[test]
    fn many_producers_many_workers_adaptive_wait() {
        every_job_runs_once(tunables(4, 2, WaitMode::Adaptive));
    }

    #[test]
    fn many_producers_many_workers_block_wait() {
        every_job_runs_once(tunables(4, 1, WaitMode::Block));
    }

    #[test]
    fn many_producers_odd_worker_count_no_spin_tiny_lists() {
        every_job_runs_once(Tunables {
            spin: 0,
            max_yield: Duration::ZERO,
            list_slow_size: 2,
            list_max_size: 8,
            ..tunables(3, 2, WaitMode::Adaptive)
        });
    }

    /// With one worker (one list), each producer's jobs run in the order it submitted them.
    #[test]
    fn per_producer_fifo_with_one_list() {
        const PRODUCERS: usize = 6;
        const PER: usize = 3_000;
        let pool = Arc::new(AdaptivePool::new(tunables(1, 1, WaitMode::Adaptive)));
        let seen: Arc<Mutex<Vec<Vec<usize>>>> = Arc::new(Mutex::new(vec![Vec::new(); PRODUCERS]));
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let pool = pool.clone();
                let seen = seen.clone();
                std::thread::spawn(move || {
                    for i in 0..PER {
                        let seen = seen.clone();
                        pool.submit(Box::new(move || seen.lock()[p].push(i)));
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        pool.shutdown();
        for (p, order) in seen.lock().iter().enumerate() {
            assert_eq!(order, &(0..PER).collect::<Vec<_>>(), "producer {p}");
        }
    }

    /// A job that panics is caught and counted; the (only) worker keeps running later jobs.
    #[test]
    fn panicking_job_does_not_kill_the_worker() {
        let pool = AdaptivePool::new(tunables(1, 1, WaitMode::Adaptive));
        let ran = Arc::new(AtomicUsize::new(0));
        for i in 0..10 {
            let ran = ran.clone();
            pool.submit(Box::new(move || {
                if i % 3 == 0 {
                    panic!("job {i} fails on purpose");
                }
                ran.fetch_add(1, Relaxed);
            }));
        }
        pool.shutdown();
        assert_eq!(ran.load(Relaxed), 6);
        let stats = pool.stats();
        assert_eq!(stats.panics, 4);
        assert_eq!(stats.completed, 10);
    }

    /// Producers at the hard size wait (nothing is dropped) and resume once the worker drains.
    #[test]
    fn producers_block_at_the_hard_size_and_nothing_is_dropped() {
        let pool = Arc::new(AdaptivePool::new(Tunables {
            list_slow_size: 1,
            list_max_size: 4,
            ..tunables(1, 1, WaitMode::Adaptive)
        }));
        // The first job holds the only worker until the producers have filled the list.
        let gate = Arc::new(Barrier::new(2));
        {
            let gate = gate.clone();
            pool.submit(Box::new(move || {
                gate.wait();
            }));
        }
        let ran = Arc::new(AtomicUsize::new(0));
        let producers: Vec<_> = (0..4)
            .map(|_| {
                let pool = pool.clone();
                let ran = ran.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let ran = ran.clone();
                        pool.submit(Box::new(move || {
                            ran.fetch_add(1, Relaxed);
                        }));
                    }
                })
            })
            .collect();
        // Wait (bounded) until some producer is blocked at the hard size, then open the gate.
        let deadline = Instant::now() + Duration::from_secs(10);
        while pool.stats().producer_blocks == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(pool.stats().producer_blocks > 0, "no producer blocked");
        gate.wait();
        for p in producers {
            p.join().unwrap();
        }
        pool.shutdown();
        assert_eq!(ran.load(Relaxed), 200);
    }

    /// Shutdown runs everything already queued, even slow jobs queued behind each other.
    #[test]
    fn shutdown_drains_queued_jobs() {
        let pool = AdaptivePool::new(tunables(2, 2, WaitMode::Block));
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..200 {
            let ran = ran.clone();
            pool.submit(Box::new(move || {
                std::thread::sleep(Duration::from_micros(50));
                ran.fetch_add(1, Relaxed);
            }));
        }
        pool.shutdown();
        assert_eq!(ran.load(Relaxed), 200);
        // A second shutdown (and the drop after it) is harmless.
        pool.shutdown();
    }

    /// Idle workers end up parked (level 3), whatever the credit.
    #[test]
    fn idle_workers_park() {
        let pool = AdaptivePool::new(tunables(2, 1, WaitMode::Adaptive));
        pool.submit(Box::new(|| {}));
        let deadline = Instant::now() + Duration::from_secs(10);
        let parked = || {
            pool.shared
                .links
                .iter()
                .map(|l| l.sleepers.load(SeqCst))
                .sum::<usize>()
        };
        while parked() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(parked(), 2);
        pool.shutdown();
    }

    #[test]
    fn credit_is_bounded_and_follows_outcomes() {
        let mut v = 0;
        for _ in 0..100_000 {
            v = next_credit(v, true);
            assert!(v <= 1 << 27);
        }
        assert!(v > (1 << 27) - (1 << 17), "converges to 2^27, got {v}");
        let mut failures = 0;
        while v >= 0 {
            v = next_credit(v, false);
            failures += 1;
        }
        // Hysteresis: a saturated credit survives a burst of failures.
        assert!((700..720).contains(&failures), "{failures}");
        for _ in 0..100_000 {
            v = next_credit(v, false);
            assert!(v >= -(1 << 27));
        }
        assert!(next_credit(0, true) > 0 && next_credit(0, false) < 0);
    }

    #[test]
    fn sampler_hits_about_one_in_n() {
        let mut s = Sampler::new(7);
        let hits = (0..256_000).filter(|_| s.one_in(256)).count();
        assert!((500..1500).contains(&hits), "{hits}");
        assert!((0..10).all(|_| s.one_in(1)));
    }
}
