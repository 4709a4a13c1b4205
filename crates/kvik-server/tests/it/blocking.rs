//! Integration tests: blocking list commands (BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP), the
//! parking of blocked connections, and CLIENT UNBLOCK.
//!
//! No test asserts timing: a blocked client is known to be blocked through INFO's
//! `blocked_clients`, and a timeout is checked by its reply and by what happens after it.

use crate::common::*;
use redis::{Connection, Value};
use std::net::TcpStream;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn blocked(c: &mut Connection) -> u64 {
    info_field(c, "clients", "blocked_clients").expect("INFO clients has blocked_clients")
}

/// Waits until exactly `n` clients are blocked.
fn wait_blocked(c: &mut Connection, n: u64) {
    assert!(
        eventually(WAIT, || blocked(c) == n),
        "expected {n} blocked clients, have {}",
        blocked(c)
    );
}

fn send(s: &mut TcpStream, args: &[&str]) {
    use std::io::Write;
    s.write_all(&resp_str(args)).unwrap();
}

/// Reads exactly the bytes of `expected` (bounded by the connection's read timeout).
fn expect(s: &mut TcpStream, expected: &str) {
    let (got, _) = read_raw(s, expected.len());
    assert_eq!(String::from_utf8_lossy(&got), expected);
}

/// Asserts that nothing is waiting to be read on `s` right now (short read timeout).
fn expect_nothing(s: &mut TcpStream) {
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let (got, closed) = read_raw(s, 1);
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert!(
        got.is_empty() && !closed,
        "unexpected: {:?}",
        String::from_utf8_lossy(&got)
    );
}

#[test]
fn blpop_is_served_by_another_clients_push() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    send(&mut a, &["BLPOP", "k1", "k", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(q::<i64>(&mut c, &["LPUSH", "k", "v"]), 1);
    expect(&mut a, "*2\r\n$1\r\nk\r\n$1\r\nv\r\n");
    wait_blocked(&mut c, 0);
    // The pushed element went to the blocked client: the list is gone.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    // BRPOP takes from the tail; BLMPOP with COUNT takes several.
    send(&mut a, &["BRPOP", "r", "0"]);
    wait_blocked(&mut c, 1);
    let _: i64 = q(&mut c, &["RPUSH", "r", "x", "y"]);
    expect(&mut a, "*2\r\n$1\r\nr\r\n$1\r\ny\r\n");
    send(
        &mut a,
        &["BLMPOP", "0", "2", "m1", "m2", "LEFT", "COUNT", "5"],
    );
    wait_blocked(&mut c, 1);
    let _: i64 = q(&mut c, &["RPUSH", "m2", "a", "b"]);
    expect(&mut a, "*2\r\n$2\r\nm2\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "r", "0", "-1"]), ["x"]);
}

#[test]
fn blocked_clients_are_served_in_arrival_order() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    let mut b = srv.raw();
    send(&mut a, &["BLPOP", "k", "0"]);
    wait_blocked(&mut c, 1);
    send(&mut b, &["BLPOP", "k", "0"]);
    wait_blocked(&mut c, 2);
    let _: i64 = q(&mut c, &["RPUSH", "k", "first", "second", "third"]);
    expect(&mut a, "*2\r\n$1\r\nk\r\n$5\r\nfirst\r\n");
    expect(&mut b, "*2\r\n$1\r\nk\r\n$6\r\nsecond\r\n");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "k", "0", "-1"]),
        ["third"]
    );
    // One push, one element: only the first of two new waiters is served.
    send(&mut b, &["BLPOP", "j", "0"]);
    wait_blocked(&mut c, 1);
    send(&mut a, &["BLPOP", "j", "0"]);
    wait_blocked(&mut c, 2);
    let _: i64 = q(&mut c, &["RPUSH", "j", "one"]);
    expect(&mut b, "*2\r\n$1\r\nj\r\n$3\r\none\r\n");
    wait_blocked(&mut c, 1);
    expect_nothing(&mut a);
    let _: i64 = q(&mut c, &["RPUSH", "j", "two"]);
    expect(&mut a, "*2\r\n$1\r\nj\r\n$3\r\ntwo\r\n");
}

