//! Integration tests: a disk that cannot take writes gets Redis's MISCONF, never silence.
//!
//! Two ways in (`storage::health`): free space below `disk-free-min` (set above the machine's
//! free space here, so no disk has to be filled), and a write RocksDB fails (here the server
//! runs under a file size limit, `prlimit --fsize`, so its WAL meets EFBIG as it would meet
//! ENOSPC on a full disk). Either way every command gets a reply, writes and PING get MISCONF,
//! reads go on, and acknowledged writes survive a restart.

use crate::common::{err, q, Endpoint, TestServer};
use kvik_testkit::eventually;
use redis::Value;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_kvik-server");

fn persistence(con: &mut redis::Connection, field: &str) -> String {
    let text: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("INFO persistence has no {field}"))
}

#[test]
fn below_disk_free_min_writes_and_ping_get_misconf_and_reads_go_on() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "disk-free-min"])[1],
        "auto"
    );
    let _: () = q(&mut c, &["SET", "kept", "v"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "disk-free-min", "1000000gb"]);
    // The timer reads the free space every second.
    assert!(eventually(Duration::from_secs(5), || {
        redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query::<Value>(&mut c)
            .is_err()
    }));
    let e = err(&mut c, &["SET", "k", "v"]);
    assert!(
        e.starts_with("MISCONF Errors writing to the disk:") && e.contains("disk-free-min"),
        "{e}"
    );
    assert!(err(&mut c, &["PING"]).starts_with("MISCONF"));
    assert!(err(&mut c, &["DEL", "kept"]).starts_with("MISCONF"));
    let script = "return redis.call('set', KEYS[1], 'x')";
    let e = err(&mut c, &["EVAL", script, "1", "k"]);
    assert!(e.contains("MISCONF"), "{e}");
    // A transaction with a write is refused too (at queueing, as Redis does, or at EXEC).
    let _: () = q(&mut c, &["MULTI"]);
    let queued = redis::cmd("INCR").arg("n").query::<Value>(&mut c);
    let exec = redis::cmd("EXEC").query::<Value>(&mut c);
    assert!(queued.is_err() || exec.is_err(), "{queued:?} {exec:?}");
    // Reads are served.
    assert_eq!(q::<String>(&mut c, &["GET", "kept"]), "v");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "kept"]), 1);
    assert_eq!(persistence(&mut c, "aof_last_write_status"), "ok");
    assert!(persistence(&mut c, "kvik_write_refusal").contains("disk-free-min"));
    let refused: u64 = persistence(&mut c, "kvik_writes_refused").parse().unwrap();
    assert!(refused >= 5, "{refused}");
    // CONFIG SET is not a write: the limit can be lowered, and writes come back.
    let _: () = q(&mut c, &["CONFIG", "SET", "disk-free-min", "0"]);
    assert!(eventually(Duration::from_secs(5), || {
        redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query::<()>(&mut c)
            .is_ok()
    }));
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(persistence(&mut c, "kvik_write_refusal"), "none");
}

/// A wrapper that runs this build's server under a file size limit of `bytes`.
fn limited_server_bin(dir: &std::path::Path, bytes: u64) -> std::path::PathBuf {
    let path = dir.join("kvik-server-fsize");
    std::fs::write(
        &path,
        format!("#!/bin/sh\nexec prlimit --fsize={bytes} -- {BIN} \"$@\"\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_failed_wal_write_refuses_writes_keeps_reads_and_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let wrapper = limited_server_bin(tmp.path(), 4 << 20);
    // disk-free-min 0: the floor must not step in first; the WAL file meets the limit.
    let args = ["--disk-free-min", "0", "--maxmemory", "256mb"];
    let mut s = kvik_testkit::KvikServer::start_in(&wrapper, &data, &args);
    let mut c = s.client();
    let value = "x".repeat(1024);
    let mut acknowledged = Vec::new();
    let mut failure = None;
    // 4 MiB of WAL is about 4,000 such writes; every one gets a reply or a closed connection
    // (the harness's read timeout fails the test on silence).
    for i in 0..20_000 {
        let key = format!("k{i}");
        match redis::cmd("SET").arg(&key).arg(&value).query::<()>(&mut c) {
            Ok(()) => acknowledged.push(key),
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    let failure = failure.expect("a write past the file size limit fails");
    assert!(
        acknowledged.len() > 100,
        "{} before: {failure}",
        acknowledged.len()
    );
    // The client whose write failed may have been closed unacknowledged; a new one is served.
    let mut c = s.client();
    let e = err(&mut c, &["SET", "after", "v"]);
    assert!(e.starts_with("MISCONF Errors writing to the WAL:"), "{e}");
    assert!(err(&mut c, &["PING"]).starts_with("MISCONF"));
    assert_eq!(q::<String>(&mut c, &["GET", &acknowledged[0]]), value);
    assert_eq!(persistence(&mut c, "aof_last_write_status"), "err");
    // Still refused a while later (RocksDB does not take writes again by itself here), and the
    // server is alive.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(err(&mut c, &["SET", "after", "v"]).starts_with("MISCONF"));
    assert!(s.is_running());
    drop(c);
    s.kill9();
    // Restarted without the limit: every acknowledged write is there, and writes are taken.
    let s = TestServer::start_in(&data, &args);
    let mut c = s.client();
    for key in &acknowledged {
        let got: Option<String> = q(&mut c, &["GET", key]);
        assert_eq!(
            got.as_deref(),
            Some(value.as_str()),
            "{key} was acknowledged"
        );
    }
    let _: () = q(&mut c, &["SET", "after", "v"]);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}
