//! Integration tests: the server-admin commands of issue 18: SWAPDB (with WATCH and blocked
//! clients, and across a restart), and the cluster-mode refusals of SWAPDB, MOVE and COPY ... DB.

use crate::common::*;
use redis::Connection;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn send(s: &mut TcpStream, args: &[&str]) {
    s.write_all(&resp_str(args)).unwrap();
}

fn expect(s: &mut TcpStream, expected: &str) {
    let (got, _) = read_raw(s, expected.len());
    assert_eq!(String::from_utf8_lossy(&got), expected);
}

fn wait_blocked(c: &mut Connection, n: u64) {
    assert!(eventually(WAIT, || info_field(
        c,
        "clients",
        "blocked_clients"
    ) == Some(n)));
}

#[test]
fn swapdb_swaps_contents_and_survives_a_restart() {
    let mut srv = TestServer::start();
    let mut c = srv.client();
    let _: () = q(&mut c, &["SET", "k", "zero"]);
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: () = q(&mut c, &["SET", "k", "one"]);
    let _: () = q(&mut c, &["SET", "only1", "x"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    // Served from the hot cache before the swap: it must not answer for db 0 after it.
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "zero");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "zero");
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "0", "1"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "one");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "only1"]), 1);
    let ks = info(&mut c, "keyspace");
    assert_eq!(ks["Keyspace"]["db0"], "keys=2,expires=0,avg_ttl=0");
    assert_eq!(ks["Keyspace"]["db1"], "keys=1,expires=0,avg_ttl=0");
    // MOVE and COPY ... DB name logical databases.
    assert_eq!(q::<i64>(&mut c, &["MOVE", "only1", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["COPY", "k", "k2", "DB", "2"]), 1);
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "zero");
    assert_eq!(q::<String>(&mut c, &["GET", "only1"]), "x");
    let _: () = q(&mut c, &["SELECT", "2"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k2"]), "one");
    // Redis's errors.
    assert_eq!(
        err(&mut c, &["SWAPDB", "a", "1"]),
        "ERR invalid first DB index"
    );
    assert_eq!(
        err(&mut c, &["SWAPDB", "1", "b"]),
        "ERR invalid second DB index"
    );
    assert_eq!(
        err(&mut c, &["SWAPDB", "0", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(&mut c, &["SWAPDB", "-1", "0"]),
        "ERR DB index is out of range"
    );
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "3", "3"]), "OK");
    drop(c);
    // The table of databases is persisted.
    srv.restart();
    let mut c = srv.client();
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "one");
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "zero");
    // FLUSHDB empties the logical database it is run in.
    let _: () = q(&mut c, &["FLUSHDB"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "one");
}

#[test]
fn swapdb_serves_a_blocked_blpop_and_touches_watch() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: i64 = q(&mut c, &["RPUSH", "list", "a", "b"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    // A client blocked in db 0 stays in db 0, and db 0 now has the list.
    let mut blocked = srv.raw();
    send(&mut blocked, &["BLPOP", "list", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "1", "0"]), "OK");
    expect(&mut blocked, "*2\r\n$4\r\nlist\r\n$1\r\na\r\n");
    wait_blocked(&mut c, 0);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "list", "0", "-1"]),
        ["b"]
    );

    // WATCH of a key that exists in one of the two databases: EXEC aborts.
    let mut w = srv.client();
    let _: () = q(&mut w, &["WATCH", "list"]);
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "0", "5"]), "OK");
    let _: () = q(&mut w, &["MULTI"]);
    let _: () = q(&mut w, &["PING"]);
    assert_eq!(qv(&mut w, &["EXEC"]), redis::Value::Nil);
    // A key in neither database is not touched, as in Redis.
    let _: () = q(&mut w, &["WATCH", "nothing"]);
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "0", "5"]), "OK");
    let _: () = q(&mut w, &["MULTI"]);
    let _: () = q(&mut w, &["PING"]);
    assert_eq!(q::<Vec<String>>(&mut w, &["EXEC"]), ["PONG"]);
}

