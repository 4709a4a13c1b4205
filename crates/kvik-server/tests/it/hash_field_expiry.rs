//! Integration tests: hash field expiry (Redis 7.4's HEXPIRE HPEXPIRE HEXPIREAT HPEXPIREAT HTTL
//! HPTTL HEXPIRETIME HPEXPIRETIME HPERSIST).
//!
//! The local redis-server is 7.0, which lacks these commands, so the expected replies and error
//! texts are Redis 7.4's as its source (t_hash.c) and the redis.io command pages give them.
//! No test asserts a timing: expiry is waited for with bounded polling.

use crate::common::*;
use redis::Connection;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn ints(con: &mut Connection, args: &[&str]) -> Vec<i64> {
    q(con, args)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn hexpire_family_replies_per_field() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: i64 = q(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2", "f3", "v3"]);
    // A missing key: -2 for every field, and no key is created.
    assert_eq!(
        ints(
            &mut c,
            &["HEXPIRE", "nokey", "100", "FIELDS", "2", "a", "b"]
        ),
        [-2, -2]
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "nokey"]), 0);
    // Set, missing field.
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "h", "100", "FIELDS", "2", "f1", "nof"]),
        [1, -2]
    );
    let ttl = ints(&mut c, &["HTTL", "h", "FIELDS", "3", "f1", "f2", "nof"]);
    assert!(ttl[0] > 90 && ttl[0] <= 100, "{ttl:?}");
    assert_eq!(&ttl[1..], [-1, -2]);
    // NX / XX against a field with a TTL (f1) and one without (f2), at fixed absolute times.
    let t = now_ms() + 10_000_000;
    let at = |d: i64| (t + d).to_string();
    assert_eq!(
        ints(&mut c, &["HPEXPIREAT", "h", &at(0), "FIELDS", "1", "f1"]),
        [1]
    );
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", &at(1), "NX", "FIELDS", "2", "f1", "f2"]
        ),
        [0, 1]
    );
    assert_eq!(ints(&mut c, &["HPERSIST", "h", "FIELDS", "1", "f2"]), [1]);
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", &at(1), "XX", "FIELDS", "2", "f1", "f2"]
        ),
        [1, 0]
    );
    // GT: no TTL counts as infinite (never greater), equal is not greater; LT: always less
    // than no TTL, equal is not less.
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", &at(1), "GT", "FIELDS", "2", "f1", "f2"]
        ),
        [0, 0]
    );
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", &at(2), "gt", "FIELDS", "1", "f1"]
        ),
        [1]
    );
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", &at(2), "LT", "FIELDS", "2", "f1", "f2"]
        ),
        [0, 1]
    );
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", &at(1), "lt", "FIELDS", "1", "f1"]
        ),
        [1]
    );
    assert_eq!(
        ints(&mut c, &["HPEXPIRETIME", "h", "FIELDS", "2", "f1", "f2"]),
        [t + 1, t + 2]
    );
    // The same field twice: the second sees what the first did.
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", &at(5), "GT", "FIELDS", "2", "f1", "f1"]
        ),
        [1, 0]
    );
    // Absolute forms and the time readers.
    let at = now_ms() + 1_000_000;
    let at_s = (at / 1000).to_string();
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", &at.to_string(), "FIELDS", "1", "f1"]
        ),
        [1]
    );
    assert_eq!(
        ints(&mut c, &["HPEXPIRETIME", "h", "FIELDS", "2", "f1", "f3"]),
        [at, -1]
    );
    assert_eq!(
        ints(&mut c, &["HEXPIRETIME", "h", "FIELDS", "1", "f1"]),
        [(at + 999) / 1000]
    );
    let pttl = ints(&mut c, &["HPTTL", "h", "FIELDS", "1", "f1"])[0];
    assert!(pttl > 990_000 && pttl <= 1_000_000, "{pttl}");
    assert_eq!(
        ints(&mut c, &["HEXPIREAT", "h", &at_s, "FIELDS", "1", "f2"]),
        [1]
    );
    assert_eq!(
        ints(&mut c, &["HEXPIRETIME", "h", "FIELDS", "1", "f2"]),
        [at / 1000]
    );
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "h", "5000000", "FIELDS", "1", "f3"]),
        [1]
    );
    let pttl = ints(&mut c, &["HPTTL", "h", "FIELDS", "1", "f3"])[0];
    assert!(pttl > 4_990_000 && pttl <= 5_000_000, "{pttl}");
    // HPERSIST: 1 removed, -1 no TTL, -2 no field; missing key -2.
    assert_eq!(
        ints(&mut c, &["HPERSIST", "h", "FIELDS", "3", "f3", "f3", "nof"]),
        [1, -1, -2]
    );
    assert_eq!(ints(&mut c, &["HTTL", "h", "FIELDS", "1", "f3"]), [-1]);
    // Many fields, each named twice (past a handful, repeats are found by hashing).
    let many: Vec<String> = (0..40).map(|i| format!("m{}", i % 20)).collect();
    let mut hset = vec!["HSET", "big"];
    for f in &many[..20] {
        hset.extend([f.as_str(), "v"]);
    }
    let _: i64 = q(&mut c, &hset);
    fn with_fields<'a>(cmd: &[&'a str], fields: &'a [String]) -> Vec<&'a str> {
        let mut args: Vec<&str> = cmd.to_vec();
        args.push("FIELDS");
        args.push(if fields.len() == 20 { "20" } else { "40" });
        args.extend(fields.iter().map(String::as_str));
        args
    }
    let expire = with_fields(&["HEXPIRE", "big", "1000"], &many[..20]);
    assert_eq!(ints(&mut c, &expire), vec![1; 20]);
    let persist = with_fields(&["HPERSIST", "big"], &many);
    assert_eq!(ints(&mut c, &persist), [vec![1; 20], vec![-1; 20]].concat());
    assert_eq!(
        ints(&mut c, &["HPERSIST", "nokey", "FIELDS", "1", "a"]),
        [-2]
    );
    assert_eq!(
        ints(&mut c, &["HTTL", "nokey", "FIELDS", "2", "a", "b"]),
        [-2, -2]
    );
    // A time of 0 or in the past deletes (2), after the condition is checked.
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "h", "0", "NX", "FIELDS", "1", "f1"]),
        [0]
    );
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "h", "0", "FIELDS", "2", "f1", "f1"]),
        [2, -2]
    );
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "h", "f1"]), None);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 2);
    assert_eq!(
        ints(&mut c, &["HPEXPIREAT", "h", "1", "FIELDS", "2", "f2", "f3"]),
        [2, 2]
    );
    // The last field went: so did the key.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
}

