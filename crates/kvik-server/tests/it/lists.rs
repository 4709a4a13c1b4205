//! Integration tests: lists (LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LINDEX LSET LINSERT LRANGE
//! LREM LTRIM LPOS LMOVE RPOPLPUSH LMPOP, and the blocking commands answered at once).
//!
//! The expected bytes of the scripted sessions were recorded from a real redis-server 7.0.15
//! running the same commands in the same order.

use crate::common::*;
use redis::Value;
use std::net::TcpStream;

/// Runs each (space-separated command, exact reply) pair in order on one raw connection.
fn replay(s: &mut TcpStream, cases: &[(&str, &str)]) {
    for (cmd, expected) in cases {
        let args: Vec<&str> = cmd.split_whitespace().collect();
        let (got, _) = roundtrip_raw(s, &resp_str(&args), expected.len());
        assert_eq!(String::from_utf8_lossy(&got), *expected, "reply to {cmd}");
    }
}

#[test]
fn list_commands_match_redis_resp2() {
    let srv = TestServer::start();
    let mut s = srv.raw();
    replay(
        &mut s,
        &[
        ("set s str", "+OK\r\n"),
        ("rpush k a b c", ":3\r\n"),
        ("lpop k 0", "*0\r\n"),
        ("lpop nokey 0", "*-1\r\n"),
        ("lpop nokey 1", "*-1\r\n"),
        ("lpop nokey", "$-1\r\n"),
        ("lpop k -1", "-ERR value is out of range, must be positive\r\n"),
        ("lpop k 1 2", "-ERR wrong number of arguments for 'lpop' command\r\n"),
        ("lpop k x", "-ERR value is out of range, must be positive\r\n"),
        ("lpop s", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("lpop k 100", "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        ("rpush k a b c a b c", ":6\r\n"),
        ("lindex k x", "-ERR value is not an integer or out of range\r\n"),
        ("lindex k -1", "$1\r\nc\r\n"),
        ("lindex k 5", "$1\r\nc\r\n"),
        ("lindex k 6", "$-1\r\n"),
        ("lset nokey 0 x", "-ERR no such key\r\n"),
        ("lset k 10 x", "-ERR index out of range\r\n"),
        ("lset s 0 x", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("lset k -2 B", "+OK\r\n"),
        ("lrange k 0 -1", "*6\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n$1\r\nB\r\n$1\r\nc\r\n"),
        ("linsert k middle a x", "-ERR syntax error\r\n"),
        ("linsert nokey before a x", ":0\r\n"),
        ("linsert k before zz x", ":-1\r\n"),
        ("linsert s before a x", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("linsert k before a X0", ":7\r\n"),
        ("linsert k after c X9", ":8\r\n"),
        ("linsert k after B XB", ":9\r\n"),
        ("lrange k 0 -1", "*9\r\n$2\r\nX0\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$2\r\nX9\r\n$1\r\na\r\n$1\r\nB\r\n$2\r\nXB\r\n$1\r\nc\r\n"),
        ("lrange k x 1", "-ERR value is not an integer or out of range\r\n"),
        ("lrange nokey 0 -1", "*0\r\n"),
        ("lrem k x a", "-ERR value is not an integer or out of range\r\n"),
        ("lrem k 1 a", ":1\r\n"),
        ("lrange k 0 -1", "*8\r\n$2\r\nX0\r\n$1\r\nb\r\n$1\r\nc\r\n$2\r\nX9\r\n$1\r\na\r\n$1\r\nB\r\n$2\r\nXB\r\n$1\r\nc\r\n"),
        ("lrem k -1 c", ":1\r\n"),
        ("lrange k 0 -1", "*7\r\n$2\r\nX0\r\n$1\r\nb\r\n$1\r\nc\r\n$2\r\nX9\r\n$1\r\na\r\n$1\r\nB\r\n$2\r\nXB\r\n"),
        ("lrem k 0 b", ":1\r\n"),
        ("lrange k 0 -1", "*6\r\n$2\r\nX0\r\n$1\r\nc\r\n$2\r\nX9\r\n$1\r\na\r\n$1\r\nB\r\n$2\r\nXB\r\n"),
        ("ltrim k a 1", "-ERR value is not an integer or out of range\r\n"),
        ("ltrim k 1 -2", "+OK\r\n"),
        ("lrange k 0 -1", "*4\r\n$1\r\nc\r\n$2\r\nX9\r\n$1\r\na\r\n$1\r\nB\r\n"),
        ("rpush k a b a b a", ":9\r\n"),
        ("lpos k a rank 0", "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n"),
        ("lpos k a rank x", "-ERR value is not an integer or out of range\r\n"),
        ("lpos k a count -1", "-ERR COUNT can't be negative\r\n"),
        ("lpos k a maxlen -1", "-ERR MAXLEN can't be negative\r\n"),
        ("lpos k a foo 1", "-ERR syntax error\r\n"),
        ("lpos k a rank", "-ERR syntax error\r\n"),
        ("lpos k a", ":2\r\n"),
        ("lpos k a rank -1", ":8\r\n"),
        ("lpos k a count 0", "*4\r\n:2\r\n:4\r\n:6\r\n:8\r\n"),
        ("lpos k a count 2 rank -2", "*2\r\n:6\r\n:4\r\n"),
        ("lpos k a maxlen 2 count 0", "*0\r\n"),
        ("lpos nokey a", "$-1\r\n"),
        ("lpos nokey a count 1", "*0\r\n"),
        ("lmove k d up left", "-ERR syntax error\r\n"),
        ("lmove k d left right", "$1\r\nc\r\n"),
        ("lmove k s left right", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("lmove nokey s left right", "$-1\r\n"),
        ("lmove k k left right", "$2\r\nX9\r\n"),
        ("lrange k 0 -1", "*8\r\n$1\r\na\r\n$1\r\nB\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\na\r\n$2\r\nX9\r\n"),
        ("rpoplpush k d", "$2\r\nX9\r\n"),
        ("lrange d 0 -1", "*2\r\n$2\r\nX9\r\n$1\r\nc\r\n"),
        ("lmpop 0 k left", "-ERR numkeys should be greater than 0\r\n"),
        ("lmpop 2 k left", "-ERR syntax error\r\n"),
        ("lmpop 1 k middle", "-ERR syntax error\r\n"),
        ("lmpop 1 k left count 0", "-ERR count should be greater than 0\r\n"),
        ("lmpop 1 k left count 1 count 2", "-ERR syntax error\r\n"),
        ("lmpop 1 k left foo", "-ERR syntax error\r\n"),
        ("lmpop x k left", "-ERR numkeys should be greater than 0\r\n"),
        ("lmpop 1 nokey left", "*-1\r\n"),
        ("lmpop 3 k left", "-ERR syntax error\r\n"),
        ("lmpop 2 nokey k right count 2", "*2\r\n$1\r\nk\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        ("lmpop 2 s k right count 2", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("lpushx nokey a", ":0\r\n"),
        ("rpushx k z", ":6\r\n"),
        ("lpush k 1 2 3", ":9\r\n"),
        ("llen k", ":9\r\n"),
        ("llen s", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("llen nokey", ":0\r\n"),
        ("blpop nokey s k 0", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ("brpop k 0", "*2\r\n$1\r\nk\r\n$1\r\nz\r\n"),
        ("blmpop 0 1 k left count 10", "*2\r\n$1\r\nk\r\n*8\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\nB\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\na\r\n"),
        ("blmove d k left left 0", "$2\r\nX9\r\n"),
        ("brpoplpush d k 0", "$1\r\nc\r\n"),
        ("ltrim k 5 1", "+OK\r\n"),
        ("exists k", ":0\r\n"),
        ],
    );
}

#[test]
fn list_commands_match_redis_resp3() {
    let srv = TestServer::start();
    let mut s = srv.raw();
    let (hello, _) = roundtrip_raw(&mut s, &resp_str(&["HELLO", "3"]), 1);
    assert!(
        hello.starts_with(b"%"),
        "HELLO 3: {:?}",
        String::from_utf8_lossy(&hello)
    );
    // Drain the rest of the HELLO map: a PING marks its end.
    let (mut got, _) = roundtrip_raw(&mut s, &resp_str(&["PING"]), 1);
    while !got.ends_with(b"+PONG\r\n") {
        let (more, closed) = read_raw(&mut s, 1);
        assert!(!closed && !more.is_empty(), "no PONG after HELLO 3");
        got.extend_from_slice(&more);
    }
    replay(
        &mut s,
        &[
            ("rpush k a b c", ":3\r\n"),
            ("lpop k 0", "*0\r\n"),
            ("lpop nokey 0", "_\r\n"),
            ("lpop nokey 1", "_\r\n"),
            ("lpop nokey", "_\r\n"),
            ("lpos nokey a", "_\r\n"),
            ("lindex nokey 0", "_\r\n"),
            ("lmpop 1 nokey left", "_\r\n"),
            (
                "lmpop 1 k left count 2",
                "*2\r\n$1\r\nk\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            ),
            ("blpop k 0", "*2\r\n$1\r\nk\r\n$1\r\nc\r\n"),
            ("multi", "+OK\r\n"),
            ("blpop nokey 0", "+QUEUED\r\n"),
            ("blmove nokey x left left 0", "+QUEUED\r\n"),
            ("blmpop 0 1 nokey left", "+QUEUED\r\n"),
            ("exec", "*3\r\n_\r\n_\r\n_\r\n"),
            ("blpop nokey 0.01", "_\r\n"),
            ("blmove nokey x left left 0.01", "_\r\n"),
        ],
    );
}

#[test]
fn big_list_pushed_and_popped_from_both_ends() {
    let srv = TestServer::start();
    let mut c = srv.client();
    const N: usize = 100_000;
    let mut pushed = 0;
    for chunk in (0..N).collect::<Vec<_>>().chunks(1000) {
        let mut cmd = redis::cmd("RPUSH");
        cmd.arg("big");
        for i in chunk {
            cmd.arg(i.to_string());
        }
        pushed = cmd.query::<usize>(&mut c).unwrap();
    }
    assert_eq!(pushed, N);
    assert_eq!(q::<usize>(&mut c, &["LLEN", "big"]), N);
    assert_eq!(q::<String>(&mut c, &["LINDEX", "big", "54321"]), "54321");
    assert_eq!(q::<String>(&mut c, &["LINDEX", "big", "-1"]), "99999");
    let mid: Vec<String> = q(&mut c, &["LRANGE", "big", "49998", "50001"]);
    assert_eq!(mid, ["49998", "49999", "50000", "50001"]);
    // Pop from both ends alternately, with and without COUNT.
    let mut lo = 0usize;
    let mut hi = N;
    while lo < hi {
        if (hi - lo).is_multiple_of(3) {
            let got: Vec<String> = q(&mut c, &["LPOP", "big", "1000"]);
            let want: Vec<String> = (lo..(lo + 1000).min(hi)).map(|i| i.to_string()).collect();
            assert_eq!(got, want);
            lo += got.len();
        } else if (hi - lo) % 3 == 1 {
            let got: Vec<String> = q(&mut c, &["RPOP", "big", "777"]);
            let want: Vec<String> = (hi.saturating_sub(777).max(lo)..hi)
                .rev()
                .map(|i| i.to_string())
                .collect();
            assert_eq!(got, want);
            hi -= got.len();
        } else {
            assert_eq!(q::<String>(&mut c, &["LPOP", "big"]), lo.to_string());
            lo += 1;
            if lo < hi {
                assert_eq!(q::<String>(&mut c, &["RPOP", "big"]), (hi - 1).to_string());
                hi -= 1;
            }
        }
        if lo < hi && lo.is_multiple_of(7) {
            assert_eq!(q::<usize>(&mut c, &["LLEN", "big"]), hi - lo);
        }
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "big"]), 0);
    assert_eq!(qv(&mut c, &["LPOP", "big"]), Value::Nil);
}

#[test]
fn middle_edits_keep_order() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut model: Vec<String> = (0..50).map(|i| format!("e{}", i % 7)).collect();
    let mut cmd = redis::cmd("RPUSH");
    cmd.arg("l").arg(&model);
    let _: usize = cmd.query(&mut c).unwrap();
    // LINSERT near the head and near the tail (both shift directions).
    for (pivot, after) in [("e1", false), ("e5", true), ("e6", false)] {
        let at = model.iter().position(|e| e == pivot).unwrap() + usize::from(after);
        model.insert(at, format!("new-{pivot}"));
        let n: usize = q(
            &mut c,
            &[
                "LINSERT",
                "l",
                if after { "AFTER" } else { "BEFORE" },
                pivot,
                &format!("new-{pivot}"),
            ],
        );
        assert_eq!(n, model.len());
    }
    let last_e6 = model.iter().rposition(|e| e == "e6").unwrap();
    let idx: i64 = q(&mut c, &["LPOS", "l", "e6", "RANK", "-1"]);
    assert_eq!(idx as usize, last_e6);
    // LREM from the tail (2 of e3), from the head (all e0), then LTRIM and LSET.
    let mut removed = 0;
    for i in (0..model.len()).rev() {
        if model[i] == "e3" && removed < 2 {
            model.remove(i);
            removed += 1;
        }
    }
    assert_eq!(q::<usize>(&mut c, &["LREM", "l", "-2", "e3"]), 2);
    let before = model.len();
    model.retain(|e| e != "e0");
    assert_eq!(
        q::<usize>(&mut c, &["LREM", "l", "0", "e0"]),
        before - model.len()
    );
    model = model[3..model.len() - 4].to_vec();
    assert_eq!(qv(&mut c, &["LTRIM", "l", "3", "-5"]), Value::Okay);
    model[5] = "set".into();
    assert_eq!(qv(&mut c, &["LSET", "l", "5", "set"]), Value::Okay);
    let got: Vec<String> = q(&mut c, &["LRANGE", "l", "0", "-1"]);
    assert_eq!(got, model);
    assert_eq!(q::<usize>(&mut c, &["LLEN", "l"]), model.len());
    for (i, e) in model.iter().enumerate() {
        assert_eq!(&q::<String>(&mut c, &["LINDEX", "l", &i.to_string()]), e);
    }
    // Removing everything deletes the key.
    let _: usize = q(&mut c, &["LREM", "l", "0", "set"]);
    assert_eq!(qv(&mut c, &["LTRIM", "l", "1", "0"]), Value::Okay);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]), 0);
}

#[test]
fn list_survives_restart_and_type_commands() {
    let mut srv = TestServer::start();
    let mut c = srv.client();
    let _: usize = q(&mut c, &["RPUSH", "l", "a", "b"]);
    let _: usize = q(&mut c, &["LPUSH", "l", "z"]);
    assert_eq!(q::<String>(&mut c, &["TYPE", "l"]), "list");
    srv.restart();
    let mut c = srv.client();
    let got: Vec<String> = q(&mut c, &["LRANGE", "l", "0", "-1"]);
    assert_eq!(got, ["z", "a", "b"]);
    assert_eq!(
        err(&mut c, &["GET", "l"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(qv(&mut c, &["SET", "l", "x"]), Value::Okay);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "nothing"]), 0);
}
