//! Integration tests: streams (XADD XTRIM XDEL XSETID XLEN XRANGE XREVRANGE XREAD XREADGROUP
//! XGROUP XACK XPENDING XCLAIM XAUTOCLAIM XINFO), their blocking forms, a consumer group flow,
//! the generic key commands on a stream, persistence, and redis-py's consumer groups.
//!
//! The scripted sessions run on kvik and on a real redis-server side by side and compare every
//! reply (time-dependent replies stay out of them; those are checked by shape). No test asserts
//! timing: a blocked client is known to be blocked through INFO's `blocked_clients`.

use crate::common::*;
use kvik_testkit::RedisServer;
use redis::{Connection, Value};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn reply(c: &mut Connection, cmd: &str) -> Result<Value, String> {
    let args: Vec<&str> = cmd.split_whitespace().collect();
    let mut r = redis::cmd(args[0]);
    for a in &args[1..] {
        r.arg(*a);
    }
    r.query::<Value>(c).map_err(|e| e.to_string())
}

/// Runs each command on kvik and on redis-server and compares the replies.
fn mirror(cmds: &[&str]) {
    let kvik = TestServer::start();
    let redis = RedisServer::start(&[]);
    let mut k = kvik.client();
    let mut r = redis.client();
    for cmd in cmds {
        assert_eq!(reply(&mut k, cmd), reply(&mut r, cmd), "reply to {cmd}");
    }
}

#[test]
fn entry_commands_match_redis() {
    mirror(&[
        "SET str x",
        "XADD str * a 1",
        "XLEN str",
        "XRANGE str - +",
        "XADD s 1-1 a 1 b 2",
        "XADD s 1-1 a 1",
        "XADD s 0-0 a 1",
        "XADD s 1 a",
        "XADD s 1-x a 1",
        "XADD s 2-* c 3",
        "XADD s 2-* c 4",
        "XADD s 5 d 5",
        "XADD nos NOMKSTREAM * a 1",
        "EXISTS nos",
        "XADD s MAXLEN 1 LIMIT 10 * a 1",
        "XADD s LIMIT 10 * a 1",
        "XADD s MAXLEN -1 * a 1",
        "XADD s MINID 0 MAXLEN 1 * a 1",
        "XADD s MAXLEN abc * a 1",
        "XADD s MAXLEN ~ 10 LIMIT -1 6-0 a 1",
        "XLEN s",
        "XLEN nokey",
        "XRANGE s - +",
        "XRANGE s - + COUNT 2",
        "XRANGE s (1-1 +",
        "XRANGE s 2 2",
        "XRANGE s - (5",
        "XRANGE s - + COUNT abc",
        "XRANGE s - + FOO",
        "XRANGE s x +",
        "XRANGE s (18446744073709551615-18446744073709551615 +",
        "XRANGE s - (0-0",
        "XRANGE nokey - +",
        "XREVRANGE s + -",
        "XREVRANGE s + - COUNT 1",
        "XREVRANGE s 2 -",
        "XDEL s 2-0 2-0 9-9",
        "XDEL s x",
        "XDEL nokey 1-1",
        "XLEN s",
        "XINFO STREAM s",
        "XDEL s 1-1",
        "XINFO STREAM s",
        "XTRIM s MAXLEN 1",
        "XTRIM s FOO 1",
        "XTRIM nokey MAXLEN 1",
        "XTRIM s MAXLEN ~ 0",
        "XTRIM s MINID 6-0",
        "XRANGE s - +",
        "XADD s MAXLEN 0 7-0 a 1",
        "XLEN s",
        "XINFO STREAM s",
        "XADD s MINID 9 8-0 a 1",
        "XINFO STREAM s",
        "XSETID s 1-0",
        "XSETID nokey 5-0",
        "XSETID s 9-0 ENTRIESADDED -1",
        "XSETID s 9-0 MAXDELETEDID 10-0",
        "XSETID s 9-0 ENTRIESADDED 100 MAXDELETEDID 3-0",
        "XINFO STREAM s",
        "XADD s 9-0 a 1",
        "XADD s * a 1 b",
        "XADD m 1-1 f v",
        "XADD m 1-2 f v",
        "XADD m 1-3 f v",
        "XADD m MINID = 1-2 1-4 f v",
        "XRANGE m - +",
        "XTRIM m MINID 1-4",
        "XTRIM m MAXLEN 0",
        "XINFO STREAM m",
        "TYPE m",
        "OBJECT ENCODING m",
    ]);
}

