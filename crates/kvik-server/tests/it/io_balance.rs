//! How many I/O threads take connections (`io-threads-adaptive`, `net::balance`). Which count
//! the load gets is decided by measuring (unit-tested with made-up windows in
//! `net::balance::tests`); here the count is held with DEBUG IO-THREADS-ACTIVE so that the
//! moves themselves are checked: every connection of a thread that stops taking connections
//! moves (a blocked one once it is served, a subscriber with its subscriptions), nothing it
//! sent is lost or reordered on the way, new connections go to the active threads only, and the
//! connections spread again when the count grows.

use crate::common::*;
use redis::Connection;
use std::time::{Duration, Instant};

fn threads_of(cons: &mut [Connection]) -> Vec<String> {
    let mut t: Vec<String> = cons.iter_mut().map(io_thread_of).collect();
    t.sort();
    t.dedup();
    t
}

/// Each connection pipelines an append to its own key and a read of it; the reads must show
/// every append in order (what sequential execution returns).
fn append_and_check(cons: &mut [Connection], round: usize) {
    for (i, con) in cons.iter_mut().enumerate() {
        let key = format!("log:{i}");
        let (len, value): (usize, String) = redis::pipe()
            .cmd("APPEND")
            .arg(&key)
            .arg(format!("{round},"))
            .cmd("GET")
            .arg(&key)
            .query(con)
            .unwrap();
        let expected: String = (0..=round).map(|r| format!("{r},")).collect();
        assert_eq!(value, expected, "connection {i} after round {round}");
        assert_eq!(len, expected.len());
    }
}

#[test]
fn connections_gather_on_the_active_io_threads_and_spread_again() {
    let s = TestServer::start_with(&[
        "--io-threads",
        "2",
        "--io-threads-adaptive",
        "no",
        "--enable-debug-command",
        "yes",
    ]);
    let mut admin = s.client();
    let mut cons: Vec<Connection> = (0..8).map(|_| s.client()).collect();
    assert_eq!(
        threads_of(&mut cons),
        ["0", "1"],
        "accepted on both threads"
    );

    // A client blocked on thread 1, and a subscriber there.
    let on_one = || loop {
        let mut c = s.client();
        if io_thread_of(&mut c) == "1" {
            return c;
        }
    };
    let mut blocked = on_one();
    let mut listener = on_one();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let waiter = std::thread::spawn(move || {
        let got: (String, String) = q(&mut blocked, &["BLPOP", "queue", "10"]);
        (got, blocked)
    });
    let mut sub = listener.as_pubsub();
    sub.subscribe("news").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_field(&mut admin, "clients", "blocked_clients") != Some(1) {
        assert!(Instant::now() < deadline, "BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(5));
    }

    let _: () = q(&mut admin, &["DEBUG", "IO-THREADS-ACTIVE", "1"]);
    assert_eq!(stat(&mut admin, "io_threads_active"), 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut round = 0;
    loop {
        append_and_check(&mut cons, round);
        round += 1;
        if threads_of(&mut cons) == ["0"] {
            break;
        }
        assert!(Instant::now() < deadline, "connections stayed on thread 1");
    }
    let mut fresh: Vec<Connection> = (0..4).map(|_| s.client()).collect();
    assert_eq!(
        threads_of(&mut fresh),
        ["0"],
        "accepted by the active thread only"
    );

    // The subscriber moved with its subscription; the blocked client, once served.
    let receivers: i64 = q(&mut admin, &["PUBLISH", "news", "hello"]);
    assert_eq!(receivers, 1);
    let msg = sub.get_message().expect("the subscriber got the message");
    assert_eq!(msg.get_payload::<String>().unwrap(), "hello");
    let _: i64 = q(&mut admin, &["RPUSH", "queue", "job"]);
    let (got, mut blocked) = waiter.join().unwrap();
    assert_eq!(got, ("queue".to_string(), "job".to_string()));
    let deadline = Instant::now() + Duration::from_secs(5);
    while io_thread_of(&mut blocked) != "0" {
        assert!(
            Instant::now() < deadline,
            "the served client stayed on thread 1"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(stat(&mut admin, "io_balance_moves") >= 4);

    // Back to the setting (no: every thread): half the connections go to thread 1.
    let _: () = q(&mut admin, &["DEBUG", "IO-THREADS-ACTIVE", "0"]);
    assert_eq!(stat(&mut admin, "io_threads_active"), 2);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        append_and_check(&mut cons, round);
        round += 1;
        if threads_of(&mut cons) == ["0", "1"] {
            break;
        }
        assert!(Instant::now() < deadline, "connections never spread again");
    }
    let mut fresh: Vec<Connection> = (0..4).map(|_| s.client()).collect();
    assert_eq!(threads_of(&mut fresh), ["0", "1"]);

    // A count past the threads there are is clamped; a count must be a number.
    let _: () = q(&mut admin, &["DEBUG", "IO-THREADS-ACTIVE", "9"]);
    assert_eq!(stat(&mut admin, "io_threads_active"), 2);
    let e = err(&mut admin, &["DEBUG", "IO-THREADS-ACTIVE", "many"]);
    assert!(e.contains("not an integer"), "{e}");
}

/// The setting reads and sets like any other; with it off every thread takes connections
/// within a window, and INFO shows each thread's last window.
#[test]
fn io_threads_adaptive_is_a_setting_and_info_shows_the_threads() {
    let s = TestServer::start_with(&["--io-threads", "2"]);
    let mut c = s.client();
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "io-threads-adaptive"]);
    assert_eq!(v, ["io-threads-adaptive", "yes"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "io-threads-adaptive", "no"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while stat(&mut c, "io_threads_active") != 2 {
        assert!(
            Instant::now() < deadline,
            "not all threads active with the setting off"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let info = info(&mut c, "stats");
    let stats = info.values().next().expect("INFO stats");
    for field in [
        "io_threads_busy_pct",
        "io_threads_cpu_pct",
        "io_threads_wait_pct",
    ] {
        let v = &stats[field];
        assert_eq!(v.split(',').count(), 2, "{field}:{v}");
    }
    let e = err(&mut c, &["CONFIG", "SET", "io-threads-adaptive", "maybe"]);
    assert!(e.contains("io-threads-adaptive"), "{e}");
}
