//! The hot cache and run-to-completion reads: same replies and counters with RTC on and off,
//! no stale value after any kind of write, expiry, the memory bound, and a concurrent
//! monotonicity check of INCR counters read through both paths.

use crate::common::*;
use redis::{Connection, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn get(con: &mut Connection, key: &str) -> Option<String> {
    q(con, &["GET", key])
}

/// Reads `key` twice so the second read is answered by the cache, and checks it was.
fn warm(con: &mut Connection, key: &str) {
    let _ = get(con, key);
    let before = stat(con, "cache_hits");
    let _ = get(con, key);
    assert_eq!(
        stat(con, "cache_hits"),
        before + 1,
        "{key} should be cached"
    );
}

/// The scenario run with RTC on and off: every reply, in order, plus raw pipelined replies.
fn scenario(s: &TestServer) -> (Vec<Value>, Vec<u8>) {
    let mut c = s.client();
    let mut replies = Vec::new();
    let script: &[&[&str]] = &[
        &["SET", "a", "hello"],
        &["SET", "b", "12345"],
        &["SET", "t", "v", "EX", "1000"],
        &["GET", "a"],
        &["GET", "a"],
        &["GET", "missing"],
        &["MGET", "a", "b", "missing"],
        &["MGET", "a", "b"],
        &["STRLEN", "a"],
        &["STRLEN", "missing"],
        &["EXISTS", "a", "b", "missing", "a"],
        &["GETRANGE", "a", "1", "-2"],
        &["SUBSTR", "a", "0", "0"],
        &["TTL", "t"],
        &["TTL", "a"],
        &["TYPE", "a"],
        &["TYPE", "missing"],
        &["GETRANGE", "a", "x", "1"],
        &["GET"],
        &["APPEND", "a", "!"],
        &["GET", "a"],
        &["DEL", "b"],
        &["GET", "b"],
        &["SELECT", "1"],
        &["GET", "a"],
        &["SELECT", "0"],
        &["GET", "a"],
    ];
    for cmd in script {
        let mut c2 = redis::cmd(cmd[0]);
        for a in &cmd[1..] {
            c2.arg(*a);
        }
        replies.push(match c2.query::<Value>(&mut c) {
            Ok(v) => v,
            Err(e) => Value::SimpleString(format!("error: {e}")),
        });
    }
    // A pipeline: hits, a miss in the middle, hits, a write, hits again.
    let mut raw = s.raw();
    let mut req = Vec::new();
    for cmd in [
        &["GET", "a"][..],
        &["STRLEN", "a"],
        &["GET", "nope"],
        &["GET", "a"],
        &["SET", "a", "x"],
        &["GET", "a"],
        &["EXISTS", "a"],
        &["TTL", "a"],
    ] {
        req.extend(resp_str(cmd));
    }
    let expect = b"$6\r\nhello!\r\n:6\r\n$-1\r\n$6\r\nhello!\r\n+OK\r\n$1\r\nx\r\n:1\r\n:-1\r\n";
    let (got, _) = roundtrip_raw(&mut raw, &req, expect.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expect)
    );
    (replies, got)
}