#[test]
fn hexpire_family_errors() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "str", "x"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f", "v"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    // WRONGTYPE comes before any argument error.
    assert_eq!(
        err(&mut c, &["HEXPIRE", "str", "x", "FIELDS", "1", "f"]),
        wrongtype
    );
    assert_eq!(
        err(&mut c, &["HTTL", "str", "NOFIELDS", "1", "f"]),
        wrongtype
    );
    assert_eq!(
        err(&mut c, &["HPERSIST", "str", "FIELDS", "0", "f"]),
        wrongtype
    );
    for cmd in ["HEXPIRE", "HPEXPIRE", "HEXPIREAT", "HPEXPIREAT"] {
        assert_eq!(
            err(&mut c, &[cmd, "h", "1", "FIELDS"]),
            format!(
                "ERR wrong number of arguments for '{}' command",
                cmd.to_lowercase()
            )
        );
        assert_eq!(
            err(&mut c, &[cmd, "h", "abc", "FIELDS", "1", "f"]),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err(&mut c, &[cmd, "h", "-1", "FIELDS", "1", "f"]),
            "ERR invalid expire time, must be >= 0"
        );
        assert_eq!(
            err(&mut c, &[cmd, "h", "100", "BADCOND", "FIELDS", "1", "f"]),
            "ERR Mandatory argument FIELDS is missing or not at the right position"
        );
        for n in ["0", "-1", "x"] {
            assert_eq!(
                err(&mut c, &[cmd, "h", "100", "FIELDS", n, "f"]),
                "ERR Parameter `numFields` should be greater than 0"
            );
        }
        for n in ["2", "1"] {
            let args: Vec<&str> = if n == "2" {
                vec![cmd, "h", "100", "FIELDS", n, "f"]
            } else {
                vec![cmd, "h", "100", "NX", "FIELDS", n, "f", "g"]
            };
            assert_eq!(
                err(&mut c, &args),
                "ERR The `numfields` parameter must match the number of arguments"
            );
        }
    }
    // Out of range: past 2^46 - 1 ms (Redis 7.4's limit), in the command's own name.
    let too_far_s = (((1i64 << 48) - 1) >> 2) / 1000 + 1;
    assert_eq!(
        err(
            &mut c,
            &["HEXPIRE", "h", &too_far_s.to_string(), "FIELDS", "1", "f"]
        ),
        "ERR invalid expire time in 'hexpire' command"
    );
    let too_far_ms = ((1i64 << 48) - 1) >> 2;
    assert_eq!(
        err(
            &mut c,
            &[
                "HPEXPIREAT",
                "h",
                &(too_far_ms + 1).to_string(),
                "FIELDS",
                "1",
                "f"
            ]
        ),
        "ERR invalid expire time in 'hpexpireat' command"
    );
    assert_eq!(
        err(
            &mut c,
            &["HPEXPIRE", "h", &too_far_ms.to_string(), "FIELDS", "1", "f"]
        ),
        "ERR invalid expire time in 'hpexpire' command"
    );
    assert_eq!(
        ints(
            &mut c,
            &[
                "HPEXPIREAT",
                "h",
                &too_far_ms.to_string(),
                "FIELDS",
                "1",
                "f"
            ]
        ),
        [1]
    );
    for cmd in ["HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME", "HPERSIST"] {
        assert_eq!(
            err(&mut c, &[cmd, "h", "FIELDS", "1"]),
            format!(
                "ERR wrong number of arguments for '{}' command",
                cmd.to_lowercase()
            )
        );
        assert_eq!(
            err(&mut c, &[cmd, "h", "NOTFIELDS", "1", "f"]),
            "ERR Mandatory argument FIELDS is missing or not at the right position"
        );
        for n in ["0", "x"] {
            assert_eq!(
                err(&mut c, &[cmd, "h", "FIELDS", n, "f"]),
                "ERR Number of fields must be a positive integer"
            );
        }
        assert_eq!(
            err(&mut c, &[cmd, "h", "FIELDS", "2", "f"]),
            "ERR The `numfields` parameter must match the number of arguments"
        );
        // Argument errors also on a missing key.
        assert_eq!(
            err(&mut c, &[cmd, "nokey", "FIELDS", "3", "f"]),
            "ERR The `numfields` parameter must match the number of arguments"
        );
    }
}

