//! Benchmark (a): N threads doing blocking GETs over ONE shared connection.
//!
//! Modes, run in alternation (A B C, A B C, ...) so drift hits all alike:
//! - `on`:    kvik-client, auto-batch flush on;
//! - `off`:   kvik-client, batching off (each caller writes its own command);
//! - `redis`: the `redis` crate's multiplexed connection (tokio), driven from the same OS
//!   threads with `Handle::block_on` — the peer.
//!
//! Prints per run QPS, average and p99 latency, then per thread count the medians and the
//! ratios on/off and on/redis.
//!
//! Usage: bench_batch --addr 127.0.0.1:6379 [--threads 8,64,512] [--ops 60000] [--rounds 3]
//!        [--modes on,off,redis] [--keys 10000]
//! (`--ops` is the total GETs per run, split across the threads.)

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use kvik_client::{cmd, Client, Commands, ConnectOptions};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    On,
    Off,
    Redis,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::On => "on",
            Mode::Off => "off",
            Mode::Redis => "redis",
        }
    }
}

struct Run {
    qps: f64,
    avg_us: f64,
    p99_us: f64,
    batch: f64,
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn key(i: usize) -> String {
    format!("key-{i:09}")
}

fn value(i: usize) -> String {
    format!("value-{i:09}")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = arg(&args, "--addr", "127.0.0.1:6379");
    let threads: Vec<usize> = arg(&args, "--threads", "8,64,512")
        .split(',')
        .map(|s| s.parse().expect("--threads"))
        .collect();
    let ops: usize = arg(&args, "--ops", "60000").parse().expect("--ops");
    let rounds: usize = arg(&args, "--rounds", "3").parse().expect("--rounds");
    let nkeys: usize = arg(&args, "--keys", "10000").parse().expect("--keys");
    let modes: Vec<Mode> = arg(&args, "--modes", "on,off,redis")
        .split(',')
        .map(|m| match m {
            "on" => Mode::On,
            "off" => Mode::Off,
            "redis" => Mode::Redis,
            other => panic!("unknown mode {other}"),
        })
        .collect();

    let setup = Client::connect(&addr, ConnectOptions::new()).expect("connect");
    for chunk in (0..nkeys).collect::<Vec<_>>().chunks(500) {
        let pairs: Vec<(String, String)> = chunk.iter().map(|&i| (key(i), value(i))).collect();
        setup.mset(&pairs).expect("MSET");
    }
    setup.query(&cmd("PING")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    println!(
        "bench_batch: addr={addr} ops/run={ops} rounds={rounds} keys={nkeys} modes={:?}",
        modes.iter().map(|m| m.name()).collect::<Vec<_>>()
    );
    println!(
        "{:>7} {:>6} {:>5} {:>12} {:>10} {:>10} {:>7}",
        "threads", "mode", "round", "QPS", "avg_us", "p99_us", "batch"
    );
    let mut summary = Vec::new();
    for &t in &threads {
        let mut results: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
        for round in 0..rounds {
            for (mi, &m) in modes.iter().enumerate() {
                let r = run_once(&addr, m, t, ops, nkeys, &rt);
                println!(
                    "{t:>7} {:>6} {round:>5} {:>12.0} {:>10.1} {:>10.1} {:>7.1}",
                    m.name(),
                    r.qps,
                    r.avg_us,
                    r.p99_us,
                    r.batch
                );
                results[mi].push(r);
            }
        }
        let med = |v: &[Run], f: fn(&Run) -> f64| {
            let mut x: Vec<f64> = v.iter().map(f).collect();
            x.sort_by(|a, b| a.partial_cmp(b).unwrap());
            x[x.len() / 2]
        };
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
        summary.push((t, meds));
    }
    println!();
    println!("medians of {rounds} alternating rounds:");
    for (t, meds) in &summary {
        for (mi, m) in modes.iter().enumerate() {
            let (q, a, p) = meds[mi];
            println!(
                "  threads={t:<4} {:<6} QPS={q:>9.0} avg={a:>8.1}us p99={p:>8.1}us",
                m.name()
            );
        }
        let find = |mode: Mode| modes.iter().position(|&m| m == mode).map(|i| meds[i]);
        if let (Some(on), Some(off)) = (find(Mode::On), find(Mode::Off)) {
            println!(
                "  threads={t:<4} on/off:   QPS x{:.2}  avg x{:.2}  p99 x{:.2}",
                on.0 / off.0,
                on.1 / off.1,
                on.2 / off.2
            );
        }
        if let (Some(on), Some(rd)) = (find(Mode::On), find(Mode::Redis)) {
            println!(
                "  threads={t:<4} on/redis: QPS x{:.2}  avg x{:.2}  p99 x{:.2}",
                on.0 / rd.0,
                on.1 / rd.1,
                on.2 / rd.2
            );
        }
    }
}

fn run_once(
    addr: &str,
    mode: Mode,
    threads: usize,
    ops: usize,
    nkeys: usize,
    rt: &tokio::runtime::Runtime,
) -> Run {
    let per_thread = (ops / threads).max(1);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let kvik = match mode {
        Mode::On | Mode::Off => Some(Arc::new(
            Client::connect(
                addr,
                ConnectOptions::new()
                    .batching(mode == Mode::On)
                    .timeout(Duration::from_secs(60)),
            )
            .expect("connect"),
        )),
        Mode::Redis => None,
    };
    let redis_con = match mode {
        Mode::Redis => {
            let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
            Some(
                rt.block_on(client.get_multiplexed_async_connection())
                    .expect("redis multiplexed"),
            )
        }
        _ => None,
    };
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let barrier = barrier.clone();
            let kvik = kvik.clone();
            let redis_con = redis_con.clone();
            let rt = rt.handle().clone();
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    let mut lat = Vec::with_capacity(per_thread);
                    barrier.wait();
                    for j in 0..per_thread {
                        let i = (t * 7919 + j) % nkeys;
                        let k = key(i);
                        let start = Instant::now();
                        let v: Option<Vec<u8>> = match (&kvik, &redis_con) {
                            (Some(c), _) => c.get(&k).expect("GET"),
                            (None, Some(con)) => {
                                let mut con = con.clone();
                                rt.block_on(async move {
                                    redis::cmd("GET")
                                        .arg(&k)
                                        .query_async::<Option<Vec<u8>>>(&mut con)
                                        .await
                                })
                                .expect("redis GET")
                            }
                            _ => unreachable!(),
                        };
                        lat.push(start.elapsed().as_nanos() as u64);
                        assert_eq!(v.as_deref(), Some(value(i).as_bytes()), "wrong value");
                    }
                    lat
                })
                .expect("spawn")
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let mut all: Vec<u64> = Vec::with_capacity(per_thread * threads);
    for h in handles {
        all.extend(h.join().unwrap());
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let n = all.len();
    let avg = all.iter().sum::<u64>() as f64 / n as f64 / 1000.0;
    let p99 = all[(n * 99 / 100).min(n - 1)] as f64 / 1000.0;
    let batch = kvik
        .as_ref()
        .and_then(|c| c.connection().ok())
        .map(|c| {
            let s = c.stats();
            s.commands as f64 / s.writes.max(1) as f64
        })
        .unwrap_or(f64::NAN);
    Run {
        qps: n as f64 / secs,
        avg_us: avg,
        p99_us: p99,
        batch,
    }
}
