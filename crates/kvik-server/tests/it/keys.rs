//! Integration tests: keys (the generic keyspace family: DEL UNLINK EXISTS TYPE TOUCH, the EXPIRE
//! family, TTL and friends, PERSIST, RENAME, COPY, MOVE, KEYS, SCAN, RANDOMKEY, OBJECT, and
//! active expiry). Expected replies and error texts are redis-server 7.0's.

use crate::common::*;
use redis::Connection;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sets `n` keys named `{prefix}{i}` to "v" in one pipeline, with extra SET options.
fn set_many(con: &mut Connection, prefix: &str, n: usize, opts: &[&str]) {
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("SET")
            .arg(format!("{prefix}{i}"))
            .arg("v")
            .arg(opts)
            .ignore();
    }
    p.query::<()>(con).unwrap();
}

const SAME: &str = "ERR source and destination objects are the same";
const DB_RANGE: &str = "ERR DB index is out of range";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

#[test]
fn del_unlink_exists_touch_and_type() {
    let s = TestServer::start();
    let mut c = s.client();
    for k in ["a", "b", "c"] {
        let _: () = q(&mut c, &["SET", k, "1"]);
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "a", "b", "nokey"]), 3);
    assert_eq!(q::<i64>(&mut c, &["TOUCH", "a", "a", "nokey"]), 2);
    assert_eq!(q::<String>(&mut c, &["TYPE", "a"]), "string");
    assert_eq!(q::<String>(&mut c, &["TYPE", "nokey"]), "none");
    assert_eq!(q::<i64>(&mut c, &["DEL", "a", "a", "nokey"]), 1);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "b", "c", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "b", "c"]), 0);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "a"]), 0);
    assert_eq!(
        err(&mut c, &["UNLINK"]),
        "ERR wrong number of arguments for 'unlink' command"
    );
    assert_eq!(
        err(&mut c, &["TYPE", "a", "b"]),
        "ERR wrong number of arguments for 'type' command"
    );
    assert_eq!(
        err(&mut c, &["TOUCH"]),
        "ERR wrong number of arguments for 'touch' command"
    );
}

#[test]
fn expire_family_sets_the_expiry_and_a_past_time_deletes() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), -1);
    for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
        assert_eq!(q::<i64>(&mut c, &[cmd, "nokey"]), -2, "{cmd}");
    }

    let before = now_ms();
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100"]), 1);
    let after = now_ms();
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "ttl {ttl}");
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!(pttl > 95_000 && pttl <= 100_000, "pttl {pttl}");
    let at: i64 = q(&mut c, &["PEXPIRETIME", "k"]);
    assert!(
        at >= before + 100_000 && at <= after + 100_000,
        "pexpiretime {at}"
    );
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), at / 1000);

    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "k", "200000"]), 1);
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!(pttl > 195_000 && pttl <= 200_000, "pttl {pttl}");

    let at_s = now_ms() / 1000 + 1000;
    assert_eq!(q::<i64>(&mut c, &["EXPIREAT", "k", &at_s.to_string()]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), at_s);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), at_s * 1000);
    let at_ms = now_ms() + 5_000;
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "k", &at_ms.to_string()]), 1);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), at_ms);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), at_ms / 1000);
    // The expiry does not change the value.
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");

    // A time that is not in the future deletes the key and replies 1.
    for args in [
        ["EXPIRE", "k", "0"],
        ["EXPIRE", "k", "-10"],
        ["PEXPIRE", "k", "-1"],
        ["EXPIREAT", "k", "1"],
        ["PEXPIREAT", "k", "1"],
        ["EXPIREAT", "k", "-9223372036854775"],
    ] {
        let _: () = q(&mut c, &["SET", "k", "v"]);
        assert_eq!(q::<i64>(&mut c, &args), 1, "{args:?}");
        assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0, "{args:?}");
        assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -2, "{args:?}");
    }
    // A missing key: 0, and nothing is created.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "nokey", "10"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "nokey", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "nokey"]), 0);
    // The largest absolute time is accepted.
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        q::<i64>(&mut c, &["PEXPIREAT", "k", "9223372036854775807"]),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), 9223372036854775807);
    // SET clears the expiry.
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
}