/// Every read command, on a hash with one field expired (active expiry off, so only the reads'
/// own checks hide it).
#[test]
fn reads_never_return_an_expired_field() {
    let s = TestServer::start_with(&["--active-expire", "no"]);
    let mut c = s.client();
    let _: i64 = q(&mut c, &["HSET", "h", "dead", "12345", "live", "v"]);
    // HGET of a small hash fills the hot cache; a TTL must take it out.
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "dead"]), "12345");
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "h", "50", "FIELDS", "1", "dead"]),
        [1]
    );
    assert!(eventually(WAIT, || q::<Option<String>>(
        &mut c,
        &["HGET", "h", "dead"]
    )
    .is_none()));
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "h", "dead", "live"]),
        [None, Some("v".into())]
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["HGETALL", "h"]), ["live", "v"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "h"]), ["live"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["HVALS", "h"]), ["v"]);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "dead"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "dead"]), 0);
    // As in Redis 7.4, HLEN counts a field that expired until it is removed (by active expiry
    // or a write that meets it: the HPERSIST below).
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 2);
    let (cursor, found): (String, Vec<String>) = q(&mut c, &["HSCAN", "h", "0"]);
    assert_eq!(
        (cursor.as_str(), found),
        ("0", vec!["live".into(), "v".into()])
    );
    for _ in 0..20 {
        assert_eq!(q::<String>(&mut c, &["HRANDFIELD", "h"]), "live");
    }
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HRANDFIELD", "h", "5"]),
        ["live"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HRANDFIELD", "h", "-3"]),
        ["live"; 3]
    );
    assert_eq!(
        ints(&mut c, &["HTTL", "h", "FIELDS", "2", "dead", "live"]),
        [-2, -1]
    );
    assert_eq!(
        ints(&mut c, &["HPERSIST", "h", "FIELDS", "1", "dead"]),
        [-2]
    );
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "h", "10", "FIELDS", "1", "dead"]),
        [-2]
    );
    // SORT ... BY / GET hash fields.
    let _: i64 = q(&mut c, &["RPUSH", "l", "x"]);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["SORT", "l", "BY", "nosort", "GET", "h->dead"]),
        [None]
    );
    // DUMP / RESTORE carries the TTLs: the copy hides the expired field too.
    let dump: Vec<u8> = q(&mut c, &["DUMP", "h"]);
    let mut restore = redis::cmd("RESTORE");
    restore.arg("copy").arg(0).arg(dump);
    let _: () = restore.query(&mut c).unwrap();
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HGETALL", "copy"]),
        ["live", "v"]
    );
    // HINCRBY over an expired field starts from 0 with no TTL; the write removes the old one.
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "h", "20", "FIELDS", "1", "live"]),
        [1]
    );
    assert!(eventually(WAIT, || q::<Option<String>>(
        &mut c,
        &["HGET", "h", "live"]
    )
    .is_none()));
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "live", "7"]), 7);
    assert_eq!(ints(&mut c, &["HTTL", "h", "FIELDS", "1", "live"]), [-1]);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 1);
    // HDEL of an expired field deletes nothing (but removes it), and the key with its last.
    let _: i64 = q(&mut c, &["HSET", "g", "only", "v"]);
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "g", "20", "FIELDS", "1", "only"]),
        [1]
    );
    assert!(eventually(WAIT, || q::<Option<String>>(
        &mut c,
        &["HGET", "g", "only"]
    )
    .is_none()));
    assert_eq!(q::<Option<String>>(&mut c, &["HRANDFIELD", "g"]), None);
    assert!(q::<Vec<String>>(&mut c, &["HRANDFIELD", "g", "-5"]).is_empty());
    assert!(q::<Vec<String>>(&mut c, &["HRANDFIELD", "g", "5", "WITHVALUES"]).is_empty());
    assert!(q::<Vec<String>>(&mut c, &["HGETALL", "g"]).is_empty());
    assert_eq!(q::<i64>(&mut c, &["HDEL", "g", "only"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "g"]), 0);
}

