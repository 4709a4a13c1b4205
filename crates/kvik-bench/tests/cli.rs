//! kvik-bench end to end: the real binary against real redis-server and kvik-server processes
//! (kvik-testkit), with tiny counts. Nothing here asserts a timing: the checks are on what the
//! servers received (INFO commandstats, keys) and on the shape of the output.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kvik_testkit::{Endpoint, KvikServer, RedisServer};
use serde_json::Value;

const RUN_LIMIT: Duration = Duration::from_secs(90);

/// Runs kvik-bench with `args`; returns (exit success, stdout, stderr). Fails the test if it
/// runs past RUN_LIMIT.
fn bench(args: &[&str]) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvik-bench"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kvik-bench");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            panic!("kvik-bench {args:?} ran past {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status.success(), o.join().unwrap(), e.join().unwrap())
}

fn bench_ok(args: &[&str]) -> String {
    let (ok, out, err) = bench(args);
    assert!(ok, "kvik-bench {args:?} failed: {err}\n{out}");
    out
}

fn bench_json(args: &[&str]) -> Value {
    let mut v = args.to_vec();
    v.push("--json");
    let out = bench_ok(&v);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// `calls` of `cmd` from INFO commandstats (0 if never called).
fn calls(port: u16, cmd: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut kvik_testkit::connect(port))
        .unwrap();
    let prefix = format!("cmdstat_{cmd}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .unwrap_or(0)
}

fn info_field(port: u16, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query(&mut kvik_testkit::connect(port))
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

fn dbsize(port: u16) -> u64 {
    redis::cmd("DBSIZE")
        .query(&mut kvik_testkit::connect(port))
        .unwrap()
}

fn keys(port: u16) -> Vec<String> {
    redis::cmd("KEYS")
        .arg("*")
        .query(&mut kvik_testkit::connect(port))
        .unwrap()
}

#[test]
fn redis_benchmark_flags_and_quiet_output() {
    let r = RedisServer::start(&[]);
    let port = r.port.to_string();
    let out = bench_ok(&[
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "-c",
        "5",
        "-n",
        "300",
        "-r",
        "50",
        "-d",
        "8",
        "-t",
        "set,get",
        "-q",
        "--threads",
        "2",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("SET: ") && lines[0].contains(" requests per second, p50="));
    assert!(
        lines[1].starts_with("GET: ") && lines[1].ends_with(" msec"),
        "{out}"
    );
    assert_eq!(calls(r.port, "set"), 300);
    assert_eq!(calls(r.port, "get"), 300);
    // -d 8: every value is 8 bytes; -r 50: keys are key:<12 digits> below 50.
    let ks = keys(r.port);
    assert!(!ks.is_empty() && ks.len() <= 50);
    let mut con = kvik_testkit::connect(r.port);
    for k in &ks {
        let n: u64 = k.strip_prefix("key:").unwrap().parse().unwrap();
        assert!(n < 50 && k.len() == 4 + 12, "{k}");
        let v: String = redis::cmd("GET").arg(k).query(&mut con).unwrap();
        assert_eq!(v, "xxxxxxxx");
    }
}

#[test]
fn full_summary_has_percentiles_and_throughput() {
    let r = RedisServer::start(&[]);
    let out = bench_ok(&[
        "-p",
        &r.port.to_string(),
        "-c",
        "3",
        "-n",
        "100",
        "-t",
        "ping",
    ]);
    for want in [
        "====== PING_INLINE ======",
        "====== PING_MBULK ======",
        "100 requests completed in",
        "3 parallel clients",
        "throughput summary:",
        "p99.9",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn csv_has_redis_benchmark_columns() {
    let r = RedisServer::start(&[]);
    let out = bench_ok(&[
        "-p",
        &r.port.to_string(),
        "-c",
        "2",
        "-n",
        "100",
        "-t",
        "set,get,incr",
        "--csv",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
         \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\""
    );
    assert_eq!(lines.len(), 4, "{out}");
    for (line, name) in lines[1..].iter().zip(["SET", "GET", "INCR"]) {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), 8, "{line}");
        assert_eq!(fields[0], format!("\"{name}\""));
        for f in &fields[1..] {
            let v: f64 = f.trim_matches('"').parse().unwrap();
            assert!(v >= 0.0);
        }
    }
}

#[test]
fn json_document_shape() {
    let r = RedisServer::start(&[]);
    let doc = bench_json(&[
        "-p",
        &r.port.to_string(),
        "-c",
        "4",
        "-n",
        "200",
        "-t",
        "set",
    ]);
    assert_eq!(doc["tool"], "kvik-bench");
    assert_eq!(doc["config"]["clients"], 4);
    let t = &doc["tests"][0];
    assert_eq!(t["name"], "SET");
    assert_eq!(t["requests"], 200);
    assert_eq!(t["errors"], 0);
    assert!(t["rps"].as_f64().unwrap() > 0.0);
    let l = &t["latency_ms"];
    let get = |k: &str| l[k].as_f64().unwrap_or_else(|| panic!("no {k}: {t}"));
    assert!(get("min") <= get("p50"));
    assert!(get("p50") <= get("p95") && get("p95") <= get("p99"));
    assert!(get("p99") <= get("p99_9") && get("p99_9") <= get("max"));
    assert!(get("avg") > 0.0);
}

#[test]
fn pipelining_sends_p_requests_per_write() {
    let r = RedisServer::start(&[]);
    let port = r.port.to_string();
    let reads_before = info_field(r.port, "stats", "total_reads_processed");
    bench_ok(&[
        "-p", &port, "-c", "2", "-n", "2000", "-P", "20", "-t", "set", "-q",
    ]);
    let reads = info_field(r.port, "stats", "total_reads_processed") - reads_before;
    assert_eq!(calls(r.port, "set"), 2000);
    // 2000 requests in batches of 20: about 100 reads; without pipelining it would be 2000.
    assert!(reads < 1000, "{reads} reads for 2000 pipelined requests");
}

#[test]
fn rand_int_is_substituted_in_arbitrary_commands() {
    let r = RedisServer::start(&[]);
    let port = r.port.to_string();
    let out = bench_ok(&[
        "-p",
        &port,
        "-c",
        "3",
        "-n",
        "500",
        "-r",
        "100",
        "-q",
        "SET",
        "k:__rand_int__",
        "v__rand_int__",
    ]);
    assert!(
        out.starts_with("SET k:__rand_int__ v__rand_int__: "),
        "{out}"
    );
    let ks = keys(r.port);
    assert!(ks.len() > 10 && ks.len() <= 100, "{}", ks.len());
    for k in &ks {
        let digits = k.strip_prefix("k:").unwrap();
        assert_eq!(digits.len(), 12, "{k}");
        assert!(digits.parse::<u64>().unwrap() < 100);
    }
    // Without -r the placeholder stays, as in redis-benchmark.
    let r2 = RedisServer::start(&[]);
    bench_ok(&[
        "-p",
        &r2.port.to_string(),
        "-n",
        "20",
        "-q",
        "SET",
        "k:__rand_int__",
        "v",
    ]);
    assert_eq!(keys(r2.port), vec!["k:__rand_int__".to_string()]);
}

#[test]
fn zipf_read_write_mix_sends_both_commands() {
    let r = RedisServer::start(&[]);
    let doc = bench_json(&[
        "-p",
        &r.port.to_string(),
        "-c",
        "4",
        "-n",
        "2000",
        "-r",
        "1000",
        "--dist",
        "zipf",
        "--zipf-s",
        "1.1",
        "--ratio",
        "3:1",
    ]);
    let (gets, sets) = (calls(r.port, "get"), calls(r.port, "set"));
    assert_eq!(gets + sets, 2000);
    assert!(sets > 100 && gets > sets, "get {gets}, set {sets}");
    let t = &doc["tests"][0];
    assert_eq!(t["name"], "GET/SET 3:1");
    assert_eq!(t["ops"][0]["name"], "GET");
    assert_eq!(t["ops"][0]["requests"], gets);
    assert_eq!(t["ops"][1]["requests"], sets);
    // Zipf: the hottest key was written far more often than a uniform draw would allow, so
    // far fewer distinct keys exist than writes.
    assert!(
        dbsize(r.port) < sets / 2,
        "{} keys for {sets} writes",
        dbsize(r.port)
    );
}

#[test]
fn duration_stops_the_run() {
    let r = RedisServer::start(&[]);
    let doc = bench_json(&[
        "-p",
        &r.port.to_string(),
        "-c",
        "2",
        "--duration",
        "300ms",
        "-t",
        "get",
    ]);
    let t = &doc["tests"][0];
    assert!(t["requests"].as_u64().unwrap() > 0);
    assert_eq!(doc["config"]["requests"], Value::Null);
    assert_eq!(calls(r.port, "get"), t["requests"].as_u64().unwrap());
}

#[test]
fn rate_limited_run_sends_at_most_the_target_rate() {
    let r = RedisServer::start(&[]);
    let doc = bench_json(&[
        "-p",
        &r.port.to_string(),
        "-c",
        "4",
        "--rate",
        "200",
        "--duration",
        "1s",
        "-t",
        "get",
    ]);
    let sent = calls(r.port, "get");
    assert_eq!(doc["tests"][0]["requests"].as_u64().unwrap(), sent);
    // 200/s for 1 s is 200 requests (the schedule cannot run ahead); unlimited would be many
    // thousands.
    assert!(
        sent > 0 && sent <= 204,
        "{sent} requests at --rate 200 for 1 s"
    );
    // And a count bounds a rate-limited run too.
    let r2 = RedisServer::start(&[]);
    bench_ok(&[
        "-p",
        &r2.port.to_string(),
        "-c",
        "2",
        "--rate",
        "5000",
        "-n",
        "50",
        "-t",
        "set",
    ]);
    assert_eq!(calls(r2.port, "set"), 50);
}

#[test]
fn several_servers_share_the_keys() {
    let a = RedisServer::start(&[]);
    let b = RedisServer::start(&[]);
    let servers = format!("{},{}", a.addr(), b.addr());
    bench_ok(&[
        "--servers",
        &servers,
        "-c",
        "4",
        "-n",
        "400",
        "-r",
        "100000",
        "-t",
        "set",
        "-q",
    ]);
    let (ca, cb) = (calls(a.port, "set"), calls(b.port, "set"));
    assert_eq!(ca + cb, 400);
    assert!(ca > 0 && cb > 0, "{ca} / {cb}");
    assert!(dbsize(a.port) > 0 && dbsize(b.port) > 0);
    // -h with a list and one -p means the same.
    let c = RedisServer::start(&[]);
    let (ok, _, err) = bench(&[
        "-h",
        "127.0.0.1,localhost",
        "-p",
        &c.port.to_string(),
        "-n",
        "10",
    ]);
    assert!(ok, "{err}");
}

#[test]
fn error_replies_are_counted_not_fatal() {
    let k = KvikServer::start(kvik_testkit::kvik_server_bin(), &[]);
    let port = k.port.to_string();
    // `mylist` holds a string: every LPUSH gets a WRONGTYPE error.
    let mut con = kvik_testkit::connect(k.port);
    let _: () = redis::cmd("SET")
        .arg("mylist")
        .arg("x")
        .query(&mut con)
        .unwrap();
    let (ok, out, err) = bench(&[
        "-p",
        &port,
        "-c",
        "2",
        "-n",
        "50",
        "-t",
        "lpush,set",
        "--csv",
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("50 of 50 replies were errors"), "{err}");
    assert!(err.contains("WRONGTYPE"), "{err}");
    assert_eq!(out.lines().count(), 3, "both tests reported: {out}");
    let doc = bench_json(&["-p", &port, "-c", "2", "-n", "40", "-t", "lpush,get"]);
    let t = &doc["tests"];
    assert_eq!(t[0]["name"], "GET");
    assert_eq!(t[0]["errors"], 0);
    assert_eq!(t[1]["name"], "LPUSH");
    assert_eq!(t[1]["requests"], 40);
    assert_eq!(t[1]["errors"], 40);
    assert!(t[1]["error_samples"][0]
        .as_str()
        .unwrap()
        .starts_with("WRONGTYPE"));
}

#[test]
fn bad_flags_and_unreachable_servers_fail_cleanly() {
    let (ok, _, err) = bench(&["--dist", "nope"]);
    assert!(!ok && err.contains("unknown --dist"), "{err}");
    let port = kvik_testkit::free_port().to_string();
    let (ok, _, err) = bench(&["-p", &port, "-n", "10"]);
    assert!(!ok && err.contains("Could not connect"), "{err}");
}

#[test]
fn cluster_mode_routes_by_slot() {
    let nodes = kvik_testkit::start_redis_cluster();
    let doc = bench_json(&[
        "--cluster",
        "-p",
        &nodes[1].port.to_string(),
        "-c",
        "6",
        "-n",
        "1500",
        "-r",
        "100000",
        "-t",
        "set,get,mget",
        "--keys",
        "3",
    ]);
    for t in doc["tests"].as_array().unwrap() {
        assert_eq!(t["errors"], 0, "{t}");
        assert_eq!(t["requests"], 1500);
        assert_eq!(t["redirects"], 0, "the slot map routes every key: {t}");
    }
    let sets: u64 = nodes.iter().map(|n| calls(n.port, "set")).sum();
    assert_eq!(sets, 1500);
    for n in &nodes {
        assert!(dbsize(n.port) > 0, "every node got keys");
        assert!(calls(n.port, "mget") > 0);
    }
}

/// A fake cluster node: CLUSTER SLOTS says it owns every slot, and every other command is
/// answered with `MOVED 0 <target>`. Serves until the test ends.
fn fake_moved_node(target: u16) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 16384];
                let limits = kvik_resp::Limits::default();
                loop {
                    let n = match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    let mut out = Vec::new();
                    while let Ok(Some((f, used))) = kvik_resp::parse_frame(&buf, &limits) {
                        buf.drain(..used);
                        let is_cluster = matches!(&f, kvik_resp::Frame::Array(a)
                            if matches!(a.first(), Some(kvik_resp::Frame::Bulk(c))
                                if c.eq_ignore_ascii_case(b"CLUSTER")));
                        if is_cluster {
                            let node = format!("*2\r\n$9\r\n127.0.0.1\r\n:{port}\r\n");
                            out.extend_from_slice(b"*1\r\n*3\r\n:0\r\n:16383\r\n");
                            out.extend_from_slice(node.as_bytes());
                        } else {
                            out.extend_from_slice(
                                format!("-MOVED 0 127.0.0.1:{target}\r\n").as_bytes(),
                            );
                        }
                    }
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn cluster_mode_follows_moved() {
    let real = RedisServer::start(&["--cluster-enabled", "yes"]);
    kvik_testkit::redis_cli(real.port, &["cluster", "addslotsrange", "0", "16383"]);
    let start = Instant::now();
    while !kvik_testkit::redis_cli(real.port, &["cluster", "info"]).contains("cluster_state:ok") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "cluster never ok"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let fake = fake_moved_node(real.port);
    let doc = bench_json(&[
        "--cluster",
        "-p",
        &fake.to_string(),
        "-c",
        "2",
        "-n",
        "200",
        "-r",
        "1000",
        "-t",
        "set",
    ]);
    let t = &doc["tests"][0];
    assert_eq!(t["errors"], 0, "{t}");
    assert_eq!(t["requests"], 200);
    assert!(t["redirects"].as_u64().unwrap() > 0, "{t}");
    assert_eq!(
        calls(real.port, "set"),
        200,
        "every SET reached the node MOVED named"
    );
}

#[test]
fn auth_and_dbnum_are_sent_first() {
    let r = RedisServer::start(&["--requirepass", "pw"]);
    let port = r.port.to_string();
    bench_ok(&[
        "-p", &port, "-a", "pw", "--dbnum", "3", "-c", "2", "-n", "50", "-r", "10", "-t", "set",
    ]);
    let mut con = kvik_testkit::connect(r.port);
    let _: () = redis::cmd("AUTH").arg("pw").query(&mut con).unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut con).unwrap();
    let n: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert!(n > 0, "keys went to db 3");
    let (ok, _, err) = bench(&["-p", &port, "-a", "wrong", "-n", "10"]);
    assert!(!ok && err.contains("AUTH failed"), "{err}");
}
