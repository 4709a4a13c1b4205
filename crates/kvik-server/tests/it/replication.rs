//! Integration tests: replication between real kvik-server processes on loopback.
//!
//! A replica must converge to its primary's dataset exactly (compared type by type through
//! SCAN, TYPE and each type's reads, never DUMP), stay consistent in its hot cache while it
//! applies, resume after a restart without a full sync, take exactly one full sync when it fell
//! out of the primary's WAL retention, and, after a promotion, make the old primary drop its
//! diverged writes, and resume a full sync whose transfer was cut. Every wait is bounded.

use crate::common::{err, info, q, stat, Endpoint, TestServer};
use redis::{Connection, Value};
use std::collections::BTreeMap;
use std::time::Duration;

pub(crate) const CONVERGE: Duration = Duration::from_secs(60);

pub(crate) fn field(con: &mut Connection, name: &str) -> String {
    info(con, "replication")
        .get("Replication")
        .and_then(|s| s.get(name).cloned())
        .unwrap_or_default()
}

fn offset(con: &mut Connection) -> u64 {
    field(con, "master_repl_offset").parse().unwrap()
}

pub(crate) fn start_replica_of(primary: &TestServer, extra: &[&str]) -> TestServer {
    let target = format!("127.0.0.1 {}", primary.port);
    let mut args = vec!["--replicaof", target.as_str()];
    args.extend_from_slice(extra);
    TestServer::start_with(&args)
}

/// Waits until the replica's link is up and it applied everything the primary wrote.
fn caught_up(primary: &mut Connection, replica: &mut Connection) -> bool {
    kvik_testkit::eventually(CONVERGE, || {
        field(replica, "master_link_status") == "up" && offset(replica) >= offset(primary)
    })
}

/// Database 0 as a sorted map: key -> (type, a rendering of its value, whether it has a TTL).
/// Read through `con` (a replica in cluster mode needs READONLY on it). Shared by the cluster
/// replica tests.
pub(crate) fn dataset(con: &mut Connection) -> BTreeMap<String, (String, String, bool)> {
    let mut keys = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, batch): (String, Vec<String>) = q(con, &["SCAN", &cursor, "COUNT", "500"]);
        keys.extend(batch);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    let mut out = BTreeMap::new();
    for k in keys {
        let t: String = q(con, &["TYPE", &k]);
        let v = match t.as_str() {
            "string" => format!("{:?}", q::<Option<Vec<u8>>>(con, &["GET", &k])),
            "hash" => format!("{:?}", q::<BTreeMap<String, String>>(con, &["HGETALL", &k])),
            "list" => format!("{:?}", q::<Vec<String>>(con, &["LRANGE", &k, "0", "-1"])),
            "set" => {
                let mut m: Vec<String> = q(con, &["SMEMBERS", &k]);
                m.sort();
                format!("{m:?}")
            }
            "zset" => format!(
                "{:?}",
                q::<Vec<String>>(con, &["ZRANGE", &k, "0", "-1", "WITHSCORES"])
            ),
            "stream" => format!("{:?}", q::<Value>(con, &["XRANGE", &k, "-", "+"])),
            "none" => continue, // expired or deleted between SCAN and TYPE
            other => panic!("unexpected type {other}"),
        };
        let ttl: i64 = q(con, &["PTTL", &k]);
        out.insert(k, (t, v, ttl >= 0));
    }
    out
}

/// INFO keyspace's db0 line as (keys, expires, avg_ttl).
fn keyspace(con: &mut Connection) -> (u64, u64, u64) {
    let ks = info(con, "keyspace");
    let Some(line) = ks.get("Keyspace").and_then(|s| s.get("db0")) else {
        return (0, 0, 0);
    };
    let field = |name: &str| -> u64 {
        let at = line.find(&format!("{name}=")).unwrap() + name.len() + 1;
        line[at..].split(',').next().unwrap().parse().unwrap()
    };
    (field("keys"), field("expires"), field("avg_ttl"))
}

