//! Integration tests: sorted sets (ZADD ... ZSCAN, the blocking BZPOPMIN BZPOPMAX BZMPOP).
//!
//! Expected replies and error texts were taken from a real redis-server 7.0.15; the last test
//! replays a scripted sequence of tricky commands against one started for the purpose and
//! compares every reply byte for byte, in RESP2 and RESP3.

use crate::common::*;
use kvik_resp::{parse_frame, Limits};
use kvik_testkit::{resp_request, Endpoint, RedisServer};
use redis::Connection;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A raw connection that reads whole RESP frames, for byte-exact replies.
struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn new(port: u16, resp3: bool) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut r = Raw { s, buf: Vec::new() };
        if resp3 {
            r.cmd(&["HELLO", "3"]);
        }
        r
    }

    fn send(&mut self, args: &[&str]) {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.s.write_all(&resp_request(&a)).unwrap();
    }

    /// The next reply frame, as the bytes that came.
    fn frame(&mut self) -> Vec<u8> {
        loop {
            if let Ok(Some((_, n))) = parse_frame(&self.buf, &Limits::default()) {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).expect("reply within the timeout");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        self.send(args);
        self.frame()
    }

    fn text(&mut self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.cmd(args)).into_owned()
    }
}

fn range(con: &mut Connection, args: &[&str]) -> Vec<String> {
    q(con, args)
}

fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn zadd_flags_combine_as_in_redis() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "NX", "5", "a", "3", "c"]),
        1
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "1");
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "XX", "5", "a", "9", "new"]),
        0
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "5");
    assert_eq!(q::<Option<String>>(&mut c, &["ZSCORE", "z", "new"]), None);
    // GT / LT only move a score one way; CH counts changed members too.
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "GT", "CH", "4", "a", "3", "b"]),
        1
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        strs(&["b", "3", "c", "3", "a", "5"])
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZADD", "z", "LT", "CH", "1", "a", "7", "b", "0", "d"]
        ),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "CH", "1", "a", "1", "d"]),
        1
    );
    // INCR replies the new score, or nil when a flag stops it.
    assert_eq!(
        q::<String>(&mut c, &["ZADD", "z", "INCR", "2.5", "a"]),
        "3.5"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "z", "NX", "INCR", "1", "a"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "z", "GT", "INCR", "-1", "a"]),
        None
    );
    assert_eq!(
        q::<String>(&mut c, &["ZADD", "z", "LT", "INCR", "-1", "a"]),
        "2.5"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "z", "XX", "INCR", "1", "zz"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "nokey", "XX", "INCR", "1", "a"]),
        None
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "nokey"]), 0);
    assert_eq!(q::<String>(&mut c, &["ZINCRBY", "z", "-0.5", "a"]), "2");
    assert_eq!(
        q::<String>(&mut c, &["ZINCRBY", "z", "1.5", "fresh"]),
        "1.5"
    );
    // The same member twice in one ZADD: the last score wins, counted once.
    assert_eq!(q::<i64>(&mut c, &["ZADD", "dup", "1", "m", "2", "m"]), 1);
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "dup", "m"]), "2");
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "dup"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "inf", "a"]), 0);
    for (args, e) in [
        (
            &["ZADD", "z", "NX", "XX", "1", "a"][..],
            "ERR XX and NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "GT", "LT", "1", "a"],
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "GT", "NX", "1", "a"],
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "INCR", "1", "a", "2", "b"],
            "ERR INCR option supports a single increment-element pair",
        ),
        (&["ZADD", "z", "1", "a", "2"], "ERR syntax error"),
        (&["ZADD", "z", "NX", "1"], "ERR syntax error"),
        (&["ZADD", "z", "nan", "a"], "ERR value is not a valid float"),
        (
            &["ZADD", "z", "1", "a", "x", "b"],
            "ERR value is not a valid float",
        ),
        (
            &["ZADD", "z", "INCR", "-inf", "a"],
            "ERR resulting score is not a number (NaN)",
        ),
        (
            &["ZINCRBY", "z", "-inf", "a"],
            "ERR resulting score is not a number (NaN)",
        ),
        (
            &["ZINCRBY", "z", "x", "a"],
            "ERR value is not a valid float",
        ),
        (
            &["ZADD", "z", "NX"],
            "ERR wrong number of arguments for 'zadd' command",
        ),
    ] {
        assert_eq!(err(&mut c, args), e, "{args:?}");
    }
    // The failed ZADD INCR changed nothing.
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "inf");
}

#[test]
fn scores_print_exactly_as_redis() {
    let srv = TestServer::start();
    let mut r2 = Raw::new(srv.port(), false);
    let mut r3 = Raw::new(srv.port(), true);
    r2.cmd(&[
        "ZADD", "z", "0.1", "a", "1e20", "b", "inf", "c", "-inf", "d", "-0", "e", "1.5", "f", "3",
        "g",
    ]);
    for (m, text) in [
        ("a", "0.10000000000000001"),
        ("b", "1e+20"),
        ("c", "inf"),
        ("d", "-inf"),
        ("e", "0"),
        ("f", "1.5"),
        ("g", "3"),
    ] {
        assert_eq!(
            r2.text(&["ZSCORE", "z", m]),
            format!("${}\r\n{text}\r\n", text.len())
        );
        assert_eq!(r3.text(&["ZSCORE", "z", m]), format!(",{text}\r\n"));
    }
    assert_eq!(r2.text(&["ZSCORE", "z", "nope"]), "$-1\r\n");
    assert_eq!(r3.text(&["ZSCORE", "z", "nope"]), "_\r\n");
    assert_eq!(
        r2.text(&["ZMSCORE", "z", "a", "nope"]),
        "*2\r\n$19\r\n0.10000000000000001\r\n$-1\r\n"
    );
    assert_eq!(
        r3.text(&["ZMSCORE", "z", "a", "nope"]),
        "*2\r\n,0.10000000000000001\r\n_\r\n"
    );
    // An increment of -0 on a new member replies -0, as Redis does; it is stored as 0.
    assert_eq!(r2.text(&["ZINCRBY", "z", "-0", "h"]), "$2\r\n-0\r\n");
    assert_eq!(r2.text(&["ZSCORE", "z", "h"]), "$1\r\n0\r\n");
    // ZSCAN of a small set prints integral scores as integers (Redis's listpack text).
    r2.cmd(&["ZADD", "s", "1e18", "big", "0.5", "half", "9.2e18", "huge"]);
    assert_eq!(
        r3.text(&["ZSCAN", "s", "0"]),
        "*2\r\n$1\r\n0\r\n*6\r\n$4\r\nhalf\r\n$3\r\n0.5\r\n$3\r\nbig\r\n$19\r\n1000000000000000000\r\n$4\r\nhuge\r\n$7\r\n9.2e+18\r\n"
    );
}

