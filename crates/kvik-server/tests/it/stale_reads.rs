//! A harness for "a cached read is never stale": writers, one per key on their own
//! connections, against three readers on others. Each writer logs the state its next command
//! will leave before sending it and counts the commands acknowledged; each read must find a
//! state at or after the last write acknowledged before the read began, and at or after the
//! state its reader saw last. The cache modules' concurrent tests use it with their own
//! commands and reads.

use crate::common::*;
use redis::{Connection, Value};
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs `keys` writers and three readers against `server` for three seconds, then checks that
/// a last read of every key finds its last state; returns the reads made. `write(k, n, state)`
/// gives writer `k`'s `n`th command (from 1) and changes `state` as the command will;
/// `read(connection, k)` reads key `k`'s state.
pub fn writes_against_reads<S, W, R>(server: &TestServer, keys: usize, write: W, read: R) -> u64
where
    S: Clone + Default + PartialEq + Debug + Send + 'static,
    W: Fn(usize, u64, &mut S) -> Vec<String> + Send + Sync + 'static,
    R: Fn(&mut Connection, usize) -> S + Send + Sync + 'static,
{
    let (write, read) = (Arc::new(write), Arc::new(read));
    let logs: Arc<Vec<Mutex<Vec<S>>>> =
        Arc::new((0..keys).map(|_| Mutex::new(vec![S::default()])).collect());
    let done: Arc<Vec<AtomicUsize>> = Arc::new((0..keys).map(|_| AtomicUsize::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for k in 0..keys {
        let (logs, done, stop, write) = (logs.clone(), done.clone(), stop.clone(), write.clone());
        let mut c = server.client();
        writers.push(std::thread::spawn(move || {
            let mut state = S::default();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let cmd = write(k, n, &mut state);
                logs[k].lock().unwrap().push(state.clone());
                let _ = command(&cmd.iter().map(String::as_str).collect::<Vec<_>>())
                    .query::<Value>(&mut c);
                done[k].fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let mut readers = Vec::new();
    for r in 0..3 {
        let (logs, done, stop, read) = (logs.clone(), done.clone(), stop.clone(), read.clone());
        let mut c = server.client();
        readers.push(std::thread::spawn(move || {
            let mut seen = vec![0usize; keys];
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = (reads as usize + r) % keys;
                let floor = done[k].load(Ordering::SeqCst).max(seen[k]);
                let got = read(&mut c, k);
                let log = logs[k].lock().unwrap();
                let Some(i) = (floor..log.len()).find(|&i| log[i] == got) else {
                    let recent = &log[floor.saturating_sub(2)..];
                    panic!("key {k}: read {got:?}, not a state at or after #{floor}; states from there: {recent:?}");
                };
                seen[k] = i;
                reads += 1;
            }
            reads
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for t in writers {
        t.join().unwrap();
    }
    let reads: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(reads > 0);
    let mut c = server.client();
    for k in 0..keys {
        let want = logs[k].lock().unwrap().last().unwrap().clone();
        assert_eq!(read(&mut c, k), want, "key {k}: the last state");
    }
    reads
}
