//! `min-replicas-to-write` / `min-replicas-max-lag` with real processes: a primary refuses
//! writes (and EXEC of a transaction with writes, and scripts' writes) with Redis's NOREPLICAS
//! while fewer replicas than required acknowledged within the lag; reads always run.

use crate::common::{err, q, TestServer};
use crate::replication::{field, start_replica_of, CONVERGE};
use kvik_testkit::{connect, eventually};
use redis::Connection;

const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Whether `SET` is accepted now (panics on an error other than NOREPLICAS).
fn set_accepted(con: &mut Connection) -> bool {
    match redis::cmd("SET").arg("k").arg("v").query::<()>(con) {
        Ok(()) => true,
        Err(e) if e.code() == Some("NOREPLICAS") => false,
        Err(e) => panic!("SET: {e}"),
    }
}

fn signal(server: &TestServer, sig: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child process this test started.
    assert_eq!(unsafe { libc::kill(server.pid() as libc::pid_t, sig) }, 0);
}

#[test]
fn writes_wait_for_enough_good_replicas_and_reads_never_do() {
    let primary = TestServer::start_with(&[
        "--min-replicas-to-write",
        "1",
        "--min-replicas-max-lag",
        "1",
    ]);
    let mut p = connect(primary.port);

    // No replica: writes refused, reads served.
    assert_eq!(err(&mut p, &["SET", "k", "v"]), NOREPLICAS);
    assert_eq!(err(&mut p, &["DEL", "k"]), NOREPLICAS);
    let none: Option<String> = q(&mut p, &["GET", "k"]);
    assert_eq!(none, None);
    assert_eq!(field(&mut p, "min_slaves_good_slaves"), "0");
    // In MULTI the write is refused when queued, and EXEC aborts.
    let _: () = q(&mut p, &["MULTI"]);
    assert_eq!(err(&mut p, &["SET", "k", "v"]), NOREPLICAS);
    let _: () = q(&mut p, &["GET", "k"]);
    assert_eq!(
        err(&mut p, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    // Scripts: a write inside an unflagged script, a flagged script that may write.
    let in_script = err(&mut p, &["EVAL", "return redis.call('set','k','v')", "0"]);
    assert!(in_script.starts_with(NOREPLICAS), "{in_script}");
    assert_eq!(err(&mut p, &["EVAL", "#!lua\nreturn 1", "0"]), NOREPLICAS);
    let ro: i64 = q(&mut p, &["EVAL", "#!lua flags=no-writes\nreturn 1", "0"]);
    assert_eq!(ro, 1);

    // An attached, acknowledging replica lets writes through.
    let replica = start_replica_of(&primary, &[]);
    assert!(eventually(CONVERGE, || set_accepted(&mut p)));
    assert_eq!(field(&mut p, "min_slaves_good_slaves"), "1");

    // A transaction queued while writes were allowed aborts at EXEC once they are not.
    let _: () = q(&mut p, &["MULTI"]);
    let _: () = q(&mut p, &["SET", "k", "w"]);
    let mut admin = connect(primary.port);
    let _: () = q(&mut admin, &["CONFIG", "SET", "min-slaves-to-write", "2"]);
    assert_eq!(
        err(&mut p, &["EXEC"]),
        format!("EXECABORT Transaction discarded because of: {NOREPLICAS}")
    );
    let _: () = q(&mut admin, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    assert!(set_accepted(&mut p));

    // A replica that stops acknowledging (stopped, its link still open) stops counting once
    // min-replicas-max-lag passed; it counts again when it resumes.
    signal(&replica, libc::SIGSTOP);
    assert!(eventually(CONVERGE, || !set_accepted(&mut p)));
    assert_eq!(field(&mut p, "min_slaves_good_slaves"), "0");
    let v: String = q(&mut p, &["GET", "k"]);
    assert_eq!(v, "v");
    signal(&replica, libc::SIGCONT);
    assert!(eventually(CONVERGE, || set_accepted(&mut p)));

    // A replica gone: refused again; with max-lag 0 the check is off, as in Redis.
    let mut replica = replica;
    replica.kill9();
    assert!(eventually(CONVERGE, || !set_accepted(&mut p)));
    let _: () = q(&mut admin, &["CONFIG", "SET", "min-replicas-max-lag", "0"]);
    assert!(set_accepted(&mut p));
    assert_eq!(field(&mut p, "min_slaves_good_slaves"), "");
}