#[test]
fn resp3_reply_shapes() {
    let srv = TestServer::start();
    let mut r2 = Raw::new(srv.port(), false);
    let mut r3 = Raw::new(srv.port(), true);
    r2.cmd(&["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(
        r2.text(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        r3.text(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n"
    );
    assert_eq!(
        r3.text(&["ZRANGE", "z", "0", "-1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(r3.text(&["ZRANK", "z", "b"]), ":1\r\n");
    assert_eq!(r3.text(&["ZRANK", "z", "x"]), "_\r\n");
    assert_eq!(
        r3.text(&["ZRANDMEMBER", "z", "5", "WITHSCORES"]),
        "*2\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\na\r\n,1\r\n"
    );
    assert_eq!(r3.text(&["ZRANDMEMBER", "nokey"]), "_\r\n");
    assert_eq!(r2.text(&["ZRANDMEMBER", "nokey", "2"]), "*0\r\n");
    // ZPOPMIN without a count is flat in both protocols; with one, pairs in RESP3.
    assert_eq!(r3.text(&["ZPOPMIN", "z"]), "*2\r\n$1\r\na\r\n,1\r\n");
    r2.cmd(&["ZADD", "z", "1", "a"]);
    assert_eq!(
        r3.text(&["ZPOPMIN", "z", "1"]),
        "*1\r\n*2\r\n$1\r\na\r\n,1\r\n"
    );
    r2.cmd(&["ZADD", "z", "1", "a"]);
    assert_eq!(
        r2.text(&["ZPOPMIN", "z", "1"]),
        "*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(r2.text(&["ZPOPMIN", "nokey"]), "*0\r\n");
    // ZMPOP nests pairs in both protocols; nothing to pop is a null array.
    assert_eq!(
        r2.text(&["ZMPOP", "1", "z", "MAX"]),
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(r2.text(&["ZMPOP", "1", "z", "MAX"]), "*-1\r\n");
    assert_eq!(r3.text(&["ZMPOP", "1", "z", "MAX"]), "_\r\n");
    r2.cmd(&["ZADD", "u", "1", "x", "2", "y"]);
    assert_eq!(
        r3.text(&["ZUNION", "1", "u", "WITHSCORES"]),
        "*2\r\n*2\r\n$1\r\nx\r\n,1\r\n*2\r\n$1\r\ny\r\n,2\r\n"
    );
    // ZSCAN scores are bulk strings even in RESP3.
    assert_eq!(
        r3.text(&["ZSCAN", "u", "0"]),
        "*2\r\n$1\r\n0\r\n*4\r\n$1\r\nx\r\n$1\r\n1\r\n$1\r\ny\r\n$1\r\n2\r\n"
    );
}

#[test]
fn equal_scores_are_ordered_by_member_bytes() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<i64>(
        &mut c,
        &[
            "ZADD", "z", "1", "b", "1", "a", "1", "ab", "1", "", "1", "B", "0", "z", "2", "0",
        ],
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "z", "0", "-1"]),
        strs(&["z", "", "B", "a", "ab", "b", "0"])
    );
    assert_eq!(
        range(&mut c, &["ZREVRANGE", "z", "0", "-1"]),
        strs(&["0", "b", "ab", "a", "B", "", "z"])
    );
    assert_eq!(
        range(&mut c, &["ZRANGEBYSCORE", "z", "1", "1", "LIMIT", "1", "2"]),
        strs(&["B", "a"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "z", "ab"]), 4);
    assert_eq!(q::<i64>(&mut c, &["ZREVRANK", "z", "ab"]), 2);
    // -0 and 0 are one score.
    q::<i64>(&mut c, &["ZADD", "n", "0", "b", "-0", "a"]);
    assert_eq!(
        range(&mut c, &["ZRANGE", "n", "0", "-1", "WITHSCORES"]),
        strs(&["a", "0", "b", "0"])
    );
}

#[test]
fn range_commands_and_their_errors() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<i64>(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "z", "(1", "3", "BYSCORE"]),
        strs(&["b", "c"])
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "z", "(5", "(1", "BYSCORE", "REV"]),
        strs(&["d", "c", "b"])
    );
    assert_eq!(
        range(
            &mut c,
            &[
                "ZRANGE",
                "z",
                "+inf",
                "-inf",
                "BYSCORE",
                "REV",
                "LIMIT",
                "1",
                "2",
                "WITHSCORES"
            ]
        ),
        strs(&["d", "4", "c", "3"])
    );
    assert_eq!(
        range(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"]
        ),
        strs(&[])
    );
    assert_eq!(
        range(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "3", "-1"]
        ),
        strs(&["d", "e"])
    );
    assert_eq!(
        range(&mut c, &["ZREVRANGEBYSCORE", "z", "4", "2"]),
        strs(&["d", "c", "b"])
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "z", "-2", "100"]),
        strs(&["d", "e"])
    );
    assert_eq!(range(&mut c, &["ZRANGE", "z", "3", "1"]), strs(&[]));
    assert_eq!(
        range(&mut c, &["ZRANGE", "z", "0", "1", "REV"]),
        strs(&["e", "d"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(1", "(5"]), 3);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "", "+inf"]), 5);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "nokey", "-inf", "+inf"]), 0);
    q::<i64>(
        &mut c,
        &["ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d"],
    );
    assert_eq!(
        range(&mut c, &["ZRANGEBYLEX", "l", "(a", "[c"]),
        strs(&["b", "c"])
    );
    assert_eq!(
        range(
            &mut c,
            &["ZREVRANGEBYLEX", "l", "+", "(b", "LIMIT", "0", "1"]
        ),
        strs(&["d"])
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "l", "[c", "-", "BYLEX", "REV"]),
        strs(&["c", "b", "a"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "l", "-", "+"]), 4);
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "l", "(a", "(a"]), 0);
    for (args, e) in [
        (
            &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"][..],
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ),
        (
            &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"],
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ),
        (
            &["ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"],
            "ERR syntax error",
        ),
        (&["ZRANGE", "z", "0", "1", "REV", "REV"], "ERR syntax error"),
        (&["ZRANGEBYSCORE", "z", "0", "1", "REV"], "ERR syntax error"),
        (
            &["ZRANGESTORE", "d", "z", "0", "1", "WITHSCORES"],
            "ERR syntax error",
        ),
        (
            &["ZRANGE", "z", "0", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["ZRANGE", "z", "x", "1", "BYSCORE"],
            "ERR min or max is not a float",
        ),
        (
            &["ZCOUNT", "z", "nan", "1"],
            "ERR min or max is not a float",
        ),
        (
            &["ZRANGEBYLEX", "z", "a", "+"],
            "ERR min or max not valid string range item",
        ),
        (
            &["ZLEXCOUNT", "z", "-", "++"],
            "ERR min or max not valid string range item",
        ),
        (
            &["ZRANGE", "z", "0", "1", "BYSCORE", "LIMIT", "x", "1"],
            "ERR value is not an integer or out of range",
        ),
    ] {
        assert_eq!(err(&mut c, args), e, "{args:?}");
    }
}

