//! Integration tests: hashes (HSET HSETNX HGET HMGET HMSET HGETALL HDEL HLEN HSTRLEN HEXISTS HKEYS
//! HVALS HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN).
//!
//! Expected replies and error texts were taken from a real redis-server 7.0.15; the last test
//! compares byte for byte with one started for the purpose.

use crate::common::*;
use kvik_resp::{parse_frame, Limits};
use kvik_testkit::{Endpoint, RedisServer};
use redis::{Connection, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::TcpStream;
use std::time::Duration;

/// A raw RESP connection that returns each reply's exact bytes (one whole frame per call).
pub struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    pub fn new(s: TcpStream) -> Raw {
        Raw { s, buf: Vec::new() }
    }

    /// Switches to RESP3 (HELLO 3), discarding the HELLO reply.
    pub fn resp3(s: TcpStream) -> Raw {
        let mut r = Raw::new(s);
        r.call(&["HELLO", "3"]);
        r
    }

    /// Sends one command and returns the bytes of its reply.
    pub fn call(&mut self, args: &[&str]) -> Vec<u8> {
        use std::io::Write;
        self.s.write_all(&resp_str(args)).unwrap();
        let limits = Limits::default();
        loop {
            if let Some((_, used)) = parse_frame(&self.buf, &limits).expect("valid RESP") {
                return self.buf.drain(..used).collect();
            }
            let (more, closed) = read_raw(&mut self.s, 1);
            assert!(!more.is_empty() && !closed, "no complete reply to {args:?}");
            self.buf.extend_from_slice(&more);
        }
    }

    /// [`Raw::call`] as text, for readable assertions.
    pub fn text(&mut self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.call(args)).into_owned()
    }
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn exists(con: &mut Connection, key: &str) -> bool {
    q::<i64>(con, &["EXISTS", key]) == 1
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn hash_fields_set_get_and_delete() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2"]), 2);
    // A field given twice counts once and keeps its last value.
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "f1", "x", "f3", "a", "f3", "b"]),
        1
    );
    assert_eq!(qv(&mut c, &["HGET", "h", "f1"]), bulk("x"));
    assert_eq!(qv(&mut c, &["HGET", "h", "f3"]), bulk("b"));
    assert_eq!(qv(&mut c, &["HGET", "h", "nope"]), Value::Nil);
    assert_eq!(qv(&mut c, &["HGET", "nokey", "f"]), Value::Nil);
    assert_eq!(qv(&mut c, &["HMSET", "h", "f4", "v4"]), Value::Okay);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "f4", "zz"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "f5", "v5"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 5);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "nokey"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "f4"]), 2);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "nope"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "f5"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "nope"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "nokey", "f"]), 0);
    assert_eq!(
        qv(&mut c, &["HMGET", "h", "f1", "nope", "f5"]),
        Value::Array(vec![bulk("x"), Value::Nil, bulk("v5")])
    );
    assert_eq!(
        qv(&mut c, &["HMGET", "nokey", "a", "b"]),
        Value::Array(vec![Value::Nil, Value::Nil])
    );
    let all: HashMap<String, String> = q(&mut c, &["HGETALL", "h"]);
    let expected: HashMap<String, String> = [
        ("f1", "x"),
        ("f2", "v2"),
        ("f3", "b"),
        ("f4", "v4"),
        ("f5", "v5"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(all, expected);
    let mut keys: Vec<String> = q(&mut c, &["HKEYS", "h"]);
    keys.sort();
    assert_eq!(keys, ["f1", "f2", "f3", "f4", "f5"]);
    let mut vals: Vec<String> = q(&mut c, &["HVALS", "h"]);
    vals.sort();
    assert_eq!(vals, ["b", "v2", "v4", "v5", "x"]);
    assert_eq!(qv(&mut c, &["HGETALL", "nokey"]), Value::Array(vec![]));
    assert_eq!(qv(&mut c, &["HKEYS", "nokey"]), Value::Array(vec![]));
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "hash");

    // HDEL counts each removed field once; the last field takes the key with it.
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "f1", "f1", "nope"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "nokey", "f1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "f2", "f3", "f4"]), 3);
    assert!(exists(&mut c, "h"));
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "f5"]), 1);
    assert!(!exists(&mut c, "h"));
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 0);

    for (args, name) in [
        (&["HSET", "h", "f"][..], "hset"),
        (&["HSET", "h", "f", "v", "g"][..], "hset"),
        (&["HMSET", "h", "f"][..], "hmset"),
        (&["HMSET", "h", "f", "v", "g"][..], "hmset"),
        (&["HDEL", "h"][..], "hdel"),
        (&["HMGET", "h"][..], "hmget"),
        (&["HGET", "h"][..], "hget"),
        (&["HSETNX", "h", "f"][..], "hsetnx"),
        (&["HGETALL"][..], "hgetall"),
    ] {
        assert_eq!(
            err(&mut c, args),
            format!("ERR wrong number of arguments for '{name}' command")
        );
    }
    assert!(!exists(&mut c, "h"), "a refused HSET wrote nothing");
}

