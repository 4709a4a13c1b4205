//! Integration tests: the generic key commands on collections (hashes, lists, sets, sorted
//! sets): TYPE, EXISTS, DEL/UNLINK, the EXPIRE family, PERSIST, DBSIZE, SCAN ... TYPE,
//! RANDOMKEY, RENAME/RENAMENX/COPY/MOVE carrying every member, and OBJECT ENCODING as Redis 7.0
//! reports it. A family whose commands are not in this build yet is skipped (and says so).

use crate::common::*;
use redis::{Connection, Value};
use std::collections::BTreeSet;

/// One collection type: how to fill a key and read it back (in a canonical order).
struct Family {
    type_name: &'static str,
    /// A command of the family, to know whether the build has it.
    probe: &'static str,
    /// Adds `members` to `key` (a hash gets field = member, value = "v-" + member; a sorted set
    /// gets score = index).
    add: fn(&mut Connection, &str, &[String]),
    /// The members of `key` in the form `add` takes them: sorted, except a list's.
    read: fn(&mut Connection, &str) -> Vec<String>,
}

fn hash_add(c: &mut Connection, key: &str, members: &[String]) {
    let mut args = vec!["HSET".to_string(), key.to_string()];
    for m in members {
        args.push(m.clone());
        args.push(format!("v-{m}"));
    }
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let _: i64 = q(c, &args);
}

fn hash_read(c: &mut Connection, key: &str) -> Vec<String> {
    let pairs: Vec<(String, String)> = q(c, &["HGETALL", key]);
    let mut out: Vec<String> = pairs
        .into_iter()
        .map(|(f, v)| {
            assert_eq!(v, format!("v-{f}"), "value of field {f}");
            f
        })
        .collect();
    out.sort();
    out
}

fn list_add(c: &mut Connection, key: &str, members: &[String]) {
    let mut args = vec!["RPUSH", key];
    args.extend(members.iter().map(|s| s.as_str()));
    let _: i64 = q(c, &args);
}

fn list_read(c: &mut Connection, key: &str) -> Vec<String> {
    // Lists keep their order: no sorting, so a reordering shows.
    q(c, &["LRANGE", key, "0", "-1"])
}

fn set_add(c: &mut Connection, key: &str, members: &[String]) {
    let mut args = vec!["SADD", key];
    args.extend(members.iter().map(|s| s.as_str()));
    let _: i64 = q(c, &args);
}

fn set_read(c: &mut Connection, key: &str) -> Vec<String> {
    let mut v: Vec<String> = q(c, &["SMEMBERS", key]);
    v.sort();
    v
}

fn zset_add(c: &mut Connection, key: &str, members: &[String]) {
    let mut args = vec!["ZADD".to_string(), key.to_string()];
    for (i, m) in members.iter().enumerate() {
        args.push(i.to_string());
        args.push(m.clone());
    }
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let _: i64 = q(c, &args);
}