#[test]
fn removals_delete_the_emptied_key() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<i64>(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "6", "f",
        ],
    );
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "a", "a", "nope"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "-2", "-1"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "(2", "3"]), 1);
    assert_eq!(
        range(&mut c, &["ZRANGE", "z", "0", "-1"]),
        strs(&["b", "d"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "5", "9"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "b", "d"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    q::<i64>(&mut c, &["ZADD", "l", "0", "a", "0", "b", "0", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "l", "[a", "(c"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "l", "-", "+"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]), 0);
    q::<i64>(&mut c, &["ZADD", "p", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(
        range(&mut c, &["ZPOPMAX", "p", "2"]),
        strs(&["c", "3", "b", "2"])
    );
    assert_eq!(range(&mut c, &["ZPOPMIN", "p", "5"]), strs(&["a", "1"]));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "p"]), 0);
    assert_eq!(
        err(&mut c, &["ZPOPMIN", "p", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(err(&mut c, &["ZPOPMIN", "p", "1", "2"]), "ERR syntax error");
    q::<i64>(&mut c, &["ZADD", "q", "1", "a", "2", "b"]);
    assert_eq!(
        err(&mut c, &["ZMPOP", "0", "q", "MIN"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["ZMPOP", "1", "q", "MIN", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(
        err(
            &mut c,
            &["ZMPOP", "1", "q", "MIN", "COUNT", "1", "COUNT", "1"]
        ),
        "ERR syntax error"
    );
    assert_eq!(err(&mut c, &["ZMPOP", "3", "q", "MIN"]), "ERR syntax error");
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(err(&mut c, &["ZMPOP", "2", "str", "q", "MIN"]), WRONGTYPE);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "q"]), 2);
}

#[test]
fn wrong_types_are_refused() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<()>(&mut c, &["SET", "s", "x"]);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    for args in [
        &["ZADD", "s", "1", "a"][..],
        &["ZINCRBY", "s", "1", "a"],
        &["ZREM", "s", "a"],
        &["ZCARD", "s"],
        &["ZSCORE", "s", "a"],
        &["ZMSCORE", "s", "a"],
        &["ZRANK", "s", "a"],
        &["ZRANGE", "s", "0", "-1"],
        &["ZRANGESTORE", "d", "s", "0", "-1"],
        &["ZCOUNT", "s", "0", "1"],
        &["ZREMRANGEBYSCORE", "s", "0", "1"],
        &["ZPOPMIN", "s", "0"],
        &["ZRANDMEMBER", "s", "0"],
        &["ZSCAN", "s", "0"],
        &["ZUNION", "2", "z", "s"],
        &["ZINTERCARD", "2", "z", "s"],
        &["BZPOPMIN", "s", "0"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
    // STORE destinations of any type are overwritten.
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", "s", "z", "0", "-1"]), 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", "s"]), "zset");
}

#[test]
fn store_commands_overwrite_and_delete_on_empty() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<i64>(&mut c, &["ZADD", "a", "1", "x", "2", "y", "3", "z"]);
    q::<i64>(&mut c, &["ZADD", "b", "10", "y", "20", "z", "30", "w"]);
    q::<i64>(&mut c, &["ZADD", "dst", "99", "old"]);
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "dst", "2", "a", "b"]), 4);
    assert_eq!(
        range(&mut c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        strs(&["x", "1", "y", "12", "z", "23", "w", "30"])
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "ZINTERSTORE",
                "dst",
                "2",
                "a",
                "b",
                "WEIGHTS",
                "2",
                "0.5",
                "AGGREGATE",
                "MAX"
            ]
        ),
        2
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        strs(&["y", "5", "z", "10"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZDIFFSTORE", "dst", "2", "a", "b"]), 1);
    assert_eq!(
        range(&mut c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        strs(&["x", "1"])
    );
    // The source may be the destination.
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "a", "2", "a", "a"]), 3);
    assert_eq!(
        range(&mut c, &["ZRANGE", "a", "0", "-1", "WITHSCORES"]),
        strs(&["x", "2", "y", "4", "z", "6"])
    );
    // Empty results delete the destination.
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERSTORE", "dst", "2", "a", "nokey"]),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
    q::<()>(&mut c, &["SET", "dst", "v"]);
    assert_eq!(
        q::<i64>(&mut c, &["ZRANGESTORE", "dst", "a", "10", "20"]),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "ZRANGESTORE",
                "dst",
                "a",
                "(2",
                "+inf",
                "BYSCORE",
                "LIMIT",
                "0",
                "1"
            ]
        ),
        1
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        strs(&["y", "4"])
    );
    assert_eq!(
        err(&mut c, &["ZUNIONSTORE", "dst", "0", "a"]),
        "ERR at least 1 input key is needed for 'zunionstore' command"
    );
    assert_eq!(
        err(&mut c, &["ZUNIONSTORE", "dst", "1", "a", "WITHSCORES"]),
        "ERR syntax error"
    );
}

#[test]
fn weights_and_aggregates() {
    let srv = TestServer::start();
    let mut c = srv.client();
    q::<i64>(&mut c, &["ZADD", "a", "1", "x", "2", "y", "inf", "i"]);
    q::<i64>(&mut c, &["ZADD", "b", "3", "y", "4", "z", "-inf", "i"]);
    q::<i64>(&mut c, &["SADD", "s", "x", "z", "q"]);
    let u = |c: &mut Connection, extra: &[&str]| -> Vec<String> {
        let mut args = vec!["ZUNION", "2", "a", "b"];
        args.extend_from_slice(extra);
        args.push("WITHSCORES");
        range(c, &args)
    };
    // inf + -inf sums to 0, as Redis defines it.
    assert_eq!(
        u(&mut c, &[]),
        strs(&["i", "0", "x", "1", "z", "4", "y", "5"])
    );
    assert_eq!(
        u(&mut c, &["AGGREGATE", "MIN"]),
        strs(&["i", "-inf", "x", "1", "y", "2", "z", "4"])
    );
    assert_eq!(
        u(&mut c, &["AGGREGATE", "MAX"]),
        strs(&["x", "1", "y", "3", "z", "4", "i", "inf"])
    );
    // 0 * inf is 0.
    assert_eq!(
        u(&mut c, &["WEIGHTS", "0", "2"]),
        strs(&["i", "-inf", "x", "0", "y", "6", "z", "8"])
    );
    assert_eq!(
        range(
            &mut c,
            &["ZINTER", "2", "a", "b", "WEIGHTS", "2", "1", "WITHSCORES"]
        ),
        strs(&["i", "0", "y", "7"])
    );
    // Plain sets take part with score 1.
    assert_eq!(
        range(&mut c, &["ZINTER", "2", "a", "s", "WITHSCORES"]),
        strs(&["x", "2"])
    );
    assert_eq!(
        range(&mut c, &["ZDIFF", "2", "s", "a", "WITHSCORES"]),
        strs(&["q", "1", "z", "1"])
    );
    assert_eq!(range(&mut c, &["ZDIFF", "3", "a", "b", "s"]), strs(&[]));
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", "a", "b"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERCARD", "2", "a", "b", "LIMIT", "1"]),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "3", "a", "b", "nokey"]), 0);
    for (args, e) in [
        (
            &["ZUNION", "2", "a", "b", "WEIGHTS", "1", "x"][..],
            "ERR weight value is not a float",
        ),
        (
            &["ZUNION", "2", "a", "b", "WEIGHTS", "1"],
            "ERR syntax error",
        ),
        (
            &["ZUNION", "2", "a", "b", "AGGREGATE", "AVG"],
            "ERR syntax error",
        ),
        (
            &["ZDIFF", "2", "a", "b", "WEIGHTS", "1", "1"],
            "ERR syntax error",
        ),
        (
            &["ZINTERCARD", "2", "a", "b", "LIMIT", "-1"],
            "ERR LIMIT can't be negative",
        ),
        (
            &["ZINTERCARD", "0", "a"],
            "ERR at least 1 input key is needed for 'zintercard' command",
        ),
        (&["ZINTER", "3", "a", "b"], "ERR syntax error"),
        (
            &["ZUNION", "x", "a"],
            "ERR value is not an integer or out of range",
        ),
    ] {
        assert_eq!(err(&mut c, args), e, "{args:?}");
    }
}