#[test]
fn hash_commands_refuse_other_types() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<()>(&mut c, &["SET", "s", "x"]);
    for args in [
        &["HSET", "s", "f", "v"][..],
        &["HMSET", "s", "f", "v"],
        &["HSETNX", "s", "f", "v"],
        &["HGET", "s", "f"],
        &["HMGET", "s", "f"],
        &["HGETALL", "s"],
        &["HDEL", "s", "f"],
        &["HLEN", "s"],
        &["HSTRLEN", "s", "f"],
        &["HEXISTS", "s", "f"],
        &["HKEYS", "s"],
        &["HVALS", "s"],
        &["HINCRBY", "s", "f", "1"],
        &["HINCRBYFLOAT", "s", "f", "1"],
        &["HRANDFIELD", "s"],
        &["HRANDFIELD", "s", "2"],
        &["HSCAN", "s", "0"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(qv(&mut c, &["GET", "s"]), bulk("x"));
    // A hash in turn refuses string commands, and SET replaces it.
    q::<()>(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["GET", "h"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["INCR", "h"]), WRONGTYPE);
    q::<()>(&mut c, &["SET", "h", "plain"]);
    assert_eq!(err(&mut c, &["HGET", "h", "f"]), WRONGTYPE);
    q::<()>(&mut c, &["DEL", "h"]);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "g", "w"]), 1);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "h"]), ["g"]);
}

#[test]
fn hincrby_and_hincrbyfloat_follow_redis() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<()>(
        &mut c,
        &[
            "HSET",
            "h",
            "big",
            "9223372036854775807",
            "s",
            "v",
            "fl",
            "1.5",
            "sp",
            " 1",
        ],
    );
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "-5"]), -5);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "15"]), 10);
    assert_eq!(qv(&mut c, &["HGET", "h", "n"]), bulk("10"));
    let overflow = "ERR increment or decrement would overflow";
    assert_eq!(err(&mut c, &["HINCRBY", "h", "big", "1"]), overflow);
    assert_eq!(
        q::<i64>(&mut c, &["HINCRBY", "h", "neg", "-9223372036854775808"]),
        i64::MIN
    );
    assert_eq!(err(&mut c, &["HINCRBY", "h", "neg", "-1"]), overflow);
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "s", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "fl", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "n", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "n", "1.5"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(qv(&mut c, &["HINCRBYFLOAT", "h", "fl", "0.1"]), bulk("1.6"));
    assert_eq!(qv(&mut c, &["HINCRBYFLOAT", "h", "fl", "-1.6"]), bulk("0"));
    assert_eq!(
        qv(&mut c, &["HINCRBYFLOAT", "h", "new", "5.0e3"]),
        bulk("5000")
    );
    assert_eq!(qv(&mut c, &["HINCRBYFLOAT", "h", "n", "2.5"]), bulk("12.5"));
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "fl", "inf"]),
        "ERR value is NaN or Infinity"
    );
    for bad in ["nan", "x", "1 ", ""] {
        assert_eq!(
            err(&mut c, &["HINCRBYFLOAT", "h", "fl", bad]),
            "ERR value is not a valid float",
            "{bad:?}"
        );
    }
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "s", "1"]),
        "ERR hash value is not a float"
    );
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "sp", "1"]),
        "ERR hash value is not a float"
    );
    q::<()>(&mut c, &["HSET", "h", "huge", "1.7976931348623157e308"]);
    assert_eq!(
        err(
            &mut c,
            &["HINCRBYFLOAT", "h", "huge", "1.7976931348623157e308"]
        ),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(
        qv(&mut c, &["HGET", "h", "huge"]),
        bulk("1.7976931348623157e308"),
        "a refused increment leaves the value"
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 8);
}

