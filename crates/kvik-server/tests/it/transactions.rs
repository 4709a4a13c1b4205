//! Integration tests: transactions (MULTI EXEC DISCARD WATCH UNWATCH). Expected replies and
//! error texts are redis-server 7.0's (checked against 7.0.15).

use crate::common::*;
use redis::Connection;
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

/// Sends `cmds` pipelined on a raw connection and asserts the replies are exactly `expected`.
fn expect(s: &mut TcpStream, cmds: &[&[&str]], expected: &str) {
    let mut req = Vec::new();
    for c in cmds {
        req.extend_from_slice(&resp_str(c));
    }
    let (got, _) = roundtrip_raw(s, &req, expected.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        expected,
        "replies to {cmds:?}"
    );
}

const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";

#[test]
fn transaction_errors_match_redis() {
    let s = TestServer::start();
    let mut r = s.raw();
    expect(
        &mut r,
        &[
            &["EXEC"],
            &["DISCARD"],
            &["MULTI"],
            &["MULTI"],
            &["WATCH", "a"],
        ],
        "-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n+OK\r\n\
         -ERR MULTI calls can not be nested\r\n-ERR WATCH inside MULTI is not allowed\r\n",
    );
    // Neither error above aborts the transaction; an unknown command and a bad arity do.
    expect(&mut r, &[&["SET", "a", "1"]], "+QUEUED\r\n");
    expect(
        &mut r,
        &[&["FOO", "x"], &["GET"], &["EXEC"], &["EXEC"], &["GET", "a"]],
        "-ERR unknown command 'FOO', with args beginning with: 'x' \r\n\
         -ERR wrong number of arguments for 'get' command\r\n\
         -EXECABORT Transaction discarded because of previous errors.\r\n\
         -ERR EXEC without MULTI\r\n$-1\r\n",
    );
    // A no-multi command is refused and aborts too (and SHUTDOWN does not run).
    expect(
        &mut r,
        &[&["MULTI"], &["SHUTDOWN"], &["EXEC"], &["PING"]],
        "+OK\r\n-ERR Command not allowed inside a transaction\r\n\
         -EXECABORT Transaction discarded because of previous errors.\r\n+PONG\r\n",
    );
    // EXEC with arguments discards the transaction at once; DISCARD with arguments only flags it.
    expect(
        &mut r,
        &[&["MULTI"], &["SET", "a", "2"], &["EXEC", "x"], &["EXEC"]],
        "+OK\r\n+QUEUED\r\n-EXECABORT Transaction discarded because of: wrong number of \
         arguments for 'exec' command\r\n-ERR EXEC without MULTI\r\n",
    );
    expect(
        &mut r,
        &[&["MULTI"], &["DISCARD", "x"], &["EXEC"], &["GET", "a"]],
        "+OK\r\n-ERR wrong number of arguments for 'discard' command\r\n\
         -EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n",
    );
    expect(
        &mut r,
        &[&["WATCH"], &["MULTI", "x"], &["UNWATCH", "x"]],
        "-ERR wrong number of arguments for 'watch' command\r\n\
         -ERR wrong number of arguments for 'multi' command\r\n\
         -ERR wrong number of arguments for 'unwatch' command\r\n",
    );
}

