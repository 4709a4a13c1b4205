//! Integration tests: the exact key counts behind DBSIZE and INFO keyspace (`keys=`, `expires=`),
//! kept with the writes and persisted with them. Each test compares them with what KEYS and PTTL
//! find, across kill -9, expiry, FLUSHDB/FLUSHALL, RENAME, MOVE, COPY, MIGRATE, overwrites by
//! another type, and compaction.

use crate::common::*;
use redis::Connection;
use std::time::Duration;

/// (keys, expires) of database `db` as DBSIZE and INFO keyspace report them (checked equal).
fn counts(con: &mut Connection, db: u16) -> (u64, u64) {
    let _: () = q(con, &["SELECT", &db.to_string()]);
    let dbsize: u64 = q(con, &["DBSIZE"]);
    let ks = info(con, "keyspace");
    let (keys, expires) = match ks["Keyspace"].get(&format!("db{db}")) {
        None => (0, 0),
        Some(line) => {
            let field = |name: &str| -> u64 {
                line.split(',')
                    .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or_else(|| panic!("{name} in {line:?}"))
                    .parse()
                    .unwrap()
            };
            (field("keys"), field("expires"))
        }
    };
    assert_eq!(dbsize, keys, "DBSIZE and INFO keyspace of db{db}");
    (keys, expires)
}

/// (keys, expires) of database `db` by listing its keys: KEYS * and PTTL of each. Only equal to
/// [`counts`] while no key is expired but not yet removed.
fn listed(con: &mut Connection, db: u16) -> (u64, u64) {
    let _: () = q(con, &["SELECT", &db.to_string()]);
    let keys: Vec<String> = q(con, &["KEYS", "*"]);
    let expires = keys
        .iter()
        .filter(|k| q::<i64>(con, &["PTTL", k]) >= 0)
        .count();
    (keys.len() as u64, expires as u64)
}

/// Asserts that the counts of databases `0..dbs` match the listing, and returns them.
fn assert_exact(con: &mut Connection, dbs: u16) -> Vec<(u64, u64)> {
    (0..dbs)
        .map(|db| {
            let c = counts(con, db);
            assert_eq!(c, listed(con, db), "counts of db{db}");
            c
        })
        .collect()
}

/// Writes keys of every type into `db`: `n` strings (every third with a TTL), and a hash, list,
/// set and sorted set (the list and the set with a TTL).
fn fill(con: &mut Connection, db: u16, n: usize) {
    let _: () = q(con, &["SELECT", &db.to_string()]);
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("SET").arg(format!("s{i}")).arg("v").ignore();
        if i % 3 == 0 {
            p.cmd("EXPIRE").arg(format!("s{i}")).arg(1000).ignore();
        }
    }
    p.cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .arg("g")
        .arg("w")
        .ignore();
    p.cmd("RPUSH").arg("l").arg("a").arg("b").ignore();
    p.cmd("PEXPIRE").arg("l").arg(1_000_000).ignore();
    p.cmd("SADD").arg("set").arg("a").ignore();
    p.cmd("EXPIRE").arg("set").arg(500).ignore();
    p.cmd("ZADD").arg("z").arg(1).arg("a").ignore();
    p.query::<()>(con).unwrap();
}

#[test]
fn counts_survive_kill9() {
    let mut s = TestServer::start_with(&["--appendfsync", "no"]);
    let mut c = s.client();
    fill(&mut c, 0, 300);
    fill(&mut c, 2, 50);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let _: i64 = q(&mut c, &["DEL", "s1", "s3", "h", "nokey"]);
    let _: i64 = q(&mut c, &["PERSIST", "s6"]);
    let before = assert_exact(&mut c, 3);
    assert_eq!(before[0], (300 + 4 - 3, 100 + 2 - 2));
    assert_eq!(before[1], (0, 0));
    drop(c);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(assert_exact(&mut c, 3), before);
}