/// A small hash with field TTLs is read from the hot cache while its fields live (INFO
/// `cache_hits`, not timings); a write of it, a TTL set on a field, and the expiry of a field
/// each take the cached copy out, so no read sees a field the copy outlived.
#[test]
fn a_small_hash_with_field_ttls_is_read_from_the_cache_while_its_fields_live() {
    let s = TestServer::start_with(&["--active-expire", "no"]);
    let mut c = s.client();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "h", "1000", "FIELDS", "1", "a"]),
        [1]
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]), "1"); // read from RocksDB, cached
    let hits = stat(&mut c, "cache_hits");
    for _ in 0..10 {
        assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]), "1");
        assert_eq!(
            q::<Vec<String>>(&mut c, &["HGETALL", "h"]),
            ["a", "1", "b", "2"]
        );
    }
    assert_eq!(stat(&mut c, "cache_hits") - hits, 20);

    // A write takes the copy out; the next read fills it with what was written.
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "b", "3"]), 0);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "b"]), "3");
    assert_eq!(ints(&mut c, &["HTTL", "h", "FIELDS", "2", "a", "b"])[1], -1);
    // A TTL set on a field of the cached hash: the copy does not outlive it.
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "h", "1", "FIELDS", "1", "b"]),
        [1]
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "h", "b"]), None);
    assert_eq!(q::<Vec<String>>(&mut c, &["HGETALL", "h"]), ["a", "1"]);

    // A field that expires while its hash is cached: the copy stops answering.
    let _: i64 = q(&mut c, &["HSET", "g", "x", "1", "y", "2"]);
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "g", "200", "FIELDS", "1", "x"]),
        [1]
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "g", "y"]), "2");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "g", "x"]), None);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "g", "x", "y"]),
        [None, Some("2".into())]
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["HGETALL", "g"]), ["y", "2"]);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "g", "x"]), 0);
    // As when not cached: HLEN counts the expired field until it is removed ...
    assert_eq!(q::<i64>(&mut c, &["HLEN", "g"]), 2);
    let _: () = q(&mut c, &["CONFIG", "SET", "active-expire", "yes"]);
    assert!(eventually(WAIT, || q::<i64>(&mut c, &["HLEN", "g"]) == 1));
    // ... after which the hash is cached again.
    assert_eq!(q::<String>(&mut c, &["HGET", "g", "y"]), "2");
    let hits = stat(&mut c, "cache_hits");
    assert_eq!(q::<String>(&mut c, &["HGET", "g", "y"]), "2");
    assert_eq!(stat(&mut c, "cache_hits") - hits, 1);
}