#[test]
fn hrandfield_counts_and_shapes() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut fields = vec!["HSET", "h"];
    let names: Vec<String> = (0..30).map(|i| format!("f{i}")).collect();
    for n in &names {
        fields.push(n);
        fields.push("v");
    }
    q::<()>(&mut c, &fields);
    let all: HashSet<String> = names.iter().cloned().collect();

    let one: String = q(&mut c, &["HRANDFIELD", "h"]);
    assert!(all.contains(&one));
    assert_eq!(qv(&mut c, &["HRANDFIELD", "nokey"]), Value::Nil);
    assert_eq!(
        qv(&mut c, &["HRANDFIELD", "nokey", "3"]),
        Value::Array(vec![])
    );
    assert_eq!(qv(&mut c, &["HRANDFIELD", "h", "0"]), Value::Array(vec![]));

    // A positive count: distinct fields, at most the whole hash.
    let some: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "10"]);
    assert_eq!(some.len(), 10);
    assert_eq!(some.iter().collect::<HashSet<_>>().len(), 10);
    assert!(some.iter().all(|f| all.contains(f)));
    let every: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "1000"]);
    assert_eq!(every.iter().cloned().collect::<HashSet<_>>(), all);
    assert_eq!(every.len(), 30);

    // A negative count: exactly that many picks, repeats allowed.
    let picks: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "-100"]);
    assert_eq!(picks.len(), 100);
    assert!(picks.iter().all(|f| all.contains(f)));
    assert!(picks.iter().collect::<HashSet<_>>().len() > 1);

    // WITHVALUES: flat pairs in RESP2.
    let pairs: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "-4", "WITHVALUES"]);
    assert_eq!(pairs.len(), 8);
    assert!(pairs.chunks(2).all(|p| all.contains(&p[0]) && p[1] == "v"));
    let pairs: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "3", "withvalues"]);
    assert_eq!(pairs.len(), 6);

    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "1", "WITHVALUE"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "1", "WITHVALUES", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "x", "WITHVALUES", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and \
         9223372036854775807"
    );
    assert_eq!(
        err(
            &mut c,
            &["HRANDFIELD", "h", "9223372036854775807", "WITHVALUES"]
        ),
        "ERR value is out of range"
    );
    // Redis 7.0 would build this reply until memory ran out; kvik refuses at once.
    assert_eq!(
        err(
            &mut c,
            &["HRANDFIELD", "h", "-4611686018427387903", "WITHVALUES"]
        ),
        "ERR value is out of range"
    );
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "-9223372036854775807"]),
        "ERR value is out of range"
    );
    // A huge positive count is just the whole hash.
    let every: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "9223372036854775807"]);
    assert_eq!(every.len(), 30);

    // RESP3: a WITHVALUES pick is an array of two.
    q::<()>(&mut c, &["HSET", "one", "f", "v"]);
    let mut r = Raw::resp3(srv.raw());
    assert_eq!(
        r.text(&["HRANDFIELD", "one", "-2", "WITHVALUES"]),
        "*2\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        r.text(&["HRANDFIELD", "one", "2", "WITHVALUES"]),
        "*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        r.text(&["HRANDFIELD", "one", "-2"]),
        "*2\r\n$1\r\nf\r\n$1\r\nf\r\n"
    );
    assert_eq!(r.text(&["HRANDFIELD", "nokey"]), "_\r\n");
    assert_eq!(r.text(&["HRANDFIELD", "nokey", "1"]), "*0\r\n");
}

