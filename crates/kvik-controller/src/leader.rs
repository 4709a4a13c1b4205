//! Leader election on an etcd lease: at most one controller acts at a time.
//!
//! A candidate grants itself a lease of `ttl` and, in one transaction, creates the leader key
//! attached to it if the key is absent. The winner renews the lease from a thread every ttl/3;
//! when etcd stops answering, or says the lease is gone, the leader key disappears with the
//! lease and another candidate can win. The leader itself stops acting before that: it only
//! counts as leader until (send time of the last successful renewal + ttl - margin), so it
//! steps down within the TTL even if it never hears from etcd again. Its writes to the record
//! also compare the leader key's create revision, so even a leader that acted late could not
//! change the record.

use crate::etcd::{Compare, Etcd, Op};
use crate::record::Writer;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Shared between the leader and its renewal thread.
struct Lease {
    /// Leadership holds until this instant (pessimistic: renewal send time + TTL - margin).
    valid_until: Mutex<Instant>,
    /// Leadership is over for good: etcd said the lease is gone, or the loop stalled.
    lost: AtomicBool,
    /// When the controller loop last finished a tick ([`Leadership::progress`]): a loop stuck
    /// longer than the TTL stops the renewals, so a wedged leader hands over instead of holding
    /// the lease while doing nothing.
    progress: Mutex<Instant>,
    stop: AtomicBool,
}

/// Held while this controller leads; dropping it resigns (revokes the lease).
pub struct Leadership {
    etcd: Etcd,
    lease_id: i64,
    writer: Writer,
    shared: Arc<Lease>,
    renewer: Option<JoinHandle<()>>,
}

/// What a campaign found.
pub enum Campaign {
    Won(Leadership),
    /// Another controller leads (its id as stored in the leader key).
    Lost {
        leader: String,
    },
}

/// The safety margin kept before the lease's end (clock rates, the time a push takes).
fn margin(ttl: Duration) -> Duration {
    (ttl / 5).max(Duration::from_millis(200))
}

/// Tries once to become leader under `leader_key` as `me`.
pub fn campaign(
    etcd: &Etcd,
    leader_key: &str,
    me: &str,
    ttl: Duration,
) -> Result<Campaign, String> {
    let granted_at = Instant::now();
    let lease_id = etcd.lease_grant(ttl)?;
    let put = Op::Put {
        key: leader_key.to_string(),
        value: me.as_bytes().to_vec(),
        lease: lease_id,
    };
    let txn = etcd.txn(
        &[Compare::CreateRevision(leader_key.to_string(), 0)],
        &[put],
        &[Op::Get(leader_key.to_string())],
    );
    let txn = match txn {
        Ok(t) => t,
        Err(e) => {
            let _ = etcd.lease_revoke(lease_id);
            return Err(e);
        }
    };
    if !txn.succeeded {
        let _ = etcd.lease_revoke(lease_id);
        let leader = txn
            .reads
            .first()
            .and_then(Option::as_ref)
            .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
            .unwrap_or_else(|| "(gone just now)".to_string());
        return Ok(Campaign::Lost { leader });
    }
    let shared = Arc::new(Lease {
        valid_until: Mutex::new(granted_at + ttl.saturating_sub(margin(ttl))),
        lost: AtomicBool::new(false),
        progress: Mutex::new(Instant::now()),
        stop: AtomicBool::new(false),
    });
    let renewer = {
        let (etcd, shared) = (etcd.clone(), shared.clone());
        std::thread::Builder::new()
            .name("lease-renewal".into())
            .spawn(move || renew(&etcd, lease_id, ttl, &shared))
            .map_err(|e| format!("cannot start the lease renewal thread: {e}"))?
    };
    Ok(Campaign::Won(Leadership {
        etcd: etcd.clone(),
        lease_id,
        writer: Writer {
            leader_key: leader_key.to_string(),
            // The put created the key at the transaction's revision.
            revision: txn.revision,
        },
        shared,
        renewer: Some(renewer),
    }))
}

/// Renews the lease every ttl/3 until stopped or the lease is gone.
fn renew(etcd: &Etcd, lease_id: i64, ttl: Duration, shared: &Lease) {
    let every = ttl / 3;
    while !shared.stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let idle = sent.saturating_duration_since(*shared.progress.lock().unwrap());
        if idle > ttl {
            tracing::warn!(
                lease_id,
                "the controller loop made no progress for {} ms: no longer renewing the \
                 leader lease (another controller takes over)",
                idle.as_millis()
            );
            shared.lost.store(true, Ordering::Relaxed);
            return;
        }
        match etcd.lease_keepalive(lease_id) {
            Ok(left) if left > 0 => {
                let granted = Duration::from_secs(left as u64).min(ttl);
                *shared.valid_until.lock().unwrap() = sent + granted.saturating_sub(margin(ttl));
            }
            Ok(_) => {
                tracing::warn!(
                    lease_id,
                    "etcd says the leader lease is gone: stepping down"
                );
                shared.lost.store(true, Ordering::Relaxed);
                return;
            }
            Err(e) => tracing::warn!(
                lease_id,
                "cannot renew the leader lease ({e}); leadership ends when it expires"
            ),
        }
        let wake = sent + every;
        while Instant::now() < wake && !shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Leadership {
    /// True while this controller may act (checked before every decision and push).
    pub fn is_valid(&self) -> bool {
        !self.shared.lost.load(Ordering::Relaxed)
            && Instant::now() < *self.shared.valid_until.lock().unwrap()
    }

    /// Called by the controller loop after each tick (see `Lease::progress`).
    pub fn progress(&self) {
        *self.shared.progress.lock().unwrap() = Instant::now();
    }

    /// The proof the record's transactions compare.
    pub fn writer(&self) -> &Writer {
        &self.writer
    }

    pub fn lease_id(&self) -> i64 {
        self.lease_id
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
        // Resign: the leader key goes with the lease, so a standby need not wait for the TTL.
        let _ = self.etcd.lease_revoke(self.lease_id);
    }
}