#[test]
fn expire_nx_xx_gt_lt_matrix() {
    let s = TestServer::start();
    let mut c = s.client();
    // (key has a 100 s ttl, options, new ttl in seconds, expected reply)
    let cases: &[(bool, &[&str], i64, i64)] = &[
        (false, &["NX"], 50, 1),
        (false, &["XX"], 50, 0),
        (false, &["GT"], 50, 0),
        (false, &["LT"], 50, 1),
        (false, &["XX", "GT"], 200, 0),
        (false, &["XX", "LT"], 50, 0),
        (false, &["gt"], -5, 0),
        (true, &["NX"], 50, 0),
        (true, &["XX"], 50, 1),
        (true, &["GT"], 50, 0),
        (true, &["GT"], 200, 1),
        (true, &["LT"], 50, 1),
        (true, &["LT"], 200, 0),
        (true, &["xx", "gt"], 200, 1),
        (true, &["XX", "LT"], 200, 0),
        (true, &["lt", "xx"], 50, 1),
        (true, &["NX", "NX"], 50, 0),
    ];
    for (with_ttl, opts, secs, want) in cases {
        let _: () = q(&mut c, &["SET", "k", "v"]);
        if *with_ttl {
            let _: i64 = q(&mut c, &["EXPIRE", "k", "100"]);
        }
        let secs_s = secs.to_string();
        let mut args = vec!["EXPIRE", "k", secs_s.as_str()];
        args.extend_from_slice(opts);
        let got: i64 = q(&mut c, &args);
        assert_eq!(got, *want, "ttl={with_ttl} {args:?}");
        let ttl: i64 = q(&mut c, &["TTL", "k"]);
        let expect_ttl = match (want, with_ttl) {
            (1, _) if *secs <= 0 => -2,
            (1, _) => *secs,
            (_, true) => 100,
            (_, false) => -1,
        };
        assert!(
            (expect_ttl - ttl).abs() <= 1 && (ttl >= 0) == (expect_ttl >= 0),
            "ttl={with_ttl} {args:?}: TTL {ttl}, want {expect_ttl}"
        );
    }

    // Equal expiry: neither greater nor less.
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let at = (now_ms() + 100_000).to_string();
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "k", &at]), 1);
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "k", &at, "GT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "k", &at, "LT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "k", &at, "XX"]), 1);
    // LT on a persistent key with a past time deletes it.
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "0", "LT"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
}