#[test]
fn approximate_trimming_drops_whole_nodes_as_redis() {
    let mut cmds: Vec<String> = (1..=250).map(|i| format!("XADD s {i}-1 f v")).collect();
    cmds.extend(
        [
            "XTRIM s MAXLEN ~ 120",
            "XLEN s",
            "XRANGE s - + COUNT 1",
            "XTRIM s MINID ~ 160",
            "XLEN s",
            "XTRIM s MAXLEN ~ 0 LIMIT 10",
            "XLEN s",
            "XTRIM s MAXLEN = 10",
            "XRANGE s - + COUNT 1",
            "XADD s MAXLEN ~ 5 300-1 f v",
            "XLEN s",
        ]
        .map(String::from),
    );
    for i in 1..=150 {
        cmds.push(format!("XADD t {i}-1 f v"));
    }
    cmds.extend(
        [
            "XADD t MAXLEN ~ 50 LIMIT 100 151-1 f v",
            "XLEN t",
            "XADD t MINID ~ 140 152-1 f v",
            "XLEN t",
            "XTRIM t MAXLEN 1",
            "XINFO STREAM t",
        ]
        .map(String::from),
    );
    let cmds: Vec<&str> = cmds.iter().map(String::as_str).collect();
    mirror(&cmds);
}

#[test]
fn read_commands_match_redis() {
    mirror(&[
        "XADD s 1-1 a 1",
        "XADD s 2-1 b 2",
        "XADD t 3-1 c 3",
        "SET str x",
        "XREAD STREAMS s",
        "XREAD COUNT 1 STREAMS s 0 1",
        "XREAD BLOCK -1 STREAMS s 0",
        "XREAD BLOCK x STREAMS s 0",
        "XREAD GROUP g c STREAMS s 0",
        "XREAD NOACK STREAMS s 0",
        "XREAD STREAMS s >",
        "XREAD STREAMS s x",
        "XREAD STREAMS str 0",
        "XREAD STREAMS s $",
        "XREAD STREAMS nokey 0",
        "XREAD STREAMS s t 0 0",
        "XREAD COUNT 1 STREAMS s t 1-1 0",
        "XREAD COUNT -5 STREAMS s 0",
        "XREAD STREAMS s t 2-1 3-1",
        "XREAD FOO STREAMS s 0",
    ]);
}

