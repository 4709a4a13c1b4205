//! CONFIG over every Redis 7.0 parameter (the table in config/redis_params.rs, compared with a
//! real redis-server) and SORT / SORT_RO.

use super::common::*;
use kvik_server::config::redis_params::{Param as Row, REDIS_PARAMS};
use kvik_server::config::Param;
use kvik_testkit::{connect, RedisServer};
use redis::Connection;
use std::collections::{BTreeMap, BTreeSet};

fn config_get(con: &mut Connection, pattern: &str) -> BTreeMap<String, String> {
    let flat: Vec<String> = q(con, &["CONFIG", "GET", pattern]);
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect()
}

fn one(con: &mut Connection, name: &str) -> String {
    let all = config_get(con, name);
    all.get(name)
        .cloned()
        .unwrap_or_else(|| panic!("CONFIG GET {name}: {all:?}"))
}

/// The reply of a command as text: "OK", a value, or the error ("ERR ...").
fn attempt(con: &mut Connection, args: &[&str]) -> String {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    match c.query::<redis::Value>(con) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

/// The Redis rows kvik does not take over with a setting of its own.
fn passive_rows() -> impl Iterator<Item = &'static Row> {
    REDIS_PARAMS
        .iter()
        .filter(|p| matches!(Param::lookup(p.name), Some(Param::Redis(_))))
}

#[test]
fn every_redis_parameter_and_alias_reads_sets_and_refuses_bad_values() {
    let server = TestServer::start();
    let mut con = connect(server.port);
    for p in passive_rows() {
        let names: Vec<&str> = std::iter::once(p.name)
            .chain(p.aliases.iter().copied())
            .collect();
        for &name in &names {
            assert_eq!(one(&mut con, name), p.default, "default of {name}");
            let sample = p.kind.sample();
            let set = attempt(&mut con, &["CONFIG", "SET", name, sample]);
            if !p.mutable {
                assert_eq!(
                    set,
                    format!("ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"),
                );
                continue;
            }
            assert_eq!(set, "ok", "CONFIG SET {name} {sample}");
            let shown = p.kind.canonical(sample).unwrap();
            for &other in &names {
                assert_eq!(one(&mut con, other), shown, "{other} after setting {name}");
            }
            if let Some(bad) = p.kind.invalid() {
                let e = attempt(&mut con, &["CONFIG", "SET", name, bad]);
                assert!(
                    e.starts_with(&format!(
                        "ERR CONFIG SET failed (possibly related to argument '{name}') - "
                    )),
                    "{name} {bad}: {e}"
                );
                assert_eq!(
                    one(&mut con, name),
                    shown,
                    "a refused value changes nothing"
                );
            }
            q::<()>(&mut con, &["CONFIG", "SET", name, p.default]);
        }
    }
}