#[test]
fn exec_replies_every_result_and_errors_are_elements() {
    let s = TestServer::start();
    let mut r = s.raw();
    expect(
        &mut r,
        &[
            &["SET", "s", "text"],
            &["MULTI"],
            &["SET", "b", "1"],
            &["INCR", "s"],
            &["INCR", "b"],
            &["GET", "b"],
            &["UNWATCH"],
            &["EXEC"],
        ],
        &format!(
            "+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n\
             *5\r\n+OK\r\n{NOT_INT}:2\r\n$1\r\n2\r\n+OK\r\n"
        ),
    );
    // An empty transaction; a transaction that selects another database (the session keeps it).
    expect(
        &mut r,
        &[
            &["MULTI"],
            &["EXEC"],
            &["MULTI"],
            &["SELECT", "1"],
            &["SET", "b", "db1"],
            &["EXEC"],
            &["GET", "b"],
            &["SELECT", "0"],
            &["GET", "b"],
        ],
        "+OK\r\n*0\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n+OK\r\n$3\r\ndb1\r\n+OK\r\n\
         $1\r\n2\r\n",
    );
    // Inner commands are counted in commandstats like any other; queueing is not a call.
    let mut c = s.client();
    let stats = info(&mut c, "commandstats");
    let calls = |cmd: &str| {
        stats["Commandstats"][&format!("cmdstat_{cmd}")]
            .split(',')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(calls("exec"), "calls=3");
    assert_eq!(calls("incr"), "calls=2");
    assert_eq!(calls("get"), "calls=3");
}

#[test]
fn discard_quit_and_reset_end_the_transaction() {
    let s = TestServer::start();
    let mut r = s.raw();
    expect(
        &mut r,
        &[
            &["MULTI"],
            &["SET", "x", "1"],
            &["DISCARD"],
            &["GET", "x"],
            &["EXEC"],
        ],
        "+OK\r\n+QUEUED\r\n+OK\r\n$-1\r\n-ERR EXEC without MULTI\r\n",
    );
    // RESET inside MULTI discards it and forgets the watched keys.
    let mut other = s.client();
    expect(
        &mut r,
        &[&["WATCH", "w"], &["MULTI"], &["SET", "x", "1"], &["RESET"]],
        "+OK\r\n+OK\r\n+QUEUED\r\n+RESET\r\n",
    );
    let _: () = q(&mut other, &["SET", "w", "changed"]);
    expect(
        &mut r,
        &[&["EXEC"], &["MULTI"], &["GET", "x"], &["EXEC"]],
        "-ERR EXEC without MULTI\r\n+OK\r\n+QUEUED\r\n*1\r\n$-1\r\n",
    );
    // QUIT inside MULTI answers and closes; nothing queued runs.
    let mut r2 = s.raw();
    let mut req = resp_str(&["MULTI"]);
    req.extend_from_slice(&resp_str(&["SET", "y", "1"]));
    req.extend_from_slice(&resp_str(&["QUIT"]));
    let (got, closed) = roundtrip_raw(&mut r2, &req, 1 << 20);
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n+QUEUED\r\n+OK\r\n");
    assert!(closed);
    assert_eq!(q::<Option<String>>(&mut other, &["GET", "y"]), None);
}

/// On one connection: WATCH `keys`, let `change` run on another connection, then MULTI, SET done
/// 1, EXEC. Returns whether EXEC ran.
fn watched_exec(s: &TestServer, keys: &[&str], change: impl FnOnce(&mut Connection)) -> bool {
    let mut c = s.client();
    let mut other = s.client();
    let mut args = vec!["WATCH"];
    args.extend_from_slice(keys);
    let _: () = q(&mut c, &args);
    change(&mut other);
    let _: () = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["SET", "done", "1"]);
    match qv(&mut c, &["EXEC"]) {
        redis::Value::Nil => false,
        redis::Value::Array(items) => {
            assert_eq!(items.len(), 1);
            true
        }
        other => panic!("EXEC replied {other:?}"),
    }
}