fn zset_read(c: &mut Connection, key: &str) -> Vec<String> {
    // Members in score order with their scores, and by member: both the data and the score
    // index must move. Returned sorted by member (`add` scores by position in its call).
    let v: Vec<(String, f64)> = q(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"]);
    assert!(v.windows(2).all(|w| w[0].1 <= w[1].1), "score order");
    let by_score: Vec<String> = v.iter().map(|(m, _)| m.clone()).collect();
    let by_member: Vec<String> = q(c, &["ZRANGEBYLEX", key, "-", "+"]);
    let mut sorted = by_score.clone();
    sorted.sort();
    let mut lex = by_member.clone();
    lex.sort();
    assert_eq!(sorted, lex, "score index and members agree");
    for (m, s) in &v {
        let score: Option<f64> = q(c, &["ZSCORE", key, m]);
        assert_eq!(score, Some(*s));
    }
    sorted
}

const FAMILIES: &[Family] = &[
    Family {
        type_name: "hash",
        probe: "hset",
        add: hash_add,
        read: hash_read,
    },
    Family {
        type_name: "list",
        probe: "rpush",
        add: list_add,
        read: list_read,
    },
    Family {
        type_name: "set",
        probe: "sadd",
        add: set_add,
        read: set_read,
    },
    Family {
        type_name: "zset",
        probe: "zadd",
        add: zset_add,
        read: zset_read,
    },
];

/// Whether this build has `command`.
fn has(c: &mut Connection, command: &str) -> bool {
    !matches!(qv(c, &["COMMAND", "INFO", command]), Value::Array(v) if v == vec![Value::Nil])
}

/// The families this build has; the others are reported as skipped.
fn families(c: &mut Connection) -> Vec<&'static Family> {
    FAMILIES
        .iter()
        .filter(|f| {
            let ok = has(c, f.probe);
            if !ok {
                eprintln!("skipped: no {} in this build ({})", f.type_name, f.probe);
            }
            ok
        })
        .collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// What `read` gives for a key filled by `add(members)`.
fn expected(f: &Family, members: &[String]) -> Vec<String> {
    let mut v = members.to_vec();
    if f.type_name != "list" {
        v.sort();
    }
    v
}

#[test]
fn generic_commands_work_on_every_collection_type() {
    let s = TestServer::start();
    let mut c = s.client();
    let fams = families(&mut c);
    let members = strings(&["b", "a", "c"]);
    for f in &fams {
        let k = format!("{}-key", f.type_name);
        (f.add)(&mut c, &k, &members);
        assert_eq!(q::<String>(&mut c, &["TYPE", &k]), f.type_name);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", &k, &k, "nokey"]), 2);
        assert_eq!(q::<i64>(&mut c, &["TTL", &k]), -1);
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", &k, "100"]), 1);
        let ttl: i64 = q(&mut c, &["TTL", &k]);
        assert!((99..=100).contains(&ttl), "{ttl}");
        assert_eq!(q::<i64>(&mut c, &["PERSIST", &k]), 1);
        assert_eq!(q::<i64>(&mut c, &["PTTL", &k]), -1);
        assert_eq!((f.read)(&mut c, &k), expected(f, &members));
    }
    let _: () = q(&mut c, &["SET", "string-key", "v"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), fams.len() as i64 + 1);
    // SCAN ... TYPE finds exactly the key of each type.
    for f in &fams {
        let (cursor, keys): (String, Vec<String>) =
            q(&mut c, &["SCAN", "0", "COUNT", "1000", "TYPE", f.type_name]);
        assert_eq!(cursor, "0");
        assert_eq!(keys, vec![format!("{}-key", f.type_name)]);
    }
    let all: BTreeSet<String> = q(&mut c, &["KEYS", "*"]);
    for _ in 0..20 {
        let k: String = q(&mut c, &["RANDOMKEY"]);
        assert!(all.contains(&k), "{k}");
    }
    // DEL, UNLINK and a past expiry remove a collection whole; a new one of the same name
    // starts empty.
    for (i, f) in fams.iter().enumerate() {
        let k = format!("{}-key", f.type_name);
        match i % 3 {
            0 => assert_eq!(q::<i64>(&mut c, &["DEL", &k]), 1),
            1 => assert_eq!(q::<i64>(&mut c, &["UNLINK", &k]), 1),
            _ => assert_eq!(q::<i64>(&mut c, &["PEXPIRE", &k, "-1"]), 1),
        }
        assert_eq!(q::<String>(&mut c, &["TYPE", &k]), "none");
        assert_eq!(q::<i64>(&mut c, &["EXISTS", &k]), 0);
        let fresh = strings(&["z"]);
        (f.add)(&mut c, &k, &fresh);
        assert_eq!((f.read)(&mut c, &k), fresh);
    }
    // SET over a collection replaces it.
    for f in &fams {
        let k = format!("{}-key", f.type_name);
        let _: () = q(&mut c, &["SET", &k, "now a string"]);
        assert_eq!(q::<String>(&mut c, &["TYPE", &k]), "string");
    }
}

#[test]
fn rename_copy_and_move_carry_every_member() {
    let s = TestServer::start();
    let mut c = s.client();
    let long = "x".repeat(300);
    let members: Vec<String> = (0..50)
        .map(|i| format!("m{i:02}"))
        .chain([long.clone(), String::new()])
        .collect();
    for f in families(&mut c) {
        let t = f.type_name;
        let want = expected(f, &members);
        let (src, dst, other) = (format!("{t}:src"), format!("{t}:dst"), format!("{t}:other"));
        (f.add)(&mut c, &src, &members);
        let _: i64 = q(&mut c, &["EXPIRE", &src, "1000"]);
        // RENAME onto an existing collection of the same type: only the source's members.
        (f.add)(&mut c, &dst, &strings(&["stale1", "stale2"]));
        let _: () = q(&mut c, &["RENAME", &src, &dst]);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", &src]), 0, "{t}");
        assert_eq!((f.read)(&mut c, &dst), want, "{t} after RENAME");
        assert!(
            q::<i64>(&mut c, &["TTL", &dst]) > 900,
            "{t}: RENAME keeps the TTL"
        );
        // RENAMENX refuses an existing destination, then renames back.
        let _: () = q(&mut c, &["SET", &other, "x"]);
        assert_eq!(q::<i64>(&mut c, &["RENAMENX", &dst, &other]), 0);
        assert_eq!(q::<i64>(&mut c, &["RENAMENX", &dst, &src]), 1);
        assert_eq!((f.read)(&mut c, &src), want, "{t} after RENAMENX");
        // COPY: refused without REPLACE, replaces with it; source and copy are independent.
        assert_eq!(q::<i64>(&mut c, &["COPY", &src, &other]), 0);
        assert_eq!(q::<i64>(&mut c, &["COPY", &src, &other, "REPLACE"]), 1);
        assert_eq!(q::<String>(&mut c, &["TYPE", &other]), t);
        assert_eq!((f.read)(&mut c, &other), want, "{t} after COPY");
        assert!(
            q::<i64>(&mut c, &["TTL", &other]) > 900,
            "{t}: COPY keeps the TTL"
        );
        let _: i64 = q(&mut c, &["DEL", &src]);
        assert_eq!(
            (f.read)(&mut c, &other),
            want,
            "{t}: the copy outlives its source"
        );
        (f.add)(&mut c, &other, &strings(&["zz-added"]));
        let _: () = q(&mut c, &["RENAME", &other, &src]);
        // COPY ... DB, and MOVE, to database 3.
        assert_eq!(q::<i64>(&mut c, &["COPY", &src, &dst, "DB", "3"]), 1);
        assert_eq!(q::<i64>(&mut c, &["MOVE", &src, "3"]), 1);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", &src]), 0);
        let mut d3 = s.client();
        let _: () = q(&mut d3, &["SELECT", "3"]);
        let mut with_added = members.clone();
        with_added.push("zz-added".into());
        let want_added = expected(f, &with_added);
        assert_eq!((f.read)(&mut d3, &src), want_added, "{t} after MOVE");
        assert_eq!((f.read)(&mut d3, &dst), want_added, "{t} after COPY DB");
        // MOVE refuses a key that exists in the target database.
        (f.add)(&mut c, &src, &strings(&["again"]));
        assert_eq!(q::<i64>(&mut c, &["MOVE", &src, "3"]), 0);
        assert_eq!((f.read)(&mut c, &src), strings(&["again"]));
    }
}

#[test]
fn copying_a_big_collection_spans_several_batches() {
    let s = TestServer::start();
    let mut c = s.client();
    if !has(&mut c, "zadd") {
        eprintln!("skipped: no zadd in this build");
        return;
    }
    // 6,000 members of 1 KiB: about 12 MB of entries (data and score index), over the 4 MB a
    // copy commits at once.
    let pad = "p".repeat(1000);
    for chunk in 0..12 {
        let mut args = vec!["ZADD".to_string(), "big".to_string()];
        for i in chunk * 500..(chunk + 1) * 500 {
            args.push(i.to_string());
            args.push(format!("{i:05}{pad}"));
        }
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let _: i64 = q(&mut c, &args);
    }
    assert_eq!(q::<i64>(&mut c, &["COPY", "big", "big2"]), 1);
    let _: () = q(&mut c, &["RENAME", "big2", "big3"]);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "big3"]), 6000);
    let firsts: Vec<String> = q(&mut c, &["ZRANGE", "big3", "0", "-1"]);
    assert_eq!(firsts.len(), 6000);
    for (i, m) in firsts.iter().enumerate() {
        assert_eq!(m, &format!("{i:05}{pad}"));
    }
    assert_eq!(
        q::<Option<f64>>(&mut c, &["ZSCORE", "big3", &format!("05999{pad}")]),
        Some(5999.0)
    );
}

