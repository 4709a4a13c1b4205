//! Scripts run to completion on the I/O thread (`rtc-scripts`): counted in `rtc_commands`
//! when their keys are free and their commands answer from memory; a script that meets a
//! command the I/O thread does not run, a blocked client, keyspace events or its time budget
//! starts again on a worker having changed nothing, so its writes happen exactly once.

use crate::common::*;
use redis::{Commands, Connection};
use std::time::Duration;

fn eval(con: &mut Connection, script: &str, keys: &[&str]) -> redis::Value {
    let mut c = redis::cmd("EVAL");
    c.arg(script).arg(keys.len());
    for k in keys {
        c.arg(*k);
    }
    c.query(con).unwrap()
}

const INCR: &str = "return redis.call('incr', KEYS[1])";

#[test]
fn a_script_on_cached_keys_runs_on_the_io_thread_and_not_with_the_switch_off() {
    let s = TestServer::start();
    let mut c = s.client();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(INCR)
        .query(&mut c)
        .unwrap();
    let evalsha = |c: &mut Connection| -> i64 {
        redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg("n")
            .query(c)
            .unwrap()
    };
    evalsha(&mut c);
    let before = stat(&mut c, "rtc_commands");
    for i in 2..=101 {
        assert_eq!(evalsha(&mut c), i);
    }
    let ran_here = stat(&mut c, "rtc_commands") - before;
    // Each INFO is one more command answered there.
    assert!(
        ran_here >= 100,
        "only {ran_here} of 100 scripts on the I/O thread"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rtc-scripts")
        .arg("no")
        .query(&mut c)
        .unwrap();
    let before = stat(&mut c, "rtc_commands");
    for i in 102..=151 {
        assert_eq!(evalsha(&mut c), i);
    }
    assert!(
        stat(&mut c, "rtc_commands") - before <= 1,
        "scripts ran there with the switch off"
    );
}

/// INCR is run on the I/O thread, RPOPLPUSH is not: the script is aborted after its buffered
/// INCR and the pool runs it again, so both writes happen once per call.
#[test]
fn a_script_that_meets_a_pool_command_runs_again_on_a_worker_with_its_writes_once() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: i64 = c.rpush("l", (1..=60).collect::<Vec<i64>>()).unwrap();
    let script = "local n = redis.call('incr', KEYS[1]) \
                  local v = redis.call('rpoplpush', KEYS[2], KEYS[3]) return {n, tonumber(v)}";
    let before = stat(&mut c, "rtc_fallbacks");
    for i in 1..=50 {
        let v = eval(&mut c, script, &["n", "l", "m"]);
        assert_eq!(
            v,
            redis::Value::Array(vec![redis::Value::Int(i), redis::Value::Int(61 - i)])
        );
    }
    assert!(
        stat(&mut c, "rtc_fallbacks") > before,
        "no script fell back"
    );
    let n: i64 = c.get("n").unwrap();
    assert_eq!(n, 50);
    let len: i64 = c.llen("l").unwrap();
    assert_eq!(len, 10);
    let moved: i64 = c.llen("m").unwrap();
    assert_eq!(moved, 50);
}

/// A script past the I/O thread's budget is aborted once, run on a worker, and from then on
/// sent to the pool untried; its write happens once per call.
#[test]
fn a_long_script_is_moved_to_the_pool_once_and_stays_there() {
    let s = TestServer::start();
    let mut c = s.client();
    let script =
        "redis.call('incr', KEYS[1]) local x = 0 for i = 1, 3000000 do x = x + i end return x";
    let io_threads =
        info_field(&mut c, "stats", "kvik_io_threads").expect("INFO has kvik_io_threads");
    for _ in 0..6 {
        let _ = eval(&mut c, script, &["long"]);
    }
    let n: i64 = c.get("long").unwrap();
    assert_eq!(n, 6);
    let aborts = stat(&mut c, "rtc_script_budget_aborts");
    assert!(aborts >= 1, "the budget never stopped it");
    assert!(
        aborts <= io_threads,
        "{aborts} aborts: each I/O thread learns once"
    );
}

/// Many clients incrementing one key through scripts, on both I/O threads and the pool (one
/// script of two goes to the pool through a list write): no increment is lost.
#[test]
fn concurrent_scripts_on_one_key_lose_no_increment() {
    let s = TestServer::start();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let mut c = s.client();
            std::thread::spawn(move || {
                for i in 0..300 {
                    if (t + i) % 2 == 0 {
                        eval(&mut c, INCR, &["shared"]);
                    } else {
                        let script =
                            "redis.call('incr', KEYS[1]) redis.call('rpush', KEYS[2], 1) return 1";
                        eval(&mut c, script, &["shared", "side"]);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = s.client();
    let n: i64 = c.get("shared").unwrap();
    assert_eq!(n, 1800);
    let side: i64 = c.llen("side").unwrap();
    assert_eq!(side, 900);
}

/// A client blocked on a stream is woken by a script's XADD (run by a worker: waking blocked
/// clients is not the I/O thread's job).
#[test]
fn a_script_writing_a_key_a_client_waits_on_wakes_it() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: String = redis::cmd("XADD")
        .arg("s")
        .arg("1-1")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let mut waiter = s.client();
    let reader = std::thread::spawn(move || {
        redis::cmd("XREAD")
            .arg("BLOCK")
            .arg(10_000)
            .arg("STREAMS")
            .arg("s")
            .arg("$")
            .query::<redis::Value>(&mut waiter)
            .unwrap()
    });
    // The reader is blocked once INFO counts it.
    for _ in 0..500 {
        if info_field(&mut c, "clients", "blocked_clients") == Some(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "clients", "blocked_clients"), Some(1));
    let id = eval(
        &mut c,
        "return redis.call('xadd', KEYS[1], '2-1', 'f', 'w')",
        &["s"],
    );
    assert_eq!(id, redis::Value::BulkString(b"2-1".to_vec()));
    let got = format!("{:?}", reader.join().unwrap());
    assert!(got.contains("2-1"), "the waiter got {got}");
}

/// With keyspace events on and a subscriber, scripts run on a worker: each event is sent once.
#[test]
fn keyspace_events_of_a_script_are_sent_once() {
    let s = TestServer::start();
    let mut c = s.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("KA")
        .query(&mut c)
        .unwrap();
    let mut sub = s.client();
    let _: () = redis::cmd("SUBSCRIBE")
        .arg("__keyspace@0__:ev")
        .query(&mut sub)
        .unwrap();
    for _ in 0..3 {
        eval(&mut c, INCR, &["ev"]);
    }
    let _: () = c.set("done", 1).unwrap();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(format!("{:?}", sub.recv_response().unwrap()));
    }
    assert!(events.iter().all(|e| e.contains("incrby")), "{events:?}");
    sub.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        sub.recv_response().is_err(),
        "a fourth event arrived: an event was sent twice"
    );
}