/// Waits until both datasets and key counts are equal (the primary's active expiry may still
/// be deleting: a key expired on both sides is in neither dataset but counts until its DEL
/// reached the replica), and INFO keyspace agrees (avg_ttl within the time between the reads).
fn converged(primary: &mut Connection, replica: &mut Connection) {
    let mut last = None;
    let same = kvik_testkit::eventually(CONVERGE, || {
        let (p, r) = (dataset(primary), dataset(replica));
        let counts: (u64, u64) = (q(primary, &["DBSIZE"]), q(replica, &["DBSIZE"]));
        let (pk, rk) = (keyspace(primary), keyspace(replica));
        let same = p == r
            && counts.0 == counts.1
            && (pk.0, pk.1) == (rk.0, rk.1)
            && pk.2.abs_diff(rk.2) <= 2_000;
        last = Some((p, r));
        same
    });
    if !same {
        let (p, r) = last.unwrap();
        let diff: Vec<_> = p
            .iter()
            .filter(|(k, v)| r.get(*k) != Some(*v))
            .take(5)
            .collect();
        let extra: Vec<_> = r.keys().filter(|k| !p.contains_key(*k)).take(5).collect();
        panic!(
            "replica did not converge: {} vs {} keys; differing {diff:?}; only on replica {extra:?}",
            p.len(),
            r.len()
        );
    }
    let (pn, rn): (u64, u64) = (q(primary, &["DBSIZE"]), q(replica, &["DBSIZE"]));
    assert_eq!(pn, rn, "DBSIZE");
}

/// A pipelined mixed write load over every type, with some short expiries and deletions.
fn mixed_load(con: &mut Connection, round: usize) {
    let mut p = redis::pipe();
    for i in 0..200 {
        let k = i % 50;
        let n = round * 1000 + i;
        p.cmd("SET")
            .arg(format!("s{k}"))
            .arg(format!("v{n}"))
            .ignore();
        p.cmd("INCR").arg(format!("c{}", k % 7)).ignore();
        p.cmd("HSET")
            .arg(format!("h{}", k % 9))
            .arg(format!("f{}", i % 13))
            .arg(n)
            .ignore();
        p.cmd("RPUSH").arg(format!("l{}", k % 5)).arg(n).ignore();
        if i % 3 == 0 {
            p.cmd("LPOP").arg(format!("l{}", k % 5)).ignore();
        }
        p.cmd("SADD")
            .arg(format!("set{}", k % 6))
            .arg(i % 40)
            .ignore();
        if i % 4 == 0 {
            p.cmd("SREM")
                .arg(format!("set{}", k % 6))
                .arg((i + 1) % 40)
                .ignore();
        }
        p.cmd("ZADD")
            .arg(format!("z{}", k % 4))
            .arg(n as f64 / 3.0)
            .arg(format!("m{}", i % 30))
            .ignore();
        p.cmd("XADD")
            .arg(format!("x{}", k % 3))
            .arg("*")
            .arg("n")
            .arg(n)
            .ignore();
        if i % 10 == 0 {
            p.cmd("SET")
                .arg(format!("short{i}"))
                .arg(n)
                .arg("PX")
                .arg(50)
                .ignore();
            p.cmd("EXPIRE")
                .arg(format!("h{}", k % 9))
                .arg(1000)
                .ignore();
            p.cmd("DEL").arg(format!("set{}", (k + 1) % 6)).ignore();
        }
        if i % 25 == 0 {
            p.cmd("PFADD").arg("hll").arg(n).ignore();
            p.cmd("SETBIT").arg("bits").arg(n % 1000).arg(1).ignore();
        }
    }
    p.query::<()>(con).unwrap();
}

#[test]
fn replica_converges_under_a_mixed_load_and_its_cache_never_goes_stale() {
    let primary = TestServer::start();
    let replica = start_replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.client(), replica.client());
    for round in 0..10 {
        mixed_load(&mut p, round);
        // Read on the replica while it applies: fills its hot cache with what may change next.
        for k in 0..50 {
            let _: Option<String> = q(&mut r, &["GET", &format!("s{k}")]);
            let _: Option<String> = q(&mut r, &["HGET", &format!("h{}", k % 9), "f1"]);
        }
    }
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    // Cached strings on the replica follow later writes (the cache is dropped per key applied).
    for k in 0..50 {
        let _: Option<String> = q(&mut r, &["GET", &format!("s{k}")]);
    }
    for k in 0..50 {
        let _: () = q(&mut p, &["SET", &format!("s{k}"), &format!("final{k}")]);
    }
    assert!(caught_up(&mut p, &mut r));
    for k in 0..50 {
        let v: String = q(&mut r, &["GET", &format!("s{k}")]);
        assert_eq!(v, format!("final{k}"));
    }
    converged(&mut p, &mut r);
}

