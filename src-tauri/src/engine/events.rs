//! The in-process event bus: every committed change to a task is published
//! here once, in commit order. Streams, and later the UI, the notifier and the
//! push dispatcher, subscribe; nothing polls the database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::a2a::types::{StreamResponse, TaskState};

/// Events a slow subscriber may fall behind by before it is cut off.
const TASK_CHANNEL_CAPACITY: usize = 1024;
const ALL_CHANNEL_CAPACITY: usize = 8192;

/// One committed change to a task.
#[derive(Debug, Clone)]
pub struct Event {
    pub task_id: String,
    pub agent_id: String,
    pub owner: String,
    /// Position in the task's event log (1, 2, …).
    pub seq: i64,
    /// The task's state after this event.
    pub state: TaskState,
    pub body: StreamResponse,
}

type TaskChannels = Arc<Mutex<HashMap<String, broadcast::Sender<Arc<Event>>>>>;

/// Fan-out of events, per task and to everyone.
pub struct Bus {
    tasks: TaskChannels,
    all: broadcast::Sender<Arc<Event>>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus {
            tasks: Arc::default(),
            all: broadcast::channel(ALL_CHANNEL_CAPACITY).0,
        }
    }
}

/// A subscription to one task's events. Dropping the last subscription of a
/// task frees its channel, so parked tasks nobody watches cost nothing.
pub struct Subscription {
    rx: broadcast::Receiver<Arc<Event>>,
    task_id: String,
    channels: TaskChannels,
}

impl Subscription {
    pub async fn recv(&mut self) -> Result<Arc<Event>, broadcast::error::RecvError> {
        self.rx.recv().await
    }

    pub fn try_recv(&mut self) -> Result<Arc<Event>, broadcast::error::TryRecvError> {
        self.rx.try_recv()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut tasks = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        // This receiver is still alive here: 1 means it is the last one.
        if tasks
            .get(&self.task_id)
            .is_some_and(|tx| tx.receiver_count() <= 1)
        {
            tasks.remove(&self.task_id);
        }
    }
}

impl Bus {
    /// Events of one task, from now on.
    pub fn subscribe_task(&self, task_id: &str) -> Subscription {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let rx = tasks
            .entry(task_id.to_owned())
            .or_insert_with(|| broadcast::channel(TASK_CHANNEL_CAPACITY).0)
            .subscribe();
        Subscription {
            rx,
            task_id: task_id.to_owned(),
            channels: self.tasks.clone(),
        }
    }

    /// Number of tasks with live subscribers (for tests and diagnostics).
    pub fn watched_tasks(&self) -> usize {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Events of every task, from now on.
    pub fn subscribe_all(&self) -> broadcast::Receiver<Arc<Event>> {
        self.all.subscribe()
    }

    /// Publishes an event to the task's subscribers and to everyone.
    pub fn publish(&self, ev: impl Into<Arc<Event>>) {
        let ev = ev.into();
        let _ = self.all.send(ev.clone());
        let tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = tasks.get(&ev.task_id) {
            let _ = tx.send(ev.clone());
        }
    }
}
