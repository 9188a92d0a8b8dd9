//! Syncs the WAL for the batches that asked for the disk, on a thread of its
//! own, so that the writer commits the next batch while the disk works.
//!
//! With `durability = "normal"` a commit leaves the WAL's sync to the
//! checkpoint; a batch with a job that asked for the disk (a push, a
//! decision) is synced before its callers are answered. The writer used to
//! do that sync itself: each such batch held it for the disk's whole flush,
//! with the server's core idle, while the next requests waited to commit.
//! Here the writer hands committed batches over in commit order; this
//! thread syncs once for every batch handed over before the sync began,
//! then answers them, still in commit order. A batch that needs no sync
//! goes through here only while an earlier one waits, so that answers and
//! what they publish keep the order of the commits.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;

use super::writer::{Completion, Synced, Wake};

/// A committed batch, waiting to be answered.
pub(super) struct Committed {
    /// The commit's number ([`super::writer::Hooks::commits`]).
    pub number: u64,
    /// Its callers are answered only once it is on the disk.
    pub to_disk: bool,
    /// It queued outbox items: the outbox is told once it is answered, so
    /// that nothing is delivered before it is on the disk.
    pub queued: bool,
    pub completions: Vec<Completion>,
}

/// What the syncer works with: the WAL, how to sync it, and what it tells
/// once a sync is done.
pub(super) struct Told {
    pub wal: PathBuf,
    /// Puts the file at the path on the disk: [`super::checkpoint::sync_wal`].
    pub sync: fn(&std::path::Path) -> std::io::Result<()>,
    pub synced: Arc<Synced>,
    pub tell: Tell,
}

/// Who hears of a committed batch: the outbox, when the batch queued
/// items, and the batch's callers.
#[derive(Clone)]
pub(super) struct Tell {
    /// Notified after a commit that queued outbox items (see
    /// [`super::peers::queued_count`]).
    pub outbox_queued: Arc<tokio::sync::Notify>,
    /// The runtime the callers wait on, if the store was opened on one.
    /// A batch's callers are woken there by one task, in one go. Woken one
    /// by one from this thread or the writer's, each wake found the
    /// runtime's worker idle and woke it (a syscall), and where both share
    /// a core the worker took the core at once, answered that one caller
    /// and went idle again before the next wake: at 32 connections on one
    /// core that was a switch back and forth for every two requests.
    pub runtime: Option<tokio::runtime::Handle>,
}

impl Tell {
    /// Wakes a batch's callers: on the runtime when there is one and more
    /// than one caller, else here.
    fn wake(&self, wakes: Vec<Wake>) {
        match &self.runtime {
            Some(rt) if wakes.len() > 1 => {
                rt.spawn(async move { wake_all(wakes) });
            }
            _ => wake_all(wakes),
        }
    }
}

fn wake_all(wakes: Vec<Wake>) {
    for wake in wakes {
        wake();
    }
}

pub(super) struct Syncer {
    shared: Arc<Shared>,
    /// `None` when the thread could not start: batches are then synced
    /// and given back at once, for the writer to answer.
    thread: Option<thread::JoinHandle<()>>,
}