#[test]
fn watch_aborts_exec_only_when_a_watched_key_changed() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    // Untouched, or only other keys / other databases written: EXEC runs.
    assert!(watched_exec(&s, &["k", "missing"], |o| {
        let _: () = q(o, &["SET", "unrelated", "1"]);
        let _: () = q(o, &["SELECT", "1"]);
        let _: () = q(o, &["SET", "k", "other db"]);
        let _: () = q(o, &["SELECT", "0"]);
        let _: i64 = q(o, &["DEL", "missing"]); // deleting nothing is no change
        let _: i64 = q(o, &["EXPIRE", "missing", "10"]);
        let _: String = q(o, &["GET", "k"]); // reads are no change
    }));
    // Another client's write, delete, expiry change, rename onto it, or creation: aborted.
    assert!(!watched_exec(&s, &["k"], |o| {
        let _: () = q(o, &["SET", "k", "v2"]);
    }));
    assert!(!watched_exec(&s, &["k"], |o| {
        let _: i64 = q(o, &["EXPIRE", "k", "100"]);
    }));
    assert!(!watched_exec(&s, &["k"], |o| {
        let _: i64 = q(o, &["DEL", "k"]);
    }));
    assert!(!watched_exec(&s, &["missing"], |o| {
        let _: i64 = q(o, &["INCR", "missing"]);
    }));
    let _: () = q(&mut c, &["SET", "src", "x"]);
    assert!(!watched_exec(&s, &["k"], |o| {
        let _: () = q(o, &["RENAME", "src", "k"]);
    }));
    // A watch is per database: the same name in db 1 is another key.
    let mut d1 = s.client();
    let _: () = q(&mut d1, &["SELECT", "1"]);
    let _: () = q(&mut d1, &["WATCH", "k"]);
    let _: () = q(&mut c, &["SET", "k", "db0 write"]);
    let _: () = q(&mut d1, &["MULTI"]);
    assert_eq!(qv(&mut d1, &["EXEC"]), redis::Value::Array(vec![]));
    // EXEC (run or aborted) forgets the watches: the next transaction is not aborted.
    let _: () = q(&mut c, &["WATCH", "k"]);
    let _: () = q(&mut c, &["SET", "k", "own write"]); // own writes count, as in Redis
    let _: () = q(&mut c, &["MULTI"]);
    assert_eq!(qv(&mut c, &["EXEC"]), redis::Value::Nil);
    let _: () = q(&mut c, &["SET", "k", "again"]);
    let _: () = q(&mut c, &["MULTI"]);
    assert_eq!(qv(&mut c, &["EXEC"]), redis::Value::Array(vec![]));
    // UNWATCH forgets them too.
    let _: () = q(&mut c, &["WATCH", "k"]);
    let _: () = q(&mut c, &["UNWATCH"]);
    let _: () = q(&mut c, &["SET", "k", "after unwatch"]);
    let _: () = q(&mut c, &["MULTI"]);
    assert_eq!(qv(&mut c, &["EXEC"]), redis::Value::Array(vec![]));
}

#[test]
fn aborted_exec_is_a_null_array_in_both_protocols() {
    let s = TestServer::start();
    let mut other = s.client();
    for (proto, null) in [("2", "*-1\r\n"), ("3", "_\r\n")] {
        let mut r = s.raw();
        // HELLO's reply, then PING's: read up to the PING's.
        let mut req = resp_str(&["HELLO", proto]);
        req.extend_from_slice(&resp_str(&["PING", "sync"]));
        r.write_all(&req).unwrap();
        let mut got = Vec::new();
        while !got.ends_with(b"$4\r\nsync\r\n") {
            let (more, closed) = read_raw(&mut r, 1);
            assert!(
                !closed && !more.is_empty(),
                "{}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&more);
        }
        expect(&mut r, &[&["WATCH", "k"]], "+OK\r\n");
        let _: () = q(&mut other, &["SET", "k", proto]);
        expect(
            &mut r,
            &[&["MULTI"], &["SET", "k", "mine"], &["EXEC"], &["GET", "k"]],
            &format!("+OK\r\n+QUEUED\r\n{null}$1\r\n{proto}\r\n"),
        );
    }
}

#[test]
fn watch_and_expiry_follow_redis_7() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut probe = s.client();
    let gone = |probe: &mut Connection, key: &str| {
        eventually(Duration::from_secs(10), || {
            q::<i64>(probe, &["EXISTS", key]) == 0
        })
    };
    // Live when watched, expired before EXEC: aborted, though nobody wrote it.
    let _: () = q(&mut c, &["SET", "k", "v", "PX", "300"]);
    let _: () = q(&mut c, &["WATCH", "k"]);
    assert!(gone(&mut probe, "k"));
    let _: () = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["PING"]);
    assert_eq!(qv(&mut c, &["EXEC"]), redis::Value::Nil);
    // Already expired when watched: its deletion is no change, EXEC runs.
    let _: () = q(&mut c, &["SET", "old", "v", "PX", "1"]);
    assert!(gone(&mut probe, "old"));
    let _: () = q(&mut c, &["WATCH", "old"]);
    let _: i64 = q(&mut probe, &["DEL", "old"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["PING"]);
    assert_eq!(
        qv(&mut c, &["EXEC"]),
        redis::Value::Array(vec![redis::Value::SimpleString("PONG".into())])
    );
    // ... but writing it is.
    let _: () = q(&mut c, &["SET", "old2", "v", "PX", "1"]);
    assert!(gone(&mut probe, "old2"));
    let _: () = q(&mut c, &["WATCH", "old2"]);
    let _: () = q(&mut probe, &["SET", "old2", "new"]);
    let _: () = q(&mut c, &["MULTI"]);
    assert_eq!(qv(&mut c, &["EXEC"]), redis::Value::Nil);
}

