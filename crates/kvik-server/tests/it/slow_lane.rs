//! The slow lane (`slow-lane-threads`): commands that have been taking long run on threads of
//! their own, so as many of them as there are workers cannot hold every worker from the quick
//! commands. Checked by the order replies arrive in, never by how long they took.

use crate::common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// With every command sent to a worker (`rtc-read no`, `rtc-write no`) and two workers: once
/// DEBUG SLEEP has run long, three clients' `DEBUG SLEEP 1` queue on the one lane thread, and
/// another client's SET and GET, run by a worker, answer while all three still sleep. Without
/// the lane the sleepers hold both workers, and the first of them answers before the GET does.
#[test]
fn quick_commands_answer_while_slow_ones_hold_the_slow_lane() {
    for lane in [true, false] {
        let s = TestServer::start_with(&[
            "--enable-debug-command",
            "yes",
            "--rtc-read",
            "no",
            "--rtc-write",
            "no",
            "--workers",
            "2",
            "--slow-lane-threads",
            if lane { "1" } else { "0" },
            "--slow-lane-threshold-us",
            "20000",
        ]);
        let mut c = s.client();
        // One long call marks DEBUG SLEEP slow (a quarter of 100 ms is past 20 ms).
        let _: () = q(&mut c, &["DEBUG", "SLEEP", "0.1"]);
        let slow: String = info(&mut c, "stats")["Stats"]["kvik_slow_lane_commands"].clone();
        assert_eq!(slow, "debug");
        let sleepers: Vec<TcpStream> = (0..3)
            .map(|_| {
                let mut t = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
                t.write_all(&resp_str(&["DEBUG", "SLEEP", "1"])).unwrap();
                t
            })
            .collect();
        // Let the sleepers reach their threads: all three sent to the lane (one runs, two
        // queue behind it), or both workers running one each.
        assert!(
            eventually(Duration::from_secs(10), || if lane {
                stat(&mut c, "kvik_slow_lane_jobs") >= 3
            } else {
                let list: String = q(&mut c, &["CLIENT", "LIST"]);
                list.matches("cmd=debug").count() >= 2
            }),
            "the sleepers did not reach their threads (lane: {lane})"
        );
        let _: () = q(&mut c, &["SET", "k", "v"]);
        let v: String = q(&mut c, &["GET", "k"]);
        assert_eq!(v, "v");
        // A sleeper that answered has its reply waiting (it is read whole below).
        let answered = sleepers
            .iter()
            .filter(|t| {
                t.set_nonblocking(true).unwrap();
                let mut buf = [0u8; 1];
                let n = t.peek(&mut buf).unwrap_or(0);
                t.set_nonblocking(false).unwrap();
                n > 0
            })
            .count();
        if lane {
            assert_eq!(answered, 0, "a sleeper answered before the GET");
        } else {
            assert!(
                answered > 0,
                "no sleeper answered before the GET, though they held both workers"
            );
            assert_eq!(stat(&mut c, "kvik_slow_lane_threads"), 0);
        }
        for mut t in sleepers {
            t.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut buf = [0u8; 5];
            t.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"+OK\r\n");
        }
    }
}