fn counters(s: &TestServer) -> HashMap<String, String> {
    let mut c = s.client();
    let mut out = HashMap::new();
    let all = info(&mut c, "all");
    for (k, v) in &all["Stats"] {
        // cache_hits / cache_misses count cache probes, which legitimately differ: an RTC
        // attempt stops at its first miss (EXISTS a missing b probes two keys, not three) and
        // the pool then skips the cache. What clients see (keyspace_*, commandstats, errors)
        // and what the cache holds must be the same.
        let probe = matches!(
            k.as_str(),
            "cache_hits" | "cache_misses" | "cache_hit_ratio"
        );
        if (k.starts_with("keyspace_") || k.starts_with("cache_") || k == "total_error_replies")
            && !probe
        {
            out.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in &all["Commandstats"] {
        if !k.contains("info") {
            out.insert(k.clone(), strip_usec(v));
        }
    }
    out
}

/// Commandstats without the timing fields (calls, rejected and failed counts only).
fn strip_usec(v: &str) -> String {
    v.split(',')
        .filter(|f| !f.starts_with("usec"))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn rtc_on_and_off_give_the_same_replies_and_counters() {
    // Run to completion on the I/O thread, for reads and writes alike, or nothing of it.
    let on = TestServer::start_with(&["--rtc-read", "yes", "--rtc-write", "yes"]);
    let off = TestServer::start_with(&["--rtc-read", "no", "--rtc-write", "no"]);
    let (replies_on, raw_on) = scenario(&on);
    let (replies_off, raw_off) = scenario(&off);
    assert_eq!(replies_on, replies_off);
    assert_eq!(raw_on, raw_off);
    assert_eq!(counters(&on), counters(&off));
    let mut c_on = on.client();
    let mut c_off = off.client();
    assert!(stat(&mut c_on, "rtc_commands") >= 10);
    assert_eq!(stat(&mut c_off, "rtc_commands"), 0);
    assert!(
        stat(&mut c_off, "cache_hits") >= 10,
        "the pool path uses the cache too"
    );
    // RTC can be switched at run time.
    assert_eq!(
        q::<String>(&mut c_on, &["CONFIG", "SET", "rtc-read", "no"]),
        "OK"
    );
    let before = stat(&mut c_on, "rtc_commands");
    assert_eq!(get(&mut c_on, "a").as_deref(), Some("x"));
    assert_eq!(stat(&mut c_on, "rtc_commands"), before);
    q::<String>(&mut c_on, &["CONFIG", "SET", "rtc-read", "yes"]);
    assert_eq!(get(&mut c_on, "a").as_deref(), Some("x"));
    assert_eq!(stat(&mut c_on, "rtc_commands"), before + 1);
}

#[test]
fn rtc_makes_the_auth_and_slowlog_checks() {
    let s = TestServer::start_with(&["--requirepass", "pw"]);
    let mut raw = s.raw();
    let noauth = b"-NOAUTH Authentication required.\r\n";
    let (got, _) = roundtrip_raw(&mut raw, &resp_str(&["GET", "k"]), noauth.len());
    assert_eq!(got, noauth.to_vec());
    let mut c = s.client();
    let _: String = q(&mut c, &["AUTH", "pw"]);
    let _: String = q(&mut c, &["SET", "k", "v"]);
    let _: String = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let _: String = q(&mut c, &["SLOWLOG", "RESET"]);
    warm(&mut c, "k");
    let log: Vec<Value> = q(&mut c, &["SLOWLOG", "GET", "-1"]);
    let gets: Vec<&Vec<Value>> = log
        .iter()
        .filter_map(|e| match e {
            Value::Array(f) if f.len() == 7 => Some(f),
            _ => None,
        })
        .filter(|f| matches!(&f[3], Value::Array(a) if a.first() == Some(&Value::BulkString(b"GET".to_vec()))))
        .collect();
    assert!(
        gets.len() >= 2,
        "GETs served by RTC are in the slowlog too: {log:?}"
    );
    for f in gets {
        assert!(matches!(f[6], Value::Int(w) if w >= 0));
    }
    assert!(stat(&mut c, "rtc_commands") >= 1);
    // INFO reports the queue wait of pool runs.
    assert!(stat(&mut c, "pool_queue_wait_count") > 0);
    assert!(info_field(&mut c, "stats", "pool_queue_wait_p99_usec").is_some());
}

#[test]
fn writes_never_leave_a_stale_value() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: String = q(&mut c, &["SET", "k", "1"]);

    // SET, APPEND, INCR, SETRANGE, MSET, GETSET update the cached entry.
    let updates: &[(&[&str], &str)] = &[
        (&["SET", "k", "2"], "2"),
        (&["APPEND", "k", "0"], "20"),
        (&["INCR", "k"], "21"),
        (&["INCRBYFLOAT", "k", "0.5"], "21.5"),
        (&["SETRANGE", "k", "0", "9"], "91.5"),
        (&["MSET", "k", "m", "other", "o"], "m"),
        (&["GETSET", "k", "g"], "g"),
        (&["SET", "k", "e", "KEEPTTL"], "e"),
    ];
    for (cmd, want) in updates {
        warm(&mut c, "k");
        let _: Value = qv(&mut c, cmd);
        assert_eq!(get(&mut c, "k").as_deref(), Some(*want), "after {cmd:?}");
    }

    // Deletes, renames, moves and flushes drop it.
    let gone: &[&[&str]] = &[
        &["DEL", "k"],
        &["UNLINK", "k"],
        &["GETDEL", "k"],
        &["RENAME", "k", "k2"],
        &["MOVE", "k", "3"],
        &["FLUSHDB"],
        &["FLUSHALL"],
        &["EXPIRE", "k", "0"],
        &["SET", "k", "v", "PX", "1"],
    ];
    for cmd in gone {
        let _: String = q(&mut c, &["SET", "k", "before"]);
        warm(&mut c, "k");
        let _: Value = qv(&mut c, cmd);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(get(&mut c, "k"), None, "after {cmd:?}");
        assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0, "after {cmd:?}");
    }
    // RENAME onto a cached destination updates it.
    let _: String = q(&mut c, &["SET", "src", "new"]);
    let _: String = q(&mut c, &["SET", "dst", "old"]);
    warm(&mut c, "dst");
    let _: String = q(&mut c, &["RENAME", "src", "dst"]);
    assert_eq!(get(&mut c, "dst").as_deref(), Some("new"));
    // COPY REPLACE onto a cached destination.
    let _: String = q(&mut c, &["SET", "src", "copied"]);
    warm(&mut c, "dst");
    let _: i64 = q(&mut c, &["COPY", "src", "dst", "REPLACE"]);
    assert_eq!(get(&mut c, "dst").as_deref(), Some("copied"));

    // Expiry changes are seen by TTL at once.
    let _: String = q(&mut c, &["SET", "t", "v"]);
    warm(&mut c, "t");
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), -1);
    let _: i64 = q(&mut c, &["EXPIRE", "t", "100"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), 100);
    let _: i64 = q(&mut c, &["PERSIST", "t"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), -1);
    let _: Value = qv(&mut c, &["GETEX", "t", "EX", "50"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), 50);

    // CONFIG SET cache-enabled no empties the cache; yes starts cold; writes in between are
    // seen.
    let _: String = q(&mut c, &["SET", "c", "1"]);
    warm(&mut c, "c");
    let _: String = q(&mut c, &["CONFIG", "SET", "cache-enabled", "no"]);
    assert_eq!(stat(&mut c, "cache_entries"), 0);
    assert_eq!(stat(&mut c, "cache_enabled"), 0);
    let _: String = q(&mut c, &["SET", "c", "2"]);
    assert_eq!(get(&mut c, "c").as_deref(), Some("2"));
    let hits = stat(&mut c, "cache_hits");
    let _ = get(&mut c, "c");
    assert_eq!(
        stat(&mut c, "cache_hits"),
        hits,
        "a disabled cache answers nothing"
    );
    let _: String = q(&mut c, &["CONFIG", "SET", "cache-enabled", "yes"]);
    assert_eq!(stat(&mut c, "cache_entries"), 0);
    let _: String = q(&mut c, &["SET", "c", "3"]);
    warm(&mut c, "c");
    assert_eq!(get(&mut c, "c").as_deref(), Some("3"));
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "cache-enabled"]),
        vec!["cache-enabled", "yes"]
    );
}