#[test]
fn random_members() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let members: Vec<String> = (0..50).map(|i| format!("m{i:02}")).collect();
    let mut args = vec!["ZADD".to_string(), "z".to_string()];
    for (i, m) in members.iter().enumerate() {
        args.push(i.to_string());
        args.push(m.clone());
    }
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    q::<i64>(&mut c, &a);
    let all: HashSet<String> = members.iter().cloned().collect();
    let one: String = q(&mut c, &["ZRANDMEMBER", "z"]);
    assert!(all.contains(&one));
    let some: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "10"]);
    assert_eq!(some.len(), 10);
    assert_eq!(some.iter().collect::<HashSet<_>>().len(), 10, "distinct");
    assert!(some.iter().all(|m| all.contains(m)));
    let rep: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "-200"]);
    assert_eq!(rep.len(), 200);
    assert!(rep.iter().all(|m| all.contains(m)));
    let ws: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "-3", "WITHSCORES"]);
    assert_eq!(ws.len(), 6);
    for p in ws.chunks(2) {
        assert_eq!(
            format!("m{:02}", p[1].parse::<u32>().unwrap()),
            p[0],
            "score matches member"
        );
    }
    // A count of at least the size returns all, highest score first.
    let every: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "100"]);
    let mut expected = members.clone();
    expected.reverse();
    assert_eq!(every, expected);
    assert_eq!(
        err(
            &mut c,
            &["ZRANDMEMBER", "z", "-9223372036854775807", "WITHSCORES"]
        ),
        "ERR value is out of range"
    );
    assert_eq!(
        err(&mut c, &["ZRANDMEMBER", "z", "-9223372036854775807"]),
        "ERR value is out of range"
    );
    assert_eq!(
        err(&mut c, &["ZRANDMEMBER", "z", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(
        err(&mut c, &["ZRANDMEMBER", "z", "1", "WITHSCORE"]),
        "ERR syntax error"
    );
}

#[test]
fn big_zset_from_both_ends_and_full_scan() {
    let srv = TestServer::start();
    let mut c = srv.client();
    const N: usize = 10_000;
    for chunk in (0..N).collect::<Vec<_>>().chunks(1000) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("big");
        for &i in chunk {
            cmd.arg(i).arg(format!("m{i:05}"));
        }
        let _: i64 = cmd.query(&mut c).unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "big"]), N as i64);
    let m = |i: usize| format!("m{i:05}");
    assert_eq!(
        range(&mut c, &["ZRANGE", "big", "0", "2"]),
        vec![m(0), m(1), m(2)]
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "big", "-3", "-1"]),
        vec![m(9997), m(9998), m(9999)]
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "big", "9998", "100000", "WITHSCORES"]),
        vec![m(9998), "9998".into(), m(9999), "9999".into()]
    );
    assert_eq!(
        range(&mut c, &["ZREVRANGE", "big", "0", "1"]),
        vec![m(9999), m(9998)]
    );
    assert_eq!(
        range(&mut c, &["ZREVRANGE", "big", "-2", "-1"]),
        vec![m(1), m(0)]
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "big", "5000", "5001"]),
        vec![m(5000), m(5001)]
    );
    assert_eq!(
        range(&mut c, &["ZRANGE", "big", "7000", "7001", "REV"]),
        vec![m(2999), m(2998)]
    );
    for i in [0, 1, 4999, 5000, 9998, 9999] {
        assert_eq!(q::<i64>(&mut c, &["ZRANK", "big", &m(i)]), i as i64);
        assert_eq!(
            q::<i64>(&mut c, &["ZREVRANK", "big", &m(i)]),
            (N - 1 - i) as i64
        );
    }
    assert_eq!(
        range(&mut c, &["ZRANGEBYSCORE", "big", "(9997", "+inf"]),
        vec![m(9998), m(9999)]
    );
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "big", "100", "(200"]), 100);
    // A full ZSCAN returns every member exactly once, with its score.
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) =
            q(&mut c, &["ZSCAN", "big", &cursor, "COUNT", "500"]);
        for p in items.chunks(2) {
            assert_eq!(format!("m{:05}", p[1].parse::<u32>().unwrap()), p[0]);
            assert!(seen.insert(p[0].clone()), "{} twice", p[0]);
        }
        calls += 1;
        assert!(calls < 100, "scan does not end");
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), N);
    assert_eq!(
        err(&mut c, &["ZSCAN", "big", "12345"]),
        "ERR invalid cursor"
    );
    let (_, matched): (String, Vec<String>) = q(
        &mut c,
        &["ZSCAN", "big", "0", "MATCH", "m0000*", "COUNT", "20"],
    );
    assert_eq!(
        matched,
        vec![
            m(0),
            "0".into(),
            m(1),
            "1".into(),
            m(2),
            "2".into(),
            m(3),
            "3".into(),
            m(4),
            "4".into(),
            m(5),
            "5".into(),
            m(6),
            "6".into(),
            m(7),
            "7".into(),
            m(8),
            "8".into(),
            m(9),
            "9".into()
        ]
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZREMRANGEBYRANK", "big", "100", "-101"]),
        (N - 200) as i64
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "big"]), 200);
    assert_eq!(
        range(&mut c, &["ZRANGE", "big", "99", "100"]),
        vec![m(99), m(9900)]
    );
}

