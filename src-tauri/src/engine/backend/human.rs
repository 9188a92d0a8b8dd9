//! The `human` backend: every new task waits for the person.

use super::{Backend, Plan, Step};
use crate::a2a::types::{Message, Part, TaskState};

/// Parks each new task in `input-required` at once; follow-ups from the
/// caller are kept in the task's history and the task stays parked.
pub struct Human {
    park_message: String,
}

impl Human {
    pub fn new(park_message: Option<String>) -> Human {
        Human {
            park_message: park_message
                .unwrap_or_else(|| "Waiting for a person to review this request.".into()),
        }
    }
}

impl Backend for Human {
    fn plan(&self, _message: &Message, continuing: bool) -> Plan {
        if continuing {
            return Plan::Run(Vec::new());
        }
        Plan::Run(vec![Step::Status(
            TaskState::InputRequired,
            Some(Message::agent(vec![Part::text(self.park_message.clone())])),
        )])
    }
}