#[test]
fn expired_keys_count_until_removed_then_active_expiry_counts_them_out() {
    let mut s = TestServer::start_with(&["--active-expire", "no"]);
    let mut c = s.client();
    fill(&mut c, 0, 30);
    let mut p = redis::pipe();
    for i in 0..20 {
        p.cmd("SET")
            .arg(format!("t{i}"))
            .arg("v")
            .arg("PX")
            .arg(1)
            .ignore();
    }
    p.cmd("HSET").arg("th").arg("f").arg("v").ignore();
    p.cmd("PEXPIRE").arg("th").arg(1).ignore();
    p.query::<()>(&mut c).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // Logically expired: invisible to reads, still counted (as in Redis) until removed.
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "t0"]), None);
    assert_eq!(counts(&mut c, 0), (30 + 4 + 21, 10 + 2 + 21));
    assert_eq!(listed(&mut c, 0), (30 + 4, 10 + 2));
    // Lazily: a write over an expired key replaces it, one key still.
    let _: () = q(&mut c, &["SET", "t0", "again"]);
    let _: i64 = q(&mut c, &["HSET", "th", "f", "v"]);
    let _: i64 = q(&mut c, &["RPUSH", "t1", "x"]);
    let _: () = q(&mut c, &["SET", "t2", "x", "EX", "100"]);
    assert_eq!(counts(&mut c, 0), (55, 33 - 3));
    // Survives a crash in that state.
    drop(c);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(counts(&mut c, 0), (55, 30));
    // Active expiry removes the rest.
    let _: () = q(&mut c, &["CONFIG", "SET", "active-expire", "yes"]);
    // DBSIZE alone while expiry runs (`counts` compares it with INFO, read a moment later).
    assert!(eventually(Duration::from_secs(20), || {
        let _: () = q(&mut c, &["SELECT", "0"]);
        q::<u64>(&mut c, &["DBSIZE"]) == 38
    }));
    assert_eq!(assert_exact(&mut c, 1), vec![(38, 13)]);
}

#[test]
fn flushdb_and_flushall_reset_counts_across_restart() {
    let mut s = TestServer::start();
    let mut c = s.client();
    for db in 0..3 {
        fill(&mut c, db, 20);
    }
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: () = q(&mut c, &["FLUSHDB"]);
    let _: () = q(&mut c, &["SET", "after", "1", "EX", "100"]);
    assert_eq!(assert_exact(&mut c, 3), vec![(24, 9), (1, 1), (24, 9)]);
    drop(c);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(assert_exact(&mut c, 3), vec![(24, 9), (1, 1), (24, 9)]);
    let _: () = q(&mut c, &["FLUSHALL", "ASYNC"]);
    let _: () = q(&mut c, &["SELECT", "2"]);
    let _: () = q(&mut c, &["SET", "x", "1"]);
    drop(c);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(assert_exact(&mut c, 3), vec![(0, 0), (0, 0), (1, 0)]);
}

