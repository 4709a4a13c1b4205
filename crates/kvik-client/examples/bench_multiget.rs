//! Benchmark (b): get_multi of many keys over several servers, each behind a loopback proxy
//! that delays every request by a few milliseconds (a stand-in for network distance).
//!
//! Modes, alternated A B A B ...:
//! - `concurrent`: `ShardedClient::get_multi` (write to every server, drain all in one loop);
//! - `sequential`: the same keys grouped by server, one blocking MGET per server, one server
//!   after another (the classic client's shape).
//!
//! Usage: bench_multiget --servers a:1,b:2,c:3,d:4 [--keys 1000] [--delay-ms 2] [--calls 100]
//!        [--rounds 3]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use kvik_client::{Commands, ConnectOptions, ShardOptions, ShardedClient};

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

/// Starts a proxy to `backend` that holds every chunk read from the client for `delay` before
/// forwarding it; replies flow back undelayed. Returns its address.
fn delaying_proxy(backend: String, delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(&backend) else {
                continue;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 256 * 1024];
                loop {
                    match c_in.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            std::thread::sleep(delay);
                            if s_out.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = s_out.shutdown(Shutdown::Write);
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 256 * 1024];
                loop {
                    match s_in.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if c_out.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = c_out.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let backends: Vec<String> = arg(&args, "--servers", "127.0.0.1:6379")
        .split(',')
        .map(str::to_string)
        .collect();
    let nkeys: usize = arg(&args, "--keys", "1000").parse().unwrap();
    let delay = Duration::from_millis(arg(&args, "--delay-ms", "2").parse().unwrap());
    let calls: usize = arg(&args, "--calls", "100").parse().unwrap();
    let rounds: usize = arg(&args, "--rounds", "3").parse().unwrap();

    let proxies: Vec<String> = backends
        .iter()
        .map(|b| delaying_proxy(b.clone(), delay))
        .collect();
    let weighted: Vec<(&str, u32)> = proxies.iter().map(|p| (p.as_str(), 1)).collect();
    let opts = ShardOptions {
        conn: ConnectOptions::new().timeout(Duration::from_secs(30)),
        multiget_timeout: Duration::from_secs(30),
        multiget_chunk: 1000,
        ..ShardOptions::default()
    };
    let c = ShardedClient::new(&weighted, opts).unwrap();
    let keys: Vec<String> = (0..nkeys).map(|i| format!("mg:{i:06}")).collect();
    for (i, k) in keys.iter().enumerate() {
        if i % 2 == 0 {
            c.set(k, format!("value-{i}")).unwrap();
        }
    }
    // Group once for the sequential mode.
    let mut by_server: Vec<Vec<&str>> = vec![Vec::new(); c.len()];
    for k in &keys {
        by_server[c.server_for(k.as_bytes())].push(k);
    }
    println!(
        "bench_multiget: {} servers behind {:?} proxies, {nkeys} keys/call ({:?} per server), {calls} calls/run, {rounds} rounds",
        c.len(),
        delay,
        by_server.iter().map(Vec::len).collect::<Vec<_>>()
    );
    // Warm both paths (connections, pools).
    let _ = c.get_multi(&keys);
    for (s, ks) in by_server.iter().enumerate() {
        c.server(s).mget(ks).unwrap();
    }

    let mut conc = Vec::new();
    let mut seq = Vec::new();
    println!(
        "{:>11} {:>5} {:>10} {:>10} {:>10}",
        "mode", "round", "calls/s", "avg_ms", "p99_ms"
    );
    for round in 0..rounds {
        for mode in ["concurrent", "sequential"] {
            let mut lat = Vec::with_capacity(calls);
            let start = Instant::now();
            for _ in 0..calls {
                let t = Instant::now();
                let hits = if mode == "concurrent" {
                    let r = c.get_multi(&keys);
                    assert!(r.is_complete(), "{:?}", r.servers);
                    r.hits()
                } else {
                    let mut hits = 0;
                    for (s, ks) in by_server.iter().enumerate() {
                        hits += c.server(s).mget(ks).unwrap().iter().flatten().count();
                    }
                    hits
                };
                assert_eq!(hits, nkeys.div_ceil(2));
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            let secs = start.elapsed().as_secs_f64();
            lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let avg = lat.iter().sum::<f64>() / lat.len() as f64;
            let p99 = lat[(lat.len() * 99 / 100).min(lat.len() - 1)];
            let rate = calls as f64 / secs;
            println!("{mode:>11} {round:>5} {rate:>10.1} {avg:>10.2} {p99:>10.2}");
            if mode == "concurrent" {
                conc.push((rate, avg, p99));
            } else {
                seq.push((rate, avg, p99));
            }
        }
    }
    let med = |v: &[(f64, f64, f64)], f: fn(&(f64, f64, f64)) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(|a, b| a.partial_cmp(b).unwrap());
        x[x.len() / 2]
    };
    let (cr, ca, cp) = (
        med(&conc, |x| x.0),
        med(&conc, |x| x.1),
        med(&conc, |x| x.2),
    );
    let (sr, sa, sp) = (med(&seq, |x| x.0), med(&seq, |x| x.1), med(&seq, |x| x.2));
    println!();
    println!("medians of {rounds} alternating rounds:");
    println!("  concurrent: {cr:.1} calls/s, avg {ca:.2} ms, p99 {cp:.2} ms");
    println!("  sequential: {sr:.1} calls/s, avg {sa:.2} ms, p99 {sp:.2} ms");
    println!(
        "  concurrent/sequential: calls/s x{:.2}, avg latency x{:.2}, p99 x{:.2}",
        cr / sr,
        ca / sa,
        cp / sp
    );
}