#[test]
fn expired_entries_are_never_served() {
    let s = TestServer::start_with(&["--active-expire", "no"]);
    let mut c = s.client();
    let _: String = q(&mut c, &["SET", "e", "v", "PX", "300"]);
    warm(&mut c, "e");
    let t0 = Instant::now();
    // Until it expires it is served; after, never (no active expiry deletes it meanwhile).
    loop {
        let v = get(&mut c, "e");
        if t0.elapsed() > Duration::from_millis(320) {
            assert_eq!(v, None);
            break;
        }
        if v.is_none() {
            assert!(
                t0.elapsed() >= Duration::from_millis(250),
                "expired too early"
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(get(&mut c, "e"), None);
    assert_eq!(q::<i64>(&mut c, &["TTL", "e"]), -2);
    // PEXPIRE on a cached key shortens what the cache serves.
    let _: String = q(&mut c, &["SET", "f", "v"]);
    warm(&mut c, "f");
    let _: i64 = q(&mut c, &["PEXPIRE", "f", "50"]);
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(get(&mut c, "f"), None);
}

#[test]
fn cache_maxmemory_is_respected() {
    let s = TestServer::start_with(&["--cache-maxmemory", "64kb", "--cache-shards", "4"]);
    let mut c = s.client();
    let value = "x".repeat(100);
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg(&value).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.cmd("GET").arg(format!("key:{i}")).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let used = stat(&mut c, "cache_used_memory");
    assert!(used <= 64 * 1024, "used {used}");
    assert!(stat(&mut c, "cache_entries") > 50);
    assert!(stat(&mut c, "cache_evictions") > 0);
    let _: String = q(&mut c, &["CONFIG", "SET", "cache-maxmemory", "16kb"]);
    assert!(stat(&mut c, "cache_used_memory") <= 16 * 1024);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "cache-maxmemory"]),
        vec!["cache-maxmemory", "16384"]
    );
    // Long keys are not cached.
    let _: String = q(&mut c, &["CONFIG", "SET", "cache-max-key-size", "4"]);
    let _: String = q(&mut c, &["SET", "longkey", "v"]);
    let _ = get(&mut c, "longkey");
    let hits = stat(&mut c, "cache_hits");
    let _ = get(&mut c, "longkey");
    assert_eq!(stat(&mut c, "cache_hits"), hits);
    assert!(err(&mut c, &["CONFIG", "SET", "cache-policy", "fifo"]).starts_with("ERR"));
    let _: String = q(&mut c, &["CONFIG", "SET", "cache-policy", "lru"]);
    assert_eq!(
        info(&mut c, "stats")["Stats"]["cache_policy"],
        "lru".to_string()
    );
}

