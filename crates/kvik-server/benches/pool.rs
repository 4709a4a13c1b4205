//! The worker pools side by side (issue 6): schedule-to-run latency and throughput of the
//! classic pool (mutex + condvar), the adaptive pool (lock-free lists, spin/yield/park), and the
//! lock-free lists with `pool-wait block` (to separate the lists' gain from the wait's), for 1,
//! 2, 8 and 64 producer threads; plus the cost of the pause instruction the spin level uses.
//!
//!   cargo bench --profile release -p kvik-server --bench pool           # all, ~30-60 s
//!   cargo bench --profile release -p kvik-server --bench pool -- pause  # criterion filter
//!
//! (`--profile release`, not cargo's default `bench` profile: the same artifacts as the tests,
//! so RocksDB's C++ is not compiled again.)
//!
//! - `throughput/<pool>/<producers>`: the producers submit as fast as they can (an open burst)
//!   and the clock stops when the last job has run; reported as time per job and jobs/s.
//! - `latency/<pool>/<producers>`: each producer keeps exactly one job in flight, like a
//!   connection: it submits, parks, and the job records the time from submit to the moment it
//!   starts, then unparks its producer. Reported as mean schedule-to-run time.
//! - `pause/200`: 200 `std::hint::spin_loop()` calls, the default level-1 spin.
//!
//! All pools have 4 workers (the server's default), the adaptive ones 2 workers per list.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kvik_server::pool::adaptive::{AdaptivePool, Tunables};
use kvik_server::pool::classic::ClassicPool;
use kvik_server::pool::{Pool, WaitMode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const PRODUCERS: [usize; 4] = [1, 2, 8, 64];
const WORKERS: usize = 4;

fn pools() -> Vec<(&'static str, Box<dyn Pool>)> {
    vec![
        ("classic", Box::new(ClassicPool::new(WORKERS))),
        (
            "adaptive",
            Box::new(AdaptivePool::new(Tunables {
                workers: WORKERS,
                ..Tunables::default()
            })),
        ),
        (
            "lists-block",
            Box::new(AdaptivePool::new(Tunables {
                workers: WORKERS,
                wait: WaitMode::Block,
                ..Tunables::default()
            })),
        ),
    ]
}

/// `producers` threads submit `iters` jobs in all as fast as they can; returns the time from
/// the start signal until the last job ran, scaled to `iters` jobs.
fn burst(pool: &dyn Pool, producers: usize, iters: u64) -> Duration {
    let per = iters.div_ceil(producers as u64).max(1);
    let total = per * producers as u64;
    let done = Arc::new(AtomicU64::new(0));
    let main = std::thread::current();
    let start_line = Barrier::new(producers + 1);
    std::thread::scope(|s| {
        for _ in 0..producers {
            let done = done.clone();
            let main = main.clone();
            let start_line = &start_line;
            s.spawn(move || {
                start_line.wait();
                for _ in 0..per {
                    let done = done.clone();
                    let main = main.clone();
                    pool.submit(Box::new(move || {
                        if done.fetch_add(1, SeqCst) + 1 == total {
                            main.unpark();
                        }
                    }));
                }
            });
        }
        start_line.wait();
        let start = Instant::now();
        while done.load(SeqCst) < total {
            std::thread::park_timeout(Duration::from_millis(10));
        }
        start.elapsed().mul_f64(iters as f64 / total as f64)
    })
}

/// `producers` threads each keep one job in flight; returns the summed submit-to-start time of
/// `iters` jobs (so criterion's per-iteration time is the mean schedule-to-run latency).
fn closed_loop(pool: &dyn Pool, producers: usize, iters: u64) -> Duration {
    let per = iters.div_ceil(producers as u64).max(1);
    let total_nanos = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..producers {
            let total_nanos = &total_nanos;
            s.spawn(move || {
                let me = std::thread::current();
                let flag = Arc::new(AtomicBool::new(false));
                let sum = Arc::new(AtomicU64::new(0));
                for _ in 0..per {
                    let t0 = Instant::now();
                    let (flag2, sum2, me2) = (flag.clone(), sum.clone(), me.clone());
                    pool.submit(Box::new(move || {
                        sum2.fetch_add(t0.elapsed().as_nanos() as u64, SeqCst);
                        flag2.store(true, SeqCst);
                        me2.unpark();
                    }));
                    while !flag.swap(false, SeqCst) {
                        std::thread::park();
                    }
                }
                total_nanos.fetch_add(sum.load(SeqCst), SeqCst);
            });
        }
    });
    let jobs = per * producers as u64;
    Duration::from_nanos((total_nanos.load(SeqCst) as u128 * iters as u128 / jobs as u128) as u64)
}

fn bench_pools(c: &mut Criterion) {
    let pools = pools();
    let mut group = c.benchmark_group("throughput");
    group.throughput(Throughput::Elements(1));
    for (name, pool) in &pools {
        for producers in PRODUCERS {
            group.bench_with_input(BenchmarkId::new(*name, producers), &producers, |b, &p| {
                b.iter_custom(|iters| burst(pool.as_ref(), p, iters))
            });
        }
    }
    group.finish();
    let mut group = c.benchmark_group("latency");
    for (name, pool) in &pools {
        for producers in PRODUCERS {
            group.bench_with_input(BenchmarkId::new(*name, producers), &producers, |b, &p| {
                b.iter_custom(|iters| closed_loop(pool.as_ref(), p, iters))
            });
        }
    }
    group.finish();
    for (_, pool) in pools {
        pool.shutdown();
    }
}

fn bench_pause(c: &mut Criterion) {
    c.bench_function("pause/200", |b| {
        b.iter(|| {
            for _ in 0..200 {
                std::hint::spin_loop();
            }
        })
    });
}

criterion_group! {
    name = benches;
    // Small samples keep the whole run near a minute on 2 cores; the ratios are what matters.
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(800));
    targets = bench_pause, bench_pools
}
criterion_main!(benches);