#[test]
fn group_commands_match_redis() {
    mirror(&[
        "XADD s 1-1 a 1",
        "XADD s 2-1 b 2",
        "XADD s 3-1 c 3",
        "SET str x",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE nokey g 0",
        "XGROUP CREATE s g2 x",
        "XGROUP CREATE s g3 0 ENTRIESREAD -5",
        "XGROUP CREATE s g3 0 ENTRIESREAD abc",
        "XGROUP CREATE s g3 0 FOO",
        "XGROUP CREATE str g 0",
        "XGROUP CREATE s g4 $ MKSTREAM ENTRIESREAD 3",
        "XGROUP CREATE new g $ MKSTREAM",
        "XINFO STREAM new",
        "XGROUP SETID s nog 0",
        "XGROUP SETID nokey g 0",
        "XGROUP SETID nokey g 0 ENTRIESREAD -3",
        "XGROUP SETID nokey g 0 ENTRIESREAD x",
        "XGROUP SETID nokey g 0 FOO 1",
        "XGROUP SETID s g 0 MKSTREAM",
        "XGROUP SETID s g x",
        "XGROUP CREATE nokey g2 0 FOO MKSTREAM",
        "XGROUP DESTROY s nog",
        "XGROUP DESTROY nokey g",
        "XGROUP CREATECONSUMER s nog c",
        "XGROUP CREATECONSUMER s g alice",
        "XGROUP CREATECONSUMER s g alice",
        "XGROUP DELCONSUMER s g zed",
        "XGROUP FOO s",
        "XGROUP CREATE s",
        "XINFO GROUPS s",
        "XREADGROUP GROUP g c STREAMS s $",
        "XREADGROUP GROUP nog c STREAMS s >",
        "XREADGROUP GROUP g c STREAMS nokey >",
        "XREADGROUP GROUP g c COUNT x STREAMS s >",
        "XREADGROUP GROUP g c STREAMS s 0 >",
        "XREADGROUP STREAMS s >",
        "XREADGROUP COUNT 1 STREAMS s >",
        "XREADGROUP GROUP g alice COUNT 1 STREAMS s >",
        "XREADGROUP GROUP g bob STREAMS s >",
        "XREADGROUP GROUP g bob STREAMS s >",
        "XREADGROUP GROUP g alice STREAMS s 0",
        "XINFO GROUPS s",
        "XPENDING s g",
        "XPENDING s nog",
        "XPENDING nokey g",
        "XPENDING s g - + x",
        "XPENDING s g IDLE 10",
        "XPENDING s g IDLE x - + 10",
        "XPENDING s g IDLE 100000000 - + 10",
        "XPENDING s g - + -1",
        "XPENDING s g - + 10 nobody",
        "XACK s g",
        "XACK s g x",
        "XACK nokey g 1-1",
        "XACK s nog 1-1",
        "XACK str g 1-1",
        "XACK s g 2-1 2-1 9-9",
        "XPENDING s g",
        "XCLAIM s g c x 1-1",
        "XCLAIM s nog c 0 1-1",
        "XCLAIM nokey g c 0 1-1",
        "XCLAIM s g c 0 1-1 IDLE x",
        "XCLAIM s g c 0 1-1 FOO",
        "XCLAIM s g c 0 x",
        "XCLAIM s g c 0 1-1 LASTID x",
        "XCLAIM s g carol 0 1-1 JUSTID",
        "XCLAIM s g carol 0 3-1 RETRYCOUNT 7",
        "XCLAIM s g carol 100000000 3-1",
        "XCLAIM s g dave 0 2-1 FORCE JUSTID",
        "XPENDING s g",
        "XAUTOCLAIM s g c 0 0 COUNT 0",
        "XAUTOCLAIM s g c 0 0 COUNT x",
        "XAUTOCLAIM s g c x 0",
        "XAUTOCLAIM s g c 0 x",
        "XAUTOCLAIM s nog c 0 0",
        "XAUTOCLAIM nokey g c 0 0",
        "XAUTOCLAIM s g c 0 0 FOO",
        "XAUTOCLAIM s g erin 0 0 COUNT 1",
        "XAUTOCLAIM s g erin 0 0 JUSTID",
        "XDEL s 1-1",
        "XAUTOCLAIM s g erin 0 0",
        "XPENDING s g",
        "XINFO GROUPS s",
        "XGROUP SETID s g 0 ENTRIESREAD 1",
        "XGROUP SETID s g $",
        "XINFO GROUPS s",
        "XGROUP DELCONSUMER s g erin",
        "XPENDING s g",
        "XGROUP DESTROY s g",
        "XINFO GROUPS s",
        "XINFO STREAM nokey",
        "XINFO GROUPS nokey",
        "XINFO CONSUMERS s nog",
        "XINFO STREAM s FULL COUNT x",
        "XINFO FOO s",
    ]);
}

/// XREADGROUP `>` after XGROUP SETID moved the group back over delivered entries: those are
/// pending already and move to the reading consumer (the group's count unchanged), while the
/// entries past the largest pending ID are new to the PEL (read without a lookup each).
#[test]
fn redelivery_after_setid_moves_pending_entries_between_consumers_as_redis() {
    mirror(&[
        "XADD s 1-1 a 1",
        "XADD s 2-1 a 2",
        "XADD s 3-1 a 3",
        "XADD s 4-1 a 4",
        "XADD s 5-1 a 5",
        "XGROUP CREATE s g 0",
        "XREADGROUP GROUP g c1 STREAMS s >",
        "XPENDING s g",
        "XGROUP SETID s g 2-1",
        "XADD s 6-1 a 6",
        "XREADGROUP GROUP g c2 COUNT 2 STREAMS s >",
        "XPENDING s g",
        "XREADGROUP GROUP g c2 STREAMS s >",
        "XPENDING s g",
        "XREADGROUP GROUP g c1 STREAMS s 0",
        "XACK s g 1-1 2-1 6-1",
        "XPENDING s g",
        "XGROUP SETID s g 0",
        "XREADGROUP GROUP g c3 NOACK COUNT 4 STREAMS s >",
        "XPENDING s g",
        "XADD s 7-1 a 7",
        "XREADGROUP GROUP g c3 STREAMS s >",
        "XPENDING s g",
    ]);
}