#[test]
fn flush_aborts_watchers_of_existing_keys() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "here", "1"]);
    assert!(!watched_exec(&s, &["here"], |o| {
        let _: () = q(o, &["FLUSHALL"]);
    }));
    // A key that did not exist: FLUSHALL is no change for it (Redis 7.0).
    assert!(watched_exec(&s, &["absent"], |o| {
        let _: () = q(o, &["FLUSHALL"]);
    }));
    let _: () = q(&mut c, &["SET", "here", "1"]);
    assert!(!watched_exec(&s, &["here"], |o| {
        let _: () = q(o, &["FLUSHDB"]);
    }));
    // FLUSHDB of another database leaves the watch alone.
    let _: () = q(&mut c, &["SET", "here", "1"]);
    assert!(watched_exec(&s, &["here"], |o| {
        let _: () = q(o, &["SELECT", "2"]);
        let _: () = q(o, &["SET", "x", "1"]);
        let _: () = q(o, &["FLUSHDB"]);
    }));
}

#[test]
fn concurrent_transactions_never_interleave() {
    let s = TestServer::start();
    let run = |port: u16| {
        std::thread::spawn(move || {
            let mut c = kvik_testkit::connect(port);
            for _ in 0..500 {
                let (a, b): (i64, i64) = redis::pipe()
                    .atomic()
                    .cmd("INCR")
                    .arg("a")
                    .cmd("INCR")
                    .arg("b")
                    .query(&mut c)
                    .unwrap();
                assert_eq!(a, b, "another transaction ran between INCR a and INCR b");
            }
        })
    };
    let port = s.port();
    let threads = [run(port), run(port)];
    // A third client writes a key of its own meanwhile, untouched by the transactions.
    let mut c = s.client();
    for _ in 0..200 {
        let _: i64 = q(&mut c, &["INCR", "c"]);
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["GET", "a"]), 1000);
    assert_eq!(q::<i64>(&mut c, &["GET", "b"]), 1000);
    assert_eq!(q::<i64>(&mut c, &["GET", "c"]), 200);
}

#[test]
fn redis_py_transactions_work() {
    let s = TestServer::start();
    let script = r#"
import sys, redis
r = redis.Redis(port=int(sys.argv[1]), socket_timeout=20)
p = r.pipeline(transaction=True)
print(p.set('a', 1).incr('a').incrby('a', 5).get('a').execute())
p = r.pipeline(transaction=True)
p.set('t', 'x').incr('t').get('t')
print([type(x).__name__ for x in p.execute(raise_on_error=False)])
other = redis.Redis(port=int(sys.argv[1]), socket_timeout=20)
with r.pipeline() as p:
    p.watch('a')
    other.set('a', 100)
    p.multi()
    p.set('a', 0)
    try:
        p.execute()
        print('ran')
    except redis.WatchError:
        print('aborted')
def incr(pipe):
    v = int(pipe.get('a'))
    pipe.multi()
    pipe.set('a', v + 1)
print(r.transaction(incr, 'a'), r.get('a'))
"#;
    let Some(stdout) = kvik_testkit::python_stdout(script, &[&s.port().to_string()]) else {
        return;
    };
    assert_eq!(
        stdout,
        "[True, 2, 7, b'7']\n['bool', 'ResponseError', 'bytes']\naborted\n[True] b'101'\n"
    );
}