struct Shared {
    told: Told,
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    waiting: VecDeque<Committed>,
    /// Batches taken from `waiting` and not yet answered.
    busy: bool,
    closed: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // No code holding the lock can panic; a poisoned lock is still sound.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Syncer {
    /// Starts the thread; when it cannot be started, the writer's own
    /// thread syncs in [`Syncer::hand_over`].
    pub fn start(told: Told) -> Syncer {
        let shared = Arc::new(Shared {
            told,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let ours = shared.clone();
        let spawned = thread::Builder::new()
            .name("store-syncer".into())
            .spawn(move || run(&ours));
        let thread = spawned
            .inspect_err(|e| {
                tracing::error!("cannot start the WAL sync thread, the writer syncs: {e}");
            })
            .ok();
        Syncer { shared, thread }
    }

    /// Takes a committed batch to answer after a sync, or after the batches
    /// before it; gives it back when it needs no sync and none waits, for
    /// the writer to answer at once (synced first, if it asked for that,
    /// when there is no thread).
    pub fn hand_over(&self, batch: Committed) -> Option<Committed> {
        if self.thread.is_none() {
            if batch.to_disk {
                sync(&self.shared.told, batch.number);
            }
            return Some(batch);
        }
        let mut state = self.shared.state();
        if !batch.to_disk && !state.busy && state.waiting.is_empty() {
            return Some(batch);
        }
        state.waiting.push_back(batch);
        drop(state);
        self.shared.wake.notify_one();
        None
    }

    /// Answers every batch handed over, then stops the thread.
    pub fn finish(mut self) {
        self.shared.state().closed = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the WAL sync thread panicked");
        }
    }
}

fn run(shared: &Shared) {
    let told = &shared.told;
    loop {
        let mut state = shared.state();
        state.busy = false;
        while state.waiting.is_empty() {
            if state.closed {
                return;
            }
            state = shared
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        // Every batch here committed before the sync below begins, so that
        // one sync puts them all on the disk.
        let mut batches = std::mem::take(&mut state.waiting);
        state.busy = true;
        drop(state);
        // Those before the first that asks for the disk need not wait.
        let first_to_disk = batches.iter().position(|b| b.to_disk);
        for batch in batches.drain(..first_to_disk.unwrap_or(batches.len())) {
            answer(batch, &told.tell);
        }
        if let Some(newest) = batches.iter().map(|b| b.number).max() {
            sync(told, newest);
        }
        for batch in batches {
            answer(batch, &told.tell);
        }
    }
}

/// Syncs the WAL, and notes commits through `newest` as on the disk. A
/// failure is logged, not returned: the batches are committed and readable,
/// and the next checkpoint syncs the WAL again.
fn sync(told: &Told, newest: u64) {
    match (told.sync)(&told.wal) {
        Ok(()) => {
            told.synced.batches.fetch_add(1, Ordering::Relaxed);
            told.synced.through.fetch_max(newest, Ordering::Release);
        }
        Err(e) => tracing::error!(
            "cannot sync {} after a commit that asked for the disk: {e}",
            told.wal.display()
        ),
    }
}

/// Tells a committed batch's callers, and the outbox when it queued items.
/// Their after-commit steps run here, in commit order; then the callers
/// are woken (see [`Tell`]).
pub(super) fn answer(batch: Committed, tell: &Tell) {
    if batch.queued {
        tell.outbox_queued.notify_one();
    }
    let mut wakes = Vec::with_capacity(batch.completions.len());
    for complete in batch.completions {
        // What a caller runs after its commit must not stop the answers to
        // the others (on this thread, it would stop every later one).
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| complete(Ok(())))) {
            Ok(wake) => wakes.push(wake),
            Err(panic) => {
                let said = crate::unwind::said(&*panic);
                tracing::error!("a write's after-commit step panicked: {said}");
            }
        }
    }
    tell.wake(wakes);
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Syncs held until the test lets each one go: the test's only syncer
    /// uses it.
    static GATE: Mutex<Option<mpsc::Receiver<()>>> = Mutex::new(None);
    static BEGUN: Mutex<Option<mpsc::Sender<()>>> = Mutex::new(None);

    fn held_sync(_: &std::path::Path) -> std::io::Result<()> {
        if let Some(begun) = &*BEGUN.lock().unwrap() {
            begun.send(()).unwrap();
        }
        let gate = GATE.lock().unwrap();
        gate.as_ref().unwrap().recv().unwrap();
        Ok(())
    }

    fn no_runtime() -> Tell {
        Tell {
            outbox_queued: Arc::new(tokio::sync::Notify::new()),
            runtime: None,
        }
    }

    fn batch(number: u64, to_disk: bool, log: &mpsc::Sender<u64>) -> Committed {
        let log = log.clone();
        Committed {
            number,
            to_disk,
            queued: false,
            completions: vec![Box::new(move |r| {
                assert!(r.is_ok());
                log.send(number).unwrap();
                Box::new(|| {})
            })],
        }
    }