#[test]
fn expiry_flushall_and_transactions_replicate() {
    let primary = TestServer::start();
    let replica = start_replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.client(), replica.client());
    let _: () = q(&mut p, &["SET", "keep", "1"]);
    for i in 0..20 {
        let _: () = q(&mut p, &["SET", &format!("gone{i}"), "x", "PX", "100"]);
    }
    assert!(caught_up(&mut p, &mut r));
    // The primary's active expiry deletes them; the replica applies the deletions.
    assert!(kvik_testkit::eventually(CONVERGE, || q::<u64>(
        &mut r,
        &["DBSIZE"]
    ) == 1));
    assert_eq!(q::<Option<String>>(&mut r, &["GET", "gone3"]), None);

    // FLUSHALL: the replica's data and its cache go.
    let _: () = q(&mut p, &["SET", "cached", "v"]);
    assert!(caught_up(&mut p, &mut r));
    assert_eq!(q::<String>(&mut r, &["GET", "cached"]), "v");
    let _: () = q(&mut p, &["FLUSHALL"]);
    assert!(caught_up(&mut p, &mut r));
    assert_eq!(q::<Option<String>>(&mut r, &["GET", "cached"]), None);
    assert_eq!(q::<u64>(&mut r, &["DBSIZE"]), 0);

    // MULTI/EXEC appears whole: a and b are always set together, so a reader of `MGET a b`
    // (a read first) can never see a newer than b.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        let mut r2 = replica.client();
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (a, b): (Option<i64>, Option<i64>) = q(&mut r2, &["MGET", "a", "b"]);
                if let (Some(a), Some(b)) = (a, b) {
                    assert!(a <= b, "saw a={a} b={b}: a transaction applied in part");
                }
                reads += 1;
            }
            reads
        })
    };
    for i in 0..2000 {
        let n = i.to_string();
        let _: Vec<String> = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("a")
            .arg(&n)
            .cmd("SET")
            .arg("b")
            .arg(&n)
            .query(&mut p)
            .unwrap();
    }
    assert!(caught_up(&mut p, &mut r));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let (a, b): (i64, i64) = q(&mut r, &["MGET", "a", "b"]);
    assert_eq!((a, b), (1999, 1999));
}

