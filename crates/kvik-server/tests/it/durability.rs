//! Integration tests: durability across restarts, SIGTERM and kill -9.
//!
//! The rule under test: a write the client saw acknowledged is on disk. kvik writes the RocksDB
//! WAL before it replies, so a crash of the process (kill -9) loses nothing acknowledged under
//! any `appendfsync`; `always` also survives a machine crash, which a test cannot simulate.

use crate::common::{Endpoint, TestServer};
use redis::Commands;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn data_survives_clean_restart() {
    let mut s = TestServer::start();
    let mut c = s.client();
    for i in 0..200 {
        let _: () = c.set(format!("k{i}"), format!("v{i}")).unwrap();
    }
    let _: () = redis::cmd("SELECT").arg(5).query(&mut c).unwrap();
    let _: () = c.set("in5", "five").unwrap();
    let _: i64 = c.incr("n", 42).unwrap();
    drop(c);
    s.restart();
    let mut c = s.client();
    for i in 0..200 {
        let v: String = c.get(format!("k{i}")).unwrap();
        assert_eq!(v, format!("v{i}"));
    }
    let none: Option<String> = c.get("in5").unwrap();
    assert_eq!(none, None);
    let _: () = redis::cmd("SELECT").arg(5).query(&mut c).unwrap();
    let v: String = c.get("in5").unwrap();
    assert_eq!(v, "five");
    let n: i64 = c.get("n").unwrap();
    assert_eq!(n, 42);
}

#[test]
fn sigterm_finishes_in_flight_commands_and_exits_zero() {
    let mut s = TestServer::start();
    // Idle clients are closed at shutdown.
    let mut idle: Vec<_> = (0..3).map(|_| s.raw()).collect();
    for c in &mut idle {
        c.write_all(b"PING\r\n").unwrap();
        let mut pong = [0u8; 7];
        c.read_exact(&mut pong).unwrap();
        assert_eq!(&pong, b"+PONG\r\n");
    }
    // A long pipeline is in flight when SIGTERM arrives.
    let mut raw = s.raw();
    let n = 20_000;
    let mut buf = Vec::new();
    for i in 0..n {
        let (k, v) = (format!("t{i}"), format!("value{i}"));
        buf.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
    }
    let mut w = raw.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&buf); // the server may close before reading it all
    });
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = raw.read_to_end(&mut out); // until the server closes
        out
    });
    std::thread::sleep(Duration::from_millis(20));
    let status = s.terminate();
    assert!(status.success(), "exit status {status}");
    let out = reader.join().unwrap();
    writer.join().unwrap();
    for mut c in idle {
        let mut rest = Vec::new();
        if let Err(e) = c.read_to_end(&mut rest) {
            // EOF or reset, not the harness's read timeout.
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
        }
        assert_eq!(rest, b"");
    }
    // Replies are whole +OKs (a cut may only fall after the last complete one).
    let acked = out.len() / 5;
    assert!(
        out.chunks(5).take(acked).all(|r| r == b"+OK\r\n"),
        "unexpected reply bytes"
    );
    assert!(acked <= n);
    eprintln!("{acked} of {n} SETs acknowledged before the shutdown");

    s.restart();
    let mut c = s.client();
    for i in 0..acked {
        let v: Option<String> = c.get(format!("t{i}")).unwrap();
        assert_eq!(v, Some(format!("value{i}")), "acknowledged t{i} lost");
    }
    // Commands run in order: whatever ran after the acknowledged ones is a contiguous prefix.
    let mut present = acked;
    while present < n {
        let v: Option<String> = c.get(format!("t{present}")).unwrap();
        if v.is_none() {
            break;
        }
        present += 1;
    }
    for i in present..n {
        let v: Option<String> = c.get(format!("t{i}")).unwrap();
        assert_eq!(v, None, "t{i} ran after t{present} did not");
    }
}