#[test]
fn config_set_is_all_or_nothing_with_redis_errors() {
    let server = TestServer::start();
    let mut con = connect(server.port);
    assert!(err(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "maxmemory-policy",
            "allkeys-lru",
            "hz",
            "x"
        ]
    )
    .contains("possibly related to argument 'hz'"));
    assert_eq!(one(&mut con, "maxmemory-policy"), "noeviction");
    assert_eq!(
        err(&mut con, &["CONFIG", "SET", "hz", "5", "HZ", "6"]),
        "ERR CONFIG SET failed (possibly related to argument 'HZ') - duplicate parameter"
    );
    assert_eq!(
        err(&mut con, &["CONFIG", "SET", "SLAVE-PRIORITY", "x"]),
        "ERR CONFIG SET failed (possibly related to argument 'slave-priority') - argument couldn't be parsed into an integer"
    );
    // As Redis 7.0, an alias and its parameter are not duplicates: the last one wins.
    q::<()>(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "hash-max-ziplist-entries",
            "1",
            "hash-max-listpack-entries",
            "2",
        ],
    );
    assert_eq!(one(&mut con, "hash-max-ziplist-entries"), "2");
    assert_eq!(
        err(&mut con, &["CONFIG", "SET", "nosuch", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(
        err(&mut con, &["CONFIG", "SET", "maxmemory-policy", "lru"]),
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
    );
    q::<()>(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "MAXMEMORY-POLICY",
            "AllKeys-LFU",
            "zset-max-ziplist-value",
            "1kb",
            "maxmemory",
            "64mb",
        ],
    );
    assert_eq!(one(&mut con, "maxmemory-policy"), "allkeys-lfu");
    assert_eq!(one(&mut con, "zset-max-listpack-value"), "1024");
    // maxmemory still sizes kvik's memory budget.
    assert_eq!(one(&mut con, "maxmemory"), "67108864");
    let listed = config_get(&mut con, "*max-*-entries");
    for n in [
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        "zset-max-ziplist-entries",
        "set-max-intset-entries",
    ] {
        assert!(listed.contains_key(n), "{n} in {listed:?}");
    }
    assert_eq!(config_get(&mut con, "SLAVE-READ-ONLY").len(), 1);
}

#[test]
fn redis_parameters_come_from_the_config_file_and_flags() {
    let dir = std::env::temp_dir().join(format!("kvik-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("redis.conf");
    std::fs::write(
        &file,
        "hash-max-ziplist-entries 64\nslave-read-only no\nsave 900 1 300 10\nreplicaof 10.0.0.1 6379\n",
    )
    .unwrap();
    let server =
        TestServer::start_with(&[file.to_str().unwrap(), "--maxmemory-policy", "volatile-ttl"]);
    let mut con = connect(server.port);
    assert_eq!(one(&mut con, "hash-max-listpack-entries"), "64");
    assert_eq!(one(&mut con, "replica-read-only"), "no");
    assert_eq!(one(&mut con, "save"), "900 1 300 10");
    assert_eq!(one(&mut con, "slaveof"), "10.0.0.1 6379");
    assert_eq!(one(&mut con, "maxmemory-policy"), "volatile-ttl");
    std::fs::remove_dir_all(&dir).ok();
}

/// Parameters whose value differs from a redis-server's on purpose, with the reason.
const DIFFERENT_VALUES: &[(&str, &str)] = &[
    ("port", "each server has its own ephemeral port"),
    ("dir", "each server has its own directory"),
    ("save", "the harness starts redis-server with save ''"),
    (
        "appendonly",
        "kvik always logs writes (RocksDB's WAL); the harness turns Redis's AOF off",
    ),
    ("io-threads", "kvik's default is 2 event loops"),
];

#[test]
fn config_get_all_matches_redis_names_and_defaults() {
    let server = TestServer::start();
    let redis = RedisServer::start(&[]);
    let mut kvik = connect(server.port);
    let mut real = connect(redis.port);
    let (ours, theirs) = (config_get(&mut kvik, "*"), config_get(&mut real, "*"));
    let missing: Vec<&String> = theirs.keys().filter(|n| !ours.contains_key(*n)).collect();
    assert!(
        missing.is_empty(),
        "Redis parameters kvik lacks: {missing:?}"
    );
    let mut differ = Vec::new();
    for (name, value) in &theirs {
        if ours[name] != *value && !DIFFERENT_VALUES.iter().any(|(n, _)| n == name) {
            differ.push(format!("{name}: kvik {:?}, redis {value:?}", ours[name]));
        }
    }
    assert!(differ.is_empty(), "defaults differ:\n{}", differ.join("\n"));
}

/// Redis rows whose CONFIG SET reply differs on purpose, with the reason.
const DIFFERENT_SETS: &[(&str, &str)] = &[
    (
        "dbfilename",
        "Redis protects it (enable-protected-configs); kvik has no file to protect",
    ),
    (
        "tls-port",
        "Redis opens a TLS listener; kvik has none to open",
    ),
];

#[test]
fn config_set_of_every_redis_parameter_matches_redis() {
    let server = TestServer::start();
    let redis = RedisServer::start(&[]);
    let mut kvik = connect(server.port);
    let mut real = connect(redis.port);
    let mut differ = BTreeSet::new();
    for p in passive_rows() {
        if DIFFERENT_SETS.iter().any(|(n, _)| *n == p.name) {
            continue;
        }
        for name in std::iter::once(p.name).chain(p.aliases.iter().copied()) {
            let mut values = vec![p.kind.sample()];
            values.extend(p.kind.invalid());
            for v in values {
                let args = ["CONFIG", "SET", name, v];
                let (a, b) = (attempt(&mut kvik, &args), attempt(&mut real, &args));
                if a != b {
                    differ.insert(format!("SET {name} {v}: kvik {a}, redis {b}"));
                }
                let (a, b) = (one(&mut kvik, name), one(&mut real, name));
                if a != b {
                    differ.insert(format!("GET {name} after {v}: kvik {a}, redis {b}"));
                }
            }
        }
    }
    assert!(
        differ.is_empty(),
        "{}",
        differ.into_iter().collect::<Vec<_>>().join("\n")
    );
}

// ---- SORT ---------------------------------------------------------------------------------

#[test]
fn sort_by_patterns_get_limit_alpha_and_store() {
    let server = TestServer::start();
    let mut con = connect(server.port);
    q::<()>(&mut con, &["RPUSH", "l", "3", "1", "2", "10"]);
    let v: Vec<String> = q(&mut con, &["SORT", "l"]);
    assert_eq!(v, ["1", "2", "3", "10"]);
    let v: Vec<String> = q(&mut con, &["SORT", "l", "ALPHA", "DESC"]);
    assert_eq!(v, ["3", "2", "10", "1"]);
    let v: Vec<String> = q(&mut con, &["SORT_RO", "l", "LIMIT", "1", "2"]);
    assert_eq!(v, ["2", "3"]);
    let v: Vec<String> = q(&mut con, &["SORT", "l", "BY", "nosort", "DESC"]);
    assert_eq!(v, ["10", "2", "1", "3"]);
    // BY string keys and hash fields; GET # and patterns (a missing one is nil).
    for (e, w) in [("3", "1"), ("1", "4"), ("2", "3"), ("10", "2")] {
        q::<()>(&mut con, &["SET", &format!("w_{e}"), w]);
        q::<()>(
            &mut con,
            &["HSET", &format!("h_{e}"), "f", &format!("name{e}")],
        );
    }
    let v: Vec<String> = q(&mut con, &["SORT", "l", "BY", "w_*"]);
    assert_eq!(v, ["3", "10", "2", "1"]);
    let v: Vec<Option<String>> = q(
        &mut con,
        &[
            "SORT", "l", "BY", "h_*->f", "ALPHA", "LIMIT", "0", "2", "GET", "#", "GET", "h_*->f",
            "GET", "nope_*",
        ],
    );
    assert_eq!(
        v,
        [
            Some("1".into()),
            Some("name1".into()),
            None,
            Some("10".into()),
            Some("name10".into()),
            None
        ]
    );
    // STORE makes a list (replacing any type) and emits sortstore.
    q::<()>(&mut con, &["SET", "dst", "x"]);
    let n: i64 = q(&mut con, &["SORT", "l", "DESC", "STORE", "dst"]);
    assert_eq!(n, 4);
    let v: Vec<String> = q(&mut con, &["LRANGE", "dst", "0", "-1"]);
    assert_eq!(v, ["10", "3", "2", "1"]);
    let n: i64 = q(&mut con, &["SORT", "nosuch", "STORE", "dst"]);
    assert_eq!(n, 0);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "dst"]), 0);
    // Sets and sorted sets.
    q::<()>(&mut con, &["SADD", "s", "b", "c", "a"]);
    let v: Vec<String> = q(&mut con, &["SORT", "s", "ALPHA"]);
    assert_eq!(v, ["a", "b", "c"]);
    q::<()>(&mut con, &["ZADD", "z", "1", "x", "2", "y", "3", "w"]);
    let v: Vec<String> = q(
        &mut con,
        &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "0", "2"],
    );
    assert_eq!(v, ["w", "y"]);
    // Errors.
    q::<()>(&mut con, &["RPUSH", "bad", "1", "x"]);
    assert_eq!(
        err(&mut con, &["SORT", "bad"]),
        "ERR One or more scores can't be converted into double"
    );
    assert_eq!(
        err(&mut con, &["SORT", "l", "LIMIT", "1"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut con, &["SORT", "l", "LIMIT", "a", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut con, &["SORT_RO", "l", "STORE", "x"]),
        "ERR syntax error"
    );
    assert!(err(&mut con, &["SORT", "w_1"]).starts_with("WRONGTYPE"));
}

#[test]
fn sort_matches_redis_on_edge_values() {
    let server = TestServer::start();
    let redis = RedisServer::start(&[]);
    let mut kvik = connect(server.port);
    let mut real = connect(redis.port);
    let script: &[&[&str]] = &[
        &[
            "RPUSH", "l", "", "-1", " 2", "0x10", "1e3", "inf", "-inf", "3", "3",
        ],
        &["SORT", "l"],
        &["SORT", "l", "DESC", "LIMIT", "2", "-1"],
        &["SORT", "l", "LIMIT", "-5", "3"],
        &["SORT", "l", "LIMIT", "20", "3"],
        &["SORT", "l", "ALPHA", "DESC"],
        &["SORT", "l", "BY", "nosort", "GET", "#", "GET", "k_*->"],
        &["RPUSH", "e", "1e400"],
        &["SORT", "e"],
        &["SADD", "s", "b", "a", "c"],
        &["SORT", "s", "BY", "nosort", "DESC", "STORE", "out"],
        &["LRANGE", "out", "0", "-1"],
        &["SORT", "s", "STORE"],
        &["SORT", "s", "BY"],
        &["SORT", "s", "FOO"],
        &["SORT", "l", "BY", "k_*", "LIMIT", "0", "0", "STORE", "out"],
        &["EXISTS", "out"],
    ];
    for cmd in script {
        assert_eq!(attempt(&mut kvik, cmd), attempt(&mut real, cmd), "{cmd:?}");
    }
}

#[test]
fn sort_patterns_are_refused_in_cluster_mode_as_redis_7_0() {
    let server = TestServer::start_with(&["--cluster-enabled", "yes"]);
    let mut con = connect(server.port);
    let id = kvik_testkit::kvik_node_id(server.port);
    let node = format!("{id} 127.0.0.1 {} 0-16383", server.port);
    q::<()>(&mut con, &["CLUSTER", "SETTOPOLOGY", "2", &node]);
    q::<()>(&mut con, &["RPUSH", "l", "2", "1"]);
    let v: Vec<String> = q(&mut con, &["SORT", "l", "BY", "nosort"]);
    assert_eq!(v, ["2", "1"]);
    assert_eq!(
        err(&mut con, &["SORT", "l", "BY", "w_*"]),
        "ERR BY option of SORT denied in Cluster mode."
    );
    assert_eq!(
        err(&mut con, &["SORT", "l", "GET", "#"]),
        "ERR GET option of SORT denied in Cluster mode."
    );
}

#[test]
fn sort_store_events_match_redis() {
    let server = TestServer::start();
    let redis = RedisServer::start(&[]);
    let steps: &[&[&str]] = &[
        &["RPUSH", "l", "3", "1", "2"],
        &["SORT", "l", "STORE", "d"],
        &["SET", "d", "x"],
        &["SORT", "l", "DESC", "STORE", "d"],
        &["SORT", "nosuch", "STORE", "d"],
        &["SORT", "nosuch", "STORE", "d"],
        &["SORT_RO", "l"],
    ];
    assert_eq!(
        super::pubsub::keyspace_events(server.port, steps, "KEA"),
        super::pubsub::keyspace_events(redis.port, steps, "KEA")
    );
}

#[test]
fn sort_store_serves_a_blocked_client() {
    let server = TestServer::start();
    let mut con = connect(server.port);
    q::<()>(&mut con, &["RPUSH", "l", "3", "1", "2"]);
    let port = server.port;
    let waiter = std::thread::spawn(move || {
        let mut c = connect(port);
        q::<Vec<String>>(&mut c, &["BLPOP", "d", "10"])
    });
    assert!(eventually(std::time::Duration::from_secs(10), || {
        info_field(&mut con, "clients", "blocked_clients") == Some(1)
    }));
    assert_eq!(q::<i64>(&mut con, &["SORT", "l", "STORE", "d"]), 3);
    assert_eq!(waiter.join().unwrap(), ["d", "1"]);
    let rest: Vec<String> = q(&mut con, &["LRANGE", "d", "0", "-1"]);
    assert_eq!(rest, ["2", "3"]);
}