#[test]
fn replica_is_read_only_and_role_info_and_wait_have_redis_shapes() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let (mut p, mut r) = (primary.client(), replica.client());
    let port = primary.port.to_string();
    let _: () = q(&mut r, &["REPLICAOF", "127.0.0.1", &port]);
    let _: () = q(&mut p, &["SET", "k", "v"]);
    assert!(caught_up(&mut p, &mut r));
    assert_eq!(q::<String>(&mut r, &["GET", "k"]), "v");

    // Writes are refused with Redis's error, via redis-cli too; a MULTI with a write aborts.
    assert_eq!(
        err(&mut r, &["SET", "k", "w"]),
        "READONLY You can't write against a read only replica."
    );
    let cli = kvik_testkit::redis_cli(replica.port, &["SET", "k", "w"]);
    assert!(
        cli.contains("READONLY You can't write against a read only replica."),
        "{cli}"
    );
    let _: () = q(&mut r, &["MULTI"]);
    let _ = err(&mut r, &["INCR", "n"]);
    assert!(err(&mut r, &["EXEC"]).starts_with("EXECABORT"));
    assert_eq!(q::<String>(&mut r, &["GET", "k"]), "v");
    let script = err(
        &mut r,
        &["EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "k"],
    );
    assert!(
        script.contains("READONLY You can't write against a read only replica."),
        "{script}"
    );
    assert_eq!(
        q::<String>(
            &mut r,
            &["EVAL", "return redis.call('GET', KEYS[1])", "1", "k"]
        ),
        "v"
    );

    // WAIT on the primary: the replica acknowledges.
    let _: () = q(&mut p, &["SET", "k2", "v2"]);
    assert_eq!(q::<i64>(&mut p, &["WAIT", "1", "5000"]), 1);
    assert!(err(&mut r, &["WAIT", "1", "10"]).starts_with("ERR WAIT cannot be used with replica"));

    // ROLE, both sides.
    let role: Vec<Value> = q(&mut p, &["ROLE"]);
    assert_eq!(role[0], Value::BulkString(b"master".to_vec()));
    assert!(matches!(role[1], Value::Int(n) if n > 0));
    let Value::Array(replicas) = &role[2] else {
        panic!("{role:?}")
    };
    assert_eq!(replicas.len(), 1);
    let Value::Array(entry) = &replicas[0] else {
        panic!("{replicas:?}")
    };
    assert_eq!(entry[0], Value::BulkString(b"127.0.0.1".to_vec()));
    assert_eq!(
        entry[1],
        Value::BulkString(replica.port.to_string().into_bytes())
    );
    let role: Vec<Value> = q(&mut r, &["ROLE"]);
    assert_eq!(role[0], Value::BulkString(b"slave".to_vec()));
    assert_eq!(role[1], Value::BulkString(b"127.0.0.1".to_vec()));
    assert_eq!(role[2], Value::Int(primary.port as i64));
    assert_eq!(role[3], Value::BulkString(b"connected".to_vec()));
    assert!(matches!(role[4], Value::Int(n) if n > 0));

    // INFO replication, both sides.
    let pi = info(&mut p, "replication")["Replication"].clone();
    assert_eq!(pi["role"], "master");
    assert_eq!(pi["connected_slaves"], "1");
    let slave0 = &pi["slave0"];
    assert!(
        slave0.starts_with(&format!(
            "ip=127.0.0.1,port={},state=online,offset=",
            replica.port
        )),
        "{slave0}"
    );
    assert!(slave0.contains(",lag="), "{slave0}");
    assert_eq!(pi["master_replid"].len(), 40);
    assert_eq!(pi["second_repl_offset"], "-1");
    for f in [
        "master_replid2",
        "master_repl_offset",
        "repl_backlog_active",
        "repl_backlog_size",
        "repl_backlog_first_byte_offset",
        "repl_backlog_histlen",
    ] {
        assert!(pi.contains_key(f), "{f} missing from {pi:?}");
    }
    let ri = info(&mut r, "replication")["Replication"].clone();
    assert_eq!(ri["role"], "slave");
    assert_eq!(ri["master_host"], "127.0.0.1");
    assert_eq!(ri["master_port"], port);
    assert_eq!(ri["master_link_status"], "up");
    assert_eq!(ri["master_sync_in_progress"], "0");
    assert_eq!(ri["master_replid"], pi["master_replid"]);
    assert_eq!(ri["slave_read_only"], "1");
    assert!(ri["master_last_io_seconds_ago"].parse::<i64>().unwrap() >= 0);
    assert_eq!(ri["connected_slaves"], "0");
}

#[test]
fn a_restarted_replica_resumes_without_a_full_sync() {
    let primary = TestServer::start();
    let mut replica = start_replica_of(&primary, &[]);
    let mut p = primary.client();
    mixed_load(&mut p, 0);
    let mut r = replica.client();
    assert!(caught_up(&mut p, &mut r));
    assert_eq!(stat(&mut p, "sync_full"), 1);
    drop(r);
    replica.terminate();
    mixed_load(&mut p, 1);
    replica.restart();
    let mut r = replica.client();
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    assert_eq!(stat(&mut p, "sync_full"), 1, "the restart made a full sync");
    assert_eq!(stat(&mut p, "sync_partial_ok"), 1);
    // A kill -9 too: the position is in the same writes as the data.
    drop(r);
    replica.kill9();
    mixed_load(&mut p, 2);
    replica.restart();
    let mut r = replica.client();
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    assert_eq!(stat(&mut p, "sync_full"), 1);
    assert_eq!(stat(&mut p, "sync_partial_ok"), 2);
}

