//! Integration tests: a disk that cannot take writes gets Redis's MISCONF, never silence.
//!
//! Two ways in (`storage::health`): free space below `disk-free-min` (set above the machine's
//! free space here, so no disk has to be filled), and a write RocksDB fails (here the server
//! runs under a file size limit, `prlimit --fsize`, so its WAL meets EFBIG as it would meet
//! ENOSPC on a full disk). Either way every command gets a reply, writes and PING get MISCONF,
//! reads go on, and acknowledged writes survive a restart. And a disk that cannot take writes
//! yet (a write stall) holds the writers only.

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

/// A write stall (memtables full, their flush held to 16 KB/s by `compact-rate-limit`) holds
/// the writers, not the server: a new client connects, identifies itself and reads INFO, and
/// PING and a cached GET are still answered, from the I/O thread.
#[test]
fn a_write_stall_holds_writers_while_ping_and_cached_reads_are_answered() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let args = ["--maxmemory", "64mb", "--compact-rate-limit", "16kb"];
    let s = TestServer::start_with(&args);
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "kept", "v"]);
    assert_eq!(q::<String>(&mut c, &["GET", "kept"]), "v");
    // 20 MB of SETs, far past the 64 MB budget's memtables, from more pipelining writers
    // than the pool has workers, so that every worker waits in the stall.
    let (writers, each): (u64, u64) = (16, 1_250);
    let total = writers * each;
    let replies = Arc::new(AtomicU64::new(0));
    let value = "x".repeat(1024);
    for w in 0..writers {
        let mut writer = s.raw();
        writer.set_read_timeout(None).unwrap();
        let mut reader = writer.try_clone().unwrap();
        let counted = replies.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let lines = buf[..n].iter().filter(|&&b| b == b'\n').count();
                counted.fetch_add(lines as u64, Ordering::Relaxed);
            }
        });
        let value = value.clone();
        std::thread::spawn(move || {
            for i in 0..each {
                let cmd = crate::common::resp_str(&["SET", &format!("w{w}:{i}"), &value]);
                if writer.write_all(&cmd).is_err() {
                    break;
                }
            }
        });
    }
    // Stalled: no reply for a second while writes are outstanding.
    let mut last = 0;
    let mut still = 0;
    let began = std::time::Instant::now();
    while still < 10 {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "the writes never stalled"
        );
        std::thread::sleep(Duration::from_millis(100));
        let now = replies.load(Ordering::Relaxed);
        still = if now == last && now < total {
            still + 1
        } else {
            0
        };
        last = now;
    }
    // A new connection, as a client library and a monitoring agent make it (the redis crate
    // sends CLIENT SETINFO on connect): every connection and introspection command is answered
    // on the I/O thread. The harness's sockets time out after 20 s.
    let mut agent = s.client();
    let _: () = q(&mut agent, &["CLIENT", "SETNAME", "agent"]);
    assert_eq!(q::<String>(&mut agent, &["CLIENT", "GETNAME"]), "agent");
    assert!(q::<String>(&mut agent, &["CLIENT", "LIST"]).contains("name=agent"));
    assert!(q::<String>(&mut agent, &["CLIENT", "INFO"]).contains("name=agent"));
    assert!(q::<i64>(&mut agent, &["CLIENT", "ID"]) > 0);
    assert!(
        persistence(&mut agent, "kvik_write_stalls")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert!(q::<String>(&mut agent, &["INFO"]).contains("used_memory:"));
    let maxmemory: Vec<String> = q(&mut agent, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(maxmemory, ["maxmemory", "67108864"]);
    assert!(q::<i64>(&mut agent, &["DBSIZE"]) >= 1);
    assert_eq!(q::<Vec<String>>(&mut agent, &["TIME"]).len(), 2);
    assert!(q::<i64>(&mut agent, &["COMMAND", "COUNT"]) > 200);
    let _: () = q(&mut agent, &["SELECT", "1"]);
    assert_eq!(q::<i64>(&mut agent, &["DBSIZE"]), 0);
    let mut fresh = s.raw();
    let hello = crate::common::resp_str(&["HELLO", "3", "SETNAME", "resp3"]);
    let (got, _) = crate::common::roundtrip_raw(&mut fresh, &hello, 4);
    assert!(got.starts_with(b"%7\r\n"), "HELLO 3: {got:?}");
    let mut fresh = s.raw();
    let ask = |conn: &mut std::net::TcpStream, cmd: &[&str], want: &[u8]| {
        let request = crate::common::resp_str(cmd);
        let (got, _) = crate::common::roundtrip_raw(conn, &request, want.len());
        assert_eq!(got, want, "{cmd:?}");
    };
    ask(&mut fresh, &["PING"], b"+PONG\r\n");
    ask(&mut fresh, &["ECHO", "hi"], b"$2\r\nhi\r\n");
    ask(&mut fresh, &["GET", "kept"], b"$1\r\nv\r\n");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert!(
        replies.load(Ordering::Relaxed) < total,
        "the stall ended meanwhile"
    );
}
