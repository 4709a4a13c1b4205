//! Integration tests: moving keys between servers. DUMP/RESTORE round trips for every type,
//! RESTORE's and MIGRATE's replies and errors (Redis 7.0's texts), and online slot migration
//! driven by kvik-cluster while a writer and a reader keep going through a cluster client.

use crate::common::*;
use redis::{Connection, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn dump(con: &mut Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(con).unwrap()
}

/// RESTORE key ttl payload [opts...]: Ok("OK") or Err(full error text).
fn restore(
    con: &mut Connection,
    key: &str,
    ttl: &str,
    payload: &[u8],
    opts: &[&str],
) -> Result<String, String> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(ttl)
        .arg(payload)
        .arg(opts)
        .query::<String>(con)
        .map_err(|e| format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")))
}

/// True if the server knows `command` (collection families land one by one).
fn has_command(con: &mut Connection, command: &str) -> bool {
    let v: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(command)
        .query(con)
        .unwrap();
    matches!(v, Value::Array(ref a) if a.first().is_some_and(|x| *x != Value::Nil))
}

/// A type-specific rendering of a key's whole value, to compare a key with its restored copy.
fn contents(con: &mut Connection, key: &str) -> String {
    let t: String = q(con, &["TYPE", key]);
    let v: Value = match t.as_str() {
        "string" => qv(con, &["GET", key]),
        "hash" => {
            let m: BTreeMap<Vec<u8>, Vec<u8>> = q(con, &["HGETALL", key]);
            return format!("hash {m:?}");
        }
        "list" => qv(con, &["LRANGE", key, "0", "-1"]),
        "set" => {
            let m: BTreeSet<Vec<u8>> = q(con, &["SMEMBERS", key]);
            return format!("set {m:?}");
        }
        "zset" => qv(con, &["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        "none" => Value::Nil,
        other => panic!("unexpected type {other}"),
    };
    format!("{t} {v:?}")
}

/// Fills one key of each type the server supports; returns (key, type) pairs.
fn fill_every_type(con: &mut Connection) -> Vec<(String, &'static str)> {
    let mut keys = vec![("s".to_string(), "string")];
    let _: () = q(con, &["SET", "s", "hello\r\n\0bytes"]);
    let big: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    if has_command(con, "hset") {
        let mut args = vec!["HSET", "h"];
        let vals: Vec<String> = big.iter().map(|m| format!("v-{m}")).collect();
        for (m, v) in big.iter().zip(&vals) {
            args.push(m);
            args.push(v);
        }
        let _: i64 = q(con, &args);
        keys.push(("h".into(), "hash"));
    }
    if has_command(con, "rpush") {
        let mut args = vec!["RPUSH", "l"];
        args.extend(big.iter().map(String::as_str));
        let _: i64 = q(con, &args);
        let _: i64 = q(con, &["LPUSH", "l", "head"]);
        keys.push(("l".into(), "list"));
    }
    if has_command(con, "sadd") {
        let mut args = vec!["SADD", "set"];
        args.extend(big.iter().map(String::as_str));
        let _: i64 = q(con, &args);
        keys.push(("set".into(), "set"));
    }
    if has_command(con, "zadd") {
        let mut args = vec!["ZADD", "z"];
        let scores: Vec<String> = (0..big.len())
            .map(|i| format!("{}.5", i as i64 - 100))
            .collect();
        for (m, s) in big.iter().zip(&scores) {
            args.push(s);
            args.push(m);
        }
        let _: i64 = q(con, &args);
        keys.push(("z".into(), "zset"));
    }
    keys
}

#[test]
fn dump_restore_round_trips_every_type() {
    let a = TestServer::start();
    let b = TestServer::start();
    let (mut ca, mut cb) = (a.client(), b.client());
    let keys = fill_every_type(&mut ca);
    eprintln!(
        "DUMP/RESTORE tested for: {:?}",
        keys.iter().map(|k| k.1).collect::<Vec<_>>()
    );
    assert_eq!(dump(&mut ca, "nokey"), None);
    for (key, kind) in &keys {
        let payload = dump(&mut ca, key).unwrap();
        let want = contents(&mut ca, key);
        assert!(want.starts_with(kind), "{want}");
        // Same server, new name; and another server, same name, with a TTL.
        assert_eq!(
            restore(&mut ca, &format!("{key}-copy"), "0", &payload, &[]).unwrap(),
            "OK"
        );
        assert_eq!(contents(&mut ca, &format!("{key}-copy")), want.clone());
        assert_eq!(q::<i64>(&mut ca, &["TTL", &format!("{key}-copy")]), -1);
        assert_eq!(
            restore(&mut cb, key, "100000", &payload, &[]).unwrap(),
            "OK"
        );
        assert_eq!(contents(&mut cb, key), want);
        let pttl: i64 = q(&mut cb, &["PTTL", key]);
        assert!((90_000..=100_000).contains(&pttl), "{pttl}");
        // The restored copy is independent: DUMP of it restores the same value again.
        let again = dump(&mut cb, key).unwrap();
        assert_eq!(
            restore(&mut cb, key, "0", &again, &["REPLACE"]).unwrap(),
            "OK"
        );
        assert_eq!(contents(&mut cb, key), want);
        assert_eq!(
            q::<i64>(&mut cb, &["TTL", key]),
            -1,
            "REPLACE without TTL persists"
        );
    }
    // REPLACE over a key of another type, ABSTTL, and a TTL already past.
    let s = dump(&mut ca, "s").unwrap();
    for (key, _) in &keys {
        assert_eq!(restore(&mut cb, key, "0", &s, &["REPLACE"]).unwrap(), "OK");
        assert_eq!(contents(&mut cb, key), contents(&mut ca, "s"));
    }
    let at = (now_ms() + 50_000).to_string();
    assert_eq!(restore(&mut cb, "abs", &at, &s, &["ABSTTL"]).unwrap(), "OK");
    let pttl: i64 = q(&mut cb, &["PTTL", "abs"]);
    assert!((40_000..=50_000).contains(&pttl), "{pttl}");
    assert_eq!(
        restore(&mut cb, "past", "1", &s, &["ABSTTL"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<i64>(&mut cb, &["EXISTS", "past"]), 0);
    assert_eq!(
        restore(&mut cb, "abs", "1", &s, &["ABSTTL", "REPLACE"]).unwrap(),
        "OK"
    );
    assert_eq!(
        q::<i64>(&mut cb, &["EXISTS", "abs"]),
        0,
        "a past TTL with REPLACE deletes"
    );
    // IDLETIME and FREQ are accepted (and ignored).
    assert_eq!(
        restore(&mut cb, "i", "0", &s, &["IDLETIME", "10"]).unwrap(),
        "OK"
    );
    assert_eq!(
        restore(&mut cb, "f", "0", &s, &["FREQ", "255", "REPLACE"]).unwrap(),
        "OK"
    );
    // An empty string value survives too.
    let _: () = q(&mut ca, &["SET", "empty", ""]);
    let p = dump(&mut ca, "empty").unwrap();
    assert_eq!(restore(&mut cb, "empty", "0", &p, &[]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut cb, &["GET", "empty"]), "");
}

#[test]
fn restore_errors_match_redis() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let p = dump(&mut c, "k").unwrap();
    const BUSY: &str = "BUSYKEY Target key name already exists.";
    const BAD: &str = "ERR DUMP payload version or checksum are wrong";
    assert_eq!(restore(&mut c, "k", "0", &p, &[]).unwrap_err(), BUSY);
    // BUSYKEY is checked before the TTL and the payload, as in Redis.
    assert_eq!(restore(&mut c, "k", "-1", b"xx", &[]).unwrap_err(), BUSY);
    assert_eq!(
        restore(&mut c, "n", "-1", &p, &[]).unwrap_err(),
        "ERR Invalid TTL value, must be >= 0"
    );
    assert_eq!(
        restore(&mut c, "n", "abc", &p, &[]).unwrap_err(),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(restore(&mut c, "n", "0", b"xx", &[]).unwrap_err(), BAD);
    assert_eq!(restore(&mut c, "n", "0", b"", &[]).unwrap_err(), BAD);
    for i in 0..p.len() {
        let mut bad = p.clone();
        bad[i] ^= 1;
        assert_eq!(
            restore(&mut c, "n", "0", &bad, &[]).unwrap_err(),
            BAD,
            "byte {i}"
        );
    }
    // A real Redis payload is not kvik's.
    let redis_payload = b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce";
    assert_eq!(
        restore(&mut c, "n", "0", redis_payload, &[]).unwrap_err(),
        BAD
    );
    let cases: &[(&[&str], &str)] = &[
        (
            &["IDLETIME", "-1"],
            "ERR Invalid IDLETIME value, must be >= 0",
        ),
        (
            &["IDLETIME", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["FREQ", "256"],
            "ERR Invalid FREQ value, must be >= 0 and <= 255",
        ),
        (
            &["FREQ", "-1"],
            "ERR Invalid FREQ value, must be >= 0 and <= 255",
        ),
        (&["IDLETIME", "1", "FREQ", "3"], "ERR syntax error"),
        (&["FREQ", "1", "IDLETIME", "3"], "ERR syntax error"),
        (&["IDLETIME"], "ERR syntax error"),
        (&["FOO"], "ERR syntax error"),
    ];
    for (opts, want) in cases {
        assert_eq!(
            restore(&mut c, "n", "0", &p, opts).unwrap_err(),
            *want,
            "{opts:?}"
        );
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "n"]), 0);
    assert_eq!(
        err(&mut c, &["RESTORE", "n", "0"]),
        "ERR wrong number of arguments for 'restore' command"
    );
    assert_eq!(
        err(&mut c, &["DUMP"]),
        "ERR wrong number of arguments for 'dump' command"
    );
    // RESTORE-ASKING is RESTORE (outside cluster mode, with nothing to ask).
    let r: String = redis::cmd("RESTORE-ASKING")
        .arg("n")
        .arg(0)
        .arg(&p)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "n"]), "v");
}

/// MIGRATE host port key db timeout [opts] -> Ok(status) or Err(full error text).
fn migrate(con: &mut Connection, port: u16, key: &str, opts: &[&str]) -> Result<String, String> {
    redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(port)
        .arg(key)
        .arg(0)
        .arg(5000)
        .arg(opts)
        .query::<String>(con)
        .map_err(|e| format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")))
}

#[test]
fn migrate_replies_match_redis() {
    let a = TestServer::start();
    let b = TestServer::start_with(&["--requirepass", "sekret"]);
    let (mut ca, mut cb) = (a.client(), b.client());
    let _: () = q(&mut cb, &["AUTH", "sekret"]);
    let _: () = q(&mut ca, &["SET", "k", "v", "PX", "100000"]);
    // Wrong or no password: the target's error, the key stays.
    let e = migrate(&mut ca, b.port, "k", &[]).unwrap_err();
    assert!(
        e.starts_with("ERR Target instance replied with error: NOAUTH"),
        "{e}"
    );
    let e = migrate(&mut ca, b.port, "k", &["AUTH", "nope"]).unwrap_err();
    assert!(
        e.starts_with("ERR Target instance replied with error: "),
        "{e}"
    );
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "k"]), 1);
    assert_eq!(
        migrate(&mut ca, b.port, "k", &["AUTH", "sekret"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "k"]), 0, "moved away");
    assert_eq!(q::<String>(&mut cb, &["GET", "k"]), "v");
    let pttl: i64 = q(&mut cb, &["PTTL", "k"]);
    assert!((90_000..=100_000).contains(&pttl), "TTL travels: {pttl}");
    assert_eq!(
        migrate(&mut ca, b.port, "k", &["AUTH", "sekret"]).unwrap(),
        "NOKEY"
    );

    // Into an existing key: BUSYKEY from the target unless REPLACE; COPY keeps the source.
    let _: () = q(&mut ca, &["SET", "k", "v2"]);
    let e = migrate(&mut ca, b.port, "k", &["AUTH2", "default", "sekret"]).unwrap_err();
    assert_eq!(
        e,
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "k"]), 1);
    let opts = ["COPY", "REPLACE", "AUTH", "sekret"];
    assert_eq!(migrate(&mut ca, b.port, "k", &opts).unwrap(), "OK");
    assert_eq!(
        q::<String>(&mut ca, &["GET", "k"]),
        "v2",
        "COPY keeps the key"
    );
    assert_eq!(q::<String>(&mut cb, &["GET", "k"]), "v2");
    assert_eq!(q::<i64>(&mut cb, &["TTL", "k"]), -1);

    // KEYS: several at once, missing ones skipped.
    for k in ["x1", "x2", "x3"] {
        let _: () = q(&mut ca, &["SET", k, k]);
    }
    let opts = ["AUTH", "sekret", "KEYS", "x1", "nokey", "x2", "x3"];
    assert_eq!(migrate(&mut ca, b.port, "", &opts).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "x1", "x2", "x3"]), 0);
    assert_eq!(
        q::<Vec<String>>(&mut cb, &["MGET", "x1", "x2", "x3"]),
        ["x1", "x2", "x3"]
    );
    assert_eq!(
        migrate(&mut ca, b.port, "", &["KEYS", "nokey", "x1"]).unwrap(),
        "NOKEY"
    );
    // One key refused (BUSYKEY): the others still move, the refused one stays.
    let _: () = q(&mut ca, &["SET", "y1", "1"]);
    let _: () = q(&mut ca, &["SET", "x1", "again"]);
    let e = migrate(&mut ca, b.port, "", &["AUTH", "sekret", "KEYS", "y1", "x1"]).unwrap_err();
    assert!(e.contains("BUSYKEY"), "{e}");
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "y1"]), 0);
    assert_eq!(q::<i64>(&mut ca, &["EXISTS", "x1"]), 1);

    // Argument errors, as Redis.
    assert_eq!(
        migrate(&mut ca, b.port, "x1", &["KEYS", "a"]).unwrap_err(),
        "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
    );
    assert_eq!(
        migrate(&mut ca, b.port, "x1", &["FOO"]).unwrap_err(),
        "ERR syntax error"
    );
    assert_eq!(
        migrate(&mut ca, b.port, "x1", &["AUTH"]).unwrap_err(),
        "ERR syntax error"
    );
    assert_eq!(
        migrate(&mut ca, b.port, "x1", &["AUTH2", "u"]).unwrap_err(),
        "ERR syntax error"
    );
    let e: String = err(&mut ca, &["MIGRATE", "127.0.0.1", "1", "x1", "0", "abc"]);
    assert_eq!(e, "ERR value is not an integer or out of range");
    assert_eq!(
        err(&mut ca, &["MIGRATE", "h", "1", "k", "0"]),
        "ERR wrong number of arguments for 'migrate' command"
    );

    // Nobody listening: IOERR, and the key stays.
    let dead = kvik_testkit::free_port();
    let e = migrate(&mut ca, dead, "x1", &[]).unwrap_err();
    assert!(e.starts_with("IOERR error or timeout"), "{e}");
    assert_eq!(q::<String>(&mut ca, &["GET", "x1"]), "again");
    // Nothing to move: NOKEY without connecting.
    assert_eq!(migrate(&mut ca, dead, "nokey", &[]).unwrap(), "NOKEY");
}