#[test]
fn a_replica_behind_the_wal_retention_does_exactly_one_full_sync() {
    let primary = TestServer::start_with(&["--repl-wal-ttl", "1", "--repl-wal-size-limit", "0"]);
    let mut replica = start_replica_of(&primary, &[]);
    let mut p = primary.client();
    mixed_load(&mut p, 0);
    let mut r = replica.client();
    assert!(caught_up(&mut p, &mut r));
    assert_eq!(stat(&mut p, "sync_full"), 1);
    drop(r);
    replica.terminate();
    // Each FLUSHALL's compaction flushes the memtables, so the WAL files before it become
    // obsolete, are archived, and are deleted once older than the 1 s TTL.
    for round in 1..4 {
        mixed_load(&mut p, round);
        let _: () = q(&mut p, &["FLUSHALL"]);
        std::thread::sleep(Duration::from_millis(1500));
    }
    mixed_load(&mut p, 9);
    replica.restart();
    let mut r = replica.client();
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    assert_eq!(stat(&mut p, "sync_full"), 2, "one more full sync");
    // And it then follows: more writes, no more full syncs.
    mixed_load(&mut p, 10);
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    assert_eq!(stat(&mut p, "sync_full"), 2, "a full-sync loop");
}

#[test]
fn promotion_makes_a_new_history_and_the_old_primary_drops_its_diverged_writes() {
    let old = TestServer::start();
    let new = start_replica_of(&old, &[]);
    let (mut o, mut n) = (old.client(), new.client());
    let _: () = q(&mut o, &["SET", "before", "1"]);
    assert!(caught_up(&mut o, &mut n));
    let old_id = field(&mut o, "master_replid");
    let old_offset = offset(&mut o);

    let _: () = q(&mut n, &["REPLICAOF", "NO", "ONE"]);
    let ni = info(&mut n, "replication")["Replication"].clone();
    assert_eq!(ni["role"], "master");
    assert_ne!(ni["master_replid"], old_id);
    assert_eq!(ni["master_replid2"], old_id);
    assert_eq!(ni["second_repl_offset"], (old_offset + 1).to_string());
    let _: () = q(&mut n, &["SET", "after", "2"]);

    // The old primary took a write the new one never saw, then follows the new one.
    let _: () = q(&mut o, &["SET", "diverged", "x"]);
    let port = new.port.to_string();
    let _: () = q(&mut o, &["REPLICAOF", "127.0.0.1", &port]);
    assert!(caught_up(&mut n, &mut o));
    converged(&mut n, &mut o);
    assert_eq!(q::<Option<String>>(&mut o, &["GET", "diverged"]), None);
    assert_eq!(q::<String>(&mut o, &["GET", "after"]), "2");
    assert_eq!(q::<String>(&mut o, &["GET", "before"]), "1");
    assert_eq!(stat(&mut n, "sync_full"), 1);
    assert_eq!(stat(&mut n, "sync_partial_err"), 1);
}

#[test]
fn the_old_primary_continues_without_a_full_sync_when_it_did_not_diverge() {
    let old = TestServer::start();
    let new = start_replica_of(&old, &[]);
    let (mut o, mut n) = (old.client(), new.client());
    mixed_load(&mut o, 0);
    assert!(caught_up(&mut o, &mut n));
    // No write reaches the old primary after this point (its timer's own writes included:
    // the counts are folded and nothing expires).
    std::thread::sleep(Duration::from_millis(1500));
    assert!(caught_up(&mut o, &mut n));
    let _: () = q(&mut n, &["REPLICAOF", "NO", "ONE"]);
    let port = new.port.to_string();
    let _: () = q(&mut o, &["REPLICAOF", "127.0.0.1", &port]);
    let _: () = q(&mut n, &["SET", "after", "2"]);
    assert!(caught_up(&mut n, &mut o));
    converged(&mut n, &mut o);
    assert_eq!(stat(&mut n, "sync_full"), 0);
    assert_eq!(stat(&mut n, "sync_partial_ok"), 1);
}

#[test]
fn a_replica_authenticates_with_masterauth() {
    let primary = TestServer::start_with(&["--requirepass", "s3cret"]);
    let replica = start_replica_of(&primary, &["--masterauth", "s3cret"]);
    let stranger = start_replica_of(&primary, &["--masterauth", "wrong"]);
    let mut p = primary.client();
    let _: () = q(&mut p, &["AUTH", "s3cret"]);
    let _: () = q(&mut p, &["SET", "k", "v"]);
    let mut r = replica.client();
    assert!(caught_up(&mut p, &mut r));
    assert_eq!(q::<String>(&mut r, &["GET", "k"]), "v");
    let mut s = stranger.client();
    assert_eq!(field(&mut s, "master_link_status"), "down");
    assert_eq!(q::<Option<String>>(&mut s, &["GET", "k"]), None);
}