    #[test]
    fn batches_are_answered_after_their_sync_and_in_commit_order() {
        let (release, gate) = mpsc::channel();
        let (begun_tx, begun) = mpsc::channel();
        *GATE.lock().unwrap() = Some(gate);
        *BEGUN.lock().unwrap() = Some(begun_tx);
        let synced = Arc::new(Synced::default());
        let syncer = Syncer::start(Told {
            wal: PathBuf::from("unused"),
            sync: held_sync,
            synced: synced.clone(),
            tell: no_runtime(),
        });
        let (log, answered) = mpsc::channel();
        let wait = Duration::from_millis(200);

        // Nothing waits and no sync is asked for: the writer answers it.
        assert!(syncer.hand_over(batch(1, false, &log)).is_some());

        // Batch 2 asks for the disk; its sync begins and is held.
        assert!(syncer.hand_over(batch(2, true, &log)).is_none());
        begun.recv_timeout(Duration::from_secs(5)).unwrap();
        // Batch 3 needs no sync, but waits behind 2; batch 4 asks for the
        // disk too, and needs a sync of its own (its commit came after the
        // sync under way began).
        assert!(syncer.hand_over(batch(3, false, &log)).is_none());
        assert!(syncer.hand_over(batch(4, true, &log)).is_none());
        assert!(
            answered.recv_timeout(wait).is_err(),
            "answered before its sync"
        );
        assert_eq!(synced.through.load(Ordering::Acquire), 0);

        release.send(()).unwrap();
        assert_eq!(answered.recv_timeout(Duration::from_secs(5)), Ok(2));
        begun.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(
            answered.recv_timeout(wait),
            Ok(3),
            "a batch behind a sync is answered once the batches before it are"
        );
        assert_eq!(synced.through.load(Ordering::Acquire), 2);
        assert!(answered.recv_timeout(wait).is_err(), "4 waits for its sync");

        release.send(()).unwrap();
        assert_eq!(answered.recv_timeout(Duration::from_secs(5)), Ok(4));
        assert_eq!(synced.through.load(Ordering::Acquire), 4);
        assert_eq!(synced.batches.load(Ordering::Relaxed), 2);

        // One sync for every batch waiting when it begins.
        assert!(syncer.hand_over(batch(5, true, &log)).is_none());
        begun.recv_timeout(Duration::from_secs(5)).unwrap();
        for n in 6..9 {
            assert!(syncer.hand_over(batch(n, true, &log)).is_none());
        }
        release.send(()).unwrap();
        assert_eq!(answered.recv_timeout(Duration::from_secs(5)), Ok(5));
        begun.recv_timeout(Duration::from_secs(5)).unwrap();
        release.send(()).unwrap();
        let rest: Vec<u64> = (6..9)
            .map(|_| answered.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(rest, [6, 7, 8]);
        assert_eq!(synced.batches.load(Ordering::Relaxed), 4);
        assert_eq!(synced.through.load(Ordering::Acquire), 8);

        // Finishing answers what still waits. (The thread answered 8 just
        // before it stops being busy: until then batch 9 would wait too.)
        let since = std::time::Instant::now();
        while syncer.shared.state().busy {
            assert!(since.elapsed() < Duration::from_secs(5), "still busy");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(syncer.hand_over(batch(9, false, &log)).is_some());
        assert!(syncer.hand_over(batch(10, true, &log)).is_none());
        begun.recv_timeout(Duration::from_secs(5)).unwrap();
        release.send(()).unwrap();
        syncer.finish();
        assert_eq!(answered.try_recv(), Ok(10));
    }

    #[test]
    fn without_its_thread_a_batch_is_synced_and_given_back() {
        fn synced_at_once(_: &std::path::Path) -> std::io::Result<()> {
            Ok(())
        }
        let synced = Arc::new(Synced::default());
        let syncer = Syncer {
            shared: Arc::new(Shared {
                told: Told {
                    wal: PathBuf::from("unused"),
                    sync: synced_at_once,
                    synced: synced.clone(),
                    tell: no_runtime(),
                },
                state: Mutex::new(State::default()),
                wake: Condvar::new(),
            }),
            thread: None,
        };
        let (log, _answered) = mpsc::channel();
        assert!(syncer.hand_over(batch(1, false, &log)).is_some());
        assert_eq!(
            synced.batches.load(Ordering::Relaxed),
            0,
            "no sync asked for"
        );
        assert!(syncer.hand_over(batch(2, true, &log)).is_some());
        assert_eq!(synced.batches.load(Ordering::Relaxed), 1);
        assert_eq!(synced.through.load(Ordering::Acquire), 2);
        syncer.finish();
    }

    #[test]
    fn a_batch_s_callers_are_woken_by_one_task_after_every_after_commit_step() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let tell = Tell {
            runtime: Some(rt.handle().clone()),
            ..no_runtime()
        };
        let (step, steps) = mpsc::channel();
        let (woke, woken) = mpsc::channel();
        let batch_of = |numbers: std::ops::RangeInclusive<u64>| Committed {
            number: *numbers.start(),
            to_disk: false,
            queued: false,
            completions: numbers
                .map(|n| -> Completion {
                    let (step, woke) = (step.clone(), woke.clone());
                    Box::new(move |r| {
                        assert!(r.is_ok());
                        step.send(n).unwrap();
                        Box::new(move || woke.send(n).unwrap())
                    })
                })
                .collect(),
        };
        answer(batch_of(1..=3), &tell);
        // The after-commit steps ran here, in order; no caller is woken
        // until the runtime runs the task that wakes them.
        assert_eq!(steps.try_iter().collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(woken.try_recv(), Err(mpsc::TryRecvError::Empty));
        let mut got = Vec::new();
        rt.block_on(async {
            for _ in 0..100 {
                got.extend(woken.try_iter());
                if got.len() >= 3 {
                    break;
                }
                tokio::task::yield_now().await;
            }
        });
        assert_eq!(got, [1, 2, 3]);
        // A batch of one wakes its caller at once.
        answer(batch_of(4..=4), &tell);
        assert_eq!(steps.try_recv(), Ok(4));
        assert_eq!(woken.try_recv(), Ok(4));
    }

    #[test]
    fn a_panicking_completion_does_not_stop_the_others() {
        let (log, answered) = mpsc::channel();
        let mut b = batch(1, false, &log);
        b.completions.insert(0, Box::new(|_| panic!("a bug")));
        answer(b, &no_runtime());
        assert_eq!(answered.try_recv(), Ok(1));
    }
}