/// Writes until the server dies, recording every acknowledged write, kills the server with
/// SIGKILL mid-stream, restarts it and checks that every acknowledged write is there.
fn kill9_loses_nothing_acknowledged(args: &[&str]) {
    let mut s = TestServer::start_with(args);
    let mut c = s.client();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut acked_keys = 0u64;
            let mut acked_counter = 0i64;
            while !stop.load(Ordering::SeqCst) {
                let i = acked_keys;
                let r: redis::RedisResult<()> = c.set(format!("k{i}"), format!("v{i}"));
                if r.is_err() {
                    break;
                }
                acked_keys += 1;
                match c.incr::<_, _, i64>("counter", 1) {
                    Ok(v) => acked_counter = v,
                    Err(_) => break,
                }
            }
            (acked_keys, acked_counter)
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    s.kill9();
    stop.store(true, Ordering::SeqCst);
    let (acked_keys, acked_counter) = writer.join().unwrap();
    assert!(acked_keys > 0, "no write was acknowledged before the kill");

    s.restart();
    let mut c = s.client();
    for i in 0..acked_keys {
        let v: Option<String> = c.get(format!("k{i}")).unwrap();
        assert_eq!(v, Some(format!("v{i}")), "acknowledged k{i} lost");
    }
    let counter: i64 = c.get("counter").unwrap();
    assert!(
        counter >= acked_counter,
        "counter {counter} below the acknowledged {acked_counter}"
    );
    // At most the one write in flight at the kill may have landed without an acknowledgement.
    assert!(counter <= acked_counter + 1);
}

#[test]
fn kill9_with_appendfsync_always_loses_nothing_acknowledged() {
    kill9_loses_nothing_acknowledged(&["--appendfsync", "always"]);
}

#[test]
fn kill9_with_appendfsync_everysec_loses_nothing_acknowledged() {
    kill9_loses_nothing_acknowledged(&[]);
}

/// Polls `cond` every 10 ms for up to 10 s.
fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..1000 {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// A script killed (kill -9) half-way leaves nothing after the restart, although another
/// client's acknowledged write made the WAL durable while the script ran: the script's writes
/// are one RocksDB batch, written when it ends (before, each `redis.call` was its own, and the
/// other client's group commit put `half` on disk).
#[test]
fn kill9_inside_a_script_leaves_none_of_its_writes() {
    let mut s = TestServer::start();
    let mut c = s.client();
    let mut probe = s.client();
    let script = "redis.call('set', KEYS[1], 'x') \
                  local t = redis.call('time') local until = t[1] + 20 \
                  while tonumber(redis.call('time')[1]) < until do end \
                  redis.call('set', KEYS[2], 'y') return 1";
    let runner = std::thread::spawn(move || {
        let _ = redis::cmd("EVAL")
            .arg(script)
            .arg(2)
            .arg("half")
            .arg("whole")
            .query::<redis::Value>(&mut c);
    });
    // The script runs once FUNCTION STATS shows it (its first write is then buffered).
    assert!(wait_until(|| {
        let stats: redis::Value = redis::cmd("FUNCTION")
            .arg("STATS")
            .query(&mut probe)
            .unwrap();
        !format!("{stats:?}").contains("Nil")
    }));
    crash_during(&mut s, &mut probe, runner, &["half", "whole"]);
}

/// Another client's write, acknowledged while `runner`'s transaction is half-way (the WAL is
/// then durable up to it), then kill -9 and a restart: that write is there, none of `keys` is.
fn crash_during(
    s: &mut TestServer,
    probe: &mut redis::Connection,
    runner: std::thread::JoinHandle<()>,
    keys: &[&str],
) {
    let _: () = probe.set("other", "1").unwrap();
    s.kill9();
    runner.join().unwrap();
    s.restart();
    let mut c = s.client();
    let other: Option<String> = c.get("other").unwrap();
    assert_eq!(other.as_deref(), Some("1"));
    for key in keys {
        let v: Option<String> = c.get(*key).unwrap();
        assert_eq!(v, None, "{key}: half of a transaction survived a crash");
    }
}

/// The same for EXEC: MULTI SET, DEBUG SLEEP, SET, EXEC killed during the sleep leaves neither
/// SET, though another client's write was acknowledged meanwhile.
#[test]
fn kill9_inside_exec_leaves_none_of_its_writes() {
    let mut s = TestServer::start_with(&["--enable-debug-command", "yes"]);
    let mut c = s.client();
    let mut probe = s.client();
    let runner = std::thread::spawn(move || {
        let _ = redis::pipe()
            .atomic()
            .set("first", "1")
            .cmd("DEBUG")
            .arg("SLEEP")
            .arg(20)
            .set("second", "2")
            .query::<redis::Value>(&mut c);
    });
    // EXEC ran its first SET once commandstats counts it (queued commands count when run).
    assert!(wait_until(|| {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut probe)
            .unwrap();
        stats.contains("cmdstat_set:")
    }));
    crash_during(&mut s, &mut probe, runner, &["first", "second"]);
}