#[test]
fn bzpopmin_is_served_by_a_later_zadd_in_arrival_order() {
    let srv = TestServer::start();
    let mut first = Raw::new(srv.port(), false);
    let mut second = Raw::new(srv.port(), true);
    let mut c = srv.client();
    first.send(&["BZPOPMIN", "nokey", "z", "0"]);
    // The second waiter arrives once the first is parked.
    assert!(eventually(Duration::from_secs(10), || {
        info_field(&mut c, "clients", "blocked_clients") == Some(1)
    }));
    second.send(&["BZPOPMAX", "z", "0"]);
    assert!(eventually(Duration::from_secs(10), || {
        info_field(&mut c, "clients", "blocked_clients") == Some(2)
    }));
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]),
        3
    );
    assert_eq!(
        String::from_utf8_lossy(&first.frame()),
        "*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&second.frame()),
        "*3\r\n$1\r\nz\r\n$1\r\nc\r\n,3\r\n"
    );
    assert_eq!(range(&mut c, &["ZRANGE", "z", "0", "-1"]), strs(&["b"]));
    // BZMPOP takes what is there at once, with its count.
    assert_eq!(
        first.text(&["BZMPOP", "0", "2", "nokey", "z", "MIN", "COUNT", "5"]),
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    // A waiter served by a STORE command's destination.
    first.send(&["BZMPOP", "0", "1", "dst", "MAX", "COUNT", "2"]);
    assert!(eventually(Duration::from_secs(10), || {
        info_field(&mut c, "clients", "blocked_clients") == Some(1)
    }));
    q::<i64>(&mut c, &["ZADD", "src", "1", "x", "2", "y", "3", "w"]);
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "dst", "1", "src"]), 3);
    assert_eq!(
        String::from_utf8_lossy(&first.frame()),
        "*2\r\n$3\r\ndst\r\n*2\r\n*2\r\n$1\r\nw\r\n$1\r\n3\r\n*2\r\n$1\r\ny\r\n$1\r\n2\r\n"
    );
}

#[test]
fn blocking_pops_time_out_with_null_and_check_arguments() {
    let srv = TestServer::start();
    let mut r2 = Raw::new(srv.port(), false);
    let mut r3 = Raw::new(srv.port(), true);
    assert_eq!(r2.text(&["BZPOPMIN", "z", "0.05"]), "*-1\r\n");
    assert_eq!(r3.text(&["BZPOPMAX", "z", "y", "0.05"]), "_\r\n");
    assert_eq!(r2.text(&["BZMPOP", "0.05", "1", "z", "MIN"]), "*-1\r\n");
    assert_eq!(
        r2.text(&["BZPOPMIN", "z", "-1"]),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(
        r2.text(&["BZPOPMIN", "z", "x"]),
        "-ERR timeout is not a float or out of range\r\n"
    );
    assert_eq!(
        r2.text(&["BZMPOP", "x", "0", "z", "MIN"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    assert_eq!(
        r2.text(&["BZMPOP", "-1", "1", "z", "FOO"]),
        "-ERR syntax error\r\n"
    );
    // Inside MULTI nothing blocks: the timeout reply comes at once.
    r2.cmd(&["MULTI"]);
    r2.cmd(&["BZPOPMIN", "z", "0"]);
    assert_eq!(r2.text(&["EXEC"]), "*1\r\n*-1\r\n");
    // Waiting on an existing non-empty set is immediate.
    r2.cmd(&["ZADD", "z", "5", "m"]);
    assert_eq!(
        r3.text(&["BZPOPMIN", "nokey", "z", "0"]),
        "*3\r\n$1\r\nz\r\n$1\r\nm\r\n,5\r\n"
    );
}

/// A scripted sequence of tricky commands; every reply must equal redis-server's byte for byte.
/// (Random replies are left out except where the result is determined.)
const SCRIPT: &[&str] = &[
    "ZADD z 1 a 2 b 3 c 0.1 d 1e20 e -inf f +inf g -0 h 1.5 i 5e-324 j 1.7976931348623157e308 k",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZREVRANGE z 0 -1 WITHSCORES",
    "ZRANGEBYSCORE z (0 (3 WITHSCORES LIMIT 1 3",
    "ZREVRANGEBYSCORE z +inf -inf WITHSCORES LIMIT 2 -1",
    "ZRANGE z (1 +inf BYSCORE REV LIMIT 0 2 WITHSCORES",
    "ZCOUNT z -inf +inf",
    "ZCOUNT z (-inf (+inf",
    "ZCOUNT z 1e400 -1e400",
    "ZMSCORE z a nope e h j",
    "ZRANK z g",
    "ZREVRANK z f",
    "ZADD z GT CH 0 a 10 b",
    "ZADD z LT INCR 1 a",
    "ZADD z GT INCR -1 a",
    "ZADD z XX INCR 1 nope",
    "ZINCRBY z 0.2 d",
    "ZINCRBY z -0 newmember",
    "ZADD z INCR -inf g",
    "ZADD z 1 a 2",
    "ZADD z XX NX 1 a",
    "ZADD z LT GT 1 a",
    "ZADD lx 0 b 0 a 0 c 0 aa 0 zz",
    "ZRANGEBYLEX lx - +",
    "ZRANGEBYLEX lx (a [c LIMIT 1 5",
    "ZREVRANGEBYLEX lx + [aa",
    "ZRANGE lx [c (a BYLEX REV",
    "ZLEXCOUNT lx [a (zz",
    "ZRANGEBYLEX lx + -",
    "ZRANGEBYLEX lx x +",
    "ZRANGE lx 0 -1 LIMIT 0 1",
    "ZRANGE lx - + BYLEX WITHSCORES",
    "ZRANGESTORE dst z 2 4",
    "ZRANGE dst 0 -1 WITHSCORES",
    "ZRANGESTORE dst z 100 200",
    "EXISTS dst",
    "ZREMRANGEBYSCORE z (1 (3",
    "ZREMRANGEBYRANK z -2 -1",
    "ZREMRANGEBYLEX lx [b +",
    "ZRANGE lx 0 -1",
    "ZPOPMIN z",
    "ZPOPMAX z 2",
    "ZPOPMIN z 0",
    "ZPOPMIN z -1",
    "ZMPOP 2 nokey z MIN COUNT 2",
    "ZMPOP 1 nokey MAX",
    "ZMPOP 1 z MIN COUNT 0",
    "ZADD u1 1 a 2 b 3 c",
    "ZADD u2 4 b 5 c 6 d",
    "ZUNION 2 u1 u2 WITHSCORES",
    "ZUNION 2 u1 u2 WEIGHTS 2 -1 AGGREGATE MIN WITHSCORES",
    "ZINTER 2 u1 u2 AGGREGATE MAX WITHSCORES",
    "ZDIFF 2 u1 u2 WITHSCORES",
    "ZUNIONSTORE out 3 u1 u2 nokey WEIGHTS 1 1 5",
    "ZRANGE out 0 -1 WITHSCORES",
    "ZINTERSTORE out 2 u1 nokey",
    "EXISTS out",
    "ZINTERCARD 2 u1 u2 LIMIT 1",
    "ZUNION 0 u1",
    "ZINTER 3 u1 u2",
    "ZUNION 2 u1 u2 WEIGHTS 1 nan",
    "ZRANDMEMBER u1 10 WITHSCORES",
    "ZRANDMEMBER u1 0",
    "ZRANDMEMBER u1 x",
    "ZSCAN u2 0",
    "ZSCAN u2 0 MATCH *c* COUNT 1",
    "ZSCAN u2 x",
    "ZSCAN nokey 0 BADOPTION",
    "SET str v",
    "ZADD str 1 a",
    "ZRANGE str 0 -1",
    "ZUNION 2 u1 str BADOPTION",
];

#[test]
fn scripted_replies_match_redis_byte_for_byte() {
    let redis = RedisServer::start(&[]);
    let kvik = TestServer::start();
    for resp3 in [false, true] {
        let mut a = Raw::new(redis.port(), resp3);
        let mut b = Raw::new(kvik.port(), resp3);
        a.cmd(&["FLUSHALL"]);
        b.cmd(&["FLUSHALL"]);
        for line in SCRIPT {
            let args: Vec<&str> = line.split(' ').collect();
            let (ra, rb) = (a.cmd(&args), b.cmd(&args));
            assert_eq!(
                String::from_utf8_lossy(&rb),
                String::from_utf8_lossy(&ra),
                "{line} (resp3: {resp3})"
            );
        }
    }
}

#[test]
fn member_writes_touch_the_key_for_watch_and_keep_or_drop_the_ttl() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut other = srv.client();
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    q::<i64>(&mut c, &["EXPIRE", "z", "1000"]);
    // A member change keeps the TTL; a STORE replaces the key without one.
    q::<i64>(&mut c, &["ZADD", "z", "2", "b"]);
    assert!(q::<i64>(&mut c, &["TTL", "z"]) > 0);
    q::<()>(&mut c, &["WATCH", "z"]);
    q::<String>(&mut other, &["ZINCRBY", "z", "1", "a"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["ZADD", "z", "5", "c"]);
    assert_eq!(
        qv(&mut c, &["EXEC"]),
        redis::Value::Nil,
        "WATCH saw the ZINCRBY"
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 2);
    // A command that changes nothing does not touch the key.
    q::<()>(&mut c, &["WATCH", "z"]);
    q::<i64>(&mut other, &["ZADD", "z", "NX", "9", "a"]);
    q::<i64>(&mut other, &["ZREM", "z", "nope"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["ZADD", "z", "5", "c"]);
    assert_eq!(q::<Vec<i64>>(&mut c, &["EXEC"]), vec![1]);
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "z", "1", "z"]), 3);
    assert_eq!(q::<i64>(&mut c, &["TTL", "z"]), -1);
}

#[test]
fn random_members_of_a_big_set() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut cmd = redis::cmd("ZADD");
    cmd.arg("z");
    for i in 0..3000 {
        cmd.arg(i).arg(format!("m{i}"));
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    let picks: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "20", "WITHSCORES"]);
    assert_eq!(picks.len(), 40);
    let names: HashSet<&String> = picks.iter().step_by(2).collect();
    assert_eq!(names.len(), 20, "distinct");
    for p in picks.chunks(2) {
        assert_eq!(p[0], format!("m{}", p[1]));
    }
    let rep: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "-30"]);
    assert_eq!(rep.len(), 30);
    assert!(rep.iter().all(|m| m.starts_with('m')));
    let one: String = q(&mut c, &["ZRANDMEMBER", "z"]);
    assert!(one.starts_with('m'));
}