#[test]
fn expire_errors_match_redis() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let nx = "ERR NX and XX, GT or LT options at the same time are not compatible";
    let gtlt = "ERR GT and LT options at the same time are not compatible";
    assert_eq!(err(&mut c, &["EXPIRE", "k", "10", "NX", "XX"]), nx);
    assert_eq!(err(&mut c, &["EXPIRE", "k", "10", "nx", "gt"]), nx);
    assert_eq!(err(&mut c, &["PEXPIRE", "k", "10", "LT", "NX"]), nx);
    assert_eq!(err(&mut c, &["EXPIREAT", "k", "10", "GT", "LT"]), gtlt);
    assert_eq!(
        err(&mut c, &["PEXPIREAT", "k", "10", "xx", "gt", "lt"]),
        gtlt
    );
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "10", "foo"]),
        "ERR Unsupported option foo"
    );
    assert_eq!(err(&mut c, &["EXPIRE", "k", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["EXPIRE", "k", "1.5"]), NOT_INT);
    // Options are checked before the number, as in Redis.
    assert_eq!(err(&mut c, &["EXPIRE", "k", "abc", "NX", "XX"]), nx);
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "99999999999999999"]),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(
        err(&mut c, &["PEXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'pexpire' command"
    );
    assert_eq!(
        err(&mut c, &["EXPIREAT", "k", "-9223372036854776"]),
        "ERR invalid expire time in 'expireat' command"
    );
    assert_eq!(
        err(&mut c, &["EXPIREAT", "k", "9223372036854776"]),
        "ERR invalid expire time in 'expireat' command"
    );
    assert_eq!(
        err(&mut c, &["EXPIRE", "k"]),
        "ERR wrong number of arguments for 'expire' command"
    );
    assert_eq!(
        err(&mut c, &["TTL"]),
        "ERR wrong number of arguments for 'ttl' command"
    );
    // None of the failed commands touched the key.
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
}

#[test]
fn expired_keys_disappear_from_every_command() {
    let s = TestServer::start_with(&["--active-expire", "no"]);
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "a", "v"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "a", "100"]), 1);
    let _: () = q(&mut c, &["SET", "b", "v", "PX", "100"]);
    let gone = eventually(Duration::from_secs(5), || {
        q::<i64>(&mut c, &["EXISTS", "a", "b"]) == 0
    });
    assert!(gone, "keys still exist long after their expiry");
    for k in ["a", "b"] {
        assert_eq!(q::<Option<String>>(&mut c, &["GET", k]), None);
        assert_eq!(q::<i64>(&mut c, &["TTL", k]), -2);
        assert_eq!(q::<i64>(&mut c, &["PTTL", k]), -2);
        assert_eq!(q::<String>(&mut c, &["TYPE", k]), "none");
        assert_eq!(q::<i64>(&mut c, &["PERSIST", k]), 0);
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", k, "100"]), 0);
        assert_eq!(q::<i64>(&mut c, &["MOVE", k, "1"]), 0);
        assert_eq!(q::<i64>(&mut c, &["COPY", k, "copy"]), 0);
        assert_eq!(
            q::<Option<String>>(&mut c, &["OBJECT", "ENCODING", k]),
            None
        );
        assert_eq!(err(&mut c, &["RENAME", k, "x"]), "ERR no such key");
    }
    assert!(q::<Vec<String>>(&mut c, &["KEYS", "*"]).is_empty());
    let (cursor, keys): (String, Vec<String>) = q(&mut c, &["SCAN", "0", "COUNT", "100"]);
    assert_eq!(cursor, "0");
    assert!(keys.is_empty());
    assert_eq!(q::<Option<String>>(&mut c, &["RANDOMKEY"]), None);
    assert_eq!(q::<i64>(&mut c, &["DEL", "a", "b"]), 0);
    // An expired key is replaced as if absent, without its old expiry.
    let _: () = q(&mut c, &["SET", "c", "v", "PX", "30"]);
    assert!(eventually(Duration::from_secs(5), || q::<i64>(
        &mut c,
        &["EXISTS", "c"]
    ) == 0));
    let _: () = q(&mut c, &["SET", "d", "new"]);
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "d", "c"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "c"]), "new");
    assert_eq!(q::<i64>(&mut c, &["TTL", "c"]), -1);
}

#[test]
fn persist_removes_the_expiry() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "k", "v", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "nokey"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    assert_eq!(
        err(&mut c, &["PERSIST", "k", "x"]),
        "ERR wrong number of arguments for 'persist' command"
    );
}

#[test]
fn rename_and_renamenx() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "a", "1", "EX", "100"]);
    assert_eq!(q::<String>(&mut c, &["RENAME", "a", "b"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "1");
    let ttl: i64 = q(&mut c, &["TTL", "b"]);
    assert!((99..=100).contains(&ttl), "RENAME keeps the ttl: {ttl}");

    assert_eq!(err(&mut c, &["RENAME", "nokey", "x"]), "ERR no such key");
    assert_eq!(err(&mut c, &["RENAMENX", "nokey", "x"]), "ERR no such key");
    assert_eq!(
        err(&mut c, &["RENAME", "nokey", "nokey"]),
        "ERR no such key"
    );
    // To itself: RENAME succeeds, RENAMENX reports 0; the key is intact either way.
    assert_eq!(q::<String>(&mut c, &["RENAME", "b", "b"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "b", "b"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "1");

    let _: () = q(&mut c, &["SET", "c", "3"]);
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "b", "c"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "c"]), "3");
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "1");
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "b", "d"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "b"]), 0);
    // RENAME overwrites the destination, which takes the source's expiry.
    assert_eq!(q::<String>(&mut c, &["RENAME", "d", "c"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "c"]), "1");
    assert!(q::<i64>(&mut c, &["TTL", "c"]) > 90);
    let _: () = q(&mut c, &["SET", "p", "persistent"]);
    assert_eq!(q::<String>(&mut c, &["RENAME", "p", "c"]), "OK");
    assert_eq!(q::<i64>(&mut c, &["TTL", "c"]), -1);
    assert_eq!(q::<String>(&mut c, &["GET", "c"]), "persistent");
    assert_eq!(
        err(&mut c, &["RENAME", "c"]),
        "ERR wrong number of arguments for 'rename' command"
    );
}

