//! An I/O thread's run-to-completion writes of one event-loop turn reach RocksDB as one batch
//! (`rtc-write-batch`): a pipeline of writes is a handful of batches, not one write each; the
//! replies see sequential semantics; concurrent writers of one key on both I/O threads lose
//! nothing (the turn keeps its keys locked until its batch is written); a pipeline that hands
//! part of itself to the pool sees its own earlier writes there.

use crate::common::*;
use redis::{Commands, Connection};

#[test]
fn a_pipeline_of_writes_is_written_in_few_batches_and_not_with_the_switch_off() {
    let s = TestServer::start();
    let mut c = s.client();
    let writes = |c: &mut Connection, from: usize| {
        let mut p = redis::pipe();
        for i in from..from + 200 {
            p.set(format!("k{i}"), i).ignore();
        }
        p.query::<()>(c).unwrap();
    };
    let (b0, w0) = (
        stat(&mut c, "rtc_write_batches"),
        stat(&mut c, "rtc_batched_writes"),
    );
    writes(&mut c, 0);
    let (b1, w1) = (
        stat(&mut c, "rtc_write_batches"),
        stat(&mut c, "rtc_batched_writes"),
    );
    assert!(w1 - w0 >= 190, "only {} of 200 writes batched", w1 - w0);
    assert!(
        b1 - b0 <= 20,
        "{} batches for 200 pipelined writes",
        b1 - b0
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rtc-write-batch")
        .arg("no")
        .query(&mut c)
        .unwrap();
    writes(&mut c, 200);
    assert_eq!(
        stat(&mut c, "rtc_batched_writes"),
        w1,
        "batched with the switch off"
    );
    for i in [0, 199, 200, 399] {
        let v: i64 = c.get(format!("k{i}")).unwrap();
        assert_eq!(v, i as i64);
    }
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 400);
}

/// Reads and writes of the same keys in one pipeline, with a list write in the middle that
/// the pool runs (after the turn wrote what it buffered), answer as one after the other.
#[test]
fn a_mixed_pipeline_answers_as_run_one_by_one() {
    let s = TestServer::start();
    let mut c = s.client();
    let (a, b, n): (i64, Option<i64>, i64) = {
        let v: (String, i64, i64, usize, i64, Option<i64>, i64, i64) = redis::pipe()
            .set("a", 1)
            .incr("a", 5)
            .incr("b", 1)
            .lpush("l", "x")
            .get("a")
            .get("b")
            .incr("b", 1)
            .cmd("DBSIZE")
            .query(&mut c)
            .unwrap();
        assert_eq!(v.0, "OK");
        assert_eq!((v.1, v.2, v.3, v.6), (6, 1, 1, 2));
        (v.4, v.5, v.7)
    };
    assert_eq!((a, b, n), (6, Some(1), 3));
    let after: i64 = c.get("b").unwrap();
    assert_eq!(after, 2);
}

/// Clients on both I/O threads pipelining INCR of one key and of their own keys: every
/// increment counts.
#[test]
fn pipelined_increments_from_many_clients_lose_nothing() {
    let s = TestServer::start();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let mut c = s.client();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let mut p = redis::pipe();
                    for _ in 0..20 {
                        p.incr("shared", 1).ignore();
                        p.incr(format!("own{t}"), 1).ignore();
                    }
                    p.query::<()>(&mut c).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = s.client();
    let shared: i64 = c.get("shared").unwrap();
    assert_eq!(shared, 6 * 50 * 20);
    for t in 0..6 {
        let own: i64 = c.get(format!("own{t}")).unwrap();
        assert_eq!(own, 50 * 20);
    }
}

/// A hot key written many times in one turn is one write in the turn's batch
/// (`txn-skip-superseded`): a pipeline of INCRs and a list's pushes end exact, count the
/// writes left out, and survive kill -9; with the switch off nothing is left out.
#[test]
fn writes_of_a_hot_key_in_one_turn_are_written_once_and_end_exact() {
    let mut s = TestServer::start();
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..500 {
        p.incr("counter", 1).ignore();
        p.rpush("list", i).ignore();
        p.set("last", i).ignore();
    }
    p.query::<()>(&mut c).unwrap();
    let left_out = stat(&mut c, "kvik_superseded_writes");
    assert!(left_out >= 500, "only {left_out} writes left out");
    s.kill9();
    s.restart();
    let mut c = s.client();
    let counter: i64 = c.get("counter").unwrap();
    assert_eq!(counter, 500);
    let list: Vec<i64> = c.lrange("list", 0, -1).unwrap();
    assert_eq!(list, (0..500).collect::<Vec<i64>>());
    let last: i64 = c.get("last").unwrap();
    assert_eq!(last, 499);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 3);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("txn-skip-superseded")
        .arg("no")
        .query(&mut c)
        .unwrap();
    let before = stat(&mut c, "kvik_superseded_writes");
    let mut p = redis::pipe();
    for _ in 0..100 {
        p.incr("counter", 1).ignore();
    }
    p.query::<()>(&mut c).unwrap();
    assert_eq!(stat(&mut c, "kvik_superseded_writes"), before);
    let counter: i64 = c.get("counter").unwrap();
    assert_eq!(counter, 600);
}
