//! Small hashes in the hot cache: the hash reads (HMGET HGETALL HEXISTS HSTRLEN HLEN HKEYS HVALS)
//! answered from the cached whole hash on the I/O thread with the same replies as without the
//! cache, writes (HSET HSETNX HDEL HINCRBY HINCRBYFLOAT HMSET) that keep the cached copy up to
//! date (`cache-hash-writes`), hashes with field TTLs never served from the cache, and a
//! concurrent check of writers against readers with a model per key.

use crate::common::*;
use redis::{Connection, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// The read commands under test, over `key`.
fn reads(key: &str) -> Vec<Vec<String>> {
    let cmds: &[&[&str]] = &[
        &["HMGET", key, "f1", "nope", "f2", "f1"],
        &["HGETALL", key],
        &["HEXISTS", key, "f1"],
        &["HEXISTS", key, "nope"],
        &["HSTRLEN", key, "f2"],
        &["HSTRLEN", key, "nope"],
        &["HLEN", key],
        &["HKEYS", key],
        &["HVALS", key],
        &["HGET", key, "f1"],
    ];
    cmds.iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect()
}

fn run(con: &mut Connection, cmd: &[String]) -> Value {
    let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    match c.query::<Value>(con) {
        Ok(v) => v,
        Err(e) => Value::SimpleString(format!("error: {e}")),
    }
}

#[test]
fn hash_reads_are_served_from_the_cache_with_the_same_replies() {
    let s = TestServer::start_with(&["--cache-max-hash-fields", "4"]);
    let mut c = s.client();
    q::<i64>(&mut c, &["HSET", "small", "f2", "two", "f1", "1", "a", ""]);
    q::<i64>(
        &mut c,
        &[
            "HSET", "big", "f1", "1", "f2", "22", "3", "c", "4", "d", "5", "e",
        ],
    );
    q::<String>(&mut c, &["SET", "str", "v"]);
    let keys = ["small", "big", "missing", "str"];
    // The replies with the cache off.
    q::<String>(&mut c, &["CONFIG", "SET", "cache-enabled", "no"]);
    let want: Vec<Value> = keys
        .iter()
        .flat_map(|k| reads(k))
        .map(|cmd| run(&mut c, &cmd))
        .collect();
    q::<String>(&mut c, &["CONFIG", "SET", "cache-enabled", "yes"]);
    // GET notes the missing key as absent and caches the string; a first hash read fills the
    // small hash whole. The second round is all hits for them, on the I/O thread.
    let _: Value = qv(&mut c, &["GET", "missing"]);
    let _: Value = qv(&mut c, &["GET", "str"]);
    for round in 0..2 {
        for key in ["small", "missing", "str", "big"] {
            let (hits, rtc) = (stat(&mut c, "cache_hits"), stat(&mut c, "rtc_commands"));
            let cmds = reads(key);
            let got: Vec<Value> = cmds.iter().map(|cmd| run(&mut c, cmd)).collect();
            let at = keys.iter().position(|k| *k == key).unwrap() * cmds.len();
            assert_eq!(got, want[at..at + cmds.len()], "{key}, round {round}");
            let (hits, rtc) = (
                stat(&mut c, "cache_hits") - hits,
                stat(&mut c, "rtc_commands") - rtc,
            );
            match (key, round) {
                // A hash over the limit is cached as its meta and its fields one by one
                // (`cache-big-hashes`): in the second round the field reads and HLEN are
                // answered on the I/O thread; HGETALL, HKEYS and HVALS read storage.
                ("big", 1) => {
                    // The meta per command, and each field asked for: HMGET 1 + 4, HEXISTS
                    // and HSTRLEN 2 x 2 each, HGET 2, HLEN, HGETALL, HKEYS, HVALS 1 each.
                    assert_eq!(hits, 19, "big: the meta and every field cached");
                    assert_eq!(rtc, cmds.len() as u64, "big: on the I/O thread");
                }
                (_, 1) => {
                    assert_eq!(hits, cmds.len() as u64, "{key}: every read a cache hit");
                    assert_eq!(rtc, cmds.len() as u64, "{key}: on the I/O thread");
                }
                _ => {}
            }
        }
    }
    // RESP3 (HGETALL is a map) from the cache as from storage.
    let mut c3 = s.client();
    let _: Value = qv(&mut c3, &["HELLO", "3"]);
    let cached = qv(&mut c3, &["HGETALL", "small"]);
    q::<String>(&mut c3, &["CONFIG", "SET", "cache-enabled", "no"]);
    assert_eq!(qv(&mut c3, &["HGETALL", "small"]), cached);
}

/// HGETALL of `key` as a map (RESP2 flat array).
fn hgetall(c: &mut Connection, key: &str) -> BTreeMap<String, String> {
    q(c, &["HGETALL", key])
}

fn model(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect()
}

#[test]
fn hash_writes_update_the_cached_copy() {
    let s = TestServer::start_with(&["--cache-max-hash-fields", "4"]);
    let mut c = s.client();
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    hgetall(&mut c, "h"); // fills the cache
    type Step<'a> = (&'a [&'a str], Value, &'a [(&'a str, &'a str)]);
    let steps: &[Step] = &[
        (
            &["HSET", "h", "a", "3", "c", "4"],
            Value::Int(1),
            &[("a", "3"), ("b", "2"), ("c", "4")],
        ),
        (
            &["HSETNX", "h", "a", "9"],
            Value::Int(0),
            &[("a", "3"), ("b", "2"), ("c", "4")],
        ),
        (
            &["HSETNX", "h", "0", "z"],
            Value::Int(1),
            &[("0", "z"), ("a", "3"), ("b", "2"), ("c", "4")],
        ),
        (
            &["HDEL", "h", "0", "nope", "0"],
            Value::Int(1),
            &[("a", "3"), ("b", "2"), ("c", "4")],
        ),
        (
            &["HINCRBY", "h", "b", "40"],
            Value::Int(42),
            &[("a", "3"), ("b", "42"), ("c", "4")],
        ),
        (
            &["HINCRBYFLOAT", "h", "d", "1.5"],
            Value::BulkString(b"1.5".to_vec()),
            &[("a", "3"), ("b", "42"), ("c", "4"), ("d", "1.5")],
        ),
        (
            &["HMSET", "h", "a", "x", "a", "y"],
            Value::Okay,
            &[("a", "y"), ("b", "42"), ("c", "4"), ("d", "1.5")],
        ),
        (
            &["HSET", "h", "c", "5", "c", "6"],
            Value::Int(0),
            &[("a", "y"), ("b", "42"), ("c", "6"), ("d", "1.5")],
        ),
    ];
    for (cmd, reply, want) in steps {
        assert_eq!(qv(&mut c, cmd), *reply, "{cmd:?}");
        let hits = stat(&mut c, "cache_hits");
        assert_eq!(hgetall(&mut c, "h"), model(want), "after {cmd:?}");
        assert_eq!(
            stat(&mut c, "cache_hits"),
            hits + 1,
            "still cached after {cmd:?}"
        );
    }
    // A failed write (not an integer) changes neither.
    assert!(err(&mut c, &["HINCRBY", "h", "a", "1"]).contains("not an integer"));
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]), "y");
    // Growing past cache-max-hash-fields drops the copy; reads stay right, from storage; the
    // next read caches the hash as its meta (cache-big-hashes), which HLEN then finds.
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "e", "5"]), 1);
    let hits = stat(&mut c, "cache_hits");
    assert_eq!(hgetall(&mut c, "h").len(), 5);
    assert_eq!(stat(&mut c, "cache_hits"), hits, "too big to cache whole");
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 5);
    assert_eq!(stat(&mut c, "cache_hits"), hits + 1, "its meta cached");
    // Shrunk again, it is cached again by the next read; deleting every field deletes the key.
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a", "b", "c"]), 3);
    hgetall(&mut c, "h");
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "d", "e"]), 2);
    assert_eq!(hgetall(&mut c, "h"), BTreeMap::new());
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    // A key expiry survives writes of the cached copy, and expires it.
    q::<i64>(&mut c, &["HSET", "t", "a", "1"]);
    q::<i64>(&mut c, &["PEXPIRE", "t", "300"]);
    hgetall(&mut c, "t");
    q::<i64>(&mut c, &["HSET", "t", "b", "2"]);
    assert!(q::<i64>(&mut c, &["PTTL", "t"]) > 0);
    assert_eq!(hgetall(&mut c, "t").len(), 2);
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(hgetall(&mut c, "t"), BTreeMap::new());
    // Switched off, a write drops the copy (the next read misses) and is still seen.
    q::<String>(&mut c, &["CONFIG", "SET", "cache-hash-writes", "no"]);
    q::<i64>(&mut c, &["HSET", "o", "a", "1"]);
    hgetall(&mut c, "o");
    assert_eq!(q::<i64>(&mut c, &["HSET", "o", "a", "2", "b", "3"]), 1);
    let hits = stat(&mut c, "cache_hits");
    assert_eq!(hgetall(&mut c, "o"), model(&[("a", "2"), ("b", "3")]));
    assert_eq!(stat(&mut c, "cache_hits"), hits, "dropped by the write");
}

