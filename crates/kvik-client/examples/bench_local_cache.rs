//! Benchmark of the local cache: N threads doing blocking GETs of a small hot key set over one
//! shared connection, with the local cache off (`plain`: every GET is a round trip) and on
//! (`cached`: hits answered from memory, kept consistent by CLIENT TRACKING), while a writer on
//! another connection overwrites one hot key every `--write-every-us` microseconds (so the
//! cache keeps being invalidated). Modes run in alternation (plain, cached, plain, ...), so
//! drift hits both alike. Prints per run QPS, average and p99 latency and the cache hit ratio,
//! then the medians and the cached/plain ratios.
//!
//! Usage: bench_local_cache --addr 127.0.0.1:6379 [--threads 8] [--ops 200000] [--rounds 3]
//!        [--keys 100] [--write-every-us 1000]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use kvik_client::{Client, Commands, ConnectOptions};

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn key(i: usize) -> String {
    format!("hot-{i:05}")
}

struct Run {
    qps: f64,
    avg_us: f64,
    p99_us: f64,
    hit_ratio: f64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = arg(&args, "--addr", "127.0.0.1:6379");
    let threads: usize = arg(&args, "--threads", "8").parse().expect("--threads");
    let ops: usize = arg(&args, "--ops", "200000").parse().expect("--ops");
    let rounds: usize = arg(&args, "--rounds", "3").parse().expect("--rounds");
    let nkeys: usize = arg(&args, "--keys", "100").parse().expect("--keys");
    let write_every = Duration::from_micros(
        arg(&args, "--write-every-us", "1000")
            .parse()
            .expect("--write-every-us"),
    );
    let setup = Client::connect(&addr, ConnectOptions::new()).expect("connect");
    for i in 0..nkeys {
        setup.set(key(i), format!("value-{i}")).expect("SET");
    }
    println!(
        "bench_local_cache: addr={addr} threads={threads} ops/run={ops} rounds={rounds} \
         keys={nkeys} write_every={write_every:?}"
    );
    println!(
        "{:>7} {:>5} {:>12} {:>9} {:>9} {:>6}",
        "mode", "round", "QPS", "avg_us", "p99_us", "hits"
    );
    let modes = ["plain", "cached"];
    let mut results: Vec<Vec<Run>> = vec![Vec::new(), Vec::new()];
    for round in 0..rounds {
        for (mi, mode) in modes.iter().enumerate() {
            let r = run_once(&addr, mi == 1, threads, ops, nkeys, write_every);
            println!(
                "{mode:>7} {round:>5} {:>12.0} {:>9.1} {:>9.1} {:>5.1}%",
                r.qps,
                r.avg_us,
                r.p99_us,
                r.hit_ratio * 100.0
            );
            results[mi].push(r);
        }
    }
    let med = |v: &[Run], f: fn(&Run) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(|a, b| a.partial_cmp(b).unwrap());
        x[x.len() / 2]
    };
    println!("\nmedians of {rounds} alternating rounds:");
    let meds: Vec<(f64, f64, f64)> = results
        .iter()
        .map(|r| {
            (
                med(r, |x| x.qps),
                med(r, |x| x.avg_us),
                med(r, |x| x.p99_us),
            )
        })
        .collect();
    for (mi, mode) in modes.iter().enumerate() {
        let (q, a, p) = meds[mi];
        println!("  {mode:<7} QPS={q:>10.0} avg={a:>8.1}us p99={p:>8.1}us");
    }
    println!(
        "  cached/plain: QPS x{:.1}  avg x{:.4}  p99 x{:.4}",
        meds[1].0 / meds[0].0,
        meds[1].1 / meds[0].1,
        meds[1].2 / meds[0].2
    );
}

fn run_once(
    addr: &str,
    cached: bool,
    threads: usize,
    ops: usize,
    nkeys: usize,
    write_every: Duration,
) -> Run {
    let opts = ConnectOptions::new().timeout(Duration::from_secs(60));
    let opts = if cached {
        opts.local_cache(100_000)
    } else {
        opts
    };
    let client = Arc::new(Client::connect(addr, opts).expect("connect"));
    let writer = Client::connect(addr, ConnectOptions::new()).expect("connect");
    let stop = Arc::new(AtomicBool::new(false));
    let writer_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                i = i.wrapping_mul(2_654_435_761).wrapping_add(1);
                writer
                    .set(key(i % nkeys), format!("w{i}"))
                    .expect("writer SET");
                std::thread::sleep(write_every);
            }
        })
    };
    let per_thread = (ops / threads).max(1);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (client, barrier) = (client.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut lat = Vec::with_capacity(per_thread);
                let mut x = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                barrier.wait();
                for _ in 0..per_thread {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = key(x as usize % nkeys);
                    let start = Instant::now();
                    client.get(&k).expect("GET").expect("hot keys exist");
                    lat.push(start.elapsed().as_nanos() as u64);
                }
                lat
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    let mut lat: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    writer_thread.join().unwrap();
    lat.sort_unstable();
    let n = lat.len();
    let hit_ratio = client
        .local_cache_stats()
        .map_or(0.0, |s| s.hits as f64 / (s.hits + s.misses).max(1) as f64);
    Run {
        qps: n as f64 / elapsed.as_secs_f64(),
        avg_us: lat.iter().sum::<u64>() as f64 / n as f64 / 1000.0,
        p99_us: lat[(n * 99 / 100).min(n - 1)] as f64 / 1000.0,
        hit_ratio,
    }
}