#[test]
fn object_encoding_of_collections_is_redis_7_0s() {
    let s = TestServer::start();
    let mut c = s.client();
    let enc = |c: &mut Connection, key: &str| -> String { q(c, &["OBJECT", "ENCODING", key]) };
    let many = |n: usize| -> Vec<String> { (0..n).map(|i| i.to_string()).collect() };
    let long = vec!["y".repeat(65)];
    let max = vec!["y".repeat(64)];
    let fams = families(&mut c);
    let has_type = |t: &str| fams.iter().any(|f| f.type_name == t);
    if has_type("hash") {
        hash_add(&mut c, "h", &many(128));
        assert_eq!(enc(&mut c, "h"), "listpack");
        hash_add(&mut c, "h", &many(129));
        assert_eq!(enc(&mut c, "h"), "hashtable");
        // Field and value lengths count ("v-" + 62 = 64 bytes still fits).
        hash_add(&mut c, "hv", &["y".repeat(62)]);
        assert_eq!(enc(&mut c, "hv"), "listpack");
        hash_add(&mut c, "hv", &["y".repeat(63)]);
        assert_eq!(enc(&mut c, "hv"), "hashtable");
        hash_add(&mut c, "hf", &long);
        assert_eq!(enc(&mut c, "hf"), "hashtable");
    }
    if has_type("list") {
        list_add(&mut c, "l", &many(3));
        assert_eq!(enc(&mut c, "l"), "quicklist");
    }
    if has_type("set") {
        set_add(&mut c, "s", &many(512));
        assert_eq!(enc(&mut c, "s"), "intset");
        set_add(&mut c, "s", &["512".to_string()]);
        assert_eq!(enc(&mut c, "s"), "hashtable");
        set_add(&mut c, "s2", &strings(&["1", "-5", "9223372036854775807"]));
        assert_eq!(enc(&mut c, "s2"), "intset");
        set_add(&mut c, "s2", &strings(&["01"]));
        assert_eq!(enc(&mut c, "s2"), "hashtable");
    }
    if has_type("zset") {
        zset_add(&mut c, "z", &many(128));
        assert_eq!(enc(&mut c, "z"), "listpack");
        zset_add(&mut c, "z", &many(129));
        assert_eq!(enc(&mut c, "z"), "skiplist");
        zset_add(&mut c, "zm", &max);
        assert_eq!(enc(&mut c, "zm"), "listpack");
        zset_add(&mut c, "zm2", &long);
        assert_eq!(enc(&mut c, "zm2"), "skiplist");
    }
    assert_eq!(qv(&mut c, &["OBJECT", "ENCODING", "nokey"]), Value::Nil);
}