/// Writers INCR counters while readers GET them through RTC (plain GET) and through the pool
/// (GET pipelined behind a non-rtc command); the cache holds 4 of the 6 counters, so entries
/// keep being evicted and refilled and fills race the writes. No reader may ever see a counter
/// go backwards.
#[test]
fn concurrent_counters_never_go_backwards() {
    // Fills are delayed 300 us after their disk read, so writes often land inside that window:
    // a fill that ignored them would cache an old value (this test fails without the write
    // epoch check in Cache::fill_value). Admission off: every miss fills and evicts (with it,
    // most refills of the tiny cache would be refused instead of racing the writes).
    let s = TestServer::start_with(&[
        "--cache-maxmemory",
        "512",
        "--cache-shards",
        "1",
        "--cache-fill-delay-us",
        "300",
        "--cache-admission",
        "no",
    ]);
    const KEYS: usize = 6;
    let port = s.port;
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for w in 0..2 {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut c = kvik_testkit::connect(port);
            let mut i = w;
            while !stop.load(Ordering::Relaxed) {
                let _: i64 = q(&mut c, &["INCR", &format!("ctr:{}", i % KEYS)]);
                i += 1;
                // Slow writers: a stale entry would stay visible until the key's next write.
                std::thread::sleep(Duration::from_millis(1));
            }
            0u64
        }));
    }
    for r in 0..4 {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut c = kvik_testkit::connect(port);
            let mut last = [0i64; KEYS];
            let mut i = r;
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = i % KEYS;
                let key = format!("ctr:{k}");
                let v: Option<i64> = if r % 2 == 0 {
                    q(&mut c, &["GET", &key])
                } else {
                    // PING is not rtc, so the GET behind it runs in the pool.
                    let (_, v): (String, Option<i64>) = redis::pipe()
                        .cmd("PING")
                        .cmd("GET")
                        .arg(&key)
                        .query(&mut c)
                        .unwrap();
                    v
                };
                let v = v.unwrap_or(0);
                assert!(v >= last[k], "{key} went from {} back to {v}", last[k]);
                last[k] = v;
                i += 1;
                reads += 1;
            }
            reads
        }));
    }
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("no reader saw a counter go backwards");
    }
    let mut c = s.client();
    assert!(stat(&mut c, "rtc_commands") > 0);
    assert!(stat(&mut c, "cache_evictions") > 0);
    assert!(stat(&mut c, "cache_used_memory") <= 512);
    // Final values agree between the cache and storage.
    let _: String = q(&mut c, &["CONFIG", "SET", "cache-enabled", "no"]);
    let stored: Vec<Option<i64>> = (0..KEYS)
        .map(|k| q(&mut c, &["GET", &format!("ctr:{k}")]))
        .collect();
    let _: String = q(&mut c, &["CONFIG", "SET", "cache-enabled", "yes"]);
    for (k, want) in stored.iter().enumerate() {
        let key = format!("ctr:{k}");
        let _ = get(&mut c, &key);
        assert_eq!(q::<Option<i64>>(&mut c, &["GET", &key]), *want);
    }
}