/// A hash with field TTLs bigger than `cache-max-hash-fields` is cached as its meta and its
/// fields one by one (INFO `cache_hits`), each field until it expires; writes take it out.
#[test]
fn a_big_hash_with_field_ttls_has_its_fields_cached_until_each_expires() {
    let s = TestServer::start_with(&["--active-expire", "no", "--cache-max-hash-fields", "4"]);
    let mut c = s.client();
    let mut hset = vec!["HSET".to_string(), "big".into()];
    for i in 0..10 {
        hset.extend([format!("f{i}"), format!("v{i}")]);
    }
    let args: Vec<&str> = hset.iter().map(String::as_str).collect();
    assert_eq!(q::<i64>(&mut c, &args), 10);
    assert_eq!(
        ints(&mut c, &["HEXPIRE", "big", "1000", "FIELDS", "1", "f0"]),
        [1]
    );
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "big", "300", "FIELDS", "1", "f1"]),
        [1]
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "big", "f2"]), "v2"); // read, cached
    assert_eq!(q::<String>(&mut c, &["HGET", "big", "f1"]), "v1"); // cached until it expires
    let hits = stat(&mut c, "cache_hits");
    for _ in 0..10 {
        assert_eq!(q::<String>(&mut c, &["HGET", "big", "f2"]), "v2");
    }
    let hits = stat(&mut c, "cache_hits") - hits;
    assert!(hits >= 10, "cache hits {hits}");

    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "big", "f1"]), None);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "big", "f1", "f2"]),
        [None, Some("v2".into())]
    );
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "big", "f1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 10); // until active expiry removes it
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "big"]).len(), 9);

    // A write takes the cached copy out; so does a TTL set on a cached field.
    assert_eq!(q::<i64>(&mut c, &["HSET", "big", "f2", "new"]), 0);
    assert_eq!(q::<String>(&mut c, &["HGET", "big", "f2"]), "new");
    assert_eq!(q::<String>(&mut c, &["HGET", "big", "f3"]), "v3");
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "big", "1", "FIELDS", "1", "f3"]),
        [1]
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "big", "f3"]), None);
    let _: () = q(&mut c, &["CONFIG", "SET", "active-expire", "yes"]);
    assert!(eventually(WAIT, || q::<i64>(&mut c, &["HLEN", "big"]) == 8));
    assert_eq!(q::<String>(&mut c, &["HGET", "big", "f0"]), "v0");
}