#[test]
fn hrandfield_samples_a_big_hash_widely() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut p = redis::pipe();
    for chunk in 0..20 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("big");
        for i in chunk * 500..(chunk + 1) * 500 {
            cmd.arg(format!("field:{i}")).arg(i);
        }
        p.add_command(cmd).ignore();
    }
    p.query::<()>(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 10_000);
    let picks: Vec<String> = q(&mut c, &["HRANDFIELD", "big", "-3000"]);
    assert_eq!(picks.len(), 3000);
    let distinct = picks.iter().collect::<HashSet<_>>().len();
    assert!(
        distinct > 1000,
        "only {distinct} distinct fields in 3000 picks"
    );
    let some: Vec<String> = q(&mut c, &["HRANDFIELD", "big", "20", "WITHVALUES"]);
    assert_eq!(some.len(), 40);
    for p in some.chunks(2) {
        assert_eq!(p[0], format!("field:{}", p[1]));
    }
    assert_eq!(
        some.chunks(2).map(|p| &p[0]).collect::<HashSet<_>>().len(),
        20
    );
}

/// HSCAN, SSCAN and ZSCAN with a pattern that starts with literal text seek the run of
/// members that start with it (members are stored in byte order) and end after it: the calls a
/// full iteration takes follow that run (111 of 1,000 members for `m1*`), not the collection;
/// the members returned are the walk's (`scan-prefix-seek no`).
#[test]
fn member_scans_seek_a_literal_prefix() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let (mut hset, mut sadd, mut zadd) =
        (redis::cmd("HSET"), redis::cmd("SADD"), redis::cmd("ZADD"));
    hset.arg("h");
    sadd.arg("s");
    zadd.arg("z");
    for i in 0..1000 {
        hset.arg(format!("m{i}")).arg("v");
        sadd.arg(format!("m{i}"));
        zadd.arg(i).arg(format!("m{i}"));
    }
    for cmd in [hset, sadd, zadd] {
        cmd.query::<()>(&mut c).unwrap();
    }
    // Every member a full iteration returned, once each, and the calls it took.
    let scan = |c: &mut redis::Connection, cmd: &str, key: &str, pattern: &str| {
        let (mut seen, mut cursor, mut calls) = (BTreeMap::new(), "0".to_string(), 0);
        loop {
            let (next, items): (String, Vec<String>) =
                q(c, &[cmd, key, &cursor, "MATCH", pattern, "COUNT", "50"]);
            let step = if cmd == "SSCAN" { 1 } else { 2 };
            for m in items.iter().step_by(step) {
                assert!(seen.insert(m.clone(), ()).is_none(), "{cmd} {m} twice");
            }
            calls += 1;
            if next == "0" {
                return (seen.into_keys().collect::<Vec<String>>(), calls);
            }
            cursor = next;
        }
    };
    let mut want: Vec<String> = (0..1000)
        .map(|i| format!("m{i}"))
        .filter(|m| m.starts_with("m1"))
        .collect();
    want.sort();
    for (cmd, key) in [("HSCAN", "h"), ("SSCAN", "s"), ("ZSCAN", "z")] {
        let (seen, calls) = scan(&mut c, cmd, key, "m1*");
        assert_eq!(seen, want, "{cmd}");
        assert!(calls <= 3, "{cmd}: {calls} calls for 111 members");
        let (seen, _) = scan(&mut c, cmd, key, "m1[0-1]?");
        assert_eq!(seen.len(), 20, "{cmd}");
        let (seen, _) = scan(&mut c, cmd, key, "n*");
        assert!(seen.is_empty(), "{cmd}");
        let _: () = q(&mut c, &["CONFIG", "SET", "scan-prefix-seek", "no"]);
        let (seen, calls) = scan(&mut c, cmd, key, "m1*");
        let _: () = q(&mut c, &["CONFIG", "SET", "scan-prefix-seek", "yes"]);
        assert_eq!(seen, want, "{cmd}, walked");
        assert!(calls >= 20, "{cmd}: {calls} calls walking 1,000 members");
    }
}