#[test]
fn copy_within_and_across_databases() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "s", "v", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["COPY", "s", "d"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "d"]), "v");
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "v");
    assert!((99..=100).contains(&q::<i64>(&mut c, &["TTL", "d"])));
    let _: () = q(&mut c, &["SET", "d", "other"]);
    assert_eq!(q::<i64>(&mut c, &["COPY", "s", "d"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "d"]), "other");
    assert_eq!(q::<i64>(&mut c, &["COPY", "s", "d", "replace"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "d"]), "v");
    assert_eq!(q::<i64>(&mut c, &["COPY", "nokey", "d"]), 0);

    assert_eq!(err(&mut c, &["COPY", "s", "s"]), SAME);
    assert_eq!(err(&mut c, &["COPY", "s", "s", "DB", "0"]), SAME);
    assert_eq!(err(&mut c, &["COPY", "s", "x", "DB", "16"]), DB_RANGE);
    assert_eq!(err(&mut c, &["COPY", "s", "x", "DB", "-1"]), DB_RANGE);
    assert_eq!(err(&mut c, &["COPY", "nokey", "x", "DB", "99"]), DB_RANGE);
    assert_eq!(err(&mut c, &["COPY", "s", "x", "DB", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["COPY", "s", "x", "DB"]), SYNTAX);
    assert_eq!(err(&mut c, &["COPY", "s", "x", "foo"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["COPY", "s"]),
        "ERR wrong number of arguments for 'copy' command"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "x"]), 0);

    // Same name, other database.
    assert_eq!(q::<i64>(&mut c, &["COPY", "s", "s", "DB", "1"]), 1);
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "v");
    assert!(q::<i64>(&mut c, &["TTL", "s"]) > 90);
    let _: () = q(&mut c, &["SET", "t", "old"]);
    // COPY from database 1 back to 0 and again to 1 with REPLACE.
    assert_eq!(q::<i64>(&mut c, &["COPY", "t", "t", "DB", "0"]), 1);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<String>(&mut c, &["GET", "t"]), "old");
    assert_eq!(q::<i64>(&mut c, &["COPY", "s", "t", "DB", "1"]), 0);
    assert_eq!(
        q::<i64>(&mut c, &["COPY", "s", "t", "REPLACE", "DB", "1"]),
        1
    );
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "t"]), "v");
    assert!(q::<i64>(&mut c, &["TTL", "t"]) > 90);
}

#[test]
fn move_between_selected_databases() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "m", "v", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["MOVE", "m", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "m"]), 0);
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "m"]), "v");
    assert!((99..=100).contains(&q::<i64>(&mut c, &["TTL", "m"])));
    assert_eq!(err(&mut c, &["MOVE", "m", "1"]), SAME);
    assert_eq!(q::<i64>(&mut c, &["MOVE", "m", "0"]), 1);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<String>(&mut c, &["GET", "m"]), "v");

    // The key exists in the target: nothing moves.
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: () = q(&mut c, &["SET", "m", "other"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut c, &["MOVE", "m", "1"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "m"]), "v");
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(q::<String>(&mut c, &["GET", "m"]), "other");
    let _: () = q(&mut c, &["SELECT", "0"]);

    assert_eq!(q::<i64>(&mut c, &["MOVE", "nokey", "1"]), 0);
    assert_eq!(err(&mut c, &["MOVE", "m", "16"]), DB_RANGE);
    assert_eq!(err(&mut c, &["MOVE", "m", "-1"]), DB_RANGE);
    assert_eq!(err(&mut c, &["MOVE", "m", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["MOVE", "m", "99999999999"]), NOT_INT);
    assert_eq!(err(&mut c, &["MOVE", "m", "0"]), SAME);
    assert_eq!(
        err(&mut c, &["MOVE", "m"]),
        "ERR wrong number of arguments for 'move' command"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "m"]), "v");
}