#[test]
fn small_hashes_are_cached_whole_and_never_stale() {
    let s = TestServer::start_with(&["--cache-max-hash-fields", "4"]);
    let mut c = s.client();
    let hget = |c: &mut Connection, k: &str, f: &str| -> Option<String> { q(c, &["HGET", k, f]) };
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(hget(&mut c, "h", "a").as_deref(), Some("1")); // miss: fills the whole hash
    let (hits, rtc) = (stat(&mut c, "cache_hits"), stat(&mut c, "rtc_commands"));
    assert_eq!(hget(&mut c, "h", "b").as_deref(), Some("2"));
    assert_eq!(hget(&mut c, "h", "zz"), None);
    assert_eq!(
        stat(&mut c, "cache_hits"),
        hits + 2,
        "other fields come from the cached hash"
    );
    assert_eq!(
        stat(&mut c, "rtc_commands"),
        rtc + 2,
        "and are answered on the I/O thread"
    );
    // Every kind of write is seen by the very next HGET.
    q::<i64>(&mut c, &["HSET", "h", "a", "10"]);
    assert_eq!(hget(&mut c, "h", "a").as_deref(), Some("10"));
    q::<i64>(&mut c, &["HDEL", "h", "a"]);
    assert_eq!(hget(&mut c, "h", "a"), None);
    q::<i64>(&mut c, &["HINCRBY", "h", "b", "5"]);
    assert_eq!(hget(&mut c, "h", "b").as_deref(), Some("7"));
    q::<String>(&mut c, &["RENAME", "h", "h2"]);
    assert_eq!(hget(&mut c, "h", "b"), None);
    assert_eq!(hget(&mut c, "h2", "b").as_deref(), Some("7"));
    q::<String>(&mut c, &["SET", "h2", "s"]);
    assert!(err(&mut c, &["HGET", "h2", "b"]).starts_with("WRONGTYPE"));
    q::<i64>(&mut c, &["DEL", "h2"]);
    assert_eq!(hget(&mut c, "h2", "b"), None);
    q::<i64>(&mut c, &["HSET", "e", "f", "v"]);
    assert_eq!(hget(&mut c, "e", "f").as_deref(), Some("v"));
    q::<i64>(&mut c, &["PEXPIRE", "e", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        hget(&mut c, "e", "f"),
        None,
        "an expired cached hash is not served"
    );
    // A hash over the field limit is cached as its meta and the fields read (the first read
    // fills both, the second finds both), and still right.
    q::<i64>(
        &mut c,
        &[
            "HSET", "big", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    let hits = stat(&mut c, "cache_hits");
    assert_eq!(hget(&mut c, "big", "5").as_deref(), Some("e"));
    assert_eq!(hget(&mut c, "big", "5").as_deref(), Some("e"));
    assert_eq!(
        stat(&mut c, "cache_hits"),
        hits + 2,
        "big hashes are cached field by field"
    );
}

/// A deterministic mix over a few keys of cache hits, misses and writes of the same keys
/// (strings, counters, a small hash), with no command that answers an error.
fn mixed_script(n: usize) -> Vec<Vec<String>> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut script = Vec::new();
    for i in 0..n {
        let s = format!("s{}", next(3));
        let c = format!("n{}", next(2));
        let cmd: Vec<String> = match next(12) {
            0 | 1 => vec!["GET".into(), s],
            2 => vec!["SET".into(), s, format!("v{i}")],
            3 => vec!["APPEND".into(), s, "+".into()],
            4 => vec!["INCR".into(), c],
            5 => vec!["GET".into(), c],
            6 => vec!["MGET".into(), s, c, "s0".into()],
            7 => vec![
                "HSET".into(),
                "h".into(),
                format!("f{}", next(3)),
                format!("{i}"),
            ],
            8 => vec!["HGET".into(), "h".into(), format!("f{}", next(3))],
            9 => vec!["DEL".into(), if next(2) == 0 { s } else { c }],
            10 => vec!["EXISTS".into(), s, c, "h".into()],
            _ => vec!["STRLEN".into(), s],
        };
        script.push(cmd);
    }
    script
}

fn command(args: &[String]) -> redis::Cmd {
    let mut c = redis::cmd(&args[0]);
    for a in &args[1..] {
        c.arg(a);
    }
    c
}

/// Runs `script` in pipelines of 9 on a server started with `args`; returns the replies and
/// the server's cache lookups (hits, misses) and `rtc_commands`.
fn run_pipelined(args: &[&str], script: &[Vec<String>]) -> (Vec<Value>, [u64; 3]) {
    let s = TestServer::start_with(args);
    let mut c = s.client();
    let mut pipelined: Vec<Value> = Vec::new();
    for (i, chunk) in script.chunks(9).enumerate() {
        let mut p = redis::pipe();
        for cmd in chunk {
            p.add_command(command(cmd));
        }
        let replies: Vec<Value> = p.query(&mut c).unwrap();
        assert_eq!(replies.len(), chunk.len(), "chunk {i}");
        pipelined.extend(replies);
    }
    let counts = ["cache_hits", "cache_misses", "rtc_commands"].map(|k| stat(&mut c, k));
    (pipelined, counts)
}

/// Pipelined runs mixing reads and writes of the same keys (the I/O thread answers the leading
/// cache hits, the pool the rest) return, in order, what the same commands return one at a time;
/// with the run's keys prefetched or not (`cache-prefetch`), its hash small or cached field by
/// field. Prefetching counts no lookup: the counters match too, to the few lookups that the
/// per-process seed of the cache's hashing moves (the exact rule is the cache unit test
/// `prefetch_changes_and_counts_nothing`).
#[test]
fn a_pipelined_mixed_run_matches_sequential_execution() {
    let script = mixed_script(600);
    let sequential: Vec<Value> = {
        let s = TestServer::start();
        let mut c = s.client();
        script
            .iter()
            .map(|cmd| command(cmd).query(&mut c).unwrap())
            .collect()
    };
    for hash in [
        &["--cache-max-hash-fields", "128"][..],
        &["--cache-max-hash-fields", "1"],
    ] {
        let mut counts = Vec::new();
        for prefetch in ["yes", "no"] {
            let args = [hash, &["--cache-prefetch", prefetch][..]].concat();
            let (pipelined, c) = run_pipelined(&args, &script);
            for (i, (a, b)) in sequential.iter().zip(&pipelined).enumerate() {
                assert_eq!(a, b, "{args:?}, command {i}: {:?}", script[i]);
            }
            assert_eq!(sequential.len(), pipelined.len());
            assert!(c[2] > 0, "{args:?}: no command ran to completion");
            counts.push(c);
        }
        // Which keys share a cache shard and a write-epoch stripe is seeded per process, and
        // a fill refused because a stripe-mate was being written moves a lookup or two; a
        // prefetch that counted would add one per key it hints at, hundreds here.
        let lookups = |c: &[u64; 3]| c[0] + c[1];
        let (with, without) = (lookups(&counts[0]), lookups(&counts[1]));
        assert!(
            with.abs_diff(without) <= without / 50,
            "{hash:?}: lookups with and without prefetching: {counts:?}"
        );
        assert_eq!(counts[0][2], counts[1][2], "{hash:?}: rtc_commands");
    }
}

/// Reads every key of `keys` in one pipeline; returns how many of them the I/O thread answered
/// (`rtc_commands`) and the keyspace hits and misses they counted.
fn read_all(con: &mut Connection, keys: &[String]) -> (u64, u64, u64) {
    let before = (
        stat(con, "rtc_commands"),
        stat(con, "keyspace_hits"),
        stat(con, "keyspace_misses"),
    );
    let mut pipe = redis::pipe();
    for k in keys {
        pipe.cmd("GET").arg(k);
    }
    let values: Vec<Option<String>> = pipe.query(con).unwrap();
    for (k, v) in keys.iter().zip(&values) {
        let expected = k.strip_prefix("key:").map(|i| format!("value-{i}"));
        assert_eq!(v, &expected, "GET {k}");
    }
    (
        stat(con, "rtc_commands") - before.0,
        stat(con, "keyspace_hits") - before.1,
        stat(con, "keyspace_misses") - before.2,
    )
}

/// Sets `n` keys `key:<i>` to `value-<i>`; returns them and 100 absent keys, to read.
fn load_keys(c: &mut Connection, n: u64) -> Vec<String> {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("SET")
            .arg(format!("key:{i}"))
            .arg(format!("value-{i}"))
            .ignore();
    }
    let _: () = pipe.query(c).unwrap();
    let mut keys: Vec<String> = (0..n).map(|i| format!("key:{i}")).collect();
    keys.extend((0..100).map(|i| format!("absent:{i}")));
    keys
}

/// With `rtc-disk-read no`: a read that misses the hot cache but whose key RocksDB holds in
/// memory (memtable, block cache) is answered on the I/O thread too (`rtc-storage-read`); one
/// that would read the disk goes to the pool. Keyspace hits and misses are counted once either
/// way.
#[test]
fn hot_cache_misses_in_rocksdb_memory_are_served_on_the_io_thread() {
    let mut s = TestServer::start_with(&[
        "--cache-maxmemory",
        "64kb",
        "--cache-shards",
        "4",
        "--rtc-storage-read",
        "yes",
        "--rtc-disk-read",
        "no",
    ]);
    let mut c = s.client();
    let n = 3000;
    let keys = load_keys(&mut c, n);

    // Everything is in the memtable: every GET is answered on the I/O thread, though the hot
    // cache holds only a few hundred of these keys.
    let (rtc, hits, misses) = read_all(&mut c, &keys);
    assert_eq!((rtc, hits, misses), (n + 100, n, 100));
    assert!(
        stat(&mut c, "cache_evictions") > 0,
        "the hot cache is too small for them"
    );

    // Switched off, hot-cache misses go to the pool; the counts are the same.
    let _: String = q(&mut c, &["CONFIG", "SET", "rtc-storage-read", "no"]);
    let (rtc, hits, misses) = read_all(&mut c, &keys);
    assert!(rtc < n / 2, "{rtc} answered on the I/O thread");
    assert_eq!((hits, misses), (n, 100));

    // After a restart the data is in SST files and the block cache is cold: a read of a cold
    // block goes to the pool, which loads it; once loaded, every read stays on the I/O thread.
    s.restart();
    let mut c = s.client();
    let _: String = q(&mut c, &["CONFIG", "SET", "rtc-storage-read", "yes"]);
    let one = vec!["key:1".to_string()];
    assert_eq!(
        read_all(&mut c, &one),
        (0, 1, 0),
        "a cold block is read by the pool"
    );
    let (_, hits, misses) = read_all(&mut c, &keys);
    assert_eq!((hits, misses), (n, 100));
    let (rtc, hits, misses) = read_all(&mut c, &keys);
    assert_eq!((rtc, hits, misses), (n + 100, n, 100));
}

/// By default (`rtc-disk-read yes`) the I/O thread reads a hot-cache miss from RocksDB's files
/// itself: after a restart (cold block cache) every read is answered there (the slow-read
/// limit raised so a loaded machine cannot close the gate). When its tries turn slow
/// (`rtc-disk-read-slow-us 0`: every try is slower than that) it closes its disk gate, counted
/// in INFO, and a cold read goes to the pool again.
#[test]
fn hot_cache_misses_on_disk_are_read_by_the_io_thread_while_fast() {
    let mut s = TestServer::start_with(&[
        "--cache-maxmemory",
        "64kb",
        "--cache-shards",
        "4",
        "--rtc-disk-read-slow-us",
        "1000000",
    ]);
    let mut c = s.client();
    let n = 3000;
    let keys = load_keys(&mut c, n);
    s.restart();
    let mut c = s.client();
    let one = vec!["key:1".to_string()];
    assert_eq!(
        read_all(&mut c, &one),
        (1, 1, 0),
        "a cold block is read on the I/O thread"
    );
    let (rtc, hits, misses) = read_all(&mut c, &keys);
    assert_eq!((rtc, hits, misses), (n + 100, n, 100));
    assert_eq!(stat(&mut c, "rtc_disk_gate_closes"), 0);

    // Slow tries: within a window of 64 the gate closes; every read still answers right.
    s.restart();
    let mut c = s.client();
    let _: String = q(&mut c, &["CONFIG", "SET", "rtc-disk-read-slow-us", "0"]);
    let (_, hits, misses) = read_all(&mut c, &keys);
    assert_eq!((hits, misses), (n, 100));
    assert!(stat(&mut c, "rtc_disk_gate_closes") >= 1);

    // Switched off, a cold block goes to the pool.
    s.restart();
    let mut c = s.client();
    let _: String = q(&mut c, &["CONFIG", "SET", "rtc-disk-read", "no"]);
    assert_eq!(
        read_all(&mut c, &one),
        (0, 1, 0),
        "a cold block is read by the pool"
    );
}

/// A read that finds no key notes it in the hot cache (`cache-absent-keys`): the next read of
/// it is a cache hit answered on the I/O thread, counted as a keyspace miss as Redis counts it,
/// and any write that creates the key makes the note go away.
#[test]
fn absent_keys_are_cache_hits_until_created() {
    let s = TestServer::start();
    let mut c = s.client();
    let create: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["MSET", "k", "v"],
        &["INCR", "k"],
        &["APPEND", "k", "v"],
        &["SETNX", "k", "v"],
        &["HSET", "k", "f", "v"],
        &["LPUSH", "k", "v"],
        &["SADD", "k", "v"],
        &["ZADD", "k", "1", "v"],
        &["XADD", "k", "*", "f", "v"],
        &["PFADD", "k", "v"],
        &["SETBIT", "k", "7", "1"],
        &["COPY", "src", "k"],
        &["RENAME", "src", "k"],
        &["EVAL", "return redis.call('SET', KEYS[1], 'v')", "1", "k"],
    ];
    for cmd in create {
        let _: i64 = q(&mut c, &["DEL", "k"]);
        let _: String = q(&mut c, &["SET", "src", "v"]);
        assert_eq!(get(&mut c, "k"), None);
        let before = (
            stat(&mut c, "rtc_commands"),
            stat(&mut c, "cache_hits"),
            stat(&mut c, "keyspace_misses"),
        );
        assert_eq!(get(&mut c, "k"), None);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
        assert_eq!(q::<String>(&mut c, &["TYPE", "k"]), "none");
        let after = (
            stat(&mut c, "rtc_commands"),
            stat(&mut c, "cache_hits"),
            stat(&mut c, "keyspace_misses"),
        );
        assert_eq!(
            (after.0 - before.0, after.1 - before.1, after.2 - before.2),
            (3, 3, 3),
            "absent k is known before {cmd:?}"
        );
        let _: Value = qv(&mut c, cmd);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 1, "after {cmd:?}");
    }
    // Switched off, an absent key is read from RocksDB every time.
    let _: String = q(&mut c, &["CONFIG", "SET", "cache-absent-keys", "no"]);
    assert_eq!(get(&mut c, "nothing"), None);
    let before = (stat(&mut c, "cache_hits"), stat(&mut c, "cache_misses"));
    assert_eq!(get(&mut c, "nothing"), None);
    let after = (stat(&mut c, "cache_hits"), stat(&mut c, "cache_misses"));
    assert_eq!((after.0 - before.0, after.1 - before.1), (0, 1));
}