#[test]
fn hscan_visits_every_field_once() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut cmd = redis::cmd("HSET");
    cmd.arg("h");
    for i in 0..1000 {
        cmd.arg(format!("k{i}")).arg(format!("v{i}"));
    }
    cmd.query::<()>(&mut c).unwrap();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) =
            q(&mut c, &["HSCAN", "h", &cursor, "COUNT", "37"]);
        assert!(items.len() <= 74);
        for p in items.chunks(2) {
            assert!(
                seen.insert(p[0].clone(), p[1].clone()).is_none(),
                "{} twice",
                p[0]
            );
        }
        calls += 1;
        assert!(calls < 100, "the scan never ended");
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 1000);
    assert!(seen.iter().all(|(k, v)| k[1..] == v[1..]));
    assert!(calls >= 27, "COUNT bounds each step ({calls} calls)");

    // MATCH filters what a step visited.
    let mut matched = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, items): (String, Vec<String>) = q(
            &mut c,
            &["HSCAN", "h", &cursor, "MATCH", "k1?", "COUNT", "100"],
        );
        matched.extend(items.chunks(2).map(|p| p[0].clone()));
        if next == "0" {
            break;
        }
        cursor = next;
    }
    matched.sort();
    let mut expected: Vec<String> = (10..20).map(|i| format!("k{i}")).collect();
    expected.sort();
    assert_eq!(matched, expected);

    let (next, items): (String, Vec<String>) = q(&mut c, &["HSCAN", "nokey", "0"]);
    assert_eq!((next.as_str(), items.len()), ("0", 0));
    for (args, e) in [
        (&["HSCAN", "h", "x"][..], "ERR invalid cursor"),
        (&["HSCAN", "h", "0", "COUNT", "0"], "ERR syntax error"),
        (&["HSCAN", "h", "0", "COUNT", "-1"], "ERR syntax error"),
        (
            &["HSCAN", "h", "0", "COUNT", "x"],
            "ERR value is not an integer or out of range",
        ),
        (&["HSCAN", "h", "0", "MATCH"], "ERR syntax error"),
        (&["HSCAN", "h", "0", "NOVALUES"], "ERR syntax error"),
        (&["HSCAN", "h", "0", "FOO", "1"], "ERR syntax error"),
        (
            &["HSCAN", "h", "18446744073709551616"],
            "ERR invalid cursor",
        ),
        (&["HSCAN", "h", "12345"], "ERR invalid cursor"),
    ] {
        assert_eq!(err(&mut c, args), e, "{args:?}");
    }
    // A cursor belongs to the key it was handed out for.
    let (next, _): (String, Vec<String>) = q(&mut c, &["HSCAN", "h", "0", "COUNT", "5"]);
    q::<()>(&mut c, &["HSET", "other", "a", "b"]);
    assert_eq!(
        err(&mut c, &["HSCAN", "other", &next]),
        "ERR invalid cursor"
    );
}