#[test]
fn cluster_mode_refuses_swapdb_move_and_copy_to_another_db() {
    let srv = TestServer::start_with(&["--cluster-enabled", "yes"]);
    let mut c = srv.client();
    let id = kvik_testkit::kvik_node_id(srv.port);
    let node = format!("{id} 127.0.0.1 {} 0-16383", srv.port);
    q::<()>(&mut c, &["CLUSTER", "SETTOPOLOGY", "2", &node]);
    assert_eq!(
        err(&mut c, &["SWAPDB", "0", "1"]),
        "ERR SWAPDB is not allowed in cluster mode"
    );
    assert_eq!(
        err(&mut c, &["MOVE", "k", "1"]),
        "ERR MOVE is not allowed in cluster mode"
    );
    assert_eq!(
        err(&mut c, &["COPY", "{k}a", "{k}b", "DB", "1"]),
        "ERR Copying to another database is not allowed in cluster mode"
    );
}

/// Every key of the current database with its type, value and TTL sign: what a restore must
/// reproduce.
fn dump_all(c: &mut Connection) -> Vec<(String, String, String, i64)> {
    let mut keys: Vec<String> = q(c, &["KEYS", "*"]);
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let ty: String = q(c, &["TYPE", &k]);
            let value = match ty.as_str() {
                "string" => format!("{:?}", qv(c, &["GET", &k])),
                "hash" => {
                    let mut v: Vec<String> = q(c, &["HGETALL", &k]);
                    v.sort();
                    format!("{v:?}")
                }
                "list" => format!("{:?}", qv(c, &["LRANGE", &k, "0", "-1"])),
                "set" => format!("{:?}", qv(c, &["SMEMBERS", &k])),
                "zset" => format!("{:?}", qv(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"])),
                _ => format!("{:?}", qv(c, &["XRANGE", &k, "-", "+"])),
            };
            let ttl: i64 = q(c, &["TTL", &k]);
            (k, ty, value, ttl.signum())
        })
        .collect()
}