#[test]
fn rename_move_copy_and_overwrites_keep_counts_exact() {
    let mut s = TestServer::start();
    let mut c = s.client();
    fill(&mut c, 0, 9);
    let _: () = q(&mut c, &["SELECT", "0"]);
    // RENAME onto a new name, onto an existing key of another type, with and without TTLs.
    let _: () = q(&mut c, &["RENAME", "s0", "renamed"]); // keeps its TTL
    let _: () = q(&mut c, &["RENAME", "s1", "h"]); // replaces the hash
    let _: () = q(&mut c, &["RENAME", "l", "s2"]); // TTL'd list over a plain string
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "s4", "s5"]), 0);
    let _: () = q(&mut c, &["RENAME", "z", "z"]);
    assert_eq!(assert_exact(&mut c, 1), vec![(11, 5)]);
    // MOVE to another database, refused when the target exists there.
    let _: () = q(&mut c, &["SELECT", "3"]);
    let _: () = q(&mut c, &["SET", "s7", "there"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut c, &["MOVE", "s6", "3"]), 1);
    assert_eq!(q::<i64>(&mut c, &["MOVE", "s7", "3"]), 0);
    assert_eq!(q::<i64>(&mut c, &["MOVE", "set", "3"]), 1);
    // COPY, within and across databases, with REPLACE over another type.
    assert_eq!(q::<i64>(&mut c, &["COPY", "renamed", "copied"]), 1);
    assert_eq!(q::<i64>(&mut c, &["COPY", "s2", "s8", "REPLACE"]), 1);
    assert_eq!(
        q::<i64>(&mut c, &["COPY", "z", "s7", "DB", "3", "REPLACE"]),
        1
    );
    // Overwrites by another type and TTL changes.
    let _: () = q(&mut c, &["SET", "s2", "now a string"]); // drops the TTL
    let _: i64 = q(&mut c, &["DEL", "s4"]);
    let _: i64 = q(&mut c, &["HSET", "s4", "f", "v"]);
    let _: () = q(&mut c, &["SET", "h", "v", "KEEPTTL"]);
    let _: i64 = q(&mut c, &["EXPIRE", "s5", "100"]);
    let _: Option<String> = q(&mut c, &["GETEX", "s5", "PERSIST"]);
    let _: Option<String> = q(&mut c, &["GETDEL", "copied"]);
    let _: i64 = q(&mut c, &["UNLINK", "s8"]);
    let dump: Vec<u8> = q(&mut c, &["DUMP", "z"]);
    let _: () = redis::cmd("RESTORE")
        .arg("s3")
        .arg(500_000)
        .arg(dump)
        .arg("REPLACE")
        .query(&mut c)
        .unwrap();
    let before = assert_exact(&mut c, 4);
    drop(c);
    s.kill9();
    s.restart();
    let mut c = s.client();
    assert_eq!(assert_exact(&mut c, 4), before);
}

#[test]
fn a_transaction_writing_one_key_several_times_counts_it_once() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut p = redis::pipe();
    p.atomic()
        .cmd("SET")
        .arg("k")
        .arg("1")
        .arg("EX")
        .arg(100)
        .ignore()
        .cmd("SET")
        .arg("j")
        .arg("2")
        .ignore()
        .cmd("RENAME")
        .arg("k")
        .arg("j")
        .ignore()
        .cmd("DEL")
        .arg("j")
        .ignore()
        .cmd("SET")
        .arg("j")
        .arg("3")
        .arg("PX")
        .arg(100_000)
        .ignore()
        .cmd("PERSIST")
        .arg("j")
        .ignore();
    p.query::<()>(&mut c).unwrap();
    assert_eq!(assert_exact(&mut c, 1), vec![(1, 0)]);
}

#[test]
fn migrate_moves_counts_between_servers() {
    let a = TestServer::start();
    let b = TestServer::start();
    let (mut ca, mut cb) = (a.client(), b.client());
    fill(&mut ca, 0, 12);
    fill(&mut cb, 0, 3); // b already has s0..s2, h, l, set, z
    let _: () = q(&mut ca, &["SELECT", "0"]);
    let port = b.port().to_string();
    let migrate = |c: &mut Connection, extra: &[&str]| -> String {
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000"];
        args.extend_from_slice(extra);
        q(c, &args)
    };
    assert_eq!(migrate(&mut ca, &["KEYS", "s9", "s10"]), "OK");
    assert_eq!(migrate(&mut ca, &["COPY", "KEYS", "s11"]), "OK");
    assert_eq!(
        migrate(&mut ca, &["REPLACE", "KEYS", "s0", "s1", "h", "set"]),
        "OK"
    );
    let _: () = q(&mut ca, &["SELECT", "0"]);
    let _: () = q(&mut ca, &["SET", "fresh", "1"]);
    let _: () = q(
        &mut ca,
        &["MIGRATE", "127.0.0.1", &port, "fresh", "2", "5000"],
    );
    // a: 16 keys, 6 with a TTL (s0 s3 s6 s9 l set); s9 s10 s0 s1 h set left.
    assert_eq!(assert_exact(&mut ca, 1), vec![(16 - 6, 6 - 3)]);
    // b: 7 keys, 3 with a TTL (s0 l set); s9 s10 s11 new (s9 with a TTL), s0 s1 h set replaced.
    assert_eq!(
        assert_exact(&mut cb, 3),
        vec![(7 + 3, 3 + 1), (0, 0), (1, 0)]
    );
}