#[test]
fn keys_matches_glob_patterns() {
    let s = TestServer::start();
    let mut c = s.client();
    let names = [
        "hello", "hallo", "hxllo", "hllo", "heeeello", "other", "h*llo",
    ];
    for k in names {
        let _: () = q(&mut c, &["SET", k, "v"]);
    }
    let _: () = q(&mut c, &["SELECT", "3"]);
    let _: () = q(&mut c, &["SET", "hello3", "v"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let keys = |c: &mut Connection, pat: &str| -> HashSet<String> {
        q::<Vec<String>>(c, &["KEYS", pat]).into_iter().collect()
    };
    let set = |v: &[&str]| -> HashSet<String> { v.iter().map(|s| s.to_string()).collect() };
    assert_eq!(keys(&mut c, "*"), set(&names));
    assert_eq!(
        keys(&mut c, "h?llo"),
        set(&["hello", "hallo", "hxllo", "h*llo"])
    );
    assert_eq!(
        keys(&mut c, "h*llo"),
        set(&["hello", "hallo", "hxllo", "hllo", "heeeello", "h*llo"])
    );
    assert_eq!(keys(&mut c, "h[ae]llo"), set(&["hello", "hallo"]));
    assert_eq!(keys(&mut c, "h[^e]llo"), set(&["hallo", "hxllo", "h*llo"]));
    assert_eq!(keys(&mut c, "h[a-b]llo"), set(&["hallo"]));
    assert_eq!(keys(&mut c, "h\\*llo"), set(&["h*llo"]));
    assert_eq!(keys(&mut c, "nomatch*"), set(&[]));
    // Each database is its own keyspace, and expired keys are not listed.
    let _: () = q(&mut c, &["SET", "short", "v", "PX", "20"]);
    assert!(eventually(Duration::from_secs(5), || !keys(&mut c, "*")
        .contains("short")));
    assert!(!keys(&mut c, "*").contains("hello3"));
    assert_eq!(
        err(&mut c, &["KEYS"]),
        "ERR wrong number of arguments for 'keys' command"
    );
}

/// Iterates SCAN to the end with extra options; returns every key and how often it came back.
fn scan_all(c: &mut Connection, opts: &[&str]) -> HashMap<String, usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut cursor = "0".to_string();
    for _ in 0..10_000 {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(opts);
        let (next, keys): (String, Vec<String>) = q(c, &args);
        next.parse::<u64>()
            .unwrap_or_else(|_| panic!("cursor {next:?} is not an integer"));
        for k in keys {
            *seen.entry(k).or_default() += 1;
        }
        if next == "0" {
            return seen;
        }
        cursor = next;
    }
    panic!("SCAN {opts:?} did not finish");
}

#[test]
fn scan_returns_every_key_exactly_once() {
    let s = TestServer::start();
    let mut c = s.client();
    set_many(&mut c, "key:", 2000, &[]);
    let _: () = q(&mut c, &["SELECT", "2"]);
    set_many(&mut c, "elsewhere:", 10, &[]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let all: HashSet<String> = (0..2000).map(|i| format!("key:{i}")).collect();

    for opts in [
        &[][..],
        &["COUNT", "100"][..],
        &["COUNT", "1"][..],
        &["TYPE", "string"][..],
        &["type", "STRING", "count", "7"][..],
    ] {
        let seen = scan_all(&mut c, opts);
        assert_eq!(seen.len(), 2000, "{opts:?}");
        assert!(
            seen.values().all(|&n| n == 1),
            "{opts:?}: a key came back twice"
        );
        assert_eq!(
            seen.keys().cloned().collect::<HashSet<_>>(),
            all,
            "{opts:?}"
        );
    }
    let seen = scan_all(&mut c, &["MATCH", "key:1*", "COUNT", "50"]);
    let want: HashSet<String> = all
        .iter()
        .filter(|k| k.starts_with("key:1"))
        .cloned()
        .collect();
    assert_eq!(seen.len(), want.len());
    assert!(seen.values().all(|&n| n == 1));
    assert_eq!(seen.keys().cloned().collect::<HashSet<_>>(), want);
    assert!(scan_all(&mut c, &["TYPE", "hash"]).is_empty());
    assert!(scan_all(&mut c, &["MATCH", "none:*"]).is_empty());
    assert_eq!(
        scan_all(&mut c, &["MATCH", "*", "COUNT", "500"]).len(),
        2000
    );

    // COUNT bounds one call: the default (10) never returns more than 10 keys.
    let (next, keys): (String, Vec<String>) = q(&mut c, &["SCAN", "0"]);
    assert_ne!(next, "0");
    assert!(!keys.is_empty() && keys.len() <= 10, "{}", keys.len());
    // A huge COUNT finishes in one call.
    let (next, keys): (String, Vec<String>) = q(&mut c, &["SCAN", "0", "COUNT", "100000"]);
    assert_eq!(next, "0");
    assert_eq!(keys.len(), 2000);
}

/// Iterates SCAN to the end; returns every key with how often it came back, and the calls.
/// `between(call)` runs before each call after the first (to change a setting mid-iteration).
fn scan_calls(
    c: &mut Connection,
    opts: &[&str],
    mut between: impl FnMut(&mut Connection, usize),
) -> (HashMap<String, usize>, usize) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut cursor = "0".to_string();
    for call in 1..=20_000 {
        if call > 1 {
            between(c, call);
        }
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(opts);
        let (next, keys): (String, Vec<String>) = q(c, &args);
        for k in keys {
            *seen.entry(k).or_default() += 1;
        }
        if next == "0" {
            return (seen, call);
        }
        cursor = next;
    }
    panic!("SCAN {opts:?} did not finish");
}

/// In a database big enough (140,000 keys, `scan-prefix-seek-min-keys` set to 100,000), SCAN
/// MATCH with a literal prefix reads only the keys with that prefix, seeking from slot to slot:
/// the calls a full iteration takes follow the 16,384 slots plus the keys found, not the keys
/// stored (a walk of them all needs 1,400 calls of COUNT 100). The keys returned are the
/// walk's, each once, with the setting off too, and an iteration may switch between the two
/// ways midway.
#[test]
fn scan_match_with_a_literal_prefix_seeks_it_slot_by_slot() {
    let s = TestServer::start_with(&[
        "--enable-debug-command",
        "yes",
        "--scan-prefix-seek-min-keys",
        "100000",
    ]);
    let mut c = s.client();
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "140000"]);
    set_many(&mut c, "user:", 300, &[]);
    set_many(&mut c, "{tag}:", 5, &[]);
    let _: () = q(&mut c, &["SET", "user*literal", "v"]);
    let _: () = q(&mut c, &["SET", "usex", "v"]); // sorts right after the prefix's keys
    let _: () = q(&mut c, &["HSET", "user:hash", "f", "v"]);
    let _: () = q(&mut c, &["SET", "user:gone", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    let users: HashSet<String> = (0..300)
        .map(|i| format!("user:{i}"))
        .chain(["user:hash".to_string()])
        .collect();
    let set = |c: &mut Connection, on: &str| {
        let _: () = q(c, &["CONFIG", "SET", "scan-prefix-seek", on]);
    };
    let keys_matching = |c: &mut Connection, pattern: &str| -> HashSet<String> {
        q::<Vec<String>>(c, &["KEYS", pattern])
            .into_iter()
            .collect()
    };

    let (seen, calls) = scan_calls(&mut c, &["MATCH", "user:*", "COUNT", "100"], |_, _| {});
    assert!(seen.values().all(|&n| n == 1), "a key came back twice");
    assert_eq!(seen.keys().cloned().collect::<HashSet<_>>(), users);
    assert!(calls < 400, "{calls} calls: the prefix was not sought");

    set(&mut c, "no");
    let (seen, walked) = scan_calls(&mut c, &["MATCH", "user:*", "COUNT", "100"], |_, _| {});
    assert_eq!(seen.keys().cloned().collect::<HashSet<_>>(), users);
    assert!(walked > 1_000, "{walked} calls with the setting off");
    assert_eq!(keys_matching(&mut c, "user:*"), users);

    // Switched on after 20 calls of a walk, then off again after 100 of the seeking: each key
    // still comes back exactly once.
    let (seen, _) = scan_calls(
        &mut c,
        &["MATCH", "user:*", "COUNT", "100"],
        |c, call| match call {
            21 => set(c, "yes"),
            121 => set(c, "no"),
            _ => {}
        },
    );
    assert!(seen.values().all(|&n| n == 1), "a key came back twice");
    assert_eq!(seen.keys().cloned().collect::<HashSet<_>>(), users);

    set(&mut c, "yes");
    assert_eq!(keys_matching(&mut c, "user:*"), users);
    let (seen, _) = scan_calls(
        &mut c,
        &["MATCH", "user:*", "TYPE", "hash", "COUNT", "1000"],
        |_, _| {},
    );
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["user:hash"]);
    // An escaped wildcard is part of the prefix.
    let (seen, _) = scan_calls(
        &mut c,
        &["MATCH", "user\\*lit*", "COUNT", "1000"],
        |_, _| {},
    );
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["user*literal"]);
    // A whole hash tag in the prefix: its one slot, so one call of COUNT 10 covers it.
    let (seen, calls) = scan_calls(&mut c, &["MATCH", "{tag}:*"], |_, _| {});
    assert_eq!(seen.len(), 5);
    assert_eq!(calls, 1);
    let (seen, _) = scan_calls(&mut c, &["MATCH", "nobody:*", "COUNT", "1000"], |_, _| {});
    assert!(seen.is_empty());
}