#[test]
fn hashes_with_field_ttls_are_never_served_stale() {
    let s = TestServer::start_with(&["--cache-max-hash-fields", "4"]);
    let mut c = s.client();
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    hgetall(&mut c, "h"); // cached
    let _: Value = qv(&mut c, &["HPEXPIRE", "h", "100", "FIELDS", "1", "a"]);
    assert_eq!(hgetall(&mut c, "h"), model(&[("a", "1"), ("b", "2")]));
    std::thread::sleep(Duration::from_millis(150));
    let hits = stat(&mut c, "cache_hits");
    for _ in 0..2 {
        assert_eq!(hgetall(&mut c, "h"), model(&[("b", "2")]));
        assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "h"]), vec!["b"]);
        assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "a"]), 0);
        assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "a"]), 0);
        let got: Vec<Option<String>> = q(&mut c, &["HMGET", "h", "a", "b"]);
        assert_eq!(got, vec![None, Some("2".to_string())]);
        assert_eq!(q::<Option<String>>(&mut c, &["HGET", "h", "a"]), None);
    }
    // Writes of a hash with field TTLs go to storage too.
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "c", "3"]), 1);
    assert_eq!(hgetall(&mut c, "h"), model(&[("b", "2"), ("c", "3")]));
    assert_eq!(
        stat(&mut c, "cache_hits"),
        hits,
        "a hash with field TTLs is not cached"
    );
}