#[test]
fn an_endless_transaction_queue_gets_the_client_closed() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "client-query-buffer-limit", "1mb"],
    );
    let mut r = s.raw();
    let value = "v".repeat(100 * 1024);
    let mut req = resp_str(&["MULTI"]);
    for i in 0..20 {
        req.extend_from_slice(&resp_str(&["SET", &format!("k{i}"), &value]));
    }
    req.extend_from_slice(&resp_str(&["EXEC"]));
    let _ = r.write_all(&req);
    let (got, closed) = read_raw(&mut r, 1 << 20);
    assert!(closed, "the client must be closed");
    let text = String::from_utf8_lossy(&got);
    // (What arrived before the close may be cut short by a reset: the client is still sending.)
    assert!(!text.contains('*'), "EXEC must not have run: {text}");
    assert!(text.matches("QUEUED").count() < 20, "{text}");
    // Nothing ran, and the server is fine.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k0"]), 0);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

/// Whether this build has `command`.
fn has(c: &mut Connection, command: &str) -> bool {
    !matches!(qv(c, &["COMMAND", "INFO", command]), redis::Value::Array(v) if v == vec![redis::Value::Nil])
}

#[test]
fn watch_sees_writes_to_collections() {
    let s = TestServer::start();
    let mut c = s.client();
    // (family probe, command creating or changing the watched key "coll")
    let writes: &[(&str, &[&str])] = &[
        ("zadd", &["ZADD", "coll", "1", "m"]),
        ("hset", &["HSET", "coll", "f", "v"]),
        ("lpush", &["LPUSH", "coll", "x"]),
        ("sadd", &["SADD", "coll", "m"]),
    ];
    let mut ran = 0;
    for (probe, write) in writes {
        if !has(&mut c, probe) {
            eprintln!("skipped: no {probe} in this build");
            continue;
        }
        ran += 1;
        let _: i64 = q(&mut c, &["DEL", "coll"]);
        let _: i64 = q(&mut c, write); // the collection exists
                                       // Another member added by another client: aborted.
        assert!(
            !watched_exec(&s, &["coll"], |o| {
                let mut w: Vec<&str> = write.to_vec();
                *w.last_mut().unwrap() = "another";
                let _: redis::Value = q(o, &w);
            }),
            "{probe}"
        );
        // Untouched collection: runs; a queued collection write happens inside EXEC.
        let mut t = s.client();
        let _: () = q(&mut t, &["WATCH", "coll"]);
        let _: () = q(&mut t, &["MULTI"]);
        let mut w: Vec<&str> = write.to_vec();
        *w.last_mut().unwrap() = "in-exec";
        let _: String = q(&mut t, &w);
        let _: String = q(&mut t, &["TYPE", "coll"]);
        match qv(&mut t, &["EXEC"]) {
            redis::Value::Array(v) => assert_eq!(v.len(), 2, "{probe}"),
            other => panic!("{probe}: EXEC replied {other:?}"),
        }
        // Deleting the collection: aborted.
        assert!(
            !watched_exec(&s, &["coll"], |o| {
                let _: i64 = q(o, &["DEL", "coll"]);
            }),
            "{probe}"
        );
    }
    assert!(ran > 0, "no collection family in this build");
}

#[test]
fn blocking_commands_inside_exec_do_not_block() {
    let s = TestServer::start();
    let mut c = s.client();
    if !has(&mut c, "blpop") {
        eprintln!("skipped: no blpop in this build");
        return;
    }
    let _: () = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["BLPOP", "empty", "0"]);
    let _: String = q(&mut c, &["RPUSH", "l", "a"]);
    let _: String = q(&mut c, &["BLPOP", "l", "0"]);
    let v = qv(&mut c, &["EXEC"]);
    assert_eq!(
        v,
        redis::Value::Array(vec![
            redis::Value::Nil,
            redis::Value::Int(1),
            redis::Value::Array(vec![
                redis::Value::BulkString(b"l".to_vec()),
                redis::Value::BulkString(b"a".to_vec())
            ]),
        ])
    );
}