#[test]
fn scan_errors() {
    let s = TestServer::start();
    let mut c = s.client();
    set_many(&mut c, "k", 30, &[]);
    let invalid = "ERR invalid cursor";
    assert_eq!(err(&mut c, &["SCAN", "abc"]), invalid);
    assert_eq!(err(&mut c, &["SCAN", "-1"]), invalid);
    assert_eq!(err(&mut c, &["SCAN", " 0"]), invalid);
    // kvik hands out cursors: one it never gave is refused rather than misread.
    assert_eq!(err(&mut c, &["SCAN", "12345"]), invalid);
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "-1"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["SCAN", "0", "MATCH"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["SCAN", "0", "TYPE", "string", "TYPE"]),
        SYNTAX
    );
    assert_eq!(err(&mut c, &["SCAN", "0", "foo", "bar"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["SCAN"]),
        "ERR wrong number of arguments for 'scan' command"
    );
    // A cursor belongs to its database.
    let (next, _): (String, Vec<String>) = q(&mut c, &["SCAN", "0", "COUNT", "5"]);
    assert_ne!(next, "0");
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(err(&mut c, &["SCAN", &next]), invalid);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let (_, keys): (String, Vec<String>) = q(&mut c, &["SCAN", &next, "COUNT", "5"]);
    assert_eq!(keys.len(), 5);
    // Later options win, as in Redis.
    let (_, keys): (String, Vec<String>) = q(&mut c, &["SCAN", "0", "COUNT", "1", "COUNT", "3"]);
    assert_eq!(keys.len(), 3);
}

