//! An I/O thread polls without sleeping for a while after a busy turn (`io-poll-spin-us`):
//! a client's next request found that way needs no wake-up. Counted in INFO stats
//! (`io_poll_spins`, `io_poll_spin_hits`); off at 0.

use crate::common::*;
use redis::{Commands, Connection};

fn set_spin(con: &mut Connection, us: &str) {
    let _: () = q(con, &["CONFIG", "SET", "io-poll-spin-us", us]);
}

fn requests(con: &mut Connection, n: usize) {
    for i in 0..n {
        let _: () = con.set(format!("k{i}"), i).unwrap();
        let v: usize = con.get(format!("k{i}")).unwrap();
        assert_eq!(v, i);
    }
}

#[test]
fn busy_turns_are_followed_by_polls_that_find_the_next_request() {
    let s = TestServer::start();
    let mut c = s.client();
    let spin: Vec<String> = q(&mut c, &["CONFIG", "GET", "io-poll-spin-us"]);
    let spin = &spin[1];
    assert_eq!(spin, "50", "the default");
    // 10 ms: the next request of a client that answers at once arrives well within it.
    set_spin(&mut c, "10000");
    let (spins, hits) = (
        stat(&mut c, "io_poll_spins"),
        stat(&mut c, "io_poll_spin_hits"),
    );
    requests(&mut c, 100);
    let (spins1, hits1) = (
        stat(&mut c, "io_poll_spins"),
        stat(&mut c, "io_poll_spin_hits"),
    );
    assert!(
        spins1 - spins >= 100,
        "{} spins for 200 requests",
        spins1 - spins
    );
    assert!(
        hits1 - hits >= 100,
        "only {} of 200 requests found by a spinning poll",
        hits1 - hits
    );
}

#[test]
fn no_spinning_at_zero() {
    let s = TestServer::start_with(&["--io-poll-spin-us", "0"]);
    let mut c = s.client();
    requests(&mut c, 50);
    assert_eq!(stat(&mut c, "io_poll_spins"), 0);
    assert_eq!(stat(&mut c, "io_poll_spin_hits"), 0);
}