#[test]
fn cache_hits_inside_multi_are_queued_not_answered() {
    let s = TestServer::start_with(&["--rtc-read", "yes", "--cache-enabled", "yes"]);
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    for _ in 0..3 {
        let _: String = q(&mut c, &["GET", "k"]); // the cache holds k now
    }
    let rtc = |c: &mut Connection| rtc_commands(c);
    let before = rtc(&mut c);
    assert!(before > 0, "GET of a cached key runs on the I/O thread");
    let mut r = s.raw();
    expect(
        &mut r,
        &[
            &["MULTI"],
            &["GET", "k"],
            &["EXISTS", "k"],
            &["TTL", "k"],
            &["EXEC"],
        ],
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n$1\r\nv\r\n:1\r\n:-1\r\n",
    );
    // The one GET below may itself be answered on the I/O thread; the queued ones were not.
    let _: String = q(&mut c, &["GET", "k"]);
    assert!(rtc(&mut c) <= before + 1);
}

/// No reader sees half a transaction or half an MSET: while writers move keys `a` and `b`
/// forward together (EXEC with SET a; SET b, and MSET), readers (MGET a b, answered from the
/// cache on the I/O thread; and GET a then GET b) never see `b` behind `a`. Bounded in time.
#[test]
fn readers_never_see_half_a_transaction_or_half_an_mset() {
    readers_see_whole_writes(&TestServer::start());
}

/// The same with a hot cache too small to hold an entry: every read misses it and is run by its
/// worker handler on the I/O thread against RocksDB (`rtc_storage`), checking its keys' write
/// epochs instead of taking their locks.
#[test]
fn storage_reads_on_io_threads_never_see_half_a_write() {
    let s = TestServer::start_with(&["--cache-maxmemory", "1kb"]);
    readers_see_whole_writes(&s);
    let mut c = s.client();
    let stats: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    let field = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(field("cache_hits"), 0, "the reads must miss the hot cache");
    assert!(field("rtc_commands") > 100, "{stats}");
}

/// The same with every command run by a worker (`rtc-read no`, `rtc-write no`): the reads run
/// there without their keys' locks (`pool-reads-unlocked`), checked against writes as the I/O
/// threads check theirs, and again under the locks when a write overlapped.
#[test]
fn unlocked_reads_on_workers_never_see_half_a_write() {
    let s = TestServer::start_with(&["--rtc-read", "no", "--rtc-write", "no"]);
    readers_see_whole_writes(&s);
    let mut c = s.client();
    let unlocked = stat(&mut c, "pool_unlocked_reads");
    assert!(unlocked > 100, "{unlocked} reads ran without locks");
    let retried = stat(&mut c, "pool_read_retries");
    eprintln!("{unlocked} reads ran without locks, {retried} ran again under them");
}