#[test]
fn migrate_moves_collections_and_respects_db() {
    let a = TestServer::start();
    let b = TestServer::start();
    let (mut ca, mut cb) = (a.client(), b.client());
    let keys = fill_every_type(&mut ca);
    let want: Vec<String> = keys.iter().map(|(k, _)| contents(&mut ca, k)).collect();
    let mut opts = vec!["KEYS"];
    opts.extend(keys.iter().map(|(k, _)| k.as_str()));
    let r: String = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(b.port)
        .arg("")
        .arg(3)
        .arg(5000)
        .arg(&opts)
        .query(&mut ca)
        .unwrap();
    assert_eq!(r, "OK");
    assert_eq!(q::<i64>(&mut ca, &["DBSIZE"]), 0);
    assert_eq!(q::<i64>(&mut cb, &["DBSIZE"]), 0, "went to database 3");
    let _: () = q(&mut cb, &["SELECT", "3"]);
    for ((k, _), w) in keys.iter().zip(&want) {
        assert_eq!(&contents(&mut cb, k), w);
    }
}

/* ---- Online slot migration ---- */

/// Runs kvik-cluster in-process with `args`; returns (exit status, stdout + stderr).
pub fn kvik_cluster(args: &[&str]) -> (i32, String) {
    let mut argv = vec!["kvik-cluster".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = kvik_cluster::run(&argv, &mut out, &mut err);
    out.extend_from_slice(&err);
    (code, String::from_utf8_lossy(&out).into_owned())
}

/// A 3-node kvik cluster (topology version 1, even split) from the testkit.
pub fn start_cluster() -> Vec<kvik_testkit::KvikServer> {
    kvik_testkit::start_kvik_cluster(env!("CARGO_BIN_EXE_kvik-server"), 3, &[])
}

/// A cluster client (the `redis` crate's) seeded with every node, with bounded timeouts.
pub fn cluster_client(nodes: &[kvik_testkit::KvikServer]) -> redis::cluster::ClusterConnection {
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    redis::cluster::ClusterClient::builder(urls)
        .connection_timeout(Duration::from_secs(10))
        .response_timeout(Duration::from_secs(20))
        .retries(30)
        .build()
        .unwrap()
        .get_connection()
        .unwrap()
}

/// CLUSTER COUNTKEYSINSLOT for each of `slots` on one node, pipelined.
fn count_keys(con: &mut Connection, slots: &[u16]) -> Vec<i64> {
    let mut p = redis::pipe();
    for s in slots {
        p.cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(*s);
    }
    p.query(con).unwrap()
}

#[test]
fn slots_move_online_under_load_without_losing_a_write() {
    use kvik_resp::cluster::key_slot;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    let nodes = start_cluster();
    // 3000 keys in slots 0..=199 (the range that moves from node 0 to node 1) and 600 elsewhere.
    let moving: Vec<String> = (0..)
        .map(|i| format!("user:{i}"))
        .filter(|k| key_slot(k.as_bytes()) < 200)
        .take(3000)
        .collect();
    let staying: Vec<String> = (0..600).map(|i| format!("other:{i}")).collect();
    let staying: Vec<String> = staying
        .into_iter()
        .filter(|k| key_slot(k.as_bytes()) >= 200)
        .collect();
    let all: Arc<Vec<String>> = Arc::new(moving.iter().chain(&staying).cloned().collect());
    let mut cc = cluster_client(&nodes);
    for chunk in all.chunks(500) {
        // One SET each (the cluster pipeline splits by node).
        let mut p = redis::cluster::cluster_pipe();
        for k in chunk {
            p.cmd("SET").arg(k).arg("0").ignore();
        }
        p.query::<()>(&mut cc).unwrap();
    }

    // The writer rewrites keys round-robin with a growing generation; the reader checks every
    // key it reads exists and holds a generation no older than the last one acknowledged
    // before the read began.
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..all.len()).map(|_| AtomicU64::new(0)).collect());
    let writer = {
        let (stop, acked, all) = (stop.clone(), acked.clone(), all.clone());
        let mut con = cluster_client(&nodes);
        std::thread::spawn(move || {
            let mut writes = 0u64;
            let mut generation = 1u64;
            while !stop.load(Ordering::Relaxed) && writes < 2_000_000 {
                for (i, k) in all
                    .iter()
                    .enumerate()
                    .skip((generation as usize * 37) % 50)
                    .step_by(7)
                {
                    let _: () = redis::cmd("SET")
                        .arg(k)
                        .arg(generation)
                        .query(&mut con)
                        .unwrap_or_else(|e| panic!("SET {k}: {e}"));
                    acked[i].store(generation, Ordering::SeqCst);
                    writes += 1;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                generation += 1;
            }
            writes
        })
    };
    let reader = {
        let (stop, acked, all) = (stop.clone(), acked.clone(), all.clone());
        let mut con = cluster_client(&nodes);
        std::thread::spawn(move || {
            let mut reads = 0u64;
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) && reads < 2_000_000 {
                i = (i + 13) % all.len();
                let floor = acked[i].load(Ordering::SeqCst);
                let v: Option<u64> = redis::cmd("GET")
                    .arg(&all[i])
                    .query(&mut con)
                    .unwrap_or_else(|e| panic!("GET {}: {e}", all[i]));
                let v = v.unwrap_or_else(|| panic!("{} vanished during the migration", all[i]));
                assert!(
                    v >= floor,
                    "{}: read {v} after {floor} was acknowledged",
                    all[i]
                );
                reads += 1;
            }
            reads
        })
    };

    let from = nodes[0].addr();
    let to = nodes[1].addr();
    let (code, out) = kvik_cluster(&[
        "move-slots",
        "--from",
        &from,
        "--to",
        &to,
        "--slots",
        "0-199",
        "--batch",
        "40",
        &from,
    ]);
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().expect("writer");
    let reads = reader.join().expect("reader");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("moved 200 slots and "), "{out}");
    eprintln!("migration done under {writes} writes and {reads} reads");
    assert!(writes > 0 && reads > 0);

    // Every key has its last acknowledged value.
    let mut cc = cluster_client(&nodes);
    for (i, k) in all.iter().enumerate() {
        let v: Option<u64> = redis::cmd("GET").arg(k).query(&mut cc).unwrap();
        assert_eq!(v, Some(acked[i].load(Ordering::SeqCst)), "{k}");
    }
    // And lives on exactly one node: its slot's owner.
    let mut slots: Vec<u16> = all.iter().map(|k| key_slot(k.as_bytes())).collect();
    slots.sort_unstable();
    slots.dedup();
    let counts: Vec<Vec<i64>> = nodes
        .iter()
        .map(|n| count_keys(&mut n.client(), &slots))
        .collect();
    for (j, s) in slots.iter().enumerate() {
        let want = all.iter().filter(|k| key_slot(k.as_bytes()) == *s).count() as i64;
        let owner = match *s {
            0..=199 => 1,
            200..=5460 => 0,
            5461..=10922 => 1,
            _ => 2,
        };
        for (n, c) in counts.iter().enumerate() {
            let expect = if n == owner { want } else { 0 };
            assert_eq!(c[j], expect, "slot {s} on node {n}");
        }
    }
    let total: i64 = nodes
        .iter()
        .map(|n| q::<i64>(&mut n.client(), &["DBSIZE"]))
        .sum();
    assert_eq!(total, all.len() as i64, "no key duplicated or lost");
    let (code, out) = kvik_cluster(&["check", &to]);
    assert_eq!(code, 0, "{out}");
}