/// Random writes (HSET, HDEL, HINCRBY, HEXPIRE, HPERSIST) and reads of hashes with field TTLs,
/// small and big (`cache-max-hash-fields 4`, up to 8 fields), every reply against a model: a
/// copy the cache holds, whole or field by field, never outlives a write. No field expires
/// during the run (TTLs of an hour).
#[test]
fn cached_hashes_with_field_ttls_follow_every_write() {
    use rand::{Rng, SeedableRng};
    use std::collections::{BTreeMap, HashMap};
    let s = TestServer::start_with(&["--cache-max-hash-fields", "4"]);
    let mut c = s.client();
    // key -> field -> (value, has a TTL)
    let mut model: HashMap<String, BTreeMap<String, (i64, bool)>> = HashMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(51);
    for step in 0..4000 {
        let key = format!("h{}", rng.gen_range(0..4));
        let field = format!("f{}", rng.gen_range(0..8));
        let fields = model.entry(key.clone()).or_default();
        let found = fields.get(&field).copied();
        let at = format!("step {step}: {key} {field}");
        let k = key.as_str();
        let f = field.as_str();
        match rng.gen_range(0..11) {
            0 | 1 => {
                let v = step.to_string();
                let added: i64 = q(&mut c, &["HSET", k, f, &v]);
                assert_eq!(added, i64::from(found.is_none()), "{at}");
                fields.insert(field, (step, false));
            }
            2 => {
                let removed: i64 = q(&mut c, &["HDEL", k, f]);
                assert_eq!(removed, i64::from(found.is_some()), "{at}");
                fields.remove(&field);
            }
            3 => {
                let v: i64 = q(&mut c, &["HINCRBY", k, f, "1"]);
                let (old, ttl) = found.unwrap_or((0, false));
                assert_eq!(v, old + 1, "{at}");
                fields.insert(field, (old + 1, ttl));
            }
            4 | 5 if !fields.is_empty() => {
                let set = ints(&mut c, &["HEXPIRE", k, "3600", "FIELDS", "1", f]);
                assert_eq!(set, [if found.is_some() { 1 } else { -2 }], "{at}");
                if let Some((v, _)) = found {
                    fields.insert(field, (v, true));
                }
            }
            6 if !fields.is_empty() => {
                let cleared = ints(&mut c, &["HPERSIST", k, "FIELDS", "1", f]);
                let want = match found {
                    None => -2,
                    Some((_, false)) => -1,
                    Some((_, true)) => 1,
                };
                assert_eq!(cleared, [want], "{at}");
                if let Some((v, _)) = found {
                    fields.insert(field, (v, false));
                }
            }
            7 => {
                let v: Option<i64> = q(&mut c, &["HGET", k, f]);
                assert_eq!(v, found.map(|(v, _)| v), "{at}");
            }
            8 => {
                let v: Vec<Option<i64>> = q(&mut c, &["HMGET", k, f, "f0"]);
                let f0 = fields.get("f0").map(|(v, _)| *v);
                assert_eq!(v, [found.map(|(v, _)| v), f0], "{at}");
            }
            9 => {
                let all: BTreeMap<String, i64> = q(&mut c, &["HGETALL", k]);
                let want: BTreeMap<String, i64> =
                    fields.iter().map(|(f, (v, _))| (f.clone(), *v)).collect();
                assert_eq!(all, want, "{at}");
                assert_eq!(q::<usize>(&mut c, &["HLEN", k]), fields.len(), "{at}");
            }
            _ => {
                let ttl = ints(&mut c, &["HTTL", k, "FIELDS", "1", f])[0];
                match found {
                    None => assert_eq!(ttl, -2, "{at}"),
                    Some((_, false)) => assert_eq!(ttl, -1, "{at}"),
                    Some((_, true)) => assert!((3000..=3600).contains(&ttl), "{at}: {ttl}"),
                }
            }
        }
        if model[&key].is_empty() {
            model.remove(&key);
        }
    }
}

#[test]
fn writes_keep_or_clear_the_ttl_as_redis() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: i64 = q(
        &mut c,
        &["HSET", "h", "a", "1", "b", "2", "c", "x", "d", "v"],
    );
    assert_eq!(
        ints(
            &mut c,
            &["HEXPIRE", "h", "1000", "FIELDS", "4", "a", "b", "c", "d"]
        ),
        [1, 1, 1, 1]
    );
    // HINCRBY and HINCRBYFLOAT change a value in place: the TTL stays.
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "a", "5"]), 6);
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "b", "0.5"]),
        "2.5"
    );
    // HSET and HMSET overwrite: the TTL goes. HSETNX of an existing field changes nothing.
    let _: i64 = q(&mut c, &["HSET", "h", "c", "y"]);
    let _: () = q(&mut c, &["HMSET", "h", "d", "w"]);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "a", "z"]), 0);
    let ttl = ints(&mut c, &["HTTL", "h", "FIELDS", "4", "a", "b", "c", "d"]);
    assert!(ttl[0] > 0 && ttl[1] > 0, "{ttl:?}");
    assert_eq!(&ttl[2..], [-1, -1]);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]), "6");
    // HDEL then HSET: a new field, no TTL.
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "a", "new"]), 1);
    assert_eq!(ints(&mut c, &["HTTL", "h", "FIELDS", "1", "a"]), [-1]);
    // RENAME and COPY carry the TTLs.
    let _: () = q(&mut c, &["RENAME", "h", "h2"]);
    let _: i64 = q(&mut c, &["COPY", "h2", "h3"]);
    for k in ["h2", "h3"] {
        let ttl = ints(&mut c, &["HTTL", k, "FIELDS", "2", "b", "c"]);
        assert!(ttl[0] > 0 && ttl[1] == -1, "{k}: {ttl:?}");
    }
    // A key-level EXPIRE/PERSIST leaves the field TTLs alone.
    let _: i64 = q(&mut c, &["EXPIRE", "h2", "500"]);
    let _: i64 = q(&mut c, &["PERSIST", "h2"]);
    assert!(ints(&mut c, &["HTTL", "h2", "FIELDS", "1", "b"])[0] > 0);
}