#[test]
fn hgetall_is_a_map_in_resp3() {
    let srv = TestServer::start();
    let mut r = Raw::resp3(srv.raw());
    r.call(&["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(
        r.text(&["HGETALL", "h"]),
        "%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(r.text(&["HGETALL", "nokey"]), "%0\r\n");
    assert_eq!(r.text(&["HKEYS", "h"]), "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    assert_eq!(r.text(&["HMGET", "h", "a", "z"]), "*2\r\n$1\r\n1\r\n_\r\n");
    assert_eq!(r.text(&["HGET", "h", "z"]), "_\r\n");
    assert_eq!(r.text(&["HINCRBYFLOAT", "h", "a", "0.5"]), "$3\r\n1.5\r\n");
    assert_eq!(
        r.text(&["HSCAN", "h", "0"]),
        "*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
}

#[test]
fn a_big_hash_is_deleted_at_once() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut p = redis::pipe();
    for chunk in 0..40 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("big");
        for i in chunk * 500..(chunk + 1) * 500 {
            cmd.arg(format!("f{i}")).arg("some value");
        }
        p.add_command(cmd).ignore();
    }
    p.query::<()>(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 20_000);
    assert_eq!(q::<i64>(&mut c, &["DEL", "big"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 0);
    assert!(!exists(&mut c, "big"));
    // A new hash of the same name starts empty: none of the old fields show through.
    assert_eq!(q::<i64>(&mut c, &["HSET", "big", "f1", "new"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 1);
    assert_eq!(qv(&mut c, &["HGET", "big", "f2"]), Value::Nil);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "big"]), ["f1"]);
}

#[test]
fn an_expired_hash_is_gone_with_its_fields() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<()>(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "h", "100"]), 1);
    // Writes keep the expiry.
    q::<()>(&mut c, &["HSET", "h", "c", "3"]);
    assert!(q::<i64>(&mut c, &["PTTL", "h"]) > 0);
    assert!(eventually(Duration::from_secs(10), || !exists(&mut c, "h")));
    assert_eq!(qv(&mut c, &["HGETALL", "h"]), Value::Array(vec![]));
    assert_eq!(qv(&mut c, &["HGET", "h", "a"]), Value::Nil);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 0);
    // HSET on the expired key makes a fresh hash without an expiry.
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "z", "9"]), 1);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "h"]), ["z"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "h"]), -1);
}

/// HRANDFIELD of a hash without field TTLs draws from its deck (`storage::pop_decks`), dealt
/// by its first read: fields deleted after the deal never come back, fields added after it do,
/// and a field whose value changed keeps one card and is read with its new value.
#[test]
fn hrandfield_draws_from_the_deck_only_what_the_hash_holds() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut hset = redis::cmd("HSET");
    hset.arg("h");
    for i in 0..1000 {
        hset.arg(format!("f{i}")).arg(format!("v{i}"));
    }
    assert_eq!(hset.query::<i64>(&mut c).unwrap(), 1000);
    let _: String = q(&mut c, &["HRANDFIELD", "h"]);
    let mut change = redis::pipe();
    change.cmd("HDEL").arg("h");
    for i in 0..100 {
        change.arg(format!("f{i}"));
    }
    change.ignore().cmd("HSET").arg("h");
    for i in 0..100 {
        change.arg(format!("g{i}")).arg(format!("w{i}"));
    }
    change
        .ignore()
        .cmd("HSET")
        .arg("h")
        .arg("f500")
        .arg("x")
        .ignore();
    let () = change.query(&mut c).unwrap();
    let value_of = |f: &str| match f {
        "f500" => "x".to_string(),
        _ if f.starts_with('g') => format!("w{}", &f[1..]),
        _ => format!("v{}", &f[1..]),
    };
    let removed = |f: &str| f.starts_with('f') && f[1..].parse::<u32>().unwrap() < 100;
    let rtc_before = rtc_commands(&mut c);
    let mut added = 0;
    for _ in 0..2000 {
        let f: String = q(&mut c, &["HRANDFIELD", "h"]);
        assert!(!removed(&f), "{f} was deleted");
        added += usize::from(f.starts_with('g'));
    }
    // Drawn from the deck on the I/O thread (the deal on a worker).
    let on_io_threads = rtc_commands(&mut c) - rtc_before;
    assert!(
        on_io_threads >= 1500,
        "{on_io_threads} of 2,000 ran on an I/O thread"
    );
    assert!(
        added >= 30,
        "only {added} of 2,000 picks were fields added after the deal"
    );
    for _ in 0..50 {
        for count in ["20", "-30"] {
            let got: Vec<(String, String)> = q(&mut c, &["HRANDFIELD", "h", count, "WITHVALUES"]);
            assert_eq!(
                got.len(),
                count.trim_start_matches('-').parse::<usize>().unwrap()
            );
            if !count.starts_with('-') {
                let names: HashSet<&String> = got.iter().map(|(f, _)| f).collect();
                assert_eq!(names.len(), got.len(), "distinct");
            }
            for (f, v) in &got {
                assert!(!removed(f), "{f} was deleted");
                assert_eq!(*v, value_of(f), "{f}'s value");
            }
        }
    }
}