/// ZRANDMEMBER draws from the sorted set's deck (`storage::pop_decks`), dealt by its first
/// read: members removed after the deal never come back, members added after it do, and a
/// member whose score changed keeps one card and is read with its new score.
#[test]
fn zrandmember_draws_from_the_deck_only_what_the_set_holds() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut add = redis::cmd("ZADD");
    add.arg("z");
    for i in 0..1000 {
        add.arg(i).arg(format!("m{i}"));
    }
    assert_eq!(add.query::<i64>(&mut c).unwrap(), 1000);
    let _: String = redis::cmd("ZRANDMEMBER").arg("z").query(&mut c).unwrap();
    let mut change = redis::pipe();
    change.cmd("ZREM").arg("z");
    for i in 0..100 {
        change.arg(format!("m{i}"));
    }
    change.ignore().cmd("ZADD").arg("z");
    for i in 0..100 {
        change.arg(10_000 + i).arg(format!("n{i}"));
    }
    change
        .ignore()
        .cmd("ZADD")
        .arg("z")
        .arg(5000)
        .arg("m500")
        .ignore();
    let () = change.query(&mut c).unwrap();
    let score_of = |m: &str| -> i64 {
        let i: i64 = m[1..].parse().unwrap();
        match m {
            "m500" => 5000,
            _ if m.starts_with('n') => 10_000 + i,
            _ => i,
        }
    };
    let rtc_before = rtc_commands(&mut c);
    let mut added = 0;
    for _ in 0..2000 {
        let m: String = redis::cmd("ZRANDMEMBER").arg("z").query(&mut c).unwrap();
        let i: i64 = m[1..].parse().unwrap();
        assert!(m.starts_with('n') || i >= 100, "{m} was removed");
        added += usize::from(m.starts_with('n'));
    }
    // Drawn from the deck on the I/O thread (the deal, and any walk, on a worker).
    let on_io_threads = rtc_commands(&mut c) - rtc_before;
    assert!(
        on_io_threads >= 1500,
        "{on_io_threads} of 2,000 ran on an I/O thread"
    );
    assert!(
        added >= 30,
        "only {added} of 2,000 picks were members added after the deal"
    );
    for _ in 0..50 {
        for count in [20i64, -30] {
            let got: Vec<(String, i64)> = redis::cmd("ZRANDMEMBER")
                .arg("z")
                .arg(count)
                .arg("WITHSCORES")
                .query(&mut c)
                .unwrap();
            assert_eq!(got.len(), count.unsigned_abs() as usize);
            if count > 0 {
                let names: HashSet<&String> = got.iter().map(|(m, _)| m).collect();
                assert_eq!(names.len(), got.len(), "distinct");
            }
            for (m, score) in &got {
                let i: i64 = m[1..].parse().unwrap();
                assert!(m.starts_with('n') || i >= 100, "{m} was removed");
                assert_eq!(*score, score_of(m), "{m}'s score");
            }
        }
    }
}