/// The keys the cached-reply tests read in each shape: a small string (copied into a reply
/// under the shard's lock), one past that copy's limit and a small hash, the hash read once
/// so the cache holds it. Returns the large value.
fn set_shapes(c: &mut Connection) -> String {
    let big = "v".repeat(10_000);
    let _: () = q(c, &["SET", "small", "abc"]);
    let _: () = q(c, &["SET", "big", &big]);
    let _: i64 = q(c, &["HSET", "h", "f", "v"]);
    let _: Option<String> = q(c, &["HGET", "h", "f"]);
    big
}

/// MGET answered from the hot cache writes each value straight into its reply: small and big
/// values, an absent key and a hash (null, counted as a keyspace hit as Redis counts it) give
/// the worker's reply in both protocols, and a key the cache does not hold, part way through,
/// leaves no half-written reply behind (the I/O thread's partial reply is cut back and the
/// command run again).
#[test]
fn cached_mget_replies_in_every_shape() {
    // Writes do not add keys to the cache here, so a key only written is a miss.
    let s = TestServer::start_with(&["--cache-write-allocate", "no"]);
    let mut c = s.client();
    let big = set_shapes(&mut c);
    for key in ["small", "big", "nope"] {
        let _ = get(&mut c, key);
    }
    let mget = ["MGET", "small", "big", "nope", "h", "small"];
    let want = vec![
        Some("abc".to_string()),
        Some(big.clone()),
        None,
        None,
        Some("abc".to_string()),
    ];
    for _ in 0..2 {
        let rtc = stat(&mut c, "rtc_commands");
        let hits = stat(&mut c, "keyspace_hits");
        let misses = stat(&mut c, "keyspace_misses");
        assert_eq!(q::<Vec<Option<String>>>(&mut c, &mget), want);
        assert_eq!(
            stat(&mut c, "rtc_commands"),
            rtc + 1,
            "MGET ran on the I/O thread"
        );
        assert_eq!(stat(&mut c, "keyspace_hits"), hits + 4);
        assert_eq!(stat(&mut c, "keyspace_misses"), misses + 1);
    }

    // "cold" was written but never read, so the cache does not hold it: the I/O thread has
    // already written "small" into the reply when it meets it.
    let _: () = q(&mut c, &["SET", "cold", "coldv"]);
    let cache_misses = stat(&mut c, "cache_misses");
    let got: Vec<Option<String>> = q(&mut c, &["MGET", "small", "cold", "small"]);
    assert_eq!(
        got,
        vec![
            Some("abc".to_string()),
            Some("coldv".to_string()),
            Some("abc".to_string())
        ]
    );
    assert!(
        stat(&mut c, "cache_misses") > cache_misses,
        "cold was a miss"
    );
    assert_eq!(get(&mut c, "small").as_deref(), Some("abc"), "in step");

    // RESP3 nulls, on a connection of its own.
    let mut raw = s.raw();
    let mut req = resp_str(&["HELLO", "3"]);
    req.extend(resp_str(&["MGET", "small", "nope", "h"]));
    req.extend(resp_str(&["QUIT"]));
    let (got, closed) = roundtrip_raw(&mut raw, &req, usize::MAX);
    assert!(closed);
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.ends_with("*3\r\n$3\r\nabc\r\n_\r\n_\r\n+OK\r\n"),
        "{got}"
    );
}