#[test]
fn time_dependent_replies_have_redis_shapes() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let _: String = q(&mut c, &["XADD", "s", "1-1", "f", "v"]);
    let _: String = q(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    let _: Value = qv(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"],
    );
    // XPENDING extended: [id, consumer, idle, deliveries].
    let Value::Array(rows) = qv(&mut c, &["XPENDING", "s", "g", "-", "+", "10"]) else {
        panic!("array expected");
    };
    let Value::Array(row) = &rows[0] else {
        panic!()
    };
    assert_eq!(row[0], Value::BulkString(b"1-1".to_vec()));
    assert_eq!(row[1], Value::BulkString(b"alice".to_vec()));
    assert!(matches!(row[2], Value::Int(n) if n >= 0));
    assert_eq!(row[3], Value::Int(1));
    // XINFO CONSUMERS: name, pending, idle.
    let Value::Array(cs) = qv(&mut c, &["XINFO", "CONSUMERS", "s", "g"]) else {
        panic!()
    };
    let Value::Array(alice) = &cs[0] else {
        panic!()
    };
    assert_eq!(alice.len(), 6);
    assert_eq!(alice[3], Value::Int(1));
    // XINFO STREAM FULL: 9 fields, the group with its PEL and consumers.
    let Value::Array(full) = qv(&mut c, &["XINFO", "STREAM", "s", "FULL"]) else {
        panic!()
    };
    assert_eq!(full.len(), 18);
    assert_eq!(full[14], Value::BulkString(b"entries".to_vec()));
    let Value::Array(groups) = &full[17] else {
        panic!()
    };
    let Value::Array(g) = &groups[0] else {
        panic!()
    };
    assert_eq!(g.len(), 14);
    assert_eq!(g[9], Value::Int(1), "pel-count");
    // The second delivery of a pending entry counts.
    let _: Value = qv(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"],
    );
    let Value::Array(rows) = qv(&mut c, &["XPENDING", "s", "g", "-", "+", "10", "alice"]) else {
        panic!()
    };
    let Value::Array(row) = &rows[0] else {
        panic!()
    };
    assert_eq!(row[3], Value::Int(2));
}