#[test]
fn failover_swaps_roles_without_a_full_sync() {
    let a = TestServer::start();
    let b = start_replica_of(&a, &[]);
    let lone = TestServer::start();
    let (mut ca, mut cb) = (a.client(), b.client());
    assert_eq!(
        err(&mut lone.client(), &["FAILOVER"]),
        "ERR FAILOVER requires connected replicas."
    );
    assert_eq!(
        err(&mut cb, &["FAILOVER"]),
        "ERR FAILOVER is not valid when server is a replica."
    );
    assert_eq!(
        err(&mut ca, &["FAILOVER", "ABORT"]),
        "ERR No failover in progress."
    );
    mixed_load(&mut ca, 0);
    assert!(caught_up(&mut ca, &mut cb));
    let _: () = q(&mut ca, &["FAILOVER", "TIMEOUT", "20000"]);
    assert!(kvik_testkit::eventually(CONVERGE, || {
        field(&mut ca, "role") == "slave"
            && field(&mut ca, "master_link_status") == "up"
            && field(&mut cb, "role") == "master"
    }));
    assert_eq!(field(&mut ca, "master_failover_state"), "no-failover");
    assert_eq!(
        err(&mut ca, &["SET", "k", "v"]),
        "READONLY You can't write against a read only replica."
    );
    let _: () = q(&mut cb, &["SET", "k", "v"]);
    assert!(caught_up(&mut cb, &mut ca));
    converged(&mut cb, &mut ca);
    assert_eq!(stat(&mut cb, "sync_full"), 0, "the old primary continued");
    assert_eq!(stat(&mut cb, "sync_partial_ok"), 1);
}

#[test]
fn redis_py_sees_a_replica_as_redis_shows_one() {
    let primary = TestServer::start();
    let replica = start_replica_of(&primary, &[]);
    let mut p = primary.client();
    let _: () = q(&mut p, &["SET", "k", "v"]);
    assert!(caught_up(&mut p, &mut replica.client()));
    let script = r#"
import sys, redis
r = redis.Redis(port=int(sys.argv[1]), socket_timeout=20)
role = r.role()
print(role[0], role[3])
info = r.info("replication")
print(info["role"], info["master_link_status"], info["connected_slaves"])
try:
    r.set("k", "w")
except redis.exceptions.ReadOnlyError as e:
    print("ReadOnlyError", e)
print(r.get("k"))
"#;
    let Some(out) = kvik_testkit::python_stdout(script, &[&replica.port.to_string()]) else {
        return;
    };
    assert_eq!(
        out,
        "b'slave' b'connected'\nslave up 0\nReadOnlyError You can't write against a read only replica.\nb'v'\n"
    );
}