/// Writers change small hashes (HSET, HDEL, HINCRBY; one writer per key, so each key has a
/// model: the list of its states) while readers read them whole. Every read must be one of the
/// key's states, no older than the last state whose write had completed before the read began
/// and no older than what the same reader saw before. One key crosses `cache-max-hash-fields`
/// back and forth.
#[test]
fn concurrent_writes_and_reads_of_cached_hashes_are_never_stale() {
    // Key 2 spans 8 fields, more than the limit of 6: cached as its meta, read whole.
    concurrent_writes_and_reads("6", [4, 4, 8], hgetall);
}

/// HMGET of every field the writers below use, as a map of those present.
fn hmget_all(c: &mut Connection, key: &str) -> BTreeMap<String, String> {
    let mut names: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
    names.extend(["ver".to_string(), "ctr".to_string()]);
    let mut cmd = redis::cmd("HMGET");
    cmd.arg(key).arg(&names);
    let values: Vec<Option<String>> = cmd.query(c).unwrap();
    names
        .into_iter()
        .zip(values)
        .filter_map(|(n, v)| Some((n, v?)))
        .collect()
}

#[test]
fn concurrent_writes_and_reads_of_big_hash_fields_are_never_stale() {
    // Every hash over the limit of 4: cached as its meta, its fields one by one, and read
    // by HMGET (every field of one state, or a newer one, never a mix).
    concurrent_writes_and_reads("4", [6, 9, 12], hmget_all);
}

/// Writers (one per key: HSET, HDEL, HINCRBY, and DEL now and then) against readers that
/// read whole hashes with `read`, each read checked against the writer's log of states: a
/// state at or after the last write acknowledged before the read began (see `stale_reads`).
fn concurrent_writes_and_reads(
    max_fields: &str,
    widths: [u64; 3],
    read: fn(&mut Connection, &str) -> BTreeMap<String, String>,
) {
    let s = TestServer::start_with(&["--cache-max-hash-fields", max_fields]);
    let write = move |k: usize, n: u64, state: &mut BTreeMap<String, String>| -> Vec<String> {
        let key = format!("h{k}");
        let width = widths[k];
        let f = format!("f{}", n % width);
        let g = format!("f{}", (n * 7 + 3) % width);
        match n % 4 {
            // Now and then the hash is deleted (its next write makes a new one).
            _ if n.is_multiple_of(37) => {
                state.clear();
                vec!["DEL".into(), key]
            }
            0 | 1 => {
                state.insert(f.clone(), n.to_string());
                state.insert("ver".into(), n.to_string());
                vec![
                    "HSET".into(),
                    key,
                    f,
                    n.to_string(),
                    "ver".into(),
                    n.to_string(),
                ]
            }
            2 => {
                state.remove(&g);
                vec!["HDEL".into(), key, g]
            }
            _ => {
                let v: i64 = state.get("ctr").map_or(0, |v| v.parse().unwrap()) + 1;
                state.insert("ctr".into(), v.to_string());
                vec!["HINCRBY".into(), key, "ctr".into(), "1".into()]
            }
        }
    };
    let read_key = move |c: &mut Connection, k: usize| read(c, &format!("h{k}"));
    crate::stale_reads::writes_against_reads(&s, 3, write, read_key);
    assert!(
        stat(&mut s.client(), "cache_hits") > 0,
        "the cache was used"
    );
}