/// A queue on ZPOPMIN (or ZPOPMAX): each pop seeks from where the last one left the set's
/// end (`storage::pop_hints`) instead of stepping over the tombstones of every member popped
/// before it. Counted by RocksDB (INFO rocksdb `iter_skipped`), not timed: 200 pops after
/// 2,000 step over a handful of entries each, where reading from the set's end stepped over
/// all 2,000 popped members' entries every time.
#[test]
fn pops_from_either_end_do_not_step_over_the_members_popped_before() {
    let s = TestServer::start();
    let mut c = s.client();
    for (key, pop) in [("q", "ZPOPMIN"), ("p", "ZPOPMAX")] {
        let mut pipe = redis::pipe();
        for i in 0..3000 {
            pipe.cmd("ZADD")
                .arg(key)
                .arg(i)
                .arg(format!("m{i}"))
                .ignore();
        }
        let () = pipe.query(&mut c).unwrap();
        let nth = |i: i32| if pop == "ZPOPMIN" { i } else { 2999 - i };
        for i in 0..2000 {
            let got: Vec<String> = redis::cmd(pop).arg(key).query(&mut c).unwrap();
            assert_eq!(got[0], format!("m{}", nth(i)), "{pop}");
        }
        let before = info_field(&mut c, "rocksdb", "iter_skipped").unwrap();
        for i in 2000..2200 {
            let got: Vec<String> = redis::cmd(pop).arg(key).query(&mut c).unwrap();
            assert_eq!(got[0], format!("m{}", nth(i)), "{pop}");
        }
        let skipped = info_field(&mut c, "rocksdb", "iter_skipped").unwrap() - before;
        assert!(
            skipped < 200 * 20,
            "200 {pop}s stepped over {skipped} entries (from the set's end: ~2,000 each)"
        );
    }
}

/// Pops stay exact around everything that writes past where the last pop left the set's end:
/// random ZADD, ZINCRBY, ZREM, ZPOPMIN and ZPOPMAX with counts, DEL, and pops in MULTI/EXEC,
/// in scripts and in pipelines (one I/O-thread turn), each reply checked against a model.
#[test]
fn pops_stay_exact_around_writes_past_where_they_left_off() {
    use std::collections::BTreeSet;
    let s = TestServer::start();
    let mut c = s.client();
    // Scores are small integers, so (score, member) orders as the server does.
    let mut model: BTreeSet<(i64, String)> = BTreeSet::new();
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let score_of = |model: &BTreeSet<(i64, String)>, m: &str| {
        model.iter().find(|(_, x)| x == m).map(|(s, _)| *s)
    };
    let pop = |model: &mut BTreeSet<(i64, String)>, n: usize, max: bool| -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..n {
            let end = if max {
                model.iter().next_back()
            } else {
                model.iter().next()
            };
            let Some(first) = end.cloned() else {
                break;
            };
            model.remove(&first);
            out.push(first.1);
            out.push(first.0.to_string());
        }
        out
    };
    // The model of `first` pops, a ZADD of `m` at `score`, one more pop.
    let pop_write_pop = |model: &mut BTreeSet<(i64, String)>, first, max, m: &str, score| {
        let mut want = pop(model, first, max);
        if let Some(old) = score_of(model, m) {
            model.remove(&(old, m.to_string()));
        }
        model.insert((score, m.to_string()));
        want.extend(pop(model, 1, max));
        want
    };
    for step in 0..3000 {
        let m = format!("m{}", next(60));
        match next(11) {
            0..=2 => {
                let score = next(100) as i64;
                if let Some(old) = score_of(&model, &m) {
                    model.remove(&(old, m.clone()));
                }
                model.insert((score, m.clone()));
                let _: i64 = redis::cmd("ZADD")
                    .arg("z")
                    .arg(score)
                    .arg(&m)
                    .query(&mut c)
                    .unwrap();
            }
            3 => {
                let by = next(7) as i64 - 3;
                let old = score_of(&model, &m);
                if let Some(o) = old {
                    model.remove(&(o, m.clone()));
                }
                model.insert((old.unwrap_or(0) + by, m.clone()));
                let _: String = redis::cmd("ZINCRBY")
                    .arg("z")
                    .arg(by)
                    .arg(&m)
                    .query(&mut c)
                    .unwrap();
            }
            4 => {
                if let Some(o) = score_of(&model, &m) {
                    model.remove(&(o, m.clone()));
                }
                let _: i64 = redis::cmd("ZREM").arg("z").arg(&m).query(&mut c).unwrap();
            }
            5..=7 => {
                let n = 1 + next(3) as usize;
                let max = next(2) == 0;
                let name = if max { "ZPOPMAX" } else { "ZPOPMIN" };
                let want = pop(&mut model, n, max);
                let got: Vec<String> = redis::cmd(name).arg("z").arg(n).query(&mut c).unwrap();
                assert_eq!(got, want, "step {step}: {name} z {n}");
            }
            8 => {
                // A transaction and a script: a pop, a write past it, a pop.
                let max = next(2) == 0;
                let name = if max { "zpopmax" } else { "zpopmin" };
                let score = next(100) as i64;
                let want = pop_write_pop(&mut model, 1, max, &m, score);
                let got: Vec<String> = if step % 2 == 0 {
                    let (a, _, b): (Vec<String>, i64, Vec<String>) = redis::pipe()
                        .atomic()
                        .cmd(name)
                        .arg("z")
                        .cmd("ZADD")
                        .arg("z")
                        .arg(score)
                        .arg(&m)
                        .cmd(name)
                        .arg("z")
                        .query(&mut c)
                        .unwrap();
                    [a, b].concat()
                } else {
                    redis::cmd("EVAL")
                        .arg(
                            "local a = redis.call(ARGV[3], KEYS[1]) \
                             redis.call('zadd', KEYS[1], ARGV[1], ARGV[2]) \
                             local b = redis.call(ARGV[3], KEYS[1]) \
                             for _, x in ipairs(b) do table.insert(a, x) end return a",
                        )
                        .arg(1)
                        .arg("z")
                        .arg(score)
                        .arg(&m)
                        .arg(name)
                        .query(&mut c)
                        .unwrap()
                };
                assert_eq!(got, want, "step {step}: {name}, ZADD {score} {m}, {name}");
            }
            9 => {
                // One pipeline, so one I/O-thread turn: a pop, a write past it, a pop.
                let max = next(2) == 0;
                let name = if max { "ZPOPMAX" } else { "ZPOPMIN" };
                let score = next(100) as i64;
                let want = pop_write_pop(&mut model, 2, max, &m, score);
                let (a, _, b): (Vec<String>, i64, Vec<String>) = redis::pipe()
                    .cmd(name)
                    .arg("z")
                    .arg(2)
                    .cmd("ZADD")
                    .arg("z")
                    .arg(score)
                    .arg(&m)
                    .cmd(name)
                    .arg("z")
                    .query(&mut c)
                    .unwrap();
                assert_eq!(
                    [a, b].concat(),
                    want,
                    "step {step}: pipelined {name}, ZADD, {name}"
                );
            }
            _ => {
                if next(4) == 0 {
                    model.clear();
                    let _: i64 = redis::cmd("DEL").arg("z").query(&mut c).unwrap();
                }
            }
        }
    }
    let all: Vec<String> = redis::cmd("ZRANGE")
        .arg("z")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut c)
        .unwrap();
    let want: Vec<String> = model
        .iter()
        .flat_map(|(s, m)| [m.clone(), s.to_string()])
        .collect();
    assert_eq!(all, want);
}