#[test]
fn compaction_keeps_counts_exact() {
    let mut s = TestServer::start_with(&["--active-expire", "no"]);
    let mut c = s.client();
    fill(&mut c, 0, 200);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let mut p = redis::pipe();
    for i in 0..100 {
        p.cmd("SET")
            .arg(format!("gone{i}"))
            .arg("v")
            .arg("PX")
            .arg(1)
            .ignore();
    }
    let big: Vec<String> = (0..2000).map(|i| format!("f{i}")).collect();
    p.cmd("SADD").arg("bigset").arg(&big).ignore();
    p.cmd("SADD").arg("bigexp").arg(&big).ignore();
    p.cmd("PEXPIRE").arg("bigexp").arg(1).ignore();
    p.query::<()>(&mut c).unwrap();
    let _: i64 = q(&mut c, &["DEL", "bigset"]);
    std::thread::sleep(Duration::from_millis(20));
    // FLUSHDB of another database compacts the whole key range (kvik has no DEBUG).
    let _: () = q(&mut c, &["SELECT", "9"]);
    let _: () = q(&mut c, &["FLUSHDB"]);
    let expect = (204 + 101, 69 + 101);
    assert_eq!(counts(&mut c, 0), expect);
    // A clean restart waits for the compaction that FLUSHDB started.
    drop(c);
    s.restart();
    let mut c = s.client();
    assert_eq!(counts(&mut c, 0), expect);
    let _: () = q(&mut c, &["CONFIG", "SET", "active-expire", "yes"]);
    // DBSIZE alone while expiry runs (`counts` compares it with INFO, read a moment later).
    assert!(eventually(Duration::from_secs(20), || {
        let _: () = q(&mut c, &["SELECT", "0"]);
        q::<u64>(&mut c, &["DBSIZE"]) == 204
    }));
    assert_eq!(assert_exact(&mut c, 1), vec![(204, 69)]);
}

/// One command or transaction of thousands of keys, some repeated: each key counts once (a
/// commit finds the keys' states by hashing past a few keys, see `storage::KeyList`).
#[test]
fn commands_of_thousands_of_keys_count_each_key_once() {
    let s = TestServer::start();
    let mut c = s.client();
    // MSET of 20,000 pairs over 15,000 distinct keys (the last 5,000 repeat the first).
    let mut mset = redis::cmd("MSET");
    for i in 0..20_000 {
        mset.arg(format!("k{}", i % 15_000)).arg(i);
    }
    mset.query::<()>(&mut c).unwrap();
    assert_eq!(counts(&mut c, 0), (15_000, 0));
    let last: String = q(&mut c, &["GET", "k10"]);
    assert_eq!(last, "15010", "the later value of a repeated key wins");
    // DEL of 10,000 names: 5,000 existing keys, each named twice.
    let mut del = redis::cmd("DEL");
    for i in 0..10_000 {
        del.arg(format!("k{}", i % 5_000));
    }
    assert_eq!(del.query::<u64>(&mut c).unwrap(), 5_000);
    assert_eq!(counts(&mut c, 0), (10_000, 0));
    // A transaction of 6,000 SETs over 3,000 keys, 1,000 of them new, every other one with a TTL.
    let mut p = redis::pipe();
    p.atomic();
    for i in 0..6_000 {
        let key = format!("k{}", 4_000 + i % 3_000);
        match i % 2 {
            0 => p.cmd("SET").arg(key).arg(i).ignore(),
            _ => p.cmd("SET").arg(key).arg(i).arg("EX").arg(1000).ignore(),
        };
    }
    p.query::<()>(&mut c).unwrap();
    // Keys 5,000..7,000 were there; 4,000..5,000 were deleted above and come back. The last
    // SET of each key (i from 3,000 to 5,999) has a TTL when i is odd.
    assert_eq!(counts(&mut c, 0), (11_000, 1_500));
}
