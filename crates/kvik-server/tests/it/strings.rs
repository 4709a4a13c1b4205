//! Integration tests: strings (GET SET SETNX SETEX PSETEX MGET MSET MSETNX GETSET GETDEL GETEX
//! APPEND STRLEN INCR DECR INCRBY DECRBY INCRBYFLOAT GETRANGE SETRANGE SUBSTR LCS).
//!
//! Expected replies and error texts were taken from a real redis-server 7.0.15.

use crate::common::*;
use redis::{Connection, Value};
use std::net::TcpStream;
use std::time::Duration;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

fn arr(items: Vec<Value>) -> Value {
    Value::Array(items)
}

fn exists(con: &mut Connection, key: &str) -> bool {
    qv(con, &["EXISTS", key]) == int(1)
}

/// Sends one command on a raw connection and checks the exact reply bytes.
fn expect_raw(s: &mut TcpStream, args: &[&str], expected: &[u8]) {
    let (got, _) = roundtrip_raw(s, &resp_str(args), expected.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected),
        "reply to {args:?}"
    );
}

/// Switches a raw connection to RESP3 and consumes the HELLO reply (followed by a PING so the
/// end of the variable-length HELLO map is known).
fn hello3(s: &mut TcpStream) {
    let mut send = resp_str(&["HELLO", "3"]);
    send.extend_from_slice(&resp_str(&["PING"]));
    let (mut got, _) = roundtrip_raw(s, &send, 1);
    for _ in 0..100 {
        if got.ends_with(b"+PONG\r\n") {
            return;
        }
        let (more, closed) = read_raw(s, 1);
        assert!(!closed, "connection closed during HELLO");
        got.extend_from_slice(&more);
    }
    panic!("no PONG after HELLO 3: {:?}", String::from_utf8_lossy(&got));
}

#[test]
fn set_options_and_replies() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(qv(&mut c, &["GET", "k"]), Value::Nil);
    assert_eq!(qv(&mut c, &["SET", "k", "v1"]), Value::Okay);
    assert_eq!(qv(&mut c, &["GET", "k"]), bulk("v1"));
    // NX / XX.
    assert_eq!(qv(&mut c, &["SET", "k", "v2", "NX"]), Value::Nil);
    assert_eq!(qv(&mut c, &["SET", "new", "v", "XX"]), Value::Nil);
    assert!(!exists(&mut c, "new"));
    assert_eq!(qv(&mut c, &["SET", "k", "v2", "xx"]), Value::Okay);
    assert_eq!(qv(&mut c, &["SET", "new", "v", "nx", "NX"]), Value::Okay);
    // GET, alone and with NX / XX (Redis 7.0 allows both).
    assert_eq!(qv(&mut c, &["SET", "k", "v3", "GET"]), bulk("v2"));
    assert_eq!(qv(&mut c, &["SET", "k", "v4", "NX", "GET"]), bulk("v3"));
    assert_eq!(qv(&mut c, &["GET", "k"]), bulk("v3"));
    assert_eq!(qv(&mut c, &["SET", "none", "v", "XX", "GET"]), Value::Nil);
    assert!(!exists(&mut c, "none"));
    assert_eq!(qv(&mut c, &["SET", "g", "v", "GET", "get"]), Value::Nil);
    assert_eq!(qv(&mut c, &["GET", "g"]), bulk("v"));
    // Expiry options that are accepted.
    for opts in [
        &["EX", "100"][..],
        &["PX", "100000"],
        &["EXAT", "9999999999"],
        &["PXAT", "9999999999000"],
        &["KEEPTTL"],
        &["EX", "10", "EX", "20"],
        &["KEEPTTL", "KEEPTTL"],
        &["EXAT", "9223372036854775"],
    ] {
        let mut args = vec!["SET", "e", "v"];
        args.extend_from_slice(opts);
        assert_eq!(qv(&mut c, &args), Value::Okay, "{opts:?}");
    }
    // Errors, in Redis's order: syntax first, then the expiry value.
    let syntax = "ERR syntax error";
    for opts in [
        &["NX", "XX"][..],
        &["EX", "10", "PX", "10"],
        &["KEEPTTL", "EX", "10"],
        &["EX", "10", "KEEPTTL"],
        &["EX"],
        &["PERSIST"],
        &["FOO"],
        &["EX", "-1", "FOO"],
        &["EX", "abc", "NX", "XX"],
    ] {
        let mut args = vec!["SET", "k", "v"];
        args.extend_from_slice(opts);
        assert_eq!(err(&mut c, &args), syntax, "{opts:?}");
    }
    let invalid = "ERR invalid expire time in 'set' command";
    assert_eq!(err(&mut c, &["SET", "k", "v", "EX", "0"]), invalid);
    assert_eq!(err(&mut c, &["SET", "k", "v", "PX", "-5"]), invalid);
    assert_eq!(err(&mut c, &["SET", "k", "v", "PXAT", "0"]), invalid);
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "EXAT", "9223372036854776"]),
        invalid
    );
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "PX", "9223372036854775807"]),
        invalid
    );
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "EX", "abc"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["SET", "k"]),
        "ERR wrong number of arguments for 'set' command"
    );
    // No failed SET changed the key.
    assert_eq!(qv(&mut c, &["GET", "k"]), bulk("v3"));
    // Binary-safe values.
    let bin: Vec<u8> = (0..=255u8).collect();
    redis::cmd("SET")
        .arg("bin")
        .arg(&bin)
        .query::<()>(&mut c)
        .unwrap();
    let got: Vec<u8> = redis::cmd("GET").arg("bin").query(&mut c).unwrap();
    assert_eq!(got, bin);
}