#[test]
fn timeout_replies_null_and_later_pushes_stay() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    send(&mut a, &["BLPOP", "k", "0.2"]);
    expect(&mut a, "*-1\r\n");
    send(&mut a, &["BLMOVE", "k", "d", "LEFT", "LEFT", "0.1"]);
    expect(&mut a, "$-1\r\n");
    send(&mut a, &["BRPOPLPUSH", "k", "d", "0.1"]);
    expect(&mut a, "$-1\r\n");
    send(&mut a, &["BLMPOP", "0.1", "1", "k", "RIGHT"]);
    expect(&mut a, "*-1\r\n");
    wait_blocked(&mut c, 0);
    let _: i64 = q(&mut c, &["RPUSH", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "k"]), 1);
    // The timed-out connection works normally afterwards.
    send(&mut a, &["LPOP", "k"]);
    expect(&mut a, "$1\r\nv\r\n");
    // RESP3: the timeout reply is the RESP3 null.
    send(&mut a, &["HELLO", "3"]);
    let (hello, _) = read_raw(&mut a, 1);
    assert!(hello.starts_with(b"%"));
    send(&mut a, &["PING"]);
    let mut got = Vec::new();
    while !got.ends_with(b"+PONG\r\n") {
        let (more, closed) = read_raw(&mut a, 1);
        assert!(!closed && !more.is_empty());
        got.extend_from_slice(&more);
    }
    send(&mut a, &["BLPOP", "k", "0.1"]);
    expect(&mut a, "_\r\n");
    send(&mut a, &["BLMOVE", "k", "d", "LEFT", "LEFT", "0.1"]);
    expect(&mut a, "_\r\n");
}

#[test]
fn blmove_chains_to_a_client_blocked_on_its_destination() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    let mut b = srv.raw();
    send(&mut a, &["BLMOVE", "src", "mid", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut c, 1);
    send(&mut b, &["BLPOP", "mid", "0"]);
    wait_blocked(&mut c, 2);
    let _: i64 = q(&mut c, &["LPUSH", "src", "v"]);
    expect(&mut a, "$1\r\nv\r\n");
    expect(&mut b, "*2\r\n$3\r\nmid\r\n$1\r\nv\r\n");
    wait_blocked(&mut c, 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "src", "mid"]), 0);
    // BRPOPLPUSH served by a push, and LMOVE's destination wakes a waiter too.
    send(&mut a, &["BRPOPLPUSH", "s2", "d2", "0"]);
    wait_blocked(&mut c, 1);
    send(&mut b, &["BLPOP", "s2", "0"]);
    wait_blocked(&mut c, 2);
    let _: i64 = q(&mut c, &["RPUSH", "other", "w"]);
    let moved: String = q(&mut c, &["LMOVE", "other", "s2", "LEFT", "LEFT"]);
    assert_eq!(moved, "w");
    // A arrived first (it is the first waiter on s2).
    expect(&mut a, "$1\r\nw\r\n");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "d2", "0", "-1"]),
        ["w"]
    );
    let _: i64 = q(&mut c, &["RPUSH", "s2", "z"]);
    expect(&mut b, "*2\r\n$2\r\ns2\r\n$1\r\nz\r\n");
}

#[test]
fn blocked_clients_hold_no_worker() {
    let srv = TestServer::start_with(&["--workers", "1"]);
    let mut c = srv.client();
    let mut waiters: Vec<TcpStream> = (0..4).map(|_| srv.raw()).collect();
    for (i, w) in waiters.iter_mut().enumerate() {
        send(w, &["BLPOP", &format!("q{i}"), "0"]);
    }
    wait_blocked(&mut c, 4);
    // More clients blocked than workers, and the server still answers.
    assert_eq!(qv(&mut c, &["SET", "x", "1"]), Value::Okay);
    assert_eq!(q::<String>(&mut c, &["GET", "x"]), "1");
    for (i, w) in waiters.iter_mut().enumerate() {
        let key = format!("q{i}");
        let _: i64 = q(&mut c, &["RPUSH", &key, "v"]);
        expect(w, &format!("*2\r\n$2\r\n{key}\r\n$1\r\nv\r\n"));
    }
    wait_blocked(&mut c, 0);
}