/// EXISTS, TYPE and the TTL family answered from the hot cache's kind and expiry of each kind
/// it holds (a string, a small hash whole, a set and a sorted set as their meta), on the I/O
/// thread, with the replies a worker gives.
#[test]
fn cached_kind_and_expiry_replies_for_every_cached_kind() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "s", "v"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f", "v"]);
    let _: i64 = q(&mut c, &["SADD", "set", "m"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "1", "m"]);
    let _: i64 = q(&mut c, &["PEXPIREAT", "h", "4102444800000"]);
    let _: i64 = q(&mut c, &["EXPIRE", "z", "1000"]);
    // Reads that fill the cache with each key.
    let _: Option<String> = q(&mut c, &["GET", "s"]);
    let _: Option<String> = q(&mut c, &["HGET", "h", "f"]);
    let _: i64 = q(&mut c, &["SISMEMBER", "set", "m"]);
    let _: Option<f64> = q(&mut c, &["ZSCORE", "z", "m"]);
    for _ in 0..2 {
        let rtc = stat(&mut c, "rtc_commands");
        let types: Vec<String> = ["s", "h", "set", "z", "nope"]
            .iter()
            .map(|k| q(&mut c, &["TYPE", k]))
            .collect();
        assert_eq!(types, ["string", "hash", "set", "zset", "none"]);
        assert_eq!(
            q::<i64>(&mut c, &["EXISTS", "s", "h", "set", "z", "nope", "s"]),
            5
        );
        assert_eq!(q::<i64>(&mut c, &["TTL", "s"]), -1);
        assert_eq!(q::<i64>(&mut c, &["TTL", "nope"]), -2);
        assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "h"]), 4_102_444_800_000);
        assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "h"]), 4_102_444_800);
        let ttl: i64 = q(&mut c, &["TTL", "z"]);
        assert!((990..=1000).contains(&ttl), "{ttl}");
        let pttl: i64 = q(&mut c, &["PTTL", "set"]);
        assert_eq!(pttl, -1);
        assert_eq!(
            stat(&mut c, "rtc_commands"),
            rtc + 12,
            "every read ran on the I/O thread"
        );
    }
}