#[test]
fn set_expiry_options_expire_the_key() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(qv(&mut c, &["SET", "px", "v", "PX", "100"]), Value::Okay);
    assert_eq!(qv(&mut c, &["SET", "ex", "v", "EX", "1"]), Value::Okay);
    assert!(eventually(Duration::from_secs(5), || qv(
        &mut c,
        &["GET", "px"]
    ) == Value::Nil));
    assert!(eventually(Duration::from_secs(5), || !exists(&mut c, "ex")));
    // An absolute time in the past: the key is gone at once; SET GET still answers the old value.
    qv(&mut c, &["SET", "past", "old"]);
    assert_eq!(
        qv(&mut c, &["SET", "past", "v", "PXAT", "1", "GET"]),
        bulk("old")
    );
    assert!(!exists(&mut c, "past"));
    assert_eq!(qv(&mut c, &["SET", "past", "v", "EXAT", "1"]), Value::Okay);
    assert!(!exists(&mut c, "past"));
    // Far in the future: stays.
    qv(&mut c, &["SET", "future", "v", "EXAT", "99999999999"]);
    assert_eq!(qv(&mut c, &["GET", "future"]), bulk("v"));
}

#[test]
fn ttl_is_cleared_by_set_family_and_kept_by_modifiers() {
    let srv = TestServer::start();
    let mut c = srv.client();
    // Every key below first gets a 300 ms expiry, and `ctl` gets its own afterwards: once `ctl`
    // is gone, every original expiry has passed too.
    let cleared = ["set", "getset", "mset", "setex"];
    let kept = [
        "keepttl",
        "append",
        "incr",
        "incrbyfloat",
        "setrange",
        "decrby",
    ];
    for k in cleared.iter().chain(kept.iter()) {
        qv(&mut c, &["SET", k, "1", "PX", "300"]);
    }
    qv(&mut c, &["SET", "ctl", "v", "PX", "300"]);
    qv(&mut c, &["SET", "set", "2"]);
    qv(&mut c, &["GETSET", "getset", "2"]);
    qv(&mut c, &["MSET", "mset", "2", "other", "x"]);
    qv(&mut c, &["SETEX", "setex", "1000", "2"]);
    qv(&mut c, &["SET", "keepttl", "2", "KEEPTTL"]);
    qv(&mut c, &["APPEND", "append", "2"]);
    qv(&mut c, &["INCR", "incr"]);
    qv(&mut c, &["INCRBYFLOAT", "incrbyfloat", "1.5"]);
    qv(&mut c, &["SETRANGE", "setrange", "0", "x"]);
    qv(&mut c, &["DECRBY", "decrby", "3"]);
    assert!(eventually(Duration::from_secs(5), || !exists(
        &mut c, "ctl"
    )));
    for k in cleared {
        assert!(exists(&mut c, k), "{k} should have lost its TTL");
    }
    for k in kept {
        assert!(
            eventually(Duration::from_secs(5), || !exists(&mut c, k)),
            "{k} should have kept its TTL"
        );
    }
}

#[test]
fn setnx_setex_psetex() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(qv(&mut c, &["SETNX", "k", "a"]), int(1));
    assert_eq!(qv(&mut c, &["SETNX", "k", "b"]), int(0));
    assert_eq!(qv(&mut c, &["GET", "k"]), bulk("a"));
    assert_eq!(qv(&mut c, &["SETEX", "k", "100", "b"]), Value::Okay);
    assert_eq!(qv(&mut c, &["GET", "k"]), bulk("b"));
    assert_eq!(qv(&mut c, &["PSETEX", "p", "100", "v"]), Value::Okay);
    assert_eq!(qv(&mut c, &["GET", "p"]), bulk("v"));
    assert!(eventually(Duration::from_secs(5), || !exists(&mut c, "p")));
    let setex = "ERR invalid expire time in 'setex' command";
    let psetex = "ERR invalid expire time in 'psetex' command";
    assert_eq!(err(&mut c, &["SETEX", "k", "0", "v"]), setex);
    assert_eq!(err(&mut c, &["SETEX", "k", "-1", "v"]), setex);
    assert_eq!(
        err(&mut c, &["SETEX", "k", "9223372036854775807", "v"]),
        setex
    );
    assert_eq!(err(&mut c, &["PSETEX", "k", "-1", "v"]), psetex);
    assert_eq!(
        err(&mut c, &["SETEX", "k", "abc", "v"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["SETEX", "k", "10", "v", "extra"]),
        "ERR wrong number of arguments for 'setex' command"
    );
    assert_eq!(
        err(&mut c, &["SETNX", "k"]),
        "ERR wrong number of arguments for 'setnx' command"
    );
    assert_eq!(qv(&mut c, &["GET", "k"]), bulk("b"));
}