/// Active expiry removes fields nobody reads, counts them, and deletes the key (with the key
/// count) when its last field goes.
#[test]
fn active_expiry_removes_fields_and_the_emptied_key() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut sub = s.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2", "keep", "3"]);
    let _: i64 = q(&mut c, &["HSET", "gone", "x", "1"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
    let before = stat(&mut c, "expired_subkeys");
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "h", "30", "FIELDS", "2", "a", "b"]),
        [1, 1]
    );
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "gone", "30", "FIELDS", "1", "x"]),
        [1]
    );
    // Nothing reads the hashes: only active expiry can remove the fields.
    assert!(eventually(WAIT, || q::<i64>(&mut c, &["DBSIZE"]) == 1));
    assert!(eventually(WAIT, || stat(&mut c, "expired_subkeys") >= before + 3));
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "gone"]), 0);
    let keyspace: String = q(&mut c, &["INFO", "keyspace"]);
    assert!(keyspace.contains("db0:keys=1,"), "{keyspace}");
    // Keyspace events: the hash-expire commands, then hexpired (and del for the emptied key).
    let mut events = Vec::new();
    while events
        .iter()
        .filter(|e: &&(String, String)| e.0 == "hexpired")
        .count()
        < 2
        || !events.iter().any(|e| e.0 == "del")
    {
        let m = pubsub.get_message().expect("keyspace event");
        let channel: String = m.get_channel_name().to_string();
        let event = channel.rsplit(':').next().unwrap().to_string();
        events.push((event, m.get_payload::<String>().unwrap()));
    }
    assert!(
        events.contains(&("hexpire".into(), "h".into())),
        "{events:?}"
    );
    assert!(
        events.contains(&("hexpired".into(), "h".into())),
        "{events:?}"
    );
    assert!(
        events.contains(&("hexpired".into(), "gone".into())),
        "{events:?}"
    );
    assert!(
        events.contains(&("del".into(), "gone".into())),
        "{events:?}"
    );
}

/// More due fields than one timer tick removes, in the database a cycle starts with, and a few
/// due earlier in two others: a cycle that stops at its time limit in the first must leave
/// the databases it did not reach to the next one, from their earliest entry, and all go.
#[test]
fn active_expiry_removes_more_fields_than_a_tick_in_every_database() {
    const BIG: usize = 40_000;
    let s = TestServer::start_with(&["--enable-debug-command", "yes"]);
    let mut c = s.client();
    let before = stat(&mut c, "expired_subkeys");
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    // Written in this order, each database's fields are due after the previous one's.
    let mut expiring = 0;
    for (db, n) in [("7", 100), ("3", 100), ("0", BIG)] {
        let _: () = q(&mut c, &["SELECT", db]);
        let fields: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
        let mut hset = vec!["HSET", "h", "keep", "v"];
        for f in &fields {
            hset.extend([f.as_str(), "v"]);
        }
        let _: i64 = q(&mut c, &hset);
        let count = n.to_string();
        let mut expire = vec!["HPEXPIRE", "h", "200", "FIELDS", count.as_str()];
        expire.extend(fields.iter().map(String::as_str));
        let set: Vec<i64> = q(&mut c, &expire);
        assert!(set.iter().all(|&r| r == 1));
        expiring += n as u64;
    }
    // Every field due before the cycles run again.
    std::thread::sleep(Duration::from_millis(300));
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    // Nothing reads the fields: only active expiry can shorten the hashes.
    for db in ["0", "3", "7"] {
        let _: () = q(&mut c, &["SELECT", db]);
        assert!(
            eventually(WAIT, || q::<i64>(&mut c, &["HLEN", "h"]) == 1),
            "db {db}: HLEN {}",
            q::<i64>(&mut c, &["HLEN", "h"])
        );
    }
    assert_eq!(stat(&mut c, "expired_subkeys") - before, expiring);
}