fn readers_see_whole_writes(s: &TestServer) {
    let mut setup = s.client();
    let _: () = redis::cmd("MSET")
        .arg("a")
        .arg(0)
        .arg("b")
        .arg(0)
        .query(&mut setup)
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let writer = {
        let mut c = s.client();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                if i.is_multiple_of(2) {
                    let _: () = redis::pipe()
                        .atomic()
                        .cmd("SET")
                        .arg("a")
                        .arg(i)
                        .ignore()
                        .cmd("SET")
                        .arg("b")
                        .arg(i)
                        .ignore()
                        .query(&mut c)
                        .unwrap();
                } else {
                    let _: () = redis::cmd("MSET")
                        .arg("a")
                        .arg(i)
                        .arg("b")
                        .arg(i)
                        .query(&mut c)
                        .unwrap();
                }
            }
            i
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut c = s.client();
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while std::time::Instant::now() < deadline {
                    let (a, b): (u64, u64) =
                        redis::cmd("MGET").arg("a").arg("b").query(&mut c).unwrap();
                    assert_eq!(a, b, "MGET saw half a write");
                    let a: u64 = redis::cmd("GET").arg("a").query(&mut c).unwrap();
                    let b: u64 = redis::cmd("GET").arg("b").query(&mut c).unwrap();
                    assert!(
                        b >= a,
                        "GET b ({b}) behind an earlier GET a ({a}): half a transaction"
                    );
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(
        reads > 100 && writes > 100,
        "too little overlap: {reads} reads, {writes} writes"
    );
}

/// The commands of one EXEC read what the earlier ones wrote, in every family (a transaction is
/// buffered as one batch; its reads see the buffer), and a FLUSHDB or SWAPDB in the middle acts
/// where it stands.
#[test]
fn commands_inside_exec_read_the_writes_before_them() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "before", "x"]);
    let v: Vec<redis::Value> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("s")
        .arg("1")
        .cmd("INCRBY")
        .arg("s")
        .arg(4)
        .cmd("HSET")
        .arg("h")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .cmd("HDEL")
        .arg("h")
        .arg("a")
        .cmd("HGETALL")
        .arg("h")
        .cmd("RPUSH")
        .arg("l")
        .arg("x")
        .arg("y")
        .arg("z")
        .cmd("LRANGE")
        .arg("l")
        .arg(0)
        .arg(-1)
        .cmd("ZADD")
        .arg("z")
        .arg(2)
        .arg("b")
        .arg(1)
        .arg("a")
        .cmd("ZRANGE")
        .arg("z")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .cmd("SADD")
        .arg("st")
        .arg("m")
        .cmd("SMEMBERS")
        .arg("st")
        .cmd("XADD")
        .arg("x")
        .arg("1-1")
        .arg("f")
        .arg("v")
        .cmd("XRANGE")
        .arg("x")
        .arg("-")
        .arg("+")
        .cmd("KEYS")
        .arg("*")
        .cmd("DBSIZE")
        .cmd("DEL")
        .arg("st")
        .cmd("EXISTS")
        .arg("st")
        .cmd("FLUSHDB")
        .cmd("SET")
        .arg("after")
        .arg("y")
        .cmd("DBSIZE")
        .cmd("GET")
        .arg("s")
        .query(&mut c)
        .unwrap();
    let text: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
    assert_eq!(text[1], "int(5)");
    assert!(
        text[4].contains("\"b\"") && !text[4].contains("\"a\""),
        "{}",
        text[4]
    );
    assert!(
        text[6].contains("\"x\"") && text[6].contains("\"z\""),
        "{}",
        text[6]
    );
    assert!(text[8].find("\"a\"") < text[8].find("\"b\""), "{}", text[8]);
    assert!(text[10].contains("\"m\""), "{}", text[10]);
    assert!(text[12].contains("1-1"), "{}", text[12]);
    for key in ["before", "s", "h", "l", "z", "st", "x"] {
        assert!(
            text[13].contains(&format!("\"{key}\"")),
            "KEYS misses {key}: {}",
            text[13]
        );
    }
    assert_eq!(text[14], "int(7)");
    assert_eq!(text[16], "int(0)");
    assert_eq!(text[19], "int(1)", "DBSIZE after FLUSHDB and one SET");
    assert_eq!(text[20], "nil");
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 1);
    let after: String = q(&mut c, &["GET", "after"]);
    assert_eq!(after, "y");
}

/// WATCH of many names, each given twice and across two calls: each key is watched once (past a
/// handful, repeats are found by hashing), and a write of any of them aborts the EXEC.
#[test]
fn watch_of_repeated_keys_watches_each_once() {
    let s = TestServer::start();
    let mut c = s.client();
    let names: Vec<String> = (0..400).map(|i| format!("w{}", i % 200)).collect();
    let mut watch = vec!["WATCH"];
    watch.extend(names.iter().map(String::as_str));
    let _: () = q(&mut c, &watch);
    let _: () = q(&mut c, &watch[..101]);
    let info: String = q(&mut c, &["CLIENT", "INFO"]);
    assert!(info.contains(" watch=200 "), "{info}");
    let mut other = s.client();
    let _: () = q(&mut other, &["SET", "w199", "x"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["SET", "after", "1"]);
    let exec: redis::Value = q(&mut c, &["EXEC"]);
    assert_eq!(exec, redis::Value::Nil, "a watched key changed");
}