/// The field reads of a hash over `cache-max-hash-fields`, as replies.
fn field_reads(c: &mut Connection, key: &str) -> Vec<Value> {
    let cmds: &[&[&str]] = &[
        &["HGET", key, "f1"],
        &["HGET", key, "nope"],
        &["HMGET", key, "f1", "f2", "nope", "f3"],
        &["HEXISTS", key, "f2"],
        &["HSTRLEN", key, "f3"],
        &["HLEN", key],
        &["TYPE", key],
    ];
    cmds.iter().map(|cmd| qv(c, cmd)).collect()
}

#[test]
fn big_hash_fields_follow_every_write() {
    let s = TestServer::start_with(&["--cache-max-hash-fields", "4"]);
    let mut c = s.client();
    let fill = |c: &mut Connection, key: &str| {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key);
        for i in 0..10 {
            cmd.arg(format!("f{i}")).arg(format!("v{i}"));
        }
        let _: i64 = cmd.query(c).unwrap();
    };
    fill(&mut c, "big");
    // Each write, then the reads: twice with the cache (a fill, then hits), compared with
    // the same reads with big hashes not cached (`cache-big-hashes no` also drops them).
    let writes: &[&[&str]] = &[
        &["HSET", "big", "f1", "new"],
        &["HDEL", "big", "f2"],
        &["HINCRBY", "big", "f3", "0"],
        &["HSET", "big", "f3", "7"],
        &["HINCRBY", "big", "f3", "5"],
        &["HSETNX", "big", "f2", "back"],
        &["HMSET", "big", "f1", "a", "f2", "b"],
        &["HINCRBYFLOAT", "big", "f3", "0.5"],
        &["DEL", "big"],
        &[
            "HSET", "big", "f1", "re", "a", "1", "b", "2", "c", "3", "d", "4",
        ],
        &["RENAME", "big", "moved"],
        &[
            "HSET", "big", "f1", "1", "f2", "2", "f3", "3", "x", "", "y", "",
        ],
        &["HEXPIRE", "big", "100", "FIELDS", "1", "f3"],
        &["HPERSIST", "big", "FIELDS", "1", "f3"],
        &["HDEL", "big", "x", "y"],
        &["SET", "big", "string"],
    ];
    let mut hits_seen = false;
    for w in writes {
        // Failed writes too (HINCRBY of "v3").
        let _ = run(&mut c, &w.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        if *w == ["SET", "big", "string"] {
            assert!(err(&mut c, &["HGET", "big", "f1"]).contains("WRONGTYPE"));
            break;
        }
        let first = field_reads(&mut c, "big");
        let hits = stat(&mut c, "cache_hits");
        let second = field_reads(&mut c, "big");
        hits_seen |= stat(&mut c, "cache_hits") > hits + 1;
        q::<String>(&mut c, &["CONFIG", "SET", "cache-big-hashes", "no"]);
        let stored = field_reads(&mut c, "big");
        q::<String>(&mut c, &["CONFIG", "SET", "cache-big-hashes", "yes"]);
        assert_eq!(first, stored, "after {w:?}: the first reads");
        assert_eq!(second, stored, "after {w:?}: the reads from the cache");
        // The renamed hash reads as it was.
        if w[0] == "RENAME" {
            assert_eq!(q::<String>(&mut c, &["HGET", "moved", "f1"]), "re");
        }
    }
    assert!(hits_seen, "the fields were served from the cache");
    // A write keeps the cached meta and fields (it hands its edits to them): the reads after
    // it are hits, and a field it wrote is cached by the write.
    fill(&mut c, "kept");
    assert_eq!(q::<String>(&mut c, &["HGET", "kept", "f5"]), "v5");
    q::<i64>(&mut c, &["HSET", "kept", "f1", "one", "new", "n"]);
    q::<i64>(&mut c, &["HDEL", "kept", "f2"]);
    let hits = stat(&mut c, "cache_hits");
    assert_eq!(q::<String>(&mut c, &["HGET", "kept", "f5"]), "v5");
    assert_eq!(q::<String>(&mut c, &["HGET", "kept", "f1"]), "one");
    assert_eq!(q::<String>(&mut c, &["HGET", "kept", "new"]), "n");
    assert_eq!(qv(&mut c, &["HGET", "kept", "f2"]), Value::Nil);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "kept"]), 10);
    // The meta five times, f5, f1 and new: f2, deleted while not cached, is read once.
    assert_eq!(
        stat(&mut c, "cache_hits"),
        hits + 8,
        "the meta and the fields, hits"
    );
    // A big hash only written is added by its writes (cache-write-allocate): its meta and the
    // fields written.
    fill(&mut c, "written");
    q::<i64>(&mut c, &["HSET", "written", "f1", "w"]);
    let before = stat(&mut c, "cache_hits");
    assert_eq!(q::<String>(&mut c, &["HGET", "written", "f1"]), "w");
    assert_eq!(
        stat(&mut c, "cache_hits"),
        before + 2,
        "its meta and the field written"
    );
    // A big hash that expires is not served past its expiry.
    fill(&mut c, "t");
    q::<i64>(&mut c, &["PEXPIRE", "t", "200"]);
    assert_eq!(q::<String>(&mut c, &["HGET", "t", "f1"]), "v1");
    assert_eq!(q::<String>(&mut c, &["HGET", "t", "f1"]), "v1");
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(qv(&mut c, &["HGET", "t", "f1"]), Value::Nil);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "t"]), 0);
    // FLUSHALL drops the cached fields with the hash.
    fill(&mut c, "u");
    assert_eq!(q::<String>(&mut c, &["HGET", "u", "f1"]), "v1");
    q::<String>(&mut c, &["FLUSHALL"]);
    assert_eq!(qv(&mut c, &["HGET", "u", "f1"]), Value::Nil);
    q::<i64>(&mut c, &["HSET", "u", "f1", "after"]);
    assert_eq!(q::<String>(&mut c, &["HGET", "u", "f1"]), "after");
}

