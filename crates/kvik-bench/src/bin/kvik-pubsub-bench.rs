//! PUBLISH fan-out benchmark: `subscribers` connections SUBSCRIBE to one channel, `publishers`
//! connections PUBLISH fixed-size messages to it (pipelined) for `seconds`, and the subscribers
//! count what they receive. Prints messages published and delivered (received by all
//! subscribers together) per second, as one `key=value` line for bench/pubsub.sh.
//!
//!   kvik-pubsub-bench <port> <subscribers> [publishers=1] [seconds=5] [payload=32] [pipeline=32]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHANNEL: &str = "bench";

fn request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn read_exact_len(s: &mut TcpStream, n: usize) {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).expect("subscribe confirmation");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, default: u64| -> u64 {
        args.get(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    if args.len() < 3 {
        eprintln!("usage: kvik-pubsub-bench <port> <subscribers> [publishers] [seconds] [payload] [pipeline]");
        std::process::exit(2);
    }
    let port = arg(1, 0) as u16;
    let subscribers = arg(2, 1) as usize;
    let publishers = arg(3, 1) as usize;
    let seconds = arg(4, 5);
    let payload = vec![b'x'; arg(5, 32) as usize];
    let pipeline = arg(6, 32) as usize;
    let message_len = format!(
        "*3\r\n$7\r\nmessage\r\n${}\r\n{CHANNEL}\r\n${}\r\n",
        CHANNEL.len(),
        payload.len()
    )
    .len()
        + payload.len()
        + 2;
    let confirm_len = format!(
        "*3\r\n$9\r\nsubscribe\r\n${}\r\n{CHANNEL}\r\n:1\r\n",
        CHANNEL.len()
    )
    .len();

    let stop = Arc::new(AtomicBool::new(false));
    let mut subs = Vec::new();
    for _ in 0..subscribers {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.write_all(&request(&[b"SUBSCRIBE", CHANNEL.as_bytes()]))
            .unwrap();
        read_exact_len(&mut s, confirm_len);
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let stop = stop.clone();
        subs.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        RECEIVED_BYTES.fetch_add(n as u64, Relaxed);
                    }
                    Err(_) if stop.load(Relaxed) => break,
                    Err(_) => {}
                }
            }
        }));
    }
    let published = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let mut pubs = Vec::new();
    for _ in 0..publishers {
        let (published, payload) = (published.clone(), payload.clone());
        pubs.push(std::thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            let one = request(&[b"PUBLISH", CHANNEL.as_bytes(), &payload]);
            let batch: Vec<u8> = one.repeat(pipeline);
            let mut buf = vec![0u8; 64 * 1024];
            while Instant::now() < deadline {
                s.write_all(&batch).unwrap();
                // One integer reply per PUBLISH: read until `pipeline` lines arrived.
                let mut lines = 0;
                while lines < pipeline {
                    let n = s.read(&mut buf).expect("publish replies");
                    lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
                }
                published.fetch_add(pipeline as u64, Relaxed);
            }
        }));
    }
    for p in pubs {
        p.join().unwrap();
    }
    let publish_elapsed = start.elapsed();
    // Let the subscribers drain what was published (bounded).
    let want = published.load(Relaxed) * subscribers as u64 * message_len as u64;
    let drain_deadline = Instant::now() + Duration::from_secs(10);
    while RECEIVED_BYTES.load(Relaxed) < want && Instant::now() < drain_deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let elapsed = start.elapsed();
    stop.store(true, Relaxed);
    for s in subs {
        let _ = s.join();
    }
    let delivered = RECEIVED_BYTES.load(Relaxed) / message_len as u64;
    println!(
        "subscribers={subscribers} publishers={publishers} published={} delivered={delivered} \
         published_per_sec={:.0} delivered_per_sec={:.0}",
        published.load(Relaxed),
        published.load(Relaxed) as f64 / publish_elapsed.as_secs_f64(),
        delivered as f64 / elapsed.as_secs_f64(),
    );
}

/// Bytes of messages received by all subscribers together (each message has the same size).
static RECEIVED_BYTES: AtomicU64 = AtomicU64::new(0);