#[test]
fn redis_cli_scan_with_pattern() {
    let s = TestServer::start();
    let mut c = s.client();
    set_many(&mut c, "cli:", 300, &[]);
    set_many(&mut c, "other:", 100, &[]);
    let out = redis_cli(s.port, &["--scan", "--pattern", "cli:*"]);
    let got: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    let unique: HashSet<&str> = got.iter().copied().collect();
    assert_eq!(got.len(), 300, "redis-cli output: {out:.200}");
    assert_eq!(unique.len(), 300);
    assert!(unique.iter().all(|k| k.starts_with("cli:")));
    let out = redis_cli(s.port, &["--scan"]);
    assert_eq!(out.lines().filter(|l| !l.is_empty()).count(), 400);
}

#[test]
fn randomkey_on_empty_and_filled_databases() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(q::<Option<String>>(&mut c, &["RANDOMKEY"]), None);
    let _: () = q(&mut c, &["SET", "only", "v"]);
    for _ in 0..20 {
        assert_eq!(
            q::<Option<String>>(&mut c, &["RANDOMKEY"]).as_deref(),
            Some("only")
        );
    }
    // Another database is still empty.
    let _: () = q(&mut c, &["SELECT", "5"]);
    assert_eq!(q::<Option<String>>(&mut c, &["RANDOMKEY"]), None);
    set_many(&mut c, "r", 50, &[]);
    let mut seen = HashSet::new();
    for _ in 0..60 {
        let k: String = q::<Option<String>>(&mut c, &["RANDOMKEY"]).expect("a key");
        assert!(k.starts_with('r'), "{k}");
        seen.insert(k);
    }
    assert!(seen.len() > 1, "RANDOMKEY always returned {seen:?}");
    // Only expired keys: nil.
    let _: () = q(&mut c, &["SELECT", "6"]);
    set_many(&mut c, "x", 5, &["PX", "20"]);
    assert!(eventually(Duration::from_secs(5), || {
        q::<Option<String>>(&mut c, &["RANDOMKEY"]).is_none()
    }));
    assert_eq!(
        err(&mut c, &["RANDOMKEY", "x"]),
        "ERR wrong number of arguments for 'randomkey' command"
    );
}