#[test]
fn disconnected_or_killed_waiters_take_nothing() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    send(&mut a, &["BLPOP", "k", "0"]);
    wait_blocked(&mut c, 1);
    drop(a);
    wait_blocked(&mut c, 0);
    let _: i64 = q(&mut c, &["RPUSH", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "k"]), 1);

    let mut b = srv.raw();
    send(&mut b, &["CLIENT", "ID"]);
    let (id, _) = read_raw(&mut b, 4);
    let id = String::from_utf8_lossy(&id[1..]).trim().to_string();
    send(&mut b, &["BLPOP", "j", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "KILL", "ID", &id]), 1);
    wait_blocked(&mut c, 0);
    let _: i64 = q(&mut c, &["RPUSH", "j", "v"]);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "j"]), 1);
    let (rest, closed) = read_raw(&mut b, 1);
    assert!(
        closed && rest.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&rest)
    );
}

#[test]
fn blocking_commands_inside_multi_answer_at_once() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    send(&mut a, &["MULTI"]);
    expect(&mut a, "+OK\r\n");
    for cmd in [
        &["BLPOP", "k", "0"][..],
        &["BRPOPLPUSH", "k", "d", "0"],
        &["BLMPOP", "0", "1", "k", "LEFT"],
        &["RPUSH", "k", "v"],
        &["BLPOP", "k", "0"],
    ] {
        send(&mut a, cmd);
        expect(&mut a, "+QUEUED\r\n");
    }
    send(&mut a, &["EXEC"]);
    expect(
        &mut a,
        "*5\r\n*-1\r\n$-1\r\n*-1\r\n:1\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n",
    );
    wait_blocked(&mut c, 0);
}

#[test]
fn waiter_stays_blocked_when_its_key_becomes_another_type() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    send(&mut a, &["BLPOP", "k", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(qv(&mut c, &["SET", "k", "str"]), Value::Okay);
    expect_nothing(&mut a);
    assert_eq!(blocked(&mut c), 1);
    assert_eq!(q::<i64>(&mut c, &["DEL", "k"]), 1);
    let _: i64 = q(&mut c, &["RPUSH", "k", "v"]);
    expect(&mut a, "*2\r\n$1\r\nk\r\n$1\r\nv\r\n");
}

#[test]
fn pipelined_commands_wait_behind_a_blocked_one() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    let mut req = resp_str(&["BLPOP", "k", "0"]);
    req.extend_from_slice(&resp_str(&["RPUSH", "k", "own"]));
    req.extend_from_slice(&resp_str(&["PING"]));
    std::io::Write::write_all(&mut a, &req).unwrap();
    wait_blocked(&mut c, 1);
    expect_nothing(&mut a);
    // The pipelined RPUSH has not run: the list does not exist yet.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    let _: i64 = q(&mut c, &["RPUSH", "k", "v"]);
    expect(&mut a, "*2\r\n$1\r\nk\r\n$1\r\nv\r\n:1\r\n+PONG\r\n");
}

#[test]
fn client_unblock_answers_timeout_or_error() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    send(&mut a, &["CLIENT", "ID"]);
    let (id, _) = read_raw(&mut a, 4);
    let id = String::from_utf8_lossy(&id[1..]).trim().to_string();
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id]), 0);
    send(&mut a, &["BLPOP", "k", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id]), 1);
    expect(&mut a, "*-1\r\n");
    send(&mut a, &["BLMOVE", "k", "d", "LEFT", "LEFT", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id, "ERROR"]), 1);
    expect(&mut a, "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    assert_eq!(
        err(&mut c, &["CLIENT", "UNBLOCK", &id, "FOO"]),
        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "UNBLOCK", "x"]),
        "ERR value is not an integer or out of range"
    );
    wait_blocked(&mut c, 0);
    let _: i64 = q(&mut c, &["RPUSH", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "k"]), 1);
}

#[test]
fn timeout_argument_errors() {
    let srv = TestServer::start();
    let mut c = srv.client();
    for (t, e) in [
        ("abc", "ERR timeout is not a float or out of range"),
        ("-1", "ERR timeout is negative"),
        ("inf", "ERR timeout is negative"),
        ("nan", "ERR timeout is not a float or out of range"),
    ] {
        assert_eq!(err(&mut c, &["BLPOP", "k", t]), e);
        assert_eq!(err(&mut c, &["BLMOVE", "k", "d", "LEFT", "LEFT", t]), e);
        assert_eq!(err(&mut c, &["BLMPOP", t, "1", "k", "LEFT"]), e);
    }
    assert_eq!(
        err(&mut c, &["BLMOVE", "k", "d", "UP", "LEFT", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["BLMPOP", "0", "0", "k", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    wait_blocked(&mut c, 0);
}