#[test]
fn mget_mset_msetnx() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(
        qv(&mut c, &["MSET", "a", "1", "b", "2", "a", "3"]),
        Value::Okay
    );
    assert_eq!(
        qv(&mut c, &["MGET", "a", "b", "nokey", "a"]),
        arr(vec![bulk("3"), bulk("2"), Value::Nil, bulk("3")])
    );
    // MSETNX is all or nothing.
    assert_eq!(
        qv(&mut c, &["MSETNX", "x", "1", "b", "9", "y", "1"]),
        int(0)
    );
    assert_eq!(
        qv(&mut c, &["MGET", "x", "b", "y"]),
        arr(vec![Value::Nil, bulk("2"), Value::Nil])
    );
    assert_eq!(qv(&mut c, &["MSETNX", "x", "1", "y", "2"]), int(1));
    assert_eq!(
        qv(&mut c, &["MGET", "x", "y"]),
        arr(vec![bulk("1"), bulk("2")])
    );
    // A key repeated within MSETNX: none exists yet, the last value wins.
    assert_eq!(qv(&mut c, &["MSETNX", "z", "1", "z", "2"]), int(1));
    assert_eq!(qv(&mut c, &["GET", "z"]), bulk("2"));
    for (cmd, args) in [
        ("mset", &["MSET", "a"][..]),
        ("mset", &["MSET", "a", "1", "b"]),
        ("msetnx", &["MSETNX", "a", "1", "b"]),
        ("mget", &["MGET"]),
    ] {
        assert_eq!(
            err(&mut c, args),
            format!("ERR wrong number of arguments for '{cmd}' command")
        );
    }
    // A refused MSET wrote nothing.
    assert_eq!(qv(&mut c, &["GET", "a"]), bulk("3"));
    // Many pairs in one command all land.
    let mut args: Vec<String> = vec!["MSET".into()];
    for i in 0..500 {
        args.push(format!("key:{i}"));
        args.push(format!("val:{i}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(qv(&mut c, &refs), Value::Okay);
    let mut mget = vec!["MGET".to_string()];
    mget.extend((0..500).map(|i| format!("key:{i}")));
    let refs: Vec<&str> = mget.iter().map(String::as_str).collect();
    let expected: Vec<Value> = (0..500).map(|i| bulk(&format!("val:{i}"))).collect();
    assert_eq!(qv(&mut c, &refs), arr(expected));
}

#[test]
fn msetnx_is_atomic_under_concurrency() {
    // Two clients race MSETNX over overlapping keys: exactly one may win, and the keys must
    // all carry the winner's values, never a mix.
    let srv = TestServer::start();
    for round in 0..20 {
        let (k1, k2, k3) = (
            format!("r{round}:a"),
            format!("r{round}:b"),
            format!("r{round}:c"),
        );
        let handles: Vec<_> = ["x", "y"]
            .into_iter()
            .map(|tag| {
                let mut c = srv.client();
                let (k1, k2, k3) = (k1.clone(), k2.clone(), k3.clone());
                std::thread::spawn(move || {
                    let (a, b) = if tag == "x" { (&k1, &k2) } else { (&k3, &k2) };
                    let n: i64 = redis::cmd("MSETNX")
                        .arg(a)
                        .arg(tag)
                        .arg(b)
                        .arg(tag)
                        .query(&mut c)
                        .unwrap();
                    (tag, n)
                })
            })
            .collect();
        let results: Vec<(&str, i64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<&str> = results.iter().filter(|r| r.1 == 1).map(|r| r.0).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let mut c = srv.client();
        let b: String = redis::cmd("GET").arg(&k2).query(&mut c).unwrap();
        assert_eq!(b, winners[0]);
        let loser_key = if winners[0] == "x" { &k3 } else { &k1 };
        assert!(!exists(&mut c, loser_key));
    }
}

#[test]
fn getset_getdel_getex() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(qv(&mut c, &["GETSET", "k", "a"]), Value::Nil);
    assert_eq!(qv(&mut c, &["GETSET", "k", "b"]), bulk("a"));
    assert_eq!(qv(&mut c, &["GETDEL", "k"]), bulk("b"));
    assert_eq!(qv(&mut c, &["GETDEL", "k"]), Value::Nil);
    assert!(!exists(&mut c, "k"));

    // GETEX without options only reads; with options sets or removes the expiry.
    qv(&mut c, &["SET", "k", "v"]);
    assert_eq!(qv(&mut c, &["GETEX", "k"]), bulk("v"));
    assert_eq!(qv(&mut c, &["GETEX", "nokey"]), Value::Nil);
    assert_eq!(qv(&mut c, &["GETEX", "nokey", "EX", "10"]), Value::Nil);
    assert!(!exists(&mut c, "nokey"));
    for opts in [
        &["EX", "100"][..],
        &["px", "100000"],
        &["EXAT", "99999999999"],
        &["PXAT", "9223372036854775807"],
        &["EX", "10", "EX", "20"],
        &["PERSIST", "PERSIST"],
    ] {
        let mut args = vec!["GETEX", "k"];
        args.extend_from_slice(opts);
        assert_eq!(qv(&mut c, &args), bulk("v"), "{opts:?}");
    }
    // PX makes the key expire.
    qv(&mut c, &["SET", "short", "v"]);
    assert_eq!(qv(&mut c, &["GETEX", "short", "PX", "100"]), bulk("v"));
    assert!(eventually(Duration::from_secs(5), || !exists(
        &mut c, "short"
    )));
    // An elapsed absolute time returns the value and removes the key.
    qv(&mut c, &["SET", "gone", "v"]);
    assert_eq!(qv(&mut c, &["GETEX", "gone", "EXAT", "1"]), bulk("v"));
    assert!(!exists(&mut c, "gone"));
    // PERSIST outlives a control key with the same expiry.
    qv(&mut c, &["SET", "p", "v", "PX", "200"]);
    qv(&mut c, &["SET", "ctl", "v", "PX", "200"]);
    assert_eq!(qv(&mut c, &["GETEX", "p", "PERSIST"]), bulk("v"));
    assert!(eventually(Duration::from_secs(5), || !exists(
        &mut c, "ctl"
    )));
    assert_eq!(qv(&mut c, &["GET", "p"]), bulk("v"));

    // Errors: syntax first; the expiry value only matters once the key exists.
    for opts in [
        &["NX"][..],
        &["GET"],
        &["KEEPTTL"],
        &["PERSIST", "EX", "10"],
        &["EX", "10", "PX", "10"],
        &["EX"],
    ] {
        let mut args = vec!["GETEX", "k"];
        args.extend_from_slice(opts);
        assert_eq!(err(&mut c, &args), "ERR syntax error", "{opts:?}");
    }
    let invalid = "ERR invalid expire time in 'getex' command";
    assert_eq!(err(&mut c, &["GETEX", "k", "EX", "-1"]), invalid);
    assert_eq!(
        err(&mut c, &["GETEX", "k", "PX", "9223372036854775807"]),
        invalid
    );
    assert_eq!(
        err(&mut c, &["GETEX", "k", "EX", "abc"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(qv(&mut c, &["GETEX", "nokey", "EX", "-1"]), Value::Nil);
    assert_eq!(qv(&mut c, &["GETEX", "nokey", "EX", "abc"]), Value::Nil);
    assert_eq!(
        err(&mut c, &["GETDEL", "a", "b"]),
        "ERR wrong number of arguments for 'getdel' command"
    );
    assert_eq!(
        err(&mut c, &["GETEX"]),
        "ERR wrong number of arguments for 'getex' command"
    );
}

#[test]
fn append_and_strlen() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(qv(&mut c, &["STRLEN", "k"]), int(0));
    assert_eq!(qv(&mut c, &["APPEND", "k", "hello"]), int(5));
    assert_eq!(qv(&mut c, &["APPEND", "k", " world"]), int(11));
    assert_eq!(qv(&mut c, &["GET", "k"]), bulk("hello world"));
    assert_eq!(qv(&mut c, &["STRLEN", "k"]), int(11));
    // Appending nothing to a missing key creates an empty string.
    assert_eq!(qv(&mut c, &["APPEND", "empty", ""]), int(0));
    assert!(exists(&mut c, "empty"));
    assert_eq!(qv(&mut c, &["GET", "empty"]), bulk(""));
    // Appending to a number keeps it a string of digits.
    qv(&mut c, &["SET", "n", "12"]);
    assert_eq!(qv(&mut c, &["APPEND", "n", "3"]), int(3));
    assert_eq!(qv(&mut c, &["INCR", "n"]), int(124));
    assert_eq!(
        err(&mut c, &["STRLEN"]),
        "ERR wrong number of arguments for 'strlen' command"
    );
    assert_eq!(
        err(&mut c, &["APPEND", "k"]),
        "ERR wrong number of arguments for 'append' command"
    );
}

#[test]
fn incr_decr_family() {
    let srv = TestServer::start();
    let mut c = srv.client();
    assert_eq!(qv(&mut c, &["INCR", "n"]), int(1));
    assert_eq!(qv(&mut c, &["INCRBY", "n", "41"]), int(42));
    assert_eq!(qv(&mut c, &["DECR", "n"]), int(41));
    assert_eq!(qv(&mut c, &["DECRBY", "n", "50"]), int(-9));
    assert_eq!(qv(&mut c, &["INCRBY", "n", "-1"]), int(-10));
    assert_eq!(qv(&mut c, &["GET", "n"]), bulk("-10"));
    assert_eq!(qv(&mut c, &["DECR", "fresh"]), int(-1));
    let overflow = "ERR increment or decrement would overflow";
    qv(&mut c, &["SET", "max", "9223372036854775807"]);
    assert_eq!(err(&mut c, &["INCR", "max"]), overflow);
    assert_eq!(err(&mut c, &["DECRBY", "max", "-1"]), overflow);
    qv(&mut c, &["SET", "min", "-9223372036854775808"]);
    assert_eq!(err(&mut c, &["DECR", "min"]), overflow);
    assert_eq!(err(&mut c, &["INCRBY", "min", "-1"]), overflow);
    assert_eq!(
        qv(&mut c, &["INCRBY", "min", "9223372036854775807"]),
        int(-1)
    );
    assert_eq!(
        err(&mut c, &["DECRBY", "n", "-9223372036854775808"]),
        "ERR decrement would overflow"
    );
    // Values and increments must be canonical 64-bit integers.
    let not_int = "ERR value is not an integer or out of range";
    for v in [
        "abc",
        " 1",
        "1 ",
        "007",
        "+1",
        "9223372036854775808",
        "1.5",
        "",
    ] {
        qv(&mut c, &["SET", "bad", v]);
        assert_eq!(err(&mut c, &["INCR", "bad"]), not_int, "{v:?}");
        assert_eq!(
            qv(&mut c, &["GET", "bad"]),
            bulk(v),
            "{v:?} must be untouched"
        );
    }
    assert_eq!(err(&mut c, &["INCRBY", "n", "abc"]), not_int);
    assert_eq!(err(&mut c, &["DECRBY", "n", "1.0"]), not_int);
    assert_eq!(
        err(&mut c, &["INCRBY", "n", "99999999999999999999"]),
        not_int
    );
    assert_eq!(qv(&mut c, &["GET", "n"]), bulk("-10"));
    assert_eq!(
        err(&mut c, &["INCRBY", "n"]),
        "ERR wrong number of arguments for 'incrby' command"
    );
    assert_eq!(
        err(&mut c, &["INCR", "n", "1"]),
        "ERR wrong number of arguments for 'incr' command"
    );
}

#[test]
fn incr_is_atomic_across_clients() {
    let srv = TestServer::start();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut c = srv.client();
            std::thread::spawn(move || {
                for _ in 0..250 {
                    qv(&mut c, &["INCR", "counter"]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = srv.client();
    assert_eq!(qv(&mut c, &["GET", "counter"]), bulk("1000"));
}

#[test]
fn incrbyfloat_formats_like_redis() {
    let srv = TestServer::start();
    let mut c = srv.client();
    for (incr, expected) in [
        ("10.5", "10.5"),
        ("0.1", "10.6"),
        ("-5.6", "5"),
        ("5.0e3", "5005"),
        ("-5005", "0"),
        ("1.5e-5", "0.000015"),
        ("-0.000015", "0"),
        ("1e20", "100000000000000000000"),
    ] {
        assert_eq!(
            qv(&mut c, &["INCRBYFLOAT", "f", incr]),
            bulk(expected),
            "{incr}"
        );
        // The stored text is the reply.
        assert_eq!(qv(&mut c, &["GET", "f"]), bulk(expected));
    }
    qv(&mut c, &["SET", "h", "007"]);
    assert_eq!(qv(&mut c, &["INCRBYFLOAT", "h", "0x10"]), bulk("23"));
    assert_eq!(qv(&mut c, &["INCRBYFLOAT", "neg", "-0.0"]), bulk("0"));
    assert_eq!(qv(&mut c, &["INCRBYFLOAT", "i", "3"]), bulk("3"));
    assert_eq!(qv(&mut c, &["INCR", "i"]), int(4));
    let nan_inf = "ERR increment would produce NaN or Infinity";
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "i", "inf"]), nan_inf);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "i", "-inf"]), nan_inf);
    let not_float = "ERR value is not a valid float";
    for bad in ["abc", " 1", "1 ", "nan", ""] {
        assert_eq!(
            err(&mut c, &["INCRBYFLOAT", "i", bad]),
            not_float,
            "{bad:?}"
        );
        qv(&mut c, &["SET", "bad", bad]);
        assert_eq!(
            err(&mut c, &["INCRBYFLOAT", "bad", "1"]),
            not_float,
            "{bad:?}"
        );
    }
    assert_eq!(qv(&mut c, &["GET", "i"]), bulk("4"));
}

#[test]
fn getrange_and_substr() {
    let srv = TestServer::start();
    let mut c = srv.client();
    qv(&mut c, &["SET", "k", "hello"]);
    for (start, end, expected) in [
        ("0", "-1", "hello"),
        ("-1", "-5", ""),
        ("-100", "-50", "h"),
        ("5", "2", ""),
        ("0", "-100", "h"),
        ("-1", "-1", "o"),
        ("-3", "-1", "llo"),
        ("3", "100", "lo"),
        ("-100", "2", "hel"),
        ("1", "-100", ""),
        ("10", "20", ""),
    ] {
        assert_eq!(
            qv(&mut c, &["GETRANGE", "k", start, end]),
            bulk(expected),
            "{start} {end}"
        );
        assert_eq!(
            qv(&mut c, &["SUBSTR", "k", start, end]),
            bulk(expected),
            "{start} {end}"
        );
    }
    assert_eq!(qv(&mut c, &["GETRANGE", "nokey", "0", "-1"]), bulk(""));
    qv(&mut c, &["SET", "empty", ""]);
    assert_eq!(qv(&mut c, &["GETRANGE", "empty", "0", "-1"]), bulk(""));
    let not_int = "ERR value is not an integer or out of range";
    assert_eq!(err(&mut c, &["GETRANGE", "k", "0", "abc"]), not_int);
    assert_eq!(err(&mut c, &["GETRANGE", "nokey", "x", "1"]), not_int);
    assert_eq!(
        err(&mut c, &["GETRANGE", "k", "0"]),
        "ERR wrong number of arguments for 'getrange' command"
    );
    assert_eq!(
        err(&mut c, &["SUBSTR", "k", "0", "1", "2"]),
        "ERR wrong number of arguments for 'substr' command"
    );
}

#[test]
fn setrange_edits_and_pads() {
    let srv = TestServer::start();
    let mut c = srv.client();
    qv(&mut c, &["SET", "k", "Hello World"]);
    assert_eq!(qv(&mut c, &["SETRANGE", "k", "6", "Redis"]), int(11));
    assert_eq!(qv(&mut c, &["GET", "k"]), bulk("Hello Redis"));
    assert_eq!(qv(&mut c, &["SETRANGE", "k", "11", "!"]), int(12));
    assert_eq!(qv(&mut c, &["SETRANGE", "pad", "3", "x"]), int(4));
    let padded: Vec<u8> = redis::cmd("GET").arg("pad").query(&mut c).unwrap();
    assert_eq!(padded, b"\0\0\0x");
    // Writing nothing: the length, and a missing key stays missing.
    assert_eq!(qv(&mut c, &["SETRANGE", "k", "100", ""]), int(12));
    assert_eq!(qv(&mut c, &["SETRANGE", "none", "0", ""]), int(0));
    assert!(!exists(&mut c, "none"));
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "-1", "x"]),
        "ERR offset is out of range"
    );
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "x", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(qv(&mut c, &["GET", "k"]), bulk("Hello Redis!"));
}

