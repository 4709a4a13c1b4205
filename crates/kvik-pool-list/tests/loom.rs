//! Model-checked tests of the task list: loom runs every interleaving of the threads below
//! (bounded by its preemption limit) and checks no value is lost, duplicated or reordered
//! within a producer, and that no node is freed twice or leaked.
//!
//! Run them alone, in their own target directory (the cfg changes the whole build):
//!
//! ```text
//! LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=/root/.cache/kvik-loom-target \
//!     cargo test --release -p kvik-pool-list --test loom
//! ```
//!
//! The preemption bound keeps the search to about a second; without it the first model (four
//! pushes, each a CAS loop, against three takes) did not finish in minutes.
#![cfg(loom)]

use kvik_pool_list::TaskList;
use loom::sync::Arc;
use loom::thread;

/// Two producers push two values each while a consumer takes twice; a final take collects the
/// rest. Each value comes out exactly once, each producer's values in push order.
#[test]
fn two_producers_one_consumer() {
    loom::model(|| {
        let list = Arc::new(TaskList::new());
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let list = list.clone();
                thread::spawn(move || {
                    list.push((p, 0));
                    list.push((p, 1));
                })
            })
            .collect();
        let mut seen: Vec<(usize, usize)> = Vec::new();
        seen.extend(list.take_all());
        seen.extend(list.take_all());
        for t in producers {
            t.join().unwrap();
        }
        seen.extend(list.take_all());
        assert_eq!(seen.len(), 4);
        assert!(list.push((9, 9)).was_empty);
        assert!(!list.push((9, 10)).was_empty);
        assert_eq!(list.take_all().count(), 2);
        for p in 0..2 {
            let order: Vec<usize> = seen.iter().filter(|v| v.0 == p).map(|v| v.1).collect();
            assert_eq!(order, vec![0, 1]);
        }
        assert_eq!(list.len(), 0);
        assert!(list.is_empty());
    });
}

/// Two consumers race to take while a producer pushes: every value goes to exactly one of
/// them, and the length bound never underflows.
#[test]
fn two_consumers_one_producer() {
    loom::model(|| {
        let list = Arc::new(TaskList::new());
        let producer = {
            let list = list.clone();
            thread::spawn(move || {
                for i in 0..3 {
                    list.push(i);
                }
            })
        };
        let consumer = {
            let list = list.clone();
            thread::spawn(move || list.take_all().collect::<Vec<_>>())
        };
        let mut mine: Vec<i32> = list.take_all().collect();
        producer.join().unwrap();
        let theirs = consumer.join().unwrap();
        assert!(theirs.windows(2).all(|w| w[0] < w[1]));
        assert!(mine.windows(2).all(|w| w[0] < w[1]));
        mine.extend(theirs);
        mine.extend(list.take_all());
        mine.sort_unstable();
        assert_eq!(mine, vec![0, 1, 2]);
        assert_eq!(list.len(), 0);
    });
}