/// GET answered from the hot cache in each of its shapes: a small value (copied under the
/// shard's lock), one past that copy's limit (taken by reference), an absent key and a cached
/// small hash (WRONGTYPE); each read twice, the second counted as a cache hit.
#[test]
fn cached_get_replies_in_every_shape() {
    let s = TestServer::start();
    let mut c = s.client();
    let big = set_shapes(&mut c);
    for _ in 0..2 {
        let before = stat(&mut c, "cache_hits");
        assert_eq!(get(&mut c, "small").as_deref(), Some("abc"));
        assert_eq!(get(&mut c, "big").as_deref(), Some(big.as_str()));
        assert_eq!(get(&mut c, "nope"), None);
        let err = redis::cmd("GET")
            .arg("h")
            .query::<Option<String>>(&mut c)
            .unwrap_err();
        assert_eq!(err.code(), Some("WRONGTYPE"));
        assert!(stat(&mut c, "cache_hits") >= before + 3);
    }
    let hits = stat(&mut c, "keyspace_hits");
    let misses = stat(&mut c, "keyspace_misses");
    assert_eq!(get(&mut c, "nope"), None);
    let _ = redis::cmd("GET").arg("h").query::<Option<String>>(&mut c);
    assert_eq!(
        stat(&mut c, "keyspace_misses"),
        misses + 1,
        "an absent key is a keyspace miss"
    );
    assert_eq!(
        stat(&mut c, "keyspace_hits"),
        hits + 1,
        "WRONGTYPE counts a keyspace hit"
    );
}