#[test]
fn replies_distinguish_null_arrays() {
    let srv = TestServer::start();
    let mut s = srv.raw();
    for (cmd, expected) in [
        ("XADD s 1-1 a 1", "$3\r\n1-1\r\n"),
        ("XRANGE s - + COUNT 0", "*-1\r\n"),
        ("XREAD STREAMS s 1-1", "*-1\r\n"),
        ("XADD s NOMKSTREAM 2-1 a 1", "$3\r\n2-1\r\n"),
        ("XADD n NOMKSTREAM 2-1 a 1", "$-1\r\n"),
        ("XGROUP CREATE s g $", "+OK\r\n"),
        ("XPENDING s g", "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n"),
        (
            "XGROUP CREATE s g $",
            "-BUSYGROUP Consumer Group name already exists\r\n",
        ),
        ("HELLO 3", ""),
    ] {
        if expected.is_empty() {
            let _ = roundtrip_raw(&mut s, &resp_str(&cmd.split(' ').collect::<Vec<_>>()), 1);
            let _ = read_raw(&mut s, 4096);
            continue;
        }
        let args: Vec<&str> = cmd.split(' ').collect();
        let (got, _) = roundtrip_raw(&mut s, &resp_str(&args), expected.len());
        assert_eq!(String::from_utf8_lossy(&got), expected, "{cmd}");
    }
    // RESP3: XREAD answers a map of streams.
    let (got, _) = roundtrip_raw(
        &mut s,
        &resp_str(&["XREAD", "STREAMS", "s", "1-1"]),
        "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n".len(),
    );
    assert_eq!(
        String::from_utf8_lossy(&got),
        "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
}

fn blocked(c: &mut Connection) -> u64 {
    info_field(c, "clients", "blocked_clients").expect("INFO clients has blocked_clients")
}

fn wait_blocked(c: &mut Connection, n: u64) {
    assert!(
        eventually(WAIT, || blocked(c) == n),
        "expected {n} blocked clients, have {}",
        blocked(c)
    );
}

fn send(s: &mut TcpStream, args: &[&str]) {
    s.write_all(&resp_str(args)).unwrap();
}

fn expect(s: &mut TcpStream, expected: &str) {
    let (got, _) = read_raw(s, expected.len());
    assert_eq!(String::from_utf8_lossy(&got), expected);
}

const ENTRY_5: &str =
    "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n5-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n";

#[test]
fn blocked_xread_wakes_every_reader_in_arrival_order() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let _: String = q(&mut c, &["XADD", "s", "1-1", "f", "v"]);
    let mut a = srv.raw();
    let mut b = srv.raw();
    let mut far = srv.raw();
    send(&mut a, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    wait_blocked(&mut c, 1);
    send(
        &mut b,
        &["XREAD", "BLOCK", "0", "STREAMS", "nokey", "s", "0", "$"],
    );
    wait_blocked(&mut c, 2);
    // An ID beyond what is added keeps this one blocked, without stopping the others.
    send(&mut far, &["XREAD", "BLOCK", "0", "STREAMS", "s", "9-0"]);
    wait_blocked(&mut c, 3);
    let _: String = q(&mut c, &["XADD", "s", "5-1", "f", "v"]);
    expect(&mut a, ENTRY_5);
    expect(&mut b, ENTRY_5);
    wait_blocked(&mut c, 1);
    let _: String = q(&mut c, &["XADD", "s", "9-1", "f", "v"]);
    expect(
        &mut far,
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n9-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    wait_blocked(&mut c, 0);
}

#[test]
fn blocked_xreadgroup_consumers_share_entries_in_arrival_order() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let _: String = q(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let mut a = srv.raw();
    let mut b = srv.raw();
    send(
        &mut a,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "a",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut c, 1);
    send(
        &mut b,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "b",
            "COUNT",
            "1",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut c, 2);
    let _: String = q(&mut c, &["XADD", "s", "5-1", "f", "v"]);
    expect(&mut a, ENTRY_5);
    wait_blocked(&mut c, 1);
    let _: String = q(&mut c, &["XADD", "s", "6-1", "f", "v"]);
    expect(
        &mut b,
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n6-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    wait_blocked(&mut c, 0);
    let pending: Value = qv(&mut c, &["XPENDING", "s", "g"]);
    let Value::Array(p) = pending else { panic!() };
    assert_eq!(p[0], Value::Int(2));
}

#[test]
fn blocked_xread_times_out_and_is_unblocked() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let mut a = srv.raw();
    send(&mut a, &["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]);
    expect(&mut a, "*-1\r\n");
    send(&mut a, &["CLIENT", "ID"]);
    let (got, _) = read_raw(&mut a, 64);
    let id = String::from_utf8_lossy(&got)
        .trim_start_matches(':')
        .trim()
        .to_string();
    send(&mut a, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    wait_blocked(&mut c, 1);
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id, "ERROR"]), 1);
    expect(&mut a, "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    // Inside MULTI a blocking read never blocks.
    let mut m = srv.raw();
    for (cmd, want) in [
        (&["MULTI"][..], "+OK\r\n"),
        (
            &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"][..],
            "+QUEUED\r\n",
        ),
        (&["EXEC"][..], "*1\r\n*-1\r\n"),
    ] {
        let (got, _) = roundtrip_raw(&mut m, &resp_str(cmd), want.len());
        assert_eq!(String::from_utf8_lossy(&got), want);
    }
    // A stream's writer wakes only stream readers.
    send(&mut a, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    wait_blocked(&mut c, 1);
    let _: i64 = q(&mut c, &["LPUSH", "s2", "x"]);
    let _: String = q(&mut c, &["XADD", "s", "5-1", "f", "v"]);
    expect(&mut a, ENTRY_5);
}

#[test]
fn consumer_group_flow_survives_a_restart() {
    let mut srv = TestServer::start();
    let mut c = srv.client();
    for i in 1..=5 {
        let _: String = q(
            &mut c,
            &["XADD", "jobs", &format!("{i}-0"), "n", &i.to_string()],
        );
    }
    let _: String = q(&mut c, &["XGROUP", "CREATE", "jobs", "workers", "0"]);
    let _: Value = qv(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "workers",
            "w1",
            "COUNT",
            "3",
            "STREAMS",
            "jobs",
            ">",
        ],
    );
    assert_eq!(
        q::<i64>(&mut c, &["XACK", "jobs", "workers", "1-0", "2-0"]),
        2
    );
    let _: i64 = q(&mut c, &["EXPIRE", "jobs", "1000"]);
    srv.restart();
    let mut c = srv.client();
    assert_eq!(q::<i64>(&mut c, &["XLEN", "jobs"]), 5);
    assert_eq!(q::<String>(&mut c, &["TYPE", "jobs"]), "stream");
    assert!(q::<i64>(&mut c, &["TTL", "jobs"]) > 0);
    let Value::Array(p) = qv(&mut c, &["XPENDING", "jobs", "workers"]) else {
        panic!()
    };
    assert_eq!(p[0], Value::Int(1));
    assert_eq!(p[1], Value::BulkString(b"3-0".to_vec()));
    // w2 takes the rest, then claims w1's entry.
    let Value::Array(r) = qv(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "workers",
            "w2",
            "STREAMS",
            "jobs",
            ">",
        ],
    ) else {
        panic!()
    };
    assert_eq!(r.len(), 1);
    let claimed: Value = qv(
        &mut c,
        &["XCLAIM", "jobs", "workers", "w2", "0", "3-0", "JUSTID"],
    );
    assert_eq!(
        claimed,
        Value::Array(vec![Value::BulkString(b"3-0".to_vec())])
    );
    assert_eq!(
        q::<i64>(&mut c, &["XACK", "jobs", "workers", "3-0", "4-0", "5-0"]),
        3
    );
    let Value::Array(p) = qv(&mut c, &["XPENDING", "jobs", "workers"]) else {
        panic!()
    };
    assert_eq!(p[0], Value::Int(0));
}

#[test]
fn generic_key_commands_carry_streams() {
    let srv = TestServer::start();
    let mut c = srv.client();
    let _: String = q(&mut c, &["XADD", "s", "1-1", "f", "v"]);
    let _: String = q(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    let _: Value = qv(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"],
    );
    let info = |c: &mut Connection, key: &str| -> Value { qv(c, &["XINFO", "GROUPS", key]) };
    let before = info(&mut c, "s");
    let _: String = q(&mut c, &["RENAME", "s", "r"]);
    assert_eq!(info(&mut c, "r"), before);
    let _: i64 = q(&mut c, &["COPY", "r", "c"]);
    assert_eq!(info(&mut c, "c"), before);
    let dump: Vec<u8> = q(&mut c, &["DUMP", "c"]);
    let _: i64 = q(&mut c, &["DEL", "c"]);
    let mut restore = redis::cmd("RESTORE");
    restore.arg("c").arg(0).arg(dump);
    let _: String = restore.query(&mut c).unwrap();
    assert_eq!(info(&mut c, "c"), before);
    assert_eq!(
        qv(&mut c, &["XRANGE", "c", "-", "+"]),
        qv(&mut c, &["XRANGE", "r", "-", "+"])
    );
    // MIGRATE to another kvik carries the stream with its groups.
    let other_srv = TestServer::start();
    let port = other_srv.port().to_string();
    let _: String = q(
        &mut c,
        &["MIGRATE", "127.0.0.1", &port, "c", "0", "5000", "COPY"],
    );
    assert_eq!(info(&mut other_srv.client(), "c"), before);
    let _: i64 = q(&mut c, &["MOVE", "c", "1"]);
    let _: String = q(&mut c, &["SELECT", "1"]);
    assert_eq!(info(&mut c, "c"), before);
    let _: String = q(&mut c, &["SELECT", "0"]);
    let scan: Value = qv(&mut c, &["SCAN", "0", "TYPE", "stream"]);
    let Value::Array(parts) = scan else { panic!() };
    assert_eq!(
        parts[1],
        Value::Array(vec![Value::BulkString(b"r".to_vec())])
    );
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "r"]), "stream");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    // An empty stream exists (Redis keeps it), and DEL removes it.
    let _: i64 = q(&mut c, &["XDEL", "r", "1-1"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "r"]), 1);
    assert_eq!(q::<i64>(&mut c, &["DEL", "r"]), 1);
    assert_eq!(q::<i64>(&mut c, &["XLEN", "r"]), 0);
    // WATCH sees a stream write.
    let _: String = q(&mut c, &["XADD", "w", "1-1", "f", "v"]);
    let _: String = q(&mut c, &["WATCH", "w"]);
    let mut other = srv.client();
    let _: String = q(&mut other, &["XADD", "w", "2-1", "f", "v"]);
    let _: String = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["XLEN", "w"]);
    assert_eq!(qv(&mut c, &["EXEC"]), Value::Nil);
    // Key positions for cluster routing.
    let keys: Vec<String> = q(
        &mut c,
        &[
            "COMMAND",
            "GETKEYS",
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "1",
            "STREAMS",
            "a",
            "b",
            ">",
            ">",
        ],
    );
    assert_eq!(keys, ["a", "b"]);
}

