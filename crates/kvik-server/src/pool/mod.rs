//! The worker pool: threads that run commands which need storage, so I/O threads never block
//! on RocksDB.
//!
//! The interface is one method, [`Pool::submit`]: an I/O thread hands over a whole run of one
//! connection's commands as a single job, so per-connection order holds without any lock. The job
//! itself posts its replies back to the owning I/O thread. [`classic::ClassicPool`] is the plain
//! mutex + condvar queue; the lock-free pool with the adaptive wait plugs in behind the same trait.

pub mod classic;

/// A unit of work: runs once, on some worker thread.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

pub trait Pool: Send + Sync {
    /// Queues `job`. Never drops it: a full pool makes the caller wait instead.
    fn submit(&self, job: Job);
    /// Runs every job already submitted, then stops and joins the workers.
    fn shutdown(&self);
}