#[test]
fn writes_acknowledged_by_wait_survive_the_primary_being_killed() {
    let mut primary = TestServer::start();
    let replica = start_replica_of(&primary, &[]);
    let mut r = replica.client();
    assert!(caught_up(&mut primary.client(), &mut r));
    // A writer: SETs, and every 20 a WAIT 1; what it saw acknowledged by the replica counts.
    let mut p = primary.client();
    let writer = std::thread::spawn(move || {
        let mut confirmed = 0;
        for i in 0.. {
            let set = redis::cmd("SET")
                .arg(format!("w{i}"))
                .arg(i)
                .query::<()>(&mut p);
            if set.is_err() {
                break;
            }
            if i % 20 == 19 {
                match redis::cmd("WAIT").arg(1).arg(5000).query::<i64>(&mut p) {
                    Ok(1) => confirmed = i + 1,
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        confirmed
    });
    std::thread::sleep(Duration::from_millis(800));
    primary.kill9();
    let confirmed = writer.join().unwrap();
    assert!(confirmed > 0, "no WAIT succeeded before the kill");
    let _: () = q(&mut r, &["REPLICAOF", "NO", "ONE"]);
    for i in 0..confirmed {
        let v: Option<String> = q(&mut r, &["GET", &format!("w{i}")]);
        assert_eq!(v, Some(i.to_string()), "w{i} was acknowledged by WAIT 1");
    }
    let _: () = q(&mut r, &["SET", "writable", "yes"]);
}

/// Writes `n` keys of 4 KB values that do not compress (a checkpoint of about `n` * 4 KB).
fn incompressible(con: &mut Connection, n: usize) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for start in (0..n).step_by(100) {
        let mut p = redis::pipe();
        for i in start..(start + 100).min(n) {
            let v: Vec<u8> = (0..4096)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            p.cmd("SET").arg(format!("big{i}")).arg(v).ignore();
        }
        let _: () = p.query(con).unwrap();
    }
}

fn repl_num(con: &mut Connection, name: &str) -> u64 {
    field(con, name).parse().unwrap_or(0)
}

/// Starts a replica of `primary` (which sends full syncs slowly), waits until its transfer is
/// underway, checks both sides show it, and cuts the link with CLIENT KILL TYPE replica.
/// Returns the replica and the checkpoint's size.
fn cut_a_full_sync(primary: &TestServer) -> (TestServer, u64) {
    let mut p = primary.client();
    incompressible(&mut p, 1000);
    let replica = start_replica_of(primary, &[]);
    let mut r = replica.client();
    assert!(kvik_testkit::eventually(CONVERGE, || repl_num(
        &mut r,
        "master_sync_read_bytes"
    ) > 0));
    let total = repl_num(&mut r, "master_sync_total_bytes");
    assert!(total > 1 << 20, "checkpoint of {total} bytes");
    assert_eq!(field(&mut r, "master_sync_in_progress"), "1");
    assert!(repl_num(&mut r, "master_sync_left_bytes") > 0);
    assert!(!field(&mut r, "master_sync_perc").is_empty());
    assert!(field(&mut p, "slave0").contains("state=send_bulk"));
    let killed: i64 = q(&mut p, &["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, 1);
    // The rest at full speed (the limit applies to a transfer already running too).
    let _: () = q(
        &mut p,
        &["CONFIG", "SET", "repl-fullsync-max-bytes-per-sec", "0"],
    );
    (replica, total)
}

#[test]
fn a_cut_full_sync_resumes_from_the_bytes_the_replica_holds() {
    let primary = TestServer::start_with(&["--repl-fullsync-max-bytes-per-sec", "256kb"]);
    let (replica, total) = cut_a_full_sync(&primary);
    let (mut p, mut r) = (primary.client(), replica.client());
    mixed_load(&mut p, 0);
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    assert!(repl_num(&mut p, "kvik_fullsync_throttled_waits") > 0);
    assert_eq!(repl_num(&mut p, "kvik_fullsync_resumes_served"), 1);
    let skipped = repl_num(&mut p, "kvik_fullsync_skipped_bytes");
    assert!(
        skipped > 0 && skipped < total,
        "skipped {skipped} of {total}"
    );
    assert_eq!(repl_num(&mut r, "kvik_fullsync_resumes"), 1);
    // The resumed transfer sent the rest only: the replica received each byte once.
    assert_eq!(repl_num(&mut r, "kvik_fullsync_received_bytes"), total);
    assert_eq!(repl_num(&mut p, "kvik_fullsync_checkpoints_kept"), 0);
    assert!(field(&mut p, "slave0").contains("state=online"));
}

#[test]
fn a_cut_full_sync_without_a_kept_checkpoint_starts_again() {
    let primary = TestServer::start_with(&[
        "--repl-fullsync-max-bytes-per-sec",
        "256kb",
        "--repl-fullsync-resume-ttl",
        "0",
    ]);
    let (replica, total) = cut_a_full_sync(&primary);
    let (mut p, mut r) = (primary.client(), replica.client());
    mixed_load(&mut p, 0);
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    assert_eq!(repl_num(&mut p, "kvik_fullsync_resumes_served"), 0);
    assert_eq!(repl_num(&mut r, "kvik_fullsync_resumes"), 0);
    assert!(repl_num(&mut r, "kvik_fullsync_received_bytes") > total);
    assert_eq!(stat(&mut p, "sync_full"), 2);
}

#[test]
fn replicas_are_fed_from_the_backlog_and_from_the_wal_without_it() {
    let primary = TestServer::start();
    let replica = start_replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.client(), replica.client());
    assert!(caught_up(&mut p, &mut r));
    mixed_load(&mut p, 0);
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    let served = repl_num(&mut p, "kvik_repl_backlog_batches_served");
    assert!(served > 0, "nothing was fed from the backlog");
    // Off: every batch comes from the WAL file.
    let _: () = q(&mut p, &["CONFIG", "SET", "repl-backlog-size", "0"]);
    assert_eq!(repl_num(&mut p, "kvik_repl_backlog_bytes"), 0);
    let reads = repl_num(&mut p, "kvik_repl_wal_reads");
    mixed_load(&mut p, 1);
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    assert!(repl_num(&mut p, "kvik_repl_wal_reads") > reads);
    assert_eq!(repl_num(&mut p, "kvik_repl_backlog_batches_served"), served);
    // On again: the feeder leaves the WAL for the backlog once it reaches it.
    let _: () = q(&mut p, &["CONFIG", "SET", "repl-backlog-size", "1mb"]);
    let mut round = 2;
    assert!(kvik_testkit::eventually(CONVERGE, || {
        mixed_load(&mut p, round);
        round += 1;
        repl_num(&mut p, "kvik_repl_backlog_batches_served") > served
    }));
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
    assert_eq!(stat(&mut p, "sync_full"), 1);
}

#[test]
fn kvik_holds_the_wal_archive_to_its_size_limit() {
    const LIMIT: u64 = 1 << 20;
    let primary = TestServer::start_with(&["--repl-wal-ttl", "0", "--repl-wal-size-limit", "1mb"]);
    let mut p = primary.client();
    // Each FLUSHALL's compaction flushes the memtables: the WAL file before it (over 1 MB of
    // values each round) is archived. RocksDB itself purges the archive every 10 minutes.
    for _ in 0..4 {
        incompressible(&mut p, 400);
        let _: () = q(&mut p, &["FLUSHALL"]);
    }
    assert!(
        kvik_testkit::eventually(CONVERGE, || {
            repl_num(&mut p, "kvik_repl_wal_retention_deleted_files") > 0
                && repl_num(&mut p, "kvik_repl_wal_archived_bytes") <= LIMIT
        }),
        "archive: {} bytes, {} files deleted",
        repl_num(&mut p, "kvik_repl_wal_archived_bytes"),
        repl_num(&mut p, "kvik_repl_wal_retention_deleted_files")
    );
    // What is kept still feeds a replica (from a full sync on).
    let replica = start_replica_of(&primary, &[]);
    let mut r = replica.client();
    incompressible(&mut p, 10);
    assert!(caught_up(&mut p, &mut r));
    converged(&mut p, &mut r);
}

/// A replica's SRANDMEMBER draws from a deck it dealt itself (`storage::pop_decks`); the
/// primary's batches do not pass through the replica's `Batch`, so applying one drops the
/// decks of the sets it changes: members the primary adds come out of the replica's next
/// reads, members it removes never do.
#[test]
fn a_replica_reads_random_members_the_primary_added_after_its_deck_was_dealt() {
    let primary = TestServer::start();
    let replica = start_replica_of(&primary, &[]);
    let (mut p, mut r) = (primary.client(), replica.client());
    let mut add = redis::cmd("SADD");
    add.arg("s");
    for i in 0..1000 {
        add.arg(format!("m{i}"));
    }
    assert_eq!(add.query::<i64>(&mut p).unwrap(), 1000);
    assert!(caught_up(&mut p, &mut r));
    let _: String = q(&mut r, &["SRANDMEMBER", "s"]);
    let mut change = redis::pipe();
    change.cmd("SREM").arg("s");
    for i in 0..500 {
        change.arg(format!("m{i}"));
    }
    change.ignore().cmd("SADD").arg("s");
    for i in 0..500 {
        change.arg(format!("n{i}"));
    }
    let () = change.ignore().query(&mut p).unwrap();
    assert!(caught_up(&mut p, &mut r));
    let mut added = 0;
    for _ in 0..400 {
        let m: String = q(&mut r, &["SRANDMEMBER", "s"]);
        let i: usize = m[1..].parse().unwrap();
        assert!(
            m.starts_with('n') || i >= 500,
            "{m} was removed on the primary"
        );
        added += usize::from(m.starts_with('n'));
    }
    // Half the set is new: ~200 of 400 picks.
    assert!(
        added >= 100,
        "{added} of 400 picks were members the primary added"
    );
}