#[test]
fn hashes_survive_a_restart() {
    let mut srv = TestServer::start();
    {
        let mut c = srv.client();
        q::<()>(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
        q::<()>(&mut c, &["HDEL", "h", "b"]);
        q::<()>(&mut c, &["HINCRBY", "h", "a", "10"]);
    }
    srv.restart();
    let mut c = srv.client();
    let all: BTreeMap<String, String> = q(&mut c, &["HGETALL", "h"]);
    let expected: BTreeMap<String, String> = [("a", "11"), ("c", "3")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(all, expected);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 2);
}

/// Commands whose replies have a defined order, sent to kvik and to a real redis-server 7.0.
#[test]
fn hash_replies_match_real_redis() {
    let srv = TestServer::start();
    let redis = RedisServer::start(&[]);
    let script: &[&[&str]] = &[
        &["HSET", "h", "f1", "v1", "f2", "v2", "n", "10", "fl", "2.5"],
        &["HSET", "h", "f1", "x", "f1", "y"],
        &["HMSET", "h", "m", "1"],
        &["HSETNX", "h", "m", "2"],
        &["HGET", "h", "f1"],
        &["HMGET", "h", "f1", "zz", "m"],
        &["HINCRBY", "h", "n", "-30"],
        &["HINCRBY", "h", "f1", "1"],
        &["HINCRBY", "h", "n", "9223372036854775807"],
        &["HINCRBYFLOAT", "h", "fl", "0.25"],
        &["HINCRBYFLOAT", "h", "fl", "1e10"],
        &["HINCRBYFLOAT", "h", "fl", "-inf"],
        &["HINCRBYFLOAT", "h", "f2", "1"],
        &["HSTRLEN", "h", "fl"],
        &["HDEL", "h", "m", "m", "zz"],
        &["HLEN", "h"],
        &["HEXISTS", "h", "f2"],
        &["HRANDFIELD", "h", "0"],
        &["HRANDFIELD", "nokey", "-5", "WITHVALUES"],
        &["HRANDFIELD", "h", "-9223372036854775808"],
        &["HRANDFIELD", "h", "5", "WITHVALUES", "x"],
        &["HSCAN", "h", "0", "COUNT", "0"],
        &["HSCAN", "h", "abc"],
        &["HSCAN", "h", "0", "MATCH", "zz*"],
        &["SET", "s", "x"],
        &["HGET", "s", "f"],
        &["HSET", "s", "f", "v"],
        &["HSET", "h", "odd"],
        &["HGETALL", "nokey"],
        &["HDEL", "h", "f1", "f2", "n", "fl"],
        &["EXISTS", "h"],
    ];
    for proto in ["2", "3"] {
        let (mut a, mut b) = if proto == "3" {
            (Raw::resp3(srv.raw()), Raw::resp3(redis.raw()))
        } else {
            (Raw::new(srv.raw()), Raw::new(redis.raw()))
        };
        a.call(&["FLUSHALL"]);
        b.call(&["FLUSHALL"]);
        for args in script {
            assert_eq!(a.text(args), b.text(args), "RESP{proto} {args:?}");
        }
    }
}
