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

/// Fan-out of events, per task and to everyone.
pub struct Bus {
    tasks: Mutex<HashMap<String, broadcast::Sender<Arc<Event>>>>,
    all: broadcast::Sender<Arc<Event>>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus {
            tasks: Mutex::new(HashMap::new()),
            all: broadcast::channel(ALL_CHANNEL_CAPACITY).0,
        }
    }
}

impl Bus {
    /// Events of one task, from now on.
    pub fn subscribe_task(&self, task_id: &str) -> broadcast::Receiver<Arc<Event>> {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks
            .entry(task_id.to_owned())
            .or_insert_with(|| broadcast::channel(TASK_CHANNEL_CAPACITY).0)
            .subscribe()
    }

    /// Events of every task, from now on.
    pub fn subscribe_all(&self) -> broadcast::Receiver<Arc<Event>> {
        self.all.subscribe()
    }

    /// Publishes an event to the task's subscribers and to everyone.
    pub fn publish(&self, ev: Event) {
        let ev = Arc::new(ev);
        let _ = self.all.send(ev.clone());
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = tasks.get(&ev.task_id) {
            let delivered = tx.send(ev.clone()).is_ok();
            if !delivered || ev.state.is_terminal() {
                tasks.remove(&ev.task_id);
            }
        }
    }
}