#[test]
fn big_values_are_refused_not_allocated() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let too_big = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    // 600 MB > the default 512 MB limit.
    assert_eq!(err(&mut c, &["SETRANGE", "k", "629145600", "x"]), too_big);
    assert_eq!(err(&mut c, &["SETRANGE", "k", "536870912", "x"]), too_big);
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "9223372036854775807", "xyz"]),
        too_big
    );
    assert!(!exists(&mut c, "k"));
    assert_eq!(qv(&mut c, &["PING"]), Value::SimpleString("PONG".into()));

    // With a 1 MB limit the edges are cheap to reach.
    let srv = TestServer::start_with(&["--proto-max-bulk-len", "1mb"]);
    let mut c = srv.client();
    let mb = 1024 * 1024;
    assert_eq!(
        qv(&mut c, &["SETRANGE", "k", &(mb - 1).to_string(), "x"]),
        int(mb)
    );
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", &mb.to_string(), "x"]),
        too_big
    );
    assert_eq!(err(&mut c, &["APPEND", "k", "x"]), too_big);
    assert_eq!(qv(&mut c, &["STRLEN", "k"]), int(mb));
    qv(&mut c, &["SETRANGE", "a", &(mb - 2).to_string(), "x"]);
    assert_eq!(err(&mut c, &["APPEND", "a", "xx"]), too_big);
    assert_eq!(qv(&mut c, &["APPEND", "a", "x"]), int(mb));
    assert_eq!(qv(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
}

#[test]
fn lcs_options_and_errors() {
    let srv = TestServer::start();
    let mut c = srv.client();
    qv(&mut c, &["MSET", "k1", "ohmytext", "k2", "mynewtext"]);
    assert_eq!(qv(&mut c, &["LCS", "k1", "k2"]), bulk("mytext"));
    assert_eq!(qv(&mut c, &["LCS", "k1", "k2", "LEN"]), int(6));
    let run = |a: (i64, i64), b: (i64, i64), len: Option<i64>| {
        let mut v = vec![arr(vec![int(a.0), int(a.1)]), arr(vec![int(b.0), int(b.1)])];
        v.extend(len.map(int));
        arr(v)
    };
    assert_eq!(
        qv(&mut c, &["LCS", "k1", "k2", "IDX"]),
        arr(vec![
            bulk("matches"),
            arr(vec![run((4, 7), (5, 8), None), run((2, 3), (0, 1), None)]),
            bulk("len"),
            int(6),
        ])
    );
    assert_eq!(
        qv(
            &mut c,
            &["LCS", "k1", "k2", "idx", "minmatchlen", "4", "withmatchlen"]
        ),
        arr(vec![
            bulk("matches"),
            arr(vec![run((4, 7), (5, 8), Some(4))]),
            bulk("len"),
            int(6),
        ])
    );
    // A negative MINMATCHLEN means 0; LEN alone ignores it.
    assert_eq!(
        qv(&mut c, &["LCS", "k1", "k2", "LEN", "MINMATCHLEN", "-5"]),
        int(6)
    );
    // Missing keys are empty strings.
    assert_eq!(qv(&mut c, &["LCS", "k1", "nokey"]), bulk(""));
    assert_eq!(
        qv(&mut c, &["LCS", "nokey", "k2", "IDX"]),
        arr(vec![bulk("matches"), arr(vec![]), bulk("len"), int(0)])
    );
    assert_eq!(err(&mut c, &["LCS", "k1", "k2", "foo"]), "ERR syntax error");
    assert_eq!(
        err(&mut c, &["LCS", "k1", "k2", "IDX", "MINMATCHLEN"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["LCS", "k1", "k2", "MINMATCHLEN", "abc"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["LCS", "k1", "k2", "LEN", "IDX"]),
        "ERR If you want both the length and indexes, please just use IDX."
    );
    assert_eq!(
        err(&mut c, &["LCS", "k1"]),
        "ERR wrong number of arguments for 'lcs' command"
    );
}

#[test]
fn lcs_refuses_tables_beyond_proto_max_bulk_len() {
    let srv = TestServer::start_with(&["--proto-max-bulk-len", "1mb"]);
    let mut c = srv.client();
    // 501 * 501 * 4 bytes fits in 1 MB; 601 * 601 * 4 does not.
    let a500 = "a".repeat(500);
    let a600 = "a".repeat(600);
    qv(
        &mut c,
        &["MSET", "s1", &a500, "s2", &a500, "b1", &a600, "b2", &a600],
    );
    assert_eq!(qv(&mut c, &["LCS", "s1", "s2"]), bulk(&a500));
    assert_eq!(
        err(&mut c, &["LCS", "b1", "b2", "LEN"]),
        "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
    );
    assert_eq!(qv(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
}

#[test]
fn resp2_and_resp3_reply_bytes() {
    let srv = TestServer::start();
    let mut s = srv.raw();
    expect_raw(
        &mut s,
        &["MSET", "k1", "ohmytext", "k2", "mynewtext"],
        b"+OK\r\n",
    );
    let idx2 = b"*4\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n\
*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n";
    expect_raw(&mut s, &["LCS", "k1", "k2", "IDX", "WITHMATCHLEN"], idx2);
    expect_raw(&mut s, &["GETEX", "nokey"], b"$-1\r\n");
    expect_raw(
        &mut s,
        &["MGET", "k1", "nokey"],
        b"*2\r\n$8\r\nohmytext\r\n$-1\r\n",
    );

    hello3(&mut s);
    expect_raw(&mut s, &["SET", "f", "10.5"], b"+OK\r\n");
    // INCRBYFLOAT stays a bulk string in RESP3, as in Redis.
    expect_raw(&mut s, &["INCRBYFLOAT", "f", "0.1"], b"$4\r\n10.6\r\n");
    let idx3 = b"%2\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n\
*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n";
    expect_raw(&mut s, &["LCS", "k1", "k2", "IDX", "WITHMATCHLEN"], idx3);
    expect_raw(&mut s, &["LCS", "k1", "k2", "LEN"], b":6\r\n");
    expect_raw(&mut s, &["LCS", "k1", "k2"], b"$6\r\nmytext\r\n");
    expect_raw(&mut s, &["GETEX", "nokey"], b"_\r\n");
    expect_raw(&mut s, &["GET", "nokey"], b"_\r\n");
    expect_raw(&mut s, &["SET", "k1", "v", "NX"], b"_\r\n");
    expect_raw(
        &mut s,
        &["MGET", "k1", "nokey"],
        b"*2\r\n$8\r\nohmytext\r\n_\r\n",
    );
    expect_raw(&mut s, &["SETNX", "k1", "x"], b":0\r\n");
    expect_raw(&mut s, &["INCRBY", "n", "5"], b":5\r\n");
    expect_raw(
        &mut s,
        &["DECRBY", "n", "-9223372036854775808"],
        b"-ERR decrement would overflow\r\n",
    );
}

/// Bytes the meta column family holds in memtables and SST files (INFO rocksdb `cf_meta`):
/// where an inline string's every write lands whole.
fn meta_cf_bytes(c: &mut Connection) -> u64 {
    let line = info(c, "rocksdb")
        .values()
        .find_map(|fields| fields.get("cf_meta").cloned())
        .expect("INFO rocksdb has cf_meta");
    line.split(',')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == "memtable_bytes" || *k == "sst_bytes")
        .map(|(_, v)| v.parse::<u64>().unwrap())
        .sum()
}

fn append_bytes(c: &mut Connection, key: &str, piece: &[u8]) -> i64 {
    redis::cmd("APPEND").arg(key).arg(piece).query(c).unwrap()
}

fn setrange_bytes(c: &mut Connection, key: &str, offset: usize, piece: &[u8]) -> i64 {
    redis::cmd("SETRANGE")
        .arg(key)
        .arg(offset)
        .arg(piece)
        .query(c)
        .unwrap()
}

/// Appends 10 bytes to `key` `times` times, checking each new length and then the whole value
/// against `model`; returns how many bytes the meta column family took in meanwhile.
fn appends_cost(c: &mut Connection, key: &str, model: &mut Vec<u8>, times: usize) -> u64 {
    let before = meta_cf_bytes(c);
    for _ in 0..times {
        model.extend_from_slice(b"0123456789");
        assert_eq!(append_bytes(c, key, b"0123456789") as usize, model.len());
    }
    let grew = meta_cf_bytes(c).saturating_sub(before);
    assert_eq!(&get_bytes(c, key), model);
    grew
}

/// APPEND and SETRANGE on a string they grow past 64 KiB write the segments they touch, not the
/// string (APPEND to an 8 MB string copied all of it): the bytes follow a model through random
/// edits across the inline limit, with gaps; the cost shows in what the meta column family
/// takes in (an inline string's edit writes it whole there), not in a timing, and the switch
/// (`string-edit-inline-max 0`) brings the whole writes back; expiry, WATCH, WRONGTYPE and a
/// far SETRANGE on a missing key behave as Redis's.
#[test]
fn edits_of_long_strings_write_only_what_they_touch() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut other = srv.client();
    let mut rng = Lcg(3);
    let mut model: Vec<u8> = Vec::new();
    for step in 0..300 {
        let piece: Vec<u8> = (0..1 + rng.below(2000))
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        let len = if rng.below(3) == 0 {
            let at = rng.below(model.len() as u64 + 10_000) as usize;
            if model.len() < at + piece.len() {
                model.resize(at + piece.len(), 0);
            }
            model[at..at + piece.len()].copy_from_slice(&piece);
            setrange_bytes(&mut c, "s", at, &piece)
        } else {
            model.extend_from_slice(&piece);
            append_bytes(&mut c, "s", &piece)
        };
        assert_eq!(len as usize, model.len(), "step {step}");
        if step % 30 == 29 {
            assert_eq!(get_bytes(&mut c, "s"), model, "step {step}");
            let from = rng.below(model.len() as u64) as usize;
            let to = (from + 5000).min(model.len() - 1);
            let range: Vec<u8> = redis::cmd("GETRANGE")
                .arg("s")
                .arg(from)
                .arg(to)
                .query(&mut c)
                .unwrap();
            assert_eq!(range, &model[from..=to], "step {step}");
        }
    }
    assert!(model.len() > 200_000, "the string outgrew the inline limit");

    // 100 small appends to a ~300 KB string: inline, each would write it whole (~30 MB).
    let grew = appends_cost(&mut c, "s", &mut model, 100);
    assert!(grew < 1 << 20, "the meta column family took {grew} bytes");

    // The expiry stays; a SETRANGE that writes the bytes already there still modifies the key.
    q::<i64>(&mut c, &["EXPIRE", "s", "1000"]);
    model.extend_from_slice(b"x");
    assert_eq!(append_bytes(&mut c, "s", b"x") as usize, model.len());
    assert!(q::<i64>(&mut c, &["TTL", "s"]) > 0, "APPEND keeps the TTL");
    q::<()>(&mut c, &["WATCH", "s"]);
    assert_eq!(
        setrange_bytes(&mut other, "s", 0, &model[..1]) as usize,
        model.len()
    );
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["PING"]);
    assert_eq!(qv(&mut c, &["EXEC"]), Value::Nil, "WATCH saw the SETRANGE");

    // A far SETRANGE on a missing key stores the segment it writes, not the gap before it.
    assert_eq!(setrange_bytes(&mut c, "far", 50_000_000, b"x"), 50_000_001);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("far").query(&mut c).unwrap();
    assert!(dump.len() < 3 * 4096, "DUMP is {} bytes", dump.len());
    let tail: Vec<u8> = redis::cmd("GETRANGE")
        .arg("far")
        .arg(49_999_999)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(tail, b"\0x");

    // `string-edit-inline-max 0` keeps every string in one record: each edit writes it whole.
    q::<()>(&mut c, &["CONFIG", "SET", "string-edit-inline-max", "0"]);
    let mut inline = vec![b'i'; 200_000];
    q::<()>(
        &mut c,
        &["SET", "one", std::str::from_utf8(&inline).unwrap()],
    );
    let grew = appends_cost(&mut c, "one", &mut inline, 20);
    assert!(
        grew > 20 * 200_000,
        "the meta column family took only {grew} bytes"
    );

    // WRONGTYPE comes before the size check, as in Redis.
    q::<i64>(&mut c, &["LPUSH", "l", "a"]);
    assert_eq!(
        err(&mut c, &["SETRANGE", "l", "629145600", "x"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        err(&mut c, &["APPEND", "l", "x"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}