#[test]
fn redis_py_consumer_groups() {
    let srv = TestServer::start();
    let script = r#"
import sys, redis
r = redis.Redis(host='127.0.0.1', port=int(sys.argv[1]))
for i in range(10):
    r.xadd('events', {'n': i})
r.xgroup_create('events', 'g', id='0')
got = r.xreadgroup('g', 'c1', {'events': '>'}, count=4)
ids = [i for i, _ in got[0][1]]
print(len(ids), r.xack('events', 'g', *ids[:3]))
p = r.xpending('events', 'g')
print(p['pending'], p['consumers'])
rest = r.xreadgroup('g', 'c2', {'events': '>'})
print(len(rest[0][1]), r.xinfo_groups('events')[0]['pending'])
claimed = r.xautoclaim('events', 'g', 'c2', 0, '0-0', justid=True)
print(len(claimed))
print(r.xlen('events'), r.xtrim('events', maxlen=5, approximate=False), r.xlen('events'))
"#;
    let Some(stdout) = kvik_testkit::python_stdout(script, &[&srv.port().to_string()]) else {
        return;
    };
    assert_eq!(
        stdout,
        "4 3\n1 [{'name': b'c1', 'pending': 1}]\n6 7\n7\n10 5 5\n"
    );
}

#[test]
fn stream_reads_route_by_the_keys_after_streams_in_cluster_mode() {
    let nodes = kvik_testkit::start_kvik_cluster(env!("CARGO_BIN_EXE_kvik-server"), 3, &[]);
    let owner = |key: &str| -> usize {
        let slot = kvik_resp::cluster::key_slot(key.as_bytes());
        let ranges = kvik_resp::topology::even_split(3);
        ranges
            .iter()
            .position(|(lo, hi)| (*lo..=*hi).contains(&slot))
            .unwrap()
    };
    let here = (0..)
        .map(|i| format!("s{i}"))
        .find(|k| owner(k) == 0)
        .unwrap();
    let there = (0..)
        .map(|i| format!("s{i}"))
        .find(|k| owner(k) == 1)
        .unwrap();
    let mut c = nodes[0].client();
    let _: String = q(&mut c, &["XADD", &here, "1-1", "f", "v"]);
    let _: String = q(&mut c, &["XGROUP", "CREATE", &here, "g", "0"]);
    let read: Value = qv(&mut c, &["XREAD", "COUNT", "1", "STREAMS", &here, "0"]);
    assert!(matches!(read, Value::Array(_)));
    assert!(err(&mut c, &["XREAD", "STREAMS", &there, "0"]).starts_with("MOVED"));
    assert_eq!(
        err(&mut c, &["XREAD", "STREAMS", &here, &there, "0", "0"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert!(err(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", &there, ">"]
    )
    .starts_with("MOVED"));
    assert!(err(&mut c, &["XINFO", "STREAM", &there]).starts_with("MOVED"));
    assert!(err(&mut c, &["XGROUP", "CREATE", &there, "g", "0", "MKSTREAM"]).starts_with("MOVED"));
}

/// Everything a subscriber received until the connection stays quiet for a moment.
fn drain(s: &mut TcpStream) -> Vec<u8> {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[test]
fn stream_commands_notify_like_redis() {
    let kvik = TestServer::start();
    let redis = RedisServer::start(&[]);
    let cmds = [
        "XADD s 1-1 f v",
        "XADD s MAXLEN 1 2-1 f v",
        "XDEL s 9-9",
        "XDEL s 2-1",
        "XADD s 3-1 f v",
        "XTRIM s MAXLEN 5",
        "XTRIM s MAXLEN 0",
        "XSETID s 5-0",
        "XGROUP CREATE s g $",
        "XGROUP CREATE t g $ MKSTREAM",
        "XGROUP SETID s g 0",
        "XGROUP CREATECONSUMER s g a",
        "XGROUP CREATECONSUMER s g a",
        "XADD s 6-1 f v",
        "XREADGROUP GROUP g b STREAMS s >",
        "XCLAIM s g c 0 6-1",
        "XAUTOCLAIM s g d 0 0",
        "XACK s g 6-1",
        "XGROUP DELCONSUMER s g zz",
        "XGROUP DELCONSUMER s g a",
        "XGROUP DESTROY s g",
        "XGROUP DESTROY s g",
    ];
    let mut events = Vec::new();
    for port in [kvik.port(), redis.port] {
        let mut c = kvik_testkit::connect(port);
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("Et")
            .query(&mut c)
            .unwrap();
        let mut sub = kvik_testkit::connect_raw(port);
        let (got, _) = roundtrip_raw(
            &mut sub,
            &resp_str(&["PSUBSCRIBE", "__keyevent@0__:*"]),
            "*3\r\n$10\r\npsubscribe\r\n$16\r\n__keyevent@0__:*\r\n:1\r\n".len(),
        );
        assert!(String::from_utf8_lossy(&got).contains("psubscribe"));
        for cmd in cmds {
            let _ = reply(&mut c, cmd);
        }
        events.push(String::from_utf8_lossy(&drain(&mut sub)).into_owned());
    }
    assert!(events[1].contains("xgroup-createconsumer"), "{}", events[1]);
    assert_eq!(events[0], events[1]);
}

/// As Redis 7.0.15 (checked with redis-py against redis-server): consumer-group bookkeeping
/// and XSETID do not abort a transaction WATCHing the stream; entry changes do.
#[test]
fn group_bookkeeping_does_not_touch_watched_streams() {
    let s = TestServer::start();
    let mut w = s.client();
    let mut o = s.client();
    let cases: &[(&[&str], bool)] = &[
        (&["XADD", "s", "*", "f", "v"], true),
        (&["XDEL", "s", "1-1"], true),
        (&["XGROUP", "CREATE", "s", "g2", "0"], false),
        (&["XGROUP", "SETID", "s", "g", "0"], false),
        (&["XGROUP", "DESTROY", "s", "g"], false),
        (&["XGROUP", "CREATECONSUMER", "s", "g", "c9"], false),
        (&["XGROUP", "DELCONSUMER", "s", "g", "c1"], false),
        (
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c1",
                "COUNT",
                "1",
                "STREAMS",
                "s",
                ">",
            ],
            false,
        ),
        (&["XACK", "s", "g", "1-1"], false),
        (&["XCLAIM", "s", "g", "c2", "0", "1-1"], false),
        (&["XAUTOCLAIM", "s", "g", "c2", "0", "0"], false),
        (&["XSETID", "s", "5-5"], false),
    ];
    for (cmd, aborts) in cases {
        let _: () = redis::cmd("FLUSHALL").query(&mut o).unwrap();
        let _: String = redis::cmd("XADD")
            .arg("s")
            .arg("1-1")
            .arg("f")
            .arg("v")
            .query(&mut o)
            .unwrap();
        let _: String = redis::cmd("XADD")
            .arg("s")
            .arg("2-1")
            .arg("f")
            .arg("v")
            .query(&mut o)
            .unwrap();
        let _: String = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("s")
            .arg("g")
            .arg("0")
            .query(&mut o)
            .unwrap();
        let _: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("c1")
            .arg("COUNT")
            .arg(1)
            .arg("STREAMS")
            .arg("s")
            .arg(">")
            .query(&mut o)
            .unwrap();
        let _: () = redis::cmd("WATCH").arg("s").query(&mut w).unwrap();
        let mut c = redis::cmd(cmd[0]);
        for a in &cmd[1..] {
            c.arg(*a);
        }
        let _: redis::Value = c.query(&mut o).unwrap();
        let _: () = redis::cmd("MULTI").query(&mut w).unwrap();
        let _: String = redis::cmd("PING").query(&mut w).unwrap();
        let res: redis::Value = redis::cmd("EXEC").query(&mut w).unwrap();
        assert_eq!(res == redis::Value::Nil, *aborts, "{cmd:?}");
    }
}