#[test]
fn save_then_restore_from_gives_the_same_data() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let start: i64 = q(&mut c, &["LASTSAVE"]);
    assert!(start > 0);
    let _: () = q(&mut c, &["SET", "s", "v"]);
    let _: () = q(&mut c, &["SET", "ttl", "v", "EX", "1000"]);
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    let _: i64 = q(&mut c, &["RPUSH", "l", "x", "y", "z"]);
    let _: i64 = q(&mut c, &["SADD", "set", "m1", "m2"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "1.5", "a", "-2", "b"]);
    let _: String = q(&mut c, &["XADD", "x", "1-1", "f", "v"]);
    let _: () = q(&mut c, &["SELECT", "3"]);
    let _: () = q(&mut c, &["SET", "in3", "three"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert!(info_field(&mut c, "persistence", "rdb_changes_since_last_save").unwrap() > 0);
    assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    assert_eq!(
        info_field(&mut c, "persistence", "rdb_changes_since_last_save"),
        Some(0)
    );
    assert_eq!(info_field(&mut c, "persistence", "rdb_saves"), Some(1));
    assert!(q::<i64>(&mut c, &["LASTSAVE"]) >= start);
    let saved = dump_all(&mut c);
    // Written after the save: not in the checkpoint.
    let _: () = q(&mut c, &["SET", "later", "x"]);
    let checkpoint = srv.dir.join("dump.rdb.checkpoint");
    assert!(checkpoint.join("CURRENT").is_file());

    // BGSAVE to another name replaces nothing of the first; INFO shows it finish.
    let _: () = q(&mut c, &["CONFIG", "SET", "dbfilename", "second"]);
    assert_eq!(
        q::<String>(&mut c, &["BGSAVE"]),
        "Background saving started"
    );
    assert!(eventually(WAIT, || {
        info_field(&mut c, "persistence", "rdb_bgsave_in_progress") == Some(0)
            && srv.dir.join("second.checkpoint").join("CURRENT").is_file()
    }));
    assert_eq!(
        info(&mut c, "persistence")["Persistence"]["rdb_last_bgsave_status"],
        "ok"
    );
    assert_eq!(err(&mut c, &["BGSAVE", "now"]), "ERR syntax error");

    let tmp = tempfile::tempdir().unwrap();
    let restored_dir = tmp.path().join("restored");
    let cp = checkpoint.to_str().unwrap();
    let restored = TestServer::start_in(&restored_dir, &["--restore-from", cp]);
    let mut r = restored.client();
    assert_eq!(dump_all(&mut r), saved);
    assert_eq!(q::<i64>(&mut r, &["EXISTS", "later"]), 0);
    assert_eq!(q::<i64>(&mut r, &["DBSIZE"]), 7);
    let _: () = q(&mut r, &["SELECT", "3"]);
    assert_eq!(q::<String>(&mut r, &["GET", "in3"]), "three");
}

/// Reads CRLF-terminated lines from `s` until `n` have arrived (bounded by its read timeout).
fn read_lines(s: &mut TcpStream, n: usize) -> Vec<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while buf.windows(2).filter(|w| w == b"\r\n").count() < n {
        let got = s.read(&mut chunk).expect("monitor lines arrive");
        assert!(got > 0, "connection closed");
        buf.extend_from_slice(&chunk[..got]);
    }
    String::from_utf8_lossy(&buf)
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `+<secs>.<6 digits> [`, then the rest of the line.
fn strip_time(line: &str) -> &str {
    let rest = line.strip_prefix('+').expect("a status line");
    let (time, rest) = rest.split_once(' ').expect("time then space");
    let (secs, micros) = time.split_once('.').expect("secs.micros");
    assert!(secs.parse::<u64>().unwrap() > 1_600_000_000, "{line}");
    assert_eq!(micros.len(), 6, "{line}");
    rest
}

#[test]
fn monitor_shows_commands_in_redis_format() {
    let srv = TestServer::start();
    let mut mon = srv.raw();
    send(&mut mon, &["MONITOR"]);
    expect(&mut mon, "+OK\r\n");
    let mut c = srv.client();
    let addr: String = q(&mut c, &["CLIENT", "INFO"]);
    let addr = addr
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    let _: () = q(&mut c, &["SET", "a b", "x\"y\n\u{1}"]);
    let _: Option<String> = q(&mut c, &["GET", "a b"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-samples", "5"]); // admin: not shown
    let _: Option<String> = q(&mut c, &["GET", "nokey"]);
    let _: i64 = q(
        &mut c,
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "n"],
    );
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["SET", "m", "1"]);
    let _: Vec<String> = q(&mut c, &["EXEC"]);
    let _: () = q(&mut c, &["SELECT", "2"]);
    let _: String = q(&mut c, &["PING"]);
    let _ = err(&mut c, &["AUTH", "secret"]);
    // The client library announces itself first (CLIENT SETINFO, shown as any command).
    let lines = read_lines(&mut mon, 14);
    let body: Vec<&str> = lines
        .iter()
        .map(|l| strip_time(l))
        .filter(|l| !l.contains("SETINFO"))
        .collect();
    let at = |db: u16, rest: &str| format!("[{db} {addr}] {rest}");
    assert_eq!(
        body,
        [
            at(0, r#""CLIENT" "INFO""#).as_str(),
            &at(0, r#""SET" "a b" "x\"y\n\x01""#),
            &at(0, r#""GET" "a b""#),
            &at(0, r#""GET" "nokey""#),
            &at(0, r#""EVAL" "return redis.call('incr', KEYS[1])" "1" "n""#),
            r#"[0 lua] "incr" "n""#,
            &at(0, r#""MULTI""#),
            &at(0, r#""SET" "m" "1""#),
            &at(0, r#""EXEC""#),
            &at(0, r#""SELECT" "2""#),
            &at(2, r#""PING""#),
            &at(2, r#""AUTH" "(redacted)""#),
        ]
    );
}

#[test]
fn a_monitor_that_never_reads_is_cut_off_at_the_output_limit() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 0 0",
        ],
    );
    let mut mon = srv.raw();
    send(&mut mon, &["MONITOR"]);
    expect(&mut mon, "+OK\r\n");
    assert_eq!(info_field(&mut c, "clients", "connected_clients"), Some(2));
    let big = "x".repeat(1 << 20);
    for i in 0..40 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), &big]);
    }
    assert!(eventually(WAIT, || {
        info_field(&mut c, "clients", "connected_clients") == Some(1)
    }));
}

#[test]
fn debug_is_off_by_default_and_answers_as_redis_when_on() {
    let off = TestServer::start();
    let mut c = off.client();
    assert!(err(&mut c, &["DEBUG", "SLEEP", "0"]).starts_with(
        "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\""
    ));
    let local = TestServer::start_with(&["--enable-debug-command", "local"]);
    let mut c = local.client();
    assert_eq!(q::<String>(&mut c, &["DEBUG", "SLEEP", "0"]), "OK");

    let srv = TestServer::start_with(&["--enable-debug-command", "yes"]);
    let mut c = srv.client();
    assert_eq!(q::<String>(&mut c, &["DEBUG", "SLEEP", "0.01"]), "OK");
    assert_eq!(q::<String>(&mut c, &["DEBUG", "SLEEP", "abc"]), "OK");
    let _: () = q(&mut c, &["SET", "foo", "bar"]);
    let line: String = q(&mut c, &["DEBUG", "OBJECT", "foo"]);
    assert!(line.starts_with("Value at:"), "{line}");
    assert!(line.contains(" encoding:embstr "), "{line}");
    assert_eq!(
        err(&mut c, &["DEBUG", "OBJECT", "nokey"]),
        "ERR no such key"
    );
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b"]);
    assert_eq!(
        err(&mut c, &["DEBUG", "LISTPACK", "l"]),
        "ERR Not a listpack encoded object."
    );
    for ok in [
        &["DEBUG", "SET-ACTIVE-EXPIRE", "0"][..],
        &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
        &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100"],
        &["DEBUG", "CHANGE-REPL-ID"],
        &["DEBUG", "RELOAD"],
        &["DEBUG", "set-skip-checksum-validation", "1"],
    ] {
        assert_eq!(q::<String>(&mut c, ok), "OK", "{ok:?}");
    }
    assert_eq!(
        err(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "abc"]),
        "ERR argument must be a memory value bigger than 1 and smaller than 4gb"
    );
    assert_eq!(
        err(&mut c, &["DEBUG", "jmap"]),
        "ERR unknown subcommand or wrong number of arguments for 'jmap'. Try DEBUG HELP."
    );
    assert_eq!(
        err(&mut c, &["DEBUG", "set-active-expire"]),
        "ERR unknown subcommand or wrong number of arguments for 'set-active-expire'. Try DEBUG HELP."
    );
    assert_eq!(
        err(&mut c, &["DEBUG"]),
        "ERR wrong number of arguments for 'debug' command"
    );
    assert_eq!(q::<String>(&mut c, &["DEBUG", "POPULATE", "2500"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2502);
    assert_eq!(q::<String>(&mut c, &["GET", "key:2499"]), "value:2499");
    assert_eq!(
        q::<String>(&mut c, &["DEBUG", "POPULATE", "3", "p", "2"]),
        "OK"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "p:1"]), "va");
    let help: Vec<String> = q(&mut c, &["DEBUG", "HELP"]);
    assert!(help[0].starts_with("DEBUG <subcommand>"));
}

#[test]
fn object_freq_and_idletime_follow_the_policy_and_the_hot_cache() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let lfu_off = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
    assert_eq!(err(&mut c, &["OBJECT", "FREQ", "k"]), lfu_off);
    assert!(q::<i64>(&mut c, &["OBJECT", "IDLETIME", "k"]) >= 0);
    assert_eq!(
        qv(&mut c, &["OBJECT", "IDLETIME", "nokey"]),
        redis::Value::Nil
    );
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    );
    assert_eq!(
        err(&mut c, &["OBJECT", "IDLETIME", "k"]),
        "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
    );
    // Read a few times: the hot cache holds it and counts its accesses.
    for _ in 0..20 {
        let _: String = q(&mut c, &["GET", "k"]);
    }
    assert!(q::<i64>(&mut c, &["OBJECT", "FREQ", "k"]) >= 5);
    assert_eq!(qv(&mut c, &["OBJECT", "FREQ", "nokey"]), redis::Value::Nil);
}

#[test]
fn memory_and_latency_commands_answer_in_redis_shapes() {
    let srv = TestServer::start_with(&["--enable-debug-command", "yes"]);
    let mut c = srv.client();
    let _: () = q(&mut c, &["SET", "k", "value"]);
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    assert!(q::<i64>(&mut c, &["MEMORY", "USAGE", "k"]) > 6);
    let all: i64 = q(&mut c, &["MEMORY", "USAGE", "h", "SAMPLES", "0"]);
    assert!(all > q::<i64>(&mut c, &["MEMORY", "USAGE", "k"]));
    assert_eq!(qv(&mut c, &["MEMORY", "USAGE", "nokey"]), redis::Value::Nil);
    assert_eq!(
        err(&mut c, &["MEMORY", "USAGE", "k", "SAMPLES"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["MEMORY", "USAGE", "k", "SAMPLES", "-1"]),
        "ERR syntax error"
    );
    let stats: Vec<redis::Value> = q(&mut c, &["MEMORY", "STATS"]);
    assert!(stats.contains(&redis::Value::BulkString(b"keys.count".to_vec())));
    assert_eq!(q::<String>(&mut c, &["MEMORY", "PURGE"]), "OK");
    assert!(!q::<String>(&mut c, &["MEMORY", "DOCTOR"]).is_empty());
    assert_eq!(
        q::<String>(&mut c, &["MEMORY", "MALLOC-STATS"]),
        "Stats not supported for the current allocator"
    );
    assert_eq!(
        err(&mut c, &["MEMORY", "nosuch"]),
        "ERR unknown subcommand 'nosuch'. Try MEMORY HELP."
    );

    // The monitor is off until a threshold is set.
    let _: () = q(&mut c, &["DEBUG", "SLEEP", "0.02"]);
    assert_eq!(
        qv(&mut c, &["LATENCY", "LATEST"]),
        redis::Value::Array(vec![])
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "5"]);
    let _: () = q(&mut c, &["DEBUG", "SLEEP", "0.02"]);
    let latest: Vec<(String, i64, i64, i64)> = q(&mut c, &["LATENCY", "LATEST"]);
    assert_eq!(latest.len(), 1);
    assert_eq!(latest[0].0, "command");
    assert!(latest[0].2 >= 20 && latest[0].3 >= 20);
    let history: Vec<(i64, i64)> = q(&mut c, &["LATENCY", "HISTORY", "command"]);
    assert_eq!(history.len(), 1);
    assert!(!q::<String>(&mut c, &["LATENCY", "DOCTOR"]).is_empty());
    assert_eq!(
        err(&mut c, &["LATENCY", "GRAPH", "nosuch"]),
        "ERR No samples available for event 'nosuch'"
    );
    assert_eq!(q::<i64>(&mut c, &["LATENCY", "RESET"]), 1);
    assert_eq!(
        qv(&mut c, &["LATENCY", "LATEST"]),
        redis::Value::Array(vec![])
    );

    // Histograms and INFO latencystats.
    let h: Vec<redis::Value> = q(&mut c, &["LATENCY", "HISTOGRAM", "set", "hset"]);
    assert_eq!(h.len(), 4, "{h:?}");
    let text: String = q(&mut c, &["INFO", "latencystats"]);
    assert!(text.starts_with("# Latencystats\r\n"), "{text}");
    assert!(text.contains("latency_percentiles_usec_set:p50="), "{text}");
    assert!(text.contains(",p99.9="), "{text}");
    let default: String = q(&mut c, &["INFO"]);
    assert!(!default.contains("Latencystats"));
}