#[test]
fn field_ttls_survive_a_restart() {
    let mut s = TestServer::start();
    let mut c = s.client();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    let at = now_ms() + 3_600_000;
    assert_eq!(
        ints(
            &mut c,
            &["HPEXPIREAT", "h", &at.to_string(), "FIELDS", "1", "a"]
        ),
        [1]
    );
    let _: i64 = q(&mut c, &["HSET", "soon", "x", "1", "y", "2"]);
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "soon", "300", "FIELDS", "1", "x"]),
        [1]
    );
    drop(c);
    s.restart();
    let mut c = s.client();
    assert_eq!(
        ints(&mut c, &["HPEXPIRETIME", "h", "FIELDS", "2", "a", "b"]),
        [at, -1]
    );
    // The index survived too: active expiry still removes the short one after the restart.
    assert!(eventually(WAIT, || q::<i64>(&mut c, &["HLEN", "soon"]) == 1));
    assert_eq!(q::<Vec<String>>(&mut c, &["HGETALL", "soon"]), ["y", "2"]);
}

/// The data compaction filter drops an expired field record (counted in INFO), and active
/// expiry then still takes it off the hash's length.
#[test]
fn compaction_drops_expired_field_records() {
    let s = TestServer::start_with(&["--active-expire", "no"]);
    let mut c = s.client();
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    let _: i64 = q(&mut c, &["HSET", "g", "only", "1"]);
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "h", "10", "FIELDS", "1", "a"]),
        [1]
    );
    assert_eq!(
        ints(&mut c, &["HPEXPIRE", "g", "10", "FIELDS", "1", "only"]),
        [1]
    );
    assert!(eventually(WAIT, || q::<Option<String>>(
        &mut c,
        &["HGET", "g", "only"]
    )
    .is_none()));
    assert_eq!(stat(&mut c, "kvik_compaction_expired_fields"), 0);
    // FLUSHDB of another database compacts the whole key range.
    let _: () = q(&mut c, &["SELECT", "9"]);
    let _: () = q(&mut c, &["FLUSHDB"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert!(eventually(WAIT, || stat(
        &mut c,
        "kvik_compaction_expired_fields"
    ) >= 2));
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 2);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
    let _: () = q(&mut c, &["CONFIG", "SET", "active-expire", "yes"]);
    assert!(eventually(WAIT, || q::<i64>(&mut c, &["DBSIZE"]) == 1));
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 1);
    assert_eq!(q::<Vec<String>>(&mut c, &["HGETALL", "h"]), ["b", "2"]);
}

#[test]
fn a_replica_gets_the_field_ttls() {
    let p = TestServer::start();
    let target = format!("127.0.0.1 {}", p.port);
    let r = TestServer::start_with(&["--replicaof", &target]);
    let mut pc = p.client();
    let mut rc = r.client();
    let _: i64 = q(&mut pc, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    let at = now_ms() + 3_600_000;
    assert_eq!(
        ints(
            &mut pc,
            &["HPEXPIREAT", "h", &at.to_string(), "FIELDS", "1", "a"]
        ),
        [1]
    );
    assert_eq!(
        ints(&mut pc, &["HPEXPIRE", "h", "100", "FIELDS", "1", "b"]),
        [1]
    );
    assert!(eventually(WAIT, || {
        q::<Vec<i64>>(
            &mut rc,
            &["HPEXPIRETIME", "h", "FIELDS", "3", "a", "b", "c"],
        )
        .first()
            == Some(&at)
    }));
    // The primary's active expiry removes b; the replica applies it.
    assert!(eventually(WAIT, || q::<i64>(&mut rc, &["HLEN", "h"]) == 2));
    assert_eq!(
        ints(&mut rc, &["HTTL", "h", "FIELDS", "2", "b", "c"]),
        [-2, -1]
    );
}
