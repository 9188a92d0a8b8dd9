//! Event streams for SendStreamingMessage and SubscribeToTask, independent
//! of the binding (which wraps each event for the wire).
//!
//! A stream begins with the Task (or the one Message), then carries the
//! task's committed events in order. A send stream closes when the task
//! settles (terminal or interrupted) or its run ends; a subscription closes
//! only when the task is terminal. Both end when the server shuts down.

use std::collections::VecDeque;

use futures::stream::{self, BoxStream, StreamExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::ops::StreamItem;
use crate::a2a::types::{SendMessageResponse, StreamResponse, Task};
use crate::engine::{Event, Started, Subscription};

struct Feed {
    pending: VecDeque<StreamResponse>,
    rx: Option<Subscription>,
    seq: i64,
    close_when_interrupted: bool,
    run: Option<JoinHandle<()>>,
    done: bool,
    shutdown: watch::Receiver<bool>,
}

/// The task with only its last `history` messages (all without a limit).
pub(crate) fn trim_history(mut t: Task, history: Option<i32>) -> Task {
    if let Some(n) = history {
        let n = n.max(0) as usize;
        let len = t.history.len();
        if len > n {
            t.history.drain(..len - n);
        }
    }
    t
}

/// The stream of a SendStreamingMessage call.
pub fn send_stream(
    started: Started,
    history: Option<i32>,
    shutdown: watch::Receiver<bool>,
) -> BoxStream<'static, StreamItem> {
    let Started {
        reply,
        seq,
        events,
        run,
        ..
    } = started;
    let (first, done) = match reply {
        SendMessageResponse::Message(m) => (StreamResponse::Message(m), true),
        // With no run started (a follow-up the backend just records), the
        // snapshot is all there is to say.
        SendMessageResponse::Task(t) => (
            StreamResponse::Task(trim_history(t, history)),
            run.is_none(),
        ),
    };
    feed(Feed {
        pending: VecDeque::from([first]),
        rx: events,
        seq,
        close_when_interrupted: true,
        run,
        done,
        shutdown,
    })
}

/// The stream of a SubscribeToTask call.
pub fn subscribe_stream(
    task: Task,
    seq: i64,
    rx: Subscription,
    shutdown: watch::Receiver<bool>,
) -> BoxStream<'static, StreamItem> {
    feed(Feed {
        pending: VecDeque::from([StreamResponse::Task(task)]),
        rx: Some(rx),
        seq,
        close_when_interrupted: false,
        run: None,
        done: false,
        shutdown,
    })
}

fn feed(f: Feed) -> BoxStream<'static, StreamItem> {
    stream::unfold(f, |mut f| async move {
        loop {
            if let Some(event) = f.pending.pop_front() {
                let last = f.done && f.pending.is_empty();
                return Some((StreamItem { event, last }, f));
            }
            if f.done || *f.shutdown.borrow() {
                return None;
            }
            let rx = f.rx.as_mut()?;
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) => f.accept(&ev),
                    // Too slow to keep up, or the channel is gone: end the
                    // stream; the client can subscribe again and get the task.
                    Err(_) => f.done = true,
                },
                _ = async {
                    match f.run.as_mut() {
                        Some(run) => { let _ = run.await; }
                        None => std::future::pending::<()>().await,
                    }
                } => {
                    f.run = None;
                    // The run has ended and published all its events.
                    while let Some(rx) = f.rx.as_mut() {
                        match rx.try_recv() {
                            Ok(ev) => f.accept(&ev),
                            Err(_) => break,
                        }
                    }
                    f.done = true;
                }
                _ = f.shutdown.changed() => f.done = true,
            }
        }
    })
    .boxed()
}

impl Feed {
    fn accept(&mut self, ev: &Event) {
        if ev.seq <= self.seq || self.done {
            return;
        }
        self.seq = ev.seq;
        self.pending.push_back(ev.body.clone());
        let status_change = matches!(ev.body, StreamResponse::StatusUpdate(_));
        if ev.state.is_terminal()
            || (self.close_when_interrupted && status_change && ev.state.is_interrupted())
        {
            self.done = true;
        }
    }
}