/// ZINTER, ZINTERCARD and ZDIFF of sets past one chunk (512 members) of their first input,
/// with inputs named twice, WEIGHTS, a plain set among them and LIMITs: every reply checked
/// against the members computed here. And what they read, counted by RocksDB (INFO rocksdb
/// `iter_next`), not timed: a count with a LIMIT stops walking after the chunk that reaches it,
/// and the first chunk is small (it walked all 3,500 members of the smallest input before),
/// and a count or a difference of one key named twice walks nothing (they walked all of it).
#[test]
fn intersections_and_differences_of_big_sets_read_only_what_they_need() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut pipe = redis::pipe();
    for i in 0..5000 {
        pipe.cmd("ZADD")
            .arg("a")
            .arg(i)
            .arg(format!("m{i}"))
            .ignore();
        if i % 2 == 0 {
            pipe.cmd("ZADD")
                .arg("b")
                .arg(-i)
                .arg(format!("m{i}"))
                .ignore();
        }
        if i % 3 == 0 {
            pipe.cmd("SADD").arg("s").arg(format!("m{i}")).ignore();
        }
    }
    for i in 0..1000 {
        pipe.cmd("ZADD")
            .arg("b")
            .arg(i)
            .arg(format!("x{i}"))
            .ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let card = |c: &mut Connection, args: &[&str]| q::<i64>(c, args);
    let steps = |c: &mut Connection| info_field(c, "rocksdb", "iter_next").unwrap();

    // What the replies must be.
    assert_eq!(card(&mut c, &["ZINTERCARD", "2", "a", "b"]), 2500);
    assert_eq!(
        card(&mut c, &["ZINTERCARD", "2", "b", "a", "LIMIT", "3000"]),
        2500
    );
    assert_eq!(
        card(&mut c, &["ZINTERCARD", "2", "a", "b", "LIMIT", "0"]),
        2500
    );
    assert_eq!(card(&mut c, &["ZINTERCARD", "3", "a", "b", "s"]), 834);
    assert_eq!(
        card(&mut c, &["ZINTERCARD", "3", "a", "b", "s", "LIMIT", "600"]),
        600
    );
    assert_eq!(card(&mut c, &["ZINTERCARD", "1", "a"]), 5000);
    assert_eq!(
        card(&mut c, &["ZINTERCARD", "3", "a", "a", "a", "LIMIT", "7"]),
        7
    );
    assert_eq!(card(&mut c, &["ZINTERCARD", "2", "a", "nokey"]), 0);
    let scored = |c: &mut Connection, args: &[&str]| -> Vec<(String, f64)> { q(c, args) };
    let twice = scored(
        &mut c,
        &["ZINTER", "2", "a", "a", "WEIGHTS", "1", "2", "WITHSCORES"],
    );
    assert_eq!(twice.len(), 5000);
    for (k, (m, score)) in twice.iter().enumerate() {
        assert_eq!((m, *score), (&format!("m{k}"), 3.0 * k as f64));
    }
    let max = scored(
        &mut c,
        &[
            "ZINTER",
            "3",
            "b",
            "a",
            "a",
            "WEIGHTS",
            "2",
            "1",
            "-1",
            "AGGREGATE",
            "MAX",
            "WITHSCORES",
        ],
    );
    let mut want: Vec<(String, f64)> = (0..5000)
        .step_by(2)
        .map(|i| (format!("m{i}"), i as f64))
        .collect();
    want.sort_by(|x, y| x.1.total_cmp(&y.1).then(x.0.cmp(&y.0)));
    assert_eq!(max, want);
    let with_set = scored(&mut c, &["ZINTER", "2", "a", "s", "WITHSCORES"]);
    assert_eq!(with_set.len(), 1667);
    assert!(with_set.iter().all(|(m, score)| {
        let i: f64 = m[1..].parse().unwrap();
        i % 3.0 == 0.0 && *score == i + 1.0
    }));
    assert_eq!(range(&mut c, &["ZDIFF", "2", "a", "a"]), strs(&[]));
    let odd = range(&mut c, &["ZDIFF", "2", "a", "b"]);
    let want: Vec<String> = (0..5000)
        .filter(|i| i % 2 == 1)
        .map(|i| format!("m{i}"))
        .collect();
    assert_eq!(odd, want);
    let xs: Vec<String> = (0..1000).map(|i| format!("x{i}")).collect();
    assert_eq!(range(&mut c, &["ZDIFF", "3", "b", "a", "nokey"]), xs);
    q::<i64>(&mut c, &["ZADD", "d", "1", "old"]);
    assert_eq!(card(&mut c, &["ZDIFFSTORE", "d", "2", "b", "b"]), 0);
    assert_eq!(card(&mut c, &["EXISTS", "d"]), 0);
    assert_eq!(card(&mut c, &["ZINTERSTORE", "d", "2", "a", "b"]), 2500);
    // i + -i: every score 0, so member order.
    assert_eq!(
        range(&mut c, &["ZRANGE", "d", "0", "1"]),
        strs(&["m0", "m10"])
    );
    assert_eq!(range(&mut c, &["SDIFF", "s", "s"]), strs(&[]));
    assert_eq!(
        card(&mut c, &["SINTERCARD", "2", "s", "s", "LIMIT", "5"]),
        5
    );
    assert_eq!(card(&mut c, &["SINTERCARD", "1", "s"]), 1667);

    // What they read.
    let before = steps(&mut c);
    assert_eq!(
        card(&mut c, &["ZINTERCARD", "2", "a", "b", "LIMIT", "10"]),
        10
    );
    let limited = steps(&mut c) - before;
    assert!(
        limited < 200,
        "a count to 10 stepped {limited} times (a first chunk: 16; all of b: 3,500)"
    );
    let before = steps(&mut c);
    assert_eq!(card(&mut c, &["ZINTERCARD", "2", "a", "a"]), 5000);
    assert_eq!(range(&mut c, &["ZDIFF", "2", "a", "a"]), strs(&[]));
    assert_eq!(range(&mut c, &["SDIFF", "s", "s"]), strs(&[]));
    assert_eq!(card(&mut c, &["SINTERCARD", "2", "s", "s"]), 1667);
    let twice = steps(&mut c) - before;
    assert!(
        twice < 500,
        "keys named twice stepped {twice} times (all of them: ~13,300)"
    );
}