/// HSET, HDEL, SADD and SREM count what they add or remove from the members' presence, which
/// they take from the hot cache where it holds the member (`CollWrite::contains_many`), from
/// RocksDB where it does not: both kinds in one command give Redis's counts, and the cache was
/// asked.
#[test]
fn member_writes_count_members_the_cache_holds() {
    let s = TestServer::start_with(&["--cache-max-hash-fields", "4"]);
    let mut c = s.client();
    let mut fill = redis::cmd("HSET");
    fill.arg("big");
    for i in 0..10 {
        fill.arg(format!("f{i}")).arg(format!("v{i}"));
    }
    assert_eq!(fill.query::<i64>(&mut c).unwrap(), 10);
    // f1 and f2 cached (read once); f3 present but not cached; n1 absent and read (the
    // cache may know it absent), n2 absent.
    for f in ["f1", "f2", "n1"] {
        qv(&mut c, &["HGET", "big", f]);
    }
    let hits = stat(&mut c, "cache_hits");
    let set = [
        "HSET", "big", "f1", "a", "n1", "b", "f3", "c", "n2", "d", "n1", "e",
    ];
    assert_eq!(q::<i64>(&mut c, &set), 2, "n1 and n2 are new");
    assert!(stat(&mut c, "cache_hits") > hits, "the cache was asked");
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 12);
    assert_eq!(q::<String>(&mut c, &["HGET", "big", "n1"]), "e");
    let del = ["HDEL", "big", "f2", "f4", "nope", "f2", "n2"];
    assert_eq!(q::<i64>(&mut c, &del), 3, "f2, f4 and n2, once each");
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 9);

    let members: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "set"];
    sadd.extend(members.iter().map(String::as_str));
    assert_eq!(q::<i64>(&mut c, &sadd), 20);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "set", "m1"]), 1);
    let add = ["SADD", "set", "m1", "x", "m2", "x", "y"];
    assert_eq!(q::<i64>(&mut c, &add), 2, "x and y are new");
    let rem = ["SREM", "set", "m1", "nope", "y", "m1"];
    assert_eq!(q::<i64>(&mut c, &rem), 2, "m1 and y, once each");
    assert_eq!(q::<i64>(&mut c, &["SCARD", "set"]), 20);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "set", "m1"]), 0);
}
