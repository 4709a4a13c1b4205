//! The classic pool: one FIFO queue under a mutex, workers parked on a condvar.
//!
//! Simple and fair, and the baseline every other pool is measured against (`pool-mode
//! classic`). Every submit and every take contends on the one mutex, which is what the lock-free
//! pool removes. A panicking job is caught and counted; the worker carries on.

use super::{run_job, Job, Pool, PoolStats};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;

/// Jobs queued beyond this make `submit` wait (backpressure instead of unbounded memory).
const MAX_QUEUED: usize = 1 << 16;

struct State {
    queue: VecDeque<Job>,
    stopping: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is queued or the pool stops.
    has_work: Condvar,
    /// Signalled when a job is taken, for producers waiting on a full queue.
    has_room: Condvar,
    /// INFO counters (relaxed; written by whoever does the thing).
    submitted: AtomicU64,
    completed: AtomicU64,
    panics: AtomicU64,
    parks: AtomicU64,
    producer_blocks: AtomicU64,
}

pub struct ClassicPool {
    shared: std::sync::Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    threads: usize,
}

impl ClassicPool {
    pub fn new(threads: usize) -> ClassicPool {
        Self::named(threads, "kvik-worker")
    }

    /// A pool whose threads are called `{name}-{i}` (the slow lane's are `kvik-slow-*`).
    pub fn named(threads: usize, name: &str) -> ClassicPool {
        let shared = std::sync::Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                stopping: false,
            }),
            has_work: Condvar::new(),
            has_room: Condvar::new(),
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            parks: AtomicU64::new(0),
            producer_blocks: AtomicU64::new(0),
        });
        let workers = (0..threads.max(1))
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || worker_loop(&shared))
                    .expect("spawn worker thread")
            })
            .collect();
        ClassicPool {
            shared,
            workers: Mutex::new(workers),
            threads: threads.max(1),
        }
    }
}

fn worker_loop(shared: &Shared) {
    loop {
        let job = {
            let mut state = shared.state.lock();
            loop {
                if let Some(job) = state.queue.pop_front() {
                    break job;
                }
                if state.stopping {
                    return;
                }
                shared.parks.fetch_add(1, Relaxed);
                shared.has_work.wait(&mut state);
            }
        };
        shared.has_room.notify_one();
        if !run_job(job) {
            shared.panics.fetch_add(1, Relaxed);
        }
        shared.completed.fetch_add(1, Relaxed);
    }
}

impl Pool for ClassicPool {
    fn submit(&self, job: Job) {
        self.shared.submitted.fetch_add(1, Relaxed);
        let mut state = self.shared.state.lock();
        if state.queue.len() >= MAX_QUEUED {
            self.shared.producer_blocks.fetch_add(1, Relaxed);
        }
        while state.queue.len() >= MAX_QUEUED && !state.stopping {
            self.shared.has_room.wait(&mut state);
        }
        state.queue.push_back(job);
        drop(state);
        self.shared.has_work.notify_one();
    }

    fn shutdown(&self) {
        self.shared.state.lock().stopping = true;
        self.shared.has_work.notify_all();
        for w in self.workers.lock().drain(..) {
            let _ = w.join();
        }
    }

    fn stats(&self) -> PoolStats {
        let s = &self.shared;
        let completed = s.completed.load(Relaxed);
        PoolStats {
            mode: "classic",
            wait: "block",
            workers: self.threads,
            lists: 1,
            submitted: s.submitted.load(Relaxed),
            completed,
            panics: s.panics.load(Relaxed),
            batches: completed,
            parks: s.parks.load(Relaxed),
            producer_blocks: s.producer_blocks.load(Relaxed),
            ..PoolStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn runs_every_job_once_and_drains_on_shutdown() {
        let pool = ClassicPool::new(4);
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..10_000 {
            let c = count.clone();
            pool.submit(Box::new(move || {
                c.fetch_add(1, Ordering::Relaxed);
            }));
        }
        pool.shutdown();
        assert_eq!(count.load(Ordering::Relaxed), 10_000);
        assert_eq!(pool.stats().completed, 10_000);
    }

    #[test]
    fn panicking_job_does_not_kill_the_worker() {
        let pool = ClassicPool::new(1);
        let count = Arc::new(AtomicUsize::new(0));
        for i in 0..6 {
            let c = count.clone();
            pool.submit(Box::new(move || {
                if i % 2 == 0 {
                    panic!("job {i} fails on purpose");
                }
                c.fetch_add(1, Ordering::Relaxed);
            }));
        }
        pool.shutdown();
        assert_eq!(count.load(Ordering::Relaxed), 3);
        assert_eq!(pool.stats().panics, 3);
    }
}