#[test]
fn object_subcommands() {
    let s = TestServer::start();
    let mut c = s.client();
    let long = "a".repeat(45);
    let cases = [
        ("12345", "int"),
        ("-9223372036854775808", "int"),
        ("9223372036854775808", "embstr"),
        ("01", "embstr"),
        ("hello", "embstr"),
        ("", "embstr"),
        (&long[..44], "embstr"),
        (&long[..], "raw"),
    ];
    for (value, enc) in cases {
        let _: () = q(&mut c, &["SET", "k", value]);
        assert_eq!(
            q::<String>(&mut c, &["OBJECT", "ENCODING", "k"]),
            enc,
            "{value:?}"
        );
    }
    assert_eq!(
        q::<Option<String>>(&mut c, &["object", "encoding", "nokey"]),
        None
    );

    let _: () = q(&mut c, &["SET", "k", "hello"]);
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "REFCOUNT", "k"]), 1);
    let _: () = q(&mut c, &["SET", "small", "42"]);
    assert_eq!(
        q::<i64>(&mut c, &["OBJECT", "REFCOUNT", "small"]),
        2147483647
    );
    assert_eq!(
        q::<Option<i64>>(&mut c, &["OBJECT", "REFCOUNT", "nokey"]),
        None
    );
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "IDLETIME", "k"]), 0);
    assert_eq!(
        q::<Option<i64>>(&mut c, &["OBJECT", "IDLETIME", "nokey"]),
        None
    );
    assert_eq!(q::<Option<i64>>(&mut c, &["OBJECT", "FREQ", "nokey"]), None);
    assert_eq!(
        err(&mut c, &["OBJECT", "FREQ", "k"]),
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note \
         that when switching between policies at runtime LRU and LFU data will take some time to \
         adjust."
    );

    let help: Vec<String> = q(&mut c, &["OBJECT", "HELP"]);
    assert!(help[0].starts_with("OBJECT <subcommand>"), "{help:?}");
    for sub in [
        "ENCODING <key>",
        "FREQ <key>",
        "IDLETIME <key>",
        "REFCOUNT <key>",
        "HELP",
    ] {
        assert!(help.iter().any(|l| l == sub), "{sub} missing from {help:?}");
    }
    assert_eq!(
        err(&mut c, &["OBJECT"]),
        "ERR wrong number of arguments for 'object' command"
    );
    assert_eq!(
        err(&mut c, &["OBJECT", "foo", "k"]),
        "ERR unknown subcommand 'foo'. Try OBJECT HELP."
    );
    assert_eq!(
        err(&mut c, &["OBJECT", "ENCODING"]),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
    assert_eq!(
        err(&mut c, &["OBJECT", "HELP", "x"]),
        "ERR wrong number of arguments for 'object|help' command"
    );
}

#[test]
fn active_expiry_removes_keys_nobody_reads() {
    let s = TestServer::start_with(&["--hz", "50"]);
    let mut c = s.client();
    set_many(&mut c, "ax:", 500, &["PX", "50"]);
    // Without reading the keys, wait for the timer's cycle to delete them: INFO stats counts
    // every key the cycle deleted.
    let mut last = None;
    let done = eventually(Duration::from_secs(10), || {
        last = info_field(&mut c, "stats", "expired_keys");
        last.is_some_and(|n| n >= 500)
    });
    assert!(
        done,
        "INFO stats expired_keys is {last:?} after 10 s, want >= 500"
    );
    assert!(q::<Vec<String>>(&mut c, &["KEYS", "*"]).is_empty());
}
