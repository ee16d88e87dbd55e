//! The wall-time limit: one thread per process, however many sandboxes run, that ends each
//! sandbox when its deadline passes.
//!
//! Each armed sandbox gives the thread a deadline and a way to end it (on Linux a pidfd of
//! its init, which stays valid, and names no other process, after the sandbox is reaped:
//! a late kill reaches nothing else). The thread sleeps until the nearest deadline or the
//! next arming; a [`Timer`] [`Timer::disarm`]ed before its deadline (its sandbox has
//! ended) is removed then. Dropping a `Timer` does not disarm it: a host that drops a
//! `Child` without waiting leaves the sandbox running, and its deadline still holds. A fired timer says so ([`Timer::fired`]), which is how a run tells a wall-time
//! kill from any other `SIGKILL`.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How a sandbox is ended when its time is up. Called on the watchdog's thread, once.
pub(super) type Ender = Box<dyn FnOnce() + Send>;

const ARMED: u8 = 0;
const FIRED: u8 = 1;
const DISARMED: u8 = 2;

/// One sandbox's wall-time limit (still armed when dropped: see the module docs).
#[derive(Debug)]
pub(super) struct Timer {
    state: Arc<AtomicU8>,
    limit: Duration,
}

impl Timer {
    /// Whether the deadline passed and the sandbox was ended for it.
    pub(super) fn fired(&self) -> bool {
        self.state.load(Ordering::Acquire) == FIRED
    }

    /// The limit this timer enforces.
    pub(super) fn limit(&self) -> Duration {
        self.limit
    }

    /// Stops the timer (the sandbox has ended); a timer that fired stays fired.
    pub(super) fn disarm(&self) {
        let _ = self
            .state
            .compare_exchange(ARMED, DISARMED, Ordering::AcqRel, Ordering::Acquire);
        // Under the lock: the thread checks the states under it before it sleeps, so
        // this wake-up cannot fall between its check and its wait.
        let dog = watchdog();
        let _entries = lock(&dog.entries);
        dog.wake.notify_one();
    }
}

struct Entry {
    deadline: Instant,
    state: Arc<AtomicU8>,
    end: Ender,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// The nearest deadline is the greatest (`BinaryHeap` is a max-heap).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.deadline.cmp(&self.deadline)
    }
}

struct Watchdog {
    entries: Mutex<BinaryHeap<Entry>>,
    wake: Condvar,
}

fn watchdog() -> &'static Watchdog {
    static DOG: OnceLock<Watchdog> = OnceLock::new();
    DOG.get_or_init(|| Watchdog {
        entries: Mutex::new(BinaryHeap::new()),
        wake: Condvar::new(),
    })
}

/// Arms a timer that calls `end` `limit` after `start`, unless it is disarmed or dropped
/// first.
///
/// # Errors
///
/// The error of starting the watchdog's thread (the first time only).
pub(super) fn arm(start: Instant, limit: Duration, end: Ender) -> std::io::Result<Timer> {
    static THREAD: OnceLock<Result<(), String>> = OnceLock::new();
    THREAD
        .get_or_init(|| {
            std::thread::Builder::new()
                .name("stockade-walltime".into())
                .spawn(run)
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(std::io::Error::other)?;
    let state = Arc::new(AtomicU8::new(ARMED));
    let dog = watchdog();
    let deadline = start.checked_add(limit).unwrap_or_else(far_future);
    lock(&dog.entries).push(Entry {
        deadline,
        state: Arc::clone(&state),
        end,
    });
    dog.wake.notify_one();
    Ok(Timer { state, limit })
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 86400)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic in an `Ender` cannot leave the heap half-changed: pushes and pops are whole.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The watchdog's thread: ends what is due, drops what was disarmed, sleeps until the
/// nearest deadline.
fn run() {
    let dog = watchdog();
    let mut entries = lock(&dog.entries);
    loop {
        // Disarmed timers leave the heap lazily: at the top, or when the heap is rebuilt.
        if entries
            .iter()
            .any(|e| e.state.load(Ordering::Acquire) != ARMED)
        {
            entries.retain(|e| e.state.load(Ordering::Acquire) == ARMED);
        }
        let now = Instant::now();
        let due = entries.peek().map(|e| e.deadline);
        match due {
            Some(deadline) if deadline <= now => {
                let Some(entry) = entries.pop() else { continue };
                let won = entry
                    .state
                    .compare_exchange(ARMED, FIRED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                if won {
                    drop(entries);
                    (entry.end)();
                    entries = lock(&dog.entries);
                }
            }
            Some(deadline) => {
                entries = dog
                    .wake
                    .wait_timeout(entries, deadline - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            None => {
                entries = dog
                    .wake
                    .wait(entries)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn fires_once_at_its_deadline_and_not_when_disarmed() {
        let hits = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hits);
        let start = Instant::now();
        let t = arm(
            start,
            Duration::from_millis(150),
            Box::new(move || {
                h.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
        let h2 = Arc::clone(&hits);
        let early = arm(
            start,
            Duration::from_millis(100),
            Box::new(move || {
                h2.fetch_add(100, Ordering::SeqCst);
            }),
        )
        .unwrap();
        early.disarm();
        assert!(!t.fired());
        while !t.fired() {
            assert!(start.elapsed() < Duration::from_secs(5), "never fired");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(start.elapsed() >= Duration::from_millis(150));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        assert!(!early.fired());
        t.disarm();
        assert!(t.fired(), "a fired timer stays fired");
    }

    #[test]
    fn a_dropped_timer_still_fires() {
        let hits = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hits);
        drop(
            arm(
                Instant::now(),
                Duration::from_millis(30),
                Box::new(move || {
                    h.fetch_add(1, Ordering::SeqCst);
                }),
            )
            .unwrap(),
        );
        let start = Instant::now();
        while hits.load(Ordering::SeqCst) == 0 {
            assert!(start.elapsed() < Duration::from_secs(5), "never fired");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
